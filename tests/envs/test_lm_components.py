"""LM versions of the env's components: the s3 generator and judge, the R-Search reader,
RECON's summarizer. Prompts are checked verbatim; envs run with them end to end."""

import pytest
from env_helpers import make_small

from searchgym.corpora.types import Hit, Passage
from searchgym.envs.components.frozen import make_frozen
from searchgym.envs.components.lm_frozen import LMGenerator, LMJudge, LMReader, generator_messages
from searchgym.envs.components.lm_summarizer import (
    ASPECTS,
    PAPER_SAMPLING,
    LLMSummarizer,
    recon_prompt,
)
from searchgym.envs.components.summarizers import make_summarizer
from searchgym.error import ConfigError, UnknownArgumentError, UnknownNameError
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


def test_generator_uses_s3s_fig_12_prompt_with_renumbered_documents():
    lm = Recorder(" Tesk \n")
    assert LMGenerator(lm)("Which river?", DOCS) == "Tesk"
    user = (
        "Use the following contexts (some might be irrelevant) on demand:\nContexts:\n"
        "Doc 1 (Title: Marrowgate)\nThe city of Marrowgate lies on the river Tesk.\n\n"
        "Doc 2 (Title: Tesk)\nThe Tesk is a river.\n\n\n"
        "Question: Which river?\nImportant: You MUST directly answer the question without any other text."
    )
    assert lm.prompts == [chat([{"role": "user", "content": user}])]
    assert generator_messages("Q?", [], "paper")[0]["content"].startswith("Use the following contexts")
    with pytest.raises(UnknownNameError, match="Unknown s3 generator prompt 'paperr'. Did you mean 'paper'?"):
        LMGenerator(lm, prompt="paperr")


def test_generator_with_the_released_prompt():
    lm = Recorder(" Tesk \n")
    assert LMGenerator(lm, prompt="released")("Which river?", DOCS) == "Tesk"
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


def test_recon_prompt_holds_the_users_question_and_the_query_in_their_slots():
    prompt = recon_prompt("Which river flows through Marrowgate?", "river of Marrowgate", HITS)
    assert "User Question: Which river flows through Marrowgate?\n\nSearch Query (used by the retriever): river of Marrowgate" in prompt
    assert "[Doc 1] Marrowgate: The city of Marrowgate lies on the river Tesk.\n[Doc 2] Tesk: The Tesk is a river.\n\nPlease write" in prompt
    assert "Focus Aspect: Clarity\n→ Write in a clear, accessible manner" in prompt
    assert "Focus Aspect: Coverage" in recon_prompt("q", "q", HITS, "coverage")
    assert len(ASPECTS) == 6
    with pytest.raises(UnknownNameError, match="Unknown summary aspect 'clarty'. Did you mean 'clarity'?"):
        LLMSummarizer(Recorder("x"), aspect="clarty")
    with pytest.raises(UnknownNameError, match="Unknown summarizer question slot 'querry'. Did you mean 'query'?"):
        LLMSummarizer(Recorder("x"), question_slot="querry")


class SamplingRecorder(ScriptedLM):
    """Records the sampling arguments of every generate call."""

    def __init__(self):
        self.calls = []
        super().__init__(["Marrowgate lies on the Tesk."], tiny_tokenizer())

    def generate(self, prompts, **sampling):
        self.calls.append((list(prompts), sampling))
        return super().generate(prompts, **sampling)


