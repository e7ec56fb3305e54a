"""searchgym's BM25 beside PISA (pyterrier-pisa), Tantivy and bm25s, side by side in one process
(issue 67), on the wiki-18-shaped generated corpora of ``benchmarks/scale.py``.

The other engines are not searchgym dependencies: they live in a benchmark venv (~3 min):

    python3 -m venv .venv-engines
    .venv-engines/bin/pip install pyterrier-pisa==0.4.9 tantivy==0.27.0 bm25s numpy numba PyStemmer tqdm gymnasium

(searchgym itself is imported from this checkout, so it needs no install there.) Then:

    .venv-engines/bin/python benchmarks/engines.py --quick          # 5k passages, 60 questions: a smoke run (~1 min)
    .venv-engines/bin/python benchmarks/engines.py --sizes 300k,1M  # the figures of RESULTS.md (issue 67)

    # an earlier commit's searchgym beside this checkout's, on the same index, in the same run:
    mkdir -p /tmp/sg-before && git archive HEAD~1 searchgym | tar -x -C /tmp/sg-before
    .venv-engines/bin/python benchmarks/engines.py --sizes 300k --engines searchgym,pisa --baseline /tmp/sg-before

Queries: questions as a Search-R1 agent writes them (:func:`questions`: a question word, a few
function words, the article's title and 3-8 words of one of its passages; 8-15 words), the
same for every engine. For each size, k = 3 and k = 10:

- **one at a time**: each engine's Python call for one query (searchgym ``search([q], k)``,
  PISA ``PisaRetrieve.search(q)``, Tantivy ``searcher.search(parse_query(q), k)`` and the
  ids of the hits, bm25s ``tokenize`` + ``retrieve``), engines interleaved query by query (the
  order rotates), p50 and p99;
- **batch**: ``--batch`` questions (2,560: Search-R1's round) in one call, on 1 thread and on
  every core, best of ``--rounds``: ms a query (Tantivy has no batch call: a loop on 1 thread,
  a thread pool on every core; both on a part of the batch, ``--tantivy-batch`` and
  ``--bm25s-batch``, since they are 10-100x slower);
- searchgym's **engine alone** (its compiled kernel on term ids, no tokenizing, no passages
  read), beside PISA's batch cost on one thread: the comparison of issue 67's target 2;
- **index**: build time (this run's; a reused index reports the time recorded when it was
  built), bytes on disk, resident memory the process gained loading it and answering the
  warm-up queries (mapped pages included);
- with ``--baseline DIR`` (another copy of searchgym: an earlier commit), two more rows: **baseline**,
  that copy's BM25Retriever on searchgym's index folder, and **checkout**, this checkout's the
  same way; each in a child process of its own that times its own calls (the same Python call as
  searchgym's row, without the pipe), interleaved with the others, so the two differ only in the
  code. Each also times the Python around its engine (the search call less the engine's
  ``_rank_many``: tokenizing, vocabulary lookups, the ``Hit``s), the fixed cost a query;
- **agreement** with PISA's top k at searchgym's k1 = 0.9, b = 0.4 (PISA and bm25s run at those;
  Tantivy's BM25 is fixed at k1 = 1.2, b = 0.75): the mean share of PISA's k ids each engine
  also returns. Tokenization differs: searchgym and bm25s split on ``\\w+`` (bm25s: its own
  regex), drop Lucene's 33 stop words and stem with Snowball English (PyStemmer); PISA splits on
  non-alphanumerics, drops the same Lucene list (``stops="lucene"``) and stems with Porter2
  (= Snowball English); Tantivy's ``en_stem`` lowercases, drops tokens over 40 bytes, stems with
  Snowball English and keeps stop words. PISA's default algorithm (block-max WAND) is used.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import scale  # noqa: E402  (the corpus generator, shared with the scale and pruning benchmarks)

ENGINES = ("searchgym", "pisa", "tantivy", "bm25s")
K1, B = 0.9, 0.4
_OPENERS = ["what is the", "who was the", "when did the", "where is the", "which", "how many", "what was the role of the",
            "who founded the", "in which year did the", "what is known about the"]


def log(message: str) -> None:
    scale.log(message)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def rss() -> int:
    return scale.proc_status()["VmRSS"]


def questions(corpus_path: Path, count: int, seed: int = 0) -> list[str]:
    """``count`` questions as a Search-R1 agent sends them: an opener ("who was the", "in which
    year did the", ...), 3-8 consecutive words of a random passage, "of" / "in" and the
    passage's title, a question mark (8-15 words, most of them indexed)."""
    rng = random.Random(seed)
    size = os.path.getsize(corpus_path)
    out = []
    with open(corpus_path, "rb") as f:
        while len(out) < count:
            f.seek(rng.randrange(size))
            f.readline()
            line = f.readline() or (f.seek(0) or f.readline())
            title, text = json.loads(line)["contents"].split("\n", 1)
            words = [w.strip(".,") for w in text.split()]
            n = rng.randint(3, 8)
            start = rng.randrange(max(1, len(words) - n))
            out.append(f"{rng.choice(_OPENERS)} {' '.join(words[start:start + n])} {rng.choice(['of', 'in'])} {title.strip(chr(34))}?")
    return out


def read_passages(path: Path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield row["id"], row["contents"]


def timed_build(folder: Path, build) -> float | None:
    """Run ``build()`` unless ``folder/build.json`` records one; its seconds (recorded)."""
    record = folder / "build.json"
    if record.is_file():
        return json.loads(record.read_text())["build_s"]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    start = time.perf_counter()
    build()
    seconds = time.perf_counter() - start
    record.write_text(json.dumps({"build_s": seconds}))
    return seconds


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and p.name != "build.json")


# ---------------------------------------------------------------------- the engines
class SearchGym:
    name = "searchgym"

    def __init__(self, corpus_path: Path, folder: Path, workers: int):
        self.folder = folder
        import pruning  # its build: `searchgym index` in a child process

        record = folder.parent / "searchgym-build.json"
        if record.is_file():
            self.build_s = json.loads(record.read_text())["build_s"]
        else:
            built = pruning.build_index(corpus_path, folder)
            if built is not None:
                record.write_text(json.dumps({"build_s": built}))
            self.build_s = built

    def load(self, corpus_path: Path):
        from searchgym.corpora import load_corpus
        from searchgym.corpora.bm25 import BM25Retriever

        corpus = load_corpus(corpus_path)
        self.one = BM25Retriever.load(self.folder, corpus, n_threads=1)
        self.many = BM25Retriever.load(self.folder, corpus, n_threads=cores())
        self.engine_s = 0.0
        if self.one.compiled:
            start = time.perf_counter()
            self.many._engine = self.one.block_max_engine()  # block maxima, once (shared)
            self.engine_s = time.perf_counter() - start
        self.index_bytes = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())

    def search(self, q: str, k: int) -> list[str]:
        return [h.passage.id for h in self.one.search([q], k)[0]]

    def batch(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        r = self.one if threads == 1 else self.many
        return [[h.passage.id for h in row] for row in r.search(qs, k)]

    def kernel(self, qs: list[str], k: int) -> float:
        """Seconds the compiled kernel alone takes for ``qs`` (term ids prepared before)."""
        ids = [t for t in self.one.term_ids(qs) if t]
        start = time.perf_counter()
        self.one._rank_many(ids, k)
        return time.perf_counter() - start


# What a child process of --baseline runs: ROOT CORPUS INDEX; then, a line per call, [queries, k]
# in and {"s": seconds, "engine": seconds, "ids": [[passage id, ...], ...]} out (the time of the
# search and of the ids' list, as SearchGym.search and .batch are timed; of it, the engine's).
_BASELINE_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import searchgym
from searchgym.corpora import load_corpus
from searchgym.corpora.bm25 import BM25Retriever
assert searchgym.__file__.startswith(sys.argv[1]), searchgym.__file__
r = BM25Retriever.load(sys.argv[3], load_corpus(sys.argv[2]), n_threads=1)
start = time.perf_counter()
if getattr(r, "compiled", False):
    r.block_max_engine()
print(json.dumps({"engine_s": time.perf_counter() - start}), flush=True)
inner = [0.0]
rank_many = r._rank_many
def timed(*args):
    start = time.perf_counter()
    out = rank_many(*args)
    inner[0] += time.perf_counter() - start
    return out
r._rank_many = timed
for line in sys.stdin:
    qs, k = json.loads(line)
    inner[0] = 0.0
    start = time.perf_counter()
    ids = [[h.passage.id for h in row] for row in r.search(qs, k)]
    seconds = time.perf_counter() - start
    print(json.dumps({"s": seconds, "engine": inner[0], "ids": ids}), flush=True)
"""


class Baseline:
    """searchgym's BM25 from a copy of searchgym (``--baseline DIR``, or this checkout) on
    searchgym's index folder, in a child process (two copies of one package cannot share a
    process), timing its own calls. One thread: its batch on all cores is its batch on one."""

    times_itself = True

    def __init__(self, corpus_path: Path, folder: Path, workers: int, root: Path, name: str):
        self.folder, self.root, self.name = folder, root, name
        self.build_s = None  # searchgym's index, built by its row

    def load(self, corpus_path: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", _BASELINE_CHILD, str(self.root), str(corpus_path), str(self.folder)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
        self.engine_s = json.loads(self.proc.stdout.readline())["engine_s"]
        self.index_bytes = sum(p.stat().st_size for p in self.folder.iterdir() if p.is_file())
        self.last_s = 0.0

    def _call(self, qs: list[str], k: int) -> list[list[str]]:
        self.proc.stdin.write(json.dumps([qs, k]) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        self.last_s, self.last_around = answer["s"], answer["s"] - answer["engine"]
        return answer["ids"]

    def search(self, q: str, k: int) -> list[str]:
        return self._call([q], k)[0]

    def batch(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        return self._call(qs, k)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


class Pisa:
    name = "pisa"

    def __init__(self, corpus_path: Path, folder: Path, workers: int):
        from pyterrier_pisa import PisaIndex

        self.folder = folder
        # At least 2 indexing threads: with 1 (one core: taskset -c 1), pyterrier-pisa 0.4.9's
        # indexer of 300k passages stopped for good, its main thread waiting on a futex while the
        # thread feeding its FIFO was blocked (twice, killed after 13 and 4 min); with 2 it built
        # them in 40 s, but hung the same way on 1M passages (twice). 5,000 passages build either way.
        index = lambda: PisaIndex(str(folder / "pisa"), stemmer="porter2", stops="lucene", threads=max(workers, 2)).index(
            {"docno": i, "text": t} for i, t in read_passages(corpus_path))
        self.build_s = timed_build(folder, index)

    def load(self, corpus_path: Path):
        from pyterrier_pisa import PisaIndex

        self.index = PisaIndex(str(self.folder / "pisa"), stemmer="porter2", stops="lucene", threads=1)
        self.retr: dict = {}
        self.index_bytes = dir_bytes(self.folder)

    def _r(self, k: int, threads: int):
        key = (k, threads)
        if key not in self.retr:
            self.retr[key] = self.index.bm25(k1=K1, b=B, num_results=k, threads=threads)
        return self.retr[key]

    def search(self, q: str, k: int) -> list[str]:
        return self._r(k, 1).search(q)["docno"].tolist()

    def batch(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        import pandas as pd

        frame = pd.DataFrame({"qid": [str(i) for i in range(len(qs))], "query": qs})
        res = self._r(k, threads).transform(frame)
        out: list[list[str]] = [[] for _ in qs]
        for qid, docno in zip(res["qid"].tolist(), res["docno"].tolist()):
            out[int(qid)].append(docno)
        return out


class Tantivy:
    name = "tantivy"

    def __init__(self, corpus_path: Path, folder: Path, workers: int):
        import tantivy

        self.folder = folder

        def build():
            (folder / "tantivy").mkdir()
            index = tantivy.Index(self._schema(), path=str(folder / "tantivy"), reuse=False)
            writer = index.writer(heap_size=512_000_000, num_threads=workers)
            for i, text in read_passages(corpus_path):
                writer.add_document(tantivy.Document(id=i, body=text))
            writer.commit()
            writer.wait_merging_threads()

        self.build_s = timed_build(folder, build)

    @staticmethod
    def _schema():
        import tantivy

        sb = tantivy.SchemaBuilder()
        sb.add_text_field("id", stored=True, tokenizer_name="raw")
        sb.add_text_field("body", stored=False, tokenizer_name="en_stem")
        return sb.build()

    def load(self, corpus_path: Path):
        import tantivy

        self.index = tantivy.Index(self._schema(), path=str(self.folder / "tantivy"), reuse=True)
        self.index.reload()
        self.searcher = self.index.searcher()
        self.index_bytes = dir_bytes(self.folder)
        self._pool = ThreadPoolExecutor(cores())

    def _query(self, q: str):
        words = "".join(c if c.isalnum() else " " for c in q).split()  # the query grammar's operators out
        return self.index.parse_query(" ".join(words), ["body"])

    def search(self, q: str, k: int) -> list[str]:
        s = self.searcher
        return [s.doc(addr)["id"][0] for _, addr in s.search(self._query(q), k).hits]

    def batch(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        if threads == 1:
            return [self.search(q, k) for q in qs]
        return list(self._pool.map(lambda q: self.search(q, k), qs, chunksize=64))


class BM25S:
    name = "bm25s"

    def __init__(self, corpus_path: Path, folder: Path, workers: int):
        self.folder = folder
        self.build_s = timed_build(folder, lambda: scale.task_build_bm25s({"path": str(corpus_path), "out": str(folder / "bm25s")}))

    def load(self, corpus_path: Path):
        import bm25s
        import Stemmer

        self.model = bm25s.BM25.load(str(self.folder / "bm25s"), mmap=True)
        self.stemmer = Stemmer.Stemmer("english")
        self.index_bytes = dir_bytes(self.folder)

    def _run(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        import bm25s

        tokens = bm25s.tokenize(qs, stopwords="en", stemmer=self.stemmer, show_progress=False)
        docs, _ = self.model.retrieve(tokens, k=k, show_progress=False, n_threads=threads)
        return [[str(d) for d in row] for row in docs.tolist()]  # ids "0".."N-1" are the line numbers

    def search(self, q: str, k: int) -> list[str]:
        return self._run([q], k, 1)[0]

    def batch(self, qs: list[str], k: int, threads: int) -> list[list[str]]:
        return self._run(qs, k, threads)


CLASSES = {"searchgym": SearchGym, "pisa": Pisa, "tantivy": Tantivy, "bm25s": BM25S}
CHILDREN = ("baseline", "checkout")  # the rows of --baseline


# ---------------------------------------------------------------------- measuring
def pct(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1e3
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)), "n": len(ms)}


def small_batch(name: str, args) -> int:
    """The batch an engine is timed on: bm25s and Tantivy (one query after the other in Python)
    take a part of the batch, ms a query being what is compared."""
    return {"bm25s": args.bm25s_batch, "tantivy": args.tantivy_batch}.get(name, args.batch)


def measure(n: int, args) -> dict:
    c = scale.prepare_corpus(args.workdir, n, args.seed, 10)
    qs = questions(c["corpus"], args.queries + args.batch, args.seed + 1)
    one_qs, batch_qs = qs[: args.queries], qs[args.queries :]
    base = args.workdir / f"index-{n}-seed{args.seed}"
    row: dict = {"passages": n, "queries": len(one_qs), "batch": len(batch_qs), "cores": cores(), "engines": {}}
    engines = {}
    for name in args.engines:
        log(f"{n:,}: {name}: index")
        folder = base / "searchgym" if name in ("searchgym", *CHILDREN) else base / f"engines-{name}"
        if name in CHILDREN:
            e = Baseline(c["corpus"], folder, cores(), args.baseline if name == "baseline" else ROOT, name)
        else:
            e = CLASSES[name](c["corpus"], folder, cores())
        gc.collect()
        before = rss()
        e.load(c["corpus"])
        for q in one_qs[:30]:  # warm-up: compile, fault pages in
            e.search(q, 10)
        engines[name] = e
        gained = None if name in CHILDREN else rss() - before  # a child's memory is not this process's
        row["engines"][name] = {"build_s": e.build_s, "index_bytes": e.index_bytes, "rss_bytes": gained}
        if name in ("searchgym", *CHILDREN):
            row["engines"][name]["block_maxima_s"] = e.engine_s
    for k in (3, 10):
        log(f"{n:,}: k={k}: {len(one_qs)} questions one at a time, engines interleaved")
        times: dict[str, list[float]] = {name: [] for name in engines}
        around: dict[str, list[float]] = {name: [] for name in engines if name in CHILDREN}
        answers: dict[str, list[list[str]]] = {name: [] for name in engines}
        names = list(engines)
        for i, q in enumerate(one_qs):
            for j in range(len(names)):
                name = names[(i + j) % len(names)]
                if name == "bm25s" and i >= args.bm25s_queries:
                    continue
                start = time.perf_counter()
                got = engines[name].search(q, k)
                seconds = time.perf_counter() - start
                times[name].append(engines[name].last_s if getattr(engines[name], "times_itself", False) else seconds)
                if name in around:
                    around[name].append(engines[name].last_around)
                answers[name].append(got)
        for name in names:
            r = row["engines"][name]
            r[f"one_k{k}"] = pct(times[name])
            if name in around:
                r[f"around_k{k}"] = pct(around[name])
            if "pisa" in answers and name != "pisa":
                ref = answers["pisa"]
                shares = [len(set(a) & set(p)) / len(p) for a, p in zip(answers[name], ref) if p]
                r[f"agree_k{k}"] = float(np.mean(shares)) if shares else None
        for threads in sorted({1, cores()}):
            log(f"{n:,}: k={k}: batches of {len(batch_qs):,} on {threads} thread(s), engines interleaved round by round, "
                f"best of {args.rounds}")
            best = {name: float("inf") for name in names}
            for rnd in range(args.rounds):
                for j in range(len(names)):
                    name = names[(rnd + j) % len(names)]
                    batch = batch_qs[: small_batch(name, args)]
                    start = time.perf_counter()
                    engines[name].batch(batch, k, threads)
                    seconds = time.perf_counter() - start
                    if getattr(engines[name], "times_itself", False):
                        seconds = engines[name].last_s
                    best[name] = min(best[name], seconds / len(batch))
            for name in names:
                batch = batch_qs[: small_batch(name, args)]
                row["engines"][name][f"batch_k{k}_t{threads}"] = {"ms_per_query": best[name] * 1e3, "queries": len(batch)}
        if "searchgym" in engines:
            best = min(engines["searchgym"].kernel(batch_qs, k) for _ in range(args.rounds))
            row["engines"]["searchgym"][f"kernel_k{k}"] = {"ms_per_query": best * 1e3 / len(batch_qs)}
    for name in CHILDREN:
        if name in engines:
            engines[name].close()
    return row


def report(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        n, e = row["passages"], row["engines"]
        lines += [f"### {n:,} passages ({row['queries']} questions one at a time, batch {row['batch']:,}, {row['cores']} cores)", "",
                  "| engine | k | p50 one (ms) | p99 one (ms) | batch, 1 thread (ms/q) | batch, all cores (ms/q) | agreement with PISA |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for k in (3, 10):
            for name, r in e.items():
                one = r[f"one_k{k}"]
                b1 = r.get(f"batch_k{k}_t1", {}).get("ms_per_query")
                bn = r.get(f"batch_k{k}_t{row['cores']}", {}).get("ms_per_query")
                ag = r.get(f"agree_k{k}")
                note = f" ({r[f'batch_k{k}_t1']['queries']} q)" if name in ("bm25s", "tantivy") else ""
                lines.append(f"| {name} | {k} | {one['p50_ms']:.3f} | {one['p99_ms']:.2f} | {b1:.3f}{note} | {bn:.3f}{note} | "
                             f"{'' if ag is None else f'{ag:.1%}'} |")
            if "searchgym" in e and f"kernel_k{k}" in e["searchgym"]:
                lines.append(f"| searchgym kernel only | {k} | | | {e['searchgym'][f'kernel_k{k}']['ms_per_query']:.3f} | | |")
        lines += ["", "| engine | build (s) | index (MB) | resident gained (MB) |", "|---|---:|---:|---:|"]
        for name, r in e.items():
            b = "" if r["build_s"] is None else f"{r['build_s']:.1f}"
            gained = "" if r["rss_bytes"] is None else f"{r['rss_bytes'] / 1e6:,.0f}"
            lines.append(f"| {name} | {b} | {r['index_bytes'] / 1e6:,.1f} | {gained} |")
        if "pisa" in e and "searchgym" in e:
            lines.append("")
            for k in (3, 10):
                pisa = e["pisa"][f"batch_k{k}_t1"]["ms_per_query"]
                sg = e["searchgym"]
                parts = [f"one at a time p50 {sg[f'one_k{k}']['p50_ms'] / pisa:.2f}x",
                         f"batch 1 thread {sg[f'batch_k{k}_t1']['ms_per_query'] / pisa:.2f}x"]
                if f"kernel_k{k}" in sg:
                    parts.append(f"kernel {sg[f'kernel_k{k}']['ms_per_query'] / pisa:.2f}x")
                lines.append(f"- k={k}: searchgym's cost a query over PISA's batch cost on 1 thread ({pisa:.3f} ms): " + ", ".join(parts))
        if all(name in e for name in CHILDREN):
            lines.append("")
            new, base = e["checkout"], e["baseline"]
            for k in (3, 10):
                one, was = new[f"one_k{k}"], base[f"one_k{k}"]
                lines.append(f"- k={k}: checkout over baseline: p50 one at a time {one['p50_ms'] / was['p50_ms']:.2f}x "
                             f"({one['p50_ms']:.3f} against {was['p50_ms']:.3f} ms), p99 {one['p99_ms'] / was['p99_ms']:.2f}x, batch 1 thread "
                             f"{new[f'batch_k{k}_t1']['ms_per_query'] / base[f'batch_k{k}_t1']['ms_per_query']:.2f}x; the Python around the "
                             f"engine a query (p50): {new[f'around_k{k}']['p50_ms'] * 1e3:.0f} against {base[f'around_k{k}']['p50_ms'] * 1e3:.0f} us")
            lines.append(f"- block maxima at load: checkout {new['block_maxima_s']:.3f} s, baseline {base['block_maxima_s']:.3f} s")
        lines.append("")
    return "\n".join(lines)


def size_parser(doc: str, default: list[int]) -> argparse.ArgumentParser:
    """The options every script on the generated corpora has (this one, ``bm25_floor.py``,
    ``bm25_split.py``): ``--sizes``, ``--workdir``, ``--seed``; each adds its own ``--quick``
    (and checks its sizes with :func:`check_sizes`)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=lambda s: [scale.parse_size(x) for x in s.split(",")], default=default,
                   help="corpus sizes, e.g. 300k,1M,3M (default "
                   + ",".join(f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" for n in default) + ")")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/searchgym-scale"),
                   help="corpora and indexes (shared with scale.py, engines.py, bm25_floor.py and bm25_split.py)")
    p.add_argument("--seed", type=int, default=0, help="the corpus generator's seed (default 0)")
    return p


