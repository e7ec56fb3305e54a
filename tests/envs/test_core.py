"""SearchEnv's arguments, info and errors."""

import re

import numpy as np
import pytest

from env_helpers import SMALL_WORLD, finish_turn, make_small, search_turn
from searchgym.corpora.types import QAExample
from searchgym.envs import SearchEnv
from searchgym.error import ConfigError, UnknownNameError


def test_info_reports_the_search_and_the_context_growth():
    env = make_small("searchgym/SearchR1-v0", top_k=2)
    obs, info = env.reset(seed=2)
    assert info["context_chars"] == len(obs) and info["context_tokens"] > 0
    obs, reward, terminated, truncated, info = env.step(search_turn(env, "founded"))
    assert info["action_kinds"] == ("search",) and info["query"] == "founded"
    assert len(info["retrieved_ids"]) == 2 and info["num_searches"] == 1
    assert obs.startswith("\n\n<information>Doc 1(Title: ") and "Doc 2(Title: " in obs
    assert info["context_chars"] == len(env.unwrapped.transcript)
    _, reward, terminated, _, info = env.step(finish_turn(env, env.unwrapped.example.answers[0]))
    assert terminated and reward == 1.0 and info["answer"] == env.unwrapped.example.answers[0]
    assert info["reward_components"] == {"em": 1.0}


def test_reset_options_choose_the_question():
    env = make_small("searchgym/SearchR1-v0").unwrapped
    ex = env.examples[3]
    assert env.reset(options={"example_index": 3})[1]["example_id"] == ex.id
    assert env.reset(options={"example_id": ex.id})[1]["example_id"] == ex.id
    own = QAExample("mine", "Who founded Nowhere?", ("Nobody",))
    obs, info = env.reset(options={"example": own})
    assert "Who founded Nowhere?" in obs and info["example_id"] == "mine"
    assert env.reset(options={"example_index": np.int64(3)})[1]["example_id"] == ex.id


def test_a_question_checks_its_fields():
    assert QAExample("q", "Who?", "Ilvar Odrenko").answers == ("Ilvar Odrenko",)  # one answer, not one per letter
    assert QAExample("q", "Who?", ["a", "b"]).answers == ("a", "b")
    with pytest.raises(ConfigError, match=r"^QAExample 'q' expects every answer to be a string, got 3\.$"):
        QAExample("q", "Who?", ("a", 3))
    with pytest.raises(ConfigError, match=r"^QAExample expects question to be a string, got NoneType None\.$"):
        QAExample("q", None, ("a",))
    with pytest.raises(ConfigError, match=r"^QAExample expects answers to be a sequence of strings, got int\.$"):
        QAExample("q", "Who?", 3)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"example_index": 10**6}, r"reset(options={'example_index': ...}) expects an int in [0, "),
        ({"example_index": True}, r"reset(options={'example_index': ...}) expects an int in [0, "),
        ({"example_id": ["a"]}, "reset(options={'example_id': ...}) expects the id of a question in this env's dataset, got ['a']."),
        ({"example_id": "nope"}, "reset(options={'example_id': ...}) expects the id of a question in this env's dataset, got 'nope'."),
        ({"example": "text"}, "reset(options={'example': ...}) expects a QAExample, got str."),
        ({"index": 1}, "SearchEnv.reset expects options among ['example', 'example_id', 'example_index'], got ['index']."),
    ],
)
def test_bad_reset_options(options, message):
    env = make_small("searchgym/SearchR1-v0").unwrapped
    with pytest.raises(ConfigError, match="^" + re.escape(message)):
        env.reset(options=options)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"protocol": "serch_r1"}, UnknownNameError, "Unknown protocol 'serch_r1'. Did you mean 'search_r1'? Expected one of: r1_searcher, r_search, recon, s3, search_r1."),
        ({"reward": "search_r1_emm"}, UnknownNameError, "Unknown reward 'search_r1_emm'. Did you mean 'search_r1_em'?"),
        ({"summarizer": "lm"}, UnknownNameError, "Unknown summarizer 'lm'. Did you mean 'llm'? Expected one of: extractive, identity, llm."),
        ({"top_k": 0}, ConfigError, "SearchEnv expects top_k to be a positive integer, got 0."),
        ({"max_turns": "4"}, ConfigError, "SearchEnv expects max_turns to be a positive integer, got '4'."),
        ({"limit": 0}, ConfigError, "SearchEnv expects limit to be a positive integer, got 0."),
        ({"render_mode": "rgb_array"}, UnknownNameError, "Unknown render mode 'rgb_array'."),
    ],
)
def test_bad_arguments_fail_with_a_clear_message(kwargs, error, message):
    with pytest.raises(error, match="^" + re.escape(message)):
        SearchEnv(corpus_options=SMALL_WORLD, **kwargs)


