"""A :class:`LanguageModel` over a Hugging Face ``transformers`` causal LM.

Decoding is ``model.generate``'s own batched loop. Two small hooks give it what a
trainer needs: :class:`SeededSampler`, the last logits processor, turns the scores into
the log-probabilities of the distribution to sample from (temperature, top-p) and adds
Gumbel noise drawn from each prompt's own seeded generator, so ``generate``'s greedy
selection draws every row's token from its own stream; and :class:`StopOnText` ends a
row at an end-of-sequence token, a stop string in its generated text or its context's
end. The logprob of each sampled id is read from the processor's output, so it is
exactly the distribution the id was drawn from. On the CPU, :class:`PassClock` marks
where each forward pass starts and ends for a :class:`~searchgym.lm.threads.ThreadTuner`,
which sets the thread count of the passes that follow.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, require
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, stop_end
from searchgym.lm.models import BUILT_IN_NAMES, MODEL_FOLDERS, check_model_name
from searchgym.lm.threads import ThreadTuner, fixed_threads
from searchgym.progress import generated_tokens

#: Built-in model names (besides local folders and cached Hugging Face ids).
MODEL_NAMES = BUILT_IN_NAMES

_DTYPES = ("float32", "float16", "bfloat16")


class TransformersLM(LanguageModel):
    """Batched generation with a ``transformers`` causal LM, on CPU or CUDA.

    Args:
        model: A loaded ``PreTrainedModel`` (used as it is: its modules are not changed,
            and a model in train mode is back in train mode after each call); a local
            folder with ``config.json``; a Hugging Face model id already in the local
            cache (nothing is downloaded); ``"tiny-random"``, the tiny random model of
            :mod:`searchgym.lm.testing`; or ``"smollm2"``, the packaged
            SmolLM2-135M-Instruct (see :mod:`searchgym.lm.models`).
        tokenizer: The tokenizer; by default loaded from the same folder or id.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; ``None`` keeps a given model where
            it is and puts a loaded one on CUDA when available.
        dtype: ``"float32"``, ``"float16"``, ``"bfloat16"`` or a ``torch.dtype``; ``None``
            keeps a given model's dtype and loads others in float32.
        max_batch_size: Most prompts decoded together; larger batches are split.
        threads: Intra-op threads while generating on the CPU. ``"auto"`` (the default)
            sets the count between 1 and ``torch.get_num_threads()`` to the cores the
            process gets, measured over the forward passes of ``generate``
            (:class:`~searchgym.lm.threads.ThreadTuner`): the calling thread's count when
            alone, fewer when another process holds a core (where OpenMP's spinning would
            otherwise make generation several times slower). A positive integer fixes the
            count while generating. Either way the caller's count is restored after each
            call; on CUDA the option changes nothing.

    Prompts are left-padded into batches of at most ``max_batch_size`` and decoded by
    ``model.generate``. A prompt that fills the model's context
    (``config.max_position_embeddings``) gets an empty generation with
    ``finish_reason="prompt_too_long"``; the others stop with ``"length"`` when their
    context runs out. Each seeded prompt samples from a generator of its own, so its
    completion does not depend on the other prompts of the batch.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: Any = None,
        dtype: Any = None,
        max_batch_size: int = 64,
        threads: int | str = "auto",
    ):
        if isinstance(model, str):
            check_model_name(model, "TransformersLM")  # before torch and transformers load (seconds)
        self._torch = torch = require("torch", extra="lm", feature="TransformersLM")
        transformers = require("transformers", extra="lm", feature="TransformersLM")
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ConfigError(f"TransformersLM expects max_batch_size to be a positive integer, got {max_batch_size!r}.")
        if threads != "auto" and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise ConfigError(
                f"TransformersLM expects threads to be 'auto' (tuned while generating) or a positive integer, got {threads!r}."
            )
        torch_dtype = _resolve_dtype(torch, dtype)
        device = _check_device(torch, device)
        if isinstance(model, str):
            model, tokenizer = load_model(model, tokenizer=tokenizer, dtype=torch_dtype)
            device = device if device is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu")
        elif not isinstance(model, transformers.PreTrainedModel):
            raise ConfigError(
                f"TransformersLM expects model to be a transformers PreTrainedModel or a name "
                f"(local folder, cached Hugging Face id, or one of {', '.join(MODEL_NAMES)}), "
                f"got {type(model).__name__}."
            )
        if tokenizer is None:
            tokenizer = _load_tokenizer(transformers, model.name_or_path)
        if device is not None or torch_dtype is not None:
            model = model.to(device=device, dtype=torch_dtype)
        self.model = model
        self.device = next(model.parameters()).device
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.pad_token_id = _first_id(tokenizer.pad_token_id, tokenizer.eos_token_id, 0)
        self.eos_token_ids = frozenset(
            i for i in (*_ids(tokenizer.eos_token_id), *_ids(getattr(model.generation_config, "eos_token_id", None)))
        )
        self._vocab_size = model.get_input_embeddings().num_embeddings
        self._mode_lock = threading.Lock()
        self._callers = 0  # generate calls in progress (they may come from several threads)
        self._caller_mode = False
        self.threads = threads
        self._tuners = threading.local()  # thread counts are per thread: each calling thread tunes its own

    @property
    def tuner(self) -> ThreadTuner | None:
        """The calling thread's :class:`~searchgym.lm.threads.ThreadTuner` (None unless
        ``threads="auto"`` on the CPU); it carries its count from one call to the next."""
        if self.threads != "auto" or self.device.type != "cpu":
            return None
        tuner = getattr(self._tuners, "tuner", None)
        if tuner is None:
            tuner = self._tuners.tuner = ThreadTuner(self._torch)
        return tuner

    @contextmanager
    def _thread_count(self) -> Iterator[ThreadTuner | None]:
        """The tuned (or fixed) thread count inside, the caller's after; the tuner to step, if any."""
        tuner = self.tuner
        if tuner is not None:
            with tuner.session():
                yield tuner
        elif self.device.type == "cpu" and isinstance(self.threads, int):
            with fixed_threads(self._torch, self.threads):
                yield None
        else:
            yield None

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        self._check_vocabulary(prompt_ids)
        results: list[Generation | None] = [None] * len(prompt_ids)
        runnable = []
        for i, ids in enumerate(prompt_ids):
            if len(ids) >= self.context_length:
                results[i] = Generation("", (), (), "prompt_too_long")
            else:
                runnable.append(i)
        generators = self._generators(params, len(prompt_ids))
        with self._eval_mode(), self._thread_count() as tuner:
            for start in range(0, len(runnable), self.max_batch_size):
                rows = runnable[start : start + self.max_batch_size]
                chunk = self._decode([prompt_ids[i] for i in rows], params, [generators[i] for i in rows], tuner)
                for i, generation in zip(rows, chunk):
                    results[i] = generation
        return results  # type: ignore[return-value]

    def _generators(self, params: SamplingParams, count: int) -> list[Any]:
        """Each prompt's random stream: its own seeded generator, one fresh generator
        shared by an unseeded call, or None everywhere when greedy (nothing is drawn)."""
        if params.temperature == 0:
            return [None] * count
        if params.seed is not None:
            return [self._generator(seed) for seed in params.seed]
        return [self._generator(None)] * count

    def _decode(self, prompts: list[list[int]], params: SamplingParams, generators: list[Any], tuner: ThreadTuner | None = None) -> list[Generation]:
        """One ``model.generate`` call over left-padded ``prompts``; ``tuner`` measures its forward passes."""
        torch = self._torch
        transformers = require("transformers", extra="lm", feature="TransformersLM")
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)  # [B, S]
        attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)  # [B, S]
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids)
            attention_mask[row, width - len(ids) :] = 1
        budgets = [min(params.max_new_tokens, self.context_length - len(ids)) for ids in prompts]
        sampler = SeededSampler(params.temperature, params.top_p, generators, top_k=params.top_k)
        stopper = StopOnText(self.tokenizer, width, params.stop, self.eos_token_ids, budgets)
        config = transformers.GenerationConfig(
            max_new_tokens=max(budgets),
            do_sample=False,  # greedy over the sampler's perturbed scores: a draw from each row's stream
            num_beams=1,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_length=0,
            eos_token_id=None,  # StopOnText ends rows at end-of-sequence ids too, with the reason
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
        )
        processors, criteria = [sampler], [stopper]
        if tuner is not None:
            clock = PassClock(tuner)
            processors, criteria = [clock, sampler], [stopper, clock.next_pass]
            tuner.start_pass()  # the prefill
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention_mask.to(self.device),
                generation_config=config,
                logits_processor=transformers.LogitsProcessorList(processors),
                stopping_criteria=transformers.StoppingCriteriaList(criteria),
            )
        new_ids = out.sequences[:, width:]  # [B, N]
        logprobs = sampler.logprobs(new_ids)  # [B, N]
        generations = []
        for row in range(len(prompts)):
            n, finish = stopper.ended[row] if stopper.ended[row] else (new_ids.shape[1], "length")
            tokens = new_ids[row, :n].tolist()
            generations.append(Generation(stopper.texts[row], tuple(tokens), tuple(logprobs[row, :n].tolist()), finish))
        return generations

    @contextmanager
    def _eval_mode(self) -> Iterator[None]:
        """The model in eval mode (no dropout) while any call generates; the caller's
        mode (train mode for a policy being trained) when the last one ends."""
        with self._mode_lock:
            if self._callers == 0:
                self._caller_mode = self.model.training
                self.model.eval()
            self._callers += 1
        try:
            yield
        finally:
            with self._mode_lock:
                self._callers -= 1
                if self._callers == 0:
                    self.model.train(self._caller_mode)

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


