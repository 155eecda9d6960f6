"""An interrupted comparison keeps what it finished and resumes to the very result of an uninterrupted one.

Real processes and real signals: each `ampgan compare` runs in its own process, forked from a small server
that imported ampgan once (the fresh interpreter's start-up, about 4 s a command here, is tested by the
CLI's own tests). In a process one stage is wrapped so that, when it is reached, the process sends itself
SIGINT, SIGTERM or SIGKILL (a deterministic moment for the signal, delivered through the handlers ampgan
installs). One study is stopped at every stage in turn and resumed each time; at the end its runs' weights
and quality equal those of the same study run straight through.
"""

import json
import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import own_decision_cache
from fixtures import ORIGINALS_TINY

STUDY = ["compare", *ORIGINALS_TINY, "--steps", "8", "--precisions", "fp32,bf16", "--seeds", "1"]
STUDY += ["--set", "compare.eval_points=2", "--set", "compare.eval_samples=20", "--set", "compare.bench.batch_sizes=8"]
STUDY += ["--set", "compare.bench.min_seconds=0.3", "--set", "compare.bench.max_seconds=0.9"]
STUDY += ["--set", "logging.log_every=2"]

SERVER = textwrap.dedent("""
    import json, os, signal, sys

    import ampgan.bench.harness as harness
    import ampgan.bench.measure as measure
    import ampgan.bench.op_tables as op_tables
    import ampgan.study.evaluate as evaluate
    import ampgan.study.report as report
    import ampgan.training.loop as loop
    import ampgan.quality.evaluator as evaluator
    from ampgan.cli import main

    # The step not traced for the projection, and the evaluator trained briefly, as in-process tests do
    # (conftest): neither is a stage this chain stops at.
    from stand_ins import brief_evaluator_training, untraced_op_tables
    harness.trace_op_tables = op_tables.trace_op_tables = untraced_op_tables
    for name, value in brief_evaluator_training(evaluator).items():
        setattr(evaluator, name, value)
    # What every command would otherwise import on its own: the compiler stack (the meta device's reference
    # kernels pull it in) and the figures' library.
    import matplotlib.pyplot, torch._dynamo

    def on_call(module, name, when=lambda *a, **k: True):
        original = getattr(module, name)
        def wrapped(*args, **kwargs):
            if when(*args, **kwargs):
                os.kill(os.getpid(), getattr(signal, os.environ["STOP_WITH"]))
            return original(*args, **kwargs)
        setattr(module, name, wrapped)

    def nth(n):
        calls = {"n": 0}
        def when(*args, **kwargs):
            calls["n"] += 1
            return calls["n"] == n
        return when

    def command(request):
        \"\"\"In the forked process: output to the request's files, the stage wrapped, then ampgan.\"\"\"
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        os.environ.update(request["env"])
        stage = request["env"].get("STOP_AT", "")
        if stage == "evaluator":
            on_call(evaluate, "evaluator_for")
        elif stage == "bench":
            on_call(measure.Contender, "timed_step", nth(3))
        elif stage == "evaluation":  # the first evaluation inside the fp32 run
            on_call(evaluate, "quality_of_images", nth(1))
        elif stage.startswith("bf16-step-"):
            at = int(stage.rsplit("-", 1)[1])
            on_call(loop, "train_step", lambda state, batch: state.policy.name == "bf16" and state.step == at)
        elif stage == "report":
            on_call(report, "report_sections")
        sys.argv = ["ampgan", *request["argv"]]
        main(request["argv"])  # exits, through SystemExit, as the command does

    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        child = os.fork()
        if child == 0:
            try:
                command(request)
                sys.exit(0)  # never back into the server's loop
            finally:
                sys.stdout.flush(), sys.stderr.flush()
        _, status = os.waitpid(child, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)
""")


class _Server:
    """The forking server (SERVER) in its own process: `run` asks it for one command in a new process and
    returns that process's exit code and output."""

    def __init__(self, folder: Path):
        self.folder = folder
        script = folder / "server.py"
        script.write_text(SERVER)
        tests = str(Path(__file__).parent)  # the server imports the stand-ins there
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, str(script)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.count = 0

    def run(self, *argv, stop_at=None, stop_with=None) -> subprocess.CompletedProcess:
        self.count += 1
        stdout, stderr = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        env = {"STOP_AT": stop_at, "STOP_WITH": stop_with} if stop_at else {}
        request = {"argv": list(argv), "env": env, "stdout": str(stdout), "stderr": str(stderr)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], 300)
        assert ready, f"no answer in 300 s to {argv}"
        returncode = json.loads(self.process.stdout.readline())["returncode"]
        return subprocess.CompletedProcess(argv, returncode, stdout.read_text(), stderr.read_text())

    def close(self):
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def server(tmp_path, monkeypatch):
    """The server, with speed decisions of its own and the session's briefly trained evaluators."""
    own_decision_cache(monkeypatch, tmp_path)
    folder = tmp_path / "server"
    folder.mkdir()
    running = _Server(folder)
    yield running
    running.close()


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
def test_a_study_stopped_at_every_stage_resumes_to_the_uninterrupted_result(tmp_path, server):
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    done = server.run(*STUDY, "--out", str(straight))
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
        same = (*STUDY, "--out", str(stopped))
        arguments = same if how_next in (None, "same command") else ("compare", "--resume", str(stopped), "--quiet")
        result = server.run(*arguments, stop_at=stage, stop_with=signal_name)
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
    other = server.run(*STUDY[:-2], "--set", "logging.log_every=4", "--out", str(stopped))
    assert (
        other.returncode == 2
        and "holds a study with other options (config.logging.log_every was 2, now 4)" in other.stderr
    )
    finished = server.run("compare", "--resume", str(stopped), "--quiet")
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
