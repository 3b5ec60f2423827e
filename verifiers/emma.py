"""``emma``: EMMA's answer checking (multimodal reasoning), by default exactly as EMMA's own evaluation code.

``metric`` chooses the rule:

- ``official`` (default): the rule-based mode of EMMA's ``evaluation/evaluate.py`` (EMMA-Bench/EMMA). The
  answer is the first that applies of: the whole reply is a letter A-H (any case), or starts with ``X:``
  / ``X.`` (upper case); the whole reply reads as a number (Python ``float``); the last ``\\boxed{...}``
  (braces balanced; its last ``\\text{...}`` if it holds one); the text after the last "final answer
  is" / "correct answer is" / "answer should be" / "answer is" / "answer:" (the first of these phrases
  found, in that order; lower-cased) up to the end of its line and its first period; else nothing.
  It is correct when it equals the reference answer or the correct option's text (the answer itself for
  open-ended problems) by the official ``is_equal``: the same lower-cased string; or ``word2number``
  reads it as the reference; or ``latex2sympy2`` reads both as numbers equal to 2 decimals, or their
  difference simplifies to 0. Needs ``pip install '.[emma]'`` (``latex2sympy2``, ``word2number``,
  EMMA's own dependencies). Where the official code itself would stop with an error on an odd reply,
  bon counts no match.
- ``official-judge``: the official LLM-judge mode (``--gpt_eval``): one user message, the official
  grading instructions followed by the reply and the reference, no sampling settings and no token
  limit (the API's defaults); correct when the grader's whole answer is ``Correct`` (any case),
  wrong for any other answer. The instructions stay outside bon: ``judge_prompt`` names a checkout's
  ``evaluation/utils.py`` (its ``score_demo_prompt`` is read, not run) or a text file. ``grader`` /
  ``model``: the grader (default ``{backend: openai, model: chatgpt-4o-latest}``, the official one);
  a failed call is a missing score (transient when a rerun may succeed).
- ``bon``: bon's own, more lenient rule (kept for comparison): the last ``\\boxed{...}``, ``Answer:``
  line, "the answer is" phrase, a short reply as a whole, else an option mark ``(C)`` or the last number;
  multiple choice compares option letters (or the option's text), open-ended answers compare as
  normalised strings or as numbers (units, separators, ``%``, fractions, scientific notation, spelled
  numbers; 2 decimals, 2 significant figures below 0.1, or within ``rel_tol``). Options ``rel_tol``
  (default 0) and ``use_generator_answer`` (the ``vlm-answers`` generator's ``final_answer`` when the
  text yields nothing) apply to this metric only.

Score 1.0 for a correct answer, 0.0 otherwise; a prompt without a reference answer (``metadata.answer``)
is a missing score. :meth:`EmmaVerifier.aggregate` reports as EMMA's ``calculate_acc.py``: accuracy
overall, per subject, per question type, per category within each subject (Coding's ``;``-separated
categories each counted) and per task.

``bon score --verifier emma --items FILE.jsonl`` reads items in EMMA's fields (``pid``, ``question``,
``options``, ``answer``, ``type``, ``context``, ``subject``, ``category``, ``task``) plus ``response``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from bon.content import Candidate, Content, Prompt, safe_join
from bon.errors import BonError, first_line
from bon.plugins import Score, Verifier
from verifiers._grader import grader_modules

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ANSWER_LINE = re.compile(r"(?im)^[\s>*#_\-]*(?:the\s+)?(?:final\s+)?answer\s*\**\s*[:：]\s*\**\s*(.+?)\s*$")
ANSWER_IS = re.compile(r"(?i)\b(?:final|correct)?\s*answer\s+(?:is|should\s+be|would\s+be)\s*[:：]?\s*(.+?)(?:\.\s|\.$|\n|$)")
LETTER_MARK = re.compile(r"(?:\(([A-Z])\)|\boption\s+([A-Z])\b)", re.IGNORECASE)
NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")
WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
         "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
         "hundred": 100}


def boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}``, braces balanced."""
    found = None
    start = text.find("\\boxed{")
    while start != -1:
        i, depth = start + len("\\boxed{"), 1
        j = i
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            found = text[i : j - 1]
        start = text.find("\\boxed{", j if depth == 0 else start + 1)
    return found


