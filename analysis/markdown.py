"""Labels (judges, generators, settings) are the user's text: in Markdown output they stay text."""

from __future__ import annotations

from typing import Any


def md_label(value: Any) -> str:
    """A label as Markdown text on one line: no link, image, code span, emphasis or table cell it could open
    (``<`` and ``&`` are made entities by the report's final pass, :func:`analysis.report.render_markdown`)."""
    text = " ".join(str(value).splitlines())
    for ch in ("\\", "`", "*", "[", "]", "|"):
        text = text.replace(ch, "\\" + ch)
    return text
