"""Every Python block of the README and of the docs pages runs as a file of its own, in a
fresh interpreter, as a reader would paste it; a block followed by "prints" and a text
block prints exactly that. A page whose blocks build on each other runs them together, in
order; a page whose block reads what a command of the page writes runs that command first,
as written."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Pages whose Python blocks build on each other: they run together, in order, as one file.
TOGETHER = {"agents.md"}
#: Pages whose Python blocks read a folder that a command of the page writes: the page's
#: bash lines that start with these words run first, as written, in the blocks' folder.
SETUP = {"trl.md": "searchgym sft --model scratch"}
#: A Python block whose first line is ``# NAME.py`` is a file of the page: it is saved under
#: that name beside every block of the page (docs/extending.md's modules), as a reader would.
FILE_BLOCK = re.compile(r"# (\w+\.py)\n")
PAGES = [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


def python_blocks(text: str) -> list[tuple[str, int]]:
    """Each Python block's code and the offset where it ends."""
    return [(m.group(1), m.end()) for m in re.finditer(r"```python\n(.*?)```", text, flags=re.S)]


def expected_output(text: str, end: int) -> str | None:
    """The text block after "prints" that follows a Python block, if any."""
    m = re.match(r"\s*prints\s*\n\s*```text\n(.*?)```", text[end:], flags=re.S)
    return m.group(1) if m else None


def setup_commands(text: str, prefix: str) -> list[list[str]]:
    """The lines of the page's bash blocks (continuations joined) that start with ``prefix``."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        lines += [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip().startswith(prefix)]
    return [shlex.split(line) for line in lines]


def page_files(text: str) -> dict[str, str]:
    """The page's file blocks by file name (see :data:`FILE_BLOCK`)."""
    files = {}
    for code, _ in python_blocks(text):
        m = FILE_BLOCK.match(code)
        if m:
            files[m.group(1)] = code
    return files


def page_cases(page: Path) -> list[tuple[Path, int, str, str | None]]:
    text = page.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    if page.name in TOGETHER and blocks:
        return [(page, 0, "\n\n".join(code for code, _ in blocks), expected_output(text, blocks[-1][1]))]
    return [(page, number, code, expected_output(text, end)) for number, (code, end) in enumerate(blocks)]


CASES = [case for page in PAGES for case in page_cases(page)]


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


def test_the_pages_with_special_runs_exist_and_have_what_the_run_needs():
    for name in TOGETHER:
        assert len(python_blocks((DOCS / name).read_text(encoding="utf-8"))) > 1, f"docs/{name} has no blocks to run together"
    for name, prefix in SETUP.items():
        assert setup_commands((DOCS / name).read_text(encoding="utf-8"), prefix), f"docs/{name} has no bash line starting {prefix!r}"


@pytest.mark.parametrize(("page", "number", "code", "expected"), CASES, ids=[f"{p.name}-block{n + 1}" for p, n, *_ in CASES])
def test_python_block_runs_as_a_file(page, number, code, expected, tmp_path):
    script = tmp_path / f"{page.stem}_block_{number + 1}.py"
    for name, text in page_files(page.read_text(encoding="utf-8")).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    script.write_text(code, encoding="utf-8")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's package (what `make install` installs from it), nothing else
    for command in setup_commands(page.read_text(encoding="utf-8"), SETUP[page.name]) if page.name in SETUP else ():
        assert command[0] == "searchgym"
        done = subprocess.run([sys.executable, "-m", "searchgym.cli", *command[1:]], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
        assert done.returncode == 0, f"{page.name}: `{shlex.join(command)}` failed:\n{done.stderr[-3000:]}"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=900)
    assert done.returncode == 0, f"{page.name} Python block {number + 1} failed:\n{code}\n{done.stderr[-3000:]}"
    if expected is not None:
        assert done.stdout == expected, f"{page.name} Python block {number + 1} printed other text than its 'prints' block"
