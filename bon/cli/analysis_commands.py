"""Analysis commands on finished studies: report, view, compare, power, leaderboard, tradeoff, figure.

Each computes everything first and writes only when it has a result worth keeping: a failure or a
degenerate analysis exits with one line and leaves the folder as it was.
"""

from __future__ import annotations

from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Any, Optional

import click

from bon.cli.common import (_fmt, app, check_output_file, exit_if_calls_pending, json_option, out, parse_options,
                            plugin_options, reuse_freed_memory, run_option, write_numbers)
from bon.errors import BonError
from bon.runlock import holds_writer_lock, writer_lock

RUN = run_option("A finished study folder.")
JSON = json_option("the numbers (strict JSON)")


def _output_folder(run_dir: Path, out_dir: Optional[Path], accuracies: str, own: bool = True):
    """The report's folder: the run's own for its own accuracies and preference set, ``report-<name>`` beside
    it otherwise (``own`` is False when the predictor table comes from other judgment files)."""
    from bon.runfolder import RunFolder

    run = RunFolder(run_dir, existing=True)
    if accuracies is None and own:  # the axis the study's config names: the study's own report
        return RunFolder(out_dir or run_dir)
    accuracies = accuracies or "run"
    if accuracies in ("run", "preference") and own:
        return RunFolder(out_dir or run_dir)
    target = out_dir or run.alternative(Path(accuracies).stem if accuracies != "run" else "benchmark")
    if target.resolve() == run.root.resolve():
        raise BonError(f"--out {target}: an analysis with other accuracies must not replace the study's own report")
    return RunFolder(target)


MAX_LOSS = click.option("--max-loss", type=click.FloatRange(min=0.0), default=0.01, show_default=True, metavar="LOSS",
                        help="Best-of-N loss (score units) within which the cheapest trade-off setting per judge is named "
                             "(when the run holds tradeoff.json of `bon tradeoff`).")


@app.command()
@RUN
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Output folder (default: the run folder; RUN/report-<accuracies> for other accuracies).")
@click.option("--bootstrap", type=click.IntRange(min=100), default=1000, show_default=True, metavar="B", help="Bootstrap replicates.")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the bootstrap resampling.")
@click.option("--accuracies", default=None, metavar="SOURCE",
              help="Judge axis: run (the study's preference set), published (the MMRB2 paper's table) or a CSV/JSON file "
                   "[default: the config's accuracies key, else run].")
@click.option("--bench-dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A real MMRB2 folder: the predictor table uses its pairs (same-model flag from model_name) and --predictions.")
@click.option("--predictions", multiple=True, metavar="JUDGE=FILE",
              help="A judge's `bon mmrb2 judge`-style judgment file for --bench-dir, as JUDGE=FILE (task found from its "
                   "pair ids) or JUDGE=TASK=FILE; JUDGE is a judge label of the run. Repeatable.")
@click.option("--power/--no-power", default=True, show_default=True, help="Include the study-size simulation.")
@MAX_LOSS
@click.option("--grader-judges", type=click.Choice(["exclude", "keep"]), default=None,
              help="Judges sharing the verifier's grader: left out of the correlation (default, or the config's "
                   "leakage: grader_judges) or kept in it; the report shows the other choice's r too.")
@click.option("--overlapping-pairs", type=click.Choice(["drop", "keep"]), default=None,
              help="Preference pairs drawn from the downstream benchmark: dropped from the accuracies (default, or "
                   "the config's leakage: overlapping_pairs) or kept.")
@click.option("--on-failure", type=click.Choice(["official", "zero", "missing"]), default=None,
              help="A failed verifier score: as the benchmark's official code treats it, 0, or missing (its prompt "
                   "leaves BoN, random and oracle); default: the config's on_failure (official).")
@JSON
def report(run_dir: Path, out_dir: Optional[Path], bootstrap: int, seed: int, accuracies: Optional[str], bench_dir: Optional[Path],
           predictions: tuple[str, ...], power: bool, max_loss: float, grader_judges: Optional[str],
           overlapping_pairs: Optional[str], on_failure: Optional[str], json_out: Optional[Path]) -> None:
    """report.md, report.html, CSV tables and figures for a finished study (no judge calls)."""
    from bon.run import as_run

    reuse_freed_memory()
    check_output_file(json_out)
    run = as_run(run_dir)  # read once: every table below is a function of it
    pairs = _benchmark_pairs(run, bench_dir, predictions)
    in_place = accuracies in (None, "run", "preference") and pairs is None and (out_dir is None or out_dir.resolve() == run_dir.resolve())
    with writer_lock(run_dir, "bon report") if in_place else nullcontext():  # one writer at a time
        _report(run, out_dir, bootstrap, seed, accuracies, bench_dir, pairs, power, max_loss, grader_judges,
                overlapping_pairs, on_failure, json_out, lock_output=not in_place)


def _report(run: Any, out_dir: Optional[Path], bootstrap: int, seed: int, accuracies: Optional[str], bench_dir: Optional[Path],
            pairs, power: bool, max_loss: float, grader_judges: Optional[str], overlapping_pairs: Optional[str],
            on_failure: Optional[str], json_out: Optional[Path], lock_output: bool) -> None:
    from analysis.bundle import compute
    from analysis.html_report import run_samples
    from analysis.outputs import figures_while_computing, import_plotting, write_report

    run_dir = run.root
    with figures_while_computing() as figures:
        bundle = compute(run, bootstrap=bootstrap, seed=seed, accuracies=accuracies, power=power, predictor_pairs=pairs,
                         predictor_source=f"the MMRB2 pairs in {bench_dir}" if pairs else "the run's preference set",
                         max_loss=max_loss, grader_judges=grader_judges, overlapping_pairs=overlapping_pairs,
                         on_failure=on_failure, meanwhile=import_plotting, samples=partial(run_samples, per_task=1),
                         then=figures)
        problem = bundle.degenerate()
        if problem:
            raise BonError(f"{run_dir}: {problem}; nothing written")
        folder = _output_folder(run_dir, out_dir, accuracies, own=pairs is None)
        try:
            with writer_lock(folder.root, "bon report") if lock_output else nullcontext():
                written = write_report(bundle, folder)
        except OSError as exc:
            raise BonError(f"{exc.filename or folder.root}: cannot write the report ({exc.strerror})") from None
    pooled = bundle.pooled()
    out.print(f"pooled over settings: r = {_fmt(pooled['pearson_r'], '+.2f')} [{_fmt(pooled['pearson_lo'], '+.2f')}, "
              f"{_fmt(pooled['pearson_hi'], '+.2f')}], ρ = {_fmt(pooled['spearman_rho'], '+.2f')}, judges {pooled['n_judges']}")
    warnings = int(bundle.correlations["flag"].sum())
    out.print(f"report: {written['html']}  ({warnings} coefficients flagged as too uncertain)")
    if json_out is not None:  # the payload takes a while on a large study: only when asked for
        write_numbers(json_out, bundle.payload())


@app.command()
@RUN
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Output folder of view.html (default: the run folder); images are linked by relative path.")
def view(run_dir: Path, out_dir: Optional[Path]) -> None:
    """Every MMRB2 pair and Best-of-N match side by side with both orders' verdicts, filterable (view.html)."""
    from analysis.viewer import write_viewer
    from bon.runfolder import RunFolder

    run = RunFolder(run_dir, existing=True)
    if not any(p.exists() for p in (run.config, run.picks, run.mmrb2)):
        raise BonError(f"{run_dir}: not a run folder (no config.yaml, picks.jsonl or mmrb2/); give the folder that "
                       "`bon run` or `bon demo` wrote")
    try:
        path, data = write_viewer(run_dir, out_dir)
    except OSError as exc:
        raise BonError(f"{exc.filename or out_dir or run_dir}: cannot write view.html ({exc.strerror})") from None
    kinds = {k: sum(i["kind"] == k for i in data["items"]) for k in ("pair", "match")}
    disagree = sum(i["disagree"] for i in data["items"])
    out.print(f"view: {path}  ({kinds['pair']} pair verdicts, {kinds['match']} match verdicts, {len(data['judges'])} "
              f"judges; the orders disagree on {disagree})")


