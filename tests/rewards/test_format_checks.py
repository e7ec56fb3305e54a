import pytest

from searchgym.rewards import (
    RSearchFormat,
    information_blocks,
    r1_searcher_format_errors,
    r_search_format,
    search_r1_sequence,
)

# ---------------------------------------------------------------- Search-R1
SR1_SEARCH_THEN_ANSWER = (
    "<think>I need the capital.</think>\n<search> capital of France </search>"
    "\n\n<information>Doc 1 (Title: Paris) Paris is the capital.</information>\n\n"
    "<think>Found it.</think>\n<answer> Paris </answer>"
)


@pytest.mark.parametrize(
    "text",
    [
        SR1_SEARCH_THEN_ANSWER,
        "<think>easy</think><answer>Paris</answer>",
        "<think>easy</think><answer>Paris</answer>\n\n  ",
        "<think>a</think><search>q</search><information>d</information>"
        "<think>b</think><search>r</search><information>e</information><think>c</think><answer>x</answer>",
        # Empty blocks are still well formed.
        "<think></think><answer></answer>",
    ],
)
def test_search_r1_valid_sequences(text):
    assert search_r1_sequence(text) == (True, "valid")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("<answer>Paris</answer>", "unexpected tag <answer> in state start"),
        ("<think>a</think> so <answer>x</answer>", "unexpected text 'so' outside tags (state after_think)"),
        # After an <information> block the agent must think again before answering.
        (
            "<think>a</think><search>q</search><information>d</information><answer>x</answer>",
            "unexpected tag <answer> in state information",
        ),
        (
            "<think>a</think><search>q</search>\nMy previous action is invalid.\n",
            "unexpected text 'My previous action is invalid.' outside tags (state after_search)",
        ),
        (
            "<think>a</think><search>q</search><information>d</information>",
            "incomplete sequence, ended in state information",
        ),
        ("<think>a</think><answer>x</answer> extra", "unexpected text 'extra' outside tags (state end)"),
        ("<think>a <think>b</think></think><answer>x</answer>", "unexpected tag <think> in state in_think"),
        ("", "incomplete sequence, ended in state start"),
    ],
)
def test_search_r1_invalid_sequences(text, reason):
    assert search_r1_sequence(text) == (False, reason)


def test_information_blocks():
    assert information_blocks(SR1_SEARCH_THEN_ANSWER) == ["Doc 1 (Title: Paris) Paris is the capital."]
    assert information_blocks("<information> a </information>x<information>b</information>") == ["a", "b"]


# ---------------------------------------------------------------- R1-Searcher
R1_GOOD = (
    "I should look this up. <|begin_of_query|> capital of France <|end_of_query|>\n\n"
    "<|begin_of_documents|>\n(1)Paris is the capital of France.\n(2)Lyon is a city.\n<|end_of_documents|>\n\n"
    "So the answer is Paris. </think>\n\n<answer> Paris </answer>"
)


@pytest.mark.parametrize(
    "text",
    [
        R1_GOOD,
        "<think>" + R1_GOOD,  # the agent opened the think block itself
        "Easy. </think><answer> Paris </answer>",  # no search at all is well formed
        # Documents are corpus text: a role word inside them is not the model's.
        R1_GOOD.replace("Lyon is a city.", "The assistant coach of Lyon."),
        # Whitespace around the rendered tags may differ from the seed's renderer.
        R1_GOOD.replace("<|begin_of_documents|>\n(1)", "<|begin_of_documents|> (1)"),
    ],
)
def test_r1_searcher_well_formed(text):
    assert r1_searcher_format_errors(text) == []


