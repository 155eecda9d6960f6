"""What belongs to whom (runs/claim.py, files/manifest.py): ampgan deletes only the files it can show it
wrote, trusts a checkpoint or a log only as it wrote them, writes nothing inside a folder that belongs to
something else, and never leaves what a killed --overwrite set aside without a word. Each class is tried
on variants beyond the ones issue 47 names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from fixtures import write_image_folder

from ampgan.errors import AmpganError
from ampgan.files.manifest import MANIFEST
from ampgan.runs.claim import LOCK, MARKER, claimed_folder

TINY = ("--dataset", "synthetic", "--width", "8", "--set", "model.z_dim=16", "--batch-size", "8", "--device", "cpu")


def _train(capsys, out, *extra, steps=2):
    return run_cli(capsys, "train", *TINY, "--quiet", "--steps", str(steps), "--out", str(out), *extra)


@pytest.fixture(scope="module")
def _run_once(tmp_path_factory):
    """A run of 4 steps with checkpoints at 0, 2 and 4, trained once for the module."""
    from ampgan.cli import main

    run = tmp_path_factory.mktemp("owned") / "run"
    try:
        main(["train", *TINY, "--quiet", "--steps", "4", "--checkpoint-every", "2", "--out", str(run)])
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    return run


@pytest.fixture
def run(_run_once, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(_run_once, copy)
    return copy


def _one_line(code, err):
    return code == 2 and err.startswith("error: ") and err.count("\n") == 1


def _flip_a_byte(path, at=None):
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


# ---- 1. --overwrite deletes only what ampgan can show it wrote ----------------------------------------
@pytest.mark.parametrize(
    "change",
    [
        "an ampgan file edited in place",  # same name, same folder: only its content says it is not ampgan's
        "ampgan's own checkpoint copied under another step's name",
        "a user's folder of notes deep inside",
        "a FIFO under an ampgan name",
    ],
)
def test_overwrite_refuses_what_ampgan_cannot_show_it_wrote(capsys, run, change):
    if change == "an ampgan file edited in place":
        target = run / "samples" / "step-000004.png"
        _flip_a_byte(target, at=-1)
        named = "samples/step-000004.png"
    elif change == "ampgan's own checkpoint copied under another step's name":
        target = run / "checkpoints" / "step-000003.pt"
        shutil.copy(run / "checkpoints" / "step-000002.pt", target)
        named = "checkpoints/step-000003.pt"
    elif change == "a user's folder of notes deep inside":
        target = run / "checkpoints" / "drafts" / "v2" / "README"
        target.parent.mkdir(parents=True)
        target.write_text("mine")
        named = "checkpoints/drafts/v2/README"
    else:
        target = run / "samples" / "step-000006.png"
        os.mkfifo(target)
        named = "samples/step-000006.png"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_fifo()}
    code, _, err = _train(capsys, run, "--overwrite")
    assert _one_line(code, err) and named in err and "ampgan did not write" in err and "move it out" in err, err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file() and not p.is_fifo()} == before


def test_every_command_records_all_it_writes(capsys, run, tmp_path):
    """Nothing a command writes is left unproven (else --overwrite could never replace its folder): a run, a
    run resumed with TensorBoard, and a doctor folder; then each is replaced cleanly."""
    from ampgan.runs.claim import unproven_entries

    pytest.importorskip("tensorboard")
    assert unproven_entries(run) == []
    code, _, err = run_cli(
        capsys, "train", "--resume", str(run), "--steps", "6", "--set", "logging.tensorboard=true", "--quiet"
    )
    assert code == 0, err
    assert list((run / "tensorboard").iterdir()) and unproven_entries(run) == []
    doctor = tmp_path / "doctor"
    code, _, err = run_cli(capsys, "doctor", *TINY, "--steps", "1", "--fp16-steps", "0", "--out", str(doctor))
    assert code == 0, err
    assert unproven_entries(doctor) == []
    assert _train(capsys, run, "--overwrite")[0] == 0
    assert not list(tmp_path.glob(".run.replaced-*"))


def test_a_folder_an_older_ampgan_wrote_is_refused_unless_it_holds_nothing(capsys, run, tmp_path):
    (run / MANIFEST).unlink()  # as ampgan wrote folders before it kept a manifest
    code, _, err = _train(capsys, run, "--overwrite")
    assert _one_line(code, err) and "older ampgan" in err and "kept no record" in err
    assert (run / "checkpoints" / "step-000004.pt").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()  # an older ampgan's run folder holding its marker alone: nothing to lose
    (empty / MARKER).write_text(json.dumps({"format": "ampgan-folder/2", "kind": "run"}))
    assert _train(capsys, empty, "--overwrite")[0] == 0


def test_pruning_deletes_only_checkpoints_ampgan_wrote(capsys, run):
    """--keep prunes old checkpoints by the same proof: a checkpoint named like ampgan's that the user
    edited or put there stays."""
    mine = run / "checkpoints" / "step-000001.pt"
    mine.write_bytes(b"my best model, keep")
    edited = run / "checkpoints" / "step-000002.pt"
    _flip_a_byte(edited, at=-1)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8", "--set", "checkpoints.keep=1")
    assert code == 0, err
    assert mine.read_bytes() == b"my best model, keep" and edited.is_file()
    assert not (run / "checkpoints" / "step-000004.pt").exists() and (run / "checkpoints" / "step-000008.pt").is_file()


# ---- 6. a checkpoint, a log: trusted only as ampgan wrote them ------------------------------------------
@pytest.mark.parametrize("command", ["resume", "generate", "evaluate"])
def test_a_checkpoint_changed_on_disk_is_refused_naming_the_newest_intact_one(capsys, run, tmp_path, command):
    latest = run / "checkpoints" / "step-000004.pt"
    _flip_a_byte(latest)  # one byte, the size unchanged: whatever it hits, the digest differs
    args = {
        "resume": ("train", "--resume", str(run), "--steps", "6", "--quiet"),
        "generate": ("generate", str(run), "--class", "0", "--out", str(tmp_path / "g.png")),
        "evaluate": ("evaluate", str(run), "--samples", "4"),
    }[command]
    before = (run / "metrics.jsonl").read_bytes()
    code, _, err = run_cli(capsys, *args)
    assert _one_line(code, err) and "step-000004.pt is damaged" in err and "sha256" in err, err
    assert "to resume from step-000002.pt, the newest intact checkpoint" in err
    assert latest.is_file() and (run / "metrics.jsonl").read_bytes() == before  # nothing touched
    if command == "resume":  # the fix the line gives works
        shutil.move(latest, tmp_path / "damaged.pt")
        assert run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")[0] == 0


def test_a_checkpoint_without_a_record_is_held_to_its_zip_crc(capsys, run):
    """A run an older ampgan wrote has no manifest: every entry's CRC is tested instead."""
    from ampgan.runs.checkpoint import load_checkpoint

    (run / MANIFEST).unlink()
    latest = run / "checkpoints" / "step-000004.pt"
    load_checkpoint(latest)  # intact: loads
    _flip_a_byte(latest)
    with pytest.raises(AmpganError, match="step-000004.pt is damaged") as refused:
        load_checkpoint(latest)
    assert "step-000002.pt" in str(refused.value)


