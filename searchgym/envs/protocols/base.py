"""What every protocol shares: the parsed actions and the tag scanner.

A protocol is the tag grammar of one of the five systems (Search-R1, s3,
R1-Searcher, R-Search, RECON), or a user's own. It turns one agent turn (text) into a
tuple of actions, and renders what the environment says back. It holds no episode
state: the environment does. A protocol of your own adds action kinds (an
:class:`Action` subclass played by :meth:`Protocol.act`), reads tags with the public
helpers below, and offers its kinds as tools (:meth:`Protocol.extra_tools`).
"""

from __future__ import annotations

import functools
import inspect
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from searchgym.corpora.types import Hit, QAExample
from searchgym.error import ConfigError, SearchGymError


# ---------------------------------------------------------------- actions
#: Each built-in kind and its class (filled below): the game plays these itself.
BUILT_IN_KINDS: dict[str, type[Action]] = {}


class Action:
    """The base of every action a protocol parses from a turn; subclass it for your own kind.

    An action is a small frozen dataclass of what the agent asked for (``Search(query)``,
    ``Answer(text)``, a user's ``Refine(text)``). Two class attributes say how the game
    treats it:

    - ``kind``: its name, a non-empty string (``"search"``, ``"refine"``). It is what
      ``info["action_kinds"]`` and the recipe's ``Turn.actions`` list; the action object
      itself reaches the recipe too (``Turn.parsed``). The built-in kinds (:data:`BUILT_IN_KINDS`)
      belong to the built-in classes and their subclasses.
    - ``ends_episode``: whether playing it ends the episode (``Answer`` and ``Complete``
      do). A kind of your own that ends it ends it without an answer.

    The game plays the built-in kinds itself; any other kind is handed to the protocol's
    :meth:`Protocol.act`, which says what the environment shows after it. An object of
    another class with a string ``kind`` is accepted the same way (duck typing).
    """

    kind: ClassVar[str]
    ends_episode: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = getattr(cls, "kind", None)
        if not isinstance(kind, str) or not kind.strip():
            raise ConfigError(
                f"Action subclass {cls.__name__} expects a class attribute kind, a non-empty name such as "
                f"'refine', got {kind!r}; add kind = '{cls.__name__.lower()}' to the class."
            )
        owner = BUILT_IN_KINDS.get(kind)
        if owner is not None and not issubclass(cls, owner):
            raise ConfigError(
                f"Action subclass {cls.__name__} expects a kind of its own, got the built-in kind {kind!r} "
                f"(of {owner.__name__}); name it differently, or subclass {owner.__name__}."
            )


def is_action(value: Any) -> bool:
    """Whether ``value`` is an action the game can play: an object whose class has a
    non-empty string ``kind`` (every :class:`Action` has)."""
    kind = getattr(type(value), "kind", None)
    return isinstance(kind, str) and bool(kind)


@dataclass(frozen=True)
class Search(Action):
    """Retrieve top-k passages for ``query``."""

    query: str
    kind = "search"


@dataclass(frozen=True)
class Select(Action):
    """Keep the documents numbered ``doc_numbers`` (1-based, as rendered) in the context (s3)."""

    doc_numbers: tuple[int, ...]
    kind = "select"


@dataclass(frozen=True)
class Evidence(Action):
    """Evidence the agent wrote from what it retrieved (R-Search)."""

    text: str
    kind = "evidence"


@dataclass(frozen=True)
class Answer(Action):
    """The final answer; ends the episode."""

    text: str
    kind = "answer"
    ends_episode = True


@dataclass(frozen=True)
class Complete(Action):
    """The searcher declares its search complete; a frozen generator answers (s3)."""

    kind = "complete"
    ends_episode = True


@dataclass(frozen=True)
class Invalid(Action):
    """A malformed turn; ``reason`` says what was wrong (for ``info``, not for the agent).
    ``selects``: a bad selection (of documents never shown), which still marks the latest
    window annotated, as a tag selection of nothing valid does (s3)."""

    reason: str
    selects: bool = False
    kind = "invalid"


