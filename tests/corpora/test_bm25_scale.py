"""BM25 at scale: the build's arrays stay byte for byte what they were, the ranking's tie
settling against a brute-force ranking, loading an index into memory, and the one reader of
index metadata."""

from __future__ import annotations

import hashlib
import json
import pickle
import random
import re

import numpy as np
import pytest

from searchgym.cli import main as cli_main
from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.indexes import index_meta, load_index
from searchgym.corpora.postings import build_postings, save_postings
from searchgym.corpora.tokenize import _ASCII_WORDS, _WORD, Analyzer
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError, DataFormatError


def mixed_corpus(n: int = 600, seed: int = 7) -> Corpus:
    """Passages mixing ASCII and non-ASCII text, capitals, stopwords, digits, ``_``, NUL and
    the characters whose lowercase changes a word's length or its last letter."""
    rng = random.Random(seed)
    words = ["The", "the", "AND", "of", "Paris", "PARIS", "paris's", "running", "Runner", "café", "Café-crème",
             "İstanbul", "ΟΔΟΣ", "naïve", "1901", "snake_case", "x\x00y", "don't", "co-op", "Über", "straße", "日本語",
             "e-mail", "U.S.A.", "organisations", "Organising", "a1b2", "__init__", "tab\there", "new\nline"]
    words += [f"w{i}" for i in range(300)] + [f"Word{i}" for i in range(100)]
    passages = []
    for i in range(n):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.5:  # an ASCII-only passage
            text = text.encode("ascii", "ignore").decode()
        passages.append(Passage(str(i), rng.choice(words[4:12]).title(), text + rng.choice([".", ",", "!", ""])))
    return Corpus(passages, name="mixed")


# SHA-256 of the arrays the build wrote for mixed_corpus() before the tokenizer's ASCII path,
# the sort of each shard's postings by one key and the merge's C-level vocabulary (commit db500ef).
RECORDED = {
    "data": "bdb026fa5e4458ef94ff1f252239df0d02673af8c823c06ed28b22a4821d93fc",
    "indices": "1d2a9cc37a8696f77d21ab28e7780f942413317beb5ac3ed25b4586b1ff0a0ff",
    "indptr": "d97db394bd63eccbb04361d083cbde8dc26e04b22c38d07b5b7f084e4735726a",
    "vocab_hash": "ba5a93732aede6fa98bdb8bc43b885e568e28fd3c23c0e0e657f4e6058f54731",
    "vocab_ids": "d362c3b0489b2c850fcfb674174c190c6d9d5c97b00f24450f02563fe4d341f8",
}


def test_build_writes_the_recorded_arrays_byte_for_byte(tmp_path):
    corpus = mixed_corpus()
    assert 50 < sum(not (p.title + p.text).isascii() for p in corpus) < 550  # both tokenizer paths run
    postings = build_postings(corpus, k1=0.9, b=0.4, delta=0.5, method="lucene", shard_size=150)  # four shards merged
    save_postings(postings, tmp_path)
    digests = {name: hashlib.sha256(np.load(tmp_path / f"{name}.npy").tobytes()).hexdigest() for name in RECORDED}
    assert digests == RECORDED


def test_ascii_fast_path_cuts_the_words_the_regex_cuts():
    rng = random.Random(3)
    alphabet = [chr(c) for c in range(128)]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        assert text.translate(_ASCII_WORDS).split() == _WORD.findall(text.lower())


def test_index_terms_equal_the_per_word_reference_on_mixed_text():
    texts = [f"{p.title}\n{p.text}" for p in mixed_corpus(200)]
    analyzer = Analyzer()
    vocab: dict[str, int] = {}
    terms, lengths = analyzer.index_terms(texts, vocab)
    # The reference: every \w+ run lowercased on its own, stopwords out, stemmed; ids by first occurrence.
    stemmer = Analyzer()._stemmer
    expected_vocab: dict[str, int] = {}
    expected = []
    for text in texts:
        for word in re.findall(r"\w+", text):
            low = word.lower()
            if low not in analyzer.stopwords:
                expected.append(expected_vocab.setdefault(stemmer.stemWord(low), len(expected_vocab)))
    assert vocab == expected_vocab
    assert terms.tolist() == expected and int(lengths.sum()) == len(expected)


# ---------------------------------------------------------------------- ties at the k-th place
def brute_force(retriever: BM25Retriever, query: str, k: int) -> list[tuple[str, float]]:
    """Every passage scored, ranked by score then corpus order, positive scores only."""
    ids = retriever.analyzer.token_ids([query], retriever._vocab, grow=False)[0]
    scores = np.zeros(len(retriever.corpus), dtype=np.float32)
    for t in ids:
        a, b = retriever._indptr[t], retriever._indptr[t + 1]
        scores[retriever._indices[a:b]] += retriever._data[a:b]
    order = np.lexsort((np.arange(len(scores)), -scores))
    return [(retriever.corpus[int(d)].id, float(scores[d])) for d in order[:k] if scores[d] > 0]


