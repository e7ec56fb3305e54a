"""Passages, QA datasets, built-in data and retrievers."""

from searchgym.corpora.registry import CORPORA, DATASETS, load_corpus, load_dataset
from searchgym.corpora.types import Corpus, Hit, Passage, QAExample, Retriever

__all__ = ["CORPORA", "DATASETS", "Corpus", "Hit", "Passage", "QAExample", "Retriever", "load_corpus", "load_dataset"]
