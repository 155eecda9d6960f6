"""The step composition (src/ampgan/projection/composition.py) fitted on the validation rows, and its error
measured leave-one-model-out: each model's rows predicted by a fit that never saw that model, the band of
each of its rows from the other models' errors in the same GPU generation.

Used by check.py (the numbers), fit_composition.py (the shipped JSON) and tests/test_validation.py.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from models import unbuilt, workload_key  # noqa: E402
from trace_models import load_cache, tables_of  # noqa: E402

from ampgan.precisions import FP16, FP32, TF32  # noqa: E402
from ampgan.projection.assumptions import LAUNCH_GAP_S  # noqa: E402
from ampgan.projection.composition import GLOBAL, PATHS, PER_GENERATION, compose, step_parts  # noqa: E402
from ampgan.projection.kernel_model import TINY_CHANNELS, calibration_for  # noqa: E402
from ampgan.system.gpus import GpuSpec, gpu_table, parse_gpu_table  # noqa: E402

ROWS = HERE / "rows.csv"
HELD_OUT = HERE / "heldout_ada_hopper.csv"
# Each band end is a percentile of the errors (LEVEL and 1 - LEVEL), chosen per GPU generation: the largest of
# these levels whose bands, taken from the other models' errors in that generation, hold COVERAGE of the
# generation's rows, each model left out (the one choice made knowing the leave-one-model-out errors, as the
# kernel band's 11% was; a model's rows err together, so the 10th-90th percentiles of the others' errors hold
# fewer than 80% of a new model's). One level for every generation let the largest (Ampere, 173 of 286 rows)
# set it: Volta's band then held 88% of its rows at 3.20 wide where 82% at 2.47 was its own need
# (benchmarks/results/validation-facts-amd-zen4-2026-12-03f). A generation no level brings to COVERAGE
# (Pascal: 9 rows of 9 models, whose two extremes no band from the others holds) takes the widest. The band
# of a generation without rows is held to the same test, one generation left out.
LEVELS = (0.20, 0.18, 0.16, 0.15, 0.14, 0.13, 0.12, 0.11, 0.10, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02)
COVERAGE = 0.80
PRIOR = {  # (centre, spread) of each log quantity: weak, so that the rows decide; where a quantity was before
    "matrix_fp32": (0.0, 0.5),
    "matrix_tf32": (0.0, 0.5),
    "matrix_fp16": (0.0, 0.5),
    "memory_fraction": (math.log(0.75), 0.7),
    "memory_fraction_16": (math.log(0.75), 0.7),
    "cast_fraction": (math.log(0.75), 0.7),
    "update_fraction": (math.log(0.75), 0.7),
    "launch_gap_s": (math.log(4e-6), 1.0),
    "host_per_op_s": (math.log(10e-6), 1.0),
    "watts_per_sm": (math.log(3.0), 0.5),
}
# The GPU-side gap per non-matrix kernel is held within what CUDA's launch costs when the host keeps ahead
# (assumptions.LAUNCH_GAP_S, 2-6 us: NVIDIA's 'Getting Started with CUDA Graphs'); the host's own cost per
# operation is host_per_op_s. Unbounded the fit has two minima: 4.4 us, and 39 us where Tacotron 2's per-frame
# Python decoder (host time no op trace counts) is bought per kernel, which made GNMT's Volta AMP step 75 ms of
# launch gaps (benchmarks/results/validation-launch-gap-amd-zen4-2026-12-04).
BOUNDS = {"launch_gap_s": tuple(math.log(s) for s in LAUNCH_GAP_S)}
GENERATION_SPREAD = 0.3  # a generation's offset is shrunk towards the others' (ridge): few rows move it little
# The kernel term no kernel sheet measured (DeepBench never timed a 1-4 channel data gradient: a first layer
# needs no input gradient), fitted here with the composition on the rows whose steps run it (HiFi-GAN's
# generator update, through both discriminators into the 1-channel waveform; Tacotron 2 and WaveGlow, barely).
# It is the Volta calibration's (every tensor-core GPU's) 16-bit path's. The shipped fit holds it at the
# calibration's value: fitted, the leave-one-model-out error got worse (HiFi-GAN and Tacotron 2 want values
# e^1.3 apart; benchmarks/results/validation-hifigan-amd-zen4-2026-12-03e). TERM_PRIOR is the prior it is tried
# with (validate(rows, TERM_PRIOR)): flat, since the kernel fit's 0 is where no kernel moved it from.
TERM = ("volta", FP16, "tiny_c_bwd_data")
TERM_PRIOR = (0.0, 100.0)
TERM_GRID = np.arange(1.0, -8.01, -0.25)  # the term's values at which the kernels it scales are timed


def gpus() -> dict[str, GpuSpec]:
    table = dict(gpu_table())
    table.update(parse_gpu_table((HERE / "gpus.csv").read_text(encoding="utf-8"), "benchmarks/validation/gpus.csv"))
    return table


class RowsError(ValueError):
    """A rows file that cannot be read in rows.csv's columns; its message is one line naming the fix."""


