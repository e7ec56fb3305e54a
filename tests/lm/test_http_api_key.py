"""The OpenAI-compatible backend's key: ``api_key=`` (``--backend-option api_key=...`` on the
command line, a frozen role's mapping) wins over ``$OPENAI_API_KEY``, which wins over
``EMPTY`` (what a local vLLM server takes). The key goes out as ``Authorization: Bearer``."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searchgym.lm.http import OpenAILM
from searchgym.lm.registry import load_lm
from searchgym.lm.testing import tiny_tokenizer


@pytest.fixture
def server():
    """A completions server that records the Authorization header of every request."""
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("Authorization"))
            data = json.dumps({"choices": [{"index": 0, "text": "Paris", "finish_reason": "stop", "logprobs": None}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_port}/v1", seen
    httpd.shutdown()
    httpd.server_close()


def sent_key(url, seen, **options):
    (g,) = OpenAILM("m", base_url=url, tokenizer=tiny_tokenizer(), **options).generate(["Q"], max_new_tokens=2, temperature=0)
    assert g.text == "Paris"
    return seen[-1]


def test_the_option_wins_over_the_environment_which_wins_over_empty(server, monkeypatch):
    url, seen = server
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert sent_key(url, seen) == "Bearer sk-from-env"
    assert sent_key(url, seen, api_key="sk-from-option") == "Bearer sk-from-option"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert sent_key(url, seen) == "Bearer EMPTY"
    assert sent_key(url, seen, api_key="sk-from-option") == "Bearer sk-from-option"


def test_load_lm_passes_the_key_option_as_the_bench_passes_backend_options(server, monkeypatch):
    """``searchgym bench --backend openai --backend-option api_key=K`` loads the model with
    ``load_lm(model, backend="openai", api_key=K, ...)``."""
    url, seen = server
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    lm = load_lm("m", backend="openai", base_url=url, api_key="sk-from-option", tokenizer=tiny_tokenizer())
    lm.generate(["Q"], max_new_tokens=2, temperature=0)
    assert seen == ["Bearer sk-from-option"]


def test_a_key_given_as_an_option_is_never_written_to_the_run_folder_and_changes_no_resume(server, tmp_path):
    """``config.json`` and ``summary.json`` keep ``<secret: not recorded>`` in place of the
    key, and a rerun under another key resumes, as one under another ``OPENAI_API_KEY`` does."""
    from searchgym.bench import BenchConfig, run_bench
    from searchgym.plugins import NOT_RECORDED, without_secrets

    url, seen = server

    def bench(key):
        config = BenchConfig(runs=[("SearchR1-v0", "lm")], model="tiny", backend="openai",
                             backend_options={"base_url": url, "api_key": key, "max_retries": 0, "tokenizer": tiny_tokenizer()},
                             limit=1, num_envs=1)
        return run_bench(config, tmp_path, progress=False)

    (row,) = bench("sk-first-secret").rows
    assert row["n"] == 1 and seen and set(seen) == {"Bearer sk-first-secret"}
    for name in ("config.json", "summary.json"):
        text = (tmp_path / name).read_text()
        assert "sk-first-secret" not in text and NOT_RECORDED in text
    asked = len(seen)
    (again,) = bench("sk-second-secret").rows  # resumed: the one episode is not played again
    assert again["n"] == 1 and len(seen) == asked
    assert without_secrets({"api_key": "k", "max_new_tokens": 3, "nested": [{"Token": "t", "token_budget": 2}]}) == {
        "api_key": NOT_RECORDED, "max_new_tokens": 3, "nested": [{"Token": NOT_RECORDED, "token_budget": 2}]}
