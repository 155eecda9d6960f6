"""compare.json as typed records (study/document.py): read by attribute, written back unchanged, and a
damaged one refused in one line."""

import copy
import json

import pytest

from ampgan.errors import AmpganError
from ampgan.files.records import shape_of
from ampgan.study.document import FORMAT, CompareDocument, load_compare
from ampgan.study.report import figure_4_title

_FINAL = {"evaluator_accuracy": 0.8, "frechet_distance": 3.5, "recall": 0.6, "flags": []}
_SEED_RUN = {
    "run_dir": "runs/fp32-seed0",
    "steps": 40,
    "train_seconds": 10.0,
    "seconds_per_step": 0.25,
    "final": _FINAL,
    "eval_seconds_total": 1.0,
    "stamp": {"torch": "2.13.0"},
}
RACED = {
    "format": FORMAT,
    "spec": {
        "batch_size": 8,
        "seed": 0,
        "seed_list": [0],
        "precisions": ["fp32", "bf16"],
        "eval_samples": 20,
        "eval_points": 2,
        "model": "acgan",
        "time_budget_s": None,
        "steps": 40,
        "target_accuracy": None,
        "price_per_hour": None,
        "instance": None,
        "config": {"seed": 0},  # kept as written, though no reader uses it
    },
    "environment": {
        "hardware_summary": "AMD EPYC, 2 cores",
        "versions": {"torch": "2.13.0", "ampgan": "0.2", "python": "3.11"},
        "date": "2026-12-02",
        "git_commit": None,
    },
    "left_out": [],
    "layouts": {},
    "compile_decisions": {},
    "dataset": {"name": "synthetic", "images": 100, "class_names": ["a", "b"], "source": {}},
    "evaluator": {"held_out_accuracy": 0.9},
    "floor": {"evaluator_accuracy": 0.9},
    "bench_notes": {},
    "headline": {"metric": "evaluator_accuracy", "name": "evaluator accuracy", "higher_is_better": True},
    "runs": {
        name: {
            **_SEED_RUN,
            "run_dir": f"runs/{name}-seed0",
            "seeds": [0],
            "per_seed": {"0": {**_SEED_RUN, "run_dir": f"runs/{name}-seed0"}},
            "final_interval": {"evaluator_accuracy": {"mean": 0.8, "low": None, "high": None, "n": 1}},
        }
        for name in ("fp32", "bf16")
    },
    "cost": {
        "basis": {"price_per_hour": 1.0, "currency": "USD"},
        "target": 0.7,
        "target_metric": "evaluator_accuracy",
        "target_accuracy": 0.7,
        "to_target": {
            "fp32": {"per_seed": {"0": None}, "reached": 0, "seeds": 1, "by_first_evaluation": 0, "seconds": None},
            "bf16": None,
        },
        "budget": {"fp32": 0.01, "bf16": 0.01},
        "table": [],
        "catalog_date": "2026-11-01",
    },
    "projection": {"note": "not projected: no op table"},
    "seed_comparison": {"bf16": {"seeds": 1}},
    "verdict": ["a sentence"],
}


def test_a_study_document_reads_by_attribute_and_writes_back_as_it_was():
    document = CompareDocument.from_dict(copy.deepcopy(RACED))
    assert document.raced and document.spec.seeds == [0] and document.spec.model_name == "acgan"
    assert document.baseline.first.run_dir == "runs/fp32-seed0" and document.runs["bf16"].seed_runs[0].steps == 40
    assert document.headline.higher_is_better and document.target == 0.7
    assert document.cost.reaching("fp32").reached == 0 and document.cost.reaching("bf16").reached == 0
    assert document.cost.currency == "USD" and document.environment.hardware == "AMD EPYC"
    assert document.to_dict() == RACED
    assert json.loads(json.dumps(document.to_dict())) == RACED


def test_a_document_from_before_several_seeds_and_unconditional_gans_still_reads():
    old = copy.deepcopy(RACED)
    del old["headline"], old["spec"]["seed_list"]
    for run in old["runs"].values():
        del run["seeds"], run["per_seed"], run["final_interval"]
    del old["cost"]["target"]
    document = CompareDocument.from_dict(old)
    assert document.headline.key == "evaluator_accuracy" and document.spec.seeds == [0]
    assert document.target == 0.7  # named target_accuracy then
    assert document.baseline.first is document.baseline and document.baseline.interval("evaluator_accuracy") is None


def test_a_cost_stage_that_could_not_run_is_its_note_alone():
    failed = {"basis": None, "note": "the cost stage could not run: no catalog"}
    document = CompareDocument.from_dict(copy.deepcopy(RACED) | {"cost": failed})
    assert document.cost.basis is None and document.target is None and document.cost.reaching("fp32").reached == 0
    assert document.to_dict()["cost"] == failed


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["runs"]["fp32"].update(steps="four"),
        lambda d: d.pop("environment"),
        lambda d: d["cost"]["to_target"]["fp32"].update(seconds="soon"),
        lambda d: d.update(format="ampgan-compare/99"),
        lambda d: d["runs"]["bf16"]["final_interval"].update(evaluator_accuracy=0.9),
        lambda d: d.update(seed_comparison={"bf16": {"seeds": 1, "time_to_target_ratio": "soon"}}),
        lambda d: d.update(decisions={"bf16": {"verdict": "slower", "interval": [0.5]}}),
        lambda d: d.update(layouts={"bf16": "channels-last"}),
    ],
)
def test_a_damaged_or_foreign_document_is_one_error_naming_the_file(tmp_path, damage):
    data = copy.deepcopy(RACED)
    damage(data)
    (tmp_path / "compare.json").write_text(json.dumps(data))
    with pytest.raises(AmpganError) as error:
        load_compare(tmp_path)
    assert "compare.json" in str(error.value) and "\n" not in str(error.value)


