"""Model-graded verifiers: what the grader is shown, how its answers are read and combined, and that a
grading failure is a missing score with its reason (never a zero).

Three graders: a scripted one (exact answers, records every turn), a tiny random LLaVA loaded from
disk through the real transformers path, and a local OpenAI-style server for the API grader.
"""

from __future__ import annotations

import json
import math
from http.server import BaseHTTPRequestHandler
from typing import Any, Sequence

import pytest
from PIL import Image

from bon import registry
from bon.content import Candidate, Content, Prompt
from bon.errors import BonError
from openai_server import LocalServer
from suite_fixtures import isg_rows
from verifiers._grader import DIGITS, Grader, GradingFailed, NoLogprobs
from verifiers.gedit import GEditVerifier
from verifiers.isg import IsgVerifier
from verifiers.vqascore import VqaScoreVerifier

SRC = Image.new("RGB", (40, 32), (200, 30, 30))
EDIT = Image.new("RGB", (48, 36), (30, 200, 30))


class Scripted(Grader):
    """Answers with scripted texts (in turn) or next-word probabilities; records every turn."""

    backend_name = "scripted"

    def __init__(self, answers: Sequence[str] = (), probs: Sequence[dict[str, float]] = (), fail: str | None = None):
        self.answers, self.probs, self.fail = list(answers), list(probs), fail
        self.turns: list[list] = []

    def identity(self) -> dict[str, Any]:
        return {"backend": "scripted", "model": "script-1"}

    def answer(self, turns, max_new_tokens=256):
        if self.fail:
            raise GradingFailed(self.fail)
        self.turns += turns
        return [self.answers.pop(0) for _ in turns]

    def next_word_probs(self, turns, words):
        if self.fail:
            raise GradingFailed(self.fail)
        self.turns += turns
        return [self.probs.pop(0) for _ in turns]


def texts(turn) -> str:
    return "\n".join(v for k, v in turn if k == "text")


def images(turn) -> list:
    return [v for k, v in turn if k == "image"]


def edit_prompt() -> Prompt:
    return Prompt("e1", "edit", Content.of("Make the car green", SRC), {"category": "color_alter"})


def cand(*values, gen="g", index=0) -> Candidate:
    return Candidate("p", index, gen, 0, Content.of(*values))


# --- GEdit -----------------------------------------------------------------------------------------------


def test_gedit_generate_shows_both_images_and_combines_like_gedit():
    g = Scripted(answers=['{"reasoning": "mostly green", "score": [8, 6]}', 'Sure: {"score": [9, 4], "reasoning": "blurry"}'])
    v = GEditVerifier(grader=g, metric="bon")
    s = v.score(edit_prompt(), cand(EDIT))
    sc_turn, pq_turn = g.turns
    assert len(images(sc_turn)) == 2 and len(images(pq_turn)) == 1
    assert '"Make the car green"' in texts(sc_turn) and "0 to 10" in texts(sc_turn) and '"score"' in texts(sc_turn)
    assert "instruction" not in texts(pq_turn).lower() and "Naturalness" in texts(pq_turn)
    # both images scaled to about 512 x 512 pixels, aspect kept, as GEdit-Bench's scorer does
    src, edited = images(sc_turn)
    assert abs(src.width * src.height - 512 * 512) < 2000 and abs(src.width / src.height - 40 / 32) < 0.01
    assert images(pq_turn)[0].size == edited.size
    assert s.details["sc"] == 6 and s.details["pq"] == 4  # min of each pair
    assert s.value == pytest.approx(math.sqrt(6 * 4) / 10)
    assert s.details["grader"] == {"backend": "scripted", "model": "script-1"} and s.details["answers"]["pq"].startswith("Sure")


def test_gedit_logits_reads_digit_probabilities():
    def peaked(d: int) -> dict[str, float]:
        return {str(k): (0.5 if k == d else 0.5 / 9) for k in range(10)}

    g = Scripted(probs=[peaked(9), peaked(9), peaked(0), peaked(9)])
    s = GEditVerifier(grader=g, metric="bon", mode="logits").score(edit_prompt(), cand(EDIT))
    assert len(g.turns) == 4 and all("one digit from 0" in texts(t) for t in g.turns)
    e9 = (0.5 * 9 + sum(k * 0.5 / 9 for k in range(9))) / 1.0
    e0 = sum(k * 0.5 / 9 for k in range(1, 10))
    assert s.details["sc_scores"][0] == pytest.approx(10 * e9 / 9, abs=1e-3)
    assert s.details["pq"] == pytest.approx(10 * e0 / 9, abs=1e-3)
    assert s.value == pytest.approx(math.sqrt(s.details["sc"] * s.details["pq"]) / 10, abs=1e-4)


