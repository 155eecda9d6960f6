"""What only a CUDA GPU can show (skipped elsewhere; benchmarks/gpu_sweep.py runs these on a lent GPU)."""

import pytest
import torch

from conftest import run_cli

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


def test_train_resumes_on_cuda(tmp_path, capsys):
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "train", "--device", "cuda", "--precision", "fp16", "--steps", "4",
                           "--checkpoint-every", "2", "--quiet", "--out", str(run))
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
    config = config_from_options(precision=precision, batch_size=64, device="cuda")
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
