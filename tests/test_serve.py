"""`searchgym serve` as a real process on 127.0.0.1, and HTTPRetriever against it: the
API shapes, equality with the in-process retriever and env, bad requests, tokens, 64
concurrent clients, retries through a restart, SIGTERM."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searchgym.corpora.http import HTTPRetriever, parse_contents
from searchgym.corpora.registry import load_corpus
from searchgym.corpora.retrievers import make_retriever
from searchgym.error import BackendError, ConfigError

WORLD = ["--corpus", "synthwiki", "--corpus-option", "seed=7", "--corpus-option", "num_passages=400"]
SEARCHGYM = str(Path(sys.executable).with_name("searchgym"))
#: The server processes import this checkout's searchgym (the console script alone would import the installed one).
CHECKOUT = {"PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])])}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `searchgym serve` process; `url` once it printed its start line."""

    def __init__(self, *args: str, port: int | None = None, env: dict | None = None):
        self.port = port if port is not None else free_port()
        argv = [SEARCHGYM, "serve", *WORLD, "--port", str(self.port), *args]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **CHECKOUT, **(env or {})})
        self.line = self.proc.stdout.readline()  # the start line, printed once the socket listens
        if not self.line:
            raise RuntimeError(f"searchgym serve did not start: {self.proc.stderr.read()[-2000:]}")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self, sig=signal.SIGTERM) -> str:
        """Send ``sig``; what the server printed on its way out (its stdout after the start line)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(timeout=30)
        return self.proc.stdout.read()


@pytest.fixture(scope="module")
def server():
    s = Server("--max-queries", "8", "--max-query-chars", "200", "--max-topk", "20", "--max-body-bytes", "4000", "--max-documents", "50")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def local():
    return make_retriever("bm25", load_corpus("synthwiki", seed=7, num_passages=400))


QUERIES = ["Pamsaesorn settled", "who founded the company", "river of the city", "annual festival market"]


def post(url, body, **kw):
    return httpx.post(url + "/retrieve", content=body if isinstance(body, (bytes, str)) else json.dumps(body), timeout=30, **kw)


def test_the_start_line_says_what_is_served(server):
    assert server.line.startswith("searchgym serve: bm25 (BM25Retriever) over synthwiki-s7-n400 (400 passages")
    assert f"http://127.0.0.1:{server.port}/retrieve" in server.line and "no token" in server.line


def test_search_r1_shapes_with_and_without_scores(server, local):
    with_scores = post(server.url, {"queries": QUERIES[:2], "topk": 3, "return_scores": True})
    assert with_scores.status_code == 200
    rows = with_scores.json()["result"]
    expected = local.search(QUERIES[:2], 3)
    assert len(rows) == 2 and [len(r) for r in rows] == [3, 3]
    for row, hits in zip(rows, expected):
        assert [item["document"] for item in row] == [{"id": h.passage.id, "contents": h.passage.contents} for h in hits]
        assert [item["score"] for item in row] == [float(h.score) for h in hits]
    bare = post(server.url, {"queries": QUERIES[:1], "topk": 2}).json()["result"]
    assert bare == [[{"id": h.passage.id, "contents": h.passage.contents} for h in local.search(QUERIES[:1], 2)[0]]]
    default = post(server.url, {"queries": QUERIES[:1], "request_id": 7}).json()["result"]  # extra fields ignored
    assert len(default[0]) == 3  # the default topk
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    info = httpx.get(server.url + "/info").json()
    assert info["corpus"] == "synthwiki-s7-n400" and info["passages"] == 400 and info["retriever"] == "bm25"
    assert info["fingerprint"] == local.corpus.fingerprint and info["limits"]["max_queries"] == 8
    assert info["parameters"] == {"backend": "bm25s", "method": local.method, "k1": 0.9, "b": 0.4, "delta": local.delta,
                                  "nbytes": local.nbytes}  # the index's size, as for dense indexes


@pytest.mark.parametrize(
    "body, status, message",
    [
        ("{bad", 400, "the body must be JSON"),
        (b"\xff\xfe", 400, "the body must be JSON"),
        ("[1, 2]", 422, "must be a JSON object with 'queries', got list"),
        ({"topk": 3}, 422, "'queries' must be a list of strings"),
        ({"queries": "one"}, 422, "'queries' must be a list of strings"),
        ({"queries": [1]}, 422, "'queries' must be a list of strings"),
        ({"queries": ["a"] * 9}, 413, "9 queries exceed max_queries=8 per request"),
        ({"queries": ["a" * 201]}, 413, "a query of 201 characters exceeds max_query_chars=200"),
        ({"queries": ["a"], "topk": 21}, 422, "topk=21 exceeds max_topk=20"),
        ({"queries": ["a"] * 3, "topk": 17}, 413, "3 queries x topk=17 = 51 documents exceed max_documents=50 per request"),
        ({"queries": ["a"], "topk": 0}, 422, "'topk' must be a positive integer, got 0"),
        ({"queries": ["a"], "topk": "3"}, 422, "'topk' must be a positive integer, got '3'"),
        ({"queries": ["a"], "topk": True}, 422, "'topk' must be a positive integer, got True"),
        ({"queries": ["a"], "return_scores": "yes"}, 422, "'return_scores' must be true or false"),
        ("x" * 5000, 413, "exceeds max_body_bytes=4000"),
    ],
)
def test_bad_requests_get_a_4xx_json_error_naming_what_was_expected(server, body, status, message):
    response = post(server.url, body)
    assert response.status_code == status
    assert message in response.json()["error"] and response.json()["status"] == status
    assert post(server.url, {"queries": ["still alive"]}).status_code == 200


def test_a_chunked_body_over_the_limit_is_refused_too(server):
    chunks = (b"x" * 1000 for _ in range(5))  # no Content-Length: the server counts as it reads
    response = httpx.post(server.url + "/retrieve", content=chunks, timeout=30)
    assert response.status_code == 413 and "exceeds max_body_bytes=4000" in response.json()["error"]


def test_unknown_paths_and_methods_answer_json(server):
    assert httpx.get(server.url + "/nope").json()["error"].startswith("no endpoint GET /nope")
    response = httpx.get(server.url + "/retrieve")
    assert response.status_code == 405 and "expected POST /retrieve" in response.json()["error"]


def test_http_retriever_equals_the_in_process_retriever(server, local):
    remote = HTTPRetriever(server.url + "/retrieve", max_queries=3)  # batches larger than the server's limit are split
    queries = QUERIES + ["", "   "] + [f"city number {i}" for i in range(10)]
    for k in (1, 5):
        assert remote.search(queries, k) == local.search(queries, k)
    assert remote.search(["x"], 3) == local.search(["x"], 3)
    assert parse_contents('"A "quoted" title"\ntext\nmore') == ('A "quoted" title', "text\nmore")


def test_envs_with_a_retriever_url_play_the_same_episodes(server):
    import gymnasium as gym

    from searchgym.agents import Task, make_agent, run_episodes

    options = {"corpus_options": {"seed": 7, "num_passages": 400}}
    results = {}
    for name, retriever in (("local", "bm25"), ("remote", server.url + "/retrieve")):
        envs = [gym.make("searchgym/SearchR1-v0", retriever=retriever, **options) for _ in range(3)]
        for ident in ("oracle", "random"):
            agent = make_agent(ident, envs[0], **({"seed": 3} if ident == "random" else {}))
            tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:6]]
            played = run_episodes(envs, agent, tasks, progress=False)
            results[name, ident] = [(r.prediction, r.reward, r.num_searches, r.outcome) for r in played]
    assert results["remote", "oracle"] == results["local", "oracle"] and {r[1] for r in results["local", "oracle"]} == {1.0}
    assert results["remote", "random"] == results["local", "random"]
    env = gym.make("searchgym/SearchR1-v0", retriever=server.url + "/retrieve", **options)
    env.reset(seed=0)
    info = env.step("<search> Pamsaesorn settled </search>")[4]
    assert info["retrieved_ids"] == [h.passage.id for h in make_retriever("bm25", env.unwrapped.corpus).search(["Pamsaesorn settled"], 3)[0]]


def test_64_concurrent_clients_get_their_own_answers_and_requests_are_coalesced(server, local):
    queries = [f"festival {i} harbour city river {i % 7}" for i in range(64 * 3)]
    expected = local.search(queries, 4)
    before = httpx.get(server.url + "/info").json()["coalescing"]["served"]
    remote = HTTPRetriever(server.url + "/retrieve")

    def client(i):
        return remote.search(queries[3 * i : 3 * i + 3], 4)

    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(client, range(64)))
    assert [hits for answer in answers for hits in answer] == expected
    after = httpx.get(server.url + "/info").json()["coalescing"]["served"]
    assert after["queries"] - before["queries"] == 64 * 3
    assert after["batches"] - before["batches"] < 64  # some requests shared a search call


def test_a_token_is_required_when_set_and_to_listen_beyond_loopback():
    s = Server(env={"SEARCHGYM_SERVE_TOKEN": "s3cret"})
    try:
        assert "token required" in s.line
        refused = post(s.url, {"queries": ["a"]})
        assert refused.status_code == 401 and "bearer token" in refused.json()["error"]
        assert post(s.url, {"queries": ["a"]}, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert len(HTTPRetriever(s.url + "/retrieve", token="s3cret").search(["a city"], 2)[0]) == 2
        with pytest.raises(BackendError, match=r"answered HTTP 401: .*bearer token"):
            HTTPRetriever(s.url + "/retrieve").search(["a city"], 2)
    finally:
        # SIGTERM: a graceful shutdown (uvicorn then re-raises the signal, so the exit status says SIGTERM).
        assert s.stop() == "searchgym serve: stopped\n" and s.proc.returncode == -signal.SIGTERM
    done = subprocess.run([SEARCHGYM, "serve", "--host", "0.0.0.0", "--port", str(free_port())], capture_output=True, text=True, timeout=120,
                          env={**{k: v for k, v in os.environ.items() if k != "SEARCHGYM_SERVE_TOKEN"}, **CHECKOUT})
    assert done.returncode == 2 and "refuses to listen on '0.0.0.0' without a token" in done.stderr


def test_the_client_retries_through_a_restart_and_names_the_url_when_it_gives_up():
    port = free_port()
    url = f"http://127.0.0.1:{port}/retrieve"
    with pytest.raises(BackendError, match=rf"retrieval server {url} \(GET info\) unreachable after 3 tries: ConnectError"):
        HTTPRetriever(url, retries=2, backoff=0.05).search(["a"], 1)
    first = Server(port=port)
    remote = HTTPRetriever(url, retries=8, backoff=0.25)
    assert remote.search(["a city"], 2)[0]
    first.stop()
    answer: list = []
    worker = threading.Thread(target=lambda: answer.append(remote.search(["a city"], 2)))
    worker.start()  # the server is down: the client retries with backoff
    time.sleep(0.5)
    second = Server(port=port)
    try:
        worker.join(timeout=60)
        assert answer and len(answer[0][0]) == 2 and remote.retried >= 1
    finally:
        second.stop()


def test_http_retriever_arguments_are_checked():
    with pytest.raises(ConfigError, match="expects an http:// or https:// URL"):
        HTTPRetriever("127.0.0.1:8000/retrieve")
    with pytest.raises(ConfigError, match="expects retries to be an integer >= 0"):
        HTTPRetriever("http://127.0.0.1:1/retrieve", retries=-1)
    with pytest.raises(ConfigError, match="expects timeout to be a positive number of seconds"):
        HTTPRetriever("http://127.0.0.1:1/retrieve", timeout=0)
    assert make_retriever("http://127.0.0.1:1/retrieve", None, timeout=2) is make_retriever("http://127.0.0.1:1/retrieve", None, timeout=2)


# ---------------------------------------------------------------- hostile clients (issue 36)
def raw_exchange(port: int, data: bytes, *, wait: float = 5.0) -> bytes:
    """Send ``data`` on a fresh connection; everything the server answers before it closes or ``wait`` passes."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        s.sendall(data)
        got = b""
        try:
            while chunk := s.recv(65536):
                got += chunk
        except TimeoutError:
            pass
        return got


