"""The attention implementations a benchmark compares, and whether each can run here.

* ``sdpa-math`` — PyTorch SDPA pinned to ``SDPBackend.MATH``: the baseline (materialised
  scores; fp32 intermediates for half inputs).
* ``sdpa-flash`` — ``SDPBackend.FLASH_ATTENTION``: FlashAttention-2 on CUDA, PyTorch's
  tiled CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``) on a CPU.
* ``sdpa-efficient`` — ``SDPBackend.EFFICIENT_ATTENTION`` (xFormers memory-efficient, CUDA only).
* ``sdpa-cudnn`` — ``SDPBackend.CUDNN_ATTENTION`` (cuDNN fused attention, CUDA only).
* ``triton`` — this project's kernel, ``kernels.flash_attention.flash_attention``, imported
  lazily; CUDA only (the CPU bench never times Triton's interpreter, which is a
  correctness tool).

A backend that cannot run on the device is listed as unavailable with its reason; one
that refuses a shape is reported as unsupported for that shape, never replaced.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from iomodel.bench.inputs import AttentionInputs
from iomodel.measure.sdpa import SDP_BACKEND_NAMES

BASELINE = "sdpa-math"
#: Order in which backends are listed (baseline first).
BACKEND_ORDER = ("sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "triton")
TITLES = {
    "sdpa-math": "SDPA MATH (baseline)",
    "sdpa-flash": "SDPA FLASH_ATTENTION",
    "sdpa-efficient": "SDPA EFFICIENT_ATTENTION",
    "sdpa-cudnn": "SDPA CUDNN_ATTENTION",
    "triton": "iomodel Triton kernel",
}


class KernelRefusal(Exception):
    """The Triton kernel does not take these inputs (raised before launching it)."""


@dataclass
class Backend:
    """One attention implementation.

    Attributes:
        name: harness name (see :data:`BACKEND_ORDER`).
        role: ``"baseline"`` or ``"fused"``.
        available: whether it can run on this device at all.
        reason: why not, when unavailable (one sentence).
        make_call: ``inputs -> zero-argument callable`` returning the output ``(B, H, seqlen_q, HEAD_DIM)``.
        refusal_types: exceptions of the callable that mean "unsupported shape".
    """

    name: str
    role: str
    available: bool
    reason: str
    make_call: Callable[[AttentionInputs], Callable[[], Any]] | None = None
    refusal_types: tuple[type[BaseException], ...] = ()
    version: str = ""
    describe: Callable[[AttentionInputs], dict[str, Any]] | None = None  # the launch configuration it picks

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "role": self.role, "available": self.available, "reason": self.reason,
                "version": self.version}


def sdpa_call(inp: AttentionInputs, backend: str | None) -> Callable[[], Any]:
    """Zero-argument callable running SDPA on ``inp``, pinned to ``backend`` (None: PyTorch's own choice).

    GQA is passed as ``enable_gqa=True`` (PyTorch >= 2.5), never by copying K/V.
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kwargs: dict[str, Any] = {"attn_mask": inp.attn_mask, "is_causal": inp.sdpa_is_causal}
    if inp.gqa:
        kwargs["enable_gqa"] = True
    q, k, v = inp.q, inp.k, inp.v
    if backend is None:
        def run_auto():
            return F.scaled_dot_product_attention(q, k, v, **kwargs)
        return run_auto
    pinned = [getattr(SDPBackend, SDP_BACKEND_NAMES[backend])]

    def run():
        with sdpa_kernel(pinned):
            return F.scaled_dot_product_attention(q, k, v, **kwargs)

    del torch
    return run


def _triton_call_factory(module: Any) -> Callable[[AttentionInputs], Callable[[], Any]]:
    def make(inp: AttentionInputs) -> Callable[[], Any]:
        if inp.lengths is not None:
            raise KernelRefusal("the Triton kernel takes no key-padding mask (attn_mask): padded ragged batches are unsupported")
        q, k, v = inp.q, inp.k, inp.v
        causal, align = inp.causal, inp.causal_align

        def run():
            return module.flash_attention(q, k, v, causal=causal, causal_align=align)[0]

        return run

    return make


def _sdpa_factory(name: str) -> Callable[[AttentionInputs], Callable[[], Any]]:
    return lambda inp: sdpa_call(inp, name)


def triton_backend(device: str) -> Backend:
    """The project's Triton kernel, if it can be timed on ``device`` (imported lazily)."""
    if device != "cuda":
        return Backend("triton", "fused", False,
                       "unavailable on cpu: the Triton kernel needs a CUDA GPU, and the CPU bench does not time "
                       "Triton's interpreter (TRITON_INTERPRET=1 is a correctness tool whose timings mean nothing)")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return Backend("triton", "fused", False, "unavailable: TRITON_INTERPRET is set, so the kernel would run in "
                       "the interpreter: unset it to time the compiled kernel")
    try:
        module = importlib.import_module("kernels.flash_attention")
        fn = module.flash_attention
    except Exception as exc:  # ImportError, a syntax error in a kernel being written, a missing name
        return Backend("triton", "fused", False,
                       f"unavailable: kernels.flash_attention could not be imported ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''})")
    del fn
    try:
        import triton

        version = f"triton {triton.__version__}"
    except Exception:  # pragma: no cover
        version = ""
    def describe(inp: AttentionInputs) -> dict[str, Any]:
        cfg = module.flash_attention(inp.q, inp.k, inp.v, causal=inp.causal, causal_align=inp.causal_align,
                                     return_config=True)[2]
        return dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {"config": str(cfg)}

    return Backend("triton", "fused", True, "", _triton_call_factory(module),
                   refusal_types=(KernelRefusal, ValueError, NotImplementedError), version=version, describe=describe)


def available_backends(device: str) -> list[Backend]:
    """Every backend of :data:`BACKEND_ORDER`, each marked available or not on ``device``.

    Args:
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        Backends in :data:`BACKEND_ORDER`; the first is the baseline ``sdpa-math``.
    """
    out = []
    for name in BACKEND_ORDER:
        if name == "triton":
            out.append(triton_backend(device))
            continue
        role = "baseline" if name == BASELINE else "fused"
        if device == "cpu" and name in ("sdpa-efficient", "sdpa-cudnn"):
            out.append(Backend(name, role, False, "unavailable on cpu: PyTorch has no CPU implementation of this SDPA backend"))
            continue
        out.append(Backend(name, role, True, "", _sdpa_factory(name)))
    return out
