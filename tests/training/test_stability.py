"""Issue 66: the per-step diagnostics and the stability detectors on crafted rollouts, the
options that prevent each failure, and a tiny-model run that writes their columns."""

import csv
import json
import math
from types import SimpleNamespace

import pytest

from searchgym.agents.trajectory import Trajectory
from searchgym.error import ConfigError
from searchgym.training.args import Args, check_args
from searchgym.training.stability import (
    COLUMNS, StabilityMonitor, empty_turns, invalid_turns, repeated_output, repeats_itself, reward_spread, rollout_diagnostics,
    shape_rewards,
)


def episode(reward=0.0, texts=("<search>q</search>",), ids=None, num_invalid=0, generated_tokens=None):
    """An EpisodeResult-like record: its turns' texts and, with ``ids``, one generated segment per list."""
    trajectory = None
    if ids is not None:
        trajectory = Trajectory((1, 2, 3))
        for turn in ids:
            trajectory.add_generated(tuple(turn), tuple(0.0 for _ in turn), "stop")
            trajectory.add_observation((9, 9))
    turns = [{"prompt": "question"}, *({"turn": i + 1, "text": t} for i, t in enumerate(texts))]
    gen = generated_tokens if generated_tokens is not None else sum(len(t) for t in ids or ())
    return SimpleNamespace(reward=reward, turns=turns, trajectory=trajectory, num_turns=len(texts), num_invalid=num_invalid,
                           generated_tokens=gen)


def test_reward_spread_is_the_mean_within_group_std_and_the_share_of_all_equal_groups():
    rollout = [episode(1.0), episode(0.0), episode(0.5), episode(0.5), episode(0.0), episode(0.0)]
    spread = reward_spread(rollout, n=2)
    assert spread["group_reward_std"] == pytest.approx(math.sqrt(0.5) / 3)  # stdev(1, 0) = 0.707, the others 0
    assert spread["equal_reward_groups"] == pytest.approx(2 / 3)
    assert reward_spread([], n=2) == {"group_reward_std": 0.0, "equal_reward_groups": 0.0}


def test_empty_turns_counts_blank_turn_texts_and_without_turns_empty_generated_segments():
    rollout = [episode(texts=("", "  \n", "<answer>x</answer>")), episode(texts=("<search>a</search>",))]
    assert empty_turns(rollout) == pytest.approx(2 / 4)
    bare = episode(ids=[[], [4, 5]])
    bare.turns = None
    assert empty_turns([bare]) == pytest.approx(1 / 2)
    assert empty_turns([]) == 0.0


def test_repeated_output_flags_an_ngram_repeated_four_times_and_identical_completions_of_a_group():
    loop = [1, 2, 3, 4, 5, 6, 7, 8] * 4
    assert repeats_itself(loop) and not repeats_itself(loop[:-1]) and not repeats_itself(list(range(40)))
    assert repeats_itself([7] * 11)  # one 8-gram, overlapping 4 times
    rollout = [
        episode(ids=[loop]), episode(ids=[list(range(10, 30))]),  # group 0: one loops
        episode(ids=[[5, 6, 7]]), episode(ids=[[5, 6, 7]]),  # group 1: identical
        episode(ids=[[5, 6, 7]]), episode(ids=[[5, 6, 8]]),  # group 2: fine (the same ids as group 1 elsewhere do not count)
    ]
    assert repeated_output(rollout, n=2) == pytest.approx(3 / 6)
    # without trajectories it reads the turns' words
    words = [episode(texts=(" ".join(["the same eight words again and once more"] * 4),)), episode(texts=("short",))]
    assert repeated_output(words, n=2) == pytest.approx(1 / 2)


def test_invalid_turns_is_the_malformed_share_of_all_turns():
    rollout = [episode(texts=("a", "b", "c"), num_invalid=2), episode(texts=("d",), num_invalid=0)]
    assert invalid_turns(rollout) == pytest.approx(2 / 4)
    assert set(rollout_diagnostics(rollout, n=2)) == {"group_reward_std", "equal_reward_groups", "empty_turns", "repeated_output", "invalid_turns"}


def test_lengths_growing_without_end_are_flagged_after_window_rises_past_the_ratio_and_warned_once():
    monitor = StabilityMonitor(window=3, length_ratio_limit=1.25)
    flags = []
    warned = []
    for step, length in enumerate([10, 10, 10, 11, 14, 18, 25, 35], start=1):
        columns, warnings = monitor.check(step, {"generated_tokens": length})
        flags.append((columns["length_ratio"] is not None, columns["length_growing"]))
        warned += warnings
    # ratios: step 4 11/10, step 5 14/10.33 (rising 2 in a row only), step 6 18/11.67 (3 rises: 10->11->14->18)
    assert flags == [(False, 0), (False, 0), (False, 0), (True, 0), (True, 0), (True, 1), (True, 1), (True, 1)]
    assert len(warned) == 1 and warned[0].startswith("warning: step 6: the mean generated length") and "--length-penalty" in warned[0]
    flat = StabilityMonitor(window=3)
    assert all(flat.check(s, {"generated_tokens": 50 + (s % 2)})[0]["length_growing"] == 0 for s in range(1, 12))


