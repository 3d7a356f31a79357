"""The fused split-KV decode (issue 14): one launch whose last split program of each (b, KV head,
head group) merges the partials, against the fp64 reference, the two-launch design and the
traffic contract (Triton's interpreter runs programs one after another, so the merging program
is the one with the highest split index; on a GPU any of them may be, with the same result:
the merge reads the partials in split order)."""

from __future__ import annotations

import pytest
import torch

import kernels.flash_attention as fa
from iomodel.schedule.tiles import decode_block_m, decode_heads_per_program
from kernels.heuristics import KernelConfig
from kernels.reference import random_paged_cache, reference_attention, reference_attention_paged

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not fa.INTERPRET, reason="runs in Triton's interpreter (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

#: fp32 inputs (exact IEEE dots): the kernel's o and lse within this of the fp64 reference.
TOL = 2e-6


def _config(P, N_q, S, block_n=16, fused=True):
    return KernelConfig(decode_block_m(P, N_q), block_n, 4, 1, "decode-split-kv", num_splits=S, heads_per_program=P,
                        fused_combine=fused)


def _close(o, lse, ro, rl):
    """o, lse equal the fp64 reference within TOL; rows that see no key exactly o = 0, lse = −inf."""
    empty = torch.isinf(rl)
    assert torch.equal(torch.isinf(lse), empty) and (o[empty] == 0).all()
    assert (o.double() - ro).abs().max().item() <= TOL
    assert (lse.double() - rl).nan_to_num(posinf=0.0, neginf=0.0).abs().max().item() <= TOL


def _dense(B, H, H_kv, N_q, N_k, d=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, N_q, d, generator=g), torch.randn(B, H_kv, N_k, d, generator=g),
            torch.randn(B, H_kv, N_k, d, generator=g))


@pytest.mark.parametrize(
    "B,H,H_kv,N_q,N_k,causal,align,window,S,P",
    [
        (2, 8, 2, 1, 300, True, "bottom-right", None, 4, 4),  # GQA, one program group per KV head
        (1, 8, 2, 3, 100, True, "bottom-right", None, 3, 2),  # G/P = 2 groups per KV head, N_q = 3
        (1, 4, 1, 5, 40, False, "top-left", None, 4, 4),  # MQA, the 4th split is empty
        (1, 4, 2, 16, 64, True, "top-left", None, 2, 2),  # causal skips the whole second split
        (1, 4, 4, 2, 1000, False, "top-left", None, 24, 1),  # many splits (24), MHA
        (2, 4, 2, 1, 700, True, "bottom-right", (96, 0), 9, 2),  # window: most splits empty
        (1, 4, 2, 4, 30, True, "bottom-right", (5, None), 2, 2),  # window crossing the split edge
    ],
)
def test_fused_decode_matches_fp64_and_the_two_launch_design(B, H, H_kv, N_q, N_k, causal, align, window, S, P):
    q, k, v = _dense(B, H, H_kv, N_q, N_k)
    ro, rl = reference_attention(q.double(), k.double(), v.double(), causal, align, window=window)
    o, lse, cfg = fa.flash_attention(q, k, v, causal, align, return_config=True, config=_config(P, N_q, S),
                                     window=window)
    assert cfg.fused_combine and cfg.num_splits == S
    _close(o, lse, ro, rl)
    o2, lse2 = fa.flash_attention(q, k, v, causal, align, config=_config(P, N_q, S, fused=False), window=window)
    _close(o2, lse2, ro, rl)
    assert fa._WORKSPACES[None][1].count_nonzero().item() == 0  # every counter reset by its merger


