"""Every file ampgan writes, damaged every way, read back by every command that reads it; and every writing
command stopped by a signal at a random (seeded) moment, then resumed or reported. Each outcome classified.

A script beside the benchmarks rather than a test: it runs thousands of commands (an hour on 2 cores) and its
result is a table, committed under benchmarks/results/damage-fuzz-*; the suite keeps a few representative
damages of each class it found (tests/test_damaged_files.py and the tests named in the results' README).

    PYTHONPATH=src python benchmarks/damage_fuzz.py /tmp/fuzz [--seed 0] [--signals 60] [--only KIND]

Commands run in processes forked from this one after it imported ampgan once (as tests/test_study_resume.py's
server does): a fresh interpreter costs ~4 s a command here. --jobs N runs N cases at once, each in its own case
folder (the baselines first, one at a time). Outcomes (one per command run):
  ok            exit 0; what it printed and every text file it wrote (digits, hex and paths masked) are the
                undamaged run's, or the damaged file is named in a warning; every document it wrote reads back
                through ampgan's own reader (OUTPUT_READERS); and the damaged file, unless the undamaged run
                rewrites it too, is left as it was (a file the person may mend is not overwritten unsaid)
  one-line      exit 2, one `error:` line naming the damaged file (or its folder), no traceback
  unnamed       exit 2, one `error:` line, but the damaged file is not named
  traceback     'Traceback' in the output, or an exit code other than 0, 2 and a signal's
  hang          no exit within --timeout
  silent        exit 0, nothing names the damaged file, and what it printed or a file it wrote differs from the
                undamaged run's (the record's "differs" names them): values that may come from the damaged file
                without saying so (triaged by hand: the table lists them); a file that differed between two
                undamaged runs (a bench's timings under load) is not compared
  bad output    exit 0, and a document it wrote does not read back (ampgan's reader refuses it, or not JSON)
  rewrote       exit 0, and the damaged input was changed or removed unsaid where the undamaged run leaves it
  lost          a file other than the damaged one changed or vanished though the command failed, or vanished
                though it succeeded
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import re
import shutil
import signal
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))
from fixtures import ORIGINALS_STUDY as STUDY  # noqa: E402 - the suite's originals, made the same way
from fixtures import ORIGINALS_TINY as TINY  # noqa: E402

from ampgan.precisions import BF16, NAMES  # noqa: E402 - after the thread count, which torch reads once

BENCH = [
    *TINY[:6],
    "--device",
    "cpu",
    "--no-channels-last",
    "--batch-sizes",
    "8",
    "--precisions",
    "fp32,bf16",
    "--steps",
    "3",
]
BENCH += ["--max-seconds", "4"]  # room to trace the step: project reads its op tables


def _preload():
    """Import what every command imports, once; the evaluator trains briefly (tests/stand_ins.py); the step is
    traced (project reads its op tables)."""
    import matplotlib.pyplot  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401
    from stand_ins import brief_evaluator_training

    import ampgan.quality.evaluator as evaluator

    torch.set_num_threads(1)
    for name, value in brief_evaluator_training(evaluator).items():
        setattr(evaluator, name, value)


def start(argv, cwd: Path, cache: Path, log: Path, stop_at_bf16_step: int | None = None) -> int:
    """Fork a child that runs `ampgan ARGV` in CWD with its own cache; its output goes to LOG.out/.err."""
    child = os.fork()
    if child:
        return child
    try:
        for fd, suffix in ((1, ".out"), (2, ".err")):
            os.dup2(os.open(f"{log}{suffix}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        os.chdir(cwd)
        os.environ["AMPGAN_CACHE_DIR"] = str(cache)
        # A background job starts with SIGINT ignored, and ampgan keeps a signal its process was started
        # ignoring ignored: the command gets Ctrl-C's default, as from a terminal.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if stop_at_bf16_step is not None:  # the study stopped mid-race: SIGINT at bf16's step N
            import ampgan.training.loop as loop

            original = loop.train_step

            def stopping(state, batch):
                if state.policy.name == BF16 and state.step == stop_at_bf16_step:
                    os.kill(os.getpid(), signal.SIGINT)
                return original(state, batch)

            loop.train_step = stopping
        if os.environ.get("FUZZ_OPENED"):  # the undamaged run: which files the command opens
            opened = open(os.environ["FUZZ_OPENED"], "w")  # noqa: SIM115 - open for the process's life

            def audit(event, args):
                if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
                    opened.write(os.path.abspath(os.fsdecode(args[0])) + "\n")
                    opened.flush()

            sys.addaudithook(audit)
        from ampgan.__main__ import main  # the console script's: SIGTERM handled as ampgan installs it

        sys.argv = ["ampgan", *argv]
        main(list(argv))
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - what escaped ampgan's main is the outcome we classify
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush(), sys.stderr.flush()
    os._exit(code)


def wait(child: int, timeout: float, signal_at: tuple[float, int] | None = None) -> int | None:
    """The child's exit code (negative: killed by that signal), None when it hung past TIMEOUT (then killed)."""
    began = time.monotonic()
    sent = False
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        elapsed = time.monotonic() - began
        if signal_at and not sent and elapsed >= signal_at[0]:
            os.kill(child, signal_at[1])
            sent = True
        if elapsed > timeout:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return None
        time.sleep(0.02)


