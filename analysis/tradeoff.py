"""What a judge's Best-of-N result costs: judge calls per prompt against Best-of-N score and recovery,
for every way of running the judge (the MMRB2 two-order knockout, knockouts with fixed and calibrated
gated swaps, cascades from a cheaper judge, a seeded knockout, the uncertainty-driven strategy,
round-robin with and without an early stop).

Everything runs through the study's judgment store, so judgments any setting shares with the study (or
with another setting) are free and only new match-ups cost calls. "Calls per prompt" counts every judge
decision a setting uses for one prompt's N candidates of one generator, whether it was paid now or
served from the store: the price of that setting on fresh data.

Each setting is compared with the full protocol (knockout, both orders) on the same prompts: the
loss in Best-of-N score gets a 95% paired-bootstrap interval over prompts. The full protocol's matches
also give the reverse-flip analysis (:mod:`bon.mmrb2.flips`) that says at which gates skipping the
reverse order is safe for this judge (``gating``: safe, unsafe or unproven); a calibrated gate is
judged at the gate it chose, and unsafe when its own audit turned it off; a cascade by how often its
settled matches differ from the main judge's stored two-order decision. A cascade's calls per prompt
count both judges (``cheap_calls_per_prompt`` is the cheap judge's share), and so does its money.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import time
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from analysis.bon_metrics import read_json
from analysis.markdown import md_label
from analysis.leaderboard import judge_costs
from analysis import leakage, prefilter
from bon import registry
from bon.content import Content, ImageItem, decode_images
from bon.errors import BonError
from bon.mmrb2 import flips
from bon.referee import Referee
from bon.runfolder import write_json, write_text
from bon.seeds import derive_seed
from bon.progress import note
from bon.selection import run_selection
from bon.selection.prefilter import paired_interval  # the loss interval keep: auto calibrates with
from bon.stages.pool import run_jobs, usable_cores
from bon.store import JudgmentStore, Key, judge_id, new_invocation_id

DEFAULT_GATES = (1.0, 0.6, 0.2)  # on the 1-6 score's extremity: 6/1, 5/2 and up, every answer
DEFAULT_MARGIN_GATES = (0.25, 0.1, 0.05, 0.02)  # on the judge's own margin, for judges that keep one
REFERENCE = "knockout"
FIGURE = Path("figures") / "tradeoff.png"  # inside the run folder
RECORDS = "tradeoff.json"
PROGRESS_EVERY_S = 5.0  # seconds between a judge's progress lines
MARKDOWN = "tradeoff.md"


@dataclass(frozen=True)
class Setting:
    label: str
    strategy: str
    options: Mapping[str, Any] = field(default_factory=dict)
    family: str = "knockout"
    gate: float | None = None

    @property
    def confidence(self) -> str:
        return str(self.options.get("confidence", "auto"))


ADAPTIVE_FAMILIES = ("calibrated", "cascade", "uncertainty")  # the settings --strategy-option reaches


def default_settings(gates: Sequence[float] = DEFAULT_GATES, margin_gates: Sequence[float] = DEFAULT_MARGIN_GATES,
                     cascades: Sequence[str] = (), strategy_options: Mapping[str, Any] | None = None,
                     prefilters: Sequence[str] = (), n: int = 0, keeps: Sequence[int] = ()) -> list[Setting]:
    """Knockout (both orders: the reference), gated knockouts (on the 1-6 score, and on the judge's own
    margin where its verdicts keep one), calibrated gates with an audit, cascades from each of
    ``cascades``, seeded knockout, the uncertainty-driven strategy, round-robin, early-stopped round-robin,
    then knockouts among the top k of each of ``prefilters`` (k of ``keeps``, default 2 .. ``n``/2, and auto:
    :mod:`analysis.prefilter`).
    ``strategy_options`` go to the calibrated, cascade and uncertainty settings whose strategy takes them."""
    adaptive = [
        Setting("knockout gated auto", "knockout", {"swap": "gated", "gate": "auto"}, "calibrated"),
        Setting("knockout gated auto margin", "knockout", {"swap": "gated", "gate": "auto", "confidence": "margin"}, "calibrated"),
        *(Setting(f"knockout cascade {c}", "knockout", {"cascade": c}, "cascade") for c in cascades),
        Setting("uncertainty", "uncertainty", {}, "uncertainty"),
    ]
    return [
        Setting(REFERENCE, "knockout", {}, "knockout"),
        *(Setting(f"knockout gated {g:g}", "knockout", {"swap": "gated", "gate": float(g)}, "gated", float(g)) for g in gates),
        *(Setting(f"knockout gated margin {g:g}", "knockout", {"swap": "gated", "gate": float(g), "confidence": "margin"},
                  "gated", float(g)) for g in margin_gates),
        *with_options(adaptive, strategy_options or {}),
        Setting("knockout seeded", "knockout", {"seed": "self"}, "seeded"),
        Setting("round-robin", "round-robin", {}, "round-robin"),
        Setting("round-robin early stop", "round-robin", {"early_stop": True}, "early-stop"),
        *prefilter.prefilter_settings(Setting, prefilters, n, keeps),
    ]


def cascade_judges(study: Any, asked: Sequence[str] = (), excluded: Mapping[str, str] | None = None) -> list[str]:
    """The cheap judges of the cascade settings: those ``asked`` (one of the study's judge labels or a spec;
    ``none``: no cascade), else :func:`default_cascade` of the study's own records."""
    if asked:
        return [] if "none" in asked else list(asked)
    costs = judge_costs(study.stats())
    labels = [j.label for j in study.cfg.judges]
    if excluded is None:
        excluded = leakage.run_exclusions(study.run.root, labels)
    chosen = default_cascade({j: costs.get(j, {}).get("usd_per_call", math.nan) for j in labels},
                             _mean_accuracies(study.run.root), excluded)
    return [chosen] if chosen else []


