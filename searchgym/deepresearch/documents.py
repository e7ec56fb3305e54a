"""The browse game's document store: full texts read page by page and searched inside.

The store reads documents from the env's corpus (a memory-mapped passage store: a document
becomes text only when a call asks for it), so an env process's memory does not grow with
the corpus. Every call does bounded work whatever the agent sends:

- a page is ``page_words`` whitespace-separated words; a document's page boundaries are
  found in one pass over its text (capped at :data:`MAX_DOCUMENT_CHARS`) and kept for the
  few documents read last, so reading page 7 after page 6 costs one slice;
- ``find`` looks for the pattern as literal text (case-insensitive, any run of whitespace
  matching any other), never as a regular expression the agent writes: the pattern is
  escaped, at most :data:`MAX_PATTERN_CHARS` characters and :data:`MAX_PATTERN_WORDS` words,
  so the match is linear in the document's length (no catastrophic backtracking), and at most
  ``max_find_results`` places are returned;
- a doc id is looked up in the corpus's id index, never used as a path: nothing the agent
  sends reads outside the corpus.
"""

from __future__ import annotations

import bisect
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError

__all__ = ["MAX_DOCUMENT_CHARS", "MAX_PATTERN_CHARS", "MAX_PATTERN_WORDS", "DocumentStore", "FindResult", "Page", "snippet"]

#: The most characters of one document the store reads (pages past it are not offered); a
#: web page of a million words would otherwise make one call cost as much as a thousand.
MAX_DOCUMENT_CHARS = 2_000_000
#: The longest pattern ``find`` takes, in characters and in words.
MAX_PATTERN_CHARS = 200
MAX_PATTERN_WORDS = 24
#: Documents whose page boundaries are kept (the ones read last).
_CACHED_DOCUMENTS = 64
_WORD = re.compile(r"\S+")


def snippet(text: str, words: int) -> str:
    """The first ``words`` whitespace-separated words of ``text`` (BrowseComp-Plus's search
    snippet is the document's first 512 tokens; words stand in for a tokenizer's tokens), with
    ``" ..."`` when the text goes on."""
    end, count = 0, 0
    for m in _WORD.finditer(text):
        if count == words:
            return text[:end].rstrip() + " ..."
        end, count = m.end(), count + 1
    return text.strip()


@dataclass(frozen=True)
class Page:
    """One page of a document: its ``number`` (from 1) of ``count`` pages, and its ``text``."""

    doc_id: str
    title: str
    number: int
    count: int
    text: str


@dataclass(frozen=True)
class FindResult:
    """The places of a document that hold a pattern: ``(page, excerpt)`` of each of the first
    ``len(places)`` matches, in order, and how many matches the document has in all."""

    doc_id: str
    title: str
    pattern: str
    places: tuple[tuple[int, str], ...]
    total: int
    pages: int


