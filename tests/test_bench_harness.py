"""The harness on a tiny matrix on the CPU: what ran, how it was timed, what the receipt says."""

from __future__ import annotations

import statistics
import time
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from iomodel.bench.backends import Backend, available_backends  # noqa: E402
from iomodel.bench.harness import run_bench, run_shape, summarize_bucket  # noqa: E402
from iomodel.bench.matrix import parse_matrix  # noqa: E402
from iomodel.bench.policy import POLICIES_DIR, load_policy  # noqa: E402
from iomodel.bench.receipt import check_receipt, end_to_end, render_markdown  # noqa: E402
from iomodel.bench.timing import spread, time_interleaved  # noqa: E402

TINY = (Path(__file__).parent / "data" / "matrix-tiny-cpu.toml").read_text()


def lenient_policy(tmp_path):
    """The bundled policy with no speedup required (tiny CPU shapes prove nothing about speed)."""
    text = (POLICIES_DIR / "policy-v1.toml").read_text()
    text = text.replace("default = 1.2", "default = 0.0").replace('"decode-gqa" = 1.0', '"decode-gqa" = 0.0')
    p = tmp_path / "policy.toml"
    p.write_text(text)
    return load_policy(p)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pol = lenient_policy(tmp_path_factory.mktemp("pol"))
    steps = []
    r = run_bench(parse_matrix(TINY, "tiny.toml"), "cpu", pol, command="test",
                  progress=lambda d, done, total: steps.append((done, total)))
    return r, pol, steps


def test_receipt_declares_policy_before_results_and_records_environment(tiny):
    r, pol, steps = tiny
    keys = list(r)
    assert keys.index("policy") < keys.index("buckets") < keys.index("verdict")
    assert r["schema"] == "iomodel-bench-receipt/1" and r["command"] == "test" and r["date"]
    assert r["device"]["kind"] == "cpu" and r["device"]["torch"] == torch.__version__
    assert r["policy"]["version"] == 1 and r["policy"]["sha256"] == pol.sha256
    assert steps[-1] == (6, 6)  # 5 shapes + the downstream check


def test_unavailable_backends_say_why(tiny):
    be = tiny[0]["backends"]
    assert be["sdpa-math"]["available"] and be["sdpa-math"]["role"] == "baseline"
    assert be["sdpa-flash"]["available"] and be["sdpa-flash"]["role"] == "fused"
    assert not be["tiled"]["available"] and be["tiled"]["reason"].startswith("unavailable on cpu")
    assert "interpreter" in be["tiled"]["reason"] and "triton" not in be
    for n in ("sdpa-efficient", "sdpa-cudnn"):
        assert not be[n]["available"] and "no CPU implementation" in be[n]["reason"]


def test_each_shape_records_what_ran_time_memory_and_error(tiny):
    r = tiny[0]
    for b in r["buckets"]:
        for s in b["shapes"]:
            assert set(s["results"]) == {"sdpa-math", "sdpa-flash"}
            m, f = s["results"]["sdpa-math"], s["results"]["sdpa-flash"]
            assert m["status"] == f["status"] == "ok"
            assert m["op"] == "aten::_scaled_dot_product_attention_math"
            assert f["op"] == "aten::_scaled_dot_product_flash_attention_for_cpu"
            for x in (m, f):
                assert len(x["samples_s"]) == 3 and x["time_s"]["n"] == 3
                assert x["time_s"]["median"] == statistics.median(x["samples_s"])
                assert x["time_s"]["min"] <= x["time_s"]["median"] <= x["time_s"]["max"]
                assert x["peak_allocated_bytes"] > 0
            assert f["speedup"] == m["time_s"]["median"] / f["time_s"]["median"]
            assert f["memory_ratio"] == f["peak_allocated_bytes"] / m["peak_allocated_bytes"]
            assert f["accuracy"]["pass"] and m["accuracy"]["pass"]
            assert s["auto"]["ran"] == "sdpa-flash"
            if b["phase"] == "prefill":
                assert f["per_token_s"] == f["time_s"]["median"] / s["useful_tokens"]
            else:
                assert f["per_token_s"] == f["time_s"]["median"]
                assert f["per_request_s"] == f["time_s"]["median"] * 4


