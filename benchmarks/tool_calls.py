"""Tool calls after SFT: does SmolLM2 write well-formed calls?

SmolLM2-135M-Instruct's packaged chat template writes no tools, so the project's hermes
template (ChatML, SmolLM2's own <|im_start|> / <|im_end|> tokens) is installed on its
tokenizer. The synthwiki oracle plays searchgym/SearchR1-v0 through tool calls; its turns,
written as the template shows them, are the SFT data (`searchgym sft --chat-template
hermes`, observations masked out). The world: a 1,000-passage synthwiki, its single-hop
questions, top-2 documents a search, 3 turns (a search and the answer fit). Then the model
plays dev questions greedily through tool calls, before and after SFT, and the env judges
every turn: a turn is **well-formed**
when it makes at least one call and the env finds nothing wrong in it (no unreadable JSON,
unknown tool, bad argument, call beside answer, forged result). A reply without any call
is counted apart (the env takes it as the final answer).

    python benchmarks/tool_calls.py            # SmolLM2: SFT on 32 oracle episodes (4 steps), 24 dev questions
    python benchmarks/tool_calls.py --quick    # the tiny scratch model, 8 + 4 questions (a smoke run)

Prints one row per model and writes OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium as gym

#: A 1,000-passage synthwiki world; its single-hop questions are played.
WORLD = {"seed": 7, "num_passages": 1000}
ENV_ID = "searchgym/SearchR1-v0"
GAME = {"action_format": "tools", "corpus_options": WORLD, "top_k": 2, "max_turns": 3}


def one_hop(split: str, out: Path) -> str:
    """A file of the world's single-hop questions of ``split``."""
    from searchgym.corpora.datasets import write_qa
    from searchgym.envs import search_env

    env = gym.make(ENV_ID, split=split, corpus_options=WORLD)
    return str(write_qa([ex for ex in search_env(env).examples if ex.metadata.get("hops") == 1], out / f"{split}-1hop.jsonl"))


class TurnJudge(gym.Wrapper):
    """Counts the env's verdict on every turn played through it (shared ``counts``)."""

    def __init__(self, env: Any, counts: Counter):
        super().__init__(env)
        self.counts = counts

    def step(self, action: Any) -> Any:
        observation, reward, terminated, truncated, info = self.env.step(action)
        message = next(m for m in reversed(info["messages"]) if m["role"] == "assistant")
        calls = len(message.get("tool_calls") or ())
        self.counts["turns"] += 1
        if calls == 0:
            self.counts["no_call"] += 1
        elif info["invalid_reason"] is None and not info["forged_env_tags"]:
            self.counts["well_formed"] += 1
        else:
            self.counts["bad_call"] += 1
        return observation, reward, terminated, truncated, info


