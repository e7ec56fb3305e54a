"""Every script under benchmarks/ starts and explains itself (``--help``), and every quick form
(``--quick``) has its measured time recorded in benchmarks/RESULTS.md "Documented commands"."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((ROOT / "benchmarks").glob("*.py"))


def documented_commands() -> str:
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = re.search(r"^## Documented commands\n(.*?)(?=^## )", text, flags=re.M | re.S)
    assert section, 'benchmarks/RESULTS.md has no "## Documented commands" section'
    return section.group(1)


def test_there_are_benchmark_scripts():
    assert len(SCRIPTS) >= 7, [s.name for s in SCRIPTS]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_benchmark_script_answers_help(script):
    done = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
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
