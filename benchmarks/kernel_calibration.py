"""Time every GEMM and convolution of ampgan's real training step alone, into the projection's calibration table.

    PYTHONPATH=src python benchmarks/kernel_calibration.py OUT.csv --device cuda            # on a GPU
    PYTHONPATH=src python benchmarks/kernel_calibration.py OUT.csv --device cpu --tiny      # the rehearsal

For the study's network (acgan-2019, 28 px grey) and the default model (acgan, width 64, 32 px colour), at
each batch size and precision: one cycle of the real step is recorded, each matrix kernel is run alone and
timed (benchmarks/calibration/step_kernels.py), and OUT.csv (name,op,m,n,k,...,precision,ms) with OUT.json (the
GPU, its architecture, the software, the date) is rewritten after every configuration, so a run stopped
by a signal keeps what it finished. Exit 0 when every configuration was measured, 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import signal
import sys
from pathlib import Path

MODELS = {
    "acgan-2019": {"model": "acgan-2019", "image_size": 28, "channels": 1},
    "acgan": {"model": "acgan", "width": 64},
}


def sidecar(device, batch_sizes, precisions, models, finished) -> dict:
    import torch

    import ampgan

    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        gpu, architecture = props.name, f"sm_{props.major}{props.minor}"
    else:
        gpu, architecture = f"none (CPU: {platform.processor() or platform.machine()})", platform.machine()
    return {
        "gpu": gpu,
        "architecture": architecture,
        "source": (
            f"ampgan's real training step ({', '.join(models)}; batch {', '.join(map(str, batch_sizes))}; "
            f"{', '.join(precisions)}): every GEMM and convolution recorded by a dispatch mode and timed alone "
            "(benchmarks/kernel_calibration.py, benchmarks/calibration/step_kernels.py)"
        ),
        "licence": "measured by the ampgan project; the repository's terms apply (it names no licence yet)",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "software": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if device.type == "cuda" else None,
            "python": platform.python_version(),
            "ampgan": ampgan.__version__,
        },
        "measured_by": f"ampgan {ampgan.__version__} benchmarks/kernel_calibration.py",
        "configurations": finished,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batch-sizes", default="256,2048")
    parser.add_argument("--precisions", default="fp32,tf32,bf16,fp16")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--tiny", action="store_true", help="the default model at width 8 (a CPU rehearsal)")
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per kernel, no warm-up (a rehearsal)")
    args = parser.parse_args(argv)

    stop = {"signal": None}
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.update(signal=signum))
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent / "calibration"))
    from step_kernels import measure_kernels, write_calibration

    from ampgan.config import config_from_options
    from ampgan.data import load_dataset
    from ampgan.precisions import TF32
    from ampgan.speed.step_timer import StepTimer
    from ampgan.training.precision import resolve_device

    device = resolve_device(args.device)
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    precisions, models = args.precisions.split(","), args.models.split(",")
    rows, finished, failed = [], [], []
    for model in models:
        options = dict(MODELS[model]) | ({"width": 8} if args.tiny and model == "acgan" else {})
        dataset = None  # loaded once per model: the data is the same at every batch size and precision
        for batch_size in batch_sizes:
            for precision in precisions:
                if stop["signal"]:
                    failed.append(f"{model} b{batch_size} {precision}: not measured (SIGTERM)")
                    continue
                label = f"{model}/b{batch_size}/{precision}"
                try:
                    config = config_from_options(
                        dataset="synthetic", batch_size=batch_size, precision=precision, device=device.type, **options
                    )
                    dataset = dataset or load_dataset(config.data, seed=0)
                    timer = StepTimer(config, dataset, device, data_parallel=False, across_ranks=False)
                    timer()  # one real step first: autotuning, the optimizers' state
                    measured, skipped = measure_kernels(timer, label, tf32=precision == TF32, repeats=args.repeats)
                except Exception as error:  # noqa: BLE001 - one configuration's failure is recorded, the rest go on
                    failed.append(
                        f"{label}: {type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
                    )
                    print(f"{label}: failed ({failed[-1]})", flush=True)
                    continue
                finally:
                    timer = None
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                rows += measured
                finished.append({"configuration": label, "kernels": len(measured), "without_a_row": skipped})
                write_calibration(
                    rows, args.out, sidecar(device, batch_sizes, precisions, models, finished) | {"failed": failed}
                )
                print(f"{label}: {len(measured)} kernels, {sum(r['ms'] for r in measured):.3f} ms in all", flush=True)
    if not rows:
        print("no kernel measured", file=sys.stderr)
    write_calibration(rows, args.out, sidecar(device, batch_sizes, precisions, models, finished) | {"failed": failed})
    return 0 if not failed and rows else 1


if __name__ == "__main__":
    sys.exit(main())
