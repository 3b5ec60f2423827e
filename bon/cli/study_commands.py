"""Study commands: demo, run, generate, verify, score, select, curve, merge, plugins.

Each command checks all of its inputs (run folder, plugins and their options, N, output paths) before it
writes anything, so a refused command leaves the disk as it was.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import click

from bon.cli.common import (_fmt, app, check_output_file, exit_if_calls_pending, json_option, out, parse_options,
                            plugin_options, retry_missing_option, run_option, write_numbers)
from bon.errors import BonError
from bon.runlock import holds_writer_lock


@app.command()
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=Path("bon-demo"), show_default=True,
              metavar="DIR", help="Run folder (created, or resumed).")
@click.option("--prompts", type=click.IntRange(min=1), metavar="K", default=40, show_default=True, help="Prompts per task (Best-of-N and preference set each).")
@click.option("--n", type=click.IntRange(min=2), default=8, metavar="N", show_default=True,
              help="Candidates per prompt (at least 2: with fewer there is nothing to choose).")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the whole synthetic world.")
@click.option("--strategy", default="knockout", show_default=True, metavar="NAME", help="Selection strategy.")
@plugin_options("strategy")
@click.option("--max-calls", type=click.IntRange(min=0), default=None, metavar="M", help="Stop after this many new judge calls.")
@retry_missing_option()
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None, help="Where stage work runs (default: local).")
@json_option("the summary table")
def demo(out_dir: Path, prompts: int, n: int, seed: int, strategy: str, strategy_options: tuple[str, ...],
         max_calls: Optional[int], retry_missing: bool, executor: Optional[str], json_out: Optional[Path]) -> None:
    """Run the offline synthetic study end to end (CPU, no network) and summarise it."""
    from bon.demo import demo_config

    cfg = demo_config(out=out_dir, prompts=prompts, n=n, seed=seed, strategy=strategy)
    cfg.strategy.options = parse_options(strategy_options, "--strategy-option")
    cfg.max_calls, cfg.retry_missing = max_calls, retry_missing
    cfg.executor = {"name": executor} if executor else cfg.executor
    _run(cfg, json_out, "demo")


@app.command()
@click.argument("config", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Run folder instead of the config's `out`.")
@click.option("--strategy", default=None, metavar="NAME", help="Selection strategy instead of the config's.")
@plugin_options("strategy")
@click.option("--max-calls", type=click.IntRange(min=0), default=None, metavar="M", help="Stop after this many new judge calls.")
@retry_missing_option()
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="M",
              help="Only the first M prompts per task (a quick look; a study of its own).")
@click.option("--shard", default=None, metavar="I/K", help="Run only the I-th of K prompt shards (join them with bon merge).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default=None, help="Where stage work runs instead of the config's.")
@click.option("--dry-run", is_flag=True,
              help="Check what the run would refuse (all of it; exit 2) and print each stage's models, memory, calls, "
                   "tokens, API cost and GPU hours, and the host memory and disk; load and call nothing.")
@click.option("--calibrate", "pilot_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="PILOT_DIR",
              help="With --dry-run: scale each stage by what a pilot run of the study (--limit 50) measured.")
@json_option("the summary table (with --dry-run: the plan)")
def run(config: Path, out_dir: Optional[Path], strategy: Optional[str], strategy_options: tuple[str, ...],
        max_calls: Optional[int], retry_missing: bool, limit: Optional[int], shard: Optional[str], executor: Optional[str], dry_run: bool,
        pilot_dir: Optional[Path], json_out: Optional[Path]) -> None:
    """Run the study a config describes; rerunning resumes where it stopped."""
    from bon.config import load_config

    overrides: dict[str, Any] = {"out": str(out_dir) if out_dir else None, "max_calls": max_calls, "shard": shard,
                                 "executor": _executor_override(config, executor), "retry_missing": retry_missing or None}
    cfg = load_config(config, overrides)
    if strategy or strategy_options:
        cfg.strategy.name = strategy or cfg.strategy.name
        cfg.strategy.label = cfg.strategy.name
        cfg.strategy.options = {**({} if strategy else cfg.strategy.options), **parse_options(strategy_options, "--strategy-option")}
        cfg.strategy.create("strategy", "--strategy")  # pure code, cheap: a dry run refuses what the run would
    if limit is not None:
        cfg.suite = {**cfg.suite, "limit": limit}
    if pilot_dir is not None and not dry_run:
        raise BonError("--calibrate PILOT_DIR goes with --dry-run (it scales the plan, it runs nothing)")
    if dry_run:
        _dry_run(cfg, config, pilot_dir, json_out)
        return
    from bon.preflight import require

    require(cfg)  # every problem the dry run lists stops the run here, before anything is written
    _run(cfg, json_out, "run")


def _dry_run(cfg, config: Path, pilot_dir: Optional[Path], json_out: Optional[Path]) -> None:
    """The plan printed (and written with --json), then every problem that would stop the run; exit 2 if any."""
    from bon.plan import calibrate, fit_problems, plan_json, plan_study, render
    from bon.preflight import problems
    from bon.redact import redact_text

    check_output_file(json_out)
    if pilot_dir is not None and not (pilot_dir / "stats.json").is_file():
        raise BonError(f"--calibrate {pilot_dir}: no stats.json there (a finished pilot run folder, e.g. of `bon run CONFIG --limit 50`)")
    plan = plan_study(cfg, str(config))
    if pilot_dir is not None:
        calibrate(plan, pilot_dir)
    notes: list[str] = []
    plan.problems = problems(cfg, notes=notes) + fit_problems(plan)
    lines = render(plan) + [f"note: {line}" for line in notes]
    if plan.problems:
        lines += [f"{len(plan.problems)} problem(s) would stop `bon run` before it starts:"] + [f"  {p}" for p in plan.problems]
    out.print(redact_text("\n".join(lines)), highlight=False, markup=False)
    write_numbers(json_out, plan_json(plan))
    if plan.problems:  # the list is above; the one error line names the first
        more = f" (and {len(plan.problems) - 1} more, listed above)" if len(plan.problems) > 1 else ""
        raise BonError(f"{plan.problems[0]}{more}")


def _executor_override(config: Path, name: Optional[str]):
    """``--executor NAME`` keeps the config's options for that executor (a cluster address, workers...)."""
    if name is None:
        return None
    from bon.executors import executor_options_from

    return {"name": name, "options": executor_options_from(config, name)}