@pytest.mark.parametrize("kind", ["a FIFO", "a folder", "a symbolic link"])
def test_a_newest_checkpoint_that_is_not_a_file_does_not_hide_the_good_one(capsys, run, kind):
    newest = run / "checkpoints" / "step-000009.pt"
    if kind == "a FIFO":
        os.mkfifo(newest)  # never opened: reading it would block forever
    elif kind == "a folder":
        newest.mkdir()
    else:
        newest.symlink_to(run / "checkpoints" / "step-000004.pt")
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "12", "--quiet")
    named = {"a FIFO": "a FIFO (named pipe)"}.get(kind, kind)  # as every message names one (not_a_regular_file)
    assert _one_line(code, err) and f"is {named}, not a checkpoint file" in err
    assert "resume from step-000004.pt" in err


@pytest.mark.parametrize(
    ("tail", "said"),
    [
        (b"\xff\xfe\x80 binary junk\n", "holds bytes that are not text"),
        (b"\x00\x00\x00\x00", "is not a JSON record"),  # zeros a lost write can leave: text, never ampgan's
        (b'{"step": 5, "train_seconds": 9.0}\nnot json\n', "is not a JSON record"),
    ],
)
def test_a_damaged_metrics_log_is_refused_not_resumed(capsys, run, tail, said):
    path = run / "metrics.jsonl"
    path.write_bytes(path.read_bytes() + tail)
    before = path.read_bytes()
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert _one_line(code, err) and "metrics.jsonl is damaged" in err and said in err, err
    assert path.read_bytes() == before


