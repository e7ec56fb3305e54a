"""RECON's summarizer training (``searchgym distill-summarizer``).

RECON trains its summarizer in two supervised stages and never with RL (§3.2):

1. **Relevance pretraining**: the model, with a linear head on its last hidden state,
   learns to pick the relevant passage among ten candidates for a query (cross-entropy
   over the candidates; MS MARCO in the paper). The head is discarded afterwards.
2. **Multi-aspect distillation**: a stronger teacher (GPT-4o-mini in the paper) writes a
   summary of the documents retrieved for each (question, query), once per aspect of
   :data:`~searchgym.envs.components.lm_summarizer.ASPECTS`, with RECON's prompt; the student learns
   to reproduce them (cross-entropy on the summary tokens only).

Here both stages read the env: its questions (the paper: NQ and HotpotQA), its retriever
and its corpus. Stage 1's candidates are the retriever's top ``relevance_candidates``
for the question, labelled relevant when they contain a gold answer (span check);
questions with no relevant or no irrelevant candidate are skipped. Stage 2's queries are
those a searcher policy issues while playing each question (``queries="rollouts"``, the
default: App. B.2 collects "all intermediate queries" of Search-R1's rollouts and removes
duplicate ones), each with the env's top-k documents for it; ``queries="question"`` summarizes
one retrieval for the question itself instead. The teacher is any
:class:`~searchgym.lm.base.LanguageModel` or model name (local folder, vLLM, an
OpenAI-compatible URL with ``teacher_backend="openai"``).

The defaults are App. B.4's: LoRA of rank 8 and alpha 32 on every linear layer, learning
rate 1e-4, 16 examples per optimizer step (one per forward pass, gradients accumulated),
5% warm-up, one epoch. Until this release the command trained every weight at 1e-5, four
examples a step, no warm-up, on the question's retrieval; ``--queries question --lora-rank 0
--lr 1e-5 --batch-size 4 --micro-batch-size 4 --warmup-ratio none`` runs that.
``OUT/final`` is a model folder (LoRA merged) the env takes as its summarizer:
``summarizer="llm", summarizer_options={"model": "OUT/final"}``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchgym.envs.components.lm_summarizer import ASPECTS, PAPER_SAMPLING, recon_prompt
from searchgym.envs.components.summarizer_base import Summarizer
from searchgym.envs.components.summarizers import IdentitySummarizer
from searchgym.error import ConfigError, TrainingError, UnknownNameError, reports_missing_extras
from searchgym.plugins import without_secrets


#: Where stage 2's queries come from (``DistillArgs.queries``).
QUERY_SOURCES = ("rollouts", "question")


@dataclass
class DistillArgs:
    """Settings of a ``searchgym distill-summarizer`` run (defaults: RECON's App. B.2-B.4)."""

    env_id: str = "searchgym/RECON-v0"
    """Environment whose questions, retriever (top_k documents per search) and corpus the summarizer learns on."""
    env_options: dict[str, Any] = field(default_factory=dict)
    """Extra gym.make arguments (corpus, dataset, top_k...)."""
    split: str = "train"
    """Split whose questions make the training data."""
    limit: int | None = None
    """Use the first N questions only."""
    queries: str = "rollouts"
    """Stage 2's queries: rollouts (those the searcher issues while playing each question, a question's duplicates
    dropped: the paper's, from Search-R1's rollouts) or question (the question itself, one retrieval each)."""
    searcher: str = "smollm2"
    """queries=rollouts: the policy that plays the questions (the paper: Search-R1's PPO checkpoint): a model name or
    folder played greedily by the env's LM agent, or "oracle" (synthwiki's scripted solver)."""
    searcher_backend: str = "transformers"
    """How the searcher model is loaded: transformers, vllm or openai."""
    searcher_max_new_tokens: int = 500
    """Most tokens per searcher turn (Search-R1's 500)."""
    teacher: str = "smollm2"
    """Teacher writing the summaries: a model name or folder, a vLLM model, an OpenAI-compatible URL (see teacher_backend)."""
    teacher_backend: str = "transformers"
    """How the teacher is loaded: transformers, vllm or openai."""
    teacher_options: dict[str, Any] = field(default_factory=dict)
    """Options of the teacher's backend (e.g. {"model": "gpt-4o-mini"} for an OpenAI-compatible server)."""
    teacher_max_new_tokens: int = 256
    """Most tokens per teacher summary."""
    teacher_batch_size: int = 16
    """Prompts per teacher generate call."""
    aspects: list[str] = field(default_factory=lambda: list(ASPECTS))
    """Aspects the teacher writes a summary for, each retrieval once per aspect (the paper: all six)."""
    student: str = "smollm2"
    """Student: a built-in name or a model folder."""
    lora_rank: int = 8
    """LoRA rank of the student (the paper's 8); 0 trains every weight."""
    lora_alpha: float = 32.0
    """LoRA scaling numerator (the paper's 32)."""
    lora_targets: list[str] = field(default_factory=lambda: ["all-linear"])
    """Modules LoRA adapts: all-linear (every linear layer but the output head, the paper's) or module names."""
    relevance_epochs: int = 1
    """Stage 1 passes of relevance pretraining (0 skips the stage)."""
    relevance_candidates: int = 10
    """Candidates per question in stage 1 (the paper: 10)."""
    relevance_max_tokens: int = 256
    """A stage-1 candidate (query and passage) is cut to this many tokens."""
    epochs: int = 1
    """Stage 2 passes over the teacher summaries (the paper: 1)."""
    batch_size: int = 16
    """Examples per optimizer step, both stages (the paper's effective batch of 16)."""
    micro_batch_size: int = 1
    """Examples per forward and backward pass; the gradients of a step's micro-batches add up (the paper: 1 per
    device, accumulated 16 times)."""
    lr: float = 1e-4
    """Peak learning rate of both stages (AdamW, linear warmup then cosine decay; the paper's 1e-4)."""
    warmup_ratio: float | None = 0.05
    """Warmup as a fraction of each stage's optimizer steps (the paper's 5%); None: warmup_steps."""
    warmup_steps: int = 0
    """Warmup optimizer steps of each stage when warmup_ratio is None."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm."""
    teacher_file: str | None = None
    """An earlier run's teacher.jsonl: its summaries are kept and only the (question, query, aspect) triples it lacks are asked of the teacher."""
    out: str = "runs/distill-summarizer"
    """Run folder: teacher.jsonl, metrics.csv, final/ (the summarizer model and tokenizer)."""
    seed: int = 0
    """Seed of the teacher's sampling and of the data order."""
    progress: bool = True
    """Progress bars."""


def check_distill_args(args: DistillArgs) -> None:
    from searchgym.envs.registration import full_env_id

    full_env_id(args.env_id)
    for name in ("teacher_max_new_tokens", "teacher_batch_size", "relevance_max_tokens", "epochs", "batch_size", "micro_batch_size", "searcher_max_new_tokens"):
        v = getattr(args, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"DistillArgs.{name} expects a positive integer, got {v!r}.")
    for name in ("relevance_epochs", "warmup_steps", "lora_rank"):
        v = getattr(args, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"DistillArgs.{name} expects a non-negative integer, got {v!r}.")
    if isinstance(args.relevance_candidates, bool) or not isinstance(args.relevance_candidates, int) or args.relevance_candidates < 2:
        raise ConfigError(f"DistillArgs.relevance_candidates expects an integer >= 2 (one relevant among others), got {args.relevance_candidates!r}.")
    if args.limit is not None and (isinstance(args.limit, bool) or not isinstance(args.limit, int) or args.limit < 1):
        raise ConfigError(f"DistillArgs.limit expects a positive integer or None, got {args.limit!r}.")
    if args.queries not in QUERY_SOURCES:
        raise UnknownNameError("distillation query source", args.queries, QUERY_SOURCES)
    if not isinstance(args.searcher, str) or not args.searcher:
        raise ConfigError(f"DistillArgs.searcher expects a model name or folder, or 'oracle', got {args.searcher!r}.")
    if not args.aspects:
        raise ConfigError(f"DistillArgs.aspects expects at least one of {', '.join(ASPECTS)}, got none.")
    for aspect in args.aspects:
        if aspect not in ASPECTS:
            raise UnknownNameError("summary aspect", aspect, ASPECTS)
    for name in ("lr", "lora_alpha"):
        v = getattr(args, name)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
            raise ConfigError(f"DistillArgs.{name} expects a positive number, got {v!r}.")
    if args.lora_rank and not args.lora_targets:
        raise ConfigError("DistillArgs.lora_targets must name at least one module (or all-linear) when lora_rank > 0.")
    v = args.warmup_ratio
    if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v < 1):
        raise ConfigError(f"DistillArgs.warmup_ratio expects a fraction of the stage's optimizer steps in [0, 1) or None, got {v!r}.")


