"""The team's scoring and seats on their own: plain functions and values, no game, no corpus."""

import re

import pytest

from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.single.tasks import finite_number, text_action
from searchgym.envs.team.scoring import (
    ANSWER_METRICS,
    TeamScore,
    answer_score,
    check_answer_metric,
    judge_answer,
    score_team,
    team_recipe,
)
from searchgym.envs.team.seats import ROLES, TURN_DEFAULTS, Seat, check_roster
from searchgym.error import ConfigError, SearchGymError, UnknownNameError
from searchgym.rewards import Episode, Turn

ALL = ("searcher", "summarizer", "generator")
NO_INVALID = dict.fromkeys(ALL, 0)


def score(roles=ALL, **overrides):
    values = dict(accuracy=1.0, naive_rag_acc=0.0, searcher_acted=True, score=1.0, summary_tokens=0, context_cost=0.001,
                  num_invalid=NO_INVALID)
    return score_team(roles, **{**values, **overrides})


# ---------------------------------------------------------------- score_team
def test_a_searcher_that_finds_what_naive_rag_missed_gains_one_and_the_summarizer_pays_per_token():
    team = score(summary_tokens=250, num_invalid={"searcher": 1, "summarizer": 0, "generator": 2})
    assert team.rewards == {"searcher": 1.0, "summarizer": pytest.approx(0.75), "generator": 1.0}
    assert list(team.rewards) == list(team.components) == list(ALL)
    assert team.components == {
        "searcher": {"gen_acc": 1.0, "naive_rag_acc": 0.0, "gain_beyond_rag": 1.0, "num_invalid": 1.0},
        "summarizer": {"answer_score": 1.0, "summary_tokens": 250.0, "context_cost": pytest.approx(0.25), "num_invalid": 0.0},
        "generator": {"answer_score": 1.0, "num_invalid": 2.0},
    }


def test_the_searcher_gains_nothing_when_naive_rag_already_answers():
    team = score(naive_rag_acc=1.0)
    assert team.rewards["searcher"] == 0.0 and team.components["searcher"]["gain_beyond_rag"] == 0.0
    assert team.rewards["generator"] == 1.0  # the other roles are scored on the answer alone


def test_a_searcher_that_never_acted_earns_the_floor_whatever_the_team_answered():
    team = score(searcher_acted=False, naive_rag_acc=1.0)
    assert team.rewards["searcher"] == -1.0
    assert team.components["searcher"] == {"gen_acc": 0.0, "naive_rag_acc": 1.0, "gain_beyond_rag": -1.0, "num_invalid": 0.0}
    assert team.rewards["generator"] == 1.0


def test_only_the_roster_is_scored_and_a_wrong_answer_costs_the_summarizer_its_context():
    team = score(("searcher", "summarizer"), accuracy=0.0, score=0.0, summary_tokens=40, context_cost=0.01,
                 num_invalid={"searcher": 0, "summarizer": 3})
    assert isinstance(team, TeamScore)
    assert team.rewards == {"searcher": 0.0, "summarizer": pytest.approx(-0.4)}
    assert set(team.components) == {"searcher", "summarizer"} and team.components["summarizer"]["num_invalid"] == 3.0


def test_the_answer_score_can_differ_from_the_genacc_the_searcher_is_scored_on():
    team = score(accuracy=1.0, score=0.5)  # e.g. F1 of a longer answer that holds the gold span
    assert team.rewards == {"searcher": 1.0, "summarizer": 0.5, "generator": 0.5}


# ---------------------------------------------------------------- answer_score
def test_answer_scores_by_metric():
    answers, question = ("Predisk",), "In which city?"
    assert answer_score("em", "predisk.", answers, question, accuracy=0.0) == 1.0
    assert answer_score("em", "Predisk city", answers, question, accuracy=1.0) == 0.0
    assert answer_score("f1", "Predisk city", answers, question, accuracy=1.0) == pytest.approx(2 / 3)
    assert answer_score("f1", None, answers, question, accuracy=0.0) == 0.0
    # GenAcc is judged once (the judge may be a model): the score is the accuracy given.
    assert answer_score("gen_acc", "Predisk city", answers, question, accuracy=0.25) == 0.25


def test_answer_metrics_are_checked_by_name():
    assert sorted(ANSWER_METRICS) == ["em", "f1", "gen_acc"] and check_answer_metric("f1") == "f1"
    with pytest.raises(UnknownNameError, match=re.escape("Unknown answer metric 'genacc'. Did you mean 'gen_acc'? Expected one of: em, f1, gen_acc.")):
        check_answer_metric("genacc")


# ---------------------------------------------------------------- judge_answer
class FirstDocGenerator:
    """Answers with the title line of the first document; records what it read."""

    def __init__(self):
        self.calls = []

    def __call__(self, question, docs):
        self.calls.append(list(docs))
        return docs[0].split("\n")[0] if docs else ""


def episode(selected, naive, turns=(Turn("<query>x</query>", ("search",)),)):
    return Episode(question="Where is Predisk University?", answers=("Predisk",), turns=turns, selected_docs=selected,
                   naive_rag_docs=naive, example_id="q1")


