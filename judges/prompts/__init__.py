"""Rubric prompts for LLM judges speaking MMRB2's pairwise protocol.

bon ships its own rubric per task (``frame.txt`` plus one criteria file per task, in its own
words, with the official structure: criteria, a 1-6 scale where 6 = A much better, a JSON answer
with ``better_response`` and ``score``). A user with a local MMRB2 checkout can run the official
prompts instead; they are read from that checkout, never shipped, since their text is CC BY-NC.
The template's ``sha256`` goes into the judge's identity, so a changed prompt is a new judgment.
"""

from __future__ import annotations

import ast
import hashlib
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bon.errors import BonError
from bon.plugins import PairwiseJudge
from bon.protocol import Comparison, Verdict
from bon.tasks import SCORER_NAMES, scorer_task
from judges.prompts.parse import parse_answer

__all__ = ["Template", "RubricJudge", "rubric", "load_official", "parse_answer", "BON_LABELS",
           "OFFICIAL_FILE"]

HERE = Path(__file__).resolve().parent
# Section markers placed before the prompt and each response; bon's rubric text refers to these.
BON_LABELS: tuple[str, str, str] = ("[PROMPT]", "[RESPONSE A]", "[RESPONSE B]")

# Where the official rubric lives in a checkout of facebookresearch/MMRB2, and the function per task.
OFFICIAL_FILE = "evaluate/generate_judgements/evaluator_apis/llm_judges/evaluation_prompts.py"
OFFICIAL_EVALUATOR = "api_pairwise_evaluator.py"  # beside it; holds the section markers
OFFICIAL_FUNCTIONS = {
    "image": "get_image_gen_prompt",
    "edit": "get_image_edit_prompt",
    "interleaved": "get_interleaved_prompt",
    "reasoning": "get_reasoning_prompt",
}


@dataclass(frozen=True)
class Template:
    """A task's rubric text and the markers that frame prompt and responses after it.

    ``sha256`` covers text and markers, the whole of what the judge sees besides the pair itself.
    """

    task: str
    text: str
    source: str  # "bon" or the official file it was read from
    labels: tuple[str, str, str] = BON_LABELS
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        blob = "\0".join((self.text, *self.labels)).encode("utf-8")
        object.__setattr__(self, "sha256", hashlib.sha256(blob).hexdigest())

    def render(self, prompt: list[list[str]], a: list[list[str]], b: list[list[str]]) -> list[list[str]]:
        """The judge's input as MMRB2 content items: rubric, then marked prompt, response A, response B."""
        p, ra, rb = self.labels
        return [["text", self.text], ["text", p], *prompt, ["text", ra], *a, ["text", rb], *b]

    def segments(self, c: Comparison) -> list[list[Any]]:
        """:meth:`render` of a comparison, images as ``ImageItem`` so each judge encodes them its own way."""
        def items(content: Any) -> list[list[Any]]:
            return [["text", it.text] if it.kind == "text" else ["image", it] for it in content]

        return self.render(items(c.prompt.content), items(c.a), items(c.b))


class RubricJudge(PairwiseJudge):
    """What the chat judges (``transformers-vlm``, ``openai-compatible``) share: a label from the model,
    a rubric per task (bon's, or the official one of an MMRB2 checkout), the switch to the official
    conditions, their part of the identity and reading the model's answer."""

    version = 1  # bump when the request built from a comparison changes

    def setup_rubric(self, model: str | None, name: str | None, official_prompts: str | Path | None,
                     official: bool | None) -> bool:
        """The label and where the rubric comes from; True under the official conditions. The templates
        load later (:meth:`load_rubric`), once the judge has checked its other options."""
        self.name = name or (f"{self.plugin}:{model}" if model else self.plugin)
        self.official_prompts = Path(official_prompts) if official_prompts else None
        self.official = bool(official_prompts) if official is None else bool(official)
        return self.official

    def load_rubric(self) -> None:
        self.templates = {t: rubric(t, self.official_prompts) for t in SCORER_NAMES}

    @classmethod
    def request_frame(cls, task: str, options: dict[str, Any]) -> dict[str, Any]:
        """What a request of this judge holds besides the pair (bon.costs prices it before the run): the
        rubric and markers, and how long a reply the rubric asks for (its criteria, each commented on)."""
        official = options.get("official_prompts")
        template = rubric(task, Path(official).expanduser() if official else None)
        criteria = sum(1 for line in template.text.splitlines() if line[:1].isdigit() and line[1:3] in (". ", ") "))
        return {"text": "".join((template.text, *template.labels)), "criteria": criteria, "source": template.source}

    def template(self, c: Comparison) -> Template:
        return self.templates[scorer_task(c.prompt.task)]

    def shared_identity(self) -> dict[str, Any]:
        """Plugin, version and rubric hashes, and the official conditions when they apply."""
        ident = {"plugin": self.plugin, "version": self.version,
                 "templates": {t: tpl.sha256 for t, tpl in self.templates.items()}}
        return {**ident, "conditions": "official"} if self.official else ident

    def read_answer(self, text: str) -> Verdict:
        """The verdict in the answer: the official JSON under official conditions, else bon's rubric answer."""
        from judges.prompts.official import verdict

        return (verdict if self.official else parse_answer)(text)


