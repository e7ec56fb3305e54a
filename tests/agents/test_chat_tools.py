"""The chat-tools agent and the bench's tools runs, against a fake chat-completions server
process on 127.0.0.1 (tests/chat_server.py) that plays the games through tool calls."""

import json

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from chat_server import TITLE, running

from searchgym.agents import Task, make_agent, run_episodes
from searchgym.agents.base import Agent
from searchgym.agents.chat_tools import ChatRecord, ChatToolAgent
from searchgym.bench import BenchConfig, read_episodes, run_bench
from searchgym.cli import main
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search
from searchgym.error import ConfigError
from searchgym.lm.http import OpenAILM

WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running(tmp_path_factory.mktemp("chat")) as process:
        yield process


@pytest.fixture
def player(server):
    server.clear()
    return OpenAILM("player", base_url=server.url, tokenizer=None, backoff=0.01)


def tools_envs(n, env_id="SearchR1-v0", **options):
    return [gym.make(f"searchgym/{env_id}", action_format="tools", **WORLD, **options) for _ in range(n)]


def tasks(env, n):
    return [Task(ex.id) for ex in search_env(env).examples[:n]]


def search_call(call_id="c1", arguments='{"query": "Kelvaro"}', name="search"):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def scripted(*calls, content=""):
    message = {"role": "assistant", "content": content, "tool_calls": list(calls) or None}
    return {"body": {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}}


def test_the_agent_plays_episodes_through_the_servers_tool_calls(server, player):
    envs = tools_envs(2)
    results = run_episodes(envs, ChatToolAgent.for_env(envs[0], player), tasks(envs[0], 3), keep_trajectories=True)
    assert [r.outcome for r in results] == ["answered"] * 3 and [r.num_searches for r in results] == [1, 1, 1]
    sent = server.requests()
    assert len(sent) == 6 and all(r["tools"] == envs[0].unwrapped.game.tools.tools for r in sent)
    second = [r for r in sent if len(r["messages"]) > 1]
    # The env's messages hold arguments as dicts; they went out as JSON text, and the tool result after them.
    assistant, tool = second[0]["messages"][1], second[0]["messages"][2]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["query"] in results[0].question + results[1].question + results[2].question
    assert tool["role"] == "tool" and tool["tool_call_id"] == assistant["tool_calls"][0]["id"] and "(Title: " in tool["content"]
    for result in results:
        record = result.trajectory
        assert isinstance(record, ChatRecord) and len(record.completion_tokens) == 2
        # Generated tokens are the server's count; context tokens what it read on the last turn plus that turn.
        assert result.generated_tokens == sum(record.completion_tokens) > 0
        assert result.context_tokens == record.prompt_tokens[-1] + record.completion_tokens[-1] == len(record)
        assert record.messages[-1]["tool_calls"][0]["function"]["name"] == "answer"
        assert result.prediction == json.loads(record.messages[-1]["tool_calls"][0]["function"]["arguments"])["answer"]


def test_the_models_bad_calls_are_answered_by_the_env_with_the_penalty(server, player):
    env = tools_envs(1, reward_options={"invalid_action_penalty": -0.25})[0]
    server.script("player", scripted(search_call("a", '{"query": "Kelvaro"'), search_call("b", '{"query": "x"}', "lookup")),
                  scripted(search_call("c", '{"q": "x"}')))  # then the player's own turns
    (result,) = run_episodes([env], ChatToolAgent.for_env(env, player), tasks(env, 1))
    assert result.outcome == "answered" and result.num_invalid == 3 and "invalid_turn" in result.flags
    assert result.reward == pytest.approx(result.em - 0.75)
    conversation = server.requests()[-1]["messages"]
    errors = [m["content"] for m in conversation if m["role"] == "tool" and m["content"].startswith("Error")]
    assert errors == [
        "Error: the arguments of \"search\" are invalid JSON (Expecting ',' delimiter at character 19). This bad call costs 0.25 reward.",
        'Error: there is no tool "lookup"; the tools are search, answer. This bad call costs 0.25 reward.',
        'Error: search(query: string) is missing "query". This bad call costs 0.25 reward.',
    ]


def test_calls_a_server_without_a_tool_parser_sends_as_text_are_read_by_the_envs_parser(server, player):
    env = tools_envs(1)[0]
    text = 'Searching.\n<tool_call>{"name": "search", "arguments": {"query": "Kelvaro Industries"}}</tool_call>'
    server.script("player", scripted(content=text))
    (result,) = run_episodes([env], ChatToolAgent.for_env(env, player), tasks(env, 1))
    assert result.num_searches == 1 and result.num_invalid == 0 and result.outcome == "answered"
    assert server.requests()[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"query": "Kelvaro Industries"}'


