"""A tool a protocol of your own adds to its game in ``action_format="tools"``.

The built-in tools follow the built-in actions (``search``, ``answer``, ``select``,
``finish``: :mod:`searchgym.envs.tools.schemas`). A protocol with an action kind of its own
(AutoRefine's ``Refine(text)``) offers it as a tool by returning a :class:`ToolSpec` from
:meth:`~searchgym.envs.protocols.base.Protocol.extra_tools`::

    ToolSpec("refine", "Distill what the last results say about the question.",
             {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
             action=Refine)

A call is checked against ``parameters`` (missing, unknown or wrong-typed arguments are a bad
call, answered with what was wrong and the invalid-action penalty), then made into actions by
``to_action`` (default ``action(**arguments)``); whatever ``to_action`` raises is a bad call
too, never an exception of the env.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.envs.protocols.base import Invalid, accepts_keyword, is_action
from searchgym.error import ConfigError

#: The JSON types a tool argument may have (an array's items too).
ARGUMENT_TYPES = ("string", "integer", "number", "boolean", "array", "object")

#: What OpenAI accepts as a function name.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


@dataclass(frozen=True)
class ToolSpec:
    """One tool of a protocol's own.

    Args:
        name: The function name the model calls (letters, digits, ``_`` and ``-``, at most 64).
        description: What the tool does, as the model reads it in the tool list.
        parameters: The JSON schema of its arguments: ``{"type": "object", "properties":
            {name: {"type": ..., "description": ...}}, "required": [...]}``, each type among
            :data:`ARGUMENT_TYPES` (an ``array`` names its ``items`` type).
        action: The action class a call makes, built as ``action(**arguments)`` unless
            ``to_action`` is given; also what :meth:`ToolSurface.write
            <searchgym.envs.tools.surface.ToolSurface.write>` writes as this tool.
        to_action: ``arguments -> action`` (or a sequence of actions, or an ``Invalid`` that
            refuses the call with its reason). It may take the keyword
            ``previous_observation``: the text the env showed before the turn.
        to_arguments: ``action -> arguments`` for writing the call back (default: the
            action's dataclass fields named in ``parameters``).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    action: type | None = None
    to_action: Callable[..., Any] | None = None
    to_arguments: Callable[[Any], Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"ToolSpec expects name to be a function name (letters, digits, _ and -, at most 64, not starting with "
                f"a digit), got {self.name!r}."
            )
        if not isinstance(self.description, str):
            raise ConfigError(f"ToolSpec {self.name!r} expects description to be a str, got {type(self.description).__name__}.")
        check_parameters(self.name, self.parameters)
        if self.action is None and self.to_action is None:
            raise ConfigError(
                f"ToolSpec {self.name!r} expects action (the action class a call makes) or to_action (arguments -> "
                "action), got neither."
            )
        if self.action is not None and not (isinstance(self.action, type) and isinstance(getattr(self.action, "kind", None), str)):
            raise ConfigError(f"ToolSpec {self.name!r} expects action to be an Action class (with a kind), got {self.action!r}.")
        if self.to_action is None and dataclasses.is_dataclass(self.action):
            # action(**arguments) must take exactly what the schema lets through: a mismatch is
            # this spec's bug, which would otherwise reach the agent as its bad call.
            fields = {f.name: f for f in dataclasses.fields(self.action) if f.init}
            needed = [n for n, f in fields.items()
                      if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
            properties = list(self.parameters.get("properties", {}))
            required = list(self.parameters.get("required", []))
            if any(p not in fields for p in properties) or any(n not in required for n in needed):
                raise ConfigError(
                    f"ToolSpec {self.name!r} expects its properties to be fields of {self.action.__name__} "
                    f"({', '.join(fields) or 'none'}) and to require {', '.join(needed) or 'none'}, got properties "
                    f"{properties} and required {required}; match them, or pass to_action."
                )
        for field in ("to_action", "to_arguments"):
            value = getattr(self, field)
            if value is not None and not callable(value):
                raise ConfigError(f"ToolSpec {self.name!r} expects {field} to be callable or None, got {type(value).__name__}.")

    @property
    def schema(self) -> dict[str, Any]:
        """The tool as an OpenAI function schema (a fresh copy; no arguments beyond ``parameters``)."""
        properties = {k: dict(v) for k, v in self.parameters.get("properties", {}).items()}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": list(self.parameters.get("required", [])),
                    "additionalProperties": False,
                },
            },
        }

    def actions(self, arguments: Mapping[str, Any], previous_observation: str | None = None) -> tuple[Any, ...]:
        """The actions a call with (already checked) ``arguments`` makes; an ``Invalid`` saying
        what was wrong if ``to_action`` raises or returns something that is not an action."""
        try:
            if self.to_action is None:
                made: Any = self.action(**arguments)  # type: ignore[misc]
            elif accepts_keyword(self.to_action, "previous_observation"):
                made = self.to_action(dict(arguments), previous_observation=previous_observation)
            else:
                made = self.to_action(dict(arguments))
        except Exception as e:  # a call the user's code cannot take is the agent's bad call
            return (Invalid(f"{self.name} could not take these arguments ({type(e).__name__}: {str(e)[:200]})"),)
        acts = (made,) if is_action(made) else tuple(made) if isinstance(made, (list, tuple)) else (made,)
        if not acts or not all(is_action(a) for a in acts):
            return (Invalid(f"{self.name} made no action of its arguments"),)
        return acts

    def arguments(self, action: Any) -> dict[str, Any]:
        """The arguments of a call performing ``action`` (the inverse of :meth:`actions`)."""
        if self.to_arguments is not None:
            return dict(self.to_arguments(action))
        if not dataclasses.is_dataclass(action):
            raise ConfigError(
                f"ToolSpec {self.name!r} cannot write {type(action).__name__} as a call: it is not a dataclass; pass "
                "to_arguments (action -> arguments)."
            )
        names = self.parameters.get("properties", {})
        return {f.name: getattr(action, f.name) for f in dataclasses.fields(action) if f.name in names}

    def makes(self, action: Any) -> bool:
        """Whether this tool writes ``action`` (its class is ``action``)."""
        return self.action is not None and type(action) is self.action


