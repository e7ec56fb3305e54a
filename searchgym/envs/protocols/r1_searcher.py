"""R1-Searcher (Song et al., 2025).

Turn grammar: the prompt opens the agent's ``<think>`` block; inside its reasoning the
agent searches with ``<|begin_of_query|> keywords <|end_of_query|>`` and finishes with
``</think><answer> text </answer>``. Retrieved documents come back numbered ``(1)``,
``(2)``… between ``<|begin_of_documents|>`` and ``<|end_of_documents|>``. The engine stops
at ``<|end_of_query|>`` or ``</answer>``; the earliest closed query or answer of the turn
is the action; a query is the text after the last ``<|begin_of_query|>`` before the stop,
with quotes removed and whitespace collapsed, as in R1-Searcher's rollout. R1-Searcher ends
the trajectory on a malformed turn; here it is answered with feedback and counted, like
every protocol (its format penalty still applies at the end).

Two prompts, both the paper's (§2.1 and §2.2.2): ``prompt="base"`` (the default) is the
"System Prompt for Base Model" the policy trains with, fed as raw text (as the released
Qwen-2.5-7B-Base script does; its Llama-3.1-8B-Instruct scripts pass --apply_chat_template),
the assistant's turn opened with ``<think>``; ``prompt="data_selection"``
is the "System Prompt for Data Selection" with which Qwen-2.5-7B-Instruct's rollouts sorted
the training questions by difficulty: a system message, the question as the user message,
through the model's chat template (``searchgym stage-sets`` uses it). The paper's box for it
shows three stray double quotes (the end of a Python string) after the query format; they
are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from searchgym.corpora.types import Hit, QAExample
from searchgym.envs.protocols.base import Action, Answer, Invalid, Protocol, Search, find_block, first_of

BEGIN_QUERY, END_QUERY = "<|begin_of_query|>", "<|end_of_query|>"
BEGIN_DOCS, END_DOCS = "<|begin_of_documents|>", "<|end_of_documents|>"

#: §2.1's "System Prompt for Data Selection", word for word (without the stray quotes).
DATA_SELECTION_PROMPT = (
    "You are a helpful assistant. Given a question, you should answer it by first thinking about the reasoning "
    "process in the mind and then providing the final answer. The output format of reasoning process and final "
    "answer are enclosed within <think> </think> and <answer> </answer> tags, respectively, i.e., \"<think> "
    "reasoning process here </think><answer> final answer here </answer>\". You should perform thinking with "
    "decomposing, reflecting, brainstorming, verifying, refining, and revising. Besides, you can perform searching "
    f"for uncertain knowledge if necessary with the format of \"{BEGIN_QUERY} search query (only keywords) here "
    f"{END_QUERY}\". Then, the search system will provide you with the retrieval information with the format of "
    f"\"{BEGIN_DOCS} ...search results... {END_DOCS}\"."
)


class R1SearcherProtocol(Protocol):
    """The grammar of R1-Searcher."""

    name = "r1_searcher"
    stop_strings = (END_QUERY, "</answer>")
    env_tags = ((BEGIN_DOCS, END_DOCS),)
    writable = "it writes exactly one Search or Answer per turn"

    uses_chat_template = False

    #: The prompts the ``prompt`` option names.
    PROMPTS = ("base", "data_selection")

    def __init__(self, prompt: str = "base"):
        from searchgym.error import UnknownNameError

        if prompt not in self.PROMPTS:
            raise UnknownNameError("R1-Searcher prompt", prompt, self.PROMPTS)
        self.prompt_style = prompt
        # The data-selection prompt is a system message for an instruct model's chat template.
        self.uses_chat_template = prompt == "data_selection"

    def prompt(self, example: QAExample, docs: Sequence[Hit] | None = None) -> str:
        if self.prompt_style == "data_selection":
            return f"{DATA_SELECTION_PROMPT}\n\n{example.question}"
        return (
            "The User asks a question, and the Assistant solves it.\n"
            "The Assistant first thinks about the reasoning process in the mind and then provides the User "
            "with the final answer.\n"
            "The output format of reasoning process and final answer are enclosed within <think> </think> and "
            '<answer> </answer> tags, respectively, i.e., "<think> reasoning process here </think>\n\n'
            '<answer> final answer here </answer>".\n'
            "During the thinking process, **the Assistant can perform searching** for uncertain knowledge if "
            f'necessary with the format of "{BEGIN_QUERY} search query (only list keywords, such as '
            f'**"keyword_1 keyword_2 ..."**){END_QUERY}". **A query must involve only a single triple**.\n'
            "Then, the search system will provide the Assistant with the retrieval information with the format "
            f'of "{BEGIN_DOCS} ...search results... {END_DOCS}".\n\n'
            f"User:{example.question}\nAssistant: <think>"
        )

    def messages(self, example: QAExample, docs: Sequence[Hit] | None = None) -> list[dict[str, str]]:
        if self.prompt_style == "data_selection":
            return [{"role": "system", "content": DATA_SELECTION_PROMPT}, {"role": "user", "content": example.question}]
        return super().messages(example, docs)

    def parse_actions(self, text: str) -> tuple[tuple[Action, ...], bool]:
        first = first_of(text, (BEGIN_QUERY, "<answer>"))
        if first == BEGIN_QUERY:
            if END_QUERY not in text:
                return (Invalid(f"{BEGIN_QUERY} without {END_QUERY}"),), False
            # The last opening tag before the stop, quotes dropped and spaces collapsed, as in R1-Searcher.
            query = " ".join(text.split(END_QUERY)[0].split(BEGIN_QUERY)[-1].replace('"', "").split())
            if not query:
                return (Invalid("empty query"),), False
            return (Search(query),), True
        if first == "<answer>":
            answer = find_block(text, "<answer>", "</answer>")
            if answer is None:
                return (Invalid("<answer> without </answer>"),), False
            if not answer:
                return (Invalid("empty <answer> block"),), False
            return (Answer(answer),), True
        return (Invalid(f"no {BEGIN_QUERY} or <answer>"),), False

    def write(self, actions: Sequence[Action], thought: str | None = None) -> str:
        if len(actions) != 1 or not isinstance(actions[0], (Search, Answer)):
            raise self._unwritable(actions)
        act = actions[0]
        head = f" {thought} " if thought else " "
        if isinstance(act, Search):
            return f"{head}{BEGIN_QUERY} {act.query} {END_QUERY}"
        return f"{head}</think><answer> {act.text} </answer>"

    def docs_text(self, hits: Sequence[Hit]) -> str:
        return "\n".join(f"({i}){h.passage.title}\n{h.passage.text}" for i, h in enumerate(hits, 1))

    def wrap_information(self, text: str) -> str:
        return f"\n\n{BEGIN_DOCS}\n{text.strip()}\n{END_DOCS}\n\n"

    def invalid_feedback(self) -> str:
        return (
            f"\nMy previous step is invalid. To search, I should write the keywords between "
            f"{BEGIN_QUERY} and {END_QUERY}. To give the final answer, I should close my "
            "reasoning with </think> and put the answer between <answer> and </answer>.\n"
        )
