"""benchmarks/dkdv_start_time_sketch.py: hand-counted bytes of its two paces, and one-line argument errors."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("dkdv_start_time_sketch",
                                               ROOT / "benchmarks" / "dkdv_start_time_sketch.py")
sketch = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sketch)

# B 1, H 2 on H_kv 1 (G 2), d 64 bf16, 256:256 causal top-left, BM 32, BN 64: 4 key tiles with lo 0, 64, 128, 192
SPEC = dict(batch=1, heads=2, kv_heads=1, head_dim=64, seqlen_q=256, seqlen_k=256, dtype="bf16", causal=True,
            causal_align="top-left")
BWD = dict(block_m=32, block_n=64, group_splits=1, dkdv_order="heads-outer")
ROW = 2 * 64 * 2 + 8  # Q and dO bf16, LSE and D fp32: 264 bytes a query row
KV = 2 * 256 * 64 * 2  # K and V of the one KV head, read once: 65,536 bytes


@pytest.mark.parametrize("alpha", [None, 0.5])
def test_a_large_l2_reads_each_row_and_key_once(alpha):
    """Capacity above everything touched: each (head, chunk) item misses once, so the compulsory bytes exactly."""
    args = (SPEC, BWD, 4, 64, 1000.0, 0, 10**9)
    got, compulsory, share = (sketch.simulate(*args) if alpha is None else sketch.simulate_dynamic(*args, alpha))
    assert compulsory == 2 * 256 * ROW + KV == 200_704
    assert (got, share) == (compulsory, 1.0)


@pytest.mark.parametrize("alpha", [None, 0.5])
def test_an_l2_smaller_than_one_item_misses_every_touch(alpha):
    """Capacity below one 64-row item: every chunk entry misses. Program j (lo = 64j) enters 4 - j chunks per head,
    2 heads: 2·(4 + 3 + 2 + 1) = 20 entries of 64 rows."""
    args = (SPEC, BWD, 4, 64, 0.001, 0, 10**9)
    got, _, _ = sketch.simulate(*args) if alpha is None else sketch.simulate_dynamic(*args, alpha)
    assert got == 20 * 64 * ROW + KV == 403_456


def test_one_slot_heads_outer_rereads_only_across_programs():
    """One slot, room for 3 items (1.5 of the 4 per head): program j reads head 0 then head 1 from chunk j up, so
    its head-1 pass finds none of head 0's chunks and each program's first chunk of head 0 was evicted by the
    previous program's head-1 pass: every entry misses, as with no L2, whatever the pace."""
    cap = 3 * 64 * ROW / 2**20
    a = sketch.simulate(SPEC, BWD, 1, 64, cap, 0, 10**9)[0]
    b = sketch.simulate_dynamic(SPEC, BWD, 1, 64, cap, 0, 10**9, 1.0)[0]
    assert a == b == 20 * 64 * ROW + KV


@pytest.mark.parametrize("argv, needle", [
    (["--chunk", "0"], "--chunk, --capacity, --max-touches, --slots-scale above 0"),
    (["--alpha", "-1"], "--alpha, --jitter must be 0 or more"),
    (["--alpha", "nan"], "--alpha, --jitter must be 0 or more"),
    (["--capacity", "inf"], "--max-touches, --slots-scale above 0 (all finite)"),
    (["--jitter", "0.1"], "--jitter needs --alpha"),
    (["--capacity", "x"], "argument --capacity: invalid float value"),
    (["--receipt", "nosuch"], "no committed causal training step matches --min-tokens and --receipt"),
])
def test_bad_arguments_are_one_line(argv, needle):
    out = subprocess.run([sys.executable, "benchmarks/dkdv_start_time_sketch.py", *argv], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and out.stdout == "" and len(lines) == 1 and needle in lines[0], out.stderr