@pytest.mark.parametrize(
    "B,H,H_kv,N_q,page,lens,causal,align,S",
    [
        (3, 8, 2, 1, 16, [37, 0, 200], True, "bottom-right", 5),  # ragged, one sequence without keys
        (2, 4, 1, 4, 32, [90, 7], True, "bottom-right", 8),  # most splits of sequence 1 empty
        (2, 4, 4, 2, 16, [64, 33], False, "top-left", 3),
    ],
)
def test_fused_paged_decode_with_ragged_cache_seqlens(B, H, H_kv, N_q, page, lens, causal, align, S):
    g = torch.Generator().manual_seed(4)
    q = torch.randn(B, H, N_q, 32, generator=g)
    kc, vc, table, seqlens = random_paged_cache(B, H_kv, 32, page, lens, torch.float32, g)
    ro, rl = reference_attention_paged(q.double(), kc.double(), vc.double(), table, seqlens, causal, align)
    P = decode_heads_per_program(H // H_kv, N_q)
    o, lse, cfg = fa.flash_attention(q, kc, vc, causal, align, return_config=True, config=_config(P, N_q, S),
                                     block_table=table, cache_seqlens=seqlens)
    assert cfg.fused_combine
    _close(o, lse, ro, rl)
    assert (o[1] == 0).all() if lens[1] == 0 else True  # a sequence without keys: o = 0


def test_fused_decode_is_bitwise_repeatable_and_writes_every_element(monkeypatch):
    """A fresh workspace of NaN partials (poisoned ``_alloc``): the merge reads only partials
    written in the same launch; the result is bitwise the same call after call (counters reset)."""
    monkeypatch.setattr(fa, "_WORKSPACES", {})
    monkeypatch.setattr(fa, "_PLANS", {})
    shapes = []
    monkeypatch.setattr(fa, "_alloc", lambda shape, dt, dev: shapes.append(shape) or torch.full(
        shape, float("nan"), dtype=dt, device=dev))
    monkeypatch.setattr(fa, "_alloc_like", lambda t: shapes.append(tuple(t.shape)) or torch.full_like(t, float("nan")))
    q, k, v = _dense(2, 8, 2, 2, 150, d=48, seed=7)
    cfg = _config(2, 2, 6)
    o1, l1 = fa.flash_attention(q, k, v, True, "bottom-right", config=cfg)
    # the poisoned partials: O_PART 2·8·6·2·48 and LSE_PART 2·8·6·2 fp32 in one buffer, after o and lse
    assert shapes == [(2, 8, 2, 48), (2, 8, 2), (2 * 8 * 6 * 2 * 49,)]
    assert not torch.isnan(o1).any() and not torch.isnan(l1).any()
    o2, l2 = fa.flash_attention(q, k, v, True, "bottom-right", config=cfg)
    assert torch.equal(o1, o2) and torch.equal(l1, l2)
    ro, rl = reference_attention(q.double(), k.double(), v.double(), True, "bottom-right")
    _close(o1, l1, ro, rl)


def test_workspace_grows_and_keeps_the_outgrown_buffers(monkeypatch):
    """A larger shape on the same stream replaces the shared buffers by larger ones and keeps the
    old ones alive (a captured CUDA graph may still point at them); plans carve views once."""
    monkeypatch.setattr(fa, "_WORKSPACES", {})
    monkeypatch.setattr(fa, "_RETIRED", [])
    monkeypatch.setattr(fa, "_PLANS", {})
    small, big = _dense(1, 4, 2, 1, 100), _dense(4, 8, 2, 1, 300)
    fa.flash_attention(*small, True, "bottom-right", config=_config(2, 1, 3))
    first = list(fa._WORKSPACES[None])
    # O_PART 1·4·3·1·32 = 384 and LSE_PART 12 fp32: 396 rounded up to 448 (a multiple of 64); 2 counters in 64
    assert first[0].numel() == 448 and first[1].numel() == 64
    fa.flash_attention(*big, True, "bottom-right", config=_config(4, 1, 5))
    now = fa._WORKSPACES[None]
    n_part = 4 * 8 * 5 * 32 + 4 * 8 * 5  # O_PART (rounded to 4) + LSE_PART, fp32 elements
    assert now[0].numel() == n_part and now[1] is first[1]  # 8 counters fit in the first 64
    assert fa._RETIRED == [first[0]]


def test_records_before_the_fused_decode_keep_the_two_launch_model():
    """A measured config without ``fused_combine`` (every receipt before issue 14) ran the combine
    kernel: its Tiling and expected kernel count say so; the new configs say one launch."""
    from iomodel import LayerSpec
    from iomodel.measure.records import ShapeMeasurement, expected_kernels

    spec = LayerSpec(1, 32, 8, 128, 1, 8192, "bf16", phase="decode")
    old = dict(block_m=16, block_n=64, num_warps=4, num_stages=3, path="decode-split-kv", num_splits=32,
               heads_per_program=4)
    new = {**old, "fused_combine": True}
    assert expected_kernels("tiled", spec, old) == 2 and expected_kernels("tiled", spec, new) == 1
    assert ShapeMeasurement(id="a", impl="tiled", spec=spec, config=old).tiling().fused_combine is False
    assert ShapeMeasurement(id="b", impl="tiled", spec=spec, config=new).tiling().fused_combine is True
    assert KernelConfig(**new).tiling().fused_combine is True


def test_model_cache_tells_the_fused_merge_from_the_combine_kernel():
    """The compiled-model cache keys on the merge design: a two-launch model built first is not
    reused for the fused tiles (which add SEM: 2 atomics of 4 B read and written, one 4 B reset)."""
    from iomodel import LayerSpec, get_hardware
    from iomodel.spec import Tiling
    from iomodel.traffic import predict

    spec = LayerSpec(1, 2, 1, 16, 1, 1, "fp16", phase="decode")
    hw = get_hardware("H200")
    two = predict(spec, Tiling(16, 16, 1, num_splits=2, heads_per_program=2, fused_combine=False), hw)
    one = predict(spec, Tiling(16, 16, 1, num_splits=2, heads_per_program=2), hw)
    a, b = two.algorithms["tiled"], one.algorithms["tiled"]
    assert (b.sram_fill_read_bytes - a.sram_fill_read_bytes, b.sram_fill_write_bytes - a.sram_fill_write_bytes) == (
        2 * 4, 3 * 4)


def test_decode_config_fuses_the_merge_up_to_32k_cached_tokens_or_8_splits():
    """kernels.heuristics: fused while K holds at most FUSED_COMBINE_MAX_K_ELEMENTS (2^25; H_kv = 8,
    d = 128: B·N_k <= 32,768 tokens, receipts/host-overhead-h200-2026-12-01-c.json) or the grid has
    at most FUSED_COMBINE_MAX_SPLITS = 8 splits (receipts/decode-tune-h200-2026-12-01.json); the
    separate combine kernel beyond both. Splits by hand (132 SMs x 2 programs, 8 per split at B = 1):
    B 1: 16 at 8k, 32 at 32k and 64k, 33 at 32k + 1 (the fused design then cut to
    FUSED_MAX_SPLITS = 16: at 32k, 16); B 2: 16; B 4: 8; B 16: 2."""
    from kernels.heuristics import FUSED_COMBINE_MAX_K_ELEMENTS, FUSED_COMBINE_MAX_SPLITS, decode_config

    assert (FUSED_COMBINE_MAX_K_ELEMENTS, FUSED_COMBINE_MAX_SPLITS) == (32768 * 8 * 128, 8)
    cfg = {(b, n): decode_config(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=n, head_dim=128,
                                 num_sms=132, dtype="bf16", smem_per_sm=228 * 1024)
           for b, n in ((1, 8192), (1, 32768), (2, 16384), (4, 8192), (1, 32769), (1, 65536), (4, 16384),
                        (2, 65536), (16, 4096))}
    assert {key: (c.num_splits, c.fused_combine) for key, c in cfg.items()} == {
        (1, 8192): (16, True), (1, 32768): (16, True), (2, 16384): (16, True), (4, 8192): (8, True),
        (1, 32769): (33, False), (1, 65536): (32, False), (4, 16384): (8, True), (2, 65536): (16, False),
        (16, 4096): (2, True)}


def test_fused_split_cut_applies_only_where_it_was_measured():
    """The cut to FUSED_MAX_SPLITS = 16 (dense cache, HEAD_DIM 128, a rule count of 17..33, K of at
    most 2^25 elements). By hand, 132 SMs x 2 programs, 8 programs per split at H 32 / H_kv 8:
    B 1 at 16k keys: the rule's 32 (264 // 8, 256 blocks // 8) is cut to 16; at 8,704 keys its 17
    is cut, at 8,640 its 15 stands; 3 x 28/4 at 20,000 keys: 21 -> 16. Outside: HEAD_DIM 64 at 32k
    keys keeps 64, H_kv 2 at 128k keys keeps 128, a paged cache keeps its count (256-token pages:
    BLOCK_N 64, 32; 16-token pages: BLOCK_N 16, 128)."""
    from kernels.heuristics import FUSED_CUT_HEAD_DIM, FUSED_CUT_MAX_RULE_SPLITS, FUSED_MAX_SPLITS, decode_config

    def cfg(b, h, hk, n, d=128, page=None):
        c = decode_config(batch=b, heads=h, kv_heads=hk, seqlen_q=1, seqlen_k=n, head_dim=d, num_sms=132,
                          dtype="bf16", smem_per_sm=228 * 1024, page_size=page)
        return c.block_n, c.num_splits, c.fused_combine

    assert (FUSED_MAX_SPLITS, FUSED_CUT_HEAD_DIM, FUSED_CUT_MAX_RULE_SPLITS) == (16, 128, 33)
    assert cfg(1, 32, 8, 16384) == (64, 16, True)
    assert cfg(1, 32, 8, 8704) == (64, 16, True)
    assert cfg(1, 32, 8, 8640) == (64, 15, True)
    assert cfg(3, 28, 4, 20000) == (64, 16, True)
    assert cfg(1, 32, 8, 32768, d=64) == (64, 64, True)
    assert cfg(1, 32, 2, 131072) == (64, 128, True)
    assert cfg(1, 32, 8, 16384, page=256) == (64, 32, True)
    assert cfg(1, 32, 8, 16384, page=16) == (16, 128, True)