@pytest.mark.parametrize("answers, prompt, candidate, match", [
    (["I like it", '{"score": [5, 5]}'], edit_prompt(), cand(EDIT), "semantic-consistency answer unparseable: no score in 'I like it'"),
    (['{"score": [5, 5]}', '{"score": [5, 11]}'], edit_prompt(), cand(EDIT), "perceptual-quality answer score 11 outside 0-10"),
    ([], Prompt("e", "edit", Content.of("Make it green")), cand(EDIT), "has no input image"),
    ([], edit_prompt(), cand("I edited it, trust me"), "the candidate has no image"),
])
def test_gedit_failures_are_missing_with_the_reason(answers, prompt, candidate, match):
    s = GEditVerifier(grader=Scripted(answers=answers), metric="bon").score(prompt, candidate)
    assert s.value is None and match in s.missing


def test_gedit_grader_errors_are_missing():
    s = GEditVerifier(grader=Scripted(fail="grader: HTTP 503: overloaded"), metric="bon").score(edit_prompt(), cand(EDIT))
    assert s.value is None and s.missing == "gedit: grader: HTTP 503: overloaded" and s.details["grader"]["model"] == "script-1"


def test_graded_verifiers_need_a_grader_model():
    for name in ("gedit", "vqascore", "isg"):
        with pytest.raises(BonError, match="required"):
            registry.create("verifier", name)
    with pytest.raises(BonError, match="mode must be"):
        GEditVerifier(grader=Scripted(), mode="vibes")
    with pytest.raises(BonError, match="unknown option"):
        GEditVerifier(grader=Scripted(), temprature=0.1)


# --- ISG -------------------------------------------------------------------------------------------------


def isg_prompt() -> Prompt:
    row = isg_rows()[0]
    from generators.suites.isg_bench import evaluation_graph

    return Prompt("0000", "interleaved", Content.of(row["Query"][0]["content"], SRC),
                  {"isg": evaluation_graph(row["predict"]), "category": "Prediction"})


def test_isg_levels_questions_and_dependencies():
    # block: two relation questions; image: q0 "no" so q1 (which needs q0) is never asked, q2 "yes"; holistic 8
    g = Scripted(answers=['{"score": 6}', '{"score": 10}', "No.", "Yes", '{"score": 8}'])
    v = IsgVerifier(grader=g, metric="bon")
    s = v.score(isg_prompt(), cand("The soap is rinsed off.", RED, BLUE))
    assert s.missing is None
    block1, block2, img0, img2, holistic = g.turns
    assert 'The text: "The soap is rinsed off."' in texts(block1) and len(images(block1)) == 1
    assert "Does the text describe what happens after this image?" in texts(block1)  # tags renamed
    assert images(block1)[0].size == SRC.size  # <query_img1>: the prompt's own picture
    assert len(images(block2)) == 2 and "Does Image 1 show an earlier moment than Image 2?" in texts(block2)
    assert "Are there hands in this image?" in texts(img0) and "Is there running water?" in texts(img2)
    assert images(img2)[0].getpixel((0, 0)) == BLUE.getpixel((0, 0))  # <gen_img2>
    assert "The answer:" in texts(holistic) and len(images(holistic)) == 3
    assert s.details["level_scores"] == {"structure": 1.0, "block": 0.8, "image": pytest.approx(1 / 3, abs=1e-4), "holistic": 0.8}
    assert s.value == pytest.approx((1 + 0.8 + 1 / 3 + 0.8) / 4, abs=1e-4)
    assert s.details["skipped_levels"] == ["parts"]


RED, BLUE = Image.new("RGB", (20, 20), "red"), Image.new("RGB", (20, 20), "blue")


def test_isg_wrong_structure_zeroes_block_and_image_but_keeps_holistic():
    g = Scripted(answers=['{"score": 5}'])
    s = IsgVerifier(grader=g, metric="bon").score(isg_prompt(), cand("Only one picture:", RED))
    assert len(g.turns) == 1  # only the holistic grade was asked
    assert s.details["level_scores"] == {"structure": 0.0, "block": 0.0, "image": 0.0, "holistic": 0.5}
    assert s.value == pytest.approx(0.125)


