"""LM versions of the env's components: the s3 generator and judge, the R-Search reader,
RECON's summarizer. Prompts are checked verbatim; envs run with them end to end."""

import pytest

from env_helpers import make_small
from searchgym.corpora.types import Hit, Passage
from searchgym.envs.frozen import make_frozen
from searchgym.envs.lm_frozen import LMGenerator, LMJudge, LMReader, generator_messages
from searchgym.envs.lm_summarizer import ASPECTS, LLMSummarizer, recon_prompt
from searchgym.envs.summarizers import make_summarizer
from searchgym.error import UnknownNameError
from searchgym.lm.base import Generation, LanguageModel
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer

DOCS = ['"Marrowgate"\nThe city of Marrowgate lies on the river Tesk.', "Tesk\nThe Tesk is a river."]
HITS = [Hit(Passage("p1", '"Marrowgate"', "The city of Marrowgate lies on the river Tesk."), 1.0), Hit(Passage("p2", "Tesk", "The Tesk is a river."), 0.5)]


class Recorder(ScriptedLM):
    def __init__(self, reply):
        self.prompts = []
        super().__init__(lambda prompt: (self.prompts.append(prompt), reply)[1], tiny_tokenizer())


def chat(messages):
    return tiny_tokenizer().apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def test_generator_uses_s3_prompt_with_renumbered_documents():
    lm = Recorder(" Tesk \n")
    assert LMGenerator(lm)("Which river?", DOCS) == "Tesk"
    system = (
        "Use the following contexts (some might be irrelevant) on demand:\nContexts:\n"
        "Doc 1 (Title: Marrowgate)\nThe city of Marrowgate lies on the river Tesk.\n\n"
        "Doc 2 (Title: Tesk)\nThe Tesk is a river.\n\n\n\n"
        "Important: You MUST directly answer the question without any other text and thinking."
    )
    assert lm.prompts == [chat([{"role": "system", "content": system}, {"role": "user", "content": "Which river?"}])]
    assert generator_messages("Q?", [])[0]["content"] == "Important: You MUST directly answer the question without any other text and thinking."


def test_reader_and_judge_prompts():
    lm = Recorder("Tesk")
    assert LMReader(lm)("Which river?", "Marrowgate lies on the Tesk.") == "Tesk"
    assert lm.prompts[0] == chat([{"role": "user", "content": (
        "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n\n"
        "The following are given passages:\nMarrowgate lies on the Tesk.\n\nQuestion: Which river?\nAnswer:")}])
    judge = Recorder("Yes.")
    assert LMJudge(judge)("Q", "it is the Tesk", ["Tesk"]) is True
    assert "Golden answers: ['Tesk']" in judge.prompts[0]
    assert LMJudge(Recorder("no, it is not"))("Q", "x", ["Tesk"]) is False
    assert LMJudge(Recorder("yesterday"))("Q", "x", ["Tesk"]) is False


class TooLong(LanguageModel):
    tokenizer = tiny_tokenizer()

    def _generate(self, prompt_ids, params):
        return [Generation("", (), (), "prompt_too_long") for _ in prompt_ids]


def test_prompts_that_do_not_fit_give_empty_answers_and_the_seed_fallback_summary():
    assert LMGenerator(TooLong())("Q", DOCS) == ""
    assert LMJudge(TooLong())("Q", "x", ["a"]) is False
    assert LLMSummarizer(TooLong()).summarize("Q", "q", HITS) == (
        "Doc 1: The city of Marrowgate lies on the river Tesk....\nDoc 2: The Tesk is a river...."
    )


def test_recon_prompt_puts_the_query_in_the_user_question_slot():
    prompt = recon_prompt("river of Marrowgate", HITS)
    assert "User Question: river of Marrowgate\n\nSearch Query (used by the retriever): river of Marrowgate" in prompt
    assert "[Doc 1] Marrowgate: The city of Marrowgate lies on the river Tesk.\n[Doc 2] Tesk: The Tesk is a river.\n\nPlease write" in prompt
    assert "Focus Aspect: Clarity\n→ Write in a clear, accessible manner" in prompt
    assert "Focus Aspect: Coverage" in recon_prompt("q", HITS, "coverage")
    assert len(ASPECTS) == 6
    with pytest.raises(UnknownNameError, match="Unknown summary aspect 'clarty'. Did you mean 'clarity'?"):
        LLMSummarizer(Recorder("x"), aspect="clarty")


def test_recon_env_wraps_the_llm_summary():
    lm = Recorder("Marrowgate lies on the Tesk.")
    env = make_small("searchgym/RECON-v0", summarizer="llm", summarizer_options={"model": lm, "aspect": "coherence"})
    env.reset(options={"example_index": 0})
    query = env.unwrapped.example.question
    obs, *_ = env.step(f"<search> {query} </search>")
    assert obs == "\n\n<information>Marrowgate lies on the Tesk.</information>\n\n"
    assert "Focus Aspect: Coherence" in lm.prompts[0] and f"User Question: {query}" in lm.prompts[0]
    assert isinstance(make_summarizer("llm", model=lm), LLMSummarizer)


