"""Compile the model's sympy expressions to exact Python and to vectorized numpy.

Two printers, both integer-exact (``⌈a/b⌉`` prints as ``-(-a // b)``, ``⌊a/b⌋`` as
``a // b``, never through floats):

* :func:`python_function` — plain Python on ``int``: ``Min``/``Max`` are ``min``/``max``
  and every :class:`~iomodel.traffic.sums.TileSum` is a call to its closed form on Python
  ints (``iomodel.traffic.sums.py_*``: arbitrary precision, no loop over tiles or rows, no
  numpy). Used by ``predict``.
* :func:`numpy_function` — numpy on int64 arrays: ``numpy.minimum``/``numpy.maximum``
  and the tile sums' vectorized closed forms. Used by ``sweep``.

Both go through :func:`sympy.lambdify` with a custom printer, once per model structure
(see :mod:`iomodel.traffic.model`); expressions are never evaluated by ``subs``.
"""

from __future__ import annotations

from typing import Callable, Sequence

import sympy as sp
from sympy.printing.numpy import NumPyPrinter
from sympy.printing.pycode import PythonCodePrinter

from iomodel.traffic.sums import NUMPY_IMPLS, PYTHON_IMPLS


def _split(printer, arg) -> tuple[str, str]:
    """Numerator and denominator of a floor/ceiling argument, printed.

    Fast path for the model's shapes (a product with negative integer powers, or a sum over
    an integer denominator) that does not rebuild ``Min``/``Max`` subexpressions (which
    sympy re-canonicalises slowly); anything else goes through ``together``.
    """
    factors = arg.args if arg.is_Mul else (arg,)
    nums, dens = [], []
    for f in factors:
        if f.is_Pow and f.exp.is_Integer and f.exp < 0:
            dens.append(f.base ** (-f.exp))
        elif f.is_Rational and f.q != 1:
            nums.append(sp.Integer(f.p))
            dens.append(sp.Integer(f.q))
        else:
            nums.append(f)
    if not dens:
        num, den = sp.fraction(sp.together(arg))
    else:
        num, den = sp.Mul(*nums), sp.Mul(*dens)
    return printer._print(num), printer._print(den)


class _IntDivisionMixin:
    """floor/ceiling of a quotient printed as exact integer division (Python ints or int64 arrays)."""

    def _print_ceiling(self, expr):
        num, den = _split(self, expr.args[0])
        return f"(-((-({num})) // ({den})))"

    def _print_floor(self, expr):
        num, den = _split(self, expr.args[0])
        return f"(({num}) // ({den}))"


class _IntPythonPrinter(_IntDivisionMixin, PythonCodePrinter):
    """Python code on exact integers (no ``math``: floor/ceil are integer divisions); tile sums
    print as calls to their Python-int closed forms (a raw ``Sum`` still prints as a loop)."""

    tile_sum_closed_forms = True  # read by TileSum._pythoncode

    def _print_Min(self, expr):
        return "min(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Max(self, expr):
        return "max(" + ", ".join(self._print(a) for a in expr.args) + ")"

    def _print_Sum(self, expr):
        (idx, lo, hi), = expr.limits
        return (f"sum(({self._print(expr.function)}) for {self._print(idx)} in "
                f"range({self._print(lo)}, ({self._print(hi)}) + 1))")

    def _print_Rational(self, expr):
        return f"Fraction({expr.p}, {expr.q})"

    def _print_Half(self, expr):
        return "Fraction(1, 2)"

    def _print_Pow(self, expr, rational=False):
        if expr.exp == -1:
            return f"Fraction(1, {self._print(expr.base)})"
        if expr.exp == sp.Rational(1, 2):
            return f"(({self._print(expr.base)}) ** 0.5)"
        return super()._print_Pow(expr, rational=rational)


class _IntNumPyPrinter(_IntDivisionMixin, NumPyPrinter):
    """numpy code on int64 arrays; tile sums print as their closed forms."""

    def _nest(self, fn, args):
        out = self._print(args[0])
        for a in args[1:]:
            out = f"numpy.{fn}({out}, {self._print(a)})"
        return out

    def _print_Min(self, expr):
        return self._nest("minimum", expr.args)

    def _print_Max(self, expr):
        return self._nest("maximum", expr.args)

    def _print_Sum(self, expr):  # pragma: no cover - every model sum is a TileSum
        raise TypeError(f"no vectorized closed form for {expr}: wrap it in a TileSum")


def python_function(args: Sequence[sp.Symbol], exprs: Sequence[sp.Expr]) -> Callable[..., tuple]:
    """Compile ``exprs`` to one Python function of ``args`` returning a tuple (exact ints).

    Divisions outside floor/ceiling (only in informative ratios such as ``reads``) come
    out as :class:`fractions.Fraction`; callers convert them. Tile sums are their closed forms
    (:data:`iomodel.traffic.sums.PYTHON_IMPLS`), so the cost does not grow with the lengths.
    """
    from fractions import Fraction

    return sp.lambdify(list(args), list(exprs), modules=[{"Fraction": Fraction, **PYTHON_IMPLS}],
                       printer=_IntPythonPrinter({"fully_qualified_modules": False}), cse=False,
                       docstring_limit=0)


def numpy_function(args: Sequence[sp.Symbol], exprs: Sequence[sp.Expr]) -> Callable[..., list]:
    """Compile ``exprs`` to one vectorized numpy function of ``args`` (int64 in, int64 out).

    Common subexpressions are shared (``cse=True``) so a sweep evaluates each tile sum once.
    """
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    return sp.lambdify(list(args), list(exprs), modules=[NUMPY_IMPLS, {"numpy": np}, "numpy"],
                       printer=_IntNumPyPrinter({"fully_qualified_modules": True}), cse=True,
                       docstring_limit=0)


__all__ = ["numpy_function", "python_function"]