def test_padded_batch_is_masked_and_padding_rows_leave_the_statistics(tiny):
    s = tiny[0]["buckets"][1]["shapes"][0]
    assert s["mask"] == "key-padding+causal" and s["useful_tokens"] == 84
    assert s["useful_fraction"] == 84 / 128
    assert s["results"]["sdpa-flash"]["error"]["elements"] == 84 * 2 * 16  # valid rows x H x d


def test_bucket_summary_and_decision(tiny):
    for b in tiny[0]["buckets"]:
        sm = b["summary"]
        assert sm["backends"]["sdpa-flash"]["ok"] == len(b["shapes"])
        assert sm["auto_dispatch"] == {"sdpa-flash": len(b["shapes"])}
        assert sm["fallbacks"] == {"auto_to_math": 0, "refused": {}, "refused_total": 0}
        d = sm["decision"]
        assert d["backend"] == "sdpa-flash" and d["min_speedup"] == 0.0
        sp = [s["results"]["sdpa-flash"]["speedup"] for s in b["shapes"]]
        assert d["speedup"] == pytest.approx(statistics.geometric_mean(sp))


def test_tiny_receipt_passes_its_policy_and_renders(tiny):
    r, pol, _ = tiny
    assert check_receipt(r, pol) == [] and r["verdict"]["pass"]
    md = render_markdown(r)
    assert md.index("## Policy v1 (declared before the results)") < md.index("## Signal → Decision → Proof")
    assert "| Signal | Decision | Proof |" in md and "use SDPA FLASH_ATTENTION" in md
    assert "unavailable on cpu" in md and "aten::_scaled_dot_product_flash_attention_for_cpu" in md
    ds = r["downstream"]["results"]
    assert set(ds) == {"bf16", "fp32"}
    assert ds["bf16"]["sdpa-flash"]["pass"] and ds["bf16"]["tiled"]["status"] == "unavailable"


def test_end_to_end_reconciles_phases(tiny):
    e = tiny[0]["end_to_end"]
    base, dec = e["paths"]["sdpa-math"], e["decision"]
    assert base["request_s"] == pytest.approx(2 * (base["prefill_call_s"] + base["decode_calls_s"]))
    s_p = base["prefill_call_s"] / dec["prefill_call_s"]
    s_d = base["decode_calls_s"] / dec["decode_calls_s"]
    share = base["prefill_share"]
    assert dec["speedup"] == pytest.approx(1 / (share / s_p + (1 - share) / s_d))


def _bucket_entry(name, phase, key, points):
    shapes = []
    for x, times in points:
        shapes.append({"shape": {"batch": 1, key: x, "seqlen_q" if key == "seqlen_k" else "seqlen_k": x},
                       "results": {n: {"status": "ok", "samples_s": [t], "time_s": {"median": t}} for n, t in times.items()}})
    return {"name": name, "phase": phase, "shapes": shapes, "summary": {"decision": {"backend": "f"}}}


