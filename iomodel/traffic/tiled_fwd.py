"""Tiled forward kernels: Q-stationary (FlashAttention-2, the bundled kernel) and K/V-stationary (FlashAttention-1).

Q-stationary (``tiled``): follows ``docs/traffic-contract.md`` exactly — grid (T_r, B·H),
each program loads its BLOCK_M query rows once, streams K and V blocks of BLOCK_N keys from
key 0 to hi_i (causal: blocks above the diagonal skipped, both alignments), and writes its
O rows (dtype of Q) and LSE rows (fp32) once. GQA by index mapping: K/V of head h // G,
so K/V traffic scales with H (each query head's programs read their KV head's K/V).
Sources: Dao 2023, FlashAttention-2, Section 3.1 (forward pass, Algorithm 1) and 3.2
(parallelism over query tiles); Triton tutorial ``06-fused-attention.py`` (``_attn_fwd``).

K/V-stationary (``tiled_kv_stationary``): Dao et al. 2022, FlashAttention, Algorithm 1 —
outer loop over K/V blocks j (B_c keys), inner loop over query blocks i (B_r rows) that
reads Q_i, O_i, ℓ_i, m_i from HBM and writes O_i, ℓ_i, m_i back at every inner step. With
the paper's block sizes B_c = ⌈M/(4d)⌉, B_r = min(B_c, d) (M = SRAM size in elements) the
Q/O traffic is Θ(N²d²/M) (Theorem 2). Causal: pairs of blocks fully above the diagonal are
skipped (as the block-sparse Algorithm 5 does for zero blocks).
"""

from __future__ import annotations

import sympy as sp

from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec
from iomodel.traffic.base import SYM, AlgorithmModel, Allocation, Row, both_levels, make_row
from iomodel.traffic.sums import KBlockQueryRows, QTileKeyRows, QTileKeyRowsBand


def causal_offset_expr(spec: LayerSpec) -> sp.Expr:
    """The causal diagonal offset as an expression: 0 (top-left) or N_k − N_q (bottom-right)."""
    return sp.Integer(0) if spec.causal_align == "top-left" else SYM.N_k - SYM.N_q


def band_exprs(spec: LayerSpec) -> tuple[sp.Expr, sp.Expr] | None:
    """The window band ``(WL, WR)`` as expressions (tokens), or None without a window.

    :func:`iomodel.spec.layer.window_band`: an unbounded side is N_q + N_k (wider than any
    row's reach), a causal mask caps WR at 0.
    """
    w = spec.window
    if w is None:
        return None
    wide = SYM.N_q + SYM.N_k
    return (wide if w[0] is None else sp.Integer(w[0])), (wide if w[1] is None else sp.Integer(w[1]))


def q_stationary_key_rows(spec: LayerSpec, block_m: sp.Expr, block_n: sp.Expr) -> sp.Expr:
    """Key rows one (batch, head) loads over all its query tiles (K or V; multiply by d·s).

    Non-causal: ⌈N_q/BLOCK_M⌉·N_k (every tile reads all keys, masked to < N_k). Causal: the
    exact :class:`~iomodel.traffic.sums.QTileKeyRows` sum (``docs/traffic-contract.md``).
    Sliding window: :class:`~iomodel.traffic.sums.QTileKeyRowsBand` (blocks outside the band
    skipped). Units: rows.
    """
    band = band_exprs(spec)
    if band is not None:
        return QTileKeyRowsBand(SYM.N_q, SYM.N_k, block_m, block_n, causal_offset_expr(spec), *band)
    if not spec.causal:
        return sp.ceiling(SYM.N_q / block_m) * SYM.N_k
    return QTileKeyRows(SYM.N_q, SYM.N_k, block_m, block_n, causal_offset_expr(spec))


