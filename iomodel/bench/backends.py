"""The attention implementations a benchmark compares, and the one dispatcher that calls them.

* ``sdpa-math`` — PyTorch SDPA pinned to ``SDPBackend.MATH``: the baseline (materialised
  scores; fp32 intermediates for half inputs).
* ``sdpa-flash`` — ``SDPBackend.FLASH_ATTENTION``: FlashAttention-2 on CUDA, PyTorch's
  tiled CPU kernel (``_scaled_dot_product_flash_attention_for_cpu``) on a CPU.
* ``sdpa-efficient`` — ``SDPBackend.EFFICIENT_ATTENTION`` (xFormers memory-efficient, CUDA only).
* ``sdpa-cudnn`` — ``SDPBackend.CUDNN_ATTENTION`` (cuDNN fused attention, CUDA only).
* ``tiled`` — this project's kernel, ``kernels.flash_attention.flash_attention`` (the
  model's ``tiled`` algorithm), imported lazily; CUDA only (the CPU bench never times
  Triton's interpreter, which is a correctness tool). Receipts written before the rename
  call it ``triton``: :data:`LEGACY_BACKEND_NAMES`, applied by
  :func:`iomodel.bench.receipt.load_receipt`.
* ``eager`` — the eager chain in the input dtype, ``kernels.baseline.eager_attention`` (the
  guide's baseline: writes the seqlen_q x seqlen_k scores, softmax in the input dtype;
  differentiable by autograd). The second baseline of training buckets and their gradient
  baseline; forward buckets do not run it.

A training bucket times :func:`training_step` around a backend's call: forward, then
``torch.autograd.grad(o, (q, k, v), dO)``; a backend whose output has no backward is
refused with that reason (:class:`KernelRefusal`), never replaced.

:data:`SDPA_BACKENDS` is the one table of SDPA backends (``SDPBackend`` member, the ATen
ops that identify it in a profiler trace, the header of its refusal reasons), and
:func:`attention_call` the one dispatcher (``match backend:``, as attention-gym's
``api.py``). A backend that cannot run on the device is listed as unavailable with its
reason; one that refuses a shape is reported as unsupported for that shape, never replaced.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable

from iomodel.bench.inputs import AttentionInputs
from iomodel.errors import IomodelError


@dataclass(frozen=True)
class SdpaBackend:
    """One PyTorch SDPA backend.

    Attributes:
        member: the ``torch.nn.attention.SDPBackend`` member name.
        ops: ATen ops whose presence in a profiler trace identifies it
            (``aten/src/ATen/native/native_functions.yaml``).
        header: the lower-case header of its refusal reasons in SDPA's debug warnings
            (``"<header> kernel not used because:"``, ``sdp_utils.cpp``); "" when it has none.
        title: how receipts name it.
    """

    member: str
    ops: tuple[str, ...]
    header: str
    title: str


#: Harness name -> SDPA backend: the one map from a name to ``SDPBackend``.
SDPA_BACKENDS: dict[str, SdpaBackend] = {
    "sdpa-flash": SdpaBackend("FLASH_ATTENTION", ("aten::_scaled_dot_product_flash_attention_for_cpu",
                                                  "aten::_scaled_dot_product_flash_attention"),
                              "flash attention", "SDPA FLASH_ATTENTION"),
    "sdpa-efficient": SdpaBackend("EFFICIENT_ATTENTION", ("aten::_scaled_dot_product_efficient_attention",),
                                  "memory efficient", "SDPA EFFICIENT_ATTENTION"),
    "sdpa-cudnn": SdpaBackend("CUDNN_ATTENTION", ("aten::_scaled_dot_product_cudnn_attention",),
                              "cudnn attention", "SDPA CUDNN_ATTENTION"),
    "sdpa-math": SdpaBackend("MATH", ("aten::_scaled_dot_product_attention_math",), "", "SDPA MATH (baseline)"),
}
#: The bundled kernel's name in benchmarks and measurement records (the model's algorithm name).
KERNEL = "tiled"
#: Names older receipts used -> the current name.
LEGACY_BACKEND_NAMES = {"triton": KERNEL}
#: SDPA without a pinned backend (PyTorch's own choice); profiled, never timed.
AUTO = "sdpa-auto"
BASELINE = "sdpa-math"
#: The eager chain in the input dtype: the second baseline of training buckets, and their gradient baseline.
EAGER = "eager"
#: Order in which backends are listed (baseline first).
BACKEND_ORDER = ("sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn", KERNEL)
#: SDPA backends PyTorch implements on a CPU.
CPU_SDPA = ("sdpa-math", "sdpa-flash")
TITLES = {**{n: b.title for n, b in SDPA_BACKENDS.items()}, KERNEL: "iomodel tiled kernel (Triton)",
          EAGER: "eager chain in the input dtype (kernels/baseline.py)"}


class KernelRefusal(Exception):
    """The bundled kernel does not take these inputs (raised before launching it)."""


def _padded_varlen_call(inp: AttentionInputs) -> Callable[[], Any]:
    """The bundled kernel on a padded ragged batch: ``flash_attention_varlen`` with key padding.

    The padded ``(B, H, N, d)`` tensors are packed (a copy, inside the timed call: the
    padded layout has no uniform token stride) into ``(B·N_q, H, d)`` and ``(B·N_k, H_kv, d)``
    with ``cu_seqlens = b·N`` and ``seqused_k = lengths``, so every sequence keeps its padded
    query rows and the alignment offset ``lengths[b] − N_q`` of the bucket's mask
    (``inputs.visible_keys``); padded query rows are computed, as the padded batch does, and
    left out of the statistics by the harness. Returns o ``(B, H, N_q, d)`` (a view).
    """
    import torch

    from kernels.flash_attention import flash_attention_varlen

    q, k, v, causal, align = inp.q, inp.k, inp.v, inp.causal, inp.causal_align
    B, H, nq, d = q.shape
    H_kv, nk = k.shape[1], k.shape[2]
    dev = q.device
    cu_q = torch.arange(0, (B + 1) * nq, nq, dtype=torch.int32, device=dev)  # (B + 1,)
    cu_k = torch.arange(0, (B + 1) * nk, nk, dtype=torch.int32, device=dev)  # (B + 1,)
    used = torch.tensor(inp.lengths, dtype=torch.int32, device=dev)  # (B,)
    checked: list[bool] = []  # the first call checks cu_seqlens and lengths on the host; later calls do not sync

    def run() -> Any:
        o, _ = flash_attention_varlen(q.transpose(1, 2).reshape(B * nq, H, d),  # (B*N_q, H, d)
                                      k.transpose(1, 2).reshape(B * nk, H_kv, d),  # (B*N_k, H_kv, d)
                                      v.transpose(1, 2).reshape(B * nk, H_kv, d), cu_q, cu_k, nq, nk,
                                      causal=causal, causal_align=align, seqused_k=used, check=not checked)
        checked.append(True)
        return o.view(B, nq, H, d).transpose(1, 2)  # (B, H, N_q, d)

    return run


def attention_call(backend: str, inp: AttentionInputs) -> Callable[[], Any]:
    """The zero-argument callable that runs one attention call on ``inp`` with ``backend``.

    Args:
        backend: ``"tiled"`` (the bundled kernel), ``"eager"`` (the eager chain), a key of
            :data:`SDPA_BACKENDS` (SDPA pinned to that backend) or ``"sdpa-auto"`` (SDPA,
            PyTorch's own choice).
        inp: Q ``(B, H, seqlen_q, HEAD_DIM)``, K and V ``(B, H_kv, seqlen_k, HEAD_DIM)`` and the mask.

    Returns:
        A callable returning the output ``(B, H, seqlen_q, HEAD_DIM)``; nothing runs before
        it is called. GQA reaches SDPA as ``enable_gqa=True`` (PyTorch >= 2.5), never by
        copying K/V.

    Raises:
        KernelRefusal: ``eager`` with a key-padding mask (it takes none). ``tiled`` runs a
            padded batch through ``flash_attention_varlen`` (:func:`_padded_varlen_call`).
        IomodelError: an unknown backend name.
    """
    match backend:
        case "eager":
            if inp.lengths is not None:
                raise KernelRefusal("the eager chain (kernels/baseline.py) takes no key-padding mask: padded ragged "
                                    "batches are unsupported")
            from kernels.baseline import eager_attention

            q, k, v, causal, align = inp.q, inp.k, inp.v, inp.causal, inp.causal_align
            return lambda: eager_attention(q, k, v, causal=causal, causal_align=align)
        case "tiled":
            if inp.lengths is not None:
                return _padded_varlen_call(inp)
            from kernels.flash_attention import flash_attention

            q, k, v, causal, align = inp.q, inp.k, inp.v, inp.causal, inp.causal_align
            return lambda: flash_attention(q, k, v, causal=causal, causal_align=align)[0]
        case "sdpa-flash" | "sdpa-efficient" | "sdpa-cudnn" | "sdpa-math" | "sdpa-auto":
            import torch.nn.functional as F
            from torch.nn.attention import SDPBackend, sdpa_kernel

            kwargs: dict[str, Any] = {"attn_mask": inp.attn_mask, "is_causal": inp.sdpa_is_causal}
            if inp.gqa:
                kwargs["enable_gqa"] = True
            q, k, v = inp.q, inp.k, inp.v
            if backend == AUTO:
                return lambda: F.scaled_dot_product_attention(q, k, v, **kwargs)
            pinned = [getattr(SDPBackend, SDPA_BACKENDS[backend].member)]

            def run() -> Any:
                with sdpa_kernel(pinned):
                    return F.scaled_dot_product_attention(q, k, v, **kwargs)

            return run
        case _:
            raise IomodelError(f"unknown attention backend {backend!r}: use one of "
                               f"{', '.join((*BACKEND_ORDER, EAGER))}")


def training_step(call: Callable[[], Any], inp: AttentionInputs) -> Callable[[], tuple[Any, Any, Any, Any]]:
    """One training step around a backend's forward callable: forward, then the gradients for ``inp.do``.

    Args:
        call: a zero-argument callable returning o ``(B, H, seqlen_q, HEAD_DIM)`` (from
            :func:`attention_call`).
        inp: inputs whose q, k, v require grad and whose ``do`` is set (a training bucket's).

    Returns:
        A callable returning ``(o, dq, dk, dv)``: o detached, dq like q, dk and dv like k and v
        (``torch.autograd.grad(o, (q, k, v), do)``).

    Raises:
        KernelRefusal: (when called) the output has no ``grad_fn``: the backend has no backward.
    """
    import torch

    q, k, v, do = inp.q, inp.k, inp.v, inp.do

    def step() -> tuple[Any, Any, Any, Any]:
        o = call()
        if o.grad_fn is None:
            raise KernelRefusal("its output has no grad_fn: this backend has no backward pass")
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
        return o.detach(), dq, dk, dv

    return step


def kernel_config(inp: AttentionInputs) -> dict[str, Any]:
    """The launch configuration the bundled kernel picks for ``inp`` (one call, with ``return_config``).

    Returns:
        The :class:`kernels.flash_attention.KernelConfig` fields (BLOCK_M, BLOCK_N, warps, path, ...).
    """
    from kernels.flash_attention import flash_attention

    return flash_attention(inp.q, inp.k, inp.v, causal=inp.causal, causal_align=inp.causal_align,
                           return_config=True)[2].to_dict()


@dataclass
class Backend:
    """One attention implementation and whether it can run on this device.

    Attributes:
        name: harness name (see :data:`BACKEND_ORDER`).
        role: ``"baseline"`` or ``"fused"``.
        available: whether it can run on this device at all.
        reason: why not, when unavailable (one sentence).
        make_call: ``inputs -> zero-argument callable`` returning the output ``(B, H, seqlen_q, HEAD_DIM)``.
        refusal_types: exceptions of the callable that mean "unsupported shape".
        version: the library version that provides it.
        describe: ``inputs -> the launch configuration it picks``, or None.
    """

    name: str
    role: str
    available: bool
    reason: str
    make_call: Callable[[AttentionInputs], Callable[[], Any]] | None = None
    refusal_types: tuple[type[BaseException], ...] = ()
    version: str = ""
    describe: Callable[[AttentionInputs], dict[str, Any]] | None = None

    @property
    def title(self) -> str:
        return TITLES.get(self.name, self.name)

    def to_dict(self) -> dict[str, Any]:
        return {"title": self.title, "role": self.role, "available": self.available, "reason": self.reason,
                "version": self.version}


def eager_backend() -> Backend:
    """The eager chain (:data:`EAGER`), a baseline available on every device (training buckets only)."""
    import torch

    from iomodel.spec.dtypes import TORCH_NAMES, dtype_name, eager_score_dtype

    def describe(inp: AttentionInputs) -> dict[str, Any]:
        return {"chain": "kernels/baseline.py eager_attention (score_dtype None)",
                "score_dtype": TORCH_NAMES[eager_score_dtype(dtype_name(inp.q.dtype))]}

    return Backend(EAGER, "baseline", True, "", lambda inp: attention_call(EAGER, inp),
                   refusal_types=(KernelRefusal,), version=f"torch {torch.__version__}", describe=describe)


def kernel_backend(device: str) -> Backend:
    """The bundled kernel, if it can be timed on ``device`` (``kernels.flash_attention`` imported lazily)."""
    if device != "cuda":
        return Backend(KERNEL, "fused", False,
                       "unavailable on cpu: the tiled kernel needs a CUDA GPU, and the CPU bench does not time "
                       "Triton's interpreter (TRITON_INTERPRET=1 is a correctness tool whose timings mean nothing)")
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return Backend(KERNEL, "fused", False, "unavailable: TRITON_INTERPRET is set, so the kernel would run in "
                       "the interpreter: unset it to time the compiled kernel")
    try:
        importlib.import_module("kernels.flash_attention").flash_attention  # noqa: B018 - the import is the check
    except Exception as exc:  # ImportError, a syntax error in a kernel being written, a missing name
        return Backend(KERNEL, "fused", False,
                       f"unavailable: kernels.flash_attention could not be imported ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else ''})")
    try:
        import triton

        version = f"triton {triton.__version__}"
    except Exception:  # pragma: no cover
        version = ""
    return Backend(KERNEL, "fused", True, "", lambda inp: attention_call(KERNEL, inp),
                   refusal_types=(KernelRefusal, ValueError, NotImplementedError), version=version,
                   describe=kernel_config)


def available_backends(device: str) -> list[Backend]:
    """Every backend of :data:`BACKEND_ORDER`, each marked available or not on ``device``.

    Args:
        device: ``"cpu"`` or ``"cuda"``.

    Returns:
        Backends in :data:`BACKEND_ORDER`; the first is the baseline ``sdpa-math``.
    """
    out = []
    for name in BACKEND_ORDER:
        if name == KERNEL:
            out.append(kernel_backend(device))
            continue
        role = "baseline" if name == BASELINE else "fused"
        if device == "cpu" and name not in CPU_SDPA:
            out.append(Backend(name, role, False, "unavailable on cpu: PyTorch has no CPU implementation of this SDPA backend"))
            continue
        out.append(Backend(name, role, True, "", lambda inp, name=name: attention_call(name, inp)))
    return out
