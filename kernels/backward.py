"""The bundled Triton FlashAttention backward kernels (FlashAttention-2, Dao 2023, Algorithm 2).

``flash_attention_backward(do, q, k, v, o, lse, causal, causal_align, sm_scale) -> (dq, dk, dv)``
with q, o, do ``(B, H, N_q, d)``, k, v ``(B, H_kv, N_k, d)`` and lse ``(B, H, N_q)`` fp32 (the
natural-log LSE the forward returned). Three launches (four with S > 1; with ``fused_launch`` two, D then
``_bwd_fused_tma``, or three with S > 1), each program's loads and stores fixed in
``docs/traffic-contract.md`` (the interpreter counts them against the traffic model):

1. ``_bwd_preprocess``, grid ``(cdiv(N_q, BLOCK_M), B*H)``: D = rowsum(dO ∘ O) ``(B, H, N_q)``
   fp32 (Algorithm 2, line 4).
2. ``_bwd_dkdv``, grid ``(cdiv(N_k, BLOCK_N), B*H_kv)``, K/V-stationary: a program keeps one
   K and one V tile ``(BLOCK_N, d)`` and loops over the G query heads of its GQA group and
   over the query tiles that see its keys (causal: from the first row whose diagonal reaches
   the tile), reading Q, dO, LSE and D of each; it recomputes P = exp(S − LSE) and
   accumulates dV += Pᵀ dO and dK += dSᵀ Q with dS = P ∘ (dP − D), dP = dO Vᵀ, in fp32
   (Algorithm 2, lines 6-21). GQA/MQA: dK and dV are summed over the group in registers;
   repeated K/V is never materialised. When that grid is too small for the GPU (MQA, large
   groups with few KV heads), ``BackwardConfig.group_splits`` S > 1 adds a third grid axis of
   S group slices (``heuristics.dkdv_group_splits``): each program sums its slice's query heads
   and writes fp32 partials, and ``_bwd_reduce_dkdv`` (grid ``(cdiv(N_k, 64), B*H_kv)``) sums
   the S partials in slice order (deterministic, no atomics) into dK, dV. On sm_90 at HEAD_DIM 128 (fp16/bf16,
   TMA-aligned, no window) this launch is the Gluon kernel of ``kernels/gluon_backward.py``
   (``BackwardConfig.dkdv_kernel``): the same grid, loop orders and bytes in its own tiles (64 x 128).
3. ``_bwd_dq``, grid ``(cdiv(N_q, BLOCK_M), B*H)``, Q-stationary: a program keeps Q, dO,
   LSE and D of one query tile and reads the K and V tiles its rows see (the forward's key
   range), accumulating dQ += dS K. A separate kernel, not fp32 atomics in kernel 2: it is
   deterministic and writes dQ once in the input dtype; the traffic model counts this
   schedule.

Rows that see no key (LSE = −inf) give dq = 0 and keys no query sees give dk = dv = 0,
never NaN. fp16/bf16 round P and dS to the input dtype for their dots and accumulate in
fp32, as FlashAttention does; fp32 inputs use exact ``ieee`` dots.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import torch
import triton
import triton.language as tl

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import TMA_SM_MAJOR, kernel_refusal, sm90_refusal, tma_refusal
from iomodel.schedule.grid import DKDV_REDUCE_BLOCK_N, PREPROCESS_NUM_WARPS, dkdv_reduce_num_warps
from iomodel.schedule.tiles import head_dim_padded
from iomodel.spec.layer import causal_offset
from kernels._inputs import check_causal, check_inputs, window_argument
from kernels.heuristics import BackwardConfig, backward_config
from kernels.flash_attention import (INTERPRET, _aligned, _alloc, _band_args, _band_bounds,
                                     _boxes, _cached_plan, _causal_bounds, _check_device, _dot, _dot_precision, _emulate_bf16,
                                     _head_of, _l2_bytes, _Launch, _num_sms, _positional, _tma_ok, _to_dtype)

__all__ = ["FlashAttentionFunction", "flash_attention_backward"]


# ====================================================================================
# Device code
# ====================================================================================
@triton.jit
def _tile(BASE, b, h, stride_z, stride_h, stride_r, stride_d, offs_r, offs_d):
    """Pointers ``(len(offs_r), len(offs_d))`` to rows ``offs_r``, columns ``offs_d`` of head
    ``h`` of sequence ``b`` of a ``(B, heads, N, HEAD_DIM)`` tensor with the given strides."""
    return (BASE + b.to(tl.int64) * stride_z + h.to(tl.int64) * stride_h
            + offs_r[:, None] * stride_r + offs_d[None, :] * stride_d)


@triton.jit
def _rows(start, BLOCK: tl.constexpr, N, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr):
    """Rows ``start .. start + BLOCK`` of a tile: their indices, the column indices, the column
    mask (d < HEAD_DIM) and the 2-D load mask (row < N and d < HEAD_DIM)."""
    offs = start + tl.arange(0, BLOCK)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_ok = offs_d < HEAD_DIM
    return offs, offs_d, d_ok, (offs < N)[:, None] & d_ok[None, :]


@triton.jit
def _bwd_preprocess(O, DO, DELTA,
                    stride_oz, stride_oh, stride_om, stride_od,
                    stride_dz, stride_dh, stride_dm, stride_dd,
                    H, N_Q, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, BLOCK_M: tl.constexpr):
    """D[m] = sum_d O[m, d] * dO[m, d] in fp32 for one query tile of one head."""
    i = tl.program_id(0)
    bh = tl.program_id(1)
    b, h, _ = _head_of(bh, H, 1)
    offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    ok = (offs_m < N_Q)[:, None] & (offs_d < HEAD_DIM)[None, :]
    o = tl.load(_tile(O, b, h, stride_oz, stride_oh, stride_om, stride_od, offs_m, offs_d), mask=ok, other=0.0)
    do = tl.load(_tile(DO, b, h, stride_dz, stride_dh, stride_dm, stride_dd, offs_m, offs_d), mask=ok, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)  # (BLOCK_M,)
    tl.store(DELTA + bh.to(tl.int64) * N_Q + offs_m, delta, mask=offs_m < N_Q)


@triton.jit
def _lse2(LSE_ROW, offs_m, N_Q):
    """LSE of rows ``offs_m`` in log2 units; rows beyond N_Q or that saw no key (LSE = -inf)
    get +inf, so that P = exp2(S - LSE) = 0 there (no NaN, no contribution)."""
    lse = tl.load(LSE_ROW + offs_m, mask=offs_m < N_Q, other=float("inf"))
    lse = tl.where(lse == float("-inf"), float("inf"), lse)
    return lse * 1.4426950408889634


@triton.jit
def _dkdv_math(dk, dv, k, v, q, do, lse2, delta, offs_m, offs_n, qk_scale, CAUSAL_OFF,
               MASKED: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
               WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """The arithmetic of one (key tile, query tile) pair of the dK/dV kernel, on loaded tiles
    (Algorithm 2, lines 11-20, transposed: rows of the score tile are keys): returns dK, dV
    updated and dSᵀ ``(BLOCK_N, BLOCK_M)`` in the input dtype. MASKED: the causal bound
    n <= m + CAUSAL_OFF (WINDOW: the band m + CAUSAL_OFF − WIN_L <= n <= m + CAUSAL_OFF + WIN_R)."""
    s_t = _dot(k, tl.trans(q), None, DOT_PRECISION, EMULATE_BF16)  # (BLOCK_N, BLOCK_M) = (Q K^T)^T, fp32
    p_t = tl.math.exp2(s_t * qk_scale - lse2[None, :])
    if MASKED:
        if WINDOW:
            rel = offs_n[:, None] - (offs_m[None, :] + CAUSAL_OFF)  # key minus the row's aligned diagonal
            p_t = tl.where((rel <= WIN_R) & (rel >= -WIN_L), p_t, 0.0)
        else:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :] + CAUSAL_OFF, p_t, 0.0)
    dv = _dot(_to_dtype(p_t, do.dtype, EMULATE_BF16), do, dv, DOT_PRECISION, EMULATE_BF16)  # dV += P^T dO
    dp_t = _dot(v, tl.trans(do), None, DOT_PRECISION, EMULATE_BF16)  # (dO V^T)^T
    ds_t = p_t * (dp_t - delta[None, :])
    ds_t = _to_dtype(ds_t, q.dtype, EMULATE_BF16)
    dk = _dot(ds_t, q, dk, DOT_PRECISION, EMULATE_BF16)  # dK += dS^T Q
    return dk, dv, ds_t


@triton.jit
def _dkdv_step(dk, dv, k, v, q_base, do_base, LSE_ROW, D_ROW, DQ_ROW, start_m, offs_m0, offs_n, offs_d, d_ok,
               stride_qm, stride_qd, stride_dom, stride_dod, qk_scale, sm_scale, N_Q, CAUSAL_OFF, HEAD_DIM,
               MASKED: tl.constexpr, ATOMIC_DQ: tl.constexpr, DOT_PRECISION: tl.constexpr,
               EMULATE_BF16: tl.constexpr, WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """One query tile against the program's K/V tile (Algorithm 2, lines 8-20): loads Q, dO,
    LSE and D of rows ``start_m + offs_m0``, then :func:`_dkdv_math`. ATOMIC_DQ: also add this
    tile's dQ = scale * dS K into the fp32 rows at DQ_ROW."""
    offs_m = start_m + offs_m0
    row_ok = (offs_m < N_Q)[:, None] & d_ok[None, :]
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, mask=row_ok, other=0.0)
    do = tl.load(do_base + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod, mask=row_ok, other=0.0)
    lse2 = _lse2(LSE_ROW, offs_m, N_Q)
    delta = tl.load(D_ROW + offs_m, mask=offs_m < N_Q, other=0.0)
    dk, dv, ds_t = _dkdv_math(dk, dv, k, v, q, do, lse2, delta, offs_m, offs_n, qk_scale, CAUSAL_OFF, MASKED,
                              DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)
    if ATOMIC_DQ:
        dq = _dot(tl.trans(ds_t), k, None, DOT_PRECISION, EMULATE_BF16) * sm_scale  # (BLOCK_M, D) fp32
        tl.atomic_add(DQ_ROW + offs_m[:, None] * HEAD_DIM + offs_d[None, :], dq, mask=row_ok, sem="relaxed")
    return dk, dv