def check_sizes(p: argparse.ArgumentParser, sizes: list[int], least: int = 1000) -> None:
    """``p.error`` unless every corpus size is at least ``least`` passages."""
    if any(n < least for n in sizes):
        p.error(f"--sizes expects corpora of at least {least // 1000}k passages, got {sizes}")


def compiled_index(n: int, args, script: str):
    """``(folder, retriever, questions)`` for the scripts that time searchgym's compiled engine
    alone (``bm25_floor.py``, ``bm25_split.py``): the generated corpus of ``n`` passages and
    searchgym's index of it in ``args.workdir`` (each built unless this script or an earlier run
    made it), the index loaded on one thread, and ``args.queries`` of this script's one-at-a-time
    questions. Exits, naming ``script``, when numba is missing."""
    from searchgym.corpora import load_corpus
    from searchgym.corpora.bm25 import BM25Retriever

    c = scale.prepare_corpus(args.workdir, n, args.seed, 10)
    folder = args.workdir / f"index-{n}-seed{args.seed}" / "searchgym"
    folder.parent.mkdir(parents=True, exist_ok=True)
    SearchGym(c["corpus"], folder, 1)  # builds the index unless there
    retriever = BM25Retriever.load(folder, load_corpus(c["corpus"]), n_threads=1)
    if not retriever.compiled:
        raise SystemExit(f"{script} measures the compiled engine: install numba (pip install 'searchgym[fast]')")
    return folder, retriever, questions(c["corpus"], args.queries, args.seed + 1)


