"""Dynamic pruning (MaxScore) returns exhaustive scoring's top k exactly: the same passages,
the same float32 scores bit for bit, the same order (ties in corpus order), on thousands of
random and adversarial queries, one at a time and batched, mapped, sharded, for every BM25
variant; its term bounds are written, checksummed and verified with the index, and an index
written before them loads, is scored exhaustively and says so once."""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest

from searchgym.cli import main as cli_main
from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.index_folder import write_meta
from searchgym.corpora.postings import BLOCK_FILES
from searchgym.corpora.pruning import prune_top_k, term_maxima
from searchgym.corpora.sharded import ShardedRetriever
from searchgym.corpora.types import Corpus, Passage
from searchgym.corpora.verify import verify_storage
from searchgym.error import ConfigError, DamagedFileError

STOPWORDS = "the of and in a to was is for on as by with he at from his an were are which it that".split()
COMMON = ["river", "castle", "empire", "league", "album", "station"]  # in most passages: long lists


def zipf_corpus(n: int = 2500, seed: int = 3) -> tuple[Corpus, list[str]]:
    """``n`` passages of Zipf-drawn pseudo-words, common words in most, stopwords throughout;
    and the vocabulary (rank order)."""
    rng = np.random.default_rng(seed)
    vocabulary = COMMON + [f"w{i}q" for i in range(1500)]
    passages = []
    for i in range(n):
        words = [vocabulary[min(r - 1, len(vocabulary) - 1)] for r in rng.zipf(1.25, size=int(rng.integers(5, 60)))]
        words += list(rng.choice(STOPWORDS, size=5))
        passages.append(Passage(str(i), f"T{i % 41}", " ".join(words)))
    return Corpus(passages, name=f"zipf{n}"), vocabulary


def queries_of(vocabulary: list[str], count: int, seed: int = 0) -> list[str]:
    """Random and adversarial queries: one term, many terms, stop-word heavy, repeated terms,
    common terms only, unknown terms, empty."""
    rng = random.Random(seed)
    pick = lambda: vocabulary[min(int(rng.paretovariate(0.8)) - 1, len(vocabulary) - 1)]
    fixed = ["", "the of and", "zzz unknownword", "river", "river river river", "river castle empire league album station",
             "the river of the castle", "w5q w5q w7q", "T3", "t3 w1q", "river zzz w900q", " ".join(COMMON * 3)]
    out = list(fixed)
    while len(out) < count:
        kind = rng.randrange(6)
        if kind == 0:
            words = [pick()]
        elif kind == 1:
            words = [pick() for _ in range(rng.randint(2, 12))]
        elif kind == 2:
            words = [rng.choice(STOPWORDS) for _ in range(rng.randint(2, 6))] + [pick()]
        elif kind == 3:
            word = pick()
            words = [word] * rng.randint(2, 4) + [pick()]
        elif kind == 4:
            words = rng.sample(COMMON, rng.randint(2, 5)) + [f"T{rng.randrange(41)}"]
        else:
            words = [pick(), "nosuchword", pick()]
        rng.shuffle(words)
        out.append(" ".join(words))
    return out


def answers(retriever: BM25Retriever, queries: list[str], k: int, batched: bool = True) -> list[list[tuple[str, float]]]:
    rows = retriever.search(queries, k) if batched else [retriever.search([q], k)[0] for q in queries]
    return [[(h.passage.id, h.score) for h in row] for row in rows]


@pytest.fixture(scope="module")
def zipf():
    corpus, vocabulary = zipf_corpus()
    retriever = BM25Retriever(corpus, n_threads=2)
    retriever.prune_from = 0  # prune every query: on a corpus this small most would be scored exhaustively
    return retriever, vocabulary


def exhaustive(retriever: BM25Retriever) -> BM25Retriever:
    plain = BM25Retriever.__new__(BM25Retriever)
    plain.__setstate__(retriever.__getstate__())
    plain.pruning = False
    return plain


