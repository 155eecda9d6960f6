"""What a comparison has finished, kept in `study.json` so an interrupted study resumes instead of
starting over (or being lost).

    OUT/study.json   {"format": "ampgan-study/1", "identity": <digest of the study's options>,
                      "spec": {...}, "decided": {...} | null, "bench_done": bool,
                      "runs": {"fp32-seed0": {"status": "done", "summary": {...}}, "bf16-seed0": {"status": "started"}}}

Written atomically after every finished stage (the speed decisions, the bench, each run); a run that was
stopped keeps its checkpoints in its run folder and continues from the latest. The identity is a digest of
everything that changes the study's result, so the same command again resumes, and a command with other
options is refused rather than mixed into it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from ampgan.config.resume import WRITES_WHERE_DATA_LIVES
from ampgan.data import ImageDataset
from ampgan.errors import AmpganError
from ampgan.files.atomic import write_json_atomically
from ampgan.files.paths import read_json_in
from ampgan.files.records import from_json, to_json
from ampgan.files.schema import check_format
from ampgan.runs.run_folder import read_run_config
from ampgan.sections import differences
from ampgan.speed.plan import RunPlan
from ampgan.study.spec import CompareSpec
from ampgan.training.interruption import Interrupted
from ampgan.training.start import check_data_is_here, moved_files, run_data
from ampgan.trust import command_line

FILE_NAME = "study.json"
FORMAT = "ampgan-study/1"
_SHAPE = {
    "format": str,
    "identity": str,
    "spec": dict,
    "decided": (dict, None),
    "bench_done": bool,
    "runs": {"*": {"status": str, "?summary": dict}},
}


def study_identity(spec_document: dict) -> str:
    """A digest of the options that change a study's result (its spec, as compare.json records it). Where
    it keeps and fetches things (its evaluator cache, a bench to reuse, whether data may be downloaded or
    cached) is left out: read back from study.json these are resolved or switched off (study/spec.py
    from_document), and the study they continue is the same one."""
    document = {
        key: value
        for key, value in spec_document.items()
        # the bench's settings count; a bench to reuse (bench_results, or an earlier version's `bench` path) does not
        if key not in ("evaluator_cache", "bench_results") and not (key == "bench" and not isinstance(value, dict))
    }
    if isinstance(document.get("config"), dict) and isinstance(document["config"].get("data"), dict):
        data = {k: v for k, v in document["config"]["data"].items() if f"data.{k}" not in WRITES_WHERE_DATA_LIVES}
        document["config"] = document["config"] | {"data": data}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()[:20]


@dataclass
class StudyProgress:
    folder: Path
    identity: str
    spec: dict
    decided: RunPlan | None = None  # precisions, what was left out, the speed/layout/compile decisions
    bench_done: bool = False
    runs: dict[str, dict] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.folder / FILE_NAME

    def save(self) -> None:
        write_json_atomically(
            self.path,
            {
                "format": FORMAT,
                "identity": self.identity,
                "spec": self.spec,
                "decided": to_json(self.decided) if self.decided else None,
                "bench_done": self.bench_done,
                "runs": self.runs,
            },
        )

    def run_done(self, key: str) -> dict | None:
        entry = self.runs.get(key)
        return entry.get("summary") if entry and entry.get("status") == "done" else None

    def mark_run(self, key: str, status: str, summary: dict | None = None) -> None:
        self.runs[key] = {"status": status, **({"summary": summary} if summary is not None else {})}
        self.save()

    def describe(self) -> str:
        """'the speed decisions, the bench, run fp32-seed0, run bf16-seed0 stopped at its last checkpoint'. A stage
        whose files were deleted after study.json recorded it is named as gone, never as kept."""
        stages = [("the speed decisions", "", self.path)] * bool(self.decided)  # (name, how it is kept, where)
        stages += [("the bench", "", self.folder / "bench" / "results.json")] * self.bench_done
        stages += [
            (
                f"run {key}",
                "" if entry.get("status") == "done" else " stopped at its last checkpoint",
                self.folder / "runs" / key,
            )
            for key, entry in self.runs.items()
        ]
        gone = [name for name, _, where in stages if not where.exists()]
        return (", ".join(name + how for name, how, where in stages if where.exists()) or "nothing yet") + (
            f"; {', '.join(gone)} deleted since (resume asks for it back, or --overwrite starts again)" if gone else ""
        )


def has_study(folder: Path) -> bool:
    return (Path(folder) / FILE_NAME).is_file()


def has_progress(folder: Path) -> bool:
    """The folder holds a study that got past its start (something finished or under way): worth
    keeping when the command stops. A study.json that cannot be read says yes: it is not ampgan's to delete."""
    if not has_study(folder):
        return False
    try:
        progress = load_progress(folder)
    except AmpganError:
        return True
    return bool(progress.decided or progress.bench_done or progress.runs)