@pytest.fixture(scope="module")
def roomy():
    """A server with the default limits (a body of up to 1 MiB)."""
    s = Server()
    yield s
    s.stop()


@pytest.mark.parametrize(
    "body, status, message",
    [
        ('{"queries": ' + "[" * 100_000 + "]" * 100_000 + "}", 400, "the body must be JSON like"),
        ('{"queries": ["a"], "topk": ' + "9" * 5001 + "}", 400, "the body must be JSON like"),
        ('{"queries": ["a"], "topk": ' + "9" * 4000 + "}", 422, "exceeds max_topk=100"),
        ('{"queries": ["a"], "topk": 1e999}', 422, "'topk' must be a positive integer, got inf"),
        ('{"queries": ["a"], "topk": NaN}', 422, "'topk' must be a positive integer, got nan"),
        ('{"queries": ["a"], "return_scores": "\\ud800"}', 422, "'return_scores' must be true or false, got '\\ud800'"),
        ('{"queries": ["a"], "return_scores": ' + "[" * 900 + "]" * 900 + "}", 422, "'return_scores' must be true or false"),
    ],
)
def test_hostile_bodies_get_a_4xx_never_a_5xx(roomy, body, status, message):
    response = post(roomy.url, body)
    assert response.status_code == status, response.text
    assert message in response.json()["error"]


