"""s3 compares like with like: the searcher cannot beat naive RAG by re-reading it.

Gain Beyond RAG pays the generator's accuracy on the searcher's documents minus its
accuracy on the naive top-k for the question. Scripted strategies that only re-issue the
question (or its words) are played on 60 small-synthwiki questions; none may earn more
than an honest episode that adds nothing the naive retrieval did not have (gain 0, what an
honest episode that ends wrong earns on the questions s3 trains on, where naive RAG is
wrong). The paper's raw settings (no cap, fixed top-3 baseline) are played too, to show
the exploit the defenses close. A window the searcher never annotates gives the generator
all its documents (s3's App. A.5), so the matched baseline is what closes re-searching.
"""

import re

import pytest
from env_helpers import make_small

from searchgym.agents.oracle import SynthWikiOracle
from searchgym.corpora.types import Hit, Passage
from searchgym.envs.protocols import Complete, Search, Select, make_protocol
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.single.game import SearchLog
from searchgym.error import ConfigError

QUESTIONS = 60
PAPER_RAW = {"protocol_options": {"docs_per_window": None}, "reward_options": {"baseline_docs": "initial"}}


def strategies(question: str) -> dict[str, list[list]]:
    """Each strategy's turns, as actions of the s3 protocol."""
    words = " ".join(re.findall(r"\w+", question.lower()))  # the question's words, no gold
    return {
        "complete at once": [[Complete()]],
        "re-search the question": [[Search(question)], [Complete()]],
        "re-search, select all": [[Search(question)], [Select(tuple(range(1, 9))), Complete()]],
        "re-search, select none": [[Search(question)], [Select(()), Complete()]],
        "select nothing": [[Select(()), Complete()]],
        "search the question's words": [[Search(words)], [Complete()]],
        "re-search, keep ranks 4-8": [[Search(question)], [Select((4, 5, 6)), Search(question)], [Select((7, 8)), Complete()]],
    }


def mean_gains(env, n: int = QUESTIONS) -> dict[str, float]:
    inner = env.unwrapped
    gains: dict[str, list[float]] = {}
    for i in range(n):
        for name, turns in strategies(inner.examples[i].question).items():
            env.reset(options={"example_index": i})
            for actions in turns:
                _, _, terminated, truncated, info = env.step(inner.protocol.write(actions))
                if terminated or truncated:
                    break
            gains.setdefault(name, []).append(info["reward_components"]["gain_beyond_rag"])
    return {name: sum(g) / n for name, g in gains.items()}


def oracle_gain(env, n: int = QUESTIONS) -> float:
    oracle = SynthWikiOracle.for_env(env)
    total = 0.0
    for i in range(n):
        obs, info = env.reset(options={"example_index": i})
        while True:
            obs, reward, terminated, truncated, info = env.step(oracle.act([obs], [info])[0])
            if terminated or truncated:
                break
        total += info["reward_components"]["gain_beyond_rag"]
    return total / n


def test_re_issuing_the_question_earns_no_more_than_naive_rag():
    env = make_small("searchgym/S3-v0", split="train")
    assert len(env.unwrapped.examples) >= QUESTIONS
    gains = mean_gains(env)
    print("\ns3 defaults: mean Gain Beyond RAG over", QUESTIONS, "questions")
    for name, gain in gains.items():
        print(f"  {name:30s} {gain:+.3f}")
    for name, gain in gains.items():
        assert gain <= 1e-9, (name, gain)
    # Honest search still pays: the oracle's queries reach documents naive RAG misses.
    honest = oracle_gain(env)
    print(f"  {'oracle (honest, right)':30s} {honest:+.3f}")
    assert honest > 0.1


def test_the_papers_raw_settings_pay_for_re_searching_the_question():
    env = make_small("searchgym/S3-v0", split="train", **PAPER_RAW)
    gains = mean_gains(env)
    print("\ns3 paper-raw (no cap, top-3 baseline): mean Gain Beyond RAG")
    for name, gain in gains.items():
        print(f"  {name:30s} {gain:+.3f}")
    assert gains["re-search the question"] > 0.05
    assert gains["complete at once"] == 0.0


