"""A folder someone gives you is data, not code: a model that is not built in is imported only when the
person running ampgan names it (the model trust rule, gan/registry.py); every check of the folder comes
first."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

TINY = ("--dataset", "synthetic", "--batch-size", "8", "--device", "cpu", "--quiet")

# A user's model file that leaves a mark on disk whenever it is imported (its code ran).
MODEL_SOURCE = textwrap.dedent("""
    import pathlib, sys
    pathlib.Path(__file__).with_name("IMPORTED").write_text("ran")
    sys.path.insert(0, {examples!r})
    from conditional_mlp import cgan as _cgan

    def build(data, *, hidden: int = 32):
        return _cgan(data, z_dim=8, hidden=hidden)
""")


@pytest.fixture(scope="module")
def _trained_once(tmp_path_factory):
    """(model file, run folder): a run of a user's model, trained once for the module."""
    import ampgan.trust as registry
    from ampgan.cli import main

    root = tmp_path_factory.mktemp("given")
    (root / "model").mkdir()
    model = root / "model" / "gan.py"
    model.write_text(MODEL_SOURCE.format(examples=str(Path(__file__).resolve().parents[1] / "examples")))
    saved = set(registry._CONSENTED)
    try:
        main(["train", *TINY, "--model", f"{model}:build", "--steps", "2", "--out", str(root / "run")])
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    finally:
        registry._CONSENTED.clear()
        registry._CONSENTED.update(saved)
    return model, root / "run"


@pytest.fixture
def user_model(_trained_once):
    """The model file, its mark of an import removed."""
    _forget_import(_trained_once[0])
    return _trained_once[0]


def _imported(model: Path) -> bool:
    return model.with_name("IMPORTED").exists()


def _forget_import(model: Path) -> None:
    import sys

    model.with_name("IMPORTED").unlink(missing_ok=True)
    for name in [n for n in sys.modules if n.startswith("ampgan_user_model_")]:
        del sys.modules[name]


@pytest.fixture
def given_run(tmp_path, _trained_once, user_model):
    """A copy of that run, handed over by someone else."""
    run = tmp_path / "given-run"
    shutil.copytree(_trained_once[1], run)
    return run


@pytest.mark.parametrize(
    "command",
    [
        ("generate", "{run}", "--out", "{tmp}/g.png"),
        ("evaluate", "{run}", "--samples", "4"),
        ("train", "--resume", "{run}", "--steps", "3"),
        ("train", "--config", "{run}/config.json", "--dry-run", "--device", "cpu"),
    ],
)
def test_a_folder_never_imports_the_model_it_names(capsys, tmp_path, given_run, user_model, command):
    args = [word.format(run=given_run, tmp=tmp_path) for word in command]
    code, _, err = run_cli(capsys, *args)
    assert not _imported(user_model), f"{args[0]} ran the model file named by the folder"
    assert code == 2, err
    line = err.strip().splitlines()[-1]
    assert len(err.strip().splitlines()) == 1 and line.startswith("error:")
    assert "not built in" in line and f"--model {user_model}:build" in line and "--trust-model" in line


def test_naming_the_model_or_consenting_lets_it_run(capsys, tmp_path, given_run, user_model):
    code, out, err = run_cli(
        capsys, "generate", str(given_run), "--out", str(tmp_path / "g.png"), "--trust-model", "--class", "0"
    )
    assert code == 0, err
    assert _imported(user_model) and (tmp_path / "g.png").is_file()
    _forget_import(user_model)
    code, out, err = run_cli(
        capsys, "train", "--resume", str(given_run), "--steps", "3", "--quiet", "--model", f"{user_model}:build"
    )
    assert code == 0, err
    assert _imported(user_model)


def test_a_refused_resume_never_imports(capsys, given_run, user_model):
    """The folder's own checks (a checkpoint that does not belong, config.json edited) refuse it before
    any model is built, even with consent."""
    config_path = given_run / "config.json"
    document = json.loads(config_path.read_text())
    document["config"]["model"]["hidden"] = 64  # edited after training
    config_path.write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "train", "--resume", str(given_run), "--steps", "3", "--trust-model")
    assert code == 2 and "config.json was edited" in err
    assert not _imported(user_model)


