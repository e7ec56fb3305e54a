"""The one text analyzer shared by every BM25 backend, so that their scores are comparable.

A text becomes a list of index terms in four steps:

1. words: maximal runs of Unicode word characters (``\\w+``: letters, digits and ``_`` of any
   script), so "Café-crème, 1901" gives ``café``, ``crème``, ``1901``;
2. lowercase;
3. drop English stopwords: Lucene's 33-word English stop set (the list Pyserini's default
   analyzer and bm25s's ``stopwords="en"`` use), so keyword queries built by Search-R1-style
   agents are analyzed the way its Pyserini index was;
4. Snowball English (Porter2) stemming through PyStemmer.

Stemming is the expensive step, so every distinct surface word is stemmed once and remembered
(a plain dict lookup per word afterwards), within a bound: the cache keeps two generations of
at most ``max_words`` words each (a word found in the older one moves to the newer; when the
newer is full it becomes the older and the oldest is dropped), and a query word whose stem
the index does not hold is not remembered at all (it cannot match; a training run sends
millions of such words, numbers above all), so a server's memory stays flat however many
distinct words it is sent. :meth:`Analyzer.token_ids`, which the bm25s
index is built from, goes one step further and maps each surface word straight to its term
id, so indexing a corpus never builds the intermediate lists of strings; it runs at least
as fast as ``bm25s.tokenize`` with the same stemmer (about 25-40k passages/s on one core).
"""

from __future__ import annotations

import itertools
import re
import threading
from array import array
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from searchgym.error import ConfigError, require

__all__ = ["STOPWORDS", "Analyzer", "default_analyzer", "tokenize"]

#: Lucene's English stop set, as used by Pyserini's default analyzer and bm25s ``"en"``.
STOPWORDS: frozenset[str] = frozenset(
    [
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
        "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
        "these", "they", "this", "to", "was", "will", "with",
    ]
)

_WORD = re.compile(r"\w+")
# For an ASCII text: A-Z lowercased, every character ``\w`` does not match made a space, so
# that ``text.translate(_ASCII_WORDS).split()`` is ``_WORD.findall(text.lower())``.
_ASCII_WORDS = str.maketrans(
    {c: (chr(c).lower() if chr(c).isalnum() or chr(c) == "_" else " ") for c in range(128)}
)
#: Surface words an analyzer remembers per generation by default (two generations: at most
#: twice this many, about 190 bytes each). A query stream's recurring words fit many times
#: over; building an index does not need the cache to hold its vocabulary (each shard stems
#: its distinct words in one batch), only to spare re-stemming across shards.
MAX_WORDS = 1 << 18


