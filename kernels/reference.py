"""The fp64 reference attention that the kernel and the eager baseline are judged against.

Same conventions as :func:`kernels.flash_attention.flash_attention`: q ``(B, H, N_q, d)``,
k and v ``(B, H_kv, N_k, d)`` with GQA/MQA by index mapping (query head h reads KV head
``h // G``, G = H / H_kv), causal alignment top-left (PyTorch ``is_causal``: row m sees
key n iff n <= m) or bottom-right (flash-attn >= 2.1: n <= m + N_k - N_q), and a sliding
window ``(left, right)`` (:func:`iomodel.spec.layer.window_band`: m + off − left <= n <=
m + off + right). A row that sees no key has output 0 and LSE −inf (never NaN).
"""

from __future__ import annotations

import torch

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import KERNEL_DTYPES
from iomodel.spec.layer import causal_offset
from kernels._inputs import check_inputs, window_argument


def visible_mask(seqlen_q: int, seqlen_k: int, causal: bool, causal_align: str, device: torch.device | str = "cpu",
                 window: tuple[int | None, int | None] | None = None) -> torch.Tensor:
    """Boolean ``(N_q, N_k)`` tensor: True where query row m sees key n.

    ``window``: ``(left, right)`` tokens, -1 or None unbounded (the kernel's argument).

    Raises:
        IomodelError: unknown ``causal_align``, or a bad window.
    """
    off = causal_offset(causal_align, seqlen_q, seqlen_k)
    band = window_argument(window, causal, seqlen_q, seqlen_k)
    m = torch.arange(seqlen_q, device=device)[:, None]
    n = torch.arange(seqlen_k, device=device)[None, :]
    vis = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=device)
    if causal:
        vis = vis & (n <= m + off)
    if band is not None:
        vis = vis & (n >= m + off - band[0]) & (n <= m + off + band[1])
    return vis


