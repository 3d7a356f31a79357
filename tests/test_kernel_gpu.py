"""The compiled kernel on a CUDA GPU: every path against the fp64 reference (skips without CUDA).

Same error rule as the interpreter tests (``tests/test_kernel.py``): max and p99 absolute
error <= 2 x the same-dtype eager chain's + 1e-5, exact empty-row semantics, every output
element written. No timing here (speed lives in ``benchmarks/``).
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.fixture(scope="module")
def fa():
    import kernels.flash_attention as module

    if module.INTERPRET:
        pytest.skip("TRITON_INTERPRET is set: the kernels are interpreted, not compiled")
    return module


def _make(B, H, H_kv, N_q, N_k, d, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    return tuple(torch.randn(B, h, n, d, device="cuda", dtype=dt, generator=g)
                 for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))


def _check(q, k, v, causal, align, o, lse):
    from kernels.baseline import eager_attention_with_lse
    from kernels.reference import reference_attention

    ro, rl = reference_attention(q, k, v, causal, align)
    eo, el = eager_attention_with_lse(q, k, v, causal, align)
    assert not torch.isnan(o).any() and not torch.isnan(lse).any()
    empty = torch.isinf(rl)
    assert torch.equal(torch.isinf(lse), empty)
    assert (o[empty] == 0).all()
    for ours, eager, ref in ((o, eo, ro), (lse, el, rl)):
        fin = torch.isfinite(ref)
        e_o = (ours.double() - ref)[fin].abs()
        e_e = (eager.double() - ref)[fin].abs()
        if e_o.numel():
            assert e_o.max() <= 2 * e_e.max() + 1e-5
            assert torch.quantile(e_o, 0.99) <= 2 * torch.quantile(e_e, 0.99) + 1e-5


SHAPES = [
    (2, 8, 2, 300, 300, 128, "fp16", True, "top-left"),
    (1, 8, 8, 257, 513, 128, "bf16", True, "bottom-right"),
    (2, 4, 1, 200, 100, 64, "bf16", True, "bottom-right"),  # 100 rows see no key
    (1, 4, 2, 190, 333, 64, "fp16", False, "top-left"),
    (1, 2, 2, 130, 130, 256, "bf16", True, "top-left"),
    (1, 4, 2, 100, 120, 96, "fp16", True, "top-left"),  # padded HEAD_DIM
    (1, 4, 2, 100, 120, 64, "fp32", True, "bottom-right"),  # exact ieee dots
]


PACKED = [  # (B, H, H_kv, N_q, N_k, d, dtype, causal, align, P): P query heads of one KV head a program
    (2, 8, 2, 300, 300, 128, "fp16", True, "top-left", 4),
    (1, 8, 2, 257, 513, 128, "bf16", True, "bottom-right", 2),
    (2, 4, 1, 200, 100, 64, "bf16", True, "bottom-right", 4),  # 100 positions see no key
    (1, 16, 2, 64, 4000, 64, "fp16", False, "top-left", 8),  # a short query, one program per whole GQA group
    (1, 4, 2, 100, 120, 96, "fp16", True, "top-left", 2),  # padded HEAD_DIM
]


@pytest.mark.parametrize("case", PACKED, ids=[f"{c[3]}x{c[4]}-d{c[5]}-{c[6]}-p{c[9]}" for c in PACKED])
def test_packed_prefill(fa, monkeypatch, case):
    """``KernelConfig.heads_per_program`` P on path ``prefill`` (FlashAttention-3's PackGQA): exact, every element
    written (outputs start as NaN)."""
    from kernels import heuristics as hx

    B, H, H_kv, N_q, N_k, d, dtype, causal, align, p = case
    monkeypatch.setattr(fa, "_alloc", lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: torch.full_like(t, float("nan")))
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dtype)
    cfg = hx.prefill_default(d, dtype, causal, "prefill").config("prefill").with_(heads_per_program=p)
    o, lse, ran = fa.flash_attention(q, k, v, causal, align, return_config=True, config=cfg)
    assert (ran.path, ran.heads_per_program) == ("prefill", p)
    _check(q, k, v, causal, align, o, lse)


# the TMA path takes fp16/bf16 with a power-of-two HEAD_DIM
PATH_CASES = [("prefill", c) for c in SHAPES] + [("prefill-tma", c) for c in SHAPES if c[6] != "fp32" and c[5] != 96]


@pytest.mark.parametrize("path,case", PATH_CASES,
                         ids=[f"{p}-{c[3]}x{c[4]}-d{c[5]}-{c[6]}-{c[8] if c[7] else 'full'}" for p, c in PATH_CASES])
def test_prefill_paths(fa, monkeypatch, path, case):
    B, H, H_kv, N_q, N_k, d, dtype, causal, align = case
    if path == "prefill-tma" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the TMA path needs sm_90 or newer")
    monkeypatch.setattr(fa, "_alloc", lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: torch.full_like(t, float("nan")))
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dtype)
    o, lse, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True, path=path, autotune=False)
    assert cfg.path == path
    _check(q, k, v, causal, align, o, lse)


@pytest.mark.parametrize(
    "B,H,H_kv,N_q,N_k,dtype,causal,align",
    [(2, 32, 8, 1, 8192, "bf16", False, "top-left"), (1, 32, 8, 16, 3000, "fp16", True, "bottom-right"),
     (3, 8, 1, 4, 1001, "bf16", True, "bottom-right"), (1, 8, 2, 9, 5, "fp16", True, "bottom-right")],
)
def test_decode(fa, monkeypatch, B, H, H_kv, N_q, N_k, dtype, causal, align):
    monkeypatch.setattr(fa, "_alloc", lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: torch.full_like(t, float("nan")))
    q, k, v = _make(B, H, H_kv, N_q, N_k, 128, dtype)
    o, lse, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True)
    assert cfg.path == "decode-split-kv"
    _check(q, k, v, causal, align, o, lse)


def test_autotuned_config_is_a_candidate(fa):
    from kernels import heuristics as hx

    q, k, v = _make(1, 4, 4, 1024, 1024, 128, "bf16")
    o, lse, cfg = fa.flash_attention(q, k, v, causal=True, return_config=True)
    cands = hx.prefill_candidates(128, "bf16", True, cfg.path)
    assert (cfg.block_m, cfg.block_n, cfg.num_warps, cfg.num_stages) in {
        (c.block_m, c.block_n, c.num_warps, c.num_stages) for c in cands}
    assert cfg.path == fa.kernel_path(q, k, v, causal=True)
    _check(q, k, v, True, "top-left", o, lse)


@pytest.mark.parametrize("path", ["prefill", "prefill-tma"])
def test_causal_default_launch_takes_the_lpt_order(fa, path):
    """The first call runs the autotuner's pick (tiles-fastest); the kernel then keeps those tiles in
    its LPT order (iomodel.schedule.launch.lpt_launch_order: 2 x 8 rows of 600 keys, d 64, bf16 = 150 KiB
    of K/V per row, programs <= 16,384: one head group of 16 rows, reverse tiles). Same bytes out:
    every tile is computed by the same program body, only the start order differs."""
    q, k, v = _make(2, 8, 8, 600, 600, 64, "bf16", seed=7)
    o1, lse1, first = fa.flash_attention(q, k, v, causal=True, path=path, return_config=True)
    o2, lse2, kept = fa.flash_attention(q, k, v, causal=True, path=path, return_config=True)
    assert first.grid_order == "tiles-fastest"
    assert (kept.grid_order, kept.tile_order) == ("head-grouped:16", "reverse")
    assert (kept.block_m, kept.block_n, kept.num_warps, kept.num_stages) == (
        first.block_m, first.block_n, first.num_warps, first.num_stages)
    assert torch.equal(o1, o2) and torch.equal(lse1, lse2)
    _check(q, k, v, True, "top-left", o2, lse2)
    given = fa.flash_attention(q, k, v, causal=True, path=path, config=first, return_config=True)[2]
    assert given == first  # a given config runs as given
    assert fa.flash_attention(q, k, v, causal=False, path=path, return_config=True)[2].grid_order == "tiles-fastest"


BACKWARD = [
    (2, 8, 2, 1000, 1000, 128, "bf16", True, "top-left"),
    (2, 4, 1, 513, 257, 64, "fp16", True, "bottom-right"),  # 256 rows see no key
    (1, 4, 4, 300, 700, 64, "bf16", True, "top-left"),  # keys no row sees
    (1, 4, 2, 150, 170, 96, "fp16", False, "top-left"),  # padded HEAD_DIM
    (1, 2, 2, 257, 333, 32, "fp32", True, "top-left"),
    (1, 4, 2, 200, 260, 200, "fp16", True, "bottom-right"),  # HEAD_DIM 200: the 256 tiles
    (1, 4, 2, 300, 300, 256, "bf16", True, "top-left"),  # HEAD_DIM 256, TMA: GPU_BACKWARD's 256 tiles
    (1, 2, 1, 200, 230, 256, "fp32", False, "top-left"),  # fp32 256: GPU_BACKWARD_FP32 (fits shared memory)
]


@pytest.mark.parametrize("case", BACKWARD, ids=[f"{c[3]}x{c[4]}-d{c[5]}-{c[6]}-{c[8] if c[7] else 'full'}" for c in BACKWARD])
def test_backward(fa, case):
    """dq, dk, dv through autograd against fp64: max error <= 2 x the eager chain's + 1e-5, per tensor."""
    from kernels.baseline import eager_attention
    from kernels.reference import reference_attention_backward

    B, H, H_kv, N_q, N_k, d, dtype, causal, align = case
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dtype)
    do = torch.randn_like(q)
    grads = []
    for attn in (lambda *t: fa.flash_attention(*t, causal, align)[0], lambda *t: eager_attention(*t, causal, align)):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        grads.append([torch.nan_to_num(g) for g in torch.autograd.grad(attn(*leaves), leaves, do)])
    ours, eager = grads
    for name, o, e, r in zip(("dq", "dk", "dv"), ours, eager, reference_attention_backward(do, q, k, v, causal, align)):
        assert not torch.isnan(o).any(), name
        assert (o.double() - r).abs().max() <= 2 * (e.double() - r).abs().max() + 1e-5, name


