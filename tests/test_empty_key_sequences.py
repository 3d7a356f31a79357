"""A sequence that uses no key (an empty cache slot in serving) is accepted the same way everywhere.

The paged decode accepted ``cache_seqlens[b] = 0`` (o = 0, lse = −inf) while the varlen kernel
refused ``seqused_k[b] = 0``. Both now accept it with the convention of every row that sees no
key: o = 0 and lse = −inf (``kernels/flash_attention.py`` ``_finish_rows``). The ragged traffic
model represents such a sequence (``RaggedSpec`` with N_k = 0, ``--seqlens q:0``): its programs
load Q, store O and LSE, and move no K or V; interpreter counts equal the model per tensor.
"""

from __future__ import annotations

import pytest

from iomodel import LayerSpec, get_hardware
from iomodel.errors import IomodelError
from iomodel.spec.layer import Tiling
from iomodel.spec.ragged import RaggedSpec
from iomodel.traffic.ragged import predict_ragged

H200 = get_hardware("H200")


# ---- the model: plain data, no kernel ----


def test_ragged_spec_takes_a_sequence_without_keys():
    layer = LayerSpec(1, 4, 2, 16, 1, 1, "fp32", causal=True)
    rs = RaggedSpec(layer, ((40, 40), (17, 0), (5, 33)))
    assert rs.keyless() == [1] and rs.max_seqlen_k == 40 and rs.padded().seqlen_k == 40
    with pytest.raises(IomodelError, match=r"a sequence with no key \(N_q 17, N_k 0\) has no batch-1 layer"):
        rs.sequences()
    with pytest.raises(IomodelError, match="every sequence needs an int >= 1 of query rows and an int >= 0 of keys"):
        RaggedSpec(layer, ((0, 5), (3, 3)))
    with pytest.raises(IomodelError, match="every sequence needs an int >= 1 of query rows"):
        RaggedSpec(layer, ((3, -1),))
    with pytest.raises(IomodelError, match="every sequence of the ragged batch uses 0 keys .*give at least one"):
        RaggedSpec(layer, ((3, 0), (5, 0)))


@pytest.mark.parametrize("causal, align, window", [(False, "top-left", None), (True, "top-left", None),
                                                   (True, "bottom-right", None), (True, "bottom-right", (8, None))])
def test_model_of_a_sequence_without_keys_by_hand(causal, align, window):
    """H = 4, d = 16, fp32: a sequence of 17 query rows and no key moves Q (17·4·16·4 B read),
    O (the same, written) and LSE (17·4·4 B written), no K or V, no FLOPs; its compulsory bytes
    are its O; the batch's other sequence is the dense model's batch-1 layer."""
    layer = LayerSpec(1, 4, 2, 16, 1, 1, "fp32", causal=causal, causal_align=align,
                      window_left=None if window is None else window[0],
                      window_right=None if window is None else window[1])
    tiling = Tiling(32, 16)
    both = predict_ragged(RaggedSpec(layer, ((40, 40), (17, 0))), tiling, H200, seqused=True)
    alone = predict_ragged(RaggedSpec(layer, ((40, 40),)), tiling, H200, seqused=True)
    rows = 17 * 4 * 16 * 4
    for level in ("HBM", "SRAM_fill"):
        got = {t: (both.tensors[(level, t)][0] - alone.tensors[(level, t)][0],
                   both.tensors[(level, t)][1] - alone.tensors[(level, t)][1]) for t in ("Q", "K", "V", "O", "LSE")}
        assert got == {"Q": (rows, 0), "K": (0, 0), "V": (0, 0), "O": (0, rows), "LSE": (0, 17 * 4 * 4)}, level
    assert both.flops == alone.flops
    assert both.compulsory_bytes - alone.compulsory_bytes == rows  # O written once, nothing read
    kind = next(k for k in both.kinds if k["seqlen_k"] == 0)
    assert kind == {"seqlen_q": 17, "seqlen_k": 0, "count": 1, "hbm_bytes": 2 * rows + 17 * 16,
                    "sram_fill_bytes": 2 * rows + 17 * 16}


def test_l2_estimate_says_why_it_is_not_made():
    from iomodel.cache.estimate import ragged_not_estimated

    rs = RaggedSpec(LayerSpec(1, 4, 2, 16, 1, 1, "fp32"), ((40, 40), (17, 0), (9, 0)))
    assert ragged_not_estimated(rs, Tiling(32, 16)) == (
        "sequence 1 (N_q 17, N_k 0) uses no key, and the simulation runs batch-1 layers with keys (2 of the 3 "
        "sequences use none; the no-reuse rows count them)")


def test_worksheet_of_a_batch_with_an_empty_slot(capsys):
    """``--seqlens 40,17:0``: the launch passes seqused_k (its reads and its compulsory read are
    counted), the L2 estimate is not computed and says why; every sequence empty is one line."""
    import json

    from iomodel.cli import main

    args = ["worksheet", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--dtype", "fp16", "--format", "json"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--seqlens", "40,17:0"])
    assert exc.value.code in (0, None)
    d = json.loads(capsys.readouterr().out)
    assert d["seqlens"] == [[40, 40], [17, 0]]
    tensors = {(t["level"], t["tensor"]): (t["read_bytes"], t["write_bytes"]) for t in d["tiled"]["tensors"]}
    assert tensors[("HBM", "seqused_k")] == (1 * 2 * 4 * 4, 0)  # one query tile x B = 2 x H = 4 programs, int32
    assert d["compulsory"]["sequence_table"] == 2 * 3 * 4 + 2 * 4  # cu_seqlens_q, _k (B + 1 each), seqused_k (B)
    assert "sequence 1 (N_q 17, N_k 0) uses no key" in d["l2_aware_not_computed"]
    with pytest.raises(SystemExit) as exc:
        main([*args, "--seqlens", "17:0,5:0"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "every sequence uses 0 keys" in err and err.strip().count("\n") == 0


# ---- the kernels, in Triton's interpreter ----

torch = pytest.importorskip("torch")
fa = pytest.importorskip("kernels.flash_attention")
interpret = pytest.importorskip("iomodel.measure.interpret")
from kernels.reference import random_paged_cache, reference_attention_varlen  # noqa: E402

interp = pytest.mark.skipif(not fa.INTERPRET, reason="runs the kernel in Triton's interpreter (TRITON_INTERPRET=1)")
_NUMPY_WARNING = "ignore:Conversion of an array with ndim:DeprecationWarning"


@interp
@pytest.mark.interpreter
@pytest.mark.filterwarnings(_NUMPY_WARNING)
@pytest.mark.parametrize("lq, lk, used, causal, align, window", [
    ([37, 20, 70], [53, 20, 70], [0, 20, 61], False, "top-left", None),
    ([37, 20], [53, 20], [0, 20], True, "top-left", None),
    ([37, 5, 33], [53, 20, 33], [40, 0, 33], True, "bottom-right", None),
    ([40, 40], [80, 60], [0, 60], True, "bottom-right", (8, None)),  # causal local window
    ([45, 30], [45, 31], [45, 0], False, "top-left", (5, 7)),  # two-sided band
])
def test_varlen_seqused_zero_gives_zero_output_and_the_model_bytes(lq, lk, used, causal, align, window):
    """seqused_k[b] = 0: that sequence's o is exactly 0 and its lse -inf (the reference agrees),
    the others equal the fp64 reference, and the interpreter's counts equal predict_ragged per tensor."""
    H, H_kv, d = 4, 2, 16
    spec = RaggedSpec(LayerSpec(1, H, H_kv, d, 1, 1, "fp32", causal=causal, causal_align=align,
                                window_left=None if window is None else window[0],
                                window_right=None if window is None else window[1]),
                      tuple(zip(lq, used)))
    counts, cfg, _ = interpret.count_flash_attention_varlen(spec, seed=3, seqused_k=lk)
    # the same call again, for its outputs (the count helper returns only the traffic)
    g = torch.Generator().manual_seed(3)
    q = torch.randn(sum(lq), H, d, generator=g)  # (total_q, H, d)
    k = torch.randn(sum(lk), H_kv, d, generator=g)  # (total_k, H_kv, d)
    v = torch.randn(sum(lk), H_kv, d, generator=g)
    cq = torch.tensor([0, *torch.tensor(lq).cumsum(0).tolist()], dtype=torch.int32)
    ck = torch.tensor([0, *torch.tensor(lk).cumsum(0).tolist()], dtype=torch.int32)
    su = torch.tensor(used, dtype=torch.int32)
    o, lse = fa.flash_attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal, causal_align=align,
                                       window=window, seqused_k=su)
    ro, rl = reference_attention_varlen(q, k, v, cq, ck, causal, align, window=window, seqused_k=su)
    for b, u in enumerate(used):
        rows = slice(int(cq[b]), int(cq[b + 1]))
        if u == 0:
            assert torch.all(o[rows] == 0) and torch.all(lse[:, rows] == float("-inf"))
            assert torch.all(ro[rows] == 0) and torch.all(rl[:, rows] == float("-inf"))
    torch.testing.assert_close(o.double(), ro, atol=2e-5, rtol=1e-5)
    assert torch.equal(torch.isinf(lse), torch.isinf(rl))
    got = {n: (t.read_bytes, t.write_bytes) for n, t in counts.items() if t.read_bytes or t.write_bytes}
    want = {t: rw for t, rw in predict_ragged(spec, cfg.tiling(), H200, seqused=True).by_tensor().items()
            if rw != (0, 0)}
    assert got == want


@interp
@pytest.mark.interpreter
@pytest.mark.filterwarnings(_NUMPY_WARNING)
def test_seqused_zero_and_cache_seqlens_zero_agree():
    """The same two sequences (one empty slot, one of 40 keys, 2 query rows each, causal
    bottom-right) through the paged decode (cache_seqlens = [0, 40]) and the varlen prefill
    (seqused_k = [0, 40]): the empty slot gives o = 0 and lse = -inf in both, the other sequence
    the same attention."""
    B, H, H_kv, d, N_q, page = 2, 4, 2, 16, 2, 16
    g = torch.Generator().manual_seed(5)
    q = torch.randn(B, H, N_q, d, generator=g)  # (B, H, N_q, d)
    kc, vc, table, lens = random_paged_cache(B, H_kv, d, page, [0, 40], torch.float32, g, max_pages=3)
    o_p, lse_p = fa.flash_attention(q, kc, vc, causal=True, causal_align="bottom-right", block_table=table,
                                    cache_seqlens=lens)
    # the varlen layout of the same data: each sequence stores its 3 pages (48 keys), uses lens[b]
    k = torch.cat([kc[table[b].long()].reshape(-1, H_kv, d) for b in range(B)])  # (B·48, H_kv, d)
    v = torch.cat([vc[table[b].long()].reshape(-1, H_kv, d) for b in range(B)])
    cq = torch.tensor([0, N_q, 2 * N_q], dtype=torch.int32)
    ck = torch.tensor([0, 48, 96], dtype=torch.int32)
    o_v, lse_v = fa.flash_attention_varlen(q.permute(0, 2, 1, 3).reshape(B * N_q, H, d), k, v, cq, ck, N_q, 48,
                                           causal=True, causal_align="bottom-right", seqused_k=lens)
    o_v = o_v.reshape(B, N_q, H, d).permute(0, 2, 1, 3)  # (B, H, N_q, d)
    lse_v = lse_v.reshape(H, B, N_q).permute(1, 0, 2)  # (B, H, N_q)
    for o, lse in ((o_p, lse_p), (o_v, lse_v)):
        assert torch.all(o[0] == 0) and torch.all(lse[0] == float("-inf"))
    torch.testing.assert_close(o_v[1], o_p[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lse_v[1], lse_p[1], atol=1e-5, rtol=1e-5)
