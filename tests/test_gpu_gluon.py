"""The Gluon prefill (path ``prefill-gluon``, ``kernels/gluon_attention.py``) on an sm_90 GPU (skips elsewhere).

Same error rule as ``tests/test_kernel_gpu.py``: max and p99 absolute error of o and LSE <= 2 x the
same-dtype eager chain's + 1e-5 against the fp64 reference, exact empty-row semantics (o = 0,
LSE = -inf), every output element written (outputs start as NaN). No timing here: speed is
``benchmarks/gpu_gluon_fwd_probe.py``'s.
"""

from __future__ import annotations

import pytest
import torch

from tests.test_kernel_gpu import _check, _make  # the same inputs and error rule as the other GPU paths

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                       reason="needs an sm_90 GPU (Hopper)"),
]


@pytest.fixture(scope="module")
def fa():
    import kernels.flash_attention as module

    if module.INTERPRET:
        pytest.skip("TRITON_INTERPRET is set: the kernels are interpreted, not compiled")
    return module


CASES = [
    (2, 8, 2, 300, 300, 128, "fp16", True, "top-left"),  # GQA, ragged tiles
    (1, 8, 8, 257, 513, 128, "bf16", True, "bottom-right"),
    (2, 4, 1, 200, 100, 64, "bf16", True, "bottom-right"),  # 100 rows see no key; HEAD_DIM 64
    (1, 4, 2, 190, 333, 64, "fp16", False, "top-left"),
    (1, 4, 4, 1024, 1024, 128, "bf16", False, "top-left"),  # whole tiles, 8 K/V blocks: the ring wraps
    (2, 4, 2, 700, 300, 128, "bf16", True, "top-left"),  # N_q > N_k, top-left: keys past N_k masked
    (1, 2, 2, 64, 64, 128, "bf16", True, "top-left"),  # one tile, the second warpgroup's rows all past N_q
    (1, 2, 1, 5, 40, 128, "bf16", True, "bottom-right"),  # forced prefill at 5 query rows
    (1, 2, 2, 3000, 3000, 128, "fp16", True, "bottom-right"),
    (3, 6, 3, 129, 1000, 128, "bf16", False, "top-left"),
    (1, 2, 1, 500, 100, 128, "bf16", True, "bottom-right"),  # tiles 0-2 (rows 0-383) see no key: no K/V block
    (2, 2, 2, 700, 64, 64, "fp16", True, "bottom-right"),  # the same at d 64, one key block for the rest
    # HEAD_DIM 64 runs four consumer warpgroups (BLOCK_M 256): rows of the third and fourth past N_q, a
    # ring of 4 stages that wraps, GQA, a query tile whose last warpgroups see no key
    (2, 8, 2, 1000, 1000, 64, "bf16", False, "top-left"),
    (1, 4, 4, 300, 2048, 64, "fp16", True, "bottom-right"),
    (1, 4, 1, 2048, 700, 64, "bf16", True, "top-left"),
    (3, 2, 2, 129, 129, 64, "fp16", False, "top-left"),
    # HEAD_DIM 128 under a bottom-right offset of 32 (mod 128 in 1-64): a warpgroup drains one key block
    (1, 2, 2, 1000, 1032, 128, "bf16", True, "bottom-right"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"B{c[0]}H{c[1]}/{c[2]}Nq{c[3]}Nk{c[4]}d{c[5]}{c[6]}"
                                                     f"{c[8] if c[7] else 'full'}")
def test_gluon_prefill_is_exact(fa, monkeypatch, case):
    B, H, H_kv, N_q, N_k, d, dtype, causal, align = case
    monkeypatch.setattr(fa, "_alloc", lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: torch.full_like(t, float("nan")))
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dtype)
    o, lse, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True, path="prefill-gluon")
    from kernels.heuristics import gluon_tiles

    t = gluon_tiles(d)
    assert (cfg.path, cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages) == (
        "prefill-gluon", t.block_m, t.block_n, t.num_warps, t.num_stages)
    _check(q, k, v, causal, align, o, lse)
    o2, lse2 = fa.flash_attention(q, k, v, causal, align, path="prefill-gluon")  # cached plan, direct launch
    assert torch.equal(o, o2) and torch.equal(lse, lse2)


