"""The L2-aware DRAM estimate of the bundled training step (issue 11, item 4): every kernel
from a cold L2, bytes hand-computed on shapes that fit L2 and on one whose dK/dV query stream
overflows it."""

from __future__ import annotations

import json

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.predict import TRAINING_KERNELS, predict_training_step, training_kernels
from iomodel.errors import IomodelError
from iomodel.report.worksheet import make_worksheet
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.resolve import resolve_layer


def _spec(**kw) -> LayerSpec:
    base = dict(batch=1, heads=2, kv_heads=2, head_dim=64, seqlen_q=256, seqlen_k=256, dtype="fp16",
                causal=False, backward=True)
    return LayerSpec(**{**base, **kw})


def _per_kernel(p):
    return {k.name: (sum(k.hbm_read.values()), sum(k.hbm_write.values())) for k in p.kernels}


def test_fits_l2_every_kernel_reads_its_inputs_once():
    """B=1, H=2, N=256, d=64 fp16: a (B, H, N, d) tensor is 2·256·64·2 = 65,536 B, LSE or Delta
    2·256·4 = 2,048 B. Each kernel starts cold, so each reads its inputs once; nothing is
    evicted, so every store is still dirty at kernel end (0 bytes written during the kernels)."""
    t = 65_536
    p = predict_training_step(_spec(), Tiling(), L2Params(60 << 20, 132, 1, ways=None))
    assert [k.name for k in p.kernels] == list(TRAINING_KERNELS)
    assert _per_kernel(p) == {
        "_attn_fwd": (3 * t, 0),  # Q, K, V
        "_bwd_preprocess": (2 * t, 0),  # O, dO
        "_bwd_dkdv": (4 * t + 2 * 2_048, 0),  # K, V, Q, dO, LSE, Delta
        "_bwd_dq": (4 * t + 2 * 2_048, 0),
    }
    assert p.hbm_read_bytes == p.floor_read_bytes == 13 * t + 4 * 2_048
    # stored: O + LSE, Delta, dK + dV, dQ
    assert p.floor_write_bytes == (t + 2_048) + 2_048 + 2 * t + t
    assert [c.key for c in p.causes] == ["dirty_at_end"] and p.causes[0].write_bytes == -p.floor_write_bytes


def test_requests_equal_the_model_sram_fill_per_kernel():
    """The waves request exactly the traffic model's SRAM_fill bytes, kernel by kernel
    (causal bottom-right, GQA, ragged lengths)."""
    from iomodel.traffic import predict
    from iomodel.traffic.tiled_bwd import sram_fill_by_kernel

    spec = _spec(heads=4, kv_heads=2, seqlen_q=300, seqlen_k=700, causal=True, causal_align="bottom-right")
    tiling = Tiling(block_m=64, block_n=32, bwd_block_m=16, bwd_block_n=64, dq_block_m=32, dq_block_n=16,
                    preprocess_block_m=32)
    p = predict_training_step(spec, tiling, L2Params(60 << 20, 4, 1))
    from iomodel.spec.hardware import get_hardware

    model = sram_fill_by_kernel(predict(spec, tiling, get_hardware("H200")))
    for k in p.kernels:
        got = {t: [k.requested_read.get(t, 0), k.requested_write.get(t, 0)] for t in {*k.requested_read, *k.requested_write}}
        assert got == {t: v for t, v in model[k.name].items() if v != [0, 0]}, k.name


