"""The benchmark harness: runs, summary math, files, resume, errors, the CLI."""

import csv
import json
import warnings
from pathlib import Path

import pytest

import re

import searchgym.agents.driver as driver
from searchgym.agents.base import Agent
from searchgym.envs.protocols import Answer, make_protocol
from searchgym.bench import BenchConfig, cross, read_episodes, run_bench, summarize
from searchgym.cli import main
from searchgym.error import ConfigError, DataFormatError, UnknownNameError

WORLD = {"*": {"corpus_options": {"seed": 7, "num_passages": 400}}}


def config(**kw):
    kw.setdefault("runs", cross(["SearchR1-v0", "S3-v0"], ["oracle", "random"]))
    kw.setdefault("env_options", WORLD)
    kw.setdefault("limit", 6)
    kw.setdefault("num_envs", 3)
    return BenchConfig(**kw)


def test_summary_means_and_failure_counts():
    records = [
        {"em": 1, "f1": 1, "cover_em": 1, "gen_acc": 1, "reward": 1, "num_searches": 2, "num_turns": 3, "context_tokens": 100, "generated_tokens": 10, "wall_time": 0.5, "outcome": "answered", "flags": []},
        {"em": 0, "f1": 0.5, "cover_em": 0, "gen_acc": 1, "reward": -0.5, "num_searches": 0, "num_turns": 1, "context_tokens": 300, "generated_tokens": 30, "wall_time": 1.5, "outcome": "backend_error", "flags": ["length"], "error": "refused"},
    ]
    row = summarize("x @ y", "y", "x", records)
    assert (row["n"], row["em"], row["f1"], row["gen_acc"], row["searches"], row["context_tokens"], row["seconds_per_episode"]) == (2, 0.5, 0.75, 1.0, 1.0, 200.0, 1.0)
    assert row["failures"] == "backend_error 1" and row["flags"] == {"length": 1}
    # The failed episode was never scored: the turn rewards it was paid are no episode reward.
    assert (row["reward"], row["failed"], row["first_error"]) == (1.0, 1, "refused")
    assert summarize("x @ y", "y", "x", records[1:])["reward"] is None  # every episode failed: no reward to show


def test_bench_writes_json_csv_png_and_markdown(tmp_path):
    results = run_bench(config(), tmp_path, progress=False)
    labels = [r["label"] for r in results.rows]
    assert labels == ["oracle @ SearchR1-v0", "random @ SearchR1-v0", "oracle @ S3-v0", "random @ S3-v0"]
    oracle = results.rows[0]
    assert oracle["n"] == 6 and oracle["em"] == 1.0 and oracle["reward"] == 1.0
    assert results.rows[1]["em"] < 1.0
    table = results.markdown().splitlines()
    assert table[0].startswith("| run | n | EM | F1 |") and table[2].startswith("| oracle @ SearchR1-v0 | 6 | 1.000 |")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["runs"][0]["em"] == 1.0 and summary["config"]["limit"] == 6
    rows = list(csv.DictReader(open(tmp_path / "summary.csv")))
    assert rows[2]["label"] == "oracle @ S3-v0" and float(rows[2]["gen_acc"]) == 1.0
    assert (tmp_path / "summary.png").stat().st_size > 10_000
    assert len(read_episodes(tmp_path / "episodes.jsonl")) == 24


def test_continuous_scheduling_was_removed(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"^BenchConfig\(scheduling='continuous'\) was removed: .* Leave scheduling \(--scheduling\) out: episodes are played turn by turn\.$"):
        config(scheduling="continuous")
    with pytest.raises(ConfigError, match=r"^BenchConfig expects scheduling='turns' \(the only scheduling\), got 'eager'\.$"):
        config(scheduling="eager")
    assert main(["bench", "--run", "SearchR1-v0:oracle", "--scheduling", "continuous", "--out", str(tmp_path)]) == 2
    assert "searchgym bench: error: BenchConfig(scheduling='continuous') was removed: " in capsys.readouterr().err


def test_resume_plays_only_missing_episodes_and_tolerates_a_cut_last_line(tmp_path, monkeypatch):
    run_bench(config(), tmp_path, progress=False)
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-3]) + "\n" + lines[-3][:40])  # two episodes lost, one half-written
    played = []
    real = driver.run_episodes

    def counting(envs, agent, tasks, **kw):
        played.extend(tasks)
        return real(envs, agent, tasks, **kw)

    monkeypatch.setattr("searchgym.bench.run_episodes", counting)
    with pytest.warns(UserWarning, match="ignoring the unfinished last line 22"):
        results = run_bench(config(), tmp_path, progress=False)
    assert len(played) == 3
    assert [r["n"] for r in results.rows] == [6, 6, 6, 6]
    assert len(read_episodes(path)) == 24
    played.clear()
    run_bench(config(), tmp_path, progress=False)
    assert played == []
    # The resumed benchmark holds what an uninterrupted one does (random agent included).
    whole = run_bench(config(), tmp_path / "whole", progress=False)
    key = lambda records: sorted(json.dumps({k: v for k, v in r.items() if k != "wall_time"}, sort_keys=True) for r in records)  # noqa: E731
    assert key(read_episodes(path)) == key(read_episodes(tmp_path / "whole" / "episodes.jsonl"))
    assert [r["em"] for r in results.rows] == [r["em"] for r in whole.rows]


