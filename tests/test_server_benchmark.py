"""benchmarks/server.py: bad arguments are refused; a small run measures all three and
its verdict follows its ratios."""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "server.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def test_bad_arguments_are_refused():
    done = run("--passages", "0")
    assert done.returncode == 2 and "must be positive" in done.stderr


def test_a_small_run_reports_every_server_and_a_verdict_that_follows_the_ratios():
    done = run("--workloads", "bm25", "--passages", "2000", "--requests", "64", "--clients", "1", "4")
    for row in ("| in-process, 64 queries per call | - |", "| searchgym server | 4 |", "| reference server | 4 |"):
        assert row in done.stdout, done.stdout + done.stderr[-2000:]
    m = re.search(r"searchgym / reference server ([\d.]+)x .*in-process batched / searchgym server ([\d.]+)x", done.stdout)
    assert m, done.stdout
    versus_reference, versus_ceiling = float(m.group(1)), float(m.group(2))
    passed = versus_reference >= 2.0 and versus_ceiling <= 1.5
    # The printed ratios are rounded; stay clear of the edges before judging the exit status.
    if abs(versus_reference - 2.0) > 0.01 and abs(versus_ceiling - 1.5) > 0.01:
        assert done.returncode == (0 if passed else 1)
