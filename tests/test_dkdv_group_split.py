"""The dK/dV kernel's GQA group split (MQA and large groups with few KV heads).

``_bwd_dkdv`` runs S slices of each GQA group on a third grid axis when its grid
``cdiv(N_k, BLOCK_N)·B·H_kv`` is too small for the GPU (``kernels.heuristics.dkdv_group_splits``);
each slice writes fp32 partial dK, dV and ``_bwd_reduce_dkdv`` sums them in slice order.
Checked here: the rule, the config's validation, the gradients against the fp64 reference
(interpreter), bit-identical reruns, and the model (requested bytes = SRAM_fill rows, the
training-step estimate's kernel list and floor, the record's S, the sweep).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from iomodel import LayerSpec, get_hardware
from iomodel.cache.params import L2Params
from iomodel.cache.predict import TRAINING_KERNELS, predict_training_step, training_floor, training_kernels
from iomodel.errors import IomodelError
from iomodel.measure.records import ShapeMeasurement, expected_kernels
from iomodel.schedule.grid import dkdv_slices, dkdv_waves, reduce_dkdv_waves
from iomodel.spec import Tiling
from iomodel.traffic import predict, sweep
from iomodel.traffic.tiled_bwd import sram_fill_by_kernel
from kernels import heuristics as kh

H200 = get_hardware("H200")


# ---------------------------------------------------------------- the rule and the config
def test_rule_smallest_split_reaching_two_programs_per_sm():
    # Falcon-7B (H 71, H_kv 1, d 64, N 2048 causal; BLOCK_N 128): 16 programs -> 17 slices, 272 >= 264
    assert kh.dkdv_group_splits(16, 132, 71) == 17
    assert kh.dkdv_group_splits(32, 132, 16) == 9  # B 2, H 16, H_kv 1: 32 x 9 = 288 (x 8 = 256 < 264)
    assert kh.dkdv_group_splits(128, 132, 8) == 3  # B 1, H 8, H_kv 1, d 128, N 8192 causal (BLOCK_N 64)
    assert kh.dkdv_group_splits(16, 132, 4) == 4  # capped at G
    assert kh.dkdv_group_splits(264, 132, 8) == 1 and kh.dkdv_group_splits(263, 132, 8) == 2
    assert kh.dkdv_group_splits(16, 132, 1) == 1  # MHA: nothing to split
    with pytest.raises(IomodelError, match="num_sms must be a positive integer"):
        kh.dkdv_group_splits(16, 0, 4)


def test_config_resolves_validates_and_refuses_an_unresolved_model():
    # GPU tiles: block_n 128, S chosen at launch (the loop order fixed here: tests/test_dkdv_order.py chooses it)
    auto = replace(kh.backward_config(64, "bf16", True), dkdv_order="heads-outer")
    assert auto.group_splits == 0 and kh.INTERPRETER_BACKWARD.group_splits == 1
    assert auto.resolve(1, 1, 71, 2048, 132).group_splits == 17
    assert auto.resolve(4, 16, 1, 4096, 132).group_splits == 1  # MHA
    assert replace(auto, group_splits=5).resolve(1, 1, 71, 2048, 132).group_splits == 5  # forced
    with pytest.raises(IomodelError, match="group_splits=9 exceeds the GQA group H/H_kv=8"):
        replace(auto, group_splits=9).resolve(1, 1, 8, 2048, 132)
    with pytest.raises(IomodelError, match="group_splits must be a whole number"):
        replace(auto, group_splits=-1).resolve(1, 1, 8, 2048, 132)
    with pytest.raises(IomodelError, match="chosen at launch"):
        auto.tiling()
    assert replace(auto, group_splits=4).tiling().bwd_group_splits == 4


def test_slices_are_balanced_and_never_empty():
    assert dkdv_slices(71, 17)[:3] == [(0, 4), (4, 8), (8, 12)] and dkdv_slices(71, 17)[-1] == (66, 71)
    for G in range(1, 20):
        for S in range(1, G + 1):
            sl = dkdv_slices(G, S)
            assert sl[0][0] == 0 and sl[-1][1] == G and all(a < b for a, b in sl)
            assert all(sl[i][1] == sl[i + 1][0] for i in range(S - 1))
            assert max(b - a for a, b in sl) == -(-G // S)


# ---------------------------------------------------------------- the model
FALCON = LayerSpec(1, 71, 1, 64, 2048, 2048, dtype="bf16", causal=True, backward=True)


def test_model_rows_by_hand():
    """Falcon-7B's layer with S = 17: K and V (2048 x 64 bf16 = 262,144 B each) read 17 times by
    ``_bwd_dkdv``, which writes 17 fp32 partials of each (17 x 2048 x 64 x 4 = 8,912,896 B); the
    reduction reads those once and writes dK, dV once (262,144 B each). The query side is the
    unsplit kernel's."""
    t = Tiling(bwd_block_m=32, bwd_block_n=128, bwd_group_splits=17)
    m = sram_fill_by_kernel(predict(FALCON, t, H200))
    one = sram_fill_by_kernel(predict(FALCON, replace(t, bwd_group_splits=1), H200))
    kv, part = 2048 * 64 * 2, 17 * 2048 * 64 * 4
    assert m["_bwd_dkdv"]["K"] == m["_bwd_dkdv"]["V"] == [17 * kv, 0]
    assert m["_bwd_dkdv"]["dK_part"] == m["_bwd_dkdv"]["dV_part"] == [0, part] and "dK" not in m["_bwd_dkdv"]
    assert m["_bwd_reduce_dkdv"] == {"dK_part": [part, 0], "dV_part": [part, 0], "dK": [0, kv], "dV": [0, kv]}
    for tensor in ("Q", "dO", "LSE", "Delta"):
        assert m["_bwd_dkdv"][tensor] == one["_bwd_dkdv"][tensor]
    assert one["_bwd_dkdv"]["dK"] == [0, kv] and "_bwd_reduce_dkdv" not in one
    pred = predict(FALCON, t, H200)
    assert pred.to_dict()["tiling"]["bwd_group_splits"] == 17
    assert "bwd_group_splits" not in predict(FALCON, replace(t, bwd_group_splits=1), H200).to_dict()["tiling"]
    with pytest.raises(IomodelError, match="bwd_group_splits=72 exceeds the GQA group H/H_kv=71"):
        predict(FALCON, replace(t, bwd_group_splits=72), H200)
    with pytest.raises(IomodelError, match="expand_sum"):
        predict(FALCON, t, H200, gqa_bwd="expand_sum")


