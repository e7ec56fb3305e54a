"""BM25 retrieval over a :class:`Corpus`: bm25s (fast, default) or rank-bm25 (reference).

Both backends index ``title + "\\n" + text`` of every passage through the same analyzer
(:mod:`searchgym.corpora.tokenize`), so they differ only in the BM25 formula they compute.
"""

from __future__ import annotations

import os
import pickle
import re
import threading
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from searchgym.corpora import blockmax
from searchgym.corpora.blockmax import SLICE_MIN
from searchgym.corpora.checksum import HashingWriter, check_files
from searchgym.corpora.index_folder import index_meta, rebuild_command, rebuild_hint, write_meta
from searchgym.corpora.postings import (
    BLOCK_FILES, DEFAULT_SHARD_SIZE, Postings, build_postings, check_postings, load_postings, passage_text, save_postings,
    split_postings,
)
from searchgym.corpora.pruning import PRUNE_FROM, prune_top_k
from searchgym.corpora.threads import LazyThreadPool
from searchgym.corpora.tokenize import Analyzer, default_analyzer
from searchgym.corpora.types import Corpus, Hit, Retriever
from searchgym.error import ConfigError, DataFormatError, UnknownNameError, require

__all__ = ["BM25_BACKENDS", "BM25_METHODS", "BM25Retriever", "QueryTerms"]

#: backend -> the BM25 variants it computes (the first one is its default).
BM25_METHODS: dict[str, tuple[str, ...]] = {
    "bm25s": ("lucene", "robertson", "atire", "bm25l", "bm25+"),
    "rank_bm25": ("okapi",),
}
BM25_BACKENDS = tuple(BM25_METHODS)

_META = "searchgym_bm25.json"
_FORMAT_VERSION = 2
#: 1: bm25s's own folder (read through bm25s, memory-mapped); 2: the arrays of searchgym.corpora.postings
#: (since storage checks, with every file's size, checksum, dtype and shape under "files": older
#: version-2 folders have none, and are checked against their counts).
_READABLE_VERSIONS = (1, 2)
# Above this share of the corpus in the posting lists of a query, ranking every passage is
# cheaper than ranking the candidates (measured on 1M passages).
_DENSE_SHARE = 0.5
#: Folders already said to be scored exhaustively (written before term bounds), said once each.
_UNBOUNDED_SAID: set[Path] = set()


#: Query words whose term ids a retriever remembers per generation (two generations: at most
#: twice this many, ~150 bytes each, 20 MB at most; see :class:`QueryTerms`).
QUERY_WORDS = 1 << 16
# A word as the analyzer reads one (searchgym.corpora.tokenize, step 1: a maximal run of \w);
# tests/corpora/test_bm25.py checks that QueryTerms spells every query as Analyzer.token_ids does.
_WORD = re.compile(r"\w+")