def test_resume_repairs_the_file_and_refuses_what_it_cannot_trust(tmp_path):
    run_bench(config(limit=2), tmp_path, progress=False)
    path = tmp_path / "episodes.jsonl"
    lines = path.read_text().splitlines()
    # A damaged last line that still ends with its newline, and a record written twice.
    path.write_text("\n".join(lines[:-1] + [lines[0], lines[-1][:30]]) + "\n")
    with pytest.warns(UserWarning, match="ignoring the unfinished last line 9"):
        results = run_bench(config(limit=2), tmp_path, progress=False)
    assert [r["n"] for r in results.rows] == [2, 2, 2, 2]
    assert all(json.loads(line) for line in path.read_text().splitlines())  # the damaged line is gone from the file
    assert len(read_episodes(path)) == 8
    (tmp_path / "config.json").unlink()
    with pytest.raises(ConfigError, match=r"holds episodes but no config.json describing them; pick another --out, or pass --no-resume"):
        run_bench(config(limit=2), tmp_path, progress=False)
    (tmp_path / "config.json").write_text('{"runs": [')
    with pytest.raises(DataFormatError, match=r"config.json: expected the benchmark's configuration as a JSON object, got damaged JSON"):
        run_bench(config(limit=2), tmp_path, progress=False)
    with pytest.raises(ConfigError, match=r"is a file; pick another --out\.$"):
        run_bench(config(limit=2), path, progress=False)


def test_a_failed_invocation_does_not_block_the_corrected_one(tmp_path):
    with pytest.raises(UnknownNameError, match="split 'devv'"):
        run_bench(config(limit=2, split="devv"), tmp_path, progress=False)
    assert run_bench(config(limit=2), tmp_path, progress=False).rows[0]["n"] == 2  # no episode was recorded: not refused


def test_backend_errors_are_played_again_on_resume(tmp_path):
    run_bench(config(limit=2, runs=[("SearchR1-v0", "oracle")]), tmp_path, progress=False)
    path = tmp_path / "episodes.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[0] |= {"outcome": "backend_error", "em": 0.0, "error": "timed out"}
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    results = run_bench(config(limit=2, runs=[("SearchR1-v0", "oracle")]), tmp_path, progress=False)
    assert results.rows[0]["n"] == 2 and results.rows[0]["em"] == 1.0 and results.rows[0]["failures"] == "-"
    assert sorted(r["outcome"] for r in read_episodes(path)) == ["answered", "answered"]


def test_seeds_are_distinct_non_negative_integers():
    with pytest.raises(ConfigError, match=r"^BenchConfig expects seeds to be non-negative integers, got -1\.$"):
        config(seeds=(-1,))
    with pytest.raises(ConfigError, match=r"^BenchConfig expects distinct seeds \(each plays every question once\), got \[0, 0\]\.$"):
        config(seeds=(0, 0))


def test_a_changed_configuration_is_refused_and_no_resume_starts_over(tmp_path):
    run_bench(config(limit=2), tmp_path, progress=False)
    with pytest.raises(ConfigError, match=r"different configuration \(changed: limit\); resume it with the same arguments"):
        run_bench(config(limit=3), tmp_path, progress=False)
    results = run_bench(config(limit=3), tmp_path, progress=False, resume=False)
    assert results.rows[0]["n"] == 3 and len(read_episodes(tmp_path / "episodes.jsonl")) == 12


def test_a_corrupt_line_in_the_middle_is_an_error(tmp_path):
    record = json.dumps({"run": "r", "example_id": "q", "seed": 0, "outcome": "answered"})
    (tmp_path / "episodes.jsonl").write_text(f"{record}\nnot json\n{record}\n")
    with pytest.raises(DataFormatError, match=r"episodes.jsonl, line 2: expected one JSON episode record per line"):
        read_episodes(tmp_path / "episodes.jsonl")
    (tmp_path / "episodes.jsonl").write_text(f"[1, 2]\n{record}\n")  # JSON, but not a record
    with pytest.raises(DataFormatError, match=r"episodes.jsonl, line 1: expected one JSON episode record per line"):
        read_episodes(tmp_path / "episodes.jsonl")


