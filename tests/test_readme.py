"""Every Python block of the README and of the docs pages runs as a file of its own, in a
fresh interpreter, as a reader would paste it; a block followed by "prints" and a text
block prints exactly that."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Pages whose Python blocks are not standalone scripts, with the test that covers them.
NOT_STANDALONE = {
    "agents.md": "its blocks build on each other; tests/test_user_agents.py runs them together",
    "trl.md": "its block trains a saved model folder with TRL; tests/integrations/test_trl.py runs the same calls",
}
PAGES = [ROOT / "README.md"] + sorted(p for p in DOCS.glob("*.md") if p.name not in NOT_STANDALONE)


def python_blocks(text: str) -> list[tuple[str, int]]:
    """Each Python block's code and the offset where it ends."""
    return [(m.group(1), m.end()) for m in re.finditer(r"```python\n(.*?)```", text, flags=re.S)]


def expected_output(text: str, end: int) -> str | None:
    """The text block after "prints" that follows a Python block, if any."""
    m = re.match(r"\s*prints\s*\n\s*```text\n(.*?)```", text[end:], flags=re.S)
    return m.group(1) if m else None


CASES = [
    (page, number, code, expected_output(text, end))
    for page in PAGES
    for text in [page.read_text(encoding="utf-8")]
    for number, (code, end) in enumerate(python_blocks(text))
]


def test_the_readme_quick_start_shows_its_output():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(text)
    assert blocks, "README.md has no Python block"
    assert expected_output(text, blocks[0][1]) is not None, "README's first Python block is not followed by 'prints'"
    assert "make test" in text


def test_the_docs_pages_have_python_blocks_and_some_show_their_output():
    pages = {page.name for page, *_ in CASES}
    assert {"envs.md", "bench.md", "errors.md", "rewards.md"} <= pages
    assert sum(expected is not None for *_, expected in CASES) >= 4


def test_the_not_standalone_pages_exist():
    for name in NOT_STANDALONE:
        assert (DOCS / name).exists(), f"docs/{name} is listed in NOT_STANDALONE but does not exist"


@pytest.mark.parametrize(("page", "number", "code", "expected"), CASES, ids=[f"{p.name}-block{n + 1}" for p, n, *_ in CASES])
def test_python_block_runs_as_a_file(page, number, code, expected, tmp_path):
    script = tmp_path / f"{page.stem}_block_{number + 1}.py"
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("PYTHONPATH", None)  # the installed package, as a reader has it
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, f"{page.name} Python block {number + 1} failed:\n{code}\n{done.stderr[-3000:]}"
    if expected is not None:
        assert done.stdout == expected, f"{page.name} Python block {number + 1} printed other text than its 'prints' block"
