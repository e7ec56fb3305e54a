"""The browse game's scripted agents: the oracle reaches the labels' upper bound in tags and
tool calls, the random agent plays to the end, the built-in names pick them on this game, and
the bench shows the game's columns."""

from __future__ import annotations

import json

import pytest

from deepresearch.small_world import env_options, make_env
from searchgym.agents import Task, make_agent, run_episodes
from searchgym.agents.baselines import RandomAgent
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.bench import BROWSE_COLUMNS, COLUMNS, BenchConfig, cross, run_bench, summarize, table_columns
from searchgym.deepresearch.agents import MAX_PARALLEL, DeepResearchOracle, DeepResearchRandom, fact_pattern
from searchgym.deepresearch.documents import MAX_PATTERN_CHARS, MAX_PATTERN_WORDS
from searchgym.deepresearch.scoring import calibration_error
from searchgym.envs.access import search_env
from searchgym.error import ConfigError

FORMATS = ("tools", "tags")


def play(name: str, action_format: str, tmp_path, seeds=(0,), **env_options):
    envs = [make_env(tmp_path, action_format=action_format, **env_options) for _ in range(3)]
    agent = make_agent(name, envs[0])
    examples = search_env(envs[0]).examples
    return agent, examples, run_episodes(envs, agent, [Task(ex.id, s) for s in seeds for ex in examples])


@pytest.mark.parametrize("action_format", FORMATS)
def test_the_oracle_answers_every_question_right_having_read_every_evidence_page(action_format, tmp_path):
    agent, examples, results = play("oracle", action_format, tmp_path)
    assert isinstance(agent, DeepResearchOracle) and agent.action_format == action_format
    store = search_env(make_env(tmp_path)).protocol.store
    by_id = {ex.id: ex for ex in examples}
    assert len(results) == len(examples) == 6
    for r in results:
        parts = r.reward_components
        assert r.outcome == "answered" and r.num_invalid == 0 and not r.flags
        assert parts["correct"] == 1.0 and parts["evidence_recall"] == 1.0 and parts["gold_recall"] == 1.0
        assert parts["citation_precision"] == 1.0 and parts["citation_recall"] == 1.0 and parts["confidence"] == 1.0
        assert r.reward == 1.0 and r.num_searches == 1
        # It opened the page holding each fact (past the first: the world puts them there), all at once as tool calls.
        meta = by_id[r.example_id].metadata
        expected = {(d, store.find(d, fact_pattern(f)).places[0][0]) for c in meta["constraints"] for d in c["doc_ids"]
                    for f in c["facts"] if store.find(d, fact_pattern(f)).total}
        opens = [(c["doc_id"], c["page"]) for t in r.turns[1:] for c in t.get("calls", ()) if c["kind"] == "open"]
        assert set(opens) == expected and all(page > 1 for _, page in opens)
        assert {d for d, _ in opens} >= set(meta["evidence_ids"]) | set(meta["gold_ids"])
        assert r.num_turns == (3 if action_format == "tools" else 2 + len(opens))
        answer = r.turns[-1]["calls"][-1]
        assert answer == {"kind": "answer", "answer": by_id[r.example_id].answers[0], "citations": ["p" + r.example_id[1:],
                          *meta["evidence_ids"]], "confidence": 100.0}


def test_the_oracle_keeps_within_the_budgets_and_still_answers(tmp_path):
    _, _, results = play("oracle", "tools", tmp_path, max_calls=3, max_turns=3)
    for r in results:
        opens = [c for t in r.turns[1:] for c in t.get("calls", ()) if c["kind"] == "open"]
        assert r.outcome == "answered" and r.reward_components["correct"] == 1.0 and len(opens) == 2
        assert r.reward_components["calls"] == 3.0
    _, _, results = play("oracle", "tags", tmp_path, max_turns=3)
    assert all(r.outcome == "answered" and r.num_turns == 3 and r.reward_components["correct"] == 1.0 for r in results)


