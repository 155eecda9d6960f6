"""Every document ampgan reads back, damaged five ways: cut short, a field of the wrong type, a field
missing, another program's content, bytes that are not UTF-8. Each gives one `error:` line naming the
file, exit 2, no traceback (a JSON-lines log cut short is the one damage a crash makes; it is read)."""

import json
import os
import re
import shutil
import struct
from pathlib import Path

import pytest
import torch
from conftest import ORIGINALS_TINY, fill_the_disk, run_cli

TINY = ORIGINALS_TINY  # the same tiny run the session's originals were made with (conftest.py)
DAMAGES = ["truncated", "wrong type", "missing field", "foreign", "not utf-8"]


# originals: a run folder and a finished comparison, made once per session (conftest.py).


def _json_damage(path, damage, wrong_type, missing):
    """Damage a JSON (or JSON-lines: its first record) document in place."""
    text = path.read_text()
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "not utf-8":
        path.write_bytes(b"\xff\xfe\x00" + text.encode()[3:])
    elif damage == "foreign":
        path.write_text('{"hello": "world"}\n' * (2 if path.suffix == ".jsonl" else 1))
    else:
        lines = text.splitlines()
        record = json.loads(lines[0] if path.suffix == ".jsonl" else text)
        (wrong_type if damage == "wrong type" else missing)(record)
        if path.suffix == ".jsonl":
            path.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
        else:
            path.write_text(json.dumps(record))


def _set(path_in_document, value):
    def change(document):
        *parents, last = path_in_document
        for key in parents:
            document = document[key]
        document[last] = value

    return change


def _drop(path_in_document):
    def change(document):
        *parents, last = path_in_document
        for key in parents:
            document = document[key]
        del document[last]

    return change


