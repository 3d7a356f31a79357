"""The bundled kernel's grid in time: which programs run together (waves) and what each reads.

The schedule the L2 model (:mod:`iomodel.cache`) simulates, written from the traffic contract
(``docs/traffic-contract.md``): programs run in grid order, axis 0 fastest, W =
num_SMs × programs_per_SM at once; each wave is a list of :class:`Access` (which tensor
bytes the wave reads or writes, in time order). Units: rows for the per-program counts,
bytes for the accesses and the requested totals.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from iomodel.errors import IomodelError
from iomodel.schedule.launch import (KEY_ORDERS, TILE_ORDERS, head_group_of, program_runs, program_tensor,
                                     tiles_per_group)
from iomodel.schedule.tiles import decode_split_len, head_dim_padded, program_sram_bytes
from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec, Tiling, cdiv
from iomodel.spec.hardware import RESIDENT_LIMITS

#: Upper bound on programs one Hopper SM runs at once: compute capability 9.0's resident blocks
#: and warps per SM (:data:`iomodel.spec.hardware.RESIDENT_LIMITS`, CUDA C++ Programming Guide).
MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM = RESIDENT_LIMITS[(9, 0)]


#: Where a kernel-fixed programs-per-SM count comes from (``kernels.heuristics.TileChoice.programs_per_sm``: the
#: warp-specialised Gluon kernels are compiled so that one program takes the SM's register file).
KERNEL_FIXED_PROGRAMS_SOURCE = ("the kernel's: its warp-specialised setmaxnreg split takes the SM's register file "
                                "(kernels/heuristics.py TileChoice.programs_per_sm)")


def estimate_programs_per_sm(smem_per_program: int, num_warps: int, smem_per_sm: int,
                             registers: int | None = None) -> int:
    """Programs one SM can hold, from shared memory and warps, and registers where they are known.

    ``min(smem_per_sm // smem_per_program, 64 // num_warps, 32)`` (CUDA C Programming Guide, compute capability
    9.0 limits), and with ``registers`` also :func:`iomodel.schedule.registers.programs_by_registers`; at least 1.
    Without ``registers`` the count can be too high (the HEAD_DIM 64 TMA prefill: 3 by shared memory, 2 by its
    118 registers a thread); prefer Nsight Compute's measured occupancy limits when a record has them.

    Args:
        smem_per_program: shared memory one program allocates (bytes; ``Tiling.sram_bytes``).
        num_warps: warps per program.
        smem_per_sm: shared memory of one SM (bytes; ``Hardware.smem_per_sm``).
        registers: registers per thread of the compiled kernel (``ptxas -v``), or None (unknown: not counted).

    Returns:
        programs (CTAs) per SM, from 1 to :data:`MAX_BLOCKS_PER_SM`.
    """
    by_smem = smem_per_sm // max(1, smem_per_program)
    limits = [by_smem, MAX_WARPS_PER_SM // max(1, num_warps), MAX_BLOCKS_PER_SM]
    if registers is not None:
        from iomodel.schedule.registers import programs_by_registers

        limits.append(programs_by_registers(registers, max(1, num_warps)))
    return max(1, min(limits))


class Access(NamedTuple):
    """One touch of one item by a wave: ``read`` (may miss) or ``write`` (dirties it).

    A named tuple (immutable; built hundreds of thousands of times per long shape, where a
    frozen dataclass's constructor dominated the wave building).

    Attributes:
        tensor: model tensor name (``Q``, ``K``, ``V``, ``O``, ``LSE``, ``O_PART`` ...).
        key: identity of the item (tensor, head, tile ...).
        nbytes: bytes touched (the item's extent needed so far).
        write: a store (True) or a load (False).
        whole: evict the item only entirely (K/V of a head); False for streamed tiles.
    """

    tensor: str
    key: Any
    nbytes: int
    write: bool = False
    whole: bool = False


class ReadGroup(NamedTuple):
    """Loads of several items that are always touched together, in this order, and never apart
    (K and V of one chunk; the Q, dO, LSE, Delta rows of one chunk): one wave entry, read by
    :meth:`iomodel.cache.set_assoc.SetAssoc.read_group` as one stack entry with the very bytes of
    one :class:`Access` per member (the fully associative LRU reads the members one by one).

    Attributes:
        tensors: model tensor name of each member.
        keys: identity of each member item.
        nbytes: bytes each member touches (the item's extent needed so far).
        whole: evict each member only entirely (see :class:`Access`).
    """

    tensors: tuple[str, ...]
    keys: tuple[Any, ...]
    nbytes: tuple[int, ...]
    whole: bool = False


def members(waves: list[list[Any]]) -> list[list[Access]]:
    """The waves with every :class:`ReadGroup` replaced by one :class:`Access` per member, in order."""
    out = []
    for wave in waves:
        flat: list[Access] = []
        for a in wave:
            if a.__class__ is ReadGroup:
                flat += [Access(t, k, b, False, a.whole) for t, k, b in zip(a.tensors, a.keys, a.nbytes)]
            else:
                flat.append(a)
        out.append(flat)
    return out


def prefill_key_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows program i of a prefill head loads: ``min(N_k, ⌈hi_i/BN⌉·BN)``.

    Source: docs/traffic-contract.md, "Prefill forward" (hi_i = N_k, or under a causal mask
    clamp(min((i+1)·BM, N_q) + off, 0, N_k)).

    Args:
        spec: the layer (seqlen_q, seqlen_k, causal alignment).
        tiling: BLOCK_M and BLOCK_N.

    Returns:
        a list of T_r row counts (rows, not bytes).
    """
    if spec.band is not None:
        return [end - lo for lo, end in prefill_key_ranges(spec, tiling)]
    n_q, n_k, bm, bn = spec.seqlen_q, spec.seqlen_k, tiling.block_m, tiling.block_n
    off = spec.causal_offset
    rows = []
    for i in range(cdiv(n_q, bm)):
        hi = n_k if not spec.causal else min(max(min((i + 1) * bm, n_q) + off, 0), n_k)
        rows.append(min(n_k, cdiv(hi, bn) * bn))
    return rows


def prefill_key_ranges(spec: LayerSpec, tiling: Tiling) -> list[tuple[int, int]]:
    """Key rows ``[lo_i, end_i)`` program i of a prefill head loads (row indices, not bytes).

    Without a window ``lo_i = 0`` and ``end_i`` is :func:`prefill_key_rows`. Under a window band
    (``LayerSpec.band`` = (WL, WR)), with r0 = i·BM, r1 = min((i+1)·BM, N_q):
    hi_i = clamp(r1 + off + WR, 0, N_k), first_i = clamp(r0 + off − WL, 0, N_k),
    lo_i = BN·⌊first_i/BN⌋, end_i = min(N_k, BN·⌈hi_i/BN⌉), and ``(hi_i, hi_i)`` (nothing
    loaded) when first_i >= hi_i. Source: docs/traffic-contract.md, "Sliding window"
    (``_band_bounds`` in kernels/flash_attention.py; the model's ``QTileKeyRowsBand``).

    Args:
        spec: the layer (seqlen_q, seqlen_k, causal alignment, window).
        tiling: BLOCK_M and BLOCK_N.

    Returns:
        a list of T_r ``(lo, end)`` pairs, ``end - lo`` rows each.
    """
    band = spec.band
    if band is None:
        return [(0, r) for r in prefill_key_rows(spec, tiling)]
    n_q, n_k, bm, bn = spec.seqlen_q, spec.seqlen_k, tiling.block_m, tiling.block_n
    off, (wl, wr) = spec.causal_offset, band
    out = []
    for i in range(cdiv(n_q, bm)):
        hi = min(max(min((i + 1) * bm, n_q) + off + wr, 0), n_k)
        first = min(max(i * bm + off - wl, 0), n_k)
        out.append(((first // bn) * bn, min(n_k, cdiv(hi, bn) * bn)) if first < hi else (hi, hi))
    return out


def key_span_rows(ranges: list[tuple[int, int]]) -> int:
    """Rows of the union of key ranges ``[lo, end)`` (:func:`prefill_key_ranges`): the K (or V)
    rows of one head that some program loads at all (rows)."""
    total, reach = 0, 0
    for lo, end in sorted(r for r in ranges if r[1] > r[0]):
        total += max(0, end - max(lo, reach))
        reach = max(reach, end)
    return total


def prefill_key_span(spec: LayerSpec, tiling: Tiling) -> int:
    """K (or V) rows of one head that some prefill program loads: :func:`key_span_rows` of
    :func:`prefill_key_ranges` (rows).

    Without a window every range starts at key 0 and ``end_i`` grows with the tile i, so the union
    is the last tile's range (O(1), not a pass over the T_r tiles); under a band, the union of the
    ranges.
    """
    if spec.band is not None:
        return key_span_rows(prefill_key_ranges(spec, tiling))
    n_q, n_k, bn = spec.seqlen_q, spec.seqlen_k, tiling.block_n
    if not spec.causal:
        return n_k
    hi = min(max(n_q + spec.causal_offset, 0), n_k)  # the last tile, i = T_r − 1: min((i+1)·BM, N_q) = N_q
    return min(n_k, cdiv(hi, bn) * bn)


#: Key rows per K/V chunk of the prefill simulation: a wave's programs stream their KV heads'
#: K/V side by side, block after block, so the simulation interleaves them in chunks of
#: this many key rows (rounded up to a multiple of BLOCK_N). Source: L2 model round 2, from
#: receipts/ncu-h200-2026-11-29.json (docs/l2-calibration.md, "K/V chunks").
KV_CHUNK_ROWS = 1024


def _wave_ranges(total: int, w: int) -> list[tuple[int, int]]:
    """Program index ranges ``[p0, p1)`` of the waves of W = ``w`` programs over a grid of ``total``."""
    return [(p0, min(total, p0 + w)) for p0 in range(0, total, w)]


def _blocked_steps(total: int, w: int) -> list[list[int]]:
    """Linear program indices in flight at each step of a ``blocked`` persistent loop: P = ``w``
    programs, program j runs the contiguous tiles ``[floor(j·T/P), floor((j+1)·T/P))`` of the
    T = ``total`` in grid order (shares differing by at most one tile), one tile per step."""
    p = min(w, total)
    starts = [j * total // p for j in range(p + 1)]
    steps = max(starts[j + 1] - starts[j] for j in range(p))
    return [[starts[j] + t for j in range(p) if starts[j] + t < starts[j + 1]] for t in range(steps)]


def row_waves(spec: LayerSpec, t_r: int, w: int, tile_order: str, grid_order: str = "tiles-fastest",
              persistent: str | None = None) -> bool:
    """Whether the waves of a Q-stationary grid (the forward, ``_bwd_dq``) start afresh at each grid row
    b·H + h (True: W = ``w`` programs per wave from the row's first tile, the row's last wave holding
    T_r mod W) rather than W consecutive programs of the whole grid (False).

    A GPU gives the next program of a grid to an SM as soon as one of its programs ends (a non-persistent
    grid). In the reverse tile order a causal row's tiles are each one key block shorter than the one
    before, so a row's last wave is its shortest tiles, and the programs of the next row start within a
    few blocks of each other at the row's first tile: waves realign to the row. Waves held in step over
    the whole grid straddle two rows, and each later wave of the next row then reads as many key blocks
    as its longest program, some of them further than the row's own waves reach: up to 29 % more DRAM
    reads of Q, K and V where one KV head's K/V outgrows the L2 (``benchmarks/row_waves_sim.py``, an LRU of
    whole K/V blocks at the device's read capacity: against the same programs simulated as freed, these
    waves within 7.0 % on 26 causal layers, 23 of them within 3.2 %, where waves in step over the grid miss
    by up to 38 %, ``receipts/raw/row-waves-cpu-2026-12-07.txt``; the bundled kernel's measured program
    times replay as freed: ``receipts/l2-timing-h100-2026-12-07.json``; docs/l2-calibration.md,
    "The heads' seams in the model").

    Applies to: a causal layer without a window band whose mask offset is 0 (top-left, or N_q = N_k:
    each row ends on a tile of one key block), ``tile_order`` ``reverse``, ``grid_order``
    ``tiles-fastest``, one program per tile (``persistent`` None) and at least W tiles a row
    (T_r >= W: shorter rows share their waves as they run). Elsewhere False: the forward order drifts
    (:func:`iomodel.cache.predict.forward_drift_quality`), tiles of equal length (non-causal, a band)
    stay in step, and a chunk of queries under a longer cache (bottom-right, N_q < N_k) drifts in the
    reverse order too (its reads ``rough``).

    Args:
        spec: the layer (the packed view where one program serves several heads); t_r: query tiles per
            row; w: programs at once (W); tile_order, grid_order, persistent: the launch.

    Raises:
        Nothing.
    """
    return (spec.causal and spec.band is None and spec.causal_offset == 0 and tile_order == "reverse"
            and grid_order == "tiles-fastest" and persistent is None and t_r >= w)


def _row_wave_ranges(t_r: int, rows: int, w: int) -> list[tuple[int, int]]:
    """Program index ranges ``[p0, p1)`` of waves that start afresh at each of ``rows`` grid rows of
    ``t_r`` tiles (tiles-fastest: row r holds programs r·t_r .. (r + 1)·t_r − 1), W = ``w`` a wave."""
    return [(r * t_r + a, r * t_r + min(t_r, a + w)) for r in range(rows) for a in range(0, t_r, w)]


def wave_runs(total: int, w: int, t_r: int, rows: int, group: int,
              persistent: str | None = None, head_group: int = 0,
              by_row: bool = False) -> list[list[tuple[int, int, int]]]:
    """The waves of a Q-stationary grid as runs ``(bh, i0, i1)`` (:func:`program_runs`).

    One program per tile or a ``strided`` persistent loop: W = ``w`` consecutive programs of the
    grid order per wave; with ``by_row`` (:func:`row_waves`, tiles-fastest only) W consecutive
    programs of one grid row, each row's waves from its first tile. ``blocked``: the tiles in flight
    at each step of the loop (:func:`_blocked_steps`), a run per tile. ``head_group``: rows per group
    of ``head-grouped:G`` (0: none). Units: programs (tiles).

    Raises:
        IomodelError: ``by_row`` for a grid that is not tiles-fastest (``group`` not ``t_r``, head groups, or
            ``total`` not ``t_r`` · ``rows``).
    """
    if persistent == "blocked":
        return [[r for p in ps for r in program_runs(p, p + 1, t_r, rows, group, head_group)]
                for ps in _blocked_steps(total, w)]
    if by_row and (group != t_r or head_group or total != t_r * rows):
        raise IomodelError(f"waves by grid row need a tiles-fastest grid of {rows} rows of {t_r} tiles, got "
                           f"{total} programs, {group} tiles a group, head groups of {head_group}")
    ranges = _row_wave_ranges(t_r, rows, w) if by_row else _wave_ranges(total, w)
    return [program_runs(p0, p1, t_r, rows, group, head_group) for p0, p1 in ranges]


def _chunk_rows(block: int) -> int:
    """Rows per chunk of a streamed tensor: :data:`KV_CHUNK_ROWS` rounded up to a multiple of ``block`` (rows)."""
    return cdiv(max(KV_CHUNK_ROWS, block), block) * block


def _q_stationary_waves(spec: LayerSpec, block_m: int, block_n: int, w: int, tile_order: str,
                        row_reads: dict[str, int], row_writes: dict[str, int], grouped: bool = False,
                        grid_order: str = "tiles-fastest", key_order: str = "ascending",
                        persistent: str | None = None,
                        ) -> tuple[list[list[Any]], dict[str, int], dict[str, int]]:
    """Waves of a Q-stationary kernel (the forward, or the backward's ``_bwd_dq``); ``persistent``
    as :class:`iomodel.schedule.launch.Schedule`'s (:func:`wave_runs`).

    T_r = ceil(seqlen_q / block_m) query tiles per grid row bh = b·H + h; the linear program
    order is ``grid_order``'s (:func:`iomodel.schedule.launch.program_runs`). Program i of a head
    reads ``row_reads[t]`` bytes per query row of each per-row tensor t (in that order), streams
    the K/V rows of :func:`prefill_key_ranges` (``block_m``, ``block_n``) in chunks of
    :data:`KV_CHUNK_ROWS` shared by the wave, each program from its first key up
    (``key_order="ascending"``) or from its last block down (``"descending"``), and writes
    ``row_writes[t]`` bytes per row. A wave is W = ``w`` consecutive programs of the grid, or of one
    grid row where :func:`row_waves` says the waves realign to the rows. See :func:`prefill_waves` for
    the order; units: bytes.
    """
    if tile_order not in TILE_ORDERS:
        raise IomodelError(f"tile_order {tile_order!r} is unknown: use forward or reverse")
    if key_order not in KEY_ORDERS:
        raise IomodelError(f"key_order {key_order!r} is unknown: use ascending or descending")
    B, H, G = spec.batch, spec.heads, spec.group
    d, s = spec.head_dim, spec.width
    t_r = cdiv(spec.seqlen_q, block_m)
    per_group = tiles_per_group(grid_order, t_r)
    kv_ranges = prefill_key_ranges(spec, Tiling(block_m=block_m, block_n=block_n))
    kv_rows = [end - lo for lo, end in kv_ranges]
    q_rows = [min(block_m, spec.seqlen_q - i * block_m) for i in range(t_r)]
    if tile_order == "reverse":
        kv_rows, q_rows, kv_ranges = kv_rows[::-1], q_rows[::-1], kv_ranges[::-1]  # program i runs tile T_r-1-i
    req_r = {t: B * H * spec.seqlen_q * b for t, b in row_reads.items()}
    req_r["K"] = B * H * sum(kv_rows) * d * s
    req_r["V"] = req_r["K"]
    req_w = {t: B * H * spec.seqlen_q * b for t, b in row_writes.items()}
    chunk = _chunk_rows(block_n)
    total = t_r * B * H
    waves: list[list[Access]] = []
    by_row = row_waves(spec, t_r, w, tile_order, grid_order, persistent)
    for qo in wave_runs(total, w, t_r, B * H, per_group, persistent,
                        head_group_of(grid_order), by_row):  # (bh, i0, i1) in program index
        acc: list[Access] = []
        need: dict[int, int] = {}  # kv head (b*H_kv + hk) -> K rows needed by this wave
        order: list[int] = []
        for bh, i0, i1 in qo:
            b, h = divmod(bh, H)
            kv = b * spec.kv_heads + h // G
            rows = max(kv_rows[i0:i1])
            if kv not in need:
                order.append(kv)
            need[kv] = max(need.get(kv, 0), rows)
        names = tuple(row_reads)
        for bh, i0, i1 in qo:
            q = sum(q_rows[i0:i1])
            acc.append(ReadGroup(names, tuple((t, bh, i0, tile_order) for t in names),
                                 tuple(q * b for b in row_reads.values())))
        if spec.band is not None:
            acc += _band_kv_accesses(qo, kv_ranges, spec, block_n, order, key_order == "descending")
        elif key_order == "descending":  # every range starts at key 0: a chunk's loaded rows stay a prefix of it
            acc += _band_kv_accesses(qo, kv_ranges, spec, chunk, order, True)
        else:
            for c0 in range(0, max(need.values()), chunk):
                for kv in order:
                    rows = min(chunk, need[kv] - c0)
                    if rows > 0:
                        acc.append(ReadGroup(("K", "V"), (("K", kv, c0), ("V", kv, c0)), (rows * d * s,) * 2, True))
        for bh, i0, i1 in qo:
            for t, b in row_writes.items():
                acc.append(Access(t, (t, bh, i0, tile_order), sum(q_rows[i0:i1]) * b, write=True))
        waves.append(acc)
    return (waves if grouped else members(waves)), req_r, req_w


def _band_kv_accesses(qo: list[tuple[int, int, int]], kv_ranges: list[tuple[int, int]], spec: LayerSpec,
                      chunk: int, order: list[int], descending: bool = False) -> list[Access]:
    """K/V chunk touches of one wave under a window band (or in descending key order), in time order (bytes).

    Program i of the wave (query tile ranges ``qo`` of :func:`_q_stationary_waves`, key ranges
    ``kv_ranges`` in program order) scans its keys ``[lo_i, end_i)`` from lo_i upward, one block
    per step, all programs at once: it reaches chunk c0 (chunks of ``chunk`` rows from key 0,
    per KV head) at step ``max(c0, lo_i) − lo_i`` (in rows). With ``descending`` it scans from
    end_i down and reaches chunk c0 at step ``end_i − min(c0 + chunk, end_i)``, its own time: then each
    (chunk, step) is one touch (programs that reach a chunk at different steps touch it again). Ascending, each
    chunk is touched once per wave, at the earliest such step among its programs, with the rows ``[start, stop)`` of it they need
    (start the lowest, stop the highest); ties in KV-head order of ``order``, then by chunk.
    :func:`_q_stationary_waves` passes ``chunk`` = BLOCK_N: the bands of successive programs
    slide through a larger chunk, so its extent would no longer say which of its rows were
    loaded (an item's bytes only grow); every range is whole BLOCK_N blocks (the last capped at
    N_k), so a block item is always loaded whole. With every lo_i = 0 and ``chunk`` =
    :data:`KV_CHUNK_ROWS` this is the order of the windowless loop.
    """
    import numpy as np  # here only: a one-layer worksheet without a band or descending keys imports no numpy

    d, s, H, G = spec.head_dim, spec.width, spec.heads, spec.group
    kvs: list[int] = []  # one entry per (program, tile) that sees a key: its KV head, lo, end
    los: list[int] = []
    ends: list[int] = []
    for bh, i0, i1 in qo:
        b, h = divmod(bh, H)
        kv = b * spec.kv_heads + h // G
        for lo, end in kv_ranges[i0:i1]:
            if end > lo:  # else no row of the tile sees a key: nothing loaded
                kvs.append(kv)
                los.append(lo)
                ends.append(end)
    if not kvs:
        return []
    kv, lo, end = (np.array(v, dtype=np.int64) for v in (kvs, los, ends))
    first = chunk * (lo // chunk)  # the first chunk each range touches
    n = (end - first + chunk - 1) // chunk  # chunks per range
    at = np.repeat(np.arange(n.size), n)  # each (range, chunk) touch -> its range
    c0 = first[at] + chunk * (np.arange(at.size) - np.repeat(np.cumsum(n) - n, n))
    lo, end, kv = lo[at], end[at], kv[at]
    start, stop = np.maximum(c0, lo), np.minimum(c0 + chunk, end)
    step = end - stop if descending else start - lo
    # items: (kv, c0) ascending, (kv, c0, step) descending; per item its first step, lowest start, highest stop
    by = np.lexsort((step, c0, kv) if descending else (c0, kv))
    kv, c0, step, start, stop = kv[by], c0[by], step[by], start[by], stop[by]  # in item order
    new = np.ones(by.size, dtype=bool)
    new[1:] = (kv[1:] != kv[:-1]) | (c0[1:] != c0[:-1])
    if descending:
        new[1:] |= step[1:] != step[:-1]
    heads = np.flatnonzero(new)  # each item's first touch
    kv_i, c0_i = kv[heads], c0[heads]
    step_i = np.minimum.reduceat(step, heads)
    start_i = np.minimum.reduceat(start, heads)
    stop_i = np.maximum.reduceat(stop, heads)
    ranked = np.array(order, dtype=np.int64)  # may name KV heads whose tiles load nothing
    rank_of = np.zeros(int(max(kv_i.max(), ranked.max())) + 1, dtype=np.int64)
    rank_of[ranked] = np.arange(ranked.size)
    # time order: first step, then KV head in ``order``, then chunk (an item is unique in this key)
    seq = np.lexsort((c0_i, rank_of[kv_i], step_i))
    nbytes = ((stop_i - start_i) * (d * s))[seq].tolist()
    acc: list[Access] = []
    for kv_n, c, nb in zip(kv_i[seq].tolist(), c0_i[seq].tolist(), nbytes):
        acc.append(Access("K", ("K", kv_n, c), nb, whole=True))
        acc.append(Access("V", ("V", kv_n, c), nb, whole=True))
    return acc


def prefill_waves(spec: LayerSpec, tiling: Tiling, w: int, tile_order: str = "forward", grouped: bool = False,
                  grid_order: str = "tiles-fastest", key_order: str = "ascending", persistent: str | None = None,
                  ) -> tuple[list[list[Any]], dict[str, int], dict[str, int]]:
    """Waves of the Q-stationary prefill kernel in grid order, and its requested bytes.

    ``grid_order`` ``tiles-fastest`` (the bundled kernel): grid ``(T_r, B·H)``, linear program
    p = i + T_r·(b·H + h) (axis 0 fastest); ``heads-fastest``: p = (b·H + h) + B·H·i, so a wave
    holds the same query tile of many heads (the K/V of many KV heads at once, little reuse);
    ``grouped:N``: :func:`iomodel.schedule.launch.program_runs`. Program i of
    a head runs query tile i (``tile_order="forward"``) or T_r − 1 − i (``"reverse"``, the
    kernel's ``tile_order`` config field: longest causal tiles first); K/V of KV head h // G.
    Within a wave the KV heads' K and V are streamed side by side in chunks of
    :data:`KV_CHUNK_ROWS` key rows (all programs of the wave run at once, each scanning its
    keys from 0 upward, so one fetch of a chunk serves every program of the wave that needs it);
    ``key_order="descending"``: each program scans from its last block down, so a chunk is
    touched when the earliest program reaches it (:func:`_band_kv_accesses`: the chunk order
    within the wave reversed per program). A wave is W consecutive programs of the grid order, but
    of one grid row where :func:`row_waves` holds (a causal launch in the reverse tile order: the
    programs of each head start together at its first tile).

    Args:
        spec: the layer (prefill).
        tiling: BLOCK_M and BLOCK_N.
        w: programs running at once (W = num_SMs × programs_per_SM).
        tile_order: ``forward`` or ``reverse``.
        grouped: True: loads always made together (K and V of a chunk; the per-row reads of one
            chunk or program) come as one :class:`ReadGroup` (what the simulation reads); False
            (default): one :class:`Access` each (:func:`members`).
        grid_order: ``tiles-fastest`` (default), ``heads-fastest``, ``grouped:N`` or ``head-grouped:G``.
        key_order: ``ascending`` (default) or ``descending``.
        persistent: None (a program per tile, default), ``strided`` (the same waves) or
            ``blocked`` (the tiles in flight at each step of the loop: :func:`wave_runs`).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows (the same for every order).

    Raises:
        IomodelError: an unknown ``tile_order``, ``grid_order`` or ``key_order``.
    """
    d, s = spec.head_dim, spec.width
    spec, block_m, p = packed_view(spec, tiling)
    return _q_stationary_waves(spec, block_m, tiling.block_n, w, tile_order, {"Q": p * d * s},
                               forward_row_writes(tiling, p * d * s, p), grouped, grid_order, key_order, persistent)


def forward_row_writes(tiling: Tiling, o_row_bytes: int, heads: int = 1) -> dict[str, int]:
    """Bytes a prefill forward program writes per query row, by tensor: O (``o_row_bytes``) and, where
    ``tiling.writes_lse`` (every bundled kernel), the fp32 LSE of ``heads`` heads (bytes)."""
    return {"O": o_row_bytes, "LSE": heads * LSE_WIDTH} if tiling.writes_lse else {"O": o_row_bytes}


def packed_view(spec: LayerSpec, tiling: Tiling) -> tuple[LayerSpec, int, int]:
    """The prefill forward launch of ``tiling`` as one of a program per query head: (layer, BLOCK_M, P).

    A schedule whose programs each serve P = ``tiling.heads_per_program`` query heads of one KV
    head (FlashAttention-3's PackGQA; :func:`iomodel.schedule.tiles.prefill_packing_refusal`)
    runs, position for position, the programs of the layer with H / P query heads (G / P per KV
    head) and tiles of BLOCK_M / P query rows, each row P heads' rows: the caller multiplies
    its per-row bytes (Q, O, LSE) by P. P = 1 (every bundled prefill launch): ``(spec,
    tiling.block_m, 1)``. Units: heads, rows.
    """
    p = tiling.heads_per_program
    if p == 1 or spec.phase != "prefill":
        return spec, tiling.block_m, 1
    return replace(spec, heads=spec.heads // p), tiling.block_m // p, p


#: Warps of one ``_bwd_preprocess`` program (``kernels/backward.py`` launches it with this;
#: the other backward launches take theirs from ``kernels.heuristics.BackwardConfig``).
PREPROCESS_NUM_WARPS = 4

#: Key rows per program of ``_bwd_reduce_dkdv`` (the sum of the dK/dV kernel's S > 1 group-slice
#: partials, ``kernels/backward.py``): it sets the grid only, every partial row is read once and
#: every dK/dV row written once whatever the tile. Its warps: :func:`dkdv_reduce_num_warps`.
DKDV_REDUCE_BLOCK_N = 64


def dkdv_reduce_num_warps(head_dim: int) -> int:
    """Warps of one ``_bwd_reduce_dkdv`` program: 4, or 8 above a padded HEAD_DIM of 128.

    Its two fp32 accumulators hold DKDV_REDUCE_BLOCK_N × HEAD_DIM_PAD elements each: at padded
    HEAD_DIM 256 with 4 warps (256 elements per thread) ptxas spilled 1,000 B per thread (255
    registers; hold-out receipts/ncu-h200-train-d256-holdout1-2026-12-03.json measured its L2
    writes 2.2-3.7x dK + dV), with 8 warps none (254 registers; ``kernels.compile_check``, sm_90).

    Args:
        head_dim: HEAD_DIM (elements), padded as the kernel pads it (``head_dim_padded``).

    Returns:
        warps per program (4 or 8). Raises nothing (the caller has checked HEAD_DIM).
    """
    return 8 if head_dim_padded(head_dim) > 128 else 4
#: The name of that kernel (``@triton.jit``; the profiler and the interpreter report it).
REDUCE_DKDV_KERNEL = "_bwd_reduce_dkdv"


def dkdv_program_sram_bytes(spec: LayerSpec, tiling: Tiling, num_stages: int) -> int:
    """Shared memory one ``_bwd_dkdv`` program holds, in bytes:
    ``(2·BWD_BLOCK_N·d + 2·num_stages·BWD_BLOCK_M·d)·s``.

    Its K and V tiles ``(BWD_BLOCK_N, d)`` stay, ``num_stages`` Q and dO tiles
    ``(BWD_BLOCK_M, d)`` stream: :func:`~iomodel.schedule.tiles.program_sram_bytes` with the
    roles of the tiles swapped, plus the second stationary tile. Matches Nsight Compute's
    shared-memory occupancy limit on receipts/ncu-h200-train1-2026-12-01.json (3 programs
    per SM at d = 64, 1 or 2 at d = 128).

    Args:
        spec: HEAD_DIM and element width; tiling: ``bwd_block_m``, ``bwd_block_n``;
        num_stages: the dK/dV launch's ``BackwardConfig.num_stages``.

    d is the HEAD_DIM the kernel computes with (:func:`~iomodel.schedule.tiles.head_dim_padded`: its
    tiles are ``HEAD_DIM_PAD`` columns wide in shared memory, the masked ones included).
    """
    d, s = head_dim_padded(spec.head_dim), spec.width
    return program_sram_bytes(tiling.bwd_block_n, tiling.bwd_block_m, num_stages, d, s) + tiling.bwd_block_n * d * s


def dq_program_sram_bytes(spec: LayerSpec, tiling: Tiling, num_stages: int) -> int:
    """Shared memory one ``_bwd_dq`` program holds, in bytes:
    ``(2·DQ_BLOCK_M·d + 2·num_stages·DQ_BLOCK_N·d)·s``: the forward's layout
    (:func:`~iomodel.schedule.tiles.program_sram_bytes`) plus the dO tile beside Q.

    Args:
        spec: HEAD_DIM and element width; tiling: ``dq_block_m``, ``dq_block_n``;
        num_stages: the dQ launch's ``BackwardConfig.dq_num_stages``.

    d is the padded HEAD_DIM (:func:`~iomodel.schedule.tiles.head_dim_padded`), as in the kernel.
    """
    d, s = head_dim_padded(spec.head_dim), spec.width
    return program_sram_bytes(tiling.dq_block_m, tiling.dq_block_n, num_stages, d, s) + tiling.dq_block_m * d * s


def backward_row_reads(spec: LayerSpec) -> dict[str, int]:
    """Bytes the backward's ``_bwd_dkdv`` and ``_bwd_dq`` programs read per query row, by tensor, in their load order:
    Q and dO (the dtype), LSE and Delta (fp32) (docs/traffic-contract.md, "Backward"). Units: bytes."""
    d, s = spec.head_dim, spec.width
    return {"Q": d * s, "dO": d * s, "LSE": LSE_WIDTH, "Delta": FP32_WIDTH}


def step_programs(spec: LayerSpec, tiling: Tiling, forward: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What one program of each kernel of the bundled training step serves, reads and writes (issue 12 item 1's
    schedule as data, for the backward too), by kernel name, in launch order.

    Each entry: the tensor it holds for the whole program (``stationary``), its tiles, the query heads one program
    serves (``heads_per_program``: the dK/dV kernel's a whole GQA group, or with ``bwd_group_splits`` S > 1 the largest
    of its S slices, all listed in ``slice_heads``) and whether that is the KV head's whole group
    (``serves_whole_group``), its loop order where it has one, and ``tensors``: per tensor ``access`` (read, write), ``how`` (``once``:
    its own rows, loaded or stored once; ``streamed``: a block of ``rows`` at every step of its loop), ``rows`` and
    ``bytes`` of one such load or store, and the ``heads`` a once-loaded block covers. ``forward`` is the forward's
    own entry (:meth:`iomodel.schedule.launch.Schedule.to_dict` with its ``tensors``). Source: docs/traffic-contract.md,
    "Backward"; the same per-row bytes as the waves (:func:`backward_row_reads`). Units: rows, bytes, heads.

    Tensors: Q, dO, O, dQ ``(B, H, N_q, d)``; K, V, dK, dV ``(B, H_kv, N_k, d)``; LSE, Delta ``(B, H, N_q)`` fp32;
    dK_part, dV_part ``(B, H_kv, S, N_k, d)`` fp32 (slice-major per KV head, ``kernels/backward.py``).
    """
    d, s = spec.head_dim, spec.width
    row = backward_row_reads(spec)
    G, S = spec.group, tiling.bwd_group_splits
    bm, bn, pm = tiling.bwd_block_m, tiling.bwd_block_n, tiling.preprocess_block_m
    slices = [b - a for a, b in dkdv_slices(G, S)]
    slice_heads = max(slices)
    out: dict[str, dict[str, Any]] = {"_attn_fwd": {**forward, "serves_whole_group":
                                                     forward.get("heads_per_program", 1) == G}}
    out["_bwd_preprocess"] = {"stationary": "O, dO rows", "block_m": pm, "heads_per_program": 1,
                              "serves_whole_group": G == 1, "tensors": {
        "O": program_tensor("read", "once", pm, d * s), "dO": program_tensor("read", "once", pm, d * s),
        "Delta": program_tensor("write", "once", pm, FP32_WIDTH)}}
    dkdv = {"K": program_tensor("read", "once", bn, d * s), "V": program_tensor("read", "once", bn, d * s)}
    dkdv.update({t: program_tensor("read", "streamed", bm, b) for t, b in row.items()})
    out_k, out_w = ("dK", "dV"), d * s
    if S > 1:
        out_k, out_w = ("dK_part", "dV_part"), d * FP32_WIDTH
    dkdv.update({t: program_tensor("write", "once", bn, out_w) for t in out_k})
    out["_bwd_dkdv"] = {"stationary": "K, V", "block_m": bm, "block_n": bn, "heads_per_program": slice_heads,
                        "serves_whole_group": slice_heads == G, "group_splits": S, "slice_heads": slices, "loop_order": tiling.bwd_dkdv_order if G > 1 else "heads-outer",
                        "tensors": dkdv}
    if S > 1:
        rb = DKDV_REDUCE_BLOCK_N
        out[REDUCE_DKDV_KERNEL] = {"stationary": "dK, dV rows", "block_n": rb, "heads_per_program": 1,
                                   "serves_whole_group": G == 1, "tensors": {
            "dK_part": program_tensor("read", "once", rb, S * d * FP32_WIDTH),
            "dV_part": program_tensor("read", "once", rb, S * d * FP32_WIDTH),
            "dK": program_tensor("write", "once", rb, d * s), "dV": program_tensor("write", "once", rb, d * s)}}
    dq = {t: program_tensor("read", "once", tiling.dq_block_m, b, 1) for t, b in row.items()}
    dq.update({t: program_tensor("read", "streamed", tiling.dq_block_n, d * s) for t in ("K", "V")})
    dq["dQ"] = program_tensor("write", "once", tiling.dq_block_m, d * s, 1)
    out["_bwd_dq"] = {"stationary": "Q", "block_m": tiling.dq_block_m, "block_n": tiling.dq_block_n,
                      "heads_per_program": 1, "serves_whole_group": G == 1, "tile_order": tiling.dq_tile_order,
                      "tensors": dq}
    return out


def backward_programs(spec: LayerSpec, tiling: Tiling) -> dict[str, tuple[int, str, str]]:
    """The programs each kernel of the bundled backward launches (its grid, all axes multiplied), by kernel name:
    (programs, the formula in the field's symbols, the formula with this layer's numbers). The waves of each kernel
    take their program counts from here, and so does the reconciliation's check that a recorded launch is its
    record's spec (:func:`iomodel.reconcile.compare.grid_mismatch`). Source: kernels/backward.py's grids
    (``_bwd_preprocess`` ``(cdiv(N_q, PREPROCESS_BLOCK_M), B·H)``, ``_bwd_dkdv`` ``(cdiv(N_k, BWD_BLOCK_N), B·H_kv, S)``,
    ``_bwd_reduce_dkdv`` ``(cdiv(N_k, 64), B·H_kv)`` (launched only where S > 1), ``_bwd_dq`` ``(cdiv(N_q, DQ_BLOCK_M), B·H)``; the TMA
    and Gluon variants the same grids, ``_bwd_fused_tma`` the dK/dV and dQ programs in one 1-D grid); every committed
    backward launch holds them (1,940 on the H200 and H100, 2026-12-07). Units: programs. Raises nothing."""
    B, H, Hk, S = spec.batch, spec.heads, spec.kv_heads, tiling.bwd_group_splits
    t_p, t_c = cdiv(spec.seqlen_q, tiling.preprocess_block_m), cdiv(spec.seqlen_k, tiling.bwd_block_n)
    t_q = cdiv(spec.seqlen_q, tiling.dq_block_m)
    s_sym, s_num = ("·S", f"·{S:,}") if S > 1 else ("", "")
    out = {"_bwd_preprocess": (t_p * B * H, "ceil(N_q / PREPROCESS_BLOCK_M)·B·H", f"{t_p:,}·{B:,}·{H:,}"),
           "_bwd_dkdv": (t_c * B * Hk * S, "ceil(N_k / BWD_BLOCK_N)·B·H_kv" + s_sym, f"{t_c:,}·{B:,}·{Hk:,}{s_num}"),
           "_bwd_dq": (t_q * B * H, "ceil(N_q / DQ_BLOCK_M)·B·H", f"{t_q:,}·{B:,}·{H:,}")}
    t_n = cdiv(spec.seqlen_k, DKDV_REDUCE_BLOCK_N)  # launched only where S > 1
    out[REDUCE_DKDV_KERNEL] = (t_n * B * Hk, f"ceil(N_k / {DKDV_REDUCE_BLOCK_N})·B·H_kv", f"{t_n:,}·{B:,}·{Hk:,}")
    (n_kv, f_kv, v_kv), (n_q, f_q, v_q) = out["_bwd_dkdv"], out["_bwd_dq"]
    out["_bwd_fused_tma"] = (n_kv + n_q, f"{f_kv} + {f_q}", f"{v_kv} + {v_q}")
    return out


def preprocess_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of ``_bwd_preprocess`` (D = rowsum(dO ∘ O)): grid ``(ceil(N_q / PREPROCESS_BLOCK_M), B·H)``.

    Each program reads its O and dO rows once and writes its Delta rows (fp32) once
    (docs/traffic-contract.md, "Backward"); nothing is re-read, so one wave is one access
    per tensor over the wave's rows. Units: bytes.

    Args:
        spec: the layer; tiling: ``preprocess_block_m``; w: programs running at once.

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor).
    """
    B, H, n_q, d, s = spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, spec.width
    bm = tiling.preprocess_block_m
    t_p = cdiv(n_q, bm)
    rows_of = [min(bm, n_q - i * bm) for i in range(t_p)]
    total = backward_programs(spec, tiling)["_bwd_preprocess"][0]
    req_r = {"O": B * H * n_q * d * s, "dO": B * H * n_q * d * s}
    req_w = {"Delta": B * H * n_q * FP32_WIDTH}
    waves = []
    for p0, p1 in _wave_ranges(total, w):
        full, r0 = divmod(p1 - p0, t_p)  # rows of the wave: whole heads plus a run of tiles
        rows = full * n_q + sum(rows_of[(p0 + k) % t_p] for k in range(r0))
        waves.append([Access("O", ("O", p0), rows * d * s), Access("dO", ("dO", p0), rows * d * s),
                      Access("Delta", ("Delta", p0), rows * FP32_WIDTH, write=True)])
    return waves, req_r, req_w


def dkdv_query_lo(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """First query row each key tile j of ``_bwd_dkdv`` loads (rows, not bytes).

    Source: docs/traffic-contract.md, "Backward": lo_j = min(BWD_BLOCK_M·⌊max(0, j·BWD_BLOCK_N
    − off)/BWD_BLOCK_M⌋, N_q) under a causal mask, 0 otherwise; the program loads rows
    lo_j .. N_q − 1 of each query head of its group (:class:`~iomodel.traffic.sums.KTileQueryRows`).

    Returns:
        a list of ceil(N_k / BWD_BLOCK_N) row indices.
    """
    if spec.band is not None:
        return [lo for lo, _ in dkdv_query_ranges(spec, tiling)]
    bm, bn, n_q = tiling.bwd_block_m, tiling.bwd_block_n, spec.seqlen_q
    off = spec.causal_offset
    t_c = cdiv(spec.seqlen_k, bn)
    if not spec.causal:
        return [0] * t_c
    return [min(bm * (max(0, j * bn - off) // bm), n_q) for j in range(t_c)]


def dkdv_query_ranges(spec: LayerSpec, tiling: Tiling) -> list[tuple[int, int]]:
    """Query rows ``[lo_j, end_j)`` each key tile j of ``_bwd_dkdv`` loads, per query head (rows).

    Without a window ``(lo_j, N_q)`` (:func:`dkdv_query_lo`). Under a window band (WL, WR):
    lo_j = min(BWD_BLOCK_M·⌊max(0, j·BWD_BLOCK_N − off − WR)/BWD_BLOCK_M⌋, N_q),
    hi_j = clamp((j+1)·BWD_BLOCK_N − off + WL, 0, N_q), end_j = min(N_q, BWD_BLOCK_M·⌈hi_j/BWD_BLOCK_M⌉),
    and ``(lo_j, lo_j)`` (nothing loaded) when hi_j <= lo_j. Source: docs/traffic-contract.md,
    "Sliding window" (the model's ``KTileQueryRowsBand``).

    Returns:
        a list of ceil(N_k / BWD_BLOCK_N) ``(lo, end)`` pairs.
    """
    band = spec.band
    n_q = spec.seqlen_q
    if band is None:
        return [(lo, n_q) for lo in dkdv_query_lo(spec, tiling)]
    bm, bn, off, (wl, wr) = tiling.bwd_block_m, tiling.bwd_block_n, spec.causal_offset, band
    out = []
    for j in range(cdiv(spec.seqlen_k, bn)):
        lo = min(bm * (max(0, j * bn - off - wr) // bm), n_q)
        hi = min(max((j + 1) * bn - off + wl, 0), n_q)
        out.append((lo, min(n_q, cdiv(hi, bm) * bm)) if hi > lo else (lo, lo))
    return out


def dkdv_last_lo(spec: LayerSpec, tiling: Tiling) -> int:
    """First query row the last key tile of ``_bwd_dkdv`` loads without a window (rows):
    :func:`dkdv_query_lo` at j = T_c − 1, the largest (lo_j grows with j); 0 without a causal mask,
    so 0 means every key tile loads every query row."""
    if not spec.causal:
        return 0
    bm, bn = tiling.bwd_block_m, tiling.bwd_block_n
    j = cdiv(spec.seqlen_k, bn) - 1
    return min(bm * (max(0, j * bn - spec.causal_offset) // bm), spec.seqlen_q)


def dkdv_query_span(spec: LayerSpec, tiling: Tiling) -> int:
    """Query rows of one head that some ``_bwd_dkdv`` key tile loads: :func:`key_span_rows` of
    :func:`dkdv_query_ranges` (rows).

    Without a window the ranges are ``[lo_j, N_q)`` with lo_j growing with j, so the union is
    ``N_q − lo_0`` (O(1)); under a band, the union of the ranges.
    """
    if spec.band is not None:
        return key_span_rows(dkdv_query_ranges(spec, tiling))
    if not spec.causal:
        return spec.seqlen_q
    bm = tiling.bwd_block_m
    lo0 = min(bm * (max(0, -spec.causal_offset) // bm), spec.seqlen_q)  # dkdv_query_lo at j = 0
    return spec.seqlen_q - lo0


def dkdv_slices(group: int, splits: int) -> list[tuple[int, int]]:
    """Query heads ``[g0, g1)`` of each of the S group slices of ``_bwd_dkdv`` (heads of one GQA group).

    Source: docs/traffic-contract.md, "Backward": slice sl holds heads ⌊sl·G/S⌋ .. ⌊(sl+1)·G/S⌋ − 1
    (balanced, never empty for 1 <= S <= G; at most ⌈G/S⌉ heads).

    >>> dkdv_slices(5, 2)
    [(0, 2), (2, 5)]
    """
    return [(sl * group // splits, (sl + 1) * group // splits) for sl in range(splits)]


def dkdv_waves(spec: LayerSpec, tiling: Tiling, w: int, grouped: bool = False,
               ) -> tuple[list[list[Any]], dict[str, int], dict[str, int]]:
    """Waves of the K/V-stationary ``_bwd_dkdv`` kernel in grid order, and its requested bytes.

    Grid ``(T_c, B·H_kv, S)``, T_c = ceil(N_k / BWD_BLOCK_N), S = ``tiling.bwd_group_splits``,
    linear program p = j + T_c·(b·H_kv + hk + B·H_kv·sl): it loads K_j and V_j once, then for
    each query head g of its slice (:func:`dkdv_slices`; the whole group when S = 1; outer
    loop) the Q, dO (dtype) and LSE, Delta (fp32) rows [lo_j, end_j) (:func:`dkdv_query_ranges`;
    end_j = N_q without a window), and writes dK_j, dV_j once (S = 1) or its fp32 partials
    dK_part, dV_part (S > 1). The query rows are tracked in chunks of :data:`KV_CHUNK_ROWS`
    rows (rounded up to a multiple of BWD_BLOCK_M; one BWD_BLOCK_M tile under a window), each
    touched when a program first reaches it: every program advances one BWD_BLOCK_M tile per
    step, so program j reaches row r of its slice's k-th head at step k·(end_j − lo_j) + r − lo_j
    and stores at step (g1 − g0)·(end_j − lo_j); the wave's touches run in that time order
    (programs at the same row share one touch, as the forward's K/V chunks; causal programs
    with different lo_j drift apart over the heads). With ``tiling.bwd_dkdv_order``
    ``tiles-descending`` (G > 1) a program visits its query tiles from the last one down, the
    slice's G' = g1 − g0 heads inner at each tile: the tile k tiles below the last one (the one
    holding row end_j − 1, the same for every lo_j) at steps k·G' .. k·G' + G' − 1, a chunk first
    reached at its highest tile, the store at step G'·ceil((end_j − lo_j) / BWD_BLOCK_M) (times in
    rows: steps × BWD_BLOCK_M), so programs of one KV head with different lo_j touch each chunk at
    the same step and never drift apart. K/V: one item per run of key tiles of a
    KV head in the wave (S = 1), one item per key tile (S > 1: the S slices of a tile load the
    same rows, one fetch serving the wave, a later wave's slice finding them in L2 or not).

    Args:
        spec: the layer (prefill, backward).
        tiling: ``bwd_block_m``, ``bwd_block_n`` and ``bwd_group_splits``.
        w: programs running at once (W = num_SMs × programs_per_SM).
        grouped: True: loads always made together (K and V of a chunk; the per-row reads of one
            chunk or program) come as one :class:`ReadGroup` (what the simulation reads); False
            (default): one :class:`Access` each (:func:`members`).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows of ``_bwd_dkdv``.
    """
    B, Hk, G, n_k = spec.batch, spec.kv_heads, spec.group, spec.seqlen_k
    d, s, bm, bn = spec.head_dim, spec.width, tiling.bwd_block_m, tiling.bwd_block_n
    S = tiling.bwd_group_splits
    descending = tiling.bwd_dkdv_order == "tiles-descending" and G > 1  # MHA programs loop one head, ascending
    slices = dkdv_slices(G, S)
    ranges = dkdv_query_ranges(spec, tiling)
    lo = [a for a, _ in ranges]
    end = [e for _, e in ranges]  # N_q for every tile without a window
    t_c = len(lo)
    k_rows = [min(bn, n_k - j * bn) for j in range(t_c)]
    per_row = backward_row_reads(spec)
    row_names, row_bytes = tuple(per_row), tuple(per_row.values())
    q_rows = sum(e - x for x, e in ranges)  # per (batch, query head)
    req_r = {"K": S * B * Hk * n_k * d * s, "V": S * B * Hk * n_k * d * s}
    req_r.update({t: B * Hk * G * q_rows * b for t, b in per_row.items()})
    out_k, out_v, out_w = ("dK", "dV", s) if S == 1 else ("dK_part", "dV_part", FP32_WIDTH)
    req_w = {out_k: S * B * Hk * n_k * d * out_w, out_v: S * B * Hk * n_k * d * out_w}
    # under a window the query ranges [lo_j, end_j) slide through a chunk (its extent would not say
    # which rows were loaded): items of one BWD_BLOCK_M tile, each loaded whole
    chunk = _chunk_rows(bm) if spec.band is None else bm
    total = backward_programs(spec, tiling)["_bwd_dkdv"][0]  # t_c·B·H_kv·S
    waves: list[list[Access]] = []
    for p0, p1 in _wave_ranges(total, w):
        acc: list[Access] = []
        runs: list[tuple[int, int, int, int]] = []  # (kv head b·H_kv + hk, slice, j0, j1)
        for r in range(p0 // t_c, (p1 - 1) // t_c + 1):
            sl, kv = divmod(r, B * Hk)
            runs.append((kv, sl, max(0, p0 - r * t_c), min(t_c, p1 - r * t_c)))
        if S == 1:
            for kv, _, j0, j1 in runs:
                rows = sum(k_rows[j0:j1])
                acc.append(ReadGroup(("K", "V"), (("K", kv, j0), ("V", kv, j0)), (rows * d * s,) * 2))
        else:
            for kv, j in dict.fromkeys((kv, j) for kv, _, j0, j1 in runs for j in range(j0, j1)):
                acc.append(ReadGroup(("K", "V"), (("K", kv, j), ("V", kv, j)), (k_rows[j] * d * s,) * 2))
        # each program advances one BWD_BLOCK_M tile per step: program j reaches row r of its k-th
        # head at step k·(end_j − lo_j) + r − lo_j and ends at (g1 − g0)·(end_j − lo_j); touches sorted by time
        touch: dict[tuple[int, int, int, int], int] = {}  # (time, head, c0, kv) -> rows
        ends: list[tuple[int, int, Any, int]] = []  # (time, kv, output tile key, rows)
        for kv, sl, j0, j1 in runs:
            g0, g1 = slices[sl]
            for j in range(j0, j1):
                steps = cdiv(end[j] - lo[j], bm) * bm if descending else end[j] - lo[j]
                ends.append(((g1 - g0) * steps, kv, j if S == 1 else (sl, j), k_rows[j]))
            # a program's touches depend on j only through (lo_j, end_j): programs of a run with the same
            # range make the same keys and rows (merged by max), so each distinct range is visited once
            for a, e in dict.fromkeys(ranges[j0:j1]):
                span = e - a
                top = (e - 1) // bm  # descending: the last tile, whose index no lo_j changes
                for g in range(g0, g1 if span > 0 else g0):  # span 0: no query row sees the tile's keys
                    for c0 in range(chunk * (a // chunk), e, chunk):
                        start = max(c0, a)
                        if descending:  # first reached at its highest tile; tile k from the top at step k·G'
                            t = ((top - (min(c0 + chunk, e) - 1) // bm) * (g1 - g0) + g - g0) * bm
                        else:
                            t = (g - g0) * span + start - a
                        key = (t, kv * G + g, c0, kv)  # b·H + h = kv·G + g
                        touch[key] = max(touch.get(key, 0), min(c0 + chunk, e) - start)
        events = sorted([(t, 0, h, c0, rows) for (t, h, c0, _), rows in touch.items()]
                        + [(t, 1, kv, j, rows) for t, kv, j, rows in ends])
        for t, is_write, a, b_, rows in events:
            if is_write:
                acc.append(Access(out_k, (out_k, a, b_), rows * d * out_w, write=True))
                acc.append(Access(out_v, (out_v, a, b_), rows * d * out_w, write=True))
            else:
                acc.append(ReadGroup(row_names, tuple((name, a, b_) for name in row_names),
                                     tuple(rows * per for per in row_bytes), True))
        waves.append(acc)
    return (waves if grouped else members(waves)), req_r, req_w


def reduce_dkdv_waves(spec: LayerSpec, tiling: Tiling, w: int,
                      ) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of ``_bwd_reduce_dkdv`` (S = ``tiling.bwd_group_splits`` > 1): grid
    ``(ceil(N_k / DKDV_REDUCE_BLOCK_N), B·H_kv)``; program (j, b·H_kv + hk) reads the S fp32
    partials of dK and dV of its key rows once and writes dK, dV (dtype) once
    (docs/traffic-contract.md, "Backward"). Nothing is re-read: one access per tensor per wave.

    Args:
        spec: the layer; tiling: ``bwd_group_splits``; w: programs running at once.

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows of ``_bwd_reduce_dkdv``.
    """
    B, Hk, n_k, d, s, S = spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, spec.width, tiling.bwd_group_splits
    bn = DKDV_REDUCE_BLOCK_N
    t_n = cdiv(n_k, bn)
    rows_of = [min(bn, n_k - j * bn) for j in range(t_n)]
    req_r = {"dK_part": S * B * Hk * n_k * d * FP32_WIDTH, "dV_part": S * B * Hk * n_k * d * FP32_WIDTH}
    req_w = {"dK": B * Hk * n_k * d * s, "dV": B * Hk * n_k * d * s}
    waves = []
    for p0, p1 in _wave_ranges(backward_programs(spec, tiling)[REDUCE_DKDV_KERNEL][0], w):  # t_n·B·H_kv
        full, r0 = divmod(p1 - p0, t_n)  # rows of the wave: whole KV heads plus a run of tiles
        rows = full * n_k + sum(rows_of[(p0 + k) % t_n] for k in range(r0))
        waves.append([Access("dK_part", ("dK_part", p0), S * rows * d * FP32_WIDTH),
                      Access("dV_part", ("dV_part", p0), S * rows * d * FP32_WIDTH),
                      Access("dK", ("dK", p0), rows * d * s, write=True),
                      Access("dV", ("dV", p0), rows * d * s, write=True)])
    return waves, req_r, req_w


def dq_waves(spec: LayerSpec, tiling: Tiling, w: int, grouped: bool = False,
             ) -> tuple[list[list[Any]], dict[str, int], dict[str, int]]:
    """Waves of the Q-stationary ``_bwd_dq`` kernel: the forward's schedule
    (:func:`prefill_waves`, query-tile order ``tiling.dq_tile_order``) with tiles ``dq_block_m``/``dq_block_n``;
    each program reads Q, dO (dtype), LSE, Delta (fp32) of its rows once, streams the
    forward's key range of K and V, and writes dQ once (docs/traffic-contract.md, "Backward").

    Args:
        spec: the layer (prefill, backward); tiling: ``dq_block_m``, ``dq_block_n``, ``dq_tile_order``;
        w: programs running at once.
        grouped: True: loads always made together (K and V of a chunk; the per-row reads of one
            chunk or program) come as one :class:`ReadGroup` (what the simulation reads); False
            (default): one :class:`Access` each (:func:`members`).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows of ``_bwd_dq``.
    """
    d, s = spec.head_dim, spec.width
    return _q_stationary_waves(spec, tiling.dq_block_m, tiling.dq_block_n, w, tiling.dq_tile_order,
                               backward_row_reads(spec), {"dQ": d * s}, grouped)


def decode_split_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows each split of a decode program loads (rows, not bytes).

    Source: docs/traffic-contract.md, "Decode (split-KV)": split sp covers keys
    ``[sp·L, min((sp+1)·L, N_k))``, ``L = ⌈⌈N_k / num_splits⌉ / BN⌉·BN``; loads are masked to
    the split end and causal blocks whose first key >= hi = clamp(N_q + off, 0, N_k) are skipped.

    Args:
        spec: the layer (seqlen_q, seqlen_k, causal alignment).
        tiling: BLOCK_N and num_splits.

    Returns:
        a list of num_splits row counts (0 for an empty split).
    """
    n_k, bn, S = spec.seqlen_k, tiling.block_n, tiling.num_splits
    length = decode_split_len(n_k, S, bn)
    first, hi = spec.seen_keys  # the band of rows 0..N_q-1 as one tile (_band_bounds), or the mask's keys
    lo = (first // bn) * bn if first < hi else hi  # a band's first block from its start
    rows = []
    for sp in range(S):
        start, end = max(sp * length, lo), min((sp + 1) * length, n_k)
        stop = min(end, hi)
        if stop <= start:
            rows.append(0)
        else:
            rows.append(min(end, start + cdiv(stop - start, bn) * bn) - start)
    return rows


def decode_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV decode kernel: grid ``(num_splits, B·H_kv·(G/P))``, split fastest.

    Program (sp, (b·H_kv + hk)·(G/P) + gp) loads the P·N_q query rows of its P heads, the
    K/V rows of split sp, and writes partial O and LSE in fp32 (num_splits > 1) or O and
    LSE directly (docs/traffic-contract.md, "Decode (split-KV)"). Fused (num_splits > 1 and
    ``tiling.fused_combine``): every program then adds 1 to its group's int32 counter ``SEM``
    (a 4-byte read and write), and the group's merge (its partials read back, O and LSE written,
    the counter stored 0) follows in the wave of the group's last split program, sp =
    num_splits − 1 (programs start in grid order, split fastest, so the last to start is
    modelled as the last to finish; the bytes do not depend on which one merges).

    Args:
        spec: the layer (decode: seqlen_q <= 16).
        tiling: BLOCK_N, num_splits and heads_per_program P (P divides G).
        w: programs running at once (W = num_SMs × programs_per_SM).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor).
    """
    B, Hk, G, P = spec.batch, spec.kv_heads, spec.group, tiling.heads_per_program
    S, d, s, n_q = tiling.num_splits, spec.head_dim, spec.width, spec.seqlen_q
    groups = G // P
    split_rows = decode_split_rows(spec, tiling)
    rows_q = P * n_q
    o_name, l_name = ("O_PART", "LSE_PART") if S > 1 else ("O", "LSE")
    o_w = 4 if S > 1 else s
    total = S * B * Hk * groups
    req_r = {"Q": total * rows_q * d * s, "K": B * Hk * groups * sum(split_rows) * d * s}
    req_r["V"] = req_r["K"]
    req_w = {o_name: total * rows_q * d * o_w, l_name: total * rows_q * LSE_WIDTH}
    fused = S > 1 and tiling.fused_combine
    n_groups = B * Hk * groups
    if fused:  # the counters (4 B per atomic, read and written), the merge's reads and writes
        req_r.update(O_PART=total * rows_q * d * 4, LSE_PART=total * rows_q * LSE_WIDTH, SEM=total * 4)
        req_w.update(O=n_groups * rows_q * d * s, LSE=n_groups * rows_q * LSE_WIDTH, SEM=(total + n_groups) * 4)
    waves: list[list[Access]] = []
    for p0 in range(0, total, w):
        reads_q, reads_kv, writes, merges = [], [], [], []
        seen_kv = set()
        for p in range(p0, min(total, p0 + w)):
            pid, sp = divmod(p, S)
            b, rem = divmod(pid, Hk * groups)
            hk, gp = divmod(rem, groups)
            reads_q.append(Access("Q", ("Q", b, hk, gp), rows_q * d * s))
            kv = (b, hk, sp)
            if kv not in seen_kv and split_rows[sp]:
                seen_kv.add(kv)
                reads_kv.append(Access("K", ("K",) + kv, split_rows[sp] * d * s, whole=True))
                reads_kv.append(Access("V", ("V",) + kv, split_rows[sp] * d * s, whole=True))
            writes.append(Access(o_name, (o_name, pid, sp), rows_q * d * o_w, write=True))
            writes.append(Access(l_name, (l_name, pid, sp), rows_q * LSE_WIDTH, write=True))
            if fused:
                writes.append(Access("SEM", ("SEM", pid), 4))
                writes.append(Access("SEM", ("SEM", pid), 4, write=True))
                if sp == S - 1:  # the group's merge
                    merges += [Access("O_PART", ("O_PART", pid, j), rows_q * d * 4) for j in range(S)]
                    merges += [Access("LSE_PART", ("LSE_PART", pid, j), rows_q * LSE_WIDTH) for j in range(S)]
                    merges += [Access("O", ("O", pid), rows_q * d * s, write=True),
                               Access("LSE", ("LSE", pid), rows_q * LSE_WIDTH, write=True),
                               Access("SEM", ("SEM", pid), 4, write=True)]
        waves.append(reads_q + reads_kv + writes + merges)
    return waves, req_r, req_w


def combine_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV combine kernel: grid ``(B·H,)``; program bh reads its num_splits
    partials (fp32 O and LSE) and writes O (dtype) and LSE (fp32) once.

    Args:
        spec: the layer.
        tiling: num_splits.
        w: programs running at once.

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor).
    """
    B, H, S, n_q, d, s = spec.batch, spec.heads, tiling.num_splits, spec.seqlen_q, spec.head_dim, spec.width
    total = B * H
    req_r = {"O_PART": total * S * n_q * d * 4, "LSE_PART": total * S * n_q * LSE_WIDTH}
    req_w = {"O": total * n_q * d * s, "LSE": total * n_q * LSE_WIDTH}
    waves = []
    for p0 in range(0, total, w):
        n = min(total, p0 + w) - p0
        waves.append([
            Access("O_PART", ("O_PART", p0), n * S * n_q * d * 4),
            Access("LSE_PART", ("LSE_PART", p0), n * S * n_q * LSE_WIDTH),
            Access("O", ("O", p0), n * n_q * d * s, write=True),
            Access("LSE", ("LSE", p0), n * n_q * LSE_WIDTH, write=True),
        ])
    return waves, req_r, req_w
