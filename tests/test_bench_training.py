"""Training buckets (``pass = "fwd+bwd"``): the matrix field, the gradient rule, both baselines, the receipt.

One CPU run of cpu-v2's tiny training bucket (B=1, H=2, N=64, HEAD_DIM 16, causal bf16) with
every backend the CPU has, plus the bundled kernel in Triton's interpreter (the harness does
not time the interpreter on its own; the test makes the kernel available so the CUDA path's
code runs: forward + backward through ``attention_call``, gradient errors, both speedups).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from iomodel.bench import harness  # noqa: E402
from iomodel.bench.backends import BASELINE, EAGER, KERNEL, Backend, KernelRefusal, attention_call  # noqa: E402
from iomodel.bench.harness import run_bench, run_shape, training_backends  # noqa: E402
from iomodel.bench.matrix import MATRICES_DIR, load_matrix, parse_matrix, step_flops  # noqa: E402
from iomodel.bench.policy import load_policy  # noqa: E402
from iomodel.bench.receipt import check_receipt, render_markdown  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402
from test_bench_matrix import _err  # noqa: E402 - one line, naming the line

FUSED = ("sdpa-flash", KERNEL)


def _train_only(name: str = "cpu-v2"):
    m = load_matrix(name)
    return dataclasses.replace(m, buckets=tuple(b for b in m.buckets if b.training), workload=None)


def _with_kernel(available_backends):
    """``available_backends`` with the bundled kernel available (it runs in Triton's interpreter on a CPU)."""
    def backends(device):
        return [b if b.name != KERNEL else Backend(KERNEL, "fused", True, "", lambda inp: attention_call(KERNEL, inp),
                                                   refusal_types=(KernelRefusal, ValueError)) for b in available_backends(device)]
    return backends


@pytest.fixture(scope="module")
def receipt():
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(harness, "available_backends", _with_kernel(harness.available_backends))
        return run_bench(_train_only(), "cpu", load_policy(2), reps=3, warmup=1, downstream=False, command="test")


def _shape(r):
    (b,) = r["buckets"]
    (s,) = b["shapes"]
    return b, s


# ------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------


def test_tiny_training_run_passes_with_every_backend(receipt):
    b, s = _shape(receipt)
    assert b["pass"] == "fwd+bwd" and b["signal"].startswith("training step (fwd+bwd), 64 keys, causal top-left")
    assert receipt["verdict"] == {"pass": True, "violations": [], "policy_version": 2}
    assert check_receipt(receipt) == []
    assert s["eager"]["status"] == "ok" and EAGER not in s["results"]
    assert {n: r["status"] for n, r in s["results"].items()} == {BASELINE: "ok", "sdpa-flash": "ok", KERNEL: "ok"}
    assert list(receipt["backends"])[0] == EAGER and receipt["backends"][EAGER]["role"] == "baseline"
    assert "torch.autograd.grad" in receipt["timing"]["training_step"]
    # FLOPs of one step: 3.5 x 4 * B * H * d * visible pairs, pairs = 64 * 65 / 2 = 2080 (causal top-left)
    assert s["flops"] == 931_840 == int(3.5 * 4 * 1 * 2 * 16 * 2080)


def test_gradient_rule_is_k_times_eager_plus_eps_per_tensor(receipt):
    _, s = _shape(receipt)
    tol = load_policy(2).grad_tol("bf16")
    assert (tol.k, tol.eps, tol.atol, tol.rtol) == (2.0, 1e-5, None, None)
    eager = s["eager"]["grad_error"]
    for name, r in s["results"].items():
        for g in ("dq", "dk", "dv"):
            lim = r["grad_accuracy"]["limits"][g]
            assert lim == {"max_abs": 2.0 * eager[g]["max_abs"] + 1e-5, "p99_abs": 2.0 * eager[g]["p99_abs"] + 1e-5}
            assert r["grad_error"][g]["max_abs"] <= lim["max_abs"], (name, g)
            assert r["grad_error"][g]["allclose_violations"] == 0 and r["grad_error"][g]["nonfinite"] == 0
            n = 1 * 2 * 64 * 16  # dq, dk, dv all (B, H, N, d) here (MHA)
            assert r["grad_error"][g]["elements"] == n
        assert r["grad_accuracy"]["pass"], (name, r["grad_accuracy"])
    # a real error is well above rounding: the bf16 eager chain's own dq error is a few 1e-3
    assert 1e-4 < eager["dq"]["max_abs"] < 5e-2


def test_both_speedups_and_tflops_are_from_the_medians(receipt):
    b, s = _shape(receipt)
    emed = s["eager"]["time_s"]["median"]
    mmed = s["results"][BASELINE]["time_s"]["median"]
    for name in FUSED:
        r = s["results"][name]
        assert r["speedup_vs_eager"] == emed / r["time_s"]["median"]
        assert r["speedup"] == mmed / r["time_s"]["median"]
        assert r["tflops"] == s["flops"] / r["time_s"]["median"] / 1e12
        assert r["peak_allocated_bytes"] > 0
    assert s["results"][BASELINE]["speedup_vs_eager"] == emed / mmed
    d = b["summary"]["decision"]
    assert d["backend"] in FUSED  # the geometric mean of one shape is that shape's ratio (up to exp(log(x)) rounding)
    assert d["speedup_vs_eager"] == pytest.approx(s["results"][d["backend"]]["speedup_vs_eager"], rel=1e-12)


def test_planted_wrong_gradient_fails():
    """A backend whose backward is 5% off (forward exact) runs, and fails the gradient rule on every tensor."""

    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, o):
            return o.clone()

        @staticmethod
        def backward(ctx, g):
            return g * 1.05

    wrong = Backend("sdpa-flash", "fused", True, "",
                    lambda inp: (lambda: WrongGrad.apply(attention_call("sdpa-flash", inp)())))
    m = _train_only()
    (bucket,) = m.buckets
    pol = load_policy(2)
    bes = training_backends([be for be in harness.available_backends("cpu") if be.name == BASELINE] + [wrong])
    s = run_shape(bucket, 0, m, "cpu", pol, bes, warmup=0, reps=3)
    r = s["results"]["sdpa-flash"]
    assert r["status"] == "ok" and r["accuracy"]["pass"]  # the forward is right
    assert not r["grad_accuracy"]["pass"]
    assert [x.split(":")[0] for x in r["grad_accuracy"]["reasons"]] == ["dq", "dq", "dk", "dk", "dv", "dv"]
    rec = {"schema": "iomodel-bench-receipt/1", "policy": {"version": 2}, "device": {"kind": "cpu"},
           "buckets": [{**{k: v for k, v in bucket.to_dict().items() if k != "shapes"}, "shapes": [s],
                        "summary": harness.summarize_bucket(bucket, [s], bes, "cpu", pol)}]}
    assert rec["buckets"][0]["summary"]["decision"]["backend"] is None  # a wrong gradient is never the decision
    v = check_receipt(rec, pol)
    assert any(f"shape {s['label']} sdpa-flash: gradient drift above policy: dq: max error" in x for x in v), v


