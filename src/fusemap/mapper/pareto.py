"""Pareto pruning inside groups: keep the rows no other row of their group dominates.

A row dominates another when it is no worse in every criterion (smaller is better).
Of rows equal in every criterion the first (in input order) is kept, so results do
not depend on anything but the input order.
"""

from __future__ import annotations

import numba
import numpy as np

from .distinct import first_codes


@numba.njit(cache=True)
def _varying(crit: np.ndarray) -> np.ndarray:
    """Per column, whether it takes two values (one pass, stopping at the first change)."""
    n, k = crit.shape
    out = np.zeros(k, dtype=np.bool_)
    for c in range(k):
        first = crit[0, c]
        for i in range(1, n):
            if crit[i, c] != first:
                out[c] = True
                break
    return out


@numba.njit(cache=True)
def _fronts(groups: np.ndarray, crit: np.ndarray, rows: np.ndarray, n_groups: int) -> np.ndarray:
    """One pass in input order, keeping a linked list of the current front per group.
    Row ``i`` has the criteria ``crit[rows[i]]``."""
    return _fronts_into(groups, crit, rows, np.full(n_groups, -1, dtype=np.int64))


@numba.njit(cache=True)
def _fronts_into(groups: np.ndarray, crit: np.ndarray, rows: np.ndarray, head: np.ndarray):
    """:func:`_fronts` with the list heads in ``head`` (-1 per group, left as found)."""
    n = len(groups)
    k = crit.shape[1]
    nxt = np.full(n, -1, dtype=np.int64)
    keep = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        g = groups[i]
        ri = rows[i]
        dominated = False
        prev = -1
        j = head[g]
        while j != -1:
            rj = rows[j]
            j_le = True  # row j is no worse than row i everywhere
            i_le = True
            for c in range(k):
                if crit[rj, c] > crit[ri, c]:
                    j_le = False
                if crit[ri, c] > crit[rj, c]:
                    i_le = False
            if j_le:
                dominated = True
                break
            following = nxt[j]
            if i_le:  # row i dominates row j: drop j from the front
                keep[j] = False
                if prev == -1:
                    head[g] = following
                else:
                    nxt[prev] = following
            else:
                prev = j
            j = following
        if not dominated:
            keep[i] = True
            nxt[i] = head[g]
            head[g] = i
    for i in range(n):
        head[groups[i]] = -1
    return keep


@numba.njit(cache=True)
def _staircase_fronts(order: np.ndarray, groups: np.ndarray, crit: np.ndarray) -> np.ndarray:
    """Three criteria or fewer: visit rows by group, then lexicographically, so a row can
    only be dominated by an earlier one, which is the case iff the 2-D staircase of the
    earlier rows' last two criteria has a point below-left of it. O(n log front)."""
    n = len(order)
    keep = np.zeros(n, dtype=np.bool_)
    st1 = np.empty(n)
    st2 = np.empty(n)  # st1 increasing, st2 strictly decreasing
    size = 0
    prev = -1
    for t in range(n):
        i = order[t]
        if groups[i] != prev:
            prev = groups[i]
            size = 0
        a = crit[i, 1]
        b = crit[i, 2]
        lo = 0
        hi = size
        while lo < hi:  # first point with st1 > a
            mid = (lo + hi) // 2
            if st1[mid] <= a:
                lo = mid + 1
            else:
                hi = mid
        if lo > 0 and st2[lo - 1] <= b:
            continue
        keep[i] = True
        start = lo - 1 if lo > 0 and st1[lo - 1] == a else lo
        end = lo
        while end < size and st2[end] >= b:
            end += 1
        removed = end - start
        if removed == 0:  # open a slot at ``start``
            for q in range(size, start, -1):
                st1[q] = st1[q - 1]
                st2[q] = st2[q - 1]
            size += 1
        elif removed > 1:  # close the gap after ``start``
            for q in range(end, size):
                st1[q - removed + 1] = st1[q]
                st2[q - removed + 1] = st2[q]
            size -= removed - 1
        st1[start] = a
        st2[start] = b
    return keep


@numba.njit(cache=True)
def _before(groups: np.ndarray, crit: np.ndarray, i: int, j: int) -> bool:
    """Row ``i`` comes before row ``j``: by group, then criteria, then input order."""
    if groups[i] != groups[j]:
        return groups[i] < groups[j]
    for c in range(crit.shape[1]):
        if crit[i, c] != crit[j, c]:
            return crit[i, c] < crit[j, c]
    return i < j


