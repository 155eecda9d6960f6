"""Issue 47's classes 8 and 9: what used to end in a traceback (exit 1), or in a line that names the wrong
problem, ends in one line that names the problem and the fix (exit 2), or works.

Each rule lives in one place; these tests try it on variants the issue did not name."""

from __future__ import annotations

import json
import os
import signal
import warnings
from pathlib import Path

import pytest
from conftest import run_cli

from ampgan.cli import NOTHING_HALF_WRITTEN
from ampgan.errors import AmpganError, AmpganWarning
from ampgan.files.jsonfile import (
    MAX_DEPTH,
    DuplicateKey,
    TooDeep,
    parse_json,
    parse_toml,
    read_cache_json,
    read_jsonl,
)

TINY = ("--steps", "2", "--width", "8", "--batch-size", "8", "--precision", "fp32", "--dataset", "synthetic")


def _one_error_line(code, err, *words):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


# --- the one JSON/TOML reader: depth, duplicate keys ---------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,  # past Python's recursion limit: was a RecursionError
        '{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1),  # parses, but deeper than any document
        '[{"a":' * 60 + "1" + "}]" * 60,  # mixed lists and tables
    ],
)
def test_json_nested_too_deep_is_one_reason(text):
    with pytest.raises(TooDeep):
        parse_json(text)


def test_json_at_the_depth_limit_is_read():
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


@pytest.mark.parametrize("text", ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b=" * 5000 + "1" + "}" * 5000])
def test_toml_nested_too_deep_is_one_reason(text):
    with pytest.raises(TooDeep):
        parse_toml(text)


@pytest.mark.parametrize("text", ['{"a": 1, "a": 1}', '{"x": [{"b": 1, "c": 2, "b": 3}]}'])
def test_json_duplicate_key_is_refused_naming_it(text):
    with pytest.raises(DuplicateKey, match="appears twice"):
        parse_json(text)


def test_jsonl_line_nested_too_deep_in_the_middle_is_one_error(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n' + "[" * 50_000 + "]" * 50_000 + '\n{"step": 2}\n')
    with pytest.raises(AmpganError, match="line 2 is not a JSON record"):
        read_jsonl(path)


@pytest.mark.parametrize("content", ["[" * 100_000, '{"format": 1, "format": 2}', "\udcff"])
def test_a_damaged_cache_is_a_warning_and_none(tmp_path, content):
    path = tmp_path / "cache.json"
    path.write_bytes(content.encode("utf-8", errors="surrogateescape"))
    with pytest.warns(AmpganWarning, match="is damaged .*writes it anew"):
        assert read_cache_json(path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_cache_json(tmp_path / "absent.json") is None  # no cache yet: nothing to say


@pytest.mark.parametrize("obstacle", ["its folder is a file", "a folder", "not readable"])
def test_a_cache_that_cannot_be_read_is_not_called_damaged(tmp_path, obstacle):
    """XDG_CACHE_HOME pointing at a file said 'the cache ... is damaged (NotADirectoryError)'."""
    path = tmp_path / "cache.json"
    if obstacle == "its folder is a file":
        (tmp_path / "xdg").write_text("a file")
        path = tmp_path / "xdg" / "ampgan" / "cache.json"
    elif obstacle == "a folder":
        path.mkdir()
    else:
        path.write_text("{}")
        path.chmod(0)
        if os.access(path, os.R_OK):
            pytest.skip("running as root: every file is readable")
    with pytest.warns(AmpganWarning, match=r"cannot be read \(") as said:
        assert read_cache_json(path) is None
    assert "damaged" not in str(said[0].message)


def test_the_decision_caches_rebuild_a_deep_file(tmp_path):
    from ampgan.speed.cache import DecisionCache
    from ampgan.speed.history import SpeedupHistory

    for cache in (DecisionCache(tmp_path), SpeedupHistory(tmp_path)):
        cache.path.write_text("[" * 100_000 + "]" * 100_000)
    decisions = DecisionCache(tmp_path)
    with pytest.warns(AmpganWarning, match="precision-decisions.json is damaged"):
        assert decisions.get("key") is None
        decisions.put("key", {"chosen": "fp32"})
    assert decisions.get("key") == {"chosen": "fp32"}
    with pytest.warns(AmpganWarning, match="speedup-history.json is damaged"):
        SpeedupHistory(tmp_path)._read()


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("deep.json", '{"a":' * 5000 + "1" + "}" * 5000, ["deep.json", "nests deeper than"]),
        ("deep.toml", "[budget]\nx = " + "[" * 3000 + "]" * 3000, ["deep.toml", "nests deeper than"]),
        ("twice.json", '{"budget": {"batch_size": 8, "steps": 2, "batch_size": 16}}', ["'batch_size'", "twice"]),
        ("twice.json", '{"model": {"name": "dcgan"}, "model": {"name": "acgan"}}', ["'model'", "twice"]),
    ],
)
def test_a_config_file_that_cannot_be_read_is_one_line(capsys, tmp_path, name, content, words):
    (tmp_path / name).write_text(content)
    code, _, err = run_cli(capsys, "train", "--config", str(tmp_path / name), *TINY, "--out", str(tmp_path / "r"))
    _one_error_line(code, err, *words)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("value", ["[" * 3000 + "]" * 3000, '{"a": 1, "a": 2}'])
