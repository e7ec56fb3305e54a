"""The environment: state machine, protocols, summarizers, wrappers and registration.

The PettingZoo multi-agent env is :mod:`searchgym.envs.multi_agent` (imported on demand:
it needs the ``multiagent`` extra); its game and the single-agent view of one role are
:class:`TeamGame` and :class:`RoleEnv`. :class:`SearchGame` is the single-agent game under
:class:`SearchEnv`. :func:`search_env` and :func:`team_game` reach them under wrappers;
:func:`step_all` steps many envs at once with their components' model calls batched.
"""

from searchgym.envs.access import env_play, search_env, step_all, team_game
from searchgym.envs.core import SearchEnv
from searchgym.envs.game import SearchGame, SearchLog
from searchgym.envs.model_calls import BatchCounts, ModelCall, ModelUser, play_all
from searchgym.envs.registration import ENV_SPECS, MULTI_AGENT_ENVS, ROLE_ENV_SPECS, make_multi_agent, register_envs
from searchgym.envs.role_env import RoleEnv
from searchgym.envs.team_game import TeamGame
from searchgym.envs.team_seats import ROLES
from searchgym.envs.wrappers import StrictActions

__all__ = [
    "ENV_SPECS", "MULTI_AGENT_ENVS", "ROLES", "ROLE_ENV_SPECS", "BatchCounts", "ModelCall", "ModelUser", "RoleEnv",
    "SearchEnv", "SearchGame", "SearchLog", "StrictActions", "TeamGame", "env_play", "make_multi_agent", "play_all",
    "register_envs", "search_env", "step_all", "team_game",
]
