"""A path read from a document is used only inside the document's folder or ampgan's own cache folder
(files/paths.py recorded_place), and a config read from a document never makes ampgan write where its data
lives (config/resume.py config_from_document): nothing a document says makes ampgan write outside."""

import json
import os
import shutil
import warnings
from pathlib import Path

import pytest
from conftest import run_cli
from fixtures import write_image_folder, write_quickdraw

from ampgan.config import TrainConfig, config_from_document
from ampgan.errors import AmpganWarning
from ampgan.files.cache_dir import cache_dir
from ampgan.study.spec import CompareSpec

COMMON = ["--width", "8", "--set", "model.z_dim=16", "--batch-size", "4", "--device", "cpu", "--quiet"]


def _spec_document(**places) -> dict:
    return CompareSpec(base=TrainConfig()).to_document(("fp32",)) | places


@pytest.mark.parametrize(
    "recorded, expected",
    [
        ("/elsewhere/evcache", None),  # the case: an absolute path anywhere
        ("../../evcache", None),  # relative, climbing out of the study
        ("sub/../../evcache", None),  # relative, climbing out after a detour
        (7, None),  # not a path at all
        ("cache/inside", "study"),  # inside the study
        ("CACHE", "cache"),  # inside ampgan's own cache folder
    ],
)
def test_a_recorded_place_is_used_only_inside_the_study_or_ampgans_cache(tmp_path, recorded, expected):
    study = tmp_path / "study"
    study.mkdir()
    if recorded == "CACHE":
        recorded = str(cache_dir() / "evaluators-elsewhere")
    document = _spec_document(evaluator_cache=recorded, bench_results=recorded)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = CompareSpec.from_document(document, study, study / "study.json")
    said = [str(w.message) for w in caught if issubclass(w.category, AmpganWarning)]
    if expected is None:
        assert spec.evaluator_cache is None and spec.bench_results is None
        assert len(said) == 2 and all("outside" in line and "ignored" in line for line in said), said
    else:
        root = study if expected == "study" else cache_dir()
        assert spec.evaluator_cache is not None and spec.evaluator_cache.resolve().is_relative_to(root.resolve())
        assert said == []


def test_a_recorded_place_that_links_out_of_the_study_is_ignored(tmp_path):
    study, outside = tmp_path / "study", tmp_path / "outside"
    study.mkdir()
    outside.mkdir()
    (study / "cache").symlink_to(outside, target_is_directory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = CompareSpec.from_document(_spec_document(evaluator_cache="cache"), study, study / "study.json")
    assert spec.evaluator_cache is None and len(caught) == 1


def test_compare_resume_writes_nothing_where_study_json_points(originals, tmp_path, capsys):
    """study.json edited to name an evaluator cache in ../evcache (relative, out of the study) and a bench
    to reuse at an absolute path outside: the resumed study caches its evaluator in ampgan's own cache,
    measures its own bench, says so in one warning each, and creates nothing outside."""
    study, outside = tmp_path / "study", tmp_path / "outside"
    shutil.copytree(originals / "study", study)
    outside.mkdir()
    bench = json.loads((study / "bench" / "results.json").read_text())
    bench["environment"]["date"] = "OUTSIDE-MARKER"
    (outside / "results.json").write_text(json.dumps(bench))
    progress = json.loads((study / "study.json").read_text())
    progress["spec"]["evaluator_cache"] = "../evcache"
    progress["spec"]["bench_results"] = str(outside / "results.json")
    progress["bench_done"] = False
    (study / "study.json").write_text(json.dumps(progress))
    before = sorted(os.listdir(tmp_path))

    code, out, err = run_cli(capsys, "compare", "--resume", str(study), "--quiet")
    assert code == 0, err
    assert sorted(os.listdir(tmp_path)) == before and os.listdir(outside) == ["results.json"]
    warned = [line for line in err.splitlines() if line.startswith("warning: ") and "ignored" in line]
    assert len(warned) == 2, err
    assert any("evaluator cache '../evcache'" in line for line in warned)
    assert any("the bench results" in line and "measures its own bench" in line for line in warned)
    assert "OUTSIDE-MARKER" not in (study / "bench" / "results.json").read_text()
    assert "report:" in out


def test_a_config_read_from_a_document_never_writes_where_data_lives():
    tree = TrainConfig().with_fields({"data.dataset": "quickdraw", "data.data_dir": "/x", "data.download": True})
    assert config_from_document(tree.to_dict()).data.download is False
    tree = TrainConfig().with_fields({"data.dataset": "folder:/x", "data.cache": True})
    assert config_from_document(tree.to_dict()).data.cache is False


def test_a_resumed_run_writes_no_cache_beside_the_images_unless_asked_again(tmp_path, capsys):
    """A run of a folder dataset trained with --cache, resumed as its config.json says: no cache is written
    into the data folder, which is not the run's; `--set data.cache=true` on resume asks for it again."""
    data = write_image_folder(tmp_path / "data", classes=("a", "b"), per_class=4, size=28)
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        f"folder:{data}",
        "--set",
        "data.cache=true",
        *COMMON,
        "--steps",
        "1",
        "--out",
        str(run),
    )
    assert code == 0, err
    caches = lambda: sorted(p.name for p in Path(data).glob(".ampgan-cache-*"))  # noqa: E731
    assert len(caches()) == 1
    for cache in Path(data).glob(".ampgan-cache-*"):
        cache.unlink()
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "2", "--quiet")
    assert code == 0, err
    assert caches() == []
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "3", "--set", "data.cache=true", "--quiet")
    assert code == 0, err
    assert len(caches()) == 1


