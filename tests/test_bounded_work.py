"""Bounded work: the worksheet's L2-aware estimate does not grow with batch × heads (issue 10).

The simulation visits every program of the prefill grid (B·H·T_r of them); above
L2_ESTIMATE_MAX_PROGRAMS it is not run, and past the fast evaluation's L2_FAST_MAX_ROWS grid rows
(issue 12 item 4) the estimate is not computed: the worksheet says why instead of a number.
"""

from __future__ import annotations

import json
import resource
import time

from iomodel.cache.estimate import L2_ESTIMATE_MAX_PROGRAMS, L2_FAST_MAX_ROWS, not_estimated, simulated_programs
from iomodel.report.worksheet import make_worksheet
from iomodel.spec.resolve import resolve_layer
from test_cli_errors import run_cli


def test_batch_100000_finishes_in_seconds_with_the_note(capsys):
    """Llama-3-8B at 8,192 tokens, BLOCK_M 128: T_r = 64, B·H·T_r = 100,000 · 32 · 64 = 204,800,000."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, ["worksheet", "--batch", "100000"])
    took = time.perf_counter() - t0
    assert code == 0 and err == ""
    assert took < 20  # 102 s at batch 10^4 before the bound
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 200 * 1024  # KiB: under 200 MiB more
    assert ("L2-aware DRAM estimate (iomodel/cache/predict.py): not computed, B·H·T_r = 100,000·32·64 = "
            "204,800,000 programs, above 131,072 (the simulation visits every program: its cost grows with "
            "batch × heads), and B·H = 100,000·32 = 3,200,000 grid rows, above 1,024 (past the simulation's bounds "
            "the fast evaluation's cost grows with the grid rows).") in out


def test_heads_65536_finishes_with_the_note(capsys):
    """65,536 heads, 1 KV head: B·H·T_r = 1 · 65,536 · 64 = 4,194,304 programs."""
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, ["worksheet", "--heads", "65536", "--kv-heads", "1", "-f", "json"])
    assert code == 0 and err == "" and time.perf_counter() - t0 < 20
    tiled = json.loads(out)["algorithms"]["tiled"]
    assert tiled["l2_aware"] is None
    assert tiled["l2_aware_not_computed"] == (
        "B·H·T_r = 1·65,536·64 = 4,194,304 programs, above 131,072 (the simulation visits every program: "
        "its cost grows with batch × heads), and B·H = 1·65,536 = 65,536 grid rows, above 1,024 (past the "
        "simulation's bounds the fast evaluation's cost grows with the grid rows)")


def test_the_bound_is_on_programs():
    """At the bound the estimate is computed; one program above, it is not."""
    assert L2_ESTIMATE_MAX_PROGRAMS == 2**17
    at = resolve_layer(seqlen=2048, batch=256)  # 256 · 32 · 16 = 131,072 programs
    assert simulated_programs(at.spec, at.tiling) == 131_072 and not_estimated(at.spec, at.tiling) is None
    over = resolve_layer(seqlen=2049, batch=256)  # T_r = 17: 256 · 32 · 17 = 139,264
    assert simulated_programs(over.spec, over.tiling) == 139_264
    assert not_estimated(over.spec, over.tiling).startswith("B·H·T_r = 256·32·17 = 139,264 programs, above 131,072")
    assert not_estimated(over.spec) is None  # without tiles only the seqlen bound applies
    ws = make_worksheet(resolve_layer(seqlen=512, batch=8))  # small: computed
    assert ws.l2_aware is not None and "l2_aware_not_computed" not in json.loads(ws.to_json())["algorithms"]["tiled"]


def test_past_the_simulation_bounds_the_bound_is_on_grid_rows():
    """Past 2^18 tokens the fast evaluation computes the estimate up to L2_FAST_MAX_ROWS grid rows B·H:
    its cost grows with the rows, not with the length (iomodel/cache/estimate.py)."""
    assert L2_FAST_MAX_ROWS == 1024
    at = resolve_layer(seqlen=2**19, heads=1024, kv_heads=8)
    assert simulated_programs(at.spec, at.tiling) > L2_ESTIMATE_MAX_PROGRAMS and not_estimated(at.spec, at.tiling) is None
    over = resolve_layer(seqlen=2**19, heads=1032, kv_heads=8)
    assert not_estimated(over.spec, over.tiling) == (
        "seqlen above 262,144 (its simulation grows with the square of the length), and B·H = 1·1,032 = 1,032 grid "
        "rows, above 1,024 (past the simulation's bounds the fast evaluation's cost grows with the grid rows)")
