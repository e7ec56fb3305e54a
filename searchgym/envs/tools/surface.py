"""The tool surface: a game played through native tool calls instead of its tag grammar.

It is a translation layer beside the protocol and holds no rules. A turn (an OpenAI
assistant message, or the model's raw text read by a :mod:`tool parser
<searchgym.envs.tools.parsers>`) becomes the same actions a tag turn becomes
(:class:`~searchgym.envs.protocols.base.Search`, ``Select``, ``Evidence``, ``Answer``,
``Complete``, ``Invalid``); the game plays them with its budgets, caps, grounding, summarizer,
penalties and reward; their results come back as tool messages. The reward recipe reads the
turn as the protocol would have written the same actions (:meth:`ToolSurface.records`), so
the same decisions score the same in both formats; :meth:`ToolSurface.write` is the inverse
of :meth:`ToolSurface.parse`, as :meth:`Protocol.write` is of ``Protocol.parse``.

What is a bad call (each an ``Invalid`` action: a message saying what was wrong and what it
cost, and the recipe's ``invalid_action_penalty``):

- a call that cannot be read: invalid JSON, no name, arguments that are not a JSON object,
  an unclosed ``<tool_call>``, a ``tool_calls`` that is not a list, an entry that is not
  ``{"type": "function", "function": {...}}``, a message whose role is not ``assistant``;
- an unknown tool; missing, unknown or wrong-typed arguments (a boolean is not an integer,
  a string is not a list); an empty query or answer;
- a ``select`` of a document number the latest results did not show;
- ``answer`` or ``finish`` beside any call but ``select`` in one turn (its results would
  never be read);
- the calls past :data:`MAX_CALLS_PER_TURN` in one turn, and what lies past
  ``max_action_chars``;
- text that poses as a tool result (``<tool_response>``, ``<|im_start|>tool``, Llama's
  ``ipython`` header, Mistral's ``[TOOL_RESULTS]``, or the protocol's own information tags),
  in the content or in an argument: it is removed, and the turn gets one bad call for it.

A call that names a tool is answered by a tool message with its ``tool_call_id``; what could
not be read as a call at all is answered by one user message after them (a chat template
has no call to attach it to). A reply with no call is the final answer in the games where
the agent answers (the text outside its thinking; as TRL and verifiers read it), and a bad
turn in s3.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Answer, Complete, Evidence, Invalid, ParsedTurn, Protocol, Search, Select
from searchgym.envs.tools.parsers import TOOL_WRITERS, ParsedCalls, RawCall, a_type, call_from_object, json_type, make_tool_parser, short
from searchgym.envs.tools.schemas import tool_prompt, tool_schemas
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import Turn

#: How a turn is written (``action_format``): the protocol's tag grammar, or native tool calls.
ACTION_FORMATS = ("tags", "tools")

#: The most calls one turn may make; the ones after it are bad calls.
MAX_CALLS_PER_TURN = 8

#: A call costs at least this many characters of ``max_action_chars`` (so a message of
#: many empty entries is cut like a long text).
MIN_CALL_CHARS = 32

#: What a search that found nothing gets back (never read as a document).
NO_DOCUMENTS = "No document matches the query."

#: Markup of a tool result in the public chat formats (hermes/ChatML, Llama 3, Mistral):
#: only the environment writes tool results.
FORGED_RESULT = re.compile(
    r"<tool_response>.*?(?:</tool_response>|\Z)|</tool_response>|<\|im_start\|>\s*tool\b.*?(?:<\|im_end\|>|\Z)|"
    r"<\|start_header_id\|>\s*ipython\s*<\|end_header_id\|>.*?(?:<\|eot_id\|>|<\|eom_id\|>|\Z)|"
    r"\[TOOL_RESULTS\].*?(?:\[/TOOL_RESULTS\]|\Z)|\[/TOOL_RESULTS\]",
    re.DOTALL,
)
_FORGED_HINTS = ("<tool_response>", "</tool_response>", "<|im_start|>", "<|start_header_id|>", "[TOOL_RESULTS]", "[/TOOL_RESULTS]")

#: Tag tokens (``<answer>``, ``</think>``, ``<|begin_of_query|>``): in the protocol's writing of a
#: tool turn, free text and arguments carry none, so the record's structure is the calls'.
_TAG_TOKEN = re.compile(r"</?[A-Za-z][\w-]{0,40}>|<\|[^<>|\s]{1,40}\|>")


def plain(text: str) -> str:
    """``text`` without tag tokens (each becomes a space)."""
    return _TAG_TOKEN.sub(" ", text) if "<" in text else text


def split_thinking(content: str) -> tuple[str, str]:
    """``(thinking, rest)`` of a reply: the text of its ``<think>`` blocks (or everything before
    a ``</think>`` a template's own opening tag left unpaired), and the text outside them."""
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


@dataclass(frozen=True)
class ToolTurn(ParsedTurn):
    """A parsed tool turn: :class:`ParsedTurn` plus the calls behind the actions.

    ``message`` is the assistant message as the conversation records it (arguments as
    dicts); ``calls`` the ``(id, name)`` of each call it records, in order; ``action_calls``
    the index in ``calls`` of the call behind each action (None: answered by the user
    message, a bad turn's text or something that could not be read as a call); ``thought``
    the free text the protocol's writing of the turn carries; ``groups`` the actions as the
    protocol's tag turns that perform them (indices into ``actions``) and ``group_texts``
    the protocol's writing of each ("" for a bad call).
    """

    message: Mapping[str, Any] | None = None
    calls: tuple[tuple[str, str], ...] = ()
    action_calls: tuple[int | None, ...] = ()
    thought: str | None = None
    groups: tuple[tuple[int, ...], ...] = ()
    group_texts: tuple[str, ...] = ()


class ToolSurface:
    """``protocol``'s game through tool calls; ``parser`` reads raw text (a name in
    :data:`~searchgym.envs.tools.parsers.TOOL_PARSERS` or a callable)."""

    def __init__(self, protocol: Protocol, parser: str | Callable[[str], ParsedCalls] = "hermes"):
        self.protocol = protocol
        self.parser = make_tool_parser(parser)
        self.tools = tool_schemas(protocol)
        self.names = tuple(t["function"]["name"] for t in self.tools)
        self.terminal = "finish" if protocol.answers_with_generator else "answer"
        # The rules read their own copy: info["tools"] hands out self.tools itself.
        self._parameters = {t["function"]["name"]: t["function"]["parameters"] for t in tool_schemas(protocol)}
        self._env_tags = tuple(protocol.env_tags)
        self._env_patterns = tuple(
            re.compile(re.escape(o) + r".*?(?:" + re.escape(c) + r"|\Z)", re.DOTALL) for o, c in self._env_tags
        )

    # ------------------------------------------------------------------ what the agent reads
    def prompt_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, Any]]:
        """The conversation's first messages: the game's instructions and the question."""
        return [{"role": "user", "content": tool_prompt(self.protocol, example, docs)}]

    def render_docs(self, hits: Sequence[Hit]) -> str:
        return self.protocol.docs_text(hits)

    def wrap_information(self, text: str) -> str:
        return text.strip()

    def budget_feedback(self) -> str:
        then = "keep what you need with select, then call finish" if self.terminal == "finish" else "call answer"
        return f"The search budget is spent: this search was not run. Now {then}."

    def error_text(self, reason: str, penalty: float) -> str:
        """The message of a bad call: what was wrong, and what it cost."""
        cost = f" This bad call costs {-penalty:g} reward." if penalty < 0 else ""
        return f"Error: {reason}.{cost}"

    def selected_text(self, numbers: Sequence[int], kept: Sequence[int]) -> str:
        if not numbers:
            return "No document selected."
        listed = lambda ns: ", ".join(map(str, ns[:12])) + (", ..." if len(ns) > 12 else "")  # noqa: E731
        text = ("Kept document" + ("s " if len(kept) != 1 else " ") + listed(list(kept)) + ".") if kept else "Kept nothing new."
        skipped = [n for n in numbers if n not in kept]
        if skipped:
            cap = self.protocol.docs_per_window
            text += f" Not kept: {listed(skipped)} (kept already" + (f", or past {cap} a search)." if cap else ").")
        return text

    # ------------------------------------------------------------------ reading a turn
    def parse(self, action: Any, *, turn: int, window_size: int, max_chars: int) -> tuple[ToolTurn, bool]:
        """The turn ``action`` (an assistant message or raw text) as actions, and whether it
        was cut to ``max_chars``. ``window_size`` is how many documents the latest results
        showed (what ``select`` may name). Never raises on any message or string."""
        try:
            content, raw_calls, cut, forged = self._read(action, max_chars)
        except Exception as e:  # a Mapping that fails when read (a user's class): the whole turn is one bad call
            content, raw_calls, cut, forged = "", [RawCall(None, error=f"the message could not be read ({type(e).__name__})")], False, False
        names = [c.name if c.error is None else None for c in raw_calls]
        companions = ("select",) if self.terminal == "finish" else ()  # what may stand beside the terminal call
        actions: list[Action] = []
        action_calls: list[int | None] = []
        calls: list[tuple[str, str]] = []
        recorded: list[dict[str, Any]] = []
        ids: set[str] = set()
        for i, call in enumerate(raw_calls):
            if call.error is None and isinstance(call.arguments, Mapping):
                call, forged_argument = self._clean_arguments(call)
                forged = forged or forged_argument
            position: int | None = None
            if isinstance(call.name, str):  # a call that names a tool is recorded and answered by a tool message
                call_id = call.id if isinstance(call.id, str) and 0 < len(call.id) <= 128 else f"call_{turn}_{i}"
                while call_id in ids:  # ids answer calls one to one: a repeated one gets a suffix
                    call_id += "_"
                ids.add(call_id)
                position = len(calls)
                calls.append((call_id, call.name))
                recorded.append({"id": call_id, "type": "function", "function": {"name": call.name, "arguments": _recorded(call.arguments)}})
            if i >= MAX_CALLS_PER_TURN:
                acts: list[Action] = [Invalid(f"not run: a turn makes at most {MAX_CALLS_PER_TURN} tool calls")]
            else:
                alone = len(raw_calls) <= MAX_CALLS_PER_TURN and all(n in companions for j, n in enumerate(names) if j != i)
                acts = self._call_actions(call, window_size, alone)
            actions.extend(acts)
            action_calls.extend([position] * len(acts))
        thinking, rest = split_thinking(content)
        if not raw_calls:
            if self.terminal == "answer" and rest:
                actions.append(Answer(rest))
            elif self.terminal == "answer":
                actions.append(Invalid("the reply has no tool call and no answer text"))
            else:
                actions.append(Invalid(f"the reply has no tool call: call {', '.join(self.names[:-1])} or {self.names[-1]}"))
            action_calls.append(None)
            thought = plain(thinking).strip() or None
        else:
            thought = plain(content).strip() or None
        if forged:  # first, so that it is charged even beside an answer that ends the episode
            actions.insert(0, Invalid("the reply writes a tool result itself; only the environment writes tool results"))
            action_calls.insert(0, None)
        # A selection is of the results already shown: it runs before this turn's searches.
        order = sorted(range(len(actions)), key=lambda j: (j > 0 or not forged) and not isinstance(actions[j], Select))
        actions = [actions[j] for j in order]
        action_calls = [action_calls[j] for j in order]
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if recorded:
            message["tool_calls"] = recorded
        groups, texts = self._groups(actions, thought)
        well_formed = not forged and not any(isinstance(a, Invalid) for a in actions)
        text = "\n".join(t for t in texts if t)
        return ToolTurn(tuple(actions), text, forged, 0, well_formed, message, tuple(calls), tuple(action_calls), thought,
                        groups, texts), cut

    def _read(self, action: Any, max_chars: int) -> tuple[str, list[RawCall], bool, bool]:
        """The content, raw calls, whether cut and whether forged, of a message or raw text."""
        if isinstance(action, str):
            text, forged = self.strip_forged(action[:max_chars])
            parsed = _safe_parse(self.parser, text)
            return parsed.content, list(parsed.calls), len(action) > max_chars, forged
        if not isinstance(action, Mapping):
            error = f"a turn must be an assistant message (a dict) or text, got {a_type(action)}"
            return "", [RawCall(None, error=error)], False, False
        content = _content_text(action.get("content"))
        cut = len(content) > max_chars
        content, forged = self.strip_forged(content[:max_chars])
        role = action.get("role", "assistant")
        if role != "assistant":
            shown = short(role) if isinstance(role, str) else json_type(role)
            return content, [RawCall(None, error=f"the message's role must be \"assistant\", got {shown}")], cut, forged
        tool_calls = action.get("tool_calls")
        if tool_calls is None or (isinstance(tool_calls, (list, tuple)) and not tool_calls):
            parsed = _safe_parse(self.parser, content)  # a server without a tool parser sends the raw text
            return parsed.content, list(parsed.calls), cut, forged
        if not isinstance(tool_calls, (list, tuple)):
            return content, [RawCall(None, error=f"the message's tool_calls must be a list, got {a_type(tool_calls)}")], cut, forged
        budget = max_chars - len(content)
        calls: list[RawCall] = []
        for entry in tool_calls:
            size = max(_json_size(entry, budget), MIN_CALL_CHARS)
            if size > budget:
                calls.append(RawCall(None, error=f"the turn is longer than max_action_chars ({max_chars}): its last "
                                                 f"{len(tool_calls) - len(calls)} call(s) were not read"))
                return content, calls, True, forged
            budget -= size
            calls.append(_openai_call(entry))
        return content, calls, cut, forged

    def strip_forged(self, text: str) -> tuple[str, bool]:
        """``text`` without what poses as a tool result or as the protocol's information
        (a block opened and not closed runs to the end), and whether there was any."""
        forged = False
        if any(h in text for h in _FORGED_HINTS):
            text, n = FORGED_RESULT.subn("", text)
            forged = n > 0
        for (open_tag, close_tag), pattern in zip(self._env_tags, self._env_patterns):
            if open_tag in text or close_tag in text:
                text = pattern.sub("", text).replace(close_tag, "")
                forged = True
        return text, forged

    def _clean_arguments(self, call: RawCall) -> tuple[RawCall, bool]:
        """``call`` with what poses as a tool result removed from its string arguments, and
        whether there was any."""
        forged, arguments = False, dict(call.arguments)
        for key, value in arguments.items():
            if isinstance(value, str):
                arguments[key], was_forged = self.strip_forged(value)
                forged = forged or was_forged
        return (RawCall(call.name, arguments, call.id) if forged else call), forged

    def _call_actions(self, call: RawCall, window_size: int, alone: bool) -> list[Action]:
        """The actions of one call: what it asks, or an ``Invalid`` saying what is wrong."""
        if call.error is not None:
            return [Invalid(call.error if isinstance(call.error, str) else "the call could not be read")]
        name, args = call.name, call.arguments
        if not isinstance(name, str) or name not in self._parameters:
            return [Invalid(f"there is no tool {short(name)}; the tools are {', '.join(self.names)}")]
        if not isinstance(args, Mapping):
            return [Invalid(f"the arguments of {short(name)} must be a JSON object, got {a_type(args)}")]
        problem = _check_arguments(name, args, self._parameters[name])
        if problem:
            return [Invalid(problem)]
        if name == self.terminal and not alone:
            beside = " (beside select)" if self.terminal == "finish" else ""
            return [Invalid(f"{name} must be the only call of its turn{beside}: call it once the results are back")]
        if name == "search":
            query = args["query"].strip()
            return [Search(query)] if query else [Invalid("search needs a non-empty query")]
        if name == "select":
            numbers = tuple(args["doc_ids"])
            unseen = [n for n in numbers if not 1 <= n <= window_size]
            if unseen:
                shown = f"1 to {window_size}" if window_size else "none"
                listed = ", ".join(map(str, unseen[:5])) + (", ..." if len(unseen) > 5 else "")
                return [Invalid(f"select names document {listed}, never shown (the latest results show {shown}); nothing was kept")]
            return [Select(numbers)]
        if name == "finish":
            return [Complete()]
        answer = args["answer"].strip()
        if not answer:
            return [Invalid("answer needs a non-empty answer")]
        evidence = args.get("evidence", "").strip()
        return [Evidence(evidence), Answer(answer)] if evidence else [Answer(answer)]

    # ------------------------------------------------------------------ writing back
    def tool_messages(self, turn: ToolTurn, results: Sequence[str | None]) -> list[dict[str, Any]]:
        """One tool message per call: the texts its actions got, in order (``results`` has
        one entry per action of ``turn``); then, if anything could not be read as a call, a
        user message with what was wrong."""
        texts: dict[int | None, list[str]] = {}
        for call, result in zip(turn.action_calls, results):
            if result:
                texts.setdefault(call, []).append(result)
        messages = [
            {"role": "tool", "tool_call_id": call_id, "name": name,
             "content": "\n\n".join(texts.get(i, ())) or (NO_DOCUMENTS if name == "search" else "Done.")}
            for i, (call_id, name) in enumerate(turn.calls)
        ]
        if None in texts:
            messages.append({"role": "user", "content": "\n\n".join(texts[None])})
        return messages

    def reply(self, turn: ToolTurn, results: Sequence[str | None], kinds: Sequence[Sequence[str]],
              max_chars: int) -> tuple[list[dict[str, Any]], str, bool, list[str]]:
        """The messages answering ``turn`` within ``max_chars`` characters in all, the
        observation (their contents joined by a blank line), whether anything was cut, and
        the documents as shown (the contents of the search calls that retrieved: what the
        agent may quote)."""
        messages = self.tool_messages(turn, results)
        retrieving = {turn.action_calls[j] for j, k in enumerate(kinds) if "documents" in k and results[j]}
        used, cut, shown = 0, False, []
        for m in messages:
            separator = 2 if used else 0
            room = max(max_chars - used - separator, 0)
            content = m["content"]
            if len(content) > room:
                content, cut = content[:room], True
                m["content"] = content
            if content:
                used += separator + len(content)
        for i in retrieving:
            if i is not None and messages[i]["content"]:
                shown.append(messages[i]["content"])
        observation = "\n\n".join(m["content"] for m in messages if m["content"])
        return messages, observation, cut, shown

    def records(self, turn: ToolTurn, kinds: Sequence[Sequence[str]]) -> list[Turn]:
        """The turn as the reward recipe reads it: the tag turns that perform the same actions,
        each written by the protocol (``kinds``: what each action got back)."""
        return [
            Turn(text, tuple(turn.actions[j].kind for j in group), tuple(k for j in group for k in kinds[j]))
            for group, text in zip(turn.groups, turn.group_texts)
        ]

    def _groups(self, actions: Sequence[Action], thought: str | None) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
        """The actions split greedily into runs the protocol writes as one tag turn each, and
        the protocol's writing of each (of the actions with plain text: see :func:`plain`)."""
        groups: list[list[int]] = []
        texts: list[str] = []
        for j, action in enumerate(actions):
            if isinstance(action, Invalid):
                groups.append([j])
                texts.append("")
                continue
            if groups and not isinstance(actions[groups[-1][0]], Invalid):
                text = self._try_write([actions[i] for i in groups[-1]] + [action], thought)
                if text is not None:
                    groups[-1].append(j)
                    texts[-1] = text
                    continue
            text = self._try_write([action], thought)
            groups.append([j])
            texts.append(text if text is not None else thought or "")
        return tuple(tuple(g) for g in groups), tuple(texts)

    def _try_write(self, actions: Sequence[Action], thought: str | None) -> str | None:
        try:
            return self.protocol.write([_plain_action(a) for a in actions], thought)
        except Exception:  # ConfigError: a combination its grammar cannot write in one turn (or a user's protocol failing)
            return None

    # ------------------------------------------------------------------ writing a turn
    def calls_of(self, actions: Sequence[Action]) -> list[tuple[str, dict[str, Any]]]:
        """The ``(name, arguments)`` calls that perform ``actions`` (an ``Evidence`` goes into
        the ``answer`` that follows it); a :class:`~searchgym.error.ConfigError` for what the
        tools cannot express."""
        calls: list[tuple[str, dict[str, Any]]] = []
        evidence: str | None = None
        for action in actions:
            if evidence is not None and not isinstance(action, Answer):
                raise ConfigError(f"ToolSurface.write expects an Evidence to be followed by an Answer, got {action.kind}.")
            if isinstance(action, Search):
                calls.append(("search", {"query": action.query}))
            elif isinstance(action, Select):
                calls.append(("select", {"doc_ids": list(action.doc_numbers)}))
            elif isinstance(action, Evidence):
                evidence = action.text
            elif isinstance(action, Answer):
                calls.append(("answer", {"answer": action.text} if evidence is None else {"answer": action.text, "evidence": evidence}))
                evidence = None
            elif isinstance(action, Complete):
                calls.append(("finish", {}))
            else:
                raise ConfigError(f"ToolSurface.write expects Search, Select, Evidence, Answer or Complete actions, got {action!r}.")
        if evidence is not None:
            raise ConfigError("ToolSurface.write expects an Evidence to be followed by an Answer.")
        for name, args in calls:
            if name not in self._parameters or any(k not in self._parameters[name]["properties"] for k in args):
                raise ConfigError(f"The {self.protocol.name} game's tools ({', '.join(self.names)}) cannot write {name}({', '.join(args)}).")
        return calls

    def write(self, actions: Sequence[Action], thought: str | None = None, *, turn: int = 0) -> dict[str, Any]:
        """An assistant message performing ``actions`` (the inverse of :meth:`parse`), with
        ``thought`` as its content; used by scripted agents and tests."""
        calls = self.calls_of(actions)
        message: dict[str, Any] = {"role": "assistant", "content": thought or ""}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": name, "arguments": args}}
                for i, (name, args) in enumerate(calls)
            ]
        return message

    def write_text(self, actions: Sequence[Action], thought: str | None = None, *, format: str = "hermes") -> str:
        """The model's raw text performing ``actions`` in a parser's format (``"hermes"``,
        ``"llama3_json"``, ``"mistral"``)."""
        if format not in TOOL_WRITERS:
            raise UnknownNameError("tool call format", format, TOOL_WRITERS)
        return TOOL_WRITERS[format](thought or "", self.calls_of(actions))


