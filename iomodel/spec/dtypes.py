"""The one dtype table: canonical names, element widths in bytes, accepted spellings.

Every module that maps a dtype name to a width, a torch dtype or back reads this table
(IEEE 754 binary16/32, bfloat16, OCP FP8 E4M3/E5M2). Nothing here imports torch: the
torch side goes through :func:`torch_dtype` and :func:`dtype_name`, which import it lazily.
"""

from __future__ import annotations

from typing import Any

from iomodel.errors import IomodelError

#: Element width in bytes of each supported dtype (IEEE 754 / OCP FP8 formats).
DTYPES: dict[str, int] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

#: Spellings accepted on input (HF ``torch_dtype`` strings, torch names) -> canonical name.
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float8_e4m3fn": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "fp8_e5m2": "fp8_e5m2",
}

#: The dtype an eager attention chain computes S and P in, by input dtype, where it is not the input's own: PyTorch
#: has no matmul or softmax for plain float8 tensors (torch 2.13: ``q @ k.transpose(-2, -1)`` and ``torch.softmax`` on
#: ``float8_e4m3fn`` raise NotImplementedError; only ``torch._scaled_mm`` multiplies fp8), so an eager chain on fp8
#: inputs upcasts them first; bf16 keeps fp8's exponent range. The model's ``baseline`` and ``kernels/baseline.py``
#: both read it (:func:`eager_score_dtype`); a fresh user found the fp8 baseline modelled as a chain torch cannot run.
EAGER_SCORE_DTYPE: dict[str, str] = {"fp8_e4m3": "bf16", "fp8_e5m2": "bf16"}


def eager_score_dtype(name: str) -> str:
    """The canonical dtype the eager chain keeps S and P in for inputs of dtype ``name`` (the input dtype, or
    :data:`EAGER_SCORE_DTYPE`'s upcast: ``fp8_e4m3`` -> ``bf16``).

    Raises:
        IomodelError: the dtype is not supported.
    """
    c = canonical_dtype(name)
    return EAGER_SCORE_DTYPE.get(c, c)


def eager_backward_refusal(name: str, group: int) -> str | None:
    """Why the eager chain cannot run a training step on inputs of dtype ``name`` with ``group`` query heads per KV
    head, or None: its GQA backward sums dK and dV over each group (``dK_rep.view(...).sum(2)``) in the input dtype,
    which torch has no kernel for on float8 tensors (torch 2.13: ``"sum_cpu" not implemented for 'Float8_e4m3fn'``).
    One line naming what to change."""
    c = canonical_dtype(name)
    if c in EAGER_SCORE_DTYPE and group > 1:
        return (f"the eager baseline cannot run a GQA training step in {c}: its backward sums dK and dV over each "
                f"group of {group} query heads in the input dtype, which PyTorch has no kernel for on float8 tensors: "
                "model the training step in bf16 or fp16 (--dtype bf16), or without GQA")
    return None


#: Width of the LSE (log-sum-exp per query row), which FlashAttention keeps in fp32.
LSE_WIDTH = 4
#: Width of fp32 accumulators and fp32 intermediates (MATH backend scores, dQ accumulator).
FP32_WIDTH = 4
#: Width of the paged cache's int32 tables (block_table, cache_seqlens; flash-attn / vLLM convention).
INT32_WIDTH = 4


def canonical_dtype(name: str) -> str:
    """Return the canonical dtype name (``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3``, ``fp8_e5m2``).

    Args:
        name: a dtype spelling such as ``"bfloat16"``, ``"torch.float16"`` or ``"fp32"``.

    Raises:
        IomodelError: the dtype is not one iomodel models.
    """
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise IomodelError(
            f"unsupported dtype {name!r}: use one of {', '.join(DTYPES)}"
        )
    return DTYPE_ALIASES[key]


def dtype_width(name: str) -> int:
    """Element width in bytes of a dtype (``fp16`` -> 2).

    Raises:
        IomodelError: the dtype is not supported.
    """
    return DTYPES[canonical_dtype(name)]


#: Canonical name -> attribute of ``torch`` (the names torch and HF ``torch_dtype`` use).
TORCH_NAMES: dict[str, str] = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


def torch_dtype(name: str) -> Any:
    """The ``torch.dtype`` of a dtype name (``"bf16"`` -> ``torch.bfloat16``); imports torch.

    Raises:
        IomodelError: the dtype is not supported.
    """
    import torch

    return getattr(torch, TORCH_NAMES[canonical_dtype(name)])


def dtype_name(dtype: Any) -> str:
    """Canonical name of a ``torch.dtype`` (``torch.float16`` -> ``"fp16"``).

    Raises:
        IomodelError: the dtype is not one iomodel models.
    """
    return canonical_dtype(str(dtype))
