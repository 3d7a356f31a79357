"""CUDA-graph capture and the direct launch of the compiled kernel (issue 14; skips without CUDA).

A call captured in a CUDA graph and replayed must give the plain call's output bit for bit:
the launcher makes no host synchronisation, no ``.item()`` and no value-dependent
allocation. The second plain call of a shape goes through the plan cache and the direct
launch of the compiled kernel (``kernels.flash_attention._Launch``); it must equal the
first (JIT) call bit for bit too.
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


def _make(B, H, H_kv, N_q, N_k, d, dt, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return tuple(torch.randn(B, h, n, d, device="cuda", dtype=dt, generator=g)
                 for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))


# (B, H, H_kv, N_q, N_k, d, dtype, causal, align, kwargs, num_splits > 1?)
CASES = [
    (1, 32, 8, 1, 8192, 128, torch.bfloat16, True, "bottom-right", {}, True),  # split-KV + combine
    (1, 32, 8, 1, 65536, 128, torch.bfloat16, True, "bottom-right", {}, True),
    (2, 8, 8, 4, 100, 64, torch.float16, True, "bottom-right", {}, False),  # one split: no combine
    (2, 8, 2, 300, 300, 128, torch.bfloat16, True, "top-left", {"autotune": False}, None),
    (1, 4, 4, 512, 512, 64, torch.float16, False, "top-left", {}, None),  # autotuned
    (1, 4, 2, 257, 300, 128, torch.float16, True, "top-left", {"path": "prefill", "autotune": False}, None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"B{c[0]}H{c[1]}/{c[2]}Nq{c[3]}Nk{c[4]}d{c[5]}")
def test_graph_replay_equals_the_plain_call(fa, case):
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
    q, k, v = _make(1, 32, 8, 1, 8192, 128, torch.bfloat16)
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
    q, k, v = _make(1, 4, 2, 64, 64, 64, torch.float16)
    ref = fa.flash_attention(q, k, v, False, "top-left", autotune=False)
    buf = torch.empty(q.numel() + 1, dtype=q.dtype, device="cuda")
    o = buf[1:].view(q.shape)  # 2-byte offset
    lse = torch.empty(1, 4, 64, device="cuda")
    fa.flash_attention(q, k, v, False, "top-left", autotune=False, out=(o, lse))
    assert torch.equal(o, ref[0]) and torch.equal(lse, ref[1])
