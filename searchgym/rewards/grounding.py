"""Grounded evidence: the part of an agent's evidence it drew from what the env showed it.

R-Search asks the agent to quote "the original information from the observations" and
pays for the answer a frozen reader gives from that quote. Nothing in the paper checks
that the quote is one: an evidence block listing every corpus title, or repeating the
question (which names the answer of a comparison question), earns the evidence reward
without any retrieval behind it. :func:`ground_evidence` keeps only what occurs in the
episode's observations.

The unit is the evidence *sentence*: the evidence is cut after ``.``, ``!``, ``?`` and
``;`` and at line breaks. A piece is grounded when, after normalization (case folded,
every punctuation or symbol character read as a space, whitespace collapsed), its words
occur contiguously inside one retrieved document and either

- it has at least ``min_span_words`` words (a quoted fragment of a sentence), or
- it is a whole sentence of that observation (short sentences such as "He died in 1907.").

A piece may start with the ``(Title: …)`` marker R-Search renders before each document
(sentences such as "It was founded in 1872." name their subject only through it): the
marker is kept in what the reader reads, and the rest must then quote the document of
that title, so a title cannot be attached to another document's sentence.

So a list of names fails (the names are not contiguous in any document), and so does a
fragment of one or two words cut out around a name (``"Meibreluvia."``), while a
sentence copied with another case, spacing or punctuation passes. Repeated pieces count
once.

Dumping is bounded by length, not truncated: evidence whose grounded words exceed
``max_words`` is not evidence (the paper asks for the *key* evidence, and a reader
handed every retrieved document measures retrieval, not the agent's choice). Truncating
instead would pay a dump whenever the answer sits in its first ``max_words`` words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from searchgym.error import ConfigError

#: Defaults of :func:`ground_evidence`. ``max_words``: about four sentences of Wikipedia
#: length (one per hop of a 3–4 hop question) and under two synthwiki passages, well under
#: the ~220 words of one top-3 retrieval. ``min_span_words``: the shortest synthwiki sentence.
DEFAULT_MAX_EVIDENCE_WORDS = 100
DEFAULT_MIN_SPAN_WORDS = 6

_PIECE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_TITLE_MARK = re.compile(r"^\s*\(\s*title\s*:([^)]*)\)\s*", re.IGNORECASE)
_DOC_TITLE = re.compile(r"\(\s*title\s*:([^)]*)\)", re.IGNORECASE)
# The protocol's own tags around documents (``<observation>``, ``<information>``): sentence breaks.
_TAG = re.compile(r"</?[A-Za-z_|]+>")


def normalize_span(text: str) -> str:
    """``text`` case-folded, with punctuation and symbols read as spaces, whitespace collapsed."""
    chars = [" " if unicodedata.category(ch)[0] in "PSZC" else ch for ch in unicodedata.normalize("NFKC", text).casefold()]
    return " ".join("".join(chars).split())


@dataclass(frozen=True)
class GroundedEvidence:
    """What :func:`ground_evidence` kept of an evidence text.

    - ``text``: the grounded pieces, in the agent's wording, joined by spaces (what a
      reader reads); empty when nothing is grounded or the evidence is over budget.
    - ``pieces``, ``grounded``: how many pieces the evidence had and how many were grounded.
    - ``words``: words of the grounded pieces; ``over_budget``: ``words > max_words``.
    """

    text: str
    pieces: int
    grounded: int
    words: int
    over_budget: bool

    @property
    def fraction(self) -> float:
        """Share of the evidence's pieces that were grounded (0 when it had none)."""
        return self.grounded / self.pieces if self.pieces else 0.0


def evidence_pieces(evidence: str) -> list[str]:
    """The evidence cut into sentence pieces (see the module docstring); a piece that is
    only a title marker is dropped."""
    pieces = (p.strip() for p in _PIECE_END.split(evidence))
    return [p for p in pieces if normalize_span(_TITLE_MARK.sub("", p))]


def observed_documents(observation: str) -> list[tuple[str, str]]:
    """``(title, text)`` of each document of an observation, both normalized: a document
    starts at a ``(Title: …)`` marker; text before the first marker (or a whole summary
    without markers) is a document without a title (``""``)."""
    parts = _DOC_TITLE.split(_TAG.sub("\n", observation))
    docs = [("", parts[0])] + list(zip(parts[1::2], parts[2::2]))
    return [(normalize_span(title), text) for title, text in docs if normalize_span(text)]


def ground_evidence(
    evidence: str,
    observations: Iterable[str],
    *,
    max_words: int = DEFAULT_MAX_EVIDENCE_WORDS,
    min_span_words: int = DEFAULT_MIN_SPAN_WORDS,
) -> GroundedEvidence:
    """The part of ``evidence`` that quotes ``observations`` (the texts the env showed).

    Raises :class:`~searchgym.error.ConfigError` for a non-positive ``max_words`` or
    ``min_span_words``.
    """
    for name, value in (("max_words", max_words), ("min_span_words", min_span_words)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"ground_evidence expects {name} to be a positive int, got {value!r}.")
    docs = [(title, f" {normalize_span(text)} ", text) for o in observations for title, text in observed_documents(o)]
    sentences = {normalize_span(s) for _, _, text in docs for s in _SENTENCE_END.split(text)}
    sentences.discard("")
    pieces = evidence_pieces(evidence)
    kept: list[str] = []
    seen: set[str] = set()
    for piece in pieces:
        mark = _TITLE_MARK.match(piece)
        title = normalize_span(mark.group(1)) if mark else None
        norm = normalize_span(piece[mark.end():] if mark else piece)
        if (title, norm) in seen:
            continue
        long_enough = len(norm.split()) >= min_span_words or norm in sentences
        if long_enough and any(f" {norm} " in body and title in (None, doc_title) for doc_title, body, _ in docs):
            seen.add((title, norm))
            kept.append(piece)
    words = sum(len(p.split()) for p in kept)
    over = words > max_words
    return GroundedEvidence("" if over else " ".join(kept), len(pieces), len(kept), words, over)
