import csv
import json

import pytest
from conftest import run_cli

from ampgan.bench.output import load_results, stamp_text
from ampgan.cost.arithmetic import (
    cheapest_per_sample,
    cost_of_batches,
    cost_of_samples,
    cost_of_seconds,
    cost_per_sample,
    cost_to_quality,
    saving,
    time_to_quality,
)
from ampgan.cost.catalog import REQUIRED_COLUMNS, find_instance, load_catalog
from ampgan.errors import AmpganError
from ampgan.files.atomic import write_json_atomically
from ampgan.runs.claim import FolderLock, _write_marker, claimed_folder


def test_the_studys_arithmetic():
    # 1M batches at 0.70 s (fp32) vs 0.41 s (mixed) on a T4 billed at 0.915/h.
    fp32 = cost_of_batches(0.70, 1e6, 0.915)
    mixed = cost_of_batches(0.41, 1e6, 0.915)
    assert fp32["hours"] == pytest.approx(194.444, abs=1e-3) and fp32["cost"] == pytest.approx(177.92, abs=0.01)
    assert mixed["hours"] == pytest.approx(113.889, abs=1e-3) and mixed["cost"] == pytest.approx(104.21, abs=0.01)
    found = saving(fp32["cost"], mixed["cost"])
    assert found["amount"] == pytest.approx(73.71, abs=0.01) and found["percent"] == pytest.approx(100 * 0.29 / 0.70)


def test_samples_budget_and_per_sample_costs():
    # 2048 samples per 0.5 s batch; 1,024,000 samples = 500 batches = 250 s.
    assert cost_of_samples(0.5, 2048, 1_024_000, 3.6) == pytest.approx({"hours": 250 / 3600, "cost": 0.25})
    assert cost_of_seconds(420, 0.526) == pytest.approx({"hours": 420 / 3600, "cost": 0.526 * 420 / 3600})
    assert cost_per_sample(1.0, 100, 3.6) == pytest.approx(1e-5)
    with pytest.raises(ValueError, match="positive"):
        cost_of_seconds(10, 0)


def test_cheapest_configuration_per_sample():
    rows = [
        {"batch_size": 64, "precision": "fp32", "seconds_per_batch": 0.10},  # 1.56 ms/sample
        {"batch_size": 2048, "precision": "fp32", "seconds_per_batch": 2.0},  # 0.98 ms/sample
        {"batch_size": 2048, "precision": "bf16", "seconds_per_batch": 1.2},
    ]  # 0.59 ms/sample
    best = cheapest_per_sample(rows, 1.0)
    assert (best["batch_size"], best["precision"]) == (2048, "bf16")
    assert best["cost_per_sample"] == pytest.approx(1.2 / 2048 / 3600)


def test_time_and_cost_to_reach_a_quality_target():
    curve = [(0, 0.1), (60, 0.3), (120, 0.7), (180, 0.9)]
    assert time_to_quality(curve, 0.5) == pytest.approx(90.0)  # halfway between 60 s and 120 s
    assert time_to_quality(curve, 0.95) is None
    assert time_to_quality([(0, 50.0), (10, 20.0)], 35.0, higher_is_better=False) == pytest.approx(5.0)
    assert cost_to_quality(curve, 0.7, 3.6) == pytest.approx({"seconds": 120, "hours": 120 / 3600, "cost": 0.12})
    assert cost_to_quality(curve, 0.99, 3.6) is None


def test_the_shipped_catalog_has_a_source_and_date_on_every_row():
    catalog = load_catalog()
    assert len(catalog) >= 20
    for item in catalog:
        assert item.source.startswith("https://") and len(item.date) >= 7 and item.price_per_hour > 0
    for gpu in ("T4", "P100", "V100", "L4", "A100-40GB", "A100-80GB", "H100", "H200"):
        providers = {i.provider for i in catalog if i.hardware == gpu}
        assert len(providers) >= 2, (gpu, providers)
    assert any(i.hardware == "Xeon" and "AMX" in i.note for i in catalog)


def test_instance_lookup_and_hardware_matching():
    catalog = load_catalog()
    t4 = find_instance(catalog, "g4dn.xlarge")
    assert t4.price_per_hour == 0.526 and t4.matches_hardware("Tesla T4")
    assert find_instance(catalog, "aws/p4d.24xlarge").matches_hardware("NVIDIA A100-SXM4-40GB")
    assert not find_instance(catalog, "aws/p4d.24xlarge").matches_hardware("NVIDIA A100-SXM4-80GB")
    with pytest.raises(AmpganError, match="close matches: g4dn.xlarge"):
        find_instance(catalog, "g4dn.xlarg")


