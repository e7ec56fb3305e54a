"""Advantage estimators: GAE (PPO), group-normalized (GRPO), REINFORCE++.

Rewards of an episode sit on its last generated token (outcome rewards); ``mask`` marks
generated tokens. Environment tokens are not actions: GAE skips them, so the value of a
generated token bootstraps from the next *generated* token.

Per-turn credit (``Args.credit="turn"``): each turn's reward sits on the last generated
token of that turn instead (:func:`turn_end_columns`, :func:`turn_steps`), so a turn's
tokens are credited with what that turn and the later ones earned:
:func:`turn_token_rewards` for PPO's GAE and REINFORCE++ (:func:`reinforce_pp_turn_advantages`),
:func:`process_group_advantages` for GRPO (DeepSeekMath's process supervision).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from searchgym.error import ConfigError


def last_token_rewards(scores: Any, mask: Any) -> Any:
    """[B] episode scores placed on each sequence's last generated token: [B, T]."""
    import torch

    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)  # [B, T]
    last = torch.where(mask.bool(), positions, -1).max(dim=1).values  # [B]
    if (last < 0).any():
        row = int((last < 0).nonzero()[0])
        raise ConfigError(f"Sequence {row} has no generated token (its loss mask is all 0); nothing can be trained on it.")
    rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)  # [B, T]
    rewards[torch.arange(mask.shape[0]), last] = scores.float()
    return rewards


def gae(rewards: Any, values: Any, mask: Any, *, gamma: float = 1.0, lam: float = 1.0) -> tuple[Any, Any]:
    """Generalised advantage estimation over the generated tokens of each sequence.

    Returns ``(advantages, returns)`` [B, T], zero where ``mask`` is 0.
    """
    import torch

    B, T = rewards.shape
    advantages = torch.zeros_like(rewards, dtype=torch.float32)  # [B, T]
    next_value = torch.zeros(B, dtype=torch.float32, device=rewards.device)  # [B]
    running = torch.zeros(B, dtype=torch.float32, device=rewards.device)  # [B]
    m = mask.float()  # [B, T]
    for t in reversed(range(T)):
        delta = rewards[:, t] + gamma * next_value - values[:, t]  # [B]
        step = delta + gamma * lam * running  # [B]
        # At an environment token nothing changes: the next generated token's value and
        # advantage carry over it.
        running = m[:, t] * step + (1 - m[:, t]) * running
        next_value = m[:, t] * values[:, t] + (1 - m[:, t]) * next_value
        advantages[:, t] = m[:, t] * step
    returns = (advantages + values.float()) * m  # [B, T]
    return advantages, returns


def group_advantages(scores: Any, groups: Sequence[Any], *, normalize_std: bool = True, eps: float = 1e-6) -> Any:
    """GRPO: each score minus its group's mean (divided by the group's std), [B].

    ``groups`` gives each sequence's group (e.g. its question id); every group needs at
    least two sequences.
    """
    import torch

    if len(groups) != len(scores):
        raise ConfigError(f"group_advantages expects one group per score, got {len(groups)} groups for {len(scores)} scores.")
    scores = scores.float()
    out = torch.zeros_like(scores)  # [B]
    for g in dict.fromkeys(groups):
        idx = torch.tensor([i for i, x in enumerate(groups) if x == g], device=scores.device)
        if len(idx) < 2:
            raise ConfigError(f"GRPO needs at least 2 samples per question, got 1 for group {g!r}; set n >= 2.")
        s = scores[idx]
        centered = s - s.mean()
        out[idx] = centered / (s.std() + eps) if normalize_std else centered
    return out


def reinforce_pp_advantages(
    scores: Any, mask: Any, *, kl: Any = None, kl_coef: float = 0.0, gamma: float = 1.0, groups: Sequence[Any] | None = None, eps: float = 1e-8
) -> Any:
    """REINFORCE++: token returns of the outcome reward minus a per-token KL penalty,
    whitened over every generated token of the batch [B, T].

    With ``groups`` the group's mean score is subtracted first (a group baseline); without,
    whitening is the batch baseline. A batch of one generated token has no spread to
    whiten by: its return is its advantage.
    """
    import torch

    scores = scores.float()
    if groups is not None:
        scores = group_advantages(scores, groups, normalize_std=False)
    rewards = last_token_rewards(scores, mask)  # [B, T]
    return _whitened_returns(rewards, mask, kl=kl, kl_coef=kl_coef, gamma=gamma, eps=eps)


