"""Answer metrics: exact match, sub-EM, cover-EM, token F1, s3's span check, GenAcc.

Every metric takes a prediction (``str``, or ``None`` for "never answered", which scores
0.0) and the gold answers (a sequence of strings; a bare string counts as one answer, as
in the original repositories) and returns a float in [0, 1], the best over the gold answers.

Which seed each one follows:

- :func:`exact_match` — Search-R1 ``em_check`` / FlashRAG ``ExactMatch``: normalized
  strings are equal.
- :func:`sub_exact_match` — FlashRAG ``Sub_ExactMatch`` (its "acc") / Search-R1
  ``subem_check``: the normalized gold answer is a *character* substring of the
  normalized prediction (``"art"`` is found in ``"start"``).
- :func:`cover_exact_match` — R1-Searcher's ``cover_exact_match_score_1``, the
  "cover EM" it trains on (stage-1 server) and reports: every token of the gold answer
  occurs among the prediction's tokens, in any order and not necessarily adjacent,
  with R1-Searcher's normalization. R1-Searcher's other variant
  (``cover_exact_match_score_2``: the gold tokens as one contiguous run) is the same
  test as :func:`span_check` up to the normalizer.
- :func:`f1_score` — FlashRAG ``F1_Score`` / R1-Searcher ``f1_score`` (HotpotQA's):
  bag-of-tokens F1; if either side normalizes to ``yes``/``no``/``noanswer`` and the two
  differ, the score is 0. R-Search's F1 has no such case: pass ``special_yes_no=False``.
- :func:`span_check` — s3 ``answer_span_check``: both sides go through
  :func:`normalize_answer`, then pyserini's ``has_answers`` (DrQA ``SimpleTokenizer``,
  NFD, uncased): the gold answer's token sequence occurs contiguously in the
  prediction's tokens. The prediction contains the gold answer, not the other way.
- :func:`gen_acc` — s3 ``check_answer_correct``: the span check, and only when it fails,
  the LLM judge if one is given.
- :func:`answer_in_text` — Search-R1 ``is_retrieval_correct`` / FlashRAG
  ``Retrieval_Recall``: a normalized gold answer is a substring of the normalized text.

Deliberate deviation, in every metric: a gold answer that normalizes to the empty string
(``"The"``, ``"An"``, ``"?"``) is skipped, because the original repositories would find it in *every*
prediction (containment tests) or match the answer ``"the"`` to it (exact match, F1) and hand
out reward for nothing. A question whose gold answers are all empty scores 0 for every
prediction; :func:`~searchgym.corpora.datasets.read_qa` refuses such a dataset.

These are the papers' raw metrics: an answer that names several candidates
(``"Lyon or Paris"``) collects their credit. The recipes and the bench score such a hedge
as a wrong answer unless ``strict=False``; see :mod:`searchgym.rewards.hedging`.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence

from searchgym.error import ConfigError
from searchgym.rewards.normalize import Normalizer, normalize_answer, normalize_answer_r1searcher

Answers = Sequence[str] | str
Judge = Callable[[str | None, str, Sequence[str]], "bool | float"]

_YES_NO = ("yes", "no", "noanswer")


def _as_list(answers: Answers) -> list[str]:
    # The original repositories accept a bare string as a single gold answer; iterating it would compare
    # against single characters, so wrap it.
    if isinstance(answers, str):
        return [answers]
    return list(answers)


def exact_match(prediction: str | None, answers: Answers, normalizer: Normalizer = normalize_answer) -> float:
    """1.0 if the normalized prediction equals a normalized, non-empty gold answer."""
    if prediction is None:
        return 0.0
    pred = normalizer(prediction)
    return float(any(g and g == pred for g in (normalizer(a) for a in _as_list(answers))))


def sub_exact_match(prediction: str | None, answers: Answers, normalizer: Normalizer = normalize_answer) -> float:
    """1.0 if a normalized gold answer is a substring of the normalized prediction."""
    if prediction is None:
        return 0.0
    pred = normalizer(prediction)
    golds = (normalizer(a) for a in _as_list(answers))
    return float(any(g and g in pred for g in golds))


def cover_exact_match(
    prediction: str | None, answers: Answers, normalizer: Normalizer = normalize_answer_r1searcher
) -> float:
    """1.0 if every token of a gold answer is among the prediction's tokens (any order)."""
    if prediction is None:
        return 0.0
    pred = set(normalizer(prediction).split())
    for a in _as_list(answers):
        gold = normalizer(a).split()
        if gold and all(t in pred for t in gold):
            return 1.0
    return 0.0