def test_a_log_line_cut_short_by_a_crash_is_dropped_with_a_line_said(capsys, run):
    path = run / "metrics.jsonl"
    path.write_bytes(path.read_bytes() + b'{"step": 5, "train_sec')
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert code == 0 and "last line was cut short" in err, err
    assert all(json.loads(line) for line in path.read_text().splitlines())


# ---- 7. a folder that belongs to something else ----------------------------------------------------------
@pytest.mark.parametrize("where", ["inside a class folder", "the dataset folder itself", "around the dataset"])
def test_no_output_inside_or_around_the_dataset(capsys, tmp_path, where):
    data = write_image_folder(tmp_path / "project" / "images", per_class=2, size=8)
    out = {
        "inside a class folder": data / "cats" / "run",
        "the dataset folder itself": data,
        "around the dataset": tmp_path / "project",
    }[where]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    args = ("train", "--dataset", f"folder:{data}", "--width", "8", "--set", "model.z_dim=16", "--batch-size", "2")
    code, _, err = run_cli(capsys, *args, "--device", "cpu", "--steps", "2", "--out", str(out), "--overwrite")
    assert _one_line(code, err) and "the dataset folder" in err and "choose a folder outside" in err, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("command", ["generate", "data grid"])
def test_no_single_file_output_inside_the_dataset(capsys, tmp_path, command):
    """generate's and data grid's --out (one file) inside the folder:PATH dataset they read: an image there is
    a training image from then on (the run no longer resumes on its data). Refused, nothing written."""
    data = write_image_folder(tmp_path / "images", per_class=2, size=8)
    out = data / "cats" / "x.png"
    if command == "generate":
        run = tmp_path / "run"
        args = ("--dataset", f"folder:{data}", "--image-size", "28", *TINY[2:], "--quiet", "--steps", "1")
        assert run_cli(capsys, "train", *args, "--out", str(run))[0] == 0
        argv = ("generate", str(run), "--n", "2", "--class", "0", "--out", str(out))
    else:
        argv = ("data", "grid", f"folder:{data}/../images", "--per-class", "1", "--out", str(out))
    before = sorted(data.rglob("*"))
    code, _, err = run_cli(capsys, *argv)
    assert _one_line(code, err) and "is inside the dataset folder" in err and "choose a folder outside" in err, err
    assert sorted(data.rglob("*")) == before


@pytest.mark.parametrize("command", ["generate", "data grid"])
def test_no_single_file_output_inside_an_ampgan_folder(capsys, run, command):
    """generate's and data grid's --out inside a run folder (or any ampgan folder) was written and recorded in its
    manifest as ampgan's, so the folder's --overwrite then deleted the person's images without a word."""
    out = run / "samples" / "for-the-paper.png"
    argv = {
        "generate": ("generate", str(run), "--n", "2", "--class", "0", "--out", str(out)),
        "data grid": ("data", "grid", "synthetic", "--per-class", "1", "--out", str(out)),
    }[command]
    before = sorted(run.rglob("*"))
    code, _, err = run_cli(capsys, *argv)
    assert _one_line(code, err) and f"is inside {run}, ampgan's run folder" in err, err
    assert sorted(run.rglob("*")) == before