def test_sweep_over_splits_equals_predict():
    t = Tiling(bwd_block_m=32, bwd_block_n=128)
    spec = FALCON.with_(seqlen_q=1024, seqlen_k=1024)
    got = sweep(spec, t, H200, {"bwd_group_splits": [1, 2, 17, 71]})
    for i, S in enumerate((1, 2, 17, 71)):
        p = predict(spec, replace(t, bwd_group_splits=S), H200).algorithms["tiled"]
        assert got["tiled"]["sram_fill_read_bytes"][i] == p.sram_fill_read_bytes
        assert got["tiled"]["sram_fill_write_bytes"][i] == p.sram_fill_write_bytes
    with pytest.raises(IomodelError, match="bwd_group_splits exceeds the GQA group"):
        sweep(spec, t, H200, {"bwd_group_splits": [72]})


@pytest.mark.parametrize("spec,S", [
    (FALCON, 17),
    (LayerSpec(2, 16, 1, 64, 1000, 900, dtype="fp16", causal=True, causal_align="bottom-right", backward=True), 9),
    (LayerSpec(1, 8, 2, 128, 777, 1500, dtype="bf16", causal=False, backward=True), 3),
    (LayerSpec(1, 6, 1, 64, 1024, 1024, dtype="bf16", causal=True, window_left=256, backward=True), 4),
])
def test_waves_request_the_model_bytes(spec, S):
    t = Tiling(bwd_block_m=32, bwd_block_n=128, bwd_group_splits=S)
    model = sram_fill_by_kernel(predict(spec, t, H200))
    for kernel, build in (("_bwd_dkdv", dkdv_waves), ("_bwd_reduce_dkdv", reduce_dkdv_waves)):
        waves, req_r, req_w = build(spec, t, 264)
        assert req_r == {k: v[0] for k, v in model[kernel].items() if v[0]}, kernel
        assert req_w == {k: v[1] for k, v in model[kernel].items() if v[1]}, kernel
        stored: dict[str, int] = {}
        for wave in waves:
            for a in wave:
                if a.write:
                    stored[a.tensor] = stored.get(a.tensor, 0) + a.nbytes
        assert stored == req_w, kernel  # every output row stored once