TMA_BACKWARD = [(2, 8, 2, 1000, 1000, 128, "bf16", True, "top-left", 1),
                (2, 4, 1, 513, 257, 64, "fp16", True, "bottom-right", 1),
                (1, 16, 16, 1000, 1000, 128, "bf16", True, "top-left", 1),
                (2, 16, 16, 777, 777, 64, "bf16", False, "top-left", 1),
                (1, 16, 2, 777, 777, 128, "bf16", True, "bottom-right", 4)]


@pytest.mark.parametrize("case", TMA_BACKWARD, ids=lambda c: f"H{c[1]}/{c[2]}-{c[3]}x{c[4]}-d{c[5]}-S{c[9]}")
def test_backward_tma_equals_pointer(fa, case):
    """The TMA backward kernels (separate, mask split, one fused launch) give the pointer
    kernels' gradients bit for bit on sm_90 (same tiles, same arithmetic order)."""
    from dataclasses import replace

    from kernels import backward as bw

    B, H, H_kv, N_q, N_k, d, dtype, causal, align, S = case
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dtype)
    do = torch.randn_like(q)
    o, lse = fa.flash_attention(q, k, v, causal, align)
    base = replace(bw.backward_config(d, "bf16", causal), group_splits=S, tma=False, mask_split=False,
                   fused_launch=False, dkdv_kernel="triton")  # Triton's launches (the Gluon one: test_gpu_gluon.py)
    w = base.num_warps
    # causal GQA: both dK/dV loop orders (tiles-descending is the default there)
    for order in ("heads-outer", "tiles-descending") if causal and H > H_kv else (base.dkdv_order,):
        want = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=replace(base, dkdv_order=order))
        for flags in (dict(tma=True), dict(tma=True, mask_split=True),
                      dict(tma=True, mask_split=True, fused_launch=True, dq_num_warps=w,
                           dq_block_m=64 if w == 4 else 128)):
            got = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align,
                                              config=replace(base, dkdv_order=order, **flags))
            for name, a, b in zip(("dq", "dk", "dv"), got, want):
                assert torch.equal(a, b), (order, flags, name, (a.float() - b.float()).abs().max().item())


