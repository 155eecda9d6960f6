"""Runs that survive: bit-exact resume, kill -9, SIGTERM, numeric faults, damaged files."""

import functools
import json
import random
import shlex
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import run_cli
from fixtures import TINY_RUN

from ampgan.config import config_from_options
from ampgan.errors import AmpganError
from ampgan.files.manifest import MANIFEST, record
from ampgan.runs.checkpoint import FORMAT_VERSION, latest_checkpoint, list_checkpoints, load_checkpoint
from ampgan.training.faults import FaultRules, NumericFault
from ampgan.training.loop import prepare_run, run_training

TINY = [*TINY_RUN, "--set", "logging.log_every=2", "--set", "logging.sample_every=1000"]


def weights(run_dir, step):
    payload = torch.load(run_dir / "checkpoints" / f"step-{step:06d}.pt", weights_only=True)
    return payload["generator"] | {f"D.{k}": v for k, v in payload["discriminator"].items()}


def metric_lines(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_is_bit_exact(tmp_path, capsys, precision):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    args = [*TINY, "--precision", precision, "--checkpoint-every", "4"]
    assert run_cli(capsys, "train", *args, "--steps", "12", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "6", "--out", str(halves))[0] == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(halves), "--steps", "12", "--quiet")
    assert code == 0, err
    a, b = weights(straight, 12), weights(halves, 12)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    drop_time = lambda r: {k: v for k, v in r.items() if k not in ("train_seconds", "images_per_second")}  # noqa: E731
    assert [drop_time(r) for r in metric_lines(straight)] == [drop_time(r) for r in metric_lines(halves)]
    assert [r["step"] for r in metric_lines(halves)] == [2, 4, 6, 8, 10, 12]  # none missing, none twice
    config = json.loads((halves / "config.json").read_text())
    assert config["config"]["budget"]["steps"] == 12 and config["resumed"][0]["at_step"] == 6