def test_dkdv_query_stream_overflowing_l2_is_fetched_once_per_wave():
    """One KV head, N_q = 4096 query rows, N_k = 256 keys (2 key tiles of 128), one program
    at a time (1 SM): each dK/dV program streams Q, dO (64·2 B) and LSE, Delta (4 B) of every
    row, 4,096 · 264 = 1,081,344 B. An effective L2 of 512 KiB cannot hold it, so the second
    program fetches it again (cyclic LRU: every chunk is gone before its reuse); an 8 MiB one can."""
    spec = _spec(heads=1, kv_heads=1, seqlen_q=4096, seqlen_k=256)
    stream, kv = 4096 * 264, 2 * 256 * 64 * 2
    small = predict_training_step(spec, Tiling(), L2Params(1 << 20, 1, 1, ways=None))
    big = predict_training_step(spec, Tiling(), L2Params(16 << 20, 1, 1, ways=None))
    assert _per_kernel(big)["_bwd_dkdv"][0] == kv + stream
    assert _per_kernel(small)["_bwd_dkdv"][0] == kv + 2 * stream
    cause = next(c for c in small.causes if c.key == "l2_capacity")
    assert cause.read_bytes >= stream and "_bwd_dkdv 1.0 MiB" in cause.detail


def test_training_step_refuses_what_it_does_not_model():
    with pytest.raises(IomodelError, match="cache-control all"):
        predict_training_step(_spec(), Tiling(), L2Params(60 << 20, 132, 1, flush_between_kernels=False))
    with pytest.raises(IomodelError, match="unknown kernel"):
        predict_training_step(_spec(), Tiling(), L2Params(60 << 20, 132, 1), {"_bwd_foo": 2})
    with pytest.raises(IomodelError, match="positive integers"):
        predict_training_step(_spec(), Tiling(), L2Params(60 << 20, 132, 1), {"_bwd_dq": 0})


def test_worksheet_fwd_bwd_gives_the_step_and_each_kernel():
    ws = make_worksheet(resolve_layer(seqlen=1024, passes="fwd+bwd"))
    j = json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"]
    names = [k["name"] for k in j["kernels"]]
    # Llama-3-8B at 1k tokens: 8 key tiles (the Gluon dK/dV launch's 128 keys) x 8 KV heads = 64 dK/dV programs
    # < 2 x 132 SMs, so the GQA group (G = 4) runs in S = min(4, cdiv(264, 64)) = 4 slices
    # (heuristics.dkdv_group_splits) and the reduction kernel follows dK/dV
    assert ws.layer.tiling.bwd_group_splits == 4
    assert names == list(training_kernels(ws.layer.tiling)) == list(TRAINING_KERNELS[:3]) + ["_bwd_reduce_dkdv",
                                                                                           "_bwd_dq"]
    assert j["read_bytes"] == sum(k["read_bytes"] for k in j["kernels"]) > 0
    assert j["write_bytes"] == sum(k["write_bytes"] for k in j["kernels"])
    assert j["source"] == "estimate from iomodel/cache/predict.py predict_training_step (not a measurement)"
    # the preprocess kernel streams O and dO once: (B, H, N, d) = 1·32·1024·128 bf16 each, every byte cold
    assert j["kernels"][1]["read_bytes"] == 2 * 32 * 1024 * 128 * 2
    md = ws.to_markdown()
    assert "of the training step: forward and the four backward kernels" in md
    assert "- `_bwd_dkdv`: DRAM read" in md and "stored (by the five kernels) stays dirty in L2" in md
    assert "dK/dV over 4 GQA group slices for 132 SMs" in md
    mha = make_worksheet(resolve_layer(seqlen=1024, heads=32, kv_heads=32, passes="fwd+bwd"))  # G = 1: S = 1
    assert mha.layer.tiling.bwd_group_splits == 1
    md = mha.to_markdown()
    assert "forward and the three backward kernels" in md and "stored (by the four kernels)" in md
    assert [k["name"] for k in json.loads(mha.to_json())["algorithms"]["tiled"]["l2_aware"]["kernels"]] == list(
        TRAINING_KERNELS)