def _run(cfg, json_out: Optional[Path], command: str) -> None:
    from bon.study import run_study

    check_output_file(json_out)
    started = time.perf_counter()
    outcome = run_study(cfg, command=command)
    _exit_if_pending(outcome.pending)
    if cfg.shard:  # a shard's numbers are partial: the report comes from `bon merge`
        out.print(f"shard {cfg.shard}: {len(outcome.results)} result rows in {time.perf_counter() - started:.1f} s "
                  f"in {outcome.run.root}; join all shards with `bon merge`")
    else:
        _summary(outcome.correlations, outcome.results, outcome.run.root, _uninformed(outcome))
        out.print(f"{len(outcome.results)} result rows in {time.perf_counter() - started:.1f} s; "
                  f"report: {outcome.run.report}  figure: {outcome.run.figure}")
    write_numbers(json_out, {"run": str(outcome.run.root), "stopped": outcome.stopped,
                             "correlations": outcome.correlations.to_dict(orient="records"),
                             "results": outcome.results.to_dict(orient="records")})
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


def _uninformed(outcome) -> dict[tuple[str, str, str, str], str]:
    """The judges whose picks carry no information (every verdict missing, every match a coin toss)."""
    from analysis.bon_metrics import load_prompt_level, uninformed_judges

    return uninformed_judges(load_prompt_level(outcome.run.root)) if len(outcome.results) else {}


