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
``keep_group(results)``
    After ``group_rewards``, on the same ``n`` episodes: False drops the question's group
    from the step's batch (DAPO's dynamic sampling drops a group whose answers are all right
    or all wrong). A dropped group is played but not trained on; the step's ``dropped``
    metric counts its episodes.
``more_rollouts(trainer, step, kept, batches)``
    After each generation batch of the step (its ``group_rewards`` and ``keep_group`` done):
    how many more questions to play this step, 0 or None to train on what is kept. ``kept``:
    the groups kept so far, ``batches``: the generation batches played so far (1 after the
    first). Each further batch draws new questions of the data order. With several hooks
    the largest number counts; a hook that asks for more must stop asking (DAPO bounds it
    by a number of generation batches). The step trains on at most
    ``Args.questions_per_step`` kept groups, the first ones (the rest count as dropped).
``step_metrics(trainer, step)``
    Before the step's metrics row is written: a dict of the hook's own columns, each named
    in its ``columns`` attribute (a tuple of names, fixed when the run starts, none of them
    a built-in column); they are written to ``metrics.csv`` (and TensorBoard) with the row.
``on_step(trainer, step, stats)``
    After the step's update and metrics row (``stats``: a copy of that row, ``step``: the
    number of steps done, counting this one): schedules, curricula, logging.

A step whose every group a hook dropped trains nothing: it is skipped, and said so on
stderr (naming the hooks that dropped them): the data order and the step count move on,
no update is made, and its metrics row has the rollout's columns but no loss.

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
HOOK_METHODS = ("before_rollout", "group_rewards", "keep_group", "more_rollouts", "step_metrics", "on_step")


class TrainerHook:
    """A base class for trainer hooks whose methods do nothing (see the module docstring);
    override the ones a method needs."""

    def before_rollout(self, trainer: Any, step: int) -> None:
        """Called before the step's episodes are played (after its envs are built)."""

    def group_rewards(self, results: Sequence[Any]) -> Sequence[float] | None:
        """The new rewards of one question's ``n`` episodes, or None to keep them."""
        return None

    #: The hook's own metrics.csv columns, filled by :meth:`step_metrics`.
    columns: tuple[str, ...] = ()

    def keep_group(self, results: Sequence[Any]) -> bool:
        """Whether one question's ``n`` episodes go into the step's batch (False drops them)."""
        return True

    def more_rollouts(self, trainer: Any, step: int, kept: int, batches: int) -> int | None:
        """How many more questions to play this step (0 or None: none)."""
        return 0

    def step_metrics(self, trainer: Any, step: int) -> dict[str, Any] | None:
        """Values of the hook's :attr:`columns` for the step's metrics row (None: none)."""
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


def keep_groups(hooks: Sequence[LoadedHook], results: Sequence[Any], *, n: int, step: int, dropped: dict[str, int]) -> list[Any]:
    """The results of the questions (``n`` consecutive results each) that every hook's
    ``keep_group`` keeps; ``dropped`` counts the groups each hook dropped, by its name."""
    deciders = [h for h in hooks if h.defines("keep_group")]
    kept: list[Any] = []
    for start in range(0, len(results), n):
        group = list(results[start : start + n])
        for hook in deciders:
            verdict = call_hook(hook, "keep_group", step, group)
            if type(verdict).__name__ not in ("bool", "bool_"):  # a numpy bool too
                raise HookError(
                    f"Step {step + 1}: the trainer hook {hook.name!r} keep_group expects True (keep the question's episodes) "
                    f"or False (drop them), got {verdict!r}.", hook=hook.name,
                )
            if not verdict:
                dropped[hook.name] = dropped.get(hook.name, 0) + 1
                break
        else:
            kept.extend(group)
    return kept


def more_rollouts(hooks: Sequence[LoadedHook], trainer: Any, step: int, *, kept: int, batches: int) -> int:
    """The most questions any hook's ``more_rollouts`` asks to play next this step (0: none)."""
    want = 0
    for hook in hooks:
        if not hook.defines("more_rollouts"):
            continue
        more = call_hook(hook, "more_rollouts", step, trainer, step, kept, batches)
        if more is None:
            continue
        if isinstance(more, bool) or not isinstance(more, int) or more < 0:
            raise HookError(
                f"Step {step + 1}: the trainer hook {hook.name!r} more_rollouts expects a number of questions (an int >= 0) "
                f"or None, got {more!r}.", hook=hook.name,
            )
        want = max(want, more)
    return want


def hook_columns(hooks: Sequence[LoadedHook], *, taken: Sequence[str]) -> list[str]:
    """The metrics.csv columns the hooks declare (their ``columns``), checked: names of their
    own, none a built-in column (``taken``) or another hook's."""
    out: list[str] = []
    owner: dict[str, str] = {}
    for hook in hooks:
        columns = getattr(hook.hook, "columns", ())
        if isinstance(columns, str) or not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) and c for c in columns):
            raise ConfigError(f"The trainer hook {hook.name!r} expects columns to be a tuple of column names, got {columns!r}.")
        for column in columns:
            if column in taken:
                raise ConfigError(f"The trainer hook {hook.name!r} declares the column {column!r}, a built-in metrics.csv column; name it otherwise.")
            if column in owner:
                raise ConfigError(f"The trainer hooks {owner[column]!r} and {hook.name!r} both declare the column {column!r}; give each its own.")
            owner[column] = hook.name
            out.append(column)
    return out


def step_metrics(hooks: Sequence[LoadedHook], trainer: Any, step: int) -> dict[str, Any]:
    """The hooks' own columns of the step's metrics row (each hook's ``step_metrics``)."""
    row: dict[str, Any] = {}
    for hook in hooks:
        if not hook.defines("step_metrics"):
            continue
        values = call_hook(hook, "step_metrics", step, trainer, step)
        if values is None:
            continue
        columns = tuple(getattr(hook.hook, "columns", ()))
        if not isinstance(values, dict) or any(k not in columns for k in values):
            raise HookError(
                f"Step {step + 1}: the trainer hook {hook.name!r} step_metrics expects a dict of its own columns "
                f"({', '.join(columns) or 'none declared: set its columns attribute'}), got {values!r}.", hook=hook.name,
            )
        bad = {k: v for k, v in values.items() if v is not None and (isinstance(v, bool) or not isinstance(v, (Real, str)))}
        if bad:
            raise HookError(f"Step {step + 1}: the trainer hook {hook.name!r} step_metrics expects numbers or strings, got {bad!r}.", hook=hook.name)
        row.update(values)
    return row


__all__ = [
    "HOOK_METHODS", "LoadedHook", "TrainerHook", "apply_group_rewards", "call_hook", "check_hook_specs", "hook_columns",
    "keep_groups", "load_hooks", "more_rollouts", "step_metrics",
]
