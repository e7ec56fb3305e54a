"""What the bench says about episodes that failed, replies that made no tool call, what a
row's reward is made of, and a rerun with nothing left to play."""

import socket

import pytest

import searchgym.bench as bench
from searchgym.agents.base import Agent
from searchgym.bench import BenchConfig, run_bench, summarize, zero_scores_note
from searchgym.cli import main
from searchgym.rewards import RewardRecipe, RewardResult
from searchgym.rewards.base import GoldSpanReader
from searchgym.rewards.recipes import RSearchReward

WORLD = ["--corpus-option", "seed=7", "--corpus-option", "num_passages=400"]
SMALL = {"*": {"corpus_options": {"seed": 7, "num_passages": 400}}}


def refused_url():
    """An OpenAI-style base URL on 127.0.0.1 at a port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_an_unreachable_endpoint_is_a_failed_row_not_a_wrong_one_and_exits_1(tmp_path, capsys):
    from searchgym.lm.testing import tiny_model_folder

    url = refused_url()
    code = main(["bench", "--run", "SearchR1-v0:lm", "--run", "SearchR1-v0:oracle", "--limit", "2", "--backend", "openai",
                 "--model", str(tiny_model_folder()), "--backend-option", f"base_url={url}", "--backend-option", "max_retries=0",
                 *WORLD, "--out", str(tmp_path), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1, err
    refused = f"The server at {url}/completions could not connect (ConnectError: [Errno 111] Connection refused)"
    table = out.splitlines()
    # The failed row shows no reward (nothing was scored) and names its failures.
    assert "| lm @ SearchR1-v0 | 2 | 0.000 |" in table[2] and "| - | 0.00 |" in table[2] and table[2].endswith("| backend_error 2 |")
    assert f"lm @ SearchR1-v0: 2 of 2 episodes failed (backend_error 2), not answered; first error: {refused}" in out
    assert "questions wrong" not in out and "answered wrong" not in out  # failures are not wrong answers
    assert err.startswith(f"searchgym bench: error: every episode of 'lm @ SearchR1-v0' (backend_error 2) failed; first error: {refused}")
    assert "Traceback" not in err


def test_a_row_that_partly_failed_counts_its_failures_apart_and_scores_what_it_played():
    def record(outcome, reward, error=None):
        return {"em": 0, "f1": 0, "cover_em": 0, "gen_acc": 0, "reward": reward, "num_searches": 0, "num_turns": 1, "context_tokens": 1,
                "generated_tokens": 1, "wall_time": 0.1, "outcome": outcome, "flags": [], "error": error}

    row = summarize("lm @ S", "S", "lm", [record("answered", 0.0), record("error", -1.0, "boom\n  at line 3"), record("answered", 0.5)])
    assert (row["n"], row["failed"], row["reward"], row["failures"]) == (3, 1, 0.25, "error 1")
    assert bench.run_notes([row | {"reward_recipe": None, "reward_parts": None}])[-1] == (
        "lm @ S: 1 of 3 episodes failed (error 1), not answered; first error: boom at line 3"
    )
    row["reward"] = 0.0
    assert zero_scores_note([row]).endswith(
        "no row answered any of the 3 questions right: 2 episodes answered wrong, 1 failed (above), and 3 questions are too "
        "few to tell the rows apart; play more with --limit.")
    gone = summarize("x", "S", "lm", [record("backend_error", 0.0, "refused")] * 2)
    assert zero_scores_note([gone]) is None  # nothing was answered at all: the failure lines say it
    assert bench.BenchResults(BenchConfig(runs=[("SearchR1-v0", "oracle")]), [row, gone], {}).all_failed() == [gone]


class Half(RewardRecipe):
    """Half a point for any answer."""

    name = "half"

    def score(self, episode):
        return RewardResult(0.5 if episode.answer is not None else 0.0, {})


class Weighted(Half):
    name = "weighted"

    def describe(self):
        return "0.5 for any answer"


def test_each_rows_reward_says_what_it_is_made_of_from_the_recipe_itself(tmp_path):
    options = {**SMALL, "SearchR1-v0": {"reward": Half(invalid_action_penalty=-0.1)}, "RECON-v0": {"reward": Weighted()}}
    config = BenchConfig(runs=[("RSearch-v0", "oracle"), ("S3-v0", "oracle"), ("SearchR1-v0", "oracle"), ("RECON-v0", "oracle")],
                         limit=2, env_options=options)
    results = run_bench(config, tmp_path, progress=False)
    notes = results.notes()
    assert notes[0] == (
        "reward of oracle @ RSearch-v0: r_search: answer F1 + evidence F1 (the frozen reader's answer from the evidence) + "
        "answer format 0.2 + evidence format 0.2 (Eq. 5: paid without a search too; after one, for evidence quoting the "
        "documents shown), format paid to an episode that answered: a wrong answer in form earns 0.4"
    )
    assert notes[1].startswith("reward of oracle @ S3-v0: s3_gbr: Gain Beyond RAG: GenAcc of the frozen generator")
    # A user's recipe: its docstring's first sentence, or its own describe(); a penalty is named.
    assert notes[2:] == ["reward of oracle @ SearchR1-v0: half: Half a point for any answer; -0.1 per malformed turn",
                         "reward of oracle @ RECON-v0: weighted: 0.5 for any answer"]
    assert results.rows[0]["reward_recipe"] == "r_search" and results.rows[0]["reward_parts"] == notes[0].split(": r_search: ")[1]
    # The weights are the recipe's own.
    reader = GoldSpanReader()
    assert RSearchReward(reader, answer_format_score=0.3, grounded=False).describe().endswith(
        "evidence format 0.2 (Eq. 5: paid without a search too), format paid to an episode that answered: a wrong answer in form earns 0.5")
    assert "format paid to every episode" in RSearchReward(reader, paper_format_rule=True).describe()


def test_a_rerun_with_nothing_left_to_play_loads_no_model(tmp_path, monkeypatch, capsys):
    config = BenchConfig(runs=[("SearchR1-v0", "lm"), ("RSearch-v0", "oracle")], model="tiny-random", frozen_model="policy",
                         limit=1, max_new_tokens=8, env_options=SMALL)
    first = run_bench(config, tmp_path, progress=False)

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded with nothing left to play")

    monkeypatch.setattr(bench, "_load", refuse)
    capsys.readouterr()
    again = run_bench(config, tmp_path, progress=False)
    assert "reusing: all 2 episodes were done in" in capsys.readouterr().err
    assert [r["n"] for r in again.rows] == [1, 1] and again.rows[1]["reward_recipe"] == "r_search"
    assert [r["em"] for r in again.rows] == [r["em"] for r in first.rows]
    # With an episode left, the models load (and the refusal shows it).
    records = (tmp_path / "episodes.jsonl").read_text().splitlines()
    (tmp_path / "episodes.jsonl").write_text(records[0] + "\n")
    with pytest.raises(AssertionError, match="a model was loaded"):
        run_bench(config, tmp_path, progress=False)


class TagWriter(Agent):
    """Writes Search-R1's tags in a tools env, as a model prompted for tags would."""

    name = "tag-writer"

    def act(self, observations, infos):
        return ["<search> who founded it </search>" for _ in observations]


