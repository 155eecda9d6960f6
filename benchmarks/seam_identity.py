"""Does the AC-GAN train bit-identically through the model seam? Old code against new, same commands.

    git worktree add /tmp/pre-seam 56b6077          # the last commit before the seam
    python benchmarks/seam_identity.py --old-src /tmp/pre-seam/src --out benchmarks/results/seam-identity-...

Each configuration is trained by `ampgan train` twice, once with the pre-seam package on PYTHONPATH and
once with this checkout's, in fresh processes on the same machine; then every tensor of the final
checkpoints (both networks, both optimizers' states) and every logged metric (training clock aside) is
compared for exact equality. Last, a run folder written by the old code is resumed by each version
and the two continuations compared. Flags that were removed with the seam (the AC-GAN's loss options)
are given to the old code as flags and to the new as --set.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from pathlib import Path

import torch

from ampgan.system.processes import python_command

COMMON = [
    "--no-channels-last",
    "--no-compile",
    "--quiet",
    "--device",
    "cpu",
    "--set",
    "logging.log_every=5",
    "--set",
    "logging.sample_every=1000",
    "--checkpoint-every",
    "1000",
]
SMALL = ["--width", "16", "--set", "model.z_dim=32", "--batch-size", "16"]
TINY = ["--width", "8", "--set", "model.z_dim=16", "--batch-size", "8"]
QUICKDRAW = [
    "--dataset",
    "quickdraw",
    "--data-dir",
    str(Path(__file__).resolve().parents[2] / "shared" / "data" / "quickdraw-numpy-bitmap"),
    "--set",
    "data.classes=apple,eye,fish",
    "--set",
    "data.max_per_class=200",
]
# name -> (arguments for both, the old code's extra flags, the new code's equivalent --set)
CONFIGS = {
    "fp32": (SMALL + ["--steps", "25"], [], []),
    "bf16": (SMALL + ["--precision", "bf16", "--steps", "25"], [], []),
    "fp16-dynamic": (TINY + ["--precision", "fp16", "--steps", "4"], [], []),
    "fp16-static-128": (TINY + ["--precision", "fp16", "--loss-scale", "128", "--steps", "4"], [], []),
    "published-losses": (
        SMALL + ["--steps", "25"],
        ["--mode-seeking", "0", "--class-loss-on-fakes", "--real-label", "1", "--no-spectral-norm-d"],
        [
            "--set",
            "model.mode_seeking=0",
            "--set",
            "model.class_loss_on_fakes=true",
            "--set",
            "model.real_label=1",
            "--set",
            "model.spectral_norm_d=false",
        ],
    ),
    "synthetic-64px-bf16": (
        [
            "--dataset",
            "synthetic",
            "--image-size",
            "64",
            "--set",
            "data.channels=3",
            *TINY,
            "--steps",
            "10",
            "--precision",
            "bf16",
        ],
        [],
        [],
    ),
    "quickdraw-28px-seed3": (QUICKDRAW + SMALL + ["--steps", "20", "--seed", "3"], [], []),
    "odd-sizes-lr-weights": (
        [
            "--width",
            "12",
            "--set",
            "model.z_dim=20",
            "--batch-size",
            "9",
            "--steps",
            "12",
            "--set",
            "optim.lr_g=1e-3",
            "--set",
            "optim.lr_d=1e-3",
        ],
        ["--class-weight-g", "0.5", "--mode-seeking", "1.0"],
        ["--set", "model.class_weight_g=0.5", "--set", "model.mode_seeking=1.0"],
    ),
}


def train(src: Path | None, out: Path, arguments: list[str], cache: Path) -> None:
    env = dict(os.environ, AMPGAN_CACHE_DIR=str(cache), OMP_NUM_THREADS="2")
    if src is not None:
        env["PYTHONPATH"] = str(src)
    done = subprocess.run(
        python_command("-m", "ampgan", "train", *arguments, "--out", str(out)),
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{out.name} failed: {done.stderr.strip().splitlines()[-1]}")


def identical(old: Path, new: Path) -> dict:
    a = torch.load(sorted((old / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    b = torch.load(sorted((new / "checkpoints").glob("*.pt"))[-1], weights_only=True)
    tensors = [(a[k][n], b[k][n]) for k in ("generator", "discriminator") for n in a[k]]
    for key in ("optimizer_g", "optimizer_d"):
        for index, state in a[key]["state"].items():
            tensors += [(v, b[key]["state"][index][name]) for name, v in state.items() if isinstance(v, torch.Tensor)]

    def clockless(path):
        return [
            {
                k: v
                for k, v in json.loads(line).items()
                if k
                not in (
                    "train_seconds",  # noqa: E731
                    "images_per_second",
                )
            }
            for line in (path / "metrics.jsonl").read_text().splitlines()
        ]

    return {
        "step": a["step"],
        "tensors": len(tensors),
        "tensors_identical": all(torch.equal(x, y) for x, y in tensors),
        "metrics_identical": clockless(old) == clockless(new),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-src", type=Path, required=True, help="the src/ folder of the pre-seam checkout")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    work = args.out / "runs"
    shutil.rmtree(work, ignore_errors=True)
    rows = {}
    for name, (both, old_only, new_only) in CONFIGS.items():
        train(args.old_src, work / f"old-{name}", COMMON + both + old_only, work / "cache-old")
        train(None, work / f"new-{name}", COMMON + both + new_only, work / "cache-new")
        rows[name] = identical(work / f"old-{name}", work / f"new-{name}")
        print(name, rows[name], flush=True)
    # An old run folder (format 1, flat config) continued by each version.
    for version, src in (("old", args.old_src), ("new", None)):
        shutil.copytree(work / "old-fp32", work / f"resumed-by-{version}")
        env = dict(os.environ, AMPGAN_CACHE_DIR=str(work / f"cache-{version}"), OMP_NUM_THREADS="2")
        if src is not None:
            env["PYTHONPATH"] = str(src)
        subprocess.run(
            python_command(
                "-m", "ampgan", "train", "--resume", str(work / f"resumed-by-{version}"), "--steps", "35", "--quiet"
            ),
            env=env,
            check=True,
            capture_output=True,
        )
    rows["old-run-resumed-to-35"] = identical(work / "resumed-by-old", work / "resumed-by-new")
    print("old-run-resumed-to-35", rows["old-run-resumed-to-35"])
    (args.out / "identity.json").write_text(json.dumps(rows, indent=2) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
