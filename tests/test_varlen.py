"""Ragged (varlen) batches (issue 13, item 1 and its parts of items 4 and 5).

* ``flash_attention_varlen`` against the fp64 varlen reference (per-sequence alignment, GQA,
  windows, key padding through ``seqused_k``, fp16/bf16);
* interpreter-counted bytes equal the ragged model (``iomodel.traffic.ragged``) per tensor on
  10 ragged batches, sequence table included; hand-computed bytes for one batch;
* bad input: one clear line each, nothing launched; the launch plan is cached and the hot path
  (``check=False``) reads no device value on the host.
"""

from __future__ import annotations

import json

import pytest

from iomodel import LayerSpec, get_hardware
from iomodel.errors import IomodelError
from iomodel.spec.layer import Tiling
from iomodel.spec.ragged import RaggedSpec, parse_seqlens, read_seqlens_file
from iomodel.traffic.ragged import predict_ragged, sequence_table_reads

torch, fa, interpret = (pytest.importorskip(m) for m in ("torch", "kernels.flash_attention",
                                                          "iomodel.measure.interpret"))
from kernels.reference import reference_attention, reference_attention_varlen  # noqa: E402

#: Tests that run the kernel on CPU tensors (Triton's interpreter); on a GPU machine the kernel
#: refuses CPU tensors first (benchmarks check varlen on the GPU against the fp64 reference).
interp = pytest.mark.skipif(not fa.INTERPRET, reason="runs the kernel in Triton's interpreter (TRITON_INTERPRET=1)")

H200 = get_hardware("H200")
interp = pytest.mark.skipif(not fa.INTERPRET, reason="needs TRITON_INTERPRET=1")
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")


def _cu(lens):
    out = [0]
    for n in lens:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def _packed(lq, lk, H, H_kv, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sum(lq), H, d, generator=g).to(dtype)  # (total_q, H, d)
    k = torch.randn(sum(lk), H_kv, d, generator=g).to(dtype)  # (total_k, H_kv, d)
    v = torch.randn(sum(lk), H_kv, d, generator=g).to(dtype)
    return q, k, v, _cu(lq), _cu(lk)


def _assert_matches(o, lse, ro, rl, atol, rtol):
    assert o.shape == ro.shape and lse.shape == rl.shape and lse.dtype == torch.float32
    torch.testing.assert_close(o.double(), ro, atol=atol, rtol=rtol)
    empty = torch.isinf(rl)
    assert torch.equal(torch.isinf(lse), empty)
    torch.testing.assert_close(lse[~empty].double(), rl[~empty], atol=atol, rtol=rtol)


CASES = [  # lens_q, lens_k, H, H_kv, d, causal, align, window, seqused
    ([37, 5, 70], [53, 20, 70], 4, 2, 16, False, "top-left", None, None),
    ([37, 5, 70], [53, 20, 70], 4, 2, 16, True, "top-left", None, None),
    ([37, 5, 70], [53, 20, 70], 4, 2, 16, True, "bottom-right", None, None),  # sequence 1: offset 15
    ([70, 33], [20, 33], 2, 2, 16, True, "bottom-right", None, None),  # 50 rows of seq 0 see no key
    ([64, 17, 1], [64, 90, 40], 2, 1, 24, False, "top-left", None, None),  # MQA, padded HEAD_DIM, N_q = 1
    ([40, 40], [80, 60], 2, 2, 16, True, "bottom-right", (8, None), None),  # causal local window
    ([45, 30], [45, 31], 2, 2, 16, False, "top-left", (5, 7), None),  # two-sided band
    ([37, 5, 70], [53, 20, 70], 4, 2, 16, True, "bottom-right", None, [50, 3, 61]),  # key padding
    ([33, 96], [100, 96], 2, 1, 16, False, "bottom-right", None, [1, 96]),  # one key used
    ([128], [77], 2, 2, 16, True, "top-left", None, None),  # one sequence
]


@interp
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[5]}-{c[6]}-{c[7]}-{c[8]}")
def test_varlen_outputs_equal_reference_and_counts_equal_model(case):
    lq, lk, H, H_kv, d, causal, align, window, used = case
    q, k, v, cq, ck = _packed(lq, lk, H, H_kv, d)
    su = None if used is None else torch.tensor(used, dtype=torch.int32)
    with interpret.TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention_varlen(q, k, v, cq, ck, max(lq), max(lk), causal=causal, causal_align=align,
                                                window=window, seqused_k=su, return_config=True)
    ro, rl = reference_attention_varlen(q, k, v, cq, ck, causal, align, window=window, seqused_k=su)
    _assert_matches(o, lse, ro, rl, atol=2e-5, rtol=1e-5)
    named = {"Q": q, "K": k, "V": v, "O": o, "LSE": lse, "cu_seqlens_q": cq, "cu_seqlens_k": ck}
    if su is not None:
        named["seqused_k"] = su
    got = {n: (t.read_bytes, t.write_bytes) for n, t in counter.by_tensor(named).items()
           if t.read_bytes or t.write_bytes}
    layer = LayerSpec(1, H, H_kv, d, 1, 1, "fp32", causal=causal, causal_align=align,
                      window_left=None if window is None else window[0],
                      window_right=None if window is None else window[1])
    spec = RaggedSpec(layer, tuple(zip(lq, used if used is not None else lk)))
    want = {t: rw for t, rw in predict_ragged(spec, cfg.tiling(), H200, seqused=su is not None).by_tensor().items()
            if rw != (0, 0)}
    assert got == want


