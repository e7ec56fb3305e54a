"""Frozen models the reward recipes call: the s3 generator, the R-Search reader, a judge.

A frozen model is a plain callable. ``make_frozen`` accepts a callable, a built-in name
(``"gold-span"``), a :class:`~searchgym.lm.base.LanguageModel`, or a model name that
:func:`searchgym.lm.registry.load_lm` resolves (``"smollm2"``, a local folder, a cached
Hugging Face id); a language model becomes the role's LM version
(:mod:`searchgym.envs.lm_frozen`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.base import LanguageModel


def _gold_span() -> Callable[..., Any]:
    from searchgym.rewards import GoldSpanReader

    return GoldSpanReader()


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

    ``spec``: a callable; a name in :data:`FROZEN_MODELS`; a :class:`LanguageModel`; or a
    model name loaded with ``backend``. ``options`` configure the LM version (e.g.
    ``max_new_tokens``, ``temperature``).
    """
    from searchgym.envs.lm_frozen import lm_frozen

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
