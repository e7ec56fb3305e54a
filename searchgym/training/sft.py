"""Supervised warm start on oracle trajectories (``searchgym sft``).

The synthwiki oracle (or another LM-free teacher, ``SFTArgs.teacher``) plays the env's
protocol; a :class:`TeacherAgent` records its
episodes exactly as an :class:`~searchgym.agents.lm_agents.LMAgent` would have seen them:
the prompt through the model's chat template, the oracle's turns tokenized as if the
model had generated them (with the end-of-sequence id after a turn that ends without a
stop string), and the tokenized observations. Training minimizes the cross-entropy of the
turn tokens only (the same ``loss_mask`` as RL), so retrieved documents are never
learned. :func:`scratch_model` builds a small random Llama with a tokenizer trained on the
env's corpus, for learning from nothing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.agents.lm_agents import LMAgent
from searchgym.agents.tokens import turn_text
from searchgym.envs.access import search_env
from searchgym.error import ConfigError, TrainingError, TrainingStopped, UnknownNameError, reports_missing_extras
from searchgym.lm.base import Generation
from searchgym.lm.scripted import ScriptedLM
from searchgym.plugins import without_secrets
from searchgym.progress import Progress


class TeacherAgent(LMAgent):
    """Plays ``teacher``'s actions while keeping an LM agent's token record.

    ``tokenizer`` is the student's: the recorded trajectories are what the student would
    have read and written. In tool play the teacher's turns are assistant messages: each
    is written as the student's chat template shows it (its text, its calls, the end of
    turn), and that text is what the student learns to sample and what the env parses.
    """

    name = "teacher"

    def __init__(self, teacher: Any, tokenizer: Any, protocol: Any, *, chat: bool | None = None, chat_template: str | None = None):
        self._script = ScriptedLM([""], tokenizer)
        super().__init__(self._script, protocol, max_new_tokens=100_000, chat=chat, chat_template=chat_template)
        self.teacher = teacher

    def act_with_generations(self, observations: Sequence[str], infos: Sequence[Any]) -> tuple[list[str], list[Generation | None]]:
        actions = self.teacher.act(observations, infos)
        texts = [self._written(action, info) for action, info in zip(actions, infos)]
        self._script._responses = tuple(texts) or ("",)
        self._script._next = 0
        return super().act_with_generations(observations, infos)

    def _written(self, action: Any, info: Any) -> str:
        if "tools" not in info:
            return action
        if isinstance(action, str):  # a teacher that writes raw text: the student's turn is that text, ended
            return action + (self.end_of_turn or "")
        return turn_text(
            self.lm.tokenizer, info["messages"], info["tools"], action, end_of_turn=self.end_of_turn, template=self._template_source(),
        )


def oracle_trajectories(env_id: str, tokenizer: Any, *, env_options: dict[str, Any] | None = None, split: str = "train", limit: int | None = None, num_envs: int = 8, progress: bool = False, teacher: str = "oracle", teacher_options: dict[str, Any] | None = None, episodes_per_question: int = 1) -> list[Any]:
    """Token trajectories of ``teacher`` (the synthwiki oracle by default; any LM-free agent
    name :func:`~searchgym.agents.make_agent` takes) on ``split``, ``episodes_per_question``
    episodes a question (episode seeds 0, 1, ...); episodes it did not solve are dropped. In an
    env played through tool calls (``env_options`` with ``action_format="tools"``) the teacher's
    turns are tool calls written by ``tokenizer``'s chat template."""
    import gymnasium as gym

    from searchgym.agents.driver import Task, run_episodes
    from searchgym.agents.registry import make_agent

    envs = [gym.make(env_id, split=split, **(env_options or {})) for _ in range(num_envs)]
    check_teacher(teacher, envs[0], teacher_options)
    examples = search_env(envs[0]).examples[:limit]
    agent = TeacherAgent(make_agent(teacher, envs[0], **(teacher_options or {})), tokenizer, search_env(envs[0]).protocol)
    agent.check_env(envs[0])
    tasks = [Task(ex.id, seed) for ex in examples for seed in range(episodes_per_question)]
    results = run_episodes(envs, agent, tasks, keep_trajectories=True, progress=progress, desc=f"{teacher} episodes")
    kept = [r.trajectory for r in results if r.em == 1.0 or r.gen_acc == 1.0]
    if not kept:
        raise ConfigError(
            f"The teacher {teacher!r} solved none of {len(results)} episodes of {env_id} (split {split!r}); SFT keeps "
            "the solved ones. The oracle needs a synthwiki dataset (it reads the solution from synthwiki's metadata)."
        )
    return kept


