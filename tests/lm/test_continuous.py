"""Continuous batching: generate calls from many threads share one decode loop, and each
call gets what it would get alone."""

import threading
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.lm import TransformersLM  # noqa: E402
from searchgym.lm.continuous import continuous_batching  # noqa: E402
from searchgym.lm.scripted import ScriptedLM  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402

PROMPTS = [[3 + k + j for j in range(n)] for k, n in enumerate((7, 12, 3, 20, 9, 15))]


@pytest.fixture(scope="module")
def models():
    model, tokenizer = tiny_causal_lm(seed=0), tiny_tokenizer()
    return TransformersLM(model, tokenizer, prefix_cache_mb=64), TransformersLM(model, tokenizer, prefix_cache_mb=0)


def conversation(lm, k, temperature, out):
    """Three turns, each extending the last: the prompt, the turn, two observation ids."""
    context = list(PROMPTS[k])
    for turn in range(3):
        g = lm.generate([context], max_new_tokens=4 + (k + turn) % 5, temperature=temperature, seed=100 * k + turn)[0]
        out.append(g)
        context = context + list(g.token_ids) + [50 + k, 60 + turn]
        time.sleep(0.005 * k)  # the threads drift apart: calls join a running batch


def in_threads(lm, temperature):
    outs = [[] for _ in PROMPTS]
    with continuous_batching() as batching:

        def body(k):
            with batching.entered():
                conversation(lm, k, temperature, outs[k])

        threads = [threading.Thread(target=body, args=(k,)) for k in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        (batcher,) = batching.batchers
    return outs, batcher


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_each_call_gets_what_it_gets_alone(models, temperature):
    lm, plain = models
    outs, batcher = in_threads(lm, temperature)
    for k in range(len(PROMPTS)):
        alone = []
        conversation(plain, k, temperature, alone)
        assert [(g.token_ids, g.text, g.finish_reason) for g in outs[k]] == [(g.token_ids, g.text, g.finish_reason) for g in alone]
        for a, b in zip(outs[k], alone):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    # 18 calls were served by fewer prefills and decode steps than calls made alone.
    assert batcher.peak > 1 and batcher.prefills < 18
    assert batcher.steps < sum(len(g.token_ids) for out in outs for g in out)


def test_a_call_with_several_prompts_and_one_too_long(models):
    lm, plain = models
    context = lm.model.config.max_position_embeddings
    prompts = [PROMPTS[0], [7] * context, PROMPTS[3]]
    with continuous_batching() as batching, batching.entered():
        got = lm.generate(prompts, max_new_tokens=6, temperature=0.8, seed=3)
    # The last prompt reuses 19 tokens cached by the conversations above (rounding apart,
    # the same computation).
    expected = plain.generate(prompts, max_new_tokens=6, temperature=0.8, seed=3)
    assert [(g.token_ids, g.text, g.finish_reason) for g in got] == [(g.token_ids, g.text, g.finish_reason) for g in expected]
    for a, b in zip(got, expected):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    assert got[1].finish_reason == "prompt_too_long"


def test_errors_reach_the_caller_and_other_backends_are_called_in_turn(models):
    lm, _ = models
    with continuous_batching() as batching, batching.entered():
        with pytest.raises(Exception, match="vocabulary size"):
            lm.generate([[10**7]], max_new_tokens=2)
        scripted = ScriptedLM(lambda prompt: "ok", tiny_tokenizer())
        assert scripted.generate(["a", "b"], max_new_tokens=2)[1].text == "ok"
        assert [b.lm for b in batching.batchers] == [lm]  # only transformers models get a decode loop