def _summary(correlations, results, run_dir, uninformed: dict[tuple[str, str, str, str], str]) -> None:
    """Per task and generator: r and ρ across judges, the random and oracle levels, the best judge the
    leakage policy keeps among those with information (the others are named, with their reason, below)."""
    from analysis import leakage

    excluded = leakage.run_exclusions(run_dir, list(dict.fromkeys(results.judge)) if len(results) else None)
    out.print("[bold]Does MMRB2 accuracy predict Best-of-N gain?[/] (r, ρ across judges; downstream scores in [0, 1])", markup=True)
    out.print(f"{'task':<12}{'generator':<11}{'judges':>6}{'r':>7}{'ρ':>7}{'random':>8}{'oracle':>8}  best judge (BoN score)")
    for row in correlations.itertuples():
        sub = results[(results.task == row.task) & (results.generator == row.generator)].dropna(subset=["bon_score"])
        if not len(sub):
            continue
        chance = {j: why for (t, g, j, _), why in uninformed.items() if (t, g) == (row.task, row.generator)}
        best = leakage.best_judge(dict(zip(sub.judge, sub.bon_score)), {**excluded, **chance})
        named = f"{best} ({sub.bon_score[sub.judge == best].iloc[0]:.3f})" if best else "-"
        out.print(f"{row.task:<12}{row.generator:<11}{row.n_judges:>6}{_fmt(row.pearson_r, '+.2f'):>7}{_fmt(row.spearman_rho, '+.2f'):>7}"
                  f"{_fmt(sub.random_score.iloc[0]):>8}{_fmt(sub.oracle_score.iloc[0]):>8}  {named}", highlight=False)
    if excluded:
        out.print("left out of the correlation and of \"best judge\" (leakage): "
                  + "; ".join(f"{j} ({why})" for j, why in excluded.items()), highlight=False)
    for (task, gen, judge, strategy), reason in uninformed.items():
        out.print(f"{task}/{gen}: {judge} ({strategy}): {reason}; never counted as best", highlight=False)


@app.command()
@click.option("--generator", "generator_spec", required=True, metavar="SPEC", help="Registered generator, e.g. diffusers-t2i:PATH_OR_HUB_ID.")
@click.option("--label", default=None, metavar="NAME", help="Name of the candidates' folder (default: the generator's name).")
@plugin_options("generator")
@click.option("--suite", type=click.Path(path_type=Path, dir_okay=False), required=True, metavar="FILE", help="Prompts as JSONL (bon content model).")
@click.option("--n", "n", type=click.IntRange(min=1), required=True, metavar="N", help="Candidates per prompt.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True, metavar="DIR", help="Output folder (resumable).")
@click.option("--batch-size", type=click.IntRange(min=1), default=None, metavar="B", help="Images per pipeline call.")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the candidates.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="M", help="Only the first M prompts.")
@json_option("the summary")
@holds_writer_lock("out_dir", "bon generate")
def generate(generator_spec: str, label: Optional[str], generator_options: tuple[str, ...], suite: Path, n: int, out_dir: Path,
             batch_size: Optional[int], seed: int, limit: Optional[int], json_out: Optional[Path]) -> None:
    """Sample N candidates per prompt of a suite; prompts already done are skipped."""
    from generators.cli_support import generate_command

    options = parse_options(generator_options, "--generator-option")
    if label:
        options["label"] = label
    check_output_file(json_out)
    summary = generate_command(generator_spec, options, suite, n, out_dir, batch_size, seed, limit)
    out.print(", ".join(f"{k} {v}" for k, v in summary.items()))
    write_numbers(json_out, summary)
    _exit_if_pending({"prompts": summary["pending_prompts"]})


@app.command()
@run_option("A study folder with candidates.")
@click.option("--verifier", "verifier_spec", required=True, metavar="SPEC", help="Registered verifier, e.g. emma or vqascore:MODEL.")
@click.option("--label", default=None, metavar="NAME", help="Name of another verifier's scores (default: its spec): scores_<label>.jsonl.")
@plugin_options("verifier")
@json_option("the summary")
@holds_writer_lock("run_dir", "bon verify")
def verify(run_dir: Path, verifier_spec: str, label: Optional[str], verifier_options: tuple[str, ...], json_out: Optional[Path]) -> None:
    """Score every candidate of a study once (resumable); another verifier writes scores_<label>.jsonl."""
    from bon.runfolder import RunFolder
    from verifiers.cli_support import verify_command

    RunFolder(run_dir, existing=True)
    options = parse_options(verifier_options, "--verifier-option")
    if label:
        options["label"] = label
    check_output_file(json_out)
    summary = verify_command(run_dir, verifier_spec, options)
    out.print(", ".join(f"{k} {v}" for k, v in summary.items() if not isinstance(v, (dict, list))))
    if summary.get("missing_reasons"):
        out.print(f"missing scores: {summary['missing_reasons']}", highlight=False)
    write_numbers(json_out, summary)
    _exit_if_pending({"candidates": summary["pending"]})


@app.command()
@click.option("--verifier", "verifier_spec", required=True, metavar="SPEC", help="Registered verifier, e.g. emma.")
@plugin_options("verifier", "Verifier option, e.g. metric=bon (YAML value), repeatable.")
@click.option("--items", "items_file", type=click.Path(path_type=Path, dir_okay=False), required=True, metavar="FILE",
              help="JSONL: one benchmark item per line in its own fields, plus response text and/or image paths.")
