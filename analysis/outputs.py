"""Every file of a report, written from one report model (:class:`analysis.bundle.ReportBundle`): the
figures, the CSV tables, ``report.json``, and the two renderings, ``report.md`` (:mod:`analysis.report`)
and ``report.html`` (:mod:`analysis.html_report`). The renderers only format the model, and neither
imports the other, so the files can never disagree."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from analysis.bundle import ReportBundle, Then
from analysis.html_report import render_run, sample_section
from analysis.predictors import figure_title
from analysis.report import correlation_note, render_markdown
from analysis.tradeoff import tradeoff_figure
from bon.errors import BonError
from bon.runfolder import RunFolder, write_bytes, write_json, write_text


def write_report(bundle: ReportBundle, out: RunFolder, sample_prompts: int = 1) -> dict[str, Path]:
    """Draw the figures and write every file of the bundle into ``out``; returns what was written.

    Figures drawn during the analysis (:func:`figures_while_computing`) are copied in. What is left to make
    (the other figures; the sample prompts' thumbnails, ``sample_prompts`` per task, unless
    :func:`analysis.bundle.compute` rendered them) is made by forked workers, one job each
    (:func:`bon.stages.pool.jobs_started`; ``BON_WORKERS=1``: in this process), while this process writes
    the tables, ``report.json`` and ``report.md`` (which links the figures by file name), then makes the cheapest
    job when there are more jobs than workers; ``report.html``, which holds the figures, comes last. With
    nothing left to make (``bon report``, the demo), ``report.md`` and ``report.html`` are written side by side
    by two workers while this process writes the tables and ``report.json``: they are most of what is left."""
    from bon.stages.pool import cpu_workers, jobs_started, run_named

    out.require_writable()
    out.figures.mkdir(parents=True, exist_ok=True)
    made = {name: [_copied(path, out.figures) for path in paths]
            for drawn in bundle.then.values() for name, paths in (drawn or {}).items()}
    jobs = [job for job in figure_jobs(out, bundle) if job[0] not in made]
    if bundle.samples is None:  # not rendered by compute already
        jobs.append((SAMPLES, lambda: sample_section(bundle, sample_prompts)))
    numbers = bundle.payload()
    if not jobs:
        bundle.figures = made
        run_named({"markdown": lambda: write_text(out.report, render_markdown(bundle, out)),
                   "html": lambda: write_text(out.report_html, render_run(bundle, sample_prompts, bundle.samples, numbers))},
                  meanwhile=lambda: _write_numbers(bundle, out, numbers))
        return _written(bundle, out)
    jobs.sort(key=lambda job: -JOB_COSTS.get(job[0], 1.0))  # the costliest first: the workers finish together
    # more jobs than workers: this process draws the cheapest itself once its files are written (it would only wait)
    own = jobs[-1:] if 1 < cpu_workers(len(jobs)) < len(jobs) else []
    forked = jobs[:len(jobs) - len(own)]
    with jobs_started(lambda i: forked[i][1](), len(forked), cpu_workers(len(forked))) as results:
        _write_numbers(bundle, out, numbers)
        bundle.figures = {}  # report.md links each figure by its file name in ``out``, fixed before it is drawn
        write_text(out.report, render_markdown(bundle, out))
        made.update((name, draw()) for name, draw in own)
        made.update(zip((name for name, _ in forked), results))
    samples = made.pop(SAMPLES, bundle.samples)
    bundle.figures = {name: made[name] for name, _ in figure_jobs(out, bundle) if name in made}  # the report's order
    write_text(out.report_html, render_run(bundle, sample_prompts, samples, numbers))
    return _written(bundle, out)


def _write_numbers(bundle: ReportBundle, out: RunFolder, numbers: dict) -> None:
    """Every table's CSV file and ``report.json`` (``numbers``: the bundle's payload)."""
    for name, table in bundle.tables().items():
        write_text(getattr(out, name), table.to_csv(index=False, float_format="%.6g"))
    write_json(out.report_json, numbers)


def _written(bundle: ReportBundle, out: RunFolder) -> dict[str, Path]:
    return {**{name: getattr(out, name) for name in bundle.tables()}, "json": out.report_json,
            "markdown": out.report, "html": out.report_html}


def _copied(path: Path, folder: Path) -> Path:
    """``path`` copied into ``folder`` (atomically, as every file of the report), the copy's path."""
    target = folder / path.name
    write_bytes(target, path.read_bytes())
    return target


