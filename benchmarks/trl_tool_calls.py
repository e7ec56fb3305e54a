"""TRL's own tool loop from a warm start SFT'd on the oracle's tool calls, against the example's.

docs/trl.md's tool example (``GRPOTrainer(environment_factory=tool_environment(...))``) made
no call from its tag warm start: the tiny scratch model (and SmolLM2) write none zero-shot.
This builds two warm starts on the same small synthwiki world, the example's (``searchgym sft
--model scratch``: the tag grammar) and the tiny scratch model SFT'd on the oracle's tool calls
of the training questions, each episode's prompt rendered as TRL's loop renders it (full
batch, 150 steps at lr 1e-2: it memorizes them, as the GRPO steps replay those questions),
then runs the same GRPO steps through TRL 1.16's real trainer and tool loop from each, and
prints the calls per episode (those TRL parsed, and the turns the env played), the episodes
that answered and the mean reward (``get_reward``, with ``unread_calls``). ``--before`` /
``--after`` take model folders instead of building them. Measured in benchmarks/RESULTS.md,
"TRL's tool loop from a tool-call warm start".

    python benchmarks/trl_tool_calls.py --quick    # the tiny scratch model, 2 GRPO steps of 4 episodes
    python benchmarks/trl_tool_calls.py            # the same, 8 GRPO steps

Prints one row per warm start and writes OUT/summary.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

#: How transformers' parse_response reads a turn of searchgym's hermes template (docs/trl.md).
HERMES_RESPONSE = {
    "defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "tool_calls": {"open": "<tool_call>", "close_pattern": r"</tool_call>\s*", "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": "{content}"}},
        "content": {"close_pattern": r"<\|im_end\|>\s*", "content": "text"},
    },
}
WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}, "max_turns": 3, "top_k": 1}
ENV_ID = "searchgym/SearchR1-v0"
#: TRL's cap on a whole rollout, tool results included: an oracle call turn is ~63 tokens of the
#: tiny model's tokenizer, a top-1 result ~130, so a two-hop episode (2 searches, 2 results, the
#: answer) is ~450 tokens; 256 cut it before the answer.
COMPLETION_TOKENS = 512


def run(model: str, steps: int, questions: int, out: Path) -> dict:
    """GRPO steps from ``model`` through TRL's tool loop; the episodes' calls and rewards."""
    from transformers import AutoTokenizer

    from searchgym.integrations.trl import tool_dataset, tool_environment, unread_calls  # first: TRL's vLLM warning
    from searchgym.lm.chat_templates import CHAT_TEMPLATES
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = AutoTokenizer.from_pretrained(model)
    if "tool_call" not in (tokenizer.chat_template or ""):
        tokenizer.chat_template = CHAT_TEMPLATES["hermes"].source  # the tag warm start's template writes no tools
    tokenizer.response_template = HERMES_RESPONSE
    episodes: list[dict] = []

    def record(completions, environments, **_):
        for messages, environment in zip(completions, environments):
            summary = environment.episode.summary()
            episodes.append({
                "trl_calls": sum(len(m.get("tool_calls") or []) for m in messages if m.get("role") == "assistant"),
                "env_turns": summary["num_turns"], "answered": summary["answered"], "reward": environment.get_reward(),
            })
        return [0.0] * len(completions)

    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer,
        environment_factory=tool_environment(ENV_ID, **WORLD),
        reward_funcs=[unread_calls, record],
        train_dataset=tool_dataset(ENV_ID, split="train", limit=questions, **WORLD),
        args=GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=4, max_steps=steps,
                        max_completion_length=COMPLETION_TOKENS, learning_rate=1e-6, use_cpu=True, bf16=False, report_to=[],
                        save_strategy="no", logging_steps=1, seed=0),
    )
    started = time.perf_counter()
    trainer.train()
    n = len(episodes)
    return {
        "model": model, "episodes": n, "seconds": round(time.perf_counter() - started, 1),
        "trl_calls_per_episode": sum(e["trl_calls"] for e in episodes) / n,
        "env_turns_per_episode": sum(e["env_turns"] for e in episodes) / n,
        "answered": sum(e["answered"] for e in episodes) / n,
        "mean_reward": sum(e["reward"] for e in episodes) / n,
    }


#: The example's warm start: `searchgym sft` of the tag grammar (the world of WORLD, its questions).
TAG_SFT = ["--model", "scratch", "--scratch-size", "tiny", "--limit", "64", "--epochs", "1", "--eval-limit", "0",
           "--env-options", json.dumps({"corpus_options": WORLD["corpus_options"]})]


def tag_warm_start(out: Path) -> str:
    """The example's warm start, built with `searchgym sft`; its model folder."""
    folder = out / "sft-before"
    code = "from searchgym.cli import run; run()"
    subprocess.run([sys.executable, "-c", code, "sft", *TAG_SFT, "--out", str(folder)], check=True)
    return str(folder / "final")


