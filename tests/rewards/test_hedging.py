"""No credit for hedging (issues 34, 49): an answer that could hold more than one answer earns
no more than an honest wrong answer under every recipe and env, a sentence that states one
answer keeps its credit, ``strict=False`` gives the papers' raw metrics back, and golds that
contain "and" or commas still match."""

import inspect
import re

import pytest

from env_helpers import make_small
from searchgym.agents.driver import answer_scores
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import (
    RECIPES,
    Episode,
    GoldSpanReader,
    Turn,
    cover_exact_match,
    f1_score,
    hedge_reason,
    hedged,
    make_recipe,
    normalize_answer_r1searcher,
)
from searchgym.rewards.hedging import HEDGE_CHECKS, SENTENCE_WORDS, question_options

CANDIDATES = ("Meibreluvia", "Paevaendovo")


# ---------------------------------------------------------------- the rules
@pytest.mark.parametrize(
    "prediction, answers, candidates, reason",
    [
        ("Meibreluvia Paevaendovo", ["Paevaendovo"], CANDIDATES, "it names 2 of the question's candidates"),
        ("Paevaendovo Meibreluvia", ["Paevaendovo"], (), "it adds 1 word of a name that neither the gold answer nor the question has (meibreluvia), room for another answer"),
        ("Lyon, Paris or Nice", ["Paris"], (), "it is a list of 3 items where a gold answer has at most 1"),
        ("Paris and Lyon", ["Paris"], (), "it is a list of 2 items where a gold answer has at most 1"),
        # Two candidates sharing a word: only the candidates rule sees the second one.
        ("Ilvar Odrenko Ilvar Pensk", ["Ilvar Odrenko"], ("Ilvar Odrenko", "Ilvar Pensk"), "it names 2 of the question's candidates"),
        # A surname alias of the gold plus the other candidate.
        ("Odrenko Tomas Pensk", ["Ilvar Odrenko", "Odrenko"], ("Ilvar Odrenko", "Tomas Pensk"), "it names 2 of the question's candidates"),
        ("14 15 March 1872", ["14 March 1872", "March 14, 1872"], (), "it adds '15' beside the gold answer's own number or month, room for another answer"),
        ("14 March April 1872", ["14 March 1872"], (), "it adds 'april' beside the gold answer's own number or month, room for another answer"),
        ("yes no", ["yes"], (), "it names 2 of the question's candidates"),  # yes and no are each other's rival
        # A new word makes its whole name new, the words it shares with the gold or the question too.
        ("Ilvar Odrenko Ilvar Pensk", ["Ilvar Odrenko"], (), "it adds 2 words of a name that neither the gold answer nor the question has (ilvar pensk), room for another answer"),
        # A frame word of the gold's name leaves no room: the name is one word.
        ("University of Zaevrolano Mostokivo", ["University of Zaevrolano", "Zaevrolano"], (),
         "it adds 1 word of a name that neither the gold answer nor the question has (mostokivo), room for another answer"),
        ("Jeff Bezos Elon Musk", ["Jeff Bezos"], (), "it adds 2 words of a name that neither the gold answer nor the question has (elon musk), room for another answer"),
    ],
)
def test_hedges_and_why(prediction, answers, candidates, reason):
    assert hedge_reason(prediction, answers, candidates) == reason
    assert hedged(prediction, answers, candidates)


