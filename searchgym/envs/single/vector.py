"""Many search envs stepped as one vector env, their searches and model calls batched.

``gym.make_vec(id, num_envs=n)`` on a single-agent id builds a :class:`SearchVectorEnv`
(the ids register it as their ``vector_entry_point``): Gymnasium's synchronous vector env,
whose rounds step and reset the envs together through
:func:`~searchgym.envs.components.model_calls.play_all`, so the envs' searches go out as one
``retriever.search`` per retriever and ``k`` (one request to a retrieval server, one
encoding batch for a dense retriever) and their components' model calls as one
``generate``. Observations, rewards and infos are those of ``vectorization_mode="sync"``
(tested); ``"sync"`` and ``"async"`` stay available.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.vector import SyncVectorEnv
from gymnasium.vector.utils import concatenate, iterate
from gymnasium.vector.vector_env import AutoresetMode

from searchgym.envs.components.model_calls import BatchCounts, play_all
from searchgym.envs.single.core import SearchEnv
from searchgym.error import ConfigError


class SearchVectorEnv(SyncVectorEnv):
    """``num_envs`` :class:`SearchEnv` made with ``kwargs``, stepped together (see the module
    docstring). ``batch_counts`` counts the batched calls of every round."""

    def __init__(self, num_envs: int = 1, *, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, **kwargs: Any):
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ConfigError(f"SearchVectorEnv expects num_envs to be a positive integer, got {num_envs!r}.")
        kwargs.pop("max_episode_steps", None)  # the envs keep their own turn budget
        super().__init__([lambda: SearchEnv(**kwargs)] * num_envs, autoreset_mode=autoreset_mode)
        self.batch_counts = BatchCounts()

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        if options is not None and "reset_mask" in options:
            return super().reset(seed=seed, options=options)  # a partial reset: the envs one by one
        seeds = [None] * self.num_envs if seed is None else [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"If seeds are passed as a list the length must match num_envs={self.num_envs} but got length={len(seeds)}.")
        self._terminations = np.zeros((self.num_envs,), dtype=np.bool_)
        self._truncations = np.zeros((self.num_envs,), dtype=np.bool_)
        self._autoreset_envs = np.zeros((self.num_envs,), dtype=np.bool_)
        outcomes = play_all([env.reset_play(seed=s, options=options) for env, s in zip(self.envs, seeds)], self.batch_counts)
        infos: dict[str, Any] = {}
        for i, outcome in enumerate(_raised(outcomes)):
            self._env_obs[i], env_info = outcome
            infos = self._add_info(infos, env_info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        return deepcopy(self._observations) if self.copy else self._observations, infos

    def step(self, actions: Any):
        if self.autoreset_mode != AutoresetMode.NEXT_STEP:
            return super().step(actions)  # other autoreset modes: the envs one by one
        actions = list(iterate(self.action_space, actions))
        if len(actions) != self.num_envs:
            raise ConfigError(f"SearchVectorEnv.step expects {self.num_envs} actions, got {len(actions)}.")
        plays = [env.reset_play() if self._autoreset_envs[i] else env.play(actions[i]) for i, env in enumerate(self.envs)]
        infos: dict[str, Any] = {}
        for i, outcome in enumerate(_raised(play_all(plays, self.batch_counts))):
            if self._autoreset_envs[i]:
                self._env_obs[i], env_info = outcome
                self._rewards[i], self._terminations[i], self._truncations[i] = 0.0, False, False
            else:
                self._env_obs[i], self._rewards[i], self._terminations[i], self._truncations[i], env_info = outcome
            infos = self._add_info(infos, env_info, i)
        self._observations = concatenate(self.single_observation_space, self._env_obs, self._observations)
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        return (deepcopy(self._observations) if self.copy else self._observations, np.copy(self._rewards),
                np.copy(self._terminations), np.copy(self._truncations), infos)


def _raised(outcomes: list[Any]) -> list[Any]:
    """The outcomes of :func:`play_all`, raising the first failure as the envs one by one would."""
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes
