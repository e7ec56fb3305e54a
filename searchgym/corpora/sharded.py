"""One index served by several machines: shards of consecutive passages, merged per query.

``searchgym index --shards N`` writes ``shard-0`` ... ``shard-{N-1}``: each holds the postings of
one range of passages with the whole corpus's scores (see
:meth:`~searchgym.corpora.bm25.BM25Retriever.save_shards`). Each is served by its own
``searchgym serve --index DIR/shard-i``; :class:`ShardedRetriever` sends every batch to all
shards at once and merges their top-k by score, ties in corpus order, which is exactly the
unsharded index's answer. A shard may have replicas (several servers of the same folder):
requests go round-robin between them, and one that fails is skipped for the others.

Spelled as a retriever name (``gym.make(..., retriever=...)``, ``make_retriever``,
``searchgym serve --shards``): shard URLs joined by ``,`` in shard order, replicas of a shard
joined by ``|``::

    "http://h1:8001/retrieve|http://h4:8001/retrieve,http://h2:8001/retrieve,http://h3:8001/retrieve"
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searchgym.corpora.types import Corpus, Hit, Retriever, is_search_engine
from searchgym.error import BackendError, ConfigError

__all__ = ["ShardedRetriever", "is_shard_spec", "parse_shard_spec"]


def is_shard_spec(name: object) -> bool:
    """Whether ``name`` names several shards or replicas of ``/retrieve`` servers."""
    from searchgym.corpora.http import is_url

    return is_url(name) and ("," in name or "|" in name)


def parse_shard_spec(spec: str) -> list[list[str]]:
    """``"a|a2,b,c"`` -> ``[["a", "a2"], ["b"], ["c"]]`` (shards in order, each its replicas)."""
    from searchgym.corpora.http import is_url

    shards = [[url.strip() for url in shard.split("|")] for shard in spec.split(",")]
    bad = [url for shard in shards for url in shard if not is_url(url)]
    if bad:
        raise ConfigError(
            f"Expected shard URLs joined by ',' (replicas of one shard by '|'), e.g. "
            f"'http://h1:8001/retrieve,http://h2:8001/retrieve', got {bad[0]!r} in {spec!r}."
        )
    return shards


class ShardedRetriever(Retriever):
    """The merged top-k of several retrievers over consecutive ranges of one corpus.

    Args:
        shards: one entry per shard, in corpus order; each a :class:`Retriever` or a list of
            replicas (retrievers answering the same shard).
        corpus: the corpus (kept as ``self.corpus``; may be None when the shards return the
            documents, as servers do).

    ``search`` asks every shard for its top-``k`` in parallel threads and keeps the ``k`` best
    by score; equal scores keep the order of the shards, then each shard's own order, which is
    corpus order when the shards are consecutive ranges listed in order. A replica that raises
    :class:`~searchgym.error.BackendError` is skipped for the next one of its shard; when every
    replica of a shard fails, the last error is raised.
    """

    def __init__(self, shards: Sequence[Retriever | Sequence[Retriever]], corpus: Corpus | None = None):
        groups = [list(s) if isinstance(s, (list, tuple)) else [s] for s in shards]
        if not groups or any(not group for group in groups):
            raise ConfigError("ShardedRetriever expects at least one shard, each with at least one retriever.")
        for replica in itertools.chain.from_iterable(groups):
            if not is_search_engine(replica):
                raise ConfigError(f"ShardedRetriever expects search engine shards (objects with search(queries, k)), got {type(replica).__name__}.")
        self.shards = groups
        self.corpus = corpus  # type: ignore[assignment]
        self._turn = [itertools.count() for _ in groups]
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, len(groups)), thread_name_prefix="searchgym-shards")

    @classmethod
    def from_spec(cls, spec: str, corpus: Corpus | None = None, **options: Any) -> ShardedRetriever:
        """Clients of the servers a shard spec names (``options`` go to each
        :class:`~searchgym.corpora.http.HTTPRetriever`: ``timeout``, ``token``, ...)."""
        from searchgym.corpora.http import HTTPRetriever

        return cls([[HTTPRetriever(url, corpus, **options) for url in shard] for shard in parse_shard_spec(spec)], corpus)

    def __repr__(self) -> str:
        return f"ShardedRetriever({len(self.shards)} shards, {sum(map(len, self.shards))} servers)"

    def close(self) -> None:
        for replica in itertools.chain.from_iterable(self.shards):
            close = getattr(replica, "close", None)
            if close is not None:
                close()
        self._pool.shutdown(wait=False)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = self._check_k(k)
        if isinstance(queries, str):
            raise ConfigError(f"Retriever.search expects a sequence of queries, got a single str {queries[:40]!r}; wrap it in a list.")
        queries = list(queries)
        answers = list(self._pool.map(lambda s: self._ask(s, queries, k), range(len(self.shards))))
        merged = []
        for q in range(len(queries)):
            ranked = [(-hit.score, s, rank, hit) for s, rows in enumerate(answers) for rank, hit in enumerate(rows[q])]
            ranked.sort(key=lambda entry: entry[:3])
            merged.append([entry[3] for entry in ranked[:k]])
        return merged

    def _ask(self, shard: int, queries: list[str], k: int) -> list[list[Hit]]:
        replicas = self.shards[shard]
        with self._lock:
            first = next(self._turn[shard]) % len(replicas)
        error: Exception | None = None
        for i in range(len(replicas)):
            try:
                return replicas[(first + i) % len(replicas)].search(queries, k)
            except BackendError as e:  # this replica is down: the next one answers
                error = e
        raise BackendError(f"every replica of shard {shard} failed; the last: {error}") from None