@interp
def test_count_helper_and_hand_computed_bytes():
    # 2 sequences (N_q, N_k) = (40, 40), (10, 25); H = H_kv = 1, d = 16, fp32, non-causal, tiles 32 x 16
    layer = LayerSpec(1, 1, 1, 16, 1, 1, "fp32")
    spec = RaggedSpec(layer, ((40, 40), (10, 25)))
    got, cfg, _ = interpret.count_flash_attention_varlen(spec)
    assert (cfg.block_m, cfg.block_n) == (32, 16)
    row = 16 * 4  # bytes per token row of one head
    # Q, O once; K, V once per query tile: seq 0 has 2 tiles x 40 keys, seq 1 1 tile x 25 keys
    assert (got["Q"].read_bytes, got["O"].write_bytes) == (50 * row, 50 * row)
    assert got["K"].read_bytes == got["V"].read_bytes == (2 * 40 + 1 * 25) * row == 6720
    assert got["LSE"].write_bytes == 50 * 4
    # grid: cdiv(40, 32) = 2 tiles x B=2 x H=1 = 4 programs, each 2 int32 of each cu_seqlens
    assert got["cu_seqlens_q"].read_bytes == got["cu_seqlens_k"].read_bytes == 4 * 2 * 4 == 32
    assert sequence_table_reads(spec, Tiling(32, 16), seqused=True) == {"cu_seqlens_q": 32, "cu_seqlens_k": 32,
                                                                         "seqused_k": 16}
    pred = predict_ragged(spec, Tiling(32, 16), H200)
    assert pred.by_tensor()["K"] == (6720, 0)
    assert [(k["seqlen_q"], k["seqlen_k"], k["count"]) for k in pred.kinds] == [(40, 40, 1), (10, 25, 1)]
    # the eager baseline runs the padded batch: B = 2 sequences of (40, 40)
    assert spec.padded() == layer.with_(batch=2, seqlen_q=40, seqlen_k=40)


