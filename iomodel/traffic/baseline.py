"""The eager baseline: materialised scores S = QKᵀ → scale → (mask) → softmax → P·V, op by op.

Rows match ``kernels/baseline.py`` (the chain fixed in the project's API agreement): each
numbered step is one separate torch op that reads each input once and writes its output
once, all at the HBM level (the no-reuse model: an N_q×N_k score matrix does not fit in
L2 for the shapes of interest, so nothing is caught above SRAM). The backward is the
autograd chain of that forward.

Sources: PyTorch ``torch.nn.functional.scaled_dot_product_attention`` documentation (the
MATH backend is the reference implementation written as these eager ops). PyTorch's MATH
backend (``aten/src/ATen/native/transformers/attention.cpp``,
``_scaled_dot_product_attention_math``) upcasts fp16/bf16 query, key and value to fp32
unless ``torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)`` is set; the option
``score_dtype="fp32"`` models that (upcast copies, fp32 S and P, fp32 O cast back).
Dao et al. 2022, FlashAttention, Section 2.2 (standard attention implementation,
Algorithm 0) for the Θ(Nd + N²) HBM accesses.

Backward, saved tensors: ``Q @ Kᵀ`` saves its operands (Q or Q32, K/K_rep/K32),
``masked_fill`` saves the inverted mask, ``softmax`` saves P, ``P @ V`` saves P and V
(V_rep/V32), dropout saves its keep-mask; S itself is not saved. Each backward op below
reads what it needs once and writes its gradient once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy as sp

from iomodel.spec import DTYPES, FP32_WIDTH, LSE_WIDTH, LayerSpec, canonical_dtype
from iomodel.spec.dtypes import eager_backward_refusal, eager_score_dtype
from iomodel.traffic.base import SYM, AlgorithmModel, Allocation, Row, make_row

MASK_WIDTH = 1  # torch.bool is one byte per element


def _score_dtype(spec: LayerSpec, score_dtype: str | None) -> tuple[str, sp.Expr, bool]:
    """(name, width expression, upcast?) of the score tensors S and P (``None``: :func:`eager_score_dtype` of the
    input, which upcasts fp8)."""
    if score_dtype is None:
        score_dtype = eager_score_dtype(spec.dtype)
    if canonical_dtype(score_dtype) == spec.dtype:
        return spec.dtype, SYM.s, False
    name = canonical_dtype(score_dtype)
    return name, sp.Integer(DTYPES[name]), True


def baseline_model(
    spec: LayerSpec,
    *,
    score_dtype: str | None = None,
    dropout: bool = False,
    extra_score_passes: int = 0,
    with_lse: bool = False,
) -> AlgorithmModel:
    """Symbolic HBM traffic of the eager op chain, forward and (``spec.backward``) backward.

    Tensors: Q ``(B, H, N_q, d)``, K/V ``(B, H_kv, N_k, d)``, S/P ``(B, H, N_q, N_k)`` in the
    score dtype, causal mask ``(N_q, N_k)`` bool (1 byte), O ``(B, H, N_q, d)``.

    Args:
        spec: the layer.
        score_dtype: dtype of S, P (and of the upcast Q, K, V and O before the final cast);
            ``None`` (default) = the input dtype (bf16 for fp8 inputs, which PyTorch cannot multiply:
            :data:`iomodel.spec.dtypes.EAGER_SCORE_DTYPE`), exactly ``kernels/baseline.py`` with
            ``score_dtype=None``. ``"fp32"`` models PyTorch's MATH backend for half inputs.
        dropout: add ``torch.nn.functional.dropout(P)`` (reads P, writes P and its 1-byte
            keep-mask, which autograd saves). Default off.
        extra_score_passes: further elementwise passes over S (bias, soft-cap ...), each
            reading and writing S once (and dS once in the backward). Default 0.
        with_lse: also ``lse = torch.logsumexp(S, -1)`` (reads S, writes LSE in the score
            dtype, then ``.to(fp32)`` if that is not fp32), as ``eager_attention_with_lse``.
            Default off.

    Returns:
        An :class:`AlgorithmModel` named ``baseline`` with HBM rows only.

    Raises:
        IomodelError: unknown ``score_dtype``, a negative ``extra_score_passes``, or a GQA training step in fp8
            (:func:`iomodel.spec.dtypes.eager_backward_refusal`: torch cannot sum float8 tensors).
    """
    from iomodel.errors import IomodelError

    if int(extra_score_passes) < 0:
        raise IomodelError(f"extra_score_passes must be 0 or more, got {extra_score_passes}: pass a count of passes")
    B, H, H_kv, d, N_q, N_k, s = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s
    sname, w, upcast = _score_dtype(spec, score_dtype)
    gqa = spec.kv_heads < spec.heads
    if spec.backward and (why := eager_backward_refusal(spec.dtype, spec.heads // spec.kv_heads)) is not None:
        raise IomodelError(why)
    causal = spec.causal
    # bottom-right with N_q > N_k: the first N_q - N_k rows see no key
    window = spec.window is not None  # the band mask of kernels/baseline.py step 5'
    empty_rows = spec.has_empty_rows
    causal = causal or window
    fix = "empty" if window else "inv[:, :1]"  # what marks the rows that see no key
    dt = spec.dtype

    E_q = B * H * N_q * d  # Q, O, dQ, dO elements
    E_k = B * H_kv * N_k * d  # K, V elements
    E_kr = B * H * N_k * d if gqa else E_k  # K, V after repeat_interleave
    E_S = B * H * N_q * N_k  # S, P elements
    E_m = N_q * N_k  # causal mask elements
    sq, skv, sS, sm = "(B, H, N_q, d)", "(B, H_kv, N_k, d)", "(B, H, N_q, N_k)", "(N_q, N_k)"
    skr = "(B, H, N_k, d)" if gqa else skv
    rows: list[Row] = []

    def row(tensor, step, shape, dtype, width, elements, rb=0, wb=0, note=""):
        rows.append(make_row(tensor, step, "HBM", shape, dtype, width, elements, rb, wb, note))

    # ---------------- forward ----------------
    k_name, v_name = "K", "V"
    if gqa:
        for t in ("K", "V"):
            step = f"{t}_rep = {t}.repeat_interleave(G, dim=1)"
            row(t, step, skv, dt, s, E_k, rb=E_k * s, note="GQA: the eager chain copies each KV head G = H/H_kv times.")
            row(f"{t}_rep", step, skr, dt, s, E_kr, wb=E_kr * s)
        k_name, v_name = "K_rep", "V_rep"
    q_name = "Q"
    if upcast:
        for src, dst, shape, el in (("Q", "Q32", sq, E_q), (k_name, "K32", skr, E_kr), (v_name, "V32", skr, E_kr)):
            step = f"{dst} = {src}.to({sname})"
            row(src, step, shape, dt, s, el, rb=el * s, note=f"Upcast to the score dtype {sname} " + (
                "(MATH-backend style)." if score_dtype is not None else "(torch has no float8 matmul)."))
            row(dst, step, shape, sname, w, el, wb=el * w)
        q_name, k_name, v_name = "Q32", "K32", "V32"
    qd, kd = (sname, sname) if upcast else (dt, dt)
    step = f"S = {q_name} @ {k_name}ᵀ"
    row(q_name, step, sq, qd, w, E_q, rb=E_q * w, note="Each matmul operand is read once (no reuse above SRAM).")
    row(k_name, step, skr, kd, w, E_kr, rb=E_kr * w)
    row("S", step, sS, sname, w, E_S, wb=E_S * w, note="The full score matrix is materialised in HBM.")
    row("S", "S = S * sm_scale", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w, note="Separate elementwise pass.")
    for k in range(int(extra_score_passes)):
        row("S", f"extra elementwise pass {k + 1} on S", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w,
            note="Optional extra elementwise pass (bias, soft-cap ...).")
    if causal:
        row("mask", "mask = torch.ones(N_q, N_k, dtype=bool)", sm, "bool", MASK_WIDTH, E_m, wb=E_m,
            note="One mask for all (batch, head), 1 byte per element.")
        row("mask", "mask = mask.tril(diagonal=off + WR)" if window else "mask = mask.tril(diagonal=off)", sm,
            "bool", MASK_WIDTH, E_m, rb=E_m, wb=E_m)
        if window:
            row("mask", "mask = mask.triu(diagonal=off - WL)", sm, "bool", MASK_WIDTH, E_m, rb=E_m, wb=E_m,
                note="Sliding window: the band's left edge.")
        row("mask", "~mask", sm, "bool", MASK_WIDTH, E_m, rb=E_m)
        row("~mask", "~mask", sm, "bool", MASK_WIDTH, E_m, wb=E_m)
        row("S", "S = S.masked_fill(~mask, -inf)", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w)
        row("~mask", "S = S.masked_fill(~mask, -inf)", sm, "bool", MASK_WIDTH, E_m, rb=E_m,
            note="The broadcast mask is read once (its re-reads across (B, H) are not counted).")
    if with_lse:
        E_l = B * H * N_q
        row("S", "LSE = torch.logsumexp(S, -1)", sS, sname, w, E_S, rb=E_S * w,
            note="eager_attention_with_lse only: LSE of the masked, scaled S.")
        if sname == "fp32":
            row("LSE", "LSE = torch.logsumexp(S, -1)", "(B, H, N_q)", "fp32", LSE_WIDTH, E_l, wb=E_l * LSE_WIDTH)
        else:
            row("LSE", "LSE = torch.logsumexp(S, -1)", "(B, H, N_q)", sname, w, E_l, wb=E_l * w,
                note="logsumexp keeps the dtype of S.")
            row("LSE", "LSE = LSE.to(fp32)", "(B, H, N_q)", sname, w, E_l, rb=E_l * w)
            row("LSE32", "LSE = LSE.to(fp32)", "(B, H, N_q)", "fp32", LSE_WIDTH, E_l, wb=E_l * LSE_WIDTH)
    row("S", "P = softmax(S, dim=-1)", sS, sname, w, E_S, rb=E_S * w)
    row("P", "P = softmax(S, dim=-1)", sS, sname, w, E_S, wb=E_S * w, note="P has the dtype of S.")
    if empty_rows and window:
        step = "empty = (~mask).all(-1, keepdim=True)"
        row("~mask", step, sm, "bool", MASK_WIDTH, E_m, rb=E_m, note="Sliding window: rows without keys.")
        row("empty", step, "(N_q, 1)", "bool", MASK_WIDTH, N_q, wb=N_q)
    if empty_rows:
        step = f"P = P.masked_fill({fix}, 0)"
        row("P", step, sS, sname, w, E_S, rb=E_S * w, wb=E_S * w,
            note="Only when some query row sees no key: softmax gave NaN there, set to 0.")
        row("empty" if window else "~mask", step, "(N_q, 1)", "bool", MASK_WIDTH, N_q, rb=N_q,
            note="Marks exactly the empty rows (N_q bytes read)" + ("." if window else "; column 0 of the inverted "
                                                                   "mask, a view."))
    if dropout:
        row("P", "P = dropout(P)", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w, note="Optional dropout pass.")
        row("dropout_mask", "P = dropout(P)", sS, "bool", MASK_WIDTH, E_S, wb=E_S,
            note="native_dropout writes a 1-byte keep-mask, saved for backward.")
    o_name = "O32" if upcast else "O"
    step = f"{o_name} = P @ {v_name}"
    row("P", step, sS, sname, w, E_S, rb=E_S * w)
    row(v_name, step, skr, kd, w, E_kr, rb=E_kr * w)
    row(o_name, step, sq, sname, w, E_q, wb=E_q * w)
    if upcast:
        row("O32", f"O = O32.to({dt})", sq, sname, w, E_q, rb=E_q * w)
        row("O", f"O = O32.to({dt})", sq, dt, s, E_q, wb=E_q * s)

    # ---------------- backward: the kernels autograd launches, in launch order ----------------
    # Order: the engine runs the ready node with the highest sequence number first, so the
    # casts of the upcast inputs and the GQA sums (created first in the forward) run last; each
    # matmul's backward computes its second operand's gradient first. Checked against the
    # kernels of receipts/ncu-h200-train1-2026-12-01.json and torch.profiler on the CPU.
    if spec.backward:
        do = "dO"
        if upcast:
            step = f"dO32 = dO.to({sname})"
            row("dO", step, sq, dt, s, E_q, rb=E_q * s, note="Backward of O = O32.to(dtype).")
            row("dO32", step, sq, sname, w, E_q, wb=E_q * w)
            do = "dO32"
        dv = "dV32" if upcast else ("dV_rep" if gqa else "dV")
        step = f"{dv} = Pᵀ @ {do}"
        row("P", step, sS, sname, w, E_S, rb=E_S * w, note="Backward of O = P V (autograd saved P and V): dV first.")
        row(do, step, sq, qd, w, E_q, rb=E_q * w)
        row(dv, step, skr, kd, w, E_kr, wb=E_kr * w)
        step = f"dP = {do} @ {v_name}ᵀ"
        row(do, step, sq, qd, w, E_q, rb=E_q * w)
        row(v_name, step, skr, kd, w, E_kr, rb=E_kr * w)
        row("dP", step, sS, sname, w, E_S, wb=E_S * w)
        if dropout:
            step = "dP = dropout_backward(dP, dropout_mask)"
            row("dP", step, sS, sname, w, E_S, rb=E_S * w, wb=E_S * w)
            row("dropout_mask", step, sS, "bool", MASK_WIDTH, E_S, rb=E_S)
        if empty_rows:
            step = f"dP = dP.masked_fill({fix}, 0)"
            row("dP", step, sS, sname, w, E_S, rb=E_S * w, wb=E_S * w, note="Backward of the empty-row masked_fill.")
            row("empty" if window else "~mask", step, "(N_q, 1)", "bool", MASK_WIDTH, N_q, rb=N_q)
        step = "T = dP * P"
        row("dP", step, sS, sname, w, E_S, rb=E_S * w,
            note="CUDA's softmax backward (softmax_backward_cuda_out) first multiplies grad by output in a "
                 "separate elementwise kernel; the CPU kernel fuses it.")
        row("P", step, sS, sname, w, E_S, rb=E_S * w)
        row("T", step, sS, sname, w, E_S, wb=E_S * w)
        step = "dS = softmax_backward(T, P)"
        row("T", step, sS, sname, w, E_S, rb=E_S * w, note="dS = T − P ∘ rowsum(T) (_softmax_backward_data).")
        row("P", step, sS, sname, w, E_S, rb=E_S * w)
        row("dS", step, sS, sname, w, E_S, wb=E_S * w)
        if causal:
            step = "dS = dS.masked_fill(~mask, 0)"
            row("dS", step, sS, sname, w, E_S, rb=E_S * w, wb=E_S * w)
            row("~mask", step, sm, "bool", MASK_WIDTH, E_m, rb=E_m, note="Autograd saved the inverted mask.")
        for k in range(int(extra_score_passes)):
            row("dS", f"backward of extra pass {k + 1}", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w)
        row("dS", "dS = dS * sm_scale", sS, sname, w, E_S, rb=E_S * w, wb=E_S * w)
        dq = "dQ32" if upcast else "dQ"
        dk = "dK32" if upcast else ("dK_rep" if gqa else "dK")
        step = f"{dk} = dSᵀ @ {q_name}"
        row("dS", step, sS, sname, w, E_S, rb=E_S * w, note="Backward of S = Q Kᵀ (autograd saved Q and K): dK first.")
        row(q_name, step, sq, qd, w, E_q, rb=E_q * w)
        row(dk, step, skr, kd, w, E_kr, wb=E_kr * w)
        step = f"{dq} = dS @ {k_name}"
        row("dS", step, sS, sname, w, E_S, rb=E_S * w)
        row(k_name, step, skr, kd, w, E_kr, rb=E_kr * w)
        row(dq, step, sq, qd, w, E_q, wb=E_q * w)
        if upcast:
            for src, dst, shape, el in (("dV32", "dV_rep" if gqa else "dV", skr, E_kr),
                                        ("dK32", "dK_rep" if gqa else "dK", skr, E_kr),
                                        ("dQ32", "dQ", sq, E_q)):
                step = f"{dst} = {src}.to({dt})"
                row(src, step, shape, sname, w, el, rb=el * w, note="Backward of the upcast.")
                row(dst, step, shape, dt, s, el, wb=el * s)
        if gqa:
            for t in ("dV", "dK"):
                step = f"{t} = {t}_rep.view(B, H_kv, G, N_k, d).sum(2)"
                row(f"{t}_rep", step, skr, dt, s, E_kr, rb=E_kr * s,
                    note="Backward of repeat_interleave (expand + clone): sum over the G query heads of a group.")
                row(t, step, skv, dt, s, E_k, wb=E_k * s)

    # ---------------- allocations (resident in HBM at the peak step) ----------------
    live = _Live(sq, skv, skr, sS, sm, dt, s, sname, w, E_q, E_k, E_kr, E_S, E_m, B * H * N_q, N_q, gqa, upcast, causal,
                 window, empty_rows, dropout, with_lse)
    fwd = _forward_peak(live)
    alloc = fwd[:4] + _backward_peak(fwd, live) if spec.backward else fwd

    # FLOPs actually executed by the matmuls: the eager chain computes all N_q·N_k scores
    # whatever the mask (2 matmuls forward, 4 backward: dP, dV, dQ, dK; no recomputation).
    mm = 2 * B * H * N_q * N_k * d
    flops = 2 * mm + (4 * mm if spec.backward else 0)
    return AlgorithmModel(
        name="baseline",
        title="Eager attention, materialised scores (S = QKᵀ → softmax → PV)",
        source="PyTorch SDPA MATH backend / eager op chain (kernels/baseline.py); Dao et al. 2022 Algorithm 0",
        rows=rows,
        allocated=alloc,
        flops=flops,
    )


@dataclass(frozen=True)
class Launch:
    """One kernel of the eager chain, as the model counts it.

    Attributes:
        step: the model rows' ``step`` (one kernel per distinct step, in launch order).
        op: the top-level ATen op ``torch.profiler`` lists for it on the CPU
            (``aten::matmul`` forward, ``aten::bmm`` backward ...).
        backward: launched by ``torch.autograd.grad`` (not by the forward call).
        cuda_only: a kernel the CUDA implementation of ``op`` adds (the ``grad * output``
            of ``softmax_backward_cuda_out``); the CPU runs it inside ``op``.
        kernel: substrings, one of which a CUDA kernel's name of this launch contains
            (from the kernels of ``receipts/ncu-h200-train1-2026-12-01.json``).
    """

    step: str
    op: str
    backward: bool
    cuda_only: bool
    kernel: tuple[str, ...]


_GEMM = ("nvjet", "gemm", "cutlass", "xmma")
#: (substring of a step, ATen op, CUDA-only, kernel-name substrings); first match wins.
_OPS: tuple[tuple[str, str, bool, tuple[str, ...]], ...] = (
    ("repeat_interleave", "aten::repeat_interleave", False, ("copy",)),
    ("softmax_backward", "aten::_softmax_backward_data", False, ("softmax", "SoftMax")),
    ("T = dP * P", "aten::_softmax_backward_data", True, ("BinaryFunctor", "mul")),
    ("masked_fill", "aten::masked_fill", False, ("masked_fill",)),
    ("dropout_backward", "aten::native_dropout_backward", False, ("dropout", "mul")),
    ("dropout(", "aten::dropout", False, ("dropout",)),
    ("logsumexp", "aten::logsumexp", False, ("logsumexp", "reduce")),
    ("softmax(", "aten::softmax", False, ("softmax", "SoftMax")),
    (".to(", "aten::to", False, ("copy",)),
    ("torch.ones", "aten::ones", False, ("FillFunctor", "fill")),
    ("tril", "aten::tril", False, ("tril",)),
    ("~mask", "aten::bitwise_not", False, ("bitwise_not",)),
    (".sum(", "aten::sum", False, ("reduce_kernel", "reduce")),
    ("* sm_scale", "aten::mul", False, ("AUnaryFunctor", "mul")),
    ("extra", "elementwise", False, ("elementwise",)),
    ("@", "aten::matmul", False, _GEMM),
)


def eager_launches(spec: LayerSpec, **options: Any) -> list[Launch]:
    """The kernels :func:`baseline_model` counts, in launch order, with their ATen op.

    Args:
        spec: the layer (``spec.backward``: forward and backward kernels).
        **options: as :func:`baseline_model` (``score_dtype``, ``dropout``, ...).

    Returns:
        One :class:`Launch` per distinct ``step`` of the model's HBM rows. A matmul is
        ``aten::matmul`` in the forward and ``aten::bmm`` in the backward (autograd calls
        ``bmm`` for each operand's gradient).

    Raises:
        IomodelError: as :func:`baseline_model`.
    """
    def steps(model: AlgorithmModel) -> list[str]:
        return list(dict.fromkeys(r.step for r in model.rows if r.level == "HBM"))

    n_fwd = len(steps(baseline_model(spec.with_(backward=False), **options)))
    out = []
    for i, st in enumerate(steps(baseline_model(spec, **options))):
        op, cuda_only, kernel = next((o, c, k) for key, o, c, k in _OPS if key in st)
        if op == "aten::matmul" and i >= n_fwd:
            op = "aten::bmm"
        out.append(Launch(st, op, i >= n_fwd, cuda_only, kernel))
    return out


__all__ = ["baseline_model", "eager_launches", "Launch", "MASK_WIDTH", "FP32_WIDTH"]


@dataclass(frozen=True)
class _Live:
    """What the eager chain's live sets depend on: the shape labels, dtype names and widths (bytes), the element
    counts of Q-, K-, repeated-K-, score-, mask- and LSE-sized tensors (sympy), N_q, and the chain's switches."""

    sq: str
    skv: str
    skr: str
    sS: str
    sm: str
    dt: str
    s: Any
    sname: str
    w: Any
    E_q: Any
    E_k: Any
    E_kr: Any
    E_S: Any
    E_m: Any
    E_l: Any
    N_q: Any
    gqa: bool
    upcast: bool
    causal: bool
    window: bool
    empty_rows: bool
    dropout: bool
    with_lse: bool


def _forward_peak(L: _Live) -> list[Allocation]:
    """The forward's live tensors at its peak (bytes), Q, K, V and O first: the GQA copies, the upcast copies, two
    score-sized tensors (S and P during softmax; where ``P.masked_fill`` copies P for rows that see no key, the
    larger of S, P and that copy, and S, P and O at P·V), the masks, the dropout keep-mask and the LSE."""
    sq, skv, skr, sS, sm, dt, s, sname, w = L.sq, L.skv, L.skr, L.sS, L.sm, L.dt, L.s, L.sname, L.w
    E_q, E_k, E_kr, E_S, E_m, E_l = L.E_q, L.E_k, L.E_kr, L.E_S, L.E_m, L.E_l
    gqa, upcast, causal, window, empty_rows, dropout, with_lse = (L.gqa, L.upcast, L.causal, L.window, L.empty_rows,
                                                                  L.dropout, L.with_lse)
    alloc = [
        Allocation("Q", sq, dt, E_q * s, "input"),
        Allocation("K", skv, dt, E_k * s, "input"),
        Allocation("V", skv, dt, E_k * s, "input"),
        Allocation("O", sq, dt, E_q * s, "output"),
    ]
    if gqa:
        alloc += [Allocation("K_rep", skr, dt, E_kr * s, "GQA copy"), Allocation("V_rep", skr, dt, E_kr * s, "GQA copy")]
    if upcast:
        alloc += [Allocation(n, sh, sname, el * w, "upcast copy")
                  for n, sh, el in (("Q32", sq, E_q), ("K32", skr, E_kr), ("V32", skr, E_kr), ("O32", sq, E_q))]
    if empty_rows:
        # P = P.masked_fill(...) is out of place: S, the old P and its copy live at once before O exists; the
        # peak is the larger of that and S, P and O (O32 and O with the upcast) at P·V
        outs = [a for a in alloc if a.tensor in ("O", "O32")]
        alloc = [a for a in alloc if a.tensor not in ("O", "O32")]
        out_bytes = sum((a.bytes for a in outs), sp.Integer(0))
        alloc.append(Allocation(
            "S, P, and P's copy or O", sS, sname, 2 * E_S * w + sp.Max(E_S * w, out_bytes),
            "the larger of two live sets: S, P and the copy P.masked_fill writes for the rows that see no key "
            "(3 score-sized tensors), then S, P and " + " and ".join(a.tensor for a in outs) + " at P·V",
        ))
    else:
        alloc.append(Allocation("S, P", sS, sname, 2 * E_S * w,
                                "2 score-sized tensors live at once: S and P during softmax (or old and new S)"))
    if causal:
        alloc.append(Allocation("mask, ~mask", sm, "bool", 2 * E_m * MASK_WIDTH,
                                ("window" if window else "causal") + " mask and its inverse"))
    if empty_rows and window:
        alloc.append(Allocation("empty", "(N_q, 1)", "bool", L.N_q * MASK_WIDTH, "the rows that see no key"))
    if dropout:
        alloc.append(Allocation("dropout_mask", sS, "bool", E_S * MASK_WIDTH, "saved for backward"))
    if with_lse:
        alloc.append(Allocation("LSE", "(B, H, N_q)", "fp32", E_l * LSE_WIDTH, "output"))
    return alloc


def _backward_peak(fwd: list[Allocation], L: _Live) -> list[Allocation]:
    """The training step's live tensors at its peak beyond Q, K, V and O, in bytes: the tensors live while CUDA's
    ``_softmax_backward_data`` writes dS, plus one row for another step's excess (0 unless the forward's peak,
    ``fwd``, or the P·V backward's, with fewer score-sized tensors but V's copy, is larger).

    Live at the softmax backward (autograd frees a node's saved tensors and its incoming gradient once the node has
    run; the inputs' casts and GQA sums run last): dO; K_rep (GQA), or Q32 and K32 (upcast), saved by S = Q Kᵀ;
    four score-sized tensors, P (saved by softmax), dP, T = dP·P (CUDA writes it in its own kernel; the CPU fuses it)
    and dS; ~mask (saved by the causal masked_fill); the LSE; and dV as P·V's backward left it (dV, dV_rep for GQA,
    dV32 with the upcast). dQ, dK and dV's final sum are not written yet; V_rep or V32, the keep-mask of dropout and
    the empty-row marks are freed by then. Measured on the H200 (receipts/eager-peak-h200-2026-12-05.json,
    ``benchmarks/gpu_eager_peak.py``): MHA and GQA, causal and not, to the byte. Extra elementwise passes
    (``extra_score_passes``) are assumed to save nothing."""
    sq, skv, skr, sS, sm, dt, s, sname, w = L.sq, L.skv, L.skr, L.sS, L.sm, L.dt, L.s, L.sname, L.w
    E_q, E_k, E_kr, E_S, E_m, E_l = L.E_q, L.E_k, L.E_kr, L.E_S, L.E_m, L.E_l
    gqa, upcast, causal, empty_rows, dropout, with_lse = L.gqa, L.upcast, L.causal, L.empty_rows, L.dropout, L.with_lse
    dv_name, dv_shape, dv_dtype, dv_bytes = (("dV32", skr, sname, E_kr * w) if upcast else
                                             ("dV_rep", skr, dt, E_kr * s) if gqa else ("dV", skv, dt, E_k * s))
    live = [Allocation("dO", sq, dt, E_q * s, "input of the backward")]
    if upcast:
        live += [Allocation("Q32", sq, sname, E_q * w, "upcast copy saved by S = Q Kᵀ"),
                 Allocation("K32", skr, sname, E_kr * w, "upcast copy saved by S = Q Kᵀ")]
    elif gqa:
        live.append(Allocation("K_rep", skr, dt, E_kr * s, "GQA copy saved by S = Q Kᵀ"))
    live.append(Allocation("P, dP, T, dS", sS, sname, 4 * E_S * w,
                           "4 score-sized tensors while CUDA's softmax backward writes dS: P (saved), dP, T = dP·P "
                           "(its own kernel on CUDA) and dS"))
    if causal:
        live.append(Allocation("~mask", sm, "bool", E_m * MASK_WIDTH, "saved by the masked_fill; the mask itself is freed"))
    if with_lse:
        live.append(Allocation("LSE", "(B, H, N_q)", "fp32", E_l * LSE_WIDTH, "output"))
    live.append(Allocation(dv_name, dv_shape, dv_dtype, dv_bytes, "P·V's backward wrote it first"))
    base = sum((a.bytes for a in fwd[:4]), sp.Integer(0))  # Q, K, V and O
    softmax_total = sum((a.bytes for a in live), sp.Integer(0))
    fwd_total = sum((a.bytes for a in fwd), sp.Integer(0)) - base + E_q * s  # the forward's peak, dO beside it
    # P·V's backward as dP is written: dO (and dO32), the matmuls' saved operands, P (and the copy P·V saved:
    # P.masked_fill's or dropout's, with its keep-mask), dV and dP
    pv = E_q * s + (2 * E_q * w + 2 * E_kr * w if upcast else (2 * E_kr * s if gqa else 0))
    pv += (2 + int(empty_rows) + int(dropout)) * E_S * w + (E_S * MASK_WIDTH if dropout else 0) + dv_bytes
    pv += (E_m * MASK_WIDTH if causal else 0) + (E_l * LSE_WIDTH if with_lse else 0)
    live.append(Allocation("other steps' excess", "-", "-", sp.Max(0, fwd_total - softmax_total, pv - softmax_total),
                           "0 unless the forward's peak or P·V's backward (dP written, V's copy still saved) holds "
                           "more than the softmax backward"))
    return live