def test_backend_without_backward_is_refused_not_replaced():
    no_bwd = Backend(KERNEL, "fused", True, "", lambda inp: (lambda: attention_call("sdpa-math", inp)().detach()))
    m = _train_only()
    (bucket,) = m.buckets
    bes = training_backends([be for be in harness.available_backends("cpu") if be.name == BASELINE] + [no_bwd])
    s = run_shape(bucket, 0, m, "cpu", load_policy(2), bes, warmup=0, reps=3)
    r = s["results"][KERNEL]
    assert r["status"] == "unsupported" and "no backward" in r["reasons"][-1]
    assert "time_s" not in r and "speedup" not in r


def test_planted_stale_training_numbers_are_rejected(receipt):
    b0, s0 = _shape(receipt)
    dec = b0["summary"]["decision"]["backend"]

    def violations(edit):
        t = copy.deepcopy(receipt)
        b, s = _shape(t)
        edit(b, s)
        return check_receipt(t)

    assert violations(lambda b, s: None) == []
    cases = [
        (lambda b, s: s["results"][KERNEL].update(speedup_vs_eager=s["results"][KERNEL]["speedup_vs_eager"] * 1.01),
         f"{KERNEL}: stored speedup over eager"),
        (lambda b, s: s["results"][KERNEL].update(tflops=s["results"][KERNEL]["tflops"] * 2), "TFLOP/s differs"),
        (lambda b, s: s.update(flops=s["flops"] * 2), "stored FLOPs 1863680 differ from 931840"),
        (lambda b, s: b["summary"]["decision"].update(speedup_vs_eager=9.0), "stored decision speedup over eager"),
        (lambda b, s: b["summary"]["backends"][dec].update(speedup_vs_eager_geomean=9.0),
         f"{dec}: stored geometric-mean speedup over eager"),
        (lambda b, s: s["eager"]["time_s"].update(median=s["eager"]["time_s"]["median"] / 10),
         "eager: median"),
        (lambda b, s: s["results"][KERNEL].update(peak_allocated_bytes=None), "no peak memory"),
        (lambda b, s: s["eager"].update(status="unsupported", reasons=["planted"]),
         "the eager chain (the gradient baseline) did not run (planted)"),
    ]
    for edit, words in cases:
        v = violations(edit)
        assert any(words in x for x in v), (words, v)
    # a gradient error raised past its limit, with the stored verdict left claiming success
    v = violations(lambda b, s: s["results"][KERNEL]["grad_error"]["dv"].update(
        max_abs=s["results"][KERNEL]["grad_accuracy"]["limits"]["dv"]["max_abs"] * 1.5))
    assert any(f"{KERNEL}: gradient drift above policy: dv: max error" in x for x in v), v
    # held to a policy without a gradient rule, the receipt says which policy it needs
    assert any("declares no gradient tolerance for bf16" in x for x in check_receipt(receipt, load_policy(1)))


