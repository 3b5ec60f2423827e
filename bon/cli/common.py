"""What every ``bon`` command shares: the click group, the one-line error handling of :func:`main`, the
option helpers. The commands import this module; ``bon/cli/__init__.py`` imports the commands (registering
them), so nothing imports back up."""

from __future__ import annotations

import math
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, Callable

import click
from rich.console import Console

from bon import __version__
from bon.errors import BonError, Stopped

out = Console(soft_wrap=True, markup=False)  # labels and flags ("[left out: ...]") are text, never markup
PLUGIN_KINDS = ("judge", "strategy", "generator", "verifier")


@click.group(help="Best-of-N validation for Multimodal RewardBench 2 judges.")
@click.version_option(__version__, "--version", prog_name="bon", message="%(prog)s %(version)s")
def app() -> None:
    pass


@app.group("mmrb2")
def mmrb2_app() -> None:
    """The MMRB2 benchmark: fetch it, judge it, score and diagnose judgment files."""


def reuse_freed_memory(limit: int = 256 * 2**20) -> None:
    """Let glibc keep and reuse freed blocks up to ``limit`` bytes instead of handing each back to the kernel.

    By default every block over ~128 KB is its own mapping: each numpy temporary of the analysis (bootstrap
    and permutation arrays, power simulations) is unmapped when freed and page-faulted in again on the next
    allocation (``benchmarks/analysis_speed.py`` times ``bon report`` with it). Called by ``bon report``,
    which holds few images; a no-op where the C library is not glibc."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_mmap_threshold, limit)
    mallopt(m_trim_threshold, limit)


def _fmt(v: float, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def parse_options(options: tuple[str, ...], flag: str = "--option") -> dict[str, Any]:
    """``K=V`` strings (values read as YAML, so ``3`` is an int and ``[a, b]`` a list) into a dict. A value
    with a ``#`` at its start or after a space is text as given: YAML would read the rest as a comment and
    cut a path (``replay:runs/try #2.jsonl``) or a colour (``#ff0000``) short."""
    import re

    import yaml

    parsed: dict[str, Any] = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not key.strip():
            raise BonError(f"{flag} {opt!r:.80}: expected KEY=VALUE")
        if re.search(r"(^|\s)#", value):
            parsed[key.strip()] = value
            continue
        try:
            parsed[key.strip()] = yaml.safe_load(value)
        except (yaml.YAMLError, ValueError):  # ValueError: an integer of more than 4300 digits
            raise BonError(f"{flag} {opt!r:.80}: the value is not valid YAML") from None
    return parsed


def plugin_options(kind: str, help_text: str | None = None) -> Callable:
    """The repeatable ``--<kind>-option K=V`` flag of one plugin kind (``kind_options`` in the function)."""
    if kind not in PLUGIN_KINDS:
        raise ValueError(f"unknown plugin kind {kind!r}")
    return click.option(f"--{kind}-option", f"{kind}_options", multiple=True, metavar="K=V",
                        help=help_text or f"{kind.capitalize()} option (YAML value), repeatable.")


def json_option(what: str = "the printed numbers") -> Callable:
    return click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
                        help=f"Also write {what} as JSON to FILE.", metavar="FILE")


def retry_missing_option() -> Callable:
    """``--retry-missing``: stored missing answers (unparseable, refused) of judges that sample are asked again."""
    return click.option("--retry-missing", is_flag=True,
                        help="Ask again the missing (unparseable) answers earlier runs stored, for judges that sample.")


def run_option(help_text: str = "An existing run folder.") -> Callable:
    return click.option("--run", "run_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
                        metavar="DIR", help=help_text)


