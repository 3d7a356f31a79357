"""Input checks shared by the kernel launcher, the eager baseline and the fp64 reference.

Every bad input raises :class:`iomodel.errors.IomodelError` with one sentence that says
what to change; nothing is converted or substituted silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from iomodel.errors import IomodelError

#: Floating dtypes the kernel, the baseline and the reference accept.
FLOAT_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
CAUSAL_ALIGNS = ("top-left", "bottom-right")


@dataclass(frozen=True)
class AttnShape:
    """Sizes of one attention call (element counts)."""

    batch: int  # B
    heads: int  # H
    kv_heads: int  # H_kv
    seqlen_q: int  # N_q
    seqlen_k: int  # N_k
    head_dim: int  # d
    dtype: str  # fp16 / bf16 / fp32 (fp64 allowed only by the reference)

    @property
    def group(self) -> int:
        """G = H / H_kv."""
        return self.heads // self.kv_heads


def causal_offset(causal_align: str, seqlen_q: int, seqlen_k: int) -> int:
    """Diagonal offset: query row m sees key n iff n <= m + offset (traffic contract).

    0 for ``top-left`` (PyTorch ``is_causal``), ``seqlen_k - seqlen_q`` for ``bottom-right``
    (flash-attn >= 2.1, KV-cache decode).

    Raises:
        IomodelError: ``causal_align`` is neither ``top-left`` nor ``bottom-right``.
    """
    if causal_align not in CAUSAL_ALIGNS:
        raise IomodelError(f"causal_align {causal_align!r} is unknown: use 'top-left' or 'bottom-right'")
    return 0 if causal_align == "top-left" else seqlen_k - seqlen_q


def check_inputs(
    q: object,
    k: object,
    v: object,
    causal_align: str,
    sm_scale: float | None,
    *,
    allow_fp64: bool = False,
    max_head_dim: int | None = None,
) -> tuple[AttnShape, float]:
    """Validate q ``(B, H, N_q, d)``, k and v ``(B, H_kv, N_k, d)`` and return their sizes.

    Args:
        q, k, v: torch tensors of one floating dtype on one device.
        causal_align: ``top-left`` or ``bottom-right``.
        sm_scale: softmax scale (``None``: ``1 / sqrt(d)``); must be finite and > 0.
        allow_fp64: also accept float64 (the reference does).
        max_head_dim: largest HEAD_DIM accepted (``None``: no limit).

    Returns:
        ``(shape, sm_scale)``.

    Raises:
        IomodelError: a non-tensor, wrong rank, mixed dtypes or devices, a non-floating
            dtype, mismatched batch/heads/HEAD_DIM/seqlen_k, an empty dimension, HEAD_DIM
            above ``max_head_dim``, an unknown alignment or a non-positive scale.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise IomodelError(f"{name} must be a torch.Tensor, got {type(t).__name__}: pass tensors")
        if t.dim() != 4:
            raise IomodelError(
                f"{name} must have 4 dimensions (B, H, seqlen, HEAD_DIM), got shape {tuple(t.shape)}: reshape it"
            )
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
    allowed = dict(FLOAT_DTYPES)
    if allow_fp64:
        allowed[torch.float64] = "fp64"
    if q.dtype not in allowed:
        raise IomodelError(
            f"dtype {q.dtype} is not supported: use {', '.join(str(d) for d in allowed)} for q, k and v"
        )
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise IomodelError(
            f"q, k and v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}: cast them to one dtype"
        )
    if not (q.device == k.device == v.device):
        raise IomodelError(f"q, k and v are on different devices ({q.device}, {k.device}, {v.device}): move them to one")
    B, H, N_q, d = q.shape
    Bk, H_kv, N_k, dk = k.shape
    if tuple(v.shape) != tuple(k.shape):
        raise IomodelError(f"v has shape {tuple(v.shape)} but k has {tuple(k.shape)}: give k and v the same shape")
    if Bk != B:
        raise IomodelError(f"q has batch {B} but k and v have batch {Bk}: use one batch size")
    if dk != d:
        raise IomodelError(f"q has HEAD_DIM {d} but k and v have {dk}: use one HEAD_DIM")
    if min(B, H, N_q, d, H_kv, N_k) == 0:
        raise IomodelError(
            f"empty input (q {tuple(q.shape)}, k {tuple(k.shape)}): every size must be at least 1"
        )
    if H % H_kv:
        raise IomodelError(
            f"query heads ({H}) must be a multiple of key/value heads ({H_kv}) for GQA/MQA: "
            "pick H_kv among the divisors of H"
        )
    if max_head_dim is not None and d > max_head_dim:
        raise IomodelError(f"HEAD_DIM {d} is above the kernel's maximum of {max_head_dim}: use HEAD_DIM <= {max_head_dim}")
    causal_offset(causal_align, N_q, N_k)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(d)
    try:
        sm_scale = float(sm_scale)
    except (TypeError, ValueError):
        raise IomodelError(f"sm_scale must be a number, got {sm_scale!r}: pass a positive float or None") from None
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise IomodelError(f"sm_scale must be finite and > 0, got {sm_scale}: pass a positive float or None")
    shape = AttnShape(B, H, H_kv, N_q, N_k, d, allowed[q.dtype])
    return shape, sm_scale