def run(argv, cwd, cache, log, timeout, **kwargs):
    code = wait(start(argv, cwd, cache, log, **kwargs), timeout)
    out, err = (Path(f"{log}{s}").read_text(errors="replace") for s in (".out", ".err"))
    return code, out, err


# ---------------------------------------------------------------------------------------------- the artefacts


def make_originals(root: Path, timeout: float) -> None:
    from fixtures import write_image_folder

    cache = root / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    steps = [
        ("train", ["train", *TINY, "--steps", "4", "--set", "logging.log_every=2", "--out", "run"]),
        ("compare", ["compare", *STUDY, "--steps", "4", "--out", "study"]),
        ("stopped", ["compare", *STUDY, "--steps", "8", "--out", "stopped"]),
        ("bench", ["bench", *BENCH, "--out", "bench"]),
        ("project", ["project", "bench/results.json", "--out", "project"]),
        ("cost", ["cost", "bench/results.json", "--price-per-hour", "1", "--out", "cost"]),
        ("evaluate", ["evaluate", "run", "--samples", "20"]),
        (
            "folder",
            [
                "train",
                *TINY,
                "--dataset",
                "folder:images",
                "--set",
                "data.cache=true",
                "--steps",
                "2",
                "--out",
                "folder-run",
            ],
        ),
    ]
    write_image_folder(root / "images")
    for name, argv in steps:
        if "--out" in argv and (root / argv[argv.index("--out") + 1]).exists():
            continue  # made by an earlier start of this script
        code, out, err = run(
            argv,
            root,
            cache,
            root / f"make-{name}",
            timeout * 4,
            **({"stop_at_bf16_step": 3} if name == "stopped" else {}),
        )
        print(f"made {name}: exit {code}", flush=True)
        if code not in (0, 130):
            sys.exit(f"making {name} failed ({code}):\n{err[-3000:]}")
    (root / ".complete").touch()


# artefact -> (the folders a case copies, the commands that read it: argv templates, {A} the case folder)
ARTEFACTS = {
    "run": [
        ["train", "--resume", "run", "--steps", "6"],
        ["evaluate", "run", "--samples", "20"],
        ["generate", "run", "--n", "4", "--class", "0", "--out", "g.png"],
        # doctor --run is left out: it measures the speed of each mode first (40 s a command under load, never
        # cached then), and reads the run through the loaders evaluate and generate use (runs/).
    ],
    "study": [
        ["report", "study"],
        ["compare", "--resume", "study"],
        ["evaluate", "study/runs/fp32-seed0", "--samples", "20"],
        ["generate", "study/runs/bf16-seed0", "--n", "4", "--class", "0", "--out", "g.png"],
    ],
    "stopped": [["compare", "--resume", "stopped"], ["report", "stopped"]],
    "bench": [
        ["bench", "--from", "bench/results.json"],
        ["project", "bench/results.json", "--out", "proj"],
        ["cost", "bench/results.json", "--price-per-hour", "1", "--out", "c"],
    ],
    "project": [["project", "bench/results.json", "--out", "project", "--overwrite"]],
    "cost": [["cost", "bench/results.json", "--price-per-hour", "1", "--out", "cost", "--overwrite"]],
    "cache": [
        ["bench", *BENCH, "--out", "b2"],
        ["evaluate", "run", "--samples", "20"],
    ],
    "images": [
        ["train", *TINY, "--dataset", "folder:images", "--set", "data.cache=true", "--steps", "2", "--out", "f2"],
        ["data", "info", "folder:images", "--cache"],  # the cache read (and rebuilt) outside a run
    ],
}
# What a case needs beside the artefact it damages (the bench for project/cost; the run for the cache).
NEEDS = {"project": ["bench"], "cost": ["bench"], "cache": ["run"], "images": []}