def _whitened_returns(rewards: Any, mask: Any, *, kl: Any, kl_coef: float, gamma: float, eps: float) -> Any:
    """REINFORCE++'s second half: token rewards [B, T] minus the per-token KL penalty,
    discounted returns-to-go over generated tokens, whitened over the batch's generated tokens."""
    import torch

    if kl is not None:
        rewards = rewards - kl_coef * kl.float() * mask.float()
    returns = torch.zeros_like(rewards)  # [B, T]
    running = torch.zeros(rewards.shape[0], device=rewards.device)  # [B]
    m = mask.float()
    for t in reversed(range(rewards.shape[1])):
        running = m[:, t] * (rewards[:, t] + gamma * running) + (1 - m[:, t]) * running
        returns[:, t] = running * m[:, t]
    flat = returns[m.bool()]
    if flat.numel() < 2:  # no spread to whiten by (one generated token): the returns as they are
        return returns * m
    return ((returns - flat.mean()) / (flat.std() + eps)) * m


# ---------------------------------------------------------------------------- per-turn credit
def turn_end_columns(trajectory: Any, *, max_length: int | None = None) -> list[int]:
    """The column, in :func:`~searchgym.training.batch.collate`'s ``[B, L-1]`` target layout,
    of the last generated token of each turn (each generated segment) of ``trajectory``.

    A turn with no token of its own (an empty generation) or whose tokens ``max_length`` cut
    off ends at the last trained token before its end, so its reward still reaches the
    tokens that led to it (a turn before any trained token: the row's first trained token).
    ``max_length`` is collate's; a row with no generated token raises, as collate does.
    """
    prompt = len(trajectory.prompt_ids)
    limit = None if max_length is None else max_length - 2  # the last target column a cut row keeps
    trained: list[int] = []  # the columns of the generated tokens collate keeps
    ends: list[int] = []  # each turn's own end column, before the cut
    offset = 0
    for segment in trajectory.segments:
        if segment.generated:
            trained.extend(c for c in range(prompt + offset - 1, prompt + offset + len(segment) - 1) if c >= 0 and (limit is None or c <= limit))
            ends.append(prompt + offset + len(segment) - 2)  # an empty turn: the column before it
        offset += len(segment)
    if not trained:
        raise ConfigError("turn_end_columns got a trajectory with no generated token to train on (its loss mask is all 0); drop it first.")
    out = []
    for end in ends:
        kept = bisect.bisect_right(trained, end)  # trained tokens at or before the turn's end
        out.append(trained[kept - 1] if kept else trained[0])
    return out


def turn_steps(turn_rewards: Sequence[float], ends: Sequence[int], *, reward: float | None = None) -> list[tuple[int, float]]:
    """``(column, reward)`` of each rewarded turn: turn ``j``'s reward (the env's reward of
    step ``j``, ``EpisodeResult.turn_rewards``) at ``ends[j]`` (:func:`turn_end_columns`).

    One generated turn is one env step, so the two lists match. Where they do not, nothing is
    lost: steps past the last generated turn add to the last turn, and a generated turn with
    no step (the episode stopped before stepping it) earns nothing. ``reward``, the episode's
    reward as trained, may differ from the sum of ``turn_rewards`` (a trainer hook's group
    bonus, a record without turn rewards): the difference is credited to the last step.
    """
    if not ends:
        raise ConfigError("turn_steps expects at least one generated turn to credit, got none.")
    rewards = [float(r) for r in turn_rewards]
    if len(rewards) > len(ends):
        rewards = rewards[: len(ends) - 1] + [sum(rewards[len(ends) - 1 :])]
    steps = list(zip(ends, rewards))
    if reward is not None:
        extra = float(reward) - sum(rewards)
        if not steps:
            steps = [(ends[-1], float(reward))]
        elif extra != 0.0:
            column, last = steps[-1]
            steps[-1] = (column, last + extra)
    if not steps:
        raise ConfigError("turn_steps got no turn reward and no episode reward; pass reward= or the env's turn rewards.")
    return steps