def test_any_string_can_be_searched_lone_surrogates_included(server, local):
    for query in ["\ud800", "a\udfffb city", "\x00\x01 river", "ünïcödé 北京 🚀"]:
        body = json.dumps({"queries": [query], "topk": 3, "return_scores": True})  # ASCII JSON: the surrogate travels escaped
        rows = post(server.url, body).json()["result"]
        assert [item["document"]["id"] for item in rows[0]] == [h.passage.id for h in local.search([query], 3)[0]]
    assert HTTPRetriever(server.url + "/retrieve").search(["\ud800 harbour"], 2) == local.search(["\ud800 harbour"], 2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
    | st.sampled_from(["\ud800", "\udfff x", "a" * 300]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(["queries", "topk", "return_scores", "x"]), inner, max_size=4),
    max_leaves=20,
)
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(json.dumps),
    st.fixed_dictionaries({"queries": json_values, "topk": json_values}).map(json.dumps),
    st.fixed_dictionaries({"queries": st.lists(st.text(max_size=40) | st.sampled_from(["\ud800", " ", ""]), max_size=10),
                           "topk": st.integers(-5, 30) | st.none(), "return_scores": st.booleans()}).map(json.dumps),
    st.sampled_from(["[" * 5000, '{"queries": ["a"], "topk": 1' + "0" * 4400 + "}", "\xff\xfe", '{"queries": ["\\ud800"]}']),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_random_and_hostile_bodies_get_only_2xx_or_4xx(server, body):
    response = post(server.url, body)
    assert 200 <= response.status_code < 500, (body[:200], response.status_code, response.text[:300])
    if response.status_code >= 400:
        assert response.json()["status"] == response.status_code