def default_cascade(usd_per_call: Mapping[str, float], accuracy: Mapping[str, float], excluded: Mapping[str, str]) -> str | None:
    """The cheap judge a cascade starts from, from the study's own data only (so two copies of a study
    choose the same one): among the judges the leakage policy keeps that are at least as accurate on the
    preference set as their median, the cheapest by money per call (tokens at the judge's price, recorded
    with each answer; unpriced counts as free), then the most accurate, then by label. Never a judge the
    leakage policy leaves out, never one chosen by measured seconds (they differ from run to run)."""
    kept = [j for j in usd_per_call if j not in excluded]
    if accuracy:
        known = [accuracy[j] for j in kept if j in accuracy and accuracy[j] == accuracy[j]]
        middle = float(np.median(known)) if known else -math.inf
        kept = [j for j in kept if accuracy.get(j, -math.inf) >= middle]
    money = lambda j: usd_per_call[j] if usd_per_call[j] == usd_per_call[j] else 0.0  # noqa: E731
    ranked = sorted(kept, key=lambda j: (money(j), -accuracy.get(j, -math.inf), j))
    return ranked[0] if ranked else None


def study_judge(study: Any, spec: str, options: Mapping[str, Any] | None = None) -> Any:
    """A judge by the study's label, else by registry spec (an unknown one: a one-line error that lists the
    study's labels and suggests the closest, from :meth:`bon.study.FinishedStudy.judge`)."""
    return study.judge(spec, dict(options) if options else None)


def _mean_accuracies(run_root: Path) -> dict[str, float]:
    """Each judge's mean preference-set accuracy over tasks (``accuracies.csv``; empty when absent)."""
    path = Path(run_root) / "accuracies.csv"
    if not path.exists():
        return {}
    import pandas as pd

    table = pd.read_csv(path)
    return table.groupby("judge")["accuracy"].mean().to_dict() if {"judge", "accuracy"} <= set(table.columns) else {}


def with_options(settings: Sequence[Setting], options: Mapping[str, Any]) -> list[Setting]:
    """Each setting with the ``options`` its strategy takes (a cascade's main judge is asked in both
    orders, so the gate options stay out of it); an option none of them takes is a one-line error
    naming the valid ones."""
    out, valid = [], set()
    for setting in settings:
        accepted, _ = registry.option_names(registry.resolve("strategy", setting.strategy))
        if setting.family == "cascade":
            accepted = accepted - {"swap", "gate", "audit", "ties", "confidence"}
        valid |= accepted
        out.append(Setting(setting.label, setting.strategy, {**setting.options, **{k: v for k, v in options.items() if k in accepted}},
                           setting.family, setting.gate))
    for key in options:
        if key not in valid:
            raise BonError(f"--strategy-option {key!r}: no trade-off setting takes it (valid: {', '.join(sorted(valid - {'name'}))})")
    return out


