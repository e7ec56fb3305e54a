"""`searchgym demo`: the oracle through every protocol, and retrieval on real data.

Part 1 plays the scripted synthwiki oracle through every registered env and reports the
reward, searches and context size per protocol: it shows the five systems side by side
on the same questions. Part 2 measures retrieval on wiki-vital: how often BM25 and dense
retrieval return the FanOutQA source article of a sub-question in the top 1 and top 5.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
from tqdm.auto import tqdm

from searchgym.agents import SynthWikiOracle, play_episode
from searchgym.envs.access import search_env
from searchgym.envs.registration import ENV_SPECS


def play_oracle(env_id: str, num_passages: int, limit: int | None, seed: int = 0) -> dict[str, Any]:
    """Mean reward, searches, turns and context size of the oracle on synthwiki dev questions."""
    env = gym.make(env_id, corpus_options={"seed": seed, "num_passages": num_passages})
    oracle = SynthWikiOracle.for_env(env)
    examples = search_env(env).examples
    n = len(examples) if limit is None else min(limit, len(examples))
    totals = {"reward": 0.0, "searches": 0.0, "turns": 0.0, "context_tokens": 0.0, "context_chars": 0.0}
    start = time.perf_counter()
    for index in tqdm(range(n), desc=env_id.split("/")[1], leave=False):
        reward, info = play_episode(env, oracle, options={"example_index": index})
        totals["reward"] += reward
        totals["searches"] += info["num_searches"]
        totals["turns"] += info["turn"]
        totals["context_tokens"] += info["context_tokens"]
        totals["context_chars"] += info["context_chars"]
    row = {"env": env_id, "episodes": n, "reward_name": search_env(env).recipe.name}
    row.update({k: v / n for k, v in totals.items()})
    row["ms_per_episode"] = 1000 * (time.perf_counter() - start) / n
    env.close()
    return row


def retrieval_hits(retriever_names: Sequence[str], limit: int | None) -> list[dict[str, Any]]:
    """Top-1 / top-5 source-article hit rates on wiki-vital's FanOutQA sub-questions."""
    from searchgym.corpora.registry import load_corpus, load_dataset
    from searchgym.corpora.retrievers import make_retriever

    corpus = load_corpus("wiki-vital")
    rows = []
    for subset in ("wiki-vital", "wiki-vital-answerable"):
        questions = load_dataset(subset)[:limit]
        for name in retriever_names:
            start = time.perf_counter()
            retriever = make_retriever(name, corpus)
            build = time.perf_counter() - start
            start = time.perf_counter()
            results = retriever.search([q.question for q in questions], 5)
            search = time.perf_counter() - start
            top1 = top5 = 0
            for q, hits in zip(questions, results):
                ids = [h.passage.id for h in hits]
                top1 += bool(ids) and ids[0] == q.metadata["source_passage_id"]
                top5 += q.metadata["source_passage_id"] in ids
            rows.append({
                "questions": subset, "retriever": name, "n": len(questions),
                "top1": top1 / len(questions), "top5": top5 / len(questions),
                "build_s": build, "ms_per_query": 1000 * search / len(questions),
            })
    return rows


def markdown(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> str:
    """A markdown table of ``rows`` with ``(key, header, format)`` columns."""
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(format(row[k], f) for k, _, f in columns) + " |")
    return "\n".join(lines)


#: The chart's names of the wiki-vital question sets.
QUESTION_SETS = {"wiki-vital": "all sub-questions", "wiki-vital-answerable": "answerable\n(answer in the article)"}


def plot(oracle_rows, retrieval_rows, path: Path) -> Path | None:
    """``path``, a PNG of :func:`chart`; None without matplotlib."""
    try:
        fig = chart(oracle_rows, retrieval_rows)
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def chart(oracle_rows, retrieval_rows) -> Any:
    """Three panels: the oracle's mean reward per protocol (each bar labelled with its
    reward recipe), the oracle's context size per protocol, and the retrieval hit rates on
    wiki-vital per retriever and question set (matplotlib must be importable)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (rewards, context, left) = plt.subplots(1, 3, figsize=(16, 4.4), gridspec_kw={"width_ratios": [1.1, 1, 1.2]})
    names = [r["env"].split("/")[1] for r in oracle_rows]
    bars = rewards.bar(names, [r["reward"] for r in oracle_rows], color="tab:blue")
    for bar, row in zip(bars, oracle_rows):
        rewards.annotate(f"{row['reward']:.2f}\n{row['reward_name']}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                         ha="center", va="bottom", fontsize=6, xytext=(0, 2), textcoords="offset points")
    rewards.set_ylim(0, max([r["reward"] for r in oracle_rows] + [1.0]) * 1.25)
    rewards.set_ylabel("mean episode reward (each protocol's recipe)")
    rewards.set_title("synthwiki oracle: reward per protocol")
    rewards.tick_params(axis="x", labelsize=8)
    context.bar(names, [r["context_tokens"] for r in oracle_rows], color="tab:green")
    context.set_ylabel("mean context words per episode")
    context.set_title("synthwiki oracle: context per protocol")
    context.tick_params(axis="x", labelsize=8)
    labels = [f"{r['retriever']}\n{QUESTION_SETS.get(r['questions'], r['questions'])}" for r in retrieval_rows]
    xs = range(len(retrieval_rows))
    left.bar([x - 0.2 for x in xs], [r["top1"] for r in retrieval_rows], 0.4, label="top-1")
    left.bar([x + 0.2 for x in xs], [r["top5"] for r in retrieval_rows], 0.4, label="top-5")
    left.set_xticks(list(xs), labels, fontsize=7)
    left.set_ylim(0, 1)
    left.set_ylabel("share with the source article retrieved")
    left.set_title("wiki-vital: FanOutQA sub-questions")
    left.legend(loc="upper left")
    episodes = max((r["episodes"] for r in oracle_rows), default=0)
    fig.suptitle(f"searchgym oracle-demo: the scripted oracle on {episodes} synthwiki dev questions per protocol; retrieval on wiki-vital")
    fig.tight_layout()
    return fig


def run(num_passages: int, limit: int | None, retrievers: Sequence[str], out: Path) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    print(f"# searchgym demo\n\n## Oracle on synthwiki ({num_passages} passages, dev split)\n", flush=True)
    oracle_rows = [play_oracle(env_id, num_passages, limit) for env_id in tqdm(sorted(ENV_SPECS), desc="protocols")]
    print(markdown(oracle_rows, [
        ("env", "env", "s"), ("reward_name", "reward", "s"), ("episodes", "episodes", "d"),
        ("reward", "mean reward", ".3f"), ("searches", "searches", ".2f"), ("turns", "turns", ".2f"),
        ("context_tokens", "context words", ".0f"), ("ms_per_episode", "ms/episode", ".1f"),
    ]))
    print("\n## Retrieval on wiki-vital (FanOutQA dev sub-questions, source article in top-k)\n", flush=True)
    retrieval_rows = retrieval_hits(retrievers, limit=None)
    print(markdown(retrieval_rows, [
        ("questions", "questions", "s"), ("retriever", "retriever", "s"), ("n", "n", "d"),
        ("top1", "top-1", ".3f"), ("top5", "top-5", ".3f"), ("build_s", "index build s", ".1f"),
        ("ms_per_query", "ms/query", ".2f"),
    ]))
    results = {"oracle": oracle_rows, "retrieval": retrieval_rows}
    (out / "demo.json").write_text(json.dumps(results, indent=2))
    png = plot(oracle_rows, retrieval_rows, out / "demo.png")
    print(f"\nwrote {out / 'demo.json'}" + (f" and {png}" if png else ""))
    return results