# document -> (its file in the originals, the command that reads it back, wrong type, missing field)
DOCUMENTS = {
    "run config.json": (
        "run/config.json",
        lambda d: ["train", "--resume", str(d / "run"), "--steps", "8"],
        _set(("config", "budget", "batch_size"), "many"),
        _drop(("config",)),
    ),
    "metrics.jsonl": (
        "run/metrics.jsonl",
        lambda d: ["train", "--resume", str(d / "run"), "--steps", "8"],
        _set(("step",), "two"),
        _drop(("step",)),
    ),
    "compare.json": (
        "study/compare.json",
        lambda d: ["report", str(d / "study")],
        _set(("runs", "fp32", "steps"), "four"),
        _drop(("environment",)),
    ),
    "quality.jsonl": (
        "study/runs/fp32-seed0/quality.jsonl",
        lambda d: ["report", str(d / "study")],
        _set(("step",), [2]),
        _drop(("train_seconds",)),
    ),
    "bench results.json": (
        "study/bench/results.json",
        lambda d: ["bench", "--from", str(d / "study/bench/results.json")],
        _set(("configs", 0, "batch_size"), "eight"),
        _drop(("speedups",)),
    ),
    "study.json": (
        "study/study.json",
        lambda d: ["compare", "--resume", str(d / "study")],
        _set(("runs",), "all of them"),
        _drop(("identity",)),
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("document", list(DOCUMENTS))
def test_a_damaged_document_is_one_line_and_exit_2(originals, tmp_path, capsys, document, damage):
    folder = tmp_path / "copy"
    shutil.copytree(originals, folder)
    relative, command, wrong_type, missing = DOCUMENTS[document]
    _json_damage(folder / relative, damage, wrong_type, missing)
    code, _, err = run_cli(capsys, *command(folder))
    if damage == "truncated" and relative.endswith(".jsonl"):
        # A log's last line cut short is what a crash leaves: it is skipped, and the command goes on.
        assert code == 0, err
        return
    assert code == 2, (document, damage, err)
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert relative.rsplit("/", 1)[-1] in err or str(folder / relative.rsplit("/", 1)[0]) in err, err


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_is_one_line_and_exit_2(originals, tmp_path, capsys, damage):
    folder = tmp_path / "copy"
    shutil.copytree(originals / "run", folder)
    latest = sorted((folder / "checkpoints").glob("*.pt"))[-1]
    payload = torch.load(latest, weights_only=True)
    if damage == "truncated":
        latest.write_bytes(latest.read_bytes()[:1000])
    elif damage == "not utf-8":
        latest.write_bytes(b"\xff\xfe\x00 not a checkpoint")
    elif damage == "foreign":
        torch.save({"hello": torch.zeros(3)}, latest)
    elif damage == "wrong type":
        torch.save(payload | {"step": "four"}, latest)
    else:
        torch.save({k: v for k, v in payload.items() if k != "optimizer_d"}, latest)
    code, _, err = run_cli(capsys, "train", "--resume", str(folder), "--steps", "8")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert latest.name in err


@pytest.mark.parametrize(
    "obstruction", ["metrics.jsonl", "generator.safetensors", "samples/step-000008.png", "samples as a file"]
)
def test_a_folder_or_file_in_the_way_of_a_write_is_one_line_and_keeps_the_run(originals, tmp_path, capsys, obstruction):
    """A folder where ampgan writes a file (or a file where it writes a folder) stops the resumed run with one
    line saying to move it, not a traceback or 'free space'; the checkpoints it had are untouched."""
    folder = tmp_path / "copy"
    shutil.copytree(originals / "run", folder)
    if obstruction == "samples as a file":
        shutil.rmtree(folder / "samples")
        (folder / "samples").write_text("mine")
    else:
        (folder / obstruction).unlink(missing_ok=True)
        (folder / obstruction).mkdir(parents=True)
    kept = {path: path.read_bytes() for path in (folder / "checkpoints").iterdir()}
    code, _, err = run_cli(capsys, "train", "--resume", str(folder), "--steps", "8")
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "move what stands in its way" in lines[0], err
    assert "Traceback" not in err and all(path.read_bytes() == data for path, data in kept.items())


def test_a_manifest_line_that_is_not_a_record_leaves_what_it_named_unproven(originals, tmp_path, capsys):
    folder = tmp_path / "copy"
    shutil.copytree(originals / "run", folder)
    with open(folder / ".ampgan-written.jsonl", "a") as manifest:
        manifest.write('[1, 2]\n"text"\n{"path": ["a"], "size": 1, "sha256": "x"}\n')
    code, _, err = run_cli(capsys, "train", "--resume", str(folder), "--steps", "6")
    assert code == 0 and "Traceback" not in err, err


def _rename_key(path_in_document, old, new):
    def change(document):
        for key in path_in_document:
            document = document[key]
        document[new] = document.pop(old)

    return change


def _cut_runs(document, keep):
    document["runs"] = {k: v for k, v in document["runs"].items() if keep(k)}


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: _cut_runs(d, lambda name: False), "(runs.fp32 is missing)"),
        (lambda d: _cut_runs(d, lambda name: name != "fp32"), "(runs.fp32 is missing)"),
        (lambda d: d["evaluator"].update(min_accuracy="half"), "(evaluator.min_accuracy should be a number from 0"),
        (lambda d: d["floor"].update(kid="low"), "(floor.kid should be int or a finite number, got 'low')"),
        (lambda d: d["floor"].update(recall=[]), "(floor.recall should be a number from 0"),
        (lambda d: d["floor"].update(class_shares=["a tenth"]), "(floor.class_shares[0] should be a number from 0"),
        # a table keyed by a name no registry has (t-read): report drew a row of its own
        (_rename_key(("runs",), "bf16", "fp12"), "(runs.fp12 is named 'fp12', not a precision: one of bf16"),
        (_rename_key(("seed_comparison",), "bf16", "fp12"), "(seed_comparison.fp12 is named 'fp12', not a precision"),
    ],
    ids=[
        "no runs",
        "only bf16's run",
        "a threshold in words",
        "a floor in words",
        "a floor as a list",
        "shares",
        "a run keyed fp12",
        "a seed comparison keyed fp12",
    ],
)
def test_a_compare_json_the_report_cannot_draw_is_one_line(originals, tmp_path, capsys, change, expected):
    """Every raced run is compared with fp32's, and the setup and the figures show the evaluator's threshold
    and the real images' floor as numbers: a compare.json that lost the one or holds the others as text or
    lists is damaged, said in one line (not a figure of zero columns, or a format error, as tracebacks)."""
    folder = tmp_path / "copy"
    shutil.copytree(originals / "study", folder)
    document = json.loads((folder / "compare.json").read_text())
    change(document)
    (folder / "compare.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "report", str(folder))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "compare.json is damaged or foreign " + expected in err, err


@pytest.mark.parametrize(
    "relative, change, command, words",
    [
        ("study/compare.json", _set(("runs", "fp32", "steps"), -4), "report", "runs.fp32.steps should be a whole"),
        ("study/compare.json", _set(("spec", "batch_size"), 0), "report", "spec.batch_size should be a whole"),
        ("study/runs/fp32-seed0/quality.jsonl", _set(("step",), -3), "report", "step should be a whole number"),
        ("study/runs/fp32-seed0/quality.jsonl", _set(("evaluator_accuracy",), 7.0), "report", "from 0 to 1, got 7.0"),
        ("study/bench/results.json", _set(("configs", 0, "batch_size"), -8), "bench", "batch_size should be a whole"),
        ("study/bench/results.json", _set(("configs", 0, "batch_size"), 8.5), "bench", "batch_size should be a whole"),
        ("study/bench/results.json", _set(("configs", 0, "batch_size"), 10**400), "bench", "from 1 to 2**31, got 1000"),
        ("study/bench/results.json", _set(("configs", 0, "processes"), -2), "bench", "processes should be a whole"),
        ("study/bench/results.json", _set(("configs", 0, "skipped_steps"), -1), "bench", "skipped_steps should be"),
        ("study/bench/results.json", _set(("configs", 0, "flops_per_step"), -100), "bench", "flops_per_step should"),
        ("study/bench/results.json", _set(("configs", 0, "images_per_s"), -5.0), "bench", "images_per_s should be"),
    ],
    ids=[
        "negative steps",
        "batch 0",
        "negative step",
        "accuracy 7",
        "negative batch",
        "half a batch",
        "a 400-digit batch",  # isfinite(10**400) raised OverflowError: a traceback
        "negative processes",  # a multiplier of img/s: '-5.0 img/s' read back with exit 0 (review-fuzz)
        "negative skipped steps",
        "negative flops",
        "negative img/s",
    ],
)
def test_a_count_or_share_out_of_its_range_is_one_line(originals, tmp_path, capsys, relative, change, command, words):
    """The damage fuzzer (benchmarks/damage_fuzz.py) found these read back as values: a report of "-4 steps" and an
    accuracy of 7 with exit 0, a bench --from whose error bars ended in a ValueError traceback."""
    folder = tmp_path / "copy"
    shutil.copytree(originals, folder)
    _json_damage(folder / relative, "wrong type", change, None)
    arguments = (
        ["report", str(folder / "study")] if command == "report" else ["bench", "--from", str(folder / relative)]
    )
    code, _, err = run_cli(capsys, *arguments)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert relative.rsplit("/", 1)[-1] + " is damaged or foreign" in err and words in err, err


def test_a_study_without_compare_json_names_resume_as_the_fix_and_resume_writes_it(originals, tmp_path, capsys):
    """A study stopped before its end, or whose compare.json was deleted, has study.json: the report named the
    wrong fix ("give the --out folder of an 'ampgan compare' run", which it is); resuming writes compare.json."""
    folder = tmp_path / "copy"
    shutil.copytree(originals / "study", folder)
    (folder / "compare.json").unlink()
    code, _, err = run_cli(capsys, "report", str(folder))
    assert code == 2 and err.count("\n") == 1, err
    assert f"{folder} has no compare.json: continue the study it holds with 'ampgan compare --resume {folder}'" in err
    assert run_cli(capsys, "compare", "--resume", str(folder))[0] == 0
    assert (folder / "compare.json").is_file() and run_cli(capsys, "report", str(folder))[0] == 0


@pytest.mark.parametrize("name", ["cm 1", "x;touch pwned"])
def test_a_printed_command_reads_back_as_the_folder_it_names(originals, tmp_path, capsys, name):
    """'continue ... with ampgan compare --resume /tmp/cm 1' gave the shell two arguments; a folder named
    'x;touch pwned' gave it a second command. The command printed is quoted as the shell reads it."""
    import shlex

    folder = tmp_path / name
    shutil.copytree(originals / "study", folder)
    (folder / "compare.json").unlink()
    code, _, err = run_cli(capsys, "report", str(folder))
    assert code == 2 and err.count("\n") == 1, err
    command = err.split("continue the study it holds with '", 1)[1].rsplit("', which writes it", 1)[0]
    assert shlex.split(command) == ["ampgan", "compare", "--resume", str(folder)]


def test_a_damaged_quickdraw_manifest_is_one_line(tmp_path, capsys):
    from fixtures import write_quickdraw

    folder = write_quickdraw(tmp_path / "qd")
    assert run_cli(capsys, "data", "info", "quickdraw", "--data-dir", str(folder), "--classes", "apple")[0] == 0
    for content in (b'{"sha256": {"apple.npy": 5}}', b'["apple.npy"]', b"\xff\xfe\x00", b'{"sha2'):
        (folder / "ampgan-manifest.json").write_bytes(content)
        code, _, err = run_cli(capsys, "data", "info", "quickdraw", "--data-dir", str(folder), "--classes", "apple")
        assert code == 2 and "ampgan-manifest.json is damaged: delete it" in err and err.count("\n") == 1


def test_everything_a_command_writes_is_in_its_folder_kind(originals):
    """--overwrite may replace what ampgan wrote (runs/claim.py): a study and a run as the commands leave
    them hold nothing their manifest does not prove (files/manifest.py), and nothing outside their kind."""
    import fnmatch

    from ampgan.runs.claim import FOLDER_KINDS, marker_kind, unproven_entries

    for folder, kind in ((originals / "study", "study"), (originals / "run", "run")):
        assert marker_kind(folder) == kind and unproven_entries(folder) == []
        files = [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()]
        patterns = FOLDER_KINDS[kind] + ("*.ampgan-*", "*.tmp")
        assert [f for f in files if not any(fnmatch.fnmatchcase(f, p) for p in patterns)] == []


# a FIFO in a grid's place: opening it blocked the report forever (the damage fuzzer's "fifo")
@pytest.mark.parametrize("damage", ["random bytes", "30000 x 30000 header", "fifo"])
def test_a_damaged_sample_grid_costs_its_panel_not_the_report(originals, tmp_path, capsys, damage):
    import zlib

    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    grids = sorted(study.glob("runs/*/samples/step-*.png"))
    assert grids
    for grid in grids:
        if damage == "random bytes":
            grid.write_bytes(os.urandom(3000))
        elif damage == "fifo":
            grid.unlink()
            os.mkfifo(grid)
        else:  # a valid header claiming 9e8 pixels, almost no data
            header = struct.pack(">IIBBBBB", 30000, 30000, 8, 0, 0, 0, 0)
            chunk = b"IHDR" + header
            grid.write_bytes(
                b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk)) + b"\0" * 64
            )
    code, out, err = run_cli(capsys, "report", str(study))
    assert code == 0, err
    assert (study / "report.html").stat().st_size > 1000 and (study / "fig4_samples.png").is_file()


