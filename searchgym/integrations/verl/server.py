"""A searchgym language model behind verl's rollout-server interface.

verl's agent loops generate through ``LLMServerClient.generate``, which routes each request
through verl's load balancer to a server actor's ``generate(prompt_ids, sampling_params,
request_id, ...) -> TokenOutput`` (on GPUs, verl's vLLM or SGLang server). This class
answers the same call with any :class:`~searchgym.lm.base.LanguageModel` (transformers,
vLLM, an OpenAI-compatible server), so verl's own client, load balancer and agent-loop
workers run on a machine without a GPU: for checking a dataset, an env and the agent loop
before a GPU run, and in searchgym's tests. It does not take weight updates from verl's
trainer; training on GPUs uses verl's own servers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from searchgym.error import ConfigError
from searchgym.lm.base import LanguageModel
from searchgym.lm.registry import load_lm

#: Sampling keys verl's agent loops send, and what the server does with them.
SUPPORTED_SAMPLING = ("temperature", "top_p", "top_k", "repetition_penalty", "logprobs", "max_tokens", "max_new_tokens", "stop", "seed")


class LanguageModelServer:
    """Serves ``generate`` as verl's rollout servers do, with a searchgym language model.

    Args:
        model: A :class:`LanguageModel`, or a name / folder for
            :func:`~searchgym.lm.registry.load_lm` (e.g. ``"tiny-random"``, a saved model).
        backend: The backend ``load_lm`` uses for a name (``"transformers"``, ``"vllm"``, ``"openai"``).
        max_model_len: The context length, as in verl's rollout config: a prompt that leaves
            no room to generate is refused, and ``max_tokens`` is capped by what is left.
        default_max_tokens: ``max_tokens`` of a request that sends none.
        options: Passed to ``load_lm``.

    Wrap it with ``ray.remote`` to make the server actor verl's load balancer routes to.
    """

    def __init__(
        self,
        model: Any,
        *,
        backend: str = "transformers",
        max_model_len: int = 4096,
        default_max_tokens: int = 512,
        **options: Any,
    ):
        self.lm: LanguageModel = load_lm(model, backend=backend, **options)
        for name, value in (("max_model_len", max_model_len), ("default_max_tokens", default_max_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"LanguageModelServer expects {name} to be a positive integer, got {value!r}.")
        self.max_model_len = max_model_len
        self.default_max_tokens = default_max_tokens
        # One generation at a time: the backends batch within a call, not across threads.
        self._lock = threading.Lock()
        self.num_requests = 0

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: Mapping[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        priority: int = 0,
        **_: Any,
    ) -> TokenOutput:
        """Token ids in, sampled token ids (with their logprobs when ``logprobs`` is true) out."""
        if image_data is not None or video_data is not None or audio_data is not None:
            raise ConfigError("LanguageModelServer serves text models; got image, video or audio data. Use verl's vLLM or SGLang server.")
        kwargs, want_logprobs = self._generate_kwargs(list(prompt_ids), dict(sampling_params))
        generation = await asyncio.to_thread(self._generate_one, list(prompt_ids), kwargs)
        return TokenOutput(
            token_ids=list(generation.token_ids),
            log_probs=list(generation.logprobs) if want_logprobs else None,
            stop_reason="completed",
            num_preempted=0,
            extra_fields={"finish_reason": generation.finish_reason},
        )

    def _generate_one(self, prompt_ids: list[int], kwargs: dict[str, Any]) -> Any:
        with self._lock:
            self.num_requests += 1
            return self.lm.generate([prompt_ids], **kwargs)[0]

    def _generate_kwargs(self, prompt_ids: list[int], params: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        unknown = sorted(set(params) - set(SUPPORTED_SAMPLING))
        if unknown:
            raise ConfigError(
                f"LanguageModelServer expects sampling params among {', '.join(SUPPORTED_SAMPLING)}, got {', '.join(unknown)}. "
                "Drop them from the agent loop's sampling params or use verl's vLLM server."
            )
        top_k = params.get("top_k", -1)
        if top_k not in (-1, 0, None):
            raise ConfigError(f"LanguageModelServer samples without top-k; expects top_k -1 (off), got {top_k!r}. Set rollout.top_k=-1.")
        if params.get("repetition_penalty", 1.0) != 1.0:
            raise ConfigError(
                f"LanguageModelServer samples without a repetition penalty; expects repetition_penalty 1.0, got {params['repetition_penalty']!r}."
            )
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ConfigError(
                f"LanguageModelServer got a prompt of {len(prompt_ids)} tokens, which leaves no room to generate within "
                f"max_model_len={self.max_model_len}. Raise max_model_len or shorten the prompt."
            )
        max_tokens = params.get("max_tokens", params.get("max_new_tokens", self.default_max_tokens))
        kwargs = {
            "max_new_tokens": max(1, min(int(max_tokens), room)),
            "temperature": float(params.get("temperature", 1.0)),
            "top_p": float(params.get("top_p", 1.0)),
            "stop": list(params.get("stop") or ()),
            "seed": params.get("seed"),
        }
        return kwargs, bool(params.get("logprobs", False))
