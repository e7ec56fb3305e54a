"""A retriever that asks a server speaking Search-R1's ``/retrieve`` API.

``POST /retrieve`` with ``{"queries": [...], "topk": k, "return_scores": true}`` answers
``{"result": [[{"document": {"id": ..., "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}``:
``searchgym serve`` (:mod:`searchgym.serve`) and Search-R1's own retrieval server both do.
:class:`HTTPRetriever` turns that back into :class:`~searchgym.corpora.types.Hit` objects
whose passages carry the server's ids, so ``info["retrieved_ids"]`` names the server's
documents. ``make_retriever("http://host:port/retrieve", corpus)`` builds one, and so does
``gym.make(..., retriever="http://...")``.

Before its first search it reads the server's ``GET /info`` once and compares the corpus
fingerprint published there with the env's corpus: a server over another corpus would answer
with documents the env's questions are not about, so ``corpus_check="error"`` (default) refuses
with :class:`~searchgym.error.CorpusMismatchError`, ``"warn"`` warns and goes on, ``"off"`` skips
the check. The env's fingerprint is taken without opening a large corpus: a passage file whose
passage store is current has it in its ``meta.json``; a file without a current store (or not
present where the env runs), a server without ``/info`` (Search-R1's own) and a router over shards
(which publishes no fingerprint) are not checked.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

from searchgym.corpora.types import Corpus, Hit, Passage, Retriever
from searchgym.error import BackendError, ConfigError, CorpusMismatchError, check_name, require

#: What :class:`HTTPRetriever` does when the server's corpus is not the env's.
CORPUS_CHECKS = ("error", "warn", "off")

#: 4xx statuses worth another try: the server timed the request out or asks to slow down. Every
#: 5xx is retried too (a server failing, restarting or overloaded); any other 4xx is final: the
#: same request would get the same answer.
RETRIED_STATUSES = frozenset({408, 429})


def is_retried(status: int) -> bool:
    """Whether a request answered ``status`` may succeed if sent again (408, 429, 5xx)."""
    return status in RETRIED_STATUSES or 500 <= status <= 599


def is_url(name: object) -> bool:
    return isinstance(name, str) and name.startswith(("http://", "https://"))


def parse_contents(contents: str) -> tuple[str, str]:
    """``(title, text)`` of a Search-R1 ``contents`` field (``"Title"\\ntext``; a first line
    without quotes is the title as is; no newline: no title)."""
    if "\n" not in contents:
        return "", contents
    title, text = contents.split("\n", 1)
    if len(title) >= 2 and title.startswith('"') and title.endswith('"'):
        title = title[1:-1]
    return title, text



def shown_url(url: str) -> str:
    """``url`` as messages may show it: userinfo and every path segment before the last
    (where ``searchgym serve`` reads a token, ``http://HOST:PORT/TOKEN/retrieve``) become
    ``***``; ``http://HOST:PORT/retrieve`` is shown as it is."""
    scheme, sep, rest = url.partition("://")
    host, slash, path = rest.partition("/")
    host = "***@" + host.rsplit("@", 1)[1] if "@" in host else host
    parts = path.split("/")
    if len(parts) > 1:
        parts = ["***"] + parts[-1:]
    return f"{scheme}{sep}{host}{slash}{'/'.join(parts)}"

class HTTPRetriever(Retriever):
    """Batched search through a ``/retrieve`` server.

    Args:
        url: The endpoint, e.g. ``http://127.0.0.1:8000/retrieve``.
        corpus: The corpus the env uses beside it (kept as ``self.corpus``; the server's
            documents are what ``search`` returns).
        timeout: Seconds per request (connect and read).
        retries: Further tries after a connection error (refused, reset, timed out) or an
            answer that may differ next time (408, 429, 5xx: :func:`is_retried`), with
            exponential backoff from ``backoff`` seconds. Any other 4xx is not retried.
        token: A bearer token, for servers started with ``--token``.
        max_queries: Most queries per request; larger batches are split.
        corpus_check: One of :data:`CORPUS_CHECKS`: what to do when the server's ``/info``
            names another corpus (by fingerprint) than ``corpus`` (see the module docstring).

    The server's limits are read once from its ``GET /info`` (:meth:`server_info`, at the
    first search; a server without ``/info``, such as Search-R1's, has none known): batches
    are split at its ``max_queries`` (and at ``max_documents`` // k) and queries cut to its ``max_query_chars``
    (:attr:`max_query_chars`, which the env reads to cut queries the same way in-process).
    Any string can be sent: the body is ASCII JSON, so a lone surrogate travels escaped.
    A failure that retries do not cure raises :class:`~searchgym.error.BackendError`
    naming the URL and the server's message. One connection pool serves every thread.
    """

    def __init__(
        self,
        url: str,
        corpus: Corpus | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.25,
        token: str | None = None,
        max_queries: int = 256,
        corpus_check: str = "error",
    ):
        httpx = require("httpx", extra="http", feature="HTTPRetriever")
        if not is_url(url):
            raise ConfigError(f"HTTPRetriever expects an http:// or https:// URL of a /retrieve endpoint, got {url!r}.")
        for name, value in (("timeout", timeout), ("backoff", backoff)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"HTTPRetriever expects {name} to be a positive number of seconds, got {value!r}.")
        for name, value, least in (("retries", retries, 0), ("max_queries", max_queries, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"HTTPRetriever expects {name} to be an integer >= {least}, got {value!r}.")
        check_name("corpus_check", corpus_check, CORPUS_CHECKS)
        self.url = url
        # What messages and repr show: a token in the URL's path or userinfo stays out of logs.
        self.shown_url = shown_url(url)
        self.corpus = corpus  # type: ignore[assignment]
        self.corpus_check = corpus_check
        self._corpus_checked = corpus_check == "off" or corpus is None
        self._refusal: str | None = None  # the mismatch, refused again at every search once found
        self._check_lock = threading.Lock()
        self.timeout, self.retries, self.backoff, self.max_queries = timeout, retries, backoff, max_queries
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._httpx = httpx
        self._client = httpx.Client(timeout=timeout, headers=headers, limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))
        self._lock = threading.Lock()
        self._info: dict[str, Any] | None = None
        self.requests = self.retried = 0

    def __repr__(self) -> str:
        return f"HTTPRetriever({self.shown_url!r})"

    def close(self) -> None:
        self._client.close()

    def _hide(self, error: BaseException) -> str:
        """An exception's text with the URL shown as :attr:`shown_url`."""
        return str(error).replace(self.url.rsplit("/", 1)[0], self.shown_url.rsplit("/", 1)[0])

    def server_info(self) -> dict[str, Any]:
        """The server's ``GET /info`` (its corpus, retriever and limits), read once; ``{}``
        for a server that has no ``/info`` (any 4xx, or an answer that is not a JSON object)."""
        if self._info is None:
            info_url = self.url.rsplit("/", 1)[0] + "/info"
            response = self._request("GET", info_url, None, final_4xx=True)
            try:
                info = response.json() if response.status_code == 200 else {}
            except ValueError:
                info = {}
            self._info = info if isinstance(info, dict) else {}
        return self._info

    def _limit(self, name: str) -> int | None:
        limits = self.server_info().get("limits")
        value = limits.get(name) if isinstance(limits, dict) else None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    @property
    def max_query_chars(self) -> int | None:  # type: ignore[override]
        """The server's ``max_query_chars`` (from ``/info``; None when it gives none): longer
        queries are cut to it, here and by the env before it searches."""
        return self._limit("max_query_chars")

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = self._check_k(k)
        queries = list(queries)
        if any(not isinstance(q, str) for q in queries):
            raise ConfigError("HTTPRetriever.search expects queries to be strings.")
        results: list[list[Hit]] = [[] for _ in queries]
        asked = [i for i, q in enumerate(queries) if q.strip()]  # an empty query has no hits, as in-process
        if self._refusal is not None:
            raise CorpusMismatchError(self._refusal)
        if asked and not self._corpus_checked:
            self.check_corpus()
        if not asked:
            return results
        longest = self.max_query_chars
        per_request = min(self.max_queries, self._limit("max_queries") or self.max_queries)
        documents = self._limit("max_documents")  # queries x k per request, on servers that bound it
        if documents is not None:
            per_request = max(1, min(per_request, documents // k))
        for start in range(0, len(asked), per_request):
            chunk = asked[start : start + per_request]
            for i, hits in zip(chunk, self._post([queries[i][:longest] for i in chunk], k)):
                results[i] = hits
        return results

    def check_corpus(self) -> dict[str, Any] | None:
        """Compare the server's corpus (``GET /info``, read once) with ``self.corpus``; act as
        ``corpus_check`` says on a difference (``"error"``: every later :meth:`search` raises
        :class:`~searchgym.error.CorpusMismatchError`, so a caller that catches one cannot go on
        with the wrong documents). Returns what ``/info`` answered (``None`` when the
        server has no ``/info`` or the URL does not end in ``/retrieve``). An unreachable server
        raises the client's ``BackendError`` after its retries, as a search would."""
        with self._check_lock:
            if self._corpus_checked:
                return None
            if not self.url.rstrip("/").endswith("/retrieve"):
                self._corpus_checked = True
                return None
            info = self.server_info()  # read once, shared with the limits
            self._corpus_checked = True
            served = info.get("fingerprint")
            if not isinstance(served, str):  # Search-R1's server (no /info) or a router over shards
                return info or None
            ours = env_fingerprint(self.corpus)
            if ours is None or ours == served:
                return info
            message = (
                f"The retrieval server {self.shown_url} serves the corpus {info.get('corpus')!r} (fingerprint {served}), but the "
                f"env's corpus is {corpus_label(self.corpus)} (fingerprint {ours}): its documents would not be the ones the "
                "env's questions are about. Point retriever= at a server of the env's corpus or give the env the server's "
                "corpus= and corpus_options=; retriever_options={'corpus_check': 'warn'} only warns."
            )
            if self.corpus_check == "error":
                self._refusal = message
                raise CorpusMismatchError(message)
            warnings.warn(message, stacklevel=4)
            return info

    def _post(self, queries: list[str], k: int) -> list[list[Hit]]:
        # ASCII JSON: a lone surrogate is sent escaped (UTF-8 cannot carry it) and the server reads the same string.
        body = json.dumps({"queries": queries, "topk": k, "return_scores": True}).encode("ascii")
        return self._hits(self._request("POST", self.url, body), len(queries))

    def _request(self, method: str, url: str, body: bytes | None, *, final_4xx: bool = False) -> Any:
        """The 2xx answer of one request, retried after connection errors and 408 / 429 /
        5xx; :class:`BackendError` once the retries are spent or on any other status (with
        ``final_4xx``, a 4xx answer is returned instead)."""
        httpx = self._httpx
        headers = {"Content-Type": "application/json"} if body is not None else None
        where = self.shown_url if url == self.url else f"{self.shown_url} ({method} {url.rsplit('/', 1)[1]})"
        delay = self.backoff
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            with self._lock:
                self.requests += 1
            try:
                response = self._client.request(method, url, content=body, headers=headers)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as e:  # refused, reset, timed out
                if last:
                    raise BackendError(f"retrieval server {where} unreachable after {attempt + 1} tries: {type(e).__name__}: {self._hide(e)}") from None
            except httpx.HTTPError as e:  # what no retry cures (a proxy refusing, an unsupported scheme)
                raise BackendError(f"retrieval server {where} could not be asked: {type(e).__name__}: {self._hide(e)}") from None
            else:
                status = response.status_code
                if 200 <= status < 300 or (final_4xx and 400 <= status < 500 and not is_retried(status)):
                    return response
                if not is_retried(status) or last:
                    raise BackendError(
                        f"retrieval server {where} answered HTTP {status}"
                        f"{f' after {attempt + 1} tries' if attempt else ''}: {response.text[:300]}"
                    )
            with self._lock:
                self.retried += 1
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def _hits(self, response: Any, expected: int) -> list[list[Hit]]:
        try:
            rows = response.json()["result"]
            if not isinstance(rows, list) or len(rows) != expected:
                raise ValueError(f"{expected} result lists expected, got {len(rows) if isinstance(rows, list) else type(rows).__name__}")
            out = []
            for row in rows:
                hits = []
                for item in row:
                    document, score = (item["document"], float(item["score"])) if "document" in item else (item, 0.0)
                    title, text = parse_contents(str(document["contents"]))
                    hits.append(Hit(Passage(str(document.get("id", "")), title, text), score))
                out.append(hits)
            return out
        except (ValueError, KeyError, TypeError) as e:
            raise BackendError(
                f"retrieval server {self.shown_url} answered what is not Search-R1's /retrieve shape "
                f"({type(e).__name__}: {e}): {response.text[:300]}"
            ) from None


def env_fingerprint(corpus: Corpus) -> str | None:
    """``corpus.fingerprint``, or for a corpus not opened yet (an env whose retriever is a URL
    holds a :class:`~searchgym.corpora.registry.DeferredCorpus`) what it knows without opening a
    large file (``None`` when it does not know)."""
    known = getattr(corpus, "known_fingerprint", None)
    return known() if callable(known) else corpus.fingerprint


def corpus_label(corpus: Corpus) -> str:
    """A corpus's name for messages, without opening one that is deferred."""
    spec = getattr(corpus, "spec", None)
    if spec is not None and not getattr(corpus, "opened", True):
        return repr(str(spec[0]))
    return repr(corpus.name)
