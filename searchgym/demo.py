"""``make demo``: SmolLM2 benchmarked on real questions, with and without search.

SmolLM2-135M-Instruct plays wiki-vital's answerable FanOutQA questions as every kind of
policy the library offers: no retrieval, naive RAG over BM25 and over dense retrieval
(top-1 passage), the Search-R1 agent, RECON (the same agent with the LLM summarizer in
the env), the s3 searcher with SmolLM2 as its frozen generator, and R-Search with SmolLM2
as its frozen reader. Everything runs through :func:`searchgym.bench.run_bench`, so the
demo is an ordinary benchmark: it resumes when interrupted and writes the same files.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

from searchgym.bench import BenchConfig, run_bench

#: Defaults of ``searchgym demo``: the first 32 of the 79 questions, all live at once,
#: 64 new tokens per turn, which finishes within 20 minutes from a fresh clone on the
#: 2-core CPU (AVX2) this project is developed on. ``--limit 79`` plays every question.
DEFAULT_LIMIT = 32
DEFAULT_NUM_ENVS = 32
DEFAULT_MAX_NEW_TOKENS = 64

#: (label, env id, agent).
DEMO_RUNS = (
    ("no retrieval", "SearchR1-v0", "no-retrieval"),
    ("naive RAG, BM25 top-1", "SearchR1-v0", "naive-rag"),
    ("naive RAG, dense top-1", "SearchR1-v0", "naive-rag-dense"),
    ("Search-R1 agent", "SearchR1-v0", "lm"),
    ("RECON agent + LLM summarizer", "RECON-v0", "lm"),
    ("s3 searcher + frozen generator", "S3-v0", "lm"),
    ("R-Search agent + frozen reader", "RSearch-v0", "lm"),
)


def default_backend() -> str:
    """vLLM on a CUDA GPU where it is installed, else transformers. On this project's
    2-core AVX2 CPU, 16 chat prompts in one batched call: transformers in float32 78.7
    generated tokens/s, vLLM in float32 79.1 after a 2-minute engine start, vLLM in
    bfloat16 16.3 (README, Demo)."""
    if importlib.util.find_spec("vllm") is None:
        return "transformers"
    import torch  # vLLM depends on it

    return "vllm" if torch.cuda.is_available() else "transformers"


def default_dtype(backend: str) -> str:
    """bfloat16 on vLLM, float32 on transformers. On CPUs without native bfloat16 (this
    project's AVX2 machine) bfloat16 is the slower choice on both: vLLM generated 16.3
    tokens/s in bfloat16 against 79.1 in float32, transformers' prefill is ~6x slower."""
    return "bfloat16" if backend == "vllm" else "float32"


def demo_config(limit: int | None, backend: str, dtype: str, max_new_tokens: int, num_envs: int) -> BenchConfig:
    return BenchConfig(
        runs=[(env, agent) for _, env, agent in DEMO_RUNS],
        labels=[label for label, _, _ in DEMO_RUNS],
        limit=limit,
        model="smollm2",
        backend=backend,
        backend_options={"dtype": dtype},
        frozen_model="policy",
        summarizer="llm",
        env_options={"*": {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable"}},
        agent_options={"naive-rag": {"k": 1}, "naive-rag-dense": {"k": 1}},
        num_envs=num_envs,
        max_new_tokens=max_new_tokens,
    )


def run(
    limit: int | None, backend: str | None, dtype: str | None, max_new_tokens: int, num_envs: int, out: Path, resume: bool = True
) -> Any:
    """Run the demo benchmark, print its table and return the results. ``backend`` and
    ``dtype`` default to :func:`default_backend` and :func:`default_dtype`."""
    backend = backend or default_backend()
    dtype = dtype or default_dtype(backend)
    start = time.perf_counter()
    results = run_bench(demo_config(limit, backend, dtype, max_new_tokens, num_envs), out, resume=resume)
    minutes = (time.perf_counter() - start) / 60
    print(f"\nSmolLM2-135M-Instruct ({backend}, {dtype}) on wiki-vital answerable FanOutQA questions; {minutes:.1f} min\n")
    print(results.markdown())
    print()
    print(explain(results.rows))
    print(f"\nwrote {out}/summary.json, summary.csv, summary.png and episodes.jsonl")
    return results


#: What each column of the table means, printed after it.
LEGEND = """What the columns mean (scores are means over the questions, 1.0 is perfect):
  EM          the predicted answer equals a gold answer after normalization (case, articles, punctuation)
  F1          token overlap between the prediction and the best-matching gold answer
  cover-EM    every token of a gold answer appears somewhere in the prediction (R1-Searcher's metric)
  GenAcc      a gold answer's tokens occur contiguously in the prediction (s3's span check)
  reward      the env's own reward recipe: each protocol scores differently, so compare rows by EM/F1
  searches    search calls per episode; context tokens: what the policy read; s/episode: wall time
  failures    episodes that ended in an error (prompt too long, backend error), if any"""


def explain(rows: list[dict[str, Any]]) -> str:
    """The legend, then a few lines computed from ``rows`` on what they show."""
    if not rows:
        return LEGEND
    lines = [LEGEND, "", "What these rows show:"]
    best = max(rows, key=lambda r: (r["f1"], r["cover_em"]))
    lines.append(f"  best F1: {best['label']} ({best['f1']:.3f}, EM {best['em']:.3f}, cover-EM {best['cover_em']:.3f})")
    base = next((r for r in rows if r.get("agent") == "no-retrieval"), None)
    if base is not None:
        better = [r["label"] for r in rows if r is not base and r["f1"] > base["f1"]]
        worse = [r["label"] for r in rows if r is not base and r["f1"] < base["f1"]]
        lines.append(
            f"  against answering from memory (F1 {base['f1']:.3f}): better with {', '.join(better) or 'none'}; "
            f"worse with {', '.join(worse) or 'none'}"
        )
    agents = [r for r in rows if r.get("agent") == "lm"]
    idle = [r["label"] for r in agents if r["searches"] == 0]
    if idle:
        lines.append(f"  never searched: {', '.join(idle)} (no search call: they answered from the prompt alone)")
    failed = [f"{r['label']} ({r['failures']})" for r in rows if r["failures"] != "-"]
    if failed:
        lines.append(f"  failed episodes: {'; '.join(failed)}")
    rag = [r for r in rows if str(r.get("agent", "")).startswith("naive-rag")]
    if agents and rag:
        top_agent, top_rag = max(agents, key=lambda r: r["f1"]), max(rag, key=lambda r: r["f1"])
        searches = sum(r["searches"] for r in agents) / len(agents)
        lines.append(
            f"  multi-turn agents (searching {searches:.2f} times per episode on average) reach F1 {top_agent['f1']:.3f} at best "
            f"({top_agent['label']}); one retrieved passage in the prompt reaches {top_rag['f1']:.3f} ({top_rag['label']})"
        )
    return "\n".join(lines)
