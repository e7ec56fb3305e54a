"""A user's own agent in the benchmark: docs/agents.md runs as written, from Python and the
command line; register_agent, module:factory and entry points; clear errors."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import searchgym.agents.registry as registry
from searchgym.agents import Agent, make_agent, register_agent, unregister_agent
from searchgym.bench import BenchConfig, run_bench
from searchgym.cli import main
from searchgym.error import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "agents.md"
WORLD = {"*": {"corpus_options": {"seed": 7, "num_passages": 400}}}


def doc_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture
def title_module(tmp_path, monkeypatch):
    """The docs' TitleAgent saved as my_agents.py in a fresh current directory."""
    (tmp_path / "my_agents.py").write_text(doc_blocks("python")[0], encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_agents", None)


@pytest.fixture(autouse=True)
def forget_registrations():
    yield
    for name in list(registry._FACTORIES):
        unregister_agent(name)


def test_the_docs_python_blocks_run_in_order_and_the_agent_sits_beside_the_built_ins(capsys):
    namespace: dict = {}
    blocks = doc_blocks("python")
    assert len(blocks) == 4
    for block in blocks[:3]:
        exec(compile(block, str(DOC), "exec"), namespace)
    table = capsys.readouterr().out
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if " @ " in line}
    assert list(rows) == ["oracle @ SearchR1-v0", "title @ SearchR1-v0", "random @ SearchR1-v0"]
    assert rows["oracle @ SearchR1-v0"].startswith("| oracle @ SearchR1-v0 | 20 | 1.000 |")
    assert rows["title @ SearchR1-v0"].startswith("| title @ SearchR1-v0 | 20 | ")
    # The registered name works like a built-in one (the last block's config).
    results = run_bench(namespace["config"], out_dir=None, progress=False)
    assert [r["label"] for r in results.rows] == ["title @ SearchR1-v0", "oracle @ SearchR1-v0"]
    assert results.rows[0]["searches"] == 1.0 and results.rows[0]["failures"] == "-"


