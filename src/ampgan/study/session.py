"""One study from start (or from where it stopped) to its report: claim the folder, run the comparison,
render the report. `ampgan compare` and the Python API (ampgan/api.py) both come through here, so a
study started from a notebook and one started from a shell leave the same folder behind."""

from __future__ import annotations

import warnings
from contextlib import ExitStack
from pathlib import Path

from ampgan.doctor.run import diagnose_gan, write_doctor
from ampgan.errors import AmpganWarning
from ampgan.files.signals import stop_on_signals
from ampgan.precisions import FP32
from ampgan.runs.claim import FolderLock, claimed_folder
from ampgan.study.compare import run_compare
from ampgan.study.document import CompareDocument
from ampgan.study.progress import StudyInterrupted, has_progress, load_progress
from ampgan.study.report import render_report
from ampgan.training.precision import resolve_device


def run_study(
    spec,
    out: Path,
    *,
    overwrite: bool,
    reopen: bool,
    show_progress: bool,
    log,
    with_doctor: bool = False,
    dataset=None,
) -> tuple[CompareDocument, Path, Path]:
    """(compare.json's document, report.md, report.html). A new folder is claimed; one with an
    interrupted study is locked and reopened. Whatever stops it, a folder that holds finished work is kept.
    `dataset`: the study's data, when its command loaded it already (compare --resume: with_its_data)."""
    out = Path(out)
    with ExitStack() as stack:
        if reopen:
            log(f"continuing the study in {out} ...")
            stack.callback(FolderLock(out).release)
        else:
            stack.enter_context(
                claimed_folder(out, overwrite, "study", worth_keeping=has_progress, data=spec.base.data.folders_read)
            )
        document = run_compare(spec, out, show_progress=show_progress, log=log, dataset=dataset)
        with stop_on_signals() as stop:  # the last stages: finished, then stopped if a signal came meanwhile
            if with_doctor:
                _add_doctor(spec, out, log)
            md_path, html_path = render_report(out)
        if stop:
            raise StudyInterrupted(stop.signum, out, load_progress(out))
    return document, md_path, html_path


def _add_doctor(spec, out: Path, log) -> None:
    log("doctor: recording ranges over 3 fp32 steps ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AmpganWarning)
        fp16_steps = 0 if resolve_device(spec.base.compute.device).type == "cpu" else 30
        report = diagnose_gan(spec.train_config(FP32), steps=3, fp16_steps=fp16_steps)
    write_doctor(report, out / "doctor")