def test_limit_keeps_the_first_questions_of_the_split():
    full = SearchEnv(corpus_options=SMALL_WORLD)
    env = SearchEnv(corpus_options=SMALL_WORLD, limit=3)
    assert [ex.id for ex in env.examples] == [ex.id for ex in full.examples[:3]]
    seen = {env.reset(seed=seed)[1]["example_id"] for seed in range(20)}
    assert seen <= {ex.id for ex in env.examples}
    with pytest.raises(ConfigError, match="example_id"):
        env.reset(options={"example_id": full.examples[3].id})
    assert len(SearchEnv(corpus_options=SMALL_WORLD, limit=10**6).examples) == len(full.examples)


def test_s3_needs_a_generator_and_accepts_a_callable():
    with pytest.raises(ConfigError, match="generator"):
        SearchEnv(protocol="s3", reward="s3_gbr", corpus_options=SMALL_WORLD)
    calls = []

    def generator(question, docs):
        calls.append(len(docs))
        return "nothing"

    env = SearchEnv(protocol="s3", reward="s3_gbr", generator=generator, corpus_options=SMALL_WORLD)
    env.reset(seed=0)
    env.step(finish_turn(env))
    assert calls  # the generator answered from the selected docs (and the naive-RAG baseline)


def test_unknown_frozen_model_name():
    with pytest.raises(UnknownNameError, match=re.escape("Unknown generator model 'gold'. Did you mean 'gold-span'?")):
        SearchEnv(protocol="s3", reward="s3_gbr", generator="gold", corpus_options=SMALL_WORLD)


def test_recon_condenses_retrievals():
    raw = make_small("searchgym/SearchR1-v0", top_k=3)
    recon = make_small("searchgym/RECON-v0", top_k=3)
    sizes = []
    for env in (raw, recon):
        env.reset(seed=4)
        obs = env.step(search_turn(env, "founded city"))[0]
        sizes.append(len(obs))
    assert sizes[1] < sizes[0]


def test_recon_defaults_are_the_papers_top5_five_searches_and_rethink_feedback():
    env = make_small("searchgym/RECON-v0")
    env.reset(seed=4)
    searched = []
    for turn in range(env.unwrapped.max_turns):
        obs, reward, terminated, truncated, info = env.step(search_turn(env, f"founded city {turn}"))
        searched.append(len(info["retrieved_ids"]))
        if terminated or truncated:
            break
    # five search rounds of five documents each, then the answer turn, where a search ends the episode
    assert searched == [5, 5, 5, 5, 5, 0] and (terminated or truncated)
    env.reset(seed=4)
    assert env.step("no tags at all")[0] == "\nMy action is not correct. Let me rethink.\n"
    code = make_small("searchgym/RECON-v0", protocol_options={"feedback": "search_r1"})
    code.reset(seed=4)
    assert code.step("no tags at all")[0] == make_small("searchgym/SearchR1-v0").unwrapped.protocol.invalid_feedback()
    with pytest.raises(UnknownNameError, match=re.escape("Unknown RECON feedback 'papr'. Did you mean 'paper'?")):
        make_small("searchgym/RECON-v0", protocol_options={"feedback": "papr"})


