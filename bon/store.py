"""The judgment store: every judge call, keyed by what the judge saw.

Key = (judge identity hash, prompt content hash, hash of the response shown as A, hash of the one
shown as B, sample index). So (A=x, B=y) is never reused for (A=y, B=x), while the reverse call of
match (x, y) is the very same judgment as the forward call of match (y, x). One SQLite file in WAL
mode, safe for writers in several processes, readable with any SQLite client.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

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
"""

Key = tuple[str, str, str, int]  # prompt, a, b, sample (the judge id is the store view's)


def judge_id(identity: dict[str, Any]) -> str:
    """A stable short hash of a judge's identity (name, model, settings, template hash...)."""
    canonical = json.dumps(identity, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:20]


class JudgmentStore:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def register(self, identity: dict[str, Any]) -> str:
        jid = judge_id(identity)
        self._db.execute(
            "INSERT OR IGNORE INTO judges VALUES (?, ?)", (jid, json.dumps(identity, sort_keys=True, default=str))
        )
        return jid

    def get_many(self, jid: str, keys: Sequence[Key]) -> dict[Key, Verdict]:
        """Stored verdicts for the keys that have one."""
        found: dict[Key, Verdict] = {}
        wanted = set(keys)
        for chunk in _chunks(sorted(wanted), 200):
            prompts = sorted({k[0] for k in chunk})
            marks = ",".join("?" * len(prompts))
            rows = self._db.execute(
                f"SELECT prompt, a, b, sample, better, score, missing, meta FROM judgments "
                f"WHERE judge_id = ? AND prompt IN ({marks})",
                (jid, *prompts),
            )
            for prompt, a, b, sample, better, score, missing, meta in rows:
                key = (prompt, a, b, sample)
                if key in wanted:
                    found[key] = Verdict(better=better, score=score, meta=json.loads(meta), missing=missing)
        return found

    def put_many(self, jid: str, items: Iterable[tuple[Key, Verdict]]) -> None:
        """Store verdicts in one transaction. Transient failures are not stored: a rerun retries them."""
        now = time.time()
        rows = [
            (jid, *key, v.better, v.score, v.missing, json.dumps(v.meta, default=str), now)
            for key, v in items
            if not v.transient
        ]
        if not rows:
            return
        with _transaction(self._db):
            self._db.executemany(
                "INSERT OR REPLACE INTO judgments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )

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

    def put_scores(self, jid: str, items: Iterable[tuple[tuple[str, str, int], Score]]) -> None:
        now = time.time()
        rows = [(jid, *key, s.value, s.missing, json.dumps(s.details, default=str), now) for key, s in items]
        if rows:
            with _transaction(self._db):
                self._db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

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
