"""The public way to reach a searchgym env under Gymnasium or PettingZoo wrappers.

Agents, drivers and trainers read an env's protocol, questions, corpus, retriever and
budgets. ``search_env(env)`` returns the searchgym env that holds them, whatever wraps
it, and says clearly when ``env`` is not one; ``team_game(env)`` does the same for the
:class:`~searchgym.envs.team_game.TeamGame` of a multi-agent env or of one of its roles.
"""

from __future__ import annotations

from typing import Any

from searchgym.envs.core import SearchEnv
from searchgym.envs.role_env import RoleEnv
from searchgym.envs.team_game import TeamGame
from searchgym.error import ConfigError

def search_env(env: Any) -> SearchEnv | RoleEnv:
    """The :class:`~searchgym.envs.core.SearchEnv` (or role env of the multi-agent game)
    under any Gymnasium wrappers of ``env``.

    Both have ``protocol``, ``examples``, ``example``, ``corpus``, ``retriever`` (settable),
    ``top_k`` and ``transcript``; a SearchEnv also has ``recipe``, ``initial_top_k``,
    ``max_turns``, ``max_searches`` and ``game`` (its :class:`~searchgym.envs.game.SearchGame`).
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
    """The :class:`~searchgym.envs.team_game.TeamGame` of a multi-agent env (PettingZoo AEC
    or parallel, wrapped or not) or of a role env (``searchgym/MultiAgent*-v0``)."""
    inner = getattr(env, "unwrapped", env)
    game = getattr(inner, "game", None)
    if isinstance(game, TeamGame):
        return game
    raise ConfigError(
        f"Expected a searchgym multi-agent env (searchgym.envs.make_multi_agent('search_team_v0')) or role env "
        f"(gym.make('searchgym/MultiAgentSearcher-v0')), got {type(env).__name__} around {type(inner).__name__}."
    )
