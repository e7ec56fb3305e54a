"""ParallelSearch as a user would use it: the protocol, the reward, the env id, the preset, the hack suite."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.corpora import QAExample
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Invalid, Search
from searchgym.envs.single.checks import check_protocol, check_search_env, fuzz_actions
from searchgym.error import ConfigError, RecipeError, SearchGymError, UnknownNameError
from searchgym.methods.parallelsearch import (
    COMPARISON,
    DECOMPOSE_SENTENCE,
    NA,
    SEQUENTIAL,
    ParallelSearchProtocol,
    ParallelSearchReward,
    parallel_format,
    question_type,
    split_subqueries,
)
from searchgym.rewards import Episode, SearchRecord, Turn
from searchgym.training.args import preset

ROOT = Path(__file__).resolve().parents[2]
WORLD = {"seed": 7, "num_passages": 400}
ENV_ID = "searchgym/ParallelSearch-v0"
WRONG = "Zqxwv Plorth"


@pytest.fixture(scope="module")
def env():
    return gym.make(ENV_ID, corpus_options=WORLD)


@pytest.fixture(scope="module")
def tool_env():
    return gym.make(ENV_ID, corpus_options=WORLD, action_format="tools")


def of_type(env, kind):
    return next(e for e in search_env(env).examples if e.metadata["type"] == kind)


def play(env, example, turns):
    """Play ``turns`` (each a list of actions, written by the env's protocol or tool surface) on ``example``."""
    inner = search_env(env)
    env.reset(seed=0, options={"example_id": example.id})
    total, steps = 0.0, []
    for actions in turns:
        if inner.game.tools is not None:
            action = inner.game.tools.write(actions, thought="thinking")
        else:
            action = inner.protocol.write(actions, thought="thinking")
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps.append((obs, info))
        if terminated or truncated:
            break
    return total, steps, inner.game.record()


# ---------------------------------------------------------------- the protocol
def test_the_prompt_quotes_the_released_sentence_in_search_r1s_released_template(env):
    prompt = ParallelSearchProtocol().prompt(of_type(env, "comparison"))
    assert DECOMPOSE_SENTENCE in prompt
    assert "between <information> and </information>. If the original query is complex" in prompt
    assert prompt.endswith("?\n") and "You can search as many times as your want." in prompt


@pytest.mark.parametrize("text, queries", [
    ("<search> a ## b </search>", ["a", "b"]),
    ("<search>  a  ##   ## b ##</search>", ["a", "b"]),            # stripped, empty parts dropped
    ("<search> Paris ## paris ## PARIS  </search>", ["Paris"]),     # repeats dropped (case, spacing)
    ("<search> q1 ## q2 ## q3 ## q4 ## q5 ## q6 </search>", ["q1", "q2", "q3", "q4"]),  # the cap
    ("<search> one query </search>", ["one query"]),
])
def test_sub_queries_parse_as_several_searches_of_one_turn(text, queries):
    parsed = ParallelSearchProtocol().parse("<think> t </think>" + text)
    assert parsed.actions == tuple(Search(q) for q in queries) and parsed.well_formed


def test_a_block_of_separators_only_is_a_malformed_turn():
    for text in ("<search> ## </search>", "<search>## ## ##</search>", "<search></search>"):
        parsed = ParallelSearchProtocol().parse(text)
        assert isinstance(parsed.actions[0], Invalid) and not parsed.well_formed


def test_answers_parse_as_search_r1s_and_write_inverts_parse():
    protocol = ParallelSearchProtocol(max_subqueries=2)
    assert protocol.parse("<answer> Saerdor </answer>").actions == (Answer("Saerdor"),)
    turn = protocol.write([Search("x population"), Search("y population")], thought="split")
    assert turn == "<think> split </think>\n<search> x population ## y population </search>"
    assert protocol.parse(turn).actions == (Search("x population"), Search("y population"))
    check_protocol(protocol)
    assert split_subqueries(" a ## A ##  b ", 1) == ["a"]


def test_the_cap_is_a_protocol_option_of_the_env_id():
    env = gym.make(ENV_ID, corpus_options=WORLD, protocol_options={"max_subqueries": 2})
    env.reset(seed=0)
    _, _, _, _, info = env.step("<think> t </think><search> Drizeikund population ## Saerdor population ## city census </search>")
    assert info["action_kinds"] == ("search", "search") and len(info["retrieved_ids"]) == 6
    with pytest.raises(ConfigError, match="does not take 'cap'"):
        gym.make(ENV_ID, corpus_options=WORLD, protocol_options={"cap": 2})


def test_bad_options_and_unwritable_turns_are_refused_by_name():
    with pytest.raises(ConfigError, match="expects max_subqueries to be an integer >= 1"):
        ParallelSearchProtocol(max_subqueries=0)
    with pytest.raises(UnknownNameError, match="Unknown ParallelSearchProtocol prompt 'paper'"):
        ParallelSearchProtocol(prompt="paper")
    with pytest.raises(ConfigError, match="must not hold '##'"):
        ParallelSearchProtocol().write([Search("a ## b")])
    with pytest.raises(ConfigError, match="cannot write a turn doing search\\+answer"):
        ParallelSearchProtocol().write([Search("a"), Answer("b")])


def test_one_information_block_numbered_per_sub_query_and_one_round(env):
    example = of_type(env, "comparison")
    first, second = example.metadata["oracle_queries"]
    _, steps, episode = play(env, example, [[Search(first), Search(second)], [Answer(example.answers[0])]])
    obs, info = steps[0]
    assert obs.startswith("\n\n<information>Doc 1(Title: ") and obs.endswith("</information>\n\n")
    assert obs.count("<information>") == 1 and obs.count("Doc 1(") == 2 and obs.count("Doc 3(") == 2
    assert info["action_kinds"] == ("search", "search") and len(info["retrieved_ids"]) == 6
    assert [(s.turn, s.round, s.query) for s in episode.searches] == [(1, 0, first), (1, 0, second)]
    assert len(episode.rounds) == 2 and episode.turns[0].observation == ("documents", "documents")


class BadRender(ParallelSearchProtocol):
    def render_turn_docs(self, hit_lists):
        return ["only one"]  # one text for a turn of two searches


def test_a_protocol_rendering_a_turn_wrongly_is_refused_by_name_and_the_turn_undone():
    env = gym.make(ENV_ID, corpus_options=WORLD, protocol=BadRender())
    env.reset(seed=0)
    with pytest.raises(SearchGymError, match="BadRender.render_turn_docs expects to return a list of 2 strings"):
        env.step("<think> t </think><search> Drizeikund population ## Saerdor population </search>")
    assert search_env(env).game.turn == 0 and search_env(env).game.num_searches == 0
    _, _, _, _, info = env.step("<think> t </think><search> Drizeikund population </search>")  # one search: fine
    assert info["turn"] == 1 and len(info["retrieved_ids"]) == 3


def test_parallel_tool_calls_are_one_round_written_as_one_search_turn(tool_env):
    example = of_type(tool_env, "comparison")
    first, second = example.metadata["oracle_queries"]
    total, steps, episode = play(tool_env, example, [[Search(first), Search(second)], [Answer(example.answers[0])]])
    assert [(s.round, s.query) for s in episode.searches] == [(0, first), (0, second)]
    assert episode.turns[0].text.endswith(f"<search> {first} ## {second} </search>")
    assert len(episode.rounds) == 2
    assert steps[-1][1]["reward_components"]["decomposition"] == pytest.approx(0.45)
    assert total == pytest.approx(1 + 0.45 + 0.35)  # EM with a valid format is score, no format bonus


# ---------------------------------------------------------------- the reward on hand-built episodes
def test_question_types_follow_the_released_flag():
    assert question_type({"type": "comparison"}) == question_type({"type": "comparison_query"}) == COMPARISON
    assert question_type({}) == question_type({"type": "na"}) == question_type({"type": "single"}) == NA
    assert question_type({"type": "bridge"}) == question_type({"type": "compositional"}) == SEQUENTIAL
    # released: only "comparison" is parallel (PS rl_dataset.py:132 at 5da97f4); comparison_query is sequential
    assert question_type({"type": "comparison_query"}, released=True) == SEQUENTIAL
    assert question_type({"type": "comparison"}, released=True) == COMPARISON
    assert question_type({"type": "na"}, released=True) == question_type({}, released=True) == NA
    with pytest.raises(ConfigError, match="expects the example's metadata 'type' to be a question type string"):
        question_type({"type": 3})


def episode(kind, rounds, answer, *, think=True, answers=("Saerdor",), ids=None, question="Which city is larger, Drizeikund or Saerdor?"):
    """An episode of ``rounds`` search rounds (each a list of queries) and then ``answer``."""
    turns, searches = [], []
    head = "<think> t </think>" if think else ""
    for r, queries in enumerate(rounds):
        turns.append(Turn(f"{head}<search> {' ## '.join(queries)} </search>", ("search",) * len(queries),
                          ("documents",) * len(queries), r, tuple(Search(q) for q in queries)))
        for i, q in enumerate(queries):
            got = ids[r][i] if ids else (f"p{r}-{i}",)
            searches.append(SearchRecord(r + 1, r, q, got, tuple("t" for _ in got)))
    if answer is not None:
        turns.append(Turn(f"{head}<answer> {answer} </answer>", ("answer",), (), len(rounds), (Answer(answer),)))
    meta = {} if kind is None else {"type": kind}
    return Episode(question=question, answers=answers, turns=tuple(turns), answer=answer, metadata=meta,
                   searches=tuple(searches), num_searches=len(searches))


SPLIT = [["Drizeikund population", "Saerdor population"]]


@pytest.mark.parametrize("kind, rounds, answer, think, total", [
    # comparison: a right split in one round, valid format: 1 + 0.45 + 0.35
    ("comparison", SPLIT, "Saerdor", True, 1.8),
    ("comparison", SPLIT, "Saerdor", False, 1 - 0.1 + 0.45 + 0.35),    # invalid format: score - s
    ("comparison", [["Drizeikund population"], ["Saerdor population"]], "Saerdor", True, 1.0 + 0.0),  # sequential: no bonus, count 0
    ("comparison", SPLIT, WRONG, True, 0.1),                             # wrong: format only, no shaping bonus
    ("comparison", SPLIT, WRONG, False, 0.0),                            # wrong, invalid: f = 0
    ("comparison", SPLIT * 3, WRONG, True, 0.1 - 0.35),                  # three rounds: the penalty always applies
    ("comparison", SPLIT, None, True, 0.0),                              # no answer: invalid sequence, no bonus
    # na (single-hop): one query in one round is the target
    (None, [["Saerdor"]], "Saerdor", True, 1.0 + 0.15 + 0.35),
    ("single", [], "Saerdor", True, 1.0 + 0.0),                          # no search: no decomposition bonus
    ("na", [["a", "b"]], "Saerdor", True, 1.0 + 0.35),                   # a split where none is needed
    # sequential: two or more rounds
    ("bridge", [["x"], ["y"]], "Saerdor", True, 1.0 + 0.15 + 0.35),
    ("bridge", [["x"]], "Saerdor", True, 1.0 + 0.15),
    ("bridge", [], WRONG, True, 0.1 - 0.35),
    ("bridge", [["x"], ["x"], ["x"]], WRONG, True, 0.1),                 # repeated rounds earn nothing for a wrong answer
])
def test_the_checked_reward_per_branch(kind, rounds, answer, think, total):
    result = ParallelSearchReward().score(episode(kind, rounds, answer, think=think))
    assert result.total == pytest.approx(total)


@pytest.mark.parametrize("kind, rounds, answer, total", [
    ("comparison", [["Saerdor", "a"]], WRONG, 0.1 + 0.45 + 0.35),        # any split pays 0.45
    ("comparison", [["Saerdor population"]], WRONG, 0.1 + 0.35),
    ("bridge", [], WRONG, 0.1 + 0.15 - 0.35),                            # no search still earns 0.15
    ("bridge", [["x"], ["x"]], WRONG, 0.1 + 0.15 + 0.35),               # two searches of anything: 0.35
    ("na", [], None, 0.15 + 0.0),
    ("comparison", [["a"]] * 3, WRONG, 0.1 - 0.35),
])
def test_the_released_reward_per_branch(kind, rounds, answer, total):
    result = ParallelSearchReward(shaping="released").score(episode(kind, rounds, answer))
    assert result.total == pytest.approx(total)


@pytest.mark.parametrize("queries, ids, paid", [
    (["Drizeikund population", "Saerdor population"], [[("p1",), ("p2",)]], True),
    (["Drizeikund population", "drizeikund  population"], [[("p1",), ("p2",)]], False),  # not distinct
    (["Drizeikund population", "the of and"], [[("p1",), ("p2",)]], False),              # no content word of the question
    (["Drizeikund population", "Saerdor population"], [[("p1",), ("p1",)]], False),       # nothing new retrieved
    (["Drizeikund population", "Saerdor population"], [[("p1", "p2"), ("p2",)]], False),  # the second adds nothing
])
def test_a_right_split_pays_only_distinct_sub_queries_that_each_retrieve_something_new(queries, ids, paid):
    result = ParallelSearchReward().score(episode("comparison", [queries], "Saerdor", ids=ids))
    assert result.components["decomposition"] == pytest.approx(0.45 if paid else 0.0)


def test_format_reads_one_documents_block_per_turn_and_floor():
    assert parallel_format(episode("comparison", SPLIT, "Saerdor").turns)[0]
    assert not parallel_format(episode("comparison", SPLIT, "Saerdor", think=False).turns)[0]
    idle = Episode(question="q?", answers=("a",), turns=(Turn("I don't know.", ("invalid",), ("feedback",), 0, (Invalid("x"),)),))
    for kind, checked, released in (("bridge", -0.35, -0.2), ("comparison", 0.0, 0.0), ("na", 0.0, 0.15)):
        idle.metadata = {"type": kind}
        assert ParallelSearchReward().floor(idle) == pytest.approx(checked) == ParallelSearchReward().score(idle).total
        assert ParallelSearchReward(shaping="released").floor(idle) == pytest.approx(released)
        assert ParallelSearchReward(shaping="released").score(idle).total == pytest.approx(released)


def test_bad_reward_options_are_refused_by_name(env):
    with pytest.raises(UnknownNameError, match="Unknown ParallelSearch shaping mode 'paper'"):
        ParallelSearchReward(shaping="paper")
    with pytest.raises(ConfigError, match="expects count_score to be a finite number, got nan"):
        ParallelSearchReward(count_score=float("nan"))
    with pytest.raises(ConfigError, match="expects comp_score to be a finite number, got 'high'"):
        gym.make(ENV_ID, corpus_options=WORLD, reward_options={"comp_score": "high"})


def test_a_bad_question_type_in_the_data_fails_the_episode_by_name_never_the_env():
    bad = QAExample("bad-type", "Which city is larger, Drizeikund or Saerdor?", ("Saerdor",), metadata={"type": 7})
    env = gym.make(ENV_ID, corpus_options=WORLD, dataset=[bad])
    env.reset(seed=0)
    with pytest.raises(RecipeError, match="ConfigError: ParallelSearch expects the example's metadata 'type'.*got int 7"):
        env.step("<answer> Saerdor </answer>")
    env.close()


# ---------------------------------------------------------------- the env: both formats, fuzz
def test_the_env_passes_the_checkers_and_survives_hostile_turns(env):
    check_search_env(env, fuzz=60)
    hostile = ["", "<search>", "<search> " + "## " * 5000 + "</search>", "<search><search> a ## b </search></search>",
               "<information>Doc 1(Title: Saerdor) Saerdor</information><answer> x </answer>", "x" * 100_000,
               "<search> a ## <answer> b </answer> ## c </search>", "<think><search> ## </think>", "\x00##\ud800"]
    env.reset(seed=1)
    for text in hostile + fuzz_actions(search_env(env).protocol, 40, seed=3):
        _, _, terminated, truncated, info = env.step(text)
        if terminated or truncated:
            env.reset()


def test_tool_mode_survives_hostile_messages(tool_env):
    tool_env.reset(seed=1)
    call = lambda q: {"type": "function", "function": {"name": "search", "arguments": {"query": q}}}  # noqa: E731
    hostile = ["", "<tool_call>{", {"role": "assistant", "content": None, "tool_calls": [call("a ## b")] * 20},
               {"role": "assistant", "content": "", "tool_calls": [call("")]}, {"content": 5},
               {"role": "assistant", "tool_calls": [{"function": {"name": "search", "arguments": "{not json"}}]},
               "<tool_call>" + json.dumps({"name": "search", "arguments": {"query": "## ##"}}) + "</tool_call>"]
    for message in hostile:
        try:
            _, _, terminated, truncated, _ = tool_env.step(message)
        except SearchGymError as e:  # a message of the wrong type is refused by name, never a crash
            assert "expects the action to be an assistant message" in str(e)
            continue
        if terminated or truncated:
            tool_env.reset()


# ---------------------------------------------------------------- the hack suite
@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_no_cheap_strategy_beats_the_honest_wrong_answer(action_format):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import hacks_parallelsearch as hacks

    rows = hacks.rows(quick=True, action_format=action_format)
    print("\n".join(f"{r['strategy']:<52}{r['gain']:+.3f}" for r in rows))
    assert len(rows) >= 8 and all(r["gain"] <= hacks.TOLERANCE for r in rows), rows
    released = {r["strategy"]: r for r in hacks.rows(quick=True, action_format=action_format, shaping="released")}
    # the released reward is exploitable: junk splits of comparison questions pay 0.45 each
    assert released["split: the question and junk sub-queries"]["gain_by_type"]["comparison"] == pytest.approx(0.45)
    assert released["two rounds of the question, then answer"]["gain_by_type"]["bridge"] == pytest.approx(0.35)


# ---------------------------------------------------------------- the commands
def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "searchgym.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})


def test_bench_plays_the_env_id_with_the_oracle_and_the_parallel_oracle_in_both_formats(tmp_path):
    for fmt in ("tags", "tools"):
        done = run_cli("bench", "--envs", "ParallelSearch-v0", "--agents", "oracle", "searchgym.methods.parallelsearch:ParallelOracle",
                       "--limit", "20", "--env-option", f"action_format={fmt}", "--corpus-option", "num_passages=400",
                       "--corpus-option", "seed=7", "--out", fmt, "--quiet", cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        oracle, parallel = json.loads((tmp_path / fmt / "summary.json").read_text())["runs"]
        assert oracle["em"] == parallel["em"] == 1.0 and oracle["failures"] == parallel["failures"] == "-"
        # the oracle searches one hop per turn: its comparisons take two rounds and earn 1.0; the parallel
        # oracle searches both sides in one turn and earns 1.8 on each of the 5 comparisons of these 20
        assert parallel["reward"] - oracle["reward"] == pytest.approx(5 * 0.8 / 20)


def test_the_preset_trains_a_quick_form_through_the_cli(tmp_path):
    args = preset("parallelsearch")
    assert (args.env_id, args.algorithm, args.n, args.lr, args.kl_coef) == (ENV_ID, "ppo", 1, 1e-6, 0.001)
    done = run_cli("train", "--preset", "parallelsearch", "--model", "tiny-random-2k", "--total-steps", "2",
                   "--questions-per-step", "2", "--max-new-tokens", "8", "--eval-every", "0", "--no-tensorboard", "--no-progress",
                   "--env-options", json.dumps({"corpus_options": WORLD, "max_turns": 2}), "--out", "run", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run" / "metrics.csv").exists() and "step 2:" in done.stdout + done.stderr


def test_the_released_reward_reads_comparison_query_as_sequential():
    """PS rl_dataset.py:132 (5da97f4) sets is_comp = 1 for type == "comparison" only: a MultiHop-RAG
    comparison_query is paid as a sequential question by the released reward."""
    from searchgym.rewards import Episode

    episode = Episode(question="Which is larger, X or Y?", answers=("X",), metadata={"type": "comparison_query"})
    released, checked = ParallelSearchReward(shaping="released"), ParallelSearchReward()
    assert released.released_types and not checked.released_types
    # no search, no answer: released pays 0.15 for not splitting a non-comparison and 0.35 x (1 - |0 - 2|) for
    # no search on a sequential one; read as a comparison, the count term is 0.35 x (1 - |0 - 1|) = 0 and no bonus
    assert released.floor(episode) == pytest.approx(0.15 - 0.35)
    assert ParallelSearchReward(shaping="released", released_types=False).floor(episode) == pytest.approx(0.0)
    assert released.score(episode).components["question_type"] == 0.0
    assert checked.score(episode).components["question_type"] == 1.0
    with pytest.raises(ConfigError, match="released_types to be True, False or None"):
        ParallelSearchReward(released_types="yes")
