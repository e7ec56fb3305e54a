"""Passages, QA datasets, built-in data and retrievers."""

from searchgym.corpora.registry import CORPORA, DATASETS, load_corpus, load_dataset
from searchgym.corpora.retrievers import RETRIEVERS, make_retriever
from searchgym.corpora.types import Corpus, Hit, Passage, QAExample, Retriever

__all__ = [
    "CORPORA", "DATASETS", "RETRIEVERS", "Corpus", "Hit", "Passage", "QAExample", "Retriever",
    "load_corpus", "load_dataset", "make_retriever",
]
