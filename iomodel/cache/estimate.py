"""The worksheet's L2-aware DRAM estimate of the tiled prefill forward kernel, with its roofline.

:func:`estimate_tiled` calls :func:`iomodel.cache.predict.predict_tiled` the way
:func:`iomodel.reconcile.compare.reconcile_shape` does without a measured occupancy; the
worksheet (:mod:`iomodel.report.worksheet`) picks the launch (num_warps, query-tile order)
and renders the result.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from iomodel.cache.params import (DKDV_CAUSAL_UNPREDICTED_ROWS, MEASURED_DTYPES, L2Params, forward_l2_of,
                                  hardware_preset, l2_measured, read_fraction_of, read_fraction_source)
from iomodel.cache.predict import (READ_QUALITIES, WRITE_QUALITIES, _common_assumptions,
                                   dkdv_read_quality, forward_drift_quality,
                                   forward_drift_sentence, predict_ragged_launch, predict_tiled,
                                   predict_training_step)
from iomodel.errors import IomodelError
from iomodel.schedule.grid import (PREPROCESS_NUM_WARPS, REDUCE_DKDV_KERNEL, dkdv_reduce_num_warps,
                                   dkdv_program_sram_bytes, dq_program_sram_bytes, estimate_programs_per_sm,
                                   KERNEL_FIXED_PROGRAMS_SOURCE, step_programs)
from iomodel.schedule.launch import Schedule
from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec, Tiling, cdiv
from iomodel.spec.hardware import Hardware
from iomodel.spec.ragged import RaggedSpec

#: Longest seqlen for which the worksheet runs the wave-by-wave L2 simulation (the K/V chunks one
#: wave streams grow with the length; Llama-3-8B, 32 heads, at 2^18 tokens: 2.5 s, 136 MB max RSS
#: for the whole ``iomodel worksheet`` run on the 2-core development machine, before the fast
#: evaluation). Past it the estimate is computed only where the fast evaluation covers every
#: kernel (:func:`fast_refusal`).
L2_ESTIMATE_MAX_SEQLEN = 2**18
#: Most programs (B·H·T_r, the grid of the prefill kernel) the worksheet simulates wave by wave:
#: the simulation (:func:`iomodel.schedule.grid.prefill_waves` through :mod:`iomodel.cache.simulate`)
#: visits every program and keeps an item per tile it touched, so its time and memory grow with
#: B·H·T_r. Measured for the whole ``iomodel worksheet`` run on the 2-core development
#: machine at this bound, before the fast evaluation: 5.2 s and 334 MB max RSS at T_r = 1 (seqlen
#: 128, batch 4096: each program writes its own O and LSE items, the slowest case), 4.4 s and 184
#: MB for Llama-3-70B (64 heads) at 2^18 tokens, which is exactly 2^17 programs. With fewer
#: tokens than a wave's worth per grid row, the fast evaluation visits every wave too (no wave's
#: re-reads are certified deep), so this bound stays.
L2_ESTIMATE_MAX_PROGRAMS = 2**17
#: Most grid rows B·H (batch × query heads) for which the estimate is computed past
#: :data:`L2_ESTIMATE_MAX_SEQLEN` tokens: there the fast evaluation (:mod:`iomodel.cache.stream`)
#: adds the certified waves in closed form and processes, per grid row, its waves whose K/V
#: re-reads are not certified deep (the first waves of a causal head) and the last waves of each
#: certified run, so its cost grows with the grid rows, not the length. Measured on the 2-core
#: development machine (``estimate_tiled``, H200, bf16, causal, the slowest case): about 1 ms per
#: grid row at HEAD_DIM 128 and 2^24 tokens (Llama-3-8B, 32 rows: 30-50 ms; 128 rows: 0.13 s),
#: up to about 3 ms per row for HEAD_DIM 32 fp8 (16 programs per SM); non-causal a few ms in all.
L2_FAST_MAX_ROWS = 2**10
#: Grid-row tokens (B·H × the longer of seqlen_q and seqlen_k) up to which the fast evaluation takes more grid rows
#: than :data:`L2_FAST_MAX_ROWS` past the simulation's bounds (:func:`fast_max_rows`): on shorter sequences a row
#: costs less (its waves are fewer). Measured for the whole ``iomodel worksheet`` on the 2-core development machine
#: (2026-12-05, H200, bf16, 32 query heads on 8 KV heads, HEAD_DIM 64-256, causal or not, forward or training step)
#: at this many row tokens: 0.1-2.6 s for the forward, 0.2-4.4 s for the non-causal training step (the slowest:
#: HEAD_DIM 256, 32,768 rows of 4,096 tokens), 0.3-8.3 s for the causal one (:func:`fast_max_rows`); 1,024 rows stay
#: the bound from 2^17 tokens on.
L2_FAST_MAX_ROW_TOKENS = 2**27
#: Most grid rows the fast evaluation takes at any length (:func:`fast_max_rows`): below a few hundred tokens a
#: grid row is less than a wave and every wave is visited, so the cost follows the programs, not the row tokens.
L2_FAST_MAX_ROWS_SHORT = 2**15


def fast_max_rows(spec: LayerSpec) -> int:
    """Most grid rows B·H for which the fast evaluation computes the estimate past the simulation's bounds (rows):
    :data:`L2_FAST_MAX_ROW_TOKENS` over the longer length, between :data:`L2_FAST_MAX_ROWS` and
    :data:`L2_FAST_MAX_ROWS_SHORT` (1,024 rows from 2^17 tokens, 16,384 at 8,192 tokens, 32,768 up to 4,096).
    A causal training step takes the same rows: its dK/dV kernel, evaluated touch by touch, has its own bound
    (:data:`L2_CAUSAL_DKDV_MAX_TOUCHES` of :func:`dkdv_work`, which weighs a large group's touches; many KV lanes are
    evaluated once per wave phase, :func:`iomodel.cache.stream.periodic_dkdv`). Measured on 38 causal training
    steps past 1,024 rows at the bound (34 random, 4 chosen; 2026-12-05, whole worksheets, the 2-core development
    machine): 0.3-3.6 s, one 8.3 s (16 sequences of 32k tokens, 128 heads on 8 KV heads); before the touch bound
    weighed the group, 64 sequences of 2^16 tokens with 32 heads on one KV head took 52 s (now refused by that
    bound)."""
    return min(L2_FAST_MAX_ROWS_SHORT, max(L2_FAST_MAX_ROWS, L2_FAST_MAX_ROW_TOKENS // max(spec.seqlen_q, spec.seqlen_k)))
#: Most touches (:func:`iomodel.cache.stream.dkdv_touches`) of a causal ``_bwd_dkdv`` kernel the fast evaluation
#: processes touch by touch where the closed form does not apply (:func:`dkdv_closed_form_applies`): its programs
#: start at different query rows and re-read each other's rows within a wave below the saturation distance, so its
#: time grows with the touches (about 0.23 µs a touch on the 2-core development machine). Chosen so that the
#: worksheet's longest such estimate takes about what its longest took before (2026-12-04, other jobs running):
#: Llama-3-8B's causal training step with the worksheet's tiles (BWD_BLOCK_M 32, BWD_BLOCK_N 64) at 2^19 tokens,
#: 67,239,936 touches, 15-16 s; past it, and short of the closed form's length, the worksheet says why not.
L2_CAUSAL_DKDV_MAX_TOUCHES = 68_000_000
#: Most query-row chunk touches (:func:`iomodel.cache.stream.dkdv_touches`) of a dK/dV kernel that only the wave-by-wave
#: simulation evaluates (group slices S > 1; the tiles-descending order of a GQA group): it takes about 11 µs a touch
#: and 0.8-1.5 KB of memory on the 2-core development machine (2026-12-05: 0.53 million touches 6-13 s and 0.48 GB,
#: 1.06 million 0.89 GB, 2.1 million 50 s and 3.3 GB, 8.4 million 241 s and 12.6 GB, two reviewers' runs; the memory
#: a touch grows with the length), so past this many the estimate is not computed
#: rather than run for minutes. Every committed receipt's such step has at most 139,264.
L2_SIMULATED_DKDV_MAX_TOUCHES = 1_100_000
#: Query heads per KV head up to which a touch of the causal dK/dV kernel costs what the bound above assumes; a
#: touch of a larger group G costs about G / this as much, and the bound counts it so (:func:`dkdv_work`).
#: Measured on the 2-core development machine (2026-12-05, touch by touch, the worksheet's tiles): 0.22-0.32 µs a
#: touch at G 1-8, 0.74 at G 16 (2^16 tokens), 1.4-2.4 at G 71 (Falcon-7B, 2^15-2^16 tokens; a reviewer saw 34 s
#: for its 2^18-token training step worksheet, 122 s with other jobs beside it).
L2_DKDV_GROUP_COST_HEADS = 5
#: Most work units (:func:`simulated_work`) of a layer the wave-by-wave simulation evaluates within its bounds (a window
#: band, a grid or key order other than the bundled kernel's): its cost grows with the program-key-block visits, not
#: with the programs alone. Measured on the 2-core development machine (2026-12-05, Llama-3-8B, the worksheet's
#: tiles, ``make_worksheet``): about 0.08-0.16 µs a unit for a band (32k tokens, window 16,384, training step: 53.6
#: million units, 4.0 s; 2^18 tokens with a two-sided band of 131,072, forward: 134 million units, 22 s for the
#: whole worksheet) and 1.4-1.9 µs a forward visit in another key order (2^16 tokens descending: 4.2 million
#: visits, 6.5 s; 2^17: 31 s; 2^18: 97 s and 4.2 GB), so past this many (about 10-15 s) the estimate is not
#: computed rather than run for minutes (a fresh user's finding).
L2_SIMULATED_MAX_WORK = 120_000_000
#: The work units of one forward program-key-block visit in a grid or key order the fast evaluation does not cover:
#: it costs about 15 band visits (the measurements above).
L2_ORDER_VISIT_WORK = 15
#: The work units of one backward (dK/dV or dQ) visit of a band: it costs about 5 forward band visits.
L2_BACKWARD_VISIT_WORK = 5


def _bundled_order(schedule: Schedule | None) -> bool:
    """Whether ``schedule`` launches the forward in the order the fast evaluation covers (None: the bundled kernel's):
    the tiles-fastest grid, ascending key blocks, no blocked persistent loop."""
    return schedule is None or (schedule.persistent != "blocked"
                                and (schedule.grid_order, schedule.key_order) == ("tiles-fastest", "ascending"))


def simulated_work(spec: LayerSpec, tiling: Tiling, reordered: bool = False) -> int:
    """The work units of the wave-by-wave simulation of ``spec`` (a prefill layer) with ``tiling``: the forward's
    program-key-block visits B·H·T_r·(the key blocks a row's band spans, or T_c; about half under a causal mask),
    each :data:`L2_ORDER_VISIT_WORK` units where ``reordered`` (a grid or key order other than the bundled kernel's);
    with ``spec.backward`` the dK/dV kernel's B·H·T_c·(query blocks a band spans) and the dQ kernel's visits,
    :data:`L2_BACKWARD_VISIT_WORK` units each. Bounded by :data:`L2_SIMULATED_MAX_WORK` (:func:`not_estimated`)."""
    band = spec.band
    span_k = spec.seqlen_k if band is None else min(spec.seqlen_k, band[0] + band[1] + 1)
    span_q = spec.seqlen_q if band is None else min(spec.seqlen_q, band[0] + band[1] + 1)
    half = 2 if spec.causal and band is None else 1
    rows = spec.batch * spec.heads
    work = rows * cdiv(spec.seqlen_q, tiling.block_m) * cdiv(span_k, tiling.block_n) // half
    work *= L2_ORDER_VISIT_WORK if reordered else 1
    if spec.backward:
        work += L2_BACKWARD_VISIT_WORK * rows * (
            cdiv(spec.seqlen_k, tiling.bwd_block_n) * cdiv(span_q, tiling.bwd_block_m)
            + cdiv(spec.seqlen_q, tiling.dq_block_m) * cdiv(span_k, tiling.dq_block_n)) // half
    return work


def dkdv_work(spec: LayerSpec, touches: int) -> int:
    """Touches of a causal ``_bwd_dkdv`` kernel weighted by what one costs in its group: ``touches`` × max(1,
    G / :data:`L2_DKDV_GROUP_COST_HEADS`) (G query heads per KV head), the count :data:`L2_CAUSAL_DKDV_MAX_TOUCHES`
    bounds (touch equivalents)."""
    return touches if spec.group <= L2_DKDV_GROUP_COST_HEADS else -(-touches * spec.group // L2_DKDV_GROUP_COST_HEADS)
#: Touches past which a causal ``_bwd_dkdv`` kernel of a long sequence (:func:`dkdv_closed_form_applies`)
#: takes the closed form of its waves (:mod:`iomodel.cache.dkdv_closed`, 2026-12-04 night: tens to hundreds of ms
#: at any length for groups of up to 8 query heads per KV head, seconds for larger groups, whose head switches
#: overlap) instead of the touch-by-touch evaluation (about 2 s at this count for G = 4): from here on the closed form's
#: reads were within -1.58 % to +2.01 % of the touch-by-touch evaluation's on the layers of
#: ``benchmarks/dkdv_closed_check.py`` (docs/l2-calibration.md, "The causal dK/dV kernel in closed form"; since
#: 2026-12-06 with the previous wave's copy counted: :data:`iomodel.cache.dkdv_closed.CLOSED_FORM_AGREEMENT`).
L2_DKDV_CLOSED_FORM_MIN_TOUCHES = 8_000_000
#: Touches past which a causal ``_bwd_dkdv`` kernel takes the closed form at any length (:func:`dkdv_closed_form_applies`)
#: where it is MHA (one query head per KV head) or its reads are ``not a prediction``
#: (:func:`iomodel.cache.predict.dkdv_read_quality`: causal GQA, heads-outer, from 32,768 query rows, measured at
#: 0.03-0.58x the wave model on the H200). With the previous wave's copy of each wave's first reads counted
#: (2026-12-06), MHA reads came within +0.02 % to +1.80 % of the touch-by-touch evaluation's on the 19 MHA layers of
#: ``benchmarks/dkdv_closed_check.py`` where it is taken, GQA layers below 2^18 tokens −15 % to +2 % (the mean count
#: within a wave while the heads' switches overlap: docs/l2-calibration.md, "The previous wave's copy"): a deviation
#: far inside what the hardware does to those GQA steps' reads, so the exact count buys nothing there. Here the
#: touch-by-touch evaluation took 0.23 µs a touch when chosen (about 60 ms), 0.3-0.45 µs on the slower host of
#: 2026-12-06's seventeenth session (the Llama-3-8B-like causal training step 89 ms at 40,000 tokens, 209,696 touches).
#: 65,536 was tried that day and withdrawn: on MHA layers of few waves (4-32) the closed form's dK/dV still dirty at the
#: end (:func:`iomodel.cache.dkdv_closed._still_dirty`) put their writes up to 15 % off the touch-by-touch count, and an
#: H100 layer's reads 5 % (a reviewer's finding). 65,536 since the eighteenth session (2026-12-06), that count taking
#: the rows later waves re-sweep once: the 15 % layer's writes −0.47 % off; on 180 random layers between 65,536 and
#: 250,000 touches (``benchmarks/dkdv_closed_check.py --random``, receipts/raw/dkdv-closed-random-cpu-2026-12-06-s*)
#: writes within 0.41 MiB (−0.85 % to +0.82 % where 2.5 MiB or more are written), MHA reads −0.34 % to +1.07 % on the
#: H200 and −1.04 % to +3.40 % on the H100 (whose read capacity is smaller; +0.22 % to +2.68 % past 250,000 touches
#: too); docs/l2-calibration.md, "Faster, again". A speed choice, not a model constant.
L2_DKDV_ANY_LENGTH_MIN_TOUCHES = 65_536
#: Query rows (the shorter length) from which the any-length rule (:data:`L2_DKDV_ANY_LENGTH_MIN_TOUCHES`) applies:
#: on a large batch of short sequences the closed form evaluates most waves one by one and is slower than the
#: touch-by-touch evaluation (a reviewer, 2026-12-06: 512 sequences of 2,048 tokens, MHA, 226 ms against 150 ms; B 1 at
#: 2^15 tokens, 32×64 tiles, 29 ms against 70 ms). A speed choice, not a model constant.
L2_DKDV_ANY_LENGTH_MIN_ROWS = 16_384
def closed_form_saturation(l2_bytes: int, read_fraction: float | None = None) -> float:
    """Stack distance past which the default L2 model of ``l2_bytes`` bytes evicts a line for certain (bytes):
    :func:`iomodel.cache.stream.saturation_distance` of the larger of its dirty-line and read capacities, 24 ways
    (:class:`~iomodel.cache.params.L2Params` defaults; 133 MB for the H200's 60 MiB, 114 MB for the H100's 50 at its own
    read fraction, 89 MB for the A100's 40), reads
    judged at ``read_fraction`` of the L2 (None: the H200's, :data:`~iomodel.cache.params.DEFAULT_L2_READ_FRACTION`;
    a device's own: :func:`~iomodel.cache.params.read_fraction_of`)."""
    from iomodel.cache.stream import read_saturation

    p = L2Params(l2_bytes, 1, 1, **({} if read_fraction is None else {"read_fraction": read_fraction}))
    return read_saturation(p.capacity, p.read_capacity, p.ways)


def dkdv_closed_form_applies(spec: LayerSpec, tiling: Tiling, touches: int, saturation: float) -> bool:
    """Whether a causal ``_bwd_dkdv`` kernel takes the closed form (:mod:`iomodel.cache.dkdv_closed`) rather than
    the touch-by-touch evaluation.

    BWD_BLOCK_M at most BWD_BLOCK_N (the closed form was checked on those tiles only: 64×32 tiles read 4.5 % more
    than the touch-by-touch evaluation at 2^18 tokens); MHA (one query head per KV head) or a kernel whose reads
    :func:`iomodel.cache.predict.dkdv_read_quality` calls ``not a prediction`` (causal GQA, heads-outer, from 32,768
    query rows; GQA whose reads are predicted is always evaluated touch by touch: there the closed form is up to
    15 % off, docs/l2-calibration.md, "The previous wave's copy"); and either more than
    :data:`L2_DKDV_ANY_LENGTH_MIN_TOUCHES` touches (``touches``, :func:`iomodel.cache.stream.dkdv_touches`) from
    :data:`L2_DKDV_ANY_LENGTH_MIN_ROWS` query rows, or more than :data:`L2_DKDV_CLOSED_FORM_MIN_TOUCHES` touches
    with the query rows of the shorter length (Q, dO, LSE and Delta of one head: 2·HEAD_DIM·width + 8 bytes a row)
    weighing at least ``saturation`` (the L2 model's saturation distance, :func:`closed_form_saturation`; 2^18 rows
    at HEAD_DIM 128 in bf16 on the H200: the rule of 2026-12-04, which adds layers to the first only on a device
    whose L2 is about 7 MiB or less).

    Args:
        spec: the layer; tiling: its backward tiles; touches: the kernel's touches; saturation: bytes.

    Returns:
        True where the closed form is taken.
    """
    if tiling.bwd_block_m > tiling.bwd_block_n:
        return False
    if spec.group > 1 and dkdv_read_quality(spec, tiling) != "not a prediction":
        return False
    rows = min(spec.seqlen_q, spec.seqlen_k)
    if touches > L2_DKDV_ANY_LENGTH_MIN_TOUCHES and rows >= L2_DKDV_ANY_LENGTH_MIN_ROWS:
        return True
    row_bytes = 2 * spec.head_dim * spec.width + LSE_WIDTH + FP32_WIDTH
    return touches > L2_DKDV_CLOSED_FORM_MIN_TOUCHES and rows * row_bytes >= saturation


#: Where the estimate's bytes come from (worksheet text and JSON).
L2_ESTIMATE_SOURCE = "iomodel/cache/predict.py"


def simulated_programs(spec: LayerSpec, tiling: Tiling) -> int:
    """Programs the prefill simulation visits: ``B·H·T_r``, T_r = ceil(seqlen_q / BLOCK_M) (programs);
    with ``spec.backward`` the largest grid of the training step's kernels (forward ``B·H·T_r``,
    dK/dV ``B·H·ceil(seqlen_k / BWD_BLOCK_N)``, counting each of its G query-head passes, dQ
    ``B·H·ceil(seqlen_q / DQ_BLOCK_M)``)."""
    bh = spec.batch * spec.heads
    fwd = bh * cdiv(spec.seqlen_q, tiling.block_m)
    if not spec.backward:
        return fwd
    return max(fwd, bh * cdiv(spec.seqlen_k, tiling.bwd_block_n), bh * cdiv(spec.seqlen_q, tiling.dq_block_m))


def simulation_bound(spec: LayerSpec, tiling: Tiling | None = None) -> str | None:
    """Why a prefill layer is past the bounds of the wave-by-wave simulation (one clause), or None.

    The bounds: seqlen_q and seqlen_k up to :data:`L2_ESTIMATE_MAX_SEQLEN` tokens and, when
    ``tiling`` is given, at most :data:`L2_ESTIMATE_MAX_PROGRAMS` programs (:func:`simulated_programs`):
    the simulation visits every program, so its cost grows with batch × heads; a training step whose dK/dV
    kernel only the simulation evaluates (S > 1 group slices, GQA tiles-descending) at most
    :data:`L2_SIMULATED_DKDV_MAX_TOUCHES` touches. Within them the
    estimate is always computed (fast where :mod:`iomodel.cache.stream` applies, else simulated).

    Args:
        spec: the layer (prefill); tiling: the tiles (BLOCK_M sets T_r); None skips the program count.

    Returns:
        The reason, one clause without a final period, or None.
    """
    if max(spec.seqlen_q, spec.seqlen_k) > L2_ESTIMATE_MAX_SEQLEN:
        return f"seqlen above {L2_ESTIMATE_MAX_SEQLEN:,} (its simulation grows with the square of the length)"
    if tiling is not None and simulated_programs(spec, tiling) > L2_ESTIMATE_MAX_PROGRAMS:
        if spec.backward:  # name the largest grid and its factors (the dK/dV kernel's counts its G query-head passes)
            grids = [("the forward", "T_r", cdiv(spec.seqlen_q, tiling.block_m)),
                     ("the dK/dV kernel, a pass per query head,", "T_c", cdiv(spec.seqlen_k, tiling.bwd_block_n)),
                     ("the dQ kernel", "T_r", cdiv(spec.seqlen_q, tiling.dq_block_m))]
            kernel, tiles, t = max(grids, key=lambda g: g[2])
            return (f"the training step's largest grid, {kernel} B·H·{tiles} = {spec.batch:,}·{spec.heads:,}·{t:,} = "
                    f"{simulated_programs(spec, tiling):,} programs, is above {L2_ESTIMATE_MAX_PROGRAMS:,} (the simulation "
                    "visits every program: its cost grows with batch × heads)")
        t_r = cdiv(spec.seqlen_q, tiling.block_m)
        return (f"B·H·T_r = {spec.batch:,}·{spec.heads:,}·{t_r:,} = {simulated_programs(spec, tiling):,} programs, "
                f"above {L2_ESTIMATE_MAX_PROGRAMS:,} (the simulation visits every program: its cost grows with "
                "batch × heads)")
    if spec.backward and tiling is not None:
        from iomodel.cache.stream import dkdv_simulated, dkdv_touches

        touches = dkdv_touches(spec, tiling) if dkdv_simulated(spec, tiling) else 0
        if touches > L2_SIMULATED_DKDV_MAX_TOUCHES:
            how = (f"{tiling.bwd_group_splits} group slices" if tiling.bwd_group_splits > 1
                   else "the tiles-descending order")
            return (f"its dK/dV kernel with {how} is simulated wave by wave: {touches:,} query-row chunk touches, above "
                    f"{L2_SIMULATED_DKDV_MAX_TOUCHES:,} (about 11 µs and 0.8 KB each; a shorter sequence, fewer heads or a "
                    "smaller batch brings it under)")
    return None


def fast_refusal(spec: LayerSpec, tiling: Tiling | None = None, schedule: Schedule | None = None,
                 l2_bytes: int | None = None, read_fraction: float | None = None) -> str | None:
    """Why the fast evaluation (:mod:`iomodel.cache.stream`) does not cover every kernel of the
    estimate at any length (one clause), or None.

    It covers, with the default L2 (the forward's own constants, ``FORWARD_L2``; 24 ways and written lines weighing 0.5
    for the backward kernels): the forward and
    ``_bwd_dq`` in the tiles-fastest grid with ascending key blocks, without a window band;
    ``_bwd_dkdv`` with one group slice when every key tile loads every query row (no causal
    mask cuts a tile's rows: :func:`iomodel.schedule.grid.dkdv_last_lo` is 0); ``_bwd_preprocess``;
    at most :func:`fast_max_rows` grid rows B·H (1,024 from 2^17 tokens, more on shorter sequences) and
    :data:`iomodel.cache.params.MAX_STREAM_ITEMS`
    stream items (memory). Other kernels are simulated wave by wave, whose cost grows with the square
    of the length. A causal dK/dV kernel (one group slice, the heads-outer loop order or MHA) is
    evaluated in closed form where :func:`dkdv_closed_form_applies` (long sequences past
    :data:`L2_DKDV_CLOSED_FORM_MIN_TOUCHES` touches; MHA and GQA steps whose dK/dV reads are not a prediction past
    :data:`L2_DKDV_ANY_LENGTH_MIN_TOUCHES`), else touch by touch up to
    :data:`L2_CAUSAL_DKDV_MAX_TOUCHES` touches (:func:`iomodel.cache.stream.dkdv_touches`; a large group's weighed
    by :func:`dkdv_work`).

    Args:
        spec: the layer (prefill); tiling: its tiles (None: the defaults, and a causal training
            step is refused); schedule: the forward launch (None: the bundled kernel's order).
        l2_bytes: the device's L2 (bytes; None: the default hardware's, the H200's 60 MiB), which sets
            where the closed form applies (:func:`dkdv_closed_form_applies`); read_fraction: the device's
            (:func:`~iomodel.cache.params.read_fraction_of`; None: the H200's), as :func:`closed_form_saturation`.

    Returns:
        The reason, one clause without a final period, or None.
    """
    from iomodel.cache.params import MAX_STREAM_ITEMS
    from iomodel.cache.stream import dkdv_touches
    from iomodel.schedule.grid import _chunk_rows, dkdv_last_lo

    if spec.band is not None:
        return "its window band is simulated block by block (the fast evaluation covers layers without a window)"
    if not _bundled_order(schedule) and schedule.persistent == "blocked":
        return ("its blocked persistent loop is simulated wave by wave (the fast evaluation covers the bundled kernel's "
                "order)")
    if not _bundled_order(schedule):
        return (f"the {schedule.grid_order} grid with {schedule.key_order} key blocks is simulated wave by wave (the fast "
                "evaluation covers the bundled kernel's order)")
    rows = spec.batch * spec.heads
    max_rows = fast_max_rows(spec)
    if rows > max_rows:
        return (f"B·H = {spec.batch:,}·{spec.heads:,} = {rows:,} grid rows, above {max_rows:,} (past the "
                "simulation's bounds the fast evaluation's cost grows with the grid rows and their length)")
    t = tiling or Tiling()
    items = spec.batch * spec.kv_heads * cdiv(spec.seqlen_k, _chunk_rows(t.block_n))
    if spec.backward:
        items = max(items, rows * cdiv(spec.seqlen_q, _chunk_rows(t.bwd_block_m)),
                    spec.batch * spec.kv_heads * cdiv(spec.seqlen_k, _chunk_rows(t.dq_block_n)))
        if t.bwd_group_splits > 1:
            return "its dK/dV kernel's group slices are simulated wave by wave"
        if spec.causal and (tiling is None or dkdv_last_lo(spec, t) > 0):
            if tiling is not None and t.bwd_dkdv_order != "heads-outer" and spec.group > 1:
                return "its causal dK/dV kernel in the tiles-descending order is simulated wave by wave"
            why = ("its causal dK/dV kernel is evaluated touch by touch (its programs re-read each other's query rows "
                   "within a wave)")
            if tiling is None:
                return why
            if items > MAX_STREAM_ITEMS:
                return f"{items:,} K/V or query-row chunks to track, above {MAX_STREAM_ITEMS:,}"
            touches = dkdv_touches(spec, t)
            work = dkdv_work(spec, touches)
            if work > L2_CAUSAL_DKDV_MAX_TOUCHES:
                if l2_bytes is None:
                    from iomodel.spec.hardware import get_hardware
                    from iomodel.spec.resolve import DEFAULT_HARDWARE

                    l2_bytes = get_hardware(DEFAULT_HARDWARE).l2_bytes
                if not dkdv_closed_form_applies(spec, t, touches, closed_form_saturation(l2_bytes, read_fraction)):
                    weighed = ("" if work == touches else
                               f" weighing {work:,} (a touch of {spec.group} query heads per KV "
                               f"head costs {spec.group}/{L2_DKDV_GROUP_COST_HEADS} as much)")
                    fewer = "a shorter sequence, fewer heads or a smaller batch" if spec.batch > 1 else \
                        "a shorter sequence or fewer heads"
                    return (f"{why}: {touches:,} touches{weighed}, above {L2_CAUSAL_DKDV_MAX_TOUCHES:,} (its closed form needs "
                            "BWD_BLOCK_M <= BWD_BLOCK_N, MHA or GQA whose dK/dV reads are not a prediction (heads-outer, "
                            f"from {DKDV_CAUSAL_UNPREDICTED_ROWS:,} query rows), and {L2_DKDV_ANY_LENGTH_MIN_ROWS:,} "
                            f"query rows or more; {fewer} brings it under)")
    if items > MAX_STREAM_ITEMS:
        return f"{items:,} K/V or query-row chunks to track, above {MAX_STREAM_ITEMS:,}"
    return None


def not_estimated(spec: LayerSpec, tiling: Tiling | None = None, schedule: Schedule | None = None,
                  l2_bytes: int | None = None, read_fraction: float | None = None) -> str | None:
    """Why :func:`estimate_tiled` does not cover ``spec`` (one clause), or None when it does.

    It covers the prefill forward pass (and, with ``spec.backward``, the training step), with or
    without a sliding window: within the wave-by-wave simulation's bounds
    (:func:`simulation_bound`: :data:`L2_ESTIMATE_MAX_SEQLEN` tokens, :data:`L2_ESTIMATE_MAX_PROGRAMS`
    programs) always, except a window band or another grid or key order past :data:`L2_SIMULATED_MAX_WORK` work units
    (:func:`simulated_work`), and past them wherever the fast evaluation covers every kernel
    (:func:`fast_refusal`: any length, up to :func:`fast_max_rows` grid rows; a causal training step's
    dK/dV kernel in closed form where :func:`dkdv_closed_form_applies`, which the estimate's assumptions then
    say, else up to :data:`L2_CAUSAL_DKDV_MAX_TOUCHES` touches). Otherwise the estimate is not computed
    (never extrapolated).

    Args:
        spec: the layer.
        tiling: the tiles (BLOCK_M sets T_r); None skips the program-count bound.
        schedule: the forward launch (grid and key order); None: the bundled kernel's.
        l2_bytes, read_fraction: the device's L2 (bytes; None: the default hardware's) and read fraction (None: the
            H200's), as :func:`fast_refusal`.

    Returns:
        The reason, one clause without a final period, or None.
    """
    if spec.phase != "prefill":
        return "the worksheet estimates prefill launches only (a decode's L2-aware DRAM bytes are predicted by `iomodel reconcile` beside a measured record)"
    slow = simulation_bound(spec, tiling)
    if slow is None:
        if tiling is None or (spec.band is None and schedule is None):
            return None
        reordered = not _bundled_order(schedule)
        if not (spec.band is not None or reordered):
            return None
        work = simulated_work(spec, tiling, reordered)
        if work > L2_SIMULATED_MAX_WORK and (fast := fast_refusal(spec, tiling, schedule, l2_bytes, read_fraction)) is not None:
            return (f"{fast}: {work:,} work units (program-key-block visits, simulated_work), above "
                    f"{L2_SIMULATED_MAX_WORK:,} (tens of seconds to minutes on a 2-core CPU; a shorter sequence"
                    f"{', a narrower window' if spec.band is not None else ''}, fewer heads or a smaller batch brings "
                    "it under)")
        return None
    fast = fast_refusal(spec, tiling, schedule, l2_bytes, read_fraction)
    return None if fast is None else f"{slow}, and {fast}"


@dataclass(frozen=True)
class L2Estimate:
    """The L2-aware DRAM bytes of the tiled prefill forward kernel and their roofline.

    Attributes:
        read_bytes, write_bytes: DRAM bytes predicted by
            :func:`iomodel.cache.predict.predict_tiled` (bytes).
        written_bytes: bytes the kernel stores (O and LSE, each once).
        dirty_bytes: of those, the bytes still dirty in L2 at kernel end
            (``written_bytes - write_bytes``): DRAM counters of this kernel do not see them.
        flops: FLOPs of the tiled kernel (the model's count).
        roofline_time_s: ``max(flops / peak, bytes / HBM bandwidth)`` in seconds.
        intensity: FLOPs per DRAM byte.
        bound: ``memory`` or ``compute``.
        programs_per_sm: programs per SM the simulation assumes.
        programs_per_sm_source: where that number comes from.
        num_warps, tile_order: the launch's warps per program and query-tile order.
        config_source: where num_warps and tile_order come from.
        schedule: the forward launch the estimate simulated (:class:`~iomodel.schedule.launch.Schedule`,
            its ``programs_per_sm`` the number used), or None (training step).
        assumptions: the L2 model's own assumptions, one sentence each.
        read_fraction, read_fraction_source: the fraction of the L2 a read miss is judged against and where it
            comes from (the device preset's microbenchmark receipt; JSON ``read_fraction``, ``read_fraction_source``).
        kernels: training step only: per kernel ``{"name", "read_bytes", "write_bytes",
            "written_bytes", "programs_per_sm", "read_bytes_quality", "write_bytes_quality", "method", "program"}``
            (bytes; ``method`` how the bytes were computed, :attr:`~iomodel.cache.simulate.KernelL2.method`), in launch
            order; empty for the forward.
        function: the :mod:`iomodel.cache.predict` function behind the bytes.
    """

    read_bytes: int
    write_bytes: int
    written_bytes: int
    dirty_bytes: int
    flops: int
    roofline_time_s: float
    intensity: float
    bound: str
    programs_per_sm: int
    programs_per_sm_source: str
    num_warps: int
    tile_order: str
    config_source: str
    assumptions: tuple[str, ...]
    kernels: tuple[dict[str, Any], ...] = ()
    function: str = "predict_tiled"
    schedule: Schedule | None = None
    #: What one program of ``schedule`` reads and writes, per tensor (:meth:`Schedule.tensors`); None without one.
    program_tensors: dict[str, Any] | None = None
    #: Whether one program of ``schedule`` serves every query head of its KV head (``heads_per_program`` = H / H_kv,
    #: MHA included); None without a schedule.
    serves_whole_group: bool | None = None
    #: The least of the kernels' ``read_bytes_quality`` (``iomodel.cache.predict.READ_QUALITIES``): how far
    #: ``read_bytes`` can be taken; ``predicted`` but for the training step's classes the assumptions name.
    read_bytes_quality: str = "predicted"
    #: The least of the kernels' ``write_bytes_quality`` (``iomodel.cache.predict.WRITE_QUALITIES``): how far
    #: ``write_bytes`` can be taken; ``rough`` where the dK/dV kernel's fp32 partials exceed the effective L2.
    write_bytes_quality: str = "predicted"
    #: Fraction of the L2 a read miss was judged against (:func:`~iomodel.cache.params.read_fraction_of`: the preset's
    #: measured one), and where it comes from (:func:`~iomodel.cache.params.read_fraction_source`).
    read_fraction: float | None = None
    read_fraction_source: str = ""
    #: The forward launch's own L2 constants (:func:`~iomodel.cache.params.forward_l2_of` as a dict: ``ways``, ``q_share``,
    #: ``write_share``, ``write_fraction``, ``source``; JSON ``forward_constants``), the ``_attn_fwd`` kernel's in a
    #: training step.
    forward_constants: dict[str, Any] | None = None

    @classmethod
    def of(cls, read_bytes: int, write_bytes: int, written_bytes: int, *, flops: int, peak_flops: float,
           hardware: Hardware, dtype: str | None = None, **launch: Any) -> "L2Estimate":
        """An estimate from its DRAM bytes: the dirty bytes (``written - write``) and the roofline
        ``max(flops / peak_flops, (read + write) / hardware.hbm_bandwidth)`` (seconds), intensity
        (FLOPs per DRAM byte) and bound derived here, the read fraction and its source from ``hardware``
        (:func:`~iomodel.cache.params.read_fraction_of`); ``launch`` gives the remaining fields. ``dtype``, the
        layer's element type: one no receipt measured (:data:`~iomodel.cache.params.MEASURED_DTYPES`) makes the
        estimate ``rough``, as a GPU whose L2 was not measured does."""
        moved = read_bytes + write_bytes
        t_c, t_m = flops / peak_flops, moved / hardware.hbm_bandwidth
        if not l2_measured(hardware):  # no card of this preset had its L2 measured
            _uncalibrated(launch, hardware)
        if dtype is not None and dtype not in MEASURED_DTYPES:
            _rough(launch, f"ROUGH: the DRAM reads and writes at {dtype}. Every committed Nsight Compute receipt ran "
                           f"{' or '.join(MEASURED_DTYPES)} (iomodel/cache/params.py MEASURED_DTYPES): no DRAM byte of "
                           f"this model was measured at {dtype}, whose launches take other tiles and paths.")
        launch.setdefault("read_fraction", read_fraction_of(hardware))
        launch.setdefault("read_fraction_source", read_fraction_source(hardware))
        launch.setdefault("forward_constants", asdict(forward_l2_of(hardware)))
        return cls(read_bytes=read_bytes, write_bytes=write_bytes, written_bytes=written_bytes,
                   dirty_bytes=written_bytes - write_bytes, flops=flops, roofline_time_s=max(t_c, t_m),
                   intensity=flops / moved if moved else math.inf, bound="memory" if t_m >= t_c else "compute",
                   **launch)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``algorithms.tiled.l2_aware``): bytes, seconds and the assumptions."""
        out = {
            "source": f"estimate from {L2_ESTIMATE_SOURCE} {self.function} (not a measurement)",
            "read_bytes": self.read_bytes, "read_bytes_quality": self.read_bytes_quality, "write_bytes": self.write_bytes,
            "write_bytes_quality": self.write_bytes_quality,
            "written_bytes": self.written_bytes, "dirty_at_end_bytes": self.dirty_bytes,
            "dirty_at_end": DIRTY_NOTE,
            "roofline_time_s": self.roofline_time_s, "intensity": self.intensity, "bound": self.bound,
            "programs_per_sm": self.programs_per_sm, "programs_per_sm_source": self.programs_per_sm_source,
            "num_warps": self.num_warps, "tile_order": self.tile_order, "config_source": self.config_source,
            "read_fraction": self.read_fraction, "read_fraction_source": self.read_fraction_source,
            "forward_constants": self.forward_constants,
            "assumptions": list(self.assumptions),
        }
        if self.schedule is not None:
            out["schedule"] = self.schedule.to_dict()
            if self.program_tensors is not None:
                out["schedule"]["tensors"] = self.program_tensors
            if self.serves_whole_group is not None:
                out["schedule"]["serves_whole_group"] = self.serves_whole_group
        if self.kernels:
            out["kernels"] = [dict(k) for k in self.kernels]
        return out


def _rougher(quality: str, qualities: tuple[str, ...]) -> str:
    """``quality`` or ``rough``, whichever is lower in ``qualities`` (READ_QUALITIES or WRITE_QUALITIES order)."""
    return max(quality, "rough", key=qualities.index)


def _uncalibrated(launch: dict[str, Any], hardware: Hardware) -> None:
    """Label an estimate for a GPU whose preset had no L2 measured (the A100s: the H200's constants stand in, said in
    the assumptions' read-capacity clause) ``rough``, reads and writes, the step's and each kernel's, with the sentence
    that says why (a fresh user's finding, 2026-12-07: the JSON said ``predicted``). Mutates ``launch``."""
    preset = hardware_preset(hardware) or "unnamed"
    _rough(launch, f"ROUGH: the DRAM reads and writes on the {preset}. No card of this preset had its L2 "
                   "measured: its read capacity, associativity and byte weights are the H200's "
                   "(iomodel/cache/params.py MEASURED_L2_READ_FRACTION, FORWARD_L2), and no DRAM byte of "
                   "this model was measured on it.")


def _rough(launch: dict[str, Any], sentence: str) -> None:
    """Label an estimate's reads and writes, the step's and each kernel's, at most ``rough``, and add ``sentence``
    (why) to its assumptions. Mutates ``launch``."""
    launch["read_bytes_quality"] = _rougher(launch.get("read_bytes_quality", "predicted"), READ_QUALITIES)
    launch["write_bytes_quality"] = _rougher(launch.get("write_bytes_quality", "predicted"), WRITE_QUALITIES)
    if launch.get("kernels"):
        launch["kernels"] = tuple({**k, "read_bytes_quality": _rougher(k["read_bytes_quality"], READ_QUALITIES),
                                   "write_bytes_quality": _rougher(k["write_bytes_quality"], WRITE_QUALITIES)}
                                  for k in launch["kernels"])
    launch["assumptions"] = (*launch.get("assumptions", ()), sentence)


#: What the estimate leaves out of ``write_bytes`` (worksheet text and JSON).
DIRTY_NOTE = ("bytes the kernel stores that are still dirty in L2 at kernel end are not in write_bytes: "
              "they reach DRAM only when a later access evicts them, after the kernel, where "
              "Nsight Compute's dram__bytes of this kernel does not count them")


def launch_params(spec: LayerSpec, tiling: Tiling, hardware: Hardware, num_warps: int,
                  programs_per_sm: int | None = None) -> L2Params:
    """The :class:`~iomodel.cache.params.L2Params` of the estimate: the hardware's L2 bytes and
    SMs, programs per SM ``programs_per_sm`` where given (the kernel's own, ``kernels.heuristics.TileChoice``, or
    counted with the launch's compiled registers, ``iomodel.report.worksheet.l2_launch``), else from
    :func:`iomodel.schedule.grid.estimate_programs_per_sm` (shared memory ``tiling.sram_bytes(spec)`` and
    ``num_warps``; registers ignored), defaults otherwise.

    Raises:
        IomodelError: from :class:`~iomodel.cache.params.L2Params` (hardware without L2 or SMs).
    """
    pps = programs_per_sm or estimate_programs_per_sm(tiling.sram_bytes(spec), num_warps, hardware.smem_per_sm)
    return L2Params.of(hardware, pps)


def estimate_tiled(spec: LayerSpec, tiling: Tiling, hardware: Hardware, *, flops: int, peak_flops: float,
                   num_warps: int | None = None, tile_order: str | None = None, config_source: str,
                   schedule: Schedule | None = None) -> L2Estimate:
    """The L2-aware DRAM estimate of the tiled kernel (or of any Q-stationary launch ``schedule``)
    for a prefill forward layer.

    Programs per SM: the schedule's, else from :func:`iomodel.schedule.grid.estimate_programs_per_sm`
    (shared memory of the tiles and warps; registers ignored); default
    :class:`~iomodel.cache.params.L2Params` otherwise (the device's, :meth:`~iomodel.cache.params.L2Params.of`: the
    forward's own constants, ``FORWARD_L2``; caches flushed before the kernel). Roofline time ``max(flops / peak_flops, DRAM bytes /
    hardware.hbm_bandwidth)`` (seconds).

    Args:
        spec: the layer (prefill forward, covered by :func:`not_estimated` with this tiling and schedule:
            within the simulation's bounds, or any length the fast evaluation covers).
        tiling: the tiles (BLOCK_M, BLOCK_N, num_stages).
        hardware: L2 bytes, SMs, shared memory per SM (bytes), HBM bandwidth (B/s).
        flops: FLOPs of the tiled kernel; peak_flops: its peak FLOP/s.
        num_warps, tile_order: the launch (warps per program, default 4; ``forward`` (default)
            or ``reverse``); with ``schedule`` leave them out or give the schedule's.
        config_source: one sentence on where the launch comes from.
        schedule: the launch (:class:`~iomodel.schedule.launch.Schedule`: tiles, warps, programs per
            SM, grid, tile and key order); None: the bundled kernel's order with ``num_warps``
            and ``tile_order``. Checked against ``spec`` and ``hardware`` (:meth:`Schedule.check`).

    Raises:
        IomodelError: a layer :func:`not_estimated` refuses; a schedule that cannot launch
            (:meth:`Schedule.check`) or disagrees with ``tiling``, ``num_warps`` or ``tile_order``;
            from :class:`~iomodel.cache.params.L2Params` (hardware without L2 or SMs).
    """
    why = not_estimated(spec, tiling, schedule, hardware.l2_bytes, read_fraction_of(hardware))
    if why is not None:
        raise IomodelError(f"no L2-aware estimate for this layer: {why}")
    if spec.backward:
        raise IomodelError("estimate_tiled covers the forward kernel: use estimate_training_step for --pass fwd+bwd")
    if schedule is None:
        schedule = Schedule.for_tiling(tiling, num_warps=4 if num_warps is None else num_warps,
                                       tile_order=tile_order or "forward")
    else:
        for name, given in (("num_warps", num_warps), ("tile_order", tile_order)):
            if given is not None and given != getattr(schedule, name):
                raise IomodelError(f"{name} {given!r} and the schedule's {getattr(schedule, name)!r} disagree: give it once")
        if (schedule.block_m, schedule.block_n, schedule.num_stages) != (tiling.block_m, tiling.block_n, tiling.num_stages):
            raise IomodelError(f"the schedule's tiles BLOCK_M={schedule.block_m}, BLOCK_N={schedule.block_n}, "
                               f"num_stages={schedule.num_stages} are not the layer's {tiling.block_m}, {tiling.block_n}, "
                               f"{tiling.num_stages}: give them once")
    schedule.check(spec, hardware)
    pps, pps_source = schedule.resident_programs_per_sm(spec, hardware)
    params = L2Params.of(hardware, pps)
    l2 = predict_tiled(spec, tiling, params, schedule=schedule)
    return L2Estimate.of(
        l2.hbm_read_bytes, l2.hbm_write_bytes, l2.no_reuse_write_bytes, flops=flops, peak_flops=peak_flops,
        hardware=hardware, dtype=spec.dtype, programs_per_sm=params.programs_per_sm, programs_per_sm_source=pps_source,
        num_warps=schedule.num_warps, tile_order=schedule.tile_order, config_source=config_source,
        assumptions=tuple(l2.assumptions), schedule=replace(schedule, programs_per_sm=pps),
        program_tensors=schedule.tensors(spec), serves_whole_group=schedule.heads_per_program == spec.group,
        read_bytes_quality=l2.read_qualities.get("fwd kernel", "predicted"),
    )


def dkdv_l2_params(spec: LayerSpec, tiling: Tiling, hardware: Hardware, num_warps: int = 4) -> L2Params:
    """The :class:`~iomodel.cache.params.L2Params` the training step's estimate gives its ``_bwd_dkdv`` kernel: the
    hardware's L2 and SMs, that kernel's programs per SM (:func:`training_programs_per_sm` with the bundled
    backward's warps, ``kernels.heuristics.layer_backward_config``), defaults otherwise (the benchmarks that evaluate the
    kernel alone read it here).

    Raises:
        IomodelError: from :class:`~iomodel.cache.params.L2Params` (hardware without L2 or SMs).
    """
    from kernels.heuristics import layer_backward_config

    pps = training_programs_per_sm(spec, tiling, hardware, num_warps, layer_backward_config(spec, hardware))
    return L2Params.of(hardware, pps["_bwd_dkdv"])


def training_programs_per_sm(spec: LayerSpec, tiling: Tiling, hardware: Hardware, num_warps: int,
                             backward: Any, fwd_programs_per_sm: int | None = None) -> dict[str, int]:
    """Programs per SM of each kernel of the training step, from shared memory and warps (the forward's where given:
    its kernel's own, or counted with its compiled registers).

    :func:`iomodel.schedule.grid.estimate_programs_per_sm` per kernel: the forward with
    ``tiling.sram_bytes(spec)`` and ``num_warps`` (``fwd_programs_per_sm`` where given); ``_bwd_preprocess`` with no shared memory and
    :data:`~iomodel.schedule.grid.PREPROCESS_NUM_WARPS`; ``_bwd_dkdv`` and ``_bwd_dq`` with
    :func:`~iomodel.schedule.grid.dkdv_program_sram_bytes` /
    :func:`~iomodel.schedule.grid.dq_program_sram_bytes` and the launch's warps; with
    ``tiling.bwd_group_splits`` > 1 also ``_bwd_reduce_dkdv`` (no shared memory,
    :func:`~iomodel.schedule.grid.dkdv_reduce_num_warps`). The backward kernels' registers
    are ignored (the dK/dV kernel is register-limited to 2 programs per SM at d = 64 on the
    H200, one fewer than this estimate).

    Args:
        spec: the layer; tiling: forward and backward tiles; hardware: ``smem_per_sm`` (bytes);
        num_warps: the forward's warps per program;
        fwd_programs_per_sm: the forward's programs per SM where given (its kernel's own, the Gluon prefill's 1, or
            counted with its compiled registers), else None (estimated);
        backward: the backward launch (``kernels.heuristics.BackwardConfig``: ``num_warps``,
            ``num_stages``, ``dq_num_warps``, ``dq_num_stages``).

    Returns:
        ``{kernel name: programs per SM}`` for :func:`iomodel.cache.predict.training_kernels`.
    """
    smem = hardware.smem_per_sm
    return {
        "_attn_fwd": fwd_programs_per_sm or estimate_programs_per_sm(tiling.sram_bytes(spec), num_warps, smem),
        "_bwd_preprocess": estimate_programs_per_sm(0, PREPROCESS_NUM_WARPS, smem),
        "_bwd_dkdv": estimate_programs_per_sm(dkdv_program_sram_bytes(spec, tiling, backward.num_stages),
                                              backward.num_warps, smem),
        "_bwd_dq": estimate_programs_per_sm(dq_program_sram_bytes(spec, tiling, backward.dq_num_stages),
                                            backward.dq_num_warps, smem),
        **({REDUCE_DKDV_KERNEL: estimate_programs_per_sm(0, dkdv_reduce_num_warps(spec.head_dim), smem)}
           if tiling.bwd_group_splits > 1 else {}),
    }


def estimate_training_step(spec: LayerSpec, tiling: Tiling, hardware: Hardware, *, flops: int, peak_flops: float,
                           num_warps: int, tile_order: str, backward: Any, config_source: str,
                           grid_order: str = "tiles-fastest", fwd_programs_per_sm: int | None = None,
                           fwd_programs_per_sm_source: str = KERNEL_FIXED_PROGRAMS_SOURCE) -> L2Estimate:
    """The L2-aware DRAM estimate of the bundled training step (forward + three backward kernels).

    :func:`iomodel.cache.predict.predict_training_step` with programs per SM from
    :func:`training_programs_per_sm` and default :class:`~iomodel.cache.params.L2Params`
    otherwise (the forward's constants; every kernel starts with a cold L2, as Nsight Compute
    measures it). Roofline as :func:`estimate_tiled`, over the whole step.

    Args:
        spec: the layer (prefill, covered by :func:`not_estimated`).
        tiling: forward and backward tiles; hardware: L2 bytes, SMs, shared memory, bandwidth.
        flops, peak_flops: FLOPs of the step and peak FLOP/s.
        num_warps, tile_order: the forward launch.
        backward: the backward launch (``kernels.heuristics.BackwardConfig``).
        config_source: one sentence on where the launches come from.
        grid_order: the forward launch's grid order (``tiles-fastest`` or ``head-grouped:G``).
        fwd_programs_per_sm: the forward's programs per SM where its kernel fixes it or its compiled registers
            count them (``iomodel.report.worksheet.l2_launch``), else None (:func:`training_programs_per_sm`).
        fwd_programs_per_sm_source: where ``fwd_programs_per_sm`` comes from (one clause; default: the kernel's own,
            :data:`~iomodel.schedule.grid.KERNEL_FIXED_PROGRAMS_SOURCE`).

    Returns:
        :class:`L2Estimate` whose ``kernels`` lists the four kernels (bytes each).

    Raises:
        IomodelError: a layer :func:`not_estimated` refuses; hardware without L2 or SMs.
    """
    launch = None if grid_order == "tiles-fastest" else Schedule.for_tiling(tiling, tile_order=tile_order,
                                                                           grid_order=grid_order)
    why = not_estimated(spec, tiling, launch, hardware.l2_bytes, read_fraction_of(hardware))
    if why is not None:
        raise IomodelError(f"no L2-aware estimate for this layer: {why}")
    pps = training_programs_per_sm(spec, tiling, hardware, num_warps, backward, fwd_programs_per_sm)
    params = L2Params.of(hardware, pps["_attn_fwd"])
    l2 = predict_training_step(spec, tiling, params, pps, tile_order, grid_order)
    fwd = Schedule.for_tiling(tiling, num_warps=num_warps, tile_order=tile_order, grid_order=grid_order,
                              programs_per_sm=pps["_attn_fwd"])
    programs = step_programs(spec, tiling, {**fwd.to_dict(), "tensors": fwd.tensors(spec)})
    kernels = tuple({"name": k.name, "read_bytes": sum(k.hbm_read.values()), "write_bytes": sum(k.hbm_write.values()),
                     "written_bytes": sum(k.requested_write.values()), "programs_per_sm": pps[k.name],
                     "read_bytes_quality": l2.read_qualities.get(k.name, "predicted"),
                     "write_bytes_quality": l2.write_qualities.get(k.name, "predicted"),
                     "method": k.method, "program": programs[k.name]}
                    for k in l2.kernels)
    return L2Estimate.of(
        l2.hbm_read_bytes, l2.hbm_write_bytes, l2.no_reuse_write_bytes, flops=flops, peak_flops=peak_flops,
        hardware=hardware, dtype=spec.dtype, programs_per_sm=pps["_attn_fwd"],
        programs_per_sm_source="per kernel, estimated from shared memory per program and warps; registers ignored"
        + (" for the backward kernels" if fwd_programs_per_sm is not None else "")
        + (f"; the forward's is {fwd_programs_per_sm_source}" if fwd_programs_per_sm is not None else ""),
        num_warps=num_warps, tile_order=tile_order, config_source=config_source, assumptions=tuple(l2.assumptions),
        kernels=kernels, function="predict_training_step",
        read_bytes_quality=l2.read_quality, write_bytes_quality=l2.write_quality,
    )


#: Most sequences of a ragged batch the worksheet simulates: each sequence brings its own K/V, O and
#: LSE items, so the simulation's time grows with the sequence count even at few programs each.
#: Measured for the whole ``iomodel worksheet`` run on the 2-core development machine: 4,096
#: Llama-3-8B sequences of 128 tokens (131,072 programs): 9.9 s, 350 MB max RSS (the dense batch of
#: the same shape: 8.3 s); 131,072 one-token sequences of one head (within the program bound) took
#: 40 s, hence this bound.
RAGGED_ESTIMATE_MAX_SEQUENCES = 4096


def ragged_not_estimated(ragged: RaggedSpec, tiling: Tiling) -> str | None:
    """Why :func:`estimate_ragged` does not cover a ragged batch (one clause), or None when it does.

    Each sequence (its batch-1 prefill layer, ``RaggedSpec.sequence``) must be within the
    wave-by-wave simulation's bounds (:func:`simulation_bound`: the varlen launch is simulated, not
    evaluated fast), and the launch's simulated programs,
    ``Σ_b H·ceil(N_q_b / BLOCK_M)`` (programs past a sequence's end do nothing and are not
    simulated), at most :data:`L2_ESTIMATE_MAX_PROGRAMS`: the simulation visits every program,
    as for a dense layer; with a window band at most :data:`L2_SIMULATED_MAX_WORK` work units summed over the
    sequences (:func:`simulated_work`); and at most :data:`RAGGED_ESTIMATE_MAX_SEQUENCES` sequences. Evaluated
    per distinct ``(N_q, N_k)`` kind, so a batch of 10^6 sequences is refused at once. A
    sequence that uses no key (N_k = 0) has no batch-1 layer to simulate: the batch is not covered.

    Args:
        ragged: the ragged batch; tiling: the forward kernel's tiles (BLOCK_M sets T_r).

    Returns:
        The reason, one clause without a final period (naming the first sequence refused), or None.
    """
    if ragged.batch > RAGGED_ESTIMATE_MAX_SEQUENCES:
        return (f"{ragged.batch:,} sequences, above {RAGGED_ESTIMATE_MAX_SEQUENCES:,} (each sequence adds its own "
                "K/V and output items to the simulation: its cost grows with the sequence count)")
    keyless = ragged.keyless()
    if keyless:
        n = keyless[0]
        verb = "uses" if len(keyless) == 1 else "use"
        return (f"sequence {n} (N_q {ragged.seqlens[n][0]:,}, N_k 0) uses no key, and the simulation runs batch-1 "
                f"layers with keys ({len(keyless):,} of the {ragged.batch:,} sequences {verb} none; the no-reuse "
                "rows count them)")
    total = work = 0
    for (q, k), count in ragged.kinds():
        seq = ragged.sequence(q, k)
        why = simulation_bound(seq, tiling)  # the varlen launch is simulated wave by wave
        if why is not None:
            n = ragged.seqlens.index((q, k))
            return f"sequence {n} (N_q {q:,}, N_k {k:,}): {why}"
        total += count * simulated_programs(seq, tiling)
        if seq.band is not None:  # a window band is simulated block by block, as for a dense layer
            work += count * simulated_work(seq, tiling)
    if work > L2_SIMULATED_MAX_WORK:
        return (f"its window band is simulated block by block: {work:,} work units (program-key-block visits summed "
                f"over the sequences, simulated_work), above {L2_SIMULATED_MAX_WORK:,} (tens of seconds to minutes on "
                "a 2-core CPU; shorter sequences, a narrower window or fewer heads bring it under)")
    if total > L2_ESTIMATE_MAX_PROGRAMS:
        return (f"the launch runs {total:,} programs that do work (H·ceil(N_q / BLOCK_M) summed over the "
                f"{ragged.batch:,} sequences), above {L2_ESTIMATE_MAX_PROGRAMS:,} (the simulation visits every "
                "program: its cost grows with the tokens × heads)")
    return None


def estimate_ragged(ragged: RaggedSpec, tiling: Tiling, hardware: Hardware, *, flops: int,
                    peak_flops: float, num_warps: int, tile_order: str, config_source: str) -> L2Estimate:
    """The L2-aware DRAM estimate of one varlen launch over a ragged batch (forward prefill).

    :func:`iomodel.cache.predict.predict_ragged_launch` on ``ragged.sequences()``: the
    sequences' batch-1 waves in batch order through one cold L2 (validated on the H200 by
    receipts/ncu-h200-ragged2-2026-12-01.json). :class:`~iomodel.cache.params.L2Params` as
    :func:`launch_params` (programs per SM from the shared memory of one program and
    ``num_warps``; registers ignored; a program's shared memory depends on HEAD_DIM and dtype
    only, the same for every sequence). Roofline as :func:`estimate_tiled`.

    Args:
        ragged: the ragged batch (forward prefill), within :func:`ragged_not_estimated`'s bounds.
        tiling: the varlen kernel's tiles (BLOCK_M, BLOCK_N, num_stages).
        hardware: L2 bytes, SMs, shared memory per SM (bytes), HBM bandwidth (B/s).
        flops: FLOPs of the tiled kernel summed over the sequences; peak_flops: peak FLOP/s.
        num_warps, tile_order: the launch (warps per program; ``forward`` or ``reverse``).
        config_source: one sentence on where num_warps and tile_order come from.

    Returns:
        :class:`L2Estimate` (``function`` ``predict_ragged_launch``): DRAM read and written bytes,
        the stored bytes (O and LSE of every sequence) and those still dirty at launch end (bytes);
        ``read_bytes_quality`` from :func:`ragged_drift_label` (``not a prediction`` where a sequence's programs
        drift apart in the forward order), with its sentence naming that sequence among the assumptions.
        The int32 cu_seqlens reads are not in it.

    Raises:
        IomodelError: a batch :func:`ragged_not_estimated` refuses (one line); from
            :class:`~iomodel.cache.params.L2Params` (hardware without L2 or SMs).
    """
    why = ragged_not_estimated(ragged, tiling)
    if why is not None:
        raise IomodelError(f"no L2-aware estimate for this ragged batch: {why}")
    sequences = ragged.sequences()
    params = launch_params(sequences[0], tiling, hardware, num_warps)
    k = predict_ragged_launch(sequences, tiling, params, tile_order)
    assumptions = _common_assumptions(params) + [
        "One varlen launch, one L2: each sequence's waves are those of its batch-1 layer "
        "(iomodel.schedule.grid.prefill_waves), run in batch order with the L2 state (clean K/V, dirty O/LSE) "
        "carried from one sequence to the next; the last wave of one sequence and the first of the next run one "
        "after the other here, while on the GPU they overlap.",
        "The int32 cu_seqlens reads are not in these bytes (they are in the no-reuse HBM rows).",
    ]
    quality, sentence = ragged_drift_label(sequences, tiling, params, tile_order)
    if sentence is not None:
        assumptions.append(sentence)
    return L2Estimate.of(
        sum(k.hbm_read.values()), sum(k.hbm_write.values()), sum(k.requested_write.values()), flops=flops,
        peak_flops=peak_flops, hardware=hardware, dtype=ragged.layer.dtype, programs_per_sm=params.programs_per_sm,
        programs_per_sm_source="estimated from shared memory per program and warps; registers ignored",
        num_warps=num_warps, tile_order=tile_order, config_source=config_source, assumptions=tuple(assumptions),
        function="predict_ragged_launch", read_bytes_quality=quality,
    )


def ragged_drift_quality(sequences: Sequence[LayerSpec], tiling: Tiling, params: L2Params,
                         tile_order: str) -> tuple[str, int | None]:
    """How far a varlen launch's DRAM reads can be taken where the programs of one of its sequences drift apart
    (:func:`iomodel.cache.predict.forward_drift_quality` of each sequence's batch-1 layer: its ``H · ceil(N_q /
    BLOCK_M)`` programs run consecutively in the varlen grid, the query tile fastest, so a long causal sequence
    drifts as that layer does), and the index of the sequence that sets it (the first of the lowest quality; None
    where none drifts: then ``predicted``).

    Args: ``sequences`` the batch-1 prefill layers (``RaggedSpec.sequences()``); ``tiling`` the varlen kernel's tiles;
    ``params`` the launch's L2 parameters (resident programs; the forward's read capacity); ``tile_order`` the launch's.
    Returns ``(quality, index or None)``; raises nothing.
    """
    fwd = params.for_forward()
    worst, which = "predicted", None
    for i, seq in enumerate(sequences):
        q = forward_drift_quality(seq, tile_order, None, seq.batch * seq.heads * cdiv(seq.seqlen_q, tiling.block_m),
                                  fwd.resident_programs, fwd.read_capacity)
        if q is not None and READ_QUALITIES.index(q) > READ_QUALITIES.index(worst):
            worst, which = q, i
    return worst, which


def ragged_drift_label(sequences: Sequence[LayerSpec], tiling: Tiling, params: L2Params,
                       tile_order: str) -> tuple[str, str | None]:
    """:func:`ragged_drift_quality` with the assumption that says it (None where the launch is ``predicted``): the
    sequence that sets it (1-based, its query and key tokens) and
    :func:`iomodel.cache.predict.forward_drift_sentence` of its batch-1 layer. The one home of the sentence that
    :func:`estimate_ragged` and the reconciliation of a ragged record (``iomodel reconcile``) both show. Raises
    nothing."""
    quality, i = ragged_drift_quality(sequences, tiling, params, tile_order)
    if i is None:
        return quality, None
    seq = sequences[i]
    return quality, (f"Sequence {i + 1} of {len(sequences)} ({seq.seqlen_q:,} query and {seq.seqlen_k:,} key tokens): "
                     + forward_drift_sentence(seq, params.for_forward().read_capacity, quality))
