"""``bon predict``: a judge's Best-of-N gain predicted from its MMRB2 accuracy on a finished study's line
(:mod:`analysis.prediction`), before paying for its generation and judging."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from bon.cli.common import app, check_output_file, json_option, out, run_option, write_numbers
from bon.errors import BonError


@app.command()
@run_option("A finished study whose judges fit the line.")
@click.option("--predictions", multiple=True, metavar="LABEL=FILE[,FILE...]",
              help="A new judge's official-format judgment files on the study's own preference set (one per task; the "
                   "task from its pair ids), scored with the official scorer. Repeatable.")
@click.option("--accuracies", "table", default=None, metavar="FILE",
              help="An accuracy table (judge, task, accuracy[, usd_per_call][, axis]) like analysis/data/mmrb2_published.csv, "
                   "or 'published': every judge in it (with prices: ranked by predicted gain per dollar).")
@click.option("--accuracy", "given", multiple=True, metavar="LABEL=TASK:VALUE",
              help="A judge's accuracy (%) on the study's own axis, e.g. newjudge=t2i:71.5. Repeatable.")
@click.option("--task", default=None, metavar="TASK", help="Only this task.")
@click.option("--generator", default=None, metavar="LABEL", help="Only this generator.")
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.9, show_default=True, metavar="P",
              help="Level of the prediction interval (and of the slope interval that decides whether there is a number).")
@click.option("--bootstrap", type=click.IntRange(min=100), default=1000, show_default=True, metavar="B", help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the bootstrap resampling.")
@json_option("the predictions (strict JSON)")
@click.option("--out-file", "out_file", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE",
              help="Also write the predictions as CSV: judge, task, generator, accuracy, predicted_gain, lo, hi, "
                   "predicted_score, measured_gain, flags.")
def predict(run_dir: Path, predictions: tuple[str, ...], table: Optional[str], given: tuple[str, ...], task: Optional[str],
            generator: Optional[str], level: float, bootstrap: int, seed: int, json_out: Optional[Path],
            out_file: Optional[Path]) -> None:
    """Will this judge help? Its Best-of-N gain predicted from its MMRB2 accuracy, with a prediction interval, on the
    study's line per task and generator (a judge of the study is left out of its own fit and marked measured)."""
    from analysis import prediction as pr
    from bon.tasks import bon_task, is_task

    check_output_file(json_out)
    check_output_file(out_file, "--out-file")
    if not (predictions or table or given):
        raise BonError("give the judges to predict: --predictions LABEL=FILE, --accuracies FILE or --accuracy LABEL=TASK:VALUE")
    if task is not None and not is_task(task):
        raise BonError(f"--task {task}: not a task (t2i, edit, interleaved, reasoning)")
    study = pr.load_study(run_dir, bootstrap, seed)
    new: list[pr.NewAccuracy] = [pr.given_accuracy(study, item) for item in given]
    for item in predictions:
        new += pr.judgment_accuracies(study, item)
    if table:
        new += pr.table_accuracies(study, table)
    rows = pr.predict_new(study, new, bon_task(task) if task else None, generator, level, seed)
    if not rows:
        raise BonError(f"no judge to predict{f' on task {task}' if task else ''}: the accuracies name no task of the study")
    priced = any(r["usd_per_prompt"] is not None for r in rows)
    if priced:  # a leaderboard: the best predicted gain per dollar first, judges without a number or price last
        rows = sorted(rows, key=lambda r: -r["gain_per_dollar"] if r["gain_per_dollar"] is not None else float("inf"))
    out.print(f"predicted Best-of-N gain over a random pick ({round(100 * level)}% prediction interval), on {pr.AXES[study.axis]}"
              + (" ; ranked by predicted gain per dollar" if priced else ""), highlight=False)
    for r in rows:
        out.print(line(r), highlight=False)
    if study.excluded:
        out.print("left out of every fit (leakage): " + "; ".join(f"{j} ({w})" for j, w in study.excluded.items()), highlight=False)
    write_numbers(json_out, {"run_dir": str(study.run.root), "axis": study.axis, "level": level, "bootstrap": bootstrap,
                             "seed": seed, "excluded": study.excluded, "predictions": rows})
    if out_file is not None:
        write_csv(out_file, rows, priced)


def line(r: dict[str, Any]) -> str:
    """One printed prediction; the numbers as ``--json`` and ``--out-file`` hold them, to 4 decimals. Where the
    slope's interval contains 0 there is no number, only the sentence."""
    from analysis.prediction import NO_RELATION

    text = f"{r['judge']}  {r['task']}/{r['generator']}" + (f" ({r['strategy']})" if r["strategy"] not in ("", "knockout") else "")
    text += f"  accuracy {r['accuracy']:.4f}"
    if r["predicted_gain"] is None:
        text += f"  {NO_RELATION}"
    else:
        text += (f"  gain {r['predicted_gain']:+.4f} [{r['lo']:+.4f}, {r['hi']:+.4f}]  score {r['predicted_score']:.4f}"
                 f"  rank {r['rank']} of {r['judges_in_fit'] + 1}")
    if r["measured_gain"] is not None:
        text += f"  measured {r['measured_gain']:+.4f}"
    if r["gain_per_dollar"] is not None:
        text += f"  ${r['usd_per_prompt']:.4f}/prompt, gain per $ {r['gain_per_dollar']:.2f}"
    flags = [f for f in r["flags"].split("; ") if f and f != NO_RELATION]
    return text + (f"  [{'; '.join(flags)}]" if flags else "")


def write_csv(path: Path, rows: list[dict[str, Any]], priced: bool) -> None:
    import pandas as pd

    from analysis.prediction import PREDICTION_COLUMNS
    from bon.runfolder import write_text

    columns = PREDICTION_COLUMNS + (["usd_per_prompt", "gain_per_dollar"] if priced else [])
    try:
        write_text(path, pd.DataFrame(rows, columns=columns).to_csv(index=False, float_format="%.6g"))
    except OSError as exc:
        raise BonError(f"--out-file {path}: cannot write ({exc.strerror})") from None
