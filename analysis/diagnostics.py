"""Where a judge wins and loses on MMRB2, and what the benchmark itself looks like.

One MMRB2 accuracy number hides the failure modes the paper analyses: weaker accuracy on pairs from
the same generator, position bias, a pull towards responses that contain images, little gain from
sampling a judge several times. ``diagnose`` breaks accuracy down along each of those lines with the
official scorer's semantics (:func:`bon.mmrb2.accuracy` on subsets of pairs), and adds the
benchmark-only facts needed to read them: human agreement, same-model pair counts, generator win
rates. Every rate comes with the counts it was computed from. It runs on the response-only release.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from bon.errors import BonError
from bon.mmrb2 import FLIP, Pair, accuracy, find_task_file, has_task_file, load_judgments, load_pairs, overall
from bon.runfolder import strict, write_text
from bon.tasks import TASKS, scorer_task

# Generation tasks: a 1-6 rating votes A at 5-6, B at 1-2, and abstains at 3-4 (the uncertain middle).
RATING_VOTE = {1: "B", 2: "B", 5: "A", 6: "A"}
# Reasoning tasks: each response gets a letter grade per annotator; read as an ordinal scale A > B > C
# (in the release a chosen response is never graded C, and a graded rejected one is C in all but one pair).
GRADE_RANK = {"A": 0, "B": 1, "C": 2}
NO_CATEGORY = "(none)"


def diagnose(bench_dir: Path, predictions: Mapping[str, Sequence[Path] | Path] | None = None,
             exclude_sources: Iterable[str] = ()) -> dict[str, Any]:
    """All diagnostics for the task files in ``bench_dir`` and, optionally, judgment files per task.

    ``predictions`` maps a task (bon or scorer name) to one or more judgment files; each file is one
    judge, named by its samples' ``evaluator`` field (file stem when absent, mixed or clashing).
    ``exclude_sources`` (case-insensitive ``prompt_source`` values) are dropped before anything is
    counted; a source that matches no pair is an error, since a typo would silently change nothing.
    """
    bench_dir = Path(bench_dir)
    if not bench_dir.is_dir():
        raise BonError(f"{bench_dir}: benchmark folder not found")
    preds: dict[str, list[Path]] = {}
    for task, files in (predictions or {}).items():
        listed = [files] if isinstance(files, (str, Path)) else list(files)
        preds.setdefault(scorer_task(task), []).extend(Path(f) for f in listed)
    excluded = {s.lower() for s in exclude_sources}
    matched: set[str] = set()
    tasks: dict[str, Any] = {}
    for task in (t.scorer for t in TASKS):
        if task not in preds and not has_task_file(bench_dir, task):
            continue
        path = find_task_file(bench_dir, task)
        pairs = load_pairs(path)
        dropped = [p for p in pairs if p.prompt_source.lower() in excluded]
        matched |= {p.prompt_source.lower() for p in dropped}
        kept = [p for p in pairs if p.prompt_source.lower() not in excluded]
        tasks[task] = _task(task, path, kept, {p.id for p in dropped}, preds.get(task, []))
    if not tasks:
        raise BonError(f"{bench_dir}: no MMRB2 task files (t2i/edit/interleaved/reasoning *.json)")
    if excluded - matched:
        raise BonError(f"--exclude-source {', '.join(sorted(excluded - matched))}: no pair in {bench_dir} has that "
                       "prompt_source")
    return {"bench_dir": str(bench_dir), "excluded_sources": sorted(excluded), "tasks": tasks,
            "overall": _overall(tasks)}


# --- one task ---------------------------------------------------------------------------------


def _task(task: str, path: Path, pairs: list[Pair], dropped: set[str], files: list[Path]) -> dict[str, Any]:
    same = sum(p.model_a == p.model_b for p in pairs)
    out: dict[str, Any] = {
        "file": str(path),
        "pairs": len(pairs),
        "excluded_pairs": len(dropped),
        "chosen_A": sum(p.chosen == "A" for p in pairs),
        "sources": dict(Counter(p.prompt_source for p in pairs).most_common()),
        "categories": dict(Counter(_category(p) for p in pairs).most_common()),
        "same_model": {"same": same, "different": len(pairs) - same, "pairs": len(pairs),
                       "same_pct": _pct(same, len(pairs))},
        "image_presence": _image_presence(pairs),
        "human_agreement": _reasoning_agreement(pairs) if task == "reasoning" else _rating_agreement(pairs),
        "win_rates": _win_rates(pairs),
        "judges": {},
    }
    for name, (file, judgments) in _load_judges(files).items():
        judgments = {pid: e for pid, e in judgments.items() if pid not in dropped}
        out["judges"][name] = {"file": str(file), **_judge(pairs, judgments)}
    return out


def _judge(pairs: list[Pair], judgments: Mapping[str, Any]) -> dict[str, Any]:
    with_one_image = [p for p in pairs if _has_image(p.response_a) != _has_image(p.response_b)]
    return {
        "accuracy": accuracy(pairs, judgments),
        "by_source": _by(pairs, judgments, lambda p: p.prompt_source),
        "by_category": _by(pairs, judgments, _category),
        "same_model": {"same": _acc([p for p in pairs if p.model_a == p.model_b], judgments),
                       "different": _acc([p for p in pairs if p.model_a != p.model_b], judgments)},
        "position": _position(pairs, judgments),
        "image_bias": {
            "preferred_has_image": _acc([p for p in with_one_image if _has_image(_chosen(p))], judgments),
            "preferred_text_only": _acc([p for p in with_one_image if not _has_image(_chosen(p))], judgments),
        },
        "voting": majority_voting(pairs, judgments),
    }


def _load_judges(files: list[Path]) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Name each file's judge by its single ``evaluator`` value, else by file stem; names stay unique."""
    loaded = [(f, load_judgments(f)) for f in files]
    names = []
    for f, data in loaded:
        evaluators = {s.get("evaluator") for e in data.values() for d in ("forward", "reverse")
                      for s in (e.get(d) or []) if isinstance(s, Mapping)} - {None, ""}
        names.append(str(evaluators.pop()) if len(evaluators) == 1 else f.stem)
    if len(set(names)) < len(names):
        names = [f.stem for f, _ in loaded]
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name, item in zip(names, loaded):
        key, n = name, 1
        while key in out:
            n += 1
            key = f"{name}#{n}"
        out[key] = item
    return out