def load_progress(folder: Path) -> StudyProgress:
    fix = "start the study again with --overwrite"
    path, document = read_json_in(
        folder,
        FILE_NAME,
        missing=f"{folder} holds no interrupted study ({FILE_NAME} is missing): start it with ampgan compare --out",
        fix=fix,
    )
    check_format(document, FORMAT, str(path), "an ampgan study's progress", fix, shape=_SHAPE)
    return StudyProgress(
        Path(folder),
        document["identity"],
        document["spec"],
        None if document["decided"] is None else from_json(RunPlan, document["decided"], f"{path} (decided)", fix),
        document["bench_done"],
        document["runs"],
    )


def with_its_data(spec: CompareSpec, progress: StudyProgress, moved: dict) -> tuple[CompareSpec, ImageDataset | None]:
    """The resumed study's spec, its data and model file where `moved` ({config path: value}: --dataset folder:PATH,
    --data-dir DIR, --model PATH.py:F) says they now are (recorded in study.json: the same study), checked to be the
    ones its runs trained with (training/start.moved_files; one line when gone, other data or an edited file: a
    finished run would be compared with one trained on other data or code), and the data as the study loads it
    (loaded once: run_study takes it; None when no run trained yet)."""
    runs = sorted((progress.folder / "runs").glob("*/config.json"))[:1]  # a run trained on the study's data
    recorded = read_run_config(runs[0].parent) if runs else None
    there = replace(spec, base=moved_files(runs[0].parent if runs else progress.folder, spec.base, moved, recorded))
    check_data_is_here(there.base.data, progress.folder)
    dataset = run_data(recorded, runs[0].parent, there.base) if runs else None
    if there != spec:  # moved
        progress.spec = there.to_document(progress.spec["precisions"])
        progress.identity = study_identity(progress.spec)
        progress.save()
    return there, dataset


def open_progress(folder: Path, spec_document: dict) -> StudyProgress:
    """The folder's progress when it holds this study (same identity), a new one when it holds none;
    one error line naming the first option that differs when it holds another study."""
    identity = study_identity(spec_document)
    if not has_study(folder):
        progress = StudyProgress(Path(folder), identity, spec_document)
        progress.save()
        return progress
    progress = load_progress(folder)
    if progress.identity != identity and study_identity(progress.spec) == progress.identity:
        try:  # an earlier version's record of this very study: taken up, recorded as this version records it
            if (
                CompareSpec.from_document(progress.spec, folder, progress.path).to_document(progress.spec["precisions"])
                == spec_document
            ):
                progress.identity, progress.spec = identity, spec_document
        except (AmpganError, KeyError, TypeError, ValueError):
            pass  # another version's record of another study: refused below
    if progress.identity != identity:
        found = differences(progress.spec, spec_document)
        if not found:  # the same options under another identity: the file itself was changed
            raise AmpganError(
                f"{progress.path} records these very options under identity {progress.identity!r}, "
                f"not {identity!r}: the file was edited or written by another ampgan version; "
                "restore it, or start the study again with another --out (or --overwrite)"
            )
        path, saved, given = found[0]
        raise AmpganError(
            f"{folder} holds a study with other options ({path} was {saved!r}, now {given!r}): resume it as it was "
            f"with '{command_line('compare', '--resume', folder)}', or start this one with another --out "
            "(or --overwrite)"
        )
    return progress


class StudyInterrupted(Interrupted):
    """SIGINT/SIGTERM during a comparison: what finished is kept, and how to continue."""

    def __init__(self, signum: int, out_dir: Path, progress: StudyProgress):
        super().__init__(
            signum,
            f"the study is kept in {out_dir}: {progress.describe()}; continue with: "
            f"{command_line('compare', '--resume', out_dir)} (or the same command again)",
        )


def or_note(stage, noted):
    """`stage()`, or `noted(error)` when it fails: a stage after the runs must not lose them (a stop is still a
    stop)."""
    try:
        return stage()
    except (KeyboardInterrupt, Interrupted):
        raise
    except Exception as error:  # noqa: BLE001 - the finished runs must not be lost to a later stage
        return noted(error)
