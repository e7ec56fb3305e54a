"""Index folders: built once (`searchgym index`, sharded BM25 builds in worker processes),
mapped back by make_retriever / gym.make / `searchgym serve --index`, refused for another corpus."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import searchgym  # noqa: F401 -- registers the envs
from searchgym.cli import main
from searchgym.corpora import load_corpus
from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.indexes import build_index, index_meta, is_index_folder, load_index
from searchgym.corpora.mapped import store_folder
from searchgym.corpora.postings import HashedVocab, build_postings
from searchgym.corpora.registry import DeferredCorpus
from searchgym.corpora.retrievers import clear_retriever_cache, make_retriever
from searchgym.corpora.store import write_passages
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError, NoIndexError, SearchGymError

WORLD = {"seed": 7, "num_passages": 3000}


@pytest.fixture(scope="module")
def world():
    return load_corpus("synthwiki", **WORLD)


@pytest.fixture(scope="module")
def corpus_file(world, tmp_path_factory):
    return write_passages(world, tmp_path_factory.mktemp("corpus") / "world.jsonl")


@pytest.fixture(scope="module")
def queries(world):
    """A few thousand queries: words drawn from passages, titles, and misses."""
    rng = random.Random(0)
    out = []
    for _ in range(2000):
        words = world[rng.randrange(len(world))].text.split()
        start = rng.randrange(max(1, len(words) - 4))
        out.append(" ".join(words[start : start + rng.randint(1, 5)]))
    return out + [p.title for p in world[:500]] + ["", "the of and", "zzzunknownword"]


def test_sharded_parallel_build_equals_the_one_pass_build(world, corpus_file, queries):
    mapped = load_corpus(corpus_file)
    one = BM25Retriever(world)  # in memory, one shard
    sharded = BM25Retriever(mapped, workers=2, shard_size=400)  # eight shards over two worker processes
    for name in ("_data", "_indices", "_indptr"):
        np.testing.assert_array_equal(getattr(one, name), getattr(sharded, name))
    assert one._vocab == sharded._vocab
    for k in (1, 3, 10):
        ours, theirs = one.search(queries, k), sharded.search(queries, k)
        assert [[(h.passage, h.score) for h in row] for row in ours] == [[(h.passage, h.score) for h in row] for row in theirs]


def test_saved_index_is_memory_mapped_and_answers_the_same(world, queries, tmp_path):
    built = BM25Retriever.build(world, tmp_path / "ix", shard_size=1000)
    assert isinstance(built._data.base, np.memmap) or isinstance(built._data, np.memmap)
    assert isinstance(built._vocab, HashedVocab) and len(built._vocab) == len(BM25Retriever(world)._vocab)
    assert built.search(queries, 5) == BM25Retriever(world).search(queries, 5)
    meta = index_meta(tmp_path / "ix")
    assert meta["kind"] == "bm25" and meta["num_passages"] == 3000 and meta["corpus_fingerprint"] == world.fingerprint
    assert meta["format_version"] == 2 and meta["num_postings"] == len(built._data)
    assert sorted(meta["files"]) == ["block_last.npy", "block_max.npy", "block_ptr.npy", "data.npy", "indices.npy", "indptr.npy",
                                     "term_max.npy", "vocab_hash.npy", "vocab_ids.npy"]
    assert not list((tmp_path / "ix").glob("searchgym-bm25-*"))  # the build's scratch folder is gone
    import pickle

    data = pickle.dumps(built)  # a mapped index pickles as its folder, not its arrays
    assert len(data) < 5_000 + len(pickle.dumps(world))
    assert pickle.loads(data).search(queries[:100], 5) == built.search(queries[:100], 5)


def test_version_one_folders_still_load(world, queries, tmp_path):
    """Folders written before the arrays format: bm25s's own index beside version-1 metadata."""
    import bm25s

    from searchgym.corpora.postings import passage_text
    from searchgym.corpora.tokenize import STOPWORDS, Analyzer

    vocab: dict[str, int] = {}
    terms, lengths = Analyzer().index_terms([passage_text(p) for p in world], vocab)
    old = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    old.index(([part.tolist() for part in np.split(terms, np.cumsum(lengths)[:-1])], vocab), create_empty_token=False, show_progress=False)
    old.save(tmp_path / "bm25s", show_progress=False)
    meta = {"format_version": 1, "backend": "bm25s", "method": "lucene", "k1": 0.9, "b": 0.4, "delta": 0.5, "corpus_name": world.name,
            "corpus_fingerprint": world.fingerprint, "num_passages": len(world), "empty_vocabulary": False,
            "analyzer": {"language": "english", "stopwords": sorted(STOPWORDS)}}
    (tmp_path / "searchgym_bm25.json").write_text(json.dumps(meta))
    assert make_retriever(str(tmp_path), world).search(queries, 5) == BM25Retriever(world).search(queries, 5)


