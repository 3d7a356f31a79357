"""The launch-plan cache of ``kernels.flash_attention`` (issue 14: host overhead), in the interpreter.

What depends only on shapes, strides, dtypes, device and flags is worked out once per key
(``_plan``); a later call is a dictionary lookup. The cache must never change a result or
hide an error.
"""

from __future__ import annotations

import pytest
import torch

import kernels.flash_attention as fa
from iomodel.errors import IomodelError

pytestmark = pytest.mark.skipif(not fa.INTERPRET, reason="interpreter tests (TRITON_INTERPRET=1)")


def _qkv(B=1, H=4, H_kv=2, N_q=40, N_k=48, d=32, dt=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, h, n, d, dtype=dt, generator=g) for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))


def test_same_key_same_plan_other_key_other_plan():
    q, k, v = _qkv()
    p = fa._plan(q, k, v, True, "top-left", None)
    q2, k2, v2 = _qkv(seed=1)  # other values, same key
    assert fa._plan(q2, k2, v2, True, "top-left", None) is p
    assert p.o_shape == (1, 4, 40, 32) and p.lse_shape == (1, 4, 40) and p.path == "prefill"
    assert fa._plan(q, k, v, False, "top-left", None) is not p  # flag
    assert fa._plan(q, k, v, True, "bottom-right", None) is not p  # alignment
    assert fa._plan(q, k, v, True, "top-left", 0.5) is not p  # scale
    assert fa._plan(q.half(), k.half(), v.half(), True, "top-left", None) is not p  # dtype
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # same shape, other strides
    pt = fa._plan(qt, k, v, True, "top-left", None)
    assert pt is not p and pt.main.named["stride_qh"] == 32 and p.main.named["stride_qh"] == 40 * 32


def test_decode_plan_holds_the_split_kv_launches():
    q, k, v = _qkv(B=1, H=8, H_kv=2, N_q=1, N_k=512, d=32)
    p = fa._plan(q, k, v, True, "bottom-right", None)
    # interpreter decode: BLOCK_N 16, 4 SMs holding 16 programs each, P = 4 heads per program, 2
    # programs per split: one round 64 // 2 = 32 splits, capped by 512 / 16 = 32 blocks // 8 per split = 4
    assert p.path == "decode-split-kv" and p.config.num_splits == 4 and p.config.heads_per_program == 4
    assert p.part_shapes == ((1, 8, 4, 1, 32), (1, 8, 4, 1))
    # fused (the default): one launch, one int32 counter per program group (B·H_kv·G/P = 2)
    assert p.main.grid == (4, 2, 1) and p.combine is None and p.sem_count == 2 and p.main.named["FUSED"]
    two = fa._plan(q, k, v, True, "bottom-right", None, config=p.config.with_(fused_combine=False))
    assert two.main.grid == (4, 2, 1) and two.combine.grid == (8, 1, 1) and two.sem_count == 0
    assert not two.main.named["FUSED"]


def test_fused_decode_workspace_is_cached_and_allocates_nothing_per_call(monkeypatch):
    q, k, v = _qkv(B=1, H=8, H_kv=2, N_q=1, N_k=512, d=32)
    fa.flash_attention(q, k, v, True, "bottom-right")
    p = fa._plan(q, k, v, True, "bottom-right", None)
    o_part, lse_part, sem = p.workspace[None]  # the interpreter's one stream key
    assert o_part.shape == (1, 8, 4, 1, 32) and lse_part.shape == (1, 8, 4, 1) and sem.shape == (2,)
    # LSE_PART follows O_PART in one buffer, 16-byte aligned; the counters are back at 0
    assert lse_part.data_ptr() - o_part.data_ptr() == 8 * 4 * 32 * 4 and sem.tolist() == [0, 0]
    calls = []
    monkeypatch.setattr(fa, "_alloc", lambda *a: calls.append(a) or torch.empty(a[0], dtype=a[1]))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: calls.append((tuple(t.shape), "like q")) or torch.empty_like(t))
    fa.flash_attention(q, k, v, True, "bottom-right")
    assert [c[:2] for c in calls] == [((1, 8, 1, 32), "like q"), ((1, 8, 1), torch.float32)]  # o, lse: no partials
    assert p.workspace[None][0].data_ptr() == o_part.data_ptr()


