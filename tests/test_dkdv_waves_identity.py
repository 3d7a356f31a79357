"""``dkdv_waves`` visits each distinct query range of a run once: the same waves as one program at a time.

The query-row touches of a ``_bwd_dkdv`` program depend on its key tile j only through (lo_j, end_j),
so programs of a run with equal ranges (every program without a causal mask or window) give equal
keys and rows, merged by ``max``; ``dkdv_waves`` visits each distinct range once. The oracle below
is the loop as it was before (every program of every run), and the waves must be equal, item for
item, grouped and not, causal or not, windowed, GQA with group splits, several batches and W.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from iomodel.schedule.grid import (Access, ReadGroup, _chunk_rows, _wave_ranges, dkdv_query_ranges, dkdv_slices,
                                   dkdv_waves, members)
from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec, Tiling


def _dkdv_waves_every_program(spec: LayerSpec, tiling: Tiling, w: int, grouped: bool = False):
    """iomodel.schedule.grid.dkdv_waves before the distinct-range loop (commit 981b39a), verbatim."""
    B, Hk, G, n_k = spec.batch, spec.kv_heads, spec.group, spec.seqlen_k
    d, s, bm, bn = spec.head_dim, spec.width, tiling.bwd_block_m, tiling.bwd_block_n
    S = tiling.bwd_group_splits
    slices = dkdv_slices(G, S)
    ranges = dkdv_query_ranges(spec, tiling)
    lo = [a for a, _ in ranges]
    end = [e for _, e in ranges]
    t_c = len(lo)
    k_rows = [min(bn, n_k - j * bn) for j in range(t_c)]
    per_row = {"Q": d * s, "dO": d * s, "LSE": LSE_WIDTH, "Delta": FP32_WIDTH}
    row_names, row_bytes = tuple(per_row), tuple(per_row.values())
    q_rows = sum(e - x for x, e in ranges)
    req_r = {"K": S * B * Hk * n_k * d * s, "V": S * B * Hk * n_k * d * s}
    req_r.update({t: B * Hk * G * q_rows * b for t, b in per_row.items()})
    out_k, out_v, out_w = ("dK", "dV", s) if S == 1 else ("dK_part", "dV_part", FP32_WIDTH)
    req_w = {out_k: S * B * Hk * n_k * d * out_w, out_v: S * B * Hk * n_k * d * out_w}
    chunk = _chunk_rows(bm) if spec.band is None else bm
    total = t_c * B * Hk * S
    waves: list[list[Any]] = []
    for p0, p1 in _wave_ranges(total, w):
        acc: list[Any] = []
        runs = []
        for r in range(p0 // t_c, (p1 - 1) // t_c + 1):
            sl, kv = divmod(r, B * Hk)
            runs.append((kv, sl, max(0, p0 - r * t_c), min(t_c, p1 - r * t_c)))
        if S == 1:
            for kv, _, j0, j1 in runs:
                rows = sum(k_rows[j0:j1])
                acc.append(ReadGroup(("K", "V"), (("K", kv, j0), ("V", kv, j0)), (rows * d * s,) * 2))
        else:
            for kv, j in dict.fromkeys((kv, j) for kv, _, j0, j1 in runs for j in range(j0, j1)):
                acc.append(ReadGroup(("K", "V"), (("K", kv, j), ("V", kv, j)), (k_rows[j] * d * s,) * 2))
        touch: dict = {}
        ends = []
        for kv, sl, j0, j1 in runs:
            g0, g1 = slices[sl]
            for j in range(j0, j1):
                span = end[j] - lo[j]
                for g in range(g0, g1 if span > 0 else g0):
                    for c0 in range(chunk * (lo[j] // chunk), end[j], chunk):
                        start = max(c0, lo[j])
                        key = ((g - g0) * span + start - lo[j], kv * G + g, c0, kv)
                        touch[key] = max(touch.get(key, 0), min(c0 + chunk, end[j]) - start)
                ends.append(((g1 - g0) * span, kv, j if S == 1 else (sl, j), k_rows[j]))
        events = sorted([(t, 0, h, c0, rows) for (t, h, c0, _), rows in touch.items()]
                        + [(t, 1, kv, j, rows) for t, kv, j, rows in ends])
        for t, is_write, a, b_, rows in events:
            if is_write:
                acc.append(Access(out_k, (out_k, a, b_), rows * d * out_w, write=True))
                acc.append(Access(out_v, (out_v, a, b_), rows * d * out_w, write=True))
            else:
                acc.append(ReadGroup(row_names, tuple((name, a, b_) for name in row_names),
                                     tuple(rows * per for per in row_bytes), True))
        waves.append(acc)
    return (waves if grouped else members(waves)), req_r, req_w


TILES = Tiling(bwd_block_m=32, bwd_block_n=64)
CASES = [
    # (B, H, H_kv, N_q, N_k, causal, align, window, splits)
    (1, 8, 2, 4096, 4096, False, "top-left", None, 1),      # the 2^19-token test's layer, shorter
    (2, 4, 4, 3000, 2500, False, "top-left", None, 1),      # MHA, ragged tails, two batches
    (1, 8, 2, 2048, 2048, True, "top-left", None, 1),
    (2, 6, 2, 1500, 2100, True, "bottom-right", None, 1),   # keys no row sees at the start
    (1, 5, 1, 2200, 1800, True, "bottom-right", None, 2),   # MQA split in 2 slices (fp32 partials)
    (1, 8, 1, 3000, 3000, False, "top-left", None, 3),      # non-causal, S = 3
    (1, 4, 2, 2000, 2000, True, "top-left", (300, 0), 1),   # causal sliding window
    (2, 4, 1, 1800, 2600, False, "bottom-right", (200, 150), 2),  # two-sided window, split
    (1, 2, 2, 40, 700, True, "top-left", None, 1),          # rows fewer than a chunk, spans of 0
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("w", [7, 64, 264])
def test_distinct_range_loop_gives_the_waves_of_one_program_at_a_time(case, w):
    B, H, H_kv, n_q, n_k, causal, align, window, splits = case
    kw = dict(window_left=window[0], window_right=window[1]) if window else {}
    spec = LayerSpec(B, H, H_kv, 64, n_q, n_k, dtype="bf16", causal=causal, causal_align=align, backward=True, **kw)
    tiling = replace(TILES, bwd_group_splits=splits)
    for grouped in (True, False):
        assert dkdv_waves(spec, tiling, w, grouped=grouped) == _dkdv_waves_every_program(spec, tiling, w, grouped)
