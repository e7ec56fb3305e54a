"""Train any searchgym env with TRL's ``GRPOTrainer``, two ways.

- :class:`EnvRollout`, a ``rollout_func``: the env's own protocol (tags), token-exact
  records from searchgym's driver (below).
- :func:`tool_environment`, an ``environment_factory``: the game through the model's native
  tool calls, played by TRL's own tool loop (:mod:`searchgym.integrations.trl_tools`), with
  :func:`tool_dataset` for its rows.

TRL's ``rollout_func`` hook hands the trainer's prompts to a function that returns, for
each one, prompt ids, completion ids, the sampled logprobs and an ``env_mask`` (1 on
tokens the model generated, 0 on tokens the environment wrote). That is searchgym's
:class:`~searchgym.agents.trajectory.Trajectory` exactly, so the five tag protocols stay
as they are::

    from searchgym.integrations.trl import EnvRollout, bf16_supported, env_reward
    from trl import GRPOConfig, GRPOTrainer

    rollout = EnvRollout("searchgym/SearchR1-v0", max_new_tokens=128)
    trainer = GRPOTrainer(
        model="runs/sft/final", reward_funcs=env_reward, rollout_func=rollout,
        train_dataset=rollout.dataset("train"),
        args=GRPOConfig(num_generations=8, bf16=bf16_supported(), ...),  # GRPOConfig's bf16=True fails on a CPU
    )
    trainer.train()

Each prompt of the dataset is a question of the env's split. ``EnvRollout`` plays one
episode per prompt it is given (TRL repeats each question ``num_generations`` times; every
copy gets its own sampling seed) through searchgym's vectorized driver, with the trainer's
model as the policy (batched generation over the live episodes, the env's retrieval and
frozen models stepping in between), and returns:

- ``prompt_ids``: the chat prompt the policy read;
- ``completion_ids``: every turn's sampled ids followed by the tokenized observation,
  in order (never decoded and re-tokenized);
- ``env_mask``: 1 on sampled ids, 0 on observation ids, so TRL's policy loss, KL and
  entropy read the agent's tokens only;
- ``logprobs``: the sampled ids' logprobs (0.0 at observation ids, which the mask drops);
- ``env_reward`` and ``env_reward_components``: the env's reward, passed to the reward
  function :func:`env_reward`, which also logs each component and the episode metrics
  (EM, F1, searches, turns) to TRL's metrics;
- ``env_turn_rewards``: the env's reward of each step (``EpisodeResult.turn_rewards``).
  TRL's GRPOTrainer takes one reward per completion, so a recipe's turn rewards reach it
  summed (``env_reward`` is their sum); per-turn credit (searchgym's ``--credit turn``)
  has no place in it. A reward function of your own may read them to shape that one number.

Sampling follows the trainer's ``temperature`` and ``top_p`` (TRL scores the tokens with
the same temperature); options this backend cannot honour (``top_k``, ``min_p``,
``repetition_penalty``, ``mask_truncated_completions``: episodes end at a protocol's stop
string, not at end-of-sequence) fail with :class:`~searchgym.error.ConfigError` instead of
training on tokens drawn from another distribution. The model is switched to eval mode
while it generates and given back in the mode it was in.

An episode that could not be played (a prompt longer than the model's context, a backend
or env error) has no sampled token: it is returned as one end-of-sequence id with mask 0
and reward ``None``, which TRL treats as unscorable (no advantage, no loss).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents.driver import EpisodeResult, Task, run_episodes
from searchgym.agents.lm_agents import policy_agent
from searchgym.envs.access import search_env
from searchgym.envs.registration import full_env_id, with_frozen_models
from searchgym.error import ConfigError, require
from searchgym.integrations.trl_tools import ToolEnvironment, tool_dataset, tool_environment, unread_calls

__all__ = ["EnvRollout", "ToolEnvironment", "bf16_supported", "env_reward", "resolve_bf16", "tool_dataset", "tool_environment", "unread_calls"]

#: TRL GRPOConfig options this rollout cannot sample with, and their neutral values.
_NEUTRAL_SAMPLING = {"top_k": (0, None), "min_p": (None, 0.0), "repetition_penalty": (1.0,)}


class EnvRollout:
    """A TRL ``rollout_func`` that plays a searchgym env (see the module docstring).

    Args:
        env_id: A registered id (``"searchgym/SearchR1-v0"`` or ``"SearchR1-v0"``),
            single-role multi-agent envs included.
        env_options: ``gym.make`` options of the training env (corpus, retriever, reward,
            max_turns...).
        eval_env_options: Options added to ``env_options`` for evaluation episodes (TRL
            calls the rollout in eval mode for ``eval_dataset``).
        num_envs: Episodes live at once per call (their turns share one batched
            ``generate``).
        max_new_tokens: Tokens per agent turn.
        seed: Base of the sampling seeds; each episode's seed also depends on the trainer's
            step, the process and the prompt's position, so TRL's copies of one question
            sample differently and a rerun samples the same.
        frozen: The frozen generator (s3) or reader (R-Search) when ``env_options`` sets
            none (a name such as ``"gold-span"`` or ``"smollm2"``, or a LanguageModel).
        lm_options: Options of the :class:`~searchgym.lm.hf.TransformersLM` that wraps the
            trainer's model (``max_batch_size``).
    """

    def __init__(
        self,
        env_id: str,
        *,
        env_options: Mapping[str, Any] | None = None,
        eval_env_options: Mapping[str, Any] | None = None,
        num_envs: int = 8,
        max_new_tokens: int = 512,
        seed: int = 0,
        frozen: Any = None,
        lm_options: Mapping[str, Any] | None = None,
    ):
        self.env_id = full_env_id(env_id)
        for name, value in (("env_options", env_options), ("eval_env_options", eval_env_options), ("lm_options", lm_options)):
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"EnvRollout expects {name} to be a dict of options, got {type(value).__name__}.")
        for name, value in (("num_envs", num_envs), ("max_new_tokens", max_new_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"EnvRollout expects {name} to be a positive integer, got {value!r}.")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**31:
            raise ConfigError(f"EnvRollout expects seed to be an integer in [0, 2**31), got {seed!r}.")
        self.env_options = dict(env_options or {})
        self.eval_env_options = dict(eval_env_options or {})
        self.num_envs = num_envs
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.frozen = frozen
        self.lm_options = dict(lm_options or {})
        self._envs: dict[tuple[str, bool], list[Any]] = {}
        self._questions: dict[tuple[str, bool], dict[str, str]] = {}  # (split, evaluation) -> question -> example id
        self._lm: Any = None
        self._lm_model: Any = None
        self._lock = threading.Lock()
        #: The results of the last call, in prompt order (with their trajectories).
        self.last_results: list[EpisodeResult] = []
        self._said_zero_rewards = False

    # ------------------------------------------------------------------ data
    def make_env(self, split: str, *, evaluation: bool = False) -> Any:
        """A new env of ``split`` (evaluation adds ``eval_env_options``)."""
        import gymnasium as gym

        options = {**self.env_options, **(self.eval_env_options if evaluation else {}), "split": split}
        return gym.make(self.env_id, **with_frozen_models(self.env_id, options, frozen=self.frozen))

    def dataset(self, split: str = "train", *, limit: int | None = None, evaluation: bool = False) -> Any:
        """The questions of ``split`` as a ``datasets.Dataset`` with columns ``prompt``
        (the question) and ``example_id``: a ``train_dataset`` or ``eval_dataset`` for
        ``GRPOTrainer``. ``evaluation=True`` reads them with ``eval_env_options``.

        Questions whose text repeats an earlier one are left out (the rollout finds the
        episode from the prompt text alone)."""
        datasets = require("datasets", extra="trl", feature="searchgym.integrations.trl")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ConfigError(f"EnvRollout.dataset expects limit to be a positive integer or None, got {limit!r}.")
        envs = self._slots(split, evaluation, 1)
        rows: dict[str, str] = {}
        for example in search_env(envs[0]).examples:
            rows.setdefault(example.question, example.id)
            if limit is not None and len(rows) == limit:
                break
        with self._lock:
            self._questions.setdefault((split, evaluation), {}).update(rows)
        return datasets.Dataset.from_dict({"prompt": list(rows), "example_id": list(rows.values())})

    def _slots(self, split: str, evaluation: bool, count: int) -> list[Any]:
        key = (split, evaluation)
        with self._lock:
            envs = self._envs.setdefault(key, [])
            while len(envs) < count:
                envs.append(self.make_env(split, evaluation=evaluation))
            return envs[:count]

    # ------------------------------------------------------------------ rollout
    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt with ``trainer``'s model; TRL's rollout output."""
        trl = require("trl", extra="trl", feature="searchgym.integrations.trl")
        check_sampling(trainer.args)
        if getattr(trainer, "is_fsdp_enabled", False):
            raise ConfigError(
                "EnvRollout generates with the trainer's own model, which FSDP shards; train with DDP or DeepSpeed "
                "ZeRO (stage 3 gathers the weights for generation, as TRL's ds3_gather_for_generation says)."
            )
        training = bool(trainer.model.training)
        split_key, example_ids = self._locate(prompts, evaluation=not training)
        envs = self._slots(*split_key, min(self.num_envs, len(example_ids)))
        base, episode_seeds = self.seeds(
            int(trainer.state.global_step), int(trainer.accelerator.process_index), len(example_ids), training=training
        )
        tasks = [Task(example_id, seed=seed) for example_id, seed in zip(example_ids, episode_seeds)]
        args = trainer.args
        with trl.models.unwrap_model_for_generation(
            trainer.model_wrapped, trainer.accelerator, gather_deepspeed3_params=args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=args.gradient_checkpointing_kwargs,
        ) as model:
            lm = self.policy_lm(model, trainer.processing_class)
            agent = policy_agent(
                envs[0], lm, max_new_tokens=self.max_new_tokens, temperature=float(args.temperature),
                top_p=float(args.top_p), seed=base,
            )
            model.eval()
            try:
                results = run_episodes(envs, agent, tasks, keep_trajectories=True)
            finally:
                model.train(training)
        self.last_results = results
        note = zero_rewards_note(results, self.max_new_tokens) if training and not self._said_zero_rewards else None
        if note:
            self._said_zero_rewards = True
            print(note, file=sys.stderr, flush=True)
        return rollout_output(results, eos_id=_eos_id(trainer.processing_class))

    def seeds(self, step: int, process: int, count: int, *, training: bool) -> tuple[int, list[int]]:
        """The sampling seed of the agent and the reset seed of each of the ``count``
        episodes of one call, from ``seed``, the trainer's step, the process and (in the
        episode seeds) the prompt's position. An episode samples from a stream derived from
        both, so a subclass that returns another trainer's seeds replays its samples."""
        base = (self.seed * 1_000_003 + step * 10_007 + process * 101 + (0 if training else 7)) % 2**31
        return base, [(base * 31 + i) % 2**31 for i in range(count)]

    def _locate(self, prompts: Sequence[Any], *, evaluation: bool) -> tuple[tuple[str, bool], list[str]]:
        """The (split, evaluation) of the dataset that holds every prompt (eval datasets
        first in eval mode), and the prompts' example ids."""
        texts = [_question_text(p) for p in prompts]
        for key in sorted(self._questions, key=lambda k: (k[1] != evaluation, k)):
            questions = self._questions[key]
            if all(t in questions for t in texts):
                return key, [questions[t] for t in texts]
        unknown = next((p for p, t in zip(prompts, texts) if not any(t in q for q in self._questions.values())), None)
        if unknown is not None:
            raise ConfigError(
                f"EnvRollout expects the prompts of a dataset made by EnvRollout.dataset(split) (a question of the "
                f"env's split), got {repr(unknown)[:120]}. Build train_dataset and eval_dataset with rollout.dataset(split)."
            )
        raise ConfigError(
            f"EnvRollout got questions of more than one split in one batch ({len(prompts)} prompts); give GRPOTrainer "
            f"datasets made by rollout.dataset(split), one split each."
        )

    def policy_lm(self, model: Any, tokenizer: Any) -> Any:
        """A TransformersLM over the trainer's model (built once; it reads the live weights): the
        policy the rollout generates with, also usable for evaluations."""
        from searchgym.lm.hf import TransformersLM

        if self._lm is None or self._lm_model is not model:
            if hasattr(model, "get_base_model"):  # a peft model: generate with its adapters active
                base = model.get_base_model()
            else:
                base = model
            self._lm = TransformersLM(base, tokenizer, **self.lm_options)
            self._lm_model = model
        return self._lm