def check_parameters(name: str, parameters: Any) -> None:
    """A :class:`~searchgym.error.ConfigError` if ``parameters`` is not an object schema the
    tool surface can check calls against."""
    shape = ('{"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}')
    if not isinstance(parameters, Mapping) or parameters.get("type", "object") != "object":
        raise ConfigError(f"ToolSpec {name!r} expects parameters to be a JSON object schema such as {shape}, got {parameters!r}.")
    properties = parameters.get("properties", {})
    if not isinstance(properties, Mapping):
        raise ConfigError(f"ToolSpec {name!r} expects parameters['properties'] to be a mapping, got {type(properties).__name__}.")
    for key, spec in properties.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        if not isinstance(key, str) or kind not in ARGUMENT_TYPES:
            raise ConfigError(
                f"ToolSpec {name!r} expects each property to be {{'type': one of {', '.join(ARGUMENT_TYPES)}}}, got "
                f"{key!r}: {spec!r}."
            )
        if kind == "array":
            items = spec.get("items")
            if not isinstance(items, Mapping) or items.get("type") not in ARGUMENT_TYPES:
                raise ConfigError(
                    f"ToolSpec {name!r} expects the array {key!r} to name its items' type ({{'items': {{'type': "
                    f"'string'}}}}), got {items!r}."
                )
    required = parameters.get("required", [])
    if not isinstance(required, Sequence) or isinstance(required, str) or any(r not in properties for r in required):
        raise ConfigError(
            f"ToolSpec {name!r} expects parameters['required'] to be a list of its properties ({', '.join(properties) or 'none'}), "
            f"got {required!r}."
        )


__all__ = ["ARGUMENT_TYPES", "ToolSpec", "check_parameters"]
