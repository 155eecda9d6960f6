"""What machine is this? The facts every printed figure is stamped with."""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ampgan.precisions import precision as precision_mode
from ampgan.system.cpu_tuning import cores
from ampgan.system.gpus import gpu_table

# CPU flags (from /proc/cpuinfo) that decide the vector width and which reduced-precision
# matrix kernels exist; the summary line shows the reduced-precision ones.
SIMD_FLAGS = ("fma", "avx2", "avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_fp16")
_SHOWN_FLAGS = ("avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_bf16", "amx_fp16")


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
    cpu_mhz: float | None = None
    cpu_mhz_source: str = ""  # where cpu_mhz came from (a rated maximum, or the clock at detection)
    cpu_family: int | None = None  # x86 family: AMD 25 = Zen 3/4, 26 = Zen 5
    extra: dict = field(default_factory=dict)

    def summary(self) -> str:
        if self.device_type == "cuda":
            major, minor = self.cuda_capability or (0, 0)
            return f"{self.name} (sm_{major}{minor})"
        flags = ", ".join(f for f in self.cpu_flags if f in _SHOWN_FLAGS) or "no AVX-512 bf16/fp16 or AMX"
        return f"{self.cpu_model}, {self.cpu_cores} cores, {self.torch_threads} threads [{flags}]"


def _cpuinfo() -> tuple[str, set[str], float | None, int | None, str]:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        text = ""
    # The first processor's block is enough: "key<tabs>: value" lines.
    first = {
        key.strip(): value.strip()
        for key, _, value in (line.partition(":") for line in text.split("\n\n")[0].splitlines())
    }
    model = first.get("model name") or platform.processor() or platform.machine()
    mhz = float(first["cpu MHz"]) if "cpu MHz" in first else None
    family = int(first["cpu family"]) if "cpu family" in first else None
    source = "the clock /proc/cpuinfo showed at detection; the OS reports no maximum" if mhz else ""
    rated = _max_mhz()
    if rated:
        mhz, source = rated, "the maximum clock the OS reports (cpufreq)"
    return model, set(first.get("flags", "").split()), mhz, family, source


def _max_mhz() -> float | None:
    """The rated maximum clock where the kernel exposes it (not on most VMs)."""
    try:
        return int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text(encoding="utf-8")) / 1000
    except (OSError, ValueError):
        return None


