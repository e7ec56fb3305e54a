"""What an OpenAI-compatible server may answer, checked field by field, and the chat
messages sent to it.

:class:`~searchgym.lm.http.OpenAILM` reads two kinds of reply: ``/completions`` choices
(:func:`check_choices`, :func:`check_logprobs`) and ``/chat/completions`` messages
(:func:`chat_reply`). Every field it uses is checked against the type the API defines; a
field that is not raises :class:`Malformed` naming it (``choices[0].message.tool_calls[1].id``),
which the backend turns into a :class:`~searchgym.error.BackendError` naming the URL.

Chat messages go out in the API's form (:func:`openai_messages`): the conversations of
``info["messages"]`` follow the Hugging Face convention (tool-call arguments as dicts, as
``apply_chat_template`` expects them), the chat-completions API wants them as JSON text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchgym.error import ConfigError
from searchgym.lm.base import Generation

#: The longest tool-call id and function name a chat reply may carry (OpenAI's function
#: names are at most 64 characters, its ids a few dozen): a longer one is not a tool call.
MAX_ID_CHARS = 256
MAX_NAME_CHARS = 256


class Malformed(Exception):
    """A field of a reply is not what the API defines (turned into a BackendError naming the URL)."""

    def __init__(self, field: str, expected: str, got: str):
        super().__init__(field)
        self.field, self.expected, self.got = field, expected, got


def describe(value: Any) -> str:
    """A value as an error message shows it: its JSON kind and its first 60 characters."""
    try:
        shown = json.dumps(value, allow_nan=True)
    except (ValueError, RecursionError):  # pragma: no cover -- parsed JSON always dumps
        shown = "..."
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
    return f"{kind} {shown}" if value is not None else "null"


def check_field(obj: dict[str, Any], where: str, key: str, types: tuple[type, ...], expected: str, *, required: bool = False) -> Any:
    """``obj[key]`` if it is one of ``types`` (never a boolean standing for a number); None
    when it is absent and not ``required``; otherwise :class:`Malformed`."""
    if key not in obj:
        if required:
            raise Malformed(f"{where}.{key}", expected, "nothing (the key is missing)")
        return None
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, types):
        raise Malformed(f"{where}.{key}", expected, describe(value))
    return value


def check_choices(reply: Any, n: int, *, per: str = "prompt") -> list[dict[str, Any]]:
    """The choices of a reply in index order: a list of n objects whose indices are 0..n-1, each once."""
    if not isinstance(reply, dict):
        raise Malformed("the body", 'a JSON object with "choices"', describe(reply))
    choices = check_field(reply, "the body", "choices", (list,), f"a list of {n} choices", required=True)
    if len(choices) != n:
        raise Malformed("choices", f"a list of {n} (one per {per})", f"a list of {len(choices)}")
    ordered: list[Any] = [None] * n
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise Malformed(f"choices[{position}]", "an object", describe(choice))
        index = check_field(choice, f"choices[{position}]", "index", (int,), f"an integer in 0..{n - 1}", required=True)
        if not 0 <= index < n:
            raise Malformed(f"choices[{position}].index", f"an integer in 0..{n - 1}", str(index))
        if ordered[index] is not None:
            first = next(i for i, c in enumerate(choices) if c is ordered[index])
            raise Malformed(f"choices[{position}].index", f"each of 0..{n - 1} once", f"{index} again (choices[{first}] has it)")
        ordered[index] = choice
    return ordered


def check_logprobs(choice: dict[str, Any], field: str) -> tuple[list[str], list[float | None] | None]:
    """The ``tokens`` and ``token_logprobs`` of a completion choice (empty and None when absent)."""
    logprobs = check_field(choice, field, "logprobs", (dict, type(None)), "an object or null")
    if not logprobs:
        return [], None
    where = f"{field}.logprobs"
    tokens = check_field(logprobs, where, "tokens", (list, type(None)), "a list of strings or null") or []
    for i, token in enumerate(tokens):
        if not isinstance(token, str):
            raise Malformed(f"{where}.tokens[{i}]", "a string", describe(token))
    values = check_field(logprobs, where, "token_logprobs", (list, type(None)), "a list of numbers or null")
    if values is None:
        return tokens, None
    for i, value in enumerate(values):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value <= 0):
            raise Malformed(f"{where}.token_logprobs[{i}]", "a log-probability (a number <= 0) or null", describe(value))
    if tokens and len(values) != len(tokens):
        raise Malformed(f"{where}.token_logprobs", f"as many values as tokens ({len(tokens)})", f"{len(values)}")
    return tokens, values


# ---------------------------------------------------------------------------- chat completions
@dataclass(frozen=True)
class ChatReply(Generation):
    """One ``/chat/completions`` reply, as a :class:`Generation` the drivers count.

    A chat reply is a message, not a token record: ``token_ids`` and ``logprobs`` are empty,
    and the server's own count of what it generated is ``completion_tokens`` (its
    ``usage``; None when it sends none). ``text`` is the reply in a readable form: the
    content, then one line ``name(arguments)`` per tool call. ``finish_reason`` is
    ``"length"`` when the server stopped at ``max_tokens`` (it says so, or
    :meth:`~searchgym.lm.http.OpenAILM.chat` finds it counted as many tokens as allowed:
    vLLM says ``"tool_calls"`` of a reply cut after a complete call), ``"prompt_too_long"`` when the
    conversation does not fit the model (then nothing was generated), else ``"stop"``;
    the server's own value (``"tool_calls"``, ``"stop"`` ...) is ``server_finish_reason``.

    ``message`` is the assistant message to play as an env action:
    ``{"role": "assistant", "content": str, "tool_calls": [{"id", "type": "function",
    "function": {"name", "arguments": <JSON text as sent>}}]}`` (no ``tool_calls`` key
    when the reply made no call), holding only the checked fields.
    """

    message: dict[str, Any] = field(default_factory=lambda: {"role": "assistant", "content": ""}, hash=False)
    server_finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def too_long(cls) -> ChatReply:
        """The reply to a conversation that does not fit the model's context."""
        return cls("", (), (), "prompt_too_long")


