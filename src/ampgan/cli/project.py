"""`ampgan project`: what the measured GAN's step would take on GPUs this machine does not have."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import ShellPath, spec_options, trust_model_option
from ampgan.errors import AmpganError, say, say_json
from ampgan.projection.from_results import ProjectSpec, project_results


@click.command("project")
@click.argument("results", type=ShellPath(), required=False)
@click.option(
    "--kernels",
    type=ShellPath(),
    default=None,
    help="Instead of RESULTS: a CSV of kernels (name,op,m,n,k,transpose_a,transpose_b,batch,c,h,w,"
    "out_channels,r,s,pad_h,pad_w,stride_h,stride_w): writes OUT/kernels.csv with each one's "
    "projected ms and band per GPU and precision. A gemm row is cuBLAS's column-major call, as DeepBench "
    "names it: PyTorch's y = x @ W.T with x (b x i) and W (o x i) is m=o, n=b, k=i, transpose_a=1, "
    "transpose_b=0.",
)
@spec_options(ProjectSpec(), "project.", parts=(), with_set=False)
@click.option(
    "--out",
    type=ShellPath(),
    default=None,
    help="Output folder (default: projection/ beside the results).",
)
@click.option("--overwrite", is_flag=True, help="Replace an existing, non-empty output folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as one JSON object instead of the table.")
@trust_model_option
def command(results, kernels, devices, batch_sizes, prices, gpus, out, overwrite, as_json) -> None:
    """Project ms per step and cost per precision onto datasheet GPUs (a kernel model calibrated on
    measured GPU kernels, over the step's operations traced with the bench): PROJECTED, never measured,
    with its band. With --kernels: the same model on a table of kernels."""
    if (results is None) == (kernels is None):
        raise AmpganError("give either RESULTS (a bench's results.json or a compare folder) or --kernels FILE.csv")
    if kernels is not None:
        _project_kernels(kernels, devices, gpus, out, overwrite, as_json)
        return
    projection, target, text = project_results(
        results,
        ProjectSpec(devices=devices, batch_sizes=batch_sizes, prices=prices, gpus=gpus),
        out,
        overwrite,
        log=lambda line: say(line, err=True),
    )
    if as_json:
        say_json({"projection": str(target / "projection.json"), "rows": projection["rows"]})
    else:
        say(*text.splitlines(), f"projection: {target / 'projection.json'} (PROJECTED, not measured)")


def _project_kernels(path: Path, devices: str | None, gpus: Path | None, out, overwrite: bool, as_json: bool) -> None:
    from ampgan.projection.document import DEFAULT_DEVICES
    from ampgan.projection.kernel_table import project_kernels, read_kernels, write_kernel_projection
    from ampgan.runs.claim import claimed_folder
    from ampgan.system.gpus import gpu_spec, user_gpus

    table = read_kernels(Path(path))  # every row checked before anything is written
    with user_gpus(gpus):
        specs = [gpu_spec(name) for name in (devices.split(",") if devices else DEFAULT_DEVICES)]
        rows = project_kernels(table, specs)
    target = out or Path(path).parent / "projection"
    with claimed_folder(
        target, overwrite, "projection", unfinished=lambda folder: not (folder / "kernels.csv").is_file()
    ):
        written = write_kernel_projection(rows, target)
    if as_json:
        say_json({"kernels": str(written), "rows": rows})
    else:
        say(
            f"{len(table)} kernels x {len(specs)} GPUs: {written} (PROJECTED by the kernel model, not measured; "
            "its error: docs/projection.md)"
        )
