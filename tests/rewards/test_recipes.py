import re

import pytest

from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import (
    RECIPES,
    Episode,
    GoldSpanReader,
    R1SearcherStage1,
    R1SearcherStage2,
    RewardRecipe,
    RewardResult,
    RSearchReward,
    S3GainBeyondRAG,
    S3GenAcc,
    SearchR1EM,
    SearchR1Format,
    Turn,
    call_frozen,
    make_recipe,
)

GOLD = ("Paris",)
QUESTION = "What is the capital of France?"


def whole(message: str) -> str:
    """A pattern that matches exactly ``message``."""
    return "^" + re.escape(message) + "$"


def T(text: str, *observation: str, actions: tuple[str, ...] = ()) -> Turn:
    """An agent turn and the kinds of what the environment answered."""
    return Turn(text, actions, observation)


#: One well-formed turn (s3's search complete): the episode acted.
ACTED = (T("<search_complete>True</search_complete>", actions=("complete",)),)
#: One tag-free turn: the episode did not act.
IDLE = (T("I don't know.", actions=("invalid",)),)


def episode(**kw) -> Episode:
    kw.setdefault("question", QUESTION)
    kw.setdefault("answers", GOLD)
    kw.setdefault("turns", ACTED)
    return Episode(**kw)


# ---------------------------------------------------------------- data
def test_episode_wraps_a_bare_answer_string():
    assert Episode("q", "Paris").answers == ("Paris",)
    assert Episode("q", ["Paris", "City of Light"]).answers == ("Paris", "City of Light")


def test_episode_refuses_turns_that_are_not_turn_records():
    with pytest.raises(ConfigError, match="^Episode expects turns to be Turn records"):
        Episode("q", "Paris", turns=[("<answer> Paris </answer>", "")])


def test_episode_acted_and_agent_text():
    assert episode(turns=IDLE).acted is False
    assert episode(turns=()).acted is False
    assert episode(turns=(*IDLE, *ACTED)).acted is True
    assert episode(turns=(T("a", "feedback"), T("b"))).agent_text == "ab"


def test_reward_result_is_frozen():
    result = RewardResult(1.0, {"em": 1.0})
    with pytest.raises(AttributeError):
        result.total = 0.0


# ---------------------------------------------------------------- frozen models
def test_gold_span_reader_returns_the_first_gold_answer_found():
    reader = GoldSpanReader()
    assert reader.uses_gold is True
    answers = ("Lyon", "Paris")
    assert reader("q", "Paris is the capital.", answers=answers) == "Paris"
    assert reader("q", ["Nice is warm.", "Lyon and Paris."], answers=answers) == "Lyon"
    assert reader("q", ["Nice is warm."], answers=answers) == ""
    # Each document is searched on its own: no match across a document boundary.
    assert reader("q", ["... New", "York ..."], answers=("New York",)) == ""
    # Whole words only: a gold answer inside a longer word is not in the context.
    assert reader("q", "It is not known.", answers=("no",)) == ""
    assert reader("q", "A Democratic senator.", answers=("Democrat",)) == ""
    assert reader("q", "No, it is not.", answers=("no",)) == "no"


def test_call_frozen_passes_gold_answers_only_to_gold_readers():
    assert call_frozen(lambda q, ctx: f"{q}|{ctx}", "q", "c", answers=GOLD) == "q|c"
    assert call_frozen(GoldSpanReader(), "q", "in Paris", answers=GOLD) == "Paris"


# ---------------------------------------------------------------- Search-R1
def test_search_r1_em():
    recipe = SearchR1EM()
    assert recipe.score(episode(answer="the paris.")) == RewardResult(1.0, {"em": 1.0})
    assert recipe.score(episode(answer="Lyon")) == RewardResult(0.0, {"em": 0.0})
    assert recipe.score(episode(answer=None)) == RewardResult(0.0, {"em": 0.0})


def test_search_r1_em_format_score_goes_to_wrong_answers_only():
    recipe = SearchR1EM(format_score=0.1)
    assert recipe.score(episode(answer="Lyon")).total == 0.1
    assert recipe.score(episode(answer=None)).total == 0.0


def sr1(doc: str, answer: str, *, think_before_answer: bool = True) -> dict:
    """Episode fields of a Search-R1 episode: one search that retrieved ``doc``, then an answer turn."""
    think = "<think>Found it.</think>\n" if think_before_answer else ""
    turns = (
        T("<think>I need the capital.</think>\n<search> capital of France </search>", "documents", actions=("search",)),
        T(f"{think}<answer>{answer}</answer>", actions=("answer",)),
    )
    return {"turns": turns, "retrieved_docs": [[doc]]}


