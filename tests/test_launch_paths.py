"""Every Python process ampgan starts imports ampgan, torch and numpy from where they are installed, never
from the folder it was started in (system/processes.py), and a launch whose ranks ran something else fails."""

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ampgan.system.processes import python_command

ROOT = Path(__file__).resolve().parents[1]

# Each decoy leaves a mark when imported: a child that imported it ran code from the current folder.
DECOYS = {
    "ampgan.py": "ampgan",
    "torch.py": "torch",
    "numpy.py": "numpy",
    "click.py": "click",
}


def _decoy_folder(folder: Path, package: bool = False) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for file, name in DECOYS.items():
        code = f"open({str(folder / ('imported-' + name))!r}, 'w').write('x')\nimport sys\nsys.exit(0)\n"
        if package and name == "ampgan":
            (folder / "ampgan").mkdir()
            (folder / "ampgan" / "__init__.py").write_text(code)
            (folder / "ampgan" / "__main__.py").write_text(code)
        else:
            (folder / file).write_text(code)
    return folder


def _marks(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("imported-*"))


def test_every_python_process_in_src_and_benchmarks_starts_through_python_command():
    """The rule lives in one place: no module names the interpreter itself (sys.executable) to start a child;
    a new launch that does is caught here, before it can import a user's ampgan.py."""
    offenders = []
    for path in [*(ROOT / "src").rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        if path.name == "processes.py" and path.parent.name == "system":
            continue
        if path.name == "gpu_sweep.py":  # its supervisor imports nothing of ampgan: it spells -P itself
            assert '"-P"' in path.read_text().split("AMPGAN =")[0], "gpu_sweep.py's children must start with -P"
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "executable"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], offenders