def tradeoff(study: Any, judges: Sequence[Any], settings: Sequence[Setting] | None = None, bootstrap: int = 2000,
             tolerance: float = 0.05, excluded: Mapping[str, str] | None = None, workers: int = 0) -> list[dict[str, Any]]:
    """One record per (judge, setting) of a finished study (``bon.study.load_study``); ``excluded``
    (judge -> why, :func:`analysis.leakage.excluded_judges`) flags the judges the leakage policy leaves out.
    Judges are replayed in ``workers`` processes (0: one per CPU core); each sees the store as it was
    before the command (:class:`ReplayStore`), so the records are the same however many there are."""
    settings = list(settings or default_settings())
    if not settings or settings[0].label != REFERENCE:
        raise BonError(f"trade-off: the first setting must be the reference {REFERENCE!r}")
    study.require_scores()  # the records are verifier scores: refuse before any judge call
    groups = replay_groups(study)
    if not groups:
        raise BonError(f"{study.run.root}: no Best-of-N prompts in this study; nothing to trade off")
    if excluded is None:
        excluded = leakage.run_exclusions(study.run.root, [j.name for j in judges])
    job = _Job(study, list(judges), settings, groups, _baselines(study.scores, groups),
               # money per selection-stage call, as the leaderboard prices the same judge's full protocol
               {name: c["usd_per_call"] for name, c in judge_costs(study.stats()).items()},
               {**{s.options["cascade"]: study.judge(s.options["cascade"]) for s in settings if s.family == "cascade"},
                **{s.options["prefilter"]: study.judge(s.options["prefilter"]) for s in settings if s.family == prefilter.FAMILY}},
               bootstrap, tolerance, new_invocation_id())
    job.snapshots = _cheap_snapshots(study.run.store, [job.cheap[s.options["cascade"]] for s in settings if s.family == "cascade"],
                                     job.invocation)
    job.scores = prefilter.score_snapshots(study.run.store, {s.options["prefilter"]: job.cheap[s.options["prefilter"]]
                                                             for s in settings if s.family == prefilter.FAMILY},
                                           groups, job.invocation, study.cfg.seed)
    processes = max(1, min(len(judges), workers or os.cpu_count() or 1))
    if processes > 1:  # decoded and hashed here once (in threads), not again in every worker
        contents = [content for prompt, cands in groups for content in (prompt.content, *(c.content for c in cands))]
        decode_images([item for content in contents for item in content.items if isinstance(item, ImageItem)],
                      usable_cores())
        [content.digest for content in contents]
    note(f"tradeoff: {len(judges)} judges x {len(settings)} settings on {len(groups)} prompt groups"
         + (f", {processes} processes" if processes > 1 else ""))
    records = [r for mine in _replay_all(job, processes) for r in mine]
    _add_cuts(records)
    for r in records:
        r["gating"], r["gating_reason"] = final_gating(r)
        if r["judge"] in excluded:
            r["left_out"] = excluded[r["judge"]]
    return records


@dataclass
class _Job:
    """What every judge's replay shares (handed to worker processes by fork)."""

    study: Any
    judges: list[Any]
    settings: list[Setting]
    groups: list[Any]
    baseline: dict[str, Any]
    costs: dict[str, float]
    cheap: dict[str, Any]
    bootstrap: int
    tolerance: float
    invocation: str  # every process's store writes as this one command
    snapshots: dict[str, dict[Key, Any]] = field(default_factory=dict)  # answers read once, before the fork
    scores: dict[str, dict] = field(default_factory=dict)  # the prefilters' scores, asked or read once, before the fork


def _cheap_snapshots(path: Path, cheap: Any, invocation: str) -> dict[str, dict[Key, Any]]:
    """The cascades' cheap judges' stored answers, read once here rather than once per replayed judge
    (every judge's cascade setting reads the same cheap judge: 8 of the demo's 17 snapshot reads).
    Read before any replay writes, and without this command's answers, as :class:`ReplayStore` reads them."""
    if not cheap:
        return {}
    store = JudgmentStore(path, read_only=True)
    try:
        return {jid: store.answers_before(jid, invocation) for jid in sorted({judge_id(j.identity()) for j in cheap})}
    finally:
        store.close()


def _replay_all(job: _Job, processes: int) -> list[list[dict[str, Any]]]:
    """Each judge's records, in the judges' order, from ``processes`` forked worker processes (the costliest
    judges first, by their ``relative_cost``) or this one."""
    if processes == 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [_replay_judge(i, job) for i in range(len(job.judges))]
    costs = [float(getattr(judge, "relative_cost", 1.0)) for judge in job.judges]
    return list(run_jobs(lambda i: _replay_judge(i, job), len(job.judges), processes, costs=costs))


def _replay_judge(index: int, job: _Job) -> list[dict[str, Any]]:
    """One judge's records through its own connection to the store (a worker's, or this process's)."""
    judge, started = job.judges[index], time.perf_counter()
    store = JudgmentStore(job.study.run.store, invocation=job.invocation, command="bon tradeoff")
    try:
        records = _judge_records(job, judge, ReplayStore(store, dict(job.snapshots), job.scores))
    finally:
        store.close()
    note(f"tradeoff: {judge.name} ({index + 1}/{len(job.judges)}): {len(records)} settings in "
         f"{time.perf_counter() - started:.1f} s")
    return records