def turn_token_rewards(steps: Sequence[Sequence[tuple[int, float]]], mask: Any) -> Any:
    """Each row's turn rewards (``steps[b]``: :func:`turn_steps`) placed on their columns: [B, T].

    With one step per row at its last generated token this is :func:`last_token_rewards`.
    """
    import torch

    if len(steps) != mask.shape[0]:
        raise ConfigError(f"turn_token_rewards expects one list of steps per row, got {len(steps)} for {mask.shape[0]} rows.")
    rewards = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)  # [B, T]
    for b, row in enumerate(steps):
        for column, reward in row:
            if not 0 <= column < mask.shape[1] or not mask[b, column]:
                raise ConfigError(f"Row {b}: a turn reward sits at column {column}, which is not a generated token of the row.")
            rewards[b, column] += float(reward)
    return rewards


def process_group_advantages(steps: Sequence[Sequence[tuple[int, float]]], groups: Sequence[Any], mask: Any, *, eps: float = 1e-6) -> Any:
    """GRPO with per-turn credit: DeepSeekMath's process supervision (Shao et al. 2024,
    arXiv 2402.03300, §4.1.3 "Process Supervision RL with GRPO"), turns as the steps, [B, T].

    Every step reward of a group's outputs is normalized by the mean and std of all the step
    rewards of that group, ``r~ = (r - mean(R)) / std(R)``; a token's advantage is the sum of
    the normalized rewards of the steps that end at or after it. With one step per output (the
    outcome) this is :func:`group_advantages` on every token. std is the sample std, plus
    ``eps``, as :func:`group_advantages` computes it.
    """
    import torch

    if len(groups) != len(steps) or len(steps) != mask.shape[0]:
        raise ConfigError(
            f"process_group_advantages expects one group and one list of steps per row, got {len(groups)} groups and "
            f"{len(steps)} step lists for {mask.shape[0]} rows."
        )
    normalized: list[list[tuple[int, float]]] = [[] for _ in steps]
    for g in dict.fromkeys(groups):
        rows = [i for i, x in enumerate(groups) if x == g]
        if len(rows) < 2:
            raise ConfigError(f"GRPO needs at least 2 samples per question, got 1 for group {g!r}; set n >= 2.")
        rewards = torch.tensor([r for i in rows for _, r in steps[i]], dtype=torch.float32)  # [steps of the group]
        mean, std = rewards.mean(), rewards.std()
        for i in rows:
            normalized[i] = [(c, float((r - mean) / (std + eps))) for c, r in steps[i]]
    placed = turn_token_rewards(normalized, mask)  # [B, T]
    # The sum over the steps ending at or after each token: a reversed cumulative sum.
    return placed.flip(1).cumsum(1).flip(1) * mask.float()  # [B, T]


def reinforce_pp_turn_advantages(
    rewards: Any, mask: Any, *, kl: Any = None, kl_coef: float = 0.0, gamma: float = 1.0, groups: Sequence[Any] | None = None, eps: float = 1e-8
) -> Any:
    """REINFORCE++ (Hu 2025, arXiv 2501.03262, §3) with per-turn credit, [B, T]: the token
    rewards ``rewards`` [B, T] (:func:`turn_token_rewards`) minus the per-token KL penalty,
    discounted returns-to-go, whitened over every generated token of the batch, as
    :func:`reinforce_pp_advantages` does with the outcome on the last token.

    With ``groups`` the group's mean episode reward (the sum of each row's token rewards) is
    subtracted at each row's last generated token, as OpenRLHF's ``reinforce_baseline``
    subtracts it from the outcome reward: with ``gamma=1`` every token's return-to-go is then
    measured against its question's mean. With one reward per row on its last token this is
    :func:`reinforce_pp_advantages`.
    """
    rewards = rewards.float() * mask.float()  # [B, T]
    if groups is not None:
        totals = rewards.sum(dim=1)  # [B]
        baseline = totals - group_advantages(totals, groups, normalize_std=False)  # [B] the group's mean
        rewards = rewards - last_token_rewards(baseline, mask)
    return _whitened_returns(rewards, mask, kl=kl, kl_coef=kl_coef, gamma=gamma, eps=eps)
