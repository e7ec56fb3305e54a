"""GrowingLayer: appends in place, and holds what a DynamicLayer holds through every
operation the decode loops apply to a cache."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer  # noqa: E402

from searchgym.lm.kv_cache import GrowingLayer, full_attention_layer, grow_in_place  # noqa: E402


def _pair(batch=3, length=10, seed=0):
    """A DynamicLayer and a GrowingLayer holding the same first entries, and a maker of
    random entries."""
    gen = torch.Generator().manual_seed(seed)
    kv = lambda n, b: (torch.randn(b, 2, n, 4, generator=gen), torch.randn(b, 2, n, 4, generator=gen))  # noqa: E731
    plain, growing = DynamicLayer(), DynamicLayer()
    first = kv(length, batch)
    plain.update(*first)
    growing.update(*first)
    growing.__class__ = GrowingLayer
    return plain, growing, kv


def _same(plain, growing):
    return torch.equal(plain.keys, growing.keys) and torch.equal(plain.values, growing.values)


def test_appends_rows_leaving_and_left_crops_stay_in_one_buffer():
    plain, growing, kv = _pair()
    buffers = []
    rows = 3
    for step in range(80):
        k, v = kv(1, rows)
        a, b = plain.update(k, v), growing.update(k, v)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        assert b[0] is growing.keys and growing.keys.shape[-2] == plain.keys.shape[-2]
        buffers.append(growing._buffers[0].untyped_storage().data_ptr())
        if step == 30:  # the middle row leaves the batch: the last one moves up in place
            index = torch.tensor([0, 2])
            plain.batch_select_indices(index)
            growing.batch_select_indices(index)
            rows = 2
            assert _same(plain, growing)
        if step == 50:  # the first 5 columns became padding in every row
            plain.keys, plain.values = plain.keys[..., 5:, :], plain.values[..., 5:, :]
            growing.crop_left(5)
            assert _same(plain, growing)
    # 10 + 80 positions, 5 cropped: the first buffer (11 + 64 positions) is full after
    # 65 appends whatever was selected or cropped; the next buffer holds the rest.
    assert len(set(buffers)) == 2 and buffers.index(buffers[-1]) == 65
    assert plain.get_seq_length() == growing.get_seq_length() == 85


def test_unordered_selection_and_replaced_views_fall_back_to_copies():
    plain, growing, kv = _pair()
    for _ in range(3):
        k, v = kv(1, 3)
        plain.update(k, v)
        growing.update(k, v)
    index = torch.tensor([2, 0])  # a reordering cannot move rows in place
    plain.batch_select_indices(index)
    growing.batch_select_indices(index)
    assert _same(plain, growing) and growing._filled() is None
    k, v = kv(1, 2)
    plain.update(k, v)
    growing.update(k, v)  # copies into a new buffer, then appends in place again
    assert _same(plain, growing) and growing._filled() is not None
    growing.keys = growing.keys.clone()  # replaced from outside: no longer its view
    assert growing._filled() is None
    growing.crop_left(1)
    plain.keys, plain.values = plain.keys[..., 1:, :], plain.values[..., 1:, :]
    assert _same(plain, growing)


def test_grow_in_place_converts_only_full_attention_layers():
    cache = DynamicCache(ddp_cache_data=[(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))] * 2)
    cache.layers.append(DynamicSlidingWindowLayer(sliding_window=4))
    grow_in_place(cache)
    assert [type(layer) for layer in cache.layers] == [GrowingLayer, GrowingLayer, DynamicSlidingWindowLayer]
    assert [full_attention_layer(layer) for layer in cache.layers] == [True, True, False]


def test_concat_rows_writes_once_into_the_buffers_the_next_steps_append_to():
    from searchgym.lm.kv_cache import concat_rows, pad_left

    gen = torch.Generator().manual_seed(1)
    kv = lambda b, n: (torch.randn(b, 2, n, 4, generator=gen), torch.randn(b, 2, n, 4, generator=gen))  # noqa: E731
    widths, sizes = (7, 4, 9), (2, 1, 3)
    parts = []
    for width, size in zip(widths, sizes):
        cache = DynamicCache(ddp_cache_data=[kv(size, width) for _ in range(2)])
        mask = torch.ones(size, width, dtype=torch.long)
        mask[0, :2] = 0  # some left padding of the part's own
        parts.append((cache, mask))
    stacked = [[pad_left(layer.keys, 9) for cache, _ in parts for layer in [cache.layers[i]]] for i in range(2)]
    stacked_values = [[pad_left(layer.values, 9) for cache, _ in parts for layer in [cache.layers[i]]] for i in range(2)]
    order = torch.tensor([5, 0, 3, 1, 4, 2])
    expected = [(torch.cat(k).index_select(0, order), torch.cat(v).index_select(0, order)) for k, v in zip(stacked, stacked_values)]
    expected_mask = torch.cat([pad_left(mask, 9) for _, mask in parts]).index_select(0, order)
    cache, mask = concat_rows(parts, order)
    assert torch.equal(mask, expected_mask)
    for layer, (keys, values) in zip(cache.layers, expected):
        assert type(layer) is GrowingLayer and torch.equal(layer.keys, keys) and torch.equal(layer.values, values)
        buffer = layer._buffers[0].data_ptr()
        k, v = kv(6, 1)
        layer.update(k, v)  # the first decode step appends in place
        assert layer._buffers[0].data_ptr() == buffer and torch.equal(layer.keys[..., -1:, :], k)


@pytest.mark.parametrize("cached", [False, True])
def test_a_batch_prefill_writes_into_buffers_the_decode_steps_append_to(cached):
    from searchgym.lm import TransformersLM
    from searchgym.lm.base import SamplingParams
    from searchgym.lm.hf import Decoding
    from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer

    lm = TransformersLM(tiny_causal_lm(seed=0), tiny_tokenizer(), device="cpu")
    prompts = [list(range(5, 40)), list(range(50, 77))]
    params = SamplingParams(max_new_tokens=4, temperature=0, top_p=1.0, stop=(), seed=None)
    if cached:  # the prefill reuses each prompt's first 20 tokens from the prefix cache
        lm.generate([p[:20] for p in prompts], max_new_tokens=1, temperature=0)
    seqs = [Decoding(p, params, 4) for p in prompts]
    with torch.inference_mode():
        logits, past, mask, positions = lm._prefill(seqs, lm._usable_cache())
        assert (seqs[0].hit is not None) is cached
        width = mask.shape[1]
        buffers = []
        for layer in past.layers:
            assert type(layer) is GrowingLayer and layer.keys.shape[-2] == width
            assert layer._filled() is not None and layer._buffers[0].shape[-2] >= width + GrowingLayer.reserve
            buffers.append(layer._buffers[0].data_ptr())
        _, past, mask, _ = lm._decode_step(logits.argmax(-1), past, mask, positions)
    assert [layer._buffers[0].data_ptr() for layer in past.layers] == buffers
    assert all(layer.keys.shape[-2] == width + 1 for layer in past.layers)
