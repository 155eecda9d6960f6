"""The CUDA paths, checked on the CPU: torch.cuda's answers are injected where a behaviour can be judged
without a GPU (names, capabilities, architecture lists, optimizer choice, control traffic)."""

import re
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from fixtures import ORIGINALS_TINY

from ampgan.cost.catalog import load_catalog
from ampgan.errors import AmpganError
from ampgan.precisions import precision
from ampgan.system.hardware import gpu_peak_tflops, gpu_table_key
from ampgan.training import precision as precision_module
from ampgan.training.state import adam_implementation

# benchmarks/calibration/step_kernels.py: the GPU sweep's kernel timer, a script's module rather than ampgan's
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "calibration"))

REAL_NAMES = {
    "Tesla T4": "T4",
    "Tesla V100-SXM2-16GB": "V100",
    "Tesla P100-PCIE-16GB": "P100-PCIE",
    "Tesla P100-SXM2-16GB": "P100",
    "NVIDIA A100-SXM4-80GB": "A100-80GB",
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H200": "H200",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",  # not the L4
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "NVIDIA A100-PCIE-40GB": "A100 PCIe",  # the 250 W part, not the SXM row
    "NVIDIA RTX 6000 Ada Generation": "RTX 6000 Ada",  # not the Quadro RTX 6000
    "NVIDIA A10": "A10",
    "NVIDIA A10G": None,  # AWS's variant: no row (its rates were not read from a source)
    # a variant is not the board of its number: a laptop's smaller chip, a Ti's more multiprocessors
    "NVIDIA GeForce RTX 4090 Laptop GPU": None,
    "NVIDIA GeForce RTX 3080 Laptop GPU": None,
    "NVIDIA GeForce RTX 2080 with Max-Q Design": None,
    "NVIDIA GeForce RTX 3080 Ti": None,
    "NVIDIA GeForce RTX 2080 SUPER": None,
    "NVIDIA GeForce RTX 2080 Ti": "RTX 2080 Ti",
    "NVIDIA GeForce RTX 4090 D": None,  # the cut-down 4090 (114 multiprocessors, not 128)
    "Tesla V100-PCIE-16GB": None,  # the 250 W card: the V100 row is the 300 W SXM2 board
    "Tesla V100-PCIE-32GB": None,
    "NVIDIA H100 NVL": "H100 NVL",  # its own row, not the SXM H100's
}


@pytest.mark.parametrize(("name", "key"), REAL_NAMES.items())
def test_real_device_names_find_their_own_row_or_none(name, key):
    assert gpu_table_key(name) == key
    if key is None:
        assert gpu_peak_tflops(name, "fp16") is None  # unknown: the bench asks for --peak-tflops, never guesses


def test_the_price_catalog_matches_whole_names():
    catalog = load_catalog()
    hardware = lambda device: {i.hardware for i in catalog if i.matches_hardware(device)}  # noqa: E731
    assert hardware("NVIDIA L40S") == {"L40S"}  # g6e.xlarge's, not the L4's rows
    assert hardware("NVIDIA L4") == {"L4"}
    assert hardware("NVIDIA A100-SXM4-80GB") == {"A100-80GB"}
    assert hardware("Tesla T4") == {"T4"}


@pytest.mark.parametrize(
    ("mode", "capability", "refused"),
    [
        ("bf16", (7, 5), True),
        ("bf16", (7, 0), True),
        ("bf16", (8, 0), False),
        ("tf32", (7, 0), True),
        ("tf32", (8, 6), False),
        ("fp16", (6, 0), False),
    ],
)
def test_modes_are_refused_by_the_device_capability(mode, capability, refused):
    # torch.cuda.is_bf16_supported() says yes on a T4 (emulation): the capability decides.
    assert (precision(mode).unavailable_reason("cuda", capability) is not None) == refused


def _fake_gpu(monkeypatch, capability, arch_list, name="Tesla V100-SXM2-16GB"):
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: arch_list)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)