@pytest.mark.parametrize(
    "text, message",
    [
        ("provider,instance\naws,x\n", "lacks the columns"),
        (",".join(REQUIRED_COLUMNS) + "\naws,us,x,T4,1,0.5,USD,,2025-01\n", "empty source"),
        (
            ",".join(REQUIRED_COLUMNS) + "\naws,us,x,T4,1,-2,USD,https://x,2025-01\n",
            "price_per_hour is -2; it must be from 0 to",
        ),
        (",".join(REQUIRED_COLUMNS) + "\naws,us,x,T4,1,0,USD,https://x,2025-01\n", "must be more than 0"),
        (
            ",".join(REQUIRED_COLUMNS) + "\naws,us,x,T4,one,0.5,USD,https://x,2025-01\n",
            "gpu_count is 'one', not a whole",
        ),
    ],
)
def test_user_catalogs_are_validated(tmp_path, text, message):
    path = tmp_path / "prices.csv"
    path.write_text(text)
    with pytest.raises(AmpganError, match=message):
        load_catalog(path)


def bench_results(device_name="Tesla T4", device_type="cuda"):
    """A small results document in bench's format: T4 times close to the study's."""

    def config(batch, precision, median):
        return {
            "batch_size": batch,
            "precision": precision,
            "status": "ok",
            "samples_s": [median] * 3,
            "stats": {"median_s": median, "q1_s": median, "q3_s": median, "iqr_s": 0.0, "min_s": median},
        }

    return {
        "format": "ampgan-bench/1",
        "spec": {"precisions": ["fp32", "fp16"], "dataset": "synthetic", "width": 64},
        "hardware": {"device_type": device_type, "name": device_name, "cpu_model": "Intel Xeon"},
        "environment": {"versions": {"torch": "2.5.0"}},
        "peaks": {},
        "left_out": [],
        "speedups": [],
        "configs": [
            config(64, "fp32", 0.03),
            config(64, "fp16", 0.028),
            config(2048, "fp32", 0.70),
            config(2048, "fp16", 0.41),
        ],
    }


