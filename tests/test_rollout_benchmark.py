"""benchmarks/rollout.py refuses bad arguments before it loads any model."""

import subprocess
import sys
from pathlib import Path

ROLLOUT = Path(__file__).resolve().parents[1] / "benchmarks" / "rollout.py"


def run(*args):
    return subprocess.run([sys.executable, str(ROLLOUT), *args], capture_output=True, text=True, timeout=120)


def test_a_temperature_given_twice_is_refused():
    done = run("--temperature", "0", "1", "0")
    assert done.returncode == 2
    assert "--temperature got a value twice (0 1 0); each is one workload, run once" in done.stderr


def test_a_negative_temperature_is_refused():
    done = run("--temperature", "-1")
    assert done.returncode == 2 and "--temperature values must be >= 0 (0 is greedy)" in done.stderr