@pytest.mark.parametrize(
    ("capability", "arch_list", "runs"),
    [
        ((7, 0), ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], False),  # a recent wheel: no Volta kernels
        ((6, 0), ["sm_75", "sm_80", "sm_90"], False),  # the P100
        ((7, 0), ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80"], True),
        ((8, 6), ["sm_80", "sm_90"], True),  # same major version: sm_80 kernels run on sm_86
        ((9, 0), ["sm_80", "compute_80"], True),  # PTX the driver compiles
        ((10, 0), ["sm_80", "sm_90"], False),
    ],
)
def test_a_gpu_the_wheel_has_no_kernels_for_is_one_line(monkeypatch, capability, arch_list, runs):
    _fake_gpu(monkeypatch, capability, arch_list)
    device = torch.device("cuda", 0)
    if runs:
        precision_module.check_kernels_for(device)
    else:
        with pytest.raises(
            AmpganError,
            match=rf"no kernels for Tesla V100-SXM2-16GB \(sm_{capability[0]}"
            rf"{capability[1]}\).*install a PyTorch wheel built for",
        ):
            precision_module.check_kernels_for(device)


def test_fp16_on_cuda_steps_fused_adam_which_reads_nothing_back():
    # GradScaler with foreach Adam reads the inf flag back with .item() at every step; fused Adam takes it
    # as a device tensor.
    assert adam_implementation("cuda") == {"fused": True}
    assert adam_implementation("cpu") == {"foreach": True}


def test_control_flags_travel_as_cpu_tensors(monkeypatch):
    import ampgan.training.distributed as distributed

    seen = {}

    def all_reduce(tensor, op=None, group=None):
        seen["device"], seen["group"] = tensor.device.type, group
        tensor.fill_(1.0)

    monkeypatch.setattr(distributed, "world", lambda: distributed.World(rank=0, size=2, local_rank=0, local_size=2))
    monkeypatch.setattr(distributed.dist, "all_reduce", all_reduce)
    monkeypatch.setattr(distributed, "_control_group", "gloo-group")
    assert distributed.any_rank([False, True]) == [True, True]
    assert seen == {"device": "cpu", "group": "gloo-group"}


# --- Resume on other hardware: what a checkpoint's RNG states can and cannot continue ---------------------


def _fake_cuda_generators(monkeypatch, count):
    """`count` visible GPUs whose global generators hold 16-byte Philox states (seed, offset)."""
    states = {index: torch.full((16,), index, dtype=torch.uint8) for index in range(count)}
    restored = {}

    def get_rng_state(device="cuda"):
        index = torch.device(device).index or 0
        if index >= count:
            raise IndexError(f"no GPU {index}")
        return states[index].clone()

    def set_rng_state(state, device="cuda"):
        restored[torch.device(device).index or 0] = state.clone()

    monkeypatch.setattr(torch.cuda, "get_rng_state", get_rng_state)
    monkeypatch.setattr(torch.cuda, "set_rng_state", set_rng_state)
    return restored


def test_only_the_training_gpus_generator_is_saved_and_fewer_gpus_still_restore(monkeypatch):
    from ampgan.training.state import capture_global_rngs, restore_global_rngs

    _fake_cuda_generators(monkeypatch, count=4)
    saved = capture_global_rngs(torch.device("cuda", 3))
    assert saved["device"] == "cuda" and len(saved["torch_cuda"]) == 1 and int(saved["torch_cuda"][0][0]) == 3
    restored = _fake_cuda_generators(monkeypatch, count=1)  # resumed where one GPU is visible: cuda:0
    assert restore_global_rngs(saved, torch.device("cuda", 0)) == []
    assert int(restored[0][0]) == 3  # the saving process's own generator, onto this process's GPU
    # A checkpoint of the previous format held every visible GPU's state: this device's index is taken when
    # there is one, and its absence is said, never an IndexError.
    old = {k: v for k, v in saved.items() if k != "device"} | {"torch_cuda": [torch.zeros(16, dtype=torch.uint8)] * 2}
    assert restore_global_rngs(old, torch.device("cuda", 0)) == []
    assert restore_global_rngs(old | {"torch_cuda": []}, torch.device("cuda", 0)) != []


def test_a_cpu_checkpoint_on_a_gpu_restores_what_is_the_same_kind(monkeypatch):
    import random

    import numpy as np

    from ampgan.training.state import capture_global_rngs, restore_global_rngs, set_generator_state

    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    saved = capture_global_rngs(torch.device("cpu"))
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    restored = _fake_cuda_generators(monkeypatch, count=1)
    not_restored = restore_global_rngs(saved, torch.device("cuda", 0))
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected  # CPU-side: continued
    assert restored == {} and "cuda:0 global generator" in not_restored[0] and "saved on cpu" in not_restored[0]
    # The noise generator: a CUDA state (16 bytes) cannot continue a CPU generator (5056), nor the reverse.
    generator = torch.Generator().manual_seed(1)
    before = generator.get_state()
    assert not set_generator_state(generator, torch.zeros(16, dtype=torch.uint8))
    assert torch.equal(generator.get_state(), before)
    assert set_generator_state(generator, torch.Generator().manual_seed(2).get_state())


