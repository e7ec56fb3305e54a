"""Text spaces that accept real text.

Gymnasium's :class:`~gymnasium.spaces.Text` only contains strings made of its charset,
and its default charset has no spaces or punctuation. Observations here are Wikipedia
prose in any script and actions are free LLM output, so :class:`UnicodeText` contains
*every* Python string within its length bounds, while :meth:`sample` draws from a
readable charset (printable ASCII plus common accented letters and typographic marks) so
that random actions look like text.

:class:`TextObservation` is a ``str`` that also answers ``.dtype`` like a NumPy value, as
PettingZoo's ``api_test`` reads the dtype of every observation.

Both survive Gymnasium's :class:`~gymnasium.vector.AsyncVectorEnv` with shared memory
(its default): :class:`UnicodeText` registers a shared-memory codec of code points, where
Gymnasium's charset codec would drop every character outside the sample charset.
"""

from __future__ import annotations

import multiprocessing as mp
import string
from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium.spaces import Text
from gymnasium.vector.utils.shared_memory import create_shared_memory, read_from_shared_memory, write_to_shared_memory

from searchgym.error import SearchGymError

#: Characters :meth:`UnicodeText.sample` draws from.
SAMPLE_CHARSET = string.printable + "àáâäçèéêëíîïñóôöúûüßÀÉÖÜ–—‘’“”…°€"


class UnicodeText(Text):
    """A :class:`~gymnasium.spaces.Text` space of any Unicode string with
    ``min_length <= len(x) <= max_length`` characters."""

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"


class TextObservation(str):
    """A ``str`` with the ``dtype`` of :class:`UnicodeText` (``np.dtype(str)``).

    PettingZoo's ``api_test`` compares ``observation.dtype`` with the observation space's
    dtype, which a plain ``str`` does not have. It is a ``str`` in every other respect
    (equality, hashing, tokenizers, JSON)."""

    __slots__ = ()
    dtype = np.dtype(str)

    def __reduce__(self):
        return (TextObservation, (str(self),))


# ---------------------------------------------------------------- shared memory (AsyncVectorEnv)
# Gymnasium's AsyncVectorEnv passes observations through shared memory by default. Its Text
# codec maps each character to an index in the space's charset, dropping any character
# outside it, and AsyncVectorEnv reads the buffer once, when it is built, expecting a view
# that follows the buffer as NumPy arrays do; a tuple of str does not, so every observation
# came back as the empty buffer ("0" * max_length). Here a UnicodeText row is its length
# followed by the string's code points (int32 holds all of Unicode), read through
# SharedTextBatch, which decodes the buffer on every access.


class SharedTextBatch(Sequence[str]):
    """The observations of an AsyncVectorEnv's workers, decoded from shared memory on every
    access (as Box observations are NumPy views onto it). ``copy.deepcopy``, which
    AsyncVectorEnv applies with ``copy=True`` (its default), gives a plain tuple of str,
    as SyncVectorEnv returns."""

    def __init__(self, space: UnicodeText, buffer: Any, n: int):
        self._rows = np.frombuffer(buffer.get_obj(), dtype=np.int32).reshape(n, space.max_length + 1)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        row = self._rows[index]
        return row[1 : 1 + row[0]].tobytes().decode("utf-32-le", "surrogatepass")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # its contents change with the buffer

    def __deepcopy__(self, memo: dict) -> tuple[str, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@create_shared_memory.register(UnicodeText)
def _create_unicode_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array(np.dtype(np.int32).char, n * (space.max_length + 1))


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_to_shared_memory(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise SearchGymError(
            f"A vector env worker expects an observation inside {space!r}, got {type(value).__name__} "
            f"of length {len(value) if isinstance(value, str) else '?'}."
        )
    row = space.max_length + 1
    destination = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * row : (index + 1) * row]
    codes = np.frombuffer(value.encode("utf-32-le", "surrogatepass"), dtype=np.int32)
    destination[0] = len(codes)
    destination[1 : 1 + len(codes)] = codes


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_from_shared_memory(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(space, shared_memory, n)