def test_a_set_value_nested_too_deep_or_with_a_key_twice_is_one_line(capsys, tmp_path, value):
    code, _, err = run_cli(capsys, "train", *TINY, "--set", f"model.width={value}", "--out", str(tmp_path / "r"))
    _one_error_line(code, err, "--set value")


@pytest.mark.parametrize("document", ["compare.json", "study.json"])
def test_a_study_document_nested_too_deep_is_one_line(capsys, tmp_path, document):
    (tmp_path / document).write_text("[" * 100_000 + "]" * 100_000)
    code, _, err = run_cli(capsys, "report", str(tmp_path))
    assert code == 2 and "Traceback" not in err and err.startswith("error: "), err


# --- numbers in a person's tables: finite, whole where counted, within what means something ------------


@pytest.mark.parametrize("m", ["inf", "-Infinity", "1e300", "9" * 400, "NaN", "-5", "2.5", "4294967296"])
def test_a_kernel_table_dimension_that_means_nothing_is_one_line(capsys, tmp_path, m):
    table = tmp_path / "k.csv"
    table.write_text(f"name,op,m,n,k\nk1,gemm,{m},64,64\n")
    code, _, err = run_cli(capsys, "project", "--kernels", str(table), "--out", str(tmp_path / "p"))
    line = _one_error_line(code, err, "k.csv line 2 (k1): m is", "2147483647")
    assert len(line) < 250  # a 400-digit cell is shown cut short


@pytest.mark.parametrize(
    "cells, column",
    [
        ("1,four,0.5", "vcpus"),
        ("1,4,inf", "price_per_hour"),
        ("1,4,1e308", "price_per_hour"),
        ("one,4,0.5", "gpu_count"),
        ("1e12,4,0.5", "gpu_count"),
        ("1,-3,0.5", "vcpus"),
    ],
)
def test_a_price_catalog_cell_that_is_no_number_is_one_line(capsys, tmp_path, cells, column):
    prices = tmp_path / "p.csv"
    prices.write_text(
        "provider,region,instance,hardware,gpu_count,vcpus,price_per_hour,currency,source,date\n"
        f"aws,us,x1,T4,{cells},USD,s,2025-01\n"
    )
    code, _, err = run_cli(capsys, "cost", "--prices", str(prices), "--list-instances")
    _one_error_line(code, err, "p.csv line 2:", f"{column} is")


def test_a_skypilot_accelerator_count_that_is_infinite_is_one_line(tmp_path):
    from ampgan.cost.skypilot import _count

    with pytest.raises(AmpganError, match="AcceleratorCount is 'inf'"):
        _count({"AcceleratorCount": "inf"}, tmp_path / "vms.csv", 3)


# --- sizes refused before anything is allocated ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    from ampgan.cli import main

    out = tmp_path_factory.mktemp("run") / "run"
    try:
        # Module-scoped: made before the autouse stand-ins; the flags skip the decisions they would skip.
        main(["train", *TINY, "--no-channels-last", "--no-compile", "--out", str(out)])
    except SystemExit as exit_:
        assert not exit_.code
    return out


def test_generate_more_samples_than_memory_holds_is_refused_first(capsys, tmp_path, tiny_run):
    out = tmp_path / "g.png"
    code, _, err = run_cli(capsys, "generate", str(tiny_run), "--class", "0", "--n", "1000000000", "--out", str(out))
    _one_error_line(code, err, "--n 1000000000 needs at least", "TiB", "memory available now", "or fewer")
    assert not out.exists()


def test_generate_on_a_machine_with_little_memory_names_what_fits(capsys, tmp_path, tiny_run, monkeypatch):
    import ampgan.system.memory as memory

    # 1 MiB free: 64 samples of 3x32x32 (40 KiB each held at once) do not fit; the line says how many do.
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 2**20)
    code, _, err = run_cli(
        capsys, "generate", str(tiny_run), "--class", "0", "--n", "64", "--out", str(tmp_path / "g.npz")
    )
    line = _one_error_line(code, err, "--n 64", "1.0 MiB")
    largest = int(line.split("use --n ")[1].split()[0])
    assert 0 < largest < 64
    assert (
        run_cli(
            capsys, "generate", str(tiny_run), "--class", "0", "--n", str(largest), "--out", str(tmp_path / "g.npz")
        )[0]
        == 0
    )


