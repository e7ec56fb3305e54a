"""benchmarks/rollout.py refuses bad arguments before it loads any model."""

import os
import subprocess
import sys
from pathlib import Path

ROLLOUT = Path(__file__).resolve().parents[1] / "benchmarks" / "rollout.py"


def run(*args, env=None):
    return subprocess.run([sys.executable, str(ROLLOUT), *args], capture_output=True, text=True, timeout=300, env=env)


def test_a_temperature_given_twice_is_refused():
    done = run("--temperature", "0", "1", "0")
    assert done.returncode == 2
    assert "--temperature got a value twice (0 1 0); each is one workload, run once" in done.stderr


def test_a_negative_temperature_is_refused():
    done = run("--temperature", "-1")
    assert done.returncode == 2 and "--temperature values must be >= 0 (0 is greedy)" in done.stderr


def test_an_unknown_section_is_refused():
    done = run("--sections", "driver,sharing")
    assert done.returncode == 2 and "unknown sections ['sharing']; expected among driver, decode, engines, recon, shared, search, async" in done.stderr


ENGINES = """
from searchgym.lm.hf import TransformersLM
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer


class LongTiny(TransformersLM):
    \"\"\"The tiny random model with a context that holds a Search-R1 prompt.\"\"\"

    def __init__(self, model, dtype=None):
        super().__init__(tiny_causal_lm(context=4096), tiny_tokenizer(), dtype=dtype)


class SameModel(LongTiny):
    pass
"""


def test_engines_run_the_same_rollout_side_by_side(tmp_path):
    # One model under two names: the same episodes, and a ratio for each workload.
    (tmp_path / "tiny_engines.py").write_text(ENGINES)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    small = ("--episodes", "2", "--played", "2", "--max-turns", "1", "--max-new-tokens", "4", "--temperature", "0", "1")
    done = run("--sections", "engines", "--engines", "tiny_engines:LongTiny", "tiny_engines:SameModel", *small, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    for workload in ("greedy", "T=1"):
        for engine in ("tiny_engines:LongTiny", "tiny_engines:SameModel"):
            row = next(line for line in done.stdout.splitlines() if line.startswith(f"| {workload}: vectorized, 2 live ({engine}) |"))
            assert int(row.split("|")[3]) > 0  # tokens were generated
        lines = [line for line in done.stdout.splitlines() if line.startswith(f"engines, {workload}: tiny_engines:SameModel / tiny_engines:LongTiny: ")]
        assert len(lines) == 1 and lines[0].endswith("episodes identical to tiny_engines:LongTiny's: 2/2)"), done.stdout


def test_the_shared_cpu_section_runs_beside_a_busy_process_and_its_verdict_follows_the_ratio(tmp_path):
    from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer

    tiny_causal_lm(context=4096).save_pretrained(tmp_path / "tiny")  # a context that holds a Search-R1 prompt
    tiny_tokenizer().save_pretrained(tmp_path / "tiny")
    small = ("--episodes", "2", "--played", "2", "--max-turns", "1", "--max-new-tokens", "4")
    done = run("--sections", "shared", "--shared-fixed", "--model", str(tmp_path / "tiny"), *small)
    lines = [line for line in done.stdout.splitlines() if line.startswith("shared CPU, beside one busy process / alone: ")]
    assert len(lines) == 1, done.stdout + done.stderr[-2000:]
    ratio = float(lines[0].split(": ")[1].split("x")[0])
    assert ("PASS" in lines[0]) == (ratio <= 2.5) and done.returncode == (0 if ratio <= 2.5 else 1)
    assert "x with the count fixed at " in lines[0]
    for run_name in ("threads auto, solo", "threads auto, shared", "threads fixed at"):
        assert f", {run_name}" in done.stdout, done.stdout
    # The busy process was killed: no python spinning on "while True: pass" is left.
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"{sys.executable} -c while True: pass" not in ps


def test_the_search_sections_sizes_are_checked():
    done = run("--sections", "search", "--search-episodes", "0")
    assert done.returncode == 2 and "--search-episodes must be >= 1 and --search-passages >= 1000" in done.stderr


def test_the_async_section_plays_the_same_episodes_under_both_drivers(tmp_path):
    done = run("--sections", "async", "--async-workloads", "double", "--async-episodes", "6", "--async-live", "3",
               "--async-per-token", "0.001", "--async-lengths", "4", "16", "--async-workdir", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| server double (1 ms a token, turns of 4-16 tokens")]
    assert [row.split(" | ")[1] for row in rows] == ["rounds", "async"]
    assert int(rows[0].split(" | ")[-1].rstrip(" |")) < int(rows[1].split(" | ")[-1].rstrip(" |"))  # a round's turns share a request
    (verdict,) = [line for line in done.stdout.splitlines() if "rounds / async wall time" in line]
    assert "identical episodes 6/6 " in verdict


def test_the_async_sections_sizes_are_checked():
    done = run("--sections", "async", "--async-lengths", "2", "16")
    assert done.returncode == 2 and "--async-per-token must be in (0, 1] and --async-lengths MIN MAX with 4 <= MIN <= MAX" in done.stderr
