"""ampgan from Python: the study `ampgan compare` runs, on a model given by name or as a function, with
its answer as data.

    import ampgan

    def my_gan(data: ampgan.DataSpec, *, width: int = 32) -> ampgan.GAN:
        ...

    study = ampgan.compare(my_gan, "runs/mine", settings={"budget.steps": 300}, precisions=["fp32", "bf16"])
    study.verdict            # the sentences `ampgan compare` prints
    study.speedup["bf16"]    # {'estimate': 1.49, 'low': 1.41, 'high': 1.57, ...} at the study's batch size
    study.final["bf16"]      # final quality, means over seeds: {'frechet_distance': ..., 'coverage': ...}

The folder it writes is the one the command writes (compare.json, report.html, runs/...), and a model
function defined in a .py file is recorded as `path.py:NAME`, so the command line can train it again.
A function defined in a notebook is known to this process only (`python:NAME`): its study cannot be
continued from another one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ampgan.study.answer import Study, study_of


def compare(model: str | Callable = "acgan", out: str | Path = "runs/compare", *,
            settings: dict[str, Any] | None = None, precisions: Iterable[str] = (), seeds: int = 3,
            eval_points: int = 4, eval_samples: int = 1000, bench_batch_sizes: Iterable[int] = (16, 64, 256),
            bench_seconds: float = 10.0, overwrite: bool = False, show_progress: bool = False,
            log: Callable[[str], None] | None = None) -> Study:
    """FP32 against mixed precision for `model` (a built-in name, "path.py:FUNCTION", "package.module:
    FUNCTION", or a model function), as `ampgan compare` runs it. `settings`: config paths and values
    (`{"data.dataset": "digits", "budget.steps": 300, "model.width": 16}`; the model's options are
    `model.NAME`); the budget is 40 s of training per run unless `budget.steps` or
    `budget.time_budget_s` says otherwise. `precisions` empty: fp32 and this machine's best mixed mode.
    The same call on a folder holding an interrupted study continues it."""
    from ampgan.config.sources import build_config
    from ampgan.gan.registry import consent_to_import, model_name_for
    from ampgan.study.compare import CompareSpec
    from ampgan.study.progress import has_study
    from ampgan.study.session import run_study

    changes = dict(settings or {})
    name = model if isinstance(model, str) else model_name_for(model)
    consent_to_import(name)  # named by the caller: the model trust rule lets it be imported
    layer = {"model.name": name, **{k: v for k, v in changes.items() if k != "model.name"}}
    if "budget.time_budget_s" not in changes:
        layer["budget.time_budget_s"] = None if "budget.steps" in changes else 40.0
    base = build_config(layer)
    spec = CompareSpec(base=base, precisions=tuple(precisions), seeds=seeds, eval_points=eval_points,
                       eval_samples=eval_samples, bench_batch_sizes=tuple(bench_batch_sizes), bench_seconds=bench_seconds)
    out = Path(out)
    document, _, html = run_study(spec, out, overwrite=overwrite, reopen=has_study(out) and not overwrite,
                                  show_progress=show_progress, log=log or (lambda line: None))
    return study_of(document, out, html)
