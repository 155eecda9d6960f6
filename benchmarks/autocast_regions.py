"""Is re-casting the weights in each autocast region worth removing? An upper bound, measured.

    python benchmarks/autocast_regions.py --batch-sizes 64,256

autocast caches the bf16 copy of a weight only until its outermost region ends, and ampgan's step
opens three regions per step (D on real images, D on fakes, G's update), so D's weights are cast up to
three times. Running the whole step inside one outer region keeps every cast in the cache for the
step: the most that merging regions (or keeping bf16 weight copies) could save. It is for timing
only: the cached copies of D's weights would be stale after D's optimizer step. Interleaved rounds
of the real step as it runs against the step inside one region, 95% interval of the speedup.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ampgan.config import config_from_options
from ampgan.data import DataConfig, load_dataset
from ampgan.precisions import BF16
from ampgan.speed.rounds import UNTIL_DECIDED, StoppingRule, measure_rounds
from ampgan.speed.step_timer import StepTimer
from ampgan.system.environment import environment_stamp

RULE = StoppingRule(min_rounds=10, max_seconds=60.0, until=UNTIL_DECIDED)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--precision", default=BF16)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    device = torch.device("cpu")
    dataset = load_dataset(DataConfig(dataset="digits"))
    rows = []
    for batch_size in map(int, args.batch_sizes.split(",")):
        config = config_from_options(
            precision=args.precision, batch_size=batch_size, device="cpu", channels_last=args.precision == BF16
        )
        today, one_region = StepTimer(config, dataset, device), StepTimer(config, dataset, device)
        outer = one_region.policy.autocast

        def in_one_region(timer=one_region, outer=outer):
            with outer():  # nested regions inside keep the cache until this one ends
                return timer()

        for _ in range(2):
            today(), in_one_region()
        result = measure_rounds({"three regions": today, "one region": in_one_region}, "three regions", RULE)
        interval = result.intervals["one region"]
        rows.append({"batch_size": batch_size, "precision": args.precision, **result.to_dict()})
        print(f"{args.precision} batch {batch_size}: one region vs three, {interval.describe()}", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"environment": environment_stamp(device), "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