def kinds(root: Path) -> dict[str, list[Path]]:
    """Every file ampgan wrote, grouped by kind (its path with numbers masked): one representative, the last
    (a run's latest checkpoint, which resume reads), is damaged every way."""
    groups: dict[tuple[str, str], list[Path]] = collections.defaultdict(list)
    for artefact in ARTEFACTS:
        for path in sorted((root / artefact).rglob("*")):
            # Of a dataset folder, only what ampgan wrote there (its cache), not the user's images.
            if (path.is_file() or path.is_symlink()) and (artefact != "images" or ".ampgan-" in path.name):
                relative = path.relative_to(root).as_posix()
                groups[(artefact, re.sub(r"\d+", "#", relative))].append(path)
    return {f"{artefact}:{kind}": paths for (artefact, kind), paths in groups.items()}


# ------------------------------------------------------------------------------------------------- the damages


def _json_of(path: Path):
    try:
        text = path.read_text()
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (UnicodeDecodeError, ValueError):
        return None


def _write_json(path: Path, value) -> None:
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in value))
    else:
        path.write_text(json.dumps(value))


def _leaves(value, prefix=()):
    """(path, value) of every scalar in a JSON document, depth first."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*prefix, index))
    else:
        yield prefix, value


def _edit(document, where, change):
    *parents, last = where
    target = document
    for key in parents:
        target = target[key]
    change(target, last)


def _json_damage(rng: random.Random, kind: str):
    """A damage to one JSON value, chosen by the seeded generator among the document's leaves of that kind."""

    def damage(path: Path) -> bool:
        document = _json_of(path)
        if not isinstance(document, (dict, list)):
            return False
        leaves = list(_leaves(document))
        if kind == "drop key":
            keyed = [w for w, _ in leaves if w and isinstance(w[-1], str)]
            if not keyed:
                return False
            _edit(document, rng.choice(keyed), lambda t, k: t.pop(k))
        elif kind == "wrong type":
            if not leaves or not leaves[0][0]:
                return False
            where, value = rng.choice([leaf for leaf in leaves if leaf[0]])
            other = [1, "x"] if isinstance(value, str) else ["x", [1]]
            _edit(document, where, lambda t, k: t.__setitem__(k, rng.choice(other)))
        elif kind == "negative number":
            numbers = [w for w, v in leaves if w and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
            if not numbers:
                return False
            _edit(document, rng.choice(numbers), lambda t, k: t.__setitem__(k, -t[k]))
        elif kind == "unknown precision":
            named = [w for w, v in leaves if w and v in NAMES]
            if not named:
                return False
            _edit(document, rng.choice(named), lambda t, k: t.__setitem__(k, "fp12"))
        elif kind == "path outside":
            paths = [w for w, v in leaves if w and isinstance(v, str) and ("/" in v or v.endswith((".pt", ".json")))]
            if not paths:
                return False
            _edit(document, rng.choice(paths), lambda t, k: t.__setitem__(k, "../../../etc/passwd"))
        _write_json(path, document)
        return True

    return damage


def _bytes(change):
    def damage(path: Path) -> bool:
        data = path.read_bytes()
        new = change(data)
        if new == data:
            return False
        path.write_bytes(new)
        return True

    return damage


def _flip(data: bytes) -> bytes:
    if not data:
        return data
    middle = len(data) // 2
    return data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :]


def _replace(text: str):
    return _bytes(lambda data: text.encode())


def _delete(path):
    path.unlink()
    return True


def _symlink_zero(path):
    path.unlink()
    path.symlink_to("/dev/zero")
    return True


def _directory(path):
    path.unlink()
    path.mkdir()
    return True


def _fifo(path):
    path.unlink()
    os.mkfifo(path)  # a reader that opens it blocks until something writes: a hang, unless refused
    return True


