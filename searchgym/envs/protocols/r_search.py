"""R-Search (Zhao et al., 2025): search, then quote the evidence, then answer.

Turn grammar: free reasoning; ``<search> query </search>`` retrieves
documents shown between ``<observation>`` and ``</observation>``; the final turn quotes
the supporting text of the observations in ``<original_evidence>…</original_evidence>``
and answers in ``<answer>…</answer>``. The evidence is the agent's own output (and is
trained); a frozen reader answers from it for the evidence reward.
"""

from __future__ import annotations

from collections.abc import Sequence

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Answer, Evidence, Invalid, Protocol, Search, find_block, search_or_answer

class RSearchProtocol(Protocol):
    """The grammar of R-Search: ``<search>``, ``<observation>``, ``<original_evidence>``, ``<answer>``."""

    name = "r_search"
    writes_evidence = True
    stop_strings = ("</search>", "</answer>")
    env_tags = (("<observation>", "</observation>"),)
    writable = "it writes one Search, or an optional Evidence followed by one Answer"

    #: The seed's instructions, given as the system message.
    system_prompt = (
        "You are a helpful assistant that can solve the given question step by step. For each step, start by "
        "explaining your thought process. If additional information is needed, provide a specific query "
        "enclosed in <search> and </search>. The system will return the top search results within "
        "<observation> and </observation>. You can perform multiple searches as needed.\n"
        "When you know the final answer, use <original_evidence> and </original_evidence> to provide all "
        "potentially relevant original information from the observations. Ensure the information is complete "
        "and preserves the original wording without modification. If no searches were conducted or "
        "observations were made, omit the evidence section. Finally, provide the final answer within "
        "<answer> and </answer> tags."
    )

    def messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": example.question}]

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        return f"{self.system_prompt}\n\nQuestion: {example.question}\n"

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        action, start = search_or_answer(text)
        if not isinstance(action, Answer):
            return (action,), not isinstance(action, Invalid)
        evidence = find_block(text[:start], "<original_evidence>", "</original_evidence>")
        return ((Evidence(evidence), action) if evidence else (action,)), True

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        acts = list(actions)
        head = f"{thought}\n" if thought else ""
        evidence = ""
        if len(acts) == 2 and isinstance(acts[0], Evidence):
            evidence = f"<original_evidence> {acts.pop(0).text} </original_evidence>\n"
        if len(acts) != 1 or not isinstance(acts[0], (Search, Answer)) or (evidence and isinstance(acts[0], Search)):
            raise self._unwritable(actions)
        if isinstance(acts[0], Search):
            return f"{head}<search> {acts[0].query} </search>"
        return f"{head}{evidence}<answer> {acts[0].text} </answer>"

    def docs_text(self, hits: Sequence[Hit]) -> str:
        # R-Search shows documents without a number.
        return "\n".join(f"(Title: {h.passage.title}) {h.passage.text}" for h in hits)

    def wrap_information(self, text: str) -> str:
        return f"\n\n<observation>{text.strip()}</observation>\n\n"

    def invalid_feedback(self) -> str:
        # The seed's text (src/train/generation.py). It names no evidence tags: the transcript
        # is what the format reward counts blocks in, and an evidence pair here would be
        # counted (and scored) as the agent's evidence.
        return (
            "\nMy previous action is invalid. If I want to search, I should put the query between "
            "<search> and </search>. If I want to give the final answer, I should put the answer "
            "between <answer> and </answer>. Let me try again.\n"
        )
