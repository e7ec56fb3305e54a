"""Wrappers around :class:`~searchgym.envs.single.core.SearchEnv` (the numeric one for classic RL is
:class:`searchgym.sb3.TemplateActions`)."""

from __future__ import annotations

import gymnasium as gym

from searchgym.error import InvalidActionError


class StrictActions(gym.Wrapper):
    """Raise :class:`~searchgym.error.InvalidActionError` on a malformed turn instead of
    returning the protocol's feedback, for debugging an agent's output format.

    The step is still taken by the inner env (so its counters stay right) before raising.
    """

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if info.get("invalid_reason") is not None or info.get("forged_env_tags"):
            reason = info.get("invalid_reason") or "the turn wrote environment-owned tags"
            protocol = self.env.unwrapped.protocol.name
            raise InvalidActionError(
                f"Expected a well-formed {protocol} turn, got one where {reason} "
                f"(turn {info['turn']}): {str(action)[:200]!r}"
            )
        return observation, reward, terminated, truncated, info
