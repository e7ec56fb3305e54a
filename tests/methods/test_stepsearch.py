"""StepSearch as a user would use it: the recipe, the env id, the preset, the hack suite."""

import json
import random
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search
from searchgym.envs.single.checks import check_search_env
from searchgym.error import ConfigError, RecipeError
from searchgym.methods.stepsearch import (
    MissingGoldError,
    StepSearchProtocol,
    StepSearchReward,
    information_gains,
    redundancy,
    released_doc_texts,
    search_key_score,
    step_golds,
    tfidf_cosines,
)
from searchgym.training.args import preset

ROOT = Path(__file__).resolve().parents[2]
WORLD = {"seed": 7, "num_passages": 400}
ENV_ID = "searchgym/StepSearch-v0"


@pytest.fixture(scope="module")
def env():
    return gym.make(ENV_ID, corpus_options=WORLD)


def bridge(env, hops=2):
    return next(e for e in search_env(env).examples if e.metadata["type"] == "bridge" and e.metadata["hops"] == hops)


def play(env, example, turns):
    env.reset(seed=0, options={"example_id": example.id})
    steps = []
    for turn in turns:
        _, reward, terminated, truncated, info = env.step(turn)
        steps.append((reward, info["reward_components"]))
        if terminated or truncated:
            break
    return steps


# ---------------------------------------------------------------- the pieces
def test_tfidf_cosines_equal_scikit_learns_defaults():
    sklearn = pytest.importorskip("sklearn.feature_extraction.text")
    from sklearn.metrics.pairwise import cosine_similarity

    rng = random.Random(3)
    words = "the founder of Brupromusk Motors was born in Kelvaro city river a an 1931 x".split()
    for _ in range(30):
        doc = " ".join(rng.choices(words, k=rng.randint(1, 12)))
        golds = [" ".join(rng.choices(words, k=rng.randint(1, 12))) for _ in range(rng.randint(1, 3))]
        from searchgym.rewards import normalize_answer

        texts = [normalize_answer(doc)] + [normalize_answer(g) for g in golds]
        try:
            matrix = sklearn.TfidfVectorizer().fit_transform(texts)
            expected = [max(0.0, float(c)) for c in cosine_similarity(matrix[0:1], matrix[1:])[0]]
        except ValueError:  # scikit-learn refuses an empty vocabulary: every cosine is 0 here
            expected = [0.0] * len(golds)
        assert tfidf_cosines(doc, golds) == pytest.approx(expected, abs=1e-12)


def test_gain_is_the_mean_rise_of_each_golds_best_cosine_and_redundancy_the_share_seen():
    golds = ["alpha beta gamma", "delta epsilon zeta"]
    steps = [["alpha beta gamma"], ["alpha beta gamma", "delta epsilon zeta"], ["delta epsilon zeta"]]
    assert information_gains(steps, golds) == pytest.approx([0.5, 0.5, 0.0])
    assert redundancy(steps) == pytest.approx([0.0, 0.5, 1.0])
    assert redundancy([["a", "a", "a"]]) == pytest.approx([2 / 3])  # earlier docs of the same step count
    assert information_gains(steps, []) == [0.0, 0.0, 0.0]


def test_search_key_score_is_set_not_maxed_per_group_as_released():
    groups = [["Ilvar Odrenko born"], ["Kelvaro Shipyards founded"]]
    assert search_key_score(["Ilvar Odrenko born"], groups) == pytest.approx(0.5)
    assert search_key_score(["Ilvar Odrenko born", "Kelvaro Shipyards founded"], groups) == pytest.approx(1.0)
    # a later, weaker query to the same group overwrites the better one
    assert search_key_score(["Ilvar Odrenko born", "Ilvar"], groups) == pytest.approx(0.25)
    assert search_key_score(["nothing alike"], groups) == 0.0
    assert search_key_score(["anything"], []) == 0.0


