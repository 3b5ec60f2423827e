"""``bon verify --run DIR --verifier SPEC [--option k=v]``: score every candidate of a study once.

:func:`verify_command` reuses the study's verify stage (:func:`bon.stages.verify.verify`: resumable,
with a progress bar, a grading failure stored as a missing score with its reason), over every
complete prompt of every generator in the run folder (Best-of-N and preference-set prompts alike).

Where the scores go:

- the study's own verifier (same name and options as ``config.yaml``'s ``verifier``): ``scores.jsonl``,
  so rerunning it only fills gaps;
- any other: ``scores_<label>.jsonl`` beside it (``label`` is the ``label`` option, default the
  verifier's spec), with ``scores_<label>.json`` recording the spec, options and identity. Scores of a
  different verifier under a label already used are refused, so two graders never mix in one file.
  When the study has picks, the Best-of-N table under this verifier is written to
  ``results_<label>.csv`` too (same columns as ``results.csv``; MMRB2 accuracies left empty).
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from bon import registry
from bon.content import Candidate, load_prompts, read_jsonl, slug
from bon.errors import BonError
from bon.runfolder import RunFolder, write_json

SECRET_HINTS = ("key", "token", "secret", "password")


def verify_command(run_dir: Path, verifier_spec: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score every candidate of the study in ``run_dir`` with ``verifier_spec``; returns a summary."""
    from bon.stages.generate import load_done
    from bon.stages.verify import verify
    from bon.study import read_study_config

    run = RunFolder(Path(run_dir))
    if not run.config.exists() or not run.prompts.exists():
        raise BonError(f"{run.root}: not a study folder (no config.yaml or prompts.jsonl); run `bon run` first")
    cfg = read_study_config(run)

    options = dict(options or {})
    name, spec_options = registry.parse_spec(verifier_spec)
    if name not in registry.names("verifier"):
        raise BonError(f"unknown verifier {name!r} (known: {', '.join(registry.names('verifier'))})")
    asked_label = options.pop("label", None)
    own = cfg.verifier
    same = own.name == verifier_spec and dict(own.options) == options and asked_label in (None, own.label)
    label = own.label if same else str(asked_label or verifier_spec)
    if same:
        target, record_file = run.scores, None
    else:
        target = run.root / f"scores_{slug(label)}.jsonl"
        record_file = run.root / f"scores_{slug(label)}.json"
        record = {"verifier": verifier_spec, "options": _redacted(options)}
        if record_file.exists():
            import json

            old = json.loads(record_file.read_text(encoding="utf-8"))
            if {k: old.get(k) for k in record} != record:
                raise BonError(f"{target}: holds scores of verifier {old.get('verifier')} with options {old.get('options')}; "
                               f"give this one another label (--option label=NAME) or delete the file")
    verifier = registry.create("verifier", verifier_spec, name=label, **options)
    if record_file is not None:
        write_json(record_file, {"verifier": verifier_spec, "options": _redacted(options), "label": label,
                                 "identity": _identity(verifier), "written": time.strftime("%Y-%m-%dT%H:%M:%S")})

    prompts = load_prompts(run.prompts)
    prompt_map = {p.id: p for p in prompts}
    candidates: list[Candidate] = []
    incomplete: dict[str, int] = {}
    for g in cfg.generators:
        done = load_done(run, g.label, cfg.n)
        incomplete[g.label] = sum(1 for p in prompts if p.id not in done)
        candidates += [c for p in prompts if p.id in done for c in done[p.id]]
    if not candidates:
        raise BonError(f"{run.root}: no complete candidates to verify; run the study's generate stage first")

    before = {(r["generator"], r["prompt_id"], int(r["index"])) for _, r in read_jsonl(target)} if target.exists() else set()
    started = time.perf_counter()
    scores = verify(run, verifier, prompt_map, candidates, path=target)
    seconds = time.perf_counter() - started
    mine = [scores[c.key] for c in candidates if c.key in scores]
    missing = [r for r in mine if r.get("score") is None]
    reasons = Counter(_reason(r.get("missing")) for r in missing)

    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    task_of = {p.id: p.task for p in prompts}
    for c in candidates:
        v = scores.get(c.key, {}).get("score")
        if v is not None:
            by[(task_of[c.prompt_id], c.generator)].append(float(v))
    means = [{"task": t, "generator": g, "mean_score": sum(v) / len(v), "scored": len(v)} for (t, g), v in sorted(by.items())]

    summary: dict[str, Any] = {
        "run": str(run.root), "verifier": verifier_spec, "label": label, "scores_file": str(target),
        "study_verifier": same, "candidates": len(candidates), "newly_scored": len([c for c in candidates if c.key not in before]),
        "pending": sum(c.key not in scores for c in candidates),  # transient failures: a rerun scores them
        "missing": len(missing), "missing_reasons": dict(reasons.most_common(5)), "seconds": round(seconds, 2),
        "incomplete_prompts": {g: k for g, k in incomplete.items() if k}, "mean_scores": means,
        "identity": _identity(verifier),
    }
    if run.picks.exists():
        from analysis.bon_metrics import failure_policy, results_table

        picks = [r for _, r in read_jsonl(run.picks)]
        policy = failure_policy({"on_failure": cfg.on_failure, "verifier": {"name": verifier_spec}})
        table = results_table(picks, scores, {}, cfg.n, policy.applied)
        if not same:
            out = run.root / f"results_{slug(label)}.csv"
            table.to_csv(out, index=False, float_format="%.6g")
            summary["results_file"] = str(out)
        summary["results"] = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                              for row in table.to_dict(orient="records")]
    return summary


def _reason(text: Any) -> str:
    t = " ".join(str(text).split())
    return t if len(t) <= 120 else t[:117] + "..."


def _redacted(options: dict[str, Any]) -> dict[str, Any]:
    return {k: ("***" if any(h in k.lower() for h in SECRET_HINTS) and "env" not in k.lower() else v) for k, v in options.items()}


def _identity(verifier: Any) -> Any:
    try:
        return verifier.identity()
    except Exception as exc:  # noqa: BLE001 - an identity is a record, not a reason to stop
        return {"name": getattr(verifier, "name", "?"), "identity_error": f"{type(exc).__name__}: {exc}"}
