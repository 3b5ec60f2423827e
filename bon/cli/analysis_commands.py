"""Analysis commands on finished studies: report, compare, power, leaderboard, figure."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from bon.cli import _fmt, app, out


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A finished study folder.")
@click.option("--bootstrap", type=click.IntRange(min=100), default=1000, show_default=True, help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--accuracies", default="run", show_default=True,
              help="Judge axis: run (the study's preference set), published (the MMRB2 paper's table) or a CSV/JSON file.")
@click.option("--power/--no-power", default=True, show_default=True, help="Include the study-size simulation.")
def report(run_dir: Path, bootstrap: int, seed: int, accuracies: str, power: bool) -> None:
    """Statistics with intervals, leaderboard and report.html for a finished study (no judge calls)."""
    from analysis.full_report import build_report

    written = build_report(run_dir, bootstrap=bootstrap, seed=seed, accuracies=accuracies, power=power)
    pooled = written.get("pooled") or {}
    if pooled:
        out.print(f"pooled over settings: r = {_fmt(pooled['pearson_r'], '+.2f')} [{_fmt(pooled['pearson_lo'], '+.2f')}, "
                  f"{_fmt(pooled['pearson_hi'], '+.2f')}], ρ = {_fmt(pooled['spearman_rho'], '+.2f')}, judges {pooled['n_judges']}")
    out.print(f"report: {written['html']}  ({written['warnings']} coefficients flagged as too uncertain)")


@app.command()
@click.argument("run_a", type=click.Path(path_type=Path))
@click.argument("run_b", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Where to write (default: inside RUN_B).")
def compare(run_a: Path, run_b: Path, out_dir: Optional[Path]) -> None:
    """Two studies side by side: Best-of-N and accuracy differences, correlations of both."""
    from analysis.html_report import compare_runs

    out.print(f"comparison: {compare_runs(run_a, run_b, out_dir)}")


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A pilot study folder.")
@click.option("--width", type=float, default=0.5, show_default=True, help="Wanted width of the 95% interval of r.")
@click.option("--task", default=None, help="Only this task.")
@click.option("--generator", default=None, help="Only this generator.")
@click.option("--seed", type=int, default=0, show_default=True)
def power(run_dir: Path, width: float, task: Optional[str], generator: Optional[str], seed: int) -> None:
    """How many prompts and judges a study needs for a correlation interval of a given width."""
    from analysis.power import format_power, power_analysis

    out.print(format_power(power_analysis(run_dir, width=width, task=task, generator=generator, seed=seed)), highlight=False)


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A finished study folder.")
@click.option("--task", required=True, help="t2i, edit, interleaved or reasoning.")
@click.option("--generator", required=True, help="A generator label of the study.")
@click.option("--strategy", default=None, help="Only picks of this strategy.")
@click.option("--seed", type=int, default=0, show_default=True)
def leaderboard(run_dir: Path, task: str, generator: str, strategy: Optional[str], seed: int) -> None:
    """Which reranker to use: judges by Best-of-N gain, paired bootstrap against the best, gain per call and dollar."""
    from analysis.leaderboard import format_leaderboard, run_leaderboard

    out.print(format_leaderboard(run_leaderboard(run_dir, task, generator, strategy=strategy, seed=seed)), highlight=False)


@app.command()
@click.option("--scores", "scores_csv", type=click.Path(path_type=Path), required=True,
              help="CSV: task, generator, judge, bon_score[, random_score, oracle_score][, n_prompts, bon_sd].")
@click.option("--accuracies", default="published", show_default=True, help="published (the MMRB2 paper's table) or a file.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Output path without extension: writes OUT.png, OUT.svg, OUT_correlations.csv (default: beside the CSV).")
def figure(scores_csv: Path, accuracies: str, out_dir: Optional[Path]) -> None:
    """The paper's correlation figure for your own Best-of-N scores."""
    from analysis.full_report import scores_figure

    result = scores_figure(scores_csv, accuracies=accuracies, out=out_dir)
    out.print(", ".join(f"{k}: {v}" for k, v in result.items() if k in ("png", "svg", "correlations", "matched", "left_out")))


