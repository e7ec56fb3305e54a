"""What a reward recipe reads of an episode: the example with its metadata, each search that
ran (turn, round, query, retrieved ids and texts), each turn's round and parsed actions, and
the calls of one tool turn as one round. Written as a user would: a recipe of their own that
keeps the episodes it scores, and nothing private."""

import json

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search
from searchgym.error import BackendError, ConfigError
from searchgym.rewards import Episode, RewardRecipe, RewardResult, SearchRecord, Turn

SMALL_WORLD = {"seed": 7, "num_passages": 400}


class Keeping(RewardRecipe):
    """Pays nothing; keeps every episode it is shown, per turn and at the end."""

    name = "keeping"

    def __init__(self):
        super().__init__()
        self.turns: list[Episode] = []
        self.scored: list[Episode] = []

    def turn_reward(self, episode):
        self.turns.append(episode)
        return None

    def score(self, episode):
        self.scored.append(episode)
        return RewardResult(0.0, {})


def make(action_format="tags", **kwargs):
    return gym.make("searchgym/SearchR1-v0", corpus_options=SMALL_WORLD, action_format=action_format, **kwargs)


def first_bridge(env):
    """Reset ``env`` on its first 2-hop bridge question."""
    example = next(ex for ex in search_env(env).examples if ex.metadata["type"] == "bridge" and ex.metadata["hops"] == 2)
    env.reset(seed=0, options={"example_id": example.id})
    return example


def tool_message(*calls):
    entries = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": args}}
               for i, (name, args) in enumerate(calls)]
    return {"role": "assistant", "content": "", "tool_calls": entries}


def test_tag_searches_are_one_round_each_with_their_query_ids_and_texts():
    recipe = Keeping()
    env = make(reward=recipe)
    example = first_bridge(env)
    protocol = search_env(env).protocol
    infos = []
    for query in example.metadata["oracle_queries"]:
        infos.append(env.step(protocol.write([Search(query)]))[4])
    env.step(protocol.write([Answer("a wrong answer")]))
    episode = recipe.scored[-1]
    corpus = search_env(env).corpus
    assert [(s.turn, s.round, s.query) for s in episode.searches] == [
        (1, 0, example.metadata["oracle_queries"][0]), (2, 1, example.metadata["oracle_queries"][1])]
    for search, info in zip(episode.searches, infos):
        assert list(search.ids) == info["retrieved_ids"]
        assert list(search.texts) == [f"{corpus.get(i).title}\n{corpus.get(i).text}" for i in search.ids]
    assert [list(s.texts) for s in episode.searches] == episode.retrieved_docs  # the same documents, two views
    assert [t.round for t in episode.turns] == [0, 1, 2] and len(episode.rounds) == 3
    assert episode.turns[0].parsed == (Search(example.metadata["oracle_queries"][0]),)
    assert episode.turns[-1].parsed == (Answer("a wrong answer"),)
    # The oracle queries rank each hop's supporting passage first.
    assert [s.ids[0] for s in episode.searches] == example.metadata["supporting_ids"]


def test_the_episode_carries_the_example_metadata_as_a_copy():
    recipe = Keeping()
    env = make(reward=recipe)
    example = first_bridge(env)
    env.step(search_env(env).protocol.write([Answer("x")]))
    episode = recipe.scored[-1]
    assert episode.metadata == dict(example.metadata) and episode.example_id == example.id
    hops = episode.metadata["hop_facts"]
    assert [h["passage_id"] for h in hops] == example.metadata["supporting_ids"]
    assert [h["answer"] for h in hops] == [*example.metadata["bridge_answers"], example.answers[0]]
    assert [h["evidence"] for h in hops] == example.metadata["evidence"]
    episode.metadata["hop_facts"][0]["answer"] = "changed by a recipe"
    assert example.metadata["hop_facts"][0]["answer"] != "changed by a recipe"
    json.dumps(episode.metadata)  # plain data


def test_parallel_tool_calls_are_one_round_and_sequential_ones_several():
    recipe = Keeping()
    env = make("tools", reward=recipe)
    example = first_bridge(env)
    first, second = example.metadata["oracle_queries"]
    _, _, _, _, info = env.step(tool_message(("search", {"query": first}), ("search", {"query": second})))
    assert info["turn"] == 1 and len(info["retrieved_ids"]) == 6
    env.step(tool_message(("search", {"query": first})))
    env.step(tool_message(("answer", {"answer": "x"})))
    episode = recipe.scored[-1]
    assert [(s.turn, s.round, s.query) for s in episode.searches] == [(1, 0, first), (1, 0, second), (2, 1, first)]
    assert list(episode.searches[0].ids + episode.searches[1].ids) == info["retrieved_ids"]
    rounds = episode.rounds
    assert len(rounds) == 3 and [t.round for r in rounds for t in r] == [t.round for t in episode.turns]
    assert [p for t in rounds[0] for p in t.parsed] == [Search(first), Search(second)]
    assert rounds[2][-1].parsed == (Answer("x"),)
    assert len({s.round for s in episode.searches}) == 2  # search rounds: what parallel search saves