def test_envs_take_language_models_as_frozen_generator_reader_and_judge():
    env = make_small("searchgym/S3-v0")
    gold = env.unwrapped.examples[0].answers[0]
    s3 = make_small("searchgym/S3-v0", generator=Recorder(gold), judge=Recorder("no"))
    s3.reset(options={"example_index": 0})
    *_, info = s3.step("<search_complete>True</search_complete>")
    assert info["reward_components"]["gen_acc"] == 1.0 and info["prediction"] == gold

    rs = make_small("searchgym/RSearch-v0", reader=Recorder(gold))
    ex = rs.unwrapped.examples[0]
    rs.reset(options={"example_index": 0})
    rs.step(f"<search> {ex.question} </search>")
    *_, info = rs.step(f"<original_evidence> {gold} </original_evidence>\n<answer> {gold} </answer>")
    assert info["reward_components"]["evidence_f1"] == 1.0


def test_frozen_names_resolve_to_lm_versions_and_unknown_names_fail_early():
    generator = make_frozen("generator", "tiny-random")
    assert isinstance(generator, LMGenerator) and isinstance(generator("Q?", DOCS), str)
    assert isinstance(make_frozen("reader", Recorder("x")), LMReader)
    with pytest.raises(UnknownNameError) as e:
        make_frozen("reader", "smolm2")
    assert str(e.value) == "Unknown reader model 'smolm2'. Did you mean 'smollm2'? Expected one of: gold-span, smollm2, tiny-random."
    assert "could not be loaded offline" in str(e.value.__cause__)


# ---------------------------------------------------------------- LLM judges
def test_judges_ask_their_papers_prompt_and_read_yes_no_and_true_false():
    s3 = Recorder("Yes, it is.")
    assert LMJudge(s3)("Which river?", "the Tesk", ["Tesk"]) is True
    assert s3.prompts == [chat([{"role": "user", "content": (
        "Please check if any of the golden answers is contained in the following response: the Tesk\n\n"
        "Golden answers: ['Tesk']\n\nPlease directly answer with 'yes' or 'no'."
    )}])]
    r1 = Recorder("False")
    judge = LMJudge(r1, prompt="r1-searcher")
    assert judge("Which river?", "the Lune", ["Tesk"]) is False and judge.malformed == 0
    assert "Question: Which river?\nGolden Answer: Tesk\nPredicted Answer: the Lune\n" in r1.prompts[0]
    # A malformed reply is a wrong answer, and counted.
    confused = LMJudge(Recorder("Maybe yes"), prompt="r1-searcher")
    assert confused("Q", "x", ["Tesk"]) is False and confused.malformed == 1
    assert make_frozen("judge", Recorder("True"), options={"prompt": "r1-searcher"})("Q", "x", ["a"]) is True
    with pytest.raises(UnknownNameError):
        LMJudge(Recorder("yes"), prompt="s4")


def test_judge_verdicts_are_cached_by_question_and_answer_and_batched():
    from lm_helpers import recording_lm

    lm = recording_lm(lambda prompt: "yes" if "Lyon" in prompt else "no")
    judge = LMJudge(lm)
    items = [("Q1", "Lyon", ["Lyon"]), ("Q2", "Paris", ["Nice"]), ("Q1", "Lyon", ["Lyon"]), ("Q3", "Lyon city", ["Lyon"])]
    assert judge.judge_many(items) == [True, False, True, True]
    assert lm.batches == [3]  # one generate call, each distinct (question, answer) once
    assert judge("Q2", "Paris", ["Nice"]) is False and judge.judge_many(items[:2]) == [True, False]
    assert lm.batches == [3]  # all cached
    assert judge("Q2", "Nice?", ["Nice"]) is False and lm.batches == [3, 1]


def test_the_tiny_model_judges_through_the_whole_path():
    """The tiny model's verdicts are noise; what is checked is that a real backend's
    replies come back as a verdict per item, malformed ones counted, in one call."""
    judge = make_frozen("judge", "tiny-random", options={"prompt": "r1-searcher", "max_new_tokens": 4})
    verdicts = judge.judge_many([("Which river?", "the Tesk", ["Tesk"]), ("Which city?", "Lyon", ["Paris"])])
    assert [type(v) for v in verdicts] == [bool, bool]
    assert 0 <= judge.malformed <= 2 and len(judge.cache) == 2


def test_a_hedged_generator_answer_is_refused_before_the_judge_sees_it():
    """The exploit: the s3 searcher hands the generator documents that make it name both
    options, and a lenient judge says yes to anything. The hedge earns what an honest
    wrong answer earns from a strict judge (0), and the judge is never asked."""
    env = make_small("searchgym/S3-v0")
    i, ex = next((i, ex) for i, ex in enumerate(env.unwrapped.examples) if ex.candidates)
    hedge = " and ".join(ex.candidates)
    lenient = Recorder("yes")
    s3 = make_small("searchgym/S3-v0", generator=Recorder(hedge), judge=lenient)
    s3.reset(options={"example_index": i})
    *_, info = s3.step("<search_complete>True</search_complete>")
    assert info["reward_components"]["gen_acc"] == 0.0 and lenient.prompts == []
    honest = make_small("searchgym/S3-v0", generator=Recorder("Nobody"), judge=Recorder("no"))
    honest.reset(options={"example_index": i})
    *_, honest_info = honest.step("<search_complete>True</search_complete>")
    assert info["reward_components"]["gen_acc"] <= honest_info["reward_components"]["gen_acc"]
    # Without the strict check (the paper's GenAcc) the same lenient judge would pay it.
    raw = make_small("searchgym/S3-v0", generator=Recorder("Nobody"), judge=Recorder("yes"), reward_options={"strict": False})
    raw.reset(options={"example_index": i})
    *_, raw_info = raw.step("<search_complete>True</search_complete>")
    assert raw_info["reward_components"]["gen_acc"] == 1.0