# -- the data: retrievals of the env and the teacher's summaries


@dataclass(frozen=True)
class Retrieval:
    """One search to summarize: the question it was asked for, the query, the documents."""

    example: Any
    query: str
    hits: list[Any]


def retrievals(env: Any, examples: list[Any], k: int) -> list[list[Any]]:
    """The env retriever's top ``k`` hits for each example's question."""
    from searchgym.envs.access import search_env

    return search_env(env).retriever.search([ex.question for ex in examples], k)


def question_retrievals(env: Any, examples: list[Any], k: int) -> list[Retrieval]:
    """One :class:`Retrieval` per example: its question as the query (``queries="question"``)."""
    return [Retrieval(ex, ex.question, list(h)) for ex, h in zip(examples, retrievals(env, examples, k))]


class QueryRecorder(Summarizer):
    """An env summarizer that passes the documents through (as the identity summarizer
    renders them) and records every search: (question, query, hits)."""

    name = "query-recorder"

    def __init__(self) -> None:
        import threading

        self.searches: list[tuple[str, str, list[Any]]] = []
        self._lock = threading.Lock()

    def summarize(self, question: str, query: str, hits: Any) -> str:
        with self._lock:
            self.searches.append((question, query, list(hits)))
        return IdentitySummarizer().summarize(question, query, hits)