def test_pruned_top_k_is_exhaustive_scorings_on_thousands_of_queries_batched_and_one_at_a_time(zipf):
    retriever, vocabulary = zipf
    plain = exhaustive(retriever)
    assert retriever.prunes and not plain.prunes
    queries = queries_of(vocabulary, 700)
    for k in (1, 3, 10, 100):
        assert answers(retriever, queries, k) == answers(plain, queries, k), k
    assert answers(retriever, queries[:100], 5000) == answers(plain, queries[:100], 5000)  # more than any query matches
    assert answers(retriever, queries[:200], 3, batched=False) == answers(plain, queries[:200], 3, batched=False)
    assert answers(retriever, ["", "the of and", "zzz"], 3) == [[], [], []]
    for k in (0, -1, True, 2.0):
        for r in (retriever, plain):
            with pytest.raises(ConfigError, match="k to be a positive integer"):
                r.search(["river"], k)


def top(retriever: BM25Retriever, ids: list[int], k: int, **options) -> tuple[list[int], list[float]]:
    docs, scores = prune_top_k(ids, k, retriever._data, retriever._indices, retriever._indptr, retriever._term_max,
                               retriever._buffer(), retriever._rank_exhaustive, **{"prune_from": 0, **options})
    return np.asarray(docs).tolist(), np.asarray(scores).tolist()


def test_lists_are_skipped_and_the_answer_stays_exact_when_every_list_may_be_skipped(zipf):
    """``check_from=0`` weighs skipping before every list, long or short: the bounds and the
    rounding margins decide alone, and many lists are only looked up."""
    retriever, vocabulary = zipf
    stats: dict[str, int] = {}
    for i, query in enumerate(queries_of(vocabulary, 700, seed=1)):
        ids = retriever.analyzer.token_ids([query], retriever._vocab, grow=False)[0]
        if not ids:
            continue
        k = (1, 2, 3, 10, 50)[i % 5]
        docs, scores = retriever._rank_exhaustive(ids, k)
        assert top(retriever, ids, k, check_from=0, stats=stats) == (docs.tolist(), scores.tolist()), query
    assert stats["skipped"] > 200 and stats["added"] < 0.7 * stats["postings"], stats


def test_ties_at_the_kth_place_come_in_corpus_order_when_pruning():
    """Passages from a few templates score exactly alike; the k-th place is a tie more often
    than not."""
    rng = random.Random(11)
    templates = ["alpha beta", "alpha gamma", "beta gamma delta", "alpha", "gamma delta", "alpha beta gamma delta"]
    passages = [Passage(str(i), "", " ".join(rng.choice(templates).split() + (["common"] if i % 10 else []) * rng.randint(1, 3)))
                for i in range(600)]
    retriever = BM25Retriever(Corpus(passages, name="tied"), n_threads=1)
    retriever.prune_from = 0
    plain = exhaustive(retriever)
    queries = ["alpha", "alpha beta", "common alpha", "delta gamma common", "beta beta alpha", "alpha beta gamma delta common"]
    for k in (1, 2, 3, 7, 50, 599, 1000):
        assert answers(retriever, queries, k) == answers(plain, queries, k)
        for query in queries:
            ids = retriever.analyzer.token_ids([query], retriever._vocab, grow=False)[0]
            docs, scores = retriever._rank_exhaustive(ids, k)
            assert top(retriever, ids, k, check_from=0) == (docs.tolist(), scores.tolist())


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_every_bm25_variant_prunes_exactly(method):
    corpus, vocabulary = zipf_corpus(800, seed=5)
    retriever = BM25Retriever(corpus, method=method, n_threads=1)
    retriever.prune_from = 0
    plain = exhaustive(retriever)
    queries = queries_of(vocabulary, 300, seed=2)
    for k in (3, 10):
        assert answers(retriever, queries, k) == answers(plain, queries, k)


