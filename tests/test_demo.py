"""The demo's trained row: SFT on first use, cached, played through the benchmark, resumed."""

import json

import pytest

pytest.importorskip("torch")

from env_helpers import SMALL_WORLD  # noqa: E402
from searchgym.bench import BenchConfig, check_config, run_bench  # noqa: E402
from searchgym.demo import (  # noqa: E402
    DEMO_RUNS, DENSE_AGENT, QUICK, TRAINED_LABEL, UNTRAINED_LABEL, DemoSFT, demo_config, explain, quick_settings, sft_args,
    trained_agent, trained_options,
)
from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.training import sft_cache  # noqa: E402


def test_the_demo_plays_the_trained_row_after_the_untrained_agent_and_records_its_checkpoint():
    config = demo_config(5, "transformers", "float32", 64, 4)
    check_config(config)
    labels = [label for label, _, _ in DEMO_RUNS]
    at = labels.index(UNTRAINED_LABEL) + 1
    assert config.run_labels() == labels[:at] + [TRAINED_LABEL] + labels[at:]
    assert config.runs[at] == ("SearchR1-v0", trained_agent)
    options = config.agent_options["trained_agent"]
    assert options["sft"] == json.loads(json.dumps(options["sft"])) == {**DemoSFT().__dict__}
    assert options["checkpoint"] == sft_cache.sft_key(sft_args(DemoSFT(), progress=False))
    assert (options["backend"], options["backend_options"]) == ("transformers", {"dtype": "float32"})
    assert demo_config(5, "transformers", "float32", 64, 4, sft=None).run_labels() == labels


def test_the_warm_start_plays_single_hop_synthwiki_questions():
    args = sft_args(DemoSFT(questions=4, num_passages=400, world_seed=7))
    examples = args.env_options["dataset"]
    assert len(examples) == 4 and all(ex.metadata["hops"] == 1 for ex in examples)
    assert args.env_options["corpus_options"] == {"seed": 7, "num_passages": 400} and args.eval_limit == 0
    with pytest.raises(ConfigError, match=r"^DemoSFT expects at most as many questions as the synthwiki world has"):
        sft_args(DemoSFT(questions=10_000, num_passages=400))


def test_the_trained_row_trains_once_plays_and_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEARCHGYM_CACHE", str(tmp_path / "cache"))
    model = str(tiny_model_folder())
    settings = DemoSFT(model=model, questions=4, num_passages=400, world_seed=7, batch_size=4, lr=1e-3)
    options = {**trained_options(settings, "transformers", {"dtype": "float32"}), "progress": False}
    config = BenchConfig(
        runs=[("SearchR1-v0", "lm"), ("SearchR1-v0", trained_agent)], labels=[UNTRAINED_LABEL, TRAINED_LABEL], limit=3,
        model=model, env_options={"*": {"corpus_options": SMALL_WORLD}}, agent_options={"trained_agent": options},
        num_envs=3, max_new_tokens=8,
    )
    results = run_bench(config, tmp_path / "bench", progress=False)
    run = sft_cache.cache_root() / options["checkpoint"]
    assert sft_cache.is_complete(run)
    assert f"Training the row '{TRAINED_LABEL}' (once; then cached in {run})" in capsys.readouterr().out
    assert [r["label"] for r in results.rows] == [UNTRAINED_LABEL, TRAINED_LABEL] and results.rows[1]["n"] == 3
    assert f"| {TRAINED_LABEL} | 3 |" in results.markdown()
    recorded = json.loads((tmp_path / "bench" / "config.json").read_text())
    assert recorded["runs"][1] == ["SearchR1-v0", "searchgym.demo:trained_agent"]
    assert recorded["agent_options"]["trained_agent"]["checkpoint"] == run.name

    def no_training(*args, **kwargs):
        raise AssertionError("trained again")

    monkeypatch.setattr(sft_cache, "sft", no_training)
    # A resumed demo plays nothing again; a new one loads the cached checkpoint.
    again = run_bench(config, tmp_path / "bench", progress=False)
    assert again.rows == results.rows
    fresh = run_bench(config, tmp_path / "fresh", progress=False)
    assert fresh.rows[1]["n"] == 3 and "Training the row" not in capsys.readouterr().out
    # Another checkpoint is another benchmark: the demo does not mix their episodes.
    other = {**options, "checkpoint": "0" * 16}
    with pytest.raises(ConfigError, match=r"holds a benchmark with a different configuration \(changed: agent_options\)"):
        run_bench(BenchConfig(**{**config.__dict__, "agent_options": {"trained_agent": other}}), tmp_path / "bench", progress=False)