def detect_hardware(device: torch.device) -> Hardware:
    cpu_model, flags, mhz, family, mhz_source = _cpuinfo()
    common = dict(
        cpu_model=cpu_model,
        cpu_cores=cores(),
        torch_threads=torch.get_num_threads(),
        cpu_flags=tuple(f for f in SIMD_FLAGS if f in flags),
        cpu_mhz=mhz,
        cpu_mhz_source=mhz_source,
        cpu_family=family,
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


def name_tokens(text: str) -> list[str]:
    """'NVIDIA A100-SXM4-80GB' -> ['nvidia', 'a100', 'sxm4', '80gb']."""
    return [token for token in re.split(r"[^0-9a-z]+", text.lower()) if token]


def names_device(key: str, device_name: str) -> bool:
    """Does a table's key ('A100-80GB', 'H100 PCIe', 'T4') name this device? Every token of the key must
    be a whole token of the device's name: 'L4' names 'NVIDIA L4', not 'NVIDIA L40S' (a substring match
    gave the L40S the L4's peak and price, about 3x off). Nor is a variant the board of its number unless the key
    says so: 'RTX 4090' does not name 'NVIDIA GeForce RTX 4090 Laptop GPU' (a smaller chip), nor 'RTX 3080' an
    'RTX 3080 Ti' (80 multiprocessors, not 68), nor 'V100' a 'Tesla V100-PCIE-16GB' (250 W, not 300)."""
    tokens, own = set(name_tokens(device_name)), name_tokens(key)
    # a laptop's part ("Laptop GPU", "Max-Q": power-limited, often a smaller chip), a bigger desktop one, a
    # cut-down one ("RTX 4090 D"), or the PCIe card of an SXM board (a lower power cap; its key says "PCIe")
    return all(token in tokens for token in own) and not (
        {"laptop", "mobile", "max", "ti", "super", "d", "pcie"} & tokens - set(own)
    )


def gpu_table_key(name: str) -> str | None:
    """The key of the GPU table (system/gpus.py: dense datasheet peaks) that names this device, the most specific
    first ("H100 PCIe" before "H100"); None for a GPU the table does not know."""
    matching = [key for key in gpu_table() if names_device(key, name)]
    return max(matching, key=lambda key: len(name_tokens(key))) if matching else None


# A MIG instance is named after its GPU and its profile: "NVIDIA H200 MIG 1g.18gb", "NVIDIA A100-SXM4-40GB MIG
# 3g.20gb". The GPUs of the table that have MIG (A100, H100, H200) are cut into seven compute slices.
_MIG_PROFILE = re.compile(r"\bMIG\s+(\d+)g\.(\d+)gb\b", re.IGNORECASE)
MIG_COMPUTE_SLICES = 7


def mig_compute_share(name: str) -> float | None:
    """The share of its GPU's compute a MIG instance has (a "3g" profile: 3/7), or None when `name` is a
    whole GPU."""
    found = _MIG_PROFILE.search(name)
    return min(1.0, int(found.group(1)) / MIG_COMPUTE_SLICES) if found else None


def gpu_peak_tflops(name: str, precision: str) -> float | None:
    """The datasheet peak of this GPU in this precision (a MIG instance: its share of the whole GPU's);
    None for a GPU the table does not know (the caller says so and asks for --peak-tflops rather than
    guess) or a precision without a fast path."""
    key = gpu_table_key(_MIG_PROFILE.sub("", name))
    peak = gpu_table()[key].peak_tflops.get(precision) if key else None
    share = mig_compute_share(name)
    return peak * share if peak is not None and share is not None else peak


def cpu_flops_per_cycle(
    cpu_model: str, flags: tuple[str, ...] | set[str], precision: str, family: int | None = None
) -> int | None:
    """Peak FLOPs per cycle per core for the vector/matrix units this CPU has, by the dtype the mode computes
    in (its record in precisions.py): a mode registered later that computes in float32 gets FP32's.

    - FP32, AVX-512: Intel Xeon cores have two 512-bit FMA units: 2 x 16 lanes x 2 = 64.
      AMD Zen 4 (family 25) runs AVX-512 on two 256-bit FMA pipes: 2 x 8 x 2 = 32; Zen 5
      (family 26) has full 512-bit pipes: 64. AVX2 only: 2 x 8 x 2 = 32.
    - BF16: AMX tiles (Sapphire Rapids and later): 1024 per core (Intel's figure). Without AMX,
      AVX512_BF16's dot-product instruction does two multiply-adds per FP32 lane: twice FP32.
    - FP16: AMX-FP16 (Granite Rapids) 1024; otherwise None (no fast fp16 path in PyTorch's CPU
      kernels, which convert to FP32).
    """
    flags = set(flags)
    amd = "amd" in cpu_model.lower()
    if "avx512f" in flags:
        fp32 = 32 if amd and (family or 0) < 26 else 64
    elif "avx2" in flags or "fma" in flags:
        fp32 = 32
    else:
        return None
    mode = precision_mode(precision)
    if not mode.cpu:
        return None  # tf32 is a CUDA mode
    bf16 = 1024 if "amx_bf16" in flags else 2 * fp32 if "avx512_bf16" in flags else None
    per_dtype = {torch.float32: fp32, torch.bfloat16: bf16, torch.float16: 1024 if "amx_fp16" in flags else None}
    return per_dtype.get(mode.compute_dtype)


def peak_tflops(hardware: Hardware, precision: str) -> tuple[float | None, str]:
    """(peak TFLOP/s or None, how it was obtained) for this device and precision."""
    if hardware.device_type == "cuda":
        peak = gpu_peak_tflops(hardware.name, precision)
        share = mig_compute_share(hardware.name)
        source = (
            "NVIDIA datasheet (dense)"
            if share is None
            else (
                f"NVIDIA datasheet (dense) x {share * MIG_COMPUTE_SLICES:.0f}/{MIG_COMPUTE_SLICES} compute slices (MIG)"
            )
        )
        return peak, (source if peak else f"{hardware.name} is not in the peak table")
    per_cycle = cpu_flops_per_cycle(hardware.cpu_model, hardware.cpu_flags, precision, hardware.cpu_family)
    if per_cycle is None or not hardware.cpu_mhz:
        return None, f"no known {precision} peak for {hardware.cpu_model}"
    peak = hardware.cpu_cores * hardware.cpu_mhz * 1e6 * per_cycle / 1e12
    clock = f" ({hardware.cpu_mhz_source})" if hardware.cpu_mhz_source else ""
    return peak, f"{hardware.cpu_cores} cores x {hardware.cpu_mhz:.0f} MHz{clock} x {per_cycle} FLOP/cycle"
