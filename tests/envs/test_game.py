"""The search game on its own: no Gymnasium, a scripted retriever, the rules as state."""

import pytest

from searchgym.corpora.types import Hit, Passage, QAExample
from searchgym.envs.components.frozen import make_frozen
from searchgym.envs.components.summarizers import make_summarizer
from searchgym.envs.protocols import Answer, Complete, Evidence, Search, Select, make_protocol
from searchgym.envs.single.game import SearchGame, SearchLog
from searchgym.error import ConfigError, SearchGymError
from searchgym.rewards import make_recipe

PASSAGES = {f"p{i}": Passage(f"p{i}", f"Title {i}", f"Passage number {i}.") for i in range(1, 10)}
GOLD = Passage("gold", "Kelvaro Industries", "Kelvaro Industries was founded by Ilvar Odrenko in 1901.")
EXAMPLE = QAExample("q1", "Who founded Kelvaro Industries?", ("Ilvar Odrenko",))


class ScriptedRetriever:
    """Returns fixed documents per query (the gold one for a query naming Kelvaro) and
    records every query it was asked."""

    def __init__(self):
        self.queries = []

    def search(self, queries, k):
        self.queries.extend(queries)
        out = []
        for q in queries:
            docs = [GOLD] if "Kelvaro" in q else []
            docs += [PASSAGES[f"p{i}"] for i in range(1 + len(self.queries) % 3, 10)]
            out.append([Hit(p, float(10 - n)) for n, p in enumerate(docs[:k])])
        return out


def make_game(protocol="search_r1", reward="search_r1_em", **kwargs):
    recipe = make_recipe(reward, generator=make_frozen("generator", "gold-span")) if reward.startswith("s3") else make_recipe(reward)
    return SearchGame(make_protocol(protocol), ScriptedRetriever(), make_summarizer(None), recipe, **kwargs)


def play(game, *actions):
    return [game.step(game.protocol.write(list(a))) for a in actions]


# ---------------------------------------------------------------- SearchLog
def hits(*ids):
    return [Hit(PASSAGES[i], 1.0) for i in ids]


def test_log_selection_keeps_each_document_once_and_ignores_numbers_outside_the_window():
    log = SearchLog(max_turns=4)
    assert log.select([1]) == []  # no window yet: nothing to select
    log.open_window("a", hits("p1", "p2", "p3"))
    assert [h.passage.id for h in log.select([2, 2, 7, 0, -1])] == ["p2"]
    log.open_window("b", hits("p2", "p4"))
    assert [h.passage.id for h in log.select([1, 2])] == ["p4"]  # p2 is already kept
    assert [h.passage.id for h in log.selected] == ["p2", "p4"]
    assert [w.annotated for w in log.windows] == [True, True]


def test_log_context_adds_every_unannotated_window_after_the_kept_documents():
    log = SearchLog(max_turns=4)
    log.open_window("a", hits("p1", "p2"))
    log.open_window("b", hits("p3", "p4"))
    log.select([2])
    log.open_window("c", hits("p2", "p5", "p1"))
    assert [h.passage.id for h in log.context()] == ["p4", "p1", "p2", "p5"]
    assert [h.passage.id for h in log.context(keep_unannotated=False)] == ["p4"]
    log.select([])  # an empty selection still annotates the window
    assert [h.passage.id for h in log.context()] == ["p4", "p1", "p2"]


def test_log_budgets():
    log = SearchLog(max_turns=3, max_searches=1)
    assert log.can_search_next() and not log.final_turn and not log.budget_spent
    log.turn = 1
    assert log.can_search_next()
    log.num_searches = 1
    assert log.budget_spent and not log.can_search_next()
    log = SearchLog(max_turns=3)
    log.turn = 2
    assert not log.can_search_next()  # the next turn is the last: its search would not run
    log.turn = 3
    assert log.final_turn


