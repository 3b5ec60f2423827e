"""A simulated multimodal generator for the synthetic world, with a skill knob.

Each candidate draws a *lapse* (how careless this sample is; high skill = usually low) and then
commits the mistakes real generators commit, each more likely the higher the lapse: wrong counts,
colours, shapes and layouts, misspelt signs, damaged pixels; edits that do too little, too much or
the wrong thing; interleaved answers that drop images or drift between steps; reasoning that gets
the answer wrong, forgets the answer line or rambles. N candidates for one prompt therefore spread
in quality, which is what Best-of-N selection exploits. The faults injected are recorded in
``provenance`` with the latent truth they imply (:mod:`generators.synthetic.truth`); only the
simulated annotators of the preference set read the truth, never a verifier or a judge.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
from PIL import Image, ImageDraw

from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from bon.plugins import Generator
from generators.synthetic import language as L
from generators.synthetic import scene as S
from generators.synthetic.suites import placed
from generators.synthetic.truth import truth_of

SKILLS = {"strong": 0.8, "weak": 0.45}
CONCENTRATION = 3.0  # Beta concentration of the per-candidate lapse: lower = more spread
Faults = list[dict[str, Any]]


class SyntheticGenerator(Generator):
    """``skill`` is "strong" (0.8), "weak" (0.45) or a number in [0, 1]."""

    forkable = True  # pure CPU: bon.stages.pool may run it in a worker process
    image_size = (128, 128)  # the synthetic world's pictures (bon.plan's disk estimate)

    def __init__(self, skill: str | float = "strong", name: str | None = None) -> None:
        if isinstance(skill, str) and skill in SKILLS:
            self.skill, label = SKILLS[skill], skill
        else:
            try:
                self.skill, label = float(skill), f"{float(skill):g}"
            except (TypeError, ValueError):
                raise BonError(f"synthetic generator: skill must be strong, weak or a number, got {skill!r}") from None
        if not 0.0 <= self.skill <= 1.0:
            raise BonError(f"synthetic generator: skill {self.skill} outside [0, 1]")
        self.name = name or f"synthetic-{label}"

    def identity(self) -> dict[str, Any]:
        return {"skill": self.skill}  # the resolved number ("strong" is 0.8)

    def sample(self, prompt: Prompt, seeds: Sequence[int]) -> list[Candidate]:
        spec = prompt.metadata.get("spec")
        if not isinstance(spec, dict):
            raise BonError(f"prompt {prompt.id}: the synthetic generator needs metadata['spec'] (a synthetic suite prompt)")
        return [self.one(prompt, spec, i, int(seed)) for i, seed in enumerate(seeds)]

    def one(self, prompt: Prompt, spec: dict[str, Any], index: int, seed: int) -> Candidate:
        rng = S.rng_of("generate", self.skill, prompt.id, seed)
        mean = min(0.98, max(0.02, 1.0 - self.skill))
        lapse = float(rng.beta(mean * CONCENTRATION, (1.0 - mean) * CONCENTRATION))
        faults: Faults = []
        make: dict[str, Callable[[Mood], Content]] = {
            "t2i": lambda m: Content.of(render_with(draw_t2i(spec, m), m)),
            "edit": lambda m: Content.of(render_with(draw_edit(spec, m), m)),
            "interleaved": lambda m: draw_interleaved(spec, m),
            "reasoning": lambda m: answer_reasoning(prompt, spec, m, self.skill),
        }
        content = make[prompt.task](Mood(rng, lapse, faults))
        # the latent truth (what was really drawn) travels with the candidate for the simulated
        # annotators; verifier and judges read only the content
        prov = {"skill": self.skill, "seed": seed, "lapse": round(lapse, 3), "faults": faults, "truth": truth_of(faults)}
        return Candidate(prompt.id, index, self.name, seed, content, prov)


class Mood:
    """One candidate's carelessness: decides which faults happen and how badly, and logs them."""

    def __init__(self, rng: np.random.Generator, lapse: float, faults: Faults) -> None:
        self.rng, self.lapse, self.faults = rng, lapse, faults

    def happens(self, rate: float) -> bool:
        return bool(self.rng.random() < min(0.95, rate * self.lapse))

    def severity(self) -> float:
        return float(np.clip(self.rng.uniform(0.2, 1.0) * (0.5 + self.lapse), 0.05, 1.0))

    def log(self, fault: str, **info: Any) -> None:
        self.faults.append({"fault": fault, **info})

    def pick(self, options: Sequence[Any]) -> Any:
        return options[int(self.rng.integers(len(options)))]


