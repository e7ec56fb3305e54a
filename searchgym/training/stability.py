"""What a step's rollout says about the run's health: reward spread, and the known failures
of RL on search agents, detected per step (a metrics.csv column each, a warning once a run).

Plain Python (no torch): every function reads :class:`~searchgym.agents.EpisodeResult`-like
objects (``reward``, ``num_turns``, ``num_invalid``, ``generated_tokens``, and where present
``turns`` and ``trajectory``); a rollout is ``n`` consecutive episodes per question.

- :func:`reward_spread`: ``group_reward_std`` (the mean over the step's questions of the
  sample std of their ``n`` rewards) and ``equal_reward_groups`` (the share of questions
  whose rewards are all equal: GRPO's advantages are 0 there, and they teach nothing).
- :func:`empty_turns`: the share of turns whose text is blank (collapse to empty output).
- :func:`repeated_output`: the share of completions that repeat themselves (one
  ``REPEAT_NGRAM``-gram of their generated ids ``REPEAT_TIMES`` times or more) or equal
  another completion of their group, id for id.
- :func:`invalid_turns`: the malformed turns' share, ``sum(num_invalid) / sum(num_turns)``.
- :class:`StabilityMonitor` keeps the lengths and invalid shares of past steps: it flags
  lengths that grow without end and format drift, and warns once per kind.

The options that prevent them (``Args.length_penalty``, ``Args.format_gate``, the cap
``Args.max_new_tokens``) are applied by :func:`shape_rewards`.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: A completion that holds one n-gram of this many generated ids ...
REPEAT_NGRAM = 8
#: ... this many times or more repeats itself.
REPEAT_TIMES = 4
#: Steps of the running means (length growth, format drift); lengths must also rise this many steps in a row.
WINDOW = 5
#: A step's mean generated tokens per episode over the mean of the previous WINDOW steps, at or past which growth is flagged.
LENGTH_RATIO = 1.25
#: Shares of empty turns and of repeated completions at or past which the trainer warns.
EMPTY_WARN = 0.5
REPEAT_WARN = 0.5
#: Format drift: the invalid-turn share at or past this, and this much above its running mean.
INVALID_WARN = 0.2
INVALID_RISE = 0.05

#: The columns this module adds to metrics.csv, in order.
COLUMNS = (
    "group_reward_std", "equal_reward_groups", "empty_turns", "repeated_output", "invalid_turns",
    "length_ratio", "length_growing", "format_drift",
)


# ---------------------------------------------------------------------------- reward shaping
def shape_rewards(results: Sequence[Any], *, length_penalty: float = 0.0, length_penalty_from: int = 0, format_gate: bool = False) -> int:
    """Apply the stability options to each result's ``reward`` in place; the number changed.

    ``format_gate``: an episode with a malformed turn (``num_invalid > 0``) earns no positive
    reward: ``min(reward, 0)``. ``length_penalty``: minus ``length_penalty`` per generated token
    past ``length_penalty_from`` (the episode's ``generated_tokens``, every turn's)."""
    changed = 0
    for r in results:
        reward = float(r.reward)
        if format_gate and int(getattr(r, "num_invalid", 0) or 0) > 0:
            reward = min(reward, 0.0)
        if length_penalty:
            reward -= length_penalty * max(0, int(getattr(r, "generated_tokens", 0) or 0) - length_penalty_from)
        if reward != r.reward:
            r.reward = reward
            changed += 1
    return changed


# ---------------------------------------------------------------------------- per-step measures
def groups_of(results: Sequence[Any], n: int) -> list[list[Any]]:
    """The rollout's questions: ``n`` consecutive results each."""
    return [list(results[i : i + n]) for i in range(0, len(results), n)]