def test_training_step_estimate_runs_the_reduction():
    t = Tiling(bwd_block_m=32, bwd_block_n=128, bwd_group_splits=17)
    p = predict_training_step(FALCON, t, L2Params(60 << 20, 132, 2))
    assert [k.name for k in p.kernels] == list(training_kernels(t)) == [
        "_attn_fwd", "_bwd_preprocess", "_bwd_dkdv", "_bwd_reduce_dkdv", "_bwd_dq"]
    assert training_kernels(replace(t, bwd_group_splits=1)) == TRAINING_KERNELS
    kv, part = 2048 * 64 * 2, 17 * 2048 * 64 * 4
    floor = training_floor(FALCON, t)
    assert floor["_bwd_reduce_dkdv"] == (2 * part, 2 * kv)
    assert floor["_bwd_dkdv"][1] == 2 * part
    assert floor["_bwd_dkdv"][0] == training_floor(FALCON, replace(t, bwd_group_splits=1))["_bwd_dkdv"][0]
    red = p.kernels[3]
    # 16.3 MiB of partials fit the 60 MiB L2 and start cold: each byte read from DRAM once
    assert sum(red.hbm_read.values()) == 2 * part
    assert "in 17 group slices of at most 5 heads" in next(c.detail for c in p.causes if c.key == "l2_capacity")


def test_record_says_s_and_a_record_without_it_means_one():
    spec = FALCON
    bwd = dict(kh.BackwardConfig(block_m=32, block_n=128).to_dict())
    base = {"id": "x", "impl": "tiled", "spec": {k: v for k, v in spec.to_dict().items() if k != "pass"},
            "config": {"block_m": 128, "block_n": 64, "num_stages": 3, "backward": bwd}}
    old = {**bwd}
    old.pop("group_splits")
    rec = ShapeMeasurement.from_dict({**base, "config": {**base["config"], "backward": old}})
    assert rec.tiling().bwd_group_splits == 1 and expected_kernels("tiled", spec, rec.config) == 4
    rec = ShapeMeasurement.from_dict({**base, "config": {**base["config"], "backward": {**bwd, "group_splits": 17}}})
    assert rec.tiling().bwd_group_splits == 17 and expected_kernels("tiled", spec, rec.config) == 5


# ---------------------------------------------------------------- the kernel (interpreter)
torch = pytest.importorskip("torch")
fa = pytest.importorskip("kernels.flash_attention")


@pytest.mark.interpreter
@pytest.mark.skipif(not fa.INTERPRET, reason="interpreter tests (TRITON_INTERPRET=1)")
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
@pytest.mark.parametrize("B,H,H_kv,N_q,N_k,d,dtype,causal,align,S", [
    (1, 4, 1, 37, 53, 16, "fp32", True, "top-left", 3),  # MQA, ragged tails, slices of 1 and 2 heads
    (2, 6, 2, 70, 20, 32, "bf16", True, "bottom-right", 2),  # GQA, rows that see no key
    (1, 5, 1, 40, 70, 24, "fp16", False, "top-left", 5),  # S = G, HEAD_DIM 24, two reduction tiles
    (1, 8, 1, 20, 75, 48, "fp16", True, "top-left", 3),  # keys no row sees, 3 reduction tiles
    (1, 8, 2, 33, 47, 64, "bf16", True, "bottom-right", 0),  # chosen: 4 interpreter SMs -> S = 4
])
def test_split_gradients_match_the_reference_and_rerun_bit_identical(B, H, H_kv, N_q, N_k, d, dtype, causal, align, S):
    from test_kernel_backward import DTYPES, _make, check_gradients

    from kernels.backward import flash_attention_backward

    q, k, v, do = _make(B, H, H_kv, N_q, N_k, d, DTYPES[dtype], seed=900 + N_q)
    o, lse = fa.flash_attention(q, k, v, causal, align, path="prefill")
    cfg = replace(kh.INTERPRETER_BACKWARD, group_splits=S)
    *grads, ran = flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg, return_config=True)
    assert ran.group_splits == (S or min(H // H_kv, -(-2 * kh.INTERPRETER_NUM_SMS // (-(-N_k // 32) * B * H_kv))))
    assert ran.group_splits > 1
    check_gradients(q, k, v, do, causal, align, grads)
    again = flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)
    assert all(torch.equal(a, b) for a, b in zip(grads, again))  # no atomics: the same bits every run
