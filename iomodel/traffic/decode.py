"""Decode: a few query rows (seqlen_q <= 16) against a long KV cache, split-KV with a combine.

Follows ``docs/traffic-contract.md`` ("Decode (split-KV)") exactly:

* one program handles ``P = heads_per_program`` query heads of one GQA group (P divides
  G = H/H_kv) as its P·N_q rows; grid ``(num_splits, B·H_kv·G/P)``, i.e. B·H/P programs
  per split;
* split ``sp`` covers keys ``[sp·L, min((sp+1)·L, N_k))`` with
  ``L = BLOCK_N·⌈⌈N_k/num_splits⌉/BLOCK_N⌉`` (:func:`iomodel.schedule.tiles.decode_split_len`);
  every program loads its P·N_q query rows
  once (so Q is read num_splits times, empty splits included — ``_attn_decode`` loads Q
  before its key loop), and the K/V blocks of its split (an empty split loads none);
* K/V: blocks of BLOCK_N keys from the split start, masked to the split end; causal: blocks
  whose first key is >= hi = clamp(N_q + off, 0, N_k) are skipped. Because L is a multiple
  of BLOCK_N, the splits together load min(N_k, BLOCK_N·⌈hi/BLOCK_N⌉) keys per program group
  (N_k without a mask) — so K/V traffic is that times d·s per group of P query heads;
* ``num_splits == 1``: O (dtype) and LSE (fp32) written directly; ``num_splits > 1``: every
  program (empty splits included) writes an fp32 partial O (P·N_q × d) and partial LSE
  (P·N_q); then, fused (``Tiling.fused_combine``, the kernel since issue 14), every program
  adds 1 to its group's int32 counter (one atomic: 4 bytes read and 4 written) and the last
  program of each group (of B·H/P) reads the num_splits partials of its P·N_q rows back,
  writes O and LSE once and stores 0 to the counter (4 bytes), all in the one decode launch;
  not fused (the design measured before), a combine kernel reads all partials of a (b, h) and
  writes O and LSE once. Either way the partials are written and read once each.

Paged KV cache (``spec.page_size``; ``docs/traffic-contract.md``, "Paged KV cache"): K and V
are ``(num_blocks, page_size, H_kv, d)`` pages, modelled with a tight block table
(max_pages = ⌈N_k/page_size⌉ per sequence, num_blocks = B·max_pages). The kernel masks its
loads to keys < N_k, so the K/V bytes are the dense ones: a sequence's ⌈N_k/page_size⌉ pages
are read, the last one only up to its N_k-th key. Each K/V block of BLOCK_N (<= page_size)
keys loads one int32 block_table entry (⌈rows/BLOCK_N⌉ per program group) and every program
loads its sequence's cache_seqlens entry once (num_splits·B·H/P int32 reads).

Sources: Dao et al. 2023, "Flash-Decoding for long-context inference" (split-KV and the
log-sum-exp combine); the contract above for the exact element requests.
"""

from __future__ import annotations

import sympy as sp

from iomodel.spec import FP32_WIDTH, INT32_WIDTH, LSE_WIDTH, LayerSpec, Tiling
from iomodel.traffic.base import SYM, AlgorithmModel, Allocation, both_levels, make_row
from iomodel.traffic.sums import band_key_rows
from iomodel.traffic.tiled_fwd import band_exprs, causal_offset_expr, visible_pairs_expr


def decode_key_rows(spec: LayerSpec) -> sp.Expr:
    """Keys one program group (P query heads of one KV head) loads over all splits (rows).

    N_k without a mask; causal: min(N_k, BLOCK_N·⌈hi/BLOCK_N⌉), hi = clamp(N_q + off, 0, N_k);
    window: the band's blocks of rows 0..N_q-1 (:func:`~iomodel.traffic.sums.band_key_rows`:
    splits are multiples of BLOCK_N, so together they load what one program over all keys would).
    """
    band = band_exprs(spec)
    if band is not None:
        return band_key_rows(0, SYM.N_q, SYM.N_k, SYM.BLOCK_N, causal_offset_expr(spec), *band)
    if not spec.causal:
        return SYM.N_k
    hi = sp.Max(0, sp.Min(SYM.N_q + causal_offset_expr(spec), SYM.N_k))
    return sp.Min(SYM.N_k, SYM.BLOCK_N * sp.ceiling(hi / SYM.BLOCK_N))


