"""benchmarks/engines.py (issue 67): its quick form runs every engine side by side, where the
engines' venv exists (``.venv-engines``: the command is in the script's docstring); elsewhere
the test says why it skips. Without the engines the script refuses to start and names the venv."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "engines.py"
ENGINES_PYTHON = ROOT / ".venv-engines" / "bin" / "python"


def _has_engines() -> bool:
    if not ENGINES_PYTHON.is_file():
        return False
    done = subprocess.run([str(ENGINES_PYTHON), "-c", "import pyterrier_pisa, tantivy, bm25s"], capture_output=True, timeout=120)
    return done.returncode == 0


@pytest.mark.skipif(not _has_engines(), reason="no .venv-engines with pyterrier-pisa, tantivy and bm25s "
                    "(python3 -m venv .venv-engines; .venv-engines/bin/pip install pyterrier-pisa==0.4.9 tantivy==0.27.0 bm25s "
                    "numpy numba PyStemmer tqdm gymnasium)")
def test_the_quick_form_measures_every_engine_side_by_side(tmp_path):
    done = subprocess.run([str(ENGINES_PYTHON), str(SCRIPT), "--quick", "--workdir", str(tmp_path), "--out", str(tmp_path / "rows.json")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("searchgym", "pisa", "tantivy", "bm25s"):
        assert f"| {name} | 10 |" in out and f"| {name} | 3 |" in out, out[-3000:]
    assert "| searchgym kernel only | 10 |" in out
    assert "searchgym's cost a query over PISA's batch cost on 1 thread" in out
    import json

    row = json.loads((tmp_path / "rows.json").read_text())["rows"][0]
    engines = row["engines"]
    assert row["passages"] == 5000 and set(engines) == {"searchgym", "pisa", "tantivy", "bm25s"}
    # the same questions, the same ranking function at the same k1 and b: most of PISA's hits are searchgym's
    assert engines["searchgym"]["agree_k10"] > 0.6, engines["searchgym"]
    for e in engines.values():
        assert e["index_bytes"] > 0 and e["one_k10"]["p50_ms"] > 0


def test_without_the_engines_it_refuses_to_start_and_names_the_venv():
    done = subprocess.run([sys.executable, "-c", (
        "import sys, importlib.util; real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda name, *a: None if name == 'pyterrier_pisa' else real(name, *a)\n"
        f"sys.argv = ['engines.py', '--quick']; sys.path.insert(0, {str(SCRIPT.parent)!r})\n"
        "import engines; engines.main()")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, (done.stdout[-1000:], done.stderr[-2000:])
    assert "pisa (pyterrier_pisa)" in done.stderr and "not importable" in done.stderr and ".venv-engines/bin/pip install pyterrier-pisa==0.4.9" in done.stderr
