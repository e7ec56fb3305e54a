"""Answer normalization used before every string comparison.

Two normalizers exist in the original repositories and they disagree on punctuation, which
changes scores:

- :func:`normalize_answer` is the SQuAD normalization that Search-R1
  (``verl/utils/reward_score/qa_em.py``), FlashRAG (``flashrag/evaluator/utils.py``),
  s3 and R-Search all copy: lowercase, *delete* ASCII punctuation, drop the articles
  ``a``/``an``/``the``, collapse whitespace. ``"U.S."`` becomes ``"us"``.
- :func:`normalize_answer_r1searcher` is R1-Searcher's
  (``train/reward_server_*.py``, ``evaluation/metric_calc_rule.py``): underscores and
  punctuation (ASCII plus ``‘ ’ ´ ```) are *replaced by spaces*, so ``"U.S."`` becomes
  ``"u s"`` and ``"Jean-Paul"`` becomes ``"jean paul"`` (two tokens). R1-Searcher also
  maps the literal strings ``"True"``/``"False"`` to ``"yes"``/``"no"`` before
  normalizing (its ``bool_mapping``); that step is folded in here so that a single
  callable reproduces its metrics.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)
# R1-Searcher adds typographic quotes and the acute accent to the ASCII set.
_R1_PUNCTUATION = frozenset(string.punctuation + "‘’´`")
_R1_PUNCT_TABLE = {ord(ch): " " for ch in _R1_PUNCTUATION}
_BOOL_WORDS = {"True": "yes", "False": "no"}

Normalizer = Callable[[str], str]


def normalize_answer(s: str) -> str:
    """Lowercase, delete ASCII punctuation, drop articles, collapse whitespace.

    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    """
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def normalize_answer_r1searcher(s: str) -> str:
    """R1-Searcher's variant: punctuation and underscores become spaces.

    ``"True"``/``"False"`` (exactly) map to ``"yes"``/``"no"`` first, as R1-Searcher's
    ``bool_mapping`` does before every metric.

    >>> normalize_answer_r1searcher("The  Eiffel-Tower!")
    'eiffel tower'
    >>> normalize_answer_r1searcher("True")
    'yes'
    """
    s = _BOOL_WORDS.get(s, s)
    s = s.replace("_", " ").lower()
    s = s.translate(_R1_PUNCT_TABLE)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def tokens(s: str, normalizer: Normalizer = normalize_answer) -> list[str]:
    """Whitespace tokens of the normalized string (the token unit of F1 and cover-EM)."""
    return normalizer(s).split()


def is_blank_answer(s: str) -> bool:
    """Whether ``s`` normalizes to nothing under either normalizer (``"The"``, ``"?"``,
    ``"a.n"``): no metric can score a prediction against it, so metrics skip it and a
    dataset whose gold answers are all blank is refused."""
    return not normalize_answer(s) or not normalize_answer_r1searcher(s)
