"""What the bundled kernel (``kernels/flash_attention.py``) runs, stated once, as data and checks.

The kernel's input checks and the worksheet both read this module, so the model never
labels tiles "the bundled kernel's" for a layer the kernel refuses:

* :func:`kernel_refusal` — why the kernel refuses a layer (HEAD_DIM above
  :data:`MAX_HEAD_DIM`, a dtype outside :data:`KERNEL_DTYPES`, a decode call with more than
  :data:`~iomodel.schedule.tiles.DECODE_MAX_SEQLEN_Q` query rows), or None;
* :func:`tma_refusal`, :func:`gluon_refusal` and :func:`prefill_path` — when the prefill runs
  the Gluon kernel (FlashAttention-3's schedule, sm_90), when on tensor descriptors (TMA, sm_90)
  and when on pointer loads;
* :data:`PATHS`, :data:`BLOCK_SIZES`, :data:`NUM_WARPS` — what a forced launch
  configuration may name.

Every reason is one sentence that says what to change. Pure Python: no torch, no triton.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from iomodel.errors import IomodelError
from iomodel.schedule.tiles import DECODE_MAX_SEQLEN_Q, head_dim_padded, next_pow2

if TYPE_CHECKING:
    from iomodel.spec import LayerSpec
    from iomodel.spec.hardware import Hardware

#: Paths the launcher can take (``KernelConfig.path``).
PATHS = ("prefill", "prefill-tma", "prefill-gluon", "decode-split-kv")
#: Element types of q, k, v the kernel runs (canonical names of ``iomodel.spec.DTYPES``);
#: no fp8: its ``tl.dot`` inputs would need scaling the kernel does not do.
KERNEL_DTYPES = ("fp16", "bf16", "fp32")
#: Largest HEAD_DIM the kernel compiles (register/SRAM budget of one program).
MAX_HEAD_DIM = 256
#: Compute capability major on which the prefill may use tensor descriptors (TMA, Hopper sm_90).
TMA_SM_MAJOR = 9
#: Element types the TMA prefill runs (fp32 takes exact IEEE dots on the pointer path).
TMA_DTYPES = ("fp16", "bf16")
#: HEAD_DIMs the Gluon prefill (``kernels/gluon_attention.py``, path ``prefill-gluon``) compiles
#: and was measured exact at: 128 on the H200 (receipts/gluon-fwd-probe-h200-2026-12-04-*.json), 64 in its
#: four-warpgroup tiles on an H100 (receipts/raw/gpu-gluon-tests-h100-2026-12-05-ws4.txt; one configuration per
#: HEAD_DIM, ``kernels.heuristics.GLUON_TILES``).
GLUON_HEAD_DIMS = (64, 128)
#: Where :func:`prefill_path` picks ``prefill-gluon`` by itself, HEAD_DIM -> the causal settings: where it
#: beat the TMA prefill on every measured shape in the same run. HEAD_DIM 128, causal or not (calibration:
#: receipts/gluon-fwd-probe-h200-2026-12-04-c.json and -d.json, docs/kernel-notes.md, "The Gluon prefill");
#: HEAD_DIM 64 non-causal with four consumer warpgroups (receipts/gluon-fwd-probe-h100-2026-12-05-ws4.json:
#: 1.053x cuDNN against the TMA prefill's 0.947x, on an H100); at 64 causal neither is ahead (0.971x against
#: 0.976x), so it keeps ``prefill-tma``. Since its warpgroups skip the causal key blocks they do not see
#: (2026-12-06) the Gluon prefill ran 1.012-1.097x the TMA prefill at 2k-16k query rows on the H200 (H 16,
#: B·N = 16k tokens; receipts/gluon-causal64-probe-h200-2026-12-06.json, calibration), but a speed hold-out of 8
#: other shapes, measured on an H100, found the TMA prefill faster on all 5 of 2k rows or more (0.755-0.991x;
#: receipts/gluon-causal64-holdout-h100-2026-12-06.json): still ``prefill-tma`` (docs/kernel-notes.md).
GLUON_AUTO: dict[int, tuple[bool, ...]] = {64: (False,), 128: (False, True)}
#: The backward's dK/dV launch kernels (``BackwardConfig.dkdv_kernel``): Triton's (``_bwd_dkdv``,
#: ``_bwd_dkdv_tma``), or the Gluon one of ``kernels/gluon_backward.py`` (sm_90).
DKDV_KERNELS = ("triton", "gluon")
#: HEAD_DIMs of the Gluon dK/dV launch of the backward (``kernels/gluon_backward.py``,
#: ``BackwardConfig.dkdv_kernel = "gluon"``): measured faster than the Triton dK/dV launch at 128
#: (receipts/gluon-bwd-probe-h200-2026-12-05.json, calibration); its two 64 x d fp32 accumulators per
#: consumer warpgroup leave no registers for 256, and at 64 the Triton launch already meets issue 11's bar.
GLUON_DKDV_HEAD_DIMS = (128,)
#: Smallest and largest BLOCK_M / BLOCK_N of a launch (powers of two; ``tl.dot`` needs >= 16).
BLOCK_SIZES = (16, 256)
#: Warps per program a launch may use.
NUM_WARPS = (1, 2, 4, 8, 16)


def head_dim_refusal(spec: Any) -> str | None:
    """Why the kernel refuses ``spec.head_dim`` (above :data:`MAX_HEAD_DIM`), or None."""
    if spec.head_dim > MAX_HEAD_DIM:
        return (f"HEAD_DIM {spec.head_dim} is above the kernel's maximum of {MAX_HEAD_DIM}: "
                f"use HEAD_DIM <= {MAX_HEAD_DIM}")
    return None


def dtype_refusal(spec: Any) -> str | None:
    """Why the kernel refuses ``spec.dtype`` (not in :data:`KERNEL_DTYPES`, e.g. fp8), or None."""
    if spec.dtype not in KERNEL_DTYPES:
        return (f"dtype {spec.dtype} is not one the bundled kernel runs: "
                f"use {', '.join(KERNEL_DTYPES[:-1])} or {KERNEL_DTYPES[-1]}")
    return None


def decode_refusal(spec: Any) -> str | None:
    """Why the kernel's decode path refuses ``spec.seqlen_q`` (above the decode limit), or None."""
    if spec.phase == "decode" and spec.seqlen_q > DECODE_MAX_SEQLEN_Q:
        return (f"the decode (split-KV) path takes 1 to {DECODE_MAX_SEQLEN_Q} query rows (seqlen_q <= "
                f"{DECODE_MAX_SEQLEN_Q}), got seqlen_q = {spec.seqlen_q}: use --phase prefill (path='prefill')")
    return None


