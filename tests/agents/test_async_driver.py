"""run_episodes(mode="async"): episodes that do not wait for each other.

Against a real server process on 127.0.0.1 (benchmarks/paced_server.py: Search-R1 played
by a fixed plan per question, replies that take as long as the tokens they hold), the
async driver plays every episode as the round driver does, and a short episode's next
request goes out while a long one's first is still being answered. No test here times
which mode is faster: benchmarks/rollout.py --sections async measures that.
"""

import sys
import threading
import time
from pathlib import Path

import pytest
from env_helpers import make_small
from lm_helpers import recording_lm

from searchgym.agents import EpisodeResult, Task, run_episodes
from searchgym.agents.base import Agent
from searchgym.agents.lm_agents import policy_agent
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.corpora.types import Retriever
from searchgym.envs import BatchCounts, ModelUser
from searchgym.error import BackendError, ConfigError
from searchgym.lm.http import OpenAILM
from searchgym.lm.testing import tiny_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from paced_server import plan, running  # noqa: E402

LENGTHS = (4, 64)


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory, tokenizer):
    folder = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer_folder):
    """The paced server, fast (1 ms a token), refusing prompts over 2000 tokens."""
    with running(tmp_path_factory.mktemp("paced"), tokenizer_folder, "--per-token", "0.001", "--lengths", *LENGTHS,
                 "--max-model-len", "2000") as server:
        yield server


def comparable(r: EpisodeResult):
    d = r.to_dict()
    d.pop("wall_time")
    return d


def search_r1(n, **kwargs):
    return [make_small("searchgym/SearchR1-v0", max_turns=4, **kwargs) for _ in range(n)]


def play(server, tokenizer, envs, tasks, **options):
    agent = policy_agent(envs[0], OpenAILM("paced", base_url=server.url, tokenizer=tokenizer), max_new_tokens=64)
    return run_episodes(envs, agent, tasks, keep_trajectories=True, **options)


def test_async_plays_every_episode_as_the_rounds_do(served, tokenizer):
    """A mixed workload (1 to 4 turns, 4 to 64 tokens a turn; episodes of 3+ turns outgrow
    the server's 2000 tokens): the same results, token records and outcomes per example;
    the round driver sends a round's turns in one request, the async driver one each."""
    envs = search_r1(3)
    tasks = [Task(ex.id, i) for i, ex in enumerate(envs[0].unwrapped.examples[:10])]
    served.clear()
    rounds = play(served, tokenizer, envs, tasks)
    batched = [len(r["questions"]) for r in served.requests()]
    served.clear()
    counts = BatchCounts()
    seen = []
    together = play(served, tokenizer, envs, tasks, mode="async", on_result=seen.append, batch_counts=counts, progress=True)
    assert [comparable(r) for r in together] == [comparable(r) for r in rounds]
    assert [r.trajectory.context_ids() for r in together] == [r.trajectory.context_ids() for r in rounds]
    assert sorted(r.example_id for r in seen) == sorted(t.example_id for t in tasks)
    # The workload is mixed, and its failures are outcomes of their own episodes.
    assert len({len(plan(r.question, LENGTHS)[1]) for r in together}) >= 3
    assert {r.outcome for r in together} == {"answered", "prompt_too_long"}
    assert all(r.error == "the agent's context no longer fits its model's context window; nothing was generated for this turn"
               for r in together if r.outcome == "prompt_too_long")
    assert max(batched) > 1 and {len(r["questions"]) for r in served.requests()} == {1}
    assert counts.search_requests == sum(r.num_searches for r in together) and counts.searches <= counts.search_requests


def overlaps(requests):
    """The most requests the server was answering at once."""
    events = sorted([(r["start"], 1) for r in requests] + [(r["end"], -1) for r in requests])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_concurrency_bounds_the_turns_in_flight(served, tokenizer):
    envs = search_r1(4)
    tasks = [Task(ex.id, i) for i, ex in enumerate(envs[0].unwrapped.examples[:8])]
    served.clear()
    one = play(served, tokenizer, envs, tasks, mode="async", concurrency=1)
    assert overlaps(served.requests()) == 1
    served.clear()
    two = play(served, tokenizer, envs, tasks, mode="async", concurrency=2)
    assert overlaps(served.requests()) <= 2
    assert [comparable(r) for r in one] == [comparable(r) for r in two]


def pick(examples, want):
    return next(ex for ex in examples if want(*plan(ex.question, LENGTHS)))