def rollout_retrievals(args: DistillArgs, examples: list[Any], *, searcher: Any = None) -> list[Retrieval]:
    """The searches a searcher policy makes while playing each example once (greedy), in
    the examples' order and then the order they were made; a question's repeated query is
    kept once (App. B.2). ``searcher``: a loaded :class:`~searchgym.lm.base.LanguageModel`
    or an :class:`~searchgym.agents.Agent` used instead of loading ``args.searcher``."""
    import gymnasium as gym

    from searchgym.agents import Agent, Task, make_agent, run_episodes
    from searchgym.agents.lm_agents import policy_agent
    from searchgym.envs.registration import full_env_id
    from searchgym.lm.registry import load_lm

    recorder = QueryRecorder()
    options = {**args.env_options, "summarizer": recorder}
    options.pop("summarizer_options", None)
    envs = [gym.make(full_env_id(args.env_id), split=args.split, **options) for _ in range(min(16, len(examples)))]
    if isinstance(searcher, Agent):
        agent = searcher
    elif searcher is None and args.searcher == "oracle":
        agent = make_agent("oracle", envs[0])
    else:
        lm = searcher if searcher is not None else load_lm(args.searcher, backend=args.searcher_backend)
        agent = policy_agent(envs[0], lm, max_new_tokens=args.searcher_max_new_tokens, temperature=0.0, seed=args.seed)
    run_episodes(envs, agent, [Task(ex.id, seed=args.seed) for ex in examples], progress=args.progress, desc="searcher rollouts")
    by_question: dict[str, list[Any]] = {}
    for ex in examples:
        by_question.setdefault(ex.question, []).append(ex)
    found: dict[str, dict[str, list[Any]]] = {ex.id: {} for ex in examples}
    for question, query, hits in recorder.searches:
        for ex in by_question.get(question, ()):
            found[ex.id].setdefault(" ".join(query.split()), hits)
    return [Retrieval(ex, query, hits) for ex in examples for query, hits in found[ex.id].items() if hits]


