from __future__ import annotations

import os
import subprocess
import sys

# Under pytest-xdist each worker has a core: one thread for it and for every process a test starts
# (torchrun, the CLI, the GPU sweep's rehearsal). Two threads per process on a 2-core machine already
# busy with the other worker spin at each parallel region's barrier: a tiny model's 70-ms step took
# 2.7 s so. Set before torch is imported, here and in the children that inherit the environment.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, "1")
# Fixed threads are the user's choice, which ampgan never changes (system/cpu_tuning.py): a test's results
# then never depend on what else the machine runs (tests of the thread watch inject their loads).
os.environ.setdefault("OMP_NUM_THREADS", os.environ.get("AMPGAN_TEST_THREADS") or "2")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from fixtures import ORIGINALS_STUDY, ORIGINALS_TINY  # noqa: E402, F401 - ORIGINALS_TINY: test_damaged_files imports it here
from stand_ins import brief_evaluator_training, untraced_op_tables  # noqa: E402

from ampgan.cli import main
from ampgan.config import TrainConfig, config_from_options
from ampgan.data.synthetic import make_synthetic
from ampgan.gan import DataSpec, resolve_model
from ampgan.training.precision import PrecisionPolicy
from ampgan.training.state import build_train_state

CPU = torch.device("cpu")


def _test_threads() -> int:
    """Torch threads per test process, fixed so float reductions run in one order: one per worker when
    pytest-xdist runs a worker per core (two threads each would fight over the cores, spinning), else two
    (the 2-core CI machine). AMPGAN_TEST_THREADS overrides."""
    if os.environ.get("AMPGAN_TEST_THREADS"):
        return int(os.environ["AMPGAN_TEST_THREADS"])
    return 1 if os.environ.get("PYTEST_XDIST_WORKER") else 2


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.set_num_threads(_test_threads())


@pytest.fixture(autouse=True, scope="session")
def _cores_free_of_other_processes():
    """Every measurement meets a machine whose cores no other process crowds (system/cpu_tuning.py): the
    suite's own workers and a shared CI runner's neighbours would otherwise mark its decisions as taken under
    load, or fit its threads, at random. For the whole session, so that module-scoped studies get it too;
    tests of those rules inject their loads."""
    import ampgan.system.cpu_tuning as cpu_tuning

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu_tuning, "others_running", lambda samples=5: 0)
        yield


@pytest.fixture(autouse=True)
def _memory_format_makes_no_difference(request, monkeypatch):
    """Every command that decides its memory format (speed/layout.py) meets a machine where NCHW
    and channels-last take exactly as long, so it keeps NCHW without timing anything: a timing
    would make the tests slow and their runs' layout depend on the machine's load. Tests of the
    decision itself inject their own machine (tests/test_layout.py) or ask for the real one."""
    if "real_layout_measurement" in request.keywords:
        return
    import ampgan.speed.layout as layout

    monkeypatch.setattr(
        layout,
        "measure_layouts_on_training_step",
        lambda config, dataset, device: layout.measure_layouts_with(lambda name: lambda: 0.01),
    )


@pytest.fixture(autouse=True)
def _steps_not_traced_for_projection(request, monkeypatch):
    """A bench traces its step's operations in three precisions for `ampgan project` (a few seconds
    even for a tiny model); tests that do not project skip it. tests/test_projection.py traces for real."""
    # Every module that binds trace_op_tables by name is imported before any patch: one first imported while a
    # test's patch was on would keep the stand-in for good, and a later real_op_trace test would project nothing
    # (test_compare under `-m "not slow"`).
    import ampgan.bench.harness as harness
    import ampgan.bench.op_tables as op_tables
    import ampgan.projection.tables as tables
    import ampgan.study.project as project

    if "real_op_trace" in request.keywords:
        return
    for module in (harness, op_tables, tables, project):  # a bench's; a study's projection without a bench
        monkeypatch.setattr(module, "trace_op_tables", untraced_op_tables)


@pytest.fixture(autouse=True)
def _compiling_never_measured_faster(request, monkeypatch):
    """Every command that decides whether to compile (speed/compilation.py) meets a machine where an
    eager step takes 10 ms and the compiled one exactly as long, so short runs are not measured and
    long ones learn that compiling never pays, without compiling or timing anything. Tests of the
    decision itself inject their own probe (tests/test_compilation.py)."""
    if "real_compile_measurement" in request.keywords:
        return
    import ampgan.speed.compilation as compilation
    from ampgan.speed.rounds import measure_rounds

    class NoGain(compilation.CompileProbe):
        def eager_step_s(self):
            return 0.01

        def measure(self):
            rounds = measure_rounds(
                {compilation.EAGER: lambda: 0.01, compilation.COMPILED: lambda: 0.01},
                compilation.EAGER,
                compilation.DECISION_RULE,
            )
            return compilation.CompileMeasurement(rounds, first_compile_s=1.0, compile_s=1.0)

    monkeypatch.setattr(compilation, "compile_probe_for", lambda config, dataset, device: NoGain())


