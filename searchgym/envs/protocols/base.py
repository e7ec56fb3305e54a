"""What every protocol shares: the parsed actions and the tag scanner.

A protocol is the tag grammar of one of the five systems (Search-R1, s3,
R1-Searcher, R-Search, RECON). It turns one agent turn (text) into a
tuple of actions, and renders what the environment says back. It holds no episode
state: the environment does.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.corpora.types import Hit, QAExample
from searchgym.error import ConfigError


# ---------------------------------------------------------------- actions
@dataclass(frozen=True)
class Search:
    """Retrieve top-k passages for ``query``."""

    query: str
    kind = "search"


@dataclass(frozen=True)
class Select:
    """Keep the documents numbered ``doc_numbers`` (1-based, as rendered) in the context (s3)."""

    doc_numbers: tuple[int, ...]
    kind = "select"


@dataclass(frozen=True)
class Evidence:
    """Evidence the agent wrote from what it retrieved (R-Search)."""

    text: str
    kind = "evidence"


@dataclass(frozen=True)
class Answer:
    """The final answer; ends the episode."""

    text: str
    kind = "answer"


@dataclass(frozen=True)
class Complete:
    """The searcher declares its search complete; a frozen generator answers (s3)."""

    kind = "complete"


@dataclass(frozen=True)
class Invalid:
    """A malformed turn; ``reason`` says what was wrong (for ``info``, not for the agent).
    ``selects``: a bad selection (of documents never shown), which still marks the latest
    window annotated, as a tag selection of nothing valid does (s3)."""

    reason: str
    selects: bool = False
    kind = "invalid"


Action = Search | Select | Evidence | Answer | Complete | Invalid


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
        return tuple(a.kind for a in self.actions)


# ---------------------------------------------------------------- tag scanning
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


# ---------------------------------------------------------------- protocol
class Protocol(ABC):
    """The tag grammar of one system (Search-R1, s3, R1-Searcher, R-Search or RECON)."""

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

    @abstractmethod
    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        """The first observation: instructions and the question (and ``docs`` where the
        protocol starts from retrieved documents)."""

    def messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        """The prompt as chat messages, for agents that apply a chat template."""
        return [{"role": "user", "content": self.prompt(example, docs)}]

    @abstractmethod
    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        """Actions of one cleaned turn and whether the turn is well formed."""

    def render_docs(self, hits: Sequence[Hit]) -> str:
        """The observation for a retrieval: the documents, numbered from 1 in this window,
        inside the protocol's tags. ``Select`` numbers refer to the latest window."""
        return self.wrap_information(self.docs_text(hits))

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

    def parse(self, text: str) -> ParsedTurn:
        """Parse one agent turn. Never raises on any string."""
        kept, ignored = cut_at_stop(text, self.stop_strings)
        clean, forged = strip_blocks(kept, self.env_tags)
        try:
            actions, well_formed = self.parse_actions(clean)
        except Exception as e:  # a parser bug (built-in or a user's protocol) must not end the episode
            actions, well_formed = (Invalid(f"the {self.name} parser failed on this turn ({type(e).__name__})"),), False
        if not actions:
            actions, well_formed = (Invalid("no recognised action tag"),), False
        return ParsedTurn(actions, clean, forged, ignored, well_formed and not forged)

    def _unwritable(self, actions: Sequence[Action]) -> ConfigError:
        kinds = "+".join(a.kind for a in actions) or "nothing"
        return ConfigError(f"The {self.name} protocol cannot write a turn doing {kinds}; {self.writable}.")

    #: What :meth:`write` accepts, for its error message.
    writable: str = "it writes one action per turn"

    # A doc rendering shared by several seeds ("Doc 1(Title: X) text").
    @staticmethod
    def format_doc(number: int, hit: Hit) -> str:
        return f"Doc {number}(Title: {hit.passage.title}) {hit.passage.text}"
