"""The dQ kernel's query-tile order (``BackwardConfig.dq_tile_order``, ``Tiling.dq_tile_order``): the kernel's
tile mapping, the bit-identical gradients of both orders, the worksheet that says it, the L2 model's waves (hand
counts) and the fast model against the simulation in the reverse order (the records that carry it:
tests/test_dkdv_order.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import triton
import triton.language as tl

import kernels.heuristics as kh
from kernels.backward import _dq_tile
from iomodel.errors import IomodelError
from iomodel.schedule.grid import dq_waves
from iomodel.spec import LayerSpec, Tiling

pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")  # the interpreter's


def test_bad_orders_are_refused():
    with pytest.raises(IomodelError, match="dq_tile_order must be forward or reverse, got 'backwards'"):
        Tiling(dq_tile_order="backwards")
    cfg = replace(kh.backward_config(128, "bf16", True), dq_tile_order="descending")
    with pytest.raises(IomodelError, match="BackwardConfig.dq_tile_order must be one of forward, reverse"):
        cfg.resolve(1, 8, 4, 4096, 132, seqlen_q=4096, head_dim=128, width=2, l2_bytes=60 << 20)


def test_config_converts_to_the_tiling():
    cfg = replace(kh.backward_config(64, "bf16", True), dq_tile_order="reverse", group_splits=1,
                  dkdv_order="heads-outer")
    assert cfg.tiling().dq_tile_order == "reverse"
    assert replace(cfg, dq_tile_order="forward").tiling().dq_tile_order == "forward"


def test_waves_by_hand():
    """N = 64, HEAD_DIM 16, fp16, causal top-left, dQ tiles 32 x 16, one program at a time (W = 1): tile 0 reads
    the keys [0, 32) (K: 32 * 16 * 2 = 1,024 B), tile 1 the keys [0, 64) (2,048 B). Forward: tile 0's wave first;
    reverse: tile 1's. The requested bytes do not depend on the order."""
    spec = LayerSpec(1, 1, 1, 16, 64, 64, dtype="fp16", causal=True, backward=True)
    t = Tiling(dq_block_m=32, dq_block_n=16)
    fwd, req_f, _ = dq_waves(spec, t, 1)
    rev, req_r, _ = dq_waves(spec, replace(t, dq_tile_order="reverse"), 1)
    k_bytes = [[a.nbytes for a in wave if a.tensor == "K"] for wave in fwd]
    assert k_bytes == [[1024], [2048]]
    assert [[a.nbytes for a in wave if a.tensor == "K"] for wave in rev] == [[2048], [1024]]
    assert req_f == req_r and req_f["K"] == 3072


def test_fast_model_follows_the_order():
    """The fast Q-stationary evaluation and the simulation give the same DRAM reads in the reverse order (a causal
    GQA step whose K/V outgrow a small L2), and the reverse order differs from the forward one there."""
    from iomodel.cache.params import L2Params
    from iomodel.cache.predict import kernel_l2
    from iomodel.cache.stream import fast_kernel_l2

    spec = LayerSpec(1, 8, 2, 64, 4096, 4096, dtype="bf16", causal=True, backward=True)
    params = L2Params(4 << 20, 8, 1)
    got = {}
    for order in ("forward", "reverse"):
        t = Tiling(dq_block_m=64, dq_block_n=32, dq_tile_order=order)
        sim = kernel_l2("_bwd_dq", spec, t, params, dq_waves)  # small: simulated
        fast = fast_kernel_l2("_bwd_dq", spec, t, params.resident_programs, params.capacity, params.write_share,
                              params.ways, read_capacity=params.read_capacity)
        assert fast is not None
        assert sum(fast.hbm_read.values()) == pytest.approx(sum(sim.hbm_read.values()), rel=1e-9)
        got[order] = sum(sim.hbm_read.values())
    assert got["forward"] != got["reverse"]


def test_worksheet_names_a_reverse_order():
    from iomodel.report.worksheet import kernel_tiling
    from iomodel.spec.hardware import H200

    spec = LayerSpec(batch=1, heads=32, kv_heads=8, head_dim=128, seqlen_q=8192, seqlen_k=8192, dtype="bf16",
                     causal=True, backward=True)
    tiling, source = kernel_tiling(spec, H200)
    expected = kh.backward_config(128, "bf16", True).dq_tile_order
    assert tiling.dq_tile_order == expected
    assert ("dQ query tiles longest first (dq_tile_order reverse)" in source) == (expected == "reverse")


@triton.jit
def _tile_probe(OUT, REVERSE: tl.constexpr):
    """Writes the query tile the dQ kernels give program pid."""
    pid = tl.program_id(0)
    tl.store(OUT + pid, _dq_tile(pid, tl.num_programs(0), REVERSE))


@pytest.mark.interpreter
def test_interpreter_tile_mapping_and_identical_gradients():
    """The kernels' tile of program pid (``_dq_tile``) is pid, or T_r − 1 − pid in reverse; and dQ, dK, dV are
    bit-identical in both orders (each program's tile is computed alone) on the pointer, TMA and fused launches."""
    import torch

    import kernels.flash_attention as fa
    from kernels.backward import flash_attention_backward

    if not fa.INTERPRET:
        pytest.skip("interpreter test (TRITON_INTERPRET=1)")
    for rev, want in ((False, [0, 1, 2, 3, 4]), (True, [4, 3, 2, 1, 0])):
        out = torch.full((5,), -1, dtype=torch.int32)
        _tile_probe[(5,)](out, REVERSE=rev)
        assert out.tolist() == want

    g = torch.Generator().manual_seed(5)
    q, do = (torch.randn(2, 4, 70, 32, generator=g, dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(2, 2, 90, 32, generator=g, dtype=torch.float16) for _ in range(2))
    o, lse = fa.flash_attention(q, k, v, True, "bottom-right", path="prefill")
    base = kh.backward_config(32, "fp16", True, interpreter=True)
    for tma, fused in ((False, False), (True, False), (True, True)):
        cfg = replace(base, tma=tma, fused_launch=fused, num_warps=base.dq_num_warps)
        a = flash_attention_backward(do, q, k, v, o, lse, True, "bottom-right", config=cfg)
        *b, ran = flash_attention_backward(do, q, k, v, o, lse, True, "bottom-right",
                                           config=replace(cfg, dq_tile_order="reverse"), return_config=True)
        assert ran.dq_tile_order == "reverse" and ran.tma == tma and ran.fused_launch == fused
        assert all(torch.equal(x, y) for x, y in zip(a, b))
