"""The L2 as measured by microbenchmarks: capacity per access pattern, from a receipt.

``benchmarks/l2_microbench.py`` sweeps a working set of W bytes across the L2's size in three
patterns (``shared-read``: every SM reads every line; ``private-read``: each line is read by
one SM; ``private-write``: each line is overwritten by one SM) and records, for each W, the
fraction of the set that each extra pass re-fetches from (or writes back to) DRAM
(``miss_per_pass``, 0 = resident, 1 = thrashed). This module reads such a receipt and gives
the working set at which half of it misses: the *effective capacity* of that pattern. It is
the physical source that :mod:`iomodel.cache.params` cites for ``DEFAULT_L2_FRACTION``
(docs/l2-calibration.md, "Microbenchmarks").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.jsonvalues import read_json

_RECEIPTS_DIR = Path(__file__).resolve().parents[2] / "receipts"
#: The receipt the bundled constants cite: H200, 2026-12-01 (command and device inside).
H200_RECEIPT = _RECEIPTS_DIR / "l2-micro-h200-2026-12-01.json"
#: The receipt of each hardware preset whose L2 was measured (command and device inside): the source of
#: :data:`iomodel.cache.params.MEASURED_L2_READ_FRACTION`.
RECEIPTS: dict[str, Path] = {"H200": H200_RECEIPT, "H100-SXM": _RECEIPTS_DIR / "l2-micro-h100-2026-12-06.json"}


def receipt_name(preset: str) -> str:
    """The receipt of ``preset`` as the repository names it (``receipts/...json``).

    Raises:
        IomodelError: a preset without a receipt (the keys of :data:`RECEIPTS`).
    """
    if preset not in RECEIPTS:
        raise IomodelError(f"no L2 microbenchmark receipt for {preset!r}: measured presets are {', '.join(RECEIPTS)}")
    return f"receipts/{RECEIPTS[preset].name}"


@lru_cache(maxsize=None)
def receipt_device(preset: str) -> str:
    """The card ``preset``'s receipt was measured on (its ``device``, e.g. ``"NVIDIA H100 80GB HBM3"``), or "" where
    the receipt cannot be read (the fraction itself is a constant of :mod:`iomodel.cache.params`; a test pins both).

    Raises:
        IomodelError: a preset without a receipt (:func:`receipt_name`).
    """
    receipt_name(preset)
    try:
        device = json.loads(RECEIPTS[preset].read_text()).get("device")
    except (OSError, ValueError, AttributeError):
        return ""
    return device if isinstance(device, str) else ""


PATTERNS = ("shared-read", "private-read", "private-write")


@dataclass(frozen=True)
class PatternCapacity:
    """Effective L2 capacity of one access pattern.

    Attributes:
        pattern: ``shared-read``, ``private-read`` or ``private-write``.
        half_miss_bytes: working set (bytes) at which ``miss_per_pass`` crosses 0.5, by linear
            interpolation between the two measured sizes around it.
        onset_bytes: largest measured working set with ``miss_per_pass`` <= 0.02 (bytes).
        full_bytes: smallest measured working set with ``miss_per_pass`` >= 0.98 (bytes), or
            None when no size reached it.
    """

    pattern: str
    half_miss_bytes: float
    onset_bytes: int
    full_bytes: int | None


def _rows(receipt: dict[str, Any], pattern: str) -> list[tuple[int, float]]:
    rows = []
    for r in receipt.get("summary", []):
        if not isinstance(r, dict) or r.get("pattern") != pattern or r.get("missing"):
            continue
        w, m = r.get("working_set_bytes"), r.get("miss_per_pass")
        if not isinstance(w, int) or isinstance(w, bool) or w <= 0 or not isinstance(m, (int, float)) or m != m:
            raise IomodelError(f"L2 microbenchmark receipt: a {pattern} row has a corrupt working_set_bytes "
                               f"or miss_per_pass ({w!r}, {m!r}): re-run benchmarks/l2_microbench.py")
        rows.append((w, float(m)))
    if len(rows) < 2:
        raise IomodelError(f"L2 microbenchmark receipt has fewer than 2 {pattern} sizes: re-run benchmarks/l2_microbench.py")
    return sorted(rows)


def half_point(points: list[tuple[float, float]]) -> float | None:
    """Where a measured miss fraction first crosses 0.5, by linear interpolation between the two sorted
    ``(size, miss per pass)`` points around it (the size's unit), or None where it never does. Read by
    :func:`pattern_capacity` and the mixed and split microbenchmarks (``benchmarks/``)."""
    for (w0, m0), (w1, m1) in zip(points, points[1:]):
        if m0 < 0.5 <= m1:
            return w0 + (w1 - w0) * (0.5 - m0) / (m1 - m0)
    return None


def pattern_capacity(receipt: dict[str, Any], pattern: str) -> PatternCapacity:
    """Effective capacity (bytes) of one pattern of an L2 microbenchmark receipt.

    Raises:
        IomodelError: unknown pattern, corrupt rows, or miss_per_pass never crosses 0.5.
    """
    if pattern not in PATTERNS:
        raise IomodelError(f"L2 access pattern {pattern!r} is unknown: use one of {', '.join(PATTERNS)}")
    rows = _rows(receipt, pattern)
    half = half_point(rows)
    if half is None:
        raise IomodelError(f"{pattern}: the re-fetch fraction never crosses 0.5 over the measured sizes: "
                           "extend SIZES_MIB in benchmarks/l2_microbench.py")
    onset = max((w for w, m in rows if m <= 0.02 and w <= half), default=rows[0][0])
    full = min((w for w, m in rows if m >= 0.98 and w >= half), default=None)
    return PatternCapacity(pattern, half, onset, full)


def measured_capacities(path: str | Path = H200_RECEIPT) -> dict[str, PatternCapacity]:
    """Every pattern's effective capacity from the receipt at ``path`` (default: the H200's).

    Returns:
        pattern -> :class:`PatternCapacity` (bytes).

    Raises:
        IomodelError: the file is missing, not JSON, or corrupt.
    """
    receipt = read_json(path, "L2 microbenchmark receipt",
                        "pass the JSON that benchmarks/l2_microbench.py wrote",
                        "re-run benchmarks/l2_microbench.py on the GPU")
    return {p: pattern_capacity(receipt, p) for p in PATTERNS}
