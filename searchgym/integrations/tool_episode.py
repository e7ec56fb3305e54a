"""One searchgym episode played through tool calls by another engine's tool loop.

TRL's ``environment_factory`` and verl's tool agent loop run the conversation themselves:
they generate, parse the model's calls, run a tool per call and show its result. The game
is a searchgym env made with ``action_format="tools"``; :class:`ToolEpisode` holds it,
plays each assistant turn the engine hands it (``env.step``), keeps the return, and ends
an episode the engine leaves open (the engine stopped calling: a reply without a call
where the engine does not show it, its completion budget or its turn limit) as the env
ends one at its turn budget: the reward recipe scores the turns played so far, with no
answer (s3: the frozen generator answers from the documents kept so far).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from searchgym.corpora.types import QAExample
from searchgym.envs.access import search_env
from searchgym.error import ConfigError, SearchGymError


@dataclass(frozen=True)
class TurnResult:
    """What one assistant turn got: ``replies`` (the env's messages: one tool message per
    call in order, then a user message for a turn without a call; none when the turn ended
    the episode), the step's ``reward``, how the episode stands after it, and ``message``
    (the assistant message as the env recorded it: the calls it read, with their ids)."""

    replies: list[dict[str, Any]]
    reward: float
    terminated: bool
    truncated: bool
    message: dict[str, Any] | None = None

    @property
    def ended(self) -> bool:
        return self.terminated or self.truncated


class ToolEpisode:
    """The episode of ``env`` (made with ``action_format="tools"``), turn by turn.

    :meth:`start` resets it and returns the first user message's text; :meth:`play` plays
    an assistant message (or raw text the env's tool parser reads); :meth:`finish` returns
    the episode's return (the sum of its step rewards), ending an open episode first.
    """

    def __init__(self, env: Any):
        inner = search_env(env)
        if getattr(inner, "action_format", "tags") != "tools":
            raise ConfigError(
                f"ToolEpisode expects an env made with action_format='tools', got "
                f"action_format={getattr(inner, 'action_format', None)!r}; make it with gym.make(id, action_format='tools')."
            )
        self.env = env
        self.inner = inner
        self.example: QAExample | None = None
        self.rewards: list[float] = []
        self.terminated = self.truncated = self.cut = False
        self.info: dict[str, Any] = {}

    # ------------------------------------------------------------------ play
    def start(self, *, example: QAExample | None = None, example_id: str | None = None) -> str:
        """Reset to ``example`` (or the dataset's ``example_id``); the first user message's text."""
        options: dict[str, Any] = {"example": example} if example is not None else {"example_id": example_id}
        _, self.info = self.env.reset(options=options)
        self.example = self.inner.example
        self.rewards = []
        self.terminated = self.truncated = self.cut = False
        return str(self.info["messages"][-1]["content"])

    @property
    def started(self) -> bool:
        return self.example is not None

    @property
    def ended(self) -> bool:
        return self.terminated or self.truncated or self.cut

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The game's tools as OpenAI function schemas."""
        return self.inner.game.tools.tools

    def play(self, message: Mapping[str, Any] | str) -> TurnResult:
        """Play one assistant turn; what it got back."""
        if not self.started:
            raise SearchGymError("ToolEpisode.play() was called before start(); start the episode first.")
        if self.ended:
            raise SearchGymError("ToolEpisode.play() was called on an episode that has ended.")
        before = len(self.info["messages"])
        _, reward, self.terminated, self.truncated, self.info = self.env.step(message)
        self.rewards.append(float(reward))
        messages = self.info["messages"]
        recorded = dict(messages[before]) if len(messages) > before else None
        return TurnResult([dict(m) for m in messages[before + 1 :]], float(reward), self.terminated, self.truncated, recorded)

    def finish(self) -> float:
        """The episode's return. An episode still open is ended first, once: the recipe
        scores the turns so far with no answer, as at the env's turn budget."""
        if not self.started:
            raise SearchGymError("ToolEpisode.finish() was called before start(); there is no episode to score.")
        if not self.ended:
            result = self.inner.recipe.score(self.inner.episode())
            self.rewards.append(float(result.total))
            self.info = {**self.info, "reward_components": dict(result.components), "prediction": result.prediction}
            self.cut = True
        return float(sum(self.rewards))

    # ------------------------------------------------------------------ records
    def summary(self) -> dict[str, Any]:
        """The episode as it stands: return so far, how it ended, counts, components."""
        info = self.info
        return {
            "example_id": self.example.id if self.example is not None else None,
            "reward": float(sum(self.rewards)),
            "ended": self.ended,
            "answered": self.terminated,
            "cut": self.cut,
            "num_turns": len(self.rewards) - (1 if self.cut else 0),
            "num_searches": int(info.get("num_searches", 0)),
            "num_invalid": int(info.get("num_invalid", 0)),
            "prediction": info.get("prediction"),
            "reward_components": dict(info.get("reward_components") or {}),
        }
