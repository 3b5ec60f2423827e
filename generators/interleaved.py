"""``interleaved``: an agent that writes an answer mixing text and images.

A planner language model writes the answer with *image slots*, each a picture described in words:

    Here is how to fold a paper boat.
    <image>a sheet of white paper folded in half, on a wooden table, top view</image>
    Fold the top corners down to the middle line.
    <image>the same paper with both top corners folded to the centre line</image>

A text-to-image generator (any registered one: ``diffusers-t2i``, ``openai-images``, ...) renders each
slot; with an ``editor`` (e.g. ``diffusers-edit``) every slot after the first is rendered as an edit of
the previous image instead, which keeps subjects consistent from step to step. The candidate is the
text and the images in the plan's order.

The slot markup and its parser (:func:`parse_plan`) are forgiving: tags in any case and with spaces
(``< Image >``), ``<img>``, an unclosed last slot, and ``[image: ...]`` are all read as slots; empty
slots are dropped. The plan is then made to fit ``min_images``..``max_images``: surplus slots are
dropped and missing ones added (described by the prompt's own text), and every repair is recorded in
provenance, so even a model that ignores the format yields well-formed content.

Options:

- ``planner``: ``{backend: transformers | transformers-vlm | openai, model, ...}`` (see
  :mod:`generators._llm`; the openai back-end takes ``base_url``, ``api_key_env``, ...)
- ``renderer``: ``{name: diffusers-t2i, options: {...}}`` (required): the text-to-image generator
- ``editor``: ``{name: diffusers-edit, options: {...}}`` (optional): renders slot j > 0 from slot j-1
- ``temperature`` (0.8), ``top_p``, ``max_new_tokens`` (512), ``system`` (replaces the built-in
  instructions), ``min_images`` (1), ``max_images`` (4), ``style`` (text added to every slot description)

The planner writes all N plans of a prompt in one batched call. When the renderer and the editor are
both diffusers pipelines, the editor is built from the renderer's loaded components where their
configs agree (e.g. FLUX's text encoders and VAE for a FLUX.1 Kontext editor), so they are held once;
:meth:`InterleavedAgent.held_modules` lists what the agent holds.

Seeds: the planner samples with the candidate's seed; image j uses ``derive_seed(seed, "image", j)``.
Provenance keeps the raw plan, the repairs, and for each slot its description, seed, which generator
drew it and that generator's provenance.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from bon import registry
from bon.content import Candidate, Content, ImageItem, Prompt, TextItem
from bon.errors import BonError
from bon.plugins import Generator
from bon.seeds import derive_seed
from bon.provenance import library_versions
from generators._common import VERSION_PACKAGES, positive_int
from generators._llm import content_parts, make_chat, sampling

SYSTEM = (
    "You answer with text and pictures. Write the answer in plain prose and place each picture where it "
    "belongs as <image>description</image>, where the description says exactly what the picture shows "
    "(subject, setting, colours, viewpoint), complete enough to paint it without reading the rest of the "
    "answer. Use between {lo} and {hi} pictures. Do not write anything but the answer."
)

# a slot: <image>...</image> (also <img>, any case, spaces inside the tags), or [image: ...]
_OPEN = r"<\s*(?:image|img)\s*>"
_CLOSE = r"<\s*/\s*(?:image|img)\s*>"
SLOT = re.compile(rf"{_OPEN}(.*?){_CLOSE}|\[\s*image\s*:\s*([^\]]*)\]", re.IGNORECASE | re.DOTALL)
UNCLOSED = re.compile(_OPEN, re.IGNORECASE)
STRAY = re.compile(rf"{_OPEN}|{_CLOSE}", re.IGNORECASE)


def parse_plan(plan: str) -> list[tuple[str, str]]:
    """``[("text", ...), ("image", description), ...]`` in order; empty pieces are left out."""
    pieces: list[tuple[str, str]] = []

    def text(chunk: str) -> None:
        chunk = STRAY.sub(" ", chunk).strip()
        if chunk:
            pieces.append(("text", chunk))

    pos = 0
    for m in SLOT.finditer(plan):
        text(plan[pos : m.start()])
        desc = " ".join((m.group(1) if m.group(1) is not None else m.group(2)).split())
        if desc:
            pieces.append(("image", desc))
        pos = m.end()
    rest = plan[pos:]
    tail = UNCLOSED.search(rest)
    if tail:  # an unclosed slot: up to the end of its paragraph
        text(rest[: tail.start()])
        after = rest[tail.end() :]
        para, sep, more = after.partition("\n\n")
        desc = " ".join(para.split())
        if desc:
            pieces.append(("image", desc))
        text(more)
    else:
        text(rest)
    return pieces


def fit_plan(pieces: list[tuple[str, str]], lo: int, hi: int, fallback: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Make the number of slots lie in [lo, hi]: drop the surplus, add slots described by ``fallback``."""
    repairs: list[str] = []
    out: list[tuple[str, str]] = []
    kept = 0
    for kind, value in pieces:
        if kind == "image":
            if kept >= hi:
                repairs.append(f"dropped slot: {value[:80]}")
                continue
            kept += 1
        out.append((kind, value))
    while kept < lo:
        out.append(("image", fallback))
        repairs.append("added slot described by the prompt")
        kept += 1
    return out, repairs


