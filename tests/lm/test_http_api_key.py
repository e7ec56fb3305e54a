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
