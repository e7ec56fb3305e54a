"""A KV cache layer that decodes without copying the whole cache at every step.

transformers' ``DynamicLayer`` appends each decode step's keys and values with
``torch.cat``, which allocates a new tensor and copies the entire cache: for 16 rows of a
600-token context that is hundreds of megabytes per step, a large share of a CPU decode
step. :class:`GrowingLayer` keeps the keys and values at the front of a buffer with room
to spare and writes each step's entries into it in place; ``layer.keys`` and
``layer.values`` stay views of exactly the filled positions, so everything that reads or
replaces them (batch selection, cropping, merging batches) works as on a
``DynamicLayer``. When they have been replaced or the room is used up, the next update
copies them into a new buffer once.
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose appends write into a preallocated buffer."""

    #: Fewest free positions a new buffer leaves after the filled ones (also at least a
    #: quarter of them, so a long generation copies its cache a logarithmic number of times).
    reserve = 64

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.is_initialized or self.keys is None or self.keys.numel() == 0:
            return super().update(key_states, value_states, *args, **kwargs)
        length, new = self.keys.shape[-2], key_states.shape[-2]
        buffers = getattr(self, "_buffers", None)
        if buffers is None or buffers[2] is not self.keys or length + new > buffers[0].shape[-2]:
            # [B, H, capacity, D], filled with the current entries
            capacity = length + new + max(self.reserve, (length + new) // 4)
            keys = self.keys.new_empty((*self.keys.shape[:-2], capacity, self.keys.shape[-1]))
            values = self.values.new_empty((*self.values.shape[:-2], capacity, self.values.shape[-1]))
            keys[..., :length, :] = self.keys
            values[..., :length, :] = self.values
        else:
            keys, values = buffers[0], buffers[1]
        keys[..., length : length + new, :] = key_states
        values[..., length : length + new, :] = value_states
        self.keys, self.values = keys[..., : length + new, :], values[..., : length + new, :]
        self._buffers = (keys, values, self.keys)
        return self.keys, self.values


def grow_in_place(cache: Any) -> Any:
    """Turn the plain ``DynamicLayer`` layers of ``cache`` (a ``DynamicCache``) into
    :class:`GrowingLayer`; others (sliding-window layers) are left as they are."""
    for layer in getattr(cache, "layers", ()):
        if type(layer) is DynamicLayer:
            layer.__class__ = GrowingLayer
    return cache


def full_attention_layer(layer: Any) -> bool:
    """Whether ``layer`` keeps every position (a ``DynamicLayer`` or :class:`GrowingLayer`)."""
    return type(layer) in (DynamicLayer, GrowingLayer)


def pad_left(tensor: Any, width: int) -> Any:
    """Zero-pad the sequence dimension on the left to ``width`` (dim -1 of a mask
    ``[B, T]``, dim -2 of keys or values ``[B, H, T, D]``)."""
    import torch

    dim = -1 if tensor.dim() == 2 else -2
    missing = width - tensor.shape[dim]
    if missing == 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)


def concat_rows(parts: list[tuple[Any, Any]], order: Any = None) -> tuple[Any, Any]:
    """Stack the rows of several ``(cache, attention_mask)`` pairs into the first cache,
    each padded on the left to the widest; ``order`` (an index over the stacked rows)
    reorders them. Returns that cache, its full-attention layers made
    :class:`GrowingLayer` (see :func:`grow_in_place`), and its mask ``[B, W]``.
    """
    import torch

    width = max(mask.shape[1] for _, mask in parts)
    pick = (lambda t: t) if order is None else (lambda t: t.index_select(0, order))  # noqa: E731
    target = parts[0][0]
    for layer, *others in zip(target.layers, *(cache.layers for cache, _ in parts[1:])):
        layer.keys = pick(torch.cat([pad_left(part.keys, width) for part in (layer, *others)], dim=0))
        layer.values = pick(torch.cat([pad_left(part.values, width) for part in (layer, *others)], dim=0))
    mask = pick(torch.cat([pad_left(mask, width) for _, mask in parts], dim=0))
    return grow_in_place(target), mask