def test_a_resume_on_another_thread_count_continues_on_the_checkpoint_s_and_stays_bit_exact(
    tmp_path, capsys, monkeypatch
):
    """ampgan fits a CPU run's threads to the load (speed/threads.py), and a float sum's order, so its last bits,
    follows the thread count: a resume that started on whatever count its process got drifted from the
    uninterrupted run. It runs on the count the checkpoint's steps ran on; a count the user fixed is kept, said."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    args = [*TINY, "--precision", "fp32", "--checkpoint-every", "4", "--no-compile", "--no-channels-last"]
    torch.set_num_threads(1)
    assert run_cli(capsys, "train", *args, "--steps", "8", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "4", "--out", str(halves))[0] == 0
    torch.set_num_threads(2)  # the resuming process starts on both cores
    code, _, err = run_cli(capsys, "train", "--resume", str(halves), "--steps", "8", "--quiet")
    assert code == 0, err
    a, b = weights(straight, 8), weights(halves, 8)
    assert all(torch.equal(a[k], b[k]) for k in a) and "thread" not in err
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's count: obeyed, and the drift said
    torch.set_num_threads(2)
    code, _, err = run_cli(capsys, "train", "--resume", str(straight), "--steps", "12", "--quiet")
    assert code == 0 and torch.get_num_threads() == 2, err
    assert "the thread count (the checkpoint's steps ran on 1, OMP_NUM_THREADS fixes 2" in err


def test_a_resumed_thread_count_is_capped_kept_for_another_world_and_not_the_watch_s_ceiling(
    tmp_path, capsys, monkeypatch
):
    """The checkpoint's count is taken back, but: the thread watch still goes back up to the count this run was
    planned on (a checkpoint written while the watch had dropped to 1 thread must not pin the run to 1); a count
    above the machine's cores is capped, said; another number of processes keeps its share; under torchrun the
    message blames torchrun, not the OMP_NUM_THREADS it exports."""
    import ampgan.training.loop as loop
    from ampgan.system.cpu_tuning import ThreadWatch, cores

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    watches = []
    monkeypatch.setattr(loop, "ThreadWatch", lambda **kw: watches.append(ThreadWatch(**kw)) or watches[-1])
    run = tmp_path / "run"
    torch.set_num_threads(1)  # the watch had dropped to 1 when the checkpoint was written
    assert run_cli(capsys, "train", *TINY, "--no-compile", "--steps", "2", "--out", str(run))[0] == 0
    torch.set_num_threads(2)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4", "--quiet")
    assert code == 0 and torch.get_num_threads() == 1 and watches[-1].full == min(2, cores()), err

    latest = latest_checkpoint(run)
    payload = torch.load(latest, weights_only=True)
    torch.save(payload | {"progress": payload["progress"] | {"threads": cores() + 14}}, latest)
    record(latest)
    torch.set_num_threads(1)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "6", "--quiet")
    assert code == 0 and torch.get_num_threads() == cores(), err
    assert f"the thread count (the checkpoint's steps ran on {cores() + 14}, this machine has {cores()} cores" in err

    latest = latest_checkpoint(run)
    payload = torch.load(latest, weights_only=True)
    data = payload["progress"]["data"]
    two_ranks = {"world_size": 2, "ranks": data["ranks"] * 2}
    torch.save(payload | {"progress": payload["progress"] | {"threads": 1, "data": two_ranks}}, latest)
    record(latest)
    torch.set_num_threads(2)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8", "--quiet")
    assert code == 0 and torch.get_num_threads() == 2 and "another number of processes" in err, err
    assert "thread count" not in err

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as torchrun exports it
    monkeypatch.setattr(loop, "world", lambda: type("W", (), {"distributed": True})())
    said = loop.restore_threads(1, torch.device("cpu"))
    assert said == ["the thread count (the checkpoint's steps ran on 1, torchrun's share of the cores fixes 2)"]


def test_a_version_1_run_resumes_on_the_seed_scheme_it_started_with(tmp_path, capsys, monkeypatch):
    """Checkpoints of ampgan 0.1 (format 1, no seed scheme) continue drawing the data order they
    would have drawn: 6 steps + resume to 12 equals 12 straight, both on scheme 1, across epochs."""
    import ampgan.training.loop as loop

    args = [
        *TINY[:8],
        "--batch-size",
        "512",
        "--quiet",
        "--set",
        "logging.log_every=2",
        "--checkpoint-every",
        "6",
    ]  # 4 steps an epoch
    straight, old = tmp_path / "straight", tmp_path / "old"
    monkeypatch.setattr(loop, "CURRENT_SCHEME", 1)
    assert run_cli(capsys, "train", *args, "--steps", "12", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "6", "--out", str(old))[0] == 0
    monkeypatch.undo()
    path = latest_checkpoint(old)
    payload = torch.load(path, weights_only=True)
    assert payload["seed_scheme"] == 1
    payload = {k: v for k, v in payload.items() if k not in ("seed_scheme", "step_generator")} | {"format_version": 1}
    torch.save(payload, path)  # as ampgan 0.1 wrote it ...
    (old / MANIFEST).unlink()  # ... which kept no manifest: the checkpoint is held to its zip CRC
    code, _, err = run_cli(capsys, "train", "--resume", str(old), "--steps", "12", "--quiet")
    assert code == 0, err
    a, b = weights(straight, 12), weights(old, 12)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert load_checkpoint(latest_checkpoint(old))["seed_scheme"] == 1  # it stays on its scheme


def test_keep_limits_the_checkpoints_and_a_time_budget_continues(tmp_path, capsys):
    run = tmp_path / "run"
    assert (
        run_cli(
            capsys,
            "train",
            *TINY,
            "--steps",
            "10",
            "--checkpoint-every",
            "2",
            "--set",
            "checkpoints.keep=2",
            "--out",
            str(run),
        )[0]
        == 0
    )
    assert [p.name for p in list_checkpoints(run)] == ["step-000008.pt", "step-000010.pt"]
    payload = load_checkpoint(latest_checkpoint(run))
    assert payload["progress"]["train_seconds"] > 0 and payload["progress"]["data"]["ranks"][0]["position"] > 0
    spent = payload["progress"]["train_seconds"]
    budget = f"{spent + 0.3:.3f}"  # the budget as given on the command line (rounded to ms)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--time-budget", f"{budget}s", "--quiet")
    assert code == 0, err
    last = metric_lines(run)[-1]
    # The run stops at the first step at or past the budget; metrics round seconds to 0.1 ms.
    assert last["step"] > 10 and float(budget) <= last["train_seconds"] + 1e-4


def test_resume_refuses_changes_that_alter_the_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "4", "--out", str(run))[0] == 0
    before = (run / "metrics.jsonl").read_text()
    for args, message in [
        (["--batch-size", "16"], "--batch-size 16 differs from the run's 8"),
        (["--precision", "bf16"], "--precision bf16 differs from the run's fp32"),
        (["--steps", "4"], "already reached step 4 of --steps 4"),
        (["--out", str(tmp_path / "other")], "drop --out"),
        # a path no run has: refused as a new run refuses it (it was an AttributeError traceback on resume)
        (["--set", "checkpoint.every=2"], "checkpoint.every names no config section (did you mean checkpoints?)"),
        (["--set", "checkpoints.nope=2"], "checkpoints.nope is not a field of checkpoints"),
    ]:
        code, _, err = run_cli(capsys, "train", "--resume", str(run), *args)
        assert code == 2 and message in err, err
    assert (run / "metrics.jsonl").read_text() == before


def test_resume_names_the_change_given_not_a_setting_the_run_holds(tmp_path, capsys):
    """An fp16 run with a static loss scale resumed with --precision bf16 was told 'precision.loss_scale
    (--loss-scale) applies to fp16 only, not bf16: drop it', a flag the user never gave (the whole changed config
    was checked before the comparison): it is the change given that is refused."""
    run = tmp_path / "run"
    args = ["--precision", "fp16", "--set", "precision.loss_scale=128", "--steps", "1", "--out", str(run)]
    assert run_cli(capsys, "train", *TINY, *args)[0] == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--precision", "bf16")
    assert code == 2 and "--precision bf16 differs from the run's fp16" in err, err


def _start_run(run_dir, steps=400, extra=(), **popen):
    command = [
        sys.executable,
        "-m",
        "ampgan",
        "train",
        *TINY,
        "--steps",
        str(steps),
        "--checkpoint-every",
        "3",
        "--no-channels-last",
        "--no-compile",
        "--out",
        str(run_dir),
        *extra,
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _wait_for_first_checkpoint(run_dir, process, timeout=60):
    deadline = time.monotonic() + timeout
    while not list_checkpoints(run_dir):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_kill_9_at_random_moments_always_leaves_a_resumable_run(tmp_path, capsys):
    moments = random.Random(7)
    for trial in range(3):
        run = tmp_path / f"trial{trial}"
        process = _start_run(run)
        _wait_for_first_checkpoint(run, process)
        time.sleep(moments.uniform(0.0, 1.0))
        process.kill()  # SIGKILL: no handler, no cleanup
        process.wait(timeout=30)
        payload = load_checkpoint(latest_checkpoint(run))  # loads: never half-written
        assert payload["step"] >= 0
        target = payload["step"] + 6
        code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", str(target), "--quiet")
        assert code == 0, err
        steps = [r["step"] for r in metric_lines(run)]
        assert steps == sorted(set(steps)) and steps[-1] == target


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1])
def test_sigterm_or_a_closed_terminal_saves_a_checkpoint_and_exits_128_plus_its_number(tmp_path, stop):
    """SIGQUIT (Ctrl-\\) dumped core and SIGUSR1 (a batch scheduler's warning before its time limit) ended the run at
    once: every step since the last checkpoint was lost."""
    run = tmp_path / "run"
    process = _start_run(run)
    _wait_for_first_checkpoint(run, process)
    time.sleep(0.3)
    process.send_signal(stop)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 128 + stop
    assert f"{stop.name} received: stopped after step" in err and f"ampgan train --resume {run}" in err
    stopped_at = int(err.split("stopped after step ")[1].split()[0])
    assert load_checkpoint(latest_checkpoint(run))["step"] == stopped_at
    assert metric_lines(run)[-1]["step"] == stopped_at


USER_GAN = """
import ampgan
from torch import nn

def tiny(data, *, width=8, z_dim=16):
    shape = (data.channels, data.image_size, data.image_size)
    G = nn.Sequential(nn.Linear(z_dim, width), nn.ReLU(), nn.Linear(width, shape[0] * shape[1] * shape[2]), nn.Tanh(),
                      nn.Unflatten(1, shape))
    D = nn.Sequential(nn.Flatten(), nn.Linear(shape[0] * shape[1] * shape[2], 1))
    d_loss = (lambda ctx: ampgan.real_fake_loss(D(ctx.real), 1.0), lambda ctx: ampgan.real_fake_loss(D(ctx.fake), 0.0))
    return ampgan.GAN(generator=G, discriminator=D, z_dim=z_dim, d_loss=d_loss,
                      g_loss=lambda ctx: ampgan.real_fake_loss(D(ctx.fake), 1.0))
"""


@pytest.mark.slow
def test_a_user_gan_stopped_by_a_signal_is_told_a_resume_command_that_works(tmp_path, capsys):
    """The hint was 'ampgan train --resume RUN', which for a model from the user's file stops at once: a resume
    imports a file only when the person running it names the model (--model)."""
    model, run = tmp_path / "mine.py", tmp_path / "run"
    model.write_text(USER_GAN)
    process = _start_run(run, extra=("--model", f"{model}:tiny"))
    _wait_for_first_checkpoint(run, process)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    command = shlex.split(err.split("continue with: ")[1].splitlines()[0])
    assert command == ["ampgan", "train", "--resume", str(run), "--model", f"{model}:tiny"]
    target = load_checkpoint(latest_checkpoint(run))["step"] + 2
    code, _, err = run_cli(capsys, *command[1:], "--steps", str(target), "--quiet")
    assert code == 0, err
    assert metric_lines(run)[-1]["step"] == target


@pytest.mark.slow
@pytest.mark.parametrize("ignored", [signal.SIGHUP, signal.SIGINT], ids=["nohup", "a-script-s-background-job"])
def test_a_run_started_ignoring_a_signal_trains_on_through_it(tmp_path, ignored):
    """nohup ignores SIGHUP (the terminal closing), a shell script starts its background jobs ignoring SIGINT:
    ampgan leaves them ignored, at start and while it trains."""
    run = tmp_path / "run"
    process = _start_run(run, steps=12, preexec_fn=functools.partial(signal.signal, ignored, signal.SIG_IGN))
    time.sleep(0.5)
    process.send_signal(ignored)  # while it starts (before any stage listens)
    _wait_for_first_checkpoint(run, process)
    process.send_signal(ignored)  # while it trains
    _, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert load_checkpoint(latest_checkpoint(run))["step"] == 12


def _poisoning(monkeypatch, from_step, value, target="grad"):
    """From `from_step` on, D's real/fake head gets inf/NaN gradients (or weights)."""
    import ampgan.training.loop as train_module

    real_step = train_module.train_step

    def poisoned_step(state, next_batch):
        if state.step + 1 >= from_step:
            head = state.discriminator.real_fake_head.weight
            if target == "grad" and not getattr(head, "_poisoned", False):
                head.register_hook(lambda grad: torch.full_like(grad, value))
                head._poisoned = True
            elif target == "weight":
                with torch.no_grad():
                    head.fill_(value)
        return real_step(state, next_batch)

    monkeypatch.setattr(train_module, "train_step", poisoned_step)


def _tiny_config(**overrides):
    values = dict(
        dataset="synthetic",
        width=8,
        z_dim=16,
        batch_size=8,
        device="cpu",
        log_every=2,
        sample_every=1000,
        checkpoint_every=4,
        keep=10,
    )
    return config_from_options(**(values | overrides))


def test_fp16_overflow_is_skipped_counted_and_a_collapsed_scale_stops_the_run(tmp_path, monkeypatch):
    _poisoning(monkeypatch, from_step=9, value=float("inf"))
    run = tmp_path / "run"
    with pytest.raises(NumericFault, match=r"fp16 loss scale collapsed .* the last good checkpoint is step \d+"):
        run_training(
            prepare_run(_tiny_config(precision="fp16", steps=200)),
            run,
            show_progress=False,
            fault_rules=FaultRules(min_loss_scale=1.0, window_steps=1000),
        )
    records = metric_lines(run)
    assert records[-1]["skipped_d_total"] >= 10 and records[-1]["loss_scale_d"] < 1.0
    assert records[-1]["skipped_g_total"] < records[-1]["skipped_d_total"]
    # Every D update from step 9 on was skipped, so every checkpoint since holds step 8's D weights:
    # intact, and loadable. (Batch-norm statistics and spectral norm's vectors move on every forward pass.)
    at_8 = torch.load(run / "checkpoints" / "step-000008.pt", weights_only=True)["discriminator"]
    latest = load_checkpoint(latest_checkpoint(run))
    assert latest["step"] > 8
    weights = [k for k in at_8 if not any(part in k for part in ("running", "num_batches", "spectral"))]
    assert all(torch.equal(at_8[k], latest["discriminator"][k]) for k in weights)


def test_fp16_skip_fraction_rule(tmp_path, monkeypatch):
    _poisoning(monkeypatch, from_step=5, value=float("nan"))
    with pytest.raises(NumericFault, match=r"of the last \d+ fp16 optimizer updates were skipped"):
        run_training(
            prepare_run(_tiny_config(precision="fp16", steps=200)),
            tmp_path / "run",
            show_progress=False,
            fault_rules=FaultRules(min_loss_scale=0.0, window_steps=10, max_skipped_fraction=0.4),
        )


def test_fp32_nan_stops_the_run_and_keeps_the_checkpoint_before_it(tmp_path, monkeypatch, capsys):
    _poisoning(monkeypatch, from_step=7, value=float("nan"), target="weight")
    run = tmp_path / "run"
    with pytest.raises(
        NumericFault, match=r"loss_d and loss_g became non-finite .* by step 8.* last good checkpoint is step 4"
    ):
        run_training(prepare_run(_tiny_config(steps=100)), run, show_progress=False)
    payload = load_checkpoint(latest_checkpoint(run))
    assert payload["step"] == 4 and all(
        torch.isfinite(v).all() for v in payload["discriminator"].values() if v.is_floating_point()
    )


def test_damaged_and_foreign_checkpoints_give_one_clear_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "4", "--checkpoint-every", "2", "--out", str(run))[0] == 0
    latest = latest_checkpoint(run)
    data = latest.read_bytes()

    latest.write_bytes(data[: len(data) // 2])  # truncated
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and err.startswith(f"error: checkpoint {latest} is damaged") and err.count("\n") == 1
    record(latest)  # even were it recorded as ampgan's (a disk that lost its end), it cannot be read
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and err.startswith(f"error: cannot read checkpoint {latest}") and err.count("\n") == 1

    # The checks after the digest: each file below recorded as if ampgan had written it.
    payload = torch.load(__import__("io").BytesIO(data), weights_only=True)
    torch.save(payload | {"format_version": FORMAT_VERSION + 1}, latest)
    record(latest)
    with pytest.raises(AmpganError, match="newer than this ampgan reads"):
        load_checkpoint(latest)

    other = tmp_path / "wide"
    assert run_cli(capsys, "train", *TINY, "--width", "16", "--steps", "2", "--out", str(other))[0] == 0
    foreign = load_checkpoint(latest_checkpoint(other))
    torch.save(foreign, latest)  # a wider model's checkpoint under this run's name
    record(latest)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and f"{latest} was saved by another run" in err and err.count("\n") == 1
    own_id = json.loads((run / "config.json").read_text())["run_id"]
    torch.save(foreign | {"run_id": own_id}, latest)  # ... even disguised as this run's: its config says width 16
    record(latest)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and "was trained with model.width = 16, but" in err and "says 8" in err and err.count("\n") == 1

    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps(config | {"format_version": 99}))
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8")
    assert code == 2 and "written by a newer ampgan" in err

    code, _, err = run_cli(capsys, "train", "--resume", str(tmp_path / "nothing"), "--steps", "8")
    assert code == 2 and "not an ampgan run folder" in err


@pytest.mark.parametrize(
    "field, value",
    [("train_seconds", -100.0), ("wall_seconds", "x"), ("metrics_last_step", -1), ("skipped_total", {"d": -3})],
)
def test_a_checkpoint_s_progress_the_loop_adds_to_is_checked_before_it_is_trusted(tmp_path, capsys, field, value):
    """A negative time read 'trained 4 steps in -95.5 s (-0 img/s)'; a text one was a TypeError traceback."""
    run = tmp_path / "run"
    assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    latest = latest_checkpoint(run)
    payload = torch.load(latest, weights_only=True)
    torch.save(payload | {"progress": payload["progress"] | {field: value}}, latest)
    record(latest)  # as if ampgan had written it: the shape is what is checked
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4")
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"error: checkpoint {latest} is damaged or foreign (progress.{field}") and "at least 0" in err
    assert latest_checkpoint(run) == latest  # nothing trained, nothing written