HIT = "Paris\nParis is the capital of France."
MISS = "Lyon\nLyon is a city in France."

# Search-R1 v0.3 table with s = 0.2, f = 0.1 and r = 0.1 (so that s + r differs from s).
# One row per (answer, valid, retrieval) case of qa_em_format.compute_score_em.
SR1_TABLE = {
    "no answer, valid, retrieval hit -> s + r": (sr1(HIT, ""), None, 0.3),
    "no answer, valid, no hit -> s": (sr1(MISS, ""), None, 0.2),
    "no answer, invalid -> 0": (sr1(HIT, "", think_before_answer=False), None, 0.0),
    "correct, valid -> score": (sr1(HIT, " Paris "), "Paris", 1.0),
    "correct, invalid -> score - s": (sr1(HIT, " Paris ", think_before_answer=False), "Paris", 0.8),
    "wrong, valid, retrieval hit -> s + r": (sr1(HIT, " Lyon "), "Lyon", 0.3),
    "wrong, valid, no hit -> s": (sr1(MISS, " Lyon "), "Lyon", 0.2),
    "wrong, invalid -> f": (sr1(HIT, " Lyon ", think_before_answer=False), "Lyon", 0.1),
}


@pytest.mark.parametrize("fields, answer, expected", SR1_TABLE.values(), ids=SR1_TABLE.keys())
def test_search_r1_format_table(fields, answer, expected):
    recipe = SearchR1Format(structure_format_score=0.2, final_format_score=0.1, retrieval_score=0.1)
    result = recipe.score(episode(**fields, answer=answer))
    assert result.total == pytest.approx(expected)


def test_search_r1_format_defaults_are_the_v03_scripts():
    recipe = SearchR1Format()
    assert (recipe.structure_format_score, recipe.final_format_score, recipe.retrieval_score) == (0.2, 0.1, 0.0)
    # With r = 0 a retrieval hit adds nothing.
    assert recipe.score(episode(**sr1(HIT, " Lyon "), answer="Lyon")).total == pytest.approx(0.2)


def test_search_r1_format_components():
    result = SearchR1Format().score(episode(**sr1(HIT, " Lyon "), answer="Lyon"))
    assert result.components == {"em": 0.0, "valid_format": 1.0, "retrieval_correct": 1.0}
    # Retrieval is only checked for valid sequences.
    result = SearchR1Format().score(episode(**sr1(HIT, " Lyon ", think_before_answer=False), answer="Lyon"))
    assert result.components == {"em": 0.0, "valid_format": 0.0, "retrieval_correct": 0.0}


# ---------------------------------------------------------------- R1-Searcher
def r1(answer: str = "Paris", *, well_formed: bool = True, searched: bool = True) -> Episode:
    end = f"So it is {answer}. </think>\n\n<answer> {answer} </answer>"
    if not well_formed:
        end = end.replace("</think>", "")
    turns = (
        T("I should look this up. <|begin_of_query|> capital of France <|end_of_query|>", "documents", actions=("search",)),
        T(end, actions=("answer",)),
    )
    return episode(turns=turns, answer=answer, num_searches=int(searched))


@pytest.mark.parametrize(
    "searched, well_formed, expected",
    [(True, True, 1.0), (False, True, 0.5), (True, False, 0.5), (False, False, 0.0)],
)
def test_r1_searcher_stage1_is_retrieval_plus_format(searched, well_formed, expected):
    assert R1SearcherStage1().score(r1(searched=searched, well_formed=well_formed)).total == expected


def test_r1_searcher_stage1_ignores_the_answer_by_default():
    assert R1SearcherStage1().score(r1("Lyon")).total == 1.0


def test_r1_searcher_stage1_with_the_released_llama_answer_term():
    recipe = R1SearcherStage1(answer_score=1.0)
    assert recipe.score(r1("Paris")).total == 2.0
    assert recipe.score(r1("Lyon")).total == 0.0
    assert recipe.score(episode(turns=(), answer=None)).total == -1.0


