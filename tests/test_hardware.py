import pytest

from ampgan.system.hardware import Hardware, cpu_flops_per_cycle, gpu_peak_tflops, peak_tflops


def cpu(model, flags, mhz=2000.0, cores=4, family=6):
    return Hardware(
        device_type="cpu",
        name=model,
        cpu_model=model,
        cpu_cores=cores,
        torch_threads=cores,
        cpu_flags=tuple(flags),
        cpu_mhz=mhz,
        cpu_family=family,
    )


def test_cpu_peak_is_cores_times_clock_times_flops_per_cycle():
    xeon = cpu("Intel(R) Xeon(R) Platinum 8480+", ["fma", "avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"])
    # 4 cores x 2.0 GHz x 64 FP32 FLOP/cycle (two 512-bit FMA units) = 0.512 TFLOP/s.
    assert peak_tflops(xeon, "fp32")[0] == pytest.approx(0.512)
    # AMX: 1024 bf16 FLOP/cycle per core = 8.192 TFLOP/s.
    assert peak_tflops(xeon, "bf16")[0] == pytest.approx(8.192)
    assert peak_tflops(xeon, "fp16") == (None, "no known fp16 peak for Intel(R) Xeon(R) Platinum 8480+")


def test_zen4_runs_avx512_at_half_width():
    zen4 = cpu("AMD EPYC 9654", ["fma", "avx2", "avx512f", "avx512_bf16"], mhz=2600.0, cores=2, family=25)
    peak, source = peak_tflops(zen4, "fp32")
    assert peak == pytest.approx(2 * 2.6e9 * 32 / 1e12) and source == "2 cores x 2600 MHz x 32 FLOP/cycle"
    assert peak_tflops(zen4, "bf16")[0] == pytest.approx(2 * peak)  # AVX512_BF16 dot products
    assert cpu_flops_per_cycle("AMD EPYC 9005", {"avx512f"}, "fp32", family=26) == 64  # Zen 5


def test_cpu_without_avx_has_no_peak():
    assert cpu_flops_per_cycle("old", {"sse2"}, "fp32") is None


@pytest.mark.parametrize(
    "name, precision, expected",
    [
        ("Tesla T4", "fp16", 65.0),
        ("Tesla T4", "bf16", None),
        ("Tesla V100-SXM2-16GB", "fp32", 15.7),
        ("Tesla P100-PCIE-16GB", "fp16", 18.7),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("NVIDIA H100 PCIe", "bf16", 756.0),
        ("NVIDIA H100 80GB HBM3", "bf16", 989.5),
        ("NVIDIA H200", "fp16", 989.5),
        ("NVIDIA GeForce GTX 1080", "fp32", None),
    ],
)
def test_gpu_peak_table(name, precision, expected):
    assert gpu_peak_tflops(name, precision) == expected
