"""One BM25 question split across cores: what it gives here and on more cores (issue 67, target 3).

``benchmarks/bm25_floor.py`` measured that no exact MaxScore / WAND engine answers Search-R1's
8-15-word questions in 3 ms at wiki-18's 21M passages on **one** core: even with its final
threshold known, a question walks ~818,000 essential postings there (extrapolated). The
compiled engine can instead split one question's passages in ranges of corpus order, each on
its own thread, the ranges passing their thresholds to one another
(``BlockMaxIndex.top_k_split``; ``BM25Retriever(query_threads=N)``). This script measures it on
the generated wiki-18-shaped corpora of ``benchmarks/scale.py`` and the questions of
``benchmarks/engines.py``, for k = 3 and 10:

- **threaded** (measured, as many slices as this machine has cores at most): the wall time of
  ``top_k_split`` on S threads, beside the same call on one slice, question by question, and
  ``BM25Retriever.search([question], k)`` with ``query_threads`` = cores against 1 (what a
  caller sees; the retriever splits only corpora of 2 x ``SLICE_MIN`` passages or more);
- **each slice alone** (measured one after the other on one core, for S up to 32): the
  longest slice's time when no threshold passes between slices (each starts from the whole
  corpus's first threshold and raises only its own: an upper bound of one core's share), and
  when every slice starts from the question's final threshold
  (thresholds shared at once: the lower bound); the slices' work summed over the work of the
  whole question in one piece; the answers are checked equal to the engine's on the whole;
- **on S cores (model)**: question by question, the longest slice alone plus the work around
  the slices (the whole corpus's first threshold, the merge), plus the hand-off measured here
  on a question of one posting: two slices on two threads over one (a worker woken, the caller woken: this
  VM's latency) and S - 2 more slices at their dispatch and ``submit`` cost each. Memory
  bandwidth is not modelled: a question reads ~8 MB of postings at 3M, far below one
  socket's bandwidth in the milliseconds it takes.

Each p50 and p99 is fitted with a line through the sizes measured and **extrapolated** to 21M.
Only searchgym is needed (numba: ``pip install 'searchgym[fast]'``, part of ``make install``);
corpora and indexes are shared with ``benchmarks/engines.py`` and ``bm25_floor.py``::

    python benchmarks/bm25_split.py --quick                   # ~6 s: 20k passages, 40 questions
    python benchmarks/bm25_split.py --sizes 300k,1M,3M        # the figures of RESULTS.md
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bm25_floor  # noqa: E402  (the line to 21M)
import engines  # noqa: E402  (the questions, searchgym's index build, the run)

KS = (3, 10)
SLICES = (1, 2, 4, 8, 16, 32)
P = (50, 99)


def percentiles(seconds) -> dict[str, float]:
    return {f"p{p}": float(np.percentile(seconds, p)) * 1e3 for p in P}


def handoff(engine, repeats: int = 2000) -> dict[str, float]:
    """What handing slices to threads costs, on a question of one posting (no search work),
    medians in seconds: ``two``, two slices on two threads over one slice (a task handed to the
    pool, a worker woken, the caller woken when it waits: the hand-off's latency); ``each``, one
    more slice beyond two (its dispatch, run one after the other, plus a pool ``submit``): on S
    cores a question pays ``two + (S - 2) * each`` beyond its longest slice and the work
    around the slices (the first threshold, the merge: measured question by question)."""
    lengths = np.diff(engine.indptr)
    term = int(np.argmax(lengths == 1)) if (lengths == 1).any() else int(np.argmin(lengths))

    def median(call) -> float:
        call()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    one = median(lambda: engine.top_k_split([term], 10, 1))
    two = median(lambda: engine.top_k_split([term], 10, 2))
    eight = median(lambda: engine.top_k_split([term], 10, 8, parallel=False))
    with ThreadPoolExecutor(1) as pool:
        submit = median(lambda: pool.submit(int))
    return {"two": max(0.0, two - one), "each": max(0.0, (eight - one) / 7) + submit}


def measure(n: int, args) -> dict:
    from searchgym.corpora.blockmax import SLICE_MIN
    from searchgym.corpora.bm25 import BM25Retriever

    folder, one, qs = engines.compiled_index(n, args, "bm25_split.py")  # engines.py's corpora, index and questions
    cores = engines.cores()
    split = BM25Retriever.load(folder, one.corpus, n_threads=1, query_threads=cores)
    split._engine = engine = one.block_max_engine()  # one engine (its block maxima) for both
    kept = [(q, t) for q, t in zip(qs, one.term_ids(qs)) if t]
    qs, queries = [q for q, _ in kept], [t for _, t in kept]
    threaded = [s for s in args.slices if s <= cores]
    row: dict = {"passages": n, "questions": len(queries), "cores": cores, "slice_min": SLICE_MIN,
                 "retriever_slices": min(cores, n // SLICE_MIN),
                 **{f"handoff_{key}_ms": value * 1e3 for key, value in handoff(engine).items()}}
    for k in KS:
        docs, scores, counts = engine.top_k_many(queries, k)
        final = [float(scores[i, k - 1]) if counts[i] >= k else 0.0 for i in range(len(queries))]
        m: dict = {}
        engines.log(f"{n:,}: k={k}: {len(queries)} questions on 1 to {max(threaded)} threads, interleaved")
        for q in qs[:3]:  # compile / page in
            one.search([q], k), split.search([q], k)
        wall = {s: [] for s in threaded}
        plain, sliced = [], []
        for i, terms in enumerate(queries):
            for s in threaded:
                start = time.perf_counter()
                got = engine.top_k_split(terms, k, s)
                wall[s].append(time.perf_counter() - start)
                check(got, docs[i], scores[i], counts[i], f"{n:,} passages, k={k}, {s} threads, question {i}")
            start = time.perf_counter()
            a = one.search([qs[i]], k)
            plain.append(time.perf_counter() - start)
            start = time.perf_counter()
            b = split.search([qs[i]], k)
            sliced.append(time.perf_counter() - start)
            if [(h.passage.id, h.score) for h in a[0]] != [(h.passage.id, h.score) for h in b[0]]:
                raise SystemExit(f"query_threads={cores} answered question {i} otherwise than one thread ({n:,} passages, k={k})")
        for s in threaded:
            m[f"threaded_s{s}"] = percentiles(wall[s])
        m["search_1"], m["search_split"] = percentiles(plain), percentiles(sliced)
        engines.log(f"{n:,}: k={k}: slices {','.join(map(str, args.slices))} alone, one after the other")
        whole = np.zeros(len(queries))
        for s in args.slices:
            alone, known, work, model = [], [], [], []
            seconds = np.zeros(s)
            extra = 0.0 if s == 1 else (row["handoff_two_ms"] + (s - 2) * row["handoff_each_ms"]) / 1e3
            for i, terms in enumerate(queries):
                start = time.perf_counter()
                got = engine.top_k_split(terms, k, s, parallel=False, seconds=seconds)
                serial = time.perf_counter() - start - seconds.sum()  # the first threshold, the arrays, the merge
                check(got, docs[i], scores[i], counts[i], f"{n:,} passages, k={k}, {s} slices alone, question {i}")
                alone.append(seconds.max())
                model.append(serial + seconds.max() + extra)
                if s == 1:
                    whole[i] = seconds[0]
                work.append(seconds.sum())
                got = engine.top_k_split(terms, k, s, parallel=False, floor=final[i], seconds=seconds)
                check(got, docs[i], scores[i], counts[i], f"{n:,} passages, k={k}, {s} slices from the final threshold, question {i}")
                known.append(seconds.max())
            m[f"alone_s{s}"], m[f"known_s{s}"], m[f"model_s{s}"] = percentiles(alone), percentiles(known), percentiles(model)
            m[f"work_s{s}"] = float(np.sum(work) / np.sum(whole))
        row[f"k{k}"] = flat(m)
    return row


def check(got, docs, scores, count, where: str) -> None:
    d, s, c = got
    if c != count or not (np.array_equal(d[:c], docs[:c]) and np.array_equal(s[:c], scores[:c])):
        raise SystemExit(f"the split answer differs from the engine's on the whole corpus: {where}")


def flat(m: dict) -> dict[str, float]:
    """``{"alone_s2": {"p50": ..}}`` as ``{"alone_s2_p50": ..}`` (what bm25_floor.extrapolate reads)."""
    out = {}
    for key, value in m.items():
        if isinstance(value, dict):
            out.update({f"{key}_{p}": v for p, v in value.items()})
        else:
            out[key] = value
    return out


def report(rows: list[dict]) -> str:
    slices = sorted({int(key.split("_s")[1].split("_")[0]) for r in rows for key in r["k10"] if key.startswith("alone_s")})
    lines = []
    for r in rows:
        lines += [f"### {r['passages']:,} passages ({r['questions']} questions, {r['cores']} cores; hand-off to a second "
                  f"thread {r['handoff_two_ms'] * 1e3:.0f} us, each slice more {r['handoff_each_ms'] * 1e3:.1f} us)", "",
                  "| k | slices | threaded here p50 / p99 ms | each alone: longest p50 / p99 ms | from the final threshold: "
                  "longest p50 / p99 ms | work summed / whole | on that many cores (model) p50 / p99 ms |",
                  "|---:|---:|---|---|---|---:|---|"]
        for k in KS:
            m = r[f"k{k}"]
            for s in slices:
                here = f"{m[f'threaded_s{s}_p50']:.2f} / {m[f'threaded_s{s}_p99']:.2f}" if f"threaded_s{s}_p50" in m else ""
                lines.append(f"| {k} | {s} | {here} | {m[f'alone_s{s}_p50']:.2f} / {m[f'alone_s{s}_p99']:.2f} | "
                             f"{m[f'known_s{s}_p50']:.2f} / {m[f'known_s{s}_p99']:.2f} | {m[f'work_s{s}']:.2f} | "
                             f"{m[f'model_s{s}_p50']:.2f} / {m[f'model_s{s}_p99']:.2f} |")
        lines.append("")
        for k in KS:
            m = r[f"k{k}"]
            for s in slices:
                if s > 1 and f"threaded_s{s}_p50" in m:
                    lines.append(f"- k={k}, {s} threads: measured here over the model, p50 {m[f'threaded_s{s}_p50'] / m[f'model_s{s}_p50']:.2f}x, "
                                 f"p99 {m[f'threaded_s{s}_p99'] / m[f'model_s{s}_p99']:.2f}x")
            split = (f"split in {r['retriever_slices']}" if r["retriever_slices"] > 1
                     else f"not split: under 2 x SLICE_MIN = {2 * r['slice_min']:,} passages")
            lines.append(f"- k={k}: `search([question], k)` p50 / p99 {m['search_1_p50']:.2f} / {m['search_1_p99']:.2f} ms on "
                         f"one thread, {m['search_split_p50']:.2f} / {m['search_split_p99']:.2f} ms with query_threads="
                         f"{r['cores']} ({split})")
        lines.append("")
    # the model's error where it could be measured: the most threads here, at the largest size
    last = rows[-1]
    most = max((s for s in slices if s > 1 and f"threaded_s{s}_p50" in last["k10"]), default=None)
    for k in KS:
        if len(rows) < 2:
            lines.append(f"- k={k}: one size measured, nothing extrapolated (give --sizes two or more)")
            continue
        parts = []
        for s in slices:
            p50 = bm25_floor.extrapolate(rows, f"model_s{s}_p50", k)
            p99 = bm25_floor.extrapolate(rows, f"model_s{s}_p99", k)
            low = bm25_floor.extrapolate(rows, f"known_s{s}_p50", k)
            parts.append(f"{s}: {p50:.1f} (p99 {p99:.1f}; {low:.1f} from the final threshold)")
        lines.append(f"- k={k}, at {bm25_floor.WIKI18 / 1e6:.0f}M passages, extrapolated on a line through the sizes, "
                     f"p50 ms on S cores (model): " + "; ".join(parts))
        if most is not None:
            m = last[f"k{k}"]
            ratio = m[f"threaded_s{most}_p50"] / m[f"model_s{most}_p50"]
            lines.append(f"  - times {ratio:.2f}, what {most} threads measured here took over the model at {last['passages']:,} "
                         "passages: " + "; ".join(f"{s}: {bm25_floor.extrapolate(rows, f'model_s{s}_p50', k) * ratio:.1f}"
                                                    for s in slices if s > 1))
    return "\n".join(lines)


def parse_args(argv=None):
    p = engines.size_parser(__doc__, [300_000, 1_000_000])
    p.add_argument("--quick", action="store_true", help="20k passages, 40 questions, 1-8 ranges: a smoke run of every part")
    p.add_argument("--queries", type=int, default=300, help="questions (default 300)")
    p.add_argument("--slices", type=lambda s: [int(x) for x in s.split(",")], default=list(SLICES),
                   help=f"slices a question is split in (default {','.join(map(str, SLICES))})")
    p.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.slices = [20_000], 40, [1, 2, 4, 8]
    if args.queries < 1:
        p.error(f"--queries expects a positive integer, got {args.queries}")
    if not args.slices or min(args.slices) < 1 or 1 not in args.slices:
        p.error(f"--slices expects positive integers including 1 (the whole question, what the others are compared with), "
                f"got {args.slices}")
    args.slices = sorted(set(args.slices))
    engines.check_sizes(p, args.sizes)
    return args


def main(argv=None) -> int:
    return engines.run(parse_args(argv), measure, report)


if __name__ == "__main__":
    raise SystemExit(main())