def reward_spread(results: Sequence[Any], n: int) -> dict[str, float]:
    """``group_reward_std`` and ``equal_reward_groups`` (see the module docstring); a group of
    one has std 0 and counts as equal."""
    groups = groups_of(results, n)
    if not groups:
        return {"group_reward_std": 0.0, "equal_reward_groups": 0.0}
    stds = [statistics.stdev([float(r.reward) for r in g]) if len(g) > 1 else 0.0 for g in groups]
    equal = [len({float(r.reward) for r in g}) == 1 for g in groups]
    return {"group_reward_std": sum(stds) / len(stds), "equal_reward_groups": sum(equal) / len(equal)}


def turn_texts(result: Any) -> list[str] | None:
    """The text of each of the episode's turns (``turns``' entries with a ``text``), or None
    when the result keeps no turns."""
    turns = getattr(result, "turns", None)
    if not isinstance(turns, list):
        return None
    return [str(t.get("text", "")) for t in turns if isinstance(t, Mapping) and "text" in t and "prompt" not in t]


def generated_ids(result: Any) -> list[int] | None:
    """Every id the policy generated in the episode, in order (all its records), or None without a trajectory."""
    t = getattr(result, "trajectory", None)
    if t is None:
        return None
    records = t.records() if callable(getattr(t, "records", None)) else [t]
    return [tok for rec in records for s in rec.segments if s.generated for tok in s.token_ids]


def empty_turns(results: Iterable[Any]) -> float:
    """The share of the rollout's turns whose text is blank (whitespace only). A result
    without ``turns`` counts its generated segments, empty ones as empty turns."""
    empty = total = 0
    for r in results:
        texts = turn_texts(r)
        if texts is not None:
            empty += sum(not t.strip() for t in texts)
            total += len(texts)
            continue
        t = getattr(r, "trajectory", None)
        if t is not None:
            records = t.records() if callable(getattr(t, "records", None)) else [t]
            segments = [s for rec in records for s in rec.segments if s.generated]
            empty += sum(len(s.token_ids) == 0 for s in segments)
            total += len(segments)
    return empty / total if total else 0.0


def repeats_itself(ids: Sequence[Any], ngram: int = REPEAT_NGRAM, times: int = REPEAT_TIMES) -> bool:
    """Whether one ``ngram``-gram of ``ids`` occurs ``times`` times or more (overlaps count)."""
    if len(ids) < ngram:
        return False
    counts = Counter(tuple(ids[i : i + ngram]) for i in range(len(ids) - ngram + 1))
    return max(counts.values()) >= times


def completion_of(result: Any) -> tuple[Any, ...] | None:
    """What the policy wrote in an episode: its generated ids, else its turns' texts."""
    ids = generated_ids(result)
    if ids is not None:
        return tuple(ids)
    texts = turn_texts(result)
    return None if texts is None else tuple(texts)


def repeated_output(results: Sequence[Any], n: int) -> float:
    """The share of completions that repeat themselves or equal another of their group (see
    the module docstring). Without a trajectory, the n-gram check reads the turns' words."""
    flagged = total = 0
    for group in groups_of(results, n):
        completions = [completion_of(r) for r in group]
        seen = Counter(c for c in completions if c is not None)
        for r, c in zip(group, completions):
            if c is None:
                continue
            total += 1
            units = list(c) if generated_ids(r) is not None else " ".join(c).split()
            if seen[c] > 1 or repeats_itself(units):
                flagged += 1
    return flagged / total if total else 0.0


def invalid_turns(results: Iterable[Any]) -> float:
    """``sum(num_invalid) / sum(num_turns)`` over the rollout (0 without turns)."""
    results = list(results)
    turns = sum(int(getattr(r, "num_turns", 0) or 0) for r in results)
    invalid = sum(int(getattr(r, "num_invalid", 0) or 0) for r in results)
    return invalid / turns if turns else 0.0


def rollout_diagnostics(results: Sequence[Any], n: int) -> dict[str, float]:
    """The per-rollout columns: reward spread, empty turns, repeated output, invalid turns."""
    return {
        **reward_spread(results, n),
        "empty_turns": empty_turns(results),
        "repeated_output": repeated_output(results, n),
        "invalid_turns": invalid_turns(results),
    }


