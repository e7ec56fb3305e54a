"""One index on several `searchgym serve` processes on 127.0.0.1: the shards' merged top-k
equals the whole index's (ids and scores), replicas share the load and cover for each
other, and `searchgym serve --shards` routes to them as one /retrieve endpoint."""

import random

import httpx
import pytest
from test_serve import Server

from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.http import HTTPRetriever
from searchgym.corpora.indexes import build_index, index_meta, load_index
from searchgym.corpora.registry import load_corpus
from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.sharded import ShardedRetriever, parse_shard_spec
from searchgym.error import BackendError, ConfigError


def queries_for(corpus, count, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        words = corpus[rng.randrange(len(corpus))].text.split()
        start = rng.randrange(max(1, len(words) - 4))
        out.append(" ".join(words[start : start + rng.randint(1, 5)]))
    return out + ["", "zzzunknown"]


def pairs(rows):
    return [[(h.passage.id, h.passage.title, h.passage.text, h.score) for h in row] for row in rows]


def test_shards_in_process_equal_the_whole_index(tmp_path):
    corpus = load_corpus("synthwiki", seed=7, num_passages=3000)
    whole = BM25Retriever(corpus)
    build_index(corpus, "bm25", tmp_path / "ix", shards=3, shard_size=1000)
    meta = index_meta(tmp_path / "ix")
    assert meta["kind"] == "shards" and meta["shards"] == ["shard-0", "shard-1", "shard-2"]
    assert [index_meta(tmp_path / "ix" / s)["shard"] for s in meta["shards"]] == [
        {"index": 0, "count": 3, "start": 0, "stop": 1000}, {"index": 1, "count": 3, "start": 1000, "stop": 2000},
        {"index": 2, "count": 3, "start": 2000, "stop": 3000},
    ]
    sharded = load_index(tmp_path / "ix", corpus)
    assert isinstance(sharded, ShardedRetriever)
    queries = queries_for(corpus, 2500) + [p.title for p in corpus[:300]]
    for k in (1, 3, 10):
        assert pairs(sharded.search(queries, k)) == pairs(whole.search(queries, k))
    # Each shard answers only from its own passages, with the whole index's scores.
    shard1 = load_index(tmp_path / "ix" / "shard-1", corpus)
    assert all(1000 <= corpus.index_of(h.passage.id) < 2000 for row in shard1.search(queries[:200], 5) for h in row)


@pytest.fixture(scope="module")
def shard_servers(tmp_path_factory):
    """Three shard servers and a replica of shard 0, over the test world of test_serve."""
    folder = tmp_path_factory.mktemp("sharded") / "ix"
    build_index(load_corpus("synthwiki", seed=7, num_passages=400), "bm25", folder, shards=3)
    servers = [Server("--index", str(folder / f"shard-{i}")) for i in (0, 1, 2, 0)]
    yield servers
    for server in servers:
        server.stop()


def test_three_shard_servers_answer_as_one_index(shard_servers):
    corpus = load_corpus("synthwiki", seed=7, num_passages=400)
    whole = BM25Retriever(corpus)
    urls = [f"{s.url}/retrieve" for s in shard_servers]
    spec = f"{urls[0]}|{urls[3]},{urls[1]},{urls[2]}"
    client = make_retriever(spec, corpus)
    assert isinstance(client, ShardedRetriever) and [len(s) for s in client.shards] == [2, 1, 1]
    queries = queries_for(corpus, 400, seed=1)
    for k in (1, 3, 7):
        assert pairs(client.search(queries, k)) == pairs(whole.search(queries, k))
    # Both replicas of shard 0 were asked: round-robin.
    assert all(r.requests > 0 for r in client.shards[0])
    info = httpx.get(shard_servers[1].url + "/info").json()
    assert info["index"]["shard"] == {"index": 1, "count": 3, "start": 133, "stop": 266}


def test_a_replica_down_is_covered_by_the_other(shard_servers):
    corpus = load_corpus("synthwiki", seed=7, num_passages=400)
    urls = [f"{s.url}/retrieve" for s in shard_servers]
    dead = "http://127.0.0.1:9/retrieve"  # nothing listens on the discard port
    client = ShardedRetriever.from_spec(f"{dead}|{urls[0]},{urls[1]},{urls[2]}", corpus, retries=0, timeout=5)
    queries = queries_for(corpus, 40, seed=2)
    assert pairs(client.search(queries, 3)) == pairs(BM25Retriever(corpus).search(queries, 3))
    lonely = ShardedRetriever.from_spec(f"{dead},{urls[1]}", corpus, retries=0, timeout=5)
    with pytest.raises(BackendError, match=r"every replica of shard 0 failed; the last: retrieval server http://127.0.0.1:9/retrieve \(GET info\) unreachable"):
        lonely.search(["river"], 3)


def test_a_router_is_itself_a_retrieve_endpoint(shard_servers):
    corpus = load_corpus("synthwiki", seed=7, num_passages=400)
    spec = ",".join(f"{s.url}/retrieve" for s in shard_servers[:3])
    import subprocess
    import sys
    from pathlib import Path

    from test_serve import free_port

    port = free_port()
    argv = [str(Path(sys.executable).with_name("searchgym")), "serve", "--shards", spec, "--port", str(port)]
    router = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = router.stdout.readline()
        assert line.startswith("searchgym serve: router over 3 shards (3 servers) at "), router.stderr.read()
        queries = queries_for(corpus, 100, seed=3)
        client = HTTPRetriever(f"http://127.0.0.1:{port}/retrieve", corpus)
        assert pairs(client.search(queries, 3)) == pairs(BM25Retriever(corpus).search(queries, 3))
        assert httpx.get(f"http://127.0.0.1:{port}/info").json()["shards"] == [[u] for u in spec.split(",")]
    finally:
        router.terminate()
        router.wait(timeout=30)


def test_bad_shard_specs_say_what_is_expected(tmp_path):
    with pytest.raises(ConfigError) as e:
        parse_shard_spec("http://a:1/retrieve,b:2/retrieve")
    assert str(e.value) == (
        "Expected shard URLs joined by ',' (replicas of one shard by '|'), e.g. 'http://h1:8001/retrieve,"
        "http://h2:8001/retrieve', got 'b:2/retrieve' in 'http://a:1/retrieve,b:2/retrieve'."
    )
    corpus = load_corpus("synthwiki", seed=7, num_passages=400)
    with pytest.raises(ConfigError, match=r"searchgym index --shards splits BM25 indexes \(retriever bm25\), got retriever 'rank-bm25'"):
        build_index(corpus, "rank-bm25", tmp_path / "x", shards=2)
    with pytest.raises(ConfigError, match="expects a shard count between 1 and the 400 passages, got 401"):
        BM25Retriever(corpus).save_shards(tmp_path / "y", 401)


def test_serve_in_memory_answers_as_the_mapped_index_without_mapping_it(tmp_path):
    corpus = load_corpus("synthwiki", seed=7, num_passages=400)
    build_index(corpus, "bm25", tmp_path / "ix")
    servers = {flag: Server("--index", str(tmp_path / "ix"), *flag) for flag in ((), ("--in-memory",))}
    try:
        queries = queries_for(corpus, 200, seed=2)
        expected = pairs(load_index(tmp_path / "ix", corpus).search(queries, 5))
        for flag, server in servers.items():
            assert pairs(make_retriever(f"{server.url}/retrieve", corpus).search(queries, 5)) == expected
            maps = open(f"/proc/{server.proc.pid}/maps").read()
            assert (str(tmp_path / "ix" / "data.npy") in maps) == (flag == ())  # read into memory, not mapped
    finally:
        for server in servers.values():
            server.stop()