# ------------------------------------------------------------------------------------
# Markdown
# ------------------------------------------------------------------------------------


def test_markdown_gives_the_training_rows(receipt):
    b, s = _shape(receipt)
    md = render_markdown(json.loads(json.dumps(receipt)))
    d = b["summary"]["decision"]
    r = s["results"][d["backend"]]
    row = next(x for x in md.splitlines() if x.startswith(f"| {b['signal']} (training weight 100%) |"))
    assert f"{d['speedup']:.2f}× faster than SDPA MATH (fp32 intermediates; geomean, policy ≥ 0×)" in row
    assert f"{d['speedup_vs_eager']:.2f}× vs the eager chain in bf16" in row
    assert f"N=64 B=1: fwd+bwd " in row and f"{r['tflops']:.3g} TFLOP/s" in row
    assert f"{r['speedup_vs_eager']:.2f}× vs eager, {r['speedup']:.2f}× vs math" in row
    lim = r["grad_accuracy"]["limits"]
    assert "(limits " + " / ".join(f"{lim[g]['max_abs']:.2g}" for g in ("dq", "dk", "dv")) + ")" in row
    assert "| training buckets, weighted | per-bucket decisions above |" in md
    assert "| all buckets, traffic-weighted |" not in md  # no forward bucket: no serving mix to weigh
    sec = md[md.index("## Training steps (forward + backward)"):md.index("## Backend log")]
    rows = [x for x in sec.splitlines() if x.startswith("| train-tiny |")]
    assert [x.split(" | ")[2] for x in rows] == [EAGER, BASELINE, "sdpa-flash", KERNEL]
    assert all(x.endswith("| pass |") for x in rows)
    k = next(x for x in rows if f"| {KERNEL} |" in x)
    kr = s["results"][KERNEL]
    assert f"| {kr['grad_error']['dq']['max_abs']:.2g} ({kr['grad_accuracy']['limits']['dq']['max_abs']:.2g}) |" in k
    assert "k | ε | rationale" in md and "the eager chain in the input dtype is the gradient baseline" in md


# ------------------------------------------------------------------------------------
# Matrices, policy, FLOPs
# ------------------------------------------------------------------------------------