@pytest.mark.parametrize(
    ("saved_as", "this_run"),
    [
        ({"fused": True, "foreach": False, "capturable": True}, {"foreach": True}),  # a GPU's checkpoint, a CPU run
        ({"foreach": True, "fused": None}, {"fused": True}),  # a CPU's checkpoint, a run stepping fused Adam
        ({"foreach": False, "fused": False, "differentiable": True}, {"foreach": True}),
    ],
    ids=["fused-checkpoint-on-cpu", "foreach-checkpoint-fused-run", "differentiable-checkpoint"],
)
def test_how_an_optimizer_executes_comes_from_this_run_never_from_the_checkpoint(monkeypatch, saved_as, this_run):
    """Resuming on another device kind: the checkpoint's optimizers (G's, D's and a model's own) bring their
    moments, step counts and hyperparameters; foreach, fused, capturable and differentiable are this run's
    (training/state.py adam_implementation, injected here as another device's answer)."""
    from conftest import step_on, tiny_batch, tiny_state

    import ampgan.training.state as state_module
    from ampgan.gan.contract import Adam
    from ampgan.training.step import train_step

    execution = ("foreach", "fused", "capturable", "differentiable")

    def state():
        made = tiny_state()
        made.extra_optimizers["own"] = state_module.make_adam(made.discriminator.named_parameters(), Adam())
        return made

    saving = state()
    train_step(saving, step_on(tiny_batch()))  # moments and step counts to carry over
    saved = saving.state_dict()
    for optimizer in [saved["optimizer_g"], saved["optimizer_d"], *saved["extra_optimizers"].values()]:
        for group in optimizer["param_groups"]:
            group.update(saved_as, lr=0.0123)  # as another device's run wrote them, with a changed lr
    monkeypatch.setattr(state_module, "adam_implementation", lambda device_type: this_run)
    resumed = state()
    made = {k: resumed.optimizer_g.param_groups[0][k] for k in execution}
    assert all(made[k] == v for k, v in this_run.items()) and not made["differentiable"]
    resumed.load_state_dict(saved)
    for optimizer in (resumed.optimizer_g, resumed.optimizer_d, *resumed.extra_optimizers.values()):
        for group in optimizer.param_groups:
            assert {k: group[k] for k in execution} == made
            assert group["lr"] == 0.0123  # what the optimizer computes still comes from the checkpoint
    first = resumed.optimizer_d.param_groups[0]["params"][0]
    assert float(resumed.optimizer_d.state[first]["step"]) == 1.0
    metrics = train_step(resumed, step_on(tiny_batch()))  # the next step runs with this run's optimizer
    assert torch.isfinite(metrics["loss_d"]) and float(resumed.optimizer_d.state[first]["step"]) == 2.0