def test_a_term_with_a_negative_score_has_no_bound_and_its_queries_are_scored_exhaustively(zipf):
    data = np.array([0.5, 2.0, -1.0, 3.0, 0.25], dtype=np.float32)
    indptr = np.array([0, 2, 2, 4, 5])  # term 1 has no postings (a shard's range without it)
    assert term_maxima(data, indptr).tolist() == [2.0, 0.0, float("inf"), 0.25]
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 9, size=300)
    indptr = np.concatenate(([0], np.cumsum(lengths)))
    data = rng.random(int(indptr[-1])).astype(np.float32)
    reference = [float(data[a:b].max()) if b > a else 0.0 for a, b in zip(indptr[:-1], indptr[1:])]
    assert term_maxima(data, indptr, block=7).tolist() == reference  # blocks cut anywhere

    retriever, _ = zipf
    ids = retriever.analyzer.token_ids(["river castle w3q"], retriever._vocab, grow=False)[0]
    calls = []

    def plain(term_ids, k):
        calls.append(list(term_ids))
        return retriever._rank_exhaustive(term_ids, k)

    unbounded = retriever._term_max.copy()
    unbounded[ids[1]] = np.inf
    docs, scores = prune_top_k(ids, 3, retriever._data, retriever._indices, retriever._indptr, unbounded,
                               retriever._buffer(), plain, prune_from=0)
    assert calls == [ids] and docs.tolist() == retriever._rank_exhaustive(ids, 3)[0].tolist()


def test_a_saved_index_prunes_mapped_and_in_memory_and_its_shards_merge_to_the_same_top_k(zipf, tmp_path):
    retriever, vocabulary = zipf
    folder = retriever.save(tmp_path / "ix")
    meta = json.loads((folder / "searchgym_bm25.json").read_text())
    assert "term_max.npy" in meta["files"] and meta["files"]["term_max.npy"]["shape"] == [meta["num_terms"]]
    assert np.load(folder / "term_max.npy").tolist() == retriever._term_max.tolist()
    queries = queries_of(vocabulary, 400, seed=4)
    expected = {k: answers(exhaustive(retriever), queries, k) for k in (3, 10)}
    for in_memory in (False, True):
        loaded = BM25Retriever.load(folder, retriever.corpus, in_memory=in_memory)
        loaded.prune_from = 0
        assert loaded.prunes
        for k in (3, 10):
            assert answers(loaded, queries, k) == expected[k]
    shards = [BM25Retriever.load(f, retriever.corpus) for f in retriever.save_shards(tmp_path / "shards", 3)]
    for shard in shards:
        shard.prune_from = 0
    assert all(shard.prunes for shard in shards)
    # each shard bounds its own postings: no more than the whole index's bounds
    assert all((shard._term_max <= retriever._term_max).all() for shard in shards)
    merged = ShardedRetriever(shards, retriever.corpus)
    for k in (3, 10):
        assert answers(merged, queries, k) == expected[k]
    merged.close()


def test_an_index_written_before_term_bounds_loads_scored_exhaustively_said_once(zipf, tmp_path):
    retriever, vocabulary = zipf
    folder = retriever.save(tmp_path / "old")
    meta = json.loads((folder / "searchgym_bm25.json").read_text())
    del meta["meta_checksum"], meta["block_size"]
    for name in ("term_max.npy", *BLOCK_FILES):  # the block maxima came after the bounds
        del meta["files"][name]
        (folder / name).unlink()
    write_meta(folder, "searchgym_bm25.json", meta)  # as a searchgym before this change wrote it
    with pytest.warns(UserWarning) as said:
        old = BM25Retriever.load(folder, retriever.corpus)
    assert len(said) == 1 and str(said[0].message) == (
        f"BM25 index at {str(folder)!r} was written before term score bounds were (no term_max.npy): it is scored "
        "exhaustively, without dynamic pruning (same results, slower on large corpora). Rebuild it to prune: "
        f"searchgym index --corpus FILE --retriever bm25 --out {folder} --overwrite.")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per folder: a second load says nothing
        again = BM25Retriever.load(folder, retriever.corpus)
    assert not old.prunes and not again.prunes
    queries = queries_of(vocabulary, 300, seed=6)
    assert answers(old, queries, 3) == answers(retriever, queries, 3)
    assert verify_storage(folder, progress=False).parts == ["old: bm25 index, 5 files"]  # what it records, all read
    old.save(tmp_path / "resaved")  # saved again, it gets its bounds
    assert BM25Retriever.load(tmp_path / "resaved", retriever.corpus).prunes


