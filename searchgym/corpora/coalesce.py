"""Searches from many threads coalesced into batched ``Retriever.search`` calls, in-process.

Engines that run episodes concurrently (verl's agent loop steps each episode's env in a
worker thread; TRL's environments are called one rollout at a time from its own loop) send
one query at a time. :class:`CoalescingRetriever` wraps the retriever the envs share: a
thread that searches while no batch runs becomes the batch's leader and searches at once;
the queries that arrive meanwhile wait and go out together in the next call (one per
``k``). Alone, a query is searched at once; under load, batches grow by themselves, as
``searchgym serve``'s coalescer does for HTTP requests. Each query gets the hits it would
get alone.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from searchgym.corpora.types import Hit, Retriever, is_search_engine
from searchgym.error import ConfigError


class _Request:
    __slots__ = ("queries", "k", "done", "result", "error")

    def __init__(self, queries: list[str], k: int):
        self.queries, self.k = queries, k
        self.done = threading.Event()
        self.result: list[list[Hit]] | None = None
        self.error: BaseException | None = None


class CoalescingRetriever(Retriever):
    """``retriever`` with the searches of concurrent threads joined (see the module docstring).

    ``window_ms`` > 0 makes a leader wait that long for more queries before it searches
    (more batching for more latency); ``max_batch`` caps the queries of one call.
    ``batches`` and ``queries`` count the calls made and the queries they carried.
    """

    def __init__(self, retriever: Retriever, *, window_ms: float = 0.0, max_batch: int = 1024):
        if not is_search_engine(retriever):
            raise ConfigError(f"CoalescingRetriever expects a search engine (an object with search(queries, k)), got {type(retriever).__name__}.")
        if isinstance(window_ms, bool) or not isinstance(window_ms, (int, float)) or not 0 <= window_ms <= 1000:
            raise ConfigError(f"CoalescingRetriever expects window_ms between 0 and 1000, got {window_ms!r}.")
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigError(f"CoalescingRetriever expects max_batch to be a positive integer, got {max_batch!r}.")
        self.retriever, self.window, self.max_batch = retriever, window_ms / 1000, max_batch
        self.corpus = getattr(retriever, "corpus", None)  # type: ignore[assignment]
        self.max_query_chars = getattr(retriever, "max_query_chars", None)
        self.batches = self.queries = 0
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._leading = False

    def search_with_context(self, queries: Sequence[str], k: int, contexts: Sequence[Any]) -> list[list[Hit]]:
        """A context-aware engine's ``search_with_context``, called as it is (each query keeps
        its context; not joined with other threads' searches); any other engine's coalesced ``search``."""
        with_context = getattr(self.retriever, "search_with_context", None)
        if callable(with_context):
            return with_context(queries, k, contexts)
        return self.search(queries, k)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        request = _Request(list(queries), k)
        with self._lock:
            self._pending.append(request)
            lead = not self._leading
            self._leading = self._leading or lead
        if lead:
            self._lead()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _lead(self) -> None:
        """Search what is pending, batch after batch, until nothing is."""
        if self.window:
            time.sleep(self.window)
        while True:
            with self._lock:
                batch, count = [], 0
                while self._pending and (not batch or count + len(self._pending[0].queries) <= self.max_batch):
                    count += len(self._pending[0].queries)
                    batch.append(self._pending.pop(0))
                if not batch:
                    self._leading = False
                    return
            by_k: dict[int, list[_Request]] = {}
            for request in batch:
                by_k.setdefault(request.k, []).append(request)
            for k, group in by_k.items():
                self._run(k, group)

    def _run(self, k: int, group: list[_Request]) -> None:
        flat = [q for request in group for q in request.queries]
        try:
            rows = self.retriever.search(flat, k)
            if len(rows) != len(flat):
                raise ConfigError(f"{type(self.retriever).__name__}.search returned {len(rows)} lists for {len(flat)} queries.")
        except BaseException as e:  # every caller of the call gets the error
            for request in group:
                request.error = e
                request.done.set()
            return
        self.batches += 1
        self.queries += len(flat)
        start = 0
        for request in group:
            request.result = rows[start : start + len(request.queries)]
            start += len(request.queries)
            request.done.set()

    def __getattr__(self, name: str) -> Any:
        # What the wrapped retriever offers besides search (its options, index description).
        if name == "retriever":
            raise AttributeError(name)
        return getattr(self.retriever, name)


_COALESCERS: weakref.WeakKeyDictionary[Retriever, CoalescingRetriever] = weakref.WeakKeyDictionary()
_COALESCERS_LOCK = threading.Lock()


def coalesced(retriever: Retriever) -> Retriever:
    """The process's :class:`CoalescingRetriever` of ``retriever`` (one per retriever object, so
    that every env sharing the retriever shares its batches); a coalescing retriever as it is."""
    if isinstance(retriever, CoalescingRetriever):
        return retriever
    with _COALESCERS_LOCK:
        found = _COALESCERS.get(retriever)
        if found is None:
            found = _COALESCERS[retriever] = CoalescingRetriever(retriever)
        return found