def test_the_explanation_compares_the_trained_row_with_its_untrained_self():
    def row(label, agent, f1, searches, answered, env="searchgym/SearchR1-v0"):
        return {"label": label, "agent": agent, "env": env, "n": 32, "em": f1 / 2, "f1": f1, "cover_em": f1,
                "searches": searches, "failures": "-", "outcomes": {"answered": answered, "truncated": 32 - answered}}

    rows = [row("no retrieval", "no-retrieval", 0.10, 0.0, 32),
            row("naive RAG, BM25 top-1", "naive-rag", 0.18, 0.0, 32), row("naive RAG, dense top-1", "naive-rag-dense", 0.05, 0.0, 32),
            row(UNTRAINED_LABEL, "lm", 0.0, 0.0, 0), row(TRAINED_LABEL, "searchgym.demo:trained_agent", 0.25, 1.0, 30),
            row("RECON agent", "lm", 0.0, 0.0, 0, env="searchgym/RECON-v0")]
    lines = explain(rows).split("What these rows show:\n")[1].splitlines()
    assert lines == [
        f"  best F1: {TRAINED_LABEL} (0.250, EM 0.125, cover-EM 0.250)",
        (f"  against answering from memory (F1 0.100): better with naive RAG, BM25 top-1, {TRAINED_LABEL}; "
         f"worse with naive RAG, dense top-1, {UNTRAINED_LABEL}, RECON agent"),
        # Naive RAG's gain over no retrieval is named where there is one.
        ("  one retrieved passage against none: naive RAG, BM25 top-1 gains F1 +0.080 (0.180 against 0.100), "
         "cover-EM +0.080 (0.180 against 0.100); naive RAG, dense top-1 gains nothing: F1 0.050 against 0.100, "
         "cover-EM 0.050 against 0.100"),
        "  after SFT on the synthwiki oracle's play, the Search-R1 agent answers 30 of 32 questions in the protocol's <answer> "
        "block (0 of 32 before), searches 1.00 times per episode (0.00), and scores F1 0.250 (0.000), EM 0.125 (0.000), "
        "cover-EM 0.250 (0.000)",
        f"  never searched: {UNTRAINED_LABEL} (32 of 32 never answered: the turns ran out first); "
        "RECON agent (32 of 32 never answered: the turns ran out first)",
        (f"  multi-turn agents (searching 0.33 times per episode on average) reach F1 0.250 at best ({TRAINED_LABEL}); "
         "one retrieved passage in the prompt reaches 0.180 (naive RAG, BM25 top-1)"),
    ]


