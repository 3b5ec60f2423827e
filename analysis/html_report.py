"""``report.html``: the whole study in one self-contained file, and two studies side by side.

Everything is inline: figures as base64 PNG (each with its SVG as a data-URI download), candidate
thumbnails as base64 PNG, every table's numbers as CSV/JSON data-URI downloads, and a few lines of
vanilla JavaScript that sort tables by a click on a header and filter the long ones. No external URL
is referenced anywhere, so the file opens offline, can be mailed, and shows the same thing in ten years.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import time
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis import leakage
from analysis.bon_metrics import task_order
from analysis.bundle import CORRELATION_COLUMNS, SCOPES, ReportBundle, compute, finite, fmt_p, inline
from analysis.leaderboard import CHEAPEST_SCOPE, LABEL_RULE, is_best
from bon.tasks import TASK_TITLES
from analysis.statistics import POINT
from analysis.tradeoff import flags as tradeoff_flags
from bon.content import inside, slug
from bon.errors import BonError
from bon.run import Run, as_run
from bon.runfolder import RunFolder, write_text

THUMB = 112  # px, longest side of a candidate thumbnail

CSS = """
:root{--fg:#1b1f24;--muted:#5b6470;--line:#d8dde3;--bg:#fff;--alt:#f6f8fa;--accent:#0b5cad;--warn:#9a5b00;--warnbg:#fff6e0;--good:#0f6b3a}
*{box-sizing:border-box}
body{margin:0;font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
main{max-width:1240px;margin:0 auto;padding:28px 28px 60px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px;padding-top:8px;border-top:1px solid var(--line)}
h3{font-size:16px;margin:22px 0 6px}p,li{max-width:920px}.muted{color:var(--muted)}.small{font-size:12.5px}
nav{display:flex;flex-wrap:wrap;gap:6px 14px;margin:14px 0 4px;font-size:13px}nav a{color:var(--accent);text-decoration:none}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:18px 0}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 14px;min-width:140px;flex:1;background:var(--alt)}
.card .v{font-size:21px;font-weight:600}.card .k{font-size:12px;color:var(--muted)}
figure{margin:14px 0 8px}figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:4px}
figcaption{font-size:12.5px;color:var(--muted);max-width:960px}
.tablewrap{display:block;width:fit-content;max-width:100%;min-width:0;box-sizing:border-box;overflow:auto;margin:8px 0 4px;border:1px solid var(--line);border-radius:6px;max-height:640px}
table{border-collapse:collapse;font-size:12.5px}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);white-space:nowrap;text-align:left}
th{background:#eef1f4;position:sticky;top:0;z-index:1;font-weight:600}
table.sortable th{cursor:pointer;user-select:none}table.sortable th:hover{background:#e2e7ec}
th[data-dir=asc]::after{content:" \\25B2";font-size:9px}th[data-dir=desc]::after{content:" \\25BC";font-size:9px}
td.num{text-align:right;font-variant-numeric:tabular-nums}tbody tr:nth-child(even){background:var(--alt)}
tr.flag td:first-child::before{content:"\\26A0 ";color:var(--warn)}tr.flag{background:var(--warnbg)!important}
td.warn{color:var(--warn);white-space:normal;min-width:260px;font-size:12px}
.tag{display:inline-block;padding:0 6px;border-radius:9px;background:#e6eef7;color:#123;font-size:11px;margin:1px 2px 1px 0}
.tag.best{background:#dff3e6;color:var(--good)}
input.filter{margin:6px 0;padding:4px 8px;border:1px solid var(--line);border-radius:5px;font-size:13px;width:280px}
details{margin:6px 0}summary{cursor:pointer;font-weight:600}
.prompt{border:1px solid var(--line);border-radius:8px;padding:10px 12px;margin:12px 0}
.prompt .text{white-space:pre-wrap;margin:2px 0 8px}
.cands{display:flex;flex-wrap:wrap;gap:8px}
.cand{width:134px;border:1px solid var(--line);border-radius:6px;padding:6px;font-size:11.5px;background:#fff}
.cand.oracle{border-color:var(--good);box-shadow:0 0 0 1px var(--good) inset}
.cand img{display:block;max-width:100%;margin:0 auto 4px;image-rendering:auto}
.cand .imgs{display:flex;gap:2px;flex-wrap:wrap;justify-content:center}.cand .imgs img{max-width:58px;margin:0}
.cand .t{color:var(--muted);max-height:64px;overflow:hidden;font-size:11px}
.bar{height:5px;background:#e6e9ed;border-radius:3px;margin:3px 0}.bar i{display:block;height:5px;background:#3c7dbf;border-radius:3px}
.legend{font-size:12px;color:var(--muted);margin:6px 0}
.dl a{margin-right:14px}
code{font-size:12.5px;background:var(--alt);padding:1px 4px;border-radius:3px}
@media print{.tablewrap{max-height:none;overflow:visible}nav,input.filter{display:none}}
"""

JS = """
(function(){
  function val(td){var v=td.getAttribute('data-v');if(v===null)v=td.textContent;var n=parseFloat(v);
    return (v!==''&&isFinite(n)&&/^[-+]?[0-9.eE+-]+$/.test(v.trim()))?{n:n}:{s:v.toLowerCase()};}
  function cmp(a,b){if(a.n!==undefined&&b.n!==undefined)return a.n-b.n;if(a.n!==undefined)return -1;if(b.n!==undefined)return 1;
    return a.s<b.s?-1:a.s>b.s?1:0;}
  document.querySelectorAll('table.sortable').forEach(function(table){
    var heads=table.tHead?table.tHead.rows[0].cells:[];
    Array.prototype.forEach.call(heads,function(th,i){
      th.title='Click to sort';
      th.addEventListener('click',function(){
        var dir=th.getAttribute('data-dir')==='asc'?'desc':'asc';
        Array.prototype.forEach.call(heads,function(h){h.removeAttribute('data-dir');});
        th.setAttribute('data-dir',dir);
        var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
        rows.sort(function(r1,r2){var c=cmp(val(r1.cells[i]),val(r2.cells[i]));return dir==='asc'?c:-c;});
        rows.forEach(function(r){body.appendChild(r);});
      });
    });
  });
  document.querySelectorAll('input.filter').forEach(function(input){
    var table=document.getElementById(input.getAttribute('data-table'));
    input.addEventListener('input',function(){
      var q=input.value.toLowerCase().split(/\\s+/).filter(Boolean);
      Array.prototype.forEach.call(table.tBodies[0].rows,function(r){
        var t=r.textContent.toLowerCase();
        r.style.display=q.every(function(w){return t.indexOf(w)>=0;})?'':'none';
      });
    });
  });
})();
"""


# --- small builders ---------------------------------------------------------------------------------


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def fmt(spec: str) -> Callable[[Any], str]:
    def f(v: Any) -> str:
        if not finite(v):
            return "–"
        text = format(float(v), spec)
        if text.lstrip("+-").replace(".", "").replace("%", "").strip("0") == "":  # "-0.000" from rounding
            text = format(0.0, spec)
        return text.replace("-", "−")
    return f


def _p_text(v: Any) -> str:
    """``< 0.001`` or ``= 0.012``, for running text."""
    return "–" if not finite(v) else ("< 0.001" if float(v) < 0.001 else f"= {float(v):.3f}")


def ci(lo: Any, hi: Any, spec: str = "+.2f") -> str:
    if not (finite(lo) and finite(hi)):
        return "–"
    f = fmt(spec)
    return f"[{f(lo)}, {f(hi)}]"


# (header, header tooltip, raw value for sorting, display text or None, [extra cell class])
Column = tuple


def col(label: str, key: str, spec: str | Callable[[Any], str] | None = None, title: str = "") -> Column:
    """A table column: header, raw value (sort key) and display text, read from a row mapping."""
    f = fmt(spec) if isinstance(spec, str) else spec
    return (label, title, (lambda r: r.get(key)), (lambda r: f(r.get(key))) if f else None)


def text(label: str, get: str | Callable[[Mapping[str, Any]], Any], cls: str = "") -> Column:
    """A column shown as it is: a row key, or a function of the row."""
    return (label, "", (lambda r: r[get]) if isinstance(get, str) else get, None, cls)


def interval(label: str, lo: str, hi: str, spec: str = "+.2f", title: str = "") -> Column:
    """``[lo, hi]`` of two row keys, sorted by the lower end."""
    return (label, title, lambda r: r.get(lo), lambda r: ci(r.get(lo), r.get(hi), spec))


TASK = text("task", lambda r: TASK_TITLES.get(r["task"], r["task"]))


def html_table(rows: Iterable[Mapping[str, Any]], columns: Sequence[Column], table_id: str | None = None,
               sortable: bool = True, flag: Callable[[Mapping[str, Any]], str] | None = None) -> str:
    head = "".join(f'<th title="{esc(c[1])}">{esc(c[0])}</th>' if c[1] else f"<th>{esc(c[0])}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for column in columns:
            _, _, raw, shown, *extra = column
            v = raw(r)
            display = shown(r) if shown else ("–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else str(v))
            num = finite(v) and not isinstance(v, (bool, np.bool_)) and not isinstance(v, str)
            data_v = f' data-v="{float(v):.10g}"' if num else ""
            cls = " ".join(c for c in ("num" if num else "", *extra) if c)
            cells.append(f'<td{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}{data_v}>{esc(display)}</td>')
        why = flag(r) if flag else ""
        cls = f' class="flag" title="{esc(why)}"' if why else ""
        body.append(f"<tr{cls}>{''.join(cells)}</tr>")
    tid = f' id="{esc(table_id)}"' if table_id else ""
    return (f'<div class="tablewrap"><table{tid} class="{"sortable" if sortable else ""}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def records(df: pd.DataFrame | None) -> list[dict[str, Any]]:
    return [] if df is None or df.empty else df.to_dict(orient="records")


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def figure_html(paths: Sequence[Path] | None, caption: str, alt: str, max_width: int | None = None) -> str:
    """An inline PNG with its SVG (when there is one) as a download link."""
    if not paths:
        return ""
    png = next((Path(p) for p in paths if Path(p).suffix == ".png"), None)
    svg = next((Path(p) for p in paths if Path(p).suffix == ".svg"), None)
    if png is None or not png.exists():
        return ""
    link = ""
    if svg is not None and svg.exists():
        link = f' <a download="{esc(svg.name)}" href="{data_uri(svg.read_bytes(), "image/svg+xml")}">Download SVG</a>.'

    style = f' style="max-width:{max_width}px"' if max_width else ""
    return (f'<figure><img alt="{esc(alt)}"{style} src="{data_uri(png.read_bytes(), "image/png")}">'
            f"<figcaption>{caption}{link}</figcaption></figure>")


def thumbnail(path: Path, size: int = THUMB) -> str | None:
    """A base64 thumbnail (JPEG, or PNG when that is smaller), or None when the image cannot be read."""
    from bon.backends.images import open_image

    try:
        with open_image(path, str(path)) as im:
            im = im.convert("RGB")
            im.thumbnail((size, size))
            jpg, png = io.BytesIO(), io.BytesIO()
            im.save(jpg, format="JPEG", quality=85)
            im.save(png, format="PNG")  # optimize=True: 5% smaller, 4x slower, and JPEG is smaller for photos anyway
    except (BonError, OSError, ValueError):  # missing, broken or over the pixel limit: shown without it
        return None
    if png.tell() <= jpg.tell():
        return data_uri(png.getvalue(), "image/png")
    return data_uri(jpg.getvalue(), "image/jpeg")


def _inside(base: Path, rel: str) -> Path | None:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts:
        return None
    path = base / Path(*p.parts)
    return path if inside(path, base) else None  # a symbolic link out of the folder is not followed


def content_html(content: Any, base: Path, size: int = THUMB, max_text: int = 220) -> str:
    """MMRB2-style ``[[kind, value], ...]`` content as thumbnails and (shortened) text."""
    if not isinstance(content, list):
        return ""
    imgs, texts = [], []
    for item in content:
        if not (isinstance(item, (list, tuple)) and len(item) == 2):
            continue
        kind, value = item
        if kind == "image":
            path = _inside(base, str(value))
            uri = thumbnail(path, size) if path is not None else None
            if uri:
                imgs.append(f'<img alt="image" src="{uri}">')
        elif kind == "text":
            texts.append(str(value))
    text = " ".join(texts)
    # keep the end too: a reasoning answer ("Answer: 3") usually comes last
    short = text if len(text) <= max_text else text[: max_text * 3 // 5].rstrip() + " … " + text[-(max_text * 2 // 5):].lstrip()
    out = f'<div class="imgs">{"".join(imgs)}</div>' if imgs else ""
    if short:
        out += f'<div class="t" title="{esc(text)}">{esc(short)}</div>'
    return out


# --- the run report ---------------------------------------------------------------------------------


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{esc(title)}</title><style>{CSS}</style></head>"
            f"<body><main>{body}</main><script>{JS}</script></body></html>\n")


CORR_TITLE = {  # header tooltips, by a part of the header
    "95% CI": "Bias-corrected bootstrap interval over judges, prompts and MMRB2 pairs",
    "p (": "Two-sided permutation p-value: judge labels permuted",
    "CI (meas.)": "Interval with the judges held fixed: prompts and pairs resampled only",
    "LOO r": "Smallest and largest r after leaving out any one judge",
}


def correlation_columns() -> list[Column]:
    """report.md's correlation columns (:data:`analysis.bundle.CORRELATION_COLUMNS`), and p (τ)."""
    cols: list[Column] = [TASK, text("generator", "generator"), text("scope", lambda r: SCOPES.get(r["scope"], r["scope"]))]
    for label, key in [*CORRELATION_COLUMNS, ("p (τ)", "kendall_p_perm")]:
        title = next((t for part, t in CORR_TITLE.items() if part in label), "")
        if isinstance(key, tuple):
            cols.append(interval(label, *key, title=title))
        else:
            cols.append(col(label, key, fmt_p if label.startswith("p (") else "+.2f" if key in POINT.values() else None, title))
    return cols


def metrics_columns() -> list[Column]:
    return [
        TASK, text("generator", "generator"), text("judge", "judge"),
        col("MMRB2 acc. %", "mmrb2_accuracy", ".1f"), interval("acc. 95% CI", "acc_lo", "acc_hi", ".1f"),
        col("BoN", "bon_score", ".3f"), interval("BoN 95% CI", "bon_lo", "bon_hi", ".3f"),
        col("random", "random_score", ".3f"), col("oracle", "oracle_score", ".3f"),
        col("gain", "gain", "+.3f"), interval("gain 95% CI", "gain_lo", "gain_hi", "+.3f"),
        col("recovery", "recovery", ".0%"), interval("recovery 95% CI", "recovery_lo", "recovery_hi", ".0%"),
        col("win rate", "win_rate", ".2f", "P(pick beats another candidate of the prompt), ties count half"),
        col("mean rank", "mean_rank", ".2f", "rank of the pick among the N candidates, 1 = best"),
        col("oracle hit", "oracle_hit", ".0%", "share of prompts where the pick scored as high as the best candidate"),
        col("prompts", "prompts"), col("calls/prompt", "calls_per_prompt", ".1f"),
        col("unscored", "unscored_picks"),
    ]


def leaderboard_columns() -> list[Column]:
    return [
        col("#", "rank"), text("judge", lambda r: leakage.flagged(r["judge"], {r["judge"]: r["left_out"]} if isinstance(r.get("left_out"), str) and r["left_out"] else {})),
        col("MMRB2 acc. %", "mmrb2_accuracy", ".1f"), col("BoN", "bon_score", ".3f"),
        interval("95% CI", "bon_lo", "bon_hi", ".3f"), col("gain", "gain", "+.3f"),
        ("vs best", "paired difference of means on the same prompts", lambda r: r.get("diff_vs_best"),
         lambda r: "best" if is_best(r) else fmt("+.3f")(r.get("diff_vs_best"))),
        ("95% CI", "", lambda r: r.get("diff_lo"),
         lambda r: "" if is_best(r) else ci(r.get("diff_lo"), r.get("diff_hi"), "+.3f")),
        col("p (Holm)", "p_holm", fmt_p, "sign-flip permutation p-value, Holm-adjusted over the judges"),
        text("verdict", lambda r: r.get("no_information") or ("left out: no label" if r.get("left_out") else
                                  "best" if is_best(r) else "tied" if r.get("tied_with_best") else "worse")),
        col("calls/prompt", "calls_per_prompt", ".1f"), col("$/prompt", "usd_per_prompt", ".4f"),
        col("s/prompt", "seconds_per_prompt", ".4f"), col("gain/call", "gain_per_call", "+.4f"),
        col("gain/$", "gain_per_dollar", "+.1f"),
    ]


def render_run(b: ReportBundle, sample_prompts: int = 1, samples: str | None = None,
               numbers: dict[str, Any] | None = None) -> str:
    """``report.html`` of a bundle whose figures are drawn; ``samples``: its sample-prompts section when already
    rendered (:func:`sample_section`, which :func:`analysis.outputs.write_report` has a worker render beside the
    figures); ``numbers``: ``b.payload()`` when the caller has it already (it takes a while on a large study)."""
    run_dir = b.run_dir
    corr, metrics, acc, lb, figs = b.correlations, b.metrics, b.accuracies, b.leaderboards, b.figures
    boot, seed, level = b.bootstrap, b.seed, b.level
    title = f"Does MMRB2 accuracy predict Best-of-N gains? — {run_dir.name}"

    parts = ["<h1>Does MMRB2 accuracy predict Best-of-N gains?</h1>",
             f'<div class="muted">Run folder <code>{esc(run_dir)}</code> · report written '
             f'{esc(time.strftime("%Y-%m-%d %H:%M"))} · {esc(boot)} bootstrap replicates, seed {esc(seed)}, '
             f"{int(round(100 * float(level)))}% intervals</div>"]
    sections = [("answer", "The answer"), ("correlations", "Correlations"), ("judges", "Best-of-N per judge"),
                ("accuracy", "Judge accuracy"), ("predictors", "Which number predicts"),
                ("prediction", "Will this judge help?"),
                ("reranker", "Choosing a reranker"), ("tradeoff", "Cost against quality"), ("curves", "Best-of-n curves"),
                ("power", "Study size"), ("samples", "Sample prompts"), ("method", "Method"), ("data", "Data")]
    parts.append("<nav>" + "".join(f'<a href="#{k}">{esc(v)}</a>' for k, v in sections) + "</nav>")
    parts.append(_cards(b))

    # the answer
    parts.append('<h2 id="answer">The answer</h2>')
    parts.append(_summary(corr, b.r_undefined()))
    parts.append(f'<p><b>The axes:</b> {esc(b.axes_sentence())}</p>')
    parts.append(held_out_html(b.prediction))
    parts.append(figure_html(figs.get("correlation"),
                             "One panel per task, one marker, colour and fit-line pattern per base generator. Above each "
                             "panel: Pearson r and Spearman ρ across judges with 95% bootstrap intervals (judges, prompts "
                             "and MMRB2 pairs resampled). Error bars: each judge's 95% interval for its accuracy "
                             "(pairs resampled) and BoN score (prompts resampled). Dashed: random pick; dotted: oracle; "
                             "both end in the generator's marker at the right edge.", "accuracy versus Best-of-N score"))

    # correlations
    parts.append('<h2 id="correlations">Correlation between MMRB2 accuracy and Best-of-N score</h2>')
    parts.append('<p class="muted small">Rows marked ⚠ are too thin to lean on; hover a row for the reason. '
                 "Pooled rows correlate within-setting standardised values, so a generator that is better everywhere "
                 "cannot create a correlation. Click any header to sort.</p>")
    cols = correlation_columns() + [text("warning", lambda r: r.get("warning", ""), "warn")]
    parts.append(html_table(records(corr), cols, "corr", flag=lambda r: r.get("warning", "")))
    parts.append(leakage_html(b))
    parts.append(headroom_html(b.headroom))

    # per judge
    parts.append('<h2 id="judges">Best-of-N per judge</h2>')
    parts.append('<p class="muted small">Gain = BoN − random; recovery = gain / (oracle − random). Intervals: '
                 "percentile bootstrap over prompts (the same resampled prompts for every judge of a setting).</p>")
    parts.append('<input class="filter" data-table="metrics" placeholder="filter rows, e.g. t2i weak">')
    parts.append(html_table(records(metrics), metrics_columns(), "metrics"))

    # accuracy
    parts.append('<h2 id="accuracy">Judge accuracy (x axis)</h2>')
    label = b.accuracy_label
    excluded = {t: s for t, s in b.excluded_sources.items() if s}
    parts.append(f'<p class="muted small">Source: {esc(label)}. Official MMRB2 semantics: both orders of every pair, '
                 "first sample, unanswered judgements left out; 50% is chance. Interval: pairs resampled."
                 + (f" Excluded sources: {esc(excluded)}." if excluded else "") + "</p>")
    acc_cols = [TASK, text("judge", "judge"), col("accuracy %", "accuracy", ".1f"),
                interval("95% CI", "acc_lo", "acc_hi", ".1f"), col("pairs", "n_pairs"), col("judgements", "n_judgements")]
    parts.append(html_table(records(acc), acc_cols, "acc"))

    parts.append(predictors_html(b.predictors))
    parts.append(prediction_html(b.prediction))

    # reranker
    parts.append('<h2 id="reranker">Choosing a reranker</h2>')
    parts.append(figure_html(figs.get("reranker"), "Each judge's gain over a random pick (95% interval over prompts) "
                             "against its cost per prompt; the step line is the cost-gain frontier per generator.",
                             "gain against cost"))
    parts.append('<p class="muted small">Per setting, judges ranked by BoN score and compared with the best on the same '
                 f"prompts (paired bootstrap interval, sign-flip test, Holm-adjusted). Verdict: {esc(LABEL_RULE)}. The best "
                 "is chosen on the same prompts, so its lead is slightly optimistic.</p>")
    if lb is not None and not lb.empty:
        for (task, gen, strategy), sub in lb.groupby(["task", "generator", "strategy"], sort=False):
            tied = max(0, int(sub["tied_with_best"].sum()) - 1)  # the best itself is not counted
            best = [r["judge"] for r in records(sub) if is_best(r)]
            lead = f"best {esc(best[0])}, {tied} judge(s) tied with it" if best else "no judge with information"
            parts.append(f"<details><summary>{esc(TASK_TITLES.get(task, task))} / {esc(gen)} ({esc(strategy)}): {lead}</summary>"
                         + html_table(records(sub), leaderboard_columns()) + "</details>")
    parts.append(cheapest_html(b.cheapest(), b.max_loss))
    parts.append(tradeoff_html(b.tradeoff, figs.get("tradeoff")))

    # curves
    parts.append('<h2 id="curves">Best-of-n curves</h2>')
    if figs.get("curves"):
        parts.append(figure_html(figs["curves"], "Downstream score of each judge's pick for n = 1, 2, 4, … N candidates "
                                 "(random n-subsets of each prompt's N); grey: random pick (dashed) and oracle (dotted).",
                                 "best-of-n curves", max_width=880))
    else:
        parts.append('<p class="muted">No curves in this run folder. Run <code>bon curve --run DIR --judge J --json '
                     "DIR/curves/J.json</code> for the judges of interest and rebuild the report.</p>")

    # power
    parts.append('<h2 id="power">Study size: how many judges and prompts?</h2>')
    parts.append(_power_html(b.power, figs.get("power")))

    # samples
    parts.append('<h2 id="samples">Sample prompts: candidates, picks and verifier scores</h2>')
    parts.append(f'<p class="muted small">Every preference pair and Best-of-N match, with both orders\' verdicts, '
                 f"scores and reasons: <code>bon view --run {esc(run_dir)}</code> writes <code>view.html</code>.</p>")
    parts.append(samples if samples is not None else sample_section(b, sample_prompts))

    # method + data
    parts.append('<h2 id="method">Method</h2>' + METHOD_HTML)
    parts.append('<h2 id="data">Every number</h2>' + _downloads(b, numbers))
    summary = " · ".join(f"{esc(k)} <b>{esc(v)}</b>" for k, v in b.what_was_run())
    parts.append(f'<p class="muted small">Study: {summary}<br>Versions: {esc(inline(b.versions))}</p>')
    return _page(title, "\n".join(p for p in parts if p))


def leakage_html(b: ReportBundle) -> str:
    """What the leakage guards left out (the lines of "What was run"), with the other choice's r."""
    lines = b.leakage_lines()
    if not lines:
        return ""
    items = "".join(f"<li><b>{esc(k)}:</b> {esc(v)}</li>" for k, v in lines)
    return f'<h3 id="leakage">Leakage guards</h3><ul class="small">{items}</ul>'


def headroom_html(headroom: pd.DataFrame | None) -> str:
    """Random, worst-of-N and oracle per setting, and the share of prompts whose N candidates score alike."""
    if headroom is None or headroom.empty:
        return ""
    cols = [TASK, text("generator", "generator"), col("prompts", "prompts"), col("N", "n"), col("worst", "worst", ".3f"),
            col("random", "random", ".3f"), col("oracle", "oracle", ".3f"), col("oracle − random", "headroom", ".3f"),
            col("± SE (random)", "noise", ".3f"), col("all N alike", "alike", ".0%"),
            text("warning", lambda r: r.get("warning", ""), "warn")]
    return ('<h3 id="headroom">Headroom: how much a judge can gain</h3><p class="muted small">Worst: the worst candidate; '
            "random: a random pick; oracle: the best candidate (means over prompts). <i>All N alike</i>: prompts whose "
            "candidates all score the same cannot separate judges. ⚠: headroom too small for a correlation.</p>"
            + html_table(records(headroom), cols, "headroom", flag=lambda r: r.get("warning", "")))


PREDICTOR_COLUMNS = [TASK, text("generator", "generator"), col("judges", "n_judges"), col("r", "r", "+.2f"),
                     interval("r 95% CI", "r_lo", "r_hi"), col("ρ", "rho", "+.2f"), interval("ρ 95% CI", "rho_lo", "rho_hi")]
GATING = text("gating", lambda r: r.get("gating") or "")


def predictors_html(rec: Mapping[str, Any] | None) -> str:
    """Which MMRB2 number predicts Best-of-N (:mod:`analysis.predictors`): what the axes are, the
    verifier's agreement with the annotators, shared-grader flags, the predictor table, the paired test."""
    if not rec:
        return ""
    from analysis.predictors import PREDICTORS

    head = '<h2 id="predictors">Which MMRB2 number predicts Best-of-N?</h2>'
    if "skipped" in rec:
        return head + f'<p class="muted">Skipped: {esc(rec["skipped"])}.</p>'
    parts = [head, f'<p class="muted small">On {esc(rec.get("source", "the preference set"))}; downstream verifier '
             f'<code>{esc(rec.get("verifier", "?"))}</code>.</p>']
    agreement = rec.get("verifier_agreement") or {}
    if agreement:
        parts.append("<p>How often the verifier's score order agrees with the annotators' label on the preference set "
                     "(measured; a verifier tie counts half):</p>")
        parts.append(html_table([{"task": t, **a} for t, a in agreement.items()],
                                [TASK, col("pairs", "pairs"), col("agreement", "agreement", ".1%"),
                                 col("verifier ties", "ties")], sortable=False))
    if rec.get("shared_grader"):
        parts.append("<p><b>Shares the verifier's grader</b> (its gain is inflated by sharing the verifier's errors; "
                     "residual = gain minus what the line fitted on the other judges predicts):</p>")
        parts.append(html_table(rec["shared_grader"], [
            text("judge", "judge"), text("grader", "grader_family"), text("task", "task"), text("generator", "generator"),
            col("accuracy %", "accuracy", ".1f"), col("gain", "gain", "+.3f"), col("expected", "expected_gain", "+.3f"),
            col("residual", "residual", "+.3f")]))
    for key, label in PREDICTORS.items():
        rows = [r for r in rec.get("correlations") or [] if r["predictor"] == key]
        if rows:
            parts.append(f"<details><summary>{esc(label)}: correlation with Best-of-N gain across judges</summary>"
                         + html_table(rows, PREDICTOR_COLUMNS) + "</details>")
    if rec.get("same_vs_overall"):
        parts.append("<p>Does same-model accuracy predict better than overall accuracy? Paired bootstrap of r(same-model) "
                     "− r(overall) on the same replicates:</p>")
        parts.append(html_table(rec["same_vs_overall"], [
            text("task", "task"), text("generator", "generator"), col("r same-model", "r_same_model", "+.2f"),
            col("r overall", "r_overall", "+.2f"), col("difference", "difference", "+.2f"),
            interval("95% CI", "diff_lo", "diff_hi"), col("p", "p_boot", fmt_p), text("verdict", "verdict")]))
    return "".join(parts)


def held_out_html(rec: Mapping[str, Any] | None) -> str:
    """The answer's sentence on held-out judges (:func:`analysis.prediction.answer_sentence`), or nothing."""
    from analysis.prediction import answer_sentence

    sentence = answer_sentence(rec["summary"], rec["level"]) if rec else ""
    return f"<p>{esc(sentence.replace('**', ''))} <a href=\"#prediction\">Details</a>.</p>" if sentence else ""


def prediction_html(rec: Mapping[str, Any] | None) -> str:
    """Held-out validation of ``bon predict`` (:mod:`analysis.prediction`): leave one judge out, one generator out."""
    if not rec or rec["summary"].empty:
        return ""
    from analysis.prediction import answer_sentence

    pct = round(100 * rec["level"])
    sentence = answer_sentence(rec["summary"], rec["level"]).replace("**", "")
    return ('<h2 id="prediction">Will this judge help? Predicted gains of held-out judges</h2>'
            f"<p>{esc(sentence)}</p>"
            '<p class="muted small">Per task and generator, a line through the judges\' accuracy and gain predicts a judge\'s '
            f"gain with a {pct}% prediction interval (<code>bon predict</code>). <i>judge</i>: each judge left out in turn; "
            "<i>generator X</i>: X's line predicts the judges' gains on the other generator. Pooled ρ: within settings. "
            "Every prediction: <code>predictions.csv</code>.</p>"
            + html_table(records(rec["summary"]), [
                text("left out", "holdout"), TASK, text("generator", "generator"), col("predictions", "n"),
                col("MAE (gain)", "mae", ".3f"), text(f"inside {pct}% interval", lambda r: f"{r['covered']} of {r['n']}"),
                col("coverage", "coverage", ".0%"), col("Spearman ρ", "spearman_rho", "+.2f"),
                col("slope CI has 0", "no_relation")], "prediction"))


def cheapest_html(rows: Sequence[Mapping[str, Any]], max_loss: float) -> str:
    """The leaderboard's cost column from ``bon tradeoff``: per judge, the cheapest setting within ``max_loss``."""
    if not rows:
        return ""
    return (f"<p>Cheapest way to run each judge whose Best-of-N loss against the full protocol stays within {max_loss:g} "
            f"(upper end of its 95% interval; only gates called safe); {esc(CHEAPEST_SCOPE)}:</p>"
            + html_table(rows, [text("judge", "judge"), text("setting", "cheapest_setting"),
                                col("calls/prompt", "calls_per_prompt", ".2f"), col("full protocol", "full_calls_per_prompt", ".2f"),
                                col("calls cut", "calls_cut", ".0%"), col("$/prompt", "usd_per_prompt", ".4f"),
                                col("BoN", "bon_score", ".3f"), col("loss", "loss", "+.4f"),
                                col("loss 95% upper", "loss_hi", "+.4f"), GATING]))


def tradeoff_html(tradeoff: Mapping[str, Any] | None, figure: Sequence[Path] | None) -> str:
    """Calls per prompt against Best-of-N score for every way of running each judge (``bon tradeoff``)."""
    head = '<h2 id="tradeoff">Cost against quality</h2>'
    if not tradeoff or not tradeoff.get("records"):
        return head + ('<p class="muted">No trade-off in this run folder. Run <code>bon tradeoff --run DIR</code> and '
                       "rebuild the report.</p>")
    return head + figure_html(figure, "Judge calls per prompt against Best-of-N score (left) and recovery (right), one "
                              "line per judge through its settings; hollow markers: gates the reverse-flip analysis (or a "
                              "calibrated gate's own audit) calls unsafe for that judge.", "calls per prompt against Best-of-N score") + html_table(
        tradeoff["records"], [
            text("judge", "judge"), text("setting", "setting"), col("calls/prompt", "calls_per_prompt", ".2f"),
            col("calls cut", "calls_cut", ".0%"), col("BoN", "bon_score", ".4f"), col("recovery", "recovery", ".3f"),
            col("loss", "loss", "+.4f"), interval("loss 95% CI", "loss_lo", "loss_hi", "+.4f"),
            text("gating and flags", tradeoff_flags), text("what it did", lambda r: r.get("note") or "")], "tradeoff")


def _cards(b: ReportBundle) -> str:
    corr, metrics = b.correlations, b.metrics
    cards = []
    if corr is not None and not corr.empty:
        row = b.pooled()
        cards.append((f"{fmt('+.2f')(row['pearson_r'])}", f"pooled r {ci(row['pearson_lo'], row['pearson_hi'])}"))
        setting = corr[corr.scope == "setting"]
        cards.append((f"{int((setting['pearson_lo'] > 0).sum())} / {len(setting)}",
                      "settings whose r interval excludes 0"))
        cards.append((f"{int(corr['flag'].sum())}", "rows with a warning ⚠"))
    if metrics is not None and not metrics.empty:
        cards.append((f"{metrics['judge'].nunique()}", "judges"))
        cards.append((f"{int(metrics.groupby(['task', 'generator'])['prompts'].max().max())}", "prompts per setting"))
        cards.append((f"{len(metrics.groupby(['task', 'generator']))}", "task × generator settings"))
    acc = b.accuracies
    if not acc.empty:
        cards.append((f"{int(acc.groupby('task')['n_pairs'].max().sum())}", "MMRB2-format pairs (all tasks)"))
    return '<div class="cards">' + "".join(f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}</div></div>'
                                           for v, k in cards) + "</div>"


def _summary(corr: pd.DataFrame | None, undefined: str | None = None) -> str:
    """The answer in a few lines; ``undefined``: why the pooled r is undefined (:meth:`ReportBundle.r_undefined`)."""
    if corr is None or corr.empty:
        return "<p>No correlations could be computed.</p>"
    lines = [f"r is undefined: {undefined}."] if undefined else []
    pooled = corr[corr.scope == "all"]
    if len(pooled):
        r = pooled.iloc[0]
        lines.append(f"Across all settings (within-setting comparisons, {int(r['n_judges'])} judges), Pearson r = "
                     f"{fmt('+.2f')(r['pearson_r'])} {ci(r['pearson_lo'], r['pearson_hi'])}, Spearman ρ = "
                     f"{fmt('+.2f')(r['spearman_rho'])} {ci(r['spearman_lo'], r['spearman_hi'])}, permutation "
                     f"p {_p_text(r['pearson_p_perm'])}.")
    setting = corr[corr.scope == "setting"]
    if len(setting):
        pos = setting[setting.pearson_lo > 0]
        zero = setting[(setting.pearson_lo <= 0) & (setting.pearson_hi >= 0)]
        lines.append(f"In {len(pos)} of {len(setting)} task × generator settings the 95% interval for r lies above zero"
                     + (f"; in {len(zero)} it includes zero ("
                        + ", ".join(f"{TASK_TITLES.get(t, t)} / {g}" for t, g in zip(zero.task, zero.generator)) + ")"
                        if len(zero) else "") + ".")
        strong = setting[setting.pearson_lo > 0.5]
        if len(strong):
            lines.append("A strong relation (lower bound of r above 0.5) is supported only in: "
                         + ", ".join(f"{TASK_TITLES.get(t, t)} / {g}" for t, g in zip(strong.task, strong.generator)) + ".")
        few = setting[setting.n_judges < 5]
        if len(few):
            lines.append(f"{len(few)} setting(s) have fewer than 5 judges: their coefficients are anecdotal.")
    return "<ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"


def _power_html(power: Mapping[str, Any] | None, fig: Sequence[Path] | None) -> str:
    if not power:
        return '<p class="muted">No power analysis (the run has too few judges or fully scored prompts to fit a pilot model).</p>'
    m = power["model"]
    rec = power.get("recommendation")
    text = (f"<p>Fitted from this run as a pilot: judges' accuracies spread ±{m['acc_sd']:.1f} points around "
            f"{m['acc_mean']:.1f}%, BoN score rises {m['slope']:.4f} per accuracy point, judges deviate from that line "
            f"by SD {m['judge_sd']:.3f}, and one prompt's pick score is noisy with SD {m['prompt_sd']:.3f}. ")
    if rec:
        text += (f"For a 95% interval for r no wider than {power['width']:g}, the smallest design in the grid is "
                 f"<b>{rec['judges']} judges × {rec['prompts']} prompts</b> per setting (median width "
                 f"{rec['median_width']:.2f}; the interval excludes zero in {rec['p_excludes_zero']:.0%} of simulated "
                 "studies).</p>")
    else:
        text += f"No design in the grid reaches an interval width of {power['width']:g}: add judges.</p>"
    grid = power["grid"]
    cols = [col("judges", "judges"), col("prompts", "prompts"), col("pairs", "pairs"),
            col("median CI width", "median_width", ".2f"), col("width q10", "width_q10", ".2f"),
            col("width q90", "width_q90", ".2f"), col("P(CI excludes 0)", "p_excludes_zero", ".0%"),
            col("mean r", "mean_r", "+.2f")]
    return (text + figure_html(fig, "Simulated from the pilot model: the 95% interval for r narrows mostly with more "
                                    "judges; more prompts help until measurement noise is small.", "power")
            + "<details><summary>The grid</summary>" + html_table(records(grid), cols) + "</details>")


def _downloads(b: ReportBundle, numbers: dict[str, Any] | None = None) -> str:
    folder = RunFolder(b.run_dir, existing=True)
    files = [(getattr(folder, name).name, df.to_csv(index=False).encode(), "text/csv") for name, df in b.tables().items()]
    files.append((folder.report_json.name, json.dumps(b.payload() if numbers is None else numbers).encode(),
                  "application/json"))
    links = "".join(f'<a download="{esc(name)}" href="{data_uri(data, mime)}">{esc(name)}</a>' for name, data, mime in files)
    return (f'<p class="dl">{links}</p><p class="muted small">The same files are written beside this report, with the '
            f"figures as PNG and SVG under <code>{esc(folder.figures.name)}/</code>.</p>")


METHOD_HTML = """
<ul>
<li><b>x: MMRB2 accuracy.</b> Each judge answers every preference pair in both orders; the accuracy is the share of
counted judgements that agree with the label, scored with the official MMRB2 scorer's rules.</li>
<li><b>y: Best-of-N score.</b> For every prompt and base generator the judge picks one of N candidates with the study's
selection strategy; the downstream verifier scores the pick; y is the mean over prompts. Random = mean over all N
candidates; oracle = the best candidate.</li>
<li><b>Correlations</b> are computed across the judges of one task × generator setting: Pearson r (linear), Spearman ρ
(monotone) and Kendall τ-b (pairwise order).</li>
<li><b>95% intervals</b> for correlations are bias-corrected percentile (BC) bootstrap intervals whose replicates
resample the judges, the downstream prompts (the same prompts for every judge) and the MMRB2 pairs (the same pairs for
every judge) at once. The bias correction undoes the pull towards zero that re-adding measurement noise causes in every
replicate; in simulations with a known correlation (benchmarks/interval_coverage.py: 9 and 23 judges, true r 0, 0.5 and
0.8) these intervals covered it 93–96% of the time.
<i>CI (meas.)</i> keeps the judges fixed: it shows how much the coefficient of these judges moves with new prompts and
pairs, and is not an interval for judges in general. Replicates where a coefficient is undefined (ties, fewer than three
distinct judges) are left out and counted. The bounds carry Monte Carlo error (about ±0.1 for lower bounds at 1,000
replicates, ±0.05 at 2,000): use 2,000–4,000 replicates for numbers you publish. Per-judge intervals (BoN score, gain,
accuracy) are plain percentile intervals over prompts or pairs.</li>
<li><b>p-values</b> come from permuting the judges' y values against their x values (exact for up to 8 judges).
<b>Leave-one-judge-out</b> shows how much a single judge drives the coefficient.</li>
<li><b>Warnings</b> flag fewer than 5 judges, an interval for r wider than 1, fewer than 30 prompts, fewer than 100 pairs,
more than 10% undefined replicates, and any axis that could not be resampled.</li>
<li>All randomness is seeded: rerunning gives the same numbers; another seed moves bounds by Monte Carlo error only.</li>
</ul>
"""


# --- sample prompts -------------------------------------------------------------------------------------


def _choose_prompts(prompts: pd.DataFrame, per_task: int) -> list[tuple[str, str]]:
    """Per task, the prompts where the judges disagree most (then by id): (task, prompt id)."""
    chosen = []
    for task in task_order(prompts["task"]):
        sub = prompts[prompts.task == task]
        # per prompt, the distinct picks summed over generators (one grouping, not one per prompt)
        spread = (sub.groupby(["prompt_id", "generator"])["index"].nunique().groupby(level="prompt_id").sum()
                  .reindex(sub["prompt_id"].dropna().unique(), fill_value=0))
        order = sorted(spread.index, key=lambda pid: (-int(spread[pid]), pid))
        chosen += [(task, pid) for pid in order[:per_task]]
    return chosen


def sample_section(b: ReportBundle, sample_prompts: int = 1) -> str:
    """The sample prompts of a report, or one line saying why they cannot be shown."""
    return run_samples(b.run or b.run_dir, b.prompts, sample_prompts)


def run_samples(run: Run | Path, prompts: pd.DataFrame | None, per_task: int = 1) -> str:
    """:func:`samples_html`, or one line saying why the samples cannot be shown."""
    try:
        return samples_html(run, prompts, per_task)
    except (BonError, OSError, ValueError, KeyError) as exc:
        return f'<p class="muted">Samples unavailable: {esc(exc)}</p>'


def samples_html(run: Run | Path, prompts: pd.DataFrame | None, per_task: int = 1) -> str:
    """Each sampled prompt with its N candidates per generator, who picked which, and the verifier's scores."""
    if prompts is None or prompts.empty or per_task <= 0:
        return '<p class="muted">No picks to show.</p>'
    records = as_run(run)
    run, run_dir = records.folder, records.root
    prompt_recs = {r["id"]: r for r in records.prompt_records}
    judges = list(dict.fromkeys(prompts["judge"]))
    code = {j: f"J{i + 1}" for i, j in enumerate(judges)}
    out = ['<p class="legend">Judges: ' + " ".join(f'<span class="tag">{esc(code[j])}</span>{esc(j)}' for j in judges)
           + '. A green frame marks the verifier\'s best candidate; the bar shows the verifier score.</p>']
    chosen = _choose_prompts(prompts, per_task)
    gens = list(dict.fromkeys(prompts["generator"]))
    cands = {gen: {(r["prompt_id"], int(r["index"])): r for r in records.candidate_records(gen)} for gen in gens}
    all_scores: dict[tuple[str, str], dict[int, Any]] = {}  # (generator, prompt id) -> candidate index -> score
    for (gen, pid, k), r in records.score_records.items():
        all_scores.setdefault((gen, pid), {})[k] = r.get("score")
    for task, pid in chosen:
        rec = prompt_recs.get(pid, {})
        block = [f'<div class="prompt"><b>{esc(TASK_TITLES.get(task, task))} · {esc(pid)}</b>']
        if rec:
            block.append(f'<div class="text">{content_html(rec.get("content"), run_dir, 140, 600)}</div>')
        for gen in gens:
            mine = prompts[(prompts.prompt_id == pid) & (prompts.generator == gen)]
            if mine.empty:
                continue
            picks: dict[int, list[str]] = {}
            for j, idx in zip(mine["judge"], mine["index"]):
                picks.setdefault(int(idx), []).append(j)
            base = run.candidates_dir(gen)
            scores = all_scores.get((gen, pid), {})
            scored = [s for s in scores.values() if finite(s)]
            best = max(scored) if scored else None
            block.append(f'<div class="small muted" style="margin:6px 0 3px">generator <b>{esc(gen)}</b></div>'
                         '<div class="cands">')
            n = max([k for (p, k) in cands.get(gen, {}) if p == pid] + list(scores) + [-1]) + 1
            for k in range(n):
                r = cands.get(gen, {}).get((pid, k))
                s = scores.get(k)
                who = picks.get(k, [])
                cls = "cand oracle" if best is not None and finite(s) and float(s) >= best else "cand"
                tags = "".join(f'<span class="tag" title="{esc(j)}">{esc(code[j])}</span>' for j in who)
                width = max(0.0, min(1.0, float(s))) * 100 if finite(s) else 0.0
                bar = f'<div class="bar"><i style="width:{width:.0f}%"></i></div>' if finite(s) else ""
                body = content_html(r.get("content"), base) if r else '<div class="t">(candidate not found)</div>'
                block.append(f'<div class="{cls}">{body}<div>#{k} · score <b>{esc(fmt(".3f")(s))}</b></div>{bar}'
                             f"<div>{tags or '<span class=muted>no picks</span>'}</div></div>")
            block.append("</div>")
        block.append("</div>")
        out.append("".join(block))
    return "\n".join(out)


# --- two runs side by side ------------------------------------------------------------------------------


def compare_runs(run_a: Path, run_b: Path, out: Path | None = None, bootstrap: int = 1000, seed: int = 0) -> Path:
    """``bon compare --run A --run B``: per task/generator/judge BoN and accuracy deltas and the correlations of
    both runs side by side. Writes ``compare.html``, ``compare.csv``, ``compare_correlations.csv`` and
    ``figures/forest.{png,svg}`` to ``out`` (default ``B/compare_<A name>``); returns the HTML path."""
    from analysis.figures import forest_figure

    run_a, run_b = Path(run_a), Path(run_b)
    out = Path(out) if out else run_b / f"compare_{slug(run_a.name)}"
    la, lb = _labels(run_a, run_b)
    a = compute(run_a, bootstrap=bootstrap, seed=seed, power=False)
    b = compute(run_b, bootstrap=bootstrap, seed=seed, power=False)
    keys = ["task", "generator", "judge", "strategy"]
    keep = ["mmrb2_accuracy", "bon_score", "bon_lo", "bon_hi", "gain", "recovery", "prompts"]
    ma, mb = (m.metrics[keys + keep] for m in (a, b))
    merged = ma.merge(mb, on=keys, how="outer", suffixes=("_a", "_b"))
    for c in ("mmrb2_accuracy", "bon_score", "gain", "recovery"):
        merged[f"delta_{c}"] = merged[f"{c}_b"] - merged[f"{c}_a"]
    order = {t: i for i, t in enumerate(task_order(merged["task"]))}
    merged = merged.sort_values(["task", "generator", "judge"], key=lambda s: s.map(order) if s.name == "task" else s,
                                kind="stable").reset_index(drop=True)
    ck = ["task", "generator", "scope"]
    cc = ["n_judges", "n_prompts", "pearson_r", "pearson_lo", "pearson_hi", "pearson_p_perm", "spearman_rho",
          "spearman_lo", "spearman_hi", "kendall_tau", "flag"]
    corr = a.correlations[ck + cc].merge(b.correlations[ck + cc], on=ck, how="outer", suffixes=("_a", "_b"))
    corr["delta_pearson_r"] = corr["pearson_r_b"] - corr["pearson_r_a"]
    RunFolder(out).require_writable()
    write_text(out / "compare.csv", merged.to_csv(index=False, float_format="%.6g"))
    write_text(out / "compare_correlations.csv", corr.to_csv(index=False, float_format="%.6g"))
    forest = forest_figure({la: a.correlations, lb: b.correlations}, out / "figures" / "forest.png")

    sides = (("a", la), ("b", lb))
    cols_c = [TASK, text("generator", "generator"), text("scope", "scope"),
              *(col(f"judges ({name})", f"n_judges_{s}") for s, name in sides),
              *(c for s, name in sides for c in (col(f"r ({name})", f"pearson_r_{s}", "+.2f"),
                                                 interval("95% CI", f"pearson_lo_{s}", f"pearson_hi_{s}"))),
              col("Δr", "delta_pearson_r", "+.2f"), *(col(f"ρ ({name})", f"spearman_rho_{s}", "+.2f") for s, name in sides)]
    cols_m = [TASK, text("generator", "generator"), text("judge", "judge"),
              *(col(f"acc. ({name})", f"mmrb2_accuracy_{s}", ".1f") for s, name in sides),
              col("Δ acc.", "delta_mmrb2_accuracy", "+.1f"),
              *(c for s, name in sides for c in (col(f"BoN ({name})", f"bon_score_{s}", ".3f"),
                                                 interval("95% CI", f"bon_lo_{s}", f"bon_hi_{s}", ".3f"))),
              col("Δ BoN", "delta_bon_score", "+.3f"), *(col(f"gain ({name})", f"gain_{s}", "+.3f") for s, name in sides),
              col("Δ gain", "delta_gain", "+.3f")]
    body = ["<h1>Two studies side by side</h1>",
            f'<div class="muted">A = <code>{esc(run_a)}</code> (“{esc(la)}”) · B = <code>{esc(run_b)}</code> (“{esc(lb)}”) · '
            f"{bootstrap} bootstrap replicates, seed {seed} · Δ = B − A</div>",
            "<h2>Correlation between MMRB2 accuracy and Best-of-N score</h2>",
            figure_html(forest, "Pearson r per setting with its 95% bootstrap interval (judges, prompts and pairs "
                                "resampled), one marker per study.", "correlations side by side"),
            html_table(records(corr), cols_c, "cmp_corr", flag=lambda r: "one of the rows has a warning"
                       if bool(r.get("flag_a")) or bool(r.get("flag_b")) else ""),
            "<h2>Per task, generator and judge</h2>",
            '<input class="filter" data-table="cmp" placeholder="filter rows">',
            html_table(records(merged), cols_m, "cmp"),
            '<h2>Data</h2><p class="dl">'
            f'<a download="compare.csv" href="{data_uri(merged.to_csv(index=False).encode(), "text/csv")}">compare.csv</a>'
            f'<a download="compare_correlations.csv" href="{data_uri(corr.to_csv(index=False).encode(), "text/csv")}">'
            "compare_correlations.csv</a></p>"]
    path = out / "compare.html"
    write_text(path, _page(f"bon compare {la} vs {lb}", "\n".join(body)))
    return path


def _labels(a: Path, b: Path) -> tuple[str, str]:
    la, lb = a.name or str(a), b.name or str(b)
    if la == lb:
        la, lb = f"A: {la}", f"B: {lb}"
    return la, lb
