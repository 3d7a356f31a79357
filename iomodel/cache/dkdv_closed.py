"""The causal ``_bwd_dkdv`` kernel's L2 misses in closed form, where evaluating them touch by touch costs too much.

:class:`iomodel.cache.stream._DkdvEvents` evaluates the causal dK/dV kernel (one group slice, the heads-outer
loop order or MHA) touch by touch: its time grows with the touches (:func:`iomodel.cache.stream.dkdv_touches`),
the square of the length, so where :func:`iomodel.cache.estimate.dkdv_closed_form_applies` (long sequences past
:data:`iomodel.cache.estimate.L2_DKDV_CLOSED_FORM_MIN_TOUCHES` touches; since 2026-12-06, MHA and GQA steps whose
dK/dV reads are not a prediction past :data:`iomodel.cache.estimate.L2_DKDV_ANY_LENGTH_MIN_TOUCHES` touches) the
worksheet takes this closed form of the same wave model instead (issue 12 item 4; derivation, validation and its
limits: docs/l2-calibration.md, "The causal dK/dV kernel in closed form" and "The previous wave's copy").

The wave model (:func:`iomodel.schedule.grid.dkdv_waves`): W programs start together; program i of a wave
(key tile j, first query row lo_i, span_i = N_q − lo_i rows) sweeps the query rows of its G query heads one
after the other, one row per step, reaching row r of head k at step k·span_i + r − lo_i, and touches each
query-row chunk (Q, dO, LSE, Delta: ``per_row`` bytes a row) it enters. In a wave, the rows a program re-reads
were read last by the program with the next larger lo (i + 1), Δ_i = (k + 1)·(lo_{i+1} − lo_i) steps earlier;
the stack distance of that re-read is the weight of the chunks entered in between. This module replaces the
count of those chunks by its mean (the *fluid* count): over a window of Δ steps, the programs in head k'
(contiguous in lo, each (k' + 1)·g rows apart) sweep the union of their row ranges, Σ min((k' + 1)·g, Δ) + Δ
rows, so the distance is the weight of a row times the rows all of them sweep, plus the dK/dV stores in the
window. Between two events (a program switching head, finishing, or starting to re-read) each head's members
are fixed, so the misses are a sum over those intervals of (length × re-reading programs × evict probability)
per head: O(W·G) intervals a wave, none per touch. Within the wave its first read of each row misses whole
(the previous wave's copy is counted apart, below). The waves of W programs of one KV head, evenly spaced and long enough that
their G head switches do not overlap, have misses affine in their length, so all of them (the bulk of a long
sequence) are added from two evaluations of one template; the others are evaluated one by one (each distinct
wave once; a few at a time in one set of arrays, :func:`waves_misses`). A wave's first reads that the previous wave's copy may still serve (the last waves of each KV head,
where spans are short, and every wave of a short sequence) are counted from that copy's stack distance
(:func:`_cross_wave_rows`, 2026-12-06; docs/l2-calibration.md, "The previous wave's copy"). The kernel's last two
waves are evaluated touch by touch from a cold L2 where that is cheap
(:data:`EXACT_TAIL_TOUCHES`: they hold the dK/dV bytes still dirty at the end), else the dirty bytes come from
the same count (:func:`_still_dirty`: what each store has above it until the end).

What the mean leaves out (measured against the touch-by-touch evaluation: docs/l2-calibration.md): programs
spaced g rows apart cross the 1,024-row chunk boundaries in phase classes, so while programs of two heads mix
(the head switches) the exact count alternates (e.g. 5 and 61 chunks where the mean is 33) and the convex evict
probability of the alternation differs from that of the mean; a program's first chunk of each new head is an
entry the mean does not count (counting it made the agreement worse: docs). Both weigh less as the sequence grows;
while the head switches of a GQA wave overlap (sequences shorter than about 2^17 tokens) GQA is up to 15 % off,
which is why GQA takes this form only where its dK/dV reads are not a prediction
(:func:`iomodel.cache.estimate.dkdv_closed_form_applies`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iomodel.cache.set_assoc import evict_probabilities
from iomodel.cache.simulate import KernelL2, _rounded
from iomodel.errors import IomodelError

#: Most programs of a wave with another gap to their next than the wave's common one that the sparse sum
#: (:func:`_sparse_misses`) corrects one by one; past it the form over every head serves (a speed choice).
SPARSE_MAX_ODD = 8
#: Events (about (2G + 1) per program) of the waves :func:`_fluid_rows` hands :func:`waves_misses` at once: more
#: cost a call less overhead but its binary searches more cache misses (measured 2026-12-06 on this 2-core CPU: the
#: Llama-3-8B-like layer's GQA waves, 2,400 events each, ran fastest a few at a time). A speed choice.
WAVES_EVENTS = 8_192
#: Events (as :data:`WAVES_EVENTS` counts them) of a GQA kernel's distinct non-template waves past which
#: :func:`_fluid_rows` evaluates a few of each family of alike waves and interpolates the others
#: (:func:`_sampled_misses`). The closed form is taken for GQA only where its dK/dV reads are not a prediction
#: (:func:`iomodel.cache.estimate.dkdv_closed_form_applies`). A speed choice, not a model constant (its measured
#: effect: docs/l2-calibration.md, "Faster" and "Faster, again"; 50,000 until 2026-12-06's eighteenth session: 10,000
#: moved the Llama-3-8B-like GQA layer's dK/dV reads by at most 0.09 % at 40,960 to 2^20 tokens and took 5-7 ms off at
#: 65,536-81,920, measured while writing it, not a receipt).
FLUID_SAMPLE_EVENTS = 10_000
#: Relative miss of a linear interpolation between two evaluated waves of a family (at the member between them) past
#: which :func:`_sampled_misses` evaluates more of the stretch. A speed choice: 0.02 until 2026-12-06's eighteenth
#: session; 0.05 moved the check's GQA read ratios by at most 0.24 % and cut its closed form's time by 8-42 % on the
#: GQA rows that moved (single timings; receipts/raw/dkdv-closed-check-cpu-2026-12-06-g against -h).
FLUID_SAMPLE_TOLERANCE = 0.05
#: Source line of the closed form (worksheet assumptions and docs).
CLOSED_FORM_SOURCE = "iomodel/cache/dkdv_closed.py"
#: Most touches of the kernel's last two waves for which they are evaluated touch by touch (about 6 ms at the engine's
#: 0.3-0.45 µs a touch on a slow host): they hold the dK/dV bytes still dirty at the end; past it the fluid count
#: (:func:`_still_dirty`) serves for them too. A speed choice, not a model constant: 400,000 until 2026-12-06's
#: eighteenth session, when the fluid count came to take the rows later waves re-sweep once (before, the last wave alone
#: past 24,576 touches had put the check layers' writes up to 0.53 % off); 16,384 takes the GQA Llama-3-8B-like layer's
#: last two waves at 262,144, 393,216, 524,288 and 655,360 tokens (20,160-23,712 touches, about 8 ms). Against the last two waves touch by
#: touch, on the check layers, the hold-outs and the Llama-3-8B-like layers from 2^16 to 2^24 tokens on the H200 and the
#: H100 (measured while writing it and by a reviewer, not a receipt): the dK and dV writes within 0.07 %, GQA reads (not
#: a prediction) -1.7 % to +2.0 %, MHA within 0.1 %; the closed form against the touch-by-touch evaluation:
#: :data:`CLOSED_FORM_AGREEMENT` (docs/l2-calibration.md, "Faster, again").
EXACT_TAIL_TOUCHES = 16_384
#: How close the closed form came to the touch-by-touch evaluation (one clause; worksheet assumptions): measured by
#: ``benchmarks/dkdv_closed_check.py`` on 2026-12-06 (docs/l2-calibration.md, "The previous wave's copy", "Faster" and
#: "Faster, again"; receipts/raw/dkdv-closed-check-cpu-2026-12-06-h.{txt,json}, the eighteenth session's form).
CLOSED_FORM_AGREEMENT = ("its dK/dV DRAM reads were within +0.01 % to +1.80 % of the touch-by-touch evaluation's on "
                         "the 23 MHA layers checked where it is taken (20,000 to 2^20 tokens), +0.24 % to +1.56 % on the "
                         "14 GQA layers of 2^18 tokens or more and -15.6 % to +1.8 % on the 20 GQA layers below "
                         "(32,768 to 131,072 tokens, where GQA's dK/dV reads are not a prediction), the writes within "
                         "0.07 %: benchmarks/dkdv_closed_check.py, 2026-12-06 (eighteenth session)")


def _probabilities(distance: np.ndarray, capacity: float, ways: int) -> np.ndarray:
    """:func:`iomodel.cache.set_assoc.evict_probabilities` of ``distance`` (bytes, any shape), each distinct
    value once (the configurations of a wave repeat)."""
    d, inv = np.unique(np.asarray(distance, dtype=np.float64), return_inverse=True)
    return evict_probabilities(d, capacity, ways)[inv].reshape(np.shape(distance))


class _Group:
    """The programs of one KV head in a wave, deduplicated by first query row (programs with the same lo touch
    the same rows at the same steps: one toucher) and ordered by lo: spans (rows, descending), gaps to the
    next program (rows, 0 for the last), dK/dV store weight (read-equivalent bytes)."""

    def __init__(self, span: np.ndarray, gap: np.ndarray, store: np.ndarray) -> None:
        self.span, self.gap, self.store = span, gap, store
        self.asc = span[::-1].copy()  # ascending spans
        self.n = len(span)

    def count_above(self, x: np.ndarray) -> np.ndarray:
        """Programs whose span exceeds x (each element of x): the first index past them in lo order."""
        return self.n - np.searchsorted(self.asc, x, side="right")


def _groups_of_wave(model: Any, v: int) -> list[_Group]:
    """The KV-head groups of wave v of ``model`` (:class:`~iomodel.cache.stream._DkdvEvents`)."""
    p0, p1 = int(model.p0[v]), int(model.p1[v])
    prog = np.arange(p0, p1, dtype=np.int64)
    kv, j = np.divmod(prog, model.t_c)
    lo, end = model.lo[j], model.end[j]
    store = model.k_rows[j] * model.kv_bytes * 2 * model.share
    out = []
    for h in np.unique(kv):
        sel = (kv == h) & (end > lo)
        if not sel.any():
            continue
        u, inv = np.unique(lo[sel], return_inverse=True)  # lo ascending (lo grows with j)
        sw = np.bincount(inv, weights=store[sel])
        e = int(end[sel][0])
        span = e - u
        gap = np.zeros(len(u), dtype=np.int64)
        gap[:-1] = u[1:] - u[:-1]
        out.append(_Group(span.astype(np.int64), gap, sw))
    return out


def wave_misses(groups: list[_Group], G: int, per_row_sum: int, capacity: float, ways: int,
                dense: bool | None = None) -> float:
    """Missed query rows of one wave (rows of all G heads; times ``per_row`` bytes per tensor), fluid count.

    Args:
        groups: the wave's KV-head groups (:func:`_groups_of_wave`).
        G: query heads per KV head; per_row_sum: bytes a query row weighs in L2 (Q, dO, LSE, Delta);
        capacity: read capacity (bytes); ways: associativity.
        dense: evaluate every (head, interval) pair (O(G²) per interval), or only the heads with members in each
            interval (:func:`_sparse_misses`: a few heads at a time on long spans); None picks the sparse form
            unless more than :data:`SPARSE_MAX_ODD` programs have another gap than the wave's common one. Both give the same rows (to
            rounding: tests/test_dkdv_closed.py).

    Returns:
        Expected missed rows (first reads of the wave whole, re-reads times their evict probability; the previous
        wave's copy of the first reads is :func:`_cross_wave_rows`'s).
    """
    if not groups:
        return 0.0
    ks = np.arange(G + 1, dtype=np.int64)
    ev = [np.zeros(1, dtype=np.int64)]
    for g in groups:
        ev.append((ks[:, None] * g.span[None, :]).ravel())
        nx = g.gap > 0
        ev.append((ks[:G, None] * g.span[None, nx] + g.gap[None, nx]).ravel())
    events = np.unique(np.concatenate(ev))
    events = events[events <= max(int(G * g.span[0]) for g in groups)]
    if len(events) < 2:
        return float(sum((int(g.span[0]) + 0) * G for g in groups))
    a, b = events[:-1], events[1:]
    mid = (a + b) / 2.0
    length = (b - a).astype(np.float64)
    if dense is None:  # the sparse form, but where more than a few members have another gap than the common one
        dense = _common_gap(groups)[1] > SPARSE_MAX_ODD
    if not dense:
        return _sparse_misses(groups, G, per_row_sum, capacity, ways, mid, length)
    # members of head k' in each group: lo-order indices [lo_idx[k'], hi_idx[k'])
    bounds = []
    for g in groups:
        hi = np.stack([g.count_above(mid / (k + 1)) for k in range(G)])
        lo_idx = np.vstack([np.zeros((1, len(mid)), dtype=np.int64), hi[:-1]])
        bounds.append((lo_idx, hi))
    # touch classes: (group, head k, gap value) with their Δ; the rows swept in a window of each Δ
    deltas = np.array(sorted({int((k + 1) * gv) for g in groups for gv in np.unique(g.gap[g.gap > 0])
                              for k in range(G)}), dtype=np.int64)
    kk = np.arange(1, G + 1, dtype=np.int64)
    rows = np.zeros((len(deltas), len(mid)))
    for g, (lo_idx, hi) in zip(groups, bounds):
        members = hi - lo_idx  # (G, E)
        rows += deltas[:, None] * (members > 0).sum(axis=0)[None, :].astype(np.float64)
        inner = g.gap[:-1]
        if len(inner) and bool((inner == inner[0]).all()):  # evenly spaced: Σ min((k'+1)·g, Δ) over members − 1
            sweep = np.minimum(kk[None, :] * int(inner[0]), deltas[:, None]).astype(np.float64)  # (D, G)
            rows += sweep @ np.maximum(members - 1, 0).astype(np.float64)
        elif len(inner):
            last_member = np.maximum(hi - 1, 0)
            first = np.minimum(lo_idx, last_member)
            for x, dl in enumerate(deltas.tolist()):
                steps = np.minimum(kk[:, None] * g.gap[None, :], dl)  # (G, n): rows a member sweeps beyond the next
                pref = np.concatenate((np.zeros((G, 1)), np.cumsum(steps, axis=1)), axis=1)
                rows[x] += np.where(hi > lo_idx, np.take_along_axis(pref, last_member, axis=1)
                                    - np.take_along_axis(pref, first, axis=1), 0.0).sum(axis=0)
    finish = np.concatenate([G * g.span for g in groups])
    order = np.argsort(finish, kind="stable")
    fin_t = finish[order]
    fin_w = np.concatenate(([0.0], np.cumsum(np.concatenate([g.store for g in groups])[order])))
    stores = (fin_w[np.searchsorted(fin_t, mid, side="right")][None, :]
              - fin_w[np.searchsorted(fin_t, mid[None, :] - deltas[:, None], side="right")])
    prob = _probabilities(rows * per_row_sum + stores, capacity, ways)  # (D, E)
    union = {int(dl): prob[x] for x, dl in enumerate(deltas.tolist())}
    missed = 0.0
    for g in groups:
        missed += float(int(g.span[0]) * G)  # the wave's first read of each row of its G heads
        for gv in np.unique(g.gap[g.gap > 0]):
            spans = np.sort(g.span[g.gap == gv])
            n = len(spans)
            for k in range(G):
                above = n - np.searchsorted(spans, mid / (k + 1), side="right")
                if k == 0:
                    cnt = np.where(mid >= gv, above, 0)
                else:
                    cnt = np.maximum(above - (n - np.searchsorted(spans, (mid - gv) / k, side="right")), 0)
                missed += float((length * cnt * union[int((k + 1) * gv)]).sum())
    return missed


def _sparse_misses(groups: list[_Group], G: int, per_row_sum: int, capacity: float, ways: int, mid: np.ndarray,
                   length: np.ndarray) -> float:
    """:func:`wave_misses` visiting in each interval only the heads with members.

    In interval e the programs of a group occupy heads ⌊m/span_0⌋ .. ⌊m/span_{n−1}⌋ (m its midpoint): a few
    on long spans whatever G is. The pairs (interval, head k') of those ranges carry the members C (a
    difference of two counts); a head of C members adds Δ + Σ min((k' + 1)·g_i, Δ) rows to a window of Δ steps,
    the sum over its members but the last. With every gap g_i the wave's common gap g, that sum is
    (C − 1)⁺·min((k' + 1)·g, Δ), and over the heads of an interval it takes prefix sums over the pairs sorted by
    (interval, head), one binary search per re-reading (interval, Δ). A member with another gap (a bottom-right
    offset that is not a multiple of BWD_BLOCK_N leaves one) adds the difference wherever it and its next
    program share a head, and re-reads in its own class (Δ = (k + 1)·g_i)."""
    gap = _common_gap(groups)[0]
    p_key, p_w, p_nz = [], [], []
    r_e, r_d, r_count = [], [], []
    odd_sets = []  # (group, index) of members with another gap
    missed = 0.0
    n_e, stride = len(mid), G + 1
    for gi, g in enumerate(groups):
        missed += float(int(g.span[0]) * G)  # the wave's first read of each row of its G heads
        kmin = np.floor(mid / g.span[0]).astype(np.int64)
        kmax = np.minimum(np.floor(mid / g.span[-1]).astype(np.int64), G - 1)
        width = np.where(kmin < G, kmax - kmin + 1, 0)
        tot = int(width.sum())
        if tot == 0:
            continue
        e_idx = np.repeat(np.arange(n_e), width)
        kp = np.repeat(kmin, width) + (np.arange(tot) - np.repeat(np.cumsum(width) - width, width))
        m = mid[e_idx]
        members = g.count_above(m / (kp + 1)) - np.where(kp > 0, g.count_above(m / np.maximum(kp, 1)), 0)
        p_key.append(e_idx * stride + kp)
        p_w.append(np.maximum(members - 1, 0).astype(np.float64))
        p_nz.append((members > 0).astype(np.float64))
        if g.n < 2:
            continue
        common = g.gap[:-1] == gap
        odd_sets.extend((gi, int(i)) for i in np.nonzero(~common)[0])
        if not common.any():
            continue
        spans = np.sort(g.span[:-1][common])  # the programs that re-read at the common gap
        n = len(spans)
        above = n - np.searchsorted(spans, m / (kp + 1), side="right")
        started = n - np.searchsorted(spans, (m - gap) / np.maximum(kp, 1), side="right")
        cnt = np.where(kp == 0, np.where(m >= gap, above, 0), np.maximum(above - started, 0))
        keep = cnt > 0
        r_e.append(e_idx[keep])
        r_d.append((kp[keep] + 1) * gap)
        r_count.append(cnt[keep])
    for gi, i in odd_sets:  # a member with its own gap re-reads in its own class
        g = groups[gi]
        span, gi_gap = int(g.span[i]), int(g.gap[i])
        k = np.floor(mid / span).astype(np.int64)
        on = (k < G) & (mid >= k * span + gi_gap)
        r_e.append(np.nonzero(on)[0])
        r_d.append((k[on] + 1) * gi_gap)
        r_count.append(np.ones(int(on.sum()), dtype=np.int64))
    if not r_e or not p_key:
        return missed
    key = np.concatenate(p_key)
    order = np.argsort(key, kind="stable")
    key = key[order]
    w = np.concatenate(p_w)[order]
    zero = np.zeros(1)
    cum_w = np.concatenate((zero, np.cumsum(w)))
    cum_wk = np.concatenate((zero, np.cumsum(w * (key % stride + 1))))
    cum_nz = np.concatenate((zero, np.cumsum(np.concatenate(p_nz)[order])))
    re_, rd, rc = np.concatenate(r_e), np.concatenate(r_d), np.concatenate(r_count)
    first = np.searchsorted(key, re_ * stride)
    last = np.searchsorted(key, (re_ + 1) * stride)
    # heads k' with (k' + 1)·g <= Δ sweep (k' + 1)·g rows a member, the others Δ
    kq = np.minimum(rd // gap - 1, G) if gap > 0 else np.full(len(rd), G)
    q = np.maximum(np.searchsorted(key, re_ * stride + kq, side="right"), first)
    heads = cum_nz[last] - cum_nz[first]
    rows = rd * heads + gap * (cum_wk[q] - cum_wk[first]) + rd * (cum_w[last] - cum_w[q])
    for gi, i in odd_sets:  # its own gap where it and its next program share a head
        g = groups[gi]
        m = mid[re_]
        h = np.floor(m / g.span[i]).astype(np.int64)
        together = (h < G) & (np.floor(m / g.span[i + 1]).astype(np.int64) == h)
        rows += np.where(together, np.minimum((h + 1) * int(g.gap[i]), rd) - np.minimum((h + 1) * gap, rd), 0)
    finish = np.concatenate([G * g.span for g in groups])
    order = np.argsort(finish, kind="stable")
    fin_t = finish[order]
    fin_w = np.concatenate(([0.0], np.cumsum(np.concatenate([g.store for g in groups])[order])))
    m = mid[re_]
    stores = fin_w[np.searchsorted(fin_t, m, side="right")] - fin_w[np.searchsorted(fin_t, m - rd, side="right")]
    prob = _probabilities(rows * per_row_sum + stores, capacity, ways)
    return missed + float((length[re_] * rc * prob).sum())


def _common_gap(groups: list[_Group]) -> tuple[int, int]:
    """The wave's common gap (the most frequent gap to the next program, the smallest of ties; 0 without any) and
    how many programs have another (:func:`wave_misses`' choice of form)."""
    inner = np.concatenate([g.gap[:-1] for g in groups if g.n > 1] or [np.zeros(0, np.int64)])
    if not len(inner):
        return 0, 0
    vals, counts = np.unique(inner, return_counts=True)
    return int(vals[np.argmax(counts)]), len(inner) - int(counts.max())


def waves_misses(waves: list[list[_Group]], G: int, per_row_sum: int, capacity: float, ways: int) -> np.ndarray:
    """:func:`wave_misses` of several waves at once (missed rows per wave, float64): the sparse form of each wave
    whose programs all re-read at its common gap (:func:`_sparse_misses`), evaluated together (intervals, head
    pairs and re-reads of every wave in one set of arrays, keyed by wave); the others one by one. The same rows to
    rounding (the sums' order): tests/test_dkdv_closed.py."""
    out = np.zeros(len(waves))
    batch = []
    for v, groups in enumerate(waves):
        gap, odd = _common_gap(groups) if groups else (0, 0)
        if groups and odd == 0:
            batch.append((v, gap))
        else:
            out[v] = wave_misses(groups, G, per_row_sum, capacity, ways)
    if not batch:
        return out
    # the groups of the batched waves, flat: wave (position in batch), spans (descending), gaps, stores
    gw, spans, gaps, stores, g_n = [], [], [], [], []
    for b, (v, _) in enumerate(batch):
        for g in waves[v]:
            gw.append(b)
            spans.append(g.span)
            gaps.append(g.gap)
            stores.append(g.store)
            g_n.append(g.n)
    n_b, n_g = len(batch), len(gw)
    gw = np.array(gw, dtype=np.int64)
    g_n = np.array(g_n, dtype=np.int64)
    w_gap = np.array([gap for _, gap in batch], dtype=np.int64)
    g_start = np.concatenate(([0], np.cumsum(g_n)))
    span = np.concatenate(spans).astype(np.int64)
    gapv = np.concatenate(gaps).astype(np.int64)
    el_g = np.repeat(np.arange(n_g), g_n)  # group of each program
    el_w = gw[el_g]
    span0, span_last = span[g_start[:-1]], span[g_start[1:] - 1]
    first_reads = np.bincount(gw, weights=(span0 * G).astype(np.float64), minlength=n_b)
    # events per wave: k·span and k·span + gap, from 0 to the wave's G·span0 (wave_misses)
    big = np.int64(1) << 40
    lim = np.zeros(n_b, dtype=np.int64)
    np.maximum.at(lim, gw, G * span0)
    ks = np.arange(G + 1, dtype=np.int64)[:, None]
    nx = gapv > 0
    ev = np.concatenate(((el_w[None, :] * big + ks * span[None, :]).ravel(),
                         (el_w[nx][None, :] * big + ks[:G] * span[nx][None, :] + gapv[nx][None, :]).ravel(),
                         np.arange(n_b, dtype=np.int64) * big))
    ev = np.unique(ev)
    ev_w, ev_t = ev // big, ev % big
    ev_w, ev_t = ev_w[ev_t <= lim[ev_w]], ev_t[ev_t <= lim[ev_w]]
    same = ev_w[1:] == ev_w[:-1]
    e_w = ev_w[1:][same]
    a, b_ = ev_t[:-1][same], ev_t[1:][same]
    mid = (a + b_) / 2.0
    length = (b_ - a).astype(np.float64)
    e_first = np.searchsorted(e_w, np.arange(n_b + 1))  # each wave's intervals
    # (group, interval) pairs of each group's wave, then (group, interval, head k') where it has members
    cnt_e = (e_first[gw + 1] - e_first[gw])
    ge_g = np.repeat(np.arange(n_g), cnt_e)
    ge_e = np.repeat(e_first[gw], cnt_e) + (np.arange(int(cnt_e.sum())) - np.repeat(np.cumsum(cnt_e) - cnt_e, cnt_e))
    m_ge = mid[ge_e]
    kmin = np.floor(m_ge / span0[ge_g]).astype(np.int64)
    kmax = np.minimum(np.floor(m_ge / span_last[ge_g]).astype(np.int64), G - 1)
    width = np.where(kmin < G, kmax - kmin + 1, 0)
    tot = int(width.sum())
    p_g = np.repeat(ge_g, width)
    p_e = np.repeat(ge_e, width)
    kp = np.repeat(kmin, width) + (np.arange(tot) - np.repeat(np.cumsum(width) - width, width))
    m = mid[p_e]
    shift = np.int64(1) << 32  # spans below 2^32: keys group·shift + span, ascending within each group

    def above(keys: np.ndarray, first: np.ndarray, count: np.ndarray, g: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Spans of group g's sorted ``keys`` above x: the count minus those at or below ⌊x⌋ (integer spans)."""
        fx = np.clip(np.floor(x), -1, float(shift - 1)).astype(np.int64)
        return count[g] - (np.searchsorted(keys, g * shift + fx, side="right") - first[g])

    asc_keys = np.sort(el_g * shift + span)  # each group's spans ascending, the groups in order
    members = above(asc_keys, g_start[:-1], g_n, p_g, m / (kp + 1)) - np.where(
        kp > 0, above(asc_keys, g_start[:-1], g_n, p_g, m / np.maximum(kp, 1)), 0)
    stride = G + 1
    key = p_e * stride + kp
    w_p = np.maximum(members - 1, 0).astype(np.float64)
    nz_p = (members > 0).astype(np.float64)
    # re-reads at the wave's common gap: the programs but each group's last
    common = np.ones(len(span), dtype=bool)
    common[g_start[1:] - 1] = False
    c_g = el_g[common]
    c_n = np.bincount(c_g, minlength=n_g)
    c_first = np.concatenate(([0], np.cumsum(c_n)))[:-1]
    c_keys = np.sort(c_g * shift + span[common])
    gap_p = w_gap[gw[p_g]]
    ab = above(c_keys, c_first, c_n, p_g, m / (kp + 1))
    started = above(c_keys, c_first, c_n, p_g, (m - gap_p) / np.maximum(kp, 1))
    cnt = np.where(kp == 0, np.where(m >= gap_p, ab, 0), np.maximum(ab - started, 0))
    keep = (cnt > 0) & (gap_p > 0)
    re_, rd, rc = p_e[keep], (kp[keep] + 1) * gap_p[keep], cnt[keep]
    out_b = first_reads
    if len(re_):
        o = np.argsort(key, kind="stable")
        key_s = key[o]
        zero = np.zeros(1)
        cum_w = np.concatenate((zero, np.cumsum(w_p[o])))
        cum_wk = np.concatenate((zero, np.cumsum(w_p[o] * (key_s % stride + 1))))
        cum_nz = np.concatenate((zero, np.cumsum(nz_p[o])))
        first = np.searchsorted(key_s, re_ * stride)
        last = np.searchsorted(key_s, (re_ + 1) * stride)
        gap_r = w_gap[e_w[re_]]
        kq = np.minimum(rd // gap_r - 1, G)
        q = np.maximum(np.searchsorted(key_s, re_ * stride + kq, side="right"), first)
        heads = cum_nz[last] - cum_nz[first]
        rows = rd * heads + gap_r * (cum_wk[q] - cum_wk[first]) + rd * (cum_w[last] - cum_w[q])
        # the dK/dV stored in each re-read's window: per wave, the programs' finishes (G·span) ascending
        fin_keys = el_w * big + G * span
        f_o = np.argsort(fin_keys, kind="stable")
        fin_keys = fin_keys[f_o]
        fin_cum = np.concatenate(([0.0], np.cumsum(np.concatenate(stores)[f_o])))
        mr = mid[re_]
        wr = e_w[re_]
        hi = np.searchsorted(fin_keys, wr * big + np.floor(mr).astype(np.int64), side="right")
        lo = np.searchsorted(fin_keys, wr * big + np.maximum(np.floor(mr - rd), -1).astype(np.int64), side="right")
        prob = _probabilities(rows * per_row_sum + (fin_cum[hi] - fin_cum[lo]), capacity, ways)
        out_b = out_b + np.bincount(wr, weights=length[re_] * rc * prob, minlength=n_b)
    out[[v for v, _ in batch]] = out_b
    return out


def _events(groups: list[_Group], G: int) -> int:
    """About how many events (intervals) a wave's fluid count has: (2G + 1) per program (:func:`wave_misses`)."""
    return (2 * G + 1) * sum(g.n for g in groups)


def _in_batches(shapes: list[list[_Group]], G: int, per_row_sum: int, capacity: float, ways: int) -> list[float]:
    """:func:`waves_misses` of each wave shape (missed rows), a few waves a call (:data:`WAVES_EVENTS` events)."""
    got: list[float] = []
    batch: list[list[_Group]] = []
    acc = 0
    for groups in shapes:
        batch.append(groups)
        acc += _events(groups, G)
        if acc >= WAVES_EVENTS:
            got.extend(waves_misses(batch, G, per_row_sum, capacity, ways).tolist())
            batch, acc = [], 0
    if batch:
        got.extend(waves_misses(batch, G, per_row_sum, capacity, ways).tolist())
    return got


def _family(groups: list[_Group]) -> tuple[Any, float]:
    """The family of alike waves a wave belongs to, and its place in it (:func:`_sampled_misses`): one KV head's
    programs (their count, gaps, stores) placed by the last program's span; two KV heads' (the end of one and the
    start of the next: their count, gaps, stores and the second's longest span) placed by the first head's programs.
    None for other waves (evaluated each)."""
    sig = tuple((tuple(np.unique(g.gap[:-1]).tolist()), tuple(np.unique(g.store).tolist())) for g in groups)
    if len(groups) == 1:
        return (1, groups[0].n, sig), float(groups[0].span[-1])
    if len(groups) == 2:
        return (2, groups[0].n + groups[1].n, int(groups[1].span[0]), sig), float(groups[0].n)
    return None, 0.0


def _sampled_misses(shapes: list[list[_Group]], G: int, per_row_sum: int, capacity: float, ways: int) -> list[float]:
    """:func:`waves_misses` of each wave shape, of the families of alike waves (:func:`_family`) from a few of them:
    each family's extremes, then the middle member of every stretch whose linear interpolation missed that member by
    more than :data:`FLUID_SAMPLE_TOLERANCE` of it, level by level (each level's members in one set of batches); the
    others linearly interpolated between the evaluated ones (missed rows per shape). Shapes outside a family, and
    families of up to three, are evaluated each."""
    fams: dict[Any, list[tuple[float, int]]] = {}
    for i, groups in enumerate(shapes):
        key, x = _family(groups)
        fams.setdefault(key if key is not None else ("each", i), []).append((x, i))
    out: dict[int, float] = {}

    def evaluate(idx: list[int]) -> None:
        for i, m in zip(idx, _in_batches([shapes[i] for i in idx], G, per_row_sum, capacity, ways)):
            out[i] = m

    members_of = [sorted(m) for m in fams.values()]
    evaluate([i for m in members_of if len(m) <= 3 for _, i in m]
             + [m[k][1] for m in members_of if len(m) > 3 for k in (0, len(m) - 1)])
    stretches = [(m, 0, len(m) - 1) for m in members_of if len(m) > 3]
    while stretches:
        mids = [(m, a, (a + b) // 2, b) for m, a, b in stretches if b - a > 1]
        evaluate([m[c][1] for m, _, c, _ in mids])
        stretches = []
        for m, a, c, b in mids:
            (xa, ia), (xc, ic), (xb, ib) = m[a], m[c], m[b]
            guess = out[ia] + (out[ib] - out[ia]) * (xc - xa) / (xb - xa) if xb != xa else out[ia]
            if abs(guess - out[ic]) > FLUID_SAMPLE_TOLERANCE * abs(out[ic]):
                stretches += [(m, a, c), (m, c, b)]
    for m in members_of:
        done = [(x, out[i]) for x, i in m if i in out]
        xs, ys = np.array([x for x, _ in done]), np.array([y for _, y in done])
        for x, i in m:
            if i not in out:
                out[i] = float(np.interp(x, xs, ys))
    return [out[i] for i in range(len(shapes))]


def _fluid_rows(model: Any, last: int, interior: np.ndarray, capacity: float, ways: int,
                template: bool = True) -> tuple[float, int]:
    """Missed query rows of waves 0 .. last − 1 (fluid count), and the wave shapes evaluated one by one.

    ``interior`` marks the waves added from the template (two evaluations, misses affine in the first
    program's span), and a GQA kernel's other waves past :data:`FLUID_SAMPLE_EVENTS` come from a few of each family
    (:func:`_sampled_misses`); ``template=False`` evaluates every wave one by one instead (the same rows up to
    rounding without the sampling: tests/test_dkdv_closed.py)."""
    G, w = model.G, model.w
    per_sum = int(sum(model.per_row))
    bn = int(model.k_rows[0])
    missed = 0.0
    if template and interior.any():
        rel = np.arange(w, dtype=np.int64) * bn
        gap = np.full(w, bn, dtype=np.int64)
        gap[-1] = 0
        store = np.full(w, float(bn * model.kv_bytes * 2 * model.share))
        s1 = _interior_min_span(G, w, bn) + (w - 1) * bn
        m1 = wave_misses([_Group(s1 - rel, gap, store)], G, per_sum, capacity, ways)
        m2 = wave_misses([_Group(s1 + w * bn - rel, gap, store)], G, per_sum, capacity, ways)
        s_int = (model.end[model.p0[:last][interior] % model.t_c]
                 - model.lo[model.p0[:last][interior] % model.t_c]).astype(np.float64)
        missed += float(len(s_int)) * m1 + (m2 - m1) / (w * bn) * float((s_int - s1).sum())
    seen: dict[bytes, int] = {}
    shapes: list[list[_Group]] = []
    shape_of: list[int] = []
    one_by_one = np.arange(last) if not template else np.nonzero(~interior)[0]
    for v in one_by_one.tolist():
        groups = _groups_of_wave(model, v)
        key = b"|".join(g.span.tobytes() + g.gap.tobytes() + g.store.tobytes() for g in groups)
        if key not in seen:
            seen[key] = len(shapes)
            shapes.append(groups)
        shape_of.append(seen[key])
    got: list[float] = []
    if template and G > 1 and sum(_events(groups, G) for groups in shapes) > FLUID_SAMPLE_EVENTS:  # GQA (reads not a prediction): a few of each family
        got = _sampled_misses(shapes, G, per_sum, capacity, ways)
    elif shapes:  # each distinct wave once
        got = _in_batches(shapes, G, per_sum, capacity, ways)
    for k in shape_of:  # in wave order, one addition each (no BLAS reduction: the same double on every machine)
        missed += got[k]
    return missed, len(seen)


#: Most chunks of a head at which the cross-wave term (:func:`_cross_wave_rows`) is evaluated one by one; past it, at
#: this many evenly spaced chunks, each standing for the rows of its stretch (the term varies slowly along the rows:
#: what the previous wave still sweeps after a chunk shrinks as what this wave swept before it grows). A speed
#: choice, not a model constant.
CROSS_WAVE_MAX_CHUNKS = 64
#: Evict probability from which a first read is taken as missed without evaluating the cross-wave term
#: (:func:`_cross_wave_rows`): a wave whose distances all lie where the probability is at least this has at most
#: 1e-6 of its first reads served by the previous wave's copy. A speed choice, not a model constant.
CROSS_WAVE_MISS = 1.0 - 1e-6
#: Most distinct (previous wave, wave) pairs the cross-wave term evaluates (:func:`_cross_wave_rows`): pairs that
#: sit alike on their KV head (the same first and last programs relative to its first) are one; past this many
#: distinct ones, this many strata of them in the order of where the wave starts on its KV head, one pair standing
#: for each stratum's. A speed choice, not a model constant: 48 until 2026-12-06 (seventeenth session); 16 took
#: a third of the term's time on the Llama-3-8B-like MHA layer at 2^17-2^19 tokens and moved the check layers' read
#: ratios by at most 0.29 % (benchmarks/dkdv_closed_check.py; docs/l2-calibration.md, "Faster").
CROSS_WAVE_MAX_PAIRS = 16
#: Waves per KV head (its key tiles over the resident programs) from which a sequence counts as long for
#: :data:`CROSS_WAVE_MIN_SHARE`: there the waves whose first reads the previous wave's copy may serve are the last few
#: of each KV head (the measurements there: 7.8 waves a KV head and more). A batch of short MHA sequences (2,048
#: tokens, a KV head's 16 key tiles in a fraction of a wave) had the same share of first reads, 1.5 %, 60 % served (a
#: reviewer's finding, 2026-12-06).
CROSS_WAVE_LONG_WAVES = 4
#: Share of the kernel's stream misses (fluid count) at or below which the first reads the cross-wave term could serve
#: are not evaluated at all on a long sequence (:data:`CROSS_WAVE_LONG_WAVES`). Measured on the
#: Llama-3-8B-like MHA layer (2026-12-06): where they were 1.5 % of the misses (2^20 tokens) the term served 0.03 % of
#: them, at 5.9 % (2^19) 0.12 %, at 23 % (2^18) 0.53 %. A speed choice, not a model constant.
CROSS_WAVE_MIN_SHARE = 0.02


def _entries(model: Any, u: np.ndarray, e: int, ext_from: int | None = None) -> dict[str, Any]:
    """One KV head's programs in a wave, for the cross-wave term (:func:`_cross_hits`).

    Args:
        model: the kernel's waves (:class:`iomodel.cache.stream._DkdvEvents`, no window band: every program's rows end
            at the same row ``e``).
        u: the programs' first query rows, ascending, deduplicated, not empty (rows); e: their end row (rows).
        ext_from: the row from which the first chunk's extent counts (rows; default ``u[0]``; an item's extent is
            the largest it has had, so a chunk the previous wave held counts from that wave's first row).

    Returns:
        ``c0`` the chunks' first rows (n,), ``ext`` their extents (rows, (n,)), ``E`` the step at which each chunk of
        each head k is first entered ((G, n): the program with the largest lo at or below the chunk's start enters it at
        k·e + c0 − (k + 1)·lo, one starting inside it at k·(e − lo)), per head the entry steps sorted (``Es``) with the
        rows entered up to each (``cum``, (G, n + 1)), ``S0`` the longest span (rows).
    """
    G, ch = model.G, model.chunk
    first = int(u[0]) if ext_from is None else int(ext_from)
    c0 = np.arange((int(u[0]) // ch) * ch, e, ch, dtype=np.int64)
    ext = (np.minimum(c0 + ch, e) - np.maximum(c0, first)).astype(np.float64)
    i_le = np.searchsorted(u, c0, side="right") - 1
    i_in = np.searchsorted(u, c0 + ch, side="left") - 1
    ks = np.arange(G, dtype=np.int64)[:, None]
    never = np.iinfo(np.int64).max
    t_le = np.where(i_le >= 0, ks * e + c0 - (ks + 1) * u[np.maximum(i_le, 0)], never)
    t_in = np.where(u[np.maximum(i_in, 0)] > c0, ks * (e - u[np.maximum(i_in, 0)]), never)
    E = np.minimum(t_le, t_in)
    order = np.argsort(E, axis=1, kind="stable")
    cum = np.concatenate((np.zeros((G, 1)), np.cumsum(ext[order], axis=1)), axis=1)
    return {"u": u, "e": e, "c0": c0, "ext": ext, "E": E, "Es": np.take_along_axis(E, order, axis=1), "cum": cum,
            "S0": float(e - int(u[0]))}


def _wave_view(model: Any, v: int, ext_from: dict[int, int] | None = None) -> dict[str, Any]:
    """Wave v for the cross-wave term: ``groups`` its KV heads' programs (:func:`_entries`, by KV head; a KV head in
    ``ext_from`` with its first chunk's extent from that row), ``kv`` its K/V bytes (read at its start), ``fin`` its
    programs' finish steps (ascending, steps) and ``store_cum`` the dK/dV weight stored up to each (read-equivalent
    bytes, one more entry than ``fin``)."""
    p0, p1 = int(model.p0[v]), int(model.p1[v])
    kv, j = np.divmod(np.arange(p0, p1, dtype=np.int64), model.t_c)
    lo, end = model.lo[j], model.end[j]
    live = end > lo
    groups = {}
    for h in np.unique(kv[live]).tolist():
        sel = (kv == h) & live
        groups[h] = _entries(model, np.unique(lo[sel]), int(end[sel][0]), (ext_from or {}).get(h))
    fin = np.where(live, model.G * (end - lo), 0)
    order = np.argsort(fin, kind="stable")
    store = (model.k_rows[j] * model.kv_bytes * 2 * model.share)[order]
    return {"groups": groups, "kv": float(model.k_rows[j].sum()) * 2 * model.kv_bytes,
            "fin": fin[order].astype(np.float64), "store_cum": np.concatenate(([0.0], np.cumsum(store)))}


def _rows_entered(gr: dict[str, Any], k: int, t: np.ndarray, inclusive: bool) -> np.ndarray:
    """Rows of the chunks of head k of group ``gr`` first entered before step t (at t too where ``inclusive``)."""
    return gr["cum"][k][np.searchsorted(gr["Es"][k], t, side="right" if inclusive else "left")]


def _cross_hits(model: Any, prev: dict[str, Any], cur: dict[str, Any], h: int) -> tuple[np.ndarray, np.ndarray]:
    """The stack distances of KV head h's first reads in a wave (``cur``, :func:`_wave_view`) that re-read the
    previous wave's (``prev``) copy, and the rows each stands for.

    ``cur`` holds KV head h's extents from the previous wave's first row (:func:`_wave_view`'s ``ext_from``: an item's
    extent is the largest it has had). The first read of chunk c of head k in the wave (step t2, :func:`_entries`)
    re-reads what the previous wave's
    longest program of that KV head (first row lo', span S') entered last, at step t1 = k·S' + max(c0, lo') − lo'
    (it is the last to reach every row: each other program is ahead of it in its own order). The distance, as
    :class:`iomodel.cache.stream._Engine` judges a re-read (the weight pushed between plus the item's own, at the
    largest extent it has had, from lo'): what that program still entered after t1 in the previous wave
    ((G − 1 − k)·S' rows of the later heads, and head k's rows past the chunk), what the previous wave's other KV
    heads' longest programs still swept after t1, the dK/dV stored after t1; then this wave's K/V, the chunks entered
    before t2 (of heads below k, of head k below the chunk, of the other KV heads, at their extents from lo'; ties in
    the events' order: head, then chunk) and the dK/dV stored before t2. Chunks of head k above c and of the later
    heads entered before t2 are the previous wave's already and are not counted twice. Each chunk's rows are served
    with probability 1 − evict_probability(distance) (:func:`_cross_wave_rows`).

    The engine keeps each chunk's largest extent (the previous wave's, whole), so where the chunk's first toucher is a
    program that starts inside it (reading the rows from its own first row on), the rows below come with later
    touches of the same chunk, at a short distance: of these *growth* rows the fluid count takes every one as a first
    read, the engine serves them with probability 1 − evict_probability(d), d the weight entered between two touches
    of the chunk (every live program of the wave enters about a chunk's worth of rows per chunk it sweeps: the live
    programs times the steps between, Δ = c0 − lo for head 0, k·gap for head k, plus the chunk). Head 0 has none where
    a program starts at the chunk's first row (it enters the chunk whole at step 0).

    Returns:
        (distances in bytes, rows, growth rows, growth distances in bytes): float arrays of shape (G, chunks), chunks
        at most :data:`CROSS_WAVE_MAX_CHUNKS` (past it, evenly spaced chunks each standing for the rows of its
        stretch).
    """
    G, ch, per = model.G, model.chunk, float(sum(model.per_row))
    gp = prev["groups"][h]
    lo_p, s_p = int(gp["u"][0]), gp["S0"]
    gr = cur["groups"][h]
    e = gr["e"]
    # the rows this wave reads of each chunk (what a miss costs); the items' extents (gr["ext"]) are the previous wave's
    rows_of = (np.minimum(gr["c0"] + ch, e) - np.maximum(gr["c0"], int(gr["u"][0]))).astype(np.float64)
    n = len(gr["c0"])
    if n > CROSS_WAVE_MAX_CHUNKS:  # evenly spaced chunks, each weighing the rows of its stretch
        edges = np.linspace(0, n, CROSS_WAVE_MAX_CHUNKS + 1).astype(np.int64)
        pick = (edges[:-1] + edges[1:]) // 2
        weight = np.add.reduceat(rows_of, edges[:-1])
        stretch = np.diff(edges).astype(np.float64)
    else:
        pick, weight, stretch = np.arange(n), rows_of, np.ones(n)
    c0 = gr["c0"][pick].astype(np.float64)[None, :]
    ks = np.arange(G, dtype=np.float64)[:, None]
    t1 = ks * s_p + np.maximum(c0, lo_p) - lo_p
    rows = (G - 1 - ks) * s_p + (e - np.minimum(c0 + ch, e)) + gr["ext"][pick][None, :]  # the item's own extent too
    for g, other in prev["groups"].items():
        if g != h:
            rows = rows + np.maximum(0.0, G * other["S0"] - t1)
    stored = prev["store_cum"][-1] - prev["store_cum"][np.searchsorted(prev["fin"], t1, side="left")]
    t2 = gr["E"][:, pick].astype(np.float64)
    for k in range(G):
        for kap in range(k):
            rows[k] += _rows_entered(gr, kap, t2[k], True)
        lower = (np.arange(n)[None, :] < pick[:, None]) & (gr["E"][k][None, :] <= t2[k][:, None])
        rows[k] += lower.astype(np.float64) @ gr["ext"]
    for g, other in cur["groups"].items():
        if g != h:  # KV heads after h (h is the wave's first): their entries at t2 come after this one's
            for kap in range(G):
                rows += _rows_entered(other, kap, t2, False)
    stored = stored + cur["store_cum"][np.searchsorted(cur["fin"], t2, side="left")]
    # growth rows: below the first toucher's first row, served at the distance between touches of the chunk
    u, c0i = gr["u"], gr["c0"][pick]
    inside_lo = np.searchsorted(u, c0i, side="right")  # the first program starting inside the chunk
    inside_hi = np.searchsorted(u, c0i + ch, side="left") - 1  # the last
    inside = inside_hi >= inside_lo
    below = inside_lo - 1  # the last program starting at or before the chunk's first row
    at_start = (below >= 0) & (u[np.maximum(below, 0)] == c0i)
    lowest = np.where(below >= 0, c0i, u[np.minimum(inside_lo, len(u) - 1)])  # the chunk's first row this wave reads
    first_row = np.maximum(lowest, lo_p)
    gaps = np.diff(u)
    gap = float(np.median(gaps)) if len(gaps) else float(ch)
    live = float(sum(len(g["u"]) for g in cur["groups"].values()))
    grow = np.zeros(rows.shape)
    steps = np.zeros(rows.shape)
    for k in range(G):
        top = u[np.minimum(inside_lo, len(u) - 1)] if k == 0 else u[np.maximum(inside_hi, 0)]
        g_rows = np.where(inside, np.maximum(0, top - first_row), 0)
        if k == 0:
            g_rows = np.where(at_start, 0, g_rows)
            steps[k] = np.where(below >= 0, c0i - u[np.maximum(below, 0)], 0)
        else:
            steps[k] = k * gap
        grow[k] = g_rows * stretch
    grow_dist = (live * steps + gr["ext"][pick][None, :]) * per
    return rows * per + stored + cur["kv"], np.broadcast_to(weight[None, :], rows.shape), grow, grow_dist


def _miss_distance(capacity: float, ways: int) -> float:
    """Smallest stack distance (bytes, within 1 %) at which the evict probability of a line in an L2 of ``capacity``
    bytes and ``ways`` ways reaches :data:`CROSS_WAVE_MISS` (:func:`iomodel.cache.set_assoc.evict_probability`)."""
    from iomodel.cache.set_assoc import evict_probability

    lo, hi = 0.0, capacity
    while evict_probability(hi, capacity, ways) < CROSS_WAVE_MISS:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 0.01 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if evict_probability(mid, capacity, ways) < CROSS_WAVE_MISS else (lo, mid)
    return hi


def _shares_rows(model: Any, capacity: float, ways: int) -> np.ndarray:
    """Per wave, whether its first reads may find the previous wave's copy (bool array over the waves): it starts
    inside a KV head (the grid is KV-head-major: only then does it share one with the previous wave), and the
    lower bound (G·S − 2·chunk) rows on its distances (:func:`_cross_wave_rows`) weighs less than
    :func:`_miss_distance` (``capacity`` in bytes)."""
    G, ch, t_c = model.G, model.chunk, model.t_c
    per = float(sum(model.per_row))
    span = np.where(model.end > model.lo, model.end - model.lo, 0)
    live = int((span > 0).sum())  # spans fall with the key tile: the live tiles are a prefix
    j0 = model.p0 % t_c
    j_last = np.minimum(j0 + (model.p1 - model.p0), t_c) - 1
    shortest = span[np.minimum(j_last, max(live - 1, 0))].astype(np.float64)
    return (j0 > 0) & (j0 < live) & ((G * shortest - 2 * ch) * per < _miss_distance(capacity, ways))


def _cross_wave_rows(model: Any, last: int, capacity: float, ways: int, missed: float) -> tuple[float, int]:
    """Rows of the first reads of waves 1 .. last − 1 served by the previous wave's copy (:func:`_cross_hits`).

    Only a wave that starts inside a KV head shares it with the previous wave (the grid is KV-head-major). Its
    stack distances are at least (G·S − 2·chunk) rows, S the shortest span of that KV head's programs in it (the
    heads below k swept whole by the program that enters the chunk, the rows past it by the previous wave's longest),
    so where that weighs :func:`_miss_distance` (the evict probability at least :data:`CROSS_WAVE_MISS`) its first
    reads are taken as missed: on long sequences only the last waves of each KV head are left. On a long sequence
    (each KV head at least :data:`CROSS_WAVE_LONG_WAVES` waves) where those waves' first reads are at most
    :data:`CROSS_WAVE_MIN_SHARE` of ``missed`` none is evaluated. Pairs of waves alike are evaluated once, at most
    :data:`CROSS_WAVE_MAX_PAIRS` of them.

    Args:
        model: the kernel's waves (:class:`iomodel.cache.stream._DkdvEvents`, no window band); last: waves 1 .. last − 1;
        capacity: the read capacity (bytes); ways: associativity; missed: the kernel's stream misses by the fluid
            count (rows).

    Returns:
        (rows served, waves whose first reads were evaluated).
    """
    G, t_c = model.G, model.t_c
    v = np.arange(1, last, dtype=np.int64)
    near = _shares_rows(model, capacity, ways)[1:last]
    span = np.where(model.end > model.lo, model.end - model.lo, 0)
    long = t_c >= CROSS_WAVE_LONG_WAVES * model.w
    if long and float(G * span[model.p0[v[near]] % t_c].sum()) <= CROSS_WAVE_MIN_SHARE * missed:
        return 0.0, 0
    waves = v[near]
    base = (model.p0[waves] // t_c) * t_c
    keys = np.stack([model.p0[waves - 1] - base, model.p0[waves] - base, model.p1[waves] - base],
                    axis=1)  # (p1 of the previous wave is this wave's p0) sorted by where the previous wave starts
    keys, first_of, count = np.unique(keys, axis=0, return_index=True, return_counts=True)
    reps, mult = first_of, count.astype(np.float64)
    if len(keys) > CROSS_WAVE_MAX_PAIRS:
        strata = np.array_split(np.arange(len(keys)), CROSS_WAVE_MAX_PAIRS)
        reps = np.array([first_of[s[len(s) // 2]] for s in strata])
        mult = np.array([float(count[s].sum()) for s in strata])
    dists, weights, grows, grow_dists = [], [], [], []
    for w, m in zip(waves[reps].tolist(), mult.tolist()):
        prev, h = _wave_view(model, w - 1), int(model.p0[w] // t_c)
        lo_p = {h: int(prev["groups"][h]["u"][0])} if h in prev["groups"] else {}
        cur = _wave_view(model, w, ext_from=lo_p)
        if h in cur["groups"] and h in prev["groups"]:
            d, r, g, gd = _cross_hits(model, prev, cur, h)
            dists.append(d.ravel())
            weights.append(m * r.ravel())
            grows.append(m * g.ravel())
            grow_dists.append(gd.ravel())
    if not dists:
        return 0.0, 0
    n = sum(len(d) for d in dists)
    p = _probabilities(np.concatenate(dists + grow_dists), capacity, ways)
    p_first, p_grow = p[:n], p[n:]
    rows, grow = np.concatenate(weights), np.concatenate(grows)
    # first reads served at the cross-wave distance; growth rows at theirs instead
    return float(((1.0 - p_first) * rows).sum() + (grow * (p_first - p_grow)).sum()), len(waves)


def _interior_min_span(G: int, w: int, bn: int) -> int:
    """Smallest span of a template wave's last program (rows): its G head switches and its finish do not
    overlap. The events of cluster k (k = 1 .. G: the switches into head k, or the finish, and the re-reads'
    starts) lie in steps k·S_last .. k·S_first + bn, S_first = S_last + (w − 1)·bn, so cluster k + 1 starts
    after cluster k ends when S_last > k·(w − 1)·bn + bn for every k < G."""
    return (G - 1) * (w - 1) * bn + bn + 1


def _still_dirty(model: Any, capacity: float, ways: int, end: int | None = None) -> tuple[dict[str, float], int]:
    """Expected bytes of dK and dV still dirty in L2 at the kernel's end (fluid count), and the waves looked at; with
    ``end``, of the waves before wave ``end`` only (those from ``end`` on weighing above them as any later wave).

    A program stores dK then dV when it finishes (step G·span_i of its wave). What is pushed above them until the
    end is the distinct bytes touched after (the stack distance): the stores of the programs that finish later; the
    K/V and stores of every later wave (each read or written once); and the query rows (Q, dO, LSE, Delta) swept
    after, counted once each. Without a band every program of a KV head sweeps rows [lo, N_q) of each of its G
    query heads, and a later program of that head starts at a row no lower (lo grows with the key tile), so the
    rows the later waves sweep are [L_h, N_q) of each query head of KV head h, L_h the lowest first row of its
    programs in them; within the wave, the rows the longest program of each KV head still sweeps are a superset of
    what its other programs still sweep (they are ahead in rows): at step f it is in query head q0 = f // span_0,
    row lo_0 + f mod span_0, and the union with the later waves' rows adds max(L_h − lo_0 − f mod span_0, 0) rows
    of query head q0 and max(L_h − lo_0, 0) of each of the G − 1 − q0 after it (L_h = N_q where no later wave
    has a program of head h: G·span_0 − f rows, the whole remainder). Until 2026-12-06 (eighteenth session) each later wave's rows were
    added whole, which counted the rows consecutive waves of one head re-sweep again and again (on a one-head
    layer of 4 waves the dK/dV writes came 14 % over the touch-by-touch evaluation). Each dirty item's evicted
    fraction is :func:`iomodel.cache.set_assoc.finish_probabilities` of that weight (the rule the touch-by-touch
    evaluation ends with); waves are taken from the last back until what follows them weighs the saturation
    distance (the rest is written back whole)."""
    from iomodel.cache.set_assoc import finish_probabilities
    from iomodel.cache.stream import saturation_distance

    G, per_sum, share, n_q = model.G, int(sum(model.per_row)), model.share, int(model.n_q)
    d_sat = saturation_distance(capacity, ways)
    low: dict[int, int] = {}  # KV head -> lowest first row a later wave's program of it sweeps
    rows_later, fixed = 0.0, 0.0  # distinct query rows the later waves sweep; their K/V and stores (bytes)
    still, v = {"dK": 0.0, "dV": 0.0}, len(model.p0) - 1
    while v >= 0 and fixed + rows_later * per_sum < d_sat:
        p0, p1 = int(model.p0[v]), int(model.p1[v])
        kv, j = np.divmod(np.arange(p0, p1, dtype=np.int64), model.t_c)
        lo, end_j = model.lo[j], model.end[j]
        span = np.maximum(end_j - lo, 0)  # a fully masked program stores its zeros at step 0
        k_rows = model.k_rows[j]
        store = k_rows * model.kv_bytes * 2 * share  # dK and dV, read-equivalent bytes
        sel = span > 0
        heads, first = np.unique(kv[sel], return_index=True)  # programs of a head are consecutive, lo ascending
        lo0 = lo[sel][first]
        if end is None or v < end:
            finish = G * span
            order = np.argsort(finish, kind="stable")
            f_s, w_s = finish[order].astype(np.float64), store[order]
            after = np.concatenate((np.cumsum(w_s[::-1])[::-1][1:], [0.0]))  # stores finishing later
            span0 = (n_q - lo0).astype(np.float64)
            big = np.array([low.get(int(h), n_q) for h in heads], dtype=np.float64)  # L_h
            q0 = np.floor(f_s[:, None] / span0[None, :])
            r = f_s[:, None] - q0 * span0[None, :]
            extra = (np.maximum(big - lo0 - r, 0.0) + (G - 1 - q0) * np.maximum(big - lo0, 0.0))
            rows = rows_later + np.where(f_s[:, None] < G * span0[None, :], extra, 0.0).sum(axis=1)
            above_dv = rows * per_sum + after + fixed
            own = w_s / 2  # one tensor's item
            nbytes = own / share
            for t, above in (("dV", above_dv), ("dK", above_dv + own)):
                gone = np.ones(len(above))  # past the saturation distance: evicted for certain (exactly 1.0)
                near = above < d_sat
                gone[near] = finish_probabilities(above[near], own[near], capacity, ways)
                still[t] += float((nbytes * (1.0 - gone)).sum())
        fixed += float(k_rows.sum()) * 2 * model.kv_bytes  # K and V, read once
        fixed += float(store.sum())
        for h, l0 in zip(heads.tolist(), lo0.tolist()):
            old = low.get(h, n_q)
            if l0 < old:
                rows_later += G * (old - l0)
                low[h] = l0
        v -= 1
    return still, len(model.p0) - 1 - v


def closed_form_dkdv(model: Any, capacity: int, ways: int, read_capacity: int | None = None) -> KernelL2:
    """The causal ``_bwd_dkdv`` kernel through a cold L2, its stream reads in closed form (module doc).

    Args:
        model: the kernel's waves (:class:`iomodel.cache.stream._DkdvEvents`, no window band).
        capacity: effective L2 bytes (dirty lines; a written byte weighs the model's ``share``);
        ways: associativity A; read_capacity: capacity of a read miss (bytes; default ``capacity``).

    Returns:
        :class:`~iomodel.cache.simulate.KernelL2` (bytes per tensor: K and V read once, Q/dO/LSE/Delta from the
        fluid count, dK and dV written back but for what the last waves leave dirty), ``note`` naming the form.

    Raises:
        IomodelError: a fully associative L2 (``ways=None``) or a window band (not covered).
    """
    if ways is None or getattr(model, "one_extent", False):
        raise IomodelError("the closed form covers the set-associative L2 and causal layers without a window band")
    rc = float(read_capacity if read_capacity is not None else capacity)
    G, w = model.G, model.w
    nw = len(model.p0)
    bn = int(model.k_rows[0]) if len(model.k_rows) else 1
    t_c = model.t_c
    # interior waves: one KV head, w programs evenly spaced bn rows apart, head switches apart
    j0 = model.p0 % t_c
    j1 = j0 + w - 1
    even = np.concatenate(([0], np.cumsum(np.diff(model.lo) == bn))) if t_c > 1 else np.zeros(1, np.int64)
    in_head = (model.p1 - model.p0 == w) & (j1 < t_c)
    j1c = np.minimum(j1, t_c - 1)
    s_first = model.end[j0] - model.lo[j0]
    s_min = _interior_min_span(G, w, bn)
    interior = in_head & (even[j1c] - even[j0] == j1c - j0) & (s_first - (w - 1) * bn >= s_min)
    tail = min(nw, 2)  # the last two waves touch by touch where that is cheap: they hold the dirty dK/dV
    exact = model.touches(nw - tail, nw - 1) <= EXACT_TAIL_TOUCHES
    first = nw - tail if exact else nw
    missed, shapes = _fluid_rows(model, first, interior[:first], rc, ways, template=True)
    # the previous wave's copy: of the fluid waves' first reads, and of the first touch-by-touch wave's (cold there)
    served, pairs = _cross_wave_rows(model, min(nw, first + 1), rc, ways, missed)
    missed -= served
    reads = {t: float(b) for t, b in model.requested_read.items() if t in ("K", "V")}  # read once, in no wave again
    if exact:
        engine = model.engine(capacity, ways)
        if read_capacity is not None:
            engine.judge_reads_at(read_capacity)
        for v in range(first, nw):
            engine.steps(model.build_block(v, v))
        reads_tail, _, still = engine.totals()
        before, _ = _still_dirty(model, float(capacity), ways, end=first)  # the earlier waves' stores still there
        still = {t: still.get(t, 0.0) + before.get(t, 0.0) for t in set(still) | set(before)}
        how = "the last wave touch by touch" if tail == 1 else f"the last {tail} waves touch by touch"
    else:
        reads_tail = {}
        still, looked = _still_dirty(model, float(capacity), ways)
        how = f"the dK/dV still dirty at the end by the same count (the last {looked} wave{'s' * (looked != 1)})"
    for t, per in zip(("Q", "dO", "LSE", "Delta"), model.per_row):
        reads[t] = missed * per + reads_tail.get(t, 0.0)
    still = {t: still.get(t, 0.0) for t in model.requested_write}
    writes = {t: model.requested_write[t] - still[t] for t in model.requested_write}
    out = KernelL2("_bwd_dkdv", requested_read=dict(model.requested_read), requested_write=dict(model.requested_write))
    out.hbm_read, out.hbm_write, out.dirty_at_end = _rounded(reads), _rounded(writes), _rounded(still)
    out.waves = nw
    out.note = (f"closed form ({CLOSED_FORM_SOURCE}): {int(interior.sum()):,} of {nw:,} wave{'s' * (nw != 1)} from one "
                f"template, {shapes:,} other wave shape{'s' * (shapes != 1)} evaluated, the previous wave's copy of "
                f"the first reads counted in {pairs:,} wave{'s' * (pairs != 1)}, {how}")
    return out