def test_unknown_names_fail_before_any_model_loads(tmp_path, monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr("searchgym.lm.registry.load_lm", no_model)
    with pytest.raises(UnknownNameError, match="Unknown agent 'naive-rga'. Did you mean 'naive-rag'?"):
        run_bench(config(runs=[("SearchR1-v0", "lm"), ("SearchR1-v0", "naive-rga")]), tmp_path)
    with pytest.raises(UnknownNameError, match="Unknown env id 'Search-R1-v0'. Did you mean 'SearchR1-v0'?"):
        run_bench(config(runs=[("Search-R1-v0", "lm")]), tmp_path)
    with pytest.raises(UnknownNameError, match="Unknown language-model backend 'vlm'. Did you mean 'vllm'?"):
        run_bench(config(runs=[("SearchR1-v0", "lm")], backend="vlm"), tmp_path)
    with pytest.raises(ConfigError, match="distinct run labels"):
        run_bench(config(runs=[("SearchR1-v0", "lm"), ("searchgym/SearchR1-v0", "lm")]), tmp_path)


def test_lm_agents_through_the_bench_with_a_frozen_lm(tmp_path):
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    def respond(prompt):
        if "Contexts:" in prompt or "support context" in prompt:
            return "a frozen reply"  # the s3 generator or the RECON summarizer
        if "search_complete" in prompt:
            return "<search_complete>True</search_complete>"
        return "<search> who </search>" if prompt.count("</information>") < 2 else "<answer> x </answer>"

    lm = ScriptedLM(respond, tiny_tokenizer())
    results = run_bench(
        config(runs=[("SearchR1-v0", "naive-rag"), ("S3-v0", "lm"), ("RECON-v0", "lm")], model=lm,
               frozen_model="policy", summarizer="llm", limit=2, num_envs=2),
        None, progress=False,
    )
    naive, s3, recon = results.rows
    assert [r["n"] for r in results.rows] == [2, 2, 2] and all(r["failures"] == "-" for r in results.rows)
    assert naive["searches"] == 0 and naive["generated_tokens"] > 0
    assert s3["outcomes"] == {"completed": 2} and s3["gen_acc"] == 0.0
    assert recon["searches"] == 1.0 and recon["turns"] == 2.0
    first = results.episodes["lm @ RECON-v0"][0]
    assert first["prediction"] == "x" and first["generated_tokens"] > 0


def test_the_lm_agents_sample_at_the_benchs_temperature_as_r_search_evaluates():
    """R-Search evaluates at temperature 0.1 (App. A.3): `temperature=0.1` reaches every
    generate call of the LM agent; the default decodes greedily."""
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    class Recording(ScriptedLM):
        def _generate(self, prompt_ids, params):
            temperatures.append(params.temperature)
            return super()._generate(prompt_ids, params)

    lm = Recording(["<search> who </search>", "<answer> x </answer>"], tiny_tokenizer())
    for temperature, expected in ((0.1, 0.1), (None, 0.0)):
        temperatures = []
        settings = {} if temperature is None else {"temperature": temperature}
        run_bench(config(runs=[("RSearch-v0", "lm")], model=lm, limit=2, num_envs=2, **settings), None, progress=False)
        assert temperatures and set(temperatures) == {expected}


def test_models_that_cannot_hold_the_prompt_are_recorded_not_raised():
    results = run_bench(config(runs=[("SearchR1-v0", "lm")], model="tiny-random", limit=2, num_envs=2, max_new_tokens=8), None, progress=False)
    assert results.rows[0]["failures"] == "prompt_too_long 2"  # the tiny model's context is 256 tokens


def test_cli_runs_a_benchmark_and_reports_bad_arguments(tmp_path, capsys):
    out = tmp_path / "cli"
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--limit", "3", "--corpus-option", "num_passages=400",
                 "--corpus-option", "seed=7", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| oracle @ SearchR1-v0 | 3 | 1.000 |" in printed and (out / "summary.png").exists()
    assert "nothing to rank" not in printed  # a row that scores is ranked, not explained away
    assert main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--limit", "1", "--corpus-option", "num_passages=400",
                 "--corpus-option", "seed=7", "--judge-batch", "8", "--out", str(tmp_path / "judge-batch"), "--quiet"]) == 0
    assert "warning: --judge-batch 8 does nothing: no judge runs without --judge." in capsys.readouterr().err
    assert main(["bench", "--run", "SearchR1-v0"]) == 2
    assert capsys.readouterr().err == "searchgym bench: error: --run expects ENV:AGENT, got 'SearchR1-v0'.\n"
    assert main(["bench", "--corpus-option", "x", "--envs", "SearchR1-v0", "--agents", "oracle"]) == 2
    assert "--corpus-option expects KEY=VALUE, got 'x'." in capsys.readouterr().err


def test_a_table_of_zeros_says_plainly_that_nothing_scored_and_why():
    from searchgym.bench import zero_scores_note

    def row(n=2, **scores):
        return {"label": "x", "n": n, "em": 0.0, "f1": 0.0, "cover_em": 0.0, "gen_acc": 0.0, "f1_raw": 0.0, "cover_em_raw": 0.0,
                "gen_acc_raw": 0.0, **scores}

    head = "Every score is 0 in every row (2 questions per row), so there is nothing to rank: "
    assert zero_scores_note([row(), row()], "tiny-random") == head + (
        "the policy 'tiny-random' is a tiny model of random weights, which writes noise and never answers right; these rows "
        "show the pipeline running, not what an agent can do (the LM-free oracle, `--agents oracle` on synthwiki, shows a "
        "full score; a trained model shows a real one).")
    assert zero_scores_note([row(n=1)], "smollm2") == (
        "Every score is 0 in every row (1 question per row), so there is nothing to rank: every row answered the question "
        "wrong, and 1 question is too few to tell the rows apart; play more with --limit.")
    assert zero_scores_note([row(n=32)], "smollm2").endswith("every row answered all 32 questions wrong; this model does not answer these questions yet.")
    # One score above 0 anywhere (a raw one too) and the table is ranked as usual.
    assert zero_scores_note([row(), row(f1_raw=0.1)], "tiny-random") is None
    assert zero_scores_note([row(), row(cover_em=0.5)], "smollm2") is None
    assert zero_scores_note([], "smollm2") is None


def test_cli_says_why_a_tiny_random_models_rows_are_all_zero(tmp_path, capsys):
    out = tmp_path / "zeros"
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "no-retrieval", "--model", "tiny-random", "--max-new-tokens", "8",
                 "--limit", "2", "--corpus-option", "num_passages=400", "--corpus-option", "seed=7", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "\nEvery score is 0 in every row (2 questions per row), so there is nothing to rank: the policy 'tiny-random' is a tiny model" in printed


