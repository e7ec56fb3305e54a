"""The RL trainer, read top to bottom: rollout -> batch -> advantages -> update.

One step: take ``questions_per_step`` questions of the train split (a seeded order that
survives resumes) and play each ``n`` times with the policy (``run_episodes`` keeps every
trajectory's token record); pad the trajectories into one batch; recompute the logprobs
of the sampled ids with the training model (compared with the engine's: the logprob
check); compute advantages (GAE for PPO, group-normalized for GRPO, REINFORCE++), from the
episode's reward on its last token or, with ``credit="turn"``, from each turn's reward on
that turn's last token (:func:`turn_advantages`); update for ``ppo_epochs`` passes in
``mini_batches`` optimizer steps, accumulating gradients over micro-batches. Metrics go to
``metrics.csv`` (and TensorBoard), curves to ``curves.png``; checkpoints are atomic (:mod:`searchgym.training.checkpoint`). Trainer hooks
(``Args.hooks``, :mod:`searchgym.training.hooks`) run before each rollout, on each
question's group of episodes, and after each step.

The rollout engine is the training model itself (``transformers``) or a vLLM engine whose
weights are replaced by the policy's after every update (``vllm``; ``vllm-async``: vLLM's
async engine, on which the rollout's episodes do not wait for each other).

Shapes: ``B`` episodes, ``L`` context tokens (prompt and response ids, right-padded).
Per-token tensors are ``[B, L-1]`` over *targets* (:mod:`searchgym.training.batch`):
``loss_mask`` is 1 where the target is an id the policy sampled. A micro-batch is
``[b, w]``.

This module needs the ``lm`` extra (torch, transformers); importing it without them
raises :class:`~searchgym.error.MissingDependencyError` naming the extra.
"""

from __future__ import annotations

import json
import math
import random
import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.agents import EpisodeResult, Task, run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.agents.transcript import token_record
from searchgym.agents.trajectory import Trajectory
from searchgym.bench import BenchConfig, append_line, run_bench
from searchgym.envs import search_env
from searchgym.envs.registration import full_env_id
from searchgym.error import ConfigError, CtrlC, Interrupted, TrainingError, interrupt_in, reports_missing_extras, require
from searchgym.lm.chat_templates import install_chat_template
from searchgym.lm.hf import TransformersLM, load_model
from searchgym.lm.registry import load_lm
from searchgym.lm.vllm import VLLMLM, model_folder
from searchgym.progress import Progress
from searchgym.training.advantages import (
    gae, group_advantages, last_token_rewards, process_group_advantages, reinforce_pp_advantages, reinforce_pp_turn_advantages,
    turn_end_columns, turn_steps, turn_token_rewards,
)
from searchgym.training.args import Args, check_args, disabled_options
from searchgym.training.batch import FixedPass, Reference, chunks, collate, fixed_pass, forward_logprobs
from searchgym.training.segments import carried_steps, episode_totals, records_of, row_values, segment_rows, segment_steps
from searchgym.training.checkpoint import (
    args_record, checkpoint_step, complete_checkpoints, export_policy, load_checkpoint, merged_weights, prepare_run_folder, rng_state, save_checkpoint, set_rng_state,
)
from searchgym.training.critic import build_critic, load_trainable_state, trainable_state
from searchgym.training.data import DataOrder, check_splits, env_kwargs, make_train_envs, reward_at, stage_at, tell_step, timed_retriever
from searchgym.training.hooks import apply_group_rewards, call_hook, hook_columns, keep_groups, load_hooks, more_rollouts, step_metrics
from searchgym.training.losses import aggregate, kl_penalty, policy_loss, value_loss
from searchgym.training.metrics import MetricsLog, plot_curves
from searchgym.training.stability import COLUMNS as STABILITY_COLUMNS
from searchgym.training.stability import StabilityMonitor, rollout_diagnostics, shape_rewards

torch = require("torch", extra="lm", feature="Training")
require("transformers", extra="lm", feature="Training")

#: Columns of metrics.csv, in order.
COLUMNS = (
    "step", "stage_reward", "episodes", "dropped", "reward", "reward_std", "em", "f1", "cover_em", "searches",
    "turns", "response_tokens", "generated_tokens", "truncated", "loss", "policy_loss", "value_loss", "kl",
    "entropy", "clip_fraction", "grad_norm", "lr", "value_grad_norm", "value_lr", "logprob_diff_max", "logprob_diff_mean",
    "time_rollout", "time_retrieval", "time_update", "time_sync", "update_tokens_per_s", "peak_memory_mb",
    "eval_reward", "eval_em", "eval_f1", "eval_cover_em", "eval_searches", "eval_response_tokens",
    # diagnostics of the update (Trainer.update) and of the rollout (searchgym.training.stability)
    "adv_std", "trained_token_share", *STABILITY_COLUMNS,
)

#: Rollouts of each step kept with their token records in ``out/rollouts.jsonl`` (a look, not a log:
#: a step plays many).
ROLLOUTS_KEPT = 2

#: The scalars one update averages over its optimizer steps.
LOSS_PARTS = ("loss", "policy_loss", "value_loss", "kl", "entropy", "clip_fraction")


# ======================================================================================
# The policy, its evaluation, the loop's helpers
# ======================================================================================
def load_policy(name: str, *, device: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) of a policy name, in float32 and train mode."""
    model, tokenizer = load_model(name, dtype=torch.float32)
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    return model.to(device), tokenizer


def evaluate_policy(
    lm: Any, env_id: str, *, env_options: dict[str, Any], split: str, limit: int | None, num_envs: int,
    max_new_tokens: int, out: Path | None, seed: int = 0, label: str | None = None, temperature: float = 0.0,
    agent_options: dict[str, Any] | None = None, imports: Sequence[str] = (), wrappers: Sequence[Any] = (),
    retriever_per_env: bool = False,
) -> dict[str, float]:
    """Play of ``lm`` on ``split`` through the benchmark harness (files in ``out``), greedy
    unless ``temperature`` > 0 (sampled with ``seed``); ``agent_options`` go to the LM agent.
    Returns the summary's reward, EM, F1, cover-EM, searches and generated tokens as ``eval_*``."""
    config = BenchConfig(
        runs=[(full_env_id(env_id), "lm")], split=split, limit=limit, seeds=(seed,), model=lm,
        env_options={"*": dict(env_options)}, num_envs=num_envs, temperature=temperature, max_new_tokens=max_new_tokens,
        labels=None if label is None else [label], agent_options={"lm": dict(agent_options)} if agent_options else {},
        imports=list(imports), wrappers=list(wrappers), retriever_per_env=retriever_per_env,
    )
    row = run_bench(config, out, progress=False, resume=False).rows[0]
    # No reward when every eval episode failed (none was scored): NaN, never a 0 that looks like play.
    reward = row["reward"] if row["reward"] is not None else float("nan")
    return {
        "eval_reward": reward, "eval_em": row["em"], "eval_f1": row["f1"], "eval_cover_em": row["cover_em"],
        "eval_searches": row["searches"], "eval_response_tokens": row["generated_tokens"],
    }


