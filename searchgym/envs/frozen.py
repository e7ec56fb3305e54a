"""Frozen models the reward recipes call: the s3 generator, the R-Search reader, a judge.

A frozen model is a plain callable. ``make_frozen`` accepts a callable, a built-in name
(``"gold-span"``), a :class:`~searchgym.lm.base.LanguageModel`, a model name that
:func:`searchgym.lm.registry.load_lm` resolves (``"smollm2"``, a local folder, a cached
Hugging Face id), or a mapping naming the model with its backend, the backend's options
and the role's sampling settings::

    reader={"model": "meta-llama/Llama-3.2-3B-Instruct", "backend": "openai",
            "base_url": "http://127.0.0.1:8000/v1", "temperature": 0.1, "top_p": 0.9, "max_new_tokens": 512}

A language model becomes the role's LM version (:mod:`searchgym.envs.lm_frozen`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.base import LanguageModel


def _gold_span() -> Callable[..., Any]:
    from searchgym.rewards import GoldSpanReader

    return GoldSpanReader()


#: Keys of a mapping spec that configure the role (its sampling), not the model's backend.
ROLE_OPTIONS = ("max_new_tokens", "temperature", "top_p")

#: Built-in frozen models by name. ``gold-span`` is a perfect reader: it answers with a
#: gold answer exactly when the context contains one (an upper bound, and LM-free).
FROZEN_MODELS: dict[str, Callable[[], Callable[..., Any]]] = {"gold-span": _gold_span}


def with_frozen_models(env_id: str, kwargs: Mapping[str, Any], *, frozen: Any = None, summarizer: str | None = None, summarizer_model: Any = None) -> dict[str, Any]:
    """``gym.make`` arguments of ``env_id`` with its frozen components filled in, unless
    ``kwargs`` sets them already: ``frozen`` as the generator (s3) or reader (R-Search),
    and ``summarizer`` (with ``summarizer_model`` as the model of the ``"llm"`` one)."""
    from searchgym.envs.registration import env_spec

    spec = env_spec(env_id)
    out = dict(kwargs)
    if frozen is not None:
        for role in ("generator", "reader"):
            if role in spec:
                out.setdefault(role, frozen)
    if summarizer is not None and "summarizer" not in out:
        out["summarizer"] = summarizer
        if summarizer == "llm":
            if summarizer_model is None:
                raise ConfigError("summarizer='llm' needs a frozen model to summarize with; name one (e.g. 'smollm2').")
            out.setdefault("summarizer_options", {"model": summarizer_model})
    return out


def make_frozen(role: str, spec: Any, *, backend: str = "transformers", options: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The callable for ``role`` (generator, reader or judge).

    ``spec``: a callable; a name in :data:`FROZEN_MODELS`; a :class:`LanguageModel`; a
    model name loaded with ``backend``; or a mapping with ``"model"`` (a name), optional
    ``"backend"`` (``transformers``, ``vllm``, ``openai``), the role's sampling settings
    (:data:`ROLE_OPTIONS`) and any other key as an option of the backend (``base_url``,
    ``api_key``, ``device``...). ``options`` configure the LM version (e.g.
    ``max_new_tokens``, ``temperature``).
    """
    from searchgym.envs.lm_frozen import lm_frozen

    if isinstance(spec, Mapping):
        return _from_mapping(role, spec, backend, options)
    if isinstance(spec, str) and spec in FROZEN_MODELS:
        return FROZEN_MODELS[spec]()
    if isinstance(spec, str) and spec:
        from searchgym.lm.registry import load_lm

        try:
            spec = load_lm(spec, backend=backend)
        except ConfigError as e:
            # The cause (chained) tells which model forms the backend accepts.
            from searchgym.lm.hf import MODEL_NAMES

            raise UnknownNameError(f"{role} model", spec, [*FROZEN_MODELS, *MODEL_NAMES]) from e
    if isinstance(spec, LanguageModel):
        return lm_frozen(role, spec, **dict(options or {}))
    if not callable(spec):
        raise ConfigError(
            f"SearchEnv expects {role}= to be a callable, one of {sorted(FROZEN_MODELS)} or a language model "
            f"(a LanguageModel or a model name such as 'smollm2'), got {type(spec).__name__}."
        )
    return spec


def _from_mapping(role: str, spec: Mapping[str, Any], backend: str, options: Mapping[str, Any] | None) -> Callable[..., Any]:
    """The LM version of ``role`` described by a mapping spec (see :func:`make_frozen`)."""
    from searchgym.envs.lm_frozen import lm_frozen
    from searchgym.lm.registry import load_lm

    model = spec.get("model")
    if not isinstance(model, str) or not model:
        raise ConfigError(
            f"SearchEnv expects {role}= as a mapping to name its model, e.g. "
            f"{{'model': 'smollm2', 'backend': 'transformers'}}, got keys {sorted(map(str, spec))}."
        )
    backend_options = {k: v for k, v in spec.items() if k not in ("model", "backend", *ROLE_OPTIONS)}
    role_options = {**dict(options or {}), **{k: v for k, v in spec.items() if k in ROLE_OPTIONS}}
    lm = load_lm(model, backend=spec.get("backend", backend), **backend_options)
    return lm_frozen(role, lm, **role_options)
