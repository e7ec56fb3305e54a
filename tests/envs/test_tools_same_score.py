"""The same decisions score the same in tags and in tool calls.

Every registered single-agent env x every reward recipe: the oracle's and the random agent's
decisions, played in lockstep in the tag env (written by the protocol) and in the tool env
(written as an assistant message, or as hermes text, with the same thought as content), give
the same reward at every step, the same searches, documents, selection, answer, evidence,
termination and reward components.

The decisions are the agent's as the tag game reads them: a selection of numbers its window
does not show keeps what the window shows (s3's rule), and is written so in both formats (a
``select`` call naming a document never shown is a bad call).
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from env_helpers import ENV_IDS
from searchgym.agents.baselines import RandomAgent
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.envs.registration import ENV_SPECS
from searchgym.rewards import RECIPES
from tool_helpers import as_tool_decisions, base_env, make_env, recording, shown_window

PAIRS = [(env_id, recipe) for env_id in ENV_IDS for recipe in sorted(RECIPES)]
#: A penalty for bad turns, so that a difference in how many there are would show in the rewards.
PENALTY = -0.25
_ENVS: dict = {}


def envs(env_id: str, recipe: str):
    key = (env_id, recipe)
    if key not in _ENVS:
        options = {"reward_options": {"invalid_action_penalty": PENALTY}}
        _ENVS[key] = (make_env(env_id, "tags", recipe, **options), make_env(env_id, "tools", recipe, **options))
    return _ENVS[key]


STEP_KEYS = ("turn", "num_searches", "num_invalid", "retrieved_ids", "retrieved_scores", "selected_ids", "query", "action_kinds")
END_KEYS = ("answer", "prediction", "evidence", "reward_components", "answers")


def play_both(env_id: str, recipe: str, agent, index: int, written: str) -> list[float]:
    """One episode of ``agent``'s decisions in both formats, compared step by step; the rewards."""
    tags, tools = envs(env_id, recipe)
    surface = tools.unwrapped.game.tools
    obs, info = tags.reset(options={"example_index": index})
    _, tool_info = tools.reset(options={"example_index": index})
    assert tool_info["retrieved_ids"] == info["retrieved_ids"]
    rewards = []
    for turn in range(1, 100):
        agent.act([obs], [info])
        actions, thought = agent.protocol.last
        decisions = as_tool_decisions(actions, shown_window(tags))
        text = tags.unwrapped.protocol.write(decisions, thought)
        if written == "message":
            action = surface.write(decisions, thought, turn=turn)
        else:
            action = surface.write_text(decisions, thought, format="hermes")
        obs, reward, terminated, truncated, info = tags.step(text)
        _, tool_reward, tool_terminated, tool_truncated, tool_info = tools.step(action)
        where = f"{env_id} x {recipe}, question {index}, turn {turn}: {text!r}"
        assert (tool_reward, tool_terminated, tool_truncated) == (reward, terminated, truncated), where
        assert {k: tool_info[k] for k in STEP_KEYS} == {k: info[k] for k in STEP_KEYS}, where
        assert tools.unwrapped.game.records == tags.unwrapped.game.records, where
        rewards.append(reward)
        if terminated or truncated:
            assert {k: tool_info[k] for k in END_KEYS} == {k: info[k] for k in END_KEYS}, where
            # What R-Search's grounding reads: the same documents (an empty retrieval shows none).
            open_, close = _information_tags(tags)
            shown = [o.strip().removeprefix(open_).removesuffix(close).strip() for o in tags.unwrapped.game.observed]
            assert tools.unwrapped.game.observed == [o for o in shown if o], where
            return rewards
    raise AssertionError("the episode did not end")


def _information_tags(env):
    protocol = env.unwrapped.protocol
    marker = "\x00"
    wrapped = protocol.wrap_information(marker)
    open_, _, close = wrapped.strip().partition(marker)
    return open_, close


@pytest.mark.parametrize("env_id, recipe", PAIRS)
def test_the_oracle_scores_the_same_in_tags_and_tools(env_id, recipe):
    tags, _ = envs(env_id, recipe)
    oracle = recording(SynthWikiOracle.for_env(tags))
    totals = [sum(play_both(env_id, recipe, oracle, index, written)) for index, written in ((0, "message"), (1, "hermes"))]
    if recipe == ENV_SPECS[env_id]["reward"]:
        assert max(totals) > 0  # the oracle earns its env's own reward (the comparison is not of empty episodes)


@pytest.mark.parametrize("env_id, recipe", PAIRS)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**31), question=st.integers(0, 39), written=st.sampled_from(["message", "hermes"]))
def test_the_random_agent_scores_the_same_in_tags_and_tools(env_id, recipe, seed, question, written):
    tags, _ = envs(env_id, recipe)
    agent = recording(RandomAgent.for_env(tags, seed=seed, answer_probability=0.35))
    play_both(env_id, recipe, agent, question % len(base_env(env_id).examples), written)
