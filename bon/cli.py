"""The ``bon`` command line. Bad input ends in one line on stderr (exit 2), never a traceback."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Optional

import click
import typer
from rich.console import Console
from rich.table import Table

from bon.errors import BonError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Best-of-N validation for Multimodal RewardBench 2 judges.")
mmrb2_app = typer.Typer(no_args_is_help=True, help="The MMRB2 benchmark: score judgment files.")
app.add_typer(mmrb2_app, name="mmrb2")
out = Console()


@app.command()
def demo(
    out_dir: Path = typer.Option(Path("bon-demo"), "--out", help="Run folder (resumable)."),
    prompts: int = typer.Option(40, "--prompts", min=1, help="Prompts per task (Best-of-N and preference set each)."),
    n: int = typer.Option(8, "--n", min=1, help="Candidates per prompt."),
    seed: int = typer.Option(0, "--seed", help="Seed of the whole synthetic world."),
    strategy: str = typer.Option("knockout", "--strategy", help="Selection strategy."),
) -> None:
    """Run the offline synthetic study end to end (CPU, no network) and summarise it."""
    from bon.demo import demo_config

    _run(demo_config(out=out_dir, prompts=prompts, n=n, seed=seed, strategy=strategy))


@app.command()
def run(
    config: Path = typer.Argument(..., help="Study config (YAML), e.g. configs/demo.yaml."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Override the config's run folder."),
    strategy: Optional[str] = typer.Option(None, "--strategy", help="Override the selection strategy."),
    max_calls: Optional[int] = typer.Option(None, "--max-calls", help="Stop a judge after this many new calls."),
) -> None:
    """Run the study a config describes; rerunning resumes where it stopped."""
    from bon.config import load_config

    overrides = {"out": str(out_dir) if out_dir else None, "max_calls": max_calls,
                 "strategy": {"name": strategy} if strategy else None}
    _run(load_config(config, overrides))


def _run(cfg) -> None:
    from bon.study import run_study

    started = time.perf_counter()
    outcome = run_study(cfg)
    _summary(outcome.correlations, outcome.results)
    out.print(f"{len(outcome.results)} result rows in {time.perf_counter() - started:.1f} s; "
              f"report: {outcome.run.report}  figure: {outcome.run.figure}")


def _summary(correlations, results) -> None:
    table = Table(title="Does MMRB2 accuracy predict Best-of-N gain?")
    for col in ("task", "generator", "judges", "Pearson r", "Spearman ρ", "random", "best judge pick", "oracle"):
        table.add_column(col, justify="left" if col in ("task", "generator") else "right")
    for row in correlations.itertuples():
        sub = results[(results.task == row.task) & (results.generator == row.generator)]
        best = sub.loc[sub.bon_score.idxmax()] if len(sub) else None
        table.add_row(
            row.task, row.generator, str(row.n_judges), _fmt(row.pearson_r), _fmt(row.spearman_rho),
            _fmt(sub.random_score.iloc[0] if len(sub) else math.nan),
            f"{_fmt(best.bon_score)} ({best.judge})" if best is not None else "-",
            _fmt(sub.oracle_score.iloc[0] if len(sub) else math.nan),
        )
    out.print(table)


def _fmt(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3f}"


@mmrb2_app.command("accuracy")
def mmrb2_accuracy(
    bench_dir: Path = typer.Option(..., "--bench-dir", help="Folder with t2i.json ... (or *_response_only.json)."),
    task: str = typer.Option(..., "--task", help="image, edit, interleaved, reasoning or all."),
    predictions: list[Path] = typer.Option(..., "--predictions", help="Judgment file(s); one per task for --task all, in official order."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the numbers as JSON."),
) -> None:
    """Score official-format judgment files with the official scorer's semantics."""
    from analysis import mmrb2

    tasks = list(mmrb2.TASK_FILES) if task == "all" else [mmrb2.scorer_task(task)]
    if len(predictions) != len(tasks):
        raise BonError(f"--task {task} needs {len(tasks)} prediction file(s) ({', '.join(tasks)}), got {len(predictions)}")
    result = mmrb2.evaluate(bench_dir, dict(zip(tasks, predictions)))
    for name in tasks:
        r = result[name]
        out.print(f"{name:<12} accuracy {r['accuracy']:6.2f}%  total {r['total_pairs']}  evaluated {r['evaluated_pairs']}  "
                  f"missing {r['missing_pairs']}  ({r['correct']}/{r['judgements']} judgements)")
    if len(tasks) > 1:
        o = result["overall"]
        out.print(f"{'overall':<12} accuracy {o['accuracy']:6.2f}%  ({o['correct']}/{o['judgements']} judgements, micro-averaged)")
    if json_out:
        from bon.runfolder import write_json

        write_json(json_out, {"tasks": {t: result[t] for t in tasks}, "overall": result["overall"]})


@app.command("plugins")
def plugins() -> None:
    """List the registered generators, judges, verifiers, strategies and suites."""
    from bon import registry

    for kind in registry.KINDS:
        out.print(f"[bold]{kind}s[/]: {', '.join(registry.names(kind))}")


def main(argv: list[str] | None = None) -> int:
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="bon", standalone_mode=False)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
