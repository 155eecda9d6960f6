"""An extension is one record, registered in one place: a precision mode (precisions.register), a quality
metric (quality/registry.register, its computation on the record) and a GPU (system/gpus.register, its
calibration named on its row). Each dummy below is one register call; bench, compare's report and project
then carry it end to end, because they loop over the registries instead of naming what they know."""

import dataclasses
import json

import pytest
from conftest import run_cli

from ampgan import precisions
from ampgan.bench import measure, op_tables
from ampgan.precisions import FP32
from ampgan.quality import registry as metrics
from ampgan.system import gpus

TINY = ["--dataset", "synthetic", "--width", "8", "--set", "model.z_dim=16", "--device", "cpu", "--no-channels-last"]


# An fp32 twin with its own name and colour: runs on the CPU, computes as fp32, projects on fp32's path.
PLAIN = dataclasses.replace(
    precisions.precision(FP32),
    name="plain32",
    colour="#8c564b",
    order=len(precisions.PRECISIONS),
    summary="fp32 under another name (a test's dummy)",
    stand_in=FP32,
)
# The mean pixel value of the images the record is handed (in [-1, 1]).
BRIGHTNESS = metrics.Metric(
    "brightness", "brightness", "mean pixel value", True, digits=4, compute=lambda images, *_: float(images.mean())
)
# A GPU of no real generation, projected with Volta's kernel calibration.
DUMMY_GPU = gpus.GpuSpec(
    key="D1",
    name="Dummy D1",
    peak_tflops={FP32: 20.0},
    fp16_units="tensor",
    bandwidth_gbs=1000.0,
    memory_gib=32.0,
    cuda_capability=(7, 0),
    source="a test's dummy",
    checked="never",
    sms=80,
    watts=300.0,
    generation="dummy",
    calibration="volta",
)


@pytest.fixture
def registered():
    precisions.register(PLAIN)
    metrics.register(BRIGHTNESS)
    gpus.register(DUMMY_GPU)
    yield
    del precisions.PRECISIONS[PLAIN.name], metrics.METRICS[BRIGHTNESS.key], gpus.gpu_table()[DUMMY_GPU.key]


def _steady_steps(monkeypatch):
    """The bench runs every real step and is handed the same 5 s for each: its speedups settle in the fewest
    rounds, or a few more reach --max-seconds; its op trace has all the time it needs, however crowded the
    machine. What is tested here is where a registered mode goes, not its speed."""

    def steady(contender):
        contender.timer()
        return 5.0

    monkeypatch.setattr(measure.Contender, "timed_step", steady)
    monkeypatch.setattr(op_tables, "TRACE_SHARE", 1000.0)  # the trace never runs out of time on a busy machine


@pytest.mark.real_op_trace  # project reads the step the bench traced in each precision, the dummy's included
def test_a_dummy_precision_and_gpu_go_through_bench_and_project(registered, tmp_path, capsys, monkeypatch):
    _steady_steps(monkeypatch)
    bench = tmp_path / "bench"
    code, out, err = run_cli(
        capsys,
        "bench",
        *TINY,
        "--steps",
        "2",
        "--set",
        "bench.warmup=1",
        "--batch-sizes",
        "8",
        "--max-seconds",
        "120",
        "--precisions",
        f"{FP32},{PLAIN.name}",
        "--out",
        str(bench),
    )
    assert code == 0, err
    results = json.loads((bench / "results.json").read_text())
    assert [(c["precision"], c["status"]) for c in results["configs"]] == [(FP32, "ok"), (PLAIN.name, "ok")]
    (speedup,) = results["speedups"]
    assert speedup["precision"] == PLAIN.name and speedup["estimate"] == pytest.approx(1.0)
    assert results["peaks"][PLAIN.name]["tflops"] == results["peaks"][FP32]["tflops"]  # it computes in float32
    assert PLAIN.name in results["op_tables"] and "1.00x" in _row(out, "8", PLAIN.name)  # its own traced step

    projection = tmp_path / "projection"
    code, out, err = run_cli(
        capsys,
        "project",
        str(bench),
        "--devices",
        f"{DUMMY_GPU.key},T4",
        "--batch-sizes",
        "8",
        "--out",
        str(projection),
    )
    assert code == 0, err
    rows = {(r["device"], r["precision"]): r for r in json.loads((projection / "projection.json").read_text())["rows"]}
    assert {device for device, _ in rows} == {DUMMY_GPU.key, "T4"}
    mine, fp32 = rows[(DUMMY_GPU.key, PLAIN.name)], rows[(DUMMY_GPU.key, FP32)]
    # fp32 under another name: its own traced step, on fp32's kernel path and peak, so fp32's time
    assert mine["status"] == "ok" and mine["ms_per_step"] == pytest.approx(fp32["ms_per_step"], rel=0.05)
    assert mine["speedup"] == pytest.approx(1.0, rel=0.05)
    assert "op table traced in plain32" in mine["source"] and mine["tensor_flops_share"] == 0.0
    # the dummy GPU's row names its calibration (Volta's, fitted on its architecture) and its generation (one
    # without published end-to-end rows, so the step's band is the uncalibrated one)
    assert "calibrated on D1's architecture (volta" in mine["calibration"] and "band from dummy" in mine["calibration"]
    assert not mine["calibrated"] and rows[("T4", PLAIN.name)]["status"] == "ok"
    assert _row(out, DUMMY_GPU.key, "8", PLAIN.name)


def test_a_dummy_precision_and_metric_go_through_compare_and_its_report(registered, tmp_path, capsys, monkeypatch):
    _steady_steps(monkeypatch)
    study = tmp_path / "study"
    code, _, err = run_cli(
        capsys,
        "compare",
        *TINY,
        "--batch-size",
        "8",
        "--steps",
        "4",
        "--precisions",
        f"{FP32},{PLAIN.name}",
        "--seeds",
        "1",
        "--set",
        "compare.eval_points=1",
        "--set",
        "compare.eval_samples=20",
        "--set",
        "compare.bench.batch_sizes=8",
        "--set",
        "compare.bench.max_seconds=120",
        "--out",
        str(study),
    )
    assert code == 0, err
    document = json.loads((study / "compare.json").read_text())
    final = document["runs"][PLAIN.name]["final"]
    # computed by its record for the samples and for the real images' floor (pixels in [-1, 1])
    assert -1.0 < final[BRIGHTNESS.key] < 1.0 and -1.0 < document["floor"][BRIGHTNESS.key] < 1.0
    report = (study / "report.md").read_text()
    header = _row(report, "precision", "seeds").split("|")  # the metrics table's
    row = _row(report, PLAIN.name, "1", "4").split("|")  # its name, one seed, four steps
    assert row[header.index(f" {BRIGHTNESS.label} ")].strip() == f"{final[BRIGHTNESS.key]:.4f}", report


def _row(text: str, *cells: str) -> str:
    """The first line of a printed or Markdown table whose leading cells are `cells`."""
    return next(
        line for line in text.splitlines() if [c for c in line.replace("|", " ").split()][: len(cells)] == list(cells)
    )
