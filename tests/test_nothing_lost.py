"""Nothing lost, nothing silently wrong: runs that diverge stop loudly, checkpoints resume only their own
run, caches and logs are checked before they are trusted, links are never followed, data cannot hang a run."""

import gzip
import json
import os
import signal
import stat
import struct

import pytest
import torch
from conftest import run_cli, writer_in_flight
from fixtures import ORIGINALS_TINY, write_mnist, write_quickdraw

from ampgan.errors import AmpganError

TINY = ORIGINALS_TINY


def test_a_dataset_without_training_images_is_refused_before_training(tmp_path, capsys):
    mnist = write_mnist(tmp_path / "mnist", count=0)
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "mnist",
        "--data-dir",
        str(mnist),
        "--steps",
        "2",
        "--out",
        str(tmp_path / "a"),
        "--quiet",
    )
    assert (
        code == 2 and "holds 0 images of 28x28 pixels" in err and err.count("\n") == 1 and not (tmp_path / "a").exists()
    )
    # One drawing per class: the test split takes it, the training split is empty.
    quickdraw = write_quickdraw(tmp_path / "qd", rows=1)
    code, _, err = run_cli(
        capsys,
        "train",
        "--dataset",
        "quickdraw",
        "--data-dir",
        str(quickdraw),
        "--set",
        "data.classes=apple,eye,fish",
        "--steps",
        "2",
        "--out",
        str(tmp_path / "b"),
        "--quiet",
    )
    assert code == 2 and "has no training images" in err and err.count("\n") == 1


