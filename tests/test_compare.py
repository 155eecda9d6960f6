"""Quality metrics, and `ampgan compare` / `report` / `evaluate` / `generate` end to end."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest
import torch
from conftest import run_cli
from PIL import Image

from ampgan.quality.metrics import accuracy, frechet_distance, frechet_distance_of_gaussians, kernel_inception_distance


def test_frechet_distance_of_known_gaussians():
    # Diagonal covariances: |mu1 - mu2|^2 + sum(s1 + s2 - 2 sqrt(s1 s2)).
    mu1, mu2 = np.array([0.0, 1.0]), np.array([3.0, 5.0])
    s1, s2 = np.array([1.0, 4.0]), np.array([9.0, 1.0])
    expected = 9 + 16 + (1 + 9 - 2 * 3) + (4 + 1 - 2 * 2)
    assert frechet_distance_of_gaussians(mu1, np.diag(s1), mu2, np.diag(s2)) == pytest.approx(expected)
    assert frechet_distance_of_gaussians(mu1, np.diag(s1), mu1, np.diag(s1)) == pytest.approx(0.0, abs=1e-9)


def test_frechet_distance_and_kid_of_samples():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2000, 4))
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
    shifted = a + np.array([2.0, 0, 0, 0])
    assert frechet_distance(a, shifted) == pytest.approx(4.0, rel=1e-6)  # a pure mean shift of 2
    same_distribution = rng.normal(size=(2000, 4))
    kid_same, _ = kernel_inception_distance(a, same_distribution, subsets=20, subset_size=300)
    kid_shifted, _ = kernel_inception_distance(a, shifted, subsets=20, subset_size=300)
    assert abs(kid_same) < 0.01 and kid_shifted > 0.5  # unbiased: ~0 for one distribution, even at N=300
    assert accuracy(np.array([1, 2, 3, 4]), np.array([1, 2, 0, 4])) == 0.75


@pytest.fixture(scope="module")
def tiny_compare(tmp_path_factory):
    """One small comparison on `synthetic`, shared by the tests below (its evaluator cached in tmp)."""
    out = tmp_path_factory.mktemp("compare") / "out"
    cache = tmp_path_factory.mktemp("cache")
    previous = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        from ampgan.cli import main

        try:
            main(
                [
                    "compare",
                    "--dataset",
                    "synthetic",
                    "--precisions",
                    "fp32,bf16",
                    "--width",
                    "8",
                    "--set",
                    "model.z_dim=16",
                    "--batch-size",
                    "16",
                    "--steps",
                    "12",
                    "--set",
                    "logging.log_every=4",
                    "--set",
                    "compare.eval_points=2",
                    "--set",
                    "compare.eval_samples=100",
                    "--set",
                    "compare.bench.batch_sizes=8",
                    "--set",
                    "compare.bench.min_seconds=0.3",
                    "--set",
                    "compare.bench.max_seconds=0.9",
                    "--device",
                    "cpu",
                    "--seeds",
                    "2",
                    "--quiet",
                    "--out",
                    str(out),
                ]
            )
        except SystemExit as exit_:
            assert exit_.code in (0, None)
    finally:
        if previous is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = previous
    return out


@pytest.mark.slow
def test_compare_writes_every_file(tiny_compare):
    out = tiny_compare
    for name in (
        "compare.json",
        "report.md",
        "report.html",
        "fig4_samples.png",
        "fig5_quality_vs_time.png",
        "fig6_losses.png",
        "bench/results.json",
        "bench/fig1_time_per_batch.png",
        "bench/fig2_time_per_1000_samples.png",
        "cost/cost.json",
        "cost/fig3_cost.png",
    ):
        assert (out / name).is_file(), name
    document = json.loads((out / "compare.json").read_text())
    assert list(document["runs"]) == ["fp32", "bf16"]
    for precision in ("fp32", "bf16"):
        summary = document["runs"][precision]
        assert summary["seeds"] == [0, 1] and set(summary["per_seed"]) == {"0", "1"}
        for seed in (0, 1):
            run = out / "runs" / f"{precision}-seed{seed}"
            quality = json.loads((run / "quality.json").read_text())
            assert len(quality["curve"]) >= 2 and quality["final"]["samples"] == 100
            assert {"precision", "recall", "coverage", "confusion", "per_class", "flags"} <= set(quality["final"])
            assert (run / "generator.safetensors").is_file()
            assert summary["per_seed"][str(seed)]["steps"] == 12  # the same budget for all
        interval = summary["final_interval"]["evaluator_accuracy"]  # two seeds: no meaningful interval
        assert interval["n"] == 2 and interval["low"] is None and interval["high"] is None
    paired = document["seed_comparison"]["bf16"]["evaluator_accuracy"]
    assert paired["n"] == 2 and set(paired["per_seed"]) == {"0", "1"} and paired["beyond_seed_spread"] is None
    race = document["race"]  # the race's clock, and every run's pace on the wall clock against the bench's
    assert set(race["pace"]["bf16"]) == {"0", "1"}
    for precision in ("fp32", "bf16"):
        for run in document["runs"][precision]["per_seed"].values():
            assert run["clock"] == race["clock"] and run["steps_per_s"] > 0 and run["wall_seconds"] > 0
            if race["clock"] == "bench step time":  # a bench that settled this batch size: each step charged it
                assert run["train_seconds"] == pytest.approx(12 * race["step_s"][precision], abs=0.01)
                assert run["bench_steps_per_s"] == pytest.approx(1 / race["step_s"][precision])
    assert document["floor"]["evaluator_accuracy"] >= 0.5 and document["cost"]["basis"]["label"]
    report = (out / "report.md").read_text()
    assert "## Verdict" in report and "real images (floor)" in report and "torch" in report
    assert "Two seeds give no meaningful 95% interval" in report
    assert "confusion matrix" in report and "per class" in report
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 6 and "<table>" in html


@pytest.mark.slow
def test_every_precision_starts_from_the_same_weights(tiny_compare):
    start = {
        p: torch.load(tiny_compare / "runs" / f"{p}-seed0" / "checkpoints" / "step-000000.pt", weights_only=True)
        for p in ("fp32", "bf16")
    }
    for network in ("generator", "discriminator"):
        a, b = start["fp32"][network], start["bf16"][network]
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert torch.equal(start["fp32"]["step_generator"], start["bf16"]["step_generator"])


@pytest.mark.slow
def test_report_re_renders_from_the_files(tiny_compare, capsys):
    (tiny_compare / "report.html").unlink()
    code, out, err = run_cli(capsys, "report", str(tiny_compare))
    assert code == 0, err
    assert (tiny_compare / "report.html").is_file() and (tiny_compare / "report.md").is_file()
    code, _, err = run_cli(capsys, "report", str(tiny_compare / "runs"))
    assert code == 2 and "has no compare.json" in err


@pytest.mark.slow
def test_generate_gives_the_class_and_the_same_images_for_the_same_seed(tiny_compare, tmp_path, capsys):
    run = tiny_compare / "runs" / "bf16-seed0"
    paths = [tmp_path / f"{n}.npz" for n in ("a", "b", "c")]
    for path, seed in zip(paths, (5, 5, 6)):
        code, out, err = run_cli(
            capsys,
            "generate",
            str(run),
            "--class",
            "grating-3",
            "--n",
            "12",
            "--seed",
            str(seed),
            "--out",
            str(path),
            "--format",
            "npz",
        )
        assert code == 0, err
    a, b, c = (np.load(p) for p in paths)
    assert a["images"].shape == (12, 32, 32, 3) and a["images"].dtype == np.uint8
    assert (a["labels"] == 3).all() and str(a["class_name"]) == "grating-3"
    assert np.array_equal(a["images"], b["images"]) and not np.array_equal(a["images"], c["images"])
    code, _, _ = run_cli(capsys, "generate", str(run), "--class", "2", "--n", "9", "--out", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").is_file()
    # the grid, shared alone, says what made it (its PNG text; the pixels stay the images)
    stamp = json.loads((run / "config.json").read_text())["stamp"]
    said = Image.open(tmp_path / "g.png").info["Description"]
    assert said.startswith("9 samples of class 'grating-2' from step ") and said.endswith(f" | {stamp}")
    assert "bf16 | batch" in stamp and "model acgan" in stamp and "torch " in stamp
    grids = sorted((run / "samples").glob("step-*.png"))
    assert Image.open(grids[-1]).info["Description"] == f"{stamp} | step {int(grids[-1].stem[5:])}, fixed noise"
    code, _, err = run_cli(capsys, "generate", str(run), "--class", "zebra", "--out", str(tmp_path / "x.png"))
    assert code == 2 and "no class 'zebra'" in err
    code, _, err = run_cli(capsys, "generate", str(tmp_path), "--class", "0", "--out", str(tmp_path / "x.png"))
    assert code == 2 and "not an ampgan run folder" in err and err.count("\n") == 1


@pytest.mark.slow
def test_safetensors_export_loads_without_ampgan(tiny_compare):
    from safetensors import safe_open

    with safe_open(str(tiny_compare / "runs" / "fp32-seed0" / "generator.safetensors"), "pt") as handle:
        metadata = handle.metadata()
        assert json.loads(metadata["class_names"])[0] == "grating-0"
        model = json.loads(metadata["model"])
        assert model["name"] == "acgan" and model["options"]["width"] == 8
        assert "label_embedding.weight" in handle.keys()


@pytest.mark.slow
def test_evaluate_writes_quality_json(tiny_compare, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    run = tmp_path / "run"  # copied out of its study: a study's run keeps the study's own quality.json
    shutil.copytree(tiny_compare / "runs" / "fp32-seed0", run)
    code, out, err = run_cli(capsys, "evaluate", str(run), "--samples", "50")
    assert code == 0, err
    quality = json.loads((run / "quality.json").read_text())
    assert quality["final"]["samples"] == 50 and 0 <= quality["final"]["evaluator_accuracy"] <= 1
    assert "fp32" in out and "Fréchet" in out


def _browser():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.slow
@pytest.mark.skipif(_browser() is None, reason="no headless Chromium installed")
def test_report_opens_in_a_real_headless_browser(tiny_compare, tmp_path):
    """Chromium loads the page and reports how many images decoded with a real size."""
    command = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        (tiny_compare / "report.html").as_uri(),
    ]
    page = tiny_compare / "report.html"
    original = page.read_text()
    probe = (
        "<script>window.addEventListener('load',()=>{const ok=[...document.images]"
        ".filter(i=>i.complete&&i.naturalWidth>0).length;document.body.setAttribute('data-images-ok',ok)})</script></body>"
    )
    page.write_text(original.replace("</body>", probe))
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        page.write_text(original)
    assert result.returncode == 0, result.stderr[-2000:]
    images = original.count("<img")
    assert f'data-images-ok="{images}"' in result.stdout and images >= 6


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["quickdraw", "cifar10", "mnist", "folder"])
def test_compare_runs_on_every_dataset_kind(kind, tmp_path, capsys, monkeypatch):
    """The bench inside compare gets the dataset's own files and options (it used to get the name
    alone and fail with 'quickdraw needs --data-dir')."""
    from fixtures import (
        cifar_batches,
        cifar_md5s,
        write_cifar_archive,
        write_image_folder,
        write_mnist,
        write_quickdraw,
    )

    import ampgan.data.cifar10 as cifar10

    data = tmp_path / "data"
    if kind == "quickdraw":
        source = [
            "--dataset",
            "quickdraw",
            "--data-dir",
            str(write_quickdraw(data)),
            "--set",
            "data.classes=apple,eye,fish",
        ]
    elif kind == "cifar10":
        members = cifar_batches(per_batch=30, learnable=True)
        monkeypatch.setattr(cifar10, "FILE_MD5", cifar_md5s(members))
        data.mkdir()
        write_cifar_archive(data / "cifar-10-python.tar.gz", members)
        source = ["--dataset", "cifar10", "--data-dir", str(data)]
    elif kind == "mnist":
        source = ["--dataset", "mnist", "--data-dir", str(write_mnist(data, count=100))]
    else:
        source = ["--dataset", f"folder:{write_image_folder(data, per_class=8)}"]  # the evaluator's least per class
    out = tmp_path / "out"
    code, _, err = run_cli(
        capsys,
        "compare",
        *source,
        "--precisions",
        "fp32,bf16",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "8",
        "--steps",
        "4",
        "--seeds",
        "1",
        "--set",
        "compare.eval_points=1",
        "--set",
        "compare.eval_samples=40",
        "--set",
        "compare.bench.batch_sizes=8",
        "--set",
        "compare.bench.min_seconds=0.3",
        "--set",
        "compare.bench.max_seconds=0.9",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(out),
    )
    assert code == 0, err
    document = json.loads((out / "compare.json").read_text())
    bench = json.loads((out / "bench" / "results.json").read_text())
    # Each configuration ran on the dataset's batches (its 0.3-s budget may judge one too slow on a busy machine).
    statuses = [c["status"] for c in bench["configs"]]
    assert bench["spec"]["dataset"] == source[1] and statuses and set(statuses) <= {"ok", "too_slow"}
    assert set(document["runs"]) == {"fp32", "bf16"} and (out / "report.html").is_file()
    assert "cannot tell a difference from seed-to-seed spread" in " ".join(document["verdict"])


def _compare_where_no_mode_is_faster(tmp_path, capsys, monkeypatch, out):
    """`ampgan compare` on a tiny model, the speed decision injected: bf16 10x, fp16 20x fp32's step."""
    from conftest import own_decision_cache

    import ampgan.speed.decision as decision

    own_decision_cache(monkeypatch, tmp_path)
    steps = {"fp32": 0.01, "bf16": 0.1, "fp16": 0.2}
    monkeypatch.setattr(
        decision,
        "measure_on_training_step",
        lambda config, dataset, device: decision.measure_with(lambda name: lambda: steps[name]),
    )
    return run_cli(
        capsys,
        "compare",
        "--dataset",
        "synthetic",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "8",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--quiet",
    )


