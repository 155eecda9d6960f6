"""A bench measured into its folder, as `ampgan bench` and `ampgan.bench` make it: the spec checked before
anything runs, the folder claimed, results.json written; and the key numbers of a bench as plain data."""

from __future__ import annotations

from pathlib import Path

import torch

from ampgan.bench.harness import run_bench
from ampgan.bench.output import write_results
from ampgan.bench.spec import BenchSpec
from ampgan.errors import AmpganError
from ampgan.precisions import FP32
from ampgan.speed.decision import warn_about_named_modes
from ampgan.training.distributed import world
from ampgan.training.precision import build_policy
from ampgan.training.start import claimed_on_main_rank


def check_bench(spec: BenchSpec, device: torch.device) -> None:
    """Refuse what cannot run before anything is measured (tf32 on a CPU, a batch size the model refuses),
    and warn about a named mode that is slower than fp32 here."""
    for precision in spec.precisions:
        build_policy(precision, device)
    spec.train_config(spec.precisions[0] if spec.precisions else FP32, spec.batch_sizes[0])  # validates sizes
    if spec.precisions and world().is_main:
        warn_about_named_modes(spec.train_config(FP32, spec.batch_sizes[0]), device, list(spec.precisions))


def bench_to_folder(spec: BenchSpec, out: Path, overwrite: bool, device: torch.device, on_config, log) -> dict | None:
    """The bench's results, written to out/results.json (None on ranks other than 0, which write nothing)."""
    with claimed_on_main_rank(out, overwrite, device, "bench", data=spec.base.data.folders_read):
        results = run_bench(spec, device, on_config=on_config, log=log)
        if not world().is_main:
            return None
        write_results(results, out)
    if not results.get("incomplete"):  # an interrupted bench exits as its signal asks
        refuse_what_measured_nothing(results["configs"], f"its results are in {out / 'results.json'}")
    return results


def measured_nothing(configs: list[dict]) -> str | None:
    """Why a bench is a failure, or None: no configuration measured and at least one failed (`error`: a
    broken step or harness; --compile's warm-up once failed on every configuration and the command exited
    0). A bench whose rows are only too_slow, out_of_time or oom answers about this machine (give it more time,
    smaller batches), and a study trains on without them (study/race.py): that alone is not a failure. Each row:
    status, reason, and `label` (else precision@batch_size) naming it in the line."""
    statuses = {c.get("status") for c in configs}
    if "ok" in statuses or "error" not in statuses:  # (no configuration at all: nothing failed either)
        return None
    shown = "; ".join(
        f"{c.get('label') or str(c['precision']) + '@' + str(c['batch_size'])}: {c['status']}"
        + (f" ({c['reason']})" if c.get("reason") else "")
        for c in configs[:3]
    )
    more = f"; {len(configs) - 3} more" if len(configs) > 3 else ""
    return f"the bench measured no configuration ({shown}{more})"


def refuse_what_measured_nothing(configs: list[dict], where: str) -> None:
    """One error line (exit 2) for a bench that measured nothing because it failed (measured_nothing),
    raised after its results were written: `where` says where they are, for inspection."""
    failed = measured_nothing(configs)
    if failed is not None:
        raise AmpganError(f"{failed}: {where}")


def bench_summary(results: dict, out: Path) -> dict:
    """The key numbers of a bench as plain data (`ampgan bench --json`, `ampgan.bench`)."""
    return {
        "results": str(out / "results.json"),
        "device": results.get("environment", {}).get("hardware_summary"),
        "configs": [
            {
                "batch_size": c["batch_size"],
                "precision": c["precision"],
                "status": c["status"],
                "median_ms": c["stats"]["median_s"] * 1e3 if c.get("stats") else None,
                **({"reason": c["reason"]} if c.get("reason") else {}),
            }
            for c in results["configs"]
        ],
        "speedups": [
            {k: s.get(k) for k in ("batch_size", "precision", "baseline", "estimate", "low", "high", "verdict")}
            for s in results["speedups"]
        ],
    }