def judge(model: Any, tokenizer: Any, *, env_options: dict, questions: int, max_new_tokens: int, num_envs: int) -> dict[str, Any]:
    """Greedy play of ``questions`` dev questions through tool calls; the turn counts and rewards."""
    from searchgym.agents.driver import Task, run_episodes
    from searchgym.agents.lm_agents import policy_agent
    from searchgym.envs import search_env
    from searchgym.lm.hf import TransformersLM

    counts: Counter = Counter()
    envs = [TurnJudge(gym.make(ENV_ID, **env_options), counts) for _ in range(num_envs)]
    agent = policy_agent(envs[0], TransformersLM(model, tokenizer), max_new_tokens=max_new_tokens, temperature=0.0)
    tasks = [Task(ex.id, 0) for ex in search_env(envs[0]).examples[:questions]]
    t0 = time.perf_counter()
    results = run_episodes(envs, agent, tasks, progress=True, desc="dev episodes")
    n = len(results)
    return {
        "questions": n,
        "turns": counts["turns"],
        "well_formed": counts["well_formed"],
        "bad_call": counts["bad_call"],
        "no_call": counts["no_call"],
        "well_formed_share": counts["well_formed"] / max(1, counts["turns"]),
        "reward": sum(r.reward for r in results) / n,
        "em": sum(r.em for r in results) / n,
        "searches": sum(r.num_searches for r in results) / n,
        "render_mismatches": dict(agent.render_mismatches),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def write(out: Path, model: str, rows: dict[str, Any]) -> None:
    """The figures so far, in ``out/summary.json`` (written after each phase)."""
    (out / "summary.json").write_text(json.dumps({"model": model, "env": ENV_ID, "env_options": GAME, **rows}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2", help="student: a built-in name or a folder (default: smollm2)")
    parser.add_argument("--sft-questions", type=int, default=32, help="oracle episodes of the SFT (default: 32)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--micro-batch-size", type=int, default=1, help="trajectories per pass (default 1: SmolLM2's activations of a "
                        "1,100-token trajectory take ~2.5 GB; 4 at once reached 10 GB)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--eval-questions", type=int, default=24, help="dev questions played (default: 24)")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--no-zero-shot", action="store_true", help="skip the model before SFT")
    parser.add_argument("--sft-run", type=Path, default=None, help="reuse a finished SFT run folder (its final/)")
    parser.add_argument("--quick", action="store_true", help="the tiny scratch model, 8 + 4 questions: a smoke run")
    parser.add_argument("--out", type=Path, default=Path("results/tool-calls"))
    opts = parser.parse_args()

    from searchgym.training.sft import SFTArgs, sft
    from searchgym.training.trainer import load_policy

    model_name = "scratch" if opts.quick else opts.model
    sft_questions, eval_questions = (8, 4) if opts.quick else (opts.sft_questions, opts.eval_questions)
    opts.out.mkdir(parents=True, exist_ok=True)
    env_options = {**GAME, "dataset": one_hop("train", opts.out)}
    dev_options = {**GAME, "dataset": one_hop("dev", opts.out)}
    rows: dict[str, Any] = {}
    if not opts.no_zero_shot and model_name != "scratch":
        from searchgym.lm.chat_templates import install_chat_template

        model, tokenizer = load_policy(model_name, device="cpu")
        install_chat_template(tokenizer, "hermes", model)
        rows["zero-shot"] = judge(model.eval(), tokenizer, env_options=dev_options, questions=eval_questions,
                                  max_new_tokens=opts.max_new_tokens, num_envs=min(24, eval_questions))
        print("zero-shot:", json.dumps(rows["zero-shot"]))
        write(opts.out, model_name, rows)
        del model
    run = opts.sft_run
    if run is None:
        run = opts.out / "sft"
        t0 = time.perf_counter()
        sft_rows = sft(SFTArgs(
            env_id=ENV_ID, env_options=env_options, model=model_name, scratch_size="tiny", chat_template="hermes",
            limit=sft_questions, epochs=opts.epochs, batch_size=8, micro_batch_size=opts.micro_batch_size, lr=opts.lr if not opts.quick else 3e-3,
            warmup_steps=2, eval_limit=0, num_envs=16, out=str(run), progress=True,
        ))
        rows["sft"] = {"steps": len(sft_rows), "loss_first": sft_rows[0]["loss"], "loss_last": sft_rows[-1]["loss"],
                       "seconds": round(time.perf_counter() - t0, 1)}
        print("SFT:", json.dumps(rows["sft"]))
        write(opts.out, model_name, rows)
    model, tokenizer = load_policy(str(run / "final"), device="cpu")
    rows["after SFT"] = judge(model.eval(), tokenizer, env_options=dev_options, questions=eval_questions,
                              max_new_tokens=opts.max_new_tokens, num_envs=min(24, eval_questions))
    print("after SFT:", json.dumps(rows["after SFT"]))
    write(opts.out, model_name, rows)
    print(f"\n{'model':<12} {'turns':>6} {'well-formed':>12} {'bad call':>9} {'no call':>8} {'reward':>7} {'EM':>6}")
    for name in ("zero-shot", "after SFT"):
        if name in rows:
            r = rows[name]
            print(f"{name:<12} {r['turns']:>6} {r['well_formed_share']:>12.1%} {r['bad_call']:>9} {r['no_call']:>8} {r['reward']:>7.3f} {r['em']:>6.3f}")
    print(f"wrote {opts.out}/summary.json")


if __name__ == "__main__":
    main()
