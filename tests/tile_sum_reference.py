"""The exact tile sums evaluated the slow way, as their definitions: for the closed-form tests only.

:func:`loop_function` is :func:`iomodel.traffic.compile.python_function` with every
:class:`~iomodel.traffic.sums.TileSum` printed as its defining ``Sum`` (``sum(... for i in
range(...))`` over the tile or row index) — what ``predict`` evaluated before the closed forms
replaced the loops. :func:`loop_sums` is the same definitions written by hand as plain loops,
independent of sympy's printing.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable, Sequence

import sympy as sp

from iomodel.traffic.compile import _IntPythonPrinter


class _LoopPrinter(_IntPythonPrinter):
    """Python code on exact integers, tile sums as their definitions' loops."""

    tile_sum_closed_forms = False


def loop_function(args: Sequence[sp.Symbol], exprs: Sequence[sp.Expr]) -> Callable[..., tuple]:
    """Compile ``exprs`` like ``python_function``, but with every tile sum a Python loop (exact, slow)."""
    return sp.lambdify(list(args), list(exprs), modules=[{"Fraction": Fraction}],
                       printer=_LoopPrinter({"fully_qualified_modules": False}), cse=False, docstring_limit=0)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def loop_sums(nq: int, nk: int, bm: int, bn: int, off: int, wl: int, wr: int) -> dict[str, int]:
    """Every tile sum of one (batch, head) as a plain loop over its index, transcribed from the
    classes' docstrings in :mod:`iomodel.traffic.sums` (the window sums with band (wl, wr))."""
    t_r, t_c = _cdiv(nq, bm), _cdiv(nk, bn)
    out = {"q_tile_key_rows": 0, "k_block_query_rows": 0, "k_tile_query_rows": 0, "visible_pairs": 0,
           "q_tile_key_rows_band": 0, "k_tile_query_rows_band": 0, "visible_pairs_band": 0}
    for i in range(t_r):
        end = min((i + 1) * bm, nq)
        out["q_tile_key_rows"] += min(nk, bn * _cdiv(max(0, end + off), bn))
        hi = max(0, min(end + off + wr, nk))
        first = max(0, min(i * bm + off - wl, nk))
        if first < hi:
            out["q_tile_key_rows_band"] += min(nk, bn * _cdiv(hi, bn)) - bn * (first // bn)
    for j in range(t_c):
        lo_rows = nq - bm * (max(0, j * bn - off) // bm)
        if j * bn <= nq - 1 + off:
            out["k_block_query_rows"] += lo_rows
        out["k_tile_query_rows"] += max(0, lo_rows)
        lo = min(bm * (max(0, j * bn - off - wr) // bm), nq)
        hi = max(0, min((j + 1) * bn - off + wl, nq))
        if hi > lo:
            out["k_tile_query_rows_band"] += min(nq, bm * _cdiv(hi, bm)) - lo
    for m in range(nq):
        out["visible_pairs"] += min(nk, max(0, m + off + 1))
        out["visible_pairs_band"] += max(0, min(nk, m + off + wr + 1) - max(0, m + off - wl))
    return out
