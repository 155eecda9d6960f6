"""Measure validation models' whole training steps on this machine's GPU, as rows in rows.csv's columns.

    PYTHONPATH=src python benchmarks/validation/measure_rows.py OUT.csv [--models resnet50:256,ncf:1048576]
        [--seconds 4] [--rounds 3] [--device cuda]
    PYTHONPATH=src python benchmarks/validation/check.py --json --rows OUT.csv   # then: the projection's error

The published rows (rows.csv, heldout_ada_hopper.csv) are other people's runs; these are ours, on a GPU we were
lent, of the same Workloads check.py traces (models/__init__.py), built on the device for real. Each model is
timed in three modes, interleaved round by round so that a slow minute lands on all of them alike: strict fp32
(TF32 off for convolutions and matrix products), TF32 (both on), and mixed precision as torch.cuda.amp runs it
(autocast fp16, GradScaler, PyTorch's defaults otherwise: cuDNN's TF32 on, matmuls fp32). Two rows per model:
TF32 against AMP and strict fp32 against AMP, each step the median of its rounds (CUDA-synchronised wall time
of runs of about `--seconds` each, after a warm-up step; AMP's loss scale settled first, with one scaler kept
across rounds, and a row whose timed AMP steps overflowed marked suspect). The optimizer is the Workload's, as
PyTorch >= 2.0 runs it (torch.optim's foreach loops; where the published run used a fused optimizer, fused=True).

The inputs are random (uniform floats; 0/1 for integer inputs: valid labels, token ids and indices for every
model here): a training step's time does not depend on its values, except where a loss skips work (SSD's hard
negatives are chosen by value, a fixed share of the boxes).

The CSV is rewritten (atomically) after every model, so a run stopped at any point keeps what it finished; a
model that fails is printed with its error and skipped. Nothing is fitted on these rows.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from build_rows import COLUMNS  # noqa: E402
from models import workload, workload_key  # noqa: E402

from ampgan.errors import AmpganError  # noqa: E402
from ampgan.precisions import FP32, TF32  # noqa: E402
from ampgan.system.gpus import gpu_spec  # noqa: E402

# What each model is run at: the batch the published Hopper rows used where one fits a single step's
# measurement in a few seconds (Lambda's H100 SXM5: ResNet-50 640/1280, SSD 256/448), else DLE's.
DEFAULT_MODELS = "resnet50:256,ssd300:128,vgg16:128,ncf:1048576,hifigan:128"
AMP = "amp"  # torch.autocast fp16 with GradScaler (rows.csv's mixed-precision side)
MODES = (FP32, TF32, AMP)
SETTLE_STEPS = 20  # AMP steps at most, before timing, for the loss scale to stop falling
AMP_DTYPE = {"cpu": torch.bfloat16}  # a CPU trial of the script only: fp16 there takes minutes a step
SPECS = {  # model -> (task, input, unit, items per sample)
    "resnet50": ("classification", "3x224x224", "images/s", 1),
    "vgg16": ("classification", "3x224x224", "images/s", 1),
    "ssd300": ("detection", "3x300x300", "images/s", 1),
    "ncf": ("recommendation", "user-item pair", "samples/s", 1),
    "hifigan": ("vocoder", "mel80x32", "mel frames/s", 80),
}


def parse_models(text: str) -> list[tuple[str, int]]:
    chosen = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, batch = item.partition(":")
        if name not in SPECS or not batch.isdigit() or int(batch) < 1:
            raise ValueError(f"--models item {item!r}: give NAME:BATCH with NAME one of {', '.join(SPECS)}")
        chosen.append((name, int(batch)))
    return chosen


def row_for(name: str, batch: int, software: str) -> dict:
    """The rows.csv fields that say what was run (the throughputs are filled in after timing)."""
    task, input_, unit, items = SPECS[name]
    return {
        "model": name,
        "task": task,
        "input": input_,
        "items_per_sample": items,
        "batch_baseline": batch,
        "batch_amp": batch,
        "unit": unit,
        "software": software,
        "source": "ampgan",
        "source_path": "benchmarks/validation/measure_rows.py",
        "commit": "",
        "heading": "",
    }


def real(t: torch.Tensor, device: str) -> torch.Tensor:
    """A device tensor of a meta input's shape and dtype."""
    if t.is_floating_point():
        return torch.rand(t.shape, dtype=t.dtype, device=device)
    return torch.randint(0, 2, t.shape, dtype=t.dtype, device=device)


def set_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def mode_settings(mode: str) -> None:
    if mode == FP32:
        set_tf32(False)
    elif mode == TF32:
        set_tf32(True)
    else:  # PyTorch's own defaults, as an AMP script runs: cuDNN TF32 on, matmuls fp32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True


