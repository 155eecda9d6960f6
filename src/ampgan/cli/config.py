"""`ampgan config --list`: every setting a command reads, where it is declared, its default and its flag."""

from __future__ import annotations

import click

from ampgan.config.flags import flag_for_path, spec_settings
from ampgan.errors import say


def setting_rows() -> list[tuple[str, str, str, str]]:
    """(path, default, flag or '', help): every config field, then the study's and the bench's own
    settings (`--set compare.FIELD=VALUE`, `--set bench.FIELD=VALUE`)."""
    from ampgan.bench.spec import BenchSpec
    from ampgan.config import TrainConfig
    from ampgan.study.spec import CompareSpec

    rows = []
    for path, default in TrainConfig().paths().items():
        flag = flag_for_path(path)
        rows.append((path, _shown(default), flag.option if flag and flag.common else "", flag.help if flag else ""))
    for section, spec in (("compare", CompareSpec), ("bench", BenchSpec)):
        for name, default, declared in spec_settings(spec):
            # A nested spec's settings (compare.bench.*) have no flag: --set reaches them.
            option = (
                (declared["flag"] or "--" + name.replace("_", "-")) if declared["common"] and "." not in name else ""
            )
            rows.append((f"{section}.{name}", _shown(default), option, declared["help"]))
    return rows


def _shown(value) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "(none)"
    if isinstance(value, dict):
        return "(the model's)"
    return str(value)


@click.command("config")
@click.option("--list", "list_", is_flag=True, default=True, help="List every setting (the default).")
@click.option("--markdown", is_flag=True, help="As a Markdown table (docs/config.md embeds it).")
def command(list_: bool, markdown: bool) -> None:
    """Every setting: its path for --set PATH=VALUE (or a config file), its default and its flag, if any.
    Model options are set as --set model.OPTION=VALUE (a model's function lists its own)."""
    rows = setting_rows()
    if markdown:
        say("| setting (`--set`) | default | flag | what |", "|---|---|---|---|")
        for path, default, flag, text in rows:
            say(f"| `{path}` | {default} | {f'`{flag}`' if flag else ''} | {text.replace('|', '/')} |")
        return
    width = max(len(path) for path, *_ in rows)
    for path, default, flag, text in rows:
        say(f"{path:<{width}}  {default:<14} {flag:<16} {text}")
