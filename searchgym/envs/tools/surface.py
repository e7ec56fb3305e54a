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
- a call of a protocol's own tool (:meth:`Protocol.extra_tools
  <searchgym.envs.protocols.base.Protocol.extra_tools>`) that its
  :class:`~searchgym.envs.protocols.tool_spec.ToolSpec` refuses or fails on;
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

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import BUILT_IN_KINDS, Action, Answer, Complete, Evidence, Invalid, Protocol, Search, Select
from searchgym.envs.tools.no_call import tags_in
from searchgym.envs.tools.messages import (
    MIN_CALL_CHARS, check_arguments, content_text, entry_call, entry_size, is_mapping, openai_call, plain, recorded_arguments,
    safe_parse, split_thinking,
)
from searchgym.envs.tools.parsers import TOOL_WRITERS, ParsedCalls, RawCall, a_type, json_type, make_tool_parser, read_json, short
from searchgym.envs.tools.schemas import extra_tools, tool_prompt, tool_schemas
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import Turn

#: How a turn is written (``action_format``): the protocol's tag grammar, or native tool calls.
ACTION_FORMATS = ("tags", "tools")

#: The most calls one turn may make; the ones after it are bad calls.
MAX_CALLS_PER_TURN = 8

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

@dataclass(slots=True)
class ToolTurn:
    """A parsed tool turn: what :class:`~searchgym.envs.protocols.base.ParsedTurn` holds of a
    tag turn (``actions``, ``text``: the protocol's writing of the turn, ``forged_env_tags``,
    ``ignored_chars``, ``well_formed``), plus the calls behind the actions.

    ``message`` is the assistant message as the conversation records it (arguments as
    dicts); ``calls`` the ``(id, name)`` of each call it records, in order; ``action_calls``
    the index in ``calls`` of the call behind each action (None: answered by the user
    message, a bad turn's text or something that could not be read as a call); ``thought``
    the free text the protocol's writing of the turn carries; ``groups`` the actions as the
    protocol's tag turns that perform them (indices into ``actions``) and ``group_texts``
    the protocol's writing of each ("" for a bad call). ``without_call``: the reply made no
    call (its text is the answer, or a bad turn in s3); ``grammar_tags`` the tags of a tag
    grammar that text writes (``<search>``; :mod:`~searchgym.envs.tools.no_call`). Read it;
    the game does not expect it to change.
    """

    actions: tuple[Action, ...]
    text: str
    forged_env_tags: bool = False
    ignored_chars: int = 0
    well_formed: bool = True
    message: Mapping[str, Any] | None = None
    calls: tuple[tuple[str, str], ...] = ()
    action_calls: tuple[int | None, ...] = ()
    thought: str | None = None
    groups: tuple[tuple[int, ...], ...] = ()
    group_texts: tuple[str, ...] = ()
    without_call: bool = False
    grammar_tags: tuple[str, ...] = ()

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(a.kind for a in self.actions)


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
        # The protocol's own tools (Protocol.extra_tools): a call of one is made into actions by its ToolSpec.
        self._extra = {spec.name: spec for spec in extra_tools(protocol)}
        self._env_tags = tuple(protocol.env_tags)
        self._env_patterns = tuple(
            re.compile(re.escape(o) + r".*?(?:" + re.escape(c) + r"|\Z)", re.DOTALL) for o, c in self._env_tags
        )

    @classmethod
    def for_env(cls, protocol: Protocol, action_format: str, parser: Any = None) -> ToolSurface | None:
        """The surface of an env's ``action_format`` (None: the protocol's tags); ``parser`` is
        read only with ``"tools"`` (default hermes)."""
        if parser is not None and action_format != "tools":
            raise ConfigError(
                f"SearchEnv reads tool_parser only with action_format='tools', got tool_parser={parser!r} with "
                f"action_format={action_format!r}; pass action_format='tools' or drop tool_parser."
            )
        return cls(protocol, parser or "hermes") if action_format == "tools" else None

    # ------------------------------------------------------------------ what the agent reads
    def prompt_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, Any]]:
        """The conversation's first messages: the game's instructions and the question (the
        protocol's own :meth:`~searchgym.envs.protocols.base.Protocol.tool_messages` if it
        writes them)."""
        custom = self.protocol.tool_messages(example, docs)
        if custom is None:
            return [{"role": "user", "content": tool_prompt(self.protocol, example, docs)}]
        messages = list(custom) if isinstance(custom, (list, tuple)) else None
        if not messages or not all(
                isinstance(m, Mapping) and m.get("role") in ("system", "user", "assistant") and isinstance(m.get("content"), str)
                for m in messages) or messages[-1]["role"] != "user":
            raise ConfigError(
                f"{type(self.protocol).__name__}.tool_messages expects a list of chat messages "
                "({'role': 'system' | 'user' | 'assistant', 'content': str}) ending with the user's, or None for "
                f"searchgym's tool prompt, got {custom!r:.200}."
            )
        return [{"role": m["role"], "content": m["content"]} for m in messages]

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

    def selected_text(self, numbers: Sequence[int], kept: Sequence[Hit], shown: Sequence[Hit]) -> str:
        """What a ``select`` of ``numbers`` gets back: which of them were kept (``kept``: the hits
        it kept, of the latest results ``shown``) and which not."""
        if not numbers:
            return "No document selected."
        ids = {h.passage.id for h in kept}
        kept_numbers = [n for n in numbers if 1 <= n <= len(shown) and shown[n - 1].passage.id in ids] if kept else []
        skipped = [n for n in numbers if n not in kept_numbers]
        text = ("Kept document" + ("s " if len(kept_numbers) != 1 else " ") + _listed(kept_numbers) + ".") if kept_numbers \
            else "Kept nothing new."
        if skipped:
            cap = self.protocol.docs_per_window
            text += f" Not kept: {_listed(skipped)} (kept already" + (f", or past {cap} a search)." if cap else ").")
        return text

    # ------------------------------------------------------------------ reading a turn
    def parse(self, action: Any, *, turn: int, window_size: int, max_chars: int,
              previous_observation: str | None = None) -> tuple[ToolTurn, bool]:
        """The turn ``action`` (an assistant message or raw text) as actions, and whether it
        was cut to ``max_chars``. ``window_size`` is how many documents the latest results
        showed (what ``select`` may name); ``previous_observation`` what the env showed last
        (for a :class:`~searchgym.envs.protocols.tool_spec.ToolSpec` that reads it). Never
        raises on any message or string."""
        if type(action) is dict:  # the common well-formed message, read in one pass
            entries = action.get("tool_calls")
            content = action.get("content")
            if type(entries) is list and (content is None or type(content) is str) and action.get("role", "assistant") == "assistant":
                quick = self._quick_turn(content or "", [entry_call(e) for e in entries], turn, window_size, max_chars)
                if quick is not None:
                    return quick, False
        try:
            content, raw_calls, cut, forged = self._read(action, max_chars)
        except Exception as e:  # a Mapping that fails when read (a user's class): the whole turn is one bad call
            content, raw_calls, cut, forged = "", [RawCall(None, error=f"the message could not be read ({type(e).__name__})")], False, False
        if not forged and type(action) is str and raw_calls and all(c.error is None for c in raw_calls):
            quick = self._quick_turn(content, [c[:3] for c in raw_calls], turn, window_size, None)
            if quick is not None:
                return quick, cut
        several = len(raw_calls) > 1
        names = [c.name if c.error is None else None for c in raw_calls] if several else ()
        companions = ("select",) if self.terminal == "finish" else ()  # what may stand beside the terminal call
        actions: list[Action] = []
        action_calls: list[int | None] = []
        calls: list[tuple[str, str]] = []
        recorded: list[dict[str, Any]] = []
        ids: set[str] = set()
        for i, call in enumerate(raw_calls):
            if call.error is None and type(call.arguments) is dict and any(
                    type(v) is str and ("<" in v or "[" in v) for v in call.arguments.values()):
                call, forged_argument = self._clean_arguments(call)
                forged = forged or forged_argument
            elif call.error is None and type(call.arguments) is not dict and is_mapping(call.arguments):
                call, forged_argument = self._clean_arguments(call)
                forged = forged or forged_argument
            position: int | None = None
            name = call.name
            if type(name) is str:  # a call that names a tool is recorded and answered by a tool message
                call_id = call.id if type(call.id) is str and 0 < len(call.id) <= 128 else f"call_{turn}_{i}"
                while call_id in ids:  # ids answer calls one to one: a repeated one gets a suffix
                    call_id += "_"
                ids.add(call_id)
                position = len(calls)
                calls.append((call_id, name))
                recorded.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": recorded_arguments(call.arguments)}})
            if i >= MAX_CALLS_PER_TURN:
                acts: list[Action] = [Invalid(f"not run: a turn makes at most {MAX_CALLS_PER_TURN} tool calls")]
            else:
                alone = not several or (len(raw_calls) <= MAX_CALLS_PER_TURN
                                        and all(n in companions for j, n in enumerate(names) if j != i))
                acts = self._call_actions(call, window_size, alone, previous_observation)
            actions.extend(acts)
            action_calls.extend([position] * len(acts))
        thinking, rest = split_thinking(content)
        tags: tuple[str, ...] = ()
        if not raw_calls:
            tags = tags_in(content)
            if self.terminal == "answer" and rest:
                actions.append(Answer(rest))
            elif self.terminal == "answer":
                actions.append(Invalid("the reply has no tool call and no answer text"))
            else:
                # A reply in a tag grammar is named as one: the model is writing the wrong format.
                wrote = f" (it writes {', '.join(tags)}: tags of a tag grammar, which this env does not read)" if tags else ""
                actions.append(Invalid(f"the reply has no tool call: call {', '.join(self.names[:-1])} or {self.names[-1]}{wrote}"))
            action_calls.append(None)
            thought = plain(thinking).strip() or None
        else:
            thought = plain(content).strip() or None
        if several and any(type(a) is Select for a in actions):
            # A selection is of the results already shown: it runs before this turn's searches.
            order = sorted(range(len(actions)), key=lambda j: type(actions[j]) is not Select)
            actions = [actions[j] for j in order]
            action_calls = [action_calls[j] for j in order]
        if forged:  # first, so that it is charged even beside an answer that ends the episode
            actions.insert(0, Invalid("the reply writes a tool result itself; only the environment writes tool results"))
            action_calls.insert(0, None)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if recorded:
            message["tool_calls"] = recorded
        groups, texts = self._groups(actions, thought)
        well_formed = not forged and not any(type(a) is Invalid for a in actions)
        text = texts[0] if len(texts) == 1 else "\n".join(t for t in texts if t)
        return ToolTurn(tuple(actions), text, forged, 0, well_formed, message, tuple(calls), tuple(action_calls), thought,
                        groups, texts, not raw_calls, tags), cut

    def _quick_turn(self, content: str, calls: Sequence[tuple[Any, Any, Any] | None], turn: int, window_size: int,
                    max_chars: int | None) -> ToolTurn | None:
        """The turn of ``content`` and ``calls`` (``(name, arguments, id)`` each) when it is the
        common one: free text without markup, and calls that each name a tool with well-typed,
        non-empty, markup-free arguments, within the size and the call count, the terminal call
        alone (beside select). None for any other, which :meth:`parse`'s general reading reads
        (to the same turn for these; ``tests/envs/test_tools.py`` checks both agree)."""
        if not 0 < len(calls) <= MAX_CALLS_PER_TURN or "<" in content or "[" in content:
            return None
        size = len(content)
        actions: list[Action] = []
        action_calls: list[int] = []
        recorded: list[dict[str, Any]] = []
        ids: list[str] = []
        named: list[tuple[str, str]] = []
        selects = terminals = 0
        for i, call in enumerate(calls):
            if call is None:
                return None
            name, arguments, call_id = call
            if type(arguments) is str:
                arguments, error = read_json(arguments) if arguments.strip() else ({}, None)
                if error is not None:
                    return None
            if type(name) is not str or type(arguments) is not dict:
                return None
            if call_id is None:
                call_id = f"call_{turn}_{i}"
            if type(call_id) is not str or not 0 < len(call_id) <= 128 or call_id in ids:
                return None
            copy: dict[str, Any] = {}
            if name in self._extra:  # a tool of the protocol's own (its answer too): parse() reads it
                return None
            if name == "search":
                query = arguments.get("query")
                if len(arguments) != 1 or type(query) is not str or "<" in query or "[" in query or not query.strip():
                    return None
                actions.append(Search(query.strip()))
                copy["query"] = query
                size += len(query)
            elif name == "answer" and self.terminal == "answer":
                answer, evidence = arguments.get("answer"), arguments.get("evidence", "")
                if type(answer) is not str or type(evidence) is not str or "<" in answer + evidence or "[" in answer + evidence \
                        or not answer.strip() or len(arguments) != 1 + ("evidence" in arguments) \
                        or ("evidence" in arguments and "evidence" not in self._parameters["answer"]["properties"]):
                    return None
                if evidence.strip():
                    actions.append(Evidence(evidence.strip()))
                    action_calls.append(len(ids))
                actions.append(Answer(answer.strip()))
                copy.update(arguments)
                size += len(answer) + len(evidence)
                terminals += 1
            elif name == "select" and self.terminal == "finish":
                numbers = arguments.get("doc_ids")
                if len(arguments) != 1 or type(numbers) is not list or not all(type(n) is int and 0 < n <= window_size for n in numbers):
                    return None
                actions.append(Select(tuple(numbers)))
                copy["doc_ids"] = list(numbers)
                size += 4 * len(numbers)
                selects += 1
            elif name == "finish" and self.terminal == "finish" and not arguments:
                actions.append(Complete())
                terminals += 1
            else:
                return None
            action_calls.append(len(ids))
            ids.append(call_id)
            named.append((call_id, name))
            recorded.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": copy}})
            size += MIN_CALL_CHARS + len(name)
        if terminals and len(calls) - selects > 1 or max_chars is not None and size > max_chars:
            return None
        if selects and len(calls) > 1:  # a selection runs before the turn's searches
            order = sorted(range(len(actions)), key=lambda j: type(actions[j]) is not Select)
            actions = [actions[j] for j in order]
            action_calls = [action_calls[j] for j in order]
        thought = content.strip() or None
        if len(actions) == 1:
            text = self._try_write(actions, thought)
            groups, texts = ((0,),), (text if text is not None else thought or "",)
            text = texts[0]
        else:
            groups, texts = self._groups(actions, thought)
            text = "\n".join(t for t in texts if t)
        message = {"role": "assistant", "content": content, "tool_calls": recorded}
        return ToolTurn(tuple(actions), text, False, 0, True, message, tuple(named), tuple(action_calls), thought, groups, texts)

    def _read(self, action: Any, max_chars: int) -> tuple[str, list[RawCall], bool, bool]:
        """The content, raw calls, whether cut and whether forged, of a message or raw text."""
        if isinstance(action, str):
            text, forged = self.strip_forged(action[:max_chars])
            parsed = safe_parse(self.parser, text)
            return parsed.content, list(parsed.calls), len(action) > max_chars, forged
        if not is_mapping(action):
            error = f"a turn must be an assistant message (a dict) or text, got {a_type(action)}"
            return "", [RawCall(None, error=error)], False, False
        content = action.get("content")
        if type(content) is not str:
            content = content_text(content)
        cut = len(content) > max_chars
        content, forged = self.strip_forged(content[:max_chars])
        role = action.get("role", "assistant")
        if role != "assistant":
            shown = short(role) if isinstance(role, str) else json_type(role)
            return content, [RawCall(None, error=f"the message's role must be \"assistant\", got {shown}")], cut, forged
        tool_calls = action.get("tool_calls")
        if not tool_calls and (tool_calls is None or isinstance(tool_calls, (list, tuple))):
            parsed = safe_parse(self.parser, content)  # a server without a tool parser sends the raw text
            return parsed.content, list(parsed.calls), cut, forged
        if not isinstance(tool_calls, (list, tuple)):
            return content, [RawCall(None, error=f"the message's tool_calls must be a list, got {a_type(tool_calls)}")], cut, forged
        budget = max_chars - len(content)
        calls: list[RawCall] = []
        for entry in tool_calls:
            size = entry_size(entry, budget)
            if size > budget:
                calls.append(RawCall(None, error=f"the turn is longer than max_action_chars ({max_chars}): its last "
                                                 f"{len(tool_calls) - len(calls)} call(s) were not read"))
                return content, calls, True, forged
            budget -= size
            calls.append(openai_call(entry))
        return content, calls, cut, forged

    def strip_forged(self, text: str) -> tuple[str, bool]:
        """``text`` without what poses as a tool result or as the protocol's information
        (a block opened and not closed runs to the end), and whether there was any."""
        if "<" not in text and "[" not in text:  # the common text: nothing to look for
            return text, False
        forged = False
        if "<tool_response>" in text or "</tool_response>" in text or "<|im_start|>" in text or "<|start_header_id|>" in text \
                or "TOOL_RESULTS]" in text:
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
        forged, arguments = False, None
        for key, value in call.arguments.items():
            if type(value) is str and ("<" in value or "[" in value):
                cleaned, was_forged = self.strip_forged(value)
                if was_forged:
                    arguments = arguments or dict(call.arguments)
                    arguments[key], forged = cleaned, True
        return (RawCall(call.name, arguments, call.id) if forged else call), forged

    def _call_actions(self, call: RawCall, window_size: int, alone: bool, previous_observation: str | None = None) -> list[Action]:
        """The actions of one call: what it asks, or an ``Invalid`` saying what is wrong."""
        if call.error is not None:
            return [Invalid(call.error if isinstance(call.error, str) else "the call could not be read")]
        name, args = call.name, call.arguments
        if not isinstance(name, str) or name not in self._parameters:
            return [Invalid(f"there is no tool {short(name)}; the tools are {', '.join(self.names)}")]
        if not is_mapping(args):
            return [Invalid(f"the arguments of {short(name)} must be a JSON object, got {a_type(args)}")]
        problem = check_arguments(name, args, self._parameters[name])
        if problem:
            return [Invalid(problem)]
        if name == self.terminal and not alone:
            beside = " (beside select)" if self.terminal == "finish" else ""
            return [Invalid(f"{name} must be the only call of its turn{beside}: call it once the results are back")]
        if name in self._extra:  # a tool of the protocol's own: its ToolSpec makes the actions (or an Invalid)
            return list(self._extra[name].actions(args, previous_observation))
        if name == "search":
            query = args["query"].strip()
            return [Search(query)] if query else [Invalid("search needs a non-empty query")]
        if name == "select":
            numbers = tuple(args["doc_ids"])
            unseen = [n for n in numbers if not 1 <= n <= window_size]
            if unseen:
                shown = f"1 to {window_size}" if window_size else "none"
                listed = ", ".join(map(str, unseen[:5])) + (", ..." if len(unseen) > 5 else "")
                return [Invalid(f"select names document {listed}, never shown (the latest results show {shown}); nothing was kept", selects=True)]
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
        texts: list[list[str]] = [[] for _ in turn.calls]
        unread: list[str] = []
        for call, result in zip(turn.action_calls, results):
            if result:
                (unread if call is None else texts[call]).append(result)
        messages = []
        for (call_id, name), got in zip(turn.calls, texts):
            content = got[0] if len(got) == 1 else "\n\n".join(got) or (NO_DOCUMENTS if name == "search" else "Done.")
            messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": content})
        if unread:
            messages.append({"role": "user", "content": "\n\n".join(unread)})
        return messages

    def reply(self, turn: ToolTurn, results: Sequence[str | None], kinds: Sequence[Sequence[str]],
              max_chars: int) -> tuple[list[dict[str, Any]], str, bool, list[str]]:
        """The messages answering ``turn`` within ``max_chars`` characters in all, the
        observation (their contents joined by a blank line), whether anything was cut, and
        the documents as shown (the contents of the search calls that retrieved: what the
        agent may quote)."""
        if len(results) == 1 and turn.action_calls == (0,) and results[0]:  # one call, one result: the common turn
            call_id, name = turn.calls[0]
            content = results[0]
            cut = len(content) > max_chars
            if cut:
                content = content[:max_chars]
            shown = [content] if content and "documents" in kinds[0] else []
            return [{"role": "tool", "tool_call_id": call_id, "name": name, "content": content}], content, cut, shown
        messages = self.tool_messages(turn, results)
        used, cut, contents = 0, False, []
        for m in messages:
            content = m["content"]
            room = max_chars - used - (2 if used else 0)
            if len(content) > room:
                content, cut = content[:max(room, 0)], True
                m["content"] = content
            if content:
                used += len(content) + (2 if used else 0)
                contents.append(content)
        shown = []
        for j, k in enumerate(kinds):
            if "documents" in k and results[j]:
                i = turn.action_calls[j]
                if i is not None and messages[i]["content"]:
                    shown.append(messages[i]["content"])
        return messages, "\n\n".join(contents), cut, shown

    def records(self, turn: ToolTurn, kinds: Sequence[Sequence[str]], *, round: int = 0) -> list[Turn]:
        """The turn as the reward recipe reads it: the tag turns that perform the same actions,
        each written by the protocol (``kinds``: what each action got back), with their action
        objects. They all carry ``round`` (the agent turn, from 0): the calls of one message are
        one round, however many tag turns the protocol needs to write them."""
        records = []
        for group, text in zip(turn.groups, turn.group_texts):
            parsed = tuple(turn.actions[j] for j in group)
            records.append(Turn(text, tuple(a.kind for a in parsed), tuple(k for j in group for k in kinds[j]), round, parsed))
        return records

    def _groups(self, actions: Sequence[Action], thought: str | None) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
        """The actions split greedily into runs the protocol writes as one tag turn each, and
        the protocol's writing of each (of the actions with plain text: see :func:`plain`)."""
        groups: list[list[int]] = []
        texts: list[str | None] = []  # None: not written yet (a group waits for what may join it)
        for j, action in enumerate(actions):
            if type(action) is Invalid:
                self._settle(groups, texts, actions, thought)
                groups.append([j])
                texts.append("")
                continue
            if groups and texts[-1] != "":  # the last group is of actions: try the action in it
                text = self._try_write([actions[i] for i in groups[-1]] + [action], thought)
                if text is not None:
                    groups[-1].append(j)
                    texts[-1] = text
                    continue
                self._settle(groups, texts, actions, thought)
            groups.append([j])
            texts.append(None)
        self._settle(groups, texts, actions, thought)
        return tuple(tuple(g) for g in groups), tuple(texts)

    def _settle(self, groups: list[list[int]], texts: list[str | None], actions: Sequence[Action], thought: str | None) -> None:
        """Write the last group if it is not written yet (alone; the thought if the grammar cannot)."""
        if texts and texts[-1] is None:
            text = self._try_write([actions[i] for i in groups[-1]], thought)
            texts[-1] = text if text is not None else thought or ""

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
            spec = next((t for t in self._extra.values() if t.makes(action)), None)
            if spec is not None:  # a tool of the protocol's own (its own answer too)
                calls.append((spec.name, spec.arguments(action)))
            elif isinstance(action, Search):
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
                spec = next((t for t in self._extra.values() if t.makes(action)), None)
                if spec is None:
                    own = "".join(f", {t.action.__name__}" for t in self._extra.values() if t.action is not None)
                    raise ConfigError(
                        f"ToolSurface.write expects Search, Select, Evidence, Answer or Complete actions{own}, got {action!r}."
                    )
                calls.append((spec.name, spec.arguments(action)))
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


def _listed(numbers: Sequence[int]) -> str:
    return ", ".join(map(str, numbers[:12])) + (", ..." if len(numbers) > 12 else "")


def _plain_action(action: Action) -> Action:
    kind = type(action)
    if kind is Search:
        return Search(plain(action.query)) if "<" in action.query else action
    if kind is Answer or kind is Evidence:
        return kind(plain(action.text)) if "<" in action.text else action
    if kind not in BUILT_IN_KINDS.values() and dataclasses.is_dataclass(action):
        # An action of a protocol's own: its text fields lose their tag tokens too, so that the
        # protocol's writing of the turn has the calls' structure, not tags an argument carried.
        tagged = {f.name: plain(v) for f in dataclasses.fields(action) if isinstance(v := getattr(action, f.name), str) and "<" in v}
        if tagged:
            try:
                return dataclasses.replace(action, **tagged)
            except Exception:  # a dataclass whose fields cannot be replaced (init=False): written as it is
                return action
    return action
