"""Records read back from their own types (files/records.py): every committed bench result, a study's plan as
study.json keeps it, a cached decision; a damaged field is one line naming it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ampgan.bench.output import load_results, table
from ampgan.errors import AmpganError
from ampgan.files.records import from_json, shape_of, to_json
from ampgan.speed.compilation import CompileDecision
from ampgan.speed.decision import Decision
from ampgan.speed.layout import LayoutDecision
from ampgan.speed.plan import RunPlan
from ampgan.study.progress import StudyProgress, load_progress

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "benchmarks" / "results").rglob("results.json"))


def _bench_documents() -> list[Path]:
    return [path for path in COMMITTED if json.loads(path.read_text()).get("format") == "ampgan-bench/1"]


@pytest.mark.parametrize("path", _bench_documents(), ids=lambda p: str(p.relative_to(ROOT / "benchmarks" / "results")))
def test_every_committed_bench_result_still_reads_and_renders(path):
    results = load_results(path)
    lines = table(results).splitlines()
    assert len(lines) >= 1 + len(results["configs"])  # the header, a row per configuration, the notes
    assert all(
        line.split()[:2] == [str(c["batch_size"]), c["precision"]] for line, c in zip(lines[1:], results["configs"])
    )


def test_a_committed_result_with_a_damaged_configuration_is_one_line(tmp_path):
    document = json.loads(_bench_documents()[0].read_text())
    for damage, named in (
        (("stats", {"median_s": "slow"}), "configs[0].stats"),
        (("samples_s", [0.1, True]), "configs[0].samples_s[1]"),
        (("status", None), "configs[0].status"),
        (("flops_by_kind", {"matmul": 1.5}), "configs[0].flops_by_kind.matmul"),
    ):
        damaged = json.loads(json.dumps(document))
        damaged["configs"][0][damage[0]] = damage[1]
        path = tmp_path / "results.json"
        path.write_text(json.dumps(damaged))
        with pytest.raises(AmpganError) as error:
            load_results(path)
        assert named in str(error.value) and "\n" not in str(error.value)


def test_a_result_whose_stats_hold_only_the_median_and_quartiles_still_reads(tmp_path):
    """Files written by hand or by other tools may give only what the readers need of a configuration's timings
    (median and quartiles): they load and render, a missing IQR shown as 0."""
    document = json.loads(_bench_documents()[0].read_text())
    stats = document["configs"][0]["stats"]
    document["configs"][0]["stats"] = {key: stats[key] for key in ("median_s", "q1_s", "q3_s")}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    results = load_results(path)
    assert results["configs"][0]["stats"] == {key: stats[key] for key in ("median_s", "q1_s", "q3_s")}
    assert table(results).splitlines()[1].split()[:4] == [
        str(results["configs"][0]["batch_size"]),
        results["configs"][0]["precision"],
        f"{stats['median_s'] * 1e3:.2f}",
        "0.00",
    ]


@pytest.mark.parametrize(
    ("pair", "cell"),
    [
        ({"estimate": 1.8423, "low": 1.79, "high": 1.904, "rounds": 14}, "1.84x [1.79-1.90]"),
        ({"median": 1.5, "rounds": 3}, "1.50x"),  # results written before intervals: the medians' ratio alone
        # two rounds under load: a band that decides nothing and spans 9500x is no answer, said so
        ({"estimate": 1.0, "low": 0.01, "high": 95.0, "rounds": 2, "settled": False}, "unsettled"),
        ({"estimate": 0.42, "low": 0.26, "high": 0.70, "rounds": 13, "settled": False}, "0.42x [0.26-0.70]"),  # slower
    ],
)
def test_the_tables_speedup_cell_shows_the_interval_when_the_result_has_one(pair, cell):
    document = json.loads(_bench_documents()[0].read_text())
    config = next(c for c in document["configs"] if c.get("stats") and c["precision"] != "fp32")
    document["configs"] = [config]
    document["speedups"] = [{"batch_size": config["batch_size"], "precision": config["precision"]} | pair]
    row = table(document).splitlines()[1]
    assert f" {cell}  " in row or row.endswith(f" {cell}")
    assert ("more time measuring, or fewer other processes running, would settle it" in row) == (cell == "unsettled")


@dataclass(frozen=True)
class Inner:
    name: str
    share: float | None = None


@dataclass(frozen=True)
class Outer:
    count: int
    names: tuple[str, ...] = ()
    inner: Inner | None = None
    table: dict[str, int] = field(default_factory=dict)
    items: list[Inner] = field(default_factory=list)


def test_a_record_round_trips_and_its_fields_types_are_its_shape():
    record = Outer(3, ("a", "b"), Inner("x", 0.5), {"k": 1}, [Inner("y")])
    assert from_json(Outer, json.loads(json.dumps(to_json(record))), "f.json", "fix") == record
    # a default may be left out; keys a record does not have are left aside; an int is taken for a float
    assert from_json(Outer, {"count": 1, "later": True, "inner": {"name": "z", "share": 1}}, "f", "x") == Outer(
        1, inner=Inner("z", 1)
    )
    assert shape_of(Outer)["count"] is int and "?names" in shape_of(Outer)


@pytest.mark.parametrize(
    "document, named",
    [
        ({"names": []}, "count is missing"),
        ({"count": True}, "count should be int"),
        ({"count": 1.5}, "count should be int"),
        ({"count": 1, "names": "ab"}, "names should be a list"),
        ({"count": 1, "inner": {"share": 0.1}}, "inner.name is missing"),
        ({"count": 1, "inner": {"name": "a", "share": math.inf}}, "inner.share should be"),
        ({"count": 1, "table": {"k": "1"}}, "table.k should be int"),
        ({"count": 1, "items": [{"name": 2}]}, "items[0].name should be str"),
    ],
)
def test_a_record_that_does_not_have_its_types_is_one_line_naming_the_field(document, named):
    with pytest.raises(AmpganError) as error:
        from_json(Outer, document, "f.json", "write it again")
    assert named in str(error.value) and str(error.value).endswith(": write it again")


# study.json's `decided` as the code before the plan was a record wrote it, and as an earlier one did (no threads)
DECIDED = {
    "precisions": ["fp32", "bf16"],
    "left_out": [{"precision": "fp16", "reason": "slower"}],
    "decisions": {"bf16": {"verdict": "faster", "description": "bf16: faster"}},
    "channels_last": ["bf16"],
    "compile": [],
    "layouts": {"bf16": {"channels_last": True, "description": "bf16 at batch 8: channels-last"}},
    "compile_decisions": {},
    "threads": {"threads": 2, "why": "measured"},
}


@pytest.mark.parametrize("decided", [DECIDED, {k: v for k, v in DECIDED.items() if k != "threads"}, None])
def test_a_study_reads_back_the_plan_it_kept(tmp_path, decided):
    StudyProgress(tmp_path, "id", {"batch_size": 8}).save()
    path = tmp_path / "study.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"decided": decided}))
    plan = load_progress(tmp_path).decided
    if decided is None:
        assert plan is None
        return
    assert isinstance(plan, RunPlan)
    assert plan.precisions == ("fp32", "bf16") and plan.channels_last == ("bf16",) and plan.compile == ()
    assert plan.decisions == decided["decisions"] and plan.threads == decided.get("threads")
    progress = load_progress(tmp_path)
    progress.save()  # written again as it was read: nothing lost
    assert json.loads(path.read_text())["decided"] == decided | {"threads": decided.get("threads")}


def test_a_damaged_plan_in_study_json_is_one_line(tmp_path):
    StudyProgress(tmp_path, "id", {}).save()
    path = tmp_path / "study.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"decided": DECIDED | {"precisions": "fp32"}}))
    with pytest.raises(AmpganError) as error:
        load_progress(tmp_path)
    assert "decided" in str(error.value) and "precisions should be a list" in str(error.value)


@pytest.mark.parametrize("kind", [Decision, LayoutDecision, CompileDecision])
def test_a_cached_decision_with_a_field_of_another_type_is_measured_again(kind):
    stored = to_json(kind(**{name: None for name in kind.__dataclass_fields__} | _filled(kind)))
    assert kind.from_cache(stored) is not None and kind.from_cache(stored).cached
    for name, wrong in (("batch_size", "8"), ("rounds", True), ("verdict", None), ("interval", {"estimate": "1"})):
        assert kind.from_cache(stored | {name: wrong}) is None, name
    # an edited entry's value out of range, or a name nobody registered, is measured again, not shown as a row
    interval = stored["interval"]
    for name, wrong in (("precision", "fp12"), ("batch_size", 0), ("interval", interval | {"low": -1.1})):
        assert kind.from_cache(stored | {name: wrong}) is None, name
    assert kind.from_cache({k: v for k, v in stored.items() if k != "precision"}) is None


def _filled(kind) -> dict:
    values = {"precision": "bf16", "batch_size": 8, "verdict": "faster", "rounds": 4, "note": "", "measured_on": ""}
    values["interval"] = {"estimate": 1.2, "low": 1.1, "high": 1.3, "rounds": 4}
    return values | {"cached": False}


def test_a_figure_point_s_label_never_reads_unsettled_with_a_question_mark():
    """'?' marks a band shown wider than +-5%; a band that is no answer reads 'unsettled' (it read 'unsettled?')."""
    from ampgan.bench.output import point_label

    assert point_label({"estimate": 1.84, "low": 1.79, "high": 1.90, "settled": True}) == "1.84x [1.79-1.90]"
    assert point_label({"estimate": 1.5, "low": 1.2, "high": 1.9, "settled": False}) == "1.50x [1.20-1.90]?"
    assert point_label({"estimate": 1.0, "low": 0.01, "high": 95.0, "settled": False}) == "unsettled"


def test_a_speedup_cut_short_by_its_time_says_so_without_the_word_for_no_answer():
    """'unsettled' alone means an interval that answers nothing (wider than 2x); a usable interval whose rounds
    ran out of time before +-5% says that, in other words."""
    from ampgan.bench.output import speedup_text

    cut = {"estimate": 1.64, "low": 1.48, "high": 1.81, "rounds": 47, "settled": False}
    assert speedup_text(cut) == "1.64x (95% CI 1.48-1.81, 47 rounds, not settled to +-5%)"
    assert speedup_text({**cut, "settled": True}) == "1.64x (95% CI 1.48-1.81, 47 rounds)"
    assert "unsettled" in speedup_text({**cut, "low": 0.5, "high": 3.0})


def test_a_maps_cell_says_why_it_has_no_speedup_in_two_short_lines():
    from ampgan.bench.sweep import _map_cell_text

    assert _map_cell_text({"status": "too_slow"})[0] == "too slow\nhere"
    assert _map_cell_text({"status": "out_of_time"})[0] == "out of\ntime"
    assert _map_cell_text({"status": "oom"})[0] == "out of\nmemory"
    assert _map_cell_text({"status": "error"})[0] == "failed"
    assert _map_cell_text({})[0] == "no speedup\nmeasured"
