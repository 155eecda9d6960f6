"""Channels-last against NCHW on the real step, per precision and batch size, interleaved, with intervals.

    python benchmarks/layout_trials.py --batch-sizes 64,256,1024 --precisions fp32,bf16 [--dataset synthetic]

The same measurement `ampgan train/compare/bench` make once per machine (speed/layout.py), here for
several batch sizes at once and never cached, to see where the memory format pays on the machine at
hand. Prints one decision line per configuration and writes them as JSON with the machine's stamp.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ampgan.config import config_from_options
from ampgan.data import load_dataset
from ampgan.speed.layout import decide_layout_for_run
from ampgan.system.environment import environment_stamp


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,256,1024")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--dataset", default="synthetic")
    parser.add_argument("--out", default=None, help="JSON file for the decisions")
    args = parser.parse_args(argv)
    device = torch.device("cpu")
    decisions = []
    for batch_size in map(int, args.batch_sizes.split(",")):
        for precision in args.precisions.split(","):
            config = config_from_options(dataset=args.dataset, precision=precision, batch_size=batch_size, device="cpu")
            dataset = load_dataset(config.data)
            decision = decide_layout_for_run(config, dataset, device, use_cache=False)
            print(decision.describe(), flush=True)
            decisions.append(decision.to_dict())
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"environment": environment_stamp(device), "decisions": decisions}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