def test_cached_calls_equal_the_first_bitwise():
    for N_q in (40, 1):
        q, k, v = _qkv(N_q=N_q, N_k=200)
        o1, l1 = fa.flash_attention(q, k, v, True, "bottom-right")
        o2, l2 = fa.flash_attention(q, k, v, True, "bottom-right")
        assert torch.equal(o1, o2) and torch.equal(l1, l2)


def test_non_contiguous_out_gets_its_own_plan():
    q, k, v = _qkv()
    ref_o, ref_l = fa.flash_attention(q, k, v, True, "top-left")
    o = torch.zeros(1, 40, 4, 32).transpose(1, 2)  # (1, 4, 40, 32), heads not outermost
    lse = torch.zeros(1, 4, 40)
    fa.flash_attention(q, k, v, True, "top-left", out=(o, lse))
    assert torch.equal(o, ref_o) and torch.equal(lse, ref_l)


def test_errors_are_not_cached():
    q, k, v = _qkv()
    for _ in range(2):
        with pytest.raises(IomodelError, match="sm_scale must be finite"):
            fa.flash_attention(q, k, v, sm_scale=float("nan"))
        with pytest.raises(IomodelError, match="causal must be"):
            fa.flash_attention(q, k, v, causal=[True])  # unhashable: built uncached, refused
        with pytest.raises(IomodelError, match="out must be"):
            fa.flash_attention(q, k, v, out=(q,))


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
@pytest.mark.parametrize("causal, bad", [(True, 1), (False, 0), (True, 1.0)])
def test_causal_must_be_a_bool_even_after_a_cached_call(causal, bad):
    """causal=1 equals True (and hashes like it): after a call with True has cached its plan,
    1 is still refused, by the dense, the autograd and the varlen launchers and the backward."""
    q, k, v = _qkv()
    o, lse = fa.flash_attention(q, k, v, causal)  # the plan of causal=True (False) is cached
    match = f"causal must be True or False, got {bad!r}: pass a bool"
    with pytest.raises(IomodelError, match=match):
        fa.flash_attention(q, k, v, bad)
    with pytest.raises(IomodelError, match=match):  # through autograd (FlashAttentionFunction)
        fa.flash_attention(q.clone().requires_grad_(True), k, v, bad)
    from kernels.backward import flash_attention_backward

    flash_attention_backward(torch.ones_like(q), q, k, v, o, lse, causal)
    with pytest.raises(IomodelError, match=match):
        flash_attention_backward(torch.ones_like(q), q, k, v, o, lse, bad)
    qv, kv, vv = (t[0].transpose(0, 1).contiguous() for t in (q, k, v))  # (tokens, heads, d)
    cu_q, cu_k = (torch.tensor([0, t.shape[0]], dtype=torch.int32) for t in (qv, kv))
    fa.flash_attention_varlen(qv, kv, vv, cu_q, cu_k, 40, 48, causal)
    with pytest.raises(IomodelError, match=match):
        fa.flash_attention_varlen(qv, kv, vv, cu_q, cu_k, 40, 48, bad)


def test_module_switch_is_part_of_the_key(monkeypatch):
    q, k, v = _qkv()
    fa.flash_attention(q, k, v)  # cached under INTERPRET = True
    monkeypatch.setattr(fa, "INTERPRET", False)
    with pytest.raises(IomodelError, match="needs CUDA tensors"):
        fa.flash_attention(q, k, v)


def test_backward_plan_is_one_lookup_after_the_first_call():
    """flash_attention_backward keeps its checks, config and launches in the plan dictionary: the
    second call of a key finds the same plan and gives the same gradients; another layout of dO
    (strides) or a swapped kernel object is another key; a refused call is never cached."""
    from kernels import backward as bw

    g = torch.Generator().manual_seed(5)
    q, k, v, do = (torch.randn((1, 2, 40, 32), generator=g) for _ in range(4))
    o, lse = fa.flash_attention(q, k, v, True)
    key = bw._bwd_plan_key(do, q, k, v, o, lse, True, "top-left", None, None, None)
    fa._PLANS.pop(key, None)
    first = bw.flash_attention_backward(do, q, k, v, o, lse, True)
    plan = fa._PLANS[key]
    second = bw.flash_attention_backward(do, q, k, v, o, lse, True)
    assert fa._PLANS[key] is plan and all(torch.equal(a, b) for a, b in zip(first, second))
    do_t = do.transpose(2, 3).contiguous().transpose(2, 3)  # same values, column-major rows: not last-dim contiguous
    assert bw._bwd_plan_key(do_t, q, k, v, o, lse, True, "top-left", None, None, None) != key
    n = len(fa._PLANS)
    for _ in range(2):
        with pytest.raises(IomodelError, match="causal must be"):
            bw.flash_attention_backward(do, q, k, v, o, lse, 1)
    assert len(fa._PLANS) == n