@pytest.mark.parametrize(
    "prediction, answers, candidates",
    [
        ("Simon and Garfunkel", ["Simon and Garfunkel"], ()),
        ("Simon & Garfunkel", ["Simon and Garfunkel"], ()),
        ("Washington, D.C.", ["Washington, D.C."], ()),
        ("washington dc", ["Washington, D.C."], ()),
        ("March 14, 1872", ["14 March 1872", "March 14, 1872"], ()),
        ("Kelvaro Shipyards Ltd", ["Kelvaro Shipyards"], ()),  # a qualifier shorter than the answer
        ("The Kelvaro Shipyards", ["Kelvaro Shipyards"], ("Kelvaro Shipyards", "Ostrava Mills")),
        ("Paevaendovo", ["Paevaendovo"], CANDIDATES),
        ("Meibreluvia", ["Paevaendovo"], CANDIDATES),  # wrong, not a hedge
        ("Lyon", ["Paris"], ()),
        (None, ["Paris"], ()),
        ("the", ["The"], ()),  # a blank gold is no gold
    ],
)
def test_honest_answers_are_not_hedges(prediction, answers, candidates):
    assert hedge_reason(prediction, answers, candidates) is None
    assert hedge_reason(prediction, answers, candidates, normalize_answer_r1searcher) is None


# ---------------------------------------------------------------- every recipe
def hedging_generator(answer: str):
    """An s3 generator that answers ``answer`` from the searcher's documents and nothing from
    the naive-RAG ones (which do not hold the answer)."""
    return lambda question, docs: answer if any("settled in 1712" in doc for doc in docs) else ""


def recipe(name: str, answer: str | None = None, **options):
    """``name`` with its frozen models: the gold-span reader, or a generator answering ``answer``."""
    cls = RECIPES[name]
    if "reader" in cls.needs:
        options["reader"] = GoldSpanReader()
    if "generator" in cls.needs:
        options["generator"] = hedging_generator(answer or "")
    if name == "r1_searcher_stage1":
        options["answer_score"] = 1.0  # the released Llama server's answer term: the one hedges reach
    return make_recipe(name, **options)


TURN_TEXT = {
    # Each recipe's format checks see the same well-formed exchange for every answer.
    "search_r1": ("<think>x</think><search>q</search>", "<think>x</think><answer>{}</answer>"),
    "r1_searcher": ("x</think><|begin_of_query|>q<|end_of_query|>", "<answer>{}</answer>"),
    "r_search": ("<search>q</search>", "<original_evidence>Paevaendovo was settled in 1712.</original_evidence><answer>{}</answer>"),
    "s3": ("<query>q</query>", "<search_complete>True</search_complete>"),
}


def scored(
    name: str, answer: str, *, answers=("Paevaendovo",), candidates=CANDIDATES,
    question="Which city was settled first, Meibreluvia or Paevaendovo?", **options,
) -> float:
    family = "search_r1" if name.startswith("search_r1") else "r1_searcher" if name.startswith("r1") else "r_search" if name == "r_search" else "s3"
    first, last = TURN_TEXT[family]
    turns = (
        Turn(first, ("search",), ("documents",)),
        Turn(last.format(answer), ("evidence", "answer") if family == "r_search" else ("complete",) if family == "s3" else ("answer",)),
    )
    ep = Episode(
        question, answers, turns,
        answer=None if family == "s3" else answer, retrieved_docs=[["Paevaendovo\nPaevaendovo was settled in 1712."]],
        selected_docs=["Paevaendovo\nPaevaendovo was settled in 1712."], evidence="Paevaendovo was settled in 1712." if family == "r_search" else None,
        naive_rag_docs=["Meibreluvia\nMeibreluvia is a city."], num_searches=1, example_id=f"q-{answer}",
        candidates=candidates, observations=["<observation>(Title: Paevaendovo) Paevaendovo was settled in 1712.</observation>"],
    )
    return recipe(name, answer, **options).score(ep).total


HEDGES = ["Meibreluvia Paevaendovo", "Paevaendovo Meibreluvia", "Meibreluvia or Paevaendovo", "Meibreluvia, Paevaendovo"]


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("hedge", HEDGES)
def test_a_hedge_earns_no_more_than_the_wrong_option_under_every_recipe(name, hedge):
    honest_wrong = scored(name, "Meibreluvia")
    assert scored(name, hedge) <= honest_wrong
    # ...and without the question's candidates (a dataset that does not know them), except
    # a frozen s3 generator's run-on sentence, checked for lists only (it is no strategy).
    if not (name.startswith("s3") and "," not in hedge and " or " not in hedge):
        assert scored(name, hedge, candidates=()) <= scored(name, "Meibreluvia", candidates=())


