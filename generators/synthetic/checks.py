"""Scoring what a response *shows* against a spec: shared by the verifier and the scene judges.

Everything here reads perceived scenes (pixels) and response text, never how a candidate was made.
The verifier calls :func:`satisfaction` with the full spec and every factor switched on; the scene
judges pass the spec they parsed from the prompt text and leave out damage and preservation, which
is exactly where they disagree with the verifier.
"""

from __future__ import annotations

import difflib
import math
from collections import Counter
from typing import Any

from bon.content import Content, ImageItem, Prompt, TextItem
from generators.synthetic import language as L
from generators.synthetic.perception import SeenObject, SeenScene, perceive
from generators.synthetic.scene import relation_margin

REL_MARGIN = 4.0  # px a relation must hold by
ART_WEIGHT = 0.5  # how much perceived damage can take off a score
ART_FLOOR = 0.03  # damage estimates below this are the estimator's own noise (e.g. a triangle's tip)
EXTRAS_WEIGHT = 0.5  # weight of the "nothing else" atom in t2i
SAME_PLACE = 10.0  # px: an object this close to where it was is "the same one"


# --- small pieces -----------------------------------------------------------------------------


def relation_holds(a: SeenObject, rel: str, b: SeenObject) -> bool:
    return relation_margin(a, rel, b) > REL_MARGIN


def any_relation(seen: SeenScene, a: dict[str, Any], rel: str, b: dict[str, Any]) -> bool:
    return any(relation_holds(x, rel, y) for x in seen.find(a["colour"], a["shape"])
               for y in seen.find(b["colour"], b["shape"]) if x is not y)


def count_credit(seen: int, want: int) -> float:
    """Exact count 1; near misses keep a little (a scorer that is all-or-nothing hides progress)."""
    if seen == want:
        return 1.0
    return 0.5 * max(0.0, 1.0 - abs(seen - want) / max(want, 1))


def text_credit(read: str | None, want: str) -> float:
    if read == want:
        return 1.0
    if not read:
        return 0.0
    return 0.6 * difflib.SequenceMatcher(None, read, want).ratio()


def place_credit(d: float, exact: float = 4.0, gone: float = 14.0) -> float:
    """1 within ``exact`` px, falling to 0 at ``gone`` px."""
    return float(min(1.0, max(0.0, (gone - d) / (gone - exact))))


def dist(a: SeenObject, b: SeenObject | tuple[float, float]) -> float:
    bx, by = (b.x, b.y) if isinstance(b, SeenObject) else b
    return math.hypot(a.x - bx, a.y - by)


def nearest(objs: list[SeenObject], where: SeenObject | tuple[float, float]) -> tuple[SeenObject | None, float]:
    best = min(objs, key=lambda o: dist(o, where), default=None)
    return best, (dist(best, where) if best is not None else math.inf)


def damped(value: float, art: float, include: bool) -> float:
    """Lower a score for perceived damage; below ART_FLOOR the estimate is just its own noise."""
    if not include:
        return value
    return value * (1.0 - ART_WEIGHT * max(0.0, art - ART_FLOOR) / (1.0 - ART_FLOOR))


def first_image(content: Content) -> ImageItem | None:
    imgs = content.images
    return imgs[0] if imgs else None


# --- entry point ------------------------------------------------------------------------------


def satisfaction(task: str, spec: dict[str, Any], prompt: Prompt, response: Content, resolution: int | None = None,
                 include_artefacts: bool = True, include_preservation: bool = True) -> tuple[float, dict[str, Any]]:
    """How well ``response`` fulfils ``spec`` (score in [0, 1]) and which atoms passed.

    ``include_preservation`` covers what an edit or a step should leave alone (other objects, text,
    background, cross-step consistency). Unreadable images raise :class:`bon.errors.BonError`.
    """
    if task == "t2i":
        return score_t2i(spec, response, resolution, include_artefacts)
    if task == "edit":
        return score_edit(spec, prompt, response, resolution, include_artefacts, include_preservation)
    if task == "interleaved":
        return score_interleaved(spec, response, resolution, include_artefacts, include_preservation)
    if task == "reasoning":
        return score_reasoning(spec, prompt, response, resolution)
    raise ValueError(f"unknown task {task!r}")


