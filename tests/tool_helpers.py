"""Helpers shared by the tool-call tests: the same env in both formats, and an agent's
decisions written once in tags and once as tool calls."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs.protocols import Select
from searchgym.rewards import RECIPES, GoldSpanReader
from env_helpers import SMALL_WORLD

_BASES: dict[str, Any] = {}


def base_env(env_id: str):
    """One tag env per id over the small world: its corpus, questions and retriever are shared
    by every env :func:`make_env` builds (so that building one costs a millisecond)."""
    if env_id not in _BASES:
        _BASES[env_id] = gym.make(env_id, corpus_options=SMALL_WORLD).unwrapped
    return _BASES[env_id]


def make_env(env_id: str, action_format: str = "tools", recipe: str | None = None, **kwargs):
    """``env_id`` in ``action_format`` over the shared small world; with ``recipe``, paying it
    with the gold-span reader as every frozen model it needs (as the hack suite does)."""
    base = base_env(env_id)
    if recipe is not None:
        kwargs.setdefault("reward", recipe)
        kwargs.update({role: None for role in ("generator", "reader") if role not in kwargs})
        kwargs.update({role: GoldSpanReader() for role in RECIPES[recipe].needs})
    return gym.make(env_id, action_format=action_format, corpus=base.corpus, dataset=base.examples,
                    retriever=base.retriever, **kwargs)


class Recording:
    """A protocol that remembers the last actions and thought an agent had it write: the
    agent's decisions, to write again as tool calls."""

    def __init__(self, protocol):
        self.protocol = protocol
        self.last: tuple[list, str | None] | None = None

    def write(self, actions, thought=None):
        self.last = (list(actions), thought)
        return self.protocol.write(actions, thought)

    def __getattr__(self, name):
        return getattr(self.protocol, name)


def recording(agent):
    """``agent`` with its protocol recorded (see :class:`Recording`)."""
    agent.protocol = Recording(agent.protocol)
    return agent


def shown_window(env) -> int:
    """How many documents the latest results of ``env``'s episode show."""
    log = env.unwrapped.game.log
    return len(log.windows[-1].shown) if log.windows else 0


def as_tool_decisions(actions: Sequence[Any], window: int) -> list[Any]:
    """The same decisions as the tag turn's, as tools express them: a tag selection ignores
    the numbers its window does not show (s3's rule), a ``select`` call may not name them."""
    return [Select(tuple(n for n in a.doc_numbers if 1 <= n <= window)) if isinstance(a, Select) else a for a in actions]