def context_limits(args: Any) -> dict[str, int]:
    """The LM agent's token limits that ``args`` sets (``max_observation_tokens``, ``max_context_tokens``)."""
    names = ("max_observation_tokens", "max_context_tokens")
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def warmup_steps(steps: int, ratio: float | None, run_steps: int) -> int:
    """Warm-up length in optimizer steps: ``ratio`` of the run's ``run_steps`` when given, else ``steps``."""
    return steps if ratio is None else int(ratio * run_steps)


def peak_memory_mb() -> float:
    """Peak GPU memory allocated (on CUDA), else the process's peak resident memory."""
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Warmup:
    """Linear warmup over ``steps`` optimizer steps, then constant (picklable for checkpoints;
    the scheduler's state carries ``steps``, so a resumed run keeps its warm-up length)."""

    def __init__(self, steps: int):
        self.steps = steps

    def __call__(self, i: int) -> float:
        return min(1.0, (i + 1) / self.steps) if self.steps else 1.0


# ======================================================================================
# 1. Rollout: play the step's questions, keep what can be trained on
# ======================================================================================
@dataclass(frozen=True)
class Sample:
    """One episode the update trains on."""

    trajectory: Trajectory  #: prompt ids, then generated and environment segments
    reward: float
    group: int  #: the question's index in the step: the ``n`` answers to one question share it
    turn_rewards: tuple[float, ...] = ()  #: the env's reward of each step (``credit="turn"``); () puts ``reward`` on the last turn


def rollout_stats(results: Sequence[EpisodeResult]) -> dict[str, float]:
    """Means over the episodes of a rollout (``reward_std``: their sample std)."""
    n = len(results)
    rewards = [r.reward for r in results]
    return {
        "episodes": n,
        "reward": sum(rewards) / n,
        "reward_std": statistics.stdev(rewards) if n > 1 else 0.0,
        "em": sum(r.em for r in results) / n,
        "f1": sum(r.f1 for r in results) / n,
        "cover_em": sum(r.cover_em for r in results) / n,
        "searches": sum(r.num_searches for r in results) / n,
        "turns": sum(r.num_turns for r in results) / n,
        "generated_tokens": sum(r.generated_tokens for r in results) / n,
        "truncated": sum(r.outcome == "truncated" for r in results) / n,
    }


