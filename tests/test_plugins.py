"""Plugin contracts: a newcomer's plugin of every kind is one file plus one registration line; options
are strict (a typo is one line naming the nearest valid names); identity is derived, never forgotten."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from bon import registry, suites
from bon.errors import BonError
from bon.referee import Referee
from bon.selection import run_selection
from bon.store import JudgmentStore

# One file per kind, as a newcomer would write it: only the interfaces of bon.plugins, no identity().
THROWAWAY = {
    "judge": ("longer_judge", "LongerJudge", '''
        from bon.plugins import PairwiseJudge
        from bon.protocol import Verdict

        class LongerJudge(PairwiseJudge):
            """Prefers the longer response (ties go to A, plus a handicap for B)."""

            def __init__(self, name=None, handicap: int = 0):
                self.name = name or "longer"
                self.handicap = handicap

            def judge(self, comparisons):
                return [Verdict("A" if len(c.a.text) + self.handicap >= len(c.b.text) else "B", 5) for c in comparisons]
    '''),
    "generator": ("repeat_generator", "RepeatGenerator", '''
        from bon.content import Candidate, Content
        from bon.plugins import Generator

        class RepeatGenerator(Generator):
            """Candidate k repeats ``unit`` (seed % 5 + 1) times."""

            def __init__(self, name=None, unit: str = "ab"):
                self.name = name or "repeat"
                self.unit = unit

            def sample(self, prompt, seeds):
                return [Candidate(prompt.id, i, self.name, s, Content.of(self.unit * (s % 5 + 1))) for i, s in enumerate(seeds)]
    '''),
    "verifier": ("length_verifier", "LengthVerifier", '''
        from bon.plugins import Score, Verifier

        class LengthVerifier(Verifier):
            def __init__(self, name=None, cap: int = 20):
                self.name = name or "length"
                self.cap = cap

            def score(self, prompt, candidate):
                return Score(min(1.0, len(candidate.content.text) / self.cap))
    '''),
    "strategy": ("ladder_strategy", "Ladder", '''
        from bon.plugins import Strategy

        class Ladder(Strategy):
            """The champion so far meets the next candidate: N - 1 matches in a row."""

            name = "ladder"

            def bracket(self, n, key):
                champion = 0
                for challenger in range(1, n):
                    (result,) = yield [(champion, challenger)]
                    champion = result.winner
                return champion
    '''),
    "suite": ("counting_suite", "build_suite", '''
        from bon.content import Content, Prompt

        def build_suite(count: int = 2, tasks=("t2i",)):
            return [Prompt(f"{t}-{i}", t, Content.of(f"write something long, please ({i})")) for t in tasks for i in range(count)]
    '''),
}
NAMES = {"judge": "longer", "generator": "repeat", "verifier": "length", "strategy": "ladder", "suite": "counting"}


def _install(tmp_path: Path, monkeypatch, how: str) -> None:
    """Write each plugin's file into a folder on sys.path and register it with one line."""
    site = tmp_path / "site"
    site.mkdir()
    lines = []
    for kind, (module, attr, source) in THROWAWAY.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        if how == "entry point":  # one line in the providing package's pyproject.toml
            lines.append(f"[{registry.KINDS[kind][1]}]\n{NAMES[kind]} = {module}:{attr}\n")
        else:  # one line in the kind's PLUGINS table
            package = sys.modules.get(registry.KINDS[kind][0]) or __import__(registry.KINDS[kind][0], fromlist=["PLUGINS"])
            monkeypatch.setitem(package.PLUGINS, NAMES[kind], f"{module}:{attr}")
    if lines:
        meta = site / "throwaway-0.1.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: throwaway\nVersion: 0.1\n")
        (meta / "entry_points.txt").write_text("".join(lines))
    monkeypatch.syspath_prepend(str(site))
    for module, _, _ in THROWAWAY.values():
        monkeypatch.delitem(sys.modules, module, raising=False)