def test_default_path_at_head_dim_128_is_gluon(fa):
    """The launcher picks the Gluon prefill at HEAD_DIM 128 and at 64 non-causal (capabilities.GLUON_AUTO),
    the TMA prefill at 64 causal and under a sliding window; forced at 64 causal, the Gluon prefill's warpgroups
    skip the key blocks their rows do not see and the result is exact."""
    q, k, v = _make(1, 4, 2, 512, 512, 128, "bf16")
    assert fa.kernel_path(q, k, v, causal=True) == "prefill-gluon"
    assert fa.flash_attention(q, k, v, True, return_config=True)[2].path == "prefill-gluon"
    assert fa.flash_attention(q, k, v, True, window=(256, 0), return_config=True)[2].path == "prefill-tma"
    q64, k64, v64 = _make(1, 4, 2, 512, 512, 64, "bf16")
    assert fa.kernel_path(q64, k64, v64, causal=True) == "prefill-tma"
    assert fa.flash_attention(q64, k64, v64, True, return_config=True)[2].path == "prefill-tma"
    assert fa.kernel_path(q64, k64, v64, causal=False) == "prefill-gluon"
    o, lse, cfg = fa.flash_attention(q64, k64, v64, False, return_config=True)
    assert (cfg.path, cfg.block_m) == ("prefill-gluon", 256)
    _check(q64, k64, v64, False, "top-left", o, lse)
    q64, k64, v64 = _make(1, 4, 2, 2048, 2048, 64, "bf16")
    assert fa.kernel_path(q64, k64, v64, causal=True) == "prefill-tma"
    o, lse, cfg = fa.flash_attention(q64, k64, v64, True, return_config=True, path="prefill-gluon")
    assert (cfg.path, cfg.block_m) == ("prefill-gluon", 256)
    _check(q64, k64, v64, True, "top-left", o, lse)


def test_gluon_causal_launch_takes_the_lpt_order_and_equals_tiles_fastest(fa):
    """Small causal grid: the default config carries the LPT order (head-grouped, reverse tiles) as
    on the other prefill paths; the same tiles launched tiles-fastest give the same bytes (each
    tile is computed by the same program body; only the start order differs)."""
    q, k, v = _make(2, 8, 8, 600, 600, 128, "bf16", seed=7)
    o1, lse1, cfg = fa.flash_attention(q, k, v, causal=True, path="prefill-gluon", return_config=True)
    assert (cfg.grid_order, cfg.tile_order) == ("head-grouped:16", "reverse")
    plain = cfg.with_(grid_order="tiles-fastest", tile_order="forward")
    o2, lse2 = fa.flash_attention(q, k, v, causal=True, path="prefill-gluon", config=plain)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    _check(q, k, v, True, "top-left", o1, lse1)


def test_gluon_refuses_what_it_does_not_run(fa):
    from iomodel.errors import IomodelError

    q, k, v = _make(1, 2, 2, 256, 256, 96, "bf16")
    with pytest.raises(IomodelError, match="runs HEAD_DIM 64 or 128"):
        fa.flash_attention(q, k, v, path="prefill-gluon")
    q, k, v = _make(1, 2, 2, 256, 256, 128, "bf16")
    with pytest.raises(IomodelError, match="no sliding window"):
        fa.flash_attention(q, k, v, True, window=(64, 0), path="prefill-gluon")
    with pytest.raises(IomodelError, match="nothing to autotune"):
        fa.flash_attention(q, k, v, path="prefill-gluon", autotune=True)
    cfg = fa.flash_attention(q, k, v, path="prefill-gluon", return_config=True)[2]
    with pytest.raises(IomodelError, match="runs one configuration"):
        fa.flash_attention(q, k, v, path="prefill-gluon", config=cfg.with_(block_n=64))


