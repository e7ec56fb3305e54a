"""Reusing the KV cache of earlier generations whose tokens begin a new prompt.

A multi-turn agent's context only grows: the prompt of turn ``t + 1`` is the prompt of
turn ``t``, the tokens generated there and the env's observation. Without reuse every turn
re-encodes the whole conversation, and on a CPU that prefill costs more than the decoding
itself. :class:`PrefixCache` keeps, per finished sequence, the keys and values of the
tokens the model has already processed, keyed by those token ids; a later prompt that
starts with a stored key encodes only the rest, and one that shares only the beginning of
an entry (the same prompt template, another question) reuses that beginning. vLLM's
automatic prefix caching does the same block by block.

Entries are only valid for the weights that produced them: :meth:`PrefixCache.check`
takes a fingerprint of the model's parameters (identity and in-place version counter of
each tensor, which an optimizer step or ``load_state_dict`` bumps) and drops every entry
when it changes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError

#: One stored sequence: per layer, keys and values of shape ``[kv_heads, tokens, head_dim]``.
Layers = list[tuple[Any, Any]]


@dataclass
class Hit:
    """A lookup's answer: the stored ``key``, its ``layers`` and how many of its first
    tokens the prompt shares (``length``; all of them when ``whole``)."""

    key: tuple[int, ...]
    layers: Layers
    length: int

    @property
    def whole(self) -> bool:
        return self.length == len(self.key)

    def keys_values(self, layer: int) -> tuple[Any, Any]:
        """Keys and values ``[kv_heads, length, head_dim]`` of the shared tokens at ``layer``."""
        keys, values = self.layers[layer]
        return keys[:, : self.length], values[:, : self.length]


@dataclass
class PrefixCacheStats:
    """Counters since the cache was made: prompts looked up, prompts that hit, prompt
    tokens served from the cache, entries dropped to stay within the budget, and times
    the whole cache was dropped because the weights changed."""

    lookups: int = 0
    hits: int = 0
    reused_tokens: int = 0
    evictions: int = 0
    invalidations: int = 0


class PrefixCache:
    """Least-recently-used store of per-sequence KV caches, bounded in bytes.

    Args:
        max_bytes: Most bytes of keys and values held; the least recently used entries
            are dropped first. An entry larger than the budget is not stored.
    """

    #: Fewest tokens a partial hit (an entry only the beginning of which matches) must serve.
    min_shared = 16

    def __init__(self, max_bytes: int):
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(f"PrefixCache expects max_bytes to be a positive integer, got {max_bytes!r}.")
        self.max_bytes = max_bytes
        self.bytes = 0
        self.stats = PrefixCacheStats()
        self._entries: OrderedDict[tuple[int, ...], tuple[Layers, int]] = OrderedDict()
        self._fingerprint: Any = None

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

    def check(self, fingerprint: Any) -> None:
        """Drop every entry if ``fingerprint`` (of the weights) differs from the last one."""
        if fingerprint != self._fingerprint:
            if self._entries:
                self.stats.invalidations += 1
            self.clear()
            self._fingerprint = fingerprint

    def lookup(self, ids: Sequence[int]) -> Hit | None:
        """The stored entry sharing the longest prefix with ``ids``, leaving at least one
        token of ``ids`` to encode (so the model still yields the next token's logits).

        An entry whose key is wholly a prefix of ``ids`` is the usual hit (the next turn of
        a conversation); an entry that only begins like ``ids`` serves its first tokens
        when they are at least :attr:`min_shared` (a prompt template shared by different
        questions)."""
        self.stats.lookups += 1
        ids = tuple(ids)
        limit = len(ids) - 1
        best: tuple[int, ...] | None = None
        rank = (0, False)  # tokens shared, and whether the whole key is (preferred on ties)
        for key in self._entries:
            shared = common_prefix(key, ids, limit)
            if (shared, shared == len(key)) > rank:
                best, rank = key, (shared, shared == len(key))
        length, whole = rank
        if best is None or length == 0 or (not whole and length < self.min_shared):
            return None
        self._entries.move_to_end(best)
        self.stats.hits += 1
        self.stats.reused_tokens += length
        return Hit(best, self._entries[best][0], length)

    def store(self, key: Sequence[int], layers: Layers) -> None:
        """Keep ``layers`` (the KV of exactly the tokens ``key``) as the newest entry."""
        key = tuple(key)
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        self.discard(key)
        if size > self.max_bytes:
            return
        self._entries[key] = (layers, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.bytes -= dropped
            self.stats.evictions += 1

    def discard(self, key: Sequence[int]) -> None:
        """Forget the entry of ``key``, if any (an entry a longer one has superseded)."""
        entry = self._entries.pop(tuple(key), None)
        if entry is not None:
            self.bytes -= entry[1]


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    """Length of the common prefix of ``a`` and ``b`` (two tuples or two lists), at most
    ``limit`` (bisection over slice comparisons, which run in C)."""
    high = min(len(a), len(b), limit)
    if a[:high] == b[:high]:
        return high
    low = 0  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def weights_fingerprint(model: Any) -> tuple[tuple[int, int], ...] | None:
    """Identity and version counter of every parameter of ``model``; ``None`` when the
    versions cannot be read (parameters made under ``torch.inference_mode``), in which
    case the cache cannot tell when the weights change and must not be used."""
    try:
        return tuple((id(p), p._version) for p in model.parameters())
    except RuntimeError:
        return None
