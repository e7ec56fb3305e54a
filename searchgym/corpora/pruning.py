"""Dynamic pruning of BM25 queries: MaxScore over the posting matrix, with exhaustive scoring's
exact top-k.

Exhaustive scoring (:class:`~searchgym.corpora.bm25.BM25Retriever` with ``pruning=False``) adds
every posting of every query term. Most of those postings belong to a query's common terms,
whose contribution to any one passage is small. MaxScore (Turtle & Flood, 1995; PISA's
``maxscore``) bounds it: with ``term_max[t]``, the largest score term ``t`` gives any passage
(written at build time, :func:`term_maxima`), a passage found only in terms whose bounds add up
to less than the k-th best score found so far can never enter the top k, so those terms'
posting lists are never scanned; they are only looked up (a binary search) for the few
passages still in the running.

Term at a time, in whole-array numpy operations:

1. Query terms (repeats kept: each counts again, as in exhaustive scoring) are taken in
   decreasing ``term_max``. Each list is added into a per-thread buffer ("essential" terms)
   while the bounds of the terms left add up to at least ``theta``, the k-th largest partial
   score so far: a lower bound of the final k-th score, since no term lowers a score.
2. Then the candidates are the passages seen whose partial score plus the bounds left can
   still reach ``theta``; each remaining term is looked up for them only, and after each the
   candidates that can no longer reach the (rising) ``theta`` are dropped.
3. The survivors' final scores are computed again term by term **in query order**, the
   float32 additions exhaustive scoring makes, so scores are equal bit for bit; ranking is
   exhaustive scoring's too (score descending, ties in corpus order, positive scores only).

Every comparison against ``theta`` leaves a margin for float32 rounding (see
:func:`_margin`), so a passage is dropped only when its exact score is strictly below the
k-th best: the top k, ties at the k-th place included, are exhaustive scoring's. When pruning
cannot pay (fewer than ``k`` passages match, or a term's list holds a negative score) the
query is scored exhaustively. Why MaxScore rather than WAND or block-max WAND: those choose
one pivot passage at a time, a Python-level loop per passage here, while MaxScore's two
phases are a handful of array operations per term (docs/scale.md, "Dynamic pruning").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["BLOCK", "CHECK_FROM", "LOOKUP_COST", "PRUNE_FROM", "block_maxima", "prune_top_k", "term_maxima"]

#: Postings reduced at once by :func:`term_maxima` (bounded memory over a mapped matrix).
_BLOCK = 1 << 24
#: A list shorter than this is added without first checking whether it could be skipped:
#: the check (a partition of the partial scores) would cost more than the list.
CHECK_FROM = 2048
#: A query whose lists hold fewer postings in all is scored exhaustively: below this, the
#: bookkeeping costs more than the skipped lists save (measured on 300k passages).
PRUNE_FROM = 16384
#: What looking one passage up in a posting list (a binary search) costs, in postings added.
LOOKUP_COST = 16
_UNIT = 2.0**-24  # float32 unit roundoff
#: Postings a block of the block maxima holds (:func:`block_maxima`; the compiled engine of
#: :mod:`searchgym.corpora.blockmax` reads them). 64: PISA's default for its block-max indexes; a
#: smaller block gives tighter bounds but more blocks to step over (8 bytes of block data per 64
#: postings of 8 bytes, and 8 a term).
BLOCK = 64


def term_maxima(data: np.ndarray, indptr: np.ndarray, *, block: int = _BLOCK) -> np.ndarray:
    """``[V]`` float32: each term's largest score (0 for a term without postings), or ``+inf``
    for a term with a negative score, which no bound covers: queries with it are scored
    exhaustively. Reads ``data`` once, about ``block`` postings at a time."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n_terms = len(indptr) - 1
    out = np.zeros(n_terms, dtype=np.float32)
    t0 = 0
    while t0 < n_terms:
        t1 = int(np.searchsorted(indptr, indptr[t0] + block, side="right")) - 1
        t1 = min(max(t1, t0 + 1), n_terms)
        p0, p1 = int(indptr[t0]), int(indptr[t1])
        if p1 > p0:
            scores = np.asarray(data[p0:p1], dtype=np.float32)
            starts = indptr[t0:t1] - p0
            nonempty = starts < indptr[t0 + 1 : t1 + 1] - p0
            if nonempty.any():
                # reduceat over non-empty segments only: it returns the element at an empty one
                where = starts[nonempty]
                high = np.maximum.reduceat(scores, where)
                low = np.minimum.reduceat(scores, where)
                out[t0:t1][nonempty] = np.where(low < 0, np.float32(np.inf), np.maximum(high, 0))
        t0 = t1
    return out