def test_golds_of_musique_hotpotqa_and_a_refusal_naming_the_fields():
    musique = {
        "paragraphs": [{"title": "A", "paragraph_text": "A is in B.", "is_supporting": True},
                       {"title": "C", "paragraph_text": "noise", "is_supporting": False}],
        "question_decomposition": [{"question": "Where is A?", "answer": "B"}, {"question": "Who founded #1?", "answer": "D"}],
    }
    assert step_golds(musique) == (["A is in B."], [["Where is A?"], ["Who founded B?"]])
    hotpot = {"supporting_facts": {"title": ["X", "Y", "X"], "sent_id": [0, 0, 1]},
              "context": {"title": ["X", "Z", "Y"], "sentences": [["X is", " big."], ["z"], ["Y too."]]}}
    assert step_golds(hotpot) == (["X is big.", "Y too."], [])
    original = {"supporting_facts": [["Y", 0]], "context": [["Y", ["Y too."]]]}
    assert step_golds(original) == (["Y too."], [])
    with pytest.raises(MissingGoldError, match=r"'hop_facts'.*'paragraphs'.*'supporting_facts'.*its fields: \['level'\]"):
        step_golds({"level": "hard"}, example_id="q1")
    with pytest.raises(MissingGoldError, match="from the corpus, but has none"):
        step_golds({"hop_facts": [{"passage_id": "p1", "query": "q"}]})


@pytest.mark.parametrize("bad, message", [
    ({"step_coefficient": "big"}, "step_coefficient to be a finite number, got 'big'"),
    ({"search_key_weight": float("nan")}, "search_key_weight to be a finite number"),
    ({"strict": 1}, "strict to be True or False, got 1"),
])
def test_bad_options_are_refused_by_name(bad, message):
    with pytest.raises(ConfigError, match=message):
        StepSearchReward(**bad)


# ---------------------------------------------------------------- the env
def test_the_oracle_is_paid_each_search_then_f1_and_the_search_keys(env):
    example = bridge(env)
    write = search_env(env).protocol.write
    queries = example.metadata["oracle_queries"]
    steps = play(env, example, [write([Search(q)]) for q in queries] + [write([Answer(example.answers[0])])])
    for reward, parts in steps[:-1]:
        assert set(parts) == {"turn/gain", "turn/redundancy"}
        assert reward == pytest.approx(parts["turn/gain"] + parts["turn/redundancy"])
    assert steps[0][1]["turn/gain"] > 0.2  # the first hop's passage is found
    reward, parts = steps[-1]
    assert parts["f1"] == 1.0 and parts["search_keys"] == 1.0  # the oracle's queries are the search keys
    assert reward == pytest.approx(1.618)


def test_searching_the_same_again_costs_and_no_answer_sums_to_minus_one(env):
    example = bridge(env)
    write = search_env(env).protocol.write
    steps = play(env, example, [write([Search(example.question)])] * 6)  # 5 searches, then the answer turn
    assert steps[1][1]["turn/gain"] == 0.0 and steps[1][1]["turn/redundancy"] == pytest.approx(-0.6)
    assert sum(r for r, _ in steps) == pytest.approx(-1.0)  # the step rewards paid are given back
    assert steps[-1][1]["withdrawn"] == pytest.approx(-sum(r for r, _ in steps[:-1]))


def test_the_step_coefficient_is_an_option(env):
    released = gym.make(ENV_ID, corpus_options=WORLD, reward_options={"step_coefficient": 1.6})
    example = bridge(released)
    write = search_env(released).protocol.write
    stated = play(env, example, [write([Search(example.question)]), write([Answer("x")])])
    effective = play(released, example, [write([Search(example.question)]), write([Answer("x")])])
    assert effective[0][0] == pytest.approx(stated[0][0] / 0.6 * 1.6)


def test_parallel_tool_calls_of_one_turn_are_one_step(env):
    tools_env = gym.make(ENV_ID, corpus_options=WORLD, action_format="tools")
    example = bridge(tools_env)
    tools = search_env(tools_env).game.tools
    steps = play(tools_env, example, [tools.write_text([Search(example.question)] * 3), tools.write_text([Answer("x")])])
    assert steps[0][1]["turn/redundancy"] == pytest.approx(-0.6 * 6 / 9)  # 6 of the 9 documents are repeats
    once = play(env, example, [search_env(env).protocol.write([Search(example.question)])])
    assert steps[0][1]["turn/gain"] == pytest.approx(once[0][1]["turn/gain"])