class TagTwin(Agent):
    """The fake server's player, written as the protocol's tags: search the question, then
    answer with the first title of the results (chat_server.player_turn)."""

    name = "tag-twin"

    def __init__(self, env):
        self.protocol = search_env(env).protocol

    def act(self, observations, infos):
        out = []
        for observation, info in zip(observations, infos):
            if info["turn"] == 0:
                out.append(self.protocol.write([Search(info["question"])], "I need to search."))
            else:
                title = TITLE.search(observation)
                out.append(self.protocol.write([Answer(title.group(1) if title else "unknown")]))
        return out


@pytest.mark.parametrize("env_id", ["SearchR1-v0", "R1Searcher-v0"])
def test_the_bench_plays_a_served_model_through_tools_beside_tags_same_questions_same_scores(server, player, tmp_path, env_id):
    config = BenchConfig(
        runs=[(env_id, "chat-tools"), (env_id, TagTwin)], model="player", backend="openai",
        backend_options={"base_url": server.url}, env_options={"*": WORLD}, limit=4, num_envs=2,
    )
    results = run_bench(config, tmp_path, progress=False)
    tools_row, tags_row = results.rows
    assert (tools_row["label"], tools_row["action_format"], tags_row["action_format"]) == (f"chat-tools @ {env_id}", "tools", "tags")
    by_run = {label: {r["example_id"]: r for r in records} for label, records in results.episodes.items()}
    tools_episodes, tags_episodes = by_run[tools_row["label"]], by_run[tags_row["label"]]
    assert tools_episodes.keys() == tags_episodes.keys() and len(tools_episodes) == 4
    for example_id, played in tools_episodes.items():
        twin = tags_episodes[example_id]
        keys = ("prediction", "reward", "reward_components", "em", "f1", "num_searches", "num_turns", "outcome")
        assert {k: played[k] for k in keys} == {k: twin[k] for k in keys}
    assert tools_row["generated_tokens"] > 0 and tools_row["failures"] == "-"
    assert json.loads((tmp_path / "summary.json").read_text())["runs"][0]["action_format"] == "tools"
    # Resuming plays nothing again.
    requests = len(server.requests())
    run_bench(config, tmp_path, progress=False)
    assert len(server.requests()) == requests


class ToolTwin(Agent):
    """The same player as an agent of one's own that writes tool calls (no server)."""

    name = "tool-twin"
    action_format = "tools"

    def act(self, observations, infos):
        out = []
        for observation, info in zip(observations, infos):
            if info["turn"] == 0:
                name, arguments = "search", {"query": info["question"]}
            else:
                title = TITLE.search(observation)
                name, arguments = "answer", {"answer": title.group(1) if title else "unknown"}
            out.append({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}]})
        return out


def test_an_agent_of_ones_own_that_declares_tools_gets_a_tools_env(tmp_path):
    results = run_bench(BenchConfig(runs=[("RSearch-v0", ToolTwin), ("RSearch-v0", TagTwin)], env_options={"*": WORLD}, limit=3), None, progress=False)
    tools_row, tags_row = results.rows
    assert (tools_row["action_format"], tags_row["action_format"]) == ("tools", "tags")
    keys = ("n", "em", "f1", "reward", "searches", "turns")
    assert {k: tools_row[k] for k in keys} == {k: tags_row[k] for k in keys} and tools_row["searches"] == 1.0

    def factory():
        return TagTwin.__new__(TagTwin)

    factory.action_format = "tool calls"
    with pytest.raises(ConfigError, match=r"^The agent .*factory declares action_format='tool calls'; expected 'tags' or 'tools'\.$"):
        run_bench(BenchConfig(runs=[("RSearch-v0", factory)], env_options={"*": WORLD}, limit=1), None, progress=False)