def unwrap_latex(s: str) -> str:
    s = s.strip()
    for _ in range(3):
        s = re.sub(r"\\(?:text|mathrm|textbf|mathbf|operatorname)\{([^{}]*)\}", r"\1", s)
    return s.strip().strip("$").strip()


def extract(text: str, multiple_choice: bool) -> tuple[str | None, str]:
    """``(answer, rule)``; ``(None, "none")`` when no rule finds one."""
    text = (text or "").strip()
    if not text:
        return None, "none"
    b = boxed(text)
    if b is not None and b.strip():
        return unwrap_latex(b), "boxed"
    lines = ANSWER_LINE.findall(text)
    if lines and lines[-1].strip():
        return unwrap_latex(lines[-1]), "answer line"
    phrases = ANSWER_IS.findall(text)
    if phrases and phrases[-1].strip():
        return unwrap_latex(phrases[-1]), "answer is"
    if "\n" not in text and len(text) <= 40:
        return unwrap_latex(text), "whole reply"
    if multiple_choice:
        marks = LETTER_MARK.findall(text)
        if marks:
            return (marks[-1][0] or marks[-1][1]).upper(), "option mark"
        return None, "none"
    nums = NUMBER.findall(text)
    if nums:
        return nums[-1], "last number"
    return None, "none"


def normalise(s: str) -> str:
    s = unicodedata.normalize("NFKC", unwrap_latex(str(s))).lower()
    s = s.replace("\\%", "%").replace("\\,", "").replace("\\ ", "").replace("\\!", "")
    s = re.sub(r"\s+", "", s)
    return s.rstrip(".").strip()


def as_letter(answer: str, options: list[str]) -> str | None:
    """The option letter an answer names, or None."""
    n = max(len(options), 1)
    a = unwrap_latex(answer).strip()
    m = re.fullmatch(r"(?i)(?:option\s+|choice\s+)?[(\[]?\s*([A-Z])\s*[)\]]?[.:]?", a)
    if m and (not options or m.group(1).upper() in LETTERS[:n]):
        return m.group(1).upper()
    m = re.match(r"(?i)^(?:option\s+)?(?:\(([A-Z])\)|\[([A-Z])\]|([A-Z])[.:)])\s*\S", a)
    if m:
        letter = next(g for g in m.groups() if g).upper()
        if letter in LETTERS[:n]:
            return letter
    hits = [LETTERS[k] for k, o in enumerate(options) if normalise(o) and normalise(o) == normalise(a)]
    return hits[0] if len(hits) == 1 else None


def as_number(s: str) -> float | None:
    """A number from an answer string (units, separators, %, fractions, scientific notation, words)."""
    t = unwrap_latex(str(s)).strip().lower().replace("−", "-")
    t = t.replace("\\%", "%").replace("\\cdot", "*").replace("\\times", "*").replace("×", "*")
    m = re.fullmatch(r"\s*\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}\s*", t)
    if m:
        a, b = as_number(m.group(1)), as_number(m.group(2))
        return a / b if a is not None and b not in (None, 0) else None
    m = re.match(r"\s*([-+]?\d+(?:\.\d+)?)\s*\*\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?", t)
    if m:
        return float(m.group(1)) * 10 ** int(m.group(2))
    m = re.match(r"\s*([-+]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\b", t)
    if m and float(m.group(2)) != 0:
        return float(m.group(1)) / float(m.group(2))
    m = re.match(r"\s*([-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[-+]?\d+)?)", t)
    if m:
        try:
            return float(m.group(1).replace(",", ""))
        except ValueError:
            return None
    word = re.fullmatch(r"\s*([a-z]+)\s*", t)
    if word and word.group(1) in WORDS:
        return float(WORDS[word.group(1)])
    return None


def same_number(a: float, b: float, rel_tol: float) -> bool:
    """EMMA's rule (equal to 2 decimals); for a reference below 0.1 in size, to 2 significant figures
    instead, since 2 decimals would call 0.001 and 0.004 equal; or within ``rel_tol``."""
    if rel_tol > 0 and math.isclose(a, b, rel_tol=rel_tol, abs_tol=0.0):
        return True
    if abs(b) >= 0.1 or b == 0:
        return round(a, 2) == round(b, 2)
    return float(f"{a:.2g}") == float(f"{b:.2g}")


