"""One table of decisions (right, wrong, malformed, over budget: tests/tool_parity.py's
``ecosystem_scenarios``) played through every ecosystem route, each reward equal to the tag
game's for the same decisions (Gymnasium, the reference).

- Gymnasium: the tags env and the tools env (here, in every venv);
- TRL: ``tool_environment`` through TRL's ``parse_response`` and tool loop (in .venv);
- verifiers: ``vf-eval searchgym-verifiers`` against a scripted chat server that writes the
  table's texts (in .venv-verifiers: ``make test-verifiers``);
- OpenEnv: the env served by OpenEnv's HTTP/WebSocket server, stepped by OpenEnv's client
  with the table's texts (in .venv-openenv: ``make test-openenv``).

A route whose package is missing skips. verl's leg of the older table is in test_verl.py.
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tool_parity import GAMES, SPLIT, WORLD, Scenario, ecosystem_scenarios, example, tags_reward, tools_reward

CASES = [(env_id, s) for env_id in GAMES for s in ecosystem_scenarios(env_id)]
IDS = [f"{env_id.removeprefix('searchgym/')}-{s.name}" for env_id, s in CASES]


# --------------------------------------------------------------------------- a scripted chat server
@contextmanager
def scripted_server(scripts: dict[str, list[str]] | None = None):
    """An OpenAI-compatible chat server in a thread on 127.0.0.1; yields its API root.

    Model ``player``: tests/chat_server.py's tool-calling player (search the question, answer
    the first title). Model ``script``: for the conversation whose user messages hold a
    question of ``scripts``, the text of its turn (the number of assistant messages so far),
    sent as the reply's content (calls as raw hermes text, which the env's parser reads)."""
    from chat_server import player_reply

    scripts = dict(scripts or {})
    counter = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            counter[0] += 1
            if body.get("model") == "player":
                reply = player_reply(body, counter[0])
            else:
                texts = next((t for q, t in scripts.items() if any(q in str(m.get("content")) for m in body["messages"] if m.get("role") == "user")), None)
                if texts is None:
                    return self.answer(404, {"error": {"message": "no script for this conversation"}})
                turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
                content = texts[turn] if turn < len(texts) else ""
                reply = {"id": f"chatcmpl-{counter[0]}", "object": "chat.completion", "model": body["model"],
                         "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 10, "completion_tokens": max(1, len(content) // 4)}}
            # The fields verifiers' trace reads from every completion.
            reply["created"] = int(time.time())
            reply["usage"]["total_tokens"] = reply["usage"]["prompt_tokens"] + reply["usage"]["completion_tokens"]
            self.answer(200, reply)

        def answer(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- Gymnasium
@pytest.mark.parametrize(("env_id", "scenario"), CASES, ids=IDS)
def test_gymnasium_tools_env_scores_the_table_as_the_tag_game(env_id: str, scenario: Scenario):
    assert tools_reward(env_id, scenario.tools, scenario.index) == pytest.approx(tags_reward(env_id, scenario.tags, scenario.index))


def test_the_table_tells_its_decisions_apart():
    for env_id in GAMES:
        rewards = {s.name: tags_reward(env_id, s.tags, s.index) for s in ecosystem_scenarios(env_id)}
        assert rewards["right"] > rewards["wrong"], env_id
        assert rewards["malformed"] < rewards["right"], env_id  # the unreadable turn costs its penalty
        assert rewards["over-budget"] < rewards["right"], env_id


# --------------------------------------------------------------------------- TRL
@pytest.mark.parametrize(("env_id", "scenario"), CASES, ids=IDS)
def test_trl_scores_the_table_as_the_tag_game(env_id: str, scenario: Scenario):
    pytest.importorskip("trl", reason="TRL is in .venv (make install)")
    from integrations.test_tool_parity import trl_reward
    from integrations.test_trl_tools import hermes_tokenizer
    from trl.chat_template_utils import parse_response

    tokenizer = hermes_tokenizer()
    prefix = tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=False),
                       add_special_tokens=False)["input_ids"]
    reward, _ = trl_reward(env_id, scenario.tools, scenario.index, (tokenizer, parse_response, prefix))
    assert reward == pytest.approx(tags_reward(env_id, scenario.tags[: scenario.trl_turns], scenario.index))


# --------------------------------------------------------------------------- verifiers
def vf_eval_rewards(env_id: str, action_format: str, scenarios: list[Scenario], folder) -> dict[str, float]:
    """Each scenario's question played under ``vf-eval`` by the scripted server; example id -> reward."""
    import subprocess
    import sys
    from pathlib import Path

    texts = {example(env_id, s.index).question: list(s.tools if action_format == "tools" else s.tags) for s in scenarios}
    ids = [example(env_id, s.index).id for s in scenarios]
    vf_eval = str(Path(sys.executable).with_name("vf-eval"))
    with scripted_server(texts) as url:
        command = [vf_eval, "searchgym-verifiers", "--env.taskset.env-id", env_id, "--env.taskset.split", SPLIT,
                   "--env.taskset.env-kwargs", json.dumps(WORLD), "--env.taskset.action-format", action_format,
                   "--model", "script", "--client.base-url", url, "--select.include.ids", *ids,
                   "--output-dir", str(folder), "--push", "false", "--no-rich"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return read_traces(folder)


def read_traces(folder) -> dict[str, float]:
    """example id -> the trace's reward, from every traces.jsonl under ``folder``."""
    from pathlib import Path

    out = {}
    for path in Path(folder).rglob("traces.jsonl"):
        for line in path.read_text().splitlines():
            episode = json.loads(line)
            assert episode["ok"], episode["errors"]
            (trace,) = episode["traces"]
            out[episode["task"]["data"]["example_id"]] = sum(r["score"] * r["weight"] for r in trace["rewards"].values())
    return out


@pytest.mark.parametrize("action_format", ["tags", "tools"])
@pytest.mark.parametrize("env_id", GAMES)
def test_verifiers_scores_the_table_as_the_tag_game(env_id: str, action_format: str, tmp_path):
    pytest.importorskip("verifiers.v1", reason="verifiers lives in .venv-verifiers: make test-verifiers")
    scenarios = ecosystem_scenarios(env_id)
    rewards = vf_eval_rewards(env_id, action_format, scenarios, tmp_path)
    expected = {example(env_id, s.index).id: tags_reward(env_id, s.tags, s.index) for s in scenarios}
    assert rewards == pytest.approx(expected)


# --------------------------------------------------------------------------- OpenEnv
@pytest.mark.parametrize("action_format", ["tags", "tools"])
@pytest.mark.parametrize("env_id", GAMES)
def test_openenv_scores_the_table_as_the_tag_game(env_id: str, action_format: str):
    pytest.importorskip("openenv", reason="openenv lives in .venv-openenv: make test-openenv")
    from integrations.test_openenv import served

    with served(env_id, action_format=action_format, split=SPLIT, **WORLD) as client:
        for s in ecosystem_scenarios(env_id):
            total, result = 0.0, client.reset(example_id=example(env_id, s.index).id)
            for text in s.tools if action_format == "tools" else s.tags:
                result = client.step(text)
                total += result.reward or 0.0
                if result.done:
                    break
            assert result.done, s.name
            assert total == pytest.approx(tags_reward(env_id, s.tags, s.index)), s.name