def training_samples(results: Sequence[EpisodeResult], *, n: int, grouped: bool) -> list[Sample]:
    """The episodes of a rollout (``n`` consecutive ones per question) that have a generated
    token to train on; ``grouped`` (a group baseline) also drops questions left with one."""
    samples = [
        Sample(r.trajectory, r.reward, i // n, tuple(getattr(r, "turn_rewards", None) or ()))
        for i, r in enumerate(results)
        if r.trajectory is not None and any(t.num_generated > 0 for t in records_of(r.trajectory)) and r.outcome not in ("backend_error", "error")
    ]
    if grouped:
        sizes = Counter(s.group for s in samples)
        samples = [s for s in samples if sizes[s.group] >= 2]
    return samples


def failed_note(results: Sequence[EpisodeResult]) -> str:
    """`` The first error: ...`` of the first failed episode of ``results`` (its exception and
    file:line, as ``searchgym bench`` prints it), or "" when none failed with a message."""
    first = next((r for r in results if r.outcome in ("backend_error", "error") and getattr(r, "error", None)), None)
    if first is None:
        return ""
    failed = sum(r.outcome in ("backend_error", "error") for r in results)
    return f" {failed} of {len(results)} episodes failed; the first ({first.example_id!r}, {first.outcome}): {first.error}"


# ======================================================================================
# 2. Batch: searchgym.training.batch pads the samples into a TokenBatch (collate) and
#    computes, without gradients, what the update reads but does not train (fixed_pass:
#    old logprobs, reference logprobs, values)
# ======================================================================================


# ======================================================================================
# 3. Advantages
# ======================================================================================
def zero_advantages_note(args: Args, step: int, scores: Sequence[float]) -> str:
    """What the trainer prints (once a run) at the first step whose advantages are all 0:
    why the step's policy loss and grad_norm are 0 and its update changes nothing."""
    if len(set(scores)) == 1:
        why = f"all {len(scores)} episodes of the batch earned the same reward ({scores[0]:.3f})"
    else:
        why = f"the {args.n} answers to each question earned the same reward"
    hint = (
        " A policy that never answers right earns 0 everywhere (a tiny or random model does): warm it up first "
        "(searchgym sft on the oracle's play) or give it easier questions."
        if not any(scores) else ""
    )
    return (
        f"step {step}: every advantage is 0 ({why}, and an advantage is a reward measured against its baseline), so the "
        f"policy loss is 0, grad_norm too without a KL or entropy term, and the batch teaches the policy nothing "
        f"(said once a run).{hint}"
    )


def sample_steps(samples: Sequence[Any], *, max_length: int | None = None) -> list[list[tuple[int, float]]]:
    """Each sample's ``(column, reward)`` turn steps in the collated batch (``credit="turn"``):
    its ``turn_rewards`` at the ends of its generated turns, the rest of its ``reward`` (a group
    hook's change; all of it when it has no turn rewards) on the last (see
    :func:`~searchgym.training.advantages.turn_steps`)."""
    return [
        turn_steps(getattr(s, "turn_rewards", ()) or (), turn_end_columns(s.trajectory, max_length=max_length), reward=float(s.reward))
        for s in samples
    ]


def compute_advantages(
    args: Args, scores: Any, groups: Sequence[int], mask: Any, fixed: FixedPass, *, steps: Sequence[Sequence[tuple[int, float]]] | None = None,
    episodes: Sequence[int] | None = None,
) -> tuple[Any, Any]:
    """``(advantages, returns)`` [B, L-1] of the episodes' ``scores`` [B]; ``returns`` (the
    value targets) only for PPO, else None. With ``args.credit == "turn"``, ``steps`` (each
    row's ``(column, reward)`` turns: :func:`sample_steps`) replace the scores.

    ``episodes``: each row's episode when an episode is several rows (a context policy
    rewrote its conversation: :mod:`searchgym.training.segments`); ``scores`` and ``groups``
    are then per episode [E], ``steps`` per row (its own turns, :func:`~searchgym.training.segments.segment_steps`)."""
    kl = None
    if fixed.ref is not None and args.kl_in_reward:
        kl = kl_penalty(fixed.old, fixed.ref, args.kl_estimator) * mask  # [B, L-1]
    if episodes is not None:
        return segmented_advantages(args, scores, groups, mask, fixed, kl, steps, episodes)
    if args.credit == "turn":
        return turn_advantages(args, steps, groups, mask, fixed, kl)
    if args.algorithm == "grpo":
        return group_advantages(scores, groups).unsqueeze(-1) * mask, None  # [B] -> [B, L-1]
    if args.algorithm == "reinforce++":
        baseline_groups = groups if args.reinforce_baseline == "group" else None
        return reinforce_pp_advantages(scores, mask, kl=kl, kl_coef=args.kl_coef, gamma=args.gamma, groups=baseline_groups), None
    rewards = last_token_rewards(scores, mask)  # [B, L-1]
    return ppo_advantages(args, rewards, mask, fixed, kl)


def ppo_advantages(args: Args, rewards: Any, mask: Any, fixed: FixedPass, kl: Any) -> tuple[Any, Any]:
    """PPO's ``(advantages, returns)`` [B, L-1] of token ``rewards`` [B, L-1]: the KL taken from
    the rewards (when it is in the reward), GAE over the critic's values, the advantages
    normalized over the batch's generated tokens."""
    if kl is not None:
        rewards = rewards - args.kl_coef * kl
    advantages, returns = gae(rewards, fixed.values, mask, gamma=args.gamma, lam=args.lam)  # [B, L-1] each
    flat = advantages[mask.bool()]  # [tokens]
    if flat.numel() > 1:
        advantages = (advantages - flat.mean()) / (flat.std() + 1e-8) * mask
    return advantages, returns


def turn_advantages(args: Args, steps: Any, groups: Sequence[int], mask: Any, fixed: FixedPass, kl: Any) -> tuple[Any, Any]:
    """:func:`compute_advantages` with per-turn credit: each turn's reward on its last token.

    PPO: GAE over the turn rewards (minus the KL in the reward), normalized as with episode
    credit. GRPO: DeepSeekMath's process supervision (arXiv 2402.03300, §4.1.3). REINFORCE++:
    returns-to-go of the turn rewards, whitened (arXiv 2501.03262, §3).
    """
    if steps is None:
        raise ConfigError("compute_advantages with credit='turn' expects steps= (each row's turn rewards: sample_steps(samples)).")
    if args.algorithm == "grpo":
        return process_group_advantages(steps, groups, mask), None
    rewards = turn_token_rewards(steps, mask)  # [B, L-1]
    if args.algorithm == "reinforce++":
        baseline_groups = groups if args.reinforce_baseline == "group" else None
        return reinforce_pp_turn_advantages(rewards, mask, kl=kl, kl_coef=args.kl_coef, gamma=args.gamma, groups=baseline_groups), None
    return ppo_advantages(args, rewards, mask, fixed, kl)


def segmented_advantages(
    args: Args, scores: Any, groups: Sequence[int], mask: Any, fixed: FixedPass, kl: Any, steps: Any, episodes: Sequence[int],
) -> tuple[Any, Any]:
    """:func:`compute_advantages` of episodes of several rows: each computed once per episode
    and given to all of its rows (see :mod:`searchgym.training.segments`)."""
    if args.credit == "turn":
        if steps is None:
            raise ConfigError("compute_advantages with credit='turn' expects steps= (each row's turn rewards: segment_steps(samples, episodes)).")
        if args.algorithm == "grpo":  # the episode's own step rewards normalized by its group's, then carried
            normalized = [[] for _ in steps]
            for g in dict.fromkeys(groups):
                rows = [r for r, e in enumerate(episodes) if groups[e] == g]
                if len({episodes[r] for r in rows}) < 2:
                    raise ConfigError(f"GRPO needs at least 2 samples per question, got 1 for group {g!r}; set n >= 2.")
                values = torch.tensor([v for r in rows for _, v in steps[r]], dtype=torch.float32)  # [steps of the group]
                mean, std = values.mean(), values.std()
                for r in rows:
                    normalized[r] = [(c, float((v - mean) / (std + 1e-6))) for c, v in steps[r]]
            placed = turn_token_rewards(carried_steps(normalized, episodes), mask)  # [B, L-1]
            return placed.flip(1).cumsum(1).flip(1) * mask.float(), None  # [B, L-1] the sum of the steps at or after each token
        rewards = turn_token_rewards(carried_steps(steps, episodes), mask)  # [B, L-1]
        if args.algorithm == "reinforce++":
            if args.reinforce_baseline == "group":
                totals = episode_totals(steps, episodes)
                per_episode = torch.tensor([totals.get(e, 0.0) for e in range(len(groups))])  # [E]
                mean = per_episode - group_advantages(per_episode, groups, normalize_std=False)  # [E] the group's mean
                rewards = rewards - last_token_rewards(row_values(mean, episodes), mask)
            return reinforce_pp_turn_advantages(rewards, mask, kl=kl, kl_coef=args.kl_coef, gamma=args.gamma, groups=None), None
        return ppo_advantages(args, rewards, mask, fixed, kl)
    if args.algorithm == "grpo":
        return row_values(group_advantages(scores, groups), episodes).unsqueeze(-1) * mask, None  # [E] -> [B] -> [B, L-1]
    if args.algorithm == "reinforce++":
        baselined = group_advantages(scores, groups, normalize_std=False) if args.reinforce_baseline == "group" else scores  # [E]
        return reinforce_pp_advantages(row_values(baselined, episodes), mask, kl=kl, kl_coef=args.kl_coef, gamma=args.gamma), None
    return ppo_advantages(args, last_token_rewards(row_values(scores, episodes), mask), mask, fixed, kl)


# ======================================================================================
# 4. Update
# ======================================================================================
def ppo_loss(
    args: Args, logprobs: Any, entropy: Any, old_logprobs: Any, advantages: Any, mask: Any, *,
    ref_logprobs: Any = None, values: Any = None, old_values: Any = None, returns: Any = None,
) -> dict[str, Any]:
    """The loss of one micro-batch and its parts (scalars; every input is [b, w]): the
    clipped policy loss, minus the entropy bonus, plus the KL term (unless the KL is in the
    reward), plus the value loss (when there are ``values``)."""
    mode = args.loss_aggregation
    pl, clip_fraction = policy_loss(logprobs, old_logprobs, advantages, mask, clip_low=args.clip, clip_high=args.clip_high, mode=mode)
    loss = pl
    entropy = aggregate(entropy, mask, mode)
    if args.entropy_coef:
        loss = loss - args.entropy_coef * entropy
    kl = torch.zeros(())
    if ref_logprobs is not None:
        kl = aggregate(kl_penalty(logprobs, ref_logprobs, args.kl_estimator), mask, mode)
        if not args.kl_in_reward:
            loss = loss + args.kl_coef * kl
    vl = torch.zeros(())
    if values is not None:
        vl = value_loss(values, old_values, returns, mask, clip=args.value_clip, mode=mode)
        loss = loss + args.value_coef * vl
    return {"loss": loss, "policy_loss": pl, "value_loss": vl, "kl": kl, "entropy": entropy, "clip_fraction": clip_fraction}


# ======================================================================================
# The trainer: builds the pieces, then loops rollout -> update -> log -> save
# ======================================================================================
class Trainer:
    """Runs :class:`Args` (see the module docstring). ``Trainer(args).train()`` returns the
    metric rows of the steps it played. It first prints a warning for each option another
    option turns off (:func:`~searchgym.training.args.disabled_options`; ``warn_disabled=False``
    leaves that to the caller, as ``searchgym train`` does for the flags it was given)."""

    @reports_missing_extras("searchgym.training.Trainer")
    def __init__(self, args: Args, *, model: Any = None, tokenizer: Any = None, warn_disabled: bool = True):
        check_args(args)
        for note in disabled_options(args) if warn_disabled else ():
            print(f"warning: {note}", file=sys.stderr, flush=True)
        self.args = args
        self.out = Path(args.out)
        self._given = (model, tokenizer)
        self.step = 0
        self._built = False
        self._progress: Progress | None = None
        self._said_zero_advantages = False
        self._said_failures = False
        #: Flags lengths growing without end and format drift across steps; warns once per kind.
        self.stability = StabilityMonitor()
        #: The run's trainer hooks (:mod:`searchgym.training.hooks`), built before any model loads.
        self.hooks = load_hooks(args.hooks)
        #: The hooks' own metrics.csv columns (checked here, before any model loads).
        self.hook_columns = hook_columns(self.hooks, taken=COLUMNS)
        #: Every episode the last rollout played (its generation batches; ``rollout`` returns those kept).
        self.played: list[EpisodeResult] = []
        #: The groups the hooks' keep_group dropped in the last rollout, by hook name.
        self.dropped_by: dict[str, int] = {}
        #: The generation batches the last rollout played.
        self.generation_batches = 0

    # ------------------------------------------------------------------ setup
    def build(self) -> None:
        """Load the model, the envs and the optimizer; restore the newest checkpoint."""
        args = self.args
        check_splits(args)
        checkpoint = prepare_run_folder(self.out, args)
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)
        random.seed(args.seed)
        model, tokenizer = self._given
        if model is None:
            model, tokenizer = load_policy(args.model, device=args.device)
        elif tokenizer is None:
            raise ConfigError("Trainer got a model without its tokenizer; pass tokenizer=... too.")
        # A template with tools, saved with every checkpoint; markers missing from the vocabulary grow it.
        self._grown = bool(args.chat_template) and install_chat_template(tokenizer, args.chat_template, model) > 0
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        model.float()
        # PPO's critic, built from the policy before any adapter is added (see searchgym.training.critic).
        self.critic = None
        if args.algorithm == "ppo":
            self.critic = build_critic(
                args.critic, model, seed=args.seed, lora_rank=args.lora_rank, lora_alpha=args.lora_alpha, lora_targets=args.lora_targets,
            )
        self.peft_model = None
        if args.lora_rank:
            peft = require("peft", extra="train", feature="LoRA training")  # only LoRA runs need the train extra
            config = peft.LoraConfig(
                r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules=list(args.lora_targets), lora_dropout=0.0, bias="none"
            )
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(args.seed)
                self.peft_model = peft.get_peft_model(model, config)
            model = self.peft_model.get_base_model()
        self.model = model
        self.reference = Reference(model, self.peft_model) if args.kl_coef > 0 else None
        # Optimizers: the policy's (with a shared value head as a second parameter group),
        # and a separate critic's own, with its own learning rate, warm-up and clipping.
        run_steps = args.total_steps * args.ppo_epochs * args.mini_batches
        warmup = warmup_steps(args.warmup_steps, args.warmup_ratio, run_steps)
        value_warmup = warmup_steps(args.value_warmup_steps, args.value_warmup_ratio, run_steps)
        groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": args.lr}]
        lambdas = [Warmup(warmup)]
        self.critic_optimizer = self.critic_scheduler = None
        critic_params = [] if self.critic is None else [p for p in self.critic.parameters() if p.requires_grad]
        if self.critic is not None and self.critic.needs_policy_hidden:
            groups.append({"params": critic_params, "lr": args.value_lr})
            lambdas.append(Warmup(value_warmup))
        elif self.critic is not None:
            self.critic_optimizer = torch.optim.AdamW(critic_params, lr=args.value_lr, weight_decay=args.weight_decay)
            self.critic_scheduler = torch.optim.lr_scheduler.LambdaLR(self.critic_optimizer, Warmup(value_warmup))
        self.optimizer = torch.optim.AdamW(groups, weight_decay=args.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambdas)
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

        self.frozen = None
        if args.frozen_model is not None and args.frozen_model != "gold-span":
            self.frozen = load_lm(args.frozen_model, backend=args.frozen_backend, **args.frozen_options)
        self._stage = None
        self.envs: list[Any] = []
        self.retrieval = timed_retriever(args.env_id, args.env_options)
        self._train_envs(0)
        self.order = self._data_order()
        self.rollout_lm = self._make_engine()

        self.checkpoint = None
        if checkpoint is not None:
            state = load_checkpoint(checkpoint)
            self._train_envs(int(state["step"]))  # the questions of the stage it stopped in, before its data order loads
            self.load_state(state)
            set_rng_state(state["rng"])
            self.step = int(state["step"])
            self.checkpoint = checkpoint
            self._sync_engine()
            print(f"resuming: step {self.step} of {args.total_steps} done, from {checkpoint}", file=sys.stderr, flush=True)
        self.metrics = MetricsLog(
            self.out / "metrics.csv", (*COLUMNS, *self.hook_columns), resume_step=self.step if checkpoint is not None else None,
            tensorboard_dir=self.out / "tensorboard" if args.tensorboard else None,
        )
        self.stability.seed(self.metrics.rows)  # a resumed run's past steps
        self._built = True

    def _make_engine(self) -> Any:
        if self.args.engine == "transformers":
            lm = TransformersLM(self.model, self.tokenizer, device=self.device)  # keeps the model's modules and mode
            return lm
        if self._given[0] is None and not self._grown:  # a folder vLLM can start from: the model's own, or the policy saved once
            folder = Path(model_folder(self.args.model))
        else:
            folder = self.out / "engine-init"
            if not (folder / "config.json").is_file():
                self.export(folder)
        options = {"dtype": "float32", "seed": self.args.seed, **self.args.engine_options}
        if self.args.engine == "vllm-async":
            from searchgym.lm.vllm_async import AsyncVLLMLM

            return AsyncVLLMLM(str(folder), self.tokenizer, **options)
        return VLLMLM(str(folder), self.tokenizer, **options)

    def _train_envs(self, step: int) -> list[Any]:
        """The training envs of ``step``'s curriculum stage (built again when the stage changes;
        with ``Args.stage_sets`` the questions change too, and a new data order starts)."""
        stage = (reward_at(self.args, step), stage_at(self.args, step))
        if not self.envs or stage != self._stage:
            kwargs = {
                **env_kwargs(self.args, self.args.train_split, stage[0], frozen=self.frozen, stage=stage[1]),
                "retriever": self.retrieval,
            }
            kwargs.pop("retriever_options", None)  # the timed retriever was built with them
            self.envs = make_train_envs(self.args, kwargs, self.retrieval)
            changed_questions = self.args.stage_sets is not None and self._stage is not None and stage[1] != self._stage[1]
            self._stage = stage
            if changed_questions:
                self.order = self._data_order()
        return self.envs

    def _data_order(self) -> DataOrder:
        """A fresh seeded order of the current training envs' questions (the first train_limit)."""
        return DataOrder([ex.id for ex in search_env(self.envs[0]).examples[: self.args.train_limit]], self.args.seed)

    # ------------------------------------------------------------------ 1. rollout
    def rollout(self, step: int) -> tuple[list[EpisodeResult], dict[str, float]]:
        """Play this step's questions; the results of the questions kept for training (with
        trajectories, and the rewards the hooks' ``group_rewards`` returned) and the metrics
        of every episode played. The hooks' ``before_rollout`` runs once the step's envs are
        built; their ``keep_group`` may drop a question's group and their ``more_rollouts``
        ask for more generation batches (DAPO's dynamic sampling), whose episodes are in
        :attr:`played`."""
        a = self.args
        envs = self._train_envs(step)
        for hook in self.hooks:  # after the step's envs are built: what a hook sets on them plays this step
            if hook.defines("before_rollout"):
                call_hook(hook, "before_rollout", step, self, step)
        tell_step(envs, step)  # an engine with set_step (a noise schedule) learns the step it serves
        agent = policy_agent(
            envs[0], self.rollout_lm, max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_p=a.top_p,
            seed=(a.seed * 7_919 + step * 104_729) % (2**31), **context_limits(a),
        )
        self._phase("rollout")
        retrieval_before = self.retrieval.seconds
        t0 = time.perf_counter()
        played: list[EpisodeResult] = []
        kept: list[EpisodeResult] = []
        self.dropped_by, self.generation_batches = {}, 0
        want = a.questions_per_step
        while want > 0:
            questions = self.order.take(want)
            batch = self.generation_batches  # the first batch's seeds are the step's of a run without refills
            tasks = [
                Task(q, seed=(a.seed * 1_000_003 + step * 1009 + j + batch * 7_777_777) % (2**31)) for q in questions for j in range(a.n)
            ]
            self.model.eval()
            try:
                mode = "async" if a.engine == "vllm-async" else "rounds"  # the same episodes either way
                results = run_episodes(envs[: len(tasks)], agent, tasks, keep_trajectories=True, mode=mode)
            finally:
                self.model.train()
            self.generation_batches += 1
            shape_rewards(results, length_penalty=a.length_penalty, length_penalty_from=a.length_penalty_from, format_gate=a.format_gate)
            apply_group_rewards(self.hooks, results, n=a.n, step=step)  # before the stats: they average what is trained
            played.extend(results)
            kept.extend(keep_groups(self.hooks, results, n=a.n, step=step, dropped=self.dropped_by))
            want = more_rollouts(self.hooks, self, step, kept=len(kept) // a.n, batches=self.generation_batches)
        self.played = played
        stats = rollout_stats(played)
        stats.update(rollout_diagnostics(played, a.n))
        stats["time_rollout"] = time.perf_counter() - t0
        stats["time_retrieval"] = self.retrieval.seconds - retrieval_before
        return kept[: a.questions_per_step * a.n], stats

    # ------------------------------------------------------------------ 2-4. batch, advantages, update
    def update(self, samples: Sequence[Sample]) -> dict[str, float]:
        """One PPO-style update on ``samples`` (anything with ``trajectory``, ``reward`` and
        ``group``, and for ``credit="turn"`` optionally ``turn_rewards``, e.g. :class:`Sample`);
        returns its metrics."""
        a = self.args
        # 2. Batch: the samples padded, and what the update reads but does not train.
        rows, episodes = segment_rows(samples)  # an episode whose context was rewritten is several rows
        batch = collate(rows, pad_id=self.pad_id, max_length=self.context_length)
        mask = batch.loss_mask  # [B, L-1]
        scores = torch.tensor([float(s.reward) for s in samples])  # [B]
        # One update on the batch (GRPO / REINFORCE++ with ppo_epochs=1, mini_batches=1): the old
        # logprobs are the update's own, detached, so no separate forward pass computes them.
        single_pass = a.ppo_epochs == 1 and a.mini_batches == 1 and self.critic is None and not (a.kl_coef > 0 and a.kl_in_reward)
        fixed = fixed_pass(
            self.model, batch, micro_batch_size=a.micro_batch_size, temperature=a.temperature, device=self.device,
            with_old=not single_pass, reference=self.reference, critic=self.critic,
        )
        stats: dict[str, float] = {}
        if not single_pass:
            stats.update(self._check_logprobs(fixed.old, batch.rollout_logprobs, mask))
        # 3. Advantages.
        steps = None
        if a.credit == "turn":
            steps = sample_steps(samples, max_length=self.context_length) if episodes is None else \
                segment_steps(samples, episodes, max_length=self.context_length)
        rewritten = {} if episodes is None else {"episodes": episodes}  # the call of today when no context was rewritten
        advantages, returns = compute_advantages(a, scores, [s.group for s in samples], mask, fixed, steps=steps, **rewritten)  # [B, L-1]
        trained = advantages[mask.bool()]  # [tokens]
        stats["adv_std"] = float(trained.std()) if trained.numel() > 1 else 0.0
        response = sum(max(0, min(len(t), self.context_length) - len(t.prompt_ids)) for t in rows)  # every response token, observations too
        stats["trained_token_share"] = float(mask.sum()) / response if response else 0.0
        if not self._said_zero_advantages and not bool((advantages * mask).abs().any()):
            self._said_zero_advantages = True
            print(zero_advantages_note(a, self.step + 1, scores.tolist()), file=sys.stderr, flush=True)

        # 4. Update: ppo_epochs passes over the batch in mini_batches optimizer steps, each
        # accumulating the gradients of micro-batches of micro_batch_size rows.
        B = len(rows)
        sums = dict.fromkeys(LOSS_PARTS, 0.0)
        norms: list[float] = []
        value_norms: list[float] = []
        tokens = 0
        own_logprobs: list[tuple[Any, Any, Any]] = []  # (logprobs, rollout logprobs, mask) per micro-batch: single pass
        generator = torch.Generator().manual_seed(a.seed * 31 + self.step)
        passes = a.ppo_epochs * sum(math.ceil(len(m) / a.micro_batch_size) for m in chunks(list(range(B)), math.ceil(B / a.mini_batches)))
        done_passes = 0
        t0 = time.perf_counter()
        for _epoch in range(a.ppo_epochs):
            order = torch.randperm(B, generator=generator).tolist()
            for mini in chunks(order, math.ceil(B / a.mini_batches)):
                mini_tokens = float(mask[mini].sum())
                self.optimizer.zero_grad(set_to_none=True)
                if self.critic_optimizer is not None:
                    self.critic_optimizer.zero_grad(set_to_none=True)
                for rows in chunks(mini, a.micro_batch_size):
                    self._phase(f"update {done_passes}/{passes} micro-batches")
                    done_passes += 1
                    mb = batch.select(rows).to(self.device)  # [b, w + 1] ids, [b, w] masks
                    w = mb.input_ids.shape[1] - 1
                    pick = lambda t: None if t is None else t[rows, :w].to(self.device)  # noqa: E731  [B, L-1] -> [b, w]
                    shared_head = self.critic is not None and self.critic.needs_policy_hidden
                    out = forward_logprobs(
                        self.model, mb, temperature=a.temperature, with_entropy=True, entropy_grad=a.entropy_coef > 0, with_hidden=shared_head,
                    )
                    if single_pass:
                        old_logprobs = out["logprobs"].detach()  # [b, w]
                        own_logprobs.append((old_logprobs.cpu(), mb.rollout_logprobs.cpu(), mb.loss_mask.cpu()))
                    else:
                        old_logprobs = pick(fixed.old)  # [b, w]
                    # A separate critic's values come from its own graph: the value loss's gradient
                    # reaches the critic's weights only. A shared head's flow into the policy too.
                    values = None if self.critic is None else self.critic.values(mb, out.get("hidden"))  # [b, w]
                    parts = ppo_loss(
                        a, out["logprobs"], out["entropy"], old_logprobs, pick(advantages), mb.loss_mask,
                        ref_logprobs=pick(fixed.ref), values=values, old_values=pick(fixed.values), returns=pick(returns),
                    )
                    self._check_finite(parts)
                    # Each micro-batch's share of the mini-batch's mean: its tokens (token-mean) or its rows.
                    share = float(mb.loss_mask.sum()) / mini_tokens if a.loss_aggregation == "token-mean" else len(rows) / len(mini)
                    (parts["loss"] * share).backward()
                    for k, v in parts.items():
                        sums[k] += float(v.detach()) * share
                    tokens += int(mb.attention_mask.sum())
                if single_pass:  # checked before the one optimizer step, so a failed check applies nothing
                    stats.update(self._check_logprobs(*(torch.cat([t.flatten() for t in col]) for col in zip(*own_logprobs))))
                norm, value_norm = self._optimizer_step()
                norms.append(norm)
                if value_norm is not None:
                    value_norms.append(value_norm)
        elapsed = time.perf_counter() - t0
        stats.update({k: v / len(norms) for k, v in sums.items()})
        stats.update({
            "grad_norm": sum(norms) / len(norms),
            "lr": float(self.scheduler.get_last_lr()[0]),
            "value_grad_norm": sum(value_norms) / len(value_norms) if value_norms else None,
            "value_lr": self._value_lr(),
            "time_update": elapsed,
            "update_tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
            "response_tokens": float(mask.sum()) / B,
        })
        return stats

    def _check_finite(self, parts: dict[str, Any]) -> None:
        """Stop before a non-finite loss reaches the weights."""
        if not torch.isfinite(parts["loss"]):
            value = {k: float(v.detach()) for k, v in parts.items()}
            raise TrainingError(
                f"Step {self.step + 1}: the loss is {value['loss']} (policy {value['policy_loss']}, value {value['value_loss']}, "
                f"kl {value['kl']}). The update was not applied. {self._last_good()} Lower lr or check the rewards."
            )

    def _optimizer_step(self) -> tuple[float, float | None]:
        """Clip the gradients, step the optimizers and their schedules; the gradient norms
        before clipping (the policy's, and a separate critic's or None). Nothing is applied
        unless both norms are finite."""
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        norm = torch.nn.utils.clip_grad_norm_(params, self.args.max_grad_norm)
        value_norm = None
        if self.critic_optimizer is not None:
            value_norm = torch.nn.utils.clip_grad_norm_(self.critic_optimizer.param_groups[0]["params"], self.args.max_grad_norm)
        for what, n in (("", norm), ("critic's ", value_norm)):
            if n is not None and not torch.isfinite(n):
                raise TrainingError(f"Step {self.step + 1}: the {what}gradient norm is {float(n)}; the update was not applied. {self._last_good()}")
        self.optimizer.step()
        self.scheduler.step()
        if self.critic_optimizer is not None:
            self.critic_optimizer.step()
            self.critic_scheduler.step()
        return float(norm), None if value_norm is None else float(value_norm)

    def _value_lr(self) -> float | None:
        """The critic's current learning rate (None without a critic)."""
        if self.critic_scheduler is not None:
            return float(self.critic_scheduler.get_last_lr()[0])
        if self.critic is not None:
            return float(self.scheduler.get_last_lr()[1])
        return None

    def _check_logprobs(self, trainer_logprobs: Any, rollout_logprobs: Any, mask: Any) -> dict[str, float]:
        """How far the trainer's logprobs of the sampled ids are from the engine's (any
        shapes, all equal); raises past ``logprob_check_atol``."""
        diff = (trainer_logprobs - rollout_logprobs).abs()[mask.bool()]  # [tokens]
        stats = {"logprob_diff_max": float(diff.max()), "logprob_diff_mean": float(diff.mean())}
        atol = self.args.logprob_check_atol
        if atol is not None and stats["logprob_diff_max"] > atol:
            raise TrainingError(
                f"Step {self.step + 1}: rollout and trainer logprobs differ by up to {stats['logprob_diff_max']:.3g} "
                f"(limit {atol:g}): the trajectories do not line up with what the engine sampled, or "
                f"the engine's weights are stale. {self._last_good()}"
            )
        return stats

    def _last_good(self) -> str:
        if self.checkpoint is None:
            return "No checkpoint was written yet."
        return f"The last good checkpoint is {self.checkpoint}."

    # ------------------------------------------------------------------ the loop
    def evaluate(self) -> dict[str, float]:
        """Greedy play of the eval split through the benchmark harness (out/eval/step-N)."""
        a = self.args
        kwargs = env_kwargs(a, a.eval_split, reward_at(a, self.step), frozen=self.frozen, evaluation=True)
        kwargs.pop("split")
        self.model.eval()
        try:
            return evaluate_policy(
                self.rollout_lm, a.env_id, env_options=kwargs, split=a.eval_split, limit=a.eval_limit, num_envs=a.num_envs,
                max_new_tokens=a.max_new_tokens, out=self.out / "eval" / f"step-{self.step:06d}", seed=a.seed,
                label=f"step {self.step}", temperature=a.eval_temperature, agent_options=context_limits(a),
                imports=a.imports, wrappers=a.wrappers, retriever_per_env=a.retriever_per_env,
            )
        finally:
            self.model.train()

    @reports_missing_extras("searchgym.training.Trainer.train")
    def train(self) -> list[dict[str, Any]]:
        """Play steps until ``total_steps``; returns this call's metric rows."""
        if not self._built:
            self.build()
        a = self.args
        grouped = a.algorithm == "grpo" or (a.algorithm == "reinforce++" and a.reinforce_baseline == "group")
        rows = []
        bar = None
        if a.progress:
            bar = self._progress = Progress(a.total_steps, "train", "step", initial=self.step)
        ctrl_c = CtrlC()
        try:
            with ctrl_c:
                while self.step < a.total_steps:
                    ctrl_c.check()  # a Ctrl-C that Python could not raise where it came
                    if a.eval_every and self.step == 0 and not self.metrics.rows:
                        self._phase("evaluate")
                        self.metrics.log({"step": 0, **self.evaluate()})
                    results, stats = self.rollout(self.step)
                    self.keep_rollouts(self.played)
                    samples = training_samples(results, n=a.n, grouped=grouped)
                    if not results and self.played:  # the hooks dropped every group: nothing to train on
                        print(self._skipped_note(), file=sys.stderr, flush=True)
                    elif not samples:
                        raise TrainingError(
                            f"Step {self.step + 1}: no episode of the rollout batch has a token to train on "
                            f"(outcomes: {dict(Counter(r.outcome for r in results))}; a GRPO group needs two usable answers)."
                            f"{failed_note(results)} {self._last_good()}"
                        )
                    elif not self._said_failures and failed_note(results):  # said once a run; the others train
                        self._said_failures = True
                        print(f"warning: step {self.step + 1}: episodes left out of the batch:{failed_note(results)} (said once a run)",
                              file=sys.stderr, flush=True)
                    stats["dropped"] = stats["episodes"] - len(samples)
                    if samples:
                        stats.update(self.update(samples))
                    self.step += 1
                    stats["time_sync"] = self._sync_engine()
                    stats["stage_reward"] = self._stage[0] or "env default"
                    stats["peak_memory_mb"] = peak_memory_mb()
                    flags, warnings = self.stability.check(self.step, stats)
                    stats.update(flags)
                    for line in warnings:
                        print(line, file=sys.stderr, flush=True)
                    if a.eval_every and (self.step % a.eval_every == 0 or self.step == a.total_steps):
                        self._phase("evaluate")
                        stats.update(self.evaluate())
                    row = {"step": self.step, **stats, **step_metrics(self.hooks, self, self.step - 1)}
                    self.metrics.log(row)
                    rows.append(row)
                    for hook in self.hooks:
                        if hook.defines("on_step"):
                            call_hook(hook, "on_step", self.step - 1, self, self.step, dict(row))
                    if self.step % a.save_every == 0 or self.step == a.total_steps:
                        self.save()
                        plot_curves(self.metrics.rows, self.out / "curves.png", title=f"{a.algorithm} on {a.env_id}")
                    if bar is not None:
                        bar.note(phase=None, reward=f"{stats['reward']:.3f}", loss=f"{stats['loss']:.3g}" if "loss" in stats else "skipped")
                        bar.update(1)
                self.export(self.out / "final")
        except BaseException as e:  # Ctrl-C: the checkpoints are atomic; say which one a rerun starts from
            if interrupt_in(e) is not None:
                raise Interrupted(self._stopped()) from None
            raise
        finally:
            if bar is not None:
                bar.close()
            self._progress = None
            self.metrics.close()
        return rows

    def _skipped_note(self) -> str:
        """The line of a step whose every group the hooks' ``keep_group`` dropped."""
        by = ", ".join(f"{name!r} ({count} group{'s' if count != 1 else ''})" for name, count in self.dropped_by.items())
        batches = self.generation_batches
        return (
            f"step {self.step + 1}: skipped: the trainer hooks' keep_group dropped every group of the "
            f"{len(self.played) // self.args.n} questions played in {batches} generation batch{'es' if batches != 1 else ''} "
            f"(dropped by {by}), so the step trains nothing; no update was made and its metrics row has no loss."
        )

    def keep_rollouts(self, results: Sequence[EpisodeResult]) -> None:
        """Append :data:`ROLLOUTS_KEPT` of the step's rollouts, each of another question, to
        ``out/rollouts.jsonl`` with their token records (what ``searchgym view`` shades by loss mask)."""
        for result in list(results[:: self.args.n])[:ROLLOUTS_KEPT]:
            record = {"run": "training rollouts", "step": self.step + 1, **result.to_dict()}
            if result.trajectory is not None:
                record["tokens"] = token_record(result.trajectory, self.tokenizer)
            append_line(self.out / "rollouts.jsonl", json.dumps(record))

    def _stopped(self) -> str:
        """The line of a run stopped by Ctrl-C (or SIGTERM): what was kept and how to go on."""
        done = f"{self.step} of {self.args.total_steps} steps done"
        complete = complete_checkpoints(self.out)  # what a rerun starts from (a save stopped after its last write counts)
        if not complete:
            return (f"{done}, no checkpoint written yet (one every {self.args.save_every} steps); "
                    "run the same command to start over")
        kept = checkpoint_step(complete[-1])
        return f"{done}; step {kept} kept in {complete[-1]}; run the same command to go on from step {kept}"

    def _phase(self, text: str) -> None:
        """Show what the step is doing on the progress display (a step may take minutes)."""
        if self._progress is not None:
            self._progress.note(phase=text)

    # ------------------------------------------------------------------ state, checkpoints, export
    def state(self) -> dict[str, Any]:
        """Everything a resume needs: the trained weights, optimizer, scheduler, RNGs, data order."""
        return {
            "step": self.step,
            "trainable": {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad},
            "critic": None if self.critic is None else trainable_state(self.critic),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "critic_optimizer": None if self.critic_optimizer is None else self.critic_optimizer.state_dict(),
            "critic_scheduler": None if self.critic_scheduler is None else self.critic_scheduler.state_dict(),
            "rng": rng_state(),
            "data": self.order.state(),
            "args": args_record(self.args),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` (but the RNGs, which the caller sets last)."""
        params = dict(self.model.named_parameters())
        missing = sorted(set(n for n, p in params.items() if p.requires_grad) - set(state["trainable"]))
        if missing:
            raise ConfigError(f"The checkpoint does not match the model: no weights for {missing[:3]}...; was it written with other LoRA settings?")
        with torch.no_grad():
            for name, tensor in state["trainable"].items():
                params[name].copy_(tensor)
        if self.critic is not None:
            if state.get("critic") is None:
                raise ConfigError("The checkpoint holds no PPO critic; was it written by another algorithm or critic setting?")
            load_trainable_state(self.critic, state["critic"], what="critic")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.critic_optimizer is not None:
            self.critic_optimizer.load_state_dict(state["critic_optimizer"])
            self.critic_scheduler.load_state_dict(state["critic_scheduler"])
        self.order.load(state["data"])

    def save(self) -> Path:
        self.checkpoint = save_checkpoint(self.out, self.step, self.state(), keep=self.args.keep_checkpoints)
        return self.checkpoint

    def merged_weights(self) -> dict[str, Any]:
        """The policy's weights in the base model's names (LoRA deltas added in)."""
        return merged_weights(self.model, self.peft_model)

    def export(self, folder: Path) -> Path:
        """Save the policy (LoRA merged) with its tokenizer as a transformers folder, atomically."""
        return export_policy(folder, self.model, self.tokenizer, self.peft_model)

    def _sync_engine(self) -> float:
        """Push the policy's weights to a vLLM engine; the seconds it took (0 for transformers)."""
        if self.args.engine == "transformers":
            return 0.0
        t0 = time.perf_counter()
        self.rollout_lm.update_weights(self.merged_weights().items())
        return time.perf_counter() - t0
