"""`ampgan config --list`: every setting a command reads, its default, its flag and its help, made from the specs'
declarations (sections.py settings), as docs/config.md's table is: `ampgan config --write docs/config.md` writes
it there anew."""

from __future__ import annotations

from pathlib import Path

import click

from ampgan.cli.options import ShellPath
from ampgan.errors import AmpganError, say
from ampgan.files.atomic import write_text_atomically
from ampgan.sections import own_settings, settings

_TABLE = "<!-- settings:begin -->\n"


def setting_rows() -> list[tuple[str, str, str, str]]:
    """(path, default, flag or '', help): every config field, then the study's and the bench's own settings
    (`--set compare.FIELD=VALUE`, `--set bench.FIELD=VALUE`)."""
    from ampgan.bench.spec import BenchSpec
    from ampgan.config import TrainConfig
    from ampgan.study.spec import CompareSpec

    own = [*own_settings(CompareSpec(), "compare.").values(), *own_settings(BenchSpec(), "bench.").values()]
    return [(s.path, _shown(s.default), s.flag or "", s.help) for s in [*settings(TrainConfig()), *own]]


def _shown(value) -> str:
    if value is None:
        return "(none)"
    return (",".join(map(str, value)) or "(none)") if isinstance(value, tuple) else str(value)


def markdown() -> str:
    """The settings as docs/config.md's table."""
    return "\n".join(
        [
            "| setting (`--set`) | default | flag | what |",
            "|---|---|---|---|",
            *(
                f"| `{path}` | {default} | {f'`{flag}`' if flag else ''} | {text.replace('|', '/')} |"
                for path, default, flag, text in setting_rows()
            ),
            "",
        ]
    )


@click.command("config")
@click.option("--list", "list_", is_flag=True, default=True, help="List every setting (the default).")
@click.option("--markdown", "as_markdown", is_flag=True, help="As a Markdown table (docs/config.md embeds it).")
@click.option(
    "--write",
    "page",
    type=ShellPath(dir_okay=False, exists=True),
    help="Write the Markdown table into this page between its settings markers (docs/config.md).",
)
def command(list_: bool, as_markdown: bool, page: Path | None) -> None:
    """Every setting: its path for --set PATH=VALUE (or a config file), its default and its flag, if any.
    Model options are set as --set model.OPTION=VALUE (a model's function lists its own)."""
    if page is not None:
        head, found, rest = page.read_text(encoding="utf-8").partition(_TABLE)
        if not found or "<!--" not in rest:
            raise AmpganError(f"{page} has no settings markers ({_TABLE.strip()} ... <!-- settings:end -->)")
        write_text_atomically(page, head + _TABLE + markdown() + "<!--" + rest.split("<!--", 1)[1])
        return
    if as_markdown:
        say(*markdown().splitlines())
        return
    rows = setting_rows()
    width = max(len(path) for path, *_ in rows)
    say(*(f"{path:<{width}}  {default:<14} {flag:<16} {text}" for path, default, flag, text in rows))