def test_r1_searcher_stage2_is_f1_minus_format_penalty():
    recipe = R1SearcherStage2()
    assert recipe.score(r1("Paris")) == RewardResult(1.0, {"f1": 1.0, "format_ok": 1.0})
    # The paper's F1: "paris france" vs "paris": P = 1/2, R = 1, F1 = 2/3.
    assert R1SearcherStage2(strict=False).score(r1("Paris France")).total == pytest.approx(2 / 3)
    # Strict (default): a second name as long as the answer is a hedge, scored as wrong; a word
    # of the question beside the answer ("France") names no second answer and keeps its F1.
    assert recipe.score(r1("Paris Lyon")).total == 0.0
    assert recipe.score(r1("Paris France")).total == pytest.approx(2 / 3)
    assert recipe.score(r1("Paris", well_formed=False)).total == pytest.approx(-1.0)
    assert recipe.score(episode(turns=IDLE, answer=None)).total == pytest.approx(-2.0)
    assert R1SearcherStage2(format_penalty=1.0).score(r1("Paris", well_formed=False)).total == pytest.approx(0.0)


# ---------------------------------------------------------------- R-Search
#: The one retrieval the R-Search episodes below saw, as the env shows it.
RS_DOC = (
    "\n\n<observation>(Title: France) Paris is the capital of France. Lyon is a city.\n"
    "(Title: Lyon) Lyon lies where the Rhone meets the Saone, in the east of France.</observation>\n\n"
)
RS_QUOTE = "Paris is the capital of France."


def rs(answer: str | None, evidence: str | None, *, searched: bool = True, blocks: int = 1) -> Episode:
    turns = [T("I will search. <search> capital of France </search>", "documents", actions=("search",))] if searched else []
    text = "" if searched else "I know it. "
    if evidence is not None:
        text += f"<original_evidence> {evidence} </original_evidence>" * blocks
    if answer is not None:
        text += f"<answer> {answer} </answer>"
    kinds = (("evidence",) if evidence is not None else ()) + (("answer",) if answer is not None else ())
    turns.append(T(text, actions=kinds))
    return episode(turns=tuple(turns), answer=answer, evidence=evidence, num_searches=int(searched),
                   observations=[RS_DOC] if searched else [])


class SpyReader:
    uses_gold = True

    def __init__(self):
        self.calls = []

    def __call__(self, question, context, *, answers):
        self.calls.append((question, context))
        return GoldSpanReader()(question, context, answers=answers)


def test_r_search_full_marks_is_format_plus_answer_plus_evidence():
    reader = SpyReader()
    result = RSearchReward(reader).score(rs("Paris", RS_QUOTE))
    # 0.2 + 0.2 + 1 + 1
    assert result.total == pytest.approx(2.4)
    assert result.components == {"answer_f1": 1.0, "evidence_f1": 1.0, "answer_format": 1.0, "evidence_format": 1.0,
                                 "evidence_grounded": 1.0, "evidence_words": 6.0}
    assert reader.calls == [(QUESTION, RS_QUOTE)]


# Eq. 5: r = 0.2 * answer format + 0.2 * evidence format + F1(answer) + F1(reader's answer from the
# evidence); the evidence format asks for one non-empty evidence block when the agent searched.
@pytest.mark.parametrize(
    "case, ep, expected",
    [
        ("searched, evidence, right", rs("Paris", RS_QUOTE), 0.2 + 0.2 + 1 + 1),
        ("searched, evidence, wrong", rs("Lyon", RS_QUOTE), 0.2 + 0.2 + 0 + 1),
        ("searched, evidence without the answer", rs("Paris", "Lyon is a city."), 0.2 + 0.2 + 1 + 0),
        ("searched, no evidence", rs("Paris", None), 0.2 + 0 + 1 + 0),
        ("searched, two evidence blocks", rs("Paris", RS_QUOTE, blocks=2), 0.2 + 0 + 1 + 1),
        ("no search, no evidence", rs("Paris", None, searched=False), 0.2 + 0.2 + 1 + 0),
        ("no search, evidence", rs("Paris", RS_QUOTE, searched=False), 0.2 + 0.2 + 1 + 0),
        ("answer F1 2/3 rounded", rs("Paris France", RS_QUOTE), 0.2 + 0.2 + 0.67 + 1),
    ],
)
@pytest.mark.parametrize("grounded", [True, False])
def test_r_search_is_eq5(case, ep, expected, grounded):
    # Quoted evidence: grounding changes nothing, and the default is the paper's formula (with the
    # paper's F1: strict=False; the strict default scores the two-name answer 0, tested below).
    assert RSearchReward(GoldSpanReader(), grounded=grounded, strict=False).score(ep).total == pytest.approx(expected), case


