"""`ampgan.compare(...)`'s answer (study/answer.py) read from a real study folder: every raced precision has a
speedup entry, with the bench's interval where it timed the step and the bench's reason where it could not."""

import json
import shutil
from pathlib import Path

import pytest

from ampgan.study.answer import study_of
from ampgan.study.document import load_compare

STUDY = Path(__file__).parent.parent / "benchmarks" / "results" / "compare-digits-7m-3seeds-intel-amx-2026-11-30"


@pytest.fixture
def study_dir(tmp_path):
    if not (STUDY / "compare.json").is_file():
        pytest.skip("the committed study folder is missing")
    out = tmp_path / "study"
    shutil.copytree(STUDY, out)
    return out


def test_a_measured_precision_carries_the_bench_interval(study_dir):
    study = study_of(load_compare(study_dir), study_dir)
    mixed = [p for p in study.precisions if p != "fp32"]
    assert mixed, "the committed study raced a mixed mode"
    for precision in mixed:
        entry = study.speedup[precision]
        assert entry["low"] <= entry["estimate"] <= entry["high"]
        assert "reason" not in entry


def _bench_row_unfinished(study_dir, which: str, status: str, reason: str) -> tuple[int, str]:
    """The study's bench results with the mixed mode's speedup at the study's batch removed and one row at that
    batch (`which`: "fp32" or "mixed") marked unfinished; returns (batch, the mixed mode)."""
    results_file = study_dir / "bench" / "results.json"
    results = json.loads(results_file.read_text())
    batch = load_compare(study_dir).spec.batch_size
    mixed = next(p for p in load_compare(study_dir).runs if p != "fp32")
    unfinished = mixed if which == "mixed" else "fp32"
    results["speedups"] = [s for s in results["speedups"] if not (s["precision"] == mixed and s["batch_size"] == batch)]
    for config in results["configs"]:
        if config["precision"] == unfinished and config["batch_size"] == batch:
            config.update(status=status, reason=reason)
    results_file.write_text(json.dumps(results))
    return batch, mixed


@pytest.mark.parametrize(
    "status, reason", [("too_slow", "one step took 9.2 s"), ("failed", "the step raised RuntimeError: out of memory")]
)
def test_a_precision_the_bench_could_not_time_says_why_instead_of_a_key_error(study_dir, status, reason):
    batch, mixed = _bench_row_unfinished(study_dir, "mixed", status, reason)
    study = study_of(load_compare(study_dir), study_dir)
    entry = study.speedup[mixed]
    assert entry["estimate"] is None and entry["batch_size"] == batch
    assert entry["reason"] == reason
    assert json.loads(json.dumps(study.to_dict()))["speedup"][mixed]["reason"] == entry["reason"]


def test_a_baseline_the_bench_could_not_time_is_named_as_the_reason(study_dir):
    """When fp32 (not the mixed mode) failed at the study's batch, the mixed mode's entry says it was the baseline;
    a finished configuration's status ("ok") is never given as a reason."""
    _, mixed = _bench_row_unfinished(study_dir, "fp32", "too_slow", "one step took 9.2 s")
    assert (
        study_of(load_compare(study_dir), study_dir).speedup[mixed]["reason"]
        == "the fp32 baseline: one step took 9.2 s"
    )
