"""Summarizers condense every retrieval before the agent sees it (RECON's slot).

``Summarizer.summarize(question, query, hits) -> str`` returns the text that the
protocol wraps in its information tags. The identity summarizer is a pass-through: the
protocol renders the documents itself, keeping its own numbering and format.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from searchgym.corpora import store
from searchgym.corpora.types import Hit
from searchgym.envs.components.lm_summarizer import LLMSummarizer
from searchgym.envs.components.summarizer_base import Summarizer
from searchgym.error import ConfigError, UnknownNameError

_WORD = re.compile(r"\w+", re.UNICODE)
# Small and fixed on purpose: the score only needs to ignore glue words.
_STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or but is was were are be been being as "
    "that this these those it its into than then which who whom whose what when where why how "
    "did does do has have had not no".split()
)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (the passage chunker's rule: initials and abbreviations do not end one)."""
    return [" ".join(words) for words in store.split_sentences(text)]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


class IdentitySummarizer(Summarizer):
    """No condensation: the agent sees the documents as the protocol renders them."""

    name = "identity"
    passthrough = True

    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        return "\n".join(f"Doc {i}(Title: {h.passage.title}) {h.passage.text}" for i, h in enumerate(hits, 1))


class ExtractiveSummarizer(Summarizer):
    """Keeps, from every document, the sentences sharing the most content words with the
    query and the question, in their original order.

    A sentence's score is its number of distinct content words that occur in the query
    (weight 2) or the question (weight 1), not counting the words of the document's title
    (they name the document, not the fact asked for); ties go to the earlier sentence.
    Documents with no matching sentence keep their first sentence, so every document stays
    represented.
    """

    name = "extractive"

    def __init__(self, sentences_per_doc: int = 2):
        if not isinstance(sentences_per_doc, int) or sentences_per_doc < 1:
            raise ConfigError(
                f"ExtractiveSummarizer expects sentences_per_doc to be a positive integer, got {sentences_per_doc!r}."
            )
        self.sentences_per_doc = sentences_per_doc

    def condense(self, question: str, query: str, text: str, title: str = "") -> str:
        sentences = split_sentences(text)
        if len(sentences) <= self.sentences_per_doc:
            return " ".join(sentences)
        title_words = content_words(title)
        q_words, question_words = content_words(query) - title_words, content_words(question) - title_words
        scores = []
        for i, s in enumerate(sentences):
            words = content_words(s)
            scores.append((2 * len(words & q_words) + len(words & question_words), -i))
        ranked = sorted(range(len(sentences)), key=lambda i: scores[i], reverse=True)
        keep = [i for i in ranked[: self.sentences_per_doc] if scores[i][0] > 0] or [0]
        return " ".join(sentences[i] for i in sorted(keep))

    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        return "\n".join(
            f"Doc {i}(Title: {h.passage.title}) {self.condense(question, query, h.passage.text, h.passage.title)}"
            for i, h in enumerate(hits, 1)
        )


#: Summarizer name -> constructor. ``llm`` is RECON's (searchgym.envs.components.lm_summarizer).
SUMMARIZERS: dict[str, Callable[..., Summarizer]] = {
    "identity": IdentitySummarizer,
    "extractive": ExtractiveSummarizer,
    "llm": LLMSummarizer,
}


def make_summarizer(spec: str | Summarizer | None, **options) -> Summarizer:
    """A summarizer from a name in :data:`SUMMARIZERS`, an instance, or None (identity)."""
    if spec is None:
        return IdentitySummarizer()
    if isinstance(spec, Summarizer):
        return spec
    if not isinstance(spec, str) or spec not in SUMMARIZERS:
        raise UnknownNameError("summarizer", spec, SUMMARIZERS)
    return SUMMARIZERS[spec](**options)
