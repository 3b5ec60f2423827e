"""Prompt suites for the four MMRB2 tasks, drawn from a seed.

Each prompt carries its spec in ``metadata["spec"]``: the public part its text states plus ground
truth (the intended scene(s), the reference answer) that only generators and the verifier use.
Categories are spread evenly within each task.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from bon.content import TASKS, Content, Prompt
from bon.errors import BonError
from generators.synthetic import language as L
from generators.synthetic import scene as S

CATEGORIES: dict[str, tuple[str, ...]] = {
    "t2i": ("count", "colour", "shape", "position", "text"),
    "edit": ("recolour", "add", "remove", "move", "retext"),
    "interleaved": ("steps-2", "steps-3", "steps-4"),
    "reasoning": ("count", "colour_of", "shape_of", "more"),
}
WORDS = ("CAT", "DOG", "SUN", "MOON", "STOP", "OPEN", "EXIT", "HELLO", "PARK", "CAFE", "BOOK", "FISH",
         "TREE", "RAIN", "STAR", "BAKERY", "GARDEN", "HOTEL", "PIZZA", "ZOO", "SALE", "TAXI", "KING",
         "QUIZ", "JAZZ", "WAVE", "MILK", "ROOM 42", "NO 1", "BUS 7", "GATE 3", "LAB", "MENU", "FOX")
HARD_SHARE = 0.35  # reasoning inputs that are damaged
SAFE_MARGIN = 14.0  # px: relations in reference scenes hold with room to spare
MAX_TRIES = 200


def build_suite(seed: int, per_task: int = 40, tasks: Sequence[str] = TASKS, id_prefix: str = "") -> list[Prompt]:
    """``per_task`` prompts for each task, categories in rotation; same seed, same suite."""
    if isinstance(per_task, bool) or not isinstance(per_task, int) or per_task < 0:
        raise BonError(f"synthetic suite: per_task must be a whole number of prompts (0 or more), got {per_task!r:.40}")
    # each draws a spec from the rng, or None when the draw does not fit (then it draws again)
    makers: dict[str, Callable[[np.random.Generator, str], dict[str, Any] | None]] = {
        "t2i": make_t2i, "edit": try_edit, "interleaved": try_interleaved, "reasoning": try_reasoning,
    }
    prompts = []
    for task in tasks:
        cats = CATEGORIES[task]
        for i in range(per_task):
            pid = f"{id_prefix}{task}-{i:04d}"
            category = cats[i % len(cats)]
            rng = S.rng_of("suite", seed, task, i)
            spec = first_valid(lambda: makers[task](rng, category), f"a {task} prompt of kind {category}")
            prompts.append(make_prompt(pid, task, spec, category, seed))
    return prompts


def make_prompt(pid: str, task: str, spec: dict[str, Any], category: str, seed: int) -> Prompt:
    text = L.describe(task, spec, seed=pid)
    values: list[Any] = []
    if task in ("edit", "reasoning"):
        scene = S.Scene.from_dict(spec["input"] if task == "edit" else spec["scene"])
        art = spec.get("input_artefacts") or None
        values.append(S.render(scene, art, S.rng_of("input", seed, pid)))
    values.append(text)
    meta = {"spec": spec, "category": category, "source": "synthetic", "suite_seed": seed}
    return Prompt(id=pid, task=task, content=Content.of(*values), metadata=meta)


# --- shared helpers ---------------------------------------------------------------------------


def pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def distinct_kinds(rng: np.random.Generator, n: int, colour: str | None = None, shape: str | None = None) -> list[tuple[str, str]]:
    """``n`` different (colour, shape) pairs, optionally all of one colour or one shape."""
    pool = [(c, s) for c in S.PALETTE for s in S.SHAPES if (colour in (None, c)) and (shape in (None, s))]
    idx = rng.permutation(len(pool))[:n]
    return [pool[i] for i in idx]


def placed(kinds: list[tuple[str, str]], rng: np.random.Generator, relations: list[dict[str, Any]] = (), taken: Sequence[int] = ()) -> list[S.SceneObject]:
    """Objects on the grid with all ``relations`` (between kinds' indices) holding comfortably."""
    for _ in range(MAX_TRIES):
        objs = S.place_objects([(s, c) for c, s in kinds], rng, taken=taken)
        if all(S.relation_margin(objs[r["a"]], r["rel"], objs[r["b"]]) >= SAFE_MARGIN for r in relations):
            return objs
    raise RuntimeError("could not lay out the relations")


def obj_dict(o: S.SceneObject) -> dict[str, str]:
    return {"colour": o.colour, "shape": o.shape}


# --- t2i --------------------------------------------------------------------------------------


def make_t2i(rng: np.random.Generator, category: str) -> dict[str, Any]:
    relations: list[dict[str, Any]] = []
    text = None
    if category == "count":
        kinds = distinct_kinds(rng, 2)
        counts = [int(rng.integers(2, 6))] + ([int(rng.integers(1, 4))] if rng.random() < 0.5 else [])
        kinds = kinds[: len(counts)]
    else:  # one of each kind: 2-3 of them (1-2 beside a sign), all of one colour for "shape"
        n = int(rng.integers(1, 3) if category == "text" else rng.integers(2, 4))
        kinds = distinct_kinds(rng, n, colour=pick(rng, list(S.PALETTE)) if category == "shape" else None)
        counts = [1] * len(kinds)
        if category == "position":
            relations = [{"a": 0, "rel": pick(rng, L.RELATIONS), "b": 1}]
        elif category == "text":
            text = pick(rng, WORDS)
    groups = [{"count": n, "colour": c, "shape": s} for (c, s), n in zip(kinds, counts)]
    flat = [(g["colour"], g["shape"]) for g in groups for _ in range(g["count"])]
    objs = placed(flat, rng, relations)  # relation groups have count 1, so index = object index
    reference = S.Scene(objs, text)
    return {"groups": groups, "relations": relations, "text": text, "reference": reference.to_dict()}


# --- edit -------------------------------------------------------------------------------------


def first_valid(attempt: Callable[[], dict[str, Any] | None], what: str) -> dict[str, Any]:
    """Draw specs until one is valid; the seeded rng makes the number of draws reproducible."""
    for _ in range(MAX_TRIES):
        spec = attempt()
        if spec is not None:
            return spec
    raise RuntimeError(f"could not build {what}")


def try_edit(rng: np.random.Generator, op: str) -> dict[str, Any] | None:
    kinds = distinct_kinds(rng, int(rng.integers(2, 5)))
    text = pick(rng, WORDS) if op == "retext" or rng.random() < 0.3 else None
    before = S.Scene(placed(kinds, rng), text)
    after = before.copy()
    target = int(rng.integers(len(kinds)))
    o = before.objects[target]
    present = set(kinds)
    if op == "recolour":
        options = [c for c in S.PALETTE if (c, o.shape) not in present]
        new = pick(rng, options)
        after.objects[target].colour = new
        spec = {"op": "recolour", "object": obj_dict(o), "new_colour": new}
    elif op == "remove":
        del after.objects[target]
        spec = {"op": "remove", "object": obj_dict(o)}
    elif op == "add":
        c, s = pick(rng, [k for k in distinct_kinds(rng, 18) if k not in present])
        rel = pick(rng, L.RELATIONS)
        new_obj = fit_relative(rng, before, (c, s), rel, o)
        if new_obj is None:
            return None
        after.objects.append(new_obj)
        spec = {"op": "add", "object": {"colour": c, "shape": s}, "relation": {"rel": rel, "anchor": obj_dict(o)}}
    elif op == "move":
        anchor_i = (target + 1 + int(rng.integers(len(kinds) - 1))) % len(kinds)
        anchor = before.objects[anchor_i]
        rel = pick(rng, [r for r in L.RELATIONS if S.relation_margin(o, r, anchor) < 0])
        moved = fit_relative(rng, before, (o.colour, o.shape), rel, anchor, exclude=o, size=o.size)
        if moved is None:
            return None
        after.objects[target] = moved
        spec = {"op": "move", "object": obj_dict(o), "relation": {"rel": rel, "anchor": obj_dict(anchor)}}
    else:
        new_text = pick(rng, [w for w in WORDS if w != text])
        after.text = new_text
        spec = {"op": "retext", "text": new_text}
    return {**spec, "input": before.to_dict(), "output": after.to_dict()}


def fit_relative(rng: np.random.Generator, scene: S.Scene, kind: tuple[str, str], rel: str, anchor: S.SceneObject,
                 exclude: S.SceneObject | None = None, size: float | None = None) -> S.SceneObject | None:
    """A new object of ``kind`` in a free cell where ``rel`` to ``anchor`` holds comfortably."""
    cells = S.free_cells(scene, exclude=exclude)
    rng.shuffle(cells)
    for cell in cells:
        sz = size if size is not None else float(rng.uniform(S.MIN_SIZE, S.MAX_SIZE))
        for _ in range(6):
            x, y = S.jittered(cell, sz, rng)
            cand = S.SceneObject(kind[1], kind[0], x, y, sz)
            if S.relation_margin(cand, rel, anchor) >= SAFE_MARGIN:
                return cand
    return None


# --- interleaved ------------------------------------------------------------------------------


def try_interleaved(rng: np.random.Generator, category: str) -> dict[str, Any] | None:
    n_steps = int(category.split("-")[1])  # steps-N
    kinds = distinct_kinds(rng, int(rng.integers(1, 3)))
    scene = initial = S.Scene(placed(kinds, rng))
    start = [obj_dict(o) for o in scene.objects]
    steps, scenes = [], []
    for _ in range(n_steps):
        step = next_step(rng, scene)
        if step is None:
            return None
        steps.append(step[0])
        scene = step[1]
        scenes.append(scene.to_dict())
    return {"start": start, "steps": steps, "initial": initial.to_dict(), "scenes": scenes}


def next_step(rng: np.random.Generator, scene: S.Scene) -> tuple[dict[str, Any], S.Scene] | None:
    """A valid operation on ``scene`` and the scene after it (objects keep unique kinds)."""
    present = {(o.colour, o.shape) for o in scene.objects}
    ops = ["add", "recolour"] + (["remove"] if len(scene.objects) > 1 else [])
    if len(scene.objects) < 2:
        ops.append("add")
    op = pick(rng, ops)
    after = scene.copy()
    if op == "add":
        c, s = pick(rng, [k for k in distinct_kinds(rng, 18) if k not in present])
        if rng.random() < 0.5 and scene.objects:
            anchor = pick(rng, scene.objects)
            rel = pick(rng, L.RELATIONS)
            new = fit_relative(rng, scene, (c, s), rel, anchor)
            if new is None:
                return None
            step = {"op": "add", "object": {"colour": c, "shape": s}, "relation": {"rel": rel, "anchor": obj_dict(anchor)}}
        else:
            free = S.free_cells(scene)
            if not free:
                return None
            new = S.place_objects([(s, c)], rng, cells=[pick(rng, free)])[0]
            step = {"op": "add", "object": {"colour": c, "shape": s}, "relation": None}
        after.objects.append(new)
        return step, after
    i = int(rng.integers(len(scene.objects)))
    o = scene.objects[i]
    if op == "remove":
        del after.objects[i]
        return {"op": "remove", "object": obj_dict(o)}, after
    options = [c for c in S.PALETTE if (c, o.shape) not in present]
    new_colour = pick(rng, options)
    after.objects[i].colour = new_colour
    return {"op": "recolour", "object": obj_dict(o), "new_colour": new_colour}, after


# --- reasoning --------------------------------------------------------------------------------


def try_reasoning(rng: np.random.Generator, kind: str) -> dict[str, Any] | None:
    n = int(rng.integers(3, 8))
    colours = list(rng.permutation(list(S.PALETTE))[: int(rng.integers(2, 4))])
    kinds = [(pick(rng, colours), pick(rng, S.SHAPES)) for _ in range(n)]
    scene = S.Scene(S.place_objects([(s, c) for c, s in kinds], rng))
    answer = answer_question_for(rng, kind, scene)
    if answer is None:
        return None
    question, value = answer
    spec: dict[str, Any] = {"question": question, "scene": scene.to_dict(), "answer": value}
    if rng.random() < HARD_SHARE:  # a photo-like input: damage that can fool a careless eye
        spec["input_artefacts"] = pick(rng, [{"noise": round(float(rng.uniform(0.2, 0.5)), 2)},
                                             {"blur": round(float(rng.uniform(1.0, 2.6)), 2)},
                                             {"blocks": round(float(rng.uniform(0.5, 1.0)), 2)},
                                             {"scribble": int(rng.integers(2, 6))}])
    return spec


def answer_question_for(rng: np.random.Generator, kind: str, scene: S.Scene) -> tuple[dict[str, Any], str] | None:
    objs = scene.objects
    if kind == "count":
        o = pick(rng, objs)
        mode = int(rng.integers(3))
        target = {"colour": o.colour if mode != 1 else None, "shape": o.shape if mode != 0 else None}
        n = sum(1 for x in objs if target["colour"] in (None, x.colour) and target["shape"] in (None, x.shape))
        return {"kind": "count", "target": target}, str(n)
    if kind in ("colour_of", "shape_of"):
        pos = pick(rng, L.POSITIONS)
        key = S.POSITION_KEYS[pos]
        ranked = sorted(objs, key=key)
        if key(ranked[1]) - key(ranked[0]) < 10:
            return None  # no clear extreme
        best = ranked[0]
        return {"kind": kind, "position": pos}, best.colour if kind == "colour_of" else best.shape
    by_colour = rng.random() < 0.6
    values = sorted({o.colour if by_colour else o.shape for o in objs})
    if len(values) < 2:
        return None
    a, b = (values[i] for i in rng.permutation(len(values))[:2])
    f = (lambda o, v: o.colour == v) if by_colour else (lambda o, v: o.shape == v)
    na, nb = sum(f(o, a) for o in objs), sum(f(o, b) for o in objs)
    if na == nb:
        return None
    qa = {"colour": a, "shape": None} if by_colour else {"colour": None, "shape": a}
    qb = {"colour": b, "shape": None} if by_colour else {"colour": None, "shape": b}
    return {"kind": "more", "a": qa, "b": qb}, "yes" if na > nb else "no"