def test_recon_with_alg1s_budget_counts_the_answer_among_its_five_actions():
    """RECON's Alg. 1 ends after B = 5 actions, the answer one of them (b counts every
    action); RECON-v0's max_turns=5 (what --paper-scale sets) plays the same decisions: four
    searches and an answer score, a fifth search ends the episode unanswered. (Alg. 1 still
    retrieves for that fifth search, whose documents nothing reads; the env does not.)"""
    from searchgym.training.paper_scale import paper_scale

    options = paper_scale("recon")["env_options"]
    assert options == {"max_turns": 5}
    env = make_small("searchgym/RECON-v0", **options)
    env.reset(seed=4)
    for turn in range(4):
        _, reward, terminated, truncated, info = env.step(search_turn(env, f"founded city {turn}"))
        assert not (terminated or truncated) and len(info["retrieved_ids"]) == 5
    _, reward, terminated, _, info = env.step(finish_turn(env, env.unwrapped.example.answers[0]))
    assert terminated and reward == 1.0 and info["num_searches"] == 4
    env.reset(seed=4)
    searched = []
    for turn in range(5):
        _, reward, terminated, truncated, info = env.step(search_turn(env, f"founded city {turn}"))
        searched.append(len(info["retrieved_ids"]))
    assert searched == [5, 5, 5, 5, 0] and (terminated or truncated) and reward == 0.0 and info["num_searches"] == 4


@pytest.mark.parametrize("options, searches", [({}, 3), ({"max_turns": 5}, 4)], ids=["table-3", "app-a1"])
def test_s3_plays_table_3s_headline_by_default_and_app_a1s_four_turns_with_max_turns_5(options, searches):
    """s3's Table 3 headline (8 retrieved, 3 kept, 3 turns) is S3-v0's default: three search
    turns of 8 documents after the naive top-3, then the turn that completes; App. A.1's
    comparison with the baselines gives 4 turns (max_turns=5)."""
    env = make_small("searchgym/S3-v0", **options)
    _, info = env.reset(seed=4)
    assert env.unwrapped.protocol.docs_per_window == 3 and len(info["retrieved_ids"]) == 3  # naive RAG's top-3
    searched = []
    for turn in range(searches + 1):
        _, _, terminated, truncated, info = env.step(search_turn(env, f"founded city {turn}"))
        searched.append(len(info["retrieved_ids"]))
        if terminated or truncated:
            break
    # every search turn retrieves 8; the last turn's search is not run and ends the episode
    assert searched == [8] * searches + [0] and (terminated or truncated)


def test_render_ansi_returns_the_transcript():
    env = make_small("searchgym/SearchR1-v0", render_mode="ansi")
    obs, _ = env.reset(seed=0)
    env.step(search_turn(env, "born"))
    assert env.render().startswith(obs) and "<information>" in env.render()


def test_users_own_jsonl_corpus_and_questions(tmp_path):
    import json

    import gymnasium as gym

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        "\n".join(json.dumps(d) for d in [
            {"id": "1", "contents": '"Kelvaro Industries"\nKelvaro Industries was founded by Ilvar Odrenko in 1872.'},
            {"id": "2", "title": "Marrowdale", "text": "Marrowdale is a port city."},
        ])
    )
    questions = tmp_path / "qa.jsonl"
    questions.write_text(json.dumps({"id": "q", "question": "Who founded Kelvaro Industries?", "golden_answers": ["Ilvar Odrenko"]}))
    env = gym.make("searchgym/SearchR1-v0", corpus=str(corpus), dataset=str(questions), top_k=1)
    env.reset(seed=0)
    obs, _, _, _, info = env.step("<search> Kelvaro founder </search>")
    assert info["retrieved_ids"] == ["1"] and "Ilvar Odrenko" in obs
    _, reward, terminated, _, _ = env.step("<answer> Ilvar Odrenko </answer>")
    assert terminated and reward == 1.0


def test_a_path_corpus_needs_a_dataset(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"id": "1", "title": "T", "text": "x"}\n')
    with pytest.raises(ConfigError, match=r"^SearchEnv expects a dataset= when the corpus is not a built-in name \(wiki-vital, synthwiki, deepwiki\); pass a built-in dataset name, a FlashRAG jsonl path or a list of QAExample\.$"):
        SearchEnv(corpus=str(path))


def test_wiki_vital_env_uses_the_answerable_questions():
    env = SearchEnv(corpus="wiki-vital")
    assert len(env.examples) == 79 and len(env.corpus) == 10_033
    obs, info = env.reset(seed=0)
    assert env.example.question in obs


def test_a_frozen_model_the_reward_does_not_use_is_refused():
    with pytest.raises(ConfigError, match=re.escape("The 'search_r1_em' reward uses no generator; expected only no frozen model. Drop the argument or pick a reward that uses it.")):
        SearchEnv(reward="search_r1_em", generator="gold-span", corpus_options=SMALL_WORLD)
