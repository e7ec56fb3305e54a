"""LLM judges: the papers' judge prompts and how their replies are read.

Two judges, each a prompt (data, reproduced word for word) and a verdict vocabulary:

- ``"s3"`` — s3's GenAcc judge (``check_answer_correct``, the paper's Fig. 13): asked,
  only when the span check fails, whether a gold answer is contained in the response;
  replies ``yes`` or ``no``. The gold answers are written as a Python list, as s3 does.
- ``"r1-searcher"`` — R1-Searcher's LLM-as-judge evaluation (``ACC_L``,
  ``evaluation/metric_calc_gpt_as_judge.py``, gpt-4o-mini in the paper): asked whether the
  predicted answer fully aligns with the golden answer; replies ``True`` or ``False``.
  R1-Searcher's data has one golden answer per question; with several, they are written
  as s3 writes them (a Python list).

:func:`parse_verdict` reads a reply: the first word, case-insensitive and after leading
punctuation, must be the judge's positive or negative word; anything else is *malformed*
(``None``), which every judge here scores as a wrong answer and counts.

The model calls live in :class:`searchgym.envs.components.lm_frozen.LMJudge` (batched, cached by
question and answer); this module is pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from searchgym.error import UnknownNameError

__all__ = ["JUDGES", "JudgePrompt", "judge_prompt", "parse_verdict"]


@dataclass(frozen=True)
class JudgePrompt:
    """One paper's judge: its prompt ``template`` (fields ``{question}``, ``{prediction}``,
    ``{answers}``) and the first words of a positive and a negative reply. ``verdict_field``:
    the reply is a form and the verdict is the word after ``<verdict_field>:`` on its own line
    (BrowseComp's grader: ``correct: yes``); None: the reply's first word. ``max_new_tokens``:
    the reply's length the judge needs by default."""

    name: str
    template: str
    positive: str
    negative: str
    source: str
    verdict_field: str | None = None
    max_new_tokens: int = 10

    def render(self, question: str | None, prediction: str, answers: Sequence[str]) -> str:
        """The prompt for one (question, prediction, gold answers)."""
        golds = list(answers)
        # s3 writes the list with Python's repr; R1-Searcher's single golden answer is written as is.
        written = golds[0] if self.name == "r1-searcher" and len(golds) == 1 else str(golds)
        return self.template.format(question=question or "", prediction=prediction, answers=written)


#: The judges by name.
JUDGES: dict[str, JudgePrompt] = {
    "s3": JudgePrompt(
        name="s3",
        template=(
            "Please check if any of the golden answers is contained in the following response: {prediction}\n\n"
            "Golden answers: {answers}\n\nPlease directly answer with 'yes' or 'no'."
        ),
        positive="yes",
        negative="no",
        source="s3 check_answer_correct (Fig. 13)",
    ),
    "r1-searcher": JudgePrompt(
        name="r1-searcher",
        template=(
            "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. The prediction is "
            "correct if it fully aligns with the meaning and key information of the Golden Answer. Respond with True "
            "if the prediction is correct and False otherwise.\n\n"
            "Question: {question}\nGolden Answer: {answers}\nPredicted Answer: {prediction}\n    "
        ),
        positive="true",
        negative="false",
        source="R1-Searcher evaluation/metric_calc_gpt_as_judge.py (ACC_L)",
    ),
    # BrowseComp's grader form (openai/simple-evals browsecomp_eval.py, GRADER_TEMPLATE; used by
    # BrowseComp-Plus's evaluation): the judge extracts the final answer, reasons, says whether it
    # is correct and reads the stated confidence. The form's fields are BrowseComp's; the wording is ours.
    "browsecomp": JudgePrompt(
        name="browsecomp",
        template=(
            "Judge whether the response below answers the question correctly, given the correct answer.\n\n"
            "[question]: {question}\n\n[response]: {prediction}\n\n[correct_answer]: {answers}\n\n"
            "Reply with these four lines and nothing else:\n"
            "extracted_final_answer: the final answer the response gives, or None if it gives none\n"
            "reasoning: whether the extracted answer means the same as the correct answer (small rounding "
            "differences in numbers allowed, nothing else), without solving the question again\n"
            "correct: yes if the extracted answer matches the correct answer, otherwise no\n"
            "confidence: the confidence the response states, from 0% to 100% (100% if it states none)"
        ),
        positive="yes",
        negative="no",
        source="BrowseComp's grader form (simple-evals browsecomp_eval.py GRADER_TEMPLATE), as BrowseComp-Plus evaluates",
        verdict_field="correct",
        max_new_tokens=256,
    ),
}


def judge_prompt(name: str) -> JudgePrompt:
    """The judge called ``name`` (one of :data:`JUDGES`)."""
    if not isinstance(name, str) or name not in JUDGES:
        raise UnknownNameError("judge prompt", name, JUDGES)
    return JUDGES[name]


_FIRST_WORD = re.compile(r"[\W_]*([a-z]+)")


def parse_verdict(reply: str, judge: JudgePrompt) -> bool | None:
    """``True``/``False`` when the reply's first word is the judge's positive/negative word
    (``"Yes."``, ``"**False**"``), ``None`` when it is malformed (``"yesterday"``, ``""``,
    ``"I think yes"``)."""
    if judge.verdict_field is not None:
        line = re.search(rf"^[\W_]*{re.escape(judge.verdict_field)}[\W_]*:[\W_]*([a-z]+)", reply.lower(), re.MULTILINE)
        return None if line is None else True if line.group(1) == judge.positive else False if line.group(1) == judge.negative else None
    match = _FIRST_WORD.match(reply.lower())
    if match is None:
        return None
    word = match.group(1)
    if word == judge.positive:
        return True
    if word == judge.negative:
        return False
    return None
