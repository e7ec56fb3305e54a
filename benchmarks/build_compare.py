"""BM25 build, side by side: this checkout's ``searchgym index`` against another checkout's
(e.g. the code before a change), on the same corpus, rounds interleaved, every build a fresh
process. Prints wall and CPU time (user + sys of the build and its worker processes, which a
loaded machine inflates less than wall time), their ratios, and whether the two indexes'
arrays are byte-identical.

    git archive HEAD~1 searchgym | tar -x -C /tmp/old        # the code to compare against
    python benchmarks/scale.py --sizes 200k --sections open  # or any FlashRAG passages file
    python benchmarks/build_compare.py --corpus /tmp/searchgym-scale/corpus-200000-seed0/passages.jsonl \\
        --old /tmp/old --rounds 2

``--old`` is a folder holding a ``searchgym`` package; the corpus's passage store is built
once before the first round (opening a corpus is not what is measured).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARRAYS = ("data.npy", "indices.npy", "indptr.npy", "vocab_hash.npy", "vocab_ids.npy")


def build(root: Path, corpus: Path, out: Path) -> tuple[float, float]:
    """(wall s, user + sys s) of one ``searchgym index`` run by the searchgym under ``root``."""
    env = dict(os.environ, PYTHONPATH=str(root))
    argv = [sys.executable, "-m", "searchgym.cli", "index", "--corpus", str(corpus), "--retriever", "bm25", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    # cwd too: ``python -m`` puts the working directory first on sys.path.
    subprocess.run(argv, env=env, cwd=root, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for workers included
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def identical(a: Path, b: Path) -> bool:
    return all((a / name).read_bytes() == (b / name).read_bytes() for name in ARRAYS)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="a FlashRAG passages file")
    p.add_argument("--old", type=Path, required=True, help="a folder holding the searchgym package to compare against")
    p.add_argument("--rounds", type=int, default=2, help="builds of each, interleaved (default 2)")
    p.add_argument("--workdir", type=Path, default=None, help="where the indexes go (default: a temporary folder)")
    args = p.parse_args(argv)
    if not (args.old / "searchgym" / "__init__.py").is_file():
        p.error(f"--old expects a folder holding a searchgym package, got {str(args.old)!r}")
    sides = {"old": args.old.resolve(), "new": ROOT}
    args.corpus = args.corpus.resolve()
    subprocess.run([sys.executable, "-c", f"from searchgym.corpora import load_corpus; load_corpus({str(args.corpus)!r})"],
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    work = Path(tempfile.mkdtemp(prefix="build-compare-", dir=args.workdir))
    times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    try:
        for r in range(args.rounds):
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                out = work / f"{side}-{r}"
                wall, cpu = build(sides[side], args.corpus, out)
                times[side].append((wall, cpu))
                print(f"round {r + 1} {side}: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)
        same = identical(work / "old-0", work / "new-0")
        best = {side: (min(w for w, _ in t), min(c for _, c in t)) for side, t in times.items()}
        print(f"\ncorpus: {args.corpus}  ({args.rounds} rounds each, interleaved; best of each)")
        print(f"old: {best['old'][0]:.1f} s wall, {best['old'][1]:.1f} s CPU")
        print(f"new: {best['new'][0]:.1f} s wall, {best['new'][1]:.1f} s CPU")
        print(f"old / new: {best['old'][0] / best['new'][0]:.2f}x wall, {best['old'][1] / best['new'][1]:.2f}x CPU")
        print(f"arrays byte-identical ({', '.join(ARRAYS)}): {'yes' if same else 'NO'}")
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