def test_a_frozen_generators_sentence_is_not_a_hedge_but_its_lists_and_both_options_are():
    # A sentence naming the bridge entity: a second answer for a trained policy, not for a
    # frozen generator (its sentences are no strategy).
    sentence, gold = "Mostokivo College is in Predisk.", ["Predisk"]
    assert hedged(sentence, gold) and not hedged(sentence, gold, check="frozen")
    assert hedged("Predisk or Lyon", gold, check="frozen")
    assert hedged("Predisk Lyon", gold, ["Predisk", "Lyon"], check="frozen")
    assert hedged("Predisk Lyon", gold, question="Which city is larger, Predisk or Lyon?", check="frozen")


def test_an_unknown_check_names_the_known_ones():
    message = "Unknown hedge check 'contained'. Did you mean 'containment'? Expected one of: containment, f1, frozen."
    with pytest.raises(UnknownNameError, match=f"^{re.escape(message)}$"):
        hedged("Paris", ["Paris"], check="contained")
    assert set(HEDGE_CHECKS) == {"containment", "f1", "frozen"}


@pytest.mark.parametrize(
    "question, options",
    [
        ("Which city was settled first, Kribelvor or Fibruvund?", ("Kribelvor", "Fibruvund")),
        ("Which of Skeskaedeth Karzikova and Pradora Thaesessen was born earlier?", ("Skeskaedeth Karzikova", "Pradora Thaesessen")),
        ("Is Drizeikund or Saerdor larger?", ("Drizeikund", "Saerdor")),
        ("What is the capital city of Japan?", ()),
    ],
)
def test_the_options_a_question_offers_are_candidates(question, options):
    assert question_options(question) == options
    if options:
        # No candidates given (a QA file without them): the question's own options count.
        assert hedge_reason(" ".join(options), [options[1]], question=question) == "it names 2 of the question's candidates"
        assert hedge_reason(options[1], [options[1]], question=question) is None


# ---------------------------------------------------------------- sentences against hedges (issue 49)
#: SmolLM2's answers with one dense passage in its prompt in `make demo` (wiki-vital's
#: answerable FanOutQA questions), each stating one answer in a sentence.
HONEST_SENTENCES = [
    ("The capital city of Japan is Tokyo.", ["Tokyo"], "What is the capital city of Japan?"),
    ("LBJ was born in Texas.", ["Texas"], "In which state was Lyndon B. Johnson born?"),
    ("The founding year of Harvard University is 1636.", ["1636"], "What was the founding year of Harvard University?"),
    ("The Yangtze River originates in China.", ["China"], "What country is the Yangtze river originated in?"),
    # More of the same kind: the question restated around the answer, inflected, a relation word.
    ("The Beatles originated in Liverpool.", ["Liverpool"], "What is the origin city of The Beatles?"),
    ("Queen was formed in London.", ["London"], "What is the origin city of Queen?"),
    ("Mount Everest is 8,848.86 m tall.", ["8,848.86 m"], "What is the height of Mount Everest?"),
    ("Amazon was founded by Jeff Bezos.", ["Jeff Bezos"], "Who founded Amazon.com?"),
    ("I think the answer is Tokyo.", ["Tokyo"], "What is the capital city of Japan?"),
]


