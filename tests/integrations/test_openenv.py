"""searchgym envs served as OpenEnv 0.10.0 environments: ``python -m searchgym.integrations.openenv``
started on 127.0.0.1 as a process, stepped over its WebSocket by OpenEnv's own ``EnvClient``
(in .venv-openenv: ``make test-openenv``); the rewards equal the in-process env's."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

pytest.importorskip("openenv", reason="openenv lives in .venv-openenv: make test-openenv")

import gymnasium as gym  # noqa: E402

import searchgym  # noqa: E402,F401
from searchgym.envs.access import search_env  # noqa: E402

WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}}


@contextlib.contextmanager
def served(env_id: str, **env_kwargs):
    """The server as a process on 127.0.0.1 (any free port) and a connected sync client; stopped after."""
    from searchgym.integrations.openenv import SearchGymClient

    with served_url(env_id, **env_kwargs) as url, SearchGymClient(base_url=url).sync() as client:
        yield client


def test_the_served_env_steps_like_the_env_in_process():
    env = gym.make("searchgym/SearchR1-v0", split="dev", **WORLD)
    protocol, examples = search_env(env).protocol, search_env(env).examples[:3]
    from searchgym.envs.protocols import Answer, Search

    with served("SearchR1-v0", split="dev", **WORLD) as client:
        for example in examples:
            turns = [protocol.write([Search(example.question)]), protocol.write([Answer(example.answers[0])])]
            first = client.reset(example_id=example.id)
            local, _ = env.reset(options={"example_id": example.id})
            assert first.observation.text == local and not first.done
            for text in turns:
                result = client.step(text)
                observation, reward, terminated, truncated, info = env.step(text)
                assert (result.observation.text, result.reward, result.done) == (observation, pytest.approx(reward), terminated or truncated)
            assert result.observation.reward_components == pytest.approx(info["reward_components"])
            state = client.state()
            assert (state.example_id, state.step_count, state.num_searches) == (example.id, 2, 1)
            assert state.episode_return == pytest.approx(result.reward)


def test_a_tools_env_takes_assistant_messages_and_shows_its_tools():
    with served("SearchR1-v0", split="dev", action_format="tools", **WORLD) as client:
        first = client.reset()
        assert [t["function"]["name"] for t in first.observation.tools] == ["search", "answer"]
        call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": {"query": "founded"}}}
        result = client.step({"role": "assistant", "content": "", "tool_calls": [call]})
        assert result.observation.messages[-1]["role"] == "tool" and not result.done


# --------------------------------------------------------------------------- TRL's OpenEnv route
@pytest.fixture(scope="module")
def trl_parts():
    pytest.importorskip("trl", reason="TRL's OpenEnv route: pip install trl==1.16.0 into .venv-openenv (docs/ecosystems.md)")
    from trl.chat_template_utils import parse_response

    from integrations.test_trl_tools import hermes_tokenizer

    tokenizer = hermes_tokenizer()
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=False)
    return tokenizer, parse_response, tokenizer(prefix, add_special_tokens=False)["input_ids"]


@contextlib.contextmanager
def served_url(env_id: str, **env_kwargs):
    """The server as a process on 127.0.0.1 (any free port): its URL; stopped after."""
    process = subprocess.Popen([sys.executable, "-m", "searchgym.integrations.openenv", "--env-id", env_id, "--port", "0",
                                "--env-options", json.dumps(env_kwargs)], stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/RECON-v0", "searchgym/RSearch-v0"])
def test_trls_openenv_route_scores_the_ecosystem_table_as_trl_in_process(env_id, trl_parts):
    """``trl_environment(url)`` (TRL's OpenEnv route: environment_factory objects holding an
    OpenEnv client) played as TRL 1.16's tool loop plays (its parse_response; a reply without
    a call it can read ends the loop; then unread_calls and get_reward) scores the table as the
    tag game scores the turns TRL plays, i.e. as tool_environment does in-process."""
    from tool_parity import SPLIT, WORLD as TABLE_WORLD, ecosystem_scenarios, example, tags_reward

    from searchgym.integrations.openenv import OpenEnvToolEnvironment, trl_environment
    from searchgym.integrations.trl import unread_calls

    tokenizer, parse_response, prefix = trl_parts
    with served_url(env_id, split=SPLIT, action_format="tools", **TABLE_WORLD) as url:
        factory = trl_environment(url)
        for scenario in ecosystem_scenarios(env_id):
            environment = factory()
            assert isinstance(environment, OpenEnvToolEnvironment)
            prompt = environment.reset(example_id=example(env_id, scenario.index).id, prompt=[{"role": "user", "content": ""}])
            assert example(env_id, scenario.index).question in prompt and "ends the episode without an answer" in prompt
            completion = []
            for text in scenario.tools:
                message = parse_response(tokenizer, tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"], prefix=prefix)
                completion.append(message)
                if not message.get("tool_calls"):
                    break
                for call in message["tool_calls"]:
                    function = call["function"]
                    completion.append({"role": "tool", "name": function["name"], "content": getattr(environment, function["name"])(**function["arguments"])})
            assert unread_calls([completion], environments=[environment]) == [0.0]
            reward = environment.get_reward()
            environment.close()
            assert reward == pytest.approx(tags_reward(env_id, scenario.tags[: scenario.trl_turns], scenario.index)), scenario.name
