"""vLLM's async engine in this process (AsyncVLLMLM) on this machine's CPU: VLLMLM's contract,
calls from several threads served side by side, and the async driver playing on it."""

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from env_helpers import make_small
from lm_helpers import PROMPTS, ascii_window, assert_same_generations, pushed_noise

pytest.importorskip("vllm")

from searchgym.agents import Task, run_episodes  # noqa: E402
from searchgym.agents.lm_agents import policy_agent  # noqa: E402
from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.registry import backend_class  # noqa: E402
from searchgym.lm.vllm_async import AsyncVLLMLM  # noqa: E402


@pytest.fixture(scope="module")
def engine():
    lm = AsyncVLLMLM("tiny-random", dtype="float32", max_model_len=512)
    yield lm
    lm.close()


def test_greedy_ids_logprobs_and_stops_match_transformers(engine, reference):
    ours = engine.generate(PROMPTS, max_new_tokens=12, temperature=0)
    assert_same_generations(ours, reference.generate(PROMPTS, max_new_tokens=12, temperature=0))
    stop = ascii_window(ours[0].text)
    (stopped,) = engine.generate(PROMPTS[:1], max_new_tokens=12, temperature=0, stop=[stop])
    (hf,) = reference.generate(PROMPTS[:1], max_new_tokens=12, temperature=0, stop=[stop])
    assert stopped.finish_reason == "stop" and stopped.text.endswith(stop) and (stopped.text, stopped.token_ids) == (hf.text, hf.token_ids)


def test_seeded_sampling_is_reproducible_alone_or_beside_other_calls(engine):
    a = engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=3)
    assert a == engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=3)
    assert a != engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=4)
    with ThreadPoolExecutor(3) as pool:  # each prompt its own call, from its own thread, all in flight together
        alone = list(pool.map(lambda i: engine.generate([PROMPTS[i]], max_new_tokens=10, temperature=0.8, top_p=0.9, seed=[3 + i])[0], range(3)))
    assert alone == a


def test_prompts_too_long_and_bad_ids_as_the_offline_engine(engine):
    out = engine.generate([[5 + i % 300 for i in range(600)], PROMPTS[0]], max_new_tokens=4, temperature=0)
    assert out[0].finish_reason == "prompt_too_long" and out[0].token_ids == () and len(out[1].token_ids) == 4
    with pytest.raises(ConfigError, match=r"^AsyncVLLMLM.generate expects token ids below the vocabulary size \d+, got id 100000 in prompt 0\.$"):
        engine.generate([[100000]])


def test_a_short_call_returns_while_a_long_one_is_still_decoding(engine):
    """Continuous batching across threads: the offline engine would finish the long call first."""
    with ThreadPoolExecutor(1) as pool:
        long = pool.submit(engine.generate, [PROMPTS[0]], max_new_tokens=480, temperature=0)
        while engine.engine.get_num_unfinished_requests() == 0 and not long.done():
            time.sleep(0.01)
        (short,) = engine.generate([PROMPTS[1]], max_new_tokens=4, temperature=0)
        assert len(short.token_ids) == 4
        assert not long.done()  # still decoding its 480 tokens when the 4-token call came back
        assert len(long.result()[0].token_ids) == 480


def test_ctrl_c_aborts_the_calls_requests_in_the_engine(engine):
    """A KeyboardInterrupt while waiting cancels the call's requests: the engine drops them
    (sooner than the same request takes to finish) and serves the next call."""
    # Python's own Ctrl-C handler, also where the runner was started with SIGINT ignored (a
    # background job, as CI may be): there os.kill(SIGINT) would do nothing.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _interrupt_a_call(engine)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt_a_call(engine):
    def interrupt_once_in_flight():
        while engine.engine.get_num_unfinished_requests() == 0:
            time.sleep(0.005)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=interrupt_once_in_flight)
    watcher.start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        engine.generate([PROMPTS[2]], max_new_tokens=480, temperature=0)
    watcher.join()
    while engine.engine.get_num_unfinished_requests():
        time.sleep(0.005)
    aborted = time.perf_counter() - start
    start = time.perf_counter()
    (whole,) = engine.generate([PROMPTS[2]], max_new_tokens=480, temperature=0)
    assert len(whole.token_ids) == 480 and aborted < time.perf_counter() - start


def test_the_async_driver_plays_on_it_as_the_rounds_do(engine):
    assert engine.concurrent and backend_class("vllm-async") is AsyncVLLMLM
    envs = [make_small("searchgym/SearchR1-v0", max_turns=3) for _ in range(3)]
    tasks = [Task(ex.id, i) for i, ex in enumerate(envs[0].unwrapped.examples[:6])]

    def play(mode):
        agent = policy_agent(envs[0], engine, max_new_tokens=24)
        return [(r.example_id, r.seed, r.prediction, r.outcome, r.num_turns, r.generated_tokens, r.reward)
                for r in sorted(run_episodes(envs, agent, tasks, mode=mode), key=lambda r: r.seed)]

    rounds = play("rounds")
    assert play("async") == rounds and sum(r[5] for r in rounds) > 0


def test_the_bench_takes_it_for_driver_async(engine, tmp_path):
    from searchgym.bench import BenchConfig, check_config, read_episodes, run_bench

    world = {"*": {"corpus_options": {"seed": 7, "num_passages": 400}}}
    check_config(BenchConfig(runs=[("SearchR1-v0", "lm")], model="tiny-random", backend="vllm-async", driver="async", env_options=world))
    config = BenchConfig(runs=[("SearchR1-v0", "lm")], model=engine, driver="async", concurrency=2, limit=3, num_envs=3,
                         max_new_tokens=16, env_options={"*": {**world["*"], "max_turns": 2}})
    result = run_bench(config, tmp_path, progress=False)
    assert result.rows[0]["n"] == 3 and len(read_episodes(tmp_path / "episodes.jsonl")) == 3


def test_pushed_weights_replace_the_engines_weights(engine, reference):
    with pushed_noise(engine, reference.model):
        assert_same_generations(engine.generate(PROMPTS, max_new_tokens=8, temperature=0), reference.generate(PROMPTS, max_new_tokens=8, temperature=0))
        assert engine.weight_version == 1


def test_bad_options_and_a_closed_engine_are_refused():
    with pytest.raises(ConfigError, match=r"^AsyncVLLMLM does not take in_process: vLLM's async engine always runs its core in a process"):
        AsyncVLLMLM("tiny-random", in_process=True)
    with pytest.raises(ConfigError, match=r"^AsyncVLLMLM passes its engine options to vLLM's AsyncEngineArgs, which refused them: .*max_num_seq"):
        AsyncVLLMLM("tiny-random", max_num_seq=4)
    lm = AsyncVLLMLM("tiny-random", dtype="float32", max_model_len=256)
    assert len(lm.generate(["Hello"], max_new_tokens=3, temperature=0)[0].token_ids) == 3
    lm.close()
    lm.close()  # twice is fine
    with pytest.raises(ConfigError, match=r"^AsyncVLLMLM was closed; load a new one to generate\.$"):
        lm.generate(["Hello"], max_new_tokens=3)