class InterleavedAgent(Generator):
    adapter = "interleaved"

    def __init__(self, planner: Any = None, renderer: dict[str, Any] | None = None, name: str | None = None,
                 editor: dict[str, Any] | None = None, temperature: float = 0.8, top_p: float | None = None,
                 max_new_tokens: int = 512, system: str | None = None, min_images: int = 1, max_images: int = 4,
                 style: str | None = None) -> None:
        self.name = name or self.adapter
        if planner is None:
            raise BonError(f"{self.adapter}: option 'planner' is required ({{backend: transformers, model: ...}})")
        self.planner = make_chat(planner, f"{self.adapter}: planner")
        self.renderer = self._child(renderer, "renderer", required=True)
        self.editor = self._child(editor, "editor", required=False)
        self.sampling = sampling(self.adapter, temperature, top_p, max_new_tokens)
        if isinstance(min_images, bool) or not isinstance(min_images, int) or min_images < 0:
            raise BonError(f"{self.adapter}: min_images must be a non-negative integer, got {min_images!r}")
        self.min_images = min_images
        self.max_images = positive_int(max_images, f"{self.adapter}: max_images", allow_none=False)
        if self.max_images < self.min_images:
            raise BonError(f"{self.adapter}: max_images ({max_images}) is below min_images ({min_images})")
        self.system = system or SYSTEM.format(lo=self.min_images, hi=self.max_images)
        self.style = style
        share = getattr(self.editor, "share_components_with", None)
        if callable(share):
            share(self.renderer)

    def held_modules(self) -> list[Any]:
        """The distinct loaded model modules this agent holds (renderer, editor, planner), each once."""
        seen: dict[int, Any] = {}
        for child in (self.renderer, self.editor, self.planner):
            held = getattr(child, "held_modules", None)
            for module in (held() if callable(held) else []):
                seen.setdefault(id(module), module)
        return list(seen.values())

    def close(self) -> None:
        for child in (self.editor, self.renderer, self.planner):
            if child is not None:
                child.close()

    def _child(self, spec: Any, role: str, required: bool) -> Generator | None:
        if spec is None:
            if required:
                raise BonError(f"{self.adapter}: option '{role}' is required ({{name: diffusers-t2i, options: {{...}}}})")
            return None
        if isinstance(spec, Generator):
            return spec
        if isinstance(spec, str):
            spec = {"name": spec}
        if not isinstance(spec, dict) or "name" not in spec:
            raise BonError(f"{self.adapter}: {role} must be a mapping with 'name' (and 'options')")
        if registry.parse_spec(str(spec["name"]))[0] == self.adapter:
            raise BonError(f"{self.adapter}: {role} cannot itself be {self.adapter}")
        options = spec.get("options") or {}
        if not isinstance(options, dict):
            raise BonError(f"{self.adapter}: {role} options must be a mapping")
        return registry.create("generator", str(spec["name"]), name=f"{self.name}.{role}", **options)

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "adapter": self.adapter, "planner": self.planner.describe(),
                "renderer": self.renderer.identity(), "editor": self.editor.identity() if self.editor else None,
                "settings": self.settings()}

    def settings(self) -> dict[str, Any]:
        return {**self.sampling, "min_images": self.min_images, "max_images": self.max_images, "style": self.style,
                "system": self.system}

    def messages(self, prompt: Prompt) -> list[dict[str, Any]]:
        return [{"role": "system", "content": [{"type": "text", "text": self.system}]},
                {"role": "user", "content": content_parts(prompt.content)}]

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        plans = self.planner.chat_many(self.messages(prompt), [int(s) for s in seeds], **self.sampling)
        return [self.one(prompt, plan, k, int(seed)) for k, (seed, plan) in enumerate(zip(seeds, plans))]

    def one(self, prompt: Prompt, plan: Any, index: int, seed: int) -> Candidate:
        """Candidate ``index`` from its plan (or the planner's failure): every slot rendered in order."""
        prov: dict[str, Any] = {"adapter": self.adapter, "planner": self.planner.describe(), "settings": self.settings(),
                                "seed": seed, "versions": library_versions(VERSION_PACKAGES)}
        if not isinstance(plan, str):  # an ApiFailure
            prov.update(plan.info())
            prov["missing"] = f"planner: {plan.reason}"
            return Candidate(prompt.id, index, self.name, seed, Content([]), prov)
        fallback = " ".join(prompt.content.text.split())[:300] or "an illustration"
        pieces, repairs = fit_plan(parse_plan(plan), self.min_images, self.max_images, fallback)
        prov.update({"plan": plan, "repairs": repairs, "slots": []})
        items: list[Any] = []
        previous = None
        j = 0
        for kind, value in pieces:
            if kind == "text":
                items.append(TextItem(value))
                continue
            description = f"{value}, {self.style}" if self.style else value
            image_seed = derive_seed(seed, "image", j)
            via = self.editor if (self.editor is not None and previous is not None) else self.renderer
            task, content = ("edit", Content.of(description, previous)) if via is self.editor else ("t2i", Content.of(description))
            slot_prompt = Prompt(f"{prompt.id}#{index}.image{j}", task, content)
            made = via.sample(slot_prompt, [image_seed])[0]
            slot = {"description": value, "seed": image_seed, "via": "editor" if via is self.editor else "renderer",
                    "generator": via.name, "provenance": made.provenance}
            prov["slots"].append(slot)
            if not made.content.images:
                prov["missing"] = f"image {j}: " + str(made.provenance.get("missing", "the renderer returned no image"))
                return Candidate(prompt.id, index, self.name, seed, Content([]), prov)
            previous = made.content.images[0].load()
            items.append(ImageItem.from_pil(previous))
            j += 1
        return Candidate(prompt.id, index, self.name, seed, Content(items), prov)
