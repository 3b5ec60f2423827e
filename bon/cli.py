"""The ``bon`` command line. Bad input ends in one line on stderr (exit 2), never a traceback."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Optional

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
def run(config: Path, out_dir: Optional[Path], strategy: Optional[str], max_calls: Optional[int]) -> None:
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
    if outcome.stopped:
        print(f"bon: stopped early: {outcome.stopped}", file=sys.stderr)
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


def _fmt(v: float, spec: str = ".3f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


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


@mmrb2_app.command("accuracy")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Folder with t2i.json ... (or *_response_only.json).")
@click.option("--task", required=True, help="image, edit, interleaved, reasoning or all.")
@click.option("--predictions", type=click.Path(path_type=Path), required=True, multiple=True,
              help="Judgment file(s): one per task, in official order for --task all. Repeat the option or list them.")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Also write the numbers as JSON.")
def mmrb2_accuracy(bench_dir: Path, task: str, predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], json_out: Optional[Path]) -> None:
    """Score official-format judgment files with the official scorer's semantics."""
    from analysis import mmrb2

    predictions = list(predictions) + list(more_predictions)
    tasks = list(mmrb2.TASK_FILES) if task == "all" else [mmrb2.scorer_task(task)]
    if len(predictions) != len(tasks):
        raise BonError(f"--task {task} needs {len(tasks)} prediction file(s) ({', '.join(tasks)}), got {len(predictions)}")
    result = mmrb2.evaluate(bench_dir, dict(zip(tasks, predictions)))
    for name in tasks:
        r = result[name]
        unknown = f"  unknown ids {r['unknown_ids']} (ignored)" if r.get("unknown_ids") else ""
        out.print(f"{name:<12} accuracy {r['accuracy']:6.2f}%  total {r['total_pairs']}  evaluated {r['evaluated_pairs']}  "
                  f"missing {r['missing_pairs']}  ({r['correct']}/{r['judgements']} judgements){unknown}")
    if len(tasks) > 1:
        o = result["overall"]
        out.print(f"{'overall':<12} accuracy {o['accuracy']:6.2f}%  ({o['correct']}/{o['judgements']} judgements, micro-averaged)")
    if json_out:
        from bon.runfolder import write_json

        write_json(json_out, {"tasks": {t: result[t] for t in tasks}, "overall": result["overall"]})


@mmrb2_app.command("judge")
@click.option("--judge", "judge_spec", required=True, help="Registered judge, e.g. scene-full or transformers-vlm:MODEL.")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder in MMRB2 layout.")
@click.option("--task", required=True, help="image (or t2i), edit, interleaved or reasoning.")
@click.option("--out", "out_file", type=click.Path(path_type=Path), required=True, help="Official-format judgment file (resumed if present).")
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True, help="Samples per direction.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Judge only the first M pairs.")
@click.option("--store", "store_path", type=click.Path(path_type=Path), default=None,
              help="Judgment store (default: judgments.sqlite beside --out).")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Judge option (YAML value), repeatable.")
@click.option("--official-prompts", type=click.Path(path_type=Path), default=None,
              help="A local MMRB2 checkout: MLLM judges use its official rubric text instead of bon's own.")
def mmrb2_judge(judge_spec: str, bench_dir: Path, task: str, out_file: Path, samples: int, limit: Optional[int],
                store_path: Optional[Path], options: tuple[str, ...], official_prompts: Optional[Path]) -> None:
    """Ask a judge every pair in both orders; write an official judgment file as it goes (resumable)."""
    from analysis import mmrb2
    from bon import registry
    from bon.referee import Referee
    from bon.stages.judge_bench import judge_pairs
    from bon.store import JudgmentStore

    task = mmrb2.scorer_task(task)
    mmrb2.find_task_file(bench_dir, task)  # fail before loading any model
    judge_options = _parse_options(options)
    if official_prompts is not None:
        judge_options["official_prompts"] = str(official_prompts)
    judge = registry.create("judge", judge_spec, **judge_options)
    done = mmrb2.load_judgments(out_file) if out_file.exists() else {}
    store = JudgmentStore(store_path or out_file.parent / "judgments.sqlite")
    try:
        referee = Referee(judge, store, samples=samples)
        save = lambda data: mmrb2.write_judgments(out_file, data)  # noqa: E731
        result = judge_pairs(bench_dir, task, referee, limit=limit, done=done, save=save)
        save(result)
    finally:
        store.close()
    s = referee.stats
    out.print(f"{len(result)} pairs judged by {judge.name} -> {out_file}  "
              f"(calls made {s.calls_made}, from store {s.calls_cached}, missing {s.missing})")


