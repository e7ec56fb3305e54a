"""Passages, QA datasets, built-in data and retrievers."""

from searchgym.corpora.types import Corpus, Hit, Passage, QAExample, Retriever

__all__ = ["Corpus", "Hit", "Passage", "QAExample", "Retriever"]
