"""``searchgym serve``: any searchgym retriever behind Search-R1's ``/retrieve`` API.

    POST /retrieve  {"queries": ["..."], "topk": 3, "return_scores": true}
        -> {"result": [[{"document": {"id": "...", "contents": "\\"Title\\"\\ntext"}, "score": 1.5}, ...], ...]}
           (without return_scores: the bare documents, [[{"id": "...", "contents": "..."}, ...], ...];
           an empty "queries" list: {"result": []}, as Search-R1's server answers)
    GET  /health    -> {"status": "ok", ...}
    GET  /info      -> the corpus, its size and fingerprint, the retriever and its options, the limits

Search-R1's clients (and verl's search tool) work against it unchanged; so does
:class:`searchgym.corpora.http.HTTPRetriever`. Requests that arrive together are
coalesced: while one batched ``Retriever.search`` runs in a worker thread, the requests
that arrive wait, and the next search answers all of them at once (one call per
``topk``; ``window_ms`` > 0 also waits that long for more), so the event loop keeps
accepting requests and batches grow with the load.

Safe by default: it binds 127.0.0.1; a non-loopback ``--host`` needs ``--token`` (clients
send ``Authorization: Bearer TOKEN``, or put the token first in the URL's path,
``/TOKEN/retrieve``) or ``--allow`` networks (:mod:`searchgym.serve_access`), checked before
the body is read. Queries per request (4,096 by default: Search-R1's training posts a turn's
2,560 in one request), query length, ``topk``, documents per request and body size are
bounded; a large request is searched in chunks of ``chunk_queries``, each turned into JSON
before the next is searched, so its memory is one chunk's hits plus the answer's bytes.
Every bad request gets a 4xx JSON
``{"error": ...}`` naming what was expected: no client input yields a 5xx. Slow clients
cannot hold the server: a connection whose request headers are not complete within
``header_timeout`` seconds, or whose body is not within ``body_timeout``, gets a 408 and
is closed, and past ``max_connections`` open connections new requests get a 503 (which
clients retry). A search that waits longer than ``request_timeout`` gets a 503.
"""

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from searchgym.corpora.types import MAX_QUERY_CHARS, Corpus, Hit, Retriever
from searchgym.error import ConfigError, Interrupted, require
from searchgym.serve_access import Access, PathToken, parse_networks

log = logging.getLogger("searchgym.serve")


@dataclass(frozen=True)
class Limits:
    """What one request may ask."""

    max_queries: int = 4096
    """Queries per request: Search-R1's training posts a turn's queries in one request, 512
    questions x 5 rollouts = 2,560 in its GRPO scripts (512 x 8 = 4,096 fits too)."""
    max_query_chars: int = MAX_QUERY_CHARS
    """Characters per query."""
    max_topk: int = 100
    """Documents per query."""
    max_body_bytes: int = 16 << 20
    """Bytes of the request body (4 KiB a query at ``max_queries``)."""
    default_topk: int = 3
    """``topk`` of a request that gives none (Search-R1's servers fall back the same way)."""
    max_documents: int = 40_960
    """Documents per request (queries x ``topk``): bounds the answer's size (4,096 queries
    x 10, or 2,560 x 16)."""

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"Limits expects {name} to be a positive integer, got {value!r}.")
        if self.default_topk > self.max_topk:
            raise ConfigError(f"Limits expects default_topk <= max_topk, got {self.default_topk} > {self.max_topk}.")


# No ``from __future__ import annotations`` here: FastAPI reads the endpoints' annotations
# (``request: Request``, imported inside create_app) as objects.


@dataclass(frozen=True)
class ConnectionLimits:
    """How long and how many connections the server holds (against slow or idle clients)."""

    header_timeout: float = 10.0
    """Seconds a connection may take to send a request's headers, counted from its opening
    or from the previous response; then a 408 and the connection is closed."""
    body_timeout: float = 10.0
    """Seconds a request may take to send its body once the headers arrived; then a 408."""
    max_connections: int = 1024
    """Open connections at most; past it a request is answered 503 at once (uvicorn's
    ``limit_concurrency``)."""

    def __post_init__(self) -> None:
        for name in ("header_timeout", "body_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
                raise ConfigError(f"ConnectionLimits expects {name} to be a number of seconds in (0, 3600], got {value!r}.")
        if isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int) or self.max_connections < 1:
            raise ConfigError(f"ConnectionLimits expects max_connections to be a positive integer, got {self.max_connections!r}.")


