"""A finished study read once: :func:`load_run` gives a :class:`Run` of pandas frames.

Every analysis (``analysis/``) is a function of one ``Run``: the run folder's files are parsed here and
nowhere else, each at most once (lazily, on first use, then cached), so a report that needs the picks in
six tables reads ``picks.jsonl`` once. The frames are what people who analyse evaluations work with in
a notebook::

    import bon
    run = bon.load_run("bon-demo")
    run.picks        # one row per (judge, strategy, generator, prompt): the chosen candidate
    run.matches      # every judged comparison of a knockout or round-robin, both orders' verdicts

The frames are read-only views of the folder; nothing here writes a file or calls a judge.
"""

from __future__ import annotations

import gc
import json
import sqlite3
from contextlib import contextmanager
from functools import cached_property, wraps
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import pandas as pd
import yaml

from bon.content import checked_record, content_entries, read_jsonl, slug
from bon.errors import BonError, first_line
from bon.runfolder import RunFolder, check_n, check_pick, check_unique_picks, read_stats
from bon.tasks import TASKS

REASON_CHARS = 1200  # a judge's reason as kept (its answer text can be long)
_dumps = json.JSONEncoder(default=str).encode  # json.dumps(v, default=str), without a new encoder per value
ScoreKey = tuple[str, str, int]  # generator, prompt id, candidate index
RUN_MARKERS = ("config.yaml", "prompts.jsonl", "scores.jsonl", "picks.jsonl")  # any one makes a folder a run
PICK_COLUMNS = ["judge", "strategy", "task", "generator", "prompt_id", "index", "calls", "missing", "matches", "source"]
MATCH_COLUMNS = ["judge", "strategy", "task", "generator", "prompt_id", "match", "x", "y", "winner", "how",
                 "fwd_verdict", "fwd_score", "fwd_reason", "rev_verdict", "rev_score", "rev_reason", "disagree"]
CALL_COLUMNS = ["judge", "judge_id", "kind", "stage", "invocation", "calls", "missing", "seconds", "input_tokens",
                "output_tokens", "cost_usd"]


def _collector_paused_in(build: Callable[["Run"], pd.DataFrame]) -> Callable[["Run"], pd.DataFrame]:
    """A frame built with the cycle collector paused (:func:`collector_paused`): its rows make no cycles."""
    @wraps(build)
    def paused(run: "Run") -> pd.DataFrame:
        with collector_paused():
            return build(run)
    return paused


def load_run(path: str | Path) -> "Run":
    """The run folder at ``path``; a one-line :class:`BonError` when it is not a study's folder."""
    return Run(Path(path))


def as_run(run: "Run | str | Path") -> "Run":
    """A ``Run`` as is, a path read as one (for callers that still hold a folder name)."""
    return run if isinstance(run, Run) else Run(Path(run), check=False)


