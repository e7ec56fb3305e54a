"""Does RL learn? SFT then GRPO with a tiny model on synthwiki, and a short SmolLM2 GRPO run.

The world: synthwiki with 4,000 passages; its 960 single-hop train questions and 48 dev
questions. The env: searchgym/SearchR1-v0 with 3 turns and Search-R1's format reward with
a retrieval score (0.2 for a well-formed episode, +0.3 when a retrieved document holds the
answer, 1 for an exact-match answer), so that partial progress has a gradient.

1. A small Llama built from scratch (hidden 128, 4 layers, tokenizer trained on the
   corpus) is pretrained by next-token prediction on the corpus passages, then
   warm-started by SFT on the oracle's Search-R1 trajectories.
2. From that checkpoint, GRPO (n=8) trains against the env; the dev reward of greedy play
   is measured every few steps and compared with the SFT model alone (step 0).
3. SmolLM2-135M-Instruct gets a short SFT on oracle trajectories (it has never seen the
   protocol) and then a few GRPO steps on the same questions.

Prints the numbers and writes results/learning/learning.png (+ every run's metrics.csv).

    python benchmarks/learning.py            # ~85 min on 2 CPU cores (--skip-tiny: SmolLM2 alone, about an hour)
    python benchmarks/learning.py --quick    # a smoke run of the scratch model's parts (~1 min of CPU)

``--stepsearch`` runs the StepSearch comparison instead (:func:`stepsearch_comparison`): on
synthwiki's two-hop bridge questions (searchgym/StepSearch-v0, 4 turns), one scratch model is
pretrained and SFT'd on the oracle's trajectories, then GRPO trains two copies of it with the
same seed, questions, samples and steps: one on the outcome reward alone (answer F1, -1 without
an answer; credit on the episode), one on StepSearch's reward (each search's information gain
minus redundancy, paid on its own turn with ``--credit turn``; F1 + 0.618 x search keys at the
end). Both are evaluated greedily on the same dev questions by answer F1 (and searches per
episode), drawn in one chart: results/learning-stepsearch/stepsearch-learning.png, and for the
full form also docs/stepsearch-learning.png.

    python benchmarks/learning.py --stepsearch           # ~35 min on 2 CPU cores
    python benchmarks/learning.py --stepsearch --quick   # ~2 min: tiny model, 2 steps per arm

--quick plays the same pipeline small: a 1,000-passage world, the tiny scratch model, one
pass of pretraining, SFT on 16 oracle episodes, two GRPO steps of 2 questions x 4 samples;
SmolLM2's part is left out (its one quick GRPO step alone takes minutes on a CPU; run it
with --quick --with-smollm2). No learning target is judged at that size: it checks that
every stage runs and writes its files.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import time
from pathlib import Path

WORLD = {"num_passages": 4000}
#: The world of --quick.
QUICK_WORLD = {"num_passages": 1000}
#: Search-R1's format reward with its retrieval score switched on.
REWARD = {"reward": "search_r1_format", "reward_options": {"retrieval_score": 0.3}}


def one_hop(split: str, limit: int | None = None, world: dict | None = None) -> list:
    import gymnasium as gym

    from searchgym.envs import search_env

    env = gym.make("searchgym/SearchR1-v0", split=split, corpus_options=world or WORLD)
    return [ex for ex in search_env(env).examples if ex.metadata.get("hops") == 1][:limit]


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [{k: (float(v) if v not in ("", None) and k != "stage_reward" else v) for k, v in row.items()} for row in csv.DictReader(f)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a few steps of each part (smoke test)")
    parser.add_argument("--replot", action="store_true", help="redraw OUT/learning.png from the metrics.csv files an earlier run left in OUT, and exit")
    parser.add_argument("--out", type=Path, default=Path("results/learning"))
    parser.add_argument("--skip-smollm2", action="store_true", help="only the scratch model")
    parser.add_argument("--with-smollm2", action="store_true", help="with --quick: also SmolLM2's part (minutes per GRPO step on a CPU)")
    parser.add_argument("--skip-tiny", action="store_true", help="only SmolLM2")
    parser.add_argument("--sft-epochs", type=int, default=None)
    parser.add_argument("--grpo-steps", type=int, default=None)
    parser.add_argument("--grpo-lr", type=float, default=2e-4, help="learning rate of the scratch model's GRPO (default: 2e-4)")
    parser.add_argument("--grpo-epochs", type=int, default=1, help="updates per GRPO batch of the scratch model (default: 1)")
    parser.add_argument("--pretrain-epochs", type=int, default=None, help="passes of next-token prediction over the corpus")
    parser.add_argument("--smollm2-steps", type=int, default=None)
    parser.add_argument("--sft-run", type=Path, default=None,
                        help="reuse the scratch model of an earlier SFT run folder (its final/ and metrics.csv) instead of pretraining and SFT")
    parser.add_argument("--smollm2-sft-questions", type=int, default=None, help="oracle trajectories of SmolLM2's SFT (default: 32)")
    parser.add_argument("--smollm2-lr", type=float, default=5e-6, help="learning rate of SmolLM2's GRPO (default: 5e-6)")
    parser.add_argument("--smollm2-kl", type=float, default=0.01, help="KL coefficient (k3, as a loss) of SmolLM2's GRPO against the SFT model (default: 0.01)")
    parser.add_argument("--smollm2-temperature", type=float, default=0.7,
                        help="sampling temperature of SmolLM2's GRPO rollouts (the losses use the same; default: 0.7)")
    parser.add_argument("--smollm2-eval", type=int, default=32, help="dev questions of SmolLM2's evaluations (default: 32)")
    parser.add_argument("--stepsearch", action="store_true",
                        help="the StepSearch comparison instead: GRPO on the outcome reward vs StepSearch's step rewards with turn credit")
    opts = parser.parse_args()
    if opts.stepsearch:
        stepsearch_comparison(opts, parser)
        return
    if opts.replot:
        found = {name: opts.out / name / "metrics.csv" for name in ("sft", "grpo", "smollm2")}
        if not any(path.is_file() for path in found.values()):
            parser.error(f"--replot reads {', '.join(str(p) for p in found.values())}; none exists (run the benchmark with --out {opts.out} first)")
        rows = {name: read_rows(path) if path.is_file() else [] for name, path in found.items()}
        plot(opts.out, rows["sft"], rows["grpo"], rows["smollm2"])
        print(f"wrote {opts.out}/learning.png from {', '.join(str(p) for p in found.values() if p.is_file())}")
        return

    from searchgym.training.args import Args
    from searchgym.training.sft import SFTArgs, sft
    from searchgym.training.trainer import Trainer

    q = opts.quick
    if q and not opts.with_smollm2 and not opts.skip_smollm2:
        opts.skip_smollm2 = True
        print("--quick: SmolLM2's part is left out (its quick GRPO step alone takes minutes on a CPU); add --with-smollm2 to run it")
    world = QUICK_WORLD if q else WORLD
    sft_epochs = opts.sft_epochs or (1 if q else 6)
    pretrain_epochs = opts.pretrain_epochs if opts.pretrain_epochs is not None else (1 if q else 8)
    grpo_steps = opts.grpo_steps or (2 if q else 40)
    smol_steps = opts.smollm2_steps or (1 if q else 16)
    smol_sft = opts.smollm2_sft_questions or (8 if q else 32)
    eval_limit = 4 if q else 48
    shutil.rmtree(opts.out, ignore_errors=True)
    opts.out.mkdir(parents=True)
    from searchgym.corpora.datasets import write_qa

    train, dev = one_hop("train", 16 if q else None, world), one_hop("dev", eval_limit, world)
    train_file, dev_file = write_qa(train, opts.out / "train-1hop.jsonl"), write_qa(dev, opts.out / "dev-1hop.jsonl")
    env_options = {"max_turns": 3, "dataset": str(train_file), "corpus_options": world, **REWARD}
    eval_options = {"dataset": str(dev_file)}
    print(f"synthwiki single-hop questions: {len(train)} train, {len(dev)} dev")

    sft_rows: list = []
    rows: list = []
    if not opts.skip_tiny:
        sft_dir = opts.out / "sft"
        if opts.sft_run is not None:
            if not (opts.sft_run / "final").is_dir() or not (opts.sft_run / "metrics.csv").is_file():
                parser.error(f"--sft-run expects an SFT run folder with final/ and metrics.csv, got {opts.sft_run}")
            shutil.copytree(opts.sft_run, sft_dir)
            sft_rows = read_rows(sft_dir / "metrics.csv")
            print(f"SFT: reusing {opts.sft_run} ({len(sft_rows)} steps, loss {sft_rows[0]['loss']:.2f} -> {sft_rows[-1]['loss']:.3f})")
        else:
            t0 = time.perf_counter()
            sft_rows = sft(SFTArgs(
                env_options=env_options, eval_env_options=eval_options, model="scratch", scratch_size="tiny" if q else "small", epochs=sft_epochs,
                pretrain_epochs=pretrain_epochs, batch_size=16, micro_batch_size=8, lr=3e-3, warmup_steps=20, eval_every=0,
                eval_limit=eval_limit, max_new_tokens=48, out=str(sft_dir), progress=True,
            ))
            print(f"SFT: {len(sft_rows)} steps in {time.perf_counter() - t0:.0f} s, loss {sft_rows[0]['loss']:.2f} -> "
                  f"{sft_rows[-1]['loss']:.3f}, dev reward {sft_rows[-1]['eval_reward']:.3f}")

        grpo = Args(
            model=str(opts.out / "sft" / "final"), env_options=env_options, eval_env_options=eval_options, algorithm="grpo", n=4 if q else 8,
            questions_per_step=2 if q else 4, micro_batch_size=8, lr=opts.grpo_lr, ppo_epochs=opts.grpo_epochs, temperature=1.0, max_new_tokens=48, num_envs=8 if q else 32,
            total_steps=grpo_steps, eval_every=max(1, grpo_steps // 6), eval_limit=eval_limit, save_every=grpo_steps,
            out=str(opts.out / "grpo"), tensorboard=False,
        )
        t0 = time.perf_counter()
        grpo_rows = Trainer(grpo).train()
        grpo_time = time.perf_counter() - t0
        rows = read_rows(opts.out / "grpo" / "metrics.csv")
        evals = [(r["step"], r["eval_reward"]) for r in rows if r.get("eval_reward") not in ("", None)]
        print(f"GRPO: {len(grpo_rows)} steps in {grpo_time:.0f} s; dev reward (greedy) by step: "
              + ", ".join(f"{int(s)}: {v:.3f}" for s, v in evals))
        print(f"train reward (sampled) first 3 steps {[round(r['reward'], 3) for r in grpo_rows[:3]]}, last 3 {[round(r['reward'], 3) for r in grpo_rows[-3:]]}")

    smol = []
    if not opts.skip_smollm2:
        # Zero-shot, SmolLM2 never completes a Search-R1 episode within 3 turns (reward 0
        # everywhere: no signal); a short SFT on the oracle teaches it the protocol.
        t0 = time.perf_counter()
        smol_sft_rows = sft(SFTArgs(
            env_options=env_options, eval_env_options=eval_options, model="smollm2", limit=smol_sft, epochs=1,
            batch_size=8, micro_batch_size=2, lr=5e-5, warmup_steps=2, eval_every=0, eval_limit=opts.smollm2_eval if not q else 4,
            max_new_tokens=48, out=str(opts.out / "smollm2-sft"), progress=True,
        ))
        print(f"SmolLM2 SFT: {len(smol_sft_rows)} steps on {smol_sft} oracle episodes in {time.perf_counter() - t0:.0f} s, "
              f"loss {smol_sft_rows[0]['loss']:.2f} -> {smol_sft_rows[-1]['loss']:.3f}, dev reward {smol_sft_rows[-1]['eval_reward']:.3f}")
        args = Args(
            model=str(opts.out / "smollm2-sft" / "final"), env_options=env_options, eval_env_options=eval_options,
            algorithm="grpo", n=4, questions_per_step=4, micro_batch_size=2, lr=opts.smollm2_lr, kl_coef=opts.smollm2_kl, temperature=opts.smollm2_temperature, max_new_tokens=48,
            num_envs=16, total_steps=smol_steps, eval_every=max(1, smol_steps // 4), eval_limit=opts.smollm2_eval if not q else 4,
            save_every=smol_steps, out=str(opts.out / "smollm2"), tensorboard=False,
        )
        t0 = time.perf_counter()
        smol = Trainer(args).train()
        smol = read_rows(opts.out / "smollm2" / "metrics.csv")
        ev = [(int(r["step"]), r["eval_reward"], r["eval_em"]) for r in smol if r.get("eval_reward") not in ("", None)]
        print(f"SmolLM2 GRPO: {smol_steps} steps in {time.perf_counter() - t0:.0f} s; train reward "
              f"{[round(r['reward'], 3) for r in smol if r['step'] > 0]}; dev (step, reward, EM): {ev}")

    plot(opts.out, sft_rows, rows, smol)
    print(f"wrote {opts.out}/learning.png")


def plot(out: Path, sft_rows: list, grpo_rows: list, smol: list) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (["sft", "grpo"] if sft_rows else []) + (["smol"] if smol else [])
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.6), squeeze=False)
    axes = list(axes[0])
    if not sft_rows:
        axes = [None, None, *axes]
    if sft_rows:
        ax = axes[0]
        ax.plot([r["step"] for r in sft_rows], [r["loss"] for r in sft_rows])
        ax.set_title("scratch model: SFT on oracle trajectories")
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("cross-entropy (turn tokens)")
        ax.set_yscale("log")
        grpo_panel(axes[1], grpo_rows, "small scratch model: SFT, then GRPO")
    if smol:
        grpo_panel(axes[2], smol, "SmolLM2-135M: SFT, then GRPO")
    for a in axes:
        if a is not None:
            a.grid(alpha=0.3)
    fig.suptitle("synthwiki Search-R1, 3 turns, format reward with a retrieval score (max 1)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "learning.png", dpi=110)


def grpo_panel(ax, rows: list, title: str) -> None:
    """One GRPO run's rewards per step: the sampled train batch's and the greedy dev reward,
    against the SFT model's (step 0), on a reward axis from 0 to 1."""
    tr = [(r["step"], r["reward"]) for r in rows if r.get("reward") not in ("", None)]
    ev = [(r["step"], r["eval_reward"]) for r in rows if r.get("eval_reward") not in ("", None)]
    if tr:
        ax.plot(*zip(*tr), alpha=0.5, color="tab:orange", label="GRPO train batch (sampled)")
    if ev:
        ax.plot(*zip(*ev), marker="o", color="tab:blue", label="SFT + GRPO, dev (greedy)")
        ax.axhline(ev[0][1], color="gray", linestyle="--", label="SFT alone, dev (greedy)")
        said_from_to(ax, ev)
    ax.set_title(title)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("reward")
    ax.set_ylim(0, 1)  # the reward axis is the whole reward (0 to 1), so a gain is drawn at its size
    ax.legend(fontsize=7, loc="upper left")