def test_isg_parts_level_for_prompts_without_questions():
    p = Prompt("u", "interleaved", Content.of("How do I make tea? Use 2 pictures."))
    g = Scripted(answers=['{"score": 7}', '{"score": 9}', '{"score": 10}'])
    s = IsgVerifier(grader=g, metric="bon").score(p, cand("Boil water.", RED, "Steep the bag.", BLUE))
    part1, part2, _ = g.turns
    assert '"Boil water."' in texts(part1) and '"Steep the bag."' in texts(part2) and "picture 2" in texts(part2)
    assert s.details["level_scores"] == {"structure": 1.0, "parts": 0.8, "holistic": 1.0}


def test_isg_unreadable_grades():
    # one unreadable block answer: the level uses the other; all unreadable: the score is missing
    g = Scripted(answers=["hmm", '{"score": 10}', "Yes", "yes", "yes", '{"score": 10}'])
    s = IsgVerifier(grader=g, metric="bon").score(isg_prompt(), cand("Text.", RED, BLUE))
    assert s.details["levels"]["block"]["failed"] == 1 and s.details["level_scores"]["block"] == 1.0
    g = Scripted(answers=["hmm", "no idea"])
    s = IsgVerifier(grader=g, metric="bon", levels=["structure", "block"]).score(isg_prompt(), cand("Text.", RED, BLUE))
    assert s.value is None and "block level: every question failed" in s.missing
    s = IsgVerifier(grader=Scripted(answers=["dunno"]), metric="bon", levels=["holistic"]).score(isg_prompt(), cand("x"))
    assert s.value is None and "holistic grade" in s.missing


def test_isg_logits_mode_uses_yes_probability_and_digits():
    yes = {"Yes": 0.6, "yes": 0.0, "No": 0.2, "no": 0.0}
    digits = {d: (1.0 if d == "9" else 0.0) for d in DIGITS}
    g = Scripted(probs=[yes, yes, yes, digits])
    s = IsgVerifier(grader=g, metric="bon", mode="logits", levels=["image", "holistic"]).score(isg_prompt(), cand("T.", RED, BLUE))
    assert s.details["level_scores"] == {"image": pytest.approx(0.75), "holistic": 1.0}


# --- VQAScore with a scripted API-style grader ----------------------------------------------------------


def test_vqascore_with_a_grader_object_and_answer_fallback():
    p = Prompt("t", "t2i", Content.of("a red cube"))
    g = Scripted(probs=[{"Yes": 0.8}, {"Yes": 0.4}])
    s = VqaScoreVerifier(grader=g).score(p, cand(RED, BLUE))
    assert s.value == pytest.approx(0.6) and s.details["per_image"] == [0.8, 0.4]
    assert texts(g.turns[0]) == 'Does this figure show "a red cube"? Please answer yes or no.'

    class NoProbs(Scripted):
        def next_word_probs(self, turns, words):
            raise NoLogprobs("no log-probabilities")

    s = VqaScoreVerifier(grader=NoProbs(answers=["Yes."]), fallback_to_answer=True).score(p, cand(RED))
    assert s.value == 1.0 and s.details["mode"] == "answer"
    with pytest.raises(BonError, match=r'^vqascore: no log-probabilities; VQAScore is P\("Yes"\).*fallback_to_answer: true'):
        VqaScoreVerifier(grader=NoProbs(answers=["Yes."])).score(p, cand(RED))  # never a silent 0/1 score
    assert VqaScoreVerifier(grader=g).score(p, cand("words only")).missing.endswith("has no image")


# --- a tiny random LLaVA through the real transformers path --------------------------------------------


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from conftest_models import build_llava

    folder = tmp_path_factory.mktemp("llava")
    build_llava(folder)
    return folder


def spy_render(grader) -> list:
    seen: list = []
    real = grader.backend.render

    def render(parts, suffix=""):
        seen.append(list(parts))
        return real(parts, suffix)

    grader.backend.render = render
    return seen


def test_tiny_vlm_gedit_logits_and_generate(llava):
    v = registry.create("verifier", "gedit", model=str(llava), metric="bon", mode="logits", device="cpu", image_area=4096)
    seen = spy_render(v.grader)
    s = v.score(edit_prompt(), cand(EDIT))
    assert s.missing is None and 0.0 <= s.value <= 1.0
    assert len(seen) == 4 and all(sum(k == "image" for k, _ in parts) in (1, 2) for parts in seen)
    assert '"Make the car green"' in "".join(v for k, v in seen[0] if k == "text")
    assert s.details["grader"]["revision"].startswith("local:") and s.details["grader"]["model"] == str(llava)
    assert v.grader.backend.forward_batches == [4]  # the four questions go through the model in one batch
    # a random model writes no JSON: a missing score naming the unreadable answer, never a zero
    g = registry.create("verifier", "gedit", model=str(llava), metric="bon", device="cpu", image_area=4096, max_new_tokens=6)
    s = g.score(edit_prompt(), cand(EDIT))
    assert s.value is None and "answer unparseable" in s.missing


