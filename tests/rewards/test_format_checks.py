import pytest

from searchgym.error import ConfigError
from searchgym.rewards import (
    RSearchFormat,
    Turn,
    r1_searcher_format_errors,
    r_search_format,
    search_r1_sequence,
)


def T(text: str, *observation: str) -> Turn:
    """An agent turn and the kinds of what the environment answered."""
    return Turn(text, (), observation)


# ---------------------------------------------------------------- Search-R1
SR1_SEARCH_THEN_ANSWER = [
    T("<think>I need the capital.</think>\n<search> capital of France </search>", "documents"),
    T("<think>Found it.</think>\n<answer> Paris </answer>"),
]


@pytest.mark.parametrize(
    "turns",
    [
        SR1_SEARCH_THEN_ANSWER,
        [T("<think>easy</think><answer>Paris</answer>")],
        [T("<think>easy</think><answer>Paris</answer>\n\n  ")],
        [
            T("<think>a</think><search>q</search>", "documents"),
            T("<think>b</think><search>r</search>", "documents"),
            T("<think>c</think><answer>x</answer>"),
        ],
        # Empty blocks are still well formed.
        [T("<think></think><answer></answer>")],
    ],
)
def test_search_r1_valid_sequences(turns):
    assert search_r1_sequence(turns) == (True, "valid")


@pytest.mark.parametrize(
    "turns, reason",
    [
        ([T("<answer>Paris</answer>")], "unexpected tag <answer> in state start"),
        ([T("<think>a</think> so <answer>x</answer>")], "unexpected text 'so' outside tags (state after_think)"),
        # After the documents the agent must think again before answering.
        (
            [T("<think>a</think><search>q</search>", "documents"), T("<answer>x</answer>")],
            "unexpected tag <answer> in state information",
        ),
        # The invalid-turn feedback (and the budget notice) are text outside tags, as in the seed.
        (
            [T("<think>a</think><search>q</search>", "feedback"), T("<think>b</think><answer>x</answer>")],
            "the environment's feedback after turn 1 is text outside tags (state after_search)",
        ),
        (
            [T("<think>a</think><search>q</search>", "budget"), T("<think>b</think><answer>x</answer>")],
            "the environment's budget after turn 1 is text outside tags (state after_search)",
        ),
        (
            [T("<think>a</think><search>q</search>", "documents")],
            "incomplete sequence, ended in state information",
        ),
        ([T("<think>a</think><answer>x</answer> extra")], "unexpected text 'extra' outside tags (state end)"),
        ([T("<think>a <think>b</think></think><answer>x</answer>")], "unexpected tag <think> in state in_think"),
        # Documents the agent wrote itself are not the environment's.
        (
            [T("<think>a</think><search>q</search><information>d</information><think>b</think><answer>x</answer>")],
            "the agent wrote <information> itself",
        ),
        ([T("<think>a</think><answer>x</answer>", "documents")], "documents after turn 1 in state end"),
        ([], "incomplete sequence, ended in state start"),
    ],
)
def test_search_r1_invalid_sequences(turns, reason):
    assert search_r1_sequence(turns) == (False, reason)


# ---------------------------------------------------------------- R1-Searcher
R1_QUERY = "I should look this up. <|begin_of_query|> capital of France <|end_of_query|>"
R1_END = "\n\nSo the answer is Paris. </think>\n\n<answer> Paris </answer>"
R1_GOOD = [T(R1_QUERY, "documents"), T(R1_END)]


def r1(query: str = R1_QUERY, end: str = R1_END) -> list[Turn]:
    return [T(query, "documents"), T(end)]


@pytest.mark.parametrize(
    "turns",
    [
        R1_GOOD,
        r1("<think>" + R1_QUERY),  # the agent opened the think block itself
        [T("Easy. </think><answer> Paris </answer>")],  # no search at all is well formed
    ],
)
def test_r1_searcher_well_formed(turns):
    assert r1_searcher_format_errors(turns) == []


