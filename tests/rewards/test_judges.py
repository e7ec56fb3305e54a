"""The LLM judges' prompts (the papers' words) and how their replies are read."""

import pytest

from searchgym.error import UnknownNameError
from searchgym.rewards.judges import JUDGES, judge_prompt, parse_verdict

S3, R1 = JUDGES["s3"], JUDGES["r1-searcher"]


def test_s3_prompt_is_check_answer_correct_word_for_word():
    assert S3.render("Which river?", "the Tesk", ["Tesk", "River Tesk"]) == (
        "Please check if any of the golden answers is contained in the following response: the Tesk\n\n"
        "Golden answers: ['Tesk', 'River Tesk']\n\nPlease directly answer with 'yes' or 'no'."
    )


def test_r1_searcher_prompt_is_its_gpt_judge_word_for_word():
    assert R1.render("Which river?", "the Tesk", ["Tesk"]) == (
        "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct. The prediction is correct "
        "if it fully aligns with the meaning and key information of the Golden Answer. Respond with True if the prediction "
        "is correct and False otherwise.\n\nQuestion: Which river?\nGolden Answer: Tesk\nPredicted Answer: the Tesk\n    "
    )
    # Several golden answers (R1-Searcher's data has one) are written as s3 writes them.
    assert "Golden Answer: ['Tesk', 'River Tesk']\n" in R1.render("Q", "p", ["Tesk", "River Tesk"])


@pytest.mark.parametrize(
    "reply, s3, r1",
    [
        ("yes", True, None), ("Yes.", True, None), ("  **YES**, it is", True, None), ("no", False, None), ("No, it is not", False, None),
        ("True", None, True), ("'False'", None, False), ("true.", None, True),
        # Malformed: neither word first. s3's own check ('yes' in reply) would pay the first three.
        ("yesterday", None, None), ("I think yes", None, None), ("not sure", None, None), ("", None, None), ("...", None, None),
        ("Truely", None, None), ("1", None, None),
    ],
)
def test_verdicts_are_the_first_word_and_anything_else_is_malformed(reply, s3, r1):
    assert parse_verdict(reply, S3) is s3
    assert parse_verdict(reply, R1) is r1


def test_unknown_judge_names_say_which_exist():
    with pytest.raises(UnknownNameError) as e:
        judge_prompt("r1searcher")
    assert str(e.value) == "Unknown judge prompt 'r1searcher'. Did you mean 'r1-searcher'? Expected one of: browsecomp, r1-searcher, s3."
