"""User pieces from the command line (issue 53, item 3): ``--import``, ``module:attr`` in
``--reward``, ``--retriever``, ``--env-options``, ``--envs`` and ``--wrapper``, in
``searchgym bench``, ``train``, ``sft`` and ``serve``; a bad path or a failing import is
refused by name, with the import's own error, before any model loads (and, in ``train``,
before ``args.json`` is written)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from searchgym.cli import main

USER_MODULE = '''
import gymnasium as gym
from searchgym.corpora import Hit, register_retriever
from searchgym.rewards import RewardRecipe, RewardResult, exact_match


class Weighted(RewardRecipe):
    """EM times a weight."""

    name = "weighted"

    def __init__(self, *, weight=1.0, invalid_action_penalty=0.0):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.weight = float(weight)

    def score(self, episode):
        em = exact_match(episode.answer, episode.answers)
        return RewardResult(self.weight * em if episode.answer is not None else 0.0, {"em": em})


class Silent(gym.Wrapper):
    """A wrapper that leaves a mark on the env it wraps."""

    def __init__(self, env):
        super().__init__(env)
        env.unwrapped.wrapped_by_user = True


register_retriever("first-passages", lambda corpus: FirstPassages(corpus))


class FirstPassages:
    def __init__(self, corpus):
        self.corpus = corpus

    def search(self, queries, k):
        return [[Hit(self.corpus[i], 1.0) for i in range(k)] for _ in queries]
'''

SMALL = ["--corpus-option", "num_passages=400", "--corpus-option", "seed=7"]


@pytest.fixture
def here(tmp_path, monkeypatch):
    (tmp_path / "usermod.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    sys.modules.pop("usermod", None)
    yield tmp_path
    sys.modules.pop("usermod", None)


def test_bench_plays_a_users_recipe_named_by_path_and_its_reward_shows(here, capsys):
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--limit", "2", *SMALL, "--reward", "usermod:Weighted",
                 "--env-options", '{"reward_options": {"weight": 2.0}}', "--wrapper", "usermod:Silent", "--out", "b", "--quiet"])
    assert code == 0
    summary = json.loads((here / "b" / "summary.json").read_text())["runs"]
    assert "| oracle @ SearchR1-v0 | 2 | 1.000 |" in capsys.readouterr().out
    assert summary[0]["reward"] == 2.0 and summary[0]["em"] == 1.0  # the oracle answers right: 2 x EM
    config = json.loads((here / "b" / "config.json").read_text())
    assert config["env_options"]["*"]["reward"] == "usermod:Weighted" and config["wrappers"] == ["usermod:Silent"]


def test_bench_import_fills_the_retriever_registry_first(here, capsys):
    code = main(["bench", "--import", "usermod", "--envs", "SearchR1-v0", "--agents", "random", "--limit", "1", *SMALL,
                 "--retriever", "first-passages", "--retriever-per-env", "--out", "b", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert json.loads((here / "b" / "config.json").read_text())["retriever_per_env"] is True


@pytest.mark.parametrize("flags, message", [
    (["--reward", "nosuchmod:X"],
     "Cannot import the module of reward recipe 'nosuchmod:X' (ModuleNotFoundError: No module named 'nosuchmod')"),
    (["--import", "nosuchmod"], "Cannot import 'nosuchmod' for --import (ModuleNotFoundError: No module named 'nosuchmod')"),
    (["--retriever", "usermod:Nope"], "The retriever 'usermod:Nope' names nothing: module 'usermod' has no attribute 'Nope'."),
    (["--wrapper", "usermod:Nope"], "The env wrapper 'usermod:Nope' names nothing: module 'usermod' has no attribute 'Nope'."),
    (["--env-options", '{"protocol": "usermod:Weighted"}'],
     "The protocol 'usermod:Weighted' expects a Protocol subclass, a protocol instance or a factory returning one, got the class Weighted."),
])
def test_bench_refuses_a_bad_piece_by_name_before_any_model_loads(here, capsys, monkeypatch, flags, message):
    import searchgym.lm.registry as registry

    def no_model(*args, **kwargs):  # pragma: no cover - reached only if the check came too late
        raise AssertionError("a model was loaded before the user pieces were checked")

    monkeypatch.setattr(registry, "load_lm", no_model)
    assert main(["bench", "--envs", "SearchR1-v0", "--agents", "lm", "--limit", "1", *flags, "--out", "b", "--quiet"]) == 2
    assert message in capsys.readouterr().err
    assert not (here / "b" / "config.json").exists()


def run_cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run([sys.executable, "-c", "import sys; from searchgym.cli import main; sys.exit(main(sys.argv[1:]))", *argv],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_train_refuses_a_bad_reward_path_before_the_model_loads_and_before_args_json(here):
    t0 = time.perf_counter()
    done = run_cli("train", "--reward", "nosuchmod:X", "--model", "smollm2", "--out", "run", cwd=here)
    assert done.returncode == 2, done.stderr
    assert ("Cannot import the module of reward recipe 'nosuchmod:X' (ModuleNotFoundError: No module named 'nosuchmod'); it "
            "must be importable from the current directory or an installed package, and run without error.") in done.stderr
    assert not (here / "run").exists()  # no args.json, nothing written
    assert time.perf_counter() - t0 < 120  # SmolLM2 was not loaded (a CPU load of it alone takes longer on a busy machine)
    done = run_cli("train", "--import", "usermod", "--reward", "usermod:Weighted", "--wrapper", "usermod:Silent", "--dry-run", cwd=here)
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert (resolved["--reward"], resolved["--imports"], resolved["--wrappers"]) == ("usermod:Weighted", ["usermod"], ["usermod:Silent"])


def test_sft_and_serve_take_import_and_refuse_a_failing_one(here, capsys):
    (here / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    assert main(["sft", "--import", "broken", "--out", "s"]) == 2
    assert "Cannot import 'broken' for --import (RuntimeError: boom at import)" in capsys.readouterr().err
    assert main(["serve", "--import", "broken", "--corpus", "synthwiki"]) == 2
    assert "Cannot import 'broken' for --import (RuntimeError: boom at import)" in capsys.readouterr().err
    assert main(["serve", "--retriever", "nosuchmod:X", "--corpus", "synthwiki"]) == 2
    assert "Cannot import the module of retriever 'nosuchmod:X'" in capsys.readouterr().err


# ---------------------------------------------------------------- one meaning per flag (issue 63, item 10)
LINES_MODULE = '''
import gymnasium as gym
from searchgym.envs.protocols import Answer, Invalid, Protocol, Search


class Lines(Protocol):
    """One action a turn: `search: QUERY` or `answer: TEXT`."""

    name = "lines"

    def prompt(self, example, docs=None):
        return f"Write `search: QUERY` or `answer: TEXT`.\\nQuestion: {example.question}\\n"

    def parse_actions(self, text):
        kind, _, rest = text.strip().partition(":")
        if rest.strip() and kind.strip() in ("search", "answer"):
            return ((Search if kind.strip() == "search" else Answer)(rest.strip()),), True
        return (Invalid("expected search: or answer:"),), False

    def wrap_information(self, text):
        return f"\\nresults:\\n{text}\\n"

    def invalid_feedback(self):
        return "\\nWrite `search: QUERY` or `answer: TEXT`.\\n"

    def write(self, actions, thought=None):
        a = actions[0]
        return f"search: {a.query}" if isinstance(a, Search) else f"answer: {a.text}"


class Half(Protocol):
    name = "half"

    def prompt(self, example, docs=None):
        return example.question


gym.register("Lines-v0", entry_point="searchgym.envs:SearchEnv", kwargs={"protocol": "lines_mod:Lines"})
'''


@pytest.fixture
def lines_here(here):
    (here / "lines_mod.py").write_text(LINES_MODULE)
    sys.modules.pop("lines_mod", None)
    yield here
    sys.modules.pop("lines_mod", None)


def test_train_and_sft_read_retriever_and_protocol_as_bench_does(lines_here, capsys):
    done = run_cli("train", "--retriever", "bm25", "--retriever-option", "k1=0.9", "--protocol", "lines_mod:Lines",
                   "--retriever-per-env", "--dry-run", cwd=lines_here)
    assert done.returncode == 0, done.stderr
    resolved = json.loads(done.stdout)
    assert resolved["--env-options"] == {"retriever": "bm25", "retriever_options": {"k1": 0.9}, "protocol": "lines_mod:Lines"}
    assert resolved["--retriever-per-env"] is True
    # A bare --retriever, or an abbreviation, is refused rather than read as --retriever-per-env.
    for argv, message in ((["train", "--retriever", "--dry-run"], "argument --retriever: expected one argument"),
                          (["train", "--retriever-per", "--dry-run"], "unrecognized arguments: --retriever-per")):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2 and message in capsys.readouterr().err
    # A key given twice, and an incomplete protocol, are refused by name before anything loads.
    assert main(["train", "--retriever", "bm25", "--env-options", '{"retriever": "dense"}', "--dry-run"]) == 2
    assert "searchgym train got the env option 'retriever' from both --env-options and --retriever; give it once." in capsys.readouterr().err
    assert main(["train", "--protocol", "lines_mod:Half", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "The protocol 'lines_mod:Half' (lines_mod:Half) does not define parse_actions(text), wrap_information(text)" in err
    assert main(["sft", "--protocol", "lines_mod:Half", "--out", "s"]) == 2
    assert "The protocol 'lines_mod:Half' (lines_mod:Half) does not define" in capsys.readouterr().err
    from searchgym.cli import build_parser
    from searchgym.training.cli import merge_piece_options

    ns = build_parser().parse_args(["sft", "--retriever", "bm25", "--protocol", "lines_mod:Lines", "--env-options", '{"top_k": 2}'])
    assert merge_piece_options(ns, {"env_options": ns.env_options}, "sft") == {
        "env_options": {"top_k": 2, "retriever": "bm25", "protocol": "lines_mod:Lines"}}


def test_bench_takes_protocol_shows_it_and_runs_a_module_env_id(lines_here, capsys):
    code = main(["bench", "--envs", "SearchR1-v0", "--agents", "oracle", "--limit", "2", *SMALL, "--protocol", "lines_mod:Lines",
                 "--out", "b", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0
    assert "protocol of oracle @ SearchR1-v0: lines_mod:Lines (lines), overriding SearchR1-v0's own" in out
    row = json.loads((lines_here / "b" / "summary.json").read_text())["runs"][0]
    assert row["protocol"] == "lines" and row["protocol_given"] == "lines_mod:Lines" and row["em"] == 1.0
    # --run ENV:AGENT with a module:Env-v0 id (the env is the part up to its -vN) and a module:factory agent.
    from searchgym.cli import split_run

    assert split_run("lines_mod:Lines-v0:oracle") == ("lines_mod:Lines-v0", "oracle")
    assert split_run("SearchR1-v0:my_agents:TitleAgent") == ("SearchR1-v0", "my_agents:TitleAgent")
    code = main(["bench", "--run", "lines_mod:Lines-v0:oracle", "--limit", "2", *SMALL, "--out", "c", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and "| oracle @ lines_mod:Lines-v0 | 2 | 1.000 |" in out and "protocol of" not in out