# ---------------------------------------------------------------------------- across steps
class StabilityMonitor:
    """Flags, step after step, what one step cannot show, and warns once per kind.

    :meth:`check` takes a step's metrics (``generated_tokens``: mean generated tokens per
    episode; ``empty_turns``, ``repeated_output``, ``invalid_turns``) and returns the
    columns ``length_ratio`` (this step's length over the mean of the previous ``window``
    steps; None before there are ``window``), ``length_growing`` (1 when the length rose
    ``window`` steps in a row and ``length_ratio >= length_ratio_limit``) and
    ``format_drift`` (1 when ``invalid_turns >= invalid_warn`` and it is ``invalid_rise``
    above the mean of the previous ``window`` steps), with the warnings to print (each kind
    once: ``empty``, ``repeated``, ``length``, ``format``)."""

    def __init__(self, *, window: int = WINDOW, length_ratio_limit: float = LENGTH_RATIO, empty_warn: float = EMPTY_WARN,
                 repeat_warn: float = REPEAT_WARN, invalid_warn: float = INVALID_WARN, invalid_rise: float = INVALID_RISE):
        self.window, self.length_ratio_limit = window, length_ratio_limit
        self.empty_warn, self.repeat_warn, self.invalid_warn, self.invalid_rise = empty_warn, repeat_warn, invalid_warn, invalid_rise
        self.lengths: list[float] = []
        self.invalid: list[float] = []
        self.said: set[str] = set()

    def seed(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Take the history of a resumed run's metrics rows (those of played steps)."""
        for row in rows:
            if isinstance(row.get("generated_tokens"), (int, float)):
                self.lengths.append(float(row["generated_tokens"]))
                invalid = row.get("invalid_turns")
                self.invalid.append(float(invalid) if isinstance(invalid, (int, float)) else 0.0)

    def check(self, step: int, stats: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        k = self.window
        length = float(stats.get("generated_tokens") or 0.0)
        invalid = float(stats.get("invalid_turns") or 0.0)
        ratio = None
        growing = drift = 0
        if len(self.lengths) >= k:
            past = self.lengths[-k:]
            mean = sum(past) / k
            ratio = length / mean if mean > 0 else (1.0 if length == 0 else float("inf"))
            rising = all(b > a for a, b in zip([*past, length], [*past, length][1:]))
            growing = int(rising and ratio >= self.length_ratio_limit)
        if len(self.invalid) >= k:
            drift = int(invalid >= self.invalid_warn and invalid >= sum(self.invalid[-k:]) / k + self.invalid_rise)
        self.lengths.append(length)
        self.invalid.append(invalid)
        warnings = []
        empty, repeated = float(stats.get("empty_turns") or 0.0), float(stats.get("repeated_output") or 0.0)
        found = (
            ("empty", empty >= self.empty_warn,
             f"{empty:.0%} of the rollout's turns are empty (collapse to empty output); a format reward or --format-gate "
             "makes an empty turn cost"),
            ("repeated", repeated >= self.repeat_warn,
             f"{repeated:.0%} of the completions repeat an {REPEAT_NGRAM}-gram {REPEAT_TIMES}+ times or equal another of "
             "their group (repeated output); an entropy bonus (--entropy-coef), a higher --temperature or --length-penalty help"),
            ("length", bool(growing),
             f"the mean generated length ({length:.1f} tokens an episode) rose {k} steps in a row to {ratio or 0:.2f}x its "
             f"mean over the last {k} (lengths growing without end); set --length-penalty COEF --length-penalty-from N, or "
             "lower --max-new-tokens (the cap)"),
            ("format", bool(drift),
             f"{invalid:.0%} of the turns are malformed, rising (format drift); --format-gate gives an episode with a "
             "malformed turn no positive reward"),
        )
        for kind, hit, text in found:
            if hit and kind not in self.said:
                self.said.add(kind)
                warnings.append(f"warning: step {step}: {text} (said once a run).")
        return {"length_ratio": ratio, "length_growing": growing, "format_drift": drift}, warnings