@pytest.mark.parametrize("mode", ["rounds", "async"])
def test_a_short_episode_does_not_wait_for_a_long_one(tmp_path, tokenizer, tokenizer_folder, mode):
    """A long first turn (56+ tokens at 30 ms a token) beside an episode whose first turn is
    short (12 tokens at most): in rounds the short one's second turn waits for the round;
    in async it goes out while the long turn is still being answered."""
    examples = make_small("searchgym/SearchR1-v0").unwrapped.examples
    short = pick(examples, lambda searches, lengths: searches >= 1 and lengths[0] <= 12)
    long = pick(examples, lambda searches, lengths: lengths[0] >= 56)
    with running(tmp_path, tokenizer_folder, "--per-token", "0.03", "--lengths", *LENGTHS) as server:
        out = play(server, tokenizer, search_r1(2), [Task(long.id, 0), Task(short.id, 1)], mode=mode)
        requests = server.requests()
    assert [r.outcome for r in out] == ["answered", "answered"]
    first_long = next(r for r in requests if long.question in r["questions"] and r["turns"][r["questions"].index(long.question)] == 0)
    second_short = next(r for r in requests if short.question in r["questions"] and r["turns"][r["questions"].index(short.question)] == 1)
    if mode == "rounds":
        assert second_short["start"] >= first_long["end"]
    else:
        assert second_short["start"] < first_long["end"]
        assert out[1].num_turns == len(plan(short.question, LENGTHS)[1])


class SlowRetriever(Retriever):
    """A retriever view that takes 50 ms a call and counts the queries of each."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.corpus, self.max_query_chars = inner.corpus, inner.max_query_chars

    def search(self, queries, k):
        self.calls.append(len(queries))
        time.sleep(0.05)
        return self.inner.search(queries, k)


class SlowGenerator(ModelUser):
    """s3's frozen generator through a model whose calls take 50 ms."""

    def __init__(self):
        def respond(prompt):
            time.sleep(0.05)
            lines = prompt.split("\n")
            return lines[2] if len(lines) > 2 else "nothing"

        self.lm = recording_lm(respond)

    def __call__(self, question, docs):
        return self.generate([question + "\n" + "\n".join(docs)], max_new_tokens=8)[0].text


def test_searches_and_env_model_calls_still_go_out_joined():
    """While a search or a model call runs, the ones that arrive wait and go out together;
    every query and prompt gets what it gets in rounds."""
    results = {}
    for mode in ("rounds", "async"):
        base = make_small("searchgym/S3-v0")
        retriever = SlowRetriever(base.unwrapped.retriever)
        generator = SlowGenerator()
        envs = [make_small("searchgym/S3-v0", retriever=retriever, generator=generator) for _ in range(8)]
        counts = BatchCounts()
        tasks = [Task(ex.id, i) for i, ex in enumerate(envs[0].unwrapped.examples[:16])]
        results[mode] = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks, batch_counts=counts, mode=mode)
        if mode == "async":
            # (a gym.make env's first reset searches alone, through its wrappers: not counted)
            assert max(retriever.calls) > 1 and counts.searches < counts.search_requests
            assert max(generator.lm.batches) > 1 and counts.calls == len(generator.lm.batches) < counts.requests
    assert [comparable(r) for r in results["async"]] == [comparable(r) for r in results["rounds"]]


class FailsOn(Agent):
    """The oracle, but the turns of one question fail as a backend error would."""

    def __init__(self, inner, example_id):
        self.inner, self.example_id = inner, example_id

    def act(self, observations, infos):
        if any(info["example_id"] == self.example_id for info in infos):
            raise BackendError("server at http://127.0.0.1:9 timed out after 3 attempts")
        return self.inner.act(observations, infos)


def exploding_generator(question, docs):
    if "founder" in question:
        raise RuntimeError("generator exploded")
    return "x"


def test_a_failure_ends_its_own_episode_as_in_rounds():
    envs = [make_small("searchgym/S3-v0", generator=exploding_generator) for _ in range(3)]
    tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:12]]
    out = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks, mode="async")
    failed = [r for r in out if "founder" in r.question]
    # The recipe's failure names it and quotes the frozen model's exception (a RecipeError).
    assert failed and all(r.outcome == "error" and r.error.startswith("RecipeError: Reward recipe 's3_gbr' (searchgym.rewards.recipes:S3GainBeyondRAG) raised in score() on example ") and "RuntimeError: generator exploded (at " in r.error for r in failed)
    assert all(r.outcome == "completed" for r in out if "founder" not in r.question)

    envs = [make_small("searchgym/SearchR1-v0") for _ in range(3)]
    tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:6]]
    agent = FailsOn(SynthWikiOracle.for_env(envs[0]), tasks[2].example_id)
    out = run_episodes(envs, agent, tasks, mode="async")
    assert [r.outcome for r in out] == ["answered"] * 2 + ["backend_error"] + ["answered"] * 3
    assert out[2].error == "server at http://127.0.0.1:9 timed out after 3 attempts" and out[2].prediction is None


