"""``searchgym mcp``: a corpus's search tools served over the Model Context Protocol.

An agent harness that speaks MCP (Claude Desktop, Claude Code, an ``mcp`` SDK client, an
agent loop of one's own) gets the browse game's reads as MCP tools, over stdio (the harness
starts the server as its child) or streamable HTTP (one server, many clients):

- ``search(query, k)``: the ``k`` best documents (default 5, as BrowseComp-Plus), each its
  ``doc_id``, ``title``, ``score`` and a ``snippet`` of its first ``snippet_words`` words
  (default 512, BrowseComp-Plus's snippet length in words instead of tokens);
- ``open(doc_id, page)``: one page of a document (``page_words`` words a page) and the
  number of pages;
- ``find(doc_id, pattern)``: the places of a document holding a text (literal,
  case-insensitive: never a regular expression), each with its page;
- ``get_document(doc_id)``: a document's text, BrowseComp-Plus's tool, cut at
  ``max_document_chars`` (``open`` reads the rest).

Every call is bounded, whatever the client sends (:class:`ToolSettings`): query length, ``k``,
pattern length, page size, the characters of an answer, and ``timeout`` seconds of work. A
bad call (a missing or unknown argument, a wrong type, an unknown doc id, a page out of range,
a query too long) is answered with a tool error, ``isError: true`` and a message saying what
was expected; the server goes on. HTTP binds 127.0.0.1 by default, with the SDK's DNS
rebinding protection; another host needs ``--token`` (clients send ``Authorization: Bearer
TOKEN``) or ``--allow`` networks, as ``searchgym serve`` does.

The tools are :class:`SearchTools`, plain methods that take Python values and return plain
data; :func:`build_server` puts them on the SDK's low-level ``Server`` with their schemas
written once beside them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from searchgym.corpora.types import MAX_QUERY_CHARS, Corpus, Retriever
from searchgym.deepresearch.documents import MAX_PATTERN_CHARS, DocumentStore, id_problem, pattern_problem, snippet
from searchgym.error import ConfigError
from searchgym.serve import check_port_free, http_protocol, is_loopback
from searchgym.serve_access import Access, client_address, parse_networks

__all__ = ["BadToolCall", "SearchTools", "ToolSettings", "build_server", "http_app", "load_tools", "serve_mcp"]

log = logging.getLogger("searchgym.mcp")

#: Characters of a title shown (a title is a name; a corpus whose "titles" are paragraphs
#: would otherwise fill an answer with them).
MAX_TITLE_CHARS = 300
#: What a required argument is, for the message of a call without it.
REQUIRED = {"query": "the text to search for", "doc_id": "a doc id as the search results show it", "pattern": "the text to look for"}


@dataclass(frozen=True)
class ToolSettings:
    """The tools' settings and the bounds of every call."""

    k: int = 5
    """Hits of a ``search`` that gives no ``k`` (BrowseComp-Plus: 5)."""
    max_k: int = 50
    """The most hits one ``search`` returns."""
    snippet_words: int = 512
    """Words of each hit's snippet (BrowseComp-Plus: the document's first 512 tokens)."""
    page_words: int = 512
    """Words per page of ``open``."""
    max_find_results: int = 10
    """The most places one ``find`` returns."""
    max_query_chars: int = MAX_QUERY_CHARS
    """Characters of a query."""
    max_document_chars: int = 40_000
    """Characters of ``get_document``'s text (about 6,000 words); ``open`` pages through the rest."""
    max_response_chars: int = 262_144
    """Characters of one answer's JSON at most: snippets, pages and texts are cut to fit."""
    timeout: float = 30.0
    """Seconds one call may take, waiting for another to finish included; then a tool error."""
    get_document: bool = True
    """Offer ``get_document`` (BrowseComp-Plus's tool: a whole document in one call)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "get_document":
                if not isinstance(value, bool):
                    raise ConfigError(f"ToolSettings expects get_document to be true or false, got {value!r}.")
            elif name == "timeout":
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                    raise ConfigError(f"ToolSettings expects timeout to be a number of seconds in (0, 3600], got {value!r}.")
            elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ToolSettings expects {name} to be a positive integer, got {value!r}.")
        if self.k > self.max_k:
            raise ConfigError(f"ToolSettings expects k <= max_k, got {self.k} > {self.max_k}.")
        if self.max_response_chars < 16_384:
            raise ConfigError(f"ToolSettings expects max_response_chars of at least 16384 (a find's places fit in it), "
                              f"got {self.max_response_chars}.")


class BadToolCall(Exception):
    """A call the tools refuse; its message (what was expected, what came) goes to the client."""


def shown(value: Any, width: int = 60) -> str:
    """A client's value in a message: a string's length rather than a page of it."""
    if isinstance(value, str) and len(value) > width:
        return f"a string of {len(value):,} characters"
    text = repr(value)
    return text if len(text) <= width else f"a {type(value).__name__} ({text[: width - 20]}...)"


def fit(text: str, chars: int) -> str:
    """``text`` cut so that its JSON string takes at most ``chars`` characters, with a mark
    saying it was cut (escaped characters, quotes and newlines, count as what they become)."""
    if len(json.dumps(text, ensure_ascii=False)) <= chars:
        return text
    mark = f" ... [cut at {chars:,} characters]"
    keep = max(0, chars - len(mark) - 2)
    while keep and len(json.dumps(text[:keep] + mark, ensure_ascii=False)) > chars:
        keep = keep * 3 // 4
    return text[:keep].rstrip() + mark


def whole_number(tool: str, name: str, value: Any, low: int, high: int, what: str) -> int:
    """``value`` as an int in ``[low, high]`` (a JSON number such as 5.0 counts as 5), or :class:`BadToolCall`."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadToolCall(f"{tool} expects {name} to be a whole number from {low} to {high}{what}, got {shown(value)}")
    return value


