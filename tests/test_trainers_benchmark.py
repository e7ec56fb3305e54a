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


def test_bad_seeds_are_refused():
    done = run("--seeds", "0,x")
    assert done.returncode == 2 and "--seeds takes integers separated by commas (e.g. 0,1,2), got '0,x'" in done.stderr, done.stderr
    done = run("--seeds", "1,1")
    assert done.returncode == 2 and "--seed/--seeds take distinct integers in [0, 2**31), got [1, 1]" in done.stderr, done.stderr


class Example:
    def __init__(self, id, question):
        self.id, self.question = id, question


def test_the_schedule_gives_every_step_distinct_questions_and_reshuffles_each_pass():
    from trainers import schedule

    examples = [Example(f"q{i}", f"question {i}") for i in range(6)] + [Example("dup", "question 2")]
    plan = schedule(examples, steps=6, per_step=3, seed=0)
    assert [len(step) for step in plan] == [3] * 6
    flat = [pair for step in plan for pair in step]
    passes = [flat[:6], flat[6:12], flat[12:]]
    for one in passes:  # each pass is every distinct question once; a repeated text keeps its first id
        assert sorted(one) == [(f"q{i}", f"question {i}") for i in range(6)]
    assert passes[0] != passes[1]
    assert schedule(examples, steps=6, per_step=3, seed=0) == plan
    assert schedule(examples, steps=6, per_step=3, seed=1) != plan


def test_the_fixed_order_hands_out_the_schedule_and_the_check_catches_a_trainer_that_strays():
    from trainers import FixedOrder, check_played

    order = FixedOrder(["a", "b", "c", "d"])
    assert order.take(2) == ["a", "b"] and order.state() == {"position": 2}
    assert order.take(2) == ["c", "d"]
    with pytest.raises(RuntimeError, match="the schedule has 4 questions"):
        order.take(1)
    order.load({"position": 1})
    assert order.take(1) == ["b"]

    plan = [[("a", "A"), ("b", "B")], [("c", "C"), ("d", "D")]]
    check_played("trl", [["a", "b"], ["c", "d"]], plan)
    with pytest.raises(RuntimeError, match="trl did not play the scheduled questions: 2 steps played, 2 scheduled, first difference at step 2"):
        check_played("trl", [["a", "b"], ["d", "c"]], plan)


def test_the_seed_mean_averages_the_steps_every_seed_evaluated():
    from trainers import mean_run

    a = {"evals": [(0, 0.0, 0.0), (4, 0.2, 0.1), (8, 0.4, 0.0)], "train_reward": [0.1, 0.3], "train_seconds": 10.0, "generated_tokens": 100, "step_seconds": [5.0, 5.0]}
    b = {"evals": [(0, 0.0, 0.0), (4, 0.4, 0.3)], "train_reward": [0.3, 0.5], "train_seconds": 30.0, "generated_tokens": 300, "step_seconds": [15.0, 15.0]}
    m = mean_run([a, b])
    assert m["evals"] == [(0, 0.0, 0.0), (4, pytest.approx(0.3), pytest.approx(0.2))]
    assert m["train_reward"] == [pytest.approx(0.2), pytest.approx(0.4)]
    assert m["train_seconds"] == 20.0 and m["generated_tokens"] == 200 and m["step_seconds"] == [10.0, 10.0]



def test_several_seeds_give_a_row_per_seed_and_a_mean_row_per_trainer_and_a_verdict_each():
    from trainers import summarize

    def run_of(values, seconds):
        return {"evals": [(0, values[0], 0.0), (8, values[1], 0.0)], "train_reward": [0.0] * 8, "train_seconds": seconds,
                "generated_tokens": 100, "step_seconds": [seconds / 8] * 8}

    by_seed = {0: {"searchgym": run_of((0.0, 0.1), 8.0), "trl": run_of((0.0, 0.1), 16.0)},
               1: {"searchgym": run_of((0.0, 0.0), 8.0), "trl": run_of((0.0, 0.1), 16.0)}}
    runs, lines = summarize(by_seed, ["searchgym", "trl"])
    assert list(runs) == ["searchgym seed 0", "searchgym seed 1", "trl seed 0", "trl seed 1", "searchgym mean", "trl mean"]
    assert runs["searchgym mean"]["evals"][1][1] == pytest.approx(0.05)
    assert lines[1] == "seed 0: seconds to reach it, searchgym / TRL: 0.50x (target <= 1): PASS"
    assert lines[2] == "seed 1: searchgym never reached TRL's best dev reward 0.100: FAIL"
    assert lines[3] == "mean of 2 seeds: searchgym never reached TRL's best dev reward 0.100: FAIL"
    single, single_lines = summarize({0: by_seed[0]}, ["searchgym", "trl"])
    assert list(single) == ["searchgym", "trl"] and single_lines[-1].endswith("PASS")


def test_matched_sampling_hands_trl_searchgyms_seeds_and_counts_identical_samples():
    from trainers import identical_samples, searchgym_seeds

    agent, episodes = searchgym_seeds(seed=1, step=2, count=8, n=4)
    assert agent == (7_919 + 2 * 104_729) % 2**31
    assert episodes == [1_000_003 + 2 * 1009 + j for j in (0, 1, 2, 3, 0, 1, 2, 3)]  # sample j of each question
    a = [[[5, [1, 2]], [6, [3]]], [[7, [4]], [8, [9]]]]
    b = [[[5, [1, 2]], [6, [3]]], [[7, [4]], [8, [8]]]]
    assert identical_samples(a, b) == [1.0, 0.5]


def test_the_chart_shows_the_seconds_to_the_reward_level_and_their_ratio(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    import trainers
    from trainers import plot, reach

    def run_of(rewards, seconds, dev=0.0):
        return {"evals": [(0, 0.0, 0.0), (8, dev, 0.0)], "train_reward": rewards, "train_seconds": seconds,
                "generated_tokens": 100, "step_seconds": [seconds / len(rewards)] * len(rewards)}

    rising = [0.0, 0.0, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]  # the trailing 5-step mean reaches 0.08 at step 6
    assert reach(run_of(rising, 8.0)) == (6, 6.0)
    assert reach(run_of([0.0] * 8, 8.0)) is None
    runs = {"searchgym seed 0": run_of(rising, 8.0), "trl seed 0": run_of(rising, 20.0),
            "searchgym seed 1": run_of(rising, 8.0), "trl seed 1": run_of([0.0] * 8, 20.0)}
    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure to read it
    plot(runs, tmp_path)
    assert (tmp_path / "trainers.png").stat().st_size > 10_000
    fig = figures[0]
    assert len(fig.axes) == 3 and "greedy dev reward 0 at every evaluation" in fig._suptitle.get_text()
    reached = fig.axes[2]
    assert [t.get_text() for t in reached.texts] == ["2.5x sooner", "TRL never"]
    assert [round(p.get_height(), 1) for p in reached.patches] == [6.0, 15.0, 6.0, 0.0]
    figures.clear()
    plot({"searchgym": run_of(rising, 8.0, dev=0.1), "trl": run_of(rising, 4.0)}, tmp_path)
    assert len(figures[0].axes) == 4  # a dev reward above zero is drawn
    assert [t.get_text() for t in figures[0].axes[2].texts] == ["2.0x later"]
    plt.close("all")
    assert trainers.REACH_LEVEL == 0.08
