"""A tool turn without a call is counted, and a tag grammar written there is named."""

import json
import warnings

import gymnasium as gym

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs.tools import no_call

WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}}


def test_the_grammar_tags_are_the_registered_protocols_own():
    tags = no_call.grammar_tags()
    for tag in ("<search>", "</search>", "<answer>", "</answer>", "<|begin_of_query|>", "<|end_of_query|>", "<query>", "</query>"):
        assert tag in tags
    assert no_call.tags_in("I think <search> who </search> then <answer> x </answer>") == ("<search>", "</search>", "<answer>", "</answer>")
    assert no_call.tags_in("Paris, a city <b>bold</b>") == ()


def test_a_reply_without_a_call_is_counted_and_its_tags_named_once_per_process(monkeypatch):
    monkeypatch.setattr(no_call, "_warned", False)
    env = gym.make("searchgym/SearchR1-v0", action_format="tools", **WORLD)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step("<search> who founded Pravrimento Shipyards </search>")
        assert terminated and reward == 0.0  # read as the final answer, as before: scored, not refused
        assert info["ended_without_call"] is True and info["tags_without_call"] == ("<search>", "</search>")
        env.reset(seed=0)
        env.step("<answer> Prolthunar </answer>")  # a second time: counted, not warned again
    said = [str(w.message) for w in caught if issubclass(w.category, UserWarning) and "no tool call" in str(w.message)]
    assert said == [
        "A tools env (action_format='tools') got a reply with no tool call that writes a tag grammar's tags (<search>, </search>) "
        "and read it as its final answer, ending the episode: the model writes tags where this env reads tool calls. Play it "
        "through its chat template's tools, or make the env with action_format='tags'. Counted in info['ended_without_call'] "
        "and info['tags_without_call'] (searchgym bench prints the counts); this warning is shown once per process."
    ]
    env.reset(seed=0)
    _, _, terminated, _, info = env.step("Prolthunar")  # plain text: the answer, counted, no tags
    assert terminated and info["ended_without_call"] is True and info["tags_without_call"] == ()
    env.reset(seed=0)
    call = {"role": "assistant", "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": json.dumps({"query": "Prolthunar"})}}]}
    _, _, terminated, _, info = env.step(call)
    assert not terminated and info["ended_without_call"] is False and info["tags_without_call"] == ()


def test_s3s_bad_turn_without_a_call_says_it_wrote_tags(monkeypatch):
    monkeypatch.setattr(no_call, "_warned", True)  # warned already: this test reads the feedback
    env = gym.make("searchgym/S3-v0", action_format="tools", **WORLD)
    env.reset(seed=0)
    _, _, terminated, _, info = env.step('<query>{"query": "Prolthunar"}</query>')
    assert not terminated and info["ended_without_call"] is False and info["tags_without_call"] == ("<query>", "</query>")
    assert info["invalid_reason"] == ("the reply has no tool call: call search, select or finish "
                                      "(it writes <query>, </query>: tags of a tag grammar, which this env does not read)")
    _, _, _, _, info = env.step("I am done")
    assert info["invalid_reason"] == "the reply has no tool call: call search, select or finish"