def test_a_document_read_then_given_a_field_writes_it():
    old = {k: v for k, v in copy.deepcopy(RACED).items() if k != "verdict"}
    document = CompareDocument.from_dict(old).with_fields(verdict=["new"])
    assert document.to_dict()["verdict"] == ["new"] and list(document.to_dict())[:3] == list(old)[:3]


def test_the_decisions_and_the_seed_comparison_read_by_attribute_and_write_back_as_they_were():
    paired = {"mean": 0.05, "low": 0.01, "high": 0.09, "n": 3, "per_seed": {"0": 0.04}, "beyond_seed_spread": True}
    data = copy.deepcopy(RACED) | {
        "layouts": {"bf16": {"description": "channels_last 1.10x faster", "rounds": 12}},
        "seed_comparison": {
            "bf16": {"seeds": 3, "evaluator_accuracy": paired, "time_to_target_ratio": dict(paired, mean=1.4)}
        },
    }
    no_faster = copy.deepcopy(RACED) | {
        "outcome": "no faster mode",
        "runs": {},
        "decisions": {
            "bf16": {
                "verdict": "slower",
                "step_s": 0.6,
                "fp32_step_s": 0.3,
                "interval": {"estimate": 0.5, "low": 0.45, "high": 0.55},
                "rounds": 9,
            }
        },
    }
    document, slower = CompareDocument.from_dict(data), CompareDocument.from_dict(no_faster)
    assert document.layouts["bf16"].description == "channels_last 1.10x faster"
    compared = document.seed_comparison["bf16"]
    assert compared.differences["evaluator_accuracy"].high == 0.09 and "kid" not in compared.differences
    assert compared.time_to_target_ratio.mean == 1.4 and compared.time_to_target_ratio.beyond_seed_spread
    decision = slower.decisions["bf16"]
    assert (decision.interval.low, decision.rounds, decision.note) == (0.45, 9, None)
    assert json.dumps(document.to_dict()) == json.dumps(data)  # same keys, same order, nothing added
    assert json.dumps(slower.to_dict()) == json.dumps(no_faster)


@pytest.mark.parametrize(
    "damage",
    [
        # Fields the records declare and no hand-written shape checked: their types now are the check.
        lambda d: d["spec"].update(steps="forty"),
        lambda d: d["spec"].update(channels_last="bf16"),
        lambda d: d["environment"].update(git_commit=7),
        lambda d: d["runs"]["bf16"].update(seconds_per_step="fast"),
        lambda d: d["runs"]["fp32"]["per_seed"]["0"].pop("train_seconds"),
        lambda d: d["runs"]["fp32"]["final_interval"]["evaluator_accuracy"].update(beyond_seed_spread="yes"),
        lambda d: d["cost"].update(catalog_date=20261101),
        lambda d: d["cost"]["to_target"]["fp32"].update(by_first_evaluation=None),
        lambda d: d.update(
            race={"clock": "wall clock", "pace": {"bf16": {"0": {"wall_speedup": 1.0, "bench_low": "x"}}}}
        ),
        lambda d: d.update(decisions={"bf16": {"verdict": "slower", "rounds": 2.5}}),
    ],
)
def test_every_field_a_record_declares_is_checked_by_its_type(damage):
    data = copy.deepcopy(RACED)
    damage(data)
    with pytest.raises(AmpganError, match="is damaged or foreign"):
        CompareDocument.checked(data, "compare.json", "run it again")


def test_the_check_comes_from_the_records_and_passes_every_committed_study():
    from pathlib import Path

    shape = shape_of(CompareDocument)
    assert {"format", "spec", "environment", "dataset", "runs"} <= set(shape) and "?race" in shape
    committed = sorted((Path(__file__).parent.parent / "benchmarks" / "results").rglob("compare.json"))
    for path in committed:
        data = json.loads(path.read_text())
        assert CompareDocument.checked(copy.deepcopy(data), str(path), "fix").to_dict() == data


def test_the_studys_figures_say_their_data_and_model_beside_hardware_batch_and_versions():
    """Figures 4-7 named the hardware, batch and versions, not the model or the data they show."""
    from ampgan.study.report import figure_footer

    data = copy.deepcopy(RACED)
    data["spec"]["model_options"] = {"width": 8, "z_dim": 16}
    document = CompareDocument.from_dict(data)
    footer = figure_footer(document)
    assert f" | {document.dataset.name}, model acgan (width 8, z_dim 16) | batch 8, fp32 NCHW, bf16 NCHW | " in footer
    assert footer.startswith(document.environment.hardware_summary) and "torch 2.13" in footer and "ampgan " in footer


@pytest.mark.parametrize(
    ("budget", "title"),
    [
        ({"time_budget_s": 40.0, "steps": None}, "Figure 4: samples after the same training time"),
        # a race on steps: each precision trained for its own time (the report said 'the same training time')
        ({"time_budget_s": None, "steps": 40}, "Figure 4: samples after the same number of steps"),
    ],
)
def test_figure_4_is_titled_by_what_the_race_held_equal(budget, title):
    data = copy.deepcopy(RACED)
    data["spec"] |= budget
    assert figure_4_title(CompareDocument.from_dict(data)) == title
