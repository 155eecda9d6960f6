"""The front page and the docs a newcomer reads: short, every link resolving, the example answer in the
format the code prints today."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from readme_answer import recorded_block  # noqa: E402


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    text = "\n".join(lines)
    # The two commands a newcomer needs, and the one CI runs verbatim.
    assert ".venv/bin/ampgan compare --out runs/compare" in text
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in text


def test_every_relative_link_in_the_readme_and_the_docs_resolves():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+://", target) or target.startswith("#"):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def _shape(line: str) -> str:
    """A verdict line's format: its words, with every number (and the machine's name) left out."""
    line = re.sub(r"\(on this machine \([^)]*\)\)|On this machine \([^)]*\)|On this [^,]*,", "On this MACHINE,", line)
    return re.sub(r"[-+]?\d[\d.,]*", "N", line)


def test_the_recorded_answer_has_the_format_the_code_prints(tmp_path):
    from ampgan.projection.document import summary_line
    from ampgan.study.document import CompareDocument
    from ampgan.study.verdict import no_faster_mode_verdict

    recorded = recorded_block((ROOT / "README.md").read_text())
    assert recorded and not any(line.startswith("error") for line in recorded)
    if recorded[0].startswith("On this machine (") and "no mixed-precision mode" in recorded[0]:
        document = {
            "environment": {"hardware_summary": "AMD EPYC, 2 cores, 2 threads [no AVX-512 bf16/fp16 or AMX]"},
            "spec": {"batch_size": 64, "model": "acgan"},
            "decisions": {
                "bf16": {"verdict": "slower", "step_s": 6.0, "fp32_step_s": 0.339},
                "fp16": {"verdict": "slower", "step_s": 7.1, "fp32_step_s": 0.339},
            },
            "left_out": [{"precision": "tf32", "reason": "a CUDA tensor-core mode"}],
        }
        document["projection"] = {
            "line": summary_line(
                {
                    "rows": [
                        {
                            "device": device,
                            "batch_size": batch,
                            "status": "ok",
                            "precision": name,
                            "speedup": 1.5,
                            "speedup_low": 1.4,
                            "speedup_high": 1.9,
                        }
                        for device in ("T4", "V100", "A100", "H100")
                        for batch in (64, 2048)
                        for name in ("fp32", "fp16")
                    ]
                }
            )
        }
        printed = no_faster_mode_verdict(CompareDocument.from_dict(document))
        assert [_shape(line)[:60] for line in recorded] == [_shape(line)[:60] for line in printed]
    else:  # a race: each line opens as one of the verdict's sentences does today (study/verdict.py)
        openings = (
            "On this MACHINE, ",
            "Seed N ran off the bench's pace: ",
            "Final evaluator accuracy: ",
            "Final Fréchet distance ",
            "Target evaluator accuracy ",
            "Target Fréchet distance ",
            "Neither precision",
            "Flags at the end of training: ",
            "Times to the target are interpolated",
            "On GPUs this machine does not have, PROJECTED",
        )
        assert all(_shape(line).startswith(openings) for line in recorded), recorded


def test_the_layout_page_names_every_module_and_every_layer():
    """docs/layout.md's map of the tree and its chain of layers match the code (a module added or a layer
    added to pyproject.toml without a line there fails here)."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "layout.md").read_text()
    block = text.split("```\nsrc/ampgan/\n", 1)[1].split("```", 1)[0]
    sections, current = {}, ""
    for line in block.splitlines():
        match = re.match(r"^  (\w+)(/|\.py)\s", line)
        if match:
            current = match.group(1) + match.group(2)
            sections[current] = line
        elif line.startswith("    ") and current:
            sections[current] += " " + line
    missing = []
    package_root = root / "src" / "ampgan"
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(package_root)
        if path.name in ("__init__.py", "__main__.py") or "templates" in relative.parts:
            continue
        if len(relative.parts) == 1:
            if f"{path.stem}.py" not in sections and path.stem not in ("api",):
                missing.append(str(relative))
            continue
        package = relative.parts[0] + "/"
        words = set(re.findall(r"[\w.]+", sections.get(package, "")))
        if package not in sections or not (
            {path.stem, path.name, f"{path.stem}.py"} & words or relative.parts[1] + "/" in sections[package]
        ):
            missing.append(str(relative))
    assert not missing, f"docs/layout.md does not name: {', '.join(missing)}"
    layers = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    chain = text.split("imports point down only (", 1)[1].split(")", 1)[0]
    named = set(re.findall(r"`(\w+)`", chain))
    packages = {name.strip().removeprefix("ampgan.") for layer in layers for name in layer.split("|")}
    assert packages - {"api"} <= named, f"the layer chain leaves out {sorted(packages - {'api'} - named)}"


