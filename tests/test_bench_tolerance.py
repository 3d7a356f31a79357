"""Policy v3: the one element-wise tolerance rule (issue 13) and a speed floor, or a reason, per bucket.

The rule, per element: ``|X - X64| <= k x |X_ref - X64| + floor x u x max|X64|``
(:mod:`iomodel.bench.policy`, docs/measurement.md "Tolerance").
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from iomodel.bench.matrix import MATRICES_DIR, ShapeMatrix, load_matrix  # noqa: E402
from iomodel.bench.policy import (  # noqa: E402
    CURRENT_POLICY_VERSION, Tolerance, accuracy_verdict, elementwise_floor, error_stats, gradient_verdict,
    load_policy, unit_roundoff,
)
from iomodel.bench.receipt import check_receipt, load_receipt  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
V3 = Tolerance("fp16", None, None, k=4.0, eps=None, floor=2.0)  # u = 2^-11


# ------------------------------------------------------------------------------------
# The rule on hand-made tensors
# ------------------------------------------------------------------------------------


def test_unit_roundoff_is_half_the_machine_epsilon():
    assert unit_roundoff("fp32") == 2.0 ** -24
    assert unit_roundoff("fp16") == 2.0 ** -11
    assert unit_roundoff("bf16") == 2.0 ** -8
    assert elementwise_floor(V3, 4.0) == 2.0 * 2.0 ** -11 * 4.0  # floor x u x max|O64|
    with pytest.raises(IomodelError, match="no element-wise floor"):
        elementwise_floor(Tolerance("fp16", 1e-3, 1e-3, 4.0, 2.5e-4), 1.0)


def _hand():
    # ref (B=1, H=1, N_q=2, d=4), max|ref| = 4: tau = 2 x 2^-11 x 4 = 2^-8 = 0.00390625
    ref = torch.tensor([[[[4.0, 1.0, -2.0, 0.5], [0.0, 1.0, 3.0, -1.0]]]], dtype=torch.float64)
    math_err = torch.tensor([[[[0.0, 0.01, 0.0, 0.001], [0.0, 0.0, 0.002, 0.0]]]], dtype=torch.float64)
    reference = ref + math_err  # the reference backend's output
    err = torch.tensor([[[[0.0039, 0.04, 0.004, 0.0078], [0.0, 0.0, 0.0117, 0.0]]]], dtype=torch.float64)
    return ref, reference, ref + err


def test_elementwise_rule_hand_made():
    ref, reference, out = _hand()
    tau = 2.0 ** -8
    st = error_stats(out, ref, V3, reference=reference)
    assert st["scale"] == 4.0 and st["abs_floor"] == tau
    # limits per element: [tau, 0.04 + tau, tau, 0.004 + tau], [tau, tau, 0.008 + tau, tau]
    # element (0, 0): 0.0039 <= tau (the reference is exact there, and exactness is not demanded)
    # element (0, 2): 0.004 > tau = 0.00390625: the only violation in row 0
    # element (0, 3): 0.0078 <= 0.004 + tau = 0.00790625; element (1, 2): 0.0117 <= 0.008 + tau = 0.01190625
    assert st["element_violations"] == 1 and st["elements"] == 8
    assert st["worst_ratio"] == pytest.approx(0.004 / tau)
    assert st["pathological_rows"] == {"count": 1, "rows": [{"batch": 0, "head": 0, "row": 0,
                                                              "max_abs": pytest.approx(0.04)}]}
    assert "allclose_violations" not in st
    v = accuracy_verdict(st, {"max_abs": 0.01}, V3)
    assert not v["pass"] and v["limits"] == {"k": 4.0, "floor": 2.0, "abs_floor": tau}
    assert v["reasons"] == ["1 of 8 elements exceed 4 x |O_ref - O64| + 2 x u x max|O64| = 0.00391 "
                            "(worst element at 1.02x its limit)"]
    out[0, 0, 0, 2] = ref[0, 0, 0, 2] + 0.0039  # now within tau
    st = error_stats(out, ref, V3, reference=reference)
    assert st["element_violations"] == 0 and accuracy_verdict(st, {}, V3)["pass"]


def test_elementwise_rule_valid_rows_nonfinite_and_reference_itself():
    ref, reference, out = _hand()
    valid = torch.tensor([[False, True]])  # row 0 (with the violation, and max|ref| = 4) is padding
    st = error_stats(out, ref, V3, valid_rows=valid, reference=reference)
    assert st["scale"] == 3.0 and st["elements"] == 4
    # tau = 2 x 2^-11 x 3 = 0.0029296875; element (1, 2): 0.0117 > 4 x 0.002 + tau = 0.0109296875
    assert st["element_violations"] == 1
    out[0, 0, 1, 0] = float("nan")
    st = error_stats(out, ref, V3, valid_rows=valid, reference=reference)
    assert st["nonfinite"] == 1 and st["element_violations"] == 2  # nan is never within a limit
    # the reference backend itself: only non-finite values fail it
    st = error_stats(reference, ref, V3)
    assert "element_violations" not in st and accuracy_verdict(st, None, V3)["pass"]
    # a fused result without the element-wise count (or with a doctored floor) fails
    st = error_stats(out, ref, V3, reference=reference)
    no_count = {k: v for k, v in st.items() if k != "element_violations"}
    assert "no element-wise check" in " ".join(accuracy_verdict(no_count, {}, V3)["reasons"])
    assert "stored absolute floor" in accuracy_verdict(dict(st, abs_floor=1.0), {}, V3)["reasons"][1]


def test_gradient_rule_is_the_same_rule_per_tensor():
    ref, reference, out = _hand()
    tol = Tolerance("fp16", None, None, k=2.0, eps=None, floor=4.0)  # tau = 4 x 2^-11 x 4 = 2^-7
    stats = {g: error_stats(out, ref, tol, reference=reference) for g in ("dq", "dk", "dv")}
    # limits 2 x math_err + 2^-7: (0, 1) 0.04 > 0.02 + 0.0078125 fails; every other element passes
    assert [stats[g]["element_violations"] for g in ("dq", "dk", "dv")] == [1, 1, 1]
    v = gradient_verdict(stats, stats, tol)
    assert not v["pass"] and v["limits"] == {g: {"abs_floor": 2.0 ** -7} for g in ("dq", "dk", "dv")}
    assert v["reasons"][0].startswith("dq: 1 of 8 elements exceed 2 x |O_ref - O64| + 4 x u x max|O64|")


# ------------------------------------------------------------------------------------
# Issue 13's input: correct results that v1's fixed atol + rtol rejected
# ------------------------------------------------------------------------------------


def _issue13(seed: int = 0):
    """fp16 q, k, v (1, 2, 256, 64), q x 3, v x 8; the float64 output and SDPA MATH's (the reference backend)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    g = torch.Generator().manual_seed(seed)
    q = (torch.randn(1, 2, 256, 64, generator=g) * 3).half()
    k = torch.randn(1, 2, 256, 64, generator=g).half()
    v = (torch.randn(1, 2, 256, 64, generator=g) * 8).half()
    o64 = torch.softmax(q.double() @ k.double().transpose(-1, -2) / 8.0, dim=-1) @ v.double()  # (1, 2, 256, 64)
    with sdpa_kernel(SDPBackend.MATH):
        om = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    return q, k, v, o64, om


