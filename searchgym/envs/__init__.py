"""The environment: state machine, protocols, summarizers, wrappers and registration."""

from searchgym.envs.core import SearchEnv
from searchgym.envs.registration import ENV_SPECS, register_envs
from searchgym.envs.wrappers import StrictActions

__all__ = ["ENV_SPECS", "SearchEnv", "StrictActions", "register_envs"]
