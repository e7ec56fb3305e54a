"""docs/papers.md: every value the page gives for searchgym is the value in the code, and
every quote it gives a paper is in that paper.

Each section names its preset and env id; each `scope.name = value` cell is read from where
it lives (the registered env's kwargs or SearchEnv's default, the preset's Args, the Args
under --paper-scale or, for `scale[RUN]`, under --paper-scale RUN, the reward recipe's
option, the protocol's attribute, the defaults of distill-summarizer and stage-sets) and
compared with the page. Each "paper says" cell either says "paper silent" (and names the
value's source) or cites the paper; every "quoted" text in it is found, word for word, in
the paper's text in ../shared/papers/ (beside the checkout; SEARCHGYM_PAPERS names another
folder). A clean clone without that folder skips the quote check.
"""

import ast
import inspect
import re
from pathlib import Path

import pytest
from paper_text import PAPER_FILES, needs_papers, normalize, paper_text

from searchgym.envs.protocols import PROTOCOLS
from searchgym.envs.registration import ENV_SPECS
from searchgym.envs.single.core import SearchEnv
from searchgym.rewards import RECIPES
from searchgym.training.args import PRESETS, preset
from searchgym.training.distill import DistillArgs
from searchgym.training.paper_scale import PAPER_RUNS, PAPER_SCALE, paper_scale_args
from searchgym.training.stage_sets import StageSetArgs

PAGE = Path(__file__).resolve().parents[1] / "docs" / "papers.md"
SECTION = re.compile(r"^## (?P<title>.+?)\n\nPreset `(?P<preset>[^`]+)`.*?`(?P<env>searchgym/[^`]+)`", re.S | re.M)
#: ``scale[v0.1].X`` is the value under ``--paper-scale v0.1`` (a paper's other released run).
CELL = re.compile(r"`(env|preset|scale(?:\[[a-z0-9.]+\])?|recipe|protocol|distill|stage_sets)\.([a-z][a-z0-9_]*) = ([^`]+)`")
#: A quote in a "paper says" cell, with the paper it quotes when that is not the section's ("RECON: ").
QUOTE = re.compile(r"(?:\b(" + "|".join(map(re.escape, PAPER_FILES)) + r"): )?\"([^\"]+)\"")
#: How a cell cites its paper: a section, appendix, table, equation, algorithm or figure.
CITATION = re.compile(r"§\d|App\. [A-F]|Table \d|Eq\. \d|Alg\. \d|Fig\. \d")


def sections() -> list[tuple[str, str, str, str]]:
    """(title, preset, env id, the section's text) for each paper."""
    text = PAGE.read_text(encoding="utf-8")
    starts = [m for m in SECTION.finditer(text)]
    out = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        out.append((m["title"], m["preset"], m["env"], text[m.start():end]))
    return out


def default(fn, name):
    parameter = inspect.signature(inspect.unwrap(fn)).parameters[name]
    assert parameter.default is not inspect.Parameter.empty, f"{fn} has no default for {name}"
    return parameter.default


def actual(scope: str, name: str, preset_name: str, env_id: str):
    spec = ENV_SPECS[env_id]
    if scope == "env":
        return spec[name] if name in spec else default(SearchEnv.__init__, name)
    if scope == "preset":
        return getattr(preset(preset_name), name)
    if scope.startswith("scale"):
        run = scope[len("scale["):-1] if scope != "scale" else None
        return getattr(paper_scale_args(preset_name, run), name)
    if scope == "distill":
        return getattr(DistillArgs(), name)
    if scope == "stage_sets":
        return getattr(StageSetArgs(), name)
    if scope == "recipe":
        return default(RECIPES[spec["reward"]].__init__, name)
    protocol = PROTOCOLS[spec["protocol"]]()
    return getattr(protocol, name)


def test_the_page_covers_the_five_papers_and_their_presets():
    found = sections()
    assert [title for title, *_ in found] == ["Search-R1", "R1-Searcher", "s3", "R-Search", "RECON"]
    assert {p for _, p, _, _ in found} <= set(PRESETS) and {e for *_, e, _ in found} == set(ENV_SPECS)
    for title, name, env_id, text in found:
        assert PRESETS[name]["env_id"] == env_id, title
        assert len(CELL.findall(text)) >= 8, f"{title}: too few settings checked"
        assert f"--preset {name} " in text, f"{title}: no command runs its preset"


@pytest.mark.parametrize("title, preset_name, env_id, text", sections(), ids=[s[0] for s in sections()])
def test_every_value_on_the_page_is_the_codes(title, preset_name, env_id, text):
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| setting")]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4, f"{title}: a row needs setting | paper | searchgym | same?: {row}"
        assert cells[3].startswith(("same", "differs")), f"{title}: say 'same' or why it differs: {row}"
        loose = re.findall(r"`(?:env|preset|scale(?:\[[^\]`]*\])?|recipe|protocol|distill|stage_sets)\.[^`=]+ = ", cells[2])
        assert len(loose) == len(CELL.findall(cells[2])), f"{title}: a value the check cannot read: {loose}"
        for scope, name, written in CELL.findall(cells[2]):
            value = actual(scope, name, preset_name, env_id)
            expected = ast.literal_eval(written)
            if isinstance(expected, float) or isinstance(value, float):
                assert value == pytest.approx(expected), f"{title}: {scope}.{name} is {value!r}, the page says {written}"
            else:
                assert value == expected, f"{title}: {scope}.{name} is {value!r}, the page says {written}"


