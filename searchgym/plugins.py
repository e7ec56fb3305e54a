"""How a user's own pieces reach searchgym: ``module:attr`` paths, ``--import``, settings.

Every piece a method changes (a reward recipe, a protocol, a retriever, an env wrapper, an
env id, a trainer hook, an agent) is named the same way from Python and from every
command: a built-in or registered name, or ``module:attr`` (``attr`` may be dotted), the
object an importable module holds. A module named by ``--import`` (or ``Args.imports``,
``BenchConfig.imports``) is imported first, so that it can fill the registries
(``searchgym.rewards.RECIPES``, ``searchgym.envs.protocols.PROTOCOLS``,
``searchgym.corpora.register_retriever``, Gymnasium's ``register``) before any name is
checked.

A user object states its own settings for the resume checks (:func:`settings_of`): a run
is resumed only when every piece's settings equal the recorded ones, never by ``repr``
(which may hold a memory address, or leave out the weights that changed).

This module is the foundation layer: it imports nothing of searchgym but the errors.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any

from searchgym.error import ConfigError, UnknownNameError

#: ``module:attr``: a dotted module path, a colon, a dotted attribute path. A URL
#: (``http://...``) or a drive letter path does not match: neither part may hold a slash.
OBJECT_SPEC = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def is_object_spec(value: Any) -> bool:
    """Whether ``value`` is a ``module:attr`` string (not a name, URL or path)."""
    return isinstance(value, str) and OBJECT_SPEC.fullmatch(value) is not None


def _importable_here() -> None:
    # `searchgym bench --reward my_rewards:Mine` run next to my_rewards.py, as Python itself would find it.
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)


def import_module(name: str, *, what: str = "module") -> Any:
    """Import ``name`` (the current directory on the path); a :class:`ConfigError` naming
    it and quoting the import's own error if it fails, whatever the module raised."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*", name):
        raise ConfigError(f"{what} expects an importable module name such as my_methods or pkg.rewards, got {name!r}.")
    _importable_here()
    try:
        return importlib.import_module(name)
    except Exception as e:  # a user module may raise anything while it runs: report it by name
        raise ConfigError(
            f"Cannot import {name!r} for {what} ({type(e).__name__}: {e}); it must be importable from the current "
            "directory or an installed package, and run without error."
        ) from e


def import_modules(names: Iterable[str]) -> list[Any]:
    """Import every module of ``--import`` in order (each may fill registries)."""
    if isinstance(names, str):
        names = [names]
    return [import_module(name, what="--import") for name in names]


def load_object(spec: str, *, what: str) -> Any:
    """The object ``module:attr`` names, importing ``module`` (the current directory on the path).

    ``what`` names the piece in errors (e.g. ``"reward recipe"``). A bad path, a module
    that fails to import and a missing attribute are each a :class:`ConfigError` that
    quotes the spec and the import's own error.
    """
    if not is_object_spec(spec):
        raise ConfigError(
            f"The {what} given as module:attr expects both parts, a module and an attribute (e.g. my_methods:MyThing), "
            f"got {spec!r}."
        )
    module_name, _, attribute = spec.partition(":")
    _importable_here()
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # a user module may raise anything while it runs: report it by name
        raise ConfigError(
            f"Cannot import the module of {what} {spec!r} ({type(e).__name__}: {e}); it must be importable from the "
            "current directory or an installed package, and run without error."
        ) from e
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"The {what} {spec!r} names nothing: module {module_name!r} has no attribute {attribute!r}.")
        obj = getattr(obj, part)
    return obj


def piece_source(spec: Any, *, base: type, registry: Mapping[str, Any], what: str, noun: str, kind: str) -> Any:
    """What the spec of one piece names, checked without building it.

    ``spec`` itself if it is a ``base`` instance or subclass; the class a name of
    ``registry`` holds (a user module may add its own); or the object ``"module:attr"``
    names, which must be a ``base`` subclass, an instance or a factory. An unknown name is an
    :class:`UnknownNameError` listing ``registry`` (``kind`` names it); a path that does not
    import, names nothing or names something else is a :class:`ConfigError` (``what`` and
    ``noun`` name the piece: ``"reward recipe"``, ``"recipe"``). Entry points call it before
    any model loads.
    """
    if isinstance(spec, base) or isinstance(spec, type) and issubclass(spec, base):
        return spec
    if is_object_spec(spec):
        target = load_object(spec, what=what)
        if isinstance(target, base) or isinstance(target, type) and issubclass(target, base):
            return target
        if callable(target) and not isinstance(target, type):
            return target
        got = f"the class {target.__name__}" if isinstance(target, type) else type(target).__name__
        raise ConfigError(
            f"The {what} {spec!r} expects a {base.__name__} subclass, a {noun} instance or a factory returning one, got {got}."
        )
    if not isinstance(spec, str) or spec not in registry:
        raise UnknownNameError(kind, spec, registry)
    return registry[spec]


def describe_object(obj: Any) -> str:
    """``module:qualname`` of a class or function (the instance's class for an instance)."""
    target = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', type(target).__qualname__)}"


