"""Model life cycle and transient failures in the stage runner, on a fake accelerator.

The fake accelerator counts live model "bytes": fake plugins add theirs when created (a model load)
and give them back in ``close()``. Its capacity is below the sum of the study's models, so a runner
that held them together would overflow; the study must finish with peak == its largest stage.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import generators
import judges
import verifiers
from bon.cli import main
from bon.config import parse_config
from bon.content import read_jsonl
from bon.study import run_study
from generators.synthetic.generator import SyntheticGenerator
from judges.synthetic.scene import SceneJudge
from verifiers.synthetic import SyntheticVerifier


class FakeAccelerator:
    """Live model bytes on an imaginary device; loading past capacity is an out-of-memory error."""

    def __init__(self, capacity: int = 0) -> None:
        self.capacity, self.live, self.peak, self.loads, self.attempts = capacity, 0, 0, 0, 0

    def load(self, size: int) -> None:
        self.attempts += 1
        if self.live + size > self.capacity:
            raise MemoryError(f"out of memory: {self.live} + {size} > {self.capacity}")
        self.live += size
        self.loads += 1
        self.peak = max(self.peak, self.live)

    def free(self, size: int) -> None:
        self.live -= size


DEVICE = FakeAccelerator()


class Held:
    """Mix-in: holds ``size`` bytes on DEVICE from creation until close()."""

    forkable = False  # a model: never run in forked workers (the counter lives in this process)

    def hold(self, size: int) -> None:
        DEVICE.load(size)
        self.size = size

    def close(self) -> None:
        DEVICE.free(self.size)
        self.size = 0


class MemGenerator(Held, SyntheticGenerator):
    def __init__(self, size: int, **options) -> None:
        super().__init__(**options)
        self.hold(size)


class MemVerifier(Held, SyntheticVerifier):
    fail_first: set = set()  # candidate keys that time out once

    def __init__(self, size: int, **options) -> None:
        super().__init__(**options)
        self.hold(size)

    def score(self, prompt, candidate):
        if candidate.key in self.fail_first:
            self.fail_first.discard(candidate.key)
            raise TimeoutError("grader timed out")
        return super().score(prompt, candidate)


class MemJudge(Held, SceneJudge):
    def __init__(self, size: int, **options) -> None:
        super().__init__(**options)
        self.hold(size)


class SharedComponents:
    """What an agent-like generator loads through: one copy of each named component (e.g. the FLUX
    text encoders and VAE that the text-to-image and the edit pipeline have in common)."""

    def __init__(self) -> None:
        self.loaded: dict[str, int] = {}

    def get(self, name: str, size: int) -> None:
        if name not in self.loaded:
            DEVICE.load(size)
            self.loaded[name] = size

    def close(self) -> None:
        for size in self.loaded.values():
            DEVICE.free(size)
        self.loaded.clear()


class MemAgent(SyntheticGenerator):
    """A stand-in for the interleaved agent: planner + text-to-image + edit pipelines whose text
    encoders and VAE are shared (written against this fake because the real agent's sharing is
    being built in parallel)."""

    PIPELINES = {"t2i": {"transformer": 24, "text_encoder": 10, "text_encoder_2": 1, "vae": 1},
                 "edit": {"transformer": 24, "text_encoder": 10, "text_encoder_2": 1, "vae": 1}}

    def __init__(self, planner: int, **options) -> None:
        super().__init__(**options)
        self.components = SharedComponents()
        self.components.get("planner", planner)
        for pipeline, parts in self.PIPELINES.items():
            for part, size in parts.items():
                key = f"{pipeline}/transformer" if part == "transformer" else part
                self.components.get(key, size)

    def close(self) -> None:
        self.components.close()


@pytest.fixture
def fake_plugins(monkeypatch):
    here = __name__
    monkeypatch.setitem(generators.PLUGINS, "mem", f"{here}:MemGenerator")
    monkeypatch.setitem(generators.PLUGINS, "mem-agent", f"{here}:MemAgent")
    monkeypatch.setitem(verifiers.PLUGINS, "mem", f"{here}:MemVerifier")
    monkeypatch.setitem(judges.PLUGINS, "mem", f"{here}:MemJudge")
    MemVerifier.fail_first = set()
    DEVICE.__init__(capacity=100)
    yield DEVICE
    assert DEVICE.live == 0, "a model was never released"


def study(out: Path, gens=(("strong", 60), ("weak", 50)), verifier=70, judge_sizes=(80, 40), **extra) -> dict:
    return {
        "out": str(out), "seed": 1, "n": 3, "tasks": ["t2i", "edit"],
        "suite": {"name": "synthetic", "per_task": 2},
        "preference": {"prompts_per_task": 2, "pairs_per_prompt": 2},
        "generators": [{"name": "mem", "label": g, "options": {"skill": g, "size": s}} for g, s in gens],
        "verifier": {"name": "mem", "options": {"size": verifier}},
        "judges": [{"name": "mem", "label": f"judge{i}", "options": {"size": s}} for i, s in enumerate(judge_sizes)],
        **extra,
    }


def test_models_are_released_between_stages_and_peak_is_the_largest_stage(tmp_path, fake_plugins):
    outcome = run_study(parse_config(study(tmp_path / "run"), where="test"))
    assert not outcome.pending and len(outcome.results)  # finished although 60+50+70+80+40 > 100
    assert fake_plugins.peak == 80  # the largest stage: one judge
    # these fakes load at construction (the worst case): on a first start each is built once to check its
    # values before anything is written, released at once, then built again for its own stage
    assert fake_plugins.loads == 10


def test_resumed_study_with_nothing_left_loads_no_generator_or_verifier(tmp_path, fake_plugins):
    raw = study(tmp_path / "run")
    run_study(parse_config(raw, where="test"))
    fake_plugins.loads = 0
    run_study(parse_config(raw, where="test"))
    assert fake_plugins.loads == 2  # only the judges (their store serves every call)


def test_agent_shared_components_are_counted_once(tmp_path, fake_plugins):
    raw = study(tmp_path / "run", judge_sizes=(30,))
    raw["generators"] = [{"name": "mem-agent", "label": "agent", "options": {"planner": 16}}]
    fake_plugins.capacity = 76  # 16 + 2 x 24 + one copy of the shared 12; twice the 12 would overflow
    outcome = run_study(parse_config(raw, where="test"))
    assert not outcome.pending
    assert fake_plugins.peak == 16 + 24 + 24 + 12


def scores_by_key(run: Path) -> dict:
    return {(r["generator"], r["prompt_id"], r["index"]): r for _, r in read_jsonl(run / "scores.jsonl")}


def test_transient_verifier_failure_leaves_candidates_pending_then_rerun_matches(tmp_path, fake_plugins):
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    cfg_file = tmp_path / "study.yaml"
    cfg_file.write_text(yaml.safe_dump(study(broken)))
    assert main(["run", str(cfg_file), "--out", str(whole)]) == 0
    MemVerifier.fail_first = {("strong", key[1], key[2]) for key in list(scores_by_key(whole))[:3]}
    assert main(["run", str(cfg_file)]) == 3  # three candidates pending: rerun to continue
    assert len(scores_by_key(broken)) == len(scores_by_key(whole)) - 3
    assert not (broken / "results.csv").exists()
    assert main(["run", str(cfg_file)]) == 0
    assert scores_by_key(broken) == scores_by_key(whole)


class FlakyGenerator(MemGenerator):
    fail_first: set = set()  # prompt ids whose first sample hits a transient fault

    def sample(self, prompt, seeds):
        if prompt.id in self.fail_first:
            self.fail_first.discard(prompt.id)
            raise MemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return super().sample(prompt, seeds)


class MissingGenerator(MemGenerator):
    """Returns candidates marked missing for a transient reason (an API 503) once per prompt."""

    fail_first: set = set()

    def sample(self, prompt, seeds):
        cands = super().sample(prompt, seeds)
        if prompt.id in self.fail_first:
            self.fail_first.discard(prompt.id)
            cands[0].provenance["missing"] = "gave up after 3 attempts: HTTP 503: Service Unavailable"
        return cands


@pytest.mark.parametrize("flaky", ["FlakyGenerator", "MissingGenerator"])
def test_transient_generator_failure_is_retried_on_rerun(tmp_path, fake_plugins, monkeypatch, flaky):
    cls = globals()[flaky]
    monkeypatch.setitem(generators.PLUGINS, "flaky", f"{__name__}:{flaky}")
    whole, broken = tmp_path / "whole", tmp_path / "broken"
    raw = study(broken)
    raw["generators"][0]["name"] = "flaky"
    cfg_file = tmp_path / "study.yaml"
    cfg_file.write_text(yaml.safe_dump(raw))
    assert main(["run", str(cfg_file), "--out", str(whole)]) == 0
    prompt_ids = sorted({k[1] for k in scores_by_key(whole)})
    cls.fail_first = set(prompt_ids[:2])
    assert main(["run", str(cfg_file)]) == 3
    assert {k[1] for k in scores_by_key(broken) if k[0] == "strong"} == set(prompt_ids[2:])
    assert main(["run", str(cfg_file)]) == 0
    assert scores_by_key(broken) == scores_by_key(whole)
    assert (broken / "picks.jsonl").read_text() == (whole / "picks.jsonl").read_text()


def test_final_verifier_failure_is_stored_with_its_reason(tmp_path, fake_plugins):
    from bon.runfolder import RunFolder
    from bon.stages.generate import generate
    from bon.stages.verify import verify
    from generators.synthetic.suites import build_suite

    class Refusing(SyntheticVerifier):
        def score(self, prompt, candidate):
            if candidate.index == 0:
                raise ValueError("unparseable grader answer: 'maybe'")
            return super().score(prompt, candidate)

    run = RunFolder(tmp_path / "run")
    prompts = build_suite(per_task=2, seed=1, tasks=["t2i"])
    cands = generate(run, SyntheticGenerator(skill="strong", name="strong"), prompts, 3, 1)
    scores = verify(run, Refusing(), {p.id: p for p in prompts}, [c for cs in cands.values() for c in cs])
    assert len(scores) == 3 * len(prompts)  # stored, never retried
    assert {r["missing"] for r in scores.values() if r["index"] == 0} == {"ValueError: unparseable grader answer: 'maybe'"}
    assert all(r["score"] is not None for r in scores.values() if r["index"] > 0)


def test_bad_judge_option_or_missing_key_fails_before_any_model_loads(tmp_path, fake_plugins, monkeypatch):
    from bon.errors import BonError

    monkeypatch.delenv("BON_SURELY_UNSET_KEY", raising=False)
    typo = study(tmp_path / "a")
    typo["judges"].append({"name": "openai-compatible:gpt-5", "label": "api", "options": {"api_key_env": None, "temprature": 0}})
    with pytest.raises(BonError, match="unknown option 'temprature'"):
        run_study(parse_config(typo, where="test"))
    no_key = study(tmp_path / "b")
    no_key["judges"].append({"name": "openai-compatible:gpt-5", "label": "api", "options": {"api_key_env": "BON_SURELY_UNSET_KEY"}})
    with pytest.raises(BonError, match="BON_SURELY_UNSET_KEY is not set"):
        run_study(parse_config(no_key, where="test"))
    assert fake_plugins.loads == 0 and not (tmp_path / "a" / "candidates").exists()


def test_a_model_that_cannot_load_stops_the_stage_once(tmp_path, fake_plugins):
    from bon.errors import BonError

    raw = study(tmp_path / "run", verifier=101)  # larger than the device
    with pytest.raises(BonError, match="verifier mem: cannot load: MemoryError: out of memory"):
        run_study(parse_config(raw, where="test"))
    assert fake_plugins.attempts == 3  # the two generators, then the verifier once (not once per candidate)
