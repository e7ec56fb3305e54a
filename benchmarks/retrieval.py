"""Retrieval benchmark: searchgym's BM25 (bm25s) against rank-bm25 and raw bm25s, dense
retrieval, index build times and memory, and the environment's own overhead per step.

    python benchmarks/retrieval.py            # wiki-vital + 1M-passage synthwiki (~15 min)
    python benchmarks/retrieval.py --quick    # small sizes, a smoke run (115 s of CPU; 15 min of wall time at load 13-17)

Corpora: wiki-vital (10,033 Wikipedia lead summaries; queries: its FanOutQA dev
sub-questions) and synthwiki at every ``--sizes`` (queries: the world's own questions).
Targets, checked at the end: searchgym BM25 >= 200x rank-bm25 queries/s at 1M passages;
searchgym's BM25Retriever within 1.2x of calling bm25s directly on the same tokenized
queries; environment overhead <= 5% of a BM25 search step on corpora of 100k passages or more
(searches of ~1 ms and more; on smaller corpora 5% is a few microseconds, less than any Python
step: the ratio is printed as n/a there, with the env's own time per step, reported, not judged).
The env's times are CPU times of the process (wall time on a shared CPU holds waits for a core).
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
from searchgym.corpora.types import Corpus, QAExample, Retriever

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


def best_of_pair(fn_a, fn_b, repeats: int, min_seconds: float = 1.0) -> tuple[float, float]:
    """:func:`best_of` of two functions timed in alternating rounds, so that a burst of
    load on a shared machine slows both alike instead of only the one running then."""
    a, b = [], []
    while len(a) < repeats or sum(a) + sum(b) < min_seconds:
        for fn, times in ((fn_a, a), (fn_b, b)):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    return min(a), min(b)


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
def bm25s_reference(corpus: Corpus, retriever: BM25Retriever):
    """bm25s's own index of ``corpus`` from ``retriever``'s analyzer terms, and its vocabulary."""
    import bm25s
    import numpy as np

    from searchgym.corpora.postings import passage_text

    vocab: dict[str, int] = {}
    terms, lengths = retriever.analyzer.index_terms([passage_text(p) for p in corpus], vocab)
    ids = [part.tolist() for part in np.split(terms, np.cumsum(lengths)[:-1])]
    reference = bm25s.BM25(k1=retriever.k1, b=retriever.b, delta=retriever.delta, method=retriever.method)
    reference.index((ids, vocab), create_empty_token=False, show_progress=False)
    return reference, vocab


def bench_bm25(b: Bench, args) -> BM25Retriever:
    """Fill ``b.rows`` with the BM25 measurements; return the searchgym retriever built."""
    n = len(b.corpus)
    log(f"{b.name}: building the bm25s index ({n:,} passages)")
    fast, build_s, rss = measure_build(lambda: BM25Retriever(b.corpus, backend="bm25s"))
    r = b.rows
    r.update(passages=n, queries=len(b.queries), bm25s_build_s=build_s, bm25s_rss=rss, bm25s_bytes=fast.nbytes)

    fast.search(b.queries[:10], K)  # warm the stem cache and the thread pool
    t1 = best_of(lambda: [fast.search([q], K) for q in b.queries[:200]], 1, min_seconds=0)
    r["bm25s_single_ms"] = 1000 * t1 / min(200, len(b.queries))

    # bm25s itself on the same tokenized queries: its own index (its Python build) of our
    # analyzer's terms, the reference the kernel's scores are tested against.
    log(f"{b.name}: building bm25s's own index of the same terms, for the direct comparison")
    direct, vocab = bm25s_reference(b.corpus, fast)
    term_ids = [ids for ids in fast.analyzer.token_ids(b.queries, vocab, grow=False) if ids]
    log(f"{b.name}: {len(b.queries)} queries, batched, k={K}, searchgym and bm25s in alternating rounds")
    t, t_direct = best_of_pair(
        lambda: fast.search(b.queries, K),
        lambda: direct.retrieve(term_ids, k=min(K, n), n_threads=fast.n_threads, show_progress=False),
        max(args.repeats, 5),
    )
    del direct
    r["bm25s_qps"] = len(b.queries) / t
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
    # Encoding the queries is most of a dense search on CPU (a few dozen per second).
    queries = b.queries[: args.dense_queries]
    single = min(100, len(queries))
    rows = []
    with tempfile.TemporaryDirectory(prefix="searchgym-bench-") as cache:
        for index in ("flat", "hnsw"):
            log(f"{corpus.name}: dense {index} index ({n:,} passages; the first one encodes them)")
            dense, build_s, rss = measure_build(
                lambda index=index: DenseRetriever(corpus, index=index, cache_dir=cache, batch_size=args.dense_batch_size)
            )
            dense.search(b.queries[:8], K)  # load the encoder before timing
            t = best_of(lambda dense=dense: dense.search(queries, K), args.repeats, min_seconds=0)
            t1 = best_of(lambda dense=dense: [dense.search([q], K) for q in queries[:single]], 1, min_seconds=0)
            rows.append(
                dict(
                    corpus=corpus.name,
                    index=index,
                    passages=n,
                    build_s=build_s,
                    qps=len(queries) / t,
                    single_ms=1000 * t1 / len(queries[:single]),
                    bytes_per_passage=dense.nbytes / n,
                    rss=rss,
                    device=dense.resolved_device,
                )
            )
    return rows


# ---------------------------------------------------------------------- environment overhead
#: Below this corpus size the 5% ratio target does not apply: a BM25 search there takes
#: well under 1 ms (0.08 ms on wiki-vital's 10,033 passages, 12 ms at 1M on an idle 2-core
#: CPU), and 5% of it is a few microseconds, less than any Python step (parse the turn,
#: render the documents, count the context, build info). Corpus size, not the measured
#: search time, decides, so that the load of a shared machine does not.
RATIO_TARGET_MIN_PASSAGES = 100_000


class ReplayRetriever(Retriever):
    """Answers each query with the hits ``retriever`` gave it, recorded beforehand: an env
    over it times the env's own work per step, with no search in it."""

    def __init__(self, retriever, queries: list[str], k: int):
        self.corpus = retriever.corpus
        self.max_query_chars = getattr(retriever, "max_query_chars", None)
        self._hits = dict(zip(queries, retriever.search(queries, k)))

    def search(self, queries, k):
        return [self._hits[q][:k] for q in queries]