def _margin(additions: int) -> float:
    """Relative error bound of a float32 sum of ``additions`` non-negative terms (any order),
    doubled: a partial and a final score of one passage may differ by this much from the sums
    of reals they stand for."""
    return 4.0 * (additions + 1) * _UNIT


def _lookup(data: np.ndarray, indices: np.ndarray, start: int, end: int, docs: np.ndarray) -> np.ndarray:
    """``[C]`` float32: the scores of term postings ``start:end`` for passages ``docs`` (0 where
    absent), by binary search in the term's ascending passage list."""
    out = np.zeros(len(docs), dtype=np.float32)
    if end <= start or not len(docs):
        return out
    rows = indices[start:end]
    pos = np.searchsorted(rows, docs)  # docs has rows' dtype, so rows is not converted (copied)
    np.minimum(pos, end - start - 1, out=pos)
    found = rows[pos] == docs
    if found.any():
        out[found] = data[start:end][pos[found]]
    return out


def _kth_largest(values: np.ndarray, k: int) -> float:
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _kth_entry(values: np.ndarray, k: int, lists: int, floor: float) -> float:
    """A lower bound of the k-th largest partial score, at least ``floor`` (itself one), from
    ``values``: the partial scores of ``lists`` concatenated posting lists, where a passage
    occurs at most once per list. The ``k * lists`` best entries hold at least k distinct
    passages, so the value of the ``k * lists``-th is at most the k-th best passage's. Only
    the entries above ``floor`` are partitioned: a compare costs less than a partition."""
    want = k * lists
    if floor > 0:
        values = values[values >= floor]
    if len(values) < want:
        return floor
    return max(floor, float(np.partition(values, len(values) - want)[len(values) - want]))


def _floor32(value: float) -> np.float32:
    """The largest float32 not above ``value``: a float32 comparison against it keeps every
    value a float64 comparison against ``value`` would."""
    low = np.float32(value)
    return low if float(low) <= value else np.nextafter(low, np.float32(-np.inf))


def _reach(partial: np.ndarray, rest: float, theta: float, eps: float) -> np.ndarray:
    """Mask of the passages whose partial score plus ``rest`` (the bounds of the terms not added)
    may still reach ``theta``, with the rounding margin ``eps`` (see :func:`_margin`)."""
    return partial >= _floor32(theta * (1 - eps) / (1 + eps) - rest)