def bf16_supported() -> bool:
    """Whether this machine trains in bfloat16 mixed precision: a CUDA GPU that supports it
    (Ampere or newer). ``GRPOConfig`` turns ``bf16`` on by default, which fails on a CPU with
    "Your setup doesn't support bf16/gpu"; pass ``bf16=bf16_supported()``."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())


def resolve_bf16(choice: str) -> bool:
    """The ``bf16`` of the command line's ``--bf16 auto|on|off``: ``auto`` is
    :func:`bf16_supported`; ``on`` where it is not supported is a :class:`ConfigError`."""
    if choice not in ("auto", "on", "off"):
        raise ConfigError(f"--bf16 expects auto, on or off, got {choice!r}.")
    if choice == "auto":
        return bf16_supported()
    if choice == "on" and not bf16_supported():
        raise ConfigError(
            "--bf16 on expects a CUDA GPU with bfloat16 support (Ampere or newer); this machine has none. "
            "Leave --bf16 out (auto: bfloat16 where supported, float32 elsewhere) or pass --bf16 off."
        )
    return choice == "on"


def check_sampling(args: Any) -> None:
    """Raise :class:`ConfigError` for GRPOConfig options the rollout cannot sample with."""
    for name, neutral in _NEUTRAL_SAMPLING.items():
        value = getattr(args, name, neutral[0])
        if value not in neutral:
            raise ConfigError(
                f"EnvRollout samples with temperature and top_p only; GRPOConfig.{name}={value!r} would make TRL "
                f"score tokens drawn from another distribution. Leave {name} at {neutral[0]!r}."
            )
    if getattr(args, "mask_truncated_completions", False):
        raise ConfigError(
            "EnvRollout episodes end at a protocol's stop string (e.g. </answer>), not at end-of-sequence, so TRL's "
            "mask_truncated_completions=True would drop every episode. Set mask_truncated_completions=False; turns cut "
            "at max_new_tokens are the env's invalid turns."
        )
    if not float(args.temperature) > 0:
        raise ConfigError(f"EnvRollout expects GRPOConfig.temperature > 0 (GRPO needs sampled groups), got {args.temperature!r}.")


def zero_rewards_note(results: Sequence[EpisodeResult], max_new_tokens: int) -> str | None:
    """What :class:`EnvRollout` prints (once a run) for the first training batch whose
    episodes all earned the same reward: why TRL then logs a loss and grad_norm of 0 (and,
    when every episode hit the token cap, ``completions/clipped_ratio`` 1). None otherwise."""
    rewards = {float(r.reward) for r in results if r.reward is not None}
    if not results or len(rewards) != 1:
        return None
    capped = sum("length" in r.flags for r in results)
    cap = (
        f"; {capped} of {len(results)} episodes had a turn cut at max_new_tokens ({max_new_tokens}), which TRL counts in "
        "completions/clipped_ratio" if capped else ""
    )
    hint = (
        " A policy that never answers right earns 0 everywhere (a tiny or random model does): warm it up first "
        "(searchgym sft on the oracle's play)."
        if rewards == {0.0} else ""
    )
    return (
        f"EnvRollout: all {len(results)} episodes of this batch earned the same reward ({rewards.pop():.3f}){cap}. "
        "GRPO's advantages are then all 0, so TRL logs a loss and grad_norm of 0 and the batch teaches the "
        f"policy nothing (said once a run).{hint}"
    )


def rollout_output(results: Sequence[EpisodeResult], *, eos_id: int) -> dict[str, list[Any]]:
    """TRL's rollout dict of played episodes (see the module docstring)."""
    keys = ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "env_reward_components", "env_turn_rewards", "env_metrics")
    out: dict[str, list[Any]] = {k: [] for k in keys}
    for r in results:
        t = r.trajectory
        if getattr(t, "earlier", None):
            # TRL (1.16) takes one completion per prompt and generation, grouped num_generations at a time:
            # an episode whose context was rewritten is several records, which have no place there.
            raise ConfigError(
                "EnvRollout got an episode whose context was rewritten (an env with context='archive' or 'summarize'): "
                f"{len(t.earlier) + 1} token records, and TRL's rollout_func takes one completion per episode. Make the env "
                "with context='keep', or train it with searchgym train, which trains every record (docs/long-horizons.md)."
            )
        playable = t is not None and t.num_generated > 0 and r.outcome not in ("backend_error", "error")
        if playable:
            out["prompt_ids"].append(list(t.prompt_ids))
            out["completion_ids"].append(t.response_ids)
            out["logprobs"].append([0.0 if lp is None else float(lp) for lp in t.response_logprobs])
            out["env_mask"].append(t.loss_mask)
            out["env_reward"].append(float(r.reward))
        else:
            out["prompt_ids"].append(list(t.prompt_ids) if t is not None else [eos_id])
            out["completion_ids"].append([eos_id])
            out["logprobs"].append([0.0])
            out["env_mask"].append([0])
            out["env_reward"].append(None)
        out["env_reward_components"].append(dict(r.reward_components))
        out["env_turn_rewards"].append([float(x) for x in getattr(r, "turn_rewards", ())])
        out["env_metrics"].append({
            "em": r.em, "f1": r.f1, "cover_em": r.cover_em, "searches": r.num_searches, "turns": r.num_turns,
            "invalid_turns": r.num_invalid, "generated_tokens": r.generated_tokens, "outcome": r.outcome,
        })
    return out


