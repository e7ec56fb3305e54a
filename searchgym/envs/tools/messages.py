"""What an assistant turn holds, read from any shape a caller may send: its text (and the
thinking in it), its calls (from an OpenAI message's ``tool_calls`` or a parser's reading of
raw text), what each costs of ``max_action_chars``, the arguments as the conversation
records them, and the arguments checked against a tool's JSON schema. Nothing here raises
on any input: what cannot be read is a call with an ``error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from searchgym.envs.tools.parsers import TOOL_PARSERS, ParsedCalls, RawCall, a_type, call_from_object, read_json, short

#: A call costs at least this many characters of ``max_action_chars`` (so a message of
#: many empty entries is cut like a long text).
MIN_CALL_CHARS = 32

#: Tag tokens (``<answer>``, ``</think>``, ``<|begin_of_query|>``): in the protocol's writing of a
#: tool turn, free text and arguments carry none, so the record's structure is the calls'.
_TAG_TOKEN = re.compile(r"</?[A-Za-z][\w-]{0,40}>|<\|[^<>|\s]{1,40}\|>")


def plain(text: str) -> str:
    """``text`` without tag tokens (each becomes a space)."""
    return _TAG_TOKEN.sub(" ", text) if "<" in text else text


def split_thinking(content: str) -> tuple[str, str]:
    """``(thinking, rest)`` of a reply: the text of its ``<think>`` blocks (or everything before
    a ``</think>`` a template's own opening tag left unpaired), and the text outside them."""
    if "think>" not in content:
        return "", content.strip()
    if "</think>" in content:
        head, _, rest = content.rpartition("</think>")
        thinking = head.replace("</think>", "\n").replace("<think>", "\n")
        if "<think>" in rest:  # a block opened after the last close runs to the end
            rest, _, more = rest.partition("<think>")
            thinking += "\n" + more.replace("<think>", "\n")
        return thinking.strip(), rest.strip()
    if "<think>" in content:
        rest, _, thinking = content.partition("<think>")
        return thinking.replace("<think>", "\n").strip(), rest.strip()
    return "", content.strip()


_BUILT_IN = frozenset(TOOL_PARSERS.values())


def safe_parse(parser: Callable[[str], ParsedCalls], text: str) -> ParsedCalls:
    """A parser's reading of ``text``; a parser that fails (a user's) or returns something
    else makes the whole turn one broken call, never an exception."""
    try:
        parsed = parser(text)
    except Exception as e:
        return ParsedCalls("", (RawCall(None, error=f"the tool parser failed on this turn ({type(e).__name__})"),))
    if parser in _BUILT_IN:  # they return what they should (tests/envs/test_tool_parsers.py)
        return parsed
    if not isinstance(parsed, ParsedCalls) or not isinstance(parsed.content, str) or not isinstance(parsed.calls, (tuple, list)) \
            or not all(isinstance(c, RawCall) for c in parsed.calls):
        return ParsedCalls("", (RawCall(None, error=f"the tool parser returned {type(parsed).__name__}, not ParsedCalls of RawCalls"),))
    return parsed


def content_text(content: Any) -> str:
    """A message's content as text: a string, a list of text parts, or nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def openai_call(call: Any) -> RawCall:
    """A call of an OpenAI message: ``{"id", "type": "function", "function": {"name", "arguments"}}``.

    ``arguments`` may be the object, or JSON text of it (as the OpenAI API and vLLM's server
    send it), or JSON text of a string that holds the object: vLLM's hermes parser
    ``json.dumps`` whatever the model wrote as arguments, so a model that wrote them as a
    string (``"arguments": "{\\"query\\": ...}"``, which the raw text parsers read as the
    object) arrives encoded twice. That string is decoded once more, as the raw path reads
    it; a string that does not hold a JSON object stays a bad call."""
    if not is_mapping(call):
        return RawCall(None, error=f"each tool call must be an object, got {a_type(call)}")
    function = call.get("function")
    call_id = call.get("id")
    call_id = call_id if type(call_id) is str else None
    if call.get("type", "function") != "function" or not is_mapping(function):
        return RawCall(None, id=call_id, error="a tool call must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
    arguments = function.get("arguments")
    if type(arguments) is str and arguments.lstrip().startswith('"'):
        text, error = read_json(arguments)
        if error is None and type(text) is str:
            inner, error = read_json(text) if text.strip() else ({}, None)
            if error is None and type(inner) is dict:
                return call_from_object({"name": function.get("name"), "arguments": inner}, call_id=call_id)
    return call_from_object(function, call_id=call_id)


def is_mapping(value: Any) -> bool:
    return isinstance(value, dict) or isinstance(value, Mapping)  # the first is the fast common case


SCALARS = (str, int, float, bool, type(None))


def json_size(value: Any, budget: int) -> int:
    """About how many characters ``value`` takes as JSON, counted until past ``budget``
    (so cyclic, deeply nested or huge values cost no more than the budget to measure)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            total += len(item) + 2
        elif kind is dict or (kind not in SCALARS and isinstance(item, Mapping)):
            total += 2
            for key, inner in item.items():
                total += (len(key) if type(key) is str else 8) + 4
                if total > budget:
                    return total
                stack.append(inner)
        elif kind is list or kind is tuple:
            total += 2 + len(item)
            if total > budget:
                return total
            stack.extend(item)
        else:
            total += 8
        if total > budget:
            return total
    return total


def entry_call(entry: Any) -> tuple[Any, Any, Any] | None:
    """``(name, arguments, id)`` of a plain ``tool_calls`` entry; None for any other shape."""
    if type(entry) is not dict:
        return None
    function = entry.get("function")
    if type(function) is not dict or entry.get("type", "function") != "function":
        return None
    return function.get("name"), function.get("arguments"), entry.get("id")


def entry_size(entry: Any, budget: int) -> int:
    """What a ``tool_calls`` entry costs of ``max_action_chars``: its name and arguments as
    JSON (the only parts read), at least :data:`MIN_CALL_CHARS`."""
    function = entry.get("function") if type(entry) is dict else None
    if type(function) is not dict:
        return max(json_size(entry, budget), MIN_CALL_CHARS)
    name, arguments = function.get("name"), function.get("arguments")
    size = MIN_CALL_CHARS + (len(name) if type(name) is str else 8)
    if type(arguments) is str:
        return size + len(arguments)
    if type(arguments) is dict:
        for key, value in arguments.items():
            kind = type(value)
            size += (len(key) if type(key) is str else 8) + 6 + (
                len(value) if kind is str else 8 if kind in SCALARS else
                8 * len(value) if kind is list and len(value) < 256 and all(type(v) is int for v in value) else
                json_size(value, budget - size))
            if size > budget:
                break
        return size
    return size + json_size(arguments, budget)


def recorded_arguments(arguments: Any) -> Any:
    """A call's arguments as the conversation records them: a JSON object (a fresh copy), or
    the string the model wrote when it is not one; ``{}`` for what JSON cannot hold."""
    if type(arguments) is str:
        return arguments
    if type(arguments) is dict:
        copy = {}
        for key, value in arguments.items():
            kind = type(value)
            if type(key) is not str or not (kind in SCALARS or (kind is list and all(type(v) in SCALARS for v in value))):
                break
            copy[key] = list(value) if kind is list else value
        else:
            return copy  # the common case: a copy is a JSON object already
    try:
        return json.loads(json.dumps(arguments)) if is_mapping(arguments) else json.dumps(arguments)
    except (TypeError, ValueError, RecursionError):
        return {}


_TYPES = {"string": str, "integer": int, "number": (int, float), "array": (list, tuple), "object": Mapping, "boolean": bool}


def _is_type(value: Any, kind: str) -> bool:
    if type(value) is bool:
        return kind == "boolean"
    return isinstance(value, _TYPES[kind])


def check_arguments(name: str, args: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``args`` against the tool's JSON schema, or None."""
    properties = schema["properties"]
    missing = [k for k in schema["required"] if k not in args]
    extra = [k for k in args if k not in properties] if len(args) > len(schema["required"]) or missing else ()
    if missing or extra:
        signature = ", ".join(f"{k}: {v['type']}" for k, v in properties.items())
        if missing:
            return f"{name}({signature}) is missing {', '.join(map(short, missing))}"
        return f"{name}({signature}) got unknown argument {', '.join(short(k) for k in extra[:3])}"
    for key, value in args.items():
        spec = properties[key]
        kind = spec["type"]
        if kind == "string" and type(value) is str:
            continue
        if not _is_type(value, kind):
            return f"{name} expects {key} to be {_a(kind)}, got {a_type(value)}"
        if kind == "array":
            items = spec["items"]["type"]
            wrong = [v for v in value if not _is_type(v, items)][:1]
            if wrong:
                return f"{name} expects {key} to be a list of {items}s, got {a_type(wrong[0])} in it"
    return None


def _a(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind
