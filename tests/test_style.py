"""The code's form is the tools', not a reviewer's: ruff's lint (pyflakes, pycodestyle, import order) and
its formatter at 120 columns (pyproject.toml [tool.ruff]) hold over src, tests, benchmarks and examples."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PATHS = ["src", "tests", "benchmarks", "examples"]


def _ruff() -> str:
    found = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(found).exists():
        if os.environ.get("CI"):  # CI installs the test extras: a missing linter there is a failure
            pytest.fail("ruff is not installed in CI: .ci/run must install '.[test]'")
        pytest.skip("ruff is not installed (pip install -e '.[test]')")
    return found


def test_the_code_passes_the_linter():
    result = subprocess.run([_ruff(), "check", *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-1000:]


def test_the_code_is_formatted():
    result = subprocess.run(
        [_ruff(), "format", "--check", *PATHS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, "run 'ruff format src tests benchmarks examples':\n" + result.stdout[-3000:]
