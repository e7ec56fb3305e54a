"""benchmarks/serve_memory.py: bad sizes are refused; a small run measures both servers and
its verdict follows its figures."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "serve_memory.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_bad_sizes_are_refused():
    done = run("--batch", "0")
    assert done.returncode == 2 and "--batch must be positive, got 0" in done.stderr


def test_a_small_run_reports_both_caches_and_a_verdict_that_follows_its_figures():
    done = run("--words", "4000", "--batch", "200", "--passages", "300")
    assert "20 requests of 200 queries, each query with one number never sent before: 4,000 distinct words a server" in done.stdout, \
        done.stdout + done.stderr[-2000:]
    assert re.search(r"^\| 4,000 \| \d+ \| \d+ \|$", done.stdout, flags=re.M), done.stdout
    rows = dict(re.findall(r"^\| (shipped|earlier) \| ([+-][\d.]+)% \| [\d.]+ \| [\d.]+ \|$", done.stdout, flags=re.M))
    assert set(rows) == {"shipped", "earlier"}, done.stdout
    m = re.search(r"p50 shipped / earlier ([\d.]+)x", done.stdout)
    assert m, done.stdout
    growth, ratio = float(rows["shipped"]) / 100, float(m.group(1))
    # The printed figures are rounded; stay clear of the edges before judging the exit status.
    if abs(growth - 0.10) > 0.002 and abs(ratio - 1.10) > 0.01:
        assert done.returncode == (0 if growth <= 0.10 and ratio <= 1.10 else 1)
