"""Leakage guards: what must not sit on both axes of the correlation.

Two leaks inflate the relation between a judge's accuracy and its Best-of-N gain:

- a **judge that is the study's own grader** (same model, or same scoring code: the shared-grader check
  of :func:`analysis.predictors.shared_grader`, recorded by the study in ``stats.json``) shares the
  verifier's errors, so its picks score well for the wrong reason. Such judges are left out of the
  correlation by default, as the MMRB2 paper leaves out GPT-4o and GPT-4.1, its evaluators; the report
  shows the correlation with them too, and ``leakage: {grader_judges: keep}`` (``bon report
  --grader-judges keep``) makes the inclusive one the headline.
- **preference pairs drawn from the downstream benchmark** measure accuracy on the very prompts (or the
  very benchmark) the Best-of-N score is taken on, as MMRB2's ISG-Bench pairs do for an ISG-Bench study:
  they are dropped from every judge's accuracy by default (``overlapping_pairs: keep`` keeps them). A
  pair overlaps when its prompt is one of the Best-of-N prompts (same text and pixels), or, for pairs
  from an outside benchmark such as MMRB2's files, when its ``prompt_source`` names the source of the
  Best-of-N prompts (``isgbench`` = ``isg-bench``: compared on letters and digits). The run's own
  preference set shares the suite's source by construction (bon draws it from held-out prompts), so
  there only the prompt check applies. ``sources: [...]`` adds prompt sources to drop everywhere.
"""

from __future__ import annotations

import json

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from bon import mmrb2
from bon.errors import BonError
from bon.config import LeakagePolicy, parse_policy  # the config's leakage: section (read with the config)
from bon.content import Content, TextItem
from bon.run import Run, as_run

Overlap = Callable[[str, mmrb2.Pair], "str | None"]  # (task, pair) -> why the pair overlaps, or None


def study_policy(study: Mapping[str, Any], grader_judges: str | None = None,
                 overlapping_pairs: str | None = None) -> LeakagePolicy:
    """The policy config.yaml recorded, with the command line's choices on top."""
    base = parse_policy(study.get("leakage"), "config.yaml: study")
    return LeakagePolicy(grader_judges or base.grader_judges, overlapping_pairs or base.overlapping_pairs, base.sources)


def grader_judges(stats: Mapping[str, Any], judges: Iterable[str]) -> dict[str, str]:
    """``{judge: grader family}`` of this run's judges that share the verifier's grader (``stats.json``)."""
    flags = stats.get("shared_grader") or {}
    return {j: str(flags[j]) for j in judges if j in flags}


def source_key(source: str) -> str:
    """A prompt source compared on lower-case letters and digits: ``ISG-Bench`` = ``isgbench``."""
    return re.sub(r"[^a-z0-9]", "", str(source).lower())


@dataclass
class Downstream:
    """What the Best-of-N side was measured on: its prompts' sources and contents."""

    sources: dict[str, str] = field(default_factory=dict)  # source key -> source as the prompts spell it
    contents: list[Content] = field(default_factory=list)

    def holds(self, content: Content) -> bool:
        """Whether ``content`` is one of the prompts' contents (the same digest: text and pixels). Only contents
        with its outline are hashed (hashing decodes the images; the digest covers the outline, so no other
        content can have it)."""
        same = self._by_outline.get(outline(content), [])
        return bool(same) and content.digest in {c.digest for c in same}

    @cached_property
    def _by_outline(self) -> dict[tuple[str | None, ...], list[Content]]:
        grouped: dict[tuple[str | None, ...], list[Content]] = {}
        for content in self.contents:
            grouped.setdefault(outline(content), []).append(content)
        return grouped


def outline(content: Content) -> tuple[str | None, ...]:
    """A content's items as their texts (None for an image): what its digest covers besides the pixels."""
    return tuple(item.text if isinstance(item, TextItem) else None for item in content.items)