@mmrb2_app.command("fetch")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder to write.")
@click.option("--task", "tasks", multiple=True, type=click.Choice(["t2i", "edit", "interleaved", "reasoning"]),
              help="Only these tasks (default: all four).")
def mmrb2_fetch(out_dir: Path, tasks: tuple[str, ...]) -> None:
    """Download the MMRB2 release from the Hugging Face hub into the official folder layout."""
    from analysis.mmrb2_fetch import fetch

    counts = fetch(out_dir, tasks or ("t2i", "edit", "interleaved", "reasoning"))
    out.print(", ".join(f"{t}: {k} pairs" for t, k in counts.items()) + f" -> {out_dir}")


@mmrb2_app.command("report")
@click.option("--bench-dir", type=click.Path(path_type=Path), required=True, help="Benchmark folder in MMRB2 layout.")
@click.option("--predictions", type=click.Path(path_type=Path), multiple=True,
              help="Judgment file(s), as FILE (task found from its pair ids) or TASK=FILE; repeatable.")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path))
@click.option("--exclude-source", "exclude", multiple=True, help="Drop pairs of this prompt_source (repeatable).")
@click.option("--json", "json_out", type=click.Path(path_type=Path), default=None, help="Write every number as JSON.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None, help="Folder for report.md and plots.")
def mmrb2_report(bench_dir: Path, predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], exclude: tuple[str, ...],
                 json_out: Optional[Path], out_dir: Optional[Path]) -> None:
    """Diagnostics: accuracy by source and category, same-model pairs, position and image bias,
    K-sample voting, human agreement and generator win rates."""
    from analysis.diagnostics import diagnose, write_diagnostics

    by_task: dict[str, list[Path]] = {}
    for item in list(predictions) + list(more_predictions):
        task, path = _prediction_task(bench_dir, str(item))
        by_task.setdefault(task, []).append(path)
    result = diagnose(bench_dir, by_task, exclude_sources=exclude)
    write_diagnostics(result, out_dir, json_out)
    for task, t in result["tasks"].items():
        out.print(f"{task:<12} pairs {t.get('pairs', '?')}  " + "  ".join(
            f"{name} {j['accuracy']['accuracy']:.2f}%" for name, j in t.get("judges", {}).items()))
    out.print(f"report: {out_dir / 'report.md' if out_dir else '-'}  json: {json_out or '-'}")


def _prediction_task(bench_dir: Path, item: str) -> tuple[str, Path]:
    """``TASK=FILE``, or a plain FILE whose task is the one sharing the most pair ids with it."""
    from analysis import mmrb2

    task, sep, file = item.partition("=")
    if sep and task in (*mmrb2.TASK_FILES, *mmrb2.BON_TO_SCORER):
        return mmrb2.scorer_task(task), Path(file)
    path = Path(item)
    ids = set(mmrb2.load_judgments(path))
    overlap = {}
    for name in mmrb2.TASK_FILES:
        try:
            overlap[name] = len(ids & {p.id for p in mmrb2.load_pairs(mmrb2.find_task_file(bench_dir, name))})
        except BonError:
            continue
    best = max(overlap, key=overlap.get, default=None)
    if best is None or overlap[best] == 0:
        raise BonError(f"{path}: none of its pair ids is in {bench_dir}; pass it as TASK=FILE")
    return best, path


def _parse_options(options: tuple[str, ...]) -> dict:
    import yaml

    parsed = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not key:
            raise BonError(f"--option {opt!r}: expected KEY=VALUE")
        parsed[key] = yaml.safe_load(value)
    return parsed


@app.command("plugins")
def plugins() -> None:
    """List the registered generators, judges, verifiers, strategies and suites."""
    from bon import registry

    plural = {"strategy": "strategies"}
    for kind in registry.KINDS:
        out.print(f"[bold]{plural.get(kind, kind + 's')}[/]: {', '.join(registry.names(kind))}")


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


if __name__ == "__main__":
    sys.exit(main())
