"""A bench measured into its folder, as `ampgan bench` and `ampgan.bench` make it: the spec checked before
anything runs, the folder claimed, results.json written; and the key numbers of a bench as plain data."""

from __future__ import annotations

from pathlib import Path

import torch

from ampgan.bench.harness import BenchSpec, run_bench
from ampgan.bench.output import write_results
from ampgan.precisions import FP32
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
        from ampgan.speed.decision import warn_about_named_modes

        warn_about_named_modes(spec.train_config(FP32, spec.batch_sizes[0]), device, list(spec.precisions))


def bench_to_folder(spec: BenchSpec, out: Path, overwrite: bool, device: torch.device, on_config, log) -> dict | None:
    """The bench's results, written to out/results.json (None on ranks other than 0, which write nothing)."""
    with claimed_on_main_rank(out, overwrite, device, "bench", data=spec.base.data.folders_read):
        results = run_bench(spec, device, on_config=on_config, log=log)
        if not world().is_main:
            return None
        write_results(results, out)
    return results


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