def baseline_precision(row: dict) -> str:
    """What the row's fp32 column ran: strict fp32, or TF32 for convolutions and products alike. Lambda's
    later rows ran NVIDIA's container builds (PyTorch 1.13.0a0), whose containers set
    TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, so their products ran TF32 too although PyTorch's own default had
    turned them to fp32; the rows show it: BERT-large on an A100 80GB takes 13.3 ms a sequence there
    (batch 64), DLE's TF32 run 16 ms, and strict fp32 products would take about 2.5x that."""
    if row["baseline"] not in (FP32, TF32):  # anything else was once read as TF32, on a V100 too
        raise RowsError(f"baseline is {row['baseline']!r}, not {FP32} or {TF32} (what the fp32 side ran)")
    return row["baseline"]


@dataclass
class Row:
    model: str
    key: str
    gpu: GpuSpec
    generation: str
    baseline: str
    batch: tuple[int, int]
    measured: tuple[float, float]  # seconds per step: baseline, AMP
    source: dict
    parts: tuple = field(default=None, repr=False)
    sides: tuple = field(default=None, repr=False)  # ((op rows, batch, precision) of the baseline, of AMP)

    @cached_property
    def term_s(self) -> np.ndarray:
        """(2, paths, TERM_GRID): the seconds the term's kernels add to each side's matrix paths, term at each grid
        value; timed when first read (only a fit of the term, or a prediction with one, reads it)."""
        return np.stack([term_grid(t, b, self.gpu, p, self.baseline) for t, b, p in self.sides])

    def parts_at(self, term: float) -> tuple:
        """Each side's parts with the kernel term at `term` (the kernels it scales re-timed)."""
        added = term_seconds(self.term_s[None], term)[0]
        return tuple(
            replace(p, matrix_s={k: p.matrix_s[k] + added[side, i] for i, k in enumerate(PATHS)})
            for side, p in enumerate(self.parts)
        )

    @property
    def speedup(self) -> float:
        """AMP's throughput over the baseline's (each at its own batch size)."""
        return per_sample_ratio(self.measured, self.batch)


def term_seconds(term_s: np.ndarray, term: float) -> np.ndarray:
    """(rows, 2, paths) seconds added at `term`, interpolated between TERM_GRID's values (descending)."""
    return np.stack([np.interp(-term, -TERM_GRID, a) for a in term_s.reshape(-1, len(TERM_GRID))]).reshape(
        term_s.shape[:-1]
    )


def term_grid(table, batch: int, gpu: GpuSpec, precision: str, fp32_ops: str) -> np.ndarray:
    """(paths, TERM_GRID) seconds the term adds to one side's matrix paths at each grid value: the op rows
    that launch a 1-4 channel data gradient re-timed with the term there against its calibration value."""
    architecture, path, name = TERM
    own = calibration_for(gpu)[0].architecture == architecture
    tiny = [r for r in table if own and any(k == "conv_bwd_data" and d[1][0] <= TINY_CHANNELS for k, d in r.kernels)]
    out = np.zeros((len(PATHS), len(TERM_GRID)))
    if tiny:
        base = step_parts(tiny, batch, gpu, precision, fp32_ops=fp32_ops).matrix_s
        for j, value in enumerate(TERM_GRID):
            moved = step_parts(tiny, batch, gpu, precision, {path: {name: float(value)}}, fp32_ops).matrix_s
            out[:, j] = [moved[k] - base[k] for k in PATHS]
    return out


