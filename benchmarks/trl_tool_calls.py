"""TRL's own tool loop from a warm start SFT'd on the oracle's tool calls, against the example's.

docs/trl.md's tool example (``GRPOTrainer(environment_factory=tool_environment(...))``) made
no call from its tag warm start: the tiny scratch model (and SmolLM2) write none zero-shot.
This builds two warm starts on the same small synthwiki world, the example's (``searchgym sft
--model scratch``: the tag grammar) and one SFT'd on the oracle's tool calls (``--chat-template
hermes --env-options '{"action_format": "tools", ...}'``, many epochs: the tiny model must
learn the call's form), then runs the same GRPO steps through TRL 1.16's real trainer and
tool loop from each, and prints the calls per episode (those TRL parsed, and the turns the
env played), the episodes that answered and the mean reward (``get_reward``, with
``unread_calls``). ``--before`` / ``--after`` take model folders instead of building them.
Measured (benchmarks/RESULTS.md, "Tool calls"): the tiny model's tool warm start writes a
call in every episode, but none TRL can parse yet (each is the env's bad call through
``unread_calls``); neither warm start earns a reward.

    python benchmarks/trl_tool_calls.py --quick    # the tiny scratch model, 2 GRPO steps of 8 episodes
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
        environment_factory=tool_environment("searchgym/SearchR1-v0", **WORLD),
        reward_funcs=[unread_calls, record],
        train_dataset=tool_dataset("searchgym/SearchR1-v0", split="train", limit=questions, **WORLD),
        args=GRPOConfig(output_dir=str(out), num_generations=2, per_device_train_batch_size=4, max_steps=steps,
                        max_completion_length=256, learning_rate=1e-6, use_cpu=True, bf16=False, report_to=[],
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


#: The two warm starts' `searchgym sft` arguments (the world of WORLD, its questions).
SFT = {
    "before": ["--model", "scratch", "--scratch-size", "tiny", "--limit", "64", "--epochs", "1", "--eval-limit", "0",
               "--env-options", json.dumps({"corpus_options": WORLD["corpus_options"]})],
    "after": ["--model", "scratch", "--scratch-size", "tiny", "--chat-template", "hermes", "--limit", "32", "--epochs", "30",
              "--batch-size", "8", "--lr", "3e-3", "--warmup-steps", "10", "--eval-limit", "0",
              "--env-options", json.dumps({"action_format": "tools", **WORLD})],
}


def warm_start(name: str, out: Path) -> str:
    """Build the ``name`` warm start with `searchgym sft`; its model folder."""
    folder = out / f"sft-{name}"
    code = "from searchgym.cli import run; run()"
    subprocess.run([sys.executable, "-c", code, "sft", *SFT[name], "--out", str(folder)], check=True)
    return str(folder / "final")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 GRPO steps (default 8)")
    parser.add_argument("--before", help="the example's warm start, a model folder (default: built here)")
    parser.add_argument("--after", help="a warm start SFT'd on the oracle's tool calls (default: built here)")
    parser.add_argument("--questions", type=int, default=8, help="training questions")
    parser.add_argument("--out", default="runs/bench-trl-tools")
    args = parser.parse_args()
    out = Path(args.out)
    steps = 2 if args.quick else 8
    models = {"before": args.before or warm_start("before", out), "after": args.after or warm_start("after", out)}
    rows = [{"warm start": name, **run(m, steps, args.questions, out / f"grpo-{name}")} for name, m in models.items()]
    print(f"{'warm start':<10} {'episodes':>8} {'TRL calls/ep':>12} {'env turns/ep':>12} {'answered':>8} {'mean reward':>11} {'s':>6}")
    for r in rows:
        print(f"{r['warm start']:<10} {r['episodes']:>8} {r['trl_calls_per_episode']:>12.2f} {r['env_turns_per_episode']:>12.2f} "
              f"{r['answered']:>8.2f} {r['mean_reward']:>11.3f} {r['seconds']:>6}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
