"""Analysis commands on finished studies: report, compare, power, leaderboard, figure.

Each computes everything first and writes only when it has a result worth keeping: a failure or a
degenerate analysis exits with one line and leaves the folder as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from bon.cli import _fmt, app, out
from bon.errors import BonError

RUN = click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A finished study folder.")
JSON = click.option("--json", "json_out", type=click.Path(path_type=Path), default=None,
                    help="Also write the numbers as strict JSON to this file.")


def _write_json(path: Optional[Path], data) -> None:
    if path is not None:
        from bon.runfolder import write_json

        try:
            write_json(path, data)
        except OSError as exc:
            raise BonError(f"{path}: cannot write ({exc.strerror})") from None


def _output_folder(run_dir: Path, out_dir: Optional[Path], accuracies: str):
    """The report's folder: the run's own for its own accuracies, ``report-<name>`` beside it otherwise."""
    from bon.runfolder import RunFolder

    run = RunFolder(run_dir, existing=True)
    if accuracies == "run":
        return RunFolder(out_dir or run_dir)
    target = out_dir or run.alternative(Path(accuracies).stem)
    if target.resolve() == run.root.resolve():
        raise BonError(f"--out {target}: an analysis with other accuracies must not replace the study's own report")
    return RunFolder(target)


@app.command()
@RUN
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Output folder (default: the run folder; RUN/report-<accuracies> for other accuracies).")
@click.option("--bootstrap", type=click.IntRange(min=100), default=1000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--accuracies", default="run", show_default=True,
              help="Judge axis: run (the study's preference set), published (the MMRB2 paper's table) or a CSV/JSON file.")
@click.option("--power/--no-power", default=True, show_default=True, help="Include the study-size simulation.")
@JSON
def report(run_dir: Path, out_dir: Optional[Path], bootstrap: int, seed: int, accuracies: str, power: bool,
           json_out: Optional[Path]) -> None:
    """report.md, report.html, CSV tables and figures for a finished study (no judge calls)."""
    from analysis.bundle import compute
    from analysis.report import write_report

    bundle = compute(run_dir, bootstrap=bootstrap, seed=seed, accuracies=accuracies, power=power)
    problem = bundle.degenerate()
    if problem:
        raise BonError(f"{run_dir}: {problem}; nothing written")
    folder = _output_folder(run_dir, out_dir, accuracies)
    try:
        written = write_report(bundle, folder)
    except OSError as exc:
        raise BonError(f"{exc.filename or folder.root}: cannot write the report ({exc.strerror})") from None
    pooled = bundle.pooled()
    out.print(f"pooled over settings: r = {_fmt(pooled['pearson_r'], '+.2f')} [{_fmt(pooled['pearson_lo'], '+.2f')}, "
              f"{_fmt(pooled['pearson_hi'], '+.2f')}], ρ = {_fmt(pooled['spearman_rho'], '+.2f')}, judges {pooled['n_judges']}")
    warnings = int(bundle.correlations["flag"].sum())
    out.print(f"report: {written['html']}  ({warnings} coefficients flagged as too uncertain)")
    _write_json(json_out, bundle.payload())


@app.command()
@click.option("--run", "runs", type=click.Path(path_type=Path), multiple=True, required=True,
              help="A finished study folder; give exactly two (A, then B).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Output folder (default: inside B).")
def compare(runs: tuple[Path, ...], out_dir: Optional[Path]) -> None:
    """Two studies side by side: Best-of-N and accuracy differences, correlations of both."""
    from analysis.html_report import compare_runs

    if len(runs) != 2:
        raise BonError(f"--run: give exactly two run folders (got {len(runs)})")
    out.print(f"comparison: {compare_runs(runs[0], runs[1], out_dir)}")


@app.command()
@RUN
@click.option("--width", type=float, default=0.5, show_default=True, help="Wanted width of the 95% interval of r.")
@click.option("--task", default=None, help="Only this task.")
@click.option("--generator", default=None, help="Only this generator.")
@click.option("--seed", type=int, default=0, show_default=True)
@JSON
def power(run_dir: Path, width: float, task: Optional[str], generator: Optional[str], seed: int,
          json_out: Optional[Path]) -> None:
    """How many prompts and judges a study needs for a correlation interval of a given width."""
    from analysis.power import format_power, power_analysis

    result = power_analysis(run_dir, width=width, task=task, generator=generator, seed=seed)
    out.print(format_power(result), highlight=False)
    _write_json(json_out, {k: result[k] for k in ("model", "width", "recommendation", "pairs", "grid", "pilot_settings")})


@app.command()
@RUN
@click.option("--task", required=True, help="t2i, edit, interleaved or reasoning.")
@click.option("--generator", required=True, help="A generator label of the study.")
@click.option("--strategy", default=None, help="Only picks of this strategy.")
@click.option("--seed", type=int, default=0, show_default=True)
@JSON
def leaderboard(run_dir: Path, task: str, generator: str, strategy: Optional[str], seed: int,
                json_out: Optional[Path]) -> None:
    """Which reranker to use: judges by Best-of-N gain, paired bootstrap against the best, gain per call and dollar."""
    from analysis.leaderboard import format_leaderboard, run_leaderboard

    table = run_leaderboard(run_dir, task, generator, strategy=strategy, seed=seed)
    out.print(format_leaderboard(table), highlight=False)
    _write_json(json_out, {"task": task, "generator": generator, "strategy": strategy, "leaderboard": table})


@app.command()
@click.option("--scores", "scores_csv", type=click.Path(path_type=Path), required=True,
              help="CSV: task, generator, judge, bon_score[, random_score, oracle_score][, n_prompts, bon_sd]; "
                   "a run folder's results.csv works.")
@click.option("--accuracies", default="published", show_default=True,
              help="published (the MMRB2 paper's table) or a CSV with judge, task, accuracy (e.g. a run's accuracies.csv).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Output folder for figures/correlation.png|svg and correlations.csv (default: <scores stem>_figure/ beside the CSV).")
def figure(scores_csv: Path, accuracies: str, out_dir: Optional[Path]) -> None:
    """The paper's correlation figure for your own Best-of-N scores."""
    from analysis.scores_figure import scores_figure

    result = scores_figure(scores_csv, accuracies=accuracies, out=out_dir)
    out.print(", ".join(f"{k}: {v}" for k, v in result.items() if k in ("png", "svg", "correlations", "matched", "left_out")))