def teacher_summaries(
    teacher: Any, items: list[Retrieval], aspects: list[str], *, max_new_tokens: int, batch_size: int, seed: int,
    done: list[dict[str, Any]] | None = None, sink: Any = None, progress: bool = False,
) -> list[dict[str, Any]]:
    """One teacher summary per (retrieval, aspect), sampled as the paper's summarizer samples
    (seeded per prompt); empty summaries and prompts that do not fit the teacher are dropped.

    ``done``: records of an earlier pass (``teacher.jsonl``); their (question id, query,
    aspect) triples are kept as they are and not asked again. ``sink``: a text file each
    batch's new records are written to (one JSON line each, flushed), so a stopped pass
    keeps its work.
    """
    kept = {record_key(r): r for r in done or ()}
    wanted = [(item, a) for item in items if item.hits for a in aspects]
    order = {(item.example.id, item.query, a): i for i, (item, a) in enumerate(wanted)}
    records = [r for key, r in kept.items() if key in order]
    jobs = [(item, a) for item, a in wanted if (item.example.id, item.query, a) not in kept]
    bar = None
    if progress and jobs:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(jobs), desc="teacher summaries", unit="summary", dynamic_ncols=True)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        prompts = [
            teacher.apply_chat([{"role": "user", "content": recon_prompt(item.example.question, item.query, item.hits, a)}])
            for item, a in chunk
        ]
        seeds = [teacher_seed(seed, item, a) for item, a in chunk]
        generations = teacher.generate(prompts, max_new_tokens=max_new_tokens, seed=seeds, **PAPER_SAMPLING)
        for (item, a), g in zip(chunk, generations):
            text = g.text.strip()
            if g.finish_reason == "prompt_too_long" or not text:
                continue
            ex = item.example
            record = {
                "id": ex.id, "question": ex.question, "query": item.query, "aspect": a,
                "doc_ids": [x.passage.id for x in item.hits], "summary": text,
            }
            records.append(record)
            if sink is not None:
                sink.write(json.dumps(record) + "\n")
        if sink is not None:
            sink.flush()
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    return sorted(records, key=lambda r: order[record_key(r)])  # as one uninterrupted pass orders them


def teacher_seed(seed: int, item: Retrieval, aspect: str) -> int:
    """The sampling seed of the teacher's summary of ``item`` for ``aspect`` (a retrieval for
    the question itself keeps the seed it had before queries came from rollouts)."""
    from searchgym.lm.base import derive_seed

    if item.query == item.example.question:
        return derive_seed("recon-teacher", seed, item.example.id, aspect)
    return derive_seed("recon-teacher", seed, item.example.id, aspect, item.query)


def record_key(record: dict[str, Any]) -> tuple[str, str, str]:
    """(question id, query, aspect) of a teacher record (a record without a query summarized its question)."""
    return (record["id"], record.get("query", record.get("question", "")), record["aspect"])


