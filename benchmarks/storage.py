"""Storage checks, measured: how fast ``searchgym index --verify`` reads a BM25 index and its
passage store, and what the cheap checks of every load cost, on the scale benchmark's
wiki-18-shaped corpus (``benchmarks/scale.py``'s generator).

    python benchmarks/storage.py --passages 1000000 --workdir /tmp/searchgym-scale   # ~6 min on 2 cores
    python benchmarks/storage.py --quick                                            # 20,000 passages in a temporary folder

The corpus (``WORKDIR/corpus-N-seed0/passages.jsonl``, written if absent, as scale.py writes
it) and its index (``WORKDIR/storage-index-N``, built once with ``searchgym index``) are kept.
Every measurement is a fresh ``searchgym`` process:

- verify, cached: ``verify_storage`` (what ``searchgym index --verify`` runs, with its progress
  bar) right after the files were read once (in the page cache): its own time, and the wall
  time of the whole ``searchgym index --verify`` command beside it;
- verify, cold: the same after every file was dropped from the page cache (``posix_fadvise``
  DONTNEED, no root needed), so the disk is read as well;
- the cheap load checks: ``check_postings`` + ``check_store`` (sizes, dtypes, shapes), best of
  20, beside a whole ``load_index`` (best of 5);
- what checksumming while writing adds to the build: ``add_scattered`` over as many postings
  as the index holds, in calls of one tokenizing shard's postings (100,000 passages' worth),
  in CPU seconds (best of 3), beside the CPU time of the build when it was built here.

The build's own cost of checksumming while writing is measured side by side, old code against
new, by ``benchmarks/build_compare.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scale import evict, write_flashrag_corpus  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}

_VERIFY = """
import json, sys, time
from searchgym.corpora.verify import verify_storage
cpu = time.process_time()
done = verify_storage(sys.argv[1])
print(json.dumps({"seconds": done.seconds, "cpu_seconds": time.process_time() - cpu, "bytes": done.bytes, "files": done.files}))
"""

_HASH = """
import json, sys, time
import numpy as np
from searchgym.corpora.checksum import Sum64, add_scattered
postings, per = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
positions = rng.permutation(per).astype(np.int64)  # the values the hash reads; where they point does not matter
scores, docs = rng.random(per).astype(np.float32), rng.integers(0, 2**31 - 1, per).astype(np.int32)
best = float("inf")
for _ in range(3):
    cpu = time.process_time()
    done = 0
    while done < postings:
        m = min(per, postings - done)
        add_scattered((Sum64(), Sum64()), 32, positions[:m], scores[:m], docs[:m])
        done += m
    best = min(best, time.process_time() - cpu)
print(json.dumps({"cpu_s": best}))
"""

_CHECKS = """
import json, sys, time
from pathlib import Path
from searchgym.corpora.index_folder import index_meta, rebuild_hint
from searchgym.corpora.indexes import load_index
from searchgym.corpora.mapped import check_store, store_folder
from searchgym.corpora.postings import check_postings
folder = Path(sys.argv[1])
meta = index_meta(folder)
store = store_folder(meta["corpus_path"])
store_meta = json.loads((store / "meta.json").read_text())
best = float("inf")
for _ in range(20):
    start = time.perf_counter()
    check_postings(folder, meta, rebuild_hint(folder, meta))
    check_store(store, store_meta)
    best = min(best, time.perf_counter() - start)
load = float("inf")
for _ in range(5):
    start = time.perf_counter()
    load_index(folder)
    load = min(load, time.perf_counter() - start)
print(json.dumps({"checks_s": best, "load_s": load}))
"""


def files_of(folder: Path, store: Path) -> list[Path]:
    return [p for base in (folder, store) for p in base.rglob("*") if p.is_file()]


def run(argv: list[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=ROOT)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return seconds, done.stdout


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--passages", type=int, default=1_000_000, help="corpus size (default 1,000,000)")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/searchgym-scale"), help="where the corpus and index are kept")
    p.add_argument("--quick", action="store_true", help="20,000 passages in a temporary folder (removed after): a smoke run")
    args = p.parse_args(argv)
    if args.quick:
        with tempfile.TemporaryDirectory(prefix="searchgym-storage-") as work:
            return measure(20_000, Path(work))
    return measure(args.passages, args.workdir)


def measure(n: int, workdir: Path) -> int:
    corpus = workdir / f"corpus-{n}-seed0" / "passages.jsonl"
    if not corpus.is_file():
        print(f"writing {corpus} ...", file=sys.stderr, flush=True)
        write_flashrag_corpus(corpus, n, seed=0)
    folder = workdir / f"storage-index-{n}"
    build_cpu = None
    if not (folder / "searchgym_bm25.json").is_file():
        print(f"building {folder} ...", file=sys.stderr, flush=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds, _ = run([sys.executable, "-m", "searchgym.cli", "index", "--corpus", str(corpus), "--out", str(folder), "--overwrite"])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build and its workers
        build_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(f"built in {seconds:.1f} s ({build_cpu:.1f} s of CPU, the first open of the corpus included)", file=sys.stderr, flush=True)
    meta = json.loads((folder / "searchgym_bm25.json").read_text())
    store = Path(str(corpus.resolve()) + ".searchgym")
    size = sum(p.stat().st_size for p in files_of(folder, store))
    verify = [sys.executable, "-m", "searchgym.cli", "index", "--verify", str(folder)]

    child = [sys.executable, "-c", _VERIFY, str(folder)]
    command, out = run(verify)  # reads every file once: the next ones find them in the page cache
    cached = json.loads(run(child)[1])
    for path in files_of(folder, store):
        evict(path)
    cold = json.loads(run(child)[1])
    _, checks = run([sys.executable, "-c", _CHECKS, str(folder)])
    checks = json.loads(checks)
    per_shard = max(1, meta["num_postings"] * 100_000 // n)
    hashing = json.loads(run([sys.executable, "-c", _HASH, str(meta["num_postings"]), str(per_shard)])[1])

    mb = cached["bytes"] / 1e6
    print(f"corpus: {corpus} ({n:,} passages, {meta['num_postings']:,} postings)")
    print(f"index + passage store: {size / 1e6:,.1f} MB in {len(files_of(folder, store))} files ({cached['files']} checksummed)")
    print(out.strip())
    print(f"searchgym index --verify, the whole command (Python's start and imports included): {command:.2f} s")
    for name, done in (("cached", cached), ("cold", cold)):
        seconds = done["seconds"]
        print(f"verify, {name + ':':7} {seconds:.2f} s, {mb / seconds:,.0f} MB/s, {n / seconds:,.0f} passages/s "
              f"({done['cpu_seconds']:.2f} s of CPU: {mb / done['cpu_seconds']:,.0f} MB per CPU-second)")
    print(f"cheap checks of a load: {checks['checks_s'] * 1e3:.2f} ms (best of 20); a whole load_index: {checks['load_s'] * 1e3:.0f} ms (best of 5)")
    beside = f" of a build that took {build_cpu:.1f} s of CPU here ({100 * hashing['cpu_s'] / build_cpu:.2f}%)" if build_cpu else ""
    print(f"checksumming the score arrays while building: {hashing['cpu_s']:.2f} s of CPU{beside}")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
