"""The bundled backward kernels against the fp64 gradients (Triton interpreter on a CPU).

Error rule (issue 11): per tensor (dq, dk, dv), the kernel's max and 99th-percentile absolute
error against the fp64 reference are at most 2x the same errors of the eager chain's autograd
gradients in the same dtype (``kernels.baseline.eager_attention``) plus 1e-5. Rows that see
no key give dq = 0 exactly; keys no row sees give dk = dv = 0 exactly; no NaN anywhere. The
eager chain's gradient of a row that sees no key is NaN (softmax of an all -inf row): those
entries are taken as 0, the exact gradient, for its error.

The TMA kernels (``BackwardConfig.tma``: Q, dO, K, V through tensor descriptors, with the
causal mask split of MHA and the fused launch) run on the random shapes they take (fp16/bf16,
a power-of-two HEAD_DIM; no window here, atomic_dq off) under the same rule: each such shape
also runs one TMA variant, in turn (:data:`TMA_RUNS`), so every variant sees several shapes
and the suite one extra backward per shape.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

import kernels.backward as bw
import kernels.flash_attention as fa
from iomodel.errors import IomodelError
from kernels.backward import flash_attention_backward
from kernels.baseline import eager_attention
from kernels.flash_attention import flash_attention
from kernels.heuristics import INTERPRETER_BACKWARD
from kernels.reference import reference_attention_backward, visible_mask

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not fa.INTERPRET, reason="interpreter tests (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}


def _random_cases(n: int, seed: int = 11):
    rnd = random.Random(seed)
    cases = []
    for i in range(n):
        H_kv = rnd.choice([1, 2])
        G = [1, 2, 4][i % 3]
        d = 128 if i % 11 == 0 else rnd.choice([16, 32, 32, 48, 64])
        N_q, N_k = rnd.randint(1, 80), rnd.randint(1, 80)
        if i % 6 == 1:  # rows that see no key: bottom-right with N_q > N_k
            N_q, N_k = rnd.randint(20, 70), rnd.randint(1, 15)
        if i % 6 == 4:  # keys no row sees: top-left with N_k > N_q
            N_q, N_k = rnd.randint(1, 30), rnd.randint(40, 80)
        causal = i % 6 in (1, 4) or rnd.random() < 0.6
        align = "bottom-right" if i % 6 == 1 else "top-left" if i % 6 == 4 else rnd.choice(["top-left", "bottom-right"])
        dtype = ["fp16", "bf16", "fp32"][(i // 3) % 3]
        cases.append((rnd.choice([1, 2]), H_kv * G, H_kv, N_q, N_k, d, dtype, causal, align))
    return cases


CASES = _random_cases(44)

#: The TMA variants of the backward (flags over ``INTERPRETER_BACKWARD``); the mask split applies
#: to causal MHA only, so the causal MHA shapes take the three in turn and the others two.
TMA_VARIANTS = {"tma": dict(tma=True), "tma-ms": dict(tma=True, mask_split=True),
                "fused": dict(tma=True, mask_split=True, fused_launch=True)}


def _tma_runs(cases) -> dict[int, str]:
    """Case index -> the TMA variant it also runs, for the cases the TMA kernels take."""
    runs, turn = {}, {True: 0, False: 0}
    for i, (B, H, H_kv, N_q, N_k, d, dtype, causal, align) in enumerate(cases):
        if dtype == "fp32" or d & (d - 1):  # the pointer kernels only (capabilities.tma_refusal)
            continue
        split = causal and H == H_kv  # the mask split applies
        names = ["tma-ms", "tma", "fused"] if split else ["tma", "fused"]
        runs[i] = names[turn[split] % len(names)]
        turn[split] += 1
    return runs


TMA_RUNS = _tma_runs(CASES)
#: Case index -> the group split S its pointer kernels also run with (the fp32 partials and ``_bwd_reduce_dkdv``), for
#: every GQA/MQA case: S = 2 where the group G is 2; 2, 3 and 4 in turn where it is 4 (3 slices of 4 heads are unequal).
SPLIT_RUNS = {i: 2 + n % (c[1] // c[2] - 1)
              for n, (i, c) in enumerate((i, c) for i, c in enumerate(CASES) if c[1] > c[2])}


def test_cases_cover_the_issue_matrix():
    assert len(CASES) >= 40
    assert {c[6] for c in CASES} == {"fp16", "bf16", "fp32"}
    assert {c[8] for c in CASES if c[7]} == {"top-left", "bottom-right"}
    assert any(c[2] == 1 and c[1] > 1 for c in CASES) and any(1 < c[2] < c[1] for c in CASES)  # MQA, GQA
    assert any(c[7] and c[8] == "bottom-right" and c[3] > c[4] for c in CASES)  # rows that see no key
    assert any(c[7] and c[8] == "top-left" and c[4] > c[3] for c in CASES)  # keys no row sees
    assert any(c[3] % 16 and c[4] % 32 for c in CASES)  # ragged tails of both tiles
    assert {16, 32, 48, 64, 128} <= {c[5] for c in CASES}
    # the TMA variants: each on several shapes, the mask split on causal MHA of both alignments,
    # tma and fused on GQA/MQA, rows that see no key among them; every power-of-two HEAD_DIM
    tma = {name: [CASES[i] for i, n in TMA_RUNS.items() if n == name] for name in TMA_VARIANTS}
    assert len(TMA_RUNS) >= 20 and all(len(v) >= 2 for v in tma.values())
    assert {c[8] for c in tma["tma-ms"] if c[7] and c[1] == c[2]} == {"top-left", "bottom-right"}
    assert all(any(c[2] < c[1] for c in tma[n]) for n in ("tma", "fused"))
    assert any(c[7] and c[8] == "bottom-right" and c[3] > c[4] for c in tma["tma"] + tma["fused"])
    assert {16, 32, 64, 128} <= {c[5] for c in tma["tma"] + tma["tma-ms"] + tma["fused"]}
    # the group split on every GQA/MQA case: S = 2, 3 and 4 of groups of 4 among them, both alignments, rows without keys
    split = [(CASES[i], S) for i, S in SPLIT_RUNS.items()]
    assert len(split) >= 20 and {S for c, S in split if c[1] // c[2] == 4} == {2, 3, 4}
    assert any(S < c[1] // c[2] for c, S in split) and {c[8] for c, _ in split if c[7]} == {"top-left", "bottom-right"}
    assert any(c[7] and c[8] == "bottom-right" and c[3] > c[4] for c, _ in split)


def _make(B, H, H_kv, N_q, N_k, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).to(dtype) for s in ((B, H, N_q, d), (B, H_kv, N_k, d), (B, H_kv, N_k, d),
                                                              (B, H, N_q, d))]


def _errors(x: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    e = (x.double() - ref).abs().flatten()
    return e.max().item(), torch.quantile(e, 0.99).item()


def _eager_grads(q, k, v, do, causal, align):
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v)]
    o = eager_attention(*leaves, causal=causal, causal_align=align)
    o.backward(do)
    return [torch.nan_to_num(t.grad, nan=0.0) for t in leaves]


def check_gradients(q, k, v, do, causal, align, *grad_sets):
    """The error rule and the exact zeros of the module docstring, for each ``(dq, dk, dv)``
    of ``grad_sets`` (one fp64 reference and one eager chain for all of them)."""
    refs = reference_attention_backward(do, q, k, v, causal, align)
    eager = [_errors(eag, ref) for eag, ref in zip(_eager_grads(q, k, v, do, causal, align), refs)]
    vis = visible_mask(q.shape[2], k.shape[2], causal, align)
    for n, grads in enumerate(grad_sets):
        for name, ours, ref, (e_max, e_p99) in zip(("dq", "dk", "dv"), grads, refs, eager):
            name = (n, name)
            assert ours.dtype == q.dtype and tuple(ours.shape) == tuple(ref.shape) and not torch.isnan(ours).any(), name
            o_max, o_p99 = _errors(ours, ref)
            assert o_max <= 2 * e_max + 1e-5, (name, o_max, e_max)
            assert o_p99 <= 2 * e_p99 + 1e-5, (name, o_p99, e_p99)
        dq, dk, dv = grads
        assert (dq[:, :, ~vis.any(1)] == 0).all(), n  # rows that see no key
        assert (dk[:, :, ~vis.any(0)] == 0).all() and (dv[:, :, ~vis.any(0)] == 0).all(), n  # keys no row sees


@pytest.mark.parametrize("index", range(len(CASES)), ids=[
    f"{i}-B{c[0]}H{c[1]}kv{c[2]}-q{c[3]}k{c[4]}-d{c[5]}-{c[6]}-{c[8] if c[7] else 'full'}"
    + (f"+{TMA_RUNS[i]}" if i in TMA_RUNS else "") + (f"+S{SPLIT_RUNS[i]}" if i in SPLIT_RUNS else "")
    for i, c in enumerate(CASES)])
def test_backward_matches_reference(index):
    B, H, H_kv, N_q, N_k, d, dtype, causal, align = CASES[index]
    q, k, v, do = _make(B, H, H_kv, N_q, N_k, d, DTYPES[dtype], seed=500 + index)
    o, lse = flash_attention(q, k, v, causal, align, path="prefill")
    grad_sets = [flash_attention_backward(do, q, k, v, o, lse, causal, align)]
    if index in TMA_RUNS:  # and the TMA kernels on the shapes they take, one variant per shape
        flags = TMA_VARIANTS[TMA_RUNS[index]]
        *grads, ran = flash_attention_backward(do, q, k, v, o, lse, causal, align, return_config=True,
                                               config=replace(INTERPRETER_BACKWARD, **flags))
        assert (ran.tma, ran.mask_split, ran.fused_launch) == (  # they ran, the mask split on causal MHA only
            True, flags.get("mask_split", False) and causal and H == H_kv, flags.get("fused_launch", False))
        grad_sets.append(grads)
    if index in SPLIT_RUNS:  # and the group split: S slices' fp32 partials summed by _bwd_reduce_dkdv
        *grads, ran = flash_attention_backward(do, q, k, v, o, lse, causal, align, return_config=True,
                                               config=replace(INTERPRETER_BACKWARD, group_splits=SPLIT_RUNS[index]))
        assert ran.group_splits == SPLIT_RUNS[index]
        grad_sets.append(grads)
    check_gradients(q, k, v, do, causal, align, *grad_sets)


def test_autograd_runs_the_backward_kernels():
    q, k, v, do = _make(2, 4, 2, 37, 45, 32, torch.float16, seed=7)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o, lse = flash_attention(*leaves, causal=True, causal_align="bottom-right")
    assert type(o.grad_fn).__name__ == "FlashAttentionFunctionBackward" and not lse.requires_grad
    o.backward(do)
    check_gradients(q, k, v, do, True, "bottom-right", [t.grad for t in leaves])
    # an expanded (stride 0) gradient, as o.sum().backward() gives, is laid out by the Function
    leaves2 = [t.clone().requires_grad_(True) for t in (q, k, v)]
    flash_attention(*leaves2, causal=True, causal_align="bottom-right")[0].float().sum().backward()
    check_gradients(q, k, v, torch.ones_like(q), True, "bottom-right", [t.grad for t in leaves2])


def test_autograd_checks_the_gradient_of_o_before_our_backward(monkeypatch):
    """Through ``o.backward(do)`` PyTorch checks dO itself before any backward runs: a wrong
    shape is its own one-line RuntimeError (raised in ``torch.autograd.backward``, for the
    root, so FlashAttentionFunction.backward is never called and cannot rephrase it), and
    another dtype is cast to o's by the engine, so the kernels get fp16 and the same gradients
    (FlashAttentionFunction.backward's docstring). dO reaching the Function is checked where
    every dO is, in ``flash_attention_backward``."""
    q, k, v, do = _make(1, 2, 1, 20, 24, 32, torch.float16, seed=8)
    calls = []
    real = bw.flash_attention_backward
    monkeypatch.setattr(bw, "flash_attention_backward", lambda *a, **kw: calls.append(a[0].dtype) or real(*a, **kw))
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    o, _ = flash_attention(*leaves, causal=True)
    for bad in (do[..., :-1], do[:, :1]):
        with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
            o.backward(bad, retain_graph=True)
    assert calls == []  # refused before our backward
    o.backward(do.float(), retain_graph=True)
    cast = [t.grad.clone() for t in leaves]
    for t in leaves:
        t.grad = None
    o.backward(do)
    assert calls == [torch.float16, torch.float16] and all(torch.equal(a, t.grad) for a, t in zip(cast, leaves))


class _Planted:
    """A kernel launcher that runs the real kernel with its ``sm_scale`` argument off by ``rel``."""

    def __init__(self, kernel, rel):
        self.kernel, self.rel = kernel, rel
        self.index = {"_bwd_dq": 7, "_bwd_dkdv": 8, "_bwd_dq_tma": 7, "_bwd_dkdv_tma": 8}[kernel.__name__]  # sm_scale

    def __getattr__(self, name):  # arg_names, fn: the launch plan reads the kernel's parameters
        return getattr(self.kernel, name)

    def __getitem__(self, grid):
        def launch(*args, **kw):
            args = list(args)
            args[self.index] = args[self.index] * (1 + self.rel)
            return self.kernel[grid](*args, **kw)
        return launch


@pytest.mark.parametrize("kernel", ["_bwd_dq", "_bwd_dkdv", "_bwd_dq_tma", "_bwd_dkdv_tma"])
def test_planted_error_fails_the_rule(monkeypatch, kernel):
    """A scale error of 3e-3 planted in one backward kernel is caught by the rule (the TMA
    kernels: fp16, the dtype they take, on the TMA config)."""
    tma = kernel.endswith("_tma")
    q, k, v, do = _make(1, 2, 1, 40, 40, 32, torch.float16 if tma else torch.float32, seed=3)
    o, lse = flash_attention(q, k, v, True)
    config = replace(INTERPRETER_BACKWARD, tma=tma)
    check_gradients(q, k, v, do, True, "top-left", flash_attention_backward(do, q, k, v, o, lse, True, config=config))
    monkeypatch.setattr(bw, kernel, _Planted(getattr(bw, kernel), 3e-3))
    with pytest.raises(AssertionError):
        check_gradients(q, k, v, do, True, "top-left",
                        flash_attention_backward(do, q, k, v, o, lse, True, config=config))


@pytest.mark.parametrize("change, fragment", [
    (lambda t: {**t, "do": t["do"][..., :-1]}, "do must have shape"),
    (lambda t: {**t, "do": t["do"].to(torch.float16)}, "do must be torch.float32"),
    (lambda t: {**t, "do": t["do"].transpose(-1, -2).contiguous().transpose(-1, -2)}, "contiguous in its last dimension"),
    (lambda t: {**t, "lse": t["lse"].to(torch.float16)}, "lse must be torch.float32"),
    (lambda t: {**t, "o": [1]}, "o must be a torch.Tensor"),
])
def test_bad_gradient_inputs_are_one_line(change, fragment):
    q, k, v, do = _make(1, 2, 1, 20, 20, 32, torch.float32, seed=4)
    o, lse = flash_attention(q, k, v)
    t = change(dict(do=do, o=o, lse=lse))
    with pytest.raises(IomodelError, match=fragment):
        flash_attention_backward(t["do"], q, k, v, t["o"], t["lse"])


def test_backward_through_forced_decode_path_is_refused():
    q, k, v, _ = _make(1, 2, 1, 4, 30, 32, torch.float32, seed=5)
    with pytest.raises(IomodelError, match="split-KV decode path has no backward: use path='prefill'"):
        flash_attention(q.requires_grad_(True), k, v, path="decode-split-kv")


def test_backward_under_the_issue_name():
    """Issue 11 names the functional backward ``kernels.flash_attention.flash_attention_backward``: the same function
    as ``kernels.backward.flash_attention_backward`` (a lazy attribute: that module imports this one)."""
    import kernels.backward as bw
    from kernels.flash_attention import flash_attention_backward

    assert flash_attention_backward is bw.flash_attention_backward


def test_double_backward_is_one_clear_error():
    """The kernels have no double backward: gradients taken with create_graph=True carry a node that raises one error
    saying what to use instead, even where dO itself needs no grad (o.sum(): PyTorch's once_differentiable misses that
    case and returns gradients without a grad_fn)."""
    q, k, v, _ = _make(1, 2, 1, 20, 20, 32, torch.float32, seed=6)
    q.requires_grad_(True)
    o, _ = flash_attention(q, k, v)
    (dq,) = torch.autograd.grad(o.sum(), q, create_graph=True)
    assert dq.grad_fn is not None and torch.isfinite(dq).all()
    with pytest.raises(RuntimeError, match="flash_attention has no double backward .* take higher-order gradients "
                                           "through kernels.baseline.eager_attention or torch SDPA's MATH backend"):
        dq.sum().backward()
    # without create_graph the first backward is as before
    q2 = q.detach().clone().requires_grad_(True)
    o2, _ = flash_attention(q2, k, v)
    o2.sum().backward()
    assert torch.equal(q2.grad, dq.detach())