@click.option("--out-file", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE",
              help="One JSON line per item: id, score and the details behind it (a rerun reuses them).")
@click.option("--images-root", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="The folder the items' image paths are relative to, and read only from (default: the items file's).")
@json_option("the aggregate")
def score(verifier_spec: str, verifier_options: tuple[str, ...], items_file: Path, out_file: Optional[Path],
          images_root: Optional[Path], json_out: Optional[Path]) -> None:
    """Score given responses with a verifier's (official) metric; the last line is the aggregate as JSON."""
    from bon.redact import redact
    from verifiers.score_items import score_items

    options = parse_options(verifier_options, "--verifier-option")
    check_output_file(out_file, "--out-file")
    check_output_file(json_out)
    for other, flag in ((out_file, "--out-file"), (items_file, "--items")):
        if json_out is not None and other is not None and json_out.resolve() == other.resolve():
            raise BonError(f"--json {json_out}: is the {flag} file too; name another file")
    result = redact(score_items(verifier_spec, options, items_file, out_file, images_root))
    failed = f", {result['failed']} failed" if result["failed"] else ""
    reused = f", {result['reused']} from an earlier run" if result["reused"] else ""
    print(redact(f"scored {result['items']} item{'' if result['items'] == 1 else 's'}{failed}{reused}" + (f" -> {out_file}" if out_file else "")), file=sys.stderr)
    write_numbers(json_out, result["aggregate"])
    click.echo(json.dumps(result["aggregate"], ensure_ascii=False, allow_nan=False))
    _exit_if_pending({"items": result["transient"]})


def _judge_on_a_study(labelled_in: str) -> Callable:
    """The options ``select`` and ``curve`` share: a finished study, a judge with its label and options,
    a strategy with its options."""
    decorators = [
        run_option("A finished study folder."),
        click.option("--judge", "judge_spec", required=True, metavar="SPEC", help="A registered judge spec, or a judge label of the study."),
        click.option("--label", default=None, metavar="NAME", help=f"The judge's label in {labelled_in} (default: the spec)."),
        plugin_options("judge"),
        click.option("--strategy", "strategy_spec", default="knockout", show_default=True, metavar="NAME",
                     help="knockout, round-robin, pointwise..."),
        plugin_options("strategy", "Strategy option, e.g. aggregate=borda (YAML value), repeatable."),
        retry_missing_option(),
    ]

    def apply(command: Callable) -> Callable:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


def _judge_label(spec: str, label: Optional[str], options: dict[str, Any]) -> str:
    """Picks and curves are filed under the judge's label: ``--label``, else the spec plus any options."""
    if label:
        return label
    return spec + ("[" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) + "]" if options else "")


def _study_judge_and_strategy(run_dir: Path, judge_spec: str, label: Optional[str], judge_options: tuple[str, ...],
                              strategy_spec: str, strategy_options: tuple[str, ...]):
    """Everything ``select`` and ``curve`` need, checked before anything is written."""
    from bon import registry
    from bon.study import load_study

    judge_opts = parse_options(judge_options, "--judge-option")
    strategy_opts = parse_options(strategy_options, "--strategy-option")
    study = load_study(run_dir)
    study.run.require_writable()  # picks, curves and the store are written there
    judge = study.judge(judge_spec, judge_opts, label=_judge_label(judge_spec, label, judge_opts))
    strategy = registry.create("strategy", strategy_spec, **strategy_opts)
    return study, judge, strategy


def _check_n(n: Optional[int], study_n: int) -> Optional[int]:
    """``--n``: 2 ≤ n ≤ the study's N; n = N is the study itself (no suffix on the picks file)."""
    if n is None or n == study_n:
        return None
    if n < 2 or n > study_n:
        raise BonError(f"--n {n}: must be between 2 and the study's N = {study_n} (candidates per prompt)")
    return n


@contextmanager
def _referee(study, judge, command: str, retry_missing: bool = False) -> Iterator[Any]:
    """A referee for ``judge`` on the study's judgment store (closed afterwards), with its samples and seed."""
    from bon.referee import Referee
    from bon.store import JudgmentStore

    store = JudgmentStore(study.run.store, command=command)
    try:
        yield Referee(judge, store, samples=study.cfg.samples, seed=study.cfg.seed, stage=command, retry_missing=retry_missing)
    finally:
        store.close()