def test_gluon_graph_replay_equals_the_plain_call(fa):
    q, k, v = _make(2, 8, 2, 1000, 1000, 128, "bf16")
    o1, l1 = fa.flash_attention(q, k, v, True)  # the JIT launch
    o2, l2 = fa.flash_attention(q, k, v, True)  # the direct launch
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    launch = fa._plan(q, k, v, True, "top-left", None, None, None, None).main
    assert launch.compiled is not None  # the direct launch is in use
    # Triton's C launcher with cached tensor maps (issue 14's host overhead), as for the TMA prefill:
    # Gluon's descriptors carry base, shape, strides and padding, what make_tensordesc_arg reads
    assert launch.raw is not None and len(launch.boxes) == 4 and len(launch.tma_args) >= 1
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fa.flash_attention(q, k, v, True)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = fa.flash_attention(q, k, v, True)
    og.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(og, o1) and torch.equal(lg, l1)


def test_gluon_forward_feeds_the_backward(fa):
    """Autograd through the default HEAD_DIM 128 path: the forward runs prefill-gluon, the backward
    reads its o and LSE; gradients within the error rule of the fp64 reference."""
    from kernels.reference import reference_attention_backward

    q, k, v = (t.requires_grad_() for t in _make(1, 4, 2, 700, 700, 128, "bf16", seed=3))
    o, lse, cfg = fa.flash_attention(q, k, v, True, return_config=True)
    assert cfg.path == "prefill-gluon"
    do = torch.randn_like(o)
    o.backward(do)
    rq, rk, rv = reference_attention_backward(do, q.detach(), k.detach(), v.detach(), True, "top-left")
    qe, ke, ve = (t.detach().clone().requires_grad_() for t in (q, k, v))
    from kernels.baseline import eager_attention_with_lse

    eo, _ = eager_attention_with_lse(qe, ke, ve, True, "top-left")
    eo.backward(do)
    for ours, eager, ref in ((q.grad, qe.grad, rq), (k.grad, ke.grad, rk), (v.grad, ve.grad, rv)):
        assert (ours.double() - ref).abs().max() <= 2 * (eager.double() - ref).abs().max() + 1e-5


# ----------------------------------------------------------------------------------
# The backward's Gluon dK/dV launch (kernels/gluon_backward.py, BackwardConfig.dkdv_kernel = "gluon")
# ----------------------------------------------------------------------------------
# (B, H, H_kv, N_q, N_k, causal, align, S, dkdv_order): HEAD_DIM 128
GLUON_DKDV = [
    (2, 4, 4, 1024, 1024, False, "top-left", 1, "heads-outer"),  # whole tiles, MHA
    (2, 4, 4, 1024, 1024, True, "top-left", 1, "heads-outer"),
    (1, 8, 2, 1000, 1000, True, "top-left", 1, "heads-outer"),  # GQA, ragged tails
    (1, 8, 2, 1000, 1000, True, "top-left", 1, "tiles-descending"),
    (1, 8, 2, 777, 777, True, "bottom-right", 4, "tiles-descending"),  # S = 4: fp32 partials, reduced
    (1, 8, 1, 300, 700, False, "top-left", 3, "heads-outer"),  # MQA, S = 3 (uneven slices)
    (2, 4, 1, 513, 257, True, "bottom-right", 1, "heads-outer"),  # 256 rows see no key
    (1, 4, 4, 300, 700, True, "top-left", 1, "heads-outer"),  # keys no row sees: dk = dv = 0
    (1, 2, 2, 65, 130, True, "bottom-right", 1, "heads-outer"),  # a key tile whose second half is past N_k
    (1, 2, 2, 1, 200, False, "top-left", 1, "heads-outer"),  # one query row
]


@pytest.mark.parametrize("case", GLUON_DKDV, ids=lambda c: f"H{c[1]}/{c[2]}-{c[3]}x{c[4]}-{c[6] if c[5] else 'full'}"
                                                           f"-S{c[7]}-{c[8]}")
