"""Sliding windows through the measurement pipeline: sweep files, records, the GPU child's
calls (on CPU, interpreter), the L2 simulation's band ranges (exact bytes by hand) and the
interpreter validation of sweeps/interpreter-window.toml (SRAM_fill exact)."""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled, predict_training_step
from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement, ShapeMeasurement, shape_id
from iomodel.measure.sweep import load_sweep, parse_sweep
from iomodel.schedule.grid import (decode_split_rows, dkdv_query_ranges, key_span_rows, prefill_key_ranges,
                                   prefill_key_rows, prefill_waves)
from iomodel.spec import LayerSpec, Tiling

ROOT = Path(__file__).resolve().parent.parent


def _sweep(**shape):
    base = {"heads": 2, "kv_heads": 1, "head_dim": 16, "seqlen": 64, "causal": True}
    return parse_sweep({"shape": [{**base, **shape}]}, "t.toml")


def test_sweep_window_forms_and_ids():
    one = _sweep(window=4096).shapes
    assert [(s.spec.window_left, s.spec.window_right) for s in one] == [(4096, None)]
    assert one[0].id == "b1-h2-kv1-d16-bf16-q64-k64-tl-w4096_inf-tiled"
    pair = _sweep(window=[8, 3], causal=False, impls=["tiled", "baseline"]).shapes
    assert [s.id for s in pair] == ["b1-h2-kv1-d16-bf16-q64-k64-nc-w8_3-tiled", "b1-h2-kv1-d16-bf16-q64-k64-nc-w8_3-baseline"]
    many = _sweep(window=[[16, 0], 32, [-1, 5]], causal=False).shapes
    assert [(s.spec.window_left, s.spec.window_right) for s in many] == [(16, 0), (32, None), (None, 5)]
    assert _sweep().shapes[0].id == "b1-h2-kv1-d16-bf16-q64-k64-tl-tiled"  # no window: the receipts' ids
    assert "-w4096_inf-" in _sweep(window=4096, **{"pass": "fwd+bwd"}).shapes[0].id


@pytest.mark.parametrize("shape, needle", [
    ({"window": -2}, "window must be L or [L, R]"),
    ({"window": [1, 2, 3]}, "window must be L or [L, R]"),
    ({"window": 2.5}, "window must be L or [L, R]"),
    ({"window": True}, "window must be L or [L, R]"),
    ({"window_left": 4}, "unknown key(s) ['window_left']"),
    ({"window": 8, "impls": ["sdpa-flash"]}, "sdpa-flash takes no sliding window"),
])
def test_sweep_refuses_bad_windows(shape, needle):
    with pytest.raises(IomodelError) as exc:
        _sweep(**shape)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_record_round_trip_and_bad_window_field():
    spec = LayerSpec(1, 2, 1, 16, 64, 64, causal=True, window_left=20)
    sm = ShapeMeasurement(shape_id(spec, "tiled"), "tiled", spec, config={"block_m": 32, "block_n": 16})
    back = ShapeMeasurement.from_dict(sm.to_dict())
    assert back.spec == spec and back.spec.band == (20, 0)
    d = sm.to_dict()
    d["spec"]["window_left"] = "20"
    with pytest.raises(IomodelError, match=r"spec.window_left must be a whole number of tokens"):
        ShapeMeasurement.from_dict(d)
    d["spec"]["window_left"] = 20.0  # a whole float is the number 20
    assert ShapeMeasurement.from_dict(d).spec.window_left == 20


