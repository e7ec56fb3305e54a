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