def test_a_term_hash_collision_keeps_the_terms(world, tmp_path, monkeypatch):
    from searchgym.corpora import postings

    postings_ = build_postings(world, k1=0.9, b=0.4, delta=0.5, method="lucene")
    monkeypatch.setattr(postings, "stable_hash", lambda term: 7)  # every term collides
    postings.save_postings(postings_, tmp_path)
    assert (tmp_path / "vocab.txt").is_file()
    loaded = postings.load_postings(tmp_path, len(world))
    assert dict(loaded.vocab) == dict(postings_.vocab)


def test_ties_come_in_corpus_order_also_at_the_kth_place():
    same = "The lighthouse keeper counted ships."
    corpus = Corpus([Passage(str(i), "", same if i % 2 else f"other words {i}") for i in range(40)])
    retriever = BM25Retriever(corpus)
    for k in (1, 3, 7, 20):
        assert [h.passage.id for h in retriever.search(["lighthouse keeper"], k)[0]] == [str(i) for i in range(1, 40, 2)][:k]


def test_a_failing_worker_names_the_shard_and_its_error(world, tmp_path):
    path = write_passages(world, tmp_path / "gone.jsonl")
    mapped = load_corpus(path)
    path.unlink()  # the workers open the corpus by its path
    with pytest.raises(SearchGymError, match=r"Tokenizing passages (0-1500|1500-3000) of .*gone.jsonl failed in a worker process \(exit 1\).*No such passage file"):
        BM25Retriever(mapped, workers=2, shard_size=1500)


# ------------------------------------------------------------------------ index folders


def test_cli_builds_a_folder_that_every_entry_point_loads(corpus_file, world, queries, tmp_path, capsys):
    out = tmp_path / "wiki-bm25"
    assert main(["index", "--corpus", str(corpus_file), "--out", str(out), "--workers", "2", "--shard-size", "1000"]) == 0
    printed = capsys.readouterr().out
    assert f"searchgym index: bm25 over world (3,000 passages, fingerprint {world.fingerprint}) in {out}" in printed
    assert f"Serve it: searchgym serve --index {out}\n" in printed
    assert is_index_folder(out) and index_meta(out)["corpus_path"] == str(corpus_file.resolve())
    expected = BM25Retriever(world).search(queries[:300], 3)
    assert load_index(out).search(queries[:300], 3) == expected  # the corpus is the file the index records
    assert make_retriever(str(out), load_corpus(corpus_file)).search(queries[:300], 3) == expected
    env = gym.make("searchgym/SearchR1-v0", corpus=str(corpus_file), dataset="synthwiki", dataset_options=WORLD, retriever=str(out))
    env.reset(seed=0)
    _, _, _, _, info = env.step("<search> first settled </search>")
    assert info["retrieved_ids"] == [h.passage.id for h in BM25Retriever(world).search(["first settled"], 3)[0]]


