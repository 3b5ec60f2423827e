"""The README's command table, generated from the commands themselves so it cannot drift from ``--help``.

``python -m bon.cli.usage`` prints the table; ``tests/test_cli_grammar.py`` checks that the README holds
exactly this table between its ``<!-- commands -->`` markers. Each row: every argument and option as
``--help`` spells it (optional ones in brackets, repeatable ones with ``...``) and the command's summary.
"""

from __future__ import annotations

from typing import Iterator

import click

BEGIN, END = "<!-- commands -->", "<!-- /commands -->"


def commands(group: click.Group, prefix: str = "bon") -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every leaf command under ``group`` with its full name (``bon mmrb2 judge``), sorted by name."""
    parent = click.Context(group, info_name=prefix)
    for name in sorted(group.list_commands(parent)):
        cmd = group.get_command(parent, name)
        if cmd is None or cmd.hidden:
            continue
        path = f"{prefix} {name}"
        if isinstance(cmd, click.Group):
            yield from commands(cmd, path)
        else:
            yield path, cmd, click.Context(cmd, info_name=name, parent=parent)


def synopsis(path: str, cmd: click.Command, ctx: click.Context) -> str:
    parts = [path]
    for param in cmd.get_params(ctx):
        if isinstance(param, click.Argument):
            word = param.make_metavar(ctx)
            parts.append(word if param.required else f"[{word}]")
            continue
        record = param.get_help_record(ctx)
        if record is None or "--help" in param.opts:
            continue
        word = record[0] + (" ..." if getattr(param, "multiple", False) else "")
        parts.append(word if param.required else f"[{word}]")
    return " ".join(parts)


def summary(cmd: click.Command) -> str:
    return " ".join(cmd.get_short_help_str(limit=1000).split())


def table() -> str:
    from bon.cli import app

    rows = ["| command | what it does |", "| --- | --- |"]
    for path, cmd, ctx in commands(app):
        rows.append(f"| `{_cell(synopsis(path, cmd, ctx))}` | {_cell(summary(cmd))} |")
    return "\n".join(rows)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    print(table())