@app.command()
@_judge_on_a_study("picks and tables")
@click.option("--n", "n", type=int, default=None, metavar="N", help="Use only the first n candidates of each prompt (2 ≤ n ≤ N).")
@json_option("calls, results and picks")
@holds_writer_lock("run_dir", "bon select")
def select(run_dir: Path, judge_spec: str, label: Optional[str], judge_options: tuple[str, ...], strategy_spec: str,
           strategy_options: tuple[str, ...], retry_missing: bool, n: Optional[int], json_out: Optional[Path]) -> None:
    """Pick the best candidate per prompt with a judge and strategy on a finished study (judgments reused)."""
    from analysis.bon_metrics import failure_policy, results_table
    from bon.runfolder import write_text
    from bon.stages.select import select as select_stage
    from bon.selection.prefilter import selection_costs
    from bon.stages.select import strategy_label

    study, judge, strategy = _study_judge_and_strategy(run_dir, judge_spec, label, judge_options, strategy_spec, strategy_options)
    n = _check_n(n, study.cfg.n)
    check_output_file(json_out)
    candidates = {g: {pid: c[:n] for pid, c in by.items()} for g, by in study.candidates.items()}
    with _referee(study, judge, "select", retry_missing) as referee:
        _prefilter_judge(study, strategy, referee)
        started = time.perf_counter()
        picks = select_stage(referee, strategy, study.prompts, candidates, study.cfg.seed, study.scores)
        wall = time.perf_counter() - started
        costs = selection_costs([p["calls"] for p in picks], [p.get("prefilter_calls", 0) for p in picks], referee)
    strategy_name = strategy_label(strategy)
    picks_file = study.run.picks_file(judge.name, strategy_name, n)
    write_text(picks_file, "".join(json.dumps(p) + "\n" for p in picks))
    table = results_table(picks, study.scores, {}, n or study.cfg.n, failure_policy(study.cfg.as_dict()).applied)
    s = referee.stats
    out.print(f"{'task':<12}{'generator':<11}{'BoN score':>10}{'random':>8}{'oracle':>8}{'calls':>8}")
    for r in table.itertuples():
        out.print(f"{r.task:<12}{r.generator:<11}{_fmt(r.bon_score):>10}{_fmt(r.random_score):>8}{_fmt(r.oracle_score):>8}{r.judge_calls:>8}")
    out.print(f"{judge.name} / {strategy_name}: calls made {s.calls_made}, from store {s.calls_cached}, missing {s.missing}, "
              f"tokens {s.input_tokens}+{s.output_tokens}, cost ${s.cost_usd:.4f}, {wall:.1f} s -> {picks_file}")
    for gate in referee.gate_reports():  # a calibrated gate's audit, a cascade's share, a fallback
        out.print(f"{gate['kind']} (calibrated on {gate['calibration'].get('source', 'fixed')}): {gate['note']}", highlight=False)
    out.print(_cost_line(judge.name, costs), highlight=False)
    for report in referee.prefilter_reports:  # what the prefilter kept, and keep: auto's audit
        cheap = referee.prefilters[report["prefilter"]].stats
        out.print(_cost_line(costs["prefilter"], costs, "prefilter_") + f" (made {cheap.calls_made}, from store {cheap.calls_cached}); "
                  f"{report['note']}", highlight=False)
    write_numbers(json_out, {"judge": judge.name, "strategy": strategy_name, "n": n or study.cfg.n,
                             "calls_made": s.calls_made, "calls_cached": s.calls_cached, "stats": s.as_dict(),
                             "costs": costs, "prefilter": referee.prefilter_reports,
                             "gates": referee.gate_reports(),
                             "picks_file": str(picks_file), "results": table.to_dict(orient="records"), "picks": picks})
    exit_if_calls_pending(s.transient)


def _prefilter_judge(study, strategy, referee) -> None:
    """A strategy's prefilter as the study configures the judge of that label (else the registry's spec)."""
    spec = getattr(getattr(strategy, "prefilter", None), "judge", None)
    if spec is not None:
        referee.judges[spec] = study.judge(spec)


def _cost_line(name: str, costs: dict[str, Any], prefix: str = "") -> str:
    """One judge's cost per prompt in both currencies: decisions, judge seconds and dollars."""
    what = "scores" if prefix else "calls"
    return (f"{'prefilter' if prefix else 'main judge'} {name}: {costs[prefix + 'calls_per_prompt']:.2f} {what} per prompt, "
            f"{_fmt(costs[prefix + 'seconds_per_prompt'], '.4f')} s and ${_fmt(costs[prefix + 'usd_per_prompt'], '.4f')} per prompt")


