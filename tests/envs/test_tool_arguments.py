"""A call's arguments in every form a client sends them score the same (issue 55, item 4): the
object, its JSON text (the OpenAI API, vLLM's server), JSON text of a string that holds it (vLLM's
hermes parser ``json.dumps`` whatever the model wrote, so arguments the model wrote as a string
arrive encoded twice) and the model's own hermes text with the arguments as an object or as a
string. A string that does not hold a JSON object is a bad call in every form."""

import json

import pytest

from searchgym.envs.tools.messages import openai_call
from searchgym.envs.tools.parsers import RawCall
from tool_helpers import make_env

PENALTY = -0.5


def as_message(name, arguments, encode):
    """An assistant message with one call whose arguments are ``encode(arguments)``."""
    return {"role": "assistant", "content": "", "tool_calls": [{"id": "c0", "type": "function",
                                                                "function": {"name": name, "arguments": encode(arguments)}}]}


def as_hermes(name, arguments, encode):
    return "<tool_call>" + json.dumps({"name": name, "arguments": encode(arguments)}) + "</tool_call>"


def twice(value):
    return json.dumps(json.dumps(value))


#: form -> action for ``(name, arguments)``; each is how some client sends the same call.
FORMS = {
    "message, object": lambda n, a: as_message(n, a, lambda v: v),
    "message, JSON text (OpenAI API, vLLM)": lambda n, a: as_message(n, a, json.dumps),
    "message, JSON of a JSON string (vLLM's hermes parser on string arguments)": lambda n, a: as_message(n, a, twice),
    "hermes text, object": lambda n, a: as_hermes(n, a, lambda v: v),
    "hermes text, string (what vLLM encodes twice)": lambda n, a: as_hermes(n, a, json.dumps),
}


def play(env_id, form, *, evidence=False):
    """Search, then answer right; the rewards, observations and recorded arguments."""
    env = make_env(env_id, reward_options={"invalid_action_penalty": PENALTY})
    env.reset(seed=3)
    gold = env.unwrapped.example.answers[0]
    obs, r1, *_ = env.step(FORMS[form]("search", {"query": env.unwrapped.example.question}))
    answer = {"answer": gold} | ({"evidence": obs.split("\n")[0]} if evidence else {})
    _, r2, terminated, _, info = env.step(FORMS[form]("answer", answer))
    recorded = [c["function"]["arguments"] for m in info["messages"] if m["role"] == "assistant" for c in m["tool_calls"]]
    return obs, (r1, r2), terminated, info["num_invalid"], recorded


@pytest.mark.parametrize("env_id, evidence", [("searchgym/SearchR1-v0", False), ("searchgym/R1Searcher-v0", False),
                                              ("searchgym/RECON-v0", False), ("searchgym/RSearch-v0", True)])
def test_every_form_of_the_arguments_scores_the_same(env_id, evidence):
    results = {form: play(env_id, form, evidence=evidence) for form in FORMS}
    first = results["message, object"]
    assert first[2] is True and first[3] == 0 and all(type(a) is dict for a in first[4])
    for form, result in results.items():
        assert result == first, form


def test_s3_selects_from_twice_encoded_arguments():
    outcomes = []
    for form in FORMS:
        env = make_env("searchgym/S3-v0", reward_options={"invalid_action_penalty": PENALTY})
        env.reset(seed=3)
        env.step(FORMS[form]("search", {"query": env.unwrapped.example.question}))
        obs, reward, _, _, info = env.step(FORMS[form]("select", {"doc_ids": [1, 2]}))
        outcomes.append((obs, reward, info["num_invalid"]))
    assert outcomes[0][2] == 0 and outcomes[0][0].startswith("Kept documents 1, 2.")
    assert all(o == outcomes[0] for o in outcomes), outcomes


@pytest.mark.parametrize("inner", ["hello", "[1, 2]", '"{\\"query\\": \\"x\\"}"', "{\"query\": ", "42"])
def test_a_string_that_holds_no_json_object_is_a_bad_call_in_every_form(inner):
    rewards = set()
    for action in (as_message("search", inner, json.dumps), as_hermes("search", inner, lambda v: v)):
        env = make_env("searchgym/SearchR1-v0", reward_options={"invalid_action_penalty": PENALTY})
        env.reset(seed=3)
        obs, reward, terminated, _, info = env.step(action)
        assert obs.startswith('Error: the arguments of "search" ') and info["num_invalid"] == 1 and not terminated, (inner, obs)
        rewards.add(reward)
    assert rewards == {PENALTY}


def test_openai_call_decodes_a_json_string_once_more_only_when_it_holds_an_object():
    function = {"name": "search", "arguments": twice({"query": "x"})}
    assert openai_call({"id": "a", "function": function}) == RawCall("search", {"query": "x"}, "a")
    assert openai_call({"function": {"name": "finish", "arguments": json.dumps("")}}) == RawCall("finish", {}, None)
    three = json.dumps(twice({"query": "x"}))  # three times: not what any client sends
    assert openai_call({"function": {"name": "search", "arguments": three}}).error == \
        'the arguments of "search" must be a JSON object, got a string'
    assert openai_call({"function": {"name": "search", "arguments": json.dumps("x")}}).error == \
        'the arguments of "search" must be a JSON object, got a string'
