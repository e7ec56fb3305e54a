"""A :class:`LanguageModel` over a Hugging Face ``transformers`` causal LM.

The decode loop is written here rather than delegated to ``model.generate`` so that the
backend controls exactly what a trainer needs: the sampled ids, their logprobs under the
distribution actually sampled from, per-sequence stop strings and a seeded generator.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from searchgym.error import ConfigError, require
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, stop_end
from searchgym.lm.models import MODEL_FOLDERS

#: Built-in model names (besides local folders and cached Hugging Face ids).
MODEL_NAMES = ("smollm2", "tiny-random")

_DTYPES = ("float32", "float16", "bfloat16")


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

    Prompts are left-padded into one batch and decoded with a KV cache; a sequence that
    finishes leaves the batch (and its cache), so the remaining steps compute only the
    sequences still generating. A prompt that fills the model's context
    (``config.max_position_embeddings``) gets an empty generation with
    ``finish_reason="prompt_too_long"``; the others stop with ``"length"`` when their
    context runs out.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any = None,
        *,
        device: Any = None,
        dtype: Any = None,
        max_batch_size: int = 64,
    ):
        self._torch = torch = require("torch", extra="lm", feature="TransformersLM")
        transformers = require("transformers", extra="lm", feature="TransformersLM")
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise ConfigError(f"TransformersLM expects max_batch_size to be a positive integer, got {max_batch_size!r}.")
        torch_dtype = _resolve_dtype(torch, dtype)
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
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.context_length = int(getattr(model.config, "max_position_embeddings", 0) or 1 << 30)
        self.pad_token_id = _first_id(tokenizer.pad_token_id, tokenizer.eos_token_id, 0)
        self.eos_token_ids = frozenset(
            i for i in (*_ids(tokenizer.eos_token_id), *_ids(getattr(model.generation_config, "eos_token_id", None)))
        )
        self._vocab_size = model.get_input_embeddings().num_embeddings

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        torch = self._torch
        for i, ids in enumerate(prompt_ids):
            if max(ids) >= self._vocab_size:
                raise ConfigError(
                    f"TransformersLM.generate expects token ids below the vocabulary size "
                    f"{self._vocab_size}, got id {max(ids)} in prompt {i}."
                )
        generator = torch.Generator(device=self.device)
        if params.seed is None:
            generator.seed()
        else:
            generator.manual_seed(params.seed)
        results: list[Generation | None] = [None] * len(prompt_ids)
        runnable = []
        for i, ids in enumerate(prompt_ids):
            if len(ids) >= self.context_length:
                results[i] = Generation("", (), (), "prompt_too_long")
            else:
                runnable.append(i)
        for start in range(0, len(runnable), self.max_batch_size):
            chunk = runnable[start : start + self.max_batch_size]
            for i, generation in zip(chunk, self._decode_batch([prompt_ids[i] for i in chunk], params, generator)):
                results[i] = generation
        return results  # type: ignore[return-value]

    def _decode_batch(self, prompts: list[list[int]], params: SamplingParams, generator: Any) -> list[Generation]:
        torch = self._torch
        batch = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((batch, width), self.pad_token_id, dtype=torch.long)  # [B, T]
        attention_mask = torch.zeros((batch, width), dtype=torch.long)  # [B, T]
        for row, ids in enumerate(prompts):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, width - len(ids) :] = 1
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        # Left padding shifts real tokens right; positions must count real tokens only.
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)  # [B, T]
        # Each sequence may grow only until its context is full.
        budgets = [min(params.max_new_tokens, self.context_length - len(p)) for p in prompts]

        tokens: list[list[int]] = [[] for _ in range(batch)]
        logprobs: list[list[float]] = [[] for _ in range(batch)]
        texts = [""] * batch
        finish: list[str | None] = [None] * batch
        live = list(range(batch))  # the prompt index of each row still in the batch
        past = None
        with torch.inference_mode():
            for _ in range(max(budgets)):
                out = self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    position_ids=position_ids,
                    past_key_values=past,
                    use_cache=True,
                )
                past = out.past_key_values
                next_ids, next_logprobs = self._sample(out.logits[:, -1, :], params, generator)  # [L], [L]
                for i, token, logprob in zip(live, next_ids.tolist(), next_logprobs.tolist()):
                    finish[i] = self._append(i, token, logprob, tokens, logprobs, texts, budgets, params)
                keep = [row for row, i in enumerate(live) if finish[i] is None]
                if not keep:
                    break
                if len(keep) < len(live):
                    # Finished rows leave the batch: later steps only compute the live ones.
                    index = torch.tensor(keep, device=self.device)
                    past.batch_select_indices(index)
                    next_ids, attention_mask, position_ids = next_ids[index], attention_mask[index], position_ids[index]
                    live = [live[row] for row in keep]
                    # Columns that are padding in every remaining row are dropped as well.
                    pad = int(attention_mask.sum(0).eq(0).long().cumprod(0).sum())
                    if pad and _crop_left(past, pad, attention_mask.shape[1]):
                        attention_mask = attention_mask[:, pad:]
                input_ids = next_ids.unsqueeze(-1)  # [L, 1]
                attention_mask = torch.cat([attention_mask, attention_mask.new_ones((len(live), 1))], dim=-1)
                position_ids = position_ids[:, -1:] + 1  # [L, 1]
        return [
            Generation(texts[row], tuple(tokens[row]), tuple(logprobs[row]), finish[row] or "length")
            for row in range(batch)
        ]

    def _append(self, row, token, logprob, tokens, logprobs, texts, budgets, params) -> str | None:
        """Record one sampled token of ``row``; return its finish reason once it is done."""
        tokens[row].append(token)
        logprobs[row].append(logprob)
        if token in self.eos_token_ids:
            return "stop"
        text = self.tokenizer.decode(tokens[row], clean_up_tokenization_spaces=False)
        end = stop_end(text, params.stop)
        if end is not None:
            texts[row] = text[:end]
            return "stop"
        texts[row] = text
        return "length" if len(tokens[row]) >= budgets[row] else None

    def _sample(self, logits: Any, params: SamplingParams, generator: Any) -> tuple[Any, Any]:
        """Pick the next id of every row and its logprob under the distribution used."""
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
        next_ids = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)  # [B]
        return next_ids, logp.gather(-1, next_ids.unsqueeze(-1)).squeeze(-1)


def _crop_left(cache: Any, columns: int, width: int) -> bool:
    """Drop the first ``columns`` positions of every layer of a ``DynamicCache`` whose
    layers all hold ``width`` positions; return False (and change nothing) for any other
    cache, such as one with sliding-window layers."""
    layers = getattr(cache, "layers", None)
    if not layers or any(getattr(layer, "keys", None) is None or layer.keys.shape[-2] != width for layer in layers):
        return False
    for layer in layers:
        layer.keys = layer.keys[..., columns:, :]  # [B, H, T, D]
        layer.values = layer.values[..., columns:, :]
    return True


def _resolve_dtype(torch: Any, dtype: Any) -> Any:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in _DTYPES:
        return getattr(torch, dtype)
    raise ConfigError(
        f"TransformersLM expects dtype to be one of {', '.join(_DTYPES)}, a torch.dtype or None, got {dtype!r}."
    )


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
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path) if path.exists() else name, dtype=dtype, local_files_only=True
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