def test_the_docs_lm_agent_returns_its_generations_and_the_driver_counts_them():
    """The docs' GuessAgent, with a scripted model: the driver counts the tokens of the
    generations it returns, and its texts are the answers."""
    import gymnasium as gym

    from searchgym.agents import Task, run_episodes
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    namespace: dict = {}
    exec(compile(doc_blocks("python")[3], str(DOC), "exec"), namespace)
    answers = iter(["Paris\nmore", ""] + ["Lyon"] * 10)
    lm = ScriptedLM(lambda prompt: next(answers), tiny_tokenizer())
    envs = [gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 400}) for _ in range(2)]
    register_agent("guess", namespace["GuessAgent"])
    agent = make_agent("guess", envs[0], lm=lm)
    assert agent.lm is lm and agent.name == "guess"
    tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:2]]
    out = run_episodes(envs, agent, tasks)
    tokens = lambda text: len(lm.tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    # The first episode answered "Paris" (the stop string "\n" kept in the generation);
    # the second's empty answer was an invalid turn, and it answered "Lyon" next.
    assert [r.prediction for r in out] == ["Paris", "Lyon"] and [r.num_turns for r in out] == [1, 2]
    assert out[0].generated_tokens == tokens("Paris\n")
    assert out[1].generated_tokens == 1 + tokens("Lyon") + 1  # end-of-sequence ids after "" and "Lyon"
    assert "empty_generation" in out[1].flags and agent.questions == {}


def test_the_title_agent_searches_then_answers_with_the_first_title(title_module):
    import gymnasium as gym

    from my_agents import TitleAgent

    env = gym.make("searchgym/SearchR1-v0")
    agent = make_agent("my_agents:TitleAgent", env)
    assert isinstance(agent, TitleAgent)
    observation, info = env.reset(seed=0)
    (turn,) = agent.act([observation], [info])
    assert turn == f"<search> {info['question']} </search>"
    observation, reward, terminated, truncated, info = env.step(turn)
    (turn,) = agent.act([observation], [info])
    first = env.unwrapped.corpus.get(info["retrieved_ids"][0]).title
    assert turn == f"<answer> {first} </answer>"
    assert env.step(turn)[2] is True


def test_the_cli_loads_module_factory_from_the_current_directory(title_module, capsys):
    out = title_module / "out"
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "my_agents:TitleAgent", "--limit", "4", "--num-envs", "2",
                 "--corpus-option", "num_passages=400", "--corpus-option", "seed=7", "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [r["label"] for r in summary["runs"]] == ["oracle @ SearchR1-v0", "my_agents:TitleAgent @ SearchR1-v0"]
    assert summary["runs"][1]["n"] == 4 and summary["config"]["runs"][1] == ["SearchR1-v0", "my_agents:TitleAgent"]
    assert "| my_agents:TitleAgent @ SearchR1-v0 | 4 |" in capsys.readouterr().out


def test_the_installed_command_runs_the_docs_command_line(title_module):
    """The docs' bash line, run by the real console script in a fresh process."""
    (command,) = [line for line in doc_blocks("bash")[0].splitlines() if line.startswith("searchgym bench")]
    script = Path(sys.executable).with_name("searchgym")
    command = command.split(" #", 1)[0]  # the line's duration comment, as a shell drops it
    argv = [str(script), *command.split()[1:], "--limit", "3", "--num-envs", "2", "--quiet", "--out", str(title_module / "cli")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=title_module)
    assert done.returncode == 0, done.stderr[-2000:]
    labels = [line.split(" | ")[0].strip("| ") for line in done.stdout.splitlines() if line.startswith("|") and " @ " in line]
    assert labels == ["oracle @ SearchR1-v0", "my_agents:TitleAgent @ SearchR1-v0", "random @ SearchR1-v0"]


class Counting(Agent):
    """Answers a fixed word; records how it was built."""

    def __init__(self, env, word="x", seed=None):
        self.protocol = env.unwrapped.protocol
        self.word, self.seed = word, seed

    def act(self, observations, infos):
        from searchgym.envs.protocols import Answer

        return [self.protocol.write([Answer(self.word)]) for _ in observations]


def test_factories_get_env_the_bench_settings_they_take_and_their_options(tmp_path):
    built = []

    def factory(env, seed, word="y"):
        agent = Counting(env, word=word, seed=seed)
        built.append(agent)
        return agent

    config = BenchConfig(runs=[("SearchR1-v0", factory), ("SearchR1-v0", Counting(_env(), word="z"))], env_options=WORLD,
                         limit=3, seeds=(5,), agent_options={"factory": {"word": "w"}})
    results = run_bench(config, tmp_path, progress=False)
    assert [r["label"] for r in results.rows] == ["factory @ SearchR1-v0", "Counting @ SearchR1-v0"]
    assert (built[0].seed, built[0].word) == (5, "w")
    recorded = json.loads((tmp_path / "config.json").read_text())["runs"]
    assert recorded == [
        ["SearchR1-v0", f"{__name__}:test_factories_get_env_the_bench_settings_they_take_and_their_options.<locals>.factory"],
        ["SearchR1-v0", f"{__name__}:Counting()"],
    ]
    # The record is the same in every process, so the benchmark resumes instead of refusing.
    again = run_bench(config, tmp_path, progress=False)
    assert [r["n"] for r in again.rows] == [3, 3] and len(built) == 1


def test_register_agent_and_its_errors():
    register_agent("counting", Counting)
    assert "Answers a fixed word" in registry.AGENTS["counting"]
    agent = make_agent("counting", _env(), word="q")
    assert isinstance(agent, Counting) and agent.word == "q"
    assert registry.needs_lm("counting") is False
    register_agent("needs-lm", lambda env, lm: Counting(env))
    assert registry.needs_lm("needs-lm") is True
    with pytest.raises(ConfigError, match="needs a language model, got lm=None"):
        make_agent("needs-lm", _env())
    with pytest.raises(ConfigError, match="'oracle' is a built-in agent; give yours another name"):
        register_agent("oracle", Counting)
    with pytest.raises(ConfigError, match="expects a factory .* got Counting. To benchmark an agent instance"):
        register_agent("x", Counting(_env()))
    with pytest.raises(ConfigError, match="non-empty name"):
        register_agent(" x", Counting)
    with pytest.raises(ConfigError, match="could not be called with .*'colour'"):
        make_agent("counting", _env(), colour="red")
    register_agent("bad", lambda: 42)
    with pytest.raises(ConfigError, match="returned int; it must return a searchgym.agents.Agent"):
        make_agent("bad", _env())
    unregister_agent("bad")
    with pytest.raises(UnknownNameError, match="Unknown agent 'bad'.*module:factory"):
        make_agent("bad", _env())
    with pytest.raises(ConfigError, match="'oracle' is not a registered user agent"):
        unregister_agent("oracle")


def test_module_factory_errors_say_what_to_fix(title_module):
    with pytest.raises(ConfigError, match="Cannot import the module of agent 'no_such_module:X' .*current directory"):
        make_agent("no_such_module:X", _env())
    with pytest.raises(ConfigError, match="module 'my_agents' has no attribute 'Missing'"):
        make_agent("my_agents:Missing", _env())
    with pytest.raises(ConfigError, match="expects both parts"):
        make_agent("my_agents:", _env())
    (title_module / "not_agents.py").write_text("VALUE = 3\n")
    with pytest.raises(ConfigError, match="must name an Agent subclass or a function returning an Agent, got int"):
        make_agent("not_agents:VALUE", _env())
    with pytest.raises(ConfigError, match="BenchConfig runs expect an agent name, an Agent instance or an agent factory"):
        run_bench(BenchConfig(runs=[("SearchR1-v0", 3)]), None, progress=False)
    with pytest.raises(ConfigError, match="got type <class 'int'>"):
        run_bench(BenchConfig(runs=[("SearchR1-v0", int)]), None, progress=False)
    assert main(["bench", "--envs", "SearchR1-v0", "--agents", "no_such_module:X", "--out", str(title_module / "o")]) == 2


def test_installed_packages_declare_agents_as_entry_points(tmp_path, monkeypatch):
    """A dist-info folder on sys.path is what pip writes for an installed package."""
    package = tmp_path / "site"
    (package / "plugin_agents.py").parent.mkdir()
    (package / "plugin_agents.py").write_text(doc_blocks("python")[0], encoding="utf-8")
    info = package / "plugin_agents-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugin-agents\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[searchgym.agents]\nplugin-title = plugin_agents:TitleAgent\nplugin-broken = plugin_agents:Nothing\n"
    )
    monkeypatch.syspath_prepend(str(package))
    monkeypatch.setattr(registry, "_ENTRY_POINTS_LOADED", False)
    try:
        agent = make_agent("plugin-title", _env())
        assert type(agent).__name__ == "TitleAgent"
        with pytest.raises(ConfigError, match="'plugin-broken' declared as 'plugin_agents:Nothing' failed to load: AttributeError"):
            make_agent("plugin-broken", _env())
        epilog = subprocess.run([sys.executable, "-c", "from searchgym.cli import main; main(['bench', '--help'])"],
                                capture_output=True, text=True, env=_env_with_path(package), timeout=120).stdout
        assert "(installed: plugin-broken, plugin-title)" in textwrap.dedent(epilog).replace("\n", " ").replace("  ", " ")
    finally:
        sys.modules.pop("plugin_agents", None)
        for name in ("plugin-title", "plugin-broken"):
            registry.AGENTS.pop(name, None)
            registry._FACTORIES.pop(name, None)
            registry._NEEDS_LM.pop(name, None)


def _env():
    import gymnasium as gym

    return gym.make("searchgym/SearchR1-v0", corpus_options={"seed": 7, "num_passages": 400})


def _env_with_path(path):
    import os

    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), *filter(None, [os.environ.get("PYTHONPATH")])])}