def _plain_action(action: Action) -> Action:
    if isinstance(action, Search):
        return Search(plain(action.query))
    if isinstance(action, Answer):
        return Answer(plain(action.text))
    if isinstance(action, Evidence):
        return Evidence(plain(action.text))
    return action


def _safe_parse(parser: Callable[[str], ParsedCalls], text: str) -> ParsedCalls:
    """A parser's reading of ``text``; a parser that fails (a user's) or returns something
    else makes the whole turn one broken call, never an exception."""
    try:
        parsed = parser(text)
    except Exception as e:
        return ParsedCalls("", (RawCall(None, error=f"the tool parser failed on this turn ({type(e).__name__})"),))
    if not isinstance(parsed, ParsedCalls) or not isinstance(parsed.content, str) or not isinstance(parsed.calls, (tuple, list)) \
            or not all(isinstance(c, RawCall) for c in parsed.calls):
        return ParsedCalls("", (RawCall(None, error=f"the tool parser returned {type(parsed).__name__}, not ParsedCalls of RawCalls"),))
    return parsed


def _content_text(content: Any) -> str:
    """A message's content as text: a string, a list of text parts, or nothing."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        return "".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _openai_call(call: Any) -> RawCall:
    """A call of an OpenAI message: ``{"id", "type": "function", "function": {"name", "arguments"}}``."""
    if not isinstance(call, Mapping):
        return RawCall(None, error=f"each tool call must be an object, got {a_type(call)}")
    function = call.get("function")
    call_id = call.get("id") if isinstance(call.get("id"), str) else None
    if call.get("type", "function") != "function" or not isinstance(function, Mapping):
        return RawCall(None, id=call_id, error="a tool call must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}")
    return call_from_object(function, call_id=call_id)


def _json_size(value: Any, budget: int) -> int:
    """About how many characters ``value`` takes as JSON, counted until past ``budget``
    (so cyclic, deeply nested or huge values cost no more than the budget to measure)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, Mapping):
            total += 2
            for key, inner in item.items():
                total += (len(key) if isinstance(key, str) else 8) + 4
                if total > budget:
                    return total
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            total += 2 + len(item)
            if total > budget:
                return total
            stack.extend(item)
        else:
            total += 8
        if total > budget:
            return total
    return total


