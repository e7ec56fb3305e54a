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
(a plain dict lookup per word afterwards). :meth:`Analyzer.token_ids`, which the bm25s
index is built from, goes one step further and maps each surface word straight to its term
id, so indexing a corpus never builds the intermediate lists of strings; it runs at least
as fast as ``bm25s.tokenize`` with the same stemmer (about 25-40k passages/s on one core).
"""

from __future__ import annotations

import re
import threading
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from searchgym.error import require

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
# A bound on remembered surface words: a long-running server fed arbitrary queries must not
# grow without limit. Far above the vocabulary of a million-passage corpus.
_MAX_CACHE = 5_000_000


class Analyzer:
    """Words → lowercase → stopwords out → Snowball English stems, with a per-word cache.

    Thread-safe: lookups are plain dict reads; filling the cache takes a lock because the
    PyStemmer object is not reentrant.
    """

    def __init__(self, stopwords: Iterable[str] = STOPWORDS, language: str = "english"):
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
        # surface word (as it appears in the text, any case) -> stem; "" for a stopword.
        self._stems: dict[str, str] = {}

    # ------------------------------------------------------------------ words to stems
    def _learn(self, words: Iterable[str]) -> None:
        """Stem the words the cache has not seen yet (one PyStemmer call for all of them)."""
        with self._lock:
            stems = self._stems
            new = [w for w in set(words) if w not in stems]
            if not new:
                return
            if len(stems) + len(new) > _MAX_CACHE:
                stems.clear()
            lowered = [w.lower() for w in new]
            for word, low, stem in zip(new, lowered, self._stemmer.stemWords(lowered)):
                stems[word] = "" if low in self.stopwords else stem

    def _stems_of(self, words: list[str]) -> list[str]:
        stems = self._stems
        try:
            return [stems[w] for w in words]
        except KeyError:
            self._learn(words)
            return [stems[w] for w in words]

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
        for word, stem in zip(new, self._stems_of(new)):
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