def test_sm_scale_true_is_refused_not_taken_as_one():
    q = torch.randn((1, 1, 16, 16))
    with pytest.raises(IomodelError, match="sm_scale must be a number"):
        fa.flash_attention(q, q, q, sm_scale=True)


def test_o_is_allocated_like_q_only_when_q_has_the_contiguous_strides(monkeypatch):
    """o is ``torch.empty_like(q)`` only for a plan whose q has exactly o's shape and contiguous strides
    (the plan key holds q's strides); a transposed q, or a q whose size-1 axis has another stride
    (``is_contiguous()`` though it is), gets a contiguous o from ``_alloc``. All give the same o, lse."""
    q, k, v = _qkv(N_q=40, N_k=70)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # (B, H, N, d) values, (B, N, H, d) memory
    assert not qt.is_contiguous() and torch.equal(qt, q)
    q1 = torch.empty_strided((1, 4, 1, 32), (4 * 32, 32, 7, 1)).copy_(q[:, :, -1:])  # stride 7 on the size-1 axis
    assert q1.is_contiguous() and q1.stride() != (4 * 32, 32, 32, 1)
    like = []
    real = fa._alloc_like
    monkeypatch.setattr(fa, "_alloc_like", lambda t: like.append(t) or real(t))
    o1, l1 = fa.flash_attention(q, k, v, True, "bottom-right")
    assert len(like) == 1 and like[0] is q
    o2, l2 = fa.flash_attention(qt, k, v, True, "bottom-right")
    o3, l3 = fa.flash_attention(q1, k, v, True, "bottom-right")
    assert len(like) == 1  # neither the transposed q nor the size-1-axis one
    assert o1.stride() == o2.stride() == q.stride() and o3.stride() == (4 * 32, 32, 32, 1)
    assert fa._plan(q, k, v, True, "bottom-right", None).o_like_q
    assert not fa._plan(qt, k, v, True, "bottom-right", None).o_like_q
    assert not fa._plan(q1, k, v, True, "bottom-right", None).o_like_q
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    ref_o, ref_l = fa.flash_attention(q1.contiguous(), k, v, True, "bottom-right")
    assert torch.equal(o3, ref_o) and torch.equal(l3, ref_l)


def test_every_forward_launch_has_the_tail_its_direct_launch_needs():
    """A launch whose ``tail`` is None never takes the direct launch (issue 14: host overhead): the pointer prefill
    left ``_attn_fwd``'s PACK at its default and lost it, found by the GPU test of the direct launch on an H100
    (2026-12-07). Every parameter after the per-call pointers is in the tail, in parameter order, a default at its
    default: the prefill (one head a program, and packed), the fused decode and the two-launch decode."""
    q, k, v = _qkv()
    qd, kd, vd = _qkv(B=1, H=8, H_kv=2, N_q=1, N_k=512, d=32)
    plain = fa._plan(q, k, v, True, "top-left", None)
    packed = fa._plan(q, k, v, True, "top-left", None, config=plain.config.with_(heads_per_program=2),
                      path="prefill")
    fused = fa._plan(qd, kd, vd, True, "bottom-right", None)
    two = fa._plan(qd, kd, vd, True, "bottom-right", None, config=fused.config.with_(fused_combine=False))
    launches = [plain.main, packed.main, fused.main, two.main, two.combine]
    for launch in launches:
        assert launch.tail is not None, launch.kernel.arg_names
    # _attn_fwd: 8 per-call pointers (Q, K, V, O, LSE, CU_Q, CU_K, SEQUSED_K), then every other parameter in the tail
    names = plain.main.kernel.arg_names
    assert names[:8] == ["Q", "K", "V", "O", "LSE", "CU_Q", "CU_K", "SEQUSED_K"] and names[-1] == "PACK"
    assert len(plain.main.tail) == len(packed.main.tail) == len(names) - 8
    assert plain.main.tail[-1] == 1 and packed.main.tail[-1] == 2  # PACK: left to its default 1, or given 2
