"""Block-max MaxScore, document at a time, compiled with numba: exhaustive scoring's exact top k
at a compiled engine's cost a query (issue 67).

:mod:`searchgym.corpora.pruning` prunes term at a time in whole-array numpy operations, because
a loop per passage in Python costs more than the postings it would skip. Compiled, that
trade-off turns around, and this module does what PISA and Lucene do instead:

- **Document at a time, MaxScore** (Turtle & Flood 1995): the query's distinct terms sorted by
  their bound (``term_max`` times how often the term occurs in the query), lowest first. The
  lowest terms whose bounds add up to less than ``theta`` (the k-th best score so far) are
  *non-essential*: a passage found in them only cannot enter the top k, so only the essential
  lists are walked, passage by passage, and the non-essential ones are looked up for the
  passages still in the running. Chosen over WAND because MaxScore's essential / non-essential
  split needs no re-sorting of the cursors by passage at every step, which WAND's pivot needs
  and which grows with the number of terms (Search-R1 sends questions of 8-15 terms); WAND was
  not built here, so this is a reason, not a measurement.
- **Block maxima** (Ding & Suel 2011; PISA's ``block_max_maxscore``): each list is cut in
  blocks of :data:`BLOCK` postings, with the block's largest score and last passage. Before a
  non-essential list is looked up for a passage, its bound is tightened to the maximum of the
  block that holds the passage, which drops candidates without a lookup. An index writes them
  beside its postings (:func:`~searchgym.corpora.postings.save_postings`) and the engine maps
  them; for an index written before they were, they are computed from its score array when the
  engine is first used (a ``maximum.reduceat`` over it: about a second per 100M postings), so
  such an index needs no rebuild.
- **A first threshold from exact scores** (:func:`_prime`): before the traversal, the passages
  of the query's rarest lists (at most :data:`PRIME`) are scored in full; the k-th best of those
  real scores is a lower bound of the final k-th, so pruning starts at once rather than after
  the traversal has met k good passages (8-13% fewer candidates on the questions measured).
- **Compiled inner loops with numba** (``nogil``): a loop per passage is what every compiled
  engine runs; numba gives it from the same arrays the numpy path reads, without a C extension
  to build, and releases the GIL so a batch runs on several threads. numba is an optional extra
  (``searchgym[fast]``); without it :func:`available` is false and the retriever prunes with
  :func:`~searchgym.corpora.pruning.prune_top_k` (numpy), which gives the very same top k.

- **One query on several cores** (:meth:`BlockMaxIndex.top_k_split`; ``BM25Retriever``'s
  ``query_threads``): the passages cut in ranges of corpus order, one thread each, every range
  starting from the whole corpus's first threshold and each writing its own k-th best score
  where the others read it (any range's k-th best real score is a lower bound of the corpus's
  k-th best). Chosen because a question's essential postings cannot be cut on one core
  (``benchmarks/bm25_floor.py``: ~818,000 at 21M passages even with the final threshold known),
  but they can be shared between cores; the ranges' time summed is 0.9-1.8x the whole
  question's (more with more ranges: 2 to 32 at 300k-3M), the wall time falls
  (``benchmarks/bm25_split.py``).

**Exactness.** A passage's final score is the float32 sum of its term scores **in query
order**, repeats included: the additions exhaustive scoring makes, so scores are equal bit for
bit. Every comparison of a bound against ``theta`` leaves the rounding margin of
:func:`~searchgym.corpora.pruning._margin`, so a passage is dropped only when its exact score is
strictly below the k-th best. Passages are visited in corpus order and one enters a full top k
only with a strictly higher score than the worst kept (worst: lowest score, then latest
passage), so ties at the k-th place keep the earliest passages, as exhaustive scoring's
ranking does (score descending, ties in corpus order, positive scores only). A query with a
negative score in one of its lists (no bound holds) is answered by the caller's exhaustive
scoring (the kernel returns -1).
"""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np

from searchgym.corpora.pruning import BLOCK, block_maxima
from searchgym.corpora.threads import LazyThreadPool

__all__ = ["BLOCK", "PRIME", "SLICE_MIN", "BlockMaxIndex", "available", "block_maxima"]

#: A list this long or longer is added only after checking whether the lists left could be
#: looked up instead (the check, a pass over the passages touched, costs about that much).
CHECK_FROM = 2048
#: Passages scored in full before the traversal to set its first threshold (see :func:`_prime`):
#: the passages of the query's rarest lists, while they add up to at most this many. 0: none.
PRIME = 512
#: The fewest passages a slice of one query split across threads holds
#: (:class:`~searchgym.corpora.bm25.BM25Retriever`'s ``query_threads``): measured on 2 cores,
#: 300k passages in 2 slices answered no faster than in one (0.61-0.67 against 0.57-0.68 ms a
#: question, k=10: the threads' hand-off costs what the split saves), 1M and 3M faster
#: (``benchmarks/bm25_split.py``).
SLICE_MIN = 500_000

