"""Hand-made ISG-Bench items, answers and canned grader replies (data only, no bon import).

tests/test_official_isg.py scores them with bon's official metric through ``grader=replay:``; the
expected values in tests/official_isg_expected.json came from running the official evaluation code
(Dongping-Chen/ISG at commit de504cdda1cab7bd874c252f670eb1833290db5a: ``ISG-eval.py``'s ``process_item``
through ``main()``, then ``calculate_performance.analyze_data``) on the same items, its API client
answering with the same replies (harness: benchmarks/official_harness/isg_official.py).

Every case is one item (its own ``id``) with one answer (``output``); ``replies`` maps a question
(``holistic``, ``block/<k>``, ``image/<k>``) to the grader's raw text, or None for a call that failed
for good. Image contents do not matter (the replies are canned): every path names a small PNG the test
writes. Question texts carry the case id, which is how the harness tells its requests apart.
"""

from __future__ import annotations

import json

YES = json.dumps({"Judge": "Yes", "Reason": "seen"})
NO = json.dumps({"Judge": "No", "Reason": "not seen"})


def judge(value) -> str:
    return json.dumps({"Judge": value, "Reason": "why"})


def overall(value) -> str:
    return json.dumps({"coherence": {"score": 5, "explanation": "ok"}, "overall_score": value, "final_thoughts": "fine"})


def text(s: str) -> dict:
    return {"type": "text", "content": s}


def img(path: str) -> dict:
    return {"type": "image", "content": path}


def block_q(cid: str, k: int, subject: str, obj: str, **extra) -> dict:
    q = {"subject": subject, "object": obj, "relation": "relates",
         "Question": f"({cid} block/{k}) Does {subject} follow from {obj}?"}
    q.update(extra)
    return q


def image_q(cid: str, k: int, image: str, qid: int, pre: list | None = None) -> dict:
    return {"image": image, "Question": f"({cid} image/{k}) Is the thing in this image?", "id": qid,
            "Preliminary": [] if pre is None else pre}


def predict(cid: str, blocks: list, images: list | None, image_form: str = "dict") -> dict:
    out: dict = {"structural": {"Query": [], "Answer": []}, "block_qa": {"questions": blocks}}
    if images is not None:
        out["image_qa"] = {"questions": images} if image_form == "dict" else images
    return out


def standard(cid: str, category: str = "Prediction") -> dict:
    """A 3-part item (text, image, image) with two block and three image questions, one with a Preliminary."""
    return {
        "id": cid, "Category": category,
        "Query": [text(f"[{cid}] A person washes their hands. Show in 2 images what happens next,\nwith a description first."),
                  img("q/hands.png")],
        "Golden": [text("The soap is rinsed off."), img("g/rinse1.png"), img("g/rinse2.png")],
        "predict": predict(cid, [block_q(cid, 0, "<gen_text1>", "<query_img1>"), block_q(cid, 1, "<gen_img1>", "<gen_img2>")],
                           [image_q(cid, 0, "<gen_img1>", 0), image_q(cid, 1, "<gen_img1>", 1, [0]), image_q(cid, 2, "<gen_img2>", 2)]),
    }


def case(cid: str, output: list, replies: dict, **changes) -> dict:
    item = standard(cid, changes.pop("category", "Prediction"))
    item.update(changes)
    return {"item": {**item, "output": output}, "replies": replies}


ANSWER = [text("The water runs over the hands."), img("a/one.png"), img("a/two.png")]
ALL_YES = {"block/0": judge(10), "block/1": judge(10), "image/0": YES, "image/2": YES, "holistic": overall(7)}


