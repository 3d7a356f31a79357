"""The eager (materialised-scores) attention baseline, op for op as the traffic model counts it.

The traffic model's ``baseline`` algorithm (``iomodel/traffic``) counts exactly the ops
below; each numbered step is ONE torch op that reads its inputs once and writes its
output once (HBM no-reuse model). Keep the two in step (``docs/helpers`` api agreement).

1. GQA only (H_kv < H): ``k_rep = k.repeat_interleave(G, dim=1)``, same for v.
2. ``score_dtype`` given and != q.dtype: ``q.to(score_dtype)``, ``k_rep.to(...)``,
   ``v_rep.to(...)`` (PyTorch's MATH backend keeps fp32 intermediates for half inputs). With
   ``score_dtype=None`` fp8 inputs are upcast to bf16 the same way (``iomodel.spec.dtypes.EAGER_SCORE_DTYPE``:
   torch has no float8 matmul or softmax); every other dtype computes in itself.
3. ``S = q @ k.transpose(-2, -1)`` (transpose is a view), S in the score dtype.
4. ``S = S * sm_scale`` (a separate elementwise pass).
5. causal only: ``mask = torch.ones(N_q, N_k, dtype=torch.bool).tril(diagonal=off)``
   (two ops: ones, tril), ``inv = ~mask`` (one op), ``S = S.masked_fill(inv, -inf)``.
6. ``P = torch.softmax(S, dim=-1)``; only when some row sees no key (causal bottom-right
   with N_q > N_k): ``P = P.masked_fill(inv[:, :1], 0)`` — row m sees no key iff key 0
   is masked, so ``inv[:, :1]`` (a view) marks exactly the empty rows; softmax gives NaN
   there and this op sets those rows to 0.
7. ``O = P @ v``; if the score dtype != q.dtype: ``O = O.to(q.dtype)``.
8. (``eager_attention_with_lse`` only) ``lse = torch.logsumexp(S, -1)`` on the masked,
   scaled S; if S is not fp32, ``lse.to(torch.float32)`` (one more op).
"""

from __future__ import annotations

import torch

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import KERNEL_DTYPES
from iomodel.spec import canonical_dtype, torch_dtype
from iomodel.spec.dtypes import EAGER_SCORE_DTYPE, eager_backward_refusal, eager_score_dtype
from iomodel.spec.layer import band_has_empty_rows, causal_offset
from kernels._inputs import check_inputs, window_argument


#: Input dtypes the eager chain takes: the kernel's, and fp8, which it upcasts (:data:`EAGER_SCORE_DTYPE`).
EAGER_DTYPES = KERNEL_DTYPES + tuple(EAGER_SCORE_DTYPE)


def _dtype(score_dtype: torch.dtype | str | None, q: torch.Tensor) -> torch.dtype:
    """The torch dtype of S, P and the O accumulator: ``score_dtype`` (a dtype of
    :data:`~iomodel.schedule.capabilities.KERNEL_DTYPES` or fp64, by name or torch dtype), or for None q's dtype,
    except fp8's bf16 (:data:`~iomodel.spec.dtypes.EAGER_SCORE_DTYPE`)."""
    if score_dtype is None:  # the input's, or its upcast where torch cannot multiply it (fp8 -> bf16)
        name = {torch_dtype(n): n for n in EAGER_SCORE_DTYPE}.get(q.dtype)
        return q.dtype if name is None else torch_dtype(eager_score_dtype(name))
    if isinstance(score_dtype, torch.dtype):
        return score_dtype
    key = str(score_dtype).lower().removeprefix("torch.")
    if key in ("fp64", "float64"):
        return torch.float64
    try:
        name = canonical_dtype(key)
    except IomodelError:
        name = None
    if name not in KERNEL_DTYPES:
        raise IomodelError(f"score_dtype {score_dtype!r} is unknown: use fp32, fp16, bf16 or None")
    return torch_dtype(name)