def _judge_records(job: _Job, judge: Any, store: "ReplayStore") -> list[dict[str, Any]]:
    """Every setting of one judge, replayed on the study's prompts through the store."""
    study, settings, groups, cheap, costs = job.study, job.settings, job.groups, job.cheap, job.costs
    baseline, bootstrap, tolerance = job.baseline, job.bootstrap, job.tolerance
    reference, matches, safety, records, first = None, [], {}, [], []
    started = last = time.perf_counter()
    for done, setting in enumerate(settings):
        if time.perf_counter() - last >= PROGRESS_EVERY_S:  # a heavy judge is never silent for long
            last = time.perf_counter()
            note(f"tradeoff: {judge.name}: {done}/{len(settings)} settings ({last - started:.0f} s), now {setting.label}")
        if setting.confidence == "margin" and not _has_margins(matches):
            continue  # this judge keeps no margin: the setting would repeat the score-gated ones
        if setting.family == "cascade" and cheap[setting.options["cascade"]].identity() == judge.identity():
            continue  # a judge is no cheaper than itself
        if prefilter.is_self(setting, judge, cheap):
            continue  # a judge that prefilters for itself picks what its own scores pick
        referee = Referee(judge, store, samples=study.cfg.samples, seed=study.cfg.seed)
        referee.judges.update(cheap)  # a cascade's cheap judge as the study configures it (label, options)
        strategy = registry.create("strategy", setting.strategy, **dict(setting.options))
        picks = run_selection(strategy, referee, groups, seed=study.cfg.seed,
                              utility=lambda i, j: _score(study.scores, groups[i], j))
        picked = np.array([_score(study.scores, g, p.index) for g, p in zip(groups, picks)], float)
        if reference is None:
            reference, matches, first = picked, [m for p in picks for m in p.matches], picks
        if setting.gate is not None and setting.confidence not in safety:
            safety[setting.confidence] = flips.gate_safety(
                [r for m in matches if (r := flips.from_match(m, judge, setting.confidence))], tolerance)
        calls = sum(p.calls for p in picks) / len(groups)
        record = _record(judge.name, setting, calls, picked, reference, baseline, referee, costs,
                         safety, bootstrap, derive_seed(study.cfg.seed, "tradeoff", judge.name, setting.label))
        record.update(_adaptive(setting, picks, groups, referee, matches, store, costs, tolerance))
        record.update(prefilter.prefilter_record(setting, picks, first, referee, job.scores))
        record.update(decided_by(record, judge.name))
        records.append(record)
    return records


def decided_by(record: Mapping[str, Any], judge: str) -> dict[str, Any]:
    """Who decided a setting's matches, and the row's label from it: a cascade whose cheap judge settled
    every match never asked ``judge``, so its row is the cheap judge's (``judge``: the cheap one,
    ``asked_for``: the judge it stood in for), never another judge's result under ``judge``'s name."""
    gate = record.get("gate_report") or {}
    if record["family"] != "cascade" or not gate.get("matches"):
        return {"decided_by": {judge: 1.0}}
    cheap, share = gate["cascade"], gate["settled"] / gate["matches"]
    shares = {cheap: share, judge: 1.0 - share}
    if share < 1.0:
        return {"decided_by": shares}
    return {"decided_by": {cheap: 1.0}, "judge": cheap, "asked_for": judge,
            "setting": f"{record['setting']} for {judge} ({judge} never asked)"}


