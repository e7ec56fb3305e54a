"""The questions and envs of a training run: the seeded question order, the envs'
arguments, and the timed retriever."""

import pytest

from env_helpers import SMALL_WORLD, make_small
from searchgym.error import ConfigError
from searchgym.training.args import Args
from searchgym.training.data import DataOrder, TimedRetriever, env_kwargs, reward_at, timed_retriever


def test_the_question_order_is_seeded_reshuffled_every_epoch_and_resumes_from_its_state():
    ids = [f"q{i}" for i in range(5)]
    order = DataOrder(ids, seed=3)
    first = order.take(7)  # one epoch and two of the next
    assert sorted(first[:5]) == ids and first[:5] != ids
    assert order.state() == {"epoch": 1, "position": 2}
    resumed = DataOrder(ids, seed=3)
    resumed.load(order.state())
    assert resumed.take(6) == order.take(6)
    assert DataOrder(ids, seed=3).take(5) == first[:5] and DataOrder(ids, seed=4).take(5) != first[:5]
    with pytest.raises(ConfigError, match="The training split has no questions"):
        DataOrder([], seed=0)


def test_eval_env_options_apply_to_evaluation_even_on_the_training_split():
    args = Args(env_options={"max_turns": 2}, train_split="dev", eval_split="dev", eval_env_options={"max_turns": 3})
    assert env_kwargs(args, "dev", None, frozen=None)["max_turns"] == 2
    assert env_kwargs(args, "dev", None, frozen=None, evaluation=True)["max_turns"] == 3


def test_the_curriculum_stage_picks_the_reward():
    args = Args(env_id="R1Searcher-v0", reward="r1_searcher_stage1", stage2_reward="r1_searcher_stage2", stage2_step=3)
    assert [reward_at(args, step) for step in (0, 2, 3, 9)] == ["r1_searcher_stage1"] * 2 + ["r1_searcher_stage2"] * 2
    assert env_kwargs(args, "train", reward_at(args, 3), frozen=None)["reward"] == "r1_searcher_stage2"


def test_the_timed_retriever_wraps_the_shared_instance_and_sums_its_search_time():
    options = {"corpus_options": SMALL_WORLD, "retriever_options": {"k1": 1.2}}
    timed = timed_retriever("SearchR1-v0", options)
    shared = make_small("searchgym/SearchR1-v0", retriever_options={"k1": 1.2}).unwrapped.retriever
    assert isinstance(timed, TimedRetriever) and timed.inner is shared and timed.corpus is shared.corpus
    assert timed.seconds == 0.0
    assert timed.search(["capital", "river"], 2) == shared.search(["capital", "river"], 2)
    assert timed.seconds > 0.0
    assert "search" not in vars(shared)  # the instance every env shares is not modified
    env = make_small("searchgym/SearchR1-v0", retriever=timed)  # the env's own option
    assert env.unwrapped.retriever is timed


def test_the_judge_model_reaches_s3_envs_and_is_refused_where_no_reward_asks_one():
    from searchgym.training.args import check_args

    args = Args(env_id="S3-v0", env_options={"corpus_options": SMALL_WORLD}, judge_model="tiny-random")
    check_args(args)
    kwargs = env_kwargs(args, "train", None, frozen=None)
    assert kwargs["judge"] == "tiny-random"
    env = make_small("searchgym/S3-v0", **{k: v for k, v in kwargs.items() if k != "corpus_options"})
    assert type(env.unwrapped.recipe.judge).__name__ == "LMJudge" and env.unwrapped.recipe.judge.prompt.name == "s3"
    with pytest.raises(ConfigError, match=r"^Args\.judge_model \('tiny-random'\) is the LLM judge of s3's GenAcc, but the reward 'r1_searcher_stage2' asks no judge"):
        check_args(Args(env_id="R1Searcher-v0", judge_model="tiny-random"))
