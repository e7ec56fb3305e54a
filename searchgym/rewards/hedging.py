"""Hedged answers: a prediction that names more than one candidate.

The papers' containment metrics (cover-EM, sub-EM, s3's span check) pay an answer that
*contains* a gold answer, and token F1 pays partial overlap; an answer that names both
options of a comparison (``"Meibreluvia Paevaendovo"``), a list (``"Lyon, Paris or
Nice"``) or a handful of names copied from the documents collects that credit without
committing to one. :func:`hedge_reason` says why a prediction is such a hedge, and the
recipes and the bench score a hedge as a wrong answer (0) unless asked for the paper's
raw metric (``strict=False``).

A prediction is hedged when it does not equal a gold answer (after normalization) and:

1. **candidates**: it names two or more of the question's candidates (the options a
   comparison offers, :attr:`QAExample.candidates`). Gold answers are matched first and
   their words set aside, so a candidate that is part of the gold's name is not counted
   again;
2. **a list**: split at commas, semicolons, slashes, ``&``, ``|``, line breaks and the
   words ``and``, ``or``, ``nor``, ``versus``/``vs``, it has more non-empty parts than
   every gold answer has (``"Simon and Garfunkel"`` and ``"Washington, D.C."`` have two
   parts each, so answering them is not a list);
3. **extra names**: against every gold answer it shares a word with, the words it adds beyond that gold answer
   (function words such as ``in``, ``was``, ``he`` aside) are at least as many as the gold
   answer's own words, or include a number where the gold answer has one. That is room
   for a second entity the size of the gold one (``"Paevaendovo Meibreluvia"`` for
   ``"Meibreluvia"``), or a second date or count. Qualifiers shorter than the answer
   (``"Kelvaro Shipyards Ltd"`` for ``"Kelvaro Shipyards"``) are not hedges.

Rules 2 and 3 need nothing but the gold answers; rule 1 also catches two candidates that
share words (``"Ilvar Odrenko"`` and ``"Ilvar Pensk"``). What the rules cost honest
answers: a verbose one (``"He was born in Lyon"`` for ``"Lyon"``) or one with an extra
qualifier as long as the answer (``"Paris, France"`` for ``"Paris"``) counts as hedged;
answer with the entity alone, as every protocol's prompt asks. The answer of a *frozen*
generator (s3's, whose GenAcc checks a free-form response by design, and which no policy
trains) is checked with rules 1 and 2 only (``extra_words=False``): its sentences are not
a strategy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from searchgym.rewards.normalize import Normalizer, normalize_answer

__all__ = ["LIST_SEPARATORS", "hedge_reason", "hedged"]

#: Where a list splits: punctuation that joins items, and the words that do.
LIST_SEPARATORS = re.compile(r"[,;/&|\n]|\b(?:and|or|nor|versus|vs)\b", re.IGNORECASE)

# Words an answer sentence uses around an entity; they never make a second entity.
_FUNCTION_WORDS = frozenset(
    """a an the of in on at to for from by with as into about than near
    is was were are be been being has had have it its he she his her him they them their
    this that these those which who whom whose there here
    and or nor but not no yes also both either neither
    answer final""".split()
)
_NUMBER = re.compile(r"\d")


def _as_list(values: Sequence[str] | str) -> list[str]:
    return [values] if isinstance(values, str) else list(values)


def _parts(text: str, normalizer: Normalizer) -> list[str]:
    """The non-empty normalized items of ``text`` read as a list."""
    return [part for part in (normalizer(piece) for piece in LIST_SEPARATORS.split(text)) if part]


def _runs(tokens: Sequence[str], needle: Sequence[str]) -> list[int]:
    """Start positions of ``needle`` as a contiguous run of ``tokens``."""
    n = len(needle)
    if not n:
        return []
    return [i for i in range(len(tokens) - n + 1) if list(tokens[i : i + n]) == list(needle)]


def _count_candidates(pred: list[str], golds: list[list[str]], candidates: list[list[str]]) -> int:
    """How many distinct options ``pred`` names: the gold answer (any alias) counts once,
    then each other candidate found in the words no gold answer took."""
    free = [True] * len(pred)
    named = 0
    for gold in sorted(golds, key=len, reverse=True):
        for start in _runs(pred, gold):
            if all(free[start : start + len(gold)]):
                free[start : start + len(gold)] = [False] * len(gold)
                named = 1
    gold_set = {tuple(g) for g in golds}
    for cand in sorted(candidates, key=len, reverse=True):
        if tuple(cand) in gold_set:
            continue
        for start in _runs(pred, cand):
            if all(free[start : start + len(cand)]):
                free[start : start + len(cand)] = [False] * len(cand)
                named += 1
                break
    return named


def _content(tokens: Sequence[str]) -> set[str]:
    return {t for t in tokens if t not in _FUNCTION_WORDS}


def hedge_reason(
    prediction: str | None,
    answers: Sequence[str] | str,
    candidates: Sequence[str] | str = (),
    normalizer: Normalizer = normalize_answer,
    *,
    extra_words: bool = True,
) -> str | None:
    """Why ``prediction`` names more than one candidate (see the module docstring), or
    ``None`` when it commits to one answer. Gold answers and candidates that normalize
    to nothing are ignored; ``None`` (never answered) is not a hedge. ``extra_words=False``
    applies rules 1 and 2 only: for the answer of a frozen generator (s3's GenAcc), which
    writes sentences by design and is not trained against the reward."""
    if prediction is None:
        return None
    pred_text = normalizer(prediction)
    golds = [g for g in (normalizer(a) for a in _as_list(answers)) if g]
    if not pred_text or not golds or pred_text in golds:
        return None
    pred = pred_text.split()
    gold_tokens = [g.split() for g in golds]
    options = [c.split() for c in dict.fromkeys(normalizer(c) for c in _as_list(candidates)) if c]
    if options:
        named = _count_candidates(pred, gold_tokens, options)
        if named >= 2:
            return f"it names {named} of the question's candidates"
    pieces = len(_parts(prediction, normalizer))
    most = max(len(_parts(a, normalizer)) for a in _as_list(answers) if normalizer(a))
    if pieces > most:
        return f"it is a list of {pieces} items where a gold answer has at most {most}"
    if not extra_words:
        return None
    extra_names = []
    for gold in gold_tokens:
        if not set(pred) & set(gold):
            continue  # shares no word with this gold answer: scores nothing against it
        extra = _content(pred) - set(gold)
        size = max(1, len(_content(gold)))
        numbers = any(_NUMBER.search(t) for t in gold) and any(_NUMBER.search(t) for t in extra)
        if len(extra) < size and not numbers:
            return None
        extra_names.append(len(extra))
    if not extra_names:
        return None  # a plain wrong answer, not a hedge
    return f"it adds {min(extra_names)} words beyond the gold answer it contains, room for another answer"


def hedged(
    prediction: str | None,
    answers: Sequence[str] | str,
    candidates: Sequence[str] | str = (),
    normalizer: Normalizer = normalize_answer,
    *,
    extra_words: bool = True,
) -> bool:
    """Whether ``prediction`` names more than one candidate (:func:`hedge_reason` is not None)."""
    return hedge_reason(prediction, answers, candidates, normalizer, extra_words=extra_words) is not None
