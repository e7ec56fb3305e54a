"""The same decisions written as text, played through every engine searchgym's games run
under, for the parity tests (tests/integrations/test_tool_parity.py: tags, tools and TRL's
environment path; tests/integrations/test_verl.py: verl's tool agent loop).

Each scenario is a list of turns, each written once in the game's tag grammar and once as
the model's raw hermes text. An engine stops where the texts stop (its budget ends the
episode, which is then scored as the env scores one cut at its turn budget). The reward the
tags env gives is the reference every engine must give for the same decisions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs.access import search_env
from searchgym.envs.protocols import Answer, Evidence, Search
from searchgym.integrations.tool_episode import ToolEpisode

#: The answer games (s3's has no final answer from the searcher), each with a plain config
#: that verl's tool config can carry: a small generated corpus, a turn budget the scenarios
#: never reach, and a penalty for each bad turn, so that a bad call an engine fails to show
#: the env shows in every game's reward.
GAMES = ("searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/RSearch-v0")
WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}, "max_turns": 5, "top_k": 1,
         "reward_options": {"invalid_action_penalty": -0.25}}
SPLIT = "dev"

#: An answer call whose JSON cannot be read (verl's and TRL's parsers drop or skip it).
MALFORMED = '<tool_call>\n{"name": "answer", "arguments": {"answer": }\n</tool_call>'


#: The thought written beside a call.
THOUGHT = "The documents name it; I answer now."


def tool_call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@dataclass(frozen=True)
class Scenario:
    """One game's decisions on its question ``index`` (of the split; one per scenario, so
    that one batch holds them all): ``tags`` and ``tools`` (raw text) turn by turn;
    ``trl_turns``: how many of the tag turns TRL's loop plays (it ends on a reply without a
    call it can read; the reply is the env's only if it holds a call, through ``unread_calls``)."""

    name: str
    index: int
    tags: tuple[str, ...]
    tools: tuple[str, ...]
    trl_turns: int


def example(env_id: str, index: int = 0):
    return search_env(tag_env(env_id)).examples[index]


_TAG_ENVS: dict[str, Any] = {}


def tag_env(env_id: str):
    if env_id not in _TAG_ENVS:
        _TAG_ENVS[env_id] = gym.make(env_id, split=SPLIT, **WORLD)
    return _TAG_ENVS[env_id]


#: The scenarios, in the order of their questions.
NAMES = ("well-formed", "malformed", "prose", "parallel", "cut", "mixed")


def scenarios(env_id: str) -> list[Scenario]:
    """Well-formed, malformed, prose, parallel, cut and mixed turns, each on its own question."""
    return [Scenario(name, index, *_turns(env_id, index)[name]) for index, name in enumerate(NAMES)]


def _turns(env_id: str, index: int) -> dict[str, tuple]:
    """Every scenario's (tags, tools, trl_turns) on question ``index``."""
    env = tag_env(env_id)
    protocol, ex = search_env(env).protocol, example(env_id, index)
    question, gold = ex.question, ex.answers[0]
    evidence = env_id.endswith("RSearch-v0")
    answer_tag = protocol.write([Evidence("the documents"), Answer(gold)] if evidence else [Answer(gold)])
    answer_call = tool_call("answer", answer=gold, **({"evidence": "the documents"} if evidence else {}))
    search_tag, search_call = protocol.write([Search(question)]), tool_call("search", query=question)
    other_tag, other_call = protocol.write([Search("founded")]), tool_call("search", query="founded")
    thought_tag = protocol.write([Answer(gold)], THOUGHT)
    cut_at = answer_tag.index(gold) + 2
    return {
        "well-formed": ((search_tag, answer_tag), (search_call, answer_call), 2),
        # The answer call cannot be read: a bad call (R1-Searcher's format penalty), then the
        # engine stops. The text beside it is the turn's thought, not a final answer.
        "malformed": ((search_tag, thought_tag[: thought_tag.index(gold)]), (search_call, f"{THOUGHT}\n{MALFORMED}"), 2),
        # A reply without a call is the final answer in the env; TRL's loop ends on it (its prompt says so).
        "prose": ((search_tag, protocol.write([Answer(gold)])), (search_call, gold), 1),
        # Two searches in one turn (a tag turn holds one: two turns), then the answer.
        "parallel": ((search_tag, other_tag, answer_tag), (search_call + "\n" + other_call, answer_call), 3),
        # The answer call cut by the length budget in the middle.
        "cut": ((search_tag, answer_tag[:cut_at]), (search_call, answer_call[:30]), 2),
        # A search and an unreadable block in one turn, then the answer (TRL reads neither:
        # the turn is played through unread_calls and its loop ends there).
        "mixed": ((search_tag, answer_tag[: answer_tag.index(gold)], answer_tag),
                 (search_call + "\n" + MALFORMED, answer_call), 2),
    }


def tags_reward(env_id: str, texts: tuple[str, ...], index: int = 0) -> float:
    """The tags env's return for ``texts`` on question ``index``, an episode left open scored
    as at its turn budget."""
    env = tag_env(env_id)
    env.reset(options={"example": example(env_id, index)})
    inner, total = search_env(env), 0.0
    for text in texts:
        _, reward, terminated, truncated, _ = env.step(text)
        total += reward
        if terminated or truncated:
            return total
    return total + inner.recipe.score(inner.episode()).total


def tools_reward(env_id: str, texts: tuple[str, ...], index: int = 0) -> float:
    """The tools env's return for the raw ``texts`` on question ``index`` (as searchgym's
    driver plays them)."""
    episode = ToolEpisode(gym.make(env_id, split=SPLIT, action_format="tools", **WORLD))
    episode.start(example=example(env_id, index))
    for text in texts:
        if episode.ended:
            break
        episode.play(text)
    return episode.finish()


# --------------------------------------------------------------------------- the ecosystems' table
#: The decisions every ecosystem route plays (tests/integrations/test_parity_ecosystems.py):
#: each ends inside the env (an answer, or the turn budget), so a route that plays until the
#: env ends (verifiers' harness, OpenEnv's client) and one that stops where the texts stop play
#: the same turns.
ECOSYSTEM_NAMES = ("right", "wrong", "malformed", "over-budget")


def ecosystem_scenarios(env_id: str) -> list[Scenario]:
    """Right, wrong, malformed and over-budget decisions, each on its own question (after
    :data:`NAMES`' questions)."""
    env = tag_env(env_id)
    protocol, evidence = search_env(env).protocol, env_id.endswith("RSearch-v0")
    budget = int(WORLD["max_turns"])
    out = []
    for offset, name in enumerate(ECOSYSTEM_NAMES):
        index = len(NAMES) + offset
        question, gold = example(env_id, index).question, example(env_id, index).answers[0]
        answer = gold if name != "wrong" else "Nobody Knows"
        answer_tag = protocol.write([Evidence("the documents"), Answer(answer)] if evidence else [Answer(answer)])
        answer_call = tool_call("answer", answer=answer, **({"evidence": "the documents"} if evidence else {}))
        search_tag, search_call = protocol.write([Search(question)]), tool_call("search", query=question)
        if name == "malformed":
            # An unreadable turn (no action in tags, an unreadable call in tools), then the answer.
            tags, tools, trl = (search_tag, THOUGHT, answer_tag), (search_call, f"{THOUGHT}\n{MALFORMED}", answer_call), 2
        elif name == "over-budget":
            tags, tools, trl = (search_tag,) * budget, (search_call,) * budget, budget
        else:
            tags, tools, trl = (search_tag, answer_tag), (search_call, answer_call), 2
        out.append(Scenario(name, index, tags, tools, trl))
    return out
