"""Trainer throughput: tokens/s per update, peak memory, and where a step's time goes.

Runs a few GRPO steps of ``searchgym train`` and reports, from the run's own metrics, the
update throughput (context tokens forwarded and back-propagated per second, all PPO
epochs), the peak resident memory, and the share of each step spent in rollout (of
which retrieval), update, and pushing weights to the engine.

    python benchmarks/train_step.py                      # tiny random model, ~1 min
    python benchmarks/train_step.py --quick              # 2 steps of 2x2 episodes, 16 tokens a turn: a smoke run
    python benchmarks/train_step.py --model smollm2 --steps 2 --lora-rank 8
    python benchmarks/train_step.py --shape smollm2 --device cuda --json out.json   # a GPU, SmolLM2-135M's shape, random weights

``--shape smollm2`` trains a random-weight Llama of SmolLM2-135M's shape (hidden 576, 30
layers, 9 heads of which 3 key/value, MLP 1536, vocabulary 49,152, tied embeddings: the
``config.json`` of HuggingFaceTB/SmolLM2-135M) over the tiny test tokenizer, so it needs no
download: the step's compute is SmolLM2's, its text is noise (ids past the tokenizer decode
to nothing).

--quick plays 2 GRPO steps of 2 questions x 2 samples with 16 tokens a turn on one torch
thread (the tiny model unless --model); any size given on the command line wins. There is
no target to judge here; its figures measure a smaller step than the full form's and are
not comparable to benchmarks/RESULTS.md's "Training step" (4 x 4 episodes, 32 tokens,
steps 2-4).
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="policy (default: the tiny random test model, context 2048)")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps, the first one reported apart: warm-up (default 4; --quick: 2)")
    parser.add_argument("--questions", type=int, default=None, help="questions per step (default 4; --quick: 2)")
    parser.add_argument("--n", type=int, default=None, help="samples per question (default 4; --quick: 2)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="tokens per turn (default 32; --quick: 16)")
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--lora-rank", type=int, default=0)
    parser.add_argument("--engine", default="transformers", choices=["transformers", "vllm"])
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads of the trainer (default torch's own, one per core; --quick: 1, which keeps a shared "
                        "CPU's waiting threads from spinning)")
    parser.add_argument("--shape", choices=["tiny", "smollm2"], default="tiny",
                        help="the random policy when no --model: tiny (hidden 128, 2 layers) or smollm2 (SmolLM2-135M's shape)")
    parser.add_argument("--device", default=None, help="the policy's torch device: cpu, cuda, cuda:1 (default: CUDA when available)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON to this file")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 2 steps of 2 questions x 2 samples, 16 tokens a turn, 1 torch thread (sizes given on the "
                        "command line win)")
    opts = parser.parse_args()
    for name, full, quick in (("steps", 4, 2), ("questions", 4, 2), ("n", 4, 2), ("max_new_tokens", 32, 16)):
        if getattr(opts, name) is None:
            setattr(opts, name, quick if opts.quick else full)
    if opts.threads is None and opts.quick:
        opts.threads = 1
    for name in ("steps", "questions", "n", "max_new_tokens", "micro_batch_size") + (("threads",) if opts.threads is not None else ()):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(opts, name)}")
    if opts.lora_rank < 0:
        parser.error(f"--lora-rank expects 0 (full fine-tuning) or a positive rank, got {opts.lora_rank}")
    if opts.quick:
        print(f"--quick: {opts.steps} GRPO steps of {opts.questions} questions x {opts.n} samples, {opts.max_new_tokens} tokens a turn, "
              f"{opts.threads} torch thread(s); "
              "no target is judged, and the figures measure a smaller step than benchmarks/RESULTS.md's 'Training step' (not comparable)")

    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    out = Path(tempfile.mkdtemp(prefix="searchgym-train-step-"))
    try:
        model = opts.model or (str(smollm2_shaped(out / "policy")) if opts.shape == "smollm2" else str(tiny_model_folder()))
        args = Args(
            model=model, device=opts.device, env_options={"max_turns": 3}, algorithm="grpo", n=opts.n,
            questions_per_step=opts.questions, micro_batch_size=opts.micro_batch_size, max_new_tokens=opts.max_new_tokens,
            num_envs=opts.questions * opts.n, total_steps=opts.steps, save_every=opts.steps, lr=1e-5, lora_rank=opts.lora_rank,
            engine=opts.engine, out=str(out), tensorboard=False, progress=True, kl_coef=0.001, threads=opts.threads,
        )
        rows = Trainer(args).train()
    finally:
        shutil.rmtree(out, ignore_errors=True)
    steady = rows[1:] or rows
    mean = lambda key: sum(r[key] for r in steady) / len(steady)  # noqa: E731
    total = mean("time_rollout") + mean("time_update") + mean("time_sync")
    shape = "SmolLM2-135M-shaped random" if opts.shape == "smollm2" else "tiny-random (hidden 128, 2 layers)"
    print(f"\nmodel {opts.model or shape}, device {opts.device or 'default'}, engine {opts.engine}, {opts.questions}x{opts.n} episodes per step, "
          f"LoRA rank {opts.lora_rank or '-'}; steps 2..{len(rows)} (step 1 is warm-up)")
    print(f"| metric | value |\n|---|---|")
    print(f"| update throughput | {mean('update_tokens_per_s'):,.0f} tokens/s |")
    print(f"| step time | {total:.2f} s |")
    print(f"| rollout share | {mean('time_rollout') / total:.1%} (retrieval {mean('time_retrieval') / total:.1%} of the step) |")
    print(f"| update share | {mean('time_update') / total:.1%} |")
    print(f"| weight push share | {mean('time_sync') / total:.1%} |")
    print(f"| generated tokens / episode | {mean('response_tokens'):.1f} (incl. observations in context) |")
    print(f"| peak memory | {max(r['peak_memory_mb'] for r in rows):,.0f} MB |")
    if opts.json:
        figures = {"model": opts.model or shape, "device": opts.device, "engine": opts.engine, "episodes": opts.questions * opts.n,
                   "max_new_tokens": opts.max_new_tokens, "update_tokens_per_s": mean("update_tokens_per_s"), "step_s": total,
                   "rollout_s": mean("time_rollout"), "update_s": mean("time_update"),
                   "peak_memory_mb": max(r["peak_memory_mb"] for r in rows), "steps": rows}
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(figures, indent=2, default=str))


def smollm2_shaped(folder: Path) -> Path:
    """A random-weight Llama of SmolLM2-135M's shape over the tiny test tokenizer, saved to ``folder``."""
    import torch
    import transformers

    from searchgym.lm.testing import tiny_tokenizer

    tokenizer = tiny_tokenizer()
    config = transformers.LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=2048, rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


if __name__ == "__main__":
    main()