def env_reward(completions: Sequence[Any], env_reward: Sequence[float | None] | None = None, **kwargs: Any) -> list[float | None]:
    """TRL reward function: the env's reward of each episode played by :class:`EnvRollout`.

    Logs the mean of each reward component (``env/<name>``) and of the episode metrics
    (``env/em``, ``env/f1``, ``env/searches``...) through TRL's ``log_metric``."""
    if env_reward is None:
        raise ConfigError(
            "env_reward expects the 'env_reward' field that EnvRollout returns; pass rollout_func=EnvRollout(...) "
            "to GRPOTrainer together with reward_funcs=env_reward."
        )
    if len(env_reward) != len(completions):
        raise ConfigError(f"env_reward expects one reward per completion, got {len(env_reward)} for {len(completions)}.")
    log_metric = kwargs.get("log_metric")
    if log_metric is not None:
        columns: dict[str, list[float]] = {}
        for components in kwargs.get("env_reward_components") or ():
            for name, value in components.items():
                columns.setdefault(f"env/{name}", []).append(float(value))
        for metrics in kwargs.get("env_metrics") or ():
            for name, value in metrics.items():
                if isinstance(value, (int, float)):
                    columns.setdefault(f"env/{name}", []).append(float(value))
        for name, values in columns.items():
            log_metric(name, sum(values) / len(values))
    return [None if r is None else float(r) for r in env_reward]