def check_teacher(teacher: str, env: Any, options: dict[str, Any] | None = None) -> None:
    """Refuse a teacher that names no agent or needs a language model (``env``: an env or an env id)."""
    from searchgym.agents.registry import check_agent, needs_lm

    check_agent(teacher)
    if needs_lm(teacher, env, options):
        raise ConfigError(
            f"The SFT teacher {teacher!r} needs a language model; a teacher plays without one (oracle, random, or your "
            "own LM-free agent: a registered name or module:factory)."
        )


@dataclass
class SFTArgs:
    """Settings of a ``searchgym sft`` run."""

    env_id: str = "searchgym/SearchR1-v0"
    """Environment whose protocol the oracle plays (needs a synthwiki dataset)."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Extra gym.make arguments."""
    eval_env_options: dict[str, Any] = field(default_factory=dict)
    """gym.make arguments of the evaluation envs only, over env_options."""
    imports: list[str] = field(default_factory=list)
    """Modules imported before anything else is checked (--import MODULE): a user module that fills searchgym's
    registries (reward recipes, protocols, register_retriever) or registers its own env ids."""
    split: str = "train"
    """Split the teacher plays."""
    teacher: str = "oracle"
    """Agent whose solved episodes the student learns from: "oracle" (reads synthwiki's solution paths), or any
    LM-free agent `searchgym bench --agents` takes (a registered name, an entry point, module:factory; --imports
    loads a module that registers one), e.g. a weaker scripted teacher that RL should then improve on."""
    teacher_options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the teacher's factory (make_agent's options)."""
    episodes_per_question: int = 1
    """Episodes the teacher plays a question (episode seeds 0, 1, ...): a teacher that decides at random then shows
    each question's choices, so the student learns their odds rather than one choice a question."""
    limit: int | None = None
    """Use the first N questions only."""
    model: str = "scratch"
    """Student: "scratch" (a new small Llama with a tokenizer trained on the env's corpus), a built-in name or a folder."""
    chat_template: str | None = None
    """Chat template installed on the student's tokenizer (saved with final/): hermes, hermes-think, llama3 or mistral
    (searchgym.lm.chat_templates). With env_options {"action_format": "tools"} the oracle's tool calls are written as
    this template shows them, and the env reads them with its tool_parser unless env_options names one. None: the
    model's own (SmolLM2's and the scratch model's write no tools)."""
    scratch_size: str = "small"
    """Size of a scratch model: tiny (hidden 64, 2 layers), small (hidden 128, 4 layers) or base (hidden 256, 6 layers)."""
    scratch_vocab: int = 4096
    """Most tokens of a scratch model's byte-level BPE tokenizer, trained on the env's corpus. A
    larger one (16384 on a 2,000-passage synthwiki: about one token a word) gives each name a
    token or two instead of four sub-word pieces, and grows the embeddings; measured there, it made
    a worse SFT start (docs/training.md, "Why the oracle's start does not learn")."""
    pretrain_epochs: int = 0
    """Before SFT, passes of next-token prediction over the env's corpus passages (packed
    into pretrain_block-token blocks): a scratch model first learns the language of the
    corpus and to copy names (what a pretrained LM brings). 0: no pretraining."""
    pretrain_block: int = 256
    """Tokens per pretraining block."""
    epochs: int = 3
    """Passes over the oracle trajectories."""
    batch_size: int = 8
    """Trajectories per optimizer step."""
    micro_batch_size: int = 4
    """Trajectories per forward/backward pass."""
    lr: float = 1e-3
    """Peak learning rate (AdamW, linear warmup then cosine decay)."""
    warmup_steps: int = 20
    """Warmup optimizer steps."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm."""
    eval_every: int = 0
    """Every N optimizer steps (and at the end) play eval_limit questions of eval_split greedily; 0: only at the end."""
    eval_split: str = "dev"
    """Split of the evaluation."""
    eval_limit: int = 32
    """Questions per evaluation; 0: no evaluation (the caller evaluates the saved model)."""
    max_new_tokens: int = 64
    """Most tokens per turn in evaluations."""
    num_envs: int = 16
    """Episodes live at once (oracle recording and evaluation)."""
    out: str = "runs/sft"
    """Run folder: metrics.csv, curves.png, final/ (the trained model and tokenizer). A run
    stopped by Ctrl-C or SIGTERM leaves final/ (the model so far) and checkpoint/; the same
    command with the same settings continues it."""
    seed: int = 0
    """Seed of the model initialisation and the data order."""
    progress: bool = True
    """Progress bars (a plain line every SEARCHGYM_PROGRESS_SECONDS, default 5, when stderr
    is not a terminal)."""
    threads: int | None = None
    """torch CPU threads (None: torch's default, lowered to the cores the process gets
    while another process holds some, as generation does; see searchgym.lm.threads)."""