def _top_of_one_list(values: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` of a query of one term (once): its scores are the list's own values."""
    if len(values) > k:
        kth = np.partition(values, len(values) - k)[len(values) - k]
        chosen = np.flatnonzero(values >= kth)  # ties at the k-th place all taken, settled below
        values, rows = values[chosen], rows[chosen]
    positive = values > 0
    values, rows = values[positive], rows[positive]
    ranked = np.lexsort((rows, -values))[:k]  # score descending, ties in corpus order
    return rows[ranked], values[ranked]


def prune_top_k(
    term_ids: Sequence[int],
    k: int,
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    term_max: np.ndarray,
    buffer: np.ndarray,
    exhaustive: Callable[[Sequence[int], int], tuple[np.ndarray, np.ndarray]],
    *,
    check_from: int = CHECK_FROM,
    prune_from: int = PRUNE_FROM,
    stats: dict[str, int] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (passage indices, float32 scores) of one query given its indexed term ids,
    exactly ``exhaustive(term_ids, k)``'s (see the module docstring).

    ``buffer`` is the calling thread's ``[N]`` float32 accumulator, all zeros on entry and
    left so; ``exhaustive`` scores a query the plain way when pruning cannot pay. A list of
    ``check_from`` postings or more is skipped when it can be (shorter ones are added); a query
    of fewer than ``prune_from`` postings in all is scored exhaustively.
    ``stats``, when given, counts ``"postings"`` (the postings of the query's lists),
    ``"added"`` (those added) and ``"skipped"`` (lists only looked up), for benchmarks and tests.
    """
    term_ids = [int(t) for t in term_ids]
    m = len(term_ids)
    starts, ends = indptr[term_ids], indptr[np.asarray(term_ids) + 1]  # [m]
    lengths = ends - starts  # [m] postings of each term
    total = int(lengths.sum())
    if stats is not None:
        stats["postings"] = stats.get("postings", 0) + total
        stats["added"] = stats.get("added", 0) + total  # less what is skipped, below
        stats.setdefault("skipped", 0)
    bounds = term_max[term_ids].astype(np.float64)  # [m]
    if not np.isfinite(bounds).all():  # a term with a negative score: no bound holds
        return exhaustive(term_ids, k)
    if m == 1:  # one term: no sum to compute, no buffer to fill
        start, end = int(starts[0]), int(ends[0])
        return _top_of_one_list(np.asarray(data[start:end]), np.asarray(indices[start:end]), k)
    if total < prune_from:
        return exhaustive(term_ids, k)
    eps = _margin(m)
    order = np.argsort(-bounds, kind="stable")  # [m] highest bound first
    left = np.concatenate((np.cumsum(bounds[order][::-1])[::-1], [0.0]))  # [m + 1] bounds of order[j:] summed
    added: list[np.ndarray] = []  # the passages of every list added (a passage once per list)
    theta = 0.0
    j = 0
    try:
        # Phase 1: add the essential lists, until the bounds of the lists left cannot reach
        # theta and looking them up for the candidates costs less than adding them.
        while j < m:
            t = order[j]
            start, end = int(starts[t]), int(ends[t])
            if j and end - start >= check_from and left[j] < left[0] - left[j]:  # skipping is possible
                touched = np.concatenate(added) if len(added) > 1 else added[0]
                partial = buffer[touched]
                if not theta:  # the first list's k-th best score: k passages score at least that
                    theta = _kth_largest(np.asarray(data[int(starts[order[0]]) : int(ends[order[0]])]), k)
                theta = _kth_entry(partial, k, j, theta)
                if theta > 0 and left[j] * (1 + eps) < theta * (1 - eps):
                    alive = np.count_nonzero(_reach(partial, left[j], theta, eps))
                    if alive * (m - j) * LOOKUP_COST <= int(lengths[order[j:]].sum()):
                        break
            rows = indices[start:end]
            buffer[rows] += data[start:end]  # a passage occurs once in a list: exact
            added.append(rows)
            j += 1
        touched = np.concatenate(added) if len(added) > 1 else added[0]  # [T]
        partial = buffer[touched]
        theta = _kth_entry(partial, k, j, theta)
        keep = _reach(partial, left[j], theta, eps)
        keep &= partial > 0  # a passage no added list scores is in a skipped list only: below theta
        cand = np.unique(touched[keep])  # [C] ascending: lookups walk each list forward
        partial = buffer[cand]
    finally:
        for rows in added:
            buffer[rows] = 0.0
    if theta <= 0 and len(cand) * len(set(term_ids)) * LOOKUP_COST > total:
        # Fewer than k passages matched, too many for lookups to beat adding the lists.
        return exhaustive(term_ids, k)
    cand = cand.astype(indices.dtype, copy=False)
    if stats is not None:
        stats["added"] -= int(lengths[order[j:]].sum())
        stats["skipped"] += m - j

    # Phase 2: look the remaining terms up for the candidates only.
    while j < m and len(cand):
        t = order[j]
        partial += _lookup(data, indices, int(starts[t]), int(ends[t]), cand)
        j += 1
        theta = max(theta, _kth_largest(partial, k))
        keep = _reach(partial, left[j], theta, eps)
        if not keep.all():
            cand, partial = cand[keep], partial[keep]

    # Phase 3: the survivors' exact scores, added in query order as exhaustive scoring adds them.
    final = np.zeros(len(cand), dtype=np.float32)
    found: dict[int, np.ndarray] = {}
    for i, term in enumerate(term_ids):
        term = int(term)
        if term not in found:
            found[term] = _lookup(data, indices, int(starts[i]), int(ends[i]), cand)
        final += found[term]
    positive = final > 0
    cand, final = cand[positive], final[positive]
    ranked = np.lexsort((cand, -final))[:k]  # score descending, ties in corpus order
    return cand[ranked], final[ranked]


def block_maxima(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, block: int = BLOCK):
    """``(bptr [V+1] int64, bmax [B] float32, blast [B] int32)``: term ``t``'s blocks are
    ``bptr[t]:bptr[t+1]``; block ``j`` of a term covers its postings ``j*block`` to
    ``(j+1)*block``, with ``bmax`` its largest score and ``blast`` its last passage."""
    indptr = np.asarray(indptr, dtype=np.int64)
    lengths = np.diff(indptr)
    counts = (lengths + block - 1) // block  # [V] blocks of each term
    bptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=bptr[1:])
    total = int(bptr[-1])
    if total == 0:
        return bptr, np.zeros(0, np.float32), np.zeros(0, np.int32)
    owner = np.repeat(np.arange(len(counts)), counts)  # [B] the term of each block
    starts = indptr[:-1][owner] + (np.arange(total, dtype=np.int64) - bptr[:-1][owner]) * block
    ends = np.minimum(starts + block, indptr[1:][owner])
    del owner
    bmax = np.maximum.reduceat(np.asarray(data, dtype=np.float32), starts)  # every block non-empty, in order
    blast = np.asarray(indices)[ends - 1].astype(np.int32, copy=False)
    return bptr, bmax.astype(np.float32, copy=False), blast
