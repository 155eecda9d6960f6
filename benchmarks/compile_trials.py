"""Compiled against eager on the real step, per precision and batch size: the speedup (interleaved,
with its interval), the compile time a new run pays, and the run length from which compiling pays.

    python benchmarks/compile_trials.py --batch-sizes 64,256 --precisions fp32,bf16 --channels-last bf16

The measurement `ampgan train/compare` make once per machine for runs of 5 minutes or more
(speed/compilation.py), here for several configurations at once and never cached. Each run of the
script starts from an empty compile cache of its own, so `first_compile_s` is the cold compile of the
first configuration of each shape and `compile_s` the warm one a second run on the machine pays.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

from ampgan.config import config_from_options
from ampgan.data import load_dataset
from ampgan.speed.compilation import TrainingStepCompileProbe, compile_from_measurement
from ampgan.system.environment import environment_stamp
from ampgan.training.compile_cache import ENV


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--channels-last", default="", help="the precisions run channels-last, e.g. bf16")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--out", default=None, help="JSON file for the decisions")
    args = parser.parse_args(argv)
    os.environ.setdefault(ENV, tempfile.mkdtemp(prefix="ampgan-compile-trials-"))
    device = torch.device("cpu")
    decisions = []
    for batch_size in map(int, args.batch_sizes.split(",")):
        for precision in args.precisions.split(","):
            config = config_from_options(
                dataset=args.dataset,
                precision=precision,
                batch_size=batch_size,
                device="cpu",
                channels_last=precision in args.channels_last.split(","),
            )
            dataset = load_dataset(config.data)
            # As a new run would: without the graphs (and the shapes seen) of the configurations before.
            torch._dynamo.reset()
            found = TrainingStepCompileProbe(config, dataset, device).measure()
            decision = compile_from_measurement(found, precision, batch_size)
            print(
                f"{decision.describe()} (first compile in this process: {decision.first_compile_s:.1f} s)", flush=True
            )
            decisions.append(decision.to_dict() | {"channels_last": config.compute.channels_last})
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(
                {"environment": environment_stamp(device), "compile_cache": os.environ[ENV], "decisions": decisions},
                handle,
                indent=1,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
