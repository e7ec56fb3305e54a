"""Every Python block of the README runs as a file of its own, in a fresh interpreter, as
a reader would paste it; a block followed by "prints" and a text block prints exactly that."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")
BLOCKS = [(m.group(1), m.end()) for m in re.finditer(r"```python\n(.*?)```", TEXT, flags=re.S)]


def expected_output(end: int) -> str | None:
    """The text block after "prints" that follows a Python block, if any."""
    m = re.match(r"\s*prints\s*\n\s*```text\n(.*?)```", TEXT[end:], flags=re.S)
    return m.group(1) if m else None


def test_the_readme_has_python_blocks_and_the_first_shows_its_output():
    assert len(BLOCKS) >= 5
    assert expected_output(BLOCKS[0][1]) is not None


@pytest.mark.parametrize("number", range(len(BLOCKS)), ids=lambda n: f"block{n + 1}")
def test_readme_block_runs_as_a_file(number, tmp_path):
    code, end = BLOCKS[number]
    script = tmp_path / f"readme_block_{number + 1}.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)  # the installed package, as a reader has it
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, f"README Python block {number + 1} failed:\n{code}\n{done.stderr[-3000:]}"
    expected = expected_output(end)
    if expected is not None:
        assert done.stdout == expected
