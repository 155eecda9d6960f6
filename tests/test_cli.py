"""The `ampgan` command end to end, on the tiny synthetic dataset."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import run_cli, tiny_state
from fixtures import TINY_RUN

TINY = TINY_RUN


def test_train_writes_a_complete_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--steps",
        "6",
        "--set",
        "logging.log_every=2",
        "--set",
        "logging.sample_every=4",
        "--out",
        str(run),
    )
    assert code == 0, err
    assert "trained 6 steps" in out and "fp32 | batch 8 | model acgan | torch" in out
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["precision"]["name"] == "fp32" and config["config"]["budget"]["steps"] == 6
    assert config["dataset"]["class_names"][0] == "grating-0" and len(config["dataset"]["source"]["sha256"]) == 64
    assert config["environment"]["versions"]["torch"] == torch.__version__
    assert config["environment"]["hardware"]["cpu_cores"] >= 1
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [2, 4, 6]
    assert {"loss_d", "loss_g", "class_acc_real", "class_acc_fake", "skipped_d_total", "train_seconds"} <= set(
        records[0]
    )
    assert sorted(p.name for p in (run / "samples").iterdir()) == ["step-000004.png", "step-000006.png"]
    from PIL import Image

    grid = Image.open(run / "samples" / "step-000006.png")
    # 10 classes x 8 samples of 32 px, 2 px gutters; synthetic has 3 channels.
    assert grid.size == (8 * 34 + 2, 10 * 34 + 2) and grid.mode == "RGB"
    checkpoint = torch.load(run / "checkpoints" / "step-000006.pt", weights_only=True)
    assert checkpoint["step"] == 6 and "generator" in checkpoint and "scaler_d" in checkpoint and "rng" in checkpoint


def test_fp16_run_logs_the_loss_scale_and_skipped_steps(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--precision",
        "fp16",
        "--loss-scale",
        "128",
        "--steps",
        "2",
        "--set",
        "logging.log_every=1",
        "--out",
        str(run),
    )
    assert code == 0, err
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    # A static 128 neither grows nor shrinks; these tiny networks' gradients never overflow at it.
    assert record["loss_scale_d"] == record["loss_scale_g"] == 128.0
    assert record["skipped_d_total"] == record["skipped_g_total"] == 0
    # its config.json records "fp16 (loss scale static 128)": generate read it as no precision ("damaged or foreign")
    assert json.loads((run / "config.json").read_text())["precision"] == "fp16 (loss scale static 128)"
    code, out, err = run_cli(
        capsys, "generate", str(run), "--class", "1", "--n", "4", "--out", str(tmp_path / "four.png")
    )
    assert code == 0 and (tmp_path / "four.png").is_file(), err


def test_samples_use_the_same_noise_for_every_precision(tmp_path, capsys):
    """Step-0 grids would be pixel-identical; after one step they differ only by rounding."""
    from ampgan.runs.samples import fixed_noise

    gan = tiny_state(num_classes=10).gan
    z_a, labels_a = fixed_noise(gan, 10, 8, seed=5)
    z_b, labels_b = fixed_noise(gan, 10, 8, seed=5)
    assert torch.equal(z_a, z_b) and torch.equal(labels_a, labels_b)
    assert torch.equal(labels_a[:8], torch.zeros(8, dtype=torch.long))  # row 0 is class 0
    assert torch.equal(z_a[:8], z_a[8:16])  # column j shares its noise across classes


def test_dry_run_prints_the_resolved_config_and_writes_nothing(tmp_path, capsys):
    run = tmp_path / "run"
    code, out, _ = run_cli(capsys, "train", *TINY, "--precision", "bf16", "--dry-run", "--out", str(run))
    assert code == 0
    resolved = json.loads(out)
    assert resolved["config"]["precision"]["name"] == "bf16" and resolved["config"]["budget"]["steps"] == 1000
    assert resolved["dataset"]["image_shape"] == [3, 32, 32]
    assert not run.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--precision", "fp8"], "error: --precision 'fp8' is not one of 'fp32', 'tf32', 'bf16', 'fp16'"),
        (["--dataset", "digitz"], "error: unknown dataset 'digitz' (did you mean 'digits'?)"),
        (["--batch-size", "0"], "error: budget.batch_size (--batch-size) must be a whole number of at least 1, got 0"),
        (["--precision", "tf32"], "error: tf32 is a CUDA tensor-core mode"),
        (["--time-budget", "soon"], "error: --time-budget cannot read the duration 'soon'"),
        (["--batch-size", "many"], "error: --batch-size must be a whole number, got 'many'"),
        (["--no-such-flag"], "error: No such option '--no-such-flag'"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, args, message):
    code, out, err = run_cli(capsys, "train", *TINY, "--out", str(tmp_path / "run"), *args)
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args, hint",
    [(["data", "info", "--dataset", "x"], "ampgan data info --help"), (["train", "--bogus"], "ampgan train --help")],
)
def test_a_usage_error_points_to_the_help_of_the_command_as_typed(capsys, args, hint):
    """`ampgan data info --dataset x` pointed to 'ampgan info --help', a command that does not exist."""
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and err.rstrip().endswith(f"(see '{hint}')") and err.count("\n") == 1, err


def test_an_existing_run_folder_is_never_touched_without_overwrite(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "precious.txt").write_text("keep me")
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(run))
    assert code == 2 and "add --overwrite" in err
    assert [p.name for p in run.iterdir()] == ["precious.txt"]
    # A bad flag together with --overwrite must not destroy the old run either.
    code, _, _ = run_cli(capsys, "train", *TINY, "--precision", "fp8", "--overwrite", "--out", str(run))
    assert code == 2 and (run / "precious.txt").exists()
    # --overwrite replaces ampgan's own folders only: this one holds the user's file.
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "1", "--overwrite", "--out", str(run))
    assert code == 2 and "no ampgan marker" in err and (run / "precious.txt").exists()
    assert run_cli(capsys, "train", *TINY, "--steps", "1", "--out", str(tmp_path / "mine"))[0] == 0
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "2", "--overwrite", "--out", str(tmp_path / "mine"))
    assert code == 0, err
    assert json.loads((tmp_path / "mine" / "config.json").read_text())["config"]["budget"]["steps"] == 2


def test_a_tilde_the_shell_left_alone_is_the_home_folder(tmp_path, capsys, monkeypatch):
    """`--out=~/run` is one word, which the shell does not expand: ampgan does, for every path it is given
    (written to, resumed, read), instead of making a folder named '~' in the current one."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert run_cli(capsys, "train", *TINY, "--steps", "1", "--out=~/run")[0] == 0
    assert run_cli(capsys, "train", "--resume", "~/run", "--steps", "2", "--quiet")[0] == 0
    code, _, err = run_cli(capsys, "data", "grid", "synthetic", "--per-class", "1", "--out", "~/grid.png")
    assert code == 0, err
    assert (tmp_path / "home" / "run" / "checkpoints" / "step-000002.pt").exists()
    assert (tmp_path / "home" / "grid.png").exists() and list((tmp_path / "elsewhere").iterdir()) == []