def test_evaluate_more_samples_than_memory_holds_is_refused_first(capsys, tiny_run):
    code, _, err = run_cli(capsys, "evaluate", str(tiny_run), "--samples", "1000000000")
    _one_error_line(code, err, "--samples 1000000000 needs at least", "or fewer")
    assert not (tiny_run / "quality.json").exists()


def test_a_study_evaluating_more_samples_than_fit_is_refused_before_any_run():
    from ampgan.quality.evaluator import refuse_samples_that_cannot_fit

    with pytest.raises(
        AmpganError, match=r"--set compare.eval_samples=100000000000 needs .* compare.eval_samples=\d+ or"
    ):
        refuse_samples_that_cannot_fit(10**11, (3, 32, 32), "--set compare.eval_samples=")


@pytest.mark.parametrize(
    "args, words",
    [
        (("--set", "logging.samples_per_class=10000000"), ["logging.samples_per_class=10000000", "sample grid"]),
        (("--model", "dcgan", "--set", "logging.samples_per_class=1000000"), ["samples_per_class=1000000", "or fewer"]),
        (("--image-size", "65536"), ["--image-size 65536", "or less"]),
        (("--dataset", "digits", "--image-size", "100000"), ["--image-size 100000", "1797 images"]),
    ],
)
def test_a_size_beyond_the_machine_is_refused_before_allocating(capsys, tmp_path, args, words):
    code, _, err = run_cli(capsys, "train", *TINY, *args, "--out", str(tmp_path / "r"))
    _one_error_line(code, err, "memory available now", *words)
    assert not (tmp_path / "r").exists()


# --- environment variables: one declaration each, checked before any command -----------------------------


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("AMPGAN_COMPILE_BACKEND", "bogus", ["a torch.compile backend", "inductor"]),
        ("AMPGAN_COLLECTIVE_TIMEOUT_S", "abc", ["whole seconds"]),
        ("AMPGAN_CONTROL_TIMEOUT_S", "-5", ["whole seconds, 1 or more"]),
        ("AMPGAN_DETERMINISTIC", "maybe", ["1 or 0"]),
        ("AMPGAN_CACHE_DIR", "{file}", ["a folder"]),
        # read by torch when it loads, where a value it cannot read is silently every core (OMP) or one (MKL)
        ("OMP_NUM_THREADS", "abc", ["a whole number of threads"]),
        ("OMP_NUM_THREADS", "0", ["1 or more"]),
        ("OMP_NUM_THREADS", "2,x", ["a whole number of threads"]),
        ("MKL_NUM_THREADS", "x", ["a whole number of threads"]),
        ("MKL_NUM_THREADS", "-1", ["1 or more"]),
        ("TORCHINDUCTOR_CACHE_DIR", "{file}", ["a folder"]),  # torch._dynamo's import failed on it (traceback)
    ],
)
def test_an_environment_variable_it_cannot_take_is_one_line_before_any_command(
    capsys, tmp_path, monkeypatch, name, value, words
):
    (tmp_path / "a-file").write_text("x")
    monkeypatch.setenv(name, value.format(file=tmp_path / "a-file"))
    for command in (["config", "--list"], ["train", *TINY, "--out", str(tmp_path / "r")]):
        code, out, err = run_cli(capsys, *command)
        _one_error_line(code, err, name, *words)
        assert out == ""
    assert not (tmp_path / "r").exists()


def test_every_ampgan_variable_read_in_the_source_is_declared_once():
    import re

    from ampgan.env import VARIABLES

    source = Path(__file__).parents[1] / "src" / "ampgan"
    read = {name for path in source.rglob("*.py") for name in re.findall(r"\bAMPGAN_[A-Z_]+\b", path.read_text())}
    assert read == {name for name in VARIABLES if name.startswith("AMPGAN_")}


@pytest.mark.parametrize(
    "variables, given",
    [
        ({}, None),
        ({"OMP_NUM_THREADS": "4,2"}, "OMP_NUM_THREADS"),  # OpenMP's nested levels
        ({"MKL_NUM_THREADS": "1"}, "MKL_NUM_THREADS"),  # torch runs on one thread: the user's choice, reported
        ({"OMP_NUM_THREADS": " 3", "MKL_NUM_THREADS": "1"}, "OMP_NUM_THREADS"),  # torch reads OMP's first
        ({"OMP_NUM_THREADS": ""}, None),  # empty: unset
    ],
)
def test_the_thread_count_a_variable_fixes_is_kept_and_named(monkeypatch, variables, given):
    from ampgan.env import check_environment
    from ampgan.system.cpu_tuning import threads_given

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    check_environment()
    assert threads_given() == given