def test_r_search_rounds_f1_to_two_decimals():
    # The seed's F1 (strict=False): answer F1 2/3 -> 0.67: 0.2 + 0.2 + 0.67 + 1.
    result = RSearchReward(GoldSpanReader(), strict=False).score(rs("Paris France", RS_QUOTE))
    assert result.components["answer_f1"] == 0.67
    assert result.total == pytest.approx(2.07)
    # Strict (default): "Paris Lyon" names two places for one, an answer F1 of 0; "Paris France"
    # adds the question's own word and keeps the seed's F1.
    assert RSearchReward(GoldSpanReader()).score(rs("Paris Lyon", RS_QUOTE)).components["answer_f1"] == 0.0
    assert RSearchReward(GoldSpanReader()).score(rs("Paris France", RS_QUOTE)).components["answer_f1"] == 0.67


def test_r_search_seed_evidence_rule_refuses_evidence_written_without_a_search():
    reader = SpyReader()
    # The released extract_solution: the prompt says to omit it, so writing it costs the 0.2.
    result = RSearchReward(reader, evidence_rule="seed").score(rs("Paris", "Paris.", searched=False))
    assert result.total == pytest.approx(0.2 + 0 + 1 + 0)
    assert RSearchReward(reader, evidence_rule="seed").score(rs("Paris", None, searched=False)).total == pytest.approx(1.4)
    assert reader.calls == []  # evidence without a search is never read
    with pytest.raises(UnknownNameError, match="Unknown R-Search evidence rule 'paper'"):
        RSearchReward(reader, evidence_rule="paper")


@pytest.mark.parametrize(
    "evidence",
    [
        "France. Paris. Lyon.",  # titles and names of the documents
        QUESTION,  # the question
        "The capital of France is Paris, as everybody knows.",  # invented
        "Paris is the capital",  # a fragment too short to be a quote
    ],
)
def test_r_search_pays_nothing_for_evidence_that_quotes_no_document(evidence):
    reader = SpyReader()
    result = RSearchReward(reader).score(rs("Lyon", evidence))
    assert result.components["evidence_f1"] == 0.0 and result.components["evidence_format"] == 0.0
    assert result.total == pytest.approx(0.2)  # the answer format only: less than quoting (1.4)
    assert reader.calls == []
    # The paper reads the evidence as written, and pays whenever it names the answer.
    assert RSearchReward(GoldSpanReader(), grounded=False).score(rs("Lyon", evidence)).components["evidence_format"] == 1.0


def test_r_search_reader_reads_only_the_grounded_sentences():
    reader = SpyReader()
    evidence = f"Everyone knows the answer is Paris. {RS_QUOTE} Lyon."
    result = RSearchReward(reader).score(rs("Paris", evidence))
    assert reader.calls == [(QUESTION, RS_QUOTE)]
    assert result.components["evidence_grounded"] == pytest.approx(1 / 3)


def test_r_search_evidence_over_the_word_budget_is_not_evidence():
    # The whole retrieval (23 words) under a 20-word budget: nothing is read.
    dump = "Paris is the capital of France. Lyon is a city. Lyon lies where the Rhone meets the Saone, in the east of France."
    reader = SpyReader()
    result = RSearchReward(reader, max_evidence_words=20).score(rs("Lyon", dump))
    assert result.components["evidence_f1"] == 0.0 and result.components["evidence_format"] == 0.0
    assert result.components["evidence_words"] == 23.0 and reader.calls == []
    assert RSearchReward(reader).score(rs("Lyon", dump)).components["evidence_f1"] == 1.0  # within the default 100


def test_r_search_evidence_block_split_across_turns_is_invalid():
    turns = (
        T("<original_evidence> Paris is the capital of France. <search> capital of France </search>", "documents",
          actions=("search",)),
        T("</original_evidence> <answer> Lyon </answer>", actions=("answer",)),
    )
    ep = episode(turns=turns, answer="Lyon", num_searches=1, observations=[RS_DOC])
    for grounded in (True, False):
        result = RSearchReward(GoldSpanReader(), grounded=grounded).score(ep)
        assert result.components["evidence_f1"] == 0.0 and result.components["evidence_format"] == 0.0


