"""Retrieval benchmark: searchgym's BM25 (bm25s) against rank-bm25 and raw bm25s, dense
retrieval, index build times and memory, and the environment's own overhead per step.

    python benchmarks/retrieval.py            # wiki-vital + 1M-passage synthwiki (~15 min)
    python benchmarks/retrieval.py --quick    # small sizes, a smoke run (~1 min)

Corpora: wiki-vital (10,033 Wikipedia lead summaries; queries: its FanOutQA dev
sub-questions) and synthwiki at every ``--sizes`` (queries: the world's own questions).
Targets, checked at the end: searchgym BM25 >= 200x rank-bm25 queries/s at 1M passages;
searchgym's BM25Retriever within 1.2x of calling bm25s directly on the same tokenized
queries; environment overhead <= 5% of a BM25 search step.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchgym.corpora.bm25 import BM25Retriever
from searchgym.corpora.types import Corpus, QAExample

K = 10  # hits per query in the throughput runs
ENV_TOP_K = 3


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def measure_build(build):
    """(object, seconds, RSS growth in bytes) of ``build()``."""
    gc.collect()
    before = rss_bytes()
    start = time.perf_counter()
    obj = build()
    seconds = time.perf_counter() - start
    gc.collect()
    return obj, seconds, rss_bytes() - before


def best_of(fn, repeats: int, min_seconds: float = 1.0) -> float:
    """Smallest wall time of at least ``repeats`` calls of ``fn``, calling it for at least
    ``min_seconds`` in all (short runs are noisy on shared machines)."""
    times = []
    total = 0.0
    while len(times) < repeats or total < min_seconds:
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        total += times[-1]
    return min(times)


# ---------------------------------------------------------------------- corpora
@dataclass
class Bench:
    name: str
    corpus: Corpus
    queries: list[str]
    examples: list[QAExample]
    rows: dict = field(default_factory=dict)


def wiki_vital() -> Bench:
    from searchgym.corpora import wikivital

    examples = wikivital.load_questions("all")
    return Bench("wiki-vital", wikivital.load_corpus(), [q.question for q in examples], examples)


def synthwiki(num_passages: int, max_queries: int) -> Bench:
    from searchgym.corpora.synthwiki import generate

    world = generate(seed=0, num_passages=num_passages)
    examples = world.questions("dev")[:max_queries]
    return Bench(f"synthwiki-{num_passages:,}", world.corpus, [q.question for q in examples], examples)


# ---------------------------------------------------------------------- BM25
def bench_bm25(b: Bench, args) -> BM25Retriever:
    """Fill ``b.rows`` with the BM25 measurements; return the searchgym retriever built."""
    n = len(b.corpus)
    log(f"{b.name}: building the bm25s index ({n:,} passages)")
    fast, build_s, rss = measure_build(lambda: BM25Retriever(b.corpus, backend="bm25s"))
    r = b.rows
    r.update(passages=n, queries=len(b.queries), bm25s_build_s=build_s, bm25s_rss=rss, bm25s_bytes=fast.nbytes)

    log(f"{b.name}: {len(b.queries)} queries, batched, k={K}")
    fast.search(b.queries[:10], K)  # warm the stem cache and the thread pool
    t = best_of(lambda: fast.search(b.queries, K), args.repeats)
    r["bm25s_qps"] = len(b.queries) / t
    t1 = best_of(lambda: [fast.search([q], K) for q in b.queries[:200]], 1, min_seconds=0)
    r["bm25s_single_ms"] = 1000 * t1 / min(200, len(b.queries))

    # bm25s itself on the same tokenized queries (its retrieve() needs at least one known term).
    term_ids = [ids for ids in fast.analyzer.token_ids(b.queries, fast._vocab, grow=False) if ids]
    direct = fast._index
    t_direct = best_of(
        lambda: direct.retrieve(term_ids, k=min(K, n), n_threads=fast.n_threads, show_progress=False), args.repeats
    )
    r["direct_qps"] = len(term_ids) / t_direct
    r["wrapper_ratio"] = (t / len(b.queries)) / (t_direct / len(term_ids))

    # Tokenization, the larger part of building: a fresh analyzer (cold stem cache) against
    # bm25s's own tokenizer with the same stemmer and stopwords, on up to 100k passages.
    from searchgym.corpora.bm25 import passage_text
    from searchgym.corpora.tokenize import Analyzer

    texts = [passage_text(p) for p in b.corpus[:100_000]]
    start = time.perf_counter()
    Analyzer().token_ids(texts, {}, grow=True)
    r["tokenize_pps"] = len(texts) / (time.perf_counter() - start)
    try:
        import bm25s
        import Stemmer

        start = time.perf_counter()
        bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False)
        r["bm25s_tokenize_pps"] = len(texts) / (time.perf_counter() - start)
    except ImportError:
        pass
    del texts

    skip_rank = args.skip_rank_bm25_at_1m and n >= 1_000_000
    if skip_rank:
        log(f"{b.name}: rank-bm25 skipped (--skip-rank-bm25-at-1m)")
        return fast
    log(f"{b.name}: building the rank-bm25 index")
    ref, build_s, rss = measure_build(lambda: BM25Retriever(b.corpus, backend="rank_bm25"))
    r.update(rank_build_s=build_s, rank_rss=rss)
    # rank-bm25 scores every passage in Python: a subsample keeps the run short at 1M.
    subsample = b.queries[: max(5, min(len(b.queries), int(args.rank_budget_passages / n)))]
    log(f"{b.name}: rank-bm25 on {len(subsample)} queries")
    rank_search = ref.search
    t_rank = best_of(lambda: rank_search(subsample, K), 1, min_seconds=0)
    r.update(rank_queries=len(subsample), rank_qps=len(subsample) / t_rank)
    r["speedup"] = r["bm25s_qps"] / r["rank_qps"]
    del ref
    gc.collect()
    return fast


# ---------------------------------------------------------------------- dense
def bench_dense(b: Bench, args) -> list[dict]:
    """Dense flat and HNSW on the first ``args.dense_passages`` passages of ``b``.

    Encoding costs about 5 GFLOP per 256-token passage with all-MiniLM-L6-v2: a few dozen
    passages per second on a 2-core CPU, thousands on a GPU, hence the subset on CPU.
    """
    try:
        from searchgym.corpora.dense import DenseRetriever
    except ImportError as e:
        log(f"dense retrieval not available: {e}")
        return []
    n = min(args.dense_passages or len(b.corpus), len(b.corpus))
    corpus = b.corpus if n == len(b.corpus) else Corpus(b.corpus[:n], name=f"{b.name}[:{n}]")
    rows = []
    with tempfile.TemporaryDirectory(prefix="searchgym-bench-") as cache:
        for index in ("flat", "hnsw"):
            log(f"{corpus.name}: dense {index} index ({n:,} passages; the first one encodes them)")
            dense, build_s, rss = measure_build(
                lambda index=index: DenseRetriever(corpus, index=index, cache_dir=cache, batch_size=args.dense_batch_size)
            )
            dense.search(b.queries[:8], K)  # load the encoder before timing
            t = best_of(lambda dense=dense: dense.search(b.queries, K), args.repeats)
            t1 = best_of(lambda dense=dense: [dense.search([q], K) for q in b.queries[:100]], 1, min_seconds=0)
            rows.append(
                dict(
                    corpus=corpus.name,
                    index=index,
                    passages=n,
                    build_s=build_s,
                    qps=len(b.queries) / t,
                    single_ms=1000 * t1 / min(100, len(b.queries)),
                    bytes_per_passage=dense.nbytes / n,
                    rss=rss,
                    device=dense.resolved_device,
                )
            )
    return rows


# ---------------------------------------------------------------------- environment overhead
def bench_env(b: Bench, retriever: BM25Retriever, steps: int) -> dict | None:
    """Mean time of an ``env.step`` that runs a search against ``retriever.search`` alone.

    Only steps that ran a search are counted, each paired with ``retriever.search`` on the
    same query.
    """
    try:
        import gymnasium as gym

        import searchgym  # noqa: F401  (registers the environments)

        env = gym.make(
            "searchgym/SearchR1-v0", corpus=b.corpus, dataset=b.examples, retriever=retriever, top_k=ENV_TOP_K
        )
        env.reset(seed=0)
    except Exception as e:  # the environment is optional for this benchmark
        log(f"env not available: {type(e).__name__}: {e}")
        return None
    log(f"{b.name}: {steps} environment steps")
    step_time = search_time = 0.0
    timed = i = 0
    while timed < steps:
        query = b.queries[i % len(b.queries)]
        # Alternate which of the two runs first, so that neither always finds the query's
        # posting lists warm in the CPU caches.
        direct_first = i % 2 == 1
        i += 1
        if direct_first:
            start = time.perf_counter()
            retriever.search([query], ENV_TOP_K)
            direct = time.perf_counter() - start
        start = time.perf_counter()
        _, _, terminated, truncated, info = env.step(f"<search> {query} </search>")
        elapsed = time.perf_counter() - start
        if not direct_first:
            start = time.perf_counter()
            retriever.search([query], ENV_TOP_K)
            direct = time.perf_counter() - start
        if info.get("retrieved_ids"):  # the last turn of an episode does not search
            step_time += elapsed
            search_time += direct
            timed += 1
        if terminated or truncated:
            env.reset()
    env.close()
    step, search = step_time / steps, search_time / steps
    return dict(corpus=b.name, search_ms=1000 * search, step_ms=1000 * step, overhead=(step - search) / step)


# ---------------------------------------------------------------------- report
def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def fmt(value, spec: str = ",.0f", missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def report(benches: list[Bench], dense_rows: list[dict], env_rows: list[dict | None], args) -> int:
    mb = 1 / 2**20
    print("\n## BM25 (k=%d, batched queries, %d threads)\n" % (K, _threads()))
    rows = []
    for b in benches:
        r = b.rows
        rows.append(
            [
                b.name,
                fmt(r["passages"]),
                fmt(r["queries"]),
                fmt(r["bm25s_qps"]),
                fmt(r.get("rank_qps"), ",.2f") + (f" ({r['rank_queries']} q)" if "rank_queries" in r else ""),
                fmt(r.get("speedup"), ",.0f") + ("x" if "speedup" in r else ""),
                fmt(r["direct_qps"]),
                fmt(r["wrapper_ratio"], ".2f") + "x",
                fmt(r["bm25s_single_ms"], ".2f"),
                fmt(r["bm25s_build_s"], ".1f"),
                fmt(r.get("rank_build_s"), ".1f"),
                fmt(r["bm25s_bytes"] / r["passages"], ",.0f"),
                fmt(r["bm25s_rss"] * mb, ",.0f"),
                fmt(r.get("rank_rss") and r["rank_rss"] * mb, ",.0f"),
            ]
        )
    print(
        table(
            ["corpus", "passages", "queries", "searchgym q/s", "rank-bm25 q/s", "speedup", "bm25s direct q/s",
             "searchgym/direct time", "1-query ms", "build s", "rank build s", "index B/passage", "RSS +MB",
             "rank RSS +MB"],
            rows,
        )
    )
    if dense_rows:
        print("\n## Dense (all-MiniLM-L6-v2, k=%d)\n" % K)
        print(
            table(
                ["corpus", "index", "device", "passages", "build s (encode+index)", "q/s batched", "1-query ms",
                 "index B/passage", "RSS +MB"],
                [
                    [d["corpus"], d["index"], d["device"], fmt(d["passages"]), fmt(d["build_s"], ".1f"),
                     fmt(d["qps"]), fmt(d["single_ms"], ".2f"), fmt(d["bytes_per_passage"], ",.0f"),
                     fmt(d["rss"] * mb, ",.0f")]
                    for d in dense_rows
                ],
            )
        )
    print("\n## Tokenization (passages/s, first 100,000 passages, cold stem cache)\n")
    print(
        table(
            ["corpus", "searchgym analyzer", "bm25s.tokenize (same stemmer, stopwords)"],
            [[b.name, fmt(b.rows["tokenize_pps"]), fmt(b.rows.get("bm25s_tokenize_pps"))] for b in benches],
        )
    )
    print("\n## Environment overhead per search step (searchgym/SearchR1-v0, bm25, top_k=%d)\n" % ENV_TOP_K)
    if not any(env_rows):
        print("env not available")
    else:
        print(
            table(
                ["corpus", "retriever.search ms", "env.step ms", "overhead"],
                [[e["corpus"], fmt(e["search_ms"], ".3f"), fmt(e["step_ms"], ".3f"), fmt(100 * e["overhead"], ".1f") + "%"]
                 for e in env_rows if e],
            )
        )

    print("\n## Targets\n")
    failures = 0

    def check(name: str, ok: bool | None, detail: str) -> None:
        nonlocal failures
        status = "n/a " if ok is None else ("PASS" if ok else "FAIL")
        failures += ok is False
        print(f"{status}  {name}: {detail}")

    at_1m = [b for b in benches if b.rows["passages"] >= 1_000_000 and "speedup" in b.rows]
    if at_1m:
        s = at_1m[-1].rows["speedup"]
        check("BM25 >= 200x rank-bm25 at 1M passages", s >= 200, f"{s:,.0f}x on {at_1m[-1].name}")
    else:
        measured = [f"{b.rows['speedup']:,.0f}x on {b.name}" for b in benches if "speedup" in b.rows]
        check("BM25 >= 200x rank-bm25 at 1M passages", None, "not measured at 1M (" + ("; ".join(measured) or "none") + ")")
    for b in benches:
        ratio = b.rows["wrapper_ratio"]
        check(f"searchgym BM25Retriever <= 1.2x direct bm25s ({b.name})", ratio <= 1.2, f"{ratio:.2f}x the time")
    for e in env_rows:
        if e:
            check(f"env overhead <= 5% of a BM25 step ({e['corpus']})", e["overhead"] <= 0.05, f"{100 * e['overhead']:.1f}%")
    if not any(env_rows):
        check("env overhead <= 5% of a BM25 step", None, "env not available")
    return failures


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _threads() -> int:
    from searchgym.corpora.bm25 import _cpu_count

    return _cpu_count()


# ---------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke run (synthwiki 20,000 passages)")
    p.add_argument("--sizes", type=lambda s: [int(x.replace("_", "")) for x in s.split(",")], default=None,
                   help="comma-separated synthwiki sizes (default 1000000; --quick: 20000)")
    p.add_argument("--skip-rank-bm25-at-1m", action="store_true", help="do not build rank-bm25 on corpora of 1M+ passages")
    p.add_argument("--max-queries", type=int, default=2000, help="synthwiki questions used as queries (default 2000)")
    p.add_argument("--rank-budget-passages", type=float, default=3e7,
                   help="rank-bm25 runs on about this many passage scorings: queries = budget / passages (default 3e7)")
    p.add_argument("--repeats", type=int, default=3, help="best-of repeats for timed batches (default 3)")
    p.add_argument("--env-steps", type=int, default=300, help="search steps timed through the environment (default 300)")
    p.add_argument("--no-dense", action="store_true", help="skip the dense retriever")
    p.add_argument("--dense-passages", type=int, default=None,
                   help="encode the first N wiki-vital passages for the dense runs (default: all 10,033 with a GPU, "
                   "1,000 on CPU, where encoding runs at a few dozen passages/s; --quick: 300)")
    p.add_argument("--dense-batch-size", type=int, default=64, help="encoder batch size (default 64)")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = [20_000] if args.quick else [1_000_000]
    if args.dense_passages is None:
        args.dense_passages = 300 if args.quick else (None if _has_cuda() else 1_000)
    if args.quick:
        args.repeats = min(args.repeats, 2)
        args.env_steps = min(args.env_steps, 100)
        args.max_queries = min(args.max_queries, 500)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    log(f"sizes: wiki-vital + synthwiki {args.sizes}; {_threads()} threads")
    benches, dense_rows, env_rows = [], [], []
    makers = [wiki_vital] + [lambda n=n: synthwiki(n, args.max_queries) for n in args.sizes]
    for make in makers:
        start = time.perf_counter()
        b = make()
        log(f"{b.name}: corpus and {len(b.queries)} queries ready in {time.perf_counter() - start:.1f} s")
        retriever = bench_bm25(b, args)
        env_rows.append(bench_env(b, retriever, args.env_steps))
        del retriever
        if not args.no_dense and b.name == "wiki-vital":
            dense_rows += bench_dense(b, args)
        b.corpus, b.queries, b.examples = None, [], []  # free the passages before the next corpus
        benches.append(b)
        gc.collect()
    return 1 if report(benches, dense_rows, env_rows, args) else 0


if __name__ == "__main__":
    sys.exit(main())