def test_a_thread_count_it_cannot_take_is_refused_before_torch_loads(tmp_path):
    """The console script checks the environment before importing the commands: libgomp's own complaint (printed
    when torch loads) never comes before ampgan's line, and nothing runs."""
    import subprocess
    import sys

    environment = dict(
        os.environ,
        OMP_NUM_THREADS="abc",
        PYTHONPATH=str(Path(__file__).parents[1] / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import sys; from ampgan.__main__ import main; main(sys.argv[1:]); print('torch' in sys.modules)",
            "config",
            "--list",
        ],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    _one_error_line(done.returncode, done.stderr, "OMP_NUM_THREADS='abc'", "a whole number of threads")
    assert done.stdout == ""


@pytest.mark.parametrize("umask", [0o777, 0o277])
def test_a_umask_that_takes_the_owners_own_permission_is_refused_before_anything_is_made(tmp_path, umask):
    """Under umask 0777 ampgan made --out as d--------- and then could not write in it (0277: read-only files):
    a misleading 'choose a writable folder' for another user, and an empty folder left behind."""
    import subprocess
    import sys

    from fixtures import TINY_RUN

    environment = dict(
        os.environ,
        PYTHONPATH=str(Path(__file__).parents[1] / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-P", "-m", "ampgan", "train", "--out", str(run), "--steps", "2", *TINY_RUN],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: os.umask(umask),
    )
    _one_error_line(done.returncode, done.stderr, f"the umask {umask:04o}", "umask 022")
    assert not run.exists()


@pytest.mark.parametrize("value, expected", [("", False), ("0", False), ("off", False), ("1", True), ("Yes", True)])
def test_a_switch_variable_reads_the_usual_spellings(monkeypatch, value, expected):
    from ampgan.env import env_value

    monkeypatch.setenv("AMPGAN_DETERMINISTIC", value)
    assert env_value("AMPGAN_DETERMINISTIC") is expected


# --- Ctrl-C at any moment, the first second included -------------------------------------------------------

# Run as the console script does (`from ENTRY import main; sys.exit(main())`, ENTRY as pyproject.toml names it),
# with a real SIGINT sent to the process the moment it first imports the named module: while Python loads the
# commands (click, torch) or inside a command's own lazy import.
_INTERRUPT_AT_IMPORT = """
import os, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == sys.argv[1]:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), getattr(signal, sys.argv[2]))
        return None

sys.meta_path.insert(0, Interrupt())
from {entry} import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize(
    "module, command",
    [
        ("click", ["config", "--list"]),
        ("torch", ["data", "info", "synthetic"]),
        ("ampgan.quality.assess", ["evaluate", "no-such-run"]),
    ],
)
@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_loading_is_one_line_and_its_exit_code(tmp_path, module, command, name, code):
    import subprocess
    import sys
    import tomllib

    root = Path(__file__).parents[1]
    entry = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]["ampgan"].split(":")[0]
    source = str(root / "src")
    environment = dict(os.environ, PYTHONPATH=source + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_AT_IMPORT.format(entry=entry), module, name, *command],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.splitlines()[-1] == f"stopped: {name} {NOTHING_HALF_WRITTEN}", done.stderr


@pytest.mark.parametrize("signum", [None, signal.SIGTERM])  # a Ctrl-C; a SIGTERM as ampgan/__main__.py raises it
def test_a_signal_after_the_out_folder_is_claimed_gives_the_folder_back(capsys, tmp_path, monkeypatch, signum):
    """Between the claim of --out and the training loop's own handler (loading data), a Ctrl-C or a SIGTERM
    (a scheduler's) unwinds: the new folder is removed, one line names the signal, the shell's exit code."""
    import ampgan.speed.planned_run as planned_run

    def interrupted(*args, **kwargs):
        assert (tmp_path / "run" / ".ampgan-folder").exists()  # claimed: the moment the signal comes
        raise KeyboardInterrupt(*([signum] if signum else []))

    monkeypatch.setattr(planned_run, "warn_if_not_faster", interrupted)
    code, out, err = run_cli(
        capsys, "train", *TINY[:-2], "--no-channels-last", "--no-compile", "--out", str(tmp_path / "run")
    )
    name = signal.Signals(signum or signal.SIGINT).name
    assert code == 128 + (signum or signal.SIGINT) and err.splitlines()[-1] == f"stopped: {name} {NOTHING_HALF_WRITTEN}"
    assert not (tmp_path / "run").exists() and list(tmp_path.iterdir()) == []


# --- names that are not text ---------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"d\xffog", b"\xe9t\xe9", b"ok\xc3"])  # Latin-1 bytes, a cut multi-byte letter
@pytest.mark.parametrize("command", [["data", "info"], ["train", *TINY[:-2]]])
def test_a_class_folder_whose_name_is_not_utf8_is_one_line(capsys, tmp_path, raw, command):
    from fixtures import write_image_folder

    root = write_image_folder(tmp_path / "images", classes=("cats", "dogs"), per_class=12, size=16)
    (root / "dogs").rename(root / os.fsdecode(raw))
    args = [*command, f"folder:{root}"] if command[0] == "data" else [*command, "--dataset", f"folder:{root}"]
    code, _, err = run_cli(capsys, *args, *(["--out", str(tmp_path / "r")] if command[0] == "train" else []))
    _one_error_line(code, err, "class folder", repr(raw), "not valid UTF-8", "rename it")


def test_an_image_whose_name_is_not_utf8_is_read(capsys, tmp_path):
    from fixtures import write_image_folder

    root = write_image_folder(tmp_path / "images", classes=("cats", "dogs"), per_class=12, size=16)
    first = sorted((root / "cats").iterdir())[0]
    first.rename(first.with_name(os.fsdecode(b"\xff" + os.fsencode(first.name))))
    code, out, err = run_cli(capsys, "data", "info", f"folder:{root}")
    assert code == 0, err
    assert "cats" in out and "12" in out


def test_a_model_file_whose_name_is_not_utf8_is_one_line(capsys, tmp_path):
    model = tmp_path / os.fsdecode(b"gan\xff.py")
    model.write_text("raise SystemExit('imported')\n")
    code, _, err = run_cli(capsys, "train", *TINY, "--model", f"{model}:build", "--out", str(tmp_path / "r"))
    _one_error_line(code, err, "model file", "not valid UTF-8")


# --- messages that name the right problem -------------------------------------------------------------------


@pytest.mark.parametrize(
    "where, words",
    [
        ("home", "is your home folder"),
        ("root", "is the root folder"),
        ("here", "is the current folder"),
        ("parent", "is a folder above the current one"),
    ],
)
def test_a_dangerous_out_is_named_for_what_it_is(capsys, tmp_path, monkeypatch, where, words):
    home = tmp_path / "home"
    (home / "project" / "sub").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "project" / "sub")
    out = {"home": str(home), "root": "/", "here": ".", "parent": ".."}[where]
    code, _, err = run_cli(capsys, "train", *TINY, "--out", out)
    _one_error_line(code, err, words)


@pytest.mark.parametrize(
    "command",
    [
        lambda special: ["train", *TINY, "--config", special],
        lambda special: ["cost", "--prices", special, "--list-instances"],
        lambda special: ["project", "--kernels", special, "--out", special + "-out"],
        lambda special: ["train", *TINY, "--model", f"{special}:build", "--out", special + "-out"],
        lambda special: ["report", special],
    ],
)
@pytest.mark.parametrize("kind", ["fifo", "socket"])
def test_a_special_file_given_as_a_file_is_called_what_it_is(capsys, tmp_path, command, kind):
    import socket

    special = tmp_path / "given.csv"
    if kind == "fifo":
        os.mkfifo(special)
        named = "a FIFO"
    else:
        holder = socket.socket(socket.AF_UNIX)
        holder.bind(str(special))
        named = "a socket"
    args = command(str(special))
    if args[0] == "report":  # a study folder whose compare.json is the special file
        folder = tmp_path / "study"
        folder.mkdir()
        special.rename(folder / "compare.json")
        args, special = ["report", str(folder)], folder / "compare.json"
    code, _, err = run_cli(capsys, *args)  # a FIFO opened for reading would block here forever
    _one_error_line(code, err, named, "not a regular file")


def test_out_that_is_a_fifo_is_called_a_fifo(capsys, tmp_path):
    os.mkfifo(tmp_path / "out")
    code, _, err = run_cli(capsys, "train", *TINY, "--out", str(tmp_path / "out"))
    _one_error_line(code, err, "is a FIFO (named pipe), not a folder")


@pytest.mark.parametrize(
    "found, words",
    [
        ("ampgan-compare/2", ["written by a newer ampgan", "ampgan-compare/2", "upgrade"]),
        ("ampgan-compare/17", ["written by a newer ampgan", "upgrade"]),
        ("ampgan-compare/0", ["written by an older ampgan", "rerun"]),
        ("ampgan-bench/1", ["is not an ampgan comparison", "'ampgan-bench/1'"]),
        (None, ["is not an ampgan comparison", "none"]),
    ],
)
def test_a_versioned_document_says_which_version_wrote_it(found, words):
    from ampgan.files.schema import check_format

    with pytest.raises(AmpganError) as error:
        check_format({"format": found}, "ampgan-compare/1", "x/compare.json", "an ampgan comparison", "rerun")
    for word in words:
        assert word in str(error.value)


@pytest.mark.parametrize(
    "name, newer, command",
    [
        ("compare.json", "ampgan-compare/2", lambda folder: ["report", str(folder)]),
        (
            "results.json",
            "ampgan-bench/9",
            lambda folder: ["cost", str(folder / "results.json"), "--price-per-hour", "1"],
        ),
        ("results.json", "ampgan-bench/2", lambda folder: ["project", str(folder / "results.json")]),
        ("study.json", "ampgan-study/3", lambda folder: ["compare", "--resume", str(folder)]),
    ],
)
def test_a_document_from_a_newer_ampgan_says_upgrade(capsys, tmp_path, name, newer, command):
    folder = tmp_path / "from-the-future"
    folder.mkdir()
    (folder / name).write_text(f'{{"format": "{newer}", "configs": [], "anything": "new"}}')
    code, _, err = run_cli(capsys, *command(folder))
    _one_error_line(code, err, "written by a newer ampgan", newer, "upgrade ampgan")


@pytest.mark.parametrize("rest", [{}, {"config": {"data": {}}}, {"layout": "something new"}])
def test_a_run_folder_from_a_newer_ampgan_says_upgrade_whatever_else_it_holds(capsys, tmp_path, rest):
    """The run format's version is read before the rest: a newer ampgan may lay out config.json differently, and
    its reader must hear "upgrade", not "damaged"."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"format_version": 99, **rest}))
    code, _, err = run_cli(capsys, "train", "--resume", str(run))
    _one_error_line(code, err, "written by a newer ampgan", "run format 99", "upgrade ampgan")


# --- numbers a person or a damaged file writes with digits int() does not read -----------------------------

# str.isdigit() is True for superscripts and other digits int() refuses ('²', '①'): a check made with it let
# them through to int(), a ValueError traceback. isdecimal() is exactly what int() reads ('٣' is 3).
ODD_DIGITS = ["²", "①", "1²", "𝟚x"]


@pytest.mark.parametrize("text", ODD_DIGITS)
def test_a_count_in_odd_digits_is_one_line(capsys, tmp_path, text):
    code, _, err = run_cli(capsys, "train", *TINY, "--checkpoint-every", text, "--out", str(tmp_path / "r"))
    _one_error_line(code, err, "--checkpoint-every", repr(text))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("text", ODD_DIGITS)
def test_a_format_version_in_odd_digits_is_not_a_version(text):
    from ampgan.files.schema import check_format

    with pytest.raises(AmpganError, match="is not an ampgan comparison"):
        check_format({"format": f"ampgan-compare/{text}"}, "ampgan-compare/1", "c.json", "an ampgan comparison", "")


@pytest.mark.parametrize("text", ODD_DIGITS)
def test_a_class_in_odd_digits_is_no_class(text):
    from ampgan.training.trained import class_index

    with pytest.raises(AmpganError, match="no class"):
        class_index(["zero", "one", "two"], text)
    assert class_index(["zero", "one", "two", "٣"], "٣") == 3  # a name first
    assert class_index(["zero", "one", "two"], "٢") == 2  # Arabic-Indic two: a digit int() reads


def test_a_folder_moved_aside_with_odd_digits_is_not_one_of_ampgans(tmp_path):
    from ampgan.runs.claim import _asides

    for suffix in ["12", *ODD_DIGITS]:
        (tmp_path / f".out.replaced-{suffix}").mkdir()
    assert _asides(tmp_path / "out") == [(tmp_path / ".out.replaced-12", 12)]


def test_no_digit_check_in_the_source_lets_through_what_int_refuses():
    source = Path(__file__).parents[1] / "src" / "ampgan"
    assert [path.name for path in source.rglob("*.py") if ".isdigit()" in path.read_text()] == []


# --- a folder another ampgan is still writing ----------------------------------------------------------------


@pytest.mark.parametrize(
    "command, folder",
    [
        (lambda d: ["report", str(d)], "study"),  # a report asked of a study that runs
        (lambda d: ["cost", str(d / "bench" / "results.json"), "--price-per-hour", "1"], "study"),
        (lambda d: ["project", str(d / "bench" / "results.json")], "study"),
        (lambda d: ["project", str(d / "bench" / "results.json")], "study/bench"),  # a bench that runs
        (lambda d: ["evaluate", str(d / "runs" / "fp32-seed0")], "study/runs/fp32-seed0"),
    ],
)
def test_a_file_not_yet_written_by_a_running_ampgan_says_so(capsys, tmp_path, command, folder):
    """It said "has no compare.json: give the --out folder of an 'ampgan compare' run" (or "run 'ampgan bench'
    first") of the very folder the other process was filling."""
    import fcntl

    from ampgan.runs.claim import LOCK, FolderLock

    study = tmp_path / "study"
    (tmp_path / folder).mkdir(parents=True)
    held = os.open(tmp_path / folder / LOCK, os.O_RDWR | os.O_CREAT)  # as another process holds it: its pid
    os.write(held, b"4242")
    fcntl.flock(held, fcntl.LOCK_EX)
    try:
        code, _, err = run_cli(capsys, *command(study))
    finally:
        os.close(held)
    _one_error_line(code, err, "is not written yet", "ampgan process 4242 is writing", "finished")
    code, _, err = run_cli(capsys, *command(study))  # no process at work: the folder is simply not one
    assert code == 2 and "is not written yet" not in err, err
    # This process's own lock (a study resumed after its bench folder was deleted) is no writer to wait for: it
    # said 'ampgan process <its own pid> is writing study/bench; run this again when it has finished'.
    lock = FolderLock(tmp_path / folder)
    try:
        code, _, err = run_cli(capsys, *command(study))
    finally:
        lock.release()
    assert code == 2 and "is not written yet" not in err, err


def test_a_seed_past_64_bits_is_one_line_wherever_it_is_given(tmp_path, capsys):
    """torch seeds its generators with 64 bits: --seed 2**64 (train's flag, its --set, generate's) ended in an
    OverflowError traceback, and a study's last seed (seed + seeds - 1) could pass the largest one."""
    from fixtures import TINY_RUN

    run, too_big, MAX_SEED = tmp_path / "run", str(2**64), 2**63 - 1  # noqa: N806 - ampgan.seeds' name
    assert run_cli(capsys, "train", "--out", str(run), "--steps", "2", "--seed", str(MAX_SEED), *TINY_RUN)[0] == 0
    for args in (
        ["train", "--out", str(tmp_path / "a"), "--steps", "2", "--seed", too_big, *TINY_RUN],
        ["train", "--out", str(tmp_path / "b"), "--steps", "2", "--set", f"seed={too_big}", *TINY_RUN],
        ["generate", str(run), "--class", "0", "--n", "4", "--seed", too_big, "--out", str(tmp_path / "g.png")],
        ["compare", "--out", str(tmp_path / "c"), "--seed", str(MAX_SEED), "--seeds", "2", *TINY_RUN],
    ):
        code, _, err = run_cli(capsys, *args)
        _one_error_line(code, err, str(MAX_SEED))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("option", ["--width=99999999999999999999999", "--set=model.z_dim=9223372036854775807"])
def test_a_built_in_model_an_option_breaks_names_the_option_not_its_code(tmp_path, capsys, option):
    """A width or noise size past int64 overflowed a tensor shape inside acgan: the line said 'fix the model
    function', which is ampgan's own code; the fix is the option."""
    from fixtures import TINY_RUN

    code, _, err = run_cli(capsys, "train", "--out", str(tmp_path / "run"), "--steps", "2", *TINY_RUN, option)
    line = _one_error_line(code, err, "model acgan raised", "check its options (width=")
    assert option.rpartition("=")[2] in line and "fix the model function" not in line
    assert not (tmp_path / "run").exists()


def test_the_umask_is_read_without_being_changed(monkeypatch):
    """The umask check read the mask by setting 022 for a moment (Python's only way), which a file another
    thread made in between would take; on Linux it reads /proc/self/status."""
    import ampgan.env as env

    old = os.umask(0o027)
    try:
        set_to = []
        real = os.umask
        monkeypatch.setattr(env.os, "umask", lambda mask: set_to.append(mask) or real(mask))
        assert env._umask() == 0o027
        if Path("/proc/self/status").is_file():
            assert set_to == []  # read, not set
    finally:
        os.umask(old)


def test_the_nproc_launcher_passes_every_stop_signal_on_to_its_ranks(monkeypatch):
    """torch's agent handles TERM, INT, HUP and QUIT by default; a scheduler's SIGUSR1 it turned into SIGTERM for the
    ranks (exit 143, not 128+10). The launch asks it to handle every one of ampgan's STOP_SIGNALS."""
    import signal

    import torch.distributed.launcher.api as launcher_api

    from ampgan.errors import STOP_SIGNALS
    from ampgan.training import launcher

    if "signals_to_handle" not in launcher_api.LaunchConfig.__dataclass_fields__:
        pytest.skip("this torch's launcher takes no signals_to_handle")
    seen = []

    def elastic_launch(config, entrypoint):
        seen.append(config.signals_to_handle)
        return lambda *arguments: None

    monkeypatch.setattr(launcher_api, "elastic_launch", elastic_launch)
    try:
        launcher.launch_on_this_machine(2, ["train", "--steps", "1"])
    except Exception:  # no receipts: the ranks did not run (the launch itself is what is checked here)
        pass
    assert seen and set(seen[0].split(",")) == {signal.Signals(s).name for s in STOP_SIGNALS}
    assert {"SIGUSR1", "SIGQUIT"} <= set(seen[0].split(","))


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "{run}", "--samples", "4", "--evaluator-cache="],  # trained its evaluator into the current folder
        ["train", "--dataset", "quickdraw", "--data-dir=", "--download", "--dry-run"],  # read (or fetched into) it
        ["train", "--dataset", "mnist", "--set", "data.data_dir=", "--dry-run"],
        ["generate", "{run}", "--out="],
        ["report", ""],
        ["train", "--model=:build", "--dry-run"],  # 'importing  failed: ValueError: Empty module name'
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_folder(tiny_run, tmp_path, capsys, monkeypatch, command):
    """'--evaluator-cache=$CACHE' or '--data-dir=$DIR' with the variable unset gave '', which names the current
    folder: ampgan wrote its evaluator, or looked for and downloaded data, there. One line, nothing written."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *[word.format(run=tiny_run) for word in command])
    assert (
        code == 2
        and err.count("\n") == 1
        and any(s in err for s in ("is empty", "needs --data-dir DIR", "names no file"))
    ), err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [
        ("cost", "results.json", "--price-per-hour", "1e308", "--out", "cost"),
        ("compare", "--dataset", "synthetic", "--set", "compare.price_per_hour=1e308", "--out", "study"),
    ],
)
def test_an_hourly_price_past_the_catalogs_bound_is_one_line(capsys, tmp_path, monkeypatch, args):
    """A price of 1e308 per hour was taken as "positive and finite": the cost it priced ran to infinity, and
    cost.json and a study's compare.json were written with Infinity and NaN in them (not JSON)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *args)
    assert _one_error_line(code, err, "price_per_hour" if args[0] == "compare" else "--price-per-hour", "at most")
    assert os.listdir(tmp_path) == []


# A command's own setting, given out of its kind's range: (the command line's args, the API's function and
# keywords). Each check lived in the command line's types alone: the Python API took 1e308 per hour, 0 seeds,
# a target of 150%, a NaN time cap or batch size 0 into the run, and said of precision 'fp8' that a comparison
# needs fp32.
_SPEC_RANGES = [
    (("compare", "--set", "compare.price_per_hour=1e308"), "compare", {"price_per_hour": 1e308}),
    (("compare", "--set", "compare.target_accuracy=1.5"), "compare", {"target_accuracy": 1.5}),
    (("compare", "--seeds", "0"), "compare", {"seeds": 0}),
    (("compare", "--set", "compare.eval_samples=1"), "compare", {"eval_samples": 1}),
    (("compare", "--set", "compare.bench.min_seconds=-1"), "compare", {"bench": {"min_seconds": -1.0}}),
    (("bench", "--steps", "1"), "bench", {"steps": 1}),
    (("bench", "--max-seconds", "nan"), "bench", {"max_seconds": float("nan")}),
    (("bench", "--batch-sizes", "0,8"), "bench", {"batch_sizes": [0, 8]}),
    (("bench", "--set", "bench.peak_tflops=inf"), "bench", {"peak_tflops": float("inf")}),
    (("project", "results.json", "--batch-sizes", "0"), "project", {"batch_sizes": [0]}),
    (("compare", "--precisions", "fp32,fp8"), "compare", {"precisions": ["fp32", "fp8"]}),
    (("bench", "--precisions", "fp9"), "bench", {"precisions": ["fp9"]}),
]


@pytest.mark.parametrize("args, function, keywords", _SPEC_RANGES, ids=[" ".join(a[-2:]) for a, _, _ in _SPEC_RANGES])
def test_a_commands_own_setting_is_refused_alike_by_the_command_line_and_the_api(
    capsys, tmp_path, monkeypatch, args, function, keywords
):
    import ampgan

    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *args, *(() if function == "project" else ("--dataset", "synthetic")), "--out", "o")
    line = _one_error_line(code, err)
    call = getattr(ampgan, function)
    given = ("results.json",) if function == "project" else ("acgan",)
    settings = {} if function == "project" else {"settings": {"data.dataset": "synthetic"}}
    with pytest.raises(AmpganError) as raised:
        call(*given, "o", **settings, **keywords)
    # The same line; the command line's names the flag typed too: 'bench.steps (--steps) must be ...'.
    assert line.replace(f" ({args[-2]})", "") == f"error: {raised.value}"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("read_only, why", [(True, "(read-only file system)"), (False, "(permission denied)")])
def test_a_single_file_out_on_a_read_only_filesystem_says_so(capsys, tmp_path, monkeypatch, read_only, why):
    """A folder on a read-only mount was said to be 'permission denied': a chmod does not help there. (A read-only
    mount needs root to make; os.access and os.statvfs answer as they do on one.)"""
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: False)
    monkeypatch.setattr(os, "statvfs", lambda path: type("Vfs", (), {"f_flag": os.ST_RDONLY if read_only else 0}))
    out = tmp_path / "grid.png"
    code, _, err = run_cli(capsys, "data", "grid", "synthetic", "--per-class", "1", "--out", str(out))
    assert _one_error_line(code, err, f"cannot write in {tmp_path} {why}")
    assert not out.exists()