def _eager(q, k, v, causal, causal_align, sm_scale, score_dtype, with_lse, window=None):
    shape, sm_scale = check_inputs(q, k, v, causal_align, sm_scale, dtypes=EAGER_DTYPES)
    G = shape.group
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        why = eager_backward_refusal(str(q.dtype), G)  # before the forward: its backward would fail in torch
        if why is not None:
            raise IomodelError(why)
    N_q, N_k = shape.seqlen_q, shape.seqlen_k
    band = window_argument(window, causal, N_q, N_k)
    sd = _dtype(score_dtype, q)
    in_dtype = q.dtype  # O keeps the input dtype (q is replaced by its upcast copy below)
    # 1. GQA: materialise the KV heads per query head (one op per tensor).
    if G > 1:
        k = k.repeat_interleave(G, dim=1)  # (B, H, N_k, d)
        v = v.repeat_interleave(G, dim=1)  # (B, H, N_k, d)
    # 2. upcast copies for the score dtype.
    if sd != q.dtype:
        q = q.to(sd)  # (B, H, N_q, d)
        k = k.to(sd)
        v = v.to(sd)
    # 3. scores, 4. scale.
    s = q @ k.transpose(-2, -1)  # (B, H, N_q, N_k) score dtype
    s = s * sm_scale
    inv = empty = None
    if band is not None:
        off = causal_offset(causal_align, N_q, N_k)
        # 5'. window mask (bool): ones, tril at the band's right edge, triu at its left edge, invert.
        mask = torch.ones(N_q, N_k, dtype=torch.bool, device=q.device).tril(diagonal=off + band[1])  # (N_q, N_k)
        mask = mask.triu(diagonal=off - band[0])
        inv = ~mask
        s = s.masked_fill(inv, float("-inf"))
        if band_has_empty_rows(band, N_q, N_k, off):
            empty = inv.all(-1, keepdim=True)  # (N_q, 1): rows that see no key
    elif causal:
        off = causal_offset(causal_align, N_q, N_k)
        # 5. mask (bool, 1 byte per element): ones, tril, invert, masked_fill.
        mask = torch.ones(N_q, N_k, dtype=torch.bool, device=q.device).tril(diagonal=off)  # (N_q, N_k)
        inv = ~mask
        s = s.masked_fill(inv, float("-inf"))
    # 6. softmax (NaN on rows that see no key, fixed by one masked_fill).
    p = torch.softmax(s, dim=-1)  # (B, H, N_q, N_k) score dtype
    if empty is not None:
        p = p.masked_fill(empty, 0.0)
    elif band is None and inv is not None and _has_empty_row(N_q, N_k, causal_align):
        p = p.masked_fill(inv[:, :1], 0.0)
    # 7. output.
    o = p @ v  # (B, H, N_q, d) score dtype
    if o.dtype != in_dtype:
        o = o.to(in_dtype)
    if not with_lse:
        return o
    # 8. LSE of the masked, scaled scores (fp32).
    lse = torch.logsumexp(s, dim=-1)  # (B, H, N_q)
    if lse.dtype != torch.float32:
        lse = lse.to(torch.float32)
    return o, lse


def _has_empty_row(seqlen_q: int, seqlen_k: int, causal_align: str) -> bool:
    """Whether a causal mask leaves some query row without any key (row 0: 0 + off < 0)."""
    return causal_offset(causal_align, seqlen_q, seqlen_k) < 0


def eager_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (B, H, N_q, d), (B, H_kv, N_k, d), (B, H_kv, N_k, d)
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    score_dtype: torch.dtype | str | None = None,
    window: tuple[int | None, int | None] | None = None,
) -> torch.Tensor:
    """Eager attention with materialised scores, exactly the op chain of the module docstring.

    Args:
        q: ``(B, H, N_q, d)`` fp16/bf16/fp32, or fp8 (e4m3, e5m2: upcast to bf16 with ``score_dtype=None``).
        k, v: ``(B, H_kv, N_k, d)``, H divisible by H_kv.
        causal: apply the causal mask.
        causal_align: ``top-left`` (PyTorch ``is_causal``) or ``bottom-right`` (flash-attn >= 2.1).
        sm_scale: score scale, default ``1 / sqrt(d)``.
        score_dtype: dtype of S, P and the O accumulator (``None``: q's dtype, bf16 for fp8 inputs; ``fp32``:
            PyTorch MATH backend behaviour for half inputs).
        window: sliding window ``(left, right)`` in tokens (-1 or None unbounded), as the
            kernel's; the (N_q, N_k) band mask is materialised (step 5').

    Returns:
        o ``(B, H, N_q, d)`` in q's dtype; rows that see no key are 0.

    Raises:
        IomodelError: bad shapes, dtypes, alignment, scale or score dtype; fp8 GQA inputs that require grad
            (:func:`iomodel.spec.dtypes.eager_backward_refusal`: torch cannot sum float8 gradients over a group).
    """
    return _eager(q, k, v, causal, causal_align, sm_scale, score_dtype, with_lse=False, window=window)


def eager_attention_with_lse(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (B, H, N_q, d), (B, H_kv, N_k, d), (B, H_kv, N_k, d)
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    score_dtype: torch.dtype | str | None = None,
    window: tuple[int | None, int | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`eager_attention` plus ``lse = torch.logsumexp(S, -1)`` (step 8), as fp32 ``(B, H, N_q)``.

    Raises:
        IomodelError: as :func:`eager_attention`.
    """
    return _eager(q, k, v, causal, causal_align, sm_scale, score_dtype, with_lse=True, window=window)
