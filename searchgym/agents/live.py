"""What both drivers share: the task, the live episode and the checks of a policy's turns.

:func:`searchgym.agents.driver.drive` (rounds) and
:func:`searchgym.agents.async_driver.drive_async` play :class:`LiveEpisode` objects made from
:class:`Task` objects; both check what a policy returns with :func:`check_played` and record
an error inside one episode with :func:`describe_error`.
"""

from __future__ import annotations

import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.agents.base import Agent
from searchgym.envs.components.model_calls import Play
from searchgym.error import ConfigError
from searchgym.lm.base import Generation


@dataclass(frozen=True)
class Task:
    """One episode to play: a question of the env's dataset and a seed for the env's reset."""

    example_id: str
    seed: int | None = None


class LiveEpisode(ABC):
    """A running episode as the drivers see it.

    A subclass resets its env when it is created and says whose turn it is, how a turn is
    played and what the episode's result is. The driver keeps the counts every kind of
    episode shares: tokens generated per role, flags, and the episode's share of the wall
    time of the rounds it was live in.
    """

    def __init__(self, task: Task, roles: Sequence[str]):
        self.task = task
        self.generated = dict.fromkeys(roles, 0)
        self.flags: list[str] = []
        self.wall = 0.0

    def begin(self) -> Play[None]:
        """Reset the episode's env as a play, whose searches (s3's first retrieval) the driver
        batches with the other episodes starting in the same round. Default: nothing to do
        (the subclass reset its env when it was created)."""
        yield from ()

    @abstractmethod
    def turn(self) -> tuple[str, str, dict[str, Any]]:
        """The role whose turn it is (a key of the policies), what it reads and its info."""

    @abstractmethod
    def play(self, action: str) -> Play[bool]:
        """Play ``action`` in the env as a play (:func:`searchgym.envs.env_play`), whose
        model calls the driver batches with the other episodes'; True when the episode ended."""

    @abstractmethod
    def result(self, outcome: str | None, error: str | None, trajectories: Mapping[str, Any]) -> Any:
        """The episode's result. ``outcome`` is ``None`` when the episode ended in the env,
        else why it was abandoned (``prompt_too_long``, ``backend_error``, ``error``) and
        ``error`` says what happened. ``trajectories`` holds each role's token record
        (``Agent.end_episode``; ``None`` for agents that keep none)."""

    def final_info(self, role: str) -> Mapping[str, Any] | None:
        """``role``'s last info of an episode that ended in the env (handed to
        ``Agent.observe_end``); None where the subclass keeps none."""
        return None

    def flag(self, name: str) -> None:
        if name not in self.flags:
            self.flags.append(name)

    def count(self, role: str, generation: Any) -> bool:
        """Count ``role``'s generation of this turn (``None``: no model ran); False when its
        prompt no longer fit the model, so nothing was generated."""
        if generation is None:
            return True
        # A chat-completions reply carries no token ids: the server's count stands for them
        # (searchgym.lm.replies.ChatReply.completion_tokens).
        self.generated[role] += len(generation.token_ids) or int(getattr(generation, "completion_tokens", None) or 0)
        if generation.finish_reason == "prompt_too_long":
            return False
        if generation.finish_reason == "length":
            self.flag("length")
        if not generation.text.strip():
            self.flag("empty_generation")
        return True


def observe_end(policies: Mapping[str, Agent], episode: LiveEpisode, seat: Callable[[str], int]) -> None:
    """Hand each role's last info of an episode that ended in the env to its agent
    (``Agent.observe_end``: LM agents check the final turn of their record)."""
    for role, agent in policies.items():
        info = episode.final_info(role)
        if info is not None:
            agent.observe_end(seat(role), info)


def check_actions(agent: Agent, actions: Any, expected: int) -> None:
    """``agent.act`` returned one turn of text per observation."""
    if isinstance(actions, str) or not isinstance(actions, Sequence):
        got = f"a {type(actions).__name__}"
    elif len(actions) != expected:
        got = f"{len(actions)} actions"
    else:
        return
    raise ConfigError(f"{type(agent).__name__}.act returned {got} for {expected} observations; it must return a list of one turn per observation, in order.")


def check_played(agent: Agent, played: Any, expected: int) -> tuple[Sequence[str], Sequence[Generation | None]]:
    """``agent.act_with_generations`` returned ``(texts, generations)``: one turn of text
    and one :class:`Generation` or ``None`` per observation, in order."""
    if not isinstance(played, tuple) or len(played) != 2:
        raise ConfigError(
            f"{type(agent).__name__}.act_with_generations returned {type(played).__name__} {_preview(played)}; it must "
            "return a pair (texts, generations): one turn of text and one Generation (or None) per observation."
        )
    texts, generations = played
    check_actions(agent, texts, expected)
    if isinstance(generations, (str, Generation)) or not isinstance(generations, Sequence):
        got = f"a {type(generations).__name__}"
    elif len(generations) != expected:
        got = f"{len(generations)} generations"
    else:
        wrong = [g for g in generations if g is not None and not isinstance(g, Generation)]
        if not wrong:
            return texts, generations
        got = f"a {type(wrong[0]).__name__} among them"
    raise ConfigError(
        f"{type(agent).__name__}.act_with_generations returned {got} for {expected} observations; it must return, aligned "
        "with its texts, one searchgym.lm.base.Generation per turn a model generated and None for a turn without one."
    )


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def describe_error(error: BaseException) -> str:
    """``Type: message (at file:line)``: an exception recorded as an episode's ``error``."""
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return f"{type(error).__name__}: {error}{where}"


def progress_bar(total: int, progress: bool, desc: str) -> Any:
    """A :class:`~searchgym.progress.Progress` over ``total`` episodes, or None without ``progress``."""
    if not progress:
        return None
    from searchgym.progress import Progress

    return Progress(total, desc, "ep")
