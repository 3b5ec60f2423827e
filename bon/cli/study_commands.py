"""Study commands: demo, run, generate, verify, select, curve, plugins."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import click

from bon.cli import _fmt, _parse_options, app, out


@app.command()
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=Path("bon-demo"), show_default=True, help="Run folder (resumable).")
@click.option("--prompts", type=click.IntRange(min=1), default=40, show_default=True, help="Prompts per task (Best-of-N and preference set each).")
@click.option("--n", type=click.IntRange(min=1), default=8, show_default=True, help="Candidates per prompt.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the whole synthetic world.")
@click.option("--strategy", default="knockout", show_default=True, help="Selection strategy.")
@click.option("--max-calls", type=click.IntRange(min=0), default=None, help="Stop after this many new judge calls.")
def demo(out_dir: Path, prompts: int, n: int, seed: int, strategy: str, max_calls: Optional[int]) -> None:
    """Run the offline synthetic study end to end (CPU, no network) and summarise it."""
    from bon.demo import demo_config

    cfg = demo_config(out=out_dir, prompts=prompts, n=n, seed=seed, strategy=strategy)
    cfg.max_calls = max_calls
    _run(cfg)


@app.command()
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Override the config's run folder.")
@click.option("--strategy", default=None, help="Override the selection strategy.")
@click.option("--max-calls", type=click.IntRange(min=0), default=None, help="Stop a judge after this many new calls.")
@click.option("--dry-run", is_flag=True, help="Print each stage's models, memory, calls and API cost; load and call nothing.")
def run(config: Path, out_dir: Optional[Path], strategy: Optional[str], max_calls: Optional[int], dry_run: bool) -> None:
    """Run the study a config describes; rerunning resumes where it stopped."""
    from bon.config import load_config

    overrides = {"out": str(out_dir) if out_dir else None, "max_calls": max_calls,
                 "strategy": {"name": strategy} if strategy else None}
    cfg = load_config(config, overrides)
    if dry_run:
        from bon.plan import check_fit, plan_study, render

        plan = plan_study(cfg, str(config))
        out.print("\n".join(render(plan)), highlight=False, markup=False)
        check_fit(plan)
        return
    _run(cfg)


def _run(cfg) -> None:
    from bon.study import run_study

    started = time.perf_counter()
    outcome = run_study(cfg)
    _exit_if_pending(outcome.pending)
    _summary(outcome.correlations, outcome.results)
    out.print(f"{len(outcome.results)} result rows in {time.perf_counter() - started:.1f} s; "
              f"report: {outcome.run.report}  figure: {outcome.run.figure}")
    if outcome.stopped:
        print(f"bon: stopped early: {outcome.stopped}", file=sys.stderr)
        raise click.exceptions.Exit(3)


def _exit_if_pending(pending: dict[str, int]) -> None:
    """Exit 3 ("rerun to continue") while transient failures left items undone."""
    if sum(pending.values()):
        where = ", ".join(f"{stage} {k}" for stage, k in pending.items() if k)
        print(f"bon: {sum(pending.values())} items pending because of transient failures ({where}); rerun to continue",
              file=sys.stderr)
        raise click.exceptions.Exit(3)


def _summary(correlations, results) -> None:
    """Per task and generator: r and ρ across judges, the random and oracle levels, the best judge."""
    out.print("[bold]Does MMRB2 accuracy predict Best-of-N gain?[/] (r, ρ across judges; downstream scores in [0, 1])")
    out.print(f"{'task':<12}{'generator':<11}{'judges':>6}{'r':>7}{'ρ':>7}{'random':>8}{'oracle':>8}  best judge (BoN score)")
    for row in correlations.itertuples():
        sub = results[(results.task == row.task) & (results.generator == row.generator)].dropna(subset=["bon_score"])
        if not len(sub):
            continue
        best = sub.loc[sub.bon_score.idxmax()]
        out.print(f"{row.task:<12}{row.generator:<11}{row.n_judges:>6}{_fmt(row.pearson_r, '+.2f'):>7}{_fmt(row.spearman_rho, '+.2f'):>7}"
                  f"{_fmt(sub.random_score.iloc[0]):>8}{_fmt(sub.oracle_score.iloc[0]):>8}  {best.judge} ({best.bon_score:.3f})",
                  highlight=False)


@app.command()
@click.option("--generator", "generator_spec", required=True, help="Registered generator, e.g. diffusers-t2i:PATH_OR_HUB_ID.")
@click.option("--suite", type=click.Path(path_type=Path), required=True, help="Prompts as JSONL (bon content model).")
@click.option("--n", "n", type=int, required=True, help="Candidates per prompt.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="Output folder (resumable).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, help="Images per pipeline call.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Only the first M prompts.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Generator option (YAML value), repeatable.")
def generate(generator_spec: str, suite: Path, n: int, out_dir: Path, batch_size: Optional[int], seed: int,
             limit: Optional[int], options: tuple[str, ...]) -> None:
    """Sample N candidates per prompt of a suite; prompts already done are skipped."""
    from generators.cli_support import generate_command

    summary = generate_command(generator_spec, _parse_options(options), suite, n, out_dir, batch_size, seed, limit)
    out.print(", ".join(f"{k} {v}" for k, v in summary.items()))
    _exit_if_pending({"prompts": summary["pending_prompts"]})


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A study folder with candidates.")
@click.option("--verifier", "verifier_spec", required=True, help="Registered verifier, e.g. emma or vqascore:MODEL.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Verifier option (YAML value), repeatable.")
def verify(run_dir: Path, verifier_spec: str, options: tuple[str, ...]) -> None:
    """Score every candidate of a study once (resumable); another verifier writes scores_<label>.jsonl."""
    from verifiers.cli_support import verify_command

    summary = verify_command(run_dir, verifier_spec, _parse_options(options))
    out.print(", ".join(f"{k} {v}" for k, v in summary.items() if not isinstance(v, (dict, list))))
    if summary.get("missing_reasons"):
        out.print(f"missing scores: {summary['missing_reasons']}", highlight=False)
    _exit_if_pending({"candidates": summary["pending"]})


def _study_judge_and_strategy(run_dir: Path, judge_spec: str, strategy_spec: str, options: tuple[str, ...]):
    from bon import registry
    from bon.store import JudgmentStore
    from bon.study import load_study

    study = load_study(run_dir)
    judge = study.judge(judge_spec)
    strategy = registry.create("strategy", strategy_spec, **_parse_options(options))
    return study, judge, strategy, JudgmentStore(study.run.store)


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A finished study folder.")
@click.option("--judge", "judge_spec", required=True, help="A judge label of the study, or a registered judge spec.")
@click.option("--strategy", "strategy_spec", default="knockout", show_default=True, help="knockout, round-robin, pointwise...")
@click.option("--n", "n", type=click.IntRange(min=1), default=None, help="Use only the first n candidates of each prompt.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Strategy option, e.g. aggregate=borda.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write calls and picks as JSON.")
def select(run_dir: Path, judge_spec: str, strategy_spec: str, n: Optional[int], options: tuple[str, ...], json_out: Optional[Path]) -> None:
    """Pick the best candidate per prompt with a judge and strategy on a finished study (judgments reused)."""
    from bon.referee import Referee
    from bon.runfolder import write_json, write_text
    from bon.stages.analyse import results_table
    from bon.stages.select import select as select_stage

    study, judge, strategy, store = _study_judge_and_strategy(run_dir, judge_spec, strategy_spec, options)
    candidates = {g: {pid: c[:n] for pid, c in by.items()} for g, by in study.candidates.items()}
    try:
        referee = Referee(judge, store, samples=study.cfg.samples, seed=study.cfg.seed)
        started = time.perf_counter()
        picks = select_stage(referee, strategy, study.prompts, candidates, study.cfg.seed)
        wall = time.perf_counter() - started
    finally:
        store.close()
    label = f"{judge.name}__{strategy.name}" + (f"__n{n}" if n else "")
    write_text(study.run.root / "picks" / f"{label}.jsonl", "".join(json.dumps(p) + "\n" for p in picks))
    table = results_table(picks, study.scores, {}, n or study.cfg.n)
    s = referee.stats
    out.print(f"{'task':<12}{'generator':<11}{'BoN score':>10}{'random':>8}{'oracle':>8}{'calls':>8}")
    for r in table.itertuples():
        out.print(f"{r.task:<12}{r.generator:<11}{_fmt(r.bon_score):>10}{_fmt(r.random_score):>8}{_fmt(r.oracle_score):>8}{r.judge_calls:>8}")
    out.print(f"{judge.name} / {strategy.name}: calls made {s.calls_made}, from store {s.calls_cached}, missing {s.missing}, "
              f"tokens {s.input_tokens}+{s.output_tokens}, cost ${s.cost_usd:.4f}, {wall:.1f} s")
    if json_out:
        write_json(json_out, {"judge": judge.name, "strategy": strategy.name, "n": n or study.cfg.n,
                              "calls_made": s.calls_made, "calls_cached": s.calls_cached, "stats": s.as_dict(),
                              "results": table.to_dict(orient="records"), "picks": picks})


@app.command()
@click.option("--run", "run_dir", type=click.Path(path_type=Path), required=True, help="A finished study folder.")
@click.option("--judge", "judge_spec", required=True, help="A judge label of the study, or a registered judge spec.")
@click.option("--strategy", "strategy_spec", default="knockout", show_default=True)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Strategy option.")
@click.option("--subsets", type=click.IntRange(min=1), default=20, show_default=True, help="Random n-subsets per prompt.")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write the curve as JSON.")
def curve(run_dir: Path, judge_spec: str, strategy_spec: str, options: tuple[str, ...], subsets: int, json_out: Optional[Path]) -> None:
    """Best-of-n curve (n = 1, 2, 4, ..., N) of a judge and strategy, with the extra calls each n needs."""
    from bon.referee import Referee
    from bon.runfolder import write_json
    from bon.stages.curves import bon_curve

    study, judge, strategy, store = _study_judge_and_strategy(run_dir, judge_spec, strategy_spec, options)
    try:
        referee = Referee(judge, store, samples=study.cfg.samples, seed=study.cfg.seed)
        rows = bon_curve(referee, strategy, study.prompts, study.candidates, study.scores, subsets, study.cfg.seed)
    finally:
        store.close()
    out.print(f"{'task':<12}{'generator':<11}{'n':>4}{'BoN score':>10}{'random':>8}{'oracle':>8}{'new calls':>10}")
    for r in rows:
        out.print(f"{r['task']:<12}{r['generator']:<11}{r['n']:>4}{_fmt(r['bon_score']):>10}{_fmt(r['random_score']):>8}"
                  f"{_fmt(r['oracle_score']):>8}{r['extra_calls']:>10}")
    record = {"judge": judge.name, "strategy": strategy.name, "subsets": subsets, "curve": rows}
    write_json(study.run.root / "curves" / f"{judge.name}__{strategy.name}.json", record)  # the report draws these
    if json_out:
        write_json(json_out, record)


@app.command("plugins")
def plugins() -> None:
    """List the registered generators, judges, verifiers, strategies and suites."""
    from bon import registry

    plural = {"strategy": "strategies"}
    for kind in registry.KINDS:
        out.print(f"[bold]{plural.get(kind, kind + 's')}[/]: {', '.join(registry.names(kind))}")


