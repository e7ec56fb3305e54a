"""The browse game through TRL's ``environment_factory`` (searchgym.integrations.trl): TRL finds
its four tools with the env's schemas (an array of citations, a numeric confidence, an integer
page), and the same decisions, one call a turn, give the same tool texts and score the same
through TRL's tool methods as through the env."""

from __future__ import annotations

import inspect
import json

import gymnasium as gym
import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")

from transformers.utils import get_json_schema  # noqa: E402

from deepresearch.small_world import world  # noqa: E402
from searchgym.deepresearch.agents import fact_pattern  # noqa: E402
from searchgym.integrations.trl import tool_dataset, tool_environment  # noqa: E402

ENV_ID = "DeepResearch-v0"


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    """The small world as a corpus JSONL and a FlashRAG JSONL of its questions (TRL's objects
    build their env from these options, as ``gym.make`` takes them)."""
    tmp_path = tmp_path_factory.mktemp("dr-trl")
    corpus, questions = world(tmp_path)
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps({"id": q.id, "question": q.question, "golden_answers": list(q.answers),
                                           "metadata": q.metadata}) + "\n" for q in questions))
    return {"corpus": str(corpus), "dataset": str(dataset), "top_k": 2, "max_turns": 8,
            "protocol_options": {"snippet_words": 40, "page_words": 200}}


def trl_tools(environment):
    """The tools TRL finds on an environment object, as GRPOTrainer finds them."""
    return {name: getattr(environment, name) for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")}


def one_call(name, arguments, i=0):
    return {"role": "assistant", "content": "", "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}]}


def test_trl_finds_the_four_tools_with_the_envs_schemas(options):
    environment = tool_environment(ENV_ID, **options)()
    tools = trl_tools(environment)
    assert list(tools) == ["answer", "find", "open", "search"]
    by_name = {t["function"]["name"]: t for t in environment._env("train").unwrapped.game.tools.tools}
    for name, method in tools.items():
        env = by_name[name]
        parameters = dict(env["function"]["parameters"])
        assert parameters.pop("additionalProperties", False) is False
        assert get_json_schema(method) == {**env, "function": {**env["function"], "parameters": parameters}}, name
    answer = get_json_schema(tools["answer"])["function"]["parameters"]
    assert answer["properties"]["citations"]["type"] == "array" and answer["properties"]["confidence"]["type"] == "number"
    assert answer["required"] == ["answer"]


def decisions(env, example):
    """A researcher's calls on ``example``, one a turn: search, find each clue, open the page it
    is on, a bad call (a page out of range), then answer citing the documents with a confidence."""
    store = env.unwrapped.protocol.store
    calls = [("search", {"query": example.question})]
    for constraint in example.metadata["constraints"]:
        doc_id, fact = constraint["doc_ids"][0], constraint["facts"][0]
        pattern = fact_pattern(fact)
        calls.append(("find", {"doc_id": doc_id, "pattern": pattern}))
        calls.append(("open", {"doc_id": doc_id, "page": store.find(doc_id, pattern).places[0][0]}))
    calls.append(("open", {"doc_id": example.metadata["gold_ids"][0], "page": 999}))
    citations = [*example.metadata["gold_ids"], *example.metadata["evidence_ids"]]
    calls.append(("answer", {"answer": example.answers[0], "citations": citations, "confidence": 85}))
    return calls


@pytest.mark.parametrize("row_index", [0, 3])
def test_the_same_decisions_score_the_same_through_trl_as_through_the_env(options, row_index):
    penalty = {"reward_options": {"invalid_action_penalty": -0.25}} if row_index else {}
    environment = tool_environment(ENV_ID, **options, **penalty)()
    row = tool_dataset(ENV_ID, split="train", **options)[row_index]
    assert row["prompt"] == [{"role": "user", "content": ""}]
    text = environment.reset(**row)
    env = gym.make(f"searchgym/{ENV_ID}", split="train", **options, **penalty)
    _, info = env.reset(options={"example_id": row["example_id"]})
    assert row["question"] in text and text.startswith(info["messages"][0]["content"].split("\n\nQuestion:")[0])
    total, texts = 0.0, []
    for i, (name, arguments) in enumerate(decisions(env, env.unwrapped.example)):
        text = getattr(environment, name)(**arguments)
        _, reward, terminated, truncated, info = env.step(one_call(name, arguments, i))
        total += reward
        texts.append(text)
        if not terminated:
            assert text == info["messages"][-1]["content"]
    assert terminated and not truncated and text == "Answer received. The episode is over."
    assert texts[2].startswith("[") and "(page " in texts[2] and texts[-2].startswith("Error: ")  # a page read; the bad call
    assert environment.get_reward() == pytest.approx(total)
    components = info["reward_components"]
    assert components["correct"] == 1.0 and components["evidence_recall"] == 1.0 and components["citation_precision"] == 1.0
    summary = environment.episode.summary()
    assert summary["answered"] and summary["prediction"] == env.unwrapped.example.answers[0] and summary["num_invalid"] == 1
    assert summary["reward_components"] == components
    assert environment.search(query="more") == "Error: the episode is over; no tool can be called now."
    assert environment.get_reward() == pytest.approx(total)


def test_a_cited_answer_with_bad_arguments_gets_the_envs_error_and_penalty(options):
    penalized = {**options, "reward_options": {"invalid_action_penalty": -0.5}}
    environment = tool_environment(ENV_ID, **penalized)()
    row = tool_dataset(ENV_ID, split="train", limit=1, **penalized)[0]
    environment.reset(**row)
    env = gym.make(f"searchgym/{ENV_ID}", split="train", **penalized)
    env.reset(options={"example_id": row["example_id"]})
    bad = [("answer", {"answer": "x", "confidence": 140}), ("answer", {"answer": "x", "citations": [1, 2]}),
           ("open", {"doc_id": "nope"}), ("find", {"doc_id": "p0"})]
    for i, (name, arguments) in enumerate(bad):
        text = getattr(environment, name)(**arguments)
        _, reward, terminated, _, info = env.step(one_call(name, arguments, i))
        assert not terminated and text == info["messages"][-1]["content"] and reward == -0.5
        assert text.startswith("Error: ") and text.endswith(" This bad call costs 0.5 reward.")
    assert environment.episode.summary()["num_invalid"] == 4
