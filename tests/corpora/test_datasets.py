import json
import re

import pytest

from searchgym.corpora.datasets import QA_LINE_FORMAT, read_qa, write_qa
from searchgym.corpora.types import QAExample
from searchgym.error import DataFormatError


def write_lines(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def test_reads_list_and_string_answers_and_keeps_other_keys_as_metadata(tmp_path):
    path = write_lines(
        tmp_path / "nq.jsonl",
        [
            {"id": "test_0", "question": "Who wrote Emma?", "golden_answers": ["Jane Austen", "Austen"], "metadata": {"src": "nq"}},
            "",
            {"id": 5, "question": "How many legs?", "golden_answers": "four", "choices": ["three", "four"]},
            {"question": "Year?", "golden_answers": [1999]},
        ],
    )
    examples = read_qa(path)
    assert examples == [
        QAExample("test_0", "Who wrote Emma?", ("Jane Austen", "Austen")),
        QAExample("5", "How many legs?", ("four",)),
        QAExample("line-4", "Year?", ("1999",)),
    ]
    assert [dict(e.metadata) for e in examples] == [{"src": "nq"}, {"choices": ["three", "four"]}, {}]


@pytest.mark.parametrize("name", ["qa.jsonl", "qa.jsonl.gz"])
def test_write_then_read_round_trips_with_metadata(tmp_path, name):
    examples = [
        QAExample("a", "Q1?", ("x", "y"), {"hops": 2, "ids": ["p1", "p2"]}),
        QAExample("b", "Q2 ünï?", ("z",), {"metadata": "nested name"}),
    ]
    back = read_qa(write_qa(examples, tmp_path / name))
    assert back == examples
    assert [dict(e.metadata) for e in back] == [dict(e.metadata) for e in examples]


@pytest.mark.parametrize(
    ("record", "got"),
    [
        ({"id": "1", "question": "Q?"}, "an object with keys ['id', 'question'] (no 'golden_answers')"),
        ({"id": "1", "answer": "x"}, "an object with keys ['id', 'answer'] (no 'question', 'golden_answers')"),
        ({"question": "", "golden_answers": ["x"]}, "'question' = str \"\""),
        ({"question": "Q?", "golden_answers": []}, "'golden_answers' = list []"),
        ({"question": "Q?", "golden_answers": {"a": 1}}, "'golden_answers' = an object with keys ['a']"),
        ({"question": "Q?", "golden_answers": ["x", None]}, "'golden_answers' containing NoneType null"),
        ({"id": 1.5, "question": "Q?", "golden_answers": ["x"]}, "'id' = float 1.5"),
        ("[1, 2]", "list [1, 2]"),
    ],
)
def test_malformed_lines_name_file_line_expected_and_got(tmp_path, record, got):
    path = write_lines(tmp_path / "bad.jsonl", [{"question": "ok?", "golden_answers": "fine"}, record])
    with pytest.raises(DataFormatError, match=re.escape(f"{path}, line 2: expected {QA_LINE_FORMAT}, got {got}.")):
        read_qa(path)


def test_invalid_json(tmp_path):
    path = write_lines(tmp_path / "bad.jsonl", ['{"question": "Q?", golden_answers: 1}'])
    message = (
        f"{path}, line 1: expected {QA_LINE_FORMAT}, got invalid JSON "
        "(Expecting property name enclosed in double quotes at column 20): '{\"question\": \"Q?\", golden_answers: 1}'."
    )
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_qa(path)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write_lines(
        tmp_path / "dup.jsonl",
        [{"id": "q", "question": "A?", "golden_answers": "x"}, {"id": "q", "question": "B?", "golden_answers": "y"}],
    )
    message = f"{path}, line 2: expected unique example ids, got id 'q' again (first on line 1); rename or drop one."
    with pytest.raises(DataFormatError, match=re.escape(message)):
        read_qa(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=re.escape(f"No such QA dataset file: {str(tmp_path / 'x.jsonl')!r}")):
        read_qa(tmp_path / "x.jsonl")


@pytest.mark.parametrize("golds", [["The"], "An", ["?"], ["The", "a.n", "..."]])
def test_golds_that_all_normalize_to_nothing_are_refused_with_file_and_line(tmp_path, golds):
    path = write_lines(
        tmp_path / "blank.jsonl",
        [{"question": "Fine?", "golden_answers": ["yes"]}, {"question": "Which?", "golden_answers": golds}],
    )
    with pytest.raises(DataFormatError) as raised:
        read_qa(path)
    assert str(raised.value).startswith(
        f"{path}, line 2: expected 'golden_answers' with at least one answer that keeps a word after normalization "
        "(lowercased, punctuation and the articles a/an/the removed), got 'golden_answers' = "
    )
    assert str(raised.value).endswith(", which every metric would match to an empty answer; fix or drop this example.")
    assert raised.value.line == 2 and raised.value.path == str(path)


def test_one_real_gold_beside_blank_ones_loads_and_the_blank_one_scores_nothing(tmp_path):
    from searchgym.rewards import cover_exact_match, exact_match, f1_score, span_check, sub_exact_match

    path = write_lines(tmp_path / "ok.jsonl", [{"question": "Which?", "golden_answers": ["The", "Paris"]}])
    (example,) = read_qa(path)
    assert example.answers == ("The", "Paris")
    for metric in (exact_match, f1_score, cover_exact_match, sub_exact_match, span_check):
        assert metric("the", example.answers) == 0.0, metric.__name__
        assert metric("Paris", example.answers) == 1.0, metric.__name__


def test_candidates_round_trip_and_are_optional(tmp_path):
    examples = [
        QAExample("c", "Which was settled first, Meibreluvia or Paevaendovo?", ("Paevaendovo",), {"type": "comparison"}, ("Meibreluvia", "Paevaendovo")),
        QAExample("s", "Who founded Kelvaro?", ("Ilvar Odrenko",)),
    ]
    path = write_qa(examples, tmp_path / "qa.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["candidates"] == ["Meibreluvia", "Paevaendovo"] and "candidates" not in lines[1]
    back = read_qa(path)
    assert back == examples and back[0].candidates == ("Meibreluvia", "Paevaendovo") and back[1].candidates == ()
    assert "candidates" not in back[0].metadata


@pytest.mark.parametrize("value", ["Meibreluvia", ["Meibreluvia", 3], {"a": 1}])
def test_malformed_candidates_are_refused(tmp_path, value):
    path = write_lines(tmp_path / "bad.jsonl", [{"question": "Which?", "golden_answers": ["x"], "candidates": value}])
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}, line 1: expected {re.escape(QA_LINE_FORMAT)}, got 'candidates' = "):
        read_qa(path)


def test_synthwiki_comparisons_carry_their_candidates(tmp_path):
    from searchgym.corpora import synthwiki

    world = synthwiki.generate(7, 400)
    questions = world.all_questions
    comparisons = [q for q in questions if q.metadata["type"] == "comparison"]
    assert comparisons and all(len(q.candidates) == 2 and q.answers[0] in q.candidates for q in comparisons)
    assert all(q.candidates == () for q in questions if q.metadata["type"] != "comparison")
    assert read_qa(write_qa(comparisons, tmp_path / "cmp.jsonl")) == comparisons