def per_sample_ratio(seconds: tuple[float, float], batch: tuple[int, int]) -> float:
    return (seconds[0] / batch[0]) / (seconds[1] / batch[1])


# The columns load_rows reads, and of them the numbers: an empty batch is a row left out ("no batch size"), an empty
# items_per_sample is 1; any other cell of these must be a positive number, a batch a whole one.
READ = ("model", "input", "gpu", "baseline", "software", "notes")
NUMBERS = {
    "batch_baseline": int,
    "batch_amp": int,
    "throughput_baseline": float,
    "throughput_amp": float,
    "items_per_sample": float,
}


def malformed(path: Path) -> str | None:
    """What stops a rows file from being read in rows.csv's columns, in one line naming the fix, or None."""
    # utf-8-sig: a spreadsheet's "CSV UTF-8" export starts with a byte-order mark, which would hide `model`
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        raw, columns = list(reader), reader.fieldnames or []
    missing = [c for c in (*READ, *NUMBERS) if c not in columns]
    if missing:
        columns_doc = "benchmarks/validation/README.md, Columns"
        return f"{path} has no column {', '.join(missing)}: give rows.csv's header ({columns_doc})"
    if not raw:
        return f"{path} has a header and no rows"
    for line, r in enumerate(raw, start=2):
        if not (r["input"] or "").strip():
            example = "as rows.csv does (3x224x224, seq384)"
            return f"{path} line {line}: input is empty: write what the step ran on, {example}"
        try:
            baseline_precision(r)
        except RowsError as error:
            return f"{path} line {line}: {error}"
        for column, kind in NUMBERS.items():
            cell = (r[column] or "").strip()
            if not cell and not column.startswith("throughput"):
                continue
            try:
                value = float(cell)
            except ValueError:
                value = -1.0
            if not (value > 0 and math.isfinite(value)) or (kind is int and value != int(value)):
                what = "a whole number above 0" if kind is int else "a number above 0"
                return f"{path} line {line}: {column} is {cell!r}, not {what}"
    return None


def load_rows(path: Path, cache: dict | None = None) -> tuple[list[Row], list[tuple[dict, str]]]:
    """(the rows that can be projected, [(row, why not)] for the others); RowsError for a file that cannot be read
    in rows.csv's columns (every script that reads rows reads them alike)."""
    problem = malformed(path)
    if problem:
        raise RowsError(problem)
    cache = cache if cache is not None else load_cache()
    table = gpus()
    with open(path, newline="", encoding="utf-8-sig") as handle:
        raw = list(csv.DictReader(handle))
    rows, skipped = [], []
    tables: dict[str, dict] = {}
    for r in raw:
        items = float(r["items_per_sample"] or 1)
        key = workload_key(r)
        if key is None:
            skipped.append((r, unbuilt(r)))
            continue
        if key not in cache["models"]:
            skipped.append((r, f"{key} not traced: run benchmarks/validation/trace_models.py --models {key}"))
            continue
        if r["gpu"] not in table:
            skipped.append(
                (
                    r,
                    f"GPU {r['gpu']} not in a GPU table (add its datasheet row, with the source, to "
                    "src/ampgan/system/gpus.csv, or for a part no user picks, a laptop's, to "
                    "benchmarks/validation/gpus.csv in its columns)",
                )
            )
            continue
        if not r["batch_baseline"] or not r["batch_amp"]:
            skipped.append((r, "no batch size"))
            continue
        batch = (int(float(r["batch_baseline"])), int(float(r["batch_amp"])))
        measured = tuple(b * items / float(t) for b, t in zip(batch, (r["throughput_baseline"], r["throughput_amp"])))
        gpu = table[r["gpu"]]
        if baseline_precision(r) == TF32 and gpu.cannot_run(TF32):
            why = f"baseline {TF32}, which the {r['gpu']} cannot run ({gpu.cannot_run(TF32)}): write {FP32}"
            skipped.append((r, why))
            continue
        if key not in tables:
            tables[key] = tables_of(cache["models"][key])
        baseline = baseline_precision(r)
        sides = ((tables[key][FP32].on_cuda(), batch[0], baseline), (tables[key][FP16].on_cuda(), batch[1], FP16))
        # The AMP side's ops that stayed fp32 ran as the harness's fp32 side did (TF32 where it was on).
        parts = tuple(step_parts(t, b, gpu, p, fp32_ops=baseline) for t, b, p in sides)
        rows.append(Row(r["model"], key, gpu, gpu.generation, baseline, batch, measured, r, parts, sides))
    return rows, skipped


