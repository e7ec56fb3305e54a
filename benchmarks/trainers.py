"""searchgym's GRPO trainer against TRL's GRPOTrainer (through searchgym.integrations.trl), side by side.

The same env (synthwiki Search-R1, 3 turns, Search-R1's format reward with a retrieval
score; single-hop train questions, held-out dev questions), the same warm start (the SFT
checkpoint `searchgym sft` makes from the oracle's play), the same questions per step,
samples per question, optimizer steps, learning rate, clipping, temperature and tokens
per turn, GRPO in both. The benchmark draws the training questions itself (a seeded
shuffle of the train questions, reshuffled every pass) and gives both trainers the same
questions in the same order, step by step: searchgym's trainer takes them from
``Trainer.order`` (replaced by a fixed schedule after ``build()``), TRL's from a
``train_dataset`` in schedule order with ``shuffle_dataset=False`` (its RepeatSampler then
walks the rows in order, ``num_generations`` copies each). The questions each trainer
actually played are recorded and checked against the schedule. The two trainers:

- searchgym: ``Trainer(Args(algorithm="grpo", ...))``;
- TRL: ``GRPOTrainer(rollout_func=EnvRollout(...), reward_funcs=env_reward)`` with
  ``loss_type="dapo"`` (token mean over the batch, as searchgym's ``token-mean``),
  ``scale_rewards="group"`` (group std, as searchgym's GRPO), ``beta=0`` (no KL, as
  ``kl_coef=0``), one update per batch, a constant learning rate, no weight decay,
  gradient norm clipped at 1.0 (searchgym's defaults).

Every ``--eval-every`` steps both policies play the same dev questions greedily through
the same harness (``searchgym.training.trainer.evaluate_policy``); evaluation time is
left out of the training wall time. Prints one table (dev reward and EM by step, wall
time, generated tokens per training second) and writes OUT/trainers.png, OUT/trainers.json
and each run's files.

    python benchmarks/trainers.py                      # scratch model, ~25 min on 2 CPU cores
    python benchmarks/trainers.py --model smollm2      # SmolLM2-135M warm start (hours on a CPU)
    python benchmarks/trainers.py --quick              # a smoke run of every part (tiny model, 1,000-passage world)
    python benchmarks/trainers.py --seeds 0,1,2        # three seeds, one table and chart
    python benchmarks/trainers.py --matched-sampling   # TRL samples with searchgym's seeds (same samples at equal weights)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learning import QUICK_WORLD, REWARD, WORLD, one_hop, read_rows  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="a few steps of each part (smoke test): the tiny scratch model on a 1,000-passage world, 2 questions "
                        "per step, evaluations at the first and last step on 4 dev questions; no target is judged")
    parser.add_argument("--out", type=Path, default=Path("results/trainers"), help="output folder (default results/trainers)")
    parser.add_argument("--model", default="scratch", help="student of the SFT warm start: scratch (a small Llama) or smollm2 (default scratch)")
    parser.add_argument("--scratch-size", default=None, choices=("tiny", "small", "base"), help="size of the scratch model (default small; --quick: tiny)")
    parser.add_argument("--sft-run", type=Path, default=None, help="reuse an SFT run folder's final/ instead of running SFT")
    parser.add_argument("--sft-epochs", type=int, default=None, help="passes of the SFT warm start over the oracle episodes")
    parser.add_argument("--sft-questions", type=int, default=None, help="oracle episodes of the SFT warm start")
    parser.add_argument("--steps", type=int, default=None, help="GRPO optimizer steps of each trainer (default 12)")
    parser.add_argument("--questions-per-step", type=int, default=None, help="questions per step (default 4; --quick: 2)")
    parser.add_argument("--n", type=int, default=4, help="samples per question (default 4)")
    parser.add_argument("--micro-batch-size", type=int, default=4,
                        help="episodes per forward/backward pass; gradients accumulate to one optimizer step per batch (default 4)")
    parser.add_argument("--lr", type=float, default=None, help="learning rate (default 2e-4 scratch, 5e-6 smollm2)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature of both (default 1.0)")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="tokens per agent turn (default 48)")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between dev evaluations (default 3)")
    parser.add_argument("--eval-limit", type=int, default=None, help="dev questions per evaluation (default 32)")
    parser.add_argument("--seed", type=int, default=0, help="seed of both trainers: question order, sampling, initialisation of anything new (default 0)")
    parser.add_argument("--seeds", default=None, help="several seeds, comma-separated (e.g. 0,1,2): one run of each trainer per seed, "
                        "each in OUT/seed-N, one table and chart over all (overrides --seed)")
    parser.add_argument("--matched-sampling", action="store_true",
                        help="TRL's rollout seeds every episode as searchgym's trainer does (EnvRollout.seeds), so at equal weights "
                        "the two draw the same samples; the share of identical samples by step is printed and saved")
    parser.add_argument("--trainers", default="searchgym,trl", help="which to run, comma-separated (default searchgym,trl)")
    opts = parser.parse_args(argv)
    for name in ("steps", "sft_epochs", "sft_questions", "eval_every", "eval_limit"):
        value = getattr(opts, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {value}")
    opts.questions_per_step = opts.questions_per_step or (2 if opts.quick else 4)
    opts.scratch_size = opts.scratch_size or ("tiny" if opts.quick else "small")
    for name in ("questions_per_step", "max_new_tokens"):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer, got {getattr(opts, name)}")
    if opts.micro_batch_size < 1 or (opts.n * opts.questions_per_step) % opts.micro_batch_size:
        parser.error(f"--micro-batch-size must divide the batch (--n x --questions-per-step = {opts.n * opts.questions_per_step}), got {opts.micro_batch_size}")
    if opts.n < 2:
        parser.error(f"--n must be at least 2 (GRPO compares samples of one question), got {opts.n}")
    if not opts.temperature > 0:
        parser.error(f"--temperature must be > 0 (GRPO samples), got {opts.temperature}")
    unknown = set(opts.trainers.split(",")) - {"searchgym", "trl"}
    if unknown:
        parser.error(f"--trainers takes searchgym and/or trl, got {', '.join(sorted(unknown))}")
    if opts.model not in ("scratch", "smollm2"):
        parser.error(f"--model takes scratch or smollm2, got {opts.model!r}")
    try:
        opts.seeds = [opts.seed] if opts.seeds is None else [int(x) for x in opts.seeds.split(",")]
    except ValueError:
        parser.error(f"--seeds takes integers separated by commas (e.g. 0,1,2), got {opts.seeds!r}")
    if any(not 0 <= x < 2**31 for x in [opts.seed, *opts.seeds]) or len(set(opts.seeds)) != len(opts.seeds):
        parser.error(f"--seed/--seeds take distinct integers in [0, 2**31), got {opts.seeds}")
    if opts.sft_run is not None and not (opts.sft_run / "final").is_dir():
        parser.error(f"--sft-run expects an SFT run folder with final/, got {opts.sft_run}")
    q = opts.quick
    opts.steps = opts.steps or (2 if q else 12)
    opts.eval_every = opts.eval_every or (2 if q else 3)
    opts.eval_limit = opts.eval_limit or (4 if q else 32)
    opts.lr = opts.lr or (2e-4 if opts.model == "scratch" else 5e-6)
    return opts


def warm_start(opts: argparse.Namespace, env_options: dict, eval_options: dict) -> tuple[Path, dict]:
    """The SFT checkpoint both trainers start from, and what it cost."""
    if opts.sft_run is not None:
        return opts.sft_run / "final", {"reused": str(opts.sft_run)}
    from searchgym.training.sft import SFTArgs, sft

    q = opts.quick
    scratch = opts.model == "scratch"
    t0 = time.perf_counter()
    rows = sft(SFTArgs(
        env_options=env_options, eval_env_options=eval_options, model=opts.model, scratch_size=opts.scratch_size,
        limit=opts.sft_questions or (16 if q else (None if scratch else 32)),
        epochs=opts.sft_epochs or (1 if q else (6 if scratch else 1)),
        batch_size=16 if scratch else 8, micro_batch_size=8 if scratch else 2, lr=3e-3 if scratch else 5e-5,
        warmup_steps=20 if scratch else 2, eval_every=0, eval_limit=0, max_new_tokens=opts.max_new_tokens,
        out=str(opts.out / "sft"), progress=True,
    ))
    info = {"steps": len(rows), "seconds": time.perf_counter() - t0, "loss_first": rows[0]["loss"], "loss_last": rows[-1]["loss"]}
    print(f"SFT warm start: {info['steps']} steps in {info['seconds']:.0f} s, loss {info['loss_first']:.2f} -> {info['loss_last']:.3f}")
    return opts.out / "sft" / "final", info


def schedule(examples: list, steps: int, per_step: int, seed: int) -> list[list[tuple[str, str]]]:
    """The training questions of each step, as (example id, question): a seeded shuffle of
    the distinct question texts (the first example of a repeated text), reshuffled on
    every pass. Both trainers play exactly these, in this order."""
    distinct: dict[str, str] = {}
    for ex in examples:
        distinct.setdefault(ex.question, ex.id)
    pool = [(i, q) for q, i in distinct.items()]
    if len(pool) < per_step:
        raise SystemExit(f"trainers.py: {len(pool)} distinct training questions, fewer than --questions-per-step {per_step}")
    flat: list[tuple[str, str]] = []
    epoch = 0
    while len(flat) < steps * per_step:
        order = list(pool)
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        flat += order
        epoch += 1
    return [flat[k * per_step : (k + 1) * per_step] for k in range(steps)]


class FixedOrder:
    """The schedule's example ids one after another, for searchgym's ``Trainer.order``
    (``take``; ``state``/``load`` for its checkpoints)."""

    def __init__(self, ids: list[str]):
        self.ids = ids
        self.position = 0

    def take(self, k: int) -> list[str]:
        if self.position + k > len(self.ids):
            raise RuntimeError(f"the schedule has {len(self.ids)} questions; step asked for {k} more after {self.position}")
        out = self.ids[self.position : self.position + k]
        self.position += k
        return out

    def state(self) -> dict[str, int]:
        return {"position": self.position}

    def load(self, state: dict[str, int]) -> None:
        self.position = int(state["position"])


def fingerprints(results) -> list[list]:
    """(episode seed, sampled ids) of each episode of a step, to compare two runs' samples."""
    return [[r.seed, r.trajectory.response_ids if r.trajectory is not None else []] for r in results]