def build(name: str, batch: int, device: str):
    """The Workload as check.py traces a PyTorch >= 2.0 row of it, built on the device, its optimizer and inputs."""
    row = {"model": name, "input": SPECS[name][1], "items_per_sample": SPECS[name][3], "batch_amp": batch}
    row |= {"notes": "", "software": "PyTorch 2"}
    key = workload_key(row)
    job = workload(key)
    with torch.device(device):
        model = job.build()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = job.optimizer(params)
    if not any(job.loops):  # the published run stepped a fused optimizer (apex FusedAdam)
        optimizer = type(optimizer)(params, **{**optimizer.defaults, "foreach": None, "fused": True})
    with torch.device("meta"):
        inputs = job.inputs(batch)
    return key, job, model, optimizer, tuple(real(t, device) for t in inputs)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_steps(job, model, optimizer, inputs, mode: str, steps: int, device: str, scaler) -> tuple[float, int]:
    """Seconds per step of `steps` steps in `mode` (synchronised before and after), and how many of them the
    loss scaler skipped (an overflow: no optimizer step, so a faster step than a real one). `scaler`: the
    model's one GradScaler for AMP, kept across rounds, so its scale settles once rather than every round. Its
    scale is read before and after the timed steps, never between them (each read waits for the GPU)."""
    mode_settings(mode)
    amp = mode == AMP

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=AMP_DTYPE.get(device, torch.float16), enabled=amp):
            loss = job.loss(model, inputs)
        if not amp:
            loss.backward()
            optimizer.step()
            return
        scaler.scale(loss.float()).backward()
        scaler.step(optimizer)
        scaler.update()

    step()  # a warm-up per mode and round: the first call after a switch picks its kernels
    synchronize(device)
    before = scaler.get_scale() if amp else 0.0
    start = time.perf_counter()
    for _ in range(steps):
        step()
    synchronize(device)
    seconds = (time.perf_counter() - start) / steps
    # each overflow halves the scale (it grows back only after 2000 clean steps, more than a round takes)
    skipped = round(math.log2(before / scaler.get_scale())) if amp else 0
    return seconds, max(0, skipped)


def measure(name: str, batch: int, args) -> dict[str, float]:
    key, job, model, optimizer, inputs = build(name, batch, args.device)
    scaler = torch.amp.GradScaler(args.device)
    # AMP's scale settles first (from 2**16 it halves at each overflow, and an overflowed step updates nothing)
    for _ in range(SETTLE_STEPS):
        if timed_steps(job, model, optimizer, inputs, AMP, 1, args.device, scaler)[1] == 0:
            break

    def timed(mode, steps):
        return timed_steps(job, model, optimizer, inputs, mode, steps, args.device, scaler)

    # one step per mode first, to size the runs: --seconds per mode and round, at least 3 steps
    first = {mode: timed(mode, 1)[0] for mode in MODES}
    steps = {mode: max(3, int(args.seconds / max(first[mode], 1e-4))) for mode in MODES}
    times, skipped = {mode: [] for mode in MODES}, 0
    for _ in range(args.rounds):
        for mode in MODES:
            seconds, overflowed = timed(mode, steps[mode])
            times[mode].append(seconds)
            skipped += overflowed
    # a step of k accumulated micro-batches: the rows' batch and throughput are per micro-batch (README, Columns)
    medians = {mode: statistics.median(values) / job.accumulation for mode, values in times.items()}
    spreads = {mode: max(values) / min(values) for mode, values in times.items()}
    print(
        f"{name} ({key}) batch {batch}: "
        + ", ".join(f"{m} {medians[m] * 1e3:.1f} ms (max/min {spreads[m]:.2f}, {steps[m]} steps)" for m in MODES)
        + f"; amp over tf32 {medians[TF32] / medians[AMP]:.2f}x, over fp32 {medians[FP32] / medians[AMP]:.2f}x",
        flush=True,
    )
    if skipped:
        print(f"{name}: {skipped} AMP step(s) skipped by the loss scaler (overflow) while timed", flush=True)
    medians["skipped"] = skipped
    return medians  # the model's memory is free once this returns (the caller empties CUDA's cache)


def write_rows(path: Path, rows: list[dict]) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(partial, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--seconds", type=float, default=4.0, help="per mode and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    try:
        chosen = parse_models(args.models)
    except ValueError as error:
        parser.error(str(error))
    on_gpu = args.device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        print("error: no CUDA GPU here: these rows are a GPU's (or --device cpu to try the script)", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name() if on_gpu else "cpu (a trial of the script, not a row to check)"
    try:  # the GPU table's key and generation, as rows.csv names them (check.py looks the key up there)
        spec = gpu_spec(gpu)
        key, generation = spec.key, spec.generation
    except AmpganError:
        key, generation = gpu, ""
        print(f"{gpu} is not in src/ampgan/system/gpus.csv: add its row before check.py can project these", flush=True)
    software = f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}"
    print(f"{gpu}; {software}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    rows, failed = [], []
    for name, batch in chosen:
        try:
            times = measure(name, batch, args)
            if on_gpu:
                torch.cuda.empty_cache()
        except Exception as error:  # one model's failure is printed; the others still run
            print(f"{name} batch {batch}: failed: {type(error).__name__}: {str(error)[:300]}", flush=True)
            failed.append(name)
            if on_gpu:
                torch.cuda.empty_cache()
            continue
        base = row_for(name, batch, software)
        items = base["items_per_sample"]
        for baseline, meaning in (
            (TF32, "TF32 convolutions and matmuls (torch.backends.cudnn/cuda.matmul allow_tf32 = True)"),
            (FP32, "strict fp32 (allow_tf32 = False for convolutions and matmuls)"),
        ):
            rows.append(
                base
                | {
                    "gpu": key,
                    "gpu_detail": gpu,
                    "generation": generation,
                    "baseline": baseline,
                    "throughput_baseline": f"{batch * items / times[baseline]:.6g}",
                    "throughput_amp": f"{batch * items / times[AMP]:.6g}",
                    "fp32_meaning": meaning,
                    "notes": "amp: torch.autocast fp16 and GradScaler; measured by ampgan on a lent GPU, "
                    f"median of {args.rounds} interleaved rounds"
                    + (
                        f"; suspect: {times['skipped']} AMP steps skipped by the scaler while timed"
                        if times["skipped"]
                        else ""
                    ),
                }
            )
        write_rows(args.out, rows)
    print(f"{len(rows)} rows written to {args.out}; failed: {', '.join(failed) or 'none'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