def test_end_to_end_by_hand():
    # prefill: base 4 s at N=2, 16 s at N=4 (N^2): at N=3, log-log gives 9 s; fused 1 and 4 -> 2.25 s
    # decode: base 2 s at N_k=2, 6 s at N_k=6 (linear): at 3 and 4 -> 3 + 4 = 7 s; fused 1, 3 -> 1.5 + 2 = 3.5 s
    receipt = {
        "matrix": {"workload": {"prompt_len": 3, "output_len": 2, "layers": 10, "prefill_bucket": "p", "decode_bucket": "d"}},
        "buckets": [
            _bucket_entry("p", "prefill", "seqlen_q", [(2, {"sdpa-math": 4.0, "f": 1.0}), (4, {"sdpa-math": 16.0, "f": 4.0})]),
            _bucket_entry("d", "decode", "seqlen_k", [(2, {"sdpa-math": 2.0, "f": 1.0}), (6, {"sdpa-math": 6.0, "f": 3.0})]),
        ],
    }
    e = end_to_end(receipt)
    base, dec = e["paths"]["sdpa-math"], e["decision"]
    assert base["prefill_call_s"] == pytest.approx(9.0) and base["decode_calls_s"] == pytest.approx(7.0)
    assert base["request_s"] == pytest.approx(160.0) and base["prefill_share"] == pytest.approx(90 / 160)
    assert dec["request_s"] == pytest.approx(57.5) and dec["speedup"] == pytest.approx(160 / 57.5)
    assert dec["ttft_attention_s"] == pytest.approx(22.5) and dec["per_output_token_s"] == pytest.approx(17.5)
    assert not e["extrapolated"]
    # s_p = 9 / 2.25 = 4, s_d = 7 / 3.5 = 2, share 90/160: read at the request's sizes, said so
    assert e["reconciliation"].startswith("request speedup 2.78x = 1 / (0.563 / 4 + 0.437 / 2) = 2.78x per request of 10 layers")
    assert ("prefill kernel speedup 4x at this request's 3-token prompt (interpolated between bucket p's measured "
            "seqlen 2, 4;") in e["reconciliation"]
    assert ("decode speedup 2x at this request's 3–4 keys (interpolated between bucket d's measured seqlen_k 2, 6;"
            in e["reconciliation"])
    receipt["matrix"]["workload"]["prompt_len"] = 8  # beyond the measured sizes: extrapolated, said so
    e = end_to_end(receipt)
    assert e["extrapolated"]
    assert "8-token prompt (extrapolated beyond" in e["reconciliation"] and "8–9 keys (extrapolated beyond" in e["reconciliation"]
    # prefill extends the last power law (N^2): 16 * (8/4)^2; decode scales the last point with N_k: 6 * (8 + 9)/6
    assert e["paths"]["sdpa-math"]["prefill_call_s"] == pytest.approx(64.0)
    assert e["paths"]["sdpa-math"]["decode_calls_s"] == pytest.approx(17.0)
    receipt["matrix"]["workload"]["prompt_len"] = 1  # below: decode 2 * (1 + 2)/2 = 3, never negative
    assert end_to_end(receipt)["paths"]["sdpa-math"]["decode_calls_s"] == pytest.approx(3.0)


def test_spread_by_hand():
    s = spread([5.0, 1.0, 4.0, 2.0, 3.0])
    assert s == {"median": 3.0, "p10": pytest.approx(1.4), "p90": pytest.approx(4.6), "iqr": 2.0,
                 "min": 1.0, "max": 5.0, "n": 5}


def test_time_interleaved_rotates_the_order():
    order = []

    def fn(name):
        def f():
            order.append(name)
            time.sleep(0.0015)  # longer than the 1 ms sample floor: one call per sample
        return f

    out = time_interleaved({"a": fn("a"), "b": fn("b"), "c": fn("c")}, "cpu", warmup=1, reps=3)
    # per backend: 1 warmup + 1 calibration call; then rounds a b c / b c a / c a b
    assert order == ["a", "a", "b", "b", "c", "c"] + list("abc") + list("bca") + list("cab")
    assert all(v["inner"] == 1 and len(v["samples_s"]) == 3 for v in out.values())
    assert all(x >= 0.0015 for v in out.values() for x in v["samples_s"])


def _refuser(inp):
    def f():
        warnings.warn("Refuser kernel not used because:")
        warnings.warn("Refuser needs HEAD_DIM 128 (Triggered internally at x.cpp:1.)")
        raise RuntimeError("No available kernel.  Aborting execution.")
    return f