@pytest.mark.parametrize(
    "text, error",
    [
        (
            "<|begin_of_documents|>\n(1)made up\n<|end_of_documents|>\n\n" + R1_GOOD,
            "query/document tags do not pair up: <|begin_of_query|>=1, <|end_of_query|>=1, "
            "<|begin_of_documents|>=2, <|end_of_documents|>=2, numbered document blocks=2",
        ),
        (
            R1_GOOD.replace("(1)Paris", "Paris"),
            "query/document tags do not pair up: <|begin_of_query|>=1, <|end_of_query|>=1, "
            "<|begin_of_documents|>=1, <|end_of_documents|>=1, numbered document blocks=0",
        ),
        ("Assistant: " + R1_GOOD, "the role word 'assistant' appears outside documents"),
        (
            R1_GOOD.replace("</think>", "</think> </think>"),
            "expected one </think> (and at most one <think> before it), got 0 <think> and 2 </think>",
        ),
        (
            R1_GOOD.replace("</think>", ""),
            "expected one </think> (and at most one <think> before it), got 0 <think> and 0 </think>",
        ),
        (
            R1_GOOD.replace("</think>", "</think><think>"),
            "expected one </think> (and at most one <think> before it), got 1 <think> and 1 </think>",
        ),
        (R1_GOOD + "<answer> Lyon </answer>", "expected one <answer> and one </answer>, got 2 and 2"),
        (
            R1_GOOD.replace(" Paris </answer>", " one two three four five six seven eight nine ten eleven </answer>"),
            "the answer has 11 words, more than 10",
        ),
        (R1_GOOD.replace("So the answer", "所以 the answer"), "CJK characters outside documents"),
    ],
)
def test_r1_searcher_format_violations(text, error):
    assert r1_searcher_format_errors(text) == [error]


def test_r1_searcher_answer_with_a_query_tag():
    text = R1_GOOD.replace(" Paris </answer>", " <|begin_of_query|> Paris </answer>")
    assert "the answer contains a query or document tag" in r1_searcher_format_errors(text)


def test_r1_searcher_cjk_inside_documents_is_allowed():
    assert r1_searcher_format_errors(R1_GOOD.replace("Lyon is a city.", "里昂")) == []


def test_r1_searcher_answer_word_limit_is_configurable():
    long = R1_GOOD.replace(" Paris </answer>", " the city of Paris </answer>")
    assert r1_searcher_format_errors(long, max_answer_words=3) == ["the answer has 4 words, more than 3"]


# ---------------------------------------------------------------- R-Search
RS_SEARCH = (
    "I will search. <search> capital of France </search>\n\n<observation>Paris is the capital.</observation>\n\n"
)
RS_EVIDENCE = "<original_evidence> Paris is the capital. </original_evidence>"
RS_ANSWER = "<answer> Paris </answer>"


@pytest.mark.parametrize(
    "text, expected",
    [
        (RS_SEARCH + RS_EVIDENCE + RS_ANSWER, RSearchFormat(True, True, True, "Paris is the capital.")),
        # No search: the evidence must be omitted.
        ("I know it. " + RS_ANSWER, RSearchFormat(True, True, False)),
        ("I know it. " + RS_EVIDENCE + RS_ANSWER, RSearchFormat(True, False, False)),
        # Searched but wrote no evidence.
        (RS_SEARCH + RS_ANSWER, RSearchFormat(True, False, False)),
        # Two evidence blocks: wrong format, the last one is still scored.
        (
            RS_SEARCH + "<original_evidence>x</original_evidence>" + RS_EVIDENCE + RS_ANSWER,
            RSearchFormat(True, False, True, "Paris is the capital."),
        ),
        (RS_SEARCH + "<original_evidence>  </original_evidence>" + RS_ANSWER, RSearchFormat(True, False, False)),
        (RS_SEARCH + RS_EVIDENCE + "<answer> </answer>", RSearchFormat(False, True, True, "Paris is the capital.")),
        (RS_SEARCH + RS_EVIDENCE, RSearchFormat(False, True, True, "Paris is the capital.")),
    ],
)
def test_r_search_format(text, expected):
    assert r_search_format(text) == expected
