import functools
import hashlib
import json
import os
import re
import string
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import bm25s
import numpy as np
import pytest
import Stemmer
from bm25s.stopwords import STOPWORDS_EN

from searchgym.corpora import synthwiki
from searchgym.corpora.synthwiki import names, phrases
from searchgym.corpora.synthwiki.entities import PRESENT_YEAR
from searchgym.corpora.synthwiki.orgs import ORG_KINDS
from searchgym.corpora.synthwiki.world import build_world
from searchgym.corpora.types import Corpus, QAExample
from searchgym.error import ConfigError, UnknownNameError

GROUPS = {("single", 1), ("bridge", 2), ("bridge", 3), ("comparison", 2)}
METADATA_KEYS = {
    "type", "hops", "kind", "supporting_ids", "oracle_queries", "bridge_answers", "evidence", "answer_passage_id", "hop_facts"
}
# Common English words (plus the stopwords of the BM25 tokenizer) that no invented name may be.
COMMON_WORDS = set(
    """the of and to in is was for on that with as by at from his her he she it an be this are or had
    which not but have were they one their all there been has when who more will would can its no out
    so what up into than them some time only other new could these two may then first any now such
    like over also after most made many before must through back years where much your way well down
    should because each just those people how too little state good very make world still own see men
    work long get here between both life being under never day same another know while last might us
    great old year off come since against go came right used take three states himself few house use
    during without again place american around however home small found thought went say part once
    general high upon school every don does got united left number course war until always away
    something fact though water less public put think almost hand enough far took head yet government
    system better set told nothing night end why called didn find look going asked later point knew city
    next program give group toward young days let room president side social given present several
    order national possible rather second face per among form important often things looked early white
    case john become large big need four within felt along children saw best church ever least power
    development light thing family interest want members mind country area others done turned although
    open god service certain kind problem began different door thus help sense means whole matter
    perhaps itself york times law human line above name example company hands local show whether five
    history gave today either act feet across taken past quite anything seen having death experience
    body word half really field am car words already themselves information tell college shall money
    period held keep sure free real probably seemed political question air office brought whose special
    major heard federal became study ago moment known result street economic boy position reason change
    south board individual job society west close turn love community true court force full seems
    wife future age wanted voice center woman control common necessary following front sometimes policy
    six clear able mother land food father river city town bank market north east capital university
    maria anna paris london rome berlin vienna madrid lisbon moscow prague warsaw oslo bergen delta
    alpha gamma nova terra luna sol mars venus""".split()
) | set(STOPWORDS_EN)

_PUNCT = str.maketrans({**{c: "" for c in string.punctuation}, "–": " "})


def norm(text: str) -> str:
    """Lowercase, delete punctuation, single spaces, padded for whole-word search."""
    return " " + " ".join(text.lower().translate(_PUNCT).split()) + " "


@functools.lru_cache(maxsize=None)
def wiki(seed: int = 0, n: int = 2000) -> synthwiki.SynthWiki:
    return synthwiki.generate(seed, n)


def invented_names(world) -> list[str]:
    """Every invented word of a world: place, river, continent, organisation and person names."""
    words = [c.name for c in world.cities] + [k.name for k in world.countries] + list(world.continents)
    words += [r for k in world.countries for r in k.rivers] + [o.core for o in world.orgs]
    words += [p.given for p in world.people] + [p.surname for p in world.people]
    return words


# ------------------------------------------------------------------------------ API and size


def test_generate_returns_the_requested_corpus_with_stable_ids():
    wiki_ = wiki()
    assert isinstance(wiki_, synthwiki.SynthWiki) and isinstance(wiki_.corpus, Corpus)
    assert (wiki_.seed, wiki_.num_passages) == (0, 2000)
    assert wiki_.corpus.name == "synthwiki-s0-n2000"
    assert [p.id for p in wiki_.corpus] == [f"sw-{i:06d}" for i in range(2000)]


@pytest.mark.parametrize("n", [100, 137, 300, 1001])
def test_size_is_exactly_the_requested_number_of_passages(n):
    assert len(synthwiki.generate(1, n).corpus) == n