def test_a_resumed_run_never_downloads_into_the_folder_its_config_names(tmp_path, capsys):
    """Trained with --download (the files were there), resumed after the data folder is gone: one line
    asking for --download, and the folder is not created again (a download would have made it)."""
    data = write_quickdraw(tmp_path / "elsewhere" / "quickdraw", classes=("apple", "eye"))
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "quickdraw",
        "--data-dir",
        str(data),
        "--set",
        "data.classes='apple,eye'",
        "--download",
        *COMMON,
        "--steps",
        "1",
        "--out",
        str(run),
    )
    assert code == 0, err
    shutil.rmtree(data)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "2", "--quiet")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--download" in err, err
    assert not data.exists()


def test_a_study_whose_data_folder_moved_resumes_from_its_new_place(tmp_path, capsys):
    """compare --resume of a study whose image folder moved: gone, one line naming --dataset folder:PATH; the new
    place given, the study resumes there once it holds the data its runs trained on (study.json records the move,
    so the next resume needs no flag); other data there, or another dataset, one line, the study untouched. (It
    said 'image folder ... does not exist', and refused the flag that named its new place: 'drop --dataset'.)"""
    from conftest import run_short_compare
    from fixtures import ORIGINALS_TINY
    from PIL import Image

    data, study = write_image_folder(tmp_path / "data", per_class=12, size=16), tmp_path / "study"
    assert run_short_compare(capsys, [*ORIGINALS_TINY[2:], "--dataset", f"folder:{data}"], study)[0] == 0
    moved, other = tmp_path / "moved", tmp_path / "other"
    data.rename(moved)
    shutil.copytree(moved, other)
    Image.new("RGB", (16, 16), (250, 0, 0)).save(other / "dogs" / "img0.png")
    before = (study / "study.json").read_text()
    resume = ["compare", "--resume", str(study), "--quiet"]
    for given, said in (
        ([], f"{data}, which is gone: give --dataset folder:PATH where it is now"),
        (["--dataset", f"folder:{other}"], "holds other data than"),
        (["--dataset", "digits"], "drop --dataset digits"),
    ):
        code, _, err = run_cli(capsys, *resume, *given)
        assert code == 2 and err.count("\n") == 1 and said in err, err
        assert (study / "study.json").read_text() == before
    code, _, err = run_cli(capsys, *resume, "--dataset", f"folder:{moved}")
    assert code == 0, err
    assert json.loads((study / "study.json").read_text())["spec"]["config"]["data"]["dataset"] == f"folder:{moved}"
    assert run_cli(capsys, *resume)[0] == 0