def test_long_causal_gqa_step_says_its_dkdv_reads_are_not_a_prediction():
    """From DKDV_CAUSAL_UNPREDICTED_ROWS query rows the causal GQA dK/dV kernel (heads-outer) read 0.03-0.58x the wave
    model on every H200 step measured; from 6,000 rows, steps of 7 or more query heads per KV head read 0.21-1.23x.
    The estimate says so in its assumptions, and only there: not for MHA, smaller groups below 32k rows, a window
    (whose steps held), or bottom-right steps whose query rows are short."""
    from iomodel.cache.params import (DKDV_CAUSAL_MEASURED_RATIO, DKDV_CAUSAL_UNPREDICTED_ROWS, DKDV_LARGE_GROUP,
                                      DKDV_LARGE_GROUP_RATIO, DKDV_LARGE_GROUP_ROWS)

    def caveat(**kw):
        j = json.loads(make_worksheet(resolve_layer(passes="fwd+bwd", **kw)).to_json())
        return [a for a in j["algorithms"]["tiled"]["l2_aware"]["assumptions"] if a.startswith(("NOT A", "ROUGH"))
                and "DRAM reads" in a and "_bwd_dkdv" in a]

    assert (DKDV_CAUSAL_UNPREDICTED_ROWS, DKDV_CAUSAL_MEASURED_RATIO) == (32768, (0.03, 0.58))
    assert (DKDV_LARGE_GROUP, DKDV_LARGE_GROUP_ROWS, DKDV_LARGE_GROUP_RATIO) == (7, 6000, (0.21, 1.23))
    long_gqa = caveat(seqlen=32768)  # Llama-3-8B: G = 4, heads-outer at 32k (the slice's rows exceed the L2)
    assert len(long_gqa) == 1 and long_gqa[0].startswith("NOT A PREDICTION") and "0.03-0.58x" in long_gqa[0]
    assert caveat(seqlen=16384) == []
    assert caveat(seqlen=32768, kv_heads=32) == []  # MHA
    assert caveat(seqlen=65536, window="4096,0") == []  # a window: heads-outer, but those steps held
    assert caveat(seqlen_q=16384, seqlen_k=65536, causal_align="bottom-right") == []  # 16k query rows
    large = caveat(seqlen=8192, heads=64, kv_heads=8)  # G = 8 at 8k rows
    assert len(large) == 1 and large[0].startswith("ROUGH") and "0.21-1.23x" in large[0]
    assert caveat(seqlen=4096, heads=64, kv_heads=8) == []


@pytest.mark.parametrize("kw, step, fwd, dkdv", [
    (dict(seqlen=32768), "not a prediction", "rough", "not a prediction"),  # Llama-3-8B, G = 4, heads-outer
    (dict(seqlen=16384), "predicted", "predicted", "predicted"),
    (dict(seqlen=32768, kv_heads=32), "rough", "rough", "predicted"),  # MHA; its forward at the capacity edge
    (dict(seqlen=8192, heads=64, kv_heads=8), "rough", "predicted", "rough"),  # G = 8 at 8k rows
])
def test_the_json_says_how_far_each_kernels_reads_can_be_taken(kw, step, fwd, dkdv):
    """``read_bytes_quality``, per kernel and for the step (the least of its kernels), carries the caveats in a form a
    tool can read without parsing the assumptions: the dK/dV kernel's classes above, and the forward's at the capacity
    edge (a resident wave's K/V working set 0.85-2.5 times the read capacity: 1.03x at Llama-3-8B's 32k, 1.54x for 32
    MHA heads; 16k is below it); the Markdown says it beside each kernel's bytes."""
    ws = make_worksheet(resolve_layer(passes="fwd+bwd", **kw))
    l2 = json.loads(ws.to_json())["algorithms"]["tiled"]["l2_aware"]
    assert l2["read_bytes_quality"] == step
    assert {k["name"]: k["read_bytes_quality"] for k in l2["kernels"]} == {
        "_attn_fwd": fwd, "_bwd_preprocess": "predicted", "_bwd_dkdv": dkdv, "_bwd_dq": "predicted"}
    lines = {ln.split("`")[1]: ln for ln in ws.to_markdown().splitlines() if ln.startswith("- `_")}
    for name, q in (("_attn_fwd", fwd), ("_bwd_dkdv", dkdv)):
        assert (f"(**{q.upper()}**: the assumptions below)" in lines[name]) == (q != "predicted"), name
    edge = [a for a in l2["assumptions"] if a.startswith("ROUGH: the forward's DRAM reads")]
    assert len(edge) == (fwd == "rough")