BUILT_IN_KINDS.update((cls.kind, cls) for cls in (Search, Select, Evidence, Answer, Complete, Invalid))


@dataclass(frozen=True)
class ParsedTurn:
    """One agent turn after parsing.

    ``text`` is the turn as the environment keeps it in the transcript: cut at the first
    stop string and with every block of environment-owned tags the agent wrote itself
    (forged ``<information>`` and the like) removed, so that nothing in it can pose as
    retrieval. ``actions`` are executed in order.
    """

    actions: tuple[Action, ...]
    text: str
    forged_env_tags: bool = False
    ignored_chars: int = 0
    well_formed: bool = True

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each action's ``kind`` in order (what ``info["action_kinds"]`` reports)."""
        return tuple(a.kind for a in self.actions)


# ---------------------------------------------------------------- tag scanning
# The helpers every built-in grammar is made of, public so that a protocol of your own
# reads tags the same way (an unclosed block, a forged environment block, a stop string).
def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, int]:
    """Cut ``text`` just after the earliest stop string, as a generation engine stops there.

    Returns the kept text and the number of characters dropped.
    """
    end = len(text)
    for s in stop:
        i = text.find(s)
        if i != -1:
            end = min(end, i + len(s))
    return text[:end], len(text) - end


def strip_blocks(text: str, tags: Sequence[tuple[str, str]]) -> tuple[str, bool]:
    """Remove every ``open … close`` block (an unclosed ``open`` runs to the end of text).

    Used to drop environment-owned blocks that an agent wrote into its own turn. Returns
    the cleaned text and whether anything was removed.
    """
    found = False
    for open_tag, close_tag in tags:
        if open_tag not in text and close_tag not in text:
            continue  # the common turn: nothing to remove, no pattern to run
        pattern = re.compile(re.escape(open_tag) + r".*?(?:" + re.escape(close_tag) + r"|\Z)", re.DOTALL)
        text, n = pattern.subn("", text)
        # A stray closing tag alone is also the environment's, not the agent's.
        stray = text.count(close_tag)
        if stray:
            text = text.replace(close_tag, "")
        found = found or n > 0 or stray > 0
    return text, found


def find_block(text: str, open_tag: str, close_tag: str) -> str | None:
    """Content of the first closed ``open … close`` block, stripped; None if absent."""
    start = text.find(open_tag)
    if start == -1:
        return None
    start += len(open_tag)
    end = text.find(close_tag, start)
    if end == -1:
        return None
    return text[start:end].strip()


def find_blocks(text: str, open_tag: str, close_tag: str) -> list[str]:
    """Contents of every closed ``open … close`` block, in order, each stripped (a block
    opened inside another is read from its first ``open``; an unclosed one is skipped)."""
    blocks, start = [], text.find(open_tag)
    while start != -1:
        start += len(open_tag)
        end = text.find(close_tag, start)
        if end == -1:
            break
        blocks.append(text[start:end].strip())
        start = text.find(open_tag, end + len(close_tag))
    return blocks


_SEARCH_OR_ANSWER = re.compile(r"<(search|answer)>(.*?)</\1>", re.DOTALL)


def search_or_answer(text: str) -> tuple[Action, int]:
    """The first closed ``<search>`` or ``<answer>`` block as an action, and where it starts
    (Search-R1's rule, shared by RECON and R-Search); ``Invalid`` if there is none or it is empty."""
    m = _SEARCH_OR_ANSWER.search(text)
    if m is None:
        return Invalid("no closed <search> or <answer> block"), -1
    tag, content = m.group(1), m.group(2).strip()
    if not content:
        return Invalid(f"empty <{tag}> block"), m.start()
    return (Search(content) if tag == "search" else Answer(content)), m.start()


def first_of(text: str, tags: Sequence[str]) -> str | None:
    """The tag among ``tags`` that occurs first in ``text``."""
    best, best_i = None, len(text) + 1
    for t in tags:
        i = text.find(t)
        if i != -1 and i < best_i:
            best, best_i = t, i
    return best


