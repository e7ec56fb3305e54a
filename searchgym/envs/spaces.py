"""Text spaces that accept real text.

Gymnasium's :class:`~gymnasium.spaces.Text` only contains strings made of its charset,
and its default charset has no spaces or punctuation. Observations here are Wikipedia
prose in any script and actions are free LLM output, so :class:`UnicodeText` contains
*every* Python string within its length bounds, while :meth:`sample` draws from a
readable charset (printable ASCII plus common accented letters and typographic marks) so
that random actions look like text.

:class:`TextObservation` is a ``str`` that also answers ``.dtype`` like a NumPy value, as
PettingZoo's ``api_test`` reads the dtype of every observation.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium.spaces import Text

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