def shown(value: Any, width: int = 60) -> str:
    """``repr`` of a client's value for an error message: short, and never an exception
    (a huge or deeply nested value is cut)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= width else text[: width - 3] + "..."


class RequestError(Exception):
    """A bad request: its HTTP status and the message sent back."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_request(body: bytes, limits: Limits) -> tuple[list[str], int, bool]:
    """``(queries, topk, return_scores)`` of a ``/retrieve`` body, or :class:`RequestError`."""
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError, an integer past Python's digit limit
        reason = "it nests too deeply" if isinstance(e, RecursionError) else f"it did not parse ({shown(str(e), 200)[1:-1]})"
        raise RequestError(400, f"the body must be JSON like {{\"queries\": [\"...\"], \"topk\": 3}}; {reason}") from None
    if not isinstance(payload, dict):
        raise RequestError(422, f"the body must be a JSON object with 'queries', got {type(payload).__name__}")
    # Other fields are ignored, as Search-R1's server does (clients send extras such as request ids).
    queries = payload.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise RequestError(422, "'queries' must be a list of strings")
    # An empty list is a valid request answered with {"result": []}: Search-R1's rollout calls
    # batch_search every turn, also when no rollout searched.
    if len(queries) > limits.max_queries:
        raise RequestError(413, f"{len(queries)} queries exceed max_queries={limits.max_queries} per request; split the batch")
    long = max((len(q) for q in queries), default=0)
    if long > limits.max_query_chars:
        raise RequestError(413, f"a query of {long} characters exceeds max_query_chars={limits.max_query_chars}")
    topk = payload.get("topk")
    if topk is None:
        topk = limits.default_topk
    if isinstance(topk, bool) or not isinstance(topk, int) or topk < 1:
        raise RequestError(422, f"'topk' must be a positive integer, got {shown(topk)}")
    if topk > limits.max_topk:
        raise RequestError(422, f"topk={shown(topk)} exceeds max_topk={limits.max_topk}")
    if len(queries) * topk > limits.max_documents:
        raise RequestError(413, f"{len(queries)} queries x topk={topk} = {len(queries) * topk} documents exceed "
                                f"max_documents={limits.max_documents} per request; split the batch or lower topk")
    scores = payload.get("return_scores", False)
    if not isinstance(scores, bool):
        raise RequestError(422, f"'return_scores' must be true or false, got {shown(scores)}")
    return queries, topk, scores


def document(hit: Hit) -> dict[str, str]:
    """A hit's passage as Search-R1 serves it: ``id`` and ``contents`` (``"Title"\\ntext``)."""
    return {"id": hit.passage.id, "contents": hit.passage.contents}


