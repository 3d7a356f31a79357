"""Downstream check: the logits of a small attention block must survive a fused backend.

Element-wise output error says little about what a model sees. This builds one
pre-logits block locally — ``x -> (W_q, W_k, W_v) -> attention -> W_o -> + x -> W_u ->
logits`` with seeded Gaussian weights (std 1/sqrt(fan_in), so logits are O(1)) — and runs
it in the benchmark dtype once per backend, against the same block in float64. The
largest absolute logit difference must stay within the policy's declared bound.

Shapes: x ``(B, N, D)`` with ``D = H * HEAD_DIM``; logits ``(B, N, vocab)``.
"""

from __future__ import annotations

from typing import Any

from iomodel.bench.backends import SDPA_BACKENDS, Backend, KernelRefusal
from iomodel.bench.inputs import dense_inputs, reference_output
from iomodel.bench.matrix import Bucket, Shape
from iomodel.bench.policy import DownstreamPolicy
from iomodel.bench.telemetry import probe_call
from iomodel.spec import torch_dtype


def _block_weights(cfg: DownstreamPolicy, device: str, seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    D = cfg.heads * cfg.head_dim
    Dkv = cfg.kv_heads * cfg.head_dim

    def w(fan_in: int, fan_out: int):
        return torch.randn(fan_in, fan_out, generator=gen, device=device, dtype=torch.float64) / fan_in**0.5

    x = torch.randn(cfg.batch, cfg.seqlen, D, generator=gen, device=device, dtype=torch.float64)  # (B, N, D)
    return {"x": x, "wq": w(D, D), "wk": w(D, Dkv), "wv": w(D, Dkv), "wo": w(D, D), "wu": w(D, cfg.vocab)}


def _project(cfg: DownstreamPolicy, p: dict[str, Any]):
    B, N = cfg.batch, cfg.seqlen
    x = p["x"]
    q = (x @ p["wq"]).view(B, N, cfg.heads, cfg.head_dim).transpose(1, 2).contiguous()  # (B, H, N, d)
    k = (x @ p["wk"]).view(B, N, cfg.kv_heads, cfg.head_dim).transpose(1, 2).contiguous()  # (B, H_kv, N, d)
    v = (x @ p["wv"]).view(B, N, cfg.kv_heads, cfg.head_dim).transpose(1, 2).contiguous()
    return q, k, v


def _finish(cfg: DownstreamPolicy, p: dict[str, Any], o):
    B, N = cfg.batch, cfg.seqlen
    o = o.transpose(1, 2).reshape(B, N, cfg.heads * cfg.head_dim)  # (B, N, D)
    h = p["x"] + o @ p["wo"]
    return h @ p["wu"]  # (B, N, vocab)


def downstream_check(cfg: DownstreamPolicy, dtype: str, backends: list[Backend], device: str, seed: int = 0) -> dict[str, Any]:
    """Max |logit - logit64| of the block for each available backend, in ``dtype``.

    Args:
        cfg: the block's shape and the per-dtype bounds (policy ``[downstream]``).
        dtype: ``"fp32"``, ``"fp16"`` or ``"bf16"``.
        backends: from :func:`iomodel.bench.backends.available_backends`.
        device: ``"cpu"`` or ``"cuda"``.
        seed: weight and input seed.

    Returns:
        ``{backend: {"status", "max_abs", "p99_abs", "bound", "pass", "reasons"}}``; logit
        errors are in logit units (natural-log odds).
    """
    import torch

    tdt = torch_dtype(dtype)
    p64 = _block_weights(cfg, device, seed)
    q64, k64, v64 = _project(cfg, p64)
    bucket = Bucket(name="downstream", weight=1.0, phase="prefill", causal=cfg.causal, causal_align="top-left",
                    heads=cfg.heads, kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, dtype=dtype,
                    shapes=(Shape(cfg.batch, cfg.seqlen, cfg.seqlen),))
    shape = bucket.shapes[0]

    logits64 = _finish(cfg, p64, reference_output(bucket, shape, dense_inputs(q64, k64, v64, cfg.causal)))
    plow = {k: v.to(tdt) for k, v in p64.items()}
    ql, kl, vl = _project(cfg, plow)
    inp = dense_inputs(ql, kl, vl, cfg.causal)
    bound = cfg.bound.get(dtype)
    out: dict[str, Any] = {}
    for be in backends:
        if not be.available:
            out[be.name] = {"status": "unavailable", "reasons": [be.reason]}
            continue
        try:
            fn = be.make_call(inp)
        except KernelRefusal as exc:
            out[be.name] = {"status": "unsupported", "reasons": [str(exc)]}
            continue
        pr = probe_call(fn, backend=be.name if be.name in SDPA_BACKENDS else None, refusal_types=be.refusal_types)
        if pr.output is None:
            out[be.name] = {"status": "unsupported" if pr.refused else "error", "reasons": pr.reasons or [pr.error]}
            continue
        logits = _finish(cfg, plow, pr.output).double()
        err = (logits - logits64).abs().flatten()
        max_abs = float(err.max())
        p99 = float(err.kthvalue(max(1, int(0.99 * err.numel()))).values)
        ok = bound is not None and bool(torch.isfinite(err).all()) and max_abs <= bound
        reasons = [] if ok else ([f"no downstream bound declared for {dtype}"] if bound is None else
                                 [f"max |logit - logit64| {max_abs:.3g} > bound {bound:g}"])
        agree = float((logits.argmax(-1) == logits64.argmax(-1)).double().mean())
        out[be.name] = {"status": "ok", "max_abs": max_abs, "p99_abs": p99, "argmax_agreement": agree,
                        "bound": bound, "pass": ok, "reasons": reasons}
    return out