class SearchTools:
    """The MCP tools of one corpus and its retriever, as plain functions.

    Each method checks its arguments (:class:`BadToolCall` says what was expected) and
    returns JSON-ready data; :meth:`call` does the same for a tool call by name, its
    arguments a mapping as a client sends them. Calls are serialized (one retriever and one
    document store serve them all), and each waits at most ``settings.timeout`` seconds for
    its turn.

    Args:
        retriever: Anything with ``search(queries, k)``.
        corpus: The documents ``open``, ``find`` and ``get_document`` read.
        settings: The bounds (:class:`ToolSettings`).
    """

    def __init__(self, retriever: Retriever, corpus: Corpus, settings: ToolSettings | None = None):
        self.retriever = retriever
        self.corpus = corpus
        self.settings = settings or ToolSettings()
        self.store = DocumentStore(corpus, page_words=self.settings.page_words, max_find_results=self.settings.max_find_results)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the tools
    def search(self, query: Any, k: Any = None) -> dict[str, Any]:
        s = self.settings
        if not isinstance(query, str) or not query.strip():
            raise BadToolCall(f"search expects query to be a non-empty string (what to look for), got {shown(query)}")
        if len(query) > s.max_query_chars:
            raise BadToolCall(f"search expects a query of at most {s.max_query_chars:,} characters, got {len(query):,}; "
                              "search for a shorter text")
        k = s.k if k is None else whole_number("search", "k", k, 1, s.max_k, f" (default {s.k})")
        (hits,) = self.retriever.search([query], k)
        each = (s.max_response_chars - 200) // max(1, len(hits)) - 120 - MAX_TITLE_CHARS  # a hit's snippet, less its other fields
        results = [{"doc_id": h.passage.id, "title": fit(h.passage.title, MAX_TITLE_CHARS), "score": round(float(h.score), 4),
                    "snippet": fit(snippet(h.passage.text, s.snippet_words), each)} for h in hits[:k]]
        return {"query": fit(query, 200), "results": results}

    def open(self, doc_id: Any, page: Any = 1) -> dict[str, Any]:
        self._check_id("open", doc_id)
        count = self.store.pages(doc_id)
        page = 1 if page is None else whole_number("open", "page", page, 1, count,
                                                   f" (document {doc_id} has {count} page{'s' if count != 1 else ''})")
        read = self.store.page(doc_id, page)
        assert read is not None  # the id and the page were checked
        return {"doc_id": read.doc_id, "title": fit(read.title, MAX_TITLE_CHARS), "page": read.number, "pages": read.count,
                "text": fit(read.text, self.settings.max_response_chars - MAX_TITLE_CHARS - 200)}

    def find(self, doc_id: Any, pattern: Any) -> dict[str, Any]:
        self._check_id("find", doc_id)
        problem = pattern_problem(pattern)
        if problem:
            raise BadToolCall(problem.replace("find needs", "find expects", 1))
        found = self.store.find(doc_id, " ".join(pattern.split()))
        assert found is not None
        return {"doc_id": found.doc_id, "title": fit(found.title, MAX_TITLE_CHARS), "pattern": found.pattern, "pages": found.pages,
                "total": found.total, "places": [{"page": page, "excerpt": excerpt} for page, excerpt in found.places]}

    def get_document(self, doc_id: Any) -> dict[str, Any]:
        self._check_id("get_document", doc_id)
        passage = self.store.get(doc_id)
        assert passage is not None
        limit = min(self.settings.max_document_chars, self.settings.max_response_chars - MAX_TITLE_CHARS - 200)
        text = fit(passage.text, limit)
        return {"doc_id": passage.id, "title": fit(passage.title, MAX_TITLE_CHARS), "text": text,
                "truncated": text != passage.text, "pages": self.store.pages(doc_id)}

    def _check_id(self, tool: str, doc_id: Any) -> None:
        problem = id_problem(self.store, doc_id)
        if problem:
            raise BadToolCall(f"{tool}: {problem}")

    # ------------------------------------------------------------------ what a client reads
    def specs(self) -> list[dict[str, Any]]:
        """Each tool's name, description and JSON schema of its arguments."""
        s = self.settings
        doc_id = {"type": "string", "description": "A document id as the search results show it (doc_id)."}
        tools = [
            {"name": "search",
             "description": (f"Search the corpus. Returns the best documents, each its doc_id, title, score and a snippet of its first "
                             f"{s.snippet_words} words. Read a document further with open or find."),
             "input_schema": {"type": "object", "properties": {
                 "query": {"type": "string", "description": f"What to look for (at most {s.max_query_chars} characters)."},
                 "k": {"type": "integer", "minimum": 1, "maximum": s.max_k,
                       "description": f"How many documents to return (default {s.k}, at most {s.max_k})."}},
                 "required": ["query"], "additionalProperties": False}},
            {"name": "open",
             "description": (f"Read one page of a document ({s.page_words} words a page). Returns the page's text and the "
                             "number of pages."),
             "input_schema": {"type": "object", "properties": {
                 "doc_id": doc_id, "page": {"type": "integer", "minimum": 1, "description": "The page number, from 1 (default 1)."}},
                 "required": ["doc_id"], "additionalProperties": False}},
            {"name": "find",
             "description": (f"Find the places in a document that hold a text (literal text, case-insensitive; not a regular "
                             f"expression). Returns the first {s.max_find_results} places, each with its page and an excerpt, "
                             "and how many there are."),
             "input_schema": {"type": "object", "properties": {
                 "doc_id": doc_id,
                 "pattern": {"type": "string",
                             "description": f"The text to look for, e.g. \"founded in\" (at most {MAX_PATTERN_CHARS} characters)."}},
                 "required": ["doc_id", "pattern"], "additionalProperties": False}},
        ]
        if s.get_document:
            tools.append(
                {"name": "get_document",
                 "description": (f"Get a document's full text (cut at {s.max_document_chars} characters; read a longer one "
                                 "page by page with open)."),
                 "input_schema": {"type": "object", "properties": {"doc_id": doc_id}, "required": ["doc_id"],
                                  "additionalProperties": False}})
        return tools

    def call(self, name: Any, arguments: Mapping[str, Any] | None, deadline: float | None = None) -> dict[str, Any]:
        """Run the tool ``name`` with ``arguments`` (a client's mapping); :class:`BadToolCall`
        for an unknown tool, a missing or unknown argument, or a bad value. ``deadline``
        (``time.monotonic()``): when waiting for the call before it stops."""
        specs = {spec["name"]: spec for spec in self.specs()}
        if name not in specs:
            raise BadToolCall(f"there is no tool {shown(name)}; the tools are {', '.join(specs)}")
        arguments = {} if arguments is None else arguments
        if not isinstance(arguments, Mapping):
            raise BadToolCall(f"{name} expects its arguments as an object, got {shown(arguments)}")
        schema = specs[name]["input_schema"]
        accepted = list(schema["properties"])
        unknown = [key for key in arguments if key not in accepted]
        if unknown:
            raise BadToolCall(f"{name} takes the arguments {', '.join(accepted)}; got {shown(unknown[0])}, which it does not take")
        for key in schema["required"]:
            if key not in arguments:
                raise BadToolCall(f"{name} expects the argument {key!r} ({REQUIRED[key]}), got none; call {name}({', '.join(accepted)})")
        method: Callable[..., dict[str, Any]] = getattr(self, name)
        wait = -1 if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._lock.acquire(timeout=wait):
            raise BadToolCall(f"{name} waited {self.settings.timeout:g} s for the calls before it; the server is busy, retry later")
        try:
            return method(**arguments)
        finally:
            self._lock.release()