def tiled_fwd_rows(spec: LayerSpec, step: str = "fwd kernel", packed: bool = False, lse: bool = True) -> list[Row]:
    """Rows (one level) of the Q-stationary forward kernel; see the module docstring.

    Tensors: Q, O ``(B, H, N_q, d)`` dtype s; K, V ``(B, H_kv, N_k, d)``; LSE ``(B, H, N_q)`` fp32.

    ``packed``: one program serves P = heads_per_program query heads of one GQA group
    (FlashAttention-3's PackGQA, ``hopper/pack_gqa.h``; a schedule's ``heads_per_program``,
    :func:`iomodel.schedule.tiles.prefill_packing_refusal`): its BLOCK_M rows are
    ⌊BLOCK_M/P⌋ positions of each of P heads, so the B·⌊H/P⌋ program rows each stream the K/V
    rows of a tile of ⌊BLOCK_M/P⌋ positions, once for their P heads. Q, O and LSE are unchanged.
    ``lse`` False: the programs write O alone (``Tiling.writes_lse``; an inference kernel), no LSE row.
    """
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    dt = spec.dtype
    if packed:  # P heads of BLOCK_M / P positions per program: the K/V of a tile of BLOCK_M / P rows, per P heads
        kr = q_stationary_key_rows(spec, sp.floor(SYM.BLOCK_M / SYM.P), SYM.BLOCK_N)
        kv_read = B * sp.floor(H / SYM.P) * kr * d * s
        kv_note = ("K/V re-read by every program (T_r = ⌈N_q/⌊BLOCK_M/P⌋⌉ per group of P = heads_per_program query "
                   "heads packed into one program's rows: FlashAttention-3's PackGQA)")
    else:
        kr = q_stationary_key_rows(spec, SYM.BLOCK_M, SYM.BLOCK_N)
        kv_read = B * H * kr * d * s
        kv_note = "K/V re-read by every query tile (T_r = ⌈N_q/BLOCK_M⌉ times per query head)"
    E_q, E_k = B * H * N_q * d, B * H_kv * N_k * d
    kv_note += (", no reuse above SRAM" + ("; window: blocks outside the band skipped." if spec.window else
                                          "; causal: blocks above the diagonal skipped." if spec.causal else "."))
    rows = [
        make_row("Q", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, read_bytes=E_q * s,
                 note="Each program loads its BLOCK_M query rows once (masked to rows < N_q)."),
        make_row("K", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, read_bytes=kv_read, note=kv_note),
        make_row("V", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, read_bytes=kv_read, note=kv_note),
        make_row("O", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, write_bytes=E_q * s, note="Written once."),
    ]
    if lse:
        rows.append(make_row("LSE", step, "SRAM_fill", "(B, H, N_q)", "fp32", LSE_WIDTH, B * H * N_q,
                             write_bytes=B * H * N_q * LSE_WIDTH,
                             note="fp32 log-sum-exp per row, written once (saved for backward)."))
    return rows


def visible_pairs_expr(spec: LayerSpec) -> sp.Expr:
    """(query, key) pairs one (batch, head) computes: N_q·N_k, or the exact causal (or window band) count."""
    from iomodel.traffic.sums import VisiblePairs, VisiblePairsBand

    band = band_exprs(spec)
    if band is not None:
        return VisiblePairsBand(SYM.N_q, SYM.N_k, causal_offset_expr(spec), *band)
    if not spec.causal:
        return SYM.N_q * SYM.N_k
    return VisiblePairs(SYM.N_q, SYM.N_k, causal_offset_expr(spec))