def test_slow_clients_are_cut_while_others_are_served():
    s = Server("--header-timeout", "1", "--body-timeout", "1")
    try:
        slow_headers = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"
        sockets = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(40)]
        remote = HTTPRetriever(s.url + "/retrieve", retries=0)
        start = time.monotonic()
        answered = 0
        sent = 0
        while time.monotonic() - start < 3.0:  # 1 byte each per 0.1 s: headers for 20 of them, the body for the others
            for i, sock in enumerate(sockets):
                trickle = slow_headers[: sent + 1] if i % 2 else slow_headers + b'{"queries": ["a city"]}'[: sent + 1]
                with contextlib.suppress(OSError):
                    sock.sendall(trickle[-1:] if i % 2 or sent else trickle[: len(slow_headers) + 1])
            sent += 1
            t = time.monotonic()
            assert len(remote.search([f"river {sent}"], 2)[0]) == 2  # served at once, retries off
            assert time.monotonic() - t < 1.0
            answered += 1
            time.sleep(0.1)
        assert answered >= 15
        for i, sock in enumerate(sockets):  # each slow client got its 408 and was closed within the 3 s
            sock.settimeout(0.5)
            got = b""
            with contextlib.suppress(OSError):
                while chunk := sock.recv(65536):
                    got += chunk
            assert got.startswith(b"HTTP/1.1 408"), (i, got[:200])
            assert (b"header_timeout=1" if i % 2 else b"body_timeout=1") in got
            sock.close()
    finally:
        s.stop()