#: Every check of :func:`kernel_refusal`, in the order the kernel applies them.
LAYER_CHECKS: tuple[Callable[[Any], str | None], ...] = (head_dim_refusal, dtype_refusal, decode_refusal)


def kernel_refusal(spec: "LayerSpec", hardware: "Hardware | None" = None) -> str | None:
    """Why the bundled kernel refuses to run ``spec``, as one sentence, or None when it runs it.

    Applies :data:`LAYER_CHECKS` in order and returns the first reason. The kernel raises
    exactly this sentence (``kernels.flash_attention.flash_attention``); the worksheet
    (``iomodel.report.worksheet.kernel_tiling``) then either refuses the layer with it (exit
    2, one line), or, when the user gave explicit tiles (``--block-m`` and ``--block-n``),
    models those tiles under the plain statement that no bundled kernel runs this layer,
    with the reason — never as "the bundled kernel's" tiles. A decode layer beyond the
    decode limit is refused either way (the decode model is the kernel's contract).

    Args:
        spec: the layer (a :class:`~iomodel.spec.LayerSpec`, or any object with its
            ``head_dim``, ``dtype`` (canonical name), ``phase`` and ``seqlen_q``; the kernel
            passes its checked input sizes).
        hardware: the device the layer would run on; no current refusal depends on it (the
            pointer path runs on every preset; :func:`prefill_path` reads its compute
            capability for the TMA choice).

    Returns:
        The reason (one line that says what to change), or None.

    Example:
        >>> from iomodel.spec import LayerSpec
        >>> kernel_refusal(LayerSpec(1, 16, 16, 257, 2048, 2048, "fp16"))
        "HEAD_DIM 257 is above the kernel's maximum of 256: use HEAD_DIM <= 256"
    """
    for check in LAYER_CHECKS:
        reason = check(spec)
        if reason is not None:
            return reason
    return None