def test_band_ranges_by_hand():
    # causal top-left, WL = 50, BM = 32, BN = 16, N = 200: tile i rows [32i, 32i+32)
    spec = LayerSpec(1, 2, 1, 16, 200, 200, dtype="fp16", causal=True, window_left=50)
    t = Tiling(block_m=32, block_n=16)
    # first key 32i - 50 (clamped at 0) floored to 16; last key 32i + 31, rounded up to 16 (200 caps)
    assert prefill_key_ranges(spec, t) == [(0, 32), (0, 64), (0, 96), (32, 128), (64, 160), (96, 192), (128, 200)]
    assert prefill_key_rows(spec, t) == [32, 64, 96, 96, 96, 96, 72]
    assert key_span_rows(prefill_key_ranges(spec, t)) == 200
    assert key_span_rows([(0, 10), (40, 50), (45, 60), (5, 5)]) == 30
    # dK/dV key tile j (BN 32) against query tiles of 16: lo_j = 16·⌊32j/16⌋, hi_j = min(32j + 32 + 50, 200)
    tb = Tiling(bwd_block_m=16, bwd_block_n=32)
    assert dkdv_query_ranges(spec, tb) == [(0, 96), (32, 128), (64, 160), (96, 192), (128, 200), (160, 200),
                                           (192, 200)]
    # no window: lo_j from the causal mask, every range to N_q
    assert dkdv_query_ranges(spec.with_(window_left=None), tb)[:2] == [(0, 200), (32, 200)]
    # decode, bottom-right, N_q 2, N_k 300, WL 60, BN 16, 4 splits of 80 keys (5 blocks):
    # off 298, hi = 300, first = 238 -> lo 224: split 2 loads [224, 240), split 3 [240, 300)
    dec = LayerSpec(1, 8, 2, 16, 2, 300, dtype="fp16", causal=True, causal_align="bottom-right", window_left=60,
                    phase="decode")
    assert decode_split_rows(dec, Tiling(block_m=16, block_n=16, num_splits=4)) == [0, 0, 16, 60]
    # a band that no row reaches: nothing loaded
    none = LayerSpec(1, 1, 1, 16, 32, 64, dtype="fp16", window_left=0, window_right=0, causal_align="bottom-right")
    assert prefill_key_ranges(none.with_(seqlen_q=100), Tiling(block_m=32, block_n=16))[0] == (0, 0)


def test_band_waves_requests_and_hbm_bytes_by_hand():
    spec = LayerSpec(1, 2, 1, 16, 200, 200, dtype="fp16", causal=True, window_left=50)
    t = Tiling(block_m=32, block_n=16)
    waves, req_r, req_w = prefill_waves(spec, t, 4)
    row = 16 * 2  # bytes of one K row (d 16, fp16)
    assert req_r == {"Q": 2 * 200 * row, "K": 2 * 552 * row, "V": 2 * 552 * row}  # 552 = Σ rows above, 2 heads
    assert req_w == {"O": 2 * 200 * row, "LSE": 2 * 200 * 4}
    # wave 1 = tiles 0..3 of head 0: keys [0, 128) as 8 blocks of BN = 16 rows, each at the first
    # step a program reaches it (tiles 0-2 start at key 0, tile 3 at key 32: block 32 at step 0)
    assert [(a.key, a.nbytes) for a in waves[0] if a.tensor == "K"] == [
        (("K", 0, c), 16 * row) for c in (0, 32, 16, 48, 64, 80, 96, 112)]
    # wave 2 = tiles 4..6 of head 0 (keys from 64, 96, 128) and tile 0 of head 1 (keys [0, 32), the
    # same KV head): step 0 blocks 0, 64, 96, 128; step 16 blocks 16, 80, 112, 144
    assert [a.key[2] for a in waves[1] if a.tensor == "K"][:8] == [0, 64, 96, 128, 16, 80, 112, 144]
    # an L2 that holds everything: K and V read once (200 keys of the one KV head), Q once
    big = L2Params(l2_bytes=2**30, num_sms=1, programs_per_sm=4, ways=None)
    l2 = predict_tiled(spec, t, big)
    assert l2.hbm_read_bytes == 2 * 200 * row + 2 * 200 * row
    assert l2.floor_read_bytes == l2.hbm_read_bytes
    step = predict_training_step(spec.with_(backward=True), Tiling(block_m=32, block_n=16, bwd_block_m=16,
                                                                   bwd_block_n=32, dq_block_m=32, dq_block_n=16), big)
    # every kernel cold, each input once: fwd Q K V; preprocess O dO; dK/dV K V + Q dO (dtype)
    # LSE Delta (fp32) of the 200 rows some key tile loads, both heads; dQ the same rows and K V
    q, kv, f32 = 2 * 200 * row, 200 * row, 2 * 200 * 4
    assert step.hbm_read_bytes == (q + 2 * kv) + 2 * q + (2 * kv + 2 * q + 2 * f32) + (2 * q + 2 * f32 + 2 * kv)