def _benchmark_pairs(run: Any, bench_dir: Optional[Path], predictions: tuple[str, ...]):
    """The predictor table's pairs from a real MMRB2 folder and judgment files, or None (the run's own)."""
    if bench_dir is None and not predictions:
        return None
    if bench_dir is None or not predictions:
        raise BonError("--bench-dir and --predictions go together: the MMRB2 folder and each judge's judgment files")
    from analysis.predictors import benchmark_task_pairs
    from bon.mmrb2 import assign_predictions

    judges = {p.get("judge") for p in run.pick_records}
    run_dir = run.root
    files: dict[str, dict[str, Path]] = {}
    for item in predictions:
        judge = max((j for j in judges if item.startswith(f"{j}=")), key=len, default=None)  # labels may hold "="
        if judge is None:
            raise BonError(f"--predictions {item}: expected JUDGE=FILE or JUDGE=TASK=FILE with a judge of {run_dir} "
                           f"({', '.join(sorted(judges))})")
        rest = item[len(judge) + 1:]
        for task, path in assign_predictions(bench_dir, [rest]):
            if task.name in files.get(judge, {}):
                raise BonError(f"--predictions {item}: a second file for {judge} on task {task.name}")
            files.setdefault(judge, {})[task.name] = path
    return partial(benchmark_task_pairs, bench_dir, files)  # the bundle binds the leakage guard's overlap rule


@app.command()
@click.option("--run", "runs", type=click.Path(path_type=Path, file_okay=False), multiple=True, required=True,
              metavar="DIR", help="A finished study folder; give exactly two (A, then B).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Output folder (default: inside B).")
def compare(runs: tuple[Path, ...], out_dir: Optional[Path]) -> None:
    """Two studies side by side: Best-of-N and accuracy differences, correlations of both."""
    from analysis.html_report import compare_runs

    if len(runs) != 2:
        raise BonError(f"--run: give exactly two run folders (got {len(runs)})")
    out.print(f"comparison: {compare_runs(runs[0], runs[1], out_dir)}")


@app.command()
@RUN
@click.option("--width", type=float, default=0.5, show_default=True, metavar="W", help="Wanted width of the 95% interval of r.")
@click.option("--task", metavar="TASK", default=None, help="Only this task.")
@click.option("--generator", default=None, metavar="LABEL", help="Only this generator.")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the bootstrap resampling.")
@JSON
def power(run_dir: Path, width: float, task: Optional[str], generator: Optional[str], seed: int,
          json_out: Optional[Path]) -> None:
    """How many prompts and judges a study needs for a correlation interval of a given width."""
    from analysis.power import format_power, power_analysis

    check_output_file(json_out)
    result = power_analysis(run_dir, width=width, task=task, generator=generator, seed=seed)
    out.print(format_power(result), highlight=False)
    write_numbers(json_out, {k: result[k] for k in ("model", "width", "recommendation", "pairs", "grid", "pilot_settings", "left_out")})


@app.command()
@RUN
@click.option("--task", metavar="TASK", required=True, help="t2i, edit, interleaved or reasoning.")
@click.option("--generator", required=True, metavar="LABEL", help="A generator label of the study.")
@click.option("--strategy", default=None, metavar="LABEL",
              help="Only picks of this strategy label (the study's, or one `bon select` wrote, e.g. round-robin-borda).")
@click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed of the bootstrap resampling.")
@MAX_LOSS
@JSON
def leaderboard(run_dir: Path, task: str, generator: str, strategy: Optional[str], seed: int, max_loss: float,
                json_out: Optional[Path]) -> None:
    """Which reranker to use: judges by Best-of-N gain, paired bootstrap against the best, gain per call and dollar;
    with `bon tradeoff` data, the cheapest way to run each judge within a Best-of-N loss."""
    from analysis.leaderboard import CHEAPEST_SCOPE, format_cheapest, format_leaderboard, run_leaderboard
    from analysis.tradeoff import leaderboard_rows

    check_output_file(json_out)
    table = run_leaderboard(run_dir, task, generator, strategy=strategy, seed=seed)
    cheapest = leaderboard_rows(run_dir, max_loss)
    out.print(format_leaderboard(table), highlight=False)
    if cheapest:
        out.print(format_cheapest(cheapest, max_loss), highlight=False)
    write_numbers(json_out, {"task": task, "generator": generator, "strategy": strategy, "leaderboard": table,
                             "cheapest_within": {"max_loss": max_loss, "scope": CHEAPEST_SCOPE, "judges": cheapest}
                             if cheapest else None})