# --- damage -----------------------------------------------------------------------------------


def artefacts_for(m: Mood) -> dict[str, Any]:
    """Pixel damage for this candidate (possibly none); one kind, graded by severity."""
    if not m.happens(0.9):
        return {}
    sev = m.severity()
    kind = m.pick(("noise", "blur", "blocks", "scribble"))
    value = {"noise": 0.4 * sev, "blur": 0.3 + 1.5 * sev, "blocks": 0.85 * sev, "scribble": 1 + int(round(3 * sev))}[kind]
    m.log("artefact", type=kind, amount=round(float(value), 3))
    return {kind: value}


GRAIN = 1.5  # every generated image carries faint sensor-like grain: no two samples are identical


def render_with(scene: S.Scene, m: Mood, art: dict[str, Any] | None = None) -> Image.Image:
    art = artefacts_for(m) if art is None else art
    return S.render(scene, {"grain": GRAIN, **art}, m.rng)


# --- t2i --------------------------------------------------------------------------------------


def other(m: Mood, options: Sequence[str], not_this: str) -> str:
    return m.pick([o for o in options if o != not_this])


def misspell(m: Mood, text: str) -> str:
    """Swap, drop or replace one or two letters: the classic rendered-text failure."""
    chars = list(text)
    for _ in range(1 + int(m.severity() > 0.6)):
        i = int(m.rng.integers(len(chars)))
        how = m.pick(("replace", "drop", "swap"))
        if how == "drop" and len(chars) > 1:
            del chars[i]
        elif how == "swap" and i + 1 < len(chars):
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            chars[i] = m.pick([c for c in S.TEXT_CHARS.strip() if c != chars[i]])
    out = "".join(chars).strip()
    return out if out and out != text else text[::-1]


def draw_t2i(spec: dict[str, Any], m: Mood) -> S.Scene:
    groups = [dict(g) for g in spec["groups"]]
    relations = list(spec.get("relations", []))
    if relations and m.happens(1.0):
        relations = [{**r, "rel": {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}[r["rel"]]}
                     for r in relations]
        m.log("relation", detail="layout reversed")
    if m.happens(1.0):
        g = m.pick(groups)
        delta = m.pick((-1, 1)) * (1 + int(m.severity() > 0.7))
        old = g["count"]
        g["count"] = max(0, old + delta)
        m.log("count", what=f"{g['colour']} {g['shape']}", want=old, drew=g["count"])
    kinds = [(g["colour"], g["shape"]) for g in groups for _ in range(g["count"])]
    index = {i: sum(x["count"] for x in groups[:i]) for i, g in enumerate(groups) if g["count"] >= 1}  # first object of each
    rels = [{"a": index[r["a"]], "rel": r["rel"], "b": index[r["b"]]} for r in relations if r["a"] in index and r["b"] in index]
    objs = placed(kinds[: S.GRID_COLS * S.GRID_ROWS], m.rng, rels)
    if objs and m.happens(0.8):
        o = m.pick(objs)
        new = other(m, list(S.PALETTE), o.colour)
        m.log("colour", was=o.colour, drew=new)
        o.colour = new
    if objs and m.happens(0.6):
        o = m.pick(objs)
        new = other(m, S.SHAPES, o.shape)
        m.log("shape", was=o.shape, drew=new)
        o.shape = new
    scene = S.Scene(objs, spec.get("text"))
    if m.happens(0.4):
        add_random_object(scene, m)
    if scene.text is not None and m.happens(1.3):
        if m.severity() > 0.85:
            scene.text = None
            m.log("text", detail="missing")
        else:
            scene.text = misspell(m, scene.text)
            m.log("text", detail="misspelt", drew=scene.text)
    return scene


def add_random_object(scene: S.Scene, m: Mood) -> None:
    free = S.free_cells(scene)
    if not free:
        return
    shape, colour = m.pick(S.SHAPES), m.pick(list(S.PALETTE))
    scene.objects += S.place_objects([(shape, colour)], m.rng, cells=[m.pick(free)])
    m.log("extra object", what=f"{colour} {shape}")


# --- edit -------------------------------------------------------------------------------------


