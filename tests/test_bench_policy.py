"""Tolerance arithmetic on hand-made tensors, the float64 reference, and SDPA telemetry."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

from iomodel.bench.inputs import AttentionInputs, make_inputs, reference_output, visible_keys  # noqa: E402
from iomodel.bench.matrix import Bucket, Shape  # noqa: E402
from iomodel.bench.policy import (  # noqa: E402
    Tolerance, accuracy_verdict, drift_limits, error_stats, load_policy,
)
from iomodel.errors import IomodelError  # noqa: E402
from iomodel.bench.telemetry import group_reasons, identify_backend, probe_call, profile_call  # noqa: E402

TOL = Tolerance("bf16", atol=0.01, rtol=0.1, k=2.0, eps=0.001)


def _hand():
    # ref (B=1, H=2, N_q=3, d=2); out differs by known amounts
    ref = torch.zeros(1, 2, 3, 2, dtype=torch.float64)
    ref[0, 1, 2] = torch.tensor([1.0, -2.0])
    out = ref.clone()
    out[0, 0, 0, 0] += 0.005  # within atol
    out[0, 0, 1, 1] += 0.02  # above atol 0.01 (|ref| = 0)
    out[0, 1, 2, 1] += 0.15  # |ref| = 2: limit 0.01 + 0.2 = 0.21: within
    return ref, out


def test_error_stats_hand_made():
    ref, out = _hand()
    st = error_stats(out, ref, TOL)
    assert st["elements"] == 12
    assert st["max_abs"] == pytest.approx(0.15)
    # nearest-rank p99 of 12 values = the 12th smallest = the max
    assert st["p99_abs"] == pytest.approx(0.15)
    assert st["mean_abs"] == pytest.approx((0.005 + 0.02 + 0.15) / 12)
    assert st["max_rel"] == pytest.approx(0.15 / 2.0)
    assert st["allclose_violations"] == 1 and st["nonfinite"] == 0
    rows = st["pathological_rows"]
    assert rows["count"] == 1 and rows["rows"] == [{"batch": 0, "head": 0, "row": 1, "max_abs": pytest.approx(0.02)}]
    # with a row limit of 0.01 the row (h=1, m=2) with error 0.15 is pathological too, listed first
    st2 = error_stats(out, ref, TOL, limit_max=0.01)
    assert st2["pathological_rows"]["count"] == 2
    assert [(r["head"], r["row"]) for r in st2["pathological_rows"]["rows"]] == [(1, 2), (0, 1)]


def test_error_stats_p99_nearest_rank():
    ref = torch.zeros(1, 1, 200, 1, dtype=torch.float64)
    out = torch.arange(200, dtype=torch.float64).view(1, 1, 200, 1) * 1e-3  # errors 0, 0.001, ..., 0.199
    st = error_stats(out, ref, Tolerance("fp32", 1.0, 0.0, 1.0, 0.0))
    assert st["p99_abs"] == pytest.approx(0.197)  # rank ceil(0.99*200) = 198 -> value 197e-3
    assert st["max_abs"] == pytest.approx(0.199)


def test_error_stats_valid_rows_and_nonfinite():
    ref, out = _hand()
    valid = torch.tensor([[True, False, True]])  # row 1 (the allclose violation) is padding
    st = error_stats(out, ref, TOL, valid_rows=valid)
    assert st["elements"] == 8 and st["allclose_violations"] == 0 and st["pathological_rows"]["count"] == 0
    out[0, 0, 0, 1] = float("nan")
    st = error_stats(out, ref, TOL, valid_rows=valid)
    assert st["nonfinite"] == 1 and st["max_abs"] == "inf"
    v = accuracy_verdict(st, None, TOL)
    assert not v["pass"] and "non-finite" in v["reasons"][0]


def test_drift_rule_k_times_baseline_plus_eps():
    base = {"max_abs": 0.01, "p99_abs": 0.002}
    lim = drift_limits(base, TOL)
    assert lim == {"max_abs": pytest.approx(2 * 0.01 + 0.001), "p99_abs": pytest.approx(2 * 0.002 + 0.001)}
    ok = {"max_abs": 0.021, "p99_abs": 0.005, "nonfinite": 0, "allclose_violations": 0, "elements": 10}
    assert accuracy_verdict(ok, base, TOL)["pass"]
    bad = dict(ok, max_abs=0.0211)
    v = accuracy_verdict(bad, base, TOL)
    assert not v["pass"] and v["reasons"] == ["max error 0.0211 > 2 x baseline 0.01 + 0.001 = 0.021"]
    bad = dict(ok, p99_abs=0.0051)
    assert "p99 error" in accuracy_verdict(bad, base, TOL)["reasons"][0]


def test_bundled_policy_declares_every_bench_dtype_and_device():
    p = load_policy(1)  # v1 stays bundled for the receipts made under it (v3 is the default: test_bench_tolerance.py)
    assert p.version == 1 and len(p.sha256) == 64
    for dt in ("fp32", "fp16", "bf16"):
        t = p.tol(dt)
        assert t.atol > 0 and t.rtol > 0 and t.k >= 1 and t.eps > 0 and t.rationale
        assert dt in p.downstream.bound
    assert p.min_speedup("cpu", "decode-gqa") == 1.0 and p.min_speedup("cpu", "anything") == 1.2
    assert p.min_speedup("cuda", "decode-ragged-gqa") == 0.0
    with pytest.raises(IomodelError, match=r"\[tolerance.fp8"):
        p.tol("fp8")
    with pytest.raises(IomodelError, match=r"\[speedup.mps\]"):
        p.min_speedup("mps", "x")


def test_policy_file_errors(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("version = 1\n[tolerance.bf16]\natol = \n")
    with pytest.raises(IomodelError, match="line 3"):
        load_policy(f)
    f.write_text("version = 1\n")
    with pytest.raises(IomodelError, match="missing or malformed"):
        load_policy(f)


def _bucket(causal=False, align="top-left", heads=4, kv=2, phase="prefill", nq=6, nk=6, lengths=None):
    shape = Shape(2, nq, nk, lengths)
    return Bucket("b", 1.0, phase, causal, align, heads, kv, 8, "fp32", (shape,)), shape


def test_visible_keys_top_left_bottom_right_and_padding():
    b, s = _bucket(causal=True, align="bottom-right", phase="decode", nq=2, nk=5, lengths=(5, 3))
    vis = visible_keys(b, s, "cpu")[:, 0].int().tolist()
    # sequence 0: L=5, off=3: row 0 sees keys 0..3, row 1 sees 0..4; sequence 1: L=3, off=1
    assert vis[0] == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    assert vis[1] == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]
    b, s = _bucket(causal=True, nq=3, nk=3)
    assert visible_keys(b, s, "cpu")[0, 0].int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]


@pytest.mark.parametrize("causal, lengths", [(False, None), (True, None), (True, (6, 4)), (False, (3, 6))])
def test_reference_matches_sdpa_math_in_float64(causal, lengths):
    b, s = _bucket(causal=causal, lengths=lengths)
    inp = make_inputs(b, s, seed=1, device="cpu")
    ref = reference_output(b, s, inp, max_score_bytes=200)  # force chunks of 1 query row
    q, k, v = inp.q.double(), inp.k.double(), inp.v.double()
    mask = None if inp.attn_mask is None else inp.attn_mask
    expect = torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), attn_mask=mask, is_causal=inp.sdpa_is_causal)
    assert torch.allclose(ref, expect, atol=1e-12, rtol=0)
    assert inp.mask_kind == {(False, None): "none", (True, None): "is_causal", (True, (6, 4)): "key-padding+causal",
                             (False, (3, 6)): "key-padding"}[(causal, lengths)]


def test_reference_row_without_keys_is_zero():
    # bottom-right causal, sequence 0 has one valid key and two query rows: row 0 sees no key
    b = Bucket("b", 1.0, "decode", True, "bottom-right", 4, 2, 8, "fp32", (Shape(2, 2, 6, (1, 6)),))
    s = b.shapes[0]
    inp = make_inputs(b, s, seed=0, device="cpu")
    out = reference_output(b, s, inp)
    assert torch.isfinite(out).all()
    assert torch.count_nonzero(out[0, :, 0]) == 0
    assert torch.allclose(out[0, :, 1], inp.v[0, :, 0].double().repeat_interleave(2, 0))  # row 1 sees key 0 only


def test_inputs_are_seeded_and_identical():
    b, s = _bucket()
    a, c = make_inputs(b, s, 5, "cpu"), make_inputs(b, s, 5, "cpu")
    assert torch.equal(a.q, c.q) and torch.equal(a.v, c.v)
    assert not torch.equal(a.q, make_inputs(b, s, 6, "cpu").q)


def test_identify_backend_from_op_names():
    assert identify_backend(["aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention_for_cpu"]) == (
        "sdpa-flash", "aten::_scaled_dot_product_flash_attention_for_cpu")
    assert identify_backend(["aten::_scaled_dot_product_cudnn_attention"])[0] == "sdpa-cudnn"
    assert identify_backend(["aten::_scaled_dot_product_efficient_attention"])[0] == "sdpa-efficient"
    assert identify_backend(["aten::_scaled_dot_product_attention_math"])[0] == "sdpa-math"
    assert identify_backend(["triton_attn_fwd"]) == (None, None)


def test_group_reasons_by_backend_header():
    msgs = ["Memory efficient kernel not used because:", "Efficient attention does not support GQA",
            "Flash attention kernel not used because:", "Flash attention does not support attn_mask",
            "CuDNN attention kernel not used because:", "cuDNN attention has been runtime disabled."]
    g = group_reasons(msgs)
    assert g == {"sdpa-efficient": ["Efficient attention does not support GQA"],
                 "sdpa-flash": ["Flash attention does not support attn_mask"],
                 "sdpa-cudnn": ["cuDNN attention has been runtime disabled."]}


def test_probe_captures_pytorch_refusal_reasons_on_cpu():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 2, 8, 16)
    v = torch.randn(1, 2, 8, 8)  # value head dim differs: the CPU flash kernel refuses

    def call():
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, q, v)

    pr = probe_call(call, backend="sdpa-flash")
    assert pr.refused and pr.output is None and pr.error is None
    assert any("same last dimension" in r for r in pr.reasons)
    assert "No available kernel" in pr.reasons[-1]
    assert not any("Triggered internally" in r for r in pr.reasons)


def test_probe_separates_errors_from_refusals():
    def boom():
        raise RuntimeError("CUDA error: an illegal memory access")

    pr = probe_call(boom)
    assert not pr.refused and pr.error == "RuntimeError: CUDA error: an illegal memory access"

    def warns():
        warnings.warn("hello")
        return 1

    pr = probe_call(warns)
    assert pr.output == 1 and pr.warnings == ["hello"]


def test_profile_call_identifies_cpu_backends_and_peak_memory():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = torch.randn(1, 4, 256, 32)

    def run(be):
        def f():
            with sdpa_kernel([be]):
                return torch.nn.functional.scaled_dot_product_attention(q, q, q)
        return f

    math_t = profile_call(run(SDPBackend.MATH), "cpu")
    flash_t = profile_call(run(SDPBackend.FLASH_ATTENTION), "cpu")
    assert math_t.ran == "sdpa-math" and flash_t.ran == "sdpa-flash"
    assert flash_t.op == "aten::_scaled_dot_product_flash_attention_for_cpu"
    scores = 4 * 256 * 256 * 4  # (B, H, N, N) fp32 bytes that MATH materialises
    assert math_t.peak_allocated_bytes >= scores
    assert flash_t.peak_allocated_bytes < scores
    assert flash_t.peak_allocated_bytes >= 4 * 256 * 32 * 4  # at least the output O


def test_one_sdpa_table_and_one_dispatcher():
    from torch.nn.attention import SDPBackend

    from iomodel.bench.backends import BACKEND_ORDER, KERNEL, SDPA_BACKENDS, attention_call

    assert KERNEL == "tiled" and set(BACKEND_ORDER) == {*SDPA_BACKENDS, KERNEL}
    for name, b in SDPA_BACKENDS.items():
        assert isinstance(getattr(SDPBackend, b.member), SDPBackend), name
        assert all(op.startswith("aten::_scaled_dot_product_") for op in b.ops)
    b, s = _bucket(causal=True)
    inp = make_inputs(b, s, seed=2, device="cpu")
    math_out = attention_call("sdpa-math", inp)()
    ref = reference_output(b, s, inp)
    assert torch.allclose(math_out.double(), ref, atol=1e-5)
    assert torch.allclose(attention_call("sdpa-flash", inp)().double(), ref, atol=1e-5)
    assert torch.allclose(attention_call("sdpa-auto", inp)().double(), ref, atol=1e-5)
    with pytest.raises(IomodelError, match="unknown attention backend 'triton'"):
        attention_call("triton", inp)