def _f1_one(pred: str, gold: str, special_yes_no: bool) -> float:
    if special_yes_no and (pred in _YES_NO or gold in _YES_NO) and pred != gold:
        return 0.0
    pred_tokens, gold_tokens = pred.split(), gold.split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(
    prediction: str | None,
    answers: Answers,
    normalizer: Normalizer = normalize_answer,
    *,
    special_yes_no: bool = True,
) -> float:
    """Token F1 between the normalized prediction and the best gold answer.

    ``special_yes_no``: score 0 when either side is ``yes``/``no``/``noanswer`` and they
    differ (FlashRAG, R1-Searcher, HotpotQA); R-Search does not do this.
    """
    if prediction is None:
        return 0.0
    pred = normalizer(prediction)
    golds = (g for g in (normalizer(a) for a in _as_list(answers)) if g)
    return max((_f1_one(pred, g, special_yes_no) for g in golds), default=0.0)


def _simple_tokens(text: str) -> list[str]:
    """DrQA/pyserini ``SimpleTokenizer`` words, uncased, after NFD normalization.

    A token is a maximal run of letters, digits and combining marks (``\\p{L}\\p{N}\\p{M}``)
    or any other single character that is neither a separator (``\\p{Z}``) nor a
    control/format character (``\\p{C}``).
    """
    out: list[str] = []
    run: list[str] = []
    for ch in unicodedata.normalize("NFD", text):
        cat = unicodedata.category(ch)
        if cat[0] in "LNM":
            run.append(ch)
            continue
        if run:
            out.append("".join(run))
            run = []
        if cat[0] not in "ZC":
            out.append(ch)
    if run:
        out.append("".join(run))
    return [t.lower() for t in out]


def _contains_run(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1))


def span_check(prediction: str | None, answers: Answers) -> float:
    """s3's span check: a gold answer's tokens occur contiguously in the prediction's tokens."""
    if prediction is None:
        return 0.0
    pred = _simple_tokens(normalize_answer(prediction))
    for a in _as_list(answers):
        gold = _simple_tokens(normalize_answer(a))
        if gold and _contains_run(pred, gold):
            return 1.0
    return 0.0


def gen_acc(
    prediction: str | None, answers: Answers, judge: Judge | None = None, question: str | None = None
) -> float:
    """s3's GenAcc: :func:`span_check`; if it fails and a judge is given, the judge decides.

    ``judge(question, prediction, answers)`` returns a bool or a float in [0, 1].
    """
    if prediction is None:
        return 0.0
    if span_check(prediction, answers):
        return 1.0
    golds = [a for a in _as_list(answers) if normalize_answer(a)]
    if judge is None or not golds:
        return 0.0
    verdict = judge(question, prediction, golds)
    score = float(verdict)
    if not 0.0 <= score <= 1.0:
        raise ConfigError(
            f"gen_acc expects the judge to return a bool or a float in [0, 1], got {verdict!r}; "
            "make the judge return whether the prediction answers the question correctly."
        )
    return score


def answer_in_text(text: str, answers: Answers) -> bool:
    """Whether a normalized gold answer is a substring of the normalized ``text``.

    Marks a retrieval as correct (Search-R1's ``is_retrieval_correct``).
    """
    norm = normalize_answer(text)
    return any(g and g in norm for g in (normalize_answer(a) for a in _as_list(answers)))
