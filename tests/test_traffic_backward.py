"""The backward kernels' model (``iomodel/traffic/tiled_bwd.py``): hand-computed bytes per kernel
and tensor, the dK/dV tile sum against a walk of the kernel's loop, and the tiles' one home."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy as sp

from iomodel import LayerSpec, Tiling, get_hardware
from iomodel.errors import IomodelError
from iomodel.traffic import predict, sweep
from iomodel.traffic.compile import numpy_function, python_function
from iomodel.traffic.sums import KTileQueryRows
from iomodel.traffic.tiled_bwd import sram_fill_by_kernel

H200 = get_hardware("H200")


def bwd(spec, tiling, **opts):
    return sram_fill_by_kernel(predict(spec, tiling, H200, **opts))


def test_gqa_non_causal_by_hand():
    # B=1, H=2, H_kv=1 (G=2), d=16, N_q=40, N_k=48, fp16 (s=2); dK/dV 16 x 32, dQ 32 x 16
    spec = LayerSpec(1, 2, 1, 16, 40, 48, dtype="fp16", backward=True)
    k = bwd(spec, Tiling(32, 16, bwd_block_m=16, bwd_block_n=32, dq_block_m=32, dq_block_n=16))
    q_bytes = 1 * 2 * 40 * 16 * 2  # one (B, H, N_q, d) fp16 tensor = 2,560 B
    kv_bytes = 1 * 1 * 48 * 16 * 2  # one (B, H_kv, N_k, d) fp16 tensor = 1,536 B
    # preprocess: O and dO read once, Delta (B, H, N_q) fp32 written once = 2*40*4 = 320 B
    assert k["_bwd_preprocess"] == {"O": [2560, 0], "dO": [2560, 0], "Delta": [0, 320]} == \
        {"O": [q_bytes, 0], "dO": [q_bytes, 0], "Delta": [0, 320]}
    # dK/dV: one program per (KV head, key tile of 32): ceil(48/32) = 2 tiles, K/V read once, dK/dV
    # written once (summed over the G = 2 heads); each tile streams all 40 rows of both query heads:
    # 2 tiles * 40 rows = 80 rows per head -> Q, dO 2 heads * 80 * 16 * 2 = 5,120 B; LSE, Delta 2 * 80 * 4 = 640 B
    assert k["_bwd_dkdv"] == {"K": [1536, 0], "V": [1536, 0], "Q": [5120, 0], "dO": [5120, 0], "LSE": [640, 0],
                              "Delta": [640, 0], "dK": [0, 1536], "dV": [0, 1536]}
    assert k["_bwd_dkdv"]["K"] == [kv_bytes, 0]
    # dQ: ceil(40/32) = 2 query tiles per head, each reads all 48 keys: 2 heads * 2 * 48 * 16 * 2 = 6,144 B
    assert k["_bwd_dq"] == {"Q": [2560, 0], "dO": [2560, 0], "LSE": [320, 0], "Delta": [320, 0], "K": [6144, 0],
                            "V": [6144, 0], "dQ": [0, 2560]}


def test_causal_top_left_narrow_key_tiles_by_hand():
    # B=H=H_kv=1, d=16, N_q=40, N_k=64, fp32 (s=4), causal top-left (off = 0); dK/dV BLOCK_M=32 query
    # rows per step, BLOCK_N=16 keys per program; dQ 32 x 16
    spec = LayerSpec(1, 1, 1, 16, 40, 64, dtype="fp32", causal=True, backward=True)
    k = bwd(spec, Tiling(32, 16, bwd_block_m=32, bwd_block_n=16, dq_block_m=32, dq_block_n=16))
    # dK/dV key tiles j = 0..3, lo_j = min(32 * floor(16j / 32), 40):
    #   j=0: lo 0 -> 40 rows; j=1: lo 0 -> 40; j=2: lo 32 -> 8; j=3: lo 32 -> 8 (keys 48..63: no row
    #   sees them, rows 32..39 are still loaded) = 96 rows -> Q, dO 96*16*4 = 6,144 B, LSE, Delta 96*4 = 384 B
    #   (FlashAttention-1's KBlockQueryRows, which skips tiles no row sees, would give 88)
    kv = 64 * 16 * 4  # 4,096 B
    assert k["_bwd_dkdv"] == {"K": [kv, 0], "V": [kv, 0], "Q": [6144, 0], "dO": [6144, 0], "LSE": [384, 0],
                              "Delta": [384, 0], "dK": [0, kv], "dV": [0, kv]}
    # dQ: tile 0 (rows 0..31) hi = 32 -> 2 blocks of 16 = 32 keys; tile 1 (rows 32..39) hi = 40 ->
    #   ceil(40/16) = 3 blocks = 48 keys; 80 keys * 16 * 4 = 5,120 B each of K, V
    assert k["_bwd_dq"] == {"Q": [2560, 0], "dO": [2560, 0], "LSE": [160, 0], "Delta": [160, 0], "K": [5120, 0],
                            "V": [5120, 0], "dQ": [0, 2560]}
    assert k["_bwd_preprocess"] == {"O": [2560, 0], "dO": [2560, 0], "Delta": [0, 160]}


def test_bottom_right_rows_without_keys_by_hand():
    # B=H=H_kv=1, d=16, N_q=48, N_k=16, fp32, causal bottom-right: off = 16 - 48 = -32, rows 0..31 see no key
    spec = LayerSpec(1, 1, 1, 16, 48, 16, dtype="fp32", causal=True, causal_align="bottom-right", backward=True)
    k = bwd(spec, Tiling(32, 16, bwd_block_m=16, bwd_block_n=32, dq_block_m=32, dq_block_n=16))
    # dK/dV: one key tile (ceil(16/32) = 1), lo = 16 * floor(32/16) = 32 -> rows 32..47 = 16 rows:
    #   Q, dO 16*16*4 = 1,024 B; LSE, Delta 64 B; K, V read and dK, dV written 16*16*4 = 1,024 B
    assert k["_bwd_dkdv"] == {"K": [1024, 0], "V": [1024, 0], "Q": [1024, 0], "dO": [1024, 0], "LSE": [64, 0],
                              "Delta": [64, 0], "dK": [0, 1024], "dV": [0, 1024]}
    # dQ: tile 0 (rows 0..31) hi = clamp(32 - 32, 0, 16) = 0 -> no key; tile 1 hi = 16 -> 16 keys = 1,024 B;
    #   dQ is still written for all 48 rows (zeros where no key): 48*16*4 = 3,072 B
    assert k["_bwd_dq"]["K"] == [1024, 0] and k["_bwd_dq"]["dQ"] == [0, 3072]


def walk_dkdv(nq, nk, bm, bn, o):
    """Query rows the kernel's dK/dV loop loads for one head, walked as ``_bwd_dkdv`` does."""
    rows = 0
    for j in range(-(-nk // bn)):
        lo = min((max(j * bn - o, 0) // bm) * bm, nq)
        for start in range(lo, nq, bm):
            rows += min(start + bm, nq) - start
    return rows


def test_k_tile_query_rows_equals_the_kernel_loop():
    nq_, nk_, bm_, bn_, off_ = sp.symbols("N_q N_k BM BN off", integer=True)
    expr = [KTileQueryRows(nq_, nk_, bm_, bn_, off_)]
    py, npf = python_function([nq_, nk_, bm_, bn_, off_], expr), numpy_function([nq_, nk_, bm_, bn_, off_], expr)
    pts = [(nq, nk, bm, bn, o)
           for nq, nk in itertools.product([1, 5, 16, 17, 33, 40, 64], [1, 3, 16, 31, 48, 70])
           for bm, bn in itertools.product([4, 16, 32], [2, 16, 64])
           for o in {0, nk - nq, -nq, nk, 7, -5}]
    got = npf(*[np.array(c) for c in zip(*pts)])[0]
    for i, p in enumerate(pts):
        assert py(*p)[0] == walk_dkdv(*p) == int(got[i]), p
    assert walk_dkdv(40, 64, 32, 16, 0) == 96  # the hand count above


def test_tiles_have_one_home():
    import kernels.heuristics as kb  # pure Python: the backward tiles live there
    cfg = kb.BackwardConfig()
    t = Tiling()
    assert (cfg.block_m, cfg.block_n, cfg.dq_block_m, cfg.dq_block_n, cfg.preprocess_block_m) == \
        (t.bwd_block_m, t.bwd_block_n, t.dq_block_m, t.dq_block_n, t.preprocess_block_m) == (32, 128, 128, 32, 128)
    it = kb.INTERPRETER_BACKWARD.tiling(Tiling(32, 16))
    assert (it.block_m, it.block_n, it.bwd_block_m, it.bwd_block_n, it.dq_block_m, it.dq_block_n) == \
        (32, 16, 16, 32, 32, 16)
    with pytest.raises(IomodelError, match="power of two"):
        Tiling(dq_block_n=48)


def test_sweep_over_backward_tiles_equals_predict():
    spec = LayerSpec(1, 4, 2, 32, 300, 200, causal=True, causal_align="bottom-right", backward=True)
    bn = np.array([16, 32, 64, 128])
    r = sweep(spec, Tiling(64, 32), H200, {"bwd_block_n": bn, "dq_block_m": bn[::-1]})
    for i, (a, b) in enumerate(zip(bn, bn[::-1])):
        p = predict(spec, Tiling(64, 32, bwd_block_n=int(a), dq_block_m=int(b)), H200)
        assert r["tiled"]["sram_fill_read_bytes"][i] == p.algorithms["tiled"].sram_fill_read_bytes


def test_json_tiling_names_backward_tiles_for_fwd_bwd_only():
    fwd = LayerSpec(1, 2, 2, 16, 64, 64)
    assert "dq_block_m" not in predict(fwd, Tiling(32, 16), H200).to_dict()["tiling"]
    d = predict(fwd.with_(backward=True), Tiling(32, 16, dq_block_m=64), H200).to_dict()["tiling"]
    assert d["dq_block_m"] == 64 and d["bwd_block_n"] == 128
