"""Each game's tools as OpenAI function schemas, and the prompt that offers them.

The tools follow the game's actions one to one (:mod:`searchgym.envs.protocols.base`):

- Search-R1, R1-Searcher, RECON: ``search(query)``, ``answer(answer)``;
- R-Search: ``search(query)``, ``answer(answer, evidence)`` (the evidence its Eq. 4 reader
  reads, grounded as in the tag game);
- s3: ``search(query)``, ``select(doc_ids)``, ``finish()``; the frozen generator answers.

Which set a game gets is read from its protocol's flags (``answers_with_generator``,
``writes_evidence``), so a user's own protocol gets the set its flags describe, followed by
the tools it adds (:meth:`~searchgym.envs.protocols.base.Protocol.extra_tools`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Answer, Protocol
from searchgym.envs.protocols.tool_spec import ToolSpec
from searchgym.error import ConfigError


def _function(name: str, description: str, properties: dict[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False},
        },
    }


SEARCH = _function(
    "search",
    "Search the corpus. Returns the top documents for the query. Several calls in one turn run as parallel "
    "searches, each one search of the budget.",
    {"query": {"type": "string", "description": "The search query."}},
    ["query"],
)
ANSWER = _function(
    "answer",
    "Give the final answer to the question. Ends the episode.",
    {"answer": {"type": "string", "description": "The answer alone, without explanation (e.g. \"Beijing\")."}},
    ["answer"],
)
ANSWER_WITH_EVIDENCE = _function(
    "answer",
    "Give the final answer with the evidence it rests on. Ends the episode.",
    {
        "answer": {"type": "string", "description": "The answer alone, without explanation (e.g. \"Beijing\")."},
        "evidence": {
            "type": "string",
            "description": "The sentences of the search results that support the answer, quoted in their original "
            "wording; only what quotes the results is read (omit when nothing was searched).",
        },
    },
    ["answer"],
)


def _select(cap: int | None) -> dict[str, Any]:
    limit = f" (up to {cap} a search)" if cap else ""
    return _function(
        "select",
        f"Keep documents of the latest search results for the generation model{limit}: the results of the last "
        "search call, numbered as shown. Runs before the searches of its turn.",
        {"doc_ids": {"type": "array", "items": {"type": "integer"}, "description": "Document numbers as shown, e.g. [1, 4]."}},
        ["doc_ids"],
    )


FINISH = _function(
    "finish",
    "Declare the search complete: the generation model answers from the kept documents. Ends the episode.",
    {},
    [],
)


def built_in_schemas(protocol: Protocol) -> list[dict[str, Any]]:
    """The built-in tools of ``protocol``'s game (read from its flags), as fresh copies."""
    if protocol.answers_with_generator:
        tools = [SEARCH, _select(protocol.docs_per_window), FINISH]
    elif protocol.writes_evidence:
        tools = [SEARCH, ANSWER_WITH_EVIDENCE]
    else:
        tools = [SEARCH, ANSWER]
    return copy.deepcopy(tools)


def replaces_answer(spec: ToolSpec) -> bool:
    """Whether ``spec`` is a protocol's own ``answer`` tool, in place of the built-in one: named
    ``answer`` and making an :class:`~searchgym.envs.protocols.base.Answer` subclass (the browse
    game's answer with citations and confidence)."""
    return spec.name == "answer" and isinstance(spec.action, type) and issubclass(spec.action, Answer)


def extra_tools(protocol: Protocol) -> tuple[ToolSpec, ...]:
    """The tools ``protocol`` adds (:meth:`Protocol.extra_tools`), checked: each a
    :class:`ToolSpec`, named apart from the built-in tools and from each other; except one
    named ``answer`` whose action is an ``Answer`` subclass, which replaces the built-in
    ``answer`` of a game where the agent answers (:func:`replaces_answer`)."""
    owner = type(protocol).__name__
    try:
        specs = tuple(protocol.extra_tools())
    except TypeError as e:
        raise ConfigError(f"{owner}.extra_tools expects to return a sequence of ToolSpec, got an error ({e}).") from e
    taken = {t["function"]["name"] for t in built_in_schemas(protocol)}
    replaceable = {"answer"} if not protocol.answers_with_generator else set()
    for spec in specs:
        if not isinstance(spec, ToolSpec):
            raise ConfigError(f"{owner}.extra_tools expects ToolSpec objects, got {type(spec).__name__}.")
        if spec.name in replaceable and replaces_answer(spec):
            replaceable.discard(spec.name)
            continue
        if spec.name in taken:
            raise ConfigError(
                f"{owner}.extra_tools expects names of its own, got {spec.name!r} twice or as a built-in tool "
                f"({', '.join(sorted(taken))}); rename it (an 'answer' of its own makes an Answer subclass)."
            )
        taken.add(spec.name)
    return specs


def tool_schemas(protocol: Protocol) -> list[dict[str, Any]]:
    """The tools of ``protocol``'s game, as OpenAI function schemas (fresh copies): the
    built-in ones (the protocol's own ``answer`` in place of the built-in one), then the
    other tools of :meth:`Protocol.extra_tools`."""
    specs = extra_tools(protocol)
    own = {spec.name: spec for spec in specs if replaces_answer(spec)}
    tools = [own[t["function"]["name"]].schema if t["function"]["name"] in own else t for t in built_in_schemas(protocol)]
    return tools + [spec.schema for spec in specs if spec.name not in own]


def extra_tools_text(protocol: Protocol) -> str:
    """The sentence of the default tool prompt that offers ``protocol``'s own tools ("" if none)."""
    specs = [spec for spec in extra_tools(protocol) if not replaces_answer(spec)]
    if not specs:
        return ""
    listed = " ".join(f"{s.name}: {s.description.strip()}" + ("" if s.description.strip().endswith(".") else ".") for s in specs)
    return f" You can also call these tools. {listed}"


def tool_prompt(protocol: Protocol, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
    """The first user message of the tool game: the tag prompt's instructions with tools in
    place of tags, then the question (s3: and the initial documents)."""
    question = example.question.strip()
    extra = extra_tools_text(protocol)
    if protocol.answers_with_generator:
        shown = protocol.docs_text(docs or [])
        cap = f" (up to {protocol.docs_per_window})" if protocol.docs_per_window else ""
        return (
            "You are a search copilot for the generation model. Based on a user's question and the initial search "
            "results, first decide whether the results are enough for the generation model to produce an answer.\n"
            "If they are, call finish(). If they are not, call search with a new query; you will get the top "
            f"results. Keep the important documents of the latest results{cap} with select(doc_ids), using "
            "the numbers they are shown with, then search again or call finish(). Only the kept documents, and "
            f"the documents of results you never select from, reach the generation model.{extra}\n\n"
            f"Question: {question}\n\nInitial search results:\n{shown}"
        )
    evidence = (
        " Before answering, quote the search results your answer rests on, in their original wording, as the "
        "answer tool's evidence (omit it if you did not search)."
        if protocol.writes_evidence else ""
    )
    return (
        "Answer the given question. Reason step by step. If you find you lack some knowledge, call the search "
        "tool with a query; it returns the top search results. You can search as many times as you want, and "
        "several searches in one turn run in parallel." + evidence + " When you know the answer, call the answer "
        "tool with the answer alone, without detailed illustrations (e.g. answer=\"Beijing\"); a reply without "
        f"any tool call is taken as the final answer.{extra}\n\nQuestion: {question}"
    )
