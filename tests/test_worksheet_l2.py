"""The worksheet says what its bound is: the no-reuse HBM roofline, and for the tiled prefill
forward kernel the L2-aware DRAM estimate of iomodel/cache/ beside it."""

from __future__ import annotations

import json

from iomodel.cache.estimate import L2_CAUSAL_DKDV_MAX_TOUCHES, L2_ESTIMATE_MAX_SEQLEN
from iomodel.report.worksheet import make_worksheet
from iomodel.spec.resolve import resolve_layer

MiB = 2**20


def test_llama3_8b_prefill_8k_is_compute_bound_with_l2_reuse():
    """Llama-3-8B, B=1, H=32, H_kv=8, d=128, bf16, 8k causal top-left on the H200.

    Compulsory reads: Q 32·8192·128·2 B = 64 MiB, K and V 8·8192·128·2 B = 16 MiB each,
    96 MiB in all. One KV head's K+V is 4 MiB, far below the 30 MiB effective L2, so a fully
    associative LRU reads exactly the compulsory 96 MiB (no re-fetch). Under the constants before 2026-12-06 the
    24-way set-associative default lost a few K/V lines to set conflicts (under 0.1 %); under the forward's own
    constants (2026-12-06: 192 ways on the H200) it reads the compulsory 96 MiB too. The Gluon prefill's tiles, 128x128,
    2 stages, 12 warps: SRAM per program = (128 + 2·2·128)·128·2 B = 160 KiB of 228 KiB per SM -> 1
    program per SM.
    """
    ws = make_worksheet(resolve_layer(seqlen=8192))
    e = ws.l2_aware
    tiled = ws.prediction.algorithms["tiled"]
    hw = ws.layer.hardware
    assert e is not None
    assert e.read_bytes == 96 * MiB  # 96 MiB < read < 96 MiB x 1.001 at 24 ways, before 2026-12-06
    from iomodel.cache.params import L2Params
    from iomodel.cache.predict import predict_tiled

    lru = predict_tiled(ws.layer.spec, ws.layer.tiling, L2Params(hw.l2_bytes, hw.num_sms, 1, ways=None), "reverse")
    assert lru.hbm_read_bytes == 96 * MiB
    assert e.programs_per_sm == 1
    assert (e.num_warps, e.tile_order) == (12, "reverse")
    moved = e.read_bytes + e.write_bytes
    assert moved < tiled.hbm_read_bytes + tiled.hbm_write_bytes  # reuse saves bytes
    t_c, t_m = tiled.flops / tiled.peak_flops, moved / hw.hbm_bandwidth
    assert t_c > t_m and e.bound == "compute" and e.roofline_time_s == t_c
    assert tiled.bound == "memory"  # the no-reuse column says otherwise: hence the labels

    md = ws.to_markdown()
    assert "| bound (no-reuse HBM) |" in md
    assert "**L2-aware DRAM estimate of `tiled`** (an estimate from iomodel/cache/predict.py `predict_tiled`" in md
    assert "**compute bound**" in md and "programs per SM = 1" in md

    j = json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"]
    assert (j["read_bytes"], j["write_bytes"], j["bound"]) == (e.read_bytes, e.write_bytes, "compute")
    assert j["roofline_time_s"] == e.roofline_time_s and j["programs_per_sm"] == 1
    assert j["source"] == "estimate from iomodel/cache/predict.py predict_tiled (not a measurement)" and any("Effective L2 capacity" in a for a in j["assumptions"])


