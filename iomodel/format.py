"""Human-readable numbers: the one home of byte, FLOP, time and token formatting.

Bytes use binary prefixes (1 KiB = 2^10 B, IEC 80000-13), FLOPs and rates SI prefixes.
Every worksheet, plot, reconciliation and receipt formats through these functions.
"""

from __future__ import annotations


_BINARY = ((2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"))
_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def human_bytes(n: float | None, digits: int = 3, decimals: int | None = None, missing: str = "-") -> str:
    """``n`` bytes with a binary prefix (1 KiB = 2^10 B): ``1.5 GiB``, ``512 B``.

    Args:
        n: bytes, or None (then ``missing`` is returned).
        digits: significant digits of the scaled value (``1.23 GiB``).
        decimals: if given, a fixed number of decimals instead (``1.2 GiB``; bytes below
            1 KiB then print as a whole number).
        missing: the text for None.
    """
    if n is None:
        return missing
    n = float(n)
    for scale, unit in _BINARY:
        if abs(n) >= scale:
            if decimals is not None:
                return f"{n / scale:.{decimals}f} {unit}"
            text = f"{n / scale:.{digits}g}"
            return f"{n / scale:,.0f} {unit}" if "e" in text else f"{text} {unit}"
    if decimals is not None:
        return f"{n:.0f} B"
    return f"{n:,.0f} B" if n.is_integer() else f"{n:.3g} B"


def fmt_int(n: float) -> str:
    """An integer with thousands separators (``1,234,567``); a non-integer with 4 digits."""
    if isinstance(n, int) or getattr(n, "is_Integer", False) or float(n).is_integer():  # int, sympy Integer
        return f"{int(n):,}"
    return f"{float(n):,.4g}"


def fmt_bytes(n: float) -> str:
    """Exact bytes and the human value: ``1,073,741,824 B (1 GiB)``."""
    if abs(n) < 1024:
        return f"{fmt_int(n)} B"
    return f"{fmt_int(n)} B ({human_bytes(n)})"


def human_si(x: float, unit: str) -> str:
    """``x`` with an SI prefix: ``68.7 GFLOP``, ``4.8 TB/s``."""
    for scale, prefix in _SI:
        if abs(x) >= scale:
            text = f"{x / scale:.3g}"
            return f"{x / scale:,.0f} {prefix}{unit}" if "e" in text else f"{text} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def fmt_flops(n: float) -> str:
    """Exact FLOPs and the SI value: ``68,719,476,736 (68.7 GFLOP)``."""
    return f"{fmt_int(n)} ({human_si(n, 'FLOP')})"


def fmt_seconds(t: float | None, missing: str = "-") -> str:
    """A duration with a readable unit: ``12.3 µs``, ``4.56 ms``, ``1.2 s`` (``missing`` for None)."""
    if t is None:
        return missing
    if t >= 1:
        return f"{t:.3g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.3g} ms"
    if t >= 1e-6:
        return f"{t * 1e6:.3g} µs"
    return f"{t * 1e9:.3g} ns"


def fmt_tokens(n: int) -> str:
    """A sequence length with a binary k (1k = 1,024 tokens): ``8k``, ``128k``, ``1,000``."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"