def _unplaced(bucket) -> dict:
    """A bucket's fields without the line it sits on in its file."""
    return {k: v for k, v in bucket.to_dict().items() if k != "line"}


def test_cuda_v2_has_the_training_buckets_of_issue_11():
    m = load_matrix("cuda-v2")
    assert (m.name, m.version, m.policy) == ("cuda", 2, 3)  # checked under policy v3 since issue 13
    train = [b for b in m.buckets if b.training]
    assert [b.name for b in train] == ["train-causal-d64", "train-causal-d128"]
    for b, d in zip(train, (64, 128)):
        assert (b.phase, b.causal, b.causal_align, b.heads, b.kv_heads, b.head_dim, b.dtype) == \
            ("prefill", True, "top-left", 16, 16, d, "bf16")
        assert [(s.batch, s.seqlen_q, s.seqlen_k) for s in b.shapes] == [(8, 2048, 2048), (2, 8192, 8192)]
        assert all(s.batch * s.seqlen_q == 16384 for s in b.shapes)
    assert sum(b.weight for b in train) == 1.0
    # the forward buckets are cuda-v1's, unchanged; the bare name still means v1 (the committed receipt's)
    v1 = load_matrix("cuda")
    assert v1.version == 1 and v1.path.endswith("cuda-v1.toml")
    assert [_unplaced(b) for b in m.buckets if not b.training] == [_unplaced(b) for b in v1.buckets]
    assert load_policy(m.policy).grad_tol("bf16").k == 2.0
    assert all(load_policy(2).min_speedup("cuda", b.name) == 2.0 for b in train)


def test_cpu_v2_is_cpu_v1_plus_a_tiny_training_bucket():
    m, v1 = load_matrix("cpu-v2"), load_matrix("cpu")
    assert (m.version, m.policy, v1.version) == (2, 3, 1)  # checked under policy v3 since issue 13
    assert [_unplaced(b) for b in m.buckets if not b.training] == [_unplaced(b) for b in v1.buckets]
    (t,) = [b for b in m.buckets if b.training]
    assert (t.name, t.heads, t.head_dim, [(s.batch, s.seqlen_q) for s in t.shapes]) == ("train-tiny", 2, 16, [(1, 64)])
    assert load_policy(2).min_speedup("cpu", "train-tiny") == 0.0
    text = (MATRICES_DIR / "cpu-v2.toml").read_text()
    assert "Changelog" in text and '"fwd+bwd"' in text and "version = 2" in text


def test_step_flops_hand_counted():
    # forward 4*B*H*d*pairs; training x 3.5; causal top-left pairs N(N+1)/2, bottom-right with N_q < N_k more
    assert step_flops(1, 2, 2, 16, 64, 64, True, "top-left", True) == 931_840
    assert step_flops(1, 2, 2, 16, 64, 64, True, "top-left", False) == 4 * 2 * 16 * 2080
    assert step_flops(2, 16, 16, 128, 8192, 8192, True, "top-left", True) == 7 * 2 * 2 * 16 * 128 * 8192 * 8193 // 2
    assert step_flops(1, 1, 1, 8, 2, 4, True, "bottom-right", True) == 14 * 8 * (3 + 4)  # rows see 3 and 4 keys
    assert step_flops(3, 4, 2, 32, 10, 10, False, "top-left", True) == 14 * 3 * 4 * 32 * 100


def test_policy_v1_has_no_gradient_rule_and_says_what_to_use():
    with pytest.raises(IomodelError, match=r"policy v1 declares no gradient tolerance for bf16.*\[gradient.bf16\]"):
        load_policy(1).grad_tol("bf16")
    with pytest.raises(IomodelError, match="no gradient tolerance"):
        run_bench(_train_only(), "cpu", load_policy(1), reps=3)
    p2 = load_policy(2)
    for dt in ("fp32", "fp16", "bf16"):
        g = p2.grad_tol(dt)
        assert (g.k, g.eps) == (2.0, 1e-5) and g.rationale
        assert p2.tol(dt) == load_policy(1).tol(dt)  # v2 keeps every forward number of v1