def test_the_connection_cap_answers_503_at_once_and_the_client_retries_it():
    # The idle connections hold every slot until the header timeout (3 s) cuts them: long enough
    # that the client's first tries meet the cap on a loaded machine, short enough for its
    # backoff (0.3, 0.6, 1.2, 2.4, 4.8 s) to reach a free slot.
    s = Server("--header-timeout", "3", "--max-connections", "5")
    try:
        idle = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(5)]
        time.sleep(0.2)
        t = time.monotonic()
        refused = post(s.url, {"queries": ["a city"]})
        assert refused.status_code == 503 and time.monotonic() - t < 1.0
        remote = HTTPRetriever(s.url + "/retrieve", retries=5, backoff=0.3)
        assert len(remote.search(["a city"], 2)[0]) == 2 and remote.retried >= 1  # once the idle ones are cut
        for sock in idle:
            sock.close()
    finally:
        s.stop()


def test_the_token_is_checked_before_the_body_is_read():
    s = Server("--token", "s3cret", "--body-timeout", "30")
    try:
        head = b"POST /retrieve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\nContent-Length: 100000\r\n\r\n"
        t = time.monotonic()
        got = raw_exchange(s.port, head, wait=5)  # no body is ever sent
        assert got.startswith(b"HTTP/1.1 401") and b"bearer token" in got and time.monotonic() - t < 3
    finally:
        s.stop()


RETRY_SERVER = r"""
import http.server, json, sys
count = {"n": 0}
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def do_GET(self):
        self.answer(200, {"requests": count["n"]}) if self.path == "/count" else self.answer(404, {"error": "no"})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        count["n"] += 1
        self.answer(int(self.path.split("/")[1]), {"error": "as asked"})
server = http.server.HTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.mark.parametrize("status, tries", [(400, 1), (401, 1), (404, 1), (413, 1), (422, 1), (408, 3), (429, 3), (500, 3), (503, 3), (507, 3)])
def test_the_client_retries_only_what_may_succeed_on_retry(status, tries):
    proc = subprocess.Popen([sys.executable, "-c", RETRY_SERVER], stdout=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{proc.stdout.readline().strip()}"
        remote = HTTPRetriever(f"{base}/{status}/retrieve", retries=2, backoff=0.01)
        with pytest.raises(BackendError, match=rf"answered HTTP {status}"):
            remote.search(["a"], 1)
        assert httpx.get(base + "/count").json()["requests"] == tries
        assert remote.server_info() == {}  # no /info here (404): no limits known, the batch goes as it is
    finally:
        proc.kill()
        proc.wait()
