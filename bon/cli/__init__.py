"""The ``bon`` command line. Bad input ends in one line on stderr (exit 2), never a traceback.

Commands live by subject: ``study_commands`` (demo, run, generate, verify, select, curve, plugins),
``analysis_commands`` (report, compare, power, leaderboard, figure) and ``mmrb2_commands`` (the benchmark group).
"""

from __future__ import annotations

import math
import sys

import click
from rich.console import Console

from bon.errors import BonError

out = Console(soft_wrap=True)


@click.group(help="Best-of-N validation for Multimodal RewardBench 2 judges.")
def app() -> None:
    pass


@app.group("mmrb2")
def mmrb2_app() -> None:
    """The MMRB2 benchmark: fetch it, judge it, score and diagnose judgment files."""


def _fmt(v: float, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _parse_options(options: tuple[str, ...]) -> dict:
    import yaml

    parsed = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not key:
            raise BonError(f"--option {opt!r}: expected KEY=VALUE")
        parsed[key] = yaml.safe_load(value)
    return parsed


def main(argv: list[str] | None = None) -> int:
    try:
        rc = app.main(args=argv, prog_name="bon", standalone_mode=False)
    except BonError as exc:
        print(f"bon: error: {exc}", file=sys.stderr)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        print("bon: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    return rc if isinstance(rc, int) else 0


from bon.cli import analysis_commands, mmrb2_commands, study_commands  # noqa: E402,F401  (register the commands)
from bon.cli import tradeoff_commands  # noqa: E402,F401  (bon tradeoff, bon mmrb2 flips)
