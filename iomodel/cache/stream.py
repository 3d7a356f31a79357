"""The L2 model of the streaming kernels, exact and fast (issue 12, item 4): the simulation's
bytes, to the bit, without visiting every access of every wave one by one.

:func:`iomodel.cache.simulate.simulate` walks every access of every wave through the
set-associative cache (:class:`~iomodel.cache.set_assoc.SetAssoc`, a Fenwick tree of stack
distances); its cost grows with the square of the length (waves × K/V chunks per wave). This
module computes the same expected bytes (:func:`fast_kernel_l2`) for

* the Q-stationary forward (``fwd kernel``) and ``_bwd_dq`` in the bundled kernel's order (grid
  tiles-fastest, key blocks ascending, no window band; either query-tile order; each head's waves
  from its first tile where :func:`iomodel.schedule.grid.row_waves` holds): each wave reads
  fresh Q rows, streams its KV heads' K/V chunks (chunk-major, KV heads in ascending order) and
  writes fresh outputs (:class:`_QStationary`);
* ``_bwd_dkdv`` with one group slice: in lockstep when every key tile loads every query row (no
  causal mask cuts a tile's rows, no band: :class:`_DkdvLockstep`, each (query head, row chunk)
  touched once per wave), else touch by touch in the events' time order (:class:`_DkdvEvents`);
* ``_bwd_preprocess`` and ``_bwd_reduce_dkdv``: nothing is re-read (:class:`_Fresh`);
* ``_bwd_dkdv`` under a window band with the fully associative LRU (``ways=None``, the
  reconciliation's replacement-policy band; :class:`~iomodel.cache.lru.LRU`'s exact integer bytes):
  each query-row chunk is one BWD_BLOCK_M tile touched whole, so the LRU is a stack distance against
  one capacity (:func:`_lru_exact`), touch by touch as the set-associative case.

Three facts make it fast and keep it exact:

1. **Saturation.** :func:`~iomodel.cache.set_assoc.evict_probability` returns exactly 1.0 once a
   stack distance passes :func:`saturation_distance` (about 4.1·C for 24 ways): an item that deep
   is gone, whatever its exact depth. So only the top of the LRU stack is kept (:class:`_Engine`,
   numpy arrays of entry weights), and an access is a whole number of missed bytes once it is deep.
2. **Prefix sums.** A block of waves' stack distances are the weight pushed after each item's
   last entry, less the entries superseded since (:func:`_moved_up`), computed for all its accesses
   at once. Weights are whole bytes times the write share (0.5): every sum is exact, so the
   distances are the very doubles the Fenwick tree gives, and each probability is
   :func:`evict_probability` of that double.
3. **Certified waves.** A wave whose every re-touched item is provably deep (a lower bound on its
   distance, from the previous wave's stream, past the saturation distance) misses exactly its
   requested bytes: runs of such waves (the bulk of a long sequence) are added in closed form, and
   only the entries that set the state the next wave sees are processed (:func:`_drive`); for the Q-stationary
   kernels the processed waves of every run go to the engine in one call, each drop of the stack a floor in it, the
   sums added afterwards in the step-by-step order (:func:`_drive_segments`, 2026-12-06).

Sums are taken in the simulation's order (:class:`~iomodel.cache.sums.OrderedSums`), so the
expected bytes equal the simulation's floats, not only their rounding (tests/test_l2_stream.py
compares the floats on random shapes). The causal ``_bwd_dkdv`` has no certified waves (its
programs re-read each other's rows within a wave, well below saturation): its cost still grows
with the square of the length (its touches, :func:`dkdv_touches`; the superseded entries counted by
windows of runs, :func:`_moved_up_windows`): where :func:`iomodel.cache.estimate.dkdv_closed_form_applies`
(long sequences past :data:`iomodel.cache.estimate.L2_DKDV_CLOSED_FORM_MIN_TOUCHES` touches; MHA and GQA steps whose
dK/dV reads are not a prediction past :data:`iomodel.cache.estimate.L2_DKDV_ANY_LENGTH_MIN_TOUCHES`)
:func:`fast_kernel_l2` returns the closed form of the same
waves instead (:mod:`iomodel.cache.dkdv_closed`: the mean count of chunk
entries, not the simulation's bytes; its agreement: docs/l2-calibration.md). Kernels or schedules outside
this list (window bands of the forward, other grid or key orders, dK/dV group slices, decode, a
fully associative L2 but for the windowed dK/dV kernel, a write share that is not a dyadic fraction) get None from
:func:`fast_kernel_l2`: the caller simulates them wave by wave.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from iomodel.cache.lru import READ_WEIGHT, write_weight
from iomodel.cache.set_assoc import (_LOG_INT, _LOG_TINY, _VECTOR_MIN_ITEMS, evict_probability, finish_item,
                                     finish_probabilities)
from iomodel.cache.simulate import KernelL2, _rounded
from iomodel.cache.sums import OrderedSums
from iomodel.errors import IomodelError
from iomodel.cache.params import MAX_STREAM_ITEMS, exact_write_share
from iomodel.schedule.grid import (DKDV_REDUCE_BLOCK_N, REDUCE_DKDV_KERNEL, _chunk_rows, backward_row_reads,
                                   dkdv_last_lo, forward_row_writes, packed_view, row_waves)
from iomodel.schedule.launch import TILE_ORDERS
from iomodel.spec import FP32_WIDTH, LayerSpec, Tiling, cdiv

#: Kernels :func:`fast_kernel_l2` knows, by the name :func:`iomodel.cache.predict.predict_training_step` gives them.
FAST_KERNELS = ("fwd kernel", "_attn_fwd", "_bwd_preprocess", "_bwd_dkdv", "_bwd_dq", REDUCE_DKDV_KERNEL)
#: Of those, the kernels whose model may meet :func:`_lru_exact` (the fully associative LRU evaluated fast).
LRU_FAST_KERNELS = ("_bwd_dkdv",)


def _one_by_shortcut(distance: float, capacity: float, ways: int) -> bool:
    """Whether :func:`evict_probability` returns 1.0 by one of its shortcuts (far tail, Chernoff)."""
    lam = ways * distance / capacity
    if lam >= ways + 12.0 * math.sqrt(lam) + 12.0:
        return True
    a1 = ways - 1
    return a1 > 0 and lam > a1 and -lam + a1 * (1.0 + math.log(lam) - _LOG_INT[a1]) < _LOG_TINY


def saturation_distance(capacity: float, ways: int) -> float:
    """A stack distance from which :func:`~iomodel.cache.set_assoc.evict_probability` is exactly 1.0 (bytes).

    Both of its shortcuts to 1.0 are monotone in the distance D (λ = A·D/C): the far tail
    ``λ >= A + 12√λ + 12`` grows with λ past λ = 36, the Chernoff bound
    ``−λ + (A−1)(1 + ln λ − ln(A−1)) < ln 2^-60`` falls with λ past A − 1. The threshold is found
    by bisection on D and widened by 2^-20 of itself, so every D at or above it takes a shortcut.

    Args:
        capacity: effective L2 bytes C; ways: associativity A (1 .. MAX_L2_WAYS).

    Returns:
        the distance in bytes (for A = 24 about 4.1·C).
    """
    lo, hi = 0.0, capacity
    while not _one_by_shortcut(hi, capacity, ways):
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _one_by_shortcut(mid, capacity, ways):
            hi = mid
        else:
            lo = mid
    out = hi * (1.0 + 2.0**-20)
    assert _one_by_shortcut(out, capacity, ways) and _one_by_shortcut(out * 2.0, capacity, ways)
    return out


def read_saturation(capacity: float, read_capacity: float, ways: int) -> float:
    """Stack distance past which a dirty line (judged at ``capacity``) and a read (at ``read_capacity``) are both
    gone with probability 1 (bytes): :func:`saturation_distance` of the larger capacity, ``ways`` ways."""
    return saturation_distance(max(capacity, read_capacity), ways)


def _dropped_head(rows: np.ndarray, weight_kept: float, per_sum: int) -> int:
    """How many first accesses of a stream of ``rows`` rows each (int64) are left out when the fewest last ones whose
    rows weigh at least ``weight_kept`` bytes (rows × ``per_sum``) are kept (:meth:`_Wave.cut`)."""
    if not len(rows):
        return 0
    tail = np.cumsum(rows[::-1] * per_sum)  # weight of the last 1, 2, ... accesses
    return len(rows) - min(len(rows), int(np.searchsorted(tail, weight_kept)) + 1)


class _Wave:
    """Consecutive waves' accesses for :meth:`_Engine.steps`, in time order (positions 0 .. n−1).

    Attributes:
        weight: float64 (n,), the weight each access pushes (bytes × 1 for reads, × write share for
            writes); the stream slots are filled by the engine (they depend on the item's extent).
        spos: int64, positions of the stream accesses; lane, chunk, rows: their item (lane, row
            chunk) and the rows they touch; wave_of: the wave (0 .. n_waves−1) of each.
        need_wave, need_lanes, need_rows: per wave, the prefix of rows each of its lanes streams
            (the lane's extent afterwards), in wave order.
        wpos, wtensor, wbytes: positions, tensors (indices into the engine's ``write_names``) and
            bytes of the fresh writes (dirty items).
        fresh: (tensor, total bytes, largest term) of the fresh reads (each a whole miss).
        n_waves: how many waves.
    """

    __slots__ = ("weight", "spos", "lane", "chunk", "rows", "wave_of", "need_wave", "need_lanes", "need_rows", "wpos",
                 "wtensor", "wbytes", "fresh", "n_waves")

    def __init__(self, weight, spos, lane, chunk, rows, need_lanes, need_rows, wpos, wtensor, wbytes, fresh,
                 wave_of=None, need_wave=None, n_waves=1):
        self.weight, self.spos, self.lane, self.chunk, self.rows = weight, spos, lane, chunk, rows
        self.wave_of = np.zeros(len(spos), dtype=np.int64) if wave_of is None else wave_of
        self.need_lanes, self.need_rows = need_lanes, need_rows
        self.need_wave = np.zeros(len(need_lanes), dtype=np.int64) if need_wave is None else need_wave
        self.wpos, self.wtensor, self.wbytes, self.fresh, self.n_waves = wpos, wtensor, wbytes, fresh, n_waves

    def cut(self, weight_kept: float, per_sum: int) -> tuple["_Wave", int]:
        """This (one) wave without the head of its stream: the fewest last stream accesses whose
        rows weigh at least ``weight_kept`` (rows × ``per_sum`` bytes) are kept. Returns the cut
        wave and the rows dropped (their misses are whole: the caller adds them)."""
        keep_from = _dropped_head(self.rows, weight_kept, per_sum)
        if keep_from == 0:
            return self, 0
        first = int(self.spos[0])
        assert self.n_waves == 1 and int(self.spos[-1]) - first + 1 == len(self.spos)  # one stretch of one wave
        drop = np.arange(first, first + keep_from)
        cut = _Wave(np.delete(self.weight, drop), self.spos[keep_from:] - keep_from, self.lane[keep_from:],
                    self.chunk[keep_from:], self.rows[keep_from:], self.need_lanes, self.need_rows,
                    self.wpos - keep_from, self.wtensor, self.wbytes, self.fresh)
        return cut, int(self.rows[:keep_from].sum())


def _concat(blocks: list[_Wave]) -> _Wave:
    """Consecutive blocks of waves as one (positions and wave indices shifted)."""
    if len(blocks) == 1:
        return blocks[0]
    offs = np.cumsum([0] + [len(b.weight) for b in blocks]).tolist()
    wofs = np.cumsum([0] + [b.n_waves for b in blocks]).tolist()
    cat = np.concatenate
    fresh: dict[str, list[int]] = {}
    for b in blocks:
        for t, total, largest in b.fresh:
            got = fresh.setdefault(t, [0, 0])
            got[0] += total
            got[1] = max(got[1], largest)
    return _Wave(cat([b.weight for b in blocks]), cat([b.spos + o for b, o in zip(blocks, offs)]),
                 cat([b.lane for b in blocks]), cat([b.chunk for b in blocks]), cat([b.rows for b in blocks]),
                 cat([b.need_lanes for b in blocks]), cat([b.need_rows for b in blocks]),
                 cat([b.wpos + o for b, o in zip(blocks, offs)]), cat([b.wtensor for b in blocks]),
                 cat([b.wbytes for b in blocks]), [(t, tot, big) for t, (tot, big) in fresh.items()],
                 cat([b.wave_of + o for b, o in zip(blocks, wofs)]), cat([b.need_wave + o for b, o in zip(blocks, wofs)]),
                 wofs[-1])


class _ExtentsVary(Exception):
    """An item of the fully associative LRU was touched at another extent than before: its evicted
    bytes would come back at the new extent, which :class:`_Engine` does not follow (the caller simulates)."""


class _Engine:
    """The top of the set-associative LRU stack, and the expected bytes so far, for one kernel.

    Items: *stream* items (lane, row chunk), read-only groups of the tensors ``names`` with
    ``per_row`` bytes per row each, whose extent is ``clip(M[lane] − chunk·c, 0, chunk)`` rows (M:
    the longest prefix of the lane streamed so far; with ``prefix_extents=False`` each item's
    largest touch so far); *fresh* items, touched once (new Q rows, outputs). Entries: one per access, in time order; ``w`` holds the weight of the entries from
    time ``t0`` on (0 once an entry is superseded; within a :func:`_drive_segments` call one superseded across a floor
    keeps its weight, below every live entry, until :meth:`drop_before`), older ones are deep (at least
    :func:`saturation_distance` below the top). Same semantics as
    :class:`~iomodel.cache.set_assoc.SetAssoc` with read groups (``simulate``'s exact case).

    ``ways=None`` is the fully associative LRU (:class:`~iomodel.cache.lru.LRU`, one capacity C, exact
    integer bytes) for kernels whose re-read items are evicted whole, each touched at one extent
    (:func:`_lru_exact`): an item is gone at its re-touch exactly when the weight above it and its own
    pass C (a probability of 0 or 1), the saturation distance is C, and a dirty item keeps
    ⌊(C − weight above)/write weight⌋ of its bytes at the end (:meth:`lru_totals`).
    Raises :class:`_ExtentsVary` from :meth:`steps` if an item comes at another extent.
    """

    def __init__(self, capacity: int, write_share: float, ways: int | None, n_lanes: int, n_chunks: int, chunk: int,
                 per_row: tuple[int, ...], names: tuple[str, ...], write_names: tuple[str, ...],
                 prefix_extents: bool = True) -> None:
        self._args = (capacity, write_share, ways, n_lanes, n_chunks, chunk, per_row, names, write_names,
                      prefix_extents)  # for :meth:`reset`
        self.prefix = prefix_extents  # extents from M per lane; else one extent per item (self.ext)
        self.capacity = float(capacity)  # C of a dirty line's write-back
        self.read_capacity = self.capacity  # C of a read miss (:meth:`judge_reads_at`)
        self.share = write_share
        self.ways = ways
        if ways is None and prefix_extents:
            raise IomodelError("the fully associative LRU is evaluated fast with one extent per item only")
        # past d_sat every re-touch misses whole: the LRU's C (a re-touch adds its own weight), else where
        # evict_probability is exactly 1
        self.d_sat = self.capacity if ways is None else saturation_distance(self.capacity, ways)
        self.chunk, self.n_chunks = chunk, max(1, n_chunks)
        self.per = np.array(per_row, dtype=np.int64)
        self.per_sum = int(sum(per_row))
        self.per_after = np.array([sum(per_row[m:]) for m in range(len(per_row))], dtype=np.int64)
        self.per_before = np.array([sum(per_row[:m]) for m in range(len(per_row))], dtype=np.int64)
        self.names = names
        self.M = np.zeros(max(1, n_lanes), dtype=np.int64)
        self.entry = np.full(max(1, n_lanes) * self.n_chunks, -1, dtype=np.int64)  # time of the item's entry, -1 none
        self.ext = None if prefix_extents else np.zeros(len(self.entry), dtype=np.int64)  # rows, per item
        self.w = np.zeros(0)  # entry weights from time t0 on
        self.item = np.zeros(0, dtype=np.int64)  # the stream item of each entry, -1 for fresh ones
        self.t0 = 0
        self.now = 0
        self.sums = OrderedSums()
        self.write_names = write_names
        self._dirty: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (tensor, bytes, entry time) not yet deep
        self.deep_bytes: dict[str, int] = {}  # dirty items known deep: bytes per tensor
        self.deep_count = 0
        self.waves = 0
        self._trim_at = 4096
        self._known = (np.zeros(0), np.zeros(0))  # distances met (ascending) and their evict_probability

    def reset(self) -> None:
        """Back to a cold engine of the same kernel (and the same read capacity, :meth:`judge_reads_at`)."""
        read_capacity = self.read_capacity
        self.__init__(*self._args)
        if read_capacity != self.capacity:
            self.judge_reads_at(read_capacity)

    def judge_reads_at(self, read_capacity: float) -> None:
        """Read misses against ``read_capacity`` (bytes), as :class:`SetAssoc`'s ``read_capacity``; the
        saturation distance becomes the larger of the two capacities' (past it a read and a dirty
        line are both gone with probability 1, so the deep entries may still be dropped)."""
        self.read_capacity = float(read_capacity)
        self.d_sat = read_saturation(self.capacity, self.read_capacity, self.ways)
        self._known = (np.zeros(0), np.zeros(0))  # the probabilities met so far were at the old capacity

    def _suffix(self) -> np.ndarray:
        """``out[k]`` = weight of the entries after entry k (exact: dyadic sums)."""
        out = np.zeros(len(self.w))
        if len(self.w) > 1:
            out[:-1] = np.cumsum(self.w[:0:-1])[::-1]
        return out

    def _probabilities(self, dist: np.ndarray) -> np.ndarray:
        """:func:`evict_probability` of each distance (1.0 at or past the saturation distance), any shape.

        The distances met so far in this kernel are kept sorted with their probabilities (up to
        :data:`_KNOWN_DISTANCES`): a call looks its distances up and evaluates only the new ones, the
        same doubles (re-touches repeat a few thousand distances across the waves of a kernel)."""
        if self.ways is None:  # the fully associative LRU: gone once the bytes above and its own pass C
            return (dist > self.capacity).astype(np.float64)
        p = np.ones(dist.shape)
        low = dist < self.d_sat
        if low.any():
            x = dist[low]
            known, probs = self._known
            at = np.minimum(np.searchsorted(known, x), len(known) - 1)
            miss = known[at] != x if len(known) else np.ones(len(x), dtype=bool)
            if miss.any():  # distances not met before in this kernel: evaluated once each, then remembered
                vals = np.unique(x[miss])
                full = len(known) + len(vals) > _KNOWN_DISTANCES
                if full:  # start again from this call's distances
                    vals = np.unique(x)
                cap, ways = self.read_capacity, self.ways
                new = np.array([evict_probability(v, cap, ways) for v in vals.tolist()])
                if full:
                    known, probs = vals, new
                else:
                    known, probs = np.concatenate((known, vals)), np.concatenate((probs, new))
                    order = np.argsort(known)
                    known, probs = known[order], probs[order]
                self._known = (known, probs)
                at = np.minimum(np.searchsorted(known, x), len(known) - 1)
            p[low] = probs[at]
        return p

    def steps(self, block: _Wave, floor: np.ndarray | None = None, defer: bool = False) -> list[np.ndarray] | None:
        """Run consecutive waves: their misses into the sums, their entries onto the stack.

        An access whose item has an entry at time t_old (on the kept stack, or earlier in these
        waves) lies below the weight pushed after t_old (prefix sums of the entry weights), less the
        entries superseded since: those of the earlier re-touches whose old entries lay above t_old
        (:func:`_moved_up`; none when items are re-touched in the order of their last touches).

        Args:
            block: the waves (:class:`_Wave`).
            floor: per stream access, the time before which every entry is deep (int64, the engine's times; a
                :meth:`drop_all` inside the block, :func:`_drive_segments`), or None (the kept stack's start).
            defer: return the stream misses (one float64 array per tensor of ``names``, in access order) instead of
                adding them, and the fresh reads, to the sums (the caller adds them in the simulation's order).
        """
        weight, spos, lane, chunk_of, rows = block.weight, block.spos, block.lane, block.chunk, block.rows
        chunk, n = self.chunk, len(weight)
        item = lane * self.n_chunks + chunk_of
        t_new = self.now + spos
        t_old = self.entry[item]
        last = None
        if (block.n_waves > 1 or not self.prefix) and len(item):  # an earlier touch here supersedes the kept entry
            order = np.argsort(item, kind="stable")
            same = item[order[1:]] == item[order[:-1]]
            t_old[order[1:][same]] = t_new[order[:-1][same]]
            last = order[np.concatenate((~same, [True]))]  # each item's last touch
        if self.prefix:
            old = np.minimum(np.maximum(self._extent_before(block) - chunk_of * chunk, 0), chunk)  # rows before
            np.maximum.at(self.M, block.need_lanes, block.need_rows)
        elif len(item):  # the item's extent: its largest touch so far (a running maximum per item)
            rows_s = rows[order]
            first = np.concatenate(([True], ~same))
            lift = np.cumsum(first) * (int(rows_s.max()) + 1)
            run = np.maximum.accumulate(rows_s + lift) - lift  # including each touch
            prev = np.zeros(len(item), dtype=np.int64)
            prev[1:][same] = run[:-1][same]
            old = np.empty(len(item), dtype=np.int64)
            old[order] = np.maximum(self.ext[item[order]], prev)
            if self.ways is None and bool(((old != 0) & (old != rows)).any()):
                raise _ExtentsVary  # evicted, an LRU item comes back at the new extent (not the running maximum)
            self.ext[item[last]] = np.maximum(self.ext[item[last]], run[np.nonzero(np.concatenate((~same, [True])))[0]])
        else:
            old = np.zeros(0, dtype=np.int64)
        weight[spos] = np.maximum(old, rows) * self.per_sum
        if floor is None:
            alive = np.nonzero(t_old >= self.t0)[0]
            dead = None
        else:  # an entry before the access's floor was dropped (deep): a whole miss, its old entry no one's
            kept = t_old >= self.t0
            live = kept & (t_old >= floor)
            alive = np.nonzero(live)[0]
            dead = t_old[kept & ~live] - self.t0
        miss = [(rows * per).astype(np.float64) for per in self.per.tolist()]  # new or deep: every byte misses
        if len(alive):
            g_old = t_old[alive] - self.t0
            pushed = np.concatenate((self.w, weight))  # weights as pushed (superseded ones not yet zeroed)
            cum = np.cumsum(pushed)
            g_new = t_new[alive] - self.t0
            between = cum[g_new - 1] - cum[g_old]  # pushed after the old entry, before this access
            if len(g_old) > 1 and bool((g_old[1:] < g_old[:-1]).any()):
                between = between - _moved_up(g_old, pushed[g_old])  # entries moved up before this access
            o, b = old[alive], rows[alive]
            grow = b > o
            # no member grows: one distance, the group's weight on top (one probability per access)
            p = self._probabilities(between + o * self.per_sum)
            g = np.nonzero(grow)[0]
            if len(g):  # member m: the members behind it at their old bytes, those before it at their new
                pg = self._probabilities(between[g, None] + (o[g, None] * self.per_after[None, :]
                                                             + b[g, None] * self.per_before[None, :]))
            for m, per in enumerate(self.per.tolist()):
                bm = b * per
                got = bm * p
                if len(g):  # the bytes it grows by miss whole, its old bytes with the member's probability
                    om = o[g] * per
                    got[g] = om * pg[:, m] + (bm[g] - om)
                miss[m][alive] = got
            pre = g_old < len(self.w)  # superseded entries: kept ones, and those of these waves
            self.w[g_old[pre]] = 0.0
            self.item[g_old[pre]] = -1
            inner = g_old[~pre] - len(self.w)
            weight[inner] = 0.0
        else:
            inner = np.zeros(0, dtype=np.int64)
        if not defer:
            for m, name in enumerate(self.names):
                self.sums.add_array(name, miss[m])
            for tensor, total, largest in block.fresh:
                self.sums.add_whole_run(tensor, total, largest)
        new_item = np.full(n, -1, dtype=np.int64)
        new_item[spos] = item
        new_item[inner] = -1
        if dead is not None and len(dead):  # the dropped entries name no item (their items have newer ones)
            self.item[dead[dead < len(self.w)]] = -1
            new_item[dead[dead >= len(self.w)] - len(self.w)] = -1
        self.w = np.concatenate((self.w, weight))
        self.item = np.concatenate((self.item, new_item))
        if last is None:
            self.entry[item] = t_new
        else:
            self.entry[item[last]] = t_new[last]
        if len(block.wpos):
            self._dirty.append((block.wtensor, block.wbytes, self.now + block.wpos))
        self.now += n
        self.waves += block.n_waves
        if len(self.w) > self._trim_at:
            self._trim()
        return miss if defer else None

    def _extent_before(self, block: _Wave) -> np.ndarray:
        """M of each stream access's lane before its wave: the engine's M, grown by the earlier
        waves of the block (rows; a running maximum per lane over the waves' needs)."""
        base = self.M[block.lane]
        if block.n_waves == 1 or not len(block.lane):
            return base
        span = block.n_waves + 1
        key = block.need_lanes * span + block.need_wave
        order = np.argsort(key, kind="stable")
        key_s, rows_s, lane_s = key[order], block.need_rows[order], block.need_lanes[order]
        rank = np.concatenate(([0], np.cumsum(lane_s[1:] != lane_s[:-1])))  # lane segments, ascending
        lift = rank * (int(rows_s.max()) + 1)
        run = np.maximum.accumulate(rows_s + lift) - lift  # running maximum within each lane
        at = np.searchsorted(key_s, block.lane * span + block.wave_of) - 1  # the lane's last need before the wave
        ok = at >= 0
        ok[ok] = lane_s[at[ok]] == block.lane[ok]
        prev = np.zeros(len(block.lane), dtype=np.int64)
        prev[ok] = run[at[ok]]
        return np.maximum(base, prev)

    def _trim(self) -> None:
        """Drop the entries at least the saturation distance deep (their items are gone)."""
        suffix = self._suffix()
        k = int(np.searchsorted(-suffix, -self.d_sat, side="right"))  # entries with suffix >= d_sat
        if k:
            gone = self.item[:k]
            self.entry[gone[gone >= 0]] = -1
            self.w, self.item = self.w[k:], self.item[k:]
            self.t0 += k
            self._deepen(self.t0)
        self._trim_at = max(4096, 2 * len(self.w))

    def _dirty_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dirty items not yet deep, in time order: (tensor index, bytes, entry time)."""
        if len(self._dirty) != 1:
            parts = self._dirty or [(np.zeros(0, np.int64),) * 3]
            self._dirty = [tuple(np.concatenate([p[k] for p in parts]) for k in range(3))]
        return self._dirty[0]

    def _deepen(self, t: int) -> None:
        """Dirty items with entries before time ``t`` are deep: whole bytes written back at the end."""
        tid, nbytes, time = self._dirty_arrays()
        k = int(np.searchsorted(time, t))
        if k:
            per = np.bincount(tid[:k], weights=nbytes[:k], minlength=len(self.write_names))  # exact below 2^53
            for i, name in enumerate(self.write_names):
                if np.count_nonzero(tid[:k] == i):
                    self.deep_bytes[name] = self.deep_bytes.get(name, 0) + int(per[i])
            self.deep_count += k
            self._dirty = [(tid[k:], nbytes[k:], time[k:])]

    def drop_all(self) -> None:
        """Everything on the stack is deep (the caller proved it)."""
        gone = self.item
        self.entry[gone[gone >= 0]] = -1
        self.w, self.item = np.zeros(0), np.zeros(0, dtype=np.int64)
        self.t0 = self.now
        self._deepen(self.now)

    def drop_before(self, t: int) -> None:
        """Every entry before time ``t`` is deep (the caller proved it: a :meth:`drop_all` at time ``t``, taken after
        the waves that follow it were run, :func:`_drive_segments`)."""
        k = t - self.t0
        if k > 0:
            gone = self.item[:k]
            gone = gone[gone >= 0]
            self.entry[gone[self.entry[gone] < t]] = -1
            self.w, self.item = self.w[k:], self.item[k:]
            self.t0 = t
        self._deepen(t)

    def bulk(self, reads: list[tuple[str, int, int]], dirty: list[tuple[str, int, int]], lanes: np.ndarray,
             rows: np.ndarray, waves: int) -> None:
        """Certified waves in closed form: every read a whole miss, every write deep, extents grown.

        Args:
            reads: (tensor, total bytes, largest term) read; dirty: (tensor, bytes, items) written;
            lanes, rows: the stream prefixes touched (M grows to them); waves: how many waves.
        """
        for tensor, total, largest in reads:
            self.sums.add_whole_run(tensor, total, largest)
        for tensor, nbytes, count in dirty:
            self.deep_bytes[tensor] = self.deep_bytes.get(tensor, 0) + nbytes
            self.deep_count += count
        if len(lanes):
            np.maximum.at(self.M, lanes, rows)
        self.waves += waves

    def can_bulk(self, reads: list[tuple[str, int, int]]) -> bool:
        """Whether each read run can be added in closed form now (:meth:`OrderedSums.can_add_whole_run`)."""
        return all(self.sums.can_add_whole_run(t, total, largest) for t, total, largest in reads)

    def totals(self) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
        """The kernel's end, before rounding: expected bytes read, written back and still dirty, per
        tensor (dirty items evicted since their write are written back, as :meth:`SetAssoc.finish`)."""
        writeback = {t: float(b) for t, b in self.deep_bytes.items()}  # deep: p = 1 for every line
        still = {t: 0.0 for t in self.deep_bytes}
        tid, nbytes, time = self._dirty_arrays()
        if len(tid):
            above = self._suffix()[time - self.t0]
            own = nbytes * self.share
            if self.deep_count + len(tid) < _VECTOR_MIN_ITEMS:  # SetAssoc.finish's scalar path
                for i, b, a, o in zip(tid.tolist(), nbytes.tolist(), above.tolist(), own.tolist()):
                    finish_item(writeback, still, self.write_names[i], b, 1.0, a, o, self.capacity, self.ways)
            else:  # its numpy path, the sums in item order per tensor
                p = finish_probabilities(above, own, self.capacity, self.ways)
                for i, name in enumerate(self.write_names):
                    mine = tid == i
                    if mine.any():
                        b = nbytes[mine] * 1.0
                        ordered = OrderedSums()
                        ordered.values = {"w": writeback.get(name, 0.0), "s": still.get(name, 0.0)}
                        ordered.add_array("w", b * p[mine])
                        ordered.add_array("s", b * (1.0 - p[mine]))
                        writeback[name], still[name] = ordered.values["w"], ordered.values["s"]
        return dict(self.sums.values), writeback, still

    def lru_totals(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """The kernel's end under the fully associative LRU (``ways=None``): bytes read, written back and
        still dirty, per tensor (exact integers, as :class:`~iomodel.cache.lru.LRU` counts them; write-backs
        and dirty bytes only where non-zero).

        A dirty item with A weighted bytes above it keeps ``min(bytes, max(0, ⌊(C − A)/w⌋))`` bytes in
        weight units (C = capacity × :data:`~iomodel.cache.lru.READ_WEIGHT`, w =
        :func:`~iomodel.cache.lru.write_weight`): the LRU evicts the bottom item in part, down to the capacity
        the items above leave it, and A only grows until the end; the rest was written back.
        """
        reads = {t: int(v) for t, v in self.sums.values.items()}
        writeback = {t: int(b) for t, b in self.deep_bytes.items()}  # deep: A >= C, nothing kept
        still: dict[str, int] = {}
        tid, nbytes, time = self._dirty_arrays()
        if len(tid):
            above = self._suffix()[time - self.t0]
            kept = np.zeros(len(tid), dtype=np.int64)
            live = above < self.capacity
            if live.any():  # A in weight units: whole numbers below C × READ_WEIGHT < 2^53, exact
                units = np.rint(above[live] * READ_WEIGHT).astype(np.int64)
                room = (int(self.capacity) * READ_WEIGHT - units) // write_weight(self.share)
                kept[live] = np.minimum(nbytes[live], np.maximum(0, room))
            for i, name in enumerate(self.write_names):
                mine = tid == i
                if mine.any():
                    writeback[name] = writeback.get(name, 0) + int((nbytes[mine] - kept[mine]).sum())
                    still[name] = still.get(name, 0) + int(kept[mine].sum())
        return reads, {t: v for t, v in writeback.items() if v}, {t: v for t, v in still.items() if v}

    def finish(self, name: str, requested_read: dict[str, int], requested_write: dict[str, int]) -> KernelL2:
        """The record of the kernel: :meth:`totals` rounded to whole bytes per tensor (zeros dropped), or
        :meth:`lru_totals` under the fully associative LRU (as :func:`~iomodel.cache.simulate.simulate`
        records the LRU: every tensor read, zero or not)."""
        out = KernelL2(name, requested_read=dict(requested_read), requested_write=dict(requested_write))
        if self.ways is None:
            out.hbm_read, out.hbm_write, out.dirty_at_end = self.lru_totals()
        else:
            reads, writeback, still = self.totals()
            out.hbm_read, out.hbm_write, out.dirty_at_end = _rounded(reads), _rounded(writeback), _rounded(still)
        out.waves = self.waves
        return out


def _moved_up(idx: np.ndarray, w_old: np.ndarray) -> np.ndarray:
    """For each re-touch k (in time order), the weight of the earlier re-touches' old entries that
    lay above re-touch k's old entry ``idx[k]``: ``out[k] = Σ_{j<k, idx[j] > idx[k]} w_old[j]``.

    Those entries moved to the top before k, so they no longer lie between k's old entry and k.
    When the old entries come in a few increasing runs (items re-touched in the order of their last
    touch, as the forward's K/V), an earlier run's entries above ``idx[k]`` are a suffix of it (one
    ``searchsorted`` per run); else each re-touch counts the runs of its reuse window
    (:func:`_moved_up_windows`: the causal ``_bwd_dkdv``), or, where those windows are wide, a bottom-up
    merge sort counts them (O(n log² n), numpy). Exact: dyadic weights.
    """
    n = len(idx)
    out = np.zeros(n)
    if n < 2:
        return out
    suspect = np.nonzero(idx[1:] < np.maximum.accumulate(idx)[:-1])[0] + 1  # only these get any
    if not len(suspect):
        return out
    starts = np.concatenate(([0], np.nonzero(idx[1:] < idx[:-1])[0] + 1))
    if len(starts) > _RUNS_MERGE:
        windows = _moved_up_windows(idx, w_old, starts, suspect)
        return _moved_up_merge(idx, w_old) if windows is None else windows
    ends = np.append(starts[1:], n)
    cum = np.concatenate(([0.0], np.cumsum(w_old)))
    for a, e in zip(starts.tolist(), ends.tolist()):
        later = suspect[np.searchsorted(suspect, e):]
        if not len(later):
            break
        pos = a + np.searchsorted(idx[a:e], idx[later], side="right")  # entries of the run above each
        out[later] += cum[e] - cum[pos]
    return out


#: Touches per engine call of :class:`_DkdvEvents` (a speed choice: the merge sort of
#: :func:`_moved_up_merge` costs n log² n).
_BLOCK_TOUCHES = 1 << 14
#: Increasing runs beyond which :func:`_moved_up` counts by windows of runs, or merge-sorts (a speed choice).
_RUNS_MERGE = 32
#: (re-touch, earlier run) pairs per re-touch beyond which :func:`_moved_up_windows` gives way to the merge
#: sort (a speed choice: each pair costs one binary search, the merge sort about log² n steps per element).
_WINDOW_PAIRS = 16


def _moved_up_windows(idx: np.ndarray, w_old: np.ndarray, starts: np.ndarray, suspect: np.ndarray) -> np.ndarray | None:
    """:func:`_moved_up` by windows of increasing runs, or None where the windows are too wide.

    An earlier element j lies above element k (``idx[j] > idx[k]``) only from the first position where
    the running maximum of ``idx`` passes ``idx[k]`` on; k's own run lies below k (it increases). So k
    adds, for each run that starts between that position's run and its own, the run's elements above
    ``idx[k]``: a suffix of the run (one ``searchsorted`` on keys offset by run). Re-touched items of
    the causal ``_bwd_dkdv`` come in hundreds of runs per block but each re-touch sees only the few runs
    of its reuse window, so this costs a few binary searches per element (the merge sort, about log² n
    steps). Exact: dyadic weights, so the sums do not depend on their order.

    Args:
        idx: (n,) int64, the old entries' positions, distinct; w_old: (n,) float64, their weights (whole
            multiples of 1/2, sums below 2^53); starts: (r,) the first element of each increasing run
            (starts[0] = 0); suspect: the elements below an earlier one (the only ones that get any).

    Returns:
        (n,) float64, as :func:`_moved_up`; None where there are more than :data:`_WINDOW_PAIRS` (element,
        run) pairs per element.
    """
    n = len(idx)
    runmax = np.maximum.accumulate(idx)
    run_of = np.zeros(n, dtype=np.int64)
    run_of[starts[1:]] = 1
    run_of = np.cumsum(run_of)  # run of each element
    lo = np.searchsorted(runmax, idx[suspect], side="right")  # no element before lo lies above
    r_lo = run_of[lo]
    cnt = run_of[suspect] - r_lo  # runs from lo's run to the run before k's
    pairs = int(cnt.sum())
    if pairs > _WINDOW_PAIRS * n:
        return None
    pk = np.repeat(np.arange(len(suspect), dtype=np.int64), cnt)
    rr = np.repeat(r_lo - (np.cumsum(cnt) - cnt), cnt) + np.arange(pairs, dtype=np.int64)  # each pair's run
    big = int(runmax[-1]) + 1
    keys = run_of * big + idx  # ascending: runs in order, each increasing
    pos = np.searchsorted(keys, rr * big + idx[suspect][pk], side="right")  # the run's first element above
    ends = np.append(starts[1:], n)
    cum = np.concatenate(([0.0], np.cumsum(w_old)))
    out = np.zeros(n)
    out[suspect] = np.bincount(pk, weights=cum[ends[rr]] - cum[pos], minlength=len(suspect))
    return out


def _moved_up_merge(idx: np.ndarray, w_old: np.ndarray) -> np.ndarray:
    """:func:`_moved_up` by a bottom-up merge sort: at each level, every element of a block's right
    half adds the weight of the left half's larger keys (the left half sorted by key, one global
    ``searchsorted`` on keys offset by block), then the halves merge (a stable sort of sorted runs)."""
    n = len(idx)
    out = np.zeros(n)
    order = np.arange(n)  # the elements, sorted by key within blocks of s
    pos = np.arange(n)
    big = int(idx.max()) + 1
    s = 1
    while s < n:
        blk = pos // (2 * s)
        right = (pos % (2 * s)) >= s
        comp = blk * big + idx[order]
        merged = np.argsort(comp, kind="stable")  # left half before right on ties: the merge of the two halves
        r = np.nonzero(right)[0]
        if len(r):
            # a block with a right half has a full left half of s elements, the left elements of block b being
            # b·s .. b·s + s − 1 in position order; a right element r lands at new position q, after the
            # q − (r − s) − 2s·b left elements of its block whose keys are not above its own
            cw = np.concatenate(([0.0], np.cumsum(w_old[order][~right])))
            new_pos = np.empty(n, dtype=np.int64)
            new_pos[merged] = pos
            b = blk[r]
            out[order[r]] += cw[(b + 1) * s] - cw[b * s + new_pos[r] - r + s]
        order = order[merged]
        s *= 2
    return out


#: Bound on the events' int64 sort keys in :meth:`_DkdvEvents.build` (past it: numpy's lexsort of the key columns).
_KEY_LIMIT = 1 << 62
#: Most distinct distances :meth:`_Engine._probabilities` remembers (a speed choice: memory).
_KNOWN_DISTANCES = 1 << 16

#: Most waves :func:`_drive` hands :meth:`_Engine.steps` at once step by step (a speed choice: numpy calls per wave);
#: where it runs every head's processed waves in one call (:func:`_drive_segments`) it sets the groups the sums are
#: added by, as the step-by-step run adds them.
_BLOCK_WAVES = 256


def _bulk_reads(model: Any, engine: _Engine, v: int, a: int, dropped: int) -> tuple[list, list, np.ndarray, np.ndarray]:
    """Certified waves v .. a − 1 in closed form (``model.bulk``), with ``dropped`` stream rows of wave a (the head of
    its stream that :meth:`_Wave.cut` left out: whole misses) added to the stream tensors' reads."""
    empty = np.zeros(0, np.int64)
    reads, dirty, lanes, rows = model.bulk(v, a - 1) if a > v else ([], [], empty, empty)
    merged: dict[str, list[int]] = {t: [tot, big] for t, tot, big in reads}
    for name, per in zip(engine.names, engine.per.tolist()):
        got = merged.setdefault(name, [0, 0])
        got[0] += dropped * per
        got[1] = max(got[1], engine.chunk * per)
    return [(t, tot, big) for t, (tot, big) in merged.items()], dirty, lanes, rows


def _tail_wave(model: Any, engine: _Engine, a: int) -> tuple[_Wave, int]:
    """Wave a cut to the tail of its stream that weighs the saturation distance, and the stream rows left out."""
    d_sat = engine.d_sat
    wave, dropped = model.build(a, tail=d_sat)
    if int(wave.rows.sum()) * engine.per_sum < d_sat:  # the built tail fell short: the whole stream
        wave, dropped = model.build(a)
    wave, more = wave.cut(d_sat, engine.per_sum)
    return wave, dropped + more


def _plan(model: Any, engine: _Engine) -> Any:
    """:func:`_drive`'s steps in order (a generator): ``("range", a, b)`` waves a..b built as one block, ``("flush",)``
    the pending blocks run, ``("bulk", v, a, heavy)`` after the pending blocks ran: the stack dropped and waves
    v .. a − 1 added in closed form where the sums allow it (the caller sends back whether it did,
    :meth:`_Engine.can_bulk`; with ``heavy``, wave a is then pending, cut to its stream's tail: :func:`_tail_wave`)."""
    cert = model.certified(engine.d_sat)
    fresh, stream = model.fresh_weight, model.stream_weight
    d_sat = engine.d_sat
    n = len(cert)
    per_block = getattr(model, "block_waves", _BLOCK_WAVES)
    pending = [0, 0]  # blocks and waves pending

    def queue(a: int, b: int) -> Any:  # waves a..b, processed in order
        for u in range(a, b + 1, per_block):
            e = min(b, u + per_block - 1)
            yield ("range", u, e)
            pending[0] += 1
            pending[1] += e - u + 1
            if pending[1] >= per_block:
                yield from flush()

    def flush() -> Any:
        if pending[0]:
            yield ("flush",)
            pending[0] = pending[1] = 0

    cuts = (np.nonzero(cert[1:] != cert[:-1])[0] + 1).tolist()
    for v, e in zip([0] + cuts, cuts + [n]) if n else ():  # runs of waves alike: certified or not
        b = e - 1
        if not cert[v]:
            yield from queue(v, b)
            continue
        heavy = np.nonzero(stream[v:b + 1] >= d_sat)[0]
        if len(heavy):
            a = v + int(heavy[-1])
            pending[0] = pending[1] = 0  # the bulk runs what is pending first
            if (yield ("bulk", v, a, True)):
                pending[0], pending[1] = 1, 1
                v = a + 1
        else:
            acc, k = stream[b] + fresh[b], 1  # the last wave is always processed: its entries are the state
            while b - k >= v and acc < d_sat:
                acc += fresh[b - k]
                k += 1
            first_kept = b - k + 1 if acc >= d_sat else v
            if first_kept > v:
                pending[0] = pending[1] = 0
                if (yield ("bulk", v, first_kept, False)):
                    v = first_kept
        if v <= b:
            yield from queue(v, b)
    yield from flush()


def _drive_sequential(model: Any, engine: _Engine) -> None:
    """Run :func:`_plan`'s steps one by one."""
    pending: list[_Wave] = []
    plan = _plan(model, engine)
    answer = None
    while True:
        try:
            op = plan.send(answer)
        except StopIteration:
            break
        answer = None
        if op[0] == "range":
            pending.append(model.build_block(op[1], op[2]))
        elif op[0] == "flush":
            engine.steps(_concat(pending))
            pending.clear()
        else:
            _, v, a, heavy = op
            wave, dropped = _tail_wave(model, engine, a) if heavy else (None, 0)
            reads, dirty, lanes, rows = _bulk_reads(model, engine, v, a, dropped)
            if pending:
                engine.steps(_concat(pending))
                pending.clear()
            answer = engine.can_bulk(reads)
            if answer:
                engine.drop_all()
                engine.bulk(reads, dirty, lanes, rows, a - v)
                if heavy:
                    pending.append(wave)
    if pending:
        engine.steps(_concat(pending))


def _drive(model: Any, engine: _Engine) -> None:
    """Run a kernel's waves: certified runs in closed form but for the entries that set the state,
    the other waves in blocks.

    In a run of certified waves [v, b] (every re-touched item at least the saturation distance
    deep, so every read is a whole miss), the state the next wave sees is the top of the stack:
    with a the last wave of the run whose stream alone weighs the saturation distance, waves
    v .. a−1 and the head of a's stream are added in closed form (``model.bulk``), and the tail of
    a's stream that weighs the saturation distance, with waves a+1 .. b, is processed. Every
    entry older than that tail is deep for the waves that follow and at the kernel's end (each of
    the tail's entries stays above them, or its item's later entry does), so the stack is dropped
    first. Without such a wave, the fewest last waves whose fresh entries plus the last stream weigh
    the saturation distance are processed and the rest added (:func:`_plan`).

    Where the model builds blocks of waves at once (:class:`_QStationary`: a long sequence over many heads, each
    head's start and end processed, its middle added), the processed waves of every run go to the engine in one
    call (:func:`_drive_segments`): the same sums, to the bit (tests/test_l2_stream.py).
    """
    if getattr(model, "segments", False) and _drive_segments(model, engine):
        return
    _drive_sequential(model, engine)


def _drive_segments(model: Any, engine: _Engine) -> bool:
    """Run :func:`_plan`'s steps with one :meth:`_Engine.steps` call, taking every bulk: each bulk's drop of the
    stack becomes a floor (entries before it are deep for the accesses after it), its extents a wave of needs
    without accesses, and the sums are added afterwards in the order the step-by-step run adds them (each flushed
    group's stream misses, then its fresh reads, then the bulk's reads): the same doubles. Returns False, the engine
    cold again, where there are fewer than two bulks (nothing to gain), a wave to run spans more than two grid rows
    (:func:`_segments_many`) or a bulk's reads cannot be added in closed form then (:meth:`_Engine.can_bulk`): the
    caller runs the steps one by one."""
    plan, ops, answer = _plan(model, engine), [], None
    while True:  # every bulk taken
        try:
            op = plan.send(answer)
        except StopIteration:
            break
        ops.append(op)
        answer = op[0] == "bulk"
    if sum(op[0] == "bulk" for op in ops) < 2:
        return False
    layout = _segments_many(model, engine, ops)
    if layout is None:
        return False
    merged, acc_bounds, fresh, bulks = layout  # bulks: (groups flushed before it, position, reads, dirty, waves)
    drop_at = np.array([engine.now + pos for _, pos, _, _, _ in bulks], dtype=np.int64)
    k = np.searchsorted(drop_at, engine.now + merged.spos, side="right") - 1
    floor = np.where(k >= 0, drop_at[np.maximum(k, 0)], np.iinfo(np.int64).min)
    miss = engine.steps(merged, floor=floor, defer=True)
    engine.waves -= len(bulks)  # the waves of needs are no waves
    sums = engine.sums
    no_lanes = np.zeros(0, dtype=np.int64)
    n_groups = len(fresh)
    nb = 0
    for g in range(n_groups + 1):
        while nb < len(bulks) and bulks[nb][0] == g:  # the bulks after the first g groups
            _, _, reads, dirty, waves = bulks[nb]
            if not engine.can_bulk(reads):
                engine.reset()
                return False
            engine.bulk(reads, dirty, no_lanes, no_lanes, waves)  # its extents are in the block's waves of needs
            nb += 1
        if g == n_groups:
            break
        a, b = acc_bounds[g], acc_bounds[g + 1]
        for m, name in enumerate(engine.names):
            sums.add_array(name, miss[m][a:b])
        for t, total, largest in fresh[g]:
            sums.add_whole_run(t, total, largest)
    engine.drop_before(int(drop_at[-1]))
    return True


def _segments_many(model: Any, engine: _Engine, ops: list[tuple]) -> tuple | None:
    """The block :func:`_drive_segments` runs, from one :meth:`_QStationary.build_many` of every wave :func:`_plan`
    processes (each bulk's cut wave from the chunk step its tail starts at, then cut as :func:`_tail_wave` cuts it):
    (the block with each bulk's wave of needs, each flushed group's first stream access and the end, each group's
    fresh reads, the bulks as (groups before it, its position, reads, dirty, waves)); None where the model has no
    ``build_many`` or a wave spans more than two grid rows."""
    if not hasattr(model, "build_many"):
        return None
    built: list[int] = []
    group_of: list[int] = []
    cut_at: list[int] = []  # built index of each cut wave
    marks = []  # (v, a, heavy, built before it, groups before it)
    g, pending = 0, False
    for op in ops:
        if op[0] == "range":
            built.extend(range(op[1], op[2] + 1))
            group_of.extend([g] * (op[2] - op[1] + 1))
            pending = True
        elif op[0] == "flush":
            if pending:
                g, pending = g + 1, False
        else:
            if pending:
                g, pending = g + 1, False
            _, v, a, heavy = op
            marks.append((v, a, heavy, len(built), g))
            if heavy:
                cut_at.append(len(built))
                built.append(a)
                group_of.append(g)
                pending = True
    n_groups = g + int(pending)
    idx = np.array(built, dtype=np.int64)
    if not len(idx) or not model.two[idx].all():
        return None
    nw = len(idx)
    per_sum, d_sat = engine.per_sum, engine.d_sat
    c_from = np.zeros(nw, dtype=np.int64)
    dropped = {}
    if cut_at:  # the cut waves' streams from the chunk step :meth:`_QStationary.build` takes with tail=d_sat on
        t_ix = np.array(cut_at, dtype=np.int64)
        w_ix = idx[t_ix]
        need_a, need_b = model.need_a[w_ix], np.where(model.lane_b[w_ix] >= 0, model.need_b[w_ix], 0)
        c0 = model.tail_step(-(-np.maximum(need_a, need_b) // model.chunk), d_sat)
        kept = np.maximum(need_a - c0 * model.chunk, 0) + np.maximum(need_b - c0 * model.chunk, 0)
        c0 = np.where(kept * per_sum < d_sat, 0, c0)  # the built tail fell short: the whole stream
        c_from[t_ix] = c0
        for t, rows in zip(cut_at, (np.minimum(need_a, c0 * model.chunk) + np.minimum(need_b, c0 * model.chunk)).tolist()):
            dropped[t] = rows
    wave, q, r_wave, first = model.build_many(idx, c_from)
    acc0 = np.searchsorted(wave.wave_of, np.arange(nw + 1))  # each wave's stream accesses
    keep = np.ones(len(wave.weight), dtype=bool)
    acc_keep = np.ones(len(wave.spos), dtype=bool)
    for t in cut_at:  # the fewest last stream accesses weighing the saturation distance are kept (_Wave.cut)
        a0, a1 = int(acc0[t]), int(acc0[t + 1])
        rows = wave.rows[a0:a1]
        drop = _dropped_head(rows, d_sat, per_sum)
        dropped[t] += int(rows[:drop].sum())
        keep[wave.spos[a0:a0 + drop]] = False
        acc_keep[a0:a0 + drop] = False
    new_pos = np.cumsum(keep) - 1
    ins = np.array([m[3] for m in marks], dtype=np.int64)  # each bulk's needs come before this built wave
    shift = lambda w: w + np.searchsorted(ins, w, side="right")  # noqa: E731  wave indices with the needs' waves
    needs_l, needs_r, needs_w, bulks = [wave.need_lanes], [wave.need_rows], [shift(wave.need_wave)], []
    pos = np.append(new_pos[first], int(keep.sum()))  # each built wave's first position, and the end
    for k, (v, a, heavy, before, groups) in enumerate(marks):
        reads, dirty, lanes, rows = _bulk_reads(model, engine, v, a, dropped.get(before, 0) if heavy else 0)
        needs_l.append(np.asarray(lanes, dtype=np.int64))
        needs_r.append(np.asarray(rows, dtype=np.int64))
        needs_w.append(np.full(len(lanes), before + k, dtype=np.int64))
        bulks.append((groups, int(pos[before]), reads, dirty, a - v))
    need_w = np.concatenate(needs_w)
    order = np.argsort(need_w, kind="stable")
    merged = _Wave(wave.weight[keep], new_pos[wave.spos[acc_keep]], wave.lane[acc_keep], wave.chunk[acc_keep],
                   wave.rows[acc_keep], np.concatenate(needs_l)[order], np.concatenate(needs_r)[order],
                   new_pos[wave.wpos], wave.wtensor, wave.wbytes, wave.fresh, shift(wave.wave_of[acc_keep]),
                   need_w[order], nw + len(marks))
    group_of_w = np.array(group_of, dtype=np.int64)
    g_first = np.searchsorted(group_of_w, np.arange(n_groups + 1))  # each group's first built wave
    acc_kept = np.concatenate(([0], np.cumsum(acc_keep)))
    acc_bounds = [int(acc_kept[acc0[w]]) for w in g_first.tolist()]
    g_run = group_of_w[r_wave]
    cuts = np.searchsorted(g_run, np.arange(n_groups))
    totals = np.add.reduceat(q, cuts).tolist()
    largest = np.maximum.reduceat(q, cuts).tolist()
    fresh = [[(t, int(tot) * b, int(big) * b) for t, b in model.rr] for tot, big in zip(totals, largest)]
    return merged, acc_bounds, fresh, bulks


def _build_block(model: Any, a: int, b: int) -> _Wave:
    """Waves a..b of ``model`` as one block (each built alone, then joined)."""
    return _concat([model.build(u)[0] for u in range(a, b + 1)])


def _fresh_runs(tensors: list[tuple[str, int]], rows: np.ndarray | int, largest_rows: int) -> list[tuple[str, int, int]]:
    """(tensor, total bytes, largest term) of fresh accesses of ``rows`` rows each (or ``rows`` rows in all, an int),
    ``bytes per row`` per tensor."""
    total = int(np.sum(rows))
    return [(t, total * b, largest_rows * b) for t, b in tensors]


class _QStationary:
    """Waves of a Q-stationary kernel in the bundled kernel's order (as
    :func:`iomodel.schedule.grid._q_stationary_waves` with ``grid_order="tiles-fastest"``,
    ``key_order="ascending"``, no band; W programs of the grid a wave, or of one grid row where
    :func:`~iomodel.schedule.grid.row_waves` holds for ``persistent``): per wave the runs (b·H + h, tiles i0..i1) of its W programs,
    fresh per-row reads of their rows (one group per run), the K/V chunks of their KV heads
    (chunk-major, KV heads ascending; KV head of run bh is bh // G) up to each head's longest key
    range, fresh per-row writes (per run, in ``row_writes`` order). Units: rows and bytes."""

    #: :func:`_drive` may run its processed waves in one engine call (:func:`_drive_segments`).
    segments = True

    def __init__(self, spec: LayerSpec, block_m: int, block_n: int, w: int, tile_order: str,
                 row_reads: dict[str, int], row_writes: dict[str, int], share: float, read_weight: float = 1.0,
                 persistent: str | None = None) -> None:
        if tile_order not in TILE_ORDERS:
            raise IomodelError(f"tile_order {tile_order!r} is unknown: use forward or reverse")
        B, H, Hk = spec.batch, spec.heads, spec.kv_heads
        self.G = spec.group
        n_q, n_k, d, s = spec.seqlen_q, spec.seqlen_k, spec.head_dim, spec.width
        self.t_r = t_r = cdiv(n_q, block_m)
        self.by_row = row_waves(spec, t_r, w, tile_order, "tiles-fastest", persistent)
        i = np.arange(t_r, dtype=np.int64)
        if spec.causal:  # prefill_key_rows, vectorised
            hi = np.clip(np.minimum((i + 1) * block_m, n_q) + spec.causal_offset, 0, n_k)
            kv = np.minimum(n_k, -(-hi // block_n) * block_n)
        else:
            kv = np.full(t_r, n_k, dtype=np.int64)
        q = np.minimum(block_m, n_q - i * block_m)
        if tile_order == "reverse":
            kv, q = kv[::-1].copy(), q[::-1].copy()
        self.kv, self.q, self.n_q = kv, q, n_q
        self.qcum = np.concatenate(([0], np.cumsum(q)))
        self.w, self.total = w, t_r * B * H
        self.chunk = _chunk_rows(block_n)
        self.n_chunks = max(1, cdiv(int(kv.max()), self.chunk))
        self.n_lanes = B * Hk
        self.rr, self.rw = list(row_reads.items()), list(row_writes.items())
        self.rr_sum, self.rw_sum = sum(row_reads.values()), sum(row_writes.values())
        # a fresh row byte's weight in the stack (the forward's Q, read by one program: L2Params.q_share)
        self.rr_weight = self.rr_sum * read_weight
        self.rw_names = [t for t, _ in self.rw]
        self.rw_ids = np.arange(len(self.rw), dtype=np.int64)
        self.rw_bytes = np.array([b for _, b in self.rw], dtype=np.int64)
        self.share = share
        self.kv_bytes = d * s  # per key row, K and V each
        self.requested_read = {t: B * H * n_q * b for t, b in row_reads.items()}
        self.requested_read["K"] = B * H * int(kv.sum()) * d * s
        self.requested_read["V"] = self.requested_read["K"]
        self.requested_write = {t: B * H * n_q * b for t, b in row_writes.items()}
        self._describe()

    def engine(self, capacity: int, ways: int) -> _Engine:
        """A cold engine for this kernel's stream items (K and V chunks of each KV head)."""
        return _Engine(capacity, self.share, ways, self.n_lanes, self.n_chunks, self.chunk,
                       (self.kv_bytes, self.kv_bytes), ("K", "V"), tuple(self.rw_names))

    def _rows_before(self, p: np.ndarray) -> np.ndarray:
        return (p // self.t_r) * self.n_q + self.qcum[p % self.t_r]

    def _describe(self) -> None:
        """Per wave (numpy, all waves at once): rows, fresh weights, and its KV heads: lane a (of its
        first grid row), lane b (of its last, when another), the lanes between (every grid row of
        theirs inside the wave), with the key rows each needs."""
        t_r, w, G, kv = self.t_r, self.w, self.G, self.kv
        if self.by_row:  # each grid row's waves from its first tile (iomodel.schedule.grid.row_waves)
            per_row = cdiv(t_r, w)
            v = np.arange(self.total // t_r * per_row, dtype=np.int64)
            row, k = v // per_row, v % per_row
            p0 = row * t_r + k * w
            p1 = np.minimum(p0 + w, (row + 1) * t_r)
        else:
            nw = cdiv(self.total, w)
            p0 = np.arange(nw, dtype=np.int64) * w
            p1 = np.minimum(p0 + w, self.total)
        rows = self._rows_before(p1) - self._rows_before(p0)
        self.p0, self.p1, self.rows = p0, p1, rows
        self.fresh_weight = rows * float(self.rr_weight) + rows * (self.rw_sum * self.share)
        bh0, bh1 = p0 // t_r, (p1 - 1) // t_r
        self.bh0, self.bh1 = bh0, bh1
        self.two = bh1 - bh0 <= 1
        full = max(int(kv[0]), int(kv[-1]))  # a whole grid row's longest key range (monotone in the tile)
        a0 = p0 - bh0 * t_r
        e0 = np.minimum(t_r, p1 - bh0 * t_r)
        m0 = np.maximum(kv[a0], kv[e0 - 1])  # run of grid row bh0
        e1 = np.maximum(1, p1 - bh1 * t_r)
        m1 = np.maximum(kv[0], kv[e1 - 1])  # run of grid row bh1, where bh1 > bh0
        kv0, kv1 = bh0 // G, bh1 // G
        second = bh1 > bh0
        same = kv1 == kv0
        last_a = np.minimum(bh1, (kv0 + 1) * G - 1)  # lane a's last grid row in the wave
        need_a = np.where(second & (last_a > bh0) & (last_a < bh1), np.maximum(m0, full), m0)
        need_a = np.where(second & same, np.maximum(need_a, m1), need_a)
        self.lane_a, self.need_a = kv0, need_a
        self.lane_b = np.where(same, -1, kv1)
        self.need_b = np.where(same, 0, np.where(kv1 * G < bh1, np.maximum(m1, full), m1))
        self.middle = np.where(same, 0, np.maximum(0, kv1 - kv0 - 1))  # lanes between a and b, each a whole KV head
        self.full = full
        self.stream_weight = (self.need_a + self.need_b + self.middle * full) * float(2 * self.kv_bytes)
        self.q_max = int(self.q.max())
        self._prefix: tuple | None = None  # bulk's prefix sums, taken on its first call

    def certified(self, d_sat: float) -> np.ndarray:
        """Waves whose every K/V re-read is at least ``d_sat`` deep (bool per wave).

        Every lane but a starts in the wave (its KV heads' grid rows are consecutive): new. Lane a
        is new if its first program is in the wave; else it was in the previous wave (as that
        wave's lane b, or a), and an item (a, c) read again lies below at least that wave's writes,
        this wave's fresh reads and the previous wave's chunks of lane a but one (each either still
        above it or moved up by this wave before it):
        ``LB = writes(v−1) + reads(v) + 2·d·s·need_a(v−1) − 2·d·s·chunk``.
        """
        n = len(self.p0)
        new_a = self.lane_a * self.G * self.t_r >= self.p0
        prev = np.zeros(n, dtype=np.int64) - 1
        prev[1:] = np.where(self.lane_b[:-1] == self.lane_a[1:], self.need_b[:-1],
                            np.where(self.lane_a[:-1] == self.lane_a[1:], self.need_a[:-1], -1))
        per_sum = 2 * self.kv_bytes
        writes = self.rows * (self.rw_sum * self.share)
        lb = np.full(n, -np.inf)
        lb[1:] = writes[:-1] + self.rows[1:] * float(self.rr_weight) + (prev[1:] - self.chunk) * float(per_sum)
        ok_prev = np.zeros(n, dtype=bool)
        ok_prev[1:] = (prev[1:] >= 0) & (lb[1:] >= d_sat)
        return new_a | ok_prev

    def build(self, v: int, tail: float | None = None) -> tuple[_Wave, int]:
        """Wave v's accesses: fresh reads per run, the K/V stream, fresh writes per run.

        With ``tail``, only the last chunks of the stream whose rows weigh at least ``tail`` bytes
        (× 2·d·s) are built. Returns the wave and the K (or V) rows of the stream left out.
        """
        t_r, G, chunk = self.t_r, self.G, self.chunk
        p0, p1 = int(self.p0[v]), int(self.p1[v])
        bh0, bh1 = p0 // t_r, (p1 - 1) // t_r
        if bh1 - bh0 <= 1:  # one or two grid rows: plain arithmetic
            i0 = [p0 - bh0 * t_r] + ([0] if bh1 > bh0 else [])
            i1 = [min(t_r, p1 - bh0 * t_r)] + ([p1 - bh1 * t_r] if bh1 > bh0 else [])
            kv, qcum = self.kv, self.qcum
            q = np.array([int(qcum[e] - qcum[a]) for a, e in zip(i0, i1)], dtype=np.int64)
            run_need = [max(int(kv[a]), int(kv[e - 1])) for a, e in zip(i0, i1)]
            if bh1 > bh0 and bh1 // G == bh0 // G:
                lanes, need = np.array([bh0 // G], dtype=np.int64), np.array([max(run_need)], dtype=np.int64)
            else:
                lanes = np.array([bh // G for bh in range(bh0, bh1 + 1)], dtype=np.int64)
                need = np.array(run_need, dtype=np.int64)
        else:
            bh = np.arange(bh0, bh1 + 1, dtype=np.int64)
            i0a = np.maximum(0, p0 - bh * t_r)
            i1a = np.minimum(t_r, p1 - bh * t_r)
            q = self.qcum[i1a] - self.qcum[i0a]
            run_need_a = np.maximum(self.kv[i0a], self.kv[i1a - 1])
            lanes, first = np.unique(bh // G, return_index=True)  # ascending = order of first appearance
            need = np.maximum.reduceat(run_need_a, first)
        runs = len(q)
        top = int(need.max())
        n_c = cdiv(top, chunk) if top > 0 else 0
        c0 = 0 if tail is None else int(self.tail_step(np.array([n_c]), tail)[0])
        c = np.arange(c0, n_c, dtype=np.int64)
        rows = np.minimum(np.maximum(need[None, :] - c[:, None] * chunk, 0), chunk)  # (chunk, lane), chunk-major
        if len(lanes) == 1:
            s_rows = rows[:, 0]
            keep = s_rows > 0
            s_rows, s_chunk = s_rows[keep], c[keep]
            s_lane = np.full(len(s_rows), int(lanes[0]), dtype=np.int64)
        else:
            flat = rows.ravel()
            keep = flat > 0
            s_lane = np.tile(lanes, len(c))[keep]
            s_chunk = np.repeat(c, len(lanes))[keep]
            s_rows = flat[keep]
        ns = len(s_rows)
        nwr = len(self.rw)
        weight = np.empty(runs + ns + runs * nwr)
        weight[:runs] = q * self.rr_weight
        wb = (q[:, None] * self.rw_bytes[None, :]).ravel()  # (run, tensor)
        weight[runs + ns:] = wb * self.share
        dropped = int(np.minimum(need, c0 * chunk).sum())
        return _Wave(weight, np.arange(runs, runs + ns, dtype=np.int64), s_lane, s_chunk, s_rows, lanes, need,
                     np.arange(runs + ns, runs + ns + runs * nwr, dtype=np.int64), np.tile(self.rw_ids, runs),
                     wb, _fresh_runs(self.rr, q, int(q.max()))), dropped

    def tail_step(self, n_c: np.ndarray, tail: float) -> np.ndarray:
        """The first chunk step of each stream of ``n_c`` chunk steps whose steps from it on weigh at least ``tail``
        bytes (every step but the last has a full chunk of the longest lane: ``tail`` over 2·d·s·chunk steps, and the
        last), as :meth:`build` with ``tail`` builds it (int64)."""
        return np.maximum(0, n_c - 1 - cdiv(int(math.ceil(tail)), self.chunk * 2 * self.kv_bytes))

    def build_block(self, a: int, b: int) -> _Wave:
        """Waves a..b as one block: vectorised over the waves when each has at most two grid rows
        (as :meth:`build` wave by wave: fresh reads per run, the stream chunk-major with lane a
        before lane b, fresh writes per run)."""
        if a == b or not self.two[a:b + 1].all():
            return _build_block(self, a, b)
        return self.build_many(np.arange(a, b + 1, dtype=np.int64))[0]

    def build_many(self, sl: np.ndarray, c_from: np.ndarray | None = None
                   ) -> tuple[_Wave, np.ndarray, np.ndarray, np.ndarray]:
        """Waves ``sl`` (ascending wave indices, each of at most two grid rows) as one block, as :meth:`build_block`;
        with the rows of each run (int64), the block's wave of each run (0 .. len(sl) − 1) and the first position of
        each wave in the block. With ``c_from`` (per wave), each wave's stream from that chunk step on (as
        :meth:`build` with ``tail``: the rows left out are the caller's)."""
        t_r, chunk, nw = self.t_r, self.chunk, len(sl)
        p0, p1, bh0, bh1 = self.p0[sl], self.p1[sl], self.bh0[sl], self.bh1[sl]
        second = bh1 > bh0
        runs_w = 1 + second.astype(np.int64)  # runs per wave
        r_wave = np.repeat(np.arange(nw, dtype=np.int64), runs_w)
        first_run = np.concatenate(([True], r_wave[1:] != r_wave[:-1]))
        r_i0 = np.where(first_run, (p0 - bh0 * t_r)[r_wave], 0)
        r_i1 = np.where(first_run, np.minimum(t_r, p1 - bh0 * t_r)[r_wave], (p1 - bh1 * t_r)[r_wave])
        q = self.qcum[r_i1] - self.qcum[r_i0]  # rows per run
        la, na, lb, nb = self.lane_a[sl], self.need_a[sl], self.lane_b[sl], self.need_b[sl]
        c_end = -(-np.maximum(na, nb) // chunk)  # chunk steps per wave
        c_beg = np.zeros(nw, dtype=np.int64) if c_from is None else np.minimum(c_from, c_end)
        n_c = c_end - c_beg
        steps = int(n_c.sum())
        s_wave = np.repeat(np.arange(nw, dtype=np.int64), n_c)
        c = np.arange(steps, dtype=np.int64) - np.repeat(np.cumsum(n_c) - n_c, n_c) + np.repeat(c_beg, n_c)
        rows2 = np.stack((np.minimum(np.maximum(na[s_wave] - c * chunk, 0), chunk),
                          np.minimum(np.maximum(nb[s_wave] - c * chunk, 0), chunk)), axis=1)  # (step, lane a/b)
        flat = rows2.ravel()
        keep = flat > 0
        s_rows = flat[keep]
        s_lane = np.stack((la[s_wave], lb[s_wave]), axis=1).ravel()[keep]
        s_chunk = np.repeat(c, 2)[keep]
        s_w = np.repeat(s_wave, 2)[keep]
        ns_w = np.bincount(s_w, minlength=nw)
        nwr = len(self.rw)
        size = runs_w + ns_w + runs_w * nwr
        start = np.cumsum(size) - size  # first position of each wave
        run_k = np.arange(len(r_wave), dtype=np.int64) - np.repeat(np.cumsum(runs_w) - runs_w, runs_w)  # run in wave
        q_pos = start[r_wave] + run_k
        s_k = np.arange(len(s_rows), dtype=np.int64) - np.repeat(np.cumsum(ns_w) - ns_w, ns_w)
        spos = start[s_w] + runs_w[s_w] + s_k
        w_pos = (start[r_wave] + runs_w[r_wave] + ns_w[r_wave] + run_k * nwr)[:, None] + np.arange(nwr)[None, :]
        weight = np.zeros(int(size.sum()))
        weight[q_pos] = q * self.rr_weight
        wb = (q[:, None] * self.rw_bytes[None, :]).ravel()
        weight[w_pos.ravel()] = wb * self.share
        has_b = lb >= 0
        wave_ix = np.arange(nw, dtype=np.int64)
        need_wave = np.concatenate((wave_ix, wave_ix[has_b]))
        order = np.argsort(need_wave, kind="stable")
        return _Wave(weight, spos, s_lane, s_chunk, s_rows, np.concatenate((la, lb[has_b]))[order],
                     np.concatenate((na, nb[has_b]))[order], w_pos.ravel(), np.tile(self.rw_ids, len(q)), wb,
                     _fresh_runs(self.rr, q, int(q.max())), s_w, need_wave[order], nw), q, r_wave, start

    def bulk(self, a: int, b: int) -> tuple[list, list, np.ndarray, np.ndarray]:
        """Waves a..b (certified) in closed form: (reads, dirty, lanes, rows). The sums over the waves are differences
        of prefix sums over all waves (int64, exact), taken once per model (a kernel adds a few bulks per head)."""
        if self._prefix is None:
            z = np.zeros(1, dtype=np.int64)
            self._prefix = tuple(np.concatenate((z, np.cumsum(x))) for x in (
                self.rows, self.need_a + self.need_b + self.middle * self.full, self.bh1 - self.bh0 + 1,
                self.middle))
        rows_c, kv_c, runs_c, mid_c = self._prefix
        sl = slice(a, b + 1)
        total = int(rows_c[b + 1] - rows_c[a])
        kv_rows = int(kv_c[b + 1] - kv_c[a])
        reads = _fresh_runs(self.rr, total, self.w * self.q_max)
        reads += [("K", kv_rows * self.kv_bytes, self.chunk * self.kv_bytes),
                  ("V", kv_rows * self.kv_bytes, self.chunk * self.kv_bytes)]
        runs = int(runs_c[b + 1] - runs_c[a])
        dirty = [(t, total * bb, runs) for t, bb in self.rw]
        la, na, lb_, nb = self.lane_a[sl], self.need_a[sl], self.lane_b[sl], self.need_b[sl]
        has_b = lb_ >= 0
        lanes, need = [la, lb_[has_b]], [na, nb[has_b]]
        if mid_c[b + 1] > mid_c[a]:  # the lanes between a and b: whole KV heads
            mid = self.middle[sl]
            m = np.nonzero(mid)[0]
            between = np.concatenate([np.arange(x + 1, y, dtype=np.int64) for x, y in zip(la[m].tolist(), lb_[m].tolist())])
            lanes.append(between)
            need.append(np.full(len(between), self.full, dtype=np.int64))
        return reads, dirty, np.concatenate(lanes), np.concatenate(need)


class _DkdvLockstep:
    """Waves of ``_bwd_dkdv`` when every key tile loads query rows [0, N_q) and S = 1 (as
    :func:`iomodel.schedule.grid.dkdv_waves`): per wave its runs (KV head, key tiles j0..j1), a
    fresh K/V group per run, the query-row chunks (Q, dO, LSE, Delta) of every head of its KV heads
    (passes over the group outermost, then chunks, then query heads ascending: every program is at
    the same row at the same step, so one touch serves the wave), and dK, dV per program."""

    def __init__(self, spec: LayerSpec, tiling: Tiling, w: int, share: float) -> None:
        B, Hk, G, n_k, n_q = spec.batch, spec.kv_heads, spec.group, spec.seqlen_k, spec.seqlen_q
        d, s, bn = spec.head_dim, spec.width, tiling.bwd_block_n
        self.G, self.n_q, self.w, self.share = G, n_q, w, share
        self.t_c = t_c = cdiv(n_k, bn)
        j = np.arange(t_c, dtype=np.int64)
        self.k_rows = np.minimum(bn, n_k - j * bn)
        self.kcum = np.concatenate(([0], np.cumsum(self.k_rows)))
        self.chunk = _chunk_rows(tiling.bwd_block_m)
        self.n_chunks = cdiv(n_q, self.chunk)
        self.n_lanes = B * Hk * G
        self.per_row = tuple(backward_row_reads(spec).values())  # Q, dO, LSE, Delta
        self.row_q = sum(self.per_row)
        self.kv_bytes = d * s
        self.total = t_c * B * Hk
        names = ("Q", "dO", "LSE", "Delta")
        self.requested_read = {"K": B * Hk * n_k * d * s, "V": B * Hk * n_k * d * s}
        self.requested_read.update({t: B * Hk * G * t_c * n_q * b for t, b in zip(names, self.per_row)})
        self.requested_write = {"dK": B * Hk * n_k * d * s, "dV": B * Hk * n_k * d * s}
        self._describe()

    def engine(self, capacity: int, ways: int) -> _Engine:
        """A cold engine for the query-row chunks of each query head."""
        return _Engine(capacity, self.share, ways, self.n_lanes, self.n_chunks, self.chunk, self.per_row,
                       ("Q", "dO", "LSE", "Delta"), ("dK", "dV"))

    def _describe(self) -> None:
        t_c, w = self.t_c, self.w
        nw = cdiv(self.total, w)
        p0 = np.arange(nw, dtype=np.int64) * w
        p1 = np.minimum(p0 + w, self.total)
        before = lambda p: (p // t_c) * int(self.kcum[-1]) + self.kcum[p % t_c]  # noqa: E731 key rows before program p
        krows = before(p1) - before(p0)
        self.p0, self.p1, self.krows = p0, p1, krows
        kv2 = 2 * self.kv_bytes
        self.fresh_weight = krows * float(kv2) + krows * (kv2 * self.share)
        self.kv0, self.kv1 = p0 // t_c, (p1 - 1) // t_c
        heads = (self.kv1 - self.kv0 + 1) * self.G
        self.stream_weight = heads * float(self.n_q * self.row_q)

    def certified(self, d_sat: float) -> np.ndarray:
        """Waves whose every query-row re-read is at least ``d_sat`` deep (bool per wave).

        Every KV head but the first starts in the wave: new; kv0 is new if its first program is in the wave,
        else it ran in the previous wave, which read every row of its query heads: an item
        (h, c) read again lies below at least the previous wave's dK/dV, this wave's K/V and the
        previous wave's other chunks of head h: ``LB = writes(v−1) + reads(v) + row_q·(N_q − chunk)``.
        """
        n = len(self.p0)
        new0 = self.kv0 * self.t_c >= self.p0
        kv2 = 2 * self.kv_bytes
        lb = np.full(n, -np.inf)
        lb[1:] = (self.krows[:-1] * (kv2 * self.share) + self.krows[1:] * float(kv2)
                  + float(self.row_q * (self.n_q - self.chunk)))
        ok = np.zeros(n, dtype=bool)
        ok[1:] = lb[1:] >= d_sat
        return new0 | ok

    def build(self, v: int, tail: float | None = None) -> tuple[_Wave, int]:
        """Wave v's accesses: K/V per run, the query-row stream, dK and dV per program.

        With ``tail``, only the last stream accesses whose rows weigh at least ``tail`` bytes
        (× row bytes) are built. Returns the wave and the rows of the stream left out.
        """
        t_c, G, chunk, nc = self.t_c, self.G, self.chunk, self.n_chunks
        p0, p1 = int(self.p0[v]), int(self.p1[v])
        kv = np.arange(p0 // t_c, (p1 - 1) // t_c + 1, dtype=np.int64)
        j0 = np.maximum(0, p0 - kv * t_c)
        j1 = np.minimum(t_c, p1 - kv * t_c)
        runs, nk = len(kv), len(kv)
        krun = self.kcum[j1] - self.kcum[j0]
        total = G * nc * nk  # stream accesses, in order (pass g, chunk c, KV head)
        f0 = 0
        if tail is not None:  # enough whole chunks of the last pass, and one chunk step for the short last chunk
            f0 = max(0, total - nk * (cdiv(int(math.ceil(tail)), self.row_q * chunk) + 2))
        f = np.arange(f0, total, dtype=np.int64)
        gc, k_i = np.divmod(f, nk)
        g, c = np.divmod(gc, nc)
        s_lane = kv[k_i] * G + g
        s_chunk = c
        s_rows = np.minimum(chunk, self.n_q - s_chunk * chunk)
        ns = len(s_rows)
        progs = np.concatenate([np.arange(a, e, dtype=np.int64) for a, e in zip(j0.tolist(), j1.tolist())])
        rows_p = self.k_rows[progs] * self.kv_bytes  # dK (and dV) bytes per program
        nwr = 2 * len(progs)
        weight = np.empty(runs + ns + nwr)
        weight[:runs] = krun * (2 * self.kv_bytes)
        wb = np.repeat(rows_p, 2)
        weight[runs + ns:] = wb * self.share
        lanes = (kv[:, None] * G + np.arange(G, dtype=np.int64)[None, :]).ravel()
        dropped = G * nk * self.n_q - int(s_rows.sum())
        return _Wave(weight, np.arange(runs, runs + ns, dtype=np.int64), s_lane, s_chunk, s_rows,
                     lanes, np.full(len(lanes), self.n_q, dtype=np.int64),
                     np.arange(runs + ns, runs + ns + nwr, dtype=np.int64), np.tile(np.array([0, 1]), len(progs)), wb,
                     _fresh_runs([("K", self.kv_bytes), ("V", self.kv_bytes)], krun, int(krun.max()))), dropped

    def build_block(self, a: int, b: int) -> _Wave:
        """Waves a..b as one block."""
        return _build_block(self, a, b)

    def bulk(self, a: int, b: int) -> tuple[list, list, np.ndarray, np.ndarray]:
        """Waves a..b (certified) in closed form: (reads, dirty, lanes, rows)."""
        sl = slice(a, b + 1)
        krows = self.krows[sl]
        heads = int(((self.kv1[sl] - self.kv0[sl] + 1) * self.G).sum())
        reads = _fresh_runs([("K", self.kv_bytes), ("V", self.kv_bytes)], krows, self.w * int(self.k_rows.max()))
        reads += [(t, heads * self.n_q * per, self.chunk * per)
                  for t, per in zip(("Q", "dO", "LSE", "Delta"), self.per_row)]
        programs = int((self.p1[sl] - self.p0[sl]).sum())
        total = int(krows.sum()) * self.kv_bytes
        dirty = [("dK", total, programs), ("dV", total, programs)]
        kv = np.arange(int(self.kv0[a]), int(self.kv1[b]) + 1, dtype=np.int64)
        lanes = (kv[:, None] * self.G + np.arange(self.G, dtype=np.int64)[None, :]).ravel()
        return reads, dirty, lanes, np.full(len(lanes), self.n_q, dtype=np.int64)


class _DkdvEvents:
    """Waves of ``_bwd_dkdv`` with one group slice (S = 1), any mask or band (as
    :func:`iomodel.schedule.grid.dkdv_waves`): per wave a fresh K/V group per run, then its events
    in time order: program j reaches query-row chunk c0 of its k-th head at step
    k·(end_j − lo_j) + max(c0, lo_j) − lo_j (one touch per (step, head, chunk), the rows the longest
    of its programs needs) and stores dK_j, dV_j at step G·(end_j − lo_j), sorted by (step, touch
    before store, head or KV head, chunk or tile). An item is touched many times per wave and its
    extent is its largest touch so far: the engine tracks one extent per item. Nothing is certified:
    every wave is processed (its cost grows with the touches, W·G·N_q/chunk per wave causal)."""

    def __init__(self, spec: LayerSpec, tiling: Tiling, w: int, share: float) -> None:
        B, Hk, G, n_k, n_q = spec.batch, spec.kv_heads, spec.group, spec.seqlen_k, spec.seqlen_q
        d, s, bn = spec.head_dim, spec.width, tiling.bwd_block_n
        self.G, self.n_q, self.w, self.share = G, n_q, w, share
        self.t_c = t_c = cdiv(n_k, bn)
        j = np.arange(t_c, dtype=np.int64)
        lo, end, self.chunk, self.touch_chunks = _dkdv_tile_ranges(spec, tiling)
        self.lo, self.end = lo, end
        self.k_rows = np.minimum(bn, n_k - j * bn)
        self.kcum = np.concatenate(([0], np.cumsum(self.k_rows)))
        self.n_chunks = cdiv(n_q, self.chunk)
        self.n_lanes = B * Hk * G
        self.per_row = tuple(backward_row_reads(spec).values())  # Q, dO, LSE, Delta
        self.kv_bytes = d * s
        self.total = t_c * B * Hk
        names = ("Q", "dO", "LSE", "Delta")
        q_rows = int((end - lo).sum())
        self.requested_read = {"K": B * Hk * n_k * d * s, "V": B * Hk * n_k * d * s}
        self.requested_read.update({t: B * Hk * G * q_rows * b for t, b in zip(names, self.per_row)})
        self.requested_write = {"dK": B * Hk * n_k * d * s, "dV": B * Hk * n_k * d * s}
        nw = cdiv(self.total, w)
        self.p0 = np.arange(nw, dtype=np.int64) * w
        self.p1 = np.minimum(self.p0 + w, self.total)
        self.fresh_weight = self.stream_weight = np.zeros(nw)
        self.all_touches = int(self.touch_chunks.sum()) * G * B * Hk  # the kernel's, as dkdv_touches
        per_wave = max(1, int(self.touch_chunks.mean() * G * min(w, self.total)))
        self.block_waves = max(1, min(_BLOCK_WAVES, _BLOCK_TOUCHES // per_wave))  # waves per engine call
        # under a band the chunk is one BWD_BLOCK_M tile and lo_j, end_j are tile multiples (or N_q): every
        # touch of a chunk loads all of its rows, one extent per item (the fully associative LRU's condition)
        self.one_extent = spec.band is not None
        # the heaviest item that is re-read (a member of a chunk's group) or dirty (dK or dV of a tile), in
        # read-equivalent bytes
        self.largest_kept = max(self.chunk * max(self.per_row), float(int(self.k_rows.max()) * self.kv_bytes) * share)

    def engine(self, capacity: int, ways: int | None) -> _Engine:
        """A cold engine for the query-row chunks of each query head, one extent per chunk."""
        return _Engine(capacity, self.share, ways, self.n_lanes, self.n_chunks, self.chunk, self.per_row,
                       ("Q", "dO", "LSE", "Delta"), ("dK", "dV"), prefix_extents=False)

    def certified(self, d_sat: float) -> np.ndarray:
        """No wave is certified (within a wave the programs re-read each other's rows)."""
        return np.zeros(len(self.p0), dtype=bool)

    def touches(self, a: int, b: int) -> int:
        """Touches (before merging) of waves a..b: the engine's work."""
        p = np.arange(int(self.p0[a]), int(self.p1[b]), dtype=np.int64)
        return int(self.touch_chunks[p % self.t_c].sum()) * self.G

    def build(self, v: int, tail: float | None = None) -> tuple[_Wave, int]:
        """Wave v's accesses: K/V per run, then its touches and stores in time order."""
        t_c, G, ch, nc = self.t_c, self.G, self.chunk, self.n_chunks
        p0, p1 = int(self.p0[v]), int(self.p1[v])
        prog = np.arange(p0, p1, dtype=np.int64)
        kv_p, j_p = np.divmod(prog, t_c)  # KV head and key tile of each program, in grid order
        kvs = np.arange(p0 // t_c, (p1 - 1) // t_c + 1, dtype=np.int64)
        j0 = np.maximum(0, p0 - kvs * t_c)
        j1 = np.minimum(t_c, p1 - kvs * t_c)
        krun = self.kcum[j1] - self.kcum[j0]
        runs = len(kvs)
        lo, end = self.lo[j_p], self.end[j_p]
        span = np.where(end > lo, end - lo, 0)
        n_ch = self.touch_chunks[j_p]
        # touches: (program, head k, chunk)
        pk = np.repeat(np.arange(len(prog), dtype=np.int64), G)
        k = np.tile(np.arange(G, dtype=np.int64), len(prog))
        cnt = n_ch[pk]
        tp = np.repeat(pk, cnt)
        tk = np.repeat(k, cnt)
        c = np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt) + lo[tp] // ch
        c0 = c * ch
        start = np.maximum(c0, lo[tp])
        t = tk * span[tp] + start - lo[tp]
        h = kv_p[tp] * G + tk
        rows = np.minimum(c0 + ch, end[tp]) - start
        # events: touches (type 0: head, chunk) and stores (type 1: KV head, tile), in time order, i.e. by
        # (step, type, head or KV head, chunk or tile); one touch per (step, head, chunk): the most rows
        n_a, n_b = self.n_lanes, max(nc, t_c)
        if (2 * (G * self.n_q + 1) + 1) * n_a * n_b < _KEY_LIMIT:  # one int64 key per event
            key = ((2 * t) * n_a + h) * n_b + c
            order = np.argsort(key, kind="stable")
            key, rows = key[order], rows[order]
            new = np.ones(len(key), dtype=bool)
            new[1:] = key[1:] != key[:-1]
            at = np.nonzero(new)[0]
            rows = np.maximum.reduceat(rows, at) if len(at) else rows
            key = key[at]
            h, c0 = (key // n_b) % n_a, (key % n_b) * ch
            s_key = ((2 * (G * span) + 1) * n_a + kv_p) * n_b + j_p
            s_order = np.argsort(s_key)
            at_s = np.searchsorted(key, s_key[s_order])  # touches before each store
            ns = len(key)
            is_store = np.zeros(ns + len(prog), dtype=bool)
            is_store[at_s + np.arange(len(prog))] = True
            ev = np.empty(ns + len(prog), dtype=np.int64)
            ev[~is_store] = np.arange(ns, dtype=np.int64)
            ev[is_store] = ns + s_order
        else:
            order = np.lexsort((c0, h, t))
            t, h, c0, rows = t[order], h[order], c0[order], rows[order]
            new = np.ones(len(t), dtype=bool)
            new[1:] = (t[1:] != t[:-1]) | (h[1:] != h[:-1]) | (c0[1:] != c0[:-1])
            at = np.nonzero(new)[0]
            rows = np.maximum.reduceat(rows, at) if len(at) else rows
            t, h, c0 = t[at], h[at], c0[at]
            e_t = np.concatenate((t, G * span))
            e_type = np.concatenate((np.zeros(len(t), np.int64), np.ones(len(prog), np.int64)))
            e_a = np.concatenate((h, kv_p))
            e_b = np.concatenate((c0, j_p))
            ev = np.lexsort((e_b, e_a, e_type, e_t))
            is_store = e_type[ev] == 1
        slots = np.where(is_store, 2, 1)
        pos = runs + np.cumsum(slots) - slots  # first position of each event
        ns = len(h)
        touch_ev = ev[~is_store]  # indices into the touch arrays, in time order
        spos = pos[~is_store]
        store_ev = ev[is_store] - ns  # program of each store, in time order
        wpos = np.repeat(pos[is_store], 2) + np.tile(np.array([0, 1]), len(store_ev))
        wb = np.repeat(self.k_rows[j_p[store_ev]] * self.kv_bytes, 2)
        weight = np.zeros(runs + ns + 2 * len(prog))
        weight[:runs] = krun * (2 * self.kv_bytes)
        weight[wpos] = wb * self.share
        return _Wave(weight, spos, h[touch_ev], c0[touch_ev] // ch, rows[touch_ev], np.zeros(0, np.int64),
                     np.zeros(0, np.int64), wpos, np.tile(np.array([0, 1]), len(store_ev)), wb,
                     _fresh_runs([("K", self.kv_bytes), ("V", self.kv_bytes)], krun, int(krun.max()))), 0

    def build_block(self, a: int, b: int) -> _Wave:
        """Waves a..b as one block."""
        return _build_block(self, a, b)


class _Fresh:
    """Waves of a kernel that reads and writes every row once (``_bwd_preprocess``,
    ``_bwd_reduce_dkdv``): per wave one read item per tensor of ``reads``, then one write item per
    tensor of ``writes``, each over the wave's rows (bytes per row given)."""

    def __init__(self, tiles: int, rows_of: np.ndarray, grid_rows: int, w: int, reads: list[tuple[str, int]],
                 writes: list[tuple[str, int]], share: float) -> None:
        self.t = tiles
        self.cum = np.concatenate(([0], np.cumsum(rows_of)))
        self.total = tiles * grid_rows
        self.w, self.reads, self.writes, self.share = w, reads, writes, share
        nw = cdiv(self.total, w)
        p0 = np.arange(nw, dtype=np.int64) * w
        p1 = np.minimum(p0 + w, self.total)
        before = lambda p: (p // tiles) * int(self.cum[-1]) + self.cum[p % tiles]  # noqa: E731
        self.rows = before(p1) - before(p0)
        self.fresh_weight = (self.rows * float(sum(b for _, b in reads))
                             + self.rows * (sum(b for _, b in writes) * share))
        self.stream_weight = np.zeros(nw)
        n_rows = int(self.cum[-1]) * grid_rows
        self.requested_read = {t: n_rows * b for t, b in reads}
        self.requested_write = {t: n_rows * b for t, b in writes}

    def engine(self, capacity: int, ways: int) -> _Engine:
        """A cold engine without stream items."""
        return _Engine(capacity, self.share, ways, 0, 1, 1, (1,), ("",), tuple(t for t, _ in self.writes))

    def certified(self, d_sat: float) -> np.ndarray:
        """Every wave: nothing is read twice."""
        return np.ones(len(self.rows), dtype=bool)

    def build(self, v: int, tail: float | None = None) -> tuple[_Wave, int]:
        """Wave v: its reads (one item per tensor), then its writes (no stream: nothing left out)."""
        r = int(self.rows[v])
        nr, nw = len(self.reads), len(self.writes)
        weight = np.array([float(r * b) for _, b in self.reads] + [r * b * self.share for _, b in self.writes])
        empty = np.zeros(0, dtype=np.int64)
        return _Wave(weight, empty, empty, empty, empty, empty, empty, np.arange(nr, nr + nw, dtype=np.int64),
                     np.arange(nw, dtype=np.int64), np.array([r * b for _, b in self.writes], dtype=np.int64),
                     [(t, r * b, r * b) for t, b in self.reads]), 0

    def build_block(self, a: int, b: int) -> _Wave:
        """Waves a..b as one block."""
        return _build_block(self, a, b)

    def bulk(self, a: int, b: int) -> tuple[list, list, np.ndarray, np.ndarray]:
        """Waves a..b in closed form: (reads, dirty, no lanes)."""
        rows = self.rows[a:b + 1]
        total = int(rows.sum())
        largest = int(rows.max())
        empty = np.zeros(0, dtype=np.int64)
        return ([(t, total * bb, largest * bb) for t, bb in self.reads],
                [(t, total * bb, b - a + 1) for t, bb in self.writes], empty, empty)


@functools.lru_cache(maxsize=32)  # LayerSpec and Tiling are frozen dataclasses of hashable fields
def dkdv_touches(spec: LayerSpec, tiling: Tiling) -> int:
    """Touches of (query head, query-row chunk) the touch-by-touch ``_bwd_dkdv`` evaluation builds
    (:class:`_DkdvEvents`, before merging the touches of one step): B·H_kv·G·Σ_j c_j, c_j the query-row
    chunks tile j's rows [lo_j, end_j) cross. Its time grows with this count (measured:
    :data:`iomodel.cache.estimate.L2_CAUSAL_DKDV_MAX_TOUCHES`). Remembered for the last few layers (the worksheet
    asks it while deciding what to estimate and again in the estimate; from the tiles' query ranges,
    :func:`_dkdv_tile_ranges`, about 1 ms at 2^24 tokens on a 2-core CPU, measured while writing it).

    Args:
        spec: the layer (prefill, ``backward``); tiling: its tiles (BWD_BLOCK_M, BWD_BLOCK_N).

    Returns:
        The count (touches).
    """
    return int(_dkdv_tile_ranges(spec, tiling)[3].sum()) * spec.group * spec.batch * spec.kv_heads


def _dkdv_tile_ranges(spec: LayerSpec, tiling: Tiling) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
    """Per key tile j of ``_bwd_dkdv`` (shape (cdiv(N_k, BWD_BLOCK_N),), int64, rows): the query rows [lo_j, end_j) it
    visits (:func:`iomodel.schedule.grid.dkdv_query_ranges`, vectorised), the query-row chunk of the touch-by-touch
    evaluation (rows: one BWD_BLOCK_M tile under a band) and the chunks each tile's rows cross (0 where it sees none)."""
    n_q, n_k, bm, bn = spec.seqlen_q, spec.seqlen_k, tiling.bwd_block_m, tiling.bwd_block_n
    t_c = cdiv(n_k, bn)
    j = np.arange(t_c, dtype=np.int64)
    off = spec.causal_offset
    if spec.band is None:
        lo = np.minimum(bm * (np.maximum(0, j * bn - off) // bm), n_q) if spec.causal else np.zeros(t_c, np.int64)
        end = np.full(t_c, n_q, dtype=np.int64)
        ch = _chunk_rows(bm)
    else:
        wl, wr = spec.band
        lo = np.minimum(bm * (np.maximum(0, j * bn - off - wr) // bm), n_q)
        hi = np.clip((j + 1) * bn - off + wl, 0, n_q)
        end = np.where(hi > lo, np.minimum(n_q, -(-hi // bm) * bm), lo)
        ch = bm
    touch_chunks = np.where(end > lo, -(-end // ch) - lo // ch, 0)  # query-row chunks per head, per tile
    return lo, end, ch, touch_chunks


def dkdv_simulated(spec: LayerSpec, tiling: Tiling) -> bool:
    """Whether the training step's dK/dV kernel is simulated wave by wave (a group split, S > 1, or GQA in the
    tiles-descending order) rather than taken by the fast forms, which follow the heads-outer loop. Raises nothing."""
    return tiling.bwd_group_splits != 1 or (tiling.bwd_dkdv_order != "heads-outer" and spec.group > 1)


def fast_model(name: str, spec: LayerSpec, tiling: Tiling, w: int, write_share: float, *,
               tile_order: str = "forward", grid_order: str = "tiles-fastest", key_order: str = "ascending",
               q_share: float = 1.0, persistent: str | None = None) -> Any:
    """The wave model of kernel ``name`` for the fast evaluation, or None where it does not apply.

    Applies to (see the module doc): ``fwd kernel``/``_attn_fwd`` and ``_bwd_dq`` without a window
    band, in the tiles-fastest grid with ascending key blocks (either tile order for the
    forward and ``_bwd_dq``); ``_bwd_dkdv`` with one group slice in the heads-outer loop order (or MHA);
    ``_bwd_preprocess``; ``_bwd_reduce_dkdv``; a write share that is a dyadic
    fraction; at most :data:`MAX_STREAM_ITEMS` stream items. ``q_share``: the forward's Q bytes' weight in the stack
    (:attr:`~iomodel.cache.params.L2Params.q_share`; a dyadic fraction keeps the sums exact, else None).
    ``persistent``: the forward's persistent loop (None: a program per tile; ``strided`` runs the same waves but
    never realigns them to the grid rows, :func:`iomodel.schedule.grid.row_waves`; ``blocked`` is simulated).

    Raises:
        IomodelError: an unknown tile_order (forward).
    """
    if not exact_write_share(write_share) or not exact_write_share(q_share) or spec.phase != "prefill":
        return None
    d, s = spec.head_dim, spec.width
    B, H, Hk = spec.batch, spec.heads, spec.kv_heads
    if name in ("fwd kernel", "_attn_fwd", "_bwd_dq"):
        if spec.band is not None or grid_order != "tiles-fastest" or key_order != "ascending":
            return None
        if name == "_bwd_dq":
            model = _QStationary(spec, tiling.dq_block_m, tiling.dq_block_n, w, tiling.dq_tile_order,
                                 backward_row_reads(spec), {"dQ": d * s}, write_share)
        else:  # a packed GQA group per program: the layer of H / P heads, tiles of BLOCK_M / P rows of P heads each
            spec, block_m, p = packed_view(spec, tiling)
            model = _QStationary(spec, block_m, tiling.block_n, w, tile_order, {"Q": p * d * s},
                                 forward_row_writes(tiling, p * d * s, p), write_share, q_share, persistent)
        return model if model.n_lanes * model.n_chunks <= MAX_STREAM_ITEMS else None
    if name == "_bwd_dkdv":
        if dkdv_simulated(spec, tiling):
            return None  # simulated (the fast forms follow the heads-outer loop)
        if spec.band is not None or (spec.causal and dkdv_last_lo(spec, tiling) > 0):  # lo_j grows with j
            model = _DkdvEvents(spec, tiling, w, write_share)
            return model if model.n_lanes * model.n_chunks <= MAX_STREAM_ITEMS else None
        model = _DkdvLockstep(spec, tiling, w, write_share)
        return model if model.n_lanes * model.n_chunks <= MAX_STREAM_ITEMS else None
    if name == "_bwd_preprocess":
        bm = tiling.preprocess_block_m
        t = cdiv(spec.seqlen_q, bm)
        rows = np.minimum(bm, spec.seqlen_q - np.arange(t, dtype=np.int64) * bm)
        return _Fresh(t, rows, B * H, w, [("O", d * s), ("dO", d * s)], [("Delta", FP32_WIDTH)], write_share)
    if name == REDUCE_DKDV_KERNEL:
        S, bn = tiling.bwd_group_splits, DKDV_REDUCE_BLOCK_N
        t = cdiv(spec.seqlen_k, bn)
        rows = np.minimum(bn, spec.seqlen_k - np.arange(t, dtype=np.int64) * bn)
        return _Fresh(t, rows, B * Hk, w, [("dK_part", S * d * FP32_WIDTH), ("dV_part", S * d * FP32_WIDTH)],
                      [("dK", d * s), ("dV", d * s)], write_share)
    return None


def _lru_exact(model: Any, capacity: int, write_share: float) -> bool:
    """Whether :class:`_Engine` with ``ways=None`` gives the fully associative LRU's bytes for ``model``.

    :class:`~iomodel.cache.lru.LRU` evicts from the bottom of its stack until the weight fits C, a whole
    item entirely and a stream item in part, so an item whose bytes are all resident or all gone at its
    re-touch is gone exactly when the weight above it plus its own exceeds C: a stack distance against one
    capacity. That holds, and the engine follows it, when (1) the re-read items are evicted whole and each
    is touched at one extent (``model.one_extent``: ``_bwd_dkdv`` under a band, whose query-row groups are
    whole; its K/V and dK/dV items are touched once), (2) no re-read or dirty item outweighs C (the LRU
    keeps such an item alone, over C: ``model.largest_kept``), (3) the engine's weights are the LRU's
    units scaled exactly (:func:`~iomodel.cache.lru.write_weight` = READ_WEIGHT × write_share).
    """
    return (bool(getattr(model, "one_extent", False)) and model.largest_kept <= capacity
            and write_weight(write_share) == READ_WEIGHT * write_share)


#: Touches past which a causal ``_bwd_dkdv`` kernel of many KV lanes is evaluated one wave per phase
#: (:func:`periodic_dkdv`) where that pays; below it every wave is evaluated (a speed choice).
PERIODIC_MIN_TOUCHES = 1_000_000
#: Most warm-up waves :func:`periodic_dkdv` runs before a wave it evaluates (a speed choice: past it, every wave).
PERIODIC_MAX_WARMUP = 8


def _full_extents(model: "_DkdvEvents", engine: _Engine, lanes: np.ndarray) -> None:
    """Set each query-row chunk of ``lanes`` (KV lanes b·H_kv + kv) to the extent the lane's programs before a
    window gave it: the rows of the chunk its first program (the lowest lo) sweeps, as a run from the kernel's
    start would have left it (:meth:`_Engine.steps` keeps each item's largest touch)."""
    if not len(lanes):
        return
    ch, nc, G = model.chunk, model.n_chunks, model.G
    c0 = np.arange(nc, dtype=np.int64) * ch
    ext = np.maximum(0, np.minimum(c0 + ch, model.end[0]) - np.maximum(c0, model.lo[0]))
    heads = (lanes[:, None] * G + np.arange(G, dtype=np.int64)[None, :]).ravel()
    items = (heads[:, None] * nc + np.arange(nc, dtype=np.int64)[None, :]).ravel()
    engine.ext[items] = np.maximum(engine.ext[items], np.tile(ext, len(heads)))


def _window_engine(model: "_DkdvEvents", capacity: int, ways: int, read_capacity: int | None, first: int) -> _Engine:
    """A cold engine for waves from ``first`` on, its chunks' extents those of a run from the kernel's start."""
    engine = model.engine(capacity, ways)
    if read_capacity is not None:
        engine.judge_reads_at(read_capacity)
    p0 = int(model.p0[first])
    lanes = np.arange(p0 // model.t_c, (int(model.p1[-1]) - 1) // model.t_c + 1, dtype=np.int64)
    _full_extents(model, engine, lanes[lanes * model.t_c < p0])  # lanes whose first program ran before the window
    return engine


def _certified_wave(model: "_DkdvEvents", capacity: int, ways: int, read_capacity: int | None, v: int,
                    warmup: int) -> _Engine | None:
    """A cold engine run over waves v − warmup .. v − 1, or None where their distinct weight (the stack's
    entries, superseded ones zeroed) is below the saturation distance: then an item last touched before them
    might still be in L2 at wave v, which the cold engine would count as a miss."""
    engine = _window_engine(model, capacity, ways, read_capacity, v - warmup)
    for u in range(v - warmup, v):
        engine.steps(model.build_block(u, u))
    if engine.t0 == 0 and float(engine.w.sum()) < engine.d_sat:
        return None
    return engine


def _window_weight(model: "_DkdvEvents", a: int, b: int) -> float:
    """About the distinct bytes of waves a..b (read-equivalent): per KV lane, the query-row chunks of its G heads
    from its lowest first row in the window to the end, its K/V and its dK/dV stores. An estimate that sets where
    :func:`periodic_dkdv` starts its search for a warm-up (:func:`_certified_wave` checks the real weight)."""
    p0, p1 = int(model.p0[a]), int(model.p1[b])
    lanes = np.arange(p0 // model.t_c, (p1 - 1) // model.t_c + 1, dtype=np.int64)
    j0 = np.maximum(0, p0 - lanes * model.t_c)
    j1 = np.minimum(model.t_c, p1 - lanes * model.t_c)
    ch = model.chunk
    rows = np.maximum(0, model.end[0] - (model.lo[j0] // ch) * ch)
    k_rows = model.kcum[j1] - model.kcum[j0]
    return float(model.G * int(rows.sum()) * int(sum(model.per_row))
                 + int(k_rows.sum()) * model.kv_bytes * (2 + 2 * model.share))


class _RecordedSums(OrderedSums):
    """:class:`~iomodel.cache.sums.OrderedSums` that also keeps each addition (tensor, array or (total, largest)), so
    that a wave's additions can be replayed, in the same order, onto another wave's running sums."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, Any]] = []

    def add_array(self, tensor: str, xs: np.ndarray) -> None:
        self.ops.append((tensor, xs))
        super().add_array(tensor, xs)

    def add_whole_run(self, tensor: str, total: int, largest: int) -> None:
        self.ops.append((tensor, (total, largest)))
        super().add_whole_run(tensor, total, largest)


def _replay(sums: OrderedSums, ops: list[tuple[str, Any]]) -> None:
    """Apply recorded additions (:class:`_RecordedSums`) to ``sums``, in order."""
    for tensor, op in ops:
        if isinstance(op, tuple):
            sums.add_whole_run(tensor, *op)
        else:
            sums.add_array(tensor, op)


def periodic_dkdv(model: "_DkdvEvents", capacity: int, ways: int, read_capacity: int | None = None
                  ) -> KernelL2 | None:
    """A causal ``_bwd_dkdv`` kernel of many KV lanes, one wave per phase: the touch-by-touch evaluation's bytes
    (to the rounding of their sums) at a fraction of its waves, or None where that does not pay.

    Wave v runs programs v·W .. v·W + W − 1 of the grid (KV lanes b·H_kv + kv, key tiles j fastest), so a full
    wave is fixed, up to which lanes it names, by its phase (v·W) mod T_c (T_c key tiles a lane): its accesses,
    their order and weights are those of any other full wave of that phase. What differs is the L2 it meets.
    After warm-up waves whose distinct bytes weigh the saturation distance (:func:`saturation_distance`: an
    entry that deep is gone with probability exactly 1), every item touched before them is a whole miss in
    the run from the kernel's start as in a cold engine, and every other item has the same stack distance in
    both (whole bytes times a dyadic share: exact sums). So wave v's misses are those of a cold engine run over
    its warm-up and then v, with each chunk's extent set to what the lane's earlier programs left
    (:func:`_full_extents`). The waves before the longest warm-up are run from the kernel's start; each phase
    of the waves after them once (the latest wave of that phase); the last wave with its warm-up, which also
    gives the dK/dV bytes still dirty at the end (every earlier store is that deep by then: written back whole).
    Each wave's additions to the per-tensor sums are recorded and replayed in wave order onto one running sum, so
    the reads are the touch-by-touch evaluation's very doubles; the dK/dV written back are the requested bytes less
    those still dirty, which the last wave's engine gives (the touch-by-touch evaluation sums the write-back
    itself: the same expected bytes, a rounded byte may differ where a sum lands on half a byte).

    Pays where the KV lanes are many against the phases: B·H_kv ≫ W / gcd(W, T_c) (large batches of MHA or
    GQA layers). None, before any wave is run, where the phases and their warm-ups (estimated by
    :func:`_window_weight`) would cost more than half the waves; None too where a warm-up of
    :data:`PERIODIC_MAX_WARMUP` waves does not weigh the saturation distance or the real warm-ups cost more.

    Args:
        model: the kernel's waves (:class:`_DkdvEvents`, no window band); capacity: effective L2 bytes of a dirty
            line; ways: associativity A; read_capacity: capacity of a read miss (bytes; default ``capacity``).

    Returns:
        :class:`~iomodel.cache.simulate.KernelL2` (bytes per tensor) with ``note``, or None.
    """
    if ways is None or model.one_extent:
        return None
    nw = len(model.p0)
    if nw < 8:
        return None
    d_sat = read_saturation(capacity, read_capacity or capacity, ways)
    phase = (model.p0 % model.t_c)[: nw - 1]  # every wave but the last is full
    phases, latest = np.unique(phase[::-1], return_index=True)
    latest = (nw - 2) - latest  # the latest wave of each phase: the most waves before it
    budget = nw // 2

    def warmup_guess(v: int) -> int:
        k = 1
        while k < min(v, PERIODIC_MAX_WARMUP) and _window_weight(model, v - k, v - 1) < d_sat:
            k += 1
        return k

    guess = {int(ph): warmup_guess(int(v)) for ph, v in zip(phases, latest) if v >= 1}
    if len(guess) < len(phases) - 1 or sum(k + 1 for k in guess.values()) + 2 * max(guess.values(), default=1) + 1 > budget:
        return None  # wave 0's phase may have no later wave; any other missing phase cannot be warmed up
    cost = 0
    per_phase: dict[int, list[tuple[str, Any]]] = {}  # each phase's additions to the sums, in order
    warm: dict[int, int] = {}
    for ph, v in zip(phases.tolist(), latest.tolist()):
        if v < 1:
            continue
        k, engine = guess[ph], None
        while engine is None:
            cost += k + 1
            if cost > budget:
                return None
            engine = _certified_wave(model, capacity, ways, read_capacity, v, k)
            if engine is None:
                if k >= min(v, PERIODIC_MAX_WARMUP):
                    return None
                k += 1
        engine.sums = _RecordedSums()
        engine.steps(model.build_block(v, v))
        per_phase[ph] = engine.sums.ops
        warm[ph] = k
    head = max(warm.values(), default=1)
    if head + cost > budget:
        return None
    # the waves before the longest warm-up from the kernel's start, as the touch-by-touch evaluation runs them
    engine = model.engine(capacity, ways)
    if read_capacity is not None:
        engine.judge_reads_at(read_capacity)
    for u in range(head):
        engine.steps(model.build_block(u, u))
    sums = engine.sums  # the reads so far, summed as the touch-by-touch evaluation sums them
    # the last wave (full or not), after its warm-up: its reads, and the dK/dV still dirty at the end
    last = nw - 1
    k = min(head, last)
    engine = None
    while engine is None and k <= min(last, PERIODIC_MAX_WARMUP):
        engine = _certified_wave(model, capacity, ways, read_capacity, last, k)
        k += 1
    if engine is None:
        return None
    engine.sums = _RecordedSums()
    engine.steps(model.build_block(last, last))
    _, _, still = engine.totals()
    # every wave's additions in wave order onto one running sum: the touch-by-touch evaluation's doubles (its
    # additions are the same values in the same order; an engine call over several waves adds their arrays one
    # after the other, as here)
    for v in range(head, nw - 1):
        _replay(sums, per_phase[int(phase[v])])
    _replay(sums, engine.sums.ops)
    reads = dict(sums.values)
    still = {t: still.get(t, 0.0) for t in model.requested_write}
    out = KernelL2("_bwd_dkdv", requested_read=dict(model.requested_read), requested_write=dict(model.requested_write))
    out.hbm_read = _rounded(reads)
    out.hbm_write = _rounded({t: model.requested_write[t] - still[t] for t in model.requested_write})
    out.dirty_at_end = _rounded(still)
    out.waves = nw
    n_ph = len(per_phase)
    out.note = (f"one wave per phase ({n_ph:,} phase{'s' * (n_ph != 1)} of {nw:,} waves, warm-ups of up to {head} "
                f"wave{'s' * (head != 1)}; iomodel/cache/stream.py periodic_dkdv): the touch-by-touch bytes")
    return out


def fast_kernel_l2(name: str, spec: LayerSpec, tiling: Tiling, w: int, capacity: int, write_share: float,
                   ways: int | None, *, tile_order: str = "forward", grid_order: str = "tiles-fastest",
                   key_order: str = "ascending", read_capacity: int | None = None,
                   q_share: float = 1.0, persistent: str | None = None) -> KernelL2 | None:
    """One kernel launch through a cold L2, evaluated fast, or None where it does not apply.

    The result equals ``simulate(name, waves, capacity, write_share, ways, read_capacity)`` on the kernel's waves
    (:mod:`iomodel.schedule.grid`, grouped) with their requested bytes: the same expected bytes per
    tensor, before and after rounding (module doc), but for a causal ``_bwd_dkdv`` where
    :func:`iomodel.cache.estimate.dkdv_closed_form_applies`, which gets
    :func:`iomodel.cache.dkdv_closed.closed_form_dkdv` (its ``note`` says so). None where :func:`fast_model` gives none, and for a
    fully associative L2 (``ways=None``, exact integer bytes) unless :func:`_lru_exact` holds
    (``_bwd_dkdv`` under a window band) and every item keeps one extent.

    Args:
        name: the kernel (``fwd kernel`` or ``_attn_fwd``, ``_bwd_preprocess``, ``_bwd_dkdv``,
            ``_bwd_dq``, ``_bwd_reduce_dkdv``).
        spec: the layer (prefill); tiling: its tiles; w: programs resident at once (W).
        capacity: effective L2 bytes; write_share: read-equivalent bytes per written byte; ways:
            associativity A, or None (the fully associative LRU).
        tile_order, grid_order, key_order, persistent: the forward's launch (see
            :func:`iomodel.schedule.grid.prefill_waves`; a ``blocked`` loop gets None).
        read_capacity: capacity of a read miss (bytes; default ``capacity``; the fully associative LRU has
            one capacity, ``capacity``, as in ``simulate``).
        q_share: the weight of a forward's Q byte in the stack (``simulate``'s ``read_weights={"Q": q_share}``; 1: as
            any read).

    Returns:
        :class:`~iomodel.cache.simulate.KernelL2` (bytes per tensor), or None.

    Raises:
        IomodelError: an unknown tile_order.
    """
    if name not in (FAST_KERNELS if ways is not None else LRU_FAST_KERNELS):
        return None
    if q_share != 1.0 and (ways is None or name not in ("fwd kernel", "_attn_fwd")):
        return None  # a weighted Q is the set-associative forward's only (simulate refuses it elsewhere)
    if persistent == "blocked":
        return None
    model = fast_model(name, spec, tiling, w, write_share, tile_order=tile_order, grid_order=grid_order,
                       key_order=key_order, q_share=q_share, persistent=persistent)
    if model is None or (ways is None and not _lru_exact(model, capacity, write_share)):
        return None
    if isinstance(model, _DkdvEvents) and ways is not None and not model.one_extent:
        from iomodel.cache.estimate import dkdv_closed_form_applies  # the bounds have one home, with the worksheet's

        d_sat = read_saturation(capacity, read_capacity or capacity, ways)
        if dkdv_closed_form_applies(spec, tiling, model.all_touches, d_sat):  # long: the closed form of the same waves
            from iomodel.cache.dkdv_closed import closed_form_dkdv

            out = closed_form_dkdv(model, capacity, ways, read_capacity)
            out.method = f"closed form ({model.all_touches:,} touches not visited)"
            return out
    if (isinstance(model, _DkdvEvents) and ways is not None and not model.one_extent
            and model.all_touches >= PERIODIC_MIN_TOUCHES):
        k = periodic_dkdv(model, capacity, ways, read_capacity)
        if k is not None:
            k.method = f"touch by touch, one wave per phase ({model.all_touches:,} touches)"
            return k
    engine = model.engine(capacity, ways)
    if read_capacity is not None and ways is not None:
        engine.judge_reads_at(read_capacity)
    try:
        _drive(model, engine)
    except _ExtentsVary:  # not expected where _lru_exact holds: simulated instead
        return None
    out = engine.finish(name, model.requested_read, model.requested_write)
    out.method = (f"touch by touch ({model.all_touches:,} touches)" if isinstance(model, _DkdvEvents)
                  else "fast evaluation (the simulation's bytes)")
    return out