def test_each_rank_restores_its_own_rngs_and_another_world_takes_rank_0s():
    from ampgan.training.loop import saved_rngs_for

    rngs = [{"torch_cpu": torch.full((1,), rank)} for rank in range(2)]
    saved = {"rng": rngs[0], "progress": {"data": {"world_size": 2}, "rngs": rngs}}
    assert saved_rngs_for(saved, 1, 2) is rngs[1]
    assert saved_rngs_for(saved, 0, 1) is rngs[0] and saved_rngs_for(saved, 2, 3) is rngs[0]
    older = {"rng": rngs[0], "progress": {"data": {"world_size": 2}}}  # before per-rank states
    assert saved_rngs_for(older, 1, 2) is rngs[0]


RESUME_TINY = [*ORIGINALS_TINY, "--set", "logging.log_every=2", "--set", "logging.sample_every=1000"]


def test_a_run_saved_on_a_gpu_resumes_on_the_cpu_and_says_what_it_reseeded(tmp_path, capsys):
    from conftest import run_cli

    from ampgan.runs.checkpoint import latest_checkpoint, save_checkpoint

    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", *RESUME_TINY, "--precision", "fp32", "--steps", "2", "--out", str(run))
    assert code == 0, err
    path = latest_checkpoint(run)
    payload = torch.load(path, weights_only=True)
    cuda_state = torch.zeros(16, dtype=torch.uint8)  # what a CUDA generator's get_state() returns
    payload["step_generator"], payload["step_generator_device"] = cuda_state, "cuda"
    payload["progress"] |= {"step_generators": [cuda_state], "step_generator_device": "cuda"}
    payload["progress"]["rngs"] = [payload["rng"] | {"device": "cuda", "torch_cuda": [cuda_state]}]
    save_checkpoint(path, {k: v for k, v in payload.items() if k != "format_version"})
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "4", "--quiet")
    assert code == 0, err
    assert "warning: resumed with everything but the noise generator (saved on cuda: re-seeded" in err
    assert err.count("\n") == 1


def test_a_resume_whose_budget_is_spent_says_so_instead_of_training_nothing(tmp_path, capsys):
    from conftest import run_cli

    run = tmp_path / "run"
    assert run_cli(capsys, "train", *RESUME_TINY, "--steps", "2", "--out", str(run))[0] == 0
    # The time budget counts the whole run's training: 1 ms is spent already.
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--time-budget", "0.001s", "--quiet")
    assert code == 2 and re.search(r"has already trained \d+ s of training, all of the budget", err)
    assert "resume with a larger --steps or --time-budget" in err
    assert err.count("\n") == 1


# --- Backend switches: fp32 is strict FP32, and every switch comes back ---------------------------------


def _switches():
    return precision_module.snapshot_backend_switches()


@pytest.mark.parametrize(("mode", "tf32"), [("fp32", False), ("tf32", True), ("bf16", False)])
def test_backend_settings_set_every_tf32_switch_and_restore_them(monkeypatch, mode, tf32):
    monkeypatch.delenv(precision_module.DETERMINISTIC_ENV, raising=False)
    torch.set_float32_matmul_precision("medium")  # a caller's setting: oneDNN may then run fp32 matmuls in bf16
    torch.backends.cudnn.benchmark = False
    before = _switches()
    try:
        policy = precision_module.PrecisionPolicy(mode, torch.device("cuda", 0))
        with pytest.raises(RuntimeError, match="inside"), policy.backend_settings():
            assert torch.get_float32_matmul_precision() == ("high" if tf32 else "highest")
            # cuDNN's convolutions (TF32 by default) and cuBLAS's matrix products
            assert torch.backends.cudnn.allow_tf32 == tf32 and torch.backends.cuda.matmul.allow_tf32 == tf32
            assert torch.backends.cudnn.benchmark and not torch.backends.cudnn.deterministic
            raise RuntimeError("inside")  # restored whatever happens in the block
        assert _switches() == before
    finally:
        torch.set_float32_matmul_precision("highest")


