"""Where a validation model's projected matrix time goes, per convolution shape, at datasheet peak (the
kernel model alone, before the composition's fitted factors).

    python benchmarks/results/validation-residuals-amd-zen4-2026-12-03c/kernels.py MODEL_KEY BATCH GPU

Its recorded output is of the commit that wrote it; since 2026-12-04 features() takes pads_channels= (it took
tensor_cores=, the same decision before GPU rows declared it), so a rerun reads today's kernel model.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))

import composition_fit as cf  # noqa: E402
from trace_models import load_cache, tables_of  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.precisions import precision as precision_mode
from ampgan.projection.kernel_model import (  # noqa: E402
    calibration_for,
    features,
    pads_channels,
    peak_tflops,
    predict_seconds,
)
from ampgan.projection.step_model import row_kernels  # noqa: E402

key, batch, gpu = sys.argv[1], float(sys.argv[2]), cf.gpus()[sys.argv[3]]
tables = tables_of(load_cache()["models"][key])
calibration, _ = calibration_for(gpu)
for precision in (FP32, FP16):
    shaped = row_kernels(list(tables[precision].on_cuda()), batch)
    kernels, weights = shaped.kernels, shaped.weights
    seconds, _, _ = predict_seconds(
        features(kernels, gpu.sms, precision, pads_channels=pads_channels(gpu, precision)),
        calibration.paths[precision],
        calibration.shared,
        peak_tflops(gpu, precision),
        gpu.bandwidth_gbs,
        precision_mode(precision).element_bytes,
    )
    time, flops = collections.Counter(), collections.Counter()
    for kernel, weight, s in zip(kernels, weights, seconds):
        shape = (kernel.op,) if kernel.op == "gemm" else (kernel.op, kernel.c, kernel.out_channels, kernel.r, kernel.s)
        time[shape] += s * weight
        flops[shape] += kernel.flops() * weight
    total = sum(time.values())
    print(f"{key} {gpu.key} batch {batch:g} {precision}: matrix {total:.3f} s at peak")
    for shape, s in time.most_common(10):
        print(f"  {shape}: {100 * s / total:.1f}% of it, {flops[shape] / s / 1e12:.1f} TFLOP/s")
