"""Every committed benchmark receipt holds its declared policy; planted slow or drifting ones do not.

The check (:func:`iomodel.bench.receipt.check_receipt`) recomputes medians from the timing
samples, speedups, accuracy verdicts and per-bucket decisions, and holds them to the
bundled policy of the receipt's version. Any ``receipts/bench-*.json`` is covered
automatically (the CPU receipt, and the H200 receipt once committed).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from iomodel.bench.backends import BASELINE
from iomodel.bench.policy import load_policy
from iomodel.bench.receipt import check_receipt

RECEIPTS = sorted((Path(__file__).resolve().parent.parent / "receipts").glob("bench-*.json"))


def test_the_receipts_are_committed():
    # the tests below are parametrized over RECEIPTS: an empty list must fail here, not skip them all
    assert [p.name for p in RECEIPTS] == ["bench-cpu.json", "bench-h200-v2.json", "bench-h200-v3.json",
                                          "bench-h200-v4-fixed-spin.json", "bench-h200-v4.json",
                                          "bench-h200.json"]


def _load(path: Path) -> dict:
    """The receipt as committed (its Markdown is the rendering of exactly this), older names included."""
    return json.loads(path.read_text())


@pytest.fixture(params=RECEIPTS, ids=[p.name for p in RECEIPTS])
def receipt(request):
    return _load(request.param)


@pytest.mark.parametrize("path", RECEIPTS, ids=[p.name for p in RECEIPTS])
def test_committed_receipt_holds_its_policy(path):
    r = _load(path)
    assert check_receipt(r) == [], f"{path.name} breaks policy v{r['policy']['version']}"
    assert r["verdict"]["pass"] and r["verdict"]["violations"] == []
    # a receipt says what made it, where and when, and has its Markdown beside it
    assert r["command"].startswith(("iomodel bench", "python benchmarks/gpu_bench.py")) and r["date"]
    assert r["device"]["kind"] in ("cpu", "cuda") and r["device"]["torch"]
    md = path.with_suffix(".md")
    assert md.is_file() and "| Signal | Decision | Proof |" in md.read_text()


@pytest.mark.parametrize("path", RECEIPTS, ids=[p.name for p in RECEIPTS])
def test_committed_receipt_logs_the_backend_of_every_bucket(path):
    r = _load(path)
    for b in r["buckets"]:
        sm = b["summary"]
        assert sum(sm["auto_dispatch"].values()) == len(b["shapes"])
        for s in b["shapes"]:
            base = s["results"][BASELINE]
            assert base["status"] == "ok" and base["ran"] == BASELINE
            for name, res in s["results"].items():
                assert res["status"] in ("ok", "unsupported", "error")
                if res["status"] == "ok":
                    assert res.get("ran") or res.get("kernels") or res.get("config"), \
                        f"{name} ran without a recorded op, kernel or launch configuration"
                    assert res["peak_allocated_bytes"] is not None
                else:
                    assert res["reasons"], f"{name} refused without a reason"
        d = sm["decision"]
        if d["backend"]:
            assert all(s["results"][d["backend"]]["status"] == "ok" for s in b["shapes"])
    for name, be in r["backends"].items():
        assert be["available"] or be["reason"]


def _fused_ok(r):
    for b in r["buckets"]:
        for s in b["shapes"]:
            for name, res in s["results"].items():
                if name != BASELINE and res["status"] == "ok":
                    yield b, s, name, res


def test_planted_slow_receipt_is_rejected(receipt):
    slow = copy.deepcopy(receipt)
    for _, _, _, res in _fused_ok(slow):  # every fused backend 1000x slower, consistently
        res["samples_s"] = [x * 1000 for x in res["samples_s"]]
        res["time_s"] = {k: (v * 1000 if k != "n" else v) for k, v in res["time_s"].items()}
        res["speedup"] = res["speedup"] / 1000
    v = check_receipt(slow)
    assert any("below the policy's" in x for x in v), v


def test_planted_slow_bucket_names_the_bucket(receipt):
    slow = copy.deepcopy(receipt)
    pol = load_policy(slow["policy"]["version"])
    b = next(b for b in slow["buckets"] if pol.min_speedup(slow["device"]["kind"], b["name"]) > 1)
    for s in b["shapes"]:
        base = s["results"][BASELINE]
        for name, res in s["results"].items():
            if name != BASELINE and res["status"] == "ok":  # make each fused backend exactly as fast as the baseline
                res["samples_s"] = list(base["samples_s"])
                res["time_s"] = dict(base["time_s"])
    v = check_receipt(slow)
    assert any(f"bucket {b['name']!r}" in x and "below the policy's" in x for x in v), v


def test_planted_drifting_receipt_is_rejected(receipt):
    drift = copy.deepcopy(receipt)
    b, s, name, res = next(_fused_ok(drift))
    if "max_abs" not in res["accuracy"]["limits"]:  # policy v3: the one element-wise rule
        res["error"]["element_violations"] = 3  # the flag "accuracy.pass" is left claiming success
        v = check_receipt(drift)
        assert any("drift above policy" in x and name in x and s["label"] in x for x in v), v
        return
    lim = res["accuracy"]["limits"]["max_abs"]
    res["error"]["max_abs"] = lim * 1.5  # the flag "accuracy.pass" is left claiming success
    v = check_receipt(drift)
    assert any("drift above policy" in x and name in x and s["label"] in x for x in v), v
    drift2 = copy.deepcopy(receipt)
    _, _, name2, res2 = next(_fused_ok(drift2))
    res2["error"]["allclose_violations"] = 3
    assert any("exceed atol" in x for x in check_receipt(drift2))


def test_planted_median_or_policy_tampering_is_rejected(receipt):
    t = copy.deepcopy(receipt)
    _, _, _, res = next(_fused_ok(t))
    res["time_s"]["median"] /= 10  # a median that its samples do not give
    assert any("does not match its samples" in x for x in check_receipt(t))
    t = copy.deepcopy(receipt)
    t["policy"]["sha256"] = "0" * 64
    assert any("embedded policy" in x for x in check_receipt(t))
    t = copy.deepcopy(receipt)
    t["policy"]["version"] = 99
    assert "not bundled" in check_receipt(t)[0]


def test_planted_downstream_breach_is_rejected(receipt):
    t = copy.deepcopy(receipt)
    for dt, results in t["downstream"]["results"].items():
        for name, res in results.items():
            if res.get("status") == "ok" and name != BASELINE:
                res["max_abs"] = 1.0
                break
    assert any(x.startswith("downstream") for x in check_receipt(t))


def test_markdown_beside_the_json_shows_its_decisions(receipt):
    path = next(p for p in RECEIPTS if _load(p)["date"] == receipt["date"])
    md = path.with_suffix(".md").read_text()
    assert receipt["date"] in md and ("**PASS**" if receipt["verdict"]["pass"] else "**FAIL**") in md
    assert md.index("(declared before the results)") < md.index("## Signal → Decision → Proof")
    for b in receipt["buckets"]:
        d = b["summary"]["decision"]
        assert b["signal"] in md
        if d["backend"]:
            assert f"{d['speedup']:.2f}× faster" in md


def _scale_fused(bucket, factor):
    """Every fused result of ``bucket`` ``factor`` times slower, samples and spread alike (stored speedups untouched)."""
    for s in bucket["shapes"]:
        for name, res in s["results"].items():
            if name != BASELINE and res["status"] == "ok":
                res["samples_s"] = [x * factor for x in res["samples_s"]]
                res["time_s"] = {k: (v * factor if k != "n" else v) for k, v in res["time_s"].items()}


def test_planted_stale_speedups_are_rejected(receipt):
    # the reviewer's case: decode samples made slower while the receipt keeps claiming the old speedup;
    # the recomputed speedup still clears the policy's minimum, so only the speedup cross-check can catch it
    assert check_receipt(receipt) == []
    t = copy.deepcopy(receipt)
    pol = load_policy(t["policy"]["version"])
    b = next(b for b in t["buckets"] if b["name"] == t["matrix"]["workload"]["decode_bucket"])
    d = b["summary"]["decision"]
    target = max(pol.min_speedup(t["device"]["kind"], b["name"]), 1.0) * 1.1
    factor = d["speedup"] / target
    assert factor > 1.5  # the committed decision is well above target, so the plant is a real change
    _scale_fused(b, factor)
    v = check_receipt(t)
    assert not any("below the policy's" in x for x in v), v
    assert any(f"bucket {b['name']!r}: stored decision speedup {d['speedup']:.4g}x for {d['backend']}" in x
               and f"{target:.4g}x" in x for x in v), v
    for s in b["shapes"]:
        assert any(f"shape {s['label']} {d['backend']}: stored speedup" in x for x in v), (s["label"], v)
    assert any(x.startswith(f"bucket {b['name']!r} {d['backend']}: stored geometric-mean speedup") for x in v), v
    assert any(x.startswith("end_to_end decision: stored request speedup") for x in v), v


def test_each_stored_speedup_is_cross_checked_alone(receipt):
    def violations(edit):
        t = copy.deepcopy(receipt)
        edit(t)
        return check_receipt(t)

    b0 = next(b for b in receipt["buckets"] if b["summary"]["decision"]["backend"])
    i = receipt["buckets"].index(b0)
    dec = b0["summary"]["decision"]["backend"]

    def shape_speedup(scale):
        def edit(t):
            t["buckets"][i]["shapes"][0]["results"][dec]["speedup"] *= scale
        return edit

    assert violations(shape_speedup(1 + 1e-12)) == []  # float rounding is not a violation
    assert any("stored speedup" in x for x in violations(shape_speedup(1.001)))

    def decision(t):
        t["buckets"][i]["summary"]["decision"]["speedup"] *= 1.01
    assert [x for x in violations(decision) if "stored decision speedup" in x], violations(decision)

    def e2e(t):
        t["end_to_end"]["decision"]["speedup"] *= 1.01
        t["end_to_end"]["paths"][BASELINE]["speedup"] = 2.0
    v = violations(e2e)
    assert any(x.startswith("end_to_end decision") for x in v) and any(x.startswith(f"end_to_end path {BASELINE}") for x in v), v


def test_backend_log_counts_each_refusal_once(receipt):
    # a refused SDPA call has several reason lines (PyTorch's reason, then "No available kernel"): one entry per shape
    from iomodel.bench.receipt import refusal_log, render_markdown

    md = render_markdown(receipt)
    for b in receipt["buckets"]:
        log = refusal_log(b)
        for name, v in b["summary"]["backends"].items():
            refused = sum(len(labels) for (n, st, _), labels in log.items() if n == name and st == "unsupported")
            assert refused == v["unsupported"], (b["name"], name, refused, v)
        for (n, st, why), labels in log.items():
            assert len(labels) == len(set(labels))
            line = f"- `{n}` {'refused' if st == 'unsupported' else 'failed'} ×{len(labels)} ({', '.join(labels)}): "
            assert line + " / ".join(why).replace("|", "\\|") in md


def test_refusal_log_groups_reason_lines_by_shape():
    from iomodel.bench.receipt import refusal_log

    why = ["Flash Attention does not support non-null attn_mask.", "No available kernel. Aborting execution."]
    bucket = {"shapes": [
        {"label": f"B=1 Nk={n}", "results": {BASELINE: {"status": "ok"},
                                              "sdpa-flash": {"status": "unsupported", "reasons": list(why)},
                                              "x": {"status": "error", "reasons": ["OutOfMemoryError: 2 GiB"]}}}
        for n in (64, 128, 256)]}
    log = refusal_log(bucket)
    assert log == {("sdpa-flash", "unsupported", tuple(why)): ["B=1 Nk=64", "B=1 Nk=128", "B=1 Nk=256"],
                   ("x", "error", ("OutOfMemoryError: 2 GiB",)): ["B=1 Nk=64", "B=1 Nk=128", "B=1 Nk=256"]}


def test_markdown_labels_request_units_and_where_speedups_were_read(receipt):
    from iomodel.bench.receipt import render_markdown

    md = render_markdown(receipt)
    e = receipt["end_to_end"]
    wl = e["workload"]
    n = wl["layers"]
    assert (f"| path | prefill call (1 layer) | Σ decode calls (1 layer) | TTFT attention ({n} layers) | "
            f"per output token ({n} layers) | request attention ({n} layers) |") in md
    recon = next(x for x in md.splitlines() if x.startswith("Reconciliation: "))
    P, O = wl["prompt_len"], wl["output_len"]
    assert f"at this request's {P}-token prompt" in recon and f"at this request's {P}–{P + O - 1} keys" in recon
    by = {b["name"]: b for b in receipt["buckets"]}
    for key in ("prefill_bucket", "decode_bucket"):
        g = by[wl[key]]["summary"]["decision"]["speedup"]
        assert f"geomean over its shapes is {g:.3g}x" in recon
    base, dec = e["paths"][BASELINE], e["decision"]
    assert f"decode speedup {base['decode_calls_s'] / dec['decode_calls_s']:.3g}x" in recon
    assert f"request speedup {dec['speedup']:.3g}x" in recon and f"per request of {n} layers" in recon


@pytest.mark.parametrize("path", RECEIPTS, ids=[p.name for p in RECEIPTS])
def test_committed_markdown_is_the_rendering_of_its_json(path):
    # the Markdown is derived: regenerate it with render_markdown(json.load(...)) after a renderer change
    from iomodel.bench.receipt import render_markdown

    assert path.with_suffix(".md").read_text() == render_markdown(_load(path))


#: Receipts written before the kernel was named "tiled" in the harness (issue 9): they say "triton".
LEGACY_RECEIPTS = [p for p in RECEIPTS if p.name in ("bench-cpu.json", "bench-h200.json")]


@pytest.mark.parametrize("path", LEGACY_RECEIPTS, ids=[p.name for p in LEGACY_RECEIPTS])
def test_committed_receipt_loads_with_the_kernel_named_tiled(path, capsys):
    from iomodel.bench.backends import KERNEL
    from iomodel.bench.receipt import load_receipt
    from iomodel.cli import main

    raw, r = _load(path), load_receipt(path)
    assert "triton" in raw["backends"] and list(r["backends"]) == [*(n for n in raw["backends"] if n != "triton"), KERNEL]
    for b_raw, b in zip(raw["buckets"], r["buckets"]):
        assert list(b["summary"]["backends"]) == [KERNEL if n == "triton" else n for n in b_raw["summary"]["backends"]]
        for s_raw, s in zip(b_raw["shapes"], b["shapes"]):
            assert s_raw["results"].get("triton") == s["results"].get(KERNEL)  # no measured number moved
    assert "triton" not in r["end_to_end"]["paths"] and "triton" not in r["downstream"]["results"]["bf16"]
    assert KERNEL in r["downstream"]["results"]["bf16"]
    assert check_receipt(r) == []
    with pytest.raises(SystemExit) as e:
        main(["bench", "--check", str(path)])
    assert e.value.code in (0, None) and "PASS" in capsys.readouterr().out


def test_decision_line_gradient_limit_names_the_policy_rule():
    """Policy v2 stores a max-abs limit per gradient, policy v3 the element rule's floor: the
    decision line shows whichever the receipt has (it showed a dash for v3 before)."""
    from iomodel.bench.receipt import _e, _grad_limit

    assert _grad_limit({"max_abs": 0.0125}) == _e(0.0125)
    assert _grad_limit({"abs_floor": 0.0509}) == f"per element, floor {_e(0.0509)}"
    assert _grad_limit({}) == "—"