def test_a_run_resumes_only_on_the_data_it_was_trained_on(tmp_path, capsys):
    """Images added, removed or edited, or a class added, in the dataset folder since the run started: resuming
    is refused in one line before any training (not trained on other data, nor a 'damaged checkpoint' for a
    class count that changed); files touched but unchanged, or put back, resume."""
    import shutil

    from fixtures import write_image_folder
    from PIL import Image

    data = write_image_folder(tmp_path / "data", size=16)
    run = tmp_path / "run"
    options = [*TINY[2:], "--dataset", f"folder:{data}", "--steps", "2", "--checkpoint-every", "1", "--out", str(run)]
    assert run_cli(capsys, "train", *options)[0] == 0
    kept = sorted(p.name for p in (run / "checkpoints").iterdir())

    def added(folder):
        Image.new("RGB", (16, 16), (9, 9, 9)).save(folder / "cats" / "new.png")

    def edited(folder):
        Image.new("RGB", (16, 16), (250, 0, 0)).save(folder / "dogs" / "img0.png")

    def new_class(folder):
        shutil.copytree(folder / "dogs", folder / "foxes")

    for change in (added, edited, new_class, lambda folder: (folder / "cats" / "img1.jpg").unlink()):
        shutil.copytree(data, tmp_path / "original")
        change(data)
        code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "3", "--quiet")
        assert code == 2 and err.count("\n") == 1 and "holds other data than" in err and "damaged" not in err, err
        assert sorted(p.name for p in (run / "checkpoints").iterdir()) == kept
        shutil.rmtree(data)
        (tmp_path / "original").rename(data)
    for image in data.rglob("*.*"):
        image.touch()
    assert run_cli(capsys, "train", "--resume", str(run), "--steps", "3", "--quiet")[0] == 0
    # The check a study's race makes too (study/race.py), on the data it loaded once; a config.json of an older
    # ampgan that records no content digest is not refused for it.
    from ampgan.data import load_dataset
    from ampgan.training.start import check_checkpoint_belongs, resumed_config

    config, checkpoint = resumed_config(run, {}), latest_checkpoint(run)
    other = load_dataset(config.data)
    other.source["sha256"] = "0" * 64
    with pytest.raises(AmpganError, match="holds other data than"):
        check_checkpoint_belongs(load_checkpoint(checkpoint), checkpoint, run, config, lambda: other)
    document = json.loads((run / "config.json").read_text())
    del document["dataset"]["source"]["sha256"]
    (run / "config.json").write_text(json.dumps(document))
    assert check_checkpoint_belongs(load_checkpoint(checkpoint), checkpoint, run, config, lambda: other) is other


