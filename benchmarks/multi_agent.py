"""The multi-agent env with language-model agents, and one role trained while the others are frozen.

Part 1 (``--part agents``): the searcher and the generator are two LLM agents (SmolLM2 by
default) on wiki-vital's answerable FanOutQA questions, through the PettingZoo AEC env and
the batched team runner; the frozen generator behind the searcher's naive-RAG baseline is
the same model with s3's generator prompt. Prints each role's mean reward (searcher: Gain
Beyond RAG; generator: answer score) with GenAcc, EM, F1, searches, turns and malformed
turns. ``--with-summarizer`` also plays the three-agent roster (SmolLM2 summarizer).

Part 2 (``--part train``): a short GRPO run of ``searchgym train`` on
``searchgym/MultiAgentSummarizer-v0``: only the summarizer learns (LoRA on SmolLM2 by
default); the searcher is the scripted ``complete`` policy (the team works from the top-k
retrieval for the question) and the generator is frozen (``gold-span`` by default, or
``--frozen-generator smollm2``). Prints the trainer's metrics per step.

    python benchmarks/multi_agent.py                                  # both parts, small limits
    python benchmarks/multi_agent.py --part agents --limit 20 --with-summarizer
    python benchmarks/multi_agent.py --part train --train-steps 4 --train-n 4
    python benchmarks/multi_agent.py --quick                          # a smoke run of both parts

--quick plays both parts with the tiny random test model in every LLM role (float32) instead
of SmolLM2: both rosters (summarizer included) on the first 2 questions, 1 document a
retrieval, 2 searcher turns of 32 tokens and summaries of 16, then 2 GRPO steps of 1 question x 2 summaries on one torch
thread, into results/multi-agent-quick; sizes and models given on the command line win. Nothing is
judged (the script has no target, and a random model's rewards say nothing): it checks
that every role and the summarizer's trainer run end to end, and exits 1 if an episode
did not finish (e.g. its context outgrew the model's).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

ROSTERS = {"searcher+generator": ("searcher", "generator"), "searcher+summarizer+generator": ("searcher", "summarizer", "generator")}


def run_agents(opts: argparse.Namespace) -> list[dict]:
    """Part 1: LLM agents in the roles; one summary row per roster."""
    from searchgym.agents.driver import Task
    from searchgym.agents.team import run_team_episodes, team_agents
    from searchgym.envs import multi_agent, team_game
    from searchgym.lm.registry import load_lm

    lm = load_lm(opts.model, dtype=opts.dtype)
    rosters = ["searcher+generator"] + (["searcher+summarizer+generator"] if opts.with_summarizer else [])
    rows = []
    for label in rosters:
        roles = ROSTERS[label]
        env_options = dict(
            corpus="wiki-vital", dataset="wiki-vital-answerable", top_k=opts.top_k, initial_top_k=opts.top_k,
            max_searcher_turns=opts.max_searcher_turns, generator=lm,
        )
        envs = [multi_agent.env(roles, **env_options) for _ in range(min(opts.num_envs, opts.limit))]
        agents = team_agents(lm, roles, max_new_tokens={"searcher": opts.searcher_tokens, "summarizer": opts.summarizer_tokens})
        examples = team_game(envs[0]).examples[: opts.limit]
        t0 = time.perf_counter()
        results = run_team_episodes(envs, agents, [Task(ex.id, 0) for ex in examples], progress=True)
        elapsed = time.perf_counter() - t0
        n = len(results)
        mean = lambda values: sum(values) / n  # noqa: E731
        row = {
            "roster": label,
            "questions": n,
            **{f"reward_{role}": mean([r.rewards[role] for r in results]) for role in roles},
            "naive_rag_acc": mean([r.reward_components.get("searcher", {}).get("naive_rag_acc", 0.0) for r in results]),
            "gen_acc": mean([r.gen_acc for r in results]),
            "em": mean([r.em for r in results]),
            "f1": mean([r.f1 for r in results]),
            "searches": mean([r.num_searches for r in results]),
            "searcher_turns": mean([r.turns["searcher"] for r in results]),
            **{f"invalid_{role}": mean([r.num_invalid[role] for r in results]) for role in roles},
            "summary_tokens": mean([r.summary_tokens for r in results]),
            "failed": sum(r.outcome != "finished" for r in results),
            "seconds": elapsed,
        }
        rows.append(row)
        if opts.out is not None:
            opts.out.mkdir(parents=True, exist_ok=True)
            with open(opts.out / f"episodes-{label}.jsonl", "w", encoding="utf-8") as f:
                for r in results:
                    f.write(json.dumps(r.to_dict()) + "\n")
        for r in results[: opts.show]:
            print(f"  Q: {r.question}\n     gold {r.answers[0]!r} | answer {r.prediction!r} | rewards {r.rewards} | searches {r.num_searches}")
    return rows


def run_training(opts: argparse.Namespace) -> list[dict]:
    """Part 2: GRPO on the summarizer while the searcher and generator stay frozen."""
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    out = Path(tempfile.mkdtemp(prefix="searchgym-multi-agent-train-"))
    try:
        args = Args(
            env_id="MultiAgentSummarizer-v0", model=opts.train_model, algorithm="grpo", n=opts.train_n,
            questions_per_step=opts.train_questions, num_envs=opts.train_questions * opts.train_n,
            total_steps=opts.train_steps, max_new_tokens=opts.summarizer_tokens, micro_batch_size=opts.train_n,
            lr=opts.lr, lora_rank=opts.lora_rank, temperature=1.0, train_split="dev", eval_every=0,
            frozen_model=None if opts.frozen_generator == "gold-span" else opts.frozen_generator,
            env_options={
                "corpus": "wiki-vital", "dataset": "wiki-vital-answerable", "top_k": opts.train_top_k,
                "initial_top_k": opts.train_top_k, "context_cost": opts.context_cost,
            },
            save_every=opts.train_steps, out=str(out / "run"), tensorboard=False, progress=True, seed=0, threads=opts.threads,
        )
        t0 = time.perf_counter()
        rows = Trainer(args).train()
        print(f"  training took {time.perf_counter() - t0:.0f} s")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return rows


def table(rows: list[dict], keys: list[str]) -> str:
    def fmt(v: object) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(keys) + " |", "|" + "|".join("---" for _ in keys) + "|"]
    lines += ["| " + " | ".join(fmt(r.get(k, "-")) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["agents", "train", "both"], default="both", help="what to run (default both)")
    parser.add_argument("--model", default=None,
                        help="model of the LLM agents and the frozen baseline generator in part 1 (default smollm2; --quick: the tiny random test model)")
    parser.add_argument("--dtype", default=None,
                        help="weights dtype of the part-1 model (default bfloat16, ~2x faster for SmolLM2 on CPU; --quick: float32)")
    parser.add_argument("--limit", type=int, default=None, help="wiki-vital answerable questions in part 1 (default 6 of 79; --quick: 2)")
    parser.add_argument("--num-envs", type=int, default=8, help="episodes live at once in part 1")
    parser.add_argument("--top-k", type=int, default=None, help="documents per retrieval in part 1 (default 2; --quick: 1)")
    parser.add_argument("--max-searcher-turns", type=int, default=None,
                        help="searcher turns in part 1, the last cannot search (default 3; --quick: 2)")
    parser.add_argument("--searcher-tokens", type=int, default=None, help="tokens per searcher turn (default 96; --quick: 32)")
    parser.add_argument("--summarizer-tokens", type=int, default=None, help="tokens per summary, both parts (default 64; --quick: 16)")
    parser.add_argument("--with-summarizer", action="store_true", help="also play the three-agent roster in part 1")
    parser.add_argument("--show", type=int, default=3, help="print this many episodes per roster")
    parser.add_argument("--train-model", default=None,
                        help="the summarizer policy trained in part 2 (default smollm2; --quick: the tiny random test model)")
    parser.add_argument("--train-steps", type=int, default=2, help="GRPO steps in part 2")
    parser.add_argument("--train-questions", type=int, default=None, help="questions per step in part 2 (default 2; --quick: 1)")
    parser.add_argument("--train-n", type=int, default=2, help="summaries sampled per question (GRPO group) in part 2")
    parser.add_argument("--train-top-k", type=int, default=2, help="documents of the retrieval the summarizer condenses in part 2")
    parser.add_argument("--context-cost", type=float, default=0.001, help="summarizer reward lost per word of summary")
    parser.add_argument("--frozen-generator", default="gold-span", help="frozen generator in part 2: gold-span or a model name")
    parser.add_argument("--lora-rank", type=int, default=8, help="LoRA rank in part 2 (0: full fine-tuning)")
    parser.add_argument("--lr", type=float, default=1e-4, help="learning rate in part 2")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads in part 2 (default torch's own; --quick: 1)")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for episodes and summary.json (default results/multi-agent; --quick: results/multi-agent-quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run of both parts: the tiny random test model in every LLM role, both rosters on 2 questions, "
                        "2 GRPO steps of 1 question x 2 summaries (sizes and models given on the command line win)")
    opts = parser.parse_args()
    q = opts.quick
    # The quick sizes keep every episode within the tiny model's 2,048-token context (with 2
    # wiki-vital documents and 3 turns of a random model's text, most overflow it).
    for name, full, quick in (("limit", 6, 2), ("top_k", 2, 1), ("max_searcher_turns", 3, 2), ("searcher_tokens", 96, 32),
                              ("summarizer_tokens", 64, 16), ("train_questions", 2, 1)):
        if getattr(opts, name) is None:
            setattr(opts, name, quick if q else full)
    for name in ("limit", "num_envs", "top_k", "max_searcher_turns", "searcher_tokens", "summarizer_tokens", "train_steps",
                 "train_questions", "train_n", "train_top_k"):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(opts, name)}")
    if q and opts.threads is None:
        opts.threads = 1  # a tiny model gains nothing from more, and on a shared CPU the waiting threads spin
    if opts.threads is not None and opts.threads < 1:
        parser.error(f"--threads expects a positive integer, got {opts.threads}")
    opts.dtype = opts.dtype or ("float32" if q else "bfloat16")
    opts.out = opts.out if opts.out is not None else Path("results/multi-agent-quick" if q else "results/multi-agent")
    if q:
        from searchgym.lm.testing import tiny_model_folder

        tiny = str(tiny_model_folder())
        opts.with_summarizer = True
        opts.model, opts.train_model = opts.model or tiny, opts.train_model or tiny
        print(f"--quick: the tiny random test model in every LLM role unless named, both rosters on {opts.limit} questions "
              f"(top-{opts.top_k}, {opts.max_searcher_turns} searcher turns of {opts.searcher_tokens} tokens, summaries of "
              f"{opts.summarizer_tokens}), {opts.train_steps} GRPO steps of {opts.train_questions} question(s) x {opts.train_n} "
              f"summaries on {opts.threads} torch thread(s), into {opts.out}; nothing is judged (a random model's rewards say "
              "nothing): it checks that every role and the summarizer's trainer run")
    opts.model, opts.train_model = opts.model or "smollm2", opts.train_model or "smollm2"

    summary: dict[str, list[dict]] = {}
    if opts.part in ("agents", "both"):
        print(f"== Part 1: LLM agents ({opts.model}) on wiki-vital-answerable, first {opts.limit} questions")
        rows = run_agents(opts)
        summary["agents"] = rows
        keys = ["roster", "questions", "reward_searcher", "reward_summarizer", "reward_generator", "naive_rag_acc", "gen_acc", "em", "f1",
                "searches", "searcher_turns", "invalid_searcher", "invalid_summarizer", "invalid_generator", "summary_tokens", "failed", "seconds"]
        print(table(rows, keys))
        failed = {r["roster"]: r["failed"] for r in rows if r["failed"]}
        if failed and q:
            print(f"--quick: FAIL: episodes that did not finish, by roster: {failed} (their outcome and error are in {opts.out}/episodes-*.jsonl)")
            raise SystemExit(1)
    if opts.part in ("train", "both"):
        print(f"== Part 2: GRPO on the summarizer ({opts.train_model}, LoRA {opts.lora_rank or '-'}), searcher and generator frozen")
        rows = run_training(opts)
        summary["train"] = rows
        keys = ["step", "episodes", "reward", "reward_std", "response_tokens", "loss", "kl", "grad_norm", "logprob_diff_max",
                "time_rollout", "time_update", "peak_memory_mb"]
        print(table(rows, keys))
    if opts.out is not None:
        opts.out.mkdir(parents=True, exist_ok=True)
        (opts.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
