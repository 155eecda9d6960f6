"""benchmarks/gpu_sweep.py, the lent GPU's seven minutes: its plan, its self-check against fake results (one test per
condition it must catch), its delivery under real SIGKILL and SIGTERM, and (slow) the whole sweep rehearsed on
the CPU. The supervisor is driven here with stand-in steps (plain `python -c` children): what is tested is the
supervisor, in milliseconds, not the steps."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "benchmarks" / "gpu_sweep.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_sweep", SWEEP)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_sweep"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


sweep = _load()


# --- the plan ---------------------------------------------------------------------------------------------------


def test_the_plan_fits_seven_minutes_leads_with_the_study_and_gives_each_limit_a_basis(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SWEEP), str(tmp_path / "sweep"), "--dry-run"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    commands = [line for line in lines if line.startswith("[")]
    bases = [line.strip() for line in lines if line.startswith("         ")]
    assert len(commands) == len(bases) == 9 and all(": " in basis and basis.split(": ", 1)[1] for basis in bases)
    total = int(lines[-1].split("at most ")[1].split()[0])
    assert total <= 415 and sum(int(c[1:].split()[0]) for c in commands) == total
    # The first minute: the study's network at CIFAR-10's shape, then the default model, every precision.
    assert "bench --model acgan-2019 --image-size 32 --set data.channels=3" in commands[0]
    assert "bench --model acgan " in commands[1]
    assert all("fp32,tf32,bf16,fp16" in c and "--no-trace" in c and "--no-channels-last" in c for c in commands[:2])
    # The GPU tests alone: no CPU test runs on the GPU.
    tests = next(c for c in commands if "--pytest" in c)
    assert "tests/test_on_gpu.py" in tests and "test_cuda_paths" not in tests
    assert any("kernel_calibration.py" in c and "--device cuda" in c for c in commands)
    assert any("measure_rows.py" in c and "--device cuda" in c and "resnet50:256" in c for c in commands)
    assert any("train --resume" in c for c in commands) and "--compiled-step" in commands[-1]
    assert not (tmp_path / "sweep").exists()  # a dry run writes nothing


def test_each_bench_gets_max_seconds_for_four_first_steps_and_rounds():
    """The benches' --max-seconds per batch size is shared by four precisions' first steps (cuDNN autotuning)
    and the rounds: at the largest batch it must hold the four warm-ups at the projection band's top and rounds."""
    steps = {s.name: s for s in sweep.plan(Path("/w"))}
    bench = steps["bench-acgan-2019"].argv
    max_seconds = float(bench[bench.index("--max-seconds") + 1])
    top_round_s = 0.206 + 0.117 + 0.078 + 0.080  # fp32/tf32/bf16/fp16 at 4096, the band's top (plan's docstring)
    warmups = 4 * (1.0 + 3 * 0.206)  # a second of autotuning each, then the warm-up and FLOP-counting steps
    assert max_seconds >= warmups + 5 * top_round_s
    batches = len(bench[bench.index("--batch-sizes") + 1].split(","))
    assert steps["bench-acgan-2019"].limit - steps["bench-acgan-2019"].grace >= batches * max_seconds


