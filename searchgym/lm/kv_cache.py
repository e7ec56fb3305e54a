"""A KV cache layer that decodes without copying the whole cache at every step.

transformers' ``DynamicLayer`` appends each decode step's keys and values with
``torch.cat``, which allocates a new tensor and copies the entire cache: for 16 rows of a
600-token context that is hundreds of megabytes per step, a large share of a CPU decode
step. :class:`GrowingLayer` keeps the keys and values at the front of a buffer with room
to spare and writes each step's entries into it in place; ``layer.keys`` and
``layer.values`` stay views of exactly the filled positions, so everything that reads or
replaces them works as on a ``DynamicLayer``. Dropping finished rows and dropping
leading padding columns also stay inside the buffer. When the views have been replaced
or the room is used up, the next update copies them into a new buffer once.
"""

from __future__ import annotations

from typing import Any

from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose appends write into a preallocated buffer.

    ``keys`` and ``values`` are views of the buffers' first rows and of a window of
    their columns. Besides appending, two operations of the decode loops stay inside the
    buffers: keeping some of the batch rows (:meth:`batch_select_indices` with rows in
    increasing order moves the kept rows up in place) and dropping leading columns
    (:meth:`crop_left` moves the window's start).
    """

    #: Fewest free positions a new buffer leaves after the filled ones (also at least a
    #: quarter of them, so a long generation copies its cache a logarithmic number of times).
    reserve = 64

    @classmethod
    def capacity(cls, filled: int) -> int:
        """Positions of a new buffer that starts with ``filled`` of them."""
        return filled + max(cls.reserve, filled // 4)

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        filled = self._filled()
        if filled is None or filled[3] + new > filled[0].shape[-2]:
            # [B, H, capacity, D], filled with the current entries
            length = self.keys.shape[-2] if self.keys.numel() else 0
            capacity = self.capacity(length + new)
            keys = key_states.new_empty((*key_states.shape[:-2], capacity, key_states.shape[-1]))
            values = value_states.new_empty((*value_states.shape[:-2], capacity, value_states.shape[-1]))
            if length:
                keys[..., :length, :] = self.keys
                values[..., :length, :] = self.values
            start, end = 0, length
        else:
            keys, values, start, end = filled
        keys[..., end : end + new, :] = key_states
        values[..., end : end + new, :] = value_states
        self._view(keys, values, start, end + new)
        return self.keys, self.values

    def batch_select_indices(self, indices: Any) -> None:
        filled = self._filled()
        rows = indices.tolist() if filled is not None else None
        if filled is None or any(b <= a for a, b in zip(rows, rows[1:])) or (rows and rows[0] < 0):
            super().batch_select_indices(indices)
            return
        keys, values, start, end = filled
        for row, source in enumerate(rows):  # source >= row, so no kept row is overwritten before it moves
            if source != row:
                keys[row, :, start:end].copy_(keys[source, :, start:end])
                values[row, :, start:end].copy_(values[source, :, start:end])
        self._view(keys[: len(rows)], values[: len(rows)], start, end)

    def crop_left(self, columns: int) -> None:
        """Drop the first ``columns`` positions."""
        filled = self._filled()
        if filled is None:
            self.keys, self.values = self.keys[..., columns:, :], self.values[..., columns:, :]
            return
        keys, values, start, end = filled
        self._view(keys, values, start + columns, end)

    def _filled(self) -> tuple[Any, Any, int, int] | None:
        """The key and value buffers and the window ``[start, end)`` of their columns that
        ``keys`` and ``values`` view; None if something replaced those views."""
        buffers = getattr(self, "_buffers", None)
        if buffers is None or buffers[3] is not self.keys:
            return None
        keys, values, start, _ = buffers
        return keys, values, start, start + self.keys.shape[-2]

    def _view(self, keys: Any, values: Any, start: int, end: int) -> None:
        self.keys, self.values = keys[..., start:end, :], values[..., start:end, :]
        self._buffers = (keys, values, start, self.keys)


def buffered_layer(keys: Any, values: Any, length: int) -> GrowingLayer:
    """A :class:`GrowingLayer` holding the first ``length`` positions of the buffers
    ``keys`` and ``values`` ``[B, H, capacity, D]`` and appending after them."""
    layer = GrowingLayer()
    layer.lazy_initialization(keys, values)
    layer._view(keys, values, 0, length)
    return layer


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
    reorders them. Returns that cache, its full-attention layers replaced by
    :class:`GrowingLayer` buffers (:func:`buffered_layer`), and its mask ``[B, W]``.

    Full-attention layers are written once, straight into the buffers the next decode
    steps append to; other layers are padded and concatenated.
    """
    import torch

    width = max(mask.shape[1] for _, mask in parts)
    pick = (lambda t: t) if order is None else (lambda t: t.index_select(0, order))  # noqa: E731
    sizes = [mask.shape[0] for _, mask in parts]
    # The row each stacked row lands on.
    destination = torch.arange(sum(sizes)) if order is None else torch.empty_like(order).index_copy_(0, order, torch.arange(len(order), device=order.device))
    target = parts[0][0]
    for index, layers in enumerate(zip(*(cache.layers for cache, _ in parts))):
        if not all(full_attention_layer(layer) for layer in layers):
            layer = target.layers[index]
            layer.keys = pick(torch.cat([pad_left(part.keys, width) for part in layers], dim=0))
            layer.values = pick(torch.cat([pad_left(part.values, width) for part in layers], dim=0))
            continue
        capacity = GrowingLayer.capacity(width)
        # [B, H, capacity, D] each
        keys, values = (t.new_empty((len(destination), t.shape[1], capacity, t.shape[-1])) for t in (layers[0].keys, layers[0].values))
        offset = 0
        for part, size in zip(layers, sizes):
            rows = destination[offset : offset + size].to(keys.device)
            offset += size
            pad = width - part.keys.shape[-2]
            for buffer, source in ((keys, part.keys), (values, part.values)):
                buffer[..., pad:width, :].index_copy_(0, rows, source)
                if pad:
                    buffer[..., :pad, :].index_fill_(0, rows, 0)
        target.layers[index] = buffered_layer(keys, values, width)
    mask = pick(torch.cat([pad_left(mask, width) for _, mask in parts], dim=0))
    return target, mask
