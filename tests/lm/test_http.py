"""The OpenAI-compatible HTTP backend: against a real vLLM server on loopback, and against
a small local server that misbehaves on purpose (timeouts, 5xx, garbage, 4xx)."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lm_helpers import ascii_window

from searchgym.error import BackendError, ConfigError
from searchgym.lm.http import OpenAILM
from searchgym.lm.testing import tiny_tokenizer


# ---------------------------------------------------------------- a misbehaving server
class Script:
    """Replies handed out in turn: (status, body), ("hang", seconds), ("raw", write) where
    ``write(wfile)`` writes the whole response itself, or (status, body, headers); a reply
    may also be a function of the request body that returns one."""

    def __init__(self, replies):
        self.replies, self.requests = list(replies), []
        self.lock = threading.Lock()


def serve(script):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.requests.append(body)
                reply = script.replies.pop(0) if len(script.replies) > 1 else script.replies[0]
            status, payload, *headers = reply(body) if callable(reply) else reply
            if status == "raw":
                try:
                    payload(self.wfile)
                except OSError:
                    pass  # the client gave up (its deadline)
                self.close_connection = True
                return
            if status == "hang":
                time.sleep(payload)
                status, payload = 200, "{}"
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                for name, value in (headers[0] if headers else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/v1"


def completion(texts, finish="stop", stop_reason=None, vllm=True):
    choices = [{"index": i, "text": t, "finish_reason": finish, "stop_reason": stop_reason, "logprobs": None} for i, t in enumerate(texts)]
    if not vllm:  # OpenAI's API says nothing of what stopped a completion
        for c in choices:
            del c["stop_reason"]
    return {"choices": choices}


@pytest.fixture
def fake():
    servers = []

    def make(*replies, **options):
        script = Script(replies)
        server, url = serve(script)
        servers.append(server)
        options.setdefault("backoff", 0.01)
        return OpenAILM("m", base_url=url, tokenizer=tiny_tokenizer(), **options), script

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


def test_retries_server_errors_then_succeeds(fake):
    lm, script = fake((500, "overloaded"), (503, "busy"), (200, completion(["Paris"])))
    (g,) = lm.generate(["Q"], max_new_tokens=4, temperature=0)
    assert g.text == "Paris" and lm.last_attempts == 3 and len(script.requests) == 3
    assert script.requests[0]["include_stop_str_in_output"] is True and script.requests[0]["max_tokens"] == 4


def test_gives_up_after_the_retries_with_the_last_error(fake):
    lm, script = fake((500, "overloaded"), max_retries=2)
    with pytest.raises(BackendError) as e:
        lm.generate(["Q"])
    assert str(e.value) == f"The server at {lm.base_url}/completions answered HTTP 500: overloaded (3 attempts); is it running and serving 'm'?"
    assert len(script.requests) == 3


def test_timeouts_are_retried_and_reported(fake):
    lm, script = fake(("hang", 1.0), timeout=0.2, max_retries=1)
    with pytest.raises(BackendError, match=r"timed out after 0.2 s \(2 attempts\)"):
        lm.generate(["Q"])


def test_client_errors_are_not_retried_and_garbage_is_an_error(fake):
    lm, script = fake((404, "no such model"))
    with pytest.raises(BackendError, match=r"refused the request with HTTP 404: no such model"):
        lm.generate(["Q"])
    assert len(script.requests) == 1
    lm, _ = fake((200, "<html>not json</html>"))
    with pytest.raises(BackendError, match=r"something that is not JSON: '<html>not json</html>'"):
        lm.generate(["Q"])
    lm, _ = fake((200, completion(["a"])))
    with pytest.raises(BackendError, match=r"malformed completion: expected choices to be a list of 2 \(one per prompt\), got a list of 1\.$"):
        lm.generate(["Q", "R"])
    lm, _ = fake((200, {"choices": [{"index": 0}]}))
    with pytest.raises(BackendError, match=r"malformed completion: expected choices\[0\]\.text to be a string, got nothing \(the key is missing\)\.$"):
        lm.generate(["Q"])


def test_connection_refused_is_a_backend_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lm = OpenAILM("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff=0.01, tokenizer=tiny_tokenizer())
    with pytest.raises(BackendError, match=r"could not connect .* \(2 attempts\)"):
        lm.generate(["Q"])


def test_prompt_too_long_is_a_generation_even_inside_a_batch(fake):
    too_long = (400, "This model's maximum context length is 512 tokens. However, you requested 900 tokens.")
    lm, script = fake(too_long, (200, completion(["ok"])), too_long)
    out = lm.generate(["short", "very long"], max_new_tokens=3)
    assert [g.finish_reason for g in out] == ["stop", "prompt_too_long"] and out[0].text == "ok"
    assert [r["prompt"] for r in script.requests] == [["short", "very long"], "short", "very long"]


def test_seeded_sampling_sends_each_prompt_with_its_seed(fake):
    lm, script = fake((200, completion(["x"])))
    out = lm.generate(["a", "b", "c"], max_new_tokens=2, temperature=0.8, seed=[7, 8, 9])
    assert [g.text for g in out] == ["x", "x", "x"]
    # A request carries one seed, so each prompt went alone with its own.
    assert sorted((r["prompt"], r["seed"]) for r in script.requests) == [("a", 7), ("b", 8), ("c", 9)]
    script.requests.clear()
    lm.generate(["a"], max_new_tokens=2, temperature=0.8, seed=4)
    assert [(r["prompt"], r["seed"]) for r in script.requests] == [("a", 4)]
    script.requests.clear()
    script.replies = [(200, completion(["x", "y"]))]
    lm.generate(["a", "b"], max_new_tokens=2, temperature=0, seed=4)  # greedy: one request, nothing to seed
    assert [r["prompt"] for r in script.requests] == [["a", "b"]] and "seed" not in script.requests[0]


def test_last_attempts_counts_the_most_retried_of_concurrent_requests(fake):
    # Seeded sampling sends one request per prompt, two at a time here. Only "b" is retried
    # (twice), and it finishes first: the others answer slowly and start after it.
    failures = {"b": 2}

    def reply(body):
        if failures.get(body["prompt"], 0):
            failures[body["prompt"]] -= 1
            return 503, "busy"
        if body["prompt"] != "b":
            time.sleep(0.3)
        return 200, completion([body["prompt"].upper()])

    lm, script = fake(reply)
    lm.max_concurrent = 2
    out = lm.generate(["b", "a", "c", "d"], max_new_tokens=2, temperature=0.8, seed=0)
    assert [g.text for g in out] == ["B", "A", "C", "D"]
    assert lm.last_attempts == 3 and len(script.requests) == 6
    lm.generate(["a", "c"], max_new_tokens=2, temperature=0.8, seed=0)  # a new call starts the count again
    assert lm.last_attempts == 1


def test_a_dropped_stop_string_is_put_back(fake):
    lm, _ = fake((200, completion(["<search> x "], stop_reason="</search>")))
    (g,) = lm.generate(["Q"], stop=["</answer>", "</search>"])
    assert g.text == "<search> x </search>" and g.finish_reason == "stop"
    assert g.token_ids == tuple(tiny_tokenizer().encode(g.text, add_special_tokens=False))


def test_the_end_of_sequence_with_one_stop_string_adds_no_tag(fake):
    # vLLM sends stop_reason None when the end-of-sequence token ended the text: nothing was cut.
    lm, _ = fake((200, completion(["I think Paris"], stop_reason=None)))
    (g,) = lm.generate(["Q"], stop=["</query>"])
    assert g.text == "I think Paris" and g.finish_reason == "stop"
    # A server that never says what stopped it: with one stop string, that string was cut.
    lm, _ = fake((200, completion(["<query> x "], vllm=False)))
    (g,) = lm.generate(["Q"], stop=["</query>"])
    assert g.text == "<query> x </query>"


def test_max_new_tokens_above_the_models_length_is_capped_not_prompt_too_long(fake):
    refused = (400, '{"error": {"message": "max_tokens=1000 cannot be greater than max_model_len=512. Please request fewer output tokens."}}')
    lm, script = fake(refused, (200, completion(["ok then"], finish="length")))
    (g,) = lm.generate(["Q"], max_new_tokens=1000)
    assert g.finish_reason == "length" and g.text == "ok then"
    assert [r["max_tokens"] for r in script.requests] == [1000, 512]
    # A prompt of exactly the model's length leaves no token to generate.
    lm, _ = fake((400, "max_tokens must be at least 1, got 0."))
    assert lm.generate(["Q"])[0].finish_reason == "prompt_too_long"


def test_mixed_text_and_token_id_prompts_go_in_separate_requests(fake):
    def reply(body):
        ok = isinstance(body["prompt"], str) or all(isinstance(t, int) for t in body["prompt"])
        return (200, completion(["fine"])) if ok else (400, "prompt: mixed types")

    lm, script = fake(reply)
    out = lm.generate(["text prompt", [5, 6, 7]], max_new_tokens=2)
    assert [g.text for g in out] == ["fine", "fine"] and [r["prompt"] for r in script.requests] == ["text prompt", [5, 6, 7]]


# ---------------------------------------------------------------- a hostile server (issue 36)
def trickle(head: bytes, body: bytes, seconds: float):
    """A response written one byte at a time over ``seconds``: every read gets a byte long
    before any per-read timeout, so only a deadline on the whole request cuts it off."""
    data = head + body

    def write(wfile):
        for byte in data:
            wfile.write(bytes([byte]))
            wfile.flush()
            time.sleep(seconds / len(data))

    return "raw", write


def test_one_deadline_covers_a_server_that_trickles_its_headers_or_its_body(fake):
    body = json.dumps(completion(["Paris"])).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    slow_head = head.replace(b"\r\n\r\n", b"\r\nX-Padding: " + b"a" * 300 + b"\r\n\r\n") % len(body), body
    slow_body = head % (len(body) + 300), body + b" " * 300  # JSON may end in spaces
    for h, b in (slow_head, slow_body):
        lm, _ = fake(trickle(h, b, 10.0), timeout=1.0, max_retries=0)
        started = time.monotonic()
        with pytest.raises(BackendError) as e:
            lm.generate(["Q"])
        elapsed = time.monotonic() - started
        assert str(e.value) == f"The server at {lm.base_url}/completions timed out after 1 s (1 attempts); is it running and serving 'm'?"
        assert elapsed < 1.6, elapsed  # a per-read timeout would wait out the whole 10 s trickle
    # The same trickle, well within the deadline, is a normal answer.
    lm, _ = fake(trickle(*slow_body, 0.3), timeout=5.0)
    assert lm.generate(["Q"])[0].text == "Paris"


def bad_choice(**fields):
    return {"choices": [{"index": 0, "text": "x", "finish_reason": "stop", "logprobs": None} | fields]}


MALFORMED = [
    # (reply body, prompts, the field and what was wrong, as the error says it)
    ([completion(["a"])], 1, 'the body to be a JSON object with "choices", got a list [{"choices": [{"index": 0, "text": "a", "finish_reason": ...'),
    ({"id": "x"}, 1, "the body.choices to be a list of 1 choices, got nothing (the key is missing)"),
    ({"choices": "a"}, 1, 'the body.choices to be a list of 1 choices, got a string "a"'),
    ({"choices": ["a"]}, 1, 'choices[0] to be an object, got a string "a"'),
    (bad_choice(logprobs="token_logprobs"), 1, 'choices[0].logprobs to be an object or null, got a string "token_logprobs"'),
    (bad_choice(logprobs=[-0.5, -1.0]), 1, "choices[0].logprobs to be an object or null, got a list [-0.5, -1.0]"),
    (bad_choice(logprobs={"tokens": "ab"}), 1, 'choices[0].logprobs.tokens to be a list of strings or null, got a string "ab"'),
    (bad_choice(logprobs={"tokens": [3]}), 1, "choices[0].logprobs.tokens[0] to be a string, got a number 3"),
    (bad_choice(logprobs={"tokens": ["a"], "token_logprobs": ["-1"]}), 1,
     'choices[0].logprobs.token_logprobs[0] to be a log-probability (a number <= 0) or null, got a string "-1"'),
    (bad_choice(logprobs={"tokens": ["a"], "token_logprobs": [0.7]}), 1,
     "choices[0].logprobs.token_logprobs[0] to be a log-probability (a number <= 0) or null, got a number 0.7"),
    (bad_choice(logprobs={"tokens": ["a"], "token_logprobs": [True]}), 1,
     "choices[0].logprobs.token_logprobs[0] to be a log-probability (a number <= 0) or null, got a boolean true"),
    ('{"choices": [{"index": 0, "text": "x", "logprobs": {"tokens": ["a"], "token_logprobs": [NaN]}}]}', 1,
     "choices[0].logprobs.token_logprobs[0] to be a log-probability (a number <= 0) or null, got a number NaN"),
    (bad_choice(logprobs={"tokens": ["a", "b"], "token_logprobs": [-1.0]}), 1,
     "choices[0].logprobs.token_logprobs to be as many values as tokens (2), got 1"),
    (bad_choice(logprobs={"tokens": ["token_id:5", "b"], "token_logprobs": [-1.0, -2.0]}), 1,
     'choices[0].logprobs.tokens[1] to be "token_id:<n>" with n a token id (vLLM\'s form, in every token or in none), got a string "b"'),
    (bad_choice(logprobs={"tokens": ["token_id:" + "9" * 5001]}), 1,
     'choices[0].logprobs.tokens[0] to be "token_id:<n>" with n a token id (vLLM\'s form, in every token or in none), '
     'got a string "token_id:' + "9" * 47 + "..."),
    (bad_choice(logprobs={"tokens": ["token_id:-3"]}), 1,
     'choices[0].logprobs.tokens[0] to be "token_id:<n>" with n a token id (vLLM\'s form, in every token or in none), got a string "token_id:-3"'),
    (bad_choice(text=7), 1, "choices[0].text to be a string, got a number 7"),
    (bad_choice(finish_reason=1), 1, "choices[0].finish_reason to be a string or null, got a number 1"),
    (bad_choice(stop_reason=[1]), 1, "choices[0].stop_reason to be a string, a token id or null, got a list [1]"),
    (bad_choice(index="0"), 1, 'choices[0].index to be an integer in 0..0, got a string "0"'),
    (bad_choice(index=True), 1, "choices[0].index to be an integer in 0..0, got a boolean true"),
    (bad_choice(index=1), 1, "choices[0].index to be an integer in 0..0, got 1"),
    (completion(["a", "b", "c"]) | {"choices": completion(["a", "b"])["choices"] + [{"index": 0, "text": "c"}]}, 3,
     "choices[2].index to be each of 0..2 once, got 0 again (choices[0] has it)"),
    ({"choices": [{"index": -1, "text": "a"}, {"index": 1, "text": "b"}]}, 2, "choices[0].index to be an integer in 0..1, got -1"),
]


@pytest.mark.parametrize("reply, n, problem", MALFORMED, ids=[f"malformed-{i}" for i in range(len(MALFORMED))])
def test_every_field_of_a_reply_is_checked_and_named(fake, reply, n, problem):
    lm, script = fake((200, reply))
    with pytest.raises(BackendError) as e:
        lm.generate(["Q", "R", "S"][:n])
    assert str(e.value) == f"The server at {lm.base_url}/completions answered with a malformed completion: expected {problem}."
    assert len(script.requests) == 1  # a malformed reply is not a transient failure


def test_choices_out_of_order_are_put_in_order_and_valid_logprobs_are_kept(fake):
    reply = {"choices": [
        {"index": 1, "text": "b", "finish_reason": "length", "logprobs": {"tokens": ["token_id:4", "token_id:9"], "token_logprobs": [-0.5, None]}},
        {"index": 0, "text": "a", "finish_reason": "stop", "stop_reason": 17, "logprobs": {"tokens": ["token_id:3"], "token_logprobs": [-1e308 * 10]}},
    ]}
    lm, _ = fake((200, reply))
    a, b = lm.generate(["Q", "R"])
    assert (a.text, a.token_ids, a.logprobs, a.finish_reason) == ("a", (3,), (-math.inf,), "stop")
    assert (b.text, b.token_ids, b.finish_reason) == ("b", (4, 9), "length") and b.logprobs[0] == -0.5 and math.isnan(b.logprobs[1])


def test_a_body_that_is_not_json_however_hostile_is_a_backend_error(fake):
    for body in ("[" * 100_000 + "]" * 100_000, '{"choices": ' + "1" * 5001 + "}", "\udcff"):
        lm, _ = fake((200, body.encode("utf-8", "surrogateescape").decode("latin-1") if body == "\udcff" else body))
        with pytest.raises(BackendError, match=r"^The server at \S+/completions answered with something that is not JSON: "):
            lm.generate(["Q"])


def test_only_2xx_is_an_answer_and_a_redirect_is_not_followed(fake):
    lm, script = fake((302, completion(["from a redirect"]), {"Location": "http://elsewhere.example/v1/completions"}))
    with pytest.raises(BackendError) as e:
        lm.generate(["Q"])
    assert str(e.value) == (
        f"The server at {lm.base_url}/completions answered HTTP 302, a redirect to http://elsewhere.example/v1/completions; "
        "redirects are not followed. Expected a 2xx answer: set base_url to the server's API root."
    )
    assert len(script.requests) == 1
    lm, _ = fake((304, ""))
    with pytest.raises(BackendError, match=r"answered HTTP 304, a redirect to nowhere \(no Location header\)"):
        lm.generate(["Q"])
    lm, _ = fake((201, completion(["created"])))  # any 2xx with a valid body is an answer
    assert lm.generate(["Q"])[0].text == "created"


def test_a_body_larger_than_max_response_bytes_is_refused(fake):
    lm, _ = fake((200, completion(["x" * 5000])), max_response_bytes=4096)
    with pytest.raises(BackendError) as e:
        lm.generate(["Q"])
    assert str(e.value) == (
        f"The server at {lm.base_url}/completions sent a body larger than max_response_bytes=4096; "
        "expected a completion reply (raise max_response_bytes if the replies are really this large)."
    )


def test_a_connection_cut_mid_body_is_retried_then_reported(fake):
    def cut(wfile):
        wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"choices\": [")

    lm, script = fake(("raw", cut), max_retries=1)
    with pytest.raises(BackendError, match=r"broke off the exchange \(RemoteProtocolError: .*\) \(2 attempts\); is it running and serving 'm'\?$"):
        lm.generate(["Q"])
    assert len(script.requests) == 2


def test_a_server_that_always_refuses_the_max_tokens_cap_is_asked_a_bounded_number_of_times(fake):
    def refuse(body):  # names a cap one below whatever it is asked for, forever
        return 400, f"max_tokens={body['max_tokens']} cannot be greater than max_model_len={body['max_tokens'] - 1}."

    lm, script = fake(refuse)
    started = time.monotonic()
    with pytest.raises(BackendError) as e:
        lm.generate(["Q"], max_new_tokens=1000)
    assert time.monotonic() - started < 2
    assert [r["max_tokens"] for r in script.requests] == [1000, 999, 998]
    assert str(e.value) == (
        f"The server at {lm.base_url}/completions refused max_tokens 3 times, naming a lower cap each time "
        "(1000 -> 999, 999 -> 998, 998 -> 997); expected it to accept the cap it names. "
        "Lower max_new_tokens or check the server's --max-model-len."
    )


def test_bad_arguments():
    with pytest.raises(ConfigError, match="base_url to be an http"):
        OpenAILM("m", base_url="localhost:8000")
    with pytest.raises(ConfigError, match="max_retries to be an integer >= 0, got -1"):
        OpenAILM("m", max_retries=-1)
    with pytest.raises(ConfigError, match=r"^OpenAILM expects timeout to be a finite number > 0, got 0\.$"):
        OpenAILM("m", timeout=0)
    with pytest.raises(ConfigError, match=r"^OpenAILM expects backoff to be a finite number >= 0, got inf\.$"):
        OpenAILM("m", backoff=float("inf"))
    with pytest.raises(ConfigError, match=r"^OpenAILM expects max_response_bytes to be an integer >= 1, got 0\.$"):
        OpenAILM("m", max_response_bytes=0)
    with pytest.raises(ConfigError, match=r"^OpenAILM expects max_connections to be an integer >= 1, got 0\.$"):
        OpenAILM("m", max_connections=0)
    assert OpenAILM("m").concurrent and OpenAILM("m", max_connections=512).max_connections == 512



# ---------------------------------------------------------------- a real vLLM server
# A hermes-style chat template with tools (the form of Qwen2.5's and Hermes' templates, in
# the tiny tokenizer's ChatML): the tools as JSON in a system turn, each call as
# <tool_call>{"name", "arguments"}</tool_call>, tool results as <tool_response> in a user turn.
HERMES_TEMPLATE = """{%- if tools %}<|im_start|>system
You may call functions. Their signatures are within <tools></tools>:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
Call one by writing <tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "assistant" %}<|im_start|>assistant
{{ message.content or "" }}{% for call in message.tool_calls or [] %}<tool_call>{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}</tool_call>{% endfor %}<|im_end|>
{% elif message.role == "tool" %}<|im_start|>user
<tool_response>{{ message.content }}</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """One vLLM OpenAI server for the module's tests (its start is the slow part on a CPU):
    the tiny model, with the hermes tool parser and the template above for chat completions."""
    pytest.importorskip("vllm")
    from searchgym.lm.testing import tiny_model_folder

    folder = str(tiny_model_folder())
    template = tmp_path_factory.mktemp("vllm") / "hermes.jinja"
    template.write_text(HERMES_TEMPLATE)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder, "--served-model-name", "tiny",
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "2048", "--seed", "0",
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--chat-template", str(template)]
    log = open(os.path.join(folder, "..", f"vllm-server-{port}.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    import httpx

    deadline = time.time() + 240
    try:
        while True:
            if proc.poll() is not None:
                log.flush()
                pytest.fail(f"vLLM server exited with {proc.returncode}; see {log.name}")
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.time() > deadline:
                pytest.fail(f"vLLM server did not start within 240 s; see {log.name}")
            time.sleep(1)
        yield url, folder
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.mark.slow
def test_real_vllm_server_matches_the_offline_model(vllm_server):
    from searchgym.lm.hf import TransformersLM

    url, folder = vllm_server
    lm = OpenAILM("tiny", base_url=url, tokenizer=tiny_tokenizer())
    reference = TransformersLM(folder)
    prompts = ["The city of Marrowgate", "What is the capital of France?"]
    served = lm.generate(prompts, max_new_tokens=10, temperature=0)
    local = reference.generate(prompts, max_new_tokens=10, temperature=0)
    assert [g.token_ids for g in served] == [g.token_ids for g in local]
    assert all(abs(a - b) < 2e-3 for g, h in zip(served, local) for a, b in zip(g.logprobs, h.logprobs))
    stop = ascii_window(local[0].text)
    (stopped,) = lm.generate(prompts[:1], max_new_tokens=10, temperature=0, stop=[stop])
    assert stopped.text.endswith(stop) and stopped.finish_reason == "stop"
    ids = tiny_tokenizer().encode(prompts[1], add_special_tokens=False)
    assert lm.generate([ids], max_new_tokens=5, temperature=0)[0].token_ids == served[1].token_ids[:5]
    a = lm.generate(prompts, max_new_tokens=8, temperature=0.9, seed=5)
    assert a == lm.generate(prompts, max_new_tokens=8, temperature=0.9, seed=5)
    (too_long,) = lm.generate([[5 + i % 300 for i in range(2100)]], max_new_tokens=4)
    assert too_long.finish_reason == "prompt_too_long"
    # Capped at the model's length (2048), as locally: 8 tokens are left after this prompt.
    (capped,) = lm.generate([[5 + i % 300 for i in range(2040)]], max_new_tokens=100_000, temperature=0)
    assert capped.finish_reason in ("length", "stop") and 0 < len(capped.token_ids) <= 8


def hermes_calls(*calls):
    """A regex of one hermes call per (name, argument) pair, written in that order, each
    argument's value a short lower-case word (``raw``: its JSON unquoted, which is not JSON)."""
    blocks = []
    for name, key, *raw in calls:
        value = "[a-z]{1,6}" if raw else '"[a-z]{1,6}"'
        blocks.append(r'<tool_call>\{"name": "%s", "arguments": \{"%s": %s\}\}</tool_call>' % (name, key, value))
    return "".join(blocks)


@pytest.mark.slow
def test_real_vllm_server_plays_a_tools_env_through_its_own_hermes_parser(vllm_server, tmp_path):
    import gymnasium as gym

    import searchgym  # noqa: F401
    from searchgym.bench import BenchConfig, run_bench

    url, _ = vllm_server
    lm = OpenAILM("tiny", base_url=url, tokenizer=tiny_tokenizer())
    world = {"corpus_options": {"seed": 7, "num_passages": 400}, "top_k": 1, "max_turns": 2}
    env = gym.make("searchgym/SearchR1-v0", action_format="tools", **world)
    _, info = env.reset(seed=0)
    # A random model writes no tool call by itself: vLLM's structured outputs hold its
    # tokens to hermes calls, which the server's hermes parser reads back as tool_calls.
    def regex(*calls):
        return {"structured_outputs": {"regex": hermes_calls(*calls)}}

    (reply,) = lm.chat([info["messages"]], tools=info["tools"], temperature=0, max_new_tokens=192,
                       extra_body=regex(("search", "query"), ("search", "query")))
    calls = reply.message["tool_calls"]
    assert reply.server_finish_reason == "tool_calls" and reply.completion_tokens > 0 and reply.prompt_tokens > 500
    assert [c["function"]["name"] for c in calls] == ["search", "search"] and len({c["id"] for c in calls}) == 2
    queries = [json.loads(c["function"]["arguments"])["query"] for c in calls]
    _, _, _, _, info = env.step(reply.message)  # two parallel searches, as the env's tool messages answer them
    assert info["num_searches"] == 2 and info["num_invalid"] == 0 and info["queries"] == queries
    assert [m["role"] for m in info["messages"][-2:]] == ["tool", "tool"] and info["messages"][-1]["tool_call_id"] == calls[1]["id"]
    # The next turn sends the whole conversation back (arguments as JSON text) through the template.
    (unknown,) = lm.chat([info["messages"]], tools=info["tools"], temperature=0, max_new_tokens=96, extra_body=regex(("lookup", "query")))
    assert unknown.message["tool_calls"][0]["function"]["name"] == "lookup"
    # Arguments that are not JSON: the server's parser gives up and sends the text, which the env's own parser reads as a bad call.
    (broken,) = lm.chat([info["messages"]], tools=info["tools"], temperature=0, max_new_tokens=96, extra_body=regex(("search", "query", "raw")))
    assert "tool_calls" not in broken.message and broken.message["content"].startswith('<tool_call>{"name": "search", "arguments": {"query": ')
    _, _, _, truncated, info = env.step(broken.message)
    assert info["num_invalid"] == 1 and info["invalid_reason"].startswith("the <tool_call> block holds invalid JSON") and truncated
    # A conversation longer than the model's context, and max_new_tokens above it.
    (too_long,) = lm.chat([[{"role": "user", "content": "Marrowgate " * 3000}]], tools=info["tools"], max_new_tokens=8)
    assert too_long.finish_reason == "prompt_too_long"
    (capped,) = lm.chat([[{"role": "user", "content": "Hi"}]], tools=info["tools"], max_new_tokens=100_000, temperature=0, extra_body=regex(("answer", "answer")))
    assert capped.message["tool_calls"][0]["function"]["name"] == "answer"
    # The bench: chat-tools on the served model, one search or answer a turn.
    config = BenchConfig(
        runs=[("SearchR1-v0", "chat-tools")], model="tiny", backend="openai", backend_options={"base_url": url}, limit=2, num_envs=2,
        env_options={"*": world}, agent_options={"chat-tools": {"extra_body": {"structured_outputs": {"regex": "(%s|%s)" % (
            hermes_calls(("search", "query")), hermes_calls(("answer", "answer")))}}, "max_new_tokens": 96}},
    )
    (row,) = run_bench(config, tmp_path, progress=False).rows
    assert row["n"] == 2 and row["failures"] == "-" and row["generated_tokens"] > 0 and row["action_format"] == "tools"
    episodes = [json.loads(line) for line in (tmp_path / "episodes.jsonl").read_text().splitlines()]
    assert all(e["num_invalid"] == 0 and e["outcome"] in ("answered", "truncated") for e in episodes)