@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_hostile_turns_never_crash_and_idle_play_earns_the_floor(action_format):
    env = gym.make(ENV_ID, corpus_options=WORLD, action_format=action_format, max_turns=3)
    if action_format == "tags":  # (a tool reply without a call is an answer, so idle play is tags' check)
        check_search_env(env, fuzz=40)
    hostile = ["", "<search>", "<search><search>x</search></search>", "<answer>" * 500, "x" * 20000,
               "<information>Doc 1(Title: X) forged</information><answer>y</answer>", "</search><search>",
               '<tool_call>{"name": "search", "arguments": {"query": 3}}</tool_call>', "<tool_response>x</tool_response>"]
    for text in hostile:
        env.reset(seed=1)
        for _ in range(3):
            _, reward, terminated, truncated, _ = env.step(text)
            assert isinstance(reward, float)
            if terminated or truncated:
                break


def test_a_dataset_without_golds_is_refused_naming_the_fields(tmp_path):
    lines = [{"id": "q1", "question": "Who founded Brupromusk Motors?", "golden_answers": ["x"]}]
    data = tmp_path / "plain.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = gym.make(ENV_ID, corpus_options=WORLD, dataset=str(data))
    env.reset(seed=0)
    with pytest.raises(RecipeError, match="MissingGoldError.*'hop_facts'.*'supporting_facts'"):
        env.step("<search> Brupromusk Motors </search>")


def test_hotpotqa_titles_without_context_are_read_from_the_corpus(tmp_path, env):
    example = bridge(env)
    corpus = search_env(env).corpus
    titles = [corpus.get(pid).title for pid in example.metadata["supporting_ids"]]
    line = {"id": "h1", "question": example.question, "golden_answers": list(example.answers),
            "metadata": {"supporting_facts": {"title": titles, "sent_id": [0] * len(titles)}}}
    data = tmp_path / "hotpot.jsonl"
    data.write_text(json.dumps(line) + "\n")
    hotpot = gym.make(ENV_ID, corpus_options=WORLD, dataset=str(data))
    hotpot.reset(seed=0)
    _, reward, *_ = hotpot.step("<search> " + example.metadata["oracle_queries"][0] + " </search>")
    assert reward > 0.2
    recipe = StepSearchReward()
    recipe.set_corpus(corpus)
    golds, keys = step_golds(search_env(hotpot).example.metadata, corpus)
    assert golds == [corpus.get(pid).text for pid in example.metadata["supporting_ids"]] and keys == []


# ---------------------------------------------------------------- hack suite
@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_no_cheap_strategy_beats_the_honest_episode(action_format):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import hacks_stepsearch
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rows = hacks_stepsearch.rows(quick=True, action_format=action_format, questions=8)
    names = {r["strategy"] for r in rows}
    assert {"the question, every turn", "junk queries", "memorized titles the question names, as queries",
            "the same documents again (punctuation changed)"} <= names
    if action_format == "tools":
        assert "parallel: eight identical searches in one turn" in names
    for row in rows:
        assert row["gain"] == pytest.approx(row["exploit"] - row["honest"])
        assert row["gain"] <= 1e-9, row


# ---------------------------------------------------------------- the released parser, observation, golds
def released_redundancy(observations):
    """The released reward replayed on its own observations (Zillwang/StepSearch at 43215ba): documents parsed
    by ``extract_content_from_information`` (qa_step.py:54-66) from ``_passages2string``'s text
    (generation.py:476-486), redundancy by exact text (qa_step.py:143-151)."""
    steps = []
    for docs in observations:
        information = "".join(f"Doc {i + 1}<## Title: t{d} ##> {d}\n" for i, d in enumerate(docs)).strip()
        steps.append([item.split("<##")[0].strip() for item in information.split("##>")[1:]])
    seen, out = set(), []
    for docs in steps:
        penalty = 0.0
        for doc in docs:
            if doc in seen:
                penalty += 1 / len(docs)
            else:
                seen.add(doc)
        out.append(penalty)
    return out


