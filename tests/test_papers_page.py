"""docs/papers.md: every value the page gives for searchgym is the value in the code.

Each section names its preset and env id; each `scope.name = value` cell is read from where
it lives (the registered env's kwargs or SearchEnv's default, the preset's Args, the reward
recipe's option, the protocol's attribute) and compared with the page.
"""

import ast
import inspect
import re
from pathlib import Path

import pytest

from searchgym.envs.protocols import PROTOCOLS
from searchgym.envs.registration import ENV_SPECS
from searchgym.envs.single.core import SearchEnv
from searchgym.rewards import RECIPES
from searchgym.training.args import PRESETS, preset

PAGE = Path(__file__).resolve().parents[1] / "docs" / "papers.md"
SECTION = re.compile(r"^## (?P<title>.+?)\n\nPreset `(?P<preset>[^`]+)`.*?`(?P<env>searchgym/[^`]+)`", re.S | re.M)
CELL = re.compile(r"`(env|preset|recipe|protocol)\.([a-z_]+) = ([^`]+)`")


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