def _tf32_read_back() -> dict:
    """Every TF32 switch read as a user would, each through its own API (legacy flags, fp32_precision where this
    torch has it): reading a legacy flag that disagrees with its settings raises on torch 2.9 and later."""
    backends = torch.backends
    read = {
        "matmul.allow_tf32": backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if hasattr(backends.cudnn, "conv") and hasattr(backends.cudnn.conv, "fp32_precision"):
        read |= {
            "matmul": backends.cuda.matmul.fp32_precision,
            "conv": backends.cudnn.conv.fp32_precision,
            "rnn": backends.cudnn.rnn.fp32_precision,
        }
    return read


@pytest.mark.parametrize(("outer", "inner"), [("fp32", None), ("bf16", None), ("fp16", "tf32"), ("tf32", "fp32")])
def test_tf32_switches_read_back_alike_through_both_apis_inside_and_after(monkeypatch, outer, inner):
    """The legacy flags and the fp32_precision settings agree inside a policy's backend_settings() (nested too,
    as the doctor nests them) and read back unchanged after: once, cuDNN's legacy flag was left False under conv
    and rnn settings of "tf32", and reading it raised."""
    monkeypatch.delenv(precision_module.DETERMINISTIC_ENV, raising=False)
    before = _tf32_read_back()
    try:
        for mode in (outer, inner):
            if mode is None:
                continue
            tf32 = mode == "tf32"
            with precision_module.PrecisionPolicy(mode, torch.device("cuda", 0)).backend_settings():
                inside = _tf32_read_back()
                assert inside["matmul.allow_tf32"] == inside["cudnn.allow_tf32"] == tf32
                if "conv" in inside:
                    assert (inside["matmul"] == "tf32") == ((inside["conv"], inside["rnn"]) == ("tf32", "tf32")) == tf32
                if inner is not None and mode == outer:
                    with precision_module.PrecisionPolicy(inner, torch.device("cuda", 0)).backend_settings():
                        assert _tf32_read_back()["cudnn.allow_tf32"] == (inner == "tf32")
                    assert _tf32_read_back() == inside
            assert _tf32_read_back() == before
    finally:  # the defaults, whatever happened: later tests in this process must read them
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True
        torch.set_float32_matmul_precision("highest")


def test_deterministic_runs_switch_autotuning_off_on_cuda(monkeypatch):
    monkeypatch.setenv(precision_module.DETERMINISTIC_ENV, "1")
    before = _switches()
    with precision_module.PrecisionPolicy("fp16", torch.device("cuda", 0)).backend_settings():
        assert not torch.backends.cudnn.benchmark and torch.backends.cudnn.deterministic
        assert torch.are_deterministic_algorithms_enabled()
    assert _switches() == before and not torch.are_deterministic_algorithms_enabled()


# --- Out of memory, compile, launch ------------------------------------------------------------------------


def test_out_of_memory_names_a_batch_size_that_fits(monkeypatch):
    from ampgan.training.out_of_memory import batch_that_fits, out_of_memory_error

    assert batch_that_fits(4096, needed_bytes=200 * 2**30, total_bytes=141 * 2**30) == 2048
    assert batch_that_fits(4096, needed_bytes=900 * 2**30, total_bytes=80 * 2**30) == 256
    assert batch_that_fits(8, needed_bytes=10**15, total_bytes=10**9) == 1
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 70 * 2**30)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device=None: type("Props", (), {"total_memory": 80 * 2**30})()
    )
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100-SXM4-80GB")
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity ...")
    message = str(out_of_memory_error(error, 2048, torch.device("cuda", 0), "a training step"))
    assert message == (
        "a training step at batch 2048 ran out of memory on NVIDIA A100-SXM4-80GB (80.0 GiB): it had "
        "asked for at least 90.0 GiB when it failed; try --batch-size 1024 (or fewer images per process)"
    )


def test_out_of_memory_in_train_is_one_line(tmp_path, capsys, monkeypatch):
    from conftest import run_cli

    import ampgan.training.loop as loop_module

    def step_out_of_memory(state, next_batch):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(loop_module, "train_step", step_out_of_memory)
    code, _, err = run_cli(capsys, "train", *RESUME_TINY, "--steps", "2", "--out", str(tmp_path / "run"))
    assert code == 2 and err.count("\n") == 1
    assert "a training step at batch 8 ran out of memory on the cpu: try --batch-size 4" in err