def test_an_index_for_another_corpus_is_refused(corpus_file, tmp_path):
    out = build_index(load_corpus(corpus_file), "bm25", tmp_path / "ix").corpus
    other = load_corpus("synthwiki", seed=7, num_passages=400)
    with pytest.raises(ConfigError) as e:
        make_retriever(str(tmp_path / "ix"), other)
    assert str(e.value) == (
        f"BM25 index at {str(tmp_path / 'ix')!r} was built for corpus 'world' with fingerprint {out.fingerprint} (3000 passages), "
        f"got corpus 'synthwiki-s7-n400' with fingerprint {other.fingerprint} (400 passages). Load it with the corpus it was "
        "built from, or rebuild: BM25Retriever(corpus).save(path)."
    )


def test_out_must_be_new_and_a_failed_build_leaves_nothing(corpus_file, tmp_path, capsys):
    out = tmp_path / "ix"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["index", "--corpus", str(corpus_file), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"searchgym index: error: searchgym index expects --out to be a new or empty folder, got {str(out)!r}, which holds "
        "files; pass --overwrite to replace it, or choose another folder.\n"
    )
    assert (out / "notes.txt").read_text() == "mine"
    with pytest.raises(ConfigError, match="BM25Retriever expects k1 to be a non-negative number, got -1"):
        build_index(load_corpus(corpus_file), "bm25", tmp_path / "failed", k1=-1)
    assert not (tmp_path / "failed").exists() and not list(tmp_path.glob(".failed.*"))
    assert main(["index", "--corpus", str(corpus_file), "--out", str(out), "--overwrite"]) == 0
    assert not (out / "notes.txt").exists() and is_index_folder(out)


def test_unknown_retriever_and_missing_folder(tmp_path, capsys):
    assert main(["index", "--corpus", "synthwiki", "--retriever", "bm52", "--out", str(tmp_path / "x")]) == 2
    assert "Unknown retriever to index 'bm52'" in capsys.readouterr().err
    with pytest.raises(NoIndexError) as e:
        load_index(tmp_path)
    assert str(e.value) == (
        f"{str(tmp_path)!r} holds no searchgym index (it is empty): an interrupted build? "
        f"Run searchgym index --corpus FILE --out {tmp_path}."
    )
    assert isinstance(e.value, ConfigError)  # what callers caught before


def test_bm25_over_a_corpus_file_is_built_once_beside_its_store(corpus_file, queries):
    clear_retriever_cache()
    first = make_retriever("bm25", load_corpus(corpus_file))
    folders = list(store_folder(corpus_file).glob("bm25-*"))
    assert len(folders) == 1 and is_index_folder(folders[0])
    stamp = (folders[0] / "data.npy").stat().st_mtime_ns
    # Another process maps it instead of building it again.
    code = (f"from searchgym.corpora import load_corpus, make_retriever; r = make_retriever('bm25', load_corpus({str(corpus_file)!r})); "
            "print(type(r._data.base).__name__, r.search(['first settled'], 1)[0][0].passage.id)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["memmap", first.search(["first settled"], 1)[0][0].passage.id]
    assert (folders[0] / "data.npy").stat().st_mtime_ns == stamp
    make_retriever("bm25", load_corpus(corpus_file), k1=1.2)
    assert len(list(store_folder(corpus_file).glob("bm25-*"))) == 2  # other parameters, another index
    clear_retriever_cache()


def test_an_env_over_a_server_never_opens_its_corpus(tmp_path):
    env = gym.make("searchgym/SearchR1-v0", corpus=str(tmp_path / "not-here.jsonl"), dataset="synthwiki",
                   retriever="http://127.0.0.1:9/retrieve")
    corpus = env.unwrapped.corpus
    assert isinstance(corpus, DeferredCorpus) and not corpus.opened
    env.reset(seed=0)
    assert repr(corpus) == f"Corpus({str(tmp_path / 'not-here.jsonl')!r}, not opened yet)"
    with pytest.raises(FileNotFoundError, match="No such passage file"):
        len(corpus)
    deferred = DeferredCorpus("synthwiki", {"seed": 7, "num_passages": 400})
    assert len(deferred) == 400 and deferred.opened and deferred.name == "synthwiki-s7-n400"
    import pickle

    assert list(pickle.loads(pickle.dumps(deferred))) == list(deferred)
