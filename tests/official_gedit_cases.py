"""Hand-made GEdit-Bench items and canned grader replies (data only, no bon import).

tests/test_official_gedit.py scores them with bon's official metric through ``grader=replay:``; the
expected values in tests/official_gedit_expected.json came from running the official evaluation code
(stepfun-ai/Step1X-Edit at commit 570eba6ebda0c45c013983a483afbf2fd12bfcbc: GEdit-Bench's
``test_gedit_score.process_single_item`` with VIEScore, then ``calculate_statistics.analyze_scores``) on the
same items, its HTTP calls answered with the same replies (harness:
benchmarks/official_harness/gedit_official.py).

Each case: the item's own fields, the source image size, and per question (``sc``, ``pq``) the replies to
the 1st, 2nd, ... time it is asked (the last one answers any later attempt; None: the call failed).
A reply with no JSON on a re-ask is the official random guess: the harness fixes it at GUESS.

:func:`restart_items` are replies that read but give no usable score (the official ``evaluate`` raises and
``process_single_item`` starts a new evaluation, its tries afresh), and keys that appear in both languages.
"""

from __future__ import annotations

import json

GUESS = 4
CATEGORIES = ("background_change", "color_alter", "text_change")


def sc(*scores, why: str = "the edit is visible") -> str:
    return json.dumps({"score": list(scores), "reasoning": why})


REPLIES: list[tuple[str, dict]] = [
    ("plain-json", {"sc": [sc(8, 6)], "pq": [sc(9, 7)]}),
    ("bare-list", {"sc": ["[6, 0]"], "pq": [sc(8, 8)]}),
    ("score-number", {"sc": [sc(7, 9)], "pq": ['{"score": 8}']}),
    ("delimiters", {"sc": ['||V^=^V||{"score": [7, 9], "reasoning": "ok"}||V^=^V||'], "pq": [sc(6, 6)]}),
    ("bare-number", {"sc": [sc(5, 9)], "pq": ["7"]}),
    ("fenced", {"sc": ['```json\n{\n  "score": [5, 5],\n  "reasoning": "fine"\n}\n```'], "pq": [sc(9, 9)]}),
    ("prose", {"sc": ['Here you go: {"reasoning": "close", "score": [3, 10]} as asked.'], "pq": [sc(10, 8)]}),
    ("unquoted-key", {"sc": ["{score: 6}"], "pq": [sc(7, 7)]}),
    ("floats", {"sc": [sc(7.5, 8.0)], "pq": [sc(6.5, 9)]}),
    ("reask-both", {"sc": [sc(9, 9), sc(4, 4)], "pq": ["no idea", sc(7, 8)]}),
    ("failed-call", {"sc": [None, sc(6, 8)], "pq": [sc(5, 5)]}),
    ("guess", {"sc": ["I cannot rate this edit."], "pq": [sc(8, 9)]}),
    ("min-of-three", {"sc": [sc(9, 2, 7)], "pq": [sc(8, 6, 7)]}),
    ("out-of-range", {"sc": [sc(12, 11)], "pq": [sc(9, 10)]}),
    ("zero", {"sc": [sc(0, 5)], "pq": [sc(9, 9)]}),
    ("slash-ten", {"sc": ["8/10", sc(8, 7)], "pq": [sc(7, 6)]}),
    ("broken-json", {"sc": ['{"score": [6, 0], "reasoning": "cut off}', sc(6, 1)], "pq": [sc(8, 8)]}),
    ("list-no-space", {"sc": ["[7,3]"], "pq": [sc(9, 4)]}),
    ("list-of-three", {"sc": ["[7, 3, 5]", sc(2, 9)], "pq": [sc(9, 9)]}),
    ("spaced-number", {"sc": [sc(6, 6)], "pq": [" 7 "]}),
    ("guess-both", {"sc": ["Looks good.", "Still no score."], "pq": ["Nice.", sc(5, 6)]}),
    ("single-quotes", {"sc": ["{'score': [4, 4]}", sc(3, 5)], "pq": [sc(6, 7)]}),
    ("pq-guess", {"sc": [sc(10, 10)], "pq": ["The image is sharp.", "Very sharp."]}),
    ("score-key-missing", {"sc": ['{"reasoning": "no number"}', sc(8, 5)], "pq": [sc(8, 8)]}),
]