def test_replies_without_a_tool_call_are_counted_and_tag_grammars_named(tmp_path, recwarn, monkeypatch):
    from searchgym.envs.tools import no_call

    monkeypatch.setattr(no_call, "_warned", False)  # this process may have warned already
    options = {"*": {**SMALL["*"], "action_format": "tools"}}
    results = run_bench(BenchConfig(runs=[("SearchR1-v0", TagWriter())], limit=3, env_options=options, num_envs=2), tmp_path, progress=False)
    row = results.rows[0]
    assert (row["n"], row["ended_without_call"], row["other_grammar_tags"], row["outcomes"]) == (3, 3, 3, {"answered": 3})
    assert results.notes()[-1] == (
        "tag-writer @ SearchR1-v0: 3 of 3 episodes ended on a reply with no tool call, read as the final answer; "
        "3 of them wrote a tag grammar's tags (such as <search>) instead of a call"
    )
    said = [str(w.message) for w in recwarn.list if "with no tool call" in str(w.message)]
    assert len(said) == 1 and "(<search>, </search>)" in said[0] and "once per process" in said[0]
    assert all("episodes ended on a reply" not in line for line in run_bench(
        BenchConfig(runs=[("SearchR1-v0", "oracle")], limit=2, env_options=options), None, progress=False).notes())


def test_rows_that_never_answered_are_not_said_to_have_answered_wrong():
    """The quick demo's shape: three agents ran out of turns without an answer, three answered
    (s3's frozen generator among them): the sentence says which, and so does the demo."""
    from searchgym.demo import explain

    def row(label, agent, outcome, env="searchgym/SearchR1-v0"):
        return {"label": label, "agent": agent, "env": env, "n": 1, "em": 0.0, "f1": 0.0, "cover_em": 0.0, "gen_acc": 0.0,
                "f1_raw": 0.0, "cover_em_raw": 0.0, "gen_acc_raw": 0.0, "searches": 0.0, "failures": "-", "failed": 0,
                "outcomes": {outcome: 1}}

    rows = [row("no retrieval", "no-retrieval", "answered"), row("Search-R1 agent", "lm", "truncated"),
            row("RECON agent", "lm", "truncated", "searchgym/RECON-v0"), row("s3 searcher", "lm", "completed", "searchgym/S3-v0"),
            row("R-Search agent", "lm", "truncated", "searchgym/RSearch-v0")]
    assert zero_scores_note(rows, "smollm2").endswith(
        "nothing to rank: no row answered the question right: 2 episodes answered wrong, 3 never answered (the turns ran "
        "out first), and 1 question is too few to tell the rows apart; play more with --limit.")
    lines = explain(rows, "smollm2").split("What these rows show:\n")[1].splitlines()
    assert lines[-1] == (
        "  never searched: Search-R1 agent (1 of 1 never answered: the turns ran out first); RECON agent (1 of 1 never answered: "
        "the turns ran out first); s3 searcher (1 of 1 finished without a search of its own); R-Search agent (1 of 1 never "
        "answered: the turns ran out first)")