def test_cli_env_options_reach_every_env_as_r_searchs_evaluation_sets_them(tmp_path, capsys):
    import json

    out = tmp_path / "rsearch"
    code = main(["bench", "--envs", "RSearch-v0", "--agents", "oracle", "--limit", "2", "--corpus-option", "num_passages=400",
                 "--corpus-option", "seed=7", "--env-option", "top_k=5", "--temperature", "0.1", "--out", str(out), "--quiet"])
    assert code == 0 and "| oracle @ RSearch-v0 | 2 |" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["env_options"]["*"] == {"corpus_options": {"num_passages": 400, "seed": 7}, "top_k": 5} and config["temperature"] == 0.1
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert records and all(r["num_searches"] >= 1 for r in records)
    assert main(["bench", "--env-option", "top_k", "--envs", "RSearch-v0", "--agents", "oracle"]) == 2
    assert "--env-option expects KEY=VALUE, got 'top_k'." in capsys.readouterr().err


def test_demo_configuration_names_only_known_envs_agents_and_backends():
    from searchgym.bench import check_config
    from searchgym.demo import DEMO_RUNS, TRAINED_LABEL, demo_config

    config = demo_config(5, "transformers", "bfloat16", 64, 4)
    check_config(config)
    assert [label for label in config.run_labels() if label != TRAINED_LABEL] == [label for label, _, _ in DEMO_RUNS]
    assert config.agent_options["naive-rag"] == {"k": 1} and config.frozen_model == "policy" and config.summarizer == "llm"


def test_demo_backend_and_dtype_defaults():
    torch = pytest.importorskip("torch")

    from searchgym.demo import default_backend, default_dtype

    import importlib.util

    assert default_dtype("transformers") == "float32"
    assert default_dtype("vllm") == ("bfloat16" if torch.cuda.is_available() else "float32")
    assert default_backend() == ("vllm" if importlib.util.find_spec("vllm") else "transformers")


def test_demo_command_defaults():
    from searchgym.cli import build_parser
    from searchgym.demo import DEFAULT_LIMIT, DEFAULT_MAX_NEW_TOKENS, DEFAULT_NUM_ENVS

    args = build_parser().parse_args(["demo"])
    assert (args.limit, args.num_envs, args.max_new_tokens) == (DEFAULT_LIMIT, DEFAULT_NUM_ENVS, DEFAULT_MAX_NEW_TOKENS) == (32, 32, 64)
    assert args.backend is None and args.dtype is None  # chosen per machine by default_backend / default_dtype


def test_a_benchmark_with_a_loaded_model_resumes(tmp_path):
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    run = lambda: run_bench(config(runs=[("SearchR1-v0", "no-retrieval")], model=ScriptedLM(["x"], tiny_tokenizer()), limit=2), tmp_path, progress=False)  # noqa: E731
    run()
    assert json.loads((tmp_path / "config.json").read_text())["model"] == "ScriptedLM()"  # no memory address
    assert run().rows[0]["n"] == 2


def test_agent_options_parse_booleans_and_refuse_unknown_names():
    from searchgym.cli import _key_values

    assert _key_values(["chat=false", "k=3", "temperature=0.5", "x=True", "name=abc"], "agent-option") == {
        "chat": False, "k": 3, "temperature": 0.5, "x": True, "name": "abc"}
    with pytest.raises(ConfigError, match=r"^The 'random' agent does not take that option"):
        run_bench(config(runs=[("SearchR1-v0", "random")], agent_options={"random": {"foo": 1}}, limit=1), None, progress=False)


def test_the_chart_leaves_out_series_that_are_zero_in_every_run(tmp_path):
    from searchgym.bench import SCORE_SERIES, chart_series, plot

    rows = [
        {"label": "a", "n": 2, "em": 0.0, "f1": 0.4, "cover_em": 0.5, "gen_acc": 0.0, "searches": 0.0, "context_tokens": 10},
        {"label": "b", "n": 2, "em": 0.5, "f1": 0.6, "cover_em": 0.5, "gen_acc": 0.0, "searches": 1.0, "context_tokens": 20},
    ]
    assert chart_series(rows) == [("em", "EM"), ("f1", "F1"), ("cover_em", "cover-EM")]
    zero = [{**r, "em": 0.0, "f1": 0.0, "cover_em": 0.0} for r in rows]
    assert chart_series(zero) == list(SCORE_SERIES[:2])  # the runs still show, with two empty series
    assert chart_series([{**r, "gen_acc": 1.0} for r in rows]) == list(SCORE_SERIES)
    assert plot(rows, tmp_path / "chart.png").stat().st_size > 10_000


def test_the_chart_names_the_all_zero_series_and_plots_reward():
    import matplotlib.pyplot as plt

    from searchgym.bench import chart, zero_series

    rows = [
        {"label": "a", "n": 2, "em": 0.0, "f1": 0.4, "cover_em": 0.5, "gen_acc": 0.0, "reward": -0.25, "searches": 0.0,
         "context_tokens": 10},
        {"label": "b", "n": 2, "em": 0.0, "f1": 0.6, "cover_em": 0.5, "gen_acc": 0.0, "reward": 0.75, "searches": 0.0,
         "context_tokens": 20},
    ]
    assert zero_series(rows) == ["EM", "GenAcc"]
    fig = chart(rows)
    try:
        scores, reward, searches, tokens = fig.axes
        assert scores.get_legend().get_title().get_text() == "0 in every run: EM, GenAcc"
        assert [t.get_text() for t in scores.get_legend().get_texts()] == ["F1", "cover-EM"]
        assert reward.get_xlabel() == "episode reward (mean)"
        assert [round(p.get_width(), 2) for p in reward.patches] == [-0.25, 0.75]
        assert [t.get_text() for t in searches.texts] == ["0 in every run"]  # an all-zero panel says so
        assert len(reward.texts) == 0 and len(tokens.texts) == 0
    finally:
        plt.close(fig)
    every_score_zero = [{**r, "f1": 0.0, "cover_em": 0.0} for r in rows]
    fig = chart(every_score_zero)
    try:
        assert fig.axes[0].get_legend().get_title().get_text() == "0 in every run: EM, F1, cover-EM, GenAcc"
    finally:
        plt.close(fig)


