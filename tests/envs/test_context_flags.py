"""The context policies from the command line (bench), and the adapters that cannot carry
several records per episode refuse them by name."""

from __future__ import annotations

import json

import pytest

from searchgym.agents.driver import EpisodeResult
from searchgym.agents.trajectory import Trajectory
from searchgym.cli import main
from searchgym.error import ConfigError


def test_bench_takes_context_flags_and_their_rewrites_reach_the_records(tmp_path):
    out = tmp_path / "bench"
    assert main(["bench", "--envs", "DeepResearch-v0", "--agents", "random", "--limit", "2", "--out", str(out),
                 "--context", "archive", "--context-option", "keep_last=1",
                 "--env-option", "max_calls=12", "--env-option", "max_turns=13"]) == 0
    config = json.loads((out / "config.json").read_text())
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    contexts = [t.get("context") for r in records for t in r["turns"] if t.get("context")]
    assert contexts and all(c["policy"] == "archive" for c in contexts)


def test_bench_refuses_a_context_given_twice(tmp_path, capsys):
    code = main(["bench", "--envs", "DeepResearch-v0", "--agents", "random", "--limit", "1", "--out", str(tmp_path / "b"),
                 "--context", "archive", "--env-options", '{"context": "keep"}'])
    assert code == 2
    assert capsys.readouterr().err.strip().endswith(
        "searchgym bench got the env option 'context' from both --env-options and --context; give it once.")


def test_trl_refuses_an_episode_of_several_records():
    from searchgym.integrations.trl import rollout_output

    first = Trajectory((1, 2))
    first.add_generated((3, 4), (0.0, 0.0), "stop")
    second = first.restarted((5, 6))
    second.add_generated((7,), (0.0,), "stop")
    result = EpisodeResult("q", 0, "Q", ["a"], "a", 1.0, {}, 1.0, 1.0, 1.0, 1.0, 2, 0, 0, 10, 3, 0.1, "answered", trajectory=second)
    with pytest.raises(ConfigError, match=r"^EnvRollout got an episode whose context was rewritten .* 2 token records"):
        rollout_output([result], eos_id=0)