def test_invalid_sizes_and_seeds_raise_config_errors():
    message = "synthwiki expects num_passages >= 100 (the smallest complete world), got 99. Ask for at least 100 passages."
    with pytest.raises(ConfigError, match=re.escape(message)):
        synthwiki.generate(0, 99)
    with pytest.raises(ConfigError, match=re.escape("synthwiki expects seed to be a non-negative integer, got -1.")):
        synthwiki.generate(-1, 300)
    with pytest.raises(ConfigError, match=re.escape("synthwiki expects num_passages to be an integer, got 300.0.")):
        synthwiki.generate(0, 300.0)


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = synthwiki.generate(7, 300), synthwiki.generate(7, 300), synthwiki.generate(8, 300)
    assert list(a.corpus) == list(b.corpus)
    assert [(q.id, q.question, q.answers, q.metadata) for q in a.all_questions] == [
        (q.id, q.question, q.answers, q.metadata) for q in b.all_questions
    ]
    assert a.corpus.fingerprint != c.corpus.fingerprint
    assert [q.question for q in a.all_questions] != [q.question for q in c.all_questions]


def _digest(seed: int, n: int) -> str:
    w = synthwiki.generate(seed, n)
    questions = [[q.id, q.question, list(q.answers), dict(q.metadata)] for q in w.all_questions]
    return w.corpus.fingerprint + hashlib.sha256(json.dumps(questions).encode()).hexdigest()


def test_the_world_is_the_same_in_another_process():
    # Another string-hash seed: generation must not depend on hash() of str.
    code = "from tests.corpora.test_synthwiki import _digest; print(_digest(3, 250))"
    env = dict(os.environ, PYTHONHASHSEED="12345")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=root)
    assert out.stdout.strip() == _digest(3, 250)


# ------------------------------------------------------------------------------ passages and names


def test_passages_are_encyclopedic_paragraphs_of_60_to_130_words():
    for p in wiki().corpus:
        words = len(p.text.split())
        assert 60 <= words <= 130, (p.id, words, p.text)
        assert p.text.endswith(".") and p.text[0].isupper()
        assert "{" not in p.text and "  " not in p.text


def test_each_entity_has_one_title_and_its_passages_are_consecutive():
    runs = []
    for p in wiki().corpus:
        if runs and runs[-1][0] == p.title:
            runs[-1][1] += 1
        else:
            runs.append([p.title, 1])
    titles = [t for t, _ in runs]
    assert len(titles) == len(set(titles))
    assert {size for _, size in runs} == {1, 2}


def test_second_passages_name_their_entity_less_often_than_first_passages():
    corpus = wiki().corpus
    for first, second in zip(corpus, corpus[1:]):
        if first.title == second.title:
            assert second.text.count(first.title) == 1, second.text
            key = first.title.split()[-1]  # the surname of a person, the name of a place
            assert first.text.count(key) > second.text.count(key), (first.text, second.text)


def test_names_are_unique_even_after_stemming():
    world = build_world(0, 20_000)
    people = [p.name for p in world.people]
    assert len(people) == len(set(people))
    entities = [c.name for c in world.cities] + [k.name for k in world.countries] + [o.name for o in world.orgs]
    assert len(entities + people) == len(set(entities + people))
    stems = Stemmer.Stemmer("english").stemWords([w.lower() for w in set(invented_names(world))])
    assert len(stems) == len(set(stems))


def test_names_are_not_common_english_words():
    words = {w.lower() for w in invented_names(build_world(0, 20_000))}
    assert all(re.fullmatch(r"[a-z]{4,11}", w) for w in words)
    assert not words & COMMON_WORDS
    assert all(names.could_generate(w) for w in words)


def test_names_avoid_every_real_word_of_the_wiki_vital_vocabulary():
    wikivital = pytest.importorskip("searchgym.corpora.wikivital")
    try:
        corpus = wikivital.load_corpus()
    except ImportError:
        pytest.skip("the wiki-vital data package is not installed")
    vocabulary = set()
    for p in corpus:
        vocabulary.update(re.findall(r"[a-z]+", f"{p.title} {p.text}".lower()))
    missing = sorted(w for w in vocabulary if names.could_generate(w) and w not in names.BLOCKED)
    assert not missing, f"add these words to synthwiki/_blocklist.py: {' '.join(missing)}"
    assert not {w.lower() for w in invented_names(build_world(1, 20_000))} & vocabulary


def test_name_forge_refuses_an_unknown_kind():
    forge = names.NameForge(np.random.default_rng(0))
    kinds = "['continent', 'core', 'given_female', 'given_male', 'place', 'river', 'surname']"
    with pytest.raises(ConfigError, match=re.escape(f"NameForge.take expects kind in {kinds}, got 'moon'.")):
        forge.take(1, "moon")


