"""benchmarks/summarizer.py refuses bad arguments before it loads any model."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "summarizer.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120)


def test_bad_arguments_are_refused_with_what_was_expected(tmp_path):
    done = run("--backend", "vlm", "--out", str(tmp_path))
    assert done.returncode == 2 and "--backend expects one of transformers, vllm, got 'vlm'" in done.stderr
    done = run("--limit", "0", "--out", str(tmp_path))
    assert done.returncode == 2 and "--limit expects a positive integer, got 0" in done.stderr
    done = run("--distilled", str(tmp_path / "nothing"), "--out", str(tmp_path))
    assert done.returncode == 2 and f"--distilled expects a model folder such as a distill-summarizer run's final/ (with config.json), got {tmp_path / 'nothing'}" in done.stderr
    assert not any(tmp_path.iterdir())  # nothing was written