# --- accuracy breakdowns -----------------------------------------------------------------------


def _acc(pairs: list[Pair], judgments: Mapping[str, Any]) -> dict[str, Any]:
    """Official accuracy on a subset of pairs, reduced to what a breakdown needs."""
    r = accuracy(pairs, judgments)
    return {"pairs": len(pairs), "correct": r["correct"], "judgements": r["judgements"], "accuracy": r["accuracy"]}


def _by(pairs: list[Pair], judgments: Mapping[str, Any], key: Callable[[Pair], str]) -> dict[str, Any]:
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(key(p), []).append(p)
    order = sorted(groups, key=lambda g: (-len(groups[g]), g))
    return {g: _acc(groups[g], judgments) for g in order}


def _answers(entry: Any, direction: str, k: int) -> list[str]:
    """Non-empty judgements among the first ``k`` samples of one direction, as stored (not flipped)."""
    samples = entry.get(direction) if isinstance(entry, Mapping) else None
    if not isinstance(samples, list):
        return []
    return [s["judgement"] for s in samples[:k]
            if isinstance(s, Mapping) and isinstance(s.get("judgement"), str) and s["judgement"]]


def _position(pairs: list[Pair], judgments: Mapping[str, Any]) -> dict[str, Any]:
    """First-sample answers only: does the reverse call, flipped back, agree with the forward one, and
    how often is the response shown first ("A") picked in each direction?"""
    fwd_a = fwd = rev_a = rev = both = consistent = 0
    for p in pairs:
        entry = judgments.get(p.id)
        f = next(iter(_answers(entry, "forward", 1)), None)
        r = next(iter(_answers(entry, "reverse", 1)), None)
        if f in FLIP:
            fwd, fwd_a = fwd + 1, fwd_a + (f == "A")
        if r in FLIP:
            rev, rev_a = rev + 1, rev_a + (r == "A")
        if f in FLIP and r in FLIP:
            both, consistent = both + 1, consistent + (f == FLIP[r])
    return {
        "pairs_both_directions": both, "consistent": consistent, "consistent_pct": _pct(consistent, both),
        "forward_answers": fwd, "forward_A": fwd_a, "forward_A_pct": _pct(fwd_a, fwd),
        "reverse_answers": rev, "reverse_A": rev_a, "reverse_A_pct": _pct(rev_a, rev),
        "first_shown_pct": _pct(fwd_a + rev_a, fwd + rev),
    }