class Coalescer:
    """Answers concurrent searches with batched ``Retriever.search`` calls.

    ``await search(queries, k)`` queues the queries. One collector task takes every
    request waiting (at most ``max_batch`` queries), runs one ``search`` per distinct
    ``k`` in a worker thread, and hands each caller its rows; requests that arrive during
    a search wait for the next batch. Alone, a request is searched at once; under load,
    batches grow by themselves. ``window_ms`` > 0 also waits that long after the first
    request of a batch for others. ``batches`` and ``queries`` count what was served.
    """

    def __init__(self, retriever: Retriever, *, window_ms: float = 0.0, max_batch: int = 1024):
        if isinstance(window_ms, bool) or not isinstance(window_ms, (int, float)) or not 0 <= window_ms <= 1000:
            raise ConfigError(f"Coalescer expects window_ms between 0 and 1000, got {window_ms!r}.")
        self.retriever = retriever
        self.window = window_ms / 1000
        self.max_batch = max_batch
        self.batches = self.queries = 0
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None

    async def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        loop = asyncio.get_running_loop()
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._task = loop.create_task(self._collect())
        future = loop.create_future()
        self._queue.put_nowait((queries, k, future))
        return await future

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _collect(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            waiting = [await self._queue.get()]
            count = len(waiting[0][0])
            deadline = loop.time() + self.window
            while count < self.max_batch:
                if not self._queue.empty():
                    item = self._queue.get_nowait()
                else:
                    timeout = deadline - loop.time()
                    if timeout <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(self._queue.get(), timeout)
                    except asyncio.TimeoutError:
                        break
                waiting.append(item)
                count += len(item[0])
            by_k: dict[int, list[tuple[list[str], asyncio.Future]]] = {}
            for queries, k, future in waiting:
                by_k.setdefault(k, []).append((queries, future))
            for k, group in by_k.items():
                flat = [q for queries, _ in group for q in queries]
                try:
                    rows = await loop.run_in_executor(None, self.retriever.search, flat, k)
                except Exception as e:  # every caller of the batch gets the error; the loop goes on
                    for _, future in group:
                        if not future.done():
                            future.set_exception(e)
                    continue
                self.batches += 1
                self.queries += len(flat)
                start = 0
                for queries, future in group:
                    if not future.done():  # the caller may have timed out
                        future.set_result(rows[start : start + len(queries)])
                    start += len(queries)


def create_app(
    retriever: Retriever,
    *,
    info: dict[str, Any] | None = None,
    limits: Limits | None = None,
    token: str | None = None,
    window_ms: float = 0.0,
    request_timeout: float = 60.0,
    coalesce: bool = True,
    connections: ConnectionLimits | None = None,
    allow: Sequence[str] = (),
    chunk_queries: int = 512,
) -> Any:
    """The ASGI app (FastAPI, behind :class:`~searchgym.serve_access.PathToken` when a
    ``token`` is set) serving ``retriever``; ``info`` is what ``/info`` adds about the index.
    ``coalesce=False`` calls ``search`` once per request, in a thread. ``token`` and
    ``allow`` (addresses or CIDR networks) say who may search (:class:`~searchgym.serve_access.Access`).
    A request of more than ``chunk_queries`` queries is searched chunk by chunk, all within
    ``request_timeout`` seconds. ``connections.body_timeout`` bounds the reading of a body
    (the header timeout and the connection cap belong to the HTTP protocol: see :func:`serve`)."""
    require("fastapi", extra="serve", feature="searchgym serve")
    from fastapi import FastAPI, Request
    from fastapi.responses import Response
    from starlette.requests import ClientDisconnect

    limits = limits or Limits()
    connections = connections or ConnectionLimits()
    access = Access(token, parse_networks(allow))
    if isinstance(chunk_queries, bool) or not isinstance(chunk_queries, int) or chunk_queries < 1:
        raise ConfigError(f"create_app expects chunk_queries to be a positive integer, got {chunk_queries!r}.")
    coalescer = Coalescer(retriever, window_ms=window_ms, max_batch=max(chunk_queries, 1024)) if coalesce else None
    started = time.time()
    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        if coalescer is not None:
            await coalescer.close()

    app = FastAPI(title="searchgym retrieval server", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)

    def error(status: int, message: str, *, close: bool = False) -> Response:
        # ASCII JSON: a message quoting a client's lone surrogate still encodes. ``close`` for an answer
        # sent before the body was read: the connection is not reused for what the client still sends.
        headers = {"Connection": "close"} if close else None
        return Response(json.dumps({"error": message, "status": status}), status_code=status, media_type="application/json",
                        headers=headers)

    def refused(request: Request) -> Response | None:
        client = request.client.host if request.client is not None else None
        denied = access.refusal(request.headers.get("authorization", ""), client,
                                path_token=bool(request.scope.get("searchgym.path_token")))
        return None if denied is None else error(*denied, close=True)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:  # a JSON 500, never an HTML page or a dead worker
        log.error("request failed: %s: %s", type(exc).__name__, exc)
        return error(500, f"the server failed on this request: {type(exc).__name__}: {exc}")

    @app.exception_handler(404)
    async def not_found(request: Request, exc: Any) -> Response:
        return error(404, f"no endpoint {request.method} {request.url.path}; expected POST /retrieve, GET /health or GET /info")

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Any) -> Response:
        return error(405, f"{request.method} is not allowed on {request.url.path}; expected POST /retrieve, GET /health or GET /info")

    @app.get("/health")
    async def health(request: Request) -> Any:
        return refused(request) or {"status": "ok", "passages": len(retriever.corpus) if getattr(retriever, "corpus", None) is not None else None,
                                    "uptime_s": round(time.time() - started, 1)}

    @app.get("/info")
    async def describe(request: Request) -> Any:
        served = {"batches": coalescer.batches, "queries": coalescer.queries} if coalescer else None
        coalescing = {"window_ms": window_ms, "served": served} if coalescer else None
        return refused(request) or {**(info or {}), "limits": asdict(limits), "connections": asdict(connections),
                                    "coalescing": coalescing}

    @app.post("/retrieve")
    async def retrieve(request: Request) -> Any:
        denied = refused(request)
        if denied is not None:
            return denied
        declared = request.headers.get("content-length", "").strip()
        if declared.isdigit() and (len(declared) > 12 or int(declared) > limits.max_body_bytes):
            return error(413, f"a body of {shown(declared)} bytes exceeds max_body_bytes={limits.max_body_bytes}", close=True)
        body = bytearray()

        async def read() -> bool:
            async for chunk in request.stream():
                body.extend(chunk)
                if len(body) > limits.max_body_bytes:
                    return False
            return True

        try:
            whole = await asyncio.wait_for(read(), connections.body_timeout)
        except ClientDisconnect:  # the client left: nobody reads this answer
            return error(400, "the client disconnected before sending the whole body", close=True)
        except asyncio.TimeoutError:
            return error(408, f"the body did not arrive within body_timeout={connections.body_timeout} s; send it at once", close=True)
        if not whole:
            return error(413, f"the body exceeds max_body_bytes={limits.max_body_bytes}", close=True)
        try:
            queries, topk, scores = parse_request(bytes(body), limits)
        except RequestError as e:
            return error(e.status, str(e))
        if not queries:
            return Response('{"result": []}', media_type="application/json")
        try:
            parts = await asyncio.wait_for(answer(queries, topk, scores), request_timeout)
        except asyncio.TimeoutError:
            return error(503, f"the search took longer than {request_timeout} s; the server is overloaded, retry later")
        return Response(b'{"result": [' + b", ".join(parts) + b"]}", media_type="application/json")

    async def answer(queries: list[str], topk: int, scores: bool) -> list[bytes]:
        """The JSON of every row, chunk by chunk: a chunk's hits are dropped once written, so a
        request of thousands of queries holds one chunk's ``Hit`` objects at a time."""
        parts: list[bytes] = []
        for start in range(0, len(queries), chunk_queries):
            chunk = queries[start : start + chunk_queries]
            if coalescer is not None:
                rows = await coalescer.search(chunk, topk)
            else:
                rows = await asyncio.to_thread(retriever.search, chunk, topk)
            if scores:
                result = [[{"document": document(h), "score": float(h.score)} for h in row] for row in rows]
            else:
                result = [[document(h) for h in row] for row in rows]
            # Written directly: FastAPI's encoder walks every nested dict again.
            parts.append(json.dumps(result, ensure_ascii=False)[1:-1].encode())  # "[row, row]" less its brackets
        return parts

    return PathToken(app, access) if access.token else app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, access: Access) -> None:
    """Raise :class:`ConfigError` for a non-loopback ``host`` that lets anyone in: it needs a
    token, an allow-list, or both."""
    if is_loopback(host) or access.guarded:
        return
    raise ConfigError(
        f"searchgym serve refuses to listen on {host!r} without a token or an allow-list: anyone who reaches the port "
        "could use it. Pass --token SECRET (clients send 'Authorization: Bearer SECRET' or use the URL "
        "http://HOST:PORT/SECRET/retrieve), or --allow NETWORK for the workers' addresses (e.g. --allow 10.0.0.0/8), "
        "or keep --host 127.0.0.1."
    )


