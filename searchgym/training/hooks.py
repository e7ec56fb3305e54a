"""Trainer hooks: a user's code that runs inside a training run, named by ``module:attr``.

A method that keeps the game but changes how it is trained (ZeroSearch's noise curriculum
over its simulated search engine, a curriculum over questions, R1-Searcher++'s group
bonus, extra logging) is a hook, listed in ``Args.hooks`` (``searchgym train --hooks
my_hooks:Curriculum``). A hook is any object with one or more of the methods of
:class:`TrainerHook`; subclassing it is optional. ``module:attr`` may name

- a class: it is instantiated with no arguments,
- a function taking no arguments that returns the hook (a factory), or
- a hook object itself.

The methods, in the order a step calls them:

``before_rollout(trainer, step)``
    After the step's envs are built, before its episodes are played (a schedule sets the
    noise of a retriever here). ``trainer.envs`` are the training envs, ``trainer.retrieval``
    their shared retriever, ``trainer.args`` the run's :class:`~searchgym.training.Args`;
    ``step`` is the number of steps done (0 on the first).
``group_rewards(results)``
    Sees the ``n`` episodes of one question together (``EpisodeResult`` objects, with
    ``turn_rewards`` and ``trajectory``) and returns their new episode rewards (a list of
    ``n`` finite numbers), or None to leave them. The new rewards are what the step trains
    on and what its ``reward`` metric averages. With ``Args.credit="turn"`` an episode's
    change is credited to its last turn (its ``turn_rewards`` stay the env's). Hooks run in
    the order listed; each sees the rewards the previous one returned.
``on_step(trainer, step, stats)``
    After the step's update and metrics row (``stats``: a copy of that row, ``step``: the
    number of steps done, counting this one): schedules, curricula, logging.

A hook that raises, or returns other than the above, stops the run with a
:class:`~searchgym.error.HookError` that names it, the method and the step. The hooks'
``module:attr`` strings are part of the run's settings (a resumed run must list the same);
a hook keeps no state across a resume unless it rebuilds it from ``trainer.step``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any

from searchgym.error import ConfigError, HookError
from searchgym.plugins import describe_object, is_object_spec, load_object

#: The methods a trainer hook may define (at least one).
HOOK_METHODS = ("before_rollout", "group_rewards", "on_step")


class TrainerHook:
    """A base class for trainer hooks whose methods do nothing (see the module docstring);
    override the ones a method needs."""

    def before_rollout(self, trainer: Any, step: int) -> None:
        """Called before the step's episodes are played (after its envs are built)."""

    def group_rewards(self, results: Sequence[Any]) -> Sequence[float] | None:
        """The new rewards of one question's ``n`` episodes, or None to keep them."""
        return None

    def on_step(self, trainer: Any, step: int, stats: dict[str, Any]) -> None:
        """Called after each step's update, with that step's metrics row."""


@dataclass(frozen=True)
class LoadedHook:
    """A hook object and the ``module:attr`` it was named by (its name in errors)."""

    name: str
    hook: Any

    def defines(self, method: str) -> bool:
        """Whether the hook has ``method`` of its own (not :class:`TrainerHook`'s no-op)."""
        own = getattr(type(self.hook), method, None)
        return callable(getattr(self.hook, method, None)) and own is not getattr(TrainerHook, method)


def _hook_methods(obj: Any) -> list[str]:
    return [m for m in HOOK_METHODS if callable(getattr(obj, m, None))]


def check_hook_specs(specs: Any, *, owner: str = "Args.hooks") -> None:
    """Refuse a bad hook list before any model loads: ``specs`` must be a list of
    ``module:attr`` strings, each importable and naming a class or object with a method
    of :data:`HOOK_METHODS`, or a function (a factory, checked when it is called)."""
    if isinstance(specs, str) or not isinstance(specs, (list, tuple)):
        raise ConfigError(f"{owner} expects a list of module:attr strings such as ['my_hooks:Curriculum'], got {specs!r}.")
    for spec in specs:
        if not is_object_spec(spec):
            raise ConfigError(f"{owner} expects module:attr strings such as my_hooks:Curriculum, got {spec!r}.")
        obj = load_object(spec, what="trainer hook")
        # A function is a factory (its hook is checked when it is called); a class or object needs a method.
        if (isinstance(obj, type) or not callable(obj)) and not _hook_methods(obj):
            raise ConfigError(
                f"The trainer hook {spec!r} expects a class or object with a method {', '.join(HOOK_METHODS)}, "
                f"got {describe_object(obj)}, which has none of them (subclass searchgym.training.hooks.TrainerHook)."
            )


def load_hooks(specs: Sequence[str]) -> list[LoadedHook]:
    """The hooks of ``Args.hooks``, built: a class is instantiated, a factory called, an
    object taken as it is (see the module docstring)."""
    check_hook_specs(specs)
    hooks = []
    for spec in specs:
        obj = load_object(spec, what="trainer hook")
        if isinstance(obj, type) or (callable(obj) and not _hook_methods(obj)):
            what = "class" if isinstance(obj, type) else "factory"
            try:
                obj = obj()
            except Exception as e:  # a user's constructor may raise anything: name it
                raise ConfigError(f"The trainer hook {spec!r} could not be built: its {what} raised {type(e).__name__}: {e}.") from e
            if not _hook_methods(obj):
                raise ConfigError(
                    f"The trainer hook {spec!r} expects its {what} to return an object with a method "
                    f"{', '.join(HOOK_METHODS)}, got {describe_object(obj)}."
                )
        hooks.append(LoadedHook(spec, obj))
    return hooks


def call_hook(hook: LoadedHook, method: str, step: int, *args: Any) -> Any:
    """``hook.method(*args)``; what it raises becomes a :class:`HookError` naming the hook,
    the method and ``step`` (the steps done), with the exception's text."""
    try:
        return getattr(hook.hook, method)(*args)
    except HookError:
        raise
    except Exception as e:  # a user's hook may raise anything: the run stops, naming it
        raise HookError(
            f"Step {step + 1}: the trainer hook {hook.name!r} failed in {method}: {type(e).__name__}: {e}", hook=hook.name
        ) from e


def apply_group_rewards(hooks: Sequence[LoadedHook], results: Sequence[Any], *, n: int, step: int) -> int:
    """Run every hook's ``group_rewards`` on each question's ``n`` consecutive results and
    set the rewards they return (``result.reward``); the number of rewards changed."""
    changed = 0
    for hook in hooks:
        if not hook.defines("group_rewards"):
            continue
        for start in range(0, len(results), n):
            group = list(results[start : start + n])
            new = call_hook(hook, "group_rewards", step, group)
            if new is None:
                continue
            if isinstance(new, (str, bytes)) or not isinstance(new, Sequence) or len(new) != len(group):
                raise HookError(
                    f"Step {step + 1}: the trainer hook {hook.name!r} group_rewards expects a list of {len(group)} numbers "
                    f"(one per episode of the question) or None, got {new!r}.", hook=hook.name,
                )
            for result, value in zip(group, new):
                if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
                    raise HookError(
                        f"Step {step + 1}: the trainer hook {hook.name!r} group_rewards expects finite numbers, got {value!r} "
                        f"for example {getattr(result, 'example_id', '?')!r}.", hook=hook.name,
                    )
                if float(value) != result.reward:
                    changed += 1
                result.reward = float(value)
    return changed


__all__ = ["HOOK_METHODS", "LoadedHook", "TrainerHook", "apply_group_rewards", "call_hook", "check_hook_specs", "load_hooks"]
