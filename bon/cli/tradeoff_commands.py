"""Cost/quality commands: ``bon tradeoff`` (calls per prompt against Best-of-N quality for every way of
running a judge) and ``bon mmrb2 flips`` (how often the reverse order changes an outcome)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import click

from bon.cli import _fmt, _parse_options, app, check_output_file, json_option, mmrb2_app, out, plugin_options, run_option
from bon.errors import BonError


@app.command("tradeoff")
@run_option("A finished study's run folder.")
@click.option("--judge", "judge_specs", multiple=True, metavar="SPEC",
              help="Judge SPEC or the study's judge label (repeatable; default: the study's judges).")
@plugin_options("judge", "Option for every --judge (YAML value), repeatable.")
@click.option("--gate", "gates", type=click.FloatRange(0.0, 1.0), multiple=True, metavar="G", help="Gates of the gated knockouts (repeatable; default 1.0, 0.6, 0.2).")
@click.option("--margin-gate", "margin_gates", type=click.FloatRange(0.0, 1.0), multiple=True, metavar="G",
              help="Gates on the judge's own margin, for judges that keep one (repeatable; default 0.25, 0.1, 0.05, 0.02).")
@click.option("--max-loss", type=click.FloatRange(min=0.0), default=None, metavar="LOSS", help="Also name, per judge, the cheapest setting within this Best-of-N loss of the full protocol.")
@click.option("--bootstrap", type=click.IntRange(min=100), default=2000, show_default=True, metavar="B", help="Bootstrap replicates of the paired loss interval.")
@json_option("the records (strict JSON)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Folder for tradeoff.json and figures/ (default: the run folder).")
def tradeoff_command(run_dir: Path, judge_specs: tuple[str, ...], judge_options: tuple[str, ...], gates: tuple[float, ...],
                     margin_gates: tuple[float, ...], max_loss: Optional[float], bootstrap: int, json_out: Optional[Path], out_dir: Optional[Path]) -> None:
    """Judge calls per prompt against Best-of-N score and recovery: knockout (both orders), gated knockouts,
    seeded knockout, round-robin, round-robin with early stop. Stored judgments are reused."""
    from analysis.tradeoff import DEFAULT_GATES, DEFAULT_MARGIN_GATES, cheapest_within, default_settings, tradeoff, write_tradeoff
    from bon.study import load_study

    study = load_study(run_dir)
    check_output_file(json_out)
    extra = _parse_options(judge_options)
    specs = list(judge_specs) or [j.label for j in study.cfg.judges]
    judges = [study.judge(spec, extra or None) for spec in specs]
    records = tradeoff(study, judges, default_settings(gates or DEFAULT_GATES, margin_gates or DEFAULT_MARGIN_GATES), bootstrap=bootstrap)
    paths = write_tradeoff(study.run.root, records, out_dir, json_out, max_loss)
    out.print(f"{'judge':<14} {'setting':<28} {'calls':>6} {'cut':>5} {'BoN':>7} {'recov':>6} {'loss [95% CI]':>24} {'gating':>9}")
    for r in records:
        ci = f"{_fmt(r['loss'], '+.4f')} [{_fmt(r['loss_lo'], '+.4f')}, {_fmt(r['loss_hi'], '+.4f')}]"
        cut = "-" if r["calls_cut"] is None else f"{100 * r['calls_cut']:.0f}%"
        out.print(f"{r['judge']:<14} {r['setting']:<28} {r['calls_per_prompt']:6.2f} {cut:>5} {_fmt(r['bon_score'], '.4f'):>7} "
                  f"{_fmt(r['recovery'], '.3f'):>6} {ci:>24} {r['gating'] or '':>9}")
    if max_loss is not None:
        for judge, best in cheapest_within(records, max_loss).items():
            money = "" if best["usd_per_prompt"] is None else f", ${best['usd_per_prompt']:.4f} per prompt"
            out.print(f"cheapest within {max_loss:g} of the full protocol (95% upper bound): {judge}: {best['setting']} "
                      f"({best['calls_per_prompt']:.2f} calls per prompt{money})")
    out.print(f"records: {paths['json']}  figure: {paths['figure']}")


@mmrb2_app.command("flips")
@click.option("--predictions", type=click.Path(path_type=Path), multiple=True, metavar="FILE",
              help="Judgment file(s), as FILE or TASK=FILE (repeatable).")
@click.argument("more_predictions", nargs=-1, type=click.Path(path_type=Path), metavar="FILE...")
@click.option("--bench-dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="Benchmark folder: finds each plain FILE's task by its pair ids.")
@click.option("--run", "run_dir", type=click.Path(path_type=Path, file_okay=False), default=None, metavar="DIR",
              help="A study's run folder: every judge's preference-set judgment files.")
@click.option("--tolerance", type=click.FloatRange(0.0, 1.0), default=0.05, show_default=True, metavar="RATE",
              help="Largest outcome-change rate (95% upper bound) at which a gate counts as safe.")
@json_option("every number (strict JSON)")
def mmrb2_flips(predictions: tuple[Path, ...], more_predictions: tuple[Path, ...], bench_dir: Optional[Path], run_dir: Optional[Path],
                tolerance: float, json_out: Optional[Path]) -> None:
    """How often the reverse order disagreed with, and changed the outcome of, the forward verdict, by the
    forward verdict's confidence (1-6 score or P(A)-P(B) kept in the files' metadata): is gating safe?"""
    from bon.mmrb2.flips import flip_report

    check_output_file(json_out)
    items = list(predictions) + list(more_predictions)
    if not items and run_dir is None:
        raise BonError("mmrb2 flips: no judgment file given (--predictions FILE ... or --run DIR)")
    report = flip_report(items, bench_dir, run_dir, tolerance)
    for name, entry in report["files"].items():
        s = entry["summary"]
        out.print(f"{name:<40} pairs {s['pairs']:>5}  disagree {_rate(s['disagree_rate'])}  outcome changed {_rate(s['changed_rate'])}"
                  f"  gating: {entry['verdict']}")
        for row in s["by_confidence"]:
            level = f"{row['confidence']:.2f}" if "confidence" in row else f"{row['confidence_from']:.1f}-{row['confidence_to']:.1f}"
            out.print(f"    confidence {level:>9}: pairs {row['pairs']:>5}  disagree {_rate(row['disagree_rate'])}  changed {_rate(row['changed_rate'])}")
    if json_out:
        from bon.runfolder import write_json

        write_json(json_out, report)


def _rate(value: Any) -> str:
    return "     -" if value is None else f"{100 * value:5.1f}%"