def _unpack(vector: np.ndarray, generations: list[str], term: bool = False) -> dict:
    """The parameter vector (GLOBAL, each generation's PER_GENERATION, and with `term` the kernel term) as params."""
    values = dict(zip(GLOBAL, vector[: len(GLOBAL)]))
    end = len(GLOBAL) + len(generations) * len(PER_GENERATION)
    rest = vector[len(GLOBAL) : end].reshape(len(generations), len(PER_GENERATION)) if generations else []
    params = {
        "global": {k: float(v) for k, v in values.items()},
        "generations": {g: dict(zip(PER_GENERATION, map(float, o))) for g, o in zip(generations, rest)},
    }
    if term:
        architecture, path, name = TERM
        params["kernel_terms"] = {architecture: {path: {name: float(vector[end])}}}
    return params


def term_of(params: dict) -> float:
    architecture, path, name = TERM
    return params.get("kernel_terms", {}).get(architecture, {}).get(path, {}).get(name, 0.0)


def predict(row: Row, params: dict) -> tuple[float, float]:
    """The row's (baseline, AMP) seconds as `ampgan project` composes them (composition.compose); without a
    fitted term, with the calibration's (nothing re-timed)."""
    sides = row.parts_at(term_of(params)) if "kernel_terms" in params else row.parts
    return tuple(compose(parts, row.gpu, params)["seconds"] for parts in sides)


@dataclass(frozen=True)
class Design:
    """The rows' parts as arrays (side 0 baseline, 1 AMP), so that a fit composes every row at once."""

    matrix: np.ndarray  # (rows, 2, paths)
    memory: np.ndarray  # (rows, 2, 4): other fp32, other 16-bit, casts, updates, in seconds at full bandwidth
    memory_ops: np.ndarray  # (rows, 2)
    operations: np.ndarray  # (rows, 2)
    power: np.ndarray  # (rows,): watts per SM (inf without a power limit)
    clock_share: np.ndarray  # (rows,): the GPU's published sustained clock share (gpus.csv), nan where none
    generation: list[str]
    rows: list[Row] = field(repr=False)

    @cached_property
    def term_s(self) -> np.ndarray:
        """(rows, 2, paths, TERM_GRID): Row.term_s, read only when the params fit the term."""
        return np.stack([r.term_s for r in self.rows])

    @classmethod
    def of(cls, rows: list[Row]) -> Design:
        def memory(parts, gpu):
            moved = (parts.other_bytes, parts.other_bytes_16, parts.cast_bytes, parts.update_bytes)
            return [m / (gpu.bandwidth_gbs * 1e9) for m in moved]

        return cls(
            np.array([[[p.matrix_s[k] for k in PATHS] for p in r.parts] for r in rows]),
            np.array([[memory(p, r.gpu) for p in r.parts] for r in rows]),
            np.array([[p.memory_ops for p in r.parts] for r in rows]),
            np.array([[p.operations for p in r.parts] for r in rows]),
            np.array([r.gpu.watts / r.gpu.sms if r.gpu.watts else np.inf for r in rows]),
            np.array([r.gpu.clock_share or np.nan for r in rows]),
            [r.generation for r in rows],
            rows,
        )

    def seconds(self, params: dict) -> np.ndarray:
        """(rows, 2) composed seconds: composition.compose, vectorised."""
        g = params["global"]
        names = sorted(set(self.generation))
        offsets = np.array([[params["generations"].get(n, {}).get(k, 0.0) for k in PER_GENERATION] for n in names])
        index = np.array([names.index(n) for n in self.generation])
        # PER_GENERATION is (fp32 products, 16-bit and tf32 products): the offset each path takes
        columns = [0 if path == FP32 else 1 for path in PATHS]
        base = np.array([g[f"matrix_{path}"] for path in PATHS])
        scale = np.exp(base[None, :] + offsets[index][:, columns])
        clock = np.minimum(1.0, self.power / math.exp(g["watts_per_sm"])) ** (1 / 3)
        clock = np.where(np.isnan(self.clock_share), clock, self.clock_share)  # composition.clock_factor
        # without a fitted term, the calibration's: nothing added
        timed = self.matrix + term_seconds(self.term_s, term_of(params)) if "kernel_terms" in params else self.matrix
        matrix = (timed * scale[:, None, :]).sum(2) / clock[:, None]
        kinds = ("memory_fraction", "memory_fraction_16", "cast_fraction", "update_fraction")
        fractions = np.exp([g[k] for k in kinds])
        gpu = matrix + (self.memory / fractions).sum(2) + self.memory_ops * math.exp(g["launch_gap_s"])
        host = self.operations * math.exp(g["host_per_op_s"])
        return (gpu**4 + host**4) ** 0.25