def judge(answer: str | None, reference: str, options: list[str], multiple_choice: bool, rel_tol: float = 0.0) -> tuple[bool, dict]:
    """Whether ``answer`` matches ``reference``; the second value says how it was read."""
    if answer is None:
        return False, {"read_as": None}
    if multiple_choice:
        letter = as_letter(answer, options)
        ref = as_letter(reference, options) or reference.strip().upper()
        return letter is not None and letter == ref, {"read_as": letter}
    if normalise(answer) == normalise(reference):
        return True, {"read_as": normalise(answer), "match": "string"}
    a, r = as_number(answer), as_number(reference)
    if a is not None and r is not None:
        return same_number(a, r, rel_tol), {"read_as": a, "reference_number": r, "match": "number"}
    return False, {"read_as": normalise(answer), "match": "string"}


# --- the official rule (EMMA-Bench/EMMA evaluation/evaluate.py and utils.py) ------------------------------

METRICS = ("official", "official-judge", "bon")
OFFICIAL_LETTERS = "ABCDEFGH"  # the letters the official rule recognises as a whole reply
ANSWER_FLAGS = ("final answer is", "correct answer is", "answer should be", "answer is", "answer:")
TEXT_IN_BOX = re.compile(r"\\text\{(.*?)\}")
TYPES = {"multiple choice": "Multiple Choice", "open-ended": "Open-ended"}


def _reads_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def official_boxes(text: str) -> list[str]:
    """Every ``\\boxed{...}`` content left to right (braces balanced; one not closed ends the search)."""
    opener, found, at = "\\boxed{", [], 0
    while (start := text.find(opener, at)) >= 0:
        depth, j = 0, start + len(opener)
        while j < len(text) and not (text[j] == "}" and depth == 0):
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        if j == len(text):
            return found
        found.append(text[start + len(opener) : j])
        at = j + 1
    return found


def official_extract(reply: str) -> tuple[str, str]:
    """``(answer, rule)`` as the official ``fast_extract_answer``; ``("", "none")`` when no rule applies."""
    reply = reply.strip()
    for letter in OFFICIAL_LETTERS:
        if reply.upper() == letter or reply.startswith((f"{letter}:", f"{letter}.")):
            return letter, "letter"
    if _reads_as_float(reply):
        return reply, "number"
    boxes = official_boxes(reply) if "boxed{" in reply else []
    if boxes:
        texts = TEXT_IN_BOX.findall(boxes[-1])
        return (texts[-1].strip(), "boxed text") if texts else (boxes[-1].strip(), "boxed")
    lowered = reply.lower()
    for flag in ANSWER_FLAGS:
        if flag in lowered:
            return lowered.split(flag)[-1].strip().split("\n")[0].split(".")[0], flag
    return "", "none"


def official_equal(answer: str, truth: str) -> str | None:
    """How ``answer`` equals ``truth`` by the official ``is_equal`` (None: it does not)."""
    from latex2sympy2 import latex2sympy
    from sympy import simplify
    from word2number import w2n

    a, t = answer.lower(), truth.lower()
    if a.strip() == t.strip():
        return "string"
    try:
        if str(w2n.word_to_num(a)).strip() == t.strip():
            return "number words"
    except Exception:  # noqa: BLE001 - the official code catches ValueError; any other error is no match here
        pass
    try:
        a_expr, t_expr = latex2sympy(a), latex2sympy(t)
        if round(float(a_expr.evalf()), 2) == round(float(t_expr.evalf()), 2):
            return "latex 2 decimals"
        if simplify(a_expr - t_expr) == 0:
            return "latex symbolic"
    except Exception:  # noqa: BLE001 - an unparseable or symbolic expression is no match, as officially
        pass
    return None


def official_verdict(reply: str | None, answer: str, truth_text: str) -> dict[str, Any]:
    """The official verdict on one reply: its extraction, the rule and how it matched (if it did)."""
    if not reply:
        return {"extracted": None, "rule": "no reply", "correct": False, "match": None}
    extracted, rule = official_extract(reply)
    match = official_equal(extracted, answer)
    how = match and f"answer ({match})"
    if match is None:
        match = official_equal(extracted, truth_text)
        how = match and f"option text ({match})"
    return {"extracted": extracted, "rule": rule, "correct": match is not None, "match": how}