def test_out_of_memory_where_no_step_catches_it_is_one_line_not_the_models_fault(tmp_path, capsys, monkeypatch):
    """Memory running out while planning (the timed steps that choose threads and formats) or while a model is
    built (ulimit -v, a small machine) is one line naming memory, never a traceback or 'fix the model function'."""
    from conftest import run_cli

    import ampgan.speed.planned_run as planned_run

    allocator = "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried"
    model = tmp_path / "big.py"
    model.write_text(f"def build(data, width=8, z_dim=16):\n    raise RuntimeError({allocator!r})\n")
    code, _, err = run_cli(capsys, "train", *RESUME_TINY, "--model", f"{model}:build", "--out", str(tmp_path / "a"))
    assert code == 2 and err.count("\n") == 1 and "fix the model" not in err, err
    assert err.startswith("error: ran out of memory ([enforce fail") and "--batch-size" in err, err
    for raised in (MemoryError(), RuntimeError(allocator), torch.OutOfMemoryError("CUDA out of memory.")):
        monkeypatch.setattr(planned_run, "plan_run", lambda *a, raised=raised, **k: (_ for _ in ()).throw(raised))
        code, _, err = run_cli(capsys, "train", *RESUME_TINY, "--steps", "2", "--out", str(tmp_path / "b"))
        assert code == 2 and err.count("\n") == 1 and "ran out of memory (" in err, err
        assert not (tmp_path / "b").exists()
    monkeypatch.setattr(planned_run, "plan_run", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("a bug")))
    with pytest.raises(RuntimeError, match="a bug"):  # any other RuntimeError keeps its traceback
        run_cli(capsys, "train", *RESUME_TINY, "--steps", "2", "--out", str(tmp_path / "c"))


def test_a_failure_on_one_rank_is_every_ranks_result_before_any_collective(monkeypatch):
    from conftest import tiny_config

    import ampgan.bench.twin as twin
    from ampgan.bench.spec import BenchSpec
    from ampgan.data import load_dataset
    from ampgan.training.distributed import World

    # This rank's trial step runs (really, alone); rank 1's ran out of memory: both record it.
    gathered = []
    monkeypatch.setattr(twin, "world", lambda: World(rank=0, size=2, local_rank=0, local_size=2))
    monkeypatch.setattr(
        twin, "gather_objects", lambda value: gathered.append(value) or [value, ("oom", "CUDA out of memory.")]
    )
    spec = BenchSpec(base=tiny_config(), batch_sizes=(4,), precisions=("fp32",), warmup=1, steps=2)
    dataset = load_dataset(spec.base.data, seed=0)
    result = twin.agreed_local_trial(spec, "fp32", 4, dataset, torch.device("cpu"))
    assert gathered == [None] and result.status == "oom" and result.reason == "rank 1: CUDA out of memory."
    monkeypatch.setattr(twin, "gather_objects", lambda value: [value, None])
    assert twin.agreed_local_trial(spec, "fp32", 4, dataset, torch.device("cpu")) is None


@pytest.mark.parametrize(
    ("capability", "backend", "refused"),
    [((6, 0), "inductor", True), ((7, 0), "inductor", False), ((6, 1), "eager", False)],
)
def test_compile_below_sm70_is_one_line(monkeypatch, capability, backend, refused):
    from ampgan.training.state import check_compile_runs_on

    _fake_gpu(monkeypatch, capability, ["sm_60", "sm_70"], name="Tesla P100-PCIE-16GB")
    monkeypatch.setenv("AMPGAN_COMPILE_BACKEND", backend)
    if refused:
        with pytest.raises(
            AmpganError,
            match=r"^--compile needs a GPU of compute capability 7.0 or newer .* Tesla "
            r"P100-PCIE-16GB is sm_60: drop --compile",
        ):
            check_compile_runs_on(torch.device("cuda", 0))
    else:
        check_compile_runs_on(torch.device("cuda", 0))
    check_compile_runs_on(torch.device("cpu"))  # CPUs: inductor's own C++ path, nothing to refuse here


