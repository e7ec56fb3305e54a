"""Frozen models the reward recipes call: the s3 generator, the R-Search reader, a judge.

Here they are plain callables. Names resolve to built-in ones; language-model versions
plug in through the same slot.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from searchgym.error import ConfigError, UnknownNameError


def _gold_span() -> Callable[..., Any]:
    from searchgym.rewards import GoldSpanReader

    return GoldSpanReader()


#: Built-in frozen models by name. ``gold-span`` is a perfect reader: it answers with a
#: gold answer exactly when the context contains one (an upper bound, and LM-free).
FROZEN_MODELS: dict[str, Callable[[], Callable[..., Any]]] = {"gold-span": _gold_span}


def make_frozen(role: str, spec: Any) -> Callable[..., Any]:
    """The callable for ``role`` (generator, reader or judge) from a name or a callable."""
    if isinstance(spec, str):
        if spec not in FROZEN_MODELS:
            raise UnknownNameError(f"{role} model", spec, FROZEN_MODELS)
        return FROZEN_MODELS[spec]()
    if not callable(spec):
        raise ConfigError(f"SearchEnv expects {role}= to be a callable or one of {sorted(FROZEN_MODELS)}, got {type(spec).__name__}.")
    return spec
