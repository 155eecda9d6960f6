"""An interrupted comparison keeps what it finished and resumes to the very result of an uninterrupted one.

Real processes and real signals: a small driver starts `ampgan compare` with one stage wrapped so that, when
it is reached, the process sends itself SIGINT, SIGTERM or SIGKILL (a deterministic moment for the signal,
delivered through the handlers ampgan installs). One study is stopped at every stage in turn and resumed
each time; at the end its runs' weights and quality equal those of the same study run straight through.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

STUDY = [
    "compare",
    "--dataset",
    "synthetic",
    "--width",
    "8",
    "--set",
    "model.z_dim=16",
    "--batch-size",
    "8",
    "--steps",
    "8",
    "--precisions",
    "fp32,bf16",
    "--seeds",
    "1",
    "--set",
    "compare.eval_points=2",
    "--set",
    "compare.eval_samples=20",
    "--set",
    "compare.bench_batch_sizes=8",
    "--set",
    "compare.bench_seconds=0.3",
    "--no-channels-last",
    "--no-compile",
    "--device",
    "cpu",
    "--quiet",
    "--set",
    "logging.log_every=2",
]

DRIVER = textwrap.dedent("""
    import os, signal, sys
    stage, how = os.environ.get("STOP_AT", ""), os.environ.get("STOP_WITH")
    sig = getattr(signal, how) if how else None

    def stop():
        os.kill(os.getpid(), sig)

    def on_call(module, name, when=lambda *a, **k: True):
        original = getattr(module, name)
        def wrapped(*args, **kwargs):
            if when(*args, **kwargs):
                stop()
            return original(*args, **kwargs)
        setattr(module, name, wrapped)

    import ampgan.bench.harness as harness
    import ampgan.cli.compare as cli_compare
    import ampgan.study.evaluate as evaluate
    import ampgan.study.report as report
    import ampgan.training.loop as loop
    import ampgan.quality.evaluator as evaluator
    calls = {"n": 0}

    # The step not traced for the projection, and the evaluator trained briefly, as in-process tests do
    # (conftest): neither is a stage this chain stops at.
    from stand_ins import brief_evaluator_training, untraced_op_tables
    harness.trace_op_tables = untraced_op_tables
    for name, value in brief_evaluator_training(evaluator).items():
        setattr(evaluator, name, value)

    def nth(n):
        def when(*args, **kwargs):
            calls["n"] += 1
            return calls["n"] == n
        return when

    if stage == "evaluator":
        on_call(evaluate, "evaluator_for")
    elif stage == "bench":
        on_call(harness._Contender, "timed_step", nth(3))
    elif stage == "evaluation":  # the first evaluation inside the fp32 run
        on_call(evaluate, "quality_of_images", nth(1))
    elif stage.startswith("bf16-step-"):
        at = int(stage.rsplit("-", 1)[1])
        on_call(loop, "train_step", lambda state, batch: state.policy.name == "bf16" and state.step == at)
    elif stage == "report":
        on_call(report, "report_sections")
    from ampgan.cli import main
    main(sys.argv[1:])
""")


def _compare(driver, out, *extra, stop_at=None, stop_with=None, cache):
    tests = str(Path(__file__).parent)  # the driver imports the stand-ins there
    env = dict(
        os.environ, AMPGAN_CACHE_DIR=str(cache), PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")])
    )
    if stop_at:
        env |= {"STOP_AT": stop_at, "STOP_WITH": stop_with}
    command = [sys.executable, str(driver), *(extra or [*STUDY, "--out", str(out)])]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def _final(out):
    compare = json.loads((out / "compare.json").read_text())
    weights = {}
    for precision, run in compare["runs"].items():
        folder = out / run["per_seed"]["0"]["run_dir"]
        checkpoint = torch.load(sorted((folder / "checkpoints").glob("*.pt"))[-1], weights_only=True)
        weights[precision] = (checkpoint["step"], checkpoint["generator"], checkpoint["discriminator"])
    quality = {
        p: {
            k: v
            for k, v in r["final"].items()
            if k in ("evaluator_accuracy", "frechet_distance", "kid", "coverage", "recall")
        }
        for p, r in compare["runs"].items()
    }
    return weights, quality, compare


@pytest.mark.slow
def test_a_study_stopped_at_every_stage_resumes_to_the_uninterrupted_result(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    cache = tmp_path / "cache"
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    done = _compare(driver, straight, cache=cache)
    assert done.returncode == 0, done.stderr

    # (stage, signal, expected exit code, what must be kept by then, how to continue)
    chain = [
        ("evaluator", "SIGINT", 130, [], "same command"),
        ("bench", "SIGTERM", 143, [], "resume"),
        ("evaluation", "SIGTERM", 143, ["the bench"], "same command"),
        ("bf16-step-3", "SIGINT", 130, ["the bench", "run fp32-seed0"], "resume"),
        ("bf16-step-5", "SIGKILL", -9, None, "same command"),
        ("report", "SIGINT", 130, ["the bench", "run fp32-seed0", "run bf16-seed0"], "resume"),
    ]
    how_next = None
    for stage, signal_name, code, kept, next_way in chain:
        arguments = () if how_next in (None, "same command") else ("compare", "--resume", str(stopped), "--quiet")
        result = _compare(driver, stopped, *arguments, stop_at=stage, stop_with=signal_name, cache=cache)
        assert result.returncode == code, (stage, result.stderr)
        assert "Traceback" not in result.stderr, (stage, result.stderr)
        assert (stopped / "study.json").is_file(), stage  # nothing lost, whatever stopped it
        if kept is not None:
            last = result.stderr.strip().splitlines()[-1]
            assert last.startswith(f"stopped: {signal_name} received: the study is kept in {stopped}"), (stage, last)
            assert f"continue with: ampgan compare --resume {stopped}" in last
            assert all(part in last for part in kept), (stage, last)
        how_next = next_way
    # A command with other options is refused, not mixed into the study.
    other = _compare(driver, stopped, *STUDY[:-2], "--set", "logging.log_every=4", "--out", str(stopped), cache=cache)
    assert (
        other.returncode == 2
        and "holds a study with other options (config.logging.log_every was 2, now 4)" in other.stderr
    )
    finished = _compare(driver, stopped, "compare", "--resume", str(stopped), "--quiet", cache=cache)
    assert finished.returncode == 0, finished.stderr

    (a_weights, a_quality, a), (b_weights, b_quality, b) = _final(straight), _final(stopped)
    assert a_quality == b_quality
    for precision, (step, generator, discriminator) in a_weights.items():
        other_step, other_generator, other_discriminator = b_weights[precision]
        assert step == other_step == 8
        assert all(torch.equal(generator[k], other_generator[k]) for k in generator)
        assert all(torch.equal(discriminator[k], other_discriminator[k]) for k in discriminator)
    assert [line for line in a["verdict"] if line.startswith("Final evaluator")] == [
        line for line in b["verdict"] if line.startswith("Final evaluator")
    ]
    assert (stopped / "report.html").is_file()