@pytest.mark.parametrize(
    ("local_rank", "local_size", "visible", "own", "index"),
    [
        (3, 4, 4, False, 3),
        (3, 4, 8, False, 3),
        (3, 4, 1, True, 0),  # a scheduler showed each process its own GPU
        (0, 1, 1, False, 0),
        (3, 4, 1, False, None),  # four processes, one GPU they all see: NCCL's "Duplicate GPU"
        (0, 4, 1, False, None),
        (3, 4, 2, False, None),
        (3, 4, 2, True, None),
        (0, 2, 0, True, None),
    ],
)
def test_each_process_gets_a_gpu_of_its_own_or_is_refused(local_rank, local_size, visible, own, index):
    from ampgan.training.distributed import device_index_for

    if index is None:
        with pytest.raises(AmpganError, match="GPU") as refused:
            device_index_for(local_rank, local_size, visible, own)
        fix = "--device cpu" if visible else "CUDA_VISIBLE_DEVICES"
        assert fix in str(refused.value) and "\n" not in str(refused.value)
        if visible:
            assert f"torchrun --nproc-per-node {visible}" in str(refused.value)
    else:
        assert device_index_for(local_rank, local_size, visible, own) == index


@pytest.mark.parametrize(
    ("environment", "local_rank", "refused"),
    [
        ({"TORCHELASTIC_RUN_ID": "r"}, 2, True),  # torchrun --nproc-per-node 4 on a one-GPU machine
        ({"TORCHELASTIC_RUN_ID": "r"}, 0, True),
        ({"TORCHELASTIC_RUN_ID": "r", "CUDA_VISIBLE_DEVICES": "0"}, 2, True),  # one GPU, the same for all
        ({"TORCHELASTIC_RUN_ID": "r", "CUDA_VISIBLE_DEVICES": "3"}, 0, False),  # torchrun --virtual-local-rank
        ({}, 2, False),  # started by a scheduler that set CUDA_VISIBLE_DEVICES per process
    ],
)
def test_more_processes_than_gpus_are_refused_before_the_process_group(monkeypatch, environment, local_rank, refused):
    """Four ranks on a machine whose one GPU each of them sees (torch.cuda's answers injected): one line
    naming the fix, before any process group (whose NCCL would fail at the first collective, reported by
    every other rank as lost contact)."""
    import ampgan.training.distributed as distributed

    for name in ("TORCHELASTIC_RUN_ID", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    rendezvous = {"RANK": str(local_rank), "WORLD_SIZE": "4", "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": "4"}
    for name, value in (rendezvous | {"MASTER_ADDR": "localhost", "MASTER_PORT": "1"} | environment).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    chosen = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    joined = []
    monkeypatch.setattr(distributed.dist, "is_initialized", lambda: False)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda **kwargs: joined.append(kwargs))
    monkeypatch.setattr(distributed.dist, "new_group", lambda **kwargs: None)
    monkeypatch.setattr(distributed, "_world", distributed.World())
    if refused:
        with pytest.raises(
            AmpganError, match=r"^4 processes on this machine but 1 GPU visible to them: .*--device cpu$"
        ):
            distributed.join_process_group("auto")
        assert joined == [] and chosen == []
    else:
        assert distributed.join_process_group("auto") == torch.device("cuda", 0)
        assert joined[0]["backend"] == "nccl" and chosen == [torch.device("cuda", 0)]


@pytest.mark.parametrize(
    ("name", "precision", "peak"),
    [
        ("NVIDIA H200 NVL", "bf16", 835.5),
        ("NVIDIA H100 NVL", "fp16", 835.5),
        ("NVIDIA H200", "bf16", 989.5),
        ("NVIDIA H200 MIG 1g.18gb", "bf16", 989.5 / 7),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "tf32", 156 * 3 / 7),
        ("NVIDIA H100 80GB HBM3 MIG 7g.80gb", "fp32", 67.0),
    ],
)
def test_mig_slices_and_nvl_parts_get_their_own_peaks(name, precision, peak):
    assert gpu_peak_tflops(name, precision) == pytest.approx(peak)


def test_the_shuffle_order_reaches_the_gpu_through_pinned_memory(monkeypatch):
    from ampgan.data.batches import copy_to_device

    calls = []
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: calls.append("pin") or self)
    real_to = torch.Tensor.to
    monkeypatch.setattr(
        torch.Tensor,
        "to",
        lambda self, device, **kwargs: (
            calls.append((str(device), kwargs.get("non_blocking", False))) or real_to(self, "cpu")
        ),
    )
    copy_to_device(torch.arange(4), torch.device("cuda", 0))
    assert calls == ["pin", ("cuda:0", True)]