def _question_text(prompt: Any) -> str | None:
    """The question of a dataset prompt: the text, or a conversation's last message."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[-1], Mapping):
        content = prompt[-1].get("content")
        return content if isinstance(content, str) else None
    return None


def _eos_id(tokenizer: Any) -> int:
    for value in (getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)):
        if isinstance(value, int):
            return value
    raise ConfigError("EnvRollout expects a tokenizer with an eos_token_id or pad_token_id (TRL pads with it).")


def cli_disabled_options(opts: Any, parser: Any) -> list[str]:
    """Warnings about the command line's options that another option turns off: the
    evaluation's options while ``--eval-limit`` is 0, and an evaluation every
    ``--eval-steps`` that the run's ``--steps`` never reach."""
    notes = []
    if opts.eval_limit == 0:
        changed = [name for name in ("eval_split", "eval_env_options") if getattr(opts, name) != parser.get_default(name)
                   and not (name == "eval_env_options" and getattr(opts, name) == {})]
        if changed:
            flags = ", ".join("--" + name.replace("_", "-") for name in changed)
            notes.append(f"{flags} {'does' if len(changed) == 1 else 'do'} nothing: --eval-limit is 0 (no evaluation).")
    elif opts.eval_steps > opts.steps:
        notes.append(
            f"no evaluation runs, so --eval-limit {opts.eval_limit} does nothing: TRL evaluates every --eval-steps "
            f"({opts.eval_steps}) optimizer steps and the run has {opts.steps} (--steps); lower --eval-steps to evaluate."
        )
    return notes


