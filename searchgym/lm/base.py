"""The language-model interface shared by agents, env components and trainers.

A :class:`LanguageModel` turns a batch of prompts (text or token ids) into
:class:`Generation` records that carry exactly the ids the backend sampled and their
log-probabilities, so a trainer never has to decode and re-tokenize generated text.
"""

from __future__ import annotations

import hashlib
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError

#: Values of :attr:`Generation.finish_reason`.
FINISH_REASONS = ("stop", "length", "prompt_too_long", "error")


@dataclass(frozen=True)
class Generation:
    """One completion of one prompt.

    Attributes:
        text: The generated text. When a stop string ended the generation the text ends
            with that stop string (it is kept, because protocols parse closing tags such
            as ``</search>``). An end-of-sequence token is not part of the text.
        token_ids: Exactly the sampled ids, up to and including the token that completed
            the stop string or the end-of-sequence token. Decoding them gives ``text``,
            plus the characters of the last token that follow the stop string, if any.
        logprobs: Log-probability of each sampled id under the distribution it was
            actually drawn from (after temperature and top-p; at temperature 0, the
            model's log-softmax of the greedy choice). Same length as ``token_ids``.
        finish_reason: ``"stop"`` (a stop string or end-of-sequence token ended it),
            ``"length"`` (``max_new_tokens`` or the model's context ran out) or
            ``"prompt_too_long"`` (the prompt fills the model's context; nothing was
            generated) or ``"error"`` (an agent could not keep the episode's record, so
            nothing was generated: ``searchgym.agents.base.FAILED``).
    """

    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    finish_reason: str

    def __post_init__(self) -> None:
        if len(self.token_ids) != len(self.logprobs):
            raise ConfigError(
                f"Generation expects as many logprobs as token_ids, got {len(self.logprobs)} "
                f"logprobs for {len(self.token_ids)} token ids."
            )
        if self.finish_reason not in FINISH_REASONS:
            raise ConfigError(
                f"Generation expects finish_reason to be one of {', '.join(FINISH_REASONS)}, "
                f"got {self.finish_reason!r}."
            )


@dataclass(frozen=True)
class SamplingParams:
    """Validated arguments of :meth:`LanguageModel.generate`."""

    max_new_tokens: int
    temperature: float
    top_p: float
    stop: tuple[str, ...]
    #: One seed per prompt (see :meth:`LanguageModel.generate`), or ``None``: unseeded.
    seed: tuple[int, ...] | None
    #: Sample among the ``top_k`` most likely tokens only; 0 keeps them all.
    top_k: int = 0