@numba.njit(cache=True)
def _lex_order(groups: np.ndarray, crit: np.ndarray, n_groups: int) -> np.ndarray:
    """Row order by (group, criteria..., row): a stable sort on the first criterion, a
    stable counting sort on the group, then a full sort of the (short) runs of equal
    group and first criterion (np.lexsort is several times slower on float keys)."""
    n = len(groups)
    by_first = np.argsort(crit[:, 0], kind="mergesort")
    start = np.zeros(n_groups + 1, dtype=np.int64)
    for i in range(n):
        start[groups[i] + 1] += 1
    for g in range(n_groups):
        start[g + 1] += start[g]
    order = np.empty(n, dtype=np.int64)
    for i in by_first:
        order[start[groups[i]]] = i
        start[groups[i]] += 1
    run = 0
    for k in range(1, n + 1):
        if (
            k == n
            or groups[order[k]] != groups[order[run]]
            or (crit[order[k], 0] != crit[order[run], 0])
        ):
            if k - run > 1:
                _merge_sort(order, run, k, groups, crit)
            run = k
    return order


@numba.njit(cache=True)
def _merge_sort(order: np.ndarray, lo: int, hi: int, groups: np.ndarray, crit: np.ndarray):
    """Sort ``order[lo:hi]`` by :func:`_before` (bottom-up merge sort)."""
    a = order[lo:hi].copy()
    b = np.empty_like(a)
    n = len(a)
    width = 1
    while width < n:
        for start in range(0, n, 2 * width):
            mid = min(start + width, n)
            end = min(start + 2 * width, n)
            i, j, k = start, mid, start
            while k < end:
                if j >= end or (i < mid and not _before(groups, crit, a[j], a[i])):
                    b[k] = a[i]
                    i += 1
                else:
                    b[k] = a[j]
                    j += 1
                k += 1
        a, b = b, a
        width *= 2
    order[lo:hi] = a


@numba.njit(cache=True)
def _largest_group(groups: np.ndarray, n_groups: int) -> int:
    count = np.zeros(n_groups, dtype=np.int64)
    most = 0
    for g in groups:
        count[g] += 1
        most = max(most, count[g])
    return most


SMALL_GROUP = 256
"""Up to this many rows per group, the one-pass linked-list front beats sorting (the
staircase pays for its sort); above it, a front can grow long enough to cost more."""


def pareto_mask(
    groups: np.ndarray, criteria: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """Boolean mask of the rows on the Pareto front of their group.

    With ``rows``, row ``i`` has the criteria ``criteria[rows[i]]`` (no gathered copy:
    many rows may share one source row, as after a closure step of the suffix search).
    """
    n = len(groups)
    if n == 0:
        return np.zeros(0, dtype=bool)
    crit = np.asarray(criteria, dtype=np.float64)
    crit = crit.reshape(len(crit) if rows is not None else n, -1)
    if crit.shape[1] > 1 and len(crit) > 0:  # a criterion equal in every row decides nothing
        varying = _varying(crit)
        if not varying.all():
            crit = crit[:, varying]
    crit = np.ascontiguousarray(crit)
    groups = np.asarray(groups, dtype=np.int64)
    top = int(groups.max()) + 1 if n else 0
    if groups.min() < 0 or top > max(4 * n, 1 << 20):
        groups, _ = first_codes(groups)  # numbered anew: a front is per group
        top = int(groups.max()) + 1
    if crit.shape[1] <= 3 and _largest_group(groups, top) > SMALL_GROUP:
        if rows is not None:
            crit = crit[rows]
        crit = np.concatenate([crit, np.zeros((n, 3 - crit.shape[1]))], axis=1)
        order = _lex_order(groups, crit, top)
        return _staircase_fronts(order, groups, crit)
    if rows is None:
        rows = np.arange(n, dtype=np.int64)
    return _fronts(groups, crit, np.asarray(rows, dtype=np.int64), top)


@numba.njit(cache=True)
def closure_front(
    state: np.ndarray,
    crit: np.ndarray,
    offsets: np.ndarray,
    sources: np.ndarray,
    stride: int,
    radix: int,
    head: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """A closure step and its Pareto pruning, without copying the expanded rows' criteria.

    Row ``i`` (code ``state[i]``, criteria ``crit[i]``) moves to every code whose digit
    ``(code // stride) % radix`` is one of ``sources[offsets[d]:offsets[d + 1]]`` (``d``:
    its own digit), in that order; the moved rows, taken in order, are pruned per code as
    :func:`_fronts` does. Returns the survivors' (codes, source rows), in order.
    ``head``: scratch of -1 per code, left as found."""
    n = len(state)
    total = 0
    for i in range(n):
        d = (state[i] // stride) % radix
        total += offsets[d + 1] - offsets[d]
    code = np.empty(total, dtype=np.int64)
    row = np.empty(total, dtype=np.int64)
    t = 0
    for i in range(n):
        d = (state[i] // stride) % radix
        for q in range(offsets[d], offsets[d + 1]):
            code[t] = state[i] + (sources[q] - d) * stride
            row[t] = i
            t += 1
    keep = _fronts_into(code, crit, row, head)
    out = np.flatnonzero(keep)
    return code[out], row[out]
