"""Checkers users can run on their own envs and protocols.

``check_search_env(env)`` runs Gymnasium's ``check_env``, a seeded determinism rollout,
a pickling round trip, a fuzz of action strings built from the protocol's tags and an
idle agent (tag-free text every turn), which must earn exactly the recipe's floor
(envs scored by a :class:`~searchgym.rewards.RewardRecipe`);
``check_protocol(protocol)`` checks that ``parse`` never raises and inverts ``write``.
Both raise :class:`~searchgym.error.SearchGymError` naming the first failure.
"""

from __future__ import annotations

import pickle
import random
import re
from typing import Any

from gymnasium.utils.env_checker import check_env

from searchgym.corpora.types import QAExample
from searchgym.envs.protocols import Answer, Complete, Protocol, Search, make_protocol
from searchgym.envs.protocols.base import cut_at_stop, strip_blocks
from searchgym.error import SearchGymError
from searchgym.rewards import RewardRecipe

_PROBE = QAExample("probe", "Who founded Kelvaro Industries?", ("Ilvar Odrenko",))
_JUNK = ["", " ", "\n", "<", ">", "</", "[1, 2]", "True", '{"query": "x"}', "ünï 北京 🚀", "\x00", "x" * 500,
         "[" * 2000, "{" * 2000, '{"query": null}', "[12345]"]


def _tags(protocol: Protocol) -> list[str]:
    """Every tag-like string the protocol's prompt, stop strings and env tags mention."""
    text = protocol.prompt(_PROBE) + " ".join(protocol.stop_strings) + " ".join(sum(protocol.env_tags, ()))
    return sorted(set(re.findall(r"</?[a-z_]+>|<\|[a-z_]+\|>", text)))


def fuzz_actions(protocol: Protocol, n: int, seed: int = 0) -> list[str]:
    """``n`` random turns mixing the protocol's tags with junk text."""
    rng = random.Random(seed)
    pieces = _tags(protocol) + _JUNK
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(n)]


def check_protocol(protocol: str | Protocol, *, fuzz: int = 500) -> None:
    """Check that ``parse_actions`` never raises on fuzzed turns and that ``parse``
    inverts ``write``. (``parse`` turns a raising parser into an invalid turn, so the env
    survives it, but the agent would lose a turn for the parser's bug.)"""
    protocol = make_protocol(protocol)
    for text in fuzz_actions(protocol, fuzz):
        clean, _ = strip_blocks(cut_at_stop(text, protocol.stop_strings)[0], protocol.env_tags)
        try:
            protocol.parse_actions(clean)
        except Exception as e:
            raise SearchGymError(f"{protocol.name}.parse_actions raised {type(e).__name__} on {text[:80]!r}; it must never raise.") from e
    samples = [(Search("kelvaro founder"),), (Complete(),) if protocol.answers_with_generator else (Answer("Ilvar Odrenko"),)]
    for actions in samples:
        parsed = protocol.parse(protocol.write(actions)).actions
        if parsed != actions:
            raise SearchGymError(f"{protocol.name}.parse(write({actions})) gave {parsed}; expected the same actions back.")


def _rollout(env: Any, seed: int, actions: list[str]) -> list[Any]:
    obs, info = env.reset(seed=seed)
    trace: list[Any] = [obs, info["example_id"]]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        trace.append((obs, reward, terminated, truncated, info.get("retrieved_ids")))
        if terminated or truncated:
            obs, info = env.reset()
            trace.append((obs, info["example_id"]))
    return trace


def check_search_env(env: Any, *, seed: int = 0, fuzz: int = 100) -> None:
    """Run Gymnasium's checker, then determinism, pickling and fuzz checks on ``env``."""
    inner = env.unwrapped
    check_env(inner, skip_render_check=True)
    actions = fuzz_actions(inner.protocol, fuzz, seed)
    try:
        first = _rollout(inner, seed, actions)
    except Exception as e:
        raise SearchGymError(f"{type(inner).__name__}.step raised {type(e).__name__} on a fuzzed action; it must never raise.") from e
    clone = pickle.loads(pickle.dumps(inner))
    if _rollout(inner, seed, actions) != first:
        raise SearchGymError("Two rollouts with the same seed and actions differed; expected a deterministic env.")
    if _rollout(clone, seed, actions) != first:
        raise SearchGymError("A pickled copy of the env rolled out differently; expected the same episodes.")
    for obs in (t[0] for t in first[2:] if isinstance(t, tuple)):
        if not inner.observation_space.contains(obs):
            raise SearchGymError(f"An observation of {len(obs)} characters is outside the observation space.")
    if isinstance(getattr(inner, "recipe", None), RewardRecipe) and callable(getattr(inner, "episode", None)):
        check_idle_reward(inner, seed=seed)


def check_idle_reward(env: Any, *, seed: int = 0, text: str = "I don't know.") -> None:
    """An agent that writes ``text`` (no protocol tag) every turn must make only invalid
    turns and earn exactly ``env.recipe.floor(episode)`` plus the invalid-turn penalties:
    doing nothing earns nothing, whatever the protocol and the recipe."""
    inner = env.unwrapped
    inner.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        _, reward, terminated, truncated, info = inner.step(text)
        total += reward
        done = terminated or truncated
    if info["num_invalid"] != info["turn"]:
        raise SearchGymError(
            f"{inner.protocol.name}.parse accepted the tag-free turn {text!r} as an action; expected an invalid turn."
        )
    expected = inner.recipe.floor(inner.episode()) + info["num_invalid"] * inner.recipe.invalid_action_penalty
    if abs(total - expected) > 1e-9:
        raise SearchGymError(
            f"An agent writing only {text!r} earned {total} with the {inner.recipe.name!r} reward "
            f"({info['reward_components']}); expected the recipe's floor plus penalties, {expected}. A recipe must "
            "pay nothing to an episode without a well-formed action (see RewardRecipe.floor)."
        )
