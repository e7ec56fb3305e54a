"""Passages, QA datasets, built-in data and retrievers."""

from searchgym.corpora.registry import CORPORA, DATASETS, load_corpus, load_dataset
from searchgym.corpora.retrievers import RETRIEVERS, check_retriever, make_retriever, register_retriever, retriever_names
from searchgym.corpora.types import Corpus, Hit, Passage, QAExample, Retriever, SearchContext, SearchEngine, is_search_engine

__all__ = [
    "CORPORA", "DATASETS", "RETRIEVERS", "Corpus", "Hit", "Passage", "QAExample", "Retriever", "SearchContext",
    "SearchEngine", "check_retriever", "is_search_engine", "load_corpus", "load_dataset", "make_retriever",
    "register_retriever", "retriever_names",
]