@app.command("tradeoff")
@run_option("A finished study's run folder.")
@click.option("--judge", "judge_specs", multiple=True, metavar="SPEC",
              help="Judge SPEC or the study's judge label (repeatable; default: the study's judges).")
@plugin_options("judge", "Option for every --judge (YAML value), repeatable.")
@click.option("--gate", "gates", type=click.FloatRange(0.0, 1.0), multiple=True, metavar="G", help="Gates of the gated knockouts (repeatable; default 1.0, 0.6, 0.2).")
@click.option("--margin-gate", "margin_gates", type=click.FloatRange(0.0, 1.0), multiple=True, metavar="G",
              help="Gates on the judge's own margin, for judges that keep one (repeatable; default 0.25, 0.1, 0.05, 0.02).")
@click.option("--cascade", "cascades", multiple=True, metavar="SPEC",
              help="Cheap judge of the cascades (a spec or the study's judge label; repeatable; default: from the study's "
                   "own data: among the judges the leakage policy keeps and at least as accurate as their median, the "
                   "cheapest by money per call, then the most accurate; 'none': no cascade).")
@click.option("--prefilter", "prefilters", multiple=True, metavar="SPEC",
              help="Pointwise judge of the prefilter settings (knockout among its top k, k = 2..N-1 and auto; a spec or the "
                   "study's judge label; repeatable; default: every judge of the study that scores a candidate alone and that "
                   "the leakage policy keeps; 'none': no prefilter).")
@click.option("--keep", "keeps", type=click.IntRange(min=1), multiple=True, metavar="K",
              help="Candidates the prefilter settings keep (repeatable, each below N; default 2 .. N/2, the settings that "
                   "cost at most about half of knockout; keep auto always runs).")
@plugin_options("strategy", "Option of the calibrated, cascade and uncertainty settings (e.g. max_flip=0.05, audit=0.2, tolerance=0.1), repeatable.")
@click.option("--max-loss", type=click.FloatRange(min=0.0), default=None, metavar="LOSS", help="Also name, per judge, the cheapest setting within this Best-of-N loss of the full protocol.")
@click.option("--bootstrap", type=click.IntRange(min=100), default=2000, show_default=True, metavar="B", help="Bootstrap replicates of the paired loss interval.")
@json_option("the records (strict JSON)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Folder for tradeoff.json and figures/ (default: the run folder).")
@click.option("--workers", type=click.IntRange(min=0), default=0, show_default=True, metavar="K",
              help="Processes replaying judges side by side (0: one per CPU core); the records do not depend on it.")