try:  # the optional extra: without it, searchgym.corpora.pruning's numpy MaxScore answers
    import numba as _numba
except ImportError:  # pragma: no cover - depends on the environment
    _numba = None


def available() -> bool:
    """Whether the compiled engine can run (numba is installed)."""
    return _numba is not None


def _margin(additions: int) -> float:
    # pruning._margin's value (not imported: a private name of another module)
    return 4.0 * (additions + 1) * 2.0**-24


if _numba is not None:
    _jit = _numba.njit(nogil=True, cache=True)

    @_jit
    def _one(terms, k, data, indices, indptr, term_max, bptr, bmax, blast, block, prime, out_docs, out_scores, stats):
        """Top ``k`` of one query (``terms``: its term ids in query order, repeats kept) into
        ``out_docs`` / ``out_scores`` (ranked); returns how many, or -1 when a bound is infinite."""
        # shared None: numba compiles this call without the threshold-sharing branches
        return _slice(terms, k, data, indices, indptr, term_max, bptr, bmax, blast, block, prime, 0, np.int64(1) << 62, None, 0,
                      out_docs, out_scores, stats)

    @_jit
    def _slice(terms, k, data, indices, indptr, term_max, bptr, bmax, blast, block, prime, dlo, dhi, shared, slot, out_docs,
               out_scores, stats):
        """:func:`_one` over the passages ``dlo <= d < dhi`` only: the top ``k`` of that slice, or
        more exactly every passage of it that can be in the whole corpus's top ``k``. Slices run at
        once on several threads (:meth:`BlockMaxIndex.top_k_split`) share their thresholds through
        ``shared``: this one writes its own to ``shared[slot]`` and reads the others' (None: alone). A slice's
        k-th best real score is a lower bound of the whole corpus's k-th best, so the largest of
        them prunes every slice, exactly; a value read late is only a lower one (less pruning)."""
        m = len(terms)
        # distinct terms and how often each occurs
        uterm = np.empty(m, np.int64)
        mult = np.zeros(m, np.float64)
        qmap = np.empty(m, np.int64)  # query position -> distinct index (before sorting)
        n = 0
        for p in range(m):
            t = terms[p]
            j = 0
            while j < n and uterm[j] != t:
                j += 1
            if j == n:
                uterm[n] = t
                n += 1
            mult[j] += 1.0
            qmap[p] = j
        bound = np.empty(n, np.float64)
        for j in range(n):
            tm = np.float64(term_max[uterm[j]])
            if not np.isfinite(tm):
                return -1
            bound[j] = mult[j] * tm
        # sort the distinct terms by bound, lowest first (insertion sort: a few terms)
        order = np.arange(n)
        for a in range(1, n):
            x = order[a]
            b = a - 1
            while b >= 0 and bound[order[b]] > bound[x]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        rank = np.empty(n, np.int64)
        for a in range(n):
            rank[order[a]] = a
        sterm = np.empty(n, np.int64)
        sbound = np.empty(n, np.float64)
        smult = np.empty(n, np.float64)
        for a in range(n):
            sterm[a] = uterm[order[a]]
            sbound[a] = bound[order[a]]
            smult[a] = mult[order[a]]
        for p in range(m):
            qmap[p] = rank[qmap[p]]
        prefix = np.empty(n, np.float64)  # bounds of terms 0..a added
        acc = 0.0
        for a in range(n):
            acc += sbound[a]
            prefix[a] = acc
        pos = np.empty(n, np.int64)
        end = np.empty(n, np.int64)
        bp = np.empty(n, np.int64)
        bend = np.empty(n, np.int64)
        for a in range(n):
            t = sterm[a]
            pos[a] = indptr[t] if dlo <= 0 else _gallop(indices, indptr[t], indptr[t + 1], dlo)
            end[a] = indptr[t + 1] if dhi >= np.int64(1) << 62 else _gallop(indices, pos[a], indptr[t + 1], dhi)
            bp[a] = bptr[t] + (pos[a] - indptr[t]) // block
            bend[a] = bptr[t + 1]
        up = 1.0 + _margin_nb(m)
        contrib = np.zeros(n, np.float32)
        theta0 = _prime(k, m, n, qmap, sterm, smult, pos, end, data, indices, prime, contrib)
        if shared is not None:
            shared[slot] = theta0
        hs = np.zeros(k, np.float32)  # the top k kept, unordered
        hd = np.zeros(k, np.int64)
        count = 0
        worst = 0
        theta = theta0  # a passage whose bound (times up) is below theta cannot enter
        fe = 0  # terms below fe are non-essential
        big = np.int64(1) << 62
        cdoc = np.empty(n, np.int64)  # each essential list's current passage (big: ended)
        for a in range(n):
            cdoc[a] = np.int64(indices[pos[a]]) if pos[a] < end[a] else big
        fe_seen = -1
        nd = big
        while True:
            if shared is not None:  # the other slices' thresholds (any of them is a lower bound)
                for j in range(len(shared)):
                    if shared[j] > theta:
                        theta = shared[j]
            while fe < n and prefix[fe] * up < theta:
                fe += 1
            if fe == n:
                break
            if fe != fe_seen:  # the essential lists changed: their least current passage again
                d = big
                for a in range(fe, n):
                    if cdoc[a] < d:
                        d = cdoc[a]
                fe_seen = fe
            else:
                d = nd
            if d == big:
                break
            stats[0] += 1  # candidates
            # (A block-max check over every list before scoring d, skipping to the nearest block
            # end when the blocks' maxima cannot reach theta, was tried and dropped: it cost a
            # quarter of the time and skipped almost nothing here, since a rare list is a single
            # block whose maximum is its bound; the block maxima pay in the lookups below.)
            # One pass over the essential lists scores d and finds the next candidate; each
            # list's current passage is kept in cdoc, so no list is read twice.
            s = 0.0
            nd = big
            for a in range(fe, n):
                v = cdoc[a]
                if v == d:
                    p = pos[a]
                    c = data[p]
                    contrib[a] = c
                    s += smult[a] * np.float64(c)
                    p += 1
                    pos[a] = p
                    v = np.int64(indices[p]) if p < end[a] else big
                    cdoc[a] = v
                else:
                    contrib[a] = 0.0
                if v < nd:
                    nd = v
            ub = s + (prefix[fe - 1] if fe > 0 else 0.0)
            alive = True
            for a in range(fe - 1, -1, -1):
                if ub * up < theta:
                    alive = False
                    break
                contrib[a] = 0.0
                p = pos[a]
                if p == end[a]:  # the list has ended
                    ub -= sbound[a]
                    continue
                v = indices[p]
                if v >= d:  # the cursor is at or past d already: no block or search needed
                    if v == d:
                        c = data[p]
                        contrib[a] = c
                        ub = ub - sbound[a] + smult[a] * np.float64(c)
                    else:
                        ub -= sbound[a]
                    continue
                while bp[a] < bend[a] and blast[bp[a]] < d:
                    bp[a] += 1
                if bp[a] == bend[a]:  # the list ends before d
                    ub -= sbound[a]
                    continue
                bb = smult[a] * np.float64(bmax[bp[a]])
                ub = ub - sbound[a] + bb
                if ub * up < theta:
                    alive = False
                    break
                # d is in this block's range: binary search from the cursor
                t = sterm[a]
                lo = indptr[t] + (bp[a] - bptr[t]) * block
                if lo < pos[a]:
                    lo = pos[a]
                hi = indptr[t] + (bp[a] - bptr[t] + 1) * block
                if hi > end[a]:
                    hi = end[a]
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if indices[mid] < d:
                        lo = mid + 1
                    else:
                        hi = mid
                pos[a] = lo
                stats[3] += 1  # lookups
                if lo < end[a] and indices[lo] == d:
                    c = data[lo]
                    contrib[a] = c
                    ub = ub - bb + smult[a] * np.float64(c)
                else:
                    ub -= bb
            if not alive:
                continue
            stats[2] += 1  # scored in full
            score = np.float32(0.0)
            for p in range(m):  # query order, repeats included: exhaustive scoring's additions
                score = np.float32(score + contrib[qmap[p]])
            if count < k:
                if score > 0:
                    hs[count] = score
                    hd[count] = d
                    count += 1
                    if count == k:
                        worst = _worst(hs, hd, k)
                        theta = max(theta, np.float64(hs[worst]))
                        if shared is not None:
                            shared[slot] = theta
            elif score > hs[worst]:
                hs[worst] = score
                hd[worst] = d
                worst = _worst(hs, hd, k)
                if np.float64(hs[worst]) > theta:
                    theta = np.float64(hs[worst])
                    if shared is not None:
                        shared[slot] = theta
        # rank: score descending, ties in corpus order
        for i in range(count):
            best = i
            for j in range(i + 1, count):
                if hs[j] > hs[best] or (hs[j] == hs[best] and hd[j] < hd[best]):
                    best = j
            hs[i], hs[best] = hs[best], hs[i]
            hd[i], hd[best] = hd[best], hd[i]
            out_docs[i] = hd[i]
            out_scores[i] = hs[i]
        return count

    @_jit
    def _prime(k, m, n, qmap, sterm, smult, pos, end, data, indices, prime, contrib):
        """A first threshold: the k-th best **exact** score of the passages of the rarest lists
        (highest bounds first, while they hold at most ``prime`` postings in all). Those are
        real passages' final scores, so the k-th best of the whole corpus is at least that: no
        passage below it can enter the top k, and pruning starts at once instead of waiting for
        the traversal to meet good passages (on questions of 8-15 terms, most of the cost).
        0.0 when fewer than k passages are found."""
        total = 0
        last = n
        while last > 0 and total + (end[last - 1] - pos[last - 1]) <= prime:
            last -= 1
            total += end[last] - pos[last]
        if total < k or prime <= 0:
            return 0.0
        docs = np.empty(total, np.int64)
        j = 0
        for a in range(last, n):
            for p in range(pos[a], end[a]):
                docs[j] = indices[p]
                j += 1
        docs.sort()
        cur = pos.copy()
        best = np.zeros(k, np.float32)  # the k best scores met, unordered
        found = 0
        prev = -1
        for i in range(total):
            d = docs[i]
            if d == prev:
                continue
            prev = d
            for a in range(n):  # each list's cursor moves forward: galloping, then binary search
                lo = cur[a]
                step = 1
                hi = lo
                while hi < end[a] and indices[hi] < d:
                    lo = hi + 1
                    hi = hi + step
                    step <<= 1
                if hi > end[a]:
                    hi = end[a]
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if indices[mid] < d:
                        lo = mid + 1
                    else:
                        hi = mid
                cur[a] = lo
                contrib[a] = data[lo] if lo < end[a] and indices[lo] == d else np.float32(0.0)
            score = np.float32(0.0)
            for p in range(m):
                score = np.float32(score + contrib[qmap[p]])
            if found < k:
                best[found] = score
                found += 1
            else:
                w = 0
                for i2 in range(1, k):
                    if best[i2] < best[w]:
                        w = i2
                if score > best[w]:
                    best[w] = score
        if found < k:
            return 0.0
        low = best[0]
        for i2 in range(1, k):
            if best[i2] < low:
                low = best[i2]
        return np.float64(low)

    @_jit
    def _sorted_terms(terms, term_max):
        """The query's distinct terms sorted by bound, lowest first: (sterm, sbound, smult, qmap,
        prefix) with ``qmap`` each query position's index there and ``prefix[a]`` the bounds of
        terms ``0..a`` added; ``sterm`` is empty when a bound is infinite."""
        m = len(terms)
        uterm = np.empty(m, np.int64)
        mult = np.zeros(m, np.float64)
        qmap = np.empty(m, np.int64)
        n = 0
        for p in range(m):
            t = terms[p]
            j = 0
            while j < n and uterm[j] != t:
                j += 1
            if j == n:
                uterm[n] = t
                n += 1
            mult[j] += 1.0
            qmap[p] = j
        bound = np.empty(n, np.float64)
        for j in range(n):
            tm = np.float64(term_max[uterm[j]])
            if not np.isfinite(tm):
                return uterm[:0], bound[:0], mult[:0], qmap, bound[:0]
            bound[j] = mult[j] * tm
        order = np.arange(n)
        for a in range(1, n):
            x = order[a]
            b = a - 1
            while b >= 0 and bound[order[b]] > bound[x]:
                order[b + 1] = order[b]
                b -= 1
            order[b + 1] = x
        rank = np.empty(n, np.int64)
        for a in range(n):
            rank[order[a]] = a
        sterm = np.empty(n, np.int64)
        sbound = np.empty(n, np.float64)
        smult = np.empty(n, np.float64)
        for a in range(n):
            sterm[a] = uterm[order[a]]
            sbound[a] = bound[order[a]]
            smult[a] = mult[order[a]]
        for p in range(m):
            qmap[p] = rank[qmap[p]]
        prefix = np.empty(n, np.float64)
        acc = 0.0
        for a in range(n):
            acc += sbound[a]
            prefix[a] = acc
        return sterm, sbound, smult, qmap, prefix

    @_jit
    def _kth(values, count, k):
        """The k-th largest of ``values[:count]`` (count >= k), by a size-k min-heap scan."""
        heap = np.empty(k, np.float64)
        for i in range(k):
            heap[i] = values[i]
        for i in range(k // 2 - 1, -1, -1):
            _sift(heap, i, k)
        for i in range(k, count):
            v = values[i]
            if v > heap[0]:
                heap[0] = v
                _sift(heap, 0, k)
        return heap[0]

    @_jit
    def _sift(heap, i, k):
        while True:
            low = i
            l = 2 * i + 1
            r = l + 1
            if l < k and heap[l] < heap[low]:
                low = l
            if r < k and heap[r] < heap[low]:
                low = r
            if low == i:
                return
            heap[i], heap[low] = heap[low], heap[i]
            i = low

    @_jit
    def _gallop(indices, lo, end, d):
        """The first position in ``indices[lo:end]`` (ascending) at or after passage ``d``."""
        step = 1
        hi = lo
        while hi < end and indices[hi] < d:
            lo = hi + 1
            hi = hi + step
            step <<= 1
        if hi > end:
            hi = end
        while lo < hi:
            mid = (lo + hi) >> 1
            if indices[mid] < d:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @_jit
    def _taat(terms, k, data, indices, indptr, term_max, buf, seen, prime, check, out_docs, out_scores, stats):
        """MaxScore term at a time, compiled: the lists with the highest bounds are added into the
        thread's dense accumulator ``buf`` (``seen`` marks the passages touched) until the bounds
        of the lists left cannot reach ``theta``; those are then looked up for the passages still
        in the running only; the survivors' exact scores are summed in query order. Same result
        as :func:`_one`; returns the count, or -1 when a bound is infinite."""
        m = len(terms)
        sterm, sbound, smult, qmap, prefix = _sorted_terms(terms, term_max)
        n = len(sterm)
        if n == 0:
            return -1
        up = 1.0 + _margin_nb(m)
        pos = np.empty(n, np.int64)
        end = np.empty(n, np.int64)
        total = 0
        for a in range(n):
            pos[a] = indptr[sterm[a]]
            end[a] = indptr[sterm[a] + 1]
            total += end[a] - pos[a]
        contrib = np.zeros(n, np.float32)
        theta = _prime(k, m, n, qmap, sterm, smult, pos, end, data, indices, prime, contrib)
        touched = np.empty(total, np.int64)
        t_count = 0
        partial = np.empty(0, np.float64)
        stop = n - 1  # lists 0..stop are not added
        while stop >= 0:
            if t_count > 0:
                if end[stop] - pos[stop] >= check and t_count >= k:
                    if len(partial) < t_count:
                        partial = np.empty(total, np.float64)
                    for i in range(t_count):
                        partial[i] = buf[touched[i]]
                    kth = _kth(partial, t_count, k) / up
                    if kth > theta:
                        theta = kth
                if prefix[stop] * up < theta:
                    break
            a = stop
            w = smult[a]
            for p in range(pos[a], end[a]):
                d = indices[p]
                if seen[d] == 0:
                    seen[d] = 1
                    touched[t_count] = d
                    t_count += 1
                buf[d] += np.float32(w) * data[p] if w != 1.0 else data[p]
            stats[2] += end[a] - pos[a]  # postings added
            stop -= 1
        rest = prefix[stop] if stop >= 0 else 0.0
        cand = np.empty(t_count, np.int64)
        part = np.empty(t_count, np.float64)
        c_count = 0
        for i in range(t_count):
            d = touched[i]
            v = np.float64(buf[d])
            if (v * up + rest) * up >= theta:
                cand[c_count] = d
                part[c_count] = v
                c_count += 1
            buf[d] = 0.0
            seen[d] = 0
        order = np.argsort(cand[:c_count])
        cand = cand[:c_count][order]
        part = part[:c_count][order]
        stats[0] += c_count  # candidates
        if stop >= 0 and c_count > 0:
            # The lists not added, highest bound first, looked up for the candidates only; after
            # each, theta rises to the k-th best partial score and the candidates whose partial
            # score plus the bounds left cannot reach it are dropped. The added lists' part is
            # the accumulator's float32 sum (in bound order): used with its rounding margin.
            low = part / up
            high = part * up
            for a in range(stop, -1, -1):
                c = pos[a]
                for i in range(c_count):
                    d = cand[i]
                    c = _gallop(indices, c, end[a], d)
                    if c < end[a] and indices[c] == d:
                        x = smult[a] * np.float64(data[c])
                        low[i] += x
                        high[i] += x
                stats[3] += c_count  # lookups
                if c_count >= k:
                    kth = _kth(low, c_count, k) / up
                    if kth > theta:
                        theta = kth
                left = prefix[a - 1] if a > 0 else 0.0
                j = 0
                for i in range(c_count):
                    if (high[i] + left) * up >= theta:
                        cand[j] = cand[i]
                        low[j] = low[i]
                        high[j] = high[i]
                        j += 1
                c_count = j
        # exact scores in query order for the candidates (every list looked up)
        hs = np.zeros(k, np.float32)
        hd = np.zeros(k, np.int64)
        count = 0
        worst = 0
        cur = pos.copy()
        for i in range(c_count):
            d = cand[i]
            for a in range(n):
                c = _gallop(indices, cur[a], end[a], d)
                cur[a] = c
                contrib[a] = data[c] if c < end[a] and indices[c] == d else np.float32(0.0)
            score = np.float32(0.0)
            for p in range(m):
                score = np.float32(score + contrib[qmap[p]])
            stats[1] += 1  # scored in full
            if count < k:
                if score > 0:
                    hs[count] = score
                    hd[count] = d
                    count += 1
                    if count == k:
                        worst = _worst(hs, hd, k)
            elif score > hs[worst]:
                hs[worst] = score
                hd[worst] = d
                worst = _worst(hs, hd, k)
        for i in range(count):
            best = i
            for j in range(i + 1, count):
                if hs[j] > hs[best] or (hs[j] == hs[best] and hd[j] < hd[best]):
                    best = j
            hs[i], hs[best] = hs[best], hs[i]
            hd[i], hd[best] = hd[best], hd[i]
            out_docs[i] = hd[i]
            out_scores[i] = hs[i]
        return count

    @_jit
    def _many_taat(qptr, qterms, k, data, indices, indptr, term_max, buf, seen, prime, check, out_docs, out_scores, out_count, stats):
        for i in range(len(qptr) - 1):
            out_count[i] = _taat(qterms[qptr[i] : qptr[i + 1]], k, data, indices, indptr, term_max, buf, seen, prime, check,
                                 out_docs[i], out_scores[i], stats)

    @_jit
    def _seek(a, target, pos, end, bp, bend, sterm, indptr, bptr, blast, indices, block):
        """Move list ``a``'s cursor (and block) to its first posting at or after ``target``."""
        b = bp[a]
        while b < bend[a] and blast[b] < target:
            b += 1
        bp[a] = b
        if b == bend[a]:
            pos[a] = end[a]
            return
        t = sterm[a]
        lo = indptr[t] + (b - bptr[t]) * block
        if lo < pos[a]:
            lo = pos[a]
        hi = indptr[t] + (b - bptr[t] + 1) * block
        if hi > end[a]:
            hi = end[a]
        while lo < hi:
            mid = (lo + hi) >> 1
            if indices[mid] < target:
                lo = mid + 1
            else:
                hi = mid
        pos[a] = lo

    @_jit
    def _margin_nb(additions):
        return 4.0 * (additions + 1) * 2.0**-24

    @_jit
    def _worst(hs, hd, k):
        w = 0
        for i in range(1, k):
            if hs[i] < hs[w] or (hs[i] == hs[w] and hd[i] > hd[w]):
                w = i
        return w

    @_jit
    def _many(qptr, qterms, k, data, indices, indptr, term_max, bptr, bmax, blast, block, prime, out_docs, out_scores, out_count, stats):
        """:func:`_one` for every query ``i`` (terms ``qterms[qptr[i]:qptr[i+1]]``), in one call."""
        for i in range(len(qptr) - 1):
            out_count[i] = _one(qterms[qptr[i] : qptr[i + 1]], k, data, indices, indptr, term_max, bptr, bmax, blast, block, prime,
                                out_docs[i], out_scores[i], stats)


    @_jit
    def _first_threshold(terms, k, data, indices, indptr, term_max, prime):
        """:func:`_prime`'s threshold over the whole corpus, for slices to start from: a slice's
        own priming sees only its share of the rarest lists' passages."""
        sterm, sbound, smult, qmap, prefix = _sorted_terms(terms, term_max)
        n = len(sterm)
        if n == 0:
            return 0.0
        pos = np.empty(n, np.int64)
        end = np.empty(n, np.int64)
        for a in range(n):
            pos[a] = indptr[sterm[a]]
            end[a] = indptr[sterm[a] + 1]
        contrib = np.zeros(n, np.float32)
        return _prime(k, len(terms), n, qmap, sterm, smult, pos, end, data, indices, prime, contrib)

    @_jit
    def _merge(docs, scores, counts, k, out_docs, out_scores):
        """The top ``k`` (score descending, ties in corpus order) of the slices' answers."""
        total = 0
        for i in range(len(counts)):
            total += counts[i]
        d = np.empty(total, np.int64)
        s = np.empty(total, np.float32)
        j = 0
        for i in range(len(counts)):
            for r in range(counts[i]):
                d[j] = docs[i, r]
                s[j] = scores[i, r]
                j += 1
        by_doc = np.argsort(d)  # a passage is in one slice only
        d = d[by_doc]
        s = s[by_doc]
        order = np.argsort(-s, kind="mergesort")  # stable: ties stay in corpus order
        count = min(k, total)
        for i in range(count):
            out_docs[i] = d[order[i]]
            out_scores[i] = s[order[i]]
        return count


class BlockMaxIndex:
    """The compiled engine over one posting matrix: its block maxima (``blocks``, as
    :func:`block_maxima` gives them at ``block`` postings a block, read from the index folder;
    computed here when not given), per-thread accumulators and the kernels. :meth:`top_k_many`
    answers queries given as term-id lists.

    ``algorithm``: ``"daat"`` (default: block-max MaxScore document at a time, :func:`_one`) or
    ``"taat"`` (MaxScore term at a time into a dense per-thread accumulator, :func:`_taat`). Both
    give the same top k. Document at a time is the default because it was measured faster on
    Search-R1's questions, side by side (300k passages, k=10: 0.80 against 1.02 ms a query; 1M:
    2.13 against 3.12 ms; benchmarks/RESULTS.md, issue 67): their 8-15 terms are mostly of
    middling frequency with bounds close together, and term at a time, once the essential lists
    are added, must still look up most of the passages they touch, while document at a time
    raises the threshold as it goes and tightens each bound with the block maxima before a
    lookup. Term at a time is kept for comparison (``benchmarks/engines.py`` does not use it).
    """

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, term_max: np.ndarray, block: int = BLOCK,
                 prime: int = PRIME, *, num_docs: int | None = None, algorithm: str = "daat", check: int = CHECK_FROM,
                 blocks: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None):
        if _numba is None:
            raise RuntimeError("BlockMaxIndex needs numba (pip install 'searchgym[fast]')")
        if algorithm not in ("taat", "daat"):
            raise ValueError(f"BlockMaxIndex expects algorithm 'taat' or 'daat', got {algorithm!r}")
        self.data, self.indices = data, indices
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.term_max = np.asarray(term_max, dtype=np.float32)
        self.block = int(block)
        self.prime = int(prime)
        self.check = int(check)
        self.algorithm = algorithm
        self.num_docs = int(num_docs if num_docs is not None else (int(np.max(indices)) + 1 if len(indices) else 0))
        if blocks is None:
            blocks = block_maxima(data, indices, self.indptr, self.block)
        else:  # the shapes the kernel relies on (the files' own sizes were checked when loaded)
            bptr, bmax, blast = blocks
            if len(bptr) != len(self.indptr) or not int(bptr[-1]) == len(bmax) == len(blast):
                raise ValueError(f"BlockMaxIndex expects blocks of {len(self.indptr) - 1} terms, got {len(bptr) - 1} terms, "
                                 f"{int(bptr[-1])} blocks and {len(bmax)} maxima")
        self.bptr, self.bmax, self.blast = blocks
        self._local = threading.local()
        self._pool = LazyThreadPool("searchgym-slice")  # top_k_split's threads, made on first use

    @property
    def nbytes(self) -> int:
        return int(self.bptr.nbytes + self.bmax.nbytes + self.blast.nbytes)

    def _scratch(self) -> tuple[np.ndarray, np.ndarray]:
        """This thread's accumulator and touched marks (all zeros between queries)."""
        got = getattr(self._local, "scratch", None)
        if got is None:
            got = self._local.scratch = (np.zeros(self.num_docs, np.float32), np.zeros(self.num_docs, np.uint8))
        return got

    def top_k_split(self, terms: list[int], k: int, slices: int, stats: np.ndarray | None = None, *, parallel: bool = True,
                    floor: float = 0.0, seconds: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
        """One query's ``(docs [k], scores [k], count)`` with its passages split in ``slices``
        ranges of corpus order, each on its own thread (``"daat"`` only), sharing their thresholds;
        the very same answer as :meth:`top_k_many`. For one query at a time on several cores, what
        Lucene's ``IndexSearcher`` does with an executor over its index's slices. Every slice starts
        from the whole corpus's first threshold (:func:`_prime` once, not a priming a slice); the
        work of one query grows a little (a slice meets candidates before the others' thresholds
        reach it), its wall time falls as the cores grow (``benchmarks/bm25_split.py``). ``stats`` as in :meth:`top_k_many`, summed over slices.

        For measuring what more cores than this machine has would give: ``parallel=False`` runs
        the slices one after the other on the calling thread, each alone (no threshold passed
        between them): the longest is one core's share when the thresholds reach the other
        threads late. ``floor``, a lower bound of the k-th best score known beforehand (e.g. the
        answer's own k-th score, for the other extreme: thresholds shared at once), starts every
        slice from it; one above the k-th best score loses passages. ``seconds``, a float64 array
        of ``slices`` when given, receives each slice's time."""
        if self.algorithm != "daat":
            raise ValueError("BlockMaxIndex.top_k_split runs document at a time: build the engine with algorithm='daat'")
        if not isinstance(slices, int) or isinstance(slices, bool) or slices < 1:
            raise ValueError(f"BlockMaxIndex.top_k_split expects slices to be a positive integer, got {slices!r}")
        if seconds is not None and (seconds.dtype != np.float64 or seconds.shape != (slices,)):
            raise ValueError(f"BlockMaxIndex.top_k_split expects seconds to be a float64 array of {slices}, "
                             f"got {seconds.dtype} {seconds.shape}")
        qterms = np.fromiter(terms, np.int64, len(terms))
        docs = np.zeros((slices, k), dtype=np.int64)
        scores = np.zeros((slices, k), dtype=np.float32)
        counts = np.zeros(slices, dtype=np.int64)
        own = np.zeros((slices, 4), dtype=np.int64)
        prime = self.prime
        if slices > 1:  # the whole corpus's first threshold, instead of each slice priming on its share
            floor = max(floor, _first_threshold(qterms, k, self.data, self.indices, self.indptr, self.term_max, self.prime))
            prime = 0
        shared = np.zeros(slices + 1, dtype=np.float64)  # a slot a slice, and the floor
        shared[slices] = floor
        cuts = [self.num_docs * i // slices for i in range(slices)] + [np.int64(1) << 62]

        def run(i: int) -> None:
            start = time.perf_counter()
            # alone: its own slot and the floor only
            share, slot = (shared, i) if parallel else (np.array([0.0, floor]), 0)
            counts[i] = _slice(qterms, k, self.data, self.indices, self.indptr, self.term_max, self.bptr, self.bmax, self.blast,
                               self.block, prime, cuts[i], cuts[i + 1], share, slot, docs[i], scores[i], own[i])
            if seconds is not None:
                seconds[i] = time.perf_counter() - start

        if slices == 1 or not parallel:
            for i in range(slices):
                run(i)
        else:
            # the calling thread takes the first slice itself: one hand-off fewer
            pending = [self._pool.get(slices - 1).submit(run, i) for i in range(1, slices)]
            run(0)
            for job in pending:
                job.result()
        if stats is not None:
            stats += own.sum(axis=0)
        out_docs = np.zeros(k, dtype=np.int64)
        out_scores = np.zeros(k, dtype=np.float32)
        if (counts < 0).any():
            return out_docs, out_scores, -1
        count = _merge(docs, scores, counts, k, out_docs, out_scores)
        return out_docs, out_scores, int(count)

    def top_k_many(self, queries: list[list[int]], k: int, stats: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(docs [Q, k] int64, scores [Q, k] float32, counts [Q] int64)``; a count of -1 marks a
        query the caller must score exhaustively (a list with a negative score). ``stats``, an
        int64 array of 4 when given, counts candidates, passages scored in full (``taat``; block
        skips for ``daat``), postings added (``taat``; passages scored in full for ``daat``) and
        lookups (for benchmarks and tests)."""
        q = len(queries)
        # Both from C-level iterators: np.cumsum over a Python list and a generator expression
        # cost 7.4 us for one question of 7 terms, these 2.0 us (one at a time, it is paid per query).
        qptr = np.fromiter(itertools.accumulate(map(len, queries), initial=0), np.int64, q + 1)
        qterms = np.fromiter(itertools.chain.from_iterable(queries), np.int64, int(qptr[-1]))
        docs = np.zeros((q, k), dtype=np.int64)
        scores = np.zeros((q, k), dtype=np.float32)
        counts = np.zeros(q, dtype=np.int64)
        if stats is None:
            stats = np.zeros(4, dtype=np.int64)
        if self.algorithm == "taat":
            buf, seen = self._scratch()
            _many_taat(qptr, qterms, k, self.data, self.indices, self.indptr, self.term_max, buf, seen, self.prime, self.check,
                       docs, scores, counts, stats)
        else:
            _many(qptr, qterms, k, self.data, self.indices, self.indptr, self.term_max, self.bptr, self.bmax, self.blast,
                  self.block, self.prime, docs, scores, counts, stats)
        return docs, scores, counts