def find_obj(scene: S.Scene, o: dict[str, str]) -> int | None:
    for i, x in enumerate(scene.objects):
        if x.colour == o["colour"] and x.shape == o["shape"]:
            return i
    return None


def draw_edit(spec: dict[str, Any], m: Mood) -> S.Scene:
    before, after = S.Scene.from_dict(spec["input"]), S.Scene.from_dict(spec["output"])
    if m.happens(0.9):
        after = under_edit(spec, before, after, m)
    elif m.happens(0.5):
        after = wrong_target(spec, before, after, m)
    if m.happens(0.9):
        over_edit(spec, after, m)
    return after


def under_edit(spec: dict[str, Any], before: S.Scene, after: S.Scene, m: Mood) -> S.Scene:
    """Too little: nothing changes at all, or the change is half-done."""
    if m.severity() > 0.75:
        m.log("under-edit", detail="no change")
        return before.copy()
    op = spec["op"]
    out = after.copy()
    if op == "retext":
        old, new = before.text or "", spec["text"]
        keep = int(m.rng.integers(1, max(2, len(new))))
        out.text = (new[:keep] + old[keep:len(new)]).strip() or new[:1]
    elif op == "recolour":
        i = find_obj(before, spec["object"])
        out.objects[i].colour = m.pick([c for c in S.PALETTE if c not in (spec["new_colour"], spec["object"]["colour"])])
    elif op == "add":
        new = out.objects[-1]
        free = S.free_cells(before)
        if free:
            new.x, new.y = S.jittered(m.pick(free), new.size, m.rng)  # somewhere, not where asked
    elif op == "remove":
        i = find_obj(before, spec["object"])
        faded = before.objects[i]
        faded.size *= 0.6  # shrunk instead of removed
        out.objects.append(faded)
    else:  # move: only part of the way
        i = find_obj(before, spec["object"])
        j = find_obj(out, spec["object"])
        src, dst = before.objects[i], out.objects[j]
        dst.x, dst.y = (src.x + dst.x) / 2, (src.y + dst.y) / 2
        if any(o is not dst and abs(o.x - dst.x) < o.size + dst.size and abs(o.y - dst.y) < o.size + dst.size for o in out.objects):
            dst.x, dst.y = src.x, src.y
    m.log("under-edit", detail=f"partial {op}")
    return out


def wrong_target(spec: dict[str, Any], before: S.Scene, after: S.Scene, m: Mood) -> S.Scene:
    """The right operation on the wrong object (or, for add and retext, a wrong new thing)."""
    op = spec["op"]
    out = before.copy()
    if op == "retext":
        out.text = misspell(m, spec["text"])
    elif op == "add":
        out = after.copy()
        new = out.objects[-1]
        new.colour = other(m, list(S.PALETTE), new.colour)
    else:
        i = find_obj(before, spec["object"])
        others = [k for k in range(len(before.objects)) if k != i]
        if not others:
            return after
        k = m.pick(others)
        if op == "recolour":
            out.objects[k].colour = spec["new_colour"]
        elif op == "remove":
            del out.objects[k]
        else:
            j = find_obj(after, spec["object"])
            out.objects[k].x, out.objects[k].y = after.objects[j].x, after.objects[j].y
    m.log("wrong target", op=op)
    return out