#: Scratch model sizes: (hidden size, layers, attention heads). Head size 64 (vLLM's CPU attention needs >= 32).
SCRATCH_SIZES = {"tiny": (64, 2, 1), "small": (128, 4, 2), "base": (256, 6, 4)}


def scratch_model(env: Any, *, size: str = "small", vocab_size: int = 4096, context: int = 2048, seed: int = 0) -> tuple[Any, Any]:
    """A random Llama and a byte-level BPE tokenizer trained on ``env``'s corpus, questions
    and prompt (protocol tags are single tokens; same chat template as the tiny test model)."""
    import tokenizers
    import torch
    import transformers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from searchgym.lm.testing import CHAT_TEMPLATE, SPECIAL_TOKENS, TAG_TOKENS

    if size not in SCRATCH_SIZES:
        raise UnknownNameError("scratch model size", size, SCRATCH_SIZES)
    inner = search_env(env)
    observation, info = env.reset(seed=0)
    texts = [observation, *(m["content"] for m in info.get("prompt_messages", []))]
    texts += [p.contents for p in inner.corpus]
    texts += [f"{ex.question} {' '.join(ex.answers)}" for ex in inner.examples]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    tags = sorted(set(TAG_TOKENS) | set(re.findall(r"</?[a-z_]+>", " ".join(texts[:3]))) | set(inner.protocol.stop_strings))
    tok.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False) for t in tags])
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<pad>", clean_up_tokenization_spaces=False)
    tokenizer.chat_template = CHAT_TEMPLATE
    hidden, layers, heads = SCRATCH_SIZES[size]
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=context, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    return model, tokenizer