def parse_args(argv=None):
    p = size_parser(__doc__, [300_000])
    p.add_argument("--quick", action="store_true", help="5k passages, 60 questions, batch 256: a smoke run of every part")
    p.add_argument("--engines", type=lambda s: s.split(","), default=list(ENGINES), help=f"default {','.join(ENGINES)}")
    p.add_argument("--queries", type=int, default=500, help="questions timed one at a time (default 500)")
    p.add_argument("--bm25s-queries", type=int, default=100, help="of them, timed with bm25s too (default 100)")
    p.add_argument("--batch", type=int, default=2560, help="questions in one batch (default 2560: Search-R1's round)")
    p.add_argument("--bm25s-batch", type=int, default=256, help="bm25s's batch (default 256)")
    p.add_argument("--tantivy-batch", type=int, default=512, help="Tantivy's batch (default 512)")
    p.add_argument("--rounds", type=int, default=3, help="batch rounds, the best kept (default 3)")
    p.add_argument("--out", type=Path, default=None, help="also write the rows as JSON here")
    p.add_argument("--baseline", type=Path, default=None,
                   help="another copy of searchgym (a folder holding its searchgym/ package, e.g. an earlier commit's `git archive`): "
                        "timed beside this checkout on the same index, both in child processes, as the rows 'baseline' and 'checkout'")
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.queries, args.bm25s_queries, args.batch, args.bm25s_batch, args.rounds = [5000], 60, 20, 256, 64, 1
        args.tantivy_batch = 128
    unknown = set(args.engines) - set(ENGINES)
    if unknown:
        p.error(f"--engines: unknown {sorted(unknown)}; known: {', '.join(ENGINES)}")
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()  # the child runs in / (so the checkout is not on its path)
        if not (args.baseline / "searchgym" / "__init__.py").is_file():
            p.error(f"--baseline expects a folder holding a searchgym/ package, got {args.baseline}")
        if "searchgym" not in args.engines:
            p.error("--baseline is timed beside searchgym: keep searchgym in --engines")
        at = args.engines.index("searchgym") + 1
        args.engines[at:at] = list(CHILDREN)
    for name in ("queries", "bm25s_queries", "batch", "bm25s_batch", "tantivy_batch", "rounds"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(args, name)}")
    missing = missing_engines(args.engines)
    if missing:
        p.error(f"{', '.join(missing)} not importable by {sys.executable}: the engines live in a venv of their own, "
                "made by: python3 -m venv .venv-engines && .venv-engines/bin/pip install " + " ".join(PACKAGES)
                + "; then run .venv-engines/bin/python benchmarks/engines.py (or pass --engines searchgym,bm25s)")
    return args