def cases() -> list[dict]:
    c = []
    # the example: one item, two answers; the grader says yes, blocks 10, holistic 7
    c.append(case("ex-a", ANSWER, ALL_YES))
    c.append(case("ex-b", [text("The water runs."), text("Over the hands."), img("a/one.png"), img("a/two.png")], ALL_YES))
    c.append(case("block-mean", ANSWER, {**ALL_YES, "block/0": judge(6), "block/1": judge(9)}))
    c.append(case("block-float", ANSWER, {**ALL_YES, "block/0": judge(7.5), "block/1": judge(4)}, category="HowTo"))
    c.append(case("block-not-json", ANSWER, {**ALL_YES, "block/0": "I would say 8", "block/1": judge(5)}))
    c.append(case("block-no-judge", ANSWER, {**ALL_YES, "block/0": json.dumps({"score": 9}), "block/1": json.dumps({"Reason": "x"})}))
    c.append(case("block-judge-text", ANSWER, {**ALL_YES, "block/0": judge("8"), "block/1": judge(9)}))
    c.append(case("block-bare-number", ANSWER, {**ALL_YES, "block/0": "7", "block/1": judge(9)}))
    c.append(case("block-call-failed", ANSWER, {**ALL_YES, "block/0": None, "block/1": judge(9)}))
    # a question naming a block the answer lacks, one without a Question, a text-text one
    cid = "block-skips"
    c.append(case(cid, ANSWER, {**ALL_YES, "block/2": judge(2)},
                  predict=predict(cid, [block_q(cid, 0, "<gen_text1>", "<gen_img3>"),
                                        {"subject": "<gen_img1>", "object": "<gen_img2>", "relation": "r"},
                                        block_q(cid, 2, "<gen_text1>", "<query_text1>")],
                                  [image_q(cid, 0, "<gen_img1>", 0)]),
                  category="Scientific"))
    c.append(case("block-none-asked", ANSWER, {"image/0": YES, "holistic": overall(6)},
                  predict=predict("block-none-asked", [block_q("block-none-asked", 0, "<gen_text9>", "<gen_img1>")],
                                  [image_q("block-none-asked", 0, "<gen_img1>", 0)])))
    c.append(case("block-empty", ANSWER, {"image/0": NO, "holistic": overall(8)},
                  predict=predict("block-empty", [], [image_q("block-empty", 0, "<gen_img1>", 0)]), category="HowTo"))
    c.append(case("no-block-qa", ANSWER, {"image/0": YES, "image/2": YES},
                  predict={"image_qa": {"questions": [image_q("no-block-qa", 0, "<gen_img1>", 0)]}}))
    c.append(case("image-mixed", ANSWER, {**ALL_YES, "image/0": judge("YES"), "image/2": NO}))
    c.append(case("image-unreadable", ANSWER, {**ALL_YES, "image/0": "yes it is", "image/2": json.dumps({"Reason": "no verdict"})}))
    c.append(case("image-call-failed", ANSWER, {**ALL_YES, "image/0": None}))
    cid = "image-list"
    c.append(case(cid, ANSWER, {"block/0": judge(3), "image/0": YES, "image/1": YES, "holistic": overall(5)},
                  predict=predict(cid, [block_q(cid, 0, "<gen_img1>", "<gen_img2>")],
                                  [image_q(cid, 0, "<gen_img1>", 7), image_q(cid, 1, "<gen_img2>", 8),
                                   image_q(cid, 2, "<gen_img3>", 9), image_q(cid, 3, "<gen_img2>", 10, [7])], image_form="list"),
                  category="Object_VQA"))
    c.append(case("no-image-qa", ANSWER, {"block/0": judge(8), "holistic": overall(9)},
                  predict={"block_qa": {"questions": [block_q("no-image-qa", 0, "<gen_text1>", "<gen_img2>")]}},
                  category="Historical"))
    c.append(case("image-judge-bool", ANSWER, {**ALL_YES, "image/0": judge(True)}))
    c.append(case("image-qa-empty-dict", ANSWER, ALL_YES, predict={**standard("image-qa-empty-dict")["predict"], "image_qa": {}}))
    c.append(case("holistic-no-score", ANSWER, {**ALL_YES, "holistic": json.dumps({"final_thoughts": "good"})}))
    c.append(case("holistic-not-json", ANSWER, {**ALL_YES, "holistic": "Overall: 9/10"}, category="painting"))
    c.append(case("holistic-failed", ANSWER, {**ALL_YES, "holistic": None}, category="painting"))
    c.append(case("holistic-float", ANSWER, {**ALL_YES, "holistic": overall(6.5)}, category="HowTo"))
    c.append(case("empty-first-text", [text(""), img("a/one.png"), img("a/two.png")], {**ALL_YES, "holistic": overall(9)}))
    c.append(case("wrong-structure", [img("a/one.png"), text("Then it dries.")], {"holistic": overall(4)},
                  category="Art Style Transfer"))
    c.append(case("too-few-parts", [text("Just words.")], {"holistic": overall(2)}, category="Art Style Transfer"))
    cid = "image-first"
    c.append(case(cid, [img("a/one.png"), text("Rendered as watercolour.")],
                  {"block/0": judge(9), "image/0": YES, "holistic": overall(8)},
                  Golden=[img("g/water.png"), text("A watercolour of the photo.")],
                  predict=predict(cid, [block_q(cid, 0, "<gen_img1>", "<gen_text1>")], [image_q(cid, 0, "<gen_img1>", 0)]),
                  category="Art Style Transfer"))
    c.append(case("no-group", ANSWER, {**ALL_YES, "holistic": overall(3)}, category="Not A Category"))
    return c


