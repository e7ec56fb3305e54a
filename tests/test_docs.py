"""The docs site builds with `mkdocs build --strict`, and a broken link fails that build;
every relative link of the README points at a file that exists."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def build(project: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project, capture_output=True, text=True, timeout=300,
    )


def nav_pages(config: dict) -> list[str]:
    pages = []
    for entry in config["nav"]:
        (target,) = entry.values()
        pages.append(target)
    return pages


def test_the_docs_build_strictly_with_every_page_in_the_nav(tmp_path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    pages = nav_pages(config)
    assert sorted(pages) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    for page in pages:
        html = tmp_path / "site" / ("index.html" if page == "index.md" else f"{page[:-3]}/index.html")
        assert html.exists(), f"{page} was not built"


def test_a_broken_link_fails_the_strict_build(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    assert build(project, tmp_path / "ok").returncode == 0
    index = project / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\nSee [a page that is gone](gone.md).\n", encoding="utf-8")
    done = build(project, tmp_path / "broken")
    assert done.returncode != 0
    assert "gone.md" in done.stdout + done.stderr


def test_a_broken_anchor_fails_the_strict_build(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    index = project / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + "\nSee [the driver](bench.md#no-such-section).\n", encoding="utf-8")
    done = build(project, tmp_path / "broken")
    assert done.returncode != 0
    assert "no-such-section" in done.stdout + done.stderr


def test_every_relative_link_of_the_readme_exists():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", t)]
    assert targets, "README.md links to no page"
    for target in targets:
        path = (ROOT / target.split("#")[0]).resolve()
        assert path.exists(), f"README.md links to {target}, which does not exist"


def test_the_sections_of_results_md_that_the_docs_name_exist():
    """The strict build cannot follow links out of docs/, so the pages name RESULTS.md's
    sections in words; each named section must be a heading there."""
    headings = set(re.findall(r"^#+ (.+?)\s*$", (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8"), flags=re.M))
    named = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        named += [(page.name, " ".join(s.split())) for s in re.findall(r'RESULTS\.md`[,;]?\s+section\s+"([^"]+)"', text)]
    assert len(named) >= 8
    for page, section in named:
        assert section in headings, f'docs/{page} names section "{section}" of benchmarks/RESULTS.md, which has no such heading'


#: A stated duration: "~3 s", "11.5 min", "15+ min", "hours", or a command that needs GPUs
#: and says it is not timed on a CPU.
DURATION = re.compile(r"(\d+(\.\d+)?\+? ?(ms|s|min|minutes|seconds)\b|\bhours\b|needs GPUs: not timed on a CPU)")
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.S | re.M)


def undated_commands(text: str) -> list[str]:
    """The first line of every command of ``text``'s shell blocks that states no duration,
    neither on its own lines (a trailing comment; a command continued with a backslash is
    one command) nor in a comment line above it in the same paragraph of the block."""
    missing = []
    for block in SHELL_BLOCK.findall(text):
        comments, command = "", []
        for line in block.splitlines():
            if not command and not line.strip():
                comments = ""  # a blank line ends the paragraph its comments date
            elif not command and line.lstrip().startswith("#"):
                comments += line + "\n"
            else:
                command.append(line)
                if not line.endswith("\\"):
                    if not DURATION.search("\n".join(command) + "\n" + comments):
                        missing.append(command[0])
                    command = []
    return missing


def test_every_shell_command_of_the_readme_and_docs_states_its_duration():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    missing = {p.name: undated_commands(p.read_text(encoding="utf-8")) for p in pages}
    assert {name: cmds for name, cmds in missing.items() if cmds} == {}


def test_the_duration_check_finds_an_undated_command():
    text = "```bash\nmake install   # ~2 min\nmake test\n# ~3 s\nsearchgym bench \\\n    --limit 2\n```\n"
    assert undated_commands(text) == ["make test"]
    assert undated_commands("```bash\n# ~1 min each\nfoo\nbar\n\nbaz\n```\n") == ["baz"]  # a blank line ends it
    assert undated_commands("```python\nprint(1)\n```\n") == []


#: A count of tests ("1,462 tests", "the rewards' 224 tests"): it drifts with every test added.
TEST_COUNT = re.compile(r"\b\d[\d,]*\s+(?:[\w']+\s+)?tests?\b")
#: A make target and the duration its comment states (``make test  # ~20 min: ...``).
MAKE_DURATION = re.compile(r"^make ([\w-]+)\s+#\s*([^:,(]+)", re.M)


def drifting_figures(pages: dict[str, str]) -> dict[str, object]:
    """What would drift in ``pages`` (name -> text): counts of tests, and a make target whose
    duration two places state differently."""
    counts = {name: TEST_COUNT.findall(text) for name, text in pages.items()}
    durations: dict[str, set[str]] = {}
    for text in pages.values():
        for target, duration in MAKE_DURATION.findall(text):
            durations.setdefault(target, set()).add(duration.strip())
    return {
        "test counts": {name: found for name, found in counts.items() if found},
        "make durations": {target: sorted(found) for target, found in durations.items() if len(found) > 1},
    }


def test_no_figure_of_the_readme_and_docs_drifts():
    """No page counts tests (the count changes with every test: pytest says it), and every
    make target's duration is stated the same wherever it is stated (one figure, not two)."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    assert drifting_figures(pages) == {"test counts": {}, "make durations": {}}


def test_the_drift_check_finds_a_test_count_and_two_durations():
    pages = {"README.md": "1,462 tests pass\n```bash\nmake test   # ~19 min: all\n```\n",
             "index.md": "the rewards' 224 tests\n```bash\nmake test      # 15+ min: the suite\nmake install  # ~2 min\n```\n"}
    assert drifting_figures(pages) == {"test counts": {"README.md": ["1,462 tests"], "index.md": ["224 tests"]},
                                       "make durations": {"test": ["15+ min", "~19 min"]}}