class QueryTerms:
    """Query text -> term ids of one index, remembering each surface word's ids.

    ``Analyzer.token_ids`` maps a word to its id afresh on every call: a stem-cache read, a
    stem of every word the index lacks (the analyzer does not remember those, and a
    question has a few: 1,942 of 2,000 generated questions re-stemmed one under the analyzer's
    lock) and a vocabulary lookup a term. That was 58 us of a question's 0.10-0.14 ms of Python
    around the compiled engine at 300k passages (one core, k = 3 and 10); remembered here, a
    question costs a regex split and a dict read a word (5 us measured the same way). A word's
    ids are exactly what ``Analyzer.token_ids`` gives the word alone (a stop word or a term the
    index lacks: none), and a text's ids are its words' in order, as ``token_ids`` spells them.
    Bounded like the analyzer's stem cache: two generations of at most ``max_words`` words, the
    newer one full becoming the older, the oldest dropped.
    """

    def __init__(self, analyzer: Analyzer, vocab: Mapping[str, int], max_words: int = QUERY_WORDS):
        self.analyzer, self.vocab, self.max_words = analyzer, vocab, max_words
        self._recent: dict[str, tuple[int, ...]] = {}
        self._older: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()

    def __call__(self, queries: Sequence[str]) -> list[list[int]]:
        find = _WORD.findall
        out = []
        for text in queries:
            words = find(text)
            recent = self._recent
            try:
                out.append([i for w in words for i in recent[w]])
            except KeyError:
                known = self._learn(words)
                out.append([i for w in words for i in known[w]])
        return out

    def _learn(self, words: list[str]) -> dict[str, tuple[int, ...]]:
        """Every word of ``words`` with its ids (from either generation or the analyzer), remembered."""
        with self._lock:
            recent, older = self._recent, self._older
            missing = [w for w in dict.fromkeys(words) if w not in recent]
            found = {w: older[w] for w in missing if w in older}
            fresh = [w for w in missing if w not in found]
            if fresh:  # each word as a text of its own: its ids alone
                found.update(zip(fresh, map(tuple, self.analyzer.token_ids(fresh, self.vocab, grow=False))))
            known = {w: found[w] if w in found else recent[w] for w in words}
            if len(recent) + len(found) > self.max_words:  # replaced, not changed: readers may hold them
                self._older, self._recent = recent, {}
                if len(found) > self.max_words:
                    found = dict(list(found.items())[: self.max_words])
            self._recent.update(found)
            return known


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class BM25Retriever(Retriever):
    """Lexical retrieval with BM25.

    Args:
        corpus: the passages; ``title + "\\n" + text`` of each is indexed.
        backend: ``"bm25s"`` (default) or ``"rank_bm25"``.
        k1, b: BM25 saturation and length normalisation. The defaults, 0.9 and 0.4, are
            Pyserini's and therefore those of the Wikipedia index Search-R1 and its successors
            retrieve from (rank-bm25's own defaults are 1.5 and 0.75).
        method: the BM25 variant; ``None`` picks the backend's default (below).
        delta: the BM25L / BM25+ lower bound (bm25s default 0.5); ignored by other variants.
        n_threads: threads answering a batch of queries (bm25s backend); ``None``: all cores.
        query_threads: threads **one** query is split across when it is searched alone (the
            compiled engine: passages cut in ranges of corpus order that share their thresholds,
            :meth:`~searchgym.corpora.blockmax.BlockMaxIndex.top_k_split`; the same hits). 1
            (default): one thread a query. At most one range per :data:`SLICE_MIN` passages, since
            below that the threads' hand-off costs about what the split saves. For serving one
            question at a time on a machine with cores to spare (``benchmarks/bm25_split.py``).
        show_progress: progress bars while indexing.
        workers: processes tokenizing shards at once while building (bm25s backend); ``None``:
            all cores. Only corpora of more than one shard use processes.
        shard_size: passages tokenized together while building: the build holds about
            ``shard_size`` passages' tokens per worker at once (bm25s backend).
        pruning: answer queries with dynamic pruning (MaxScore,
            :mod:`searchgym.corpora.pruning`): the same top k, scores and order as scoring every
            posting (``False``), in a fraction of the time on large corpora (bm25s backend; an
            index saved before its term bounds were written is always scored exhaustively).
            With numba installed (``searchgym[fast]``) the pruned queries run on the compiled
            block-max MaxScore engine (:mod:`searchgym.corpora.blockmax`), the same hits again.

    What each backend computes (N passages, df passages containing a term, tf its count in
    a passage of length L, mean length Lavg, ``norm = k1 * (1 - b + b * L / Lavg)``):

    - ``bm25s``, ``method="lucene"`` (default): Lucene's BM25, the one Pyserini / Anserini
      run: ``idf = log(1 + (N - df + 0.5) / (df + 0.5))`` (never negative) times
      ``tf / (tf + norm)``. Lucene 8+ dropped the constant ``(k1 + 1)`` factor of the
      numerator, as bm25s does, which rescales scores without changing any ranking.
      The other bm25s variants (Kamphuis et al., ECIR 2020): ``"robertson"`` (idf
      ``log((N - df + 0.5) / (df + 0.5))`` clipped at 0), ``"atire"`` (idf ``log(N / df)``,
      tf part ``tf * (k1 + 1) / (tf + norm)``), ``"bm25l"`` and ``"bm25+"`` (with ``delta``).
    - ``rank_bm25``, ``method="okapi"``: rank-bm25's ``BM25Okapi``: Robertson's idf
      ``log((N - df + 0.5) / (df + 0.5))``, where every term occurring in more than half of
      the passages (negative idf) gets instead ``epsilon * mean idf`` with ``epsilon = 0.25``,
      times ``tf * (k1 + 1) / (tf + norm)``.

    The two defaults therefore agree on rare terms (``log(1 + x)`` vs ``log(x)`` for large
    ``x``) and differ on very common ones (Lucene keeps a small positive idf, Okapi
    substitutes the epsilon floor), and Okapi's scores are ``k1 + 1`` times larger.
    Scores are float32 with bm25s and float64 with rank-bm25.

    Hits: up to ``k`` passages per query, highest score first (equal scores in corpus
    order). Only passages with positive evidence are returned, i.e. a positive score from
    the query terms they contain (for BM25L / BM25+ the constant every passage gets is added
    to the reported score but does not make a passage match), so ``k`` larger than the
    corpus gives every matching passage. A term whose idf is 0 cannot make a passage match
    (with Okapi's idf: a term in exactly half of the passages, e.g. in one of two). A query
    with no indexed term (empty, stopwords only, unknown words) gives ``[]`` without
    scoring anything.

    The bm25s backend stores the (term, passage) score matrix that ``bm25s.BM25.index``
    computes, with bm25s's own formulas (:mod:`searchgym.corpora.postings`: built in shards of
    ``shard_size`` passages tokenized in ``workers`` processes, so memory stays bounded), and
    answers queries with its own kernel over that matrix: it adds the posting lists of the
    query terms into a reusable buffer and ranks only the passages they touch, so a query costs
    in proportion to its posting lists rather than to the corpus. Scores equal
    ``bm25s.BM25.retrieve``'s on the same index; passages tied in score come in corpus order,
    also at the k-th place. With ``pruning`` (the default) a query skips the posting lists that
    cannot change its top k (MaxScore over the per-term bounds the index stores,
    :mod:`searchgym.corpora.pruning`), with the very same hits and scores. Batches run on ``n_threads`` threads, since numpy releases the GIL
    in these loops. A saved index (:meth:`save`, :meth:`build`) is memory-mapped by
    :meth:`load`: it loads in about a second whatever its size, and its pages are shared by
    every process that maps it. The rank-bm25 backend scores every
    passage in Python for every query term, one query after the other (``n_threads`` and
    ``delta`` do not apply to it).
    """

    def __init__(
        self,
        corpus: Corpus,
        backend: str = "bm25s",
        k1: float = 0.9,
        b: float = 0.4,
        method: str | None = None,
        delta: float | None = None,
        n_threads: int | None = None,
        show_progress: bool = False,
        workers: int | None = None,
        shard_size: int = DEFAULT_SHARD_SIZE,
        pruning: bool = True,
        query_threads: int = 1,
        *,
        _index: Any = None,
        _prebuilt: bool = False,
        _out: Path | None = None,
    ):
        self._check_corpus(corpus)
        if backend not in BM25_METHODS:
            raise UnknownNameError("BM25 backend", backend, BM25_BACKENDS)
        methods = BM25_METHODS[backend]
        method = methods[0] if method is None else method
        if method not in methods:
            raise UnknownNameError(f"BM25 method for backend {backend!r}", method, methods)
        for name, value in (("k1", k1), ("b", b)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"BM25Retriever expects {name} to be a non-negative number, got {value!r}.")
        if not 0 <= b <= 1:
            raise ConfigError(f"BM25Retriever expects b in [0, 1], got {b!r}.")
        for name, value in (("n_threads", n_threads), ("workers", workers)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
                raise ConfigError(f"BM25Retriever expects {name} to be a positive integer or None, got {value!r}.")
        if not isinstance(query_threads, int) or isinstance(query_threads, bool) or query_threads < 1:
            raise ConfigError(f"BM25Retriever expects query_threads to be a positive integer (1: one thread a query), "
                              f"got {query_threads!r}.")
        if not isinstance(shard_size, int) or isinstance(shard_size, bool) or shard_size < 1:
            raise ConfigError(f"BM25Retriever expects shard_size to be a positive integer, got {shard_size!r}.")
        if not isinstance(pruning, bool):
            raise ConfigError(f"BM25Retriever expects pruning to be True or False, got {pruning!r}.")

        self.corpus = corpus
        self.backend = backend
        self.method = method
        self.k1 = float(k1)
        self.b = float(b)
        self.delta = 0.5 if delta is None else float(delta)
        self.n_threads = n_threads or _cpu_count()
        #: Threads one query searched alone is split across (see ``query_threads``).
        self.query_threads = query_threads
        #: Whether queries are answered with dynamic pruning (same results; see ``pruning``).
        self.pruning = pruning
        #: Whether pruned queries run on the compiled block-max MaxScore engine
        #: (:mod:`searchgym.corpora.blockmax`, numba: the extra ``searchgym[fast]``); without numba,
        #: or set to False, numpy's MaxScore (:mod:`searchgym.corpora.pruning`) gives the same hits.
        self.compiled = blockmax.available()
        #: A query whose posting lists hold fewer postings in all is scored exhaustively even
        #: when pruning (cheaper there; :data:`~searchgym.corpora.pruning.PRUNE_FROM`).
        self.prune_from = PRUNE_FROM
        #: The index folder this retriever maps (set by :meth:`load`); None when built in memory.
        #: A mapped retriever pickles as its folder: the other process maps the same files.
        self.folder: Path | None = None
        #: Whether :meth:`load` read the arrays into memory rather than mapping them.
        self.in_memory = False
        self._format: int | None = None  # the folder's format version
        self.analyzer: Analyzer = default_analyzer()
        self._init_runtime()
        if _prebuilt:  # BM25Retriever.load; None stands for a corpus without any indexable term
            self._index = _index
        elif backend == "bm25s":
            self._index = build_postings(
                corpus, k1=self.k1, b=self.b, delta=self.delta, method=method, workers=workers or _cpu_count(),
                shard_size=shard_size, out=_out, progress=show_progress,
            )
        else:
            self._index = self._build_rank_bm25()
        self._bind_index()

    def __repr__(self) -> str:
        return (
            f"BM25Retriever(corpus={self.corpus.name!r}, passages={len(self.corpus)}, backend={self.backend!r}, "
            f"method={self.method!r}, k1={self.k1}, b={self.b})"
        )

    # ------------------------------------------------------------------ building
    def _build_rank_bm25(self):
        rank_bm25 = require("rank_bm25", extra="rank-bm25", feature="The rank-bm25 backend")
        tokens = self.analyzer.tokenize([passage_text(p) for p in self.corpus])
        if not any(tokens):
            return None
        return rank_bm25.BM25Okapi(tokens, k1=self.k1, b=self.b)

    def _init_runtime(self) -> None:
        """State that is rebuilt rather than pickled: thread pool and per-thread score buffers."""
        self._pool = LazyThreadPool("searchgym-bm25")
        self._pool_lock = threading.Lock()
        self._local = threading.local()
        self._engine: blockmax.BlockMaxIndex | None = None  # built on first use (block maxima)
        self._query_terms: QueryTerms | None = None  # built on first search (needs the vocabulary)

    def _bind_index(self) -> None:
        """Pull the arrays the query kernel reads out of the postings."""
        if self.backend != "bm25s" or self._index is None:
            return
        postings: Postings = self._index
        self._data = np.asarray(postings.data, dtype=np.float32)
        self._indices = np.asarray(postings.indices)
        self._indptr = np.asarray(postings.indptr, dtype=np.int64)
        self._vocab: Mapping[str, int] = postings.vocab
        nonocc = postings.nonoccurrence
        self._nonoccurrence = None if nonocc is None else np.asarray(nonocc, dtype=np.float32)
        self._term_max = None if postings.term_max is None else np.asarray(postings.term_max, dtype=np.float32)
        num_docs = int(postings.num_docs)
        if num_docs != len(self.corpus):
            raise ConfigError(
                f"BM25 index covers {num_docs} passages but the corpus {self.corpus.name!r} has {len(self.corpus)}; "
                "rebuild the index for this corpus."
            )

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_pool", "_pool_lock", "_local", "analyzer", "_engine", "_query_terms"):
            state.pop(name, None)
        if self.folder is not None:  # mapped from a folder: the other process maps it too
            for name in ("_index", "_data", "_indices", "_indptr", "_vocab", "_nonoccurrence", "_term_max"):
                state.pop(name, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        # the other process may lack numba (or predate the compiled engine): numpy prunes there
        self.compiled = bool(state.get("compiled", True)) and blockmax.available()
        self.analyzer = default_analyzer()
        self._init_runtime()
        if self.folder is not None:
            self._index = _map_postings(self.folder, self._format, len(self.corpus), state.get("in_memory", False),
                                        state.get("_bounds_on_disk", False), state.get("_block_size_on_disk"))
            self._bind_index()

    # ------------------------------------------------------------------ searching
    @property
    def nbytes(self) -> int | None:
        """Bytes of the in-memory score matrix (bm25s backend); ``None`` for rank-bm25."""
        if self.backend != "bm25s":
            return None
        if self._index is None:
            return 0
        return int(self._data.nbytes + self._indices.nbytes + self._indptr.nbytes)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        k = self._check_k(k)
        if isinstance(queries, str):
            raise ConfigError(f"Retriever.search expects a sequence of queries, got a single str {queries[:40]!r}; wrap it in a list.")
        queries = list(queries)
        if self._index is None:
            return [[] for _ in queries]
        if self.backend == "bm25s":
            return self._search_bm25s(queries, k)
        return self._search_rank_bm25(queries, k)

    def term_ids(self, queries: Sequence[str]) -> list[list[int]]:
        """Each query's indexed term ids in query order, repeats kept, as :meth:`search` scores
        them (words the index lacks dropped: a query of none gives ``[]``). With
        :meth:`block_max_engine`, ``engine.top_k_many(retriever.term_ids(queries), k)`` ranks
        without building a :class:`Hit` per passage (what ``benchmarks/engines.py`` times as the
        engine alone): its count -1 marks a query that :meth:`search` scores exhaustively (a list
        with a negative score), and BM25L / BM25+ add a constant a query to the scores."""
        if isinstance(queries, str):
            raise ConfigError(f"BM25Retriever.term_ids expects a sequence of queries, got a single str {queries[:40]!r}; wrap it in a list.")
        if self.backend != "bm25s" or self._index is None:
            raise ConfigError(f"BM25Retriever.term_ids needs the bm25s backend with an index, got backend {self.backend!r}"
                              + ("" if self._index is not None else " and no index (an empty corpus)") + ".")
        return self._term_ids(queries)

    def _term_ids(self, queries: Sequence[str]) -> list[list[int]]:
        # term_ids without its checks, which search has made before calling _search_bm25s
        query_terms = self._query_terms
        if query_terms is None:
            query_terms = self._query_terms = QueryTerms(self.analyzer, self._vocab)
        return query_terms(queries)

    def _search_bm25s(self, queries: list[str], k: int) -> list[list[Hit]]:
        term_ids = self._term_ids(queries)
        todo = [i for i, ids in enumerate(term_ids) if ids]  # fast path: no indexed term, no work
        results: list[list[Hit]] = [[] for _ in queries]
        slices = min(self.query_threads, len(self.corpus) // SLICE_MIN) if len(todo) == 1 else 1
        if slices > 1 and self.compiled and self.prunes:
            docs, scores, count = self.block_max_engine().top_k_split(term_ids[todo[0]], k, slices)
            ranked = [self._finish(term_ids[todo[0]], k, docs, scores, count)]
        elif len(todo) > 1 and self.n_threads > 1:
            # A few chunks per thread: one task per query would cost more in dispatch than
            # a query costs on a small corpus.
            size = -(-len(todo) // (4 * self.n_threads))
            chunks = [todo[i : i + size] for i in range(0, len(todo), size)]
            work = lambda chunk: self._rank_many([term_ids[i] for i in chunk], k)
            ranked = [r for part in self._thread_pool().map(work, chunks) for r in part]
        else:
            ranked = self._rank_many([term_ids[i] for i in todo], k)
        passages = self.corpus
        for i, (docs, scores) in zip(todo, ranked):
            results[i] = [Hit(passages[d], s) for d, s in zip(docs.tolist(), scores.tolist())]
        return results

    def _thread_pool(self) -> ThreadPoolExecutor:
        """The batch's threads (this process's own: see :class:`LazyThreadPool`)."""
        return self._pool.get(self.n_threads)

    def _buffer(self) -> np.ndarray:
        """This thread's score accumulator, all zeros between queries."""
        buf = getattr(self._local, "scores", None)
        if buf is None:
            buf = self._local.scores = np.zeros(len(self.corpus), dtype=np.float32)
        return buf

    @property
    def prunes(self) -> bool:
        """Whether queries are answered with dynamic pruning: asked for (``pruning``) and the
        index has its term bounds (bm25s backend)."""
        return self.pruning and self.backend == "bm25s" and self._index is not None and self._term_max is not None

    def block_max_engine(self) -> blockmax.BlockMaxIndex:
        """The compiled engine over this index: its block maxima mapped from the index folder, or,
        for an index in memory or one written before them, computed on first use (about a second
        per 100M postings; 8% of the index's bytes, in this process's memory)."""
        if self._engine is None:
            with self._pool_lock:
                if self._engine is None:
                    postings: Postings = self._index
                    stored = postings.blocks if postings.block_size == blockmax.BLOCK else None
                    self._engine = blockmax.BlockMaxIndex(self._data, self._indices, self._indptr, self._term_max,
                                                         num_docs=len(self.corpus), blocks=stored)
        return self._engine

    def _rank_many(self, queries: list[list[int]], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """:meth:`_rank` of each query; pruned queries go to the compiled engine in one call
        (the loop over queries compiled too: a batch pays Python's cost once, not per query)."""
        if not (self.compiled and self.prunes):
            return [self._rank(ids, k) for ids in queries]
        docs, scores, counts = self.block_max_engine().top_k_many(queries, k)
        return [self._finish(ids, k, d, s, c) for ids, d, s, c in zip(queries, docs, scores, counts.tolist())]

    def _finish(self, ids: list[int], k: int, docs: np.ndarray, scores: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """One query's answer from the compiled engine as :meth:`_rank` gives it."""
        if count < 0:  # a list with a negative score: no bound holds
            return self._rank(ids, k)
        top, top_scores = docs[:count], scores[:count]
        if self._nonoccurrence is not None:  # BM25L / BM25+: the score every passage starts from
            top_scores = top_scores + self._nonoccurrence[ids].sum(dtype=np.float32)
        return top, top_scores

    def _rank(self, term_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (passage indices, scores) of one query given its indexed term ids."""
        if self.prunes:
            top, top_scores = prune_top_k(term_ids, k, self._data, self._indices, self._indptr, self._term_max,
                                          self._buffer(), self._rank_exhaustive, prune_from=self.prune_from)
        else:
            top, top_scores = self._rank_exhaustive(term_ids, k)
        if self._nonoccurrence is not None:  # BM25L / BM25+: the score every passage starts from
            top_scores = top_scores + self._nonoccurrence[term_ids].sum(dtype=np.float32)
        return top, top_scores

    def _rank_exhaustive(self, term_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (passage indices, scores before BM25L / BM25+'s constant) of one query,
        adding every posting of its terms."""
        data, indices, indptr = self._data, self._indices, self._indptr
        scores = self._buffer()
        n = len(scores)
        postings = []
        for t in term_ids:  # repeated query terms count once per occurrence, as in bm25s
            start, end = indptr[t], indptr[t + 1]
            rows = indices[start:end]
            # Within one posting list every passage appears once, so a fancy-indexed add is
            # exact (and much faster than np.add.at).
            scores[rows] += data[start:end]
            postings.append(rows)
        touched = np.concatenate(postings) if len(postings) > 1 else postings[0]
        dense = len(touched) > _DENSE_SHARE * n
        try:
            # Candidates: the best k + 1 passages (dense: of the whole buffer; else: the passages
            # of the best k * len(term_ids) + 1 entries of ``touched``, where a passage occurs
            # at most once per query term, so they hold the best k + 1 distinct passages).
            # Sorting them, needed anyway, tells whether a passage left out could tie the
            # k-th best: only then are all passages scoring at least that taken, so that ties
            # at the k-th place are settled by corpus order, not by the partition.
            complete = True  # no passage with a positive score left out
            if dense:
                if k < n:
                    top, complete = _top_k(scores, k + 1), False
                else:
                    top = np.arange(n)
            else:
                values = scores[touched]
                m = k * len(term_ids)
                if m < len(values):
                    top, complete = np.unique(touched[_top_k(values, m + 1)]), False
                else:
                    top = np.unique(touched)
            top_scores = scores[top]
            order = np.lexsort((top, -top_scores))  # score descending, ties in corpus order
            if not complete:  # more than k candidates; every passage left out scores <= the least of them
                kth = top_scores[order[k - 1]]
                if kth > 0 and top_scores[order[-1]] == kth:  # one left out may tie the k-th: take them all
                    top = np.flatnonzero(scores >= kth) if dense else np.unique(touched[values >= kth])
                    top_scores = scores[top]
                    order = np.lexsort((top, -top_scores))
        finally:
            scores[touched] = 0.0
        order = order[:k]
        top, top_scores = top[order], top_scores[order]
        keep = top_scores > 0  # only passages with positive evidence are hits
        if not keep.all():
            top, top_scores = top[keep], top_scores[keep]
        return top, top_scores

    def _search_rank_bm25(self, queries: list[str], k: int) -> list[list[Hit]]:
        index = self._index
        results: list[list[Hit]] = []
        for tokens in self.analyzer.tokenize(queries):
            tokens = [t for t in tokens if t in index.idf]
            if not tokens:
                results.append([])
                continue
            scores = index.get_scores(tokens)  # [N] float64
            top = _top_k(scores, min(k, len(scores)))
            top = top[scores[top] > 0]
            top = top[np.lexsort((top, -scores[top]))]
            results.append([Hit(self.corpus[d], float(scores[d])) for d in top.tolist()])
        return results

    # ------------------------------------------------------------------ persistence
    @classmethod
    def build(cls, corpus: Corpus, path: str | os.PathLike, **options: Any) -> BM25Retriever:
        """Build the index of ``corpus`` straight into the directory ``path`` and return it
        loaded from there (memory-mapped). ``options`` are the constructor's. With the bm25s
        backend the arrays are written as they are computed, never held in memory whole."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        out = path if options.get("backend", "bm25s") == "bm25s" else None
        retriever = cls(corpus, **options, _out=out)
        retriever.save(path)
        return cls.load(path, corpus, n_threads=options.get("n_threads"), pruning=options.get("pruning", True),
                        query_threads=options.get("query_threads", 1))

    def save(self, path: str | os.PathLike) -> Path:
        """Write the index to the directory ``path`` (created if needed) and return it.

        bm25s-backend indexes are stored as the arrays :meth:`load` maps
        (:func:`~searchgym.corpora.postings.save_postings`); rank-bm25 indexes are pickled.
        ``searchgym_bm25.json`` records the parameters, the analyzer, the corpus (name,
        fingerprint, size, file) that :meth:`load` checks and every file's size and checksum; it
        is written last (an earlier one is removed first), so a folder whose writing stopped
        half-way holds no index. ``searchgym index`` (:func:`~searchgym.corpora.indexes.build_index`)
        also leaves an existing index untouched until the new one is complete.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / _META).unlink(missing_ok=True)
        arrays: dict[str, Any] = {}
        if self._index is not None:
            if self.backend == "bm25s":
                arrays = save_postings(self._index, path)
            else:
                with open(path / "rank_bm25.pkl", "wb") as f:
                    writer = HashingWriter(f)
                    pickle.dump(self._index, writer, protocol=pickle.HIGHEST_PROTOCOL)
                    f.flush()
                    os.fsync(f.fileno())
                arrays = {"files": {"rank_bm25.pkl": writer.record()}}
        write_meta(path, _META, self._meta(arrays))
        return path

    def save_shards(self, path: str | os.PathLike, count: int) -> list[Path]:
        """Split the index into ``count`` serving shards of consecutive passages, written to
        ``path/shard-0`` ... (each an index folder :meth:`load` maps, for the whole corpus).

        A shard keeps the whole index's scores (its term statistics are the corpus's), so the
        merged top-k of the shards (:class:`~searchgym.corpora.sharded.ShardedRetriever`)
        equals this index's, scores and ties included."""
        if self.backend != "bm25s" or self._index is None:
            raise ConfigError(f"BM25Retriever.save_shards expects a non-empty bm25s-backend index, got backend {self.backend!r}.")
        n = len(self.corpus)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= n:
            raise ConfigError(f"BM25Retriever.save_shards expects a shard count between 1 and the {n} passages, got {count!r}.")
        bounds = [(n * i // count, n * (i + 1) // count) for i in range(count)]
        folders = [Path(path) / f"shard-{i}" for i in range(count)]
        for i, (arrays, folder) in enumerate(zip(split_postings(self._index, bounds, folders), folders)):
            shard = {"index": i, "count": count, "start": bounds[i][0], "stop": bounds[i][1]}
            write_meta(folder, _META, {**self._meta(arrays), "shard": shard})
        return folders

    def _meta(self, arrays: dict[str, Any]) -> dict[str, Any]:
        return {
            "format_version": _FORMAT_VERSION,
            "retriever": "bm25" if self.backend == "bm25s" else "rank-bm25",
            "backend": self.backend,
            "method": self.method,
            "k1": self.k1,
            "b": self.b,
            "delta": self.delta,
            "corpus_name": self.corpus.name,
            "corpus_fingerprint": self.corpus.fingerprint,
            "corpus_path": None if self.corpus.path is None else str(self.corpus.path),
            "num_passages": len(self.corpus),
            "empty_vocabulary": self._index is None,
            "analyzer": {"language": self.analyzer.language, "stopwords": sorted(self.analyzer.stopwords)},
            **arrays,
        }

    @staticmethod
    def read_meta(path: str | os.PathLike) -> dict[str, Any]:
        """The metadata of an index folder written by :meth:`save`; a clear error otherwise."""
        path = Path(path)
        meta_path = path / _META
        if not meta_path.is_file():
            raise ConfigError(
                f"BM25Retriever.load expects a directory written by BM25Retriever.save, got {str(path)!r} "
                f"(no {_META} in it)."
            )
        meta = index_meta(path)  # the one reader of index folders' metadata
        missing = [key for key in ("backend", "corpus_fingerprint") if key not in meta]
        if missing:
            raise DataFormatError(meta_path, None, "the JSON metadata of a saved BM25 index", f"no {' or '.join(missing)} in it")
        if meta.get("format_version") not in _READABLE_VERSIONS:
            raise ConfigError(
                f"BM25 index at {str(path)!r} has format version {meta.get('format_version')!r}, expected one of "
                f"{list(_READABLE_VERSIONS)}; rebuild it: searchgym index --corpus FILE --out {str(path)!r}."
            )
        return meta

    @classmethod
    def load(
        cls, path: str | os.PathLike, corpus: Corpus, n_threads: int | None = None, *, in_memory: bool = False,
        pruning: bool = True, query_threads: int = 1,
    ) -> BM25Retriever:
        """Map an index written by :meth:`save` or :meth:`build` for ``corpus``.

        ``in_memory=True`` reads the score matrix into the process's memory instead of mapping
        it: about the index folder's size in RAM (``data.npy`` + ``indices.npy`` + ``indptr.npy``:
        ~0.5 GB at 1M passages, ~10 GB for wiki-18's 21M), a load that reads the whole folder
        (seconds per GB), not shared with other processes. Queries may run a few percent
        faster (anonymous memory gets huge pages, a mapped file 4 KiB page-cache pages): seen
        once on an idle machine, not under load (``benchmarks/query_latency.py``).

        ``pruning`` and ``query_threads`` are the constructor's. An index written before term bounds were (no
        ``term_max.npy`` recorded in its metadata) loads and is scored exhaustively, said once
        per folder by a warning with the command that rebuilds it.

        Raises :class:`ConfigError` when the index was built for another corpus (the corpus
        fingerprints differ) or with another analyzer. rank-bm25 indexes are pickles: load
        only indexes you wrote yourself.
        """
        if not isinstance(in_memory, bool):
            raise ConfigError(f"BM25Retriever.load expects in_memory to be True or False, got {in_memory!r}.")
        path = Path(path)
        meta = cls.read_meta(path)
        backend, fingerprint = meta["backend"], meta["corpus_fingerprint"]
        if fingerprint != corpus.fingerprint:
            raise ConfigError(
                f"BM25 index at {str(path)!r} was built for corpus {meta.get('corpus_name')!r} with fingerprint "
                f"{fingerprint} ({meta.get('num_passages')} passages), got corpus {corpus.name!r} with fingerprint "
                f"{corpus.fingerprint} ({len(corpus)} passages). Load it with the corpus it was built from, or "
                "rebuild: BM25Retriever(corpus).save(path)."
            )
        analyzer = default_analyzer()
        saved = meta.get("analyzer", {})
        if saved.get("language") != analyzer.language or set(saved.get("stopwords", ())) != analyzer.stopwords:
            raise ConfigError(
                f"BM25 index at {str(path)!r} was built with another analyzer ({saved!r}); rebuild it with this "
                "version of searchgym: BM25Retriever(corpus).save(path)."
            )
        index = None
        bounds = "term_max.npy" in (meta.get("files") or {})
        # the block maxima, when the folder records them (written before them: computed on first search)
        block_size = meta.get("block_size") if set(BLOCK_FILES) <= set(meta.get("files") or {}) else None
        if not meta.get("empty_vocabulary"):
            if backend == "bm25s":
                if meta["format_version"] >= 2:  # sizes, dtypes and shapes before anything is mapped
                    check_postings(path, meta, rebuild_hint(path, meta))
                index = _map_postings(path, meta["format_version"], len(corpus), in_memory, bounds, block_size)
                if not bounds and pruning and path.resolve() not in _UNBOUNDED_SAID:
                    _UNBOUNDED_SAID.add(path.resolve())
                    warnings.warn(
                        f"BM25 index at {str(path)!r} was written before term score bounds were (no term_max.npy): it is "
                        f"scored exhaustively, without dynamic pruning (same results, slower on large corpora). Rebuild it "
                        f"to prune: {rebuild_command(path, meta)}.", stacklevel=2)
            elif backend == "rank_bm25":
                require("rank_bm25", extra="rank-bm25", feature="The rank-bm25 backend")
                if meta.get("files"):
                    check_files(path, meta["files"], rebuild_hint(path, meta), recorded_in=_META)
                with open(path / "rank_bm25.pkl", "rb") as f:
                    index = pickle.load(f)
            else:
                raise UnknownNameError("BM25 backend", backend, BM25_BACKENDS)
        retriever = cls(
            corpus,
            backend=backend,
            k1=meta["k1"],
            b=meta["b"],
            method=meta["method"],
            delta=meta["delta"],
            n_threads=n_threads,
            pruning=pruning,
            query_threads=query_threads,
            _index=index,
            _prebuilt=True,
        )
        if backend == "bm25s" and index is not None:
            retriever.folder, retriever._format = path.resolve(), meta["format_version"]
            retriever.in_memory = in_memory
            retriever._bounds_on_disk = bounds
            retriever._block_size_on_disk = block_size
        return retriever


def _map_postings(path: Path, format_version: int, num_docs: int, in_memory: bool = False, bounds: bool = False,
                  block_size: int | None = None) -> Postings:
    """The postings of an index folder, memory-mapped (read into memory with ``in_memory``):
    searchgym's arrays (version 2) or bm25s's own folder (version 1); ``bounds``: with the term
    bounds its metadata records; ``block_size``: with the block maxima it records, of that size."""
    if format_version >= 2:
        return load_postings(path, num_docs, in_memory=in_memory, bounds=bounds, block_size=block_size)
    bm25s = require("bm25s", extra="core", feature="The bm25s BM25 backend", install="pip install bm25s")
    index = bm25s.BM25.load(path / "bm25s", mmap=not in_memory, show_progress=False)
    scores = index.scores
    return Postings(scores["data"], scores["indices"], scores["indptr"], index.vocab_dict,
                    getattr(index, "nonoccurrence_array", None), int(scores["num_docs"]))


def _top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, in no particular order."""
    if k >= len(values):
        return np.arange(len(values))
    return np.argpartition(values, len(values) - k)[len(values) - k :]