# ---------------------------------------------------------------------- the MCP server


def build_server(tools: SearchTools, *, name: str = "searchgym", instructions: str | None = None) -> Any:
    """The SDK's low-level ``mcp.server.Server`` serving ``tools``: ``tools/list`` and
    ``tools/call``, each call run in a worker thread within ``tools.settings.timeout`` seconds;
    a refused or failed call is a tool result with ``isError: true`` and the reason."""
    from searchgym.error import require

    require("mcp", extra="mcp", feature="searchgym mcp")
    import anyio
    import mcp.types as types
    from mcp.server import Server

    listed = [types.Tool(name=spec["name"], description=spec["description"], input_schema=spec["input_schema"])
              for spec in tools.specs()]
    timeout = tools.settings.timeout
    limit = tools.settings.max_response_chars

    def refusal(message: str) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        deadline = time.monotonic() + timeout
        result: dict[str, Any] | None = None
        with anyio.move_on_after(timeout):
            try:
                # abandon_on_cancel: a search past its time is left to finish in its thread (a thread
                # cannot be stopped); the calls after it wait on the tools' lock no longer than their own deadline.
                result = await anyio.to_thread.run_sync(tools.call, params.name, params.arguments, deadline, abandon_on_cancel=True)
            except BadToolCall as e:
                return refusal(str(e))
            except Exception as e:  # a retriever's failure: said to the client, the server goes on
                log.error("tool %s failed: %s: %s", params.name, type(e).__name__, e)
                return refusal(f"{params.name} failed on the server: {type(e).__name__}: {e}")
        if result is None:
            return refusal(f"{params.name} took longer than the server's timeout of {timeout:g} s; try a shorter query or retry later")
        text = json.dumps(result, ensure_ascii=False)
        if len(text) > limit:  # the parts were cut to fit: this is a guard, not a path
            return refusal(f"{params.name}'s answer of {len(text):,} characters exceeds max_response_chars={limit:,}")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=result)

    return Server(name, version=_version(), instructions=instructions, on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("searchgym")
    except PackageNotFoundError:
        return "0"


class Guard:
    """ASGI wrapper admitting an HTTP request by its bearer token or its client address
    (:class:`~searchgym.serve_access.Access`); others get a JSON 401 / 403 before the MCP app
    reads them. Lifespan events pass through."""

    def __init__(self, app: Any, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.access.guarded:
            headers = dict(scope.get("headers") or [])
            authorization = headers.get(b"authorization", b"").decode("latin-1")
            client = (scope.get("client") or (None,))[0]
            admitted = self.access.allowed_address(client) or (
                authorization.startswith("Bearer ") and self.access.token_matches(authorization.removeprefix("Bearer ")))
            if not admitted:
                if self.access.token:
                    status, message = 401, "missing or wrong bearer token: send 'Authorization: Bearer TOKEN' (the server's --token)"
                else:
                    status, message = 403, f"client address {client_address(client)} is not in the server's --allow list"
                body = json.dumps({"error": message, "status": status}).encode()
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(server: Any, *, host: str = "127.0.0.1", path: str = "/mcp", access: Access | None = None,
             max_body_bytes: int = 1 << 20) -> Any:
    """The streamable HTTP ASGI app of ``server`` at ``path`` (DNS rebinding protection on a
    loopback host, as the SDK sets it), behind a :class:`Guard` when ``access`` asks for anything."""
    app = server.streamable_http_app(streamable_http_path=path, host=host, max_request_body_size=max_body_bytes)
    return Guard(app, access) if access is not None and access.guarded else app


# ---------------------------------------------------------------------- loading and serving


def load_tools(corpus: str | None = None, retriever: str = "bm25", *, index: str | None = None,
               corpus_options: Mapping[str, Any] | None = None, retriever_options: Mapping[str, Any] | None = None,
               settings: ToolSettings | None = None) -> tuple[SearchTools, str]:
    """The tools over ``corpus`` (a built-in name or a passage file; default synthwiki) with
    ``retriever``, or over an ``index`` folder built by ``searchgym index`` (its corpus
    the file it records unless ``corpus`` is given), and a line saying what they serve."""
    from searchgym.corpora.indexes import index_meta, is_index_folder, load_index, open_index_corpus
    from searchgym.corpora.registry import load_corpus
    from searchgym.corpora.retrievers import make_retriever

    if index is not None and not is_index_folder(index):
        index_meta(index)  # NoIndexError: what is there instead and what to run
    if index is not None:
        loaded = open_index_corpus(index) if corpus is None else load_corpus(corpus, **dict(corpus_options or {}))
        engine = load_index(index, loaded, **dict(retriever_options or {}))
        kind = index_meta(index).get("retriever") or index_meta(index).get("kind")
        what = f"index {index} ({kind})"
    else:
        loaded = load_corpus(corpus or "synthwiki", **dict(corpus_options or {}))
        engine = make_retriever(retriever, loaded, **dict(retriever_options or {}))
        what = retriever if isinstance(retriever, str) else type(retriever).__name__
    line = f"{what} over {loaded.name} ({len(loaded):,} passages, fingerprint {loaded.fingerprint})"
    return SearchTools(engine, loaded, settings), line


def check_exposure(host: str, access: Access) -> None:
    """Refuse a non-loopback ``host`` that lets anyone in."""
    if is_loopback(host) or access.guarded:
        return
    raise ConfigError(
        f"searchgym mcp refuses to listen on {host!r} without a token or an allow-list: anyone who reaches the port could "
        "use it. Pass --token SECRET (clients send 'Authorization: Bearer SECRET'), or --allow NETWORK for the clients' "
        "addresses (e.g. --allow 10.0.0.0/8), or keep --host 127.0.0.1."
    )


def serve_mcp(tools: SearchTools, what: str, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8000,
              path: str = "/mcp", token: str | None = None, allow: Sequence[str] = (), header_timeout: float = 10.0,
              max_connections: int = 256, ready: float = 0.0) -> None:
    """Serve ``tools`` until the client closes stdin (stdio) or SIGINT / SIGTERM (http)."""
    import anyio

    server = build_server(tools)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        print(f"searchgym mcp: {what} over stdio; loaded in {ready:.1f} s", file=sys.stderr, flush=True)

        async def run() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run)
        return
    if transport != "http":
        raise ConfigError(f"searchgym mcp expects --transport stdio or http, got {transport!r}.")
    from searchgym.error import require

    uvicorn = require("uvicorn", extra="mcp", feature="searchgym mcp --transport http")
    config = uvicorn.Config(http_app(server, host=host, path=path, access=Access(token, parse_networks(allow))), host=host, port=port,
                            log_level="warning", access_log=False, timeout_graceful_shutdown=5,
                            http=http_protocol(header_timeout), limit_concurrency=max_connections)
    runner = uvicorn.Server(config)
    original = runner.startup
    guard = Access(token, parse_networks(allow)).describe()

    async def startup(sockets: Any = None) -> None:
        await original(sockets=sockets)
        bound = [s.getsockname() for srv in getattr(runner, "servers", []) for s in srv.sockets]
        where = ", ".join(f"http://{a[0]}:{a[1]}{path}" for a in bound) or f"http://{host}:{port}{path}"
        print(f"searchgym mcp: {what} at {where} (streamable HTTP); loaded in {ready:.1f} s; {guard}", flush=True)

    runner.startup = startup  # type: ignore[method-assign]
    runner.run()


def check_port(host: str, port: int) -> None:
    """Refuse, in one line and before the corpus loads, a port out of range or one another server
    holds (``searchgym serve``'s check)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"searchgym mcp expects a port between 0 and 65535, got {port!r}.")
    check_port_free(host, port, command="mcp")


# ---------------------------------------------------------------------- the command


def add_arguments(parser: Any) -> None:
    """``searchgym mcp``'s flags."""
    d = ToolSettings()
    parser.add_argument("--corpus", default=None, help="built-in corpus (synthwiki, deepwiki, wiki-vital) or a passage jsonl "
                        "(default: the file an --index folder records, else synthwiki)")
    parser.add_argument("--corpus-option", action="append", default=[], metavar="KEY=VALUE", help="corpus option, e.g. num_passages=5000")
    parser.add_argument("--retriever", default="bm25", help="bm25 (default), rank-bm25, dense, dense-hnsw, a registered name or MODULE:ATTR")
    parser.add_argument("--retriever-option", action="append", default=[], metavar="KEY=VALUE", help="retriever option, e.g. model=PATH")
    parser.add_argument("--index", default=None, metavar="DIR", help="an index folder built by `searchgym index` (loads in seconds)")
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MODULE",
                        help="import MODULE first (repeatable), e.g. one that registers a retriever")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default: the harness starts this command) or http (streamable HTTP at --path)")
    parser.add_argument("--host", default="127.0.0.1", help="http: address to bind (default 127.0.0.1; any other needs --token or --allow)")
    parser.add_argument("--port", type=int, default=8000, help="http: port (default 8000; 0 picks a free one, printed at start)")
    parser.add_argument("--path", default="/mcp", help="http: the endpoint's path (default /mcp)")
    parser.add_argument("--token", default=None, help="http: token clients send as 'Authorization: Bearer TOKEN' "
                        "(default: $SEARCHGYM_MCP_TOKEN if set, else none)")
    parser.add_argument("--allow", action="append", default=[], metavar="ADDR_OR_CIDR", help="http: let this address or network in without the token")
    parser.add_argument("--k", type=int, default=d.k, help=f"hits of a search that gives no k (default {d.k})")
    parser.add_argument("--max-k", type=int, default=d.max_k, help=f"the most hits one search returns (default {d.max_k})")
    parser.add_argument("--snippet-words", type=int, default=d.snippet_words, help=f"words of each hit's snippet (default {d.snippet_words})")
    parser.add_argument("--page-words", type=int, default=d.page_words, help=f"words per page of open (default {d.page_words})")
    parser.add_argument("--max-find-results", type=int, default=d.max_find_results, help=f"places one find returns (default {d.max_find_results})")
    parser.add_argument("--max-query-chars", type=int, default=d.max_query_chars, help=f"characters of a query (default {d.max_query_chars})")
    parser.add_argument("--max-document-chars", type=int, default=d.max_document_chars,
                        help=f"characters of get_document's text (default {d.max_document_chars})")
    parser.add_argument("--max-response-chars", type=int, default=d.max_response_chars,
                        help=f"characters of one answer (default {d.max_response_chars})")
    parser.add_argument("--timeout", type=float, default=d.timeout, help=f"seconds one call may take (default {d.timeout:g})")
    parser.add_argument("--no-get-document", action="store_true", help="offer search, open and find only")