def test_group_split_partials_beyond_the_effective_l2_say_their_writes_are_rough():
    """Where the S > 1 slices' fp32 partials (2·S·B·H_kv·N_k·d·4 bytes) exceed the effective L2 (0.5 x 60 MiB on the
    H200), the dK/dV kernel's measured DRAM writes were -2.4 to +6.9 MiB beside the model on 61 steps: said once, with
    the partials' size. Gluon tiles at HEAD_DIM 128 (128 keys a program): N 959 -> 8 key tiles; 40 heads on 10 KV
    heads -> 80 programs, S = min(4, ceil(264 / 80)) = 4; partials 2·4·10·959·128·4 = 39,280,640 B = 37.5 MiB."""
    from iomodel.cache.params import DKDV_PARTIAL_WRITE_EXCESS_MIB

    def caveat(**kw):
        """(S, the assumptions on DRAM writes, the L2-aware JSON, the worksheet) of one training step."""
        w = make_worksheet(resolve_layer(passes="fwd+bwd", **kw))
        l2 = json.loads(w.to_json())["algorithms"]["tiled"]["l2_aware"]
        return w.layer.tiling.bwd_group_splits, [a for a in l2["assumptions"] if "DRAM writes" in a], l2, w

    assert DKDV_PARTIAL_WRITE_EXCESS_MIB == (-2.4, 6.9)
    S, said, l2, w = caveat(seqlen=959, heads=40, kv_heads=10, head_dim=128, dtype="fp16")
    assert S == 4 and len(said) == 1 and said[0].startswith("ROUGH: _bwd_dkdv's DRAM writes")
    assert "4 group slices' fp32 partials (37.5 MiB) exceed the effective L2 (30.0 MiB)" in said[0]
    assert "-2.4 to +6.9 MiB" in said[0] and "36 of 61 more than 1 MiB above it and 5 more than 1 MiB below" in said[0]
    # this layer runs the Gluon dK/dV launch on the H200, whose partials weigh GLUON_DKDV_PARTIAL_WRITE_SHARE: said too
    assert any(a.startswith("A byte of fp32 partials the Gluon _bwd_dkdv launch stores weighs 0.75 read-equivalent")
               for a in l2["assumptions"])
    # and a tool reads it without parsing text: write_bytes_quality of the dK/dV kernel and the step; Markdown marks both
    assert l2["write_bytes_quality"] == "rough"
    assert {k["name"]: k["write_bytes_quality"] for k in l2["kernels"]} == {
        "_attn_fwd": "predicted", "_bwd_preprocess": "predicted", "_bwd_dkdv": "rough", "_bwd_reduce_dkdv": "predicted",
        "_bwd_dq": "predicted"}
    md = w.to_markdown()
    assert "(**ROUGH**: the assumptions below) of 39,280,640 B (37.5 MiB) stored" in md
    assert md.count("(**ROUGH**: see its kernels)") == 1
    # 24 KV heads: 8 x 24 = 192 programs, S = 2, partials 2·2·24·959·128·4 = 45.0 MiB: said
    assert caveat(seqlen=959, heads=48, kv_heads=24, head_dim=128)[1] != []
    # fits: 8 KV heads, 64 programs, S = 5 capped at G = 4: 2·4·8·959·128·4 = 31,424,512 B < 30 MiB, not said
    S, said, fits, _ = caveat(seqlen=959, heads=32, kv_heads=8, head_dim=128)
    assert S == 4 and said == []
    assert fits["write_bytes_quality"] == "predicted"
    assert caveat(seqlen=8192, heads=32, kv_heads=8)[1] == []  # S = 1: no partials


