"""The agent interface: batched, text in, text out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.error import ConfigError
from searchgym.lm.base import Generation


class Agent(ABC):
    """Plays one or more episodes at once.

    ``act(observations, infos)`` receives, for every live episode, the observation and
    ``info`` the env returned last (from ``reset`` on the first turn) and returns one turn
    of text per episode. Agents that keep per-episode state key it by ``info["slot"]``
    (set by the vectorized driver, :func:`searchgym.agents.driver.run_episodes`; the
    position in the batch when absent) and reset it when ``info["turn"] == 0``.

    Agents that generate with a language model implement :meth:`act_with_generations`,
    which returns each turn's :class:`~searchgym.lm.base.Generation` beside its text; the
    drivers call it to count generated tokens and to flag turns whose prompt no longer
    fit the model. Their ``act`` returns its texts.
    """

    name: str = "agent"
    #: The env's ``action_format`` this agent plays: ``"tags"`` (the protocol's grammar, as
    #: text) or ``"tools"`` (native tool calls); ``searchgym bench`` makes a run's env so.
    action_format: str = "tags"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The drivers call act_with_generations: an act overridden below a class that
        # implements act_with_generations would never be called by them.
        if "act" in cls.__dict__ and "act_with_generations" not in cls.__dict__:
            owner = next(c for c in cls.__mro__[1:] if "act_with_generations" in c.__dict__)
            if owner is not Agent:
                raise ConfigError(
                    f"{cls.__name__} overrides act but inherits act_with_generations from {owner.__name__}, which the "
                    f"drivers call instead of act; override act_with_generations(observations, infos) -> "
                    f"(texts, generations) and let act return its texts."
                )

    @abstractmethod
    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[str]:
        """One action (turn text) per observation."""

    def act_with_generations(
        self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]
    ) -> tuple[list[str], list[Generation | None]]:
        """``act``'s texts and, aligned with them, the :class:`Generation` each came from
        (``None`` where no model ran): what the drivers call.

        This default is for agents without a model: ``act``'s texts and ``None`` for every
        episode. Agents that generate override it to return their generations (token ids,
        logprobs, finish reason), so the drivers count their tokens and flag turns whose
        prompt no longer fit the model; each call returns its own, so one agent may be
        called from several threads at once."""
        return self.act(observations, infos), [None] * len(observations)

    def _check_batch(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> None:
        """``act`` got one info per observation."""
        if len(observations) != len(infos):
            raise ConfigError(
                f"{type(self).__name__}.act expects one info per observation, got {len(infos)} infos for {len(observations)} observations."
            )

    def end_episode(self, slot: int) -> Any:
        """Forget the episode in ``slot`` (it ended) and return its token record, if the
        agent keeps one (LM agents return a :class:`~searchgym.agents.trajectory.Trajectory`)."""
        return None

    def observe_end(self, slot: int, info: Mapping[str, Any]) -> None:
        """The last ``info`` of the episode in ``slot``, which ended in the env; the drivers
        call it before :meth:`end_episode`. LM agents playing through tool calls check their
        record's final turn against it (``Trajectory.render_mismatch``)."""

    def episode_error(self, slot: int) -> str | None:
        """Why the episode in ``slot`` could not be played (its turn's generation is
        :data:`FAILED`), or None. The drivers end that episode alone, with outcome ``"error"``."""
        return None


#: The generation an agent returns for an episode it could not play (its record failed):
#: the drivers end that episode with outcome ``"error"`` and ``Agent.episode_error``'s text.
FAILED = Generation("", (), (), "error")


def turn_seed(seed: int, info: Mapping[str, Any], *fallback: object) -> int:
    """The sampling seed of one episode's turn.

    Under a driver (``info`` with ``episode_seed`` and ``example_id``) it is derived from
    ``seed``, the info's ``role``, the question, the episode's seed and the turn, so an
    episode draws the same tokens however many others are decoded beside it and however
    the run was interrupted. Otherwise from ``seed`` and ``fallback`` (e.g. the call's
    number and the position in it)."""
    from searchgym.lm.base import derive_seed

    if "episode_seed" in info and "example_id" in info:
        return derive_seed(seed, info.get("role"), info["example_id"], info["episode_seed"], info.get("turn", 0))
    return derive_seed(seed, *fallback)


def play_episode(env: Any, agent: Agent, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[float, dict[str, Any]]:
    """Play one episode of ``env`` with ``agent``; the summed reward and the last ``info``."""
    observation, info = env.reset(seed=seed, options=options)
    total = 0.0
    while True:
        (action,) = agent.act([observation], [info])
        observation, reward, terminated, truncated, info = env.step(action)
        total += reward
        if terminated or truncated:
            agent.observe_end(0, info)
            agent.end_episode(0)
            return total, info