def read_judge_prompt(path: Any, who: str) -> str:
    """The official grading instructions: ``score_demo_prompt`` of a checkout's ``evaluation/utils.py``
    (read with :mod:`ast`, never run) or a text file's whole text."""
    import ast

    if not path:
        raise BonError(f"{who}: metric official-judge needs judge_prompt: the official checkout's evaluation/utils.py "
                       "(or a text file with the grading instructions)")
    file = Path(str(path)).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BonError(f"{who}: judge_prompt {file}: cannot read ({exc.strerror or exc})") from None
    if file.suffix != ".py":
        return text
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise BonError(f"{who}: judge_prompt {file}: not valid Python") from None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "score_demo_prompt" for t in node.targets)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    raise BonError(f"{who}: judge_prompt {file}: no score_demo_prompt string in it")


def _require_official_libraries(who: str) -> None:
    try:
        import latex2sympy2  # noqa: F401
        import word2number  # noqa: F401
    except ImportError as exc:  # absent, or broken: latex2sympy2 pins antlr4 4.7.2, which imports typing.io
        raise BonError(f"{who}: metric official needs latex2sympy2 and word2number, EMMA's own dependencies "
                       f"(pip install '.[emma]'; import failed: {first_line(exc)})") from None


# --- items in EMMA's own fields (bon score) -------------------------------------------------------


def item_metadata(item: dict[str, Any], who: str) -> dict[str, Any]:
    """Prompt metadata from an EMMA row, checked: one line naming the item and field when it is wrong."""
    pid = item.get("pid")
    if pid is None or str(pid).strip() == "":
        raise BonError(f"{who}: an item has no pid")
    where = f"item {pid}"
    for key in ("question", "answer", "type"):
        if item.get(key) is None or str(item[key]).strip() == "":
            raise BonError(f"{where}: field {key!r} is missing")
    qtype = TYPES.get(str(item["type"]).strip().lower())
    if qtype is None:
        raise BonError(f"{where}: field 'type' is {item['type']!r}, expected Multiple Choice or Open-ended")
    options = item.get("options") or []
    if not isinstance(options, list):
        raise BonError(f"{where}: field 'options' must be a list, got {type(options).__name__}")
    options = [str(o) for o in options]
    answer = str(item["answer"]).strip()
    meta: dict[str, Any] = {"source": "emma", "benchmark_id": str(pid), "type": qtype, "answer": answer, "options": options,
                            **{k: str(item.get(key) or "") for k, key in
                               (("subject", "subject"), ("category", "category"), ("task_name", "task"), ("context", "context"))}}
    if qtype == "Multiple Choice":
        if not options:
            raise BonError(f"{where}: field 'options' is missing (a Multiple Choice item needs its options)")
        if len(answer) != 1 or not "A" <= answer.upper() < chr(ord("A") + len(options)):
            raise BonError(f"{where}: field 'answer' is {answer!r}, expected an option letter A-{chr(ord('A') + len(options) - 1)}")
        meta["answer_text"] = options[ord(answer.upper()) - ord("A")]
    return meta


def _official_truth_text(meta: dict[str, Any]) -> str:
    """The official ``gt_content``: the correct option's text, or the answer of an open-ended problem."""
    if str(meta.get("type", "")).lower() == "multiple choice" and meta.get("answer_text") is not None:
        return str(meta["answer_text"])
    return str(meta.get("answer", ""))  # open-ended, or no option to name (the official code would stop there)


