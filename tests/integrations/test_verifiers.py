"""searchgym envs as verifiers 0.4.0 environments, run by verifiers' own ``vf-eval`` against an
OpenAI-compatible chat server on 127.0.0.1 (a thread of this test), in .venv-verifiers
(``make test-verifiers``). The same questions and the same decisions score as
``searchgym bench``; the reward components reach verifiers' traces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="verifiers lives in .venv-verifiers: make test-verifiers")

from integrations.test_parity_ecosystems import scripted_server  # noqa: E402

from searchgym.bench import BenchConfig, run_bench  # noqa: E402

WORLD = {"corpus_options": {"seed": 7, "num_passages": 400}}


def vf_eval(folder: Path, url: str, *args: str) -> list[dict]:
    """Run ``vf-eval searchgym-verifiers ARGS`` with the model ``player``; its episodes (traces.jsonl)."""
    command = [str(Path(sys.executable).with_name("vf-eval")), "searchgym-verifiers", *args, "--model", "player",
               "--client.base-url", url, "--output-dir", str(folder), "--push", "false", "--no-rich"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = folder.rglob("traces.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("env_id", ["SearchR1-v0", "R1Searcher-v0"])
def test_vf_eval_scores_the_same_questions_and_decisions_as_searchgym_bench(env_id, tmp_path):
    (tmp_path / "vf").mkdir()
    with scripted_server() as url:
        episodes = vf_eval(tmp_path / "vf", url, "--env.taskset.env-id", env_id, "--env.taskset.env-kwargs", json.dumps(WORLD),
                           "--env.taskset.action-format", "tools", "--select.limit", "4")
        bench = run_bench(BenchConfig(runs=[(env_id, "chat-tools")], model="player", backend="openai", backend_options={"base_url": url},
                                      env_options={"*": WORLD}, limit=4, num_envs=2), tmp_path / "bench", progress=False)
    (records,) = bench.episodes.values()
    by_id = {r["example_id"]: r for r in records}
    assert len(episodes) == 4 and {e["task"]["data"]["example_id"] for e in episodes} == set(by_id)
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        played = by_id[episode["task"]["data"]["example_id"]]
        rewards = trace["rewards"]
        assert sum(r["score"] * r["weight"] for r in rewards.values()) == pytest.approx(played["reward"])
        assert rewards["searchgym_return"] == {"score": pytest.approx(played["reward"]), "weight": 1.0}
        # Every reward component reaches verifiers' results (weight 0: beside the total, not in it).
        assert {k.removeprefix("searchgym/"): v["score"] for k, v in rewards.items() if k.startswith("searchgym/")} == pytest.approx(played["reward_components"])
        assert trace["metrics"]["em"] == pytest.approx(played["em"]) and trace["metrics"]["num_searches"] == played["num_searches"]
        assert trace["info"]["searchgym_episode"]["prediction"] == played["prediction"]
    assert all(by_id[e["task"]["data"]["example_id"]]["num_searches"] == 1 for e in episodes)  # the player searched, then answered


def test_the_taskset_loads_any_id_user_pieces_and_the_deep_research_game():
    import verifiers.v1 as vf

    assert vf.default_harness_id("searchgym-verifiers") == "searchgym-verifiers"
    assert vf.environment_class("searchgym-verifiers").__name__ == "SearchGymEnv"
    from searchgym.integrations.verifiers import SearchGymConfig, SearchGymTaskset

    # A user's recipe by module:attr (the built-in methods are built as a user's are).
    config = SearchGymConfig(env_id="SearchR1-v0", env_kwargs=json.dumps({**WORLD, "reward": "searchgym.methods.stepsearch:StepSearchReward"}))
    tasks = list(SearchGymTaskset(config).take(2))
    assert [t.data.env_kwargs["reward"] for t in tasks] == ["searchgym.methods.stepsearch:StepSearchReward"] * 2
    deep = list(SearchGymTaskset(SearchGymConfig(env_id="DeepResearch-v0")).take(1))
    assert deep[0].data.env_id == "DeepResearch-v0" and deep[0].data.prompt
    with pytest.raises(ValueError, match="env_kwargs expects a JSON object"):
        SearchGymConfig(env_kwargs="{not json")


def test_vf_eval_plays_the_deep_research_game_as_searchgym_bench_scores_it(tmp_path):
    """DeepResearch-v0 over the small long-document world (tests/deepresearch/small_world.py),
    played under ``vf-eval`` by a scripted server: search, open a page and find a text in one
    turn, then answer with citations and a confidence (right on one question, wrong on
    another). Each question's reward, components, EM, calls and prediction are those of
    ``searchgym bench --agents chat-tools`` against the same server."""
    from deepresearch.small_world import env_options
    from tool_parity import tool_call

    world = env_options(tmp_path)
    people = {"q0": ("Ilsa Marrowgate", "t0", "g0", "p0"), "q1": ("Ilsa Marrowgate", "t1", "g1", "p1")}  # q1's answer is wrong
    questions = {e.id: e.question for e in _deep_examples(world)}
    scripts = {questions[q]: [tool_call("search", query=questions[q]),
                              tool_call("open", doc_id=town, page=2) + "\n" + tool_call("find", doc_id=guild, pattern="founded"),
                              "Done.\n" + tool_call("answer", answer=answer, citations=[town, guild, person], confidence=80)]
               for q, (answer, town, guild, person) in people.items()}
    (tmp_path / "vf").mkdir()
    with scripted_server(scripts) as url:
        command = [str(Path(sys.executable).with_name("vf-eval")), "searchgym-verifiers", "--env.taskset.env-id", "DeepResearch-v0",
                   "--env.taskset.env-kwargs", json.dumps(world), "--select.include.ids", *people, "--model", "script",
                   "--client.base-url", url, "--output-dir", str(tmp_path / "vf"), "--push", "false", "--no-rich"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path / "vf")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        bench = run_bench(BenchConfig(runs=[("DeepResearch-v0", "chat-tools")], model="script", backend="openai",
                                      backend_options={"base_url": url}, env_options={"*": world}, limit=2), tmp_path / "bench", progress=False)
    (path,) = (tmp_path / "vf").rglob("traces.jsonl")
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    (records,) = bench.episodes.values()
    by_id = {r["example_id"]: r for r in records}
    assert sorted(e["task"]["data"]["example_id"] for e in episodes) == sorted(by_id) == sorted(people)
    for episode in episodes:
        assert episode["ok"], episode["errors"]
        (trace,) = episode["traces"]
        played = by_id[episode["task"]["data"]["example_id"]]
        rewards = trace["rewards"]
        assert sum(r["score"] * r["weight"] for r in rewards.values()) == pytest.approx(played["reward"])
        assert {k.removeprefix("searchgym/"): v["score"] for k, v in rewards.items() if k.startswith("searchgym/")} == pytest.approx(played["reward_components"])
        assert trace["metrics"]["em"] == pytest.approx(played["em"]) and trace["metrics"]["num_searches"] == played["num_searches"] == 1
        assert trace["info"]["searchgym_episode"]["prediction"] == played["prediction"] == "Ilsa Marrowgate"
    right, wrong = by_id["q0"], by_id["q1"]
    assert right["reward_components"]["correct"] == 1.0 and right["reward_components"]["citation_precision"] == 1.0
    assert wrong["reward_components"]["correct"] == 0.0 and right["reward"] > wrong["reward"]


def _deep_examples(world: dict) -> list:
    import gymnasium as gym

    return list(gym.make("searchgym/DeepResearch-v0", **world).unwrapped.examples)
