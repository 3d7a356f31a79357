"""Input checks shared by the kernel launcher, the eager baseline and the fp64 reference.

Every bad input raises :class:`iomodel.errors.IomodelError` with one sentence that says
what to change; nothing is converted or substituted silently. What the kernel itself
supports (HEAD_DIM, dtypes, the decode limit) is stated once in
:mod:`iomodel.schedule.capabilities`; these checks are the structural ones every caller
shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import KERNEL_DTYPES
from iomodel.spec import dtype_name
from iomodel.spec.layer import causal_offset, window_band, window_side


@dataclass(frozen=True)
class AttnShape:
    """Sizes of one attention call (element counts), as :func:`check_inputs` found them.

    Carries the fields :func:`iomodel.schedule.capabilities.kernel_refusal` reads
    (``head_dim``, ``dtype``, ``phase``, ``seqlen_q``).
    """

    batch: int  # B
    heads: int  # H
    kv_heads: int  # H_kv
    seqlen_q: int  # N_q
    seqlen_k: int  # N_k
    head_dim: int  # d
    dtype: str  # canonical name (iomodel.spec.DTYPES), or fp64 (the reference)
    phase: str = "prefill"  # "decode" when the kernel runs its split-KV path

    @property
    def group(self) -> int:
        """G = H / H_kv."""
        return self.heads // self.kv_heads


def tensor_dtype_name(dtype: torch.dtype) -> str:
    """Canonical name of a floating torch dtype (``fp64`` for float64, else ``str(dtype)`` if unknown)."""
    if dtype == torch.float64:
        return "fp64"
    try:
        return dtype_name(dtype)
    except IomodelError:
        return str(dtype)


def check_inputs(
    q: object,
    k: object,
    v: object,
    causal_align: str,
    sm_scale: float | None,
    *,
    dtypes: tuple[str, ...] | None = KERNEL_DTYPES,
) -> tuple[AttnShape, float]:
    """Validate q ``(B, H, N_q, d)``, k and v ``(B, H_kv, N_k, d)`` and return their sizes.

    Args:
        q, k, v: torch tensors of one floating dtype on one device.
        causal_align: ``top-left`` or ``bottom-right``.
        sm_scale: softmax scale (``None``: ``1 / sqrt(d)``); must be finite and > 0.
        dtypes: canonical dtype names accepted (``fp64`` for float64; default the kernel's
            :data:`~iomodel.schedule.capabilities.KERNEL_DTYPES`, which the baseline is
            compared on); ``None``: any floating dtype (the kernel, which then asks
            :func:`~iomodel.schedule.capabilities.kernel_refusal`).

    Returns:
        ``(shape, sm_scale)``.

    Raises:
        IomodelError: a non-tensor, wrong rank, mixed dtypes or devices, a non-floating
            dtype or one outside ``dtypes``, mismatched batch/heads/HEAD_DIM/seqlen_k, an
            empty dimension, an unknown alignment or a non-positive scale.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise IomodelError(f"{name} must be a torch.Tensor, got {type(t).__name__}: pass tensors")
        if t.dim() != 4:
            raise IomodelError(
                f"{name} must have 4 dimensions (B, H, seqlen, HEAD_DIM), got shape {tuple(t.shape)}: reshape it"
            )
    assert isinstance(q, torch.Tensor) and isinstance(k, torch.Tensor) and isinstance(v, torch.Tensor)
    dtype = tensor_dtype_name(q.dtype)
    if not q.dtype.is_floating_point or (dtypes is not None and dtype not in dtypes):
        use = ", ".join(dtypes) if dtypes is not None else "a floating dtype"
        raise IomodelError(f"dtype {q.dtype} is not supported: use {use} for q, k and v")
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
    causal_offset(causal_align, N_q, N_k)
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(d)
    try:
        sm_scale = float(sm_scale)
    except (TypeError, ValueError):
        raise IomodelError(f"sm_scale must be a number, got {sm_scale!r}: pass a positive float or None") from None
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise IomodelError(f"sm_scale must be finite and > 0, got {sm_scale}: pass a positive float or None")
    shape = AttnShape(B, H, H_kv, N_q, N_k, d, dtype)
    return shape, sm_scale


def window_argument(window: Any, causal: bool, seqlen_q: int, seqlen_k: int) -> tuple[int, int] | None:
    """The kernels' band ``(WIN_L, WIN_R)`` (tokens) of a ``window=(left, right)`` argument, or None.

    :func:`iomodel.spec.layer.window_band` (the rule the traffic model reads too) after
    checking the argument; -1 or None = unbounded side.

    Raises:
        IomodelError: window is not a pair, or a side is not an int >= 0, -1 or None.
    """
    if window is None:
        return None
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise IomodelError(f"window must be a pair (left, right) of token counts (-1 or None: unbounded), got "
                           f"{window!r}: pass e.g. window=(4096, 0)")
    left = window_side(window[0], "window left", "window=(left, right)", unbounded_minus_one=True)
    right = window_side(window[1], "window right", "window=(left, right)", unbounded_minus_one=True)
    return window_band(bool(causal), left, right, seqlen_q, seqlen_k)
