"""A language model that replays given texts, for tests and scripted baselines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from searchgym.error import ConfigError
from searchgym.lm.base import Generation, LanguageModel, SamplingParams, stop_end


class ScriptedLM(LanguageModel):
    """Answers every prompt with a scripted text, token by token like a real backend.

    Args:
        responses: Texts handed out in turn (cycling across calls), or a callable that
            receives the decoded prompt and returns the response.
        tokenizer: Hugging Face tokenizer used to tokenize responses and decode prompts.

    The response is tokenized and replayed one token at a time: a stop string ends it
    (kept in the text), ``max_new_tokens`` cuts it (``finish_reason="length"``), and a
    response that ends on its own is followed by the tokenizer's end-of-sequence id, if
    it has one and there is room, as a real model would emit (``finish_reason="stop"``).
    Every logprob is 0.0: the script is certain.
    """

    def __init__(self, responses: Sequence[str] | Callable[[str], str], tokenizer: Any):
        if callable(responses):
            self._respond: Callable[[str], str] | None = responses
            self._responses: tuple[str, ...] = ()
        else:
            if isinstance(responses, str) or not isinstance(responses, Sequence) or not responses:
                raise ConfigError(
                    f"ScriptedLM expects responses to be a non-empty sequence of strings or a "
                    f"callable (prompt) -> str, got {responses!r}."
                )
            if not all(isinstance(r, str) for r in responses):
                raise ConfigError(f"ScriptedLM expects every response to be a string, got {responses!r}.")
            self._respond = None
            self._responses = tuple(responses)
        self.tokenizer = tokenizer
        self._next = 0

    def _response_for(self, prompt_ids: list[int]) -> str:
        if self._respond is not None:
            response = self._respond(self.tokenizer.decode(prompt_ids))
            if not isinstance(response, str):
                raise ConfigError(
                    f"ScriptedLM expects its response callable to return a string, got {type(response).__name__}."
                )
            return response
        response = self._responses[self._next % len(self._responses)]
        self._next += 1
        return response

    def _generate(self, prompt_ids: list[list[int]], params: SamplingParams) -> list[Generation]:
        return [self._replay(self._response_for(ids), params) for ids in prompt_ids]

    def _replay(self, response: str, params: SamplingParams) -> Generation:
        ids = list(self.tokenizer.encode(response, add_special_tokens=False))
        # Decode growing prefixes, as a streaming backend does, so the stop string is found
        # at the token that completes it.
        for n in range(1, min(len(ids), params.max_new_tokens) + 1):
            text = self.tokenizer.decode(ids[:n])
            end = stop_end(text, params.stop)
            if end is not None:
                return Generation(text[:end], tuple(ids[:n]), (0.0,) * n, "stop")
        if len(ids) >= params.max_new_tokens:
            n = params.max_new_tokens
            return Generation(self.tokenizer.decode(ids[:n]), tuple(ids[:n]), (0.0,) * n, "length")
        text = self.tokenizer.decode(ids)
        eos = self.tokenizer.eos_token_id
        if eos is not None:
            ids.append(eos)
        return Generation(text, tuple(ids), (0.0,) * len(ids), "stop")
