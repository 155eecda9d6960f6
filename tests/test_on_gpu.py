"""What only a CUDA GPU can show (skipped elsewhere; benchmarks/gpu_sweep.py runs these on a lent GPU).

Synthetic data throughout: the lent machine has no scikit-learn (the digits dataset's source). A compiled
step is the sweep's bench-compiled step, not a test here: inductor's first compile takes longer than the
sweep gives these tests."""

import pytest
import torch
from conftest import run_cli

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
    from ampgan.training.precision import PrecisionPolicy, snapshot_backend_switches

    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 needs sm_80")
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, 16, 16, generator=generator)
    w = torch.randn(256, 256, 3, 3, generator=generator)
    exact = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    before = snapshot_backend_switches()
    errors = {}
    for mode in ("fp32", "tf32"):
        with PrecisionPolicy(mode, torch.device("cuda")).backend_settings():
            out = torch.nn.functional.conv2d(x.cuda(), w.cuda(), padding=1).double().cpu()
            product = (x.reshape(64, -1)[:, :256].cuda() @ w.reshape(256, -1)[:, :256].cuda()).double().cpu()
        errors[mode] = ((out - exact).abs().max() / exact.abs().max()).item()
        errors[mode + " matmul"] = (
            (product - x.reshape(64, -1)[:, :256].double() @ w.reshape(256, -1)[:, :256].double()).abs().max()
        ).item()
    assert errors["fp32"] < 1e-5 and errors["tf32"] > 1e-4, errors  # TF32 keeps 10 mantissa bits
    assert errors["fp32 matmul"] < errors["tf32 matmul"], errors
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
    from ampgan.bench.calibration import COLUMNS, measure_kernels
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