@pytest.fixture(scope="module")
def issue13():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from kernels.flash_attention import flash_attention

    q, k, v, o64, om = _issue13()
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        of = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    ok = flash_attention(q, k, v)  # Triton's interpreter on a CPU (tests/conftest.py)
    ok = ok[0] if isinstance(ok, tuple) else ok
    return o64, om, {"sdpa-flash": of, "tiled": ok}


@pytest.mark.parametrize("backend, v1_violations, worst", [("sdpa-flash", 12, 0.18428), ("tiled", 6, 0.15743)])
def test_issue13_input_fails_v1_and_passes_v3(issue13, backend, v1_violations, worst):
    o64, om, outs = issue13
    out = outs[backend]
    v1 = load_policy(1).tol("fp16")
    base1 = error_stats(om, o64, v1)
    st1 = error_stats(out, o64, v1)
    assert accuracy_verdict(base1, None, v1)["pass"]  # MATH itself is within atol + rtol |O64|
    assert st1["allclose_violations"] == v1_violations  # ... but the correct fused output is not
    r1 = accuracy_verdict(st1, base1, v1)
    assert not r1["pass"] and r1["reasons"] == [
        f"{v1_violations} of 32768 elements exceed atol 0.001 + rtol 0.001 x |O64|"]  # the drift rule alone passes
    tol = load_policy().tol("fp16")
    assert load_policy().version == CURRENT_POLICY_VERSION == 3 and (tol.k, tol.floor) == (4.0, 2.0)
    st = error_stats(out, o64, tol, reference=om)
    assert st["element_violations"] == 0 and st["nonfinite"] == 0 and st["elements"] == 32768
    assert st["scale"] == pytest.approx(21.897, abs=1e-3)  # max|O64|: tau = 2 x 2^-11 x 21.897 = 0.021384
    assert st["abs_floor"] == pytest.approx(0.021384, abs=1e-6)
    assert st["worst_ratio"] == pytest.approx(worst, abs=1e-5)  # the worst element uses under a fifth of its limit
    assert accuracy_verdict(st, error_stats(om, o64, tol), tol) == {
        "pass": True, "limits": {"k": 4.0, "floor": 2.0, "abs_floor": st["abs_floor"]}, "reasons": []}