_REAL_EVALUATOR_TRAINING = {}


@pytest.fixture(autouse=True, scope="session")
def _evaluators_trained_briefly():
    """A study's evaluator (quality/evaluator.py) trains for at least 150 steps, tens of seconds per
    dataset on 2 cores; a test of a study's plumbing needs a judge past the accuracy floor, not a good
    one: two epochs, at least 50 steps (digits: 0.88 held-out accuracy there, 0.59 at 40; the floor is
    0.5). For the whole session, so that module-scoped studies (made before any test's own fixtures) get
    it too; a test of the evaluator's own training asks for the real one (marker
    `real_evaluator_training`)."""
    import ampgan.quality.evaluator as evaluator

    _REAL_EVALUATOR_TRAINING.update(
        _train_classifier=evaluator._train_classifier, MIN_TRAINING_STEPS=evaluator.MIN_TRAINING_STEPS
    )
    with pytest.MonkeyPatch.context() as patch:
        for name, value in brief_evaluator_training(evaluator).items():
            patch.setattr(evaluator, name, value)
        yield


@pytest.fixture(autouse=True)
def _real_evaluator_training_where_asked(request, monkeypatch, tmp_path):
    """The real evaluator training for a test marked `real_evaluator_training`, in a cache of its own (the
    session's holds briefly trained ones under the same keys)."""
    if "real_evaluator_training" not in request.keywords:
        return
    import ampgan.quality.evaluator as evaluator

    for name, value in _REAL_EVALUATOR_TRAINING.items():
        monkeypatch.setattr(evaluator, name, value)
    monkeypatch.setenv("AMPGAN_CACHE_DIR", str(tmp_path / "real-evaluator-cache"))


def tiny_config(sets=(), **overrides) -> TrainConfig:
    """A small config by the command line's option names (config_from_options); `sets`: --set texts."""
    values = dict(dataset="synthetic", width=8, z_dim=16, batch_size=8, steps=3, device="cpu")
    if overrides.get("model", "acgan") != "acgan":  # other models have other options
        values.pop("width"), values.pop("z_dim")
    values.update(overrides)
    return config_from_options(sets=sets, **values)


def tiny_state(precision: str = "fp32", loss_scale=None, image_size=32, channels=3, num_classes=4, **overrides):
    config = tiny_config(precision=precision, loss_scale=loss_scale, **overrides)
    data = DataSpec(image_size=image_size, channels=channels, num_classes=num_classes)
    policy = PrecisionPolicy(precision, CPU, loss_scale)
    return build_train_state(config, resolve_model(config.model.name, config.model.options), data, policy)


def step_on(batch):
    """What train_step takes: the same batch for every D update of the step."""
    return lambda: batch


def tiny_batch(image_size=32, channels=3, batch=8, num_classes=4, seed=0):
    data = make_synthetic(count=batch, num_classes=num_classes, channels=channels, image_size=image_size, seed=seed)
    return data.images.float() / 127.5 - 1, data.labels


def run_cli(capsys, *args):
    """(exit code, stdout, stderr) of `ampgan ARGS`, run in-process."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def run_short_compare(capsys, model_args, out):
    """`ampgan compare` of fp32 and bf16, one seed, 2 s each, one evaluation of 20 samples, the bench at
    batch 8 only: the plumbing of a comparison in seconds. (exit code, stdout, stderr)."""
    return run_cli(
        capsys,
        "compare",
        *model_args,
        "--precisions",
        "fp32,bf16",
        "--seeds",
        "1",
        "--time-budget",
        "2s",
        "--set",
        "compare.eval_points=1",
        "--set",
        "compare.eval_samples=20",
        "--set",
        "compare.bench.batch_sizes=8",
        "--set",
        "compare.bench.min_seconds=0.3",
        "--set",
        "compare.bench.max_seconds=0.9",
        "--out",
        str(out),
        "--quiet",
    )


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Speed decisions and evaluators are cached per test session, never in the user's ~/.cache. Under
    pytest-xdist the trained evaluators are shared by the workers (a folder beside theirs: an evaluator
    takes tens of seconds to train, and the cache writes each file atomically, so two workers training
    the same one at once only repeat work); speed decisions stay each worker's own."""
    previous = os.environ.get("AMPGAN_CACHE_DIR")
    cache = tmp_path_factory.mktemp("ampgan-cache")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = tmp_path_factory.getbasetemp().parent / "ampgan-evaluators"
        shared.mkdir(exist_ok=True)
        (cache / "evaluators").symlink_to(shared, target_is_directory=True)
    os.environ["AMPGAN_CACHE_DIR"] = str(cache)
    yield
    if previous is None:
        os.environ.pop("AMPGAN_CACHE_DIR", None)
    else:
        os.environ["AMPGAN_CACHE_DIR"] = previous


