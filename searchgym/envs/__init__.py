"""The environment, in five rooms and the registration that names their envs.

- :mod:`searchgym.envs.single`: the single-agent env, :class:`SearchEnv` over :class:`SearchGame`;
- :mod:`searchgym.envs.protocols`: the five papers' tag grammars;
- :mod:`searchgym.envs.tools`: the same games through native tool calls (``action_format="tools"``);
- :mod:`searchgym.envs.components`: summarizers, frozen models, the batching of their model calls;
- :mod:`searchgym.envs.team`: the team game, :class:`TeamGame`, its PettingZoo env
  :mod:`searchgym.envs.team.multi_agent` (imported on demand: it needs the ``multiagent``
  extra) and :class:`RoleEnv`, one role as a Gymnasium env;
- :mod:`searchgym.envs.registration`: the ids ``gym.make`` knows; :mod:`searchgym.envs.access`:
  :func:`search_env` and :func:`team_game` reach the games under wrappers, :func:`step_all`
  steps many envs with their components' model calls batched.

The modules' paths before this layout (``searchgym.envs.core``, ``searchgym.envs.multi_agent``,
...) still import, as the same modules (:mod:`searchgym.envs.old_paths`).
"""

from searchgym.envs import old_paths
from searchgym.envs.access import env_play, env_reset_play, reset_all, search_env, step_all, team_game
from searchgym.envs.components.model_calls import BatchCounts, ModelCall, ModelUser, SearchCall, play_all
from searchgym.envs.registration import ENV_SPECS, GAME_ENV_SPECS, METHOD_ENV_SPECS, MULTI_AGENT_ENVS, ROLE_ENV_SPECS, make_multi_agent, register_envs
from searchgym.envs.single.core import SearchEnv
from searchgym.envs.single.game import SearchGame, SearchLog
from searchgym.envs.single.wrappers import StrictActions
from searchgym.envs.team.game import TeamGame
from searchgym.envs.team.role_env import RoleEnv
from searchgym.envs.team.seats import ROLES

old_paths.install()

__all__ = [
    "ENV_SPECS", "GAME_ENV_SPECS", "METHOD_ENV_SPECS", "MULTI_AGENT_ENVS", "ROLES", "ROLE_ENV_SPECS", "BatchCounts", "ModelCall", "ModelUser", "RoleEnv", "SearchCall",
    "SearchEnv", "SearchGame", "SearchLog", "StrictActions", "TeamGame", "env_play", "env_reset_play", "make_multi_agent",
    "play_all", "register_envs", "reset_all", "search_env", "step_all", "team_game",
]
