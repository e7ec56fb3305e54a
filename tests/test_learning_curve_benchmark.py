"""benchmarks/learning_curve.py refuses bad arguments before it loads anything, and its
intervals, table and charts read the runs' metrics.csv files as they are."""

import csv
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "learning_curve.py"
sys.path.insert(0, str(SCRIPT.parent))  # the script's functions are imported below


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args,message",
    [
        (("--seeds", "0,x"), "--seeds expects integers separated by commas"),
        (("--seeds", "1,1"), "--seeds expects distinct integers, got [1, 1]"),
        (("--jobs", "0"), "--jobs expects a positive integer, got 0"),
        (("--sft-epochs", "0"), "--sft-epochs expects a positive integer, got 0"),
        (("--design", "nope"), "argument --design: invalid choice: 'nope'"),
        (("--sft-run", "/nonexistent"), "--sft-run expects an SFT run folder with final/"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    done = run(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_interval_is_students_t_over_the_seeds():
    from learning_curve import interval, moving

    mean, half = interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert interval([0.5]) == (0.5, 0.0)
    assert interval([0.25, 0.25]) == (0.25, 0.0)
    assert moving([1.0, 3.0, 5.0, 7.0], window=2) == [1.0, 2.0, 4.0, 6.0]


def write_run(folder: Path, evals: dict, train: list) -> None:
    folder.mkdir(parents=True)
    with open(folder / "metrics.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["step", "reward", "eval_reward", "eval_em"])
        w.writeheader()
        for step in range(len(train) + 1):
            e = evals.get(step)
            w.writerow({"step": step, "reward": "" if step == 0 else train[step - 1],
                        "eval_reward": "" if e is None else e[0], "eval_em": "" if e is None else e[1]})


def test_the_table_and_charts_come_from_the_runs_metrics(tmp_path):
    from learning_curve import finish

    gains = {0: 0.1, 1: 0.2, 2: 0.3}
    specs = []
    for seed, gain in gains.items():
        write_run(tmp_path / "runs" / f"grpo-seed{seed}", {0: (0.3, 0.0), 2: (0.3 + gain, 0.1)}, [0.3, 0.4])
        specs.append({"name": f"grpo-seed{seed}", "design": "grpo", "seed": seed})
        write_run(tmp_path / "runs" / f"outcome-seed{seed}", {0: (0.3, 0.0), 2: (0.3, 0.0)}, [0.0, 0.0])
        specs.append({"name": f"outcome-seed{seed}", "design": "outcome", "seed": seed})
    write_run(tmp_path / "runs" / "control", {0: (0.3, 0.0), 2: (0.3, 0.0)}, [0.3, 0.3])
    specs.append({"name": "control", "design": "control", "seed": 0})
    opts = SimpleOpts(out=tmp_path)
    finish(opts, specs, "header line", design="grpo")
    text = (tmp_path / "summary.md").read_text()
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    grpo = rows["format + retrieval (Search-R1's reward, the judge's)"]
    half = 4.303 * 0.1 / math.sqrt(3)  # the three gains' sd is 0.1
    assert f"0.500 ± {half:.3f}" in grpo and f"+0.200 ± {half:.3f}" in grpo and "+0.100, +0.200, +0.300" in grpo
    assert "0.000 → 0.100" in grpo and "0.350 → 0.350" in grpo
    assert "+0.000 ± 0.000" in rows["outcome only: EM"] and "| 1 |" in rows["no-update control (lr 0)"]
    assert text.startswith("header line")
    # Seed 0 (the control's seed) plays the control's questions: 0.3 - 0.3 on step 1, 0.4 - 0.3 on step 2.
    assert "format + retrieval (Search-R1's reward, the judge's), seed 0: +0.050 over the first 2 steps, +0.050 over the last 2" in text
    assert "outcome only: EM, seed 0: -0.300 over the first 2 steps" in text
    for name in ("learning-curve.png", "learning-rewards.png"):
        assert (tmp_path / name).stat().st_size > 10_000


class SimpleOpts:
    def __init__(self, out):
        self.out = out


def test_every_run_is_judged_by_one_reward_on_the_held_out_questions(tmp_path):
    from learning_curve import DESIGNS, REWARD, parse_args, run_specs

    opts = parse_args(["--quick", "--rewards", "--out", str(tmp_path)])
    specs = run_specs(opts, tmp_path / "model", tmp_path / "train.jsonl", tmp_path / "held-out.jsonl")
    assert [s["name"] for s in specs][-1] == "control" and len(specs) == 3 * len(DESIGNS) + 1
    assert [s["design"] for s in specs[:3]] == ["stepsearch"] * 3  # --design's runs first: the default
    assert {json.dumps(s["args"]["eval_env_options"], sort_keys=True) for s in specs} == {
        json.dumps({"dataset": str(tmp_path / "held-out.jsonl"), **REWARD}, sort_keys=True)}
    control = specs[-1]["args"]  # trains on --design's reward and credit, at lr 0
    assert control["lr"] == 0.0 and control["env_options"] == specs[0]["args"]["env_options"] and control["credit"] == "turn"
    recipes = {s["design"]: (s["args"]["env_options"]["reward"], s["args"]["credit"]) for s in specs}
    assert recipes["stepsearch"] == ("searchgym.methods.stepsearch:StepSearchReward", "turn")
    assert recipes["outcome"] == ("search_r1_em", "episode") and recipes["grpo"][0] == "search_r1_format"
    assert len({s["args"]["out"] for s in specs}) == len(specs)


def test_the_design_picks_the_reward_of_the_runs_and_the_control(tmp_path):
    from learning_curve import REWARD, parse_args, run_specs

    opts = parse_args(["--quick", "--design", "grpo", "--seeds", "0,1", "--out", str(tmp_path)])
    specs = run_specs(opts, tmp_path / "model", tmp_path / "train.jsonl", tmp_path / "held-out.jsonl")
    assert [s["name"] for s in specs] == ["grpo-seed0", "grpo-seed1", "control"]
    assert {(s["args"]["env_options"]["reward"], s["args"]["credit"]) for s in specs} == {(REWARD["reward"], "episode")}
    assert {s["args"]["total_steps"] for s in specs} == {20}


def test_replot_without_a_recorded_run_says_what_to_run(tmp_path):
    done = run("--replot", "--out", str(tmp_path))
    assert done.returncode == 1 and f"--replot reads {tmp_path}/results.json" in done.stderr, done.stderr
    assert f"run the benchmark with --out {tmp_path} first" in done.stderr


def test_the_weak_teacher_leaves_the_subject_out_of_every_other_episodes_searches_and_still_answers():
    pytest.importorskip("torch")
    from weak_teacher import subjectless

    from env_helpers import SMALL_WORLD
    from searchgym.lm.testing import tiny_tokenizer
    from searchgym.training.sft import oracle_trajectories

    assert subjectless("Vimia Dobradova born") == "born"
    assert subjectless("Trurthasara Bank founded") == "founded"
    assert subjectless("Skosith Lagodar") == "information"
    tok = tiny_tokenizer()
    trajectories = oracle_trajectories(
        "searchgym/SearchR1-v0", tok, env_options={"corpus_options": SMALL_WORLD, "max_turns": 3, "top_k": 1}, limit=4,
        num_envs=2, teacher="weak_teacher:SubjectlessOracle.for_env", episodes_per_question=2,
    )
    searches = [re.findall(r"<search> (.*?) </search>", tok.decode([t for s in tr.segments if s.generated for t in s.token_ids]))
                for tr in trajectories]
    # Both episodes of a question are solved or neither (the careless one answers right too: SFT keeps it), and of
    # each question's two, one searched with a capitalized subject, one without (4 questions: one needs more turns).
    assert len(trajectories) == 6, searches
    with_subject = [all(any(w[:1].isupper() for w in q.split()) for q in qs) for qs in searches]
    without = [not any(w[:1].isupper() for q in qs for w in q.split()) for qs in searches]
    assert with_subject == [True, False] * 3 and without == [False, True] * 3, searches


def test_the_found_answers_are_counted_from_each_evaluations_episodes(tmp_path):
    from learning_curve import found_by_step, found_text

    def episodes(step, found):
        folder = tmp_path / "run" / "eval" / f"step-{step:06d}"
        folder.mkdir(parents=True)
        rows = [{"reward_components": {"retrieval_correct": 1.0 if hit else 0.0}} for hit in found]
        rows.append({"reward_components": None})  # an episode that ended before any reward part
        (folder / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    episodes(0, [True, False, False])
    episodes(10, [True, True, False])
    found = found_by_step(tmp_path / "run")
    assert found == {0: (1, 4), 10: (2, 4)}
    other = {0: (1, 4), 10: (3, 4)}
    assert found_text([{"found": found}, {"found": other}], 0, 10) == "1 → 2, 3 of 4"
    assert found_text([{"found": found}, {"found": {}}], 0, 10) == "n/a"
