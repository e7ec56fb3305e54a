"""The browse game's protocol: ``search``, ``open``, ``find`` and ``answer``, as tools and as tags.

One more protocol on the same game (DESIGN.md, "Deep research and long horizons"): the game
runs the searches, its budgets (``max_calls``, ``max_context_tokens``) and the recipe; this
protocol adds two action kinds of its own, :class:`Open` and :class:`Find`, played by
:meth:`DeepResearchProtocol.act` against a :class:`~searchgym.deepresearch.documents.DocumentStore`
over the env's corpus, and an answer that carries citations and a confidence
(:class:`CitedAnswer`, an ``Answer``: the game ends the episode on it as on any answer).

The tools follow BrowseComp-Plus's (``searcher/tools.py`` there: ``search`` with k=5 hits and
512-token snippets, ``get_document``), with the full document read page by page (``open``) and
searched inside (``find``) so that a long document never floods the context.

The tag grammar writes one action a turn, Search-R1's way (the engine stops at its closing tag)::

    <search> query </search>
    <open> doc_id [page] </open>
    <find> doc_id | text to look for </find>
    <citations> doc_id, doc_id </citations> <confidence> 80 </confidence> <answer> the answer </answer>

Parallel calls are a tool turn's (several calls in one assistant message).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.corpora.types import Corpus, Hit, QAExample
from searchgym.deepresearch.documents import DocumentStore, id_problem, pattern_problem, snippet
from searchgym.envs.protocols import Protocol
from searchgym.envs.protocols.base import Action, Answer, Invalid, Search, find_block
from searchgym.envs.protocols.tool_spec import ToolSpec
from searchgym.error import ConfigError, SearchGymError

__all__ = ["CitedAnswer", "DeepResearchProtocol", "Find", "Open"]


@dataclass(frozen=True)
class Open(Action):
    """Read page ``page`` (from 1) of document ``doc_id``."""

    doc_id: str
    page: int = 1
    kind = "open"


@dataclass(frozen=True)
class Find(Action):
    """Find the places of document ``doc_id`` that hold ``pattern`` (literal text)."""

    doc_id: str
    pattern: str
    kind = "find"


@dataclass(frozen=True)
class CitedAnswer(Answer):
    """The final answer with the documents it rests on and a confidence in [0, 100] (None:
    not given). Ends the episode, as every ``Answer``."""

    citations: tuple[str, ...] = ()
    confidence: float | None = None


_INFORMATION = ("<information>", "</information>")
_ACTION = re.compile(r"<(search|open|find|answer)>(.*?)</\1>", re.DOTALL)
_PAGE = re.compile(r"^(.*\S)\s+(?:page\s*)?(\d{1,9})$", re.DOTALL | re.IGNORECASE)

DEEP_RESEARCH_TOOL_PROMPT = (
    "You are a deep-research agent. Answer the question below from a fixed corpus of documents; the answer "
    "is only there, and the question gives several clues that together pick out one answer, each clue in "
    "another document. Use the tools:\n"
    "- search(query): the documents that best match the query, each with its doc id, title and the start of its text;\n"
    "- open(doc_id, page): one page of a document ({page_words} words a page; the result says how many pages it has);\n"
    "- find(doc_id, pattern): the places in a document that hold a text (case-insensitive), each with its page;\n"
    "- answer(answer, citations, confidence): ends the episode; the answer alone (e.g. a name), the doc ids "
    "that support it, and your confidence from 0 to 100.\n"
    "Several calls in one turn run in parallel. The number of calls is limited: read what helps."
    "\n\nQuestion: {question}"
)

DEEP_RESEARCH_TAG_PROMPT = (
    "You are a deep-research agent. Answer the question below from a fixed corpus of documents; the answer "
    "is only there, and the question gives several clues that together pick out one answer, each clue in "
    "another document. Reason inside <think> and </think>, then write one action a turn:\n"
    "<search> query </search> returns the documents that best match the query, each with its doc id, title and the start of its text;\n"
    "<open> doc_id page </open> returns one page of a document ({page_words} words a page; the page number may be left out for page 1);\n"
    "<find> doc_id | text </find> returns the places in a document that hold the text, each with its page;\n"
    "the results come back between <information> and </information>. To finish, write "
    "<citations> doc_id, doc_id </citations> <confidence> 0 to 100 </confidence> <answer> the answer alone </answer>."
    "\n\nQuestion: {question}"
)


class DeepResearchProtocol(Protocol):
    """The browse game: search, open a page, find inside a document, answer with citations.

    Args:
        snippet_words: Words of each search hit's text shown (BrowseComp-Plus: 512 tokens).
        page_words: Words per page of ``open``.
        max_find_results: The most places one ``find`` returns.
        max_citations: The most doc ids an answer may cite; an answer citing more is a bad
            call (so citing every document is no strategy).
        documents: The corpus ``open`` and ``find`` read (None: the env's own, given by
            :meth:`set_corpus`); a path or name as ``corpus=`` takes, for a search index over
            chunks of these documents.
    """

    name = "deep_research"
    stop_strings = ("</search>", "</open>", "</find>", "</answer>")
    env_tags = (_INFORMATION,)
    uses_chat_template = True
    writable = "it writes one Search, Open or Find a turn, or an Answer"
    #: The built-in LM-free agents as this game's own (``module:factory``, loaded on first use):
    #: ``make_agent("oracle", env)`` and ``"random"`` play these on an env of this protocol.
    scripted_agents = {"oracle": "searchgym.deepresearch.agents:DeepResearchOracle.for_env",
                       "random": "searchgym.deepresearch.agents:DeepResearchRandom.for_env"}

    def __init__(self, *, snippet_words: int = 512, page_words: int = 512, max_find_results: int = 10,
                 max_citations: int = 10, documents: Any = None):
        for key, value in (("snippet_words", snippet_words), ("page_words", page_words),
                           ("max_find_results", max_find_results), ("max_citations", max_citations)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"DeepResearchProtocol expects {key} to be a positive integer, got {value!r}.")
        self.snippet_words, self.page_words = snippet_words, page_words
        self.max_find_results, self.max_citations = max_find_results, max_citations
        self.documents = documents
        self.store: DocumentStore | None = None
        if documents is not None:
            from searchgym.corpora import load_corpus

            self._bind(load_corpus(documents) if not isinstance(documents, Corpus) else documents)

    def settings(self) -> dict[str, Any]:
        """What a resumed run must match (``searchgym.plugins.settings_of``)."""
        return {"snippet_words": self.snippet_words, "page_words": self.page_words, "max_find_results": self.max_find_results,
                "max_citations": self.max_citations, "documents": None if self.documents is None else str(self.documents)}

    def _bind(self, corpus: Corpus) -> None:
        self.store = DocumentStore(corpus, page_words=self.page_words, max_find_results=self.max_find_results)

    def set_corpus(self, corpus: Corpus) -> None:
        """The env's corpus, which ``open`` and ``find`` read unless ``documents`` was given."""
        if self.documents is None:
            self._bind(corpus)

    def _store(self) -> DocumentStore:
        if self.store is None:
            raise SearchGymError(
                "DeepResearchProtocol has no documents to read: it gets the env's corpus from SearchEnv (set_corpus), "
                "or documents= when built on its own."
            )
        return self.store

    # ------------------------------------------------------------------ what the agent reads
    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        return DEEP_RESEARCH_TAG_PROMPT.format(page_words=self.page_words, question=example.question.strip())

    def tool_messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        text = DEEP_RESEARCH_TOOL_PROMPT.format(page_words=self.page_words, question=example.question.strip())
        return [{"role": "user", "content": text}]

    def docs_text(self, hits: Sequence[Hit]) -> str:
        """Each hit as ``[doc_id] title`` and its snippet, blank lines apart."""
        return "\n\n".join(f"[{h.passage.id}] {h.passage.title}\n{snippet(h.passage.text, self.snippet_words)}" for h in hits)

    def wrap_information(self, text: str) -> str:
        return f"\n\n{_INFORMATION[0]}{text.strip()}{_INFORMATION[1]}\n\n"

    def invalid_feedback(self) -> str:
        return ("\nMy previous action is invalid. Write one of <search> query </search>, <open> doc_id page </open>, "
                "<find> doc_id | text </find>, or <citations> ids </citations> <confidence> n </confidence> "
                "<answer> the answer </answer>.\n")

    def budget_feedback(self) -> str:
        return "\nThe call budget is spent: this call was not run. Give the final answer now.\n"

    # ------------------------------------------------------------------ the two reads
    def act(self, action: Action, game: Any) -> str | None:
        text = self._read(action)
        return text if getattr(game, "tools", None) is not None else self.wrap_information(text)

    def _read(self, action: Action) -> str:
        store = self._store()
        if isinstance(action, Open):
            page = store.page(action.doc_id, action.page)
            if page is None:  # checked when parsed; a corpus changed under the env since
                return f"Document {action.doc_id} has no page {action.page}."
            return f"[{page.doc_id}] {page.title} (page {page.number} of {page.count})\n{page.text}"
        if isinstance(action, Find):
            found = store.find(action.doc_id, action.pattern)
            if found is None:
                return f"There is no document {action.doc_id}."
            head = f"[{found.doc_id}] {found.title} ({found.pages} page{'s' if found.pages != 1 else ''}): "
            if not found.total:
                return head + f"no place holds {action.pattern!r}."
            shown = f"the first {len(found.places)} of " if found.total > len(found.places) else ""
            lines = [head + f"{shown}{found.total} place{'s hold' if found.total != 1 else ' holds'} {action.pattern!r}."]
            lines += [f"- page {page}: {excerpt}" for page, excerpt in found.places]
            return "\n".join(lines)
        raise SearchGymError(f"DeepResearchProtocol cannot play a {action.kind!r} action.")

    def describe_action(self, action: Action) -> dict[str, Any] | None:
        """What an ``open``, ``find`` or cited answer was, as plain data for the episode record
        (``searchgym view`` draws it: the page read and its count, the places found, the
        citations); None for the game's other actions (searches are recorded with their hits)."""
        store = self.store
        if isinstance(action, Open):
            passage = store.get(action.doc_id) if store is not None else None
            return {"kind": "open", "doc_id": action.doc_id, "page": action.page,
                    "title": passage.title if passage is not None else None,
                    "pages": store.pages(action.doc_id) if passage is not None else None}
        if isinstance(action, Find):
            found = store.find(action.doc_id, action.pattern) if store is not None else None
            return {"kind": "find", "doc_id": action.doc_id, "pattern": action.pattern,
                    "title": found.title if found is not None else None, "pages": found.pages if found is not None else None,
                    "total": found.total if found is not None else 0,
                    "places": [[page, excerpt] for page, excerpt in found.places] if found is not None else []}
        if isinstance(action, CitedAnswer):
            return {"kind": "answer", "answer": action.text, "citations": list(action.citations), "confidence": action.confidence}
        return None

    # ------------------------------------------------------------------ checking what the agent asks
    def open_action(self, doc_id: Any, page: Any = 1) -> Action:
        """An :class:`Open`, or an ``Invalid`` saying what is wrong (unknown id, page out of range)."""
        store = self._store()
        problem = id_problem(store, doc_id)
        if problem:
            return Invalid(problem)
        if isinstance(page, bool) or not isinstance(page, int):
            return Invalid(f"page must be a whole number from 1, got {page!r}")
        count = store.pages(doc_id)
        if not 1 <= page <= count:
            return Invalid(f"page {page} is out of range: document {doc_id} has {count} page{'s' if count != 1 else ''} "
                           f"(1 to {count})")
        return Open(doc_id, page)

    def find_action(self, doc_id: Any, pattern: Any) -> Action:
        """A :class:`Find`, or an ``Invalid`` saying what is wrong."""
        problem = id_problem(self._store(), doc_id) or pattern_problem(pattern)
        return Invalid(problem) if problem else Find(doc_id, " ".join(pattern.split()))

    def answer_action(self, answer: Any, citations: Any = (), confidence: Any = None) -> Action:
        """A :class:`CitedAnswer`, or an ``Invalid`` saying what is wrong (an empty answer, more
        than ``max_citations`` citations, a confidence outside [0, 100])."""
        if not isinstance(answer, str) or not answer.strip():
            return Invalid("answer needs a non-empty answer")
        if isinstance(citations, str):
            citations = [c for c in re.split(r"[,\s]+", citations) if c]
        if not isinstance(citations, (list, tuple)) or not all(isinstance(c, str) for c in citations):
            return Invalid("citations must be a list of doc ids, e.g. [\"doc-17\", \"doc-4\"]")
        cited = tuple(dict.fromkeys(c.strip() for c in citations if c.strip()))
        if len(cited) > self.max_citations:
            return Invalid(f"an answer cites at most {self.max_citations} documents, got {len(cited)}; cite the ones it rests on")
        if confidence is not None:
            if isinstance(confidence, str):
                try:
                    confidence = float(confidence.strip().rstrip("%"))
                except ValueError:
                    return Invalid(f"confidence must be a number from 0 to 100, got {confidence[:40]!r}")
            if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not math.isfinite(confidence) \
                    or not 0 <= confidence <= 100:
                return Invalid(f"confidence must be a number from 0 to 100 (a percentage), got {confidence!r}")
            confidence = float(confidence)
        return CitedAnswer(answer.strip(), cited, confidence)

    # ------------------------------------------------------------------ tools
    def extra_tools(self) -> Sequence[ToolSpec]:
        doc_id = {"type": "string", "description": "A document id as the search results show it."}
        return (
            ToolSpec("open", f"Read one page of a document ({self.page_words} words a page); the result says how many pages it has.",
                     {"type": "object", "properties": {
                         "doc_id": doc_id, "page": {"type": "integer", "description": "The page number, from 1 (default 1)."}},
                      "required": ["doc_id"]},
                     action=Open, to_action=self._open_call),
            ToolSpec("find", "Find the places in a document that hold a text (case-insensitive), each with its page.",
                     {"type": "object", "properties": {
                         "doc_id": doc_id, "pattern": {"type": "string", "description": "The text to look for, e.g. \"founded in\"."}},
                      "required": ["doc_id", "pattern"]},
                     action=Find, to_action=self._find_call),
            ToolSpec("answer", "Give the final answer with the documents it rests on and your confidence. Ends the episode.",
                     {"type": "object", "properties": {
                         "answer": {"type": "string", "description": "The answer alone, without explanation (e.g. a name)."},
                         "citations": {"type": "array", "items": {"type": "string"},
                                       "description": f"The doc ids that support the answer (at most {self.max_citations})."},
                         "confidence": {"type": "number", "description": "Your confidence that the answer is right, 0 to 100."}},
                      "required": ["answer"]},
                     action=CitedAnswer, to_action=self._answer_call, to_arguments=_answer_arguments),
        )

    # Bound methods, not lambdas: an env (and its tools) pickles.
    def _open_call(self, args: Mapping[str, Any]) -> Action:
        return self.open_action(args["doc_id"], args.get("page", 1))

    def _find_call(self, args: Mapping[str, Any]) -> Action:
        return self.find_action(args["doc_id"], args["pattern"])

    def _answer_call(self, args: Mapping[str, Any]) -> Action:
        return self.answer_action(args["answer"], args.get("citations", ()), args.get("confidence"))

    # ------------------------------------------------------------------ tags
    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        m = _ACTION.search(text)
        if m is None:
            return (Invalid("no closed <search>, <open>, <find> or <answer> block"),), False
        tag, content = m.group(1), m.group(2).strip()
        if not content:
            return (Invalid(f"empty <{tag}> block"),), False
        if tag == "search":
            action: Action = Search(content)
        elif tag == "open":
            paged = _PAGE.match(content)
            if content in self._store() or paged is None:  # an id alone (which may end in a number): page 1
                action = self.open_action(content)
            else:
                action = self.open_action(paged.group(1).strip(), int(paged.group(2)))
        elif tag == "find":
            doc_id, bar, pattern = content.partition("|")
            action = self.find_action(doc_id.strip(), pattern) if bar else Invalid("<find> needs doc_id | text")
        else:
            before = text[:m.start()]
            action = self.answer_action(content, find_block(before, "<citations>", "</citations>") or (),
                                        find_block(before, "<confidence>", "</confidence>"))
        return (action,), not isinstance(action, Invalid)

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if len(actions) != 1:
            raise self._unwritable(actions)
        action = actions[0]
        head = f"<think> {thought} </think>\n" if thought else ""
        if isinstance(action, Search):
            return f"{head}<search> {action.query} </search>"
        if isinstance(action, Open):
            return f"{head}<open> {action.doc_id} {action.page} </open>"
        if isinstance(action, Find):
            return f"{head}<find> {action.doc_id} | {action.pattern} </find>"
        if isinstance(action, Answer):
            citations = getattr(action, "citations", ())
            confidence = getattr(action, "confidence", None)
            cited = f"<citations> {', '.join(citations)} </citations> " if citations else ""
            sure = f"<confidence> {confidence:g} </confidence> " if confidence is not None else ""
            return f"{head}{cited}{sure}<answer> {action.text} </answer>"
        raise self._unwritable(actions)


def _answer_arguments(action: Any) -> Mapping[str, Any]:
    arguments: dict[str, Any] = {"answer": action.text}
    if getattr(action, "citations", ()):
        arguments["citations"] = list(action.citations)
    if getattr(action, "confidence", None) is not None:
        arguments["confidence"] = action.confidence
    return arguments
