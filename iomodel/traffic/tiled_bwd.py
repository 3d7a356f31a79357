"""Tiled backward in FlashAttention-2 order: recompute from Q, K, V, O, dO and LSE.

Schedule (Dao 2023, FlashAttention-2, Section 3.1 "Backward pass" and Algorithm 2; Triton
tutorial ``06-fused-attention.py``: ``_attn_bwd_preprocess``, ``_attn_bwd_dkdv``,
``_attn_bwd_dq``):

1. Preprocess: Delta = rowsum(dO ∘ O) — reads O and dO once, writes Delta ``(B, H, N_q)``
   fp32 once.
2. dK/dV pass, K/V-stationary: one program per key block of ``KV_BLOCK`` keys (option
   ``bwd_block_m``, default BLOCK_M) loads K_j, V_j once, then steps over the query blocks of
   ``Q_STEP`` rows (option ``bwd_block_n``, default BLOCK_N) that see the key block (causal:
   :class:`~iomodel.traffic.sums.KBlockQueryRows`; query blocks entirely above the
   diagonal are skipped), loading Q_i, dO_i (dtype) and LSE_i, Delta_i (fp32) rows at each
   step; it recomputes S and P and writes dK_j, dV_j once. Key blocks that no query row
   sees still load K/V and write dK = dV = 0.
3. dQ, option ``dq_mode``:

   * ``"separate"`` (default; Triton tutorial 06): a second, Q-stationary pass with the
     forward's BLOCK_M/BLOCK_N: loads Q_i, dO_i, LSE_i, Delta_i once, streams K/V blocks up
     to the diagonal exactly as the forward does, writes dQ_i once (in dtype).
   * ``"atomic"`` (FA2 paper Algorithm 2, line 21 / FlashAttention-2's CUDA kernel): dQ is
     zero-initialised in an fp32 accumulator ``dQ_acc`` (one write), every visited (query
     step, key block) pair of the dK/dV pass does an fp32 read-modify-write (atomic add) of
     its dQ rows, and a conversion pass reads dQ_acc and writes dQ in dtype.

GQA (option ``gqa_bwd``): ``"in_program"`` (default) — the dK/dV program of a KV head loops
over its G query heads, so K/V are loaded and dK/dV written once per KV head (Q, dO, LSE,
Delta of all H heads are read); ``"expand_sum"`` — as flash-attn's ``mha_bwd``
(``csrc/flash_attn/flash_api.cpp``): one program per query head loads its KV head's K/V,
writes dK/dV per query head into ``(B, H, N_k, d)`` buffers, then ``sum`` over the group
reads them and writes dK/dV.

FLOPs actually executed: dK/dV pass 8·d per visible pair (S, dP, dV, dK), plus 2·d for dQ
(atomic) or 6·d (separate pass recomputes S and dP) — the layer's conventional backward
count is 2.5× forward = 10·d per pair (see :mod:`iomodel.traffic.bounds`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import sympy as sp

from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec
from iomodel.traffic.base import SYM, AlgorithmModel, Allocation, Row, both_levels, make_row
from iomodel.traffic.sums import KBlockQueryRows
from iomodel.traffic.tiled_fwd import causal_offset_expr, q_stationary_key_rows, visible_pairs_expr


def tiled_bwd_rows(spec: LayerSpec, opts: dict[str, Any]) -> tuple[list[Row], list[Allocation]]:
    """Rows (one level) and extra allocations of the FlashAttention-2-order backward.

    Tensors: Q, O, dO, dQ ``(B, H, N_q, d)`` dtype s; K, V, dK, dV ``(B, H_kv, N_k, d)``;
    LSE, Delta ``(B, H, N_q)`` fp32; dQ_acc ``(B, H, N_q, d)`` fp32 (atomic mode); dK_exp,
    dV_exp ``(B, H, N_k, d)`` (expand_sum with GQA). Units: bytes.
    """
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    dt = spec.dtype
    gqa = spec.kv_heads < spec.heads
    expand = gqa and opts["gqa_bwd"] == "expand_sum"
    kv_block = sp.Integer(opts["bwd_block_m"]) if opts["bwd_block_m"] else SYM.BLOCK_M
    q_step = sp.Integer(opts["bwd_block_n"]) if opts["bwd_block_n"] else SYM.BLOCK_N
    E_q, E_k, E_kx, E_l = B * H * N_q * d, B * H_kv * N_k * d, B * H * N_k * d, B * H * N_q
    sq, skv, sl, skx = "(B, H, N_q, d)", "(B, H_kv, N_k, d)", "(B, H, N_q)", "(B, H, N_k, d)"
    if spec.causal:
        qrows = KBlockQueryRows(N_q, N_k, q_step, kv_block, causal_offset_expr(spec))
    else:
        qrows = sp.ceiling(N_k / kv_block) * N_q
    rows: list[Row] = []
    alloc = [
        Allocation("dO", sq, dt, E_q * s, "input of the backward"),
        Allocation("Delta", sl, "fp32", E_l * FP32_WIDTH, "rowsum(dO ∘ O)"),
        Allocation("dQ", sq, dt, E_q * s, "output"),
        Allocation("dK", skv, dt, E_k * s, "output"),
        Allocation("dV", skv, dt, E_k * s, "output"),
    ]

    def row(tensor, step, shape, dtype, width, elements, rb=0, wb=0, note=""):
        rows.append(make_row(tensor, step, "SRAM_fill", shape, dtype, width, elements, rb, wb, note))

    step = "bwd preprocess: Delta = rowsum(dO ∘ O)"
    row("O", step, sq, dt, s, E_q, rb=E_q * s)
    row("dO", step, sq, dt, s, E_q, rb=E_q * s)
    row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, wb=E_l * FP32_WIDTH)

    if opts["dq_mode"] == "atomic":
        row("dQ_acc", "dQ_acc = zeros (fp32)", sq, "fp32", FP32_WIDTH, E_q, wb=E_q * FP32_WIDTH,
            note="Zero-initialised fp32 accumulator for the atomic adds.")
        alloc.append(Allocation("dQ_acc", sq, "fp32", E_q * FP32_WIDTH, "fp32 dQ accumulator"))

    step = "bwd dK/dV kernel (K/V-stationary)"
    kv_reads = E_kx if expand else E_k
    kv_note = ("One program per (query head, key block): K/V read once per query head." if expand else
               "One program per (KV head, key block) loads K_j, V_j once" + (" and loops over its G query heads."
                                                                             if gqa else "."))
    row("K", step, skv, dt, s, E_k, rb=kv_reads * s, note=kv_note)
    row("V", step, skv, dt, s, E_k, rb=kv_reads * s)
    qnote = ("Re-read for every key block" + (" that some row of the block sees (causal)." if spec.causal else "."))
    row("Q", step, sq, dt, s, E_q, rb=B * H * qrows * d * s, note=qnote)
    row("dO", step, sq, dt, s, E_q, rb=B * H * qrows * d * s)
    row("LSE", step, sl, "fp32", LSE_WIDTH, E_l, rb=B * H * qrows * LSE_WIDTH)
    row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, rb=B * H * qrows * FP32_WIDTH)
    if opts["dq_mode"] == "atomic":
        row("dQ_acc", step, sq, "fp32", FP32_WIDTH, E_q, rb=B * H * qrows * d * FP32_WIDTH,
            wb=B * H * qrows * d * FP32_WIDTH, note="fp32 atomic read-modify-write of the dQ rows per visited block.")
    if expand:
        row("dK_exp", step, skx, dt, s, E_kx, wb=E_kx * s, note="Per query head, summed over the group below.")
        row("dV_exp", step, skx, dt, s, E_kx, wb=E_kx * s)
        for t in ("dK", "dV"):
            rstep = f"{t} = {t}_exp.sum over the GQA group"
            row(f"{t}_exp", rstep, skx, dt, s, E_kx, rb=E_kx * s)
            row(t, rstep, skv, dt, s, E_k, wb=E_k * s)
        alloc.append(Allocation("dK_exp, dV_exp", skx, dt, 2 * E_kx * s, "per-query-head dK/dV before the group sum"))
    else:
        row("dK", step, skv, dt, s, E_k, wb=E_k * s, note="Written once per key block.")
        row("dV", step, skv, dt, s, E_k, wb=E_k * s)

    if opts["dq_mode"] == "atomic":
        step = "dQ = dQ_acc.to(dtype)"
        row("dQ_acc", step, sq, "fp32", FP32_WIDTH, E_q, rb=E_q * FP32_WIDTH)
        row("dQ", step, sq, dt, s, E_q, wb=E_q * s)
    else:
        step = "bwd dQ kernel (Q-stationary)"
        kr = q_stationary_key_rows(spec, SYM.BLOCK_M, SYM.BLOCK_N)
        row("Q", step, sq, dt, s, E_q, rb=E_q * s, note="Loaded once per query tile.")
        row("dO", step, sq, dt, s, E_q, rb=E_q * s)
        row("LSE", step, sl, "fp32", LSE_WIDTH, E_l, rb=E_l * LSE_WIDTH)
        row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, rb=E_l * FP32_WIDTH)
        row("K", step, skv, dt, s, E_k, rb=B * H * kr * d * s, note="Re-read per query tile, as in the forward.")
        row("V", step, skv, dt, s, E_k, rb=B * H * kr * d * s)
        row("dQ", step, sq, dt, s, E_q, wb=E_q * s)
    return rows, alloc


def add_backward(fwd: AlgorithmModel, spec: LayerSpec, opts: dict[str, Any]) -> AlgorithmModel:
    """The forward model with the backward's rows, allocations and FLOPs appended.

    Raises:
        Nothing; options are validated by ``build_model``.
    """
    rows, alloc = tiled_bwd_rows(spec, opts)
    per_pair = 10 if opts["dq_mode"] == "atomic" else 14
    bwd_flops = per_pair * SYM.B * SYM.H * SYM.d * visible_pairs_expr(spec)
    fwd_sram = [r for r in fwd.rows if r.level == "SRAM_fill"]
    fwd_hbm = [r for r in fwd.rows if r.level == "HBM"]
    bwd = both_levels(rows)
    n = len(rows)
    return replace(
        fwd,
        title=fwd.title.replace("Tiled forward", "Tiled forward + FlashAttention-2 backward"),
        source=fwd.source + "; Dao 2023 FlashAttention-2 Algorithm 2 (backward)",
        rows=fwd_sram + bwd[:n] + fwd_hbm + bwd[n:],
        allocated=fwd.allocated + alloc,
        flops=fwd.flops + bwd_flops,
    )


__all__ = ["add_backward", "tiled_bwd_rows"]
