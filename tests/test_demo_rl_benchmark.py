"""benchmarks/demo_rl.py refuses bad arguments before it loads a model, and its table and
chart read the two rows as the benchmark wrote them."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "demo_rl.py"
sys.path.insert(0, str(SCRIPT.parent))  # the script's functions are imported below


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args,message",
    [
        (("--steps", "0"), "--steps expects a positive integer, got 0"),
        (("--limit", "-2"), "--limit expects a positive integer, got -2"),
        (("--limit", "80"), "--limit expects at most 79"),
        (("--backend", "tpu"), "invalid choice: 'tpu'"),
    ],
)
def test_bad_arguments_are_refused(args, message):
    done = run(*args)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_replot_without_results_says_what_to_run(tmp_path):
    done = run("--replot", "--out", str(tmp_path / "none"))
    assert done.returncode != 0 and "run the benchmark with --out" in done.stderr, done.stderr


def row(em, f1, answered, n=4, searches=1.0, reward=0.3):
    return {"n": n, "em": em, "f1": f1, "cover_em": em, "reward": reward, "searches": searches,
            "outcomes": {"answered": answered, "truncated": n - answered}}


def test_the_table_shows_both_rows_and_the_change():
    from demo_rl import RL_LABEL, SFT_LABEL, table, value

    rows = {SFT_LABEL: row(0.25, 0.30, 2), RL_LABEL: row(0.5, 0.45, 4, searches=1.5)}
    assert value(rows[SFT_LABEL], "answered") == 0.5 and value(rows[RL_LABEL], "answered") == 1.0
    assert math.isnan(value({"n": 4, "reward": None}, "reward"))
    text = table(rows, "HEADER").splitlines()
    assert text[0] == "HEADER"
    assert text[2] == "| row | EM | F1 | cover-EM | reward | searches | answered |"
    assert text[4] == f"| {SFT_LABEL} | 0.250 | 0.300 | 0.250 | 0.300 | 1.000 | 0.500 |"
    assert text[5] == f"| {RL_LABEL} | 0.500 | 0.450 | 0.500 | 0.300 | 1.500 | 1.000 |"
    assert text[6] == "| change | +0.250 | +0.150 | +0.250 | +0.000 | +0.500 | +0.500 |"


def test_replot_redraws_the_chart_and_summary_from_the_files(tmp_path):
    from demo_rl import RL_LABEL, SFT_LABEL

    out = tmp_path / "run"
    (out / "grpo").mkdir(parents=True)
    (out / "grpo" / "metrics.csv").write_text("step,reward,eval_reward\n0,,0.4\n1,0.25,\n2,0.35,\n3,0.45,\n4,0.55,\n")
    rows = {SFT_LABEL: row(0.0, 0.1, 3), RL_LABEL: row(0.25, 0.2, 4)}
    (out / "results.json").write_text(json.dumps({"rows": rows, "header": "the header"}))
    done = run("--replot", "--out", str(out))
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.md").read_text()
    assert summary.startswith("the header") and "| change | +0.250 | +0.100 |" in summary
    assert "steps 1-3 0.350, last 3 0.450 (4 steps)" in summary
    assert (out / "demo-rl.png").stat().st_size > 10_000


def test_ctrl_c_ends_it_in_one_line(tmp_path):
    # A real SIGINT to the script's process group (as a terminal's Ctrl-C), while it trains the
    # demo's SFT start into an empty cache: one line, exit 130, no traceback.
    import os
    import signal
    import time

    env = {**os.environ, "SEARCHGYM_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path / "out")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: (os.setsid(), signal.signal(signal.SIGINT, signal.SIG_DFL)))
    time.sleep(8)
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    from demo_rl import STOPPED

    assert err.strip().splitlines()[-1] == STOPPED