# --- t2i --------------------------------------------------------------------------------------


def scene_atoms(spec: dict[str, Any], seen: SeenScene) -> dict[str, float]:
    """t2i atoms: each group's count, each relation, the text, and nothing unasked-for."""
    atoms: dict[str, float] = {}
    groups = spec["groups"]
    for i, g in enumerate(groups):
        atoms[f"count {g['colour']} {g['shape']}"] = count_credit(seen.count(g["colour"], g["shape"]), g["count"])
    for r in spec.get("relations", []):
        a, b = groups[r["a"]], groups[r["b"]]
        atoms[f"{a['colour']} {a['shape']} {r['rel']} {b['colour']} {b['shape']}"] = float(any_relation(seen, a, r["rel"], b))
    if spec.get("text") is not None:
        atoms["text"] = text_credit(seen.text, spec["text"])
    wanted = {(g["colour"], g["shape"]) for g in groups}
    extras = sum(1 for o in seen.objects if (o.colour, o.shape) not in wanted)
    atoms["nothing else"] = max(0.0, 1.0 - 0.5 * extras)
    return atoms


def weighted_mean(atoms: dict[str, float]) -> float:
    weights = {k: (EXTRAS_WEIGHT if k == "nothing else" else 1.0) for k in atoms}
    return sum(atoms[k] * weights[k] for k in atoms) / sum(weights.values())


def score_t2i(spec: dict[str, Any], response: Content, resolution: int | None, arts: bool) -> tuple[float, dict[str, Any]]:
    img = first_image(response)
    if img is None:
        return 0.0, {"reason": "no image"}
    seen = perceive(img, resolution)
    atoms = scene_atoms(spec, seen)
    value = damped(weighted_mean(atoms), seen.artefact, arts)
    return value, {"atoms": atoms, "artefact": round(seen.artefact, 3)}


# --- edit -------------------------------------------------------------------------------------


def score_edit(spec: dict[str, Any], prompt: Prompt, response: Content, resolution: int | None, arts: bool,
               keep: bool) -> tuple[float, dict[str, Any]]:
    src, img = first_image(prompt.content), first_image(response)
    if src is None:
        raise ValueError("edit prompt without an input image")
    if img is None:
        return 0.0, {"reason": "no image"}
    before, after = perceive(src, resolution), perceive(img, resolution)
    success, changed_in, changed_out = edit_success(spec, before, after)
    details: dict[str, Any] = {"success": round(success, 3), "artefact": round(after.artefact, 3)}
    value = success
    if keep:
        pres = preservation(before, after, changed_in, changed_out, spec["op"] == "retext")
        details["preservation"] = round(pres, 3)
        value = math.sqrt(success * pres)  # GEdit-style: both must be good
    return damped(value, after.artefact, arts), details


def edit_success(spec: dict[str, Any], before: SeenScene, after: SeenScene) -> tuple[float, set[int], set[int]]:
    """Did the instructed change happen? Also returns which objects (by index in before/after) it
    legitimately touched, so preservation does not count them."""
    op = spec["op"]
    if op == "retext":
        return text_credit(after.text, spec["text"]), set(), set()
    o = spec["object"]
    if op == "add":
        return added(spec, before, after)
    targets = before.find(o["colour"], o["shape"])
    if not targets:
        return 0.0, set(), set()
    t = targets[0]
    t_in = {before.objects.index(t)}
    same_kind = after.find(o["colour"], o["shape"])
    if op == "remove":
        _, d = nearest(same_kind, t)
        return float(d > SAME_PLACE), t_in, set()
    if op == "recolour":
        new, d = nearest(after.find(spec["new_colour"], o["shape"]), t)
        _, d_old = nearest(same_kind, t)
        score = 0.7 * place_credit(d, 6.0, 16.0) + 0.3 * float(d_old > SAME_PLACE)
        return score, t_in, ({after.objects.index(new)} if new is not None and d < 16 else set())
    # move: the object still exists and now stands where it was asked to
    rel = spec["relation"]
    best, ok = None, False
    for cand in same_kind:
        holds = any(relation_holds(cand, rel["rel"], a) for a in after.find(**rel["anchor"]) if a is not cand)
        if best is None or holds > ok:
            best, ok = cand, holds
    if best is None:
        return 0.0, t_in, set()
    return 0.25 + 0.75 * float(ok), t_in, {after.objects.index(best)}


