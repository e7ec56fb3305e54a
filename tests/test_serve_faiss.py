"""Serving an index built elsewhere: a faiss index file written with faiss.write_index over
a Search-R1-format corpus file, loaded unchanged in-process and by `searchgym serve`;
query / passage prefixes (e5's)."""

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from searchgym.corpora.dense import DenseRetriever, default_prefixes  # noqa: E402
from searchgym.corpora.http import HTTPRetriever  # noqa: E402
from searchgym.corpora.registry import load_corpus  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from test_serve import free_port  # noqa: E402

QUERIES = ["when was the city first settled", "a company that makes grain", "the river and the harbour"]


class Encoder:
    """all-MiniLM-L6-v2 through sentence-transformers itself, normalized (the index builder)."""

    def __init__(self):
        from sentence_transformers import SentenceTransformer

        from searchgym.corpora.dense import DEFAULT_DENSE_MODEL, _resolve_model

        self.model = SentenceTransformer(_resolve_model(DEFAULT_DENSE_MODEL), device="cpu")

    def encode(self, texts):
        return np.asarray(self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32)


@pytest.fixture(scope="module")
def prebuilt(tmp_path_factory):
    """A Search-R1 corpus file and its flat inner-product index, built as their scripts do
    (every ``contents`` encoded, normalized, added in file order)."""
    folder = tmp_path_factory.mktemp("prebuilt")
    passages = list(load_corpus("synthwiki", seed=3, num_passages=200))
    corpus_file = folder / "corpus.jsonl"
    corpus_file.write_text("".join(json.dumps({"id": p.id, "contents": p.contents}) + "\n" for p in passages), encoding="utf-8")
    corpus = load_corpus(str(corpus_file))
    encoder = Encoder()
    vectors = encoder.encode([p.contents for p in passages])
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    index_file = folder / "minilm_Flat.index"
    faiss.write_index(index, str(index_file))
    return corpus_file, corpus, index_file, vectors, encoder


def brute_force(vectors, query_vectors, k):
    return [list(np.argsort(-(vectors @ q), kind="stable")[:k]) for q in query_vectors]


def test_a_faiss_file_is_served_unchanged_in_process(prebuilt):
    corpus_file, corpus, index_file, vectors, encoder = prebuilt
    retriever = DenseRetriever.from_faiss_file(index_file, corpus)
    assert (retriever.query_prefix, retriever.index_type, retriever.index_file) == ("", "flat", str(index_file))
    hits = retriever.search(QUERIES, 5)
    expected = brute_force(vectors, encoder.encode(QUERIES), 5)
    assert [[h.passage.id for h in row] for row in hits] == [[corpus[int(i)].id for i in row] for row in expected]


def test_searchgym_serve_loads_the_file_and_answers_as_in_process(prebuilt):
    corpus_file, corpus, index_file, _, _ = prebuilt
    port = free_port()
    argv = [str(Path(sys.executable).with_name("searchgym")), "serve", "--corpus", str(corpus_file), "--retriever", "dense",
            "--index", str(index_file), "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("searchgym serve: dense (DenseRetriever) over corpus (200 passages"), proc.stderr.read()[-2000:]
        url = f"http://127.0.0.1:{port}"
        info = httpx.get(url + "/info").json()
        assert info["index_file"] == str(index_file)
        assert info["parameters"]["query_prefix"] == "" and info["parameters"]["index_type"] == "flat"
        assert info["parameters"]["model"] == "all-MiniLM-L6-v2"
        truth = {k: info["parameters"].get(k) for k in ("index_description", "dimension", "nbytes", "index_storage", "nprobe")}
        assert truth == {"index_description": "IndexFlatIP", "dimension": 384, "nbytes": index_file.stat().st_size,
                         "index_storage": "mmap", "nprobe": None}  # a flat index has no lists to probe
        remote = HTTPRetriever(url + "/retrieve").search(QUERIES, 4)
        local = DenseRetriever.from_faiss_file(index_file, corpus).search(QUERIES, 4)
        assert [[h.passage for h in row] for row in remote] == [[h.passage for h in row] for row in local]
        for a, b in zip(remote, local):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    done = subprocess.run([*argv[:5], "bm25", *argv[6:8], "--port", str(free_port())], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--index serves a faiss index with a dense encoder; pass --retriever dense" in done.stderr


def test_files_that_do_not_fit_the_corpus_or_encoder_are_refused(prebuilt, tmp_path):
    corpus_file, corpus, index_file, vectors, _ = prebuilt
    small = load_corpus("synthwiki", seed=3, num_passages=100)
    with pytest.raises(ConfigError, match="holds 200 vectors but corpus .* has 100 passages; row i of the index must be passage i"):
        DenseRetriever.from_faiss_file(index_file, small)
    narrow = faiss.IndexFlatIP(8)
    narrow.add(np.zeros((200, 8), dtype=np.float32))
    faiss.write_index(narrow, str(tmp_path / "narrow.index"))
    with pytest.raises(ConfigError, match="holds 8-dimensional vectors but the encoder .* writes 384"):
        DenseRetriever.from_faiss_file(tmp_path / "narrow.index", corpus)
    (tmp_path / "junk.index").write_bytes(b"not an index")
    with pytest.raises(ConfigError, match="is not a faiss index file faiss can read"):
        DenseRetriever.from_faiss_file(tmp_path / "junk.index", corpus)
    with pytest.raises(ConfigError, match="no such file"):
        DenseRetriever.from_faiss_file(tmp_path / "missing.index", corpus)


def test_e5_models_get_their_query_and_passage_prefixes(prebuilt):
    assert default_prefixes("intfloat/e5-base-v2") == ("query: ", "passage: ")
    assert default_prefixes("/models/e5-large-v2") == ("query: ", "passage: ")
    assert default_prefixes("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    assert default_prefixes("all-MiniLM-L6-v2") == ("", "")
    _, corpus, index_file, vectors, encoder = prebuilt
    prefixed = DenseRetriever.from_faiss_file(index_file, corpus, query_prefix="query: ")
    hits = prefixed.search(QUERIES, 5)
    expected = brute_force(vectors, encoder.encode([f"query: {q}" for q in QUERIES]), 5)
    assert [[h.passage.id for h in row] for row in hits] == [[corpus[int(i)].id for i in row] for row in expected]
    assert not np.allclose(encoder.encode(["query: " + QUERIES[0]]), encoder.encode(QUERIES[:1]))
    with pytest.raises(ConfigError, match="expects query_prefix to be a string or None"):
        DenseRetriever.from_faiss_file(index_file, corpus, query_prefix=3)


def test_the_dense_retriever_round_trips_through_the_server():
    from searchgym.corpora.retrievers import make_retriever
    from test_serve import Server

    server = Server("--retriever", "dense")
    try:
        assert server.line.startswith("searchgym serve: dense (DenseRetriever) over synthwiki-s7-n400 (400 passages")
        remote = HTTPRetriever(server.url + "/retrieve").search(QUERIES, 5)
        local = make_retriever("dense", load_corpus("synthwiki", seed=7, num_passages=400)).search(QUERIES, 5)
        assert [[h.passage for h in row] for row in remote] == [[h.passage for h in row] for row in local]
        for a, b in zip(remote, local):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
    finally:
        server.stop()
