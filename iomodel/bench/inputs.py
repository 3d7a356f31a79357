"""Seeded attention inputs for one shape, and their float64 reference output.

Every backend of a shape runs on the *same* tensors (made once from a seed derived from
the matrix seed, the bucket name and the shape's index). A padded ragged batch is a dense
padded batch plus a boolean key-padding ``attn_mask`` (True = attend), which is how
serving stacks without nested tensors express it; the mask changes which SDPA backends
accept the call, and the harness records that. A training bucket's Q, K, V require grad
and come with a seeded output gradient dO (:attr:`AttentionInputs.do`);
:func:`reference_gradients` gives their float64 gradients.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

from iomodel.bench.matrix import Bucket, Shape
from iomodel.errors import IomodelError
from iomodel.spec import torch_dtype
from iomodel.spec.dtypes import DTYPES


@dataclass
class AttentionInputs:
    """The tensors and flags of one attention call.

    Attributes:
        q: ``(B, H, seqlen_q, HEAD_DIM)``; k, v: ``(B, H_kv, seqlen_k, HEAD_DIM)``.
        causal, causal_align: the causal mask as the Triton kernel takes it.
        attn_mask: boolean ``(B, 1, seqlen_q, seqlen_k)`` (or ``(B, 1, 1, seqlen_k)``) for
            SDPA, True = attend; None when SDPA's ``is_causal`` (top-left) or no mask says it.
        sdpa_is_causal: the ``is_causal`` flag passed to SDPA.
        lengths: valid key lengths per sequence of a padded batch, else None.
        valid_rows: boolean ``(B, seqlen_q)`` of the query rows that count in error
            statistics (padded prefill rows are excluded), or None (all rows count).
        mask_kind: ``"none"``, ``"is_causal"``, ``"key-padding"``, ``"key-padding+causal"``
            or ``"causal-bottom-right"``: how the mask reached SDPA.
        do: training buckets: the gradient of O ``(B, H, seqlen_q, HEAD_DIM)`` that one
            backward pass takes (q, k, v then require grad); None for a forward bucket.
    """

    q: Any
    k: Any
    v: Any
    causal: bool
    causal_align: str
    attn_mask: Any
    sdpa_is_causal: bool
    lengths: tuple[int, ...] | None
    valid_rows: Any
    mask_kind: str
    do: Any = None

    @property
    def gqa(self) -> bool:
        return self.k.shape[1] != self.q.shape[1]


def dense_inputs(q: Any, k: Any, v: Any, causal: bool, causal_align: str = "top-left") -> AttentionInputs:
    """The inputs of a dense call without a key-padding mask (every query row counts).

    Args:
        q: ``(B, H, seqlen_q, HEAD_DIM)``; k, v: ``(B, H_kv, seqlen_k, HEAD_DIM)``.
        causal: causal mask; causal_align: ``"top-left"`` (SDPA's ``is_causal``; the only
            alignment SDPA takes without an ``attn_mask``) or ``"bottom-right"`` (kernel only).

    Raises:
        ValueError: causal bottom-right, which SDPA cannot take without a mask tensor.
    """
    if causal and causal_align != "top-left":
        raise ValueError("dense_inputs: causal bottom-right needs an attn_mask for SDPA: use make_inputs")
    return AttentionInputs(q=q, k=k, v=v, causal=causal, causal_align=causal_align, attn_mask=None,
                           sdpa_is_causal=causal, lengths=None, valid_rows=None,
                           mask_kind="is_causal" if causal else "none")


def shape_seed(seed: int, bucket: str, index: int) -> int:
    """A stable 63-bit seed for shape ``index`` of ``bucket`` (CRC32 of the name; not Python's salted hash)."""
    return (seed * 1_000_003 + zlib.crc32(bucket.encode()) * 1_009 + index) % (2**63 - 1)


def visible_keys(bucket: Bucket, shape: Shape, device: str):
    """Boolean ``(B, 1, seqlen_q, seqlen_k)`` tensor: True where query row m may see key n.

    Query row m of sequence b sees key n iff ``n < L_b`` (padded batches) and, when
    causal, ``n <= m + off_b`` with ``off_b = 0`` (top-left) or ``L_b - seqlen_q``
    (bottom-right; ``L_b = seqlen_k`` for a dense batch).
    """
    import torch

    B, nq, nk = shape.batch, shape.seqlen_q, shape.seqlen_k
    lengths = torch.tensor(shape.lengths or [nk] * B, device=device).view(B, 1, 1, 1)
    n = torch.arange(nk, device=device).view(1, 1, 1, nk)
    m = torch.arange(nq, device=device).view(1, 1, nq, 1)
    vis = n < lengths
    if bucket.causal:
        off = torch.zeros_like(lengths) if bucket.causal_align == "top-left" else lengths - nq
        vis = vis & (n <= m + off)
    return vis.expand(B, 1, nq, nk)


def least_bytes(bucket: Bucket, shape: Shape) -> int:
    """A lower bound on the device memory one shape's run holds at once (bytes): Q, K, V (and O, with dO for a
    training bucket) in the bucket's dtype, the float32 draws they are cast from (one at a time: the largest), and
    the float64 reference's K, V and output (:func:`reference_output`). Scores and masks come on top, so a shape
    above the memory available cannot run; one below it still may not (:func:`check_memory`)."""
    B, nq, nk, d = shape.batch, shape.seqlen_q, shape.seqlen_k, bucket.head_dim
    q_elems, kv_elems = B * bucket.heads * nq * d, B * bucket.kv_heads * nk * d
    width = DTYPES[bucket.dtype]
    inputs = (2 + 2 * int(bucket.training)) * q_elems + 2 * kv_elems  # q, o (do, dq), k, v
    return inputs * width + 4 * max(q_elems, kv_elems) + 8 * (2 * kv_elems + q_elems)


def available_bytes(device: str) -> int | None:
    """The memory a run on ``device`` may still take (bytes): the GPU's free memory (``torch.cuda.mem_get_info``) or,
    on the CPU, Linux's ``MemAvailable`` (``/proc/meminfo``); None where neither can be read."""
    if device == "cuda":
        import torch

        try:
            return int(torch.cuda.mem_get_info()[0])
        except (RuntimeError, AssertionError, AttributeError, TypeError, ValueError):  # no driver answer: unknown
            return None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(buckets: Any, device: str) -> None:
    """Refuse a matrix one of whose shapes cannot fit ``device``'s memory (:func:`least_bytes` above
    :func:`available_bytes`), before anything is allocated: on the CPU such a run was ended by the kernel's
    out-of-memory killer after a minute, with no message.

    Raises:
        IomodelError: one line naming the bucket, the shape and both sizes.
    """
    free = available_bytes(device)
    if free is None:
        return
    for b in buckets:
        for i, s in enumerate(b.shapes):
            need = least_bytes(b, s)
            if need > free:
                raise IomodelError(f"bucket {b.name!r} shape #{i + 1} ({s.label()}) needs at least {need / 2**30:,.1f} "
                                   f"GiB of {device} memory for its tensors and float64 reference, above the "
                                   f"{free / 2**30:,.1f} GiB available: lower its batch or lengths")


def make_inputs(bucket: Bucket, shape: Shape, seed: int, device: str) -> AttentionInputs:
    """Standard-normal Q, K, V for one shape, made on ``device`` from ``seed``.

    Values are drawn in float32 from ``torch.Generator(device).manual_seed(seed)`` and cast
    to the bucket's dtype, so every backend sees bit-identical inputs. A training bucket
    also draws dO ``(B, H, seqlen_q, HEAD_DIM)`` after V from the same generator (so Q, K, V
    are those of the same shape in a forward bucket) and marks Q, K, V as requiring grad.
    """
    import torch

    dtype = torch_dtype(bucket.dtype)
    gen = torch.Generator(device=device).manual_seed(seed)
    B, nq, nk, d = shape.batch, shape.seqlen_q, shape.seqlen_k, bucket.head_dim
    q = torch.randn(B, bucket.heads, nq, d, generator=gen, device=device).to(dtype)  # (B, H, N_q, d)
    k = torch.randn(B, bucket.kv_heads, nk, d, generator=gen, device=device).to(dtype)  # (B, H_kv, N_k, d)
    v = torch.randn(B, bucket.kv_heads, nk, d, generator=gen, device=device).to(dtype)  # (B, H_kv, N_k, d)
    do = None
    if bucket.training:
        do = torch.randn(B, bucket.heads, nq, d, generator=gen, device=device).to(dtype)  # (B, H, N_q, d)
        for t in (q, k, v):
            t.requires_grad_(True)
    valid_rows = None
    if shape.lengths is not None:
        if bucket.causal:
            mask, kind = visible_keys(bucket, shape, device), "key-padding+causal"
        else:
            lengths = torch.tensor(shape.lengths, device=device).view(B, 1, 1, 1)
            mask, kind = torch.arange(nk, device=device).view(1, 1, 1, nk) < lengths, "key-padding"  # (B,1,1,N_k)
        if bucket.phase == "prefill":
            valid_rows = torch.arange(nq, device=device).view(1, nq) < torch.tensor(shape.lengths, device=device).view(B, 1)
        is_causal = False
    elif bucket.causal and bucket.causal_align == "bottom-right":
        mask, kind, is_causal = visible_keys(bucket, shape, device), "causal-bottom-right", False
    elif bucket.causal:
        mask, kind, is_causal = None, "is_causal", True
    else:
        mask, kind, is_causal = None, "none", False
    return AttentionInputs(q=q, k=k, v=v, causal=bucket.causal, causal_align=bucket.causal_align, attn_mask=mask,
                           sdpa_is_causal=is_causal, lengths=shape.lengths, valid_rows=valid_rows, mask_kind=kind,
                           do=do)


def reference_output(bucket: Bucket, shape: Shape, inp: AttentionInputs, max_score_bytes: int = 256 * 2**20):
    """Float64 attention output ``(B, H, seqlen_q, HEAD_DIM)`` of the inputs, computed in query-row chunks.

    softmax(Q K^T / sqrt(HEAD_DIM) + mask) V in float64 with GQA by index mapping (query
    head h uses KV head h // G, as ``repeat_interleave`` and SDPA's ``enable_gqa`` do).
    Rows that see no key are 0. The score chunk is kept below ``max_score_bytes`` bytes.
    """
    import torch

    B, H, nq, d = inp.q.shape
    Hkv, nk = inp.k.shape[1], inp.k.shape[2]
    G = H // Hkv
    k64 = inp.k.detach().double()  # (B, H_kv, N_k, d); detached: a training bucket's inputs require grad
    v64 = inp.v.detach().double()
    vis = visible_keys(bucket, shape, str(inp.q.device))  # (B, 1, N_q, N_k)
    out = torch.empty(B, H, nq, d, dtype=torch.float64, device=inp.q.device)
    rows = max(1, min(nq, max_score_bytes // max(1, B * H * nk * 8)))
    scale = d ** -0.5
    for a in range(0, nq, rows):
        b = min(nq, a + rows)
        qc = inp.q.detach()[:, :, a:b].double().reshape(B, Hkv, G * (b - a), d)  # (B, H_kv, G*c, d)
        s = (qc @ k64.transpose(-2, -1)) * scale  # (B, H_kv, G*c, N_k)
        s = s.view(B, Hkv, G, b - a, nk)
        s = s.masked_fill(~vis[:, :, a:b].view(B, 1, 1, b - a, nk), float("-inf"))
        p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # rows with no visible key -> 0
        out[:, :, a:b] = (p.view(B, Hkv, G * (b - a), nk) @ v64).view(B, H, b - a, d)
    return out


def reference_gradients(inp: AttentionInputs):
    """Float64 gradients ``(dq, dk, dv)`` of the inputs of a training bucket for its ``inp.do``.

    :func:`kernels.reference.reference_attention_backward` (the one float64 backward), one
    batch element and KV head at a time, so the float64 scores it materialises stay at
    ``G * seqlen_q * seqlen_k * 8`` bytes per tensor (G = H / H_kv) rather than B * H_kv
    times that. Padded shapes never reach it (the matrix refuses lengths in a fwd+bwd bucket).

    Returns:
        dq ``(B, H, seqlen_q, HEAD_DIM)``, dk and dv ``(B, H_kv, seqlen_k, HEAD_DIM)``, float64;
        dk and dv summed over the query heads of each group.

    Raises:
        IomodelError: ``inp.do`` is None (not a training bucket's inputs), or the reference
            refuses the shapes.
    """
    import torch

    from iomodel.errors import IomodelError
    from kernels.reference import reference_attention_backward

    if inp.do is None:
        raise IomodelError("these inputs have no output gradient dO: make them with make_inputs for a fwd+bwd bucket")
    q, k, v, do = (t.detach() for t in (inp.q, inp.k, inp.v, inp.do))
    B, H = q.shape[:2]
    Hkv = k.shape[1]
    G = H // Hkv
    dq = torch.empty(q.shape, dtype=torch.float64, device=q.device)  # (B, H, N_q, d)
    dk = torch.empty(k.shape, dtype=torch.float64, device=q.device)  # (B, H_kv, N_k, d)
    dv = torch.empty(v.shape, dtype=torch.float64, device=q.device)
    for b in range(B):
        for j in range(Hkv):
            hs = slice(j * G, (j + 1) * G)  # the query heads of KV head j
            g = reference_attention_backward(do[b:b + 1, hs], q[b:b + 1, hs], k[b:b + 1, j:j + 1],
                                             v[b:b + 1, j:j + 1], inp.causal, inp.causal_align)
            dq[b:b + 1, hs], dk[b:b + 1, j:j + 1], dv[b:b + 1, j:j + 1] = g
    return dq, dk, dv
