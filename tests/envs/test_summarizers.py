import pytest

from searchgym.corpora.types import Hit, Passage
from searchgym.envs.components.summarizers import (
    ExtractiveSummarizer,
    IdentitySummarizer,
    make_summarizer,
    split_sentences,
)
from searchgym.error import ConfigError, UnknownNameError

TEXT = (
    "Kelvaro Industries is a shipbuilder. It was founded in 1872 by Ilvar Odrenko. "
    "The company employs 4,000 people. Its headquarters are in Marrowdale."
)
HITS = [Hit(Passage("p1", "Kelvaro Industries", TEXT), 3.0), Hit(Passage("p2", "Marrowdale", "Marrowdale is a city. It lies on the coast."), 1.0)]


def test_split_sentences_keeps_numbers_with_commas_together():
    assert split_sentences(TEXT) == [
        "Kelvaro Industries is a shipbuilder.",
        "It was founded in 1872 by Ilvar Odrenko.",
        "The company employs 4,000 people.",
        "Its headquarters are in Marrowdale.",
    ]


def test_extractive_keeps_the_query_sentences_in_original_order():
    out = ExtractiveSummarizer(sentences_per_doc=1).summarize(
        "Who founded Kelvaro Industries?", "Kelvaro Industries founded by", HITS
    )
    # p1: the founding sentence shares "founded"; p2 has no match and keeps its first sentence.
    assert out == (
        "Doc 1(Title: Kelvaro Industries) It was founded in 1872 by Ilvar Odrenko.\n"
        "Doc 2(Title: Marrowdale) Marrowdale is a city."
    )


def test_extractive_is_shorter_than_the_documents():
    out = ExtractiveSummarizer(sentences_per_doc=2).summarize("Where is Kelvaro based?", "Kelvaro headquarters", HITS)
    assert "headquarters are in Marrowdale" in out
    assert len(out) < len(IdentitySummarizer().summarize("q", "q", HITS))


def test_identity_is_passthrough():
    assert make_summarizer(None).passthrough and make_summarizer("identity").passthrough


def test_bad_names_and_options():
    with pytest.raises(UnknownNameError, match=r"^Unknown summarizer 'extractiv'\. Did you mean 'extractive'\? Expected one of: extractive, identity, llm\.$"):
        make_summarizer("extractiv")
    with pytest.raises(ConfigError, match=r"^ExtractiveSummarizer expects sentences_per_doc to be a positive integer, got 0\.$"):
        ExtractiveSummarizer(sentences_per_doc=0)
