"""TransformersLM's prefix cache: a multi-turn context encodes only its new tokens, gives
the generations of a full re-encoding, and is dropped when the weights change."""

import re

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from searchgym.error import ConfigError  # noqa: E402
from searchgym.lm import TransformersLM  # noqa: E402
from searchgym.lm.prefix_cache import PrefixCache  # noqa: E402
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer  # noqa: E402

# Per turn, the observation appended to each of three conversations (ragged lengths).
OBSERVATIONS = [[[11, 12, 13], [40] * 9, [77]], [[5, 6, 7, 8], [90, 91], [33] * 6]]
FIRST = [[3, 4, 5, 6, 7, 8, 9], [20, 21], list(range(100, 130))]


def pair():
    model, tokenizer = tiny_causal_lm(seed=0), tiny_tokenizer()
    return TransformersLM(model, tokenizer, device="cpu", prefix_cache_mb=0), TransformersLM(model, tokenizer, device="cpu", prefix_cache_mb=16)


def converse(lm, widths=None):
    """Three turns of three conversations; each turn's prompt extends the last one."""
    contexts, turns = [list(c) for c in FIRST], []
    forward = lm.model.forward

    def recording(*args, **kwargs):
        if widths is not None:
            widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    lm.model.forward = recording
    try:
        for turn in range(3):
            gens = lm.generate(contexts, max_new_tokens=5, temperature=0)
            turns.append(gens)
            if turn < 2:
                contexts = [c + list(g.token_ids) + obs for c, g, obs in zip(contexts, gens, OBSERVATIONS[turn])]
    finally:
        del lm.model.forward
    return turns


def test_later_turns_encode_only_new_tokens_and_generate_the_same():
    plain, cached = pair()
    widths: list[tuple[int, int]] = []
    expected, got = converse(plain), converse(cached, widths)
    for a_turn, b_turn in zip(expected, got):
        for a, b in zip(a_turn, b_turn):
            assert (a.text, a.token_ids, a.finish_reason) == (b.text, b.token_ids, b.finish_reason)
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    # Prefill calls are those with more than one input column: turn 1 encodes the whole
    # prompts (30 tokens at most), turns 2 and 3 only the last sampled token plus the
    # observation (at most 1 + 9 and 1 + 6 tokens).
    prefills = [w for w in widths if w[1] > 1]
    assert prefills == [(3, 30), (3, 10), (3, 7)]
    stats = cached.prefix_cache.stats
    assert (stats.lookups, stats.hits) == (9, 6)
    # Each turn's hit covers the previous context and its generation but the last token.
    assert stats.reused_tokens == sum(len(c) + 4 for c in FIRST) + sum(len(c) + 4 + len(o) + 5 for c, o in zip(FIRST, OBSERVATIONS[0]))
    # A superseded entry is dropped: one entry per conversation remains.
    assert len(cached.prefix_cache) == 3


def test_an_optimizer_step_drops_the_cache():
    plain, cached = pair()
    converse(cached)
    assert len(cached.prefix_cache) == 3
    optimizer = torch.optim.SGD(cached.model.parameters(), lr=0.5)
    loss = cached.model(torch.tensor([FIRST[0]])).logits.float().pow(2).mean()
    loss.backward()
    optimizer.step()
    # Same model object, new weights: the cached keys and values are stale and unused.
    after, reference = converse(cached), converse(plain)
    assert cached.prefix_cache.stats.invalidations == 1
    assert [[g.token_ids for g in t] for t in after] == [[g.token_ids for g in t] for t in reference]


def test_budget_keeps_the_most_recent_entries():
    cache = PrefixCache(max_bytes=3 * 40)  # three entries: one layer, 5 + 5 float32 values
    entry = lambda: [(torch.zeros(1, 5, 1), torch.zeros(1, 5, 1))]  # noqa: E731
    for key in range(5):
        cache.store([key, 0], entry())
    assert len(cache) == 3 and cache.bytes == 120 and cache.stats.evictions == 2
    assert cache.lookup([0, 0, 1]) is None and cache.lookup([4, 0, 1])[0] == (4, 0)
    cache.store([9], [(torch.zeros(100), torch.zeros(100))])  # larger than the budget: not kept
    assert len(cache) == 3 and cache.lookup([9, 1]) is None
    # The longest stored proper prefix wins; the prompt itself is never a hit.
    cache.store([4, 0, 1], entry())
    assert cache.lookup([4, 0, 1, 2])[0] == (4, 0, 1) and cache.lookup([4, 0, 1])[0] == (4, 0)


def test_bad_budgets_raise():
    with pytest.raises(ConfigError, match=re.escape("TransformersLM expects prefix_cache_mb to be a number of MiB >= 0 (0 turns the prefix cache off), got -1.")):
        TransformersLM("tiny-random", prefix_cache_mb=-1)
    with pytest.raises(ConfigError, match=re.escape("PrefixCache expects max_bytes to be a positive integer, got 0.")):
        PrefixCache(0)
    assert TransformersLM("tiny-random", prefix_cache_mb=0).prefix_cache is None
