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


def check_causal(causal: object) -> None:
    """``causal`` is True or False, nothing else: 1, 0 and numpy or torch booleans are refused
    (one spelling, so one launch-plan key per mask; the launchers key their plans on its type too).

    Raises:
        IomodelError: any other value.
    """
    if causal is not True and causal is not False:
        raise IomodelError(f"causal must be True or False, got {causal!r}: pass a bool")


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
    shape = AttnShape(B, H, H_kv, N_q, N_k, d, dtype)
    return shape, _scale(sm_scale, d)


def _scale(sm_scale: Any, head_dim: int) -> float:
    """``sm_scale`` as a float (None: ``1 / sqrt(d)``, Vaswani et al. 2017, eq. 1); IomodelError unless finite and > 0."""
    if isinstance(sm_scale, bool):  # True == 1.0 would pass the float() below unnoticed
        raise IomodelError(f"sm_scale must be a number, got {sm_scale!r}: pass a positive float or None")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    try:
        sm_scale = float(sm_scale)
    except (TypeError, ValueError):
        raise IomodelError(f"sm_scale must be a number, got {sm_scale!r}: pass a positive float or None") from None
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise IomodelError(f"sm_scale must be finite and > 0, got {sm_scale}: pass a positive float or None")
    return sm_scale


@dataclass(frozen=True)
class PagedShape:
    """Sizes of a paged KV cache call (element counts), as :func:`check_paged_inputs` found them."""

    attn: AttnShape  # seqlen_k = max_pages * page_size (the tables' capacity), phase "decode"
    num_blocks: int  # pages in the cache
    page_size: int  # tokens per page
    max_pages: int  # pages per sequence in block_table