def final_gating(record: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """A setting's ``gating`` and why: ``safe`` only where both the flip analysis and the loss interval
    allow it. A loss interval that excludes 0 on the loss side is a measured loss: ``unsafe``."""
    verdict = record.get("gating")
    if verdict is None:
        return None, None
    if record.get("family") == prefilter.FAMILY:
        return prefilter.prefilter_gating(record)
    lo, hi = record.get("loss_lo"), record.get("loss_hi")
    if lo is not None and lo > 0:
        return "unsafe", f"measured loss: 95% interval [{lo:+.4f}, {hi:+.4f}] excludes 0"
    if verdict == "unsafe":
        return verdict, "the reverse order overturned confident verdicts (flip analysis or audit)"
    return verdict, {"safe": "flip analysis within tolerance and no measured loss",
                     "unproven": "too few confident verdicts to tell", "unknown": "no confident verdicts"}.get(verdict)


class _Hashed(Content):
    """Content whose hash is computed once: a replay asks it of the same prompts and candidates ~10^6 times."""

    @cached_property
    def digest(self) -> str:  # type: ignore[override]
        return Content.digest.fget(self)  # type: ignore[attr-defined]


def replay_groups(study: Any) -> list[tuple[Any, list[Any]]]:
    """(prompt, candidates) of every Best-of-N prompt of every generator, their content hashed once."""
    prompts = [replace(p, content=_Hashed(p.content.items)) for p in study.prompts]
    return [(p, [replace(c, content=_Hashed(c.content.items)) for c in by_prompt[p.id]])
            for by_prompt in study.candidates.values() for p in prompts]


class ReplayStore:
    """The study's judgment store as a replay reads it: each judge's answers that earlier commands bought,
    read once into memory (``snapshots``, shared by every judge of the command), and what this judge's
    replay buys on top (written through to the store). Every judge sees the same snapshot, so its records
    do not depend on which judges were replayed before it."""

    def __init__(self, store: JudgmentStore, snapshots: dict[str, dict[Key, Any]], scores: dict[str, dict] | None = None):
        self.store, self.snapshots, self.bought = store, snapshots, {}
        self._answered: dict[tuple, dict[Key, Any]] = {}
        self.scores = scores or {}  # pointwise scores read once (the prefilters'), by judge id

    def get_scores(self, jid: str, keys: Sequence[Any]) -> dict[Any, Any]:
        if jid not in self.scores:
            return self.store.get_scores(jid, keys)
        known = self.scores[jid]
        return {k: known[k] for k in keys if k in known}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def _known(self, jid: str) -> dict[Key, Any]:
        if jid not in self.snapshots:
            self.snapshots[jid] = self.store.answers_before(jid, self.store.invocation)
        return self.snapshots[jid]

    def get_many(self, jid: str, keys: Sequence[Key], retry_missing: bool = False) -> dict[Key, Any]:
        known, bought = self._known(jid), self.bought.get(jid, {})
        return {k: bought[k] if k in bought else known[k] for k in keys if k in bought or k in known}

    def put_many(self, jid: str, items: Any, stage: str = "", seconds_each: float = 0.0) -> None:
        items = list(items)
        self.store.put_many(jid, items, stage=stage, seconds_each=seconds_each)
        self.bought.setdefault(jid, {}).update((k, v) for k, v in items if not v.transient)

    def answered(self, jid: str, stage: str | None = None, limit: int = 200_000) -> dict[Key, Any]:
        """As the store's, less what other judges' replays of this command bought: a gate calibrates on the
        study's answers and on what this judge's own replay has bought so far (its settings run in one fixed
        order), so a study whose store was lost calibrates as the intact one does.

        Kept after the first read (every gated and cascade setting asks again, ~40 decodes of a whole
        judge's answers per command) when nothing can change it: this replay has bought nothing for the judge,
        the snapshot holds no missing answer (only those are ever asked again, and so rewritten) and the
        store's rows stay under ``limit``."""
        known, bought, key = self._known(jid), self.bought.get(jid, {}), (jid, stage, limit)
        if not bought and key in self._answered and self.store.answered_count(jid, stage) < limit:
            return dict(self._answered[key])
        found = {k: v for k, v in self.store.answered(jid, stage, limit).items() if k in known or k in bought}
        if not bought and self.store.answered_count(jid, stage) < limit and not any(v.better is None for v in known.values()):
            self._answered[key] = found
        return dict(found)


def _record(judge: str, setting: Setting, calls: float, picked: np.ndarray, reference: np.ndarray, baseline: dict,
            referee: Referee, costs: Mapping[str, float], safety: dict, bootstrap: int, seed: int) -> dict[str, Any]:
    bon = _nanmean(picked)
    lo, hi = paired_interval(reference - picked, bootstrap, seed)
    spread = baseline["oracle"] - baseline["random"]
    per_call = costs.get(judge, 0.0)
    return {
        "judge": judge, "setting": setting.label, "family": setting.family, "strategy": setting.strategy,
        "options": dict(setting.options), "gate": setting.gate, "prompts": int(len(picked)),
        "calls_per_prompt": calls, "usd_per_prompt": calls * per_call if per_call == per_call else None,
        "bon_score": bon, "recovery": (bon - baseline["random"]) / spread if spread > 0 else None,
        "random_score": baseline["random"], "oracle_score": baseline["oracle"],
        "loss": _nanmean(reference - picked), "loss_lo": lo, "loss_hi": hi,
        "picks_changed": int(np.sum(~np.isclose(picked, reference, equal_nan=True))),
        "calls_made": referee.stats.calls_made, "calls_cached": referee.stats.calls_cached,
        "calls_saved": referee.stats.calls_saved, "calls_pending": referee.stats.transient,
        "gating": flips.verdict_on_gating(safety[setting.confidence], setting.gate) if setting.gate is not None else None,
        **({"gate_safety": safety[setting.confidence]} if setting.gate is not None else {}),
    }


def _adaptive(setting: Setting, picks: Sequence[Any], groups: Sequence[Any], referee: Referee, matches: Sequence[Any],
              store: JudgmentStore, costs: Mapping[str, float], tolerance: float) -> dict[str, Any]:
    """What a calibrated gate, a cascade or the uncertainty strategy adds to its record: the gate it ran
    (calibration, audit, fallback), its ``gating`` verdict, the cheap judge's share of calls and money."""
    if setting.family == "uncertainty":
        settled = [p.settled for p in picks if p.settled is not None]
        blind = sum(bool(p.note) for p in picks)
        return {"settled_share": float(np.mean(settled)) if settled else None, "uninformed_prompts": blind,
                "note": f"leader settled within tolerance on {sum(settled)}/{len(settled)} prompts"
                        + (f"; {blind} saw only exact ties (no information, a seeded pick)" if blind else "")}
    if setting.family not in ("calibrated", "cascade"):
        return {}
    [gate] = referee.gate_reports() or [None]
    if gate is None:
        return {}
    out: dict[str, Any] = {"gate_report": gate, "note": gate["note"], "gate": gate["gate"]}
    if setting.family == "calibrated":
        out["gating"] = _calibrated_gating(gate, matches, referee, tolerance)
        return out
    cheap = referee.cascades[next(iter(referee.cascades))]
    prompts = len(groups)
    cheap_calls = sum(len(m.cascade) for p in picks for m in p.matches) / prompts
    out.update(cheap_calls_per_prompt=cheap_calls, gating=_cascade_gating(picks, groups, referee, cheap, store, tolerance))
    main_usd, cheap_usd = costs.get(referee.judge.name, 0.0), costs.get(cheap.referee.judge.name, 0.0)
    if main_usd == main_usd and cheap_usd == cheap_usd:  # both priced: each judge's calls at its own rate
        total = sum(p.calls for p in picks) / prompts
        out["usd_per_prompt"] = (total - cheap_calls) * main_usd + cheap_calls * cheap_usd
    return out


def _calibrated_gating(gate: Mapping[str, Any], matches: Sequence[Any], referee: Referee, tolerance: float) -> str | None:
    """The calibrated gate judged like a fixed one on the full protocol's matches (at the gate it chose,
    ties standing or not); ``unsafe`` when its audit turned it off, None when it settled nothing."""
    if gate["fell_back_after"] is not None:
        return "unsafe"
    if gate["gate"] is None or not gate["settled"]:
        return None
    policy = next(iter(referee.gates))
    records = [r for m in matches if (r := flips.from_match(m, referee.judge, policy.confidence))]
    return flips.settled_verdict([r for r in records if (r.forward_tie and gate["ties"] == "settle")
                                  or (not r.forward_tie and r.confidence is not None and r.confidence >= gate["gate"] - 1e-9)],
                                 tolerance)


def _cascade_gating(picks: Sequence[Any], groups: Sequence[Any], referee: Referee, cheap: Any, store: JudgmentStore,
                    tolerance: float) -> str | None:
    """How often the cheap judge's settled matches differ from the main judge's stored two-order decision
    on the same matches (only the matches the store holds in both orders are checked; no judge calls)."""
    asked = []
    for pick, (prompt, cands) in zip(picks, groups):
        for m in pick.matches:
            if m.rule == "cascade":
                p, x, y = prompt.content.digest, cands[m.x].content.digest, cands[m.y].content.digest
                asked.append((m, (p, x, y, 0), (p, y, x, 0)))
    if not asked:
        return None
    stored = store.get_many(referee.judge_id, [k for _, f, b in asked for k in (f, b)])
    records = [r for m, f, b in asked if f in stored and b in stored
               and (r := flips.cascade_flip(m.cascade[0], [stored[f]], [stored[b]], cheap.referee.judge, referee.judge,
                                            "auto", (m.x, m.y)))]
    return flips.settled_verdict(records, tolerance) if records else "unproven"


def _has_margins(matches: Sequence[Any]) -> bool:
    return any(isinstance(v.meta.get("margin"), (int, float)) for m in matches for v in m.forward[:1])


def _add_cuts(records: list[dict[str, Any]]) -> None:
    """Each setting's cut in calls against its judge's full protocol, and ``costs_more``: the settings
    that cost more calls per prompt than that knockout (a cascade whose cheap judge settles nothing pays
    both judges)."""
    full = {r["judge"]: r["calls_per_prompt"] for r in records if r["setting"] == REFERENCE}
    for r in records:
        ref = full.get(r.get("asked_for", r["judge"]))
        r["calls_cut"] = 1.0 - r["calls_per_prompt"] / ref if ref else None
        r["costs_more"] = bool(ref) and r["calls_per_prompt"] > ref + 1e-9
        r["loss_ci_includes_0"] = r["loss_lo"] is not None and r["loss_lo"] <= 0.0 <= r["loss_hi"]


def cheapest_within(records: Sequence[Mapping[str, Any]], max_loss: float, bound: str = "upper",
                    allow_unsafe: bool = False) -> dict[str, dict[str, Any]]:
    """Per judge: the setting with the fewest calls per prompt that stays within ``max_loss`` of the full
    protocol's Best-of-N score: by the upper end of its 95% loss interval (``bound="upper"``, the
    default: a loss that could be larger does not qualify) or by the point estimate (``"point"``).
    Gates the flip analysis calls unsafe are left out unless ``allow_unsafe`` (a small measured loss
    on these prompts does not make a gate that overturns outcomes safe on the next ones), and so are the
    gates it cannot vouch for (unproven, unknown: :func:`qualifies`). The full protocol itself qualifies
    when nothing cheaper does."""
    key = "loss_hi" if bound == "upper" else "loss"
    best: dict[str, dict[str, Any]] = {}
    for r in records:
        value = r.get(key)
        if value is None or not math.isfinite(value) or value > max_loss or (not qualifies(r) and not allow_unsafe):
            continue
        cur = best.get(r["judge"])
        if cur is None or r["calls_per_prompt"] < cur["calls_per_prompt"] - 1e-9:
            best[r["judge"]] = {k: r.get(k) for k in ("judge", "setting", "calls_per_prompt", "usd_per_prompt", "bon_score",
                                                       "loss", "loss_lo", "loss_hi", "calls_cut", "gating")}
            best[r["judge"]].update(prefilter.prefilter_costs(r))
    return best


def qualifies(record: Mapping[str, Any]) -> bool:
    """Whether a setting may be recommended: no gate (nothing to vouch for), or a gate called ``safe``."""
    return record.get("gating") in (None, "safe")


def flags(record: Mapping[str, Any]) -> str:
    """What a row's reader must know besides its numbers, in one cell: its gating verdict, ``costs more than
    knockout``, whose matches they were, and the leakage flag of a judge the policy leaves out."""
    parts = [record.get("gating") or ""]
    if (record.get("gating_reason") or "").startswith("measured loss"):
        parts[0] += " (measured loss)"
    if record.get("costs_more"):
        parts.append("costs more than knockout")
    if record.get("left_out"):
        parts.append(f"left out: {record['left_out']}")
    return "; ".join(p for p in parts if p)


def write_tradeoff(run_root: Path, records: list[dict[str, Any]], out_dir: Path | None = None,
                   json_out: Path | None = None, max_loss: float | None = None) -> dict[str, Path]:
    """``tradeoff.json`` (records, cheapest settings) and ``figures/tradeoff.png`` in the run folder (or ``out_dir``)."""
    folder = Path(out_dir) if out_dir else Path(run_root)
    payload = {"records": records, "reference": REFERENCE,  # write_json makes it strict JSON
               "left_out": {r["judge"]: r["left_out"] for r in records if r.get("left_out")}}
    if max_loss is not None:
        payload["cheapest_within"] = {"max_loss": max_loss, "judges": cheapest_within(records, max_loss)}
    paths = {"json": folder / RECORDS, "figure": folder / FIGURE, "markdown": folder / MARKDOWN}
    write_json(paths["json"], payload)
    write_text(paths["markdown"], tradeoff_markdown(records, max_loss))
    if json_out:
        write_json(Path(json_out), payload)
        paths["json_copy"] = Path(json_out)
    tradeoff_figure(records, paths["figure"])
    return paths


MARKERS = {"knockout": "o", "gated": "v", "calibrated": "P", "cascade": "*", "uncertainty": "h", "seeded": "s",
           "round-robin": "D", "early-stop": "X", "prefilter": "d"}


def tradeoff_figure(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Calls per prompt (x) against Best-of-N score and recovery (y): one line per judge through its
    settings, one marker shape per kind of setting."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from analysis.plots import save_figure, tight_layout

    judges = list(dict.fromkeys(r["judge"] for r in records))
    fig = Figure(figsize=(14, 5.4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2)
    colours = colormaps["tab10"]
    for i, judge in enumerate(judges):
        mine = sorted((r for r in records if r["judge"] == judge), key=lambda r: r["calls_per_prompt"])
        for ax, key in zip(axes, ("bon_score", "recovery")):
            xs = [r["calls_per_prompt"] for r in mine if r[key] is not None]
            ys = [r[key] for r in mine if r[key] is not None]
            ax.plot(xs, ys, "-", color=colours(i % 10), alpha=0.6, lw=1.2, label=judge)
            for r in mine:
                if r[key] is not None:  # hollow: the flip analysis calls this gate unsafe for the judge
                    face = "white" if r.get("gating") == "unsafe" else colours(i % 10)
                    ax.plot(r["calls_per_prompt"], r[key], MARKERS.get(r["family"], "o"), color=colours(i % 10), mfc=face, ms=6)
    for ax, key in zip(axes, ("Best-of-N score", "recovery (0 = random pick, 1 = oracle)")):
        ax.set_xlabel("judge calls per prompt (N candidates, one generator; log scale)")
        ax.set_ylabel(key)
        ax.set_xscale("log", base=2)
        ticks = sorted({round(r["calls_per_prompt"]) for r in records if r["family"] in ("knockout", "round-robin")}
                       | {round(min((r["calls_per_prompt"] for r in records), default=1))})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.grid(alpha=0.3, which="both")
    if records:
        axes[0].axhline(records[0]["random_score"], color="grey", ls=":", lw=1)
        axes[0].axhline(records[0]["oracle_score"], color="grey", ls="--", lw=1)
    handles, labels = axes[0].get_legend_handles_labels()
    judge_legend = fig.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(0.855, 0.9), title="judge", title_fontsize=8)
    fig.add_artist(judge_legend)
    shapes = [Line2D([], [], marker=m, ls="", color="black", label=f) for f, m in MARKERS.items()]
    shapes.append(Line2D([], [], marker="v", ls="", color="black", mfc="white", label="unsafe (flip analysis or audit)"))
    fig.legend(handles=shapes, fontsize=7, loc="lower left", bbox_to_anchor=(0.855, 0.1), title="setting", title_fontsize=8)
    fig.suptitle("Cost against quality: every way of running each judge (dotted: random pick, dashed: oracle)", fontsize=10)
    tight_layout(fig, (0, 0, 0.85, 1))
    return save_figure(fig, path, dpi=110)[0]


def _baselines(scores: Mapping, groups: Sequence) -> dict[str, float]:
    means, bests = [], []
    for _, cands in groups:
        vals = [v for c in cands if (v := (scores.get(c.key) or {}).get("score")) is not None]
        if vals:
            means.append(float(np.mean(vals)))
            bests.append(float(np.max(vals)))
    return {"random": _nanmean(np.array(means)), "oracle": _nanmean(np.array(bests))}


def _score(scores: Mapping, group: tuple, index: int) -> float:
    value = (scores.get(group[1][index].key) or {}).get("score") if index >= 0 else None
    return math.nan if value is None else float(value)


def _nanmean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)] if values.size else values
    return float(finite.mean()) if finite.size else None