def test_the_demo_explains_its_columns_and_what_its_rows_show():
    from searchgym.demo import LEGEND, explain

    def row(label, agent, f1, searches=0.0, failures="-"):
        outcomes = {"answered": 2} if failures == "-" else {"backend_error": 2}
        return {"label": label, "agent": agent, "n": 2, "em": f1 / 2, "f1": f1, "cover_em": f1, "searches": searches, "failures": failures,
                "outcomes": outcomes}

    rows = [row("no retrieval", "no-retrieval", 0.10), row("naive RAG", "naive-rag", 0.30),
            row("Search-R1 agent", "lm", 0.05, 1.5), row("R-Search agent", "lm", 0.20, 0.0, "backend_error 2")]
    text = explain(rows)
    assert text.startswith(LEGEND) and "cover-EM    every token of a gold answer" in text and "GenAcc" in text
    lines = text.split("What these rows show:\n")[1].splitlines()
    assert lines == [
        "  best F1: naive RAG (0.300, EM 0.150, cover-EM 0.300)",
        "  against answering from memory (F1 0.100): better with naive RAG, R-Search agent; worse with Search-R1 agent",
        "  one retrieved passage against none: naive RAG gains F1 +0.200 (0.300 against 0.100), cover-EM +0.200 (0.300 against 0.100)",
        "  never searched: R-Search agent (2 of 2 failed: backend_error 2)",
        "  failed episodes: R-Search agent (backend_error 2)",
        "  multi-turn agents (searching 0.75 times per episode on average) reach F1 0.200 at best (R-Search agent); "
        "one retrieved passage in the prompt reaches 0.300 (naive RAG)",
    ]


class Killed(BaseException):
    """The process dying at a write: nothing after it runs, what reached the OS stays."""


