"""The set-associative L2 of the model (the default since session 2): expected bytes from stack distances.

With LRU inside each set and the other lines spread uniformly over the sets by a hashed
index, the lines touched since a line's last use that fall in its set are Poisson with mean
A·D/C (A ways, D the distinct bytes touched since, C the effective capacity), and the line is
gone once A of them have come: ``P(evicted) = P(Poisson(A·D/C) ≥ A)``. Source: the
random-set-mapping estimate of set-associative misses from stack distances (A. J. Smith, "A
comparative study of set associative memory mapping algorithms and their use for cache and
main memory", IEEE TSE 1978; M. D. Hill and A. J. Smith, "Evaluating associativity in CPU
caches", IEEE TC 1989). A → ∞ is the fully associative LRU (:mod:`iomodel.cache.lru`). The
fit of A is in ``docs/l2-calibration.md``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from iomodel.cache.params import MAX_L2_WAYS
from iomodel.errors import IomodelError

#: log(k) for k = 0 .. MAX_L2_WAYS (entry 0 unused): the Poisson terms of :func:`evict_probability`.
_LOG_INT = [0.0] + [math.log(k) for k in range(1, MAX_L2_WAYS + 1)]


def evict_probability(distance: float, capacity: float, ways: int | None) -> float:
    """Probability that a line is gone after ``distance`` bytes of other lines were touched.

    Set-associative LRU with hashed set indices (module doc): ``P(Poisson(A·D/C) ≥ A)`` for A =
    ``ways``, D = ``distance`` and C = ``capacity`` (read-equivalent bytes); ``ways=None`` is the
    fully associative LRU, 1 when D > C else 0.

    Args:
        distance: distinct bytes touched since the line's last use (stack distance, bytes).
        capacity: effective L2 bytes.
        ways: associativity A, or None.

    Returns:
        a probability in [0, 1].

    Source: A. J. Smith, IEEE TSE 1978; M. D. Hill and A. J. Smith, IEEE TC 1989 (random set
    mapping of a stack-distance trace).
    """
    if distance <= 0:
        return 0.0
    if ways is None:
        return 1.0 if distance > capacity else 0.0
    lam = ways * distance / capacity
    # far tails (beyond 12 standard deviations): 0 or 1 to double precision
    if lam >= ways + 12.0 * math.sqrt(lam) + 12.0:
        return 1.0
    if lam <= ways - 12.0 * math.sqrt(ways) - 12.0:
        return 0.0
    key = (lam, ways)
    p = _MEMO.get(key)
    if p is None:
        p = _MEMO[key] = _poisson_tail(lam, ways)
        if len(_MEMO) > _MEMO_SIZE:
            _MEMO.clear()
    return p


#: Memo of :func:`_poisson_tail` by (λ, A): equal stack distances recur within a kernel's
#: waves (same wave composition, same bytes); bounded so a long run cannot grow it without end.
_MEMO: dict[tuple[float, int], float] = {}
_MEMO_SIZE = 1 << 16


def _poisson_tail(lam: float, ways: int) -> float:
    """``P(Poisson(lam) >= ways)`` for λ = ``lam`` within 12 standard deviations of A = ``ways``.

    Exactly 1.0 when the Chernoff bound ``P(N <= A-1) <= e^-λ (eλ/(A-1))^(A-1)`` (λ > A-1) is below
    2^-60: the sum below would then round 1 − below to 1.0 in double precision anyway. Otherwise
    ``P(N < A) = Σ_{k<A} e^-λ λ^k / k!`` summed in log space (λ may exceed 700): the same terms in
    the same order as the un-memoised sum of commit 84c9807, so every result is the same double
    (the committed receipts' bytes are pinned by tests/test_reconcile_receipts.py).

    Source: the Chernoff bound of the Poisson lower tail (e.g. M. Mitzenmacher and E. Upfal,
    "Probability and Computing", Theorem 5.4).
    """
    log_lam = math.log(lam)
    a1 = ways - 1
    if a1 > 0 and lam > a1 and -lam + a1 * (1.0 + log_lam - _LOG_INT[a1]) < _LOG_TINY:
        return 1.0
    x = -lam
    logs = [x]
    append = logs.append
    for lk in _LOG_INT[1:ways]:
        x = x + log_lam - lk
        append(x)
    top = max(logs)
    exp = math.exp
    below = exp(top) * sum([exp(v - top) for v in logs])
    return min(1.0, max(0.0, 1.0 - below))


#: log(2^-60): below it the Poisson head cannot change 1 − below in double precision.
_LOG_TINY = -60.0 * math.log(2.0)


#: Points of the midpoint rule over an item's bytes at the kernel's end (:meth:`SetAssoc.finish`).
_ITEM_POINTS = 8
#: Dirty items from which :meth:`SetAssoc.finish` evaluates them with numpy (below, item by item:
#: numpy's import and call overhead outweigh a few items). A speed choice, not a model constant.
_VECTOR_MIN_ITEMS = 256


class SetAssoc:
    """Expected bytes of a set-associative LRU, from stack distances (see :func:`evict_probability`).

    Items carry bytes, a weight per byte (read data 1, written lines ``write_share``) and the
    fraction of their bytes still dirty. A read misses with the probability at ``read_capacity``
    (default ``capacity``: :data:`iomodel.cache.params.DEFAULT_L2_READ_FRACTION` in the model), a
    dirty line is written back with the one at ``capacity``; both from the same stack distance.
    Stack distances come from a Fenwick tree over access times holding each item's weighted bytes
    at its last use. Same interface as
    :class:`iomodel.cache.lru.LRU`; reads return expected (float) misses.

    Approximations: an item has one recency, so a touch of part of it (a later wave needing
    fewer key rows of a K/V chunk) refreshes all of its bytes; the ``whole`` flag of
    :class:`iomodel.schedule.grid.Access` has no effect here (every byte of an item shares one
    eviction probability).

    Raises:
        IomodelError: write_share outside (0, 1].
    """

    def __init__(self, capacity: int, write_share: float, ways: int, read_capacity: int | None = None) -> None:
        if not 0 < write_share <= 1:
            raise IomodelError(f"write_share must be in (0, 1], got {write_share}")
        self.capacity = float(capacity)  # C of a dirty line's write-back (read-equivalent bytes)
        self.read_capacity = float(capacity if read_capacity is None else read_capacity)  # C of a read miss
        self.write_share = write_share
        self.ways = ways
        self.items: dict[Any, list] = {}  # key -> [bytes, weight, last time, dirty fraction, tensor]
        self.groups: dict[tuple, list] = {}  # member keys -> [bytes per member, last time, their sum] (read groups)
        self.writeback: dict[str, float] = {}
        self._tree = [0.0] * 1025
        self._vals = [0.0] * 1024
        self._now = 0
        self._total = 0.0

    def _add(self, t: int, v: float) -> None:
        self._vals[t] += v
        tree = self._tree
        i = t + 1
        n = len(tree)
        while i < n:
            tree[i] += v
            i += i & -i

    def _grow(self) -> None:
        vals = self._vals + [0.0] * len(self._vals)
        self._vals = [0.0] * len(vals)
        self._tree = [0.0] * (len(vals) + 1)
        for t, v in enumerate(vals):
            if v:
                self._add(t, v)

    def _after(self, t: int) -> float:
        """Weighted bytes of the items used after time ``t``."""
        tree = self._tree
        i, below = t + 1, 0.0
        while i > 0:
            below += tree[i]
            i &= i - 1
        return max(0.0, self._total - below)

    def _touch(self, key: Any, tensor: str, weight: float) -> tuple[list, float]:
        """Take the item out of the stack; returns it and its eviction probability (1 when new).

        A line of an item scanned in order is touched again after every other line of the item
        and the D bytes of the items used since: its stack distance is D + the item's own bytes.
        """
        item = self.items.get(key)
        if item is None:
            item = [0, weight, -1, 0.0, tensor]
            self.items[key] = item
            return item, 1.0
        own = item[0] * item[1]
        dist = self._after(item[2]) + own
        p = evict_probability(dist, self.read_capacity, self.ways)
        self._add(item[2], -own)
        self._total -= own
        if item[3] > 0.0 and item[0]:  # dirty bytes evicted since the last use were written back
            pw = p if self.read_capacity == self.capacity else evict_probability(dist, self.capacity, self.ways)
            self.writeback[item[4]] = self.writeback.get(item[4], 0.0) + item[0] * item[3] * pw
            item[3] *= 1.0 - pw
        return item, p

    def _push(self, item: list) -> None:
        if self._now >= len(self._vals):
            self._grow()
        item[2] = self._now
        self._add(self._now, item[0] * item[1])
        self._total += item[0] * item[1]
        self._now += 1

    def read(self, key: Any, tensor: str, nbytes: int, whole: bool, weight: float = 1.0) -> float:
        """Touch ``nbytes`` of an item; returns the expected bytes that miss (read from HBM). ``weight``: the
        read-equivalent bytes one of its bytes occupies (1: a line every SM may read, held in both L2 partitions; the
        forward's Q, read by one program, :attr:`~iomodel.cache.params.L2Params.q_share`): a weight other than 1 is
        the item's from this read on, a read at 1 keeps the item's weight (a written item stays written-weighted)."""
        item, p = self._touch(key, tensor, weight)
        miss = min(item[0], nbytes) * p + max(0, nbytes - item[0])
        item[0] = max(item[0], nbytes)
        if weight != 1.0:
            item[1] = weight
        self._push(item)
        return miss

    def read_group(self, keys: tuple[Any, ...], nbytes: tuple[int, ...], tensors: Any = None,
                   whole: bool = False) -> list[float]:
        """Touch the members of a :class:`~iomodel.schedule.grid.ReadGroup` in order; returns
        the expected bytes each misses: exactly what :meth:`read` per member returns (``tensors`` and
        ``whole``: the LRU's signature, unused here: a group's items carry no tensor name).

        The members (read-only items always touched together, never apart) share one entry of
        the stack. Member i, last pushed right after members 0..i-1, is touched again after
        the members behind it at their old bytes, the B bytes of the other items used since,
        and the members before it at their new bytes: ``D_i = B + Σ_{j>i} old_j + Σ_{j<i} new_j
        + old_i``, the distance :meth:`read` finds (every term a whole number of bytes, so the
        sums are exact in any order).

        Raises:
            IomodelError: a member key is also used by a single access (an item belongs to
                one group only).
        """
        group = self.groups.get(keys)
        if group is None:
            if any(k in self.items for k in keys):
                raise IomodelError(f"L2 model: the read group {keys!r} shares an item with a single access")
            sizes = list(nbytes)
            group = [sizes, -1, sum(sizes)]
            self.groups[keys] = group
            misses = [0.0 + b for b in nbytes]  # a new item: p = 1, the original's 0·1.0 + nbytes
        else:
            old, t_old, w_old = group
            between = self._after(t_old)
            self._add(t_old, -float(w_old))
            self._total -= w_old
            if all(b <= o for o, b in zip(old, nbytes)):  # no member grows: one distance for all
                p = evict_probability(between + w_old, self.read_capacity, self.ways)
                misses = [min(o, b) * p + max(0, b - o) for o, b in zip(old, nbytes)]
            else:
                behind, before = w_old, 0
                cap, ways, misses = self.read_capacity, self.ways, []
                for o, b in zip(old, nbytes):
                    behind -= o
                    p = evict_probability(between + (behind + before + o), cap, ways)
                    misses.append(min(o, b) * p + max(0, b - o))
                    before += max(o, b)
                group[0] = [max(o, b) for o, b in zip(old, nbytes)]
                group[2] = sum(group[0])
        if self._now >= len(self._vals):
            self._grow()
        group[1] = self._now
        w = group[2]
        self._add(self._now, float(w))
        self._total += w
        self._now += 1
        return misses

    def write(self, key: Any, tensor: str, nbytes: int) -> None:
        """Write ``nbytes`` (full sectors: no read for ownership); the item becomes dirty."""
        item, _ = self._touch(key, tensor, self.write_share)
        item[0] = max(item[0], nbytes)
        item[1] = self.write_share
        item[3] = 1.0
        self._push(item)

    def finish(self) -> dict[str, float]:
        """End of the kernel: dirty bytes evicted since their last use are written back;
        returns the expected bytes still dirty, per tensor.

        The line at offset x of an item written in order has D + (item bytes − x) bytes above
        it; the evicted fraction is the mean of :func:`evict_probability` over the item
        (midpoint rule, :data:`_ITEM_POINTS` points): :func:`finish_item` per item below
        :data:`_VECTOR_MIN_ITEMS` dirty items, else evaluated for all of them at once by
        :func:`finish_probabilities` (numpy) and added up item by item as :func:`finish_item` does.
        """
        dirty_items = [(nbytes, dirty, tensor, self._after(t), nbytes * weight)
                       for nbytes, weight, t, dirty, tensor in self.items.values() if dirty > 0.0 and nbytes]
        out: dict[str, float] = {}
        if len(dirty_items) < _VECTOR_MIN_ITEMS:  # few items: the math module, no numpy import
            for nbytes, dirty, tensor, above_t, own_t in dirty_items:
                finish_item(self.writeback, out, tensor, nbytes, dirty, above_t, own_t, self.capacity, self.ways)
            return out
        import numpy as np  # here only: a one-layer worksheet imports no numpy (tests/test_cli_latency.py)

        above = np.array([it[3] for it in dirty_items], dtype=np.float64)
        own = np.array([it[4] for it in dirty_items], dtype=np.float64)
        probs = finish_probabilities(above, own, self.capacity, self.ways).tolist()
        writeback = self.writeback
        for (nbytes, dirty, tensor, _, _), p in zip(dirty_items, probs):
            writeback[tensor] = writeback.get(tensor, 0.0) + nbytes * dirty * p
            out[tensor] = out.get(tensor, 0.0) + nbytes * dirty * (1.0 - p)
        return out


def evict_probabilities(dist: np.ndarray, capacity: float, ways: int) -> np.ndarray:
    """:func:`evict_probability` of many stack distances at once (an array of any shape, bytes): the same
    far-tail shortcuts and Chernoff bound; the Poisson head ``Σ_{k<A} e^-λ λ^k / k!`` as ``e^-λ`` times a Horner
    polynomial for A up to :data:`HORNER_MAX_WAYS` (no ``exp`` a term: about three times faster; the series cannot
    overflow there: the constant's comment), summed in log space above it. Within 1e-12 of the scalar function
    (tests/test_dkdv_closed.py); the expected bytes then differ by ~1e-14 of themselves (a few bytes in 10^13).

    Args:
        dist: float64 array of stack distances (bytes); capacity: effective L2 bytes; ways: associativity A.

    Returns:
        float64 array of the same shape, in [0, 1].

    Source: as :func:`evict_probability` and :func:`_poisson_tail`; Horner's rule for the truncated exponential
    series.
    """
    import numpy as np  # here only (see SetAssoc.finish)

    p = np.zeros(dist.shape)
    lam = ways * dist / capacity
    root = np.sqrt(np.maximum(lam, 0.0))  # a distance of 0 or less is no eviction (zero, below)
    one = lam >= ways + 12.0 * root + 12.0
    zero = (dist <= 0) | (lam <= ways - 12.0 * math.sqrt(ways) - 12.0)
    mid = ~one & ~zero
    lm = lam[mid]
    log_lam = np.log(lm)
    a1 = ways - 1
    chern = (lm > a1) & (-lm + a1 * (1.0 + log_lam - _LOG_INT[a1]) < _LOG_TINY) if a1 > 0 else np.zeros(lm.shape, bool)
    if ways <= HORNER_MAX_WAYS:  # Σ_{k<A} λ^k/k! = 1 + λ/1 (1 + λ/2 (1 + ... (1 + λ/(A-1))))
        series = np.ones(lm.shape)
        for k in range(a1, 0, -1):
            series *= lm
            series *= 1.0 / k
            series += 1.0
        below = np.exp(-lm) * series
    else:  # λ may exceed 700: the terms in log space, scaled by their largest
        x = -lm
        top = x.copy()
        for lk in _LOG_INT[1:ways]:  # top = max over k of the log terms (the recurrence of _poisson_tail)
            x = x + log_lam - lk
            np.maximum(top, x, out=top)
        x = -lm
        below = np.exp(x - top)
        for lk in _LOG_INT[1:ways]:
            x = x + log_lam - lk
            below += np.exp(x - top)
        below = np.exp(top) * below
    pm = np.minimum(1.0, np.maximum(0.0, 1.0 - below))
    pm[chern] = 1.0
    p[one & ~zero] = 1.0
    p[mid] = pm
    return p


#: The most ways :func:`evict_probabilities` sums by Horner's rule: within the 12-sigma band λ < A + 12√λ + 12
#: (λ up to about 549 at 256 ways), so the series (at most e^λ) stays below the float64 limit (e^709; reached near
#: 377 ways).
HORNER_MAX_WAYS = 256


def finish_probabilities(above: np.ndarray, own: np.ndarray, capacity: float, ways: int) -> np.ndarray:
    """Evicted fraction of each dirty item at the kernel's end, for n items at once (shape (n,)).

    Item i (``own[i]`` weighted bytes, ``above[i]`` weighted bytes of the items used after it)
    gets the mean of :func:`evict_probability` at the :data:`_ITEM_POINTS` midpoints
    ``above + own·(1 − (k + ½)/points)``: the rule of :func:`finish_item`, each point's probability by
    :func:`evict_probabilities` (the same shortcuts and Chernoff bound; the Poisson head by Horner's rule up to
    :data:`HORNER_MAX_WAYS` ways), within 1e-12 of :func:`evict_probability`: the expected bytes then differ by
    ~1e-14 of themselves, below the rounding to whole bytes on every committed receipt.

    Args:
        above, own: float64 arrays of shape (n,) (bytes, read-equivalent weight).
        capacity: effective L2 bytes; ways: associativity A (1 .. MAX_L2_WAYS).

    Returns:
        float64 array of shape (n,) in [0, 1].

    Source: A. J. Smith, IEEE TSE 1978; M. D. Hill and A. J. Smith, IEEE TC 1989 (as
    :func:`evict_probability`); Chernoff bound as :func:`_poisson_tail`.
    """
    import numpy as np  # here only (see SetAssoc.finish)

    frac = np.array([1.0 - (k + 0.5) / _ITEM_POINTS for k in range(_ITEM_POINTS)])
    p = evict_probabilities(above[:, None] + own[:, None] * frac[None, :], capacity, ways)
    total = p[:, 0].copy()
    for k in range(1, _ITEM_POINTS):  # in order, as sum() over the points in finish_item
        total += p[:, k]
    return total / _ITEM_POINTS


def finish_item(writeback: dict[str, float], still_dirty: dict[str, float], tensor: str, nbytes: int, dirty: float,
                above: float, own: float, capacity: float, ways: int) -> None:
    """Add one dirty item's expected write-back and still-dirty bytes at the kernel's end (bytes).

    The line at offset x of an item written in order has ``above`` + (``own`` − x) weighted bytes
    above it; the evicted fraction is the mean of :func:`evict_probability` over the item
    (midpoint rule, :data:`_ITEM_POINTS` points); ``nbytes × dirty`` bytes are dirty.
    """
    p = sum(evict_probability(above + own * (1.0 - (k + 0.5) / _ITEM_POINTS), capacity, ways)
            for k in range(_ITEM_POINTS)) / _ITEM_POINTS
    writeback[tensor] = writeback.get(tensor, 0.0) + nbytes * dirty * p
    still_dirty[tensor] = still_dirty.get(tensor, 0.0) + nbytes * dirty * (1.0 - p)