def main(args: Any, key_values: Callable[[list[str], str], dict]) -> int:
    """Run ``searchgym mcp`` with parsed ``args``; ``key_values`` reads KEY=VALUE flags."""
    import os

    from searchgym.corpora.retrievers import check_retriever
    from searchgym.error import require
    from searchgym.plugins import import_modules

    require("mcp", extra="mcp", feature="searchgym mcp")
    settings = ToolSettings(k=args.k, max_k=args.max_k, snippet_words=args.snippet_words, page_words=args.page_words,
                            max_find_results=args.max_find_results, max_query_chars=args.max_query_chars,
                            max_document_chars=args.max_document_chars, max_response_chars=args.max_response_chars,
                            timeout=args.timeout, get_document=not args.no_get_document)
    token = args.token or os.environ.get("SEARCHGYM_MCP_TOKEN")
    if args.transport == "http":
        check_exposure(args.host, Access(token, parse_networks(args.allow)))
        check_port(args.host, args.port)
        if not args.path.startswith("/"):
            raise ConfigError(f"searchgym mcp expects --path to start with '/', got {args.path!r}.")
    elif token or args.allow or args.host != "127.0.0.1":
        raise ConfigError("searchgym mcp --transport stdio talks to the process that started it: --host, --token and --allow "
                          "are for --transport http.")
    import_modules(args.imports)
    check_retriever(args.retriever)
    start = time.perf_counter()
    # Over stdio, stdout is the protocol's channel: what loading prints goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        tools, what = load_tools(args.corpus, args.retriever, index=args.index,
                                 corpus_options=key_values(args.corpus_option, "corpus-option"),
                                 retriever_options=key_values(args.retriever_option, "retriever-option"), settings=settings)
    try:
        serve_mcp(tools, what, transport=args.transport, host=args.host, port=args.port, path=args.path, token=token,
                  allow=args.allow, ready=time.perf_counter() - start)
    except KeyboardInterrupt:
        print("searchgym mcp: stopped", file=sys.stderr, flush=True)
        return 130
    return 0