def _newer_format(path: Path) -> bool:
    """The document's format one version on ('ampgan-bench/2', format_version 3): a newer ampgan's."""
    document = _json_of(path)
    if not isinstance(document, dict):
        return False
    found = document.get("format")
    if isinstance(found, str) and re.fullmatch(r".*/\d+", found):
        kind, _, number = found.rpartition("/")
        document["format"] = f"{kind}/{int(number) + 1}"
    elif isinstance(document.get("format_version"), int):
        document["format_version"] += 1
    else:
        return False
    _write_json(path, document)
    return True


def _symlink_outside(root: Path):
    """The file moved outside the case folder, and a link to it left in its place (its bytes unchanged)."""

    def damage(path: Path) -> bool:
        outside = root / "outside" / hashlib.sha256(str(path).encode()).hexdigest()[:12]
        outside.parent.mkdir(exist_ok=True)
        shutil.move(path, outside)
        path.symlink_to(outside)
        return True

    return damage


def _mode_000(path):
    path.chmod(0)
    return True


def _other_run(root: Path):
    """The same file from another artefact of the same kind (another run's checkpoint, another study's file)."""

    def damage(path: Path) -> bool:
        relative = path.relative_to(root)
        twins = {"run": "folder-run", "folder-run": "run", "study": "stopped", "stopped": "study"}
        other_top = twins.get(relative.parts[0])
        if other_top is None:
            return False
        pattern = re.sub(r"\d+", "*", Path(*relative.parts[1:]).as_posix())
        candidates = sorted((root / "originals" / other_top).glob(pattern))
        if not candidates or candidates[-1].read_bytes() == path.read_bytes():
            return False
        shutil.copyfile(candidates[-1], path)
        return True

    return damage