def tma_refusal(dtype: str, head_dim: int, tma_aligned: bool = True) -> str | None:
    """Why the TMA prefill (``prefill-tma``) cannot take these inputs, or None.

    Args:
        dtype: canonical dtype name of q, k, v.
        head_dim: HEAD_DIM (d), elements.
        tma_aligned: q, k, v (and o) have 16-byte aligned bases and strides and a unit last
            stride (host tensor descriptors need that).

    Returns:
        The reason (one line), or None: TMA needs a dtype of :data:`TMA_DTYPES`, a
        power-of-two HEAD_DIM in 16..:data:`MAX_HEAD_DIM` (one descriptor box spans the
        whole row) and aligned tensors.
    """
    if dtype not in TMA_DTYPES:
        return f"path 'prefill-tma' needs fp16 or bf16, got {dtype}: use path='prefill'"
    if head_dim != head_dim_padded(head_dim) or head_dim > MAX_HEAD_DIM:
        return (f"path 'prefill-tma' needs a power-of-two HEAD_DIM in {head_dim_padded(1)}..{MAX_HEAD_DIM}, "
                f"got {head_dim}: use path='prefill'")
    if not tma_aligned:
        return ("path 'prefill-tma' needs 16-byte aligned, last-dim-contiguous q, k, v: use path='prefill' "
                "or make the tensors contiguous")
    return None


def sm90_refusal(what: str, sm_major: int | None) -> str | None:
    """Why ``what`` (a Gluon kernel: warpgroup MMAs, TMA and ``setmaxnreg`` are Hopper's) cannot run on a GPU of
    compute capability major ``sm_major`` (``None``: Triton's interpreter, which has no Gluon), or None on sm_90."""
    if sm_major == TMA_SM_MAJOR:
        return None
    where = "Triton's interpreter" if sm_major is None else f"an sm_{sm_major}x GPU"
    return f"{what} runs on Hopper (sm_90) only, not on {where}"


def gluon_refusal(dtype: str, head_dim: int, tma_aligned: bool = True, windowed: bool = False,
                  sm_major: int | None = TMA_SM_MAJOR) -> str | None:
    """Why the Gluon prefill (``prefill-gluon``, ``kernels/gluon_attention.py``) cannot take these inputs, or None.

    Args:
        dtype: canonical dtype name of q, k, v.
        head_dim: HEAD_DIM (d), elements.
        tma_aligned: as for :func:`tma_refusal` (its loads and stores are TMA copies).
        windowed: a sliding-window band is asked for (the kernel has none).
        sm_major: the GPU's compute capability major (its warpgroup MMAs, TMA and ``setmaxnreg``
            are Hopper's, sm_90), ``None`` for Triton's interpreter (Gluon has none).

    Returns:
        The reason (one line), or None.
    """
    if (reason := sm90_refusal("path 'prefill-gluon'", sm_major)) is not None:
        return f"{reason}: use path='prefill' (or None)"
    if dtype not in TMA_DTYPES:
        return f"path 'prefill-gluon' needs fp16 or bf16, got {dtype}: use path='prefill'"
    if head_dim not in GLUON_HEAD_DIMS:
        return (f"path 'prefill-gluon' runs HEAD_DIM {' or '.join(map(str, GLUON_HEAD_DIMS))}, got {head_dim}: "
                "use path='prefill-tma' (or None)")
    if windowed:
        return "path 'prefill-gluon' has no sliding window: use path='prefill-tma' (or None) for a windowed call"
    if not tma_aligned:
        return ("path 'prefill-gluon' needs 16-byte aligned, last-dim-contiguous q, k, v: use path='prefill' "
                "or make the tensors contiguous")
    return None