@pytest.mark.parametrize("how", ["entry point", "table"])
def test_a_throwaway_plugin_of_every_kind_registers_with_one_line_and_runs(tmp_path, monkeypatch, how):
    _install(tmp_path, monkeypatch, how)
    for kind, name in NAMES.items():
        assert name in registry.names(kind)

    prompts = suites.build({"name": "counting", "count": 3}, ["t2i", "edit"], seed=0)
    assert [p.id for p in prompts] == ["t2i-0", "t2i-1", "t2i-2", "edit-0", "edit-1", "edit-2"]
    generator = registry.create("generator", "repeat", unit="xyz")
    verifier = registry.create("verifier", "length", cap=30)
    judge = registry.create("judge", "longer")
    strategy = registry.create("strategy", "ladder")
    groups = [(p, generator.sample(p, [7, 3, 9, 5])) for p in prompts]
    store = JudgmentStore(tmp_path / "judgments.sqlite")
    picks = run_selection(strategy, Referee(judge, store), groups)
    store.close()
    for pick, (prompt, cands) in zip(picks, groups):
        scores = [verifier.score(prompt, c).value for c in cands]
        assert pick.index == 2 and scores[2] == max(scores) == 0.5  # seed 9: "xyz" five times, the longest
        assert len(pick.matches) == 3
    for kind in NAMES:  # and every one of them is strict about its options
        if kind != "suite":
            with pytest.raises(BonError, match=rf"{kind} '{NAMES[kind]}': unknown option 'colour'"):
                registry.create(kind, NAMES[kind], colour="red")
    with pytest.raises(BonError, match=r"suite 'counting': unknown option 'cout'; did you mean count\?"):
        suites.build({"name": "counting", "cout": 3}, ["t2i"], seed=0)


def test_identity_is_derived_for_a_judge_that_defines_none(tmp_path, monkeypatch):
    _install(tmp_path, monkeypatch, "table")
    store = JudgmentStore(tmp_path / "judgments.sqlite")

    def key(**options) -> str:
        return Referee(registry.create("judge", "longer", **options), store).judge_id

    assert key() == key(handicap=0) == key(name="another-label")  # same settings (defaults bound), same judgments
    assert key(handicap=1) != key()  # a changed setting is a new judgment, with no code from the author
    ident = registry.create("judge", "longer", handicap=2).identity()
    assert ident == {"plugin": "longer", "version": "1", "handicap": 2}
    store.close()


def test_identity_keeps_what_a_plugin_adds_and_what_it_forgets():
    from bon.plugins import PairwiseJudge

    class Forgetful(PairwiseJudge):
        version = "3"

        def __init__(self, model: str = "m", temperature: float = 0.0, batch_size: int = 8, api_key: str = "sk-1"):
            self.model, self.temperature, self.batch_size = model, temperature, batch_size

        def identity(self):
            return {"template": "sha-of-the-prompt"}  # forgets temperature

        def judge(self, comparisons):
            return []

    ident = Forgetful(temperature=0.7, batch_size=2).identity()
    assert ident["template"] == "sha-of-the-prompt" and ident["temperature"] == 0.7 and ident["version"] == "3"
    assert "batch_size" not in ident and "api_key" not in ident  # run-only settings never split the store; no secrets
    assert Forgetful(batch_size=1).identity() == Forgetful().identity() != Forgetful(temperature=0.7).identity()
    assert ident["plugin"].endswith(":test_identity_keeps_what_a_plugin_adds_and_what_it_forgets.<locals>.Forgetful")


@pytest.mark.parametrize("kind, spec, option, hint", [
    ("judge", "colour-hist", "min_shar", "did you mean min_share?"),
    ("generator", "synthetic", "skil", "did you mean skill?"),
    ("strategy", "knockout", "seding", "did you mean seeding"),
    ("verifier", "synthetic", "colour", "valid: none"),
])
def test_unknown_option_is_one_line_naming_plugin_option_and_nearest(kind, spec, option, hint):
    with pytest.raises(BonError) as err:
        registry.create_from(kind, spec, {option: 1}, where=f"--{kind}-option")
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"--{kind}-option: {kind} '{spec}': unknown option '{option}'") and hint in text


def test_forwarded_options_are_checked_by_name_too():
    from verifiers.gedit import GEditVerifier

    valid, forwards = registry.option_names(GEditVerifier)
    assert not forwards and {"model", "mode", "batch_size", "base_url"} <= valid
    with pytest.raises(BonError, match="unknown option 'bach_size'; did you mean batch_size"):
        registry.create("verifier", "gedit", model="m", bach_size=2)


def test_no_plugin_constructor_swallows_options():
    root = Path(__file__).resolve().parents[1]
    swallowing = [f"{p.relative_to(root)}:{i}" for folder in ("bon", "judges", "generators", "verifiers")
                  for p in (root / folder).rglob("*.py") for i, line in enumerate(p.read_text().splitlines(), 1)
                  if "**_" in line and "def " in line]
    assert swallowing == []


def test_plugins_survive_pickling_with_their_identity():
    """Executors ship plugins to worker processes: the derived identity travels with them."""
    import pickle

    for kind, spec, options in [("judge", "colour-hist", {"min_share": 0.02}), ("generator", "synthetic", {"skill": "weak"}),
                                ("strategy", "round-robin", {"aggregate": "borda"})]:
        plugin = registry.create(kind, spec, **options)
        assert pickle.loads(pickle.dumps(plugin)).identity() == plugin.identity()