def _wrong_scale(inp):
    return lambda: torch.nn.functional.scaled_dot_product_attention(
        inp.q, inp.k, inp.v, is_causal=inp.sdpa_is_causal, enable_gqa=True, scale=0.05)


def test_refusals_and_drift_are_recorded_never_substituted(tmp_path):
    pol = lenient_policy(tmp_path)
    mx = parse_matrix(TINY, "tiny.toml")
    bucket = mx.buckets[0]
    bes = [b for b in available_backends("cpu") if b.available]
    bes += [Backend("refuser", "fused", True, "", _refuser), Backend("wrong", "fused", True, "", _wrong_scale)]
    shapes = [run_shape(bucket, i, mx, "cpu", pol, bes, warmup=0, reps=3) for i in range(2)]
    for s in shapes:
        ref = s["results"]["refuser"]
        assert ref["status"] == "unsupported" and "time_s" not in ref
        assert ref["reasons"] == ["Refuser needs HEAD_DIM 128", "No available kernel.  Aborting execution."]
        w = s["results"]["wrong"]
        assert w["status"] == "ok" and not w["accuracy"]["pass"]
        assert any("max error" in x for x in w["accuracy"]["reasons"])
        assert w["error"]["pathological_rows"]["count"] > 0 and w["error"]["pathological_rows"]["rows"]
    sm = summarize_bucket(bucket, shapes, bes, "cpu", pol)
    assert sm["backends"]["refuser"] == {"ok": 0, "unsupported": 2, "error": 0, "drift_pass": None,
                                         "speedup_geomean": None, "memory_ratio_geomean": None, "max_abs_error": None}
    assert sm["fallbacks"]["refused"] == {"refuser": 2} and sm["fallbacks"]["refused_total"] == 2
    assert sm["backends"]["wrong"]["drift_pass"] is False
    assert sm["decision"]["backend"] == "sdpa-flash"  # the drifting backend is never the decision


def test_cli_runs_tiny_matrix_and_checks_the_receipt(tmp_path, capsys):
    from iomodel.cli import main

    m = tmp_path / "tiny.toml"
    m.write_text(TINY)
    pol = tmp_path / "pol.toml"
    pol.write_text((POLICIES_DIR / "policy-v1.toml").read_text().replace("default = 1.2", "default = 0.0")
                   .replace('"decode-gqa" = 1.0', '"decode-gqa" = 0.0'))
    out = tmp_path / "r" / "bench-tiny.json"
    with pytest.raises(SystemExit) as e:
        main(["bench", "--device", "cpu", "--matrix", str(m), "--policy", str(pol), "-o", str(out),
              "--reps", "3", "--warmup", "0", "--no-progress"])
    text = capsys.readouterr().out
    assert e.value.code in (0, None), text
    assert out.is_file() and out.with_suffix(".md").is_file()
    assert "within policy v1" in text
    # the request line says where its kernel speedups were read (not the bucket geomeans) and per how many layers
    assert ("request estimate (128-token prompt, 4 output tokens, 2 layers; kernel speedups read at this "
            "request's sizes, not the bucket geomeans above)") in text
    assert "at this request's 128–131 keys" in text and "per request of 2 layers" in text
    md = out.with_suffix(".md").read_text()
    assert "| prefill call (1 layer) | Σ decode calls (1 layer) | TTFT attention (2 layers) |" in md
    import json

    rec = json.loads(out.read_text())
    assert rec["command"].startswith("iomodel bench --device cpu --matrix") and "--reps 3" in rec["command"]
    with pytest.raises(SystemExit) as e:
        main(["bench", "--check", str(out), "--policy", str(pol)])
    assert e.value.code in (0, None)
    assert "PASS" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["bench", "--device", "cpu", "--reps", "2", "--no-progress"])
    assert e.value.code == 2 and "--reps 2" in capsys.readouterr().err