def trl_prompt_ids(tokenizer, questions: int) -> dict[str, list[int]]:
    """Each training question's prompt as TRL renders it (question text -> token ids): the row's
    user message filled by ``reset``, the tools as TRL lists them (its environment's public
    methods, by name), the generation header."""
    import inspect

    from searchgym.integrations.trl import tool_dataset, tool_environment

    environment = tool_environment(ENV_ID, **WORLD)()
    skip = {"reset", "get_reward"}
    tools = [getattr(environment, n) for n, _ in inspect.getmembers(type(environment), inspect.isfunction)
             if n not in skip and not n.startswith("_")]
    prompts = {}
    for row in tool_dataset(ENV_ID, split="train", limit=questions, **WORLD):
        text = environment.reset(**row)
        message = {**row["prompt"][-1], "content": row["prompt"][-1]["content"] + text}
        prompts[row["question"]] = tokenizer.apply_chat_template([message], tools=tools, add_generation_prompt=True, tokenize=True,
                                                                 return_dict=True)["input_ids"]
    return prompts


def tool_warm_start(out: Path, questions: int, steps: int, lr: float = 1e-2) -> tuple[str, dict]:
    """The tiny scratch model SFT'd on the synthwiki oracle's tool calls of the training
    questions, each episode's prompt as TRL's loop renders it; its model folder and figures.

    `searchgym sft` trains on the env's own prompt: the tools in the env's order with
    ``additionalProperties``, and the env's rule for a reply without a call. TRL lists the
    tools by method name without it, and ``reset`` states TRL's rule. A model this small that
    learned one prompt writes garbage under the other (RESULTS.md, "TRL's tool loop from a
    tool-call warm start"), so the oracle's turns are kept and its prompts swapped for TRL's.
    """
    import dataclasses

    import gymnasium as gym
    import torch

    from searchgym.lm.chat_templates import install_chat_template
    from searchgym.training.batch import collate
    from searchgym.training.data import with_tool_parser
    from searchgym.training.sft import oracle_trajectories, scratch_model, turn_logprobs

    torch.manual_seed(0)
    game = with_tool_parser({"action_format": "tools", **WORLD}, "hermes")
    model, tokenizer = scratch_model(gym.make(ENV_ID, split="train", **game), size="tiny")
    install_chat_template(tokenizer, "hermes", model)
    prompts = trl_prompt_ids(tokenizer, questions)
    trajectories = []
    for t in oracle_trajectories(ENV_ID, tokenizer, env_options=game, limit=questions, num_envs=min(8, questions)):
        text = tokenizer.decode(t.prompt_ids)
        question = max((q for q in prompts if f"Question: {q}" in text), key=len, default=None)
        if question is None:  # the oracle plays the dataset's questions: its prompt names one of them
            raise RuntimeError(f"an oracle episode's prompt names none of the {len(prompts)} training questions: {text[-300:]!r}")
        trajectories.append(dataclasses.replace(t, prompt_ids=tuple(prompts[question])))
    batch = collate(trajectories, pad_id=tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    started = time.perf_counter()
    model.train()
    losses = []
    for _ in range(steps):  # full batch: the few episodes are memorized, as the GRPO steps replay their questions
        optimizer.zero_grad(set_to_none=True)
        loss = -turn_logprobs(model, batch).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(float(loss.detach()))
    folder = out / "sft-after" / "final"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder), {"episodes": len(trajectories), "steps": steps, "loss_first": round(losses[0], 3),
                         "loss_last": round(losses[-1], 4), "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 GRPO steps (default 8)")
    parser.add_argument("--before", help="the example's warm start, a model folder (default: built here)")
    parser.add_argument("--after", help="a warm start SFT'd on the oracle's tool calls (default: built here)")
    parser.add_argument("--questions", type=int, default=8, help="training questions")
    parser.add_argument("--sft-steps", type=int, default=150, help="full-batch SFT steps of the tool warm start (default 150)")
    parser.add_argument("--out", default="runs/bench-trl-tools")
    args = parser.parse_args()
    for name in ("questions", "sft_steps"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(args, name)}")
    out = Path(args.out)
    steps = 2 if args.quick else 8
    sft_row = None
    if args.after is None:
        after, sft_row = tool_warm_start(out, args.questions, args.sft_steps)
        print("tool warm start:", json.dumps(sft_row), flush=True)
    models = {"before": args.before or tag_warm_start(out), "after": args.after or after}
    rows = [{"warm start": name, **run(m, steps, args.questions, out / f"grpo-{name}")} for name, m in models.items()]
    print(f"{'warm start':<10} {'episodes':>8} {'TRL calls/ep':>12} {'env turns/ep':>12} {'answered':>8} {'mean reward':>11} {'s':>6}")
    for r in rows:
        print(f"{r['warm start']:<10} {r['episodes']:>8} {r['trl_calls_per_episode']:>12.2f} {r['env_turns_per_episode']:>12.2f} "
              f"{r['answered']:>8.2f} {r['mean_reward']:>11.3f} {r['seconds']:>6}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps({"tool_sft": sft_row, "grpo": rows}, indent=2))


if __name__ == "__main__":
    main()