# ----------------------------------------------------------------------------------
# CUDA graphs and the direct launch (issue 14: host overhead)
# ----------------------------------------------------------------------------------
# (B, H, H_kv, N_q, N_k, d, dtype, causal, align, kwargs, num_splits > 1?)
GRAPH_CASES = [
    (1, 32, 8, 1, 8192, 128, "bf16", True, "bottom-right", {}, True),  # split-KV + combine
    (1, 32, 8, 1, 65536, 128, "bf16", True, "bottom-right", {}, True),
    (2, 8, 8, 4, 100, 64, "fp16", True, "bottom-right", {}, False),  # one split: no combine
    (2, 8, 2, 300, 300, 128, "bf16", True, "top-left", {"autotune": False}, None),
    (1, 4, 4, 512, 512, 64, "fp16", False, "top-left", {}, None),  # autotuned
    (1, 4, 2, 257, 300, 128, "fp16", True, "top-left", {"path": "prefill", "autotune": False}, None),
]


@pytest.mark.parametrize("case", GRAPH_CASES, ids=lambda c: f"B{c[0]}H{c[1]}/{c[2]}Nq{c[3]}Nk{c[4]}d{c[5]}")
def test_graph_replay_equals_the_plain_call(fa, case):
    """Issue 14: capture and replay (prefill and split-KV decode) equal the plain call bit for bit;
    the second plain call (cached plan, direct launch of the compiled kernel) equals the first."""
    B, H, H_kv, N_q, N_k, d, dt, causal, align, kw, split = case
    q, k, v = _make(B, H, H_kv, N_q, N_k, d, dt)
    o1, l1, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True, **kw)  # JIT (+ autotune)
    if split is not None:
        assert (cfg.num_splits > 1) is split
    o2, l2 = fa.flash_attention(q, k, v, causal, align, **kw)  # cached plan, direct launch
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    launches = [fa._plan(q, k, v, causal, align, None, None, kw.get("path"), kw.get("autotune")).main]
    assert all(launch.compiled is not None for launch in launches)  # the direct launch is in use

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fa.flash_attention(q, k, v, causal, align, **kw)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        og, lg = fa.flash_attention(q, k, v, causal, align, **kw)
    og.zero_()
    lg.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(og, o1) and torch.equal(lg, l1)
    # new inputs copied into the captured buffers: the replay follows them
    q2, k2, v2 = _make(B, H, H_kv, N_q, N_k, d, dt, seed=1)
    q.copy_(q2), k.copy_(k2), v.copy_(v2)
    graph.replay()
    o3, l3 = fa.flash_attention(q2, k2, v2, causal, align, **kw)
    torch.cuda.synchronize()
    assert torch.equal(og, o3) and torch.equal(lg, l3)


