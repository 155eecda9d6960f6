"""The end-to-end validation set (benchmarks/validation/): its two CSVs hold the schema and the invariants
that the projection's fit relies on (a step time computable from every row with a batch, Ada and Hopper
only in the kept-aside file), and the rebuild script's parsers read the README and Lambda formats right."""

import csv
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ampgan.precisions import FP32, TF32

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = ROOT / "benchmarks" / "validation"
_spec = importlib.util.spec_from_file_location("build_rows", VALIDATION / "build_rows.py")
build_rows = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_rows)

PRE_AMPERE = {"pascal", "volta", "turing"}
GENERATIONS = PRE_AMPERE | {"ampere", "ada", "hopper"}


def read(name: str) -> list[dict]:
    with open(VALIDATION / name, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == build_rows.COLUMNS, f"{name}: columns differ from build_rows.COLUMNS"
        return list(reader)


ROWS = read("rows.csv")
HELD = read("heldout_ada_hopper.csv")


def step_seconds(row: dict, which: str) -> float:
    return float(row[f"batch_{which}"]) * float(row["items_per_sample"]) / float(row[f"throughput_{which}"])


def test_the_set_meets_the_issue_targets():
    models = {r["model"] for r in ROWS}
    generations = {r["generation"] for r in ROWS}
    assert len(ROWS) >= 30 and len(models) >= 10
    assert {"pascal", "turing", "volta", "ampere"} <= generations
    tasks = {r["task"] for r in ROWS}
    assert {"classification", "detection", "segmentation", "vocoder", "translation", "lm", "qa"} <= tasks
    assert {"hifigan", "waveglow", "resnet50", "ssd300", "bert_large_squad", "transformerxl_base"} <= models
    assert {"DLE", "Lambda"} == {r["source"] for r in ROWS}


def test_ada_and_hopper_are_only_in_the_kept_aside_file():
    assert not [r for r in ROWS if r["generation"] in build_rows.HELD_OUT]
    assert HELD and {r["generation"] for r in HELD} == set(build_rows.HELD_OUT)
    assert {"H100", "RTX 4090", "RTX 6000 Ada"} <= {r["gpu"] for r in HELD}


@pytest.mark.parametrize("name,rows,fitted", [("rows.csv", ROWS, True), ("heldout_ada_hopper.csv", HELD, False)])
def test_each_file_says_what_it_holds_and_whether_it_may_be_fitted(name, rows, fitted):
    sidecar = json.loads((VALIDATION / f"{name}.json").read_text(encoding="utf-8"))
    assert sidecar["fitted"] is fitted
    assert sidecar["rows"] == len(rows)
    assert sidecar["models"] == sorted({r["model"] for r in rows})
    assert sidecar["generations"] == sorted({r["generation"] for r in rows})
    for commit in {r["commit"] for r in rows}:
        assert commit in json.dumps(sidecar["sources"])


@pytest.mark.parametrize("name,rows", [("rows.csv", ROWS), ("heldout_ada_hopper.csv", HELD)])
def test_every_row_is_complete_and_positive(name, rows):
    for row in rows:
        where = f"{name}: {row['model']} on {row['gpu']} ({row['heading']})"
        assert re.fullmatch(r"[a-z0-9_]+", row["model"]), where
        assert row["generation"] in GENERATIONS, where
        assert float(row["throughput_baseline"]) > 0 and float(row["throughput_amp"]) > 0, where
        assert re.fullmatch(r"[0-9a-f]{40}", row["commit"]), where
        for field in (
            "task",
            "input",
            "gpu",
            "gpu_detail",
            "unit",
            "software",
            "fp32_meaning",
            "source_path",
            "heading",
        ):
            assert row[field], f"{where}: empty {field}"
        # Before Ampere there is no TF32; from Ampere on, fp32 tensors ran TF32 convolutions by default.
        assert row["baseline"] == (FP32 if row["generation"] in PRE_AMPERE else TF32), where


@pytest.mark.parametrize("name,rows", [("rows.csv", ROWS), ("heldout_ada_hopper.csv", HELD)])
def test_a_step_time_follows_from_every_row(name, rows):
    for row in rows:
        where = f"{name}: {row['model']} on {row['gpu']} ({row['heading']})"
        assert float(row["items_per_sample"]) > 0, where
        if not row["batch_baseline"]:
            assert "batch" in row["notes"], f"{where}: no batch and no note saying why"
            continue
        for which in ("baseline", "amp"):
            assert float(row[f"batch_{which}"]).is_integer() and float(row[f"batch_{which}"]) >= 1, where
            # a training step of a published benchmark lies between 1 ms and a minute
            assert 1e-3 < step_seconds(row, which) < 60, f"{where}: {which} step {step_seconds(row, which):.4g} s"


def test_a_mixed_precision_run_at_half_the_baseline_speed_is_marked_suspect():
    for row in ROWS + HELD:
        if float(row["throughput_amp"]) < 0.5 * float(row["throughput_baseline"]):
            assert "suspect" in row["notes"], f"{row['model']} on {row['gpu']} ({row['heading']})"


def test_rows_are_unique_per_configuration():
    keys = [
        (
            r["source"],
            r["model"],
            r["gpu"],
            r["gpu_detail"],
            r["software"],
            r["batch_baseline"],
            r["batch_amp"],
            r["heading"],
        )
        for r in ROWS + HELD
    ]
    assert len(keys) == len(set(keys))


def test_a_run_whose_log_says_amp_false_is_not_a_mixed_precision_row():
    # Lambda's v1 Tacotron 2 and WaveGlow passed --amp-run, a flag the 22.09 scripts no longer read: their
    # "fp16" numbers are fp32 at the same batch. build_rows reads the logs and leaves them out.
    lambda_v1 = {
        (r["gpu_detail"], r["model"]) for r in ROWS if r["source"] == "Lambda" and r["heading"].startswith("v1")
    }
    assert not [m for _, m in lambda_v1 if m in ("tacotron2", "waveglow")]
    assert ("16GB SXM2 (Lambda Cloud)", "ncf") in lambda_v1  # its log says amp : True
    assert ("80GB SXM4 400 W", "ncf") not in lambda_v1  # its log says amp : False
    # v0's Ampere runs of both (PyTorch 1.7-1.10) mostly log 'PARAMETER amp : False' too (the A100s, A-series);
    # the RTX 3070/3080 Tacotron 2 logs say amp : True. Its NGC 20.01 runs (Pascal, Turing, Volta) ran apex
    # AMP and stay, as does v0's fp16 ResNet-50 (fp16 : True beside amp : False).
    lambda_v0 = [r for r in ROWS if r["source"] == "Lambda" and r["heading"].startswith("v0")]
    speech = {(r["generation"], r["gpu"]) for r in lambda_v0 if r["model"] in ("tacotron2", "waveglow")}
    assert {g for g, _ in speech} == {"pascal", "turing", "volta", "ampere"}
    assert {gpu for g, gpu in speech if g == "ampere"} == {"RTX 3070", "RTX 3080"}
    assert any(r["model"] == "resnet50" and r["generation"] == "ampere" for r in lambda_v0)


def test_numbers_and_batches_parse_as_the_readmes_write_them():
    assert build_rows.number("**938 img/s**") == 938
    assert build_rows.number("41,527") == 41527
    assert build_rows.number("22.59M") == pytest.approx(22.59e6)
    assert build_rows.number("<N/A>") is None and build_rows.number("-") is None and build_rows.number("N/A") is None
    assert build_rows.batches("64") == (64, 64)
    assert build_rows.batches("128 and 256") == (128, 256)
    assert build_rows.batches("104@FP16, 48@FP32") == (48, 104)
    assert build_rows.batches("10@FP16, 4@TF32") == (4, 10)
    assert build_rows.batches("5120/2560") == (2560, 5120)  # the Transformer README: mixed precision first


def test_tables_and_sections_are_found_whatever_the_separator():
    text = "\n".join(
        [
            "## Results",
            "### Training performance: NVIDIA DGX-1 (8x V100 16GB)",
            "words",
            "| GPUs   | Batch size / GPU   | Throughput - FP32 | Throughput - mixed precision | Throughput speedup |",
            " --- | --- | ----- | ----- | --- |",
            "| 1 | 12 | 12 | 16 | 1.33 |",
            "### Inference",
        ]
    )
    (level, title, body), *_ = [s for s in build_rows.sections(text) if s[1].startswith("Training")]
    assert (level, title) == (3, "Training performance: NVIDIA DGX-1 (8x V100 16GB)")
    [(header, rows)] = build_rows.tables(body)
    assert rows == [["1", "12", "12", "16", "1.33"]]
    assert build_rows.column(header, "Throughput", "32") == 2  # not the speedup column
    assert build_rows.dgx(title) == ("V100", "16GB SXM2 300 W (DGX-1)", "volta")


def test_convnet_batches_follow_the_configs_anchors():
    text = "\n".join(
        [
            "models:",
            "    resnet50: # {{{",
            "        DGX1V: &RN50_DGX1V",
            "            AMP:",
            "                batch_size: 256",
            "            FP32:",
            "                batch_size: 112",
            "        DGX1V-16G:",
            "            <<: *RN50_DGX1V",
            "        DGXA100:",
            "            TF32:",
            "                batch_size: 192",
        ]
    )
    found = build_rows.convnet_batches(text)
    assert found[("resnet50", "DGX1V-16G", "FP32")] == 112
    assert found[("resnet50", "DGX1V-16G", "AMP")] == 256
    assert found[("resnet50", "DGXA100", "TF32")] == 192


def test_convnets_memory_format_is_read_with_the_line_that_sets_it():
    text = "\n".join(
        [
            "models:",
            "    resnet50: # {{{",
            "        DGX1V: &RN50_DGX1V",
            "            AMP:",
            "                <<: *resnet_params_2k",
            "                batch_size: 256",
            "                memory_format: nhwc",
            "            FP32:",
            "                batch_size: 112",
            "        DGX1V-16G:",
            "            <<: *RN50_DGX1V",
            "    # }}}",
        ]
    )
    formats = build_rows.convnet_batches(text, "memory_format")
    assert formats == {("resnet50", "DGX1V", "AMP"): "nhwc", ("resnet50", "DGX1V-16G", "AMP"): "nhwc"}
    # an aliased platform cites its alias and the anchor's line (the precision's own anchors are not cited)
    yml = build_rows.CONFIGS_YML
    assert build_rows.yml_lines(text, "resnet50", "DGX1V-16G") == (
        f"{yml}:11 `<<: *RN50_DGX1V`, {yml}:7 `memory_format: nhwc`"
    )
    with pytest.raises(SystemExit, match="no DGXA100 under resnet50"):
        build_rows.yml_lines(text, "resnet50", "DGXA100")
    with pytest.raises(SystemExit, match="no line matching"):
        build_rows.cite(text, "channels_last", "configs.yml")


CONV_MODELS = {
    "resnet50",
    "resnext101_32x4d",
    "se_resnext101_32x4d",
    "efficientnet_b0",
    "efficientnet_b4",
    "ssd300",
    "efficientdet_d0",
    "maskrcnn_r50_fpn",
    "nnunet_2d",
    "nnunet_3d",
}


def layout_of(row: dict) -> str | None:
    said = re.findall(r"\blayout: (nchw|nhwc)/(nchw|nhwc) \(baseline/AMP\): [^;]+", row["notes"])
    assert len(said) <= 1 and ("layout:" in row["notes"]) == bool(said), row["notes"]
    return "/".join(said[0]) if said else None


@pytest.mark.parametrize("name,rows", [("rows.csv", ROWS), ("heldout_ada_hopper.csv", HELD)])
def test_every_row_of_a_convolutional_network_says_its_layout_and_why(name, rows):
    """issue 43: which memory format each side ran, from the run's source (DLE's configs and scripts, Lambda's
    logs and configs); a network without 2-D or 3-D convolutions says none."""
    expected = {
        ("DLE", "resnet50"): "nchw/nhwc",  # configs.yml: memory_format nhwc for AMP only
        ("DLE", "resnext101_32x4d"): "nchw/nhwc",
        ("DLE", "se_resnext101_32x4d"): "nchw/nhwc",
        ("DLE", "efficientnet_b0"): "nchw/nhwc",
        ("DLE", "efficientnet_b4"): "nchw/nhwc",
        ("DLE", "ssd300"): "nhwc/nhwc",  # the README's command passes no --data-layout: channels_last default
        ("DLE", "efficientdet_d0"): "nchw/nchw",
        ("DLE", "nnunet_2d"): "nchw/nchw",
        ("DLE", "nnunet_3d"): "nchw/nhwc",
    }
    for row in rows:
        layout = layout_of(row)
        where = f"{name}: {row['source']} {row['model']} on {row['gpu']}"
        if row["model"] not in CONV_MODELS:
            assert layout is None, where
        elif row["source"] == "Lambda":
            assert layout == "nchw/nchw", where  # no Lambda run passed a channels-last flag
        elif row["model"] == "maskrcnn_r50_fpn":
            assert layout == ("nchw/nhwc" if row["generation"] == "volta" else "nhwc/nhwc"), where
        else:
            assert layout == expected[(row["source"], row["model"])], where
        if layout:  # the evidence: a source file and line, or the run's log
            assert re.search(r"\.(py|yml|sh|md):\d+ `|results/\S+/PyTorch_|changelog|lambda/benchmark", row["notes"]), (
                where
            )


def test_the_amp_flag_is_read_from_the_run_logs(tmp_path):
    repo = tmp_path / "lambda"
    run = repo / "pytorch" / "results" / "sys1" / "PyTorch_ncf_FP16"
    run.mkdir(parents=True)
    (run / "benchmark.para").write_text("GLOBAL_BATCH 8 GPU 1\n")
    (run / "01.txt").write_text("grads_accumulated : 1  amp : False  log_path : log.json\n")
    other = repo / "pytorch" / "results" / "sys2" / "PyTorch_ncf_FP16"
    other.mkdir(parents=True)
    (other / "benchmark.para").write_text("GLOBAL_BATCH 8 GPU 1\n")
    (other / "01.txt").write_text("amp : True\n")
    # v0's folders: no benchmark.para, DLL-format logs; an fp16 network (FP16_Optimizer) logs amp : False too
    v0 = repo / "pytorch" / "results" / "sys4" / "PyTorch_waveglow_FP16"
    v0.mkdir(parents=True)
    (v0 / "04-11-2020.txt").write_text("DLL 2020-11-04 - PARAMETER amp : False \nDLL - PARAMETER batch_size : 24\n")
    fp16 = repo / "pytorch" / "results" / "sys4" / "PyTorch_resnet50_FP16"
    fp16.mkdir(parents=True)
    (fp16 / "04-11-2020.txt").write_text("DLL PARAMETER fp16 : True  static_loss_scale : 256.0  amp : False\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "runs"], check=True)
    gitdir = repo / ".git"
    assert build_rows.amp_flag_off(gitdir, "HEAD", "sys1", "PyTorch_ncf_FP16")
    assert not build_rows.amp_flag_off(gitdir, "HEAD", "sys2", "PyTorch_ncf_FP16")
    assert not build_rows.amp_flag_off(gitdir, "HEAD", "sys3", "PyTorch_ncf_FP16")  # no such run: nothing said
    assert build_rows.amp_flag_off(gitdir, "HEAD", "sys4", "PyTorch_waveglow_FP16")
    assert not build_rows.amp_flag_off(gitdir, "HEAD", "sys4", "PyTorch_resnet50_FP16")


def test_the_readme_counts_what_the_files_hold():
    readme = (VALIDATION / "README.md").read_text(encoding="utf-8")
    for name, rows in (("rows.csv", ROWS), ("heldout_ada_hopper.csv", HELD)):
        line = next(line for line in readme.splitlines() if line.startswith(f"| `{name}` |"))
        assert f"| {len(rows)} ({len({r['model'] for r in rows})} models) |" in line, line
        for generation in {r["generation"] for r in rows}:
            count = sum(r["generation"] == generation for r in rows)
            assert f"{generation} {count}" in line, f"{name}: {generation} {count} not in {line}"


def test_the_wrong_folders_get_one_line_and_exit_2(tmp_path, capsys):
    assert build_rows.main([str(tmp_path)]) == 2
    assert build_rows.main([str(tmp_path), str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "has no PyTorch/Classification/ConvNets/configs.yml" in err[1]


def test_hifigan_s_rows_count_what_train_py_counts():
    """DLE's train.py counts x.size(0) * x.size(1) a micro-batch, and x is (batch, 80 mels, 32 frames): 80 an
    example (the README's time to train agrees, build_rows.HIFIGAN_NOTE); the A100's AMP run says it kept
    MSD's grouped convolutions fp32, the V100's does not."""
    rows = {r["gpu"]: r for r in ROWS if r["model"] == "hifigan"}
    assert set(rows) == {"V100", "A100-80GB"} and {r["items_per_sample"] for r in rows.values()} == {"80"}
    assert (
        "--no_amp_grouped_conv" in rows["A100-80GB"]["notes"] and "--no_amp_grouped_conv" not in rows["V100"]["notes"]
    )
    assert step_seconds(rows["V100"], "baseline") == pytest.approx(32 * 80 / 3017.57)


def test_measured_rows_are_rows_check_py_reads(tmp_path):
    """measure_rows.py (the GPU sweep's e2e-rows step) writes rows.csv's columns, a TF32 and a strict fp32
    baseline per model against AMP, that check.py's reader accepts; tried here on the CPU with a small NCF."""
    out = tmp_path / "e2e" / "rows.csv"
    script = VALIDATION / "measure_rows.py"
    argv = [sys.executable, str(script), str(out), "--device", "cpu", "--models", "ncf:8", "--seconds", "0.01"]
    result = subprocess.run([*argv, "--rounds", "1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    rows = read_path(out)
    assert [(r["model"], r["baseline"]) for r in rows] == [("ncf", "tf32"), ("ncf", "fp32")]
    assert all(float(r["throughput_baseline"]) > 0 and float(r["throughput_amp"]) > 0 for r in rows)
    reader = f"import sys; sys.path.insert(0, {str(VALIDATION)!r}); import composition_fit as c; "
    reader += "print(c.malformed(sys.argv[1]))"
    assert subprocess.run([sys.executable, "-c", reader, str(out)], capture_output=True, text=True).stdout == "None\n"
    bad = subprocess.run([*argv[:6], "ncf:0"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--models item 'ncf:0'" in bad.stderr and "Traceback" not in bad.stderr


def read_path(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == build_rows.COLUMNS
        return list(reader)
