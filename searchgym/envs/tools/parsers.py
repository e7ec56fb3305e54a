"""Tool calls read from a model's raw text, in the formats chat models are tuned to write,
and written back in them.

A parser takes the assistant's text and returns :class:`ParsedCalls`: the free text
(``content``) and the calls, each with its name and arguments, or the reason it could not
be read. It never raises on any string: a broken call is a call with an ``error``, which the
env answers as a bad call.

- ``"hermes"`` (Qwen2.5/Qwen3, Hermes, SmolLM3 and most ChatML models):
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call; the text
  outside the blocks is the content;
- ``"llama3_json"`` (Llama 3.1-3.3): the turn is the call, ``{"name": ..., "parameters": {...}}``,
  optionally after ``<|python_tag|>``, several separated by ``;``; a turn that does not start
  with ``{`` is content;
- ``"mistral"``: the content, then ``[TOOL_CALLS]`` and a JSON list of ``{"name", "arguments"}``
  (the v3 tokenizers; text after the list is content) or ``name[ARGS]{...}`` per call, each after
  its own ``[TOOL_CALLS]``, with an optional ``[CALL_ID]id`` before ``[ARGS]`` (v11 and later;
  ``name{...}`` too, as a decoder that drops the ``[ARGS]`` token writes it).

Your own format: :func:`register_tool_parser` a callable ``text -> ParsedCalls`` (or pass
the callable as ``tool_parser=``). :data:`TOOL_WRITERS` writes calls in each built-in format
(the inverse of its parser), for scripted agents and tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from searchgym.error import ConfigError, UnknownNameError


class RawCall(NamedTuple):
    """One call as the model wrote it: ``name``, ``arguments`` (a dict once read), its ``id``
    if the format carries one, and ``error`` when it could not be read (then the other
    fields hold what could)."""

    name: str | None
    arguments: Any = None
    id: str | None = None
    error: str | None = None


class ParsedCalls(NamedTuple):
    """The assistant's free text and its calls, in order."""

    content: str
    calls: tuple[RawCall, ...] = ()