def test_a_study_never_imports_the_model_it_names(capsys, tmp_path, user_model, monkeypatch):
    import ampgan.trust as registry

    study = tmp_path / "study"
    study.mkdir()
    spec = {"config": {"model": {"name": f"{user_model}:build"}, "data": {"dataset": "synthetic"}}}
    (study / "study.json").write_text(
        json.dumps(
            {
                "format": "ampgan-study/1",
                "identity": "x",
                "spec": spec,
                "decided": None,
                "bench_done": False,
                "runs": {},
            }
        )
    )
    code, _, err = run_cli(capsys, "compare", "--resume", str(study), "--quiet")
    assert code == 2 and "--trust-model" in err and not _imported(user_model)
    assert registry._CONSENTED == set()


def test_a_module_path_name_is_data_too(capsys, tmp_path, monkeypatch, user_model):
    """package.module:FUNCTION from a file imports from sys.path the same way: refused alike."""
    monkeypatch.syspath_prepend(str(user_model.parent))
    config = tmp_path / "c.toml"
    config.write_text('[model]\nname = "gan:build"\n[data]\ndataset = "synthetic"\n')
    code, _, err = run_cli(capsys, "train", "--config", str(config), "--dry-run", "--device", "cpu")
    assert code == 2 and "--model gan:build" in err and not _imported(user_model)


# ---- --overwrite: one marker, one rule --------------------------------------------------------------
def _train(capsys, out, *extra):
    return run_cli(
        capsys, "train", *TINY, "--width", "8", "--set", "model.z_dim=16", "--steps", "2", "--out", str(out), *extra
    )


def test_a_format_version_key_is_no_licence_to_delete(capsys, tmp_path):
    """A folder that merely looks like ampgan's (a config.json with format_version) is never replaced."""
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "thesis.tex").write_text("years of work")
    (project / "config.json").write_text('{"format_version": 2, "config": {}}')
    code, _, err = _train(capsys, project, "--overwrite")
    assert code == 2 and "no ampgan marker" in err
    assert (project / "src" / "thesis.tex").read_text() == "years of work"


def test_overwrite_refuses_a_run_folder_holding_a_users_file(capsys, tmp_path):
    run = tmp_path / "run"
    assert _train(capsys, run)[0] == 0
    marker = json.loads((run / ".ampgan-folder").read_text())
    assert marker["kind"] == "run" and "config.json" in marker["may_contain"]
    (run / "samples" / "my-notes.txt").write_text("mine")
    code, _, err = _train(capsys, run, "--overwrite")
    assert code == 2 and "samples/my-notes.txt" in err and "ampgan did not write" in err
    assert (run / "samples" / "my-notes.txt").read_text() == "mine"
    (run / "samples" / "my-notes.txt").unlink()
    assert _train(capsys, run, "--overwrite")[0] == 0  # only ampgan's files: replaced


def test_a_link_inside_is_never_followed_when_replacing(capsys, tmp_path):
    run, precious = tmp_path / "run", tmp_path / "precious"
    precious.mkdir()
    (precious / "data.bin").write_text("keep")
    assert _train(capsys, run)[0] == 0
    (run / "samples" / "more").symlink_to(precious, target_is_directory=True)
    code, _, err = _train(capsys, run, "--overwrite")
    assert code == 2 and "samples/more" in err
    assert (precious / "data.bin").read_text() == "keep"


def test_a_run_inside_a_study_is_not_replaced_from_outside(capsys, tmp_path):
    from ampgan.runs.claim import MARKER, claimed_folder

    study = tmp_path / "study"
    with claimed_folder(study, overwrite=False, kind="study"):
        pass
    run = study / "runs" / "fp32-seed0"
    code, _, err = _train(capsys, run)  # a folder belongs to one thing: not made by hand inside it ...
    assert code == 2 and "is inside" in err and "ampgan's study folder" in err and not run.exists()
    with claimed_folder(study, overwrite=True, kind="study"):  # ... nor replaced from outside
        with claimed_folder(run, overwrite=False, kind="run"):  # (made by the command holding the study)
            pass
    code, _, err = _train(capsys, run, "--overwrite")
    assert code == 2 and "is inside" in err and (run / MARKER).is_file()