def test_verify_reads_the_term_bounds_and_a_load_refuses_them_cut(zipf, tmp_path, capsys):
    retriever, _ = zipf
    folder = retriever.save(tmp_path / "ix")
    assert verify_storage(folder, progress=False).parts == ["ix: bm25 index, 9 files"]
    with open(folder / "term_max.npy", "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0x10]))
    with pytest.raises(DamagedFileError, match=r"term_max\.npy: checksum sum64:.*its bytes changed after it was written"):
        verify_storage(folder, progress=False)
    assert cli_main(["index", "--verify", str(folder)]) == 2
    assert "term_max.npy: checksum" in capsys.readouterr().err
    with open(folder / "term_max.npy", "r+b") as f:
        f.truncate(100)
    with pytest.raises(DamagedFileError, match=r"term_max\.npy: expected .* it was cut short"):
        BM25Retriever.load(folder, retriever.corpus)


def test_pruning_must_be_a_bool(zipf):
    retriever, _ = zipf
    with pytest.raises(ConfigError, match="BM25Retriever expects pruning to be True or False, got 'no'"):
        BM25Retriever(retriever.corpus, pruning="no")


# ---------------------------------------------------------------------- the compiled engine (issue 67)
from searchgym.corpora import blockmax  # noqa: E402

needs_numba = pytest.mark.skipif(not blockmax.available(), reason="numba is not installed (the optional extra searchgym[fast])")


def test_block_maxima_hold_each_blocks_largest_score_and_last_passage():
    data = np.array([0.5, 2.0, 1.0, 3.0, 0.25, 4.0, 0.1], dtype=np.float32)
    indices = np.array([1, 4, 7, 2, 3, 9, 0], dtype=np.int32)
    indptr = np.array([0, 5, 5, 7])  # term 1 has no postings
    bptr, bmax, blast = blockmax.block_maxima(data, indices, indptr, block=2)
    assert bptr.tolist() == [0, 3, 3, 4]
    assert bmax.tolist() == [2.0, 3.0, 0.25, 4.0]
    assert blast.tolist() == [4, 2, 3, 0]


@needs_numba
@pytest.mark.parametrize("algorithm, block, prime", [("daat", 1, 512), ("daat", 4, 0), ("daat", 64, 512), ("daat", 4, 100_000),
                                                     ("taat", 64, 512), ("taat", 64, 0)])
def test_the_compiled_engine_gives_exhaustive_scorings_top_k_at_every_block_size(zipf, algorithm, block, prime):
    """Small blocks make the block maxima decide often; priming with no passage, a few, or every
    passage of the query's lists; k from 1 to more than any query matches; both algorithms."""
    retriever, vocabulary = zipf
    compiled = BM25Retriever.__new__(BM25Retriever)
    compiled.__setstate__(retriever.__getstate__())
    assert compiled.compiled and compiled.prunes
    compiled._engine = blockmax.BlockMaxIndex(compiled._data, compiled._indices, compiled._indptr, compiled._term_max, block=block,
                                              prime=prime, num_docs=len(compiled.corpus), algorithm=algorithm, check=64)
    stats = np.zeros(4, dtype=np.int64)
    plain = exhaustive(retriever)
    queries = queries_of(vocabulary, 700, seed=4)
    for k in (1, 2, 3, 10, 100, 5000):
        assert answers(compiled, queries, k) == answers(plain, queries, k), (block, k)
    assert answers(compiled, queries[:100], 10, batched=False) == answers(plain, queries[:100], 10, batched=False)
    ids = [t for t in compiled.analyzer.token_ids(queries, compiled._vocab, grow=False) if t]
    compiled.block_max_engine().top_k_many(ids, 3, stats)
    postings = sum(int(compiled._indptr[t + 1] - compiled._indptr[t]) for q in ids for t in q)
    assert stats[3] > 0 and stats[0] < postings, stats  # lookups made, fewer candidates than postings: lists were skipped


@needs_numba
def test_the_compiled_engine_and_the_numpy_fallback_agree_on_questions_of_many_terms():
    corpus, vocabulary = zipf_corpus(3000, seed=9)
    retriever = BM25Retriever(corpus, n_threads=2)
    numpy_side = BM25Retriever.__new__(BM25Retriever)
    numpy_side.__setstate__(retriever.__getstate__())
    numpy_side.compiled = False
    numpy_side.prune_from = 0
    plain = exhaustive(retriever)
    rng = random.Random(5)
    questions = [" ".join(["who", "was", "the"] + [rng.choice(vocabulary[:400]) for _ in range(rng.randint(5, 12))] + ["of", "T3?"])
                 for _ in range(400)]
    for k in (3, 10):
        want = answers(plain, questions, k)
        assert answers(retriever, questions, k) == want
        assert answers(numpy_side, questions, k) == want


def test_without_numba_the_retriever_prunes_with_numpy_and_the_same_hits(monkeypatch):
    monkeypatch.setattr(blockmax, "_numba", None)
    assert not blockmax.available()
    corpus, vocabulary = zipf_corpus(600, seed=6)
    retriever = BM25Retriever(corpus, n_threads=1)
    assert not retriever.compiled and retriever.prunes
    with pytest.raises(RuntimeError, match="numba"):
        blockmax.BlockMaxIndex(retriever._data, retriever._indices, retriever._indptr, retriever._term_max)
    retriever.prune_from = 0
    queries = queries_of(vocabulary, 200, seed=7)
    assert answers(retriever, queries, 10) == answers(exhaustive(retriever), queries, 10)


def test_a_saved_index_maps_the_block_maxima_it_wrote_and_they_are_the_computed_ones(zipf, tmp_path):
    """The build writes the block maxima beside the postings (whole index and every serving
    shard); a load maps them and the engine reads those very files, not a copy computed again."""
    retriever, vocabulary = zipf
    folder = retriever.save(tmp_path / "ix")
    meta = json.loads((folder / "searchgym_bm25.json").read_text())
    assert meta["block_size"] == blockmax.BLOCK and set(BLOCK_FILES) <= set(meta["files"])
    computed = blockmax.block_maxima(retriever._data, retriever._indices, retriever._indptr)
    stored = [np.load(folder / name) for name in BLOCK_FILES]
    assert [a.dtype for a in stored] == [np.int64, np.float32, np.int32]
    assert all(np.array_equal(a, b) for a, b in zip(stored, computed))
    assert stored[0][-1] > len(stored[0]) - 1  # some lists span several blocks
    queries = queries_of(vocabulary, 400, seed=8)
    expected = {k: answers(exhaustive(retriever), queries, k) for k in (3, 10)}
    for in_memory in (False, True):
        loaded = BM25Retriever.load(folder, retriever.corpus, in_memory=in_memory)
        loaded.prune_from = 0
        if loaded.compiled:
            engine = loaded.block_max_engine()
            assert isinstance(engine.bmax, np.memmap) != in_memory
            if not in_memory:
                assert {Path(a.filename).name for a in (engine.bptr, engine.bmax, engine.blast)} == set(BLOCK_FILES)
        for k in (3, 10):
            assert answers(loaded, queries, k) == expected[k]
    for shard in retriever.save_shards(tmp_path / "shards", 2):
        mapped = BM25Retriever.load(shard, retriever.corpus)
        own = blockmax.block_maxima(mapped._data, mapped._indices, mapped._indptr)
        assert all(np.array_equal(np.load(shard / name), a) for name, a in zip(BLOCK_FILES, own))
    assert verify_storage(folder, progress=False).parts == ["ix: bm25 index, 9 files"]


def test_an_index_written_before_block_maxima_computes_them_and_answers_the_same(zipf, tmp_path):
    retriever, vocabulary = zipf
    folder = retriever.save(tmp_path / "old")
    meta = json.loads((folder / "searchgym_bm25.json").read_text())
    del meta["meta_checksum"], meta["block_size"]
    for name in BLOCK_FILES:
        del meta["files"][name]
        (folder / name).unlink()
    write_meta(folder, "searchgym_bm25.json", meta)  # as a searchgym before this change wrote it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to say: it prunes as before
        old = BM25Retriever.load(folder, retriever.corpus)
    old.prune_from = 0
    assert old.prunes
    if old.compiled:
        assert not isinstance(old.block_max_engine().bmax, np.memmap)  # computed on first use
    queries = queries_of(vocabulary, 300, seed=9)
    assert answers(old, queries, 10) == answers(exhaustive(retriever), queries, 10)
    old.save(tmp_path / "resaved")  # saved again, it gets them
    assert all((tmp_path / "resaved" / name).is_file() for name in BLOCK_FILES)


@needs_numba
def test_the_engine_refuses_block_maxima_of_another_index(zipf):
    retriever, _ = zipf
    other = blockmax.block_maxima(retriever._data[:10], retriever._indices[:10], np.array([0, 4, 10]))
    with pytest.raises(ValueError, match="BlockMaxIndex expects blocks of .* terms, got 2 terms, 2 blocks and 2 maxima"):
        blockmax.BlockMaxIndex(retriever._data, retriever._indices, retriever._indptr, retriever._term_max, blocks=other)


# ---------------------------------------------------------------------- one query split across threads (issue 67)
@needs_numba
@pytest.mark.parametrize("block", [4, 64])
def test_a_query_split_in_slices_gets_the_whole_corpus_top_k_exactly(zipf, block):
    """Slices of corpus order on threads sharing their thresholds, run alone one after the other,
    or started from the final k-th score: every way the same passages, scores and order as the
    engine on the whole corpus (and as exhaustive scoring), ties at the k-th place included;
    more slices than a list has postings, and k above any query's matches."""
    retriever, vocabulary = zipf
    engine = blockmax.BlockMaxIndex(retriever._data, retriever._indices, retriever._indptr, retriever._term_max, block=block,
                                    num_docs=len(retriever.corpus))
    ids = [t for t in retriever.term_ids(queries_of(vocabulary, 150, seed=12)) if t]
    for k in (1, 3, 10, 5000):
        docs, scores, counts = engine.top_k_many(ids, k)
        for slices in (1, 2, 3, 7, 16):
            for i, q in enumerate(ids):
                final = float(scores[i, k - 1]) if counts[i] >= k else 0.0
                ways = [engine.top_k_split(q, k, slices, parallel=False), engine.top_k_split(q, k, slices, parallel=False, floor=final)]
                if slices in (2, 3):  # on threads (more would only queue on this machine's cores)
                    ways.append(engine.top_k_split(q, k, slices))
                for got in ways:
                    d, s, c = got
                    assert c == counts[i] and d[:c].tolist() == docs[i, :c].tolist() and s[:c].tolist() == scores[i, :c].tolist(), \
                        (k, slices, i)
    plain = exhaustive(retriever)
    queries = queries_of(vocabulary, 100, seed=13)
    want = answers(plain, queries, 10)
    for q, row in zip(retriever.term_ids(queries), want):
        if q:
            d, s, c = engine.top_k_split(q, 10, 4)
            assert [(retriever.corpus[x].id, y) for x, y in zip(d[:c].tolist(), s[:c].tolist())] == row


@needs_numba
def test_a_split_query_counts_its_work_and_times_its_slices(zipf):
    retriever, vocabulary = zipf
    engine = retriever.block_max_engine()
    q = retriever.term_ids(["river castle w3q w8q w20q empire"])[0]
    whole, split = np.zeros(4, np.int64), np.zeros(4, np.int64)
    engine.top_k_many([q], 3, whole)
    seconds = np.zeros(5)
    engine.top_k_split(q, 3, 5, split, parallel=False, seconds=seconds)
    # each range alone, its threshold from its own passages only: no fewer candidates than the whole; each range timed
    assert split[0] >= whole[0] > 0 and (seconds > 0).all()
    with pytest.raises(ValueError, match=r"expects seconds to be a float64 array of 5, got float64 \(4,\)"):
        engine.top_k_split(q, 3, 5, seconds=np.zeros(4))


@needs_numba
@pytest.mark.parametrize("slices", [0, -1, True, 2.0, "2"])
def test_a_split_refuses_a_slice_count_that_is_not_a_positive_integer(zipf, slices):
    retriever, _ = zipf
    with pytest.raises(ValueError, match="top_k_split expects slices to be a positive integer"):
        retriever.block_max_engine().top_k_split([1, 2], 3, slices)


@needs_numba
def test_a_split_runs_document_at_a_time_only(zipf):
    retriever, _ = zipf
    engine = blockmax.BlockMaxIndex(retriever._data, retriever._indices, retriever._indptr, retriever._term_max, algorithm="taat")
    with pytest.raises(ValueError, match="top_k_split runs document at a time"):
        engine.top_k_split([1, 2], 3, 2)


@needs_numba
def test_query_threads_splits_a_query_searched_alone_and_answers_the_same(zipf, monkeypatch, tmp_path):
    """``BM25Retriever(query_threads=N)`` splits one query in N slices when the corpus holds N x
    SLICE_MIN passages (SLICE_MIN lowered here), never a batch; kept by load, build and pickling."""
    import pickle

    from searchgym.corpora import bm25
    from searchgym.corpora.indexes import load_index

    retriever, vocabulary = zipf
    folder = retriever.save(tmp_path / "ix")
    split = BM25Retriever.load(folder, retriever.corpus, n_threads=1, query_threads=3)
    split.prune_from = 0
    calls = []
    real = blockmax.BlockMaxIndex.top_k_split
    monkeypatch.setattr(blockmax.BlockMaxIndex, "top_k_split", lambda self, terms, k, slices, *a, **kw: (
        calls.append(slices), real(self, terms, k, slices, *a, **kw))[1])
    queries = queries_of(vocabulary, 200, seed=14)
    plain = exhaustive(retriever)
    want = answers(plain, queries, 10, batched=False)
    assert answers(split, queries, 10, batched=False) == want and calls == []  # 2,500 passages: under SLICE_MIN a slice
    monkeypatch.setattr(bm25, "SLICE_MIN", 1000)  # 2 slices of 1,250 passages at most
    assert answers(split, queries, 10, batched=False) == want
    assert calls and set(calls) == {2}
    calls.clear()
    assert answers(split, queries, 10) == answers(plain, queries, 10) and calls == []  # a batch is not split
    monkeypatch.setattr(bm25, "SLICE_MIN", 1)
    for again in (pickle.loads(pickle.dumps(split)), load_index(folder, retriever.corpus, query_threads=3),
                  BM25Retriever.build(retriever.corpus, tmp_path / "built", query_threads=3)):
        assert again.query_threads == 3
        again.prune_from = 0
        assert answers(again, queries[:50], 3, batched=False) == answers(plain, queries[:50], 3, batched=False)
    assert set(calls) == {3}


@pytest.mark.parametrize("value", [0, -2, True, 1.5, "2", None])
def test_query_threads_must_be_a_positive_integer(zipf, value):
    retriever, _ = zipf
    with pytest.raises(ConfigError, match=r"BM25Retriever expects query_threads to be a positive integer \(1: one thread a query\)"):
        BM25Retriever(retriever.corpus, query_threads=value)


@needs_numba
def test_a_forked_process_splits_on_threads_of_its_own(zipf):
    """Thread pools are not inherited by a forked child (it has none of the parent's threads):
    the child makes its own and answers, rather than waiting on threads that are gone; the
    slices' pool and a batch's."""
    import multiprocessing

    retriever, vocabulary = zipf
    engine = retriever.block_max_engine()
    q = retriever.term_ids(["river castle w3q w8q w20q empire"])[0]
    queries = queries_of(vocabulary, 40, seed=15)
    want = ([a.tolist() if hasattr(a, "tolist") else a for a in engine.top_k_split(q, 5, 3)], answers(retriever, queries, 5))
    assert retriever.n_threads > 1  # the batch went to the retriever's pool: both pools made in this process
    context = multiprocessing.get_context("fork")
    answers_out = context.Queue()
    child = context.Process(target=lambda: answers_out.put(([a.tolist() if hasattr(a, "tolist") else a for a in engine.top_k_split(q, 5, 3)],
                                                            answers(retriever, queries, 5))))
    child.start()
    child.join(120)
    assert child.exitcode == 0, child.exitcode
    assert answers_out.get(timeout=10) == want