class LanguageModel(ABC):
    """A batched text generator with a Hugging Face tokenizer.

    Subclasses implement :meth:`_generate` over token-id prompts; :meth:`generate`
    validates the arguments and tokenizes text prompts first.

    Text prompts are tokenized as they are, without adding special tokens: format chat
    prompts with :meth:`apply_chat`, whose template already writes any BOS token.
    """

    tokenizer: Any
    #: Whether calls from several threads at once are served side by side (a server that
    #: batches the requests in flight): what ``run_episodes(mode="async")`` needs of an
    #: agent's model. A local engine decodes one call at a time.
    concurrent: bool = False
    #: Whether the model was closed (its engine stopped): :func:`~searchgym.lm.registry.load_lm`
    #: then loads a new one instead of handing out the cached instance.
    closed: bool = False

    def generate(
        self,
        prompts: Sequence[str | Sequence[int]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int | Sequence[int] | None = None,
        top_k: int = 0,
    ) -> list[Generation]:
        """Generate one completion per prompt.

        Args:
            prompts: Text prompts or token-id prompts (they may be mixed).
            max_new_tokens: Most tokens generated per prompt.
            temperature: 0 for greedy decoding; otherwise logits are divided by it.
            top_p: Nucleus sampling mass in (0, 1]; 1 keeps the whole distribution.
            top_k: Sample among the ``top_k`` most likely tokens only (applied before
                ``top_p``, as Hugging Face and vLLM do); 0 keeps them all.
            stop: Strings that end a completion; the stop string is kept in the text.
            seed: One seed per prompt, or an integer ``s`` meaning ``s, s + 1, ...`` in
                prompt order. Each prompt is sampled from its own random stream, seeded
                with its seed, so its completion depends on its prompt, its seed and the
                sampling parameters only: not on the other prompts of the call, nor on
                what else a batching driver decodes beside it (up to the floating-point
                rounding of batched products). ``None`` draws fresh randomness.

        Returns:
            One :class:`Generation` per prompt, in order.
        """
        prompts = check_prompts(prompts)
        params = check_sampling_params(
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, stop=stop, seed=seed, num_prompts=len(prompts),
            top_k=top_k,
        )
        prompt_ids = [self._prompt_ids(prompt, i) for i, prompt in enumerate(prompts)]
        if not prompt_ids:
            return []
        return self._generate(prompt_ids, params)

    @abstractmethod
    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        """Generate from non-empty token-id prompts with validated parameters."""

    def apply_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        """Format chat ``messages`` (``{"role", "content"}`` dicts) as a prompt for the assistant's turn."""
        return chat_prompt(self.tokenizer, messages, owner=f"{type(self).__name__}.apply_chat")

    def _prompt_ids(self, prompt: str | Sequence[int], index: int) -> list[int]:
        if isinstance(prompt, str):
            ids = list(self.tokenizer.encode(prompt, add_special_tokens=False))
        else:
            ids = list(prompt)
        if not ids:
            raise ConfigError(
                f"LanguageModel.generate expects non-empty prompts, got an empty prompt at index {index}."
            )
        return ids


def chat_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]], *, owner: str = "chat_prompt", **template_options: Any) -> str:
    """``messages`` formatted by ``tokenizer``'s chat template as the prompt of the assistant's
    turn (text, not ids: the template writes any BOS token itself). ``template_options`` go
    to the template (e.g. ``enable_thinking=False``); ``owner`` names the caller in errors."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise ConfigError(
            f"{owner} expects a tokenizer with a chat template, got "
            f"{type(tokenizer).__name__} without one. Set tokenizer.chat_template or "
            f"format the prompt yourself."
        )
    return tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False, **template_options)


#: The smallest positive temperature: below it, logits / temperature overflow float32.
MIN_TEMPERATURE = 1e-4


def check_sampling_params(
    *, max_new_tokens: object, temperature: object, top_p: object, stop: object, seed: object, num_prompts: int = 1,
    top_k: object = 0,
) -> SamplingParams:
    """Validate the keyword arguments of :meth:`LanguageModel.generate` for a call with
    ``num_prompts`` prompts; an integer seed becomes one seed per prompt."""
    where = "LanguageModel.generate expects"
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ConfigError(f"{where} max_new_tokens to be a positive integer, got {max_new_tokens!r}.")
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, (int, float))
        or not math.isfinite(temperature)
        or temperature < 0
        or 0 < temperature < MIN_TEMPERATURE
    ):
        raise ConfigError(
            f"{where} temperature to be 0 (greedy) or a finite number >= {MIN_TEMPERATURE:g}, got {temperature!r}."
        )
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ConfigError(f"{where} top_p to be a number in (0, 1], got {top_p!r}.")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise ConfigError(f"{where} top_k to be a non-negative integer (0 keeps every token), got {top_k!r}.")
    if isinstance(stop, str):
        raise ConfigError(
            f"{where} stop to be a sequence of strings, got the string {stop!r}. Wrap it in a list: [{stop!r}]."
        )
    if not isinstance(stop, Sequence) or not all(isinstance(s, str) and s for s in stop):
        raise ConfigError(f"{where} stop to be a sequence of non-empty strings, got {stop!r}.")
    return SamplingParams(
        int(max_new_tokens), float(temperature), float(top_p), tuple(stop), _per_prompt_seeds(seed, num_prompts), int(top_k)
    )


def _per_prompt_seeds(seed: object, num_prompts: int) -> tuple[int, ...] | None:
    where = "LanguageModel.generate expects seed to be"
    if seed is None:
        return None
    if _is_int(seed):
        seeds = tuple(int(seed) + i for i in range(num_prompts))  # type: ignore[call-overload]
    else:
        if isinstance(seed, (str, bytes)) or not isinstance(seed, Sequence) or not all(_is_int(s) for s in seed):
            raise ConfigError(f"{where} an integer, a sequence of integers (one per prompt) or None, got {seed!r}.")
        if len(seed) != num_prompts:
            raise ConfigError(f"{where} one integer per prompt, got {len(seed)} seeds for {num_prompts} prompts.")
        seeds = tuple(int(s) for s in seed)
    bad = [s for s in seeds if not 0 <= s < SEED_LIMIT]
    if bad:
        raise ConfigError(f"{where} in [0, 2**63) (one seed per prompt: seed + i for an integer seed), got {bad[0]}.")
    return seeds


#: Seeds are in ``[0, SEED_LIMIT)`` (what :func:`derive_seed` returns; a torch generator's range).
SEED_LIMIT = 2**63


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def derive_seed(*parts: object) -> int:
    """A seed in ``[0, 2**63)`` determined by ``parts`` (their ``repr``), the same in every
    process: for instance one sampling stream per (agent seed, question, episode seed,
    turn)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def check_prompts(prompts: object) -> list[str | list[int]]:
    """Validate a batch of prompts: each one text or a sequence of non-negative token ids."""
    if isinstance(prompts, str) or not isinstance(prompts, Sequence):
        raise ConfigError(
            f"LanguageModel.generate expects a sequence of prompts (strings or token-id lists), "
            f"got {type(prompts).__name__}. Wrap a single prompt in a list."
        )
    checked: list[str | list[int]] = []
    for i, prompt in enumerate(prompts):
        if isinstance(prompt, str):
            checked.append(prompt)
            continue
        ids = _as_int_list(prompt)
        if ids is None:
            raise ConfigError(
                f"LanguageModel.generate expects each prompt to be a string or a sequence of "
                f"non-negative token ids, got {prompt!r} at index {i}."
            )
        checked.append(ids)
    return checked


def _as_int_list(prompt: object) -> list[int] | None:
    # numpy arrays and torch tensors are not Sequences but iterate to integer scalars.
    if not hasattr(prompt, "__iter__") or isinstance(prompt, (bytes, Mapping)):
        return None
    ids = []
    try:
        tokens = list(prompt)  # type: ignore[call-overload]
    except TypeError:  # e.g. a 0-d tensor
        return None
    for token in tokens:
        if isinstance(token, bool):
            return None
        try:
            value = int(token)
        except (TypeError, ValueError):
            return None
        if value != token or value < 0:
            return None
        ids.append(value)
    return ids


def stop_end(text: str, stop: Sequence[str]) -> int | None:
    """End index of the earliest-ending occurrence of any stop string in ``text``, or None."""
    best: int | None = None
    for s in stop:
        i = text.find(s)
        if i >= 0 and (best is None or i + len(s) < best):
            best = i + len(s)
    return best