class DocumentStore:
    """Full documents of a corpus, paged and searchable inside.

    Args:
        corpus: The documents (the env's corpus, or a corpus of full texts when the search
            index is over their chunks).
        page_words: Words per page of ``open``.
        max_find_results: The most places one ``find`` returns.
        find_context_chars: Characters of text shown on each side of a match.
    """

    def __init__(self, corpus: Corpus, *, page_words: int = 512, max_find_results: int = 10, find_context_chars: int = 160):
        for name, value in (("page_words", page_words), ("max_find_results", max_find_results),
                            ("find_context_chars", find_context_chars)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"DocumentStore expects {name} to be a positive integer, got {value!r}.")
        self.corpus = corpus
        self.page_words = page_words
        self.max_find_results = max_find_results
        self.find_context_chars = find_context_chars
        self._bounds: OrderedDict[str, tuple[str, str, list[int]]] = OrderedDict()

    # ------------------------------------------------------------------ lookup
    def get(self, doc_id: str) -> Passage | None:
        """The document with this id, or None (an id the corpus does not hold)."""
        if not isinstance(doc_id, str) or not doc_id or len(doc_id) > 512:
            return None
        try:
            return self.corpus.get(doc_id)
        except KeyError:
            return None

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.get(doc_id) is not None

    def _document(self, doc_id: str) -> tuple[str, str, list[int]] | None:
        """``(title, text, page starts)`` of a document (its text cut at MAX_DOCUMENT_CHARS)."""
        cached = self._bounds.get(doc_id)
        if cached is not None:
            self._bounds.move_to_end(doc_id)
            return cached
        passage = self.get(doc_id)
        if passage is None:
            return None
        text = passage.text[:MAX_DOCUMENT_CHARS]
        starts = [0]
        for i, m in enumerate(_WORD.finditer(text)):
            if i and i % self.page_words == 0:
                starts.append(m.start())
        entry = (passage.title, text, starts)
        self._bounds[doc_id] = entry
        if len(self._bounds) > _CACHED_DOCUMENTS:
            self._bounds.popitem(last=False)
        return entry

    def pages(self, doc_id: str) -> int:
        """How many pages the document has (0: no such document)."""
        entry = self._document(doc_id)
        return 0 if entry is None else len(entry[2])

    # ------------------------------------------------------------------ the two reads
    def page(self, doc_id: str, number: int) -> Page | None:
        """Page ``number`` (from 1) of the document; None for an unknown id or a page out of range."""
        entry = self._document(doc_id)
        if entry is None:
            return None
        title, text, starts = entry
        if not 1 <= number <= len(starts):
            return None
        end = starts[number] if number < len(starts) else len(text)
        return Page(doc_id, title, number, len(starts), text[starts[number - 1]:end].strip())

    def find(self, doc_id: str, pattern: str) -> FindResult | None:
        """The places of the document that hold ``pattern`` (literal text, case-insensitive,
        whitespace-insensitive); None for an unknown id. ``pattern`` must pass
        :func:`pattern_problem`."""
        entry = self._document(doc_id)
        if entry is None:
            return None
        title, text, starts = entry
        words = pattern.split()
        regex = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
        places: list[tuple[int, str]] = []
        total = 0
        for m in regex.finditer(text):
            total += 1
            if len(places) < self.max_find_results:
                page = bisect.bisect_right(starts, m.start())
                left = max(0, m.start() - self.find_context_chars)
                right = min(len(text), m.end() + self.find_context_chars)
                excerpt = " ".join(text[left:right].split())
                places.append((page, ("... " if left else "") + excerpt + (" ..." if right < len(text) else "")))
        return FindResult(doc_id, title, pattern, tuple(places), total, len(starts))


def pattern_problem(pattern: object) -> str | None:
    """What is wrong with a ``find`` pattern (None: nothing): it must be non-empty text of at
    most :data:`MAX_PATTERN_CHARS` characters and :data:`MAX_PATTERN_WORDS` words."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "find needs a non-empty pattern (the text to look for, e.g. \"founded in\")"
    if len(pattern) > MAX_PATTERN_CHARS or len(pattern.split()) > MAX_PATTERN_WORDS:
        return (f"find's pattern must be at most {MAX_PATTERN_CHARS} characters and {MAX_PATTERN_WORDS} words, got "
                f"{len(pattern)} characters and {len(pattern.split())} words; look for a shorter text")
    return None


def id_problem(store: DocumentStore, doc_id: object, examples: Sequence[str] = ()) -> str | None:
    """What is wrong with a doc id (None: the corpus holds it)."""
    if not isinstance(doc_id, str) or not doc_id.strip():
        return "doc_id must be a document id from the search results, e.g. \"" + (examples[0] if examples else "doc-17") + "\""
    if doc_id not in store:
        shown = doc_id if len(doc_id) <= 60 else doc_id[:57] + "..."
        return f"there is no document with id {shown!r}; use a doc id as the search results show it"
    return None