def majority_voting(pairs: list[Pair], judgments: Mapping[str, Any], ks: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Accuracy of a majority vote over the first K samples, K = 1, 3, 5, ... up to the most samples drawn.

    The rule, per pair and per direction separately (as the official scorer treats the two directions
    as independent judgements): take the first K stored samples of that direction (all of them if
    fewer were drawn, ``directions_with_k`` says how many had K), drop empty answers, flip reverse
    answers back to the original order, and vote. The answer given strictly more often than any other
    is the direction's verdict; a tie gives no verdict and, like a missing judgement, leaves the
    denominator. A non-A/B answer is a candidate like any other and is wrong if it wins, so K = 1 is
    exactly the official accuracy.
    """
    chosen = {p.id: p.chosen for p in pairs}
    if ks is None:
        most = max((len(e.get(d) or []) for pid, e in judgments.items() if pid in chosen and isinstance(e, Mapping)
                    for d in ("forward", "reverse")), default=1)
        ks = list(range(1, max(most, 1) + 1, 2))
    rows = []
    for k in ks:
        correct = counted = ties = full = 0
        for pid, entry in judgments.items():
            if pid not in chosen:
                continue
            for direction, flip in (("forward", False), ("reverse", True)):
                samples = entry.get(direction) if isinstance(entry, Mapping) else None
                full += isinstance(samples, list) and len(samples) >= k
                answers = [FLIP.get(a, a) if flip else a for a in _answers(entry, direction, k)]
                ranked = Counter(answers).most_common(2)
                if not ranked:
                    continue
                if len(ranked) == 2 and ranked[0][1] == ranked[1][1]:
                    ties += 1
                    continue
                counted += 1
                correct += ranked[0][0] == chosen[pid]
        rows.append({"k": k, "correct": correct, "judgements": counted, "accuracy": _pct(correct, counted),
                     "tied_directions": ties, "directions_with_k": full})
    return rows


# --- benchmark-only sections -------------------------------------------------------------------


def _rating_agreement(pairs: list[Pair]) -> dict[str, Any]:
    """Generation tasks: three 1-6 ratings per pair. Each rating is a vote (see ``RATING_VOTE``);
    agreement is pooled over pairs: agreeing pairs of voting annotators / all pairs of voting annotators."""
    tally = _Tally()
    for p in pairs:
        ratings = p.human_annotations
        if not isinstance(ratings, list) or not ratings or any(_rating(r) is None for r in ratings):
            tally.unreadable += ratings not in (None, [])
            continue
        tally.add([RATING_VOTE.get(_rating(r)) for r in ratings], p.chosen)
    return {"kind": "ratings", **tally.result()}


def _reasoning_agreement(pairs: list[Pair]) -> dict[str, Any]:
    """Reasoning pairs: ``response_a_ratings`` / ``response_b_ratings`` hold per-annotator letter grades.

    Two agreements are reported. ``agreement_pct`` (preference, comparable with the generation tasks):
    where the same annotators graded both responses, annotator i votes for the better-graded response
    (equal grades: no vote), pooled pairwise as for ratings. ``grades``: exact agreement of the letters
    annotators gave one response, pooled over all graded responses; it also covers the pairs where only
    one response was graded.
    """
    tally = _Tally()
    grade_pairs = grade_agree = graded = one_graded = 0
    letters = {"chosen": Counter(), "rejected": Counter()}
    for p in pairs:
        h = p.human_annotations
        if not isinstance(h, Mapping):
            tally.unreadable += h is not None
            continue
        ga, gb = _grades(h.get("response_a_ratings")), _grades(h.get("response_b_ratings"))
        if ga is None or gb is None:
            tally.unreadable += 1
            continue
        for side, grades in (("A", ga), ("B", gb)):
            if grades:
                graded += 1
                letters["chosen" if side == p.chosen else "rejected"].update(grades)
                for x, y in combinations(grades, 2):
                    grade_pairs, grade_agree = grade_pairs + 1, grade_agree + (x == y)
        if ga and gb and len(ga) == len(gb):
            tally.add([None if x == y else ("A" if GRADE_RANK[x] < GRADE_RANK[y] else "B") for x, y in zip(ga, gb)],
                      p.chosen)
        elif ga or gb:
            one_graded += 1
    return {"kind": "grades", **tally.result(), "pairs_one_response_graded": one_graded,
            "grades": {"graded_responses": graded, "annotator_pairs": grade_pairs, "agreeing": grade_agree,
                       "agreement_pct": _pct(grade_agree, grade_pairs),
                       "letters_chosen": dict(sorted(letters["chosen"].items())),
                       "letters_rejected": dict(sorted(letters["rejected"].items()))}}


class _Tally:
    """Pooled pairwise agreement of annotator votes (None = abstained), plus agreement with the label."""

    def __init__(self) -> None:
        self.pairs = self.voted2 = self.annotator_pairs = self.agreeing = 0
        self.votes = self.with_label = self.unanimous = self.unreadable = 0

    def add(self, votes: list[str | None], chosen: str) -> None:
        cast = [v for v in votes if v]
        self.pairs += 1
        self.voted2 += len(cast) >= 2
        self.votes += len(cast)
        self.with_label += sum(v == chosen for v in cast)
        self.unanimous += len(cast) == len(votes) >= 2 and len(set(cast)) == 1
        for x, y in combinations(cast, 2):
            self.annotator_pairs, self.agreeing = self.annotator_pairs + 1, self.agreeing + (x == y)

    def result(self) -> dict[str, Any]:
        return {"pairs_annotated": self.pairs, "pairs_2plus_votes": self.voted2,
                "annotator_pairs": self.annotator_pairs, "agreeing": self.agreeing,
                "agreement_pct": _pct(self.agreeing, self.annotator_pairs),
                "votes": self.votes, "votes_matching_label": self.with_label,
                "label_agreement_pct": _pct(self.with_label, self.votes),
                "unanimous_pairs": self.unanimous, "unanimous_pct": _pct(self.unanimous, self.pairs),
                "unreadable": self.unreadable}


def _win_rates(pairs: list[Pair]) -> list[dict[str, Any]]:
    """Each appearance of a generator in a labelled pair is a win or a loss (a same-model pair: one each)."""
    wins, losses = Counter(), Counter()
    for p in pairs:
        a, b = p.model_a or "(unnamed)", p.model_b or "(unnamed)"
        winner, loser = (a, b) if p.chosen == "A" else (b, a)
        wins[winner] += 1
        losses[loser] += 1
    rows = [{"model": m, "appearances": wins[m] + losses[m], "wins": wins[m], "losses": losses[m],
             "win_rate_pct": _pct(wins[m], wins[m] + losses[m])} for m in set(wins) | set(losses)]
    return sorted(rows, key=lambda r: (-r["win_rate_pct"], -r["appearances"], r["model"]))


def _image_presence(pairs: list[Pair]) -> dict[str, Any]:
    one = [p for p in pairs if _has_image(p.response_a) != _has_image(p.response_b)]
    with_img = sum(_has_image(_chosen(p)) for p in one)
    return {"pairs_one_image": len(one), "chosen_has_image": with_img, "chosen_has_image_pct": _pct(with_img, len(one))}


def _overall(tasks: Mapping[str, Any]) -> dict[str, Any]:
    """Pooled human agreement (all tasks, and generation tasks only) and micro-averaged judge accuracy."""
    def pool(names: list[str]) -> dict[str, Any]:
        ap = sum(tasks[t]["human_agreement"]["annotator_pairs"] for t in names)
        ag = sum(tasks[t]["human_agreement"]["agreeing"] for t in names)
        return {"tasks": names, "annotator_pairs": ap, "agreeing": ag, "agreement_pct": _pct(ag, ap)}

    same = sum(t["same_model"]["same"] for t in tasks.values())
    pairs = sum(t["pairs"] for t in tasks.values())
    judges = sorted({j for t in tasks.values() for j in t["judges"]})
    return {
        "pairs": pairs,
        "same_model": {"same": same, "different": pairs - same, "pairs": pairs, "same_pct": _pct(same, pairs)},
        "human_agreement": pool(list(tasks)),
        "human_agreement_generation": pool([t for t in tasks if t != "reasoning"]),
        "judges": {j: overall([tasks[t]["judges"][j]["accuracy"] for t in tasks if j in tasks[t]["judges"]])
                   for j in judges},
    }


# --- small helpers -----------------------------------------------------------------------------


def _pct(num: int, den: int) -> float:
    return 100.0 * num / den if den else math.nan


def _category(p: Pair) -> str:
    c = p.prompt_metadata.get("category")
    if isinstance(c, (list, tuple)):  # MindCube tags its prompts with a list of settings
        c = "/".join(map(str, c))
    return NO_CATEGORY if c is None or c == "" else str(c)


def _has_image(content: list[list[str]]) -> bool:
    return any(item[0] == "image" for item in content)


def _chosen(p: Pair) -> list[list[str]]:
    return p.response_a if p.chosen == "A" else p.response_b


def _rating(r: Any) -> int | None:
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not float(r).is_integer() or not 1 <= r <= 6:
        return None
    return int(r)


def _grades(value: Any) -> list[str] | None:
    """A list of letter grades (empty when that response was not graded); None when malformed."""
    if value is None:
        return []
    if not isinstance(value, list) or any(not isinstance(g, str) or g.upper() not in GRADE_RANK for g in value):
        return None
    return [g.upper() for g in value]


# --- writing -----------------------------------------------------------------------------------


def write_diagnostics(result: Mapping[str, Any], out_dir: Path | None, json_out: Path | None) -> None:
    """``report.md`` and PNG figures in ``out_dir``, and/or every number as JSON (NaN written as null)."""
    if json_out is not None:
        write_text(Path(json_out), json.dumps(strict(result), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    if out_dir is not None:
        from analysis.diagnostics_report import draw_figures, report_markdown

        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        figures = draw_figures(result, out_dir)
        write_text(out_dir / "report.md", report_markdown(result, figures))