def test_a_malformed_reply_is_each_episodes_backend_error_and_a_resume_plays_them_again(server, player, tmp_path):
    broken = {"body": {"choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [{"type": "function",
              "function": {"name": "search", "arguments": "{}"}}]}}]}}
    server.script("player", broken)
    config = BenchConfig(runs=[("SearchR1-v0", "chat-tools")], model="player", backend="openai",
                         backend_options={"base_url": server.url, "max_retries": 0}, env_options={"*": WORLD}, limit=2, num_envs=2)
    first = run_bench(config, tmp_path, progress=False)
    outcomes = sorted(r["outcome"] for r in first.episodes["chat-tools @ SearchR1-v0"])
    assert outcomes == ["backend_error", "backend_error"]  # one call for the round's turns: both episodes record it
    assert first.episodes["chat-tools @ SearchR1-v0"][0]["error"] == (
        f"The server at {server.url}/chat/completions answered with a malformed chat completion: expected "
        "choices[0].message.tool_calls[0].id to be a non-empty string of at most 256 characters, got nothing (the key is missing)."
    )
    again = run_bench(config, tmp_path, progress=False)
    assert sorted(r["outcome"] for r in again.episodes["chat-tools @ SearchR1-v0"]) == ["answered", "answered"]
    assert len(read_episodes(tmp_path / "episodes.jsonl")) == 2


def test_sampled_turns_carry_a_seed_per_episode_and_turn(server, player):
    envs = tools_envs(2)
    agent = ChatToolAgent.for_env(envs[0], player, temperature=0.7, seed=3)
    run_episodes(envs, agent, tasks(envs[0], 2))
    first = sorted((len(r["messages"]), r["seed"]) for r in server.requests())
    server.clear()
    run_episodes(envs[:1], ChatToolAgent.for_env(envs[0], player, temperature=0.7, seed=3), tasks(envs[0], 2))
    assert sorted((len(r["messages"]), r["seed"]) for r in server.requests()) == first  # one env or two: the same seeds
    assert len({seed for _, seed in first}) == 4 and all(r["temperature"] == 0.7 for r in server.requests())


def test_the_bench_says_what_a_tools_run_needs_before_any_model_loads(server, player, tmp_path):
    runs = [("SearchR1-v0", "chat-tools")]
    with pytest.raises(ConfigError) as e:
        run_bench(BenchConfig(runs=runs, model="player"), tmp_path, progress=False)
    assert str(e.value) == (
        "The 'chat-tools' agent talks to a chat-completions server: use backend 'openai' with its base_url (--backend openai "
        "--backend-option base_url=http://HOST:PORT/v1, --model the served name), got backend 'transformers'."
    )
    with pytest.raises(ConfigError, match=r"^The run SearchR1-v0:chat-tools plays native tool calls, but the env options set action_format='tags'; "):
        run_bench(BenchConfig(runs=runs, model="player", backend="openai", env_options={"SearchR1-v0": {"action_format": "tags"}}), tmp_path, progress=False)
    from searchgym.lm.testing import tiny_tokenizer
    from searchgym.lm.scripted import ScriptedLM

    with pytest.raises(ConfigError, match=r"^The 'chat-tools' agent needs a chat-completions model \(an OpenAILM\), got ScriptedLM as the model\.$"):
        run_bench(BenchConfig(runs=runs, model=ScriptedLM(lambda p: "x", tiny_tokenizer())), tmp_path, progress=False)
    tags_env = gym.make("searchgym/SearchR1-v0", **WORLD)
    with pytest.raises(ConfigError, match=r"^ChatToolAgent plays envs made with action_format='tools' .*got an env with action_format='tags'\.$"):
        make_agent("chat-tools", tags_env, lm=player)
    with pytest.raises(ConfigError, match=r"^ChatToolAgent expects a chat-completions model .*got ScriptedLM\.$"):
        ChatToolAgent(ScriptedLM(lambda p: "x", tiny_tokenizer()))
    with pytest.raises(ConfigError, match=r"^ChatToolAgent expects extra_body to be a JSON object, got '\{nope' "):
        ChatToolAgent(player, extra_body="{nope")
    agent = ChatToolAgent(player)
    observation, info = tags_env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"whose info holds 'messages' and 'tools'; the info of episode 0 has no messages\.$"):
        agent.act([observation], [info])


def test_cli_bench_with_a_served_model_through_tools(server, player, tmp_path, capsys):
    code = main(["bench", "--run", "SearchR1-v0:chat-tools", "--run", "SearchR1-v0:oracle", "--model", "player", "--backend", "openai",
                 "--backend-option", f"base_url={server.url}", "--agent-option", 'chat-tools:extra_body={"top_k": 5}',
                 "--limit", "2", "--corpus-option", "seed=7", "--corpus-option", "num_passages=400", "--out", str(tmp_path), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0 and "| chat-tools @ SearchR1-v0 | 2 |" in printed and "| oracle @ SearchR1-v0 | 2 | 1.000 |" in printed
    assert all(r["top_k"] == 5 for r in server.requests())
