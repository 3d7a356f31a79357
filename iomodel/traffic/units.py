"""Units: a dimensional check that every traffic row reduces to bytes, and human formatting.

The check uses :mod:`sympy.physics.units` (the convention of ``../shared/DESIGN.md``):
element counts (B, H, H_kv, seqlen_q, seqlen_k, HEAD_DIM, tile sizes, splits) are
dimensionless, the element width ``s`` and the SRAM capacity ``M`` carry the unit
``byte``, and a row's byte formula must come out as *one* power of ``byte`` in every term
(a sum of a bytes term and an elements term, or bytes squared, is rejected).

Formatting gives exact integers with thousands separators next to a binary-prefixed
value (1 KiB = 2**10 B, 1 MiB = 2**20 B, 1 GiB = 2**30 B, IEC 80000-13) for bytes and
SI prefixes (1 GFLOP = 10**9 FLOP) for FLOPs and rates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import sympy as sp
from sympy.physics.units import Dimension, byte
from sympy.physics.units.definitions.dimension_definitions import information
from sympy.physics.units.systems.si import SI, dimsys_SI

#: Names of model symbols that are byte quantities (the rest are element counts).
BYTE_SYMBOLS: frozenset[str] = frozenset({"s", "M", "L2"})

_ONE = Dimension(1)


class UnitsError(ValueError):
    """A formula does not reduce to bytes (raised by :func:`dimension_of`)."""


def _same(a: Dimension, b: Dimension) -> bool:
    return dimsys_SI.equivalent_dims(a, b)


def dimension_of(expr: sp.Expr) -> Dimension:
    """Dimension of a sympy expression built from dimensionless symbols and ``byte``.

    Sums, ``Min``/``Max`` and ``Piecewise`` branches must agree in dimension; the
    arguments of any other function (``ceiling``, ``floor`` ...) and exponents must be
    dimensionless.

    Raises:
        UnitsError: terms of different dimension are added, or a function of a
            dimensional argument appears.
    """
    if isinstance(expr, sp.physics.units.Quantity):
        return SI.get_quantity_dimension(expr)
    if expr.is_Number or expr.is_NumberSymbol or isinstance(expr, sp.Symbol) or expr in (sp.true, sp.false):
        return _ONE
    if isinstance(expr, sp.Mul):
        dim = _ONE
        for arg in expr.args:
            dim = dim * dimension_of(arg)
        return dim
    if isinstance(expr, sp.Pow):
        if not dimsys_SI.is_dimensionless(dimension_of(expr.exp)):
            raise UnitsError(f"exponent {expr.exp} is not dimensionless")
        return dimension_of(expr.base) ** expr.exp
    if isinstance(expr, (sp.Add, sp.Min, sp.Max)):
        dims = [dimension_of(a) for a in expr.args]
        for other, arg in zip(dims[1:], expr.args[1:]):
            if not _same(dims[0], other):
                raise UnitsError(
                    f"{type(expr).__name__} mixes {dims[0]} ({expr.args[0]}) with {other} ({arg})"
                )
        return dims[0]
    if isinstance(expr, sp.Piecewise):
        dims = []
        for value, cond in expr.args:
            if cond not in (sp.true, sp.false):
                _dimensionless_condition(cond)
            if value != 0:  # a literal 0 branch is a 0 of any unit
                dims.append((dimension_of(value), value))
        for other, val in dims[1:]:
            if not _same(dims[0][0], other):
                raise UnitsError(f"Piecewise mixes {dims[0][0]} ({dims[0][1]}) with {other} ({val})")
        return dims[0][0] if dims else _ONE
    if isinstance(expr, sp.Function):
        for arg in expr.args:
            if not dimsys_SI.is_dimensionless(dimension_of(arg)):
                raise UnitsError(f"{expr.func.__name__}() of a dimensional argument: {arg}")
        return _ONE
    raise UnitsError(f"cannot analyse the units of {expr!r} ({type(expr).__name__})")


def _dimensionless_condition(cond: Any) -> None:
    """Relational conditions compare like with like (both sides of the same dimension)."""
    if isinstance(cond, sp.core.relational.Relational):
        lhs, rhs = dimension_of(cond.lhs), dimension_of(cond.rhs)
        if not (_same(lhs, rhs) or cond.rhs == 0 or cond.lhs == 0):
            raise UnitsError(f"condition {cond} compares {lhs} with {rhs}")
    elif isinstance(cond, (sp.And, sp.Or, sp.Not)):
        for c in cond.args:
            _dimensionless_condition(c)


def with_byte_units(expr: sp.Expr, byte_symbols: Iterable[str] = BYTE_SYMBOLS) -> sp.Expr:
    """Replace every byte-valued symbol ``x`` (``s``, ``M``) by ``x * byte``."""
    names = set(byte_symbols)
    return expr.subs({sym: sym * byte for sym in expr.free_symbols if sym.name in names})


@dataclass(frozen=True)
class RowUnits:
    """The outcome of the units check of one traffic row (see :func:`check_row_units`)."""

    tensor: str
    step: str
    level: str
    ok: bool
    message: str  # "bytes" when ok, else the reason


def check_row_units(
    tensor: str,
    step: str,
    level: str,
    exprs: Iterable[sp.Expr],
    width: int,
    spec_width: int,
) -> RowUnits:
    """Prove that a row's byte formulas reduce to bytes: (element count) x (bytes per element).

    With ``s`` and ``M`` in bytes and every other symbol dimensionless, a formula must be
    either

    * of dimension bytes: its bytes come from the element width ``s`` (the dtype of Q, K,
      V, O), and then the row's numeric width must be the layer's ``s``; or
    * dimensionless: an element count times the row's own integer width (fp32
      intermediates and LSE, the 1-byte causal mask), so formula x byte is bytes.

    Anything else (bytes plus elements, bytes squared, a ceiling of bytes) fails. ``s``
    may appear inside dimensionless sub-expressions such as FlashAttention-1's block size
    ``ceil(M / (4 d s))``.

    Args:
        exprs: the row's read and write byte formulas (sympy, in the model's symbols).
        width: the row's element width in bytes (numeric).
        spec_width: the layer's element width s in bytes.

    Returns:
        A :class:`RowUnits` whose ``ok`` is False with the reason when a formula fails.
    """
    for expr in exprs:
        expr = sp.sympify(expr)
        if expr == 0:
            continue
        try:
            dim = dimension_of(with_byte_units(expr))
        except UnitsError as exc:
            return RowUnits(tensor, step, level, False, str(exc))
        if _same(dim, information):
            if int(width) != int(spec_width):
                return RowUnits(tensor, step, level, False,
                                f"{expr} scales with s ({spec_width} B) but the row's dtype is {width} B wide")
        elif not dimsys_SI.is_dimensionless(dim):
            return RowUnits(tensor, step, level, False, f"{expr} has dimension {dim}, not bytes")
    return RowUnits(tensor, step, level, True, "bytes")


__all__ = [
    "BYTE_SYMBOLS",
    "RowUnits",
    "UnitsError",
    "check_row_units",
    "dimension_of",
    "with_byte_units",
]