def over_edit(spec: dict[str, Any], out: S.Scene, m: Mood) -> None:
    """Too much: collateral changes to things the instruction did not mention."""
    touched = {(spec.get("new_colour") or spec.get("object", {}).get("colour"), spec.get("object", {}).get("shape"))}
    bystanders = [o for o in out.objects if (o.colour, o.shape) not in touched]
    kinds = ["background", "drift"] + (["recolour other", "drop other"] if bystanders else []) + (
        ["text"] if out.text and spec["op"] != "retext" else [])
    kind = m.pick(kinds)
    sev = m.severity()
    if kind == "background":
        shift = int(10 + 40 * sev)
        out.background = (max(0, S.BACKGROUND[0] - shift), max(0, S.BACKGROUND[1] - shift // 3), S.BACKGROUND[2])
    elif kind == "drift":
        for o in (bystanders or out.objects)[: 1 + int(sev * 3)]:
            o.x = float(np.clip(o.x + m.rng.uniform(-1, 1) * (4 + 10 * sev), o.size, S.SIZE - o.size))
            o.y = float(np.clip(o.y + m.rng.uniform(-1, 1) * (4 + 10 * sev), o.size, S.OBJECT_BOTTOM - o.size))
    elif kind == "recolour other":
        o = m.pick(bystanders)
        o.colour = other(m, list(S.PALETTE), o.colour)
    elif kind == "drop other":
        out.objects.remove(m.pick(bystanders))
    else:
        out.text = misspell(m, out.text or "")
    m.log("over-edit", detail=kind)


# --- interleaved ------------------------------------------------------------------------------

GENERIC = ("Here is the updated image.", "Done.", "Next image below.", "Here you go.")


def step_sentence(k: int, step: dict[str, Any]) -> str:
    o = step["object"]
    if step["op"] == "add":
        where = f" {L.REL_PHRASE[step['relation']['rel']]} {L.thing(step['relation']['anchor'], True)}" if step.get("relation") else ""
        return f"Step {k + 1}: I added {L.thing(o)}{where}."
    if step["op"] == "remove":
        return f"Step {k + 1}: {L.thing(o, True).capitalize()} has been removed."
    return f"Step {k + 1}: {L.thing(o, True).capitalize()} is now {step['new_colour']}."


def draw_interleaved(spec: dict[str, Any], m: Mood) -> Content:
    steps = spec["steps"]
    initial = S.Scene.from_dict(spec["initial"])
    scenes = [S.Scene.from_dict(d) for d in spec["scenes"]]
    dx, dy = m.rng.uniform(-3, 3, size=2)
    for sc in [initial] + scenes:  # this sample's own layout, consistent across steps
        for o in sc.objects:
            o.x, o.y = o.x + dx, o.y + dy
    if m.happens(1.0):
        spoil_step(initial, scenes, steps, m)
    if len(scenes) > 1 and m.happens(0.8):
        drift(scenes, m)
    art = artefacts_for(m)
    items: list[Any] = []
    texts = [step_sentence(k, st) for k, st in enumerate(steps)]
    if m.happens(0.6):
        k = int(m.rng.integers(len(texts)))
        texts[k] = "" if m.severity() > 0.7 else m.pick(GENERIC)
        m.log("step text", step=k, detail="missing" if not texts[k] else "generic")
    missing = int(m.rng.integers(len(steps))) if m.happens(0.5) else None
    if missing is not None:
        m.log("missing image", step=missing)
    for k, sc in enumerate(scenes):
        if texts[k]:
            items.append(texts[k])
        if k != missing:
            items.append(render_with(sc, m, art))
    if m.happens(0.2):
        items.append(render_with(scenes[-1], m, art))
        m.log("extra image")
    return Content.of(*items)


def spoil_step(initial: S.Scene, scenes: list[S.Scene], steps: list[dict[str, Any]], m: Mood) -> None:
    """One step's image is wrong (the operation skipped or botched); the error may carry on."""
    k = int(m.rng.integers(len(steps)))
    carry = m.rng.random() < 0.5
    step = steps[k]
    targets = range(k, len(scenes)) if carry else [k]
    how = m.pick(("skipped", "wrong colour", "extra object"))
    if how == "skipped" and step["op"] == "add":
        for t in targets:
            i = find_obj(scenes[t], step["object"])
            if i is not None:
                del scenes[t].objects[i]
    elif how == "skipped":
        scenes[k] = (scenes[k - 1] if k > 0 else initial).copy()
    else:
        sc = scenes[k]
        if how == "extra object" or not sc.objects:
            add_random_object(sc, m)
        else:
            o = m.pick(sc.objects)
            o.colour = other(m, list(S.PALETTE), o.colour)
    m.log("step wrong", step=k, detail=how, carried=bool(carry))


def drift(scenes: list[S.Scene], m: Mood) -> None:
    """Objects wander or change colour between steps: the images are not one evolving scene."""
    k = int(m.rng.integers(1, len(scenes)))
    sev = m.severity()
    for sc in scenes[k:]:
        for o in sc.objects[: 1 + int(sev * 2)]:
            o.x = float(np.clip(o.x + (5 + 12 * sev) * m.pick((-1, 1)), o.size, S.SIZE - o.size))
    m.log("drift", from_step=k, amount=round(5 + 12 * sev, 1))


# --- reasoning --------------------------------------------------------------------------------

FILLER = (
    "Let me scan the picture again from left to right to be careful.",
    "There are several shapes here, so I should not rush.",
    "Some of the shapes look similar, which makes this a little tricky.",
    "I will go over each object one by one.",
    "It is important to look at the colours as well as the shapes.",
)


def wrong_answer(spec: dict[str, Any], m: Mood) -> str:
    """A plausible wrong value: a near count, another colour or shape in view, the other yes/no."""
    q, right = spec["question"], str(spec["answer"])
    scene = S.Scene.from_dict(spec["scene"])
    if q["kind"] == "count":
        return str(max(0, int(right) + m.pick((-1, 1, 1, 2))) if right != "0" else 1)
    if q["kind"] == "more":
        return "no" if right == "yes" else "yes"
    if q["kind"] == "colour_of":
        seen = sorted({o.colour for o in scene.objects if o.colour != right})
        return m.pick(seen or [c for c in S.PALETTE if c != right])
    return other(m, S.SHAPES, right)


OPENERS = ("", "Looking at the image, ", "Let me inspect the picture. ", "First I study the scene. ",
           "Okay. ", "I examine each shape in turn. ")
CLOSERS = ("", " That settles it.", " I am fairly confident.", " This matches what I see.")


def explanation(spec: dict[str, Any], value: str) -> str:
    q = spec["question"]
    if q["kind"] == "count":
        return f"I look for the {L.kind_phrase(q['target'])} in the image and count {value} of them."
    if q["kind"] == "more":
        a, b = L.kind_phrase(q["a"]), L.kind_phrase(q["b"])
        return f"I compare the number of {a} with the number of {b}; " + (f"there are more {a}." if value == "yes" else f"there are not more {a}.")
    what = "colour" if q["kind"] == "colour_of" else "shape"
    return f"The object {L.POSITION_PHRASE[q['position']]} is the one I need; its {what} is {value}."


def answer_reasoning(prompt: Prompt, spec: dict[str, Any], m: Mood, skill: float) -> Content:
    right = str(spec["answer"])
    value = right
    if m.happens(1.1):
        value = wrong_answer(spec, m)
        m.log("wrong answer", answer=value)
    opener, core = m.pick(OPENERS), explanation(spec, value)
    if opener.endswith(", ") and not core.startswith("I "):
        core = core[0].lower() + core[1:]
    body = opener + core + m.pick(CLOSERS)
    if m.happens(0.7):
        n = 2 + int(m.severity() * 4)
        body = " ".join(m.pick(FILLER) for _ in range(n)) + " " + body + " " + " ".join(m.pick(FILLER) for _ in range(n // 2))
        m.log("rambling", sentences=n)
    items: list[Any] = [body]
    p_sketch = max(0.0, skill - 0.5) * 1.3 * (1.0 - m.lapse)
    p_noise = min(0.6, max(0.0, 0.75 - skill) * 2.0 * m.lapse)
    if m.rng.random() < p_sketch:
        items.append(sketch(prompt, spec))
        m.log("sketch")
    elif m.rng.random() < p_noise:
        items.append(irrelevant_image(m))
        m.log("irrelevant image")
    if m.happens(0.45):
        items.append(f"So my answer would be {value}.")
        m.log("no answer line")
    else:
        items.append(f"Answer: {value}")
    return Content.of(*items)


def relevant_objects(spec: dict[str, Any]) -> list[S.SceneObject]:
    q, objs = spec["question"], S.Scene.from_dict(spec["scene"]).objects
    if q["kind"] == "count":
        t = q["target"]
        return [o for o in objs if t.get("colour") in (None, o.colour) and t.get("shape") in (None, o.shape)]
    if q["kind"] == "more":
        return [o for o in objs for k in (q["a"], q["b"]) if k.get("colour") in (None, o.colour) and k.get("shape") in (None, o.shape)]
    return [min(objs, key=S.POSITION_KEYS[q["position"]])]


def sketch(prompt: Prompt, spec: dict[str, Any]) -> Image.Image:
    """Thinking with images: the input picture with the objects that matter boxed."""
    im = prompt.content.images[0].load().copy()
    draw = ImageDraw.Draw(im)
    for o in relevant_objects(spec):
        r = o.size + 3
        draw.rectangle([o.x - r, o.y - r, o.x + r, o.y + r], outline=(0, 0, 0), width=1)
    return im


def irrelevant_image(m: Mood) -> Image.Image:
    kinds = [(m.pick(S.SHAPES), m.pick(list(S.PALETTE))) for _ in range(int(m.rng.integers(1, 4)))]
    return S.render(S.Scene(S.place_objects(kinds, m.rng)))
