"""Time ampgan's train_step against the plain reference loop, interleaved, in one run.

    python benchmarks/compare_reference.py --batch-sizes 64,1024 --precisions fp32,bf16 --rounds 7 --channels-last bf16

Prints, per batch size and precision, both medians and ampgan's speedup over the reference with
its 95% interval (speed/intervals.py; >1: ampgan is faster), with the environment stamp.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reference_loop import ReferenceLoop  # noqa: E402

from ampgan.bench.stats import timing_stats  # noqa: E402
from ampgan.config import config_from_options  # noqa: E402
from ampgan.data import DataConfig, load_dataset  # noqa: E402
from ampgan.data.batches import BatchStream  # noqa: E402
from ampgan.speed.intervals import speedup_interval  # noqa: E402
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse, tuning_state  # noqa: E402
from ampgan.system.environment import environment_stamp  # noqa: E402
from ampgan.training.prepared import prepare_run  # noqa: E402
from ampgan.training.state import build_train_state, wrap_modules  # noqa: E402
from ampgan.training.step import train_step  # noqa: E402


def clock(device, run):
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="64,1024")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--channels-last",
        default="",
        metavar="PRECISIONS",
        help="ampgan side only: the precisions ampgan runs channels-last (e.g. bf16, as measured "
        "faster on an AMX Xeon)",
    )
    parser.add_argument("--compile", action="store_true", help="ampgan side only: torch.compile its networks")
    parser.add_argument(
        "--default-malloc",
        action="store_true",
        help="leave glibc malloc as it is (both loops), to measure what the tuning buys",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cpu" and not args.default_malloc:
        keep_freed_memory_for_reuse()  # process-wide: both loops below get it alike
    dataset = load_dataset(DataConfig(dataset="digits"))
    report = {"environment": environment_stamp(device), "rows": []}
    for batch_size in map(int, args.batch_sizes.split(",")):
        for precision in args.precisions.split(","):
            # Spectral norm off: the reference's D has none, so both loops compute the same networks.
            config = config_from_options(
                precision=precision,
                batch_size=batch_size,
                device=args.device,
                channels_last=precision in args.channels_last.split(","),
                compile=args.compile,
                sets=["model.spectral_norm_d=false"],
            )
            prepared = prepare_run(config, dataset, device)
            state = build_train_state(prepared.config, prepared.model, prepared.data, prepared.policy)
            wrap_modules(state, compile=config.compute.compile, data_parallel=False)
            reference = ReferenceLoop(precision, device=args.device, nc=dataset.channels)
            ours_params = sum(p.numel() for p in state.generator.parameters()) + sum(
                p.numel() for p in state.discriminator.parameters()
            )
            ref_params = sum(p.numel() for p in reference.netG.parameters()) + sum(
                p.numel() for p in reference.netD.parameters()
            )
            assert ours_params == ref_params, (ours_params, ref_params)
            real, labels = BatchStream(dataset, batch_size, device, 0).next_batch()
            batch = lambda: (real, labels)  # noqa: E731
            for _ in range(args.warmup):
                train_step(state, batch)
                reference.step(real, labels)
            ours, theirs = [], []
            for _ in range(args.rounds):  # interleaved: A B A B ...
                ours.append(clock(device, lambda: train_step(state, batch)))
                theirs.append(clock(device, lambda: reference.step(real, labels)))
            speedup = speedup_interval(theirs, ours)  # >1: ampgan is faster
            row = {
                "batch_size": batch_size,
                "precision": precision,
                "ampgan_median_ms": timing_stats(ours).median_s * 1e3,
                "reference_median_ms": timing_stats(theirs).median_s * 1e3,
                "speedup": speedup.to_dict(),
            }
            report["rows"].append(row)
            print(
                f"batch {batch_size:>5} {precision}: ampgan {row['ampgan_median_ms']:.1f} ms, "
                f"reference {row['reference_median_ms']:.1f} ms, ampgan {speedup.describe()}",
                flush=True,
            )
    print(
        f"{report['environment']['hardware_summary']} | torch {torch.__version__} | "
        f"ampgan channels-last: {args.channels_last or 'none'}, compile={args.compile} | {tuning_state()}"
    )
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
