"""s3 (Jiang et al., 2025): a searcher-only agent; a frozen generator answers.

The episode starts from naive retrieval: the prompt holds the question and the top
documents for it. Each turn the searcher may keep documents of the latest information
window with ``<important_info>[1, 3]</important_info>`` (numbers as rendered in that
window), then searches again with ``<query>{"query": "..."}</query>`` (a bare query
string is accepted, as in s3) or ends with ``<search_complete>True</search_complete>``.

As in s3: a turn is cut after its first ``</query>``; a true ``<search_complete>``
(``true``, ``yes``, ``1`` or ``y``) overrides a query in the same turn; the invalid-turn
feedback opens a ``<query>`` for the agent, so a turn with ``</query>`` but no
``<query>`` continues it. The frozen generator reads the kept documents followed by every
document of each window the searcher never annotated (normally the initial one): App. A.5,
"If no <important_info> tag exists for a <information> block, all documents from that
block are included".

The cap of App. C: a selection gives the generator at most ``docs_per_window`` documents of
its window (default 3, the prompt's "up to 3 documents"): the first three numbers it
names. s3's released reward code keeps every number from 1 to 8; ``docs_per_window=None``
restores that. ``cap_unannotated=True`` caps a window never annotated too (its top
``docs_per_window``), which App. A.5 does not: without it, a searcher that searches the
question again and completes hands the generator eight documents against naive RAG's
three. The reward's matched baseline (``baseline_docs="matched"``, s3_gbr's default) is what
keeps that from paying; searchgym's envs before this option capped both.

The prompt (``prompt="paper"``, the default) is Fig. 11 word for word. Where the figure
prints "[An abstractive example of s3 loop]" the example of the loop comes from the released
code (the figure abbreviates it); ``prompt="released"`` is the released code's prompt
(``make_prefix`` of ``scripts/data_process/train_s3.py``), which words the instructions
differently and invites ``<think>`` blocks.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Complete, Invalid, Protocol, Search, Select, find_block
from searchgym.error import ConfigError

#: The example of the loop both prompts show (the released code's; Fig. 11 prints "[An
#: abstractive example of s3 loop]" in its place).
S3_LOOP_EXAMPLE = (
    "For a question and initial searched results:\n<question>\n[user's question]\n</question>\n"
    "<information>\n[initial searched results]\n</information>\n\n"
    "If the initial searched results are enough to produce an answer, you should output:\n"
    "<search_complete>\nTrue\n</search_complete>\n\n"
    "If the initial searched results are not enough to produce an answer, you should output:\n"
    '<query>\n{{\n    "query": "[search query]"\n}} \n</query>\n'
    "<information>\n[top searched results based on the above search query]\n</information>\n"
    "<important_info>\n[doc ids]\n</important_info>\n<search_complete>\nFalse\n</search_complete>\n"
    '<query>\n{{\n    "query": "[search query]"\n}}\n</query>\n'
    "...... (can be several turns until <search_complete> is True)\n\n"
    "<search_complete>\nTrue\n</search_complete>\n\n"
)

#: Prompt option -> the searcher's prompt, a format string of ``question`` and
#: ``initial_search_result``. ``paper``: Fig. 11; ``released``: ``make_prefix`` of the
#: released ``scripts/data_process/train_s3.py`` (E5 retriever).
S3_PROMPTS = {
    "paper": (
        "You are a search copilot for a generation model. Based on a user's query and initial searched results, you "
        "will first determine if the searched results are enough to produce an answer.\n"
        "If the searched results are enough, you will use <search_complete>True</search_complete> to indicate that "
        "you have gathered enough information for the generation model to produce an answer.\n"
        "If the searched results are not enough, you will go through a loop of <query> \u2192 <information> \u2192 "
        "<important_info> \u2192 <search_complete> \u2192 <query> (if not complete) \u2026, to help the generation model "
        "to generate a better answer with more relevant information searched.\n"
        "You should show the search query between <query> and </query> in JSON format.\n"
        "Based on the search query, we will return the top searched results between <information> and "
        "</information>. You need to put the doc ids of the important documents (up to 3 documents, within the "
        "current information window) between <important_info> and </important_info> (e.g., "
        "<important_info>[1, 4]</important_info>).\n"
        "A search query must be followed by a <search_complete> tag if the search is not complete.\n"
        "After reviewing the information, you must decide whether to continue searching with a new query or "
        "indicate that the search is complete. If you need more information, use "
        "<search_complete>False</search_complete>. Otherwise, use <search_complete>True</search_complete> to "
        "terminate the search.\n"
        "Note: Only the content between <important_info> will be used by the generation model to produce an "
        "answer.\n\n"
        + S3_LOOP_EXAMPLE
        + "<question>\n{question}\n</question>\n<information>\n{initial_search_result}\n</information>\n"
    ),
    "released": (
        "You are a search copilot for the generation model. Based on a user's query and initial searched "
        "results, you will first determine if the searched results are enough to produce an answer.\n"
        "If the searched results are enough, you will use <search_complete>True</search_complete> to "
        "indicate that you have gathered enough information for the generation model to produce an answer.\n"
        "If the searched results are not enough, you will go through a loop of <query> -> <information> -> "
        "<important_info> -> <search_complete> -> <query> (if not complete) ..., to help the generation "
        "model to generate a better answer with more relevant information searched.\n"
        "You should show the search query between <query> and </query> in JSON format.\n"
        "Based on the search query, we will return the top searched results between <information> and "
        "</information>. You need to put the doc ids of the important documents (up to 3 documents, within "
        "the current information window) between <important_info> and </important_info> (e.g., "
        "<important_info>[1, 4]</important_info>).\n"
        "A search query MUST be followed by a <search_complete> tag if the search is not complete.\n"
        "After reviewing the information, you must decide whether to continue searching with a new query or "
        "indicate that the search is complete. If you need more information, use "
        "<search_complete>False</search_complete> to indicate you want to continue searching with a better "
        "query. Otherwise, use <search_complete>True</search_complete> to terminate the search.\n"
        "During the process, you can add reasoning process within <think></think> tag whenever you want. "
        "Note: Only the important information would be used for the generation model to produce an answer.\n\n"
        + S3_LOOP_EXAMPLE
        + "Now, start the loop with the following question and initial searched results:\n\n"
        "<question>\n{question}\n</question>\n<information>\n{initial_search_result}\n</information>\n"
    ),
}

# Whole numbers only: "[12345]" is one (out-of-range) number, "1.5" is none.
_NUMBERS = re.compile(r"(?<!\d)(?<!\d\.)\d{1,9}(?!\d)(?!\.\d)")
_TRUE = frozenset({"true", "yes", "1", "y"})


def _query_text(content: str) -> str:
    """The query inside ``<query>``: JSON ``{"query": ...}`` (a list value gives its first
    item), else the raw text. A JSON query that is not text (``null``, ``false``, an
    object) is empty."""
    text = content.strip()
    if not text.startswith("{"):
        return text
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # deep nesting raises RecursionError, not ValueError
        return text
    if isinstance(data, dict) and "query" in data:
        value = data["query"]
        if isinstance(value, list):
            value = value[0] if value else ""
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            return ""
        return str(value).strip()
    return text


class S3Protocol(Protocol):
    """The grammar of s3: ``<query>``, ``<information>``, ``<important_info>``, ``<search_complete>``."""

    name = "s3"
    stop_strings = ("</query>",)
    env_tags = (("<information>", "</information>"),)
    answers_with_generator = True
    initial_retrieval = True
    #: Windows the searcher never annotated reach the generator whole (s3's context rule).
    keeps_unannotated_windows = True
    writable = "it writes an optional Select followed by one Search or Complete"

    def __init__(self, docs_per_window: int | None = 3, cap_unannotated: bool = False, prompt: str = "paper"):
        from searchgym.error import UnknownNameError

        if docs_per_window is not None and (
            not isinstance(docs_per_window, int) or isinstance(docs_per_window, bool) or docs_per_window < 1
        ):
            raise ConfigError(
                f"S3Protocol expects docs_per_window to be a positive integer (s3's App. C: 3) or None (no cap), "
                f"got {docs_per_window!r}."
            )
        if not isinstance(cap_unannotated, bool):
            raise ConfigError(
                f"S3Protocol expects cap_unannotated to be True (a window never annotated gives its top docs_per_window) "
                f"or False (all of its documents, s3's App. A.5), got {cap_unannotated!r}."
            )
        if prompt not in S3_PROMPTS:
            raise UnknownNameError("S3Protocol prompt", prompt, S3_PROMPTS)
        self.docs_per_window = docs_per_window
        self.cap_unannotated = cap_unannotated
        self.prompt_style = prompt

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        question = example.question.strip()
        if not question.endswith("?"):
            question += "?"
        initial = "".join(f"Doc {i} (Title: {h.passage.title}) {h.passage.text}\n" for i, h in enumerate(docs or [], 1))
        return S3_PROMPTS[self.prompt_style].format(question=question, initial_search_result=initial.strip())

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        if "</query>" in text and "<query>" not in text:
            text = "<query>\n" + text  # continues the <query> that the invalid-turn feedback opened
        actions: list[Action] = []
        keep = find_block(text, "<important_info>", "</important_info>")
        if keep is not None:
            actions.append(Select(tuple(int(n) for n in _NUMBERS.findall(keep)[:16])))
        complete = find_block(text, "<search_complete>", "</search_complete>")
        if complete is not None and complete.lower() in _TRUE:
            return (*actions, Complete()), True
        content = find_block(text, "<query>", "</query>")
        if content is not None:
            query = _query_text(content)
            if not query:
                return (*actions, Invalid("empty query")), False
            return (*actions, Search(query)), True
        return (*actions, Invalid("no <query> or true <search_complete>")), False

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        acts = list(actions)
        head = f"<think>{thought}</think>\n" if thought else ""
        if acts and isinstance(acts[0], Select):
            head += f"<important_info>{list(acts.pop(0).doc_numbers)}</important_info>\n"
        if len(acts) != 1 or not isinstance(acts[0], (Search, Complete)):
            raise self._unwritable(actions)
        if isinstance(acts[0], Complete):
            return f"{head}<search_complete>True</search_complete>"
        return f"{head}<search_complete>False</search_complete>\n<query>{json.dumps({'query': acts[0].query})}</query>"

    def wrap_information(self, text: str) -> str:
        return f"\n\n<information>{text.strip()}</information>\n\n"

    def invalid_feedback(self) -> str:
        return (
            "\n\nThe information is not enough to answer the question. Let me dive deeper by generating a "
            "brand new search query between <query> and </query> tags in JSON format:\n<query>\n"
        )

    def budget_feedback(self) -> str:
        return "\n\nThe search budget is spent. I should keep the important documents and write <search_complete>True</search_complete>.\n"
