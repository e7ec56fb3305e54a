"""benchmarks/rollout.py refuses bad arguments before it loads any model."""

import subprocess
import sys
from pathlib import Path

ROLLOUT = Path(__file__).resolve().parents[1] / "benchmarks" / "rollout.py"


def run(*args):
    return subprocess.run([sys.executable, str(ROLLOUT), *args], capture_output=True, text=True, timeout=300)


def test_a_temperature_given_twice_is_refused():
    done = run("--temperature", "0", "1", "0")
    assert done.returncode == 2
    assert "--temperature got a value twice (0 1 0); each is one workload, run once" in done.stderr


def test_a_negative_temperature_is_refused():
    done = run("--temperature", "-1")
    assert done.returncode == 2 and "--temperature values must be >= 0 (0 is greedy)" in done.stderr


def test_the_shared_cpu_check_runs_beside_a_busy_process_and_its_verdict_follows_the_ratio():
    done = run("--sections", "shared", "--episodes", "2", "--played", "2", "--max-turns", "1", "--max-new-tokens", "4")
    lines = [line for line in done.stdout.splitlines() if line.startswith("shared CPU, beside one busy process / alone: ")]
    assert len(lines) == 1, done.stdout + done.stderr[-2000:]
    ratio = float(lines[0].split(": ")[1].split("x")[0])
    assert ("PASS" in lines[0]) == (ratio <= 2.5) and done.returncode == (0 if ratio <= 2.5 else 1)
    for name in ("threads auto, solo", "threads auto, shared", "threads fixed at", "shared (transformers)"):
        assert name in done.stdout
    # The busy process was killed: no python spinning on "while True: pass" is left.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"{sys.executable} -c while True: pass" not in ps