def test_a_report_on_a_full_disk_is_one_line_and_keeps_the_old_report(originals, tiny_disk, capsys):
    study = tiny_disk / "study"
    shutil.copytree(originals / "study", study, ignore=shutil.ignore_patterns("*.pt", "fig*.png"))
    before = (study / "report.html").read_bytes()
    fill_the_disk(tiny_disk)
    code, _, err = run_cli(capsys, "report", str(study))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left on device" in err
    assert (study / "report.html").read_bytes() == before and (study / "compare.json").is_file()
    assert not list(study.rglob(".*.tmp"))


def _every_config_stat(key, value):
    def change(document):
        for config in document["configs"]:
            if config.get("stats"):
                config["stats"][key] = value

    return change


def _every_speedup(key, value):
    def change(document):
        for pair in document["speedups"]:
            pair[key] = value

    return change


COMMITTED_BENCH = (
    Path(__file__).parents[1] / "benchmarks/results/projection-composed-acgan2019-cifar32-amd-zen4-2026-12-03/bench"
)


# Numbers a cost or a projection divides by or sums into a price: zero ended in a ZeroDivisionError traceback,
# a negative one in a negative cost, NaN in a NaN row (a JSON number json.dumps writes as NaN).
@pytest.mark.parametrize(
    "change, words",
    [
        (_every_config_stat("median_s", 0.0), "median_s should be a number above 0"),
        (_every_config_stat("median_s", -0.01), "median_s should be a number above 0"),
        (_every_config_stat("q1_s", float("nan")), "q1_s should be a number above 0"),
        (_every_speedup("low", 0), "low should be a number above 0"),
        (_every_speedup("estimate", -1.2), "estimate should be a number above 0"),
    ],
)
@pytest.mark.parametrize("command", ["cost", "project"])
def test_a_time_no_reader_can_divide_by_is_one_line(tmp_path, capsys, change, words, command):
    """On a committed bench with finished configurations and op tables (the session's originals bench, 0.6 s,
    finishes none on a loaded machine, and the command then stops before the damage, at "re-run the bench")."""
    results = tmp_path / "results.json"
    document = json.loads((COMMITTED_BENCH / "results.json").read_text())
    assert all(config.get("stats") for config in document["configs"]) and document["speedups"]
    change(document)
    results.write_text(json.dumps(document))
    arguments = ["--price-per-hour", "1"] if command == "cost" else []
    code, _, err = run_cli(capsys, command, str(results), *arguments, "--out", str(tmp_path / "out"))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert words in err and "results.json" in err, err
    assert not (tmp_path / "out").exists()