def items() -> list[dict]:
    """The 24 cases over 3 categories and 2 languages; Intersection_exist false for every fourth."""
    out = []
    for i, (key, replies) in enumerate(REPLIES):
        out.append({"key": key, "task_type": CATEGORIES[i % 3], "instruction": f"Edit {i}: make the sign say OPEN\nand keep the rest",
                    "instruction_language": "en" if i % 2 == 0 else "cn", "Intersection_exist": i % 4 != 3,
                    "size": [40 + i, 30 + (i * 7) % 13], "replies": replies})
    return out


def example_items() -> list[dict]:
    """The issue's example: category A = [2, 2, 2] and B = [8] (SC = PQ, so overall = SC) give 5.0."""
    scores = [("a1", "color_alter", 2), ("a2", "color_alter", 2), ("a3", "color_alter", 2), ("b1", "text_change", 8)]
    return [{"key": k, "task_type": cat, "instruction": "Make it blue.", "instruction_language": "en", "Intersection_exist": True,
             "size": [20 + n, 16], "replies": {"sc": [sc(v, v)], "pq": [sc(v, 10)]}} for n, (k, cat, v) in enumerate(scores)]


RESTART_CATEGORIES = ("subject-add", "style_change")
# (key, language, category, Intersection_exist, replies); the official flow of each is in its comment
RESTARTS: list[tuple[str, str, str, bool, dict]] = [
    # a key-repaired JSON without score: new evaluation; its first try reads "six." as nothing, no guess
    ("repaired-no-score", "en", "subject-add", True, {"sc": ["{reasoning: the sign is missing}", "I would say six.", sc(6, 9)],
                                                      "pq": [sc(8, 8)]}),
    ("score-string", "cn", "subject-add", True, {"sc": [sc(8, 8)], "pq": ['{"score": "7"}', "7/10", sc(7, 9)]}),
    ("empty-list", "en", "style_change", True, {"sc": ['{"score": [], "reasoning": "none"}', sc(5, 7)], "pq": [sc(6, 9)]}),
    ("negative", "cn", "style_change", True, {"sc": [sc(-1, 5), sc(5, 5)], "pq": [sc(8, 8)]}),
    ("null-json", "en", "subject-add", False, {"sc": ["||V^=^V||null||V^=^V||", sc(9, 7)], "pq": [sc(6, 6)]}),
    # a JSON false is the reader's "not read": asked again in the same evaluation, so a guess
    ("false-json", "cn", "subject-add", False, {"sc": ["||V^=^V||false||V^=^V||", "no score", sc(3, 3)], "pq": [sc(7, 7)]}),
    ("twice-restarted", "en", "style_change", True, {"sc": ['{"score": "high"}', "{reasoning: still none}", "eight", sc(8, 7)],
                                                     "pq": [sc(9, 9)]}),
    ("restart-then-guess", "cn", "style_change", False, {"sc": ['{"score": "7"}', "no", "still no"], "pq": [sc(5, 6)]}),
    # SC unreadable keeps the evaluation asking: PQ's unusable first reply is replaced, no new evaluation
    ("unusable-while-unread", "en", "subject-add", True, {"sc": ["no json", sc(6, 6)], "pq": ['{"score": []}', sc(9, 9)]}),
    ("rate-limit-text", "cn", "subject-add", True, {"sc": ["rate_limit_exceeded", sc(7, 7)], "pq": [sc(7, 8)]}),
    ("unicode-digits", "cn", "style_change", True, {"sc": ["[\u0663, 4]", sc(4, 6)], "pq": [sc(7, 7)]}),
    # never a usable score: every evaluation up to process_single_item's limit, then the item is left out
    ("never-usable", "en", "style_change", True, {"sc": ['{"score": "7"}'], "pq": [sc(8, 8)]}),
    # one key, both languages, different replies
    ("shared-key", "en", "subject-add", True, {"sc": [sc(9, 8)], "pq": [sc(7, 7)]}),
    ("shared-key", "cn", "subject-add", True, {"sc": ["{reasoning: unclear}", sc(3, 4)], "pq": [sc(6, 5)]}),
    ("shared-key-2", "en", "style_change", True, {"sc": [sc(6, 6)], "pq": [sc(6, 6)]}),
    ("shared-key-2", "cn", "style_change", True, {"sc": [sc(2, 2)], "pq": [sc(9, 9)]}),
]


def restart_items() -> list[dict]:
    """The re-ask-after-a-raise cases and the keys in both languages (each language covers both categories,
    with and without Intersection_exist)."""
    return [{"key": key, "task_type": cat, "instruction": f"Add a red hat ({lang})", "instruction_language": lang,
             "Intersection_exist": inter, "size": [24 + n, 18 + n % 5], "replies": replies}
            for n, (key, lang, cat, inter, replies) in enumerate(RESTARTS)]