def official_accuracy(scored: Sequence[tuple[Prompt, Score]]) -> dict[str, Any]:
    """EMMA's ``calculate_acc.py`` over the scored items; a failed score is a wrong answer (the official code
    counts every problem, one without a response as false: :attr:`EmmaVerifier.official_on_failure`), also
    counted in ``failed``."""
    tallies: dict[str, Any] = {"average": [0, 0], "subject": defaultdict(lambda: [0, 0]),
                               "question_type": defaultdict(lambda: [0, 0]),
                               "category": defaultdict(lambda: defaultdict(lambda: [0, 0])), "task": defaultdict(lambda: [0, 0])}

    def count(cell: list[int], correct: int) -> None:
        cell[0] += correct
        cell[1] += 1

    failed = 0
    for prompt, score in scored:
        failed += score.value is None
        meta, correct = prompt.metadata, int(score.value is not None and score.value >= 1.0)
        subject = str(meta.get("subject", ""))
        count(tallies["average"], correct)
        category = str(meta.get("category") or "")
        if category:
            names = [c.strip() for c in category.split(";")] if subject == "Coding" else [category]
            for name in names:
                count(tallies["category"][subject][name], correct)
        if meta.get("task_name"):
            count(tallies["task"][f"{subject}_{meta['task_name']}"], correct)
        count(tallies["subject"][subject], correct)
        count(tallies["question_type"][str(meta.get("type", "")).lower()], correct)

    def row(cell: list[int]) -> dict[str, Any]:
        return {"accuracy": cell[0] / cell[1] if cell[1] else 0, "correct": cell[0], "total": cell[1]}

    return {"average": row(tallies["average"]),
            **{key: {k: row(v) for k, v in tallies[key].items()} for key in ("subject", "question_type")},
            "category": {s: {c: row(v) for c, v in cats.items()} for s, cats in tallies["category"].items()},
            "task": {k: row(v) for k, v in tallies["task"].items()}, "failed": failed}