def test_the_settings_table_and_the_help_come_from_the_declarations(capsys):
    """docs/config.md's table is what `ampgan config --markdown` prints now; --help lists at most 25 options
    per command, and a flag that moved under --set still works, with one notice."""
    import click
    from conftest import run_cli

    from ampgan.cli import cli

    root = Path(__file__).resolve().parents[1]
    code, table, _ = run_cli(capsys, "config", "--markdown")
    assert code == 0
    documented = (root / "docs" / "config.md").read_text().split("<!-- settings:begin -->\n")[1].split("<!--")[0]
    assert documented == table, "docs/config.md's settings table is stale: ampgan config --write docs/config.md"
    for name, command in cli.commands.items():
        shown = [p for p in command.params if isinstance(p, click.Option) and not p.hidden]
        assert len(shown) <= 25, f"ampgan {name} --help lists {len(shown)} options"
    # A setting without a flag is no option of any command (options parsed = options shown): its flag, given,
    # is one error line naming its --set path, for a config field and for a command's own setting alike.
    for command, flag, path in [
        ("train", "--z-dim", "model.z_dim"),
        ("train", "--keep", "checkpoints.keep"),
        ("compare", "--eval-points", "compare.eval_points"),
        ("bench", "--warmup", "bench.warmup"),
        # Variants: a field beside a flagged one, a nested spec's setting, a renamed flag, a model option.
        ("train", "--every-s", "checkpoints.every_s"),
        ("compare", "--peak-tflops", "compare.bench.peak_tflops"),
        ("compare", "--bench", "compare.bench_results"),
        ("doctor", "--tensorboard", "logging.tensorboard"),
        ("bench", "--z-dim", "model.z_dim"),
        # A removed flag of the config tree itself (TrainConfig.MOVED), on any command.
        ("train", "--lr", "optim.lr_g"),
        ("compare", "--lr", "optim.lr_g"),
    ]:
        code, out, err = run_cli(capsys, command, "--dataset", "synthetic", flag, "12", "--device", "cpu")
        assert code == 2 and f"{flag} is no option: write --set {path}=VALUE" in err and err.count("\n") == 1, err
    for name, command in cli.commands.items():
        parsed = [p for p in getattr(command, "params", ()) if isinstance(p, click.Option)]
        assert all(not p.hidden for p in parsed), f"ampgan {name} parses options --help does not show"
    code, out, err = run_cli(
        capsys, "train", "--dataset", "synthetic", "--set", "model.z_dim=12", "--dry-run", "--device", "cpu"
    )
    assert code == 0 and '"z_dim": 12' in out


def test_each_commands_options_are_its_specs_flags():
    """One walk of a command's spec makes its options: each setting's flag is the option of that name, with no
    default of its own (the spec's applies); compare's bench settings have none (`--set` only)."""
    import click

    from ampgan.bench.spec import BenchSpec
    from ampgan.cli import cli
    from ampgan.config import TrainConfig
    from ampgan.sections import settings
    from ampgan.study.spec import CompareSpec

    for name, spec, prefix in [
        ("train", TrainConfig(), ""),
        ("compare", CompareSpec(), "compare."),
        ("bench", BenchSpec(), "bench."),
    ]:
        options = {p.name: p for p in cli.commands[name].params if isinstance(p, click.Option)}
        flagged = {s.name: s for s in settings(spec, prefix) if s.flag and s.name in options}
        assert all(options[n].opts[0] == s.flag and options[n].default is None for n, s in flagged.items())
        assert {s.path for s in flagged.values()} >= {"data.dataset", "model.name", "seed"}
    assert len([s for s in settings(TrainConfig()) if s.flag]) == 16  # train shows every config flag
    assert not [s for s in settings(CompareSpec(), "compare.") if s.path.startswith("compare.bench.") and s.flag]


