"""The bundled Triton FlashAttention forward kernel (prefill and split-KV decode).

``flash_attention(q, k, v, causal, causal_align, sm_scale) -> (o, lse)`` with q
``(B, H, N_q, d)``, k and v ``(B, H_kv, N_k, d)``, o like q and lse ``(B, H, N_q)`` fp32
(natural log-sum-exp of the scaled, masked scores of each row).

What every program loads and stores follows ``docs/traffic-contract.md`` exactly (the
interpreter counts the requested bytes and compares them with the traffic model):

* prefill (``N_q > 16``): Q-stationary forward (FlashAttention-2, Dao 2023, Algorithm 1;
  Triton tutorial ``06-fused-attention.py``). Grid ``(T_r, B*H)``, axis 0 the query tile
  (``tile_order`` "reverse": tile T_r - 1 - program_id(0), heaviest causal tiles first;
  ``grid_order`` "heads-fastest": grid ``(B*H, T_r)``, axis 0 the head, a fixed config only).
  Online softmax in fp32 with exp2; causal K/V blocks above the diagonal are skipped,
  blocks fully below it run without a mask (stage 1), blocks crossing it or the key tail
  run masked (stage 2). Two variants move the same blocks:

  - ``prefill``: pointer loads (``tl.load`` with masks): any GPU and Triton's interpreter.
  - ``prefill-tma``: host-side tensor descriptors (TMA) of rank 4 over the real
    ``(B, H, N, d)`` extents, so TMA clips ragged tails at each head's own sequence
    bound; used on sm_90 for fp16/bf16, power-of-two HEAD_DIM 16..256 and 16-byte
    aligned strides. It also runs in the interpreter when forced (``path=``).

* decode (``N_q <= 16``): split-KV (Flash-Decoding). Grid ``(num_splits, B*H_kv*(G/P))``;
  one program packs P query heads of one GQA group into its rows, covers one split of
  the KV cache and writes a partial O and LSE (fp32); the last split program of each group
  to finish (an int32 counter per group, ``atomic_add`` acq_rel) merges the group's
  partials by their LSEs in the same launch (``fused_combine``, the default: one launch,
  partials and counters in a workspace cached per device and stream). With
  ``fused_combine=False`` a separate combine kernel (grid ``(B*H, N_q)``, splits read in
  tiles of up to 64) merges them instead; ``num_splits == 1`` writes O and LSE directly.

Conventions: GQA/MQA by index mapping (query head h reads KV head ``h // G``); causal
top-left (PyTorch ``is_causal``) or bottom-right (flash-attn >= 2.1); a row that sees no
key gets o = 0 and lse = −inf (never NaN). fp32 inputs use exact ``ieee`` dots (not TF32);
fp16/bf16 inputs accumulate in fp32 and round P to the input dtype for the P·V dot, as
FlashAttention does.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import torch
import triton
import triton.language as tl

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import (
    GLUON_SWITCH,
    NUM_WARPS,
    PATHS,
    TMA_SWITCH,
    autograd_forward_path,
    block_size_refusal,
    env_switch,
    gluon_refusal,
    kernel_refusal,
    prefill_path,
    tma_refusal,
)
from iomodel.schedule.launch import KERNEL_GRID_ORDERS, head_group_of, lpt_launch_order
from iomodel.schedule.tiles import (
    DECODE_MAX_ROWS,
    DECODE_MAX_SEQLEN_Q,
    decode_block_m_refusal,
    decode_heads_per_program,
    decode_split_len,
    head_dim_padded,
    packed_grid,
    page_block_refusal,
    prefill_packing_refusal,
)
from iomodel.spec.layer import causal_offset
from kernels import heuristics as hx
from kernels._inputs import (check_causal, check_inputs, check_paged_inputs, check_paged_tables, tensor_dtype_name,
                             window_argument)
from kernels.heuristics import KernelConfig

try:  # triton >= 3.3
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older triton
    TensorDescriptor = None  # type: ignore[assignment,misc]


def _interpreting() -> bool:
    knobs = getattr(triton, "knobs", None)
    if knobs is not None and hasattr(knobs, "runtime"):
        return bool(knobs.runtime.interpret)
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


#: True when this module's kernels were decorated under TRITON_INTERPRET=1 (CPU interpreter).
INTERPRET = _interpreting()

#: Whether :func:`kernel_path` may pick the TMA path on sm_90. ``IOMODEL_TMA=0`` in the
#: environment turns it off (an explicit switch for diagnosis, reported in every config).
USE_TMA = env_switch(TMA_SWITCH)
#: Whether :func:`kernel_path` may pick the Gluon prefill (``prefill-gluon``) on sm_90:
#: ``IOMODEL_GLUON=0`` turns it off, and a Triton without the Gluon dialect cannot run it.
USE_GLUON = env_switch(GLUON_SWITCH)

LOG2E = 1.4426950408889634  # 1 / ln 2: scores are kept in log2 units so exp2 can be used
LN2 = 0.6931471805599453

__all__ = ["INTERPRET", "KernelConfig", "flash_attention", "flash_attention_backward", "flash_attention_varlen",
           "kernel_path"]


def __getattr__(name: str) -> Any:
    """``flash_attention_backward`` is :func:`kernels.backward.flash_attention_backward`, the name issue 11 gives it
    here; imported on first use (``kernels.backward`` imports this module)."""
    if name == "flash_attention_backward":
        from kernels.backward import flash_attention_backward

        return flash_attention_backward
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ====================================================================================
# Device code
# ====================================================================================
@triton.jit
def _dot(a, b, acc, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr):
    """``tl.dot(a, b, acc)``; EMULATE_BF16 (interpreter only): Triton 3.6's interpreter
    multiplies bf16 bit patterns as integers, so bf16 operands are widened to fp32 first
    (exact: a bf16 product fits fp32), which is what the GPU's bf16 MMA computes."""
    if EMULATE_BF16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    return tl.dot(a, b, acc, input_precision=DOT_PRECISION)


@triton.jit
def _to_dtype(x, dtype: tl.constexpr, EMULATE_BF16: tl.constexpr):
    """``x.to(dtype)`` with round-to-nearest-even, as the GPU converts. EMULATE_BF16
    (interpreter only): Triton 3.6's interpreter truncates fp32 -> bf16, so the rounding is
    done on the fp32 bits first (then the conversion is exact)."""
    if EMULATE_BF16:
        bits = x.to(tl.uint32, bitcast=True)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        x = bits.to(tl.float32, bitcast=True)
    return x.to(dtype)


@triton.jit
def _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K, CAUSAL_OFF,
                         MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                         EMULATE_BF16: tl.constexpr, WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """One K/V block of the online softmax (FlashAttention-2, Algorithm 1, lines 8-10).

    q (BLOCK_M, D), k and v (BLOCK_N, D); acc (BLOCK_M, D) fp32; l_i, m_i (BLOCK_M,) fp32,
    m_i in log2 units of the scaled scores. MASKED: apply key < N_K (and the causal bound
    when CAUSAL, the band m + off - WIN_L <= n <= m + off + WIN_R when WINDOW) to the scores; rows whose every score so far is masked keep m_i = -inf,
    l_i = 0 and acc = 0 (no NaN).
    """
    qk = _dot(q, tl.trans(k), None, DOT_PRECISION, EMULATE_BF16)  # (BLOCK_M, BLOCK_N) fp32
    if MASKED:
        keys = start_n + offs_n
        visible = keys[None, :] < N_K
        if CAUSAL:
            visible = visible & (keys[None, :] <= offs_m[:, None] + CAUSAL_OFF)
        if WINDOW:
            rel = keys[None, :] - (offs_m[:, None] + CAUSAL_OFF)  # key minus the row's aligned diagonal
            visible = visible & (rel <= WIN_R) & (rel >= -WIN_L)
        qk = tl.where(visible, qk * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)  # all-masked row: exp2(-inf - 0) = 0
        p = tl.math.exp2(qk - m_sub[:, None])
        alpha = tl.math.exp2(m_i - m_sub)
    else:
        # every key of the block is visible to every row: scores are finite.
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # qk_scale > 0 (checked on the host)
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = _dot(_to_dtype(p, v.dtype, EMULATE_BF16), v, acc, DOT_PRECISION, EMULATE_BF16)
    return acc, l_i, m_new


