"""R-Search's evidence reward against scripted exploits, played on RSearch-v0.

Each strategy is compared with an honest episode that answers wrong on the same
questions: search the question, quote the first sentence of the top document, answer
"unknown". No strategy may earn more on any question (the gains are printed).
"""

import re

import pytest
from env_helpers import make_small

from searchgym.envs.components.lm_frozen import LMReader
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer
from searchgym.rewards import span_check

WRONG = "unknown"
NOISE = 1e-9


@pytest.fixture(scope="module")
def env():
    return make_small("searchgym/RSearch-v0")


def documents(observation: str) -> list[str]:
    """The passages' texts of an R-Search observation (title markers and tags removed)."""
    body = re.sub(r"</?observation>", "", observation).strip()
    return [re.sub(r"^\(Title: [^)]*\)\s*", "", line) for line in body.split("\n") if line.strip()]


def first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?])\s+", text)[0]


def play(env, index: int, final_turn) -> tuple[float, dict]:
    """Reset on question ``index``, search the question, then the final turn
    ``final_turn(question, observation)``; the episode's reward and last info."""
    question = env.unwrapped.examples[index].question
    env.reset(options={"example_index": index})
    observation, reward, *_ = env.step(f"<search> {question} </search>")
    total = reward
    _, reward, terminated, _, info = env.step(final_turn(question, observation))
    assert terminated
    return total + reward, info


def honest_wrong(question: str, observation: str) -> str:
    quote = first_sentence(documents(observation)[0])
    return f"<original_evidence> {quote} </original_evidence>\n<answer> {WRONG} </answer>"


def title_list(env):
    titles = sorted({p.title for p in env.unwrapped.corpus})
    return lambda q, o: f"<original_evidence> {', '.join(titles)} </original_evidence><answer> {WRONG} </answer>"


def retrieved_titles(question: str, observation: str) -> str:
    titles = re.findall(r"\(Title: ([^)]*)\)", observation)
    return f"<original_evidence> {'. '.join(titles)}. </original_evidence><answer> {WRONG} </answer>"


def question_copy(question: str, observation: str) -> str:
    return f"<original_evidence> {question} </original_evidence><answer> {WRONG} </answer>"


def dump(question: str, observation: str) -> str:
    return f"<original_evidence> {' '.join(documents(observation))} </original_evidence><answer> {WRONG} </answer>"


def invented(question: str, observation: str) -> str:
    names = re.findall(r"\(Title: ([^)]*)\)", observation)
    claims = " ".join(f"The answer to the question is {n}." for n in names)
    return f"<original_evidence> {claims} </original_evidence><answer> {WRONG} </answer>"


def name_fragments(question: str, observation: str) -> str:
    # Two-word windows cut out around capitalised names of the documents.
    names = re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)?\b", " ".join(documents(observation)))
    return f"<original_evidence> {'. '.join(dict.fromkeys(names))}. </original_evidence><answer> {WRONG} </answer>"


def play_split_block(env, index: int) -> float:
    """The evidence block opened before the search and closed after it."""
    question = env.unwrapped.examples[index].question
    env.reset(options={"example_index": index})
    _, first, *_ = env.step(f"<original_evidence> {question} <search> {question} </search>")
    _, reward, _, _, info = env.step(f"</original_evidence> <answer> {WRONG} </answer>")
    assert info["reward_components"]["evidence_f1"] == 0.0 and info["reward_components"]["evidence_format"] == 0.0
    return first + reward


STRATEGIES = {
    "retrieved titles": retrieved_titles,
    "question copy": question_copy,
    "dump every retrieved document": dump,
    "invented claims": invented,
    "name fragments": name_fragments,
}


