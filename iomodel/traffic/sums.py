"""Exact per-tile sums of a tiled schedule: printable as sympy ``Sum``, evaluated in closed form.

A causal (or ragged) tiled kernel visits a different number of blocks from each tile, so
its byte count is a sum over the tile index with floors, ceilings and clamps. Each such
sum is a sympy :class:`~sympy.Function` subclass here that

* prints (``str``, LaTeX, and Python code for a plain printer) as the literal ``Sum`` over
  the tile index — the definition, which the worksheet shows as the row's formula;
* prints, for :func:`iomodel.traffic.compile.python_function` (how
  :func:`iomodel.traffic.predict` evaluates it), as a call to its closed form on Python ints
  (this module's ``py_*`` functions: exact at any size, O(log) steps instead of a loop over
  every tile or row);
* prints, for numpy, as a call to the same closed form on int64 arrays (the ``np_*``
  functions), which is how :func:`iomodel.traffic.sweep` evaluates it.

Each closed form is written once (the ``_*`` functions, over an operation set: numpy's
``minimum``/``where``/``clip`` and the vectorized floor-sum recursion, or their Python-int
counterparts). The tests hold the closed forms equal to the definition's loop on random
shapes (``tests/test_traffic_sums.py``, ``tests/test_tile_sums_exact.py``).

Notation: ``N_q``/``N_k`` seqlen_q/seqlen_k, ``BM``/``BN`` block sizes (any positive
integers, not only powers of two), ``off`` the causal diagonal offset (query row m sees
key n iff n <= m + off; 0 top-left, N_k - N_q bottom-right), see
``docs/traffic-contract.md``.
"""

from __future__ import annotations

import functools
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

    Subclasses define :meth:`as_sum` (the definition), ``np_name`` (the name of the
    vectorized numpy closed form in :data:`NUMPY_IMPLS`) and ``py_name`` (the exact
    Python-int closed form in :data:`PYTHON_IMPLS`).
    """

    is_integer = True
    is_nonnegative = True
    np_name = ""
    py_name = ""

    @classmethod
    def eval(cls, *args):  # noqa: D102 - never auto-evaluate: keep the sum printable
        return None

    def as_sum(self) -> sp.Expr:  # pragma: no cover - abstract
        raise NotImplementedError

    def doit(self, **hints):
        return definition(self).doit(**hints)

    def _sympystr(self, printer):
        return printer._print(definition(self))

    def _latex(self, printer, exp=None):
        text = printer._print(definition(self))
        return f"\\left({text}\\right)^{{{exp}}}" if exp else f"\\left({text}\\right)"

    def _pythoncode(self, printer):
        # a printer that sets tile_sum_closed_forms (iomodel.traffic.compile's) calls the
        # closed form; any other prints the definition, a loop over the tile index
        if getattr(printer, "tile_sum_closed_forms", False):
            return f"{self.py_name}({', '.join(printer._print(a) for a in self.args)})"
        return printer._print(definition(self))

    def _numpycode(self, printer):
        return f"{self.np_name}({', '.join(printer._print(a) for a in self.args)})"


@functools.lru_cache(maxsize=4096)
def definition(tile_sum: TileSum) -> sp.Expr:
    """``tile_sum.as_sum()``, built once per sum (class and arguments): sympy re-canonicalises the
    Min/Max of a definition slowly (about 0.1 s for a window band's), and a model prints each sum
    many times (every row and formula holding it, for Python code and for ``str``)."""
    return tile_sum.as_sum()


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
    py_name = "py_q_tile_key_rows"

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
    py_name = "py_k_block_query_rows"

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
    py_name = "py_k_tile_query_rows"

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
    py_name = "py_visible_pairs"

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
    py_name = "py_q_tile_key_rows_band"

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
    py_name = "py_k_tile_query_rows_band"

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
    py_name = "py_visible_pairs_band"

    def as_sum(self) -> sp.Expr:
        N_q, N_k, off, WL, WR = self.args
        return sp.Sum(sp.Max(0, sp.Min(N_k, _m + off + WR + 1) - sp.Max(0, _m + off - WL)), (_m, 0, N_q - 1))


# ----------------------------------------------------------------------------------
# Closed forms, written once over an operation set: numpy on int64 arrays (vectorized, for
# sweep) or Python ints (arbitrary precision, for predict)
# ----------------------------------------------------------------------------------


class _IntOps:
    """The closed forms' operations on Python ints: exact at any size, no numpy import."""

    minimum = staticmethod(min)
    maximum = staticmethod(max)

    @staticmethod
    def where(cond, a, b):
        return a if cond else b

    @staticmethod
    def clip(x, lo, hi):  # as numpy.clip: hi when lo > hi
        return min(max(x, lo), hi)

    @staticmethod
    def floor_sum(n, m, a, b):
        return py_floor_sum(n, m, a, b)

    @staticmethod
    def ints(*xs) -> tuple[int, ...]:
        return tuple(_py_int(x) for x in xs)


def _py_int(x) -> int:
    """``x`` as a Python int; a float or other non-integer is a TypeError naming it."""
    import operator

    try:
        return operator.index(x)
    except TypeError:
        raise TypeError(f"tile sums take integers, got {x!r} ({type(x).__name__}): pass Python or numpy ints") from None


_INT_OPS = _IntOps()
_NUMPY_OPS = None


def _numpy_ops():
    """The closed forms' operations on broadcast int64 arrays (numpy imported on first use)."""
    global _NUMPY_OPS
    if _NUMPY_OPS is None:
        import types

        import numpy as np  # imported where used: the single-point CLI path needs no numpy

        _NUMPY_OPS = types.SimpleNamespace(
            minimum=np.minimum, maximum=np.maximum, where=np.where, clip=np.clip, floor_sum=floor_sum,
            ints=lambda *xs: tuple(np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in xs))),
        )
    return _NUMPY_OPS