def test_projecting_old_bench_results_never_downloads_where_they_name(tmp_path):
    """Bench results without op tables (an older ampgan's) are traced from the config they record: a config read
    from a document, so its data.download is off (it downloaded into the data_dir the file named)."""
    from ampgan.errors import AmpganError
    from ampgan.projection.tables import op_tables_of

    where = tmp_path / "named-by-the-file"
    data = {"data.dataset": "quickdraw", "data.data_dir": str(where), "data.download": True}
    config = TrainConfig().with_fields(data)
    with pytest.raises(AmpganError, match="does not exist"):
        op_tables_of({"spec": {"config": config.to_dict()}}, tmp_path / "results.json")
    assert not where.exists()


def test_a_study_whose_model_file_moved_resumes_from_its_new_place(tmp_path, capsys):
    """compare --resume of a study of a user's GAN file that moved: gone, one line naming --model PATH.py:F; the
    new place given, the study resumes once the file there is the one its runs trained with (its SHA-256;
    study.json records the move); an edited file, or another function, one line, the study untouched."""
    from conftest import run_short_compare
    from fixtures import ORIGINALS_TINY
    from test_resume import USER_GAN

    model, moved, edited, study = tmp_path / "gm", tmp_path / "gm2", tmp_path / "gm3", tmp_path / "study"
    model.mkdir()
    (model / "mine.py").write_text(USER_GAN)
    assert run_short_compare(capsys, [*ORIGINALS_TINY, "--model", f"{model / 'mine.py'}:tiny"], study)[0] == 0
    model.rename(moved)
    shutil.copytree(moved, edited)
    (edited / "mine.py").write_text(USER_GAN.replace("nn.ReLU()", "nn.LeakyReLU()"))
    before = (study / "study.json").read_text()
    resume = ["compare", "--resume", str(study), "--quiet"]
    for given, said in (
        (["--trust-model"], f"{model / 'mine.py'}, which is gone: give --model PATH.py:tiny where the file is now"),
        (["--model", f"{edited / 'mine.py'}:tiny"], f"{edited / 'mine.py'} changed since"),
        (["--model", f"{moved / 'mine.py'}:other"], f"drop --model {moved / 'mine.py'}:other"),
    ):
        code, _, err = run_cli(capsys, *resume, *given)
        assert code == 2 and err.count("\n") == 1 and said in err, err
        assert (study / "study.json").read_text() == before
    code, _, err = run_cli(capsys, *resume, "--model", f"{moved / 'mine.py'}:tiny")
    assert code == 0, err
    assert (
        json.loads((study / "study.json").read_text())["spec"]["config"]["model"]["name"] == f"{moved / 'mine.py'}:tiny"
    )
    assert run_cli(capsys, *resume, "--trust-model")[0] == 0


def test_a_study_whose_first_run_folder_is_not_at_its_seed_resumes_on_the_data_it_loaded(tmp_path, capsys, monkeypatch):
    """compare --resume checks the study's data against a run's recorded SHA-256 on the data as the study loads
    it (its seed), and loads it once (run_study takes it; it was loaded twice): with seeds 9 and 10 the first run
    folder by name is bf16-seed10, and the synthetic images seed 10 draws were taken for other data than the runs
    trained on ('holds other data than': a finished study could not be resumed)."""
    from fixtures import ORIGINALS_TINY

    study = tmp_path / "study"
    budget = ["--time-budget", "1s", "--set", "compare.eval_points=1", "--set", "compare.eval_samples=20"]
    bench = ["--set", "compare.bench.batch_sizes=8", "--set", "compare.bench.min_seconds=0.3"]
    bench += ["--set", "compare.bench.max_seconds=0.9"]
    study_args = [*ORIGINALS_TINY, "--precisions", "fp32,bf16", "--seed", "9", "--seeds", "2", *budget, *bench]
    code, _, err = run_cli(capsys, "compare", *study_args, "--out", str(study))
    assert code == 0, err
    assert sorted(p.name for p in (study / "runs").iterdir())[0] == "bf16-seed10"
    before = json.loads((study / "study.json").read_text())
    import ampgan.study.compare
    import ampgan.training.start

    loads = []
    for module in (ampgan.study.compare, ampgan.training.start):
        real = module.load_dataset
        monkeypatch.setattr(module, "load_dataset", lambda *a, real=real, **k: loads.append(a) or real(*a, **k))
    code, _, err = run_cli(capsys, "compare", "--resume", str(study), "--quiet")
    assert code == 0, err
    assert json.loads((study / "study.json").read_text()) == before and len(loads) == 1
