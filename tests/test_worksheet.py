"""Worksheet content: hand-computed bytes in Markdown, JSON and CSV, and the units check.

The small layer used throughout: B = 1, H = 2, H_kv = 1 (GQA group 2), HEAD_DIM = 16,
seqlen_q = seqlen_k = 64, fp16 (s = 2 B), no mask, prefill forward, BLOCK_M = 32,
BLOCK_N = 16, num_stages = 1, H200. By hand:

Tiled (Q-stationary, T_r = 64 / 32 = 2 query tiles per head; GQA by index mapping):
  Q read once            1*2*64*16*2           =  4,096 B
  K read per query tile  2 heads * 2 tiles * 64*16*2 = 8,192 B; V the same 8,192 B
  O written once                               =  4,096 B
  LSE written once (fp32) 1*2*64*4             =    512 B
  HBM read 20,480 B, written 4,608 B, total 25,088 B; allocated Q+K+V+O+LSE = 12,800 B.
Baseline (eager chain, bf16 scores = input dtype):
  K_rep = K.repeat_interleave: read K 2,048, write K_rep 4,096; V the same
  S = Q @ K_repᵀ: read Q 4,096 + K_rep 4,096, write S (1,2,64,64) 16,384
  S * scale: read 16,384, write 16,384; softmax: read 16,384, write P 16,384
  O = P @ V_rep: read P 16,384 + V_rep 4,096, write O 4,096
  HBM read 65,536 B, written 61,440 B, total 126,976 B; ratio 126,976 / 25,088 = 5.0612...
Compulsory: Q 4,096 + K 2,048 + V 2,048 read, O 4,096 written = 12,288 B.
FLOPs: 4 * B * H * N_q * N_k * d = 4 * 1 * 2 * 64 * 64 * 16 = 524,288.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
import sympy as sp

from iomodel.report.worksheet import make_worksheet, render
from iomodel.spec.resolve import resolve_layer


@pytest.fixture(scope="module")
def ws():
    lay = resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, causal=False,
                        block_m=32, block_n=16, num_stages=1)
    return make_worksheet(lay)


def test_hand_computed_json(ws):
    d = json.loads(ws.to_json())
    assert d["compulsory_bytes"] == 12_288
    assert d["flops"] == 524_288
    tiled, base = d["algorithms"]["tiled"], d["algorithms"]["baseline"]
    assert tiled["hbm"] == {"read_bytes": 20_480, "write_bytes": 4_608, "bytes": 25_088}
    assert tiled["sram_fill"]["read_bytes"] == 20_480 and tiled["sram_fill"]["write_bytes"] == 4_608
    assert tiled["allocated_bytes"] == 12_800
    assert base["hbm"] == {"read_bytes": 65_536, "write_bytes": 61_440, "bytes": 126_976}
    assert "sram_fill" not in base
    assert base["ratio_vs_tiled"] == pytest.approx(126_976 / 25_088)
    assert d["ratio_baseline_vs_tiled"] == pytest.approx(126_976 / 25_088)
    rows = {(r["tensor"], r["level"]): r for r in tiled["rows"]}
    k = rows[("K", "HBM")]
    assert (k["read_bytes"], k["width_bytes"], k["elements"], k["reads"]) == (8_192, 2, 1_024, 4)
    assert rows[("LSE", "HBM")]["write_bytes"] == 512 and rows[("LSE", "HBM")]["dtype"] == "fp32"
    s_rows = [r for r in base["rows"] if r["tensor"] == "S"]
    assert sum(r["read_bytes"] for r in s_rows) == 2 * 16_384  # scale and softmax read S
    assert sum(r["write_bytes"] for r in s_rows) == 2 * 16_384  # matmul and scale write S
    assert d["worksheet"]["units_check"] == {"ok": True, "rows_checked": len(ws.units), "failures": []}
    assert d["spec"]["heads"] == 2 and d["tiling"]["block_m"] == 32 and d["hardware"]["name"] == "H200"
    assert len(d["assumptions"]) >= 5


def test_row_formulas_reproduce_the_bytes(ws):
    """Each row's printed formula, evaluated at the layer's symbols, gives its bytes."""
    from iomodel.traffic.model import symbol_values

    vals = {sym.name: v for sym, v in symbol_values(ws.layer.spec, ws.layer.tiling, ws.layer.hardware).items()}
    for alg in ws.prediction.algorithms.values():
        for r in alg.rows:
            expr = sp.sympify(r.read_formula, locals={k: sp.Symbol(k, positive=True, integer=True) for k in vals})
            assert int(expr.subs({sp.Symbol(k, positive=True, integer=True): v for k, v in vals.items()}).doit()) \
                == r.read_bytes, (alg.name, r.tensor, r.step)


def test_markdown(ws):
    md = render(ws, "md")
    assert md.startswith("# HBM traffic worksheet: custom, prefill fwd, 64 tokens, fp16, no mask, H200")
    # header: every assumption
    for text in ("B = 1, H = 2, H_kv = 1 (GQA group 2), HEAD_DIM = 16", "fp16 (2 B per element)",
                 "none (every query row sees every key)", "BLOCK_M = 32, BLOCK_N = 16, num_stages = 1",
                 "given (as flags or in a --schedule file)", "H200: HBM 4.8 TB/s", "Model assumptions:"):
        assert text in md, text
    # totals, ratio, compulsory, FLOPs with thousands separators and human units
    assert "**Compulsory bytes** (each input read once, each output written once): 12,288 B (12 KiB)" in md
    assert "**Baseline / tiled HBM bytes**: 5.06x" in md
    assert "524,288 (524 kFLOP)" in md
    assert "| HBM | 20,480 B (20 KiB) | 4,608 B (4.5 KiB) | 25,088 B (24.5 KiB) |" in md
    assert "| HBM | 65,536 B (64 KiB) | 61,440 B (60 KiB) | 126,976 B (124 KiB) |" in md
    # a tensor row: tensor | step | level | shape | dtype | width | reads | read | written | formula
    assert "| Q | S = Q @ K_repᵀ | HBM | (B, H, N_q, d) | fp16 | 2 | 1 | 4,096 B (4 KiB) | 0 | read `B*H*N_q*d*s` |" in md
    # allocated bytes are reported apart from transferred bytes
    assert "Allocated in HBM at the peak of the call: 12,800 B (12.5 KiB)" in md
    assert "allocated (resident)" in md and "HBM transferred" in md
    # roofline of the tiled row: 524,288 FLOP / 989.4e12 FLOP/s (H200 fp16 dense) = 0.53 ns against
    # 25,088 B / 4.8e12 B/s = 5.23 ns: memory bound; intensity 524,288 / 25,088 = 20.9 FLOP/B
    assert ("| `tiled` | 20,480 B (20 KiB) | 4,608 B (4.5 KiB) | 25,088 B (24.5 KiB) | 2.04 | 12,800 B (12.5 KiB) "
            "| 524,288 (524 kFLOP) | 20.9 | 5.23 ns | memory |") in md
    # the baseline: 126,976 B / 4.8e12 B/s = 26.5 ns, intensity 524,288 / 126,976 = 4.1 FLOP/B: memory bound
    assert "| 126,976 B (124 KiB) | 10.33 | 53,248 B (52 KiB) | 524,288 (524 kFLOP) | 4.1 | 26.5 ns | memory |" in md
    assert f"All {len(ws.units)} rows reduce to bytes" in md


def test_csv(ws):
    text = render(ws, "csv")
    header = [ln for ln in text.splitlines() if ln.startswith("# ")]
    assert any("HEAD_DIM = 16" in ln for ln in header)
    rows = list(csv.DictReader(io.StringIO("\n".join(ln for ln in text.splitlines() if not ln.startswith("#")))))
    comp = [r for r in rows if r["kind"] == "compulsory"]
    # Q (1, 2, 64, 16) + K, V (1, 1, 64, 16) fp16 read once: 4,096 + 2 * 2,048 B; O written once: 4,096 B
    assert len(comp) == 1 and (comp[0]["read_bytes"], comp[0]["write_bytes"]) == ("8192", "4096")
    alloc = {r["tensor"]: int(r["allocated_bytes"]) for r in rows if r["kind"] == "allocated" and r["algorithm"] == "tiled"}
    assert alloc["Q"] == 4_096 and alloc["K"] == 2_048 and alloc["O"] == 4_096
    total_alloc = [int(r["allocated_bytes"]) for r in rows if r["kind"] == "allocated_total" and r["algorithm"] == "tiled"]
    assert total_alloc == [ws.prediction.algorithms["tiled"].allocated_bytes]
    totals = {(r["algorithm"], r["level"]): (int(r["read_bytes"]), int(r["write_bytes"]))
              for r in rows if r["kind"] == "total"}
    assert totals[("tiled", "HBM")] == (20_480, 4_608)
    assert totals[("tiled", "SRAM_fill")] == (20_480, 4_608)
    assert totals[("baseline", "HBM")] == (65_536, 61_440)
    lse = [r for r in rows if r["kind"] == "row" and r["algorithm"] == "tiled" and r["tensor"] == "LSE"]
    assert {r["write_bytes"] for r in lse} == {"512"}
    assert sum(int(r["read_bytes"] or 0) for r in rows if r["kind"] == "row" and r["algorithm"] == "baseline") == 65_536


def test_units_check_failure_is_reported(ws, monkeypatch):
    """A row whose formula adds bytes to elements is named in the worksheet, never silently passed."""
    from dataclasses import replace

    from iomodel.traffic.base import SYM
    from iomodel.report.worksheet import Worksheet, units_check

    pred = ws.prediction
    tiled = pred.algorithms["tiled"]
    bad = replace(tiled.rows[0], read_expr=tiled.rows[0].read_expr + SYM.N_q)  # bytes + elements
    algs = dict(pred.algorithms)
    algs["tiled"] = replace(tiled, rows=[bad, *tiled.rows[1:]])
    pred2 = replace(pred, algorithms=algs)
    w2 = Worksheet(layer=ws.layer, prediction=pred2, units=units_check(pred2))
    assert not w2.units_ok
    md = w2.to_markdown()
    assert "These rows do NOT reduce to bytes:" in md and "mixes" in md
    assert w2.to_dict()["worksheet"]["units_check"]["ok"] is False


def test_causal_decode_and_backward_worksheets_reduce_to_bytes():
    for kw in (dict(phase="decode", seqlen=4096, num_splits=4), dict(passes="fwd+bwd", seqlen=1000),
               # no bundled kernel runs fp8: modelled with explicit tiles
               dict(seqlen_q=300, seqlen_k=1000, causal_align="bottom-right", dtype="fp8_e4m3", block_m=64,
                    block_n=64)):
        w = make_worksheet(resolve_layer(**kw))
        assert w.units_ok, [u for u in w.units if not u.ok]
        assert {"baseline", "tiled"} <= set(w.prediction.algorithms)
        assert w.prediction.algorithms["tiled"].sram_fill_read_bytes is not None


def test_baseline_allocation_over_hbm_capacity_is_stated():
    """Llama-3-8B at 64k tokens: the eager chain's N x N scores alone, 2 x (1, 32, 65536, 65536) bf16
    (S and P), are 512 GiB, more than the H200's 141 GB: the worksheet says it cannot run."""
    ws = make_worksheet(resolve_layer(seqlen=65536))
    alloc = ws.prediction.algorithms["baseline"].allocated_bytes
    assert alloc >= 2 * 32 * 65536 * 65536 * 2 > 141 * 1000**3
    note = [n for n in ws.layer.notes if n.startswith("`baseline` allocates")]
    assert note == [f"`baseline` allocates {alloc:,} B (522 GiB) in HBM at the peak of the call, more than the "
                    "H200's 141 GB (131 GiB): it cannot run at this size on this hardware; its transferred bytes "
                    "are what it would move if it could."]
    assert "**exceeds HBM**" in render(ws, "md") and note[0] in render(ws, "json")
    assert not [n for n in make_worksheet(resolve_layer(seqlen=8192)).layer.notes if "allocates" in n]