@pytest.mark.parametrize("sentence, answers, question", HONEST_SENTENCES, ids=[s for s, _, _ in HONEST_SENTENCES])
def test_a_sentence_stating_one_answer_keeps_its_raw_scores(sentence, answers, question):
    scores = answer_scores(sentence, answers, (), question)
    assert scores["cover_em_raw"] == scores["gen_acc_raw"] == 1.0
    for key in ("f1", "cover_em", "gen_acc"):
        assert scores[key] == scores[f"{key}_raw"] > 0, key
    for check in HEDGE_CHECKS:
        for normalizer in (None, normalize_answer_r1searcher):
            options = {} if normalizer is None else {"normalizer": normalizer}
            assert hedge_reason(sentence, answers, question=question, check=check, **options) is None
    # ...and in the recipes that pay for it: R1-Searcher's cover-EM (stage 1 with the answer
    # term) and F1 (stage 2), R-Search's answer F1.
    for name in ("r1_searcher_stage1", "r1_searcher_stage2", "r_search"):
        assert scored(name, sentence, answers=tuple(answers), candidates=(), question=question) == pytest.approx(
            scored(name, sentence, answers=tuple(answers), candidates=(), question=question, strict=False)
        ), name


#: Hedges and pastes on the same questions: each could hold several answers.
JAPAN = "What is the capital city of Japan?"
TOKYO_PASSAGE = (
    "Tokyo, officially the Tokyo Metropolis, is the capital and most populous city of Japan. With a population "
    "of over 14 million in the city proper, it is one of the most populous urban areas. Kyoto was the imperial "
    "capital of Japan for more than a thousand years, and Osaka is its second city."
)
HEDGED_ANSWERS = [
    ("Kyoto Tokyo", ["Tokyo"], JAPAN),
    ("The capital city of Japan is Kyoto Tokyo.", ["Tokyo"], JAPAN),  # the question restated, two guesses
    ("It is Kyoto. It is Osaka. It is Tokyo.", ["Tokyo"], JAPAN),  # a short sentence per candidate
    ("I think it is probably Tokyo but maybe Kyoto.", ["Tokyo"], JAPAN),  # filler words around two
    ("tokyo kyoto osaka nagoya", ["Tokyo"], JAPAN),  # names without separators, lowercased
    ("Texas Ohio", ["Texas"], "In which state was Lyndon B. Johnson born?"),
    ("The founding year of Harvard University is 1636 or 1650.", ["1636"], "What was the founding year of Harvard University?"),
    ("The founding year of Harvard University is 1636 1701", ["1636"], "What was the founding year of Harvard University?"),
    (TOKYO_PASSAGE, ["Tokyo"], JAPAN),  # a pasted document
    # A paste just under the length bound: twelve words beyond the gold, one of them a rival.
    ("capital city of Japan Tokyo metropolis most populous city Japan urban area Kyoto", ["Tokyo"], JAPAN),
]


@pytest.mark.parametrize("prediction, answers, question", HEDGED_ANSWERS, ids=[p[:40] for p, _, _ in HEDGED_ANSWERS])
def test_hedges_and_pasted_documents_score_zero(prediction, answers, question):
    scores = answer_scores(prediction, answers, (), question)
    assert scores["cover_em_raw"] == 1.0  # the papers' metrics pay each of them
    assert scores["f1"] == scores["cover_em"] == scores["gen_acc"] == 0.0
    for name in ("r1_searcher_stage1", "r1_searcher_stage2", "r_search"):
        assert scored(name, prediction, answers=tuple(answers), candidates=(), question=question) <= scored(
            name, "Zqxwv", answers=tuple(answers), candidates=(), question=question
        ), name


def test_text_longer_than_a_sentence_earns_no_containment_credit_whatever_its_words():
    # Only the question's words and the gold, repeated past a sentence: no rival answer in it,
    # but text that long could hold many; F1's precision prices it instead.
    words = "capital city of japan is tokyo " * 5
    assert hedge_reason(words, ["Tokyo"], question=JAPAN) == f"it has 15 words beyond the gold answer, more than a sentence's {SENTENCE_WORDS + 1}"
    assert hedge_reason(words, ["Tokyo"], question=JAPAN, check="f1") is None
    assert answer_scores(words, ["Tokyo"], (), JAPAN)["f1"] == pytest.approx(answer_scores(words, ["Tokyo"], (), JAPAN)["f1_raw"])
    # A sentence within the bound passes; a longer question allows a longer restatement.
    assert hedge_reason("capital city of japan is tokyo " * 2, ["Tokyo"], question=JAPAN) is None


