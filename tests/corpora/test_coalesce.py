"""Concurrent searches from threads are joined into batched calls, each query getting its own hits."""

import threading
import time

import pytest

from searchgym.corpora.coalesce import CoalescingRetriever
from searchgym.corpora.retrievers import make_retriever
from searchgym.corpora.synthwiki import generate
from searchgym.corpora.types import Retriever
from searchgym.error import ConfigError


class SlowCounting(Retriever):
    """The BM25 retriever, slowed so that threads pile up, recording every call."""

    def __init__(self, inner, event):
        self.inner, self.corpus, self.calls, self.event = inner, inner.corpus, [], event

    def search(self, queries, k):
        self.calls.append((tuple(queries), k))
        self.event.wait(2)
        return self.inner.search(queries, k)


def test_threads_searching_at_once_share_calls_and_get_their_own_hits():
    corpus = generate(seed=3, num_passages=300).corpus
    bm25 = make_retriever("bm25", corpus)
    release = threading.Event()
    slow = SlowCounting(bm25, release)
    coalescing = CoalescingRetriever(slow)
    queries = [f"{p.title} founded" for p in list(corpus)[:17]]
    results = [None] * len(queries)

    def worker(i):
        results[i] = coalescing.search([queries[i]], 3 if i % 2 else 5)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(queries))]
    threads[0].start()
    while not slow.calls:  # the first query is being searched; the others queue behind it
        time.sleep(0.001)
    for t in threads[1:]:
        t.start()
    while len(coalescing._pending) < len(queries) - 1:
        time.sleep(0.001)
    release.set()
    for t in threads:
        t.join(10)
    assert slow.calls[0] == ((queries[0],), 5)
    assert len(slow.calls) == 3 and {k for _, k in slow.calls[1:]} == {3, 5}  # the 16 waiting: one call per k
    assert sum(len(q) for q, _ in slow.calls) == len(queries) == coalescing.queries and coalescing.batches == 3
    for i, q in enumerate(queries):
        assert results[i] == bm25.search([q], 3 if i % 2 else 5)


def test_an_error_reaches_every_caller_of_its_call_and_the_next_call_works():
    corpus = generate(seed=3, num_passages=100).corpus

    class Flaky(Retriever):
        def __init__(self):
            self.corpus, self.fail = corpus, True

        def search(self, queries, k):
            if self.fail:
                self.fail = False
                raise TimeoutError("server timed out")
            return [[] for _ in queries]

    coalescing = CoalescingRetriever(Flaky())
    with pytest.raises(TimeoutError):
        coalescing.search(["a"], 3)
    assert coalescing.search(["a", "b"], 3) == [[], []]


@pytest.mark.parametrize("kwargs, message", [
    ({"window_ms": -1}, "window_ms between 0 and 1000, got -1"),
    ({"max_batch": 0}, "max_batch to be a positive integer, got 0"),
])
def test_bad_settings_are_refused(kwargs, message):
    corpus = generate(seed=3, num_passages=100).corpus
    with pytest.raises(ConfigError, match=message):
        CoalescingRetriever(make_retriever("bm25", corpus), **kwargs)
    with pytest.raises(ConfigError, match=r"^CoalescingRetriever expects a search engine \(an object with search\(queries, k\)\), got str\.$"):
        CoalescingRetriever("bm25")


def test_one_coalescer_per_retriever_object():
    from searchgym.corpora.coalesce import coalesced

    corpus = generate(seed=3, num_passages=100).corpus
    bm25 = make_retriever("bm25", corpus)
    first = coalesced(bm25)
    assert coalesced(bm25) is first and coalesced(first) is first
    assert isinstance(first, CoalescingRetriever) and first.retriever is bm25
    assert first.search(["alpha"], 3) == bm25.search(["alpha"], 3)