def cli_parser() -> Any:
    """The argument parser of ``python -m searchgym.integrations.trl``."""
    import argparse

    from searchgym.training.cli import json_object

    parser = argparse.ArgumentParser(
        prog="python -m searchgym.integrations.trl",
        description="Train an LM agent on a searchgym env with TRL's GRPOTrainer (EnvRollout as its rollout_func, "
        "the env's reward as its reward). On several GPUs: accelerate launch --num_processes N -m searchgym.integrations.trl ...",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="the policy: a transformers folder (e.g. runs/sft/final) or a searchgym model name (smollm2)")
    parser.add_argument("--env-id", default="searchgym/SearchR1-v0", help="registered env id")
    parser.add_argument("--env-options", type=json_object, default="{}", help="gym.make options as JSON (corpus, retriever, reward, max_turns...)")
    parser.add_argument("--eval-env-options", type=json_object, default="{}", help="JSON options added for evaluation episodes")
    parser.add_argument("--train-split", default="train", help="split of the training questions")
    parser.add_argument("--eval-split", default="dev", help="split of the evaluation questions")
    parser.add_argument("--eval-limit", type=int, default=64, help="evaluation questions (0: no evaluation)")
    parser.add_argument("--eval-steps", type=int, default=50, help="optimizer steps between evaluations")
    parser.add_argument("--num-generations", type=int, default=8, help="samples per question (the GRPO group)")
    parser.add_argument("--batch-size", type=int, default=16, help="episodes per device per optimizer step (a multiple of --num-generations on one device)")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="tokens per agent turn")
    parser.add_argument("--num-envs", type=int, default=16, help="episodes live at once per device")
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps")
    parser.add_argument("--lr", type=float, default=1e-6, help="learning rate (constant)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (TRL scores with the same)")
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient against the initial model (TRL's k3 loss)")
    parser.add_argument("--lora-rank", type=int, default=0, help="LoRA rank (0: full fine-tuning)")
    parser.add_argument(
        "--bf16", nargs="?", const="on", default="auto", choices=("auto", "on", "off"),
        help="bfloat16 mixed precision: auto uses it on a GPU that supports it and float32 elsewhere (a CPU); "
        "--bf16 alone is 'on' and fails where it is not supported",
    )
    parser.add_argument("--config", type=json_object, default="{}", help="more GRPOConfig fields as JSON, e.g. '{\"gradient_checkpointing\": true}'")
    parser.add_argument("--out", default="runs/trl", help="output folder; the trained model goes to OUT/final")
    parser.add_argument("--seed", type=int, default=0, help="seed of TRL and of the rollout's sampling")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m searchgym.integrations.trl``: GRPO through TRL on a searchgym env
    (``accelerate launch -m searchgym.integrations.trl ...`` on several GPUs)."""
    from pathlib import Path

    parser = cli_parser()
    opts = parser.parse_args(argv)
    for name in ("num_generations", "batch_size", "max_new_tokens", "num_envs", "steps", "eval_steps"):
        if getattr(opts, name) < 1:
            parser.error(f"--{name.replace('_', '-')} expects a positive integer, got {getattr(opts, name)}")
    if opts.eval_limit < 0 or opts.lora_rank < 0:
        parser.error("--eval-limit and --lora-rank expect integers >= 0")
    for note in cli_disabled_options(opts, parser):
        print(f"warning: {note}", file=sys.stderr, flush=True)

    trl = require("trl", extra="trl", feature="searchgym.integrations.trl")
    from searchgym.error import SearchGymError
    from searchgym.training.trainer import load_policy

    try:
        bf16 = resolve_bf16(opts.bf16)
        rollout = EnvRollout(
            opts.env_id, env_options=opts.env_options, eval_env_options=opts.eval_env_options,
            num_envs=opts.num_envs, max_new_tokens=opts.max_new_tokens, seed=opts.seed,
        )
        train = rollout.dataset(opts.train_split)
        evaluation = rollout.dataset(opts.eval_split, limit=opts.eval_limit, evaluation=True) if opts.eval_limit else None
        model, tokenizer = load_policy(opts.model)
        config = trl.GRPOConfig(**{
            "output_dir": opts.out, "num_generations": opts.num_generations, "per_device_train_batch_size": opts.batch_size,
            "per_device_eval_batch_size": opts.batch_size, "num_generations_eval": opts.num_generations,
            "max_steps": opts.steps, "learning_rate": opts.lr, "lr_scheduler_type": "constant", "temperature": opts.temperature,
            "beta": opts.beta, "bf16": bf16, "seed": opts.seed, "logging_steps": 1, "save_steps": opts.eval_steps,
            "eval_strategy": "steps" if evaluation is not None else "no", "eval_steps": opts.eval_steps, "report_to": [],
            **opts.config,
        })
        peft_config = None
        if opts.lora_rank:
            peft = require("peft", extra="train", feature="LoRA")
            peft_config = peft.LoraConfig(r=opts.lora_rank, lora_alpha=2 * opts.lora_rank, target_modules="all-linear", task_type="CAUSAL_LM")
        trainer = trl.GRPOTrainer(
            model=model, processing_class=tokenizer, reward_funcs=env_reward, rollout_func=rollout, train_dataset=train,
            eval_dataset=evaluation, args=config, peft_config=peft_config,
        )
        trainer.train()
        final = Path(opts.out) / "final"
        if peft_config is not None:
            trainer.model = trainer.model.merge_and_unload()
        trainer.save_model(str(final))
        tokenizer.save_pretrained(str(final))
    except (SearchGymError, ValueError, TypeError) as e:
        print(f"python -m searchgym.integrations.trl: error: {e}", file=sys.stderr)
        raise SystemExit(2) from e
    print(f"wrote {final}")


if __name__ == "__main__":
    main()
