"""Tool calls read from a model's raw text, in the formats chat models are tuned to write.

A parser takes the assistant's text and returns :class:`ParsedCalls`: the free text
(``content``) and the calls, each with its name and arguments, or the reason it could not
be read. It never raises on any string: a broken call is a call with an ``error``, which the
env answers as a bad call.

- ``"hermes"`` (Qwen2.5/Qwen3, Hermes, SmolLM3 and most ChatML models):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call;
- ``"llama3_json"`` (Llama 3.1-3.3): the turn is the call, ``{"name": ..., "parameters": {...}}``,
  optionally after ``<|python_tag|>``, several separated by ``;``;
- ``"mistral"``: ``[TOOL_CALLS]`` then a JSON list of ``{"name", "arguments"}`` (the v3
  tokenizers) or ``name[ARGS]{...}`` pairs (v11 and later).

Your own format: :func:`register_tool_parser` a callable ``text -> ParsedCalls`` (or pass
the callable as ``tool_parser=``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from searchgym.error import ConfigError, UnknownNameError


@dataclass(frozen=True)
class RawCall:
    """One call as the model wrote it: ``name``, ``arguments`` (a dict once read), its ``id``
    if the format carries one, and ``error`` when it could not be read (then the other
    fields hold what could)."""

    name: str | None
    arguments: Any = None
    id: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class ParsedCalls:
    """The assistant's free text and its calls, in order."""

    content: str
    calls: tuple[RawCall, ...] = field(default_factory=tuple)


def _loads(text: str) -> tuple[Any, str | None]:
    """JSON ``text`` read, or the reason it is not JSON (never raises)."""
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as e:
        return None, f"invalid JSON ({e.msg} at character {e.pos})"


def call_from_object(obj: Any, *, arguments_key: str = "arguments") -> RawCall:
    """A call from a decoded ``{"name": ..., "arguments": {...}}`` object; the arguments may
    also be a JSON string (as in OpenAI's messages). Anything else is a broken call."""
    if not isinstance(obj, Mapping):
        return RawCall(None, error=f"a tool call must be a JSON object with \"name\" and \"{arguments_key}\", got {type(obj).__name__}")
    name = obj.get("name")
    call_id = obj.get("id") if isinstance(obj.get("id"), str) else None
    if not isinstance(name, str) or not name:
        return RawCall(None, obj.get(arguments_key), call_id, error="the tool call has no \"name\" string")
    arguments = obj.get(arguments_key, obj.get("arguments", obj.get("parameters", {})))
    if isinstance(arguments, str):
        decoded, error = _loads(arguments) if arguments.strip() else ({}, None)
        if error is not None:
            return RawCall(name, arguments, call_id, error=f"the arguments of {name} are {error}")
        arguments = decoded
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return RawCall(name, arguments, call_id, error=f"the arguments of {name} must be a JSON object, got {type(arguments).__name__}")
    return RawCall(name, dict(arguments), call_id)


_HERMES = re.compile(r"<tool_call>(.*?)(</tool_call>|\Z)", re.DOTALL)


def hermes(text: str) -> ParsedCalls:
    """``<tool_call>{json}</tool_call>`` blocks; the text outside them is the content. An
    unclosed last block (the turn was cut) is a broken call."""
    calls = []
    for m in _HERMES.finditer(text):
        if not m.group(2):
            calls.append(RawCall(None, m.group(1), error="a <tool_call> block is not closed with </tool_call>"))
            continue
        obj, error = _loads(m.group(1).strip())
        calls.append(RawCall(None, m.group(1).strip(), error=f"the <tool_call> block holds {error}") if error else call_from_object(obj))
    content = _HERMES.sub("", text).replace("</tool_call>", "").strip()
    return ParsedCalls(content, tuple(calls))


def llama3_json(text: str) -> ParsedCalls:
    """Llama 3.1's JSON tool calls: a turn that starts with ``{`` (or ``<|python_tag|>``) is a
    call, or several separated by ``;``; ``"parameters"`` holds the arguments. Any other
    turn is content."""
    body = text.strip()
    tagged = body.startswith("<|python_tag|>")
    body = body.removeprefix("<|python_tag|>").strip()
    if not body.startswith("{"):
        return ParsedCalls(text.strip() if not tagged else body, ())
    decoder = json.JSONDecoder()
    calls, position = [], 0
    while position < len(body):
        try:
            obj, end = decoder.raw_decode(body, position)
        except RecursionError:
            calls.append(RawCall(None, body[position:], error="JSON nested too deeply"))
            break
        except ValueError as e:
            calls.append(RawCall(None, body[position:], error=f"invalid JSON ({e.msg} at character {e.pos})"))
            break
        calls.append(call_from_object(obj, arguments_key="parameters"))
        position = end
        while position < len(body) and body[position] in " \t\r\n;":
            position += 1
    return ParsedCalls("", tuple(calls))


_MISTRAL_V11 = re.compile(r"\s*([A-Za-z_][\w.-]*)\[ARGS\]")


def mistral(text: str) -> ParsedCalls:
    """``[TOOL_CALLS]`` then a JSON list of calls, or ``name[ARGS]{json}`` pairs; the text
    before the first ``[TOOL_CALLS]`` is the content."""
    content, marker, rest = text.partition("[TOOL_CALLS]")
    if not marker:
        return ParsedCalls(text.strip(), ())
    calls: list[RawCall] = []
    for part in rest.split("[TOOL_CALLS]"):
        if not part.strip():
            continue
        m = _MISTRAL_V11.match(part)
        if m:
            arguments = part[m.end():].strip()
            obj, error = _loads(arguments)
            calls.append(RawCall(m.group(1), arguments, error=f"the arguments of {m.group(1)} are {error}") if error
                         else call_from_object({"name": m.group(1), "arguments": obj}))
            continue
        obj, error = _loads(part.strip())
        if error is not None:
            calls.append(RawCall(None, part.strip(), error=f"[TOOL_CALLS] is followed by {error}"))
        elif isinstance(obj, list):
            calls.extend(call_from_object(o) for o in obj)
        else:
            calls.append(call_from_object(obj))
    return ParsedCalls(content.strip(), tuple(calls))


#: Parser name -> parser. Add yours with :func:`register_tool_parser`.
TOOL_PARSERS: dict[str, Callable[[str], ParsedCalls]] = {"hermes": hermes, "llama3_json": llama3_json, "mistral": mistral}


def register_tool_parser(name: str, parser: Callable[[str], ParsedCalls]) -> None:
    """Make ``parser`` available as ``tool_parser=name``."""
    if not isinstance(name, str) or not name or not callable(parser):
        raise ConfigError(f"register_tool_parser expects a name and a callable text -> ParsedCalls, got {name!r} and {parser!r}.")
    TOOL_PARSERS[name] = parser


def make_tool_parser(spec: str | Callable[[str], ParsedCalls]) -> Callable[[str], ParsedCalls]:
    """A parser from its name in :data:`TOOL_PARSERS` or a callable."""
    if callable(spec):
        return spec
    if not isinstance(spec, str) or spec not in TOOL_PARSERS:
        raise UnknownNameError("tool parser", spec, TOOL_PARSERS)
    return TOOL_PARSERS[spec]