@pytest.fixture(scope="module")
def tied() -> BM25Retriever:
    """Passages built from few templates, so that many score exactly alike; "common" is in
    nine of ten passages (a query with it ranks every passage), "rare" in one of ten."""
    rng = random.Random(11)
    templates = ["alpha beta", "alpha gamma", "beta gamma delta", "alpha", "gamma delta"]
    passages = []
    for i in range(400):
        words = rng.choice(templates).split() + (["common"] if i % 10 else []) + (["rare"] if i % 10 == 3 else [])
        passages.append(Passage(str(i), "", " ".join(words)))
    return BM25Retriever(Corpus(passages, name="tied"), n_threads=1)


@pytest.mark.parametrize("query", ["alpha", "common", "alpha common", "beta gamma", "rare", "rare alpha", "delta common rare",
                                   "alpha alpha beta", "zzz alpha"])
@pytest.mark.parametrize("k", [1, 2, 3, 7, 50, 399, 400, 1000])
def test_ranking_with_ties_equals_brute_force(tied, query, k):
    hits = tied.search([query], k)[0]
    assert [(h.passage.id, h.score) for h in hits] == brute_force(tied, query, k)


def test_ranking_without_ties_equals_brute_force():
    rng = random.Random(5)
    vocabulary = [f"t{i}" for i in range(60)]
    passages = [Passage(str(i), "", " ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 30)))) for i in range(300)]
    retriever = BM25Retriever(Corpus(passages, name="random"), n_threads=1)
    for _ in range(200):
        query = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 5)))
        k = rng.choice([1, 3, 10, 100])
        assert [(h.passage.id, h.score) for h in retriever.search([query], k)[0]] == brute_force(retriever, query, k)


# ---------------------------------------------------------------------- in memory
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    corpus = mixed_corpus(300)
    folder = tmp_path_factory.mktemp("ix") / "bm25"
    BM25Retriever.build(corpus, folder, shard_size=100)
    return corpus, folder


QUERIES = ["Paris running", "café crème", "w7 w8 w9", "Word3 the", "ΟΔΟΣ", "", "of the"]


def test_in_memory_load_answers_as_the_mapped_one(saved):
    corpus, folder = saved
    mapped = BM25Retriever.load(folder, corpus)
    loaded = BM25Retriever.load(folder, corpus, in_memory=True)
    index = loaded._index
    assert isinstance(mapped._index.data, np.memmap) and not mapped.in_memory
    assert loaded.in_memory and not any(isinstance(a, np.memmap) for a in (index.data, index.indices, index.indptr))
    assert loaded.search(QUERIES, 5) == mapped.search(QUERIES, 5)
    clone = pickle.loads(pickle.dumps(loaded))  # the other process reads the folder into its memory too
    assert clone.in_memory and not isinstance(clone._index.data, np.memmap)
    assert clone.search(QUERIES, 5) == mapped.search(QUERIES, 5)


def test_in_memory_through_load_index(saved):
    corpus, folder = saved
    retriever = load_index(folder, corpus, in_memory=True)
    assert retriever.in_memory and retriever.search(QUERIES, 3) == BM25Retriever.load(folder, corpus).search(QUERIES, 3)


def test_in_memory_must_be_a_bool(saved):
    corpus, folder = saved
    with pytest.raises(ConfigError, match=r"^BM25Retriever.load expects in_memory to be True or False, got 'yes'\.$"):
        BM25Retriever.load(folder, corpus, in_memory="yes")


def test_serve_in_memory_needs_an_index_folder(capsys):
    assert cli_main(["serve", "--in-memory", "--port", "0"]) == 2  # before any corpus loads or port opens
    assert capsys.readouterr().err == (
        "searchgym serve: error: searchgym serve --in-memory reads a BM25 index folder into memory; pass --index DIR "
        "(a folder built by `searchgym index`), got --index None.\n"
    )


# ---------------------------------------------------------------------- metadata
def test_read_meta_is_index_meta_for_a_bm25_folder(saved):
    _, folder = saved
    meta = BM25Retriever.read_meta(folder)
    assert meta == index_meta(folder) and meta["kind"] == "bm25" and meta["backend"] == "bm25s"


def test_read_meta_errors(tmp_path):
    (tmp_path / "searchgym_bm25.json").write_text("{not json")
    with pytest.raises(DataFormatError, match="invalid JSON"):
        BM25Retriever.read_meta(tmp_path)
    (tmp_path / "searchgym_bm25.json").write_text(json.dumps({"backend": "bm25s", "format_version": 2}))
    with pytest.raises(DataFormatError, match="no corpus_fingerprint in it"):
        BM25Retriever.read_meta(tmp_path)
    (tmp_path / "searchgym_bm25.json").write_text(json.dumps({"backend": "bm25s", "corpus_fingerprint": "x", "format_version": 9}))
    with pytest.raises(ConfigError, match=r"has format version 9, expected one of \[1, 2\]; rebuild it"):
        BM25Retriever.read_meta(tmp_path)
