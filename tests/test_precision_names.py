"""A precision is named in one module: src/ampgan/precisions.py. Everywhere else the package uses its
Precision objects or the names declared there (FP32, BF16, ...), so adding or renaming a mode touches one
file, and a mode the code spells by hand cannot drift from the one the tables and files write."""

import ast
from pathlib import Path

from ampgan.precisions import NAMES

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "ampgan"
WHERE_NAMES_LIVE = PACKAGE / "precisions.py"


def precision_literals(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """'file:line 'fp32'' for each string constant that is exactly a precision's name, inside f-strings'
    expressions too (a docstring or a sentence that mentions one is prose, not a name the code matches on)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in prose
    ]


def test_a_precision_is_named_only_in_precisions_py():
    found = [
        literal
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != WHERE_NAMES_LIVE
        for literal in precision_literals(path)
    ]
    assert not found, "use the Precision objects or the names in precisions.py:\n" + "\n".join(found)


BENCHMARKS = PACKAGE.parents[1] / "benchmarks"
# Scripts that spell the names on purpose: the GPU sweep's supervisor imports nothing of ampgan (a broken
# install on the lent GPU must still leave its summary), the reference loop is PyTorch alone (the seam's
# yardstick), and the seam check types the command lines of the code before the seam. benchmarks/results/
# holds the scripts as they ran for a recorded result, and examples/ is user code, which types names as a
# user does (`precisions=["fp32", "bf16"]`).
SPELLED_ON_PURPOSE = {"gpu_sweep.py", "reference_loop.py", "seam_identity.py"}


def test_the_benchmarks_name_a_precision_as_the_package_does():
    found = [
        literal
        for path in sorted(BENCHMARKS.rglob("*.py"))
        if "results" not in path.relative_to(BENCHMARKS).parts and path.name not in SPELLED_ON_PURPOSE
        for literal in precision_literals(path, BENCHMARKS.parent)
    ]
    assert not found, "use the names in ampgan.precisions:\n" + "\n".join(found)


def test_the_check_finds_a_name_and_leaves_prose_alone(tmp_path):
    module = tmp_path / "probe.py"
    module.write_text(
        '"""Trains in fp32 and bf16."""\nMODES = {"bf16": 1}\nTEXT = f"{MODES} fp16 {MODES[\'fp16\']}"\nWORD = "fp"\n'
    )
    assert precision_literals(module, tmp_path) == ["probe.py:2 'bf16'", "probe.py:3 'fp16'"]
