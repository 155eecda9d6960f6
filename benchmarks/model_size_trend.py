"""The step model's A100-over-V100 gain as a StyleGAN-like generator grows, for the direction of StyleGAN3's
published trend (NVlabs/stylegan3 docs/configs.md, StyleGAN3-T on 1 GPU: 2.71x at 128 px down to 1.41x at
1024 px).

The network is built from what StyleGAN3's code and docs state, nothing fitted to its timings: per resolution
4, 8, ..., R two 3x3 convolutions with min(cbase / resolution, cmax) channels (cbase 32768, cmax 512: the
StyleGAN3-T configuration), batch 32 (configs.md's 1-GPU rows); the top 4 resolutions in fp16
(num_fp16_res=4), the others in fp32 with TF32 off (stylegan3's training loop sets both allow_tf32 flags
False); after each convolution the bias, activation and noise as bandwidth-bound passes over its output
(read and write, forward and backward: 4 passes, in the layer's dtype). Each convolution's three passes
go through the calibrated kernel model (src/ampgan/projection/step_model.py: its kernels on each GPU's
datasheet, A100 on Volta's calibration), the passes through the bandwidth at the assumed fraction.

StyleGAN3's filtered activations (custom CUDA kernels upsampling 2x, then downsampling) and its 16-bit
clamping are not in ampgan's op list: they add more bandwidth-bound work at high resolution, which
pushes the same way as the passes counted here.

    python benchmarks/model_size_trend.py    # pure arithmetic, under a second; the same on any machine
"""

from __future__ import annotations

from ampgan.precisions import FP16, FP32
from ampgan.precisions import precision as precision_mode
from ampgan.projection.assumptions import BANDWIDTH_FRACTION
from ampgan.projection.kernel_model import calibration_for
from ampgan.projection.kernels import Kernel
from ampgan.projection.step_model import kernel_times
from ampgan.system.gpus import gpu_spec

CBASE, CMAX, BATCH, FP16_RESOLUTIONS, PASSES = 32768, 512, 32, 4, 4


def layers(resolution: int) -> list[tuple[int, int, str]]:
    """(resolution, channels, precision) of each 3x3 convolution up to `resolution`."""
    sizes = [4 * 2**i for i in range(resolution.bit_length() - 2)]
    out = []
    for size in sizes:
        precision = FP16 if size in sizes[-FP16_RESOLUTIONS:] else FP32
        channels = min(CBASE // size, CMAX)
        out += [(size, channels, precision)] * 2
    return out


def step_seconds(resolution: int, device: str) -> dict[str, float]:
    gpu = gpu_spec(device)
    calibration, own = calibration_for(gpu)
    matrix, elementwise = 0.0, 0.0
    for size, channels, precision in layers(resolution):
        passes = [
            Kernel(
                f"{op}{size}",
                op,
                batch=BATCH,
                c=channels,
                h=size,
                w=size,
                out_channels=channels,
                r=3,
                s=3,
                pad_h=1,
                pad_w=1,
            )
            for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight")
        ]
        matrix += float(kernel_times(passes, gpu, precision, calibration, 1.0).seconds.sum())
        data = PASSES * 2 * BATCH * channels * size * size * precision_mode(precision).element_bytes
        elementwise += data / (gpu.bandwidth_gbs * 1e9 * BANDWIDTH_FRACTION.mid)
    return {"matrix": matrix, "elementwise": elementwise, "total": matrix + elementwise}


def main() -> None:
    print("StyleGAN-like generator (StyleGAN3-T channels, batch 32, fp16 on the top 4 resolutions, TF32 off)")
    print(
        f"{'px':>5} {'V100 ms':>8} {'A100 ms':>8} {'A100/V100':>9} {'matrix only':>11} {'V100 elementwise share':>22}"
    )
    for resolution in (128, 256, 512, 1024):
        v100, a100 = step_seconds(resolution, "V100"), step_seconds(resolution, "A100")
        print(
            f"{resolution:5} {v100['total'] * 1e3:8.1f} {a100['total'] * 1e3:8.1f} "
            f"{v100['total'] / a100['total']:9.2f} {v100['matrix'] / a100['matrix']:11.2f} "
            f"{v100['elementwise'] / v100['total']:22.0%}"
        )


if __name__ == "__main__":
    main()