def test_the_explanation_says_plainly_when_every_row_is_zero_instead_of_ranking_zeros():
    def row(label, agent, f1=0.0, searches=0.0, env="searchgym/SearchR1-v0"):
        return {"label": label, "agent": agent, "env": env, "n": 1, "em": 0.0, "f1": f1, "cover_em": f1, "gen_acc": 0.0,
                "f1_raw": f1, "cover_em_raw": f1, "gen_acc_raw": 0.0, "searches": searches, "failures": "-", "outcomes": {"answered": 1}}

    rows = [row("no retrieval", "no-retrieval"), row("naive RAG, BM25 top-1", "naive-rag"), row(UNTRAINED_LABEL, "lm", searches=1.0),
            row("RECON agent", "lm", env="searchgym/RECON-v0")]
    lines = explain(rows, "smollm2").split("What these rows show:\n")[1].splitlines()
    assert lines == [
        "  Every score is 0 in every row (1 question per row), so there is nothing to rank: every row answered the question "
        "wrong, and 1 question is too few to tell the rows apart; play more with --limit.",
        "  never searched: RECON agent (1 of 1 answered without a search)",
    ]
    # The oracle's row is the upper bound, named first and kept out of the ranking of the model's rows.
    oracle = {**row("oracle (upper bound)", "oracle", 1.0, 1.0), "em": 1.0}
    lines = explain(rows + [oracle], "smollm2").split("What these rows show:\n")[1].splitlines()
    assert lines[:2] == [
        "  upper bound: oracle (upper bound) scores EM 1.000, F1 1.000 (it searches each question's source article and answers "
        "the gold answer, with no model: what a perfect policy earns here)",
        "  Every score is 0 in every row of the model (1 question per row), so there is nothing to rank: every row answered "
        "the question wrong, and 1 question is too few to tell the rows apart; play more with --limit.",
    ]
    # Rows that score are ranked; rows that tie with answering from memory are said to tie.
    tied = [row("no retrieval", "no-retrieval", 0.5), row("naive RAG, BM25 top-1", "naive-rag", 0.5)]
    lines = explain(tied, "smollm2").split("What these rows show:\n")[1].splitlines()
    assert lines[:2] == [
        "  best F1: no retrieval and naive RAG, BM25 top-1 (0.500, EM 0.000, cover-EM 0.500)",
        "  against answering from memory (F1 0.500): every row scores the same",
    ]
    better = [row("no retrieval", "no-retrieval", 0.2), row("naive RAG, BM25 top-1", "naive-rag", 0.5)]
    assert "  against answering from memory (F1 0.200): better with naive RAG, BM25 top-1; none worse" in explain(better, "smollm2")


def test_the_demo_command_can_leave_out_the_trained_row():
    from searchgym.cli import build_parser

    assert build_parser().parse_args(["demo"]).no_training is False
    assert build_parser().parse_args(["demo", "--no-training"]).no_training is True


def test_the_demo_can_leave_out_the_dense_row():
    labels = [label for label, _, _ in DEMO_RUNS]
    config = demo_config(5, "transformers", "float32", 64, 4, sft=None, dense=False)
    check_config(config)
    assert DENSE_AGENT not in [agent for _, agent in config.runs]
    assert config.run_labels() == [label for label, _, agent in DEMO_RUNS if agent != DENSE_AGENT] == labels[:2] + labels[3:]
    # Without the dense row nothing encodes the corpus: no run builds a dense retriever.
    assert all(not str(agent).endswith("dense") for _, agent in config.runs)


def test_the_quick_demo_says_what_it_leaves_out_and_keeps_explicit_options(capsys):
    from pathlib import Path

    from searchgym.cli import build_parser

    quick = quick_settings(build_parser().parse_args(["demo", "--quick"]))
    assert quick == {
        "limit": 1, "max_new_tokens": 32, "max_turns": 2, "backend": "transformers", "dense": False,
        "training": False, "out": Path("results/demo-quick"),
    } == {**QUICK, "out": Path("results/demo-quick")}
    assert capsys.readouterr().out == (
        "searchgym demo --quick: 1 question(s) of 79, 32 new tokens per turn, at most 2 turns per episode, no row 'naive RAG, dense top-1', "
        "no row 'Search-R1 agent after SFT', transformers backend; the full demo is `searchgym demo` "
        "(11.5 min from an empty cache on the idle 2-core CPU)\n"
    )
    given = quick_settings(build_parser().parse_args(["demo", "--quick", "--limit", "3", "--backend", "vllm", "--out", "x", "--max-turns", "4"]))
    assert (given["limit"], given["backend"], given["out"], given["max_new_tokens"], given["max_turns"]) == (3, "vllm", Path("x"), 32, 4)
    # The turn budget reaches every env of the benchmark, and only when asked for.
    config = demo_config(1, "transformers", "float32", 32, 1, sft=None, dense=False, max_turns=2)
    check_config(config)
    assert config.env_options["*"] == {"corpus": "wiki-vital", "dataset": "wiki-vital-answerable", "max_turns": 2}
    assert "max_turns" not in demo_config(1, "transformers", "float32", 32, 1).env_options["*"]
    assert build_parser().parse_args(["demo"]).quick is False and build_parser().parse_args(["demo", "--no-dense"]).no_dense