def test_too_slow_is_judged_after_the_autotuning_step():
    from ampgan.bench.deadline import warm_up
    from ampgan.bench.results import ConfigResult
    from ampgan.bench.spec import BenchSpec

    class Contender:  # a configuration whose step times are given
        def __init__(self, times):
            self.times, self.result = iter(times), ConfigResult(batch_size=1024, precision="bf16")

        def timed_step(self):
            return next(self.times)

    spec = BenchSpec(warmup=1, steps=5, max_seconds=3.0)
    autotuning = Contender([2.0, 0.05])  # the first step selects cuDNN's kernels
    warm_up(spec, autotuning)
    assert autotuning.result.status == "ok" and autotuning.result.warmup_s == [2.0, 0.05]
    hiccup = Contender([2.0, 1.0, 0.05])  # one slow step after the first: a neighbour's burst, not the step
    warm_up(spec, hiccup)
    assert hiccup.result.status == "ok" and hiccup.result.warmup_s == [2.0, 1.0, 0.05]
    slow = Contender([2.0, 1.0, 1.1])  # confirmed by the next
    warm_up(spec, slow)
    assert slow.result.status == "too_slow" and "2 steps in a row after the first (which selects kernels) took " in (
        slow.result.reason
    )
    assert "1.00 s and 1.10 s" in slow.result.reason
    fast = Contender([0.1])
    warm_up(spec, fast)
    assert fast.result.warmup_s == [0.1]  # a first step within the budget is judged at once


def test_a_layout_tie_on_a_launch_bound_gpu_is_capped_in_rounds():
    from ampgan.speed.layout import LAYOUT_RULE
    from ampgan.speed.rounds import capped_for

    assert capped_for(LAYOUT_RULE, 0.006).max_seconds == 2.0  # 3 ms steps: 2 s, not 20 s, for a tie
    assert capped_for(LAYOUT_RULE, 0.1).max_seconds == pytest.approx(6.0)
    assert capped_for(LAYOUT_RULE, 1.0).max_seconds == 20.0


# --- The calibration table: aten's matrix ops as the projection's rows ---------------------------------------


def _rows_of(run):
    from step_kernels import is_matrix_call, kernel_rows

    from ampgan.bench.attainable import CallRecorder

    recorder = CallRecorder(is_matrix_call)
    with recorder:
        run()
    return [row.as_dict() for row in kernel_rows(recorder.calls, tf32=False)[0]]


def test_a_linear_layer_is_gemm_rows_with_their_transposes():
    layer = torch.nn.Linear(24, 16)
    x = torch.randn(8, 24, requires_grad=True)
    rows = _rows_of(lambda: layer(x).sum().backward())
    # addmm(bias, x (8 x 24), W^T: W is stored (16, 24), so B is column-major) written as cuBLAS's call, as
    # DeepBench's rows and a traced step's kernels are (kernels.cublas_call): C^T (16 x 8) = W x^T, A transposed
    forward = rows[0]
    assert forward == {
        "op": "gemm",
        "m": 16,
        "n": 8,
        "k": 24,
        "transpose_a": 1,
        "transpose_b": 0,
        "batch": "",
        "precision": "fp32",
    }
    assert {(r["m"], r["n"], r["k"]) for r in rows[1:]} == {(24, 8, 16), (24, 16, 8)}  # dX = dY W, dW = dY^T X
    # the same kernel the projection names for the traced step's forward product
    from ampgan.projection.step_model import kernel_of

    traced = kernel_of("gemm", (8, 16, 24, 0, 1), "addmm")
    assert (traced.m, traced.n, traced.k, traced.transpose_a, traced.transpose_b) == (16, 8, 24, True, False)


def test_a_transposed_convolution_is_the_data_gradient_of_the_direct_one():
    up = torch.nn.ConvTranspose2d(8, 4, kernel_size=4, stride=2, padding=1)  # (2, 8, 7, 7) -> (2, 4, 14, 14)
    x = torch.randn(2, 8, 7, 7, requires_grad=True)
    rows = _rows_of(lambda: up(x).sum().backward())
    geometry = {
        "batch": 2,
        "c": 4,
        "h": 14,
        "w": 14,
        "out_channels": 8,
        "r": 4,
        "s": 4,
        "pad_h": 1,
        "pad_w": 1,
        "stride_h": 2,
        "stride_w": 2,
        "precision": "fp32",
    }
    assert rows == [geometry | {"op": op} for op in ("conv_bwd_data", "conv_fwd", "conv_bwd_weight")]
    direct = torch.nn.Conv2d(4, 8, kernel_size=4, stride=2, padding=1)  # the direct convolution it stands for
    y = torch.randn(2, 4, 14, 14, requires_grad=True)
    assert _rows_of(lambda: direct(y).sum().backward()) == [
        geometry | {"op": op} for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight")
    ]


