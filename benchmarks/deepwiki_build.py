"""Building and opening deepwiki worlds (issue 62): time, memory and disk per size.

    python benchmarks/deepwiki_build.py                   # 10,000 and 100,000 documents
    python benchmarks/deepwiki_build.py --quick           # 1,000 and 10,000
    python benchmarks/deepwiki_build.py --sizes 20000     # any sizes

For each size, in a temporary ``SEARCHGYM_CACHE`` (removed afterwards unless ``--keep``):

- build: a fresh process runs ``deepwiki.generate(num_documents=N)`` (default knobs): the
  world, its questions, the articles streamed to ``corpus.jsonl``, then the memory-mapped
  passage store built on first open. Reported: its wall time, the part spent writing the
  files (``meta.json``'s ``build_seconds``), the peak of the process's own memory (RssAnon,
  sampled every 20 ms) and its peak resident memory (VmHWM), which also counts the pages of
  the mapped passage store that indexing its ids touched (shared page cache, dropped when
  unmapped);
- open: another fresh process opens the built world (``generate`` again: it finds the
  files) and reads every question. Reported: the open time, resident memory (VmRSS) before
  importing searchgym's corpus code, after the open, and after reading ``--reads`` random
  documents (1,000 by default) in full (and, of that, the process's own memory, RssAnon);
- disk: ``corpus.jsonl``, its passage store and ``questions.jsonl``.

Prints one markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MEMORY = '''
def memory():
    fields = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields
'''

_BUILD = _MEMORY + '''
import json, sys, threading, time
peak = {"RssAnon": 0.0}
done = threading.Event()
def sample():  # the peak of the process's own (anonymous) memory; VmHWM also counts mapped file pages
    while not done.wait(0.02):
        peak["RssAnon"] = max(peak["RssAnon"], memory()["RssAnon"])
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
started = time.perf_counter()
from searchgym.corpora import deepwiki
world = deepwiki.generate(num_documents=int(sys.argv[1]))
seconds = time.perf_counter() - started
done.set()
sampler.join()
meta = json.loads((world.folder / "meta.json").read_text())
print(json.dumps({"build_s": seconds, "files_s": meta["build_seconds"], "build_hwm_mb": memory()["VmHWM"],
                  "build_anon_mb": max(peak["RssAnon"], memory()["RssAnon"]),
                  "folder": str(world.folder), "questions": meta["knobs"]["num_questions"]}))
'''

_OPEN = _MEMORY + '''
import json, sys, time
base = memory()["VmRSS"]
started = time.perf_counter()
from searchgym.corpora import deepwiki
world = deepwiki.generate(num_documents=int(sys.argv[1]))
questions = world.all_questions
opened = time.perf_counter() - started
after_open = memory()
import numpy as np
rng = np.random.default_rng(0)
corpus = world.corpus
started = time.perf_counter()
chars = sum(len(corpus[int(i)].text) for i in rng.integers(len(corpus), size=int(sys.argv[2])))
reading = time.perf_counter() - started
after_reads = memory()
print(json.dumps({"open_s": opened, "base_mb": base, "open_rss_mb": after_open["VmRSS"],
                  "reads_rss_mb": after_reads["VmRSS"], "reads_anon_mb": after_reads["RssAnon"], "reads_hwm_mb": after_reads["VmHWM"], "read_s": reading,
                  "chars": chars, "questions_read": len(questions), "corpus_type": type(corpus).__name__}))
'''


def _run(code: str, args: list[str], cache: Path) -> dict:
    env = dict(os.environ, SEARCHGYM_CACHE=str(cache), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"benchmark step failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def measure(size: int, reads: int, workdir: Path | None, keep: bool) -> dict:
    cache = Path(tempfile.mkdtemp(prefix=f"deepwiki-{size}-", dir=workdir))
    try:
        built = _run(_BUILD, [str(size)], cache)
        opened = _run(_OPEN, [str(size), str(reads)], cache)
        folder = Path(built["folder"])
        disk = {"corpus_mb": _size_mb(folder / "corpus.jsonl"), "store_mb": _size_mb(folder / "corpus.jsonl.searchgym"),
                "questions_mb": _size_mb(folder / "questions.jsonl")}
        return {"size": size, **built, **opened, **disk}
    finally:
        if not keep:
            shutil.rmtree(cache, ignore_errors=True)


def table(rows: list[dict], reads: int) -> str:
    head = ("| documents | questions | build (s) | of which writing files (s) | build peak: own memory / RSS (MB) | open (s) "
            f"| RSS: bare / opened / after {reads:,} reads (own memory) (MB) | corpus.jsonl (MB) | passage store (MB) "
            "| questions.jsonl (MB) |")
    lines = [head, "|" + "---:|" * 10]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['questions']:,} | {r['build_s']:.1f} | {r['files_s']:.1f} "
            f"| {r['build_anon_mb']:.0f} / {r['build_hwm_mb']:.0f} "
            f"| {r['open_s']:.2f} | {r['base_mb']:.0f} / {r['open_rss_mb']:.0f} / {r['reads_rss_mb']:.0f} ({r['reads_anon_mb']:.0f}) "
            f"| {r['corpus_mb']:,.0f} | {r['store_mb']:,.0f} | {r['questions_mb']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Each size runs in fresh processes with a temporary SEARCHGYM_CACHE.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000], help="numbers of documents (default: 10000 100000)")
    parser.add_argument("--quick", action="store_true", help="sizes 1000 and 10000")
    parser.add_argument("--reads", type=int, default=1000, help="random documents read after opening (default 1000)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the temporary caches go (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the built worlds")
    args = parser.parse_args(argv)
    sizes = [1000, 10_000] if args.quick else args.sizes
    rows = []
    for size in sizes:
        row = measure(size, args.reads, args.workdir, args.keep)
        print(f"{size:,} documents: build {row['build_s']:.1f} s, open {row['open_s']:.2f} s", file=sys.stderr, flush=True)
        rows.append(row)
    print(table(rows, args.reads))


if __name__ == "__main__":
    main()
