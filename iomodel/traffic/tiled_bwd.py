"""The bundled backward kernels' traffic (FlashAttention-2 order, ``kernels/backward.py``).

Follows ``docs/traffic-contract.md`` ("Backward") exactly, kernel by kernel; every row's
step names its kernel (:data:`KERNEL_STEPS`). Sources: Dao 2023, FlashAttention-2,
Section 3.1 "Backward pass" and Algorithm 2; Triton tutorial ``06-fused-attention.py``
(``_attn_bwd_preprocess``, ``_attn_bwd_dkdv``, ``_attn_bwd_dq``). Tiles: the
``bwd_block_m``/``bwd_block_n``/``dq_block_m``/``dq_block_n`` fields of
:class:`~iomodel.spec.Tiling` (symbols ``BWD_BLOCK_M``, ``BWD_BLOCK_N``, ``DQ_BLOCK_M``,
``DQ_BLOCK_N``), which ``kernels.heuristics.BackwardConfig.tiling`` fills from what ran.

1. ``_bwd_preprocess``: Delta = rowsum(dO ∘ O) — reads O and dO once, writes Delta
   ``(B, H, N_q)`` fp32 once (masked to rows < N_q: independent of its tile).
2. ``_bwd_dkdv``, K/V-stationary: one program per (KV head, key tile of ``BWD_BLOCK_N``
   keys) loads K_j, V_j once (masked to keys < N_k), loops over the G query heads of its
   GQA group and, per head, over the query tiles of ``BWD_BLOCK_M`` rows from
   lo_j = min(BWD_BLOCK_M·⌊max(0, j·BWD_BLOCK_N − off)/BWD_BLOCK_M⌋, N_q) (causal; 0
   otherwise) to N_q, loading Q_i, dO_i (dtype) and LSE_i, Delta_i (fp32) rows at each step
   (:class:`~iomodel.traffic.sums.KTileQueryRows`); writes dK_j, dV_j once (summed over the
   group). Key tiles that no row sees still load K/V and write dK = dV = 0.
   Group slices (``Tiling.bwd_group_splits`` S > 1, symbol ``BWD_SPLITS``): S programs per
   (KV head, key tile), each over its slice of the group's query heads, so K/V are read S
   times, the query rows of every head once as before, and each program writes fp32 partials
   dK_part, dV_part ``(B, H_kv, S, N_k, d)`` instead of dK, dV; ``_bwd_reduce_dkdv`` reads every
   partial once and writes dK, dV once (dtype).
3. dQ, option ``dq_mode``:

   * ``"separate"`` (default; what the kernel runs): ``_bwd_dq``, Q-stationary, one program
     per (query head, query tile of ``DQ_BLOCK_M`` rows): loads Q_i, dO_i, LSE_i, Delta_i
     once, streams the K/V tiles of ``DQ_BLOCK_N`` keys of the forward's key range [0, hi_i)
     (:func:`~iomodel.traffic.tiled_fwd.q_stationary_key_rows`), writes dQ_i once (dtype).
   * ``"atomic"`` (``BackwardConfig(atomic_dq=True)``; FA2 Algorithm 2, line 21): dQ is
     zero-initialised in an fp32 accumulator ``dQ_acc`` (``torch.zeros``, one write), every
     query step of the dK/dV kernel does an fp32 atomic add (read-modify-write) of its dQ
     rows, and ``dq.copy_(dQ_acc)`` reads dQ_acc and writes dQ in dtype. The interpreter
     checks the ``_bwd_dkdv`` rows of this mode; the zero-init and the copy are torch ops.

GQA (option ``gqa_bwd``): ``"in_program"`` (default; what the kernel runs) as above;
``"expand_sum"`` — a what-if of flash-attn's ``mha_bwd`` (``csrc/flash_attn/flash_api.cpp``):
one program per query head loads its KV head's K/V, writes dK/dV per query head into
``(B, H, N_k, d)`` buffers, then ``sum`` over the group reads them and writes dK/dV.

FLOPs actually executed: dK/dV kernel 8·d per visible pair (S, dP, dV, dK), plus 2·d for dQ
(atomic) or 6·d (the separate kernel recomputes S and dP) — the layer's conventional
backward count is 2.5× forward = 10·d per pair (see :mod:`iomodel.traffic.bounds`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import sympy as sp

from iomodel.errors import IomodelError
from iomodel.schedule.grid import REDUCE_DKDV_KERNEL
from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec
from iomodel.traffic.base import SYM, AlgorithmModel, Allocation, Row, both_levels, make_row
from iomodel.traffic.sums import KTileQueryRows, KTileQueryRowsBand
from iomodel.traffic.tiled_fwd import band_exprs, causal_offset_expr, q_stationary_key_rows, visible_pairs_expr

#: Step of the model's rows -> the bundled kernel (``@triton.jit`` name) whose loads and
#: stores they count (the interpreter's launches carry these names).
KERNEL_STEPS = {
    "_bwd_preprocess": "bwd preprocess kernel: Delta = rowsum(dO ∘ O)",
    "_bwd_dkdv": "bwd dkdv kernel (K/V-stationary)",
    "_bwd_dq": "bwd dq kernel (Q-stationary)",
}

#: The kernel that sums the dK/dV kernel's group-slice partials (runs only with S > 1) and
#: the step of its rows.
REDUCE_KERNEL = REDUCE_DKDV_KERNEL
REDUCE_STEP = "bwd dK/dV reduction over the group slices"


def sram_fill_by_kernel(prediction: Any) -> dict[str, dict[str, list[int]]]:
    """The ``tiled`` algorithm's SRAM_fill bytes of a prediction, per kernel and tensor.

    Args:
        prediction: an :class:`iomodel.traffic.Prediction` of a prefill layer.

    Returns:
        kernel name (``_attn_fwd`` for the forward rows, the keys of :data:`KERNEL_STEPS`
        and :data:`REDUCE_KERNEL` for the backward; steps of no kernel, e.g. the atomic mode's torch ops, under their
        step name) -> tensor -> ``[read_bytes, write_bytes]`` (bytes), the form
        :func:`iomodel.measure.interpret.count_flash_attention_backward` counts.
    """
    kernel_of = ({step: kernel for kernel, step in KERNEL_STEPS.items()} | {"fwd kernel": "_attn_fwd"}
                 | {REDUCE_STEP: REDUCE_KERNEL})
    out: dict[str, dict[str, list[int]]] = {}
    for r in prediction.algorithms["tiled"].rows:
        if r.level != "SRAM_fill":
            continue
        rec = out.setdefault(kernel_of.get(r.step, r.step), {}).setdefault(r.tensor, [0, 0])
        rec[0] += int(r.read_bytes)
        rec[1] += int(r.write_bytes)
    return out


def dkdv_query_rows(spec: LayerSpec) -> sp.Expr:
    """Query rows the dK/dV kernel loads for one (batch, query head), over all its key tiles.

    Non-causal: ⌈N_k/BWD_BLOCK_N⌉·N_q (every key tile streams every row). Causal: the exact
    :class:`~iomodel.traffic.sums.KTileQueryRows` sum (``docs/traffic-contract.md``); sliding
    window: :class:`~iomodel.traffic.sums.KTileQueryRowsBand`. Multiply by d·s for Q or dO bytes, by 4 for LSE or Delta bytes. Units: rows.
    """
    band = band_exprs(spec)
    if band is not None:  # window: only the query tiles that can see the key tile
        return KTileQueryRowsBand(SYM.N_q, SYM.N_k, SYM.BWD_BLOCK_M, SYM.BWD_BLOCK_N, causal_offset_expr(spec), *band)
    if not spec.causal:
        return sp.ceiling(SYM.N_k / SYM.BWD_BLOCK_N) * SYM.N_q
    return KTileQueryRows(SYM.N_q, SYM.N_k, SYM.BWD_BLOCK_M, SYM.BWD_BLOCK_N, causal_offset_expr(spec))


def tiled_bwd_rows(spec: LayerSpec, opts: dict[str, Any], split: bool = False) -> tuple[list[Row], list[Allocation]]:
    """Rows (one level) and extra allocations of the bundled backward kernels.

    Tensors: Q, O, dO, dQ ``(B, H, N_q, d)`` dtype s; K, V, dK, dV ``(B, H_kv, N_k, d)``;
    LSE, Delta ``(B, H, N_q)`` fp32; dQ_acc ``(B, H, N_q, d)`` fp32 (atomic mode); dK_exp,
    dV_exp ``(B, H, N_k, d)`` (expand_sum with GQA); dK_part, dV_part ``(B, H_kv, S, N_k, d)``
    fp32 (S = ``bwd_group_splits`` > 1). Units: bytes. Options ``dq_mode`` and
    ``gqa_bwd`` as :func:`~iomodel.traffic.build_model` validates them; ``split``: the
    dK/dV kernel runs S = ``BWD_SPLITS`` > 1 group slices (``Tiling.bwd_group_splits``).

    Raises:
        IomodelError: ``gqa_bwd="expand_sum"`` with S > 1 (that what-if has no group slices).
    """
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    S = SYM.BWD_SPLITS
    dt = spec.dtype
    gqa = spec.kv_heads < spec.heads
    expand = gqa and opts["gqa_bwd"] == "expand_sum"
    if expand and split:
        raise IomodelError("gqa_bwd='expand_sum' models flash-attn's per-query-head programs, which have no group "
                           "slices: use bwd_group_splits=1 with it")
    qrows = dkdv_query_rows(spec)
    E_q, E_k, E_kx, E_l = B * H * N_q * d, B * H_kv * N_k * d, B * H * N_k * d, B * H * N_q
    sq, skv, sl, skx = "(B, H, N_q, d)", "(B, H_kv, N_k, d)", "(B, H, N_q)", "(B, H, N_k, d)"
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

    step = KERNEL_STEPS["_bwd_preprocess"]
    row("O", step, sq, dt, s, E_q, rb=E_q * s, note="Each row read once (masked to rows < N_q).")
    row("dO", step, sq, dt, s, E_q, rb=E_q * s)
    row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, wb=E_l * FP32_WIDTH)

    if opts["dq_mode"] == "atomic":
        row("dQ_acc", "dQ_acc = zeros (fp32)", sq, "fp32", FP32_WIDTH, E_q, wb=E_q * FP32_WIDTH,
            note="Zero-initialised fp32 accumulator for the atomic adds (torch.zeros).")
        alloc.append(Allocation("dQ_acc", sq, "fp32", E_q * FP32_WIDTH, "fp32 dQ accumulator"))

    step = KERNEL_STEPS["_bwd_dkdv"]
    kv_reads = E_kx if expand else S * E_k if split else E_k
    kv_note = ("One program per (query head, key tile): K/V read once per query head (expand_sum what-if)."
               if expand else "One program per (KV head, key tile of BWD_BLOCK_N keys, group slice) loads K_j, V_j "
               "once and loops over its slice's query heads: K/V read BWD_SPLITS times." if split else
               "One program per (KV head, key tile of BWD_BLOCK_N keys) loads K_j, V_j once"
               + (" and loops over its G query heads." if gqa else "."))
    row("K", step, skv, dt, s, E_k, rb=kv_reads * s, note=kv_note)
    row("V", step, skv, dt, s, E_k, rb=kv_reads * s)
    qnote = ("Re-read for every key tile" + (", from the query tile holding the first row that sees it "
                                            "(BWD_BLOCK_M rows per step)." if spec.causal else "."))
    row("Q", step, sq, dt, s, E_q, rb=B * H * qrows * d * s, note=qnote)
    row("dO", step, sq, dt, s, E_q, rb=B * H * qrows * d * s)
    row("LSE", step, sl, "fp32", LSE_WIDTH, E_l, rb=B * H * qrows * LSE_WIDTH)
    row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, rb=B * H * qrows * FP32_WIDTH)
    if opts["dq_mode"] == "atomic":
        row("dQ_acc", step, sq, "fp32", FP32_WIDTH, E_q, rb=B * H * qrows * d * FP32_WIDTH,
            wb=B * H * qrows * d * FP32_WIDTH, note="fp32 atomic read-modify-write of the dQ rows per query step.")
    if expand:
        row("dK_exp", step, skx, dt, s, E_kx, wb=E_kx * s, note="Per query head, summed over the group below.")
        row("dV_exp", step, skx, dt, s, E_kx, wb=E_kx * s)
        for t in ("dK", "dV"):
            rstep = f"{t} = {t}_exp.sum over the GQA group"
            row(f"{t}_exp", rstep, skx, dt, s, E_kx, rb=E_kx * s)
            row(t, rstep, skv, dt, s, E_k, wb=E_k * s)
        alloc.append(Allocation("dK_exp, dV_exp", skx, dt, 2 * E_kx * s, "per-query-head dK/dV before the group sum"))
    elif split:
        E_p, sp_ = S * E_k, "(B, H_kv, S, N_k, d)"
        row("dK_part", step, sp_, "fp32", FP32_WIDTH, E_p, wb=E_p * FP32_WIDTH,
            note="Each group slice writes its fp32 partial once per key tile.")
        row("dV_part", step, sp_, "fp32", FP32_WIDTH, E_p, wb=E_p * FP32_WIDTH)
        for t in ("dK", "dV"):
            row(f"{t}_part", REDUCE_STEP, sp_, "fp32", FP32_WIDTH, E_p, rb=E_p * FP32_WIDTH,
                note="Every partial read once, summed in slice order (no atomics)." if t == "dK" else "")
            row(t, REDUCE_STEP, skv, dt, s, E_k, wb=E_k * s)
        alloc.append(Allocation("dK_part, dV_part", sp_, "fp32", 2 * E_p * FP32_WIDTH,
                                "fp32 partial dK/dV of the group slices"))
    else:
        row("dK", step, skv, dt, s, E_k, wb=E_k * s, note="Written once per key tile (summed over the GQA group).")
        row("dV", step, skv, dt, s, E_k, wb=E_k * s)

    if opts["dq_mode"] == "atomic":
        step = "dQ = dQ_acc.to(dtype)"
        row("dQ_acc", step, sq, "fp32", FP32_WIDTH, E_q, rb=E_q * FP32_WIDTH)
        row("dQ", step, sq, dt, s, E_q, wb=E_q * s)
    else:
        step = KERNEL_STEPS["_bwd_dq"]
        kr = q_stationary_key_rows(spec, SYM.DQ_BLOCK_M, SYM.DQ_BLOCK_N)
        row("Q", step, sq, dt, s, E_q, rb=E_q * s, note="Loaded once per query tile of DQ_BLOCK_M rows.")
        row("dO", step, sq, dt, s, E_q, rb=E_q * s)
        row("LSE", step, sl, "fp32", LSE_WIDTH, E_l, rb=E_l * LSE_WIDTH)
        row("Delta", step, sl, "fp32", FP32_WIDTH, E_l, rb=E_l * FP32_WIDTH)
        row("K", step, skv, dt, s, E_k, rb=B * H * kr * d * s,
            note="Re-read per query tile over the forward's key range, DQ_BLOCK_N keys per step.")
        row("V", step, skv, dt, s, E_k, rb=B * H * kr * d * s)
        row("dQ", step, sq, dt, s, E_q, wb=E_q * s)
    return rows, alloc


def add_backward(fwd: AlgorithmModel, spec: LayerSpec, opts: dict[str, Any], split: bool = False) -> AlgorithmModel:
    """The forward model with the backward's rows, allocations and FLOPs appended (``split``:
    the dK/dV kernel's group slices, :func:`tiled_bwd_rows`).

    Raises:
        IomodelError: as :func:`tiled_bwd_rows`; options are validated by ``build_model``.
    """
    rows, alloc = tiled_bwd_rows(spec, opts, split)
    per_pair = 10 if opts["dq_mode"] == "atomic" else 14
    bwd_flops = per_pair * SYM.B * SYM.H * SYM.d * visible_pairs_expr(spec)
    fwd_sram = [r for r in fwd.rows if r.level == "SRAM_fill"]
    fwd_hbm = [r for r in fwd.rows if r.level == "HBM"]
    bwd = both_levels(rows)
    n = len(rows)
    return replace(
        fwd,
        title=fwd.title.replace("Tiled forward", "Tiled forward + FlashAttention-2 backward"),
        source=fwd.source + "; Dao 2023 FlashAttention-2 Algorithm 2 (backward); kernels/backward.py",
        rows=fwd_sram + bwd[:n] + fwd_hbm + bwd[n:],
        allocated=fwd.allocated + alloc,
        flops=fwd.flops + bwd_flops,
    )


__all__ = ["KERNEL_STEPS", "REDUCE_KERNEL", "REDUCE_STEP", "add_backward", "dkdv_query_rows", "sram_fill_by_kernel",
           "tiled_bwd_rows"]