def settings_of(obj: Any) -> Any:
    """The settings that identify ``obj`` for a resume check, as JSON-able data.

    - plain data (None, bool, int, float, str, paths, enums, lists, tuples, dicts): itself;
    - an object with a ``settings()`` method: ``{"class": "module:Class", "settings": ...}``
      of what it returns (the documented way for a user object to state its settings);
    - a dataclass instance: its class and its fields' settings;
    - a class or function: its ``module:qualname``;
    - anything else: a :class:`ConfigError` asking for ``settings()``: its ``repr`` could
      hold a memory address (refusing an identical run) or leave out what changed
      (resuming a different one).
    """
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else repr(obj)
    if isinstance(obj, enum.Enum):
        return f"{describe_object(obj)}.{obj.name}"
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, Mapping):
        return {str(k): settings_of(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [settings_of(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((settings_of(v) for v in obj), key=repr)
    method = getattr(obj, "settings", None)
    if callable(method) and not isinstance(obj, type):
        return {"class": describe_object(obj), "settings": settings_of(method())}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: settings_of(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"class": describe_object(obj), "settings": fields}
    if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") and hasattr(obj, "__module__"):
        return describe_object(obj)
    raise ConfigError(
        f"Cannot tell the settings of a {type(obj).__name__} ({describe_object(obj)}) for the resume check: define a "
        "settings() method returning its settings as plain data (numbers, strings, lists, dicts), or make it a "
        "dataclass."
    )


def recorded_settings(obj: Any) -> Any:
    """:func:`settings_of` where ``obj`` can say its settings; elsewhere (a loaded model, an
    object without ``settings()``) its ``module:Class``, never its ``repr``: what the resume
    checks record. Such an object's own changes then go unseen, so a user object that
    matters to the results defines ``settings()`` (a reward recipe has one by default)."""
    if isinstance(obj, Mapping):
        return {str(k): recorded_settings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [recorded_settings(v) for v in obj]
    try:
        return settings_of(obj)
    except ConfigError:
        return {"class": describe_object(obj)}


#: Option names whose values are credentials: run folders record ``NOT_RECORDED`` in their place.
SECRET_OPTIONS = frozenset({"api_key", "apikey", "token", "auth_token", "access_token", "bearer_token",
                            "hf_token", "secret", "client_secret", "password"})
NOT_RECORDED = "<secret: not recorded>"


def without_secrets(obj: Any) -> Any:
    """``obj`` (JSON-like) with the value of every :data:`SECRET_OPTIONS` key, at any depth,
    replaced by :data:`NOT_RECORDED`: what ``config.json`` and ``args.json`` keep of an API
    key passed as an option (it then changes no resume check, as ``OPENAI_API_KEY`` does not)."""
    if isinstance(obj, Mapping):
        return {k: NOT_RECORDED if str(k).lower() in SECRET_OPTIONS and v is not None else without_secrets(v)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_secrets(v) for v in obj]
    return obj


def settings_changes(recorded: Any, now: Any, *, where: str = "") -> list[str]:
    """Where two records of settings differ inside user objects' settings, one line each
    (``"setting 'weight' of my_rewards:Weighted: 1.0 recorded, 2.0 now"``): the detail a
    refused resume gives beside the field names."""
    if recorded == now:
        return []
    if isinstance(recorded, dict) and isinstance(now, dict):
        if set(recorded) == {"class", "settings"} == set(now):
            if recorded["class"] != now["class"]:
                return [f"{recorded['class']} recorded, {now['class']} now"]
            return settings_changes(recorded["settings"], now["settings"], where=f"of {now['class']}")
        out = []
        for key in sorted(set(recorded) | set(now)):
            if recorded.get(key) != now.get(key):
                if where and not isinstance(now.get(key), (dict, list)):
                    out.append(f"setting {key!r} {where}: {recorded.get(key)!r} recorded, {now.get(key)!r} now")
                else:
                    out.extend(settings_changes(recorded.get(key), now.get(key), where=where))
        return out
    if isinstance(recorded, list) and isinstance(now, list) and len(recorded) == len(now):
        return [line for a, b in zip(recorded, now) for line in settings_changes(a, b, where=where)]
    return [f"settings {where}: {recorded!r} recorded, {now!r} now"] if where else []


def apply_wrappers(env: Any, wrappers: Iterable[Any]) -> Any:
    """``env`` with each wrapper applied in order: ``wrapper(env) -> env``, a callable or the
    ``module:attr`` naming one (a Gymnasium wrapper class is such a callable). What each returns
    must still be a Gymnasium env."""
    import gymnasium as gym

    for spec in wrappers:
        wrapper = load_object(spec, what="env wrapper") if isinstance(spec, str) else spec
        if not callable(wrapper):
            raise ConfigError(f"An env wrapper expects a callable wrapper(env) -> env, got {type(wrapper).__name__} for {spec!r}.")
        env = wrapper(env)
        if not isinstance(env, gym.Env):
            raise ConfigError(f"The env wrapper {spec!r} expects to return a gymnasium.Env, got {type(env).__name__}.")
    return env


def check_wrappers(wrappers: Any, *, owner: str) -> None:
    """``wrappers`` is a list of callables or ``module:attr`` paths that import (checked before any model loads)."""
    if isinstance(wrappers, str) or not isinstance(wrappers, (list, tuple)):
        raise ConfigError(f"{owner} expects wrappers as a list of module:attr paths or callables, got {type(wrappers).__name__}.")
    for spec in wrappers:
        wrapper = load_object(spec, what="env wrapper") if isinstance(spec, str) else spec
        if not callable(wrapper):
            raise ConfigError(f"{owner} expects each env wrapper to be callable as wrapper(env) -> env, got {type(wrapper).__name__} for {spec!r}.")


def check_imports(imports: Any, *, owner: str) -> list[Any]:
    """Import ``imports`` (a list of module names) after checking its type; the modules."""
    if isinstance(imports, str) or not isinstance(imports, (list, tuple)):
        raise ConfigError(f"{owner} expects imports as a list of module names, got {type(imports).__name__} {imports!r}.")
    return import_modules(imports)


__all__ = [
    "OBJECT_SPEC", "apply_wrappers", "recorded_settings", "settings_changes", "check_imports", "check_wrappers", "describe_object", "import_module", "import_modules", "is_object_spec", "load_object", "settings_of",
]