def said_from_to(ax, evals: list) -> None:
    """Write the dev reward's first and last value beside the last point (what the caption cites)."""
    (first_step, first), (last_step, last) = evals[0], evals[-1]
    ax.annotate(f"dev {float(first):.3f} -> {float(last):.3f} in {int(last_step) - int(first_step)} steps", xy=(last_step, last),
                xytext=(0.35, 0.06), textcoords="axes fraction", fontsize=8, fontweight="bold",
                arrowprops={"arrowstyle": "->", "color": "black", "lw": 0.8})


# ---------------------------------------------------------------- StepSearch: step rewards vs outcome
#: The env of the comparison: StepSearch's (Search-R1 grammar, top-3), 4 turns: two hops, the answer, one spare.
STEPSEARCH_ENV = "searchgym/StepSearch-v0"
STEPSEARCH_RECIPE = "searchgym.methods.stepsearch:StepSearchReward"
#: The two arms: (name, reward options, credit). The outcome arm is StepSearch's own outcome (F1,
#: -1 without an answer) with no step reward and no search-key term.
STEPSEARCH_ARMS = (
    ("outcome", {"step_rewards": False}, "episode"),
    ("stepsearch", {}, "turn"),
)


def two_hop(split: str, limit: int | None, world: dict) -> list:
    import gymnasium as gym

    from searchgym.envs import search_env

    env = gym.make(STEPSEARCH_ENV, split=split, corpus_options=world)
    return [ex for ex in search_env(env).examples if ex.metadata.get("type") == "bridge" and ex.metadata.get("hops") == 2][:limit]