def fit(rows: list[Row], start: dict | None = None, term_prior: tuple[float, float] | None = None) -> dict:
    """The quantities that best compose these rows' measured steps (log error of both times and of the
    speedup, each model weighted alike, robust to a few wild rows), shrunk towards the priors. `start`: a
    fit to begin from (the same minimum, found in fewer steps)."""
    generations = sorted({r.generation for r in rows})
    per_model: dict[str, int] = {}
    for r in rows:
        per_model[r.model] = per_model.get(r.model, 0) + 1
    weights = np.array([1 / math.sqrt(per_model[r.model]) for r in rows])
    measured = np.log(np.array([r.measured for r in rows]))
    design = Design.of(rows)
    count = len(generations) * len(PER_GENERATION)
    term = [] if term_prior is None else [term_prior]  # (centre, spread) of the kernel term, when it is fitted
    centre = np.array([PRIOR[k][0] for k in GLOBAL] + [0.0] * count + [c for c, _ in term])
    spread = np.array([PRIOR[k][1] for k in GLOBAL] + [GENERATION_SPREAD] * count + [s for _, s in term])

    def residuals(vector):
        predicted = np.log(design.seconds(_unpack(vector, generations, bool(term))))
        error = predicted - measured
        speedup = (predicted[:, 0] - predicted[:, 1]) - (measured[:, 0] - measured[:, 1])  # batches cancel
        return np.concatenate([(error * weights[:, None]).ravel(), speedup * weights, (vector - centre) / spread])

    lower = np.array([BOUNDS.get(k, (-np.inf, np.inf))[0] for k in GLOBAL] + [-np.inf] * (count + len(term)))
    upper = np.array([BOUNDS.get(k, (-np.inf, np.inf))[1] for k in GLOBAL] + [np.inf] * (count + len(term)))
    first = centre.copy()
    if start is not None:
        first[: len(GLOBAL)] = [start["global"][k] for k in GLOBAL]
        for n, gen in enumerate(generations):
            offsets = start["generations"].get(gen, {})
            first[len(GLOBAL) + n * len(PER_GENERATION) : len(GLOBAL) + (n + 1) * len(PER_GENERATION)] = [
                offsets.get(k, 0.0) for k in PER_GENERATION
            ]
        first[len(first) - len(term) :] = [term_of(start)] * len(term)

    def solve(vector):
        vector = np.clip(vector, lower, upper)
        return least_squares(
            residuals, vector, bounds=(lower, upper), loss="soft_l1", f_scale=0.2, x_scale=spread, max_nfev=400
        )

    def cost(vector):  # least_squares' soft_l1 cost
        return float((2 * (np.sqrt(1 + (residuals(vector) / 0.2) ** 2) - 1)).sum() * 0.02)

    result = solve(first)
    if not term:
        return _unpack(result.x, generations)
    # The term's effect grows as e^-term (a kernel's time) and is nil near 0, where the local fit starts: its
    # minimum is found on TERM_GRID with the other quantities held, then the fit is resumed from there.
    profile = [cost(np.append(result.x[:-1], value)) for value in TERM_GRID]
    best = float(TERM_GRID[int(np.argmin(profile))])
    if abs(best - result.x[-1]) > 0.25:
        resumed = solve(np.append(result.x[:-1], best))
        result = resumed if resumed.cost < result.cost else result
    return _unpack(result.x, generations, term=True)