@holds_writer_lock("run_dir", "bon tradeoff")
def tradeoff_command(run_dir: Path, judge_specs: tuple[str, ...], judge_options: tuple[str, ...], gates: tuple[float, ...],
                     margin_gates: tuple[float, ...], cascades: tuple[str, ...], prefilters: tuple[str, ...], keeps: tuple[int, ...],
                     strategy_options: tuple[str, ...],
                     max_loss: Optional[float], bootstrap: int, json_out: Optional[Path], out_dir: Optional[Path],
                     workers: int) -> None:
    """Judge calls per prompt against Best-of-N score and recovery: knockout (both orders), gated knockouts (fixed
    and calibrated with an audit), cascades, seeded knockout, the uncertainty-driven strategy, round-robin, round-robin
    with early stop, knockout among a pointwise prefilter's top k. Stored judgments are reused."""
    from analysis import leakage
    from analysis.prefilter import prefilter_judges
    from analysis.tradeoff import (DEFAULT_GATES, DEFAULT_MARGIN_GATES, cascade_judges, cheapest_within, default_settings,
                                   flags, study_judge, tradeoff, write_tradeoff)
    from bon.progress import note
    from bon.study import load_study

    note(f"tradeoff: reading {run_dir}")
    study = load_study(run_dir)
    check_output_file(json_out)
    extra = parse_options(judge_options)
    specs = list(judge_specs) or [j.label for j in study.cfg.judges]
    judges = [study_judge(study, spec, extra or None) for spec in specs]
    excluded = leakage.run_exclusions(study.run.root, [j.label for j in study.cfg.judges])
    for spec in (*cascades, *prefilters):
        if spec != "none":
            study_judge(study, spec)  # an unknown cheap judge is a one-line error before any replay
    settings = default_settings(gates or DEFAULT_GATES, margin_gates or DEFAULT_MARGIN_GATES,
                                cascade_judges(study, cascades, excluded), parse_options(strategy_options, "--strategy-option"),
                                prefilter_judges(study, prefilters, excluded), study.cfg.n, keeps)
    records = tradeoff(study, judges, settings, bootstrap=bootstrap, excluded=excluded, workers=workers)
    note("tradeoff: writing tradeoff.json, tradeoff.md and the figure")
    paths = write_tradeoff(study.run.root, records, out_dir, json_out, max_loss)
    out.print(f"{'judge':<14} {'setting':<28} {'calls':>6} {'cut':>5} {'BoN':>7} {'recov':>6} {'loss [95% CI]':>24}  gating and flags")
    for r in records:
        ci = f"{_fmt(r['loss'], '+.4f')} [{_fmt(r['loss_lo'], '+.4f')}, {_fmt(r['loss_hi'], '+.4f')}]"
        cut = "-" if r["calls_cut"] is None else f"{100 * r['calls_cut']:.0f}%"
        pre = f"; + {r['prefilter_calls_per_prompt']:.0f} {r['prefilter']} scores, recall {_fmt(r['recall'], '.2f')}" \
            if r.get("prefilter") else ""
        out.print(f"{r['judge']:<14} {r['setting']:<28} {r['calls_per_prompt']:6.2f} {cut:>5} {_fmt(r['bon_score'], '.4f'):>7} "
                  f"{_fmt(r['recovery'], '.3f'):>6} {ci:>24}  {flags(r)}{pre}", highlight=False)
    if max_loss is not None:
        for judge, best in cheapest_within(records, max_loss).items():
            money = "" if best["usd_per_prompt"] is None else f", ${best['usd_per_prompt']:.4f} per prompt"
            out.print(f"cheapest within {max_loss:g} of the full protocol (95% upper bound): {judge}: {best['setting']} "
                      f"({best['calls_per_prompt']:.2f} calls per prompt{money})")
    for r in records:
        if r.get("note"):
            out.print(f"{r['judge']}: {r['setting']}: {r['note']}", highlight=False)
    out.print(f"records: {paths['json']}  figure: {paths['figure']}")
    exit_if_calls_pending(sum(r.get("calls_pending", 0) for r in records))  # transient failures: rerun


@app.command()
@click.option("--scores", "scores_csv", type=click.Path(path_type=Path, dir_okay=False), default=None, metavar="FILE",
              help="CSV: task, generator, judge, bon_score[, random_score, oracle_score][, n_prompts, bon_sd]; "
                   "a run folder's results.csv works.")
@click.option("--run", "runs", type=click.Path(path_type=Path, file_okay=False), multiple=True, metavar="DIR",
              help="A finished study instead of --scores (repeatable): the four one-task paper runs make the paper's "
                   "four-panel figure and table, each with the judge axis its config names.")
@click.option("--accuracies", default="published", show_default=True, metavar="SOURCE",
              help="With --scores: published (the MMRB2 paper's table) or a CSV with judge, task, accuracy (e.g. a run's accuracies.csv).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Output folder for figures/correlation.png|svg and correlations.csv (default: <scores stem>_figure/ beside "
                   "the CSV; with --run, paper_figure/ beside the first run).")
def figure(scores_csv: Optional[Path], runs: tuple[Path, ...], accuracies: str, out_dir: Optional[Path]) -> None:
    """The paper's correlation figure for your own Best-of-N scores, or for finished runs (the paper's four tasks)."""
    from analysis.scores_figure import runs_figure, scores_figure

    if (scores_csv is None) == (not runs):
        raise BonError("give either --scores FILE or one --run DIR per study (e.g. the four paper runs)")
    if runs:
        from bon.progress import note

        note(f"figure: combining {len(runs)} runs")
        result = runs_figure(list(runs), out_dir)
        out.print(f"tasks: {', '.join(result['tasks'])}; png: {result['png']}  table: {result['markdown']}  "
                  f"correlations: {result['correlations']}" + (f"; no accuracy for {', '.join(result['left_out'])}"
                                                                if result["left_out"] else ""), highlight=False)
        return
    result = scores_figure(scores_csv, accuracies=accuracies, out=out_dir)
    out.print(", ".join(f"{k}: {v}" for k, v in result.items() if k in ("png", "svg", "correlations", "matched", "left_out")))