def test_a_name_with_a_newline_cannot_forge_a_line(capsys, tmp_path):
    out = tmp_path / "x\nerror: all good, exit 0"
    out.mkdir()
    (out / "f").write_text("x")
    code, _, err = _train(capsys, out)
    assert code == 2 and err.count("\n") == 1 and "\\n" in err


def test_an_unfinished_folder_is_replaced_by_the_same_command_again(tmp_path):
    """What a killed `ampgan project` leaves (its first file and a temporary figure) does not block the
    rerun; a finished one, or one holding a user's file, still needs --overwrite or is refused."""
    from ampgan.errors import AmpganError
    from ampgan.files.atomic import write_atomically
    from ampgan.files.manifest import record_temporary
    from ampgan.runs.claim import claimed_folder

    finished = ("projection.json", "fig_projection.png")
    unfinished = lambda folder: not all((folder / name).is_file() for name in finished)  # noqa: E731
    out = tmp_path / "projection"
    with claimed_folder(out, overwrite=False, kind="projection", unfinished=unfinished):
        write_atomically(out / "projection.json", lambda stream: stream.write(b"{}"))
        record_temporary(out / ".fig_projection.png.x1.tmp")  # as write_atomically does, then killed while drawing
        (out / ".fig_projection.png.x1.tmp").write_bytes(b"\x89PNG")
    with claimed_folder(out, overwrite=False, kind="projection", unfinished=unfinished):
        assert not (out / "projection.json").exists()  # replaced: a fresh start
        for name in finished:
            write_atomically(out / name, lambda stream: stream.write(b"done"))
    with pytest.raises(AmpganError, match="already holds files"):
        with claimed_folder(out, overwrite=False, kind="projection", unfinished=unfinished):
            pass
    (out / "fig_projection.png").unlink()
    (out / "mine.txt").write_text("mine")
    with pytest.raises(AmpganError, match="mine.txt, which ampgan did not write"):
        with claimed_folder(out, overwrite=False, kind="projection", unfinished=unfinished):
            pass
    assert (out / "mine.txt").read_text() == "mine"


def test_a_path_recorded_in_a_document_stays_inside_its_folder(tmp_path):
    from ampgan.errors import AmpganError
    from ampgan.files.paths import inside

    folder = tmp_path / "study"
    (folder / "runs" / "a").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (folder / "runs" / "link").symlink_to(tmp_path / "secret", target_is_directory=True)
    assert inside(folder, "runs/a", folder / "compare.json") == folder / "runs" / "a"
    for recorded in ("/etc", "../secret", "runs/../../secret", "runs/link", "~/x", "runs/a\n", 7, None, ""):
        with pytest.raises(AmpganError, match="not inside"):
            inside(folder, recorded, folder / "compare.json")


