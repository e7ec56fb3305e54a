"""deepwiki: long articles, BrowseComp-style questions with one answer, files written once."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import searchgym  # noqa: F401 -- registers the envs
from searchgym.corpora import deepwiki
from searchgym.corpora.deepwiki.build import plan_world
from searchgym.corpora.deepwiki.kinds import KINDS, kind_values
from searchgym.corpora.deepwiki.questions import ALL_KINDS, matching_people
from searchgym.corpora.mapped import MappedCorpus
from searchgym.corpora.registry import default_dataset_for, load_corpus, load_dataset
from searchgym.error import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"num_documents": 300}
METADATA_KEYS = {"kind", "hops", "target_id", "evidence_ids", "gold_ids", "negative_ids", "negative_fails", "constraints"}


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        folder = tmp_path_factory.mktemp("deepwiki-cache")
        mp.setenv("SEARCHGYM_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def world():
    return deepwiki.generate(**SMALL)


@pytest.fixture(scope="module")
def texts(world):
    return {p.id: p.text for p in world.corpus}


def _sentence(fact: str) -> re.Pattern:
    """The fact as a whole sentence: not the tail of a longer name ("Stova Drask ...")."""
    return re.compile(r"(?<!\S)" + re.escape(fact) + r"(?!\S)")


def _digest(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in ("corpus.jsonl", "questions.jsonl")}


def test_same_knobs_same_files_in_two_processes(tmp_path):
    code = ("from searchgym.corpora import deepwiki; "
            "print(deepwiki.generate(num_documents=200, words_per_document=1000, seed=7).folder)")
    digests = []
    for k in range(2):
        env = dict(os.environ, SEARCHGYM_CACHE=str(tmp_path / f"cache{k}"), PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.append(_digest(Path(done.stdout.strip())))
    assert digests[0] == digests[1]


def test_generate_reuses_its_files(world):
    stamp = (world.folder / "corpus.jsonl").stat().st_mtime_ns
    again = deepwiki.generate(**SMALL)
    assert again.folder == world.folder and (world.folder / "corpus.jsonl").stat().st_mtime_ns == stamp
    assert [q.id for q in again.all_questions] == [q.id for q in world.all_questions]


def test_corpus_is_memory_mapped_and_named_for_its_world(world):
    assert isinstance(world.corpus, MappedCorpus)
    assert len(world.corpus) == 300
    assert world.corpus.name == f"deepwiki-{world.folder.name}"
    assert default_dataset_for(world.corpus) == "deepwiki"
    assert world.folder.name == "v1-s0-n300-c3-h2-d4-w2000-q20"
    assert world.corpus[0].id == "dw-000000" and world.corpus.get("dw-000299").title


def test_articles_have_a_lead_sections_and_their_length(world, texts):
    for text in texts.values():
        blocks = text.split("\n\n")
        assert not blocks[0].startswith("## ")
        headings = [b for b in blocks if b.startswith("## ")]
        assert len(headings) >= 3 and all("\n" not in h for h in headings)
        assert all(b.strip() == b and b for b in blocks)
        assert 0.75 * 2000 <= len(text.split()) <= 1.25 * 2000


def test_every_fact_is_one_sentence_of_its_document_after_word_600(world, texts):
    everything = "\n\n".join(texts.values())
    checked = 0
    for q in world.all_questions:
        for constraint in q.metadata["constraints"]:
            assert len(constraint["doc_ids"]) == len(constraint["facts"]) == 2
            for doc_id, fact in zip(constraint["doc_ids"], constraint["facts"]):
                pattern = _sentence(fact)
                hits = [m.start() for m in pattern.finditer(texts[doc_id])]
                assert len(hits) == 1, (doc_id, fact)
                assert len(texts[doc_id][: hits[0]].split()) >= 600
                # Nowhere else either (a substring count first: the regex only when needed).
                assert everything.count(fact) == 1 or len(pattern.findall(everything)) == 1, fact
                checked += 1
    assert checked == 20 * 3 * 2


def test_metadata_ids_exist_and_agree(world):
    corpus = world.corpus
    for q in world.all_questions:
        m = q.metadata
        assert set(m) == METADATA_KEYS and m["kind"] == "browse" and m["hops"] == 2
        json.dumps(m)  # plain data
        assert m["gold_ids"] == [m["target_id"]] == m["evidence_ids"][:1]
        assert corpus.get(m["target_id"]).title == q.answers[0] and q.answers == (q.answers[0],)
        paths = [d for c in m["constraints"] for d in c["doc_ids"]]
        assert set(m["evidence_ids"]) == set(paths) and len(set(m["evidence_ids"])) == len(m["evidence_ids"])
        assert all(c["doc_ids"][0] == m["target_id"] for c in m["constraints"])
        assert len(m["negative_ids"]) == len(m["negative_fails"]) == 4
        assert m["target_id"] not in m["negative_ids"]
        for doc_id in m["evidence_ids"] + m["negative_ids"]:
            assert doc_id in corpus
        # Near-namesakes: each negative shares the given name or the surname of the answer.
        given, surname = q.answers[0].split(" ")
        for doc_id in m["negative_ids"]:
            other_given, other_surname = corpus.get(doc_id).title.split(" ")
            assert (other_given == given) != (other_surname == surname)
        assert q.question.startswith("What is the full name of the person who ") and q.question.endswith("?")
        assert all(c["text"] in q.question for c in m["constraints"])


def test_exactly_one_person_meets_every_question_and_each_negative_fails_one(world):
    planned, plans, _, _ = plan_world(world.knobs)
    values = kind_values(planned, list(ALL_KINDS))
    questions = world.all_questions
    assert len(plans) == len(questions) == 20
    for plan, q in zip(plans, questions):
        assert q.metadata["target_id"] == planned.doc("person", plan.answer)
        assert planned.person_name(plan.answer) == q.answers[0]
        assert matching_people(planned, plan.clauses).tolist() == [plan.answer]
        assert matching_people(planned, plan.clauses, values).tolist() == [plan.answer]
        targets = np.array([value for _, value in plan.clauses])
        columns = [ALL_KINDS.index(name) for name, _ in plan.clauses]
        for negative, broken, doc_id, fails in zip(plan.negatives, plan.breaks, q.metadata["negative_ids"],
                                                   q.metadata["negative_fails"]):
            assert planned.doc("person", negative) == doc_id
            failed = np.flatnonzero(values[negative, columns] != targets).tolist()
            assert failed == [broken] and plan.clauses[broken][0] == fails
        # No single constraint identifies the answer: each alone matches the answer and a negative.
        for k, clause in enumerate(plan.clauses):
            alone = set(matching_people(planned, [clause]).tolist())
            assert plan.answer in alone and len(alone) > 1


def test_splits_are_disjoint_and_deterministic(world):
    splits = {split: world.questions(split) for split in deepwiki.SPLITS}
    ids = [q.id for qs in splits.values() for q in qs]
    assert len(ids) == len(set(ids)) == 20
    assert (len(splits["train"]), len(splits["dev"]), len(splits["test"])) == (14, 3, 3)
    assert [q.id for q in load_dataset("deepwiki", split="dev", **SMALL)] == [q.id for q in splits["dev"]]
    with pytest.raises(Exception, match=re.escape("Unknown split 'valid'. Expected one of: dev, test, train.")):
        world.questions("valid")


@pytest.mark.parametrize(
    ("knobs", "check"),
    [
        ({"constraints": 5}, lambda q: len(q.metadata["constraints"]) == 5 and q.question.count(", ") >= 4),
        ({"hops": 1}, lambda q: all(len(c["doc_ids"]) == 1 for c in q.metadata["constraints"])
                                 and q.metadata["evidence_ids"] == [q.metadata["target_id"]]
                                 and all(KINDS[c["kind"]].hops == 1 for c in q.metadata["constraints"])),
        ({"distractors": 1}, lambda q: len(q.metadata["negative_ids"]) == 1),
        ({"distractors": 0}, lambda q: q.metadata["negative_ids"] == []),
        ({"num_questions": 12}, lambda q: True),
    ],
)
def test_knobs_do_what_they_say(knobs, check):
    made = deepwiki.generate(num_documents=200, words_per_document=1000, **knobs)
    questions = made.all_questions
    # One question per ten documents by default, fewer when the world cannot hold them (13 with 4 negatives).
    expected = knobs.get("num_questions", 20 if knobs.get("distractors", 4) < 3 else 13)
    assert made.knobs["num_questions"] == len(questions) == expected and all(check(q) for q in questions)


def test_words_per_document_and_seed_change_the_articles(world, texts):
    longer = deepwiki.generate(num_documents=200, words_per_document=3000)
    words = [len(p.text.split()) for p in longer.corpus]
    assert 0.75 * 3000 <= min(words) and max(words) <= 1.25 * 3000 and np.mean(words) > 2500
    other = deepwiki.generate(num_documents=300, seed=1)
    assert other.corpus[0].text != texts["dw-000000"] and other.corpus.fingerprint != world.corpus.fingerprint


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_documents": 100}, "deepwiki expects num_documents between 200 and 100000, got 100."),
        ({"hops": 3}, "deepwiki expects hops between 1 and 2, got 3."),
        ({"constraints": 7}, "deepwiki expects constraints between 2 and 6, got 7."),
        ({"seed": "0"}, "deepwiki expects seed to be an integer, got '0'."),
        ({"distractors": True}, "deepwiki expects distractors to be an integer, got True."),
        ({"num_questions": 500}, "deepwiki expects num_questions between 10 and 13 for num_documents=200 and distractors=4, got 500."),
        ({"distractors": 10}, "deepwiki expects a world that holds at least 10 questions, got num_documents=200 with "
                              "distractors=10, which holds 4; ask for more documents or fewer distractors."),
        ({"size": 3}, "The corpus 'deepwiki' does not take the option(s) size; expected only seed, num_documents, "
                      "constraints, hops, distractors, words_per_document, num_questions."),
    ],
)
def test_bad_options_are_config_errors(options, message):
    knobs = {"num_documents": 200, **options}
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        load_corpus("deepwiki", **knobs)


def test_generate_refuses_unknown_knobs():
    with pytest.raises(ConfigError, match=re.escape("deepwiki does not take the option(s) size; expected only seed,")):
        deepwiki.resolve_options(size=3)


def test_registry_and_env(world):
    corpus = load_corpus("deepwiki", **SMALL)
    assert isinstance(corpus, MappedCorpus) and corpus.path == world.corpus.path
    env = gym.make("searchgym/SearchR1-v0", corpus="deepwiki", corpus_options=SMALL)
    observation, info = env.reset(seed=0)
    assert "What is the full name of the person who" in observation
    env.close()