def test_relative_paths_a_run_was_given_lead_to_the_same_files_from_another_folder(tmp_path, capsys, monkeypatch):
    """--dataset folder:PATH, --data-dir and --model FILE.py:F given relative to the current folder are recorded
    as the files they named, so a resume from another folder reads the same images and imports the same model
    (recorded as given, they led to that folder's files or to none: 'image folder images does not exist')."""
    from fixtures import write_image_folder, write_mnist

    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    write_image_folder(project / "images", size=28)
    write_mnist(project / "mnist")
    (project / "gans").mkdir()
    (project / "gans" / "mine.py").write_text(
        "from ampgan.gan.models.acgan import acgan\n\n\ndef build(data, width=8, z_dim=16):\n"
        "    return acgan(data, width=width, z_dim=z_dim)\n"
    )
    elsewhere.mkdir()
    given = {
        "folder": ["--dataset", "folder:images", "--model", "gans/../gans/mine.py:build"],
        "mnist": ["--dataset", "mnist", "--data-dir", "./mnist"],
        "set": ["--set", "data.dataset=folder:~/images", "--image-size", "28"],
    }
    monkeypatch.setenv("HOME", str(project))
    for name, flags in given.items():
        monkeypatch.chdir(project)
        code, _, err = run_cli(capsys, "train", *TINY, *flags, "--steps", "1", "--out", f"run-{name}")
        assert code == 0, err
        monkeypatch.chdir(elsewhere)
        code, _, err = run_cli(capsys, "train", "--resume", f"../project/run-{name}", "--steps", "2", "--trust-model")
        assert code == 0 and (project / f"run-{name}" / "checkpoints" / "step-000002.pt").is_file(), err
        # the run's own flags given again, as typed, from where they were typed: the same files, not a change
        monkeypatch.chdir(project)
        code, _, err = run_cli(capsys, "train", *TINY, *flags, "--resume", f"run-{name}", "--steps", "3")
        assert code == 0 and (project / f"run-{name}" / "checkpoints" / "step-000003.pt").is_file(), err
    recorded = {name: json.loads((project / f"run-{name}" / "config.json").read_text())["config"] for name in given}
    assert recorded["folder"]["data"]["dataset"] == f"folder:{project / 'images'}"
    assert recorded["folder"]["model"]["name"] == f"{project / 'gans' / 'mine.py'}:build"
    assert recorded["mnist"]["data"]["data_dir"] == str(project / "mnist")
    assert recorded["set"]["data"]["dataset"] == f"folder:{project / 'images'}"
    assert list(elsewhere.iterdir()) == []


def test_misaligned_width_warns_in_one_line(tmp_path, capsys):
    code, _, err = run_cli(capsys, "train", *TINY, "--width", "12", "--dry-run")
    assert code == 0
    assert "warning: dimensions that are not multiples of 8" in err and "D.features.0 out_channels=12 (try 16)" in err


def test_tensorboard_writes_event_files(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        *TINY,
        "--steps",
        "2",
        "--set",
        "logging.log_every=1",
        "--set",
        "logging.tensorboard=true",
        "--out",
        str(run),
    )
    assert code == 0, err
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


@pytest.mark.slow
def test_console_script_and_module_entry_points_work(tmp_path):
    """The real process: exit code and a one-line error, no traceback."""
    result = subprocess.run(
        [sys.executable, "-m", "ampgan", "train", "--precision", "fp8"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: --precision 'fp8' is not one of") and "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, "-m", "ampgan", "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "train" in result.stdout