def test_the_settings_page_is_written_by_the_generator(tmp_path, capsys):
    """`ampgan config --write PAGE` puts the table between the page's markers, and leaves the rest; a page
    without them is one error line."""
    from conftest import run_cli

    page = tmp_path / "config.md"
    page.write_text("intro\n<!-- settings:begin -->\nold\n<!-- settings:end -->\nafter\n")
    assert run_cli(capsys, "config", "--write", str(page))[0] == 0
    code, table, _ = run_cli(capsys, "config", "--markdown")
    assert page.read_text() == "intro\n<!-- settings:begin -->\n" + table + "<!-- settings:end -->\nafter\n"
    (tmp_path / "plain.md").write_text("no markers\n")
    code, _, err = run_cli(capsys, "config", "--write", str(tmp_path / "plain.md"))
    assert code == 2 and "has no settings markers" in err and err.count("\n") == 1


def _pages():
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _flags_of_every_command() -> dict[str, set[str]]:
    """{'train': {'--precision', ...}, 'data info': {...}, ...}: every option ampgan parses, by command."""
    import click

    from ampgan.cli import cli

    found, todo = {}, [(name, command) for name, command in cli.commands.items()]
    while todo:
        name, command = todo.pop()
        found[name] = {o for p in command.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
        found[name] |= {"-h", "--help"}
        if isinstance(command, click.Group):
            todo += [(f"{name} {sub}", each) for sub, each in command.commands.items()]
    return found


# Flags the docs name that are other programs' (torchrun, pip, pytest, the NVIDIA scripts docs/projection.md
# quotes), and setting names docs/config.md names as what is NOT a flag. Checked below to be no ampgan option.
_NOT_AMPGANS = {
    "--nproc-per-node", "--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--virtual-local-rank", "--index-url",
    "--dist", "--no-loadscope-reorder", "--amp", "--opt_level", "--fp16", "--amp-run", "--no_amp_grouped_conv",
    "--z-dim", "--log-every", "--eval-points",
}  # fmt: skip


def test_every_flag_the_docs_name_is_one_the_command_takes():
    """A command line in the docs (`ampgan CMD ...`, fenced or inline, its indented continuation lines too) uses
    only that command's options, and a flag named alone (`--lr` in a table) is an option of some command or a
    benchmarks/ script's: a flag removed or renamed in the code and left in the docs fails here."""
    import re

    flags = _flags_of_every_command()
    scripts = {
        f for path in (ROOT / "benchmarks").rglob("*.py") for f in re.findall(r"\"(--[\w-]+)\"", path.read_text())
    }
    everyone = set().union(*flags.values()) | scripts
    assert not _NOT_AMPGANS & set().union(*flags.values())
    wrong = []
    for page in _pages():
        text = page.read_text()
        fenced = re.compile(r"^```.*?^```", re.S | re.M)
        lines = [line for block in fenced.findall(text) for line in block.splitlines()[1:-1]]
        lines += re.findall(r"`([^`\n]+)`", fenced.sub("", text))
        command = None
        for line in lines:
            called = re.search(r"ampgan (data \w+|\w+)", line)
            if called and called.group(1) in flags:
                command = called.group(1)
            elif not line.startswith(" "):
                command = None
            for flag in re.findall(r"(?<![\w-])(--[a-z][\w-]*)", line.split(" # ")[0]):
                ours = flags[command] if command and line.index(flag) > line.find("ampgan") else everyone
                if flag not in ours | _NOT_AMPGANS and not flag.endswith("-"):  # `--no-` is a prefix
                    wrong.append(f"{page.name}: {flag} in `{line.strip()[:70]}`")
    assert not wrong, wrong


def test_every_code_fence_in_the_docs_stands_alone_on_its_line():
    """A closing fence followed by text (``` The interval: ...) does not close: the rest of the page renders as
    code. Every line holding ``` is a fence and its language alone (indented inside a list item)."""
    import re

    wrong = [
        f"{page.name}:{number}: {line.strip()[:60]}"
        for page in [*_pages(), ROOT / "benchmarks" / "RESULTS.md"]
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if "```" in line and not re.fullmatch(r" *```\w*", line)
    ]
    assert not wrong, wrong


def test_every_repository_path_the_docs_name_exists():
    """`benchmarks/...`, `examples/...`, `tests/...`, `src/...` named in the README and docs/ (links are the test
    above) exist; a `<placeholder>` path is a pattern, left out."""
    import re

    missing = []
    for page in [*_pages(), ROOT / "benchmarks" / "RESULTS.md"]:
        text = page.read_text()
        for path in re.findall(r"(?<![\w/.-])((?:benchmarks|examples|tests|src|docs)/[\w./<>-]*[\w/>])", text):
            if "<" not in path and not (ROOT / path).exists() and not (page.parent / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, missing


def test_the_python_api_example_runs_with_its_own_settings(tmp_path):
    """examples/python_api.py as docs/your-gan.md runs it: its model at its settings' data size (it refused the
    digits' default 32 px in a ValueError); fewer steps and one precision here, the rest as the script has it."""
    import ampgan

    sys.path.insert(0, str(ROOT / "examples"))
    from python_api import SETTINGS, tiny_dcgan

    run = ampgan.train(
        tiny_dcgan,
        tmp_path / "run",
        settings={**SETTINGS, "budget.steps": 1, "budget.batch_size": 8, "compute.device": "cpu"},
    )
    assert run.steps == 1 and SETTINGS.get("data.dataset", "digits") == "digits"


def test_the_python_api_example_prints_a_precision_the_bench_could_not_time():
    """study.speedup[p] of a raced precision the bench left out (bf16 on a CPU without bf16 instructions) has no
    estimate but its reason: the example said so, where it stopped in a TypeError after the whole study."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "examples"))
    from python_api import answer

    study = SimpleNamespace(
        verdict=["On this machine ..."],
        speedup={
            "bf16": {"estimate": None, "reason": "more than 5x slower"},
            "fp16": {"estimate": 1.5, "low": 1.25, "high": 1.75},
        },
        final={"bf16": {"frechet_distance": 12.345}},
    )
    assert answer(study) == [
        "On this machine ...",
        "bf16: no bench speedup (more than 5x slower)",
        "fp16: 1.50x fp32's speed (95% CI 1.25-1.75)",
        "bf16: Fréchet distance 12.35, coverage 0.00",
    ]


def test_doctor_runs_at_the_batch_its_help_shows(capsys, monkeypatch):
    """A command whose defaults differ from training's shows its own in --help: doctor's batch (32, shown as 64)."""
    from conftest import run_cli

    import ampgan.doctor.preflight as preflight
    from ampgan.errors import AmpganError

    code, out, _ = run_cli(capsys, "doctor", "--help")
    shown = int(re.search(r"--batch-size INTEGER\s+Per process\. \[default: (\d+)\]", out).group(1))
    seen = []

    def stop(config, dataset=None, log=None, said=None):
        seen.append(config.budget.batch_size)
        raise AmpganError("stopped by the test")

    monkeypatch.setattr(preflight, "check_before_training", stop)
    code, _, err = run_cli(capsys, "doctor", "--dataset", "synthetic", "--device", "cpu")
    assert code == 2 and seen == [shown] == [32], err


def test_every_python_block_in_the_docs_parses_and_names_ampgans_api_as_it_is():
    """The snippets a user copies (README, docs/*.md): each is Python, and each `ampgan.NAME` (and `ctx.NAME` of a
    loss's context) it uses exists, with the keywords it passes: a renamed or removed API left in the docs fails."""
    import ast
    import dataclasses
    import inspect
    import re

    import ampgan
    from ampgan.gan.contract import LossContext

    context = {f.name for f in dataclasses.fields(LossContext)} | set(dir(LossContext))
    wrong = []
    for page in _pages():
        for block in re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M):
            tree = ast.parse(block)  # a SyntaxError names the page's snippet
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                    names = {"ampgan": set(dir(ampgan)) | set(ampgan.__all__), "ctx": context}.get(node.value.id)
                    if names is not None and node.attr not in names:
                        wrong.append(f"{page.name}: {node.value.id}.{node.attr}")
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if isinstance(node.func.value, ast.Name) and node.func.value.id == "ampgan":
                        called = getattr(ampgan, node.func.attr, None)
                        accepted = inspect.signature(called).parameters if called else {}
                        if not any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
                            wrong += [
                                f"{page.name}: ampgan.{node.func.attr}({k.arg}=)"
                                for k in node.keywords
                                if k.arg not in accepted
                            ]
    assert not wrong, wrong
