"""Frozen models the reward recipes call: the s3 generator, the R-Search reader, a judge.

A frozen model is a plain callable. ``make_frozen`` accepts a callable, a built-in name
(``"gold-span"``), a :class:`~searchgym.lm.base.LanguageModel`, a model name that
:func:`searchgym.lm.registry.load_lm` resolves (``"smollm2"``, a local folder, a cached
Hugging Face id), or a mapping naming the model with its backend, the backend's options
and the role's sampling settings::

    reader={"model": "meta-llama/Llama-3.2-3B-Instruct", "backend": "openai",
            "base_url": "http://127.0.0.1:8000/v1", "temperature": 0.1, "top_p": 0.9, "max_new_tokens": 512}

A language model becomes the role's LM version (:mod:`searchgym.envs.components.lm_frozen`).
:func:`make_scoring` builds an env's reward recipe with the frozen models it names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from searchgym.corpora.types import Passage
from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.base import LanguageModel
from searchgym.rewards import GoldSpanReader, RewardRecipe, make_recipe, recipe_accepts, recipe_source


def _gold_span() -> Callable[..., Any]:
    return GoldSpanReader()


#: Keys of a mapping spec that configure the role (its sampling, its prompt), not the model's backend.
ROLE_OPTIONS = ("max_new_tokens", "temperature", "top_p", "prompt")

#: Built-in frozen models by name. ``gold-span`` is a perfect reader: it answers with a
#: gold answer exactly when the context contains one (an upper bound, and LM-free).
FROZEN_MODELS: dict[str, Callable[[], Callable[..., Any]]] = {"gold-span": _gold_span}


def doc_text(p: Passage) -> str:
    """A passage as the frozen models read it: title, newline, text."""
    return f"{p.title}\n{p.text}"


def make_frozen(role: str, spec: Any, *, backend: str = "transformers", options: Mapping[str, Any] | None = None) -> Callable[..., Any]:
    """The callable for ``role`` (generator, reader or judge).

    ``spec``: a callable; a name in :data:`FROZEN_MODELS`; a :class:`LanguageModel`; a
    model name loaded with ``backend``; or a mapping with ``"model"`` (a name), optional
    ``"backend"`` (``transformers``, ``vllm``, ``openai``), the role's sampling settings
    (:data:`ROLE_OPTIONS`) and any other key as an option of the backend (``base_url``,
    ``api_key``, ``device``...). ``options`` configure the LM version (e.g.
    ``max_new_tokens``, ``temperature``).
    """
    from searchgym.envs.components.lm_frozen import lm_frozen

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
    from searchgym.envs.components.lm_frozen import lm_frozen
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


def make_scoring(reward: Any, options: Mapping[str, Any] | None, corpus: Any = None, **frozen: Any) -> RewardRecipe:
    """The reward recipe of SearchEnv's ``reward=`` with its ``reward_options`` and the frozen
    models it uses, made by :func:`make_frozen`. A recipe with a ``set_corpus(corpus)`` method
    is handed ``corpus`` (the env's) once built, to read passages by id (StepSearch's gold
    supporting passages); ``None`` where the env has none.

    ``reward``: a name in :data:`~searchgym.rewards.RECIPES`, ``"module:attr"`` naming a
    recipe class, a factory or an instance (:func:`~searchgym.rewards.make_recipe`), or a
    recipe object. A class or factory takes the frozen models it declares in ``needs`` and
    ``optional``, like the built-ins."""
    frozen = {k: v for k, v in frozen.items() if v is not None}
    source = recipe_source(reward)  # an unknown name or a bad path fails here, before any frozen model loads
    if isinstance(source, RewardRecipe):
        if frozen or options:
            raise ConfigError(
                f"SearchEnv got a reward recipe object and also {sorted(frozen) + sorted(options or {})}; "
                "pass the frozen models and options to the recipe's constructor instead."
            )
        return with_corpus(source, corpus)
    needs, optional = recipe_accepts(source)
    accepted = needs | optional
    unused = sorted(set(frozen) - accepted)
    if unused:
        raise ConfigError(
            f"The {reward!r} reward uses no {' or '.join(unused)}; expected only "
            f"{', '.join(sorted(accepted)) or 'no frozen model'}. Drop the argument or pick a reward that uses it."
        )
    models = {k: make_frozen(k, v) for k, v in frozen.items()}
    return with_corpus(make_recipe(reward, **models, **dict(options or {})), corpus)


def with_corpus(recipe: RewardRecipe, corpus: Any) -> RewardRecipe:
    """``recipe``, handed ``corpus`` first if it has a ``set_corpus`` method (a recipe by shape)."""
    if corpus is not None and callable(getattr(recipe, "set_corpus", None)):
        recipe.set_corpus(corpus)
    return recipe