def downstream(run: Run | Path, prompt_ids: Iterable[str]) -> Downstream:
    """The sources and contents of the Best-of-N prompts (those with picks) in ``prompts.jsonl``."""
    run = as_run(run)
    if not run.folder.prompts.exists():
        return Downstream()
    wanted = set(prompt_ids)
    prompts = [p for p in run.prompt_objects.values() if p.id in wanted]
    sources = {source_key(s): str(s) for s in (p.metadata.get("source") for p in prompts) if s}
    return Downstream(sources, [p.content for p in prompts])


def own_set_overlap(bench: Path, down: Downstream, policy: LeakagePolicy) -> Overlap | None:
    """The overlap rule for the run's own preference set: its prompt is a Best-of-N prompt, or its
    source is one the policy names (None when the policy keeps overlapping pairs)."""
    if policy.overlapping_pairs == "keep":
        return None
    extra = {source_key(s): s for s in policy.sources}
    from bon.stages.judge_bench import pair_comparisons

    contents: dict[tuple[str, str], Content] = {}  # a prompt's content, once per prompt (a prompt has several pairs)

    def prompt_content(task: str, pair: mmrb2.Pair) -> Content:
        key = (task, json.dumps(pair.prompt_content, sort_keys=True))
        if key not in contents:
            contents[key] = pair_comparisons(pair, task, bench, 1)[0].prompt.content
        return contents[key]

    def why(task: str, pair: mmrb2.Pair) -> str | None:
        if source_key(pair.prompt_source) in extra:
            return f"source {pair.prompt_source} (leakage: sources)"
        if pair.prompt_content is not None and down.holds(prompt_content(task, pair)):
            return "its prompt is a Best-of-N prompt"
        return None

    return why


def outside_overlap(down: Downstream, policy: LeakagePolicy) -> Overlap | None:
    """The overlap rule for pairs of an outside benchmark (MMRB2's files): its source is the Best-of-N
    prompts' source or one the policy names."""
    if policy.overlapping_pairs == "keep":
        return None
    named = {**down.sources, **{source_key(s): s for s in policy.sources}}

    def why(task: str, pair: mmrb2.Pair) -> str | None:
        key = source_key(pair.prompt_source)
        return f"source {pair.prompt_source} = downstream {named[key]}" if key in named else None

    return why


def drop_overlapping(pairs: list[mmrb2.Pair], task: str, overlap: Overlap | None) -> tuple[list[mmrb2.Pair], dict[str, Any]]:
    """(kept pairs, ``{"pairs": all, "dropped": k, "why": {reason: count}}``) under an overlap rule."""
    if overlap is None:
        return pairs, {"pairs": len(pairs), "dropped": 0, "why": {}}
    kept, why = [], {}
    for pair in pairs:
        reason = overlap(task, pair)
        if reason is None:
            kept.append(pair)
        else:
            why[reason] = why.get(reason, 0) + 1
    return kept, {"pairs": len(pairs), "dropped": len(pairs) - len(kept), "why": why}


def pairs_text(dropped: Mapping[str, Mapping[str, Any]]) -> str:
    """One line: ``t2i 3 of 160 (its prompt is a Best-of-N prompt), edit 0 of 160``."""
    parts = []
    for task, d in dropped.items():
        reasons = "; ".join(f"{n} {r}" for r, n in d.get("why", {}).items())
        parts.append(f"{task} {d['dropped']} of {d['pairs']}" + (f" ({reasons})" if reasons else ""))
    return ", ".join(parts)


# --- one rule for every output: which judges are left out, and which is "best" ---------------------------

GRADER_REASON = "shares the verifier's grader"


def excluded_judges(study: Mapping[str, Any], stats: Mapping[str, Any], judges: Iterable[str],
                    choice: str | None = None) -> dict[str, str]:
    """``{judge: why it is left out}`` under the study's leakage policy (``choice``: the command line's
    ``--grader-judges`` on top). Every output (console, report, predictor table, leaderboard, power,
    trade-off, figures) asks this one function, so they all leave out the same judges."""
    if not study_policy(study, choice).excludes_graders:
        return {}
    return {j: f"{GRADER_REASON} ({family})" for j, family in grader_judges(stats, judges).items()}


