"""s3's naive-RAG baseline and training filter are computed once, then read from caches."""

from env_helpers import make_small
from searchgym.envs.protocols import Complete, Search, Select


class CountingRetriever:
    """The env's retriever, with every ``search`` call recorded as (queries, k)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def search(self, queries, k):
        self.calls.append((tuple(queries), k))
        return self.inner.search(queries, k)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def play(env, index, turns):
    env.reset(options={"example_index": index})
    for actions in turns:
        _, reward, terminated, truncated, info = env.step(env.unwrapped.protocol.write(actions))
        if terminated or truncated:
            return reward, info
    raise AssertionError("the episode did not end")


def test_the_matched_baseline_searches_once_per_question_and_size():
    env = make_small("searchgym/S3-v0", split="train")
    inner = env.unwrapped
    counting = inner.game.retriever = CountingRetriever(inner.game.retriever)
    question = inner.examples[0].question
    # Documents 4 to 8 of the question kept: the matched baseline reads the naive top-8, not the initial top-3.
    deep = [[Search(question)], [Select((4, 5, 6)), Search(question)], [Select((7, 8)), Complete()]]
    shallow = [[Complete()]]
    sizes = []
    for turns in (deep, shallow):
        per_episode, results = [], []
        for _ in range(4):
            before = len(counting.calls)
            reward, info = play(env, 0, turns)
            per_episode.append(counting.calls[before:])
            size = inner.recipe.naive_rag_size(len(inner.game.generator_context()), inner.initial_top_k)
            results.append((reward, info["reward_components"]))
        sizes.append(size)
        # The first episode searches the baseline's documents once; the later ones make every other call only.
        first = list(per_episode[0])
        first.remove(((question,), size))
        assert first == per_episode[1] == per_episode[2] == per_episode[3]
        assert all(results[0] == r for r in results[1:])
        # The reward is the one computed from scratch (the cache emptied before each episode).
        inner.recipe.naive_rag_cache.clear()
        assert play(env, 0, turns)[1]["reward_components"] == results[0][1]
    assert sizes[0] > sizes[1] == inner.initial_top_k