def test_a_run_found_inside_a_dataset_is_never_read_as_images(capsys, run, tmp_path):
    """A run an older ampgan left inside its dataset (or a study copied into one): refused when the images
    are read, and on resume, before its grids become training images."""
    data = write_image_folder(tmp_path / "images", per_class=2, size=8)
    inside = data / "cats" / "old-run"
    shutil.copytree(run, inside)
    args = ("--dataset", f"folder:{data}", "--width", "8", "--batch-size", "2", "--device", "cpu")
    code, _, err = run_cli(capsys, "data", "info", f"folder:{data}")
    assert _one_line(code, err) and "is an ampgan output folder" in err and "old-run" in err, err
    code, _, err = run_cli(capsys, "train", *args, "--steps", "2", "--out", str(tmp_path / "new"))
    assert _one_line(code, err) and "is an ampgan output folder" in err and not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("outer", "inner", "inner_kind"),
    [("run", "samples/mine", "run"), ("study", "bench", "bench"), ("bench", "cells/x", "run")],
)
def test_no_output_inside_another_ampgan_folder(tmp_path, outer, inner, inner_kind):
    folder = tmp_path / outer
    with claimed_folder(folder, overwrite=False, kind=outer):
        pass
    with pytest.raises(AmpganError, match=f"is inside .*ampgan's {outer} folder"):
        with claimed_folder(folder / inner, overwrite=False, kind=inner_kind):
            pass
    assert not (folder / inner).exists()
    if outer == "bench":  # a projection is the one part made from outside: from the bench's own files
        with claimed_folder(folder / "projection", overwrite=False, kind="projection"):
            pass


def test_overwrite_never_turns_a_folder_into_another_kind(capsys, tmp_path):
    study = tmp_path / "study"
    with claimed_folder(study, overwrite=False, kind="study"):
        (study / "study.json").write_text("{}")
    from ampgan.files.manifest import record

    record(study / "study.json")
    code, _, err = _train(capsys, study, "--overwrite")
    assert _one_line(code, err) and "is ampgan's study folder, not a run" in err
    assert (study / "study.json").read_text() == "{}"


# ---- 9. what a killed --overwrite set aside ---------------------------------------------------------------
def _dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(finished.stdout)


def test_an_aside_left_before_the_new_folder_existed_is_put_back(capsys, run):
    aside = run.with_name(f".run.replaced-{_dead_pid()}")
    os.replace(run, aside)  # killed between moving the old folder aside and creating the new one
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert code == 0 and "the old folder is back in place" in err, err
    assert not aside.exists() and (run / "checkpoints" / "step-000006.pt").is_file()


def test_an_aside_left_beside_a_new_folder_is_deleted_or_named(capsys, run, tmp_path):
    aside = run.with_name(f".run.replaced-{_dead_pid()}")
    shutil.copytree(run, aside)  # killed after the new run started: both are there
    (aside / "samples" / "annotated.png").write_bytes(b"mine")
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert code == 0 and f"{aside.name} holds the old" in err and "nothing in it was deleted" in err, err
    assert (aside / "samples" / "annotated.png").read_bytes() == b"mine"
    code, _, err = _train(capsys, run, "--overwrite")  # still holds a file of the user's: named, kept
    assert code == 0 and "nothing in it was deleted" in err and aside.is_dir()
    (aside / "samples" / "annotated.png").unlink()
    code, _, err = _train(capsys, run, "--overwrite")  # only ampgan's: deleted, with a line
    assert code == 0 and f"deleted {aside}" in err and not aside.exists(), err


def test_evaluate_while_a_training_process_writes_the_run_is_refused_before_any_work(capsys, run, monkeypatch):
    """`ampgan evaluate RUN` while `train` still wrote RUN scored the generator it found then (step 0), trained
    its evaluator for minutes and, the training finished by then, wrote that as the run's final quality.json.
    Now it is one line at once, before the evaluator, and the run is untouched."""
    import ampgan.quality.assess as assess
    from ampgan.runs.claim import FolderLock

    trained_evaluator = assess.evaluator_for
    monkeypatch.setattr(assess, "evaluator_for", lambda *a, **k: pytest.fail("the evaluator was trained"))
    training = FolderLock(run)  # as a training process holds its run while it writes it
    try:
        before = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != LOCK}
        code, _, err = run_cli(capsys, "evaluate", str(run), "--samples", "4")
        assert _one_line(code, err) and f"{run} is in use by another ampgan process (pid {os.getpid()})" in err, err
        after = {path.name: path.read_bytes() for path in run.iterdir() if path.is_file() and path.name != LOCK}
        assert after == before and "quality.json" not in after
    finally:
        training.release()
    monkeypatch.setattr(assess, "evaluator_for", trained_evaluator)
    code, _, err = run_cli(capsys, "evaluate", str(run), str(run), "--samples", "4")  # named twice: held once
    assert code == 0, err


