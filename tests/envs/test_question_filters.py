"""s3's training filter: only the questions naive RAG gets wrong, no yes/no golds."""

import dataclasses
import re

import pytest
from env_helpers import SMALL_WORLD, make_small

from searchgym.corpora.types import QAExample
from searchgym.envs.components.question_filters import is_yes_no
from searchgym.error import ConfigError, UnknownNameError
from searchgym.rewards import span_check
from searchgym.training.args import preset
from searchgym.training.data import env_kwargs


def naive_top(env, question):
    inner = env.unwrapped
    return [f"{h.passage.title}\n{h.passage.text}" for h in inner.game.retriever.search([question], inner.initial_top_k)[0]]


def test_the_s3_filter_keeps_exactly_the_questions_naive_rag_gets_wrong():
    full = make_small("searchgym/S3-v0", split="train")
    kept = make_small("searchgym/S3-v0", split="train", question_filter="s3")
    wrong = [ex.id for ex in full.unwrapped.examples
             if not is_yes_no(ex) and not any(span_check(doc, ex.answers) for doc in naive_top(full, ex.question))]
    assert [ex.id for ex in kept.unwrapped.examples] == wrong
    print(f"\ns3 filter on the small world's train split: {len(wrong)} of {len(full.unwrapped.examples)} kept")
    assert 0 < len(wrong) < len(full.unwrapped.examples)
    # Every kept question starts from a naive-RAG GenAcc of 0: the baseline is cached, not recomputed.
    obs, info = kept.reset(options={"example_index": 0})
    _, reward, *_ , info = kept.step("<search_complete>True</search_complete>")
    assert info["reward_components"]["naive_rag_acc"] == 0.0 == reward
    # limit counts kept questions.
    assert [ex.id for ex in make_small("searchgym/S3-v0", split="train", question_filter="s3", limit=5).unwrapped.examples] == wrong[:5]


def test_the_s3_filter_drops_yes_no_questions():
    base = make_small("searchgym/S3-v0", split="train", question_filter="s3").unwrapped.examples[:2]
    asked = [dataclasses.replace(base[0], id="yn", answers=("Yes",)), dataclasses.replace(base[1], id="tf", answers=("false", "x")),
             base[0]]
    assert [is_yes_no(ex) for ex in asked] == [True, True, False]
    env = make_small("searchgym/S3-v0", dataset=asked, question_filter="s3")
    assert [ex.id for ex in env.unwrapped.examples] == [base[0].id]


def test_the_s3_filter_errors():
    with pytest.raises(UnknownNameError, match="question filter"):
        make_small("searchgym/S3-v0", question_filter="hard")
    msg = (
        "question_filter='s3' keeps the questions the env's naive-RAG baseline gets wrong, so it expects a reward with "
        "a naive-RAG baseline (s3_gbr), got 's3_gen_acc'; pass reward='s3_gbr' or drop question_filter."
    )
    with pytest.raises(ConfigError, match=re.escape(msg)):
        make_small("searchgym/S3-v0", reward="s3_gen_acc", question_filter="s3")
    yes_no = QAExample("a", "Was the Order founded before 1900?", ("yes",))
    msg = (
        "SearchEnv has no question left: question_filter='s3' kept none of the 1 questions of split 'dev'; drop the "
        "filter or pick another split or dataset."
    )
    with pytest.raises(ConfigError, match=re.escape(msg)):
        make_small("searchgym/S3-v0", dataset=[yes_no], question_filter="s3")


def test_the_s3_preset_trains_on_filtered_questions_and_evaluates_on_all():
    args = preset("s3")
    assert args.env_options == {"question_filter": "s3"}
    train = env_kwargs(args, "train", None, frozen=None)
    evaluation = env_kwargs(args, "dev", None, frozen=None, evaluation=True)
    assert train["question_filter"] == "s3" and evaluation["question_filter"] is None
    # --env-options adds to the preset's; {"question_filter": None} drops the filter.
    merged = preset("s3", env_options={"corpus_options": SMALL_WORLD})
    assert merged.env_options == {"question_filter": "s3", "corpus_options": SMALL_WORLD}
    assert preset("s3", env_options={"question_filter": None}).env_options == {"question_filter": None}
