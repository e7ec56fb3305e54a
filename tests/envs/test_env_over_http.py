"""The env over HTTP is the env in-process: the hostile-string suite of test_safety played
through a real `searchgym serve` process on 127.0.0.1 gives the same observations, rewards and
info; long queries are cut the same way on both sides; a step that fails on the server is
undone."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from env_helpers import ENV_IDS, actions, make_small, search_turn
from tool_helpers import tool_actions
from searchgym.error import BackendError

ROOT = Path(__file__).resolve().parents[2]


def start_server(*args: str, port: int | None = None):
    if port is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    argv = [str(Path(sys.executable).with_name("searchgym")), "serve", "--corpus", "synthwiki", "--corpus-option", "seed=7",
            "--corpus-option", "num_passages=400", "--port", str(port), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})  # this checkout's searchgym
    if not proc.stdout.readline():
        raise RuntimeError(proc.stderr.read()[-2000:])
    return proc, f"http://127.0.0.1:{port}/retrieve"


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)


@pytest.fixture(scope="module")
def url():
    proc, url = start_server()  # the default limits: queries of up to 2,048 characters
    yield url
    stop(proc)


@pytest.fixture(scope="module")
def pairs(url):
    return {env_id: (make_small(env_id, max_observation_chars=3000), make_small(env_id, max_observation_chars=3000, retriever=url))
            for env_id in ENV_IDS}


def same(info_local, info_remote):
    drop = ("wall_time",)
    return {k: v for k, v in info_local.items() if k not in drop} == {k: v for k, v in info_remote.items() if k not in drop}


ODD = ["", "   ", "<search></search>", "<search>   </search>", "<search>unclosed", "<search><search>nested</search></search>",
       "<answer>ünïcödé 北京 🚀</answer>", "\x00\x01\ud800", "</search>" * 50, "<query>" + "[" * 1000 + "</query>",
       '<query>{"query": null}</query>', "<search>" + "[" * 1000 + "</search>"]
QUERIES = ["\ud800", "born \udfff city", "\x00 river", "a" * 3000, "born city " * 400, "🚀 harbour " * 300, "x" * 8100]


def play_both(local, remote, turns, seed=1):
    obs_l, info_l = local.reset(seed=seed)
    obs_r, info_r = remote.reset(seed=seed)
    assert obs_l == obs_r and same(info_l, info_r)
    for action in turns:
        step_l = local.step(action)
        step_r = remote.step(action)
        assert step_l[:4] == step_r[:4] and same(step_l[4], step_r[4]), repr(action)[:80]
        if step_l[2] or step_l[3]:
            break


def test_odd_actions_and_hostile_queries_play_the_same_over_http(env_id, pairs):
    local, remote = pairs[env_id]
    for action in ODD:
        play_both(local, remote, [action])
    for query in QUERIES:
        play_both(local, remote, [search_turn(local, query)])
        if len(query) > 2048:
            assert local.step(search_turn(local, query))[4]["query_truncated"] is True


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turns=st.lists(actions, min_size=1, max_size=4))
def test_fuzzed_turns_play_the_same_over_http(env_id, pairs, turns):
    local, remote = pairs[env_id]
    play_both(local, remote, turns)


@pytest.fixture(scope="module")
def tool_pairs(url):
    options = {"max_observation_chars": 3000, "action_format": "tools"}
    return {env_id: (make_small(env_id, **options), make_small(env_id, retriever=url, **options)) for env_id in ENV_IDS}


def test_hostile_queries_as_parallel_tool_calls_play_the_same_over_http(env_id, tool_pairs):
    local, remote = tool_pairs[env_id]
    calls = [{"function": {"name": "search", "arguments": {"query": q}}} for q in QUERIES]
    for batch in (calls[:4], calls[4:], calls[::2]):  # each turn's searches go to the server as one batch
        play_both(local, remote, [{"role": "assistant", "content": "", "tool_calls": batch}])
    for action in ODD:
        play_both(local, remote, [action])


@pytest.mark.parametrize("env_id", ENV_IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(turns=st.lists(tool_actions, min_size=1, max_size=3))
def test_fuzzed_tool_turns_play_the_same_over_http(env_id, tool_pairs, turns):
    local, remote = tool_pairs[env_id]
    play_both(local, remote, turns)


def test_a_server_limit_below_the_envs_is_read_from_info_and_cut_the_same_way():
    proc, url = start_server("--max-query-chars", "100")
    try:
        local = make_small("searchgym/SearchR1-v0", max_query_chars=100)
        remote = make_small("searchgym/SearchR1-v0", retriever=url)  # its own limit is 2,048: the server's 100 is read
        assert remote.unwrapped.retriever.max_query_chars == 100
        query = "harbour city river " * 20
        play_both(local, remote, [search_turn(local, query), search_turn(local, "\ud800" * 150)])
        remote.reset(seed=1)
        assert remote.step(search_turn(remote, query))[4]["query_truncated"] is True
    finally:
        stop(proc)


def test_a_step_that_fails_on_the_server_is_undone_and_can_be_played_again():
    proc, url = start_server()
    port = int(url.split(":")[2].split("/")[0])
    local = make_small("searchgym/S3-v0")
    remote = make_small("searchgym/S3-v0", retriever=url, retriever_options={"retries": 0})
    turns = [search_turn(local, "born city"), "<important_info>[1, 2]</important_info>" + search_turn(local, "river")]
    for env in (local, remote):
        env.reset(seed=1)
        env.step(turns[0])
    stop(proc)
    before = (remote.unwrapped.game.turn, remote.unwrapped.game.num_searches, [p.id for p in remote.unwrapped.game.selected],
              remote.unwrapped.transcript)
    with pytest.raises(BackendError, match=r"unreachable after 1 tries"):
        remote.step(turns[1])  # selects, then searches: the server is down
    assert (remote.unwrapped.game.turn, remote.unwrapped.game.num_searches, [p.id for p in remote.unwrapped.game.selected],
            remote.unwrapped.transcript) == before
    proc, _ = start_server(port=port)
    try:
        assert remote.step(turns[1])[:4] == local.step(turns[1])[:4]  # the same turn, played once
        assert remote.unwrapped.game.turn == local.unwrapped.game.turn == 2
        assert [p.id for p in remote.unwrapped.game.selected] == [p.id for p in local.unwrapped.game.selected]
    finally:
        stop(proc)