class EmmaVerifier(Verifier):
    plugin = "emma"
    version = 2
    # evaluate.py marks a problem without a response false and calculate_acc.py counts every problem: a
    # failed score is a wrong answer (the judge mode's failed call, where the official code stops, likewise)
    official_on_failure = "zero"

    @staticmethod
    def required_modules(options: dict[str, Any]) -> tuple[str, ...]:
        """Optional packages (bon.preflight): EMMA's own for metric official (extra ``emma``), a grader's for
        official-judge."""
        metric = options.get("metric", "official")
        if metric == "official":
            return ("latex2sympy2", "word2number")
        return grader_modules(options) if metric == "official-judge" else ()

    def __init__(self, name: str | None = None, metric: str = "official", rel_tol: float = 0.0,
                 use_generator_answer: bool = False, judge_prompt: str | None = None, grader: Any = None,
                 model: str | None = None, judge_max_tokens: int | None = None) -> None:
        self.name = name or self.plugin
        if metric not in METRICS:
            raise BonError(f"{self.name}: metric must be one of {', '.join(METRICS)}, got {metric!r}")
        self.metric = metric
        if float(rel_tol) < 0:
            raise BonError(f"{self.name}: rel_tol must not be negative, got {rel_tol}")
        self.rel_tol = float(rel_tol)
        self.use_generator_answer = bool(use_generator_answer)
        if metric != "bon" and (self.rel_tol or self.use_generator_answer):
            raise BonError(f"{self.name}: rel_tol and use_generator_answer belong to metric bon, not {metric}")
        if metric == "official":
            _require_official_libraries(self.name)
        self.judge_prompt = read_judge_prompt(judge_prompt, self.name) if metric == "official-judge" else None
        self.judge_prompt_path = str(judge_prompt) if judge_prompt else None
        self._grader_spec = (model, grader)
        self._grader: Any = None
        self.judge_max_tokens = int(judge_max_tokens) if judge_max_tokens else None

    def identity(self) -> dict[str, Any]:
        ident: dict[str, Any] = {"name": self.name, "plugin": self.plugin, "metric": self.metric}
        if self.metric == "bon":
            ident.update(rel_tol=self.rel_tol, use_generator_answer=self.use_generator_answer)
        if self.metric == "official-judge":
            import hashlib

            ident.update(judge_prompt=self.judge_prompt_path, judge_max_tokens=self.judge_max_tokens,
                         judge_prompt_sha256=hashlib.sha256(self.judge_prompt.encode()).hexdigest())
            if self._grader is not None:
                ident["grader"] = self._grader.identity()
        return ident

    def item_id(self, item: dict[str, Any]) -> str:
        return str(item.get("pid", ""))

    def read_item(self, item: dict[str, Any], base_dir: Any) -> tuple[Prompt, Candidate]:
        meta = item_metadata(item, self.name)
        pid = meta["benchmark_id"]
        if "response" not in item:
            raise BonError(f"item {pid}: field 'response' is missing (the reply to score; null for none)")
        for field in sorted(f for f in item if f.startswith("image") and isinstance(item[f], str) and item[f]):
            safe_join(Path(base_dir), item[field], f"item {pid}: {field}")  # EMMA's image_1..: only inside the items' folder
        reply = item["response"]
        if reply is not None and not isinstance(reply, str):
            raise BonError(f"item {pid}: field 'response' must be text or null, got {type(reply).__name__}")
        text = "\n".join(t for t in (meta["context"], str(item["question"])) if t)
        prompt = Prompt(pid, "reasoning", Content.of(text), meta)
        return prompt, Candidate(pid, 0, "response", 0, Content.of(reply) if reply else Content([]))

    def aggregate(self, scored: Sequence[tuple[Prompt, Score]]) -> dict[str, Any]:
        return {"metric": self.metric, **official_accuracy(scored)}

    def close(self) -> None:
        if self._grader is not None:
            self._grader.close()

    def score(self, prompt: Prompt, candidate: Candidate) -> Score:
        meta = prompt.metadata
        reference = meta.get("answer")
        if reference is None or str(reference).strip() == "":
            return Score(None, missing=f"{self.name}: prompt {prompt.id} has no reference answer (metadata.answer)")
        reference = str(reference).strip()
        if self.metric == "official":
            verdict = official_verdict(candidate.content.text, reference, _official_truth_text(meta))
            return Score(1.0 if verdict["correct"] else 0.0, {**verdict, "reference": reference, "type": meta.get("type")})
        if self.metric == "official-judge":
            return self._judge(prompt, candidate.content.text, reference)
        return self._bon_score(meta, candidate, reference)

    def _judge(self, prompt: Prompt, reply: str, reference: str) -> Score:
        """The official LLM-judge mode: an empty reply is wrong without asking."""
        from verifiers._grader import ApiGrader, GradingFailed, grader_from

        if not reply:
            return Score(0.0, {"judge_reply": None, "correct": False, "reference": reference})
        if self._grader is None:
            self._grader = grader_from(None, self._official_grader_spec(), {}, self.name)
        tokens = self.judge_max_tokens or (0 if isinstance(self._grader, ApiGrader) else 256)
        request = f"{self.judge_prompt.strip()}\nResponse: {reply}\nAnswer: {reference}\nCorrect_or_not:"
        try:
            said = self._grader.answer([[("text", request)]], max_new_tokens=tokens)[0]
        except GradingFailed as exc:
            return Score(None, missing=f"{self.name}: prompt {prompt.id}: {first_line(exc)}", transient=exc.transient)
        correct = str(said).strip().lower() == "correct"
        return Score(1.0 if correct else 0.0, {"judge_reply": said, "correct": correct, "reference": reference})

    def _official_grader_spec(self) -> Any:
        """The grader as the official code asks it: chatgpt-4o-latest through OpenAI's API, the API's own
        temperature (none sent) unless the user's ``grader`` mapping says otherwise."""
        model, grader = self._grader_spec
        if grader is not None and not isinstance(grader, dict):
            return grader  # a Grader object (tests, bon score's replay)
        spec = {"backend": "openai", "model": "chatgpt-4o-latest", **(grader or {})}
        if model:
            spec["model"] = model
        if spec["backend"] == "openai":
            spec.setdefault("temperature", None)
        return spec

    def _bon_score(self, meta: dict[str, Any], candidate: Candidate, reference: str) -> Score:
        """bon's own rule (``metric: bon``)."""
        options = [str(o) for o in meta.get("options") or []]
        qtype = str(meta.get("type") or ("Multiple Choice" if options else "Open-ended"))
        mc = qtype.lower().startswith("multiple")
        answer, rule = extract(candidate.content.text, mc)
        if answer is None and self.use_generator_answer and candidate.provenance.get("final_answer"):
            answer, rule = str(candidate.provenance["final_answer"]), "generator final_answer"
        correct, how = judge(answer, reference, options, mc, self.rel_tol)
        if not correct and mc and answer is not None and meta.get("answer_text"):
            alt, how2 = judge(answer, str(meta["answer_text"]), [], False, self.rel_tol)  # the option's text itself
            if alt:
                correct, how = True, {**how2, "match": "option text"}
        details = {"extracted": answer, "rule": rule, "reference": reference, "type": qtype, "correct": correct, **how}
        return Score(1.0 if correct else 0.0, details)
