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

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ampgan.study.answer import Study, study_of


def compare(
    model: str | Callable = "acgan",
    out: str | Path = "runs/compare",
    *,
    settings: dict[str, Any] | None = None,
    overwrite: bool = False,
    show_progress: bool = False,
    log: Callable[[str], None] | None = None,
    **study_settings,
) -> Study:
    """FP32 against mixed precision for `model` (a built-in name, "path.py:FUNCTION", "package.module:
    FUNCTION", or a model function), as `ampgan compare` runs it. `settings`: config paths and values
    (`{"data.dataset": "digits", "budget.steps": 300, "model.width": 16}`; the model's options are
    `model.NAME`); the budget is 40 s of training per run unless `budget.steps` or
    `budget.time_budget_s` says otherwise. `study_settings`: the study's own settings, the fields of
    study.spec.CompareSpec with the command's defaults (`precisions=["fp32", "bf16"]`, `seeds=3`,
    `eval_points`, `eval_samples`, `bench_batch_sizes`, `bench_seconds`, ...; `ampgan config --list`).
    The same call on a folder holding an interrupted study continues it."""
    from dataclasses import fields

    from ampgan.errors import AmpganError
    from ampgan.gan.registry import consent_to_import, model_name_for
    from ampgan.study.progress import has_study
    from ampgan.study.session import run_study
    from ampgan.study.spec import CompareSpec, compare_base

    known = {f.name for f in fields(CompareSpec)} - {"base"}
    unknown = sorted(set(study_settings) - known)
    if unknown:
        raise AmpganError(
            f"ampgan.compare has no setting {unknown[0]!r}: its settings are {', '.join(sorted(known))} "
            "(config fields go in settings={'section.field': value})"
        )
    changes = dict(settings or {})
    name = model if isinstance(model, str) else model_name_for(model)
    consent_to_import(name)  # named by the caller: the model trust rule lets it be imported
    base = compare_base({**{k: v for k, v in changes.items() if k != "model.name"}, "model.name": name})
    spec = CompareSpec(
        base=base, **{key: tuple(value) if isinstance(value, list) else value for key, value in study_settings.items()}
    )
    out = Path(out)
    document, _, html = run_study(
        spec,
        out,
        overwrite=overwrite,
        reopen=has_study(out) and not overwrite,
        show_progress=show_progress,
        log=log or (lambda line: None),
    )
    return study_of(document, out, html)
