"""``files``: candidates produced elsewhere (another machine, a hosted model, a benchmark release).

Give exactly one of:

- ``root``: a folder ``<root>/<prompt_id>/<k>.<ext>`` with k = 0, 1, ... per prompt; ``.png``, ``.jpg``,
  ``.jpeg``, ``.webp`` are an image, ``.txt`` a text, ``.json`` a content list ``[[kind, value], ...]``
  (image paths relative to that folder) or an object ``{"content": [...], "seed": s, "provenance": {...}}``.
  The prompt folder is the prompt id, or the id with unsafe characters replaced by ``_``.
- ``manifest``: a JSONL file, one candidate a line: ``{"prompt_id": ..., "index": k, "content": [[kind,
  value], ...]}`` plus optional ``seed`` and ``provenance``; image paths are relative to the manifest.

``allow_extra`` (default true): a prompt with more than N candidates uses the first N; false makes any
count other than N an error. Everything is validated, naming the file or line: missing files, a
prompt with fewer candidates than N (or none), two files for one candidate, duplicate manifest lines,
unreadable images. Construction checks the layout and that files exist; :meth:`FileCandidates.validate`
(called by ``bon generate`` before anything is written) also decodes every image of the prompts asked for.
Images are copied into the run folder as PNG (pixels unchanged).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from bon.content import Candidate, Content, ImageItem, Prompt, TextItem, read_jsonl, slug
from bon.errors import BonError
from bon.plugins import Generator

IMAGE_EXT = (".png", ".jpg", ".jpeg", ".webp")
KNOWN_EXT = IMAGE_EXT + (".txt", ".json")


@dataclass
class Entry:
    """One candidate found on disk: its content (image paths resolved), seed, provenance and source."""

    content: Content
    source: str
    seed: int | None = None
    provenance: dict[str, Any] | None = None


class FileCandidates(Generator):
    adapter = "files"

    def __init__(self, root: str | None = None, manifest: str | None = None, name: str | None = None,
                 allow_extra: bool = True) -> None:
        if (root is None) == (manifest is None):
            raise BonError(f"{self.adapter}: give exactly one of 'root' (a folder) or 'manifest' (a JSONL file)")
        self.name = name or self.adapter
        self.allow_extra = bool(allow_extra)
        self.root = Path(root).expanduser() if root is not None else None
        self.manifest = Path(manifest).expanduser() if manifest is not None else None
        if self.root is not None and not self.root.is_dir():
            raise BonError(f"{self.adapter}: candidate folder {self.root} not found")
        if self.manifest is not None and not self.manifest.is_file():
            raise BonError(f"{self.adapter}: manifest {self.manifest} not found")
        self._entries = read_manifest(self.manifest) if self.manifest is not None else None

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter,
                "root": str(self.root) if self.root else None, "manifest": str(self.manifest) if self.manifest else None}

    # --- finding candidates ---------------------------------------------------------------------

    def entries(self, prompt_id: str) -> tuple[str, dict[int, Entry]]:
        """(where they were found, candidates by index) for one prompt."""
        if self._entries is not None:
            found = self._entries.get(prompt_id)
            if not found:
                raise BonError(f"{self.manifest}: no candidates for prompt {prompt_id}")
            return str(self.manifest), found
        assert self.root is not None
        folder = next((f for f in (self.root / prompt_id, self.root / slug(prompt_id)) if f.is_dir()), None)
        if folder is None:
            raise BonError(f"{self.root}: no folder for prompt {prompt_id} (expected {self.root / slug(prompt_id)})")
        return str(folder), read_folder(folder)

    def pick(self, prompt_id: str, n: int) -> list[Entry]:
        where, found = self.entries(prompt_id)
        missing = [k for k in range(n) if k not in found]
        if missing:
            listed = ", ".join(map(str, missing[:5])) + (" ..." if len(missing) > 5 else "")
            raise BonError(f"{where}: prompt {prompt_id} has {len([k for k in found if k < n])} of {n} candidates "
                           f"(missing index {listed})")
        extra = sorted(k for k in found if k >= n)
        if extra and not self.allow_extra:
            raise BonError(f"{where}: prompt {prompt_id} has {len(found)} candidates, expected {n} (allow_extra is false)")
        return [found[k] for k in range(n)]

    def validate(self, prompts: Sequence[Prompt], n: int) -> None:
        """Check every prompt's candidates now (counts, files, image decoding) before anything is written."""
        for prompt in prompts:
            for entry in self.pick(prompt.id, n):
                for item in entry.content.images:
                    item.read()  # decodes, checked; not cached: the run reads its own copies

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        out = []
        for k, (seed, entry) in enumerate(zip(seeds, self.pick(prompt.id, len(seeds)))):
            items = [ImageItem.from_pil(it.read()) if isinstance(it, ImageItem) else TextItem(it.text)
                     for it in entry.content]
            prov = {"adapter": self.adapter, "source": entry.source}
            if entry.provenance:
                prov["source_provenance"] = entry.provenance
            used_seed = entry.seed if entry.seed is not None else int(seed)
            out.append(Candidate(prompt.id, k, self.name, used_seed, Content(items), prov))
        return out