def test_successive_timed_calls_of_a_calibration_kernel_read_inputs_out_of_the_cache(monkeypatch):
    """measure_kernels on a real (tiny) step: each row's timed calls take their inputs in turn from sets that
    together exceed the cache (injected: 1 MB), so no call reads what the call before it left in L2."""
    import step_kernels as calibration
    from conftest import tiny_config

    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    config = tiny_config(batch_size=4)
    timer = StepTimer(config, load_dataset(config.data, seed=0), torch.device("cpu"), across_ranks=False)
    seen: dict[int, list[tuple]] = {}
    real_rows = calibration.kernel_rows

    def recorded_rows(calls, tf32):
        rows, skipped = real_rows(calls, tf32)

        def recording(index, func):
            def run(*args, **kwargs):
                tensors = [a for a in args if isinstance(a, torch.Tensor)]
                seen.setdefault(index, []).append(
                    (tuple(t.data_ptr() for t in tensors), sum(t.nbytes for t in tensors))
                )
                return func(*args, **kwargs)

            return run

        return [replace(row, func=recording(i, row.func)) for i, row in enumerate(rows)], skipped

    monkeypatch.setattr(calibration, "kernel_rows", recorded_rows)
    monkeypatch.setattr(calibration, "cache_bytes", lambda device: 2**20)
    rows, _ = calibration.measure_kernels(timer, "test", tf32=False, repeats=6)
    assert rows and len(seen) == len(rows) and all(r["ms"] > 0 for r in rows)
    for calls in seen.values():
        pointers = [p for p, _ in calls]
        assert len(calls) == 6 and all(a != b for a, b in zip(pointers, pointers[1:]))  # never the last call's
        sets, size = len(set(pointers)), calls[0][1]
        assert sets == 6 or (sets - 1) * size >= 2**20  # all six apart, or enough to push a set out between turns


def test_a_calibration_kernel_rotates_among_as_few_sets_as_push_one_out_of_the_cache():
    from step_kernels import KernelRow, rotating_calls

    from ampgan.bench.attainable import TensorSpec

    spec = TensorSpec((16, 16), (16, 1), torch.float32, torch.device("cpu"))  # 1 KiB
    row = KernelRow((("op", "gemm"),), torch.mm, (spec, spec), {})
    assert rotating_calls(row, cache=8 * 2**10, calls=100)[1] == 1 + 4  # 4 other sets of 2 KiB fill 8 KiB
    assert rotating_calls(row, cache=2**30, calls=12)[1] == 12  # no more sets than calls
    assert rotating_calls(row, cache=0, calls=12)[1] == 1
    run, count = rotating_calls(row, cache=8 * 2**10, calls=100)
    results = [run() for _ in range(count + 1)]
    assert not torch.equal(results[0], results[1]) and torch.equal(results[0], results[count])  # turn by turn


def test_the_cache_a_calibration_kernel_must_leave_is_the_devices_own(monkeypatch):
    from step_kernels import DEFAULT_CACHE_BYTES, cache_bytes

    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace(L2_cache_size=50 * 2**20)
    )
    assert cache_bytes(torch.device("cuda", 0)) == 50 * 2**20  # the H100's and H200's L2
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device=None: SimpleNamespace())
    assert cache_bytes(torch.device("cuda", 0)) == DEFAULT_CACHE_BYTES
    assert cache_bytes(torch.device("cpu")) >= 2**20  # a CPU's last level (sysfs), or the default


def test_grouped_convolutions_are_counted_apart_not_dropped():
    from step_kernels import is_matrix_call, kernel_rows

    from ampgan.bench.attainable import CallRecorder

    grouped = torch.nn.Conv2d(4, 4, 3, groups=2)
    recorder = CallRecorder(is_matrix_call)
    with recorder:
        grouped(torch.randn(1, 4, 8, 8))
    rows, skipped = kernel_rows(recorder.calls, tf32=True)
    assert rows == [] and "groups 2" in skipped[0]