def load_tradeoff(run_dir: Path) -> dict[str, Any] | None:
    """The plain records a report shows (``tradeoff.json`` of ``bon tradeoff``), or None if never computed."""
    return read_json(Path(run_dir) / RECORDS)


def tradeoff_markdown(records: Sequence[Mapping[str, Any]], max_loss: float | None = None,
                      figure: str = FIGURE.as_posix()) -> str:
    """A report section: the table, the cheapest setting per judge within ``max_loss``, and which gates
    the reverse-flip analysis calls unsafe (a judge whose confident answers the reverse order overturns)."""
    lines = ["## Cost against quality", "",
             f"![trade-off]({figure})", "",
             "| judge | setting | calls/prompt | calls cut | Best-of-N | recovery | loss vs full [95% CI] | gating and flags |",
             "|---|---|---:|---:|---:|---:|---|---|"]
    for r in records:
        cut = "" if r.get("calls_cut") is None else f"{100 * r['calls_cut']:.0f}%"
        loss = "" if r.get("loss") is None else f"{r['loss']:+.4f} [{r['loss_lo']:+.4f}, {r['loss_hi']:+.4f}]"
        lines.append(f"| {md_label(r['judge'])} | {md_label(r['setting'])} | {r['calls_per_prompt']:.2f}{md_label(prefilter.cost_text(r))} | {cut} | {_num(r.get('bon_score'))} | "
                     f"{_num(r.get('recovery'), '.3f')} | {loss} | {md_label(flags(r))} |")
    noted = [r for r in records if r.get("note")]
    if noted:
        lines += ["", "**Calibrated gates, cascades and the uncertainty strategy** (what each did for the judge):"]
        lines += [f"- {md_label(r['judge'])}: {md_label(r['setting'])}: {r['note']}" for r in noted]
    unsafe = [r for r in records if r.get("gating") == "unsafe"]
    if unsafe:
        lines += ["", "**Gating unsafe** (the reverse order overturned confident forward verdicts in the full protocol's matches, "
                  "a calibrated gate's audit did, or the loss interval excludes 0):"]
        lines += [f"- {md_label(r['judge'])}: {md_label(r['setting'])}: {r.get('gating_reason') or 'flip analysis'}" for r in unsafe]
    if max_loss is not None:
        lines += ["", f"Cheapest setting whose Best-of-N loss against the full protocol stays within {max_loss:g} "
                      "(upper end of its 95% interval; only gates called safe):"]
        for judge, best in cheapest_within(records, max_loss).items():
            money = "" if best["usd_per_prompt"] is None else f", ${best['usd_per_prompt']:.4f}/prompt"
            lines.append(f"- {md_label(judge)}: {md_label(best['setting'])} ({best['calls_per_prompt']:.2f} calls/prompt{money}"
                         f"{prefilter.cost_text(best)})")
    return "\n".join(lines) + "\n"


