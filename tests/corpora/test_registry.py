import json
import re
import sys
import types
from pathlib import Path

import pytest

import searchgym.corpora
from searchgym.corpora import registry, wikivital
from searchgym.corpora.registry import CORPORA, DATASETS, default_dataset_for, load_corpus, load_dataset
from searchgym.corpora.store import write_passages
from searchgym.corpora.types import Corpus, Passage, QAExample
from searchgym.error import ConfigError, UnknownNameError


def test_names():
    assert CORPORA == ("wiki-vital", "synthwiki", "deepwiki")
    assert DATASETS == ("wiki-vital", "wiki-vital-answerable", "synthwiki", "deepwiki")
    assert default_dataset_for("wiki-vital") == "wiki-vital-answerable"
    assert default_dataset_for("synthwiki") == "synthwiki"
    assert default_dataset_for(wikivital.load_corpus()) == "wiki-vital-answerable"
    with pytest.raises(UnknownNameError, match=re.escape("Unknown built-in corpus 'custom'. Expected one of: deepwiki, synthwiki, wiki-vital.")):
        default_dataset_for(Corpus([], name="custom"))


def test_built_in_wiki_vital():
    assert load_corpus("wiki-vital") is wikivital.load_corpus()
    assert len(load_dataset("wiki-vital")) == 517
    assert load_dataset("wiki-vital", split="all") == load_dataset("wiki-vital", split="dev")
    answerable = load_dataset("wiki-vital-answerable")
    assert len(answerable) == 79
    assert {q.id for q in answerable} <= {q.id for q in load_dataset("wiki-vital")}


def test_unknown_names_suggest_the_closest():
    message = "Unknown corpus 'wiki-vitl'. Did you mean 'wiki-vital'? Expected one of: deepwiki, synthwiki, wiki-vital."
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        load_corpus("wiki-vitl")
    message = (
        "Unknown dataset 'wiki-vital-answerabel'. Did you mean 'wiki-vital-answerable'? "
        "Expected one of: deepwiki, synthwiki, wiki-vital, wiki-vital-answerable."
    )
    with pytest.raises(UnknownNameError, match=re.escape(message)):
        load_dataset("wiki-vital-answerabel")


def test_unknown_split_and_options():
    with pytest.raises(UnknownNameError, match=re.escape("Unknown wiki-vital split 'test'. Expected one of: all, dev.")):
        load_dataset("wiki-vital", split="test")
    with pytest.raises(UnknownNameError, match=re.escape("Unknown synthwiki split 'valid'. Expected one of: dev, test, train.")):
        load_dataset("synthwiki", split="valid")
    with pytest.raises(ConfigError, match=re.escape("The corpus 'wiki-vital' does not take the option(s) seed; expected no options.")):
        load_corpus("wiki-vital", seed=1)
    message = "The dataset 'synthwiki' does not take the option(s) size; expected only seed, num_passages."
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_dataset("synthwiki", size=10)
    with pytest.raises(ConfigError, match=re.escape("synthwiki expects seed to be an integer, got '1'.")):
        load_corpus("synthwiki", seed="1")


def test_paths_are_read_and_missing_paths_are_named(tmp_path, monkeypatch):
    passages = [Passage("0", "A", "alpha"), Passage("1", "B", "beta")]
    path = write_passages(passages, tmp_path / "corpus.jsonl.gz")
    assert list(load_corpus(path)) == passages
    assert load_corpus(str(path), name="mine").name == "mine"
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"id": "q", "question": "Q?", "golden_answers": ["alpha"]}) + "\n", encoding="utf-8")
    assert load_dataset(qa) == [QAExample("q", "Q?", ("alpha",))]
    # A bare file name in the working directory is a path too.
    monkeypatch.chdir(tmp_path)
    assert load_dataset("qa.jsonl")[0].id == "q"
    for missing in (tmp_path / "nope.jsonl", "data/nope", "nope.jsonl.gz", Path("nope")):
        with pytest.raises(FileNotFoundError, match=re.escape(f"No such passage file: {str(missing)!r}")):
            load_corpus(missing)
    with pytest.raises(FileNotFoundError, match=re.escape("No such QA dataset file: 'x/qa.jsonl'")):
        load_dataset("x/qa.jsonl")
    with pytest.raises(ConfigError, match=re.escape(f"The QA file {str(qa)!r} does not take the option(s) seed")):
        load_dataset(qa, seed=0)


def test_objects_pass_through():
    corpus = Corpus([Passage("0", "A", "alpha")], name="tiny")
    assert load_corpus(corpus) is corpus
    examples = [QAExample("q", "Q?", ("a",))]
    loaded = load_dataset(examples)
    assert loaded == examples and loaded is not examples
    assert load_dataset(tuple(examples)) == examples
    with pytest.raises(ConfigError, match=re.escape("load_dataset expects a list of QAExample, got one containing dict.")):
        load_dataset([{"question": "Q?"}])
    with pytest.raises(ConfigError, match=re.escape("load_corpus expects a corpus name, a path or a Corpus, got int.")):
        load_corpus(3)


@pytest.fixture
def fake_synthwiki(monkeypatch):
    """A stand-in generator that records its calls, to test routing and sharing of worlds."""
    calls = []

    def generate(seed=0, num_passages=1000):
        calls.append((seed, num_passages))
        corpus = Corpus([Passage(f"s{seed}-{i}", "T", "x") for i in range(num_passages)], name="synthwiki")
        return types.SimpleNamespace(
            corpus=corpus, questions=lambda split: [QAExample(f"{split}-{seed}", "Q?", ("x",))]
        )

    module = types.ModuleType("searchgym.corpora.synthwiki")
    module.generate = generate
    monkeypatch.setitem(sys.modules, "searchgym.corpora.synthwiki", module)
    monkeypatch.setattr(searchgym.corpora, "synthwiki", module, raising=False)
    registry._generate_synthwiki.cache_clear()
    yield calls
    registry._generate_synthwiki.cache_clear()


def test_synthwiki_corpus_and_dataset_share_one_world_per_seed_and_size(fake_synthwiki):
    corpus = load_corpus("synthwiki", seed=3, num_passages=5)
    assert len(corpus) == 5 and corpus[0].id == "s3-0"
    assert load_dataset("synthwiki", split="test", seed=3, num_passages=5)[0].id == "test-3"
    assert load_corpus("synthwiki", num_passages=5, seed=3) is corpus
    assert load_corpus("synthwiki") is load_corpus("synthwiki", seed=0, num_passages=1000)
    assert fake_synthwiki == [(3, 5), (0, 1000)]
    assert load_dataset("synthwiki")[0].id == "dev-0"


def test_real_synthwiki_when_available():
    pytest.importorskip("searchgym.corpora.synthwiki")
    registry._generate_synthwiki.cache_clear()
    corpus = load_corpus("synthwiki", seed=1, num_passages=200)
    assert len(corpus) == 200
    questions = load_dataset("synthwiki", split="dev", seed=1, num_passages=200)
    assert questions and all(isinstance(q, QAExample) for q in questions)
    assert load_corpus("synthwiki", seed=1, num_passages=200) is corpus
    assert default_dataset_for(corpus) == "synthwiki"
