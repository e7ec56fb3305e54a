"""The grouped decode attention: same generations as SDPA, and only decode steps change."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.lm import TransformersLM  # noqa: E402
from searchgym.lm.attention import NAME, use_grouped_decode_attention  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402

PROMPTS = [[5, 6, 7], list(range(10, 40)), [90] * 12, [3, 4]]  # ragged: padded batches


def test_generations_equal_sdpa_and_full_passes_are_unchanged():
    sdpa = TransformersLM(tiny_causal_lm(seed=1), tiny_tokenizer(), prefix_cache_mb=0, grouped_decode_attention=False)
    grouped = TransformersLM(tiny_causal_lm(seed=1), tiny_tokenizer(), prefix_cache_mb=0)
    assert sdpa.model.config._attn_implementation == "sdpa" and grouped.model.config._attn_implementation == NAME
    assert grouped.model.config.num_key_value_heads < grouped.model.config.num_attention_heads  # grouped heads
    for temperature in (0.0, 0.9):
        a = sdpa.generate(PROMPTS, max_new_tokens=12, temperature=temperature, seed=4)
        b = grouped.generate(PROMPTS, max_new_tokens=12, temperature=temperature, seed=4)
        assert [g.token_ids for g in a] == [g.token_ids for g in b]
        for x, y in zip(a, b):
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4)
    # A forward pass over many positions (prefill, training) still runs SDPA: identical logits.
    ids = torch.tensor([PROMPTS[1]])
    with torch.no_grad():
        assert torch.equal(sdpa.model(ids).logits, grouped.model(ids).logits)


def test_other_attention_implementations_are_left_alone():
    model = tiny_causal_lm()
    model.set_attn_implementation("eager")
    assert use_grouped_decode_attention(model) is False and model.config._attn_implementation == "eager"
