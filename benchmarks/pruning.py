"""BM25 with dynamic pruning (MaxScore) against exhaustive scoring, side by side in one process,
on the wiki-18-shaped generated corpora of ``benchmarks/scale.py``; bm25s beside them.

    python benchmarks/pruning.py --quick                         # 20k passages, 300 queries: a smoke run
    python benchmarks/pruning.py --sizes 300k,1M,3M              # the figures of RESULTS.md "Dynamic pruning"
    python benchmarks/pruning.py --sizes 300k --bm25s-sizes 300k --workdir /tmp/searchgym-scale

For each size: the corpus and its queries are ``scale.py``'s (written once into ``--workdir``,
shared with it), the index ``searchgym index`` builds (timed when this run builds it). Then,
with one retriever of each kind over the same memory-mapped folder
(``BM25Retriever.load(..., pruning=True / False)``):

- one at a time, k = 3 and k = 10: every query timed around ``search([q], k)`` (tokenizing
  included) on one thread, the two retrievers interleaved query by query (which goes first
  alternates), p50 and p99 of each and their ratio; every answer compared (passages, float32
  scores, order): any difference is a FAIL;
- batched: ``--batch`` queries in one ``search`` call on every core, best of ``--rounds``
  rounds interleaved: queries/s of each;
- bm25s (``--bm25s-sizes``, default 300k): its own index of the same corpus (built once),
  ``retrieve`` on the memory-mapped index one query at a time, k = 10: p50 beside
  searchgym's;
- the index: what the bounds cost, ``term_max.npy``'s bytes against the whole folder's and
  the time to compute them (:func:`~searchgym.corpora.pruning.term_maxima` over the mapped
  scores, the one step the build added) against the build's; and the share of postings the
  pruned queries added rather than skipped.

Targets (issue 57): p50 one at a time at 3M <= 1.5 ms (k = 3); at 300k, k = 10, >= 120x
bm25s's p50; batch throughput no lower than exhaustive scoring's; build time and index size
<= 1.2x. Sizes not measured are extrapolated by a least-squares line through the measured
ones (p50 against passages), as ``scale.py`` does; extrapolated figures are marked.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale  # noqa: E402  (the corpus generator and queries, shared with the scale benchmark)

WIKI18 = scale.WIKI18_PASSAGES


def log(message: str) -> None:
    scale.log(message)


def build_index(corpus: Path, out: Path) -> float | None:
    """``searchgym index`` into ``out`` unless it holds an index; its wall time when built here."""
    if (out / "searchgym_bm25.json").is_file():
        return None
    log(f"building {out} (searchgym index)")
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    subprocess.run([sys.executable, "-c", "from searchgym.cli import run; run()", "index", "--corpus", str(corpus), "--out", str(out)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def build_bm25s(corpus: Path, out: Path) -> None:
    if out.exists():
        return
    log(f"building {out} (bm25s, not timed)")
    scale.task_build_bm25s({"path": str(corpus), "out": str(out)})


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def one_at_a_time(pruned, plain, queries: list[str], k: int) -> dict:
    """Both retrievers timed query by query, interleaved; every answer compared."""
    times: dict[str, list[float]] = {"pruned": [], "exhaustive": []}
    differ = 0
    for q in queries[:20]:  # fault the mapped pages the first queries touch in, for both
        pruned.search([q], k), plain.search([q], k)
    for i, q in enumerate(queries):
        pair = (("pruned", pruned), ("exhaustive", plain)) if i % 2 else (("exhaustive", plain), ("pruned", pruned))
        got = {}
        for name, retriever in pair:
            start = time.perf_counter()
            hits = retriever.search([q], k)[0]
            times[name].append(time.perf_counter() - start)
            got[name] = [(h.passage.id, h.score) for h in hits]
        differ += got["pruned"] != got["exhaustive"]
    out = {name: percentiles(t) for name, t in times.items()}
    out["differ"] = differ
    out["queries"] = len(queries)
    return out


def batched(pruned, plain, queries: list[str], k: int, rounds: int) -> dict:
    best = {"pruned": float("inf"), "exhaustive": float("inf")}
    for r in range(rounds):
        for name, retriever in ((("pruned", pruned), ("exhaustive", plain)) if r % 2 else (("exhaustive", plain), ("pruned", pruned))):
            start = time.perf_counter()
            retriever.search(queries, k)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: {"queries_per_s": len(queries) / s, "seconds": s} for name, s in best.items()} | {"batch": len(queries)}


def bm25s_p50(index: Path, queries: list[str], k: int) -> dict:
    import bm25s
    import Stemmer

    model = bm25s.BM25.load(str(index), mmap=True)
    stemmer = Stemmer.Stemmer("english")
    times = []
    for i, q in enumerate(queries):
        start = time.perf_counter()
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stemmer, show_progress=False)
        model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        if i >= 5:  # the first few fault the mapped arrays in
            times.append(time.perf_counter() - start)
    return percentiles(times) | {"queries": len(times)}


def postings_share(retriever, queries: list[str], k: int) -> float:
    """Postings the pruned queries added, over the postings of their terms."""
    from searchgym.corpora.pruning import prune_top_k

    stats: dict[str, int] = {}
    for ids in retriever.analyzer.token_ids(queries, retriever._vocab, grow=False):
        if ids:
            prune_top_k(ids, k, retriever._data, retriever._indices, retriever._indptr, retriever._term_max, retriever._buffer(),
                        retriever._rank_exhaustive, stats=stats)
    return stats.get("added", 0) / max(1, stats.get("postings", 0))


def measure(n: int, args) -> dict:
    from searchgym.corpora import load_corpus
    from searchgym.corpora.bm25 import BM25Retriever
    from searchgym.corpora.pruning import term_maxima

    c = scale.prepare_corpus(args.workdir, n, args.seed, args.queries)
    folder = args.workdir / f"index-{n}-seed{args.seed}" / "searchgym"
    build_s = build_index(c["corpus"], folder)
    corpus = load_corpus(c["corpus"])
    pruned = BM25Retriever.load(folder, corpus, n_threads=1)
    plain = BM25Retriever.load(folder, corpus, n_threads=1, pruning=False)
    if not pruned.prunes:
        raise SystemExit(f"{folder} has no term bounds (built before them): rebuild it, or remove it and run again")
    queries = c["queries"]
    row: dict = {"passages": n, "build_s": build_s}
    files = {p.name: p.stat().st_size for p in folder.iterdir() if p.is_file()}
    row["index_bytes"] = sum(files.values())
    row["bounds_bytes"] = files.get("term_max.npy", 0)
    start = time.perf_counter()
    term_maxima(pruned._data, pruned._indptr)
    row["bounds_s"] = time.perf_counter() - start
    for k in (3, 10):
        log(f"{n:,}: k={k}, {len(queries):,} queries one at a time, pruned and exhaustive interleaved")
        row[f"one_k{k}"] = one_at_a_time(pruned, plain, queries, k)
        row[f"added_k{k}"] = postings_share(pruned, queries, k)
    rng = random.Random(args.seed)
    batch = [rng.choice(queries) for _ in range(args.batch)]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    pruned_b = BM25Retriever.load(folder, corpus, n_threads=cores)
    plain_b = BM25Retriever.load(folder, corpus, n_threads=cores, pruning=False)
    for k in (3, 10):
        log(f"{n:,}: k={k}, batches of {args.batch:,} on {cores} threads, best of {args.rounds}")
        row[f"batch_k{k}"] = batched(pruned_b, plain_b, batch, k, args.rounds) | {"threads": cores}
    if n in args.bm25s_sizes:
        bm_index = args.workdir / f"index-{n}-seed{args.seed}" / "bm25s"
        build_bm25s(c["corpus"], bm_index)
        log(f"{n:,}: bm25s, {args.bm25s_queries} queries one at a time, k=10")
        row["bm25s_k10"] = bm25s_p50(bm_index, queries[: args.bm25s_queries], 10)
    return row


def fit(sizes: list[int], values: list[float], at: int) -> float | None:
    if len(sizes) < 2:
        return None
    slope, intercept = np.polyfit(np.asarray(sizes, dtype=float), np.asarray(values, dtype=float), 1)
    return float(slope * at + intercept)


def report(rows: list[dict]) -> tuple[str, list[str]]:
    lines = ["| passages | k | p50 pruned (ms) | p50 exhaustive (ms) | ratio | p99 pruned (ms) | p99 exhaustive (ms) | "
             "postings added | answers differ |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for row in rows:
        for k in (3, 10):
            one = row[f"one_k{k}"]
            p, e = one["pruned"], one["exhaustive"]
            lines.append(f"| {row['passages']:,} | {k} | {p['p50_ms']:.3f} | {e['p50_ms']:.3f} | {e['p50_ms'] / p['p50_ms']:.2f}x | "
                         f"{p['p99_ms']:.2f} | {e['p99_ms']:.2f} | {row[f'added_k{k}']:.1%} | {one['differ']} of {one['queries']} |")
            if one["differ"]:
                verdicts.append(f"FAIL  {row['passages']:,}, k={k}: {one['differ']} answers differ from exhaustive scoring's")
    lines += ["", "| passages | k | batch | threads | pruned (queries/s) | exhaustive (queries/s) | ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        for k in (3, 10):
            b = row[f"batch_k{k}"]
            lines.append(f"| {row['passages']:,} | {k} | {b['batch']:,} | {b['threads']} | {b['pruned']['queries_per_s']:,.0f} | "
                         f"{b['exhaustive']['queries_per_s']:,.0f} | {b['pruned']['queries_per_s'] / b['exhaustive']['queries_per_s']:.2f}x |")
            ok = b["pruned"]["queries_per_s"] >= b["exhaustive"]["queries_per_s"]
            verdicts.append(f"{'PASS' if ok else 'FAIL'}  batch throughput no lower than exhaustive at {row['passages']:,}, k={k}: "
                            f"{b['pruned']['queries_per_s'] / b['exhaustive']['queries_per_s']:.2f}x")
    lines += ["", "| passages | index (MB) | term_max.npy (MB) | size ratio | build (s) | bounds (s) | build ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        size = row["index_bytes"] / (row["index_bytes"] - row["bounds_bytes"])
        build = "" if row["build_s"] is None else f"{row['build_s']:.1f}"
        ratio = "" if row["build_s"] is None else f"{row['build_s'] / (row['build_s'] - row['bounds_s']):.3f}x"
        lines.append(f"| {row['passages']:,} | {row['index_bytes'] / 1e6:,.1f} | {row['bounds_bytes'] / 1e6:,.2f} | {size:.3f}x | {build} | "
                     f"{row['bounds_s']:.2f} | {ratio} |")
        verdicts.append(f"{'PASS' if size <= 1.2 else 'FAIL'}  index size <= 1.2x at {row['passages']:,}: {size:.3f}x")
        if row["build_s"] is not None:
            r = row["build_s"] / (row["build_s"] - row["bounds_s"])
            verdicts.append(f"{'PASS' if r <= 1.2 else 'FAIL'}  build time <= 1.2x at {row['passages']:,}: {r:.3f}x "
                            "(the build against the build less the bounds' computation)")
    for row in rows:
        if "bm25s_k10" in row:
            ours, theirs = row["one_k10"]["pruned"]["p50_ms"], row["bm25s_k10"]["p50_ms"]
            verdicts.append(f"{'PASS' if theirs / ours >= 120 else 'FAIL'}  p50 at {row['passages']:,}, k=10, one at a time >= 120x "
                            f"bm25s's: {theirs / ours:.0f}x ({ours:.3f} ms against {theirs:.1f} ms; exhaustive "
                            f"{theirs / row['one_k10']['exhaustive']['p50_ms']:.0f}x)")
    sizes = [row["passages"] for row in rows]
    by_size = {row["passages"]: row for row in rows}
    for k in (3, 10):
        p50 = [row[f"one_k{k}"]["pruned"]["p50_ms"] for row in rows]
        at3m = by_size[3_000_000][f"one_k{k}"]["pruned"]["p50_ms"] if 3_000_000 in by_size else fit(sizes, p50, 3_000_000)
        at21m = fit(sizes, p50, WIKI18)
        how = "measured" if 3_000_000 in by_size else "extrapolated"
        if at3m is not None and k == 3:
            verdicts.append(f"{'PASS' if at3m <= 1.5 else 'FAIL'}  p50 at 3M, k=3, one at a time <= 1.5 ms: {at3m:.3f} ms ({how})")
        if at21m is not None:
            verdicts.append(f"INFO  p50 at 21M, k={k}, one at a time: {at21m:.2f} ms (extrapolated: a least-squares line through "
                            f"{', '.join(f'{s:,}' for s in sizes)})")
    return "\n".join(lines), verdicts


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=lambda s: [scale.parse_size(x) for x in s.split(",")], default=[300_000, 1_000_000],
                   help="corpus sizes, e.g. 300k,1M,3M (default 300k,1M)")
    p.add_argument("--bm25s-sizes", type=lambda s: [scale.parse_size(x) for x in s.split(",") if x], default=None,
                   help="sizes also timed with bm25s, k=10 (default 300k; '' for none)")
    p.add_argument("--quick", action="store_true", help="20k passages, 300 queries, bm25s on 100: a smoke run of every part")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/searchgym-scale"), help="corpora and indexes (shared with scale.py)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--queries", type=int, default=2000, help="queries timed one at a time (default 2000)")
    p.add_argument("--bm25s-queries", type=int, default=300, help="queries timed with bm25s (default 300)")
    p.add_argument("--batch", type=int, default=2560, help="queries in one batched search (default 2560: Search-R1's round)")
    p.add_argument("--rounds", type=int, default=3, help="batched rounds of each, the best kept (default 3)")
    p.add_argument("--out", type=Path, default=None, help="also write the rows and verdicts as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.bm25s_queries, args.batch, args.rounds = [20_000], 300, 100, 512, 2
        if args.bm25s_sizes is None:
            args.bm25s_sizes = [20_000]
    if args.bm25s_sizes is None:
        args.bm25s_sizes = [300_000]
    for name in ("queries", "bm25s_queries", "batch", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(args, name)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    load = os.getloadavg()
    print(f"load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {os.cpu_count()} cores")
    rows = []
    for n in args.sizes:
        rows.append(measure(n, args))
        if args.out:  # each size as it is done: a long run stopped half-way keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"rows": rows}, indent=2))
    table, verdicts = report(rows)
    load = os.getloadavg()
    print(table)
    print()
    print("\n".join(verdicts))
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"rows": rows, "verdicts": verdicts}, indent=2))
    return 1 if any(v.startswith("FAIL") and "differ" in v for v in verdicts) else 0


if __name__ == "__main__":
    raise SystemExit(main())