def test_every_loss_scale_a_run_logs_is_watched_for_collapse():
    """acgan-2019's classifier update has its own scaler, logged as loss_scale_classifier: the collapse rule
    read D's and G's only, so a classifier scale under the limit went unreported."""
    from ampgan.training.faults import FaultMonitor, FaultRules

    monitor = FaultMonitor(uses_loss_scaling=True, rules=FaultRules(min_loss_scale=1.0))
    record = {"step": 5, "loss_scale_d": 1024.0, "loss_scale_g": 2048.0, "skipped_d_total": 0, "skipped_g_total": 0}
    assert monitor.check(record, 5, 0) is None
    found = monitor.check(record | {"loss_scale_classifier": 0.25}, 5, 0)
    assert found is not None and "collapsed (loss_scale_classifier = 0.25 < 1)" in found


def test_a_run_stopped_at_its_last_step_is_resumed_to_write_its_final_files(tmp_path, capsys, monkeypatch):
    """A Ctrl-C during the last step saves its checkpoint and names --resume, but the run's final files
    (generator.safetensors, the last samples) come after it; a full disk there is the same. The resume the
    line names writes them (it was refused: 'already reached step 4'), and only then is the run finished."""
    import os

    from safetensors import safe_open

    import ampgan.training.loop as train_module

    real_step = train_module.train_step

    def last_step_interrupted(state, next_batch):
        metrics = real_step(state, next_batch)
        if state.step == 4:
            os.kill(os.getpid(), signal.SIGINT)  # a real signal, to the handler the loop installed
        return metrics

    run = tmp_path / "run"
    monkeypatch.setattr(train_module, "train_step", last_step_interrupted)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "4", "--out", str(run))
    assert code == 130 and f"ampgan train --resume {run}" in err
    assert not (run / "generator.safetensors").exists()
    monkeypatch.setattr(train_module, "train_step", real_step)
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--quiet")
    assert code == 0, err
    with safe_open(run / "generator.safetensors", "pt") as exported:
        assert exported.metadata()["step"] == "4"
    assert [p.name for p in list_checkpoints(run)][-1] == "step-000004.pt"
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--quiet")
    assert code == 2 and "already reached step 4 of --steps 4" in err