def json_type(value: Any) -> str:
    """The JSON name of ``value``'s type ("string", "integer", "array", ...), for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return f"{type(value).__name__} (not JSON)"


def a_type(value: Any) -> str:
    """:func:`json_type` with its article: "a string", "an array", "null"."""
    kind = json_type(value)
    return kind if kind == "null" else ("an " if kind[:1] in "aeiou" else "a ") + kind


_DECODER = json.JSONDecoder()


def read_json(text: str) -> tuple[Any, str | None]:
    """JSON ``text`` read, or the reason it is not JSON (never raises). (``raw_decode``: a
    third of ``json.loads``'s time on a call's few dozen characters.)"""
    text = text.strip()
    try:
        value, end = _DECODER.raw_decode(text)
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as e:
        return None, f"invalid JSON ({getattr(e, 'msg', e)} at character {getattr(e, 'pos', '?')})"
    if end != len(text):
        return None, f"invalid JSON (Extra data at character {end})"
    return value, None


def call_from_object(obj: Any, *, arguments_key: str = "arguments", call_id: str | None = None) -> RawCall:
    """A call from a decoded ``{"name": ..., "arguments": {...}}`` object (``"parameters"`` is
    read too); the arguments may also be a JSON string (as in OpenAI's messages). Anything
    else is a broken call."""
    if not (isinstance(obj, dict) or isinstance(obj, Mapping)):
        return RawCall(None, error=f"a tool call must be a JSON object with \"name\" and \"{arguments_key}\", got {a_type(obj)}")
    name = obj.get("name")
    if call_id is None:
        call_id = obj.get("id")
        call_id = call_id if type(call_id) is str else None
    if type(name) is not str or not name or name.isspace():
        return RawCall(None, None, call_id, error="the tool call has no \"name\" string")
    arguments = obj[arguments_key] if arguments_key in obj else obj.get("arguments", obj.get("parameters"))
    if type(arguments) is dict:
        return RawCall(name, arguments, call_id)
    if isinstance(arguments, str):
        decoded, error = read_json(arguments) if arguments.strip() else ({}, None)
        if error is not None:
            return RawCall(name, arguments, call_id, error=f"the arguments of {short(name)} are {error}")
        if not isinstance(decoded, dict):
            return RawCall(name, arguments, call_id, error=f"the arguments of {short(name)} must be a JSON object, got {a_type(decoded)}")
        return RawCall(name, decoded, call_id)
    if arguments is None:
        return RawCall(name, {}, call_id)
    if not isinstance(arguments, Mapping):
        return RawCall(name, arguments, call_id, error=f"the arguments of {short(name)} must be a JSON object, got {a_type(arguments)}")
    return RawCall(name, dict(arguments), call_id)


def short(text: Any, limit: int = 48) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters: the env's replies never
    echo much of what the agent wrote (an echo would be text the agent chose, shown back as
    the environment's)."""
    text = text if isinstance(text, str) else str(type(text).__name__)
    return json.dumps(text[:limit] + ("..." if len(text) > limit else ""), ensure_ascii=False)


# ---------------------------------------------------------------------------- hermes
_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def hermes(text: str) -> ParsedCalls:
    """``<tool_call>{json}</tool_call>`` blocks; the text outside them is the content. A block
    runs to the first ``</tool_call>`` after its opening; an unclosed last block (the turn was
    cut) is a broken call."""
    start = text.find(_OPEN)
    if start == -1:
        return ParsedCalls(text.replace(_CLOSE, "").strip(), ())
    outside, calls = [text[:start]], []
    while start != -1:
        body_start = start + len(_OPEN)
        end = text.find(_CLOSE, body_start)
        if end == -1:
            calls.append(RawCall(None, text[body_start:].strip(), error="a <tool_call> block is not closed with </tool_call>"))
            break
        body = text[body_start:end].strip()
        obj, error = read_json(body)
        calls.append(RawCall(None, body, error=f"the <tool_call> block holds {error}") if error else call_from_object(obj))
        after = end + len(_CLOSE)
        start = text.find(_OPEN, after)
        outside.append(text[after:] if start == -1 else text[after:start])
    content = "".join(outside)
    return ParsedCalls((content.replace(_CLOSE, "") if _CLOSE in content else content).strip(), tuple(calls))


def write_hermes(content: str, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A turn in the hermes format: ``content``, then one ``<tool_call>`` block per ``(name, arguments)``."""
    blocks = "".join(f"<tool_call>\n{json.dumps({'name': n, 'arguments': dict(a)}, ensure_ascii=False)}\n</tool_call>" for n, a in calls)
    return (content + ("\n" if content and blocks else "") + blocks) if content else blocks


# ---------------------------------------------------------------------------- Llama 3 JSON
_PYTHON_TAG = "<|python_tag|>"


def llama3_json(text: str) -> ParsedCalls:
    """Llama 3.1's JSON tool calls: a turn that starts with ``{`` (or ``<|python_tag|>``) is a
    call, or several separated by ``;``; ``"parameters"`` holds the arguments. Any other
    turn is content."""
    body = text.strip()
    tagged = body.startswith(_PYTHON_TAG)
    body = body.removeprefix(_PYTHON_TAG).strip()
    if not body.startswith("{"):
        return ParsedCalls(body if tagged else text.strip(), ())
    decoder = json.JSONDecoder()
    calls, position = [], 0
    while position < len(body):
        try:
            obj, end = decoder.raw_decode(body, position)
        except RecursionError:
            calls.append(RawCall(None, body[position:], error="the call holds JSON nested too deeply"))
            break
        except ValueError as e:
            calls.append(RawCall(None, body[position:], error=f"the call is invalid JSON ({e.msg} at character {e.pos})"))
            break
        calls.append(call_from_object(obj, arguments_key="parameters"))
        position = end
        while position < len(body) and body[position] in " \t\r\n;":
            position += 1
    return ParsedCalls("", tuple(calls))


def write_llama3_json(content: str, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A turn in Llama 3.1's JSON format: the calls separated by ``; `` (the format has no
    content beside calls: a turn without calls is its content)."""
    if not calls:
        return content
    if content:
        raise ConfigError("write_llama3_json expects either content or calls: Llama 3.1's JSON turn is its calls alone.")
    return "; ".join(json.dumps({"name": n, "parameters": dict(a)}, ensure_ascii=False) for n, a in calls)


# ---------------------------------------------------------------------------- Mistral
_MISTRAL_NAMED = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(?:\[CALL_ID\]\s*([\w-]{1,64})\s*)?(\[ARGS\])?\s*(?=[{\[])")


def mistral(text: str) -> ParsedCalls:
    """``[TOOL_CALLS]`` then a JSON list of calls, or ``name[ARGS]{json}`` pairs; the text
    before the first ``[TOOL_CALLS]`` is the content (and text after a JSON list)."""
    content, marker, rest = text.partition("[TOOL_CALLS]")
    if not marker:
        return ParsedCalls(text.strip(), ())
    calls: list[RawCall] = []
    after: list[str] = []
    decoder = json.JSONDecoder()
    for part in rest.split("[TOOL_CALLS]"):
        part = part.strip()
        if not part:
            calls.append(RawCall(None, "", error="[TOOL_CALLS] is followed by no call"))
            continue
        named = _MISTRAL_NAMED.match(part)
        name, call_id, start = (named.group(1), named.group(2), named.end()) if named else (None, None, 0)
        try:
            obj, end = decoder.raw_decode(part, start)
        except RecursionError:
            calls.append(RawCall(name, part[start:], call_id, error="[TOOL_CALLS] is followed by JSON nested too deeply"))
            continue
        except ValueError as e:
            calls.append(RawCall(name, part[start:], call_id, error=f"[TOOL_CALLS] is followed by invalid JSON ({e.msg} at character {e.pos})"))
            continue
        if part[end:].strip():
            after.append(part[end:].strip())
        if name is not None:
            calls.append(call_from_object({"name": name, "arguments": obj}, call_id=call_id))
        elif isinstance(obj, list):
            calls.extend(call_from_object(o) for o in obj)
            if not obj:
                calls.append(RawCall(None, "[]", error="[TOOL_CALLS] is followed by an empty list"))
        else:
            calls.append(call_from_object(obj))
    return ParsedCalls("\n".join([content.strip(), *after]).strip(), tuple(calls))


def write_mistral(content: str, calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """A turn in Mistral's v3 format: ``content``, then ``[TOOL_CALLS]`` and the calls as a JSON list."""
    if not calls:
        return content
    return content + "[TOOL_CALLS]" + json.dumps([{"name": n, "arguments": dict(a)} for n, a in calls], ensure_ascii=False)


# ---------------------------------------------------------------------------- registry
#: Parser name -> parser. Add yours with :func:`register_tool_parser`.
TOOL_PARSERS: dict[str, Callable[[str], ParsedCalls]] = {"hermes": hermes, "llama3_json": llama3_json, "mistral": mistral}

#: Parser name -> writer ``(content, [(name, arguments), ...]) -> text`` of the same format.
TOOL_WRITERS: dict[str, Callable[[str, Sequence[tuple[str, Mapping[str, Any]]]], str]] = {
    "hermes": write_hermes, "llama3_json": write_llama3_json, "mistral": write_mistral,
}


def register_tool_parser(name: str, parser: Callable[[str], ParsedCalls]) -> None:
    """Make ``parser`` (a callable ``text -> ParsedCalls``) available as ``tool_parser=name``."""
    if not isinstance(name, str) or not name or not callable(parser):
        raise ConfigError(
            f"register_tool_parser expects a name (a non-empty str) and a callable text -> ParsedCalls, "
            f"got {name!r} and {type(parser).__name__}."
        )
    TOOL_PARSERS[name] = parser


def make_tool_parser(spec: str | Callable[[str], ParsedCalls]) -> Callable[[str], ParsedCalls]:
    """A parser from its name in :data:`TOOL_PARSERS` or a callable."""
    if callable(spec):
        return spec
    if not isinstance(spec, str):
        raise ConfigError(
            f"tool_parser expects a parser name ({', '.join(sorted(TOOL_PARSERS))}) or a callable text -> "
            f"ParsedCalls, got {type(spec).__name__}."
        )
    if spec not in TOOL_PARSERS:
        raise UnknownNameError("tool parser", spec, TOOL_PARSERS)
    return TOOL_PARSERS[spec]