class Run:
    """One study folder: its config, its records as frames, and the raw records the analysis works on."""

    def __init__(self, root: Path, check: bool = True):
        """``check``: refuse a folder holding none of a run's files (False: each reader names what it misses)."""
        self.root = Path(root)
        self.folder = RunFolder(self.root, existing=True)  # "no such run folder"
        if check and not any((self.root / name).exists() for name in RUN_MARKERS):
            raise BonError(f"{self.root}: not a run folder (none of {', '.join(RUN_MARKERS)} is there)")
        self._candidate_objects: dict[str, dict[tuple[str, str], dict[int, Any]]] = {}
        self._candidate_digests: dict[str, dict[tuple[str, int], str]] = {}
        self._files: dict[tuple[str, Path], Any] = {}  # MMRB2-format files of the run, parsed once each

    def __repr__(self) -> str:
        return f"Run({str(self.root)!r})"

    # --- config and records -----------------------------------------------------------------------

    @cached_property
    def config(self) -> dict[str, Any]:
        """config.yaml as a dict ({} when missing or unreadable: the analysis does not need it)."""
        try:
            raw = yaml.safe_load(self.folder.config.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError, ValueError):  # ValueError: not UTF-8, or an integer of 5000 digits
            return {}
        return raw if isinstance(raw, dict) else {}

    @property
    def study(self) -> dict[str, Any]:
        """The config's study section (the settings the study ran with)."""
        study = self.config.get("study") or {}
        return study if isinstance(study, dict) else {}

    @cached_property
    def n(self) -> int | None:
        """Candidates per prompt (None when the config does not say)."""
        try:
            return int(self.study["n"])
        except (KeyError, TypeError, ValueError):
            return None

    @cached_property
    def stats(self) -> dict[str, Any]:
        """stats.json ({} when the study never wrote one; a one-line error when it is not a JSON object)."""
        return read_stats(self.folder.stats) or {}

    @cached_property
    def tradeoff(self) -> dict[str, Any] | None:
        """tradeoff.json of ``bon tradeoff`` (None when never computed)."""
        return self.json(self.root / "tradeoff.json", "")

    def json(self, path: Path, what: str = "") -> Any:
        """A JSON file of the run, or None when it is not there; a one-line error when unreadable."""
        return read_json(path, what)

    @cached_property
    def pick_records(self) -> list[dict[str, Any]]:
        """``picks.jsonl``'s records (see :mod:`bon.stages.select`)."""
        path = self.folder.picks
        if not path.exists():
            raise BonError(f"{path}: no picks; is {self.root} a finished study folder?")
        return _checked_picks(path, self.n)

    @cached_property
    def selected_pick_records(self) -> list[dict[str, Any]]:
        """``picks.jsonl`` and the picks ``bon select`` wrote at the study's N: a (judge, strategy label)
        already read from an earlier file is not read again, and picks files of a smaller ``--n`` are left
        out (their random and oracle levels are of another N)."""
        return [rec for rec, _ in self._selected()]

    def _selected(self) -> list[tuple[dict[str, Any], str]]:
        run, records, seen = self.folder, [], set()
        for path in run.picks_files():
            mine = self.pick_records if path == run.picks else _checked_picks(path, None)  # a `--n` file: its own n
            if path != run.picks:
                mine = [r for r in mine if run.picks_file(r.get("judge", ""), r.get("strategy", "")) == path]
            keys = {(r.get("judge"), r.get("strategy", "")) for r in mine}
            source = path.relative_to(self.root).as_posix()
            records += [(r, source) for r in mine if (r.get("judge"), r.get("strategy", "")) not in seen]
            seen |= keys
        if not records:
            raise BonError(f"{run.picks}: no picks; is {self.root} a finished study folder?")
        return records

    @cached_property
    def score_records(self) -> dict[ScoreKey, dict[str, Any]]:
        """``scores.jsonl`` keyed by (generator, prompt id, candidate index)."""
        path = self.folder.scores
        if not path.exists():
            raise BonError(f"{path}: no verifier scores; is {self.root} a finished study folder?")
        scores = {}
        with collector_paused():
            lines = list(stage_lines(path))
        for k, r in lines:
            try:
                scores[(str(r["generator"]), str(r["prompt_id"]), int(r["index"]))] = r
            except (KeyError, TypeError, ValueError):
                raise BonError(f"{path}:{k}: expected generator, prompt_id and an integer index") from None
        check_n(self.folder.config, self.n, path, ((pid, index) for _, pid, index in scores))
        return scores

    @cached_property
    def prompt_records(self) -> list[dict[str, Any]]:
        return [rec for _, rec in read_jsonl(self.folder.prompts, torn_tail_ok=False)]

    @cached_property
    def prompt_objects(self) -> dict[str, Any]:
        """prompt id -> :class:`bon.content.Prompt` (images resolved against the run folder)."""
        from bon.content import Prompt

        path = self.folder.prompts
        return {p.id: p for p in (Prompt.from_json(rec, path.parent, where=f"{path}:{n}")
                                  for n, rec in read_jsonl(path, torn_tail_ok=False))} if path.exists() else {}

    def candidate_objects(self, generator: str) -> dict[tuple[str, str], dict[int, Any]]:
        """(generator, prompt id) -> index -> :class:`bon.content.Candidate` of one generator."""
        if generator not in self._candidate_objects:
            self._candidate_objects[generator] = _candidates(self.folder.candidates(generator), generator,
                                                             self.candidate_lines(generator))
        return self._candidate_objects[generator]

    def candidate_digests(self, generator: str) -> dict[tuple[str, int], str]:
        """(prompt id, index) -> content digest of one generator's candidates, the key of their stored
        verdicts: the digest the record carries (hashed from the pixels as the candidate was written), else
        (a record written before records carried one) hashed from the decoded images."""
        if generator not in self._candidate_digests:
            path, found, old = self.folder.candidates(generator), {}, False
            for k, rec in self.candidate_lines(generator):
                key, digest = _candidate_key(rec, f"{path}:{k}")
                found[key], old = digest, old or digest is None
            if old:  # hashed from the pixels, as before records carried digests
                objects = self.candidate_objects(generator)
                found = {key: digest or objects[(generator, key[0])][key[1]].content.digest for key, digest in found.items()}
            self._candidate_digests[generator] = found
        return self._candidate_digests[generator]

    def candidate_records(self, generator: str) -> list[dict[str, Any]]:
        """One generator's ``candidates.jsonl`` records, read once."""
        return [rec for _, rec in self.candidate_lines(generator)]

    def candidate_lines(self, generator: str) -> list[tuple[int, dict[str, Any]]]:
        """One generator's ``candidates.jsonl`` records with their line numbers, read once."""
        return self._file("candidates", self.folder.candidates(generator), lambda path: list(stage_lines(path)))

    def pairs(self, path: Path) -> list[Any]:
        """An MMRB2 task file's pairs (:func:`bon.mmrb2.load_pairs`), read once."""
        from bon import mmrb2

        return self._file("pairs", path, mmrb2.load_pairs)

    def judgments(self, path: Path) -> dict[str, Any]:
        """An MMRB2 judgment file (:func:`bon.mmrb2.load_judgments`), read once; callers must not change it."""
        from bon import mmrb2

        return self._file("judgments", path, mmrb2.load_judgments)

    def _file(self, kind: str, path: Path, read: Any) -> Any:
        key = (kind, Path(path))
        if key not in self._files:
            with collector_paused():
                self._files[key] = read(Path(path))
        return self._files[key]

    @cached_property
    def curve_records(self) -> list[tuple[Path, Any]]:
        """Every ``curves/*.json`` (``bon curve --json``) with its path."""
        return [(f, self.json(f, "curve ")) for f in sorted(self.folder.curves.glob("*.json"))]

    def generators(self) -> list[str]:
        folder = self.root / "candidates"
        return sorted(p.name for p in folder.iterdir() if (p / "candidates.jsonl").exists()) if folder.is_dir() else []

    # --- frames -----------------------------------------------------------------------------------

    @cached_property
    @_collector_paused_in
    def prompts(self) -> pd.DataFrame:
        """One row per prompt: id, task, its text, how many images it holds, its content and metadata."""
        rows = [{"prompt_id": str(r.get("id")), "task": r.get("task"), "text": _text(r.get("content")),
                 "images": _images(r.get("content")), "content": r.get("content"), "metadata": r.get("metadata") or {}}
                for r in self.prompt_records]
        return pd.DataFrame(rows, columns=["prompt_id", "task", "text", "images", "content", "metadata"])

    @cached_property
    @_collector_paused_in
    def candidates(self) -> pd.DataFrame:
        """One row per candidate: generator, prompt id, index, seed, its text and image paths (relative to the run)."""
        rows = []  # tuples, not dicts: a row of a large study's frame holds its values only
        for gen in self.generators():
            path = self.folder.candidates(gen)
            base = path.parent.relative_to(self.root).as_posix()
            for r in self.candidate_records(gen):
                rows.append((r.get("generator", gen), r.get("prompt_id"), r.get("index"), r.get("seed"), _text(r.get("content")),
                             [f"{base}/{v}" for k, v in _entries(r.get("content")) if k == "image"],
                             r.get("content"), r.get("provenance") or {}))
        return pd.DataFrame(rows, columns=["generator", "prompt_id", "index", "seed", "text", "images", "content", "provenance"])

    @cached_property
    @_collector_paused_in
    def scores(self) -> pd.DataFrame:
        """One row per scored candidate: the verifier's score (NaN when missing) and why it is missing."""
        rows = [(g, p, i, r.get("score"), r.get("missing"), r.get("details") or {}) for (g, p, i), r in self.score_records.items()]
        frame = pd.DataFrame(rows, columns=["generator", "prompt_id", "index", "score", "missing", "details"])
        frame["score"] = pd.to_numeric(frame["score"], errors="coerce")
        return frame

    @cached_property
    @_collector_paused_in
    def picks(self) -> pd.DataFrame:
        """One row per pick of ``picks.jsonl`` and of ``bon select`` (``source``: the file it came from)."""
        rows = [{"judge": r.get("judge"), "strategy": r.get("strategy", ""), "task": r.get("task"),
                 "generator": r.get("generator"), "prompt_id": r.get("prompt_id"), "index": r.get("index"),
                 "calls": r.get("calls", 0), "missing": r.get("missing", 0), "matches": r.get("matches") or [],
                 "source": source} for r, source in self._selected()]
        return pd.DataFrame(rows, columns=PICK_COLUMNS)

    @cached_property
    @_collector_paused_in
    def matches(self) -> pd.DataFrame:
        """One row per judged comparison of a pick (knockout or round-robin match): the two candidates ``x``
        and ``y``, the winner the strategy recorded and how, and each order's verdict from
        ``judgments.sqlite`` (``fwd``: ``x`` shown as A; ``rev``: ``y`` shown as A; first sample): the
        letter ("" when missing), the 1-6 score and the judge's reason (or why the answer is missing).
        ``disagree``: both orders answered and named different candidates."""
        picks = [p for p, _ in self._selected() if p.get("matches")] if self.folder.picks.exists() else []
        plan, verdicts = self.match_verdicts(picks)
        none = {"v": "", "score": None, "reason": "not in the judgment store"}
        rows = []  # tuples in MATCH_COLUMNS' order
        for pick, key in plan:
            for k, (x, y, winner, how, fwd_key, rev_key) in enumerate(key):
                fwd, rev = verdicts.get(fwd_key, none), verdicts.get(rev_key, none)
                rows.append((pick["judge"], pick.get("strategy", ""), pick.get("task"), pick["generator"], pick["prompt_id"],
                             k, x, y, winner, how, fwd["v"], fwd["score"], fwd["reason"], rev["v"], rev["score"],
                             rev["reason"], bool(fwd["v"] and rev["v"] and fwd["v"] == rev["v"])))
        return pd.DataFrame(rows, columns=MATCH_COLUMNS)

    @cached_property
    @_collector_paused_in
    def accuracies(self) -> pd.DataFrame:
        """Each judge's official MMRB2 accuracy (%) per task on the run's own preference set (``mmrb2/``), with
        the scorer's counts. Every pair counts here; the report's accuracy table applies the leakage policy."""
        from bon import mmrb2

        root, rows = self.folder.mmrb2, []
        names = {slug(j): j for j in dict.fromkeys(r.get("judge") for r in self.pick_records_or_empty)}
        for task in TASKS:
            if not (root / task.file).exists():
                continue
            pairs = self.pairs(root / task.file)
            for folder in sorted((root / "judgments").glob("*")):
                if (folder / task.file).exists():
                    found = mmrb2.accuracy(pairs, self.judgments(folder / task.file))
                    rows.append({"judge": names.get(folder.name, folder.name), "task": task.name, **found})
        columns = ["judge", "task", "accuracy", "total_pairs", "evaluated_pairs", "missing_pairs", "correct",
                   "judgements", "skipped_judgements", "invalid_judgements", "unknown_ids"]
        return pd.DataFrame(rows, columns=columns)

    @property
    def pick_records_or_empty(self) -> list[dict[str, Any]]:
        return self.pick_records if self.folder.picks.exists() else []

    @cached_property
    @_collector_paused_in
    def calls(self) -> pd.DataFrame:
        """What every stored answer cost, per judge (label from stats.json's identities), kind (pairwise or
        pointwise), stage and invocation: answers, missing ones, judge seconds, tokens and dollars."""
        labels = {_judge_id(ident): label for label, ident in self._identities().items()}
        rows = []
        for table, kind, answer in (("judgments", "pairwise", "better"), ("scores", "pointwise", "value")):
            for jid, stage, invocation, *rest in self._query(
                    f"SELECT judge_id, stage, invocation, COUNT(*), SUM({answer} IS NULL), SUM(seconds), "
                    f"SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) FROM {table} GROUP BY judge_id, stage, invocation"):
                rows.append(dict(zip(CALL_COLUMNS, (labels.get(jid, jid), jid, kind, stage or "", invocation or "",
                                                     *[v or 0 for v in rest]))))
        return pd.DataFrame(rows, columns=CALL_COLUMNS)

    # --- the judgment store, read only ------------------------------------------------------------

    def _identities(self) -> dict[str, Any]:
        """stats.json's recorded judge identities ({} when it is missing or damaged: :attr:`judge_ids` then
        builds them from config.yaml, so the viewer still finds every stored verdict)."""
        try:
            stats = self.stats
        except BonError:
            return {}
        found = (stats.get("identities") or {}).get("judges") or {}
        return found if isinstance(found, dict) else {}

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        """Rows of the judgment store, opened read-only ([] when the run has none)."""
        return list(self._rows(sql, args))

    def _rows(self, sql: str, args: tuple = ()) -> Iterator[tuple]:
        """:meth:`_query`'s rows one by one, for a query whose rows are many (the store stays open meanwhile)."""
        path = self.folder.store
        if not path.exists():
            return
        from bon.store import read_only_store

        with read_only_store(path) as db:  # leaves no WAL or shared-memory file beside it (a read-only folder works)
            try:
                yield from db.execute(sql, args)
            except sqlite3.DatabaseError as exc:
                raise BonError(f"{path}: not a readable judgment store ({first_line(exc)})") from None

    def _match_plan(self, picks: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[tuple]]]:
        """Per pick: (x, y, winner, how, forward store key, reverse store key) of each of its matches."""
        ids, out = self.judge_ids, []
        for pick in picks:
            prompt, pid = self.prompt_objects.get(pick["prompt_id"]), pick["prompt_id"]
            p = prompt.content.digest if prompt is not None else None
            digests = self.candidate_digests(pick["generator"])
            jid = ids.get(pick["judge"])
            keys = []
            for m in pick["matches"]:
                x, y = int(m[0]), int(m[1])
                winner = int(m[2]) if len(m) > 2 and m[2] is not None else None
                how = m[3] if len(m) > 3 else None
                fwd = rev = None
                if p is not None and jid and (pid, x) in digests and (pid, y) in digests:
                    a, b = digests[(pid, x)], digests[(pid, y)]
                    fwd, rev = (jid, p, a, b), (jid, p, b, a)
                keys.append((x, y, winner, how, fwd, rev))
            out.append((pick, keys))
        return out

    @cached_property
    def judge_ids(self) -> dict[str, str]:
        """Judge label -> the id its answers are stored under: stats.json's recorded identity, else (stats.json
        missing or edited, so that id holds nothing) the identity built from config.yaml, so a damaged
        stats.json never hides the stored verdicts."""
        recorded = {label: _judge_id(ident) for label, ident in self._identities().items()}
        stored = {row[0] for row in self._query("SELECT DISTINCT judge_id FROM judgments")}
        if recorded and all(jid in stored for jid in recorded.values()):
            return recorded
        from bon.recorded import config_identities, read_study_config

        try:
            built = {label: _judge_id(ident) for label, ident in config_identities(read_study_config(self.folder)).items()}
        except BonError:  # no readable config: the recorded identities are all there is
            built = {}
        out = {}
        for label in dict.fromkeys([*recorded, *built]):
            ids = [j for j in (recorded.get(label), built.get(label)) if j]
            out[label] = next((j for j in ids if j in stored), ids[0])
        return out

    def match_verdicts(self, picks: list[dict[str, Any]]) -> tuple[list[tuple[dict[str, Any], list[tuple]]], dict[tuple, dict[str, Any]]]:
        """Per pick of ``picks``, (x, y, winner, how, forward store key, reverse store key) of each match (keys
        None where the prompt, a candidate or the judge is unknown), and the stored verdicts under those
        keys (:meth:`stored_verdicts`). A match whose verdicts are not found under
        the candidates' recorded digests has them checked against the pixels (a record edited or damaged
        since it was written): where they differ, the pixels' digests replace them and the plan is made again."""
        plan = self._match_plan(picks)
        verdicts = self.stored_verdicts(_match_keys(plan))
        unfound = {(pick["generator"], pick["prompt_id"], i) for pick, keys in plan for m in keys
                   if any(k is not None and k not in verdicts for k in m[4:]) for i in m[:2]}
        if self._rehashed(unfound):
            plan = self._match_plan(picks)
            verdicts = self.stored_verdicts(_match_keys(plan))
        return plan, verdicts

    def _rehashed(self, candidates: Iterable[tuple[str, str, int]]) -> bool:
        """Hash these candidates' images (generator, prompt id, index) and keep the pixels' digest where the
        recorded one differs; True when any did."""
        changed = False
        for gen, pid, index in sorted(candidates):
            found = self.candidate_objects(gen).get((gen, pid), {}).get(index)
            digests = self.candidate_digests(gen)
            if found is not None and digests.get((pid, index)) != found.content.digest:
                digests[(pid, index)], changed = found.content.digest, True
        return changed

    def stored_verdicts(self, keys: Iterable[tuple[str, str, str, str]]) -> dict[tuple, dict[str, Any]]:
        """``{(judge id, prompt, a, b hashes): {"v", "score", "reason"}}`` of the stored first samples among ``keys``
        (one dict per distinct answer, shared by the keys that got it: callers must not change them)."""
        wanted = {k: k for k in keys}  # the caller's key objects are kept, not the store's copies of its strings
        out: dict[tuple, dict[str, Any]] = {}
        said: dict[tuple, dict[str, Any]] = {}
        judges = sorted({k[0] for k in wanted})
        for jid, prompt, a, b, better, score, missing, meta in self._rows(  # one pass: the store is opened once
                "SELECT judge_id, prompt, a, b, better, score, missing, meta FROM judgments "
                f"WHERE sample = 0 AND judge_id IN ({', '.join('?' * len(judges))})", tuple(judges)) if judges else ():
            key = wanted.get((jid, prompt, a, b))
            if key is not None:
                answer = (better, score, missing, meta)
                if answer not in said:
                    details = json.loads(meta) if meta else {}
                    if missing:
                        details["missing"] = missing
                    said[answer] = {"v": better or "", "score": score, "reason": reason(details)}
                out[key] = said[answer]
        return out


