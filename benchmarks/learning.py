"""Does RL learn? SFT then GRPO with a tiny model on synthwiki, and a short SmolLM2 GRPO run.

1. A small Llama built from scratch (tokenizer trained on the synthwiki corpus) is
   warm-started by SFT on the oracle's Search-R1 trajectories (single-hop questions).
2. From that checkpoint, GRPO trains against searchgym/SearchR1-v0 (EM reward); the dev
   reward of greedy play is measured every few steps and compared with the SFT model
   alone (the step-0 evaluation).
3. SmolLM2-135M-Instruct, zero-shot, gets a few GRPO steps on the same questions.

Prints the numbers and writes results/learning/learning.png (+ every run's metrics.csv).

    python benchmarks/learning.py            # ~20 min on 2 CPU cores
    python benchmarks/learning.py --quick    # a smoke run of every part
"""

from __future__ import annotations

import argparse
import csv
import shutil
import time
from pathlib import Path


def one_hop(split: str, limit: int | None = None) -> list:
    import gymnasium as gym

    env = gym.make("searchgym/SearchR1-v0", split=split)
    return [ex for ex in env.unwrapped.examples if ex.metadata.get("hops") == 1][:limit]


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: (float(v) if v not in ("", None) and k != "stage_reward" else v) for k, v in row.items()} for row in csv.DictReader(f)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few steps of each part (smoke test)")
    parser.add_argument("--out", type=Path, default=Path("results/learning"))
    parser.add_argument("--skip-smollm2", action="store_true", help="only the tiny model")
    parser.add_argument("--sft-epochs", type=int, default=None)
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--smollm2-steps", type=int, default=None)
    opts = parser.parse_args()

    from searchgym.training.args import Args
    from searchgym.training.sft import SFTArgs, sft
    from searchgym.training.trainer import Trainer

    q = opts.quick
    sft_epochs = opts.sft_epochs or (1 if q else 12)
    grpo_steps = opts.grpo_steps or (2 if q else 30)
    smol_steps = opts.smollm2_steps or (1 if q else 2)
    eval_limit = 8 if q else 48
    shutil.rmtree(opts.out, ignore_errors=True)
    opts.out.mkdir(parents=True)
    from searchgym.corpora.datasets import write_qa

    train, dev = one_hop("train", 40 if q else None), one_hop("dev", eval_limit)
    train_file, dev_file = write_qa(train, opts.out / "train-1hop.jsonl"), write_qa(dev, opts.out / "dev-1hop.jsonl")
    env_options = {"max_turns": 3, "dataset": str(train_file)}
    eval_options = {"dataset": str(dev_file)}
    print(f"synthwiki single-hop questions: {len(train)} train, {len(dev)} dev")

    t0 = time.perf_counter()
    sft_rows = sft(SFTArgs(
        env_options=env_options, eval_env_options=eval_options, model="scratch", scratch_size="small", epochs=sft_epochs,
        batch_size=16, micro_batch_size=8, lr=2e-3, warmup_steps=10, eval_every=0, eval_limit=eval_limit,
        max_new_tokens=48, out=str(opts.out / "sft"), progress=True,
    ))
    sft_time = time.perf_counter() - t0
    print(f"SFT: {len(sft_rows)} steps in {sft_time:.0f} s, loss {sft_rows[0]['loss']:.2f} -> {sft_rows[-1]['loss']:.3f}, "
          f"dev reward {sft_rows[-1]['eval_reward']:.3f}")

    grpo = Args(
        model=str(opts.out / "sft" / "final"), env_options=env_options, eval_env_options=eval_options, algorithm="grpo", n=8,
        questions_per_step=4, micro_batch_size=8, lr=1e-4, temperature=1.0, max_new_tokens=48, num_envs=32,
        total_steps=grpo_steps, eval_every=max(1, grpo_steps // 6), eval_limit=eval_limit, save_every=grpo_steps,
        out=str(opts.out / "grpo"), tensorboard=False,
    )
    t0 = time.perf_counter()
    grpo_rows = Trainer(grpo).train()
    grpo_time = time.perf_counter() - t0
    rows = read_rows(opts.out / "grpo" / "metrics.csv")
    evals = [(r["step"], r["eval_reward"]) for r in rows if r.get("eval_reward") not in ("", None)]
    print(f"GRPO: {len(grpo_rows)} steps in {grpo_time:.0f} s; dev reward (greedy EM) by step: "
          + ", ".join(f"{int(s)}: {v:.3f}" for s, v in evals))
    print(f"train reward (sampled) first 3 steps {[round(r['reward'], 3) for r in grpo_rows[:3]]}, last 3 {[round(r['reward'], 3) for r in grpo_rows[-3:]]}")

    smol = []
    if not opts.skip_smollm2:
        args = Args(
            # EM alone is 0 for every zero-shot SmolLM2 answer (no signal); Search-R1's format
            # reward also credits valid turns and retrieval hits.
            reward="search_r1_format",
            model="smollm2", env_options=env_options, eval_env_options=eval_options, algorithm="grpo", n=4, questions_per_step=4,
            micro_batch_size=2, lr=1e-5, temperature=1.0, max_new_tokens=64, num_envs=16, total_steps=smol_steps,
            eval_every=smol_steps, eval_limit=8 if not q else 4, save_every=smol_steps, out=str(opts.out / "smollm2"), tensorboard=False,
        )
        t0 = time.perf_counter()
        smol = Trainer(args).train()
        smol_rows = read_rows(opts.out / "smollm2" / "metrics.csv")
        ev = [(int(r["step"]), r["eval_reward"], r["eval_searches"]) for r in smol_rows if r.get("eval_reward") not in ("", None)]
        print(f"SmolLM2 GRPO: {len(smol)} steps in {time.perf_counter() - t0:.0f} s; train reward {[round(r['reward'], 3) for r in smol]}, "
              f"searches {[round(r['searches'], 2) for r in smol]}; dev (step, EM, searches): {ev}")

    plot(opts.out, sft_rows, rows, smol)
    print(f"wrote {opts.out}/learning.png")


def plot(out: Path, sft_rows: list, grpo_rows: list, smol: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3 if smol else 2, figsize=(13 if smol else 9, 3.6))
    ax = axes[0]
    ax.plot([r["step"] for r in sft_rows], [r["loss"] for r in sft_rows])
    ax.set_title("SFT on oracle trajectories")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (turn tokens)")
    ax.set_yscale("log")
    ax = axes[1]
    ev = [(r["step"], r["eval_reward"]) for r in grpo_rows if r.get("eval_reward") not in ("", None)]
    tr = [(r["step"], r["reward"]) for r in grpo_rows if r.get("reward") not in ("", None)]
    if ev:
        ax.plot(*zip(*ev), marker="o", label="SFT + GRPO, dev (greedy)")
        ax.axhline(ev[0][1], color="gray", linestyle="--", label="SFT alone, dev (greedy)")
    if tr:
        ax.plot(*zip(*tr), alpha=0.5, label="GRPO train batch (sampled)")
    ax.set_title("tiny model: dev reward (EM) per GRPO step")
    ax.set_xlabel("GRPO step")
    ax.legend(fontsize=7)
    if smol:
        ax = axes[2]
        ax.plot([r["step"] for r in smol], [r["reward"] for r in smol], marker="o", label="train reward")
        ax.plot([r["step"] for r in smol], [r["searches"] for r in smol], marker="s", label="searches / episode")
        ax.set_title("SmolLM2-135M GRPO (zero-shot start)")
        ax.set_xlabel("GRPO step")
        ax.legend(fontsize=7)
    for a in axes:
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "learning.png", dpi=110)


if __name__ == "__main__":
    main()