_ROW = [
    "aten.mm",
    "matrix",
    "float32",
    8,
    [0.0, 4096.0],
    [1024.0, 64.0],
    False,
    0.5,
    [["gemm", [[0.0, 8.0], [64.0, 0.0], [64.0, 0.0], [1.0, 0.0], [0.0, 0.0]]]],
]


@pytest.mark.parametrize(
    "column, value, words",
    [
        (7, 0.0, "a share that is not above 0"),  # the shares are summed and divided by (ZeroDivisionError)
        (7, -0.5, "a share that is not above 0"),
        (7, float("inf"), "a share that is not above 0"),
        (4, [float("-inf"), 1.0], "not finite"),
        (5, [0.0, float("nan")], "not finite"),
        (8, [["gemm", [[0.0, float("nan")], [64.0, 0.0], [64.0, 0.0], [1.0, 0.0], [0.0, 0.0]]]], "not finite"),
        ("traced_at", [8, 8], "traced at batch sizes [8, 8]"),
        ("traced_at", [0, 0], "traced at batch sizes [0, 0]"),
        ("traced_at", [16, 8], "traced at batch sizes [16, 8]"),
    ],
)
def test_an_op_table_read_back_with_a_count_no_projection_can_use_is_refused(column, value, words):
    from ampgan.bench.ops import FORMAT, OpTable

    row = list(_ROW)
    table = {"format": FORMAT, "precision": "fp32", "traced_at": [8, 16], "device": "cpu", "rows": [row]}
    assert OpTable.from_dict(json.loads(json.dumps(table))).kernels() == 0.5  # the undamaged table reads
    if column == "traced_at":
        table["traced_at"] = value
    else:
        row[column] = value
    with pytest.raises(ValueError, match=re.escape(words)):
        OpTable.from_dict(table)