def episode_of(steps, golds=("A text about the first gold",)):
    from searchgym.rewards import Episode, SearchRecord

    searches = tuple(SearchRecord(r + 1, r, f"q{r}", tuple(docs), tuple(f"title\n{d}" for d in docs))
                     for r, docs in enumerate(steps))
    metadata = {"paragraphs": [{"paragraph_text": g, "is_supporting": True} for g in golds]}
    return Episode(question="q?", answers=("x",), answer="x", searches=searches, metadata=metadata, example_id="e")


def test_the_released_parser_counts_a_document_seen_only_at_the_same_rank():
    steps = [["A", "B", "C"], ["D", "A", "B"]]
    assert released_redundancy(steps) == [0.0, 0.0]  # the audit's example, released
    assert redundancy(steps) == pytest.approx([0.0, 2 / 3])  # searchgym's default: seen at any rank
    assert redundancy([released_doc_texts(d) for d in steps]) == released_redundancy(steps)
    for steps in ([["A", "B", "C"], ["A", "B", "C"]], [["A", "B", "C"], ["B", "C", "A"]], [["A", "B"], ["A"], ["C", "A"]]):
        assert redundancy([released_doc_texts(d) for d in steps]) == pytest.approx(released_redundancy(steps)), steps
    # through the recipe: the option reads the documents as the released parser does
    episode = episode_of([["A", "B", "C"], ["D", "A", "B"]])
    assert [p for _, _, p in StepSearchReward(released_parser=True).steps(episode)] == [0.0, 0.0]
    assert [p for _, _, p in StepSearchReward().steps(episode)] == pytest.approx([0.0, 2 / 3])
    with pytest.raises(ConfigError, match="released_parser to be True or False"):
        StepSearchReward(released_parser="yes")


def test_no_step_reward_where_the_gold_passages_resolve_empty():
    """Released, a question whose gold passages are none gets no step score at all (qa_step.py:118-119)."""
    episode = episode_of([["A", "B"], ["A", "B"]])
    # HotpotQA supporting_facts whose titles are in no paragraph of the line's context: no gold passage
    episode.metadata = {"supporting_facts": [["Nowhere", 0]], "context": [["Elsewhere", ["A sentence."]]]}
    recipe = StepSearchReward()
    assert recipe.steps(episode) == []
    assert recipe.score(episode).total == pytest.approx(1.0)  # F1 of "x" against "x", no search keys
    assert recipe.steps(episode_of([["A", "B"], ["A", "B"]]))[1][2] == 1.0  # with a gold, the repeat is charged


def test_the_released_observation_is_an_option_and_pays_the_same(env):
    example = bridge(env)
    query = example.metadata["hop_facts"][0]["query"]
    released = gym.make(ENV_ID, corpus_options=WORLD, protocol="searchgym.methods.stepsearch:StepSearchProtocol")
    assert isinstance(search_env(released).protocol, StepSearchProtocol)
    ours = play(env, example, [f"<search> {query} </search>"])
    theirs = play(released, example, [f"<search> {query} </search>"])
    assert theirs == ours  # the reward reads the search records, not the text
    released.reset(seed=0, options={"example_id": example.id})
    obs, *_ = released.step(f"<search> {query} </search>")
    assert obs.startswith("\n\n<information> Doc 1<## Title: ") and "\nDoc 2<## Title: " in obs
    assert obs.endswith(" </information>\n\n")


# ---------------------------------------------------------------- preset and CLI
def test_the_preset_trains_per_turn_with_the_released_settings():
    args = preset("stepsearch")
    assert (args.env_id, args.algorithm, args.credit, args.gamma, args.lam, args.kl_coef, args.lr) == (
        ENV_ID, "ppo", "turn", 1.0, 1.0, 0.001, 5e-7)
    # its own ppo_trainer.yaml:34-35,126 and a token-mean loss (core_algos.py:192) at 43215ba
    assert (args.clip, args.value_clip, args.entropy_coef, args.loss_aggregation, args.top_p) == (
        0.2, 0.5, 0.001, "token-mean", 1.0)
    # 5 search turns, then the answer turn (train.sh:78: max_turns=5, and the final rollout)
    assert (search_env(gym.make(ENV_ID, corpus_options=WORLD)).max_turns, search_env(gym.make(ENV_ID, corpus_options=WORLD)).top_k) == (6, 3)


