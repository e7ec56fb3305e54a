"""A deep-research step's cost along a long episode, and process memory over many episodes (issue 62).

Part 1: a scripted agent plays ``searchgym/DeepResearch-v0`` with ``max_calls=256``, ``max_turns=300``,
one call a turn, cycling open / find / search over a corpus of long documents (about 2,000
documents of 1,500-3,000 words generated here, or the ``deepwiki`` world when
``searchgym.corpora.deepwiki`` exists and ``--world deepwiki`` is given); the time of the steps
at call 1, 32 and 128 (median over repeated episodes) and the ratio step-128 / step-1.

Part 2: the RSS of this process (VmRSS of /proc/self/status) over 10,000 short episodes
(reset, a search, an open, a find, an answer), at 1k, 5k and 10k episodes.

    python benchmarks/deep_research_steps.py            # full
    python benchmarks/deep_research_steps.py --quick    # fewer documents, episodes, repeats
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import gymnasium as gym

import searchgym  # noqa: F401
from searchgym.corpora import Corpus, Passage
from searchgym.corpora.types import QAExample

WORDS = ("archive ledger harbor meadow lantern orchard quarry granite willow copper beacon valley river summit timber "
         "canal market bridge tower garden station chapel mill forge tavern cellar pasture grove ridge hollow marsh "
         "delta island cape fjord plateau basin gorge terrace courtyard gallery library theatre museum").split()


def world(n_docs: int, seed: int = 0) -> tuple[Corpus, list[QAExample]]:
    rng = random.Random(seed)
    docs = []
    for i in range(n_docs):
        words = rng.randint(1500, 3000)
        sections = []
        for s in ("Overview", "History", "Geography", "Culture", "Legacy", "Notes"):
            body = " ".join(rng.choice(WORDS) for _ in range(words // 6))
            sections.append(f"== {s} ==\n{body}. Entity{i} founded Society{i % 97} in {1700 + i % 300}.")
        docs.append(Passage(f"d{i}", f"Entity{i}", "\n\n".join(sections)))
    examples = [QAExample(f"q{j}", f"Which entity founded Society{j % 97} in {1700 + j % 300}?", (f"Entity{j}",),
                          {"evidence_ids": [f"d{j}"], "gold_ids": [f"d{j}"]}) for j in range(min(50, n_docs))]
    return Corpus(docs, name=f"bench-{n_docs}"), examples


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def probe(n_docs: int, mark: int):
    """The step timed at call ``mark``: one turn of a search, an open and a find (three calls in
    parallel), the same at every mark but for a document of its own that no other call reads
    (so no mark finds its pages cached)."""
    doc = f"d{n_docs - 1 - mark % 50}"
    return msg(call("search", query="Society7 founded by a banker"), call("open", doc_id=doc, page=2),
               call("find", doc_id=doc, pattern="founded"))


def msg(*calls):
    return {"role": "assistant", "content": "", "tool_calls": [c["tool_calls"][0] for c in calls]}


def long_episode(env, rng: random.Random, n_docs: int, at: tuple[int, ...]) -> dict[int, float]:
    """One episode of ``max(at) + 2`` calls; the probe's time (ms) at each call number of ``at``,
    the other steps one random call each (an open, a find or a search, in turn)."""
    env.reset(options={"example_index": rng.randrange(len(env.unwrapped.examples))})
    times = {}
    calls = 0
    while calls < max(at) + 2:
        mark = next((a for a in at if calls + 1 <= a <= calls + 3), None)
        if mark is not None:
            action = probe(n_docs, mark)
        else:
            doc = f"d{rng.randrange(n_docs - 60)}"
            action = (call("open", doc_id=doc, page=1 + calls % 3), call("find", doc_id=doc, pattern="founded"),
                      call("search", query=f"Society{rng.randrange(97)} founded"))[calls % 3]
        t = time.perf_counter()
        _, _, terminated, truncated, info = env.step(action)
        if mark is not None:
            times[mark] = (time.perf_counter() - t) * 1000
        calls = info["num_calls"]
        assert not (terminated or truncated), (calls, info["context_full"])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 documents, 3 long episodes, 2,000 short ones")
    parser.add_argument("--world", choices=["generated", "deepwiki"], default="generated")
    parser.add_argument("--episodes", type=int, default=None, help="short episodes of the memory part (default 10,000)")
    args = parser.parse_args()
    n_docs, repeats = (200, 3) if args.quick else (2000, 7)
    episodes = args.episodes or (2000 if args.quick else 10_000)
    if args.world == "deepwiki":
        env = gym.make("searchgym/DeepResearch-v0", corpus="deepwiki", max_calls=256, max_turns=300, max_context_tokens=10**9)
        n_docs = len(env.unwrapped.corpus)
    else:
        corpus, examples = world(n_docs)
        t = time.perf_counter()
        env = gym.make("searchgym/DeepResearch-v0", corpus=corpus, dataset=examples, max_calls=256, max_turns=300, max_context_tokens=10**9)
        print(f"world: {n_docs} documents, env built in {time.perf_counter() - t:.1f} s")
    ids = [p.id for p in env.unwrapped.corpus]
    at = (1, 32, 128)
    rng = random.Random(1)
    runs = [long_episode(env, rng, n_docs, at) for _ in range(repeats)]
    med = {a: statistics.median(r[a] for r in runs) for a in at}
    print(f"\nms per step of the same three-call turn (search, open, find) at each call number, median of {repeats} "
          "episodes; max_calls=256, max_turns=300")
    print("| call 1 | call 32 | call 128 | step-128 / step-1 |")
    print("|---|---|---|---|")
    print(f"| {med[1]:.2f} | {med[32]:.2f} | {med[128]:.2f} | {med[128] / med[1]:.2f} |")

    short = gym.make("searchgym/DeepResearch-v0", corpus=env.unwrapped.corpus, dataset=env.unwrapped.examples) \
        if args.world == "generated" else env
    marks = sorted({m for m in (1000, episodes // 2, episodes) if m <= episodes})
    base = rss_mb()
    rows = []
    for e in range(1, episodes + 1):
        short.reset(options={"example_index": e % len(short.unwrapped.examples)})
        doc = ids[e % len(ids)]
        short.step(call("search", query=f"Society{e % 97}"))
        short.step(call("open", doc_id=doc, page=1))
        short.step(call("find", doc_id=doc, pattern="founded"))
        short.step(call("answer", answer="nobody", citations=[doc], confidence=10))
        if e in marks:
            rows.append((e, rss_mb()))
    print(f"\nRSS over {episodes} short episodes (reset + search + open + find + answer); before: {base:.1f} MB")
    print("| episodes | RSS MB | growth since first mark |")
    print("|---|---|---|")
    for e, mb in rows:
        print(f"| {e} | {mb:.1f} | {mb - rows[0][1]:+.1f} |")


if __name__ == "__main__":
    main()
