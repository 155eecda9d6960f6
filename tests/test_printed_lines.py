"""Every line ampgan prints goes through one function (errors.say), which escapes control characters: a name
from outside (a class folder, an --out path, a file name) can neither start a line of its own nor reach the
terminal as an escape sequence, and a name that is not UTF-8 prints instead of crashing."""

import ast
import json
import os
from pathlib import Path

import pytest
from conftest import run_cli
from fixtures import write_image_folder
from PIL import Image

from ampgan.errors import one_line

ROOT = Path(__file__).resolve().parents[1]

# Names the issue did not list: a terminal title (OSC), a C1 control, a right-to-left override, a carriage
# return that would overwrite the line, DEL; and the one it did (a newline starting a forged `error:`).
FORGED = (
    "x\nerror: forged line",
    "title\x1b]0;pwned\x07",
    "c1\x9b31m",
    "bidi\u202etxt.exe",
    "cr\rerror: over",
    "del\x7f",
)


def _shown(text: str) -> list[str]:
    lines = text.splitlines()
    for line in lines:
        assert all(c.isprintable() for c in line), repr(line)  # no control character reached the terminal
    return lines


def test_nothing_in_src_prints_but_say():
    """print (called, or a default log function), click.echo/secho, sys.stdout/stderr.write and tqdm.write
    print around the escaping: only errors.say may print (it is the printing layer)."""
    offenders = []
    for path in (ROOT / "src" / "ampgan").rglob("*.py"):
        # errors.py is the printing layer; __main__.py prints one constant line before anything (errors.py
        # included) is imported, so that a Ctrl-C at any moment is one line.
        if path.relative_to(ROOT / "src" / "ampgan").as_posix() in ("errors.py", "__main__.py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            function = node.func if isinstance(node, ast.Call) else None
            if isinstance(node, ast.Name) and node.id == "print":  # called, or passed on as a log function
                offenders.append(f"{path.name}:{node.lineno} print")
            elif isinstance(function, ast.Attribute) and function.attr in ("echo", "secho", "write"):
                owner = ast.unparse(function.value)
                if owner in ("click", "sys.stdout", "sys.stderr", "tqdm") or function.attr in ("echo", "secho"):
                    offenders.append(f"{path.name}:{node.lineno} {owner}.{function.attr}")
            elif isinstance(node, ast.keyword) and node.arg == "log" and ast.unparse(node.value) == "click.echo":
                offenders.append(f"{path.name}:{node.value.lineno} log=click.echo")
    assert offenders == [], offenders


def test_one_line_escapes_every_control_and_shows_undecodable_bytes():
    assert one_line("a\nb\r\x1b[2J\x9b\x7f\u202e\t") == "a\\nb\\r\\x1b[2J\\x9b\\x7f\\u202e\\t"
    undecodable = os.fsdecode(b"cats\xff\xfe")  # how Python names a file whose name is not UTF-8
    assert one_line(undecodable) == "cats\\xff\\xfe"
    assert one_line("ünïcode 猫 ok") == "ünïcode 猫 ok"  # printable text is left as it is


def test_data_info_and_grid_print_forged_class_names_escaped(tmp_path, capsys):
    root = write_image_folder(tmp_path / "data", classes=FORGED, per_class=1, size=8)
    code, out, err = run_cli(capsys, "data", "info", f"folder:{root}")
    assert code == 0, err
    lines = _shown(out)
    assert len(lines) == 1 + len(FORGED) + 2, lines  # header, one per class, source, hash
    assert not any(line.startswith(("error", "title", "cr")) for line in lines), lines
    assert any("x\\nerror: forged line" in line for line in lines)
    # A class folder whose name is not UTF-8 cannot become a class name in a document: one line, its bytes
    # escaped, naming a rename (errors.name_as_text).
    undecodable = os.fsencode(tmp_path / "data") + b"/bytes\xff\xfe"
    os.mkdir(undecodable)
    Image.new("RGB", (8, 8), (1, 2, 3)).save(os.fsdecode(undecodable + b"/img.png"))
    code, out, err = run_cli(capsys, "data", "info", f"folder:{root}")
    assert code == 2 and err.count("\n") == 1 and "bytes\\xff\\xfe" in err and "rename" in err, err
    os.rename(undecodable, os.fsencode(tmp_path / "data") + b"/renamed")
    grid = tmp_path / "grid\nerror: forged\x1b[2J.png"
    code, out, err = run_cli(capsys, "data", "grid", f"folder:{root}", "--out", str(grid), "--per-class", "1")
    assert code == 0, err
    assert len(_shown(out)) == 1 and out.startswith("wrote ") and "grid\\nerror: forged\\x1b[2J.png" in out
    assert grid.exists()


def test_train_prints_a_forged_out_and_forged_warnings_as_one_line_each(tmp_path, capsys):
    """--out with a newline and an escape sequence; a warning naming files whose names hold a newline and
    an escape sequence (the folder dataset's 'leaves out' warning)."""
    root = write_image_folder(tmp_path / "data", classes=("a", "b"), per_class=4, size=8)
    Image.new("RGB", (8, 8), (1, 2, 3)).save(root / "loose\nerror: forged.png")  # belongs to no class
    (root / "a" / "NOTES\x1b[2Jerror").write_text("not an image")  # no suffix: named by its name
    out = tmp_path / "run\nerror: forged\x1b]0;t\x07"
    code, stdout, err = run_cli(
        capsys,
        "train",
        "--dataset",
        f"folder:{root}",
        "--image-size",
        "28",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--batch-size",
        "4",
        "--steps",
        "1",
        "--device",
        "cpu",
        "--no-compile",
        "--no-channels-last",
        "--quiet",
        "--out",
        str(out),
    )
    assert code == 0, err
    printed, warned = _shown(stdout), _shown(err)
    assert len(printed) == 2 and printed[0].startswith("trained 1 steps"), printed
    assert printed[1] == f"run folder: {one_line(out)}" and "run\\nerror: forged\\x1b]0;t\\x07" in printed[1]
    assert len(warned) == 1 and warned[0].startswith("warning: folder:"), warned
    assert "loose\\nerror: forged.png" in warned[0] and "NOTES\\x1b[2Jerror" in warned[0], warned
    assert (out / "config.json").exists()


def test_json_output_stays_json_with_forged_names(tmp_path, capsys):
    """--dry-run's JSON (and every --json) goes through the same escaping and still parses: the names come
    back exactly, DEL included (JSON leaves it raw; say_json escapes it the JSON way)."""
    names = ("del\x7fname", "x\nerror: forged line", "title\x1b]0;pwned\x07")
    root = write_image_folder(tmp_path / "data", classes=names, per_class=1, size=8)
    code, out, err = run_cli(
        capsys, "train", "--dataset", f"folder:{root}", "--image-size", "28", "--dry-run", "--device", "cpu"
    )
    assert code == 0, err
    _shown(out)
    assert sorted(json.loads(out)["dataset"]["classes"]) == sorted(names)


def test_a_reader_that_went_away_neither_fails_nor_says_anything():
    """`ampgan config --list | head -1`: the pipe's reader is gone (closed here before ampgan starts, so its
    first line meets it): exit 0 and not a word on stderr, not exit 1 from a BrokenPipeError."""
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-P", "-m", "ampgan", "config", "--list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (0, b"")


@pytest.mark.parametrize(
    ("closed", "full"),
    [((2,), ()), ((0, 1, 2), ()), ((), (2,)), ((), (1, 2))],
    ids=["stderr-closed", "all-three-closed", "stderr-full", "stdout-and-stderr-full"],
)
def test_a_run_whose_standard_streams_are_closed_or_full_finishes_whole(tmp_path, closed, full):
    """`ampgan train ... 2>&-` (a cron line, a daemon): Python made sys.stderr None and the run died on its first
    use with exit 1 and no word, leaving a folder with an empty metrics.jsonl; the first file it opened took
    fd 2, where torch's C++ warnings write. `2>/dev/full` (a log on a full disk): the first warning's line ended
    the run, exit 1, before its folder was written; `>/dev/full`: a traceback after the run. Now a closed
    stream is /dev/null, one that refuses writes is given up, and the run finishes whole; its exit says that
    output was lost (a reviewer saw `>/dev/full` exit 0 with nothing said), one line where stderr still writes."""
    import subprocess
    import sys

    out = tmp_path / "run"
    args = ["train", "--dataset", "synthetic", "--steps", "2", "--batch-size", "8", "--device", "cpu"]
    args += ["--set", "model.width=8", "--set", "model.z_dim=16", "--no-channels-last", "--no-compile"]
    with open("/dev/full", "w") as disk_full:
        result = subprocess.run(
            [sys.executable, "-P", "-m", "ampgan", *args, "--out", str(out)],
            preexec_fn=lambda: [os.close(fd) for fd in closed],
            stdout=disk_full if 1 in full else None if 1 in closed else subprocess.DEVNULL,
            stderr=disk_full if 2 in full else None,
            timeout=300,
        )
    assert result.returncode == (2 if full else 0)
    names = {path.name for path in out.iterdir()}
    assert {"checkpoints", "config.json", "generator.safetensors", "metrics.jsonl", "samples"} <= names
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()][-1] == 2


def test_output_a_full_disk_refused_is_an_error_and_a_closed_pipe_is_not(tmp_path):
    """`ampgan train --dry-run > plan.txt` on a full disk printed nothing and exited 0 (its output is the answer);
    a reader that went away (`| head -1`) read what it wanted: exit 0 still."""
    import subprocess
    import sys

    args = [sys.executable, "-P", "-m", "ampgan", "train", "--dataset", "synthetic", "--batch-size", "8"]
    args += ["--device", "cpu", "--set", "model.width=8", "--dry-run", "--out", str(tmp_path / "run")]
    with open("/dev/full", "w") as disk_full:
        full = subprocess.run(args, stdout=disk_full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert full.returncode == 2 and "Traceback" not in full.stderr
    assert full.stderr.splitlines()[-1] == (
        "error: the command's work is done and its files are whole, but stdout (No space left on device) "
        "refused its output"
    )
    piped = subprocess.run(
        f"{' '.join(args)} | head -c 1 >/dev/null; exit ${{PIPESTATUS[0]}}",
        shell=True,
        executable="/bin/bash",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0 and "Traceback" not in piped.stderr