def test_a_machine_where_no_mode_is_faster_gets_that_answer_and_trains_no_race(tmp_path, capsys, monkeypatch):
    """A CPU without bf16/fp16 matrix instructions (injected: bf16 10x, fp16 20x fp32's step): the study's
    answer is a verdict with the measurements, exit 0, and a report, not an error."""
    out = tmp_path / "study"
    code, stdout, err = _compare_where_no_mode_is_faster(tmp_path, capsys, monkeypatch, out)
    assert code == 0, err
    assert "no mixed-precision mode trains model acgan faster than fp32 at batch 8" in stdout
    assert "bf16 100 ms per step against fp32's 10 ms (10.0x slower)" in stdout and "--precisions fp32,bf16" in stdout
    document = json.loads((out / "compare.json").read_text())
    assert document["outcome"] == "no faster mode" and document["runs"] == {} and not (out / "runs").exists()
    report = (out / "report.md").read_text()
    assert "Speed decisions" in report and "| bf16 | 100.0 | 10.0 |" in report


@pytest.mark.real_op_trace
def test_with_no_faster_mode_the_study_still_projects_its_step_onto_gpus(tmp_path, capsys, monkeypatch):
    out = tmp_path / "study"
    code, stdout, err = _compare_where_no_mode_is_faster(tmp_path, capsys, monkeypatch, out)
    assert code == 0, err
    document = json.loads((out / "compare.json").read_text())
    assert document["projection"]["path"] == "projection/projection.json" and document["projection"]["batch_sizes"] == [
        8,
        2048,
    ]
    assert "PROJECTED" in document["verdict"][-1] and "at batch 2048 T4 fp16" in document["verdict"][-1]
    assert (out / "projection" / "op_tables.json").is_file()
    assert "On other hardware (PROJECTED, not measured)" in (out / "report.md").read_text()