# A value that must be a registry's name, read back as another: "fp12" in a bench's results.json was costed and
# resumed with exit 0, a row of its own. The record's description names the registry (files/schema.py OneOf).
@pytest.mark.parametrize(
    "relative, change, command, words",
    [
        ("bench", _set(("configs", 0, "precision"), "fp12"), "cost", "configs[0].precision should be a precision"),
        ("bench", _every_speedup("baseline", "fp64"), "project", "baseline should be a precision: one of bf16"),
        ("study/bench/results.json", _set(("spec", "precisions", 1), "fp12"), "resume", "spec.precisions[1]"),
        ("study/compare.json", _set(("spec", "precisions", 1), "fp12"), "report", "spec.precisions[1] should be a"),
        ("study/compare.json", _set(("headline", "metric"), "sharpness"), "report", "should be a metric: one of"),
        # A model or dataset name is checked too, and a user's own form of one passes (FILE.py:FUNCTION, folder:PATH)
        ("bench", _set(("spec", "model"), "acgna"), "project", "spec.model should be a model: one of acgan,"),
        ("bench", _set(("spec", "dataset"), "digitz"), "project", "spec.dataset should be a dataset: one of cifar10"),
        ("study/compare.json", _set(("spec", "model"), "acgna"), "report", "or FILE.py:FUNCTION, got 'acgna'"),
        ("study/compare.json", _set(("dataset", "name"), "digitz"), "report", "or folder:PATH, got 'digitz'"),
        ("study/compare.json", _set(("cost", "target_metric"), "sharp"), "report", "cost.target_metric should be a m"),
        ("study/compare.json", _set(("cost", "table"), [{"precision": "fp12"}]), "report", "cost.table[0].precision"),
        ("run/config.json", _set(("precision",), "fp12"), "evaluate", "precision should be a precision"),
        ("run/config.json", _set(("dataset", "name"), "digitz"), "evaluate", "dataset.name should be a dataset"),
    ],
    ids=[
        "cost results.json",
        "project results.json",
        "resume results.json",
        "report precision",
        "report metric",
        "project model",
        "project dataset",
        "report model",
        "report dataset",
        "report cost metric",
        "report cost precision",
        "evaluate precision",
        "evaluate dataset",
    ],
)
def test_a_name_no_registry_has_is_one_line(originals, tmp_path, capsys, relative, change, command, words):
    if relative == "bench":  # a bench with finished configurations: cost and project read every row
        shutil.copytree(COMMITTED_BENCH, tmp_path / "bench")
        path = tmp_path / "bench/results.json"
    else:
        shutil.copytree(originals, tmp_path / "copy")
        path = tmp_path / "copy" / relative
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    arguments = {
        "cost": ["cost", str(path), "--price-per-hour", "1", "--out", str(tmp_path / "out")],
        "project": ["project", str(path), "--out", str(tmp_path / "out")],
        "resume": ["compare", "--resume", str(tmp_path / "copy/study")],
        "report": ["report", str(tmp_path / "copy/study")],
        "evaluate": ["evaluate", str(tmp_path / "copy/run"), "--samples", "20"],
    }[command]
    code, _, err = run_cli(capsys, *arguments)
    last = err.splitlines()[-1]  # compare --resume says what it continues first
    assert code == 2 and last.startswith("error: ") and err.count("error") == 1 and "Traceback" not in err, err
    assert f"{path.name} is damaged or foreign" in last and words in last and "got '" in last, err


