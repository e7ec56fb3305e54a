"""Decode-step attention that reads grouped key/value heads in place.

With a padding mask, transformers' SDPA path expands a grouped-query model's key/value
heads to one per query head (``repeat_kv``) on every forward pass: at each decode step
the whole KV cache is copied, which on a CPU costs more than the attention itself. For
a single query position this module computes the same attention with two batched
matrix products over the grouped heads, without copying the cache; every other call
(prefill, training forward passes) goes to transformers' SDPA function unchanged.

:func:`use_grouped_decode_attention` switches a model that uses SDPA to it.
"""

from __future__ import annotations

from typing import Any

NAME = "searchgym_grouped_decode"
_registered = False


def grouped_decode_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0, scaling: float | None = None, **kwargs: Any
) -> tuple[Any, None]:
    """``query`` ``[B, H, Tq, D]``, ``key``/``value`` ``[B, Hkv, Tk, D]``; returns ``[B, Tq, H, D]``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, length, dim = query.shape
    kv_heads = key.shape[1]
    if length != 1 or heads % kv_heads or (dropout and module.training) or kwargs.get("output_attentions"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    import torch

    scale = scaling if scaling is not None else dim**-0.5
    q = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # [B, Hkv, G, D]: the G query heads of each KV head
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale  # [B, Hkv, G, Tk]
    if attention_mask is not None:
        mask = attention_mask[:, :, -1:, -key.shape[-2] :]  # [B, 1, 1, Tk]
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask.float()
    probs = scores.softmax(dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)  # [B, Hkv, G, D]
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def use_grouped_decode_attention(model: Any) -> bool:
    """Switch ``model`` from SDPA to :func:`grouped_decode_attention`; False (model
    unchanged) when it uses another attention implementation."""
    global _registered
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    if not _registered:
        AttentionInterface.register(NAME, grouped_decode_attention)
        AttentionMaskInterface.register(NAME, sdpa_mask)
        _registered = True
    model.set_attn_implementation(NAME)
    return True