@pytest.mark.parametrize("kind", ["folder", "mnist"])
def test_a_run_whose_data_moved_is_resumed_evaluated_and_generated_from_its_new_place(tmp_path, capsys, kind):
    """The dataset moved (the same files elsewhere): train --resume, evaluate, generate, doctor --run read it from
    the place given (--dataset folder:PATH, --data-dir DIR) once it holds the run's data (its SHA-256); gone, they
    say in one line which flag gives its new place; other data there is refused in one line, nothing written.
    (They refused the run: its data 'does not exist', and the flag that would name its new place 'differs from
    the run's'.)"""
    import shutil

    from fixtures import ORIGINALS_TINY, write_image_folder, write_mnist
    from PIL import Image

    data, run = tmp_path / "data", tmp_path / "run"
    resume, evaluate = (
        ["train", "--resume", str(run), "--steps", "3"],
        ["evaluate", str(run), "--samples", "20"],
    )
    if kind == "folder":
        write_image_folder(data, per_class=12, size=16)
        doctor = ["doctor", "--run", str(run), "--out", str(tmp_path / "doctor"), "--fp16-steps", "0"]
        where, flag, commands = ["--dataset", f"folder:{data}"], "--dataset", (resume, evaluate, doctor)
    else:  # (its evaluator, on the fixture's noise, is evaluate's own affair: resumed only)
        write_mnist(data)
        where, flag, commands = ["--dataset", "mnist", "--data-dir", str(data)], "--data-dir", (resume,)
    options = [*ORIGINALS_TINY[2:], *where, "--steps", "2", "--checkpoint-every", "1", "--out", str(run)]
    assert run_cli(capsys, "train", *options)[0] == 0
    moved, other = tmp_path / "moved", tmp_path / "other"
    data.rename(moved)
    shutil.copytree(moved, other)
    if kind == "folder":
        Image.new("RGB", (16, 16), (250, 0, 0)).save(other / "dogs" / "img0.png")
    else:
        write_mnist(other, seed=1)
    place = (lambda folder: [flag, f"folder:{folder}"]) if kind == "folder" else (lambda folder: [flag, str(folder)])
    for command in commands:
        code, _, err = run_cli(capsys, *command)
        assert code == 2 and err.count("\n") == 1 and f"{data}, which is gone: give {flag} " in err, err
        code, _, err = run_cli(capsys, *command, *place(other))
        assert code == 2 and err.count("\n") == 1 and "holds other data than" in err, err
    assert not (run / "quality.json").exists() and latest_checkpoint(run).name == "step-000002.pt"
    assert not (tmp_path / "doctor").exists()
    if kind == "folder":
        assert run_cli(capsys, *evaluate, *place(moved))[0] == 0
        assert json.loads((run / "quality.json").read_text())["final"]["step"] == 2
    code, _, err = run_cli(capsys, *resume, "--quiet", *place(moved))
    assert code == 0 and latest_checkpoint(run).name == "step-000003.pt", err
    recorded = json.loads((run / "config.json").read_text())["config"]["data"]
    assert str(moved) in (recorded["dataset"].removeprefix("folder:"), recorded["data_dir"])
    # the run reads its data where it now is from there on, with no flag
    code, _, err = run_cli(capsys, "generate", str(run), "--class", "0", "--n", "4", "--out", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").exists(), err
    if kind == "folder":
        assert run_cli(capsys, *evaluate)[0] == 0


def test_a_run_whose_model_file_moved_is_resumed_from_its_new_place_and_an_edited_one_is_refused(tmp_path, capsys):
    """The user's GAN file (and the helper module beside it) moved: train --resume, evaluate, generate and doctor
    --run take --model NEWPATH.py:FUNCTION once that file's SHA-256 is the one config.json records, and the resumed
    run ends bit-exact as an uninterrupted one; gone, one line naming --model; edited since (in place or at the new
    place), one line naming both hashes, nothing written. (A moved file 'differs from the run's', generate and
    evaluate had no --model, and an edited file silently continued the run's checkpoint with other code.)"""
    import hashlib
    import shutil

    model, moved, edited = tmp_path / "gm", tmp_path / "gm2", tmp_path / "gm3"
    model.mkdir()
    (model / "tiny_parts.py").write_text("WIDTH_FACTOR = 1\n")
    (model / "mine.py").write_text(
        "from tiny_parts import WIDTH_FACTOR\n" + USER_GAN.replace("width)", "width * WIDTH_FACTOR)")
    )
    straight, run = tmp_path / "straight", tmp_path / "run"
    args = [*TINY, "--model", f"{model / 'mine.py'}:tiny", "--checkpoint-every", "3"]
    assert run_cli(capsys, "train", *args, "--steps", "6", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "3", "--out", str(run))[0] == 0
    model.rename(moved)
    resume = ["train", "--resume", str(run), "--steps", "6", "--quiet"]
    commands = (
        resume,
        ["generate", str(run), "--n", "4", "--out", str(tmp_path / "g.png")],
        ["evaluate", str(run), "--samples", "20"],
        ["doctor", "--run", str(run), "--out", str(tmp_path / "doctor"), "--fp16-steps", "0"],
    )
    state = lambda: {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(run.rglob("*")) if p.is_file()}  # noqa: E731
    before = state()
    shutil.copytree(moved, edited)
    (edited / "mine.py").write_text((edited / "mine.py").read_text() + "# tuned\n")
    for command in commands:
        code, _, err = run_cli(capsys, *command, "--trust-model")
        assert code == 2 and err.count("\n") == 1 and f"{model / 'mine.py'}, which is gone: give --model " in err, err
        code, _, err = run_cli(capsys, *command, "--model", f"{edited / 'mine.py'}:tiny")
        assert code == 2 and err.count("\n") == 1 and f"{edited / 'mine.py'} changed since {run}" in err, err
    # the file edited where the run trained with it: the same one line, whose hashes are the run's and the file's
    shutil.copytree(edited, model)
    then = json.loads((run / "config.json").read_text())["model"]["source_sha256"]
    now = hashlib.sha256((model / "mine.py").read_bytes()).hexdigest()
    for command in commands:
        code, _, err = run_cli(capsys, *command, "--trust-model")
        assert code == 2 and err.count("\n") == 1 and f"(SHA-256 {then[:12]} then, {now[:12]} now)" in err, err
    assert state() == before and not (tmp_path / "g.png").exists() and not (tmp_path / "doctor").exists()
    code, _, err = run_cli(capsys, *resume, "--model", f"{moved / 'mine.py'}:tiny")
    assert code == 0, err
    a, b = weights(straight, 6), weights(run, 6)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    recorded = json.loads((run / "config.json").read_text())
    assert (
        recorded["config"]["model"]["name"] == f"{moved / 'mine.py'}:tiny"
        and recorded["model"]["source_sha256"] == then
    )
    # read back from where it now is, with no flag
    code, _, err = run_cli(capsys, *commands[1], "--trust-model")
    assert code == 0 and (tmp_path / "g.png").exists(), err


def test_every_command_that_reads_a_run_back_answers_a_move_alike(tmp_path, capsys):
    """train --resume, evaluate, generate, doctor --run and compare --resume decide a move in one place
    (training/start.moved_files): moved data or a moved GAN file whose run's config.json records no SHA-256 of it
    (edited: every ampgan records both) cannot be checked to be the run's, and each command refuses it in the same
    one line naming the flag (train --resume refused it as 'config.json was edited', the others took it unchecked);
    a moved GAN file edited since, and moved data that differs, are refused by each in one line naming the flag; a
    flag that names no new place (another dataset) is the same line in each. Nothing is written."""
    import hashlib
    import shutil

    from conftest import run_short_compare
    from fixtures import write_image_folder
    from PIL import Image

    data, model, run, study = tmp_path / "data", tmp_path / "gm", tmp_path / "run", tmp_path / "study"
    write_image_folder(data, per_class=12, size=16)
    model.mkdir()
    (model / "mine.py").write_text(USER_GAN)
    places = ["--dataset", f"folder:{data}", "--model", f"{model / 'mine.py'}:tiny"]
    tiny = [*TINY[2:], *places, "--no-channels-last", "--no-compile"]
    assert run_cli(capsys, "train", *tiny, "--steps", "2", "--checkpoint-every", "1", "--out", str(run))[0] == 0
    assert run_short_compare(capsys, tiny, study)[0] == 0
    moved, other, edited = tmp_path / "data2", tmp_path / "other", tmp_path / "gm3"
    data.rename(moved)
    model.rename(tmp_path / "gm2")
    shutil.copytree(moved, other)
    Image.new("RGB", (16, 16), (250, 0, 0)).save(other / "dogs" / "img0.png")
    shutil.copytree(tmp_path / "gm2", edited)
    (edited / "mine.py").write_text(USER_GAN + "# tuned\n")
    here = ["--dataset", f"folder:{moved}", "--model", f"{tmp_path / 'gm2' / 'mine.py'}:tiny"]
    commands = {
        "train": ["train", "--resume", str(run), "--steps", "3", "--quiet"],
        "evaluate": ["evaluate", str(run), "--samples", "20"],
        "generate": ["generate", str(run), "--n", "4", "--out", str(tmp_path / "g.png")],
        "doctor": ["doctor", "--run", str(run), "--out", str(tmp_path / "doctor"), "--fp16-steps", "0"],
        "compare": ["compare", "--resume", str(study), "--quiet"],
    }
    configs = [run / "config.json", *sorted((study / "runs").glob("*/config.json"))]
    originals = {path: path.read_text() for path in configs}

    def files() -> dict:
        held = [*run.rglob("*"), *study.rglob("*")]
        return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in held if p.is_file()}

    def refused_alike(given: list[str], *said: str, commands=commands) -> None:
        before = files()
        for name, command in commands.items():
            code, _, err = run_cli(capsys, *command, *given)
            assert code == 2 and err.count("\n") == 1 and all(part in err for part in said), (name, err)
        assert files() == before and not (tmp_path / "g.png").exists() and not (tmp_path / "doctor").exists()

    for drop, flag in (("dataset.source.sha256", "--dataset"), ("model.source_sha256", "--model")):
        for path in configs:
            document = json.loads(originals[path])
            section, *middle, key = drop.split(".")
            del functools.reduce(dict.__getitem__, middle, document[section])[key]
            path.write_text(json.dumps(document))
        value = here[here.index(flag) + 1]
        refused_alike(here, f"{flag} {value}: ", "config.json records no SHA-256 of ")
    for path, text in originals.items():
        path.write_text(text)
    edited_model = ["--dataset", f"folder:{moved}", "--model", f"{edited / 'mine.py'}:tiny"]
    refused_alike(edited_model, f"{edited / 'mine.py'} changed since ", "give --model PATH.py:tiny where it is kept")
    # generate reads no data for a GAN that draws codes: only the commands that read it check it
    reads_data = {name: command for name, command in commands.items() if name != "generate"}
    refused_alike([*here[2:], "--dataset", f"folder:{other}"], "holds other data than", commands=reads_data)
    refused_alike([*here[2:], "--dataset", "digits"], "--dataset digits is no new place of", "drop --dataset digits")
    code, _, err = run_cli(capsys, *commands["train"], *here)
    assert code == 0 and latest_checkpoint(run).name == "step-000003.pt", err


