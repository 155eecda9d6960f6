"""What machine is this? The facts every printed figure is stamped with."""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field

import torch

# CPU flags that decide which reduced-precision matrix kernels exist (from /proc/cpuinfo).
MATRIX_FLAGS = ("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_tile", "avx512_vnni")


@dataclass(frozen=True)
class Hardware:
    device_type: str  # "cpu" or "cuda"
    name: str  # CPU model or GPU name
    cpu_model: str
    cpu_cores: int
    torch_threads: int
    cpu_flags: tuple[str, ...] = ()
    cuda_capability: tuple[int, int] | None = None
    cuda_memory_gib: float | None = None
    extra: dict = field(default_factory=dict)

    def summary(self) -> str:
        if self.device_type == "cuda":
            major, minor = self.cuda_capability or (0, 0)
            return f"{self.name} (sm_{major}{minor})"
        flags = ", ".join(f for f in self.cpu_flags if f != "avx512f") or "no AVX-512 bf16/fp16 or AMX"
        return f"{self.cpu_model}, {self.cpu_cores} cores, {self.torch_threads} threads [{flags}]"

    def to_dict(self) -> dict:
        return asdict(self)


def _cpuinfo() -> tuple[str, set[str]]:
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    model = value.strip()
                elif key == "flags":
                    flags = set(value.split())
                if flags and key == "":  # the first processor's block is enough
                    break
    except OSError:
        pass
    return model, flags


def detect_hardware(device: torch.device) -> Hardware:
    cpu_model, flags = _cpuinfo()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    common = dict(
        cpu_model=cpu_model,
        cpu_cores=cores,
        torch_threads=torch.get_num_threads(),
        cpu_flags=tuple(f for f in MATRIX_FLAGS if f in flags),
    )
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return Hardware(
            device_type="cuda",
            name=props.name,
            cuda_capability=(props.major, props.minor),
            cuda_memory_gib=round(props.total_memory / 2**30, 1),
            **common,
        )
    return Hardware(device_type="cpu", name=cpu_model, **common)
