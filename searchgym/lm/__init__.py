"""Language-model backends shared by agents, env components and trainers.

``LanguageModel.generate`` returns :class:`Generation` records with the exact sampled
ids and their logprobs. Backends: :class:`TransformersLM` (``transformers``' batched
``generate``, CPU or CUDA), :class:`~searchgym.lm.vllm.VLLMLM` (vLLM's engine, CUDA or
CPU), :class:`~searchgym.lm.vllm_async.AsyncVLLMLM` (vLLM's async engine, serving calls
from several threads side by side), :class:`~searchgym.lm.http.OpenAILM` (an
OpenAI-compatible server) and
:class:`ScriptedLM` (replays given texts, for tests); :func:`~searchgym.lm.registry.load_lm`
picks one by name. The torch-based backend is imported lazily so that
``import searchgym.lm`` needs no torch.
"""

from __future__ import annotations

from typing import Any

from searchgym.lm.base import FINISH_REASONS, Generation, LanguageModel, SamplingParams
from searchgym.lm.scripted import ScriptedLM

__all__ = ["FINISH_REASONS", "Generation", "LanguageModel", "SamplingParams", "ScriptedLM", "TransformersLM"]


def __getattr__(name: str) -> Any:
    if name == "TransformersLM":
        from searchgym.lm.hf import TransformersLM

        return TransformersLM
    raise AttributeError(f"module 'searchgym.lm' has no attribute {name!r}")