def check_paged_inputs(q: object, k_cache: object, v_cache: object, block_table: object, cache_seqlens: object,
                       causal_align: str, sm_scale: float | None, *,
                       dtypes: tuple[str, ...] | None = None) -> tuple[PagedShape, float]:
    """Validate a paged-KV-cache call (flash-attn ``flash_attn_with_kvcache`` / vLLM convention).

    Args:
        q: ``(B, H, N_q, d)`` floating, N_q <= 16 (the decode path).
        k_cache, v_cache: ``(num_blocks, page_size, H_kv, d)``, q's dtype and device,
            page_size in :data:`iomodel.schedule.tiles.PAGE_SIZES`.
        block_table: ``(B, max_pages)`` int32: page of each sequence's p-th ``page_size`` keys.
        cache_seqlens: ``(B,)`` int32: keys of each sequence.
        causal_align, sm_scale, dtypes: as :func:`check_inputs`.

    Returns:
        ``(PagedShape, sm_scale)``; the shapes only (the tables' contents are checked by
        :func:`check_paged_tables`).

    Raises:
        IomodelError: a non-tensor, wrong rank or dtype (non-int32 tables), mismatched
            batch/H_kv/HEAD_DIM/devices, an unsupported page_size, N_q > 16, an unknown
            alignment or a bad scale.
    """
    from iomodel.schedule.tiles import DECODE_MAX_SEQLEN_Q, page_size_refusal

    for name, t, rank, what in (("q", q, 4, "(B, H, N_q, d)"), ("k_cache", k_cache, 4, "(num_blocks, page_size, H_kv, d)"),
                                ("v_cache", v_cache, 4, "(num_blocks, page_size, H_kv, d)"),
                                ("block_table", block_table, 2, "(B, max_pages)"), ("cache_seqlens", cache_seqlens, 1, "(B,)")):
        if not isinstance(t, torch.Tensor):
            raise IomodelError(f"{name} must be a torch.Tensor {what}, got {type(t).__name__}: pass a tensor")
        if t.dim() != rank:
            raise IomodelError(f"{name} must have shape {what}, got {tuple(t.shape)}: reshape it")
    assert isinstance(q, torch.Tensor) and isinstance(k_cache, torch.Tensor) and isinstance(v_cache, torch.Tensor)
    assert isinstance(block_table, torch.Tensor) and isinstance(cache_seqlens, torch.Tensor)
    for name, t in (("block_table", block_table), ("cache_seqlens", cache_seqlens)):
        if t.dtype != torch.int32:
            raise IomodelError(f"{name} must be int32, got {t.dtype}: pass {name}.to(torch.int32)")
    dtype = tensor_dtype_name(q.dtype)
    if not q.dtype.is_floating_point or (dtypes is not None and dtype not in dtypes):
        use = ", ".join(dtypes) if dtypes is not None else "a floating dtype"
        raise IomodelError(f"dtype {q.dtype} is not supported: use {use} for q, k_cache and v_cache")
    if k_cache.dtype != q.dtype or v_cache.dtype != q.dtype:
        raise IomodelError(f"q, k_cache and v_cache must share one dtype, got {q.dtype}, {k_cache.dtype}, "
                           f"{v_cache.dtype}: cast them to one dtype")
    devices = {t.device for t in (q, k_cache, v_cache, block_table, cache_seqlens)}
    if len(devices) != 1:
        raise IomodelError(f"q, k_cache, v_cache, block_table and cache_seqlens are on different devices "
                           f"({', '.join(sorted(map(str, devices)))}): move them to one")
    B, H, N_q, d = q.shape
    num_blocks, page_size, H_kv, dk = k_cache.shape
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise IomodelError(f"v_cache has shape {tuple(v_cache.shape)} but k_cache has {tuple(k_cache.shape)}: "
                           "give them the same shape")
    if dk != d:
        raise IomodelError(f"q has HEAD_DIM {d} but k_cache and v_cache have {dk}: use one HEAD_DIM")
    if min(B, H, N_q, d, num_blocks, H_kv, block_table.shape[1]) == 0:
        raise IomodelError(f"empty input (q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, block_table "
                           f"{tuple(block_table.shape)}): every size must be at least 1")
    if H % H_kv:
        raise IomodelError(f"query heads ({H}) must be a multiple of the cache's key/value heads ({H_kv}) for "
                           "GQA/MQA: pick H_kv among the divisors of H")
    if block_table.shape[0] != B or tuple(cache_seqlens.shape) != (B,):
        raise IomodelError(f"block_table {tuple(block_table.shape)} and cache_seqlens {tuple(cache_seqlens.shape)} "
                           f"must have q's batch {B} rows: pass one row per sequence")
    reason = page_size_refusal(page_size, "allocate k_cache and v_cache with such pages (dimension 1)")
    if reason is not None:
        raise IomodelError(reason)
    if N_q > DECODE_MAX_SEQLEN_Q:
        raise IomodelError(f"the paged KV cache runs on the decode path, 1 to {DECODE_MAX_SEQLEN_Q} query rows, got "
                           f"seqlen_q = {N_q}: split the queries into chunks of at most {DECODE_MAX_SEQLEN_Q} rows")
    max_pages = block_table.shape[1]
    causal_offset(causal_align, N_q, max_pages * page_size)
    attn = AttnShape(B, H, H_kv, N_q, max_pages * page_size, d, dtype, phase="decode")
    return PagedShape(attn, num_blocks, page_size, max_pages), _scale(sm_scale, d)


def check_paged_tables(block_table: torch.Tensor, cache_seqlens: torch.Tensor, num_blocks: int, page_size: int) -> None:
    """Check the contents of the tables (a host synchronisation; ``check=False`` skips it).

    Every ``cache_seqlens[b]`` in ``[0, max_pages · page_size]`` and every entry of the pages
    a sequence uses (``block_table[b, p]``, p < ceil(cache_seqlens[b] / page_size)) in
    ``[0, num_blocks)``; entries past a sequence's last page are never read and not checked.

    Raises:
        IomodelError: naming the first offending sequence, page and value.
    """
    max_pages = block_table.shape[1]
    lens = cache_seqlens.to("cpu", torch.int64)  # (B,)
    bad = ((lens < 0) | (lens > max_pages * page_size)).nonzero()
    if len(bad):
        b = int(bad[0, 0])
        raise IomodelError(f"cache_seqlens[{b}] = {int(lens[b])} is outside 0..{max_pages * page_size} (max_pages "
                           f"{max_pages} x page_size {page_size}): give fewer keys or more pages")
    pages = (lens + page_size - 1) // page_size  # (B,) pages each sequence reads
    table = block_table.to("cpu", torch.int64)  # (B, max_pages)
    used = torch.arange(max_pages)[None, :] < pages[:, None]
    bad = (used & ((table < 0) | (table >= num_blocks))).nonzero()
    if len(bad):
        b, p = int(bad[0, 0]), int(bad[0, 1])
        raise IomodelError(f"block_table[{b}, {p}] = {int(table[b, p])} is not a page of the cache (0..{num_blocks - 1}): "
                           "point it at an allocated page")


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