@pytest.mark.parametrize("replacing", [False, True])
def test_a_new_run_stopped_at_step_0_names_no_resume_and_leaves_no_folder(tmp_path, capsys, monkeypatch, replacing):
    """A real Ctrl-C while a new run saved its step-0 checkpoint: the folder is given back (nothing trained; an
    --overwrite puts the old run back), so the line must not say "saved a checkpoint; continue with --resume RUN"
    (it did, and that command then found no run)."""
    import os

    import ampgan.training.loop as train_module

    run = tmp_path / "run"
    if replacing:
        assert run_cli(capsys, "train", *TINY, "--steps", "2", "--out", str(run))[0] == 0
    before = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".ampgan-lock"}
    real_save = train_module._Loop.save_checkpoint

    def saved_then_stopped(self):
        real_save(self)
        os.kill(os.getpid(), signal.SIGINT)  # a real signal, to the handler the loop installed

    monkeypatch.setattr(train_module._Loop, "save_checkpoint", saved_then_stopped)
    code, _, err = run_cli(capsys, "train", *TINY, "--steps", "4", "--out", str(run), *["--overwrite"] * replacing)
    assert code == 130 and "--resume" not in err and "run the command again" in err, err
    after = {p.relative_to(run): p.read_bytes() for p in run.rglob("*") if p.is_file() and p.name != ".ampgan-lock"}
    assert after == before and sorted(p.name for p in tmp_path.iterdir()) == (["run"] if replacing else [])