class Analyzer:
    """Words → lowercase → stopwords out → Snowball English stems, with a per-word cache.

    Thread-safe: lookups are plain dict reads; filling the cache takes a lock because the
    PyStemmer object is not reentrant.

    ``max_words`` bounds each of the cache's two generations (see the module docstring);
    ``keep_unknown=True`` also remembers query words whose stem the index lacks (as
    searchgym did before the bound; ``benchmarks/serve_memory.py`` compares both).
    """

    def __init__(self, stopwords: Iterable[str] = STOPWORDS, language: str = "english", *, max_words: int = MAX_WORDS,
                 keep_unknown: bool = False):
        if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
            raise ConfigError(f"Analyzer expects max_words to be a positive integer, got {max_words!r}.")
        stemmer_module = require(
            "Stemmer",
            extra="core",
            feature="BM25 tokenization",
            package="PyStemmer",
            install="pip install PyStemmer (a core dependency of searchgym; `make install` installs it)",
        )
        self.language = language
        self.stopwords = frozenset(w.lower() for w in stopwords)
        self._stemmer = stemmer_module.Stemmer(language)
        self._lock = threading.Lock()
        self.max_words = max_words
        self.keep_unknown = keep_unknown
        # surface word (as it appears in the text, any case) -> stem; "" for a stopword. The
        # newer generation takes lookups and new words; the older is read on a miss only. A
        # generation is never changed once it is the older one: readers may hold either.
        self._stems: dict[str, str] = {}
        self._old: dict[str, str] = {}

    @property
    def cached_words(self) -> int:
        """Surface words the cache holds now (both generations), at most ``2 * max_words``."""
        return len(self._stems) + len(self._old)

    # ------------------------------------------------------------------ words to stems
    def _learn(self, words: Iterable[str], keep: Callable[[str], bool] | None = None) -> tuple[dict[str, str], dict[str, str]]:
        """``(newer, extra)``: every distinct word of ``words`` is in the newer generation as it
        was when the lock was taken, or in ``extra`` (found in the older one, or stemmed now in
        one PyStemmer call). Those are remembered, but a fresh word whose stem is not a
        stopword and fails ``keep`` (a query word the index does not know) is not."""
        with self._lock:
            newer, older = self._stems, self._old
            missing = [w for w in set(words) if w not in newer]
            if not missing:
                return newer, {}
            extra = {w: older[w] for w in missing if w in older} if older else {}
            new = [w for w in missing if w not in extra]
            remember = dict(extra)
            if new:
                lowered = [w.lower() for w in new]
                stop = self.stopwords
                fresh = {w: ("" if low in stop else stem) for w, low, stem in zip(new, lowered, self._stemmer.stemWords(lowered))}
                extra.update(fresh)
                remember.update(fresh if keep is None else {w: t for w, t in fresh.items() if not t or keep(t)})
            self._remember(remember)
            return newer, extra

    def _remember(self, entries: dict[str, str]) -> None:
        """Add ``entries`` to the newer generation; a full one becomes the older (replacing,
        not changing, the dicts: readers may hold them)."""
        if not entries:
            return
        if len(self._stems) + len(entries) > self.max_words:
            self._old = self._stems
            self._stems = {}
            if len(entries) > self.max_words:  # one batch larger than a generation (an index shard)
                entries = dict(itertools.islice(entries.items(), self.max_words))
        self._stems.update(entries)

    def _stems_of(self, words: list[str], keep: Callable[[str], bool] | None = None) -> list[str]:
        stems = self._stems
        try:
            return [stems[w] for w in words]
        except KeyError:
            newer, extra = self._learn(words, keep)
            return [extra[w] if w in extra else newer[w] for w in words]

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Index terms of every text (stopwords removed, stemmed), in text order."""
        find = _WORD.findall
        out = []
        for text in texts:
            out.append([s for s in self._stems_of(find(text)) if s])
        return out

    # ------------------------------------------------------------------ stems to ids
    def token_ids(self, texts: Iterable[str], vocab: dict[str, int], *, grow: bool) -> list[list[int]]:
        """Term ids of every text under ``vocab`` (term -> id).

        With ``grow=True`` unseen terms get the next free id (building an index); with
        ``grow=False`` they are dropped (a query term absent from the index cannot match).
        """
        find = _WORD.findall
        # surface word -> term id, or -1 for a stopword / a term not in ``vocab``; local to
        # this call because ids belong to ``vocab``. Two list comprehensions per text keep
        # the hot loop out of the interpreter's statement dispatch.
        ids_of: dict[str, int] = {}
        out = []
        for text in texts:
            words = find(text)
            try:
                ids = [ids_of[w] for w in words]
            except KeyError:
                self._learn_ids(words, ids_of, vocab, grow)
                ids = [ids_of[w] for w in words]
            out.append([i for i in ids if i >= 0])
        return out

    def _learn_ids(self, words: list[str], ids_of: dict[str, int], vocab: dict[str, int], grow: bool) -> None:
        new = [w for w in words if w not in ids_of]
        # Searching (not growing), a word whose stem the index lacks maps to -1 whatever it is:
        # the shared cache need not remember it.
        keep = None if grow or self.keep_unknown else vocab.__contains__
        for word, stem in zip(new, self._stems_of(new, keep)):
            if not stem:
                ids_of[word] = -1
                continue
            i = vocab.get(stem)
            if i is None:
                if grow:
                    i = vocab[stem] = len(vocab)
                else:
                    i = -1
            ids_of[word] = i

    def index_terms(self, texts: Iterable[str], vocab: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
        """The terms of a whole corpus, for building an index: ``(term_ids, lengths)``.

        ``term_ids`` (int32) concatenates the term ids of every text, ``lengths`` (int64)
        says how many belong to each text. Unseen terms are added to ``vocab``.

        Two passes, as bm25s's own tokenizer does: first every surface word gets a
        provisional id (one dict lookup per word, stored in a compact int array), then the
        distinct words are stemmed in one batch and the provisional ids mapped to term ids
        with numpy. No per-word Python objects outlive the first pass.

        An ASCII text (most of an English corpus) is cut into words by ``str.translate``
        (lowercasing, every other character a space) and ``str.split``, about three times
        faster than the regular expression and the same words lowercased; other texts go
        through ``\\w+`` as they are. Both give every term the same id in the same order,
        because a word's stem does not depend on its case and ids follow first occurrence.
        """
        find = _WORD.findall
        table = _ASCII_WORDS
        surface = _NextId()
        flat = array("i")
        lengths = []
        ids = surface.__getitem__
        for text in texts:
            words = text.translate(table).split() if text.isascii() else find(text)
            # One C-level lookup per word; only a new word (real text brings one in almost
            # every passage) runs Python code, to take the next id.
            flat.extend(map(ids, words))
            lengths.append(len(words))
        term_of = np.full(len(surface), -1, dtype=np.int32)
        for j, stem in enumerate(self._stems_of(list(surface))):  # dicts keep insertion order
            if stem:
                term_of[j] = vocab.setdefault(stem, len(vocab))
        terms = term_of[np.frombuffer(flat, dtype=np.int32)] if flat else np.zeros(0, dtype=np.int32)
        counts = np.asarray(lengths, dtype=np.int64)
        keep = terms >= 0  # stopwords out
        if not keep.all():
            doc = np.repeat(np.arange(len(counts)), counts)
            terms = terms[keep]
            counts = np.bincount(doc[keep], minlength=len(counts)).astype(np.int64)
        return terms, counts


class _NextId(dict):
    """word -> provisional id; a word not seen yet gets the next id."""

    def __missing__(self, word: str) -> int:
        value = self[word] = len(self)
        return value


_DEFAULT: Analyzer | None = None
_DEFAULT_LOCK = threading.Lock()


def default_analyzer() -> Analyzer:
    """The process-wide analyzer (one shared stem cache for every index and query)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = Analyzer()
    return _DEFAULT


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Index terms of every text with the default analyzer (see the module docstring).

    >>> tokenize(["The cats were running in Paris!"])
    [['cat', 'were', 'run', 'pari']]
    """
    if isinstance(texts, str):
        raise TypeError(
            f"tokenize expects a sequence of texts, got a single str ({texts[:40]!r}); wrap it in a list."
        )
    return default_analyzer().tokenize(texts)