def test_a_diverged_run_stops_with_exit_3_and_writes_no_non_finite_generator(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--set",
        "optim.lr_g=1e10",
        "--set",
        "optim.lr_d=1e10",
        "--steps",
        "40",
        "--set",
        "logging.log_every=1",
        "--out",
        str(run),
    )
    assert code == 3, err
    assert "non-finite (NaN or inf) weights or statistics by step" in err and "folder is not kept" in err
    assert not run.exists()
    # Checkpointing every step: the fault names the last good one, and no generator is exported.
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--set",
        "optim.lr_g=1e10",
        "--set",
        "optim.lr_d=1e10",
        "--steps",
        "40",
        "--set",
        "logging.log_every=1",
        "--checkpoint-every",
        "1",
        "--out",
        str(run),
    )
    assert code == 3 and "the last good checkpoint is step 1" in err, err
    assert not (run / "generator.safetensors").exists()
    saved = torch.load(sorted((run / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    assert saved["step"] == 1 and all(
        torch.isfinite(v).all() for v in saved["generator"].values() if v.is_floating_point()
    )
    # The losses stayed finite (about 1e22): only the weights and their statistics told.
    assert all(
        abs(json.loads(line)["loss_d"]) < float("inf") for line in (run / "metrics.jsonl").read_text().splitlines()
    )


def test_a_static_fp16_scale_that_overflows_every_update_is_caught_early(tmp_path, capsys):
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--precision",
        "fp16",
        "--loss-scale",
        "1e30",
        "--steps",
        "30",
        "--set",
        "logging.log_every=2",
        "--out",
        str(tmp_path / "run"),
    )
    assert code == 3 and "every fp16 update of D was skipped for overflow in the first 10 steps" in err
    for scale in ("inf", "nan", "-5"):
        code, _, err = run_cli(capsys, "train", *TINY, "--precision", "fp16", "--loss-scale", scale, "--dry-run")
        assert code == 2 and "--loss-scale" in err and err.count("\n") == 1


def test_a_checkpoint_resumes_only_the_run_that_saved_it(tmp_path, capsys):
    from ampgan.files.manifest import record

    one, two = tmp_path / "one", tmp_path / "two"
    for folder, seed in ((one, "0"), (two, "1")):
        assert run_cli(capsys, "train", *TINY, "--steps", "4", "--seed", seed, "--out", str(folder))[0] == 0
    # config.json edited: the fp32 checkpoint must not continue as bf16.
    document = json.loads((one / "config.json").read_text())
    document["config"]["precision"]["name"] = "bf16"
    (one / "config.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "train", "--resume", str(one), "--steps", "8")
    assert code == 2 and "was trained with precision.name = 'fp32', but" in err and "says 'bf16'" in err
    # Another seed's checkpoint copied in: another run.
    latest = sorted((two / "checkpoints").glob("*.pt"))[-1]
    target = sorted((one / "checkpoints").glob("*.pt"))[-1]
    document["config"]["precision"]["name"] = "fp32"
    (one / "config.json").write_text(json.dumps(document))
    target.write_bytes(latest.read_bytes())
    code, _, err = run_cli(capsys, "train", "--resume", str(one), "--steps", "8")
    assert code == 2 and "copied in from elsewhere" in err and err.count("\n") == 1  # not what ampgan wrote here
    record(target)  # ... and even if it were recorded, its run identity refuses it
    code, _, err = run_cli(capsys, "train", "--resume", str(one), "--steps", "8")
    assert code == 2 and "was saved by another run" in err and err.count("\n") == 1


def test_a_cached_evaluator_whose_weights_were_replaced_is_trained_anew(tmp_path, monkeypatch):
    from ampgan.data.synthetic import make_synthetic
    from ampgan.quality import evaluator as evaluator_module
    from ampgan.quality.evaluator import Evaluator, evaluator_for

    monkeypatch.setattr(evaluator_module, "MIN_TRAINING_STEPS", 10)  # the cache's behaviour, not its accuracy

    dataset = make_synthetic(count=160, num_classes=4, channels=3, image_size=32, seed=0)
    torch.manual_seed(123)
    callers = torch.random.get_rng_state()
    first = evaluator_for(dataset, cache_dir=tmp_path, epochs=1)
    assert torch.equal(torch.random.get_rng_state(), callers)  # the caller's random state is left as it was
    weights = next(tmp_path.glob("*.pt"))
    torch.save(Evaluator(3, 4).state_dict(), weights)  # the right shape, the wrong weights
    with pytest.warns(Warning, match="its weights are not the ones it was saved with"):
        again = evaluator_for(dataset, cache_dir=tmp_path, epochs=1)
    assert again.held_out_accuracy == first.held_out_accuracy  # retrained, deterministically
    weights.write_bytes(b"garbage")
    with pytest.warns(Warning, match="not usable"):
        evaluator_for(dataset, cache_dir=tmp_path, epochs=1)


def test_an_evaluator_entry_whose_writer_was_killed_leaves_nothing_once_the_cache_is_read(tmp_path, monkeypatch):
    """kill -9 while another process wrote an evaluator entry left its `.KEY.pt....writing.tmp` in the cache for
    good: the next evaluation that finds the entry (and only reads it) removes it."""
    from ampgan.data.synthetic import make_synthetic
    from ampgan.quality import evaluator as evaluator_module
    from ampgan.quality.evaluator import evaluator_for

    monkeypatch.setattr(evaluator_module, "MIN_TRAINING_STEPS", 10)  # the cache's behaviour, not its accuracy
    dataset = make_synthetic(count=160, num_classes=4, channels=3, image_size=32, seed=0)
    # min_accuracy 0: ten steps' accuracy varies from run to run, and may fall short of the usual threshold
    first = evaluator_for(dataset, cache_dir=tmp_path, epochs=1, min_accuracy=0.0)
    entry = sorted(os.listdir(tmp_path))
    killed = writer_in_flight(tmp_path / os.path.basename(first.info["cache"]))
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert len(os.listdir(tmp_path)) == 3
    again = evaluator_for(dataset, cache_dir=tmp_path, epochs=1, min_accuracy=0.0)
    assert again.info == first.info and sorted(os.listdir(tmp_path)) == entry


def test_an_evaluation_refuses_a_run_whose_class_list_disagrees_with_its_data(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    document = json.loads((run / "config.json").read_text())
    document["dataset"]["class_names"] = document["dataset"]["class_names"][:3]
    (run / "config.json").write_text(json.dumps(document))
    code, _, err = run_cli(capsys, "evaluate", str(run), "--samples", "20")
    assert code == 2 and "names 3 classes but counts images of 10" in err and err.count("\n") == 1


def test_a_link_planted_at_the_lock_or_a_log_is_never_written_through(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    (run / ".ampgan-lock").unlink()
    (run / ".ampgan-lock").symlink_to(precious)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4")
    assert code == 2 and ".ampgan-lock is a symbolic link" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "2", "--overwrite", "--out", str(run))
    assert code == 2 and ".ampgan-lock is a symbolic link" in err
    assert precious.read_text() == "keep me"
    (run / ".ampgan-lock").unlink()
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").symlink_to(precious)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4")
    # A log that links out of the run is refused before anything is written (files/paths.py file_in).
    assert code == 2 and err.count("\n") == 1 and "metrics.jsonl" in err
    assert precious.read_text() == "keep me"


def test_report_markdown_shows_names_literally():
    from ampgan.study.report import _TEMPLATES, Section

    evil = '<img src=x onerror=alert(1)> a|b\n"><script>'
    text = _TEMPLATES.get_template("report.md.j2").render(
        title=evil,
        sections=[Section("Classes", lines=[evil], table=[["class", "n"], [evil, "1"]])],
        relative=str,
        data_uri=str,
    )
    assert "<img" not in text and "<script>" not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "| &lt;img src=x onerror=alert(1)&gt; a\\|b &quot;&gt;&lt;script&gt; | 1 |" in text.replace('"', "&quot;")


def test_an_idx_file_is_read_only_as_far_as_its_header_announces(tmp_path, capsys):
    folder = write_mnist(tmp_path / "mnist", count=20)
    images = folder / "train-images-idx3-ubyte.gz"
    with gzip.open(images, "rb") as handle:
        original = handle.read()
    with gzip.open(images, "wb") as handle:  # 20 images announced, 64 MiB of zeros after them (compresses to KiBs)
        handle.write(original + bytes(64 * 2**20))
    assert images.stat().st_size < 2**20
    code, _, err = run_cli(capsys, "data", "info", "mnist", "--data-dir", str(folder))
    assert code == 2 and "holds more data than its header announces" in err
    with gzip.open(images, "wb") as handle:  # a header announcing 10^9 images: refused before reading them
        handle.write(struct.pack(">IIII", 0x00000803, 10**9, 28, 28))
    code, _, err = run_cli(capsys, "data", "info", "mnist", "--data-dir", str(folder))
    assert code == 2 and "announces 730.2 GiB" in err


def test_files_written_atomically_get_the_umasks_mode(tmp_path):
    from ampgan.files.atomic import write_json_atomically

    previous = os.umask(0o022)
    try:
        write_json_atomically(tmp_path / "a.json", {"a": 1})
        os.umask(0o077)
        write_json_atomically(tmp_path / "b.json", {"b": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o600


def test_sigterm_before_the_first_batch_size_finishes_keeps_an_empty_incomplete_bench(tmp_path, capsys, monkeypatch):
    from ampgan.bench.measure import Contender

    real = Contender.timed_step

    def signalled(contender):
        os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to the handler the bench installed
        return real(contender)

    monkeypatch.setattr(Contender, "timed_step", signalled)
    out = tmp_path / "bench"
    code, stdout, err = run_cli(
        capsys,
        "bench",
        "--dataset",
        "synthetic",
        "--width",
        "8",
        "--set",
        "model.z_dim=16",
        "--device",
        "cpu",
        "--no-channels-last",
        "--precisions",
        "fp32",
        "--batch-sizes",
        "4,8",
        "--out",
        str(out),
    )
    assert code == 143 and "finished batch sizes none; not measured 4, 8" in err.replace("sizes ;", "sizes none;"), err
    results = json.loads((out / "results.json").read_text())
    assert results["configs"] == [] and results["incomplete"]["signal"] == "SIGTERM"
    assert (out / "fig1_time_per_batch.png").is_file()


def test_a_cached_speed_decision_with_a_missing_or_mistyped_field_is_measured_again(tmp_path):
    from ampgan.speed.cache import DecisionCache
    from ampgan.speed.decision import decide
    from ampgan.speed.rounds import StoppingRule, measure_rounds

    cache = DecisionCache(tmp_path)
    measured = []

    def measure(names):
        measured.append(names)
        timers = {"fp32": lambda: 0.2, **{n: (lambda: 0.1) for n in names}}
        return measure_rounds(timers, "fp32", StoppingRule(min_rounds=3, max_seconds=10)), {}

    key = {"machine": "cpu"}
    first = decide(["bf16"], 64, key, measure, cache)["bf16"]
    document = json.loads(cache.path.read_text())
    entry = next(iter(document["decisions"]))
    for damaged in ({"verdict": 3}, {"interval": {"estimate": "fast"}}, {"rounds": None}):
        document["decisions"][entry] = first.to_dict() | damaged
        cache.path.write_text(json.dumps(document))
        again = decide(["bf16"], 64, key, measure, cache)["bf16"]
        assert again.cached is False and again.verdict == "faster"
    assert len(measured) == 4
    cache.path.write_bytes(b"\xff\xfe not even text")
    assert decide(["bf16"], 64, key, measure, cache)["bf16"].verdict == "faster" and len(measured) == 5


@pytest.mark.parametrize("version", ["2", "10", "0"])
def test_a_cache_file_of_a_newer_ampgan_is_neither_read_nor_rewritten(tmp_path, version):
    """An older ampgan sharing the cache folder with a newer one (two venvs, one ~/.cache) must not replace the
    newer one's file by its own one-entry file; an older format's file (/0) is rebuilt, as a damaged one is."""
    from ampgan.errors import AmpganWarning
    from ampgan.speed.cache import DecisionCache
    from ampgan.speed.history import SpeedupHistory

    for cache, store in (
        (DecisionCache(tmp_path), lambda c: c.put("key", {"chosen": "fp32"})),
        (SpeedupHistory(tmp_path), lambda c: c.record("key", 1.5)),
    ):
        kind = cache.FORMAT.rpartition("/")[0]
        cache.path.write_text(json.dumps({"format": f"{kind}/{version}", cache.PART: {"key": {"theirs": [1]}}}))
        before = cache.path.read_bytes()
        if version == "0":
            store(cache)
            assert json.loads(cache.path.read_text())["format"] == cache.FORMAT
            continue
        with pytest.warns(AmpganWarning, match=f"written by a newer ampgan \\(format {kind}/{version};") as said:
            assert cache._read() == {}
            store(cache)
        assert "left as it is" in str(said[-1].message) and "AMPGAN_CACHE_DIR" in str(said[-1].message)
        assert cache.path.read_bytes() == before


def test_damaged_decision_json_line_in_the_middle_of_metrics_is_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "6", "--set", "logging.log_every=2", "--out", str(run))[0] == 0
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[1] = json.dumps(json.loads(lines[1]) | {"step": "two"})
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and "metrics.jsonl is damaged or foreign (step should be a whole number of at least 0" in err
    with pytest.raises(AmpganError, match="line 1 holds bytes that are not text"):
        from ampgan.files.jsonfile import read_jsonl

        (run / "broken.jsonl").write_bytes(b'\xff\xfe\n{"step": 1}\n')
        read_jsonl(run / "broken.jsonl")


TRAIN_TINY = ["train", "--dataset", "synthetic", "--image-size", "28", "--width", "8", "--batch-size", "8"]
TRAIN_TINY += ["--steps", "1", "--no-compile", "--no-channels-last", "--quiet"]


def test_a_folder_killed_before_it_held_anything_is_taken_by_the_same_command(tmp_path, capsys):
    """SIGKILL after the claim, before any file: the folder holds only ampgan's marker, lock and manifest. The
    same command took it for the user's files ('add --overwrite'), which --resume had just sent it to run."""
    from ampgan.runs.claim import FolderClaim, FolderLock

    def killed(path, kind):
        claim = FolderClaim(path, False, kind)
        (path / ".ampgan-written.jsonl").write_text("")
        claim.lock.release()  # the process died: its lock went with it, its files stayed
        return path

    code, _, err = run_cli(capsys, *TRAIN_TINY, "--out", str(killed(tmp_path / "run", "run")))
    assert code == 0 and (tmp_path / "run" / "config.json").is_file(), err
    code, _, err = run_cli(capsys, *TRAIN_TINY, "--out", str(killed(tmp_path / "study", "study")))
    assert code == 2 and "already holds files" in err  # another command's folder stays refused
    folder = killed(tmp_path / "mine", "run")
    (folder / "notes.txt").write_text("mine")
    code, _, err = run_cli(capsys, *TRAIN_TINY, "--out", str(folder))
    assert code == 2 and "already holds files" in err and (folder / "notes.txt").read_text() == "mine"
    live = FolderLock(killed(tmp_path / "live", "run"), mention_leftovers=False)  # a command still running there
    code, _, err = run_cli(capsys, *TRAIN_TINY, "--out", str(tmp_path / "live"))
    live.release()
    assert code == 2 and err.count("\n") == 1 and not (tmp_path / "live" / "config.json").exists(), err


def test_a_folder_shows_the_marker_only_once_its_writer_holds_the_lock(tmp_path, monkeypatch):
    """A second command given the same --out takes a folder of bookkeeping alone (test above) only when no
    live process holds its lock: so the first one locks before it marks. Marked first, a second command in
    that gap moved the live command's folder aside (the lock's state is read at the moment the marker lands)."""
    import fcntl

    import ampgan.runs.claim as claim

    held_when_marked = []
    write_marker = claim._write_marker

    def watched(path, kind):
        if not (path / claim.LOCK).exists():
            held_when_marked.append(False)
            return write_marker(path, kind)
        probe = os.open(path / claim.LOCK, os.O_RDWR)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held_when_marked.append(False)
        except BlockingIOError:
            held_when_marked.append(True)
        finally:
            os.close(probe)
        write_marker(path, kind)

    monkeypatch.setattr(claim, "_write_marker", watched)
    folder = claim.FolderClaim(tmp_path / "run", False, "run")
    folder.lock.release()
    assert held_when_marked == [True]