def _bench_writes(monkeypatch, root, kill_at=None):
    """Count the bench's writes under ``root`` (each os.write, os.fsync and os.replace of a file
    there); at write number ``kill_at`` die: half the bytes of a write reach the file, a sync or a
    rename does not happen. Returns the list the points are recorded in."""
    import os

    points = []
    real = {name: getattr(os, name) for name in ("write", "fsync", "replace")}

    def ours(fd_or_path):
        where = os.readlink(f"/proc/self/fd/{fd_or_path}") if isinstance(fd_or_path, int) else str(fd_or_path)
        return where.startswith(str(root))

    def write(fd, data):
        if not ours(fd):
            return real["write"](fd, data)
        points.append(("write", os.readlink(f"/proc/self/fd/{fd}")))
        if len(points) == kill_at:
            real["write"](fd, bytes(data)[: len(data) // 2])
            raise Killed
        return real["write"](fd, data)

    def fsync(fd):
        if ours(fd):
            points.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
            if len(points) == kill_at:
                raise Killed
        return real["fsync"](fd)

    def replace(src, dst):
        if ours(dst):
            points.append(("replace", str(dst)))
            if len(points) == kill_at:
                raise Killed
        return real["replace"](src, dst)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return points


def _scores(results):
    return [{k: v for k, v in row.items() if k != "seconds_per_episode"} for row in results.rows]


@pytest.mark.parametrize("start", ["fresh", "resumed"])
def test_a_kill_at_any_write_leaves_a_run_the_same_command_resumes(tmp_path, start, monkeypatch):
    import searchgym.bench as bench

    # The chart is drawn once (0.5 s); each run below writes those bytes the way plot() does.
    drawn = bench.plot([{"label": "x", "n": 1, "em": 1, "f1": 1, "cover_em": 1, "gen_acc": 0, "searches": 1, "context_tokens": 9}], tmp_path / "chart.png")
    monkeypatch.setattr(bench, "plot", lambda rows, path: bench.write_atomically(path, drawn.read_bytes()))
    same = lambda: config(runs=[("SearchR1-v0", "oracle"), ("SearchR1-v0", "random")], limit=2, num_envs=2)  # noqa: E731
    reference = run_bench(same(), tmp_path / "reference", progress=False)

    def prepare(folder):
        if start == "resumed":  # a run with a lost episode and a backend error: resuming rewrites both files
            run_bench(same(), folder, progress=False)
            path = folder / "episodes.jsonl"
            records = [json.loads(line) for line in path.read_text().splitlines()][:-1]
            records[0] |= {"outcome": "backend_error", "em": 0.0}
            path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"run": "orac')

    with pytest.MonkeyPatch.context() as patch:
        prepare(tmp_path / "count")
        points = _bench_writes(patch, tmp_path / "count")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run_bench(same(), tmp_path / "count", progress=False)
    kinds = {(kind, Path(where).name.split(".")[1] if Path(where).name.startswith(".") else Path(where).name) for kind, where in points}
    assert {("replace", "config.json"), ("write", "episodes.jsonl"), ("replace", "summary.png"), ("replace", "summary.csv")} <= kinds
    if start == "resumed":
        assert ("replace", "episodes.jsonl") in kinds  # the repair and the backend error's removal
    for kill_at in range(1, len(points) + 1):
        folder = tmp_path / f"kill-{kill_at}"
        prepare(folder)
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _bench_writes(patch, folder, kill_at=kill_at)
            with pytest.raises(Killed):
                run_bench(same(), folder, progress=False)
        config_text = (folder / "config.json").read_text() if (folder / "config.json").exists() else None
        assert config_text is None or json.loads(config_text)["limit"] == 2  # never half a file
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a cut last line is reported, then played again
            resumed = run_bench(same(), folder, progress=False)
        assert _scores(resumed) == _scores(reference), f"killed at write {kill_at} of {len(points)}: {points[kill_at - 1]}"
        assert len(read_episodes(folder / "episodes.jsonl")) == 4 and not list(folder.glob(".*.tmp"))
        assert json.loads((folder / "summary.json").read_text())["runs"][0]["n"] == 2


# ---------------------------------------------------------------- a hostile OpenAI-compatible server (issue 36)
def hostile_completions_server(replies):
    """A loopback server answering /completions with ``replies(n)`` in turn (n: the prompts asked)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    turn = iter(range(10**6))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = len(body["prompt"]) if isinstance(body["prompt"], list) and not isinstance(body["prompt"][0], int) else 1
            status, payload, headers = replies[next(turn) % len(replies)](n)
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_hostile_openai_server_is_recorded_as_each_episodes_outcome_never_a_traceback(tmp_path, capsys):
    from searchgym.lm.testing import tiny_model_folder

    def choices(n, **fields):
        return {"choices": [{"index": i, "text": "<answer> x </answer>", "finish_reason": "stop", "logprobs": None} | fields for i in range(n)]}

    replies = [
        lambda n: (200, choices(n, logprobs="not an object"), {}),  # was a bare AttributeError and a traceback
        lambda n: (200, choices(n, index=n), {}),  # an index past the last prompt
        lambda n: (302, choices(n), {"Location": "http://elsewhere.example/v1/completions"}),  # was taken as the answer
    ]
    server = hostile_completions_server(replies)
    url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        code = main(["bench", "--run", "SearchR1-v0:lm", "--limit", "3", "--num-envs", "1", "--backend", "openai",
                     "--model", str(tiny_model_folder()), "--backend-option", f"base_url={url}", "--backend-option", "max_retries=0",
                     "--corpus-option", "seed=7", "--corpus-option", "num_passages=400", "--out", str(tmp_path)])
    finally:
        server.shutdown()
        server.server_close()
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err  # every episode of the only row failed
    records = read_episodes(tmp_path / "episodes.jsonl")
    assert [r["outcome"] for r in records] == ["backend_error"] * 3
    malformed = f"The server at {url}/completions answered with a malformed completion: expected "
    assert [r["error"] for r in records] == [
        malformed + 'choices[0].logprobs to be an object or null, got a string "not an object".',
        malformed + "choices[0].index to be an integer in 0..0, got 1.",
        f"The server at {url}/completions answered HTTP 302, a redirect to http://elsewhere.example/v1/completions; "
        "redirects are not followed. Expected a 2xx answer: set base_url to the server's API root.",
    ]
    assert "backend_error 3" in captured.out
    # A backend that cannot even be set up stops the bench with one line.
    assert main(["bench", "--run", "SearchR1-v0:lm", "--backend", "openai", "--backend-option", "timeout=0", "--out", str(tmp_path / "b")]) == 2
    assert capsys.readouterr().err == "searchgym bench: error: OpenAILM expects timeout to be a finite number > 0, got 0.\n"



class OptionsAgent(Agent):
    """Answers a comparison question at once with its options read from the question:
    both of them (``hedge``) or the first one (a guess); "unknown" to other questions."""

    name = "options"
    PATTERNS = (re.compile(r", (.+) or (.+)\?$"), re.compile(r"^Which of (.+) and (.+) was born earlier\?$"))

    def __init__(self, hedge: bool):
        self.hedge, self.protocol = hedge, make_protocol("search_r1")
        self.name = "hedge" if hedge else "guess"

    def act(self, observations, infos):
        actions = []
        for info in infos:
            match = next((m for p in self.PATTERNS if (m := p.search(info.get("question", "")))), None)
            answer = "unknown" if match is None else " ".join(match.groups()) if self.hedge else match.group(1)
            actions.append(self.protocol.write([Answer(answer)]))
        return actions


def test_hedging_earns_nothing_in_the_strict_columns_and_the_raw_columns_show_it(tmp_path):
    runs = [("SearchR1-v0", OptionsAgent(hedge=True)), ("SearchR1-v0", OptionsAgent(hedge=False))]
    results = run_bench(config(runs=runs, limit=30), tmp_path, progress=False)
    hedge, guess = results.rows
    assert hedge["em"] == 0.0
    # The papers' metrics pay the hedge on every comparison question...
    assert hedge["cover_em_raw"] > 0.1 and hedge["gen_acc_raw"] == hedge["cover_em_raw"] and hedge["f1_raw"] > 0.0
    # ...the strict columns pay it nothing, no more than a guess that is wrong half the time.
    for key in ("f1", "cover_em", "gen_acc"):
        assert hedge[key] == 0.0 and guess[key] >= hedge[key] and guess[key] == guess[key + "_raw"]
    table = results.markdown().splitlines()
    assert table[0].startswith("| run | n | EM | F1 | F1 raw | cover-EM | cover-EM raw | GenAcc | GenAcc raw | reward |")
    episodes = read_episodes(tmp_path / "episodes.jsonl")
    assert {"f1_raw", "cover_em_raw", "gen_acc_raw"} <= set(episodes[0])


def test_episodes_recorded_before_the_raw_columns_count_as_raw():
    old = {"em": 0, "f1": 0.5, "cover_em": 1, "gen_acc": 1, "reward": 0, "num_searches": 0, "num_turns": 1, "context_tokens": 1, "generated_tokens": 1, "wall_time": 1.0, "outcome": "answered", "flags": []}
    row = summarize("x @ y", "y", "x", [old])
    assert (row["f1_raw"], row["cover_em_raw"], row["gen_acc_raw"]) == (0.5, 1.0, 1.0)


def test_judge_columns_ask_each_judge_once_per_answer_and_refuse_hedges(tmp_path):
    """A lenient judge (yes / True to anything) is the exploit's best friend: the hedge is
    still refused before it, so it earns no more than a guess; the guess's wrong answers
    reach the judges, in one batched call each, and a resumed bench asks nothing again."""
    from lm_helpers import recording_lm

    lenient = recording_lm(lambda prompt: "True" if "Golden Answer:" in prompt else "yes")
    runs = [("SearchR1-v0", OptionsAgent(hedge=True)), ("SearchR1-v0", OptionsAgent(hedge=False))]
    results = run_bench(config(runs=runs, limit=30, judge_model=lenient), tmp_path, progress=False)
    hedge, guess = results.rows
    comparison = lambda r: any(p.search(r["question"]) for p in OptionsAgent.PATTERNS)  # noqa: E731
    hedges = [r for r in results.episodes[hedge["label"]] if comparison(r)]
    assert len(hedges) > 5 and all(r["gen_acc_judge"] == r["acc_judge"] == 0.0 for r in hedges)
    guesses = [r for r in results.episodes[guess["label"]] if comparison(r)]
    # The lenient judge pays every committed answer: the guess gets everything the hedge is refused.
    assert all(r["gen_acc_judge"] == r["acc_judge"] == 1.0 for r in guesses)
    assert hedge["gen_acc_judge"] <= guess["gen_acc_judge"] and hedge["acc_judge"] <= guess["acc_judge"]
    asked = list(lenient.batches)
    assert len(asked) == 2  # one batched call per judge (fewer than judge_batch prompts each)
    # Each distinct (question, answer) once: "unknown" to the same question is asked for one run only.
    assert asked[1] == len({(r["question"], r["prediction"]) for run in results.episodes.values() for r in run if not comparison(r) or run is results.episodes[guess["label"]]})
    table = results.markdown().splitlines()
    assert "| GenAcc raw | GenAcc+judge | ACC_L judge | reward |" in table[0]
    episodes = read_episodes(tmp_path / "episodes.jsonl")
    assert {"gen_acc_judge", "acc_judge"} <= set(episodes[0])
    again = run_bench(config(runs=runs, limit=30, judge_model=lenient), tmp_path, progress=False)
    assert lenient.batches == asked and again.rows[1]["acc_judge"] == 1.0
    strict = recording_lm(lambda prompt: "no" if "golden answers" in prompt else "False")
    honest = run_bench(config(runs=runs[1:], limit=30, judge_model=strict), None, progress=False).rows[0]
    assert honest["acc_judge"] == 0.0 and honest["gen_acc_judge"] == honest["gen_acc"]  # the judge adds nothing the span check refused


def test_cli_judge_adds_the_columns_with_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "judged"
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "random", "--limit", "3", "--corpus-option", "num_passages=400",
                 "--corpus-option", "seed=7", "--judge", "tiny-random", "--judge-batch", "2", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "GenAcc+judge | ACC_L judge" in printed
    row = json.loads((out / "summary.json").read_text())["runs"][0]
    assert 0.0 <= row["gen_acc_judge"] <= 1.0 and 0.0 <= row["acc_judge"] <= 1.0
    assert json.loads((out / "config.json").read_text())["judge_model"] == "tiny-random"
    with pytest.raises(ConfigError, match=r"^BenchConfig expects judge_batch to be a positive integer, got 0\.$"):
        config(judge_model="tiny-random", judge_batch=0)
    with pytest.raises(ConfigError, match=r"^BenchConfig expects judge_model to be a model name \('policy': the policy model\) or a LanguageModel, got int 3\.$"):
        run_bench(config(judge_model=3), None, progress=False)


def test_a_run_makes_no_more_envs_than_it_has_episodes_to_play(tmp_path, monkeypatch):
    """16 envs live at once by default: a 2-question run made all 16 (each opening its
    corpus and retriever) and played on 2."""
    import gymnasium as gym

    made = []
    real_make = gym.make

    def counting_make(env_id, **kwargs):
        made.append(env_id)
        return real_make(env_id, **kwargs)

    monkeypatch.setattr(gym, "make", counting_make)
    results = run_bench(config(runs=cross(["SearchR1-v0"], ["oracle"]), limit=2, num_envs=16), tmp_path, progress=False)
    assert results.rows[0]["n"] == 2 and results.rows[0]["em"] == 1.0
    assert made == ["searchgym/SearchR1-v0"] * 2
    made.clear()
    run_bench(config(runs=cross(["SearchR1-v0"], ["oracle"]), limit=2, num_envs=16), tmp_path, progress=False)
    assert made == ["searchgym/SearchR1-v0"]  # resumed with nothing left to play: only the env that lists the questions


def test_the_async_driver_plays_the_same_benchmark_and_either_driver_resumes_it(tmp_path, capsys):
    key = lambda records: sorted(json.dumps({k: v for k, v in r.items() if k != "wall_time"}, sort_keys=True) for r in records)  # noqa: E731
    rounds = run_bench(config(limit=4), tmp_path / "rounds", progress=False)
    together = run_bench(config(limit=4, driver="async", concurrency=2), tmp_path / "async", progress=False)
    assert key(read_episodes(tmp_path / "rounds" / "episodes.jsonl")) == key(read_episodes(tmp_path / "async" / "episodes.jsonl"))
    assert [r["em"] for r in together.rows] == [r["em"] for r in rounds.rows]
    assert json.loads((tmp_path / "async" / "config.json").read_text())["driver"] == "async"
    # How episodes are scheduled is not what they are: a rounds benchmark resumes under async.
    path = tmp_path / "rounds" / "episodes.jsonl"
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines()[:-2]))
    resumed = run_bench(config(limit=4, driver="async"), tmp_path / "rounds", progress=False)
    assert [r["n"] for r in resumed.rows] == [4, 4, 4, 4]
    assert key(read_episodes(path)) == key(read_episodes(tmp_path / "async" / "episodes.jsonl"))
    with pytest.raises(ConfigError, match=r"^BenchConfig expects driver to be one of 'rounds', 'async', got 'eager'\.$"):
        config(driver="eager")
    with pytest.raises(ConfigError, match=r"^BenchConfig got concurrency=2 with driver='rounds'; concurrency bounds the turns in flight of driver='async'\.$"):
        config(concurrency=2)
    for backend in ("transformers", "vllm"):  # local engines that decode one call at a time
        with pytest.raises(ConfigError, match=r"^BenchConfig\(driver='async'\) sends each episode's turn as a call of its own, for a model "
                           r"that serves concurrent calls \(backend='vllm-async', .*backend='openai', .*\); "
                           rf"backend='{backend}' generates one call at a time\. Leave driver out"):
            run_bench(config(runs=[("SearchR1-v0", "lm")], driver="async", backend=backend), tmp_path / "lm", progress=False)
    assert main(["bench", "--run", "SearchR1-v0:oracle", "--limit", "2", "--driver", "async", "--concurrency", "2", "--corpus-option",
                 "seed=7", "--corpus-option", "num_passages=400", "--quiet", "--out", str(tmp_path / "cli")]) == 0
    assert json.loads((tmp_path / "cli" / "config.json").read_text())["concurrency"] == 2
    assert "| oracle @ SearchR1-v0 | 2 | 1.000 |" in capsys.readouterr().out


def test_cli_reaches_every_env_option_and_a_served_retriever(tmp_path, capsys):
    """--env-options (JSON, as train takes it), --retriever (a `searchgym serve` URL, with
    its token through --retriever-option) and --env-option together; top_k changes what the
    episodes read; a key given twice is refused; a misspelled key is named with its fix."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "searchgym.cli", "serve", "--corpus", "synthwiki", "--corpus-option", "seed=7",
         "--corpus-option", "num_passages=400", "--port", "0", "--token", "secret"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(root)},
    )
    try:
        url = re.search(r"at (http://\S+/retrieve);", server.stdout.readline())[1]
        world = ["--corpus-option", "seed=7", "--corpus-option", "num_passages=400", "--limit", "3", "--quiet"]
        context = {}
        for top_k in (1, 3):
            out = tmp_path / f"top{top_k}"
            code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", *world, "--env-options", json.dumps({"top_k": top_k}),
                         "--retriever", url, "--retriever-option", "token=secret", "--env-option", "max_turns=6", "--out", str(out)])
            assert code == 0 and "| oracle @ SearchR1-v0 | 3 | 1.000 |" in capsys.readouterr().out
            options = json.loads((out / "config.json").read_text())["env_options"]["*"]
            # The server's token reached the retriever (the oracle scored) but is not written down.
            assert options == {"top_k": top_k, "retriever": url, "retriever_options": {"token": "<secret: not recorded>"}, "max_turns": 6,
                               "corpus_options": {"seed": 7, "num_passages": 400}}
            context[top_k] = [r["context_tokens"] for r in read_episodes(out / "episodes.jsonl")]
        assert all(three > one for one, three in zip(context[1], context[3]))
        # The server checks the token: without it every episode fails, recorded as the server's error (exit 1).
        code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", *world, "--retriever", url, "--out", str(tmp_path / "no-token")])
        assert code == 1 and "| oracle @ SearchR1-v0 | 3 | 0.000 |" in capsys.readouterr().out
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--env-options", '{"top_k": 2}', "--env-option", "top_k=3"]) == 2
    assert "got the env option 'top_k' from both --env-options and --env-option; give it once." in capsys.readouterr().err
    assert main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--env-option", "topk=5", "--out", str(tmp_path / "typo")]) == 2
    err = capsys.readouterr().err
    assert "got an unexpected keyword argument 'topk'. Did you mean 'top_k'?" in err and "agent-option" not in err
    with pytest.raises(SystemExit):
        main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--env-optoins", "{}"])
    assert "(did you mean --env-options?)" in capsys.readouterr().err
