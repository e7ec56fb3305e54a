"""benchmarks/trainers.py refuses bad arguments before it loads anything, and its table
reads the runs it is given."""

import subprocess
import sys
from pathlib import Path

import pytest

TRAINERS = Path(__file__).resolve().parents[1] / "benchmarks" / "trainers.py"
sys.path.insert(0, str(TRAINERS.parent))  # the script's table and verdict are imported below


def run(*args):
    return subprocess.run([sys.executable, str(TRAINERS), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args,message",
    [
        (("--n", "1"), "--n must be at least 2 (GRPO compares samples of one question), got 1"),
        (("--temperature", "0"), "--temperature must be > 0 (GRPO samples), got 0.0"),
        (("--trainers", "searchgym,openrlhf"), "--trainers takes searchgym and/or trl, got openrlhf"),
        (("--model", "qwen"), "--model takes scratch or smollm2, got 'qwen'"),
        (("--steps", "0"), "--steps must be a positive integer, got 0"),
        (("--sft-run", "/nonexistent"), "--sft-run expects an SFT run folder with final/, got /nonexistent"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    done = run(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_table_puts_each_trainers_evaluations_in_its_step_columns():
    from trainers import table

    runs = {
        "searchgym": {"evals": [(0, 0.5, 0.25), (4, 0.625, 0.5)], "train_seconds": 40.0, "step_seconds": [10.0] * 4, "generated_tokens": 800},
        "trl": {"evals": [(0, 0.5, 0.25), (4, 0.55, 0.375)], "train_seconds": 80.0, "step_seconds": [20.0] * 4, "generated_tokens": 800},
    }
    lines = table(runs).splitlines()
    assert lines[0] == "| trainer | dev reward @0 | dev reward @4 | best dev EM | train s | s/step | generated tok/s |"
    assert lines[2] == "| searchgym | 0.500 | 0.625 | 0.500 | 40 | 10.0 | 20.0 |"
    assert lines[3] == "| trl | 0.500 | 0.550 | 0.375 | 80 | 20.0 | 10.0 |"


def test_the_verdict_compares_the_time_to_reach_trls_best_dev_reward():
    from trainers import verdict

    fast = {"evals": [(0, 0.5, 0), (4, 0.6, 0)], "train_seconds": 40.0, "step_seconds": [10.0] * 4}
    slow = {"evals": [(0, 0.5, 0), (4, 0.6, 0)], "train_seconds": 80.0, "step_seconds": [20.0] * 4}
    assert verdict({"searchgym": fast, "trl": slow})[-1] == "seconds to reach it, searchgym / TRL: 0.50x (target <= 1): PASS"
    assert verdict({"searchgym": slow, "trl": fast})[-1] == "seconds to reach it, searchgym / TRL: 2.00x (target <= 1): FAIL"
    never = {"evals": [(0, 0.5, 0), (4, 0.55, 0)], "train_seconds": 40.0, "step_seconds": [10.0] * 4}
    assert verdict({"searchgym": never, "trl": slow}) == ["searchgym never reached TRL's best dev reward 0.600: FAIL"]