def test_the_gold_repeated_or_padded_with_filler_earns_nothing_more_than_the_gold():
    for padded in ("Tokyo Tokyo Tokyo", "Tokyo, Tokyo", "Well, I believe the final answer is indeed Tokyo."):
        raw, strict = answer_scores(padded, ["Tokyo"], (), JAPAN), answer_scores("Tokyo", ["Tokyo"], (), JAPAN)
        for key in ("f1", "cover_em", "gen_acc"):
            assert raw[key] <= strict[key], (padded, key)


@pytest.mark.parametrize(
    "prediction, answers, question, reason",
    [
        # A clause naming nothing is no list item; parts naming the gold name it once.
        ("The founder of Amazon.com is Jeff Bezos, who founded the company in 1994.", ["Jeff Bezos"], "Who founded Amazon.com?", None),
        ("Franklin D. Roosevelt was born in New York City, New York.", ["New York"], "In which state was Franklin D. Roosevelt born?", None),
        # A part with a name of its own is an item: a qualifier, a rival, a second year.
        ("The origin city of The Beatles is Liverpool, United Kingdom.", ["Liverpool"], "What is the origin city of The Beatles?",
         "it is a list of 2 items where a gold answer has at most 1"),
        ("Jeff Bezos, Musk", ["Jeff Bezos"], "Who founded Amazon.com?", "it is a list of 2 items where a gold answer has at most 1"),
        ("1636 or 1650", ["1636"], "What was the founding year of Harvard University?", "it is a list of 2 items where a gold answer has at most 1"),
        # Lowercase options either side of "or" are the question's candidates.
        ("coffee or tea", ["tea"], "Is coffee or tea older?", "it names 2 of the question's candidates"),
    ],
)
def test_a_list_counts_the_things_its_parts_name(prediction, answers, question, reason):
    assert hedge_reason(prediction, answers, question=question) == reason
    assert hedge_reason(prediction, answers, question=question, check="frozen") == reason


def test_a_rival_sharing_a_word_with_the_question_is_a_new_name():
    # "Athletic" restates the question only where no new word stands beside it.
    question, gold = "Who founded Bonbrethivo Athletic?", ["Nomemora Mondrisovic", "Mondrisovic"]
    assert hedge_reason("Nomemora Mondrisovic Sonmathova Athletic", gold, question=question, check="f1") == (
        "it adds 2 words of a name that neither the gold answer nor the question has (sonmathova athletic), room for another answer"
    )
    assert hedge_reason("Nomemora Mondrisovic founded Bonbrethivo Athletic.", gold, question=question) is None
    assert hedge_reason("It was founded in 1861 by the coach Nomemora Mondrisovic.", gold, question=question) is None


def test_without_the_question_every_word_beyond_the_gold_is_new():
    # A caller that does not pass the question gets the stricter reading: the subject named
    # in the sentence is a word neither the gold nor (an absent) question has.
    assert hedged("The capital city of Japan is Tokyo.", ["Tokyo"])
    assert not hedged("The capital city of Japan is Tokyo.", ["Tokyo"], question=JAPAN)


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("gold", ["Simon and Garfunkel", "Washington, D.C."])
def test_golds_with_and_or_commas_still_score_full_marks(name, gold):
    right = scored(name, gold, answers=(gold,), candidates=())
    assert right > scored(name, "Lyon", answers=(gold,), candidates=())
    if "strict" in inspect.signature(RECIPES[name]).parameters:
        assert right == scored(name, gold, answers=(gold,), candidates=(), strict=False)


