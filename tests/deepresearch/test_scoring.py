"""The browse game's scores: each metric on hand-built episodes, the calibration error, the judge."""

from __future__ import annotations

import math

import pytest

from searchgym.deepresearch.protocol import CitedAnswer, Find, Open
from searchgym.deepresearch.scoring import BROWSE_METRICS, DeepResearchReward, browse_metrics, calibration_error, opened_ids
from searchgym.envs.components.lm_frozen import LMJudge
from searchgym.envs.protocols.base import Search
from searchgym.error import ConfigError
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer
from searchgym.rewards import Episode, SearchRecord, Turn
from searchgym.rewards.judges import judge_prompt, parse_verdict

META = {"evidence_ids": ["e1", "e2", "e3", "g1"], "gold_ids": ["g1"]}


def episode(answer=None, citations=(), confidence=None, searches=(), opens=(), budget_opens=(), metadata=META):
    turns = [Turn(f"<search> q{i} </search>", ("search",), ("documents",), i, (Search(f"q{i}"),)) for i in range(len(searches))]
    for doc in opens:
        turns.append(Turn(f"<open> {doc} 1 </open>", ("open",), (), len(turns), (Open(doc, 1),)))
    for doc in budget_opens:
        turns.append(Turn(f"<open> {doc} 1 </open>", ("open",), ("budget",), len(turns), (Open(doc, 1),)))
    if answer is not None:
        turns.append(Turn(f"<answer> {answer} </answer>", ("answer",), (), len(turns), (CitedAnswer(answer, tuple(citations), confidence),)))
    records = tuple(SearchRecord(i + 1, i, f"q{i}", ids, tuple("t" for _ in ids)) for i, ids in enumerate(searches))
    return Episode(question="Which person?", answers=("Ana Vell",), turns=tuple(turns), answer=answer, metadata=dict(metadata),
                   searches=records)


def test_every_metric_on_one_episode():
    ep = episode("Ana Vell", citations=["g1", "e1", "forged"], confidence=80, searches=[("e1", "x", "y")],
                 opens=["e2", "x"], budget_opens=["e3"])
    metrics = browse_metrics(ep, 1.0)
    # shown e1, x, y; opened e2, x (e3's open was past the budget: not read)
    assert metrics == {"correct": 1.0, "evidence_recall": 0.5, "gold_recall": 0.0, "citation_precision": 2 / 3,
                       "citation_recall": 0.5, "calls": 3.0, "confidence": 0.8}
    assert list(metrics)[:len(BROWSE_METRICS)] == list(BROWSE_METRICS)
    assert opened_ids(ep) == ["e2", "x"]


def test_the_default_reward_is_correctness_and_the_metrics_ride_along():
    recipe = DeepResearchReward()
    right, wrong = recipe.score(episode("ana vell.")), recipe.score(episode("Bo Tarn", citations=["g1"]))
    assert (right.total, wrong.total) == (1.0, 0.0)
    assert right.components["correct"] == 1.0 and "confidence" not in right.components
    assert wrong.components["citation_precision"] == 1.0
    assert recipe.score(episode()).total == 0.0  # never answered
    assert recipe.describe() == "correct (exact match after normalization)"


def test_the_evidence_terms_are_f1_so_doing_more_is_not_worth_more():
    recipe = DeepResearchReward(citation_weight=1.0, evidence_weight=1.0)
    honest = recipe.score(episode("Bo Tarn", citations=["g1"], opens=["g1"]))
    everything = recipe.score(episode("Bo Tarn", citations=[f"d{i}" for i in range(9)] + ["g1"],
                                      opens=[f"d{i}" for i in range(60)] + ["g1", "e1"]))
    assert honest.components["citation_f1"] == pytest.approx(2 * 1 * 0.25 / 1.25)
    assert everything.total < honest.total