def test_an_interrupt_stops_the_loop_at_once(tmp_path, tokenizer, tokenizer_folder):
    """Ctrl-C (here raised by on_result at the first result) leaves the loop while a long
    request is still being answered: no result is handed over after it, and the request's
    thread ends on its own."""
    examples = make_small("searchgym/SearchR1-v0").unwrapped.examples
    short = pick(examples, lambda searches, lengths: searches == 0 and lengths[0] <= 10)
    long = pick(examples, lambda searches, lengths: lengths[0] >= 56)
    seen = []

    def interrupt(result):
        seen.append(result.example_id)
        raise KeyboardInterrupt

    with running(tmp_path, tokenizer_folder, "--per-token", "0.05", "--lengths", *LENGTHS) as server:
        with pytest.raises(KeyboardInterrupt):
            play(server, tokenizer, search_r1(2), [Task(long.id, 0), Task(short.id, 1), Task(short.id, 2)], mode="async",
                 on_result=interrupt)
        answered = server.requests()
        assert seen == [short.id]
        assert all(long.question not in r["questions"] for r in answered)  # the long turn was still in flight
        deadline = time.monotonic() + 30
        while any(t.name.startswith("searchgym-turn") for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(t.name.startswith("searchgym-turn") for t in threading.enumerate())
    assert seen == [short.id]


def test_bad_modes_and_local_models_are_config_errors(tokenizer):
    from searchgym.lm.scripted import ScriptedLM

    envs = search_r1(1)
    oracle, tasks = SynthWikiOracle.for_env(envs[0]), [Task(envs[0].unwrapped.examples[0].id, 0)]
    with pytest.raises(ConfigError, match=r"^run_episodes expects mode to be one of 'rounds', 'async', got 'asynch'\.$"):
        run_episodes(envs, oracle, tasks, mode="asynch")
    with pytest.raises(ConfigError, match=r"^run_episodes got concurrency=4 with mode='rounds'; concurrency bounds the turns in flight of mode='async'\.$"):
        run_episodes(envs, oracle, tasks, concurrency=4)
    with pytest.raises(ConfigError, match=r"^run_episodes expects concurrency to be a positive integer, got 0\.$"):
        run_episodes(envs, oracle, tasks, mode="async", concurrency=0)
    local = policy_agent(envs[0], ScriptedLM(['<answer> x </answer>'], tokenizer))  # a local engine
    with pytest.raises(ConfigError, match=(
        r"^run_episodes\(mode='async'\) plays each episode's turn as a call of its own, for a model that serves concurrent requests "
        r"\(searchgym\.lm\.vllm_async\.AsyncVLLMLM, vLLM's async engine; searchgym\.lm\.http\.OpenAILM against a vLLM or "
        r"other OpenAI-compatible server\); EndToEndAgent's model is a "
        r"ScriptedLM, which generates one call at a time, so the episodes would wait in line\. Leave mode out \(mode='rounds' "
        r"batches every live episode's turn in one call\)\.$")):
        run_episodes(envs, local, tasks, mode="async")


def test_team_episodes_play_async_as_in_rounds():
    pytest.importorskip("pettingzoo")
    from searchgym.agents.team import run_team_episodes
    from searchgym.envs import multi_agent
    from searchgym.envs.protocols import Search
    from searchgym.envs.protocols.s3 import S3Protocol

    searcher = S3Protocol()
    policy = lambda o, i: searcher.write([Search("founder")]) if i["turn"] == 0 else "<search_complete>True</search_complete>"  # noqa: E731
    runs = {}
    for mode in ("rounds", "async"):
        envs = [multi_agent.env(("searcher",), corpus_options={"seed": 7, "num_passages": 400}, generator=exploding_generator)
                for _ in range(3)]
        tasks = [Task(ex.id, 0) for ex in envs[0].game.examples[:8]]
        runs[mode] = [comparable(r) for r in run_team_episodes(envs, {"searcher": policy}, tasks, mode=mode)]
    assert runs["async"] == runs["rounds"]
    assert {r["outcome"] for r in runs["async"]} == {"finished", "error"}
