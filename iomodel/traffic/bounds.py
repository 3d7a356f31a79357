"""References: compulsory bytes, the conventional FLOP count, and the I/O lower-bound shape.

* Compulsory bytes: each input element that can affect an output read once, each output
  written once (no algorithm moves less). Forward: Q, K, V read, O written. The backward
  is a separate call (dO is unknown at forward time): Q, K, V, dO read, dQ, dK, dV
  written. O and LSE are not compulsory (a backward may recompute them); they are
  algorithm choices. With a causal mask, keys that no query row sees (top-left with
  N_k > N_q: keys >= N_q) and query rows that see no key (bottom-right with N_q > N_k: the
  first N_q − N_k rows, whose O is 0 by definition) are not needed: K/V count
  min(N_k, max(0, N_q + off)) rows, Q/dO count N_q − min(N_q, max(0, −off)) rows. Without
  a mask every element counts.
* FLOPs: forward 4·B·H·d·(visible pairs) — two matmuls of 2 FLOPs per multiply-add —
  where visible pairs is N_q·N_k without a mask and the exact count of (query, key) pairs
  the causal mask keeps otherwise (for N_q = N_k = N top-left: N(N+1)/2, the
  conventional ×0.5 plus half the diagonal; bottom-right with N_q > N_k: rows with no key
  count 0). Backward 2.5× forward (= 10·B·H·d·pairs: five matmuls including the
  recomputation of S), the convention of Dao 2023, FlashAttention-2, Section 4.1, and of
  Triton tutorial 06's benchmark.
* Lower-bound *shape* (asymptotic, no constant claimed): FlashAttention's HBM accesses
  Θ(N²d²/M) (Dao et al. 2022, Theorem 2) and the lower bound
  Θ(min(N²d²/M, N²d/√M)) (Saha & Ye 2024, "The I/O complexity of attention, or how optimal
  is FlashAttention?"), with N² read as N_q·N_k, M the SRAM size in elements, and the
  result multiplied by B·H·s to be plotted beside bytes. Only its slope is meaningful.
"""

from __future__ import annotations

import sympy as sp

from iomodel.spec import LayerSpec
from iomodel.traffic.base import SYM, Row, make_row
from iomodel.traffic.tiled_fwd import visible_pairs_expr


def compulsory_rows(spec: LayerSpec) -> list[Row]:
    """HBM rows of the compulsory traffic (bytes): inputs read once, outputs written once per pass.

    Tensors: Q, O, dQ, dO ``(B, H, N_q, d)``; K, V, dK, dV ``(B, H_kv, N_k, d)``; width s.
    """
    from iomodel.traffic.tiled_fwd import band_exprs, causal_offset_expr

    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    E_q, E_k = B * H * N_q * d, B * H_kv * N_k * d
    band = band_exprs(spec)
    if band is not None:
        # the rows' bands [m + off − WL, m + off + WR] overlap from one row to the next, so the
        # keys some row sees are one interval, and so are the rows that see some key
        off, (wl, wr) = causal_offset_expr(spec), band
        keys = sp.Max(0, sp.Min(N_k, N_q + off + wr) - sp.Max(0, off - wl))
        qrows = sp.Max(0, sp.Min(N_q, N_k - off + wl) - sp.Max(0, -off - wr))
        why = " (sliding window: only the elements that can affect an output)"
    elif spec.causal:
        off = causal_offset_expr(spec)
        keys = sp.Min(N_k, sp.Max(0, N_q + off))  # keys some query row sees
        qrows = N_q - sp.Min(N_q, sp.Max(0, -off))  # query rows that see some key
        why = " (causal: only the elements that can affect an output)"
    else:
        keys, qrows, why = N_k, N_q, ""
    R_q, R_k = B * H * qrows * d, B * H_kv * keys * d
    sq, skv, dt = "(B, H, N_q, d)", "(B, H_kv, N_k, d)", spec.dtype
    rows = [
        make_row("Q", "forward", "HBM", sq, dt, s, E_q, R_q * s, 0, "Input, read once" + why + "."),
        make_row("K", "forward", "HBM", skv, dt, s, E_k, R_k * s, 0, "Input, read once" + why + "."),
        make_row("V", "forward", "HBM", skv, dt, s, E_k, R_k * s, 0, "Input, read once" + why + "."),
        make_row("O", "forward", "HBM", sq, dt, s, E_q, 0, E_q * s, "Output, written once."),
    ]
    if spec.backward:
        rows += [
            make_row("Q", "backward", "HBM", sq, dt, s, E_q, R_q * s, 0, "Input of the backward call, read once."),
            make_row("K", "backward", "HBM", skv, dt, s, E_k, R_k * s, 0, "Input of the backward call."),
            make_row("V", "backward", "HBM", skv, dt, s, E_k, R_k * s, 0, "Input of the backward call."),
            make_row("dO", "backward", "HBM", sq, dt, s, E_q, R_q * s, 0, "Input of the backward call."),
            make_row("dQ", "backward", "HBM", sq, dt, s, E_q, 0, E_q * s, "Output, written once."),
            make_row("dK", "backward", "HBM", skv, dt, s, E_k, 0, E_k * s, "Output, written once."),
            make_row("dV", "backward", "HBM", skv, dt, s, E_k, 0, E_k * s, "Output, written once."),
        ]
    return rows


def useful_flops(spec: LayerSpec) -> sp.Expr:
    """Conventional FLOPs of the layer: 4·B·H·d·pairs forward, plus 10·B·H·d·pairs backward.

    Units: FLOPs. Source: Dao 2023, FlashAttention-2, Section 4.1 (forward 4·seqlen²·d·heads,
    backward 2.5× forward, causal halves it); pairs made exact, see the module docstring.
    """
    fwd = 4 * SYM.B * SYM.H * SYM.d * visible_pairs_expr(spec)
    return fwd + sp.Rational(5, 2) * fwd if spec.backward else fwd


def lower_bound_shape(spec: LayerSpec) -> sp.Expr:
    """Asymptotic I/O lower-bound *shape* B·H·s·min(N_qN_kd²/M_el, N_qN_kd/√M_el), M_el = M/s.

    Units: bytes up to an unknown constant factor (Saha & Ye 2024; Dao et al. 2022 Theorem 2).
    """
    B, H, d, N_q, N_k, s, M = SYM.B, SYM.H, SYM.d, SYM.N_q, SYM.N_k, SYM.s, SYM.M
    m_el = M / s
    per_head = sp.Min(N_q * N_k * d**2 / m_el, N_q * N_k * d / sp.sqrt(m_el))
    return B * H * s * per_head


def fa_theorem2_shape(spec: LayerSpec) -> sp.Expr:
    """FlashAttention's HBM accesses Θ(N²d²/M) as B·H·s·N_qN_kd²/M_el (bytes, no constant).

    Source: Dao et al. 2022, FlashAttention, Theorem 2.
    """
    B, H, d, N_q, N_k, s, M = SYM.B, SYM.H, SYM.d, SYM.N_q, SYM.N_k, SYM.s, SYM.M
    return B * H * s * N_q * N_k * d**2 / (M / s)


__all__ = ["compulsory_rows", "fa_theorem2_shape", "lower_bound_shape", "useful_flops"]