def test_evaluate_of_a_study_s_run_holds_the_study_not_the_run(capsys, originals, tmp_path):
    """A study's runs are trained under the study's lock, not their own: `evaluate STUDY/runs/RUN` during a race
    scored what it found and wrote quality.json beside the race's (a reviewer's repro); and the lock it left in
    RUN kept a later `compare --overwrite` from replacing the study ('holds runs/.../.ampgan-lock, which ampgan
    did not write'). Now the study is held, once for all its runs."""
    from ampgan.runs.claim import FolderLock, check_replaceable

    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    runs = sorted(path for path in (study / "runs").iterdir() if path.is_dir())
    comparing = FolderLock(study)  # as a racing `compare` holds its folder
    try:
        code, _, err = run_cli(capsys, "evaluate", str(runs[0]), "--samples", "4")
        assert _one_line(code, err) and f"{study} is in use by another ampgan process (pid {os.getpid()})" in err
    finally:
        comparing.release()
    records = [(run / "quality.json").read_bytes() for run in runs]
    code, _, err = run_cli(capsys, "evaluate", *map(str, runs), "--samples", "4")  # two runs of one study: held once
    assert code == 0, err
    assert not any((run / LOCK).exists() for run in runs)
    # The study's own record of each run (its curve, its evaluations) was replaced by evaluate's: kept, and said.
    assert [(run / "quality.json").read_bytes() for run in runs] == records
    assert sum(f"is a run of {study}: its quality.json" in line for line in err.splitlines()) == len(runs), err
    check_replaceable(study, "study")  # raises if anything in it is not ampgan's


def test_report_while_a_study_writes_its_folder_is_refused_and_the_folder_untouched(capsys, originals, tmp_path):
    """`ampgan report STUDY` while `compare --resume` still wrote STUDY rendered the files it found and wrote
    report.html over the one the study was writing: whichever finished last won. Now it is one line."""
    from ampgan.runs.claim import FolderLock

    study = tmp_path / "study"
    shutil.copytree(originals / "study", study, ignore=shutil.ignore_patterns("*.pt"))
    (study / "report.html").write_text("the report the running study writes")
    comparing = FolderLock(study)  # as a study holds its folder while it runs
    try:
        code, _, err = run_cli(capsys, "report", str(study))
        assert _one_line(code, err) and f"{study} is in use by another ampgan process (pid {os.getpid()})" in err
        assert (study / "report.html").read_text() == "the report the running study writes"
    finally:
        comparing.release()
    assert run_cli(capsys, "report", str(study))[0] == 0 and (study / "report.html").stat().st_size > 1000


def test_a_study_s_run_resumed_alone_names_its_study_s_command_not_another_out(capsys, run, tmp_path):
    """`train --resume STUDY/runs/fp32-seed0` has no --out to choose: it said '--out ... choose a folder outside
    it'. Its study's command continues it, or a copy taken out of the study resumes alone."""
    study = tmp_path / "study"
    with claimed_folder(study, overwrite=False, kind="study"):
        pass
    shutil.copytree(run, study / "runs" / "fp32-seed0")
    code, _, err = run_cli(capsys, "train", "--resume", str(study / "runs" / "fp32-seed0"), "--steps", "6", "--quiet")
    assert _one_line(code, err) and err.startswith(f"error: --resume {study / 'runs' / 'fp32-seed0'} is inside {study}")
    assert err.endswith("continue it with that command, or copy it out first\n"), err
    shutil.copytree(study / "runs" / "fp32-seed0", tmp_path / "copied")
    assert run_cli(capsys, "train", "--resume", str(tmp_path / "copied"), "--steps", "6", "--quiet")[0] == 0


