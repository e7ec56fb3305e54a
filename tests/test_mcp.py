"""`searchgym mcp` through the mcp SDK's own client: in process (the bounds and the error
messages, call by call), over stdio (the command spawned as a harness spawns it) and over
streamable HTTP on 127.0.0.1 (a server process started and stopped here); a non-loopback
host is refused, a token is asked for."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from searchgym.corpora.registry import load_corpus
from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.types import Hit
from searchgym.mcp_server import SearchTools, ToolSettings, build_server

ROOT = Path(__file__).resolve().parents[1]
#: The server processes import this checkout's searchgym.
CHECKOUT = {"PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
TOOLS = ["search", "open", "find", "get_document"]
#: Page 2 of the long document (512 words a page) holds the phrase twice, page 3 once.
FILLER = "lorem ipsum dolor sit amet consectetur".split()


def long_text() -> str:
    words = [FILLER[i % len(FILLER)] for i in range(1300)]
    for at in (600, 700, 1100):
        words[at : at + 3] = ["founded", "in", "1887"]
    words[900] = "(a+)+$"
    return " ".join(words)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "docs.jsonl"
    lines = [{"id": "long-1", "title": "The Long Charter", "text": long_text()}]
    lines += [{"id": f"d-{i}", "title": f"River town {i}", "text": f"River town {i} lies on the river Sal, mile {i}."} for i in range(20)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tools(corpus_file) -> SearchTools:
    corpus = load_corpus(str(corpus_file))
    return SearchTools(make_retriever("bm25", corpus), corpus, ToolSettings())


def call(server, *calls):
    """The results of ``calls`` ((tool, arguments) pairs) made in one session of the in-process client."""
    async def run():
        async with Client(server) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(run)


def text(result) -> str:
    return result.content[0].text


# ---------------------------------------------------------------------- in process


def test_the_tools_are_listed_with_their_schemas(tools):
    async def run():
        async with Client(build_server(tools)) as client:
            return (await client.list_tools()).tools

    listed = {t.name: t for t in anyio.run(run)}
    assert list(listed) == TOOLS
    assert listed["search"].input_schema["required"] == ["query"]
    assert listed["search"].input_schema["properties"]["k"]["maximum"] == 50
    assert listed["find"].input_schema["required"] == ["doc_id", "pattern"]
    assert "512 words" in listed["search"].description and "not a regular expression" in listed["find"].description
    no_document = SearchTools(tools.retriever, tools.corpus, ToolSettings(get_document=False))
    assert [s["name"] for s in no_document.specs()] == TOOLS[:3]


def test_search_open_find_and_get_document_answer_with_json(tools):
    found, default, opened, places, document = call(
        build_server(tools), ("search", {"query": "charter founded 1887 river", "k": 3}), ("search", {"query": "river town"}),
        ("open", {"doc_id": "long-1", "page": 2}), ("find", {"doc_id": "long-1", "pattern": "Founded  IN 1887"}),
        ("get_document", {"doc_id": "d-3"}))
    assert not any(r.is_error for r in (found, default, opened, places, document))
    hits = json.loads(text(found))["results"]
    assert len(hits) == 3 and hits[0]["doc_id"] == "long-1" and hits[0]["title"] == "The Long Charter"
    assert set(hits[0]) == {"doc_id", "title", "score", "snippet"}
    assert len(hits[0]["snippet"].split()) == 512 + 1 and hits[0]["snippet"].endswith(" ...")  # 512 words, then " ..."
    assert found.structured_content == json.loads(text(found))
    assert len(json.loads(text(default))["results"]) == 5  # BrowseComp-Plus's k
    page = json.loads(text(opened))
    assert (page["page"], page["pages"]) == (2, 3) and "founded in 1887" in page["text"]
    where = json.loads(text(places))
    assert where["total"] == 3 and [p["page"] for p in where["places"]] == [2, 2, 3]
    assert json.loads(text(document)) == {"doc_id": "d-3", "title": "River town 3", "text": "River town 3 lies on the river Sal, mile 3.",
                                          "truncated": False, "pages": 1}


@pytest.mark.parametrize(("name", "arguments", "message"), [
    ("search", {"query": "river", "k": -1}, "search expects k to be a whole number from 1 to 50 (default 5), got -1"),
    ("search", {"query": "river", "k": 51}, "search expects k to be a whole number from 1 to 50 (default 5), got 51"),
    ("search", {"query": "river", "k": "5"}, "search expects k to be a whole number from 1 to 50 (default 5), got '5'"),
    ("search", {"query": "river", "k": True}, "search expects k to be a whole number from 1 to 50 (default 5), got True"),
    ("search", {"query": "x" * 100_000}, "search expects a query of at most 2,048 characters, got 100,000; search for a shorter text"),
    ("search", {"query": "  "}, "search expects query to be a non-empty string (what to look for), got '  '"),
    ("search", {"query": ["river"]}, "search expects query to be a non-empty string (what to look for), got ['river']"),
    ("search", {}, "search expects the argument 'query' (the text to search for), got none; call search(query, k)"),
    ("search", {"query": "river", "topk": 3}, "search takes the arguments query, k; got 'topk', which it does not take"),
    ("open", {"doc_id": "no-such-doc"}, "open: there is no document with id 'no-such-doc'; use a doc id as the search results show it"),
    ("open", {"doc_id": "long-1", "page": 4}, "open expects page to be a whole number from 1 to 3 (document long-1 has 3 pages), got 4"),
    ("open", {"doc_id": "long-1", "page": 0}, "open expects page to be a whole number from 1 to 3 (document long-1 has 3 pages), got 0"),
    ("open", {"page": 1}, "open expects the argument 'doc_id' (a doc id as the search results show it), got none; call open(doc_id, page)"),
    ("open", {"doc_id": "../../etc/passwd"}, "open: there is no document with id '../../etc/passwd'; use a doc id as the search results show it"),
    ("find", {"doc_id": "long-1"}, "find expects the argument 'pattern' (the text to look for), got none; call find(doc_id, pattern)"),
    ("find", {"doc_id": "long-1", "pattern": ""}, "find expects a non-empty pattern (the text to look for, e.g. \"founded in\")"),
    ("find", {"doc_id": "long-1", "pattern": "a" * 201}, "find's pattern must be at most 200 characters and 24 words, got 201 "
                                                          "characters and 1 words; look for a shorter text"),
    ("get_document", {"doc_id": 17}, "get_document: doc_id must be a document id from the search results, e.g. \"doc-17\""),
    ("answer", {"answer": "x"}, "there is no tool 'answer'; the tools are search, open, find, get_document"),
])
def test_a_bad_call_is_a_tool_error_that_says_what_was_expected(tools, name, arguments, message):
    bad, good = call(build_server(tools), (name, arguments), ("search", {"query": "river", "k": 1}))
    assert bad.is_error and text(bad) == message
    assert not good.is_error  # the session goes on


def test_a_pattern_that_looks_like_a_regular_expression_is_literal_text(tools):
    (literal, dot) = call(build_server(tools), ("find", {"doc_id": "long-1", "pattern": "(a+)+$"}),
                          ("find", {"doc_id": "long-1", "pattern": "f.unded"}))
    assert json.loads(text(literal))["total"] == 1
    assert json.loads(text(dot))["total"] == 0


def test_every_answer_is_cut_to_max_response_chars(tmp_path):
    path = tmp_path / "huge.jsonl"
    huge = " ".join(f"word{i} \"quoted\"\n" for i in range(6000))  # escaped characters count as what they become in JSON
    path.write_text("".join(json.dumps({"id": f"h-{i}", "title": "Huge " * 200, "text": huge}) + "\n" for i in range(4)), encoding="utf-8")
    corpus = load_corpus(str(path))
    small = SearchTools(make_retriever("bm25", corpus), corpus, ToolSettings(max_response_chars=16_384, snippet_words=100_000,
                                                                             page_words=100_000, max_document_chars=1000))
    found, page, document = call(build_server(small), ("search", {"query": "word17 quoted", "k": 4}), ("open", {"doc_id": "h-1"}),
                                 ("get_document", {"doc_id": "h-2"}))
    for result in (found, page, document):
        assert not result.is_error and len(text(result)) <= 16_384
    hits = json.loads(text(found))["results"]
    assert len(hits) == 4 and all(h["snippet"].endswith(" characters]") and "[cut at" in h["snippet"] for h in hits)
    assert "[cut at" in json.loads(text(page))["text"]
    got = json.loads(text(document))
    assert got["truncated"] and len(json.dumps(got["text"], ensure_ascii=False)) <= 1000 and got["text"].endswith("[cut at 1,000 characters]")


class Slow:
    """A retriever that takes ``seconds`` for the query "slow"."""

    def __init__(self, retriever, seconds):
        self.retriever, self.seconds = retriever, seconds

    def search(self, queries, k) -> list[list[Hit]]:
        if "slow" in queries[0]:
            time.sleep(self.seconds)
        return self.retriever.search(queries, k)


class Broken:
    def search(self, queries, k):
        raise RuntimeError("the index file went away")


def test_a_call_past_the_timeout_is_a_tool_error_and_the_next_is_answered(tools):
    slow = SearchTools(Slow(tools.retriever, 1.5), tools.corpus, ToolSettings(timeout=1.0))
    start = time.perf_counter()
    late, next_one = call(build_server(slow), ("search", {"query": "slow river"}), ("search", {"query": "river"}))
    assert late.is_error and text(late) == ("search took longer than the server's timeout of 1 s; try a shorter query or retry later")
    assert not next_one.is_error  # it waited for the abandoned search, within its own second
    assert time.perf_counter() - start < 5


def test_a_retriever_that_fails_is_a_tool_error(tools):
    broken = SearchTools(Broken(), tools.corpus)
    failed, opened = call(build_server(broken), ("search", {"query": "river"}), ("open", {"doc_id": "d-1"}))
    assert failed.is_error and text(failed) == "search failed on the server: RuntimeError: the index file went away"
    assert not opened.is_error


def test_an_index_folder_serves_the_corpus_it_records(corpus_file, tmp_path, tools):
    from searchgym.corpora.indexes import build_index
    from searchgym.mcp_server import load_tools

    build_index(load_corpus(str(corpus_file)), "bm25", tmp_path / "index")
    served, what = load_tools(index=str(tmp_path / "index"))
    assert what.startswith(f"index {tmp_path / 'index'} (bm25) over docs (21 passages")
    from_index, opened = call(build_server(served), ("search", {"query": "charter founded river", "k": 3}),
                              ("open", {"doc_id": "long-1", "page": 3}))
    (direct,) = call(build_server(tools), ("search", {"query": "charter founded river", "k": 3}))
    assert json.loads(text(from_index)) == json.loads(text(direct))
    assert json.loads(text(opened))["page"] == 3


# ---------------------------------------------------------------------- real transports


def command(corpus_file, *extra) -> list[str]:
    return [sys.executable, "-m", "searchgym.cli", "mcp", "--corpus", str(corpus_file), *extra]


async def session_checks(read, write) -> None:
    """What each transport must carry: the listing, the three reads, bad calls, and the server alive after them."""
    async with ClientSession(read, write) as session:
        await session.initialize()
        assert [t.name for t in (await session.list_tools()).tools] == TOOLS
        found = await session.call_tool("search", {"query": "charter founded", "k": 2})
        assert [h["doc_id"] for h in json.loads(text(found))["results"]][0] == "long-1"
        page = await session.call_tool("open", {"doc_id": "long-1", "page": 3})
        assert json.loads(text(page))["pages"] == 3
        where = await session.call_tool("find", {"doc_id": "long-1", "pattern": "founded in"})
        assert json.loads(text(where))["total"] == 3
        for name, arguments, message in [
            ("search", {"query": "q" * 5000, "k": 2}, "search expects a query of at most 2,048 characters, got 5,000"),
            ("search", {"query": "river", "k": -3}, "search expects k to be a whole number from 1 to 50"),
            ("open", {"doc_id": "long-1", "page": 99}, "open expects page to be a whole number from 1 to 3"),
            ("find", {"doc_id": "nope", "pattern": "x"}, "find: there is no document with id 'nope'"),
            ("find", {"doc_id": "long-1"}, "find expects the argument 'pattern'"),
        ]:
            bad = await session.call_tool(name, arguments)
            assert bad.is_error and text(bad).startswith(message), text(bad)
        again = await session.call_tool("search", {"query": "river town"})
        assert not again.is_error and len(json.loads(text(again))["results"]) == 5


def test_over_stdio_as_a_harness_spawns_it(corpus_file):
    async def run():
        params = StdioServerParameters(command=sys.executable, args=command(corpus_file)[1:], env={**os.environ, **CHECKOUT},
                                        cwd=str(ROOT))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                await session_checks(read, write)

    anyio.run(run)


class HTTPServer:
    """A `searchgym mcp --transport http` process on 127.0.0.1; `url` once it printed its start line."""

    def __init__(self, corpus_file, *extra):
        self.proc = subprocess.Popen(command(corpus_file, "--transport", "http", "--port", "0", *extra), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env={**os.environ, **CHECKOUT})
        self.line = self.proc.stdout.readline()
        if not self.line:
            raise RuntimeError(f"searchgym mcp did not start: {self.proc.stderr.read()[-2000:]}")
        self.url = self.line.split(" at ", 1)[1].split(" ", 1)[0]

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(timeout=30)


def test_over_streamable_http_on_loopback(corpus_file):
    server = HTTPServer(corpus_file)
    try:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        assert "(streamable HTTP)" in server.line and "no token" in server.line

        async def run():
            async with streamable_http_client(server.url) as (read, write):
                await session_checks(read, write)

        anyio.run(run)
        # DNS rebinding protection: a page elsewhere that resolves its name to 127.0.0.1 is refused.
        foreign = httpx.post(server.url, json={}, headers={"Host": "evil.example:80"}, timeout=10)
        assert foreign.status_code == 421
        assert server.proc.poll() is None
    finally:
        server.stop()


def test_a_token_is_asked_for_over_http(corpus_file):
    server = HTTPServer(corpus_file, "--token", "s3cret")
    try:
        assert "token required" in server.line
        refused = httpx.post(server.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=10)
        assert refused.status_code == 401 and "Authorization: Bearer TOKEN" in refused.json()["error"]

        async def run():
            async with httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"}, timeout=30) as client:
                async with streamable_http_client(server.url, http_client=client) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        return [t.name for t in (await session.list_tools()).tools]

        assert anyio.run(run) == TOOLS
    finally:
        server.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "10.1.2.3"])
def test_a_non_loopback_host_is_refused_without_a_token_or_allow_list(host):
    done = subprocess.run([sys.executable, "-m", "searchgym.cli", "mcp", "--transport", "http", "--host", host, "--port", "0"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, **CHECKOUT})
    assert done.returncode == 2
    assert done.stderr.startswith(f"searchgym mcp: error: searchgym mcp refuses to listen on {host!r} without a token or an allow-list")


def test_stdio_refuses_the_http_flags():
    done = subprocess.run([sys.executable, "-m", "searchgym.cli", "mcp", "--token", "x"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **CHECKOUT})
    assert done.returncode == 2 and "--host, --token and --allow are for --transport http" in done.stderr


def test_a_port_in_use_is_refused_by_the_check_serve_uses():
    import socket

    from searchgym.error import ConfigError
    from searchgym.mcp_server import check_port

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(ConfigError) as e:
            check_port("127.0.0.1", port)
    assert str(e.value) == (f"searchgym mcp cannot listen on 127.0.0.1:{port}: the port is in use (another server, perhaps an "
                            "earlier `searchgym mcp`, holds it); stop that server or pick another --port.")
    with pytest.raises(ConfigError, match=r"^searchgym mcp expects a port between 0 and 65535, got 70000\.$"):
        check_port("127.0.0.1", 70000)