def bench_env(b: Bench, retriever: BM25Retriever, steps: int, repeats: int) -> dict | None:
    """The env's own time per search step and ``retriever.search`` alone, on the same queries.

    Both are the best of ``repeats`` rounds of ``steps`` calls. Times are the process's CPU
    time (``time.process_time_ns``: every thread of the process, so work handed to a helper
    thread still counts), not wall time: on a shared CPU the wall time of a step also holds the
    time the process waited for a core (measured 237 us of "own time" at load 6 on wiki-vital
    where the CPU time was a fraction of it); wall times are kept beside for the table. The env
    runs over a :class:`ReplayRetriever`, so its time has no search in it: the overhead is
    measured directly instead of as the difference of two noisy times, which on a small corpus
    (a search of 0.1 ms) was mostly the noise of the two.
    """
    try:
        import gymnasium as gym

        import searchgym  # noqa: F401  (registers the environments)

        queries = b.queries[:steps]
        replay = ReplayRetriever(retriever, queries, ENV_TOP_K)
        env = gym.make(
            "searchgym/SearchR1-v0", corpus=b.corpus, dataset=b.examples, retriever=replay, top_k=ENV_TOP_K
        )
        env.reset(seed=0)
    except Exception as e:  # the environment is optional for this benchmark
        log(f"env not available: {type(e).__name__}: {e}")
        return None
    log(f"{b.name}: {repeats} x {len(queries)} environment steps and searches")
    # Episodes end after max_turns; the last turn does not search. Each round plays every
    # query in a search turn and restarts the episode before its final turn.
    last_search_turn = env.unwrapped.max_turns - 1

    def env_round() -> tuple[float, float]:
        cpu = wall = 0
        env.reset()
        turns = 0
        for query in queries:
            if turns == last_search_turn:
                env.reset()
                turns = 0
            start_cpu, start_wall = time.process_time_ns(), time.perf_counter_ns()
            _, _, _, _, info = env.step(f"<search> {query} </search>")
            cpu += time.process_time_ns() - start_cpu
            wall += time.perf_counter_ns() - start_wall
            turns += 1
            if not info["retrieved_ids"] and replay.search([query], 1)[0]:
                raise RuntimeError(f"the env did not search on turn {turns}: the timing would be wrong")
        return cpu / 1e9 / len(queries), wall / 1e9 / len(queries)

    def search_round() -> tuple[float, float]:
        start_cpu, start_wall = time.process_time_ns(), time.perf_counter_ns()
        for query in queries:
            retriever.search([query], ENV_TOP_K)
        return (time.process_time_ns() - start_cpu) / 1e9 / len(queries), (time.perf_counter_ns() - start_wall) / 1e9 / len(queries)

    def reference_round() -> float:
        # A fixed piece of pure Python (split, join, a small dict per query), timed in the same
        # rounds: how much the machine's own speed moved while the env was timed.
        start = time.process_time_ns()
        for query in queries:
            words = query.split()
            "".join(reversed(query))
            {i: w for i, w in enumerate(words)}
        return (time.process_time_ns() - start) / 1e9 / len(queries)

    env_round(), search_round(), reference_round()  # warm all three
    env_s, search_s, reference_s = [], [], []
    for _ in range(repeats):  # interleaved, so that a burst of load hits all three alike
        env_s.append(env_round())
        search_s.append(search_round())
        reference_s.append(reference_round())
    env.close()
    own, search = min(c for c, _ in env_s), min(c for c, _ in search_s)
    own_wall, search_wall = min(w for _, w in env_s), min(w for _, w in search_s)
    return dict(corpus=b.name, passages=len(b.corpus), search_ms=1000 * search, own_ms=1000 * own, step_ms=1000 * (own + search),
                overhead=own / (own + search), own_wall_ms=1000 * own_wall, search_wall_ms=1000 * search_wall,
                own_worst_ms=1000 * max(c for c, _ in env_s), machine_spread=max(reference_s) / min(reference_s))


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
                ["corpus", "retriever.search ms", "env's own ms", "env.step ms", "overhead", "wall: search / own ms"],
                [[e["corpus"], fmt(e["search_ms"], ".3f"), fmt(e["own_ms"], ".3f"), fmt(e["step_ms"], ".3f"),
                  fmt(100 * e["overhead"], ".1f") + "%", f"{e['search_wall_ms']:.3f} / {e['own_wall_ms']:.3f}"]
                 for e in env_rows if e],
            )
        )
        print(
            "\nCPU time of the process (the targets), best of the rounds; wall time beside it, which on a shared CPU also "
            "holds waits for a core. env's own ms: a step over the same hits replayed, no search in it; env.step ms = own + search."
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
        if not e:
            continue
        name = f"env overhead <= 5% of a BM25 step ({e['corpus']})"
        if e["passages"] >= RATIO_TARGET_MIN_PASSAGES:
            check(name, e["overhead"] <= 0.05, f"{100 * e['overhead']:.1f}%")
        else:
            # Not a loosened target: 5% of a search this cheap is a few microseconds, less than
            # any Python step. The env's own time is reported, not judged: an absolute time is
            # not comparable across runs on a shared machine (RESULTS.md, "Retrieval").
            check(name, None, f"{100 * e['overhead']:.1f}%, not checked: the ratio applies from "
                  f"{RATIO_TARGET_MIN_PASSAGES:,} passages (searches of ~1 ms and more); a search here took "
                  f"{e['search_ms']:.3f} ms and 5% of it, {50 * e['search_ms']:.0f} us, is less than any Python "
                  f"step. The env's own CPU time: {1000 * e['own_ms']:.0f} us a step (best round; worst "
                  f"{1000 * e['own_worst_ms']:.0f} us), while a fixed piece of Python timed in the same rounds "
                  f"varied {e['machine_spread']:.1f}x")
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
                   help="rank-bm25 runs on about this many passage scorings: queries = budget / passages (default 3e7; "
                   "--quick: 2e6)")
    p.add_argument("--repeats", type=int, default=3, help="best-of repeats for timed batches (default 3)")
    p.add_argument("--env-steps", type=int, default=300, help="search steps timed through the environment (default 300)")
    p.add_argument("--no-dense", action="store_true", help="skip the dense retriever")
    p.add_argument("--dense-passages", type=int, default=None,
                   help="encode the first N wiki-vital passages for the dense runs (default: all 10,033 with a GPU, "
                   "1,000 on CPU, where encoding runs at a few dozen passages/s; --quick: 100)")
    p.add_argument("--dense-queries", type=int, default=None,
                   help="queries timed on the dense retriever (default: all; --quick: 64)")
    p.add_argument("--dense-batch-size", type=int, default=64, help="encoder batch size (default 64)")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = [20_000] if args.quick else [1_000_000]
    if args.dense_passages is None:
        args.dense_passages = 100 if args.quick else (None if _has_cuda() else 1_000)
    if args.quick:
        args.repeats = min(args.repeats, 2)
        args.env_steps = min(args.env_steps, 100)
        args.max_queries = min(args.max_queries, 500)
        args.rank_budget_passages = min(args.rank_budget_passages, 2e6)
        args.dense_queries = args.dense_queries or 64
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
        env_rows.append(bench_env(b, retriever, args.env_steps, max(args.repeats, 5)))
        del retriever
        if not args.no_dense and b.name == "wiki-vital":
            dense_rows += bench_dense(b, args)
        b.corpus, b.queries, b.examples = None, [], []  # free the passages before the next corpus
        benches.append(b)
        gc.collect()
    return 1 if report(benches, dense_rows, env_rows, args) else 0


if __name__ == "__main__":
    sys.exit(main())