def test_issue13_planted_wrong_element_still_fails(issue13):
    o64, om, outs = issue13
    tol = load_policy().tol("fp16")
    out = outs["tiled"].double().clone()
    tau = elementwise_floor(tol, float(o64.abs().max()))
    allowed = tol.k * float((om.double() - o64).abs()[0, 1, 100, 7]) + tau
    out[0, 1, 100, 7] = o64[0, 1, 100, 7] + 10 * allowed  # one element off by 10x its allowed error
    st = error_stats(out, o64, tol, reference=om)
    assert st["element_violations"] == 1 and st["worst_ratio"] == pytest.approx(10.0)
    assert st["pathological_rows"]["count"] == 1 and st["pathological_rows"]["rows"][0]["row"] == 100
    v = accuracy_verdict(st, {}, tol)
    assert not v["pass"] and v["reasons"][0].startswith("1 of 32768 elements exceed 4 x |O_ref - O64|")


# ------------------------------------------------------------------------------------
# Speed floors
# ------------------------------------------------------------------------------------


def _bucket_matrices() -> list[ShapeMatrix]:
    ms = [load_matrix(p) for p in sorted(MATRICES_DIR.glob("*.toml"))]
    return [m for m in ms if isinstance(m, ShapeMatrix)]


def test_every_bundled_bucket_has_a_floor_or_a_reason():
    pol = load_policy()
    seen = 0
    for m in _bucket_matrices():
        for b in m.buckets:
            floor, why = pol.min_speedup(m.device, b.name), pol.no_floor_reason(m.device, b.name)
            assert (floor > 0) != (why is not None), (m.name, m.version, b.name, floor, why)
            seen += 1
    assert seen == 25  # cpu-v1 5, cpu-v2 6, cuda-v1 6, cuda-v2 8 buckets
    assert pol.min_speedup("cuda", "decode-ragged-gqa") == 1.2  # 0x in v1/v2: a check that could not fail
    assert pol.min_speedup("cpu", "train-tiny") == 0.0 and "not a speed claim" in pol.no_floor_reason("cpu", "train-tiny")
    assert load_policy(2).min_speedup("cuda", "decode-ragged-gqa") == 0.0  # v2 is kept as it was


@pytest.mark.parametrize("edit, msg", [
    (('"decode-gqa" = 1.0', '"decode-gqa" = 0.0'), "a minimum speedup must be a number > 0"),
    (("default = 1.2", "default = 0"), r"\[speedup.cpu\] default = 0"),
    (('"decode-gqa" = 1.0', '"decode-gqa" = 1.0\n"train-tiny" = 1.0'), "has both a floor"),
    (('"train-tiny" = "a CI', '"train-tiny" = " " #'), "needs a non-empty reason"),
    (("floor = 2.0", "floor = 0.0"), "exactness must not be demanded"),
])
def test_v3_policy_refuses_a_floor_of_zero_without_a_reason(tmp_path, edit, msg):
    text = (ROOT / "iomodel/bench/policies/policy-v3.toml").read_text()
    assert edit[0] in text
    f = tmp_path / "p.toml"
    f.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(IomodelError, match=msg):
        load_policy(f)


# ------------------------------------------------------------------------------------
# A v3 receipt from the harness (CPU, training bucket: the bundled kernel in the interpreter)
# ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def receipt_v3():
    from test_bench_training import _train_only, _with_kernel

    from iomodel.bench import harness

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "available_backends", _with_kernel(harness.available_backends))
        return harness.run_bench(_train_only(), "cpu", load_policy(), reps=3, warmup=1, downstream=False,
                                 command="test")


def test_v3_receipt_passes_and_repeats_the_no_floor_reason(receipt_v3):
    r = receipt_v3
    assert r["policy"]["version"] == 3 and check_receipt(r) == [] and r["verdict"]["pass"]
    (b,) = r["buckets"]
    assert b["summary"]["decision"]["no_floor"] == load_policy().no_floor_reason("cpu", "train-tiny")
    (s,) = b["shapes"]
    for name, res in s["results"].items():
        if name == "sdpa-math":
            assert "element_violations" not in res["error"]  # the reference backend: finite only
            continue
        assert res["error"]["element_violations"] == 0 and res["error"]["elements"] == 2 * 64 * 16
        for g in ("dq", "dk", "dv"):
            assert res["grad_error"][g]["element_violations"] == 0 and 0 < res["grad_error"][g]["worst_ratio"] < 1
    bad = copy.deepcopy(r)
    bad["buckets"][0]["summary"]["decision"].pop("no_floor")
    assert any("must repeat that reason" in x for x in check_receipt(bad))
    bad = copy.deepcopy(r)
    bad["buckets"][0]["shapes"][0]["results"]["tiled"]["grad_error"]["dk"]["element_violations"] = 3
    assert any("tiled: gradient drift above policy: dk: 3 of 2048 elements exceed" in x for x in check_receipt(bad))


@pytest.mark.parametrize("name, version", [("bench-cpu.json", 1), ("bench-h200.json", 1), ("bench-h200-v2.json", 2)])
def test_committed_receipts_still_check_under_their_own_policy(name, version):
    r = load_receipt(ROOT / "receipts" / name)
    assert r["policy"]["version"] == version and check_receipt(r) == []
