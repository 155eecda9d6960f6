"""How much the bench harness adds to the step it measures.

    python benchmarks/harness_overhead.py --batch-size 64 --rounds 60

Times the same training step two ways, interleaved in blocks: a bare loop of `train_step` calls
around one clock, and the harness's per-step `timed_step` (clock reads, flag bookkeeping). The
overhead is the ratio of their medians minus one.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from ampgan.bench.measure import Contender  # noqa: E402
from ampgan.bench.spec import BenchSpec  # noqa: E402
from ampgan.bench.stats import timing_stats  # noqa: E402
from ampgan.config import config_from_options  # noqa: E402
from ampgan.data import load_dataset  # noqa: E402
from ampgan.precisions import BF16  # noqa: E402
from ampgan.system.cpu_tuning import keep_freed_memory_for_reuse  # noqa: E402
from ampgan.system.environment import environment_stamp  # noqa: E402
from ampgan.training.step import train_step  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--precision", default=BF16)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--block", type=int, default=5, help="steps per timed block")
    args = parser.parse_args()
    device = torch.device("cpu")
    keep_freed_memory_for_reuse()
    spec = BenchSpec(base=config_from_options(dataset="synthetic", device="cpu"), precisions=(args.precision,))
    dataset = load_dataset(spec.base.data)
    contender = Contender(spec, args.precision, args.batch_size, dataset, device)
    for _ in range(3):
        contender.timed_step()
    bare, harness = [], []

    def bare_block() -> None:
        start = time.perf_counter()
        for _ in range(args.block):
            train_step(contender.timer.state, contender.timer.resident_batch)
        bare.append((time.perf_counter() - start) / args.block)

    def harness_block() -> None:
        start = time.perf_counter()
        for _ in range(args.block):
            contender.timed_step()
        harness.append((time.perf_counter() - start) / args.block)

    for round_index in range(args.rounds):  # alternate which goes first, so drift favours neither
        for block in (bare_block, harness_block) if round_index % 2 == 0 else (harness_block, bare_block):
            block()
    bare_median, harness_median = timing_stats(bare).median_s, timing_stats(harness).median_s
    # bare/harness per round: below 1 when the harness is slower
    q1, median, q3 = np.percentile(np.asarray(bare) / np.asarray(harness), [25, 50, 75])
    print(
        f"bare step {bare_median * 1e3:.2f} ms, harness step {harness_median * 1e3:.2f} ms; harness overhead "
        f"{100 * (1 / median - 1):+.2f}% (median of per-round ratios; IQR "
        f"{100 * (1 / q3 - 1):+.2f}% .. {100 * (1 / q1 - 1):+.2f}%) "
        f"({args.precision}, batch {args.batch_size}, {args.rounds} rounds of {args.block})"
    )
    print(environment_stamp(device)["hardware_summary"], "| torch", torch.__version__)


if __name__ == "__main__":
    main()