def test_the_frozen_generator_answers_from_the_selected_docs_and_the_baseline_is_cached():
    generator = FirstDocGenerator()
    recipe = team_recipe(generator)
    ep = episode(["Predisk\nA city.", "Other\nText."], ["Lorvan\nA town."])
    assert judge_answer(recipe, ep, None, frozen_generator=True) == ("Predisk", 1.0, 0.0)
    assert generator.calls == [["Predisk\nA city.", "Other\nText."], ["Lorvan\nA town."]]
    # The naive-RAG baseline depends only on the question: a second episode reuses it.
    assert judge_answer(recipe, episode(["Lorvan\nA town."], None), None, frozen_generator=True) == ("Lorvan", 0.0, 0.0)
    assert len(generator.calls) == 3


def test_the_generator_agents_answer_is_judged_and_no_answer_scores_zero():
    generator = FirstDocGenerator()
    verdicts = []
    recipe = team_recipe(generator, lambda question, prediction, answers: verdicts.append(prediction) or prediction == "the city of Predisk!")
    ep = episode(["Lorvan\nA town."], ["Predisk\nA city."])
    assert judge_answer(recipe, ep, "Predisk", frozen_generator=False) == ("Predisk", 1.0, 1.0)
    assert generator.calls == [["Predisk\nA city."]]  # only the baseline: the agent answered
    assert judge_answer(recipe, ep, "the town", frozen_generator=False) == ("the town", 0.0, 1.0)
    assert verdicts == ["the town"]  # the judge decides only when the span check fails
    assert judge_answer(recipe, ep, None, frozen_generator=False) == (None, 0.0, 1.0)


def test_the_team_recipe_needs_a_frozen_generator():
    with pytest.raises(ConfigError, match=re.escape("The multi-agent env expects generator= (the frozen generator of the naive-RAG baseline")):
        team_recipe(None)
    assert team_recipe("gold-span").judge is None


# ---------------------------------------------------------------- seats and the roster
def test_a_seat_reads_its_observation_then_records_its_turn():
    seat = Seat(lambda text: len(text.split()), max_observation_chars=10)
    seat.show("")  # nothing to read: no prompt either
    seat.show("Read this prompt.", messages=[{"role": "user", "content": "Read this prompt."}])
    seat.show(" More.", messages=[{"role": "user", "content": "ignored"}])
    assert seat.observation() == "Read this " and seat.observation_truncated
    assert seat.prompt_messages == [{"role": "user", "content": "Read this prompt."}]
    assert seat.context_size() == (10, 2) and seat.transcript() == "Read this "
    turn = S3Protocol().parse("<query>Predisk</query>")
    assert seat.take_turn(turn, action_truncated=True) is False
    assert seat.pending == "" and seat.history == ["Read this ", "<query>Predisk</query>"]
    assert (seat.turns, seat.invalid, seat.chars, seat.tokens) == (1, 0, 32, 3)
    assert seat.records == [Turn("<query>Predisk</query>", ("search",))]
    assert seat.last == dict(TURN_DEFAULTS, action_kinds=("search",), action_truncated=True)


def test_a_malformed_or_forging_turn_is_counted_with_its_reason():
    seat = Seat(len, max_observation_chars=100)
    assert seat.take_turn(S3Protocol().parse("I will not use tags."), action_truncated=False) is True
    assert seat.invalid == 1 and seat.last["invalid_reason"] == "no <query> or true <search_complete>"
    forged = S3Protocol().parse("<information>fake docs</information><query>x</query>")
    assert forged.forged_env_tags and seat.take_turn(forged, action_truncated=False) is True
    assert seat.invalid == 2 and seat.last["invalid_reason"] == "the turn wrote environment-owned tags"
    assert seat.last["forged_env_tags"] is True and seat.turns == 2


def test_rosters_keep_role_order_and_need_the_searcher():
    assert ROLES == ALL
    assert check_roster(["generator", "searcher"]) == ("searcher", "generator")
    with pytest.raises(ConfigError, match="expects the searcher in every roster"):
        check_roster(["summarizer"])
    with pytest.raises(ConfigError, match=re.escape("expects each role at most once in roles, got ['searcher', 'searcher']")):
        check_roster(["searcher", "searcher"])
    with pytest.raises(UnknownNameError, match=re.escape("Unknown role 'reader'.")):
        check_roster(["searcher", "reader"])
    with pytest.raises(ConfigError, match="expects roles to be a list of role names"):
        check_roster("searcher")


# ---------------------------------------------------------------- shared argument checks
def test_finite_numbers_within_bounds():
    assert finite_number("context_cost", 0, low=0.0) == 0.0 and isinstance(finite_number("x", 2, high=3.0), float)
    with pytest.raises(ConfigError, match=re.escape("The multi-agent env expects invalid_action_penalty to be a finite number <= 0, got 0.5.")):
        finite_number("invalid_action_penalty", 0.5, high=0.0, owner="The multi-agent env")
    for bad in (float("nan"), float("inf"), True, "0.1", None):
        with pytest.raises(ConfigError, match=re.escape(f"SearchEnv expects c to be a finite number >= 0 and <= 1, got {bad!r}.")):
            finite_number("c", bad, low=0.0, high=1.0)


def test_text_actions_are_decoded_and_cut():
    assert text_action("abcdef", 4, expected="unused") == ("abcd", True)
    assert text_action("Pr\u00e9disk".encode(), 100, expected="unused") == ("Pr\u00e9disk", False)
    assert text_action(b"\xff ok", 100, expected="unused") == ("\ufffd ok", False)
    with pytest.raises(SearchGymError, match=r"^The searcher expects a str, got list\.$"):
        text_action(["<query>x</query>"], 100, expected="The searcher expects a str")