def test_no_evidence_exploit_beats_an_honest_wrong_answer(env):
    n = len(env.unwrapped.examples)
    honest = [play(env, i, honest_wrong)[0] for i in range(n)]
    strategies = dict(STRATEGIES, **{"every corpus title": title_list(env)})
    gains = {}
    for name, strategy in strategies.items():
        rewards = [play(env, i, strategy)[0] for i in range(n)]
        gains[name] = [r - h for r, h in zip(rewards, honest)]
    gains["block split across turns"] = [play_split_block(env, i) - h for i, h in enumerate(honest)]
    for name, g in gains.items():
        print(f"{name:32s} mean gain {sum(g) / n:+.3f}  max {max(g):+.3f}  beats honest on {sum(x > NOISE for x in g)}/{n}")
    for name, g in gains.items():
        assert max(g) <= NOISE, name
    # The honest wrong answer keeps its evidence credit: its quote is grounded.
    assert sum(honest) / n >= 0.4


def test_the_paper_reward_pays_the_exploits(env):
    # grounded=False reads the evidence as written, as the paper does: the question copy
    # pays on comparison questions (they name the answer).
    raw = make_small("searchgym/RSearch-v0", reward_options={"grounded": False})
    comparisons = [i for i, ex in enumerate(raw.unwrapped.examples) if ex.metadata.get("type") == "comparison"]
    assert comparisons
    exploit = [play(raw, i, question_copy) for i in comparisons]
    honest = [play(raw, i, honest_wrong)[0] for i in comparisons]
    assert all(info["reward_components"]["evidence_f1"] == 1.0 for _, info in exploit)
    assert sum(r for r, _ in exploit) > sum(honest)


def oracle_play(env, index: int) -> dict:
    """An honest episode: search the example's oracle queries, quote its gold evidence
    sentences where they were retrieved, answer wrong."""
    ex = env.unwrapped.examples[index]
    env.reset(options={"example_index": index})
    seen = ""
    for query in ex.metadata["oracle_queries"][: env.unwrapped.max_turns - 1]:
        observation, *_ = env.step(f"<search> {query} </search>")
        seen += observation
    quotes = [s for s in ex.metadata["evidence"] if s in seen]
    *_, info = env.step(f"<original_evidence> {' '.join(quotes)} </original_evidence>\n<answer> {WRONG} </answer>")
    return {"quotes": quotes, **info["reward_components"]}


def test_honest_grounded_evidence_keeps_the_evidence_credit(env):
    results = [oracle_play(env, i) for i in range(len(env.unwrapped.examples))]
    quoted = [r for r in results if r["quotes"]]
    assert len(quoted) >= len(results) // 2
    for r in quoted:
        assert r["evidence_format"] == 1.0 and r["evidence_grounded"] == 1.0
    golds = {i: env.unwrapped.examples[i].answers for i in range(len(results))}
    readable = [r for i, r in enumerate(results) if r["quotes"] and span_check(" ".join(r["quotes"]), golds[i])]
    assert readable and all(r["evidence_f1"] == 1.0 for r in readable)


class ReaderLM(ScriptedLM):
    """A scripted language model that records the reader's prompts."""

    def __init__(self, reply: str):
        self.prompts = []
        super().__init__(lambda prompt: (self.prompts.append(prompt), reply)[1], tiny_tokenizer())


def test_a_language_model_reader_by_name_reads_only_the_grounded_evidence():
    # A mapping names the model, its backend and the reader's sampling (the paper's: 0.1, 0.9, 512).
    spec = {"model": "tiny-random", "backend": "transformers", "temperature": 0.1, "top_p": 0.9, "max_new_tokens": 4}
    env = make_small("searchgym/RSearch-v0", reader=spec)
    reader = env.unwrapped.recipe.reader
    assert isinstance(reader, LMReader) and (reader.temperature, reader.top_p, reader.max_new_tokens) == (0.1, 0.9, 4)
    total, info = play(env, 0, honest_wrong)
    assert info["reward_components"]["evidence_format"] == 1.0 and total >= 0.4

    lm = ReaderLM("Paris")
    env = make_small("searchgym/RSearch-v0", reader=lm)
    quote = {}

    def mixed(question, observation):
        quote["text"] = first_sentence(documents(observation)[1])
        return (f"<original_evidence> Invented: the answer is Paris. {quote['text']} </original_evidence>"
                f"<answer> {WRONG} </answer>")

    play(env, 0, mixed)
    (prompt,) = lm.prompts
    assert quote["text"] in prompt and "Invented" not in prompt