def read_teacher_file(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``teacher.jsonl`` written by an earlier run (a torn last line is dropped)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"DistillArgs.teacher_file expects the teacher.jsonl of an earlier distill-summarizer run, but {path} is not a file.")
    records = []
    lines = path.read_text().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            if n == len(lines):
                break  # the last line of a stopped run may be cut short
            raise ConfigError(f"DistillArgs.teacher_file: line {n} of {path} is not JSON ({e}); pass a teacher.jsonl written by distill-summarizer.") from e
        missing = {"id", "aspect", "summary"} - set(record) if isinstance(record, dict) else {"id", "aspect", "summary"}
        if missing:
            raise ConfigError(f"DistillArgs.teacher_file: line {n} of {path} lacks {', '.join(sorted(missing))}; pass a teacher.jsonl written by distill-summarizer.")
        records.append(record)
    return records


# -- stage 1: relevance pretraining


def relevance_groups(examples: list[Any], hits: list[list[Any]]) -> list[tuple[str, list[str], list[int]]]:
    """(question, candidate texts, relevant positions) for the questions whose candidates
    hold both a passage with a gold answer and one without."""
    from searchgym.rewards.metrics import span_check

    groups = []
    for ex, candidates in zip(examples, hits):
        texts = [f"{h.passage.title}: {h.passage.text}" for h in candidates]
        relevant = [i for i, h in enumerate(candidates) if span_check(h.passage.text, ex.answers)]
        if relevant and len(relevant) < len(candidates):
            groups.append((ex.question, texts, relevant))
    return groups


class RelevanceHead:
    """A linear score on the last hidden state of ``Query: q / Passage: p`` (the stage-1
    classifier; discarded after the stage)."""

    def __init__(self, model: Any, tokenizer: Any, max_tokens: int):
        import torch

        self.model, self.tokenizer, self.max_tokens = model, tokenizer, max_tokens
        self.linear = torch.nn.Linear(model.config.hidden_size, 1).to(next(model.parameters()).device)

    def loss(self, question: str, candidates: list[str], relevant: list[int]) -> Any:
        """-log of the softmax mass of the relevant candidates among all of them."""
        import torch

        enc = self.tokenizer(
            [f"Query: {question}\nPassage: {c}" for c in candidates], add_special_tokens=False, truncation=True,
            max_length=self.max_tokens, padding=True, return_tensors="pt",
        ).to(self.linear.weight.device)
        hidden = self.model.get_decoder()(input_ids=enc.input_ids, attention_mask=enc.attention_mask, use_cache=False).last_hidden_state  # [C, T, H]
        if self.tokenizer.padding_side == "left":
            last = hidden[:, -1]  # [C, H]
        else:
            last = hidden[torch.arange(hidden.shape[0]), enc.attention_mask.sum(dim=1) - 1]  # [C, H]
        scores = self.linear(last.float()).squeeze(-1)  # [C]
        logp = torch.log_softmax(scores, dim=-1)  # [C]
        return -torch.logsumexp(logp[relevant], dim=-1)


# -- stage 2: distillation