@triton.jit
def _tma_dkdv_step(dk, dv, k, v, desc_q, desc_do, b, h, LSE_ROW, D_ROW, start_m, offs_m0, offs_n, qk_scale, N_Q,
                   CAUSAL_OFF, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                   EMULATE_BF16: tl.constexpr):
    """:func:`_dkdv_step` with Q and dO through tensor descriptors (TMA zero-fills rows >= N_Q:
    the rows the pointer path's masks load)."""
    start_m = tl.multiple_of(start_m, BLOCK_M)
    offs_m = start_m + offs_m0
    q = desc_q.load([b, h, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    do = desc_do.load([b, h, start_m, 0]).reshape(BLOCK_M, HEAD_DIM)
    lse2 = _lse2(LSE_ROW, offs_m, N_Q)
    delta = tl.load(D_ROW + offs_m, mask=offs_m < N_Q, other=0.0)
    dk, dv, _ = _dkdv_math(dk, dv, k, v, q, do, lse2, delta, offs_m, offs_n, qk_scale, CAUSAL_OFF, MASKED,
                           "tf32", EMULATE_BF16)
    return dk, dv


@triton.jit
def _first_query_tile(start_n, CAUSAL_OFF, N_Q, BLOCK_M: tl.constexpr):
    """Causal dK/dV: the start of the query tile holding the first row that sees key start_n
    (rows m >= start_n − CAUSAL_OFF), at most N_Q (traffic contract, lo_j)."""
    lo = tl.maximum(start_n - CAUSAL_OFF, 0)
    return tl.minimum((lo // BLOCK_M) * BLOCK_M, N_Q)


@triton.jit
def _first_pair(lo, hi, g0, BLOCK_M: tl.constexpr, DESCEND: tl.constexpr):
    """The GQA dK/dV loop's first (query tile, group head): tile lo of head g0 (heads-outer), or
    the last tile of [lo, hi) of head g0 (DESCEND: ``tiles-descending``, Tiling.bwd_dkdv_order)."""
    if DESCEND:
        return lo + tl.maximum(hi - lo - 1, 0) // BLOCK_M * BLOCK_M, g0
    else:
        return lo, g0


@triton.jit
def _next_pair(start_m, g, lo, hi, g0, g1, BLOCK_M: tl.constexpr, DESCEND: tl.constexpr):
    """The GQA dK/dV loop's next (query tile, group head), no division per step. Heads-outer: the
    next tile of head g, or the first tile lo of head g + 1 once start_m reaches hi. DESCEND
    (tiles-descending): the next head of the slice [g0, g1) at the same tile, or head g0 of the
    tile below once g reaches g1 (FlashAttention-2's reverse m_block loop, heads inner)."""
    if DESCEND:
        g += 1
        wrap = g >= g1
        return tl.where(wrap, start_m - BLOCK_M, start_m), tl.where(wrap, g0, g)
    else:
        start_m += BLOCK_M
        wrap = start_m >= hi
        return tl.where(wrap, lo, start_m), g + wrap.to(tl.int32)


@triton.jit
def _store_dkdv(DK, DV, dk, dv, b, hk, sl, SPLITS, stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d, kv_ok,
                SPLIT: tl.constexpr, EMULATE_BF16: tl.constexpr):
    """Store one key tile's dK (already scaled) and dV, masked by ``kv_ok``: SPLIT, the fp32
    partials of group slice sl as head ``hk*SPLITS + sl`` of the workspace (summed by
    ``_bwd_reduce_dkdv``, no rounding here); else dK, dV of KV head hk in the output dtype."""
    if SPLIT:
        hs = hk * SPLITS + sl
        tl.store(_tile(DK, b, hs, stride_dkz, stride_dkh, stride_dkn, stride_dkd, offs_n, offs_d), dk, mask=kv_ok)
        tl.store(_tile(DV, b, hs, stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d), dv, mask=kv_ok)
    else:
        tl.store(_tile(DK, b, hk, stride_dkz, stride_dkh, stride_dkn, stride_dkd, offs_n, offs_d),
                 _to_dtype(dk, DK.dtype.element_ty, EMULATE_BF16), mask=kv_ok)
        tl.store(_tile(DV, b, hk, stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d),
                 _to_dtype(dv, DV.dtype.element_ty, EMULATE_BF16), mask=kv_ok)


@triton.jit
def _bwd_dkdv(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, DQ_ACC,
              stride_qz, stride_qh, stride_qm, stride_qd, stride_kz, stride_kh, stride_kn, stride_kd,
              stride_vz, stride_vh, stride_vn, stride_vd, stride_doz, stride_doh, stride_dom, stride_dod,
              stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh, stride_dvn, stride_dvd,
              H, H_KV, G, N_Q, N_K, CAUSAL_OFF, WIN_L, WIN_R,
              HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, ATOMIC_DQ: tl.constexpr, DOT_PRECISION: tl.constexpr,
              EMULATE_BF16: tl.constexpr, GQA: tl.constexpr, WINDOW: tl.constexpr = False,
              SPLIT: tl.constexpr = False, SPLITS=1, DESCEND: tl.constexpr = False):
    """dK, dV of one key tile of one KV head, summed over the G query heads of its group
    (GQA = G > 1: a compile-time switch, so that only one of the two loops is compiled).
    Grid (cdiv(N_K, BLOCK_N), B*H_KV) or, SPLIT, (cdiv(N_K, BLOCK_N), B*H_KV, SPLITS): program
    (j, b*H_KV + hk, sl) sums the query heads g in [sl*G // SPLITS, (sl+1)*G // SPLITS) only and
    stores its fp32 partials as head hk*SPLITS + sl of DK, DV ``(B, H_KV*SPLITS, N_K, HEAD_DIM)``
    (the workspace ``_bwd_reduce_dkdv`` sums). ATOMIC_DQ: dQ accumulates by fp32 atomics into
    DQ_ACC ``(B, H, N_Q, HEAD_DIM)`` (contiguous) instead of in ``_bwd_dq``. WINDOW: only the
    query tiles in [lo, hi_m) that can see the key tile are visited (traffic contract), all masked.
    DESCEND (GQA): the (query tile, head) pairs in the ``tiles-descending`` order (:func:`_next_pair`)."""
    j = tl.program_id(0)
    b, hk, _ = _head_of(tl.program_id(1), H_KV, 1)
    if SPLIT:  # this program's slice of the group: balanced, never empty (1 <= SPLITS <= G)
        sl = tl.program_id(2)
        g0 = sl * G // SPLITS
        g1 = (sl + 1) * G // SPLITS
    else:
        sl = 0
        g0 = 0
        g1 = G
    start_n = j * BLOCK_N
    offs_n, offs_d, d_ok, kv_ok = _rows(start_n, BLOCK_N, N_K, HEAD_DIM, HEAD_DIM_PAD)
    offs_m0 = tl.arange(0, BLOCK_M)
    k = tl.load(_tile(K, b, hk, stride_kz, stride_kh, stride_kn, stride_kd, offs_n, offs_d), mask=kv_ok, other=0.0)
    v = tl.load(_tile(V, b, hk, stride_vz, stride_vh, stride_vn, stride_vd, offs_n, offs_d), mask=kv_ok, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_DIM_PAD], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM_PAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634

    # query tiles [lo, hi) that see a key of this tile: rows m >= start_n - CAUSAL_OFF (causal)
    if WINDOW:
        # rows m that see a key of [start_n, start_n + BLOCK_N): start_n − off − WIN_R <= m and
        # m < start_n + BLOCK_N − off + WIN_L
        lo = tl.maximum(start_n - CAUSAL_OFF - WIN_R, 0)
        lo = tl.minimum((lo // BLOCK_M) * BLOCK_M, N_Q)
        hi = tl.maximum(tl.minimum(tl.maximum(start_n + BLOCK_N - CAUSAL_OFF + WIN_L, 0), N_Q), lo)
    elif CAUSAL:
        lo = _first_query_tile(start_n, CAUSAL_OFF, N_Q, BLOCK_M)
        hi = N_Q
    else:
        lo = 0
        hi = N_Q
    # One loop and one copy of the step: MHA over the query tiles, GQA over (group head, query
    # tile) pairs. Nested loops (the group's heads around a masked and an unmasked query loop)
    # spilled registers on sm_90 (536 B per thread at HEAD_DIM 128 causal GQA, stored once per
    # program plus 16 B per head: the hold-out's extra dK/dV L2 writes; kernels/compile_check.py).
    # Causal/window: every tile takes the mask, all-true below the diagonal (same loads, values).
    if not GQA:  # MHA: the query tiles of head hk
        q_base = Q + b.to(tl.int64) * stride_qz + hk.to(tl.int64) * stride_qh
        do_base = DO + b.to(tl.int64) * stride_doz + hk.to(tl.int64) * stride_doh
        row = (b * H + hk).to(tl.int64) * N_Q
        for start_m in tl.range(lo, hi, BLOCK_M):
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row, DELTA + row, DQ_ACC + row * HEAD_DIM,
                                start_m, offs_m0, offs_n, offs_d, d_ok, stride_qm, stride_qd, stride_dom, stride_dod,
                                qk_scale, sm_scale, N_Q, CAUSAL_OFF, HEAD_DIM, CAUSAL or WINDOW, ATOMIC_DQ,
                                DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)
    else:
        start_m, g = _first_pair(lo, hi, g0, BLOCK_M, DESCEND)
        for _ in tl.range(0, (g1 - g0) * ((hi - lo + BLOCK_M - 1) // BLOCK_M)):  # the slice's heads x query tiles
            h = hk * G + g
            q_base = Q + b.to(tl.int64) * stride_qz + h.to(tl.int64) * stride_qh
            do_base = DO + b.to(tl.int64) * stride_doz + h.to(tl.int64) * stride_doh
            row = (b * H + h).to(tl.int64) * N_Q
            dk, dv = _dkdv_step(dk, dv, k, v, q_base, do_base, LSE + row, DELTA + row, DQ_ACC + row * HEAD_DIM,
                                start_m, offs_m0, offs_n, offs_d, d_ok, stride_qm, stride_qd, stride_dom, stride_dod,
                                qk_scale, sm_scale, N_Q, CAUSAL_OFF, HEAD_DIM, CAUSAL or WINDOW, ATOMIC_DQ,
                                DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)
            start_m, g = _next_pair(start_m, g, lo, hi, g0, g1, BLOCK_M, DESCEND)
    _store_dkdv(DK, DV, dk * sm_scale, dv, b, hk, sl, SPLITS, stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d, kv_ok, SPLIT, EMULATE_BF16)


@triton.jit
def _bwd_reduce_dkdv(DK, DV, DK_OUT, DV_OUT, SPLITS, N_K,
                     stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                     stride_oz, stride_oh, stride_on, stride_od, stride_wz, stride_wh, stride_wn, stride_wd,
                     H_KV, HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, BLOCK_N: tl.constexpr,
                     EMULATE_BF16: tl.constexpr):
    """dK, dV = the sum of the SPLITS fp32 partials of one key tile of one KV head, in slice
    order (deterministic: no atomics), stored in the output dtype. DK, DV: the workspace
    ``(B, H_KV*SPLITS, N_K, HEAD_DIM)`` fp32 of ``_bwd_dkdv`` (head hk*SPLITS + sl holds slice sl);
    DK_OUT, DV_OUT ``(B, H_KV, N_K, HEAD_DIM)``. Grid (cdiv(N_K, BLOCK_N), B*H_KV)."""
    j = tl.program_id(0)
    b, hk, _ = _head_of(tl.program_id(1), H_KV, 1)
    offs_n, offs_d, d_ok, kv_ok = _rows(j * BLOCK_N, BLOCK_N, N_K, HEAD_DIM, HEAD_DIM_PAD)
    dk = tl.zeros([BLOCK_N, HEAD_DIM_PAD], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM_PAD], dtype=tl.float32)
    for sl in tl.range(0, SPLITS):
        hs = hk * SPLITS + sl
        dk += tl.load(_tile(DK, b, hs, stride_dkz, stride_dkh, stride_dkn, stride_dkd, offs_n, offs_d),
                      mask=kv_ok, other=0.0)
        dv += tl.load(_tile(DV, b, hs, stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d),
                      mask=kv_ok, other=0.0)
    tl.store(_tile(DK_OUT, b, hk, stride_oz, stride_oh, stride_on, stride_od, offs_n, offs_d),
             _to_dtype(dk, DK_OUT.dtype.element_ty, EMULATE_BF16), mask=kv_ok)
    tl.store(_tile(DV_OUT, b, hk, stride_wz, stride_wh, stride_wn, stride_wd, offs_n, offs_d),
             _to_dtype(dv, DV_OUT.dtype.element_ty, EMULATE_BF16), mask=kv_ok)


@triton.jit
def _dq_math(dq, q, do, k, v, lse2, delta, offs_m, offs_n, qk_scale, CAUSAL_OFF,
             MASKED: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
             WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """dQ += dS K for one loaded key tile (Algorithm 2, line 19); MASKED: the causal bound (WINDOW: the band)."""
    s = _dot(q, tl.trans(k), None, DOT_PRECISION, EMULATE_BF16)  # (BLOCK_M, BLOCK_N) fp32
    p = tl.math.exp2(s * qk_scale - lse2[:, None])
    if MASKED:
        if WINDOW:
            rel = offs_n[None, :] - (offs_m[:, None] + CAUSAL_OFF)  # key minus the row's aligned diagonal
            p = tl.where((rel <= WIN_R) & (rel >= -WIN_L), p, 0.0)
        else:
            p = tl.where(offs_n[None, :] <= offs_m[:, None] + CAUSAL_OFF, p, 0.0)
    dp = _dot(do, tl.trans(v), None, DOT_PRECISION, EMULATE_BF16)
    ds = p * (dp - delta[:, None])
    return _dot(_to_dtype(ds, k.dtype, EMULATE_BF16), k, dq, DOT_PRECISION, EMULATE_BF16)


@triton.jit
def _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, offs_m, offs_n0, offs_d, d_ok,
             stride_kn, stride_kd, stride_vn, stride_vd, qk_scale, N_K, CAUSAL_OFF,
             MASKED: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
             WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """One key tile against the program's query tile: loads K, V of keys ``start_n + offs_n0``
    (keys beyond N_K load as zeros, so they add nothing to dQ), then :func:`_dq_math`."""
    offs_n = start_n + offs_n0
    kv_ok = (offs_n < N_K)[:, None] & d_ok[None, :]
    k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=kv_ok, other=0.0)
    v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_ok, other=0.0)
    return _dq_math(dq, q, do, k, v, lse2, delta, offs_m, offs_n, qk_scale, CAUSAL_OFF, MASKED, DOT_PRECISION,
                    EMULATE_BF16, WIN_L, WIN_R, WINDOW)


@triton.jit
def _tma_dq_step(dq, q, do, lse2, delta, desc_k, desc_v, b, hk, start_n, offs_m, offs_n0, qk_scale, CAUSAL_OFF,
                 HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, EMULATE_BF16: tl.constexpr):
    """:func:`_dq_step` with K and V through tensor descriptors (TMA zero-fills keys >= N_K)."""
    start_n = tl.multiple_of(start_n, BLOCK_N)
    k = desc_k.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    v = desc_v.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    return _dq_math(dq, q, do, k, v, lse2, delta, offs_m, start_n + offs_n0, qk_scale, CAUSAL_OFF, MASKED, "tf32",
                    EMULATE_BF16)


@triton.jit
def _dq_tile(pid, T_R, REVERSE: tl.constexpr):
    """Query tile of dQ program ``pid`` of a head of T_R tiles: ``pid``, or T_R − 1 − pid in the reverse
    order (``BackwardConfig.dq_tile_order``; the forward's ``tile_order`` ``reverse``)."""
    if REVERSE:
        return T_R - 1 - pid
    return pid


@triton.jit
def _bwd_dq(Q, K, V, DO, LSE, DELTA, DQ, sm_scale,
            stride_qz, stride_qh, stride_qm, stride_qd, stride_kz, stride_kh, stride_kn, stride_kd,
            stride_vz, stride_vh, stride_vn, stride_vd, stride_doz, stride_doh, stride_dom, stride_dod,
            stride_dqz, stride_dqh, stride_dqm, stride_dqd,
            H, G, N_Q, N_K, CAUSAL_OFF, WIN_L, WIN_R,
            HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
            WINDOW: tl.constexpr = False, REVERSE: tl.constexpr = False):
    """dQ of one query tile of one head. Grid (cdiv(N_Q, BLOCK_M), B*H); key range as the
    forward's (causal: up to the diagonal, unmasked below ``full_end``; WINDOW: the forward's
    band bounds, ``_band_bounds``, every block masked). REVERSE (``BackwardConfig.dq_tile_order``
    ``reverse``): program 0 of a head takes its last query tile, the one with the most keys."""
    i = _dq_tile(tl.program_id(0), tl.num_programs(0), REVERSE)
    bh = tl.program_id(1)
    b, h, hk = _head_of(bh, H, G)
    offs_m, offs_d, d_ok, row_ok = _rows(i * BLOCK_M, BLOCK_M, N_Q, HEAD_DIM, HEAD_DIM_PAD)
    offs_n0 = tl.arange(0, BLOCK_N)
    q = tl.load(_tile(Q, b, h, stride_qz, stride_qh, stride_qm, stride_qd, offs_m, offs_d), mask=row_ok, other=0.0)
    do = tl.load(_tile(DO, b, h, stride_doz, stride_doh, stride_dom, stride_dod, offs_m, offs_d), mask=row_ok, other=0.0)
    row = bh.to(tl.int64) * N_Q
    lse2 = _lse2(LSE + row, offs_m, N_Q)
    delta = tl.load(DELTA + row + offs_m, mask=offs_m < N_Q, other=0.0)
    k_base = K + b.to(tl.int64) * stride_kz + hk.to(tl.int64) * stride_kh
    v_base = V + b.to(tl.int64) * stride_vz + hk.to(tl.int64) * stride_vh
    dq = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if WINDOW:  # the band's blocks [lo, hi), all masked (one loop: fewer registers on sm_90)
        lo, _, _, hi = _band_bounds(i * BLOCK_M, tl.minimum((i + 1) * BLOCK_M, N_Q), (i + 1) * BLOCK_M - 1, N_K,
                                    CAUSAL_OFF, WIN_L, WIN_R, BLOCK_N)
        full_end = lo
    elif CAUSAL:  # the forward's key range (traffic contract)
        full_end, hi = _causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M, BLOCK_N, True)
    else:  # every block unmasked: keys beyond N_K load as zeros and add nothing to dQ
        hi = N_K
        full_end = N_K
    if not WINDOW:
        for start_n in tl.range(0, full_end, BLOCK_N):
            dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, offs_m, offs_n0, offs_d, d_ok,
                          stride_kn, stride_kd, stride_vn, stride_vd, qk_scale, N_K, CAUSAL_OFF,
                          False, DOT_PRECISION, EMULATE_BF16)
    for start_n in tl.range(full_end, hi, BLOCK_N):
        dq = _dq_step(dq, q, do, lse2, delta, k_base, v_base, start_n, offs_m, offs_n0, offs_d, d_ok,
                      stride_kn, stride_kd, stride_vn, stride_vd, qk_scale, N_K, CAUSAL_OFF,
                      CAUSAL or WINDOW, DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)
    dq = dq * sm_scale
    tl.store(_tile(DQ, b, h, stride_dqz, stride_dqh, stride_dqm, stride_dqd, offs_m, offs_d),
             _to_dtype(dq, DQ.dtype.element_ty, EMULATE_BF16), mask=row_ok)


@triton.jit
def _dkdv_tma_program(j, b, hk, sl, desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DK, DV, sm_scale,
                      stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                      H, G, N_Q, N_K, CAUSAL_OFF, SPLITS,
                      HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                      EMULATE_BF16: tl.constexpr, GQA: tl.constexpr, SPLIT: tl.constexpr,
                      MASK_SPLIT: tl.constexpr, STAGES: tl.constexpr, DESCEND: tl.constexpr):
    """One program of the TMA dK/dV kernel: key tile j of KV head hk of sequence b, group slice sl
    (DESCEND, GQA: the tiles-descending pair order, :func:`_next_pair`)."""
    if SPLIT:
        g0 = sl * G // SPLITS
        g1 = (sl + 1) * G // SPLITS
    else:
        g0 = 0
        g1 = G
    start_n = j * BLOCK_N
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_m0 = tl.arange(0, BLOCK_M)
    k = desc_k.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    v = desc_v.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        lo = _first_query_tile(start_n, CAUSAL_OFF, N_Q, BLOCK_M)
    else:
        lo = 0
    hi = N_Q
    if not GQA:
        row = (b * H + hk).to(tl.int64) * N_Q
        if MASK_SPLIT and CAUSAL:
            # query tiles from full_lo on see every key of the tile: m0 + CAUSAL_OFF >= start_n + BLOCK_N - 1
            full_lo = tl.maximum(start_n + BLOCK_N - 1 - CAUSAL_OFF, 0)
            full_lo = tl.minimum(tl.maximum((full_lo + BLOCK_M - 1) // BLOCK_M * BLOCK_M, lo), hi)
            for start_m in tl.range(lo, full_lo, BLOCK_M, num_stages=STAGES):
                dk, dv = _tma_dkdv_step(dk, dv, k, v, desc_q, desc_do, b, hk, LSE + row, DELTA + row, start_m,
                                        offs_m0, offs_n, qk_scale, N_Q, CAUSAL_OFF, HEAD_DIM, BLOCK_M, True,
                                        EMULATE_BF16)
            for start_m in tl.range(full_lo, hi, BLOCK_M, num_stages=STAGES):
                dk, dv = _tma_dkdv_step(dk, dv, k, v, desc_q, desc_do, b, hk, LSE + row, DELTA + row, start_m,
                                        offs_m0, offs_n, qk_scale, N_Q, CAUSAL_OFF, HEAD_DIM, BLOCK_M, False,
                                        EMULATE_BF16)
        else:
            for start_m in tl.range(lo, hi, BLOCK_M, num_stages=STAGES):
                dk, dv = _tma_dkdv_step(dk, dv, k, v, desc_q, desc_do, b, hk, LSE + row, DELTA + row, start_m,
                                        offs_m0, offs_n, qk_scale, N_Q, CAUSAL_OFF, HEAD_DIM, BLOCK_M, CAUSAL,
                                        EMULATE_BF16)
    else:
        start_m, g = _first_pair(lo, hi, g0, BLOCK_M, DESCEND)
        for _ in tl.range(0, (g1 - g0) * ((hi - lo + BLOCK_M - 1) // BLOCK_M), num_stages=STAGES):
            h = hk * G + g
            row = (b * H + h).to(tl.int64) * N_Q
            dk, dv = _tma_dkdv_step(dk, dv, k, v, desc_q, desc_do, b, h, LSE + row, DELTA + row, start_m,
                                    offs_m0, offs_n, qk_scale, N_Q, CAUSAL_OFF, HEAD_DIM, BLOCK_M, CAUSAL,
                                    EMULATE_BF16)
            start_m, g = _next_pair(start_m, g, lo, hi, g0, g1, BLOCK_M, DESCEND)
    _store_dkdv(DK, DV, dk * sm_scale, dv, b, hk, sl, SPLITS, stride_dkz, stride_dkh, stride_dkn, stride_dkd,
                stride_dvz, stride_dvh, stride_dvn, stride_dvd, offs_n, offs_d, (offs_n < N_K)[:, None], SPLIT,
                EMULATE_BF16)


@triton.jit
def _dq_tma_program(i, bh, desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DQ, sm_scale,
                    stride_dqz, stride_dqh, stride_dqm, stride_dqd, H, G, N_Q, N_K, CAUSAL_OFF,
                    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                    EMULATE_BF16: tl.constexpr, STAGES: tl.constexpr):
    """One program of the TMA dQ kernel: query tile i of query head bh (``b*H + h``)."""
    b, h, hk = _head_of(bh, H, G)
    offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    offs_n0 = tl.arange(0, BLOCK_N)
    q = desc_q.load([b, h, i * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    do = desc_do.load([b, h, i * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    row = bh.to(tl.int64) * N_Q
    lse2 = _lse2(LSE + row, offs_m, N_Q)
    delta = tl.load(DELTA + row + offs_m, mask=offs_m < N_Q, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:  # the forward's key range (traffic contract)
        full_end, hi = _causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M, BLOCK_N, True)
    else:  # every block unmasked: keys beyond N_K are zero-filled and add nothing to dQ
        hi = N_K
        full_end = N_K
    for start_n in tl.range(0, full_end, BLOCK_N, num_stages=STAGES):
        dq = _tma_dq_step(dq, q, do, lse2, delta, desc_k, desc_v, b, hk, start_n, offs_m, offs_n0, qk_scale,
                          CAUSAL_OFF, HEAD_DIM, BLOCK_N, False, EMULATE_BF16)
    for start_n in tl.range(full_end, hi, BLOCK_N, num_stages=STAGES):
        dq = _tma_dq_step(dq, q, do, lse2, delta, desc_k, desc_v, b, hk, start_n, offs_m, offs_n0, qk_scale,
                          CAUSAL_OFF, HEAD_DIM, BLOCK_N, CAUSAL, EMULATE_BF16)
    dq = dq * sm_scale
    tl.store(_tile(DQ, b, h, stride_dqz, stride_dqh, stride_dqm, stride_dqd, offs_m, offs_d),
             _to_dtype(dq, DQ.dtype.element_ty, EMULATE_BF16), mask=(offs_m < N_Q)[:, None])


@triton.jit
def _bwd_dkdv_tma(desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DK, DV, sm_scale,
                  stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh, stride_dvn, stride_dvd,
                  H, H_KV, G, N_Q, N_K, CAUSAL_OFF,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, EMULATE_BF16: tl.constexpr, GQA: tl.constexpr,
                  SPLIT: tl.constexpr = False, SPLITS=1, MASK_SPLIT: tl.constexpr = False,
                  STAGES: tl.constexpr = 3, DESCEND: tl.constexpr = False):
    """``_bwd_dkdv`` (same grid, tiles, loop order, loads and stores) with K, V, Q and dO
    through rank-4 tensor descriptors (TMA, sm_90; boxes [1, 1, BLOCK, HEAD_DIM], rows beyond
    each head's sequence zero-filled, so the same rows move as the pointer path's masks load).
    MASK_SPLIT (MHA, causal): the query tiles that cross the key tile's diagonal take the mask,
    the rest run unmasked (the same tiles in the same order; no sliding window here)."""
    b, hk, _ = _head_of(tl.program_id(1), H_KV, 1)
    _dkdv_tma_program(tl.program_id(0), b, hk, tl.program_id(2), desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DK,
                      DV, sm_scale, stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh,
                      stride_dvn, stride_dvd, H, G, N_Q, N_K, CAUSAL_OFF, SPLITS, HEAD_DIM, BLOCK_M, BLOCK_N,
                      CAUSAL, EMULATE_BF16, GQA, SPLIT, MASK_SPLIT, STAGES, DESCEND)


@triton.jit
def _bwd_dq_tma(desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DQ, sm_scale,
                stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                H, G, N_Q, N_K, CAUSAL_OFF,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                CAUSAL: tl.constexpr, EMULATE_BF16: tl.constexpr, STAGES: tl.constexpr = 3,
                REVERSE: tl.constexpr = False):
    """``_bwd_dq`` (same grid, tiles, tile order, key range and stores) with Q, dO, K and V through rank-4
    tensor descriptors (TMA, sm_90; no sliding window here)."""
    _dq_tma_program(_dq_tile(tl.program_id(0), tl.num_programs(0), REVERSE), tl.program_id(1), desc_q, desc_k, desc_v, desc_do, LSE, DELTA, DQ, sm_scale,
                    stride_dqz, stride_dqh, stride_dqm, stride_dqd, H, G, N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_M,
                    BLOCK_N, CAUSAL, EMULATE_BF16, STAGES)


@triton.jit
def _bwd_fused_tma(desc_q, desc_k, desc_v, desc_do, desc_q2, desc_k2, desc_v2, desc_do2, LSE, DELTA, DK, DV, DQ,
                   sm_scale, stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz, stride_dvh, stride_dvn,
                   stride_dvd, stride_dqz, stride_dqh, stride_dqm, stride_dqd,
                   H, H_KV, G, N_Q, N_K, CAUSAL_OFF, T_KV, N_KV_PROGRAMS, T_Q,
                   HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   DQ_BLOCK_M: tl.constexpr, DQ_BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, EMULATE_BF16: tl.constexpr, GQA: tl.constexpr,
                   SPLIT: tl.constexpr = False, SPLITS=1, MASK_SPLIT: tl.constexpr = False,
                   STAGES: tl.constexpr = 3, DQ_STAGES: tl.constexpr = 3, DESCEND: tl.constexpr = False,
                   REVERSE: tl.constexpr = False):
    """The TMA dK/dV and dQ kernels as one launch, 1-D grid: programs 0 .. N_KV_PROGRAMS − 1 are
    ``_bwd_dkdv_tma``'s (in its grid order: key tile fastest, then KV head, then group slice),
    the rest ``_bwd_dq_tma``'s (query tile fastest, then head). desc_*2: the dQ programs' boxes."""
    pid = tl.program_id(0)
    if pid < N_KV_PROGRAMS:
        j = pid % T_KV
        rest = pid // T_KV
        bhk = rest % (N_KV_PROGRAMS // T_KV // SPLITS)
        b, hk, _ = _head_of(bhk, H_KV, 1)
        _dkdv_tma_program(j, b, hk, rest // (N_KV_PROGRAMS // T_KV // SPLITS), desc_q, desc_k, desc_v, desc_do,
                          LSE, DELTA, DK, DV, sm_scale, stride_dkz, stride_dkh, stride_dkn, stride_dkd, stride_dvz,
                          stride_dvh, stride_dvn, stride_dvd, H, G, N_Q, N_K, CAUSAL_OFF, SPLITS, HEAD_DIM, BLOCK_M,
                          BLOCK_N, CAUSAL, EMULATE_BF16, GQA, SPLIT, MASK_SPLIT, STAGES, DESCEND)
    else:
        p = pid - N_KV_PROGRAMS
        _dq_tma_program(_dq_tile(p % T_Q, T_Q, REVERSE), p // T_Q, desc_q2, desc_k2, desc_v2, desc_do2, LSE, DELTA, DQ, sm_scale,
                        stride_dqz, stride_dqh, stride_dqm, stride_dqd, H, G, N_Q, N_K, CAUSAL_OFF, HEAD_DIM,
                        DQ_BLOCK_M, DQ_BLOCK_N, CAUSAL, EMULATE_BF16, DQ_STAGES)


# ====================================================================================
# Host code
# ====================================================================================
def _check_grad_tensors(do: Any, o: Any, lse: Any, q: torch.Tensor) -> None:
    B, H, N_q, d = q.shape
    for name, t, shape, dtype in (("do", do, (B, H, N_q, d), q.dtype), ("o", o, (B, H, N_q, d), q.dtype),
                                  ("lse", lse, (B, H, N_q), torch.float32)):
        if not isinstance(t, torch.Tensor):
            raise IomodelError(f"{name} must be a torch.Tensor, got {type(t).__name__}: pass the forward's tensors")
        if tuple(t.shape) != shape:
            raise IomodelError(f"{name} must have shape {shape}, got {tuple(t.shape)}: pass the gradient of o "
                               "(same shape as o) and the forward's o and lse")
        if t.dtype != dtype:
            raise IomodelError(f"{name} must be {dtype}, got {t.dtype}: cast it to {dtype}")
        if t.device != q.device:
            raise IomodelError(f"{name} is on {t.device} but q on {q.device}: move it to q's device")
        if t.stride(-1) != 1 and name != "lse":
            raise IomodelError(f"{name} must be contiguous in its last dimension (stride {t.stride()}): "
                               "call .contiguous() on it")
    if not lse.is_contiguous():
        raise IomodelError("lse must be contiguous: pass the forward's lse or call .contiguous() on it")


def flash_attention_backward(
    do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (B, H, N_q, d) x 2, (B, H_kv, N_k, d) x 2
    o: torch.Tensor, lse: torch.Tensor,  # (B, H, N_q, d), (B, H, N_q) fp32
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    *,
    config: BackwardConfig | None = None,
    return_config: bool = False,
    window: tuple[int | None, int | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, torch.Tensor, BackwardConfig]:
    """Gradients of ``o = softmax(sm_scale · q kᵀ + mask) v`` (FlashAttention-2 backward).

    Args:
        do: ``(B, H, N_q, d)`` gradient of o, q's dtype, last dimension contiguous.
        q: ``(B, H, N_q, d)`` fp16, bf16 or fp32; k, v: ``(B, H_kv, N_k, d)``.
        o: the forward's output ``(B, H, N_q, d)``; lse: its ``(B, H, N_q)`` fp32
            natural-log LSE (``flash_attention`` returns both).
        causal, causal_align, sm_scale: as the forward (:func:`kernels.flash_attention.flash_attention`).
        config: tiles (default :func:`backward_config`); ``group_splits`` 0 is chosen here for
            the device's SM count (:meth:`BackwardConfig.resolve`), 1..G forces S.
        return_config: also return the :class:`BackwardConfig` that ran (``group_splits``
            resolved: the S that ran; ``tma`` and ``fused_launch`` True only where the TMA
            kernels ran, ``mask_split`` only where they split the mask: causal MHA).
        window: the forward's sliding window ``(left, right)`` (tokens; -1 or None
            unbounded), see :func:`kernels.flash_attention.flash_attention`: only the tiles
            inside the band are visited.

    Returns:
        ``(dq, dk, dv)`` in q's dtype, shaped like q, k, v (GQA: dk, dv summed over each
        group); with ``return_config`` the config as a fourth element.

    Raises:
        IomodelError: any bad forward input (see ``check_inputs``), a layer the kernel does
            not run (:func:`iomodel.schedule.capabilities.kernel_refusal`), a do/o/lse of the
            wrong shape, dtype or device, or not contiguous in its last dimension (lse: not contiguous); a bad window; non-CUDA tensors
            outside the interpreter; ``group_splits`` negative or above G; ``fused_launch`` with
            ``num_warps`` != ``dq_num_warps`` (a check of the config, whichever kernels the inputs
            take). ``tma``/``fused_launch`` apply where the inputs allow
            descriptors (fp16/bf16, power-of-two HEAD_DIM, aligned, no window); other inputs run the
            pointer kernels (the same bytes and gradients). ``dkdv_kernel="gluon"`` applies where
            :meth:`BackwardConfig.gluon_refusal` and :func:`_gluon_dkdv_device_reason` find nothing (sm_90, fp16/bf16, HEAD_DIM 128, aligned, no window, ``tma``
            on, no atomic or fused dQ); elsewhere the Triton dK/dV launch runs in the config's tiles, and a config
            given with it that the GPU or the tensors refuse (not its own switches) says why in a ``UserWarning``.
    """
    plan = _cached_plan(lambda: _bwd_plan_key(do, q, k, v, o, lse, causal, causal_align, sm_scale, config, window),
                        _build_bwd_plan, (do, q, k, v, o, lse, causal, causal_align, sm_scale, config, window))
    dq, dk, dv = plan.launch(do, q, k, v, o, lse)
    if return_config:  # what ran: the descriptor flags only where the TMA kernels did
        return dq, dk, dv, plan.ran
    return dq, dk, dv


# The backward's launch plans (issue 14: host overhead): the checks, the config, the grids and
# every launch argument but the per-call tensors are worked out once per key and kept in the
# forward's plan dictionary (kernels.flash_attention._PLANS); each launch is the forward's
# _Launch (Triton's JIT on the first call, the compiled kernel's launcher after it on a GPU).


def _bwd_kernels() -> tuple:
    """The module's backward kernel objects, read per call (tests may swap one: a plan is keyed on them)."""
    return (_bwd_preprocess, _bwd_dkdv, _bwd_dkdv_tma, _bwd_dq, _bwd_dq_tma, _bwd_fused_tma, _bwd_reduce_dkdv)


def _bwd_plan_key(do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, causal: Any, causal_align: Any, sm_scale: Any,
                  config: Any, window: Any) -> tuple:
    """Everything :func:`_build_bwd_plan` reads: shapes, strides, dtypes and devices of the six
    tensors, their 16-byte alignment (the TMA choice and the specialisation a direct launch saw),
    the flags (causal with its type), the config, the window and the kernel objects. Raises
    AttributeError or TypeError for inputs that are not tensors (the plan is then built uncached,
    which raises the one-line error)."""
    ts = (do, q, k, v, o, lse)
    return ("backward", *((t.shape, t.stride(), t.dtype, t.device) for t in ts), _aligned(*ts),
            causal, type(causal), causal_align, sm_scale, config, window, INTERPRET, _bwd_kernels())


def _launch_of(kernel: Any, grid: tuple, n_ptrs: int, rest: tuple, named: dict[str, Any],
               options: dict[str, Any], boxes: tuple[tuple[int, ...], ...] | None = None) -> _Launch:
    """A :class:`kernels.flash_attention._Launch` of ``kernel``: the first ``n_ptrs`` parameters come
    per call; ``rest`` are the next positional values (strides, sizes), ``named`` the keyword ones;
    parameters left out take their defaults in the direct launch's tail (:class:`kernels.flash_attention._Launch`).
    ``boxes``: the TMA kernels' descriptor boxes of the leading per-call tensors."""
    args = dict(_positional(kernel, n_ptrs, rest), **named)  # the defaults left out: bound by _Launch
    grid = tuple(grid) + (1,) * (3 - len(grid))
    return _Launch(kernel, grid, args, options, direct=True, boxes=boxes)


class _BwdPlan:
    """What one call of :func:`flash_attention_backward` runs, for one key of :func:`_bwd_plan_key`:
    the output shapes (elements), the S > 1 partials' shape, whether dQ accumulates by atomics
    and the ``_Launch`` of each kernel, in launch order; ``ran`` the config that runs
    (:func:`flash_attention_backward`'s ``return_config``)."""

    __slots__ = ("q_shape", "kv_shape", "dtype", "part_shape", "atomic", "tma", "fused", "gluon", "preprocess",
                 "dkdv", "reduce", "dq", "ran", "sm_scale")

    def launch(self, do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
               lse: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Allocate dq, dk, dv (and D, the partials) and run the plan's kernels on these tensors."""
        dev = q.device
        dq = _alloc(self.q_shape, self.dtype, dev)
        dk = _alloc(self.kv_shape, self.dtype, dev)
        dv = _alloc(self.kv_shape, self.dtype, dev)
        delta = _alloc(self.q_shape[:3], torch.float32, dev)
        self.preprocess(o, do, delta)
        if self.part_shape is not None:  # fp32 partials of the S group slices, slice-major per KV head
            dk_out, dv_out = _alloc(self.part_shape, torch.float32, dev), _alloc(self.part_shape, torch.float32, dev)
        else:
            dk_out, dv_out = dk, dv
        scale = self.sm_scale
        if self.gluon:  # descriptors of q, k, v, dO and of dK, dV (S > 1: k and v stand in; fp32 partials by pointer)
            split = self.part_shape is not None
            self.dkdv(q, k, v, do, k if split else dk, v if split else dv, lse, delta, dk_out, dv_out, scale)
        elif self.tma:  # the launches make (or reuse) the descriptors of q, k, v, dO in their boxes
            if self.fused:  # dK/dV boxes (BLOCK_M, BLOCK_N), then the dQ programs' (DQ_BLOCK_M, DQ_BLOCK_N)
                self.dkdv(q, k, v, do, q, k, v, do, lse, delta, dk_out, dv_out, dq, scale)
            else:
                self.dkdv(q, k, v, do, lse, delta, dk_out, dv_out, scale)
        else:
            dq_acc = torch.zeros(self.q_shape, dtype=torch.float32, device=dev) if self.atomic else delta
            self.dkdv(q, k, v, do, lse, delta, dk_out, dv_out, scale, dq_acc)
        if self.reduce is not None:
            self.reduce(dk_out, dv_out, dk, dv)
        if self.atomic:
            dq.copy_(dq_acc)  # one conversion pass: read fp32 dQ, write it in q's dtype
        elif self.dq is not None:
            if self.tma:
                self.dq(q, k, v, do, lse, delta, dq, scale)
            else:
                self.dq(q, k, v, do, lse, delta, dq, scale)
        return dq, dk, dv


def _build_bwd_plan(do: Any, q: Any, k: Any, v: Any, o: Any, lse: Any, causal: Any, causal_align: Any, sm_scale: Any,
                    config: Any, window: Any) -> _BwdPlan:
    """Check the inputs and work out the backward's launches (no allocation, no launch)."""
    shape, sm_scale = check_inputs(q, k, v, causal_align, sm_scale, dtypes=None)
    reason = kernel_refusal(replace(shape, phase="prefill"))  # the statement the worksheet reads too
    if reason is not None:
        raise IomodelError(reason)
    _check_device(q)
    _check_grad_tensors(do, o, lse, q)
    check_causal(causal)
    given = config is not None
    sm_major = None if INTERPRET else torch.cuda.get_device_capability(q.device)[0]
    if config is None:
        config = backward_config(shape.head_dim, shape.dtype, causal, interpreter=INTERPRET, sm_major=sm_major)
    elif not isinstance(config, BackwardConfig):
        raise IomodelError(f"config must be a kernels.heuristics.BackwardConfig, got {type(config).__name__}: build one")
    B, H, N_q, d = q.shape
    H_kv, N_k = k.shape[1], k.shape[2]
    band = window_argument(window, causal, N_q, N_k)
    if config.dkdv_kernel == "gluon":
        own = config.gluon_refusal(shape.head_dim, q.element_size(), band is not None)  # the config and the layer
        why = own or _gluon_dkdv_device_reason(q, k, v, do, sm_major)
        if why is not None:  # the Triton launch with the config's tiles; return_config says so
            if given and not INTERPRET and own is None:  # the config allows it, the device or tensors refuse it:
                warnings.warn(f"{why}: the Triton dK/dV launch runs instead (pass dkdv_kernel='triton' to ask for it)",
                              stacklevel=4)  # said once per plan (plans are cached); the config's own switches not
            config = replace(config, dkdv_kernel="triton")
    # group_splits S fixed for this launch, dkdv_order as it runs (heads-outer for MHA and windows)
    config = config.resolve(B, H_kv, shape.group, N_k, _num_sms(q.device), windowed=band is not None,
                            seqlen_q=N_q, head_dim=d, width=q.element_size(), l2_bytes=_l2_bytes(q.device))
    off = causal_offset(causal_align, N_q, N_k) if causal or band else 0
    win = _band_args(band)
    pad = head_dim_padded(d)
    flags = dict(DOT_PRECISION=_dot_precision(q), EMULATE_BF16=_emulate_bf16(q))
    plan = _BwdPlan()
    plan.q_shape, plan.kv_shape, plan.dtype = (B, H, N_q, d), (B, H_kv, N_k, d), q.dtype
    plan.sm_scale = sm_scale
    plan.atomic = config.atomic_dq
    S = config.group_splits
    t_c = triton.cdiv(N_k, config.block_n)
    plan.part_shape = (B, H_kv * S, N_k, d) if S > 1 else None
    o_str, do_str = o.stride(), do.stride()
    plan.preprocess = _launch_of(_bwd_preprocess, (triton.cdiv(N_q, config.preprocess_block_m), B * H), 3,
                                 (*o_str, *do_str, H, N_q),
                                 dict(HEAD_DIM=d, HEAD_DIM_PAD=pad, BLOCK_M=config.preprocess_block_m),
                                 dict(num_warps=PREPROCESS_NUM_WARPS))
    # strides of the outputs and partials: contiguous tensors _alloc makes per call (torch's rule, on meta tensors)
    dq_str = torch.empty(plan.q_shape, device="meta").stride()
    dkv_str = torch.empty(plan.kv_shape, device="meta").stride()
    part_str = torch.empty(plan.part_shape, device="meta").stride() if S > 1 else dkv_str
    common = dict(HEAD_DIM=d, HEAD_DIM_PAD=pad, CAUSAL=causal, **flags)
    on_tma_gpu = INTERPRET or sm_major == TMA_SM_MAJOR  # _check_device has refused non-CUDA tensors outside it
    tma = (config.tma and not config.atomic_dq and band is None and on_tma_gpu  # TMA: sm_90, as the forward's path
           and tma_refusal(shape.dtype, d, _tma_ok(q, k, v, do)) is None)
    fused = tma and config.fused_launch
    plan.tma, plan.fused = tma, fused
    plan.gluon = config.dkdv_kernel == "gluon"  # kept where it runs (the device check above, then resolve())
    dkdv_flags = {"SPLIT": True, "SPLITS": S} if S > 1 else {}  # the dK/dV launch's group split and loop order
    if config.dkdv_order == "tiles-descending":  # resolve() left it only where a GQA program loops over heads
        dkdv_flags["DESCEND"] = True
    gqa = shape.group > 1
    dq_flags = {"REVERSE": True} if config.dq_tile_order == "reverse" else {}  # the dQ programs' query-tile order
    if fused:
        n_kv = t_c * B * H_kv * S
        t_q = triton.cdiv(N_q, config.dq_block_m)
        plan.dkdv = _launch_of(
            _bwd_fused_tma, (n_kv + t_q * B * H,), 14,
            (*part_str, *part_str, *dq_str, H, H_kv, shape.group, N_q, N_k, off, t_c, n_kv, t_q),
            dict(HEAD_DIM=d, BLOCK_M=config.block_m, BLOCK_N=config.block_n, DQ_BLOCK_M=config.dq_block_m,
                 DQ_BLOCK_N=config.dq_block_n, CAUSAL=causal, EMULATE_BF16=flags["EMULATE_BF16"], GQA=gqa,
                 MASK_SPLIT=config.mask_split, STAGES=config.num_stages, DQ_STAGES=config.dq_num_stages, **dkdv_flags,
                 **dq_flags),
            dict(num_warps=config.num_warps, num_stages=max(config.num_stages, config.dq_num_stages)),
            boxes=(*_boxes(config.block_m, config.block_n, d), *_boxes(config.dq_block_m, config.dq_block_n, d)))
    elif plan.gluon:
        from kernels import gluon_attention as ga
        from kernels import gluon_backward as gb

        part4 = part_str[:3]
        plan.dkdv = _Launch(
            gb._bwd_dkdv_gluon, (t_c, B * H_kv, S),
            dict(stride_dkz=part4[0], stride_dkh=part4[1], stride_dkn=part4[2], stride_dvz=part4[0],
                 stride_dvh=part4[1], stride_dvn=part4[2], H=H, H_KV=H_kv, G=shape.group, N_Q=N_q, N_K=N_k,
                 CAUSAL_OFF=off, SPLITS=S, HEAD_DIM=d, BLOCK_M=config.block_m, NUM_STAGES=config.num_stages,
                 CAUSAL=causal, SPLIT=S > 1, DESCEND=config.dkdv_order == "tiles-descending", GQA=gqa,
                 MASK_Q=N_q % config.block_m != 0, NO_KEY_ROWS=bool(causal) and off < 0,
                 CONSUMER_REGS=gb.CONSUMER_REGS, PRODUCER_REGS=gb.PRODUCER_REGS, PRODUCER_WARPS=gb.PRODUCER_WARPS),
            dict(num_warps=4), True, gb.descriptor_boxes(d, config.block_m), ga.gluon_descriptor)
    elif tma:
        plan.dkdv = _launch_of(
            _bwd_dkdv_tma, (t_c, B * H_kv, S), 9,
            (*part_str, *part_str, H, H_kv, shape.group, N_q, N_k, off),
            dict(HEAD_DIM=d, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=causal,
                 EMULATE_BF16=flags["EMULATE_BF16"], GQA=gqa, MASK_SPLIT=config.mask_split, STAGES=config.num_stages,
                 **dkdv_flags),
            dict(num_warps=config.num_warps, num_stages=config.num_stages),
            boxes=_boxes(config.block_m, config.block_n, d))
    else:
        plan.dkdv = _launch_of(
            _bwd_dkdv, (t_c, B * H_kv, S), 10,
            (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *part_str, *part_str,
             H, H_kv, shape.group, N_q, N_k, off),
            dict(**win, BLOCK_M=config.block_m, BLOCK_N=config.block_n, ATOMIC_DQ=config.atomic_dq, GQA=gqa,
                 **common, **dkdv_flags),
            dict(num_warps=config.num_warps, num_stages=config.num_stages))
    plan.reduce = None
    if S > 1:
        plan.reduce = _launch_of(
            _bwd_reduce_dkdv, (triton.cdiv(N_k, DKDV_REDUCE_BLOCK_N), B * H_kv), 4,
            (S, N_k, *part_str, *part_str, *dkv_str, *dkv_str, H_kv),
            dict(HEAD_DIM=d, HEAD_DIM_PAD=pad, BLOCK_N=DKDV_REDUCE_BLOCK_N, EMULATE_BF16=flags["EMULATE_BF16"]),
            dict(num_warps=dkdv_reduce_num_warps(d)))
    plan.dq = None  # no dQ launch: the atomics' conversion pass, or the fused launch
    if tma and not fused:
        plan.dq = _launch_of(
            _bwd_dq_tma, (triton.cdiv(N_q, config.dq_block_m), B * H), 8,
            (*dq_str, H, shape.group, N_q, N_k, off),
            dict(HEAD_DIM=d, BLOCK_M=config.dq_block_m, BLOCK_N=config.dq_block_n, CAUSAL=causal,
                 EMULATE_BF16=flags["EMULATE_BF16"], STAGES=config.dq_num_stages, **dq_flags),
            dict(num_warps=config.dq_num_warps, num_stages=config.dq_num_stages),
            boxes=_boxes(config.dq_block_m, config.dq_block_n, d))
    elif not tma and not config.atomic_dq:
        plan.dq = _launch_of(
            _bwd_dq, (triton.cdiv(N_q, config.dq_block_m), B * H), 8,
            (*q.stride(), *k.stride(), *v.stride(), *do.stride(), *dq_str, H, shape.group, N_q, N_k, off),
            dict(**win, BLOCK_M=config.dq_block_m, BLOCK_N=config.dq_block_n, **common, **dq_flags),
            dict(num_warps=config.dq_num_warps, num_stages=config.dq_num_stages))
    ran_split = config.mask_split and tma and causal and shape.group == 1 and not plan.gluon  # Triton's TMA dK/dV, causal MHA
    plan.ran = replace(config, tma=tma, mask_split=ran_split, fused_launch=fused)
    return plan


def _gluon_dkdv_device_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, do: torch.Tensor,
                              sm_major: int | None) -> str | None:
    """What on this device or in these tensors refuses the Gluon dK/dV launch (``kernels/gluon_backward.py``), or
    None: a GPU other than sm_90 (or the interpreter), tensors TMA cannot describe, the ``IOMODEL_GLUON`` switch, a
    Triton without the Gluon dialect (``kernels.flash_attention``). The config's and the layer's half of the rule is
    :meth:`BackwardConfig.gluon_refusal`, which :meth:`BackwardConfig.resolve` applies too."""
    from kernels.flash_attention import USE_GLUON, _gluon_import_error

    reason = sm90_refusal("the Gluon dK/dV launch", sm_major)
    if reason is None and not _tma_ok(q, k, v, do):
        reason = "the Gluon dK/dV launch needs 16-byte aligned, last-dim-contiguous q, k, v and dO"
    if reason is None and not USE_GLUON:
        reason = "IOMODEL_GLUON is off"
    if reason is None and _gluon_import_error() is not None:
        reason = f"Triton's Gluon dialect does not import ({_gluon_import_error()})"
    return reason


#: What differentiating the bundled kernels' gradients again raises (:class:`FlashAttentionFunction`).
DOUBLE_BACKWARD_ERROR = ("flash_attention has no double backward (its gradients come from kernels that cannot be "
                         "differentiated again): take higher-order gradients through kernels.baseline.eager_attention "
                         "or torch SDPA's MATH backend")


class FlashAttentionFunction(torch.autograd.Function):
    """``torch.autograd.Function`` whose forward is the bundled forward kernel and whose
    backward is :func:`flash_attention_backward` (``flash_attention`` uses it whenever q, k
    or v requires grad). Saves q, k, v, o and lse (the forward's outputs, not the N×N
    scores); lse is returned but not differentiable."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, causal_align: str,
                sm_scale: float | None, forward_kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, Any]:
        from kernels.flash_attention import _forward

        o, lse, cfg = _forward(q, k, v, causal, causal_align, sm_scale, **forward_kwargs)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.causal_align, ctx.sm_scale = causal, causal_align, sm_scale
        ctx.window = forward_kwargs.get("window")
        ctx.mark_non_differentiable(lse)
        return o, lse, cfg

    @staticmethod
    def backward(ctx: Any, do: torch.Tensor, _dlse: Any, _dcfg: Any = None) -> tuple[Any, ...]:
        """dO goes to :func:`flash_attention_backward`, whose check of do, o and lse is the one
        home of that check. Through ``o.backward(do)`` or ``torch.autograd.grad`` a dO of the
        wrong shape never gets here: PyTorch refuses it first (``torch.autograd.backward``
        checks the root's gradient shape in Python, "Mismatch in shape: grad_output[0] ...",
        before the engine runs any node; a node's gradient is checked by the engine), and a
        dO of another dtype is cast to o's by the engine before this runs (torch 2.x); neither
        can be reached or rephrased from inside a Function (``tests/test_kernel_backward.py``).

        The kernels have no double backward. Where a graph is being built (``create_graph=True``)
        and dO, q, k or v requires grad, the gradients carry a node that raises
        :data:`DOUBLE_BACKWARD_ERROR` if they are differentiated again (``torch.autograd.function.
        once_differentiable``'s device, which looks at dO alone and so misses ``o.sum()``), rather
        than gradients without a grad_fn that fail later, far from the cause."""
        q, k, v, o, lse = ctx.saved_tensors
        # autograd may hand an expanded or strided gradient (o.sum().backward() gives stride 0):
        # the kernels read dO row-major, so it is laid out once here
        with torch.no_grad():
            dq, dk, dv = flash_attention_backward(do.contiguous(), q, k, v, o, lse, ctx.causal, ctx.causal_align,
                                                  ctx.sm_scale, window=ctx.window)
        if torch.is_grad_enabled() and any(t.requires_grad for t in (do, q, k, v)):
            from torch._C import _functions

            def marked(t: torch.Tensor) -> torch.Tensor:
                t = t.detach()
                t.requires_grad = True
                return t

            dq, dk, dv = _functions.DelayedError(DOUBLE_BACKWARD_ERROR.encode(), 3)(marked(dq), marked(dk), marked(dv))
        return dq, dk, dv, None, None, None, None
