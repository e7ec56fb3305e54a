"""The public way to reach a searchgym env under Gymnasium or PettingZoo wrappers.

Agents, drivers and trainers read an env's protocol, questions, corpus, retriever and
budgets. ``search_env(env)`` returns the searchgym env that holds them, whatever wraps
it, and says clearly when ``env`` is not one; ``team_game(env)`` does the same for the
:class:`~searchgym.envs.team.game.TeamGame` of a multi-agent env or of one of its roles.
``step_all(envs, actions)`` steps many envs at once, batching the model calls of their
components and their searches (:mod:`searchgym.envs.components.model_calls`); ``reset_all``
resets many, their first retrievals (s3) batched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gymnasium.wrappers import OrderEnforcing, PassiveEnvChecker

from searchgym.envs.components.model_calls import BatchCounts, Play, play_all
from searchgym.envs.single.core import SearchEnv
from searchgym.envs.team.game import TeamGame
from searchgym.envs.team.role_env import RoleEnv
from searchgym.error import ConfigError

#: Wrappers of ``gym.make`` that only check the order of calls and the first step's output.
_BOOKKEEPING_WRAPPERS = (OrderEnforcing, PassiveEnvChecker)


def search_env(env: Any) -> SearchEnv | RoleEnv:
    """The :class:`~searchgym.envs.single.core.SearchEnv` (or role env of the multi-agent game)
    under any Gymnasium wrappers of ``env``.

    Both have ``protocol``, ``examples``, ``example``, ``corpus``, ``retriever`` (settable),
    ``top_k`` and ``transcript``; a SearchEnv also has ``recipe``, ``initial_top_k``,
    ``max_turns``, ``max_searches`` and ``game`` (its :class:`~searchgym.envs.single.game.SearchGame`).
    """
    inner = getattr(env, "unwrapped", env)
    if isinstance(inner, (SearchEnv, RoleEnv)):
        return inner
    raise ConfigError(
        f"Expected a searchgym env such as gym.make('searchgym/SearchR1-v0') (wrapped or not), got "
        f"{type(env).__name__} around {type(inner).__name__}; make the env from a searchgym id "
        "(searchgym.envs.ENV_SPECS, ROLE_ENV_SPECS)."
    )


def team_game(env: Any) -> TeamGame:
    """The :class:`~searchgym.envs.team.game.TeamGame` of a multi-agent env (PettingZoo AEC
    or parallel, wrapped or not) or of a role env (``searchgym/MultiAgent*-v0``)."""
    inner = getattr(env, "unwrapped", env)
    game = getattr(inner, "game", None)
    if isinstance(game, TeamGame):
        return game
    raise ConfigError(
        f"Expected a searchgym multi-agent env (searchgym.envs.make_multi_agent('search_team_v0')) or role env "
        f"(gym.make('searchgym/MultiAgentSearcher-v0')), got {type(env).__name__} around {type(inner).__name__}."
    )


def env_play(env: Any, action: Any) -> Play[Any]:
    """``env.step(action)`` as a play whose model calls :func:`step_all` (or the driver)
    batches with other envs' (see :mod:`searchgym.envs.components.model_calls`).

    ``env`` is a searchgym env (:class:`SearchEnv`, a role env, a PettingZoo team env) behind none but
    the wrappers ``gym.make`` and ``multi_agent.env`` add (order enforcing, the passive
    env checker), or any other env: then ``env.step(action)`` runs whole, through its
    wrappers, its model calls made alone.
    """
    inner = env
    while type(inner) in _BOOKKEEPING_WRAPPERS or _is_pettingzoo_order_enforcing(inner):
        inner = inner.env
    if isinstance(inner, SearchEnv) or (isinstance(getattr(inner, "game", None), TeamGame) and callable(getattr(inner, "play", None))):
        return inner.play(action)
    return _whole_step(env, action)


def env_reset_play(env: Any, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Play[Any]:
    """``env.reset(seed=..., options=...)`` as a play whose searches (s3's first retrieval)
    :func:`reset_all` or the driver batches with other envs'.

    ``env`` is a :class:`SearchEnv` behind none but the wrappers ``gym.make`` adds (order
    enforcing, the passive checker), once those have seen a first reset: the first reset of
    a wrapped env, and any reset of another env, runs whole (``env.reset``), its searches made
    alone, so that the wrappers record and check it as they do.
    """
    inner, settled = env, True
    while type(inner) in _BOOKKEEPING_WRAPPERS:
        settled = settled and (inner.has_reset if isinstance(inner, OrderEnforcing) else inner.checked_reset)
        inner = inner.env
    if not (settled and isinstance(inner, SearchEnv)):
        return (yield from _whole_reset(env, seed, options))
    return (yield from inner.reset_play(seed=seed, options=options))


def reset_all(envs: Sequence[Any], seeds: Sequence[int | None] | None = None, options: Sequence[dict[str, Any] | None] | None = None,
              counts: BatchCounts | None = None) -> list[Any]:
    """``[env.reset(seed=s, options=o) for ...]`` with the envs' searches batched (one
    ``retriever.search`` per retriever and ``k``); an env whose reset raises gets its exception
    in its place."""
    seeds = list(seeds) if seeds is not None else [None] * len(envs)
    options = list(options) if options is not None else [None] * len(envs)
    if not len(envs) == len(seeds) == len(options):
        raise ConfigError(f"reset_all expects one seed and one options per env, got {len(seeds)} seeds and {len(options)} options for {len(envs)} envs.")
    return play_all([env_reset_play(env, seed=s, options=o) for env, s, o in zip(envs, seeds, options)], counts)


def step_all(envs: Sequence[Any], actions: Sequence[Any], counts: BatchCounts | None = None) -> list[Any]:
    """``[env.step(action) for env, action in zip(envs, actions)]`` with the model calls
    of the envs' components batched: each round of calls makes one ``generate`` call per
    model and sampling parameters (see :func:`~searchgym.envs.components.model_calls.play_all`).

    An env whose step raises (a backend error included) gets its exception in its place
    in the returned list; the others are stepped all the same. ``counts``
    (:class:`~searchgym.envs.components.model_calls.BatchCounts`) is added to when given.
    """
    if len(envs) != len(actions):
        raise ConfigError(f"step_all expects one action per env, got {len(actions)} actions for {len(envs)} envs.")
    return play_all([env_play(env, action) for env, action in zip(envs, actions)], counts)


def _whole_step(env: Any, action: Any) -> Play[Any]:
    yield from ()  # no call to batch: env.step makes its model calls itself
    return env.step(action)


def _whole_reset(env: Any, seed: int | None, options: dict[str, Any] | None) -> Play[Any]:
    yield from ()  # no call to batch: env.reset makes its searches itself
    return env.reset(seed=seed, options=options)


def _is_pettingzoo_order_enforcing(env: Any) -> bool:
    try:
        from pettingzoo.utils.wrappers import OrderEnforcingWrapper
    except ImportError:  # without the multiagent extra there is no PettingZoo env to unwrap
        return False
    return type(env) is OrderEnforcingWrapper