def tiled_fwd_model(spec: LayerSpec, packed: bool = False, lse: bool = True) -> AlgorithmModel:
    """The bundled kernel's prefill forward (Q-stationary), SRAM_fill rows = HBM rows; ``packed``: a
    schedule whose programs each serve P = heads_per_program query heads (:func:`tiled_fwd_rows`;
    the bundled pointer prefill runs it from a given ``KernelConfig``); ``lse`` False: no LSE written or allocated (an inference kernel's schedule).

    Raises:
        Nothing; the tiling is validated by :class:`~iomodel.spec.Tiling` and ``predict``.
    """
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    alloc = [
        Allocation("Q", "(B, H, N_q, d)", spec.dtype, B * H * N_q * d * s, "input"),
        Allocation("K", "(B, H_kv, N_k, d)", spec.dtype, B * H_kv * N_k * d * s, "input"),
        Allocation("V", "(B, H_kv, N_k, d)", spec.dtype, B * H_kv * N_k * d * s, "input"),
        Allocation("O", "(B, H, N_q, d)", spec.dtype, B * H * N_q * d * s, "output"),
    ]
    if lse:
        alloc.append(Allocation("LSE", "(B, H, N_q)", "fp32", B * H * N_q * LSE_WIDTH, "output (saved for backward)"))
    return AlgorithmModel(
        name="tiled",
        title=("Tiled forward, Q-stationary"
               + (", P = heads_per_program query heads per program (FlashAttention-3's PackGQA)" if packed else "")
               + (", O written without LSE; no bundled kernel runs it" if not lse else
                  "; the bundled pointer prefill with KernelConfig(heads_per_program=P)" if packed else
                  " (FlashAttention-2 order; the bundled Triton and Gluon prefill kernels)")),
        source="Dao 2023 FlashAttention-2 Section 3.1; Triton tutorial 06-fused-attention; docs/traffic-contract.md"
               + ("; flash-attention hopper/pack_gqa.h" if packed else ""),
        rows=both_levels(tiled_fwd_rows(spec, packed=packed, lse=lse)),
        allocated=alloc,
        flops=4 * B * H * d * visible_pairs_expr(spec),
    )


def paper_block_sizes(d: sp.Expr = SYM.d, M: sp.Expr = SYM.M, s: sp.Expr = SYM.s) -> tuple[sp.Expr, sp.Expr]:
    """FlashAttention-1's block sizes from the SRAM size: (B_r, B_c), in rows.

    B_c = ⌈M_el/(4d)⌉, B_r = min(B_c, d), with M_el = ⌊M/s⌋ the SRAM capacity in elements
    of width s and M in bytes (Dao et al. 2022, Algorithm 1, line 1).
    """
    b_c = sp.ceiling(sp.floor(M / s) / (4 * d))
    return sp.Min(b_c, d), b_c


