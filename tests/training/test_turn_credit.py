"""Per-turn credit (``Args.credit="turn"``): each turn's reward on its last generated token,
for PPO (GAE), GRPO (DeepSeekMath's process supervision) and REINFORCE++; hand-computed
small tensors, then a short training run whose recipe pays every turn."""

import math

import pytest

torch = pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.agents import EpisodeResult, Trajectory  # noqa: E402
from searchgym.error import ConfigError, UnknownNameError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.rewards import RECIPES, SearchR1EM  # noqa: E402
from searchgym.training import Args, Trainer  # noqa: E402
from searchgym.training import trainer as trainer_module  # noqa: E402
from searchgym.training.advantages import (  # noqa: E402
    gae, group_advantages, process_group_advantages, reinforce_pp_advantages, reinforce_pp_turn_advantages, turn_end_columns,
    turn_steps, turn_token_rewards,
)
from searchgym.training.args import check_args  # noqa: E402
from searchgym.training.batch import collate  # noqa: E402


def trajectory(prompt, *segments):
    """segments: ("g", ids) generated, ("o", ids) observation."""
    t = Trajectory(tuple(prompt))
    for kind, ids in segments:
        if kind == "g":
            t.add_generated(tuple(ids), tuple(-0.1 for _ in ids), "stop")
        else:
            t.add_observation(tuple(ids))
    return t


# ---------------------------------------------------------------- where each turn ends
def test_each_turn_ends_at_its_last_generated_target_column():
    # Response: 10 11 | 20 21 | 12 13 14; target column of response id i is len(prompt) + i - 1.
    t = trajectory((1, 2, 3), ("g", (10, 11)), ("o", (20, 21)), ("g", (12, 13, 14)))
    assert turn_end_columns(t) == [3, 8]
    mask = collate([t]).loss_mask[0]
    assert mask.nonzero().flatten().tolist() == [2, 3, 6, 7, 8]


def test_an_empty_or_cut_turn_ends_at_the_last_trained_token_before_it():
    t = trajectory((1, 2, 3), ("g", (10, 11)), ("o", (20,)), ("g", ()), ("o", (21,)), ("g", (12,)))
    assert turn_end_columns(t) == [3, 3, 6]  # the empty second turn: on the first turn's last token
    cut = trajectory((1, 2, 3), ("g", (10, 11)), ("o", (20, 21)), ("g", (12, 13, 14)))
    assert turn_end_columns(cut, max_length=7) == [3, 3]  # collate keeps targets 0..5: the second turn is cut off
    assert collate([cut], max_length=7).loss_mask.shape == (1, 6)
    first_empty = trajectory((1, 2), ("g", ()), ("o", (5,)), ("g", (7, 8)))
    assert turn_end_columns(first_empty) == [2, 3]  # nothing trained before it: the row's first trained token
    with pytest.raises(ConfigError, match=r"^turn_end_columns got a trajectory with no generated token to train on \(its loss mask is all 0\); drop it first\.$"):
        turn_end_columns(trajectory((1, 2), ("g", ()), ("o", (5,))))


def test_turn_steps_fold_extra_steps_onto_the_last_turn_and_credit_a_changed_reward_to_it():
    assert turn_steps([0.5, -0.1], [3, 8]) == [(3, 0.5), (8, -0.1)]
    assert turn_steps([0.5, -0.1, 1.0], [3, 8]) == [(3, 0.5), (8, 0.9)]  # a step past the last generated turn
    assert turn_steps([0.5], [3, 8]) == [(3, 0.5)]  # a generated turn that was never stepped earns nothing
    assert turn_steps([0.5, 0.25], [3, 8], reward=1.75) == [(3, 0.5), (8, 1.25)]  # a group hook's +1 lands on the last turn
    assert turn_steps([], [3, 8], reward=2.0) == [(8, 2.0)]  # no turn rewards (an old record): the outcome on the last turn
    with pytest.raises(ConfigError, match=r"^turn_steps expects at least one generated turn to credit, got none\.$"):
        turn_steps([1.0], [])


# ---------------------------------------------------------------- the estimators on hand-computed tensors
MASK = torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0, 0.0]])  # row 0: two turns; row 1: one
STEPS = [[(1, 0.5), (4, 1.0)], [(2, 0.0)]]


