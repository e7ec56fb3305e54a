"""Ctrl-C in the long commands: a real SIGINT to a real `searchgym` process prints one line
saying what was kept and how to go on (no traceback, exit 130), and the same command run
again says that it resumes. Small worlds and scripted agents keep each test to seconds."""

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from searchgym.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORLD = ["--corpus-option", "seed=7", "--corpus-option", "num_passages=300"]

#: An oracle that takes 0.2 s a turn while SLOW_AGENT is set: time to stop it mid-run; the
#: rerun without it finishes at once (the variable is not part of the benchmark's settings).
SLOW_AGENTS = '''
import atexit, os, time
from pathlib import Path
from searchgym.agents import Agent, make_agent

atexit.register(lambda: Path("cleanups-ran").write_text("yes"))  # a stopped command still runs its atexit cleanups

class SlowOracle(Agent):
    def __init__(self, env):
        self.inner = make_agent("oracle", env)

    def act(self, observations, infos):
        if os.environ.get("SLOW_AGENT"):
            time.sleep(0.2)
        return self.inner.act(observations, infos)

    def end_episode(self, slot):
        return self.inner.end_episode(slot)
'''


def start(args, cwd, **env):
    """A `python -m searchgym.cli ARGS` process importing this checkout."""
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(cwd)]), "SEARCHGYM_PROGRESS_SECONDS": "0", **env}
    # SIGINT as a terminal leaves it, even where the test runner was started with it ignored
    # (a background job of a shell), which Python would then never turn into KeyboardInterrupt.
    return subprocess.Popen([sys.executable, "-m", "searchgym.cli", *args], cwd=cwd, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for(proc, ready, seconds=240):
    deadline = time.time() + seconds
    while not ready():
        assert proc.poll() is None, f"ended before it could be stopped: {proc.communicate()[1][-3000:]}"
        assert time.time() < deadline, "no progress in time"
        time.sleep(0.05)


def interrupt(proc):
    """SIGINT, as Ctrl-C sends it; the process's exit code, stdout (from here on) and stderr."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def lines(path):
    return path.read_text().splitlines() if path.exists() else []


def test_ctrl_c_stops_a_bench_in_one_line_and_the_rerun_says_it_resumes(tmp_path):
    (tmp_path / "slow_agents.py").write_text(SLOW_AGENTS)
    out = tmp_path / "out"
    args = ["bench", "--envs", "SearchR1-v0", "--agents", "slow_agents:SlowOracle", "--limit", "12", "--num-envs", "1", *WORLD, "--out", "out"]
    proc = start(args, tmp_path, SLOW_AGENT="1")
    wait_for(proc, lambda: len(lines(out / "episodes.jsonl")) >= 3)
    code, _, err = interrupt(proc)
    kept = len(lines(out / "episodes.jsonl"))
    assert code == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == f"searchgym bench: stopped: {kept} of 12 episodes kept in out; run the same command to go on"
    assert (tmp_path / "cleanups-ran").read_text() == "yes"  # it skips only the interpreter's teardown (cli.run)
    assert 3 <= kept < 12

    rerun = subprocess.run([sys.executable, "-m", "searchgym.cli", *args, "--quiet"], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}, timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: {kept} episodes done in out (--no-resume plays them again)" in rerun.stderr.splitlines()
    assert len(lines(out / "episodes.jsonl")) == 12 and "| slow_agents:SlowOracle @ SearchR1-v0 | 12 | 1.000 |" in rerun.stdout


def test_ctrl_c_stops_training_in_one_line_and_the_rerun_says_which_checkpoint_it_resumes(tmp_path):
    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training import checkpoint as ckpt

    args = [
        "train", "--model", str(tiny_model_folder()), "--env-options", '{"corpus_options": {"seed": 7, "num_passages": 300}, "max_turns": 2}',
        "--out", "run", "--questions-per-step", "2", "--n", "2", "--num-envs", "4", "--max-new-tokens", "8", "--micro-batch-size", "2",
        "--lr", "1e-3", "--save-every", "1", "--no-tensorboard", "--threads", "1",
    ]
    proc = start([*args, "--total-steps", "1000"], tmp_path)
    wait_for(proc, lambda: len(ckpt.complete_checkpoints(tmp_path / "run")) >= 1)
    code, _, err = interrupt(proc)
    assert code == 130 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    stopped = re.fullmatch(r"searchgym train: stopped: (\d+) of 1000 steps done; step (\d+) kept in (\S+); run the same command to go on from step \2", last)
    assert stopped, last
    step = int(stopped[2])
    assert Path(stopped[3]) == Path("run") / "checkpoints" / f"step-{step:06d}" and int(stopped[1]) >= step >= 1

    rerun = subprocess.run([sys.executable, "-m", "searchgym.cli", *args, "--total-steps", str(step), "--no-progress"], cwd=tmp_path,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=240)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resuming: step {step} of {step} done, from {Path('run') / 'checkpoints' / f'step-{step:06d}'}" in rerun.stderr.splitlines()


#: Ctrl-C landing in a class body's __set_name__, as it did once in matplotlib's first import
#: at a checkpoint: Python wraps the KeyboardInterrupt in "RuntimeError: Error calling
#: __set_name__ ...". The hook and the agent below send SIGINT to their own process there.
CTRL_C_IN_AN_IMPORT = '''
import os, signal, time
from searchgym.agents import Agent, make_agent
from searchgym.training.hooks import TrainerHook

def ctrl_c_in_a_class_body():
    class Stops:
        def __set_name__(self, owner, name):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)  # the KeyboardInterrupt is raised here

    class Formatter:  # a class of a module being imported
        attribute = Stops()

class CtrlCInImport(TrainerHook):
    def on_step(self, trainer, step, stats):
        ctrl_c_in_a_class_body()

class OracleCtrlCInImport(Agent):
    def __init__(self, env):
        self.inner, self.turns = make_agent("oracle", env), 0

    def act(self, observations, infos):
        self.turns += 1
        if self.turns == 3:
            ctrl_c_in_a_class_body()
        return self.inner.act(observations, infos)

    def end_episode(self, slot):
        return self.inner.end_episode(slot)
'''


def test_a_ctrl_c_that_python_wraps_in_another_error_still_stops_in_one_line(tmp_path):
    (tmp_path / "ctrl_c_in_import.py").write_text(CTRL_C_IN_AN_IMPORT)
    from searchgym.lm.testing import tiny_model_folder

    train = start([
        "train", "--model", str(tiny_model_folder()), "--env-options", '{"corpus_options": {"seed": 7, "num_passages": 300}, "max_turns": 2}',
        "--out", "run", "--questions-per-step", "2", "--n", "2", "--num-envs", "4", "--max-new-tokens", "8", "--micro-batch-size", "2",
        "--no-tensorboard", "--threads", "1", "--total-steps", "5", "--hooks", "ctrl_c_in_import:CtrlCInImport",
    ], tmp_path)
    _, err = train.communicate(timeout=240)
    assert train.returncode == 130 and "Traceback" not in err and "RuntimeError" not in err, err
    assert err.strip().splitlines()[-1] == (
        "searchgym train: stopped: 1 of 5 steps done, no checkpoint written yet (one every 10 steps); run the same command to start over"
    )

    bench = start(["bench", "--envs", "SearchR1-v0", "--agents", "ctrl_c_in_import:OracleCtrlCInImport", "--limit", "4", "--num-envs", "1",
                   *WORLD, "--out", "out"], tmp_path)
    _, err = bench.communicate(timeout=240)
    assert bench.returncode == 130 and "Traceback" not in err and "RuntimeError" not in err, err
    assert re.fullmatch(r"searchgym bench: stopped: \d of 4 episodes kept in out; run the same command to go on", err.strip().splitlines()[-1]), err


def test_ctrl_c_stops_serve_with_one_line(tmp_path):
    proc = start(["serve", "--corpus", "synthwiki", *WORLD, "--port", "0"], tmp_path)
    assert "searchgym serve: bm25" in proc.stdout.readline()  # printed once the socket listens
    code, out, err = interrupt(proc)
    assert code == 130 and (out, err) == ("searchgym serve: stopped\n", "")


def test_a_quick_demo_into_the_same_folder_says_it_reuses_the_results(tmp_path, monkeypatch, capsys):
    """The demo is a benchmark (run_bench): its second run says it found every episode."""
    import searchgym.demo as demo
    from searchgym.bench import BenchConfig

    small = BenchConfig(runs=[("SearchR1-v0", "oracle"), ("SearchR1-v0", "random")], limit=2,
                        env_options={"*": {"corpus_options": {"seed": 7, "num_passages": 300}}})
    monkeypatch.setattr(demo, "demo_config", lambda *a, **k: small)
    out = tmp_path / "demo"
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    first = capsys.readouterr().err
    assert "resuming" not in first and "reusing" not in first
    assert main(["demo", "--quick", "--out", str(out)]) == 0
    second = capsys.readouterr().err.splitlines()
    assert f"resuming: 4 episodes done in {out} (--no-resume plays them again)" in second
    assert f"reusing: all 4 episodes were done in {out}; nothing to play" in second


def test_without_matplotlib_the_bench_names_only_the_files_it_wrote(tmp_path):
    """matplotlib unimportable in a fresh process: one line says no chart was written, and
    the closing line names summary.json, summary.csv and episodes.jsonl, not summary.png
    (an earlier run's chart, which would show other numbers, is removed)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.png").write_bytes(b"an earlier chart")
    code = textwrap.dedent(f"""
        import sys
        sys.modules["matplotlib"] = None  # import matplotlib raises ImportError
        from searchgym.cli import main
        sys.exit(main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--limit", "2", *{WORLD!r}, "--out", {str(out)!r}, "--quiet"]))
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=240)
    assert run.returncode == 0, run.stderr
    assert "no chart written." in run.stderr
    assert run.stdout.strip().splitlines()[-2:] == [f"wrote {out}/summary.json, summary.csv and episodes.jsonl", f"read its episodes: searchgym view {out}"]
    assert "summary.png" not in run.stdout and not (out / "summary.png").exists()
    assert (out / "summary.json").exists() and (out / "summary.csv").exists()


def test_a_ctrl_c_python_drops_in_a_destructor_is_raised_at_the_next_check(capsys):
    """Python cannot raise a KeyboardInterrupt inside a destructor: it prints "Exception
    ignored in ..." and goes on, and a training run went on past Ctrl-C so. CtrlC records
    the request; its check raises it where the work can stop, and nothing is printed."""
    from searchgym.error import CtrlC

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arriving while a destructor runs
            time.sleep(0.01)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with CtrlC() as ctrl_c:
            Finalized()  # dropped at once: the KeyboardInterrupt is raised inside __del__, where Python drops it
            assert ctrl_c.requested
            try:
                ctrl_c.check()
            except KeyboardInterrupt:
                pass
            else:
                raise AssertionError("check() did not raise the recorded Ctrl-C")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    assert "Exception ignored" not in capsys.readouterr().err