def decode_model(spec: LayerSpec, tiling: Tiling) -> AlgorithmModel:
    """The bundled kernel's decode path (split-KV + combine), SRAM_fill rows = HBM rows.

    Tensors: Q, O ``(B, H, N_q, d)`` dtype s; K, V ``(B, H_kv, N_k, d)``; LSE ``(B, H, N_q)``
    fp32; partial O ``(num_splits, B, H, N_q, d)`` fp32 and partial LSE
    ``(num_splits, B, H, N_q)`` fp32 when num_splits > 1, and with ``tiling.fused_combine`` the
    ``SEM`` counters ``(B·H/P,)`` int32. Units: bytes, FLOPs.

    Raises:
        Nothing itself; ``build_model`` validates heads_per_program and seqlen_q.
    """
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    splits, P = SYM.splits, SYM.P
    dt = spec.dtype
    E_q, E_k, E_l = B * H * N_q * d, B * H_kv * N_k * d, B * H * N_q
    groups = B * sp.floor(H / P)  # program groups per split: B·H_kv·(G/P) = B·H/P
    kv = decode_key_rows(spec)
    fused = tiling.num_splits > 1 and tiling.fused_combine
    step = ("decode kernel (split-KV, fused combine)" if fused else
            "decode kernel (split-KV)" if tiling.num_splits > 1 else "decode kernel")
    kv_note = ("Each group of P = heads_per_program query heads reads its KV head's keys once over all splits"
               + (" (window: blocks outside the band skipped)." if spec.window else
                  " (causal: blocks from hi = clamp(N_q + off, 0, N_k) on skipped)." if spec.causal else "."))
    rows = [
        make_row("Q", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, splits * E_q * s, 0,
                 "Every program loads its P·N_q query rows once: Q is read num_splits times."),
        make_row("K", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, groups * kv * d * s, 0, kv_note),
        make_row("V", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, groups * kv * d * s, 0, kv_note),
    ]
    alloc = [
        Allocation("Q", "(B, H, N_q, d)", dt, E_q * s, "input"),
        Allocation("K", "(B, H_kv, N_k, d)", dt, E_k * s, "input (KV cache)"),
        Allocation("V", "(B, H_kv, N_k, d)", dt, E_k * s, "input (KV cache)"),
        Allocation("O", "(B, H, N_q, d)", dt, E_q * s, "output"),
        Allocation("LSE", "(B, H, N_q)", "fp32", E_l * LSE_WIDTH, "output"),
    ]
    if spec.page_size is not None:  # paged: K/V stored as pages; the two int32 tables
        pages = B * sp.ceiling(N_k / spec.page_size)  # num_blocks of a tight table: B·max_pages
        e_kv = pages * spec.page_size * H_kv * d
        shape_kv = "(num_blocks, page_size, H_kv, d)"
        for i, name in ((1, "K"), (2, "V")):
            rows[i] = make_row(name, step, "SRAM_fill", shape_kv, dt, s, e_kv, groups * kv * d * s, 0, kv_note
                               + " Pages: loads masked to keys < N_k, so the last page is read up to N_k only.")
            alloc[i] = Allocation(name, shape_kv, dt, e_kv * s, "input (paged KV cache)")
        rows += [
            make_row("BLOCK_TABLE", step, "SRAM_fill", "(B, max_pages)", "int32", INT32_WIDTH, pages,
                     groups * sp.ceiling(kv / SYM.BLOCK_N) * INT32_WIDTH, 0,
                     "One int32 entry per K/V block of BLOCK_N <= page_size keys, per program group."),
            make_row("CACHE_SEQLENS", step, "SRAM_fill", "(B,)", "int32", INT32_WIDTH, B,
                     splits * groups * INT32_WIDTH, 0, "Every program reads its sequence's N_k once."),
        ]
        alloc += [Allocation("BLOCK_TABLE", "(B, max_pages)", "int32", pages * INT32_WIDTH, "input (paged KV cache)"),
                  Allocation("CACHE_SEQLENS", "(B,)", "int32", B * INT32_WIDTH, "input (paged KV cache)")]
    if tiling.num_splits == 1:
        rows += [
            make_row("O", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, 0, E_q * s, "num_splits == 1: written directly."),
            make_row("LSE", step, "SRAM_fill", "(B, H, N_q)", "fp32", LSE_WIDTH, E_l, 0, E_l * LSE_WIDTH,
                     "num_splits == 1: written directly."),
        ]
    else:
        so, sl = "(num_splits, B, H, N_q, d)", "(num_splits, B, H, N_q)"
        e_po, e_pl = splits * E_q, splits * E_l
        merge = step if fused else "combine kernel"
        rows += [
            make_row("O_PART", step, "SRAM_fill", so, "fp32", FP32_WIDTH, e_po, 0, e_po * FP32_WIDTH,
                     "Every split writes its fp32 partial O (empty splits write 0)."),
            make_row("LSE_PART", step, "SRAM_fill", sl, "fp32", FP32_WIDTH, e_pl, 0, e_pl * FP32_WIDTH,
                     "Every split writes its partial LSE (empty splits write −inf)."),
            make_row("O_PART", merge, "SRAM_fill", so, "fp32", FP32_WIDTH, e_po, e_po * FP32_WIDTH, 0,
                     "The last split program of each group reads its group's partials back." if fused else
                     "The combine reads all partials of each (b, h)."),
            make_row("LSE_PART", merge, "SRAM_fill", sl, "fp32", FP32_WIDTH, e_pl, e_pl * FP32_WIDTH, 0),
            make_row("O", merge, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, 0, E_q * s, "Written once."),
            make_row("LSE", merge, "SRAM_fill", "(B, H, N_q)", "fp32", LSE_WIDTH, E_l, 0, E_l * LSE_WIDTH,
                     "Written once."),
        ]
        alloc += [
            Allocation("O_PART", so, "fp32", e_po * FP32_WIDTH, "split-KV partials"),
            Allocation("LSE_PART", sl, "fp32", e_pl * FP32_WIDTH, "split-KV partials"),
        ]
        if fused:
            rows.append(make_row("SEM", step, "SRAM_fill", "(B·H/P,)", "int32", INT32_WIDTH, groups,
                                 splits * groups * INT32_WIDTH, (splits + 1) * groups * INT32_WIDTH,
                                 "One atomic add per program (4 B read, 4 B written); the merging program "
                                 "stores 0 (4 B per group)."))
            alloc.append(Allocation("SEM", "(B·H/P,)", "int32", groups * INT32_WIDTH,
                                    "fused split-KV counters (cached workspace)"))
    return AlgorithmModel(
        name="tiled",
        title="Decode, split-KV with heads_per_program GQA packing (the bundled Triton kernel)",
        source="docs/traffic-contract.md (decode); Flash-Decoding (Dao et al. 2023)",
        rows=both_levels(rows),
        allocated=alloc,
        flops=4 * B * H * d * visible_pairs_expr(spec),
    )


__all__ = ["decode_key_rows", "decode_model"]