def cosine_schedule(warmup: int, total: int):
    import math

    def f(i: int) -> float:
        if i < warmup:
            return (i + 1) / warmup
        progress = (i - warmup) / max(1, total - warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return f


def sft_disabled_options(args: SFTArgs) -> list[str]:
    """Warnings about the options of ``args`` (those not at their default) that another option
    turns off, e.g. ``--eval-every`` while ``--eval-limit`` is 0; :func:`sft` prints them first."""
    from searchgym.training.args import disabled_notes

    return disabled_notes(args, (
        (args.eval_limit == 0, ("eval_every", "eval_split", "eval_env_options", "max_new_tokens"), "--eval-limit is 0 (no evaluation)"),
        (args.pretrain_epochs == 0, ("pretrain_block",), "--pretrain-epochs is 0 (no pretraining)"),
        (args.model != "scratch", ("scratch_size", "scratch_vocab"), f"--model is {args.model!r}: size and vocabulary are those of a new scratch model"),
    ))


def check_sft_args(args: SFTArgs) -> None:
    """Reject a bad configuration before any model loads: ``imports`` first, then every name."""
    from searchgym.corpora.retrievers import check_retriever
    from searchgym.envs.protocols import protocol_source
    from searchgym.envs.registration import full_env_id
    from searchgym.plugins import check_imports
    from searchgym.rewards.recipes import recipe_source

    check_imports(args.imports, owner="SFTArgs.imports")
    full_env_id(args.env_id)
    for options in (args.env_options, args.eval_env_options):
        if isinstance(options, dict):
            if options.get("reward") is not None:
                recipe_source(options["reward"])
            if options.get("protocol") is not None:
                protocol_source(options["protocol"])
            check_retriever(options.get("retriever"))
    if args.chat_template is not None:
        from searchgym.lm.chat_templates import template_by_name

        template_by_name(args.chat_template)
    if args.scratch_size not in SCRATCH_SIZES:
        raise UnknownNameError("scratch model size", args.scratch_size, SCRATCH_SIZES)
    if isinstance(args.scratch_vocab, bool) or not isinstance(args.scratch_vocab, int) or args.scratch_vocab < 512:
        raise ConfigError(
            f"SFTArgs.scratch_vocab expects an integer >= 512 (the 256 bytes, the special tokens and merges), got {args.scratch_vocab!r}."
        )
    if not isinstance(args.teacher, str) or not args.teacher.strip():
        raise ConfigError(f"SFTArgs.teacher expects an agent name (oracle, random, a registered name or module:factory), got {args.teacher!r}.")
    if not isinstance(args.teacher_options, dict):
        raise ConfigError(f"SFTArgs.teacher_options expects a dict of the teacher's options, got {type(args.teacher_options).__name__}.")
    check_teacher(args.teacher, full_env_id(args.env_id), args.teacher_options)  # before any model loads or pretrains
    for name in ("epochs", "batch_size", "micro_batch_size", "max_new_tokens", "num_envs", "episodes_per_question"):
        v = getattr(args, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"SFTArgs.{name} expects a positive integer, got {v!r}.")
    if isinstance(args.pretrain_block, bool) or not isinstance(args.pretrain_block, int) or args.pretrain_block < 8:
        raise ConfigError(f"SFTArgs.pretrain_block expects an integer >= 8, got {args.pretrain_block!r}.")
    for name in ("warmup_steps", "eval_every", "pretrain_epochs", "eval_limit"):
        v = getattr(args, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"SFTArgs.{name} expects a non-negative integer, got {v!r}.")
    if args.limit is not None and (isinstance(args.limit, bool) or not isinstance(args.limit, int) or args.limit < 1):
        raise ConfigError(f"SFTArgs.limit expects a positive integer or None, got {args.limit!r}.")
    if not args.lr > 0:
        raise ConfigError(f"SFTArgs.lr expects a positive number, got {args.lr!r}.")


PRETRAIN_COLUMNS = ("step", "epoch", "loss", "tokens", "lr", "grad_norm")


def pretrain_on_corpus(model: Any, tokenizer: Any, corpus: Any, *, epochs: int, block: int, batch_size: int, lr: float, warmup_steps: int, max_grad_norm: float, weight_decay: float, seed: int, log_path: Path, progress: bool, stop: "StopRequests | None" = None) -> list[dict[str, Any]]:
    """Next-token prediction over ``corpus`` (each passage ``title\ntext`` + EOS, packed
    into ``block``-token rows, a seeded shuffle per epoch); the metric rows (also written
    to ``log_path``)."""
    import torch

    from searchgym.training.metrics import MetricsLog

    ids: list[int] = []
    eos = tokenizer.eos_token_id
    for passage in corpus:
        ids.extend(tokenizer(f"{passage.title}\n{passage.text}", add_special_tokens=False)["input_ids"])
        if eos is not None:
            ids.append(eos)
    rows_count = len(ids) // block
    if rows_count == 0:
        raise ConfigError(f"The corpus has {len(ids)} tokens, fewer than one pretraining block of {block}; lower pretrain_block.")
    data = torch.tensor(ids[: rows_count * block], dtype=torch.long).view(rows_count, block)
    steps_per_epoch = -(-rows_count // batch_size)
    total = steps_per_epoch * epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(warmup_steps, total))
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed + 1)
    log = MetricsLog(log_path, PRETRAIN_COLUMNS)
    bar = Progress(total, "pretrain on corpus", "step") if progress else None
    out, step = [], 0
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(rows_count, generator=generator)
        for start in range(0, rows_count, batch_size):
            if stop is not None and stop.requested:
                if bar is not None:
                    bar.close()
                log.close()
                raise TrainingStopped(
                    f"stopped by {stop.requested} while pretraining (step {step} of {total}), before SFT: nothing to keep. "
                    "Run the same command again to start over.",
                    by=stop.requested,
                )
            batch = data[order[start : start + batch_size]].to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = model(input_ids=batch, labels=batch).loss
            if not torch.isfinite(loss):
                raise TrainingError(f"Pretraining step {step + 1}: the loss is {float(loss)}; lower lr. Nothing was saved.")
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            row = {"step": step, "epoch": epoch + 1, "loss": float(loss.detach()), "tokens": int(batch.numel()), "lr": float(scheduler.get_last_lr()[0]), "grad_norm": float(norm)}
            log.log(row)
            out.append(row)
            if bar is not None:
                bar.note(loss=f"{row['loss']:.3f}")
                bar.update(1)
    if bar is not None:
        bar.close()
    log.close()
    return out