def summary_rows(tokenizer: Any, records: list[dict[str, Any]], hits_by_key: dict[tuple[str, str], list[Any]], context: int) -> tuple[list[tuple[list[int], int]], int]:
    """(token ids, prompt length) per record: the chat prompt with RECON's prompt (the
    documents of the record's (question id, query) in ``hits_by_key``), then the teacher's
    summary and the end-of-sequence id; the number of records too long for ``context``."""
    rows, skipped = [], 0
    for r in records:
        key = record_key(r)[:2]
        prompt = tokenizer.apply_chat_template(
            [{"role": "user", "content": recon_prompt(r["question"], key[1], hits_by_key[key], r["aspect"])}],
            add_generation_prompt=True, tokenize=False,
        )
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        t_ids = tokenizer(r["summary"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        if len(p_ids) + len(t_ids) > context:
            skipped += 1
            continue
        rows.append((p_ids + t_ids, len(p_ids)))
    return rows, skipped


def summary_loss(model: Any, rows: list[tuple[list[int], int]], pad_id: int) -> tuple[Any, int]:
    """Token-mean cross-entropy of the summary tokens of ``rows`` and their count."""
    import torch

    device = next(model.parameters()).device
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # [B, T]
    attention = torch.zeros((len(rows), width), dtype=torch.long)  # [B, T]
    labels = torch.full((len(rows), width), -100, dtype=torch.long)  # [B, T]
    for i, (ids, start) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        labels[i, start : len(ids)] = torch.tensor(ids[start:])
    out = model(input_ids=input_ids.to(device), attention_mask=attention.to(device), labels=labels.to(device))
    return out.loss, int((labels[:, 1:] != -100).sum())


DISTILL_COLUMNS = ("stage", "step", "epoch", "loss", "lr", "grad_norm")


def train_stage(model: Any, params: list[Any], batches: list[list[Any]], loss_of: Any, *, args: DistillArgs, stage: str, log: Any, epochs: int) -> list[dict[str, Any]]:
    """``epochs`` passes over ``batches`` in a seeded order, one optimizer step per batch;
    a batch's micro-batches of ``args.micro_batch_size`` each add their share of its mean loss."""
    import torch

    from searchgym.training.sft import cosine_schedule

    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    total = len(batches) * epochs
    warmup = args.warmup_steps if args.warmup_ratio is None else int(args.warmup_ratio * total)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, cosine_schedule(warmup, total))
    generator = torch.Generator().manual_seed(args.seed)
    bar = None
    if args.progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=stage, unit="step", dynamic_ncols=True)
    rows, step = [], 0
    model.train()
    for epoch in range(epochs):
        for b in torch.randperm(len(batches), generator=generator).tolist():
            optimizer.zero_grad(set_to_none=True)
            batch = batches[b]
            loss = 0.0
            for start in range(0, len(batch), args.micro_batch_size):
                micro = batch[start : start + args.micro_batch_size]
                part = loss_of(micro) * (len(micro) / len(batch))
                if not torch.isfinite(part):
                    raise TrainingError(f"{stage} step {step + 1}: the loss is {float(part)}; lower lr. Nothing was saved.")
                part.backward()
                loss += float(part.detach())
            norm = torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            step += 1
            row = {"stage": stage, "step": step, "epoch": epoch + 1, "loss": loss, "lr": float(scheduler.get_last_lr()[0]), "grad_norm": float(norm)}
            log.log(row)
            rows.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3f}")
    if bar is not None:
        bar.close()
    return rows


def add_lora(model: Any, args: DistillArgs) -> Any:
    """The peft model wrapping ``model`` with ``args``' LoRA adapters (the base model's
    modules get them in place; only they train), or None when ``lora_rank`` is 0."""
    if not args.lora_rank:
        return None
    import torch

    from searchgym.error import require

    peft = require("peft", extra="train", feature="LoRA distillation")
    targets: Any = "all-linear" if list(args.lora_targets) == ["all-linear"] else list(args.lora_targets)
    config = peft.LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules=targets, lora_dropout=0.0, bias="none")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        return peft.get_peft_model(model, config)