def check_output_file(path: Path | None, flag: str = "--json") -> None:
    """Fail before any work when an output file could not be written (a folder, a missing parent)."""
    if path is None:
        return
    if path.is_dir():
        raise BonError(f"{flag} {path}: is a folder, expected a file")
    parent = path.parent if str(path.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise BonError(f"{flag} {path}: {parent} is not a folder")


def write_numbers(json_out: Path | None, record: Any) -> None:
    """``--json FILE``: the printed numbers as strict JSON (a missing number is null, never NaN)."""
    if json_out is not None:
        from bon.runfolder import write_json

        try:
            write_json(json_out, record)
        except OSError as exc:
            raise BonError(f"{json_out}: cannot write ({exc.strerror})") from None


def exit_if_calls_pending(pending: int) -> None:
    """Exit 3 with one line while transient failures (a dead server, timeouts, 5xx) left calls
    unanswered: nothing of theirs is stored as final, and the same command asks them again."""
    if pending:
        print(f"bon: {pending} calls pending after transient failures; rerun the same command to continue", file=sys.stderr)
        raise click.exceptions.Exit(3)


def main(argv: list[str] | None = None) -> int:
    one_thread_per_library()
    try:
        return _main(argv)
    finally:
        _stop_forked_workers()


def one_thread_per_library() -> None:
    """numpy's OpenBLAS and OpenCV run each call on a thread per core. bon's calls are small (bootstrap weights
    times pair outcomes; 128-px pictures) and its CPU work already runs one forked worker per core, so those
    threads mostly spin, several times the CPU time of one thread for a bootstrap product or for labelling a
    picture's blobs. So one each, unless the user set it; it must be set before the library loads (the
    commands import them lazily)."""
    for module, variable in (("numpy", "OPENBLAS_NUM_THREADS"), ("cv2", "OPENCV_FOR_THREADS_NUM")):
        if module not in sys.modules:
            os.environ.setdefault(variable, "1")


def _stop_forked_workers() -> None:
    """No forked worker outlives the command, however it ended (see ``stop_all_workers``)."""
    pool = sys.modules.get("bon.stages.pool")
    if pool is not None:
        pool.stop_all_workers()


def _main(argv: list[str] | None) -> int:
    try:
        rc = app.main(args=argv, prog_name="bon", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        _stop_forked_workers()  # before the line: after it, nothing of the run prints
        print("bon: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
    except Stopped as exc:  # what was done is kept: rerunning the same command continues
        print(f"bon: stopped: {_error_line(exc)}", file=sys.stderr)
        return 3
    except (BonError, click.ClickException, OSError, sqlite3.DatabaseError) as exc:
        print(f"bon: error: {_error_line(exc)}", file=sys.stderr)
        if _locked(exc):
            return 3  # transient: another writer held the store too long; nothing is lost, rerun
        return exc.exit_code if isinstance(exc, click.ClickException) else 2  # a usage error's is 2 too
    return rc if isinstance(rc, int) else 0


def _locked(exc: Exception) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _error_line(exc: Exception) -> str:
    """What follows ``bon: error:``: one line, never a traceback, never a secret."""
    from bon.redact import redact_text

    return redact_text(_error_text(exc))


def _error_text(exc: Exception) -> str:
    if isinstance(exc, click.UsageError):  # BadParameter, NoSuchOption, MissingParameter...: names the command
        command = exc.ctx.command_path if exc.ctx is not None else "bon"
        message = " ".join(exc.format_message().split())
        return f"{message} (see `{command} --help`)" if command == "bon" else f"{command}: {message} (see `{command} --help`)"
    if isinstance(exc, click.ClickException):
        return " ".join(exc.format_message().split())
    if isinstance(exc, OSError):  # a read-only folder, a full disk: naming the file
        return f"{exc.filename}: {exc.strerror or exc}" if exc.filename else str(exc.strerror or exc)
    where = "judgment store: " if isinstance(exc, sqlite3.DatabaseError) else ""  # e.g. a read-only folder
    rerun = "; another bon process is writing it: rerun when it is done" if _locked(exc) else ""
    return where + " ".join(str(exc).split()) + rerun