def added(spec: dict[str, Any], before: SeenScene, after: SeenScene) -> tuple[float, set[int], set[int]]:
    o, rel = spec["object"], spec.get("relation")
    old = before.find(o["colour"], o["shape"])
    fresh = [c for c in after.find(o["colour"], o["shape"]) if nearest(old, c)[1] > SAME_PLACE]
    if not fresh:
        return 0.0, set(), set()
    if rel is None:
        return 1.0, set(), {after.objects.index(fresh[0])}
    anchors = after.find(**rel["anchor"])
    for c in fresh:
        if any(relation_holds(c, rel["rel"], a) for a in anchors):
            return 1.0, set(), {after.objects.index(c)}
    return 0.6, set(), {after.objects.index(fresh[0])}


def preservation(before: SeenScene, after: SeenScene, changed_in: set[int], changed_out: set[int], text_may_change: bool) -> float:
    """Everything the instruction did not mention should look as it did: objects (kind and place),
    nothing new, the sign, the background."""
    free = [j for j in range(len(after.objects)) if j not in changed_out]
    credits = []
    for i, o in enumerate(before.objects):
        if i in changed_in:
            continue
        cands = [j for j in free if after.objects[j].colour == o.colour and after.objects[j].shape == o.shape]
        j = min(cands, key=lambda j: dist(after.objects[j], o), default=None)
        if j is None:
            credits.append(0.0)
            continue
        credits.append(place_credit(dist(after.objects[j], o)))
        free.remove(j)
    value = sum(credits) / len(credits) if credits else 1.0
    value *= max(0.0, 1.0 - 0.25 * len(free))  # objects nobody asked for
    if not text_may_change and after.text != before.text:
        value *= 0.6
    shift = max(abs(a - b) for a, b in zip(after.background, before.background))
    if shift > 6:
        value *= max(0.5, 1.0 - shift / 60.0)
    return value


# --- interleaved ------------------------------------------------------------------------------


def expected_kinds(spec: dict[str, Any]) -> list[list[tuple[str, str]]]:
    """The (colour, shape) multiset after each step, from the start description and the operations."""
    state = [(o["colour"], o["shape"]) for o in spec["start"]]
    out = []
    for step in spec["steps"]:
        kind = (step["object"]["colour"], step["object"]["shape"]) if "object" in step else None
        if step["op"] == "add":
            state = state + [kind]
        elif step["op"] == "remove" and kind in state:
            state = [k for k in state if k != kind]
        elif step["op"] == "recolour":
            state = [(step["new_colour"], k[1]) if k == kind else k for k in state]
        out.append(sorted(state))
    return out


def step_slots(response: Content) -> list[tuple[str | None, ImageItem | None]]:
    """Split a response into (text, image) slots: a text opens a slot, an image closes it."""
    slots: list[list[Any]] = []
    for it in response.items:
        if isinstance(it, TextItem):
            if it.text.strip():
                slots.append([it.text, None])
        elif slots and slots[-1][1] is None:
            slots[-1][1] = it
        else:
            slots.append([None, it])
    return [(t, i) for t, i in slots]


def kinds_f1(want: list[tuple[str, str]], seen: list[tuple[str, str]]) -> float:
    if not want and not seen:
        return 1.0
    common = sum((Counter(want) & Counter(seen)).values())  # the kinds both hold, with multiplicity
    return 2.0 * common / (len(want) + len(seen))


def text_relevance(text: str | None, step: dict[str, Any]) -> float:
    """Does the step's sentence name what changed (colour and shape words)?"""
    if not text:
        return 0.0
    low = text.lower()
    colour = step.get("new_colour") or step["object"]["colour"]
    return 0.5 * (colour in low) + 0.5 * (step["object"]["shape"] in low)


def consistency(prev: SeenScene, nxt: SeenScene, step: dict[str, Any]) -> float:
    """Objects the step did not touch keep their place and colour from one image to the next."""
    kind = (step["object"]["colour"], step["object"]["shape"])
    credits = []
    for o in prev.objects:
        k = (o.colour, o.shape)
        if step["op"] == "remove" and k == kind:
            continue
        if step["op"] == "recolour" and k == kind:
            k = (step["new_colour"], k[1])
        _, d = nearest(nxt.find(*k), o)
        credits.append(place_credit(d))
    return sum(credits) / len(credits) if credits else 1.0


def score_interleaved(spec: dict[str, Any], response: Content, resolution: int | None, arts: bool,
                      keep: bool) -> tuple[float, dict[str, Any]]:
    steps, want = spec["steps"], expected_kinds(spec)
    n = len(steps)
    images, texts = response.images, [t for t in response.texts if t.strip()]
    kinds = ["text" if isinstance(it, TextItem) else "image" for it in response.items]
    img_ok = max(0.0, 1.0 - abs(len(images) - n) / n)
    txt_ok = max(0.0, 1.0 - abs(len(texts) - n) / n)
    structure = img_ok * (0.6 + 0.4 * txt_ok) * (1.0 if kinds == ["text", "image"] * n else 0.85)
    slots = step_slots(response)
    seen: list[SeenScene | None] = [perceive(i, resolution) if i is not None else None for _, i in slots[:n]]
    seen += [None] * (n - len(seen))
    per_step = []
    for k, step in enumerate(steps):
        s = seen[k]
        if s is None:
            per_step.append(0.0)
            continue
        img = kinds_f1(want[k], s.kinds())
        rel = step.get("relation")
        if step["op"] == "add" and rel:
            img = 0.75 * img + 0.25 * float(any_relation(s, step["object"], rel["rel"], rel["anchor"]))
        per_step.append(img * (0.8 + 0.2 * text_relevance(slots[k][0] if k < len(slots) else None, step)))
    value = structure * sum(per_step) / n
    details: dict[str, Any] = {"structure": round(structure, 3), "steps": [round(v, 3) for v in per_step]}
    if keep:
        pairs = [(seen[k - 1], seen[k], steps[k]) for k in range(1, n) if seen[k - 1] is not None and seen[k] is not None]
        cons = sum(consistency(a, b, st) for a, b, st in pairs) / len(pairs) if pairs else 1.0
        details["consistency"] = round(cons, 3)
        value *= cons
    present = [s for s in seen if s is not None]
    art = sum(s.artefact for s in present) / len(present) if present else 0.0
    details["artefact"] = round(art, 3)
    return damped(value, art, arts), details


# --- reasoning --------------------------------------------------------------------------------


def solve(question: dict[str, Any], seen: SeenScene) -> str | None:
    """Answer a question from a perceived scene (what a judge does when it has no answer key)."""
    kind = question["kind"]
    if kind == "count":
        t = question["target"]
        return str(seen.count(t.get("colour"), t.get("shape")))
    if kind == "more":
        a, b = question["a"], question["b"]
        return "yes" if seen.count(a.get("colour"), a.get("shape")) > seen.count(b.get("colour"), b.get("shape")) else "no"
    o = seen.extreme(question["position"])
    if o is None:
        return None
    return o.colour if kind == "colour_of" else o.shape


def score_reasoning(spec: dict[str, Any], prompt: Prompt, response: Content, resolution: int | None) -> tuple[float, dict[str, Any]]:
    """1 when the final ``Answer:`` line matches the reference (or, without one, the perceived truth)."""
    if "answer" in spec:
        want = L.normalise_answer(str(spec["answer"]))
    else:
        src = first_image(prompt.content)
        if src is None:
            raise ValueError("reasoning prompt without an input image")
        want = L.normalise_answer(solve(spec["question"], perceive(src, resolution)))
    got = L.extract_answer(response.text)
    details = {"expected": want, "extracted": got}
    if got is None:
        details["reason"] = "no 'Answer:' line"
    return float(got is not None and got == want), details