def test_ppo_gae_credits_each_turn_with_what_follows_it():
    rewards = turn_token_rewards(STEPS, MASK)
    assert rewards.tolist() == [[0.0, 0.5, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]]
    advantages, returns = gae(rewards, torch.zeros_like(MASK), MASK, gamma=0.9, lam=1.0)
    # Discounted over generated tokens only (column 2 of row 0 is an observation).
    expected = [[0.9 * (0.5 + 0.9 * 0.9), 0.5 + 0.9 * 0.9, 0.0, 0.9, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]]
    torch.testing.assert_close(advantages, torch.tensor(expected))
    torch.testing.assert_close(returns, torch.tensor(expected))
    with pytest.raises(ConfigError, match=r"^Row 0: a turn reward sits at column 2, which is not a generated token of the row\.$"):
        turn_token_rewards([[(2, 1.0)], []], MASK)


def test_grpo_turn_credit_is_deepseekmath_process_supervision():
    # The group's step rewards R = [1, 0, 0]: mean 1/3, sample std sqrt(1/3).
    steps = [[(1, 1.0), (4, 0.0)], [(2, 0.0)]]
    advantages = process_group_advantages(steps, [0, 0], MASK)
    s = math.sqrt(1 / 3) + 1e-6
    hi, lo = (1 - 1 / 3) / s, (0 - 1 / 3) / s
    expected = [[hi + lo, hi + lo, 0.0, lo, lo], [lo, lo, lo, 0.0, 0.0]]  # a token: the steps ending at or after it
    torch.testing.assert_close(advantages, torch.tensor(expected))
    # One step per output (the outcome on the last token) is GRPO's outcome supervision.
    outcome = process_group_advantages([[(4, 1.0)], [(2, 0.0)]], [0, 0], MASK)
    torch.testing.assert_close(outcome, group_advantages(torch.tensor([1.0, 0.0]), [0, 0]).unsqueeze(-1) * MASK)
    with pytest.raises(ConfigError, match=r"^GRPO needs at least 2 samples per question, got 1 for group 0; set n >= 2\.$"):
        process_group_advantages(steps, [0, 1], MASK)