def test_the_calibration_term_is_a_brier_score():
    recipe = DeepResearchReward(calibration_weight=1.0)
    assert recipe.score(episode("Ana Vell", confidence=100)).total == 1.0
    assert recipe.score(episode("Bo Tarn", confidence=100)).total == -1.0
    assert recipe.score(episode("Bo Tarn", confidence=0)).total == 0.0
    assert recipe.score(episode("Bo Tarn")).total == -0.25  # no confidence stated: charged as 50


@pytest.mark.parametrize("options, message", [
    ({"citation_weight": -1}, "DeepResearchReward expects citation_weight to be a finite number >= 0, got -1."),
    ({"evidence_weight": float("nan")}, "DeepResearchReward expects evidence_weight to be a finite number >= 0, got nan."),
    ({"strict": "yes"}, "DeepResearchReward expects strict to be True or False, got 'yes'."),
])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ConfigError) as e:
        DeepResearchReward(**options)
    assert str(e.value) == message


def test_calibration_error_as_browsecomp_computes_it():
    assert calibration_error([], []) is None
    assert calibration_error([1.0, 1.0], [1.0, 1.0]) == 0.0
    assert calibration_error([1.0, 1.0], [0.0, 0.0]) == 1.0
    # one bin of four: mean confidence 0.6, accuracy 0.5
    assert calibration_error([0.9, 0.3, 0.6, 0.6], [1, 0, 1, 0]) == pytest.approx(0.1)
    # two bins of two (bin_size=2): (0.1, 0.2) right 0 -> gap 0.15; (0.8, 0.9) right 1 -> gap -0.15
    assert calibration_error([0.9, 0.1, 0.8, 0.2], [1, 0, 1, 0], bin_size=2) == pytest.approx(0.15)
    # a last bin smaller than bin_size joins the one before it
    assert calibration_error([0.1, 0.2, 0.9], [0, 0, 1], bin_size=2) == pytest.approx(math.sqrt(((0.4 - 1 / 3) ** 2)))
    with pytest.raises(ConfigError):
        calibration_error([0.5], [])


def test_a_hedged_answer_scores_as_a_wrong_one():
    recipe = DeepResearchReward()
    assert recipe.score(episode("Ana Vell or Bo Tarn")).total == 0.0
    assert DeepResearchReward(strict=False).score(episode("Ana Vell")).total == 1.0


def test_a_judge_decides_what_exact_match_cannot():
    asked = []
    judge = lambda q, p, a: asked.append(p) or p == "A. Vell"  # noqa: E731
    recipe = DeepResearchReward(judge=judge)
    assert recipe.score(episode("A. Vell")).total == 1.0
    assert recipe.score(episode("Ana Vell")).total == 1.0  # exact match needs no judge
    assert asked == ["A. Vell"]


class Replies(ScriptedLM):
    def __init__(self, reply):
        super().__init__([reply], tiny_tokenizer())


@pytest.mark.parametrize("reply, verdict", [
    ("extracted_final_answer: Ana Vell\nreasoning: same person\ncorrect: yes\nconfidence: 80%", True),
    ("extracted_final_answer: Bo\nreasoning: another person\n**correct:** no\nconfidence: 100%", False),
    ("Correct: Yes", True),
    ("correct? maybe", None),
    ("yes", None),  # the first word is no verdict in this form
])
def test_browsecomps_grader_form_is_read_from_its_correct_line(reply, verdict):
    assert parse_verdict(reply, judge_prompt("browsecomp")) is verdict


def test_an_lm_judge_with_the_browsecomp_form():
    judge = LMJudge(Replies("extracted_final_answer: Ana Vell\nreasoning: same\ncorrect: yes\nconfidence: 90%"), prompt="browsecomp")
    assert judge.max_new_tokens == 256 and LMJudge(Replies("yes")).max_new_tokens == 10
    prompt = judge.messages("Which person?", "A. Vell", ["Ana Vell"])[0]["content"]
    assert "[correct_answer]: ['Ana Vell']" in prompt and "correct: yes if" in prompt
    assert judge("Which person?", "A. Vell", ["Ana Vell"]) is True
    assert DeepResearchReward(judge=judge).score(episode("A. Vell")).total == 1.0
