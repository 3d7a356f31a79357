"""Paged KV cache on the split-KV decode (issue 13, item 2): exactness against the fp64
reference, interpreter-counted bytes equal to the traffic model per tensor, and bad input.

Convention (flash-attn ``flash_attn_with_kvcache`` / vLLM): k_cache, v_cache
``(num_blocks, page_size, H_kv, d)``, block_table ``(B, max_pages)`` int32, cache_seqlens ``(B,)`` int32.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
fa = pytest.importorskip("kernels.flash_attention")
_NUMPY_WARNING = "ignore:Conversion of an array with ndim:DeprecationWarning"
pytestmark = [pytest.mark.interpreter, pytest.mark.filterwarnings(_NUMPY_WARNING),
              pytest.mark.skipif(not fa.INTERPRET, reason="runs the kernel in Triton's interpreter (TRITON_INTERPRET=1)")]
interpret = pytest.importorskip("iomodel.measure.interpret")
from iomodel import LayerSpec, get_hardware  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.traffic import predict  # noqa: E402
from kernels.reference import random_paged_cache, reference_attention_paged  # noqa: E402

H200 = get_hardware("H200")


def _inputs(B, H, H_kv, d, N_q, page, lens, dtype=torch.float32, seed=0, max_pages=None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, N_q, d, generator=g).to(dtype)  # (B, H, N_q, d)
    return (q, *random_paged_cache(B, H_kv, d, page, lens, dtype, g, max_pages))


@pytest.mark.parametrize("B,H,H_kv,d,N_q,page,lens,causal,align,dtype", [
    (2, 4, 2, 32, 1, 16, [37, 50], True, "bottom-right", torch.float32),  # partial last pages, GQA
    (3, 2, 2, 16, 4, 64, [130, 1, 64], True, "bottom-right", torch.float32),  # a sequence shorter than N_q
    (2, 8, 1, 64, 2, 256, [300, 257], False, "top-left", torch.float16),  # MQA, fp16
    (2, 4, 4, 16, 3, 16, [0, 40], True, "top-left", torch.float32),  # an empty sequence: o = 0, lse = -inf
    (1, 4, 2, 16, 16, 32, [100], True, "bottom-right", torch.bfloat16),  # 16 query rows
])
def test_paged_matches_fp64_reference(B, H, H_kv, d, N_q, page, lens, causal, align, dtype):
    q, kc, vc, table, seqlens = _inputs(B, H, H_kv, d, N_q, page, lens, dtype, max_pages=20 if page == 16 else None)
    o, lse = fa.flash_attention(q, kc, vc, causal=causal, causal_align=align, block_table=table, cache_seqlens=seqlens)
    ro, rl = reference_attention_paged(q, kc, vc, table, seqlens, causal, align)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    assert torch.allclose(o.double(), ro, atol=tol, rtol=tol)
    finite = torch.isfinite(rl)
    assert torch.equal(torch.isfinite(lse), finite)
    assert torch.allclose(lse.double()[finite], rl[finite], atol=1e-4, rtol=1e-5)
    if 0 in lens:
        b = lens.index(0)
        assert torch.all(o[b] == 0) and torch.all(lse[b] == float("-inf"))


def _model(spec, tiling):
    out: dict[str, tuple[int, int]] = {}
    for r in predict(spec, tiling, H200).algorithms["tiled"].rows:
        if r.level == "SRAM_fill":
            rd, wr = out.get(r.tensor, (0, 0))
            out[r.tensor] = (rd + int(r.read_bytes), wr + int(r.write_bytes))
    return out


def _counted(named):
    return {n: (t.read_bytes, t.write_bytes) for n, t in named.items() if t.read_bytes or t.write_bytes}


@pytest.mark.parametrize("B,H,H_kv,d,N_q,N_k,page,causal,align", [
    (1, 2, 1, 16, 1, 37, 16, True, "bottom-right"),  # partial last page, MQA
    (2, 4, 2, 16, 1, 200, 16, True, "bottom-right"),  # GQA, split-KV
    (2, 8, 2, 32, 2, 130, 64, False, "top-left"),  # partial page of 2 keys
    (1, 4, 4, 16, 4, 64, 64, True, "top-left"),  # top-left: keys past N_q skipped
    (2, 4, 1, 16, 1, 300, 256, True, "bottom-right"),  # one full and one partial page of 256
    (1, 2, 2, 24, 3, 256, 256, False, "top-left"),  # padded HEAD_DIM, exactly one page
    (3, 6, 3, 16, 1, 17, 16, True, "bottom-right"),  # one key on the second page
    (1, 8, 2, 16, 8, 90, 32, True, "bottom-right"),  # several query rows, GQA packing
])
def test_paged_counts_equal_model(B, H, H_kv, d, N_q, N_k, page, causal, align):
    spec = LayerSpec(batch=B, heads=H, kv_heads=H_kv, head_dim=d, seqlen_q=N_q, seqlen_k=N_k, dtype="fp16",
                     causal=causal, causal_align=align, phase="decode", page_size=page)
    named, cfg, _ = interpret.count_flash_attention(spec)
    got = _counted(named)
    want = {k: v for k, v in _model(spec, cfg.tiling()).items() if v != (0, 0)}
    assert got == want
    assert got["CACHE_SEQLENS"][0] == cfg.num_splits * B * (H // cfg.heads_per_program) * 4


def test_paged_ragged_counts_are_the_sum_of_per_sequence_models():
    lens, page = [37, 160, 5], 16
    spec = LayerSpec(batch=3, heads=4, kv_heads=2, head_dim=16, seqlen_q=1, seqlen_k=max(lens), dtype="fp16",
                     causal=True, causal_align="bottom-right", phase="decode", page_size=page)
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 4, 1, 16, generator=g).half()
    named, cfg, _ = interpret.count_flash_attention_paged(q, spec, lens, g)
    want: dict[str, tuple[int, int]] = {}
    for n in lens:  # each sequence alone (B = 1), on the tiles that ran
        for name, (rd, wr) in _model(spec.with_(batch=1, seqlen_k=n), cfg.tiling()).items():
            a, b = want.get(name, (0, 0))
            want[name] = (a + rd, b + wr)
    got = _counted(named)
    assert got == {k: v for k, v in want.items() if v != (0, 0)}
    # hand count: K rows loaded are 37 + 160 + 5 keys, 2 KV heads, d = 16, 2 B, one group of P = 2 heads per KV head
    assert got["K"] == ((37 + 160 + 5) * 2 * 16 * 2, 0)
    # one int32 table entry per 16-key block: ceil(37/16) + 10 + 1 = 14 blocks per KV head
    assert got["BLOCK_TABLE"] == (14 * 2 * 4, 0)


def test_model_hand_count():
    """B = 2, H = 4, H_kv = 2, d = 16 fp16, N_q = 1, N_k = 100, page 32, one split, P = 2."""
    spec = LayerSpec(batch=2, heads=4, kv_heads=2, head_dim=16, seqlen_q=1, seqlen_k=100, dtype="fp16",
                     causal=True, causal_align="bottom-right", phase="decode", page_size=32)
    from iomodel.spec import Tiling

    m = _model(spec, Tiling(block_m=16, block_n=16, num_splits=1, heads_per_program=2))
    assert m["K"] == (2 * 2 * 100 * 16 * 2, 0)  # B · H_kv · N_k · d · s: the last page read up to key 100
    assert m["BLOCK_TABLE"] == (2 * 2 * 7 * 4, 0)  # 7 blocks of 16 keys per (b, KV head)
    assert m["CACHE_SEQLENS"] == (2 * 2 * 4, 0)  # one per program: 1 split x B x H/P


def test_plan_is_cached_and_table_values_are_per_call():
    q, kc, vc, table, lens = _inputs(2, 2, 1, 16, 1, 16, [20, 33], max_pages=4)
    fa._PLANS.clear()
    o1, _ = fa.flash_attention(q, kc, vc, block_table=table, cache_seqlens=lens)
    assert len(fa._PLANS) == 1
    lens2 = torch.tensor([50, 3], dtype=torch.int32)
    o2, _ = fa.flash_attention(q, kc, vc, block_table=table.flip(0).contiguous(), cache_seqlens=lens2, check=False)
    assert len(fa._PLANS) == 1  # same shapes: the same plan, new table contents
    ro, _ = reference_attention_paged(q, kc, vc, table.flip(0).contiguous(), lens2)
    assert torch.allclose(o2.double(), ro, atol=1e-5)
    assert not torch.allclose(o1, o2)


@pytest.mark.parametrize("change,message", [
    (lambda a: a.update(table=a["table"].clone().index_fill_(1, torch.tensor([0]), 99)), "block_table[0, 0] = 99"),
    (lambda a: a.update(table=a["table"].clone().fill_(-1)), "= -1 is not a page"),
    (lambda a: a.update(lens=torch.tensor([65, 3], dtype=torch.int32)), "cache_seqlens[0] = 65 is outside 0..64"),
    (lambda a: a.update(lens=torch.tensor([5, -1], dtype=torch.int32)), "cache_seqlens[1] = -1"),
    (lambda a: a.update(table=a["table"].long()), "block_table must be int32"),
    (lambda a: a.update(lens=a["lens"].long()), "cache_seqlens must be int32"),
    (lambda a: a.update(kc=a["kc"][:, :8].contiguous(), vc=a["vc"][:, :8].contiguous()), "page_size must be one of"),
    (lambda a: a.update(kc=torch.zeros(8, 16, 3, 16), vc=torch.zeros(8, 16, 3, 16)), "multiple of the cache's"),
    (lambda a: a.update(kc=torch.zeros(8, 16, 1, 32), vc=torch.zeros(8, 16, 1, 32)), "HEAD_DIM 16 but k_cache"),
    (lambda a: a.update(q=torch.zeros(2, 2, 17, 16)), "1 to 16 query rows"),
    (lambda a: a.update(lens=torch.tensor([3], dtype=torch.int32)), "must have q's batch 2 rows"),
    (lambda a: a.update(window=(4, 0)), "no sliding window"),
    (lambda a: a.update(lens=None), "needs both block_table and cache_seqlens"),
])
def test_bad_paged_input_is_one_clear_line(change, message):
    q, kc, vc, table, lens = _inputs(2, 2, 1, 16, 1, 16, [20, 33], max_pages=4)
    args = dict(q=q, kc=kc, vc=vc, table=table, lens=lens, window=None)
    change(args)
    with pytest.raises(IomodelError, match=message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")) as e:
        fa.flash_attention(args["q"], args["kc"], args["vc"], causal=True, causal_align="bottom-right",
                           block_table=args["table"], cache_seqlens=args["lens"], window=args["window"])
    assert "\n" not in str(e.value)


def test_unused_table_entries_are_not_checked():
    q, kc, vc, table, lens = _inputs(2, 2, 1, 16, 1, 16, [20, 16], max_pages=4)
    table = table.clone()
    table[0, 2:] = -7  # sequence 0 uses pages 0 and 1 only
    table[1, 1:] = 10_000  # sequence 1 uses page 0 only
    o, _ = fa.flash_attention(q, kc, vc, block_table=table, cache_seqlens=lens)
    ro, _ = reference_attention_paged(q, kc, vc, table, lens)
    assert torch.allclose(o.double(), ro, atol=1e-5)


def test_paged_requires_no_grad():
    q, kc, vc, table, lens = _inputs(2, 2, 1, 16, 1, 16, [20, 33], max_pages=4)
    with pytest.raises(IomodelError, match="no backward"):
        fa.flash_attention(q.requires_grad_(), kc, vc, block_table=table, cache_seqlens=lens)


def test_layer_spec_page_size():
    spec = LayerSpec(batch=2, heads=4, kv_heads=2, head_dim=16, seqlen_q=1, seqlen_k=100, phase="decode",
                     page_size=32)
    assert spec.max_pages == 4 and spec.to_dict()["page_size"] == 32
    assert "page_size" not in spec.with_(page_size=None).to_dict()
    with pytest.raises(IomodelError, match="page_size must be one of"):
        spec.with_(page_size=24)
    with pytest.raises(IomodelError, match="decode only"):
        spec.with_(phase="prefill")


def test_dense_and_paged_models_do_not_share_a_cached_structure():
    from iomodel.spec import Tiling

    dense = LayerSpec(batch=1, heads=2, kv_heads=1, head_dim=16, seqlen_q=1, seqlen_k=40, dtype="fp16", phase="decode")
    tiles = Tiling(block_m=16, block_n=16, num_splits=2, heads_per_program=2)
    for spec in (dense.with_(page_size=16), dense, dense.with_(page_size=32)):
        rows = _model(spec, tiles)
        assert ("BLOCK_TABLE" in rows) == (spec.page_size is not None)
    assert _model(dense.with_(page_size=16), tiles)["CACHE_SEQLENS"] == (2 * 1 * 1 * 4, 0)  # splits x B x H/P