def reason(meta: Mapping[str, Any], answer: Any = None) -> str:
    """What the judge said: its answer text, else why the answer is missing, else its other metadata."""
    text = meta.get("answer") or meta.get("missing")
    if not text:
        rest = {k: v for k, v in meta.items() if k not in ("usage", "cost_usd", "evaluator")}
        text = " ".join(f"{k}={_dumps(v)}" for k, v in rest.items())
        if answer not in (None, "", "A", "B"):
            text = f"answer {answer!r}" + (f"; {text}" if text else "")
    text = str(text)
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS] + "…"


def _judge_id(identity: Mapping[str, Any]) -> str:
    from bon.store import judge_id

    return judge_id(dict(identity))


def _match_keys(plan: list[tuple[dict[str, Any], list[tuple]]]) -> Iterator[tuple[str, str, str, str]]:
    return (k for _, keys in plan for m in keys for k in m[4:] if k is not None)


def _candidates(path: Path, generator: str, lines: list[tuple[int, dict[str, Any]]]) -> dict[tuple[str, str], dict[int, Any]]:
    from bon.content import Candidate

    out: dict[tuple[str, str], dict[int, Any]] = {}
    for c in (Candidate.from_json(rec, path.parent, where=f"{path}:{n}") for n, rec in lines):
        out.setdefault((generator, c.prompt_id), {})[c.index] = c
    return out


