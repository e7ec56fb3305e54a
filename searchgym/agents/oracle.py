"""A scripted agent that solves synthwiki questions (and wiki-vital's) through any protocol.

synthwiki questions carry their solution path in ``metadata``: one oracle query per hop,
the supporting passage ids and the evidence sentences. The oracle issues the queries in
order, keeps the supporting documents (s3), quotes the evidence (R-Search) and answers
with the canonical answer. A wiki-vital question names its FanOutQA source article: the
oracle searches its title, keeps it, quotes its sentences holding the answer and answers
with the gold answer, the upper bound of a table of real questions. It checks that the environment, protocols and rewards fit
together: it must reach full reward wherever full reward is reachable.

In an env played through tool calls (``action_format="tools"``) it makes the same
decisions as tool calls: each turn is an OpenAI assistant message (``search``,
``select``, ``finish``, ``answer`` with its ``evidence``), arguments as dicts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from searchgym.agents.base import Agent
from searchgym.corpora.types import Corpus, QAExample
from searchgym.envs.access import search_env
from searchgym.envs.protocols import Answer, Complete, Evidence, Protocol, Search, Select, make_protocol
from searchgym.error import ConfigError

_REQUIRED = ("oracle_queries", "supporting_ids", "evidence")


class SynthWikiOracle(Agent):
    """Solves synthwiki questions from their metadata. Needs ``max_turns >= hops + 1``."""

    name = "oracle"

    def __init__(self, protocol: str | Protocol, examples: Iterable[QAExample], corpus: Corpus | None = None, *, action_format: str = "tags"):
        self.protocol = make_protocol(protocol)
        self.examples: dict[str, QAExample] = {ex.id: ex for ex in examples}
        self.corpus = corpus
        if action_format not in ("tags", "tools"):
            raise ConfigError(f"SynthWikiOracle expects action_format 'tags' or 'tools', got {action_format!r}.")
        self.action_format = action_format

    @classmethod
    def for_env(cls, env: Any) -> SynthWikiOracle:
        """An oracle for the protocol, questions, corpus and action format of ``env`` (wrapped or not)."""
        inner = search_env(env)
        return cls(inner.protocol, inner.examples, inner.corpus, action_format=getattr(inner, "action_format", "tags"))

    def _evidence(self, meta: Mapping[str, Any]) -> str:
        """The evidence sentences, each introduced by R-Search's ``(Title: …)`` marker of the
        passage quoting it (sentences like "It was founded in 1872." name their subject only
        through it; the marker keeps the quote grounded, see :mod:`searchgym.rewards.grounding`)."""
        passages = [self.corpus.get(pid) for pid in meta["supporting_ids"]] if self.corpus is not None else []
        quoted = []
        for sentence in meta["evidence"]:
            title = next((p.title for p in passages if sentence in p.text), None)
            quoted.append(f"(Title: {title}) {sentence}" if title else sentence)
        return " ".join(quoted)

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        self._check_batch(observations, infos)
        return [self._turn(info) for info in infos]

    def _example(self, example_id: str) -> QAExample:
        ex = self.examples.get(example_id)
        if ex is None:
            raise ConfigError(f"SynthWikiOracle knows no question with id {example_id!r}; build it with SynthWikiOracle.for_env(env).")
        missing = [k for k in _REQUIRED if k not in ex.metadata]
        if missing and not ("source_passage_id" in ex.metadata and "source_title" in ex.metadata and self.corpus is not None):
            raise ConfigError(
                f"SynthWikiOracle expects synthwiki questions whose metadata has {', '.join(_REQUIRED)} (or wiki-vital "
                f"questions naming their source_passage_id and source_title, with the corpus); question {example_id!r} "
                f"lacks {', '.join(missing)}."
            )
        return ex

    def _solution(self, ex: QAExample) -> dict[str, Any]:
        """The question's solution path: synthwiki's own metadata, or for a wiki-vital
        question one search for its FanOutQA source article's title, that article as the
        supporting passage, and its sentences that hold the answer as the evidence."""
        meta = ex.metadata
        if all(k in meta for k in _REQUIRED):
            return meta
        text = self.corpus.get(meta["source_passage_id"]).text
        answer = ex.answers[0].lower()
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if answer in s.lower()]
        return {"oracle_queries": [meta["source_title"]], "supporting_ids": [meta["source_passage_id"]], "evidence": sentences or [text]}

    def _turn(self, info: Mapping[str, Any]) -> str:
        ex = self._example(info["example_id"])
        meta = self._solution(ex)
        queries: list[str] = meta["oracle_queries"]
        supporting = set(meta["supporting_ids"])
        turn = info["turn"]
        # Documents of the latest window that support the answer (s3 keeps them).
        keep = tuple(i for i, pid in enumerate(info.get("retrieved_ids", []), 1) if pid in supporting)
        actions: list[Any] = []
        if self.protocol.answers_with_generator:
            actions.append(Select(keep))  # an empty selection keeps an unhelpful window out
        if turn < len(queries):
            actions.append(Search(queries[turn]))
            thought = f"I need to find: {queries[turn]}."
        elif self.protocol.answers_with_generator:
            actions.append(Complete())
            thought = None
        else:
            if self.protocol.name == "r_search":
                actions.append(Evidence(self._evidence(meta)))
            actions.append(Answer(ex.answers[0]))
            thought = "I have found the answer."
        if self.action_format == "tools":
            return tool_message(actions, thought, turn)
        return self.protocol.write(actions, thought=thought)


def tool_message(actions: Sequence[Any], thought: str | None, turn: int = 0) -> dict[str, Any]:
    """``actions`` (Search, Select, Complete, Evidence, Answer) as one OpenAI assistant
    message: ``thought`` as its text, one call per action (an Evidence rides on the answer
    call as its ``evidence`` argument), arguments as dicts."""
    calls: list[tuple[str, dict[str, Any]]] = []
    evidence = None
    for action in actions:
        if isinstance(action, Search):
            calls.append(("search", {"query": action.query}))
        elif isinstance(action, Select):
            calls.append(("select", {"doc_ids": list(action.doc_numbers)}))
        elif isinstance(action, Complete):
            calls.append(("finish", {}))
        elif isinstance(action, Evidence):
            evidence = action.text
        elif isinstance(action, Answer):
            calls.append(("answer", {"answer": action.text, **({"evidence": evidence} if evidence else {})}))
        else:
            raise ConfigError(f"tool_message writes Search, Select, Complete, Evidence and Answer actions, got {type(action).__name__}.")
    return {
        "role": "assistant",
        "content": thought or "",
        "tool_calls": [
            {"id": f"call_{turn}_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }
