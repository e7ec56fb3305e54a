"""Search-R1 (Jin et al., 2025) and RECON, which keeps Search-R1's grammar and condenses
every retrieval with a summarizer.

Turn grammar: reasoning in ``<think>…</think>``, then either ``<search> query </search>``
or ``<answer> text </answer>``. The first closed ``search`` or ``answer`` block of the turn
is the action, as in Search-R1's rollout. A turn is cut after its earliest ``</search>``
or ``</answer>``, as a generation engine stopping there would (Search-R1's trainer cuts at
``</search>`` first even when ``</answer>`` comes earlier; the two agree on every turn
that has one action).

The prompt is Table 1 of the paper, word for word (``prompt="paper"``, the default); its
released code words it a little differently ("as many times as your want", a comma before
"without detailed illustrations"; ``prompt="released"``). Table 1 ends "Question:
question." with the placeholder; the question is put there as the dataset gives it, with a
question mark added when it has none (as Search-R1's data preparation does), and no period
after it.
"""

from __future__ import annotations

from collections.abc import Sequence

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Answer, Invalid, Protocol, Search, search_or_answer


class SearchR1Protocol(Protocol):
    """The grammar of Search-R1: ``<think>``, ``<search>``, ``<information>``, ``<answer>``."""

    name = "search_r1"
    stop_strings = ("</search>", "</answer>")
    env_tags = (("<information>", "</information>"),)

    #: Prompt option -> the instruction before the question: ``paper`` is Table 1 of the
    #: paper; ``released`` the wording of its released code (``make_prefix`` in
    #: ``scripts/data_process/qa_search_train_merge.py``, the NQ + HotpotQA training data).
    PROMPTS = {
        "paper": (
            "Answer the given question. You must conduct reasoning inside <think> and </think> "
            "first every time you get new information. After reasoning, if you find you lack "
            "some knowledge, you can call a search engine by <search> query </search>, and it "
            "will return the top searched results between <information> and </information>. "
            "You can search as many times as you want. If you find no further external "
            "knowledge needed, you can directly provide the answer inside <answer> and </answer> "
            "without detailed illustrations. For example, <answer> Beijing </answer>. Question: "
        ),
        "released": (
            "Answer the given question. You must conduct reasoning inside <think> and </think> "
            "first every time you get new information. After reasoning, if you find you lack "
            "some knowledge, you can call a search engine by <search> query </search> and it "
            "will return the top searched results between <information> and </information>. "
            "You can search as many times as your want. If you find no further external "
            "knowledge needed, you can directly provide the answer inside <answer> and </answer>, "
            "without detailed illustrations. For example, <answer> Beijing </answer>. Question: "
        ),
    }
    #: The prompt of a protocol built without options.
    DEFAULT_PROMPT = "paper"

    def __init__(self, prompt: str | None = None):
        from searchgym.error import UnknownNameError

        prompt = self.DEFAULT_PROMPT if prompt is None else prompt
        if prompt not in self.PROMPTS:
            raise UnknownNameError(f"{type(self).__name__} prompt", prompt, self.PROMPTS)
        self.prompt_style = prompt

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        question = example.question.strip()
        if not question.endswith("?"):
            question += "?"  # as Search-R1's data preparation does
        return f"{self.PROMPTS[self.prompt_style]}{question}\n"

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        action, _ = search_or_answer(text)
        return (action,), not isinstance(action, Invalid)

    writable = "it writes exactly one Search or Answer per turn"

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if len(actions) != 1 or not isinstance(actions[0], (Search, Answer)):
            raise self._unwritable(actions)
        act = actions[0]
        head = f"<think> {thought} </think>\n" if thought else ""
        if isinstance(act, Search):
            return f"{head}<search> {act.query} </search>"
        return f"{head}<answer> {act.text} </answer>"

    def wrap_information(self, text: str) -> str:
        return f"\n\n<information>{text.strip()}</information>\n\n"

    def invalid_feedback(self) -> str:
        return (
            "\nMy previous action is invalid. If I want to search, I should put the query between "
            "<search> and </search>. If I want to give the final answer, I should put the answer "
            "between <answer> and </answer>. Let me try again.\n"
        )


class ReconProtocol(SearchR1Protocol):
    """RECON: Search-R1's grammar; its environment condenses every retrieval (see
    :mod:`searchgym.envs.components.summarizers`), so the agent's information blocks hold summaries.

    Args:
        feedback: What a turn without a search or an answer gets back. ``"paper"``: the
            rethink line of the paper's rollout (Alg. 1, as in Search-R1's Alg. 1);
            ``"search_r1"``: the longer text of the released code (RECON's and Search-R1's
            ``generation.py``), which restates the tags.
        prompt: RECON's paper prints no prompt for its policy; it trains in Search-R1's
            released pipeline, so the default is Search-R1's released wording
            (``"released"``); ``"paper"`` is Search-R1's Table 1.
    """

    name = "recon"
    DEFAULT_PROMPT = "released"

    #: Feedback option -> the text a malformed turn gets back.
    FEEDBACK = {
        "paper": "\nMy action is not correct. Let me rethink.\n",
        "search_r1": SearchR1Protocol.invalid_feedback(None),  # type: ignore[arg-type]
    }

    def __init__(self, feedback: str = "paper", prompt: str | None = None):
        from searchgym.error import UnknownNameError

        super().__init__(prompt)
        if feedback not in self.FEEDBACK:
            raise UnknownNameError("RECON feedback", feedback, self.FEEDBACK)
        self.feedback = feedback

    def invalid_feedback(self) -> str:
        return self.FEEDBACK[self.feedback]