# A model setting config.json records that the model refuses (an edited width, a misspelled name) was one line that
# named a flag (--width) the person never gave, not the file (the damage fuzzer's "unnamed").
@pytest.mark.parametrize(
    "where, value, command, words",
    [
        (("width",), -8, "evaluate", "must be a whole number of at least 1, got -8"),
        (("name",), "acgna", "generate", "'acgna' is not a built-in model (did you mean acgan?)"),
    ],
    ids=["width", "name"],
)
def test_a_model_setting_config_json_records_and_the_model_refuses_names_the_file(
    originals, tmp_path, capsys, where, value, command, words
):
    shutil.copytree(originals / "run", tmp_path / "run")
    path = tmp_path / "run/config.json"
    document = json.loads(path.read_text())
    _set(("config", "model", *where), value)(document)
    path.write_text(json.dumps(document))
    extra = ["--samples", "20"] if command == "evaluate" else ["--n", "4", "--out", str(tmp_path / "g.png")]
    code, _, err = run_cli(capsys, command, str(tmp_path / "run"), *extra)
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert f"{path} is damaged or foreign (" in err and words in err and "restore the file" in err, err


def _last_line_step(step):
    def change(path):
        lines = path.read_text().splitlines()
        assert len(lines) >= 2, lines  # a step after another
        record = json.loads(lines[-1])
        record["step"] = step
        path.write_text("\n".join([*lines[:-1], json.dumps(record)]) + "\n")

    return change