def own_decision_cache(monkeypatch, tmp_path):
    """A speed-decision cache of the test's own (its imagined machine's answers stay there), sharing
    the session's trained evaluators (they do not depend on the machine; training one takes seconds)."""
    import os

    shared = Path(os.environ["AMPGAN_CACHE_DIR"]) / "evaluators"
    shared.mkdir(parents=True, exist_ok=True)
    own = tmp_path / "cache"
    own.mkdir()
    (own / "evaluators").symlink_to(shared, target_is_directory=True)
    monkeypatch.setenv("AMPGAN_CACHE_DIR", str(own))


@pytest.fixture(autouse=True)
def _no_model_consent_carried_between_tests(monkeypatch):
    """The model trust rule's consent (gan/registry.py) lives for a process: each test starts with none,
    as a new `ampgan` command does."""
    import ampgan.trust as registry

    monkeypatch.setattr(registry, "_CONSENTED", set())
    monkeypatch.delenv(registry.MODEL_CONSENT_ENV, raising=False)


def _mount(*args) -> bool:
    import subprocess

    try:
        return subprocess.run(["mount", *args], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _unmount(path) -> None:
    import subprocess

    subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=30)


@pytest.fixture
def read_only_view(tmp_path):
    """make(folder) -> a read-only bind mount of `folder` (EROFS on every write, root included); skips
    where this machine cannot mount."""
    mounted = []

    def make(folder):
        view = tmp_path / f"read-only-{len(mounted)}"
        view.mkdir()
        if not (
            _mount("--bind", str(folder), str(view))
            and (mounted.append(view) or True)
            and _mount("-o", "remount,ro,bind", str(view))
        ):
            pytest.skip("this machine cannot make a read-only bind mount")
        return view

    yield make
    for view in mounted:
        _unmount(view)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MiB tmpfs: writes past it fail with ENOSPC, as on a full disk; skips where it cannot be mounted."""
    disk = tmp_path / "tiny-disk"
    disk.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)):
        pytest.skip("this machine cannot mount a tmpfs")
    yield disk
    _unmount(disk)


def fill_the_disk(disk) -> None:
    """Write zeros on `disk` until it is full (it may be full already: then creating the file fails)."""
    try:
        with open(disk / "filler", "wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
    except OSError:
        pass


def writer_in_flight(path: Path) -> subprocess.Popen:
    """Another ampgan process midway through an atomic write of `path`: its temporary file is written and flushed,
    the process sleeps before the rename (kill it with SIGKILL as a crash would, or let it live)."""
    script = (
        "import sys, time\nfrom pathlib import Path\nfrom ampgan.files.atomic import write_atomically\n"
        "def write(stream):\n    stream.write(b'half'); stream.flush(); print('writing', flush=True); time.sleep(600)\n"
        "write_atomically(Path(sys.argv[1]), write)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "writing\n"
    return child


def pytest_collection_modifyitems(config, items):
    """The files whose tests are mostly `slow` first, so that under pytest-xdist (README's command, with
    --no-loadscope-reorder) the two workers start on the long files and share the short ones at the end:
    xdist's own order puts the files with the fewest tests last, and the longest file (one interrupted
    study, two minutes) has one test. The order within a file is kept."""
    slow, total = {}, {}
    for item in items:
        total[item.path] = total.get(item.path, 0) + 1
        slow[item.path] = slow.get(item.path, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow[item.path] / total[item.path])


@pytest.fixture(scope="session")
def originals(tmp_path_factory):
    """A run folder and a finished comparison, made once per session; each test damages or links out a
    copy (tests/test_damaged_files.py, tests/test_links_stay_inside.py)."""
    root = tmp_path_factory.mktemp("originals")

    def call(*args):
        try:
            main(list(args))
        except SystemExit as exit_:
            assert exit_.code in (0, None)

    call("train", *ORIGINALS_TINY, "--steps", "4", "--set", "logging.log_every=2", "--out", str(root / "run"))
    call("compare", *ORIGINALS_STUDY, "--steps", "4", "--out", str(root / "study"))
    return root
