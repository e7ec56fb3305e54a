"""The RL trainer: rollouts through the vectorized driver, then PPO / GRPO / REINFORCE++ updates.

One step: take ``questions_per_step`` questions of the train split (a seeded order that
survives resumes), play each ``n`` times with the policy (``run_episodes`` keeps every
trajectory's token record), recompute the logprobs of the sampled ids with the training
model (compared with the engine's: the logprob check), compute advantages, and update
for ``ppo_epochs`` passes in ``mini_batches`` optimizer steps, accumulating gradients over
micro-batches. Metrics go to ``metrics.csv`` (and TensorBoard), curves to
``curves.png``; checkpoints are atomic (:mod:`searchgym.training.checkpoint`).

The rollout engine is the training model itself (``transformers``) or a vLLM engine whose
weights are replaced by the policy's after every update (``vllm``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import resource
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchgym.envs.registration import full_env_id
from searchgym.error import ConfigError, TrainingError
from searchgym.training.args import Args, check_args

#: Args fields a resumed run may change (they do not alter what is computed).
RESUMABLE_CHANGES = frozenset(
    {"total_steps", "out", "resume", "progress", "eval_every", "eval_limit", "eval_env_options", "save_every", "keep_checkpoints", "tensorboard", "threads"}
)

#: Columns of metrics.csv, in order.
COLUMNS = (
    "step", "stage_reward", "episodes", "dropped", "reward", "reward_std", "em", "f1", "cover_em", "searches",
    "turns", "response_tokens", "generated_tokens", "truncated", "loss", "policy_loss", "value_loss", "kl",
    "entropy", "clip_fraction", "grad_norm", "lr", "logprob_diff_max", "logprob_diff_mean",
    "time_rollout", "time_retrieval", "time_update", "time_sync", "update_tokens_per_s", "peak_memory_mb",
    "eval_reward", "eval_em", "eval_f1", "eval_cover_em", "eval_searches", "eval_response_tokens",
)


class DataOrder:
    """Questions in a seeded order, reshuffled every epoch; its state is two integers."""

    def __init__(self, ids: Sequence[str], seed: int):
        if not ids:
            raise ConfigError("The training split has no questions.")
        self.ids = list(ids)
        self.seed = seed
        self.epoch = 0
        self.position = 0
        self._order = self._shuffled()

    def _shuffled(self) -> list[str]:
        order = list(self.ids)
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def take(self, k: int) -> list[str]:
        out = []
        while len(out) < k:
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._shuffled()
            out.append(self._order[self.position])
            self.position += 1
        return out

    def state(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self._order = self._shuffled()


class _Timer:
    """Seconds spent inside retriever calls, summed over the env threads."""

    def __init__(self) -> None:
        self.total = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.total += seconds


class _TimedRetriever:
    """One env's view of its retriever that times ``search``. Retrievers are shared by every
    env over the same corpus (``make_retriever`` caches them), so the shared instance itself
    is never modified."""

    def __init__(self, inner: Any, timer: _Timer):
        self.inner = inner
        self.timer = timer

    def search(self, queries: Sequence[str], k: int) -> Any:
        t0 = time.perf_counter()
        try:
            return self.inner.search(queries, k)
        finally:
            self.timer.add(time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def load_policy(name: str, *, device: Any = None) -> tuple[Any, Any]:
    """(model, tokenizer) of a policy name, in float32 and train mode."""
    import torch

    from searchgym.error import require
    from searchgym.lm.hf import load_model

    require("transformers", extra="lm", feature="Training")  # the error names the extra to install
    model, tokenizer = load_model(name, dtype=torch.float32)
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    return model.to(device), tokenizer


def evaluate_policy(
    lm: Any, env_id: str, *, env_options: dict[str, Any], split: str, limit: int | None, num_envs: int,
    max_new_tokens: int, out: Path | None, seed: int = 0, label: str | None = None,
) -> dict[str, float]:
    """Greedy play of ``lm`` on ``split`` through the benchmark harness (files in ``out``):
    the summary's reward, EM, F1, cover-EM, searches and generated tokens as ``eval_*``."""
    from searchgym.bench import BenchConfig, run_bench

    config = BenchConfig(
        runs=[(full_env_id(env_id), "lm")], split=split, limit=limit, seeds=(seed,), model=lm,
        env_options={"*": dict(env_options)}, num_envs=num_envs, temperature=0.0, max_new_tokens=max_new_tokens,
        labels=None if label is None else [label],
    )
    row = run_bench(config, out, progress=False, resume=False).rows[0]
    return {
        "eval_reward": row["reward"], "eval_em": row["em"], "eval_f1": row["f1"], "eval_cover_em": row["cover_em"],
        "eval_searches": row["searches"], "eval_response_tokens": row["generated_tokens"],
    }


