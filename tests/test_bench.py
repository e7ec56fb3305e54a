"""The benchmark harness: runs, summary math, files, resume, errors, the CLI."""

import csv
import json

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
        {"em": 0, "f1": 0.5, "cover_em": 0, "gen_acc": 1, "reward": 0, "num_searches": 0, "num_turns": 1, "context_tokens": 300, "generated_tokens": 30, "wall_time": 1.5, "outcome": "backend_error", "flags": ["length"]},
    ]
    row = summarize("x @ y", "y", "x", records)
    assert (row["n"], row["em"], row["f1"], row["gen_acc"], row["searches"], row["context_tokens"], row["seconds_per_episode"]) == (2, 0.5, 0.75, 1.0, 1.0, 200.0, 1.0)
    assert row["failures"] == "backend_error 1" and row["flags"] == {"length": 1}


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
    assert main(["bench", "--run", "SearchR1-v0"]) == 2
    assert capsys.readouterr().err == "searchgym bench: error: --run expects ENV:AGENT, got 'SearchR1-v0'.\n"
    assert main(["bench", "--corpus-option", "x", "--envs", "SearchR1-v0", "--agents", "oracle"]) == 2
    assert "--corpus-option expects KEY=VALUE, got 'x'." in capsys.readouterr().err


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


def test_the_demo_explains_its_columns_and_what_its_rows_show():
    from searchgym.demo import LEGEND, explain

    def row(label, agent, f1, searches=0.0, failures="-"):
        return {"label": label, "agent": agent, "em": f1 / 2, "f1": f1, "cover_em": f1, "searches": searches, "failures": failures}

    rows = [row("no retrieval", "no-retrieval", 0.10), row("naive RAG", "naive-rag", 0.30),
            row("Search-R1 agent", "lm", 0.05, 1.5), row("R-Search agent", "lm", 0.20, 0.0, "backend_error 2")]
    text = explain(rows)
    assert text.startswith(LEGEND) and "cover-EM    every token of a gold answer" in text and "GenAcc" in text
    lines = text.split("What these rows show:\n")[1].splitlines()
    assert lines == [
        "  best F1: naive RAG (0.300, EM 0.150, cover-EM 0.300)",
        "  against answering from memory (F1 0.100): better with naive RAG, R-Search agent; worse with Search-R1 agent",
        "  never searched: R-Search agent (no search call: they answered from the prompt alone)",
        "  failed episodes: R-Search agent (backend_error 2)",
        "  multi-turn agents (searching 0.75 times per episode on average) reach F1 0.200 at best (R-Search agent); "
        "one retrieved passage in the prompt reaches 0.300 (naive RAG)",
    ]



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