def test_r_search_pays_no_format_credit_to_an_episode_without_an_answer():
    # The seed's rule: no search and no evidence block is a correct evidence format, even
    # for an episode in which the agent wrote nothing valid. Off by default.
    idle = episode(turns=IDLE, answer=None)
    assert RSearchReward(GoldSpanReader()).score(idle) == RewardResult(
        0.0, {"answer_f1": 0.0, "evidence_f1": 0.0, "answer_format": 0.0, "evidence_format": 0.0,
              "evidence_grounded": 0.0, "evidence_words": 0.0}
    )
    paper = RSearchReward(GoldSpanReader(), paper_format_rule=True).score(idle)
    assert paper.total == pytest.approx(0.2)
    assert paper.components["evidence_format"] == 1.0
    # Searched and wrote evidence, but never answered: evidence F1 is paid, format credit is not.
    searched = rs(None, RS_QUOTE)
    result = RSearchReward(GoldSpanReader()).score(searched)
    assert result.components == {"answer_f1": 0.0, "evidence_f1": 1.0, "answer_format": 0.0, "evidence_format": 0.0,
                                 "evidence_grounded": 1.0, "evidence_words": 6.0}
    assert RSearchReward(GoldSpanReader(), paper_format_rule=True).score(searched).total == pytest.approx(1.2)


@pytest.mark.parametrize(
    "option, value, expected",
    [
        ("paper_format_rule", "yes", "expects paper_format_rule to be True or False, got 'yes'."),
        ("grounded", 1, "expects grounded to be True or False, got 1."),
        ("max_evidence_words", 0, "expects max_evidence_words to be a positive int, got 0."),
        ("min_span_words", 2.5, "expects min_span_words to be a positive int, got 2.5."),
    ],
)
def test_r_search_options_are_checked(option, value, expected):
    with pytest.raises(ConfigError, match=whole(f"Reward recipe 'r_search' {expected}")):
        make_recipe("r_search", reader=GoldSpanReader(), **{option: value})


def test_r_search_plain_reader_gets_no_gold_answers():
    result = RSearchReward(lambda question, evidence: "Paris").score(rs("Lyon", "Lyon is a city."))
    assert result.components["evidence_f1"] == 1.0


# ---------------------------------------------------------------- s3
class SpyGenerator(GoldSpanReader):
    def __init__(self):
        self.calls = []

    def __call__(self, question, context, *, answers):
        self.calls.append(list(context))
        return super().__call__(question, context, answers=answers)


WITH = ["Paris (Title: Paris)\nParis is the capital of France."]
WITHOUT = ["Lyon\nLyon is a city."]


def test_s3_gen_acc():
    recipe = S3GenAcc(GoldSpanReader())
    assert recipe.score(episode(selected_docs=WITH)) == RewardResult(1.0, {"gen_acc": 1.0}, "Paris")
    assert recipe.score(episode(selected_docs=WITHOUT)).total == 0.0
    assert recipe.score(episode(selected_docs=[])).total == 0.0


def test_s3_gen_acc_judge_decides_when_the_span_check_fails():
    judged = []

    def judge(question, prediction, answers):
        judged.append((question, prediction, tuple(answers)))
        return True

    recipe = S3GenAcc(lambda question, docs: "The French capital", judge)
    assert recipe.score(episode(selected_docs=WITHOUT)).total == 1.0
    assert judged == [(QUESTION, "The French capital", GOLD)]


@pytest.mark.parametrize(
    "selected, naive, expected",
    [(WITH, WITHOUT, 1.0), (WITH, WITH, 0.0), (WITHOUT, WITHOUT, 0.0), (WITHOUT, WITH, -1.0)],
)
def test_s3_gain_beyond_rag(selected, naive, expected):
    ep = episode(selected_docs=selected, naive_rag_docs=naive, example_id="q1")
    result = S3GainBeyondRAG(GoldSpanReader()).score(ep)
    assert result.total == expected
    assert result.components["gain_beyond_rag"] == expected


def test_s3_searcher_that_did_not_act_earns_the_floor_without_a_generator_call():
    generator = SpyGenerator()
    idle = episode(turns=IDLE, selected_docs=WITH, naive_rag_docs=WITH, example_id="q1")
    assert S3GenAcc(generator).score(idle) == RewardResult(0.0, {"gen_acc": 0.0}, "")
    assert generator.calls == []
    gbr = S3GainBeyondRAG(generator)
    result = gbr.score(idle)
    # The naive baseline answers (GenAcc 1); the idle searcher gets GenAcc 0: gain -1.
    assert result == RewardResult(-1.0, {"gen_acc": 0.0, "naive_rag_acc": 1.0, "gain_beyond_rag": -1.0}, "")
    assert result.total == gbr.floor(idle)
    assert generator.calls == [WITH]  # the baseline only


