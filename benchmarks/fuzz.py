"""Fuzz every reader of bon through the real CLI: K generated cases, and what came of them.

    python benchmarks/fuzz.py --cases 5000 --seed 0 [--jobs 2] [--reader mmrb2] [--spawn] [--replay I]

The cases (tests/fuzz_cases.py, shared with tests/test_fuzz.py) cover study configs, MMRB2 bench and
judgment files, damaged run folders, odd command-line options, damaged local copies of the MMRB2
hub dataset (``bon mmrb2 fetch --from``), ``bon score``'s items, replay files, images and out-files of all
four verifiers (``score``) and accuracy tables (``accuracies``), in equal shares. Every file of a case
folder is hashed before and after, a canary file beside the folders a command is given included, so a
change outside what the command may write is ``damaged``. Each one runs
``bon.cli.main(argv)`` in a child forked from this pre-warmed process (bon and its libraries imported
once; a fresh interpreter costs about a second on two cores), with its own stdin, stdout, stderr and
working folder, and a timeout for hangs; ``--spawn`` runs fresh ``python -m bon.cli`` processes
instead, as a spot check that the fork server changes nothing. Prints a table per reader and ends
with one line: ``fuzz: K cases, T tracebacks, W wrong answers, H hangs, D damaged``. A failing case's
folder is kept and its replay command printed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from random import Random

from _common import parser

os.environ.setdefault("BON_QUIET", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

from fuzz_cases import OUTCOMES, READERS, make_fixtures, run_case, study_extras, warm_up  # noqa: E402

READER_ORDER = list(READERS)


def case_for(index: int, seed: int, readers: list[str], folder: Path, fixtures):
    """Case ``index`` of a run: readers in turn, each case from its own seeded generator (replayable)."""
    reader = readers[index % len(readers)]
    rng = Random(f"{seed}:{index}")
    folder.mkdir(parents=True)
    return READERS[reader](rng, folder, fixtures)


def worker(indices: list[int], args, fixtures, root: Path, results: Path) -> None:
    """One of ``--jobs`` forked workers: plays its share of the cases, one JSON line each."""
    readers = args.reader.split(",") if args.reader else READER_ORDER
    with results.open("a", encoding="utf-8") as fh:
        for i in indices:
            folder = root / f"case-{i}"
            try:
                case = case_for(i, args.seed, readers, folder, fixtures)
                kind, detail, outcome = run_case(case, spawn=args.spawn)
                row = {"i": i, "reader": case.reader, "mutation": case.mutation, "argv": case.argv, "kind": kind,
                       "detail": detail, "rc": outcome.rc, "seconds": round(outcome.seconds, 3)}
            except Exception as exc:  # noqa: BLE001 - a broken generator is reported, not fatal
                row = {"i": i, "reader": readers[i % len(readers)], "mutation": "generator failed", "argv": [],
                       "kind": "traceback", "detail": f"case generator: {type(exc).__name__}: {exc}", "rc": None, "seconds": 0}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            if row["kind"] == "ok" and not args.keep:
                shutil.rmtree(folder, ignore_errors=True)


def play(args, fixtures, root: Path) -> list[dict]:
    indices = [args.replay] if args.replay is not None else list(range(args.cases))
    results = root / "results.jsonl"
    jobs = max(1, min(args.jobs, len(indices)))
    pids = []
    for w in range(jobs):
        share = indices[w::jobs]
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                worker(share, args, fixtures, root, root / f"results-{w}.jsonl")
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        pids.append(pid)
    started, last = time.monotonic(), 0.0
    while pids:
        done, _ = os.waitpid(-1, os.WNOHANG)
        if done:
            pids.remove(done)
            continue
        if time.monotonic() - last > 30:
            finished = sum(len(p.read_text().splitlines()) for p in root.glob("results-*.jsonl"))
            print(f"fuzz: {finished}/{len(indices)} cases in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            last = time.monotonic()
        time.sleep(0.2)
    rows = [json.loads(line) for p in sorted(root.glob("results-*.jsonl")) for line in p.read_text().splitlines()]
    results.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sorted(rows, key=lambda r: r["i"])))
    return sorted(rows, key=lambda r: r["i"])


def table(rows: list[dict]) -> list[str]:
    lines = [f"| reader | cases | ok | tracebacks | wrong | hangs | damaged | exit 0 | exit 2 | exit 3 | median s | max s |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    by_reader = defaultdict(list)
    for r in rows:
        by_reader[r["reader"]].append(r)
    for reader in READER_ORDER + sorted(set(by_reader) - set(READER_ORDER)):
        rs = by_reader.get(reader)
        if not rs:
            continue
        kinds, codes = Counter(r["kind"] for r in rs), Counter(r["rc"] for r in rs)
        secs = [r["seconds"] for r in rs]
        lines.append(f"| {reader} | {len(rs)} | " + " | ".join(str(kinds[k]) for k in OUTCOMES) +
                     f" | {codes[0]} | {codes[2]} | {codes[3]} | {statistics.median(secs):.2f} | {max(secs):.2f} |")
    return lines


def family(row: dict) -> str:
    """What a case did, without its details: its first mutation (a run folder's command left out)."""
    text = row["mutation"]
    if row["reader"] == "run-folder":
        text = text.partition(": ")[2]
    first = text.split("+")[0]
    return first.split(" ")[0] if row["reader"] == "cli-options" else first


def tables_by_mutation(rows: list[dict]) -> list[str]:
    """A table per reader: its cases by kind of damage, with what came back."""
    lines: list[str] = []
    for reader in READER_ORDER:
        rs = [r for r in rows if r["reader"] == reader]
        if not rs:
            continue
        lines += ["", f"{reader}:", "| mutation | cases | failed | exit 0 | exit 2 | exit 3 |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
        groups = defaultdict(list)
        for r in rs:
            groups[family(r)].append(r)
        for name in sorted(groups):
            g = groups[name]
            codes = Counter(r["rc"] for r in g)
            lines.append(f"| {name} | {len(g)} | {sum(r['kind'] != 'ok' for r in g)} | {codes[0]} | {codes[2]} | {codes[3]} |")
    return lines


def main() -> None:
    ap = parser(__doc__, cases=(200, "Number of generated cases."), seed=(0, "Seed of the case generators."),
                jobs=(2, "Cases run at once (forked workers)."),
                reader=("", f"Only these readers, comma-separated ({', '.join(READERS)})."),
                show=(3, "Failures shown per kind."))
    ap.add_argument("--spawn", action="store_true", help="Fresh `python -m bon.cli` processes instead of forked children.")
    ap.add_argument("--keep", action="store_true", help="Keep every case folder, not only the failing ones.")
    ap.add_argument("--replay", type=int, default=None, metavar="I", help="Run only case I (of the same --seed and --reader).")
    args = ap.parse_args()
    if args.reader and not set(args.reader.split(",")) <= set(READERS):
        ap.error(f"--reader: one or more (comma-separated) of {', '.join(READERS)}")
    started = time.monotonic()
    warm_up()
    root = Path(tempfile.mkdtemp(prefix="bon-fuzz-"))
    fixtures = make_fixtures(root / "fixture")
    if not args.reader or {"merge", "view", "tradeoff"} & set(args.reader.split(",")):
        study_extras(fixtures)  # shards, view and trade-off answers: made once, before the workers fork
    rows = play(args, fixtures, root)
    print("\n".join(table(rows) + tables_by_mutation(rows)))
    kinds = Counter(r["kind"] for r in rows)
    failures = [r for r in rows if r["kind"] != "ok"]
    shown = Counter()
    for r in failures:
        if shown[r["kind"]] >= args.show:
            continue
        shown[r["kind"]] += 1
        print(f"- case {r['i']} [{r['reader']}] {r['kind']}: {r['mutation']}\n    bon {' '.join(map(repr, r['argv']))}\n"
              f"    {r['detail']}\n    replay: python benchmarks/fuzz.py --seed {args.seed} --replay {r['i']}"
              f"{' --reader ' + args.reader if args.reader else ''}  (folder {root / ('case-' + str(r['i']))})")
    if not failures and not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"case folders and results.jsonl: {root}")
    print(f"{time.monotonic() - started:.0f} s in all, {'fresh processes' if args.spawn else 'forked from a warm process'}, "
          f"{args.jobs} at a time")
    print(f"fuzz: {len(rows)} cases, {kinds['traceback']} tracebacks, {kinds['wrong']} wrong answers, {kinds['hang']} hangs, "
          f"{kinds['damaged']} damaged")


if __name__ == "__main__":
    main()