@pytest.mark.parametrize("in_the_way", ["a finished run", "a link to nowhere"])
def test_a_command_given_no_out_never_lands_on_a_folder_of_the_same_second(tmp_path, capsys, monkeypatch, in_the_way):
    """The default folder is named by the second: a second train started in it (a script's loop of seeds, a clock
    set back) was refused with '--out runs/... already holds files', an --out it was never given."""
    import datetime as dt
    from types import SimpleNamespace

    from fixtures import TINY_RUN

    import ampgan.runs.claim as claim

    frozen = dt.datetime(2026, 12, 4, 13, 30, 0)
    monkeypatch.setattr(claim, "dt", SimpleNamespace(datetime=SimpleNamespace(now=lambda: frozen)))
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "runs" / "synthetic-fp32-20261204-133000"
    if in_the_way == "a link to nowhere":
        first.parent.mkdir()
        first.symlink_to(tmp_path / "gone")
    else:
        assert run_cli(capsys, "train", "--steps", "2", *TINY_RUN, "--precision", "fp32")[0] == 0
    before = sorted(p.name for p in first.iterdir()) if first.is_dir() else None
    for n in (2, 3):
        code, out, err = run_cli(capsys, "train", "--steps", "2", *TINY_RUN, "--precision", "fp32")
        assert code == 0, err
        assert (tmp_path / "runs" / f"synthetic-fp32-20261204-133000-{n}" / "generator.safetensors").is_file()
    assert (sorted(p.name for p in first.iterdir()) if first.is_dir() else None) == before


def test_two_commands_in_the_same_instant_take_two_default_folders(tmp_path, capsys, monkeypatch):
    """Another command named its default folder in this very second and had not made it yet (it loads its data):
    this one took the same name, wrote there, and the other was refused ('already holds files', an --out it was
    never given). The name is taken by making its folder; one made and never written in is removed at the end."""
    import datetime as dt
    from types import SimpleNamespace

    from fixtures import TINY_RUN

    import ampgan.runs.claim as claim

    frozen = dt.datetime(2026, 12, 4, 13, 30, 0)
    monkeypatch.setattr(claim, "dt", SimpleNamespace(datetime=SimpleNamespace(now=lambda: frozen)))
    monkeypatch.chdir(tmp_path)
    other_command = (  # the other command's choice, in its own process, before it claims the folder
        "import datetime as dt, types, ampgan.runs.claim as claim; "
        "claim.dt = types.SimpleNamespace(datetime=types.SimpleNamespace(now=lambda: dt.datetime(2026, 12, 4, 13, 30)))"
        "; print(claim.default_out('synthetic-fp32'))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    done = subprocess.run([sys.executable, "-c", other_command], capture_output=True, text=True, env=env)
    other = done.stdout.strip()
    assert other == "runs/synthetic-fp32-20261204-133000"
    code, _, err = run_cli(capsys, "train", "--steps", "2", *TINY_RUN, "--precision", "fp32")
    assert code == 0, err
    assert (tmp_path / "runs" / "synthetic-fp32-20261204-133000-2" / "generator.safetensors").is_file()
    assert not any((tmp_path / other).iterdir())
    code, _, err = run_cli(capsys, "train", "--steps", "2", *TINY_RUN, "--precision", "fp32", "--out", str(other))
    assert code == 0, err  # the other command writes where it chose
    code, _, err = run_cli(capsys, "train", "--steps", "2", *TINY_RUN, "--dry-run")
    made = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert code == 0 and made == ["synthetic-fp32-20261204-133000", "synthetic-fp32-20261204-133000-2"]


@pytest.mark.parametrize("command", ["train", "bench"])
def test_every_rank_takes_rank_zeros_default_folder(tmp_path, capsys, monkeypatch, command):
    """Under torchrun each rank names the default folder itself; one slower than rank 0 would find rank 0's folder
    made and take '-2': the ranks would write apart. The name is rank 0's on every rank (here, rank 0 says one)."""
    import pathlib

    from fixtures import TINY_RUN

    import ampgan.cli.options

    chosen = tmp_path / "rank0-chose-this"  # (both commands take it from cli.options.default_out)
    monkeypatch.setattr(
        ampgan.cli.options, "rank_zeros", lambda value: chosen if isinstance(value, pathlib.Path) else value
    )
    monkeypatch.chdir(tmp_path)
    bench = ["--dataset", "synthetic", "--width", "8", "--batch-sizes", "8", "--precisions", "fp32", "--no-trace"]
    options = ["--steps", "2", *TINY_RUN] if command == "train" else [*bench, "--steps", "2", "--device", "cpu"]
    code, _, err = run_cli(capsys, command, *options)
    assert code == 0, err
    assert chosen.is_dir() and not any((tmp_path / "runs").glob("*"))  # the folder this rank made was left empty
