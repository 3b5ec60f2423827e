"""Generated bad inputs for every reader of bon, each with its oracle, and the runner that plays them
through the real CLI. Shared by ``tests/test_fuzz.py`` (hypothesis, a few examples per reader) and
``benchmarks/fuzz.py`` (thousands of cases): one generator per reader, never two copies.

A case is a folder of files, a ``bon`` command line and what may come out of it:

* exit 0 with the right answer, which the case computes itself (the MMRB2 accuracy by a tiny
  implementation of the official semantics, the picks a finished study already holds, the N a config
  sets), or
* exit 2 with exactly one stderr line that names the file, key or option at fault, or
* exit 3 where a transient failure may stop a run;

never a traceback, a hang, or a change to a file the command must leave alone (hashed before and
after). Generators draw from a ``random.Random``, so a seed replays a case and hypothesis can drive
them through ``st.randoms()``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from random import Random
from typing import Any, Callable

import yaml

ROOT = Path(__file__).resolve().parents[1]
TASKS = [("t2i", "image", "t2i"), ("edit", "edit", "edit"), ("interleaved", "interleaved", "interleaved"),
         ("reasoning", "reasoning", "reasoning")]  # bon name, scorer name, file stem
OUTCOMES = ("ok", "traceback", "wrong", "hang", "damaged")
ODD_NAMES = ["plain", "with space", "ünïcödé", "日本語 dir", "dots..name", "dash-", "a'quote", "tab\tname"]


# --- cases and outcomes ------------------------------------------------------------------------


@dataclass
class Case:
    reader: str                      # the table row: config, mmrb2, run-folder, cli-options
    mutation: str                    # what was done to the input, for the report
    argv: list[str]
    cwd: Path
    expect: frozenset[int]           # the exit codes that may come back
    answer: Callable[[Case, str], str | None] | None = None  # at exit 0: None when right, else what differs
    names: tuple[str, ...] = ()      # at exit 2 the stderr line names one of these
    watch: Path | None = None        # files under it must not change...
    may_write: tuple[str, ...] = ()  # ...except these (globs relative to ``watch``), and only at exit 0 or 3
    records: tuple[str, ...] = ()    # files a refused command may still touch: the provenance of a started run
    lock: Path | None = None         # a SQLite file held locked by another connection...
    lock_s: float = 0.0              # ...for this long after the command starts
    timeout: float = 60.0
    writer: Path | None = None       # a run folder's writer lock another process holds while the command runs
    keep_lines: tuple[str, ...] = ()  # files (relative to ``cwd``) whose lines must all still be there afterwards


@dataclass
class Outcome:
    rc: int | None  # None: it hung and was killed
    stdout: str
    stderr: str
    seconds: float


def snapshot(folder: Path | None) -> dict[str, str]:
    """Every file under ``folder`` by relative path, with its SHA-256 (SQLite's -wal/-shm sidecars left out)."""
    if folder is None or not folder.exists():
        return {}
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.endswith(("-wal", "-shm", "-journal")):
            found[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def verdict(case: Case, outcome: Outcome, before: dict[str, str], after: dict[str, str]) -> tuple[str, str]:
    """(one of OUTCOMES, what was wrong) for a finished case."""
    if outcome.rc is None:
        return "hang", f"still running after {case.timeout:.0f} s"
    if "Traceback (most recent call last)" in outcome.stderr or outcome.rc not in (0, 2, 3, 130):
        return "traceback", _tail(outcome.stderr) or f"exit {outcome.rc}"
    damage = _damage(case, outcome.rc, before, after)
    if damage:
        return "damaged", damage
    if outcome.rc not in case.expect:
        return "wrong", f"exit {outcome.rc}, expected {sorted(case.expect)}: {_tail(outcome.stderr)}"
    if outcome.rc == 2:
        lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("bon: error: "):
            return "wrong", f"exit 2 needs one 'bon: error:' line on stderr, got {len(lines)}: {_tail(outcome.stderr)}"
        said = " ".join(lines[0].split())  # the CLI folds whitespace (a tab in a path) into single spaces
        forms = [form for name in case.names for form in (" ".join(name.split()), repr(name)[1:-1])]  # or quotes it
        if case.names and not any(form in said for form in forms):
            return "wrong", f"the error line names none of {list(case.names)[:4]}: {lines[0][:300]}"
    if outcome.rc == 0 and case.answer is not None:
        problem = case.answer(case, outcome.stdout)
        if problem:
            return "wrong", problem
    return "ok", ""


def _damage(case: Case, rc: int, before: dict[str, str], after: dict[str, str]) -> str:
    allowed = lambda rel: rc in (0, 3) and any(fnmatch(rel, g) for g in case.may_write)  # noqa: E731
    changed = [rel for rel, digest in before.items() if after.get(rel) != digest and not allowed(rel)]
    if rc == 2:
        changed += [rel for rel in after if rel not in before]  # a refused command leaves the disk as it was
        changed = [rel for rel in changed if not any(fnmatch(rel, g) for g in case.records)]
    return f"changed or removed: {', '.join(sorted(changed)[:5])}" if changed else ""


def _tail(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[:400]


# --- running a case -------------------------------------------------------------------------------


def run_case(case: Case, spawn: bool = False) -> tuple[str, str, Outcome]:
    """Run a case through the real CLI (a forked child of this process, or a fresh ``python -m bon.cli``)
    and judge it."""
    before = snapshot(case.watch)
    kept = {rel: _lines(case.cwd / rel) for rel in case.keep_lines}
    outcome = (_spawned if spawn else _forked)(case)
    after = snapshot(case.watch)
    kind, detail = verdict(case, outcome, before, after)
    lost = [rel for rel, lines in kept.items() if not lines <= _lines(case.cwd / rel)]
    if kind in ("ok", "wrong") and lost:
        kind, detail = "damaged", f"lines lost from {', '.join(lost)}"
    return kind, detail, outcome


def _lines(path: Path) -> set[str]:
    return set(path.read_text(encoding="utf-8", errors="replace").splitlines()) if path.is_file() else set()


def _env() -> dict[str, str]:
    return {**os.environ, "BON_QUIET": "1", "MPLBACKEND": "Agg", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


def _forked(case: Case) -> Outcome:
    """``bon.cli.main(argv)`` in a forked child with its own stdin, stdout, stderr and working folder;
    killed (with its process group) when it outlives the case's timeout."""
    out_path, err_path = case.cwd / ".fuzz-stdout", case.cwd / ".fuzz-stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    holder = _hold_lock(case.lock, case.lock_s) if case.lock is not None else None
    writer = _hold_writer_lock(case.writer, case.timeout) if case.writer is not None else None
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 1
        try:
            os.setpgid(0, 0)
            os.chdir(case.cwd)
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                    (2, err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
                os.dup2(os.open(path, flags), fd)
            # the process may have swapped sys.stdout for its own capture (pytest does): write to the fds
            sys.stdout = open(1, "w", encoding="utf-8", errors="replace", closefd=False)
            sys.stderr = open(2, "w", encoding="utf-8", errors="replace", closefd=False)
            os.environ.update({"BON_QUIET": "1", "MPLBACKEND": "Agg"})
            from bon.cli import main

            rc = main(list(case.argv))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - what the interpreter would print
            traceback.print_exc()
            rc = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(rc)
    rc = _wait(pid, started, case.timeout)
    if holder is not None:
        holder.wait()
        holder.stdout.close()
    _release_writer(writer, case.writer)
    seconds = time.monotonic() - started
    text = lambda p: p.read_text(encoding="utf-8", errors="replace") if p.exists() else ""  # noqa: E731
    outcome = Outcome(rc, text(out_path), text(err_path), seconds)
    out_path.unlink(missing_ok=True)
    err_path.unlink(missing_ok=True)
    return outcome


def _wait(pid: int, started: float, timeout: float) -> int | None:
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - started > timeout:
            _kill_group(pid)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.005)
    _kill_group(pid)  # workers a killed or finished child left behind
    return os.waitstatus_to_exitcode(status)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


LOCKER = """import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=1, isolation_level=None)
try:
    db.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
except sqlite3.DatabaseError:
    print("not locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen | None:
    """Another process in the middle of a write transaction on the store for ``seconds``. (Not this
    process: SQLite's lock bookkeeping would follow a forked child and confuse it.)"""
    if not path.exists():
        return None
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(path), str(seconds)], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    proc.stdout.readline()  # wait until it holds the lock (or found none to hold)
    return proc


def _spawned(case: Case) -> Outcome:
    """The same case in a fresh ``python -m bon.cli`` process (the spot check of the fork server)."""
    holder = _hold_lock(case.lock, case.lock_s) if case.lock is not None else None
    writer = _hold_writer_lock(case.writer, case.timeout) if case.writer is not None else None
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "bon.cli", *case.argv], cwd=case.cwd, env=_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=max(case.timeout - (time.monotonic() - started), 1))
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        out, err = proc.communicate()
        rc = None
    if holder is not None:
        holder.wait()
        holder.stdout.close()
    _release_writer(writer, case.writer)
    return Outcome(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - started)


def _release_writer(writer: subprocess.Popen | None, path: Path | None) -> None:
    """End the process holding a writer lock, and remove its lock file as it would have."""
    if writer is not None:
        writer.kill()
        writer.wait()
        writer.stdout.close()
        Path(path).unlink(missing_ok=True)


def warm_up() -> None:
    """Import what the commands import lazily, once, so that every forked child starts warm (the dry run's
    CUDA check imports torch: seconds per child otherwise)."""
    import importlib

    for name in ("bon.cli", "bon.study", "bon.plan", "bon.merge", "bon.mmrb2.flips", "bon.stages.select",
                 "bon.stages.curves", "analysis.bundle", "analysis.report", "analysis.leaderboard", "analysis.diagnostics",
                 "analysis.tradeoff", "judges", "generators", "verifiers", "generators.synthetic", "judges.synthetic",
                 "verifiers.synthetic", "matplotlib.pyplot", "torch"):
        try:
            importlib.import_module(name)
        except ImportError:
            pass


# --- shared inputs: a finished tiny study -------------------------------------------------------

TINY_STUDY = {
    "seed": 0, "n": 3, "tasks": ["t2i", "edit"],
    "suite": {"name": "synthetic", "per_task": 2},
    "preference": {"prompts_per_task": 3, "pairs_per_prompt": 2, "margin": 0.25, "annotators": 3},
    "generators": [{"name": "synthetic", "label": "strong", "options": {"skill": "strong"}}],
    "verifier": {"name": "synthetic"},
    "strategy": {"name": "knockout"},
    "judges": ["colour-hist", "position-bias", "random"],
}
JUDGE_LABELS = ["colour-hist", "position-bias", "random"]


@dataclass
class Fixtures:
    """What many cases read and none may change: a finished tiny study and what it found."""

    run: Path
    picks: dict[str, dict[tuple[str, str], int]]  # judge -> (generator, prompt id) -> chosen index
    results: dict[tuple[str, str, str], float | None] = field(default_factory=dict)  # (task, generator, judge) -> BoN score


def make_fixtures(root: Path) -> Fixtures:
    """Run the tiny study once (a few seconds) in a forked child, and read back what it holds."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "tiny.yaml"
    config.write_text(yaml.safe_dump({"out": "finished", **TINY_STUDY}), encoding="utf-8")
    case = Case("fixture", "none", ["run", "tiny.yaml"], root, frozenset({0}), timeout=300)
    kind, detail, outcome = run_case(case)
    if kind != "ok":
        raise RuntimeError(f"the tiny study failed: {detail} {outcome.stderr[-2000:]}")
    run = root / "finished"
    picks: dict[str, dict[tuple[str, str], int]] = {}
    for line in (run / "picks.jsonl").read_text(encoding="utf-8").splitlines():
        p = json.loads(line)
        picks.setdefault(p["judge"], {})[(p["generator"], p["prompt_id"])] = p["index"]
    import csv

    with (run / "results.csv").open(encoding="utf-8") as fh:
        results = {(r["task"], r["generator"], r["judge"]): _number(r["bon_score"]) for r in csv.DictReader(fh)}
    return Fixtures(run, picks, results)


def _number(text: str) -> float | None:
    return float(text) if text not in ("", "nan", "NaN") else None


# --- the MMRB2 reader: bench files and judgment files ------------------------------------------

ANSWERS = ["A", "B", "A", "B", "A", "B", "", "tie", "a", None]


@dataclass
class Mmrb2World:
    """A benchmark folder and judgment files as data, written to disk after the mutations."""

    bench: dict[str, list[dict[str, Any]]]      # bon task -> pairs
    bench_names: dict[str, str]                 # bon task -> file name
    judged: dict[str, dict[str, Any]]           # prediction key -> {pair id: entry}
    items: list[tuple[str, str | None]]         # (prediction key, task label given or None)
    invalid: list[str] = field(default_factory=list)  # names that an error line may name
    task_option: str | None = None
    raw: dict[str, bytes] = field(default_factory=dict)  # files whose bytes were mutated, by relative path
    spoilt: set[tuple[str, str]] = field(default_factory=set)  # (file, pair id) made bad: later mutations keep them


def official_accuracy(pairs: list[dict[str, Any]], judged: dict[str, Any]) -> tuple[int, int]:
    """(correct, counted) by the official scorer's rules, written again from its description: for every
    pair present in the predictions, the first forward sample is right if it equals ``chosen`` and the
    first reverse sample if its flip does; empty or absent judgements are not counted."""
    chosen = {str(p.get("id", p.get("pair_id"))): p.get("chosen") for p in pairs if isinstance(p, dict)}
    correct = counted = 0
    for pid, entry in judged.items():
        if pid not in chosen or not isinstance(entry, dict):
            continue
        for direction, flip in (("forward", False), ("reverse", True)):
            samples = entry.get(direction) or []
            answer = samples[0].get("judgement") if isinstance(samples, list) and samples and isinstance(samples[0], dict) else None
            if not answer or not isinstance(answer, str):
                continue
            counted += 1
            if flip:
                answer = {"A": "B", "B": "A"}.get(answer, answer)
            correct += answer == chosen[pid]
    return correct, counted


def _pair(task: str, i: int, rng: Random) -> dict[str, Any]:
    pid = rng.choice([f"{task}-{i:04d}", f"{task}_ペア_{i}", f"{task} pair {i}", f"{task}/{i}"])
    text = rng.choice(["a red cube", "ünïcode ✓", "", "line\nbreak", "\"quoted\""])
    content = [["text", text]] + ([["image", f"images/{task}_{i}.png"]] if rng.random() < 0.5 else [])
    return {"id": pid, "prompt_source": rng.choice(["genai", "gedit", "ünï"]), "prompt_metadata": {"k": i},
            "response_a": {"model_name": rng.choice(["m1", "m2"]), "response_content": content},
            "response_b": {"model_name": rng.choice(["m1", "m3"]), "response_content": [["text", "other"]]},
            "chosen": rng.choice("AB"), "human_annotations": [rng.randint(1, 6) for _ in range(3)]}


def _samples(rng: Random) -> list[dict[str, Any]]:
    samples = []
    for _ in range(rng.choice([1, 1, 1, 2, 3, 0])):
        s: dict[str, Any] = {"evaluator": "fuzz", "metadata": {"score": rng.randint(1, 6)}}
        answer = rng.choice(ANSWERS)
        if answer is not None or rng.random() < 0.5:
            s["judgement"] = answer
        samples.append(s)
    return samples


def mmrb2_world(rng: Random) -> Mmrb2World:
    tasks = [t[0] for t in rng.sample(TASKS, rng.randint(1, 4))]
    bench = {t: [_pair(t, i, rng) for i in range(rng.randint(1, 6))] for t in tasks}
    for pairs in bench.values():  # ids must be unique within a file
        seen: set[str] = set()
        for p in pairs:
            while p["id"] in seen:
                p["id"] += "x"
            seen.add(p["id"])
    names = {t: rng.choice([f"{_stem(t)}.json", f"{_stem(t)}_response_only.json"]) for t in tasks}
    judged, items = {}, []
    for t in rng.sample(tasks, rng.randint(1, len(tasks))):
        entries = {p["id"]: {"forward": _samples(rng), "reverse": _samples(rng)} for p in bench[t] if rng.random() < 0.85}
        if rng.random() < 0.2:
            entries[f"unknown-{rng.randint(0, 99)}"] = {"forward": _samples(rng), "reverse": _samples(rng)}
        key = f"preds/{rng.choice(ODD_NAMES)}/{t}.json"
        judged[key] = entries
        label = rng.choice([None, t, _scorer(t), _scorer(t).upper()])
        items.append((key, label))
    rng.shuffle(items)
    return Mmrb2World(bench, names, judged, items)


def _stem(task: str) -> str:
    return next(t[2] for t in TASKS if t[0] == task)


def _scorer(task: str) -> str:
    return next(t[1] for t in TASKS if t[0] == task)


def _bench_path(world: Mmrb2World, task: str) -> str:
    return f"bench/{world.bench_names[task]}"


def _bad_bench(world: Mmrb2World, task: str, name: str | None = None) -> None:
    """A bench file made bad: it matters when the command reads it (see :func:`_read_tasks`)."""
    world.invalid.append(f"{task}@{name or _bench_path(world, task)}")


# Each mutation changes the world and, when it makes the input bad, records what the error may name.

def _random_pair(w: Mmrb2World, rng: Random) -> tuple[str, dict] | None:
    """A random task with pairs and one of its pairs (None when there is none to pick)."""
    if not w.bench:
        return None
    task = rng.choice(list(w.bench))
    if not w.bench[task]:
        return None
    return task, rng.choice(w.bench[task])


def _m_drop_pair_field(w: Mmrb2World, rng: Random) -> None:
    picked = _random_pair(w, rng)
    if picked is None:
        return
    task, pair = picked
    key = rng.choice(["id", "chosen", "response_a", "response_b", "prompt_source", "prompt_metadata", "human_annotations"])
    pair.pop(key, None)
    if key in ("id", "chosen", "response_a", "response_b"):
        _bad_bench(w, task)


def _m_retype_pair_field(w: Mmrb2World, rng: Random) -> None:
    picked = _random_pair(w, rng)
    if picked is None:
        return
    task, pair = picked
    key, value, bad = rng.choice([
        ("chosen", rng.choice([1, "a", None, ["A"], "AB", True, "C", float("nan")]), True),
        ("id", rng.choice([["x"], {"a": 1}, True, 1.5, None, ""]), True),
        ("response_a", rng.choice([5, "text", [["text", 5]], [["video", "v.mp4"]], [["image", "/etc/passwd"]],
                                   [["image", "../up.png"]], [["text"]], {"model_name": "m"}]), True),
        ("prompt_metadata", rng.choice([5, "meta", [1]]), True),
        ("prompt_metadata", None, False),
        ("human_annotations", rng.choice([None, "x", float("nan"), [float("inf")], {"deep": [[[]]]}]), False),
        ("prompt_source", rng.choice([5, None, ["x"]]), False),
    ])
    pair[key] = value
    if bad:
        _bad_bench(w, task)


def _m_duplicate_pair_id(w: Mmrb2World, rng: Random) -> None:
    if not w.bench:
        return
    task = rng.choice(list(w.bench))
    if len(w.bench[task]) < 2:
        return
    a, b = rng.sample(w.bench[task], 2)
    if not isinstance(a.get("id", a.get("pair_id")), str):
        return
    b["id"] = a.get("id", a.get("pair_id"))
    _bad_bench(w, task)


def _m_reorder(w: Mmrb2World, rng: Random) -> None:
    for pairs in w.bench.values():
        rng.shuffle(pairs)
    for key, entries in w.judged.items():
        ids = list(entries)
        rng.shuffle(ids)
        w.judged[key] = {pid: entries[pid] for pid in ids}
    rng.shuffle(w.items)


def _m_pair_id_key(w: Mmrb2World, rng: Random) -> None:
    if not w.bench:
        return
    task = rng.choice(list(w.bench))
    for pair in w.bench[task]:
        if "id" in pair:
            pair["pair_id"] = pair.pop("id")


def _m_extra_keys(w: Mmrb2World, rng: Random) -> None:
    if not w.bench:
        return
    task = rng.choice(list(w.bench))
    for pair in w.bench[task]:
        pair[rng.choice(["extra", "ünï", "score"])] = rng.choice([1, None, "x", [1, 2]])


def _m_drop_judged_ids(w: Mmrb2World, rng: Random) -> None:
    key = rng.choice(list(w.judged))
    for pid in list(w.judged[key]):
        if rng.random() < 0.5 and (key, pid) not in w.spoilt:
            del w.judged[key][pid]


def _m_retype_judgment(w: Mmrb2World, rng: Random) -> None:
    key = rng.choice(list(w.judged))
    entries = w.judged[key]
    if not entries:
        return
    pid = rng.choice(list(entries))
    if not isinstance(entries[pid], dict):
        return
    w.spoilt.add((key, pid))
    choice = rng.randrange(5)
    if choice == 0:
        entries[pid] = rng.choice([5, None, [], "A"])
    elif choice == 1:
        entries[pid]["forward"] = rng.choice([{"judgement": "A"}, "A", 5, None])
    elif choice == 2:
        entries[pid]["reverse"] = [rng.choice(["A", 5, None, ["A"]])]
    elif choice == 3:
        entries[pid]["forward"] = [{"judgement": rng.choice([1, ["A"], True, {"x": "A"}, float("nan")])}]
    else:
        entries[pid]["reverse"] = [{"judgement": rng.choice(["A", "B"])}, {"judgement": 7}]  # only the first counts,
        w.invalid.append("?" + key)  # but a later sample of the wrong type is malformed: refusing it is fine too
        return
    w.invalid.append(key)


def _m_empty_and_odd_answers(w: Mmrb2World, rng: Random) -> None:
    key = rng.choice(list(w.judged))
    for pid, entry in w.judged[key].items():
        if isinstance(entry, dict) and rng.random() < 0.5 and (key, pid) not in w.spoilt:
            entry[rng.choice(["forward", "reverse"])] = rng.choice([[], [{"judgement": ""}], [{}], [{"judgement": "tie"}]])


def _m_another_tasks_file(w: Mmrb2World, rng: Random) -> None:
    """A judgment file handed in as another task's (TASK=FILE with the wrong task)."""
    i = rng.randrange(len(w.items))
    key, _ = w.items[i]
    others = [t[0] for t in TASKS if t[0] != Path(key).stem]
    w.items[i] = (key, rng.choice(others))


def _m_bench_as_judgments(w: Mmrb2World, rng: Random) -> None:
    if not w.bench:
        return
    task = rng.choice(list(w.bench))
    key = f"preds/bench-copy/{task}.json"
    w.judged[key] = {"pairs": list(w.bench[task])}
    w.items.append((key, rng.choice([None, task])))
    w.invalid.append(key)


def _m_task_option(w: Mmrb2World, rng: Random) -> None:
    w.task_option = rng.choice(["all", "t2i", "image", "edit", "reasoning", "interleaved", "video", "T2I", ""])


def _m_missing_bench_file(w: Mmrb2World, rng: Random) -> None:
    task = Path(rng.choice(w.items)[0]).stem
    if task in w.bench:
        del w.bench[task]
        _bad_bench(w, task, "bench")
        w.invalid[-1] += "|" + next(k for k, _ in w.items if Path(k).stem == task)


def _m_ambiguous_bench_files(w: Mmrb2World, rng: Random) -> None:
    if not w.bench:
        return
    task = rng.choice(list(w.bench))
    w.bench_names[task] = f"{_stem(task)}_a.json"
    w.raw[f"bench/{_stem(task)}_b.json"] = json.dumps({"pairs": []}).encode()
    _bad_bench(w, task, "bench")


BYTE_MUTATIONS = ["truncate", "bom", "bad utf-8", "deep nesting", "empty", "garbage", "folder", "duplicate key",
                  "nan judgement", "huge number"]


def _m_bytes(w: Mmrb2World, rng: Random) -> None:
    """Damage one file's bytes (written later, instead of the world's JSON)."""
    files = [(_bench_path(w, t), {"pairs": p}) for t, p in w.bench.items()] + list(w.judged.items())
    if not files:
        return
    rel, data = rng.choice(files)
    text = json.dumps(data, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
    how = rng.choice(BYTE_MUTATIONS)
    bad = True
    if how == "truncate":
        raw = text.encode()[: rng.randrange(max(text.rfind("}"), 1))]
    elif how == "bom":
        raw, bad = b"\xef\xbb\xbf" + text.encode(), None  # either read as JSON or refused: both are fine
    elif how == "bad utf-8":
        at = text.find('"', 2)
        raw = text[: at + 1].encode() + b"\xff\xfe" + text[at + 1:].encode()
    elif how == "deep nesting":
        raw = (text[:-1] + (',' if len(text) > 2 else '') + '"deep": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    elif how == "empty":
        raw = b""
    elif how == "garbage":
        raw = rng.choice([b"not json", b"\x00\x01\x02", b"[1, 2", b"null", b"\"pairs\"", b"{\"pairs\": 5}"])
        if raw == b"null" or raw == b"\"pairs\"":
            bad = True
    elif how == "folder":
        raw = None
    elif how == "duplicate key":
        if text.startswith("{\"") and len(data) and rel.startswith("preds/"):
            first = next(iter(data))
            raw = ("{" + json.dumps(first) + ": " + json.dumps(data[first]) + ", " + text[1:]).encode()
        else:
            raw, bad = text.encode(), False
    elif how == "nan judgement" and rel.startswith("preds/") and data:
        first = next(iter(data))
        raw = ("{" + json.dumps(first) + ': {"forward": [{"judgement": NaN}], "reverse": []}'
               + ("," if len(data) > 1 else "") + json.dumps({k: v for k, v in data.items() if k != first})[1:]).encode()
    elif how == "huge number":
        raw = text.replace('"metadata": {', '"metadata": {"big": 1e999, "int": ' + "9" * 5000 + ", ", 1).encode()
        bad = None  # Python's own reader refuses a 5000-digit integer: a clean refusal is fine
    else:
        raw, bad = text.encode(), False
    w.raw[rel] = raw if raw is not None else b"<folder>"
    task = next((t for t in w.bench if _bench_path(w, t) == rel), None)
    name = f"{task}@{rel}" if task else rel
    if how == "folder" and task:
        name += "|bench"  # a folder where the task file should be: the task has no file
    if bad is None:
        w.invalid.append("?" + name)  # may be refused, or read as the same data
    elif bad:
        w.invalid.append(name)


MMRB2_MUTATIONS: dict[str, Callable[[Mmrb2World, Random], None]] = {
    "drop pair field": _m_drop_pair_field, "retype pair field": _m_retype_pair_field,
    "duplicate pair id": _m_duplicate_pair_id, "reorder": _m_reorder, "pair_id key": _m_pair_id_key,
    "extra keys": _m_extra_keys, "missing judged ids": _m_drop_judged_ids, "retype judgment": _m_retype_judgment,
    "empty and odd answers": _m_empty_and_odd_answers, "another task's file": _m_another_tasks_file,
    "bench file as judgments": _m_bench_as_judgments, "--task": _m_task_option,
    "missing bench file": _m_missing_bench_file, "ambiguous bench files": _m_ambiguous_bench_files,
    "damaged bytes": _m_bytes,
}


def make_mmrb2_case(rng: Random, folder: Path, fixtures: Fixtures | None = None) -> Case:
    w = mmrb2_world(rng)
    chosen = rng.sample(list(MMRB2_MUTATIONS), rng.choice([0, 1, 1, 1, 2]))
    chosen.sort(key=lambda name: name == "damaged bytes")  # bytes are written from the data: their damage comes last
    for name in chosen:
        MMRB2_MUTATIONS[name](w, rng)
    _write_world(w, folder)
    argv = ["mmrb2", "accuracy", "--bench-dir", "bench", "--json", "out/accuracy.json"]
    if w.task_option is not None:
        argv += ["--task", w.task_option]
    for key, label in w.items:
        given = f"{label}={key}" if label else key
        argv += (["--predictions", given] if rng.random() < 0.5 else [given])
    expect, answer, names = _mmrb2_expectation(w)
    return Case("mmrb2", "+".join(chosen) or "none", argv, folder, expect, answer, names, watch=folder,
                may_write=("out/accuracy.json",), timeout=30)


def _write_world(w: Mmrb2World, folder: Path) -> None:
    files: dict[str, Any] = {_bench_path(w, t): {"pairs": p} for t, p in w.bench.items()}
    files.update(w.judged)
    (folder / "bench").mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        raw = w.raw.get(rel)
        if raw == b"<folder>":
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.write_bytes(raw if raw is not None else json.dumps(data, ensure_ascii=False, indent=1).encode())
    for rel, raw in w.raw.items():
        if rel not in files:
            (folder / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / rel).write_bytes(raw)


def _mmrb2_expectation(w: Mmrb2World):
    """What `bon mmrb2 accuracy` must answer for this world: an error naming a bad file, or the numbers."""
    read = _read_tasks(w)
    live = [n for n in w.invalid if "@" not in n or n.lstrip("?").split("@", 1)[0] in read]
    maybe = [n[1:].split("@")[-1] for n in live if n.startswith("?")]
    invalid = [n.split("@")[-1] for n in live if not n.startswith("?")]
    problem = _mmrb2_semantics(w)
    if invalid or isinstance(problem, str):  # a bad file, or a command line that is wrong: what the line may name
        names = [part for n in invalid + maybe + ([problem] if isinstance(problem, str) else []) for part in n.split("|")]
        return frozenset({2}), None, tuple(filter(None, names))
    expected = problem

    def answer(case: Case, stdout: str) -> str | None:
        path = case.cwd / "out/accuracy.json"
        try:
            got = json.loads(path.read_text(encoding="utf-8"), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except (OSError, ValueError) as exc:
            return f"--json output unreadable or not strict JSON: {exc}"
        for scorer, (correct, counted) in expected["tasks"].items():
            t = got.get("tasks", {}).get(scorer)
            if t is None:
                return f"task {scorer} missing from the output"
            acc = 100.0 * correct / counted if counted else None
            if (t["correct"], t["judgements"]) != (correct, counted) or not _close(t["accuracy"], acc):
                return f"{scorer}: got {t['correct']}/{t['judgements']} ({t['accuracy']}), expected {correct}/{counted}"
        if set(got.get("tasks", {})) != set(expected["tasks"]):
            return f"tasks {sorted(got.get('tasks', {}))}, expected {sorted(expected['tasks'])}"
        correct = sum(c for c, _ in expected["tasks"].values())
        counted = sum(n for _, n in expected["tasks"].values())
        o = got["overall"]
        if (o["correct"], o["judgements"]) != (correct, counted) or not _close(o["accuracy"], 100.0 * correct / counted):
            return f"overall: got {o['correct']}/{o['judgements']}, expected {correct}/{counted}"
        return None

    codes = {0, 2} if maybe else {0}
    return frozenset(codes), answer, tuple(part for m in maybe for part in m.split("|"))


def _read_tasks(w: Mmrb2World) -> set[str]:
    """The bench files `bon mmrb2 accuracy` reads: every task file when a plain FILE must be matched to
    its task by pair ids, else those of the tasks given."""
    spell = {name.lower(): t[0] for t in TASKS for name in t[:2]}
    if any(label is None for _, label in w.items):
        return {t[0] for t in TASKS}
    return {spell[label.lower()] for _, label in w.items}


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _mmrb2_semantics(w: Mmrb2World) -> dict[str, Any] | str:
    """The per-task (correct, counted) the files must give, or the names an error must quote (``a|b``)."""
    spell = {name.lower(): t[0] for t in TASKS for name in t[:2]}
    ids = {t: {str(p.get("id", p.get("pair_id"))) for p in pairs} for t, pairs in w.bench.items()}
    wanted = None
    if w.task_option is not None and w.task_option != "all":
        wanted = spell.get(w.task_option.strip().lower())
        if wanted is None:
            return f"{w.task_option!r}|--task"
    by_task: dict[str, str] = {}
    for key, label in w.items:
        if label is not None:
            task = spell[label.lower()]
        else:
            overlap = {t: len(set(w.judged[key]) & ids[t]) for t in ids}
            best = max(overlap.values(), default=0)
            tied = [t for t, n in overlap.items() if n == best]
            if best == 0 or len(tied) > 1:
                return key
            task = tied[0]
        if task in by_task:
            return f"{key}|{by_task[task]}"
        by_task[task] = key
    if wanted is not None and any(t != wanted for t in by_task):
        return "|".join(k for t, k in by_task.items() if t != wanted)
    if w.task_option == "all" and len(by_task) < 4:
        return "--task all"
    if any(t not in w.bench for t in by_task):
        return "bench"
    tasks = {_scorer(t): official_accuracy(w.bench[t], w.judged[key]) for t, key in by_task.items()}
    if not sum(n for _, n in tasks.values()):
        return "|".join(by_task.values()) + "|no judged pair"
    return {"tasks": tasks}


# --- the config reader: `bon run CONFIG --dry-run` ---------------------------------------------


@dataclass
class ConfigWorld:
    raw: dict[str, Any]
    bad: list[str] = field(default_factory=list)    # names an error line may quote; non-empty: must be refused
    maybe: bool = False                             # refusing is fine too (a value no reader can be sure of)
    text: str | None = None                         # the file's text, when mutated as text
    data: bytes | None = None                       # or its bytes
    folder: bool = False                            # the config path is a folder
    touched: set[str] = field(default_factory=set)  # top-level keys an earlier mutation set: others leave them be


def config_world(rng: Random) -> ConfigWorld:
    raw: dict[str, Any] = {"out": f"runs/{rng.choice(ODD_NAMES)}", **json.loads(json.dumps(TINY_STUDY))}
    raw["judges"] = [rng.choice([j, {"name": j}, {"name": j, "label": f"{j}-{rng.choice(['x', 'ü', '评'])}"}])
                     for j in rng.sample(JUDGE_LABELS + ["image-bias", "text-overlap"], rng.randint(1, 4))]
    for key in ("seed", "preference", "strategy"):  # a config must name its verifier (no silent default)
        if rng.random() < 0.2:
            raw.pop(key)
    return ConfigWorld(raw)


def _c_drop(w: ConfigWorld, rng: Random) -> None:
    key = rng.choice(list(w.raw))
    if key in w.touched:
        return  # dropping what an earlier mutation made bad would make it good again
    w.touched.add(key)
    del w.raw[key]
    if key in ("out", "generators", "judges", "verifier"):
        w.bad.append(key)
    elif key in w.bad:  # a bad value dropped: the default is good again
        w.bad.remove(key)


def _c_unknown_key(w: ConfigWorld, rng: Random) -> None:
    key = rng.choice(["nn", "judge", "ünknown", "Seed", "n ", "tasks2"])
    where = rng.choice(["top", "preference", "judge", "suite", "judge options"])
    if where in ("judge", "judge options") and not (isinstance(w.raw.get("judges"), list) and w.raw["judges"]):
        where = "top"
    if where == "suite" and not isinstance(w.raw.get("suite"), dict):
        where = "top"
    w.touched.add({"top": key, "judge": "judges", "judge options": "judges"}.get(where, where))
    if where == "top":
        w.raw[key] = 1
    elif where == "preference":
        if not isinstance(w.raw.get("preference"), dict):
            w.raw["preference"] = {}
        w.raw["preference"][key] = 1
    elif where == "judge":
        w.raw["judges"][0] = {**_entry(w.raw["judges"][0]), key: 1}
    elif where == "suite":
        w.raw["suite"][key] = 1
    else:
        w.raw["judges"][0] = {**_entry(w.raw["judges"][0]), "options": {key: 1}}
    w.bad.append(key.strip() or key)


def _entry(entry: Any) -> dict[str, Any]:
    return dict(entry) if isinstance(entry, dict) else {"name": entry}


def _c_wrong_type(w: ConfigWorld, rng: Random) -> None:
    key, value = rng.choice([
        ("n", "3"), ("n", 3.0), ("n", True), ("n", None), ("n", [3]), ("n", {"n": 3}), ("seed", "zero"), ("seed", 0.5),
        ("tasks", "t2i"), ("tasks", 5), ("tasks", {"t2i": 1}), ("tasks", [["t2i"]]), ("tasks", []), ("tasks", ["t2i", "t2i"]),
        ("tasks", ["image"]), ("suite", "synthetic"), ("suite", ["synthetic"]), ("generators", {"name": "synthetic"}),
        ("generators", ["nosuch-generator"]), ("judges", "colour-hist"), ("judges", [5]), ("judges", [{"label": "x"}]),
        ("judges", ["colour-hist", "colour-hist"]), ("verifier", 5), ("strategy", ["knockout"]), ("preference", [1]),
        ("max_calls", "5"), ("max_calls", -1), ("samples", 0), ("shard", "2/2"), ("shard", "a/b"), ("shard", 5),
        ("executor", "bogus"), ("executor", {"name": "nowhere"}), ("devices", {"memory_gb": -1}), ("devices", [80]),
        ("official", "yes"), ("out", None), ("out", ["a"]), ("out", {"a": 1}), ("out", 5),
    ])
    if key in w.touched:
        return  # already set by an earlier mutation: keep its value (the oracle follows one per key)
    w.touched.add(key)
    w.raw[key] = value
    w.bad.append(key)


def _c_suite_or_preference(w: ConfigWorld, rng: Random) -> None:
    where, key, value, bad = rng.choice([
        ("suite", "per_task", "2", True), ("suite", "per_task", -1, True), ("suite", "per_task", 0, None),
        ("suite", "per_task", 10 ** 9, None), ("suite", "name", "nosuch-suite", True), ("suite", "name", 5, True),
        ("preference", "margin", "wide", True), ("preference", "annotators", 0, True), ("preference", "margin", float("nan"), True),
        ("preference", "prompts_per_task", -1, True), ("preference", "pairs_per_prompt", 10 ** 20, None),
        ("preference", "margin", float("inf"), None), ("preference", "annotators", 2.5, True),
    ])
    if where in w.touched:
        return
    w.touched.add(where)
    w.raw.setdefault(where, {})
    if not isinstance(w.raw[where], dict):
        w.raw[where] = {}
    w.raw[where][key] = value
    if bad is None:
        w.maybe = True
    elif bad:
        w.bad.append(key)


def _c_huge_or_negative(w: ConfigWorld, rng: Random) -> None:
    key, value, bad = rng.choice([
        ("n", 10 ** 30, None), ("n", -3, True), ("n", 0, True), ("n", 1, True), ("n", 2 ** 63, None), ("seed", -1, None),
        ("seed", 2 ** 70, None), ("seed", -(2 ** 70), None), ("max_calls", 10 ** 40, False), ("max_calls", 0, False),
        ("samples", 10 ** 6, None), ("devices", {"memory_gb": 1e308}, False), ("devices", {"memory_gb": float("inf")}, None),
        ("devices", {"memory_gb": float("nan")}, True), ("n", 4, False), ("seed", 12345, False),
    ])
    if key in w.touched:
        return  # already set by an earlier mutation: keep its value
    w.touched.add(key)
    w.raw[key] = value
    if bad is None:
        w.maybe = True
    elif bad:
        w.bad.append(key)


def _c_unicode(w: ConfigWorld, rng: Random) -> None:
    if "out" in w.touched or "judges" in w.touched:
        return
    w.touched.update({"out", "judges"})
    w.raw["out"] = f"runs/{rng.choice(['ünï cødé', '日本', 'emoji 🎲', 'a/../b'])}"
    if isinstance(w.raw.get("judges"), list):
        w.raw["judges"] = w.raw["judges"] + [{"name": "colour-hist", "label": rng.choice(["评判者", "jüdge ✓", "Ωmega", "ひ"])}]


def _c_text(w: ConfigWorld, rng: Random) -> None:
    """Mutations that only exist as text: duplicated keys, bad syntax, empty files, alias bombs, tags."""
    text = yaml.safe_dump(w.raw, sort_keys=False, allow_unicode=True, default_flow_style=False)
    how = rng.choice(["duplicate top key", "duplicate nested key", "bad syntax", "empty", "comments only", "list",
                      "scalar", "alias bomb", "python tag", "tabs", "bom", "bad utf-8", "folder", "anchors", "binary"])
    if how == "duplicate top key":
        key = rng.choice([k for k in w.raw if k != "out"] or ["out"])
        w.text, w.bad = text + f"{key}: {yaml.safe_dump(w.raw[key], default_flow_style=True).strip()}\n", w.bad + [key]
        if key == "out":
            w.text = text + "out: elsewhere\n"
    elif how == "duplicate nested key":
        w.text = text + "preference:\n  margin: 0.25\n  margin: 0.3\n"
        w.raw.pop("preference", None)
        w.text = yaml.safe_dump(w.raw, sort_keys=False, allow_unicode=True) + "preference:\n  margin: 0.25\n  margin: 0.3\n"
        w.bad.append("margin")
    elif how == "bad syntax":
        w.text, w.bad = text + rng.choice(["judges: [colour-hist\n", "n: : 3\n", "  - bad indent\nx\n", "{unclosed: 1\n"]), w.bad + ["YAML"]
    elif how == "empty":
        w.text, w.bad = "", w.bad + ["mapping"]
    elif how == "comments only":
        w.text, w.bad = "# nothing here\n---\n", w.bad + ["mapping"]
    elif how == "list":
        w.text, w.bad = "- out: x\n- n: 3\n", w.bad + ["mapping"]
    elif how == "scalar":
        w.text, w.bad = rng.choice(["3\n", "just text\n", "null\n", "~\n"]), w.bad + ["mapping"]
    elif how == "alias bomb":  # nine levels of nine aliases: 9**9 items if anything walks it
        levels = ", ".join(["&l0 [lol, lol]"] + [f"&l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)])
        where = rng.choice(["tasks", "n", "out", "suite", "judges", "generators"])
        value = {"suite": f"{{name: synthetic, per_task: 2, x: [{levels}]}}",
                 "judges": f"[{{name: colour-hist, options: {{seed: [{levels}]}}}}]",
                 "generators": f"[{{name: synthetic, label: strong, options: {{skill: [{levels}]}}}}]"}
        body = yaml.safe_dump({k: v for k, v in w.raw.items() if k != where}, sort_keys=False, allow_unicode=True)
        w.text = body + f"{where}: {value.get(where, f'[{levels}]')}\n"
        w.bad.append(where)
    elif how == "python tag":
        w.text, w.bad = text + "seed: !!python/object/apply:os.system ['echo owned']\n", w.bad + ["YAML"]
    elif how == "tabs":
        w.text, w.bad = text.replace("  ", "\t", 1) if "  " in text else text + "\tn: 3\n", w.bad + ["YAML"]
    elif how == "bom":
        w.data = b"\xef\xbb\xbf" + text.encode()
    elif how == "bad utf-8":
        w.data, w.bad = text.encode() + b"# \xff\xfe\n", w.bad + ["UTF-8"]
    elif how == "folder":
        w.folder, w.bad = True, w.bad + ["folder"]
    elif how == "anchors":  # a well-behaved anchor and alias: the same study
        w.text = text.replace("suite:", "suite: &s", 1) if "suite:\n" in text else text
    elif how == "binary":
        w.text, w.bad = text + "seed: !!binary aGVsbG8=\n", w.bad + ["seed"]


CONFIG_MUTATIONS: dict[str, Callable[[ConfigWorld, Random], None]] = {
    "dropped key": _c_drop, "unknown key": _c_unknown_key, "wrong type": _c_wrong_type,
    "suite/preference values": _c_suite_or_preference, "huge or negative": _c_huge_or_negative,
    "unicode": _c_unicode, "text": _c_text,
}


def make_config_case(rng: Random, folder: Path, fixtures: Fixtures | None = None) -> Case:
    w = config_world(rng)
    chosen = rng.sample(list(CONFIG_MUTATIONS), rng.choice([0, 1, 1, 1, 2]))
    chosen.sort(key=lambda name: name == "text")  # the text is written from the data: its mutation comes last
    for name in chosen:
        CONFIG_MUTATIONS[name](w, rng)
    rel = f"{rng.choice(ODD_NAMES)}/study {rng.choice(['', 'ü', '..x'])}.yaml"
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if w.folder:
        path.mkdir()
    elif w.data is not None:
        path.write_bytes(w.data)
    else:
        path.write_text(w.text if w.text is not None else yaml.safe_dump(w.raw, sort_keys=False, allow_unicode=True),
                        encoding="utf-8")
    names = (rel,)
    if w.bad:
        return Case("config", "+".join(chosen), ["run", rel, "--dry-run"], folder, frozenset({2}), None, names,
                    watch=folder, timeout=30)

    def answer(case: Case, stdout: str) -> str | None:
        n = w.raw.get("n", 8)
        tasks = w.raw.get("tasks", [t[0] for t in TASKS])
        per_task = (w.raw.get("suite") or {}).get("per_task", 40)
        strategy = (w.raw.get("strategy") or {"name": "knockout"})
        strategy = strategy if isinstance(strategy, str) else strategy.get("name", "knockout")
        wanted = [f"N = {n}; strategy {strategy}", f"prompts: {per_task * len(tasks)} for Best-of-N"]
        wanted += [f"judge {_label(j)}" for j in w.raw["judges"]]
        missing = [text for text in wanted if text not in stdout]
        return f"the plan does not say {missing[0]!r}" if missing else None

    return Case("config", "+".join(chosen) or "none", ["run", rel, "--dry-run"], folder,
                frozenset({0, 2}) if w.maybe else frozenset({0}), answer, names, watch=folder, timeout=30)


def _label(entry: Any) -> str:
    return entry if isinstance(entry, str) else entry.get("label", entry["name"])


# --- the run-folder reader: a finished study, damaged ---------------------------------------------

STAGE_FILES = {"config": "config.yaml", "prompts": "prompts.jsonl", "candidates": "candidates/strong/candidates.jsonl",
               "scores": "scores.jsonl", "picks": "picks.jsonl", "store": "judgments.sqlite", "stats": "stats.json"}
# What each command reads (beyond the folder itself); damage elsewhere must not change its answer.
NEEDS = {"select": {"config", "prompts", "candidates", "scores", "store", "image"},
         "curve": {"config", "prompts", "candidates", "scores", "store", "image"},
         "accuracy": {"mmrb2"}, "flips": {"config", "mmrb2"},
         "leaderboard": {"config", "picks", "scores", "stats", "prompts", "candidates", "mmrb2"},
         "report": set(STAGE_FILES) | {"mmrb2", "image"}, "resume": set(STAGE_FILES) | {"mmrb2", "image"}}
# Damage a resumed `bon run` redoes: a torn tail is an interrupted append, a missing stage file is work not done yet.
REDONE = {("deleted", "prompts"), ("torn tail", "candidates"), ("torn tail", "scores"), ("deleted", "scores"),
          ("torn tail", "picks"), ("bad line", "picks"),
          ("deleted", "candidates"), ("deleted", "store"), ("deleted", "stats"), ("deleted", "picks"),
          ("locked", "store"), ("benign", "config")}  # a deleted candidate image is refused, before anything is written


@dataclass
class RunDamage:
    how: str         # torn tail, bad line, deleted, edited, corrupt, locked, benign
    part: str        # which file: a STAGE_FILES key, mmrb2 or image
    name: str        # its path relative to the run folder, for the error line
    maybe: bool = False  # e.g. a truncated SQLite file some reads get through


def _jsonl_damage(run: Path, rng: Random, part: str) -> RunDamage:
    path = run / STAGE_FILES[part]
    if not path.exists():  # deleted by the other damage of this case
        return RunDamage("deleted", part, STAGE_FILES[part])
    lines = path.read_bytes().splitlines(keepends=True)
    how = rng.choice(["torn tail", "bad line", "bad line"])
    if how == "torn tail":
        last = lines[-1]
        lines[-1] = last[: rng.randrange(1, max(len(last) - 2, 2))]
    else:
        i = rng.randrange(len(lines))
        lines.insert(i, rng.choice([b"{oops\n", b"[1, 2]\n", b"\"text\"\n", b"{\"id\": \n", lines[i][: len(lines[i]) // 2] + b"\n"]))
    path.write_bytes(b"".join(lines))
    # a torn tail of an appended file is an interrupted write: the unit is redone, or never read
    return RunDamage(how, part, STAGE_FILES[part], maybe=how == "torn tail" and part in ("candidates", "scores"))


def _delete_damage(run: Path, rng: Random) -> RunDamage:
    part = rng.choice(list(STAGE_FILES) + ["mmrb2", "image", "pref image"])
    if part == "mmrb2":
        target = rng.choice(sorted((run / "mmrb2").rglob("*.json")))
    elif part in ("image", "pref image"):
        images = sorted(p for p in (run / "candidates").rglob("*.png") if p.name.startswith("pref-") == (part == "pref image"))
        target = rng.choice(images)
    else:
        target = run / STAGE_FILES[part]
    target.unlink(missing_ok=True)
    return RunDamage("deleted", "pref image" if part == "pref image" else part, target.relative_to(run).as_posix())


def _config_damage(run: Path, rng: Random) -> RunDamage:
    path = run / "config.yaml"
    if not path.exists():
        return RunDamage("deleted", "config", "config.yaml")
    text = path.read_text(encoding="utf-8")
    how = rng.choice(["unknown key", "wrong type", "bad yaml", "no study", "duplicate key", "other n", "comment",
                      "max_calls", "reordered"])
    if how == "unknown key":
        text = text.replace("study:\n", "study:\n  nn: 3\n", 1)
    elif how == "wrong type":
        text = text.replace("  n: 3\n", "  n: three\n", 1)
    elif how == "bad yaml":
        text = text.replace("study:\n", "study: [\n", 1)
    elif how == "no study":
        text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(("study:", "  "))) + "\n"
    elif how == "duplicate key":
        text = text.replace("study:\n", "study:\n  seed: 1\n", 1)
    elif how == "other n":
        text = text.replace("  n: 3\n", "  n: 5\n", 1)
    elif how == "comment":
        text = "# edited by hand ✓\n" + text.replace("\n", "  # note\n", 3)
    elif how == "max_calls":
        text = text.replace("  max_calls: null\n", "  max_calls: 100000\n", 1)
    else:
        doc = yaml.safe_load(text)
        text = yaml.safe_dump({k: doc[k] for k in reversed(list(doc))}, sort_keys=True, allow_unicode=True)
    path.write_text(text, encoding="utf-8")
    benign = how in ("comment", "max_calls", "reordered")
    # another N: the candidates on disk no longer complete the study, which is what the line may say
    name = "config.yaml|" + STAGE_FILES["candidates"] if how == "other n" else "config.yaml"
    return RunDamage("benign" if benign else "edited", "config", name)


def _store_damage(run: Path, rng: Random) -> RunDamage:
    path = run / "judgments.sqlite"
    if not path.exists():
        return RunDamage("deleted", "store", "judgments.sqlite")
    data = path.read_bytes()
    how = rng.choice(["random bytes", "zero header", "truncated", "text", "empty", "locked", "locked"])
    if how == "locked":
        return RunDamage("locked", "store", "judgments.sqlite")
    raw = {"random bytes": bytes(rng.randrange(256) for _ in range(4096)), "zero header": b"\0" * 100 + data[100:],
           "truncated": data[: len(data) // 2], "text": b"not a database\n", "empty": b""}[how]
    path.write_bytes(raw)
    # an empty file is a new store to SQLite; a truncated one can still answer some reads
    return RunDamage("deleted" if how == "empty" else "corrupt", "store", "judgments.sqlite", maybe=how == "truncated")


def _mmrb2_file_damage(run: Path, rng: Random) -> RunDamage:
    files = sorted((run / "mmrb2").rglob("*.json"))
    if not files:
        return RunDamage("benign", "mmrb2", "mmrb2")
    target = rng.choice(files)
    data = target.read_bytes()
    target.write_bytes(rng.choice([data[: len(data) // 2], b"", b"[]", data.replace(b'"A"', b"5", 1)]))
    changed = target.read_bytes() != data
    return RunDamage("bad line" if changed else "benign", "mmrb2", target.relative_to(run).as_posix())


RUN_DAMAGE: dict[str, Callable[[Path, Random], RunDamage]] = {
    "prompts.jsonl": lambda run, rng: _jsonl_damage(run, rng, "prompts"),
    "candidates.jsonl": lambda run, rng: _jsonl_damage(run, rng, "candidates"),
    "scores.jsonl": lambda run, rng: _jsonl_damage(run, rng, "scores"),
    "picks.jsonl": lambda run, rng: _jsonl_damage(run, rng, "picks"),
    "deleted file": _delete_damage, "edited config.yaml": _config_damage, "store": _store_damage,
    "mmrb2 file": _mmrb2_file_damage,
}
RUN_COMMANDS = ["select"] * 16 + ["accuracy"] * 8 + ["flips"] * 4 + ["leaderboard"] * 4 + ["curve"] * 2 + ["report", "resume"]


def make_run_case(rng: Random, folder: Path, fixtures: Fixtures, command: str | None = None) -> Case:
    rel = rng.choice(["run", "ünï run", "a b/run"])
    run = folder / rel
    shutil.copytree(fixtures.run, run)
    chosen = rng.sample(list(RUN_DAMAGE), rng.choice([0, 1, 1, 1, 2]))
    damage = [RUN_DAMAGE[name](run, rng) for name in chosen]
    command = command or rng.choice(RUN_COMMANDS)
    judge = rng.choice(JUDGE_LABELS)
    argv, may_write, answer = _run_command(command, rel, judge, fixtures, run)
    bench_files = sorted(p.name for p in (fixtures.run / "mmrb2").glob("*.json"))
    # a plain judgment FILE is matched to its task by pair ids: every task file of the folder is read
    reads = tuple(f"mmrb2/{name}" for name in bench_files[1:]) + (f"mmrb2/{bench_files[0]}",
                                                                   f"mmrb2/judgments/{judge}/{bench_files[0]}")
    relevant = [d for d in damage if _matters(d, command, reads)]
    locks = [d for d in damage if d.how == "locked"]
    if command == "resume":
        relevant = [d for d in relevant if (d.how, d.part) not in REDONE]
        for d in relevant:
            d.maybe = d.maybe or d.part == "mmrb2"  # the preference set's files are written again from the store
    corrupt_store = any(d.part == "store" and d.how == "corrupt" for d in damage)
    if corrupt_store:
        may_write = tuple(g for g in may_write if not g.endswith("judgments.sqlite"))  # never written over
    if command == "resume" and any("|" in d.name for d in relevant):  # another N in config.yaml: another study,
        expect, answer = frozenset({0, 2}), None  # which a resume extends (or refuses); its numbers are its own
    elif not relevant:
        expect = frozenset({0, 3}) if locks else frozenset({0})
    elif command in ("select", "accuracy", "resume") and all(not d.maybe for d in relevant):
        expect, answer = frozenset({2}), None
    else:
        expect = frozenset({0, 2})
        answer = answer if command in ("select", "accuracy") else None  # a number given must still be right
    parts = [part for d in relevant for part in d.name.split("|")]
    names = tuple(parts) + tuple(Path(part).name for part in parts)
    return Case("run-folder", f"{command}: " + ("+".join(f"{d.how} {d.part}" for d in damage) or "none"), argv, folder,
                expect, answer, names, watch=folder, may_write=may_write,
                lock=run / "judgments.sqlite" if locks else None, lock_s=rng.uniform(0.2, 1.5) if locks else 0.0,
                timeout=90, records=_records(command, rel, corrupt_store))


def _records(command: str, rel: str, corrupt_store: bool) -> tuple[str, ...]:
    """What a command may change even when it stops with exit 2: a resume's provenance (config.yaml and the
    ledger record the started run) and the judgments a judging command paid for before it met the bad input
    (nothing computed is lost), unless the store is the damaged file."""
    if command == "resume":
        return (f"{rel}/config.yaml", f"{rel}/invocations.json")
    return () if corrupt_store or command not in ("select", "curve") else (f"{rel}/judgments.sqlite",)


def _matters(d: RunDamage, command: str, reads: tuple[str, ...] = ()) -> bool:
    if d.how == "benign" or d.how == "locked":
        return False
    if command == "accuracy" and d.part == "mmrb2":  # a task file that is gone is simply not matched against;
        return d.name in reads and (d.how != "deleted" or d.name in reads[-2:])  # the judged task's must be there
    if d.part == "pref image":
        return command in ("report", "resume")  # the preference set's images are read only when it is judged again
    if command == "select":
        if d.part == "scores" and d.how in ("torn tail", "deleted"):
            return False  # picks never read scores; a missing score is a missing number in the table
    if command in ("select", "curve") and d.part == "store" and d.how == "deleted":
        return False  # the judge is asked again
    return d.part in NEEDS[command]


def _run_command(command: str, rel: str, judge: str, fixtures: Fixtures, run: Path):
    """argv, the files it may write (relative to the case folder) and the right answer."""
    if command == "select":
        def answer(case: Case, stdout: str) -> str | None:
            got = json.loads((case.cwd / "out/select.json").read_text(encoding="utf-8"))
            picks = {(p["generator"], p["prompt_id"]): p["index"] for p in got["picks"]}
            return None if picks == fixtures.picks[judge] else f"picks differ from the finished study's for {judge}"
        return (["select", "--run", rel, "--judge", judge, "--json", "out/select.json"],
                (f"{rel}/picks/*", f"{rel}/judgments.sqlite", "out/select.json"), answer)
    if command == "curve":
        return (["curve", "--run", rel, "--judge", judge, "--subsets", "2", "--json", "out/curve.json"],
                (f"{rel}/curves/*", f"{rel}/judgments.sqlite", "out/curve.json"), None)
    if command == "accuracy":
        task_file = sorted(p.name for p in (fixtures.run / "mmrb2").glob("*.json"))[0]
        pairs = json.loads((fixtures.run / "mmrb2" / task_file).read_text(encoding="utf-8"))["pairs"]
        judged = json.loads((fixtures.run / "mmrb2/judgments" / judge / task_file).read_text(encoding="utf-8"))
        correct, counted = official_accuracy(pairs, judged)

        def answer(case: Case, stdout: str) -> str | None:
            got = json.loads((case.cwd / "out/acc.json").read_text(encoding="utf-8"))["overall"]
            return None if (got["correct"], got["judgements"]) == (correct, counted) else \
                f"accuracy {got['correct']}/{got['judgements']}, expected {correct}/{counted}"
        return (["mmrb2", "accuracy", "--bench-dir", f"{rel}/mmrb2", f"{rel}/mmrb2/judgments/{judge}/{task_file}",
                 "--json", "out/acc.json"], ("out/acc.json",), answer)
    if command == "flips":
        return ["mmrb2", "flips", "--run", rel, "--json", "out/flips.json"], ("out/flips.json",), None
    if command == "leaderboard":
        return (["leaderboard", "--run", rel, "--task", "edit", "--generator", "strong", "--json", "out/lb.json"],
                ("out/lb.json",), None)
    if command == "report":
        return (["report", "--run", rel, "--out", "out/report", "--bootstrap", "100", "--no-power", "--json", "out/r.json"],
                ("out/*",), _same_results(fixtures, "out/report/results.csv"))
    return (["run", f"{rel}/config.yaml", "--out", rel], (f"{rel}/*",), _same_results(fixtures, f"{rel}/results.csv"))


def _same_results(fixtures: Fixtures, rel: str) -> Callable[[Case, str], str | None]:
    def answer(case: Case, stdout: str) -> str | None:
        import csv

        with (case.cwd / rel).open(encoding="utf-8") as fh:
            got = {(r["task"], r["generator"], r["judge"]): _number(r["bon_score"]) for r in csv.DictReader(fh)}
        if set(got) != set(fixtures.results):
            return f"{rel}: rows {sorted(set(got) ^ set(fixtures.results))[:3]} differ from the finished study's"
        bad = [k for k, v in got.items() if not _close(v, fixtures.results[k])]
        return f"{rel}: Best-of-N score of {bad[0]} is {got[bad[0]]}, was {fixtures.results[bad[0]]}" if bad else None
    return answer


# --- command-line options ----------------------------------------------------------------------------

ODD_OPTIONS = [  # (K=V as typed, bad syntax?)
    ("", True), ("=", True), ("=1", True), (" =1", True), ("seed", True), ("seed=[", True), ("seed={a: *b}", True),
    ("seed=1", False), ("seed=1=2", None), ("seed==1", None), ("séed=1", None), ("seed=  7 ", False), ("seed=null", None),
    ("seed=!!python/object/apply:os.system ['true']", True), ("seed=1e999", None), ("seed=" + "9" * 5000, None),
    ("nosuch=1", None), ("name=other", None), ("seed=[1, 2]", None), ("min_share=0.02", False), ("min_share=abc", None),
]
SHARDS = ["0/1", "1/2", "0/2", "2/2", "1/0", "/", "a", "0/-1", "-1/2", " 1/2", "1/2/3", "0.5/2", "１/２", "0/" + "9" * 30, "", "0/2 "]
MAX_CALLS = ["0", "5", "-1", "abc", " 7", "1e3", "9" * 30, "", "0x10"]


def make_cli_case(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    kind = rng.choice(["judge-option", "strategy-option", "shard", "max-calls", "paths"])
    return {"judge-option": _cli_judge_option, "strategy-option": _cli_strategy_option, "shard": _cli_shard,
            "max-calls": _cli_max_calls, "paths": _cli_paths}[kind](rng, folder, fixtures)


def _study_config(folder: Path, rng: Random) -> str:
    rel = f"{rng.choice(ODD_NAMES)}/cfg.yaml"
    (folder / rel).parent.mkdir(parents=True, exist_ok=True)
    (folder / rel).write_text(yaml.safe_dump({"out": "never-made", **TINY_STUDY}), encoding="utf-8")
    return rel


def _cli_judge_option(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    run = folder / "run"
    shutil.copytree(fixtures.run, run)
    option, bad = rng.choice(ODD_OPTIONS)
    judge = rng.choice(["colour-hist", "random"])
    if judge == "random" and option.startswith("min_share"):
        bad = True  # an option colour-hist has and random has not
    argv = ["select", "--run", "run", "--judge", judge, "--judge-option", option, "--json", "out/s.json"]
    expect = frozenset({2}) if bad else frozenset({0, 2})
    return Case("cli-options", f"--judge-option {option[:30]!r}", argv, folder, expect, None,
                ("--judge-option", option.split("=")[0] or "KEY=VALUE") if bad else (), watch=folder,
                may_write=("run/picks/*", "run/judgments.sqlite", "out/s.json"), timeout=60)


def _cli_strategy_option(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    strategy, option, bad = rng.choice([
        ("knockout", "swap=gated", None), ("knockout", "aggregate=borda", True), ("round-robin", "aggregate=borda", False),
        ("round-robin", "aggregate=nonsense", None), ("knockout", "gate=2", None), ("knockout", "seeding=index", False),
        ("knockout", "=", True), ("knockout", "gate=-1", None), ("knockout", "gate=nan", None), ("pointwise", "x=1", True),
        ("no-such-strategy", "a=1", True), ("knockout", "swap=[", True), ("round-robin", "early_stop=yes", None),
    ])
    cfg = _study_config(folder, rng)
    argv = ["run", cfg, "--dry-run", "--strategy", strategy, "--strategy-option", option]
    return Case("cli-options", f"--strategy {strategy} --strategy-option {option}", argv, folder,
                frozenset({2}) if bad else frozenset({0, 2}) if bad is None else frozenset({0}), None,
                ("--strategy-option", option.split("=")[0] or "KEY", strategy, cfg) if bad else (), watch=folder, timeout=30)


def _shard_ok(text: str) -> bool:
    index, sep, count = text.partition("/")
    try:
        i, k = int(index), int(count)
    except ValueError:
        return False
    return bool(sep) and k >= 1 and 0 <= i < k


def _cli_shard(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    shard = rng.choice(SHARDS)
    cfg = _study_config(folder, rng)
    ok = _shard_ok(shard)
    return Case("cli-options", f"--shard {shard!r}", ["run", cfg, "--dry-run", "--shard", shard], folder,
                frozenset({0}) if ok else frozenset({2}), None, ("shard", cfg), watch=folder, timeout=30)


def _cli_max_calls(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    value = rng.choice(MAX_CALLS)
    try:
        ok = int(value) >= 0
    except ValueError:
        ok = False
    cfg = _study_config(folder, rng)
    return Case("cli-options", f"--max-calls {value[:12]!r}", ["run", cfg, "--dry-run", "--max-calls", value], folder,
                frozenset({0}) if ok else frozenset({2}), None, ("--max-calls",), watch=folder, timeout=30)


def _cli_paths(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    """Paths with spaces, unicode and ``..`` for the bench folder and the --json file."""
    name = rng.choice(ODD_NAMES)
    run = folder / name / "run"
    shutil.copytree(fixtures.run, run)
    task_file = sorted(p.name for p in (run / "mmrb2").glob("*.json"))[0]
    pairs = json.loads((run / "mmrb2" / task_file).read_text(encoding="utf-8"))["pairs"]
    judged = json.loads((run / "mmrb2/judgments/random" / task_file).read_text(encoding="utf-8"))
    correct, counted = official_accuracy(pairs, judged)
    bench = rng.choice([f"{name}/run/mmrb2", f"{name}/../{name}/run/mmrb2", f"./{name}/run/./mmrb2", f"{name}/run/mmrb2/"])
    json_out, bad = rng.choice([("out ü/x y.json", None), ("out/../x.json", None), ("new dir/../y.json", None),
                                (f"{name}", "--json"), (f"{name}/run/config.yaml/x.json", "--json"),
                                ("ü/日本/z.json", None)])
    if rng.random() < 0.2:
        bench, bad = f"{name}/no such dir", "no such dir" + (f"|{bad}" if bad else "")
    argv = ["mmrb2", "accuracy", "--bench-dir", bench, f"{bench}/judgments/random/{task_file}", "--json", json_out]

    def answer(case: Case, stdout: str) -> str | None:
        got = json.loads((case.cwd / json_out).read_text(encoding="utf-8"))["overall"]
        return None if (got["correct"], got["judgements"]) == (correct, counted) else \
            f"accuracy {got['correct']}/{got['judgements']}, expected {correct}/{counted}"
    return Case("cli-options", f"paths {bench!r} --json {json_out!r}", argv, folder,
                frozenset({2}) if bad else frozenset({0}), answer, tuple(bad.split("|")) if bad else (), watch=folder,
                may_write=(json_out.replace("new dir/../", "").replace("out/../", ""), "x.json", "y.json", "out ü/*", "ü/*"),
                timeout=30)


# --- the fetch reader: `bon mmrb2 fetch --from DIR` on damaged local copies of the hub layout ------

HUB_TEXTS = ["Draw <image_1> next to <image_2>.", "<image_3> only", "no placeholders here", "", None,
             "Put <image_0> <image_0> <image_0>", "ünï <image_9>code", "line\nbreak <image_1>"]
HUB_IDS = ["{task}-{i:04d}", "{task}_ペア_{i}", "{task} pair {i}", "{task}/{i}", "{task}_{i}", ".{i}", "_.{i}"]


@dataclass
class HubWorld:
    """A local copy of the hub dataset (Parquet, one folder or one file name per config) as rows, with the
    colour of every image cell, written to disk after the mutations."""

    rows: dict[str, list[dict[str, Any]]]       # config -> hub rows (images as {"bytes", "path"})
    colours: dict[int, tuple[int, int, int]]    # id(cell) -> the colour its PNG holds
    flat: bool                                  # data/<config>-00000-of-00001.parquet, else <config>/test-...
    names: list[str] = field(default_factory=list)  # what an error line may name; empty: the copy is good
    dropped: set[str] = field(default_factory=set)  # configs whose file is missing
    raw: dict[str, bytes] = field(default_factory=dict)  # files whose bytes were damaged, by config
    linked: set[str] = field(default_factory=set)  # configs whose file is a link to a file outside the copy


def _png_cell(colour: tuple[int, int, int]) -> dict[str, Any]:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2, 2), colour).save(buf, format="PNG")
    return {"bytes": buf.getvalue(), "path": None}


def hub_world(rng: Random) -> HubWorld:
    configs = [t[0] for t in rng.sample(TASKS, rng.randint(1, 3))]
    rows: dict[str, list[dict[str, Any]]] = {}
    colours: dict[int, tuple[int, int, int]] = {}
    k = 0
    for config in configs:
        rows[config] = []
        for i in range(rng.randint(1, 4)):
            row: dict[str, Any] = {"pair_id": rng.choice(HUB_IDS).format(task=config, i=i), "prompt_source": "fuzz",
                                   "chosen": rng.choice("ABab"), "human_annotations": "[6, 5, 6]",
                                   "prompt_metadata": rng.choice(['{"category": "x"}', "", "not json"]),
                                   "response_a_model": "m1", "response_b_model": "m2"}
            for side in ("prompt", "response_a", "response_b"):
                row[f"{side}_text"] = rng.choice(HUB_TEXTS)
                row[f"{side}_images"] = []
                for _ in range(rng.choice([0, 1, 1, 2, 3])):
                    k += 1
                    cell = _png_cell((k % 256, k // 256, 200))
                    colours[id(cell)] = (k % 256, k // 256, 200)
                    row[f"{side}_images"].append(cell)
            rows[config].append(row)
        seen: set[str] = set()
        for row in rows[config]:  # a good copy has unique ids per config (a mutation may repeat one)
            while row["pair_id"] in seen:
                row["pair_id"] += "x"
            seen.add(row["pair_id"])
    return HubWorld(rows, colours, flat=rng.random() < 0.5)


def _hub_file(w: HubWorld, config: str) -> str:
    return f"hub/data/{config}-00000-of-00001.parquet" if w.flat else f"hub/{config}/test-00000-of-00001.parquet"


def _some_row(w: HubWorld, rng: Random) -> tuple[str, dict[str, Any]]:
    config = rng.choice(sorted(w.rows))
    return config, rng.choice(w.rows[config])


def _some_cell(w: HubWorld, rng: Random) -> tuple[dict[str, Any], str, int] | None:
    """A row, one of its image columns and an index into it (None when no row has an image)."""
    cells = [(row, f"{side}_images", j) for config in sorted(w.rows) for row in w.rows[config]
             for side in ("prompt", "response_a", "response_b") for j in range(len(row[f"{side}_images"]))]
    return rng.choice(cells) if cells else None


def _f_duplicate_id(w: HubWorld, rng: Random) -> None:
    config = rng.choice(sorted(w.rows))
    if len(w.rows[config]) < 2:
        w.rows[config].append(dict(w.rows[config][0], response_b_images=[]))
    first, second = rng.sample(w.rows[config], 2)
    second["pair_id"] = first["pair_id"]
    w.names.append(f"pair_id {first['pair_id']!r}")


def _f_slug_alike_ids(w: HubWorld, rng: Random) -> None:
    """Ids the official names would give one file: they must keep their own images (a good copy)."""
    config = rng.choice(sorted(w.rows))
    pairs = rng.choice([("x/1", "x_1"), (".", "_."), ("X", "x"), ("a b", "a_b")])
    rows = w.rows[config]
    while len(rows) < 2:
        rows.append(dict(rows[0], response_a_images=[_cell_copy(w, c) for c in rows[0]["response_a_images"]]))
    for row, pid in zip(rng.sample(rows, 2), pairs):
        row["pair_id"] = pid
    seen: set[str] = set()
    for row in rows:
        while row["pair_id"] in seen:
            row["pair_id"] += "x"
        seen.add(row["pair_id"])


def _cell_copy(w: HubWorld, cell: dict[str, Any]) -> dict[str, Any]:
    copy = dict(cell)
    w.colours[id(copy)] = w.colours[id(cell)]
    return copy


def _f_bad_cell(w: HubWorld, rng: Random) -> None:
    from crafted_images import NOT_AN_IMAGE, huge_png, truncated_png

    found = _some_cell(w, rng)
    if found is None:
        return
    row, column, j = found
    kind = rng.choice(["path", "not an image", "truncated", "huge", "huge warning", "empty"])
    bad = {"path": {"bytes": None, "path": rng.choice(["/etc/hostname", "images/x.png", "../x.png"])},
           "not an image": {"bytes": NOT_AN_IMAGE, "path": None}, "truncated": {"bytes": truncated_png(), "path": None},
           "huge": {"bytes": huge_png(20000, 20000), "path": None}, "huge warning": {"bytes": huge_png(10000, 10000), "path": None},
           "empty": {"bytes": b"", "path": None}}[kind]
    row[column][j] = bad
    w.names.append(f"pair {row['pair_id']}: {column}[{j}]")


def _f_bad_field(w: HubWorld, rng: Random) -> None:
    _, row = _some_row(w, rng)
    key, value, name = rng.choice([("chosen", "C", "chosen"), ("chosen", "", "chosen"), ("prompt_metadata", "[1, 2]", "prompt_metadata"),
                                   ("pair_id", None, "no pair_id"), ("pair_id", "", "no pair_id")])
    row[key] = value
    w.names.append(name if key == "pair_id" else f"pair {row['pair_id']}")


def _f_missing_config(w: HubWorld, rng: Random) -> None:
    config = rng.choice(sorted(w.rows))
    w.dropped.add(config)
    w.names.append(f"no copy of config {config!r}")


def _f_damaged_file(w: HubWorld, rng: Random) -> None:
    config = rng.choice(sorted(w.rows))
    w.raw[config] = rng.choice([b"", b"PAR1 not really", b"garbage" * 40, b"<truncate>"])
    w.names.append(_hub_file(w, config).split("/", 1)[1])


def _f_link_outside(w: HubWorld, rng: Random) -> None:
    config = rng.choice(sorted(w.rows))
    w.linked.add(config)
    w.names.append(_hub_file(w, config).split("/", 1)[1])


def _f_extra_columns(w: HubWorld, rng: Random) -> None:
    for rows in w.rows.values():
        for row in rows:
            row["split_note"] = "extra"


FETCH_MUTATIONS = {"duplicate id": _f_duplicate_id, "slug-alike ids": _f_slug_alike_ids, "bad image cell": _f_bad_cell,
                   "bad field": _f_bad_field, "missing config": _f_missing_config, "damaged file": _f_damaged_file,
                   "link outside": _f_link_outside, "extra columns": _f_extra_columns}


def make_fetch_case(rng: Random, folder: Path, fixtures: Fixtures | None = None) -> Case:
    w = hub_world(rng)
    chosen = rng.sample(list(FETCH_MUTATIONS), rng.choice([0, 1, 1, 1, 2]))
    chosen.sort(key=lambda name: name != "slug-alike ids")  # ids are renamed first: later damage names the final ids
    for name in chosen:
        FETCH_MUTATIONS[name](w, rng)
    _write_hub(w, folder)
    argv = ["mmrb2", "fetch", "--from", "hub", "--out", "out"]
    for config in w.rows:
        argv += ["--task", config]
    expected = {config: [dict(row) for row in rows] for config, rows in w.rows.items()}
    return Case("fetch", "+".join(chosen) or "none", argv, folder, frozenset({2}) if w.names else frozenset({0}),
                lambda case, stdout: _fetched_as_official(case.cwd / "out", expected, w.colours),
                tuple(w.names), watch=folder / "hub", timeout=60)


def _write_hub(w: HubWorld, folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    for config, rows in w.rows.items():
        if config in w.dropped:
            continue
        path = folder / _hub_file(w, config)
        target = folder / "elsewhere" / path.name if config in w.linked else path
        target.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), target)
        if config in w.linked:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.symlink_to(target.resolve())
        raw = w.raw.get(config)
        if raw is not None:
            path.write_bytes(path.read_bytes()[:-40] if raw == b"<truncate>" else raw)
    (folder / "hub").mkdir(exist_ok=True)


def official_items(text: str | None, images: list[Any]) -> list[tuple[str, Any]]:
    """The content MMRB2's converter (benchmark/build_from_hf.py) builds, written again from its rules:
    the k-th ``<image_N>`` takes the k-th image whatever N, surplus placeholders are dropped, text
    without placeholders gets every image appended, texts are stripped and empty ones left out."""
    import re

    if not text:
        return [("image", im) for im in images]
    out: list[tuple[str, Any]] = []
    placed = 0
    for i, part in enumerate(re.split(r"<image_(\d+)>", text)):
        if i % 2 == 0:
            if part.strip():
                out.append(("text", part.strip()))
        elif placed < len(images):
            out.append(("image", images[placed]))
            placed += 1
    if not re.search(r"<image_(\d+)>", text):
        out += [("image", im) for im in images]
    return out


def _fetched_as_official(out: Path, expected: dict[str, list[dict[str, Any]]], colours: dict[int, tuple]) -> str | None:
    """None when every task file holds the rows' pairs, in order, with the official content and each
    image file (its own, never shared) holding the colour of its cell."""
    from PIL import Image

    files: set[str] = set()
    for config, rows in expected.items():
        try:
            pairs = json.loads((out / f"{config}.json").read_text(encoding="utf-8"))["pairs"]
        except (OSError, ValueError, KeyError) as exc:
            return f"{config}.json unreadable: {exc}"
        if [p["id"] for p in pairs] != [str(r["pair_id"]) for r in rows]:
            return f"{config}.json: ids {[p['id'] for p in pairs][:4]} differ from the rows'"
        for pair, row in zip(pairs, rows):
            sides = (("prompt", pair["prompt_content"]), ("response_a", pair["response_a"]["response_content"]),
                     ("response_b", pair["response_b"]["response_content"]))
            for side, got in sides:
                want = official_items(row[f"{side}_text"], [colours[id(c)] for c in row[f"{side}_images"]])
                if [k for k, _ in got] != [k for k, _ in want] or [v for k, v in got if k == "text"] != [v for k, v in want if k == "text"]:
                    return f"pair {pair['id']} {side}: {got!r:.200} is not the official {want!r:.200}"
                for (_, rel), (_, colour) in zip([g for g in got if g[0] == "image"], [x for x in want if x[0] == "image"]):
                    if rel in files:
                        return f"pair {pair['id']} {side}: image file {rel} already belongs to another pair"
                    files.add(rel)
                    with Image.open(out / rel) as im:
                        if im.format != "PNG" or im.convert("RGB").getpixel((0, 0)) != colour:
                            return f"pair {pair['id']} {side}: {rel} does not hold its image"
            if pair["chosen"] != str(row["chosen"]).upper():
                return f"pair {pair['id']}: chosen {pair['chosen']!r}"
    return None

# --- merge, view, tradeoff and one writer per folder (issue 27) ------------------------------------
#
# Their fixtures (two shards of the tiny study, and what `bon view` and `bon tradeoff` find on the
# finished study) are made once per process on first use (:func:`study_extras`); benchmarks/fuzz.py
# makes them before it forks its workers.


@dataclass
class StudyExtras:
    shards: list[Path]                              # the tiny study run as shards 0/2 and 1/2
    view_summary: str                               # what `bon view` prints of the finished study, path left out
    tradeoff: dict[str, tuple]                      # setting -> (Best-of-N score, calls per prompt) of judge random


_EXTRAS: dict[int, StudyExtras] = {}
TRADEOFF_ARGS = ["--judge", "random", "--bootstrap", "100", "--gate", "0.6", "--margin-gate", "0.1", "--cascade", "none"]


def study_extras(fixtures: Fixtures) -> StudyExtras:
    """The shards and the view and trade-off answers of the tiny study, made once per process (seconds)."""
    if id(fixtures) not in _EXTRAS:
        root = fixtures.run.parent / f"extras-{os.getpid()}"
        root.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixtures.run.parent / "tiny.yaml", root / "tiny.yaml")
        for i in range(2):
            _fixture_command(["run", "tiny.yaml", "--shard", f"{i}/2", "--out", f"shard{i}"], root)
        shutil.copytree(fixtures.run, root / "copy")
        view = _fixture_command(["view", "--run", "copy", "--out", "view"], root)
        _fixture_command(["tradeoff", "--run", "copy", *TRADEOFF_ARGS, "--out", "t", "--json", "t.json"], root)
        _EXTRAS[id(fixtures)] = StudyExtras([root / "shard0", root / "shard1"], _view_summary(view.stdout),
                                            _tradeoff_answer(root / "t.json"))
    return _EXTRAS[id(fixtures)]


def _fixture_command(argv: list[str], cwd: Path) -> Outcome:
    kind, detail, outcome = run_case(Case("fixture", "none", argv, cwd, frozenset({0}), timeout=300))
    if kind != "ok":
        raise RuntimeError(f"fixture `bon {' '.join(argv)}` failed: {detail} {outcome.stderr[-2000:]}")
    return outcome


def view_text(folder: Path) -> str:
    """`bon view`'s page in ``folder`` and its shards, as one text."""
    return "".join(f.read_text(encoding="utf-8") for f in [folder / "view.html", *sorted((folder / "view-data").glob("*.js"))])


def _view_summary(stdout: str) -> str:
    return stdout[stdout.find("("):].strip()


def _tradeoff_answer(path: Path) -> dict[str, tuple]:
    data = json.loads(path.read_text(encoding="utf-8"))
    records = data["records"] if isinstance(data, dict) else data
    return {r["setting"]: (r["bon_score"], r["calls_per_prompt"]) for r in records}


MERGE_DAMAGE = ["deleted picks.jsonl", "deleted scores.jsonl", "deleted judgments.sqlite", "deleted stats.json",
                "deleted candidates.jsonl", "deleted candidate image", "deleted judgment file", "deleted pair image",
                "deleted task file", "torn picks.jsonl", "torn scores.jsonl", "torn candidates.jsonl", "bad line in picks.jsonl",
                "duplicate pick", "unknown prompt in picks", "stats.json not an object", "stats.json not JSON",
                "corrupt store", "empty store", "copy of the other shard", "other judge version", "other n in config.yaml",
                "stopped shard", "benign: results.csv deleted", "benign: extra file", "maybe: input image deleted"]


def _damage_shard(shard: Path, other: Path, how: str, rng: Random) -> bool | None:
    """Damage one shard folder; True when the merge must refuse, None when refusing is fine too."""
    pick = lambda pattern: rng.choice(sorted(shard.glob(pattern)))  # noqa: E731
    files = {"picks.jsonl": "picks.jsonl", "scores.jsonl": "scores.jsonl", "judgments.sqlite": "judgments.sqlite",
             "stats.json": "stats.json", "candidates.jsonl": "candidates/strong/candidates.jsonl"}
    if how.startswith("deleted ") and how[8:] in files:
        (shard / files[how[8:]]).unlink()
    elif how == "deleted candidate image":
        pick("candidates/strong/images/*.png").unlink()
    elif how == "deleted judgment file":
        pick("mmrb2/judgments/*/*.json").unlink()
    elif how == "deleted pair image":
        pick("mmrb2/images/*.png").unlink()
    elif how == "deleted task file":
        pick("mmrb2/*.json").unlink()
    elif how.startswith("torn "):
        path = shard / files[how[5:]]
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - rng.randint(2, 20)])
    elif how == "bad line in picks.jsonl":
        lines = (shard / "picks.jsonl").read_bytes().splitlines(keepends=True)
        lines.insert(rng.randrange(len(lines)), rng.choice([b"{oops\n", b"[1]\n", b"\"x\"\n"]))
        (shard / "picks.jsonl").write_bytes(b"".join(lines))
    elif how == "duplicate pick":
        lines = (shard / "picks.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        (shard / "picks.jsonl").write_text("".join(lines + [rng.choice(lines)]), encoding="utf-8")
    elif how == "unknown prompt in picks":
        lines = (shard / "picks.jsonl").read_text(encoding="utf-8").splitlines()
        i = rng.randrange(len(lines))
        rec = json.loads(lines[i])
        rec["prompt_id"] = rng.choice(["nosuch", "t2i-9999", "pref-t2i-0000", ""])
        lines[i] = json.dumps(rec)
        (shard / "picks.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    elif how == "stats.json not an object":
        (shard / "stats.json").write_text(rng.choice(["[1, 2]", "null", "\"stats\"", "5"]), encoding="utf-8")
    elif how == "stats.json not JSON":
        (shard / "stats.json").write_bytes(rng.choice([b"{oops", b"", b"\xff\xfe", b"{\"a\": NaN"]))
    elif how in ("corrupt store", "empty store"):
        (shard / "judgments.sqlite").write_bytes(b"not a database\n" if how == "corrupt store" else b"")
    elif how == "copy of the other shard":  # a copy of the other shard, relabelled as this one
        label = yaml.safe_load((shard / "config.yaml").read_text(encoding="utf-8"))["study"]["shard"]
        shutil.rmtree(shard)
        shutil.copytree(other, shard)
        cfg = shard / "config.yaml"
        theirs = yaml.safe_load(cfg.read_text(encoding="utf-8"))["study"]["shard"]
        cfg.write_text(cfg.read_text(encoding="utf-8").replace(f"shard: {theirs}", f"shard: {label}"), encoding="utf-8")
        if rng.random() < 0.5:
            stats = shard / "stats.json"
            stats.write_text(stats.read_text(encoding="utf-8").replace(f'"shard": "{theirs}"', f'"shard": "{label}"'),
                             encoding="utf-8")
    elif how == "other judge version":
        stats = json.loads((shard / "stats.json").read_text(encoding="utf-8"))
        judge = rng.choice(JUDGE_LABELS)
        stats["identities"]["judges"][judge]["version"] = 99
        (shard / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    elif how == "other n in config.yaml":
        cfg = shard / "config.yaml"
        cfg.write_text(cfg.read_text(encoding="utf-8").replace("  n: 3\n", "  n: 2\n", 1), encoding="utf-8")
    elif how == "stopped shard":
        stats = json.loads((shard / "stats.json").read_text(encoding="utf-8"))
        stats["stopped"] = "max_calls reached"
        (shard / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    elif how == "benign: results.csv deleted":
        (shard / "results.csv").unlink()
        return False
    elif how == "benign: extra file":
        (shard / "notes ü.txt").write_text("mine", encoding="utf-8")
        return False
    else:  # an input image: every shard holds the whole suite's, so the other shard's copy serves
        pick("inputs/*.png").unlink()
        return None
    return True


def make_merge_case(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    """`bon merge` of the tiny study's two shards, one or two damaged: the unsharded study's results, or one
    line naming the damaged shard, and nothing written."""
    extras = study_extras(fixtures)
    names = [f"{rng.choice(ODD_NAMES)} s{i}" for i in range(2)]
    dirs = [folder / n for n in names]
    for src, dst in zip(extras.shards, dirs):
        shutil.copytree(src, dst)
    chosen = rng.sample(MERGE_DAMAGE, rng.choice([0, 1, 1, 1, 2]))
    targets = [rng.randrange(2) for _ in chosen]
    if len(set(targets)) > 1 and "copy of the other shard" in chosen:
        targets = [targets[chosen.index("copy of the other shard")]] * len(chosen)  # copy first, then damage the copy
    bad: list[bool | None] = []
    damaged: set[str] = set()
    for k in sorted(range(len(chosen)), key=lambda k: chosen[k] != "copy of the other shard"):
        try:
            bad.append(_damage_shard(dirs[targets[k]], extras.shards[1 - targets[k]], chosen[k], rng))
        except (FileNotFoundError, IndexError, TypeError, AttributeError, ValueError):
            # the file (or every image) an earlier damage removed, or a stats.json it made no object: refused anyway
            bad.append(True)
        if bad[-1] is not False:
            damaged.add(names[targets[k]])
    runs = [a for n in (names if rng.random() < 0.5 else names[::-1]) for a in ("--run", n)]
    argv = ["merge", *runs, "--out", "out/merged"]
    must_refuse = any(b is True for b in bad)
    expect = frozenset({2}) if must_refuse else frozenset({0, 2}) if None in bad else frozenset({0})
    answer = None if must_refuse else _same_results(fixtures, "out/merged/results.csv")
    return Case("merge", "+".join(chosen) or "none", argv, folder, expect, answer, tuple(sorted(damaged)),
                watch=folder, may_write=("out/*",), timeout=90)


VIEW_DAMAGE = {  # damage -> (exit codes, names the error line may quote, answer checked at exit 0)
    "deleted stats.json": ({0}, (), True), "edited stats.json identities": ({0}, (), True),
    "stats.json not an object": ({0, 2}, ("stats.json",), True), "picks index out of range": ({2}, ("picks.jsonl",), False),
    "match index out of range": ({2}, ("picks.jsonl",), False), "duplicate pick line": ({2}, ("picks.jsonl",), False),
    "torn picks.jsonl": ({2}, ("picks.jsonl",), False), "corrupt store": ({2}, ("judgments.sqlite",), False),
    "other n in config.yaml": ({2}, ("config.yaml",), False), "deleted results.csv": ({0}, (), True),
}


def _damage_view(run: Path, how: str, rng: Random) -> None:
    picks = run / "picks.jsonl"
    lines = picks.read_text(encoding="utf-8").splitlines(keepends=True)
    i = rng.randrange(len(lines))
    if how == "deleted stats.json":
        (run / "stats.json").unlink()
    elif how == "edited stats.json identities":
        stats = json.loads((run / "stats.json").read_text(encoding="utf-8"))
        stats["identities"]["judges"][rng.choice(JUDGE_LABELS)] = {"edited": True}
        (run / "stats.json").write_text(json.dumps(stats), encoding="utf-8")
    elif how == "stats.json not an object":
        (run / "stats.json").write_text("[]", encoding="utf-8")
    elif how in ("picks index out of range", "match index out of range"):
        rec = json.loads(lines[i])
        bad = rng.choice([3, -1, 99, "1", None, True, 1.5])
        if how == "picks index out of range" or not rec.get("matches"):
            rec["index"] = bad
        else:
            rec["matches"][0][rng.randrange(2)] = bad
        lines[i] = json.dumps(rec) + "\n"
        picks.write_text("".join(lines), encoding="utf-8")
    elif how == "duplicate pick line":
        picks.write_text("".join(lines + [lines[i]]), encoding="utf-8")
    elif how == "torn picks.jsonl":
        picks.write_bytes(picks.read_bytes()[: -rng.randint(2, 20)])
    elif how == "corrupt store":
        (run / "judgments.sqlite").write_bytes(b"not a database\n" * rng.randint(1, 300))
    elif how == "other n in config.yaml":
        cfg = run / "config.yaml"
        cfg.write_text(cfg.read_text(encoding="utf-8").replace("  n: 3\n", f"  n: {rng.choice([2, 4, 5])}\n", 1),
                       encoding="utf-8")
    else:
        (run / "results.csv").unlink()


def make_view_case(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    """`bon view --out elsewhere` of the finished study, damaged: the same verdicts (found in the store with or
    without stats.json), or one line naming the file; the run folder is only read (its store too)."""
    extras = study_extras(fixtures)
    rel = rng.choice(["run", "ünï run", "a b/run"])
    shutil.copytree(fixtures.run, folder / rel)
    chosen = sorted(rng.sample(list(VIEW_DAMAGE), rng.choice([0, 1, 1, 1, 2])),
                    key=lambda h: (not h.startswith("deleted"), h.startswith("torn")))  # torn last: others parse lines
    for how in chosen:
        if how.startswith(("edited stats", "stats.json")) and "deleted stats.json" in chosen:
            continue  # stats.json is gone: nothing to edit
        if how.startswith("edited stats") and "stats.json not an object" in chosen:
            continue  # no identities to edit in a list or a number
        _damage_view(folder / rel, how, rng)
    kinds = [VIEW_DAMAGE[how] for how in chosen]
    codes = {2} if any(c == {2} for c, _, _ in kinds) else {0, 2} if any(2 in c for c, _, _ in kinds) else {0}
    names = [n for _, ns, _ in kinds for n in ns]
    check = all(ok for _, _, ok in kinds)

    def answer(case: Case, stdout: str) -> str | None:
        if not check:
            return None
        got = _view_summary(stdout)
        page = view_text(case.cwd / "out")
        if got != extras.view_summary:
            return f"view found {got!r}, the finished study gives {extras.view_summary!r}"
        return "a verdict shown as not in the judgment store" if "not in the judgment store" in page else None

    return Case("view", "+".join(chosen) or "none", ["view", "--run", rel, "--out", "out"], folder, frozenset(codes),
                answer, tuple(names), watch=folder, may_write=("out/*",), timeout=60)


TRADEOFF_DAMAGE = {  # damage -> (exit codes, names, answer checked at exit 0)
    "deleted stats.json": ({0}, (), True), "deleted scores.jsonl": ({2}, ("scores.jsonl",), False),
    "torn scores.jsonl": ({0, 2}, ("scores.jsonl",), True),  # the cut score may be of a held-out prompt: not read
    "other n in config.yaml": ({2}, ("config.yaml",), False),
    "stats.json not an object": ({2}, ("stats.json",), False), "deleted picks.jsonl": ({0}, (), True),
    "deleted judgments.sqlite": ({0}, (), True), "corrupt store": ({2}, ("judgments.sqlite",), False),
}


def _damage_tradeoff(run: Path, how: str, rng: Random) -> None:
    if how.startswith("deleted "):
        (run / how[8:]).unlink()
    elif how == "torn scores.jsonl" and (run / "scores.jsonl").exists():
        path = run / "scores.jsonl"
        path.write_bytes(path.read_bytes()[: -rng.randint(2, 20)])
    elif how == "other n in config.yaml":
        cfg = run / "config.yaml"
        cfg.write_text(cfg.read_text(encoding="utf-8").replace("  n: 3\n", f"  n: {rng.choice([2, 4])}\n", 1), encoding="utf-8")
    elif how == "stats.json not an object":
        (run / "stats.json").write_text(rng.choice(["[]", "3", "\"x\""]), encoding="utf-8")
    elif how == "corrupt store":
        (run / "judgments.sqlite").write_bytes(b"garbage" * rng.randint(1, 50))


def make_tradeoff_case(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    """`bon tradeoff` of one judge on the finished study, damaged: the same records (stats.json and the store
    are rebuilt or asked again), or one line naming the file."""
    extras = study_extras(fixtures)
    rel = rng.choice(["run", "ünï run"])
    shutil.copytree(fixtures.run, folder / rel)
    chosen = sorted(rng.sample(list(TRADEOFF_DAMAGE), rng.choice([0, 1, 1, 1, 2])), key=lambda h: not h.startswith("deleted"))
    for how in chosen:  # deletions first: a later damage may write the file again (a corrupt store), never the reverse
        _damage_tradeoff(folder / rel, how, rng)
    kinds = [TRADEOFF_DAMAGE[h] for h in chosen]
    refusing = any(c == {2} for c, _, _ in kinds)
    codes = {2} if refusing else {0, 2} if any(2 in c for c, _, _ in kinds) else {0}
    names = tuple(n for h in chosen for n in TRADEOFF_DAMAGE[h][1])

    def answer(case: Case, stdout: str) -> str | None:
        got = _tradeoff_answer(case.cwd / "out" / "t.json")
        if set(got) != set(extras.tradeoff):
            return f"settings {sorted(set(got) ^ set(extras.tradeoff))} differ from the finished study's"
        wrong = [k for k in got if not all(_close(a, b) for a, b in zip(got[k], extras.tradeoff[k]))]
        return f"{wrong[0]}: {got[wrong[0]]}, the finished study gives {extras.tradeoff[wrong[0]]}" if wrong else None

    corrupt = "corrupt store" in chosen
    return Case("tradeoff", "+".join(chosen) or "none",
                ["tradeoff", "--run", rel, *TRADEOFF_ARGS, "--out", "out", "--json", "out/t.json"], folder, frozenset(codes),
                None if refusing else answer, names, watch=folder,
                may_write=("out/*", f"{rel}/judgments.sqlite") if not corrupt else ("out/*",), timeout=120)


WRITER_HOLDER = """import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"pid": os.getpid(), "command": "bon run", "since": time.time()}).encode())
print("held", flush=True)
time.sleep(float(sys.argv[2]))
os.unlink(sys.argv[1])
"""
WRITERS = {  # command -> (argv after the run folder is named, files it may write when it runs)
    "select": (["select", "--run", "{run}", "--judge", "random"], ("{run}/picks/*", "{run}/judgments.sqlite")),
    "curve": (["curve", "--run", "{run}", "--judge", "random", "--subsets", "2"], ("{run}/curves/*", "{run}/judgments.sqlite")),
    "report": (["report", "--run", "{run}", "--bootstrap", "100", "--no-power"], ("{run}/*",)),
    "resume": (["run", "{run}/config.yaml", "--out", "{run}"], ("{run}/*",)),
    "tradeoff": (["tradeoff", "--run", "{run}", *TRADEOFF_ARGS], ("{run}/*",)),
}
READERS_UNDER_LOCK = {
    "view elsewhere": ["view", "--run", "{run}", "--out", "out"],
    "leaderboard": ["leaderboard", "--run", "{run}", "--task", "t2i", "--generator", "strong"],
    "report elsewhere": ["report", "--run", "{run}", "--out", "out", "--bootstrap", "100", "--no-power"],
}


def make_concurrency_case(rng: Random, folder: Path, fixtures: Fixtures) -> Case:
    """A run folder whose writer lock another process holds (or a killed process left): a writer refuses at
    once naming the holder, a reader runs as usual, a lock without a live holder is taken over."""
    rel = rng.choice(["run", "ünï run"])
    run = folder / rel
    shutil.copytree(fixtures.run, run)
    lock = run / ".bon-writer.lock"
    state = rng.choice(["held", "held", "left by a killed process"])
    kind = rng.choice(["writer", "writer", "reader"])
    if kind == "writer":
        command = rng.choice(list(WRITERS))
        argv, may_write = WRITERS[command]
    else:
        command = rng.choice(list(READERS_UNDER_LOCK))
        argv, may_write = READERS_UNDER_LOCK[command], ()
    argv = [a.replace("{run}", rel) for a in argv]
    may_write = tuple(g.replace("{run}", rel) for g in may_write) + ("out/*",)
    if state != "held":
        lock.write_text(json.dumps({"pid": 999999, "command": "bon demo", "since": 0}), encoding="utf-8")
        may_write += (f"{rel}/.bon-writer.lock",)  # taken over, then removed by its new holder
    refuses = state == "held" and kind == "writer"
    return Case("concurrency", f"{state}: {kind} {command}", argv, folder, frozenset({2} if refuses else {0}), None,
                ("another bon process", "pid") if refuses else (), watch=folder, may_write=may_write,
                writer=lock if state == "held" else None, timeout=120)


def _hold_writer_lock(path: Path, seconds: float) -> subprocess.Popen:
    """Another process holding a run folder's writer lock for ``seconds`` (a real flock, in its own process)."""
    proc = subprocess.Popen([sys.executable, "-c", WRITER_HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    proc.stdout.readline()
    return proc


# --- the score reader: `bon score` on hand-made items, replay files and out-files of the four verifiers ------

KEY_IN_PATH = "sk-fuzzkey0123456789abcd"  # a key-shaped folder name: never written by bon score


@dataclass
class ScoreWorld:
    """One `bon score` call as data: the verifier, its items (images on disk under ``bench/``), a replay file
    and an earlier out-file; written to disk after the mutations. ``bad``: what an exit-2 line may name."""

    verifier: str
    items: list[dict[str, Any]]
    replies: list[dict[str, Any]]
    images: dict[str, str] = field(default_factory=dict)   # path under the case folder -> "png" | "text" | "dir"
    links: dict[str, str] = field(default_factory=dict)    # link under the case folder -> its target (absolute)
    out: str = "bench/out.jsonl"
    earlier: list[str] | None = None                       # lines of an earlier out-file (None: none)
    items_text: str | None = None                          # the items file's bytes as text when damaged
    replay_text: str | None = None
    extra: list[str] = field(default_factory=list)         # more CLI options
    bench: str = "bench"
    bad: list[str] = field(default_factory=list)
    transient: bool = False                                # scoring cannot reach its grader: exit 3
    maybe_bad: bool = False                                # exit 2 (naming the image) right too
    names: list[str] = field(default_factory=list)         # what that exit-2 line names


def _emma_items(rng: Random) -> list[dict[str, Any]]:
    out = []
    for i in range(rng.randint(1, 4)):
        answer = rng.choice("ABC")
        out.append({"pid": f"e{i}", "question": f"Which one {i}?", "options": ["x", "y", "z"], "answer": answer,
                    "type": "Multiple Choice", "subject": rng.choice(["Math", "Physics"]), "image_1": f"img/e{i}.png",
                    "response": rng.choice(["A", "B", "C"])})
    return out


def score_world(rng: Random) -> ScoreWorld:
    verifier = rng.choice(["emma", "isg", "gedit", "vqascore"])
    w = ScoreWorld(verifier, [], [])
    n = rng.randint(1, 3)
    if verifier == "emma":
        w.items = _emma_items(rng)
    elif verifier == "isg":
        from official_isg_cases import ALL_YES, ANSWER, case

        for i in range(n):
            w.items.append(json.loads(json.dumps(case(f"i{i}", ANSWER, ALL_YES)["item"])))  # its own copy: mutated below
            w.replies += [{"item": f"i{i}", "question": q, "reply": r} for q, r in ALL_YES.items()]
    elif verifier == "gedit":
        for i in range(n):
            lang = rng.choice(["en", "cn"])
            w.items.append({"key": f"k{i}", "task_type": rng.choice(["color_alter", "text_change"]), "instruction": f"Edit {i}.",
                            "instruction_language": lang, "Intersection_exist": rng.random() < 0.5,
                            "source_image": f"img/k{i}_src.png", "edited_image": f"img/k{i}.png"})
            w.replies += [{"item": f"k{i}_{lang}", "question": q, "reply": json.dumps({"score": [rng.randint(0, 10), rng.randint(0, 10)],
                                                                                          "reasoning": "ok"})} for q in ("sc", "pq")]
    else:
        w.transient = True  # an API grader at a closed port: every valid item stays pending (exit 3)
        w.items = [{"id": f"{i:05d}", "prompt": f"a red cube {i}", "basic_skills": "['Attribute']", "advanced_skills": "[]",
                    "image": f"img/g{i}.png"} for i in range(n)]
    for path in _item_images(w):
        w.images[f"bench/{path}"] = "png"
    return w


def _item_images(w: ScoreWorld) -> list[str]:
    """The image paths the items name (relative to the bench folder)."""
    out = []
    for item in w.items:
        if w.verifier == "isg":
            out += [p["content"] for f in ("Query", "Golden", "output") for p in item.get(f, []) if isinstance(p, dict)
                    and p.get("type") == "image" and isinstance(p.get("content"), str)]
        else:
            out += [item[f] for f in ("image_1", "source_image", "edited_image", "image") if isinstance(item.get(f), str)]
    return out


def _image_slot(w: ScoreWorld, rng: Random) -> tuple[dict[str, Any], str, Any, str]:
    """(container, key, current value, field name an error names) of one image path of one item."""
    item = rng.choice(w.items)
    if w.verifier == "isg":
        part = rng.choice([p for f in ("Query", "Golden", "output") for p in item[f] if p["type"] == "image"])
        return part, "content", part["content"], "Query" if part in item["Query"] else ("Golden" if part in item["Golden"] else "output")
    field_ = {"emma": "image_1", "gedit": rng.choice(["source_image", "edited_image"]), "vqascore": "image"}[w.verifier]
    return item, field_, item[field_], field_


def _s_escape(w: ScoreWorld, rng: Random) -> None:
    """An image path that leads out of the items' folder: ``..``, absolute, or a link."""
    box, key, _, name = _image_slot(w, rng)
    w.images["private/secret.png"] = "png"
    how = rng.choice(["dotdot", "absolute", "link", "dotdot-inside"])
    if how == "dotdot":
        box[key] = "../private/secret.png"
    elif how == "dotdot-inside":
        box[key] = "img/../../private/secret.png"
    elif how == "absolute":
        box[key] = "{folder}/private/secret.png"
    else:
        box[key] = "img/link.png"
        w.links["bench/img/link.png"] = "private/secret.png"
    w.bad += [name]


def _s_missing_image(w: ScoreWorld, rng: Random) -> None:
    """An image path to no file, or not a path (EMMA's scoring reads no image: only an escape is refused there)."""
    box, key, value, name = _image_slot(w, rng)
    box[key] = rng.choice(["img/nothing.png", "", None, 7, ["img/a.png"]])
    if w.verifier != "emma":
        w.bad += [name, "image"]


def _s_drop_field(w: ScoreWorld, rng: Random) -> None:
    item = rng.choice(w.items)
    required = {"emma": ["pid", "question", "answer", "type", "response"], "isg": ["id", "Query", "Golden", "output"],
                "gedit": ["key", "task_type", "instruction", "instruction_language", "edited_image"],
                "vqascore": ["prompt", "image"]}[w.verifier]
    name = rng.choice(required)
    if rng.random() < 0.5 or w.verifier == "emma":  # EMMA reads any scalar as text (a number is a fine question)
        item.pop(name, None)
    else:
        item[name] = rng.choice([None, 3.5, {"x": 1}, True] + ([] if name in ("Query", "Golden", "output") else [[1, 2]]))
    w.bad += [name, "image", "item", "prompt", "pid", "id"]


def _s_duplicate(w: ScoreWorld, rng: Random) -> None:
    w.items.append(json.loads(json.dumps(rng.choice(w.items))))
    w.bad += ["twice"]


def _s_items_bytes(w: ScoreWorld, rng: Random) -> None:
    text = "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in w.items)
    how = rng.choice(["torn", "not json", "array", "empty", "latin-1", "bom"])
    w.items_text = {"torn": text[: max(1, len(text) - rng.randint(2, 9))], "not json": text + "{oops\n", "array": "[1, 2]\n" + text,
                    "empty": "", "latin-1": "\udcff" + text, "bom": "\ufeff" + text}[how]
    if how != "bom":
        w.bad += ["items.jsonl"]


def _s_out_is_input(w: ScoreWorld, rng: Random) -> None:
    choices = ["bench/items.jsonl"] + (["bench/replies.jsonl"] if w.replies else []) + [f"bench/{rng.choice(_item_images(w))}"]
    w.out = rng.choice(choices)
    w.bad += ["--out-file"]


def _s_damaged_out_file(w: ScoreWorld, rng: Random) -> None:
    """An earlier out-file with damaged lines: rescored with a note, never a traceback."""
    good = {"id": "x", "score": 1.0, "input_sha256": "0" * 64}
    lines = []
    for _ in range(rng.randint(1, 4)):
        lines.append(rng.choice([json.dumps({**good, "input_sha256": ["x"]}), json.dumps({**good, "score": "high"}),
                                 json.dumps({**good, "id": None}), "{not json", json.dumps([1, 2]), json.dumps({**good, "score": 1e999}),
                                 json.dumps({**good, "input_sha256": 5}), json.dumps(good), json.dumps({**good, "missing": ["x"]})]))
    w.earlier = lines


def _s_replay(w: ScoreWorld, rng: Random) -> None:
    """A replay file that misses a reply, or is damaged: one line naming it; an earlier out-file kept."""
    if not w.replies:
        return _s_damaged_out_file(w, rng)
    how = rng.choice(["missing reply", "not json", "no item", "reply number", "empty"])
    if how == "missing reply":
        w.replies.pop(rng.randrange(len(w.replies)))
        w.bad += ["replies.jsonl", "reply", "replay"]
    elif how == "not json":
        w.replay_text = "".join(json.dumps(r) + "\n" for r in w.replies) + "{oops\n"
        w.bad += ["replies.jsonl"]
    elif how == "no item":
        w.replies[0] = {k: v for k, v in w.replies[0].items() if k != "item"}
        w.bad += ["replies.jsonl"]
    elif how == "reply number":
        w.replies[0]["reply"] = 7
        w.bad += ["replies.jsonl"]
    else:
        w.replay_text = ""
        w.bad += ["replies.jsonl"]
    w.earlier = [json.dumps({"id": "old", "score": 0.5, "input_sha256": "f" * 64})]


def _s_images_root(w: ScoreWorld, rng: Random) -> None:
    """Images kept in another folder: named with --images-root (fine), or not named (not found)."""
    w.images = {k.replace("bench/", "pics/", 1): v for k, v in w.images.items()}
    if rng.random() < 0.6:
        w.extra += ["--images-root", "pics"]
    elif w.verifier != "emma":
        w.bad += ["not found", "image"]


def _s_broken_image(w: ScoreWorld, rng: Random) -> None:
    """An image file that is text or a folder (an image to decode, or a path that is not a file)."""
    box, key, value, name = _image_slot(w, rng)
    kind = rng.choice(["text", "dir"])
    w.images[f"bench/{value}"] = kind
    if w.verifier == "emma":
        return  # never read
    if kind == "dir":
        w.bad += [name, value, "image", "not found"]
    else:  # decoded when asked: a failed score with its reason (0), pending at the closed port (3), or refused (2)
        w.maybe_bad = True
        w.names += [name, value, "image", "cannot", "decode"]


def _s_key_in_path(w: ScoreWorld, rng: Random) -> None:
    """The whole bench under a folder whose name is key-shaped: nothing bon score writes holds it."""
    w.bench = f"api_key={KEY_IN_PATH}"
    w.out = f"{w.bench}/out.jsonl"


SCORE_MUTATIONS = {"none": lambda w, rng: None, "image outside": _s_escape, "missing image": _s_missing_image,
                   "bad field": _s_drop_field, "duplicate item": _s_duplicate, "items bytes": _s_items_bytes,
                   "out-file is an input": _s_out_is_input, "damaged out-file": _s_damaged_out_file, "replay file": _s_replay,
                   "--images-root": _s_images_root, "broken image": _s_broken_image, "key in path": _s_key_in_path}


def make_score_case(rng: Random, folder: Path, fixtures: Fixtures | None = None) -> Case:
    w = score_world(rng)
    name = rng.choice(list(SCORE_MUTATIONS))
    SCORE_MUTATIONS[name](w, rng)
    _write_score_world(w, folder)
    opts = {"emma": [], "isg": ["--verifier-option", f"grader=replay:{w.bench}/replies.jsonl"],
            "gedit": ["--verifier-option", f"grader=replay:{w.bench}/replies.jsonl"],
            "vqascore": ["--verifier-option", "grader={backend: openai, model: m, base_url: 'http://127.0.0.1:9/v1', "
                                              "api_key_env: null, preflight: false, max_retries: 0, timeout: 2}"]}[w.verifier]
    out = w.out if not w.out.startswith("bench/") else w.out.replace("bench/", f"{w.bench}/", 1)
    argv = ["score", "--verifier", w.verifier, *opts, "--items", f"{w.bench}/items.jsonl", "--out-file", out, *w.extra, "--json", "agg.json"]
    bad = bool(w.bad)
    # a broken image is a failed score with its reason (0: nothing left pending when it was the only item to
    # score), or refused (2)
    expect = frozenset({2}) if bad else frozenset({3} if w.transient else {0}) | ({0, 2} if w.maybe_bad else set())
    n_items = len(w.items)

    def answer(case: Case, stdout: str) -> str | None:
        lines = [json.loads(x) for x in (case.cwd / out).read_text(encoding="utf-8").splitlines()]
        written = (case.cwd / out).read_text(encoding="utf-8") + stdout + (case.cwd / "agg.json").read_text(encoding="utf-8")
        if KEY_IN_PATH in written:
            return "a key-shaped path was written unmasked"
        if len(lines) != n_items:
            return f"{len(lines)} out-file lines for {n_items} items"
        for item, line in zip(w.items, lines):
            if w.maybe_bad and line["score"] is None:
                continue  # the item whose image cannot be decoded: failed, with its reason
            if w.verifier == "emma" and line["score"] != float(item["response"] == item["answer"]):
                return f"EMMA item {item['pid']}: score {line['score']}, expected {float(item['response'] == item['answer'])}"
            if w.verifier == "isg" and line["score"] != 0.7:
                return f"ISG item {item['id']}: score {line['score']}, expected 0.7 (holistic 7 of the replies)"
            if w.verifier == "gedit" and line["id"] not in (item["key"], f"{item['key']}_{item['instruction_language']}"):
                return f"GEdit line {line['id']}, expected {item['key']}(_{item['instruction_language']})"
        return None

    may_write = (out, "agg.json") if not bad else ()
    partial = (bad or w.maybe_bad) and name != "out-file is an input"  # a stopped run writes what it scored, keeping every earlier line
    return Case("score", f"{w.verifier}: {name}", argv, folder, expect, answer, tuple(w.bad + w.names), watch=folder,
                may_write=may_write, records=(out,) if partial else (), timeout=60, keep_lines=(out,) if partial else ())


def _write_score_world(w: ScoreWorld, folder: Path) -> None:
    from PIL import Image

    (folder / "canary.txt").write_text("a file beside the folders the command was given\n", encoding="utf-8")
    for rel, kind in w.images.items():
        rel = rel.replace("bench/", f"{w.bench}/", 1)
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "png":
            Image.new("RGB", (12, 10), (len(rel) * 7 % 256, 90, 160)).save(path)
        elif kind == "text":
            path.write_text("not an image\n", encoding="utf-8")
        else:
            path.mkdir(exist_ok=True)
    for link, target in w.links.items():
        (folder / link).parent.mkdir(parents=True, exist_ok=True)
        (folder / link).symlink_to(folder / target)
    bench = folder / w.bench
    bench.mkdir(parents=True, exist_ok=True)
    text = w.items_text if w.items_text is not None else "".join(json.dumps(it, ensure_ascii=False) + "\n" for it in w.items)
    text = text.replace("{folder}", str(folder))
    (bench / "items.jsonl").write_bytes(text.encode("utf-8", "surrogateescape"))
    if w.replies or w.replay_text is not None:
        replay = w.replay_text if w.replay_text is not None else "".join(json.dumps(r) + "\n" for r in w.replies)
        (bench / "replies.jsonl").write_text(replay, encoding="utf-8")
    if w.earlier is not None:
        target = folder / w.out.replace("bench/", f"{w.bench}/", 1)
        if not target.exists():
            target.write_text("".join(line + "\n" for line in w.earlier), encoding="utf-8")


# --- the accuracies reader: accuracy tables (CSV, JSON) for `bon figure --scores` ------------------------

ACC_JUDGES = ["GPT-4o", "GPT-5", "Gemini 2.5 Pro", "Claude Opus"]


def make_accuracies_case(rng: Random, folder: Path, fixtures: Fixtures | None = None) -> Case:
    """`bon figure --scores S --accuracies TABLE`: a good table gives the Pearson r of its own numbers; a bad
    cell (out of 0-100, not finite, text, a repeated judge and task, no judge) is one line naming the table."""
    judges = rng.sample(ACC_JUDGES, rng.randint(3, 4))
    scores = {j: round(rng.uniform(0.2, 0.9), 3) for j in judges}
    accs: list[list[Any]] = [[j, "t2i", round(rng.uniform(40, 90), 1)] for j in judges]
    (folder / "canary.txt").write_text("beside the tables\n", encoding="utf-8")
    (folder / "scores.csv").write_text("task,generator,judge,bon_score\n" + "".join(f"t2i,g,{j},{s}\n" for j, s in scores.items()))
    name = rng.choice(["none", "out of range", "not finite", "text", "repeated row", "no judge", "bytes", "n_pairs", "json"])
    bad = name not in ("none",)
    fmt = "csv"
    row = rng.randrange(len(accs))
    if name == "out of range":
        accs[row][2] = rng.choice([150, -0.5, 100.01, -1e9, 1e300])
    elif name == "not finite":
        accs[row][2] = rng.choice(["inf", "-inf", "1e400", "Infinity"])
    elif name == "text":
        accs[row][2] = rng.choice(["high", "70%", "7O", "[70]", "true"])
    elif name == "repeated row":
        accs.append([accs[row][0], "t2i", round(rng.uniform(40, 90), 1)])
    elif name == "no judge":
        accs[row][0] = ""
    elif name == "json":
        fmt = "json"
        value = rng.choice([150, -3, "70", None, True, 55.5])
        bad = value not in (None, 55.5)
    body = "judge,task,accuracy" + (",n_pairs" if name == "n_pairs" else "") + "\n"
    pairs_value = rng.choice(["-5", "2.5", "many", "1000"]) if name == "n_pairs" else None
    bad = bad and not (name == "n_pairs" and pairs_value == "1000")
    body += "".join(",".join(str(c) for c in r) + (f",{pairs_value}" if pairs_value else "") + "\n" for r in accs)
    if name == "bytes":
        body = rng.choice(["", "judge,task\nx,t2i\n", "\x00\x01garbage", 'judge,task,accuracy\n"GPT-5,t2i,70\n'])
    table = folder / f"acc.{fmt}"
    if fmt == "json":
        table.write_text(json.dumps({"tasks": {"image": {"accuracy": value, "evaluated_pairs": 10, "judgements": 20}}}))
        argv = ["figure", "--scores", "scores.csv", "--accuracies", f"{judges[0]}=acc.json", "--out", "fig"]
    else:
        table.write_text(body, encoding="utf-8")
        argv = ["figure", "--scores", "scores.csv", "--accuracies", "acc.csv", "--out", "fig"]
    if fmt == "json" and not bad:
        expect = frozenset({0, 2})  # one judge with an accuracy: too few for a correlation, said in one line
    else:
        expect = frozenset({2}) if bad else frozenset({0})

    def answer(case: Case, stdout: str) -> str | None:
        import csv

        if fmt == "json":
            return None
        rows = list(csv.DictReader((case.cwd / "fig" / "correlations.csv").open(encoding="utf-8")))
        x = [float(a[2]) for a in accs]
        y = [scores[a[0]] for a in accs]
        mx, my = sum(x) / len(x), sum(y) / len(y)
        r = sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
        got = float(rows[0]["pearson_r"])
        return None if abs(got - r) < 1e-5 else f"pearson r {got}, expected {r:.6f} from the table"

    return Case("accuracies", f"{fmt}: {name}", argv, folder, expect, answer, ("acc.csv", "acc.json", "accurac"),
                watch=folder, may_write=("fig/*", "fig/figures/*"), timeout=60)


READERS: dict[str, Callable[..., Case]] = {"config": make_config_case, "mmrb2": make_mmrb2_case,
                                           "run-folder": make_run_case, "cli-options": make_cli_case,
                                           "fetch": make_fetch_case,
                                           "merge": make_merge_case, "view": make_view_case, "tradeoff": make_tradeoff_case,
                                           "concurrency": make_concurrency_case, "score": make_score_case,
                                           "accuracies": make_accuracies_case}
