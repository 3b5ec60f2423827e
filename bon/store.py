"""The judgment store: every judge call, keyed by what the judge saw.

Key = (judge identity hash, prompt content hash, hash of the response shown as A, hash of the one
shown as B, sample index). So (A=x, B=y) is never reused for (A=y, B=x), while the reverse call of
match (x, y) is the very same judgment as the forward call of match (y, x). One SQLite file in WAL
mode, safe for writers in several processes, readable with any SQLite client.

Every stored answer also records what it cost and when it was bought: the invocation (one command run)
and stage that paid for it, its share of the judge's wall time, tokens and money. So a study's costs are
totals over all its invocations, even when one of them was killed (:meth:`JudgmentStore.totals`).
Stores written before these columns existed are migrated in place (the new columns stay empty there).

The store keeps only final answers: a transient failure (timeout, 5xx, out of memory, rate limit) is
never stored, and a stored answer is never replaced, except that a missing one (unparseable, refused)
may be replaced by asking again (``--retry-missing``, for judges that sample); then the key still holds
one answer and its costs add up. What makes each answer reproducible is recorded with it: the judge's
identity (model, settings, sampling, template hashes) in ``judges``, the prompt and response content
hashes in the key, and the runtime (Python, platform, package versions, the judge's class and run-only
backend settings such as its device) in ``runtimes`` (:meth:`JudgmentStore.provenance`).
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from bon.redact import redact, redacted_json

from bon.errors import BonError, first_line
from bon.plugins import Score
from bon.protocol import Verdict

SCHEMA = """
CREATE TABLE IF NOT EXISTS judges (
    judge_id TEXT PRIMARY KEY,
    identity TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judgments (
    judge_id TEXT NOT NULL,
    prompt   TEXT NOT NULL,
    a        TEXT NOT NULL,
    b        TEXT NOT NULL,
    sample   INTEGER NOT NULL,
    better   TEXT,
    score    INTEGER,
    missing  TEXT,
    meta     TEXT NOT NULL,
    created  REAL NOT NULL,
    PRIMARY KEY (judge_id, prompt, a, b, sample)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS scores (
    judge_id TEXT NOT NULL,
    prompt   TEXT NOT NULL,
    response TEXT NOT NULL,
    sample   INTEGER NOT NULL,
    value    REAL,
    missing  TEXT,
    meta     TEXT NOT NULL,
    created  REAL NOT NULL,
    PRIMARY KEY (judge_id, prompt, response, sample)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runtimes (
    id    TEXT PRIMARY KEY,
    facts TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS invocations (
    id      TEXT PRIMARY KEY,
    started REAL NOT NULL,
    command TEXT NOT NULL
);
"""

# What each paid answer cost (added to both answer tables; NULL in rows stored before they existed).
COST_COLUMNS = {"invocation": "TEXT", "stage": "TEXT", "seconds": "REAL", "input_tokens": "INTEGER",
                "output_tokens": "INTEGER", "cost_usd": "REAL"}
# Added after the cost columns: the runtime an answer was bought under (an id into ``runtimes``).
LATER_COLUMNS = {**COST_COLUMNS, "runtime": "TEXT"}
JUDGMENT_COLUMNS = ("judge_id", "prompt", "a", "b", "sample", "better", "score", "missing", "meta", "created", *LATER_COLUMNS)
SCORE_COLUMNS = ("judge_id", "prompt", "response", "sample", "value", "missing", "meta", "created", *LATER_COLUMNS)
ANSWER_COLUMN = {"judgments": "better", "scores": "value"}  # NULL: the stored answer is missing
SUMMED_COSTS = ("seconds", "input_tokens", "output_tokens", "cost_usd")  # a re-asked answer paid both times

Key = tuple[str, str, str, int]  # prompt, a, b, sample (the judge id is the store view's)


def judge_id(identity: dict[str, Any]) -> str:
    """A stable short hash of a judge's identity (name, model, settings, template hash...)."""
    canonical = json.dumps(redact(identity), sort_keys=True, default=str)  # the id of what is stored
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


def usage_of(meta: dict[str, Any]) -> tuple[int, int, float]:
    """(input tokens, output tokens, dollars) a judge reported for one answer in its ``meta``."""
    usage = meta.get("usage") or {}
    return (int(usage.get("input_tokens", 0) or 0), int(usage.get("output_tokens", 0) or 0),
            float(meta.get("cost_usd", 0.0) or 0.0))


def new_invocation_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A read-only connection that writes nothing beside the store (a read-only folder can be read, and a
    reader leaves no trace). A store closed cleanly has no write-ahead log: it is opened as immutable, which
    makes SQLite create no WAL or shared-memory file (a writer that starts meanwhile appends to its own log;
    the main file changes only at a checkpoint). A store with a log waiting (a writer at work, or killed) is
    opened read-only, reading the log too."""
    uri = Path(path).resolve().as_uri()
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size:
        return sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, check_same_thread=False)


@contextmanager
def read_only_store(path: Path) -> Iterator[sqlite3.Connection]:
    """A store opened read-only with its tables checked; a one-line error naming it when it is not one."""
    db = None
    try:
        db = connect_read_only(path)
        for table in ("judges", "judgments", "scores"):
            db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
        yield db
    except sqlite3.DatabaseError as exc:
        raise BonError(f"{path}: not a readable judgment store ({first_line(exc)})") from None
    finally:
        if db is not None:
            db.close()


class JudgmentStore:
    def __init__(self, path: Path, invocation: str | None = None, command: str = "", read_only: bool = False):
        self.path = Path(path)
        if read_only:  # a reader (`bon view`): nothing is created, migrated or written, not even WAL files
            try:
                self._db = connect_read_only(self.path)
                self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()
            except sqlite3.DatabaseError as exc:
                raise BonError(f"{self.path}: not a readable judgment store ({first_line(exc)})") from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = self._open()
        self.invocation = invocation or new_invocation_id()
        self._command, self._recorded = command, False  # the invocation is recorded with its first answer
        self._runtimes: dict[str, str] = {}  # judge id -> the runtime its answers are recorded with

    def _open(self) -> sqlite3.Connection:
        """Connect, set WAL and create or migrate the schema. A file that is not a SQLite store is a one-line
        error naming it (a lock held by another writer stays a sqlite3 error: the CLI calls it transient)."""
        self._db = None
        try:
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            if self._db is not None:
                self._db.close()
            if isinstance(exc, sqlite3.OperationalError):
                if "locked" in str(exc):
                    raise
                raise BonError(f"{self.path}: cannot open the judgment store ({first_line(exc)})") from None  # read-only...
            raise BonError(f"{self.path}: not a readable judgment store ({first_line(exc)})") from None
        return self._db

    def _migrate(self) -> None:
        """Add the cost and runtime columns to a store written by an older bon (its rows keep NULLs)."""
        for table in ("judgments", "scores"):
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for column, kind in LATER_COLUMNS.items():
                if column not in have:
                    self._db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self._db.close()

    def register(self, identity: dict[str, Any], runtime: dict[str, Any] | None = None) -> str:
        """The judge's id; ``runtime`` (versions, backend settings) is recorded with every answer it stores."""
        jid = judge_id(identity)
        self._db.execute(
            "INSERT OR IGNORE INTO judges VALUES (?, ?)", (jid, json.dumps(redact(identity), sort_keys=True, default=str))
        )
        if runtime is not None:
            facts = json.dumps(redact(runtime), sort_keys=True, default=str)
            self._runtimes[jid] = hashlib.sha256(facts.encode()).hexdigest()[:20]
            self._db.execute("INSERT OR IGNORE INTO runtimes VALUES (?, ?)", (self._runtimes[jid], facts))
        return jid

    def get_many(self, jid: str, keys: Sequence[Key], retry_missing: bool = False) -> dict[Key, Verdict]:
        """Stored verdicts for the keys that have one; with ``retry_missing``, missing answers stored by
        earlier invocations count as not stored (so they are asked again, once per invocation)."""
        found: dict[Key, Verdict] = {}
        wanted = set(keys)
        for chunk in _chunks(sorted(wanted), 200):
            prompts = sorted({k[0] for k in chunk})
            marks = ",".join("?" * len(prompts))
            rows = self._db.execute(
                f"SELECT prompt, a, b, sample, better, score, missing, meta, invocation FROM judgments "
                f"WHERE judge_id = ? AND prompt IN ({marks})",
                (jid, *prompts),
            )
            for prompt, a, b, sample, better, score, missing, meta, bought_by in rows:
                key = (prompt, a, b, sample)
                if retry_missing and better is None and bought_by != self.invocation:
                    continue
                if key in wanted:
                    found[key] = Verdict(better=better, score=score, meta=json.loads(meta), missing=missing)
        return found

    def put_many(self, jid: str, items: Iterable[tuple[Key, Verdict]], stage: str = "", seconds_each: float = 0.0) -> None:
        """Store verdicts in one transaction, each with what it cost (``seconds_each``: its share of the
        batch's wall time). Transient failures are not stored: a rerun retries them."""
        now, runtime = time.time(), self._runtimes.get(jid)
        rows = [
            (jid, *key, v.better, v.score, redact(v.missing), redacted_json(v.meta), now,
             self.invocation, stage, seconds_each, *usage_of(v.meta), runtime)
            for key, v in items
            if not v.transient
        ]
        self._insert("judgments", JUDGMENT_COLUMNS, rows)

    def _insert(self, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
        """One transaction. A key already stored keeps its answer (another process may have stored it
        first); only a missing one is replaced, its costs added to the new answer's."""
        if not rows:
            return
        if not self._recorded:
            self._db.execute("INSERT OR IGNORE INTO invocations VALUES (?, ?, ?)", (self.invocation, time.time(), redact(self._command)))
            self._recorded = True
        answer = ANSWER_COLUMN[table]
        keys = columns[: columns.index(answer)]
        updates = [f"{c} = COALESCE({table}.{c}, 0) + COALESCE(excluded.{c}, 0)" if c in SUMMED_COSTS else f"{c} = excluded.{c}"
                   for c in columns if c not in keys]
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) "
               f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {', '.join(updates)} WHERE {table}.{answer} IS NULL")
        with _transaction(self._db):
            self._db.executemany(sql, rows)

    def provenance(self, jid: str, key: Key) -> dict[str, Any] | None:
        """What makes one stored answer reproducible: the judge's identity (model, settings, sampling),
        the content hashes of its key and the runtime it was bought under (None: not stored)."""
        row = self._db.execute(
            "SELECT j.identity, r.facts, t.invocation, t.stage FROM judgments t JOIN judges j USING (judge_id) "
            "LEFT JOIN runtimes r ON r.id = t.runtime WHERE t.judge_id = ? AND t.prompt = ? AND t.a = ? AND t.b = ? "
            "AND t.sample = ?", (jid, *key)).fetchone()
        if row is None:
            return None
        identity, facts, invocation, stage = row
        return {"judge_id": jid, "identity": json.loads(identity), **dict(zip(("prompt", "a", "b", "sample"), key)),
                "runtime": json.loads(facts) if facts else None, "invocation": invocation, "stage": stage}

    def get_scores(self, jid: str, keys: Sequence[tuple[str, str, int]]) -> dict[tuple[str, str, int], Score]:
        """Stored pointwise scores for (prompt, response, sample) keys."""
        wanted, found = set(keys), {}
        for prompt in sorted({k[0] for k in wanted}):
            rows = self._db.execute(
                "SELECT response, sample, value, missing, meta FROM scores WHERE judge_id = ? AND prompt = ?", (jid, prompt)
            )
            for response, sample, value, missing, meta in rows:
                if (prompt, response, sample) in wanted:
                    found[(prompt, response, sample)] = Score(value, json.loads(meta), missing)
        return found

    def put_scores(self, jid: str, items: Iterable[tuple[tuple[str, str, int], Score]], stage: str = "",
                   seconds_each: float = 0.0) -> None:
        now, runtime = time.time(), self._runtimes.get(jid)
        rows = [(jid, *key, s.value, redact(s.missing), redacted_json(s.details), now,
                 self.invocation, stage, seconds_each, *usage_of(s.details), runtime) for key, s in items if not s.transient]
        self._insert("scores", SCORE_COLUMNS, rows)

    def totals(self, jid: str, invocations: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per stage: the answers these invocations paid for (count, missing, judge seconds, tokens,
        dollars, first and last time), pairwise and pointwise together."""
        if not invocations:
            return {}
        marks = ",".join("?" * len(invocations))
        found: dict[str, dict[str, Any]] = {}
        for table, missing in (("judgments", "better IS NULL"), ("scores", "value IS NULL")):
            rows = self._db.execute(
                f"SELECT stage, COUNT(*), SUM({missing}), SUM(seconds), SUM(input_tokens), SUM(output_tokens), "
                f"SUM(cost_usd), MIN(created), MAX(created) FROM {table} "
                f"WHERE judge_id = ? AND invocation IN ({marks}) GROUP BY stage", (jid, *invocations))
            for stage, made, miss, secs, tin, tout, cost, first, last in rows:
                t = found.setdefault(stage or "", {"calls_made": 0, "missing_made": 0, "judge_seconds": 0.0, "input_tokens": 0,
                                                   "output_tokens": 0, "cost_usd": 0.0, "first": first, "last": last})
                t["calls_made"] += made
                t["missing_made"] += miss or 0
                t["judge_seconds"] = round(t["judge_seconds"] + (secs or 0.0), 3)
                t["input_tokens"] += tin or 0
                t["output_tokens"] += tout or 0
                t["cost_usd"] = round(t["cost_usd"] + (cost or 0.0), 6)
                t["first"], t["last"] = min(t["first"], first), max(t["last"], last)
        return found

    def unit_costs(self, jid: str, pointwise: bool = False) -> dict[str, float]:
        """A judge's measured judge seconds and dollars per paid answer (pairwise, or its pointwise scores),
        over every answer it was paid for (NaN when none was): what a setting's calls cost per prompt."""
        table = "scores" if pointwise else "judgments"
        made, secs, usd = self._db.execute(f"SELECT COUNT(*), SUM(seconds), SUM(cost_usd) FROM {table} "
                                           "WHERE judge_id = ? AND seconds IS NOT NULL", (jid,)).fetchone()
        return {"seconds_per_call": (secs or 0.0) / made if made else math.nan,
                "usd_per_call": (usd or 0.0) / made if made else math.nan}

    def answered(self, jid: str, stage: str | None = None, limit: int = 200_000) -> dict[Key, Verdict]:
        """A judge's stored answers (first sample only; of one ``stage`` when given), at most ``limit``:
        what calibrating a gate or a cascade reads (``bon.referee.GateState``)."""
        where, args = ("AND stage = ?", (stage,)) if stage is not None else ("", ())
        rows = self._db.execute(
            f"SELECT prompt, a, b, better, score, missing, meta FROM judgments WHERE judge_id = ? AND sample = 0 {where} "
            "AND better IS NOT NULL LIMIT ?", (jid, *args, limit))
        return {(prompt, a, b, 0): Verdict(better=better, score=score, meta=json.loads(meta), missing=missing)
                for prompt, a, b, better, score, missing, meta in rows}

    def answered_count(self, jid: str, stage: str | None = None) -> int:
        """How many answers :meth:`answered` would find without its limit (a count, nothing decoded)."""
        where, args = ("AND stage = ?", (stage,)) if stage is not None else ("", ())
        return self._db.execute(f"SELECT COUNT(*) FROM judgments WHERE judge_id = ? AND sample = 0 {where} "
                                "AND better IS NOT NULL", (jid, *args)).fetchone()[0]

    def answers_before(self, jid: str, invocation: str) -> dict[Key, Verdict]:
        """Every answer of a judge (each sample, missing ones too) that invocations other than
        ``invocation`` bought: what a replay reads into memory once (``analysis.tradeoff``), the same
        whatever the replay itself buys meanwhile."""
        rows = self._db.execute("SELECT prompt, a, b, sample, better, score, missing, meta FROM judgments "
                                "WHERE judge_id = ? AND invocation IS NOT ?", (jid, invocation))
        return {(prompt, a, b, sample): Verdict(better=better, score=score, meta=json.loads(meta), missing=missing)
                for prompt, a, b, sample, better, score, missing, meta in rows}

    def count(self, jid: str | None = None) -> int:
        if jid is None:
            return self._db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM judgments WHERE judge_id = ?", (jid,)).fetchone()[0]


class _transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, *_: Any) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")


def _chunks(seq: Sequence, size: int) -> Iterable[Sequence]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]