def _i64(x) -> np.ndarray:
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    return np.asarray(x, dtype=np.int64)


def floor_sum(n, m, a, b) -> np.ndarray:
    """Σ_{i=0}^{n-1} ⌊(a·i + b)/m⌋ elementwise, for n >= 0, m >= 1, a >= 0, b >= 0 (0 where n <= 0).

    The Euclid-like floor-sum recursion (as in the AtCoder Library's ``floor_sum``),
    vectorized: O(log m) numpy passes, exact in int64 while the sum and a·n + b fit (the
    callers' sums are rows of one head, far below 2^63; :func:`py_floor_sum` is exact at any size).
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


def py_floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} ⌊(a·i + b)/m⌋ on Python ints (exact at any size), for m >= 1, a >= 0, b >= 0;
    0 for n <= 0. The same recursion as :func:`floor_sum` (AtCoder Library ``floor_sum``), O(log m) steps.

    Raises:
        ValueError: m < 1, a < 0 or b < 0 (the recursion's domain): shift the terms first.
    """
    if m < 1 or a < 0 or b < 0:
        raise ValueError(f"floor sum needs m >= 1, a >= 0, b >= 0, got m={m}, a={a}, b={b}: shift the terms first")
    ans = 0
    while n > 0:
        q, a = divmod(a, m)
        ans += (n * (n - 1) // 2) * q
        q, b = divmod(b, m)
        ans += n * q
        y_max = a * n + b
        if y_max < m:
            break
        n, b = divmod(y_max, m)
        m, a = a, m
    return ans


def _q_tile_key_rows(xp, N_q, N_k, BM, BN, off):
    """:class:`QTileKeyRows` closed form over the operation set ``xp``.

    Splits the query tiles into the last (partial) tile and the full tiles j = 1..T_r-1,
    whose key count g(j·BM + off) with g(x) = min(N_k, BN·⌈max(0, x)/BN⌉) is 0 for x <= 0,
    N_k for x > BN·⌊N_k/BN⌋, and BN·⌈x/BN⌉ in between (a floor sum); 0 when N_q = 0 (no tile).
    """

    def g(x):
        return xp.minimum(N_k, BN * cdiv(xp.maximum(0, x), BN))

    n = cdiv(N_q, BM) - 1  # full tiles j = 1..n
    last = g(N_q + off)
    z = xp.clip((-off) // BM, 0, n)  # j <= z: x <= 0, no key
    k_full = BN * (N_k // BN)
    f0 = xp.clip((k_full - off) // BM + 1, z + 1, n + 1)  # j >= f0: all N_k keys
    full = N_k * (n + 1 - f0)
    cnt = f0 - 1 - z  # middle tiles j = z+1 .. f0-1
    b = xp.where(cnt > 0, (z + 1) * BM + off + BN - 1, 0)
    middle = BN * xp.floor_sum(cnt, BN, BM, b)
    return xp.where(N_q > 0, last + full + middle, 0)


def _k_block_rows(xp, N_q, N_seen, N_k, BM, BN, off):
    """Σ_{j: j·BN - off < N_seen, j < ⌈N_k/BN⌉} (N_q - BM·⌊max(0, j·BN - off)/BM⌋) over ``xp``."""
    t_c = cdiv(N_k, BN)
    jmax = xp.minimum(t_c - 1, (N_seen - 1 + off) // BN)  # last key block that loads some row
    cnt = xp.maximum(jmax + 1, 0)
    z = xp.clip(off // BN + 1, 0, cnt)  # j < z: j·BN <= off, every query row loaded
    rest = cnt - z
    b = xp.where(rest > 0, z * BN - off, 0)
    return z * N_q + rest * N_q - BM * xp.floor_sum(rest, BM, BN, b)


def _k_tile_query_rows(xp, N_q, N_k, BM, BN, off):
    """:class:`KTileQueryRows` over ``xp``: the key tiles that load any row are those with
    j·BN - off < BM·⌈N_q/BM⌉ (the padded query length)."""
    return _k_block_rows(xp, N_q, BM * cdiv(N_q, BM), N_k, BM, BN, off)


def _visible_pairs(xp, N_q, N_k, off):
    """:class:`VisiblePairs` over ``xp``: Σ over t = off+1 .. N_q+off of clamp(t, 0, N_k)."""
    lo, hi = off + 1, N_q + off
    a, b = xp.maximum(lo, 1), xp.minimum(hi, N_k)
    middle = xp.where(b >= a, (a + b) * (b - a + 1) // 2, 0)
    top = xp.maximum(0, hi - xp.maximum(lo, N_k + 1) + 1) * N_k
    return middle + top


def _clamped_floor_sum(xp, n, a, c, low, high, D):
    """Σ_{i=0}^{n-1} ⌊clamp(a·i + c, low, high) / D⌋ over ``xp``, for n >= 0, a >= 1, D >= 1,
    0 <= low <= high: the terms are ⌊low/D⌋ up to the first i with a·i + c > low, ⌊high/D⌋
    from the first i with a·i + c >= high, and a floor sum between."""
    i0 = xp.clip((low - c) // a + 1, 0, n)
    i1 = xp.clip(-((c - high) // a), i0, n)
    cnt = i1 - i0
    mid = xp.floor_sum(cnt, D, a, xp.where(cnt > 0, a * i0 + c, 0))
    return i0 * (low // D) + mid + (n - i1) * (high // D)


def _q_tile_key_rows_band(xp, N_q, N_k, BM, BN, off, WL, WR):
    """:class:`QTileKeyRowsBand` over ``xp``: the tiles' last keys are :class:`QTileKeyRows` at
    offset off + WR; their first blocks a clamped floor sum; tiles whose first key is >= N_k
    (nothing loaded) would otherwise count the key tail N_k mod BN."""
    t_r = cdiv(N_q, BM)
    last = _q_tile_key_rows(xp, N_q, N_k, BM, BN, off + WR)
    first = BN * _clamped_floor_sum(xp, t_r, BM, off - WL, 0, N_k, BN)
    far = t_r - xp.clip(-((off - WL - N_k) // BM), 0, t_r)  # tiles i with i·BM + off − WL >= N_k
    return last - first - far * (N_k % BN)


def _k_tile_query_rows_band(xp, N_q, N_k, BM, BN, off, WL, WR):
    """:class:`KTileQueryRowsBand` over ``xp``. Every term is min(N_q, BM·⌈hi_j/BM⌉) − lo_j (a
    tile no row sees gives 0 by itself); min(N_q, BM·y) is BM·y less BM·T_r − N_q when
    y = T_r, and lo_j likewise."""
    t_r, t_c = cdiv(N_q, BM), cdiv(N_k, BN)
    pad = BM * t_r - N_q
    c_hi = BN - off + WL  # hi_j = clamp(BN·j + c_hi, 0, N_q)
    ceil_sum = _clamped_floor_sum(xp, t_c, BN, c_hi + BM - 1, BM - 1, N_q + BM - 1, BM)
    top = t_c - xp.clip((BM * (t_r - 1) - c_hi) // BN + 1, 0, t_c)  # j with hi_j > BM·(T_r − 1)
    c_lo = -off - WR  # lo_j from BN·j + c_lo
    lo_sum = BM * _clamped_floor_sum(xp, t_c, BN, c_lo, 0, BM * t_r, BM)
    lo_top = t_c - xp.clip(-((c_lo - BM * t_r) // BN), 0, t_c)  # j with BN·j + c_lo >= BM·T_r: lo_j = N_q
    return (BM * ceil_sum - top * pad) - (lo_sum - lo_top * pad)


def _visible_pairs_band(xp, N_q, N_k, off, WL, WR):
    """:class:`VisiblePairsBand` over ``xp``: Σ_m clamp(m + off + WR + 1, 0, N_k) −
    Σ_m clamp(m + off − WL, 0, N_k) (the first never below the second), two visible-pair sums."""
    return _visible_pairs(xp, N_q, N_k, off + WR) - _visible_pairs(xp, N_q, N_k, off - WL - 1)


def _check_blocks(*blocks: int) -> None:
    if min(blocks) < 1:
        raise ValueError(f"tile sums need block sizes >= 1, got {', '.join(map(str, blocks))}: pass positive blocks")


# ---- numpy (int64 arrays; every argument broadcasts; exact while the result fits int64,
# ---- which iomodel.traffic.sweep's bound guarantees) ----

def np_q_tile_key_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """:class:`QTileKeyRows` on broadcast int64 arrays (rows per (batch, head); N_q, N_k >= 0, BM, BN >= 1)."""
    xp = _numpy_ops()
    return _q_tile_key_rows(xp, *xp.ints(N_q, N_k, BM, BN, off))


def np_k_block_query_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """:class:`KBlockQueryRows` on broadcast int64 arrays (rows per (batch, head); N_q, N_k >= 0, BM, BN >= 1)."""
    xp = _numpy_ops()
    N_q, N_k, BM, BN, off = xp.ints(N_q, N_k, BM, BN, off)
    return _k_block_rows(xp, N_q, N_q, N_k, BM, BN, off)


def np_k_tile_query_rows(N_q, N_k, BM, BN, off) -> np.ndarray:
    """:class:`KTileQueryRows` on broadcast int64 arrays (rows per (batch, head); N_q, N_k >= 0, BM, BN >= 1)."""
    xp = _numpy_ops()
    return _k_tile_query_rows(xp, *xp.ints(N_q, N_k, BM, BN, off))


def np_visible_pairs(N_q, N_k, off) -> np.ndarray:
    """:class:`VisiblePairs` on broadcast int64 arrays (pairs per (batch, head))."""
    xp = _numpy_ops()
    return _visible_pairs(xp, *xp.ints(N_q, N_k, off))


def clamped_floor_sum(n, a, c, low, high, D) -> np.ndarray:
    """Σ_{i=0}^{n-1} ⌊clamp(a·i + c, low, high) / D⌋ on broadcast int64 arrays, for n >= 0,
    a >= 1, D >= 1, 0 <= low <= high."""
    xp = _numpy_ops()
    return _clamped_floor_sum(xp, *xp.ints(n, a, c, low, high, D))


def np_q_tile_key_rows_band(N_q, N_k, BM, BN, off, WL, WR) -> np.ndarray:
    """:class:`QTileKeyRowsBand` on broadcast int64 arrays (rows per (batch, head); N_q, N_k >= 0, BM, BN >= 1)."""
    xp = _numpy_ops()
    return _q_tile_key_rows_band(xp, *xp.ints(N_q, N_k, BM, BN, off, WL, WR))


def np_k_tile_query_rows_band(N_q, N_k, BM, BN, off, WL, WR) -> np.ndarray:
    """:class:`KTileQueryRowsBand` on broadcast int64 arrays (rows per (batch, head); N_q, N_k >= 0, BM, BN >= 1)."""
    xp = _numpy_ops()
    return _k_tile_query_rows_band(xp, *xp.ints(N_q, N_k, BM, BN, off, WL, WR))


def np_visible_pairs_band(N_q, N_k, off, WL, WR) -> np.ndarray:
    """:class:`VisiblePairsBand` on broadcast int64 arrays (pairs per (batch, head))."""
    xp = _numpy_ops()
    return _visible_pairs_band(xp, *xp.ints(N_q, N_k, off, WL, WR))


# ---- Python ints (arbitrary precision: what predict evaluates; no numpy import) ----

def py_q_tile_key_rows(N_q: int, N_k: int, BM: int, BN: int, off: int) -> int:
    """:class:`QTileKeyRows` on Python ints, exact at any size (rows per (batch, head)).

    Raises:
        TypeError: a non-integer argument. ValueError: BM or BN below 1.
    """
    N_q, N_k, BM, BN, off = _INT_OPS.ints(N_q, N_k, BM, BN, off)
    _check_blocks(BM, BN)
    return _q_tile_key_rows(_INT_OPS, N_q, N_k, BM, BN, off)


def py_k_block_query_rows(N_q: int, N_k: int, BM: int, BN: int, off: int) -> int:
    """:class:`KBlockQueryRows` on Python ints, exact at any size (rows per (batch, head)).

    Raises:
        TypeError: a non-integer argument. ValueError: BM or BN below 1.
    """
    N_q, N_k, BM, BN, off = _INT_OPS.ints(N_q, N_k, BM, BN, off)
    _check_blocks(BM, BN)
    return _k_block_rows(_INT_OPS, N_q, N_q, N_k, BM, BN, off)


def py_k_tile_query_rows(N_q: int, N_k: int, BM: int, BN: int, off: int) -> int:
    """:class:`KTileQueryRows` on Python ints, exact at any size (rows per (batch, head)).

    Raises:
        TypeError: a non-integer argument. ValueError: BM or BN below 1.
    """
    N_q, N_k, BM, BN, off = _INT_OPS.ints(N_q, N_k, BM, BN, off)
    _check_blocks(BM, BN)
    return _k_tile_query_rows(_INT_OPS, N_q, N_k, BM, BN, off)


def py_visible_pairs(N_q: int, N_k: int, off: int) -> int:
    """:class:`VisiblePairs` on Python ints, exact at any size (pairs per (batch, head)).

    Raises:
        TypeError: a non-integer argument.
    """
    N_q, N_k, off = _INT_OPS.ints(N_q, N_k, off)
    return _visible_pairs(_INT_OPS, N_q, N_k, off)


def py_q_tile_key_rows_band(N_q: int, N_k: int, BM: int, BN: int, off: int, WL: int, WR: int) -> int:
    """:class:`QTileKeyRowsBand` on Python ints, exact at any size (rows per (batch, head)).

    Raises:
        TypeError: a non-integer argument. ValueError: BM or BN below 1.
    """
    N_q, N_k, BM, BN, off, WL, WR = _INT_OPS.ints(N_q, N_k, BM, BN, off, WL, WR)
    _check_blocks(BM, BN)
    return _q_tile_key_rows_band(_INT_OPS, N_q, N_k, BM, BN, off, WL, WR)


def py_k_tile_query_rows_band(N_q: int, N_k: int, BM: int, BN: int, off: int, WL: int, WR: int) -> int:
    """:class:`KTileQueryRowsBand` on Python ints, exact at any size (rows per (batch, head)).

    Raises:
        TypeError: a non-integer argument. ValueError: BM or BN below 1.
    """
    N_q, N_k, BM, BN, off, WL, WR = _INT_OPS.ints(N_q, N_k, BM, BN, off, WL, WR)
    _check_blocks(BM, BN)
    return _k_tile_query_rows_band(_INT_OPS, N_q, N_k, BM, BN, off, WL, WR)


def py_visible_pairs_band(N_q: int, N_k: int, off: int, WL: int, WR: int) -> int:
    """:class:`VisiblePairsBand` on Python ints, exact at any size (pairs per (batch, head)).

    Raises:
        TypeError: a non-integer argument.
    """
    N_q, N_k, off, WL, WR = _INT_OPS.ints(N_q, N_k, off, WL, WR)
    return _visible_pairs_band(_INT_OPS, N_q, N_k, off, WL, WR)


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

#: Name -> exact Python-int implementation, for the lambdify namespace of the Python printer.
PYTHON_IMPLS = {
    "py_q_tile_key_rows": py_q_tile_key_rows,
    "py_k_block_query_rows": py_k_block_query_rows,
    "py_k_tile_query_rows": py_k_tile_query_rows,
    "py_visible_pairs": py_visible_pairs,
    "py_q_tile_key_rows_band": py_q_tile_key_rows_band,
    "py_k_tile_query_rows_band": py_k_tile_query_rows_band,
    "py_visible_pairs_band": py_visible_pairs_band,
}

__all__ = [
    "KBlockQueryRows",
    "KTileQueryRows",
    "KTileQueryRowsBand",
    "NUMPY_IMPLS",
    "PYTHON_IMPLS",
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
    "py_floor_sum",
    "py_k_block_query_rows",
    "py_k_tile_query_rows",
    "py_k_tile_query_rows_band",
    "py_q_tile_key_rows",
    "py_q_tile_key_rows_band",
    "py_visible_pairs",
    "py_visible_pairs_band",
]