@functools.lru_cache(maxsize=256)
def accepts_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` takes the keyword argument ``name`` (or any, through ``**kwargs``);
    how an optional hook argument such as ``previous_observation`` reaches only the methods
    that declare it. Cached per function."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a builtin without a signature takes no keyword of ours
        return False
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or (p.name == name and p.kind in kinds) for p in parameters.values())


# ---------------------------------------------------------------- protocol
#: What a :class:`Protocol` subclass must define itself (the abstract methods, and ``name``).
REQUIRED = ("name", "prompt", "parse_actions", "wrap_information", "invalid_feedback", "write")
#: What it may override (each has a default; see the methods).
OPTIONAL = (
    "stop_strings", "env_tags", "messages", "render_docs", "render_turn_docs", "docs_text", "format_doc", "budget_feedback",
    "act", "extra_tools", "tool_messages", "last_search_notice",
)


def missing_members(cls: type) -> list[str]:
    """What the :class:`Protocol` subclass ``cls`` leaves out of :data:`REQUIRED`, in that order."""
    abstract = set(getattr(cls, "__abstractmethods__", ()))
    name = getattr(cls, "name", None)
    return [m for m in REQUIRED if m in abstract or (m == "name" and not (isinstance(name, str) and name))]


def check_protocol_class(cls: type, label: str | None = None) -> None:
    """Refuse a :class:`Protocol` subclass that does not define all of :data:`REQUIRED`, by
    name, listing what it leaves out (a :class:`ConfigError`)."""
    missing = missing_members(cls)
    if not missing:
        return
    what = f"{label!r} ({cls.__module__}:{cls.__qualname__})" if label and label != cls.__qualname__ else f"{cls.__module__}:{cls.__qualname__}"
    need = {
        "name": "name (a class attribute: the protocol's name)", "prompt": "prompt(example, docs=None)",
        "parse_actions": "parse_actions(text)", "wrap_information": "wrap_information(text)",
        "invalid_feedback": "invalid_feedback()", "write": "write(actions, thought=None)",
    }
    raise ConfigError(
        f"The protocol {what} does not define {', '.join(need[m] for m in missing)}: a Protocol subclass defines "
        f"{', '.join(REQUIRED)} (subclass a built-in protocol such as SearchR1Protocol to inherit them; see docs/extending.md, "
        "'A protocol from scratch')."
    )


class Protocol(ABC):
    """The tag grammar of one system (Search-R1, s3, R1-Searcher, R-Search or RECON), or
    your own.

    A protocol of your own subclasses one (or this class) and overrides what changes:
    :meth:`parse_actions` (it may take ``previous_observation``, the text the env showed
    before this turn), :meth:`prompt` / :meth:`messages`, :meth:`act` for the action kinds
    of its own (:class:`Action`), and for ``action_format="tools"`` :meth:`extra_tools`
    and :meth:`tool_messages`.
    """

    #: Registry name, e.g. ``"search_r1"``.
    name: str
    #: Strings at which a generation engine should stop the agent's turn.
    stop_strings: tuple[str, ...] = ()
    #: Environment-owned tag pairs; an agent writing them has its block removed.
    env_tags: tuple[tuple[str, str], ...] = ()
    #: Whether the episode ends by a frozen generator answering (s3) rather than the agent.
    answers_with_generator: bool = False
    #: Whether the first observation already contains naive top-k documents (s3).
    initial_retrieval: bool = False
    #: Whether windows the agent never annotated with a selection reach the generator whole (s3).
    keeps_unannotated_windows: bool = False
    #: The most documents a selection keeps of one window (s3: 3, its App. C); None: no cap.
    docs_per_window: int | None = None
    #: Whether a window never annotated gives only its top ``docs_per_window`` (s3's App. A.5: all of them).
    cap_unannotated: bool = False
    #: Whether the grammar has an evidence block the agent can write (R-Search).
    writes_evidence: bool = False
    #: Whether the seed feeds the prompt through the model's chat template (R1-Searcher does not).
    uses_chat_template: bool = True
    #: Text the env appends (tags) after the documents of the last turn that may search, when only
    #: the answer turn is left (StepSearch's released ``<warning>``); None: nothing.
    last_search_notice: str | None = None

    @abstractmethod
    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        """The first observation: instructions and the question (and ``docs`` where the
        protocol starts from retrieved documents)."""

    def messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        """The prompt as chat messages, for agents that apply a chat template."""
        return [{"role": "user", "content": self.prompt(example, docs)}]

    @abstractmethod
    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        """Actions of one cleaned turn and whether the turn is well formed.

        A protocol that reads what the env showed before the turn declares a keyword
        ``previous_observation`` (``def parse_actions(self, text, previous_observation=None)``):
        it then gets the observation the env returned last (the prompt before the first turn;
        None where :meth:`parse` is called outside an episode). The built-in grammars do not.
        """

    def render_docs(self, hits: Sequence[Hit]) -> str:
        """The observation for a retrieval: the documents, numbered from 1 in this window,
        inside the protocol's tags. ``Select`` numbers refer to the latest window."""
        return self.wrap_information(self.docs_text(hits))

    def render_turn_docs(self, hit_lists: Sequence[Sequence[Hit]]) -> list[str]:
        """The observation text of each search one tag turn ran, in order (one entry per
        search; several when a turn searches in parallel, e.g. ParallelSearch's ``a ## b``).
        The game joins them, in order, into the turn's observation. Default: :meth:`render_docs`
        of each, so each search gets its own block. A protocol may put them all in one block
        by returning it first and ``""`` for the others. Not called with a summarizer (each
        search is condensed on its own) or in ``action_format="tools"`` (each call has its
        own tool message)."""
        return [self.render_docs(hits) for hits in hit_lists]

    def docs_text(self, hits: Sequence[Hit]) -> str:
        """The documents of a retrieval as this protocol writes them, without its tags (what a
        tool call's result holds in ``action_format="tools"``). Default: ``Doc 1(Title: X) text``."""
        return "\n".join(self.format_doc(i, h) for i, h in enumerate(hits, 1))

    @abstractmethod
    def wrap_information(self, text: str) -> str:
        """The observation for already condensed text (a summary) inside the protocol's tags."""

    @abstractmethod
    def invalid_feedback(self) -> str:
        """The observation after a malformed turn."""

    @abstractmethod
    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        """A well-formed turn performing ``actions`` (the inverse of :meth:`parse`), used
        by scripted agents and tests. Raises ``ConfigError`` for a combination of actions
        the grammar cannot express in one turn."""

    def budget_feedback(self) -> str:
        """The observation after a search beyond the search budget."""
        return "\nThe search budget is spent. Give the final answer now.\n"

    def parse(self, text: str, *, previous_observation: str | None = None) -> ParsedTurn:
        """Parse one agent turn. Never raises on any string.

        ``previous_observation`` (what the env showed before the turn) is passed on to
        :meth:`parse_actions` when it declares that keyword."""
        kept, ignored = cut_at_stop(text, self.stop_strings)
        clean, forged = strip_blocks(kept, self.env_tags)
        try:
            if accepts_keyword(type(self).parse_actions, "previous_observation"):
                actions, well_formed = self.parse_actions(clean, previous_observation=previous_observation)  # type: ignore[call-arg]
            else:
                actions, well_formed = self.parse_actions(clean)
            actions = tuple(actions)
            stranger = next((a for a in actions if not is_action(a)), None)
            if stranger is not None:  # the game could not play it: the turn is malformed, not the env broken
                actions, well_formed = (Invalid(f"the {self.name} parser returned {type(stranger).__name__}, not an Action"),), False
        except Exception as e:  # a parser bug (built-in or a user's protocol) must not end the episode
            actions, well_formed = (Invalid(f"the {self.name} parser failed on this turn ({type(e).__name__})"),), False
        if not actions:
            actions, well_formed = (Invalid("no recognised action tag"),), False
        return ParsedTurn(actions, clean, forged, ignored, well_formed and not forged)

    def act(self, action: Action, game: Any) -> str | None:
        """Play an action of a kind of this protocol's own (the game plays the built-in
        kinds itself): what the env shows after it, or None for nothing.

        ``game`` is the :class:`~searchgym.envs.single.game.SearchGame` being played, to
        read (``turns``, ``log.windows``, ``example``, ...), not to change. In tags the text
        is appended to the observation as it is (wrap it in the protocol's own tags); with
        tools it is the call's tool message. It is never read as retrieved documents (a
        recipe's grounding quotes only documents). The default shows nothing; the action is
        still recorded (``info["action_kinds"]``, the recipe's ``Turn.actions`` and
        ``Turn.parsed``), and an action whose class sets ``ends_episode`` ends the episode.
        """
        return None

    def extra_tools(self) -> Sequence[Any]:
        """The tools this protocol adds to the game's built-in ones in ``action_format="tools"``
        (:class:`~searchgym.envs.protocols.tool_spec.ToolSpec`: a name, a JSON schema of its
        arguments and the action a call makes). Default: none."""
        return ()

    def tool_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]] | None:
        """The first messages of the tool game (``action_format="tools"``): chat messages
        ending with the user's, e.g. a system message of your own and the question. None
        (the default) keeps searchgym's tool prompt, which lists :meth:`extra_tools`."""
        return None

    def _unwritable(self, actions: Sequence[Action]) -> ConfigError:
        kinds = "+".join(a.kind for a in actions) or "nothing"
        return ConfigError(f"The {self.name} protocol cannot write a turn doing {kinds}; {self.writable}.")

    #: What :meth:`write` accepts, for its error message.
    writable: str = "it writes one action per turn"

    # A doc rendering shared by several seeds ("Doc 1(Title: X) text").
    @staticmethod
    def format_doc(number: int, hit: Hit) -> str:
        return f"Doc {number}(Title: {hit.passage.title}) {hit.passage.text}"


def render_turn(protocol: Protocol, hit_lists: Sequence[Sequence[Hit]]) -> list[str]:
    """``protocol.render_turn_docs(hit_lists)``, checked: one string per search. A failing or
    ill-shaped result is a :class:`~searchgym.error.SearchGymError` naming the protocol (the
    game undoes the turn, as for any error in a turn)."""
    owner = type(protocol).__name__
    try:
        texts = protocol.render_turn_docs(hit_lists)
    except Exception as e:
        raise SearchGymError(
            f"{owner}.render_turn_docs failed ({type(e).__name__}: {e}); fix the protocol's render_turn_docs() "
            "(it must return one string per search)."
        ) from e
    texts = list(texts) if isinstance(texts, (list, tuple)) else texts
    if not isinstance(texts, list) or len(texts) != len(hit_lists) or not all(isinstance(t, str) for t in texts):
        got = f"{len(texts)} items of {sorted({type(t).__name__ for t in texts})}" if isinstance(texts, list) else type(texts).__name__
        raise SearchGymError(
            f"{owner}.render_turn_docs expects to return a list of {len(hit_lists)} strings (one per search of the turn), "
            f"got {got}."
        )
    return texts


def play_action(protocol: Protocol, action: Any, game: Any, *, as_tool: bool = False) -> str | None:
    """What the game shows after ``action``, a kind it does not play itself:
    ``protocol.act(action, game)``, checked; ``as_tool``: as a tool message, stripped of the
    blank lines that set a tag observation apart. A failing or ill-typed ``act`` is a
    :class:`~searchgym.error.SearchGymError` naming the protocol and the kind (the game
    undoes the turn, as for any error in a turn)."""
    owner = type(protocol).__name__
    try:
        shown = protocol.act(action, game)
    except Exception as e:
        raise SearchGymError(
            f"{owner}.act failed on a {action.kind!r} action ({type(e).__name__}: {e}); fix the protocol's act() "
            "(it must return the text to show, or None)."
        ) from e
    if shown is not None and not isinstance(shown, str):
        raise SearchGymError(
            f"{owner}.act expects to return the text to show after a {action.kind!r} action (a str) or None, got "
            f"{type(shown).__name__}."
        )
    return shown.strip() if as_tool and shown is not None else shown
