"""TransformersLM's prefix cache: a multi-turn context encodes only its new tokens, gives
the generations of a full re-encoding, and is dropped when the weights change."""

import re
from contextlib import contextmanager

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


@contextmanager
def recording(lm, widths):
    """Append the shape ``(rows, columns)`` of every forward pass's input ids to ``widths``."""
    forward = lm.model.forward

    def record(*args, **kwargs):
        widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    lm.model.forward = record
    try:
        yield widths
    finally:
        del lm.model.forward


def converse(lm, widths=None):
    """Three turns of three conversations; each turn's prompt extends the last one."""
    contexts, turns = [list(c) for c in FIRST], []
    with recording(lm, [] if widths is None else widths):
        for turn in range(3):
            gens = lm.generate(contexts, max_new_tokens=5, temperature=0)
            turns.append(gens)
            if turn < 2:
                contexts = [c + list(g.token_ids) + obs for c, g, obs in zip(contexts, gens, OBSERVATIONS[turn])]
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
    assert cache.lookup([0, 0, 1]) is None and cache.lookup([4, 0, 1]).key == (4, 0)
    cache.store([9], [(torch.zeros(100), torch.zeros(100))])  # larger than the budget: not kept
    assert len(cache) == 3 and cache.lookup([9, 1]) is None
    # The longest stored proper prefix wins; the prompt itself is never a hit.
    cache.store([4, 0, 1], entry())
    assert cache.lookup([4, 0, 1, 2]).key == (4, 0, 1) and cache.lookup([4, 0, 1]).key == (4, 0)


def test_bad_budgets_raise():
    with pytest.raises(ConfigError, match=re.escape("TransformersLM expects prefix_cache_mb to be a number of MiB >= 0 (0 turns the prefix cache off), got -1.")):
        TransformersLM("tiny-random", prefix_cache_mb=-1)
    with pytest.raises(ConfigError, match=re.escape("PrefixCache expects max_bytes to be a positive integer, got 0.")):
        PrefixCache(0)
    assert TransformersLM("tiny-random", prefix_cache_mb=0).prefix_cache is None


def test_an_entry_that_only_begins_like_the_prompt_serves_its_beginning():
    cache = PrefixCache(max_bytes=1 << 20)
    template = list(range(100, 120))  # 20 tokens, more than PrefixCache.min_shared
    keys = torch.arange(30.0).reshape(1, 30, 1)
    cache.store(template + list(range(10)), [(keys, -keys)])
    hit = cache.lookup(template + [55, 56])
    assert (hit.length, hit.whole) == (20, False)
    k, v = hit.keys_values(0)
    assert torch.equal(k, keys[:, :20]) and torch.equal(v, -keys[:, :20])
    # Too short a shared beginning is no hit; a whole key is, however short.
    assert cache.lookup(template[:10] + [1, 2]) is None
    cache.store([100, 101], [(keys[:, :2], keys[:, :2])])
    short = cache.lookup([100, 101, 7])
    assert (short.key, short.length, short.whole) == ((100, 101), 2, True)
    # On equal length a whole key wins over the beginning of a longer one.
    cache.store(template, [(keys[:, :20], keys[:, :20])])
    tie = cache.lookup(template + [3])
    assert (tie.key, tie.whole) == (tuple(template), True)
    assert cache.stats.reused_tokens == 20 + 2 + 20


def test_prompts_sharing_a_template_encode_it_once():
    """Prompts encoded together that begin with the same 24 tokens: the template is
    encoded once and stored, each prompt then encodes only its own 3 to 6 tokens, and a
    later prompt with the same template reuses it too. Generations match a model
    without the cache."""
    plain, cached = pair()
    template = list(range(60, 84))
    prompts = [template + [k + 3] * (3 + k) for k in range(4)]
    with recording(cached, []) as widths:
        got = cached.generate(prompts, max_new_tokens=4, temperature=0)
        later = cached.generate([template + [99, 98]], max_new_tokens=4, temperature=0)
    expected = plain.generate(prompts + [template + [99, 98]], max_new_tokens=4, temperature=0)
    for a, b in zip(got + later, expected):
        assert (a.token_ids, a.text) == (b.token_ids, b.text)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    prefills = [w for w in widths if w[1] > 1]
    # The template (the shortest prompt but its last token is what all share: 24 tokens),
    # then the four prompts' own tokens, then the later prompt's 2.
    assert prefills == [(1, 24), (4, 6), (1, 2)]
    stats = cached.stats
    assert (stats.prefill_tokens, stats.prefill_padding) == (24 + (3 + 4 + 5 + 6) + 2, 4 * 6 - 18)


def test_prompts_of_very_different_lengths_are_encoded_in_groups():
    """Two long and two short prompts: encoded as two groups (no row padded by 90 tokens)
    whose caches are stacked for decoding; the generations are those of each prompt alone."""
    plain, cached = pair()
    prompts = [list(range(3, 103)), [5, 6] * 4, list(range(10, 105)), [8, 9, 10]]
    cached.generate([[1, 2, 3]], max_new_tokens=1, temperature=0)  # one pass tells the model's cache kind
    with recording(cached, []) as widths:
        got = cached.generate(prompts, max_new_tokens=5, temperature=0)
    assert [w for w in widths if w[1] > 1] == [(2, 100), (2, 8)]
    # Rows come back in the order given, each as generated alone.
    for a, p in zip(got, prompts):
        b = plain.generate([p], max_new_tokens=5, temperature=0)[0]
        assert (a.token_ids, a.text) == (b.token_ids, b.text)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    assert cached.stats.prefill_padding == 5 + 5