def searchgym_seeds(seed: int, step: int, count: int, n: int) -> tuple[int, list[int]]:
    """The agent's sampling seed and the episodes' seeds of step ``step`` of searchgym's
    trainer (``Trainer.rollout``): what --matched-sampling hands TRL's rollout. Whether they
    still match is checked on the episodes' seeds both runs record."""
    return (seed * 7_919 + step * 104_729) % 2**31, [(seed * 1_000_003 + step * 1009 + i % n) % 2**31 for i in range(count)]


def identical_samples(a: list[list[list]], b: list[list[list]]) -> list[float]:
    """By step, the share of episodes (in order) with the same seed and the same sampled ids."""
    return [sum(x == y for x, y in zip(sa, sb)) / max(len(sa), 1) for sa, sb in zip(a, b)]


def check_played(name: str, played: list[list[str]], plan: list[list[tuple[str, str]]]) -> None:
    """Fail unless ``name`` played the schedule's questions, step by step."""
    expected = [[i for i, _ in step] for step in plan]
    if played != expected:
        first = next((k for k, (a, b) in enumerate(zip(played, expected)) if a != b), min(len(played), len(expected)))
        raise RuntimeError(
            f"{name} did not play the scheduled questions: {len(played)} steps played, {len(expected)} scheduled, "
            f"first difference at step {first + 1}"
        )