def test_graph_with_preallocated_out(fa):
    q, k, v = _make(1, 32, 8, 1, 8192, 128, "bf16")
    o = torch.empty_like(q)
    lse = torch.empty(1, 32, 1, device="cuda")
    ref = fa.flash_attention(q, k, v, True, "bottom-right")
    fa.flash_attention(q, k, v, True, "bottom-right", out=(o, lse))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fa.flash_attention(q, k, v, True, "bottom-right", out=(o, lse))
    o.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(o, ref[0]) and torch.equal(lse, ref[1])


def test_misaligned_out_takes_the_jit_launch(fa):
    """An ``out`` whose pointer is not 16-byte aligned must not reuse a kernel specialised on aligned pointers."""
    q, k, v = _make(1, 4, 2, 64, 64, 64, "fp16")
    ref = fa.flash_attention(q, k, v, False, "top-left", autotune=False, path="prefill")
    buf = torch.empty(q.numel() + 1, dtype=q.dtype, device="cuda")
    o = buf[1:].view(q.shape)  # 2-byte offset
    lse = torch.empty(1, 4, 64, device="cuda")
    fa.flash_attention(q, k, v, False, "top-left", autotune=False, path="prefill", out=(o, lse))
    assert torch.equal(o, ref[0]) and torch.equal(lse, ref[1])
    # the TMA path (the default here) needs an aligned o: one clear error, not a silent switch
    from iomodel.errors import IomodelError

    with pytest.raises(IomodelError, match="not TMA-aligned"):
        fa.flash_attention(q, k, v, False, "top-left", autotune=False, path="prefill-tma", out=(o, lse))