# A log read back is checked as the other documents are: metrics.jsonl's last step at -3, or before the step above
# it, was resumed from with exit 0 (the fuzzer's "step -3"); quality.jsonl's curve was drawn backwards.
@pytest.mark.parametrize(
    "relative, step, words",
    [
        ("run/metrics.jsonl", -3, "step should be a whole number of at least 0, got -3"),
        ("run/metrics.jsonl", 1, "is damaged (line 2: step 1 after 2): remove the damaged line"),
        ("study/runs/fp32-seed0/quality.jsonl", 0, "step 0 after"),
    ],
    ids=["negative step", "metrics step going back", "quality step going back"],
)
def test_a_log_whose_steps_do_not_go_forward_is_one_line(originals, tmp_path, capsys, relative, step, words):
    folder = tmp_path / "copy"
    shutil.copytree(originals, folder)
    _last_line_step(step)(folder / relative)
    before = (folder / relative).read_bytes()
    if relative.startswith("run/"):
        code, _, err = run_cli(capsys, "train", "--resume", str(folder / "run"), "--steps", "8")
    else:
        code, _, err = run_cli(capsys, "report", str(folder / "study"))
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert relative.rsplit("/", 1)[-1] in err and words in err, err
    assert (folder / relative).read_bytes() == before  # the log is left as it was, for the person to mend


class _StoppedInItsCleanUp:
    """A Ctrl-C that lands in a garbage collector's callback (the fuzzer's during report's figures): Python can only
    print it as "Exception ignored" and go on."""

    def __init__(self, signum):
        self.signum = signum

    def __del__(self):
        raise KeyboardInterrupt(self.signum)


@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_a_stop_python_ignores_still_ends_the_command_as_stopped(
    originals, tmp_path, capsys, monkeypatch, signum, code
):
    import ampgan.study.report as report

    folder = tmp_path / "study"
    shutil.copytree(originals / "study", folder)
    render = report.render_report

    def interrupted_while_rendering(out_dir):
        _StoppedInItsCleanUp(signum)  # dropped at once: its __del__ raises where nothing can catch it
        return render(out_dir)

    monkeypatch.setattr(report, "render_report", interrupted_while_rendering)
    exit_code, out, err = run_cli(capsys, "report", str(folder))
    name = "SIGINT" if signum == 2 else "SIGTERM"
    assert exit_code == code and "Exception ignored" not in err and "Traceback" not in err, err
    assert err == f"stopped: {name} received where it could not stop the command; it finished first\n", err
    assert (folder / "report.html").is_file() and "report:" in out  # the report it finished is whole