def fresh_cases() -> list[dict]:
    """A second hand-made set, written after the first had passed: other groups, two text parts, and the
    value shapes the first set does not try (Judge null/true/0/a JSON string, a lower-case or spaced yes,
    holistic 0, out of range, an empty object)."""
    c = []
    two_texts = [text("First the water."), img("a/one.png"), text("Then the towel."), img("a/two.png")]
    golden4 = [text("Rinse."), img("g/rinse1.png"), text("Dry."), img("g/rinse2.png")]
    cid = "fresh-two-texts"
    c.append(case(cid, two_texts, {"block/0": judge(7), "block/1": judge(4), "image/0": YES, "image/1": NO, "holistic": overall(6)},
                  Golden=golden4, category="visual storytelling text-image",
                  predict=predict(cid, [block_q(cid, 0, "<gen_text2>", "<gen_img2>"), block_q(cid, 1, "<gen_text1>", "<gen_text2>")],
                                  [image_q(cid, 0, "<gen_img1>", 0), image_q(cid, 1, "<gen_img2>", 1)])))
    c.append(case("fresh-judge-null", ANSWER, {**ALL_YES, "block/0": judge(None), "block/1": judge(8)}, category="3D_object"))
    c.append(case("fresh-judge-true", ANSWER, {**ALL_YES, "block/0": judge(True), "block/1": judge(9)}, category="3D_object"))
    c.append(case("fresh-judge-zero", ANSWER, {**ALL_YES, "block/0": judge(0), "block/1": judge(0)},
                  category="Realistic Object Detection"))
    c.append(case("fresh-judge-string-json", ANSWER, {**ALL_YES, "block/0": json.dumps("Judge: 9"), "block/1": judge(6)},
                  category="Realistic Object Detection"))
    c.append(case("fresh-judge-list", ANSWER, {**ALL_YES, "block/0": json.dumps([9]), "block/1": json.dumps({"judge": 9})},
                  category="Imaginary Object Detection"))
    c.append(case("fresh-yes-lower", ANSWER, {**ALL_YES, "image/0": judge("yes"), "image/2": judge("Yes ")},
                  category="Animation Images"))
    c.append(case("fresh-holistic-zero", ANSWER, {**ALL_YES, "holistic": overall(0)}, category="Animation Images"))
    c.append(case("fresh-holistic-eleven", ANSWER, {**ALL_YES, "holistic": overall(11)}, category="Attribute Transfer"))
    c.append(case("fresh-holistic-empty", ANSWER, {**ALL_YES, "holistic": "{}"}, category="Photo Variation"))
    c.append(case("fresh-holistic-zero-json", ANSWER, {**ALL_YES, "holistic": "0"}, category="Photo Variation"))
    c.append(case("fresh-wrong-structure-text-first", [text("A caption."), img("a/one.png")], {"holistic": overall(5)},
                  Golden=[img("g/water.png"), text("A watercolour of the photo.")], category="Portrait Variation"))
    return c