def test_a_wrong_value_on_the_page_would_be_caught():
    """The check can fail: a changed number is not the code's."""
    title, preset_name, env_id, _ = sections()[0]
    assert actual("preset", "lr", preset_name, env_id) != ast.literal_eval("1e-05")
    assert actual("env", "top_k", preset_name, env_id) != 5
    # a run named in the scope is that run's value, not the default run's
    assert actual("scale[v0.1]", "total_steps", "search-r1-ppo", env_id) == 305 != actual("scale", "total_steps", "search-r1-ppo", env_id)


def rows(text: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| ") and not line.startswith("| setting")
    ]


@pytest.mark.parametrize("title, preset_name, env_id, text", sections(), ids=[s[0] for s in sections()])
def test_every_paper_cell_cites_its_paper_or_says_it_is_silent(title, preset_name, env_id, text):
    for cells in rows(text):
        paper = cells[1]
        assert "paper silent" in paper or CITATION.search(paper), f"{title}: cite the paper's section or say 'paper silent': {cells[0]}"
        if "paper silent" not in paper:
            assert QUOTE.search(paper) or re.search(r"Eq\. \d|Table \d|Alg\. \d|Fig\. \d", paper), f"{title}: quote the paper: {cells[0]}"
    assert any(cells[0] == "schedule" and "--paper-scale" in cells[2] for cells in rows(text)), f"{title}: a schedule row says what --paper-scale runs"
    assert preset_name in PAPER_SCALE


@pytest.mark.parametrize("title, preset_name, env_id, text", sections(), ids=[s[0] for s in sections()])
def test_one_row_per_paper_says_the_preset_is_cpu_sized_and_names_the_paper_scale_run(title, preset_name, env_id, text):
    """The schedule row: the CPU-sized preset is the default, and every value --paper-scale
    changes is on the page as `scale.X = value` (checked against the code above)."""
    (schedule,) = [cells for cells in rows(text) if cells[0] == "schedule"]
    assert schedule[3].startswith("differs by default: CPU-sized; `--paper-scale`"), f"{title}: {schedule[3]}"
    cpu = preset(preset_name)
    assert f"`preset.questions_per_step = {cpu.questions_per_step}`" in schedule[2] and f"`preset.total_steps = {cpu.total_steps}`" in schedule[2]
    shown = {name for scope, name, _ in CELL.findall(text) if scope == "scale"}
    changed = {field for field, setting in PAPER_SCALE[preset_name].items() if getattr(cpu, field) != setting.value}
    assert changed <= shown, f"{title}: --paper-scale changes {sorted(changed - shown)}, not on the page as scale.X"


@needs_papers
@pytest.mark.parametrize("title, preset_name, env_id, text", sections(), ids=[s[0] for s in sections()])
def test_every_quote_is_in_the_papers_text(title, preset_name, env_id, text):
    papers = {name: paper_text(name) for name in PAPER_FILES}
    quotes = [(source or title, quote) for cells in rows(text) for source, quote in QUOTE.findall(cells[1])]
    assert len(quotes) >= 10, f"{title}: too few quotes"
    missing = [f"{source}: {quote!r}" for source, quote in quotes if normalize(quote) not in papers[source]]
    assert not missing, f"{title}: not in the paper's text: " + "; ".join(missing)


@needs_papers
def test_the_paper_scale_quotes_are_in_the_papers_text():
    """searchgym.training.paper_scale cites its values the same way (every run of a paper): a
    setting from a paper quotes it, and the quote is in that paper; the others say the paper
    is silent or derive."""
    papers = {name: paper_text(name) for name in PAPER_FILES}
    quoted = 0
    every_run = [*PAPER_SCALE.items(), *((name, settings) for name, named in PAPER_RUNS.items() for settings in named.values())]
    for name, settings in every_run:
        for field, setting in settings.items():
            if setting.quote:
                assert normalize(setting.quote) in papers[setting.paper], f"{name}.{field}: {setting.quote!r} is not in {setting.paper}"
                assert setting.quote in setting.source, f"{name}.{field}: the source shows its quote"
                quoted += 1
            else:
                assert setting.source.startswith(("paper silent", "derived")), f"{name}.{field}: quote the paper or say it is silent"
    assert quoted >= 15


def test_a_quote_the_paper_does_not_hold_would_be_caught():
    """The quote check can fail: a reworded quote is not in the paper's text."""
    assert normalize("You can search as many times as your want") not in normalize("Answer the given question. You can search as many times as you want.")
    assert QUOTE.findall('RECON: "Temperature=1.0" (App. B.4) and "five sampled responses" (§4.3)') == [("RECON", "Temperature=1.0"), ("", "five sampled responses")]