def test_format_drift_needs_a_high_and_rising_invalid_share():
    monitor = StabilityMonitor(window=2, invalid_warn=0.2, invalid_rise=0.05)
    drift = [monitor.check(s, {"invalid_turns": v})[0]["format_drift"] for s, v in enumerate([0.3, 0.3, 0.32, 0.5, 0.1], start=1)]
    assert drift == [0, 0, 0, 1, 0]  # 0.32 is high but not rising past the mean by 0.05; 0.5 is
    low = StabilityMonitor(window=2)
    assert [low.check(s, {"invalid_turns": v})[0]["format_drift"] for s, v in enumerate([0.0, 0.0, 0.15], start=1)] == [0, 0, 0]


def test_empty_and_repeated_output_warn_once_each_past_their_share():
    monitor = StabilityMonitor()
    _, first = monitor.check(1, {"empty_turns": 0.6, "repeated_output": 0.1})
    _, second = monitor.check(2, {"empty_turns": 0.9, "repeated_output": 0.7})
    _, third = monitor.check(3, {"empty_turns": 0.9, "repeated_output": 0.7})
    assert len(first) == 1 and "collapse to empty output" in first[0]
    assert len(second) == 1 and "repeated output" in second[0] and third == []


def test_a_resumed_monitor_takes_the_history_of_played_steps():
    monitor = StabilityMonitor(window=2, length_ratio_limit=1.1)
    monitor.seed([{"step": 0, "eval_reward": 0.1}, {"step": 1, "generated_tokens": 10, "invalid_turns": 0.0},
                  {"step": 2, "generated_tokens": 12}])
    assert monitor.lengths == [10.0, 12.0] and monitor.invalid == [0.0, 0.0]
    assert monitor.check(3, {"generated_tokens": 15})[0]["length_growing"] == 1


def test_the_format_gate_and_the_length_penalty_shape_the_reward():
    rollout = [
        episode(reward=1.0, num_invalid=1, generated_tokens=10),  # gated to 0
        episode(reward=-0.5, num_invalid=2, generated_tokens=10),  # a negative reward stays
        episode(reward=1.0, num_invalid=0, generated_tokens=30),  # 10 tokens past 20: -0.1
        episode(reward=0.5, num_invalid=0, generated_tokens=5),
    ]
    assert shape_rewards(rollout, length_penalty=0.01, length_penalty_from=20, format_gate=True) == 2
    assert [r.reward for r in rollout] == pytest.approx([0.0, -0.5, 0.9, 0.5])
    untouched = [episode(reward=1.0, num_invalid=3, generated_tokens=1000)]
    assert shape_rewards(untouched) == 0 and untouched[0].reward == 1.0


def test_the_options_are_checked():
    for bad in ({"length_penalty": -0.1}, {"length_penalty_from": -1}, {"format_gate": "yes"}):
        with pytest.raises(ConfigError):
            check_args(Args(**bad))
    check_args(Args(length_penalty=0.01, length_penalty_from=64, format_gate=True))


def test_a_tiny_model_run_with_the_options_writes_the_diagnostic_columns(tmp_path, capsys):
    pytest.importorskip("torch")
    from env_helpers import SMALL_WORLD
    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training.trainer import Trainer

    args = Args(
        model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD, "max_turns": 2}, out=str(tmp_path / "run"),
        total_steps=2, questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=2,
        progress=False, tensorboard=False, seed=0, threads=1, length_penalty=0.01, length_penalty_from=4, format_gate=True,
    )
    rows = Trainer(args).train()
    with open(tmp_path / "run" / "metrics.csv", newline="") as f:
        written = list(csv.DictReader(f))
    assert [r["step"] for r in written] == ["1", "2"]
    for column in ("group_reward_std", "equal_reward_groups", "adv_std", "trained_token_share", "entropy", "kl", "grad_norm",
                   "clip_fraction", *COLUMNS):
        assert column in written[0], column
    for row in written:
        for column in ("group_reward_std", "equal_reward_groups", "empty_turns", "repeated_output", "invalid_turns", "length_growing", "format_drift"):
            assert 0.0 <= float(row[column]) <= 1.0, column
        assert 0.0 < float(row["trained_token_share"]) <= 1.0
        assert row["length_ratio"] == ""  # fewer steps than the window
    assert len(rows) == 2
    # the kept rollouts carry the shaped reward: gated to <= 0 with a malformed turn, less the penalty past 4 tokens
    kept = [json.loads(line) for line in (tmp_path / "run" / "rollouts.jsonl").read_text().splitlines()]
    assert kept
    for record in kept:
        if record["num_invalid"]:
            assert record["reward"] <= 0.0
        assert record["reward"] <= 1.0 - 0.01 * max(0, record["generated_tokens"] - 4) + 1e-9