@pytest.mark.parametrize("package", [False, True], ids=["modules", "ampgan-package"])
def test_a_child_never_imports_the_current_folders_modules(tmp_path, package):
    """ampgan.py (or an ampgan/ package), torch.py, numpy.py and click.py in the current folder: a child
    started by python_command imports the installed ones, with PYTHONPATH kept (not -I)."""
    folder = _decoy_folder(tmp_path / "project", package)
    code = "import ampgan, click, numpy, torch; print(ampgan.__file__); print(torch.__file__)"
    done = subprocess.run(python_command("-c", code), cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _marks(folder) == [], done.stdout
    assert str(folder) not in done.stdout and "ampgan" in done.stdout, done.stdout
    # A script's own folder is not on the path either: a script run by path beside the decoys.
    script = folder / "probe.py"
    script.write_text("import ampgan, numpy\nprint('ran', ampgan.__file__)\n")
    done = subprocess.run(python_command(str(script)), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr[-2000:]
    assert _marks(folder) == [] and str(folder) not in done.stdout


def _launch(folder: Path, target: list[str] | None, argv: list[str]) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import sys
        from ampgan.training.launcher import launch_on_this_machine
        sys.exit(launch_on_this_machine(2, {argv!r}, target={target!r}))
    """)
    return subprocess.run(
        python_command("-c", code),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
    )


@pytest.mark.slow
def test_a_launch_whose_ranks_did_not_run_ampgan_fails_in_one_line(tmp_path):
    """Ranks that exit 0 without finishing ampgan's command (a script that does nothing, `-c pass`) trained
    nothing: the launch exits 1 with one line naming them, never 0."""
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "nothing.py").write_text("print('I am not ampgan')\n")
    for target in ([str(folder / "nothing.py")], ["-c", "pass"]):
        done = _launch(folder, target, ["train", "--steps", "2"])
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1, done.stderr[-2000:]
        assert lines[-1].startswith("error: ranks 0, 1 exited without finishing the command"), lines
        assert "Traceback" not in done.stderr, done.stderr[-2000:]


@pytest.mark.slow
def test_nproc_from_a_folder_of_decoys_trains_with_the_real_ampgan(tmp_path):
    """`ampgan train --nproc 2` run where an ampgan/ package, torch.py, numpy.py and click.py lie: the ranks
    train (steps in metrics.jsonl, a checkpoint) and nothing of the folder is imported."""
    folder = _decoy_folder(tmp_path / "project", package=True)
    out = tmp_path / "run"
    tiny = ["--dataset", "synthetic", "--width", "8", "--batch-size", "8", "--steps", "2", "--precision", "fp32"]
    rest = ["--device", "cpu", "--quiet", "--no-channels-last", "--no-compile", "--set", "model.z_dim=16"]
    # The parent as the `ampgan` script starts (its own folder, not the current one, on the path).
    done = subprocess.run(
        python_command("-m", "ampgan", "train", "--nproc", "2", *tiny, *rest, "--out", str(out)),
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _marks(folder) == [], done.stderr[-3000:]
    assert "trained 2 steps" in done.stdout and "batch 8 x 2 processes" in done.stdout, done.stdout
    assert (out / "metrics.jsonl").read_text().strip() and any((out / "checkpoints").iterdir())


def test_a_rank_leaves_its_receipt_only_when_launched(tmp_path, monkeypatch):
    from ampgan.training.launcher import RECEIPTS_ENV, finished_command

    monkeypatch.delenv(RECEIPTS_ENV, raising=False)
    monkeypatch.setenv("RANK", "1")
    finished_command()  # not under the launcher: nothing to write, nothing written
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(RECEIPTS_ENV, str(tmp_path))
    finished_command()
    assert [p.name for p in tmp_path.iterdir()] == ["rank-1"]
    monkeypatch.setenv(RECEIPTS_ENV, str(tmp_path / "gone"))
    finished_command()  # the launcher's folder is gone: nothing to tell, no error


def test_the_python_command_keeps_pythonpath(tmp_path):
    """-P, not -I: PYTHONPATH (how a checkout or these tests import ampgan) still reaches the child."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "only_on_pythonpath.py").write_text("VALUE = 7\n")
    env = os.environ | {"PYTHONPATH": str(tmp_path / "lib") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = "import only_on_pythonpath, sys; print(only_on_pythonpath.VALUE, sys.flags.safe_path)"
    done = subprocess.run(python_command("-c", code), env=env, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["7", "True"], done.stderr
    assert python_command("x")[0] == sys.executable


def test_python_m_ampgan_never_imports_the_current_folders_modules(tmp_path):
    """`python -m ampgan` run in a project holding torch.py, numpy.py and click.py imports the installed ones,
    as the `ampgan` command does (an ampgan.py there Python itself imports before ampgan runs: -P avoids it)."""
    folder = _decoy_folder(tmp_path / "project")
    (folder / "ampgan.py").unlink()
    done = subprocess.run(
        [sys.executable, "-m", "ampgan", "config", "--list"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "model.name" in done.stdout, done.stderr[-2000:]
    assert _marks(folder) == []


def test_a_deleted_current_folder_is_one_line_before_torch_loads_or_while_it_does(tmp_path, monkeypatch, capsys):
    """In a deleted current folder torch cannot load (MKL ends the process: 'Cannot load libtorch_cpu.so') and
    a path resolved while starting raises FileNotFoundError: the `ampgan` command, `python -m ampgan` and one
    deleted while ampgan starts each say so in one line, exit 2."""
    import ampgan.__main__ as entry

    for command in (["ampgan"], [sys.executable, "-m", "ampgan"]):
        done = subprocess.run(
            ["sh", "-c", 'mkdir gone && cd gone && rmdir ../gone && exec "$@" train --steps 1', "sh", *command],
            cwd=tmp_path,
            # an absolute PYTHONPATH: a relative one (the suite run as PYTHONPATH=src) cannot be resolved there
            env=os.environ
            | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "src")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and done.stderr.startswith("error: the current folder was deleted"), done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    import ampgan.cli

    real_getcwd = os.getcwd

    def gone():
        raise FileNotFoundError(2, "No such file or directory")

    def starting(argv):  # torch's import (abspath) or --out's resolve() after the folder went
        monkeypatch.setattr(os, "getcwd", gone)
        os.getcwd()

    monkeypatch.setattr(ampgan.cli, "main", starting)
    with pytest.raises(SystemExit) as stopped:
        entry.main(["train"])
    assert stopped.value.code == 2 and "the current folder was deleted" in capsys.readouterr().err
    monkeypatch.setattr(os, "getcwd", real_getcwd)
    monkeypatch.setattr(ampgan.cli, "main", lambda argv: open(tmp_path / "no-such-file"))  # a folder still there
    with pytest.raises(FileNotFoundError):
        entry.main(["train"])


def test_a_memory_limit_too_small_to_load_torch_is_one_line():
    """Under `ulimit -v` too small for torch's libraries the loader fails inside torch's import ('failed to map
    segment from shared object'): an ImportError traceback before any of ampgan's handlers existed."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_AS, (250 * 2**20, 250 * 2**20))

    done = subprocess.run(
        [sys.executable, "-m", "ampgan", "--help"],
        env=os.environ | {"PYTHONPATH": str(ROOT / "src")},
        preexec_fn=limited,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stderr.startswith(
        "error: torch could not be loaded under this process's memory limit of 250 MiB"
    ), done.stderr[-2000:]
    assert "raise it (ulimit -v)" in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
