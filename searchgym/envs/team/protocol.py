"""The grammars of the summarizer and the generator in the multi-agent env.

In :mod:`searchgym.envs.team.multi_agent` the searcher plays s3's protocol unchanged
(:class:`~searchgym.envs.protocols.s3.S3Protocol`). The two other roles get one
protocol each, so that any LM agent (:class:`~searchgym.agents.lm_agents.LMAgent`) can
play them and be trained through the same token-level contract:

- :class:`SummarizerProtocol`: every retrieval arrives as ``Search query: q`` and a
  ``<documents>`` block; the summarizer answers with ``<summary> … </summary>``.
- :class:`GeneratorProtocol`: s3's generator prompt (the documents the searcher kept in
  the system message, the question as the user message); the whole reply is the answer,
  or the content of an ``<answer> … </answer>`` block when it writes one.

Both are lenient in the way s3's and RECON's frozen models are (they take the model's
whole reply): the tags delimit the text when present, and only an empty summary or
answer is malformed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.components.lm_frozen import (
    S3_GENERATOR_SYSTEM,
    S3_ZERO_SHOT_SYSTEM,
    generator_context,
    generator_messages,
)
from searchgym.envs.components.lm_summarizer import render_documents
from searchgym.envs.protocols.base import Action, Answer, Invalid, Protocol


@dataclass(frozen=True)
class Summary:
    """The summarizer's condensed text of the latest retrieval."""

    text: str
    kind = "summary"


def delimited(text: str, open_tag: str, close_tag: str) -> str:
    """The text inside ``open_tag … close_tag``, stripped.

    An unclosed ``open_tag`` runs to the end (the reply hit its token budget); a
    ``close_tag`` without its opening takes what precedes it; without either tag the whole
    text counts.
    """
    start = text.find(open_tag)
    if start != -1:
        start += len(open_tag)
        end = text.find(close_tag, start)
        return text[start : end if end != -1 else len(text)].strip()
    end = text.find(close_tag)
    return (text[:end] if end != -1 else text).strip()


def doc_texts(hits: Sequence[Hit]) -> list[str]:
    """Documents as frozen models receive them: ``"title\\ntext"``."""
    return [f"{h.passage.title}\n{h.passage.text}" for h in hits]


SUMMARIZER_INSTRUCTIONS = (
    "You condense search results for a question-answering team. A searcher looks up documents for the "
    "question below, and a generator answers it from what you write, not from the documents. For every "
    "set of retrieved documents, write a short summary of the facts that help answer the question, "
    "between <summary> and </summary>. Keep names, numbers and dates exactly as the documents give "
    "them, leave out everything else, and do not answer from your own knowledge. Shorter is better as "
    "long as the facts needed for the answer are kept; if nothing is relevant, write "
    "<summary>No relevant information.</summary>\n\n"
    "Question: {question}"
)


class SummarizerProtocol(Protocol):
    """The summarizer's grammar: one ``<summary> … </summary>`` per retrieval.

    The first observation is :data:`SUMMARIZER_INSTRUCTIONS` with the question, then the
    first retrieval (:meth:`render_retrieval`); every later retrieval is appended the
    same way. The documents are rendered as RECON's summarizer prompt renders them
    (``[Doc i] title: text``). A ``<documents>`` block the summarizer copies into its own
    turn is removed (it is the environment's text) and makes the turn malformed.
    """

    name = "summarizer"
    stop_strings = ("</summary>",)
    env_tags = (("<documents>", "</documents>"),)
    #: Someone else (the generator) answers: the summarizer never ends an episode itself.
    answers_with_generator = True
    writable = "it writes exactly one Summary per turn"

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        """The first observation when the first retrieval is for the question itself (as the
        multi-agent env's initial retrieval is)."""
        return self.first_prompt(example.question, example.question, docs or ())

    def first_prompt(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        return SUMMARIZER_INSTRUCTIONS.format(question=question.strip()) + self.render_retrieval(query, hits)

    def render_retrieval(self, query: str, hits: Sequence[Hit]) -> str:
        """The observation for one retrieval: the query, then the documents."""
        return f"\n\nSearch query: {query.strip()}\n" + self.render_docs(hits)

    def render_docs(self, hits: Sequence[Hit]) -> str:
        return self.wrap_information(render_documents(hits))

    def wrap_information(self, text: str) -> str:
        return f"<documents>\n{text.strip()}\n</documents>\n\n"

    def invalid_feedback(self) -> str:
        return (
            "\n\nYour last summary was empty, so the raw documents were passed on in its place. "
            "Write each summary between <summary> and </summary>."
        )

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        summary = delimited(text, "<summary>", "</summary>")
        if not summary:
            return (Invalid("empty summary"),), False
        return (Summary(summary),), True

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if len(actions) != 1 or not isinstance(actions[0], Summary):
            raise self._unwritable(actions)
        head = f"<think>{thought}</think>\n" if thought else ""
        return f"{head}<summary>{actions[0].text}</summary>"


class GeneratorProtocol(Protocol):
    """The generator's grammar: s3's generator prompt; the reply is the answer.

    The prompt is the one s3's frozen generator reads (:func:`~searchgym.envs.components.lm_frozen.
    generator_messages`: the kept documents in the system message, the question as the
    user message), so an LM agent in this role reads exactly what the frozen generator
    behind the naive-RAG baseline reads. The answer is the content of an ``<answer>``
    block if the reply has one, else the whole reply; an empty one is malformed.
    """

    name = "generator"
    stop_strings = ("</answer>",)
    writable = "it writes exactly one Answer per turn"

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        """The same text as :meth:`messages`, as one string (for agents without a chat template)."""
        texts = doc_texts(docs or ())
        system = S3_GENERATOR_SYSTEM.format(context=generator_context(texts)) if texts else S3_ZERO_SHOT_SYSTEM
        return f"{system}\n\nQuestion: {example.question.strip()}\nAnswer:"

    def messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        return generator_messages(example.question, doc_texts(docs or ()))

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        answer = delimited(text, "<answer>", "</answer>")
        if not answer:
            return (Invalid("empty answer"),), False
        return (Answer(answer),), True

    def render_docs(self, hits: Sequence[Hit]) -> str:
        return generator_context(doc_texts(hits))

    def wrap_information(self, text: str) -> str:
        return text

    def invalid_feedback(self) -> str:
        return ""  # the generator has one turn: nothing follows it

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if len(actions) != 1 or not isinstance(actions[0], Answer):
            raise self._unwritable(actions)
        return f"<answer>{actions[0].text}</answer>"