def run_searchgym(opts: argparse.Namespace, model: Path, env_options: dict, eval_options: dict, plan: list) -> dict:
    """searchgym's Trainer on the schedule; evaluations at step 0 and every eval_every steps."""
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    untimed = [0.0]  # seconds of evaluations and checkpoints, which the TRL run does not have
    played: list[list[str]] = []
    samples: list[list[list]] = []

    def counted(method):
        def timed(self, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                untimed[0] += time.perf_counter() - t0

        return timed

    class TimedTrainer(Trainer):
        evaluate = counted(Trainer.evaluate)
        save = counted(Trainer.save)

        def build(self) -> None:
            super().build()
            self.order = FixedOrder([i for step in plan for i, _ in step])

        def rollout(self, step: int):
            results, stats = super().rollout(step)
            played.append(list(dict.fromkeys(r.example_id for r in results)))
            samples.append(fingerprints(results))
            return results, stats

    args = Args(
        model=str(model), env_options=env_options, eval_env_options=eval_options, algorithm="grpo", n=opts.n,
        questions_per_step=opts.questions_per_step, micro_batch_size=opts.micro_batch_size, lr=opts.lr,
        temperature=opts.temperature, max_new_tokens=opts.max_new_tokens, num_envs=opts.n * opts.questions_per_step,
        total_steps=opts.steps, eval_every=opts.eval_every, eval_limit=opts.eval_limit, save_every=opts.steps,
        out=str(opts.out / "searchgym"), tensorboard=False, resume=False, seed=opts.seed,
    )
    trainer = TimedTrainer(args)
    trainer.build()  # loading the model is outside the timing, as for TRL
    t0 = time.perf_counter()
    rows = trainer.train()
    wall = time.perf_counter() - t0 - untimed[0]
    everything = read_rows(opts.out / "searchgym" / "metrics.csv")
    evals = [(int(r["step"]), r["eval_reward"], r["eval_em"]) for r in everything if r.get("eval_reward") not in ("", None)]
    tokens = sum(r["generated_tokens"] * r["episodes"] for r in rows)
    check_played("searchgym", played, plan)
    return {
        "evals": evals, "train_reward": [r["reward"] for r in rows], "train_seconds": wall, "generated_tokens": tokens,
        "step_seconds": [r["time_rollout"] + r["time_update"] for r in rows], "questions": played, "samples": samples,
    }


def run_trl(opts: argparse.Namespace, model: Path, env_options: dict, eval_options: dict, plan: list) -> dict:
    """TRL's GRPOTrainer through EnvRollout on the schedule, with the same settings and evaluations."""
    import os

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from datasets import Dataset

    from searchgym.integrations.trl import EnvRollout, env_reward
    from searchgym.training.trainer import evaluate_policy

    played: list[list[str]] = []
    samples: list[list[list]] = []

    class RecordedRollout(EnvRollout):
        def __call__(self, prompts, trainer):
            training = bool(trainer.model.training)
            out = super().__call__(prompts, trainer)
            if training:
                played.append(list(dict.fromkeys(r.example_id for r in self.last_results)))
                samples.append(fingerprints(self.last_results))
            return out

        def seeds(self, step: int, process: int, count: int, *, training: bool) -> tuple[int, list[int]]:
            if not (opts.matched_sampling and training):
                return super().seeds(step, process, count, training=training)
            return searchgym_seeds(opts.seed, step, count, opts.n)

    rollout = RecordedRollout(
        "searchgym/SearchR1-v0", env_options=env_options, eval_env_options=eval_options,
        num_envs=opts.n * opts.questions_per_step, max_new_tokens=opts.max_new_tokens, seed=opts.seed,
    )
    batch = opts.n * opts.questions_per_step
    accumulate = batch // opts.micro_batch_size  # micro-batches of one generation batch, one optimizer step
    config = GRPOConfig(
        output_dir=str(opts.out / "trl"), num_generations=opts.n, per_device_train_batch_size=opts.micro_batch_size,
        gradient_accumulation_steps=accumulate, steps_per_generation=accumulate, num_iterations=1, max_steps=opts.steps,
        learning_rate=opts.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        epsilon=0.2, beta=0.0, loss_type="dapo", scale_rewards="group", temperature=opts.temperature, top_p=1.0,
        shuffle_dataset=False,  # the rows are already in schedule order
        max_completion_length=4 * opts.max_new_tokens, report_to=[], logging_steps=1, save_strategy="no",
        use_cpu=True, bf16=False, seed=opts.seed, disable_tqdm=False,
    )
    evals: list = []
    eval_seconds = [0.0]

    class Evaluate(TrainerCallback):
        def evaluate(self, step: int, trainer_model) -> None:
            t0 = time.perf_counter()
            lm = rollout.policy_lm(trainer_model, tokenizer)
            training = trainer_model.training
            trainer_model.eval()
            try:
                row = evaluate_policy(
                    lm, "searchgym/SearchR1-v0", env_options={**env_options, **eval_options}, split="dev",
                    limit=opts.eval_limit, num_envs=batch, max_new_tokens=opts.max_new_tokens,
                    out=opts.out / "trl" / "eval" / f"step-{step:06d}", seed=opts.seed, label=f"step {step}",
                )
            finally:
                trainer_model.train(training)
            evals.append((step, row["eval_reward"], row["eval_em"]))
            eval_seconds[0] += time.perf_counter() - t0

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            self.evaluate(0, model)

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % opts.eval_every == 0 or state.global_step == opts.steps:
                self.evaluate(state.global_step, model)

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    policy = AutoModelForCausalLM.from_pretrained(str(model), dtype="float32")
    rollout.dataset("train")  # registers every train question with the rollout
    ordered = Dataset.from_dict({"prompt": [q for step in plan for _, q in step], "example_id": [i for step in plan for i, _ in step]})
    trainer = GRPOTrainer(
        model=policy, processing_class=tokenizer, reward_funcs=env_reward, rollout_func=rollout,
        train_dataset=ordered, args=config, callbacks=[Evaluate()],
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0 - eval_seconds[0]
    logs = [r for r in trainer.state.log_history if "env/generated_tokens" in r]
    check_played("trl", played, plan)
    return {
        "evals": evals, "train_reward": [r["reward"] for r in logs], "train_seconds": wall,
        "generated_tokens": sum(r["env/generated_tokens"] * batch for r in logs),
        "step_seconds": [r["step_time"] for r in logs if "step_time" in r], "questions": played, "samples": samples,
    }


def table(runs: dict[str, dict]) -> str:
    steps = sorted({s for r in runs.values() for s, _, _ in r["evals"]})
    head = "| trainer | " + " | ".join(f"dev reward @{s}" for s in steps) + " | best dev EM | train s | s/step | generated tok/s |"
    lines = [head, "|---|" + "---:|" * (len(steps) + 4)]
    for name, r in runs.items():
        by = {s: v for s, v, _ in r["evals"]}
        n = len(r["step_seconds"]) or 1
        lines.append(
            f"| {name} | " + " | ".join(f"{by[s]:.3f}" if s in by else "-" for s in steps)
            + f" | {max(em for _, _, em in r['evals']):.3f} | {r['train_seconds']:.0f} | {r['train_seconds'] / n:.1f}"
            + f" | {r['generated_tokens'] / max(r['train_seconds'], 1e-9):.1f} |"
        )
    return "\n".join(lines)


def mean_run(runs: list[dict]) -> dict:
    """The seed mean of several runs of one trainer: dev reward and EM at the steps every run
    evaluated, sampled train reward by step, training seconds and generated tokens."""
    steps = sorted(set.intersection(*({s for s, _, _ in r["evals"]} for r in runs)))
    k = len(runs)
    evals = [
        (s, sum(v for r in runs for t, v, _ in r["evals"] if t == s) / k, sum(em for r in runs for t, _, em in r["evals"] if t == s) / k)
        for s in steps
    ]
    length = min(len(r["train_reward"]) for r in runs)
    return {
        "evals": evals, "train_reward": [sum(r["train_reward"][i] for r in runs) / k for i in range(length)],
        "train_seconds": sum(r["train_seconds"] for r in runs) / k, "generated_tokens": sum(r["generated_tokens"] for r in runs) / k,
        "step_seconds": [sum(r["train_seconds"] for r in runs) / k / length] * length,
    }


def summarize(by_seed: dict[int, dict[str, dict]], names: list[str]) -> tuple[dict[str, dict], list[str]]:
    """The rows of the table and chart (one per trainer for one seed; per trainer and seed,
    then each trainer's seed mean, for several) and the verdict lines."""
    seeds = list(by_seed)
    if len(seeds) == 1:
        runs = by_seed[seeds[0]]
        return runs, verdict(runs)
    runs = {f"{name} seed {seed}": by_seed[seed][name] for name in names for seed in seeds}
    runs.update({f"{name} mean": mean_run([by_seed[seed][name] for seed in seeds]) for name in names})
    lines = [f"seed {seed}: {line}" for seed in seeds for line in verdict(by_seed[seed])]
    lines += [f"mean of {len(seeds)} seeds: {line}" for line in verdict({n: runs[f"{n} mean"] for n in names})]
    return runs, lines


def verdict(runs: dict[str, dict]) -> list[str]:
    """The target: searchgym reaches TRL's best dev reward at least as fast, per step and
    per second of training (evaluation steps only; the first one at or above it)."""
    if set(runs) != {"searchgym", "trl"}:
        return []
    best = max(v for _, v, _ in runs["trl"]["evals"])

    def reached(r: dict) -> tuple[int, float] | None:
        step = next((s for s, v, _ in r["evals"] if v >= best), None)
        return None if step is None else (step, step * r["train_seconds"] / max(len(r["step_seconds"]), 1))

    ours, theirs = reached(runs["searchgym"]), reached(runs["trl"])
    if ours is None:
        return [f"searchgym never reached TRL's best dev reward {best:.3f}: FAIL"]
    lines = [f"TRL's best dev reward {best:.3f}: searchgym at step {ours[0]} ({ours[1]:.0f} s), TRL at step {theirs[0]} ({theirs[1]:.0f} s)"]
    if theirs[1] > 0:
        ratio = ours[1] / theirs[1]
        lines.append(f"seconds to reach it, searchgym / TRL: {ratio:.2f}x (target <= 1): {'PASS' if ratio <= 1 and ours[0] <= theirs[0] else 'FAIL'}")
    else:
        lines.append(f"both start at it (step 0): {'PASS' if ours[0] == 0 else 'FAIL'}")
    return lines


#: The sampled train reward the "sooner per second" claim is measured at: a trailing mean
#: over REACH_WINDOW steps reaching REACH_LEVEL (0.1 is the format credit of this env).
REACH_LEVEL, REACH_WINDOW = 0.08, 5


def reach(run: dict, level: float = REACH_LEVEL, window: int = REACH_WINDOW) -> tuple[int, float] | None:
    """(first step whose trailing ``window``-step mean of the sampled train reward is at
    least ``level``, training seconds to that step), or None if the run never gets there."""
    rewards = run["train_reward"]
    per_step = run["train_seconds"] / max(len(run["step_seconds"]), 1)
    for step in range(window, len(rewards) + 1):
        if sum(rewards[step - window:step]) / window >= level:
            return step, step * per_step
    return None


def plot_reach(ax, pairs: list[tuple[str, float | None, float | None]]) -> None:
    """Bars of the training seconds each trainer took to reach the level, per run
    (``(label, searchgym seconds, TRL seconds)``), each pair annotated with TRL / searchgym."""
    width = 0.38
    for i, (label, ours, theirs) in enumerate(pairs):
        ax.bar(i - width / 2, ours or 0, width, color="C0", label="searchgym" if i == 0 else None)
        ax.bar(i + width / 2, theirs or 0, width, color="C1", label="TRL" if i == 0 else None)
        top = max(ours or 0, theirs or 0)
        if ours and theirs:
            text = f"{theirs / ours:.1f}x sooner" if theirs >= ours else f"{ours / theirs:.1f}x later"
        else:
            text = "searchgym never" if not ours else "TRL never"
        ax.annotate(text, (i, top), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=9, fontweight="bold")
    ax.set_xticks(range(len(pairs)), [label for label, _, _ in pairs])
    ax.set_ylabel("training seconds (evaluation excluded)")
    ax.set_ylim(0, 1.2 * max([max(a or 0, b or 0) for _, a, b in pairs] + [1]))
    ax.set_title(f"time to a {REACH_WINDOW}-step mean train reward of {REACH_LEVEL}", fontsize=10)
    ax.legend(fontsize=8)


def plot(runs: dict[str, dict], out: Path) -> None:
    """Sampled train reward by step and by training second, the seconds each trainer took
    to reach REACH_LEVEL (per seed, with the ratio written on it) and, when it is not zero
    in every evaluation of every run, the greedy dev reward by step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dev_zero = not any(v for r in runs.values() for _, v, _ in r["evals"])
    fig, axes = plt.subplots(1, 3 if dev_zero else 4, figsize=(13 if dev_zero else 17, 3.8))
    by_step, by_time, reached = axes[:3]
    colours = {}
    for name, r in runs.items():
        trainer = name.split()[0]  # "searchgym", "searchgym seed 1", "searchgym mean": one colour per trainer
        colours.setdefault(trainer, f"C{len(colours)}")
        seed_line = " seed " in name  # one seed among several: thin; its mean and a lone run: bold
        style = {"color": colours[trainer], "alpha": 0.35 if seed_line else 1.0, "linewidth": 1.0 if seed_line else 2.0}
        label = None if seed_line else name
        per_step = r["train_seconds"] / max(len(r["step_seconds"]), 1)
        steps = range(1, len(r["train_reward"]) + 1)
        by_step.plot(steps, r["train_reward"], label=label, **style)
        by_time.plot([s * per_step for s in steps], r["train_reward"], label=label, **style)
        if not dev_zero:
            axes[3].plot([s for s, _, _ in r["evals"]], [v for _, v, _ in r["evals"]], marker="o", markersize=3,
                         label=label, **style)
    by_step.set_xlabel("GRPO step")
    by_time.set_xlabel("training wall time, s (evaluation excluded)")
    for ax in (by_step, by_time):
        ax.set_ylabel("train batch reward (sampled)")
        ax.axhline(REACH_LEVEL, color="gray", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    # One pair of bars per seed ("searchgym seed 1" / "trl seed 1"), or one for a lone run.
    seeds = sorted({name.split(" seed ")[1] for name in runs if " seed " in name})
    keys = [(f"seed {s}", f"searchgym seed {s}", f"trl seed {s}") for s in seeds] or [("run", "searchgym", "trl")]
    pairs = [(label, *((reach(runs[k]) or (None, None))[1] if k in runs else None for k in (a, b))) for label, a, b in keys]
    plot_reach(reached, pairs)
    if not dev_zero:
        axes[3].set_xlabel("GRPO step")
        axes[3].set_ylabel("dev reward (greedy)")
        axes[3].grid(alpha=0.3)
    note = "; greedy dev reward 0 at every evaluation of every run (not drawn)" if dev_zero else ""
    fig.suptitle(f"GRPO on synthwiki Search-R1 from the same SFT warm start{note}", fontsize=11)
    fig.tight_layout()
    fig.savefig(out / "trainers.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    import shutil

    from searchgym.corpora.datasets import write_qa

    if opts.sft_run is None or opts.out.resolve() not in opts.sft_run.resolve().parents:
        shutil.rmtree(opts.out, ignore_errors=True)
    opts.out.mkdir(parents=True, exist_ok=True)
    world = QUICK_WORLD if opts.quick else WORLD
    train, dev = one_hop("train", 64 if opts.quick else None, world), one_hop("dev", opts.eval_limit, world)
    train_file, dev_file = write_qa(train, opts.out / "train-1hop.jsonl"), write_qa(dev, opts.out / "dev-1hop.jsonl")
    env_options = {"max_turns": 3, "dataset": str(train_file), "corpus_options": world, **REWARD}
    eval_options = {"dataset": str(dev_file)}
    print(f"synthwiki single-hop questions: {len(train)} train, {len(dev)} dev")
    model, sft_info = warm_start(opts, env_options, eval_options)

    names = opts.trainers.split(",")
    by_seed: dict[int, dict[str, dict]] = {}
    for seed in opts.seeds:
        one = argparse.Namespace(**{**vars(opts), "seed": seed, "out": opts.out / f"seed-{seed}" if len(opts.seeds) > 1 else opts.out})
        one.out.mkdir(parents=True, exist_ok=True)
        plan = schedule(train, one.steps, one.questions_per_step, seed)
        by_seed[seed] = {}
        for name in names:
            run = run_searchgym if name == "searchgym" else run_trl
            by_seed[seed][name] = run(one, model, env_options, eval_options, plan)
            evals = ", ".join(f"{s}: {v:.3f}" for s, v, _ in by_seed[seed][name]["evals"])
            print(f"seed {seed}, {name}: {one.steps} steps, {by_seed[seed][name]['train_seconds']:.0f} s of training; dev reward by step {evals}")
    if opts.matched_sampling and set(names) == {"searchgym", "trl"}:
        for seed, runs_ in by_seed.items():
            seeds_a = [[x[0] for x in step] for step in runs_["searchgym"]["samples"]]
            seeds_b = [[x[0] for x in step] for step in runs_["trl"]["samples"]]
            if seeds_a != seeds_b:
                raise RuntimeError("--matched-sampling: TRL's episodes were not seeded as searchgym's trainer seeds them "
                                   "(searchgym_seeds no longer follows Trainer.rollout)")
            same = identical_samples(runs_["searchgym"]["samples"], runs_["trl"]["samples"])
            runs_["trl"]["identical_samples"] = same
            print(f"seed {seed}: share of identical samples by step: " + " ".join(f"{x:.2f}" for x in same))
    runs, lines = summarize(by_seed, names)
    print(table(runs))
    for line in lines:
        print(line)
    if opts.quick:
        print("--quick: the lines above are printed, not judged: two GRPO steps of a tiny model barely trained by SFT measure "
              "that both trainers run on the same schedule, not which reaches a dev reward sooner (run without --quick for that)")
    plot(runs, opts.out)
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(opts).items()}
    (opts.out / "trainers.json").write_text(json.dumps({"settings": settings, "sft": sft_info, "runs": runs, "verdict": lines}, indent=1))
    print(f"wrote {opts.out}/trainers.png and trainers.json")


if __name__ == "__main__":
    main()
