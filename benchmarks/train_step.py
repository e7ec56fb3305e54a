"""Trainer throughput: tokens/s per update, peak memory, and where a step's time goes.

Runs a few GRPO steps of ``searchgym train`` and reports, from the run's own metrics, the
update throughput (context tokens forwarded and back-propagated per second, all PPO
epochs), the peak resident memory, and the share of each step spent in rollout (of
which retrieval), update, and pushing weights to the engine.

    python benchmarks/train_step.py                      # tiny random model, ~1 min
    python benchmarks/train_step.py --model smollm2 --steps 2 --lora-rank 8
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="policy (default: the tiny random test model, context 2048)")
    parser.add_argument("--steps", type=int, default=4, help="GRPO steps (the first one is reported apart: warm-up)")
    parser.add_argument("--questions", type=int, default=4, help="questions per step")
    parser.add_argument("--n", type=int, default=4, help="samples per question")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=0)
    parser.add_argument("--engine", default="transformers", choices=["transformers", "vllm"])
    opts = parser.parse_args()

    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    out = Path(tempfile.mkdtemp(prefix="searchgym-train-step-"))
    try:
        args = Args(
            model=opts.model or str(tiny_model_folder()), env_options={"max_turns": 3}, algorithm="grpo", n=opts.n,
            questions_per_step=opts.questions, micro_batch_size=opts.micro_batch_size, max_new_tokens=opts.max_new_tokens,
            num_envs=opts.questions * opts.n, total_steps=opts.steps, save_every=opts.steps, lr=1e-5, lora_rank=opts.lora_rank,
            engine=opts.engine, out=str(out), tensorboard=False, progress=True, kl_coef=0.001,
        )
        rows = Trainer(args).train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    steady = rows[1:] or rows
    mean = lambda key: sum(r[key] for r in steady) / len(steady)  # noqa: E731
    total = mean("time_rollout") + mean("time_update") + mean("time_sync")
    print(f"\nmodel {opts.model or 'tiny-random (hidden 128, 2 layers)'}, engine {opts.engine}, {opts.questions}x{opts.n} episodes per step, "
          f"LoRA rank {opts.lora_rank or '-'}; steps 2..{len(rows)} (step 1 is warm-up)")
    print(f"| metric | value |\n|---|---|")
    print(f"| update throughput | {mean('update_tokens_per_s'):,.0f} tokens/s |")
    print(f"| step time | {total:.2f} s |")
    print(f"| rollout share | {mean('time_rollout') / total:.1%} (retrieval {mean('time_retrieval') / total:.1%} of the step) |")
    print(f"| update share | {mean('time_update') / total:.1%} |")
    print(f"| weight push share | {mean('time_sync') / total:.1%} |")
    print(f"| generated tokens / episode | {mean('response_tokens'):.1f} (incl. observations in context) |")
    print(f"| peak memory | {max(r['peak_memory_mb'] for r in rows):,.0f} MB |")


if __name__ == "__main__":
    main()