def test_the_same_results_given_twice_are_costed_once(tmp_path, capsys, monkeypatch):
    """`a/results.json ./a/results.json` (or a glob that matched it again) is one file: one row per
    configuration, not two."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps(bench_results()))
    monkeypatch.chdir(tmp_path)
    given = ["a/results.json", "./a/results.json", str(tmp_path / "a" / "results.json")]
    code, _, err = run_cli(capsys, "cost", *given, "--instance", "g4dn.xlarge", "--out", str(tmp_path / "c"))
    assert code == 0, err
    rows = json.loads((tmp_path / "c" / "cost.json").read_text())["rows"]
    assert sorted((r["batch_size"], r["precision"]) for r in rows) == [
        (64, "fp16"),
        (64, "fp32"),
        (2048, "fp16"),
        (2048, "fp32"),
    ]


@pytest.mark.parametrize("cpu_model", [None, ["AMD"], 7])
def test_results_whose_cpu_is_not_a_name_are_one_line(tmp_path, capsys, cpu_model):
    """The CPU's model names the machine cost prices (its tokens are matched): anything but text there is a
    damaged results.json, one line, not an AttributeError."""
    document = bench_results("AMD EPYC", "cpu")
    document["hardware"]["cpu_model"] = cpu_model
    (tmp_path / "results.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "cost", str(tmp_path / "results.json"), "--instance", "aws/g6.xlarge")
    assert code == 2 and err.count("\n") == 1 and "(hardware.cpu_model should be str, got " in err, err


@pytest.mark.parametrize("per_sample", ["x", -1, {"fp32": "many"}])
def test_results_whose_step_memory_is_not_numbers_are_one_line_for_project(tmp_path, capsys, per_sample):
    document = bench_results()
    document["step_memory"] = {"parameters_bytes": 1000, "activation_bytes_per_sample": per_sample}
    (tmp_path / "results.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "project", str(tmp_path / "results.json"), "--out", str(tmp_path / "p"))
    assert code == 2 and err.count("\n") == 1 and "step_memory.activation_bytes_per_sample" in err, err


def test_results_without_step_memory_still_read(tmp_path):
    """A bench whose model could not be traced on the meta device writes step_memory as null: still its results."""
    document = bench_results()
    document["step_memory"] = None
    (tmp_path / "results.json").write_text(json.dumps(document))
    assert load_results(tmp_path / "results.json")["step_memory"] is None


def test_cost_cli_writes_table_files_and_figure(tmp_path, capsys):
    results = tmp_path / "results.json"
    interval = {"batch_size": 2048, "precision": "fp16", "baseline": "fp32", "estimate": 1.7, "low": 1.6, "high": 1.8}
    results.write_text(json.dumps({**bench_results(), "speedups": [interval]}))
    code, out, err = run_cli(capsys, "cost", str(results), "--instance", "g4dn.xlarge", "--out", str(tmp_path / "c"))
    assert code == 0, err
    document = json.loads((tmp_path / "c" / "cost.json").read_text())
    row = next(r for r in document["rows"] if r["batch_size"] == 2048 and r["precision"] == "fp16")
    assert row["cost"] == pytest.approx(0.41 * 1e6 / 3600 * 0.526)
    # the saving's point and its interval from one estimate, the bench's paired speedup (1 - 1/1.7)
    assert row["saving_percent"] == pytest.approx(100 * (1 - 1 / 1.7))
    assert row["saving_vs_fp32"] == pytest.approx(row["saving_percent"] / 100 * 0.70 * 1e6 / 3600 * 0.526)
    assert document["basis"]["projection"] is False and document["catalog_date"]
    assert (tmp_path / "c" / "cost.csv").read_text().startswith("batch_size,precision")
    assert (tmp_path / "c" / "fig3_cost.png").read_bytes()[:4] == b"\x89PNG"
    assert "saving vs fp32 [95% CI]" in out and "catalog: ampgan's built-in catalog" in out
    # measured: said so, with the bench's stamp (hardware, data, model, versions); no band, the CI as +-%
    assert f"measured on {stamp_text(bench_results())}" in out and "cost_low" not in row
    # the CSV's rows say it too (a CSV read alone), with their currency; a measured row has no band
    written = list(csv.DictReader((tmp_path / "c" / "cost.csv").open()))
    assert {r["times"] for r in written} == {f"measured on {stamp_text(bench_results())}"}
    assert {(r["currency"], r["cost_low"], r["hours_high"]) for r in written} == {("USD", "", "")}
    assert "(41% [+38% to +44%])" in out  # 1 - 1/1.6 and 1 - 1/1.8: "[38-44%]" read "-11-1%" as one number
    assert "(unverified price)" in out and "prices may be stale" in out  # g4dn.xlarge: a 2025-01 list price


def test_projection_onto_other_hardware_needs_consent_and_is_labelled(tmp_path, capsys):
    results = tmp_path / "results.json"
    results.write_text(
        json.dumps(
            bench_results("AMD EPYC", "cpu")
            | {"hardware": {"device_type": "cpu", "name": "AMD EPYC", "cpu_model": "AMD EPYC"}}
        )
    )
    code, _, err = run_cli(capsys, "cost", str(results), "--instance", "p4d.24xlarge")
    assert code == 2 and "add --assume-same-speed" in err and not (tmp_path / "cost.json").exists()
    code, out, _ = run_cli(
        capsys, "cost", str(results), "--instance", "p4d.24xlarge", "--assume-same-speed", "--samples", "1e6"
    )
    assert code == 0 and "PROJECTION" in out and "1/8 of the instance" in out
    document = json.loads((tmp_path / "cost.json").read_text())
    assert document["basis"]["projection"] is True and document["workload"] == {"samples": 1e6}


def test_cost_cli_errors(tmp_path, capsys):
    t4, cpu = tmp_path / "t4.json", tmp_path / "cpu.json"
    t4.write_text(json.dumps(bench_results()))
    cpu.write_text(
        json.dumps(
            bench_results("AMD EPYC", "cpu")
            | {"hardware": {"device_type": "cpu", "name": "AMD EPYC", "cpu_model": "AMD EPYC"}}
        )
    )
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "ampgan-bench/1", "configs"')
    for args, message in [
        ([str(t4), str(cpu), "--price-per-hour", "1"], "measured on different hardware"),
        ([str(broken), "--price-per-hour", "1"], "is not valid JSON"),
        ([str(tmp_path / "none.json"), "--price-per-hour", "1"], "no bench results at"),
        ([str(t4), "--price-per-hour", "0"], "--price-per-hour must be positive"),
        ([str(t4), "--price-per-hour", "-3"], "--price-per-hour must be positive"),
        ([str(t4), "--instance", "nope.large"], "unknown instance 'nope.large'"),
        ([str(t4)], "exactly one of --instance NAME or --price-per-hour X"),
        ([str(t4), "--price-per-hour", "1", "--batches", "lots"], "--batches takes a number"),
    ]:
        code, _, err = run_cli(capsys, "cost", *args)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)


@pytest.mark.parametrize("name", ["cost.json", "cost.csv", "fig3_cost.png"])
def test_cost_files_beside_results_are_rewritten_only_in_ampgans_own_folder(tmp_path, capsys, name):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(bench_results()))
    (tmp_path / name).write_text("someone else's")
    code, _, err = run_cli(capsys, "cost", str(results), "--price-per-hour", "1")
    assert code == 2 and f"holds {name}, which ampgan did not write" in err and err.count("\n") == 1
    assert (tmp_path / name).read_text() == "someone else's"
    # The same folder once ampgan claimed it (a valid marker): its cost files are ampgan's to rewrite.
    _write_marker(tmp_path, "bench")
    code, _, err = run_cli(capsys, "cost", str(results), "--price-per-hour", "1")
    assert code == 0, err
    assert json.loads((tmp_path / "cost.json").read_text())["basis"]["price_per_hour"] == 1


def test_cost_beside_a_study_s_bench_rewrites_its_own_files(tmp_path, capsys):
    """A study's bench/ has no marker of its own: the first `cost STUDY/bench` wrote its files there (recorded in
    the study's manifest), the second refused them as 'not a folder ampgan created'. Files ampgan's manifest
    proves are its own are rewritten; one changed since is still refused."""
    study = tmp_path / "study"
    with claimed_folder(study, overwrite=False, kind="study"):
        (study / "bench").mkdir()
        write_json_atomically(study / "bench" / "results.json", bench_results())
    for price in ("1", "2"):
        code, _, err = run_cli(capsys, "cost", str(study / "bench"), "--price-per-hour", price)
        assert code == 0, err
        assert json.loads((study / "bench" / "cost.json").read_text())["basis"]["price_per_hour"] == float(price)
    (study / "bench" / "cost.csv").write_text("edited")
    code, _, err = run_cli(capsys, "cost", str(study / "bench"), "--price-per-hour", "3")
    assert code == 2 and "holds cost.csv, which ampgan did not write (or which changed since)" in err
    assert (study / "bench" / "cost.csv").read_text() == "edited"
    # While another ampgan process holds the study (a compare --resume writing it), cost waits its turn.
    holder = FolderLock(study, mention_leftovers=False)
    try:
        code, _, err = run_cli(capsys, "cost", str(study / "bench"), "--price-per-hour", "4")
    finally:
        holder.release()
    assert code == 2 and "is in use by another ampgan process" in err and err.count("\n") == 1, err
    assert (study / "bench" / "cost.csv").read_text() == "edited"


def test_cost_takes_a_bench_or_compare_folder_as_project_does(tmp_path, capsys):
    """`project` took a bench folder; `cost` said 'is a folder, not a regular file: give the file itself'."""
    from pathlib import Path

    bench = (
        Path(__file__).parents[1] / "benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/bench"
    )
    study = tmp_path / "study"
    (study / "bench").mkdir(parents=True)
    (study / "bench" / "results.json").write_bytes((bench / "results.json").read_bytes())
    costs = []
    for given in ([bench], [study], [study / "bench", study / "bench" / "results.json"]):
        out = tmp_path / f"cost{len(costs)}"
        code, _, err = run_cli(capsys, "cost", *map(str, given), "--price-per-hour", "1", "--out", str(out))
        assert code == 0, err
        costs.append(json.loads((out / "cost.json").read_text()))
    assert costs[0]["rows"] == costs[1]["rows"] == costs[2]["rows"] and costs[0]["rows"]


def test_a_saving_is_never_printed_outside_its_own_interval(tmp_path, capsys):
    """Under a load change the bench's two medians (37.0 vs 41.4 ms) can disagree with its paired speedup
    (1.00x [0.93-1.08]): the table said '-12% [-7% to +7%]', a point outside its interval. The point now comes
    from the speedup the interval belongs to; without an interval, from the two costs."""
    document = bench_results()
    document["configs"][0]["stats"]["median_s"] = 0.0370  # fp32 at batch 64
    document["configs"][1]["stats"]["median_s"] = 0.0414  # fp16: the medians say 12% dearer
    interval = {"batch_size": 64, "precision": "fp16", "baseline": "fp32", "estimate": 1.0, "low": 0.93, "high": 1.08}
    (tmp_path / "results.json").write_text(json.dumps({**document, "speedups": [interval]}))
    code, out, err = run_cli(capsys, "cost", str(tmp_path / "results.json"), "--price-per-hour", "1")
    assert code == 0, err
    rows = {(r["batch_size"], r["precision"]): r for r in json.loads((tmp_path / "cost.json").read_text())["rows"]}
    paired, plain = rows[(64, "fp16")], rows[(2048, "fp16")]
    assert paired["saving_percent_low"] <= paired["saving_percent"] <= paired["saving_percent_high"]
    assert paired["saving_percent"] == pytest.approx(0.0) and "(0% [-8% to +7%])" in out
    assert plain["saving_percent"] == pytest.approx(100 * 0.29 / 0.70) and "saving_percent_low" not in plain
    assert "saving vs fp32: 1 - 1/s of the bench's speedup s over paired rounds, its 95% CI likewise" in out


def test_banded_cells_widen_their_columns_and_a_saving_says_what_it_comes_from(tmp_path, capsys):
    """The study's T4 at 1M batches with a projection's band: '194.4 [116.7-427.8]' hours and '102.28
    [61.37-225.01]' cost are wider than the plain table's columns, which pushed the batch-2048 rows out of line
    with the header. And a saving from the bench's paired speedup need not equal the two costs' difference:
    cost.csv says which figure each saving comes from."""
    document = bench_results()
    for config in document["configs"]:
        config["stats"]["band_s"] = [config["stats"]["median_s"] * 0.6, config["stats"]["median_s"] * 2.2]
    interval = {"batch_size": 64, "precision": "fp16", "baseline": "fp32", "estimate": 1.0, "low": 0.93, "high": 1.08}
    (tmp_path / "results.json").write_text(json.dumps({**document, "speedups": [interval]}))
    code, out, err = run_cli(capsys, "cost", str(tmp_path / "results.json"), "--price-per-hour", "0.526")
    assert code == 0, err
    table = out.splitlines()[1:6]  # the header and the four rows
    assert "194.4 [116.7-427.8]" in out and "102.28 [61.37-225.01]" in out
    assert len({len(line) for line in table}) == 1, table  # right-aligned columns: every line equally long
    for line in table[1:]:  # each cell ends where its header ends
        assert line.index(line.split()[1]) + len(line.split()[1]) == table[0].index("precision") + len("precision")
    written = {(int(r["batch_size"]), r["precision"]): r for r in csv.DictReader((tmp_path / "cost.csv").open())}
    assert written[64, "fp16"]["saving_from"] == "paired speedup 1.000x"
    assert written[2048, "fp16"]["saving_from"] == "the two costs" and written[2048, "fp32"]["saving_from"] == ""
    assert "so a saving need not equal the two costs' difference" in out


def test_a_saving_from_a_speedup_that_is_no_answer_says_unsettled(tmp_path, capsys):
    """Two rounds under load gave a speedup of 1.00x [0.01-95]: a saving of -9900% to +99%, printed as a result.
    Such a band is no answer (wider than 2x, deciding nothing): the saving says it is unsettled instead."""
    wide = {"batch_size": 64, "precision": "fp16", "baseline": "fp32", "estimate": 1.0, "low": 0.01, "high": 95.0}
    (tmp_path / "results.json").write_text(json.dumps({**bench_results(), "speedups": [wide]}))
    code, out, err = run_cli(capsys, "cost", str(tmp_path / "results.json"), "--price-per-hour", "1")
    assert code == 0, err
    rows = {(r["batch_size"], r["precision"]): r for r in json.loads((tmp_path / "cost.json").read_text())["rows"]}
    assert "saving_percent_low" not in rows[64, "fp16"] and rows[64, "fp16"]["saving_unsettled"]
    (line,) = [line for line in out.splitlines() if line.split()[:2] == ["64", "fp16"]]
    assert line.endswith(" unsettled") and "%" not in line
    # A spreadsheet reading cost.csv alone is told too (its saving columns held a plain point value).
    written = {(int(r["batch_size"]), r["precision"]): r for r in csv.DictReader((tmp_path / "cost.csv").open())}
    assert written[64, "fp16"]["saving_unsettled"] == "True" and written[64, "fp32"]["saving_unsettled"] == ""
