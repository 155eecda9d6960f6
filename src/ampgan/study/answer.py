"""A study's answer as data: what `ampgan.compare` returns and `ampgan compare --json` prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ampgan.bench.output import load_results, speedup_estimate, unmeasured
from ampgan.files.paths import file_in
from ampgan.precisions import FP32
from ampgan.study.document import RACED, CompareDocument


@dataclass(frozen=True)
class Study:
    """What a study found. `document` is compare.json as written; the fields are its answer."""

    out_dir: Path
    outcome: str  # "raced": fp32 against the mixed modes; "no faster mode": no mode was faster, none raced
    verdict: list[str]
    precisions: list[str]
    headline: str  # the quality metric raced on: "evaluator_accuracy" (conditional) or "frechet_distance"
    speedup: dict[str, dict] = field(default_factory=dict)  # precision -> bench speedup at the batch, or its reason
    final: dict[str, dict] = field(default_factory=dict)  # precision -> final quality (means over seeds)
    report: Path | None = None
    cost: dict = field(default_factory=dict)  # the target and, per precision, the time and cost to reach it
    document: dict = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict:
        """Everything but the document, as JSON-ready data (`ampgan compare --json`)."""
        return {
            "out_dir": str(self.out_dir),
            "outcome": self.outcome,
            "verdict": self.verdict,
            "precisions": self.precisions,
            "headline": self.headline,
            "speedup": self.speedup,
            "final": self.final,
            "cost": self.cost,
            "report": str(self.report) if self.report else None,
        }


def study_of(document: CompareDocument, out_dir: Path, report: Path | None = None) -> Study:
    """A Study from a compare.json document."""
    runs = document.runs
    speedup = {}
    bench = file_in(out_dir, "bench", "results.json")
    if runs and bench.is_file():
        batch, results = document.spec.batch_size, load_results(bench)
        speedup = {
            pair["precision"]: pair | {"estimate": speedup_estimate(pair)}
            for pair in results["speedups"]
            if pair["batch_size"] == batch and pair["precision"] in runs
        }
        # A raced precision the bench could not time at the study's batch (too slow, failed) still has an entry,
        # saying why, so that `study.speedup[p]` answers for every precision raced against the baseline.
        why = unmeasured(results["configs"])
        for precision in runs:
            if precision != FP32 and precision not in speedup:
                reason = why.get((precision, batch)) or (
                    f"the {FP32} baseline: {why[FP32, batch]}"
                    if (FP32, batch) in why
                    else f"not measured by the bench at batch {batch}"
                )
                speedup[precision] = {"precision": precision, "batch_size": batch, "estimate": None, "reason": reason}
    cost = document.cost
    return Study(
        out_dir=Path(out_dir),
        outcome=document.outcome or RACED,
        verdict=list(document.verdict or []),
        cost=(
            {
                "target": cost.target,
                "to_target": {
                    p: {
                        k: getattr(entry, k) if entry is not None else None
                        for k in ("reached", "seeds", "seconds", "cost")
                    }
                    for p, entry in cost.to_target.items()
                },
                "currency": cost.currency,
            }
            if cost is not None
            else {}
        ),
        precisions=list(runs) or [FP32],
        headline=document.headline.key,
        speedup=speedup,
        final={p: {k: v for k, v in run.final.items() if k != "flags"} for p, run in runs.items()},
        report=report,
        document=document.to_dict(),
    )
