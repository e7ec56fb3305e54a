"""GrowingLayer: appends in place, and holds what a DynamicLayer holds through every
operation the decode loops apply to a cache."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer  # noqa: E402

from searchgym.lm.kv_cache import GrowingLayer, full_attention_layer, grow_in_place  # noqa: E402


def test_appends_write_into_one_buffer_and_match_a_dynamic_layer():
    gen = torch.Generator().manual_seed(0)
    plain, growing = DynamicLayer(), DynamicLayer()
    kv = lambda n, b=3: (torch.randn(b, 2, n, 4, generator=gen), torch.randn(b, 2, n, 4, generator=gen))  # noqa: E731
    first = kv(10)
    plain.update(*first)
    growing.update(*first)
    growing.__class__ = GrowingLayer
    buffers = set()
    for step in range(80):
        k, v = kv(1)
        a, b = plain.update(k, v), growing.update(k, v)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        assert b[0] is growing.keys and growing.keys.shape[-2] == 11 + step
        buffers.add(growing._buffers[0].data_ptr())
        if step == 40:  # a row leaves the batch: the next update copies into a new buffer
            index = torch.tensor([0, 2])
            plain.batch_select_indices(index)
            growing.batch_select_indices(index)
            kv = lambda n, b=2: (torch.randn(b, 2, n, 4, generator=gen), torch.randn(b, 2, n, 4, generator=gen))  # noqa: E731
    # 10 + 80 positions: first buffer 11 + 64 positions, then one after the row left.
    assert len(buffers) == 2
    assert plain.get_seq_length() == growing.get_seq_length() == 90


def test_grow_in_place_converts_only_full_attention_layers():
    cache = DynamicCache(ddp_cache_data=[(torch.zeros(1, 1, 2, 4), torch.zeros(1, 1, 2, 4))] * 2)
    cache.layers.append(DynamicSlidingWindowLayer(sliding_window=4))
    grow_in_place(cache)
    assert [type(layer) for layer in cache.layers] == [GrowingLayer, GrowingLayer, DynamicSlidingWindowLayer]
    assert [full_attention_layer(layer) for layer in cache.layers] == [True, True, False]