def turn_logprobs(model: Any, batch: Any) -> Any:
    """Log-probabilities of the turn tokens of ``batch`` (where ``loss_mask`` is 1), flat
    [N]. The language-model head and the softmax run on those positions only: turns are
    about a sixth of a Search-R1 trajectory, and SmolLM2's head (576 x 49,152) is a fifth
    of its forward pass. Models whose logits are more than the head of the last hidden
    state (soft-capping, a logit scale) take the full forward pass instead."""
    import torch

    from searchgym.training.batch import forward_logprobs

    keep = batch.loss_mask.bool()  # [B, L-1]
    config = model.config
    if getattr(config, "final_logit_softcapping", None) is not None or getattr(config, "logit_scale", None) is not None:
        return forward_logprobs(model, batch)["logprobs"][keep]  # [N]
    hidden = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False).last_hidden_state
    logits = model.get_output_embeddings()(hidden[:, :-1][keep]).float()  # [N, V]
    targets = batch.input_ids[:, 1:][keep]  # [N]
    return torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # [N]


SFT_COLUMNS = (
    "step", "epoch", "loss", "tokens", "lr", "grad_norm",
    "eval_reward", "eval_em", "eval_f1", "eval_cover_em", "eval_searches", "eval_response_tokens",
)


class StopRequests:
    """While open, the first SIGINT or SIGTERM only records that a stop was asked
    (``requested`` names the signal): the run stops at its next step boundary and saves
    what it has. A second one stops at once (the default handlers are back). Outside the
    main thread signals cannot be caught, and nothing changes."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopRequests":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = signal.Signals(signum).name
        self._restore()
        print(f"\n{self.requested}: stopping after this step and saving final/ (send it again to stop at once)", flush=True)

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def __exit__(self, *exc: Any) -> None:
        self._restore()


#: SFTArgs fields that do not change what a run computes (a rerun may change them and continue).
_RUN_NEUTRAL = ("progress", "threads")
CHECKPOINT = "checkpoint"


def _run_settings(args: SFTArgs) -> dict[str, Any]:
    record = without_secrets(json.loads(json.dumps(dataclasses.asdict(args), default=str)))
    return {k: v for k, v in record.items() if k not in _RUN_NEUTRAL}


def _prepare_out(out: Path, args: SFTArgs) -> bool:
    """Make ``out`` ready for ``args``; True when it holds a stopped run to continue.

    An empty or missing folder starts a run. A folder of a run with the same settings
    continues from its checkpoint (a stopped run), or starts over when the run stopped
    before its first SFT step; a finished run or another run's folder is refused."""
    if not (out.exists() and any(out.iterdir())):
        return False
    saved = out / "args.json"
    if not saved.is_file():
        raise ConfigError(f"{out} is not empty and holds no SFT run (no args.json); pick another --out.")
    before = {k: v for k, v in json.loads(saved.read_text()).items() if k not in _RUN_NEUTRAL}
    now = _run_settings(args)
    differ = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if differ:
        shown = ", ".join(f"{k}: {before.get(k)!r} there, {now.get(k)!r} now" for k in differ)
        raise ConfigError(f"{out} holds an SFT run with other settings ({shown}); rerun it with its settings to continue it, or pick another --out.")
    if (out / CHECKPOINT / "state.pt").is_file():
        return True
    if (out / "final").is_dir():
        raise ConfigError(f"{out} holds a finished SFT run ({out / 'final'}); pick another --out to train again.")
    return False  # stopped before its first step: nothing to continue, start over


def _save_checkpoint(out: Path, model: Any, tokenizer: Any, state: dict[str, Any]) -> None:
    """``out/checkpoint`` (model, tokenizer, optimizer, scheduler, data order, step), written
    to a temporary folder and renamed, so a kill leaves the previous one whole."""
    import torch

    tmp = out / f".tmp-{CHECKPOINT}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    torch.save(state, tmp / "state.pt")
    old = out / f".old-{CHECKPOINT}-{os.getpid()}"
    if (out / CHECKPOINT).exists():
        os.replace(out / CHECKPOINT, old)
    os.replace(tmp, out / CHECKPOINT)
    shutil.rmtree(old, ignore_errors=True)


