import pytest

from searchgym.error import ConfigError
from searchgym.rewards.grounding import GroundedEvidence, evidence_pieces, ground_evidence, normalize_span

OBS = (
    "\n\n<observation>(Title: Vivia Sinremander) Vivia Sinremander (1850–1913) was an influential banker. "
    "She studied botany at Mostokivo College, graduating in 1875. She died in 1913.\n"
    "(Title: Mostokivo College) Mostokivo College is a private university located in Prolthunar.</observation>\n\n"
)


def test_normalize_span_folds_case_punctuation_and_spaces():
    assert normalize_span("  Vivia  SINREMANDER (1850–1913), a banker!") == "vivia sinremander 1850 1913 a banker"


def test_evidence_pieces_are_sentences_and_a_bare_title_marker_is_none():
    text = "(Title: A) First one. Second; third\nfourth?  (Title: B)"
    assert evidence_pieces(text) == ["(Title: A) First one.", "Second;", "third", "fourth?"]


def test_a_title_marker_is_read_when_the_sentence_quotes_that_documents():
    quote = "(Title: Vivia Sinremander) She died in 1913."
    assert ground_evidence(quote, [OBS]).text == quote
    # The marker of another document: the title cannot be attached to this sentence.
    assert ground_evidence("(Title: Mostokivo College) She died in 1913.", [OBS]).text == ""
    assert ground_evidence("(Title: Prolthunar) She died in 1913.", [OBS]).text == ""


def test_quoted_sentences_are_kept_in_the_agents_wording():
    evidence = "she studied botany at mostokivo college , graduating in 1875\n(Title: Mostokivo College) Mostokivo College is a private university located in Prolthunar."
    g = ground_evidence(evidence, [OBS])
    assert g.text == (
        "she studied botany at mostokivo college , graduating in 1875 "
        "(Title: Mostokivo College) Mostokivo College is a private university located in Prolthunar."
    )
    assert (g.pieces, g.grounded, g.fraction, g.over_budget) == (2, 2, 1.0, False)


@pytest.mark.parametrize(
    "evidence",
    [
        "Vivia Sinremander, Mostokivo College, Prolthunar",  # a list of titles and names
        "Vivia Sinremander. Mostokivo College. Prolthunar.",  # the same, one name a sentence
        "located in Prolthunar",  # a fragment cut around a name
        "In which city is the university attended by the founder of Pravrimento Shipyards located?",  # the question
        "Mostokivo College is a public university located in Prolthunar.",  # one word changed
        "She studied botany at Mostokivo College, graduating in 1875 in Prolthunar.",  # a quote with an addition
    ],
)
def test_text_that_no_observation_holds_is_dropped(evidence):
    assert ground_evidence(evidence, [OBS]) == GroundedEvidence("", len(evidence_pieces(evidence)), 0, 0, False)


def test_a_short_whole_sentence_is_a_quote_but_a_short_fragment_is_not():
    assert ground_evidence("She died in 1913.", [OBS]).text == "She died in 1913."
    assert ground_evidence("died in 1913", [OBS]).text == ""
    assert ground_evidence("died in 1913", [OBS], min_span_words=3).text == "died in 1913"


def test_only_the_observations_given_count():
    first, _ = OBS.split("\n(Title: ")
    quotes = "She studied botany at Mostokivo College. She died in 1913. Mostokivo College is a private university"
    assert ground_evidence(quotes, [OBS]).grounded == 3
    # "Mostokivo College is a private university" is only in the second document.
    assert ground_evidence(quotes, [first]).grounded == 2
    assert ground_evidence(quotes, []).grounded == 0


def test_repeated_quotes_count_once():
    g = ground_evidence("She died in 1913. She died in 1913. she died in 1913", [OBS])
    assert (g.text, g.grounded, g.words) == ("She died in 1913.", 1, 4)


def test_evidence_over_the_word_budget_is_not_read_at_all():
    dump = OBS.replace("<observation>", "").replace("</observation>", "")
    g = ground_evidence(dump, [OBS], max_words=20)
    assert g.over_budget and g.text == "" and g.words > 20 and g.grounded == g.pieces
    assert ground_evidence(dump, [OBS]).text  # within the default budget of 100 words


@pytest.mark.parametrize("option, value", [("max_words", 0), ("min_span_words", True), ("max_words", 1.5)])
def test_budgets_must_be_positive_ints(option, value):
    with pytest.raises(ConfigError, match=f"^ground_evidence expects {option} to be a positive int, got {value!r}.$"):
        ground_evidence("x", [OBS], **{option: value})