def test_llm_summarizer_samples_as_the_paper_and_keeps_the_seed_code_behaviour_reachable():
    lm = SamplingRecorder()
    paper = LLMSummarizer(lm)
    paper.summarize("Which river?", "river of Marrowgate", HITS)
    paper.summarize("Which river?", "river of Marrowgate", HITS)
    (prompts, sampling), (_, again) = lm.calls
    assert "User Question: Which river?\n" in prompts[0]
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.7, 0.9, 40) == tuple(PAPER_SAMPLING.values())
    assert sampling["seed"] is not None and again["seed"] == sampling["seed"]  # the same prompt replays the same draw
    seed_code = LLMSummarizer(lm, question_slot="query", temperature=0.0)
    seed_code.summarize("Which river?", "river of Marrowgate", HITS)
    prompts, sampling = lm.calls[-1]
    assert "User Question: river of Marrowgate\n" in prompts[0] and sampling["temperature"] == 0.0 and sampling["seed"] is None
    with pytest.raises(ConfigError, match=r"^LanguageModel.generate expects top_k to be a non-negative integer"):
        LLMSummarizer(lm, top_k=-1)
    with pytest.raises(ConfigError, match=r"^LLMSummarizer expects seed to be an integer in \[0, 2\*\*63\) or None, got -3.$"):
        LLMSummarizer(lm, seed=-3)


def test_summarize_many_makes_one_call_and_writes_what_summarize_writes_alone():
    from searchgym.lm.registry import load_lm

    lm = load_lm("tiny-random")
    summarizer = LLMSummarizer(lm, max_new_tokens=12)
    requests = [("Which river?", "river of Marrowgate", HITS), ("Where?", "Tesk", HITS[1:]), ("Empty?", "nothing", [])]
    alone = [summarizer.summarize(*r) for r in requests]
    assert alone[2] == "" and alone[0] != alone[1]
    assert summarizer.summarize_many(requests) == alone  # sampled (the paper's temperature), seeded per prompt
    recorder = SamplingRecorder()
    assert LLMSummarizer(recorder).summarize_many(requests) == ["Marrowgate lies on the Tesk."] * 2 + [""]
    assert [len(prompts) for prompts, _ in recorder.calls] == [2]


def test_recon_env_wraps_the_llm_summary():
    lm = Recorder("Marrowgate lies on the Tesk.")
    env = make_small("searchgym/RECON-v0", summarizer="llm", summarizer_options={"model": lm, "aspect": "coherence"})
    env.reset(options={"example_index": 0})
    question = env.unwrapped.example.question
    obs, *_ = env.step("<search> Marrowgate river </search>")
    assert obs == "\n\n<information>Marrowgate lies on the Tesk.</information>\n\n"
    assert "Focus Aspect: Coherence" in lm.prompts[0] and f"User Question: {question}" in lm.prompts[0]
    assert "Search Query (used by the retriever): Marrowgate river" in lm.prompts[0]
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
    observation, *_ = rs.step(f"<search> {ex.question} </search>")
    quote = observation.split(") ", 1)[1].split(". ")[0] + "."  # the first sentence shown: grounded evidence
    *_, info = rs.step(f"<original_evidence> {quote} </original_evidence>\n<answer> {gold} </answer>")
    assert info["reward_components"]["evidence_f1"] == 1.0
    assert rs.unwrapped.recipe.reader.lm.prompts[-1].count(quote) == 1


def test_frozen_names_resolve_to_lm_versions_and_unknown_names_fail_early():
    generator = make_frozen("generator", "tiny-random")
    assert isinstance(generator, LMGenerator) and isinstance(generator("Q?", DOCS), str)
    assert isinstance(make_frozen("reader", Recorder("x")), LMReader)
    with pytest.raises(UnknownNameError) as e:
        make_frozen("reader", "smolm2")
    assert str(e.value) == "Unknown reader model 'smolm2'. Did you mean 'smollm2'? Expected one of: gold-span, smollm2, tiny-random, tiny-random-2k."
    assert "no built-in model name, local folder or cached model id" in str(e.value.__cause__)  # refused before any load