def chat_reply(reply: Any, *, max_tool_calls: int) -> ChatReply:
    """The :class:`ChatReply` of a ``/chat/completions`` body with one choice, every field
    it uses checked (:class:`Malformed` otherwise): the message's role (``"assistant"`` or
    absent), ``content`` (a string or null), ``tool_calls`` (null or a list of at most
    ``max_tool_calls`` objects, each with a distinct non-empty ``id`` of at most
    :data:`MAX_ID_CHARS` characters, ``type`` ``"function"`` when present, and a
    ``function`` with a non-empty ``name`` of at most :data:`MAX_NAME_CHARS` characters and
    ``arguments`` as a string), ``finish_reason`` (a string or null) and ``usage`` (null or
    an object whose ``prompt_tokens`` and ``completion_tokens`` are integers >= 0).

    The arguments are not parsed here: text that is not JSON, an unknown tool or a wrong
    argument is the model's bad call, which the env answers and penalizes."""
    (choice,) = check_choices(reply, 1, per="request")
    where = "choices[0].message"
    message = check_field(choice, "choices[0]", "message", (dict,), "an object (the assistant's message)", required=True)
    role = check_field(message, where, "role", (str, type(None)), '"assistant"')
    if role not in (None, "assistant"):
        raise Malformed(f"{where}.role", '"assistant"', describe(role))
    content = check_field(message, where, "content", (str, type(None)), "a string or null") or ""
    expected_calls = f"null or a list of at most {max_tool_calls} tool calls (max_tool_calls)"
    calls = check_field(message, where, "tool_calls", (list, type(None)), expected_calls) or []
    if len(calls) > max_tool_calls:
        raise Malformed(f"{where}.tool_calls", expected_calls, f"a list of {len(calls)}")
    checked: list[dict[str, Any]] = []
    first_of: dict[str, int] = {}
    for i, call in enumerate(calls):
        at = f"{where}.tool_calls[{i}]"
        if not isinstance(call, dict):
            raise Malformed(at, 'an object with "id", "type" and "function"', describe(call))
        id_expected = f"a non-empty string of at most {MAX_ID_CHARS} characters"
        call_id = check_field(call, at, "id", (str,), id_expected, required=True)
        if not call_id or len(call_id) > MAX_ID_CHARS:
            raise Malformed(f"{at}.id", id_expected, f"{describe(call_id)} ({len(call_id)} characters)")
        if call_id in first_of:
            raise Malformed(f"{at}.id", "an id no other call of the reply has", f"{describe(call_id)} again ({where}.tool_calls[{first_of[call_id]}] has it)")
        first_of[call_id] = i
        kind = check_field(call, at, "type", (str,), '"function"')
        if kind not in (None, "function"):
            raise Malformed(f"{at}.type", '"function"', describe(kind))
        function = check_field(call, at, "function", (dict,), 'an object with "name" and "arguments"', required=True)
        name_expected = f"a non-empty string of at most {MAX_NAME_CHARS} characters"
        name = check_field(function, f"{at}.function", "name", (str,), name_expected, required=True)
        if not name or len(name) > MAX_NAME_CHARS:
            raise Malformed(f"{at}.function.name", name_expected, f"{describe(name)} ({len(name)} characters)")
        arguments = check_field(function, f"{at}.function", "arguments", (str,), "a string (the arguments as JSON text)", required=True)
        checked.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})
    finish = check_field(choice, "choices[0]", "finish_reason", (str, type(None)), "a string or null")
    usage = check_field(reply, "the body", "usage", (dict, type(None)), "an object or null") or {}
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = check_field(usage, "the body.usage", key, (int, type(None)), "an integer >= 0 or null")
        if value is not None and value < 0:
            raise Malformed(f"the body.usage.{key}", "an integer >= 0 or null", describe(value))
        counts.append(value)
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if checked:
        out["tool_calls"] = checked
    text = "\n".join([content, *(f"{c['function']['name']}({c['function']['arguments']})" for c in checked)]).strip()
    return ChatReply(text, (), (), "length" if finish == "length" else "stop", out, finish, *counts)