def test_a_failing_report_leaves_the_folder_s_bookkeeping_as_it_found_it(originals, tmp_path, capsys):
    """report redraws its figures (the same bytes) before it reads the bench results it fails on: each write added
    lines to the manifest, a temporary file's and the figure's again (the fuzzer's "lost")."""
    from ampgan.files.manifest import MANIFEST

    folder = tmp_path / "study"
    shutil.copytree(originals / "study", folder)
    assert run_cli(capsys, "report", str(folder))[0] == 0
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert run_cli(capsys, "report", str(folder))[0] == 0  # a report drawn again is the same files, the same proof
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    _json_damage(folder / "bench/results.json", "wrong type", _set(("configs", 0, "batch_size"), -8), None)
    manifest = (folder / MANIFEST).read_bytes()
    code, _, err = run_cli(capsys, "report", str(folder))
    assert code == 2 and "batch_size should be a whole" in err and err.count("\n") == 1, err
    assert (folder / MANIFEST).read_bytes() == manifest


def test_a_cache_that_is_a_fifo_is_ignored(tmp_path):
    """A cache that is a FIFO blocked the command that read it forever: it is ignored, with a warning, and written
    anew."""
    from ampgan.files.jsonfile import read_cache_json

    os.mkfifo(tmp_path / "speedup-history.json")
    with pytest.warns(UserWarning, match=r"cannot be read \(a FIFO \(named pipe\), not a regular file\): ignoring it"):
        assert read_cache_json(tmp_path / "speedup-history.json") is None


# The damage fuzzer's "fifo": a FIFO in place of an output folder's marker or lock blocked project --overwrite (and
# every command that checks whose folder it writes into) forever, reading it.
@pytest.mark.parametrize("name", [".ampgan-folder", ".ampgan-lock"])
def test_a_fifo_in_place_of_a_folder_s_marker_or_lock_does_not_block_the_command(tmp_path, capsys, name):
    results, out = str(COMMITTED_BENCH / "results.json"), tmp_path / "projection"
    assert run_cli(capsys, "project", results, "--out", str(out))[0] == 0
    (out / name).unlink(missing_ok=True)
    os.mkfifo(out / name)
    code, _, err = run_cli(capsys, "project", results, "--out", str(out), "--overwrite")
    assert "Traceback" not in err and (code == 0 or code == 2 and err.startswith("error: ") and err.count("\n") == 1)
    assert (out / "projection.json").is_file() or name in err, err


def test_a_cached_evaluator_whose_description_is_out_of_range_is_trained_anew(tmp_path):
    """The cached evaluator's description is copied into quality.json: a damaged figure in it (train_seconds -8.07
    or "x": the damage fuzzer's checked "ok" found it written there) refuses the entry, with a warning."""
    import hashlib
    import io

    from ampgan.quality.evaluator import Evaluator, _cached_evaluator

    class Data:
        def content_sha256(self):
            return "data"

    buffer = io.BytesIO()
    torch.save(Evaluator(3, 10).state_dict(), buffer)
    weights, info_path = tmp_path / "e.pt", tmp_path / "e.json"
    weights.write_bytes(buffer.getvalue())
    info = {"held_out_accuracy": 0.9, "epochs": 2, "train_images": 10, "held_out_images": 5, "train_seconds": 8.07}
    info |= {"dataset_sha256": "data", "weights_sha256": hashlib.sha256(buffer.getvalue()).hexdigest()}
    info_path.write_text(json.dumps(info))
    assert _cached_evaluator(Evaluator(3, 10), weights, info_path, Data()) == info  # the undamaged entry is used
    for damage in ({"train_seconds": -8.07}, {"train_seconds": "x"}, {"held_out_accuracy": 1.5}, {"epochs": -2}):
        info_path.write_text(json.dumps(info | damage))
        with pytest.warns(UserWarning, match="is not usable .its description is damaged"):
            assert _cached_evaluator(Evaluator(3, 10), weights, info_path, Data()) is None, damage