def test_reinforce_pp_turn_credit_whitens_returns_to_go_and_subtracts_the_group_mean_at_the_end():
    rewards = turn_token_rewards(STEPS, MASK)
    returns = torch.tensor([[1.5, 1.5, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    flat = returns[MASK.bool()]
    torch.testing.assert_close(reinforce_pp_turn_advantages(rewards, MASK), (returns - flat.mean()) / (flat.std() + 1e-8) * MASK)
    # Group baseline: the mean episode reward (1.5 + 0) / 2 = 0.75 comes off each row's last token.
    grouped = torch.tensor([[0.75, 0.75, 0.0, 0.25, 0.25], [-0.75, -0.75, -0.75, 0.0, 0.0]])
    flat = grouped[MASK.bool()]
    torch.testing.assert_close(
        reinforce_pp_turn_advantages(rewards, MASK, groups=[0, 0]), (grouped - flat.mean()) / (flat.std() + 1e-8) * MASK
    )
    # One reward per row on its last token, with a KL penalty: the outcome estimator's numbers.
    kl = torch.rand(MASK.shape, generator=torch.Generator().manual_seed(0)) * MASK
    outcome = turn_token_rewards([[(4, 1.0)], [(2, 0.0)]], MASK)
    for groups in (None, [0, 0]):
        torch.testing.assert_close(
            reinforce_pp_turn_advantages(outcome, MASK, kl=kl, kl_coef=0.1, gamma=0.9, groups=groups),
            reinforce_pp_advantages(torch.tensor([1.0, 0.0]), MASK, kl=kl, kl_coef=0.1, gamma=0.9, groups=groups),
        )


def test_credit_is_checked_before_any_model_loads():
    with pytest.raises(UnknownNameError, match=r"^Unknown credit assignment 'turns'\. Did you mean 'turn'\? Expected one of: episode, turn\.$"):
        check_args(Args(credit="turns"))


def test_an_episode_result_records_each_steps_reward_and_old_records_load_without_them():
    fields = dict(
        example_id="q", seed=0, question="?", answers=["a"], prediction=None, reward=0.5, reward_components={}, em=0.0, f1=0.0,
        cover_em=0.0, gen_acc=0.0, num_turns=2, num_searches=0, num_invalid=0, context_tokens=3, generated_tokens=2,
        wall_time=0.0, outcome="truncated",
    )
    result = EpisodeResult(**fields, turn_rewards=[0.25, 0.25])
    assert EpisodeResult.from_dict(result.to_dict()) == result
    assert EpisodeResult.from_dict(fields).turn_rewards == []  # written before the field existed


# ---------------------------------------------------------------- a short run whose recipe pays every turn
class PaysEachTurn(SearchR1EM):
    """Search-R1's EM, plus 0.1 * (the turn's round + 1) at the end of every turn."""

    name = "test_pays_each_turn"

    def turn_reward(self, episode):
        return 0.1 * (episode.turns[-1].round + 1)


@pytest.mark.parametrize("algorithm", ["grpo", "ppo", "reinforce++"])
def test_a_run_with_turn_credit_puts_each_turns_reward_on_that_turns_last_token(tmp_path, monkeypatch, algorithm):
    monkeypatch.setitem(RECIPES, PaysEachTurn.name, PaysEachTurn)
    seen = []
    original = trainer_module.compute_advantages

    def spy(args, scores, groups, mask, fixed, *, steps=None):
        out = original(args, scores, groups, mask, fixed, steps=steps)
        seen.append((steps, mask, out[0]))
        return out

    monkeypatch.setattr(trainer_module, "compute_advantages", spy)
    monkeypatch.setattr(trainer_module, "training_samples", record_samples(trainer_module.training_samples, seen))
    args = Args(
        model=str(tiny_model_folder()), env_options={"corpus_options": SMALL_WORLD, "max_turns": 2}, out=str(tmp_path / "run"),
        total_steps=1, questions_per_step=2, n=2, num_envs=4, max_new_tokens=8, micro_batch_size=2, lr=1e-3, save_every=1,
        progress=False, tensorboard=False, seed=0, threads=1, reward=PaysEachTurn.name, credit="turn", algorithm=algorithm,
    )
    rows = Trainer(args).train()
    assert len(rows) == 1 and math.isfinite(rows[0]["loss"])
    samples, (steps, mask, advantages) = seen
    multi = [i for i, s in enumerate(samples) if len(s.turn_rewards) == 2]
    assert multi, [s.turn_rewards for s in samples]  # episodes of two turns were played
    for i, sample in enumerate(samples):
        ends = turn_end_columns(sample.trajectory)
        # The env paid 0.1 on turn 1 and 0.2 (plus the outcome) on turn 2; each sits on its turn's last token.
        assert sample.turn_rewards[0] == pytest.approx(0.1) and sum(sample.turn_rewards) == pytest.approx(sample.reward)
        assert steps[i] == list(zip(ends, sample.turn_rewards))
        assert all(mask[i, c] == 1 for c in ends)
    if algorithm == "grpo":  # a two-turn episode's first turn is also credited with its own step
        i = multi[0]
        ends = turn_end_columns(samples[i].trajectory)
        assert not torch.equal(advantages[i, ends[0]], advantages[i, ends[1]])


def record_samples(training_samples, seen):
    def wrapped(results, **kwargs):
        samples = training_samples(results, **kwargs)
        seen.append(samples)
        return samples

    return wrapped


def test_trl_gets_the_episode_sum_and_the_turn_rewards_beside_it():
    pytest.importorskip("trl")
    from searchgym.integrations.trl import env_reward, rollout_output

    t = trajectory((1, 2), ("g", (3, 4)), ("o", (5,)), ("g", (6,)))
    fields = dict(
        example_id="q", seed=0, question="?", answers=["a"], prediction="a", reward=1.25, reward_components={"em": 1.0}, em=1.0,
        f1=1.0, cover_em=1.0, gen_acc=1.0, num_turns=2, num_searches=1, num_invalid=0, context_tokens=6, generated_tokens=3,
        wall_time=0.0, outcome="answered", trajectory=t, turn_rewards=[0.25, 1.0],
    )
    out = rollout_output([EpisodeResult(**fields)], eos_id=0)
    assert out["env_turn_rewards"] == [[0.25, 1.0]]
    assert env_reward(["x"], env_reward=out["env_reward"]) == [1.25]  # TRL takes one number: the sum
