"""Fit the kernel model to the calibration tables and write src/ampgan/projection/calibration/<arch>.json.

    python benchmarks/calibration/fit.py            # every fitted table below (a few seconds)

Each architecture's parameters are fitted on its measured kernels (kernel_fit.py beside this script),
then cross-validated by kernel: the residuals of kernels no fit saw give the band per kernel class and
the error the documentation states. Held-out tables (heldout_*.csv) are never read here.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # kernel_fit.py beside it, when imported rather than run

from kernel_fit import (  # noqa: E402
    BAND_QUANTILES,
    FOLDS,
    cross_validated_log_residuals,
    fit,
    paired,
    read_calibration,
    residual_quantiles,
    speedup_check,
)
from step_band_fit import step_composition  # noqa: E402

from ampgan.precisions import FP16, FP32  # noqa: E402
from ampgan.projection.kernel_model import (  # noqa: E402
    PATH_PARAMETERS,
    SHARED_PARAMETERS,
    SMALL_FLOPS,
    irregular,
    off_tensor_cores,
    on_tensor_cores,
    path_of,
)
from ampgan.system.gpus import gpu_spec  # noqa: E402

OUT = HERE.parents[1] / "src" / "ampgan" / "projection" / "calibration"
# architecture -> (the GPU row of gpus.csv the table was measured on, the tables fitted)
FITTED = {"volta": ("V100", ["deepbench_v100.csv"]), "pascal": ("P100", ["deepbench_p100.csv"])}


# The cases issue 34 named where the fixed-fraction roofline went wrong, reported out of sample.
CASES = {
    "aligned convolutions": lambda k: k.op != "gemm" and not irregular(k, FP16),
    "1-channel convolutions": lambda k: k.op != "gemm" and k.c == 1,
    "GEMMs with a leading dimension off 8": lambda k: k.op == "gemm" and irregular(k, FP16),
    "aligned GEMMs": lambda k: k.op == "gemm" and not irregular(k, FP16),
}


def cases(check, kernels: dict) -> dict:
    out = {}
    for name, belongs in CASES.items():
        picked = [i for i, n in enumerate(check.names) if belongs(kernels[n])]
        held = [check.low[i] <= check.measured[i] <= check.high[i] for i in picked]
        out[name] = {
            "kernels": len(picked),
            "measured_median": float(np.median(check.measured[picked])),
            "predicted_median": float(np.median(check.predicted[picked])),
            "band_holds": float(np.mean(held)),
        }
    return out


# Terms of one kind: a term no kernel of the tables had takes its measured siblings' mean as its other value.
SIBLINGS = (("tiny_c_fwd", "tiny_c_bwd_data", "tiny_c_bwd_weight"), ("misaligned_gemm", "misaligned_conv"))


def term_counts(features) -> dict[str, float]:
    """How many kernels carry each sibling term's feature."""
    tiny = features.tiny_c.sum(0)
    return {
        **dict(zip(SIBLINGS[0], tiny)),
        "misaligned_gemm": features.misaligned_gemm.sum(),
        "misaligned_conv": features.misaligned_conv.sum(),
    }


def unmeasured(tables: dict, paths: dict, gpu) -> dict:
    """{path: {term: value}}: each path's terms that no kernel of the tables had, so the fit left them at its
    start, 0 (the path's ordinary efficiency), with another value beside them: their measured siblings'
    mean. DeepBench has no 1-4 channel data gradient (a network's first layer needs none); a GAN runs one (D's
    input gradient, a transposed convolution to RGB). On tensor cores a convolution is padded (no misaligned
    one), and DeepBench padded its 16-bit GEMMs before timing them (kernel_fit.path_data), so no GEMM cuBLAS
    runs misaligned was measured: its other value is `off_tensor_cores`. Nothing measured says which value
    holds: ampgan's band spans both (projection/composition.py)."""
    out = {}
    for path, values in paths.items():
        seen: dict[str, float] = {}
        for d in tables.values():
            if path_of(d.precision) == path:
                for term, n in term_counts(d.features).items():
                    seen[term] = seen.get(term, 0.0) + n
        tensor = on_tensor_cores(gpu, path)
        for group in SIBLINGS:
            group = tuple(t for t in group if not (tensor and t == "misaligned_conv"))  # dead on tensor cores
            measured = [values[PATH_PARAMETERS.index(t)] for t in group if seen[t]]
            for term in (t for t in group if not seen[t] and measured):
                out.setdefault(path, {})[term] = float(np.mean(measured))
        if tensor and not seen["misaligned_gemm"]:
            # as the calibration's own software ran it (CUDA 10.1): kernel_model.unmeasured_terms takes each GPU's era
            out.setdefault(path, {})["misaligned_gemm"] = off_tensor_cores(paths, gpu)
    return out


def calibrate(architecture: str) -> dict:
    key, files = FITTED[architecture]
    gpu = gpu_spec(key)
    measured = [m for name in files for m in read_calibration(HERE / name)]
    tables = paired(measured, gpu)
    paths, shared = fit(list(tables.values()), gpu)
    residuals = cross_validated_log_residuals(tables, gpu)
    check = speedup_check(tables, residuals)
    sidecars = [json.loads((HERE / f"{name}.json").read_text(encoding="utf-8")) for name in files]
    return {
        "format": "ampgan-kernel-calibration/1",
        "architecture": architecture,
        "gpu": key,
        "tables": [
            {"file": f"benchmarks/calibration/{name}", **{k: s[k] for k in ("source", "licence", "date", "software")}}
            for name, s in zip(files, sidecars)
        ],
        "fitted_on": {p: len(d.names) for p, d in tables.items()},
        "fitted": datetime.date.today().isoformat(),
        "fitted_by": "benchmarks/calibration/fit.py (Levenberg-Marquardt on log time, "
        "benchmarks/calibration/kernel_fit.py)",
        "parameters": {
            **{p: dict(zip(PATH_PARAMETERS, map(float, v))) for p, v in paths.items()},
            "shared": dict(zip(SHARED_PARAMETERS, map(float, shared))),
        },
        "unmeasured": unmeasured(tables, paths, gpu),
        "cross_validation": {
            "folds": FOLDS,
            "quantiles": list(BAND_QUANTILES),
            "small_flops": SMALL_FLOPS,
            "classes": residual_quantiles(tables, residuals),
            "speedup_fp32_to_fp16": check.summary(),
            "cases": cases(check, {k.name: k for k in tables[FP32].kernels}),
            **step_composition(tables, residuals, check),
            "time_error": {
                p: {"median": float(np.exp(np.median(np.abs(r)))), "p90": float(np.exp(np.quantile(np.abs(r), 0.9)))}
                for p, r in residuals.items()
            },
        },
    }


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for architecture in FITTED:
        document = calibrate(architecture)
        (OUT / f"{architecture}.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
        print(architecture, json.dumps(document["cross_validation"]["speedup_fp32_to_fp16"]))
        for case, numbers in document["cross_validation"]["cases"].items():
            print(
                f"  {case}: {numbers['kernels']} kernels, measured {numbers['measured_median']:.2f}x, predicted "
                f"{numbers['predicted_median']:.2f}x (medians), band holds {numbers['band_holds']:.0%}"
            )
        print("  correlation of speedup errors:", json.dumps(document["cross_validation"]["correlation"]))
        print("  pseudo-steps of whole layers:", json.dumps(document["cross_validation"]["pseudo_steps"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