def leave_one_out(rows: list[Row], by, start: dict | None = None, term_prior=None) -> dict[int, tuple[float, float]]:
    """{row index: (baseline s, AMP s)} each predicted by a fit without its group (`by(row)`)."""
    out = {}
    for group in sorted({by(r) for r in rows}):
        params = fit([r for r in rows if by(r) != group], start, term_prior)
        members = [i for i, r in enumerate(rows) if by(r) == group]
        for i, seconds in zip(members, Design.of([rows[i] for i in members]).seconds(params)):
            out[i] = tuple(seconds)
    return out


def conformal(values, share: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, math.ceil((len(ordered) + 1) * share) - 1))
    return float(ordered[index])


def band_of(errors: list[float], level: float) -> tuple[float, float]:
    """(low, high) log factors holding 1 - 2 level of errors like these (conformal ends)."""
    low = -conformal([-e for e in errors], 1 - level)
    return min(0.0, low), max(0.0, conformal(errors, 1 - level))


def log_errors(rows: list[Row], predicted: dict) -> tuple[dict, dict]:
    """{index: log(measured / predicted speedup)}, {index: [log errors of both times]}."""
    speed = {i: math.log(rows[i].speedup / per_sample_ratio(p, rows[i].batch)) for i, p in predicted.items()}
    times = {i: [math.log(m / q) for m, q in zip(rows[i].measured, p)] for i, p in predicted.items()}
    return speed, times


def summary(records: list[dict]) -> dict:
    if not records:
        return {"rows": 0}
    speed = [r["speedup_error"] for r in records]
    times = [e for r in records for e in r["time_errors"]]
    return {
        "rows": len(records),
        "models": len({r["model"] for r in records}),
        "median_speedup_error": round(float(np.median(speed)), 3),
        "p90_speedup_error": round(float(np.percentile(speed, 90)), 3),
        "coverage": round(float(np.mean([r["in_band"] for r in records])), 3),
        "median_band_width": round(float(np.median([r["band_width"] for r in records])), 3),
        "median_time_error": round(float(np.median(times)), 3),
    }


def software_era(row: Row) -> str:
    """The software a row ran on, in eras: Lambda's 2020 runs (NGC 20.01: PyTorch 1.4, CUDA 10.2, apex), NGC
    containers before 20.06 that name no CUDA version (DeepLearningExamples' 2019-20 tables; its A100 rows, which
    need CUDA 11, name 20.06 or later), and everything since (CUDA 11+, PyTorch 1.6+), nearest to what users run."""
    software = row.source["software"]
    ngc = re.search(r"pytorch:(\d+)\.(\d+)", software)
    if "CUDA 10." in software:
        return "cuda10.2"
    return "ngc<20.06" if ngc and (int(ngc[1]), int(ngc[2])) < (20, 6) else "cuda11+"


def record(row: Row, predicted: tuple[float, float], band: tuple[float, float]) -> dict:
    mid = per_sample_ratio(predicted, row.batch)
    low, high = mid * math.exp(band[0]), mid * math.exp(band[1])
    return {
        "model": row.model,
        "gpu": row.gpu.key,
        "generation": row.generation,
        "software": software_era(row),
        "measured_speedup": row.speedup,
        "projected_speedup": mid,
        "band": [low, high],
        "in_band": low <= row.speedup <= high,
        "band_width": high / low,
        "speedup_error": math.exp(abs(math.log(row.speedup / mid))),
        "time_errors": [math.exp(abs(math.log(m / p))) for m, p in zip(row.measured, predicted)],
    }