class SeededSampler:
    """The last logits processor of a :class:`TransformersLM` call.

    It returns the log-probabilities of the distribution to sample from (the model's
    at temperature 0; otherwise scores / temperature, cut to the top-p nucleus) plus,
    when sampling, Gumbel noise ``-log(-log u)`` with ``u`` uniform from row ``r``'s
    generator ``generators[r]``: the greedy choice over that is a draw from the
    distribution (the Gumbel-max trick), from each row's own stream. Each call keeps its
    log-probabilities until the next, where the ids just chosen pick theirs out;
    :meth:`logprobs` reads them all.
    """

    def __init__(self, temperature: float, top_p: float, generators: list[Any], *, top_k: int = 0):
        self.temperature, self.top_p, self.generators, self.top_k = temperature, top_p, generators, top_k
        self._last: Any = None  # [B, V] log-probabilities of the latest step
        self._chosen: list[Any] = []  # per step, [B] log-probability of the id chosen

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        if self._last is not None:
            self._chosen.append(self._last.gather(-1, input_ids[:, -1:]).squeeze(-1))  # [B]
        logits = scores.float()  # [B, V]
        if self.temperature == 0:
            self._last = torch.log_softmax(logits, dim=-1)
            return self._last
        logits = logits / self.temperature
        if 0 < self.top_k < logits.shape[-1]:
            # Keep the top_k largest logits (ties at the k-th value kept too), before top-p.
            kth = logits.topk(self.top_k, dim=-1).values[:, -1:]  # [B, 1]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p < 1:
            sorted_logits, order = logits.sort(dim=-1, descending=True)  # [B, V]
            sorted_probs = sorted_logits.softmax(dim=-1)
            # Drop a token when the tokens ranked above it already hold top_p of the mass;
            # the most likely token is always kept.
            drop = sorted_probs.cumsum(dim=-1) - sorted_probs >= self.top_p  # [B, V]
            sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
            logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)
        self._last = logp = torch.log_softmax(logits, dim=-1)  # [B, V]
        like = {"device": logp.device, "dtype": logp.dtype}
        if all(g is self.generators[0] for g in self.generators):  # one stream (an unseeded call)
            u = torch.rand(logp.shape, generator=self.generators[0], **like)
        else:  # each row from its own stream, so its draws do not depend on the other rows
            u = torch.cat([torch.rand((1, logp.shape[-1]), generator=g, **like) for g in self.generators])
        # u = 0 gives -inf noise: never chosen; a token cut by top-p stays at -inf.
        return logp - torch.log(-torch.log(u))  # [B, V]

    def logprobs(self, new_ids: Any) -> Any:
        """``[B, N]`` log-probabilities of the ``[B, N]`` generated ids."""
        import torch

        chosen = list(self._chosen)
        if self._last is not None and len(chosen) < new_ids.shape[1]:
            chosen.append(self._last.gather(-1, new_ids[:, -1:]).squeeze(-1))
        return torch.stack(chosen, dim=1) if chosen else new_ids.new_zeros(new_ids.shape, dtype=torch.float32)