def test_strict_false_restores_the_papers_metrics():
    # Both options of a comparison, single-token names: F1 2/3, cover-EM 1 in the papers.
    hedge = "Meibreluvia Paevaendovo"
    assert f1_score(hedge, ["Paevaendovo"], normalize_answer_r1searcher) == pytest.approx(2 / 3)
    assert cover_exact_match(hedge, ["Paevaendovo"]) == 1.0
    # R1-Searcher stage 2: F1 with the format right.
    assert scored("r1_searcher_stage2", hedge, strict=False) == pytest.approx(2 / 3)
    assert scored("r1_searcher_stage2", hedge) == 0.0
    # Stage 1 with the Llama server's answer term: 0.5 + 0.5 + 1 against 0.5 + 0.5 - 1.
    assert scored("r1_searcher_stage1", hedge, strict=False) == pytest.approx(2.0)
    assert scored("r1_searcher_stage1", hedge) == pytest.approx(0.0)
    # R-Search: 0.2 + 0.2 + round(F1, 2) + evidence F1 (the reader finds the gold: 1).
    assert scored("r_search", hedge, strict=False) == pytest.approx(0.4 + 0.67 + 1.0)
    assert scored("r_search", hedge) == pytest.approx(0.4 + 0.0 + 1.0)
    # s3: a generator answering both options passes the span check only when raw.
    assert scored("s3_gen_acc", hedge, strict=False) == 1.0 and scored("s3_gen_acc", hedge) == 0.0


@pytest.mark.parametrize("name", sorted(n for n, cls in RECIPES.items() if "strict" in inspect.signature(cls).parameters))
def test_strict_must_be_a_bool(name):
    message = (
        f"Reward recipe {name!r} expects strict to be True (a hedged answer scores as a wrong one) "
        "or False (the paper's raw metric), got 'no'."
    )
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        recipe(name, strict="no")


# ---------------------------------------------------------------- played in the envs
def play(env, example, answer: str) -> float:
    """Search the question, then answer ``answer``: the episode's total reward."""
    from env_helpers import finish_turn, search_turn

    env.reset(seed=0, options={"example_id": example.id})
    total = 0.0
    _, reward, terminated, truncated, _ = env.step(search_turn(env, example.question))
    total += reward
    if not (terminated or truncated):
        _, reward, terminated, truncated, _ = env.step(finish_turn(env, answer))
        total += reward
    return total


ENVS = [
    ("searchgym/SearchR1-v0", {}),
    ("searchgym/RECON-v0", {}),
    ("searchgym/R1Searcher-v0", {}),
    ("searchgym/R1Searcher-v0", {"reward": "r1_searcher_stage1", "reward_options": {"answer_score": 1.0}}),
    ("searchgym/RSearch-v0", {}),
]


def comparison_questions(env, n: int = 8):
    examples = [e for e in env.unwrapped.examples if e.candidates]
    assert len(examples) >= n, "the small world should hold comparison questions with candidates"
    return examples[:n]


@pytest.mark.parametrize("env_id, options", ENVS, ids=lambda v: v if isinstance(v, str) else v.get("reward", "default"))
def test_hedging_does_not_pay_in_the_envs_on_synthwiki(env_id, options):
    env = make_small(env_id, **options)
    examples = comparison_questions(env)
    wrong = [next(c for c in e.candidates if c not in e.answers) for e in examples]
    honest = sum(play(env, e, w) for e, w in zip(examples, wrong))
    for join in (" ", " or ", ", ", " and "):
        hedge = sum(play(env, e, join.join(e.candidates)) for e in examples)
        assert hedge <= honest, (env_id, options, join, hedge, honest)
    env.close()


