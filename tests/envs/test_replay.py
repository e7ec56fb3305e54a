"""Tool results recorded once and replayed byte for byte (record=, replay=, --record, --replay)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings

import gymnasium as gym
import pytest

import searchgym  # noqa: F401 -- registers the ids
from searchgym.corpora.http import HTTPRetriever
from searchgym.envs.access import search_env
from searchgym.envs.components.replay import RECORD_FILE, ReplayMissError, ToolRecord, engine_identity, open_record
from searchgym.error import ConfigError

WORLD = {"corpus": "deepwiki", "corpus_options": {"num_documents": 200}}


def call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def play(env, index=0):
    """A browse episode: a search, an open and a find of its first hit, a wrong answer; every step's output."""
    obs, info = env.reset(seed=0, options={"example_index": index})
    steps = [(obs, info["question"])]
    obs, reward, *_, info = env.step(call("search", query=info["question"]))
    doc = info["retrieved_ids"][0]
    steps.append((obs, reward, info["retrieved_ids"], info["retrieved_scores"]))
    for action in (call("open", doc_id=doc, page=2), call("find", doc_id=doc, pattern="born in"),
                   call("answer", answer="Nobody", citations=[doc], confidence=20)):
        obs, reward, terminated, truncated, info = env.step(action)
        steps.append((obs, reward, terminated, info.get("reward_components")))
    return steps


def make(**options):
    return gym.make("searchgym/DeepResearch-v0", **WORLD, **options)


def test_a_replay_is_byte_for_byte_the_recorded_run_without_the_live_tools(tmp_path):
    live = [play(make(), i) for i in range(3)]
    recorded = [play(make(record=tmp_path / "rec"), i) for i in range(3)]
    assert recorded == live
    lines = [json.loads(line) for line in (tmp_path / "rec" / RECORD_FILE).read_text().splitlines()]
    assert {line["tool"] for line in lines} == {"search", "open", "find"} and len(lines) == 9
    env = make(replay=tmp_path / "rec")

    class NoEngine:  # the replay never asks the live engine (the env's shared BM25 stays untouched)
        def search(self, queries, k):
            raise AssertionError("a replay searched the live engine")

    search_env(env).game.retriever.engine = NoEngine()
    search_env(env).protocol.store.page = lambda *a: (_ for _ in ()).throw(AssertionError("a replay read a page"))
    assert [play(env, i) for i in range(3)] == live


def test_a_call_the_record_lacks_is_refused_by_name_or_passed_through(tmp_path):
    play(make(record=tmp_path / "rec"), 0)
    env = make(replay=tmp_path / "rec")
    env.reset(seed=0, options={"example_index": 0})
    with pytest.raises(ReplayMissError) as e:
        env.step(call("search", query="a query never recorded"))
    assert str(e.value).startswith(f"The replayed record {str(tmp_path / 'rec')!r} holds no search call with arguments "
                                   '{"query": "a query never recorded", "k": 5}')
    assert "replay_misses='pass'" in str(e.value)
    del e  # (its traceback holds the abandoned turn, which is undone when let go, as any turn that raised)
    assert search_env(env).game.turn == 0
    env = make(replay=tmp_path / "rec", replay_misses="pass")
    env.reset(seed=0, options={"example_index": 0})
    obs, *_, info = env.step(call("search", query="a query never recorded"))
    assert info["num_calls"] == 1 and obs.startswith("[")
    assert len((tmp_path / "rec" / RECORD_FILE).read_text().splitlines()) == 3  # nothing recorded under replay


def test_a_record_moves_to_another_folder_and_process(tmp_path):
    play(make(record=tmp_path / "rec"), 1)
    moved = shutil.copytree(tmp_path / "rec", tmp_path / "elsewhere" / "moved")
    code = (
        "import json, sys, gymnasium as gym, searchgym\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from test_replay import play, WORLD\n"
        "env = gym.make('searchgym/DeepResearch-v0', **WORLD, replay=sys.argv[1])\n"
        "print(json.dumps(play(env, 1)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(moved), str(tmp_path.parent / "x")], capture_output=True, text=True,
                         cwd=tmp_path / "elsewhere", env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).parent)},
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == json.loads(json.dumps(play(make(), 1)))


def test_the_record_is_bounded_and_keeps_no_secret(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        play(make(record=ToolRecord(tmp_path / "small", max_bytes=4000)), 0)
    assert (tmp_path / "small" / RECORD_FILE).stat().st_size <= 4000
    assert sum("reached max_bytes (4,000)" in str(w.message) for w in caught) == 1
    identity = engine_identity(HTTPRetriever("http://127.0.0.1:9/SECRETTOKEN/retrieve"))
    assert "SECRETTOKEN" not in json.dumps(identity) and "***" in identity["url"]


def test_bad_options_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="SearchEnv expects record= or replay=, not both"):
        open_record(tmp_path / "a", tmp_path / "b")
    with pytest.raises(ConfigError, match=r"^ToolRecord cannot replay .* it holds no tools.jsonl; record a run into it first"):
        make(replay=tmp_path / "nothing")
    with pytest.raises(ConfigError, match="SearchEnv expects replay_misses to be one of refuse, pass, got 'ignore'."):
        make(replay=tmp_path / "nothing", replay_misses="ignore")


def test_searchr1_tags_replay_too(tmp_path):
    def run(**options):
        env = gym.make("searchgym/SearchR1-v0", **options)
        obs, info = env.reset(seed=3)
        out = [obs]
        for action in ("<search> founded </search>", "<search> river city </search>", "<answer> x </answer>"):
            out.append(env.step(action)[:2])
        return out

    assert run(record=tmp_path / "r") == run() == run(replay=tmp_path / "r")


def test_a_bench_rerun_under_replay_gives_the_same_table(tmp_path):
    from searchgym.cli import main

    def bench(out, *flags):
        assert main(["bench", "--envs", "DeepResearch-v0", "SearchR1-v0", "--agents", "oracle", "random", "--limit", "3",
                     "--out", str(tmp_path / out), *flags]) == 0
        rows = json.loads((tmp_path / out / "summary.json").read_text())["runs"]
        return [{k: v for k, v in row.items() if k not in ("seconds_per_episode",)} for row in rows]

    recorded = bench("recorded", "--record", str(tmp_path / "tools"))
    assert bench("replayed", "--replay", str(tmp_path / "tools")) == recorded
    assert bench("live") == recorded
