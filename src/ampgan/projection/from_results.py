"""A bench's results projected into a folder, as `ampgan project RESULTS` and `ampgan.project` make it: the
step's op tables read, projected onto datasheet GPUs at the batch sizes asked, priced, written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ampgan.errors import AmpganError
from ampgan.sections import check_kinds, setting


@dataclass(frozen=True, kw_only=True)
class ProjectSpec:
    """What a projection is given besides the results, declared once (sections.py setting): the
    command's options and the Python API's settings come from these fields."""

    devices: str | None = setting(
        None,
        "GPUs from src/ampgan/system/gpus.csv, comma-separated (default T4,P100,V100,A100,L4,H100,H200).",
        True,
        "names",
    )
    batch_sizes: tuple[int, ...] | None = setting(
        None, "Batch sizes to project, any size (default: the bench's).", True, "int_list"
    )
    prices: Path | None = setting(
        None, "Your own price catalog CSV for the cost column (default: the built-in one).", True, "path"
    )
    gpus: Path | None = setting(
        None, "Your own GPU rows (a CSV in src/ampgan/system/gpus.csv's columns) added to ampgan's.", True, "path"
    )

    NAME = "project"  # its settings' paths: project.batch_sizes

    def __post_init__(self) -> None:
        check_kinds(self)


def results_path(given: Path) -> Path:
    """The results a path names: a results.json or op_tables.json, or a bench or compare folder holding one."""
    path = Path(given)
    if path.is_dir():
        candidates = (
            path / "results.json",
            path / "bench" / "results.json",
            path / "op_tables.json",  # ampgan bench --trace-only's
            path / "projection" / "op_tables.json",
        )
        path = next((p for p in candidates if p.is_file()), path / "results.json")
    return path


def project_results(results: Path, spec: ProjectSpec, out: Path | None, overwrite: bool, log) -> tuple[dict, Path, str]:
    """(the projection document, the folder it was written to, its table as text)."""
    # Imported here, not at the top: the command line imports this module for ProjectSpec at every start, and
    # these 14 modules (the projection's models, the catalog) took 0.25 s more to import (-X importtime, 2-core
    # AMD EPYC Zen 4) for commands that never project.
    from ampgan.bench.output import load_results
    from ampgan.cost.catalog import load_catalog
    from ampgan.projection.assumptions import launch_assumption, measure_dispatch_seconds
    from ampgan.projection.document import DEFAULT_DEVICES, build_projection
    from ampgan.projection.output import write_projection
    from ampgan.projection.tables import load_traced_step, op_tables_of
    from ampgan.runs.claim import claimed_folder
    from ampgan.system.gpus import gpu_spec, user_gpus

    path = results_path(results)
    document = load_traced_step(path) if path.name == "op_tables.json" else load_results(path)
    # The user's GPU rows are in the table while the GPUs are found and projected (measured_gpu reads it too).
    with user_gpus(spec.gpus):
        gpus = [gpu_spec(name) for name in (spec.devices.split(",") if spec.devices else DEFAULT_DEVICES)]
        sizes = list(spec.batch_sizes or document["spec"].get("batch_sizes") or [])
        if not sizes:
            raise AmpganError(f"{path} names no batch sizes: give --batch-sizes")
        tables = op_tables_of(document, path, log=log)
        catalog = load_catalog(spec.prices)
        launch = launch_assumption(
            measure_dispatch_seconds(), document.get("environment", {}).get("hardware_summary", "this machine")
        )
        projection = build_projection(
            document,
            tables,
            gpus,
            sizes,
            launch,
            catalog,
            str(spec.prices) if spec.prices else "ampgan's built-in catalog (src/ampgan/cost/prices.csv)",
        )
    target = out or path.parent / "projection"
    # A projection stopped before its last file (killed, say) is replaced by the same command again.
    with claimed_folder(
        target,
        overwrite,
        "projection",
        unfinished=lambda folder: (
            not all(
                (folder / name).is_file()
                for name in ("projection.json", "projection.csv", "projection.md", "fig_projection.png")
            )
        ),
    ):
        text = write_projection(projection, target)
    return projection, target, text
