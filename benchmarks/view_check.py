"""Open `bon view`'s page in headless Chromium: console messages, and both orders shown for a pair and a match.

Without ``--run`` it builds a small demo study first (``bon demo --prompts 3 --n 4``). For each filter (a
URL fragment the page reads) it loads ``view.html`` in ``chromium --headless --dump-dom`` with console
logging on, and prints how many console messages the page produced (the page logs nothing, so any is an
error, a failed resource or a blocked request), how many cards the filter shows, and whether the first card
has a forward and a reverse verdict row. Exit status 1 when a check fails, 2 without Chromium.

    python benchmarks/view_check.py [--run DIR [--reuse]] [--chromium PATH]

``--reuse`` opens the run's existing view.html instead of writing it again (a paper-size page takes minutes
to write). Each filter's line ends with the wall seconds Chromium took to load the page and its shards.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (the repository on the import path)

CONSOLE = re.compile(r":CONSOLE[:(]")
CARD = re.compile(r'<div class="card( disagree)?" data-kind="(pair|match)">')
FILTERS = ("kind=pair", "kind=pair&disagree=1", "kind=match")


def find_chromium(explicit: str | None = None) -> str | None:
    """The Chromium (or Chrome) executable: ``explicit``, else the first on PATH."""
    if explicit:
        return explicit
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def check_page(chromium: str, page: Path, fragment: str = "", timeout: float = 120.0, budget_ms: int = 20000) -> dict[str, Any]:
    """Load ``page#fragment`` headless (``budget_ms`` of virtual time, so the shards the page adds load before
    the DOM is read); the console messages, the cards shown and the first card's order rows."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                               "--v=0", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", "--dump-dom", url],
                              capture_output=True, text=True, timeout=timeout)
    dom = proc.stdout
    console = [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]
    cards = CARD.findall(dom)
    first = dom[dom.find('<div class="card'):]
    first = first[:first.find('<div class="card', 1)] if first.find('<div class="card', 1) > 0 else first
    count = re.search(r'<span id="count" class="muted">([^<]*)</span>', dom)
    return {"fragment": fragment, "returncode": proc.returncode, "console": console, "cards": len(cards),
            "disagree_cards": sum(1 for c in cards if c[0]), "count": count.group(1) if count else "",
            "forward_row": '<tr class="order forward">' in first, "reverse_row": '<tr class="order reverse">' in first,
            "first_kind": cards[0][1] if cards else None, "dom": dom}


def main() -> int:
    from _common import parser

    ap = parser(__doc__, run=("", "a run folder (default: build a small demo)"), chromium=("", "Chromium executable"))
    ap.add_argument("--reuse", action="store_true", help="open the run's existing view.html (needs --run)")
    args = ap.parse_args()
    chromium = find_chromium(args.chromium or None)
    if chromium is None:
        print("no Chromium found (apt-get install chromium); nothing checked")
        return 2
    from _common import timed
    from analysis.viewer import read_index, write_viewer
    from bon.cli import main as bon

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else Path(tmp) / "demo"
        if not args.run and bon(["demo", "--out", str(run), "--prompts", "3", "--n", "4"]) != 0:
            return 1
        if args.reuse and args.run:
            page = run / "view.html"
            index = read_index(page)
            print(f"{page}: {index['total']} items, {len(index['judges'])} judges (the page as written)")
        else:
            page, data = write_viewer(run)
            print(f"{page}: {len(data['items'])} items, {len(data['judges'])} judges")
        ok = True
        for fragment in FILTERS:
            r, seconds = timed(check_page, chromium, page, fragment)
            good = (r["returncode"] == 0 and not r["console"] and r["cards"] > 0 and r["forward_row"] and r["reverse_row"]
                    and r["first_kind"] == fragment.split("&")[0].split("=")[1]
                    and ("disagree" not in fragment or r["disagree_cards"] == r["cards"]))
            ok &= good
            print(f"#{fragment}: console messages {len(r['console'])}, cards shown {r['cards']} ({r['count']}), "
                  f"first card ({r['first_kind']}) has forward row {r['forward_row']} and reverse row "
                  f"{r['reverse_row']}: {'ok' if good else 'FAILED'}; opened in {seconds:.1f} s")
            for line in r["console"][:5]:
                print("   ", line)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