def test_a_study_whose_document_points_outside_is_refused_by_report(capsys, tmp_path):
    """compare.json's run_dir set to an absolute path or ../.. never makes the report read or embed it."""

    study = tmp_path / "study"
    study.mkdir()
    document = {
        "format": "ampgan-compare/1",
        "outcome": "no faster mode",
        "spec": {"batch_size": 8},
        "dataset": {"name": "synthetic", "class_names": ["a"]},
        "environment": {"hardware_summary": "h", "date": "d", "versions": {"torch": "t", "ampgan": "a", "python": "p"}},
        "runs": {
            "fp32": {
                "run_dir": "/home/someone/private",
                "steps": 1,
                "train_seconds": 1.0,
                "final": {"frechet_distance": 1.0},
            }
        },
    }
    (study / "compare.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "report", str(study))
    assert code == 2 and "runs.fp32.run_dir should be a path inside its folder" in err
    document["runs"]["fp32"]["run_dir"] = "runs/fp32-seed0"
    for field, value, said in (
        ("train_seconds", float("nan"), "train_seconds should be a number from 0 to inf, got nan"),
        ("train_seconds", -3.0, "train_seconds should be a number from 0 to inf, got -3.0"),
        ("steps", 1.5, "steps should be a whole number of at least 0, got 1.5"),
    ):
        damaged = json.loads(json.dumps(document))
        damaged["runs"]["fp32"][field] = value
        (study / "compare.json").write_text(json.dumps(damaged))
        code, _, err = run_cli(capsys, "report", str(study))
        assert code == 2 and said in err, err
    damaged = json.loads(json.dumps(document))
    damaged["runs"]["fp32"]["final"]["recall"] = 7.5
    (study / "compare.json").write_text(json.dumps(damaged))
    code, _, err = run_cli(capsys, "report", str(study))
    assert code == 2 and "final.recall should be a number from 0 to 1, got 7.5" in err


# ---- values read back are validated before use ------------------------------------------------------
@pytest.fixture(scope="module")
def _built_in_run(tmp_path_factory):
    from ampgan.cli import main

    run = tmp_path_factory.mktemp("built-in") / "run"
    try:
        main(["train", *TINY, "--width", "8", "--set", "model.z_dim=16", "--steps", "2", "--out", str(run)])
    except SystemExit as exit_:
        assert exit_.code in (0, None)
    return run


@pytest.mark.parametrize("damage", ["nan weight", "int64 weight", "negative step", "renamed"])
def test_a_checkpoint_with_impossible_values_is_refused_by_every_reader(capsys, tmp_path, _built_in_run, damage):
    import torch

    from ampgan.files.manifest import record

    run = tmp_path / "run"
    shutil.copytree(_built_in_run, run)
    (checkpoint,) = sorted((run / "checkpoints").glob("step-*.pt"))[-1:]
    payload = torch.load(checkpoint, weights_only=True)
    name = next(k for k, v in payload["generator"].items() if v.is_floating_point())
    if damage == "nan weight":
        payload["generator"][name] = payload["generator"][name].clone().fill_(float("nan"))
        expected = "non-finite values in generator."
    elif damage == "int64 weight":
        payload["generator"][name] = payload["generator"][name].long()
        expected = "int64, where this run's model has"
    elif damage == "negative step":
        payload["step"] = -5
        expected = "says step -5"
    else:
        payload["step"] = 1
        expected = "says step 1"
    torch.save(payload, checkpoint)
    record(checkpoint)  # as if ampgan had written these values: the checks after its digest (files/manifest.py)
    before = (run / "metrics.jsonl").read_bytes()
    for command in (
        ("generate", str(run), "--class", "0", "--out", str(tmp_path / "g.png")),
        ("evaluate", str(run), "--samples", "4"),
        ("train", "--resume", str(run), "--steps", "4", "--quiet"),
    ):
        code, out, err = run_cli(capsys, *command)
        assert code == 2 and expected in err and len(err.strip().splitlines()) == 1, (command, err)
    assert not (tmp_path / "g.png").exists() and (run / "metrics.jsonl").read_bytes() == before


def test_cost_never_replaces_someone_elses_cost_file(capsys, tmp_path):
    """`ampgan cost` writes beside the results only in ampgan's own folder, and --out is claimed like every
    output folder."""
    from test_cost import bench_results

    results = tmp_path / "theirs" / "results.json"
    results.parent.mkdir()
    results.write_text(json.dumps(bench_results()))
    (tmp_path / "theirs" / "cost.json").write_text('{"mine": true}')
    code, _, err = run_cli(capsys, "cost", str(results), "--price-per-hour", "1")
    assert (
        code == 2
        and "give --out" in err
        and json.loads((tmp_path / "theirs" / "cost.json").read_text()) == {"mine": True}
    )
    assert run_cli(capsys, "cost", str(results), "--price-per-hour", "1", "--out", str(tmp_path / "c"))[0] == 0
    code, _, err = run_cli(capsys, "cost", str(results), "--price-per-hour", "2", "--out", str(tmp_path / "c"))
    assert code == 2 and "already holds files" in err
    assert (
        run_cli(capsys, "cost", str(results), "--price-per-hour", "2", "--out", str(tmp_path / "c"), "--overwrite")[0]
        == 0
    )