#: What .venv-engines holds (the module docstring's command).
PACKAGES = ("pyterrier-pisa==0.4.9", "tantivy==0.27.0", "bm25s", "numpy", "numba", "PyStemmer", "tqdm", "gymnasium")
_MODULES = {"searchgym": "numpy", "pisa": "pyterrier_pisa", "tantivy": "tantivy", "bm25s": "bm25s", "baseline": "numpy", "checkout": "numpy"}


def missing_engines(names) -> list[str]:
    import importlib.util

    return [f"{name} ({_MODULES[name]})" for name in names if importlib.util.find_spec(_MODULES[name]) is None]


def run(args, measure_size, report_rows) -> int:
    """``measure_size(n, args)`` for each of ``args.sizes`` (the rows written to ``args.out``
    after each, so a long run stopped half-way keeps what it measured), then
    ``report_rows(rows)`` printed between the load averages (shared with ``bm25_floor.py`` and
    ``bm25_split.py``)."""
    load = os.getloadavg()
    print(f"load average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {cores()} cores", flush=True)
    rows = []
    for n in args.sizes:
        rows.append(measure_size(n, args))
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"rows": rows}, indent=2))
    print(report_rows(rows))
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return 0


def main(argv=None) -> int:
    return run(parse_args(argv), measure, report)


if __name__ == "__main__":
    raise SystemExit(main())