def test_kernel_backend_is_lazy_and_says_why_it_cannot_run(monkeypatch):
    import sys

    from iomodel.bench.backends import KernelRefusal, attention_call, kernel_backend
    from iomodel.bench.inputs import make_inputs

    assert "unavailable on cpu" in kernel_backend("cpu").reason
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert "TRITON_INTERPRET" in kernel_backend("cuda").reason and not kernel_backend("cuda").available
    monkeypatch.delenv("TRITON_INTERPRET")
    monkeypatch.setitem(sys.modules, "kernels.flash_attention", None)  # import fails
    be = kernel_backend("cuda")
    assert not be.available and "could not be imported" in be.reason
    # a padded batch goes to flash_attention_varlen (issue 13): the eager chain still refuses it before any launch
    mx = parse_matrix(TINY, "tiny.toml")
    pad = mx.buckets[1]
    inp = make_inputs(pad, pad.shapes[0], 0, "cpu")
    with pytest.raises(KernelRefusal, match="key-padding"):
        attention_call("eager", inp)


_ADAPTER_CHECK = r"""
import json, torch
from iomodel.bench.backends import attention_call
from iomodel.bench.inputs import make_inputs, reference_output
from iomodel.bench.matrix import Bucket, Shape
out = {}
for causal, align, nq, nk in ((True, "top-left", 32, 32), (True, "bottom-right", 2, 40), (False, "top-left", 1, 40)):
    b = Bucket("t", 1.0, "prefill" if nq == nk else "decode", causal, align, 4, 2, 16, "fp32", (Shape(1, nq, nk),))
    inp = make_inputs(b, b.shapes[0], 0, "cpu")
    o = attention_call("tiled", inp)()
    ref = reference_output(b, b.shapes[0], inp)
    out[f"{causal}-{align}-{nq}"] = float((o.double() - ref).abs().max())
# padded ragged batches (flash_attention_varlen with seqused_k): valid query rows against the masked reference
for causal, align, nq, nk, lens in ((True, "top-left", 40, 40, [40, 17, 3]), (False, "top-left", 2, 50, [50, 9, 1])):
    s = Shape(3, nq, nk, tuple(lens))
    b = Bucket("p", 1.0, "prefill" if nq == nk else "decode", causal, align, 4, 2, 16, "fp32", (s,))
    inp = make_inputs(b, s, 0, "cpu")
    call = attention_call("tiled", inp)
    o, o2 = call(), call()  # the first call checks cu_seqlens on the host, the second does not
    assert torch.equal(o, o2)
    ref = reference_output(b, s, inp)
    rows = inp.valid_rows if inp.valid_rows is not None else torch.ones(3, nq, dtype=torch.bool)
    out[f"padded-{causal}-{nq}"] = float((o.double() - ref).abs().permute(0, 2, 1, 3)[rows].max())
print(json.dumps(out))
"""


@pytest.mark.interpreter
def test_triton_adapter_calls_the_kernel_api_correctly():
    """The adapter passes causal/alignment/GQA as the kernel API says (checked in Triton's interpreter, tiny shapes)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("triton")
    root = Path(__file__).resolve().parent.parent
    if not (root / "kernels" / "flash_attention.py").is_file():
        pytest.skip("kernels/flash_attention.py not present")
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(root))
    p = subprocess.run([sys.executable, "-c", _ADAPTER_CHECK], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    errs = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(errs) == 5 and all(e < 1e-5 for e in errs.values()), errs


def test_receipt_json_is_strict_even_with_non_finite_numbers(tmp_path):
    import json

    from iomodel.bench.receipt import json_safe

    assert json_safe({"a": [1.0, float("inf"), {"b": float("nan")}], "c": -float("inf")}) == {
        "a": [1.0, "inf", {"b": "nan"}], "c": "-inf"}
    assert json.dumps(json_safe({"x": float("nan")}), allow_nan=False) == '{"x": "nan"}'