def gluon_dkdv_refusal(dtype: str, head_dim: int, tma_aligned: bool = True, windowed: bool = False,
                       sm_major: int | None = TMA_SM_MAJOR, atomic_dq: bool = False,
                       fused_launch: bool = False) -> str | None:
    """Why the backward's Gluon dK/dV launch (``kernels/gluon_backward.py``) cannot run these inputs, or None.

    Where it cannot, the backward runs the Triton dK/dV launch with the config's own tiles
    (``kernels.backward.flash_attention_backward``; ``return_config`` reports ``dkdv_kernel`` as it ran).

    Args:
        dtype: canonical dtype name of q, k, v; head_dim: HEAD_DIM (d), elements.
        tma_aligned: q, k, v and dO are TMA-aligned (:func:`tma_refusal`) and the config's ``tma`` is on.
        windowed: a sliding-window band (the backward's window runs the pointer kernels).
        sm_major: the GPU's compute capability major, ``None`` for Triton's interpreter (Gluon has none).
        atomic_dq, fused_launch: the config's other dK/dV launches (dQ by atomics inside dK/dV, or one
            launch of the dK/dV and dQ programs), which the Gluon kernel does not run.
        The environment's :data:`GLUON_SWITCH` off refuses it too (read here, for the launcher and the worksheet).

    Returns:
        The reason (one line), or None.
    """
    if (reason := sm90_refusal("the Gluon dK/dV launch", sm_major)) is not None:
        return reason
    if dtype not in TMA_DTYPES:
        return f"the Gluon dK/dV launch needs fp16 or bf16, got {dtype}"
    if head_dim not in GLUON_DKDV_HEAD_DIMS:
        return f"the Gluon dK/dV launch runs HEAD_DIM {', '.join(map(str, GLUON_DKDV_HEAD_DIMS))}, got {head_dim}"
    if windowed:
        return "the Gluon dK/dV launch has no sliding window"
    if atomic_dq or fused_launch:
        return "the Gluon dK/dV launch computes dK and dV only (no atomic dQ, no fused dQ programs)"
    if not tma_aligned:
        return "the Gluon dK/dV launch needs 16-byte aligned, last-dim-contiguous q, k, v, dO and tma=True"
    if not env_switch(GLUON_SWITCH):
        return f"{GLUON_SWITCH} is off"
    return None


#: The kernels' environment switches, read by the launcher (``kernels.flash_attention``) and the worksheet alike:
#: ``IOMODEL_TMA=0`` keeps the prefill on pointer loads (no TMA, so no Gluon either); ``IOMODEL_GLUON=0`` keeps the
#: prefill and the backward's dK/dV launch off Gluon (:func:`prefill_path`, :func:`gluon_dkdv_refusal`).
TMA_SWITCH, GLUON_SWITCH = "IOMODEL_TMA", "IOMODEL_GLUON"
#: Spellings of the kernels' environment switches (:data:`TMA_SWITCH`, :data:`GLUON_SWITCH`), case-insensitive.
SWITCH_ON, SWITCH_OFF = ("1", "true", "on", "yes"), ("0", "false", "off", "no")


def env_switch(name: str, default: bool = True) -> bool:
    """The boolean environment switch ``name`` (absent or empty: ``default``).

    Raises:
        IomodelError: any value but those of :data:`SWITCH_ON` and :data:`SWITCH_OFF` (a typo such as
            ``disabled`` silently meant on before).
    """
    import os

    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in SWITCH_ON or raw in SWITCH_OFF:
        return raw in SWITCH_ON
    raise IomodelError(f"environment variable {name}={os.environ[name]!r} is not a switch: set it to "
                       f"{' or '.join(SWITCH_OFF[:1] + SWITCH_ON[:1])} ({', '.join(SWITCH_OFF + SWITCH_ON)}), or unset it")


