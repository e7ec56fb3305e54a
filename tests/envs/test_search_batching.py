"""A round's searches go out as one batch: plays yield their searches like their model calls,
and every caller that steps many episodes (driver, vector env, reset, s3's filter) makes one
``retriever.search(queries, k)`` per retriever and ``k``, with the hits of searching alone."""

import gymnasium as gym
import pytest
from env_helpers import SMALL_WORLD, make_small, search_turn

from searchgym.agents.driver import Task, run_episodes
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.envs import BatchCounts, SearchCall, play_all, reset_all, step_all
from searchgym.envs.components.model_calls import run_play as _run
from searchgym.envs.single.vector import SearchVectorEnv
from searchgym.error import BackendError


class CountingRetriever:
    """A retriever that records each ``search`` call (its queries and k) and delegates."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, queries, k):
        self.calls.append((tuple(queries), k))
        return self.inner.search(queries, k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def shared_counter(envs):
    counting = CountingRetriever(envs[0].unwrapped.retriever)
    for env in envs:
        env.unwrapped.retriever = counting
    return counting


def searcher(retriever, queries, k):
    hits = yield SearchCall(retriever, tuple(queries), k)
    return [[h.passage.id for h in found] for found in hits]


def test_play_all_joins_searches_per_retriever_and_k_in_play_order():
    env = make_small("searchgym/SearchR1-v0")
    one, two = CountingRetriever(env.unwrapped.retriever), CountingRetriever(env.unwrapped.retriever)
    plays = [searcher(one, ["alpha city"], 3), searcher(one, ["beta", "gamma river"], 3), searcher(two, ["delta"], 3),
             searcher(one, ["epsilon"], 5)]
    counts = BatchCounts()
    got = play_all(plays, counts)
    assert one.calls == [(("alpha city", "beta", "gamma river"), 3), (("epsilon",), 5)] and two.calls == [(("delta",), 3)]
    alone = [_run(searcher(env.unwrapped.retriever, q, k)) for q, k in ((["alpha city"], 3), (["beta", "gamma river"], 3), (["delta"], 3), (["epsilon"], 5))]
    assert got == alone
    assert (counts.searches, counts.search_requests, counts.calls, counts.rounds) == (3, 4, 0, 1)


def test_a_failing_or_miscounting_retriever_ends_only_its_plays():
    class Broken:
        def search(self, queries, k):
            raise BackendError("the retrieval server timed out")

    class Short:
        def search(self, queries, k):
            return [[]]  # one list for any number of queries

    env = make_small("searchgym/SearchR1-v0")
    out = play_all([searcher(Broken(), ["a"], 3), searcher(env.unwrapped.retriever, ["b"], 3), searcher(Short(), ["c", "d"], 3)])
    assert isinstance(out[0], BackendError) and isinstance(out[1], list)
    assert isinstance(out[2], BackendError) and "expects one list of hits per query: 2 queries, got 1" in str(out[2])


def test_step_all_makes_one_search_call_for_the_round_with_the_hits_of_stepping_alone():
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(8)]
    questions = envs[0].unwrapped.examples[:8]
    actions = [search_turn(envs[0], ex.question) for ex in questions]
    counting = shared_counter(envs)
    for env, ex in zip(envs, questions):
        env.reset(seed=0, options={"example_id": ex.id})
    together = step_all(envs, actions)
    assert counting.calls == [(tuple(ex.question for ex in questions), 3)]
    for env, ex in zip(envs, questions):
        env.reset(seed=0, options={"example_id": ex.id})
    alone = [env.step(action) for env, action in zip(envs, actions)]
    assert len(counting.calls) == 1 + 8 and together == alone


def test_the_driver_batches_every_rounds_searches_and_s3s_first_retrievals_and_naive_rag():
    envs = [make_small("searchgym/S3-v0") for _ in range(6)]
    counting = shared_counter(envs)
    tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:12]]
    counts = BatchCounts()
    together = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks, batch_counts=counts)
    # 12 first retrievals, the oracle's searches and the naive-RAG baselines, in far fewer calls; the
    # six envs' first resets run through gym.make's wrappers, one search each
    assert sum(len(q) for q, _ in counting.calls) == counts.search_requests + 6
    assert counts.search_requests > 2 * counts.searches and len(counting.calls) == counts.searches + 6
    # after each env's first reset (run through gym.make's wrappers), the slots that free up
    # in one round reset with one search
    assert max(len(q) for q, _ in counting.calls) >= 2
    counting.calls.clear()
    alone = run_episodes(envs[:1], SynthWikiOracle.for_env(envs[0]), tasks)
    assert all(len(q) == 1 for q, _ in counting.calls)
    key = lambda r: (r.example_id, r.reward, r.reward_components, r.prediction, r.num_searches)  # noqa: E731
    assert [key(r) for r in together] == [key(r) for r in alone]


def test_reset_all_resets_s3_envs_with_one_search_once_the_wrappers_saw_a_reset():
    envs = [make_small("searchgym/S3-v0") for _ in range(4)]
    counting = shared_counter(envs)
    ids = [ex.id for ex in envs[0].unwrapped.examples[:4]]
    first = reset_all(envs, seeds=[0] * 4, options=[{"example_id": i} for i in ids])
    # gym.make's wrappers check and record a first reset: it runs through them, one search each
    assert [len(q) for q, _ in counting.calls] == [1, 1, 1, 1]
    counting.calls.clear()
    out = reset_all(envs, seeds=[0] * 4, options=[{"example_id": i} for i in ids])
    assert len(counting.calls) == 1 and len(counting.calls[0][0]) == 4
    alone = [env.reset(seed=0, options={"example_id": i}) for env, i in zip(envs, ids)]
    for batch in (first, out):
        assert [o for o, _ in batch] == [o for o, _ in alone]
        assert [i["retrieved_ids"] for _, i in batch] == [i["retrieved_ids"] for _, i in alone]
    envs[0].step("<search_complete>True</search_complete>")  # through gym.make's wrappers after a batched reset
    bare = [env.unwrapped for env in envs]
    counting.calls.clear()
    reset_all(bare, options=[{"example_id": i} for i in ids])
    assert len(counting.calls) == 1  # a bare SearchEnv batches from its first reset


def test_the_vector_env_searches_once_a_round():
    vec = gym.make_vec("searchgym/SearchR1-v0", num_envs=4, corpus_options=SMALL_WORLD)
    assert isinstance(vec.unwrapped, SearchVectorEnv)
    vec.reset(seed=0)
    counting = shared_counter(vec.unwrapped.envs)
    vec.step([search_turn(vec.unwrapped.envs[0], q) for q in ("a city", "a river", "a company", "a person")])
    assert counting.calls == [(("a city", "a river", "a company", "a person"), 3)]
    assert vec.unwrapped.batch_counts.searches >= 1
    with pytest.raises(Exception, match="num_envs to be a positive integer, got 0"):
        SearchVectorEnv(0)


def test_the_s3_filter_searches_its_questions_in_chunks():
    from searchgym.envs.components.filter_cache import clear_filter_cache
    from searchgym.envs.components.question_filters import SEARCH_CHUNK, s3_training_questions

    clear_filter_cache()
    env = make_small("searchgym/S3-v0", split="train")
    counting = CountingRetriever(env.unwrapped.retriever)

    examples = env.unwrapped.examples[: SEARCH_CHUNK + 10]
    kept = s3_training_questions(examples, counting, env.unwrapped.recipe, initial_top_k=3)
    assert len(counting.calls) == 2 and all(k == 3 for _, k in counting.calls)
    clear_filter_cache()
    one_by_one = []
    for ex in examples:
        one_by_one += s3_training_questions([ex], env.unwrapped.retriever, env.unwrapped.recipe, initial_top_k=3)
        clear_filter_cache()
    assert [e.id for e in kept] == [e.id for e in one_by_one]