def kv_stationary_model(spec: LayerSpec, blocks: str = "paper") -> AlgorithmModel:
    """FlashAttention-1 Algorithm 1 (K/V-stationary), HBM = SRAM_fill rows.

    Per (batch, query head): K_j, V_j loaded once (outer loop, T_c = ⌈N_k/B_c⌉ blocks); for
    each visited (i, j): Q_i, O_i (dtype s), ℓ_i, m_i (fp32) read, O_i, ℓ_i, m_i written;
    O, ℓ, m initialised once (O = 0, ℓ = 0, m = −∞) before the loops. Non-causal: every
    query row is visited T_c times, so Q/O traffic is T_c·N_q·d·s ≈ 4N_qN_kd²s/M — Theorem 2's
    Θ(N²d²/M). Causal: :class:`~iomodel.traffic.sums.KBlockQueryRows` rows.

    Args:
        blocks: ``"paper"`` (default): B_c = ⌈M/(4d)⌉, B_r = min(B_c, d) from the SRAM size
            M (``smem_per_sm`` of the hardware); ``"tiling"``: B_r = BLOCK_M, B_c = BLOCK_N.

    Raises:
        IomodelError: ``blocks`` is neither ``"paper"`` nor ``"tiling"``.
    """
    from iomodel.errors import IomodelError

    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    if blocks == "paper":
        b_r, b_c = paper_block_sizes()
    elif blocks == "tiling":
        b_r, b_c = SYM.BLOCK_M, SYM.BLOCK_N
    else:
        raise IomodelError(f"kv_blocks {blocks!r} is unknown: use 'paper' or 'tiling'")
    if spec.causal:
        qrows = KBlockQueryRows(N_q, N_k, b_r, b_c, causal_offset_expr(spec))
    else:
        qrows = sp.ceiling(N_k / b_c) * N_q
    dt = spec.dtype
    E_q, E_k, E_l = B * H * N_q * d, B * H_kv * N_k * d, B * H * N_q
    step = "FA1 Algorithm 1"
    note_io = "Read and written at every inner step (i, j): Θ(N²d²/M) (Theorem 2)."
    rows = [
        make_row("O", "init O = 0, ℓ = 0, m = −∞", "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, write_bytes=E_q * s,
                 note="Algorithm 1, line 2."),
        make_row("ℓ", "init O = 0, ℓ = 0, m = −∞", "SRAM_fill", "(B, H, N_q)", "fp32", FP32_WIDTH, E_l,
                 write_bytes=E_l * FP32_WIDTH),
        make_row("m", "init O = 0, ℓ = 0, m = −∞", "SRAM_fill", "(B, H, N_q)", "fp32", FP32_WIDTH, E_l,
                 write_bytes=E_l * FP32_WIDTH),
        make_row("K", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, read_bytes=B * H * N_k * d * s,
                 note="Outer loop: each K/V block loaded once per query head."),
        make_row("V", step, "SRAM_fill", "(B, H_kv, N_k, d)", dt, s, E_k, read_bytes=B * H * N_k * d * s),
        make_row("Q", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, read_bytes=B * H * qrows * d * s,
                 note="Inner loop: Q_i re-read for every K/V block."),
        make_row("O", step, "SRAM_fill", "(B, H, N_q, d)", dt, s, E_q, read_bytes=B * H * qrows * d * s,
                 write_bytes=B * H * qrows * d * s, note=note_io),
        make_row("ℓ", step, "SRAM_fill", "(B, H, N_q)", "fp32", FP32_WIDTH, E_l, read_bytes=B * H * qrows * FP32_WIDTH,
                 write_bytes=B * H * qrows * FP32_WIDTH, note="Running row sums, fp32."),
        make_row("m", step, "SRAM_fill", "(B, H, N_q)", "fp32", FP32_WIDTH, E_l, read_bytes=B * H * qrows * FP32_WIDTH,
                 write_bytes=B * H * qrows * FP32_WIDTH, note="Running row maxima, fp32."),
    ]
    alloc = [
        Allocation("Q", "(B, H, N_q, d)", dt, E_q * s, "input"),
        Allocation("K", "(B, H_kv, N_k, d)", dt, E_k * s, "input"),
        Allocation("V", "(B, H_kv, N_k, d)", dt, E_k * s, "input"),
        Allocation("O", "(B, H, N_q, d)", dt, E_q * s, "output"),
        Allocation("ℓ, m", "(B, H, N_q)", "fp32", 2 * E_l * FP32_WIDTH, "saved for backward"),
    ]
    label = "B_c = ⌈M/(4d)⌉, B_r = min(B_c, d)" if blocks == "paper" else "B_r = BLOCK_M, B_c = BLOCK_N"
    return AlgorithmModel(
        name="tiled_kv_stationary",
        title=f"Tiled forward, K/V-stationary (FlashAttention-1 Algorithm 1; {label})",
        source="Dao et al. 2022 FlashAttention, Algorithm 1 and Theorem 2",
        rows=both_levels(rows),
        allocated=alloc,
        flops=4 * B * H * d * visible_pairs_expr(spec),
    )


__all__ = [
    "band_exprs",
    "causal_offset_expr",
    "kv_stationary_model",
    "paper_block_sizes",
    "q_stationary_key_rows",
    "tiled_fwd_model",
    "tiled_fwd_rows",
    "visible_pairs_expr",
]
