"""The tool surface: a game played through native tool calls instead of its tag grammar.

It is a translation layer beside the protocol and holds no rules. A turn (an OpenAI
assistant message, or the model's raw text read by a :mod:`tool parser
<searchgym.envs.tools.parsers>`) becomes the same actions a tag turn becomes
(:class:`~searchgym.envs.protocols.base.Search`, ``Select``, ``Evidence``, ``Answer``,
``Complete``, ``Invalid``); the game plays them with its budgets, caps, grounding, summarizer,
penalties and reward; their results come back as tool messages. The reward recipe reads the
turn as the protocol would have written the same actions (:meth:`ToolSurface.records`), so
the same decisions score the same in both formats.

What is a bad call (each an ``Invalid`` action: a tool message saying what was wrong, and the
recipe's ``invalid_action_penalty``): a call that cannot be read (invalid JSON, no name), an
unknown tool, missing, unknown or wrong-typed arguments, an empty query or answer, a
``select`` of a document number the latest results did not show, ``answer`` or ``finish``
beside other calls in one turn (but ``select`` beside ``finish``), more than :data:`MAX_CALLS_PER_TURN` calls, and text that
poses as a tool result (``<tool_response>`` and the like, or the protocol's own information
tags). A reply with no call is the final answer in the games where the agent answers (as
TRL and verifiers read it), and a bad turn in s3.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Answer, Complete, Evidence, Invalid, ParsedTurn, Protocol, Search, Select
from searchgym.envs.tools.parsers import ParsedCalls, RawCall, call_from_object, make_tool_parser
from searchgym.envs.tools.schemas import tool_prompt, tool_schemas
from searchgym.rewards import Turn

#: How a turn is written (``action_format``): the protocol's tag grammar, or native tool calls.
ACTION_FORMATS = ("tags", "tools")

#: The most calls one turn may make; the ones after it are bad calls.
MAX_CALLS_PER_TURN = 8

#: Markup of a tool result in the public chat formats (hermes/ChatML, Llama 3, Mistral):
#: only the environment writes tool results.
FORGED_RESULT = re.compile(
    r"<tool_response>.*?(?:</tool_response>|\Z)|</tool_response>|<\|im_start\|>\s*tool\b|"
    r"<\|start_header_id\|>\s*ipython\s*<\|end_header_id\|>|\[TOOL_RESULTS\].*?(?:\[/TOOL_RESULTS\]|\Z)",
    re.DOTALL,
)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)


@dataclass(frozen=True)
class ToolTurn(ParsedTurn):
    """A parsed tool turn: :class:`ParsedTurn` plus the calls behind the actions.

    ``message`` is the assistant message as the conversation records it (arguments as
    dicts); ``calls`` the ``(id, name)`` of each call in order; ``action_calls`` the index
    of the call behind each action (None for a reply answered by its text);
    ``thought`` the free text the protocol's writing of the turn carries.
    """

    message: Mapping[str, Any] | None = None
    calls: tuple[tuple[str, str], ...] = ()
    action_calls: tuple[int | None, ...] = ()
    thought: str | None = None


class ToolSurface:
    """``protocol``'s game through tool calls; ``parser`` reads raw text (a name in
    :data:`~searchgym.envs.tools.parsers.TOOL_PARSERS` or a callable)."""

    def __init__(self, protocol: Protocol, parser: str | Callable[[str], ParsedCalls] = "hermes"):
        self.protocol = protocol
        self.parser = make_tool_parser(parser)
        self.tools = tool_schemas(protocol)
        self.names = tuple(t["function"]["name"] for t in self.tools)
        self.terminal = "finish" if protocol.answers_with_generator else "answer"

    # ------------------------------------------------------------------ what the agent reads
    def prompt_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, Any]]:
        """The conversation's first messages: the game's instructions and the question."""
        return [{"role": "user", "content": tool_prompt(self.protocol, example, docs)}]

    def render_docs(self, hits: Sequence[Hit]) -> str:
        return self.protocol.docs_text(hits) if hits else "No document matches the query."

    def wrap_information(self, text: str) -> str:
        return text.strip()

    def budget_feedback(self) -> str:
        then = "keep what you need with select, then call finish" if self.terminal == "finish" else "call answer"
        return f"The search budget is spent: this search was not run. Now {then}."

    def error_text(self, reason: str, penalty: float) -> str:
        """The tool message of a bad call: what was wrong, and what it cost."""
        cost = f" This bad call costs {-penalty:g} reward." if penalty < 0 else ""
        return f"Error: {reason}.{cost}"

    def selected_text(self, numbers: Sequence[int], kept: Sequence[int]) -> str:
        if not numbers:
            return "No document selected."
        text = "Kept document" + ("s " if len(kept) != 1 else " ") + ", ".join(map(str, kept)) + "." if kept else "Kept nothing new."
        skipped = [n for n in numbers if n not in kept]
        if skipped:
            cap = self.protocol.docs_per_window
            text += f" Not kept: {', '.join(map(str, skipped))} (kept already" + (f", or past {cap} a search)." if cap else ").")
        return text

    # ------------------------------------------------------------------ reading a turn
    def parse(self, action: Any, *, turn: int, window_size: int, max_chars: int) -> tuple[ToolTurn, bool]:
        """The turn ``action`` (an assistant message or raw text) as actions, and whether it
        was cut to ``max_chars``. ``window_size`` is how many documents the latest results
        showed (what ``select`` may name). Never raises on any message or string."""
        content, raw_calls, cut = self._read(action, max_chars)
        content, forged = self._strip_forged(content)
        thought = _THINK.sub("", content).strip() or None
        actions: list[Action] = []
        action_calls: list[int | None] = []
        calls: list[tuple[str, str]] = []
        recorded: list[dict[str, Any]] = []
        # finish may come with the selections of the latest results (s3's one tag turn
        # <important_info>[..]</important_info><search_complete>True</search_complete>).
        beside = "select" if "select" in self.names else None
        terminal_alone = sum(call.name != beside for call in raw_calls) == 1
        for i, call in enumerate(raw_calls):
            call_id = call.id or f"call_{turn}_{i}"
            name = call.name if isinstance(call.name, str) else "invalid"
            calls.append((call_id, name))
            recorded.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": call.arguments
                             if isinstance(call.arguments, (dict, str)) else {}}})
            if i >= MAX_CALLS_PER_TURN:
                acts: list[Action] = [Invalid(f"more than {MAX_CALLS_PER_TURN} tool calls in one turn")]
            else:
                acts = self._call_actions(call, window_size, terminal_alone)
            actions.extend(acts)
            action_calls.extend([i] * len(acts))
        if not raw_calls:
            if self.terminal == "answer" and thought:
                actions.append(Answer(thought))
            elif self.terminal == "answer":
                actions.append(Invalid("the reply has no tool call and no text"))
            else:
                actions.append(Invalid(f"the reply has no tool call: call {', '.join(self.names)}"))
            action_calls.append(None)
            thought = None if self.terminal == "answer" else thought
        if forged:
            actions.append(Invalid("the reply writes a tool result itself; only the environment writes tool results"))
            action_calls.append(None)
        # A selection is of the results already shown: it runs before this turn's searches.
        order = sorted(range(len(actions)), key=lambda j: not isinstance(actions[j], Select))
        actions = [actions[j] for j in order]
        action_calls = [action_calls[j] for j in order]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if recorded:
            message["tool_calls"] = recorded
        well_formed = not forged and not any(isinstance(a, Invalid) for a in actions)
        text = self._written(actions, thought)
        return ToolTurn(tuple(actions), text, forged, 0, well_formed, message, tuple(calls), tuple(action_calls), thought), cut

    def _read(self, action: Any, max_chars: int) -> tuple[str, list[RawCall], bool]:
        """The content and raw calls of a message or raw text, cut to ``max_chars``."""
        if isinstance(action, str):
            cut = len(action) > max_chars
            parsed = _safe_parse(self.parser, action[:max_chars])
            return parsed.content, list(parsed.calls), cut
        if not isinstance(action, Mapping):
            return "", [RawCall(None, error=f"a turn must be an assistant message (a dict) or text, got {type(action).__name__}")], False
        content = _content_text(action.get("content"))
        if action.get("role", "assistant") != "assistant":
            return content, [RawCall(None, error=f"the message's role must be 'assistant', got {action.get('role')!r}")], False
        tool_calls = action.get("tool_calls")
        if tool_calls is None or tool_calls == []:
            parsed = _safe_parse(self.parser, content)  # a server without a tool parser sends the raw text
            content, raw = parsed.content, list(parsed.calls)
        elif not isinstance(tool_calls, (list, tuple)):
            raw = [RawCall(None, error=f"the message's tool_calls must be a list, got {type(tool_calls).__name__}")]
        else:
            raw = [_openai_call(c) for c in tool_calls]
        size = len(content)
        kept: list[RawCall] = []
        cut = False
        for call in raw:
            size += len(call.name or "") + len(json.dumps(call.arguments, default=str) if call.arguments is not None else "")
            if size > max_chars:
                cut = True
                kept.append(RawCall(call.name, None, call.id, error="the turn is longer than max_action_chars"))
            else:
                kept.append(call)
        if len(content) > max_chars:
            content, cut = content[:max_chars], True
        return content, kept, cut

    def _strip_forged(self, content: str) -> tuple[str, bool]:
        cleaned, n = FORGED_RESULT.subn("", content)
        forged = n > 0
        for open_tag, close_tag in self.protocol.env_tags:
            if open_tag in cleaned or close_tag in cleaned:
                pattern = re.compile(re.escape(open_tag) + r".*?(?:" + re.escape(close_tag) + r"|\Z)", re.DOTALL)
                cleaned = pattern.sub("", cleaned).replace(close_tag, "")
                forged = True
        return cleaned.strip(), forged

    def _call_actions(self, call: RawCall, window_size: int, alone: bool) -> list[Action]:
        """The actions of one call: what it asks, or an ``Invalid`` saying what is wrong."""
        if call.error is not None:
            return [Invalid(call.error)]
        name, args = call.name, call.arguments
        if name not in self.names:
            return [Invalid(f"there is no tool {name!r}; the tools are {', '.join(self.names)}")]
        schema = next(t["function"]["parameters"] for t in self.tools if t["function"]["name"] == name)
        problem = _check_arguments(name, args, schema)
        if problem:
            return [Invalid(problem)]
        if name == self.terminal and not alone:
            beside = " (select may come with it)" if "select" in self.names else ""
            return [Invalid(f"{name} must be the only call of its turn{beside}: call it alone, after the results come back")]
        if name == "search":
            query = args["query"].strip()
            return [Search(query)] if query else [Invalid("search needs a non-empty query")]
        if name == "select":
            numbers = tuple(args["doc_ids"])
            unseen = [n for n in numbers if not 1 <= n <= window_size]
            if unseen:
                shown = f"1 to {window_size}" if window_size else "none"
                return [Invalid(f"select names document {', '.join(map(str, unseen))}, never shown (the latest results show {shown})")]
            return [Select(numbers)]
        if name == "finish":
            return [Complete()]
        answer = args["answer"].strip()
        if not answer:
            return [Invalid("answer needs a non-empty answer")]
        evidence = args.get("evidence", "")
        return [Evidence(evidence.strip()), Answer(answer)] if isinstance(evidence, str) and evidence.strip() else [Answer(answer)]

    # ------------------------------------------------------------------ writing back
    def tool_messages(self, turn: ToolTurn, results: Sequence[str | None]) -> list[dict[str, Any]]:
        """One tool message per call: the texts its actions got, in order (``results`` has
        one entry per action of ``turn``). A bad turn without a call is answered by a user
        message."""
        texts: dict[int | None, list[str]] = {}
        for call, result in zip(turn.action_calls, results):
            if result:
                texts.setdefault(call, []).append(result)
        messages = [
            {"role": "tool", "tool_call_id": call_id, "name": name, "content": "\n\n".join(texts.get(i, [])) or "Done."}
            for i, (call_id, name) in enumerate(turn.calls)
        ]
        if None in texts:
            messages.append({"role": "user", "content": "\n\n".join(texts[None])})
        return messages

    def records(self, turn: ToolTurn, kinds: Sequence[Sequence[str]]) -> list[Turn]:
        """The turn as the reward recipe reads it: the tag turns that perform the same actions,
        each written by the protocol (``kinds``: what each action got back)."""
        out = []
        for group in self._groups(turn.actions):
            actions = [turn.actions[j] for j in group]
            text = self._write(actions, turn.thought) if not any(isinstance(a, Invalid) for a in actions) else ""
            out.append(Turn(text, tuple(a.kind for a in actions), tuple(k for j in group for k in kinds[j])))
        return out

    def _groups(self, actions: Sequence[Action]) -> list[list[int]]:
        """The actions split into runs the protocol writes as one tag turn each (greedily)."""
        groups: list[list[int]] = []
        for j, action in enumerate(actions):
            if groups and not isinstance(action, Invalid) and self._writable([actions[i] for i in groups[-1]] + [action]):
                groups[-1].append(j)
            else:
                groups.append([j])
        return groups

    def _writable(self, actions: Sequence[Action]) -> bool:
        if any(isinstance(a, Invalid) for a in actions):
            return False
        try:
            self.protocol.write(actions)
        except Exception:
            return False
        return True

    def _write(self, actions: Sequence[Action], thought: str | None) -> str:
        try:
            return self.protocol.write(actions, thought)
        except Exception:  # a user's protocol that cannot write what its tools mean
            return thought or ""

    def _written(self, actions: Sequence[Action], thought: str | None) -> str:
        """The whole turn as the protocol writes it (the transcript's form of a tool turn)."""
        return "\n".join(
            self._write([actions[j] for j in group], thought) if not isinstance(actions[group[0]], Invalid) else ""
            for group in self._groups(actions)
        ).strip()


def _safe_parse(parser: Callable[[str], ParsedCalls], text: str) -> ParsedCalls:
    """A parser's reading of ``text``; a parser that fails (a user's) or returns something
    else makes the whole turn one broken call, never an exception."""
    try:
        parsed = parser(text)
    except Exception as e:
        return ParsedCalls("", (RawCall(None, error=f"the tool parser failed on this turn ({type(e).__name__})"),))
    if not isinstance(parsed, ParsedCalls):
        return ParsedCalls("", (RawCall(None, error=f"the tool parser returned {type(parsed).__name__}, not ParsedCalls"),))
    return parsed


def _content_text(content: Any) -> str:
    """A message's content as text: a string, a list of text parts, or nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _openai_call(call: Any) -> RawCall:
    """A call of an OpenAI message: ``{"id", "type": "function", "function": {"name", "arguments"}}``."""
    if not isinstance(call, Mapping):
        return RawCall(None, error=f"each tool call must be an object, got {type(call).__name__}")
    function = call.get("function")
    call_id = call.get("id") if isinstance(call.get("id"), str) else None
    if call.get("type", "function") != "function" or not isinstance(function, Mapping):
        return RawCall(None, id=call_id, error="a tool call must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
    read = call_from_object(function)
    return RawCall(read.name, read.arguments, call_id, read.error)


_TYPES = {"string": (str,), "integer": (int,), "array": (list, tuple), "object": (Mapping,)}


def _check_arguments(name: str, args: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``args`` against the tool's JSON schema, or None."""
    properties = schema.get("properties", {})
    expected = ", ".join(f"{k}: {v['type']}" for k, v in properties.items()) or "no arguments"
    missing = [k for k in schema.get("required", ()) if k not in args]
    if missing:
        return f"{name} expects ({expected}); missing {', '.join(map(repr, missing))}"
    extra = [k for k in args if k not in properties]
    if extra:
        return f"{name} expects ({expected}); got unknown argument {', '.join(map(repr, extra))}"
    for key, value in args.items():
        spec = properties[key]
        if not _is_type(value, spec["type"]):
            return f"{name} expects {key} to be {spec['type']}, got {type(value).__name__}"
        if spec["type"] == "array" and not all(_is_type(v, spec["items"]["type"]) for v in value):
            return f"{name} expects {key} to be a list of {spec['items']['type']}s, got {json.dumps(value, default=str)[:80]}"
    return None


def _is_type(value: Any, kind: str) -> bool:
    return isinstance(value, _TYPES[kind]) and not isinstance(value, bool)