# --- readers ------------------------------------------------------------------------------------


def read_manifest(path: Path) -> dict[str, dict[int, Entry]]:
    found: dict[str, dict[int, Entry]] = {}
    lines: dict[tuple[str, int], int] = {}
    for n, rec in read_jsonl(path):
        where = f"{path}:{n}"
        missing = [k for k in ("prompt_id", "index", "content") if k not in rec]
        if missing:
            raise BonError(f"{where}: manifest line lacks {', '.join(missing)}")
        pid, index = str(rec["prompt_id"]), rec["index"]
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise BonError(f"{where}: index must be a non-negative integer, got {index!r}")
        if (pid, index) in lines:
            raise BonError(f"{where}: candidate {index} of prompt {pid} already given on line {lines[(pid, index)]}")
        lines[(pid, index)] = n
        content = Content.from_json(rec["content"], path.parent, where=f"{where} content")
        check_files(content, where)
        seed = rec.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise BonError(f"{where}: seed must be an integer, got {seed!r}")
        prov = rec.get("provenance")
        if prov is not None and not isinstance(prov, dict):
            raise BonError(f"{where}: provenance must be an object")
        found.setdefault(pid, {})[index] = Entry(content, where, seed, prov)
    return found


def read_folder(folder: Path) -> dict[int, Entry]:
    by_index: dict[int, Path] = {}
    for f in sorted(folder.iterdir()):
        if not f.is_file() or f.suffix.lower() not in KNOWN_EXT or not f.stem.isdigit():
            continue
        k = int(f.stem)
        if k in by_index:
            raise BonError(f"{folder}: two files for candidate {k} ({by_index[k].name}, {f.name}); keep one "
                           "(use a .json content list for text and images together)")
        by_index[k] = f
    return {k: read_file(f) for k, f in by_index.items()}


def read_file(f: Path) -> Entry:
    ext = f.suffix.lower()
    if ext in IMAGE_EXT:
        return Entry(Content([ImageItem(path=f)]), str(f))
    if ext == ".txt":
        try:
            return Entry(Content([TextItem(f.read_text(encoding="utf-8"))]), str(f))
        except (OSError, UnicodeDecodeError) as exc:
            raise BonError(f"{f}: unreadable text ({exc})") from None
    try:
        raw = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BonError(f"{f}: not valid JSON ({exc})") from None
    seed = prov = None
    if isinstance(raw, dict):
        if "content" not in raw:
            raise BonError(f"{f}: expected a content list or an object with 'content'")
        seed, prov = raw.get("seed"), raw.get("provenance")
        raw = raw["content"]
    content = Content.from_json(raw, f.parent, where=str(f))
    check_files(content, str(f))
    return Entry(content, str(f), seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                 prov if isinstance(prov, dict) else None)


def check_files(content: Content, where: str) -> None:
    for item in content.images:
        if item.path is not None and not item.path.is_file():
            raise BonError(f"{where}: image file {item.path} not found")
