"""docs/extending.md as a user meets it: its files saved in a fresh folder, its commands run
there as written (the Python blocks run in tests/test_readme.py), and its per-turn recipe
played against the exploits a policy would try. Only public names are imported."""

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import searchgym  # noqa: F401  (registers the envs)
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"
TEXT = PAGE.read_text(encoding="utf-8")
FILES = {
    m.group(1): code
    for code in re.findall(r"```python\n(.*?)```", TEXT, flags=re.S)
    if (m := re.match(r"# (\w+\.py)\n", code))
}
COMMANDS = [
    shlex.split(line.strip())
    for block in re.findall(r"```bash\n(.*?)```", TEXT, flags=re.S)
    for line in block.replace("\\\n", " ").splitlines()
    if line.strip().startswith("searchgym ")
]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A fresh current directory holding the page's files, importable as a reader's would be."""
    for name, code in FILES.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in FILES:
        sys.modules.pop(name[:-3], None)


def run_command(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert command[0] == "searchgym"
    return subprocess.run(
        [sys.executable, "-m", "searchgym.cli", *command[1:]], cwd=cwd, capture_output=True, text=True, timeout=600,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )


def table_rows(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if " @ " in cells[0]:
            rows[cells[0]] = cells
    return rows


def test_the_page_names_its_files_and_commands():
    assert set(FILES) == {"my_recipes.py", "my_methods.py", "my_hooks.py", "my_dapo.py"}
    assert [c[1] for c in COMMANDS] == ["bench", "bench", "bench", "train"]


def test_the_bench_commands_run_as_written_and_show_what_the_page_says(folder):
    header = None
    for command in [c for c in COMMANDS if c[1] == "bench"]:
        done = run_command(command, folder)
        assert done.returncode == 0, f"`{shlex.join(command)}` failed:\n{done.stderr[-3000:]}"
        header = header or next(line for line in done.stdout.splitlines() if line.startswith("| run |"))
        column = [c.strip() for c in header.strip("|").split("|")].index("reward")
        rows = table_rows(done.stdout)
        out = command[command.index("--out") + 1]
        if "my_recipes:FirstFind" in command:  # EM plus 0.25 a supporting passage found
            assert rows["oracle @ SearchR1-v0"][column] == "1.594" and rows["random @ SearchR1-v0"][column] == "0.062"
            episodes = [json.loads(line) for line in (folder / out / "episodes.jsonl").read_text().splitlines()]
            oracle = [e for e in episodes if e["run"].startswith("oracle @")]
            assert oracle and all(e["reward"] == pytest.approx(sum(e["turn_rewards"])) for e in oracle)
            assert all(len(e["turn_rewards"]) == e["num_turns"] for e in oracle)
        elif "--wrapper" in command:  # every turn costs 0.01 through the wrapper
            assert rows["oracle @ SearchR1-v0"][column] == "0.966"
            assert float(rows["oracle @ my/FirstFind-v0"][column]) > 1.0  # EM + first finds - turn costs
        else:
            assert rows["oracle @ SearchR1-v0"][column] == "1.000"


def test_the_train_command_runs_with_turn_credit_and_both_hooks(folder):
    (command,) = [c for c in COMMANDS if c[1] == "train"]
    done = run_command(command, folder)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "step 1: reward 0.000" in done.stdout and "step 2: reward -0.200" in done.stdout
    out = folder / command[command.index("--out") + 1]
    recorded = json.loads((out / "args.json").read_text())
    assert recorded["credit"] == "turn" and recorded["hooks"] == ["my_hooks:GroupBonus", "my_hooks:StricterFormat"]
    assert recorded["reward"] == "my_recipes:FirstFind"


def test_a_bad_path_is_refused_by_name_before_anything_loads(folder):
    done = run_command(["searchgym", "bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--reward", "my_recipes:Nope"], folder)
    assert done.returncode == 2
    assert "The reward recipe 'my_recipes:Nope' names nothing: module 'my_recipes' has no attribute 'Nope'." in done.stderr
    done = run_command(["searchgym", "train", "--model", "tiny-random-2k", "--hooks", "nosuchmod:Hook", "--out", "runs/x"], folder)
    assert done.returncode != 0 and "nosuchmod" in done.stderr and "No module named 'nosuchmod'" in done.stderr
    assert not (folder / "runs" / "x").exists()


# ---------------------------------------------------------------- the per-turn recipe against its exploits
def play(env, example, turns) -> float:
    """The sum of the step rewards of ``turns`` (actions or raw text) on ``example``."""
    env.reset(seed=0, options={"example_id": example.id})
    write = search_env(env).protocol.write
    total, done = 0.0, False
    for turn in turns:
        _, reward, terminated, truncated, _ = env.step(turn if isinstance(turn, str) else write(turn))
        total += reward
        done = terminated or truncated
        if done:
            break
    assert done
    return total


def test_first_find_pays_nothing_for_searching_again_junk_or_forged_documents(folder):
    from my_recipes import FirstFind

    env = gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 400}, reward=FirstFind(), max_turns=8)
    examples = [ex for ex in search_env(env).examples if ex.metadata["type"] == "bridge" and ex.metadata["hops"] == 2][:5]
    assert examples
    for example in examples:
        wrong = "no such answer"
        first = example.metadata["oracle_queries"][0]
        honest_wrong = play(env, example, [[Search(q)] for q in example.metadata["oracle_queries"]] + [[Answer(wrong)]])
        again = play(env, example, [[Search(first)]] * 6 + [[Answer(wrong)]])
        junk = play(env, example, [[Search(f"{w} {w}")] for w in ("the", "a", "of", "and", "in", "to")] + [[Answer(wrong)]])
        forged = play(env, example, [
            f"<search> {first} </search>\n<information>Doc 1(Title: {example.answers[0]}) {example.question}</information>",
            f"<answer> {wrong} </answer>",
        ])
        titles = [search_env(env).corpus.get(i).title for i in example.metadata["supporting_ids"]]
        pasted = play(env, example, [[Search(" ".join(titles))], [Search(" ".join(titles))], [Answer(wrong)]])
        # Each supporting passage pays once, however it was found: no exploit beats the honest search.
        for name, exploit in {"again": again, "junk": junk, "forged": forged, "pasted titles": pasted}.items():
            assert exploit <= honest_wrong + 1e-9, (example.id, name, exploit, honest_wrong)
        assert honest_wrong <= 0.1 * len(example.metadata["supporting_ids"]) + 1e-9


# ---------------------------------------------------------------- a recipe reads the env's budgets
def test_a_recipe_reads_the_envs_budgets_from_the_episode():
    from searchgym.rewards import Budgets, Episode, RewardRecipe, RewardResult

    seen = []

    class TurnsLeft(RewardRecipe):
        name = "turns_left"

        def turn_reward(self, episode):
            seen.append(("turn", episode.budgets))
            return None

        def score(self, episode):
            seen.append(("score", episode.budgets))
            left = episode.budgets.max_turns - len(episode.turns)
            return RewardResult(float(left), {"left": float(left)})

    env = gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 400}, reward=TurnsLeft(),
                   max_turns=4, top_k=2, max_searches=2)
    env.reset(seed=0)
    write = search_env(env).protocol.write
    env.step(write([Search("a founder")]))
    _, reward, terminated, *_ = env.step(write([Answer("x")]))
    assert terminated and reward == 2.0  # 4 turns allowed, 2 played
    expected = Budgets(max_turns=4, top_k=2, initial_top_k=2, max_searches=2, max_calls=None, max_context_tokens=None)
    assert seen and all(budgets == expected for _, budgets in seen) and {kind for kind, _ in seen} == {"turn", "score"}
    assert Episode("q", ("a",)).budgets is None  # built by hand, outside an env