def _save_final(out: Path, model: Any, tokenizer: Any) -> None:
    tmp = out / f".tmp-final-{os.getpid()}"
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    shutil.rmtree(out / "final", ignore_errors=True)
    os.replace(tmp, out / "final")


@reports_missing_extras("searchgym.training.sft.sft")
def sft(args: SFTArgs) -> list[dict[str, Any]]:
    """Record the oracle, train the student on its turns, save ``out/final``; the metric rows.

    Stopped by SIGINT (Ctrl-C) or SIGTERM, it finishes the step it is in, writes
    ``out/final`` (the model so far, usable as ``--model``) and ``out/checkpoint``, and
    raises :class:`~searchgym.error.TrainingStopped`; the same call (same ``out`` and
    settings) then continues from that step."""
    with StopRequests() as stop:
        return _sft(args, stop)


def _sft(args: SFTArgs, stop: StopRequests) -> list[dict[str, Any]]:
    import gymnasium as gym
    import torch

    from searchgym.training.batch import collate
    from searchgym.training.metrics import MetricsLog, plot_curves
    from searchgym.lm.hf import TransformersLM
    from searchgym.lm.threads import ThreadTuner
    from searchgym.lm.chat_templates import install_chat_template
    from searchgym.training.data import with_tool_parser
    from searchgym.training.trainer import evaluate_policy, load_policy

    check_sft_args(args)
    for note in sft_disabled_options(args):
        print(f"warning: {note}", file=sys.stderr, flush=True)
    from searchgym.envs.registration import full_env_id

    env_id = full_env_id(args.env_id)
    out = Path(args.out)
    resuming = _prepare_out(out, args)
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(without_secrets(json.loads(json.dumps(dataclasses.asdict(args), default=str))), indent=2))
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    env = gym.make(env_id, split=args.split, **args.env_options)
    state: dict[str, Any] | None = None
    if resuming:
        model, tokenizer = load_policy(str(out / CHECKPOINT / "model"))
        state = torch.load(out / CHECKPOINT / "state.pt", weights_only=False)
        print(f"continuing the SFT run in {out} from step {state['step']} (its checkpoint)", flush=True)
    elif args.model == "scratch":
        model, tokenizer = scratch_model(env, size=args.scratch_size, vocab_size=args.scratch_vocab, seed=args.seed)
    else:
        model, tokenizer = load_policy(args.model)
    if args.chat_template is not None:
        install_chat_template(tokenizer, args.chat_template, model)
    env_options = with_tool_parser(args.env_options, args.chat_template)
    if args.pretrain_epochs and not resuming:
        pretrain_on_corpus(
            model, tokenizer, search_env(env).corpus,
            epochs=args.pretrain_epochs, block=args.pretrain_block, batch_size=args.batch_size, lr=args.lr,
            warmup_steps=args.warmup_steps, max_grad_norm=args.max_grad_norm, weight_decay=args.weight_decay,
            seed=args.seed, log_path=out / "pretrain.csv", progress=args.progress, stop=stop,
        )
    model.train()
    trajectories = oracle_trajectories(
        env_id, tokenizer, env_options=env_options, split=args.split, limit=args.limit, num_envs=args.num_envs, progress=args.progress,
        teacher=args.teacher, teacher_options=args.teacher_options, episodes_per_question=args.episodes_per_question,
    )
    context = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    data = collate(trajectories, pad_id=pad, max_length=context)
    steps_per_epoch = -(-len(trajectories) // args.batch_size)
    total = steps_per_epoch * args.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(args.warmup_steps, total))
    generator = torch.Generator().manual_seed(args.seed)
    step = 0
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        generator.set_state(state["epoch_generator"])
        torch.set_rng_state(state["torch_rng"])
        step = int(state["step"])
    log = MetricsLog(out / "metrics.csv", SFT_COLUMNS, resume_step=step if resuming else None)
    device = next(model.parameters()).device

    def evaluate(step: int) -> dict[str, float]:
        if bar is not None:
            bar.note(phase="evaluate")
        lm = TransformersLM(model, tokenizer)  # generates in eval mode, leaves the model in train mode
        return evaluate_policy(
            lm, env_id, env_options={**env_options, **args.eval_env_options}, split=args.eval_split,
            limit=args.eval_limit, num_envs=args.num_envs, max_new_tokens=args.max_new_tokens,
            out=out / "eval" / f"step-{step:06d}", seed=args.seed,
        )

    def stopped() -> TrainingStopped:
        if bar is not None:
            bar.close()
        log.close()
        if step == 0 and not resuming:
            return TrainingStopped(f"stopped by {stop.requested} before the first SFT step: nothing to keep. Run the same command again to start over.", by=stop.requested)
        _save_final(out, model, tokenizer)
        _save_checkpoint(out, model, tokenizer, {
            "step": step, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
            "epoch_generator": epoch_generator, "torch_rng": torch.get_rng_state(),
        })
        return TrainingStopped(
            f"stopped by {stop.requested} at step {step} of {total}: wrote {out / 'final'} (the model after {step} steps, "
            f"usable as --model) and {out / CHECKPOINT}. Run the same command (same --out and settings) to continue from step {step}.",
            by=stop.requested,
        )

    rows = list(log.rows)
    bar = Progress(total, "sft", "step", initial=step) if args.progress else None
    # On a shared CPU, as many threads as cores received; a micro-batch is one pass.
    tuner = ThreadTuner(torch, window=1, min_period=4) if args.threads is None and device.type == "cpu" else None
    micro_passes = -(-min(args.batch_size, len(trajectories)) // args.micro_batch_size)
    t0 = time.perf_counter()
    first_epoch, skip = divmod(step, steps_per_epoch)
    for epoch in range(first_epoch, args.epochs):
        # The generator's state before this epoch's order: a stop saves it, so that a resume draws the same order.
        epoch_generator = generator.get_state()
        order = torch.randperm(len(trajectories), generator=generator).tolist()
        for batch_index, start in enumerate(range(0, len(order), args.batch_size)):
            if epoch == first_epoch and batch_index < skip:
                continue  # played before the stop this run continues
            if stop.requested:
                raise stopped()
            rows_idx = order[start : start + args.batch_size]
            total_tokens = float(data.loss_mask[rows_idx].sum())
            optimizer.zero_grad(set_to_none=True)
            loss_sum = 0.0
            for micro, u in enumerate(range(0, len(rows_idx), args.micro_batch_size)):
                if bar is not None and micro_passes > 1:
                    bar.note(phase=f"micro-batch {micro + 1}/{micro_passes}")
                mb = data.select(rows_idx[u : u + args.micro_batch_size]).to(device)
                with tuner.session() if tuner else nullcontext(), tuner.step() if tuner else nullcontext():
                    loss = -turn_logprobs(model, mb).mean()  # token-mean over the turn tokens
                    if not torch.isfinite(loss):
                        raise TrainingError(f"SFT step {step + 1}: the loss is {float(loss)}; lower lr. Nothing was saved.")
                    share = float(mb.loss_mask.sum()) / total_tokens
                    (loss * share).backward()
                loss_sum += float(loss.detach()) * share
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            row: dict[str, Any] = {"step": step, "epoch": epoch + 1, "loss": loss_sum, "tokens": int(total_tokens), "lr": float(scheduler.get_last_lr()[0]), "grad_norm": float(norm)}
            if args.eval_limit and ((args.eval_every and step % args.eval_every == 0) or step == total):
                row.update(evaluate(step))
            log.log(row)
            rows.append(row)
            if bar is not None:
                bar.note(phase=None, loss=f"{loss_sum:.3f}")
                bar.update(1)
    if bar is not None:
        bar.close()
    log.close()
    plot_curves(log.rows, out / "curves.png", title=f"SFT on {env_id} {args.teacher} ({len(trajectories)} trajectories, {time.perf_counter() - t0:.0f} s)", panels=SFT_PANELS)
    _save_final(out, model, tokenizer)
    shutil.rmtree(out / CHECKPOINT, ignore_errors=True)  # finished: nothing to continue
    return rows


#: Panels of the SFT curves.
SFT_PANELS = (
    ("loss", [("loss", "cross-entropy on turn tokens")]),
    ("eval reward", [("eval_reward", "greedy"), ("eval_em", "EM")]),
    ("eval searches", [("eval_searches", "per episode")]),
)
