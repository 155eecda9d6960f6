"""A folder ampgan is given is read only inside itself (files/paths.py): a link that leads out (a linked file,
a linked subfolder on the way, a relative `../` link) never carries an outside file into a report, a
resumed run or a dataset. Links that stay inside are followed."""

import base64
import json
import os
import shutil

import numpy as np
import pytest
from conftest import run_cli
from fixtures import write_image_folder
from PIL import Image

MAGENTA = (255, 0, 255)


# originals: a run folder and a finished comparison, made once per session (conftest.py).


@pytest.fixture
def secret(tmp_path):
    """Outside every folder: a PNG that is all magenta (easy to find in a figure) with a secret in its
    bytes, and the same secret as a text file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    image = Image.new("RGB", (64, 64), MAGENTA)
    from PIL.PngImagePlugin import PngInfo

    info = PngInfo()
    info.add_text("note", "TOP-SECRET-API-KEY=abc123")
    image.save(outside / "secret.png", pnginfo=info)
    (outside / "secret.txt").write_text("TOP-SECRET-API-KEY=abc123")
    return outside


def _nothing_outside_in(study, secret_png):
    html = (study / "report.html").read_text()
    md = (study / "report.md").read_text()
    payload = secret_png.read_bytes()
    assert base64.b64encode(payload).decode()[:200] not in html
    assert "TOP-SECRET" not in html and "TOP-SECRET" not in md
    for figure in study.glob("fig*.png"):
        pixels = np.asarray(Image.open(figure).convert("RGB")).reshape(-1, 3)
        assert not (pixels == MAGENTA).all(axis=1).any(), figure  # not one pixel of the outside image


def _warned(err: str) -> list[str]:
    lines = err.strip().splitlines()
    assert all(line.startswith("warning: ") for line in lines), lines
    return [line for line in lines if "a link leading outside" in line]


def test_report_leaves_out_every_figure_and_grid_that_links_out(originals, secret, tmp_path, capsys):
    """The issue's case (a bench figure linked to an outside file) and three it did not name: the other
    bench figure as a relative `../..` link, the run's samples/ folder linked out whole, and doctor.json
    linked to an outside document. Each is left out with one warning line; the report is written."""
    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    (study / "bench" / "fig1_time_per_batch.png").unlink()
    (study / "bench" / "fig1_time_per_batch.png").symlink_to(secret / "secret.png")
    (study / "bench" / "fig2_time_per_1000_samples.png").unlink()
    relative = os.path.relpath(secret / "secret.png", study / "bench")
    assert relative.startswith("..")
    (study / "bench" / "fig2_time_per_1000_samples.png").symlink_to(relative)
    run = next((study / "runs").iterdir())
    outside_samples = secret / "samples"
    outside_samples.mkdir()
    for grid in (run / "samples").glob("step-*.png"):
        shutil.copy(secret / "secret.png", outside_samples / grid.name)
    shutil.copy(secret / "secret.png", outside_samples / "step-999999.png")
    shutil.rmtree(run / "samples")
    (run / "samples").symlink_to(outside_samples, target_is_directory=True)
    (secret / "doctor.json").write_text('{"summary_lines": ["TOP-SECRET-API-KEY=abc123"]}')
    (study / "doctor.json").symlink_to(secret / "doctor.json")

    code, out, err = run_cli(capsys, "report", str(study))
    assert code == 0, err
    warned = _warned(err)
    assert len(warned) == 4, warned
    for name in ("fig1_time_per_batch.png", "fig2_time_per_1000_samples.png", "step-999999.png", "doctor.json"):
        assert sum(name in line for line in warned) == 1, (name, warned)
    _nothing_outside_in(study, secret / "secret.png")
    assert "fig1_time_per_batch" not in (study / "report.md").read_text()
    # The links are left as they were: ampgan neither follows nor removes them.
    assert (study / "bench" / "fig1_time_per_batch.png").is_symlink() and (run / "samples").is_symlink()


def test_a_link_that_stays_inside_is_followed(originals, tmp_path, capsys):
    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    figure = study / "bench" / "fig1_time_per_batch.png"
    figure.rename(study / "bench" / "kept.png")
    figure.symlink_to("kept.png")
    code, _, err = run_cli(capsys, "report", str(study))
    assert code == 0 and not _warned(err), err
    embedded = base64.b64encode((study / "bench" / "kept.png").read_bytes()).decode()
    assert embedded in (study / "report.html").read_text()


def test_a_study_document_that_links_out_is_refused(originals, secret, tmp_path, capsys):
    """compare.json linked to another study's outside the folder, or the whole bench/ folder linked out:
    one error line, nothing written."""
    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    other = secret / "other-study"
    shutil.copytree(originals / "study", other)
    (study / "compare.json").unlink()
    (study / "compare.json").symlink_to(other / "compare.json")
    before = (study / "report.html").read_bytes()
    code, _, err = run_cli(capsys, "report", str(study))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "compare.json leads outside" in err and "through a link" in err
    assert (study / "report.html").read_bytes() == before


@pytest.mark.parametrize("what", ["checkpoint", "checkpoints folder", "config.json", "metrics.jsonl"])
def test_a_run_whose_files_link_out_is_not_resumed_or_read(originals, secret, tmp_path, capsys, what):
    run = tmp_path / "run"
    shutil.copytree(originals / "run", run)
    other = secret / "other-run"
    shutil.copytree(originals / "run", other)
    if what == "checkpoint":
        newest = sorted((run / "checkpoints").iterdir())[-1]
        newest.unlink()
        newest.symlink_to(os.path.relpath(other / "checkpoints" / newest.name, newest.parent))
    elif what == "checkpoints folder":
        shutil.rmtree(run / "checkpoints")
        (run / "checkpoints").symlink_to(other / "checkpoints", target_is_directory=True)
    else:
        (run / what).unlink()
        (run / what).symlink_to(other / what)
    commands = [["train", "--resume", str(run), "--steps", "6", "--quiet"]]
    if what != "metrics.jsonl":  # generate reads the config and the newest checkpoint only
        commands.append(["generate", str(run), "--n", "4", "--out", str(tmp_path / "g.png")])
    for command in commands:
        code, _, err = run_cli(capsys, *command)
        assert code == 2 and len(err.strip().splitlines()) == 1, (command, err)
        assert "leads outside" in err and "through a link" in err, err
    assert not (tmp_path / "g.png").exists()


def test_a_dataset_class_folder_linked_out_is_refused(secret, tmp_path, capsys):
    """The dataset refused a linked image before; a class folder that is itself a link leading out (its
    images are plain files) was read: now refused alike."""
    root = write_image_folder(tmp_path / "data", classes=("cats", "dogs"), per_class=2, size=8)
    write_image_folder(secret / "pictures", classes=("private",), per_class=2, size=8)
    (root / "private").symlink_to(secret / "pictures" / "private", target_is_directory=True)
    code, _, err = run_cli(capsys, "data", "info", f"folder:{root}")
    assert code == 2 and "outside the dataset folder" in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("linked", ["samples", "tensorboard"])
def test_a_resumed_run_never_writes_through_a_subfolder_linked_out(originals, secret, tmp_path, capsys, linked):
    """A run folder whose samples/ (or tensorboard/) is a link to an outside folder: resuming it would write
    grids there; it is refused in one line before anything is written, and the outside folder stays empty."""
    run = tmp_path / "run"
    shutil.copytree(originals / "run", run)
    target = secret / "written-here"
    target.mkdir()
    shutil.rmtree(run / linked, ignore_errors=True)
    (run / linked).symlink_to(target, target_is_directory=True)
    before = (run / "config.json").read_bytes()
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "leads outside" in err, err
    assert list(target.iterdir()) == [] and (run / "config.json").read_bytes() == before


def test_a_resumed_study_never_writes_through_a_run_folder_linked_out(originals, secret, tmp_path, capsys):
    study = tmp_path / "study"
    shutil.copytree(originals / "study", study)
    run = next((study / "runs").iterdir())
    shutil.move(run, secret / run.name)
    run.symlink_to(secret / run.name, target_is_directory=True)
    progress = json.loads((study / "study.json").read_text())
    progress["runs"].pop(run.name)  # not finished: the resumed study would train it again, there
    (study / "study.json").write_text(json.dumps(progress))
    before = sorted(p.name for p in (secret / run.name).rglob("*"))
    code, _, err = run_cli(capsys, "compare", "--resume", str(study), "--quiet")
    assert code == 2 and "leads outside" in err and err.strip().splitlines()[-1].startswith("error:"), err
    assert sorted(p.name for p in (secret / run.name).rglob("*")) == before
