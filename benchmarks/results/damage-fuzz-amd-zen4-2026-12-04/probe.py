"""Targeted damages beside the fuzz: one value out of its range in each document (the fuzz's JSON damages draw
the value at random). python probe.py SRC [NAME...] with FUZZ_ORIGINALS=the fuzz's originals folder."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

orig = Path(os.environ.get("FUZZ_ORIGINALS", "/tmp/t-fuzz/w1/originals"))


def case(name, artefact, rel, change, cmd):
    d = Path(os.environ.get("FUZZ_PROBES", "/tmp/t-fuzz/m/p")) / name
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    shutil.copytree(orig / artefact, d / artefact)
    shutil.copytree(orig / "cache", d / "cache")
    f = d / artefact / rel
    doc = (
        json.loads(f.read_text()) if f.suffix == ".json" else [json.loads(line) for line in f.read_text().splitlines()]
    )
    change(doc)
    f.write_text(json.dumps(doc) if f.suffix == ".json" else "".join(json.dumps(r) + "\n" for r in doc))
    env = dict(os.environ, AMPGAN_CACHE_DIR=str(d / "cache"), PYTHONPATH=sys.argv[1])
    p = subprocess.run(
        [sys.executable, "-m", "ampgan", *cmd], cwd=d, env=env, capture_output=True, text=True, timeout=300
    )
    tb = "TRACEBACK" if "Traceback" in p.stderr else ""
    print(f"{name}: exit {p.returncode} {tb} | {(p.stderr.strip().splitlines() or [''])[-1][:250]}", flush=True)


def s(path, value):
    def f(doc):
        t = doc
        for k in path[:-1]:
            t = t[k]
        t[path[-1]] = value

    return f


which = sys.argv[2:]
C = {
    "compare steps negative": ("study", "compare.json", s(("runs", "fp32", "steps"), -4), ["report", "study"]),
    "compare run_dir outside": (
        "study",
        "compare.json",
        s(("runs", "fp32", "per_seed", "0", "run_dir"), "../../etc"),
        ["report", "study"],
    ),
    "quality step negative": (
        "study",
        "runs/fp32-seed0/quality.jsonl",
        lambda d: d[0].__setitem__("step", -3),
        ["report", "study"],
    ),
    "quality accuracy 7": (
        "study",
        "runs/fp32-seed0/quality.jsonl",
        lambda d: d[-1].__setitem__("evaluator_accuracy", 7.0),
        ["report", "study"],
    ),
    "compare batch 0": ("study", "compare.json", s(("spec", "batch_size"), 0), ["report", "study"]),
    "bench half a batch": (
        "bench",
        "results.json",
        lambda d: [c.__setitem__("batch_size", 8.5) for c in d["configs"]],
        ["bench", "--from", "bench/results.json"],
    ),
    "bench rounds negative": (
        "bench",
        "results.json",
        lambda d: [p.__setitem__("rounds", -3) for p in d["speedups"]],
        ["bench", "--from", "bench/results.json"],
    ),
    "metrics step negative": (
        "run",
        "metrics.jsonl",
        lambda d: d[-1].__setitem__("step", -3),
        ["train", "--resume", "run", "--steps", "6"],
    ),
    "config steps negative": (
        "run",
        "config.json",
        s(("config", "budget", "steps"), -4),
        ["train", "--resume", "run", "--steps", "6"],
    ),
    "config precision fp12": (
        "run",
        "config.json",
        s(("config", "precision", "name"), "fp12"),
        ["evaluate", "run", "--samples", "20"],
    ),
    "bench bs negative": (
        "bench",
        "results.json",
        lambda d: [c.__setitem__("batch_size", -8) for c in d["configs"]],
        ["bench", "--from", "bench/results.json"],
    ),
    "bench precision fp12": (
        "bench",
        "results.json",
        lambda d: [c.__setitem__("precision", "fp12") for c in d["configs"]],
        ["cost", "bench/results.json", "--price-per-hour", "1", "--out", "c"],
    ),
}
for name in which or C:
    case(name, *C[name])