def _num(value: Any, spec: str = ".4f") -> str:
    return "" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def leaderboard_rows(run_dir: Path, max_loss: float, bound: str = "upper") -> list[dict[str, Any]]:
    """For the reranker leaderboard: per judge, its full-protocol cost and the cheapest setting within
    ``max_loss`` (calls and money per prompt), from the run's ``tradeoff.json`` ([] if never computed)."""
    payload = load_tradeoff(run_dir)
    return cheapest_rows((payload or {}).get("records") or [], max_loss, bound)


def cheapest_rows(records: Sequence[Mapping[str, Any]], max_loss: float, bound: str = "upper") -> list[dict[str, Any]]:
    """:func:`cheapest_within` beside each judge's full-protocol cost: one row per judge."""
    full = {r["judge"]: r for r in records if r["setting"] == REFERENCE}
    rows = []
    for judge, best in cheapest_within(records, max_loss, bound).items():
        ref = full.get(judge, {})
        rows.append({"judge": judge, "max_loss": max_loss, "full_calls_per_prompt": ref.get("calls_per_prompt"),
                     "full_usd_per_prompt": ref.get("usd_per_prompt"), "full_bon_score": ref.get("bon_score"),
                     "cheapest_setting": best["setting"], "calls_per_prompt": best["calls_per_prompt"],
                     "usd_per_prompt": best["usd_per_prompt"], "bon_score": best["bon_score"], "loss": best["loss"],
                     "loss_hi": best["loss_hi"], "calls_cut": best["calls_cut"], "gating": best["gating"],
                     **prefilter.prefilter_costs(best)})
    return rows