def check_port_free(host: str, port: int, command: str = "serve") -> None:
    """Raise :class:`ConfigError` in one line when ``host:port`` cannot be listened on (another
    server holds it), instead of uvicorn's errno log after the corpus has loaded; ``command``
    names the ``searchgym`` command in the message (``serve``, ``mcp``)."""
    if port == 0:
        return
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as e:
        raise ConfigError(f"searchgym {command} cannot resolve --host {host!r} ({e.strerror}); pass an IP address such as 127.0.0.1.") from None
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a closing connection does not count
        try:
            probe.bind((host, port))
        except OSError as e:
            held = e.errno == errno.EADDRINUSE
            raise ConfigError(
                f"searchgym {command} cannot listen on {host}:{port}: "
                + (f"the port is in use (another server, perhaps an earlier `searchgym {command}`, holds it); stop that "
                   "server or pick another --port." if held else f"{e.strerror}; pick another --host or --port.")
            ) from None


def serve(
    corpus: str | None = None,
    retriever: str = "bm25",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    corpus_options: dict[str, Any] | None = None,
    retriever_options: dict[str, Any] | None = None,
    index_file: str | None = None,
    limits: Limits | None = None,
    window_ms: float = 0.0,
    coalesce: bool = True,
    shards: str | None = None,
    connections: ConnectionLimits | None = None,
    allow: Sequence[str] = (),
    request_timeout: float = 60.0,
) -> None:
    """Open ``corpus``, load or build ``retriever`` and serve it until SIGINT / SIGTERM
    (uvicorn finishes the requests in flight, then exits).

    ``index_file``: an index folder built by ``searchgym index`` (memory-mapped; ``corpus``
    defaults to the file it records), or a faiss index file built elsewhere for ``corpus``
    (e.g. Search-R1's ``e5_Flat.index``), served with the dense encoder of
    ``retriever_options["model"]``. Without either, ``corpus`` defaults to synthwiki.
    ``shards``: the URLs of shard servers (``"URL,URL"``, replicas ``"URL|URL"``): this server
    then routes, answering with their merged top-k, and opens no corpus. ``connections``:
    the header and body read timeouts and the cap on open connections (:class:`ConnectionLimits`).
    ``token`` and ``allow`` say who may search (:func:`check_exposure`); ``request_timeout``
    bounds the seconds one request's searches may take (then a 503)."""
    uvicorn = require("uvicorn", extra="serve", feature="searchgym serve")

    from searchgym.corpora.indexes import index_meta, is_index_folder, load_index, open_index_corpus
    from searchgym.corpora.registry import load_corpus
    from searchgym.corpora.retrievers import make_retriever

    access = Access(token, parse_networks(allow))
    check_exposure(host, access)
    if isinstance(request_timeout, bool) or not isinstance(request_timeout, (int, float)) or not 0 < request_timeout <= 3600:
        raise ConfigError(f"searchgym serve expects request_timeout to be a number of seconds in (0, 3600], got {request_timeout!r}.")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"searchgym serve expects a port between 0 and 65535, got {port!r}.")
    check_port_free(host, port)  # before the corpus loads: a taken port fails in a second, in one line
    start = time.perf_counter()
    folder = index_file is not None and is_index_folder(index_file)
    if index_file is not None and not folder and (os.path.isdir(index_file) or not os.path.exists(index_file)):
        index_meta(index_file)  # NoIndexError: what is there instead (an interrupted build?) and what to run
    if shards is not None:
        if corpus is not None or index_file is not None:
            raise ConfigError("searchgym serve --shards routes to shard servers, which hold the corpus and index; drop --corpus and --index.")
        from searchgym.corpora.sharded import ShardedRetriever

        sharded = ShardedRetriever.from_spec(shards, None, **dict(retriever_options or {}))
        info = {"corpus": None, "passages": None, "retriever": "shards", "shards": [[r.url for r in s] for s in sharded.shards]}
        _run(create_app(sharded, info=info, limits=limits, token=token, window_ms=window_ms, coalesce=coalesce, connections=connections,
                        allow=allow, request_timeout=request_timeout),
             host, port, access, f"router over {len(sharded.shards)} shards ({sum(map(len, sharded.shards))} servers)",
             time.perf_counter() - start, window_ms, coalesce, uvicorn, connections)
        return
    if corpus is None and folder:
        loaded: Corpus = open_index_corpus(index_file)
    else:
        loaded = load_corpus(corpus or "synthwiki", **dict(corpus_options or {}))
    built: dict[str, Any] = {}
    if folder:
        index = load_index(index_file, loaded, **dict(retriever_options or {}))
        built = {k: v for k, v in index_meta(index_file).items() if k not in ("analyzer", "format_version")}
        retriever = built.get("retriever", built["kind"])
    elif index_file is not None:
        from searchgym.corpora.dense import DenseRetriever

        if retriever not in ("dense", "dense-hnsw"):
            raise ConfigError(f"searchgym serve --index serves a faiss index with a dense encoder; pass --retriever dense, got {retriever!r}.")
        index = DenseRetriever.from_faiss_file(index_file, loaded, **dict(retriever_options or {}))
    else:
        index = make_retriever(retriever, loaded, **dict(retriever_options or {}))
    info = {
        "corpus": loaded.name,
        "corpus_options": corpus_options or {},
        "corpus_path": None if loaded.path is None else str(loaded.path),
        "passages": len(loaded),
        "fingerprint": loaded.fingerprint,
        "retriever": retriever if isinstance(retriever, str) else type(retriever).__name__,
        "retriever_class": type(index).__name__,
        "retriever_options": {k: str(v) for k, v in (retriever_options or {}).items()},
        "index_file": index_file,
        "index": built or None,
    }
    # The build parameters each retriever keeps (BM25's backend and constants, the dense encoder and index: what the
    # faiss index really is, its size, whether it is memory-mapped, its search-time knobs).
    parameters = ("backend", "method", "k1", "b", "delta", "model_spec", "dtype", "index_type", "index_description",
                  "dimension", "nbytes", "index_storage", "index_device", "hnsw_m", "ef_construction", "ef_search", "nprobe",
                  "train_size", "query_prefix", "passage_prefix")
    info["parameters"] = {key.removesuffix("_spec"): getattr(index, key) for key in parameters if isinstance(getattr(index, key, None), (str, int, float))}
    what = (f"{info['retriever']} ({info['retriever_class']}) over {loaded.name} ({len(loaded):,} passages, "
            f"fingerprint {loaded.fingerprint})")
    _run(create_app(index, info=info, limits=limits, token=token, window_ms=window_ms, coalesce=coalesce, connections=connections,
                    allow=allow, request_timeout=request_timeout),
         host, port, access, what, time.perf_counter() - start, window_ms, coalesce, uvicorn, connections)