def test_a_frozen_model_mapping_names_model_backend_options_and_sampling():
    reader = make_frozen("reader", {"model": "tiny-random", "temperature": 0.1, "top_p": 0.9, "max_new_tokens": 3})
    assert isinstance(reader, LMReader) and (reader.temperature, reader.top_p, reader.max_new_tokens) == (0.1, 0.9, 3)
    assert isinstance(reader("Q?", "Some evidence."), str)
    with pytest.raises(ConfigError, match=r"^SearchEnv expects reader= as a mapping to name its model, e\.g\. "):
        make_frozen("reader", {"backend": "openai"})
    with pytest.raises(ConfigError, match="^The transformers backend does not take the option 'base_ur'"):
        make_frozen("reader", {"model": "tiny-random", "base_ur": "http://127.0.0.1:1/v1"})
    with pytest.raises(UnknownNameError, match="^Unknown language-model backend 'olama'"):
        make_frozen("reader", {"model": "tiny-random", "backend": "olama"})
    # the role's prompt: s3's generator reads Fig. 12 unless the released one is named
    assert make_frozen("generator", {"model": "tiny-random", "prompt": "released"}).prompt == "released"
    assert make_frozen("generator", "tiny-random").prompt == "paper"
    assert make_frozen("judge", {"model": "tiny-random", "prompt": "r1-searcher"}).prompt.name == "r1-searcher"
    with pytest.raises(UnknownArgumentError, match=r"^LMReader got an unexpected keyword argument 'prompt'\. It takes: max_new_tokens, temperature, top_p\.$"):
        make_frozen("reader", {"model": "tiny-random", "prompt": "paper"})  # the reader has one prompt


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


def test_envs_share_one_judge_cache_per_model_and_prompt():
    """Training runs one env per rollout slot: the same (question, answer, golds) is judged
    once in the process, not once per env."""
    import copy

    from lm_helpers import recording_lm

    judge_lm = recording_lm(lambda prompt: "no")
    envs = [make_small("searchgym/S3-v0", generator=Recorder("Nobody"), judge=judge_lm) for _ in range(2)]
    for env in envs:
        env.reset(options={"example_index": 0})
        *_, info = env.step("<search_complete>True</search_complete>")
        assert info["reward_components"]["gen_acc"] == 0.0
    # The searcher's answer and the naive-RAG baseline's are the same "Nobody": one verdict for all four.
    assert judge_lm.batches == [1]
    assert envs[0].unwrapped.recipe.judge.cache is envs[1].unwrapped.recipe.judge.cache
    # Another prompt or other sampling settings are other judges; a private cache is asked on its own.
    ex = envs[0].unwrapped.examples[0]
    assert LMJudge(judge_lm, prompt="r1-searcher").cache is not envs[0].unwrapped.recipe.judge.cache
    assert LMJudge(judge_lm, max_new_tokens=4).cache is not envs[0].unwrapped.recipe.judge.cache
    private = LMJudge(judge_lm, shared_cache=False)
    assert private(ex.question, "Nobody", ex.answers) is False and judge_lm.batches == [1, 1]
    # A copy (pickled into a worker of the same process) finds the same shared cache.
    assert copy.copy(envs[0].unwrapped.recipe.judge).cache is envs[1].unwrapped.recipe.judge.cache
    with pytest.raises(ConfigError, match=r"^LMJudge expects shared_cache to be True or False, got 'yes'\.$"):
        LMJudge(judge_lm, shared_cache="yes")


def test_the_verdict_cache_is_bounded_lru_and_thread_safe():
    import threading

    from searchgym.envs.components.lm_frozen import JUDGE_CACHE_SIZE, VerdictCache

    cache = VerdictCache(maxsize=2)
    cache.put(("q", "a", ()), True)
    cache.put(("q", "b", ()), False)
    assert cache.get(("q", "a", ())) is True  # now the most recently used
    cache.put(("q", "c", ()), True)
    assert ("q", "b", ()) not in cache and ("q", "a", ()) in cache and len(cache) == 2
    assert VerdictCache().maxsize == JUDGE_CACHE_SIZE
    with pytest.raises(ConfigError, match=r"^VerdictCache expects maxsize to be a positive int \(verdicts kept\), got 0\.$"):
        VerdictCache(0)

    shared = VerdictCache(maxsize=50)
    errors = []

    def work(t):
        try:
            for i in range(300):
                key = (f"q{t}", str(i), ("g",))
                shared.put(key, i % 2 == 0)
                got = shared.get(key)
                assert got is None or got == (i % 2 == 0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [] and len(shared) == 50