@triton.jit
def _load_kv(k_base, v_base, keys, offs_d, mask, stride_kn, stride_kd, stride_vn, stride_vd):
    """K and V tiles (BLOCK_N, HEAD_DIM_PAD) of key rows ``keys``; elements outside ``mask`` are
    not loaded (traffic contract) and read as 0."""
    k = tl.load(k_base + keys[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=mask, other=0.0)
    v = tl.load(v_base + keys[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=mask, other=0.0)
    return k, v


@triton.jit
def _masked_blocks(acc, l_i, m_i, q, k_base, v_base, qk_scale, lo, hi, key_end, offs_m, offs_n, offs_d, d_ok,
                   stride_kn, stride_kd, stride_vn, stride_vd, CAUSAL_OFF, BLOCK_N: tl.constexpr,
                   CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
                   WIN_L=0, WIN_R=0, WINDOW: tl.constexpr = False):
    """The masked K/V blocks starting at keys lo, lo + BLOCK_N, ... < hi: loads masked to keys
    < key_end only (the causal bound is applied to the scores, never to the loads: traffic
    contract); scores masked to keys < key_end and, when CAUSAL, the diagonal, when WINDOW the band."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        kv_ok = (keys < key_end)[:, None] & d_ok[None, :]
        k, v = _load_kv(k_base, v_base, keys, offs_d, kv_ok, stride_kn, stride_kd, stride_vn, stride_vd)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, key_end,
                                             CAUSAL_OFF, True, CAUSAL, DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R,
                                             WINDOW)
    return acc, l_i, m_i


@triton.jit
def _finish_rows(acc, l_i, m_i):
    """Normalise: o = acc / l, lse = (m + log2 l) * ln 2; rows that saw no key: o = 0, lse = -inf."""
    empty = l_i == 0.0
    l_safe = tl.where(empty, 1.0, l_i)
    o = acc / l_safe[:, None]
    lse = tl.where(empty, float("-inf"), (m_i + tl.math.log2(l_safe)) * 0.6931471805599453)
    return o, lse


@triton.jit
def _head_of(bh, H, G):
    """Sequence b, query head h and KV head hk (GQA/MQA index mapping: hk = h // G) of grid
    row ``bh = b * H + h``."""
    b = bh // H
    h = bh % H
    return b, h, h // G


@triton.jit
def _head_grouped(T, ROWS, HEAD_GROUP):
    """(tile-axis index, grid row) of this program of a grid (T, ROWS) started in the order of
    ``grid_order`` "head-grouped:HEAD_GROUP": linear index p = pid0 + T·pid1; the grid rows in
    groups of HEAD_GROUP, a whole group (all T indices of its rows) before the next group, and
    within a group the rows fastest (index slowest): p = g·HEAD_GROUP·T + t·n_g + r with
    n_g = min(HEAD_GROUP, ROWS − g·HEAD_GROUP) runs index t of row g·HEAD_GROUP + r. With the
    heaviest causal index first this is FlashAttention-3's ``SingleTileLPTScheduler`` order
    (``hopper/tile_scheduler.hpp``: longest-processing-time first within L2-sized head groups)."""
    p = tl.program_id(0) + T * tl.program_id(1)
    span = HEAD_GROUP * T
    g = p // span
    r = p - g * span
    n_g = tl.minimum(HEAD_GROUP, ROWS - g * HEAD_GROUP)
    t = r // n_g
    return t, g * HEAD_GROUP + (r - t * n_g)


@triton.jit
def _query_tile(REVERSE: tl.constexpr, HEADS_FASTEST: tl.constexpr, HEAD_GROUP=0):
    """Query tile i and grid row bh = b*H + h of this program: grid (T_r, B*H) (tiles fastest), or
    (B*H, T_r) when HEADS_FASTEST (grid_order "heads-fastest"), or grid (T_r, B*H) started in
    head groups when HEAD_GROUP > 0 (:func:`_head_grouped`); i runs T_r - 1 down to 0 when REVERSE."""
    if HEADS_FASTEST:
        i = tl.program_id(1)
        bh = tl.program_id(0)
        t_r = tl.num_programs(1)
    else:
        i = tl.program_id(0)
        bh = tl.program_id(1)
        t_r = tl.num_programs(0)
        if HEAD_GROUP > 0:
            i, bh = _head_grouped(t_r, tl.num_programs(1), HEAD_GROUP)
    if REVERSE:
        i = t_r - 1 - i
    return i, bh


@triton.jit
def _causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Key range of query tile i: stage 1 = [0, full_end) unmasked, stage 2 = [full_end, hi) masked.

    hi (traffic contract): non-causal N_K; causal clamp(min((i+1)*BLOCK_M, N_Q) + off, 0, N_K).
    full_end: keys every row of the tile sees (< i*BLOCK_M + off + 1), rounded down to BLOCK_N.
    """
    if CAUSAL:
        row_end = tl.minimum((i + 1) * BLOCK_M, N_Q)
        hi = tl.minimum(tl.maximum(row_end + CAUSAL_OFF, 0), N_K)
        full = tl.minimum(tl.maximum(i * BLOCK_M + CAUSAL_OFF + 1, 0), hi)
    else:
        hi = N_K
        full = N_K
    full_end = (full // BLOCK_N) * BLOCK_N
    return full_end, hi


@triton.jit
def _band_bounds(row0, row_end, row_last, N_K, CAUSAL_OFF, WIN_L, WIN_R, BLOCK_N: tl.constexpr):
    """Key range of the query rows [row0, row_end) under a window band (traffic contract):
    ``(lo, full_lo, full_hi, hi)``, blocks [lo, full_lo) and [full_hi, hi) masked, [full_lo,
    full_hi) seen entirely by every row up to ``row_last`` (no mask).

    hi = clamp(row_end + off + WIN_R, 0, N_K); lo = BLOCK_N·⌊clamp(row0 + off − WIN_L, 0, N_K) / BLOCK_N⌋,
    or hi when that first key is >= hi (no row sees a key: nothing loaded). Operands are
    clamped at 0 before each division (Triton's ``//`` truncates toward zero).
    """
    hi = tl.minimum(tl.maximum(row_end + CAUSAL_OFF + WIN_R, 0), N_K)
    first = tl.minimum(tl.maximum(row0 + CAUSAL_OFF - WIN_L, 0), N_K)
    lo = tl.where(first < hi, (first // BLOCK_N) * BLOCK_N, hi)
    full_lo = ((tl.maximum(row_last + CAUSAL_OFF - WIN_L, 0) + BLOCK_N - 1) // BLOCK_N) * BLOCK_N
    full_lo = tl.minimum(tl.maximum(full_lo, lo), hi)
    full_hi = (tl.minimum(tl.maximum(row0 + CAUSAL_OFF + WIN_R + 1, 0), hi) // BLOCK_N) * BLOCK_N
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), hi)
    return lo, full_lo, full_hi, hi


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, CU_Q, CU_K, SEQUSED_K, sm_scale,
              stride_qz, stride_qh, stride_qm, stride_qd,
              stride_kz, stride_kh, stride_kn, stride_kd,
              stride_vz, stride_vh, stride_vn, stride_vd,
              stride_oz, stride_oh, stride_om, stride_od,
              H, G, N_Q, N_K, CAUSAL_OFF, N_Q_BUCKET, N_K_BUCKET, WIN_L, WIN_R,
              HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr, EMULATE_BF16: tl.constexpr,
              REVERSE: tl.constexpr = False, WINDOW: tl.constexpr = False,
              VARLEN: tl.constexpr = False, SEQUSED: tl.constexpr = False, HEADS_FASTEST: tl.constexpr = False,
              HEAD_GROUP=0, PACK: tl.constexpr = 1):
    """Prefill forward, pointer loads. Grid (T_r, B*H): program (p, b*H + h) runs query tile
    i = p (REVERSE False) or i = T_r - 1 - p (REVERSE True: heaviest causal tiles first);
    HEADS_FASTEST (grid_order "heads-fastest"): grid (B*H, T_r), program (b*H + h, p).
    WINDOW: keys outside the band m + off − WIN_L <= n <= m + off + WIN_R are masked and blocks
    outside it skipped (``_band_bounds``).

    VARLEN (ragged batch, flash-attn's varlen layout): Q, O packed ``(total_q, H, d)``, K, V
    ``(total_k, H_kv, d)``, LSE ``(H, total_q)``; sequence b owns query rows
    [CU_Q[b], CU_Q[b+1]) and key rows [CU_K[b], CU_K[b+1]) (int32), the first SEQUSED_K[b] of
    them when SEQUSED. The host passes N_Q = total_q (LSE's row stride) and CAUSAL_OFF = 1 for
    bottom-right, 0 for top-left; each program then reads its sequence's N_Q, N_K and offset
    N_K − N_Q (bottom-right) and runs the body above on them. Grid (cdiv(max_seqlen_q,
    BLOCK_M), B*H): tiles past the sequence's end return at once (they read only the cu_seqlens).

    PACK > 1 (``KernelConfig.heads_per_program``, dense only; FlashAttention-3's PackGQA): grid
    (cdiv(N_Q, BLOCK_M / PACK), B*H / PACK); grid row b*(H/PACK) + j holds query heads j*PACK ..
    j*PACK + PACK - 1 (one KV head's), and row r of a tile is position i*BLOCK_M/PACK + r // PACK of
    head j*PACK + r % PACK, so each K/V block loaded serves PACK heads (``iomodel.schedule.grid.packed_view``).
    """
    i, bh = _query_tile(REVERSE, HEADS_FASTEST, HEAD_GROUP)
    b, h, hk = _head_of(bh, H // PACK, G // PACK)  # PACK 1: (b, h, hk); else h is the packed group's index
    if VARLEN:
        q_start = tl.load(CU_Q + b)
        k_start = tl.load(CU_K + b)
        lse_base = LSE + h.to(tl.int64) * N_Q + q_start  # LSE (H, total_q): N_Q is total_q here
        N_Q = tl.load(CU_Q + b + 1) - q_start
        N_K = tl.load(CU_K + b + 1) - k_start
        if SEQUSED:
            N_K = tl.load(SEQUSED_K + b)  # key padding: the first seqused_k[b] keys only
        CAUSAL_OFF = CAUSAL_OFF * (N_K - N_Q)  # bottom-right: this sequence's own offset
        if i * BLOCK_M >= N_Q:
            return
        q_base = Q + q_start.to(tl.int64) * stride_qm + h.to(tl.int64) * stride_qh
        k_base = K + k_start.to(tl.int64) * stride_kn + hk.to(tl.int64) * stride_kh
        v_base = V + k_start.to(tl.int64) * stride_vn + hk.to(tl.int64) * stride_vh
        o_base = O + q_start.to(tl.int64) * stride_om + h.to(tl.int64) * stride_oh
    else:
        k_base = K + b.to(tl.int64) * stride_kz + hk.to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vz + hk.to(tl.int64) * stride_vh
        if PACK == 1:
            q_base = Q + b.to(tl.int64) * stride_qz + h.to(tl.int64) * stride_qh
            o_base = O + b.to(tl.int64) * stride_oz + h.to(tl.int64) * stride_oh
            lse_base = LSE + bh.to(tl.int64) * N_Q
        else:  # each row's own head: the pointers below add it
            q_base = Q + b.to(tl.int64) * stride_qz
            o_base = O + b.to(tl.int64) * stride_oz
            lse_base = LSE + (b * H).to(tl.int64) * N_Q

    if PACK == 1:
        offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)  # query positions of the tile's rows
        q_rows = offs_m[:, None] * stride_qm
        o_rows = offs_m[:, None] * stride_om
        lse_rows = offs_m
    else:
        packed = i * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_m = packed // PACK  # position of each row
        head = h * PACK + packed % PACK  # query head of each row
        q_rows = offs_m[:, None] * stride_qm + head.to(tl.int64)[:, None] * stride_qh
        o_rows = offs_m[:, None] * stride_om + head.to(tl.int64)[:, None] * stride_oh
        lse_rows = head.to(tl.int64) * N_Q + offs_m
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_ok = offs_d < HEAD_DIM
    row_ok = offs_m < N_Q

    # Q tile: rows < N_Q loaded once.
    q_ptrs = q_base + q_rows + offs_d[None, :] * stride_qd
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634

    full_lo = 0
    if WINDOW:  # stage 0: the band's left edge, masked
        lo, full_lo, full_end, hi = _band_bounds(i * (BLOCK_M // PACK), tl.minimum((i + 1) * (BLOCK_M // PACK), N_Q),
                                                 (i + 1) * (BLOCK_M // PACK) - 1, N_K, CAUSAL_OFF, WIN_L, WIN_R, BLOCK_N)
        acc, l_i, m_i = _masked_blocks(acc, l_i, m_i, q, k_base, v_base, qk_scale, lo, full_lo, N_K, offs_m,
                                       offs_n, offs_d, d_ok, stride_kn, stride_kd, stride_vn, stride_vd, CAUSAL_OFF,
                                       BLOCK_N, CAUSAL, DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)
    else:
        full_end, hi = _causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M // PACK, BLOCK_N, CAUSAL)  # positions a tile
    # stage 1: blocks every row sees entirely (no key tail, no diagonal): no mask.
    for start_n in tl.range(full_lo, full_end, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        keys = start_n + offs_n
        if HEAD_DIM == HEAD_DIM_PAD:
            k = tl.load(k_base + keys[:, None] * stride_kn + offs_d[None, :] * stride_kd)
            v = tl.load(v_base + keys[:, None] * stride_vn + offs_d[None, :] * stride_vd)
        else:
            k, v = _load_kv(k_base, v_base, keys, offs_d, d_ok[None, :], stride_kn, stride_kd, stride_vn, stride_vd)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K,
                                             CAUSAL_OFF, False, CAUSAL, DOT_PRECISION, EMULATE_BF16)
    # stage 2: the diagonal and the key tail: loads masked to keys < N_K only (the causal
    # bound is applied to the scores, never to the loads: traffic contract).
    acc, l_i, m_i = _masked_blocks(acc, l_i, m_i, q, k_base, v_base, qk_scale, full_end, hi, N_K, offs_m, offs_n,
                                   offs_d, d_ok, stride_kn, stride_kd, stride_vn, stride_vd, CAUSAL_OFF,
                                   BLOCK_N, CAUSAL, DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)

    o, lse = _finish_rows(acc, l_i, m_i)
    tl.store(o_base + o_rows + offs_d[None, :] * stride_od, _to_dtype(o, O.dtype.element_ty, EMULATE_BF16),
             mask=row_ok[:, None] & d_ok[None, :])
    tl.store(lse_base + lse_rows, lse, mask=row_ok)


@triton.jit
def _tma_masked_blocks(acc, l_i, m_i, q, desc_k, desc_v, b, hk, qk_scale, lo, hi, N_K, offs_m, offs_n, CAUSAL_OFF,
                       WIN_L, WIN_R, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                       EMULATE_BF16: tl.constexpr, WINDOW: tl.constexpr):
    """``_masked_blocks`` through tensor descriptors: the K/V blocks at keys lo, lo + BLOCK_N, ... < hi
    (TMA zero-fills keys >= N_K), scores masked as ``_online_softmax_step`` MASKED does."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = desc_v.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K,
                                             CAUSAL_OFF, True, CAUSAL, "tf32", EMULATE_BF16, WIN_L, WIN_R, WINDOW)
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_tma(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale,
                  H, G, N_Q, N_K, CAUSAL_OFF, N_Q_BUCKET, N_K_BUCKET, WIN_L, WIN_R,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, IN_DTYPE: tl.constexpr, WARP_SPECIALIZE: tl.constexpr,
                  EMULATE_BF16: tl.constexpr, REVERSE: tl.constexpr = False, WINDOW: tl.constexpr = False,
                  HEADS_FASTEST: tl.constexpr = False, HEAD_GROUP=0):
    """Prefill forward, tensor descriptors (TMA). Same grid (and grid orders) and blocks as ``_attn_fwd``.

    Descriptors are rank 4 over (B, H, N, d) (K, V: (B, H_kv, N_k, d)) with boxes
    [1, 1, BLOCK, HEAD_DIM]: TMA zero-fills reads and drops writes beyond each head's
    sequence bound, which moves exactly the rows the pointer path's masks request.
    """
    i, bh = _query_tile(REVERSE, HEADS_FASTEST, HEAD_GROUP)
    b, h, hk = _head_of(bh, H, G)
    offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)

    q = desc_q.load([b, h, i * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634

    full_lo = 0
    if WINDOW:  # the band's left edge, masked
        lo, full_lo, full_end, hi = _band_bounds(i * BLOCK_M, tl.minimum((i + 1) * BLOCK_M, N_Q),
                                                 (i + 1) * BLOCK_M - 1, N_K, CAUSAL_OFF, WIN_L, WIN_R, BLOCK_N)
        acc, l_i, m_i = _tma_masked_blocks(acc, l_i, m_i, q, desc_k, desc_v, b, hk, qk_scale, lo, full_lo, N_K,
                                           offs_m, offs_n, CAUSAL_OFF, WIN_L, WIN_R, HEAD_DIM, BLOCK_N, CAUSAL,
                                           EMULATE_BF16, WINDOW)
    else:
        full_end, hi = _causal_bounds(i, N_Q, N_K, CAUSAL_OFF, BLOCK_M, BLOCK_N, CAUSAL)
    for start_n in tl.range(full_lo, full_end, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = desc_k.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = desc_v.load([b, hk, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K,
                                             CAUSAL_OFF, False, CAUSAL, "tf32", EMULATE_BF16)
    acc, l_i, m_i = _tma_masked_blocks(acc, l_i, m_i, q, desc_k, desc_v, b, hk, qk_scale, full_end, hi, N_K, offs_m,
                                       offs_n, CAUSAL_OFF, WIN_L, WIN_R, HEAD_DIM, BLOCK_N, CAUSAL, EMULATE_BF16,
                                       WINDOW)

    o, lse = _finish_rows(acc, l_i, m_i)
    desc_o.store([b, h, i * BLOCK_M, 0], _to_dtype(o, desc_o.dtype, EMULATE_BF16).reshape(1, 1, BLOCK_M, HEAD_DIM))
    tl.store(LSE + bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)


@triton.jit
def _paged_blocks(acc, l_i, m_i, q, k_base, v_base, bt_base, stride_btp, qk_scale, lo, hi, key_end, offs_m, offs_n,
                  offs_d, d_ok, stride_kz, stride_kn, stride_kd, stride_vz, stride_vn, stride_vd, CAUSAL_OFF,
                  BLOCK_N: tl.constexpr, PAGE_SIZE: tl.constexpr, CAUSAL: tl.constexpr, DOT_PRECISION: tl.constexpr,
                  EMULATE_BF16: tl.constexpr):
    """``_masked_blocks`` over a paged cache: key block [start_n, start_n + BLOCK_N) (BLOCK_N <=
    PAGE_SIZE, both powers of two: one page) lies in page ``block_table[b, start_n // PAGE_SIZE]``
    at rows ``start_n % PAGE_SIZE + j``. Per block one int32 table entry is loaded, and the K/V
    rows masked to keys < key_end only (traffic contract, "Paged KV cache")."""
    for start_n in tl.range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        page = tl.load(bt_base + (start_n // PAGE_SIZE) * stride_btp).to(tl.int64)
        keys = start_n + offs_n
        rows = start_n % PAGE_SIZE + offs_n  # rows within the page
        kv_ok = (keys < key_end)[:, None] & d_ok[None, :]
        k, v = _load_kv(k_base + page * stride_kz, v_base + page * stride_vz, rows, offs_d, kv_ok, stride_kn,
                        stride_kd, stride_vn, stride_vd)
        acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, key_end,
                                             CAUSAL_OFF, True, CAUSAL, DOT_PRECISION, EMULATE_BF16)
    return acc, l_i, m_i


@triton.jit
def _attn_decode(Q, K, V, O, LSE, O_PART, LSE_PART, SEM, BLOCK_TABLE, SEQLENS, sm_scale,
                 stride_qz, stride_qh, stride_qm, stride_qd,
                 stride_kz, stride_kh, stride_kn, stride_kd,
                 stride_vz, stride_vh, stride_vn, stride_vd,
                 stride_oz, stride_oh, stride_om, stride_od,
                 stride_btz, stride_btp,
                 H, H_KV, G, N_Q, N_K, CAUSAL_OFF, SPLIT_LEN, NUM_SPLITS, WIN_L, WIN_R, OFF_SEQLEN,
                 HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEADS_PER_PROGRAM: tl.constexpr,
                 CAUSAL: tl.constexpr, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr,
                 EMULATE_BF16: tl.constexpr, WINDOW: tl.constexpr = False,
                 PAGED: tl.constexpr = False, PAGE_SIZE: tl.constexpr = 16, FUSED: tl.constexpr = False,
                 MERGE_STAGES: tl.constexpr = 1):
    """Split-KV decode. Grid (num_splits, B*H_kv*(G/P)): program (sp, (b*H_kv + hk)*(G/P) + gp).

    PAGED: K, V are ``(num_blocks, PAGE_SIZE, H_kv, d)`` pages (strides kz = page, kn = row in
    the page), BLOCK_TABLE ``(B, max_pages)`` int32 and SEQLENS ``(B,)`` int32; the program reads
    its sequence's N_K = SEQLENS[b] once and uses CAUSAL_OFF + OFF_SEQLEN * N_K as the causal
    offset (bottom-right: -N_Q + N_K per sequence); N_K passed is the tables' capacity, which
    SPLIT_LEN covers (splits past a sequence's keys are empty).

    Rows r < P*N_Q of the program are (query head hk*G + gp*P + r // N_Q, query r % N_Q).
    Split sp covers keys [sp*SPLIT_LEN, min((sp+1)*SPLIT_LEN, N_K)); K/V loads are masked
    to keys < split end; causal blocks whose first key >= hi = clamp(N_Q + off, 0, N_K)
    are skipped. WINDOW: blocks outside the band of rows 0..N_Q-1 ([lo, hi) of ``_band_bounds``)
    are skipped and the band masks the scores. SPLIT: write fp32 partials (O_PART (B, H, S, N_Q, d), LSE_PART
    (B, H, S, N_Q)); else write O and LSE directly.

    FUSED (with SPLIT; one launch, no combine kernel): after its partial stores every program
    adds 1 to its group's int32 counter ``SEM[pid]`` (``pid`` = program_id(1): one counter per
    (b, KV head, head group); acq_rel at GPU scope, after a CTA barrier so the release orders
    every thread's stores). The program that reads NUM_SPLITS - 1 is the last: it reads the
    NUM_SPLITS partials of its P·N_Q rows back (split order, so the result does not depend on
    which program is last), merges them by their LSEs as ``_attn_decode_combine`` does, writes O
    and LSE, and stores 0 to the counter (ready for the next launch: no memset).
    """
    sp = tl.program_id(0)
    pid = tl.program_id(1)
    groups = G // HEADS_PER_PROGRAM
    b = pid // (H_KV * groups)
    rem = pid % (H_KV * groups)
    hk = rem // groups
    gp = rem % groups

    rows = tl.arange(0, BLOCK_M)
    row_ok = rows < HEADS_PER_PROGRAM * N_Q
    qm = rows % N_Q  # query row within the head
    h = hk * G + gp * HEADS_PER_PROGRAM + rows // N_Q  # query head of each row
    h = tl.where(row_ok, h, hk * G)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_ok = offs_d < HEAD_DIM

    q_ptrs = (Q + b.to(tl.int64) * stride_qz + h.to(tl.int64)[:, None] * stride_qh
              + qm[:, None] * stride_qm + offs_d[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    if PAGED:  # the page's base is added per key block (_paged_blocks)
        k_base = K + hk.to(tl.int64) * stride_kh
        v_base = V + hk.to(tl.int64) * stride_vh
        N_K = tl.load(SEQLENS + b)  # this sequence's keys
        CAUSAL_OFF = CAUSAL_OFF + OFF_SEQLEN * N_K
    else:
        k_base = K + b.to(tl.int64) * stride_kz + hk.to(tl.int64) * stride_kh
        v_base = V + b.to(tl.int64) * stride_vz + hk.to(tl.int64) * stride_vh

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    qk_scale = sm_scale * 1.4426950408889634

    start = sp * SPLIT_LEN
    end = tl.minimum(start + SPLIT_LEN, N_K)
    stop = end
    if WINDOW:
        lo, _, _, hi = _band_bounds(0, N_Q, N_Q - 1, N_K, CAUSAL_OFF, WIN_L, WIN_R, BLOCK_N)
        start = tl.maximum(start, lo)
        stop = tl.minimum(end, hi)
    elif CAUSAL:
        stop = tl.minimum(end, tl.minimum(tl.maximum(N_Q + CAUSAL_OFF, 0), N_K))
    if PAGED:
        acc, l_i, m_i = _paged_blocks(acc, l_i, m_i, q, k_base, v_base, BLOCK_TABLE + b.to(tl.int64) * stride_btz,
                                      stride_btp, qk_scale, start, stop, end, qm, offs_n, offs_d, d_ok, stride_kz,
                                      stride_kn, stride_kd, stride_vz, stride_vn, stride_vd, CAUSAL_OFF, BLOCK_N,
                                      PAGE_SIZE, CAUSAL, DOT_PRECISION, EMULATE_BF16)
    else:
        acc, l_i, m_i = _masked_blocks(acc, l_i, m_i, q, k_base, v_base, qk_scale, start, stop, end, qm, offs_n,
                                       offs_d, d_ok, stride_kn, stride_kd, stride_vn, stride_vd, CAUSAL_OFF,
                                       BLOCK_N, CAUSAL, DOT_PRECISION, EMULATE_BF16, WIN_L, WIN_R, WINDOW)

    o, lse = _finish_rows(acc, l_i, m_i)
    o_ptrs = (O + b.to(tl.int64) * stride_oz + h.to(tl.int64)[:, None] * stride_oh
              + qm[:, None] * stride_om + offs_d[None, :] * stride_od)
    lse_ptrs = LSE + (b.to(tl.int64) * H + h.to(tl.int64)) * N_Q + qm
    out_ok = row_ok[:, None] & d_ok[None, :]
    if SPLIT:
        first = (b.to(tl.int64) * H + h.to(tl.int64)) * NUM_SPLITS * N_Q + qm  # (BLOCK_M,) row of split 0
        part = first + sp * N_Q
        tl.store(O_PART + part[:, None] * HEAD_DIM + offs_d[None, :], o, mask=out_ok)
        tl.store(LSE_PART + part, lse, mask=row_ok)
        if FUSED:
            tl.debug_barrier()  # every thread's partial stores precede the release below
            done = tl.atomic_add(SEM + pid, 1, sem="acq_rel")
            if done == NUM_SPLITS - 1:  # the last split program of this group merges
                o, lse = _merge_partials(O_PART, LSE_PART, first, N_Q, NUM_SPLITS, offs_d, row_ok, d_ok,
                                         HEAD_DIM, BLOCK_M, HEAD_DIM_PAD, MERGE_STAGES)
                tl.store(o_ptrs, _to_dtype(o, O.dtype.element_ty, EMULATE_BF16), mask=out_ok)
                tl.store(lse_ptrs, lse, mask=row_ok)
                tl.store(SEM + pid, 0)  # reset for the next launch
    else:
        tl.store(o_ptrs, _to_dtype(o, O.dtype.element_ty, EMULATE_BF16), mask=out_ok)
        tl.store(lse_ptrs, lse, mask=row_ok)


@triton.jit
def _merge_partials(O_PART, LSE_PART, first, N_Q, NUM_SPLITS, offs_d, row_ok, d_ok, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, MERGE_STAGES: tl.constexpr):
    """Merge the NUM_SPLITS partials of a program's rows (fused split-KV decode): ``(o, lse)``.

    ``first`` (BLOCK_M,): each row's partial row index in split 0 (split sp at first + sp·N_Q);
    rows outside ``row_ok`` and columns outside ``d_ok`` are not loaded. o = Σ_s exp(lse_s − lse)
    O_s, lse = log Σ_s exp(lse_s) (Flash-Decoding), kept online in split order; a row whose
    every split is empty gets o = 0, lse = −inf. Loads bypass L1 (``.cg``): the partials were
    written by other programs of this launch.
    """
    m_run = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_run = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM_PAD], dtype=tl.float32)
    for s in tl.range(0, NUM_SPLITS, num_stages=MERGE_STAGES):  # 1: not pipelined (FUSED_MERGE_STAGES)
        row = first + s * N_Q
        lse_s = tl.load(LSE_PART + row, mask=row_ok, other=float("-inf"), cache_modifier=".cg")
        o_s = tl.load(O_PART + row[:, None] * HEAD_DIM + offs_d[None, :], mask=row_ok[:, None] & d_ok[None, :],
                      other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_run, lse_s)
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)  # every split so far empty
        alpha = tl.exp(m_run - m_sub)
        w = tl.exp(lse_s - m_sub)  # 0 for an empty split
        l_run = l_run * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * o_s
        m_run = m_new
    empty = l_run == 0.0
    l_safe = tl.where(empty, 1.0, l_run)
    return acc / l_safe[:, None], tl.where(empty, float("-inf"), m_run + tl.log(l_safe))


@triton.jit
def _attn_decode_combine(O, LSE, O_PART, LSE_PART,
                         stride_oz, stride_oh, stride_om, stride_od,
                         H, N_Q, NUM_SPLITS,
                         HEAD_DIM: tl.constexpr, HEAD_DIM_PAD: tl.constexpr, BLOCK_S: tl.constexpr,
                         EMULATE_BF16: tl.constexpr):
    """Merge the split-KV partials: grid (B*H, N_Q), program (b*H + h, query row m).

    O = sum_s exp(lse_s - lse) O_s, lse = log sum_s exp(lse_s) (Flash-Decoding, Dao et al.
    2023). The programs of one (b, h) together read every partial of (b, h) once and write
    its O (dtype) and LSE (fp32) once. Splits are read BLOCK_S at a time (one
    (BLOCK_S, d) tile per step), so a few dozen splits cost one round of loads, not a
    chain of dependent ones.
    """
    bh = tl.program_id(0)
    m = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, HEAD_DIM_PAD)
    d_ok = offs_d < HEAD_DIM
    m_run = tl.full([1], float("-inf"), dtype=tl.float32)
    l_run = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], dtype=tl.float32)
    for s0 in range(0, NUM_SPLITS, BLOCK_S):
        sp = s0 + offs_s
        s_ok = sp < NUM_SPLITS
        row = (bh.to(tl.int64) * NUM_SPLITS + sp) * N_Q + m  # (BLOCK_S,) partial row of split sp
        lse_s = tl.load(LSE_PART + row, mask=s_ok, other=float("-inf"))
        o_s = tl.load(O_PART + row[:, None] * HEAD_DIM + offs_d[None, :], mask=s_ok[:, None] & d_ok[None, :],
                      other=0.0)
        m_new = tl.maximum(m_run, tl.max(lse_s, 0, keep_dims=True))
        m_sub = tl.where(m_new == float("-inf"), 0.0, m_new)  # every split empty so far
        alpha = tl.exp(m_run - m_sub)
        w = tl.exp(lse_s - m_sub)  # (BLOCK_S,); 0 for empty splits
        l_run = l_run * alpha + tl.sum(w, 0, keep_dims=True)
        acc = acc * alpha + tl.sum(w[:, None] * o_s, 0)
        m_run = m_new
    empty = l_run == 0.0
    l_safe = tl.where(empty, 1.0, l_run)
    o = acc / l_safe
    lse = tl.where(empty, float("-inf"), m_run + tl.log(l_safe))
    o_ptrs = O + b.to(tl.int64) * stride_oz + h.to(tl.int64) * stride_oh + m.to(tl.int64) * stride_om + offs_d * stride_od
    tl.store(o_ptrs, _to_dtype(o, O.dtype.element_ty, EMULATE_BF16), mask=d_ok)
    tl.store(LSE + bh.to(tl.int64) * N_Q + m + tl.arange(0, 1), lse)


# ====================================================================================
# Autotuned wrappers (GPU only; the interpreter runs one fixed configuration)
# ====================================================================================
_TUNE_KEY = ["N_Q_BUCKET", "N_K_BUCKET", "HEAD_DIM", "CAUSAL", "WINDOW", "VARLEN"]


def _tma_pre_hook(nargs: dict[str, Any]) -> None:
    """Set the descriptors' boxes to the config's tiles (Triton tutorial 06 does the same)."""
    bm, bn, d = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["HEAD_DIM"]
    nargs["desc_q"].block_shape = [1, 1, bm, d]
    nargs["desc_o"].block_shape = [1, 1, bm, d]
    nargs["desc_k"].block_shape = [1, 1, bn, d]
    nargs["desc_v"].block_shape = [1, 1, bn, d]


def _triton_configs(choices: list[hx.TileChoice], tma: bool) -> list[Any]:
    out = []
    for c in choices:
        kw: dict[str, Any] = {"BLOCK_M": c.block_m, "BLOCK_N": c.block_n, "REVERSE": c.tile_order == "reverse"}
        if tma:
            kw["WARP_SPECIALIZE"] = c.warp_specialize
        out.append(triton.Config(kw, num_warps=c.num_warps, num_stages=c.num_stages,
                                 pre_hook=_tma_pre_hook if tma else None))
    return out


_TUNED: dict[tuple, Any] = {}


def _tuned_kernel(path: str, head_dim: int, dtype: str, causal: bool) -> Any:
    """The ``triton.autotune`` wrapper of one shape class (its own candidate list)."""
    key = (path, head_dim_padded(head_dim), dtype, causal)
    if key not in _TUNED:
        tma = path == "prefill-tma"
        choices = hx.prefill_candidates(head_dim, dtype, causal, path)
        extra = {"do_bench": _wall_clock_bench} if INTERPRET else {}
        _TUNED[key] = triton.autotune(configs=_triton_configs(choices, tma), key=_TUNE_KEY, **extra)(
            _attn_fwd_tma if tma else _attn_fwd)
    return _TUNED[key]


def _wall_clock_bench(fn: Any, quantiles: Any = None, **_: Any) -> Any:
    """Interpreter stand-in for ``do_bench`` (the GPU benchmarker needs a device): one wall-clock
    run. Only lets ``autotune=True`` exercise the autotuning path on a CPU; the times mean nothing."""
    import time

    t0 = time.perf_counter()
    fn()
    ms = (time.perf_counter() - t0) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


def _choice_to_config(c: Any, path: str) -> KernelConfig:
    kw = c.kwargs
    return KernelConfig(block_m=kw["BLOCK_M"], block_n=kw["BLOCK_N"], num_warps=c.num_warps,
                        num_stages=c.num_stages, path=path, warp_specialize=bool(kw.get("WARP_SPECIALIZE", False)),
                        tile_order="reverse" if kw.get("REVERSE", False) else "forward")


# ====================================================================================
# Host side
# ====================================================================================


def _alloc(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Allocate an output or partial buffer (uninitialised; every element is written).

    Tests replace this function to poison the buffers and prove every element is written.
    """
    return torch.empty(shape, dtype=dtype, device=device)


def _alloc_like(t: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of ``t``'s shape, dtype, device and strides: ``o`` of a plan whose q is
    contiguous (``_Plan.o_like_q``). ``torch.empty_like`` skips the shape, dtype and device parsing of
    :func:`_alloc`'s ``torch.empty``: 1.8 against 3.0–3.4 µs a call on the H200's host
    (``benchmarks/host_profile.py``, receipts/host-profile-h200-2026-12-03-c.txt). Tests replace it,
    as they replace :func:`_alloc`, by a NaN-filled tensor to prove every element is written."""
    return torch.empty_like(t)


_UNUSED: dict[torch.device, torch.Tensor] = {}


def _unused_buffer(device: torch.device) -> torch.Tensor:
    """A 1-element fp32 buffer passed for kernel arguments a launch never reads or writes
    (so traffic counters never attribute bytes to an alias of O or LSE); one per device, looked
    up by the device itself (no string per call on the launch path)."""
    buf = _UNUSED.get(device)
    if buf is None:
        buf = _UNUSED[device] = torch.zeros(1, dtype=torch.float32, device=device)
    return buf


#: Fused decode workspaces: (device index, stream) -> [fp32 partials, int32 counters], grown
#: on demand and never freed (a CUDA graph captured on them keeps their addresses).
_WORKSPACES: dict[Any, list[torch.Tensor]] = {}
_RETIRED: list[torch.Tensor] = []  # outgrown workspace buffers, kept alive for captured graphs


def _stream_key() -> Any:
    """(current device index, current stream handle): what one fused-decode workspace serves
    (launches of one stream run in order, so they may share it; two streams may not). The
    interpreter has one: None."""
    if INTERPRET:
        return None
    device = _GET_DEVICE()
    return device, _GET_STREAM(device)


#: (device index, its current stream handle) lookups of the launch path: torch's C calls where
#: this torch has them. ``torch._C._cuda_getDevice`` is what ``torch.cuda.current_device``
#: (Triton 3.6's ``get_current_device``) returns after its lazy-init check, which a launch has
#: passed; Triton's ``get_current_stream`` is ``torch._C._cuda_getCurrentRawStream`` itself.
_GET_DEVICE = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_GET_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (lambda i: torch.cuda.current_stream(i).cuda_stream)


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for x in shape:
        n *= x
    return n


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _shared_workspace(key: Any, device: torch.device, n_part: int, n_sem: int) -> list[torch.Tensor]:
    """The fused decode's buffers of stream ``key``, with at least ``n_part`` fp32 elements of
    partials (uninitialised: every element a launch reads it wrote first, allocated by
    :func:`_alloc`) and ``n_sem`` int32 counters (zero, and zero again after every launch: the
    merging program resets its counter). A buffer too small is replaced by one twice as large
    (at least the need) and kept alive in ``_RETIRED``. Allocates only on a miss (first call
    on a stream, or a larger shape): plain calls afterwards allocate nothing here. A miss
    while a CUDA graph is being captured allocates inside the capture (the graph then zeroes
    the counters on replay): warm up on the capture stream to keep that out of the graph."""
    bufs = _WORKSPACES.get(key)
    if bufs is None:
        bufs = _WORKSPACES[key] = [_alloc((_round_up(n_part, 64),), torch.float32, device),
                                   torch.zeros(_round_up(n_sem, 64), dtype=torch.int32, device=device)]
        return bufs
    if bufs[0].numel() < n_part:
        _RETIRED.append(bufs[0])
        bufs[0] = _alloc((max(n_part, 2 * bufs[0].numel()),), torch.float32, device)
    if bufs[1].numel() < n_sem:
        _RETIRED.append(bufs[1])
        bufs[1] = torch.zeros(max(n_sem, 2 * bufs[1].numel()), dtype=torch.int32, device=device)
    return bufs


_DEVICE_LIMITS: dict[Any, tuple[int, int, int]] = {}


def _device_limits(device: torch.device) -> tuple[int, int, int]:
    """(SM count, shared memory per SM in bytes, L2 bytes) of ``device``, read once per device from
    ``torch.cuda.get_device_properties``; off CUDA (the interpreter)
    (:data:`heuristics.INTERPRETER_NUM_SMS`, :data:`heuristics.INTERPRETER_SMEM_PER_SM`,
    :data:`heuristics.INTERPRETER_L2_BYTES`)."""
    if device.type == "cuda" and torch.cuda.is_available():
        key = device.index if device.index is not None else torch.cuda.current_device()
        if key not in _DEVICE_LIMITS:
            props = torch.cuda.get_device_properties(key)
            _DEVICE_LIMITS[key] = (props.multi_processor_count, int(props.shared_memory_per_multiprocessor),
                                   int(props.L2_cache_size))
        return _DEVICE_LIMITS[key]
    return hx.INTERPRETER_NUM_SMS, hx.INTERPRETER_SMEM_PER_SM, hx.INTERPRETER_L2_BYTES


def _sm_limits(device: torch.device) -> tuple[int, int]:
    """(SM count, shared memory per SM in bytes) of ``device`` (:func:`_device_limits`)."""
    return _device_limits(device)[:2]


def _num_sms(device: torch.device) -> int:
    """SM count of ``device`` (:func:`_device_limits`)."""
    return _device_limits(device)[0]


def _l2_bytes(device: torch.device) -> int:
    """L2 bytes of ``device`` (:func:`_device_limits`)."""
    return _device_limits(device)[2]


def _tma_ok(*tensors: torch.Tensor) -> bool:
    """Whether host tensor descriptors can describe these tensors (16-byte base and strides, unit last stride)."""
    if TensorDescriptor is None:
        return False
    for t in tensors:
        s = t.element_size()
        if t.stride(-1) != 1 or t.data_ptr() % 16 or any((st * s) % 16 for st in t.stride()[:-1]):
            return False
    return True


def kernel_path(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, windowed: bool = False, *, causal: bool) -> str:
    """The path :func:`flash_attention` takes for these inputs (without ``path=``).

    ``decode-split-kv`` when seqlen_q <= 16 (``DECODE_MAX_SEQLEN_Q``); else
    :func:`iomodel.schedule.capabilities.prefill_path` for the device's compute capability:
    on an sm_90 GPU with TMA-aligned fp16/bf16 tensors (unless ``IOMODEL_TMA=0``),
    ``prefill-gluon`` at HEAD_DIM 128, and 64 when not ``causal``, without a window (``windowed``; unless
    ``IOMODEL_GLUON=0`` or Triton lacks Gluon; ``capabilities.GLUON_AUTO``) and ``prefill-tma`` for the
    other power-of-two HEAD_DIMs in 16..256;
    else ``prefill`` (pointer loads; always in the interpreter).
    """
    if q.shape[2] <= DECODE_MAX_SEQLEN_Q:
        return "decode-split-kv"
    if INTERPRET or not q.is_cuda:
        return "prefill"
    return prefill_path(tensor_dtype_name(q.dtype), q.shape[-1], torch.cuda.get_device_capability(q.device)[0],
                        _tma_ok(q, k, v), USE_TMA, windowed, USE_GLUON and _gluon_import_error() is None, causal=causal)


def _gluon_import_error() -> str | None:
    """Why Triton's Gluon dialect cannot be imported here (one line), or None."""
    from kernels.gluon_attention import GLUON_IMPORT_ERROR

    return GLUON_IMPORT_ERROR


def _gluon_reason(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: Any, windowed: bool) -> str | None:
    """Why path ``prefill-gluon`` cannot run these inputs here (one line), or None."""
    sm_major = None if INTERPRET or not q.is_cuda else torch.cuda.get_device_capability(q.device)[0]
    reason = gluon_refusal(shape.dtype, shape.head_dim, _tma_ok(q, k, v), windowed, sm_major)
    if reason is None and _gluon_import_error() is not None:
        reason = (f"path 'prefill-gluon' needs Triton's Gluon dialect, which does not import here "
                  f"({_gluon_import_error()}): use path='prefill-tma' (or None)")
    return reason


def _check_device(q: torch.Tensor) -> None:
    if INTERPRET:
        return
    if not q.is_cuda:
        raise IomodelError(
            f"the Triton kernel needs CUDA tensors, got tensors on {q.device}: move them to a GPU, "
            "or set TRITON_INTERPRET=1 before importing kernels.flash_attention to run Triton's CPU interpreter"
        )


def _check_path(config: KernelConfig, path: str) -> None:
    """Refuse ``config`` run on another path than its own (one line)."""
    if config.path != path:
        raise IomodelError(f"config.path is {config.path!r} but this call runs {path!r}: set config.path={path!r}")


def _check_tile_order(config: KernelConfig) -> None:
    """Refuse an unknown query-tile order (one line)."""
    if config.tile_order not in hx.TILE_ORDERS:
        raise IomodelError(f"config.tile_order must be 'forward' or 'reverse', got {config.tile_order!r}: change it")


def _check_config(config: KernelConfig, path: str) -> None:
    _check_path(config, path)  # first: another path's config (e.g. the Gluon prefill's 12 warps) fails here
    for name in ("block_m", "block_n"):
        reason = block_size_refusal(name, getattr(config, name))
        if reason is not None:
            raise IomodelError(reason)
    if config.num_warps not in NUM_WARPS:
        raise IomodelError(f"config.num_warps must be one of {', '.join(map(str, NUM_WARPS))}, "
                           f"got {config.num_warps!r}: change it")
    if not (isinstance(config.num_stages, int) and config.num_stages >= 1):
        raise IomodelError(f"config.num_stages must be a positive integer, got {config.num_stages!r}: change it")
    _check_tile_order(config)
    if path == "decode-split-kv" and config.tile_order != "forward":
        raise IomodelError("tile_order applies to the prefill paths only: set config.tile_order='forward'")
    if config.grid_order not in KERNEL_GRID_ORDERS and not head_group_of(config.grid_order):
        raise IomodelError(f"config.grid_order must be one of {', '.join(map(repr, KERNEL_GRID_ORDERS))} or "
                           f"'head-grouped:G' (G >= 1), got {config.grid_order!r}: change it")
    if path == "decode-split-kv" and config.grid_order != KERNEL_GRID_ORDERS[0]:
        raise IomodelError(f"grid_order applies to the prefill paths only: set config.grid_order={KERNEL_GRID_ORDERS[0]!r}")


def _needs_grad(q: Any, k: Any, v: Any) -> bool:
    """Grad mode is on and q, k or v is a tensor that requires grad (three attribute reads in
    the common case: no per-call generator)."""
    if not torch.is_grad_enabled():
        return False
    try:
        if not (q.requires_grad or k.requires_grad or v.requires_grad):
            return False
    except AttributeError:  # not tensors: the plan's checks refuse them
        pass
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v))


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (B, H, N_q, d), (B, H_kv, N_k, d), (B, H_kv, N_k, d)
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    return_config: bool = False,
    *,
    config: KernelConfig | None = None,
    path: str | None = None,
    autotune: bool | None = None,
    num_sms: int | None = None,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    window: tuple[int | None, int | None] | None = None,
    block_table: torch.Tensor | None = None,
    cache_seqlens: torch.Tensor | None = None,
    check: bool = True,
) -> tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, KernelConfig]:
    """FlashAttention forward: ``o = softmax(sm_scale · q kᵀ + mask) v`` and its LSE.

    Args:
        q: ``(B, H, N_q, d)`` fp16, bf16 or fp32, on CUDA (or CPU under TRITON_INTERPRET=1).
        k, v: ``(B, H_kv, N_k, d)``, same dtype and device; H divisible by H_kv (GQA/MQA by
            index mapping, no copies).
        causal: apply the causal mask (True or False; 1, 0 and other values are refused).
        causal_align: ``top-left`` (row m sees keys n <= m, PyTorch ``is_causal``) or
            ``bottom-right`` (n <= m + N_k - N_q, flash-attn >= 2.1, KV-cache decode).
        sm_scale: score scale (> 0), default ``1 / sqrt(d)``.
        return_config: also return the :class:`KernelConfig` that ran.
        config: run exactly these tiles on ``config.path`` (``path``, if given, must
            match it); ``None``:
            autotuned on a GPU (or :func:`heuristics.prefill_default` if ``autotune`` is
            False), the fixed interpreter tiles on a CPU, :func:`heuristics.decode_config`
            for decode; ``prefill-gluon`` has one configuration (``heuristics.GLUON_TILES``,
            any tiles-fastest or head-grouped grid order and either tile order).
        path: force ``prefill``, ``prefill-tma``, ``prefill-gluon`` (sm_90, fp16/bf16, HEAD_DIM 64
            or 128, no window: ``kernels/gluon_attention.py``) or ``decode-split-kv`` (decode needs
            N_q <= 16); ``None``: ``config.path`` if a config is given, else :func:`kernel_path`
            (``prefill-gluon`` on Hopper at HEAD_DIM 128, and 64 non-causal: ``capabilities.GLUON_AUTO``).
        autotune: prefill only; default True on a GPU, False in the interpreter (where
            ``autotune=True`` runs the GPU candidates with a meaningless wall-clock
            benchmark, to exercise the autotuning path); ``prefill-gluon`` is never autotuned
            (``autotune=True`` is refused there).
        num_sms: SM count for the split-KV heuristic (default: the device's; 4 in the interpreter).
        out: preallocated ``(o, lse)`` of shapes ``(B, H, N_q, d)`` (q's dtype) and
            ``(B, H, N_q)`` fp32, contiguous, on q's device.
        window: sliding window ``(left, right)`` in tokens (flash-attn's ``window_size``):
            row m sees key n only if ``m + off − left <= n <= m + off + right``, with off
            the alignment offset of ``causal_align`` (applied whether or not ``causal``);
            -1 or None = unbounded side; ``causal`` caps right at 0. Key blocks outside the
            band are skipped (``docs/traffic-contract.md``). Prefill, decode and backward.
        block_table, cache_seqlens: a paged KV cache (flash-attn ``flash_attn_with_kvcache`` /
            vLLM convention): k and v are then ``k_cache``, ``v_cache`` of shape
            ``(num_blocks, page_size, H_kv, d)`` (page_size in 16, 32, ..., 1024), ``block_table``
            ``(B, max_pages)`` int32 gives the page of each sequence's p-th ``page_size`` keys and
            ``cache_seqlens`` ``(B,)`` int32 its number of keys (read on the device: each program
            loads its own, so causal bottom-right aligns each sequence's last query row with its
            last key; 0 is an empty slot: o = 0, lse = −inf, as ``seqused_k[b] = 0`` in
            :func:`flash_attention_varlen`). Decode path only (N_q <= 16), no window, no backward; BLOCK_N is
            ``min(BLOCK_N, page_size)``; the split length covers ``max_pages * page_size`` keys.
        check: paged only: check the tables' contents on the host (every cache_seqlens in
            ``0..max_pages * page_size``, every entry of the pages a sequence uses in
            ``0..num_blocks - 1``). It copies both tables to the host (a synchronisation): pass
            ``check=False`` when capturing a CUDA graph or in a serving loop whose tables are
            known good (an out-of-range entry then reads outside the cache).

    Split-KV decode (``num_splits > 1``, ``config.fused_combine`` True, the default) is one
    launch whose partials and int32 counters live in a workspace cached per (device, stream):
    the first call on a stream (or a larger shape) allocates it; calls on one stream share it
    in stream order, other streams get their own. Warm up on the stream a CUDA graph is
    captured on, or the allocation (and its counter memset) is captured into the graph.

    Returns:
        ``(o, lse)`` or ``(o, lse, config)``: o like q (q's dtype), lse ``(B, H, N_q)``
        fp32 natural-log LSE. A row that sees no key (causal bottom-right with
        N_q > N_k, a window, or a paged sequence with cache_seqlens[b] = 0) has o = 0 and lse = −inf.

    Raises:
        IomodelError: non-tensor or non-floating input (integer dtypes), mixed dtypes or
            devices, mismatched batch/heads/HEAD_DIM, H not a multiple of H_kv, an unknown
            alignment, a non-positive scale, a window that is not two sides each >= 0, -1 or None, a layer the kernel does not run
            (:func:`iomodel.schedule.capabilities.kernel_refusal`: HEAD_DIM > 256, fp8 or
            fp64, decode with seqlen_q > 16), non-CUDA tensors outside the interpreter, an
            impossible forced path (:func:`~iomodel.schedule.capabilities.tma_refusal`,
            :func:`~iomodel.schedule.capabilities.gluon_refusal`: Hopper only, HEAD_DIM 64 or 128,
            no window, no interpreter) or config (``prefill-gluon``: not its one configuration,
            or ``autotune=True``), or a bad ``out``; paged: non-int32 tables, an unsupported page_size,
            mismatched H_kv/HEAD_DIM/batch, N_q > 16, a window, inputs requiring grad, and (when
            ``check``) a block_table entry out of range or cache_seqlens outside 0..max_pages·page_size.
    """
    if block_table is not None or cache_seqlens is not None:
        if block_table is None or cache_seqlens is None:
            raise IomodelError("a paged KV cache needs both block_table and cache_seqlens: pass both (or neither)")
        if _needs_grad(q, k, v):
            raise IomodelError("the paged KV cache (decode) has no backward: call it under torch.no_grad()")
        o, lse, cfg = _forward(q, k, v, causal, causal_align, sm_scale, config=config, path=path, autotune=autotune,
                               num_sms=num_sms, out=out, window=window, paged=(block_table, cache_seqlens),
                               check=check)
        return (o, lse, cfg) if return_config else (o, lse)
    if _needs_grad(q, k, v):
        forward_kwargs = dict(config=config, path=path, autotune=autotune, num_sms=num_sms, out=out, window=window)
        from kernels.backward import FlashAttentionFunction

        if path == "decode-split-kv" or (config is not None and config.path == "decode-split-kv"):
            raise IomodelError("the split-KV decode path has no backward: use path='prefill' (or None) when q, k "
                               "or v requires grad, or call it under torch.no_grad()")
        if out is not None:
            raise IomodelError("out= cannot be used when q, k or v requires grad (autograd owns o): pass out=None")
        if path is None and (config is None or config.path not in ("prefill-tma", "prefill-gluon")):
            chosen = kernel_path(q, k, v, window is not None, causal=causal)
            forward_kwargs["path"] = autograd_forward_path(chosen)
        o, lse, cfg = FlashAttentionFunction.apply(q, k, v, causal, causal_align, sm_scale, forward_kwargs)
    else:
        o, lse, cfg = _forward(q, k, v, causal, causal_align, sm_scale, config=config, path=path,
                               autotune=autotune, num_sms=num_sms, out=out, window=window)
    if return_config:
        return o, lse, cfg
    return o, lse


# ------------------------------------------------------------------------------------
# Launch plans: everything that depends only on shapes, strides, dtypes, device and flags
# is worked out once per key and replayed from a dictionary (issue 14: host overhead).
# ------------------------------------------------------------------------------------
def _compiled_handle(ret: Any) -> Any:
    """``ret`` when a JIT launch returned a compiled GPU kernel (Triton 3.6 ``CompiledKernel``
    with its handles loaded), else None (the interpreter returns no such object)."""
    return ret if hasattr(ret, "packed_metadata") and getattr(ret, "function", None) is not None else None


class _Launch:
    """One kernel launch of a plan: the kernel, its grid and every argument after the per-call
    pointers (``named``, by parameter name), and the launch options.

    The first call goes through Triton's JIT (``kernel[grid](...)``: binds, specialises and
    compiles). On a GPU the compiled kernel it returns is kept; later calls whose pointers are
    16-byte aligned (the specialisation the JIT saw) call its launcher
    directly, ``compiled.run(grid, stream, function, metadata, hooks, *args)``, the call Triton
    3.6 ``JITFunction.run`` itself ends with (``triton/runtime/jit.py``), without re-binding
    the arguments or recomputing the specialisation key. Alignment is the callers' guarantee
    (see :meth:`__call__`), not checked per call; launch hooks (proton) and another device take
    the JIT path.

    Once compiled, a kernel that needs no scratch memory is launched by Triton's C launcher
    itself (:func:`_raw_launcher`), without ``CudaLauncher.__call__``'s Python frame.

    ``boxes``: the TMA launches' descriptor boxes (elements per axis), one per leading
    per-call tensor, which the launch turns into host tensor descriptors of the tensor's real
    extents. Once compiled, the CUDA tensor maps that Triton's launcher would encode per call
    (``make_tensordesc_arg``: one ``cuTensorMapEncodeTiled`` per descriptor,
    ``triton/backends/nvidia/driver.py``) are cached per tuple of the tensors' addresses (a map
    is a function of address, extents, strides, box, dtype, swizzle and padding; the plan and
    the compiled kernel's descriptor metadata fix all but the address) and passed to the C launcher: no ``TensorDescriptor`` object per call.
    """

    __slots__ = ("kernel", "grid", "named", "options", "tail", "compiled", "direct", "device", "boxes", "raw",
                 "tma_args", "descriptor")

    def __init__(self, kernel: Any, grid: tuple[int, int, int], named: dict[str, Any], options: dict[str, Any],
                 direct: bool, boxes: tuple[tuple[int, ...], ...] | None = None, descriptor: Any = None) -> None:
        self.kernel, self.grid, self.named, self.options = kernel, grid, named, options
        self.direct = direct  # the plan's q, k, v are 16-byte aligned (the plan key says so)
        self.boxes = boxes
        #: (tensor, box) -> host descriptor; None: ``triton.tools`` descriptors (a Gluon kernel
        #: takes Gluon's, which carry the shared-memory layout)
        self.descriptor = descriptor
        names = getattr(kernel, "arg_names", None) or []
        # the arguments after the per-call pointers, in parameter order (constexprs included:
        # the launcher receives every parameter, as JITFunction.run passes bound_args.values()),
        # a parameter the launch leaves to its default at that default (the JIT binds it so: a
        # PACK the pointer prefill leaves at 1 turned its direct launch off, found on an H100,
        # 2026-12-07); None (no direct launch) if the named ones are not the trailing parameters
        full = {**_defaults_of(kernel, named), **named}
        rest = names[len(names) - len(full):] if len(full) <= len(names) else []
        self.tail = tuple(full[n] for n in rest) if set(rest) == set(full) else None
        self.compiled = None
        self.device = None
        self.raw = None  # (C launcher, cooperative, pdl, descriptor metadata) of the compiled kernel
        self.tma_args: dict[tuple[int, ...], list[Any]] = {}  # addresses -> the tensor maps' launcher arguments

    def __call__(self, *ptrs: Any) -> Any:
        """Launch on ``ptrs`` (the per-call tensors, in parameter order; with ``boxes``, the
        leading ones are the tensors the descriptors describe).

        Callers pass 16-byte aligned tensors whenever ``direct`` is set: q, k, v by the plan
        key, outputs and partials from :func:`_alloc` (the caching allocator aligns to 512
        bytes), a preallocated ``out`` checked by :func:`_forward`.
        """
        c = self.compiled
        if c is not None and _no_launch_hooks():
            device = _GET_DEVICE()
            if device == self.device:
                g = self.grid
                stream = _GET_STREAM(device)
                raw = self.raw
                if raw is not None:  # Triton's C launcher directly (TMA: with cached tensor maps)
                    if self.boxes:
                        n = len(self.boxes)
                        key = tuple([t.data_ptr() for t in ptrs[:n]])
                        maps = self.tma_args.get(key)
                        if maps is None:
                            maps = self._tensor_maps(ptrs[:n], raw[3])
                            if len(self.tma_args) >= _MAX_TMA_MAPS:
                                self.tma_args.clear()
                            self.tma_args[key] = maps
                        ptrs = (*maps, *ptrs[n:])
                    raw[0](g[0], g[1], g[2], stream, c.function, raw[1], raw[2], None, None, c.packed_metadata,
                           None, None, None, *ptrs, *self.tail)
                    return c
                c.run(g[0], g[1], g[2], stream, c.function, c.packed_metadata,
                      None, None, None, *self._host_descriptors(ptrs), *self.tail)
                return c
        ret = self.kernel[self.grid](*self._host_descriptors(ptrs), **self.named, **self.options)
        handle = _compiled_handle(ret)
        if handle is not None and self.direct and self.tail is not None:
            self.compiled, self.device = handle, triton.runtime.driver.active.get_current_device()
            self.raw = _raw_launcher(handle, len(self.boxes) if self.boxes else 0)
        return ret

    def _host_descriptors(self, ptrs: tuple) -> tuple:
        """``ptrs`` with its leading ``len(boxes)`` tensors as host ``TensorDescriptor`` objects
        (rank 4, the real extents; box ``boxes[i]``); ``ptrs`` itself without boxes."""
        if not self.boxes:
            return ptrs
        n = len(self.boxes)
        if self.descriptor is not None:
            return (*(self.descriptor(t, b) for t, b in zip(ptrs, self.boxes)), *ptrs[n:])
        return (*(TensorDescriptor(t, list(t.shape), list(t.stride()), list(b)) for t, b in zip(ptrs, self.boxes)),
                *ptrs[n:])

    def _tensor_maps(self, tensors: tuple, metas: tuple) -> list[Any]:
        """The launcher arguments of the descriptors of ``tensors``: per descriptor the encoded
        CUDA tensor map, then its extents and strides (Triton's own ``make_tensordesc_arg``)."""
        from triton.backends.nvidia.driver import make_tensordesc_arg

        args: list[Any] = []
        for d, meta in zip(self._host_descriptors(tensors), metas):
            args.extend(make_tensordesc_arg(d, meta))
        return args


def _defaults_of(kernel: Any, named: dict[str, Any]) -> dict[str, Any]:
    """The defaults of ``kernel``'s parameters that ``named`` leaves out (by name; empty for an object without a
    Python signature)."""
    import inspect

    fn = getattr(kernel, "fn", None)
    try:
        params = inspect.signature(fn).parameters if fn is not None else {}
    except (TypeError, ValueError):
        return {}
    return {n: p.default for n, p in params.items() if n not in named and p.default is not inspect.Parameter.empty}


#: Cached tensor-map sets per TMA launch (a new address tuple beyond it clears that launch's cache).
_MAX_TMA_MAPS = 64


def _raw_launcher(compiled: Any, n_desc: int) -> tuple | None:
    """``(launcher, cooperative, pdl, metas)`` of a compiled kernel: the C launcher of Triton 3.6's
    ``CudaLauncher`` (``triton/backends/nvidia/driver.py``; for a kernel with ``n_desc`` host
    tensor descriptors, the one ``wrap_handle_tensordesc`` wraps, which encodes every descriptor
    per call), its launch flags and the descriptors' metadata. ``CudaLauncher.__call__`` adds
    only the scratch buffers, so a kernel that needs none may skip it. None (the kernel keeps
    ``compiled.run``) if it needs scratch memory, a descriptor was not lowered to a tensor map,
    or this Triton build differs in any of these names."""
    try:
        run = compiled.run
        if run.global_scratch_size or run.profile_scratch_size:
            return None
        launcher, metas = run.launch, ()
        if n_desc:
            cells = dict(zip(launcher.__code__.co_freevars, (cell.cell_contents for cell in launcher.__closure__)))
            launcher, metas = cells["launcher"], tuple(cells["tensordesc_meta"])
            if len(metas) != n_desc or any(m is None for m in metas):
                return None
        if hasattr(launcher, "__code__"):  # a Python wrapper: not the C launcher this expects
            return None
        return launcher, run.launch_cooperative_grid, run.launch_pdl, metas
    except (AttributeError, KeyError, TypeError, ValueError):
        return None


def _no_launch_hooks() -> bool:
    """No launch enter/exit hook (proton) is installed, so the direct launch may pass none
    (Triton 3.6 keeps them in ``knobs.runtime`` as ``HookChain`` objects with a ``calls`` list)."""
    for hook in (_RUNTIME_KNOBS.launch_enter_hook, _RUNTIME_KNOBS.launch_exit_hook):
        if hook is not None and getattr(hook, "calls", True):
            return False
    return True


_RUNTIME_KNOBS = triton.knobs.runtime


class _Plan:
    """What one call of :func:`flash_attention` runs, for one key of :func:`_plan`.

    Fields: ``path``; ``shape`` (:class:`kernels._inputs.AttnShape`); ``o_shape``
    ``(B, H, N_q, d)`` and ``lse_shape`` ``(B, H, N_q)`` (elements); ``part_shapes`` the
    split-KV partial O ``(B, H, S, N_q, d)`` and LSE ``(B, H, S, N_q)`` fp32 buffers, or None;
    ``config`` (None until an autotuned launch has picked one); the launches ``main`` and
    ``combine`` (decode with S > 1 and ``fused_combine=False``); ``sem_count`` the fused
    decode's counters (one per program group; 0 otherwise) and ``workspace`` its partial and
    counter views per stream; ``o_like_q``: q is contiguous with o's shape (the plan key holds
    q's strides), so o is ``torch.empty_like(q)``. O and LSE are allocated per call (their size depends on shapes
    only, so CUDA-graph capture records them); the fused decode's partials are not (cached).
    """

    __slots__ = ("path", "shape", "o_shape", "lse_shape", "part_shapes", "config", "main", "combine",
                 "autotune_args", "direct", "grid_rows", "sem_count", "workspace", "unused", "lpt", "o_like_q")

    def __init__(self) -> None:
        self.o_like_q = False  # o has q's shape and q is contiguous (its strides are in the key): empty_like(q)
        self.unused: torch.Tensor | None = None  # decode: _unused_buffer of the plan's device (in the key)
        self.sem_count = 0  # fused split-KV decode: one int32 counter per program group; 0 otherwise
        self.workspace: dict[Any, tuple[torch.Tensor, ...]] = {}  # stream key -> (O_PART, LSE_PART, SEM) views
        self.lpt: tuple | None = None  # prefill: the layer's lpt_launch_order arguments (_lpt_config)

    def _workspace(self, q: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The fused decode's ``(o_part, lse_part, sem)`` on the current stream: views of that
        stream's shared buffers (:func:`_shared_workspace`), carved once per plan and stream."""
        key = _stream_key()
        ws = self.workspace.get(key)
        if ws is None:
            (po, pl) = self.part_shapes
            n_o = _round_up(_numel(po), 4)  # LSE_PART starts 16-byte aligned
            part, sem = _shared_workspace(key, q.device, n_o + _numel(pl), self.sem_count)
            ws = self.workspace[key] = (part[:_numel(po)].view(po), part[n_o:n_o + _numel(pl)].view(pl),
                                        sem[:self.sem_count])
        return ws

    def launch(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
               lse: torch.Tensor, cu: tuple[torch.Tensor, ...] | None = None,
               paged: tuple[torch.Tensor, torch.Tensor] | None = None) -> KernelConfig:
        """Run the plan's kernels on these tensors (already checked against the plan); returns the config.

        ``cu``: the pointer path's ``(CU_Q, CU_K, SEQUSED_K)`` (a varlen call's int32 tensors);
        None: a dense call, which passes an unused buffer for each. ``paged``:
        ``(block_table, cache_seqlens)`` of a paged decode plan."""
        if self.path == "decode-split-kv":
            unused = self.unused
            tables = paged if paged is not None else (unused, unused)
            if self.part_shapes is None:
                self.main(q, k, v, o, lse, unused, unused, unused, *tables)
            elif self.sem_count:  # fused: one launch on the cached workspace
                self.main(q, k, v, o, lse, *self._workspace(q), *tables)
            else:
                o_part = _alloc(self.part_shapes[0], torch.float32, q.device)
                lse_part = _alloc(self.part_shapes[1], torch.float32, q.device)
                self.main(q, k, v, o, lse, o_part, lse_part, unused, *tables)
                self.combine(o, lse, o_part, lse_part)
            return self.config
        tma = self.path in ("prefill-tma", "prefill-gluon")
        if cu is None and not tma:  # a dense call on the pointer path: the sequence tables are unused
            cu = (_unused_buffer(q.device),) * 3
        if self.config is None:  # the first autotuned launch of this key: the autotuner picks the tiles
            kernel, grid, named = self.autotune_args
            # TMA: the descriptors' boxes are set by the chosen config's pre-hook (_tma_pre_hook)
            ptrs: tuple = (*_descriptors([16, 16, self.shape.head_dim], q, k, v, o), lse) if tma else (q, k, v, o, lse, *cu)
            kernel[grid](*ptrs, **named)
            config = _choice_to_config(kernel.best_config, self.path)  # what this first call ran
            _fixed_prefill(self, _lpt_config(config, self.lpt), named)  # later calls launch it directly
            return config
        if tma:
            self.main(q, k, v, o, lse)  # the launch makes (or reuses) the descriptors of its boxes
        else:
            self.main(q, k, v, o, lse, *cu)
        return self.config


def _boxes(bm: int, bn: int, d: int) -> tuple[tuple[int, ...], ...]:
    """The descriptor boxes of q, k, v, o (the backward: dO for o): ``(1, 1, BLOCK_M, d)`` for Q
    and O, ``(1, 1, BLOCK_N, d)`` for K and V (elements)."""
    return (1, 1, bm, d), (1, 1, bn, d), (1, 1, bn, d), (1, 1, bm, d)


def _descriptors(block: list[int], q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                 o: torch.Tensor) -> tuple[Any, ...]:
    """Host tensor descriptors (rank 4, the real ``(B, H, N, d)`` extents) of q, k, v and o (the
    backward passes dO there); ``block`` = [BLOCK_M, BLOCK_N, HEAD_DIM] (Q and O boxes
    ``(1, 1, BLOCK_M, d)``, K and V ``(1, 1, BLOCK_N, d)``)."""
    bm, bn, d = block
    return (TensorDescriptor(q, list(q.shape), list(q.stride()), [1, 1, bm, d]),
            TensorDescriptor(k, list(k.shape), list(k.stride()), [1, 1, bn, d]),
            TensorDescriptor(v, list(v.shape), list(v.stride()), [1, 1, bn, d]),
            TensorDescriptor(o, list(o.shape), list(o.stride()), [1, 1, bm, d]))


_PLANS: dict[tuple, _Plan] = {}
#: Plans kept at most (a new key beyond it clears the dictionary; a plan is a few hundred bytes).
_MAX_PLANS = 4096


def _plan_key(q: Any, k: Any, v: Any, causal: Any, causal_align: Any, sm_scale: Any, config: Any, path: Any,
              autotune: Any, num_sms: Any, window: Any = None, paged: Any = None) -> tuple:
    """The key of a launch plan: everything :func:`_build_plan` reads (shapes, strides, dtypes,
    devices, 16-byte alignment of q, k, v for the TMA choice, the flags and the module switches;
    causal with its type, so that causal=1, equal to True, misses True's plan and is refused).
    Raises AttributeError or TypeError for inputs that are not tensors (the caller then builds
    the plan uncached, which raises the one-line error)."""
    return (q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device,
            v.shape, v.stride(), v.dtype, v.device, not (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15,
            causal, type(causal), causal_align, sm_scale, config, path, autotune, num_sms, window, INTERPRET,
            USE_TMA, USE_GLUON, None if paged is None else _paged_key(paged))


def _paged_key(paged: Any) -> tuple | None:
    """The plan-key part of ``(block_table, cache_seqlens)``: shapes, strides, dtypes, devices (never
    their values: they change per call) and their 16-byte alignment (what a direct launch was
    specialised on). None for a dense call."""
    if paged is None:
        return None
    return (*((t.shape, t.stride(), t.dtype, t.device) for t in paged), _aligned(*paged))


def _aligned(*tensors: torch.Tensor) -> bool:
    """Every tensor's first element is 16-byte aligned (what Triton specialises pointers on)."""
    bits = 0
    for t in tensors:
        bits |= t.data_ptr()
    return not bits & 15


def _plan(q: Any, k: Any, v: Any, causal: Any, causal_align: Any, sm_scale: Any, config: Any = None,
          path: Any = None, autotune: Any = None, num_sms: Any = None, o_stride: tuple[int, ...] | None = None,
          window: Any = None, paged: Any = None) -> _Plan:
    """The cached launch plan of one call (a dictionary lookup after the first call of a key).

    Args: as :func:`flash_attention`; ``o_stride``: strides (elements) of a preallocated o,
    None for a contiguous one; ``paged``: ``(block_table, cache_seqlens)`` of a paged cache (k, v
    are then k_cache, v_cache), None for a dense one. Returns a :class:`_Plan`. Raises: IomodelError, as
    :func:`flash_attention` (never cached: a refused call raises on every call).

    Example (CPU interpreter): ``_plan(q, k, v, False, "top-left", None) is _plan(q, k, v, False,
    "top-left", None)`` — the second call is one dictionary lookup.
    """
    try:  # the hit path: one key tuple, one dictionary lookup (no closures per call)
        key = (*_plan_key(q, k, v, causal, causal_align, sm_scale, config, path, autotune, num_sms, window, paged),
               o_stride)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, an unhashable flag: build raises the one-line error
        key = plan = None
    if plan is not None:
        return plan
    plan = _build_plan(q, k, v, causal, causal_align, sm_scale, config, path, autotune, num_sms, o_stride, window,
                       paged=paged)
    if key is not None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _cached_plan(make_key: Any, build: Any, args: tuple) -> _Plan:
    """``_PLANS[make_key()]``, built by ``build(*args)`` on a miss; uncached when the key cannot be
    made (not tensors, an unhashable flag: ``build`` then raises the one-line error)."""
    try:
        key = make_key()
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):
        return build(*args)
    if plan is None:
        plan = build(*args)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _o_layout(plan: _Plan, q: torch.Tensor, o_stride: tuple[int, ...] | None) -> tuple[int, ...]:
    """o's strides (elements): ``o_stride`` of a preallocated o, else contiguous for ``plan.o_shape``,
    and then ``plan.o_like_q`` (q has exactly that shape and those strides: o is ``torch.empty_like(q)``)."""
    if o_stride is None:
        o_stride = torch.empty(plan.o_shape, device="meta").stride()  # contiguous
        plan.o_like_q = tuple(q.shape) == plan.o_shape and tuple(q.stride()) == tuple(o_stride)
    return o_stride


def _build_plan(q: Any, k: Any, v: Any, causal: Any, causal_align: Any, sm_scale: Any, config: Any, path: Any,
                autotune: Any, num_sms: Any, o_stride: tuple[int, ...] | None, window: Any = None,
                paged: Any = None) -> _Plan:
    """Check the inputs and work out the launch plan of one call (no allocation, no launch)."""
    if paged is not None:
        return _build_paged_plan(q, k, v, causal, causal_align, sm_scale, config, path, num_sms, o_stride, window,
                                 paged)
    shape, sm_scale = check_inputs(q, k, v, causal_align, sm_scale, dtypes=None)
    check_causal(causal)
    _check_device(q)
    if config is not None and not isinstance(config, KernelConfig):
        raise IomodelError(f"config must be a kernels.heuristics.KernelConfig, got {type(config).__name__}: build one")
    chosen = path or (config.path if config is not None else None) or kernel_path(q, k, v, window is not None,
                                                                                   causal=causal)
    if chosen not in PATHS:
        raise IomodelError(f"path {chosen!r} is unknown: use one of {', '.join(PATHS)} or None")
    shape = replace(shape, phase="decode" if chosen == "decode-split-kv" else "prefill")
    reason = kernel_refusal(shape)  # the statement the worksheet reads too
    if reason is None and chosen == "prefill-tma":
        reason = tma_refusal(shape.dtype, shape.head_dim, _tma_ok(q, k, v))
    if reason is None and chosen == "prefill-gluon":
        reason = _gluon_reason(q, k, v, shape, window is not None)
    if reason is not None:
        raise IomodelError(reason)
    band = window_argument(window, causal, shape.seqlen_q, shape.seqlen_k)
    off = causal_offset(causal_align, shape.seqlen_q, shape.seqlen_k) if causal or band else 0
    plan = _Plan()
    plan.path, plan.shape = chosen, shape
    plan.o_shape = (shape.batch, shape.heads, shape.seqlen_q, shape.head_dim)
    plan.lse_shape = (shape.batch, shape.heads, shape.seqlen_q)
    plan.grid_rows = (shape.batch, shape.heads, shape.seqlen_q)  # (B, H, N_q): the prefill grid's extent
    plan.part_shapes = plan.combine = plan.autotune_args = None
    plan.direct = _aligned(q, k, v)  # direct launches allowed (the plan key holds this bit)
    o_stride = _o_layout(plan, q, o_stride)
    if chosen == "decode-split-kv":
        _decode_launches(plan, q, k, v, shape, sm_scale, bool(causal), off, config, num_sms, o_stride, band)
    else:
        _prefill_launches(plan, q, k, v, shape, sm_scale, bool(causal), off, chosen, config, autotune, o_stride, band)
    return plan


def _build_paged_plan(q: Any, k: Any, v: Any, causal: Any, causal_align: Any, sm_scale: Any, config: Any, path: Any,
                      num_sms: Any, o_stride: tuple[int, ...] | None, window: Any, paged: Any) -> _Plan:
    """:func:`_build_plan` of a paged KV cache (k, v = k_cache, v_cache ``(num_blocks, page_size, H_kv, d)``;
    ``paged`` = ``(block_table, cache_seqlens)``): the split-KV decode with PAGED on."""
    pshape, sm_scale = check_paged_inputs(q, k, v, *paged, causal_align, sm_scale)
    shape = pshape.attn
    check_causal(causal)
    if window is not None:
        raise IomodelError("the paged KV cache has no sliding window: pass window=None (or a dense k and v)")
    if path not in (None, "decode-split-kv"):
        raise IomodelError(f"a paged KV cache runs on path 'decode-split-kv', not {path!r}: pass path=None")
    _check_device(q)
    if config is not None and not isinstance(config, KernelConfig):
        raise IomodelError(f"config must be a kernels.heuristics.KernelConfig, got {type(config).__name__}: build one")
    if config is not None and isinstance(config.block_n, int) and (
            why := page_block_refusal(config.block_n, pshape.page_size, f"use block_n <= {pshape.page_size}")):
        raise IomodelError(f"config.block_n: {why}")
    reason = kernel_refusal(shape)
    if reason is not None:
        raise IomodelError(reason)
    plan = _Plan()
    plan.path, plan.shape = "decode-split-kv", shape
    plan.o_shape = (shape.batch, shape.heads, shape.seqlen_q, shape.head_dim)
    plan.lse_shape = (shape.batch, shape.heads, shape.seqlen_q)
    plan.part_shapes = plan.combine = plan.autotune_args = None
    plan.direct = _aligned(q, k, v, *paged)
    o_stride = _o_layout(plan, q, o_stride)
    # bottom-right: off = N_k - N_q per sequence (the kernel adds its N_k); top-left: 0
    off, off_seqlen = (-shape.seqlen_q, 1) if causal_align == "bottom-right" else (0, 0)
    _decode_launches(plan, q, k, v, shape, sm_scale, bool(causal), off, config, num_sms, o_stride, None,
                     paged=(pshape, paged[0], off_seqlen))
    return plan


def _forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, causal_align: str,
             sm_scale: float | None, *, config: KernelConfig | None, path: str | None, autotune: bool | None,
             num_sms: int | None, out: tuple[torch.Tensor, torch.Tensor] | None,
             window: tuple[int | None, int | None] | None = None,
             paged: tuple[torch.Tensor, torch.Tensor] | None = None, check: bool = True,
             ) -> tuple[torch.Tensor, torch.Tensor, KernelConfig]:
    """The forward launch of :func:`flash_attention` (no autograd): ``(o, lse, config)``.

    Per call: one :func:`_plan` lookup, the output allocations (or the ``out`` check) and the
    launches; no host synchronisation and no value-dependent allocation (CUDA-graph capturable
    once a first call of the key has compiled, and autotuned, the kernels).
    """
    plan = _plan(q, k, v, causal, causal_align, sm_scale, config, path, autotune, num_sms, window=window, paged=paged)
    if paged is not None and check:  # the tables' contents (a host sync; check=False skips it)
        check_paged_tables(*paged, num_blocks=k.shape[0], page_size=k.shape[1])
    if out is None:
        o = _alloc_like(q) if plan.o_like_q else _alloc(plan.o_shape, q.dtype, q.device)
        lse = _alloc(plan.lse_shape, torch.float32, q.device)
    else:
        o, lse = _check_out(out, plan, q)
        if not _aligned(o, lse):  # a one-off plan: Triton's JIT launch specialises on these pointers
            plan = _build_plan(q, k, v, causal, causal_align, sm_scale, config, path, autotune, num_sms, o.stride(),
                               window, paged)
        elif not o.is_contiguous():  # the plan of these strides (its own key)
            plan = _plan(q, k, v, causal, causal_align, sm_scale, config, path, autotune, num_sms, o.stride(), window,
                         paged)
    return o, lse, plan.launch(q, k, v, o, lse, paged=paged)


def _check_out(out: Any, plan: _Plan, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``out`` as ``(o, lse)`` when it matches the plan's output shapes, dtypes and device; else IomodelError."""
    try:
        o, lse = out
    except (TypeError, ValueError):
        o = lse = None
    if (not isinstance(o, torch.Tensor) or not isinstance(lse, torch.Tensor) or tuple(o.shape) != plan.o_shape
            or o.dtype != q.dtype or tuple(lse.shape) != plan.lse_shape or lse.dtype != torch.float32
            or not lse.is_contiguous() or o.device != q.device or lse.device != q.device):
        raise IomodelError(
            f"out must be (o, lse) with o {plan.o_shape} {q.dtype} and lse {plan.lse_shape} contiguous fp32 "
            "on q's device: allocate them so or pass out=None"
        )
    if plan.path in ("prefill-tma", "prefill-gluon") and not _tma_ok(o):
        raise IomodelError("out o is not TMA-aligned: pass a contiguous o or path='prefill'")
    return o, lse


def _band_args(band: tuple[int, int] | None) -> dict[str, Any]:
    """Kernel arguments of a band: WIN_L, WIN_R (tokens) and the WINDOW switch."""
    return dict(WIN_L=band[0] if band else 0, WIN_R=band[1] if band else 0, WINDOW=band is not None)


def _dot_precision(q: torch.Tensor) -> str:
    # fp32: exact IEEE products (TF32 would lose 13 mantissa bits); ignored for fp16/bf16.
    return "ieee" if q.dtype == torch.float32 else "tf32"


def _emulate_bf16(q: torch.Tensor) -> bool:
    return INTERPRET and q.dtype == torch.bfloat16


def _positional(kernel: Any, start: int, values: tuple) -> dict[str, Any]:
    """``values`` named after the kernel's parameters ``start, start + 1, ...`` (strides and sizes)."""
    return dict(zip(kernel.arg_names[start:start + len(values)], values))


def _prefill_launches(plan: _Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: Any, sm_scale: float,
                      causal: bool, off: int, path: str, config: KernelConfig | None, autotune: bool | None,
                      o_stride: tuple[int, ...], band: tuple[int, int] | None = None,
                      varlen: dict[str, Any] | None = None) -> None:
    """Fill ``plan`` for the prefill paths: the fixed config's launch, or the autotuner's first call.

    ``varlen``: the ragged call's kernel arguments that replace the dense ones (the 4-axis
    strides of the packed tensors, N_Q = total_q, CAUSAL_OFF = alignment flag, VARLEN, SEQUSED);
    ``plan.grid_rows`` then holds (B, H, max_seqlen_q)."""
    B, H, N_q = plan.grid_rows
    d = shape.head_dim
    N_k = shape.seqlen_k
    # the chosen tiles' launch order on a GPU: causal, dense, no band: heaviest tiles first in head groups
    kv_row_bytes = 2 * N_k * d * q.element_size() // shape.group  # K/V one grid row streams, shared rows once
    plan.lpt = None if INTERPRET or config is not None else (causal, band is None and varlen is None, B * H,
                                                            kv_row_bytes, N_q)
    if path == "prefill-gluon":
        _gluon_launch(plan, shape, sm_scale, causal, off, config, autotune)
        return
    if config is None:
        if INTERPRET and not autotune:
            config = hx.INTERPRETER_PREFILL.config(path)
        elif autotune is False:
            config = _lpt_config(hx.prefill_default(d, shape.dtype, causal, path).config(path), plan.lpt)
    if config is not None:
        _check_config(config, path)
        if path == "prefill" and config.warp_specialize:
            raise IomodelError("warp_specialize applies to path 'prefill-tma' only: set config.warp_specialize=False")
        _check_prefill_packing(config, path, shape, varlen is not None)
    common = dict(H=H, G=shape.group, N_Q=N_q, N_K=N_k, CAUSAL_OFF=off,
                  N_Q_BUCKET=hx.seqlen_bucket(N_q), N_K_BUCKET=hx.seqlen_bucket(N_k), **_band_args(band))
    if path == "prefill-tma":
        named = dict(sm_scale=sm_scale, **common, HEAD_DIM=d, CAUSAL=causal, IN_DTYPE=shape.dtype,
                     EMULATE_BF16=_emulate_bf16(q))
    else:
        named = dict(sm_scale=sm_scale, **_positional(_attn_fwd, 9, (*q.stride(), *k.stride(), *v.stride(), *o_stride)),
                     **common, HEAD_DIM=d, HEAD_DIM_PAD=head_dim_padded(d), CAUSAL=causal,
                     DOT_PRECISION=_dot_precision(q), EMULATE_BF16=_emulate_bf16(q), VARLEN=False, SEQUSED=False)
        named.update(varlen or {})
    plan.main = plan.config = None
    if config is None:
        kernel = _tuned_kernel(path, d, shape.dtype, causal)
        grid = lambda meta: (triton.cdiv(N_q, meta["BLOCK_M"]), B * H)  # noqa: E731
        plan.autotune_args = (kernel, grid, named)
        return
    _fixed_prefill(plan, config, named)


def _gluon_launch(plan: _Plan, shape: Any, sm_scale: float, causal: bool, off: int, config: KernelConfig | None,
                  autotune: bool | None) -> None:
    """Set ``plan``'s launch to the Gluon prefill (``kernels/gluon_attention.py``): its one
    configuration at its HEAD_DIM (:data:`kernels.heuristics.GLUON_TILES`) in the bundled launch order (the LPT rule
    of :func:`_lpt_config` included); a given ``config`` must be that configuration (any
    tiles-fastest or head-grouped grid order, either tile order)."""
    from kernels import gluon_attention as ga

    d = shape.head_dim
    default = hx.prefill_default(d, shape.dtype, causal, "prefill-gluon").config("prefill-gluon")
    if autotune:
        raise IomodelError("path 'prefill-gluon' has one tile configuration, nothing to autotune: pass autotune=None "
                           "or False (or path='prefill-tma' to autotune)")
    if config is None:
        config = _lpt_config(default, plan.lpt)
    else:
        _check_gluon_config(config, d)
    B, H, N_q = plan.grid_rows
    t_r = triton.cdiv(N_q, config.block_m)
    named = dict(sm_scale=sm_scale, H=H, G=shape.group, N_Q=N_q, N_K=shape.seqlen_k, CAUSAL_OFF=off,
                 HEAD_GROUP=head_group_of(config.grid_order), HEAD_DIM=d, BLOCK_M=config.block_m,
                 BLOCK_N=config.block_n, NUM_STAGES=config.num_stages, CAUSAL=causal,
                 REVERSE=config.tile_order == "reverse", MASK_TAIL=shape.seqlen_k % config.block_n != 0,
                 CONSUMER_REGS=ga.consumer_regs(config.block_m),
                 PRODUCER_REGS=ga.PRODUCER_REGS, PRODUCER_WARPS=ga.PRODUCER_WARPS)
    plan.main = _Launch(ga._attn_fwd_gluon, (t_r, B * H, 1), named, dict(num_warps=4), plan.direct,
                        ga.descriptor_boxes(d, config.block_n), ga.gluon_descriptor)
    plan.config = config


def _check_gluon_config(config: KernelConfig, head_dim: int) -> None:
    """Refuse a given config that is not the Gluon prefill's one configuration at HEAD_DIM (one line;
    :func:`kernels.heuristics.gluon_config_mismatch`, which the worksheet's model of given tiles reads too)."""
    fixed = hx.GLUON_FIXED_FIELDS
    _check_path(config, "prefill-gluon")
    wrong = hx.gluon_config_mismatch(head_dim, {f: getattr(config, f) for f in fixed})
    if wrong:
        one = hx.gluon_tiles(head_dim).config("prefill-gluon")
        want = ", ".join(f"{f}={getattr(one, f)!r}" for f in fixed)
        raise IomodelError(f"path 'prefill-gluon' runs one configuration ({want}); config has "
                           f"{', '.join(f'{f}={getattr(config, f)!r}' for f in wrong)}: change it or pass config=None")
    _check_tile_order(config)
    if config.grid_order != KERNEL_GRID_ORDERS[0] and not head_group_of(config.grid_order):
        raise IomodelError(f"path 'prefill-gluon' runs grid orders {KERNEL_GRID_ORDERS[0]!r} and 'head-grouped:G', "
                           f"got {config.grid_order!r}: change it (or use path='prefill-tma')")


def _lpt_config(config: KernelConfig, lpt: tuple | None) -> KernelConfig:
    """``config`` (tiles the kernel chose) in the launch order of
    :func:`iomodel.schedule.launch.lpt_launch_order` for ``lpt`` = (causal, dense, B·H, K/V bytes
    per grid row, N_q) (heaviest causal tiles first in head groups: FlashAttention-3's LPT order);
    unchanged when ``lpt`` is None (a given config, the interpreter) or the rule keeps its order.
    Measured on the H200 against the autotuned tiles-fastest launch: +0 to +7.5 % on six causal
    prefill shapes (receipts/lpt-probe-h200-2026-12-02.json)."""
    if lpt is None:
        return config
    causal, dense, rows, kv_row_bytes, n_q = lpt
    return config.with_(**lpt_launch_order(causal, dense, rows, kv_row_bytes, rows * triton.cdiv(n_q, config.block_m)))


def _check_prefill_packing(config: KernelConfig, path: str, shape: Any, varlen: bool) -> None:
    """Refuse a prefill ``config.heads_per_program`` P > 1 that cannot run (one line): only the pointer
    prefill (path ``prefill``) of a dense batch packs query heads, P dividing the GQA group and BLOCK_M
    (:func:`iomodel.schedule.tiles.prefill_packing_refusal`, the rule the model reads too)."""
    p = config.heads_per_program
    reason = prefill_packing_refusal(p, shape.group, config.block_m, flag="config.heads_per_program =", varlen=varlen)
    if reason is not None:
        raise IomodelError(reason)
    if p > 1 and path != "prefill":
        raise IomodelError(f"config.heads_per_program {p!r}: packed query heads run on path 'prefill' only: pass "
                           "path='prefill' (and config.path='prefill'), or set config.heads_per_program=1")


def _fixed_prefill(plan: _Plan, config: KernelConfig, named: dict[str, Any]) -> None:
    """Set ``plan``'s prefill launch to ``config``'s tiles (``named``: the shape's arguments); with
    ``config.heads_per_program`` P > 1 its grid rows are groups of P query heads and its tiles BLOCK_M / P
    positions of each (``_attn_fwd``'s PACK)."""
    B, H, N_q = plan.grid_rows
    d = plan.shape.head_dim
    kernel = _attn_fwd_tma if plan.path == "prefill-tma" else _attn_fwd
    heads_fastest = config.grid_order == "heads-fastest"
    p = config.heads_per_program
    tiles = dict(BLOCK_M=config.block_m, BLOCK_N=config.block_n, REVERSE=config.tile_order == "reverse",
                 HEADS_FASTEST=heads_fastest, HEAD_GROUP=head_group_of(config.grid_order))
    if plan.path == "prefill-tma":
        tiles["WARP_SPECIALIZE"] = config.warp_specialize
    elif p > 1:
        tiles["PACK"] = p
    t_r, rows = packed_grid(N_q, B * H, config.block_m, p)
    grid = (rows, t_r, 1) if heads_fastest else (t_r, rows, 1)
    boxes = None
    if plan.path == "prefill-tma":
        boxes = _boxes(config.block_m, config.block_n, d)
    plan.main = _Launch(kernel, grid, {**named, **tiles},
                        dict(num_warps=config.num_warps, num_stages=config.num_stages), plan.direct, boxes)
    plan.config = config


def _decode_launches(plan: _Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, shape: Any, sm_scale: float,
                     causal: bool, off: int, config: KernelConfig | None, num_sms: int | None,
                     o_stride: tuple[int, ...], band: tuple[int, int] | None = None, paged: Any = None) -> None:
    """Fill ``plan`` for the split-KV decode: the decode launch, and the combine when num_splits > 1.

    ``paged``: ``(PagedShape, block_table, OFF_SEQLEN)`` of a paged cache (N_k is then the
    tables' capacity max_pages · page_size, k and v the caches), None for a dense one."""
    B, H, N_q, d = plan.o_shape
    H_kv, N_k, G = shape.kv_heads, shape.seqlen_k, shape.group
    page_size = paged[0].page_size if paged is not None else None
    plan.unused = _unused_buffer(q.device)
    if num_sms is None:
        num_sms = _num_sms(q.device)
    if config is None:
        config = hx.decode_config(batch=B, heads=H, kv_heads=H_kv, seqlen_q=N_q, seqlen_k=N_k, head_dim=d,
                                  num_sms=num_sms, dtype=shape.dtype, smem_per_sm=_sm_limits(q.device)[1],
                                  interpreter=INTERPRET, page_size=page_size)
    else:
        _check_config(config, "decode-split-kv")
        p = config.heads_per_program
        if not (isinstance(p, int) and p >= 1 and G % p == 0 and p * N_q <= DECODE_MAX_ROWS):
            raise IomodelError(
                f"config.heads_per_program must divide the GQA group {G} with heads_per_program * seqlen_q <= "
                f"{DECODE_MAX_ROWS}, got {p!r}: use {decode_heads_per_program(G, N_q)}"
            )
        reason = decode_block_m_refusal(config.block_m, p, N_q)  # the rule iomodel/spec/resolve.py reads too
        if reason is not None:
            raise IomodelError(reason)
        if not (isinstance(config.num_splits, int) and config.num_splits >= 1):
            raise IomodelError(f"config.num_splits must be a positive integer, got {config.num_splits!r}: change it")
        if config.warp_specialize:
            raise IomodelError("warp_specialize applies to path 'prefill-tma' only: set config.warp_specialize=False")
    S = config.num_splits
    split = S > 1
    p = config.heads_per_program
    if paged is None:
        kv_strides, bt_strides = (*k.stride(), *v.stride()), (0, 0)
    else:  # (num_blocks, page_size, H_kv, d) as the kernel's (page, head, row, d) strides
        ks, vs = k.stride(), v.stride()
        kv_strides, bt_strides = (ks[0], ks[2], ks[1], ks[3], vs[0], vs[2], vs[1], vs[3]), paged[1].stride()
    sizes = (*q.stride(), *kv_strides, *o_stride, *bt_strides,
             H, H_kv, G, N_q, N_k, off, decode_split_len(N_k, S, config.block_n), S)
    named = dict(sm_scale=sm_scale, **_positional(_attn_decode, 11, sizes),
                 HEAD_DIM=d, HEAD_DIM_PAD=head_dim_padded(d), BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                 HEADS_PER_PROGRAM=p, CAUSAL=causal, SPLIT=split, DOT_PRECISION=_dot_precision(q),
                 EMULATE_BF16=_emulate_bf16(q), **_band_args(band), OFF_SEQLEN=paged[2] if paged else 0,
                 PAGED=paged is not None, PAGE_SIZE=page_size or 16)
    if not isinstance(config.fused_combine, bool):
        raise IomodelError(f"config.fused_combine must be True or False, got {config.fused_combine!r}: pass a bool")
    fused = split and config.fused_combine
    named["FUSED"] = fused
    named["MERGE_STAGES"] = hx.FUSED_MERGE_STAGES if fused else 1
    plan.config = config
    plan.main = _Launch(_attn_decode, (S, B * H_kv * (G // p), 1), named,
                        dict(num_warps=config.num_warps, num_stages=config.num_stages), plan.direct)
    if split:  # the kernel writes partials that its last split program (fused) or the combine merges
        plan.part_shapes = ((B, H, S, N_q, d), (B, H, S, N_q))
    if fused:  # one counter per program group (grid axis 1), in the cached workspace
        plan.sem_count = B * H_kv * (G // p)
    elif split:
        named = dict(**_positional(_attn_decode_combine, 4, (*o_stride, H, N_q, S)),
                     HEAD_DIM=d, HEAD_DIM_PAD=head_dim_padded(d), BLOCK_S=hx.combine_block_s(S, d),
                     EMULATE_BF16=_emulate_bf16(q))
        plan.combine = _Launch(_attn_decode_combine, (B * H, N_q, 1), named, dict(num_warps=4), plan.direct)


# ====================================================================================
# Ragged (varlen) batches: flash-attn's packed layout on the prefill kernel (VARLEN)
# ====================================================================================
def flash_attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (total_q, H, d), (total_k, H_kv, d), (total_k, H_kv, d)
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,  # (B + 1,) int32 each
    max_seqlen_q: int, max_seqlen_k: int,
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    window: tuple[int | None, int | None] | None = None,
    seqused_k: torch.Tensor | None = None,  # (B,) int32
    *,
    check: bool = True,
    config: KernelConfig | None = None,
    autotune: bool | None = None,
    return_config: bool = False,
) -> tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, KernelConfig]:
    """FlashAttention forward of a ragged batch in flash-attn's varlen layout (prefill kernel, VARLEN).

    Sequence b has the query rows ``q[cu_seqlens_q[b]:cu_seqlens_q[b+1]]`` and the key/value
    rows ``k[cu_seqlens_k[b]:cu_seqlens_k[b+1]]`` (the first ``seqused_k[b]`` of them when
    ``seqused_k`` is given: key padding); each sequence is attended on its own, exactly as
    :func:`flash_attention` on a batch of one with ``N_q_b``, ``N_k_b`` (the causal and window
    alignment offset is the sequence's own: ``N_k_b − N_q_b`` for bottom-right).

    Args:
        q: ``(total_q, H, d)`` fp16, bf16 or fp32 (CUDA, or CPU under TRITON_INTERPRET=1).
        k, v: ``(total_k, H_kv, d)``, same dtype and device; H divisible by H_kv (GQA/MQA).
        cu_seqlens_q, cu_seqlens_k: ``(B + 1,)`` int32 on q's device, cumulative lengths:
            first 0, strictly increasing (every sequence has >= 1 query row and >= 1 key),
            last = total_q (total_k).
        max_seqlen_q, max_seqlen_k: ints >= the longest sequence's query (key) length; the
            grid has ``cdiv(max_seqlen_q, BLOCK_M)`` query tiles per (sequence, head), and
            tiles past a sequence's end return after reading its cu_seqlens.
        causal, causal_align, sm_scale, window: as :func:`flash_attention`, per sequence.
        seqused_k: ``(B,)`` int32, 0 <= seqused_k[b] <= N_k_b: keys actually used per sequence.
            0 is an empty slot (serving): the sequence's rows see no key and get o = 0, lse = −inf,
            as a paged sequence with ``cache_seqlens[b] = 0`` in :func:`flash_attention`.
        check: validate the contents of cu_seqlens (and seqused_k) on the host before the
            launch (default): one device-to-host copy, i.e. a synchronisation. ``check=False``
            skips it (CUDA-graph capture, hot loops); then bad contents are undefined
            behaviour. Dtypes, shapes and devices are always checked (no sync).
        config: run these tiles (``config.path`` must be ``prefill``); None: autotuned on a
            GPU (keyed also by VARLEN), the fixed interpreter tiles on a CPU.
        autotune: as :func:`flash_attention`.
        return_config: also return the :class:`KernelConfig` that ran.

    Returns:
        ``(o, lse)`` (or with the config): o ``(total_q, H, d)`` in q's dtype, lse
        ``(H, total_q)`` fp32 natural-log LSE (flash-attn's varlen layout). A row that sees no
        key (causal bottom-right with N_q_b > N_k_b, a window, or seqused_k[b] = 0) has o = 0 and
        lse = −inf.

    Launch plans are cached like :func:`flash_attention`'s (keyed by shapes, strides, dtypes,
    devices, max lengths and flags); cu_seqlens and seqused_k are per-call tensors that the
    kernel reads, never the host (except the opt-out ``check``).

    Raises:
        IomodelError: one line naming the fix, for: inputs that are not 3-D tensors; what
            :func:`flash_attention` refuses (dtype, devices, heads, HEAD_DIM, scale, window);
            cu_seqlens not int32, not 1-D of length B + 1 for both q and k, or (``check``)
            first not 0, not strictly increasing, or last not the packed length;
            max_seqlen not an int >= 1 or smaller than a real length; seqused_k not int32 of
            shape (B,) or (``check``) outside 0..N_k_b; q, k or v requiring grad (no varlen
            backward yet); a config whose path is not ``prefill``.
    """
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v)):
        raise IomodelError("flash_attention_varlen has no backward yet: call it under torch.no_grad() or pass "
                           "detached q, k, v (the dense flash_attention has one)")
    if check not in (True, False):
        raise IomodelError(f"check must be True or False, got {check!r}: pass a bool")
    plan = _varlen_plan(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, causal,
                        causal_align, sm_scale, window, config, autotune)
    if check:
        _check_cu_contents(cu_seqlens_q, cu_seqlens_k, seqused_k, plan.o_shape[0], k.shape[0], max_seqlen_q,
                           max_seqlen_k)
    o = _alloc(plan.o_shape, q.dtype, q.device)  # (total_q, H, d)
    lse = _alloc(plan.lse_shape, torch.float32, q.device)  # (H, total_q)
    cu = (cu_seqlens_q, cu_seqlens_k, seqused_k if seqused_k is not None else _unused_buffer(q.device))
    cfg = plan.launch(q, k, v, o, lse, cu)
    return (o, lse, cfg) if return_config else (o, lse)


def _varlen_plan(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, seqused: Any, max_q: Any, max_k: Any, causal: Any,
                 causal_align: Any, sm_scale: Any, window: Any, config: Any, autotune: Any) -> _Plan:
    """The cached launch plan of one :func:`flash_attention_varlen` call (a dictionary lookup
    after the first call of a key; refused calls are never cached)."""
    args = (q, k, v, cu_q, cu_k, seqused, max_q, max_k, causal, causal_align, sm_scale, window, config, autotune)
    key = lambda: ("varlen", q.shape, q.stride(), q.dtype, q.device, k.shape, k.stride(), k.dtype, k.device,  # noqa: E731
                   v.shape, v.stride(), v.dtype, v.device, _aligned(q, k, v),
                   cu_q.shape, cu_q.dtype, cu_q.device, cu_k.shape, cu_k.dtype, cu_k.device,
                   None if seqused is None else (seqused.shape, seqused.dtype, seqused.device),
                   max_q, type(max_q), max_k, type(max_k), causal, type(causal), causal_align, sm_scale, window,
                   config, autotune, INTERPRET, USE_TMA)
    return _cached_plan(key, lambda *a: _build_varlen_plan(*a), args)


def _int32_vector(t: Any, name: str, length: int, what: str, device: torch.device) -> None:
    """Raise unless ``t`` is a 1-D int32 tensor of ``length`` elements on ``device``."""
    if not isinstance(t, torch.Tensor):
        raise IomodelError(f"{name} must be a torch.Tensor of int32, got {type(t).__name__}: pass "
                           f"torch.tensor(..., dtype=torch.int32)")
    if t.dtype != torch.int32:
        raise IomodelError(f"{name} must be int32, got {t.dtype}: pass {name}.to(torch.int32)")
    if t.dim() != 1 or t.shape[0] != length:
        raise IomodelError(f"{name} must have shape ({length},) ({what}), got {tuple(t.shape)}: fix its length")
    if t.device != device:
        raise IomodelError(f"{name} is on {t.device} but q is on {device}: move it to q's device")


def _build_varlen_plan(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, seqused: Any, max_q: Any, max_k: Any,
                       causal: Any, causal_align: Any, sm_scale: Any, window: Any, config: Any,
                       autotune: Any) -> _Plan:
    """Check the structure of a varlen call (no device values read) and build its plan."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise IomodelError(f"{name} must be a packed 3-D tensor (total_tokens, heads, HEAD_DIM), got {got}: "
                               "pack the sequences along the first axis")
    for name, m in (("max_seqlen_q", max_q), ("max_seqlen_k", max_k)):
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise IomodelError(f"{name} must be an int >= 1 (the longest sequence's length), got {m!r}: pass it")
    # the dense checks on (1, H, tokens, d) views: dtypes, devices, heads, HEAD_DIM, alignment, scale
    shape, sm_scale = check_inputs(q.permute(1, 0, 2)[None], k.permute(1, 0, 2)[None], v.permute(1, 0, 2)[None],
                                   causal_align, sm_scale, dtypes=None)
    check_causal(causal)
    _check_device(q)
    if not isinstance(cu_q, torch.Tensor) or cu_q.dim() != 1 or cu_q.shape[0] < 2:
        raise IomodelError("cu_seqlens_q must be a 1-D int32 tensor of B + 1 cumulative lengths (B >= 1), got "
                           f"{tuple(cu_q.shape) if isinstance(cu_q, torch.Tensor) else type(cu_q).__name__}: "
                           "pass e.g. torch.tensor([0, 512, 3512], dtype=torch.int32)")
    B = cu_q.shape[0] - 1
    _int32_vector(cu_q, "cu_seqlens_q", B + 1, "B + 1", q.device)
    _int32_vector(cu_k, "cu_seqlens_k", B + 1, f"B + 1, as cu_seqlens_q has {B + 1} entries", q.device)
    if seqused is not None:
        _int32_vector(seqused, "seqused_k", B, f"B = {B} sequences", q.device)
    if config is not None and not isinstance(config, KernelConfig):
        raise IomodelError(f"config must be a kernels.heuristics.KernelConfig, got {type(config).__name__}: build one")
    if config is not None and config.path != "prefill":
        raise IomodelError(f"flash_attention_varlen runs the 'prefill' path only, config.path is {config.path!r}: "
                           "set config.path='prefill'")
    shape = replace(shape, batch=B, seqlen_q=max_q, seqlen_k=max_k, phase="prefill")
    reason = kernel_refusal(shape)
    if reason is not None:
        raise IomodelError(reason)
    band = window_argument(window, causal, max_q, max_k)  # an unbounded side: max_q + max_k >= any sequence's reach
    total_q, H, d = q.shape
    plan = _Plan()
    plan.path, plan.shape = "prefill", shape
    plan.o_shape = (total_q, H, d)
    plan.lse_shape = (H, total_q)
    plan.grid_rows = (B, H, max_q)
    plan.part_shapes = plan.combine = plan.autotune_args = None
    plan.direct = _aligned(q, k, v)
    o_stride = torch.empty(plan.o_shape, device="meta").stride()
    packed = lambda st: (0, st[1], st[0], st[2])  # noqa: E731  (token, head, d) -> the kernel's (z, h, m, d)
    varlen = dict(**_positional(_attn_fwd, 9, (*packed(q.stride()), *packed(k.stride()), *packed(v.stride()),
                                               *packed(o_stride))),
                  N_Q=total_q, CAUSAL_OFF=1 if causal_align == "bottom-right" else 0, VARLEN=True,
                  SEQUSED=seqused is not None)
    _prefill_launches(plan, q, k, v, shape, sm_scale, bool(causal), 0, "prefill", config, autotune, o_stride, band,
                      varlen)
    return plan


def _check_cu_contents(cu_q: torch.Tensor, cu_k: torch.Tensor, seqused: torch.Tensor | None, total_q: int,
                       total_k: int, max_q: int, max_k: int) -> None:
    """The opt-out host check of :func:`flash_attention_varlen` (one device-to-host copy).

    Raises:
        IomodelError: first entry not 0, not strictly increasing, last not the packed length,
            a length above max_seqlen, or seqused_k outside 0..N_k_b.
    """
    lens = {}
    for name, cu, total, mx, mx_name, t in (("cu_seqlens_q", cu_q, total_q, max_q, "max_seqlen_q", "q"),
                                            ("cu_seqlens_k", cu_k, total_k, max_k, "max_seqlen_k", "k")):
        c = cu.tolist()
        if c[0] != 0:
            raise IomodelError(f"{name}[0] must be 0, got {c[0]}: start the cumulative lengths at 0")
        steps = [b - a for a, b in zip(c, c[1:])]
        bad = next((i for i, s in enumerate(steps) if s <= 0), None)
        if bad is not None:
            raise IomodelError(f"{name} must be strictly increasing (every sequence >= 1 token), but entries {bad} "
                               f"and {bad + 1} are {c[bad]}, {c[bad + 1]}: drop empty sequences or fix the lengths")
        if c[-1] != total:
            raise IomodelError(f"{name}[-1] is {c[-1]} but {t} packs {total} tokens: the last entry must equal "
                               f"{t}.shape[0]")
        if max(steps) > mx:
            raise IomodelError(f"{mx_name} is {mx} but sequence {steps.index(max(steps))} has {max(steps)} tokens: "
                               f"pass {mx_name} >= {max(steps)}")
        lens[t] = steps
    if seqused is not None:
        for b, (u, n) in enumerate(zip(seqused.tolist(), lens["k"])):
            if not 0 <= u <= n:
                raise IomodelError(f"seqused_k[{b}] is {u} but sequence {b} has {n} keys: use 0..{n} (0: the "
                                   "sequence uses no key, its rows give o = 0 and lse = -inf)")