def test_sliding_band_rereads_what_the_cache_lost():
    """A band narrower than a chunk slides through it: the rows it moves onto are new bytes.

    One KV head, N 4096, WL 127, BM 128, BN 64, one program per wave, an L2 of 64 KiB (holds
    the band, not the head): tile i loads keys [128i − 128, 128i + 128) (3 blocks for i = 0 ...),
    so every key block is read once from HBM and the one shared with the previous tile hits."""
    spec = LayerSpec(1, 1, 1, 64, 4096, 4096, dtype="fp16", causal=True, window_left=127)
    t = Tiling(block_m=128, block_n=64)
    rows = prefill_key_rows(spec, t)
    assert rows[:3] == [128, 256, 256] and sum(rows) == 128 + 31 * 256
    l2 = predict_tiled(spec, t, L2Params(l2_bytes=2**17, num_sms=1, programs_per_sm=1, l2_fraction=0.5, ways=None))
    kv = 4096 * 64 * 2
    assert l2.hbm_read_bytes == kv + 2 * kv  # Q, then K and V once each


@pytest.mark.interpreter
def test_child_passes_the_window_to_kernel_and_baseline():
    import torch

    from iomodel.measure.child import impl_call
    from kernels.baseline import eager_attention

    spec = LayerSpec(1, 2, 1, 16, 40, 40, dtype="fp32", causal=True, window_left=7)
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 40, 16), torch.randn(1, 1, 40, 16), torch.randn(1, 1, 40, 16)
    want = eager_attention(q, k, v, causal=True, window=(7, None))
    unwindowed = eager_attention(q, k, v, causal=True)
    for impl in ("tiled", "baseline"):
        got = impl_call(impl, spec, q, k, v)[0]()
        assert torch.allclose(got, want, atol=1e-4), impl
        assert not torch.allclose(got, unwindowed, atol=1e-2), impl  # the window changed the result
    with pytest.raises(IomodelError, match="sdpa-math takes no sliding window"):
        impl_call("sdpa-math", spec, q, k, v)


@pytest.mark.interpreter
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
def test_interpreter_window_sweep_reconciles_sram_fill_exactly(tmp_path):
    from iomodel.commands.validate import run_interpreter
    from iomodel.reconcile import reconcile

    sw = load_sweep(ROOT / "sweeps" / "interpreter-window.toml")
    assert len(sw.shapes) == 4 and all(s.spec.window is not None for s in sw.shapes)
    meas = run_interpreter(sw, "test", lambda s: None)
    rec = reconcile(Measurement.load(meas.save(tmp_path / "w.json")))
    assert [s["fraction"] for s in rec.summary()] == [1.0, 1.0]
    assert all(r.explanation().startswith("exact") for r in rec.rows)
    # the band cut the keys: the causal top-left shape (N 70, WL 20) loads fewer K bytes than without it
    k = meas.shapes[0].sram_fill["K"]["read_bytes"]
    assert k == 2 * 16 * 2 * sum(prefill_key_rows(sw.shapes[0].spec, meas.shapes[0].tiling()))
    assert k < 2 * 16 * 2 * sum(prefill_key_rows(sw.shapes[0].spec.with_(window_left=None), meas.shapes[0].tiling()))