def rubric(task: str, official_dir: Path | None = None) -> Template:
    """bon's rubric for ``task`` (bon or scorer name), or the official one from a checkout if given."""
    task = scorer_task(task)
    if official_dir is not None:
        return load_official(official_dir, task)
    frame = string.Template((HERE / "frame.txt").read_text(encoding="utf-8"))
    part = (HERE / f"{task}.txt").read_text(encoding="utf-8")
    intro, sep, criteria = part.partition("\n---\n")
    if not sep:
        raise BonError(f"{HERE / f'{task}.txt'}: expected an intro line, a '---' line, then the criteria")
    text = frame.substitute(intro=intro.strip(), criteria=criteria.strip())
    return Template(task=task, text=text, source="bon")


def load_official(mmrb2_checkout: Path, task: str) -> Template:
    """Read the official rubric for ``task`` from a local MMRB2 checkout without running its code.

    ``mmrb2_checkout`` may be the repository root, the folder holding ``evaluation_prompts.py`` or
    that file itself. The text is the string literal the task's ``get_*_prompt`` function returns.
    """
    task = scorer_task(task)
    path = _official_file(Path(mmrb2_checkout))
    tree = _parse_py(path)
    name = OFFICIAL_FUNCTIONS[task]
    text = _returned_literal(tree, name)
    if text is None:
        raise BonError(f"{path}: no function {name}() returning a string literal; is this an MMRB2 checkout?")
    return Template(task=task, text=text, source=str(path), labels=_official_labels(path.parent))


def _official_file(root: Path) -> Path:
    if not root.exists():
        raise BonError(f"{root}: MMRB2 checkout not found")
    if root.is_file():
        candidates = [root]
    else:
        candidates = [root / OFFICIAL_FILE, root / "evaluation_prompts.py"]
        candidates += sorted(root.glob("**/llm_judges/evaluation_prompts.py"))[:1]
    for c in candidates:
        if c.is_file() and c.name == "evaluation_prompts.py":
            return c
    raise BonError(f"{root}: no official MMRB2 prompts here (looked for {OFFICIAL_FILE}); "
                   "point at a checkout of facebookresearch/MMRB2")


def _parse_py(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise BonError(f"{path}: cannot read the official prompts ({exc})") from None


def _returned_literal(tree: ast.Module, name: str) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Return) and isinstance(sub.value, ast.Constant) and isinstance(sub.value.value, str):
                    return sub.value.value
    return None


def _official_labels(folder: Path) -> tuple[str, str, str]:
    """The three ``[...]`` markers the official evaluator inserts, read from its source; bon's if absent.

    The official rubric text names its markers, so pairing it with bon's would show the judge
    labels the rubric never explains.
    """
    path = folder / OFFICIAL_EVALUATOR
    if not path.is_file():
        return BON_LABELS
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError):
        return BON_LABELS
    hits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "pairwise_evaluate":
            for sub in ast.walk(node):
                if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                    v = sub.value.strip()
                    if v.startswith("[") and v.endswith("]"):
                        hits.append((sub.lineno, sub.col_offset, v))
    found = list(dict.fromkeys(v for _, _, v in sorted(hits)))  # source order, first occurrence
    return (found[0], found[1], found[2]) if len(found) == 3 else BON_LABELS