# ---------------------------------------------------------------- SearchGame
def test_answering_game_searches_then_scores_the_answer():
    game = make_game(max_turns=3)
    prompt, info = game.reset(EXAMPLE)
    assert EXAMPLE.question in prompt and info["question"] == EXAMPLE.question and info["turn"] == 0
    assert game.prompt == prompt and game.transcript == prompt and not game.done
    (obs, reward, terminated, truncated, info), = play(game, [Search("Kelvaro founder")])
    assert "Ilvar Odrenko" in obs and reward == 0.0 and not (terminated or truncated)
    assert info["retrieved_ids"][0] == "gold" and game.num_searches == 1 and game.turn == 1
    assert game.retrieved[0][0] == GOLD and len(game.retrieved[0]) == 3
    (obs, reward, terminated, truncated, info), = play(game, [Answer("Ilvar Odrenko")])
    assert obs == "" and reward == 1.0 and terminated and not truncated
    assert game.done and game.answer == "Ilvar Odrenko" and info["prediction"] == "Ilvar Odrenko"
    assert info["context_chars"] == len(game.transcript)
    with pytest.raises(SearchGymError, match=r"^SearchGame.step\(\) was called on a finished episode; call reset\(\) first\.$"):
        game.step("more")


def test_last_turn_search_is_not_run_and_truncates():
    game = make_game(max_turns=2)
    game.reset(EXAMPLE)
    play(game, [Search("first")])
    asked = list(game.retriever.queries)
    (obs, reward, terminated, truncated, info), = play(game, [Search("Kelvaro")])
    assert truncated and not terminated and obs == "" and info["query"] == "Kelvaro"
    assert game.retriever.queries == asked and game.num_searches == 1 and info["retrieved_ids"] == []


def test_search_budget_gives_the_protocols_feedback():
    game = make_game(max_turns=5, max_searches=1)
    game.reset(EXAMPLE)
    play(game, [Search("first")])
    (obs, *_), = play(game, [Search("second")])
    assert obs == game.protocol.budget_feedback() and game.num_searches == 1
    assert game.records[-1].observation == ("budget",)


def test_s3_game_selection_and_generator_context():
    game = make_game("s3", "s3_gbr", top_k=3, initial_top_k=2, max_turns=4)
    _, info = game.reset(EXAMPLE)
    initial = info["retrieved_ids"]
    assert initial[0] == "gold" and len(initial) == 2 and len(game.log.windows) == 1
    play(game, [Search("other things")])  # the initial window is never annotated
    searched = [h.passage.id for h in game.log.windows[-1].shown]
    (_, reward, terminated, _, info), = play(game, [Select((2, 9)), Complete()])
    assert terminated and info["selected_ids"] == [searched[1]]
    assert [p.id for p in game.generator_context()] == [searched[1], *initial]
    assert info["prediction"] == "Ilvar Odrenko"  # the gold-span generator read the initial gold document
    assert info["reward_components"]["gen_acc"] == 1.0 and reward == pytest.approx(info["reward_components"]["gain_beyond_rag"])


def test_evidence_is_kept_and_malformed_turns_count():
    game = SearchGame(
        make_protocol("r_search"), ScriptedRetriever(), make_summarizer(None),
        make_recipe("r_search", reader=make_frozen("reader", "gold-span")), max_turns=4,
    )
    game.reset(EXAMPLE)
    obs, reward, *_ = game.step("no tags at all")
    assert obs == game.protocol.invalid_feedback() and game.num_invalid == 1
    assert reward == game.recipe.invalid_action_penalty
    (_, _, terminated, _, info), = play(game, [Evidence("Ilvar Odrenko founded it."), Answer("Ilvar Odrenko")])
    assert terminated and game.evidence == "Ilvar Odrenko founded it." and info["evidence"] == game.evidence
    assert not game.record().format_ok and game.record().num_invalid == 1


@pytest.mark.parametrize("action", [b"\xff<search>x</search>", "x" * 50, "<answer>", "", "\x00" * 3])
def test_any_action_string_is_a_turn(action):
    game = make_game(max_turns=2, max_action_chars=20, max_observation_chars=30)
    game.reset(EXAMPLE)
    obs, reward, terminated, truncated, info = game.step(action)
    assert isinstance(obs, str) and len(obs) <= 30 and info["turn"] == 1
    assert info["action_truncated"] == (len(action) > 20)


def test_non_text_action_and_bad_budgets_raise():
    game = make_game()
    with pytest.raises(SearchGymError, match=r"^SearchGame.episode\(\) was called before reset\(\)"):
        game.record()
    game.reset(EXAMPLE)
    with pytest.raises(SearchGymError, match=r"^SearchGame.step expects the action to be a str \(one agent turn\), got int\.$"):
        game.step(3)
    with pytest.raises(ConfigError, match=r"^SearchGame expects max_turns to be a positive integer, got 0\.$"):
        make_game(max_turns=0)