def damages(rng: random.Random, root: Path) -> dict:
    return {
        "delete": _delete,
        "empty": _bytes(lambda d: b""),
        "half": _bytes(lambda d: d[: len(d) // 2]),
        "one byte short": _bytes(lambda d: d[:-1]),
        "flip middle byte": _bytes(_flip),
        "json []": _replace("[]"),
        'json "x"': _replace('"x"'),
        "json 1e999": _replace("1e999"),
        "json NaN": _replace("NaN"),
        "drop key": _json_damage(rng, "drop key"),
        "wrong type": _json_damage(rng, "wrong type"),
        "negative number": _json_damage(rng, "negative number"),
        "unknown precision": _json_damage(rng, "unknown precision"),
        "path outside": _json_damage(rng, "path outside"),
        "from another run": _other_run(root),
        "symlink /dev/zero": _symlink_zero,
        "directory": _directory,
        "fifo": _fifo,
        "newer format": _newer_format,
        "symlink outside": _symlink_outside(root),
        "mode 000": _mode_000,
    }


# ---------------------------------------------------------------------------------------------- classification


def snapshot(folder: Path) -> dict[str, str]:
    hashes = {}
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink() and os.access(path, os.R_OK):
            hashes[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


LAST_LOSS: list[str] = []  # what the last classify found vanished or changed, for the record


def classify(code, out, err, named: list[str], baseline: str | None, before, after, damaged: str) -> str:
    if code is None:
        return "hang"
    if "Traceback" in err or "Traceback" in out or code not in (0, 2) and code > 0 and code not in (3, 130, 143):
        return "traceback"
    others = {k: v for k, v in before.items() if k != damaged and not k.startswith(damaged + "/")}
    # The folder lock holds its holder's pid: every command rewrites it.
    others = {k: v for k, v in others.items() if not k.endswith((".ampgan-lock", ".tmp"))}
    vanished = [k for k in others if k not in after and not _superseded(k, after)]
    changed = [k for k in others if k in after and after[k] != others[k]]
    LAST_LOSS[:] = vanished + changed
    if vanished or (code != 0 and changed):
        return "lost"
    if code == 2:
        errors = [line for line in err.splitlines() if line.startswith("error:")]
        if len(errors) == 1 and any(n in errors[0] for n in named):
            return "one-line"
        return "unnamed"
    if code != 0:
        return f"exit {code}"
    text = out + err
    if any(n in line for line in text.splitlines() if line.startswith("warning:") for n in named[:2]):
        return "ok"  # warned, naming the file
    if baseline is not None and _masked(text) != baseline:
        return "silent"
    return "ok"


def _superseded(relative: str, after: dict) -> bool:
    """A checkpoint removed once a later one of its run exists (checkpoints.keep): the run's own rotation."""
    found = re.fullmatch(r"(.*checkpoints/step-)(\d+)\.pt", relative)
    return bool(found) and any(
        k.startswith(found[1])
        and k.endswith(".pt")
        and k[len(found[1]) : -3].isdigit()
        and int(k[len(found[1]) : -3]) > int(found[2])
        for k in after
    )


def _masked(text: str) -> str:
    """Output with timings masked: what differs after masking differs in kind, not in a clock's reading."""
    return re.sub(r"\d+(\.\d+)?", "#", re.sub(r"\b[0-9a-f]{8,}\b", "#", text))


def _copy_case(root: Path, case: Path, artefact: str) -> None:
    if case.exists():
        shutil.rmtree(case, onerror=_chmod_and_retry)
    case.mkdir(parents=True)
    for name in {artefact, *NEEDS.get(artefact, ["run"] if artefact == "cache" else []), "cache"}:
        source = root / "originals" / name
        if source.is_dir():
            shutil.copytree(source, case / name, symlinks=True)


def _chmod_and_retry(function, path, _):
    os.chmod(Path(path).parent, 0o700)
    if os.path.exists(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    function(path)


def _text_written(folder: Path, before: dict, after: dict) -> dict[str, str | None]:
    """{relative path: its text masked (None: not text)} of each file a command wrote: new or changed."""
    written = {}
    for relative, digest in after.items():
        if before.get(relative) != digest and not relative.endswith((".ampgan-lock", ".tmp")):
            path = folder / relative
            text = None
            if path.suffix in TEXT_SUFFIXES:
                try:
                    text = _masked(path.read_text())
                except (OSError, UnicodeDecodeError):
                    text = "(unreadable)"
            written[relative] = text
    return written


TEXT_SUFFIXES = (".json", ".jsonl", ".md", ".csv", ".txt")


def _output_readers() -> dict:
    """{file name: a function that reads it back as ampgan does, raising on a document it refuses}: what "ok" asks
    of every document a command wrote."""
    from ampgan.bench.output import load_results
    from ampgan.projection.document import check_projection
    from ampgan.runs.run_folder import read_metrics, read_run_config
    from ampgan.study.document import load_compare
    from ampgan.study.evaluate import read_quality_curve
    from ampgan.study.progress import load_progress

    return {
        "results.json": load_results,
        "compare.json": lambda path: load_compare(path.parent),
        "projection.json": lambda path: check_projection(json.loads(path.read_text()), str(path), ""),
        "config.json": lambda path: read_run_config(path.parent) if (path.parent / "checkpoints").exists() else None,
        "metrics.jsonl": read_metrics,
        "quality.jsonl": read_quality_curve,
        "study.json": lambda path: load_progress(path.parent),
    }


def _refused_outputs(folder: Path, written) -> list[str]:
    """The documents among `written` that do not read back: not strict JSON, or refused by ampgan's reader."""

    def no_constant(name):
        raise ValueError(f"{name} is not JSON")

    readers, refused = _output_readers(), []
    for relative in written:
        path = folder / relative
        try:
            if path.suffix == ".json":
                json.loads(path.read_text(), parse_constant=no_constant)
            elif path.name in readers:  # a log with a reader; the manifest skips a damaged line by design
                for line in path.read_text().splitlines():
                    json.loads(line, parse_constant=no_constant)
            if path.name in readers:
                readers[path.name](path)
        except Exception as error:  # noqa: BLE001 - any refusal is the finding
            refused.append(f"{relative}: {str(error)[:150]}")
    return refused


def fuzz_files(
    root: Path,
    rng: random.Random,
    seed: int,
    timeout: float,
    only: str | None,
    results: list,
    rerun=None,
    jobs=1,
    chosen=(),
) -> None:
    """Every kind's file damaged every way and read by every command that reads it; `rerun`: only the cases
    {(file, damage, command's first words)} of an earlier fuzz (the JSON damages draw from a generator seeded
    by the case itself, so a case damages the same value whenever it runs). `jobs` cases run at once."""
    originals = root / "originals"
    groups = kinds(originals)
    # Breadth first: the first kind of each artefact, then the second of each...; a stopped study's files are of
    # the finished one's kinds: damaged last. A fuzz stopped early has then touched every artefact.
    rank = collections.Counter()
    order = {}
    for name in groups:
        artefact = name.split(":", 1)[0]
        order[name] = (artefact == "stopped", rank[artefact])
        rank[artefact] += 1
    groups = dict(sorted(groups.items(), key=lambda item: order[item[0]]))
    table = {name: damage for name, damage in damages(rng, root).items() if not chosen or name in chosen}
    baselines: dict[tuple, dict] = {}
    pending = []  # (kind, target, damage name, command), in the order they run
    for kind, paths in groups.items():
        if (
            only
            and only not in kind
            or rerun is not None
            and not any(r[0] == paths[-1].relative_to(originals).as_posix() for r in rerun)
        ):
            continue
        artefact = kind.split(":", 1)[0]
        target = paths[-1].relative_to(originals).as_posix()
        for command in ARTEFACTS[artefact]:
            key = (artefact, tuple(command))
            if key not in baselines:
                baselines[key] = _baseline(root, artefact, command, timeout)
        for damage_name in table:
            for command in ARTEFACTS[artefact]:
                # A file the undamaged command never opened (Python's audit hook; safetensors opens in Rust)
                # can matter only by being there: only its removal, or a folder in its place, is tried.
                read = target in baselines[(artefact, tuple(command))]["opens"] or target.endswith(".safetensors")
                if not read and damage_name not in ("delete", "directory"):
                    continue
                if rerun is not None and (target, damage_name, " ".join(command[:3])) not in rerun:
                    continue
                pending.append((kind, target, damage_name, command))
    running: dict[int, tuple] = {}  # child -> (slot, case, began)
    free = list(range(max(1, jobs)))
    while pending or running:
        while pending and free:
            kind, target, damage_name, command = pending.pop(0)
            slot = free.pop(0)
            rng.seed(f"{seed}|{target}|{damage_name}|{' '.join(command)}")
            case = root / f"case-{slot}"
            artefact = kind.split(":", 1)[0]
            _copy_case(root, case, artefact)
            if not table[damage_name](case / target):
                free.append(slot)  # this damage does not apply to this file (not JSON, nothing to change)
                continue
            before = snapshot(case)
            child = start(command, case, case / "cache", root / f"log-{slot}")
            running[child] = (slot, (kind, target, damage_name, command, before), time.monotonic())
        for child, (slot, case_of, began) in list(running.items()):
            done, status = os.waitpid(child, os.WNOHANG)
            hung = not done and time.monotonic() - began > timeout
            if hung:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
            if done or hung:
                del running[child]
                code = None if hung else os.waitstatus_to_exitcode(status)
                _record_case(root, results, baselines, slot, code, *case_of)
                free.append(slot)
        time.sleep(0.02)


def _baseline(root: Path, artefact: str, command: list, timeout: float) -> dict:
    """The undamaged command, run twice: which files it opens, what it removes, and what it prints and writes where
    both runs agree (an output that differs between two undamaged runs, a bench's words under load, cannot tell a
    silent change from a damage)."""
    runs = []
    for index in range(2):
        case = root / "case-0"
        _copy_case(root, case, artefact)
        first, stats = snapshot(case), _stats(case)
        if index == 0:
            os.environ["FUZZ_OPENED"] = str(root / "opened")
        code, out, err = run(command, case, case / "cache", root / "log-0", timeout)
        os.environ.pop("FUZZ_OPENED", None)
        after = snapshot(case)
        # what it wrote, the same bytes again included (a figure redrawn): a new file, inode or time
        touched = {k for k, v in _stats(case).items() if stats.get(k) != v}
        runs.append((code, _masked(out + err), _text_written(case, first, after), set(first) - set(after), touched))
    opens = {
        Path(line).relative_to(root / "case-0").as_posix()
        for line in (root / "opened").read_text().splitlines()
        if line.startswith(str(root / "case-0") + "/")
    }
    (code, printed, written, removes, touched), (code2, printed2, written2, _, touched2) = runs
    return {
        "opens": opens,
        "removes": removes,  # what it removes undamaged: not lost
        "printed": printed if code == code2 == 0 and printed == printed2 else None,
        "written": {k: v for k, v in written.items() if v is not None and written2.get(k) == v},
        "writes": touched | touched2,
    }


def _first_difference(expected: str, found: str) -> str:
    """The first line where a written file differs from the undamaged run's (masked): what to triage by."""
    pairs = zip(expected.splitlines() + [""], found.splitlines() + [""])
    return next((f"{a.strip()[:120]!r} -> {b.strip()[:120]!r}" for a, b in pairs if a != b), "")


def _stats(folder: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(folder).as_posix(): (p.lstat().st_ino, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


def _record_case(root, results, baselines, slot, code, kind, target, damage_name, command, before) -> None:
    case = root / f"case-{slot}"
    artefact = kind.split(":", 1)[0]
    baseline = baselines[(artefact, tuple(command))]
    out, err = (Path(f"{root / f'log-{slot}'}{s}").read_text(errors="replace") for s in (".out", ".err"))
    after = snapshot(case)
    written = _text_written(case, before, after)
    after.update({k: before[k] for k in baseline["removes"] if k not in after})
    named = [Path(target).name, Path(target).stem, Path(target).parent.name or target]
    outcome = classify(code, out, err, named, baseline["printed"], before, after, target)
    differs, refused = [], []
    if outcome in ("ok", "silent"):
        differs = [k for k, text in baseline["written"].items() if k in written and written[k] != text]
        refused = _refused_outputs(case, [k for k in written if k.endswith((".json", ".jsonl"))])
        warned = any(line.startswith("warning:") and any(n in line for n in named[:2]) for line in err.splitlines())
        changed = target in before and after.get(target) != before[target] and target not in baseline["writes"]
        if refused:
            outcome = "bad output"
        elif changed and not warned:
            outcome = "rewrote"
        elif differs and not warned:
            outcome = "silent"
    record = {
        "kind": kind,
        "file": target,
        "damage": damage_name,
        "command": " ".join(command[:3]),
        "outcome": outcome,
        "exit": code,
        "err": (err.strip().splitlines() or [""])[-1][:300] if outcome != "traceback" else err[-1500:],
        "lost": LAST_LOSS[:5] if outcome == "lost" else [],
        "differs": differs[:5],
        "first_difference": _first_difference(baseline["written"][differs[0]], written[differs[0]]) if differs else "",
        "refused": refused[:3],
    }
    _keep(root, results, record)


# ------------------------------------------------------------------------------------------------ interrupts

# writing command (in the case folder) -> the command run after it (resume or report) and what it writes.
INTERRUPTED = [
    (
        [
            "train",
            *TINY,
            "--steps",
            "8",
            "--set",
            "logging.log_every=2",
            "--set",
            "checkpoints.every_steps=2",
            "--out",
            "new",
        ],
        ["train", "--resume", "new", "--steps", "8"],
    ),
    (
        ["train", "--resume", "run", "--steps", "10", "--set", "checkpoints.every_steps=2"],
        ["train", "--resume", "run", "--steps", "10"],
    ),
    (["compare", *STUDY, "--steps", "6", "--out", "s"], ["compare", "--resume", "s"]),
    (["compare", "--resume", "stopped"], ["report", "stopped"]),
    (["report", "study"], ["report", "study"]),
    (["bench", *BENCH, "--out", "b"], ["bench", "--from", "b/results.json"]),
    (["evaluate", "run", "--samples", "20"], ["evaluate", "run", "--samples", "20"]),
    (["project", "bench/results.json", "--out", "p"], ["project", "bench/results.json", "--out", "p"]),
]


def fuzz_signals(root: Path, rng: random.Random, count: int, timeout: float, results: list) -> None:
    case = root / "case"
    durations, removes = {}, {}
    for index in range(count):
        writer, after_command = INTERRUPTED[index % len(INTERRUPTED)]
        _copy_case(root, case, "run")
        for extra in ("study", "stopped", "bench"):
            shutil.copytree(root / "originals" / extra, case / extra, symlinks=True)
        key = " ".join(writer[:3])
        if key not in durations:
            began, first = time.monotonic(), snapshot(case)
            run(writer, case, case / "cache", root / "log", timeout)
            durations[key] = time.monotonic() - began
            # What the command removes when not stopped (a checkpoint it supersedes) is not lost when stopped.
            removes[key] = set(first) - set(snapshot(case))
            _copy_case(root, case, "run")
            for extra in ("study", "stopped", "bench"):
                shutil.copytree(root / "originals" / extra, case / extra, symlinks=True)
        signum = rng.choice([signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
        moment = rng.uniform(0.05, 1.0) * durations[key]
        before = snapshot(case)
        child = start(writer, case, case / "cache", root / "log")
        code = wait(child, timeout, (moment, signum))
        err = (root / "log.err").read_text(errors="replace")
        first = "traceback" if "Traceback" in err else ("hang" if code is None else "ok")
        during = snapshot(case)
        # What the stopped command had before it began must be there still (its own new files may be partial).
        lost = [
            k for k in before if k not in during and k not in removes[key] and not k.endswith((".ampgan-lock", ".tmp"))
        ]
        code2, out2, err2 = run(after_command, case, case / "cache", root / "log2", timeout)
        outcome = classify(
            code2,
            out2,
            err2,
            [after_command[-1], "new", "s", "b", "p", "run", "study", "stopped"],
            None,
            during,
            snapshot(case),
            "",
        )
        if first != "ok":
            outcome = f"{first} (stopped command)"
        elif lost:
            outcome = "lost"
        record = {
            "kind": "signal",
            "file": "",
            "damage": f"{signal.Signals(signum).name} at {moment:.1f}s of {durations[key]:.1f}s",
            "command": key,
            "outcome": outcome,
            "exit": [code, code2],
            "err": (err.strip().splitlines() or [""])[-1][:200] + " || " + (err2.strip().splitlines() or [""])[-1][:300]
            if "traceback" not in outcome
            else err[-800:] + err2[-800:],
            "lost": lost[:5] or (LAST_LOSS[:5] if outcome == "lost" else []),
        }
        _keep(root, results, record)


def _keep(root: Path, results: list, record: dict) -> None:
    """Each outcome appended as it comes, so that a stopped fuzz keeps what it found."""
    results.append(record)
    with open(root / "results.jsonl", "a") as log:
        log.write(json.dumps(record) + "\n")
    print(json.dumps(record)[:300], flush=True)


def summarise(results: list, out: Path) -> None:
    counts = collections.Counter(r["outcome"] for r in results)
    by_kind = collections.defaultdict(collections.Counter)
    for r in results:
        by_kind[r["kind"] if r["kind"] == "signal" else "files"][r["outcome"]] += 1
    lines = ["| outcome | count |", "|---|---|", *(f"| {k} | {v} |" for k, v in counts.most_common())]
    lines += ["", "| part | " + " | ".join(sorted(counts)) + " |", "|---" * (len(counts) + 1) + "|"]
    lines += [f"| {part} | " + " | ".join(str(c[k]) for k in sorted(counts)) + " |" for part, c in by_kind.items()]
    bad = [r for r in results if r["outcome"] not in ("ok", "one-line")]
    lines += ["", "Not ok or one-line (kind, damage, command, outcome, last line):", ""]
    lines += [f"- {r['kind']} | {r['damage']} | {r['command']} | {r['outcome']} | {r['err'][-200:]!r}" for r in bad]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[: 4 + len(counts) + 6]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--signals", type=int, default=48)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--only", help="damage only kinds whose name contains this")
    parser.add_argument("--no-files", action="store_true")
    parser.add_argument("--damages", help="only these damages, comma-separated (e.g. 'fifo,newer format')")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (each in its own case folder)")
    parser.add_argument("--rerun", type=Path, help="a results.jsonl: run again its cases that were not ok or one-line")
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    root = arguments.work.resolve()
    _preload()
    if not (root / "originals/.complete").is_file():
        make_originals(root / "originals", arguments.timeout)
    results: list = []
    try:
        if not arguments.no_files:
            rerun = None
            if arguments.rerun:
                earlier = [json.loads(line) for line in arguments.rerun.read_text().splitlines()]
                rerun = {
                    (r["file"], r["damage"], r["command"])
                    for r in earlier
                    if r["kind"] != "signal" and r["outcome"] not in ("ok", "one-line")
                }
            chosen = [name for name in (arguments.damages or "").split(",") if name]
            fuzz_files(
                root, rng, arguments.seed, arguments.timeout, arguments.only, results, rerun, arguments.jobs, chosen
            )
        if arguments.signals:
            fuzz_signals(root, rng, arguments.signals, arguments.timeout, results)
    finally:
        summarise(results, root)


if __name__ == "__main__":
    main()