@pytest.mark.parametrize(
    "turns, error",
    [
        (
            r1("<|begin_of_documents|>\n(1)made up\n<|end_of_documents|>\n\n" + R1_QUERY),
            "the agent wrote document tags itself",
        ),
        # A query the environment did not run (the last turn's, or over the budget).
        (
            [T(R1_QUERY, "budget"), T(R1_END)],
            "queries and retrievals do not pair up: <|begin_of_query|>=1, <|end_of_query|>=1, retrievals shown=0",
        ),
        (r1("Assistant: " + R1_QUERY), "the role word 'assistant' appears in the agent's text"),
        (
            r1(end=R1_END.replace("</think>", "</think> </think>")),
            "expected one </think> (and at most one <think> before it), got 0 <think> and 2 </think>",
        ),
        (
            r1(end=R1_END.replace("</think>", "")),
            "expected one </think> (and at most one <think> before it), got 0 <think> and 0 </think>",
        ),
        (
            r1(end=R1_END.replace("</think>", "</think><think>")),
            "expected one </think> (and at most one <think> before it), got 1 <think> and 1 </think>",
        ),
        (r1(end=R1_END + "<answer> Lyon </answer>"), "expected one <answer> and one </answer>, got 2 and 2"),
        (
            r1(end=R1_END.replace(" Paris </answer>", " one two three four five six seven eight nine ten eleven </answer>")),
            "the answer has 11 words, more than 10",
        ),
        (r1(end=R1_END.replace("So the answer", "所以 the answer")), "CJK characters in the agent's text"),
        # The seed ends the episode at a malformed turn; here it gets feedback and still fails the format.
        ([T("I am not sure.", "feedback"), *R1_GOOD], "1 invalid turn(s) got the environment's feedback"),
    ],
)
def test_r1_searcher_format_violations(turns, error):
    assert r1_searcher_format_errors(turns) == [error]


def test_r1_searcher_answer_with_a_query_tag():
    turns = r1(end=R1_END.replace(" Paris </answer>", " <|begin_of_query|> Paris </answer>"))
    assert "the answer contains a query or document tag" in r1_searcher_format_errors(turns)


def test_r1_searcher_answer_word_limit_is_configurable():
    long = r1(end=R1_END.replace(" Paris </answer>", " the city of Paris </answer>"))
    assert r1_searcher_format_errors(long, max_answer_words=3) == ["the answer has 4 words, more than 3"]


# ---------------------------------------------------------------- R-Search
RS_SEARCH = T("I will search. <search> capital of France </search>", "documents")
RS_EVIDENCE = "<original_evidence> Paris is the capital. </original_evidence>"
RS_ANSWER = "<answer> Paris </answer>"


@pytest.mark.parametrize(
    "turns, expected",
    [
        ([RS_SEARCH, T(RS_EVIDENCE + RS_ANSWER)], RSearchFormat(True, True, True, "Paris is the capital.")),
        # No search: Eq. 5 asks for no evidence; evidence written anyway is not scored.
        ([T("I know it. " + RS_ANSWER)], RSearchFormat(True, True, False)),
        ([T("I know it. " + RS_EVIDENCE + RS_ANSWER)], RSearchFormat(True, True, False)),
        # A block opened in one turn and closed in another is invalid, even around a search.
        (
            [T("<original_evidence> Paris. <search> capital of France </search>", "documents"),
             T("</original_evidence>" + RS_ANSWER)],
            RSearchFormat(True, False, False, split_block=True),
        ),
        ([RS_SEARCH, T("<original_evidence> Paris. " + RS_ANSWER)], RSearchFormat(True, False, False, split_block=True)),
        # Searched but wrote no evidence.
        ([RS_SEARCH, T(RS_ANSWER)], RSearchFormat(True, False, False)),
        # Two evidence blocks: wrong format, the last one is still scored.
        (
            [RS_SEARCH, T("<original_evidence>x</original_evidence>" + RS_EVIDENCE + RS_ANSWER)],
            RSearchFormat(True, False, True, "Paris is the capital."),
        ),
        ([RS_SEARCH, T("<original_evidence>  </original_evidence>" + RS_ANSWER)], RSearchFormat(True, False, False)),
        ([RS_SEARCH, T(RS_EVIDENCE + "<answer> </answer>")], RSearchFormat(False, True, True, "Paris is the capital.")),
        ([RS_SEARCH, T(RS_EVIDENCE)], RSearchFormat(False, True, True, "Paris is the capital.")),
        # An invalid turn costs the answer format (the seed's feedback holds an answer pair).
        ([T("hmm", "feedback"), T(RS_ANSWER)], RSearchFormat(False, True, False)),
        # Nothing at all: the paper's flags call the missing evidence correct.
        ([T("I don't know.")], RSearchFormat(False, True, False)),
    ],
)
def test_r_search_format(turns, expected):
    assert r_search_format(turns) == expected


def test_r_search_format_seed_rule_refuses_evidence_without_a_search():
    turns = [T("I know it. " + RS_EVIDENCE + RS_ANSWER)]
    assert r_search_format(turns, evidence_rule="seed") == RSearchFormat(True, False, False)
    assert r_search_format([T("I know it. " + RS_ANSWER)], evidence_rule="seed") == RSearchFormat(True, True, False)
    with pytest.raises(ConfigError, match="expects evidence_rule to be one of"):
        r_search_format(turns, evidence_rule="paper")


def test_turn_refuses_an_unknown_observation_kind():
    from searchgym.error import ConfigError

    with pytest.raises(ConfigError, match="^Turn expects observation kinds among"):
        Turn("x", (), ("documents", "prompt"))