class Trainer:
    """Runs :class:`Args` (see the module docstring). ``Trainer(args).train()`` returns the
    metric rows of the steps it played."""

    def __init__(self, args: Args, *, model: Any = None, tokenizer: Any = None):
        check_args(args)
        self.args = args
        self.out = Path(args.out)
        self._given = (model, tokenizer)
        self.step = 0
        self._built = False

    # ------------------------------------------------------------------ setup
    def _prepare_out(self) -> Path | None:
        """Refuse a foreign run folder; return the checkpoint to resume from."""
        from searchgym.training.checkpoint import latest_checkpoint

        args_file = self.out / "args.json"
        checkpoint = latest_checkpoint(self.out) if self.out.exists() else None
        if self.out.exists() and any(self.out.iterdir()):
            if not self.args.resume:
                raise ConfigError(f"{self.out} is not empty; pick another --out, or resume the run in it (drop --no-resume).")
            if args_file.is_file():
                previous = json.loads(args_file.read_text())
                mine = _args_record(self.args)
                changed = sorted(k for k in mine if k not in RESUMABLE_CHANGES and previous.get(k) != mine[k])
                if changed:
                    raise ConfigError(
                        f"{self.out} holds a run with different settings (changed: {', '.join(changed)}); resume it with "
                        "the same settings or pick another --out."
                    )
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.out / "args.json.tmp"
        tmp.write_text(json.dumps(_args_record(self.args), indent=2))
        os.replace(tmp, args_file)
        return checkpoint

    def build(self) -> None:
        """Load the model, the envs and the optimizer; restore the newest checkpoint."""
        import torch

        from searchgym.training.checkpoint import load_checkpoint, set_rng_state
        from searchgym.training.metrics import MetricsLog

        args = self.args
        self._check_splits()
        checkpoint = self._prepare_out()
        if args.threads is not None:
            torch.set_num_threads(args.threads)
        torch.manual_seed(args.seed)
        random.seed(args.seed)
        model, tokenizer = self._given
        if model is None:
            model, tokenizer = load_policy(args.model, device=args.device)
        elif tokenizer is None:
            raise ConfigError("Trainer got a model without its tokenizer; pass tokenizer=... too.")
        self.tokenizer = tokenizer
        self.device = next(model.parameters()).device
        model.float()
        self.peft_model = None
        if args.lora_rank:
            from searchgym.error import require

            peft = require("peft", extra="train", feature="LoRA training")
            config = peft.LoraConfig(
                r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules=list(args.lora_targets), lora_dropout=0.0, bias="none"
            )
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(args.seed)
                self.peft_model = peft.get_peft_model(model, config)
            model = self.peft_model.get_base_model()
        self.model = model
        self.reference = None
        if args.kl_coef > 0 and self.peft_model is None:
            import copy

            self.reference = copy.deepcopy(model).eval()
            for p in self.reference.parameters():
                p.requires_grad_(False)
        self.value_head = None
        if args.algorithm == "ppo":
            hidden = int(model.config.hidden_size)
            self.value_head = torch.nn.Linear(hidden, 1).to(self.device)
            torch.nn.init.zeros_(self.value_head.weight)
            torch.nn.init.zeros_(self.value_head.bias)
        groups = [{"params": [p for p in model.parameters() if p.requires_grad], "lr": args.lr}]
        if self.value_head is not None:
            groups.append({"params": list(self.value_head.parameters()), "lr": args.value_lr})
        self.optimizer = torch.optim.AdamW(groups, weight_decay=args.weight_decay)
        warmup = args.warmup_steps
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _Warmup(warmup))
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)

        self.frozen = None
        if args.frozen_model is not None and args.frozen_model != "gold-span":
            from searchgym.lm.registry import load_lm

            self.frozen = load_lm(args.frozen_model)
        self._stage = None
        self.envs: list[Any] = []
        self.retrieval = _Timer()
        ids = [ex.id for ex in self._train_envs(0)[0].unwrapped.examples[: args.train_limit]]
        self.order = DataOrder(ids, args.seed)
        self.rollout_lm = self._make_engine()

        if checkpoint is not None:
            state = load_checkpoint(checkpoint)
            self._load_state(state)
            set_rng_state(state["rng"])
            self.step = int(state["step"])
            self.checkpoint = checkpoint
            self._sync_engine()
        else:
            self.checkpoint = None
        self.metrics = MetricsLog(
            self.out / "metrics.csv",
            COLUMNS,
            resume_step=self.step if checkpoint is not None else None,
            tensorboard_dir=self.out / "tensorboard" if args.tensorboard else None,
        )
        self._built = True

    def _make_engine(self) -> Any:
        if self.args.engine == "transformers":
            from searchgym.lm.hf import TransformersLM

            lm = TransformersLM(self.model, self.tokenizer, device=self.device)  # keeps the model's modules and mode
            return lm
        from searchgym.lm.vllm import VLLMLM

        folder = self._engine_folder()
        options = {"dtype": "float32", "seed": self.args.seed, **self.args.engine_options}
        lm = VLLMLM(str(folder), self.tokenizer, **options)
        return lm

    def _engine_folder(self) -> Path:
        """A folder vLLM can start from: the model's own, or the policy saved once."""
        from searchgym.lm.vllm import model_folder

        if self._given[0] is None:
            return Path(model_folder(self.args.model))
        folder = self.out / "engine-init"
        if not (folder / "config.json").is_file():
            self._export(folder)
        return folder

    def _reward_at(self, step: int) -> str | None:
        a = self.args
        if a.stage2_step is not None and step >= a.stage2_step:
            return a.stage2_reward
        return a.reward

    def _check_splits(self) -> None:
        """Both splits hold questions (before anything is written or loaded): a wrong
        split fails here, not after the model has loaded."""
        from searchgym.envs.core import load_examples
        from searchgym.envs.registration import env_spec
        from searchgym.error import UnknownNameError

        a = self.args
        checks = [("train_split", a.train_split, a.env_options)]
        if a.eval_every:
            checks.append(("eval_split", a.eval_split, {**a.env_options, **a.eval_env_options}))
        for name, split, options in checks:
            options = {**env_spec(a.env_id), **options}
            try:
                load_examples(
                    options.get("corpus", "synthwiki"), options.get("dataset"), split=split,
                    corpus_options=options.get("corpus_options"), dataset_options=options.get("dataset_options"),
                    owner=f"Args.{name}",
                )
            except UnknownNameError as e:
                if not e.kind.endswith("split"):
                    raise
                flag = "--" + name.replace("_", "-")
                raise ConfigError(f"Args.{name} {split!r} is not a split of this env's dataset: {e} Pass {flag} (Args.{name}).") from None

    def _env_kwargs(self, split: str, reward: str | None, *, evaluation: bool = False) -> dict[str, Any]:
        from searchgym.envs.frozen import with_frozen_models

        kwargs = {"split": split, **self.args.env_options}
        if evaluation:
            kwargs.update(self.args.eval_env_options)
        if reward is not None:
            kwargs["reward"] = reward
        frozen = None if self.args.frozen_model is None else ("gold-span" if self.frozen is None else self.frozen)
        return with_frozen_models(
            full_env_id(self.args.env_id), kwargs, frozen=frozen, summarizer=self.args.summarizer, summarizer_model=self.frozen
        )

    def _make_env(self, split: str, reward: str | None) -> Any:
        import gymnasium as gym

        return gym.make(full_env_id(self.args.env_id), **self._env_kwargs(split, reward))

    def _train_envs(self, step: int) -> list[Any]:
        stage = self._reward_at(step)
        if not self.envs or stage != self._stage:
            self.envs = [self._make_env(self.args.train_split, stage) for _ in range(self.args.num_envs)]
            for env in self.envs:
                env.unwrapped.retriever = _TimedRetriever(env.unwrapped.retriever, self.retrieval)
            self._stage = stage
        return self.envs

    # ------------------------------------------------------------------ state
    def _trainable(self) -> dict[str, Any]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}

    def state(self) -> dict[str, Any]:
        from searchgym.training.checkpoint import rng_state

        return {
            "step": self.step,
            "trainable": self._trainable(),
            "value_head": None if self.value_head is None else self.value_head.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "rng": rng_state(),
            "data": self.order.state(),
            "args": _args_record(self.args),
        }

    def _load_state(self, state: dict[str, Any]) -> None:
        import torch

        params = dict(self.model.named_parameters())
        missing = sorted(set(n for n, p in params.items() if p.requires_grad) - set(state["trainable"]))
        if missing:
            raise ConfigError(f"The checkpoint does not match the model: no weights for {missing[:3]}...; was it written with other LoRA settings?")
        with torch.no_grad():
            for name, tensor in state["trainable"].items():
                params[name].copy_(tensor)
        if self.value_head is not None:
            self.value_head.load_state_dict(state["value_head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.order.load(state["data"])

    def save(self) -> Path:
        from searchgym.training.checkpoint import save_checkpoint

        self.checkpoint = save_checkpoint(self.out, self.step, self.state(), keep=self.args.keep_checkpoints)
        return self.checkpoint

    def merged_weights(self) -> dict[str, Any]:
        """The policy's weights in the base model's names (LoRA deltas added in)."""
        import torch

        if self.peft_model is None:
            return {n: t.detach() for n, t in self.model.state_dict().items()}
        out: dict[str, Any] = {}
        with torch.no_grad():
            for module_name, module in self.model.named_modules():
                if hasattr(module, "get_delta_weight") and hasattr(module, "base_layer"):
                    base = module.base_layer.weight
                    delta = sum((module.get_delta_weight(a) for a in module.active_adapters), torch.zeros_like(base))
                    out[f"{module_name}.weight"] = base + delta
                    if getattr(module.base_layer, "bias", None) is not None:
                        out[f"{module_name}.bias"] = module.base_layer.bias
            for name, tensor in self.model.state_dict().items():
                if "lora_" in name:
                    continue
                plain = name.replace(".base_layer.", ".")
                out.setdefault(plain, tensor.detach())
        return out

    def _export(self, folder: Path) -> Path:
        """Save the policy (LoRA merged) with its tokenizer as a transformers folder, atomically."""
        import copy

        import torch

        tmp = folder.parent / f".tmp-{folder.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        if self.peft_model is None:
            self.model.save_pretrained(tmp)
        else:
            with torch.no_grad():
                plain = copy.deepcopy(self.peft_model).merge_and_unload()
            plain.save_pretrained(tmp)
        self.tokenizer.save_pretrained(tmp)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        return folder

    def _sync_engine(self) -> float:
        if self.args.engine != "vllm":
            return 0.0
        t0 = time.perf_counter()
        self.rollout_lm.update_weights(self.merged_weights().items())
        return time.perf_counter() - t0

    # ------------------------------------------------------------------ rollout
    def rollout(self, step: int) -> tuple[list[Any], dict[str, float]]:
        """Play this step's questions; the results (with trajectories) and their metrics."""
        from searchgym.agents.driver import Task, run_episodes
        from searchgym.agents.lm_agents import policy_agent

        a = self.args
        envs = self._train_envs(step)
        questions = self.order.take(a.questions_per_step)
        tasks = [Task(q, seed=(a.seed * 1_000_003 + step * 1009 + j) % (2**31)) for q in questions for j in range(a.n)]
        agent = policy_agent(
            envs[0], self.rollout_lm, max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_p=a.top_p,
            seed=(a.seed * 7_919 + step * 104_729) % (2**31),
        )
        self.model.eval()
        before = self.retrieval.total
        t0 = time.perf_counter()
        try:
            results = run_episodes(envs[: len(tasks)], agent, tasks, keep_trajectories=True)
        finally:
            self.model.train()
        elapsed = time.perf_counter() - t0
        for i, r in enumerate(results):
            r.group = i // a.n  # type: ignore[attr-defined]
        n = len(results)
        stats = {
            "episodes": n,
            "reward": sum(r.reward for r in results) / n,
            "reward_std": _std([r.reward for r in results]),
            "em": sum(r.em for r in results) / n,
            "f1": sum(r.f1 for r in results) / n,
            "cover_em": sum(r.cover_em for r in results) / n,
            "searches": sum(r.num_searches for r in results) / n,
            "turns": sum(r.num_turns for r in results) / n,
            "generated_tokens": sum(r.generated_tokens for r in results) / n,
            "truncated": sum(r.outcome == "truncated" for r in results) / n,
            "time_rollout": elapsed,
            "time_retrieval": self.retrieval.total - before,
        }
        return results, stats

    def _trainable_results(self, results: Sequence[Any]) -> list[Any]:
        keep = [
            r for r in results
            if r.trajectory is not None and r.trajectory.num_generated > 0 and r.outcome not in ("backend_error", "error")
        ]
        if self.args.algorithm == "grpo" or (self.args.algorithm == "reinforce++" and self.args.reinforce_baseline == "group"):
            sizes: dict[int, int] = {}
            for r in keep:
                sizes[r.group] = sizes.get(r.group, 0) + 1
            keep = [r for r in keep if sizes[r.group] >= 2]
        return keep

    # ------------------------------------------------------------------ update
    def _no_grad_pass(self, batch: Any, *, with_old: bool = True) -> dict[str, Any]:
        """Old logprobs (unless ``with_old`` is False), reference logprobs and values of the
        rollout batch, micro-batch by micro-batch; no forward pass when none is needed."""
        import torch

        from searchgym.training.batch import forward_logprobs

        a = self.args
        B, W = batch.input_ids.shape
        old = torch.zeros(B, W - 1) if with_old else None
        ref = torch.zeros(B, W - 1) if a.kl_coef > 0 else None
        values = torch.zeros(B, W - 1) if self.value_head is not None else None
        if old is None and ref is None and values is None:
            return {"old": None, "ref": None, "values": None}
        self.model.eval()
        with torch.no_grad():
            for start in range(0, B, a.micro_batch_size):
                rows = list(range(start, min(B, start + a.micro_batch_size)))
                mb = batch.select(rows).to(self.device)
                w = mb.input_ids.shape[1] - 1
                if old is not None or values is not None:
                    out = forward_logprobs(self.model, mb, temperature=a.temperature, with_hidden=values is not None)
                if old is not None:
                    old[rows, :w] = out["logprobs"].cpu()
                if values is not None:
                    values[rows, :w] = self.value_head(out["hidden"].float()).squeeze(-1).cpu()
                if ref is not None:
                    if self.peft_model is not None:
                        with self.peft_model.disable_adapter():
                            ref_out = forward_logprobs(self.model, mb, temperature=a.temperature)
                    else:
                        ref_out = forward_logprobs(self.reference, mb, temperature=a.temperature)
                    ref[rows, :w] = ref_out["logprobs"].cpu()
        self.model.train()
        return {"old": old, "ref": ref, "values": values}

    def _advantages(self, batch: Any, scores: Any, groups: list[int], fixed: dict[str, Any]) -> tuple[Any, Any]:
        from searchgym.training.advantages import gae, group_advantages, last_token_rewards, reinforce_pp_advantages
        from searchgym.training.losses import kl_penalty

        a = self.args
        mask = batch.loss_mask
        kl = None
        if fixed["ref"] is not None and a.kl_in_reward:
            kl = kl_penalty(fixed["old"], fixed["ref"], a.kl_estimator) * mask
        if a.algorithm == "grpo":
            return group_advantages(scores, groups).unsqueeze(-1) * mask, None
        if a.algorithm == "reinforce++":
            use_groups = groups if a.reinforce_baseline == "group" else None
            return reinforce_pp_advantages(scores, mask, kl=kl, kl_coef=a.kl_coef, gamma=a.gamma, groups=use_groups), None
        rewards = last_token_rewards(scores, mask)
        if kl is not None:
            rewards = rewards - a.kl_coef * kl
        advantages, returns = gae(rewards, fixed["values"], mask, gamma=a.gamma, lam=a.lam)
        flat = advantages[mask.bool()]
        if flat.numel() > 1:
            advantages = (advantages - flat.mean()) / (flat.std() + 1e-8) * mask
        return advantages, returns

    def update(self, results: Sequence[Any]) -> dict[str, float]:
        """One PPO-style update on the trajectories of ``results``; returns its metrics."""
        import torch

        from searchgym.training.batch import collate, forward_logprobs
        from searchgym.training.losses import aggregate, kl_penalty, policy_loss, value_loss

        a = self.args
        batch = collate([r.trajectory for r in results], pad_id=self.pad_id, max_length=self.context_length)
        scores = torch.tensor([float(r.reward) for r in results])
        groups = [r.group for r in results]
        # One update on the batch (GRPO / REINFORCE++ with ppo_epochs=1, mini_batches=1): the
        # old logprobs are the update's own, detached, so no separate forward pass computes them.
        single_pass = a.ppo_epochs == 1 and a.mini_batches == 1 and self.value_head is None and not (a.kl_coef > 0 and a.kl_in_reward)
        fixed = self._no_grad_pass(batch, with_old=not single_pass)
        mask = batch.loss_mask
        stats: dict[str, float] = {}
        if not single_pass:
            stats.update(self._check_logprobs(fixed["old"], batch.rollout_logprobs, mask))
        advantages, returns = self._advantages(batch, scores, groups, fixed)
        B = len(results)
        sums = {k: 0.0 for k in ("loss", "policy_loss", "value_loss", "kl", "entropy", "clip_fraction")}
        norms = []
        updates = 0
        tokens = 0
        t0 = time.perf_counter()
        seen_old: list[tuple[Any, Any, Any]] = []  # (old, rollout logprobs, mask) of each micro-batch, single pass
        generator = torch.Generator().manual_seed(a.seed * 31 + self.step)
        for _epoch in range(a.ppo_epochs):
            order = torch.randperm(B, generator=generator).tolist()
            size = math.ceil(B / a.mini_batches)
            for m_start in range(0, B, size):
                mini = order[m_start : m_start + size]
                mini_tokens = float(mask[mini].sum())
                self.optimizer.zero_grad(set_to_none=True)
                for u_start in range(0, len(mini), a.micro_batch_size):
                    rows = mini[u_start : u_start + a.micro_batch_size]
                    mb = batch.select(rows).to(self.device)
                    w = mb.input_ids.shape[1] - 1
                    m = mb.loss_mask
                    share = float(m.sum()) / mini_tokens if a.loss_aggregation == "token-mean" else len(rows) / len(mini)
                    pick = lambda t: t[rows, :w].to(self.device)  # noqa: E731
                    out = forward_logprobs(
                        self.model, mb, temperature=a.temperature, with_entropy=True,
                        entropy_grad=a.entropy_coef > 0, with_hidden=self.value_head is not None,
                    )
                    if single_pass:
                        old_logprobs = out["logprobs"].detach()  # [b, w]
                        seen_old.append((old_logprobs.cpu(), mb.rollout_logprobs.cpu(), m.cpu()))
                    else:
                        old_logprobs = pick(fixed["old"])  # [b, w]
                    pl, clip_fraction = policy_loss(
                        out["logprobs"], old_logprobs, pick(advantages), m,
                        clip_low=a.clip, clip_high=a.clip_high, mode=a.loss_aggregation,
                    )
                    loss = pl
                    entropy = aggregate(out["entropy"], m, a.loss_aggregation)
                    if a.entropy_coef:
                        loss = loss - a.entropy_coef * entropy
                    kl_value = torch.zeros(())
                    if fixed["ref"] is not None:
                        kl_value = aggregate(kl_penalty(out["logprobs"], pick(fixed["ref"]), a.kl_estimator), m, a.loss_aggregation)
                        if not a.kl_in_reward:
                            loss = loss + a.kl_coef * kl_value
                    vl = torch.zeros(())
                    if self.value_head is not None:
                        values = self.value_head(out["hidden"].float()).squeeze(-1)
                        vl = value_loss(values, pick(fixed["values"]), pick(returns), m, clip=a.value_clip, mode=a.loss_aggregation)
                        loss = loss + a.value_coef * vl
                    if not torch.isfinite(loss):
                        raise TrainingError(
                            f"Step {self.step + 1}: the loss is {float(loss.detach())} (policy {float(pl.detach())}, value "
                            f"{float(vl.detach())}, kl {float(kl_value.detach())}). The update was not applied. {self._last_good()} Lower lr or check the rewards."
                        )
                    (loss * share).backward()
                    for k, v in (("loss", loss), ("policy_loss", pl), ("value_loss", vl), ("kl", kl_value), ("entropy", entropy), ("clip_fraction", clip_fraction)):
                        sums[k] += float(v.detach()) * share
                    tokens += int(mb.attention_mask.sum())
                if single_pass:  # checked before the one optimizer step, so a failed check applies nothing
                    stats.update(self._check_logprobs(*(torch.cat([t.flatten() for t in col]) for col in zip(*seen_old))))
                params = [p for g in self.optimizer.param_groups for p in g["params"]]
                norm = torch.nn.utils.clip_grad_norm_(params, a.max_grad_norm)
                if not torch.isfinite(norm):
                    raise TrainingError(f"Step {self.step + 1}: the gradient norm is {float(norm)}; the update was not applied. {self._last_good()}")
                self.optimizer.step()
                self.scheduler.step()
                norms.append(float(norm))
                updates += 1
        elapsed = time.perf_counter() - t0
        stats.update({k: v / updates for k, v in sums.items()})
        stats.update({
            "grad_norm": sum(norms) / len(norms),
            "lr": float(self.scheduler.get_last_lr()[0]),
            "time_update": elapsed,
            "update_tokens_per_s": tokens / elapsed if elapsed > 0 else 0.0,
            "response_tokens": float(mask.sum()) / B,
        })
        return stats

    def _check_logprobs(self, trainer_logprobs: Any, rollout_logprobs: Any, mask: Any) -> dict[str, float]:
        """How far the trainer's logprobs of the sampled ids are from the engine's; raises
        past ``logprob_check_atol``."""
        diff = (trainer_logprobs - rollout_logprobs).abs()[mask.bool()]
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

    # ------------------------------------------------------------------ loop
    def evaluate(self) -> dict[str, float]:
        """Greedy play of the eval split through the benchmark harness (out/eval/step-N)."""
        a = self.args
        kwargs = self._env_kwargs(a.eval_split, self._reward_at(self.step), evaluation=True)
        kwargs.pop("split")
        self.model.eval()
        try:
            return evaluate_policy(
                self.rollout_lm, a.env_id, env_options=kwargs, split=a.eval_split, limit=a.eval_limit, num_envs=a.num_envs,
                max_new_tokens=a.max_new_tokens, out=self.out / "eval" / f"step-{self.step:06d}", seed=a.seed,
                label=f"step {self.step}",
            )
        finally:
            self.model.train()

    def train(self) -> list[dict[str, Any]]:
        """Play steps until ``total_steps``; returns this call's metric rows."""
        from searchgym.training.metrics import plot_curves

        if not self._built:
            self.build()
        a = self.args
        rows = []
        bar = None
        if a.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=a.total_steps, initial=self.step, desc="train", unit="step", dynamic_ncols=True)
        try:
            while self.step < a.total_steps:
                if a.eval_every and self.step == 0 and not self.metrics.rows:
                    self.metrics.log({"step": 0, **self.evaluate()})
                results, stats = self.rollout(self.step)
                usable = self._trainable_results(results)
                if not usable:
                    outcomes: dict[str, int] = {}
                    for r in results:
                        outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
                    raise TrainingError(
                        f"Step {self.step + 1}: no episode of the rollout batch has a token to train on "
                        f"(outcomes: {outcomes}; a GRPO group needs two usable answers). {self._last_good()}"
                    )
                stats["dropped"] = len(results) - len(usable)
                stats.update(self.update(usable))
                self.step += 1
                stats["time_sync"] = self._sync_engine()
                stats["stage_reward"] = self._stage or "env default"
                stats["peak_memory_mb"] = _peak_memory_mb()
                if a.eval_every and (self.step % a.eval_every == 0 or self.step == a.total_steps):
                    stats.update(self.evaluate())
                row = {"step": self.step, **stats}
                self.metrics.log(row)
                rows.append(row)
                if self.step % a.save_every == 0 or self.step == a.total_steps:
                    self.save()
                    plot_curves(self.metrics.rows, self.out / "curves.png", title=f"{a.algorithm} on {a.env_id}")
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(reward=f"{stats['reward']:.3f}", loss=f"{stats['loss']:.3g}")
            self._export(self.out / "final")
        finally:
            if bar is not None:
                bar.close()
            self.metrics.close()
        return rows


class _Warmup:
    """Linear warmup over ``steps`` optimizer steps, then constant (picklable for checkpoints)."""

    def __init__(self, steps: int):
        self.steps = steps

    def __call__(self, i: int) -> float:
        return min(1.0, (i + 1) / self.steps) if self.steps else 1.0


def _args_record(args: Args) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(args), default=str))


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def _peak_memory_mb() -> float:
    import torch

    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