def test_the_oracle_turn_holds_at_most_eight_parallel_calls(tmp_path):
    env = make_env(tmp_path)
    oracle = DeepResearchOracle.for_env(env)
    example = search_env(env).examples[0]
    many = example.metadata | {"evidence_ids": [f"{kind}{i}" for kind in "tgp" for i in range(6)]}
    plan = oracle.plan(type(example)(example.id, example.question, example.answers, many))
    assert [len(turn) for turn in plan] == [1, MAX_PARALLEL, MAX_PARALLEL, 2, 1]
    assert len(plan[-1][0].citations) == search_env(env).protocol.max_citations


@pytest.mark.parametrize("action_format", FORMATS)
def test_the_random_agent_plays_every_episode_to_an_answer(action_format, tmp_path):
    agent, examples, results = play("random", action_format, tmp_path, seeds=(0, 1))
    assert isinstance(agent, DeepResearchRandom)
    assert len(results) == 2 * len(examples)
    kinds = set()
    for r in results:
        assert r.outcome == "answered" and r.error is None and r.num_invalid == 0, (r.outcome, r.error, r.turns)
        assert r.reward_components["confidence"] == 0.5 and r.num_searches >= 1
        kinds |= {c["kind"] for t in r.turns[1:] for c in t.get("calls", ())}
    assert kinds == {"open", "find", "answer"}
    # Seeded per episode and turn: the same seed plays the same episodes.
    _, _, again = play("random", action_format, tmp_path, seeds=(0, 1))
    assert [r.turns for r in again] == [r.turns for r in results]


def test_the_built_in_names_play_this_game_and_keep_playing_the_others(tmp_path):
    env = make_env(tmp_path)
    assert isinstance(make_agent("oracle", env), DeepResearchOracle)
    assert isinstance(make_agent("random", env, seed=3), DeepResearchRandom) and make_agent("random", env, seed=3).seed == 3
    assert isinstance(make_agent("searchgym.deepresearch.agents:DeepResearchOracle.for_env", env), DeepResearchOracle)
    with pytest.raises(ConfigError, match="could not be called"):
        make_agent("oracle", env, seed=1)
    import gymnasium as gym

    other = gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 200})
    assert isinstance(make_agent("oracle", other), SynthWikiOracle) and isinstance(make_agent("random", other), RandomAgent)
    with pytest.raises(ConfigError, match="expects a DeepResearchProtocol"):
        DeepResearchOracle.for_env(other)


def test_fact_patterns_fit_what_find_takes():
    long = " ".join(["word"] * 40)
    assert len(fact_pattern(long).split()) == MAX_PATTERN_WORDS
    assert len(fact_pattern("x" * 150 + " " + "y" * 100)) <= MAX_PATTERN_CHARS
    assert fact_pattern("In 1830 the Lantern Guild was founded.") == "In 1830 the Lantern Guild was founded."


def test_bench_shows_the_browse_columns(tmp_path):
    options = env_options(tmp_path)
    out = tmp_path / "bench"
    results = run_bench(BenchConfig(runs=cross(["DeepResearch-v0"], ["oracle", "random"]), env_options={"DeepResearch-v0": options},
                                    limit=3, seeds=(0, 1), num_envs=3), out, progress=False)
    oracle, random_row = results.rows
    assert oracle["action_format"] == random_row["action_format"] == "tools"  # the env id's own default
    assert {k: oracle[k] for k, _, _ in BROWSE_COLUMNS} == {
        "accuracy": 1.0, "evidence_recall": 1.0, "gold_recall": 1.0, "citation_precision": 1.0, "citation_recall": 1.0,
        "calls": 4.0, "calibration_error": 0.0}
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    randoms = [r["reward_components"] for r in records if r["run"] == random_row["label"]]
    assert len(randoms) == random_row["n"] == 6
    assert random_row["accuracy"] == pytest.approx(sum(p["correct"] for p in randoms) / 6)
    assert random_row["calls"] == pytest.approx(sum(p["calls"] for p in randoms) / 6)
    assert random_row["calibration_error"] == pytest.approx(calibration_error([p["confidence"] for p in randoms], [p["correct"] for p in randoms]))
    head, rule, *lines = results.markdown().splitlines()
    headers = [h.strip() for h in head.strip("|").split("|")]
    assert headers[headers.index("GenAcc raw") + 1: headers.index("reward")] == [h for _, h, _ in BROWSE_COLUMNS]
    cells = dict(zip(headers, [c.strip() for c in lines[0].strip("|").split("|")]))
    assert cells["accuracy"] == "1.000" and cells["evidence recall"] == "1.000" and cells["calls"] == "4.00" and cells["calibration error"] == "0.000"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["runs"][0]["evidence_recall"] == 1.0
    assert "calibration_error" in (out / "summary.csv").read_text().splitlines()[0]