class HeaderDeadline:
    """Mixed into uvicorn's HTTP protocol (httptools or h11): a connection that has not sent
    a request's complete headers ``header_timeout`` seconds after it opened, or after the
    previous response, gets a 408 and is closed. uvicorn has no such timeout of its own
    (its keep-alive timer stops at the first byte of a request), so a client sending one
    byte a second would hold its connection for as long as it liked."""

    header_timeout = 10.0
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        if self._in_request():
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():  # type: ignore[attr-defined]
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)  # type: ignore[misc]

    def _in_request(self) -> bool:
        cycle = self.cycle  # type: ignore[attr-defined]
        return cycle is not None and not cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.header_timeout, self._expired)  # type: ignore[attr-defined]

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        transport = self.transport  # type: ignore[attr-defined]
        if transport.is_closing() or self._in_request():
            return
        body = json.dumps({"error": f"the request headers did not arrive within header_timeout={self.header_timeout} s; "
                                    "send each request at once", "status": 408}).encode()
        transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(body), body))
        transport.close()


def http_protocol(header_timeout: float) -> type:
    """uvicorn's default HTTP protocol class with a :class:`HeaderDeadline` of ``header_timeout``."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return type(f"Deadline{AutoHTTPProtocol.__name__}", (HeaderDeadline, AutoHTTPProtocol), {"header_timeout": header_timeout})


def _run(app: Any, host: str, port: int, access: Access, what: str, ready: float, window_ms: float, coalesce: bool,
         uvicorn: Any, connections: ConnectionLimits | None = None) -> None:
    """Serve ``app`` until SIGINT / SIGTERM, printing one line once the socket listens."""
    connections = connections or ConnectionLimits()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, timeout_graceful_shutdown=10,
                            http=http_protocol(connections.header_timeout), limit_concurrency=connections.max_connections)
    server = uvicorn.Server(config)

    original = server.startup

    async def startup(sockets: Sequence[Any] | None = None) -> None:
        await original(sockets=sockets)
        bound = [s.getsockname() for srv in getattr(server, "servers", []) for s in srv.sockets]
        where = ", ".join(f"http://{a[0]}:{a[1]}" for a in bound) or f"http://{host}:{port}"
        print(
            f"searchgym serve: {what} at {where}/retrieve; loaded in {ready:.1f} s; "
            f"{access.describe()}; coalescing {('on, window ' + str(window_ms) + ' ms') if coalesce else 'off'}",
            flush=True,
        )

    finish = server.shutdown
    stopped = []

    async def shutdown(sockets: Sequence[Any] | None = None) -> None:
        await finish(sockets=sockets)  # the requests in flight are answered first
        print("searchgym serve: stopped", flush=True)
        stopped.append(True)

    server.startup = startup  # type: ignore[method-assign]
    server.shutdown = shutdown  # type: ignore[method-assign]
    try:
        server.run()  # uvicorn re-raises a caught SIGTERM / SIGINT once shut down, as a supervisor expects
    except KeyboardInterrupt:
        if not stopped:
            raise
        # Shut down cleanly and said so: an Interrupted, which the command line ends with exit 130 and no traceback.
        raise Interrupted("searchgym serve: stopped") from None
