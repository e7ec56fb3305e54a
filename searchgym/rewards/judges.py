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
    ``{answers}``) and the first words of a positive and a negative reply."""

    name: str
    template: str
    positive: str
    negative: str
    source: str

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
    match = _FIRST_WORD.match(reply.lower())
    if match is None:
        return None
    word = match.group(1)
    if word == judge.positive:
        return True
    if word == judge.negative:
        return False
    return None
