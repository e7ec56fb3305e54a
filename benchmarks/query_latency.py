"""BM25 query latency, side by side in one process, interleaved query by query: the ranking
before the scale change (no settling of ties at the k-th place; arrays in memory, as that
code held them), this checkout's ranking on the memory-mapped index, and on the index read
into memory (``BM25Retriever.load(..., in_memory=True)``). One query at a time, k=3, each
timed around ``retriever.search([q], k)`` (tokenizing included), on one thread.

    python benchmarks/scale.py --sizes 1M --sections build        # or: searchgym index --corpus F --out DIR
    python benchmarks/query_latency.py --index DIR --queries /tmp/searchgym-scale/corpus-1000000-seed0/queries.json

Prints p50 / p99 of each, the ratios to the old ranking, how many queries' hits differ (the
old ranking may order passages tied at the k-th place differently), and the target verdict:
the mapped index's p50 no worse than the old ranking's.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.corpora.bm25 import BM25Retriever  # noqa: E402
from searchgym.corpora.indexes import open_index_corpus  # noqa: E402

_DENSE_SHARE = 0.5  # the old code's: above this share of the corpus touched, rank every passage


def _top_k(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, in no particular order (as bm25.py has it)."""
    if k >= len(values):
        return np.arange(len(values))
    return np.argpartition(values, len(values) - k)[len(values) - k :]


class BeforeScaleChange(BM25Retriever):
    """``_rank`` as it was before commit 532145f (``git show 532145f^:searchgym/corpora/bm25.py``):
    the best ``k`` by a partition, no look for passages tied with the k-th."""

    def _rank(self, term_ids: list[int], k: int) -> tuple[np.ndarray, np.ndarray]:
        data, indices, indptr = self._data, self._indices, self._indptr
        scores = self._buffer()
        n = len(scores)
        postings = []
        for t in term_ids:
            start, end = indptr[t], indptr[t + 1]
            rows = indices[start:end]
            scores[rows] += data[start:end]
            postings.append(rows)
        touched = np.concatenate(postings) if len(postings) > 1 else postings[0]
        try:
            if len(touched) > _DENSE_SHARE * n:
                top = _top_k(scores, min(k, n))
                top = top[scores[top] > 0]
                top_scores = scores[top]
            else:
                values = scores[touched]
                best = _top_k(values, min(k * len(term_ids), len(values)))
                top = np.unique(touched[best])
                top_scores = scores[top]
                keep = top_scores > 0
                top, top_scores = top[keep], top_scores[keep]
        finally:
            scores[touched] = 0.0
        order = np.lexsort((top, -top_scores))[:k]
        top, top_scores = top[order], top_scores[order]
        if self._nonoccurrence is not None:
            top_scores = top_scores + self._nonoccurrence[term_ids].sum(dtype=np.float32)
        return top, top_scores


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", type=Path, required=True, help="a BM25 index folder built by `searchgym index`")
    p.add_argument("--queries", type=Path, required=True, help="a JSON list of query strings (scale.py writes queries.json)")
    p.add_argument("--num", type=int, default=2000, help="queries timed (default 2000)")
    p.add_argument("--rounds", type=int, default=3, help="passes over the queries (default 3)")
    p.add_argument("--k", type=int, default=3, help="hits per query (default 3)")
    args = p.parse_args(argv)
    queries = json.loads(args.queries.read_text())[: args.num]
    corpus = open_index_corpus(args.index)
    sides = {
        "old ranking, in memory": BeforeScaleChange.load(args.index, corpus, n_threads=1, in_memory=True),
        "new, mapped": BM25Retriever.load(args.index, corpus, n_threads=1),
        "new, in memory": BM25Retriever.load(args.index, corpus, n_threads=1, in_memory=True),
    }
    names = list(sides)
    answers = {name: [r.search([q], args.k)[0] for q in queries] for name, r in sides.items()}  # warm: page cache, buffers
    differ = {name: sum(a != b for a, b in zip(answers[name], answers[names[0]])) for name in names[1:]}
    times: dict[str, list[float]] = {name: [] for name in names}
    clock = time.perf_counter
    for r in range(args.rounds):
        for i, q in enumerate(queries):
            for j in range(len(names)):  # the order rotates, so no side always goes first
                name = names[(i + j + r) % len(names)]
                search = sides[name].search
                start = clock()
                search([q], args.k)
                times[name].append(clock() - start)
    p50 = {name: float(np.percentile(t, 50)) * 1e3 for name, t in times.items()}
    p99 = {name: float(np.percentile(t, 99)) * 1e3 for name, t in times.items()}
    print(f"index: {args.index} ({len(corpus):,} passages), {len(queries)} queries x {args.rounds} rounds, k={args.k}, "
          "interleaved query by query, one thread")
    for name in names:
        ratio = p50[name] / p50[names[0]]
        print(f"{name:24s} p50 {p50[name]:7.3f} ms  p99 {p99[name]:8.3f} ms  p50 / old {ratio:5.3f}x")
    for name, count in differ.items():
        print(f"{name}: hits differ from the old ranking's on {count} of {len(queries)} queries (ties at the k-th place)")
    ratio = p50["new, mapped"] / p50[names[0]]
    verdict = "PASS" if ratio <= 1.0 else "FAIL"
    print(f"{verdict}  query p50 no worse than the ranking before the scale change: mapped {ratio:.3f}x, "
          f"in memory {p50['new, in memory'] / p50[names[0]]:.3f}x the old ranking's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
