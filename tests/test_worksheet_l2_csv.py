"""The worksheet's CSV carries the L2-aware DRAM estimate (and a training step's kernels), the header names the
backward kernels' tiles, and the reconcile summary gives shares to one decimal, rounded down (a fresh user's findings,
2026-12-07).

The small training layer, by hand: B = 1, H = 2, H_kv = 1, HEAD_DIM = 16, seqlen 64, fp16 (2 B), causal; every kernel
fits L2, so each reads its inputs once from DRAM and every store stays dirty in L2 (writes 0):
  _attn_fwd        Q 4,096 + K 2,048 + V 2,048                              =  8,192 B
  _bwd_preprocess  O 4,096 + dO 4,096                                       =  8,192 B
  _bwd_dkdv        Q 4,096 + dO 4,096 + LSE 512 + Delta 512 + K 2,048 + V 2,048 = 13,312 B
  _bwd_reduce_dkdv 2 GQA slices x (dK + dV) fp32 partials, 2 x 2 x 64·16·4   = 16,384 B
  _bwd_dq          Q 4,096 + dO 4,096 + K 2,048 + V 2,048 + LSE 512 + Delta 512 = 13,312 B
  step                                                                       = 59,392 B
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from iomodel.report.worksheet import make_worksheet
from iomodel.spec.resolve import resolve_layer


def _rows(ws):
    text = "\n".join(line for line in ws.to_csv().splitlines() if not line.startswith("#"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(None not in r and None not in r.values() for r in rows)  # every row has the header's 16 columns
    return rows


@pytest.fixture(scope="module")
def step():
    return make_worksheet(resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, causal=True,
                                        passes="fwd+bwd"))


def test_the_training_step_s_estimate_and_its_kernels_are_csv_rows(step):
    rows = [r for r in _rows(step) if r["kind"].startswith("l2_aware")]
    assert [(r["kind"], r["step"], int(r["read_bytes"]), int(r["write_bytes"])) for r in rows] == [
        ("l2_aware", "", 59_392, 0),
        ("l2_aware_kernel", "_attn_fwd", 8_192, 0),
        ("l2_aware_kernel", "_bwd_preprocess", 8_192, 0),
        ("l2_aware_kernel", "_bwd_dkdv", 13_312, 0),
        ("l2_aware_kernel", "_bwd_reduce_dkdv", 16_384, 0),
        ("l2_aware_kernel", "_bwd_dq", 13_312, 0),
    ]
    assert all(r["algorithm"] == "tiled" and r["level"] == "DRAM" for r in rows)
    est = json.loads(step.to_json())["algorithms"]["tiled"]["l2_aware"]
    assert (est["read_bytes"], est["write_bytes"]) == (59_392, 0)  # the JSON's estimate, the same bytes
    assert "not a measurement" in rows[0]["note"] and "29696 B of the 29696 B stored stay dirty in L2 at the end of its kernels" in rows[0]["note"]


def test_the_forward_s_estimate_is_one_row_and_a_decode_says_why_not():
    fwd = make_worksheet(resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, causal=False,
                                       block_m=32, block_n=16, num_stages=1))
    rows = [r for r in _rows(fwd) if r["kind"].startswith("l2_aware")]
    assert [(r["kind"], int(r["read_bytes"]), int(r["write_bytes"])) for r in rows] == [("l2_aware", 8_192, 0)]
    dec = make_worksheet(resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=4096, phase="decode"))
    rows = [r for r in _rows(dec) if r["kind"].startswith("l2_aware")]
    assert len(rows) == 1 and rows[0]["read_bytes"] == "" and rows[0]["note"].startswith(
        "L2-aware DRAM estimate not computed: ")


def test_the_header_names_the_backward_tiles(step):
    t = json.loads(step.to_json())["tiling"]
    line = next(line for line in step.header_lines() if line.startswith("tiles: "))
    assert (f"backward: dK/dV BWD_BLOCK_M = {t['bwd_block_m']}, BWD_BLOCK_N = {t['bwd_block_n']}, dQ DQ_BLOCK_M = "
            f"{t['dq_block_m']}, DQ_BLOCK_N = {t['dq_block_n']}, _bwd_preprocess BLOCK_M = {t['preprocess_block_m']};"
            in line)
    assert "| tiles | " in step.to_markdown() and "BWD_BLOCK_M" in step.to_markdown()
    fwd = make_worksheet(resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64))
    assert "BWD_BLOCK_M" not in fwd.to_markdown()


def test_a_forward_s_rough_writes_point_to_its_assumptions_not_to_kernels_it_has_not():
    ws = make_worksheet(resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp32", seqlen=64))
    line = next(x for x in ws.to_markdown().splitlines() if x.startswith("- DRAM read"))
    assert "written 0 B (**ROUGH**: the assumptions below)" in line and "see its kernels" not in line
    assert "neither this total nor ncu's dram__bytes of this kernel counts it" in line


def test_the_reconcile_summary_gives_shares_to_one_decimal():
    from iomodel.measure.records import Measurement
    from iomodel.reconcile import compare
    from iomodel.report.reconcile_md import share, summary_rows
    from pathlib import Path

    m = Measurement.load(Path(__file__).resolve().parents[1] / "receipts/ncu-h200-grid-order1-2026-12-01.json")
    rows = summary_rows(compare.reconcile(m, jobs=1))
    shares = [cell for row in rows for cell in (row[5], row[7])]
    assert shares and all(re.match(r"\d+/\d+ \(\d+\.\d%\)", c) for c in shares), shares
    for c in shares:  # the share printed is the count's, rounded down to one decimal
        k, n, pct = re.match(r"(\d+)/(\d+) \(([\d.]+)%\)", c).groups()
        assert 0 <= 100 * int(k) / int(n) - float(pct) < 0.1 + 1e-9
    assert share(189, 199) == "189/199 (94.9%)" and share(43, 48) == "43/48 (89.5%)" and share(3, 3) == "3/3 (100.0%)"