@reports_missing_extras("searchgym.training.distill.distill_summarizer")
def distill_summarizer(args: DistillArgs, *, teacher: Any = None, searcher: Any = None) -> dict[str, Any]:
    """Run both stages and save ``OUT/final``; returns the metric rows and the data counts.

    ``teacher``: a :class:`~searchgym.lm.base.LanguageModel` used instead of loading
    ``args.teacher``; ``searcher``: a LanguageModel or an Agent used instead of loading
    ``args.searcher`` (``queries="rollouts"``).
    """
    import gymnasium as gym
    import torch

    from searchgym.envs.access import search_env
    from searchgym.envs.registration import full_env_id
    from searchgym.lm.registry import load_lm
    from searchgym.training.checkpoint import export_policy
    from searchgym.training.metrics import MetricsLog
    from searchgym.training.trainer import load_policy

    check_distill_args(args)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty; pick another --out (a distillation run is not resumed).")
    out.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(without_secrets(json.loads(json.dumps(dataclasses.asdict(args), default=str))), indent=2))
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    env = gym.make(full_env_id(args.env_id), split=args.split, **args.env_options)
    inner = search_env(env)
    examples = list(inner.examples[: args.limit])
    done = read_teacher_file(args.teacher_file) if args.teacher_file is not None else []
    if args.queries == "question":
        items = question_retrievals(env, examples, inner.top_k)
    else:
        items = rollout_retrievals(args, examples, searcher=searcher)
        if not items:
            raise ConfigError(
                f"The searcher {args.searcher!r} made no search on the {len(examples)} questions of {args.env_id} ({args.split}), "
                "so there is no query to summarize; use a searcher that searches (a trained Search-R1 policy, or 'oracle' on "
                "synthwiki) or queries='question'."
            )
    wanted = {(item.example.id, item.query, a) for item in items if item.hits for a in args.aspects}
    if teacher is None and not wanted <= {record_key(r) for r in done}:
        teacher = load_lm(args.teacher, backend=args.teacher_backend, **dict(args.teacher_options))
    with (out / "teacher.jsonl").open("w") as sink:
        for r in done:
            if record_key(r) in wanted:
                sink.write(json.dumps(r) + "\n")
        sink.flush()
        records = teacher_summaries(
            teacher, items, list(args.aspects), max_new_tokens=args.teacher_max_new_tokens,
            batch_size=args.teacher_batch_size, seed=args.seed, done=done, sink=sink, progress=args.progress,
        )
    if not records:
        raise ConfigError(f"The teacher wrote no usable summary for the {len(examples)} questions of {args.env_id} ({args.split}); check the teacher model.")
    model, tokenizer = load_policy(args.student)
    peft_model = add_lora(model, args)
    trained = [p for p in model.parameters() if p.requires_grad]
    log = MetricsLog(out / "metrics.csv", DISTILL_COLUMNS)
    rows: list[dict[str, Any]] = []
    groups: list[Any] = []
    if args.relevance_epochs:
        groups = relevance_groups(examples, retrievals(env, examples, args.relevance_candidates))
        if not groups:
            raise ConfigError(
                f"Relevance pretraining found no question of {args.env_id} ({args.split}) whose top {args.relevance_candidates} "
                "candidates hold both a passage with a gold answer and one without; set relevance_epochs=0 or use more questions."
            )
        head = RelevanceHead(model, tokenizer, args.relevance_max_tokens)
        batches = [groups[i : i + args.batch_size] for i in range(0, len(groups), args.batch_size)]
        rows += train_stage(
            model, [*trained, *head.linear.parameters()], batches,
            lambda batch: torch.stack([head.loss(*g) for g in batch]).mean(),
            args=args, stage="relevance", log=log, epochs=args.relevance_epochs,
        )
        del head  # the classification head is discarded (RECON §3.2)
    context = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    hits_by_key = {(item.example.id, item.query): item.hits for item in items}
    data, too_long = summary_rows(tokenizer, records, hits_by_key, context)
    if not data:
        raise ConfigError(f"Every one of the {len(records)} teacher summaries with its prompt is longer than the student's context ({context} tokens); lower top_k in env_options.")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    batches = [data[i : i + args.batch_size] for i in range(0, len(data), args.batch_size)]
    rows += train_stage(model, trained, batches, lambda batch: summary_loss(model, batch, pad)[0], args=args, stage="distill", log=log, epochs=args.epochs)
    log.close()
    model.eval()
    export_policy(out / "final", model, tokenizer, peft_model)  # LoRA merged: a plain model folder
    return {
        "rows": rows, "questions": len(examples), "queries": len({(i.example.id, i.query) for i in items}),
        "summaries": len(records), "trained_summaries": len(data), "too_long": too_long,
        "relevance_groups": len(groups), "seconds": time.perf_counter() - t0,
    }