def stepsearch_comparison(opts, parser) -> None:
    """Same scratch model, seed, questions and budget; GRPO on the outcome reward alone vs on
    StepSearch's step rewards credited per turn; greedy dev F1 of both in one chart."""
    from searchgym.corpora.datasets import write_qa
    from searchgym.training.args import Args
    from searchgym.training.sft import SFTArgs, sft
    from searchgym.training.trainer import Trainer

    q = opts.quick
    out = opts.out if opts.out != Path("results/learning") else Path("results/learning-stepsearch")
    world = {"seed": 7, "num_passages": 1000} if q else {"seed": 7, "num_passages": 2000}
    steps = opts.grpo_steps or (2 if q else 20)
    eval_limit = 4 if q else 48
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    train, dev = two_hop("train", 16 if q else None, world), two_hop("dev", eval_limit, world)
    train_file, dev_file = write_qa(train, out / "train-2hop.jsonl"), write_qa(dev, out / "dev-2hop.jsonl")
    env_options = {"max_turns": 4, "dataset": str(train_file), "corpus_options": world}
    # Both arms are evaluated on the outcome alone, so their dev numbers are one metric.
    eval_options = {"dataset": str(dev_file), "reward_options": {"step_rewards": False}}
    print(f"synthwiki two-hop bridge questions: {len(train)} train, {len(dev)} dev")

    t0 = time.perf_counter()
    sft_rows = sft(SFTArgs(
        env_id=STEPSEARCH_ENV, env_options=env_options, eval_env_options=eval_options, model="scratch",
        scratch_size="tiny" if q else "small", epochs=opts.sft_epochs or (1 if q else 4),
        pretrain_epochs=opts.pretrain_epochs if opts.pretrain_epochs is not None else (1 if q else 2),
        batch_size=16, micro_batch_size=8, lr=3e-3, warmup_steps=20, eval_every=0, eval_limit=eval_limit,
        max_new_tokens=48, out=str(out / "sft"), progress=True,
    ))
    print(f"SFT: {len(sft_rows)} steps in {time.perf_counter() - t0:.0f} s, loss {sft_rows[0]['loss']:.2f} -> "
          f"{sft_rows[-1]['loss']:.3f}, dev reward {sft_rows[-1]['eval_reward']:.3f}")

    runs = {}
    for name, options, credit in STEPSEARCH_ARMS:
        args = Args(
            model=str(out / "sft" / "final"), env_id=STEPSEARCH_ENV, reward=STEPSEARCH_RECIPE,
            env_options={**env_options, "reward_options": options}, eval_env_options=eval_options,
            algorithm="grpo", credit=credit, n=4 if q else 8, questions_per_step=2 if q else 4, micro_batch_size=8,
            lr=opts.grpo_lr, ppo_epochs=opts.grpo_epochs, temperature=1.0, max_new_tokens=48, num_envs=8 if q else 32,
            total_steps=steps, eval_every=max(1, steps // 6), eval_limit=eval_limit, save_every=steps, seed=0,
            out=str(out / name), tensorboard=False,
        )
        t0 = time.perf_counter()
        Trainer(args).train()
        runs[name] = read_rows(out / name / "metrics.csv")
        ev = [(int(r["step"]), r["eval_f1"], r["eval_searches"]) for r in runs[name] if r.get("eval_f1") not in ("", None)]
        print(f"GRPO {name} (credit {credit}): {steps} steps in {time.perf_counter() - t0:.0f} s; dev (step, F1, searches): "
              + ", ".join(f"({s}, {f:.3f}, {n:.2f})" for s, f, n in ev))
    plot_stepsearch(out, runs, q)
    summary = stepsearch_summary(runs, steps, len(train), len(dev))
    (out / "summary.md").write_text(summary + "\n", encoding="utf-8")
    print(summary)
    if not q:
        shutil.copy(out / "stepsearch-learning.png", Path("docs") / "stepsearch-learning.png")
        print(f"wrote {out}/stepsearch-learning.png and docs/stepsearch-learning.png")
    else:
        print(f"wrote {out}/stepsearch-learning.png (--quick: no learning is judged at this size)")


def stepsearch_summary(runs: dict, steps: int, n_train: int, n_dev: int) -> str:
    """The lines RESULTS.md quotes: each arm's greedy dev F1 and searches at its first and last evaluation."""
    lines = [f"StepSearch vs outcome-only GRPO, {steps} steps, {n_train} train / {n_dev} dev two-hop questions:",
             "| arm | credit | dev F1 first -> last | searches/episode first -> last |", "|---|---|---|---|"]
    for name, _, credit in STEPSEARCH_ARMS:
        ev = [r for r in runs[name] if r.get("eval_f1") not in ("", None)]
        if ev:
            lines.append(f"| {name} | {credit} | {ev[0]['eval_f1']:.3f} -> {ev[-1]['eval_f1']:.3f} | "
                         f"{ev[0]['eval_searches']:.2f} -> {ev[-1]['eval_searches']:.2f} |")
    return "\n".join(lines)


def plot_stepsearch(out: Path, runs: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    colors = {"outcome": "tab:gray", "stepsearch": "tab:blue"}
    for name, rows in runs.items():
        ev = [(r["step"], r["eval_f1"], r["eval_searches"]) for r in rows if r.get("eval_f1") not in ("", None)]
        if ev:
            s, f1, n = zip(*ev)
            label = "outcome reward, episode credit" if name == "outcome" else "StepSearch step rewards, turn credit"
            axes[0].plot(s, f1, marker="o", color=colors[name], label=label)
            axes[1].plot(s, n, marker="o", color=colors[name], label=label)
    axes[0].set_ylabel("dev answer F1 (greedy)")
    axes[0].set_ylim(0, 1)
    axes[1].set_ylabel("searches per dev episode")
    axes[1].set_ylim(0, 3)  # the most a 4-turn episode that answers can run
    for ax in axes:
        ax.set_xlabel("GRPO step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("synthwiki two-hop questions, scratch model after SFT; GRPO, same seed and budget"
                 + (" (--quick: a smoke run)" if quick else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "stepsearch-learning.png", dpi=110)


if __name__ == "__main__":
    main()
