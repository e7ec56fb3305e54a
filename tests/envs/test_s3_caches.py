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


# ---------------------------------------------------------------- s3's training filter
def gold_parrot(examples):
    """A scripted generator LM that answers with the first gold answer its prompt holds
    (naive RAG right exactly when the documents hold a gold), recording its calls."""
    from lm_helpers import recording_lm

    golds = sorted({a for ex in examples for a in ex.answers}, key=len, reverse=True)
    return recording_lm(lambda prompt: next((g for g in golds if g in prompt), "Nobody"))


def test_the_s3_filter_asks_the_generator_once_per_setting_in_a_process():
    from searchgym.envs.components.filter_cache import clear_filter_cache

    clear_filter_cache()
    examples = make_small("searchgym/S3-v0", split="train").unwrapped.examples
    lm = gold_parrot(examples)
    first = make_small("searchgym/S3-v0", split="train", question_filter="s3", generator=lm, limit=20)
    asked = sum(lm.batches)
    assert asked >= 20
    second = make_small("searchgym/S3-v0", split="train", question_filter="s3", generator=lm, limit=20)
    assert sum(lm.batches) == asked  # the second env asked nothing
    assert [ex.id for ex in second.unwrapped.examples] == [ex.id for ex in first.unwrapped.examples]
    assert len(first.unwrapped.examples) == 20
    # Its baseline is in the recipe's cache: an episode asks the generator for the searcher's side only.
    second.reset(options={"example_index": 0})
    *_, info = second.step("<search_complete>True</search_complete>")
    assert sum(lm.batches) == asked + 1 and info["reward_components"]["naive_rag_acc"] == 0.0
    # A larger limit asks only for the questions not asked yet.
    make_small("searchgym/S3-v0", split="train", question_filter="s3", generator=lm, limit=25)
    assert asked + 1 < sum(lm.batches) < 2 * asked


def test_the_s3_filter_verdicts_survive_the_process_on_disk(tmp_path, monkeypatch):
    """A re-run (another process) reads the verdicts from the cache folder: here the
    in-memory verdicts are forgotten and the built-in gold-span generator is counted."""
    from searchgym.envs.components.filter_cache import clear_filter_cache
    from searchgym.rewards.base import GoldSpanReader

    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path))
    calls = []
    read = GoldSpanReader.__call__
    monkeypatch.setattr(GoldSpanReader, "__call__", lambda self, *a, **kw: (calls.append(a[0]), read(self, *a, **kw))[1])
    clear_filter_cache()
    first = make_small("searchgym/S3-v0", split="train", question_filter="s3")
    asked = len(calls)
    files = list((tmp_path / "s3-filter").glob("*.json"))
    assert asked > 0 and len(files) == 1
    clear_filter_cache()
    second = make_small("searchgym/S3-v0", split="train", question_filter="s3")
    assert len(calls) == asked
    assert [ex.id for ex in second.unwrapped.examples] == [ex.id for ex in first.unwrapped.examples]
    # Another top-n is another setting: asked again, in a file of its own.
    clear_filter_cache()
    make_small("searchgym/S3-v0", split="train", question_filter="s3", initial_top_k=5)
    assert len(calls) > asked and len(list((tmp_path / "s3-filter").glob("*.json"))) == 2
    # A damaged file is computed again, with the same questions.
    files[0].write_text("{not json")
    clear_filter_cache()
    before = len(calls)
    third = make_small("searchgym/S3-v0", split="train", question_filter="s3")
    assert len(calls) - before == asked
    assert [ex.id for ex in third.unwrapped.examples] == [ex.id for ex in first.unwrapped.examples]


def test_only_settings_named_the_same_in_every_process_go_to_disk():
    from searchgym.corpora.retrievers import make_retriever
    from searchgym.envs.components.filter_cache import stable_identity
    from searchgym.envs.components.lm_frozen import LMGenerator, LMJudge
    from searchgym.lm.registry import load_lm
    from searchgym.rewards.base import GoldSpanReader

    env = make_small("searchgym/S3-v0")
    assert stable_identity(GoldSpanReader()) == "searchgym.rewards.base.GoldSpanReader"
    assert stable_identity(None) == "none"
    assert stable_identity(env.unwrapped.game.retriever)[0] == "retriever"
    hand_made = gold_parrot([])
    assert stable_identity(LMGenerator(hand_made)) is None and stable_identity(lambda q, d: "x") is None
    tiny = load_lm("tiny-random")
    assert stable_identity(LMJudge(tiny, prompt="r1-searcher")) == [
        "LMJudge", ["lm", "tiny-random", "transformers", [], None],
        {"max_new_tokens": 10, "temperature": 0.0, "top_p": 1.0, "prompt": "r1-searcher"},
    ]
    from searchgym.corpora.bm25 import BM25Retriever

    assert stable_identity(BM25Retriever(env.unwrapped.corpus)) is None
    assert make_retriever("bm25", env.unwrapped.corpus) is env.unwrapped.game.retriever