def level_for(errors: list[float], groups: list, share: float = COVERAGE) -> float:
    """The largest of LEVELS whose band from the other groups' errors holds `share` of each group's, or, when none
    does, the smallest (the widest band): each error's band is taken without its own group."""

    def holds(level: float) -> float:
        inside = []
        for group in set(groups):
            low, high = band_of([e for e, g in zip(errors, groups) if g != group], level)
            inside += [low <= e <= high for e, g in zip(errors, groups) if g == group]
        return float(np.mean(inside))

    # LEVELS descend: the first that reaches is the largest, and the rest need not be tried.
    return next((level for level in LEVELS if holds(level) >= share), min(LEVELS))


def validate(rows: list[Row], term_prior: tuple[float, float] | None = None) -> tuple[list[dict], dict]:
    """Every row leave-one-model-out, its band from the other models' errors in its generation at that
    generation's level (level_for; a generation with fewer than 2 other models: the band of a generation without
    rows); and the bands that ship (every model's errors in the generation, at its level). The band of a
    generation without rows is from every row's error predicted with its generation left out, at the level that
    holds COVERAGE of each generation's such errors from the other generations'."""
    # Each fold starts where the whole fit starts (the priors' centres), not from the whole fit: started there it
    # would inherit the basin the left-out model chose, and the error would not be that of a fit without it.
    lomo = leave_one_out(rows, lambda r: r.model, None, term_prior)
    speed, times = log_errors(rows, lomo)
    logo = leave_one_out(rows, lambda r: r.generation, None, term_prior)
    logo_speed, logo_times = log_errors(rows, logo)
    wide_level = level_for([logo_speed[i] for i in range(len(rows))], [r.generation for r in rows])
    uncalibrated = band_of(list(logo_speed.values()), wide_level)
    levels = {}
    for generation in sorted({r.generation for r in rows}):
        members = [i for i, r in enumerate(rows) if r.generation == generation]
        levels[generation] = level_for([speed[i] for i in members], [rows[i].model for i in members])
    records = []
    for i, row in enumerate(rows):
        others = [speed[j] for j, r in enumerate(rows) if r.generation == row.generation and r.model != row.model]
        models = {r.model for r in rows if r.generation == row.generation and r.model != row.model}
        band = band_of(others, levels[row.generation]) if len(models) >= 2 else uncalibrated
        records.append(record(row, lomo[i], band))
    bands = {}
    for generation, level in levels.items():
        members = [i for i, r in enumerate(rows) if r.generation == generation]
        models = {rows[i].model for i in members}
        bands[generation] = {
            "speedup": list(band_of([speed[i] for i in members], level)),
            "time": list(band_of([e for i in members for e in times[i]], level)),
            "rows": len(members),
            "models": len(models),
            "level": level,
            "source": f"leave-one-model-out errors of {len(members)} rows, {len(models)} models",
        }
    shipped_uncalibrated = {
        "speedup": list(uncalibrated),
        "time": list(band_of([e for v in logo_times.values() for e in v], wide_level)),
        "rows": len(rows),
        "level": wide_level,
        "source": "the errors of each generation predicted by a fit without its rows (leave-one-generation-out)",
    }
    return records, {"bands": bands, "uncalibrated_band": shipped_uncalibrated}


def held_out(rows: list[Row], params: dict, bands: dict) -> list[dict]:
    """Rows of another file projected with the shipped fit and bands (nothing fitted on them)."""
    out = []
    for row in rows:
        band = bands["bands"].get(row.generation) or bands["uncalibrated_band"]
        out.append(record(row, predict(row, params), tuple(band["speedup"])))
    return out


def report(records: list[dict], rows_count: int) -> dict:
    generations = sorted({r["generation"] for r in records})
    cells = sorted({(r["generation"], r["software"]) for r in records})
    return {
        "rows": rows_count,
        "models": sorted({r["model"] for r in records}),
        "generations": generations,
        "overall": summary(records),
        **{g: summary([r for r in records if r["generation"] == g]) for g in generations},
        # The same errors and bands split by the software the rows ran (software_era): the generation's band is
        # taken from all its rows, old software included; this says how it does on each.
        "by_software": {
            f"{g} {e}": summary([r for r in records if (r["generation"], r["software"]) == (g, e)]) for g, e in cells
        },
    }
