"""Helpers shared by the env tests."""

import gymnasium as gym
from hypothesis import strategies as st

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs.registration import ENV_SPECS

ENV_IDS = sorted(ENV_SPECS)
#: A small world keeps every test fast; the questions come from the same world.
SMALL_WORLD = {"seed": 7, "num_passages": 400}


def make_small(env_id: str, **kwargs):
    kwargs.setdefault("corpus_options", SMALL_WORLD)
    return gym.make(env_id, **kwargs)


def search_turn(env, query: str) -> str:
    """A well-formed search turn in the env's protocol."""
    from searchgym.envs.protocols import Search

    return env.unwrapped.protocol.write([Search(query)])


def finish_turn(env, answer: str = "unknown") -> str:
    """A well-formed final turn: an answer, or s3's search complete."""
    from searchgym.envs.protocols import Answer, Complete

    protocol = env.unwrapped.protocol
    return protocol.write([Complete()] if protocol.answers_with_generator else [Answer(answer)])


#: Tags of every protocol and hostile fragments: the env's fuzzed turns are built of them and of random text.
TAGS = [
    "<search>", "</search>", "<answer>", "</answer>", "<think>", "</think>", "<information>", "</information>",
    "<|begin_of_query|>", "<|end_of_query|>", "<|begin_of_documents|>", "<|end_of_documents|>",
    "<query>", "</query>", "<important_info>", "</important_info>", "<search_complete>", "</search_complete>",
    "True", "[1, 2]", '{"query": ', "[" * 1000, "<observation>", "</observation>", "<original_evidence>", "</original_evidence>",
]
actions = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=30)), max_size=12).map("".join)