GOOD2 = """version = 2
policy = 2
name = "t"

[timing]
reps = 3

[[bucket]]
name = "p"
weight = 1.0
phase = "prefill"
heads = 2
kv_heads = 2
head_dim = 16
dtype = "bf16"
shapes = [ { batch = 1, seqlen_q = 32, seqlen_k = 32 } ]

[[bucket]]
name = "t"
weight = 1.0
phase = "prefill"
pass = "fwd+bwd"
causal = true
heads = 2
kv_heads = 1
head_dim = 16
dtype = "fp32"
shapes = [ { batch = 1, seqlen_q = 32, seqlen_k = 32 } ]
"""


def test_pass_field_parses():
    m = parse_matrix(GOOD2, "m.toml")
    p, t = m.buckets
    assert (p.passes, p.training, t.passes, t.training, m.policy) == ("fwd", False, "fwd+bwd", True, 2)
    assert t.to_dict()["pass"] == "fwd+bwd" and "passes" not in t.to_dict()
    assert t.signal() == "training step (fwd+bwd), 32 keys, causal top-left, GQA 2/1, d=16 fp32"
    assert p.signal() == "prefill, 32 keys, d=16 bf16"


@pytest.mark.parametrize("old, new, line, words", [
    ('pass = "fwd+bwd"', 'pass = "bwd"', 22, ["bucket 't'", "pass 'bwd' is unknown", "use 'fwd' or 'fwd+bwd'"]),
    ('pass = "fwd+bwd"', "pass = true", 22, ["pass True is unknown"]),
    ('phase = "prefill"\npass', 'phase = "decode"\npass', 21, ["must have phase 'prefill'", "decode has no backward"]),
    ("version = 2\npolicy = 2", "version = 1", 21, ["'pass' needs matrix schema version 2"]),
    ("policy = 2", "policy = 0", 2, ["policy", "integer >= 1"]),
    ("{ batch = 1, seqlen_q = 32, seqlen_k = 32 } ]\n", "{ batch = 1, seqlen_q = 32, seqlen_k = 32, lengths = [9] } ]\n",
     28, ["shape #1 has lengths in a fwd+bwd bucket", "drop lengths"]),
    ('name = "t"\nweight = 1.0', 'name = "t"\nweight = 0.5', 18, ["sum to 0.5", "fwd+bwd (training) buckets"]),
])
def test_bad_pass_values_give_one_line_with_the_line(old, new, line, words):
    assert old in GOOD2
    msg = _err(new.join(GOOD2.rsplit(old, 1)))  # the last occurrence: the training bucket's
    assert re.match(rf"m\.toml line {line}: ", msg), msg
    for w in words:
        assert w in msg, msg


def test_version_1_file_refuses_policy_key():
    msg = _err("version = 1\npolicy = 2\n")
    assert msg.startswith("m.toml line 2: 'policy' needs matrix schema version 2"), msg


# ------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------


def test_cli_runs_a_training_matrix_under_the_policy_it_names(tmp_path, capsys):
    from iomodel.cli import main

    text = (MATRICES_DIR / "cpu-v2.toml").read_text()
    start = text.index('[[bucket]]\nname = "train-tiny"')
    head = text[:text.index("\n[workload]\n") + 1]
    m = tmp_path / "train.toml"
    m.write_text(head + text[start:])
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as e:
        main(["bench", "--device", "cpu", "--matrix", str(m), "-o", str(out), "--reps", "3", "--warmup", "0",
              "--no-progress"])
    assert e.value.code in (0, None), capsys.readouterr().out
    text_out = capsys.readouterr().out
    assert "policy v3" in text_out and "within policy v3" in text_out  # the policy cpu-v2 names (issue 13)
    r = json.loads(out.read_text())
    assert r["policy"]["version"] == 3 and r["matrix"]["policy"] == 3 and r["buckets"][0]["pass"] == "fwd+bwd"
    assert "## Training steps (forward + backward)" in Path(out.with_suffix(".md")).read_text()
    with pytest.raises(SystemExit) as e:
        main(["bench", "--check", str(out)])
    assert e.value.code in (0, None) and "PASS" in capsys.readouterr().out