def test_gluon_dkdv_is_exact(fa, monkeypatch, case):
    """dq, dk, dv with the Gluon dK/dV launch against fp64: max error <= 2 x the eager chain's + 1e-5 per tensor,
    every element written (outputs and partials start as NaN), the launch reported as it ran."""
    from dataclasses import replace

    from kernels import backward as bw
    from kernels import heuristics as hx
    from kernels.baseline import eager_attention
    from kernels.reference import reference_attention_backward

    B, H, H_kv, N_q, N_k, causal, align, S, order = case
    q, k, v = _make(B, H, H_kv, N_q, N_k, 128, "bf16", seed=7)
    do = torch.randn_like(q)
    o, lse = fa.flash_attention(q, k, v, causal, align)
    monkeypatch.setattr(bw, "_alloc", lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev))
    cfg = replace(hx.backward_config(128, "bf16", causal), group_splits=S, dkdv_order=order)
    assert cfg.dkdv_kernel == "gluon"
    dq, dk, dv, ran = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg, return_config=True)
    t = hx.GLUON_DKDV_TILES
    assert (ran.dkdv_kernel, ran.block_m, ran.block_n, ran.num_stages, ran.group_splits) == (
        "gluon", t.block_m, t.block_n, t.num_stages, S)
    leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
    eager = [torch.nan_to_num(g) for g in torch.autograd.grad(eager_attention(*leaves, causal, align), leaves, do)]
    for name, ours, e, r in zip(("dq", "dk", "dv"), (dq, dk, dv), eager,
                                reference_attention_backward(do, q, k, v, causal, align)):
        assert not torch.isnan(ours).any(), name
        assert (ours.double() - r).abs().max() <= 2 * (e.double() - r).abs().max() + 1e-5, name
    again = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)  # cached plan, direct launch
    assert all(torch.equal(a, b) for a, b in zip(again, (dq, dk, dv)))


def test_gluon_dkdv_is_the_default_at_head_dim_128_and_can_be_turned_off(fa, monkeypatch):
    """The default backward at HEAD_DIM 128 (bf16, contiguous) runs the Gluon dK/dV launch in GLUON_DKDV_TILES;
    with IOMODEL_GLUON off (``USE_GLUON``), at HEAD_DIM 64 and with tma=False it runs the Triton launch in
    GPU_BACKWARD's tiles, and return_config says so."""
    from dataclasses import replace

    from kernels import backward as bw
    from kernels import heuristics as hx

    q, k, v = _make(1, 4, 4, 512, 512, 128, "bf16")
    do = torch.randn_like(q)
    o, lse = fa.flash_attention(q, k, v, True)
    ran = bw.flash_attention_backward(do, q, k, v, o, lse, True, return_config=True)[3]
    assert (ran.dkdv_kernel, ran.block_m, ran.block_n) == ("gluon", 64, 128)
    triton_tiles = hx.GPU_BACKWARD[(128, True)]
    off = bw.flash_attention_backward(do, q, k, v, o, lse, True, return_config=True,
                                      config=replace(hx.backward_config(128, "bf16", True), tma=False))[3]
    assert (off.dkdv_kernel, off.block_m, off.block_n) == ("triton", triton_tiles.block_m, triton_tiles.block_n)
    monkeypatch.setattr(fa, "USE_GLUON", False)
    q2 = q[:, :, :500].contiguous()  # another plan key (the switch is read when a plan is built)
    o2, lse2 = fa.flash_attention(q2, k, v, True, "bottom-right")
    ran = bw.flash_attention_backward(do[:, :, :500].contiguous(), q2, k, v, o2, lse2, True, "bottom-right",
                                      return_config=True)[3]
    assert (ran.dkdv_kernel, ran.block_m, ran.block_n) == ("triton", triton_tiles.block_m, triton_tiles.block_n)
    q3, k3, v3 = _make(1, 4, 4, 512, 512, 64, "bf16")
    o3, lse3 = fa.flash_attention(q3, k3, v3, True)
    assert bw.flash_attention_backward(torch.randn_like(q3), q3, k3, v3, o3, lse3, True,
                                       return_config=True)[3].dkdv_kernel == "triton"
