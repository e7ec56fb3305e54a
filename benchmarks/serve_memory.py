"""`searchgym serve`'s memory and latency under a long stream of distinct query words: the
stem cache as shipped (bounded; query words the index lacks not remembered) against
searchgym's earlier one (every word remembered, no bound short of millions), side by side
in one run.

    python benchmarks/serve_memory.py                 # 2,000,000 distinct words
    python benchmarks/serve_memory.py --quick         # 200,000 distinct words: a smoke run
    python benchmarks/serve_memory.py --words 1000000 --batch 2560 --passages 20000

Two server processes over the same corpus (synthwiki, BM25), started with the same flags;
one keeps the earlier cache (``Analyzer.keep_unknown`` on, ``max_words`` past the stream).
One client sends both the same requests, alternately (which goes first alternates too, so
load on the machine falls on both alike). Each request holds ``--batch`` agent-like
queries: a passage's title, two of its words, and one number never sent before, as a
model's queries often carry one; so the stream brings one new word a query. Printed: each
server's anonymous resident memory (``RssAnon`` from ``/proc``) at every tenth of the
stream, its growth after warm-up (the first fifth), and the requests' p50 / p99 latency.

Targets: the shipped server's memory grows by at most 10% after warm-up, and its p50 is
at most 1.1x the earlier cache's (a bounded cache must not cost latency).
"""

import argparse
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
try:
    import searchgym  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT))

import httpx

from searchgym.corpora.registry import load_corpus

TARGET_GROWTH = 0.10
TARGET_P50 = 1.10
WARM_UP = 0.2

#: Runs `searchgym serve` in this interpreter, with searchgym's earlier stem cache when asked.
LAUNCH = """
import sys
from searchgym.corpora.tokenize import default_analyzer
if sys.argv[1] == "earlier":
    analyzer = default_analyzer()
    analyzer.keep_unknown = True
    analyzer.max_words = 10**9
from searchgym.cli import main
sys.exit(main(["serve", *sys.argv[2:]]))
"""

CACHES = ("shipped", "earlier")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cache: str, passages: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    argv = [sys.executable, "-c", LAUNCH, cache, "--corpus", "synthwiki", "--corpus-option", f"num_passages={passages}",
            "--port", str(port)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"the {cache} server did not start (exit status {proc.wait()})")
    log(f"{cache}: {line.strip()}")
    return proc, f"http://127.0.0.1:{port}/retrieve"


def rss_anon_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) / 1024
    raise SystemExit("this benchmark reads RssAnon from /proc/PID/status (Linux)")


def agent_queries(corpus, rng: random.Random, first_number: int, n: int) -> list[str]:
    out = []
    for i in range(n):
        passage = corpus[rng.randrange(len(corpus))]
        words = passage.text.split()
        out.append(f"{passage.title} {rng.choice(words)} {rng.choice(words)} {first_number + i}")
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=2_000_000, help="distinct query words sent to each server (default 2,000,000)")
    parser.add_argument("--batch", type=int, default=512, help="queries per request (default 512)")
    parser.add_argument("--passages", type=int, default=2_000, help="synthwiki passages served (default 2,000)")
    parser.add_argument("--quick", action="store_true", help="200,000 words: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.words = 200_000
    for name in ("words", "batch", "passages"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be positive, got {getattr(args, name)}")
    if not Path("/proc/self/status").exists():
        parser.error("this benchmark reads RssAnon from /proc (Linux only)")
    corpus = load_corpus("synthwiki", num_passages=args.passages)
    requests = max(10, args.words // args.batch)
    servers = {cache: start(cache, args.passages) for cache in CACHES}
    latencies: dict[str, list[float]] = {cache: [] for cache in CACHES}
    memory: dict[str, list[tuple[int, float]]] = {cache: [] for cache in CACHES}
    rng = random.Random(0)
    try:
        with httpx.Client(timeout=120) as client:
            for cache, (proc, _) in servers.items():
                memory[cache].append((0, rss_anon_mb(proc.pid)))
            for r in range(requests):
                payload = {"queries": agent_queries(corpus, rng, 10_000_000 + r * args.batch, args.batch), "topk": 3,
                           "return_scores": True}
                order = CACHES if r % 2 == 0 else CACHES[::-1]
                for cache in order:
                    t = time.perf_counter()
                    response = client.post(servers[cache][1], json=payload)
                    latencies[cache].append(time.perf_counter() - t)
                    if response.status_code != 200:
                        raise SystemExit(f"the {cache} server answered HTTP {response.status_code}: {response.text[:300]}")
                if (r + 1) % max(1, requests // 10) == 0 or r + 1 == requests:
                    for cache, (proc, _) in servers.items():
                        memory[cache].append(((r + 1) * args.batch, rss_anon_mb(proc.pid)))
                    log(f"{(r + 1) * args.batch:,} words: " + ", ".join(f"{c} {memory[c][-1][1]:.0f} MB" for c in CACHES))
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=60)

    print(f"\n`searchgym serve` over synthwiki ({args.passages:,} passages, BM25), {requests:,} requests of {args.batch} "
          f"queries, each query with one number never sent before: {requests * args.batch:,} distinct words a server.\n")
    print("| distinct words sent | " + " | ".join(f"{c} cache RssAnon (MB)" for c in CACHES) + " |")
    print("|---|" + "---|" * len(CACHES))
    for i, (words, _) in enumerate(memory[CACHES[0]]):
        print(f"| {words:,} | " + " | ".join(f"{memory[c][i][1]:.0f}" for c in CACHES) + " |")
    growth = {}
    for cache in CACHES:
        samples = memory[cache]
        warm = next(mb for words, mb in samples if words >= WARM_UP * requests * args.batch)
        growth[cache] = samples[-1][1] / warm - 1
    p50 = {c: percentile(latencies[c], 0.5) * 1000 for c in CACHES}
    p99 = {c: percentile(latencies[c], 0.99) * 1000 for c in CACHES}
    print("\n| cache | RssAnon growth after warm-up (first fifth) | p50 ms | p99 ms |\n|---|---|---|---|")
    for cache in CACHES:
        print(f"| {cache} | {growth[cache]:+.1%} | {p50[cache]:.1f} | {p99[cache]:.1f} |")
    ratio = p50["shipped"] / p50["earlier"]
    passed = growth["shipped"] <= TARGET_GROWTH and ratio <= TARGET_P50
    print(f"\nshipped cache: memory growth after warm-up {growth['shipped']:+.1%} (target <= +{TARGET_GROWTH:.0%}; the earlier "
          f"cache {growth['earlier']:+.1%}); p50 shipped / earlier {ratio:.2f}x (target <= {TARGET_P50}x): "
          f"{'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
