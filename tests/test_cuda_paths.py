"""The CUDA paths, checked on the CPU: torch.cuda's answers are injected where a behaviour can be judged
without a GPU (names, capabilities, architecture lists, optimizer choice, control traffic)."""

import pytest
import torch

from ampgan.cost.catalog import load_catalog
from ampgan.errors import AmpganError
from ampgan.precisions import precision
from ampgan.system.hardware import gpu_peak_tflops, gpu_table_key
from ampgan.training import precision as precision_module
from ampgan.training.state import adam_implementation

REAL_NAMES = {
    "Tesla T4": "T4", "Tesla V100-SXM2-16GB": "V100", "Tesla P100-PCIE-16GB": "P100-PCIE",
    "Tesla P100-SXM2-16GB": "P100", "NVIDIA A100-SXM4-80GB": "A100-80GB", "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100 PCIe", "NVIDIA H200": "H200", "NVIDIA L4": "L4", "NVIDIA L40S": None,
    "NVIDIA GeForce RTX 4090": None,
}


@pytest.mark.parametrize(("name", "key"), REAL_NAMES.items())
def test_real_device_names_find_their_own_row_or_none(name, key):
    assert gpu_table_key(name) == key
    if key is None:
        assert gpu_peak_tflops(name, "fp16") is None  # unknown: the bench asks for --peak-tflops, never guesses


def test_the_price_catalog_matches_whole_names():
    catalog = load_catalog()
    hardware = lambda device: {i.hardware for i in catalog if i.matches_hardware(device)}  # noqa: E731
    assert hardware("NVIDIA L40S") == set()  # not the L4's rows
    assert hardware("NVIDIA L4") == {"L4"}
    assert hardware("NVIDIA A100-SXM4-80GB") == {"A100-80GB"}
    assert hardware("Tesla T4") == {"T4"}


@pytest.mark.parametrize(("mode", "capability", "refused"), [
    ("bf16", (7, 5), True), ("bf16", (7, 0), True), ("bf16", (8, 0), False), ("tf32", (7, 0), True),
    ("tf32", (8, 6), False), ("fp16", (6, 0), False)])
def test_modes_are_refused_by_the_device_capability(mode, capability, refused):
    # torch.cuda.is_bf16_supported() says yes on a T4 (emulation): the capability decides.
    assert (precision(mode).unavailable_reason("cuda", capability) is not None) == refused


def _fake_gpu(monkeypatch, capability, arch_list, name="Tesla V100-SXM2-16GB"):
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: arch_list)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)


@pytest.mark.parametrize(("capability", "arch_list", "runs"), [
    ((7, 0), ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], False),  # a recent wheel: no Volta kernels
    ((6, 0), ["sm_75", "sm_80", "sm_90"], False),  # the P100
    ((7, 0), ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80"], True),
    ((8, 6), ["sm_80", "sm_90"], True),  # same major version: sm_80 kernels run on sm_86
    ((9, 0), ["sm_80", "compute_80"], True),  # PTX the driver compiles
    ((10, 0), ["sm_80", "sm_90"], False),
])
def test_a_gpu_the_wheel_has_no_kernels_for_is_one_line(monkeypatch, capability, arch_list, runs):
    _fake_gpu(monkeypatch, capability, arch_list)
    device = torch.device("cuda", 0)
    if runs:
        precision_module.check_kernels_for(device)
    else:
        with pytest.raises(AmpganError, match=rf"no kernels for Tesla V100-SXM2-16GB \(sm_{capability[0]}"
                                              rf"{capability[1]}\).*install a PyTorch wheel built for"):
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



def test_the_gpu_sweep_lists_its_commands_within_eight_minutes(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_sweep.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "sweep"), "--dry-run"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("bench --model acgan-2019" in line and "fp32,tf32,bf16,fp16" in line for line in lines)
    assert any("train --resume" in line for line in lines) and any(" compare " in line for line in lines)
    total = int(lines[-1].split("at most ")[1].split()[0])
    assert total <= 480 and not (tmp_path / "sweep").exists()  # a dry run writes nothing