# ----------------------------------------------------------------------------------
# The C launcher and cached TMA tensor maps (issue 14: host overhead)
# ----------------------------------------------------------------------------------
def test_tma_prefill_reuses_tensor_maps_and_equals_the_jit_launch(fa):
    """The TMA prefill's direct launch (Triton's C launcher, tensor maps cached per address
    tuple) equals the JIT launch bit for bit on the same addresses (a cache hit) and on new
    ones (a miss), and equals the wrapped launcher that encodes fresh descriptors per call."""
    q, k, v = _make(2, 4, 2, 300, 300, 128, "bf16")
    kw = dict(path="prefill-tma", autotune=False)
    ref = fa.flash_attention(q, k, v, True, "top-left", **kw)  # the JIT launch
    launch = fa._plan(q, k, v, True, "top-left", None, None, "prefill-tma", False).main
    assert launch.compiled is not None and launch.raw is not None and len(launch.boxes) == 4
    hit = fa.flash_attention(q, k, v, True, "top-left", **kw)
    n = len(launch.tma_args)
    assert n >= 1
    q2, k2, v2 = (t.clone() for t in (q, k, v))  # the same values at new addresses
    miss = fa.flash_attention(q2, k2, v2, True, "top-left", **kw)
    assert len(launch.tma_args) > n
    raw, launch.raw = launch.raw, None
    try:
        wrapped = fa.flash_attention(q2, k2, v2, True, "top-left", **kw)  # descriptors encoded per call
    finally:
        launch.raw = raw
    for o, lse in (hit, miss, wrapped):
        assert torch.equal(o, ref[0]) and torch.equal(lse, ref[1])
    _check(q, k, v, True, "top-left", *hit)


@pytest.mark.parametrize("variant", ["separate", "fused", "gluon"])
def test_tma_backward_direct_launch_equals_the_jit_launch(fa, variant):
    """The TMA backward (separate dK/dV and dQ launches, the fused one, or the Gluon dK/dV launch) gives the
    same gradients bit for bit through the JIT launch, the direct launch with cached tensor maps and
    the direct launch on new addresses."""
    from dataclasses import replace

    from kernels import backward as bw

    fa._PLANS.clear()  # this test's plans only
    q, k, v = _make(2, 8, 2, 777, 777, 128, "bf16")
    do = torch.randn_like(q)
    o, lse = fa.flash_attention(q, k, v, True, "top-left")
    base = bw.backward_config(128, "bf16", True)
    fused = variant == "fused"
    w = base.num_warps
    cfg = replace(base, tma=True, fused_launch=fused, dkdv_kernel="gluon" if variant == "gluon" else "triton",
                  **(dict(dq_num_warps=w, dq_block_m=64 if w == 4 else 128) if fused else {}))
    first = bw.flash_attention_backward(do, q, k, v, o, lse, True, "top-left", config=cfg)
    second = bw.flash_attention_backward(do, q, k, v, o, lse, True, "top-left", config=cfg)
    moved = bw.flash_attention_backward(*(t.clone() for t in (do, q, k, v, o, lse)), True, "top-left", config=cfg)
    plans = [p for p in fa._PLANS.values() if isinstance(p, bw._BwdPlan) and p.tma and p.fused is fused
             and p.gluon is (variant == "gluon")]
    assert plans and all(len(p.dkdv.tma_args) >= 2 for p in plans)
    if variant != "gluon":  # Triton's C launcher directly
        assert all(p.dkdv.raw is not None for p in plans)
    for got in (second, moved):
        for name, a, b in zip(("dq", "dk", "dv"), got, first):
            assert torch.equal(a, b), (variant, name)