def test_filler_sentences_avoid_the_words_of_oracle_queries():
    stemmer = Stemmer.Stemmer("english")
    fillers = list(phrases.CHILDHOOD) + list(phrases.LEGACY) + list(phrases.LATER_LIFE) + list(phrases.CAREER_OPENERS)
    fillers += [s for group in phrases.WORK.values() for s in group]
    for opener, rest in phrases.HISTORY.values():
        fillers += [opener, *rest]
    for name in dir(phrases):
        if name.endswith(("_FILLERS", "_HISTORY")):
            fillers += list(getattr(phrases, name))
    assert len(fillers) > 80
    for sentence in fillers:
        words = re.findall(r"[a-z]+", re.sub(r"\{\w+\}", " ", sentence).lower())
        assert not set(stemmer.stemWords(words)) & phrases.QUERY_STEMS, sentence


def test_the_world_is_consistent():
    world = build_world(2, 5000)
    for org in world.orgs:
        founder = world.people[org.founder]
        _, youngest, _, earliest = ORG_KINDS[org.kind]
        assert org.founded >= max(earliest, founder.birth[0] + youngest)
        assert org.founded <= (founder.death[0] if founder.death else PRESENT_YEAR)
        assert org.name.count(org.core) == 1
    for p in world.people:
        assert p.death is None or p.death > p.birth
        if p.university is not None:
            assert world.orgs[p.university].kind == "university"
            assert world.orgs[p.university].founded <= p.birth[0] + 18 < p.graduated
    assert sorted(k.capital for k in world.countries) == list(range(len(world.countries)))
    for c, country in enumerate(world.countries):
        leader = world.people[country.leader]
        assert leader.leads == c
        assert leader.birth[0] + 30 <= country.independence <= (leader.death[0] if leader.death else PRESENT_YEAR)
        largest = max(city.population for city in world.cities if city.country == c)
        assert world.cities[country.capital].population == largest
        assert sum(city.population == largest for city in world.cities if city.country == c) == 1


# ------------------------------------------------------------------------------ questions


def test_questions_have_the_documented_metadata():
    questions = wiki().all_questions
    assert len(questions) == 2000
    assert len({q.id for q in questions}) == len(questions) == len({q.question for q in questions})
    corpus = wiki().corpus
    for q in questions:
        assert isinstance(q, QAExample) and re.fullmatch(r"swq-\d{5}", q.id)
        meta = q.metadata
        assert set(meta) == METADATA_KEYS
        json.dumps(meta)
        assert (meta["type"], meta["hops"]) in GROUPS
        hops = meta["hops"]
        assert len(meta["supporting_ids"]) == len(meta["oracle_queries"]) == len(meta["evidence"]) == hops
        assert all(pid in corpus for pid in meta["supporting_ids"])
        assert len(meta["bridge_answers"]) == {"single": 0, "bridge": hops - 1, "comparison": 2}[meta["type"]]
        if meta["type"] != "comparison":
            assert meta["answer_passage_id"] == meta["supporting_ids"][-1]
        else:
            assert meta["answer_passage_id"] in meta["supporting_ids"]
        assert all(isinstance(a, str) and a for a in q.answers) and len(set(q.answers)) == len(q.answers)


def test_every_type_and_kind_is_present():
    kinds = Counter(q.metadata["kind"] for q in wiki().all_questions)
    assert len(kinds) == 35
    assert {(q.metadata["type"], q.metadata["hops"]) for q in wiki().all_questions} == GROUPS


def test_answers_occur_in_the_answer_passage():
    corpus = wiki().corpus
    for q in wiki().all_questions:
        text = norm(corpus.get(q.metadata["answer_passage_id"]).text)
        canonical, *aliases = q.answers
        assert norm(canonical) in text, (q.question, canonical)
        for alias in aliases:
            month_first = re.fullmatch(r"([A-Z][a-z]+) (\d+), (\d+)", alias)
            if month_first:  # the US form of the canonical date
                assert canonical == f"{month_first[2]} {month_first[1]} {month_first[3]}"
            else:
                assert norm(alias) in text and norm(alias) in norm(canonical)