def test_gluon_dkdv_partials_weigh_their_fitted_share():
    """The Gluon dK/dV launch's fp32 partials (S > 1) weigh GLUON_DKDV_PARTIAL_WRITE_SHARE (0.75) read-equivalent bytes
    of L2, the Triton launch's 0.5 (l2_fraction): the same requested bytes, the Gluon kernel's estimate exactly the
    Triton one evaluated with that stored share; unsplit (S = 1) the two launches predict the same. Layer: 40 heads on
    10, HEAD_DIM 128, fp16, N 959 causal, the Gluon tiles (64 x 128), S = 4: 37.5 MiB of partials on the H200."""
    from dataclasses import replace

    from iomodel.cache.params import GLUON_DKDV_PARTIAL_WRITE_SHARE

    assert GLUON_DKDV_PARTIAL_WRITE_SHARE == 0.75
    spec = LayerSpec(1, 40, 10, 128, 959, 959, dtype="fp16", causal=True, backward=True)
    triton = Tiling(bwd_block_m=64, bwd_block_n=128, bwd_group_splits=4)
    gluon = replace(triton, bwd_dkdv_kernel="gluon")
    params = L2Params(60 << 20, 132, 1)

    def dkdv(p):
        return next(k for k in p.kernels if k.name == "_bwd_dkdv")

    t, g = predict_training_step(spec, triton, params), predict_training_step(spec, gluon, params)
    assert dkdv(t).requested_write == dkdv(g).requested_write and sum(dkdv(g).requested_write.values()) == 39_280_640
    # the Gluon estimate is Triton's with the partials' stores weighing 0.75: it keeps less of them dirty at the end
    manual = predict_training_step(spec, triton, replace(params, stored_share=GLUON_DKDV_PARTIAL_WRITE_SHARE))
    assert dkdv(g).hbm_write == dkdv(manual).hbm_write
    assert sum(dkdv(g).hbm_write.values()) > sum(dkdv(t).hbm_write.values())
    # every other kernel is unchanged
    for a, b in zip(t.kernels, g.kernels):
        if a.name != "_bwd_dkdv":
            assert (a.hbm_read, a.hbm_write) == (b.hbm_read, b.hbm_write), a.name
    one = replace(triton, bwd_group_splits=1)
    assert (predict_training_step(spec, one, params).hbm_write_bytes
            == predict_training_step(spec, replace(one, bwd_dkdv_kernel="gluon"), params).hbm_write_bytes)
    with pytest.raises(IomodelError, match="bwd_dkdv_kernel must be one of triton, gluon, got 'cuda': pick one of them"):
        Tiling(bwd_dkdv_kernel="cuda")


def test_record_tiling_names_the_dkdv_launch_that_ran():
    """A training record's config.backward.dkdv_kernel becomes Tiling.bwd_dkdv_kernel (absent: triton, the only launch
    before 2026-12-05); the kernels' BackwardConfig.tiling carries it the same way."""
    from iomodel.measure.records import ShapeMeasurement
    from kernels.heuristics import BackwardConfig

    base = {"block_m": 128, "block_n": 64, "backward": {"block_m": 64, "block_n": 128, "group_splits": 4,
                                                                 "num_warps": 4, "num_stages": 1, "dq_num_warps": 4, "dq_num_stages": 1}}
    rec = {"id": "x", "impl": "tiled", "spec": {"batch": 1, "heads": 40, "kv_heads": 10, "head_dim": 128,
                                                 "seqlen_q": 959, "seqlen_k": 959, "dtype": "fp16", "causal": True,
                                                 "causal_align": "top-left", "phase": "prefill", "backward": True},
           "kernels": []}
    assert ShapeMeasurement.from_dict({**rec, "config": base}).tiling().bwd_dkdv_kernel == "triton"
    gl = {**base, "backward": {**base["backward"], "dkdv_kernel": "gluon"}}
    assert ShapeMeasurement.from_dict({**rec, "config": gl}).tiling().bwd_dkdv_kernel == "gluon"
    assert BackwardConfig(dkdv_kernel="gluon").tiling().bwd_dkdv_kernel == "gluon"
    assert BackwardConfig().tiling().bwd_dkdv_kernel == "triton"