def test_s3_gain_beyond_rag_computes_the_naive_baseline_once_per_example():
    generator = SpyGenerator()
    recipe = S3GainBeyondRAG(generator, baseline_docs="initial")
    assert recipe.needs_naive_rag is True
    first = recipe.score(episode(selected_docs=WITH, naive_rag_docs=WITHOUT, example_id="q1"))
    # Later episodes of the same question need not carry the naive documents again.
    second = recipe.score(episode(selected_docs=WITHOUT, naive_rag_docs=None, example_id="q1"))
    assert (first.total, second.total) == (1.0, 0.0)
    assert generator.calls.count(WITHOUT) == 2  # the baseline once + the second episode's selection
    assert generator.calls == [WITH, WITHOUT, WITHOUT]
    assert recipe.naive_rag_cache == {"q1": 0.0}
    # Another example gets its own baseline.
    recipe.score(episode(selected_docs=WITH, naive_rag_docs=WITH, example_id="q2"))
    assert recipe.naive_rag_cache == {"q1": 0.0, "q2": 1.0}


def test_s3_gain_beyond_rag_generation_weight_reproduces_the_released_trainer():
    recipe = S3GainBeyondRAG(GoldSpanReader(), generation_weight=1.0)
    # gain (1 - 0) + GenAcc 1
    assert recipe.score(episode(selected_docs=WITH, naive_rag_docs=WITHOUT, example_id="q")).total == 2.0