def openai_messages(messages: Any, owner: str = "OpenAILM.chat") -> list[dict[str, Any]]:
    """A conversation in the chat-completions API's form.

    ``messages`` are chat messages as the envs give them (``info["messages"]``) or as
    ``apply_chat_template`` takes them: a tool call's ``arguments`` may be a dict (the
    Hugging Face convention), and becomes JSON text; a string is sent as it is (the
    arguments a model wrote that were not JSON stay what they were). Each message keeps the
    fields the API defines for its role: ``role``, ``content`` and ``name`` for system and
    user messages; ``role``, ``content`` and ``tool_calls`` for the assistant's; ``role``,
    ``tool_call_id`` and ``content`` for tool results. A message that is not an object
    with a string ``role`` is a :class:`~searchgym.error.ConfigError`."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ConfigError(f"{owner} expects each conversation to be a non-empty list of chat messages, got {_kind(messages)}.")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ConfigError(f"{owner} expects each message to be an object with a string \"role\", got {_kind(message)} at message {i}.")
        role = message["role"]
        if role == "tool":
            sent = {"role": "tool", "tool_call_id": message.get("tool_call_id"), "content": message.get("content")}
        elif role == "assistant":
            sent = {"role": "assistant", "content": message.get("content")}
            calls = message.get("tool_calls")
            if calls:
                sent["tool_calls"] = [_openai_call(call, owner, i, j) for j, call in enumerate(_as_list(calls, owner, i))]
        else:
            sent = {k: message[k] for k in ("role", "content", "name") if k in message}
        out.append(sent)
    return out


def _as_list(calls: Any, owner: str, i: int) -> Sequence[Any]:
    if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
        raise ConfigError(f"{owner} expects an assistant message's tool_calls to be a list, got {_kind(calls)} at message {i}.")
    return calls


def _openai_call(call: Any, owner: str, i: int, j: int) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise ConfigError(
            f"{owner} expects each tool call to be {{\"id\", \"type\": \"function\", \"function\": {{\"name\", \"arguments\"}}}}, "
            f"got {_kind(call)} at message {i}, call {j}."
        )
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        try:
            arguments = json.dumps({} if arguments is None else arguments, ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{owner} expects tool-call arguments that JSON can write, got {_kind(arguments)} at message {i}, call {j} ({e}).") from None
    sent: dict[str, Any] = {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
    if "id" in call:
        sent = {"id": call["id"], **sent}
    return sent


def check_tools(tools: Any, owner: str = "OpenAILM.chat") -> list[dict[str, Any]]:
    """``tools`` as a list of OpenAI function schemas (``{"type": "function", "function":
    {"name", ...}}``, as ``info["tools"]`` holds them); a ConfigError otherwise."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise ConfigError(f"{owner} expects tools to be a list of function schemas, got {_kind(tools)}.")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or tool.get("type") != "function" or not isinstance(function.get("name"), str):
            raise ConfigError(
                f"{owner} expects each tool to be a function schema {{\"type\": \"function\", \"function\": {{\"name\", ...}}}}, "
                f"got {_kind(tool)} at tools[{i}]."
            )
    return [dict(t) for t in tools]


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
