"""How much of the matrix engine can the model's own convolutions use? Each layer alone, timed.

    python benchmarks/conv_ceiling.py --batch-size 256

Runs every convolution of the model (digits: 32x32 grey; width 64 by default) alone, at the input shape
it sees in training, forward plus both backward products (input and weight gradients), in fp32
(NCHW) and bf16 (channels-last; weights, inputs and gradients in bf16, so no casts), and prints the TFLOP/s each reaches
against the machine's peak (system/hardware.py). The whole step also runs batch-norm, activations,
casts, the optimizer and the linear layers, so these layers alone bound from above what share of the
peak the step can reach: if they reach a tenth of AMX's peak, no step built from them reaches more.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
from torch import nn

from ampgan.gan import DataSpec
from ampgan.gan.models.acgan import Discriminator, Generator
from ampgan.precisions import BF16, FP32
from ampgan.precisions import precision as precision_mode
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse
from ampgan.system.environment import environment_stamp
from ampgan.system.hardware import detect_hardware, peak_tflops


def layer_inputs(batch_size: int, width: int) -> list[tuple[str, nn.Module, tuple[int, ...]]]:
    """(name, layer, input shape) for every convolution, recorded by running G and D once."""
    data = DataSpec(image_size=32, channels=1, num_classes=10)
    generator, discriminator = Generator(data, 128, width), Discriminator(data, width)
    found = []

    def record(name):
        return lambda module, args, output: found.append((name, module, tuple(args[0].shape)))

    hooks = [
        module.register_forward_hook(record(f"{prefix}.{name}"))
        for prefix, network in (("G", generator), ("D", discriminator))
        for name, module in network.named_modules()
        if isinstance(module, (nn.Conv2d, nn.ConvTranspose2d))
    ]
    with torch.no_grad():
        images = generator(torch.randn(batch_size, 128), torch.randint(10, (batch_size,)))
        discriminator(images)
    for hook in hooks:
        hook.remove()
    return found


def macs(layer: nn.Module, input_shape: tuple[int, ...]) -> int:
    batch, _, height, width = input_shape
    kernel = layer.kernel_size[0] * layer.kernel_size[1]
    with torch.no_grad():
        out = layer(torch.zeros(1, *input_shape[1:]))
    if isinstance(layer, nn.ConvTranspose2d):  # every input pixel meets every output channel's kernel
        return batch * height * width * layer.in_channels * layer.out_channels * kernel
    return batch * out.shape[2] * out.shape[3] * layer.out_channels * layer.in_channels * kernel


def seconds_per_pass(layer: nn.Module, input_shape, precision: str, repeats: int) -> float:
    """Median seconds of forward + input-gradient + weight-gradient for one layer, in the precision's
    own dtype throughout (no casts: the kernels alone)."""
    kind = nn.ConvTranspose2d if isinstance(layer, nn.ConvTranspose2d) else nn.Conv2d  # without spectral norm
    dtype = precision_mode(precision).compute_dtype
    memory_format = torch.channels_last if precision == BF16 else torch.contiguous_format
    fresh = kind(
        layer.in_channels,
        layer.out_channels,
        layer.kernel_size,
        stride=layer.stride,
        padding=layer.padding,
        bias=layer.bias is not None,
    ).to(dtype=dtype, memory_format=memory_format)
    x = torch.randn(input_shape, dtype=dtype).to(memory_format=memory_format).requires_grad_(True)
    grad_out = torch.randn_like(fresh(x))
    times = []
    for index in range(repeats + 2):
        started = time.perf_counter()
        fresh(x).backward(grad_out)
        if index >= 2:
            times.append(time.perf_counter() - started)
        fresh.zero_grad(set_to_none=True)
        x.grad = None
    return statistics.median(times)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--width", type=int, default=64, help="the model's width (ampgan's --width)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    keep_freed_memory_for_reuse()
    device = torch.device("cpu")
    hardware = detect_hardware(device)
    peaks = {p: peak_tflops(hardware, p)[0] for p in (FP32, BF16)}
    rows, totals = [], {FP32: [0.0, 0.0], BF16: [0.0, 0.0]}
    for name, layer, input_shape in layer_inputs(args.batch_size, args.width):
        flops = 3 * 2 * macs(layer, input_shape)  # forward, input gradient, weight gradient
        row = {"layer": name, "input": list(input_shape), "gflop": flops / 1e9}
        for precision in (FP32, BF16):
            seconds = seconds_per_pass(layer, input_shape, precision, args.repeats)
            tflops = flops / seconds / 1e12
            row[precision] = {
                "ms": seconds * 1e3,
                "tflops": tflops,
                "percent_of_peak": 100 * tflops / peaks[precision] if peaks[precision] else None,
            }
            totals[precision][0] += flops
            totals[precision][1] += seconds
        rows.append(row)
        print(
            f"{name:<16} in {str(input_shape):<20} {row['gflop']:7.2f} GFLOP | fp32 {row[FP32]['ms']:7.1f} ms "
            f"{row[FP32]['percent_of_peak'] or 0:5.1f}% | bf16 {row[BF16]['ms']:7.1f} ms "
            f"{row[BF16]['percent_of_peak'] or 0:5.1f}% of peak",
            flush=True,
        )
    summary = {}
    for precision, (flops, seconds) in totals.items():
        tflops = flops / seconds / 1e12
        summary[precision] = {
            "tflops": tflops,
            "peak_tflops": peaks[precision],
            "percent_of_peak": 100 * tflops / peaks[precision] if peaks[precision] else None,
        }
        print(
            f"all convolutions, {precision}: {tflops:.2f} TFLOP/s of {peaks[precision] or 0:.2f} peak "
            f"({summary[precision]['percent_of_peak'] or 0:.1f}%)"
        )
    print(f"{hardware.name} | torch {torch.__version__} | batch {args.batch_size}, width {args.width}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "environment": environment_stamp(device),
                    "batch_size": args.batch_size,
                    "width": args.width,
                    "rows": rows,
                    "all_convolutions": summary,
                },
                handle,
                indent=1,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