def _recorded(arguments: Any) -> Any:
    """A call's arguments as the conversation records them: a JSON object (a fresh copy), or
    the string the model wrote when it is not one; ``{}`` for what JSON cannot hold."""
    if isinstance(arguments, str):
        return arguments
    try:
        return json.loads(json.dumps(arguments)) if isinstance(arguments, Mapping) else json.dumps(arguments)
    except (TypeError, ValueError, RecursionError):
        return {}


def _is_type(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    return isinstance(value, {"string": str, "integer": int, "array": (list, tuple), "object": Mapping, "boolean": bool}[kind])


def _check_arguments(name: str, args: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What is wrong with ``args`` against the tool's JSON schema, or None."""
    properties = schema.get("properties", {})
    signature = ", ".join(f"{k}: {v['type']}" for k, v in properties.items())
    expected = f"{name}({signature})"
    missing = [k for k in schema.get("required", ()) if k not in args]
    if missing:
        return f"{expected} is missing {', '.join(map(short, missing))}"
    extra = [k for k in args if k not in properties]
    if extra:
        return f"{expected} got unknown argument {', '.join(short(k) for k in extra[:3])}"
    for key, value in args.items():
        spec = properties[key]
        if not _is_type(value, spec["type"]):
            return f"{name} expects {key} to be {_a(spec['type'])}, got {a_type(value)}"
        if spec["type"] == "array":
            wrong = [v for v in value if not _is_type(v, spec["items"]["type"])][:1]
            if wrong:
                return f"{name} expects {key} to be a list of {spec['items']['type']}s, got {a_type(wrong[0])} in it"
    return None


def _a(kind: str) -> str:
    return ("an " if kind[:1] in "aeiou" else "a ") + kind
