"""What only a CUDA GPU can show (skipped elsewhere; benchmarks/gpu_sweep.py runs this file alone on a lent GPU).

Synthetic data throughout: the lent machine has no scikit-learn (the digits dataset's source). Every training
here names its memory format and compile setting (--no-channels-last --no-compile): on a fresh machine nothing
is cached, and a decision measured in a test would spend the sweep's seconds on what it does not test. A
compiled step is the sweep's bench-compiled step, not a test here: inductor's first compile takes longer than
the sweep gives these tests."""

import sys
from pathlib import Path

import pytest
import torch
from conftest import run_cli

# benchmarks/calibration/step_kernels.py: the GPU sweep's kernel timer, a script's module rather than ampgan's
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "calibration"))

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def test_train_resumes_on_cuda(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(
        capsys,
        "train",
        "--device",
        "cuda",
        "--precision",
        "fp16",
        "--dataset",
        "synthetic",
        "--steps",
        "4",
        "--checkpoint-every",
        "2",
        "--no-compile",
        "--no-channels-last",
        "--quiet",
        "--out",
        str(run),
    )
    assert code == 0, err
    code, _, err = run_cli(capsys, "train", "--resume", str(run), "--steps", "8", "--quiet")
    assert code == 0, err


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_one_mixed_step_reads_nothing_back_to_the_host(precision):
    from ampgan.config import config_from_options
    from ampgan.speed.step_timer import StepTimer
    from ampgan.training.step import train_step

    if precision == "bf16" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bf16 needs sm_80")
    config = config_from_options(dataset="synthetic", precision=precision, batch_size=64, device="cuda")
    from ampgan.data import load_dataset

    timer = StepTimer(config, load_dataset(config.data, seed=0), torch.device("cuda"))
    for _ in range(3):
        timer()  # warm-up: cuDNN's autotuner, the allocator
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        train_step(timer.state, timer.resident_batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_fp32_is_strict_and_tf32_is_not_and_every_switch_comes_back():
    """Strict fp32 holds a convolution to 1e-5 of float64. Only TF32 can miss that by design, so the check must
    not let another algorithm miss it: cuDNN's autotuner is off and its algorithms deterministic, and the
    convolution is the networks' own kind (4x4, stride 2), which no Winograd or FFT algorithm computes (both
    need stride 1). The products reduce over 4096 terms: TF32's 10-bit inputs err by ~3e-4 of the largest
    output, fp32's by ~4e-7 (both emulated in float64 on a CPU for these very tensors)."""
    from ampgan.training.precision import PrecisionPolicy, snapshot_backend_switches

    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 needs sm_80")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(32, 256, 16, 16, generator=generator)
    w = torch.randn(256, 256, 4, 4, generator=generator)
    exact = torch.nn.functional.conv2d(x.double(), w.double(), stride=2, padding=1)  # (32, 256, 8, 8)
    a, b = x.reshape(32, -1)[:, :4096], w.reshape(256, -1)  # (32, 4096) @ (4096, 256)
    exact_product = a.double() @ b.double().T
    before = snapshot_backend_switches()
    autotuning = torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    errors = {}
    try:
        for mode in ("fp32", "tf32"):
            with PrecisionPolicy(mode, torch.device("cuda")).backend_settings():
                out = torch.nn.functional.conv2d(x.cuda(), w.cuda(), stride=2, padding=1).double().cpu()
                product = (a.cuda() @ b.cuda().T).double().cpu()
            errors[mode] = ((out - exact).abs().max() / exact.abs().max()).item()
            errors[mode + " matmul"] = ((product - exact_product).abs().max() / exact_product.abs().max()).item()
    finally:
        torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = autotuning
    assert errors["fp32"] < 1e-5 and errors["tf32"] > 1e-4, errors  # TF32 keeps 10 mantissa bits
    assert errors["fp32 matmul"] < 1e-5 and errors["tf32 matmul"] > 1e-4, errors
    assert snapshot_backend_switches() == before


def test_deterministic_resume_repeats_the_straight_run_on_cuda(tmp_path, capsys, monkeypatch):
    from ampgan.runs.checkpoint import latest_checkpoint

    monkeypatch.setenv("AMPGAN_DETERMINISTIC", "1")
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    args = [
        "--device",
        "cuda",
        "--precision",
        "fp16",
        "--dataset",
        "synthetic",
        "--width",
        "16",
        "--batch-size",
        "64",
        "--no-compile",
        "--no-channels-last",
        "--quiet",
        "--set",
        "logging.log_every=2",
    ]
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    assert run_cli(capsys, "train", *args, "--steps", "6", "--out", str(straight))[0] == 0
    assert run_cli(capsys, "train", *args, "--steps", "3", "--out", str(halves))[0] == 0
    code, _, err = run_cli(capsys, "train", "--resume", str(halves), "--steps", "6", "--quiet")
    assert code == 0, err
    a = torch.load(latest_checkpoint(straight), weights_only=True)
    b = torch.load(latest_checkpoint(halves), weights_only=True)
    for network in ("generator", "discriminator"):
        for name, tensor in a[network].items():
            assert torch.equal(tensor, b[network][name]), f"{network}.{name} differs after resume"


def test_out_of_memory_on_cuda_is_one_line_with_a_batch_size(tmp_path, capsys):
    from ampgan.training.out_of_memory import out_of_memory_error

    total = torch.cuda.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError) as caught:
        torch.empty(2 * total, dtype=torch.uint8, device="cuda")
    message = str(out_of_memory_error(caught.value, 4096, torch.device("cuda", 0), "a training step"))
    assert "ran out of memory on" in message and "try --batch-size" in message and "\n" not in message
    code, _, err = run_cli(
        capsys,
        "train",
        "--device",
        "cuda",
        "--precision",
        "fp16",
        "--dataset",
        "synthetic",
        "--batch-size",
        str(2**22),
        "--steps",
        "1",
        "--no-compile",
        "--no-channels-last",
        "--quiet",
        "--out",
        str(tmp_path / "huge"),
    )
    assert code == 2 and err.count("\n") == 1 and "batch" in err, err


def test_channels_last_runs_on_cudnn():
    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    config = config_from_options(
        dataset="synthetic", precision="fp16", batch_size=64, device="cuda", channels_last=True, compile=False
    )
    timer = StepTimer(config, load_dataset(config.data, seed=0), torch.device("cuda"))
    assert all(timer() > 0 for _ in range(2))
    weight = next(p for p in timer.state.discriminator.parameters() if p.dim() == 4)
    assert weight.is_contiguous(memory_format=torch.channels_last)


def test_the_calibration_times_cuda_kernels_with_events():
    from step_kernels import COLUMNS, measure_kernels

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.speed.step_timer import StepTimer

    config = config_from_options(
        dataset="synthetic",
        precision="bf16" if torch.cuda.is_bf16_supported() else "fp16",
        batch_size=64,
        device="cuda",
        width=16,
        compile=False,
        channels_last=False,
    )
    timer = StepTimer(config, load_dataset(config.data, seed=0), torch.device("cuda"))
    timer()
    rows, _ = measure_kernels(timer, "test", tf32=False)
    assert {r["op"] for r in rows} >= {"gemm", "conv_fwd", "conv_bwd_data", "conv_bwd_weight"}
    assert all(r["ms"] > 0 and set(r) <= set(COLUMNS) for r in rows)
