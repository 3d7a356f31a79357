"""The loop form of :func:`iomodel.schedule.grid._band_kv_accesses`, for tests/test_band_accesses.py only.

The definition written item by item (a dictionary of touched chunks, then one sort), as the
model computed it before it was vectorised with numpy (commit 68fcf2f): the oracle the numpy
form must equal access for access.
"""

from __future__ import annotations

from iomodel.schedule.grid import Access
from iomodel.spec import LayerSpec


def band_kv_accesses_loop(qo: list[tuple[int, int, int]], kv_ranges: list[tuple[int, int]], spec: LayerSpec,
                          chunk: int, order: list[int], descending: bool = False) -> list[Access]:
    """K/V chunk touches of one wave, in time order (bytes): the definition of
    :func:`iomodel.schedule.grid._band_kv_accesses` (same arguments, same result), item by item."""
    d, s, H, G = spec.head_dim, spec.width, spec.heads, spec.group
    rank = {kv: n for n, kv in enumerate(order)}
    need: dict[tuple[int, ...], list[int]] = {}
    for bh, i0, i1 in qo:
        b, h = divmod(bh, H)
        kv = b * spec.kv_heads + h // G
        for lo, end in kv_ranges[i0:i1]:
            if end <= lo:
                continue
            for c0 in range(chunk * (lo // chunk), end, chunk):
                start, stop = max(c0, lo), min(c0 + chunk, end)
                step = end - stop if descending else start - lo
                item = (kv, c0, step) if descending else (kv, c0)
                got = need.get(item)
                if got is None:
                    need[item] = [step, start, stop]
                else:
                    got[0], got[1], got[2] = min(got[0], step), min(got[1], start), max(got[2], stop)
    acc: list[Access] = []
    for (kv, c0, *_), (_, start, stop) in sorted(need.items(), key=lambda kv_: (kv_[1][0], rank[kv_[0][0]], kv_[0][1])):
        acc.append(Access("K", ("K", kv, c0), (stop - start) * d * s, whole=True))
        acc.append(Access("V", ("V", kv, c0), (stop - start) * d * s, whole=True))
    return acc
