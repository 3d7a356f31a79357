"""Exact per-tile sums of a tiled schedule: printable as sympy ``Sum``, compiled to numpy.

A causal (or ragged) tiled kernel visits a different number of blocks from each tile, so
its byte count is a sum over the tile index with floors, ceilings and clamps. Each such
sum is a sympy :class:`~sympy.Function` subclass here that

* prints (``str``, LaTeX, Python code) as the literal ``Sum`` over the tile index — the
  definition, which :func:`iomodel.traffic.compile.python_function` evaluates term by term
  in exact Python integers (that is how :func:`iomodel.traffic.predict` evaluates it);
* prints for numpy as a call to a vectorized closed form (this module's ``np_*``
  functions, built on the floor-sum recursion), which is how
  :func:`iomodel.traffic.sweep` evaluates it.

The tests hold the two equal on random shapes (``tests/test_traffic_sums.py``).

Notation: ``N_q``/``N_k`` seqlen_q/seqlen_k, ``BM``/``BN`` block sizes (any positive
integers, not only powers of two), ``off`` the causal diagonal offset (query row m sees
key n iff n <= m + off; 0 top-left, N_k - N_q bottom-right), see
``docs/traffic-contract.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

if TYPE_CHECKING:  # annotations only: numpy is imported where it is used
    import numpy as np

from iomodel.spec import cdiv

#: Summation indices (integers >= 0) used in the printed sums.
_i = sp.Symbol("i", integer=True, nonnegative=True)
_j = sp.Symbol("j", integer=True, nonnegative=True)
_m = sp.Symbol("m", integer=True, nonnegative=True)


class TileSum(sp.Function):
    """Base class: an exact sum over a tile index, kept unevaluated.

    Subclasses define :meth:`as_sum` (the definition) and ``np_name`` (the name of the
    vectorized numpy closed form in :data:`NUMPY_IMPLS`).
    """

    is_integer = True
    is_nonnegative = True
    np_name = ""

    @classmethod
    def eval(cls, *args):  # noqa: D102 - never auto-evaluate: keep the sum printable
        return None

    def as_sum(self) -> sp.Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    def doit(self, **hints):
        return self.as_sum().doit(**hints)

    def _sympystr(self, printer):
        return printer._print(self.as_sum())

    def _latex(self, printer, exp=None):
        text = printer._print(self.as_sum())
        return f"\\left({text}\\right)^{{{exp}}}" if exp else f"\\left({text}\\right)"

    def _pythoncode(self, printer):
        return printer._print(self.as_sum())

    def _numpycode(self, printer):
        return f"{self.np_name}({', '.join(printer._print(a) for a in self.args)})"


class QTileKeyRows(TileSum):
    """Key rows loaded by all query tiles of one (batch, head) of a Q-stationary causal kernel.

    ``QTileKeyRows(N_q, N_k, BM, BN, off)`` =
    Σ_{i=0}^{⌈N_q/BM⌉-1} min(N_k, BN·⌈max(0, min((i+1)·BM, N_q) + off) / BN⌉):
    query tile i covers rows [i·BM, min((i+1)·BM, N_q)); its last row sees keys below
    hi_i = clamp(min((i+1)·BM, N_q) + off, 0, N_k); the kernel loads ⌈hi_i/BN⌉ blocks of BN
    keys, masked to keys < N_k (``docs/traffic-contract.md``; Triton tutorial
    06-fused-attention, causal stage loop; Dao 2023 FlashAttention-2, Section 3.1).
    Units: rows (elements per column); multiply by d·s for bytes.
    """

    nargs = 5
    np_name = "np_q_tile_key_rows"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, BM, BN, off = self.args
        term = sp.Min(N_k, BN * sp.ceiling(sp.Max(0, sp.Min((_i + 1) * BM, N_q) + off) / BN))
        return sp.Sum(term, (_i, 0, sp.ceiling(N_q / BM) - 1))


class KBlockQueryRows(TileSum):
    """Query rows loaded by all key blocks of one (batch, head) of a K/V-stationary causal loop.

    ``KBlockQueryRows(N_q, N_k, BM, BN, off)`` =
    Σ_{j=0}^{⌈N_k/BN⌉-1} [j·BN ≤ N_q - 1 + off] · (N_q - BM·⌊max(0, j·BN - off) / BM⌋):
    key block j (keys [j·BN, ...)) is seen by query rows m >= j·BN - off; the loop visits
    the query blocks of BM rows from the one holding the first such row to the last
    (masked to rows < N_q), and skips the key block entirely when no row sees it. The
    indicator is written ``min(1, max(0, N_q + off - j·BN))``. Used by the FlashAttention-2
    backward's dK/dV loop (Dao 2023, Algorithm 2; Triton tutorial 06 ``_attn_bwd_dkdv``)
    and by FlashAttention-1's Algorithm 1 with causal block skipping (Dao et al. 2022,
    Algorithm 1 and the block-sparse Algorithm 5). Units: rows.
    """

    nargs = 5
    np_name = "np_k_block_query_rows"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, BM, BN, off = self.args
        seen = sp.Min(1, sp.Max(0, N_q + off - _j * BN))
        rows = N_q - BM * sp.floor(sp.Max(0, _j * BN - off) / BM)
        return sp.Sum(seen * rows, (_j, 0, sp.ceiling(N_k / BN) - 1))


class KTileQueryRows(TileSum):
    """Query rows loaded by all key tiles of one (batch, query head) of the bundled backward's
    causal dK/dV kernel (``_bwd_dkdv`` in ``kernels/backward.py``).

    ``KTileQueryRows(N_q, N_k, BM, BN, off)`` =
    Σ_{j=0}^{⌈N_k/BN⌉-1} max(0, N_q - BM·⌊max(0, j·BN - off) / BM⌋):
    key tile j (keys [j·BN, ...)) loops over the query tiles of BM rows from
    lo_j = min(BM·⌊max(0, j·BN - off)/BM⌋, N_q) to N_q, loads masked to rows < N_q
    (``docs/traffic-contract.md``). Unlike :class:`KBlockQueryRows` there is no "some row
    sees the tile" indicator: when the first row that would see key j·BN lies beyond N_q
    but inside the last (partial) query tile, that tile's rows are still loaded. Units: rows.
    """

    nargs = 5
    np_name = "np_k_tile_query_rows"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, BM, BN, off = self.args
        rows = sp.Max(0, N_q - BM * sp.floor(sp.Max(0, _j * BN - off) / BM))
        return sp.Sum(rows, (_j, 0, sp.ceiling(N_k / BN) - 1))


class VisiblePairs(TileSum):
    """Number of (query, key) pairs of one (batch, head) that the causal mask keeps.

    ``VisiblePairs(N_q, N_k, off)`` = Σ_{m=0}^{N_q-1} min(N_k, max(0, m + off + 1)): query
    row m sees keys 0..m+off. For N_q = N_k = N top-left this is N(N+1)/2, i.e. the
    conventional ×0.5 plus half the diagonal. Units: pairs (dimensionless).
    """

    nargs = 3
    np_name = "np_visible_pairs"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, off = self.args
        return sp.Sum(sp.Min(N_k, sp.Max(0, _m + off + 1)), (_m, 0, N_q - 1))


def band_key_rows(row0, row_end, N_k, BN, off, WL, WR) -> sp.Expr:
    """Keys one program loads for the query rows [row0, row_end) under a window band (rows).

    hi = clamp(row_end + off + WR, 0, N_k), first = clamp(row0 + off − WL, 0, N_k); the kernel
    loads the blocks of BN keys from BN·⌊first/BN⌋ below hi, masked to keys < N_k, and nothing
    when first >= hi (``_band_bounds`` in ``kernels/flash_attention.py``;
    ``docs/traffic-contract.md``): [first < hi]·(min(N_k, BN·⌈hi/BN⌉) − BN·⌊first/BN⌋).
    """
    hi = sp.Max(0, sp.Min(row_end + off + WR, N_k))
    first = sp.Max(0, sp.Min(row0 + off - WL, N_k))
    return sp.Min(1, sp.Max(0, hi - first)) * (sp.Min(N_k, BN * sp.ceiling(hi / BN)) - BN * sp.floor(first / BN))


class QTileKeyRowsBand(TileSum):
    """Key rows loaded by all query tiles of one (batch, head) of the Q-stationary kernel under
    a sliding-window band (:func:`iomodel.spec.layer.window_band`: row m sees key n iff
    m + off − WL <= n <= m + off + WR).

    ``QTileKeyRowsBand(N_q, N_k, BM, BN, off, WL, WR)`` = Σ_{i=0}^{⌈N_q/BM⌉-1}
    :func:`band_key_rows` (i·BM, min((i+1)·BM, N_q)): each query tile loads the blocks from
    the one holding its first row's first key to its last row's last key, and nothing when no
    row sees a key (``docs/traffic-contract.md``). Units: rows.
    """

    nargs = 7
    np_name = "np_q_tile_key_rows_band"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, BM, BN, off, WL, WR = self.args
        return sp.Sum(band_key_rows(_i * BM, sp.Min((_i + 1) * BM, N_q), N_k, BN, off, WL, WR),
                      (_i, 0, sp.ceiling(N_q / BM) - 1))


class KTileQueryRowsBand(TileSum):
    """Query rows loaded by all key tiles of one (batch, query head) of the backward's dK/dV
    kernel under a window band.

    ``KTileQueryRowsBand(N_q, N_k, BM, BN, off, WL, WR)`` = Σ_{j=0}^{⌈N_k/BN⌉-1}
    [hi_j > lo_j]·(min(N_q, BM·⌈hi_j/BM⌉) − lo_j) with lo_j = min(BM·⌊max(0, j·BN − off − WR)/BM⌋, N_q)
    (the tile holding the first row that sees key j·BN) and hi_j = clamp((j+1)·BN − off + WL, 0, N_q)
    (one past the last row that sees key (j+1)·BN − 1): key tile j streams the query tiles
    from lo_j while their start is below hi_j, masked to rows < N_q (``_bwd_dkdv``,
    ``docs/traffic-contract.md``). Units: rows.
    """

    nargs = 7
    np_name = "np_k_tile_query_rows_band"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, BM, BN, off, WL, WR = self.args
        lo = sp.Min(BM * sp.floor(sp.Max(0, _j * BN - off - WR) / BM), N_q)
        hi = sp.Max(0, sp.Min((_j + 1) * BN - off + WL, N_q))
        term = sp.Min(1, sp.Max(0, hi - lo)) * (sp.Min(N_q, BM * sp.ceiling(hi / BM)) - lo)
        return sp.Sum(term, (_j, 0, sp.ceiling(N_k / BN) - 1))


class VisiblePairsBand(TileSum):
    """(query, key) pairs of one (batch, head) inside a window band:
    ``VisiblePairsBand(N_q, N_k, off, WL, WR)`` = Σ_{m=0}^{N_q-1}
    max(0, min(N_k, m + off + WR + 1) − max(0, m + off − WL)). Units: pairs."""

    nargs = 5
    np_name = "np_visible_pairs_band"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, off, WL, WR = self.args
        return sp.Sum(sp.Max(0, sp.Min(N_k, _m + off + WR + 1) - sp.Max(0, _m + off - WL)), (_m, 0, N_q - 1))


# ----------------------------------------------------------------------------------
# numpy closed forms (vectorized, exact in int64)
# ----------------------------------------------------------------------------------


def _i64(x) -> np.ndarray:
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    return np.asarray(x, dtype=np.int64)


def floor_sum(n, m, a, b) -> np.ndarray:
    """Σ_{i=0}^{n-1} ⌊(a·i + b)/m⌋ elementwise, for n >= 0, m >= 1, a >= 0, b >= 0.

    The Euclid-like floor-sum recursion (as in the AtCoder Library's ``floor_sum``),
    vectorized: O(log m) numpy passes, exact in int64.
    """
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    n, m, a, b = np.broadcast_arrays(_i64(n), _i64(m), _i64(a), _i64(b))
    n, m, a, b = n.copy(), m.copy(), a.copy(), b.copy()
    ans = np.zeros(n.shape, dtype=np.int64)
    active = n > 0
    while active.any():
        q = np.where(active, a // np.where(m > 0, m, 1), 0)
        ans += np.where(active, (n * (n - 1) // 2) * q, 0)
        a = np.where(active, a - q * m, a)
        q = np.where(active, b // np.where(m > 0, m, 1), 0)
        ans += np.where(active, n * q, 0)
        b = np.where(active, b - q * m, b)
        y_max = a * n + b
        active = active & (y_max >= m)
        safe_m = np.where(m > 0, m, 1)
        n = np.where(active, y_max // safe_m, n)
        b = np.where(active, y_max % safe_m, b)
        m, a = np.where(active, a, m), np.where(active, m, a)
    return ans


def np_q_tile_key_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """Closed form of :class:`QTileKeyRows` (vectorized, exact).

    Splits the query tiles into the last (partial) tile and the full tiles j = 1..T_r-1,
    whose key count g(j·BM + off) with g(x) = min(N_k, BN·⌈max(0, x)/BN⌉) is 0 for x <= 0,
    N_k for x > BN·⌊N_k/BN⌋, and BN·⌈x/BN⌉ in between (a floor sum).
    """
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    N_q, N_k, BM, BN, off = np.broadcast_arrays(_i64(N_q), _i64(N_k), _i64(BM), _i64(BN), _i64(off))

    def g(x):
        return np.minimum(N_k, BN * cdiv(np.maximum(0, x), BN))

    n = cdiv(N_q, BM) - 1  # full tiles j = 1..n
    last = g(N_q + off)
    z = np.clip((-off) // BM, 0, n)  # j <= z: x <= 0, no key
    k_full = BN * (N_k // BN)
    f0 = np.clip((k_full - off) // BM + 1, z + 1, n + 1)  # j >= f0: all N_k keys
    full = N_k * (n + 1 - f0)
    cnt = f0 - 1 - z  # middle tiles j = z+1 .. f0-1
    b = np.where(cnt > 0, (z + 1) * BM + off + BN - 1, 0)
    middle = BN * floor_sum(cnt, BN, BM, b)
    return last + full + middle


def np_k_block_query_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """Closed form of :class:`KBlockQueryRows` (vectorized, exact)."""
    return _k_block_rows(N_q, N_q, N_k, BM, BN, off)


def np_k_tile_query_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """Closed form of :class:`KTileQueryRows` (vectorized, exact): the key tiles that load any
    row are those with j·BN - off < BM·⌈N_q/BM⌉ (the padded query length)."""
    N_q, BM = _i64(N_q), _i64(BM)
    return _k_block_rows(N_q, BM * cdiv(N_q, BM), N_k, BM, BN, off)


def _k_block_rows(N_q, N_seen, N_k, BM, BN, off) -> np.ndarray:
    """Σ_{j: j·BN - off < N_seen, j < ⌈N_k/BN⌉} (N_q - BM·⌊max(0, j·BN - off)/BM⌋), exact in int64."""
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    N_q, N_seen, N_k, BM, BN, off = np.broadcast_arrays(_i64(N_q), _i64(N_seen), _i64(N_k), _i64(BM), _i64(BN),
                                                        _i64(off))
    t_c = cdiv(N_k, BN)
    jmax = np.minimum(t_c - 1, (N_seen - 1 + off) // BN)  # last key block that loads some row
    cnt = np.maximum(jmax + 1, 0)
    z = np.clip(off // BN + 1, 0, cnt)  # j < z: j·BN <= off, every query row loaded
    rest = cnt - z
    b = np.where(rest > 0, z * BN - off, 0)
    return z * N_q + rest * N_q - BM * floor_sum(rest, BM, BN, b)


def np_visible_pairs(N_q, N_k, off) -> np.ndarray:
    """Closed form of :class:`VisiblePairs`: Σ over t = off+1 .. N_q+off of clamp(t, 0, N_k)."""
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    N_q, N_k, off = np.broadcast_arrays(_i64(N_q), _i64(N_k), _i64(off))
    lo, hi = off + 1, N_q + off
    a, b = np.maximum(lo, 1), np.minimum(hi, N_k)
    middle = np.where(b >= a, (a + b) * (b - a + 1) // 2, 0)
    top = np.maximum(0, hi - np.maximum(lo, N_k + 1) + 1) * N_k
    return middle + top


def clamped_floor_sum(n, a, c, low, high, D) -> np.ndarray:
    """Σ_{i=0}^{n-1} ⌊clamp(a·i + c, low, high) / D⌋ elementwise, for n >= 0, a >= 1, D >= 1,
    0 <= low <= high (exact in int64): the terms are ⌊low/D⌋ up to the first i with
    a·i + c > low, ⌊high/D⌋ from the first i with a·i + c >= high, and a :func:`floor_sum` between."""
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    n, a, c, low, high, D = np.broadcast_arrays(_i64(n), _i64(a), _i64(c), _i64(low), _i64(high), _i64(D))
    i0 = np.clip((low - c) // a + 1, 0, n)
    i1 = np.clip(-((c - high) // a), i0, n)
    cnt = i1 - i0
    mid = floor_sum(cnt, D, a, np.where(cnt > 0, a * i0 + c, 0))
    return i0 * (low // D) + mid + (n - i1) * (high // D)


def np_q_tile_key_rows_band(N_q, N_k, BM, BN, off, WL, WR) -> np.ndarray:
    """Closed form of :class:`QTileKeyRowsBand` (vectorized, exact): the tiles' last keys are
    :func:`np_q_tile_key_rows` at offset off + WR; their first blocks a :func:`clamped_floor_sum`;
    tiles whose first key is >= N_k (nothing loaded) would otherwise count the key tail N_k mod BN."""
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    N_q, N_k, BM, BN, off, WL, WR = np.broadcast_arrays(*(_i64(x) for x in (N_q, N_k, BM, BN, off, WL, WR)))
    t_r = cdiv(N_q, BM)
    last = np_q_tile_key_rows(N_q, N_k, BM, BN, off + WR)
    first = BN * clamped_floor_sum(t_r, BM, off - WL, 0, N_k, BN)
    far = t_r - np.clip(-((off - WL - N_k) // BM), 0, t_r)  # tiles i with i·BM + off − WL >= N_k
    return last - first - far * (N_k % BN)


def np_k_tile_query_rows_band(N_q, N_k, BM, BN, off, WL, WR) -> np.ndarray:
    """Closed form of :class:`KTileQueryRowsBand` (vectorized, exact). Every term is
    min(N_q, BM·⌈hi_j/BM⌉) − lo_j (a tile no row sees gives 0 by itself); min(N_q, BM·y) is
    BM·y less BM·T_r − N_q when y = T_r, and lo_j likewise."""
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    N_q, N_k, BM, BN, off, WL, WR = np.broadcast_arrays(*(_i64(x) for x in (N_q, N_k, BM, BN, off, WL, WR)))
    t_r, t_c = cdiv(N_q, BM), cdiv(N_k, BN)
    pad = BM * t_r - N_q
    c_hi = BN - off + WL  # hi_j = clamp(BN·j + c_hi, 0, N_q)
    ceil_sum = clamped_floor_sum(t_c, BN, c_hi + BM - 1, BM - 1, N_q + BM - 1, BM)
    top = t_c - np.clip((BM * (t_r - 1) - c_hi) // BN + 1, 0, t_c)  # j with hi_j > BM·(T_r − 1)
    c_lo = -off - WR  # lo_j from BN·j + c_lo
    lo_sum = BM * clamped_floor_sum(t_c, BN, c_lo, 0, BM * t_r, BM)
    lo_top = t_c - np.clip(-((c_lo - BM * t_r) // BN), 0, t_c)  # j with BN·j + c_lo >= BM·T_r: lo_j = N_q
    return (BM * ceil_sum - top * pad) - (lo_sum - lo_top * pad)


def np_visible_pairs_band(N_q, N_k, off, WL, WR) -> np.ndarray:
    """Closed form of :class:`VisiblePairsBand`: Σ_m clamp(m + off + WR + 1, 0, N_k) − Σ_m clamp(m + off − WL, 0, N_k)
    (the first never below the second), two :func:`np_visible_pairs`."""
    return np_visible_pairs(N_q, N_k, _i64(off) + WR) - np_visible_pairs(N_q, N_k, _i64(off) - WL - 1)


#: Name -> numpy implementation, for the lambdify namespace of the numpy printer.
NUMPY_IMPLS = {
    "np_q_tile_key_rows": np_q_tile_key_rows,
    "np_k_block_query_rows": np_k_block_query_rows,
    "np_k_tile_query_rows": np_k_tile_query_rows,
    "np_visible_pairs": np_visible_pairs,
    "np_q_tile_key_rows_band": np_q_tile_key_rows_band,
    "np_k_tile_query_rows_band": np_k_tile_query_rows_band,
    "np_visible_pairs_band": np_visible_pairs_band,
}

__all__ = [
    "KBlockQueryRows",
    "KTileQueryRows",
    "KTileQueryRowsBand",
    "NUMPY_IMPLS",
    "QTileKeyRows",
    "QTileKeyRowsBand",
    "TileSum",
    "VisiblePairs",
    "VisiblePairsBand",
    "band_key_rows",
    "clamped_floor_sum",
    "floor_sum",
    "np_k_block_query_rows",
    "np_k_tile_query_rows",
    "np_k_tile_query_rows_band",
    "np_q_tile_key_rows",
    "np_q_tile_key_rows_band",
    "np_visible_pairs",
    "np_visible_pairs_band",
]
