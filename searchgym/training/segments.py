"""Episodes whose context was rewritten: one batch row per conversation, one advantage per episode.

An episode played under a context policy (``SearchEnv(context="archive" | "summarize")``) is
several token records (:meth:`~searchgym.agents.trajectory.Trajectory.records`), each exact
against a fresh render of its own conversation. The update trains each record as a row of
its own; what an episode earned reaches all of its rows:

- episode credit (GRPO, REINFORCE++, PPO): the advantage is computed once per episode (a
  group's statistics count each episode once, however many rows it has) and every row gets
  its episode's score on its last generated token (:func:`row_values`);
- per-turn credit (``credit="turn"``): each turn's reward sits on the last token of that turn
  in the row that holds it, and a row that is not its episode's last also gets, on its last
  generated token, what the episode's later rows earned (:func:`carried_steps`), so that
  every token is credited with what follows it in the episode, as in one long record. GRPO's
  process supervision normalizes the episode's own step rewards, never the carried sums.

With ``gamma < 1`` the discount restarts in each row (a carried sum is not discounted by the
tokens of the later rows). An episode with one record is one row, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchgym.training.advantages import turn_end_columns, turn_steps


def records_of(trajectory: Any) -> list[Any]:
    """The token records of an episode (one, itself, for a record without ``records``)."""
    records = getattr(trajectory, "records", None)
    return records() if callable(records) else [trajectory]


def segment_rows(samples: Sequence[Any]) -> tuple[list[Any], list[int] | None]:
    """The batch rows of ``samples`` (each record of each episode, in order) and each row's
    episode index; None for the index when every episode is one row (the rows are the samples)."""
    rows, episodes = [], []
    for i, s in enumerate(samples):
        for record in records_of(s.trajectory):
            if record.num_generated > 0:  # a record with nothing sampled (ended at once) trains nothing
                rows.append(record)
                episodes.append(i)
    if len(rows) == len(samples) and episodes == list(range(len(samples))):
        return rows, None
    return rows, episodes


def row_values(values: Any, episodes: Sequence[int] | None) -> Any:
    """Per-episode ``values`` [E] as per-row values [B] (unchanged when ``episodes`` is None)."""
    import torch

    return values if episodes is None else values[torch.as_tensor(list(episodes), dtype=torch.long)]


def segment_steps(samples: Sequence[Any], episodes: Sequence[int], *, max_length: int | None = None) -> list[list[tuple[int, float]]]:
    """Each row's own ``(column, reward)`` turn steps (``credit="turn"``), no carry yet: an
    episode's ``turn_rewards`` split over its rows by their generated turns in order (one env
    step per generated turn: a summary turn is a step too), the rest of its ``reward`` on its
    last row's last turn (see :func:`~searchgym.training.advantages.turn_steps`)."""
    out: list[list[tuple[int, float]]] = []
    played = set(episodes)
    for i, s in enumerate(samples):
        if i not in played:
            continue
        records = [r for r in records_of(s.trajectory) if r.num_generated > 0]
        rewards = [float(r) for r in (getattr(s, "turn_rewards", ()) or ())]
        start = 0
        for k, record in enumerate(records):
            ends = turn_end_columns(record, max_length=max_length)
            last = k == len(records) - 1
            part = rewards[start:] if last else rewards[start : start + len(ends)]
            start += len(ends)
            if last:
                out.append(turn_steps(part, ends, reward=float(s.reward) - sum(rewards[: start - len(ends)])))
            else:
                out.append(list(zip(ends, part)))
    return out


def carried_steps(steps: Sequence[Sequence[tuple[int, float]]], episodes: Sequence[int]) -> list[list[tuple[int, float]]]:
    """``steps`` with, on the last step's column of each row that is not its episode's last,
    the sum of the rewards of that episode's later rows."""
    out = [list(row) for row in steps]
    later: dict[int, float] = {}
    for r in reversed(range(len(steps))):
        episode = episodes[r]
        if episode in later and out[r]:
            column = max(c for c, _ in out[r])
            out[r].append((column, later[episode]))
        later[episode] = later.get(episode, 0.0) + sum(v for _, v in steps[r])
    return out


def episode_totals(steps: Sequence[Sequence[tuple[int, float]]], episodes: Sequence[int]) -> dict[int, float]:
    """What each episode earned: the sum of its rows' own step rewards."""
    totals: dict[int, float] = {}
    for row, episode in zip(steps, episodes):
        totals[episode] = totals.get(episode, 0.0) + sum(v for _, v in row)
    return totals
