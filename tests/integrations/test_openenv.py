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

    process = subprocess.Popen([sys.executable, "-m", "searchgym.integrations.openenv", "--env-id", env_id, "--port", "0",
                                "--env-options", json.dumps(env_kwargs)], stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with SearchGymClient(base_url=url).sync() as client:
            yield client
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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