def reference_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (B, H, N_q, d), (B, H_kv, N_k, d), (B, H_kv, N_k, d)
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    window: tuple[int | None, int | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax attention in float64.

    Args:
        q: ``(B, H, N_q, d)`` fp16/bf16/fp32/fp64.
        k, v: ``(B, H_kv, N_k, d)``, H divisible by H_kv.
        causal: apply the causal mask.
        causal_align: ``top-left`` or ``bottom-right``.
        sm_scale: score scale, default ``1 / sqrt(d)`` (Vaswani et al. 2017, eq. 1).
        window: sliding window ``(left, right)`` in tokens (-1 or None unbounded), as the kernel's.

    Returns:
        ``(o, lse)``: o ``(B, H, N_q, d)`` float64; lse ``(B, H, N_q)`` float64, the natural
        log-sum-exp of the scaled, masked scores of each row (−inf where the row sees no
        key, and o = 0 there).

    Raises:
        IomodelError: bad shapes, dtypes, alignment or scale (see ``kernels._inputs.check_inputs``).
    """
    shape, sm_scale = check_inputs(q, k, v, causal_align, sm_scale, dtypes=(*KERNEL_DTYPES, "fp64"))
    B, H, N_q, N_k, d, G = shape.batch, shape.heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.group
    q64 = q.detach().to(torch.float64).reshape(B, shape.kv_heads, G, N_q, d)  # (B, H_kv, G, N_q, d)
    k64 = k.detach().to(torch.float64)  # (B, H_kv, N_k, d)
    v64 = v.detach().to(torch.float64)
    s = torch.einsum("bkgmd,bknd->bkgmn", q64, k64) * sm_scale  # (B, H_kv, G, N_q, N_k)
    vis = visible_mask(N_q, N_k, causal, causal_align, q.device, window)
    s = s.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)  # (B, H_kv, G, N_q); -inf for rows that see nothing
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])
    o = torch.einsum("bkgmn,bknd->bkgmd", p, v64)  # rows that see nothing: p = 0, o = 0
    return o.reshape(B, H, N_q, d), lse.reshape(B, H, N_q)


def reference_attention_backward(
    do: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    causal_align: str = "top-left",
    sm_scale: float | None = None,
    window: tuple[int | None, int | None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Exact gradients of softmax attention in float64 (FlashAttention-2, Dao 2023, Algorithm 2
    in closed form: dV = Pᵀ dO, dP = dO Vᵀ, D = rowsum(dO ∘ O), dS = P ∘ (dP − D),
    dQ = scale · dS K, dK = scale · dSᵀ Q).

    Args:
        do: ``(B, H, N_q, d)`` gradient of o; q, k, v, causal, causal_align, sm_scale, window
            as :func:`reference_attention`.

    Returns:
        ``(dq, dk, dv)`` float64, shaped like q, k, v; GQA/MQA: dk and dv summed over the
        query heads of each group. Rows that see no key give dq = 0; keys no row sees give
        dk = dv = 0.

    Raises:
        IomodelError: bad shapes, dtypes, alignment or scale, or ``do`` not shaped like q.
    """
    shape, sm_scale = check_inputs(q, k, v, causal_align, sm_scale, dtypes=(*KERNEL_DTYPES, "fp64"))
    if not isinstance(do, torch.Tensor) or tuple(do.shape) != tuple(q.shape):
        raise IomodelError(f"do must be a tensor shaped like q {tuple(q.shape)}: pass the gradient of o")
    B, H, N_q, N_k, d, G = shape.batch, shape.heads, shape.seqlen_q, shape.seqlen_k, shape.head_dim, shape.group
    q64 = q.detach().to(torch.float64).reshape(B, shape.kv_heads, G, N_q, d)  # (B, H_kv, G, N_q, d)
    do64 = do.detach().to(torch.float64).reshape(B, shape.kv_heads, G, N_q, d)
    k64 = k.detach().to(torch.float64)  # (B, H_kv, N_k, d)
    v64 = v.detach().to(torch.float64)
    s = torch.einsum("bkgmd,bknd->bkgmn", q64, k64) * sm_scale  # (B, H_kv, G, N_q, N_k)
    s = s.masked_fill(~visible_mask(N_q, N_k, causal, causal_align, q.device, window), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - torch.where(torch.isinf(lse), torch.zeros_like(lse), lse)[..., None])  # 0 where masked
    o = torch.einsum("bkgmn,bknd->bkgmd", p, v64)
    dv = torch.einsum("bkgmn,bkgmd->bknd", p, do64)  # summed over the group g
    dp = torch.einsum("bkgmd,bknd->bkgmn", do64, v64)
    ds = p * (dp - (do64 * o).sum(-1, keepdim=True))
    dq = torch.einsum("bkgmn,bknd->bkgmd", ds, k64) * sm_scale
    dk = torch.einsum("bkgmn,bkgmd->bknd", ds, q64) * sm_scale
    return dq.reshape(B, H, N_q, d), dk, dv


def reference_attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,  # (total_q, H, d), (total_k, H_kv, d), (total_k, H_kv, d)
    cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,  # (B + 1,) int
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
    window: tuple[int | None, int | None] | None = None,
    seqused_k: torch.Tensor | None = None,  # (B,) int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact attention of a ragged batch in float64: :func:`reference_attention` on each sequence.

    Args:
        q: ``(total_q, H, d)`` packed queries; k, v: ``(total_k, H_kv, d)`` packed keys/values.
        cu_seqlens_q, cu_seqlens_k: ``(B + 1,)`` cumulative lengths (sequence b: rows
            ``[cu[b], cu[b+1])``); seqused_k: ``(B,)`` keys used per sequence (the first ones; 0:
            none, the sequence's rows give o = 0 and lse = −inf), or None.
        causal, causal_align, sm_scale, window: per sequence, as :func:`reference_attention`
            (bottom-right offset = that sequence's N_k_b − N_q_b).

    Returns:
        ``(o, lse)``: o ``(total_q, H, d)`` float64, lse ``(H, total_q)`` float64
        (flash-attn's varlen layout; −inf and o = 0 for rows that see no key).

    Raises:
        IomodelError: inputs that are not 3-D tensors, cu_seqlens of different lengths, or what
            :func:`reference_attention` refuses for a sequence.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 3:
            raise IomodelError(f"{name} must be a packed 3-D tensor (total_tokens, heads, HEAD_DIM): pack it")
    cq, ck = [int(x) for x in cu_seqlens_q.tolist()], [int(x) for x in cu_seqlens_k.tolist()]
    if len(cq) != len(ck) or len(cq) < 2:
        raise IomodelError(f"cu_seqlens_q and cu_seqlens_k must both have B + 1 >= 2 entries, got {len(cq)} and "
                           f"{len(ck)}: give one entry per sequence boundary")
    used = None if seqused_k is None else [int(x) for x in seqused_k.tolist()]
    o = torch.zeros(q.shape, dtype=torch.float64, device=q.device)  # (total_q, H, d)
    lse = torch.zeros(q.shape[1], q.shape[0], dtype=torch.float64, device=q.device)  # (H, total_q)
    for b in range(len(cq) - 1):
        k_end = ck[b + 1] if used is None else ck[b] + used[b]
        if k_end == ck[b]:  # no key used: every row sees none
            lse[:, cq[b]:cq[b + 1]] = float("-inf")
            continue
        ob, lb = reference_attention(q[cq[b]:cq[b + 1]].transpose(0, 1)[None],  # (1, H, N_q_b, d)
                                     k[ck[b]:k_end].transpose(0, 1)[None], v[ck[b]:k_end].transpose(0, 1)[None],
                                     causal, causal_align, sm_scale, window)
        o[cq[b]:cq[b + 1]] = ob[0].transpose(0, 1)
        lse[:, cq[b]:cq[b + 1]] = lb[0]
    return o, lse


def gather_pages(cache: torch.Tensor, block_table: torch.Tensor, seqlen: int, b: int) -> torch.Tensor:
    """Sequence b's first ``seqlen`` keys of a paged cache as a dense ``(1, H_kv, seqlen, d)`` tensor.

    Args:
        cache: ``(num_blocks, page_size, H_kv, d)``; block_table: ``(B, max_pages)`` int32
            (page of each ``page_size`` keys); seqlen: keys of sequence b (elements).
    """
    pages = block_table[b, : -(-seqlen // cache.shape[1])].long()  # the pages the sequence uses
    dense = cache[pages].reshape(-1, cache.shape[2], cache.shape[3])[:seqlen]  # (seqlen, H_kv, d)
    return dense.permute(1, 0, 2)[None]


def reference_attention_paged(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,  # (B, H, N_q, d), (num_blocks, page_size, H_kv, d) x2
    block_table: torch.Tensor, cache_seqlens: torch.Tensor,  # (B, max_pages) int32, (B,) int32
    causal: bool = False, causal_align: str = "top-left", sm_scale: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact attention in float64 over a paged KV cache (``kernels.flash_attention.flash_attention``'s
    ``block_table``/``cache_seqlens`` convention): each sequence's pages gathered into dense K/V
    (:func:`gather_pages`) and passed to :func:`reference_attention`, so the causal
    alignment is per sequence. A sequence with no key gives o = 0 and lse = −inf.

    Returns:
        ``(o, lse)``: ``(B, H, N_q, d)`` and ``(B, H, N_q)`` float64.

    Raises:
        IomodelError: as :func:`kernels._inputs.check_paged_inputs` (shapes, dtypes, int32
            tables) and :func:`kernels._inputs.check_paged_tables` (their contents).
    """
    from kernels._inputs import check_paged_inputs, check_paged_tables

    pshape, sm_scale = check_paged_inputs(q, k_cache, v_cache, block_table, cache_seqlens, causal_align, sm_scale,
                                          dtypes=(*KERNEL_DTYPES, "fp64"))
    check_paged_tables(block_table, cache_seqlens, pshape.num_blocks, pshape.page_size)
    B, H, N_q, d = q.shape
    o = torch.zeros(B, H, N_q, d, dtype=torch.float64, device=q.device)
    lse = torch.full((B, H, N_q), float("-inf"), dtype=torch.float64, device=q.device)
    for b, n in enumerate(cache_seqlens.tolist()):
        if n == 0:
            continue
        o[b], lse[b] = (t[0] for t in reference_attention(
            q[b:b + 1], gather_pages(k_cache, block_table, n, b), gather_pages(v_cache, block_table, n, b),
            causal, causal_align, sm_scale))
    return o, lse


def random_paged_cache(batch: int, kv_heads: int, head_dim: int, page_size: int, seqlens: list[int], dtype: torch.dtype,
                       generator: torch.Generator, max_pages: int | None = None,
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random paged inputs: ``(k_cache, v_cache, block_table, cache_seqlens)``.

    ``k_cache``, ``v_cache`` ``(num_blocks, page_size, H_kv, d)`` with num_blocks = batch · max_pages
    (default max_pages = ⌈max(seqlens) / page_size⌉, at least 1), pages handed out in a random
    order (so a sequence's pages are not contiguous); ``block_table`` ``(batch, max_pages)`` int32
    (every entry a valid page); ``cache_seqlens`` ``(batch,)`` int32 = ``seqlens``; all on
    ``generator.device``.
    """
    max_pages = max_pages or max(1, -(-max(seqlens) // page_size))
    num_blocks = batch * max_pages
    dev = generator.device  # the tensors live where the generator does (a CUDA generator: on the GPU)
    k_cache = torch.randn(num_blocks, page_size, kv_heads, head_dim, generator=generator, device=dev).to(dtype)
    v_cache = torch.randn(num_blocks, page_size, kv_heads, head_dim, generator=generator, device=dev).to(dtype)
    block_table = torch.randperm(num_blocks, generator=generator, device=dev).reshape(batch, max_pages).to(torch.int32)
    return k_cache, v_cache, block_table, torch.tensor(seqlens, dtype=torch.int32, device=dev)