def test_s3_gain_beyond_rag_needs_the_naive_documents_the_first_time():
    recipe = S3GainBeyondRAG(GoldSpanReader(), baseline_docs="initial")
    msg = (
        "Reward recipe 's3_gbr' expects Episode.naive_rag_docs (the top-k documents for the question) the first "
        "time it scores example 'q9', got None; fill it whenever recipe.has_naive_rag(...) is false."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        recipe.score(episode(selected_docs=WITH, example_id="q9"))
    matched = S3GainBeyondRAG(GoldSpanReader())
    msg = (
        "Reward recipe 's3_gbr' with baseline_docs='matched' expects Episode.naive_rag_docs (the question's naive "
        "top-n documents, n = the documents of the searcher's context and at least initial_top_k) or "
        "Episode.naive_rag_size (that n, once the baseline is cached) for example 'q9', got neither; fill them "
        "whenever recipe.needs_naive_rag is true."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        matched.score(episode(selected_docs=WITH, example_id="q9"))


def test_s3_matched_baseline_reads_as_many_naive_documents_as_the_context():
    generator = SpyGenerator()
    recipe = S3GainBeyondRAG(generator)
    assert recipe.baseline_docs == "matched"
    assert [recipe.naive_rag_size(n, 3) for n in (0, 3, 5)] == [3, 3, 5]
    assert S3GainBeyondRAG(generator, baseline_docs="initial").naive_rag_size(5, 3) == 3
    deeper = WITHOUT + WITH  # the naive top-2 holds the gold only at rank 2
    first = recipe.score(episode(selected_docs=WITH + WITHOUT, naive_rag_docs=deeper, example_id="q1"))
    assert first.components == {"gen_acc": 1.0, "naive_rag_acc": 1.0, "gain_beyond_rag": 0.0}
    # A baseline of another size is computed (and cached) on its own.
    second = recipe.score(episode(selected_docs=WITH, naive_rag_docs=WITHOUT, example_id="q1"))
    assert second.total == 1.0
    recipe.score(episode(selected_docs=WITH, naive_rag_docs=WITHOUT, example_id="q1"))
    assert recipe.naive_rag_cache == {("q1", 2): 1.0, ("q1", 1): 0.0}
    # Once cached, the env only says the size it asked for: no documents, no generator call.
    calls = len(generator.calls)
    assert recipe.has_naive_rag("q1", "", 2) and not recipe.has_naive_rag("q1", "", 4)
    again = recipe.score(episode(selected_docs=WITH + WITHOUT, naive_rag_size=2, example_id="q1"))
    assert again.components == first.components and len(generator.calls) == calls + 1  # the searcher's side only
    msg = (
        "Reward recipe 's3_gbr' expects Episode.naive_rag_docs (the top-k documents for the question) the first "
        "time it scores example ('q1', 4), got None; fill it whenever recipe.has_naive_rag(...) is false."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        recipe.score(episode(selected_docs=WITH, naive_rag_size=4, example_id="q1"))


def test_s3_gain_beyond_rag_rejects_an_unknown_baseline():
    msg = (
        "Reward recipe 's3_gbr' expects baseline_docs to be one of 'matched', 'initial' ('matched': the naive-RAG "
        "baseline reads as many documents as the searcher's context; 'initial': the paper's naive top-k), got 'top3'."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        S3GainBeyondRAG(GoldSpanReader(), baseline_docs="top3")


# ---------------------------------------------------------------- registry
def test_registry_names():
    assert sorted(RECIPES) == [
        "r1_searcher_stage1",
        "r1_searcher_stage2",
        "r_search",
        "s3_gbr",
        "s3_gen_acc",
        "search_r1_em",
        "search_r1_format",
    ]


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_registered_recipe_builds_and_scores(name):
    cls = RECIPES[name]
    assert cls.name == name
    assert cls.needs <= {"generator", "reader", "judge"}
    recipe = make_recipe(name, **{role: GoldSpanReader() for role in cls.needs})
    assert isinstance(recipe, RewardRecipe)
    assert recipe.invalid_action_penalty == 0.0
    ep = episode(
        turns=(T("<answer> Paris </answer>", actions=("answer",)),), answer="Paris", selected_docs=WITH,
        naive_rag_docs=WITH, example_id="x",
    )
    result = recipe.score(ep)
    assert isinstance(result, RewardResult)
    assert isinstance(result.total, float)
    assert all(isinstance(v, float) for v in result.components.values())


def test_make_recipe_forwards_options():
    assert make_recipe("search_r1_format", retrieval_score=0.1).retrieval_score == 0.1
    assert make_recipe("search_r1_em", invalid_action_penalty=-0.1).invalid_action_penalty == -0.1


def test_make_recipe_unknown_name():
    msg = (
        "Unknown reward 'search_r1_emm'. Did you mean 'search_r1_em'? Expected one of: r1_searcher_stage1, "
        "r1_searcher_stage2, r_search, s3_gbr, s3_gen_acc, search_r1_em, search_r1_format."
    )
    with pytest.raises(UnknownNameError, match=whole(msg)):
        make_recipe("search_r1_emm")


@pytest.mark.parametrize(
    "name, role, signature",
    [
        ("s3_gbr", "generator", "(question, docs) -> str"),
        ("s3_gen_acc", "generator", "(question, docs) -> str"),
        ("r_search", "reader", "(question, evidence) -> str"),
    ],
)
def test_make_recipe_missing_frozen_model(name, role, signature):
    msg = (
        f"Reward recipe {name!r} needs a {role}, got none. "
        f"Pass {role}=<callable {signature}>, e.g. {role}=GoldSpanReader() for an LM-free upper bound."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        make_recipe(name)


def test_make_recipe_frozen_model_not_callable():
    msg = "Reward recipe 'r_search' expects reader= to be a callable (question, evidence) -> str, got int."
    with pytest.raises(ConfigError, match=whole(msg)):
        make_recipe("r_search", reader=5)


def test_make_recipe_unexpected_argument():
    msg = (
        "Reward recipe 'search_r1_em' does not take 'reader'; "
        "expected arguments among: score, format_score, invalid_action_penalty."
    )
    with pytest.raises(ConfigError, match=whole(msg)):
        make_recipe("search_r1_em", reader=GoldSpanReader())


def test_r_search_on_a_grammar_without_evidence_pays_no_one_for_leaving_it_out():
    """Eq. 5 pays the evidence-format score to an episode without a search; where the protocol
    has no evidence block (r_search's recipe on Search-R1's grammar), that would pay for not
    searching. There no episode gets it, so searching costs nothing."""
    recipe = RSearchReward(GoldSpanReader())
    searched, skipped = rs("Lyon", None), rs("Lyon", None, searched=False)
    assert recipe.score(skipped).total == pytest.approx(0.4) and recipe.score(searched).total == pytest.approx(0.2)
    for ep in (searched, skipped):
        ep.evidence_possible = False
    assert recipe.score(skipped).total == recipe.score(searched).total == pytest.approx(0.2)
    assert recipe.score(skipped).components["evidence_format"] == 0.0
