"""The eager chain's backward as the kernels autograd launches (issue 11, item 4).

Hand-computed HBM bytes of the backward rows for small shapes, the launch list against the
ATen ops ``torch.profiler`` sees on the CPU, and the train1 receipt's four eager steps
(calibration data: the launch list was read off their kernels, the bytes are not fitted).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from iomodel.spec import LayerSpec
from iomodel.traffic.baseline import baseline_model, eager_launches

RECEIPT = Path(__file__).resolve().parents[1] / "receipts" / "ncu-h200-train1-2026-12-01.json"
_VALS = None


def _bwd(spec: LayerSpec) -> list[tuple[str, int, int]]:
    """(step, read bytes, write bytes) of each backward launch, numbers."""
    from iomodel.traffic.base import SYM

    vals = {SYM.B: spec.batch, SYM.H: spec.heads, SYM.H_kv: spec.kv_heads, SYM.d: spec.head_dim,
            SYM.N_q: spec.seqlen_q, SYM.N_k: spec.seqlen_k, SYM.s: spec.width}
    rows = baseline_model(spec).rows
    out = []
    for la in eager_launches(spec):
        if la.backward:
            rs = [r for r in rows if r.step == la.step]
            out.append((la.step, sum(int(r.read_bytes.subs(vals)) for r in rs),
                        sum(int(r.write_bytes.subs(vals)) for r in rs)))
    return out


# B=1, N=8, d=4, fp16 (2 B). MHA (H=2): Q-sized x = 1*2*8*4*2 = 128 B, score-sized S = 1*2*8*8*2 = 256 B.
# GQA (H=4, H_kv=2, G=2): x = 256 B (Q and K_rep), K = 128 B, S = 512 B; the sums over the group run last.
@pytest.mark.parametrize("heads, kv_heads, x, k, S, r", [(2, 2, 128, 128, 256, ""), (4, 2, 256, 128, 512, "_rep")])
def test_backward_bytes_by_hand(heads, kv_heads, x, k, S, r):
    spec = LayerSpec(1, heads, kv_heads, 4, 8, 8, dtype="fp16", backward=True)
    sums = [(f"d{t} = d{t}_rep.view(B, H_kv, G, N_k, d).sum(2)", x, k) for t in ("V", "K")] if r else []
    assert _bwd(spec) == [
        (f"dV{r} = Pᵀ @ dO", S + x, x),
        (f"dP = dO @ V{r}ᵀ", x + x, S),
        ("T = dP * P", 2 * S, S),
        ("dS = softmax_backward(T, P)", 2 * S, S),
        ("dS = dS * sm_scale", S, S),
        (f"dK{r} = dSᵀ @ Q", S + x, x),
        (f"dQ = dS @ K{r}", S + x, x),
    ] + sums


def test_causal_backward_bytes_by_hand():
    # causal adds dS.masked_fill(~mask, 0): reads dS (256 B) and the (8, 8) bool mask (64 B), writes dS
    spec = LayerSpec(1, 2, 2, 4, 8, 8, dtype="bf16", causal=True, backward=True)
    got = _bwd(spec)
    assert [g[0] for g in got] == ["dV = Pᵀ @ dO", "dP = dO @ Vᵀ", "T = dP * P", "dS = softmax_backward(T, P)",
                                   "dS = dS.masked_fill(~mask, 0)", "dS = dS * sm_scale", "dK = dSᵀ @ Q",
                                   "dQ = dS @ K"]
    assert got[4] == ("dS = dS.masked_fill(~mask, 0)", 256 + 64, 256)
    # bottom-right with N_q > N_k: rows without keys add dP.masked_fill(inv[:, :1], 0) (N_q = 8 mask bytes)
    br = _bwd(LayerSpec(1, 2, 2, 4, 8, 4, dtype="bf16", causal=True, causal_align="bottom-right", backward=True))
    # x = 128 B, K-sized 1*2*4*4*2 = 64 B, S = 1*2*8*4*2 = 128 B, mask 8*4 = 32 B
    assert br[:3] == [("dV = Pᵀ @ dO", 128 + 128, 64), ("dP = dO @ Vᵀ", 128 + 64, 128),
                      ("dP = dP.masked_fill(inv[:, :1], 0)", 128 + 8, 128)]
    assert br[5] == ("dS = dS.masked_fill(~mask, 0)", 128 + 32, 128)


def test_upcast_backward_casts_run_last_v_k_q():
    spec = LayerSpec(1, 4, 2, 4, 8, 8, dtype="bf16", backward=True)
    steps = [la.step for la in eager_launches(spec, score_dtype="fp32") if la.backward]
    assert steps[0] == "dO32 = dO.to(fp32)"
    assert steps[-5:] == ["dV_rep = dV32.to(bf16)", "dK_rep = dK32.to(bf16)", "dQ = dQ32.to(bf16)",
                          "dV = dV_rep.view(B, H_kv, G, N_k, d).sum(2)", "dK = dK_rep.view(B, H_kv, G, N_k, d).sum(2)"]


_VIEWS = {"aten::transpose", "aten::reshape", "aten::squeeze", "aten::view", "aten::expand", "aten::unsqueeze",
          "aten::_unsafe_view", "aten::detach", "aten::t", "aten::flatten", "aten::slice"}


def _profiled_ops(spec: LayerSpec, score_dtype=None) -> tuple[list[str], list[tuple]]:
    """Top-level ATen ops (views dropped) of one eager training step on the CPU, and the
    input shapes of each backward bmm."""
    from torch.profiler import ProfilerActivity, profile

    from kernels.baseline import eager_attention

    g = torch.Generator().manual_seed(0)
    mk = lambda h, n: torch.randn(spec.batch, h, n, spec.head_dim, generator=g).to(torch.bfloat16).requires_grad_()  # noqa: E731
    q, k, v = mk(spec.heads, spec.seqlen_q), mk(spec.kv_heads, spec.seqlen_k), mk(spec.kv_heads, spec.seqlen_k)
    do = torch.randn(q.shape, generator=g).to(torch.bfloat16)
    with torch.autograd.set_multithreading_enabled(False), profile(activities=[ProfilerActivity.CPU],
                                                                    record_shapes=True) as prof:
        o = eager_attention(q, k, v, causal=spec.causal, causal_align=spec.causal_align, score_dtype=score_dtype)
        torch.autograd.grad(o, [q, k, v], do)
    top = [e for e in prof.events() if e.name.startswith("aten::")
           and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
    ops = [e.name for e in top if e.name not in _VIEWS]
    bmm = [tuple(tuple(s) for s in e.input_shapes[:2]) for e in top if e.name == "aten::bmm"]
    return ops, bmm


@pytest.mark.parametrize("spec, score_dtype", [
    (LayerSpec(1, 2, 2, 4, 6, 5, dtype="bf16", backward=True), None),
    (LayerSpec(1, 4, 2, 4, 6, 5, dtype="bf16", causal=True, backward=True), None),
    (LayerSpec(1, 4, 2, 4, 6, 5, dtype="bf16", causal=True, causal_align="bottom-right", backward=True), None),
    (LayerSpec(1, 4, 2, 4, 6, 5, dtype="bf16", causal=True, backward=True), "fp32"),
])
def test_launch_list_is_what_autograd_runs_on_the_cpu(spec, score_dtype):
    """The model's launches are the ATen ops the profiler lists, in order; the CPU's softmax
    backward runs the grad * output product inside itself (one CUDA-only launch fewer)."""
    ops, bmm = _profiled_ops(spec, score_dtype)
    launches = eager_launches(spec, score_dtype=score_dtype)
    assert ops == [la.op for la in launches if not la.cuda_only]
    assert [la.step for la in launches if la.cuda_only] == ["T = dP * P"]
    # the backward bmms: dV = Pᵀ dO before dP = dO Vᵀ, dKᵀ = Qᵀ dS (the gradient of the Kᵀ view)
    # before dQ = dS K
    BH, Nq, Nk, d = spec.batch * spec.heads, spec.seqlen_q, spec.seqlen_k, spec.head_dim
    assert bmm == [((BH, Nk, Nq), (BH, Nq, d)), ((BH, Nq, d), (BH, d, Nk)),
                   ((BH, d, Nq), (BH, Nq, Nk)), ((BH, Nq, Nk), (BH, Nk, d))]


def test_train1_eager_steps_per_step_and_per_kernel():
    """The four eager steps of the train1 receipt: every profiled kernel is the modelled launch
    of its position, and the L2-aware estimate is within 2.5 % of the DRAM bytes per step
    (reads 1.000, 0.980, 1.002, 0.977 measured/predicted; writes 1.003, 0.999, 1.006, 1.000)."""
    from iomodel.measure.records import Measurement
    from iomodel.reconcile import reconcile

    m = Measurement.load(RECEIPT)
    rec = reconcile(m, impls=["baseline"])
    shapes = {s.id: s for s in m.shapes}
    ratios = {}
    for r in rec.rows:
        s = shapes[r.id]
        launches = eager_launches(s.spec)
        assert len(launches) == len(s.kernels) == len(r.l2.kernels)
        for la, k in zip(launches, s.kernels):
            assert any(x in k.name for x in la.kernel), (la.step, k.name)
        h = r.level("HBM")
        ratios[r.id] = (round(h.measured_read / h.predicted_read, 3), round(h.measured_write / h.predicted_write, 3))
        assert any(n.startswith("per kernel, DRAM read/write MiB predicted vs measured: 1 ") for n in r.notes)
        assert not any("differ from the modelled launch" in n for n in r.notes)
    assert ratios == {
        "b8-h16-kv16-d64-fp16-q1024-k1024-nc-baseline-bwd": (1.0, 1.003),
        "b2-h16-kv16-d64-bf16-q2048-k2048-tl-baseline-bwd": (0.98, 0.999),
        "b1-h16-kv16-d128-bf16-q4096-k4096-nc-baseline-bwd": (1.002, 1.006),
        "b4-h32-kv8-d128-fp16-q1024-k1024-tl-baseline-bwd": (0.977, 1.0),
    }
    assert [rec.within(r, "HBM", w) for r in rec.rows for w in ("read", "write")] == [True] * 8
