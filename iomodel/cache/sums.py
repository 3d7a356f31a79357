"""Sums of expected bytes taken in the simulation's order, bit for bit, without visiting every term.

The simulation (:func:`iomodel.cache.simulate.simulate`) adds each access's expected misses to a
per-tensor float, one after the other; the fast evaluation (:mod:`iomodel.cache.stream`) must
end on the very same double, else a sum that lands on half a byte rounds the other way.
:class:`OrderedSums` gives three ways to add that all equal that sequential loop:

* one value (a Python ``+``);
* an array of values in order (``numpy.cumsum``, which adds sequentially, unlike ``numpy.sum``);
* a run of non-negative whole numbers known only by its total and its largest term
  (:func:`add_whole_run`): the saturated waves the fast evaluation skips, each of whose terms
  is a whole number of bytes.
"""

from __future__ import annotations

import math

import numpy as np

#: Sums are exact whole numbers of bytes up to here; beyond it a float's spacing exceeds 1/2.
_EXACT_LIMIT = 1 << 51


def add_whole_run(s: float, total: int, largest: int) -> float | None:
    """``s`` plus a run of non-negative whole numbers added one at a time in double precision.

    The run is known by its ``total`` and its ``largest`` term only. Below 2^51 every partial
    sum is a whole number plus the fractional part f of ``s``; adding a whole number is exact
    unless the sum enters the next binade, where the spacing doubles and f is rounded (half to
    even) to the new spacing: the same rounding whichever term crosses, since the whole part is
    a multiple of every spacing below 1. So the loop's result is the whole part plus f rounded
    once per binade crossed, provided no single term crosses two binades, which holds when
    ``largest`` <= ``s`` (every partial sum is at least ``s``).

    Args:
        s: the running sum before the run (bytes; >= 0).
        total: the sum of the run's terms (bytes; >= 0).
        largest: the run's largest term (bytes).

    Returns:
        The double the sequential loop ends on, or None when this rule does not apply (``s``
        has a fractional part and is below ``largest``, or the sum reaches 2^51): the caller
        then adds the terms one by one.
    """
    if total == 0:
        return s
    if s + total >= _EXACT_LIMIT:
        return None
    whole = math.floor(s)
    frac = s - whole  # exact
    if frac == 0.0:
        return float(whole + total)  # whole numbers below 2^51: every partial sum exact
    if largest > s:
        return None
    _, e = math.frexp(s)  # s in [2^(e-1), 2^e): the next binade starts at 2^e
    top = 1 << e
    end = whole + total
    while end >= top:  # the partial sums enter [top, 2·top): spacing 2^(e-52)
        grid = math.ldexp(1.0, e - 52)
        frac = round(frac / grid) * grid  # round() is half to even; frac / grid is exact
        e += 1
        top <<= 1
    return float(end) + frac  # exact: frac is a multiple of the final spacing


class OrderedSums:
    """Per-tensor sums of expected bytes, each equal to the simulation's sequential float sum.

    ``values[tensor]`` starts as the integer 0 (as ``dict.get(tensor, 0)`` in the simulation) and
    becomes a float on the first addition.
    """

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def add(self, tensor: str, x: float) -> None:
        """Add one value (bytes)."""
        self.values[tensor] = self.values.get(tensor, 0) + x

    def add_array(self, tensor: str, xs: np.ndarray) -> None:
        """Add the values of a float64 array one after the other (bytes); nothing for an empty array."""
        if len(xs):
            start = float(self.values.get(tensor, 0))
            self.values[tensor] = float(np.cumsum(np.concatenate(([start], xs)))[-1])

    def can_add_whole_run(self, tensor: str, total: int, largest: int) -> bool:
        """Whether :meth:`add_whole_run` applies to this tensor's sum now."""
        return add_whole_run(float(self.values.get(tensor, 0)), total, largest) is not None

    def add_whole_run(self, tensor: str, total: int, largest: int) -> None:
        """Add a run of whole numbers known by its total and largest term (bytes; :func:`add_whole_run`).

        Raises:
            ValueError: the rule does not apply (check :meth:`can_add_whole_run` first).
        """
        if total == 0:
            return
        got = add_whole_run(float(self.values.get(tensor, 0)), total, largest)
        if got is None:
            raise ValueError(f"a whole-number run of {total} bytes cannot be added to {tensor} in one step")
        self.values[tensor] = got
