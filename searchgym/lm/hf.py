"""A :class:`LanguageModel` over a Hugging Face ``transformers`` causal LM.

The decode loop is written here rather than delegated to ``model.generate`` so that the
backend controls exactly what a trainer needs: the sampled ids, their logprobs under the
distribution actually sampled from, per-sequence stop strings and a seeded generator.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, require
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, stop_end
from searchgym.lm.attention import use_grouped_decode_attention
from searchgym.lm.models import MODEL_FOLDERS
from searchgym.lm.prefix_cache import Hit, PrefixCache, common_prefix, weights_fingerprint
from searchgym.lm.threads import ThreadTuner

#: Built-in model names (besides local folders and cached Hugging Face ids).
MODEL_NAMES = ("smollm2", "tiny-random")

_DTYPES = ("float32", "float16", "bfloat16")


@dataclass
class DecodeStats:
    """Work done since the model was loaded: prefill forward passes, the prompt tokens
    they encoded and the padding they computed beside them (left padding of ragged
    prompts), decode forward passes and the rows they computed in all."""

    prefills: int = 0
    prefill_tokens: int = 0
    prefill_padding: int = 0
    decode_steps: int = 0
    decode_rows: int = 0


class TransformersLM(LanguageModel):
    """Batched generation with a ``transformers`` causal LM, on CPU or CUDA.

    Args:
        model: A loaded ``PreTrainedModel``; a local folder with ``config.json``; a
            Hugging Face model id already in the local cache (nothing is downloaded); or
            ``"tiny-random"``, the tiny random model of :mod:`searchgym.lm.testing`; or
            ``"smollm2"``, the packaged SmolLM2-135M-Instruct (see :mod:`searchgym.lm.models`).
        tokenizer: The tokenizer; by default loaded from the same folder or id.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` picks CUDA when available.
        dtype: ``"float32"``, ``"float16"``, ``"bfloat16"`` or a ``torch.dtype``; ``None``
            keeps a given model's dtype and loads others in float32.
        max_batch_size: Most prompts decoded together; larger batches are split.
        prefix_cache_mb: Memory budget of the prefix cache in MiB; 0 turns it off. The
            keys and values of every finished sequence are kept (least recently used
            dropped first), and a later prompt that begins with one of them encodes only
            its new tokens: a multi-turn agent's next turn encodes just the observation
            instead of the whole conversation (see :mod:`searchgym.lm.prefix_cache`).
            The cache is dropped whenever the parameters change (an optimizer step).
        grouped_decode_attention: Switch a model that uses SDPA to
            :func:`searchgym.lm.attention.grouped_decode_attention`, which computes a
            decode step's attention over the grouped key/value heads without copying the
            KV cache (other forward passes, training included, still use SDPA).
        row_linear: Switch the model's ``nn.Linear`` layers to
            :class:`searchgym.lm.linear.RowLinear`, which computes a product with a few
            rows (a decode step's) on the CPU with a kernel that reads each weight once:
            a 5-row SmolLM2 step then costs about as much as a 1-row one. Training
            forward passes and GPUs are unaffected.
        threads: Intra-op threads while generating on the CPU. ``"auto"`` (the default)
            sets the count between 1 and ``torch.get_num_threads()`` to the cores the
            process gets, measured over its forward passes
            (:class:`searchgym.lm.threads.ThreadTuner`): the calling thread's count when
            alone, fewer when another process holds a core (where OpenMP's spinning would
            otherwise make generation several times slower). A positive integer fixes the
            count while generating. Either way the caller's count is restored afterwards.

    Prompts are left-padded into one batch and decoded with a KV cache that grows in
    place (:mod:`searchgym.lm.kv_cache`); a sequence that
    finishes leaves the batch (and its cache), so the remaining steps compute only the
    sequences still generating. A prompt that fills the model's context
    (``config.max_position_embeddings``) gets an empty generation with
    ``finish_reason="prompt_too_long"``; the others stop with ``"length"`` when their
    context runs out.

    Prefill computes logits at the last position only. Prompts encoded together whose
    new tokens differ much in length are split into groups of similar lengths so that
    at most ``max_padding`` (default 0.2) of a pass is left padding; with the prefix cache
    on, prompts that begin with the same uncached tokens (one template, several
    questions) encode them once. ``stats`` (:class:`DecodeStats`) counts prefill and
    decode work.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: Any = None,
        dtype: Any = None,
        max_batch_size: int = 64,
        prefix_cache_mb: float = 1024,
        grouped_decode_attention: bool = True,
        row_linear: bool = True,
        threads: int | str = "auto",
    ):
        self._torch = torch = require("torch", extra="lm", feature="TransformersLM")
        transformers = require("transformers", extra="lm", feature="TransformersLM")
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ConfigError(f"TransformersLM expects max_batch_size to be a positive integer, got {max_batch_size!r}.")
        if isinstance(prefix_cache_mb, bool) or not isinstance(prefix_cache_mb, (int, float)) or not prefix_cache_mb >= 0:
            raise ConfigError(
                f"TransformersLM expects prefix_cache_mb to be a number of MiB >= 0 (0 turns the prefix cache off), "
                f"got {prefix_cache_mb!r}."
            )
        if threads != "auto" and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ConfigError(
                f"TransformersLM expects threads to be 'auto' (tuned while generating) or a positive integer, got {threads!r}."
            )
        torch_dtype = _resolve_dtype(torch, dtype)
        device = _check_device(torch, device)
        if isinstance(model, str):
            model, tokenizer = _load(transformers, model, tokenizer, torch_dtype)
        elif not isinstance(model, transformers.PreTrainedModel):
            raise ConfigError(
                f"TransformersLM expects model to be a transformers PreTrainedModel or a name "
                f"(local folder, cached Hugging Face id, or one of {', '.join(MODEL_NAMES)}), "
                f"got {type(model).__name__}."
            )
        if tokenizer is None:
            tokenizer = _load_tokenizer(transformers, model.name_or_path)
        self.device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model = model.to(device=self.device, dtype=torch_dtype).eval()
        if grouped_decode_attention:
            use_grouped_decode_attention(self.model)
        if row_linear:
            from searchgym.lm.linear import use_row_linear

            use_row_linear(self.model)
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.pad_token_id = _first_id(tokenizer.pad_token_id, tokenizer.eos_token_id, 0)
        self.eos_token_ids = frozenset(
            i for i in (*_ids(tokenizer.eos_token_id), *_ids(getattr(model.generation_config, "eos_token_id", None)))
        )
        self._vocab_size = model.get_input_embeddings().num_embeddings
        self.stats = DecodeStats()
        #: Most left padding (a fraction of the tokens computed) one prefill pass may
        #: carry; prompts are encoded in groups of similar lengths to stay within it.
        self.max_padding = 0.2
        self._stackable: bool | None = None  # whether this model's caches can be stacked (known after one prefill)
        # Prefill needs the logits of the last position only; computing the others (a
        # [B, S, vocab] tensor) costs as much as a fifth of a small model's forward pass.
        self._last_logits = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(self.model.forward).parameters else {}
        budget = int(prefix_cache_mb * 2**20)
        self.prefix_cache: PrefixCache | None = PrefixCache(budget) if budget > 0 else None
        self.threads = threads
        self._local = threading.local()  # the tuner of the calling thread's decode loop
        #: The thread tuner of ``generate`` (None unless ``threads="auto"`` on the CPU).
        self.tuner = self.new_tuner()

    def new_tuner(self) -> ThreadTuner | None:
        """A :class:`ThreadTuner` for a generation loop, or None when the count is fixed
        or the model is not on the CPU."""
        return ThreadTuner(self._torch) if self.threads == "auto" and self.device.type == "cpu" else None

    @contextmanager
    def thread_session(self, tuner: ThreadTuner | None) -> Iterator[None]:
        """Around a generation loop: the tuned (or fixed) thread count inside, the
        caller's after; ``tuner`` measures every forward pass of the calling thread meanwhile."""
        if tuner is not None:
            with tuner.session():
                self._local.tuner = tuner
                try:
                    yield
                finally:
                    self._local.tuner = None
        elif isinstance(self.threads, int) and self.device.type == "cpu":
            with _fixed_threads(self._torch, self.threads):
                yield
        else:
            yield

    def _forward(self, **inputs: Any) -> Any:
        """The model's forward pass, measured by the calling thread's tuner if any."""
        tuner = getattr(self._local, "tuner", None)
        if tuner is None:
            return self.model(**inputs)
        with tuner.step():
            return self.model(**inputs)

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        self._check_vocabulary(prompt_ids)
        cache = self._usable_cache()
        results, runnable = self._decodings(prompt_ids, params)
        with self.thread_session(self.tuner):
            for start in range(0, len(runnable), self.max_batch_size):
                chunk = runnable[start : start + self.max_batch_size]
                for (i, _), generation in zip(chunk, self._decode_batch([seq for _, seq in chunk], params, cache)):
                    results[i] = generation
        return results  # type: ignore[return-value]

    def _decodings(self, prompt_ids: list[list[int]], params: SamplingParams) -> tuple[list[Generation | None], list[tuple[int, Decoding]]]:
        """Results with the prompts that fill the context already answered
        (``prompt_too_long``), and a :class:`Decoding` for each of the others, by index;
        each may grow only until its context is full, and samples with its own seed's
        generator (unseeded prompts share one fresh generator)."""
        results: list[Generation | None] = [None] * len(prompt_ids)
        runnable = []
        shared = None
        for i, ids in enumerate(prompt_ids):
            if len(ids) >= self.context_length:
                results[i] = Generation("", (), (), "prompt_too_long")
                continue
            if params.temperature == 0:
                generator = None  # greedy draws nothing
            elif params.seed is not None:
                generator = self._generator(params.seed[i])
            else:
                generator = shared = shared or self._generator(None)
            budget = min(params.max_new_tokens, self.context_length - len(ids))
            runnable.append((i, Decoding(ids, params, budget, generator=generator)))
        return results, runnable

    def _check_vocabulary(self, prompt_ids: list[list[int]]) -> None:
        for i, ids in enumerate(prompt_ids):
            if max(ids) >= self._vocab_size:
                raise ConfigError(
                    f"TransformersLM.generate expects token ids below the vocabulary size "
                    f"{self._vocab_size}, got id {max(ids)} in prompt {i}."
                )

    def _generator(self, seed: int | None) -> Any:
        """A generator on the model's device, seeded with ``seed`` (``None``: at random)."""
        generator = self._torch.Generator(device=self.device)
        if seed is None:
            generator.seed()
        else:
            generator.manual_seed(seed)
        return generator

    def _usable_cache(self) -> PrefixCache | None:
        """The prefix cache, emptied if the weights changed; None when off or when the
        weights cannot be fingerprinted."""
        cache = self.prefix_cache
        if cache is None:
            return None
        fingerprint = weights_fingerprint(self.model)
        cache.check(fingerprint)
        return cache if fingerprint is not None else None

    def _decode_batch(self, seqs: list[Decoding], params: SamplingParams, cache: PrefixCache | None = None) -> list[Generation]:
        torch = self._torch
        live = list(seqs)  # the sequence of each row still in the batch
        with torch.inference_mode():
            logits, past, attention_mask, position_ids = self._prefill(seqs, cache)
            storable = cache is not None and _full_cache(past, attention_mask.shape[1])
            while True:
                next_ids, next_logprobs = self._sample(logits, params, [seq.generator for seq in live])  # [L], [L]
                for row, (seq, token, logprob) in enumerate(zip(live, next_ids.tolist(), next_logprobs.tolist())):
                    if self._append(seq, token, logprob) and storable:
                        self._keep(cache, seq, past, row, attention_mask[row])  # type: ignore[arg-type]
                keep = [row for row, seq in enumerate(live) if seq.finish is None]
                if not keep:
                    break
                if len(keep) < len(live):
                    # Finished rows leave the batch: later steps only compute the live ones.
                    attention_mask, next_ids, position_ids = _select_rows(past, keep, attention_mask, next_ids, position_ids)
                    live = [live[row] for row in keep]
                logits, past, attention_mask, position_ids = self._decode_step(next_ids, past, attention_mask, position_ids)
        return [seq.generation() for seq in seqs]

    def _decode_step(self, next_ids: Any, past: Any, attention_mask: Any, position_ids: Any) -> tuple[Any, Any, Any, Any]:
        """Feed each row its sampled token ``next_ids`` ``[L]``; returns the logits
        ``[L, V]``, the cache, and the mask ``[L, W+1]`` and positions ``[L, 1]`` one further."""
        torch = self._torch
        attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(next_ids), 1))], dim=-1)
        position_ids = position_ids + 1
        self.stats.decode_steps += 1
        self.stats.decode_rows += len(next_ids)
        out = self._forward(
            input_ids=next_ids.unsqueeze(-1),  # [L, 1]
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past,
            use_cache=True,
        )
        return out.logits[:, -1, :], out.past_key_values, attention_mask, position_ids

    def _prefill(self, seqs: list[Decoding], cache: PrefixCache | None) -> tuple[Any, Any, Any, Any]:
        """Encode the prompts of ``seqs``, reusing cached prefixes.

        Returns the last position's logits ``[B, V]``, the KV cache, the attention mask
        ``[B, W]`` over the cache's columns and each row's last position ``[B, 1]``.
        Prompts whose new tokens differ much in length are encoded in groups of similar
        lengths (left padding is computed like real tokens) and their caches stacked.
        """
        torch = self._torch
        if cache is not None:
            for seq in seqs:
                seq.hit = cache.lookup(seq.prompt)
            if len(seqs) > 1 and self._encode_shared_prefix(seqs, cache):
                for seq in seqs:
                    seq.hit = cache.lookup(seq.prompt)
        groups = _length_groups([len(seq.prompt) - (seq.hit.length if seq.hit else 0) for seq in seqs], self.max_padding)
        if len(groups) == 1 or not self._stackable:
            return self._encode(seqs)
        from searchgym.lm.kv_cache import concat_rows

        parts = [self._encode([seqs[row] for row in group]) for group in groups]
        stacked = [row for group in groups for row in group]
        order = torch.empty(len(seqs), dtype=torch.long)
        order[torch.tensor(stacked)] = torch.arange(len(seqs))  # stacked position of each row
        order = order.to(self.device)
        past, mask = concat_rows([(part[1], part[2]) for part in parts], order)
        logits = torch.cat([part[0] for part in parts]).index_select(0, order)
        positions = torch.cat([part[3] for part in parts]).index_select(0, order)
        return logits, past, mask, positions

    def _encode(self, seqs: list[Decoding]) -> tuple[Any, Any, Any, Any]:
        """One forward pass over the new tokens of ``seqs`` (after their ``hit``), left-padded."""
        from transformers.cache_utils import DynamicCache

        from searchgym.lm.kv_cache import grow_in_place

        torch = self._torch
        batch = len(seqs)
        cached = [seq.hit.length if seq.hit else 0 for seq in seqs]
        suffixes = [seq.prompt[c:] for seq, c in zip(seqs, cached)]
        # Layout of row r: its cached tokens end at column C, its new tokens at the last
        # column; the attention mask marks both, the gaps are padding.
        C, S = max(cached), max(len(s) for s in suffixes)
        width = C + S
        input_ids = torch.full((batch, S), self.pad_token_id, dtype=torch.long)  # [B, S]
        attention_mask = torch.zeros((batch, width), dtype=torch.long)  # [B, C+S]
        position_ids = torch.zeros((batch, S), dtype=torch.long)  # [B, S]
        for row, (ids, c) in enumerate(zip(suffixes, cached)):
            input_ids[row, S - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, C - c : C] = 1
            attention_mask[row, width - len(ids) :] = 1
            # Positions count real tokens only (left padding shifts them right).
            position_ids[row, S - len(ids) :] = torch.arange(c, c + len(ids))
        self.stats.prefills += 1
        self.stats.prefill_tokens += sum(len(s) for s in suffixes)
        self.stats.prefill_padding += batch * S - sum(len(s) for s in suffixes)
        attention_mask, position_ids = attention_mask.to(self.device), position_ids.to(self.device)
        # Several rows decode into buffers that the prompt's keys and values are written
        # into directly (see kv_cache); one row's plain cache costs as little to extend.
        grow = batch > 1
        if C:
            past = self._cached_past([seq.hit for seq in seqs], cached, C, S if grow else 0)
        else:
            past = grow_in_place(DynamicCache(config=self.model.config)) if grow else None
        out = self._forward(
            input_ids=input_ids.to(self.device),
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past,
            use_cache=True,
            **self._last_logits,
        )
        past = out.past_key_values
        if self._stackable is None:
            self._stackable = _full_cache(past, width)
        return out.logits[:, -1, :], past, attention_mask, position_ids[:, -1:]

    def _encode_shared_prefix(self, seqs: list[Decoding], cache: PrefixCache) -> bool:
        """When prompts encoded together begin with the same tokens that no cache entry
        holds yet (one template, several questions), encode those tokens once and store
        them, so each prompt then encodes only its own part. Returns whether it did."""
        first = seqs[0].prompt
        shared = min(len(seq.prompt) for seq in seqs) - 1
        for seq in seqs[1:]:
            shared = common_prefix(first, seq.prompt, shared)
        hits = [seq.hit.length if seq.hit else 0 for seq in seqs]
        # Every entry that serves part of the shared tokens serves it to each prompt, so
        # the shortest hit bounds what encoding the shared tokens once reuses.
        cost = shared - min(hits)
        saved = sum(max(0, shared - h) for h in hits) - cost
        if cost < PrefixCache.min_shared or saved < PrefixCache.min_shared:
            return False
        prefix = Decoding(first[:shared], seqs[0].params, 1)
        _, past, mask, _ = self._prefill([prefix], cache)
        if not _full_cache(past, mask.shape[1]):
            return False
        cache.store(prefix.prompt, _row_layers(past, 0, mask[0]))
        return True

    def _keep(self, cache: PrefixCache, seq: Decoding, past: Any, row: int, mask: Any) -> None:
        """Store a finished row's keys and values: the prompt and every sampled token but
        the last, which was never fed back. The entry it wholly extends is superseded."""
        cache.store(seq.prompt + seq.tokens[:-1], _row_layers(past, row, mask))
        if seq.hit is not None and seq.hit.whole:
            cache.discard(seq.hit.key)

    def _cached_past(self, hits: list[Hit | None], cached: list[int], width: int, room: int = 0) -> Any:
        """A ``DynamicCache`` of ``width`` columns holding each row's cached keys and
        values right-aligned (zeros where a row has fewer cached tokens). With ``room``,
        its layers are :class:`~searchgym.lm.kv_cache.GrowingLayer` buffers with space for
        that many new columns and a decode's worth more."""
        from transformers.cache_utils import DynamicCache

        from searchgym.lm.kv_cache import GrowingLayer, buffered_layer

        torch = self._torch
        reference = next(hit.layers for hit in hits if hit)
        capacity = GrowingLayer.capacity(width + room) if room else width
        layers = []
        for layer, (k0, v0) in enumerate(reference):
            keys = k0.new_empty((len(hits), k0.shape[0], capacity, k0.shape[-1]))  # [B, H, capacity, D]
            values = v0.new_empty((len(hits), v0.shape[0], capacity, v0.shape[-1]))
            for row, (hit, c) in enumerate(zip(hits, cached)):
                keys[row, :, : width - c].zero_()
                values[row, :, : width - c].zero_()
                if hit:
                    keys[row, :, width - c : width], values[row, :, width - c : width] = hit.keys_values(layer)
            layers.append((keys, values))
        if not room:
            return DynamicCache(ddp_cache_data=layers)
        cache = DynamicCache()
        cache.layers = [buffered_layer(keys, values, width) for keys, values in layers]
        return cache

    def _append(self, seq: Decoding, token: int, logprob: float) -> bool:
        """Record one sampled token of ``seq``; return whether it is now finished."""
        seq.tokens.append(token)
        seq.logprobs.append(logprob)
        if token in self.eos_token_ids:
            seq.finish = "stop"
            return True
        text = self.tokenizer.decode(seq.tokens, clean_up_tokenization_spaces=False)
        end = stop_end(text, seq.params.stop)
        if end is not None:
            seq.text, seq.finish = text[:end], "stop"
            return True
        seq.text = text
        if len(seq.tokens) >= seq.budget:
            seq.finish = "length"
        return seq.finish is not None

    def _sample(self, logits: Any, params: SamplingParams, generators: list[Any]) -> tuple[Any, Any]:
        """Pick the next id of every row and its logprob under the distribution used;
        row ``r`` draws from ``generators[r]``."""
        torch = self._torch
        logits = logits.float()  # [B, V]
        if params.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)  # [B, V]
            next_ids = logp.argmax(dim=-1)  # [B]
            return next_ids, logp.gather(-1, next_ids.unsqueeze(-1)).squeeze(-1)
        logits = logits / params.temperature
        if params.top_p < 1:
            sorted_logits, order = logits.sort(dim=-1, descending=True)  # [B, V]
            sorted_probs = sorted_logits.softmax(dim=-1)
            # Drop a token when the tokens ranked above it already hold top_p of the mass;
            # the most likely token is always kept.
            drop = sorted_probs.cumsum(dim=-1) - sorted_probs >= params.top_p  # [B, V]
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
        logp = torch.log_softmax(logits, dim=-1)  # [B, V]
        # Exponential race: each token gets q ~ Exp(1) and the largest p / q wins, which
        # picks token i with probability p_i (torch.multinomial's method). Drawing q as
        # -log(u) from uniform numbers costs a quarter of multinomial's own draws over a
        # 49k vocabulary. (One uniform per row through the cumulative distribution would
        # be cheaper still, but its choice shifts with the rounding of a sum over the
        # whole vocabulary, so batched and single runs would part more often.)
        probs = logp.exp()
        like = {"device": probs.device, "dtype": probs.dtype}
        if all(g is generators[0] for g in generators):  # one stream (an unseeded call)
            u = torch.rand(probs.shape, generator=generators[0], **like)
        else:  # each row from its own stream, so its draws do not depend on the other rows
            u = torch.cat([torch.rand((1, probs.shape[-1]), generator=g, **like) for g in generators])
        next_ids = (probs / -torch.log(u)).argmax(dim=-1)  # [B]; u = 0 gives q = inf: never chosen
        return next_ids, logp.gather(-1, next_ids.unsqueeze(-1)).squeeze(-1)


class Decoding:
    """One prompt being decoded: what it may generate and what it has generated."""

    __slots__ = ("prompt", "params", "budget", "tokens", "logprobs", "text", "finish", "hit", "owner", "generator")

    def __init__(self, prompt: list[int], params: SamplingParams, budget: int, owner: Any = None, generator: Any = None):
        self.prompt, self.params, self.budget, self.owner, self.generator = prompt, params, budget, owner, generator
        self.tokens: list[int] = []
        self.logprobs: list[float] = []
        self.text = ""
        self.finish: str | None = None
        self.hit: Any = None

    def generation(self) -> Generation:
        return Generation(self.text, tuple(self.tokens), tuple(self.logprobs), self.finish or "length")


def _length_groups(lengths: list[int], max_padding: float, min_padding: int = 64) -> list[list[int]]:
    """Split row indices into groups, longest first, so that padding every row of a group
    to its longest takes at most ``max_padding`` of the group's computed tokens, or at
    most ``min_padding`` tokens (a few padded tokens cost less than another forward pass)."""
    rows = sorted(range(len(lengths)), key=lambda row: -lengths[row])
    groups: list[list[int]] = []
    total = 0
    for row in rows:
        if groups:
            computed = lengths[groups[-1][0]] * (len(groups[-1]) + 1)
            padding = computed - (total + lengths[row])
            if padding <= max(max_padding * computed, min_padding):
                groups[-1].append(row)
                total += lengths[row]
                continue
        groups.append([row])
        total = lengths[row]
    return groups


def _select_rows(cache: Any, keep: list[int], attention_mask: Any, *rows: Any) -> tuple[Any, ...]:
    """Keep only the batch rows ``keep`` of ``cache`` (in place), of ``attention_mask``
    (then without the columns that became padding in every row) and of each of ``rows``."""
    import torch

    index = torch.tensor(keep, device=attention_mask.device)
    cache.batch_select_indices(index)
    return (_drop_padding(cache, attention_mask[index]), *(tensor[index] for tensor in rows))


def _drop_padding(cache: Any, attention_mask: Any) -> Any:
    """Drop the leading columns that are padding in every row, from the cache and the mask
    (when the cache allows it)."""
    pad = int(attention_mask.sum(0).eq(0).long().cumprod(0).sum())
    if pad and _crop_left(cache, pad, attention_mask.shape[1]):
        return attention_mask[:, pad:]
    return attention_mask


def _full_cache(cache: Any, width: int) -> bool:
    """Whether ``cache`` is a ``DynamicCache`` whose layers all hold every one of the
    ``width`` positions (no sliding window), so one row's entries can be kept."""
    from searchgym.lm.kv_cache import full_attention_layer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(
        full_attention_layer(layer) and getattr(layer, "keys", None) is not None and layer.keys.shape[-2] == width for layer in layers
    )


def _row_layers(cache: Any, row: int, mask: Any) -> list[tuple[Any, Any]]:
    """The keys and values of batch row ``row`` at the columns its mask marks real."""
    columns = mask.nonzero().squeeze(-1)
    return [(layer.keys[row].index_select(-2, columns), layer.values[row].index_select(-2, columns)) for layer in cache.layers]


def _crop_left(cache: Any, columns: int, width: int) -> bool:
    """Drop the first ``columns`` positions of every layer of a ``DynamicCache`` whose
    layers all hold ``width`` positions; return False (and change nothing) for any other
    cache, such as one with sliding-window layers."""
    layers = getattr(cache, "layers", None)
    if not layers or any(getattr(layer, "keys", None) is None or layer.keys.shape[-2] != width for layer in layers):
        return False
    for layer in layers:
        if hasattr(layer, "crop_left"):  # a GrowingLayer keeps appending into its buffer
            layer.crop_left(columns)
        else:
            layer.keys = layer.keys[..., columns:, :]  # [B, H, T, D]
            layer.values = layer.values[..., columns:, :]
    return True


@contextmanager
def _fixed_threads(torch: Any, threads: int) -> Iterator[None]:
    caller = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(caller)


def _resolve_dtype(torch: Any, dtype: Any) -> Any:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise ConfigError(
        f"TransformersLM expects dtype to be one of {', '.join(_DTYPES)}, a torch.dtype or None, got {dtype!r}."
    )


def _check_device(torch: Any, device: Any) -> Any:
    """``device`` as a ``torch.device`` this machine has (``None`` stays ``None``: CUDA if any, else CPU)."""
    if device is None:
        return None
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"TransformersLM expects device to be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r} ({_one_line(e)}).") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"TransformersLM got device={device!r}, but this torch has no CUDA device; use device='cpu'.")
    return resolved


def _load(transformers: Any, name: str, tokenizer: Any, dtype: Any) -> tuple[Any, Any]:
    if name == "tiny-random":
        from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer

        return tiny_causal_lm(), tokenizer if tokenizer is not None else tiny_tokenizer()
    if name in MODEL_FOLDERS:
        name = str(MODEL_FOLDERS[name]())
    accepted = (
        f"a local model folder containing config.json, a Hugging Face model id already in the "
        f"local cache (nothing is downloaded), or one of: {', '.join(MODEL_NAMES)}"
    )
    path = Path(name).expanduser()
    if path.exists() and not (path / "config.json").is_file():
        raise ConfigError(f"TransformersLM expects {accepted}; got the path {name!r}, which has no config.json.")
    try:
        # adapter_kwargs: with peft installed, transformers looks for an adapter config on
        # the hub even under local_files_only (five retried HEAD requests offline).
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path) if path.exists() else name, dtype=dtype, local_files_only=True, adapter_kwargs={"local_files_only": True}
        )
    except (OSError, ValueError) as e:
        raise ConfigError(
            f"TransformersLM expects {accepted}; got {name!r}, which could not be loaded offline ({_one_line(e)})."
        ) from e
    if tokenizer is None:
        tokenizer = _load_tokenizer(transformers, str(path) if path.exists() else name)
    return model, tokenizer


def _load_tokenizer(transformers: Any, name: str) -> Any:
    try:
        return transformers.AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError, TypeError) as e:
        raise ConfigError(
            f"TransformersLM expects a tokenizer, or a model whose folder or cached id {name!r} "
            f"holds one; none could be loaded offline ({_one_line(e)}). Pass tokenizer=..."
        ) from e


def _ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(int(v) for v in value)


def _first_id(*values: Any) -> int:
    return next(int(v) for v in values if v is not None)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