@app.command()
@_judge_on_a_study("the curve file")
@click.option("--subsets", type=click.IntRange(min=1), default=20, metavar="K", show_default=True, help="Random n-subsets per prompt.")
@json_option("the curve")
@holds_writer_lock("run_dir", "bon curve")
def curve(run_dir: Path, judge_spec: str, label: Optional[str], judge_options: tuple[str, ...], strategy_spec: str,
          strategy_options: tuple[str, ...], retry_missing: bool, subsets: int, json_out: Optional[Path]) -> None:
    """Best-of-n curve (n = 1, 2, 4, ..., N) of a judge and strategy, with the extra calls each n needs."""
    from bon.runfolder import write_json
    from bon.stages.curves import bon_curve
    from bon.stages.select import strategy_label

    study, judge, strategy = _study_judge_and_strategy(run_dir, judge_spec, label, judge_options, strategy_spec, strategy_options)
    check_output_file(json_out)
    study.require_scores()  # the curve's numbers are verifier scores: refuse before any judge call
    with _referee(study, judge, "curve", retry_missing) as referee:
        _prefilter_judge(study, strategy, referee)
        rows = bon_curve(referee, strategy, study.prompts, study.candidates, study.scores, subsets, study.cfg.seed)
        unit = referee.store.unit_costs(referee.judge_id)
        for cheap in referee.prefilters.values():
            unit.update({f"prefilter_{k}": v for k, v in cheap.store.unit_costs(cheap.judge_id, pointwise=True).items()})
    for r in rows:  # both currencies: each judge's calls per prompt at its measured seconds and dollars per call
        for prefix in ("", "prefilter_"):
            if prefix + "calls_per_prompt" in r:
                r[prefix + "seconds_per_prompt"] = r[prefix + "calls_per_prompt"] * unit[prefix + "seconds_per_call"]
                r[prefix + "usd_per_prompt"] = r[prefix + "calls_per_prompt"] * unit[prefix + "usd_per_call"]
    pre = any("prefilter_calls_per_prompt" in r for r in rows)
    out.print(f"{'task':<12}{'generator':<11}{'n':>4}{'BoN score':>10}{'random':>8}{'oracle':>8}{'new calls':>10}{'calls/prompt':>13}"
              + (f"{'prefilter':>10}" if pre else ""))
    for r in rows:
        out.print(f"{r['task']:<12}{r['generator']:<11}{r['n']:>4}{_fmt(r['bon_score']):>10}{_fmt(r['random_score']):>8}"
                  f"{_fmt(r['oracle_score']):>8}{r['extra_calls']:>10}{r['calls_per_prompt']:>13.2f}"
                  + (f"{r.get('prefilter_calls_per_prompt', 0.0):>10.2f}" if pre else ""))
    strategy_name = strategy_label(strategy)
    record = {"judge": judge.name, "strategy": strategy_name, "subsets": subsets, "curve": rows}
    write_json(study.run.curve_file(judge.name, strategy_name), record)  # the report draws these
    write_numbers(json_out, record)
    exit_if_calls_pending(referee.stats.transient)


@app.command()
@click.option("--run", "shards", multiple=True, required=True, type=click.Path(path_type=Path, file_okay=False), metavar="DIR",
              help="A shard's run folder (repeat for all K, any order).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True, metavar="DIR",
              help="The merged run folder.")
def merge(shards: tuple[Path, ...], out_dir: Path) -> None:
    """Merge the folders of `bon run --shard I/K` (all K of one study) into one run folder and analyse it."""
    from bon.merge import merge_runs

    outcome = merge_runs(list(shards), out_dir)
    out.print(f"merged {len(shards)} shards: {len(outcome.results)} result rows; report: {outcome.run.report}")


@app.command("plugins")
@json_option("the lists")
def plugins(json_out: Optional[Path]) -> None:
    """List the registered generators, judges, verifiers, strategies and suites."""
    from bon import registry

    check_output_file(json_out)
    plural = {"strategy": "strategies"}
    listing = {plural.get(kind, kind + "s"): registry.names(kind) for kind in registry.KINDS}
    for kind, names in listing.items():
        out.print(f"[bold]{kind}[/]: {', '.join(names)}", markup=True)
    write_numbers(json_out, listing)