class PassClock:
    """Marks the forward passes of one ``generate`` call for a
    :class:`~searchgym.lm.threads.ThreadTuner`.

    ``generate`` calls its logits processors right after each forward pass and its
    stopping criteria right before the next one. The clock is the first logits processor
    (the pass ends: it returns the scores unchanged) and ``next_pass``, the last stopping
    criterion, starts the next (it stops no row). The tuner thus measures the model's
    passes, not the sampling and stop-string work between them, and sets the count of
    the passes that follow.
    """

    def __init__(self, tuner: ThreadTuner):
        self.tuner = tuner
        self.next_pass = _NextPass(tuner)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        self.tuner.end_pass()
        return scores


class _NextPass:
    """The stopping criterion of a :class:`PassClock`: starts the tuner's next pass."""

    def __init__(self, tuner: ThreadTuner):
        self.tuner = tuner

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.tuner.start_pass()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # [B]


class StopOnText:
    """The stopping criterion of a :class:`TransformersLM` call: row ``r`` ends at an
    end-of-sequence id, when its generated text contains a stop string, or after
    ``budgets[r]`` tokens. ``ended[r]`` is then ``(tokens kept, finish reason)`` and
    ``texts[r]`` its text (cut after the stop string)."""

    def __init__(self, tokenizer: Any, prompt_width: int, stop: tuple[str, ...], eos_ids: frozenset[int], budgets: list[int]):
        self.tokenizer, self.prompt_width, self.stop, self.eos_ids, self.budgets = tokenizer, prompt_width, stop, eos_ids, budgets
        self.ended: list[tuple[int, str] | None] = [None] * len(budgets)
        self.texts = [""] * len(budgets)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # [B]
        generated = input_ids[:, self.prompt_width :].tolist()
        generated_tokens(sum(ended is None for ended in self.ended))  # progress displays move per token
        for row, tokens in enumerate(generated):
            if self.ended[row] is not None:
                done[row] = True
                continue
            n = len(tokens)
            if tokens[-1] in self.eos_ids:
                self.ended[row] = (n, "stop")
                self.texts[row] = self.tokenizer.decode(tokens[:-1], clean_up_tokenization_spaces=False)
            else:
                text = self.tokenizer.decode(tokens, clean_up_tokenization_spaces=False)
                end = stop_end(text, self.stop)
                self.texts[row] = text if end is None else text[:end]
                if end is not None:
                    self.ended[row] = (n, "stop")
                elif n >= self.budgets[row]:
                    self.ended[row] = (n, "length")
            done[row] = self.ended[row] is not None
        return done