@interp
@pytest.mark.parametrize("dtype,atol", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_varlen_half_precision_matches_dense_kernel(dtype, atol):
    # each sequence equals the dense kernel on that sequence alone (same tiles, same rounding)
    lq, lk = [37, 70], [53, 70]
    q, k, v, cq, ck = _packed(lq, lk, 2, 1, 16, dtype)
    o, lse = fa.flash_attention_varlen(q, k, v, cq, ck, 70, 70, causal=True, causal_align="bottom-right")
    ro, _ = reference_attention_varlen(q, k, v, cq, ck, True, "bottom-right")
    for b in range(2):
        qs, ks = slice(int(cq[b]), int(cq[b + 1])), slice(int(ck[b]), int(ck[b + 1]))
        od, ld = fa.flash_attention(q[qs].transpose(0, 1)[None], k[ks].transpose(0, 1)[None],
                                    v[ks].transpose(0, 1)[None], causal=True, causal_align="bottom-right")
        torch.testing.assert_close(o[qs], od[0].transpose(0, 1), atol=0, rtol=0)
        torch.testing.assert_close(lse[:, qs], ld[0], atol=0, rtol=0)
    torch.testing.assert_close(o.double(), ro, atol=atol, rtol=0)


def _good():
    return _packed([5, 7], [6, 9], 2, 1, 16)


@interp
@pytest.mark.parametrize("change,needle", [
    (dict(cu_seqlens_q=torch.tensor([0, 5, 12], dtype=torch.int64)), "cu_seqlens_q must be int32"),
    (dict(cu_seqlens_k=torch.tensor([0, 15], dtype=torch.int32)), "cu_seqlens_k must have shape (3,)"),
    (dict(cu_seqlens_q=torch.tensor([1, 5, 12], dtype=torch.int32)), "cu_seqlens_q[0] must be 0"),
    (dict(cu_seqlens_q=torch.tensor([0, 8, 12], dtype=torch.int32), max_seqlen_q=8), None),  # valid
    (dict(cu_seqlens_k=torch.tensor([0, 9, 6], dtype=torch.int32)), "cu_seqlens_k must be strictly increasing"),
    (dict(cu_seqlens_k=torch.tensor([0, 6, 6], dtype=torch.int32)), "entries 1 and 2 are 6, 6"),
    (dict(cu_seqlens_q=torch.tensor([0, 5, 11], dtype=torch.int32)), "cu_seqlens_q[-1] is 11 but q packs 12"),
    (dict(max_seqlen_k=8), "max_seqlen_k is 8 but sequence 1 has 9 tokens"),
    (dict(max_seqlen_q=0), "max_seqlen_q must be an int >= 1"),
    (dict(seqused_k=torch.tensor([6, 10], dtype=torch.int32)), "seqused_k[1] is 10 but sequence 1 has 9 keys"),
    (dict(seqused_k=torch.tensor([-1, 1], dtype=torch.int32)), "seqused_k[0] is -1 but sequence 0 has 6 keys: "
     "use 0..6"),
    (dict(seqused_k=torch.tensor([0, 1], dtype=torch.int32)), None),  # valid: sequence 0 uses no key
    (dict(seqused_k=torch.tensor([6], dtype=torch.int32)), "seqused_k must have shape (2,)"),
    (dict(seqused_k=torch.tensor([6, 9], dtype=torch.int64)), "seqused_k must be int32"),
    (dict(q=torch.zeros(2, 12, 2, 16)), "q must be a packed 3-D tensor"),
    (dict(window=(-2, 0)), "window left must be >= 0"),
])
def test_varlen_bad_input_is_one_clear_line(monkeypatch, change, needle):
    q, k, v, cq, ck = _good()
    args = dict(q=q, k=k, v=v, cu_seqlens_q=cq, cu_seqlens_k=ck, max_seqlen_q=7, max_seqlen_k=9)
    args.update(change)
    launched = []
    monkeypatch.setattr(fa._Plan, "launch", lambda self, *a: launched.append(a) or self.config)
    if needle is None:
        fa.flash_attention_varlen(**args)
        assert len(launched) == 1
        return
    with pytest.raises(IomodelError) as e:
        fa.flash_attention_varlen(**args)
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and ":" in msg
    assert not launched  # nothing computed on garbage
@interp
def test_varlen_refuses_requires_grad():
    q, k, v, cq, ck = _good()
    q.requires_grad_(True)
    with pytest.raises(IomodelError, match="no backward yet: call it under torch.no_grad"):
        fa.flash_attention_varlen(q, k, v, cq, ck, 7, 9)
    with torch.no_grad():
        fa.flash_attention_varlen(q, k, v, cq, ck, 7, 9)


@interp
def test_varlen_plan_cached_and_check_false_reads_nothing_on_host(monkeypatch):
    q, k, v, cq, ck = _good()
    o1, l1 = fa.flash_attention_varlen(q, k, v, cq, ck, 7, 9, causal=True)
    n = len(fa._PLANS)
    calls = []
    monkeypatch.setattr(fa, "_build_varlen_plan", lambda *a: calls.append(a))  # a rebuild would fail
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: calls.append("tolist"))
    monkeypatch.setattr(torch.Tensor, "item", lambda self: calls.append("item"))
    o2, l2 = fa.flash_attention_varlen(q, k, v, cq, ck, 7, 9, causal=True, check=False)
    assert not calls and len(fa._PLANS) == n
    monkeypatch.undo()
    torch.testing.assert_close(o1, o2, atol=0, rtol=0)
    torch.testing.assert_close(l1, l2, atol=0, rtol=0)


def test_seqlens_parsing_and_file_forms(tmp_path):
    assert parse_seqlens("512, 3000,77") == ((512, 512), (3000, 3000), (77, 77))
    (tmp_path / "a.txt").write_text("# lengths\n512\n77,4096\n\n")
    assert read_seqlens_file(tmp_path / "a.txt") == ((512, 512), (77, 4096))
    (tmp_path / "b.json").write_text(json.dumps([512, [77, 4096]]))
    assert read_seqlens_file(tmp_path / "b.json") == ((512, 512), (77, 4096))
    with pytest.raises(IomodelError, match="line 2: 'x' is not a length"):
        (tmp_path / "c.txt").write_text("5\nx\n")
        read_seqlens_file(tmp_path / "c.txt")
    with pytest.raises(IomodelError, match="every sequence needs an int >= 1 of query rows"):
        RaggedSpec(LayerSpec(1, 1, 1, 16, 1, 1), parse_seqlens("5,0"))
    h = RaggedSpec(LayerSpec(1, 1, 1, 16, 1, 1), parse_seqlens("512,3000,77")).histogram()
    assert h["count"] == 3 and h["q"] == {"min": 77, "max": 3000, "mean": 3589 / 3, "total": 3589}


def test_reference_varlen_equals_dense_reference_per_sequence():
    q, k, v, cq, ck = _packed([5, 7], [6, 9], 2, 1, 16, torch.float64)
    o, lse = reference_attention_varlen(q, k, v, cq, ck, True, "bottom-right")
    ro, rl = reference_attention(q[5:].transpose(0, 1)[None], k[6:].transpose(0, 1)[None],
                                 v[6:].transpose(0, 1)[None], True, "bottom-right")
    torch.testing.assert_close(o[5:], ro[0].transpose(0, 1), atol=0, rtol=0)
    torch.testing.assert_close(lse[:, 5:], rl[0], atol=0, rtol=0)