def test_tiny_vlm_isg_logits(llava):
    v = IsgVerifier(model=str(llava), metric="bon", mode="logits", device="cpu", max_questions=2)
    s = v.score(isg_prompt(), cand("Rinse.", RED, BLUE))
    assert s.missing is None and set(s.details["level_scores"]) == {"structure", "block", "image", "holistic"}
    assert all(0.0 <= x <= 1.0 for x in s.details["level_scores"].values())


def test_tiny_vlm_vqascore_is_the_judge_probability(llava):
    from judges.reward_models import VqaScoreJudge

    p = Prompt("t", "t2i", Content.of("a red cube"))
    v = registry.create("verifier", "vqascore", model=str(llava), device="cpu")
    s = v.score(p, cand(RED))
    judge = VqaScoreJudge(model=str(llava), device="cpu", question=v.question)
    assert s.value == pytest.approx(judge.score(p, [Content.of(RED)])[0].value, rel=1e-5)
    assert 0.0 < s.value < 1.0 and s.details["grader"]["revision"].startswith("local:")


# --- the API grader against a local OpenAI-style server -------------------------------------------------


class FakeApi(LocalServer):
    def __init__(self, mode: str):
        self.mode, self.requests, self.auth = mode, [], []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": []})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append(body)
                api.auth.append(self.headers.get("Authorization"))
                if api.mode == "down":
                    return self._send(500, {"error": {"message": "upstream hiccup"}})
                choice: dict = {"index": 0, "message": {"role": "assistant", "content": "Yes"}, "finish_reason": "stop"}
                if api.mode == "logprobs" and body.get("logprobs"):
                    choice["logprobs"] = {"content": [{"token": "Yes", "logprob": math.log(0.7), "top_logprobs": [
                        {"token": "Yes", "logprob": math.log(0.7)}, {"token": " yes", "logprob": math.log(0.1)},
                        {"token": "No", "logprob": math.log(0.15)}]}]}
                self._send(200, {"id": "x", "model": "grader-model-2025", "choices": [choice]})

        self.serve(Handler)


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("BON_TEST_GRADER_KEY", "sk-grader-secret-123456")
    return "BON_TEST_GRADER_KEY"


@pytest.mark.parametrize("mode", ["logprobs", "answers", "down"])
def test_api_grader_vqascore(api_key, mode):
    api = FakeApi(mode)
    try:
        v = registry.create("verifier", "vqascore", grader={"backend": "openai", "model": "grader-model", "base_url": api.url,
                                                             "api_key_env": api_key, "max_retries": 0},
                            fallback_to_answer=mode == "answers")
        s = v.score(Prompt("t", "t2i", Content.of("a red cube")), cand(RED))
    finally:
        api.close()
    req = api.requests[0]
    parts = req["messages"][0]["content"]  # the question, then the image, as t2v_metrics' GPT-4o back-end sends them
    assert req["model"] == "grader-model" and parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    assert parts[0]["text"] == 'Does this figure show "a red cube"? Please answer yes or no.'
    assert api.auth[0] == "Bearer sk-grader-secret-123456" and "secret" not in json.dumps(s.details)
    if mode == "logprobs":
        assert s.value == pytest.approx(0.7) and s.details["mode"] == "logprobs"  # P("Yes"), as VQAScore defines it
        assert s.details["grader"]["served_model"] == ["grader-model-2025"] and req["max_completion_tokens"] == 1
    elif mode == "answers":
        assert s.value == 1.0 and s.details["mode"] == "answer" and len(api.requests) == 2
    else:
        assert s.value is None and "HTTP 500: upstream hiccup" in s.missing


def test_api_grader_needs_its_key_variable(monkeypatch):
    monkeypatch.delenv("BON_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(BonError, match="BON_TEST_NO_SUCH_KEY is not set"):
        GEditVerifier(metric="bon", grader={"backend": "openai", "model": "m", "api_key_env": "BON_TEST_NO_SUCH_KEY"})