def test_the_cap_alone_closes_re_searching_but_not_deeper_ranks():
    env = make_small(
        "searchgym/S3-v0", split="train", reward_options={"baseline_docs": "initial"}, protocol_options={"cap_unannotated": True}
    )
    gains = mean_gains(env)
    assert gains["re-search the question"] == 0.0
    assert gains["re-search, select all"] == 0.0
    assert gains["re-search, keep ranks 4-8"] > 0.05  # what the matched baseline is for


def hits(*ids: str) -> list[Hit]:
    return [Hit(Passage(i, i.upper(), f"text of {i}"), 1.0) for i in ids]


def test_a_selection_keeps_at_most_docs_per_window_and_a_window_never_annotated_gives_all():
    log = SearchLog(max_turns=4, docs_per_window=3)
    log.open_window("q", hits("a", "b", "c"))  # the initial window, never annotated
    log.open_window("q2", hits(*"defghijk"))
    assert [h.passage.id for h in log.select([8, 1, 1, 7, 6, 5])] == ["k", "d", "j"]
    assert [h.passage.id for h in log.select([2])] == []  # the window has given its three
    log.open_window("q3", hits(*"lmnopqrs"))  # never annotated: all of it (s3's App. A.5)
    assert [h.passage.id for h in log.context()] == ["k", "d", "j", "a", "b", "c", *"lmnopqrs"]
    capped = SearchLog(max_turns=4, docs_per_window=3, cap_unannotated=True)
    capped.open_window("q", hits("a", "b", "c"))
    capped.open_window("q3", hits(*"lmnopqrs"))  # with the option: its top three
    assert [h.passage.id for h in capped.context()] == ["a", "b", "c", "l", "m", "n"]
    raw = SearchLog(max_turns=4)
    raw.open_window("q", hits(*"defghijk"))
    assert len(raw.context()) == 8
    raw.select(range(1, 9))
    assert len(raw.context()) == 8


def test_the_cap_is_a_protocol_option_checked_on_construction():
    assert S3Protocol().docs_per_window == 3 and S3Protocol().cap_unannotated is False
    capped = make_small("searchgym/S3-v0", protocol_options={"cap_unannotated": True}).unwrapped
    assert capped.protocol.cap_unannotated is True and capped.game.log.cap_unannotated is True
    with pytest.raises(ConfigError, match=re.escape("S3Protocol expects cap_unannotated to be True (a window never annotated gives its top docs_per_window) or False (all of its documents, s3's App. A.5), got 'yes'.")):
        S3Protocol(cap_unannotated="yes")
    assert make_protocol("s3", docs_per_window=None).docs_per_window is None
    assert make_small("searchgym/S3-v0", protocol_options={"docs_per_window": 5}).unwrapped.protocol.docs_per_window == 5
    with pytest.raises(ConfigError, match=re.escape("S3Protocol expects docs_per_window to be a positive integer (s3's App. C: 3) or None (no cap), got 0.")):
        S3Protocol(docs_per_window=0)
    with pytest.raises(ConfigError, match=re.escape("Protocol 'search_r1' does not take 'docs_per_window'; expected options among: prompt.")):
        make_protocol("search_r1", docs_per_window=3)
    with pytest.raises(ConfigError, match=re.escape("make_protocol got a protocol object and also options ['docs_per_window']")):
        make_protocol(S3Protocol(), docs_per_window=3)


def test_on_s3s_training_questions_no_strategy_beats_an_honest_episode_that_ends_wrong():
    env = make_small("searchgym/S3-v0", split="train", question_filter="s3")
    inner = env.unwrapped
    n = min(len(inner.examples), QUESTIONS)
    assert n >= 50
    honest_wrong = []
    for i in range(n):  # an honest search for the question's words; the generator still ends wrong
        env.reset(options={"example_index": i})
        words = " ".join(re.findall(r"\w+", inner.examples[i].question.lower()))
        env.step(inner.protocol.write([Search(words)]))
        _, reward, _, _, info = env.step(inner.protocol.write([Select((1, 2)), Complete()]))
        if info["reward_components"]["gen_acc"] == 0.0:
            honest_wrong.append(reward)
    assert honest_wrong and set(honest_wrong) == {0.0}
    gains = mean_gains(env, n)
    print(f"\ns3 training questions ({n}): honest wrong earns 0.000")
    for name, gain in gains.items():
        print(f"  {name:30s} {gain:+.3f}")
        assert gain <= 0.0, name
