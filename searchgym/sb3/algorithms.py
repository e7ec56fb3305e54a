"""The Stable-Baselines3 algorithms of ``searchgym train`` and their defaults.

Stable-Baselines3 is imported only when a model is built or loaded
(:func:`algorithm_class`), so ``searchgym.sb3`` imports without it.
"""

from __future__ import annotations

from typing import Any

from searchgym.error import MissingDependencyError, UnknownNameError
from searchgym.training.args import SB3_ALGORITHMS

__all__ = ["SB3_ALGORITHMS", "SB3_DEFAULTS", "algorithm_class"]

#: Defaults of each algorithm for episodes of a few templates (overridden by ``sb3_options``).
SB3_DEFAULTS: dict[str, dict[str, Any]] = {
    "sb3-ppo": {"n_steps": 256, "batch_size": 256, "n_epochs": 10, "gamma": 0.99, "gae_lambda": 0.95, "ent_coef": 0.01},
    "sb3-dqn": {
        "buffer_size": 50_000,
        "learning_starts": 1_000,
        "batch_size": 64,
        "train_freq": 4,
        "target_update_interval": 1_000,
        "exploration_fraction": 0.3,
        "exploration_final_eps": 0.02,
        "gamma": 0.99,
    },
}


def algorithm_class(name: str) -> Any:
    """The Stable-Baselines3 class of ``name`` (``"sb3-ppo"``: PPO, ``"sb3-dqn"``: DQN)."""
    if name not in SB3_ALGORITHMS:
        raise UnknownNameError("Stable-Baselines3 algorithm", name, SB3_ALGORITHMS)
    try:
        from stable_baselines3 import DQN, PPO
    except ImportError as e:
        raise MissingDependencyError("stable-baselines3", "sb3", f"The {name} algorithm") from e
    return {"sb3-ppo": PPO, "sb3-dqn": DQN}[name]
