"""The latent truth of a synthetic candidate: what it really shows, known because the generator drew it.

Every fault a generator commits (see :mod:`generators.synthetic.generator`) is a deviation from
the ideal answer with a known severity. Here each becomes a *defect* ``[aspect, cost]`` (cost in
[0, 1]: how much of the answer's worth it destroys), and the true quality is the product of
``1 - cost`` over the defects. This is the world's ground truth; it is computed from what was drawn,
never from pixels, and it shares no code with the verifier (which reads pixels and text and can be
fooled) or with any judge. Simulated annotators (``bon.stages.preference``) look at these defects
the way a careful human looks at an image: they may miss a small one and weigh aspects their own way.

The costs are a statement about what matters to a person asking for the image, not about what a
metric checks: an answer given without the ``Answer:`` line is still right to a reader, rambling
costs a little, a wrong answer costs nearly everything.
"""

from __future__ import annotations

from typing import Any

Defect = list  # [aspect: str, cost: float]

# cost of an artefact at full severity, and the floor any visible damage costs
DAMAGE_BASE, DAMAGE_SPAN = 0.1, 0.4
# severity in [0, 1] of each artefact kind from the amount the generator applied
DAMAGE_SEVERITY = {
    "noise": lambda a: a / 0.4,
    "blur": lambda a: (a - 0.3) / 1.5,
    "blocks": lambda a: a / 0.85,
    "scribble": lambda a: (a - 1) / 3,
}
FIXED_COSTS: dict[str, tuple[str, float]] = {  # fault -> (aspect, cost)
    "relation": ("layout", 0.3),
    "colour": ("attributes", 0.25),
    "shape": ("attributes", 0.25),
    "extra object": ("extras", 0.15),
    "wrong target": ("instruction", 0.6),
    "drift": ("consistency", 0.15),
    "missing image": ("structure", 0.35),
    "extra image": ("structure", 0.1),
    "wrong answer": ("answer", 0.85),
    "no answer line": ("format", 0.1),
    "irrelevant image": ("style", 0.1),
}
OVER_EDIT = {"background": 0.15, "drift": 0.15, "recolour other": 0.25, "drop other": 0.3, "text": 0.2}


def defect(fault: dict[str, Any]) -> Defect | None:
    """The defect one logged fault leaves in the candidate (None: the fault costs nothing)."""
    kind = fault["fault"]
    if kind in FIXED_COSTS:
        aspect, cost = FIXED_COSTS[kind]
        return [aspect, cost]
    if kind == "artefact":
        severity = min(1.0, max(0.0, DAMAGE_SEVERITY[fault["type"]](float(fault["amount"]))))
        return ["damage", DAMAGE_BASE + DAMAGE_SPAN * severity]
    if kind == "count":
        off = abs(int(fault["drew"]) - int(fault["want"]))
        return ["count", 0.5 if int(fault["drew"]) == 0 else min(0.6, 0.25 * off)]
    if kind == "text":
        return ["text", 0.4 if fault.get("detail") == "missing" else 0.25]
    if kind == "under-edit":
        return ["instruction", 0.8 if fault.get("detail") == "no change" else 0.45]
    if kind == "over-edit":
        return ["preservation", OVER_EDIT.get(str(fault.get("detail")), 0.2)]
    if kind == "step wrong":
        return ["steps", 0.3 + (0.15 if fault.get("carried") else 0.0)]
    if kind == "step text":
        return ["text", 0.15 if fault.get("detail") == "missing" else 0.08]
    if kind == "rambling":
        return ["style", min(0.15, 0.02 * int(fault.get("sentences", 0)))]
    return None  # e.g. "sketch": a helpful extra, not a defect


def truth_of(faults: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"quality": q, "defects": [[aspect, cost], ...]}`` for a candidate's fault log."""
    defects = [d for d in (defect(f) for f in faults) if d is not None]
    quality = 1.0
    for _, cost in defects:
        quality *= 1.0 - cost
    return {"quality": round(quality, 6), "defects": [[a, round(c, 4)] for a, c in defects]}
