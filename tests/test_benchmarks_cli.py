"""Every script under benchmarks/ starts and explains itself (``--help``), and every quick form
(``--quick``) has its measured time recorded in benchmarks/RESULTS.md "Documented commands"."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Modules of another benchmark, not benchmarks of their own: each is run through the script
#: that names it (its quick form is that script's).
PARTS = {
    "async_rollout.py": "rollout.py",  # the async section of rollout.py
    "paced_server.py": "async_rollout.py",  # the server process that section starts (and tests/agents/test_async_driver.py)
    "weak_teacher.py": "learning_curve.py",  # the SFT teacher of its --teacher subjectless
}
SCRIPTS = sorted(p for p in (ROOT / "benchmarks").glob("*.py") if p.name not in PARTS)
#: Scripts without a quick form: each measures a corpus or an index the user hands it (built
#: by scale.py or `searchgym index`), so its size is the user's.
NO_QUICK = {"build_compare.py", "query_latency.py"}
ENV = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"}


def run_script(*argv: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=ENV)


def documented_commands() -> str:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = re.search(r"^## Documented commands\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert section, 'benchmarks/RESULTS.md has no "## Documented commands" section'
    return section.group(1)


def test_there_are_benchmark_scripts():
    assert len(SCRIPTS) >= 7, [s.name for s in SCRIPTS]


@pytest.mark.parametrize("part, user", PARTS.items())
def test_a_part_is_imported_by_the_benchmark_that_runs_it(part, user):
    # A part is left out of the checks above only while the script named for it runs it.
    text = (ROOT / "benchmarks" / user).read_text(encoding="utf-8")
    assert re.search(rf"^\s*(from {part[:-3]} import|import {part[:-3]})\b", text, flags=re.M), f"{user} does not import {part}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_answers_help(script):
    done = run_script(str(script), "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: "), done.stdout[:200]
    if "--quick" in script.read_text(encoding="utf-8"):
        assert re.search(r"^\s+--quick\s", done.stdout, flags=re.M), f"{script.name} takes --quick but its help does not list it"


def test_every_quick_form_has_a_measured_row():
    rows = documented_commands()
    quick = [s.name for s in SCRIPTS if '"--quick"' in s.read_text(encoding="utf-8")]
    assert quick, "no benchmark takes --quick"
    for name in quick:
        # the tables there have a wall and a CPU column after the command
        row = re.search(rf"^\| `python benchmarks/{re.escape(name)} --quick`[^|]* \| ([^|]+) \| ([^|]+) \|", rows, flags=re.M)
        assert row, f"benchmarks/RESULTS.md 'Documented commands' has no row for `python benchmarks/{name} --quick`"
        wall, cpu = row.group(1), row.group(2)
        assert re.search(r"\d+(\.\d+)? (s|min)\b", wall), f"{name}: the row's wall column gives no time: {wall}"
        assert re.search(r"\d+ s\b", cpu), f"{name}: the row's CPU column gives no time: {cpu}"


def test_every_benchmark_but_the_user_sized_ones_has_a_quick_form():
    # Issue 37: a quick form (<= 2 min on the 2-core CPU) beside every full form.
    missing = [s.name for s in SCRIPTS if s.name not in NO_QUICK and '"--quick"' not in s.read_text(encoding="utf-8")]
    assert not missing, f"these benchmarks take no --quick: {missing}"
    assert NO_QUICK <= {s.name for s in SCRIPTS}, "NO_QUICK names a script that is gone; drop it from the list"


@pytest.mark.parametrize("argv, message", [
    (["train_step.py", "--quick", "--steps", "0"], "--steps expects a positive integer, got 0"),
    (["train_step.py", "--lora-rank", "-1"], "--lora-rank expects 0 (full fine-tuning) or a positive rank, got -1"),
    (["sb3.py", "--quick", "--timesteps", "0"], "--timesteps expects a positive integer, got 0"),
    (["sb3.py", "--limit", "-3"], "--limit expects a positive integer, got -3"),
    (["sb3.py", "--bench-options", "dtype=bfloat16"], "--bench-options expects a JSON object like"),
    (["sb3.py", "--bench-options", "[1]"], "--bench-options expects a JSON object like"),
    (["multi_agent.py", "--quick", "--limit", "0"], "--limit expects a positive integer, got 0"),
    (["multi_agent.py", "--train-n", "0"], "--train-n expects a positive integer, got 0"),
    (["trl_tool_calls.py", "--quick", "--sft-steps", "0"], "--sft-steps expects a positive integer, got 0"),
    (["trl_tool_calls.py", "--questions", "-1"], "--questions expects a positive integer, got -1"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_bad_size_is_refused_before_any_work(argv, message):
    done = run_script(str(ROOT / "benchmarks" / argv[0]), *argv[1:], timeout=60)
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert message in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_train_step_quick_runs_and_reports_its_sizes():
    # The one quick form of the three added for issue 37 that is cheap enough for the suite
    # (13 s of CPU); sb3.py's (35 s) and multi_agent.py's (18 s of CPU, 25 s of wall time) are
    # timed in benchmarks/RESULTS.md instead.
    done = run_script(str(ROOT / "benchmarks" / "train_step.py"), "--quick", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--quick: 2 GRPO steps of 2 questions x 2 samples, 16 tokens a turn, 1 torch thread(s); no target is judged" in done.stdout
    assert "2x2 episodes per step" in done.stdout and "steps 2..2 (step 1 is warm-up)" in done.stdout
    throughput = re.search(r"^\| update throughput \| ([\d,]+) tokens/s \|$", done.stdout, flags=re.M)
    assert throughput and int(throughput.group(1).replace(",", "")) > 0, done.stdout[-2000:]
    assert re.search(r"^\| peak memory \| [\d,]+ MB \|$", done.stdout, flags=re.M), done.stdout[-2000:]


def test_multi_agent_quick_fails_when_an_episode_does_not_finish(tmp_path):
    # Two wiki-vital documents overflow the tiny model's 2,048-token context at the searcher's
    # first turn (why --quick retrieves one): the smoke run must say so and exit 1, not print
    # a table of zeros and pass.
    done = run_script(str(ROOT / "benchmarks" / "multi_agent.py"), "--quick", "--part", "agents", "--limit", "1", "--top-k", "2",
                      "--out", str(tmp_path), timeout=300)
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert ("--quick: FAIL: episodes that did not finish, by roster: {'searcher+generator': 1} "
            f"(their outcome and error are in {tmp_path}/episodes-*.jsonl)") in done.stdout
    record = json.loads((tmp_path / "episodes-searcher+generator.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert record["outcome"] == "prompt_too_long"


def test_sb3_quick_refuses_an_out_folder_holding_runs(tmp_path):
    # train_sb3 continues a run it finds: a quick form pointed at a full run's folder would
    # add 4,096 timesteps to it; only its own default folder is started afresh.
    (tmp_path / "sb3-ppo").mkdir()
    (tmp_path / "sb3-ppo" / "policy.json").write_text("{}")
    done = run_script(str(ROOT / "benchmarks" / "sb3.py"), "--quick", "--out", str(tmp_path), timeout=60)
    assert done.returncode == 2, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert (f"--quick with --out {tmp_path}: it holds sb3-ppo runs, which training would continue; give an empty folder, "
            "or leave --out out (results/sb3-quick, started afresh each time)") in done.stderr
    assert (tmp_path / "sb3-ppo" / "policy.json").read_text() == "{}"
