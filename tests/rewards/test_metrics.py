import re

import pytest

from searchgym.error import ConfigError
from searchgym.rewards import (
    answer_in_text,
    cover_exact_match,
    exact_match,
    f1_score,
    gen_acc,
    normalize_answer_r1searcher,
    span_check,
    sub_exact_match,
)

METRICS = [exact_match, sub_exact_match, cover_exact_match, f1_score, span_check, gen_acc]


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.__name__)
def test_no_prediction_scores_zero(metric):
    assert metric(None, ["Paris"]) == 0.0


@pytest.mark.parametrize("metric", METRICS, ids=lambda m: m.__name__)
def test_bare_string_is_one_gold_answer(metric):
    # Iterating "Paris" would compare against single letters.
    assert metric("Paris", "Paris") == 1.0
    assert metric("P", "Paris") == 0.0


def test_exact_match_ignores_case_articles_and_punctuation():
    assert exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel Tower in Paris", ["Eiffel Tower"]) == 0.0
    assert exact_match("London", ["Paris", "london"]) == 1.0


def test_sub_exact_match_is_a_character_substring_test():
    assert sub_exact_match("It is in Paris, France.", ["Paris"]) == 1.0
    assert sub_exact_match("Paris", ["Paris, France"]) == 0.0
    # FlashRAG compares characters, not tokens.
    assert sub_exact_match("start", ["art"]) == 1.0


def test_empty_gold_answers_never_count_as_contained():
    for metric in (sub_exact_match, cover_exact_match, span_check):
        assert metric("anything at all", ["The", "?"]) == 0.0
    assert answer_in_text("anything at all", ["a"]) is False


def test_cover_exact_match_accepts_any_order_with_r1searcher_normalization():
    assert cover_exact_match("York New", ["New York"]) == 1.0
    assert cover_exact_match("New Jersey", ["New York"]) == 0.0
    assert cover_exact_match("born in New York City in 1950", ["new york"]) == 1.0
    # Hyphens become spaces, so both gold tokens are present.
    assert cover_exact_match("Jean Paul Sartre", ["Jean-Paul Sartre"]) == 1.0
    assert cover_exact_match("True", ["yes"]) == 1.0


def test_f1_worked_example():
    # pred -> "cat sat on mat" (4 tokens), gold -> "cat on mat" (3); 3 shared:
    # P = 3/4, R = 1, F1 = 2 * 3/4 / (7/4) = 6/7.
    assert f1_score("the cat sat on the mat", ["a cat on a mat"]) == pytest.approx(6 / 7)
    assert f1_score("the cat sat on the mat", ["dog", "a cat on a mat"]) == pytest.approx(6 / 7)


def test_f1_counts_repeated_tokens_once_per_occurrence():
    # shared: one "big", one "dog" -> P = R = 2/3.
    assert f1_score("big big dog", ["big dog dog"]) == pytest.approx(2 / 3)


def test_f1_yes_no_rule():
    assert f1_score("no", ["No"]) == 1.0
    # "yes" is a yes/no answer and the prediction differs: 0, although a token is shared.
    assert f1_score("yes it is", ["yes"]) == 0.0
    # Without the rule (R-Search): P = 1/3, R = 1, F1 = 0.5.
    assert f1_score("yes it is", ["yes"], special_yes_no=False) == pytest.approx(0.5)


def test_f1_with_r1searcher_normalizer():
    # "jean paul" vs "jean paul sartre": P = 1, R = 2/3, F1 = 0.8.
    assert f1_score("Jean-Paul", ["Jean Paul Sartre"], normalize_answer_r1searcher) == pytest.approx(0.8)
    # The standard normalizer glues "jeanpaul", which shares no token.
    assert f1_score("Jean-Paul", ["Jean Paul Sartre"]) == 0.0


def test_span_check_needs_the_gold_tokens_contiguous_inside_the_prediction():
    assert span_check("He was born in New York City.", ["New York"]) == 1.0
    assert span_check("York New", ["New York"]) == 0.0
    # The prediction must contain the gold answer, not the reverse.
    assert span_check("New York", ["New York City"]) == 0.0
    # Tokens, not characters.
    assert span_check("start", ["art"]) == 0.0


def test_span_check_compares_unicode_after_nfd_and_lowercasing():
    assert span_check("CAFE\u0301 noir", ["caf\u00e9"]) == 1.0
    # NFD keeps the accent as part of the token.
    assert span_check("Café de Flore", ["cafe"]) == 0.0


def test_gen_acc_asks_the_judge_only_when_the_span_check_fails():
    calls = []

    def judge(question, prediction, answers):
        calls.append((question, prediction, answers))
        return True

    assert gen_acc("It is Paris.", ["Paris"], judge, "Capital of France?") == 1.0
    assert calls == []
    assert gen_acc("The French capital", ["Paris"], judge, "Capital of France?") == 1.0
    assert calls == [("Capital of France?", "The French capital", ["Paris"])]
    assert gen_acc("The French capital", ["Paris"]) == 0.0
    assert gen_acc("The French capital", ["Paris"], lambda q, p, a: 0.25) == 0.25


def test_gen_acc_rejects_a_judge_score_outside_the_unit_interval():
    msg = (
        "gen_acc expects the judge to return a bool or a float in [0, 1], got 2; "
        "make the judge return whether the prediction answers the question correctly."
    )
    with pytest.raises(ConfigError, match="^" + re.escape(msg) + "$"):
        gen_acc("London", ["Paris"], lambda q, p, a: 2)


def test_answer_in_text():
    assert answer_in_text("Paris is the capital of France.", ["paris"]) is True
    assert answer_in_text("Doc 1 (Title: Lyon) Lyon is a city.", ["Paris", "Marseille"]) is False
    assert answer_in_text("U.S. forces", ["US"]) is True


@pytest.mark.parametrize("gold", ["The", "An", "?", "a.n"])
def test_every_metric_skips_golds_that_normalize_to_nothing(gold):
    from searchgym.rewards import cover_exact_match, exact_match, f1_score, gen_acc, span_check, sub_exact_match

    judged = []
    judge = lambda question, prediction, answers: judged.append(answers) or True  # noqa: E731
    for metric in (exact_match, f1_score, cover_exact_match, sub_exact_match, span_check):
        assert metric("the", [gold]) == 0.0 and metric("", [gold]) == 0.0, metric.__name__
    assert gen_acc("the", [gold], judge) == 0.0 and judged == []  # the judge never sees a blank gold
