"""Language models by name: one loaded model shared by every component that asks for it.

``load_lm("smollm2")`` gives a :class:`~searchgym.lm.hf.TransformersLM`;
``load_lm("smollm2", backend="vllm")`` the same weights in vLLM's engine;
``load_lm("Qwen/Qwen2.5-7B-Instruct", backend="openai", base_url=...)`` a model served
elsewhere. An agent, the RECON summarizer and the s3 generator that name the same model
with the same backend and options share one instance (one copy of the weights).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from typing import Any

from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.base import LanguageModel

#: Backend name -> "module:class"; imported on first use so that heavy engines stay optional.
BACKENDS: dict[str, str] = {
    "transformers": "searchgym.lm.hf:TransformersLM",
    "vllm": "searchgym.lm.vllm:VLLMLM",
    "vllm-async": "searchgym.lm.vllm_async:AsyncVLLMLM",
    "openai": "searchgym.lm.http:OpenAILM",
}

_CACHE: dict[tuple[str, str, tuple[tuple[str, str], ...]], LanguageModel] = {}
_LOCK = threading.Lock()


def backend_class(backend: str) -> type[LanguageModel]:
    """The :class:`LanguageModel` subclass registered as ``backend``."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise UnknownNameError("language-model backend", backend, BACKENDS)
    module, _, cls = BACKENDS[backend].partition(":")
    return getattr(importlib.import_module(module), cls)


def load_lm(spec: Any, *, backend: str = "transformers", cache: bool = True, **options: Any) -> LanguageModel:
    """A language model from a name, or ``spec`` itself if it already is one.

    Args:
        spec: A :class:`LanguageModel` (returned unchanged; ``options`` must then be
            empty), a built-in name (``"smollm2"``, ``"tiny-random"``), a local folder,
            a cached Hugging Face id, or (``backend="openai"``) the served model's name.
        backend: One of :data:`BACKENDS`.
        cache: Reuse the instance loaded earlier in this process with the same
            ``spec``, ``backend`` and ``options``, unless it was closed since.
        options: Passed to the backend's constructor (e.g. ``device``, ``dtype``,
            ``base_url``).
    """
    if isinstance(spec, LanguageModel):
        if options:
            raise ConfigError(
                f"load_lm got a LanguageModel instance and also options {sorted(options)}; "
                "options only apply when loading by name. Configure the instance instead."
            )
        return spec
    if not isinstance(spec, str) or not spec:
        raise ConfigError(
            f"load_lm expects a LanguageModel or a model name (built-in name, local folder or "
            f"Hugging Face id), got {spec!r}."
        )
    cls = backend_class(backend)
    _check_options(cls, backend, options)
    key = (spec, backend, _freeze(options))
    if not cache:
        return cls(spec, **options)
    with _LOCK:
        if key not in _CACHE or _CACHE[key].closed:
            _CACHE[key] = cls(spec, **options)
        return _CACHE[key]


def _check_options(cls: type, backend: str, options: Mapping[str, Any]) -> None:
    """Options the backend's constructor does not take fail here, by name."""
    import inspect

    parameters = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [n for n, p in parameters.items() if n not in ("self", "model") and p.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        import difflib

        hints = [f"{u!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(u, accepted, n=1)) else repr(u) for u in unknown]
        raise ConfigError(f"The {backend} backend does not take the option {', '.join(hints)}; it takes: {', '.join(accepted)}.")


def loaded_as(lm: LanguageModel) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    """``(spec, backend, options)`` :func:`load_lm` loaded ``lm`` with (cached), or None for
    a model it did not load: what loads the same model in another process."""
    with _LOCK:
        return next((key for key, cached in _CACHE.items() if cached is lm), None)


def clear_cache() -> None:
    """Forget the models loaded by :func:`load_lm` (their memory is freed once unused)."""
    with _LOCK:
        _CACHE.clear()


def _freeze(options: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    # repr() keys tolerate unhashable option values (lists, dicts) while staying exact for
    # the plain values options hold.
    return tuple(sorted((k, repr(v)) for k, v in options.items()))
