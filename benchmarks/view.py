"""How fast a ``searchgym view`` page of a large benchmark opens in a browser.

    python benchmarks/view.py            # 10,000 episodes: oracle and random on Search-R1, 1,000 questions x 5 seeds
    python benchmarks/view.py --quick    # 1,000 episodes (100 questions x 5 seeds)

The benchmark is played once into ``--workdir`` (a real ``searchgym bench`` folder: synthwiki
of 20,000 passages, every episode's turns, searches and documents recorded) and resumed
after. Then, side by side in one run:

- the page is written (``write_page``): its time and size;
- headless Chromium opens it (``--dump-dom``), best of ``--repeat``: the page's own clock at
  the moment it is drawn (``data-ready-ms``: since the page was asked for, reading the file,
  parsing the data and drawing), and the whole Chromium process beside a blank page's;
- the episodes view as the page draws it (one page of 50 rows) against every row drawn at
  once (``#all=1``): the ratio is what lazy rendering saves;
- a filtered, sorted view with an episode opened and its documents shown.

Chromium (Debian's ``chromium``) must be on PATH.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000, help="questions of the bench (default 1000; x 5 seeds x 2 agents)")
    parser.add_argument("--quick", action="store_true", help="100 questions: 1,000 episodes")
    parser.add_argument("--repeat", type=int, default=3, help="browser openings of each view; the best is kept (default 3)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "searchgym-view-bench",
                        help="where the bench folder is kept between runs (default: a folder in the temp dir)")
    return parser.parse_args()


def play(out: Path, questions: int) -> float:
    """Play (or resume) the bench; its seconds."""
    from searchgym.bench import BenchConfig, cross, run_bench

    config = BenchConfig(runs=cross(["SearchR1-v0"], ["oracle", "random"]), limit=questions, seeds=(0, 1, 2, 3, 4), num_envs=16,
                         env_options={"*": {"corpus_options": {"seed": 0, "num_passages": 20_000}}})
    start = time.perf_counter()
    run_bench(config, out, progress=False)
    return time.perf_counter() - start


def open_page(browser: str, page: Path, fragment: str, repeat: int) -> tuple[float, int, str]:
    """(best Chromium wall seconds, best page-ready milliseconds, the last DOM) of ``page#fragment``."""
    walls, readies, dom = [], [], ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", f"{page.resolve().as_uri()}#{fragment}"],
                              capture_output=True, text=True, timeout=600)
        walls.append(time.perf_counter() - start)
        dom = done.stdout
        found = re.search(r'data-ready-ms="(\d+)"', dom)
        if done.returncode != 0 or not found:
            sys.exit(f"Chromium did not draw {page}#{fragment} (exit {done.returncode}): {done.stderr[-500:]}")
        readies.append(int(found.group(1)))
    return min(walls), min(readies), dom


def main() -> int:
    args = parse_args()
    browser = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if browser is None:
        sys.exit("benchmarks/view.py opens pages in headless Chromium: apt-get install chromium")
    questions = 100 if args.quick else args.questions
    from searchgym.view import size_text, write_page

    out = args.workdir / f"bench-{questions}"
    seconds = play(out, questions)
    start = time.perf_counter()
    page, data = write_page([out], args.workdir / f"view-{questions}.html")
    written = time.perf_counter() - start
    n = len(data["episodes"])
    print(f"bench: {n} episodes in {out} ({seconds:.1f} s to play or resume)")
    print(f"page: {size_text(page.stat().st_size)} written in {written:.2f} s ({len(data['docs'])} distinct documents)")

    blank = args.workdir / "blank.html"
    blank.write_text('<!doctype html><body><script>document.body.dataset.readyMs = String(Math.round(performance.now()))</script></body>')
    views = [
        ("blank page (Chromium's own start)", blank, ""),
        ("runs: table, charts, settings", page, ""),
        ("episodes, one page of 50 rows (lazy)", page, "view=episodes"),
        ("episodes, every row at once (#all=1)", page, "view=episodes&all=1"),
        ("filtered, sorted, one episode opened with its documents", page, "view=episodes&inform=1&sort=reward-asc&open=0&docs=1"),
        ("side by side per question", page, "view=compare"),
    ]
    results = {}
    print(f"\nheadless Chromium, best of {args.repeat} ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}):")
    print(f"| view | page drawn (ms since asked) | Chromium process (s) |\n|---|---:|---:|")
    for name, path, fragment in views:
        wall, ready, dom = open_page(browser, path, fragment, args.repeat)
        results[fragment if path == page else "blank"] = (wall, ready, dom)
        print(f"| {name} | {ready} | {wall:.2f} |")
    lazy, eager = results["view=episodes"], results["view=episodes&all=1"]
    shown = int(re.search(r'data-shown="(\d+)"', lazy[2]).group(1))
    assert shown == n, f"the page shows {shown} of {n} episodes"
    print(f"\nevery row at once / one page: {eager[1] / max(1, lazy[1]):.1f}x the time to draw ({eager[1]} ms against {lazy[1]} ms), "
          f"{eager[0] / lazy[0]:.1f}x the Chromium process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