def test_tags_and_tools_give_the_same_searches_for_the_same_decisions():
    by_format = {}
    for action_format in ("tags", "tools"):
        recipe = Keeping()
        env = make(action_format, reward=recipe)
        example = first_bridge(env)
        protocol = search_env(env).protocol
        for query in example.metadata["oracle_queries"]:
            env.step(protocol.write([Search(query)]) if action_format == "tags" else tool_message(("search", {"query": query})))
        env.step(protocol.write([Answer("x")]) if action_format == "tags" else tool_message(("answer", {"answer": "x"})))
        by_format[action_format] = recipe.scored[-1]
    tags, tools = by_format["tags"], by_format["tools"]
    assert tags.searches == tools.searches
    assert [(t.round, t.parsed) for t in tags.turns] == [(t.round, t.parsed) for t in tools.turns]


def test_searches_that_did_not_run_have_no_record():
    recipe = Keeping()
    env = make(reward=recipe, max_turns=3, max_searches=1)
    example = first_bridge(env)
    protocol = search_env(env).protocol
    first, second = example.metadata["oracle_queries"]
    env.step(protocol.write([Search(first)]))
    _, _, _, _, info = env.step(protocol.write([Search(second)]))  # past the budget
    assert info["num_searches"] == 1
    env.step(protocol.write([Search(second)]))  # the last turn: not run
    episode = recipe.scored[-1]
    assert [s.query for s in episode.searches] == [first] and episode.num_searches == 1
    assert [t.parsed for t in episode.turns] == [(Search(first),), (Search(second),), (Search(second),)]


def test_a_turn_reward_sees_the_episode_so_far_after_every_turn():
    recipe = Keeping()
    env = make(reward=recipe)
    example = first_bridge(env)
    protocol = search_env(env).protocol
    first, second = example.metadata["oracle_queries"]
    env.step(protocol.write([Search(first)]))
    env.step(protocol.write([Search(second)]))
    env.step(protocol.write([Answer("x")]))
    seen = recipe.turns
    assert [len(e.turns) for e in seen] == [1, 2, 3] and [len(e.searches) for e in seen] == [1, 2, 2]
    assert [e.answer for e in seen] == [None, None, "x"]
    assert seen[-1].searches == recipe.scored[-1].searches and seen[-1].turns == recipe.scored[-1].turns


class FailingSecondSearch:
    """A search engine whose second call fails (a server down), then works again."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def search(self, queries, k):
        self.calls += 1
        if self.calls == 2:
            raise BackendError("the search server is down")
        return self.inner.search(queries, k)


def test_a_turn_undone_leaves_no_search_record():
    recipe = Keeping()
    base = make()
    env = make(reward=recipe, retriever=FailingSecondSearch(search_env(base).retriever))
    example = first_bridge(env)
    protocol = search_env(env).protocol
    first, second = example.metadata["oracle_queries"]
    env.step(protocol.write([Search(first)]))
    with pytest.raises(BackendError):
        env.step(protocol.write([Search(second)]))
    env.step(protocol.write([Search(second)]))  # played again: one record
    env.step(protocol.write([Answer("x")]))
    assert [(s.turn, s.query) for s in recipe.scored[-1].searches] == [(1, first), (2, second)]


def test_records_built_by_hand_keep_working_and_bad_ones_are_refused():
    old = Episode("Q?", "A", turns=(Turn("<answer>A</answer>", ("answer",)),))
    assert old.metadata == {} and old.searches == () and old.turns[0].round == 0 and old.turns[0].parsed == ()
    with pytest.raises(ConfigError) as e:
        Turn("x", round=-1)
    assert str(e.value) == "Turn expects round to be an integer >= 0 (the agent turn, from 0), got -1."
    with pytest.raises(ConfigError) as e:
        Episode("Q?", "A", searches=({"query": "q"},))
    assert str(e.value) == (
        "Episode expects searches to be SearchRecord records, got dict; build them as SearchRecord(turn, round, query, ids, texts).")
    with pytest.raises(ConfigError) as e:
        Episode("Q?", "A", metadata=["not", "a", "mapping"])
    assert str(e.value) == "Episode expects metadata to be a mapping (the example's), got list."
    with pytest.raises(ConfigError) as e:
        SearchRecord(1, 0, "q", ids=("a", "b"), texts=("only one",))
    assert str(e.value) == "SearchRecord expects one text per retrieved id, got 2 ids and 1 texts."