def run_exclusions(run: Run | Path, judges: Iterable[str] | None = None, choice: str | None = None) -> dict[str, str]:
    """:func:`excluded_judges` of a run (its ``config.yaml`` and :func:`load_stats`); ``judges`` defaults to
    every judge the study's stats name."""
    run = as_run(run)
    stats = load_stats(run)
    return excluded_judges(run.study, stats, judges if judges is not None else list(stats.get("judges") or {}), choice)


def load_stats(run: Run | Path) -> dict[str, Any]:
    """stats.json (an object, else a one-line error); when it is missing, what it records of the judges rebuilt
    from the config and the store, with the judges sharing the verifier's grader (so no judge's costs go missing
    and the leakage guard still leaves the verifier's twins out), or nothing without a readable config."""
    from bon.recorded import grader_view, plugin_identity, read_study_config, stats_from_store

    run = as_run(run)
    if run.folder.stats.exists():
        return run.stats
    try:
        cfg = read_study_config(run.folder)
        stats = stats_from_store(run.folder, cfg)
        verifier = grader_view("verifier", cfg.verifier, plugin_identity("verifier", cfg.verifier, cfg.source))
    except BonError:
        return {}
    judges = [grader_view("judge", spec, stats["identities"]["judges"].get(spec.label, {})) for spec in cfg.judges]
    return {**stats, "shared_grader": shared_grader(judges, verifier)}



# --- judges that share the verifier's grader ----------------------------------------------------


def grader_family(plugin: Any) -> str | None:
    """What grades inside a judge or verifier: a declared ``grader_family`` (shared scoring code), else
    the model its identity names (``grader_model``, a nested ``grader`` identity's ``model``, or
    ``model``), compared by its last path part, case-insensitively (``openai/GPT-4.1`` = ``gpt-4.1``)."""
    declared = getattr(plugin, "grader_family", None)
    if declared:
        return str(declared)
    try:
        ident = plugin.identity() or {}
    except Exception:  # an identity that cannot be built says nothing about the grader
        return None
    nested = ident.get("grader") if isinstance(ident.get("grader"), Mapping) else {}
    model = ident.get("grader_model") or nested.get("model") or ident.get("model")
    return str(model).strip().rstrip("/").rsplit("/", 1)[-1].lower() if model else None


def shared_grader(judges: Iterable[Any], verifier: Any) -> dict[str, str]:
    """``{judge name: family}`` for judges whose grader family equals the verifier's."""
    family = grader_family(verifier)
    if not family:
        return {}
    return {j.name: family for j in judges if grader_family(j) == family}


def flagged(judge: str, excluded: Mapping[str, str]) -> str:
    """The judge's name, with its leakage flag where it is left out: ``verifier-twin [left out: ...]``."""
    return f"{judge} [left out: {excluded[judge]}]" if judge in excluded else judge


def best_judge(values: Mapping[str, float], excluded: Mapping[str, str]) -> str | None:
    """The judge with the highest value among those the leakage policy keeps (ties: the first named);
    None when none is kept or none has a number. Every "best judge" of every output comes from here."""
    kept = [(v, j) for j, v in values.items() if j not in excluded and v is not None and v == v]
    return max(kept, key=lambda t: t[0])[1] if kept else None


RANDOM_BASELINE = "random"  # the registry name of the judge that picks by a seeded coin


def random_baselines(study: Mapping[str, Any]) -> set[str]:
    """Labels of the study's judges that are the random baseline itself (never "worse than random")."""
    out = set()
    for j in study.get("judges") or []:
        name, label = (j, j) if isinstance(j, str) else (j.get("name"), j.get("label") or j.get("name"))
        if name == RANDOM_BASELINE:
            out.add(str(label))
    return out


def worse_than_random(metrics: Any, study: Mapping[str, Any]) -> Any:
    """The rows of a metrics table (``gain``, ``gain_lo``, ``gain_hi``) whose gain over a random pick is
    negative with an interval that excludes 0, the random baseline itself left out (its gain is noise)."""
    below = metrics[(metrics["gain_hi"] < 0) & ~metrics["judge"].isin(random_baselines(study))]
    return below