def _candidate_key(rec: dict[str, Any], where: str) -> tuple[tuple[str, int], str | None]:
    """A candidate record's (prompt id, index) and recorded digest, checked as :meth:`Candidate.from_json`
    checks them (without resolving its image paths: nothing here reads the images)."""
    digest = checked_record(rec, where)
    try:
        index = int(rec["index"])
    except (TypeError, ValueError, OverflowError):
        raise BonError(f"{where}: candidate index must be an integer, got {rec['index']!r:.40}") from None
    content_entries(rec["content"], f"{where} content")
    return (str(rec["prompt_id"]), index), digest


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a file's records are parsed: JSON records hold no cycles, and
    the millions of containers a large study's files make would otherwise set off collections over
    everything the process holds, a cost that grows faster than the study."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def stage_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """A stage file the Run reads (picks, scores, candidates): strictly, one rule for all. A cut last line is
    an interrupted stage, whose units the stage redoes on its rerun; reading past it would analyse a study
    with a silently missing record, so it is a one-line error naming the file and line."""
    return read_jsonl(path, torn_tail_ok=False)


def _checked_picks(path: Path, n: int | None) -> list[dict[str, Any]]:
    """A picks file, read strictly (a cut line is damage) and checked line by line: indices that are
    candidates of the prompt, no pick twice."""
    with collector_paused():
        lines = [(f"{path}:{k}", rec) for k, rec in stage_lines(path)]
    for where, rec in lines:
        check_pick(rec, where, n)
    check_unique_picks(lines)
    return [rec for _, rec in lines]


def read_json(path: Path, what: str = "") -> Any:
    """A JSON file, or None when it is not there; a one-line error when unreadable."""
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BonError(f"{path}: unreadable {what}({exc})") from None


def _entries(content: Any) -> list[tuple[str, str]]:
    return [(str(e[0]), str(e[1])) for e in content or [] if isinstance(e, (list, tuple)) and len(e) == 2]


def _text(content: Any) -> str:
    return "\n".join(v for k, v in _entries(content) if k == "text")


def _images(content: Any) -> int:
    return sum(k == "image" for k, _ in _entries(content))