def load_model(name: str, *, tokenizer: Any = None, dtype: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a model name, offline: ``"tiny-random"``, a built-in name
    of :data:`MODEL_NAMES`, a local folder with ``config.json`` or a Hugging Face id
    already in the local cache. ``dtype`` (a ``torch.dtype`` or one of ``"float32"``,
    ``"float16"``, ``"bfloat16"``; ``None``: the checkpoint's) is the weights' type; a
    given ``tokenizer`` is returned instead of loading one."""
    check_model_name(name, "TransformersLM")
    transformers = require("transformers", extra="lm", feature="TransformersLM")
    dtype = _resolve_dtype(require("torch", extra="lm", feature="TransformersLM"), dtype)
    if name == "tiny-random":
        from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer

        model = tiny_causal_lm()
        return (model.to(dtype) if dtype is not None else model), tokenizer if tokenizer is not None else tiny_tokenizer()
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


def _resolve_dtype(torch: Any, dtype: Any) -> Any:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise ConfigError(
        f"TransformersLM expects dtype to be one of {', '.join(_DTYPES)}, a torch.dtype or None, got {dtype!r}."
    )


def _check_device(torch: Any, device: Any) -> Any:
    """``device`` as a ``torch.device`` this machine has (``None`` stays ``None``)."""
    if device is None:
        return None
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"TransformersLM expects device to be a torch device such as 'cpu', 'cuda' or 'cuda:1', got {device!r} ({_one_line(e)}).") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"TransformersLM got device={device!r}, but this torch has no CUDA device; use device='cpu'.")
    return resolved


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