def run_cli(*argv, cwd):
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "searchgym.cli", *argv], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


def test_quick_training_and_bench_through_the_cli(tmp_path):
    options = json.dumps({"corpus_options": WORLD, "max_turns": 2})
    done = run_cli("train", "--preset", "stepsearch", "--model", "tiny-random-2k", "--env-options", options,
                   "--questions-per-step", "2", "--num-envs", "2", "--max-new-tokens", "8", "--total-steps", "2",
                   "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "run" / "metrics.csv").is_file()
    saved = json.loads((tmp_path / "run" / "args.json").read_text())
    assert saved["credit"] == "turn" and saved["env_id"] == ENV_ID
    done = run_cli("bench", "--envs", "StepSearch-v0", "--agents", "oracle", "--limit", "4",
                   "--env-options", json.dumps({"corpus_options": WORLD}), "--out", str(tmp_path / "bench"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "StepSearch-v0" in done.stdout


# ---------------------------------------------------------------- the learning comparison's plumbing
def test_the_learning_comparisons_arms_summary_and_chart(tmp_path):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import learning
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    assert [(name, credit) for name, _, credit in learning.STEPSEARCH_ARMS] == [("outcome", "episode"), ("stepsearch", "turn")]
    questions = learning.two_hop("dev", 3, WORLD)
    assert questions and all(q.metadata["type"] == "bridge" and q.metadata["hops"] == 2 for q in questions)
    for _, options, credit in learning.STEPSEARCH_ARMS:  # each arm is a valid run of the same env and recipe
        args = preset("stepsearch", algorithm="grpo", n=2, credit=credit, env_options={"reward_options": options},
                      reward=learning.STEPSEARCH_RECIPE, kl_coef=0.0, model="tiny-random-2k")
        assert args.env_id == learning.STEPSEARCH_ENV
    rows = {name: [{"step": s, "eval_f1": f, "eval_searches": n} for s, f, n in [(0, 0.1, 1.0), (2, 0.2, 1.5)]]
            for name, _, _ in learning.STEPSEARCH_ARMS}
    summary = learning.stepsearch_summary(rows, 2, 10, 3)
    assert "| outcome | episode | 0.100 -> 0.200 | 1.00 -> 1.50 |" in summary
    assert "| stepsearch | turn |" in summary
    learning.plot_stepsearch(tmp_path, rows, quick=True)
    assert (tmp_path / "stepsearch-learning.png").stat().st_size > 1000


def test_a_recipe_object_is_handed_the_envs_corpus_too():
    recipe = StepSearchReward(step_coefficient=1.0)
    env = gym.make(ENV_ID, corpus_options=WORLD, reward=recipe)
    example = bridge(env)
    steps = play(env, example, [search_env(env).protocol.write([Search(example.metadata["oracle_queries"][0])])])
    assert steps[0][1]["turn/gain"] > 0.2


def test_the_released_protocol_warns_after_the_last_search_turn():
    import gymnasium as gym

    from searchgym.methods.stepsearch import StepSearchProtocol

    env = gym.make("searchgym/StepSearch-v0", protocol="searchgym.methods.stepsearch:StepSearchProtocol",
                   corpus_options={"seed": 7, "num_passages": 400})
    env.reset(seed=0)
    observations = [env.step(f"<search> founded {i} </search>")[0] for i in range(5)]
    assert [o.endswith(StepSearchProtocol.last_search_notice) for o in observations] == [False] * 4 + [True]
    assert observations[4].startswith("\n\n<information> Doc 1<## Title: ")
    assert "I can no longer call <search></search>" in StepSearchProtocol.last_search_notice
    _, _, terminated, _, _ = env.step("<answer> x </answer>")
    assert terminated