def switches_off() -> list[str]:
    """The kernels' environment switches (:data:`TMA_SWITCH`, :data:`GLUON_SWITCH`) set off, in that order: the
    worksheet names them where it models the launch they change.

    Raises:
        IomodelError: a switch holds a value that is not one (:func:`env_switch`).
    """
    return [name for name in (TMA_SWITCH, GLUON_SWITCH) if not env_switch(name)]


def prefill_path(dtype: str, head_dim: int, sm_major: int | None, tma_aligned: bool = True,
                 use_tma: bool = True, windowed: bool = False, use_gluon: bool = True, *, causal: bool) -> str:
    """The prefill path the launcher picks (``kernels.flash_attention.kernel_path``) and the worksheet models.

    Args:
        dtype: canonical dtype name (``fp16``, ``bf16``, ``fp32``).
        head_dim: HEAD_DIM (d).
        sm_major: compute capability major of the GPU (9 = Hopper; ``Hardware.compute_capability[0]``),
            ``None`` for Triton's interpreter.
        tma_aligned: q, k, v (and o) are TMA-aligned (see :func:`tma_refusal`).
        use_tma: the ``IOMODEL_TMA`` switch (off: pointer loads only, so no Gluon either).
        windowed: a sliding-window band (the Gluon prefill has none).
        use_gluon: the ``IOMODEL_GLUON`` switch and whether Triton has the Gluon dialect.
        causal: the causal mask (either alignment); required, since HEAD_DIM 64 picks by it.

    Returns:
        ``prefill-gluon`` on sm_90 at a HEAD_DIM and causal setting of :data:`GLUON_AUTO` when
        :func:`gluon_refusal` finds nothing; else ``prefill-tma`` on sm_90 when
        :func:`tma_refusal` finds nothing; else ``prefill``.
    """
    if use_tma and sm_major == TMA_SM_MAJOR and tma_refusal(dtype, head_dim, tma_aligned) is None:
        if use_gluon and causal in GLUON_AUTO.get(head_dim, ()) and gluon_refusal(dtype, head_dim, tma_aligned,
                                                                           windowed, sm_major) is None:
            return "prefill-gluon"
        return "prefill-tma"
    return "prefill"


def autograd_forward_path(path: str) -> str:
    """The forward path a training step launches where :func:`kernels.flash_attention.kernel_path` picks ``path``:
    the TMA and Gluon prefills as picked, anything else (the split-KV decode of seqlen_q <= 16, which has no backward)
    the pointer ``prefill``. Read by ``flash_attention`` under autograd and the worksheet's model of a training step."""
    return path if path in ("prefill-tma", "prefill-gluon") else "prefill"


def block_size_refusal(name: str, value: Any) -> str | None:
    """Why a forced launch refuses ``config.<name>`` (BLOCK_M or BLOCK_N), or None.

    A block size must be a power of two within :data:`BLOCK_SIZES`.
    """
    lo, hi = BLOCK_SIZES
    if not (isinstance(value, int) and lo <= value <= hi and next_pow2(value) == value):
        return f"config.{name} must be a power of two in {lo}..{hi}, got {value!r}: change it"
    return None


__all__ = [
    "BLOCK_SIZES",
    "DKDV_KERNELS",
    "GLUON_AUTO",
    "env_switch",
    "TMA_SWITCH",
    "GLUON_SWITCH",
    "switches_off",
    "GLUON_DKDV_HEAD_DIMS",
    "GLUON_HEAD_DIMS",
    "KERNEL_DTYPES",
    "LAYER_CHECKS",
    "MAX_HEAD_DIM",
    "NUM_WARPS",
    "PATHS",
    "TMA_DTYPES",
    "TMA_SM_MAJOR",
    "block_size_refusal",
    "decode_refusal",
    "dtype_refusal",
    "gluon_dkdv_refusal",
    "gluon_refusal",
    "head_dim_refusal",
    "kernel_refusal",
    "prefill_path",
    "sm90_refusal",
    "tma_refusal",
]
