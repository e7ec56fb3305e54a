"""Every setting of an RL run in one dataclass, with the seed papers' settings as presets.

Each field's docstring is its ``searchgym train --help`` text. :func:`check_args` rejects
a bad configuration before any model or corpus is loaded.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from dataclasses import dataclass, field
from collections.abc import Collection, Sequence
from typing import Any

from searchgym.error import ConfigError, UnknownNameError, check_keywords
from searchgym.training.losses import AGGREGATIONS, KL_ESTIMATORS

#: PPO critics (``Args.critic``); see :mod:`searchgym.training.critic`.
CRITICS = ("separate", "shared-head")

#: Policy-gradient algorithms of :class:`~searchgym.training.trainer.Trainer`.
ALGORITHMS = ("ppo", "grpo", "reinforce++")
#: The Stable-Baselines3 algorithms ``searchgym train`` also takes (trained by :mod:`searchgym.sb3`).
SB3_ALGORITHMS = ("sb3-ppo", "sb3-dqn")
#: Credit assignments (``Args.credit``): the episode's reward on its last token, or each turn's on that turn's.
CREDITS = ("episode", "turn")
#: Rollout engines: the training model itself, or vLLM with the weights pushed after every update
#: (``vllm``: the offline engine, episodes played in rounds; ``vllm-async``: the async engine,
#: each episode's next turn sent when its own step ends).
ENGINES = ("transformers", "vllm", "vllm-async")


@dataclass
class Args:
    """Settings of a ``searchgym train`` run (see :data:`PRESETS` for the papers' values)."""

    # -- what to train on
    env_id: str = "searchgym/SearchR1-v0"
    """Environment id (the protocol and reward recipe come with it): a searchgym id, an id a module of --import registered,
    or Gymnasium's module:Env-v0 form."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Extra gym.make arguments, e.g. {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable", "max_turns": 4}."""
    eval_env_options: dict[str, Any] = field(default_factory=dict)
    """gym.make arguments of the evaluation envs only, over env_options (e.g. {"dataset": "dev.jsonl"})."""
    imports: list[str] = field(default_factory=list)
    """Modules imported before anything else is checked (--import MODULE): a user module that fills searchgym's
    registries (rewards.RECIPES, envs.protocols.PROTOCOLS, corpora.register_retriever) or registers its own env ids."""
    wrappers: list[str] = field(default_factory=list)
    """Env wrappers as module:attr, each called as wrapper(env) -> env, in order, on every env of the run (training and
    evaluation)."""
    retriever_per_env: bool = False
    """Build one retriever for each env instead of one shared by every env over the corpus (an engine that keeps
    per-episode state); the env's retriever must then be a name or module:attr."""
    train_split: str = "train"
    """Dataset split the policy is trained on."""
    eval_split: str = "dev"
    """Dataset split of the periodic evaluation."""
    train_limit: int | None = None
    """Train on the first N questions of the split only (all when None)."""
    reward: str | None = None
    """Reward recipe overriding the env's: any name of searchgym.rewards.RECIPES, or module:attr naming a recipe class or
    factory of your own."""
    stage2_reward: str | None = None
    """Curriculum: the reward recipe from step stage2_step on (R1-Searcher: r1_searcher_stage2)."""
    stage2_step: int | None = None
    """Curriculum: the step at which stage2_reward replaces the first reward."""
    frozen_model: str | None = None
    """Frozen model of the env's generator (s3), reader (R-Search) or LLM summarizer (RECON):
    a model name loaded once and never trained ("gold-span" is the LM-free stand-in)."""
    frozen_backend: str = "transformers"
    """Backend that loads frozen_model: transformers, vllm, or openai (a model served behind an
    OpenAI-compatible URL, given as frozen_options={"base_url": ...})."""
    frozen_options: dict[str, Any] = field(default_factory=dict)
    """Options of frozen_backend's constructor (e.g. base_url, api_key, device)."""
    judge_model: str | None = None
    """s3: the LLM judge GenAcc asks when the span check fails (s3's judge prompt, Fig. 13), a model name loaded
    once and never trained; None: the span check alone."""
    stage_sets: str | None = None
    """R1-Searcher: a folder written by `searchgym stage-sets`; the first reward trains on its stage1.jsonl
    (medium questions), stage2_reward on its stage2.jsonl (medium and difficult), as the paper's Table 1."""
    summarizer: str | None = None
    """RECON: the env's summarizer (e.g. "llm" uses frozen_model with RECON's prompt)."""

    # -- the policy
    model: str = "smollm2"
    """Policy model: a built-in name (smollm2, tiny-random), a local folder (e.g. an SFT run's final/) or a cached HF id."""
    chat_template: str | None = None
    """Chat template installed on the policy's tokenizer (saved with its checkpoints): hermes, hermes-think, llama3 or mistral
    (searchgym.lm.chat_templates). Needed to play an env with action_format "tools" when the model's own template writes
    no tools (SmolLM2's); the env then reads calls with the template's tool_parser unless env_options names one. None:
    the model's own."""
    lora_rank: int = 0
    """LoRA rank; 0 trains every weight (full fine-tuning)."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (scale = alpha / rank)."""
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Module names LoRA adapts."""
    device: str | None = None
    """cpu, cuda, cuda:1...; None picks CUDA when available."""

    # -- algorithm
    algorithm: str = "grpo"
    """ppo (GAE with a critic, see critic), grpo (group-normalized outcome), reinforce++ (whitened returns);
    sb3-ppo / sb3-dqn train a Stable-Baselines3 template policy instead (see the sb3 flags)."""
    n: int = 4
    """Responses sampled per question (a GRPO group; >= 2 for grpo)."""
    reinforce_baseline: str = "batch"
    """REINFORCE++ baseline: batch (whitening only) or group (the question's mean score first)."""
    credit: str = "episode"
    """Credit assignment: episode (the episode's reward on its last token, as the papers train) or turn (each turn's
    reward on that turn's last token, so a turn's tokens are credited with what it and the later turns earned: GAE over
    them for ppo, DeepSeekMath's process-supervision normalization for grpo, returns-to-go for reinforce++)."""
    questions_per_step: int = 4
    """Questions per rollout batch (the batch holds questions_per_step * n episodes)."""
    mini_batches: int = 1
    """Optimizer steps per PPO epoch (the rollout batch is split into this many mini-batches)."""
    micro_batch_size: int = 4
    """Sequences per forward/backward pass; gradients accumulate over a mini-batch."""
    ppo_epochs: int = 1
    """Passes over each rollout batch."""
    lr: float = 1e-6
    """Policy learning rate (AdamW). 0: the policy's weights never change: a no-update control, the same rollouts,
    losses, metrics and evaluations as a run that learns (benchmarks/learning_curve.py's control)."""
    critic: str = "separate"
    """PPO critic: separate (a value model copied from the policy's base, with its own optimizer; the value loss never
    reaches the policy) or shared-head (a linear head on the policy's hidden state; cheaper, the value loss trains the policy)."""
    value_lr: float = 1e-5
    """Learning rate of the PPO critic."""
    warmup_steps: int = 0
    """Linear learning-rate warmup of the policy, in optimizer steps."""
    warmup_ratio: float | None = None
    """Policy warmup as a fraction of the run's optimizer steps (total_steps * ppo_epochs * mini_batches), fixed when the
    run starts; overrides warmup_steps (None: use warmup_steps)."""
    value_warmup_steps: int = 0
    """Linear learning-rate warmup of the PPO critic, in optimizer steps."""
    value_warmup_ratio: float | None = None
    """Critic warmup as a fraction of the run's optimizer steps, fixed when the run starts; overrides value_warmup_steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm."""
    clip: float = 0.2
    """PPO/GRPO ratio clip (lower side)."""
    clip_high: float | None = None
    """Upper ratio clip (default: clip); larger is DAPO's clip-higher."""
    value_clip: float | None = 0.5
    """PPO value clip around the rollout's values (None: no clipping)."""
    value_coef: float = 0.5
    """Weight of the value loss (with critic=separate it scales the critic's loss only)."""
    gamma: float = 1.0
    """Discount over generated tokens (GAE, REINFORCE++)."""
    lam: float = 1.0
    """GAE lambda."""
    kl_coef: float = 0.0
    """KL(policy || initial policy) weight; 0 skips the reference model."""
    kl_estimator: str = "k3"
    """k1, k2 or k3 (low variance)."""
    kl_in_reward: bool = False
    """Subtract the KL from the token rewards (PPO / REINFORCE++ style) instead of adding it to the loss."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""
    loss_aggregation: str = "token-mean"
    """token-mean (every generated token of the batch weighs the same), seq-mean-token-sum, or seq-mean-token-mean
    (each sequence's tokens averaged, then the sequences: Search-R1's Eq. 1-2)."""

    # -- rollouts
    engine: str = "transformers"
    """Rollout engine: transformers (the training model itself), vllm (weights pushed after every update) or vllm-async
    (the same on vLLM's async engine, with episodes that do not wait for each other: run_episodes(mode="async"))."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Options of the vLLM engine (e.g. {"dtype": "float32", "max_model_len": 4096})."""
    num_envs: int = 16
    """Episodes live at once during rollouts and evaluation."""
    temperature: float = 1.0
    """Rollout sampling temperature (the losses use the same temperature)."""
    top_p: float = 1.0
    """Rollout nucleus sampling (keep 1.0 for exact PPO ratios)."""
    max_new_tokens: int = 256
    """Most tokens per agent turn (the hard length cap)."""
    length_penalty: float = 0.0
    """Reward minus this per generated token of the episode past length_penalty_from (0: none); against lengths that
    grow without end (metrics.csv's length_growing)."""
    length_penalty_from: int = 0
    """Generated tokens of an episode (every turn's) that length_penalty leaves free."""
    format_gate: bool = False
    """An episode with any malformed turn (num_invalid > 0) earns no positive reward: its reward becomes min(reward, 0);
    against format drift (metrics.csv's invalid_turns, format_drift)."""
    max_observation_tokens: int | None = None
    """Each observation is cut to this many tokens of the policy's tokenizer before the policy reads it (Search-R1's
    and s3's max_obs_length); None: whole."""
    max_context_tokens: int | None = None
    """An episode whose context (prompt, turns and observations) outgrows this many tokens ends as prompt_too_long
    before its next turn (Search-R1's and s3's max_prompt_length); None: the model's context window."""
    logprob_check_atol: float | None = None
    """Stop the run when rollout and trainer logprobs differ by more than this (None: only report the difference)."""

    # -- schedule, evaluation, output
    total_steps: int = 100
    """Rollout-update iterations."""
    eval_every: int = 0
    """Evaluate (through searchgym bench, at eval_temperature) every N steps and at the end; 0: never."""
    eval_limit: int | None = 64
    """Questions of eval_split per evaluation (None: all)."""
    eval_temperature: float = 0.0
    """Sampling temperature of the periodic evaluation (0: greedy; R-Search evaluates at 0.1)."""
    save_every: int = 10
    """Checkpoint every N steps (and at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (the newest)."""
    out: str = "runs/train"
    """Run folder: metrics.csv, curves.png, checkpoints/, eval/, final/."""
    seed: int = 0
    """Seed of the data order, the rollouts and torch."""
    resume: bool = True
    """Continue from the newest complete checkpoint in out (False: refuse a non-empty out)."""
    tensorboard: bool = True
    """Also write TensorBoard events to out/tensorboard when tensorboard is installed."""
    progress: bool = True
    """Progress bars: steps, the step's phase (rollout, update micro-batches, evaluate) and
    generated tokens (a plain line every SEARCHGYM_PROGRESS_SECONDS, default 5, when stderr
    is not a terminal)."""
    threads: int | None = None
    """torch CPU threads (None: torch's default)."""
    hooks: list[str] = field(default_factory=list)
    """Trainer hooks as module:attr (a class, a factory or an object with before_rollout, group_rewards or on_step;
    searchgym.training.hooks), run in order: schedules, curricula, group bonuses, logging."""

    def replace(self, **changes: Any) -> Args:
        return dataclasses.replace(self, **changes)


#: The papers' optimisation settings (lr, KL coefficient/estimator/placement, entropy, clip,
#: n, temperature, the PPO critic and warm-ups, the loss aggregation), where a paper is
#: silent its released training scripts', applied over :class:`Args`' defaults. Batch sizes,
#: steps and context lengths stay CPU-sized: :mod:`searchgym.training.paper_scale`
#: (``searchgym train --paper-scale``) holds each paper's training run. top_p stays 1.0 so PPO
#: ratios and the logprob check are exact: Search-R1's scripts/nq_hotpotqa/v0.2/train_ppo.sh:57
#: sets 1.0, its v0.2 GRPO and v0.1 scripts set none and sample at its verl's default 0.95
#: (verl/trainer/config/ppo_trainer.yaml:71). Entropy 0.001 is the default of Search-R1's
#: verl (ppo_trainer.yaml:35, which no script overrides) and RECON's App. B.4 value; s3 and
#: R-Search, which train in forks of Search-R1's code, take the same (their own configs not
#: read here). docs/papers.md gives each value's source, row by row.
#:
#: PPO (Search-R1, s3, RECON): a separate critic copied from the base model, critic lr 1e-5,
#: value clip 0.5, GAE with gamma = lambda = 1; warm-ups as fractions of the run (Search-R1's
#: v0.2 train_ppo.sh:43 and :61: actor 0.285, critic 0.015, its v0.1 scripts' 0.95 / 0.05
#: being ``--paper-scale v0.1``; s3's App. A.2: actor 0, critic 1%; RECON's App. B.4:
#: 0.285 / 0.015). Aggregation: Search-R1's Eq. 1 (PPO) and Eq. 2 (GRPO) divide each
#: sequence's sum by its generated tokens, then average the sequences (seq-mean-token-mean).
#: RECON's App. C writes its PPO objective with 1/|y| instead, |y| every token of the
#: response, retrieved ones included (the sum is over generated tokens only); RECON trains
#: in Search-R1's pipeline, and its preset takes Search-R1's Eq. 1 average, not App. C's.
#: s3's Eq. 2 sums the loss over a trajectory's tokens (seq-mean-token-sum; its released
#: trainer averages over every token of the batch, ``--loss-aggregation token-mean``).
#: R1-Searcher trains REINFORCE++ in OpenRLHF, whose policy loss averages each sequence's
#: tokens first; its baseline is ``reinforce_baseline`` (the question's mean, then batch
#: whitening: reinforce_baseline="group") in scripts/qwen_reinforce_plus_train.sh:60 and
#: llama_reinforce_plus_train_stage2.sh:61, where llama_reinforce_plus_train_stage1.sh:60
#: uses ``group_norm`` (GRPO's normalization), which the preset does not follow. R-Search
#: writes only its objective (Eq. 2, J = E[r] - beta KL) and is silent on the average; it
#: trains GRPO in Search-R1's verl fork with Search-R1's settings ("Following Search-R1",
#: §4.3), so it takes Search-R1's GRPO average (Eq. 2 there), which also keeps a long
#: evidence block from weighing more than a short answer. R-Search's warm-up ratio is 0.95
#: (§4.3) and it evaluates at temperature 0.1 (App. A.3).
PRESETS: dict[str, dict[str, Any]] = {
    "search-r1-ppo": {
        "env_id": "searchgym/SearchR1-v0", "algorithm": "ppo", "n": 1, "lr": 1e-6, "value_lr": 1e-5,
        "critic": "separate", "warmup_ratio": 0.285, "value_warmup_ratio": 0.015, "value_clip": 0.5,
        "kl_coef": 0.001, "kl_estimator": "k1", "kl_in_reward": True, "clip": 0.2, "gamma": 1.0, "lam": 1.0,
        "temperature": 1.0, "top_p": 1.0, "entropy_coef": 0.001, "max_new_tokens": 500,
        "loss_aggregation": "seq-mean-token-mean",
    },
    "search-r1-grpo": {
        "env_id": "searchgym/SearchR1-v0", "algorithm": "grpo", "n": 5, "lr": 1e-6, "warmup_ratio": 0.285,
        "kl_coef": 0.001, "kl_estimator": "k3", "clip": 0.2, "temperature": 1.0, "top_p": 1.0,
        "entropy_coef": 0.001, "max_new_tokens": 500, "loss_aggregation": "seq-mean-token-mean",
    },
    "r1-searcher": {
        "env_id": "searchgym/R1Searcher-v0", "algorithm": "reinforce++", "reinforce_baseline": "group",
        "n": 16, "lr": 2e-6, "kl_coef": 1e-4, "kl_estimator": "k1", "kl_in_reward": True, "temperature": 1.0, "top_p": 1.0,
        "reward": "r1_searcher_stage1", "stage2_reward": "r1_searcher_stage2", "stage2_step": 50,
        "max_new_tokens": 512, "gamma": 1.0, "loss_aggregation": "seq-mean-token-mean",
        # Step 50 has no source: the paper gives no step and its scripts train each stage as a
        # run of its own; a CPU-sized choice (--paper-scale: after one pass over stage 1's set).
    },
    "s3": {
        "env_id": "searchgym/S3-v0", "algorithm": "ppo", "n": 1, "lr": 1e-6, "value_lr": 1e-5,
        "critic": "separate", "warmup_ratio": 0.0, "value_warmup_ratio": 0.01, "value_clip": 0.5, "gamma": 1.0, "lam": 1.0,
        "kl_coef": 0.001, "kl_estimator": "k1", "kl_in_reward": True, "entropy_coef": 0.001, "temperature": 0.6,
        "top_p": 1.0, "max_new_tokens": 500, "loss_aggregation": "seq-mean-token-sum",
        # s3 trains only on questions naive RAG gets wrong, without yes/no golds (§3.2, §4.1), and
        # evaluates on every question.
        "env_options": {"question_filter": "s3"}, "eval_env_options": {"question_filter": None},
    },
    "r-search": {
        "env_id": "searchgym/RSearch-v0", "algorithm": "grpo", "n": 5, "lr": 1e-6, "warmup_ratio": 0.95,
        "kl_coef": 0.001, "kl_estimator": "k3", "entropy_coef": 0.001, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 500,
        "loss_aggregation": "seq-mean-token-mean",
        # Trained on top-3, evaluated on top-5 at temperature 0.1 (§4.3, App. A.3).
        "eval_env_options": {"top_k": 5}, "eval_temperature": 0.1,
    },
    "recon": {
        "env_id": "searchgym/RECON-v0", "algorithm": "ppo", "n": 1, "lr": 1e-6, "value_lr": 1e-5,
        "critic": "separate", "warmup_ratio": 0.285, "value_warmup_ratio": 0.015, "value_clip": 0.5, "gamma": 1.0, "lam": 1.0,
        "kl_coef": 0.001, "kl_estimator": "k1", "kl_in_reward": True, "entropy_coef": 0.001, "temperature": 1.0,
        "top_p": 1.0, "summarizer": "llm", "frozen_model": "smollm2",
        "max_new_tokens": 500, "loss_aggregation": "seq-mean-token-mean",
    },
    # The methods after the papers (searchgym/methods/); each setting's source is in docs/methods.md.
    # StepSearch's "StePPO" (train.sh): PPO, GAE gamma = lam = 1, KL 0.001 in the reward, actor and
    # critic lr 5e-7, warm-ups 0.285 / 0.05, n_agent 1, temperature 1, max_response_length 800;
    # each search's step reward on its own turn (--credit turn). Clip 0.2, entropy 0.001, value clip 0.5
    # from its own verl/trainer/config/ppo_trainer.yaml:34-35,126; its policy loss is a masked mean over
    # the batch's tokens (verl/trainer/ppo/core_algos.py:192): token-mean. The yaml samples at top_p
    # 0.95 (:71); kept at 1.0 for exact PPO ratios (--top-p 0.95 for the released sampling).
    "stepsearch": {
        "env_id": "searchgym/StepSearch-v0", "algorithm": "ppo", "n": 1, "lr": 5e-7, "value_lr": 5e-7,
        "critic": "separate", "warmup_ratio": 0.285, "value_warmup_ratio": 0.05, "value_clip": 0.5,
        "kl_coef": 0.001, "kl_estimator": "k1", "kl_in_reward": True, "clip": 0.2, "gamma": 1.0, "lam": 1.0,
        "temperature": 1.0, "top_p": 1.0, "entropy_coef": 0.001, "max_new_tokens": 800, "credit": "turn",
        "loss_aggregation": "token-mean",
    },
    # AutoRefine's cmd/train.sh: GRPO, 5 outputs a question, lr 1e-6, KL loss 0.001 low_var_kl (k3),
    # temperature 1, 512 response tokens a turn, 300 steps; clip 0.2 and entropy 0.001 from its
    # verl/trainer/config/grpo_trainer.yaml:34-35 (main_ppo.py:185 loads it); a token-mean policy loss
    # (core_algos.py:192); the yaml's top_p 0.95 (:74) kept at 1.0 for exact PPO ratios.
    "autorefine": {
        "env_id": "searchgym/AutoRefine-v0", "algorithm": "grpo", "n": 5, "lr": 1e-6, "kl_coef": 0.001,
        "kl_estimator": "k3", "kl_in_reward": False, "clip": 0.2, "entropy_coef": 0.001, "temperature": 1.0,
        "top_p": 1.0, "max_new_tokens": 512, "credit": "episode", "loss_aggregation": "token-mean",
        # evaluated as released: the answer metric alone, no refine bonus (AR main_ppo.py:272)
        "eval_env_options": {"reward": "searchgym.methods.autorefine:AutoRefineValidation"},
    },
    # ZeroSearch's train_grpo.sh: GRPO, 5 rollouts, lr 1e-6 with warmup ratio 0.95, KL loss 0.001
    # (low_var_kl = k3), temperature 1, 500 new tokens; clip 0.2 and entropy 0.001 from its
    # ppo_trainer.yaml:34-35; a token-mean policy loss (its core_algos.py:202, masked_mean over the
    # batch's tokens); the noise curriculum is a trainer hook
    # (README: 0 -> 0.5 over the run); evaluation searches the real corpus (ray_trainer.py:534-536).
    "zerosearch": {
        "env_id": "searchgym/ZeroSearch-v0", "algorithm": "grpo", "n": 5, "lr": 1e-6, "warmup_ratio": 0.95,
        "kl_coef": 0.001, "kl_estimator": "k3", "clip": 0.2, "entropy_coef": 0.001, "temperature": 1.0, "top_p": 1.0,
        "max_new_tokens": 500, "loss_aggregation": "token-mean",
        "hooks": ["searchgym.methods.zerosearch:ZeroSearchCurriculum"],
        "eval_env_options": {"retriever": "bm25", "retriever_options": {}},
    },
    # ParallelSearch: PPO/GAE as Search-R1's (train_parallelsearch.sh:41-71; gamma, lam, clip and
    # entropy from its verl/trainer/config/ppo_trainer.yaml); its paper's loss could not be read.
    "parallelsearch": {
        "env_id": "searchgym/ParallelSearch-v0", "algorithm": "ppo", "n": 1, "lr": 1e-6, "value_lr": 1e-5,
        "critic": "separate", "warmup_ratio": 0.285, "value_warmup_ratio": 0.015, "value_clip": 0.5,
        "kl_coef": 0.001, "kl_estimator": "k1", "kl_in_reward": True, "clip": 0.2, "gamma": 1.0, "lam": 1.0,
        "temperature": 1.0, "top_p": 1.0, "entropy_coef": 0.001, "max_new_tokens": 500,
        "loss_aggregation": "token-mean",  # its verl fork's masked mean over the batch's tokens (core_algos.py:192)
    },
}


#: Settings of a preset that depend on the policy model's family: (family, settings) pairs,
#: the first family whose name occurs in the model name (case-insensitive) applies, over the
#: preset; a field given explicitly wins over both. R1-Searcher trains Llama-3.1-8B-Instruct
#: with KL 1e-4 (``scripts/llama_reinforce_plus_train_stage{1,2}.sh``) and Qwen-2.5-7B-Base
#: with no KL (``scripts/qwen_reinforce_plus_train.sh``); any other model keeps the preset's
#: value, the Llama one.
MODEL_SETTINGS: dict[str, tuple[tuple[str, dict[str, Any]], ...]] = {
    "r1-searcher": (("qwen", {"kl_coef": 0.0}), ("llama", {"kl_coef": 1e-4})),
}


def model_settings(name: str, model: str) -> dict[str, Any]:
    """The settings :data:`MODEL_SETTINGS` gives preset ``name`` for the policy ``model`` ({} if none)."""
    for family, settings in MODEL_SETTINGS.get(name, ()):
        if family in str(model).lower():
            return dict(settings)
    return {}


def preset(name: str, **overrides: Any) -> Args:
    """:class:`Args` with the preset ``name`` applied, then its settings for the policy model's
    family (:data:`MODEL_SETTINGS`: R1-Searcher's KL), then ``overrides`` (``env_options`` and
    ``eval_env_options`` are merged key by key: ``{"question_filter": None}`` drops s3's filter)."""
    if name not in PRESETS:
        raise UnknownNameError("training preset", name, PRESETS)
    check_keywords(f"preset({name!r})", overrides, (f.name for f in dataclasses.fields(Args)))
    model = overrides.get("model", PRESETS[name].get("model", Args.model))
    settings = {**PRESETS[name], **model_settings(name, model), **overrides}
    for key in ("env_options", "eval_env_options"):  # merged key by key: --env-options adds to the preset's
        if isinstance(PRESETS[name].get(key), dict) and isinstance(overrides.get(key), dict):
            settings[key] = {**PRESETS[name][key], **overrides[key]}
    return Args(**settings)


@functools.cache
def field_docs(cls: type = Args) -> dict[str, str]:
    """The docstring under each field of a dataclass, by field name (for ``--help``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _positive(name: str, value: Any, *, allow_none: bool = False, zero: bool = False) -> None:
    if value is None and allow_none:
        return
    low = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "a non-negative" if zero else "a positive"
        raise ConfigError(f"Args.{name} expects {kind} integer{' or None' if allow_none else ''}, got {value!r}.")


def _flag_values(args: Any, names: Sequence[str]) -> str:
    import json

    def value(v: Any) -> str:
        return json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else str(v)

    return ", ".join(f"--{name.replace('_', '-')} {value(getattr(args, name))}" for name in names)


def disabled_notes(args: Any, rules: Sequence[tuple[bool, Sequence[str], str]], given: Collection[str] | None = None) -> list[str]:
    """One warning line per rule ``(disabled, fields, why)`` whose ``disabled`` holds and
    whose ``fields`` include one that was set: named in ``given`` (the flags typed on a
    command line) or, when ``given`` is None, holding other than its default
    (``type(args)()``). Such an option does nothing; the line says which option turns it off."""
    defaults = type(args)()
    notes = []
    for disabled, names, why in rules:
        changed = [n for n in names if (n in given if given is not None else getattr(args, n) != getattr(defaults, n))]
        if disabled and changed:
            does = "does" if len(changed) == 1 else "do"
            notes.append(f"{_flag_values(args, changed)} {does} nothing: {why}.")
    return notes


def disabled_options(args: Args, given: Collection[str] | None = None) -> list[str]:
    """Warnings about the options of ``args`` that another option turns off (e.g.
    ``--eval-limit`` while ``--eval-every`` is 0: no evaluation runs), for the options named in
    ``given`` (None: those not at their default; see :func:`disabled_notes`). The trainer and
    ``searchgym train`` print them before a run starts."""
    a = args
    return disabled_notes(a, (
        (a.eval_every == 0, ("eval_limit", "eval_split", "eval_temperature", "eval_env_options"),
         "no evaluation runs while --eval-every is 0 (set --eval-every N to evaluate every N steps and at the end)"),
        (a.algorithm != "ppo", ("critic", "value_lr", "value_clip", "value_coef", "value_warmup_steps", "value_warmup_ratio", "lam"),
         f"--algorithm {a.algorithm} has no critic and no GAE (PPO's)"),
        (a.algorithm != "reinforce++", ("reinforce_baseline",), f"--algorithm {a.algorithm} has no REINFORCE++ baseline"),
        (a.algorithm == "grpo", ("gamma",), "GRPO's advantage is the group-normalized outcome, with no discount"),
        (a.kl_coef == 0, ("kl_estimator", "kl_in_reward"), "--kl-coef is 0 (no KL term)"),
        (a.length_penalty == 0, ("length_penalty_from",), "--length-penalty is 0 (no length penalty)"),
        (a.lora_rank == 0, ("lora_alpha", "lora_targets"), "--lora-rank is 0 (no LoRA: every weight trains)"),
        (a.engine == "transformers", ("engine_options",), f"--engine is {a.engine} (no vLLM engine runs)"),
        (a.warmup_ratio is not None, ("warmup_steps",), "--warmup-ratio sets the warmup instead"),
        (a.value_warmup_ratio is not None, ("value_warmup_steps",), "--value-warmup-ratio sets the critic's warmup instead"),
    ), given)


def check_user_pieces(args: Args) -> None:
    """Import ``args.imports`` first, then resolve every piece a user may name (env id, reward
    recipes, protocol, retriever, wrappers): a bad path, a failing import or an unknown name
    is refused by name, before any model loads and before ``args.json`` is written."""
    from searchgym.corpora.retrievers import check_retriever
    from searchgym.envs.protocols import protocol_source
    from searchgym.envs.registration import full_env_id
    from searchgym.plugins import check_imports, check_wrappers
    from searchgym.rewards.recipes import recipe_source

    check_imports(args.imports, owner="Args.imports")
    full_env_id(args.env_id)
    for name in ("reward", "stage2_reward"):
        if getattr(args, name) is not None:
            recipe_source(getattr(args, name))
    for options in (args.env_options, args.eval_env_options):
        if not isinstance(options, dict):
            continue  # check_args reports it
        if options.get("reward") is not None:
            recipe_source(options["reward"])
        if options.get("protocol") is not None:
            protocol_source(options["protocol"])
        check_retriever(options.get("retriever"))
    check_wrappers(args.wrappers, owner="Args.wrappers")
    if not isinstance(args.retriever_per_env, bool):
        raise ConfigError(f"Args.retriever_per_env expects True or False, got {args.retriever_per_env!r}.")


def check_args(args: Args) -> None:
    """Reject a bad configuration with a message that says how to fix it (no model is loaded)."""
    from searchgym.rewards.recipes import RECIPES

    if not isinstance(args, Args):
        raise ConfigError(f"Expected searchgym.training.Args, got {type(args).__name__}.")
    check_user_pieces(args)
    if args.algorithm not in ALGORITHMS:
        if args.algorithm in SB3_ALGORITHMS:
            raise ConfigError(f"Args configures language-model training; train {args.algorithm} with searchgym.sb3.train_sb3(SB3Args(...)).")
        raise UnknownNameError("algorithm", args.algorithm, ALGORITHMS + SB3_ALGORITHMS)
    if args.engine not in ENGINES:
        raise UnknownNameError("rollout engine", args.engine, ENGINES)
    if args.kl_estimator not in KL_ESTIMATORS:
        raise UnknownNameError("KL estimator", args.kl_estimator, KL_ESTIMATORS)
    if args.loss_aggregation not in AGGREGATIONS:
        raise UnknownNameError("loss aggregation", args.loss_aggregation, AGGREGATIONS)
    if args.critic not in CRITICS:
        raise UnknownNameError("critic", args.critic, CRITICS)
    if args.reinforce_baseline not in ("batch", "group"):
        raise UnknownNameError("REINFORCE++ baseline", args.reinforce_baseline, ("batch", "group"))
    if args.credit not in CREDITS:
        raise UnknownNameError("credit assignment", args.credit, CREDITS)
    if args.judge_model is not None:
        from searchgym.envs.registration import env_spec

        stage_rewards = [r for r in (args.reward or env_spec(args.env_id).get("reward"), args.stage2_reward) if r is not None]
        unjudged = [r for r in stage_rewards if r in RECIPES and "judge" not in RECIPES[r].needs | RECIPES[r].optional]
        if unjudged:
            raise ConfigError(
                f"Args.judge_model ({args.judge_model!r}) is the LLM judge of s3's GenAcc, but the reward {unjudged[0]!r} asks "
                "no judge; drop judge_model or train an s3 env (searchgym/S3-v0, reward s3_gbr or s3_gen_acc)."
            )
    if args.stage_sets is not None:
        from searchgym.training.stage_sets import check_stage_sets

        if args.stage2_step is None:
            raise ConfigError(
                f"Args.stage_sets ({args.stage_sets!r}) holds the questions of two curriculum stages; set stage2_step and "
                "stage2_reward too (the r1-searcher preset does), or drop stage_sets."
            )
        check_stage_sets(args.stage_sets)
    if (args.stage2_reward is None) != (args.stage2_step is None):
        raise ConfigError(
            "Args.stage2_reward and Args.stage2_step go together (the curriculum switches to stage2_reward at "
            f"stage2_step); got stage2_reward={args.stage2_reward!r}, stage2_step={args.stage2_step!r}."
        )
    for name in ("n", "questions_per_step", "mini_batches", "micro_batch_size", "ppo_epochs", "num_envs", "max_new_tokens", "total_steps", "save_every", "keep_checkpoints"):
        _positive(name, getattr(args, name))
    for name in ("eval_every", "warmup_steps", "value_warmup_steps", "lora_rank", "length_penalty_from"):
        _positive(name, getattr(args, name), zero=True)
    for name in ("train_limit", "eval_limit", "stage2_step", "threads", "max_observation_tokens", "max_context_tokens"):
        _positive(name, getattr(args, name), allow_none=True)
    if args.algorithm == "grpo" and args.n < 2:
        raise ConfigError(f"GRPO normalizes rewards within a group of answers to one question and needs n >= 2, got n={args.n}.")
    if args.algorithm == "grpo" and args.kl_in_reward:
        raise ConfigError("GRPO adds its KL term to the loss; kl_in_reward applies to ppo and reinforce++ only.")
    if args.summarizer == "llm" and args.frozen_model in (None, "gold-span"):
        raise ConfigError("summarizer='llm' needs a frozen model to summarize with; set frozen_model (e.g. 'smollm2').")
    if args.algorithm == "reinforce++" and args.reinforce_baseline == "group" and args.n < 2:
        raise ConfigError(f"REINFORCE++ with a group baseline needs n >= 2 samples per question, got n={args.n}; use reinforce_baseline='batch'.")
    batch = args.questions_per_step * args.n
    if args.mini_batches > batch:
        raise ConfigError(f"Args.mini_batches ({args.mini_batches}) cannot exceed the rollout batch ({batch} = questions_per_step * n).")
    if args.temperature < 0 or not 0 < args.top_p <= 1:
        raise ConfigError(f"Args expects temperature >= 0 and 0 < top_p <= 1, got temperature={args.temperature}, top_p={args.top_p}.")
    if isinstance(args.eval_temperature, bool) or not isinstance(args.eval_temperature, (int, float)) or args.eval_temperature < 0:
        raise ConfigError(f"Args.eval_temperature expects a number >= 0 (0: greedy), got {args.eval_temperature!r}.")
    if args.temperature == 0 and args.algorithm in ("grpo", "reinforce++") and args.n > 1:
        raise ConfigError("Greedy rollouts (temperature 0) give n identical answers per question, so group advantages are all 0; use temperature > 0.")
    if not isinstance(args.lr, (int, float)) or isinstance(args.lr, bool) or not args.lr >= 0:
        raise ConfigError(f"Args.lr expects a number >= 0 (0: a no-update control), got {args.lr!r}.")
    for name in ("value_lr", "max_grad_norm", "clip"):
        value = getattr(args, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise ConfigError(f"Args.{name} expects a positive number, got {value!r}.")
    for name in ("kl_coef", "entropy_coef", "value_coef", "weight_decay", "length_penalty"):
        value = getattr(args, name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"Args.{name} expects a non-negative number, got {value!r}.")
    for name in ("warmup_ratio", "value_warmup_ratio"):
        value = getattr(args, name)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1):
            raise ConfigError(f"Args.{name} expects a fraction of the run's optimizer steps in [0, 1) or None, got {value!r}.")
    if not isinstance(args.format_gate, bool):
        raise ConfigError(f"Args.format_gate expects True or False, got {args.format_gate!r}.")
    if not 0 <= args.gamma <= 1 or not 0 <= args.lam <= 1:
        raise ConfigError(f"Args expects gamma and lam in [0, 1], got gamma={args.gamma}, lam={args.lam}.")
    if args.lora_rank and not args.lora_targets:
        raise ConfigError("Args.lora_targets must name at least one module when lora_rank > 0.")
    from searchgym.lm.registry import BACKENDS

    if args.frozen_backend not in BACKENDS:
        raise UnknownNameError("frozen_backend", args.frozen_backend, BACKENDS)
    if args.chat_template is not None:
        from searchgym.lm.chat_templates import template_by_name

        template_by_name(args.chat_template)
    for name in ("env_options", "eval_env_options", "engine_options", "frozen_options"):
        if not isinstance(getattr(args, name), dict):
            raise ConfigError(f"Args.{name} expects a dict, got {type(getattr(args, name)).__name__}.")
    from searchgym.training.hooks import check_hook_specs

    check_hook_specs(args.hooks)  # imports each hook's module: a bad one is refused before any model loads
