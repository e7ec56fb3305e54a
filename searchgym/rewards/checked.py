"""Calling a recipe the way every scoring path does: its failures become one episode's error.

A user recipe can raise, or return a NaN, an infinity or a string. Added to a reward, any of
these would poison a whole training batch or a benchmark's mean; raised as it is, it would
look like a bug of searchgym. :func:`checked_score` and :func:`checked_turn_reward` call the
recipe, check what it returned, and turn every failure into a
:class:`~searchgym.error.RecipeError` that names the recipe and the example and quotes the
exception, which drivers and benchmarks record as that episode's ``error``.

A :class:`~searchgym.error.BackendError` (a frozen model's server down) passes as it is: it
is not the recipe's fault, and the env undoes the turn so that it can be played again.
"""

from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Mapping
from typing import Any

from searchgym.error import BackendError, RecipeError
from searchgym.rewards.base import Episode, RewardRecipe, RewardResult

#: The name of a turn reward given as one number, and the prefix of a mapping's names, in
#: ``info["reward_components"]``; the components of ``score`` may not use them.
TURN_COMPONENT = "turn"


def recipe_label(recipe: Any) -> str:
    """How errors name ``recipe``: ``'name' (module:Class)``, or ``module:Class`` without a name."""
    cls = type(recipe)
    where = f"{cls.__module__}:{cls.__qualname__}"
    name = getattr(recipe, "name", None)
    return f"{name!r} ({where})" if isinstance(name, str) and name else where


def pays_turns(recipe: Any) -> bool:
    """Whether ``recipe`` overrides :meth:`~searchgym.rewards.RewardRecipe.turn_reward` (or, not
    a :class:`~searchgym.rewards.RewardRecipe`, has a callable ``turn_reward``): only then does
    the env build a record after each turn and ask it."""
    method = getattr(type(recipe), "turn_reward", None)
    return callable(method) and method is not RewardRecipe.turn_reward


def is_finite_number(value: Any) -> bool:
    """A real number (numpy's too) that is neither NaN nor infinite; ``bool`` is not a reward."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def checked_score(recipe: Any, episode: Episode) -> RewardResult:
    """``recipe.score(episode)``, or a :class:`~searchgym.error.RecipeError` if it raised or did not
    return a :class:`~searchgym.rewards.RewardResult` whose total and components are finite numbers."""
    try:
        result = recipe.score(episode)
    except BackendError:
        raise
    except Exception as e:
        raise _raised(recipe, "score()", episode, e) from e
    where = f"score() on example {episode.example_id!r}"
    if not isinstance(result, RewardResult):
        raise _bad(recipe, where, "a RewardResult(total, components)", f"{type(result).__name__} {result!r}")
    if not is_finite_number(result.total):
        raise _bad(recipe, where, "a finite number as total", _show(result.total))
    if not isinstance(result.components, Mapping):
        raise _bad(recipe, where, "a mapping of names to numbers as components", _show(result.components))
    for name, value in result.components.items():
        if not isinstance(name, str) or not is_finite_number(value):
            raise _bad(recipe, where, "every component to be a finite number named by a string", f"{name!r}: {_show(value)}")
    return result


def checked_turn_reward(recipe: Any, episode: Episode) -> dict[str, float]:
    """What ``recipe.turn_reward(episode)`` pays, as named components (``{}`` for ``None``, a
    number as ``{"turn": x}``, a mapping's names prefixed ``turn/``), or a
    :class:`~searchgym.error.RecipeError` if it raised or returned anything else."""
    turn = episode.turns[-1].round + 1 if episode.turns else 0  # as the env's info["turn"]
    try:
        value = recipe.turn_reward(episode)
    except BackendError:
        raise
    except Exception as e:
        raise _raised(recipe, f"turn_reward() at turn {turn}", episode, e) from e
    where = f"turn_reward() on example {episode.example_id!r} at turn {turn}"
    expected = "None, a finite number or a mapping of names to finite numbers"
    if value is None:
        return {}
    if is_finite_number(value):
        return {TURN_COMPONENT: float(value)}
    if not isinstance(value, Mapping):
        raise _bad(recipe, where, expected, _show(value))
    components = {}
    for name, part in value.items():
        if not isinstance(name, str) or not is_finite_number(part):
            raise _bad(recipe, where, expected, f"{name!r}: {_show(part)} in {dict(value)!r}")
        components[f"{TURN_COMPONENT}/{name}"] = float(part)
    return components


def join_components(recipe: Any, episode: Episode, score: Mapping[str, float], turn: Mapping[str, float]) -> dict[str, float]:
    """The last step's components: ``score``'s and the last turn's. A name of ``score`` that a turn
    reward's could take (``turn``, ``turn/...``) is refused, so that no number hides another."""
    if turn or pays_turns(recipe):
        clash = [n for n in score if n == TURN_COMPONENT or n.startswith(f"{TURN_COMPONENT}/")]
        if clash:
            raise _bad(
                recipe, f"score() on example {episode.example_id!r}",
                f"component names other than {TURN_COMPONENT!r} and {TURN_COMPONENT + '/...'!r} (the turn rewards' names)",
                repr(clash[0]) + "; rename it",
            )
    return {**score, **turn}


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _raised(recipe: Any, method: str, episode: Episode, error: Exception) -> RecipeError:
    label = recipe_label(recipe)
    # Where it was raised (the user's file and line), which the RecipeError's own traceback hides
    # from a one-line record of the episode.
    last = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    where = f" (at {last[0].filename}:{last[0].lineno})" if last else ""
    return RecipeError(
        f"Reward recipe {label} raised in {method} on example {episode.example_id!r}: {type(error).__name__}: {error}{where}",
        recipe=label,
    )


def _bad(recipe: Any, where: str, expected: str, got: str) -> RecipeError:
    label = recipe_label(recipe)
    return RecipeError(f"Reward recipe {label} {where} expects {expected}, got {got}.", recipe=label)
