"""The small value types every part of searchgym speaks: passages, questions, hits."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, overload, runtime_checkable

from searchgym.error import ConfigError


@dataclass(frozen=True, slots=True)
class Passage:
    """One retrievable unit of text. ``id`` is unique within its corpus."""

    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 / FlashRAG ``contents`` field: ``"title"\\ntext``."""
        return f'"{self.title}"\n{self.text}'


@dataclass(frozen=True)
class QAExample:
    """A question with its gold answers (the first one is canonical, the rest are aliases).

    ``candidates``: the options the question offers when the data knows them (the two
    entities a comparison names), else empty; strict scoring refuses credit to an answer
    naming two of them.
    """

    id: str
    question: str
    answers: tuple[str, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    candidates: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("id", "question"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ConfigError(f"QAExample expects {name} to be a string, got {type(value).__name__} {value!r}.")
        # A bare string is one answer, not one answer per character.
        answers = (self.answers,) if isinstance(self.answers, str) else self.answers
        try:
            answers = tuple(answers)
        except TypeError:
            raise ConfigError(f"QAExample expects answers to be a sequence of strings, got {type(self.answers).__name__}.") from None
        bad = [a for a in answers if not isinstance(a, str)]
        if bad:
            raise ConfigError(f"QAExample {self.id!r} expects every answer to be a string, got {bad[0]!r}.")
        object.__setattr__(self, "answers", answers)
        candidates = (self.candidates,) if isinstance(self.candidates, str) else self.candidates
        try:
            candidates = tuple(candidates)
        except TypeError:
            raise ConfigError(
                f"QAExample {self.id!r} expects candidates to be a sequence of strings, got {type(self.candidates).__name__}."
            ) from None
        bad = [c for c in candidates if not isinstance(c, str)]
        if bad:
            raise ConfigError(f"QAExample {self.id!r} expects every candidate to be a string, got {bad[0]!r}.")
        object.__setattr__(self, "candidates", candidates)


@dataclass(frozen=True, slots=True)
class Hit:
    """A passage returned by a retriever with its score (higher is better)."""

    passage: Passage
    score: float


def fingerprint_record(passage_id: bytes, title: bytes, text: bytes) -> bytes:
    """What a corpus fingerprint hashes of one passage (its UTF-8 id, title and text): every
    kind of corpus hashes the same bytes, so equal passages give equal fingerprints."""
    return b"%s\x00%s\x00%s\x01" % (passage_id, title, text)


class Corpus(Sequence[Passage]):
    """An ordered, immutable collection of passages with lookup by id.

    ``Corpus(passages)`` holds them in memory; a passage file opened with ``load_corpus(path)``
    is a :class:`~searchgym.corpora.mapped.MappedCorpus`, whose passages stay on disk.
    """

    #: The passage file the corpus was opened from; None for a corpus held in memory.
    path: Path | None = None

    def __init__(self, passages: Iterable[Passage], name: str = "custom"):
        self.name = name
        self._passages: list[Passage] = list(passages)
        self._index: dict[str, int] = {}
        for i, p in enumerate(self._passages):
            if p.id in self._index:
                raise ConfigError(
                    f"Corpus {name!r} has two passages with id {p.id!r} (positions "
                    f"{self._index[p.id]} and {i}); expected unique ids. Rename or drop one."
                )
            self._index[p.id] = i
        self._fingerprint: str | None = None

    def __len__(self) -> int:
        return len(self._passages)

    @overload
    def __getitem__(self, i: int) -> Passage: ...
    @overload
    def __getitem__(self, i: slice) -> list[Passage]: ...
    def __getitem__(self, i):
        return self._passages[i]

    def __iter__(self) -> Iterator[Passage]:
        return iter(self._passages)

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, passages={len(self)})"

    def get(self, passage_id: str) -> Passage:
        """The passage with this id; ``KeyError`` naming the id if absent."""
        return self._passages[self.index_of(passage_id)]

    def index_of(self, passage_id: str) -> int:
        try:
            return self._index[passage_id]
        except KeyError:
            raise KeyError(f"No passage with id {passage_id!r} in corpus {self.name!r}") from None

    def __contains__(self, item: object) -> bool:
        if isinstance(item, Passage):
            return self._index.get(item.id) is not None and self._passages[self._index[item.id]] == item
        return item in self._index

    @property
    def fingerprint(self) -> str:
        """A content hash (ids, titles, texts) used to key on-disk caches of indexes and embeddings."""
        if self._fingerprint is None:
            h = hashlib.sha256()
            for p in self._passages:
                # surrogatepass: a lone surrogate in a passage must not make hashing fail.
                h.update(fingerprint_record(*(s.encode("utf-8", "surrogatepass") for s in (p.id, p.title, p.text))))
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint


#: The longest query searched by default: the env cuts longer ones to it (``max_query_chars``)
#: and ``searchgym serve`` accepts up to it, so an env over HTTP searches what it would in-process.
MAX_QUERY_CHARS = 2048


class Retriever(ABC):
    """Batched search over a :class:`Corpus`.

    ``search(queries, k)`` returns, for every query, at most ``k`` hits sorted by
    decreasing score. An empty query returns no hits.
    """

    corpus: Corpus
    max_query_chars: int | None = None
    """The longest query this retriever takes (None: any); the env cuts longer queries to it
    (a retrieval server's limit, read by :class:`~searchgym.corpora.http.HTTPRetriever`)."""

    @abstractmethod
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits for every query, best first."""

    @classmethod
    def _check_corpus(cls, corpus: object) -> Corpus:
        """``corpus`` if it is a non-empty :class:`Corpus`; ``ConfigError`` naming the retriever otherwise."""
        if not isinstance(corpus, Corpus):
            raise ConfigError(f"{cls.__name__} expects a Corpus, got {type(corpus).__name__}; wrap passages in Corpus(...).")
        if len(corpus) == 0:
            raise ConfigError(f"{cls.__name__} expects a non-empty corpus, got corpus {corpus.name!r} with 0 passages.")
        return corpus

    @staticmethod
    def _check_k(k: int) -> int:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"Retriever.search expects k to be a positive integer, got {k!r}.")
        return k


@dataclass(frozen=True)
class SearchContext:
    """Whose query it is: what a context-aware search engine is told beside each query.

    ``example_id`` and ``question`` are the episode's question; ``turn`` the agent turn
    (1-based) being played, 0 for the searches of ``reset`` (s3's initial retrieval);
    ``answers`` the question's gold answers (empty when unknown), for an engine that writes
    its documents knowing them, as ZeroSearch's simulator does. An engine that reads them
    knows what the policy is asked: it must not hand them to a query that merely asks for
    them (searchgym.methods.zerosearch shows one guard). A batch of many envs' searches
    carries one context per query, in order. The training step reaches an engine through
    its own optional ``set_step`` (see :class:`SearchEngine`).
    """

    example_id: str
    question: str
    turn: int = 0
    answers: tuple[str, ...] = ()


@runtime_checkable
class SearchEngine(Protocol):
    """Anything that searches: an object with ``search(queries, k) -> list[list[Hit]]``.

    Envs, :func:`~searchgym.corpora.make_retriever`, the batching of many envs' searches and
    the drivers accept any such object; subclassing :class:`Retriever` is not needed.
    Two optional methods let an engine know more (both looked up by name, so a plain object
    works without them):

    - ``search_with_context(queries, k, contexts)``: called instead of ``search`` with one
      :class:`SearchContext` per query (which episode, which question, which turn), e.g. a
      simulated engine that conditions on the question (ZeroSearch); searches of many envs
      still go out as one call, each query with its own context;
    - ``set_step(step)``: the trainer calls it with the training step before each rollout
      (a noise or difficulty schedule); the engine keeps it for its next searches.

    ``max_query_chars`` (optional attribute): the longest query it takes; the env cuts longer ones.
    """

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits for every query, best first."""
        ...


def is_search_engine(obj: Any) -> bool:
    """Whether ``obj`` can serve as a search engine (it has a callable ``search``); classes are not."""
    return not isinstance(obj, type) and callable(getattr(obj, "search", None))
