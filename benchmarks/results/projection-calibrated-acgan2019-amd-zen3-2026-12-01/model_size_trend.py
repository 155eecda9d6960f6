"""The kernel model's A100-over-V100 gain as a convolution stack grows (width and image size), in each one's fastest
mixed mode and in fp32: the direction to compare with StyleGAN3's published V100 -> A100 gains, which shrink
as the model grows (NVlabs/stylegan3 docs/configs.md: StyleGAN3-T, 1 GPU, 2.71x at 128 px to 1.41x at 1024 px).
Kernels only (three 3x3 convolutions at full, half and quarter size, all three passes, batch 32): pure
arithmetic, the same on any machine.

    python benchmarks/results/projection-calibrated-acgan2019-amd-zen3-2026-12-01/model_size_trend.py
"""
from ampgan.projection.kernels import Kernel
from ampgan.projection.step_model import kernel_times
from ampgan.projection.kernel_model import calibration_for
from ampgan.system.gpus import gpu_spec

def stack(width, size, batch):
    ks = []
    for res in (size, size // 2, size // 4):
        for op in ("conv_fwd", "conv_bwd_data", "conv_bwd_weight"):
            ks.append(Kernel(f"{op}{res}", op, batch=batch, c=width, h=res, w=res, out_channels=width, r=3, s=3, pad_h=1, pad_w=1))
    return ks
for size in (32, 64, 128, 256):
    for width in (32, 128, 512):
        t = {}
        for key, prec in (("V100","fp16"),("A100","bf16"),("V100","fp32"),("A100","fp32")):
            g = gpu_spec(key); cal, own = calibration_for(g)
            t[(key,prec)] = kernel_times(stack(width, size, 32), g, prec, cal, 1.0).seconds.sum()
        print(f"size {size:4} width {width:4}: A100/V100 speedup mixed {t[('V100','fp16')]/t[('A100','bf16')]:.2f}  fp32 {t[('V100','fp32')]/t[('A100','fp32')]:.2f}  V100 step {t[('V100','fp16')]*1e3:.2f} ms")