def test_a_deliver_folder_that_overlaps_the_work_or_holds_other_files_is_refused(tmp_path):
    work = tmp_path / "work"
    for deliver, expected in ((work / "out", "overlap"), (tmp_path, "overlap")):
        result = subprocess.run(
            [sys.executable, str(SWEEP), str(work), "--rehearse", "--deliver", str(deliver)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2 and expected in result.stderr and result.stderr.count("\n") == 1
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    result = subprocess.run(
        [sys.executable, str(SWEEP), str(work), "--rehearse", "--deliver", str(busy)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "notes.txt" in result.stderr and not work.exists()


# --- the self-check, fed fake results -----------------------------------------------------------------------------

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
SPEEDUP = {"tf32": 2.4, "bf16": 3.6, "fp16": 3.5}


def _bench(batches: list[int], percent: float = 40.0) -> dict:
    configs, speedups = [], []
    for batch in batches:
        fp32_ms = 0.03 * batch
        for precision in PRECISIONS:
            gain = SPEEDUP.get(precision, 1.0) if batch >= 1024 else 1.0
            configs.append(
                {
                    "batch_size": batch,
                    "precision": precision,
                    "status": "ok",
                    "reason": "",
                    "stats": {"median_s": fp32_ms / gain / 1e3},
                    "percent_of_peak": percent,
                }
            )
            if precision != "fp32":
                speedups.append(
                    {
                        "batch_size": batch,
                        "precision": precision,
                        "estimate": gain,
                        "low": gain * 0.97,
                        "high": gain * 1.03,
                        "settled": True,
                        "step_s": fp32_ms / gain / 1e3,
                    }
                )
    return {"format": "ampgan-bench/1", "configs": configs, "speedups": speedups}


def _write(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value))


def _junit(passed: int, failed: int = 0, skipped: int = 0) -> str:
    cases = "".join(f'<testcase classname="t" name="test_{i}"/>' for i in range(passed))
    cases += "".join(
        f'<testcase classname="t" name="test_bad_{i}"><failure message="x"/></testcase>' for i in range(failed)
    )
    cases += "".join(f'<testcase classname="t" name="test_skip_{i}"><skipped/></testcase>' for i in range(skipped))
    total = passed + failed + skipped
    return (
        f'<?xml version="1.0"?><testsuites><testsuite name="pytest" errors="0" failures="{failed}" '
        f'skipped="{skipped}" tests="{total}">{cases}</testsuite></testsuites>'
    )


def _calibration(work: Path, precisions=PRECISIONS) -> None:
    rows = [{"name": f"k{i}", "op": "gemm", "precision": p, "ms": "0.1"} for i, p in enumerate(precisions)]
    path = work / "calibration" / "kernels.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["name", "op", "precision", "ms"])
        writer.writeheader()
        writer.writerows(rows)
    _write(path.with_suffix(".json"), {"gpu": "NVIDIA H200"})


def _good_gpu_run(work: Path) -> None:
    """What a sweep on an H200 that did everything right would leave."""
    _write(work / "bench-acgan-2019" / "results.json", _bench([64, 1024, 4096]))
    _write(work / "bench-acgan" / "results.json", _bench([256, 2048]))
    measured_here = [
        {
            "batch_size": c["batch_size"],
            "precision": c["precision"],
            "ms_per_step": c["stats"]["median_s"] * 1e3,
            "projected_for_it_ms": c["stats"]["median_s"] * 1e3 * 1.2,
            "projected_low_ms": c["stats"]["median_s"] * 1e3 * 0.6,
            "projected_high_ms": c["stats"]["median_s"] * 1e3 * 2.0,
            "measured_over_projected": 1 / 1.2,
        }
        for c in _bench([64, 1024, 4096])["configs"]
    ]
    _write(work / "project-acgan-2019" / "projection" / "projection.json", {"measured_here": measured_here})
    _calibration(work)
    _write(work / "cuda-tests.xml", _junit(8))


def _finished(work: Path, rehearse: bool = False, status: str = "ok") -> dict:
    document = sweep.new_document(sweep.plan(work, rehearse=rehearse), rehearse)
    document["steps"] = [
        {"name": name, "status": status if name == "calibrate" else "ok", "seconds": 1.0, "limit": 10}
        for name in document.pop("to_run")
    ]
    document["to_run"], document["state"] = [], "finished"
    return sweep.summarise(document, work)


def _edit(path: Path, change) -> None:
    value = json.loads(path.read_text())
    change(value)
    path.write_text(json.dumps(value))


def test_a_good_gpu_run_passes_every_check(tmp_path):
    _good_gpu_run(tmp_path)
    summary = _finished(tmp_path)
    assert summary["ok"] and summary["failed_checks"] == []
    assert {c["name"]: c["status"] for c in summary["checks"]} == {
        "steps": "ok",
        "study-speedup": "ok",
        "percent-of-peak": "ok",
        "tf32-switch": "ok",
        "projection-band": "ok",
        "calibration-precisions": "ok",
        "cuda-tests": "ok",
    }
    assert summary["self_check"][-1] == "  RESULT: every step did what it should and every check holds"


def _over_peak(work):
    _edit(work / "bench-acgan" / "results.json", lambda r: r["configs"][5].update(percent_of_peak=131.0))


def _tf32_like_fp32(work):
    def alike(results):
        for row in results["speedups"]:
            if row["precision"] == "tf32":
                row.update(estimate=1.01, low=0.98, high=1.04)

    _edit(work / "bench-acgan-2019" / "results.json", alike)
    _edit(work / "bench-acgan" / "results.json", alike)


def _outside_band(work):
    path = work / "project-acgan-2019" / "projection" / "projection.json"
    _edit(path, lambda p: p["measured_here"][7].update(ms_per_step=p["measured_here"][7]["projected_high_ms"] * 1.5))


def _calibration_without_tf32(work):
    _calibration(work, precisions=("fp32", "bf16", "fp16"))


def _no_study_speedup(work):
    _edit(work / "bench-acgan-2019" / "results.json", lambda r: r.update(speedups=[]))


def _a_gpu_test_failed(work):
    _write(work / "cuda-tests.xml", _junit(7, failed=1))


def _gpu_tests_all_skipped(work):
    _write(work / "cuda-tests.xml", _junit(0, skipped=8))


def _no_projection(work):
    (work / "project-acgan-2019" / "projection" / "projection.json").unlink()


def _tf32_only_at_small_batches(work):
    for name in ("bench-acgan-2019", "bench-acgan"):
        _edit(
            work / name / "results.json",
            lambda r: r.update(
                speedups=[s for s in r["speedups"] if s["batch_size"] < 1024 or s["precision"] != "tf32"]
            ),
        )


def _no_calibration_sidecar(work):
    (work / "calibration" / "kernels.json").unlink()


@pytest.mark.parametrize(
    "break_it, failed, said",
    [
        (_over_peak, "percent-of-peak", "bench-acgan batch 2048 tf32 131%"),
        (_tf32_like_fp32, "tf32-switch", "a TF32 switch did nothing"),
        (_tf32_only_at_small_batches, "tf32-switch", "no tf32 speedup measured at a batch of 1024"),
        (_outside_band, "projection-band", "outside"),
        (_no_projection, "projection-band", "no projection"),
        (_calibration_without_tf32, "calibration-precisions", "no kernel rows for tf32"),
        (_no_calibration_sidecar, "calibration-precisions", "no sidecar"),
        (_no_study_speedup, "study-speedup", "no speedup of acgan-2019"),
        (_a_gpu_test_failed, "cuda-tests", "test_bad_0"),
        (_gpu_tests_all_skipped, "cuda-tests", "no GPU test passed on a GPU"),
    ],
)
def test_the_self_check_fails_on_each_condition_and_names_it(tmp_path, break_it, failed, said):
    _good_gpu_run(tmp_path)
    break_it(tmp_path)
    summary = _finished(tmp_path)
    assert summary["failed_checks"] == [failed] and not summary["ok"]
    line = next(line for line in summary["self_check"] if line.startswith("    FAIL ") and line.split()[1] == failed)
    assert said in line, line
    assert summary["self_check"][-1] == f"  RESULT: NOT ok: {failed}"


def test_a_percent_of_peak_of_exactly_100_is_possible(tmp_path):
    _good_gpu_run(tmp_path)
    _edit(tmp_path / "bench-acgan" / "results.json", lambda r: r["configs"][0].update(percent_of_peak=100.0))
    assert _finished(tmp_path)["ok"]


def test_a_step_that_did_not_do_its_work_fails_the_steps_check(tmp_path):
    _good_gpu_run(tmp_path)
    summary = _finished(tmp_path, status="killed at its limit")
    line = next(line for line in summary["self_check"] if line.strip().startswith("FAIL"))
    assert summary["failed_checks"] == ["steps"] and "calibrate: killed at its limit" in line


def test_a_bench_whose_every_configuration_failed_is_a_failed_step(tmp_path):
    _good_gpu_run(tmp_path)

    def all_failed(results):
        for config in results["configs"]:
            config.update(status="error", reason="'<=' not supported", stats=None, percent_of_peak=None)
        results["speedups"] = []

    _edit(tmp_path / "bench-acgan" / "results.json", all_failed)
    summary = _finished(tmp_path)
    status = next(s["status"] for s in summary["steps"] if s["name"] == "bench-acgan")
    assert status.startswith("failed: no configuration measured (error: '<=' not supported")
    assert summary["failed_checks"] == ["steps"]


def test_a_rehearsal_leaves_what_only_a_gpu_shows_out_and_passes(tmp_path):
    """On a CPU there is no tf32 and no projection for the device: those two are n/a, never failed, and only there."""
    _write(tmp_path / "bench-acgan-2019" / "results.json", _bench([2]))
    _write(tmp_path / "bench-acgan" / "results.json", _bench([2]))
    _calibration(tmp_path, precisions=("fp32", "bf16"))
    _write(tmp_path / "cuda-tests.xml", _junit(0, skipped=8))
    summary = _finished(tmp_path, rehearse=True)
    statuses = {c["name"]: c["status"] for c in summary["checks"]}
    assert statuses["tf32-switch"] == statuses["projection-band"] == "n/a" and summary["ok"], summary["self_check"]
    assert _finished(tmp_path, rehearse=False)["failed_checks"] == [
        "tf32-switch",
        "projection-band",
        "calibration-precisions",
        "cuda-tests",
    ]


def test_a_compile_cut_short_says_how_long_it_had_run(tmp_path):
    _good_gpu_run(tmp_path)
    compiled = {"precision": "bf16", "batch_size": 1024, "compile_backend": "inductor", "eager_step_s": 0.01}
    _write(
        tmp_path / "bench-compiled" / "results.json",
        compiled | {"status": "stopped while compiling", "compile_ran_s": 61.4},
    )
    line = "  compiled bf16 at batch 1024 (inductor backend): stopped while compiling; the compile had run 61.4 s"
    assert line in _finished(tmp_path)["self_check"]
    measured = {"status": "measured", "first_compile_s": 41.0, "speedup": {"estimate": 1.3, "low": 1.25, "high": 1.36}}
    _write(tmp_path / "bench-compiled" / "results.json", compiled | measured)
    line = "first compile 41.0 s, compiled over eager 1.30x [1.25-1.36]"
    assert any(line in text for text in _finished(tmp_path)["self_check"])


def test_a_summary_before_the_end_is_not_a_result(tmp_path):
    _good_gpu_run(tmp_path)
    document = sweep.new_document(sweep.plan(tmp_path), False)
    document["state"], document["running"] = "running bench-acgan-2019", "bench-acgan-2019"
    document["to_run"].remove("bench-acgan-2019")
    summary = sweep.summarise(document, tmp_path)
    assert not summary["ok"] and summary["self_check"][-1] == "  RESULT: not finished (running bench-acgan-2019)"
    assert any("bench-acgan-2019" in line and "running" in line for line in summary["self_check"])


# --- the supervisor under real signals, with stand-in steps ---------------------------------------------------------

DRIVER = """
import importlib.util, json, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("gpu_sweep", {sweep!r})
sweep = importlib.util.module_from_spec(spec)
sys.modules["gpu_sweep"] = sweep
spec.loader.exec_module(sweep)
work, out = Path(sys.argv[1]), Path(sys.argv[2])
work.mkdir()
out.mkdir()
# Each stand-in step writes its pid, then sleeps (SIGTERM: writes 'stopped' and exits 143).
child = [sys.executable, "-c", {child!r}, str(work)]
steps = [sweep.Step(f"s{{i}}", [*child, f"s{{i}}", "0.3"], 30, "stand-in", grace=2) for i in range(2)]
steps.append(sweep.Step("long", [*child, "long", "60"], 60, "stand-in", grace=2))
steps.append(sweep.Step("after", [*child, "after", "0"], 5, "stand-in"))
probe = [sys.executable, "-c", "print('name, driver_version')"]  # stands in for nvidia-smi: a child beside the steps
code = sweep.supervise(steps, work, out, rehearse=True, total_s=120, probe=probe)
# The supervisor imports nothing of ampgan nor torch: a broken install still leaves a summary.
imported = sorted(m for m in sys.modules if m.split(".")[0] in ("ampgan", "torch"))
(work / "imported.json").write_text(json.dumps(imported))
sys.exit(code)
"""
CHILD = """
import os, signal, sys, time
from pathlib import Path
work, name, seconds = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
def stopped(signum, frame):
    (work / (name + ".stopped")).write_text("1")
    sys.exit(143)
signal.signal(signal.SIGTERM, stopped)
# Written whole under its name (the test reads it the moment the name appears: a plain write showed it empty)
(work / (name + ".pid.tmp")).write_text(str(os.getpid()))
os.replace(work / (name + ".pid.tmp"), work / (name + ".pid"))
time.sleep(seconds)
"""


def _start_driver(tmp_path) -> tuple[subprocess.Popen, Path, Path]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(sweep=str(SWEEP), child=CHILD))
    work, out = tmp_path / "work", tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, str(driver), str(work), str(out)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return process, work, out


def _wait_for(condition, seen: list, out: Path, timeout: float = 30.0, every_s: float = 0.01) -> None:
    """Poll until `condition()`, reading OUT all the while: its summary parses every time and it never holds
    more than 8 files."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        if (out / "summary.json").exists():
            seen.append(json.loads((out / "summary.json").read_text())["state"])
        assert not out.exists() or len(list(out.iterdir())) <= 8
        time.sleep(every_s)


def _readable(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    text = (out / "summary.txt").read_text().splitlines()  # the same, or one state behind (killed between them)
    assert text[0].startswith("SELF-CHECK") and text[-1].startswith("  RESULT: ")
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 and set(names) <= set(sweep.DELIVERED) | {n + sweep.PARTIAL for n in sweep.DELIVERED}
    return summary


def _gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of an exited child is gone too
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("moment", ["first summary", "after the first step", "in the middle of a step"])
def test_sigkill_at_any_moment_leaves_a_readable_summary_and_no_step_running(tmp_path, moment):
    process, work, out = _start_driver(tmp_path)
    seen: list = []
    try:
        conditions = {
            "first summary": lambda: (out / "summary.json").exists(),
            "after the first step": lambda: (work / "s1.pid").exists(),
            "in the middle of a step": lambda: (work / "long.pid").exists(),
        }
        _wait_for(conditions[moment], seen, out)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        process.kill()
    summary = _readable(out)
    assert summary["state"] != "finished"
    if moment != "first summary":
        assert summary["steps"][0]["name"] == "s0" and summary["steps"][0]["status"] == "ok"
        assert "sweep.tar.gz" in os.listdir(out)
    if moment == "in the middle of a step":
        assert summary["state"] == "running long" and summary["running"] == "long"
        # The step dies with the supervisor (the parent-death signal), however the supervisor died.
        assert _gone(int((work / "long.pid").read_text()))


def test_sigterm_stops_the_running_step_delivers_and_exits_143(tmp_path):
    process, work, out = _start_driver(tmp_path)
    seen: list = []
    try:
        _wait_for(lambda: (work / "long.pid").exists(), seen, out)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    finally:
        process.kill()
    assert process.returncode == 143, output
    summary = _readable(out)
    assert summary["state"] == "stopped by SIGTERM" and (work / "long.stopped").exists()
    assert summary["stamp"]["nvidia_smi"] == ["name, driver_version"]  # the probe's answer, kept
    assert json.loads((work / "imported.json").read_text()) == []
    statuses = {s["name"]: s["status"] for s in summary["steps"]}
    assert statuses == {"s0": "ok", "s1": "ok", "long": "stopped: the sweep got a signal"}
    assert summary["not_run"] == ["after"] and "after                not run: the sweep got SIGTERM" in output
    assert summary["failed_checks"][0] == "steps"
    # Delivered before the first step, at each step's start and end, and at the end: each time at most 8 files.
    assert [d["state"] for d in summary["deliveries"]] == [
        "starting",
        "after s0",
        "after s1",
        "after long",
        "stopped by SIGTERM",
    ]
    assert all(d["files"] <= 8 for d in summary["deliveries"])


def test_the_tests_step_stopped_by_sigterm_still_writes_its_junit_file(tmp_path):
    tests = tmp_path / "test_stand_in.py"
    tests.write_text(
        "import time\nfrom pathlib import Path\n"
        "def test_quick():\n    pass\n"
        "def test_long():\n    Path(__file__).with_name('inside').write_text('1')\n    time.sleep(60)\n"
    )
    junit = tmp_path / "junit.xml"
    process = subprocess.Popen(
        [sys.executable, str(SWEEP), str(tmp_path), "--pytest", "-q", "-p", "no:cacheprovider", str(tests)]
        + ["--junitxml", str(junit)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for(lambda: (tmp_path / "inside").exists(), [], tmp_path / "none")
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    finally:
        process.kill()
    assert process.returncode == 2 and "1 passed" in output  # interrupted, with its summary line
    assert sweep.cuda_tests(tmp_path) is None  # the sweep reads WORK/cuda-tests.xml; here it is junit.xml
    junit.rename(tmp_path / "cuda-tests.xml")
    assert sweep.cuda_tests(tmp_path) | {"failed_names": []} == {
        "tests": 1,
        "failures": 0,
        "errors": 0,
        "skipped": 0,
        "passed": 1,
        "failed_names": [],
    }


# --- the whole sweep, rehearsed ------------------------------------------------------------------------------------


@pytest.mark.slow  # eight processes in turn, each importing torch, two stepping the study's network on the CPU
def test_the_sweep_rehearsed_on_the_cpu_delivers_after_every_step_and_checks_itself(tmp_path):
    from ampgan.projection.kernels import CALIBRATION_COLUMNS as COLUMNS

    work, out = tmp_path / "work", tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # The rehearsal's limits are twice the GPU's by default (and its benches' --max-seconds): a busy 2-core machine
    # must not decide the outcome; one thread per process under pytest-xdist (conftest) keeps the other worker
    # from stalling it.
    process = subprocess.Popen(
        [sys.executable, str(SWEEP), str(work), "--rehearse", "--deliver", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
    )
    seen: list = []
    try:
        _wait_for(lambda: process.poll() is not None, seen, out, timeout=1500, every_s=0.2)
        printed = process.communicate(timeout=60)[0].decode().splitlines()
    finally:
        process.kill()
    summary = _readable(out)
    assert (out / "summary.txt").read_text().splitlines() == summary["self_check"]
    statuses = {step["name"]: step["status"] for step in summary["steps"]}
    assert process.returncode == 0 and summary["ok"], summary["self_check"]
    assert list(statuses) == [step.name for step in sweep.plan(work, rehearse=True)]
    assert [d["state"] for d in summary["deliveries"]] == ["starting", *(f"after {n}" for n in statuses), "finished"]
    assert all(d["files"] <= 8 for d in summary["deliveries"])
    assert printed[printed.index(summary["self_check"][0]) :] == summary["self_check"]  # printed last
    # The real study's network at CIFAR-10's shape, and fp16 with its loss scaler, ran before any GPU sees them.
    study = json.loads((work / "bench-acgan-2019" / "results.json").read_text())
    assert study["spec"]["model"] == "acgan-2019"
    assert (study["spec"]["config"]["data"]["image_size"], study["spec"]["config"]["data"]["channels"]) == (32, 3)
    assert any(row["bench"] == "bench-acgan-2019" and "speedup" in row for row in summary["speedups"])
    config = json.loads((work / "resume-run" / "config.json").read_text())
    assert config["config"]["precision"]["name"] == "fp16" and config["config"]["precision"]["loss_scale"] is None
    assert "(resumed from step-" in (work / "train-resume.log").read_text()
    # The projection's op tables, traced by the project step itself (the bench ran with --no-trace).
    traced = json.loads((work / "project-acgan-2019" / "results.json").read_text())
    assert (
        set(traced["op_tables"]) == {"fp32"}
        and (work / "project-acgan-2019" / "projection" / "projection.json").is_file()
    )
    compiled = json.loads((work / "bench-compiled" / "results.json").read_text())
    assert compiled["status"] == "measured" and compiled["first_compile_s"] is not None
    assert summary["cuda_tests"]["skipped"] == 8 and summary["cuda_tests"]["failures"] == 0
    # What comes back: five files, the tarball without checkpoints, the calibration in the projection's format.
    assert sorted(os.listdir(out)) == sorted(sweep.DELIVERED)
    with tarfile.open(out / "sweep.tar.gz") as archive:
        names = archive.getnames()
    assert not any(name.endswith(".pt") for name in names) and any(name.endswith("cuda-tests.xml") for name in names)
    with open(out / "calibration-kernels.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames) == COLUMNS
    assert {row["op"] for row in rows} == {"gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_weight"}