def test_the_raw_recipes_pay_the_hedge_in_the_env():
    # The same play with strict=False: the exploit the defense removes is real.
    raw = make_small("searchgym/R1Searcher-v0", reward="r1_searcher_stage1", reward_options={"answer_score": 1.0, "strict": False})
    strict = make_small("searchgym/R1Searcher-v0", reward="r1_searcher_stage1", reward_options={"answer_score": 1.0})
    examples = comparison_questions(raw)
    gain_raw = sum(play(raw, e, " ".join(e.candidates)) - play(raw, e, next(c for c in e.candidates if c not in e.answers)) for e in examples)
    gain_strict = sum(play(strict, e, " ".join(e.candidates)) - play(strict, e, next(c for c in e.candidates if c not in e.answers)) for e in examples)
    assert gain_raw == pytest.approx(2.0 * len(examples))  # +1 instead of -1 on every question
    assert gain_strict == 0.0


def test_answers_stuffed_with_names_from_the_documents_earn_nothing():
    # The adversary searches the question and answers the first ten names of the top-3
    # documents; the honest wrong answer is the first of them alone (a guess).
    from searchgym.agents.driver import answer_scores

    env = make_small("searchgym/SearchR1-v0")
    examples = env.unwrapped.examples[:100]
    stuffed, guess = {}, {}
    for example in examples:
        names: list[str] = []
        for hit in env.unwrapped.retriever.search([example.question], 3)[0]:
            for word in re.findall(r"\b[A-Z][a-z]+\b", f"{hit.passage.title} {hit.passage.text}"):
                if word not in names and word not in ("The", "It", "In", "He", "She", "Its", "His", "Her"):
                    names.append(word)
        for totals, answer in ((stuffed, " ".join(names[:10])), (guess, names[0])):
            for key, value in answer_scores(answer, example.answers, example.candidates).items():
                totals[key] = totals.get(key, 0.0) + value
            totals["stage1"] = totals.get("stage1", 0.0) + scored_answer(example, answer)
    print({k: round(v / len(examples), 3) for k, v in stuffed.items()}, {k: round(v / len(examples), 3) for k, v in guess.items()})
    assert stuffed["cover_em_raw"] > guess["cover_em_raw"]  # the papers' cover-EM pays the stuffing (0.30 against 0.125)
    for key in ("em", "f1", "cover_em", "gen_acc", "stage1"):
        assert stuffed[key] <= guess[key], key
    env.close()


def scored_answer(example, answer: str) -> float:
    """R1-Searcher stage 1 with the answer term, on a well-formed episode answering ``answer``."""
    turns = (Turn("x</think><|begin_of_query|>q<|end_of_query|>", ("search",), ("documents",)), Turn(f"<answer>{answer}</answer>", ("answer",)))
    ep = Episode(example.question, example.answers, turns, answer=answer, num_searches=1, candidates=example.candidates)
    return make_recipe("r1_searcher_stage1", answer_score=1.0).score(ep).total


def test_the_question_restated_around_the_gold_keeps_its_scores_on_synthwiki():
    # Every non-comparison question of the small world answered as a sentence that restates
    # it ("The university attended by Mano Rirdelli located is Predisk."), or that announces
    # the answer: strict scores equal the raw ones. (A comparison answered so names both
    # options, a hedge by rule 1; its gold alone is never one.)
    env = make_small("searchgym/SearchR1-v0")
    examples = env.unwrapped.examples
    for example in examples:
        gold = example.answers[0]
        sentences = [gold] if example.candidates else [f"The {restated(example.question)} is {gold}.", f"The answer is {gold}."]
        for sentence in sentences:
            scores = answer_scores(sentence, example.answers, example.candidates, example.question)
            for key in ("f1", "cover_em", "gen_acc"):
                assert scores[key] == scores[f"{key}_raw"] > 0, (sentence, key)
    assert sum(not e.candidates for e in examples) >= 20
    env.close()


def restated(question: str) -> str:
    """The question's words without its question word and mark."""
    words = question.rstrip(" ?").split()
    while words and words[0].lower() in {"what", "which", "who", "where", "when", "in", "is", "was", "did", "does"}:
        words.pop(0)
    return " ".join(words)