def test_no_estimate_for_decode_or_very_long_where_the_fast_evaluation_does_not_apply():
    # fwd+bwd has its estimate since issue 11 (tests/test_l2_training.py); past 2^18 tokens the fast
    # evaluation covers bandless layers in the bundled order (issue 12 item 4), a causal dK/dV kernel in closed
    # form on long sequences past L2_DKDV_CLOSED_FORM_MIN_TOUCHES touches (2026-12-04, night: 32 heads at 2^20
    # tokens were refused before; tests/test_dkdv_closed.py), else touch by touch up to
    # L2_CAUSAL_DKDV_MAX_TOUCHES; past fast_max_rows grid rows (1,024 from 2^17 tokens) it is refused
    long = {"seqlen": L2_ESTIMATE_MAX_SEQLEN * 2, "heads": 1, "kv_heads": 1}
    assert make_worksheet(resolve_layer(**long)).l2_aware is not None
    assert make_worksheet(resolve_layer(**long, passes="fwd+bwd")).l2_aware is not None
    longer = {"seqlen": L2_ESTIMATE_MAX_SEQLEN * 4, "heads": 32, "kv_heads": 8, "passes": "fwd+bwd"}
    assert L2_CAUSAL_DKDV_MAX_TOUCHES < 268_697_600  # its touches: computed in closed form
    assert make_worksheet(resolve_layer(**longer)).l2_aware is not None
    wide = {**longer, "batch": 33}
    for kw, why in (({"phase": "decode", "seqlen": 4096}, "decode"),
                    (wide, "B·H = 33·32 = 1,056 grid rows, above 1,024 (past the simulation's bounds the fast "
                           "evaluation's cost grows with the grid rows and their length)")):
        ws = make_worksheet(resolve_layer(**kw))
        assert ws.l2_aware is None
        assert json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"] is None
        assert "L2-aware DRAM estimate (iomodel/cache/predict.py): not computed" in ws.to_markdown()
        assert why in ws.to_markdown()


def test_estimate_tiled_refuses_what_not_estimated_names():
    """The cache-side estimate refuses a layer it does not model, with the worksheet's reason."""
    import pytest

    from iomodel.cache.estimate import estimate_tiled, not_estimated
    from iomodel.errors import IomodelError

    lay = resolve_layer(phase="decode", seqlen=4096)
    assert not_estimated(lay.spec) == "the worksheet estimates prefill launches only (a decode's L2-aware DRAM bytes are predicted by `iomodel reconcile` beside a measured record)"
    with pytest.raises(IomodelError, match="prefill launches only"):
        estimate_tiled(lay.spec, lay.tiling, lay.hardware, flops=1, peak_flops=1.0, num_warps=4,
                       tile_order="forward", config_source="test")
    assert not_estimated(resolve_layer(seqlen=8192).spec) is None


def test_l2_line_says_what_stays_dirty_in_l2_and_why_it_is_below_compulsory():
    """Llama-3-8B 8k: O is 32·8192·128·2 B = 64 MiB and LSE 32·8192·4 B = 1 MiB, 68,157,440 B stored.

    What the estimate does not count as written stays dirty in L2 at kernel end; the line with
    "x compulsory" says so, and why the total is below the compulsory bytes.
    """
    ws = make_worksheet(resolve_layer(seqlen=8192))
    e = ws.l2_aware
    assert e.written_bytes == 68_157_440
    assert e.dirty_bytes == e.written_bytes - e.write_bytes > 0
    total = e.read_bytes + e.write_bytes
    assert total < ws.prediction.compulsory_bytes
    line = next(ln for ln in ws.to_markdown().splitlines() if "x compulsory" in ln and ln.startswith("- DRAM read"))
    from iomodel.format import fmt_bytes

    assert (f"; {fmt_bytes(e.dirty_bytes)} of the 68,157,440 B (65 MiB) stored (O, LSE) stays dirty in L2 at "
            "kernel end and reaches DRAM only after the kernel, so neither this total nor ncu's dram__bytes of this "
            "kernel counts it; that is why the total is below the compulsory bytes") in line
    j = json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"]
    assert (j["written_bytes"], j["dirty_at_end_bytes"]) == (68_157_440, e.dirty_bytes)
    assert j["dirty_at_end"].startswith("bytes the kernel stores that are still dirty in L2 at kernel end are not in write_bytes")


def test_l2_line_above_compulsory_gives_no_below_reason():
    """Llama-3-8B at 32k: re-fetched K/V put the total above the compulsory bytes: no 'below' clause."""
    ws = make_worksheet(resolve_layer(seqlen=32768))
    e = ws.l2_aware
    assert e.read_bytes + e.write_bytes > ws.prediction.compulsory_bytes
    line = next(ln for ln in ws.to_markdown().splitlines() if ln.startswith("- DRAM read"))
    assert "stays dirty in L2 at kernel end" in line and "below the compulsory" not in line