def test_runs_without_the_browse_metrics_keep_their_table():
    record = {"outcome": "answered", "reward": 1.0, "em": 1.0, "f1": 1.0, "cover_em": 1.0, "gen_acc": 1.0, "num_searches": 1,
              "num_turns": 2, "context_tokens": 10, "generated_tokens": 0, "wall_time": 0.1, "reward_components": {"em": 1.0}}
    row = summarize("a", "SearchR1-v0", "oracle", [record])
    assert not any(k in row for k, _, _ in BROWSE_COLUMNS)
    assert table_columns(judged=False) == COLUMNS and table_columns(judged=False, browse=False) == COLUMNS
    # A run whose answers stated no confidence has no calibration error ("-" in the table).
    browse = {"correct": 1.0, "evidence_recall": 0.5, "gold_recall": 1.0, "citation_precision": 0.0, "citation_recall": 0.0, "calls": 3.0}
    row = summarize("b", "DeepResearch-v0", "x", [record | {"reward_components": browse}])
    assert row["accuracy"] == 1.0 and row["evidence_recall"] == 0.5 and row["calibration_error"] is None


@pytest.mark.parametrize("action_format", FORMATS)
def test_without_facts_the_oracle_opens_the_first_page_of_each_document(action_format, make_dr_env):
    """The folder's shared world names its evidence but no constraints: page 1 of each is read."""
    envs = [make_dr_env(action_format=action_format) for _ in range(2)]
    oracle = make_agent("oracle", envs[0])
    examples = search_env(envs[0]).examples
    for r in run_episodes(envs, oracle, [Task(ex.id, 0) for ex in examples]):
        meta = next(ex.metadata for ex in examples if ex.id == r.example_id)
        opens = [(c["doc_id"], c["page"]) for t in r.turns[1:] for c in t.get("calls", ()) if c["kind"] == "open"]
        assert opens == [(d, 1) for d in [*meta["evidence_ids"], *meta["gold_ids"]]]
        assert r.reward_components["correct"] == 1.0 and r.reward_components["evidence_recall"] == 1.0


class CallCost:
    """Every step costs 0.01 (a user's wrapper, named by module:attr or given as a callable)."""

    def __new__(cls, env):
        import gymnasium as gym

        class Cost(gym.Wrapper):
            def step(self, action):
                obs, reward, terminated, truncated, info = self.env.step(action)
                return obs, reward - 0.01, terminated, truncated, info

        return Cost(env)


def test_bench_runs_the_game_under_a_wrapper_and_a_retriever_of_its_own(tmp_path):
    options = {**env_options(tmp_path), "retriever": "rank-bm25", "reward_options": {"citation_weight": 0.5}}
    results = run_bench(BenchConfig(runs=cross(["DeepResearch-v0"], ["oracle"]), env_options={"DeepResearch-v0": options},
                                    wrappers=[CallCost], limit=2, num_envs=2), tmp_path / "bench", progress=False)
    (row,) = results.rows
    # The oracle's 1 + 0.5 x citation F1 of 1, less 0.01 for each of its 3 tool turns.
    assert row["accuracy"] == 1.0 and row["reward"] == pytest.approx(1.5 - 0.03)
