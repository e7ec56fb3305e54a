"""Registered environment ids: ``gym.make("searchgym/<System>-v0", **overrides)``.

Bump the version when reward, corpus or protocol semantics change.
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

NAMESPACE = "searchgym/"

ENTRY_POINT = "searchgym.envs.core:SearchEnv"

#: id -> default kwargs; any of them can be overridden through ``gym.make`` kwargs.
#: Budgets follow each seed's training scripts; ``max_turns`` counts the final turn in
#: which the seeds no longer run searches.
ENV_SPECS: dict[str, dict[str, Any]] = {
    "searchgym/SearchR1-v0": {"protocol": "search_r1", "reward": "search_r1_em", "top_k": 3, "max_turns": 5},
    "searchgym/R1Searcher-v0": {"protocol": "r1_searcher", "reward": "r1_searcher_stage2", "top_k": 3, "max_turns": 9},
    "searchgym/RECON-v0": {
        "protocol": "recon", "reward": "search_r1_em", "summarizer": "extractive", "top_k": 3, "max_turns": 6,
    },
    "searchgym/S3-v0": {
        "protocol": "s3", "reward": "s3_gbr", "generator": "gold-span", "top_k": 8, "initial_top_k": 3, "max_turns": 4,
    },
    "searchgym/RSearch-v0": {"protocol": "r_search", "reward": "r_search", "reader": "gold-span", "top_k": 3, "max_turns": 5},
}


def register_envs() -> None:
    """Register every id of :data:`ENV_SPECS` once (importing searchgym does it)."""
    for env_id, kwargs in ENV_SPECS.items():
        if env_id not in registry:
            register(id=env_id, entry_point=ENTRY_POINT, kwargs=dict(kwargs), disable_env_checker=False)


def full_env_id(env_id: str) -> str:
    """``"SearchR1-v0"`` or ``"searchgym/SearchR1-v0"`` -> the registered id; an unknown one
    raises with the valid names."""
    from searchgym.error import UnknownNameError

    name = env_id if env_id.startswith(NAMESPACE) else NAMESPACE + env_id
    if name not in ENV_SPECS:
        raise UnknownNameError("env id", env_id, [e.removeprefix(NAMESPACE) for e in ENV_SPECS])
    return name
