"""EMMA (multimodal reasoning): 2,788 problems in math, physics, chemistry and coding.

Source: the Hugging Face dataset ``luckychao/EMMA`` (also ``luckychao/EMMA-mini``, 400 problems), one
config per subject (``Math``, ``Physics``, ``Chemistry``, ``Coding``), split ``test``, as EMMA's own
``generate_response.py`` loads it. Columns: ``pid``, ``question`` (with ``<image_1>`` ... placeholders),
``options`` (list of strings; empty for open-ended problems), ``answer`` (a letter for multiple choice,
else the value), ``image_1`` ... ``image_5``, ``solution``, ``subject``, ``task``, ``category`` (the
skill, e.g. ``3D Spatial Simulation``), ``source``, ``type`` (``Multiple Choice`` | ``Open-ended``) and
``context``.

Prompt: ``id`` = ``pid``, ``task`` reasoning. The text is built as EMMA's ``build_query`` builds it: the
``context``, the question and, for multiple choice, one ``A: ...`` line per option, one per line; with
``prompt_config`` (a checkout's ``configs/gpt.yaml``) the official templates and the instruction of
``strategy`` (``CoT``, default, or ``Direct``) give the exact official text, else the generator's
``instruction`` says how to answer. As the official model wrappers do, each ``<image_k>`` is replaced by
that image and the text between them is kept as it is; an image the text never names is not shown (its
number is listed in ``metadata.unshown_images``). Metadata: ``source`` ``emma``, ``benchmark_id``,
``category``, ``subject``, ``task_name`` (EMMA's ``task``), ``type``, ``answer`` (the reference the
``emma`` verifier checks), ``options``, ``answer_text`` (the correct option's text), ``solution``,
``context``.

Options (besides the shared ones): ``subjects`` (default all four), ``prompt_config``, ``strategy``.
``path`` may hold one folder per subject (``Math/test-*.parquet``, as in the dataset repository) or one file.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from bon.content import Content, Prompt, TextItem
from bon.errors import BonError
from generators.suites import has_image, image_from, open_rows, select

DATASET = "luckychao/EMMA"
NAME = "EMMA"
SUBJECTS = ("Math", "Physics", "Chemistry", "Coding")
IMAGES = tuple(f"image_{k}" for k in range(1, 6))
PLACEHOLDER = re.compile(r"<image_(\d+)>")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


STRATEGIES = {"CoT": "CoT", "Direct": "Directly"}  # generate_response.py's --strategy -> the config's key


def build_suite(dataset: str = DATASET, path: str | None = None, split: str | None = "test", revision: str | None = None,
                subjects: Any = None, categories: Any = None, limit: int | None = None, prompt_config: str | None = None,
                strategy: str = "CoT") -> list[Prompt]:
    if strategy not in STRATEGIES:
        raise BonError(f"{NAME}: strategy must be CoT or Direct (EMMA's generation strategies), got {strategy!r}")
    templates = official_templates(prompt_config, strategy) if prompt_config else None
    wanted = list(SUBJECTS) if subjects is None else ([subjects] if isinstance(subjects, str) else list(subjects))
    unknown = [s for s in wanted if s not in SUBJECTS]
    if unknown:
        raise BonError(f"{NAME}: unknown subject(s) {', '.join(unknown)} (known: {', '.join(SUBJECTS)})")
    prompts: list[Prompt] = []
    if path is not None and Path(path).expanduser().is_file():
        sources = [(None, Path(path).expanduser())]
    elif path is not None:
        root = Path(path).expanduser()
        folders = [(s, root / s) for s in wanted if (root / s).is_dir()]
        sources = folders or [(None, root)]
    else:
        sources = [(s, None) for s in wanted]
    for subject, local in sources:
        rows = open_rows(NAME, dataset, local, split, config=subject, revision=revision, image_columns=IMAGES,
                         hint=" (one folder per subject: Math/test-*.parquet ...)")
        for i, row in rows:
            p = to_prompt(rows, i, row, where=f"{rows.where} row {i}", templates=templates)
            if p.metadata.get("subject") in wanted or subject is not None:
                prompts.append(p)
    dup = next((pid for pid, n in Counter(p.id for p in prompts).items() if n > 1), None)
    if dup is not None:
        raise BonError(f"{NAME}: pid {dup} appears twice")
    return select(prompts, categories, limit, NAME)


def official_templates(path: str, strategy: str) -> dict[str, str]:
    """The multiple-choice and open-ended templates of EMMA's ``configs/gpt.yaml`` with the strategy's
    instruction (read from the user's checkout: bon ships none of the official wording)."""
    import yaml

    file = Path(path).expanduser()
    try:
        config = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BonError(f"{NAME}: prompt_config {file}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError:
        raise BonError(f"{NAME}: prompt_config {file}: not valid YAML") from None
    try:
        instruction = str(config["Strategy_Instruction"][STRATEGIES[strategy]])
        return {"Multiple Choice": str(config["multi_choice_format"]) + instruction,
                "Open-ended": str(config["open_ended_format"]) + instruction}
    except (KeyError, TypeError):
        raise BonError(f"{NAME}: prompt_config {file}: expected multi_choice_format, open_ended_format and "
                       f"Strategy_Instruction.{STRATEGIES[strategy]} (EMMA's configs/gpt.yaml)") from None


def query_text(context: str, question: str, options: list[str], multiple_choice: bool,
               templates: dict[str, str] | None) -> str:
    """The problem's text, placeholders still in it: the official template filled in, or without one the
    same parts (context, question, option lines) one per line."""
    lines = "".join(f"{chr(ord('A') + k)}: {o}\n" for k, o in enumerate(options)) if multiple_choice else ""
    if templates is not None:
        template = templates["Multiple Choice" if multiple_choice else "Open-ended"]
        try:
            return template.format(context=context, question=question, options=lines)
        except (KeyError, IndexError, ValueError) as exc:
            raise BonError(f"{NAME}: prompt_config template cannot be filled ({exc!r}); expected {{context}}, "
                           "{question} and {options} only") from None
    return "\n".join(part for part in (context, question, lines.rstrip("\n")) if part)


def to_prompt(rows: Any, i: int, row: dict[str, Any], where: str, templates: dict[str, str] | None = None) -> Prompt:
    pid, question = row.get("pid"), row.get("question")
    if pid is None or question is None:
        raise BonError(f"{NAME}: {where} has no pid or question")
    images = {k: image_from(rows, i, f"image_{k}", origin=f"{NAME} {pid} image_{k}")
              for k in range(1, 6) if f"image_{k}" in row and has_image(rows, i, f"image_{k}")}
    options = [str(o) for o in (row.get("options") or [])]
    qtype = str(row.get("type") or ("Multiple Choice" if options else "Open-ended"))
    multiple_choice = qtype.lower() == "multiple choice"
    context = "" if row.get("context") is None else str(row["context"])
    used: set[int] = set()
    items: list[Any] = []
    _interleave(query_text(context, str(question), options, multiple_choice, templates), images, used, items)
    answer = "" if row.get("answer") is None else str(row["answer"]).strip()
    meta: dict[str, Any] = {
        "source": "emma",
        "benchmark_id": str(pid),
        "category": str(row.get("category") or row.get("subject") or ""),
        "subject": str(row.get("subject") or ""),
        "task_name": str(row.get("task") or ""),
        "type": qtype,
        "answer": answer,
        "options": options,
    }
    if options and len(answer) == 1 and answer.upper() in LETTERS[: len(options)]:
        meta["answer_text"] = options[LETTERS.index(answer.upper())]
    for key in ("solution", "context"):
        if row.get(key):
            meta[key] = str(row[key])
    unshown = sorted(set(images) - used)
    if unshown:
        meta["unshown_images"] = unshown
    return Prompt(str(pid), "reasoning", Content(items), meta)


def _interleave(text: str, images: dict[int, Any], used: set[int], items: list[Any]) -> None:
    """Text and images in the order the placeholders give, as EMMA's model wrappers send them: the text
    between placeholders kept as it is (only blank pieces dropped), a placeholder without an image dropped."""
    pieces = PLACEHOLDER.split(text)  # text, number, text, number, ..., text
    for j, piece in enumerate(pieces):
        if j % 2 == 0:
            if piece.strip():
                items.append(TextItem(piece))
        elif int(piece) in images:
            items.append(images[int(piece)])
            used.add(int(piece))


build_suite.requires = ("datasets",)  # read from the Hub without path: (bon.preflight)