def test_evidence_sentences_are_verbatim_and_chain_the_hops():
    corpus = wiki().corpus
    for q in wiki().all_questions:
        meta = q.metadata
        for pid, sentence, query in zip(meta["supporting_ids"], meta["evidence"], meta["oracle_queries"]):
            passage = corpus.get(pid)
            assert sentence in passage.text
            assert query.startswith(passage.title + " ")
            assert query.split()[-1].lower() in sentence.lower()
        if meta["type"] == "bridge":
            for k, bridge in enumerate(meta["bridge_answers"]):
                assert bridge in meta["evidence"][k]
                assert meta["oracle_queries"][k + 1].startswith(bridge + " ")
        if meta["type"] != "comparison":
            assert norm(q.answers[0]) in norm(meta["evidence"][-1])


def test_questions_name_neither_the_answer_nor_the_bridge_entities():
    for q in wiki().all_questions:
        question = norm(q.question)
        hidden = list(q.metadata["bridge_answers"])
        if q.metadata["type"] != "comparison":
            hidden += list(q.answers)
        assert not any(norm(h) in question for h in hidden), q
        assert norm(q.metadata["oracle_queries"][0].rsplit(" ", 1)[0]) in question


def test_comparisons_are_decided_by_different_values():
    for q in wiki().all_questions:
        if q.metadata["type"] == "comparison":
            first, second = q.metadata["bridge_answers"]
            assert first != second
            titles = [wiki().corpus.get(pid).title for pid in q.metadata["supporting_ids"]]
            assert q.answers[0] in titles and titles[0] != titles[1]
            assert all(norm(t) in norm(q.question) for t in titles)


def test_person_aliases_are_unambiguous_surnames():
    world = build_world(0, 2000)
    surnames = Counter(p.surname for p in world.people)
    for q in wiki().all_questions:
        if len(q.answers) == 2 and " " in q.answers[0] and q.answers[1] == q.answers[0].split()[-1]:
            if q.answers[0] in {p.name for p in world.people}:
                assert surnames[q.answers[1]] == 1


def test_splits_are_disjoint_and_hold_every_type():
    wiki_ = synthwiki.generate(4, 300)
    splits = {s: wiki_.questions(s) for s in ("train", "dev", "test")}
    ids = {s: {q.id for q in qs} for s, qs in splits.items()}
    assert not ids["train"] & ids["dev"] and not ids["train"] & ids["test"] and not ids["dev"] & ids["test"]
    assert ids["train"] | ids["dev"] | ids["test"] == {q.id for q in wiki_.all_questions}
    assert len(wiki_.all_questions) == 400
    assert abs(len(ids["train"]) / 400 - 0.8) < 0.02 and abs(len(ids["dev"]) / 400 - 0.1) < 0.02
    for split, questions in splits.items():
        groups = Counter((q.metadata["type"], q.metadata["hops"]) for q in questions)
        assert set(groups) == GROUPS and min(groups.values()) >= 3, (split, groups)
    assert wiki_.questions("dev") is not wiki_.questions("dev")


def test_unknown_split_is_an_unknown_name_error():
    with pytest.raises(UnknownNameError, match=re.escape("Unknown split 'valid'. Expected one of: dev, test, train.")):
        wiki().questions("valid")


def test_oracle_queries_rank_their_passage_first_with_bm25():
    wiki_ = wiki()
    corpus = wiki_.corpus
    retriever = bm25s.BM25()
    texts = [f"{p.title} {p.text}" for p in corpus]
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    queries, gold = [], []
    for q in wiki_.all_questions:
        queries += q.metadata["oracle_queries"]
        gold += [corpus.index_of(pid) for pid in q.metadata["supporting_ids"]]
    tokens = bm25s.tokenize(queries, stopwords="en", return_ids=False, show_progress=False)
    results, _ = retriever.retrieve(tokens, k=3, show_progress=False)
    first = np.mean([row[0] == g for row, g in zip(results, gold)])
    top3 = np.mean([g in row for row, g in zip(results, gold)])
    assert first >= 0.98 and top3 == 1.0, (first, top3)


@pytest.mark.slow
def test_a_large_world_is_fast_and_caps_its_questions():
    start = time.perf_counter()
    wiki_ = synthwiki.generate(0, 200_000)
    elapsed = time.perf_counter() - start
    assert len(wiki_.corpus) == 200_000 and wiki_.corpus[-1].id == "sw-199999"
    assert len(wiki_.all_questions) == synthwiki.MAX_QUESTIONS
    assert elapsed < 60, elapsed