@contextlib.contextmanager
def figures_while_computing() -> Iterator[dict[str, Then]]:
    """:func:`analysis.bundle.compute`'s ``then``: each figure drawn in the worker that computed the part it
    shows (:data:`FIGURE_PARTS`), right after it, so no second round of workers waits for every part. They are
    drawn into a scratch folder, removed on leaving the block: :func:`write_report` (called in the block) copies
    them into the report, so nothing reaches the report's folder before it is written (a degenerate analysis
    writes nothing)."""
    try:
        scratch = RunFolder(Path(tempfile.mkdtemp(prefix="bon-figures-")))
    except OSError as exc:
        raise BonError(f"{exc.filename or 'TMPDIR'}: cannot create a scratch folder for the figures "
                       f"({exc.strerror or exc}); set TMPDIR to a writable folder") from None
    try:
        yield {part: Then(partial(_part_figures, scratch, part), JOB_COSTS.get(name, 1.0))
               for name, part in FIGURE_PARTS.items()}
    finally:
        shutil.rmtree(scratch.root, ignore_errors=True)


def _part_figures(folder: RunFolder, part: str, bundle: ReportBundle) -> dict[str, list[Path]]:
    """The figures showing ``part`` drawn into ``folder``, by name."""
    return {name: draw() for name, draw in figure_jobs(folder, bundle) if FIGURE_PARTS.get(name) == part}


SAMPLES = "samples"  # the job that renders the sample prompts (not a figure)
FIGURE_PARTS = {"correlation": "correlations", "reranker": "leaderboards", "power": "power"}  # the part each shows
# rough CPU seconds of each job on the demo (one core); the others count 1
JOB_COSTS = {"reranker": 1.0, "correlation": 0.9, SAMPLES: 0.45, "power": 0.3}


def import_plotting() -> None:
    """Import the figures' modules (matplotlib is slow to import), for :func:`analysis.bundle.compute`'s
    ``meanwhile``: the workers forked afterwards inherit them."""
    import analysis.figures  # noqa: F401
    import analysis.plots  # noqa: F401


def figure_jobs(folder: RunFolder, b: ReportBundle) -> list[tuple[str, Callable[[], list[Path]]]]:
    """(name, draw) of every figure the bundle has data for, in the report's order."""
    from analysis.figures import bon_curves_figure, power_figure, reranker_figure
    from analysis.plots import correlation_figure

    left_out = b.excluded_judges
    note = correlation_note(b.bootstrap, b.seed, left_out)

    def correlation() -> list[Path]:
        png = correlation_figure(b.metrics[~b.metrics["judge"].isin(left_out)], folder.figure, intervals=b.correlations,
                                 formats=("png", "svg"), note=note, title=figure_title(b.study))
        return [png, png.with_suffix(".svg")]

    jobs: list[tuple[str, Callable[[], list[Path]]]] = [("correlation", correlation)]
    if not b.leaderboards.empty:
        jobs.append(("reranker", lambda: reranker_figure(b.leaderboards, folder.figure_file("reranker"))))
    if b.curves is not None and not b.curves.empty:
        jobs.append(("curves", lambda: bon_curves_figure(b.curves, folder.figure_file("curves"))))
    if b.power:
        jobs.append(("power", lambda: power_figure(b.power["grid"], folder.figure_file("power"), b.power["width"])))
    if b.tradeoff and b.tradeoff.get("records"):
        jobs.append(("tradeoff", lambda: [tradeoff_figure(b.tradeoff["records"], folder.figure_file("tradeoff"))]))
    return jobs
