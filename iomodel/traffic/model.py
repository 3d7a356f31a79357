"""Assemble the per-algorithm models, evaluate them exactly (``predict``) and vectorized (``sweep``).

``build_model`` returns the symbolic :class:`TrafficModel` (sympy rows per algorithm, per
tensor, per level). ``predict`` evaluates it at one point in exact Python integers through
a compiled function (tile sums in closed form on Python ints, exact at any size). ``sweep``
evaluates totals over arrays through a compiled numpy function (the same closed forms on
int64, within a bound that keeps them exact). Both
compile once per model *structure* (dtype, mask, phase, pass, GQA or not, split or not,
options) and cache it; nothing is evaluated by ``subs``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Any, TYPE_CHECKING

import sympy as sp

if TYPE_CHECKING:  # annotations only: numpy is imported where it is used
    import numpy as np

from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import decode_refusal
from iomodel.schedule.tiles import (DECODE_MAX_ROWS, DECODE_MAX_SEQLEN_Q, head_dim_padded, prefill_packing_refusal,
                                    program_sram_bytes, writes_lse_refusal)
from iomodel.spec.hardware import Hardware
from iomodel.spec import LayerSpec, Tiling, canonical_dtype
from iomodel.spec.dtypes import eager_score_dtype
from iomodel.spec.layer import BACKWARD_TILE_FIELDS
from iomodel.traffic.base import FIELD_SYMBOLS, SYM, AlgorithmModel, Row
from iomodel.traffic.baseline import baseline_model
from iomodel.traffic.bounds import compulsory_rows, fa_theorem2_shape, lower_bound_shape, useful_flops
from iomodel.traffic.tiled_fwd import kv_stationary_model, tiled_fwd_model

#: Model options and their defaults (see :func:`build_model`).
DEFAULT_OPTIONS: dict[str, Any] = {
    "score_dtype": None,  # baseline S/P dtype; None = input dtype (kernels/baseline.py default)
    "dropout": False,  # baseline: extra dropout pass on P
    "extra_score_passes": 0,  # baseline: extra elementwise passes over S
    "with_lse": False,  # baseline: also torch.logsumexp(S) (eager_attention_with_lse)
    "dq_mode": "separate",  # tiled backward: "separate" (Triton tutorial 06) or "atomic" (FA2 Algorithm 2)
    "gqa_bwd": "in_program",  # tiled backward GQA dK/dV: "in_program" or "expand_sum" (flash-attn)
    "kv_blocks": "paper",  # tiled_kv_stationary blocks: "paper" (from M) or "tiling"
}

#: Argument order of every compiled function.
ARG_SYMBOLS: tuple[sp.Symbol, ...] = (
    SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s,
    SYM.BLOCK_M, SYM.BLOCK_N, SYM.stages, SYM.splits, SYM.P,
    SYM.BWD_BLOCK_M, SYM.BWD_BLOCK_N, SYM.DQ_BLOCK_M, SYM.DQ_BLOCK_N, SYM.BWD_SPLITS, SYM.M,
)

#: Quantities of :func:`sweep` per algorithm.
QUANTITIES = ("hbm_read_bytes", "hbm_write_bytes", "hbm_bytes", "sram_fill_read_bytes",
              "sram_fill_write_bytes", "allocated_bytes", "flops")

#: Largest seqlen_q / seqlen_k that :func:`predict` evaluates. Its tile sums are closed forms
#: on Python ints (exact at any length, about a millisecond per layer); the bound is where the
#: tests stop and what the worksheet's L2-aware estimate (``iomodel/cache/stream.py``, memory
#: growing with the length: 2 GiB arrays at 2^30 tokens) is kept within.
PREDICT_MAX_SEQLEN = 2**24


def _resolve_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise IomodelError(f"unknown model option(s) {', '.join(unknown)}: use {', '.join(DEFAULT_OPTIONS)}")
    opts = {**DEFAULT_OPTIONS, **options}
    if opts["score_dtype"] is not None:
        opts["score_dtype"] = canonical_dtype(opts["score_dtype"])
    if opts["dq_mode"] not in ("separate", "atomic"):
        raise IomodelError(f"dq_mode {opts['dq_mode']!r} is unknown: use 'separate' or 'atomic'")
    if opts["gqa_bwd"] not in ("in_program", "expand_sum"):
        raise IomodelError(f"gqa_bwd {opts['gqa_bwd']!r} is unknown: use 'in_program' or 'expand_sum'")
    if opts["kv_blocks"] not in ("paper", "tiling"):
        raise IomodelError(f"kv_blocks {opts['kv_blocks']!r} is unknown: use 'paper' or 'tiling'")
    return opts


def _validate(spec: LayerSpec, tiling: Tiling) -> None:
    """Checks that depend on spec and tiling together (the kernel's own limits)."""
    if spec.backward and tiling.bwd_group_splits > spec.group:
        raise IomodelError(f"bwd_group_splits={tiling.bwd_group_splits} exceeds the GQA group H/H_kv={spec.group} "
                           f"(the dK/dV kernel's slices each hold at least one query head): use 1..{spec.group}")
    if spec.phase == "prefill":
        reason = prefill_packing_refusal(tiling.heads_per_program, spec.group, tiling.block_m, spec.backward)
        if reason is not None:
            raise IomodelError(reason)
    reason = writes_lse_refusal(tiling.writes_lse, spec.phase, spec.backward)
    if reason is not None:
        raise IomodelError(reason)
    if spec.phase == "decode":
        reason = decode_refusal(spec)  # the decode model is the kernel's contract: its limit
        if reason is not None:
            raise IomodelError(reason)
        p = tiling.heads_per_program
        if spec.group % p:
            raise IomodelError(
                f"heads_per_program={p} must divide the GQA group H/H_kv={spec.group}: pick a divisor of {spec.group}"
            )
        if p * spec.seqlen_q > DECODE_MAX_ROWS:
            raise IomodelError(
                f"heads_per_program*seqlen_q = {p * spec.seqlen_q} exceeds {DECODE_MAX_ROWS}: "
                "lower --heads-per-program"
            )


def structure_key(spec: LayerSpec, tiling: Tiling, opts: dict[str, Any]) -> tuple:
    """What decides the *shape* of the expressions (which rows exist); numbers do not.

    Two (spec, tiling) pairs with the same key share one symbolic model and one compiled
    function.
    """
    return (
        spec.dtype, spec.causal, spec.causal_align, spec.phase, spec.backward, spec.window,
        spec.kv_heads < spec.heads,  # GQA rows (baseline repeat_interleave, backward reduction)
        # split-KV partials and their merge: fused in the decode kernel (SEM rows) or a combine kernel
        (("fused" if tiling.fused_combine else "combine") if spec.phase == "decode" and tiling.num_splits > 1
         else None),
        spec.backward and tiling.bwd_group_splits > 1,  # dK/dV group-slice partials and their reduction
        spec.has_empty_rows,  # rows that see no key (the baseline's masked_fill)
        spec.page_size,  # paged decode: the table rows, and page_size as a number in the K/V allocation
        spec.phase == "prefill" and tiling.heads_per_program > 1,  # a packed GQA group per prefill program
        spec.phase == "prefill" and not tiling.writes_lse,  # a prefill forward that writes O alone
        tuple(sorted(opts.items())),
    )


class SweepRangeError(IomodelError):
    """A :func:`sweep` point whose sizes are too large for its exact int64 evaluation (the worksheet's single-point
    :func:`predict` is exact at any size); callers that sweep on the user's behalf (the plots) say what to shrink."""


@dataclass
class TrafficModel:
    """The symbolic model of one layer call: rows per algorithm, references, assumptions.

    Attributes:
        spec, tiling, options: what it was built from (options resolved with defaults).
        algorithms: name -> :class:`AlgorithmModel` (``baseline``, ``tiled``, and
            ``tiled_kv_stationary`` for a prefill forward pass).
        compulsory: HBM rows of the compulsory traffic (bytes).
        flops: conventional FLOPs of the layer (expression).
        references: ``lower_bound_shape`` and ``fa_theorem2_shape`` (bytes up to a
            constant; asymptotic shapes only).
        assumptions: one sentence each.
    """

    spec: LayerSpec
    tiling: Tiling
    options: dict[str, Any]
    algorithms: dict[str, AlgorithmModel]
    compulsory: list[Row]
    flops: sp.Expr
    references: dict[str, sp.Expr]
    assumptions: list[str] = field(default_factory=list)

    def compulsory_bytes(self) -> sp.Expr:
        """Compulsory bytes (reads + writes), expression."""
        return sp.Add(*[r.read_bytes + r.write_bytes for r in self.compulsory])


def symbol_values(spec: LayerSpec, tiling: Tiling, hardware: Hardware | None = None) -> dict[sp.Symbol, int]:
    """The numeric value of every model symbol for one (spec, tiling, hardware).

    ``M`` (SRAM bytes per SM) comes from ``hardware.smem_per_sm``; without hardware it is
    the H200's (a fixed default, only used by FlashAttention-1's paper block sizes and the
    lower-bound shape).
    """
    from iomodel.spec.hardware import HARDWARE

    hw = hardware or HARDWARE["H200"]
    return {
        SYM.B: spec.batch, SYM.H: spec.heads, SYM.H_kv: spec.kv_heads, SYM.d: spec.head_dim,
        SYM.N_q: spec.seqlen_q, SYM.N_k: spec.seqlen_k, SYM.s: spec.width,
        SYM.BLOCK_M: tiling.block_m, SYM.BLOCK_N: tiling.block_n, SYM.stages: tiling.num_stages,
        SYM.splits: tiling.num_splits, SYM.P: tiling.heads_per_program, SYM.M: hw.smem_per_sm,
        SYM.BWD_BLOCK_M: tiling.bwd_block_m, SYM.BWD_BLOCK_N: tiling.bwd_block_n,
        SYM.DQ_BLOCK_M: tiling.dq_block_m, SYM.DQ_BLOCK_N: tiling.dq_block_n,
        SYM.BWD_SPLITS: tiling.bwd_group_splits,
    }


def _score_assumption(spec: LayerSpec, score_dtype: str | None) -> str:
    """The worksheet's line on the baseline's S and P dtype."""
    if score_dtype is not None:
        return f"Baseline scores S and P are kept in {score_dtype}."
    sd = eager_score_dtype(spec.dtype)
    if sd == spec.dtype:
        return f"Baseline scores S and P are kept in {sd} (input dtype, kernels/baseline.py default)."
    return (f"Baseline scores S and P are kept in {sd}: PyTorch has no matmul or softmax for {spec.dtype} tensors, so "
            f"the eager chain upcasts Q, K and V to {sd} first and casts O back (kernels/baseline.py default; "
            "iomodel.spec.dtypes.EAGER_SCORE_DTYPE).")


def _assumptions(spec: LayerSpec, opts: dict[str, Any], packed: bool = False, lse: bool = True,
                 splits: int = 1) -> list[str]:
    a = [
        "HBM rows assume no reuse in any cache above SRAM: every requested byte crosses HBM once per request.",
        "SRAM_fill rows count the bytes the tiled kernel's global loads and stores request, masked elements excluded "
        "(docs/traffic-contract.md).",
        "For the bundled tiled kernels the HBM (no-reuse) rows equal the SRAM_fill rows.",
        "The baseline runs the eager op chain of kernels/baseline.py: every op reads its inputs once and writes its "
        "output once in HBM.",
        _score_assumption(spec, opts["score_dtype"]),
        "LSE is fp32 (4 bytes per query row); O has the input dtype.",
        "GQA in the tiled kernels is by index mapping (KV head = h // G): K/V bytes scale with H, not H_kv.",
        "Compulsory bytes read each input once and write each output once per pass: forward Q, K, V read and O written, "
        "backward Q, K, V, dO read and dQ, dK, dV written (the LSE and the backward's reads of O and LSE are "
        "algorithm choices, not compulsory); "
        "with a causal mask only the keys some query sees and the query rows that see some key are needed.",
        "Layer FLOPs are 4·B·H·d·(visible query-key pairs) forward and 2.5x that backward; causal pairs are "
        "counted exactly (N(N+1)/2 for square top-left), softmax and elementwise FLOPs are ignored.",
        "The baseline's matmuls compute all N_q·N_k scores whatever the mask (its FLOPs are not halved by causal).",
        *(["An algorithm's FLOPs (its table row) count what it computes: the tiled backward recomputes the scores S "
           "(and the separate dQ kernel S and dP once more), so its row is above the layer FLOPs, which count each "
           "matmul once."] if spec.backward else []),
        "Roofline time is max(FLOPs / peak dense FLOP/s of the dtype, HBM bytes / HBM bandwidth), a lower bound.",
        "Allocated bytes (resident in HBM at the peak step) are separate from transferred bytes.",
    ]
    if spec.causal:
        a.append(
            f"Causal {spec.causal_align}: query row m sees key n iff n <= m + off with off = "
            + ("0." if spec.causal_align == "top-left" else "seqlen_k - seqlen_q.")
        )
    if spec.window is not None:
        left, right = spec.window
        a.append(
            f"Sliding window ({'unbounded' if left is None else left} left, {'unbounded' if right is None else right} "
            f"right, after the {spec.causal_align} alignment): query row m sees key n iff m + off - left <= n <= "
            "m + off + right; the tiled kernels skip the key blocks outside the band (docs/traffic-contract.md). "
            "The eager baseline materialises the (N_q, N_k) band mask (kernels/baseline.py); FlashAttention-1 "
            "(tiled_kv_stationary) is not modelled with a window."
        )
    if spec.phase == "prefill" and spec.backward:
        a.append("tiled_kv_stationary (FlashAttention-1 Algorithm 1, a forward pass) is listed for pass fwd only.")
    if spec.phase == "prefill" and not spec.backward and spec.window is None:
        a.append(
            "tiled_kv_stationary uses "
            + ("FlashAttention-1's block sizes B_c = ceil(M/(4d)), B_r = min(B_c, d) with M = smem_per_sm / s elements."
               if opts["kv_blocks"] == "paper" else "B_r = BLOCK_M, B_c = BLOCK_N.")
        )
    if spec.backward:
        a.append(
            "The tiled backward runs the bundled kernels (kernels/backward.py, docs/traffic-contract.md): "
            "_bwd_preprocess writes Delta = rowsum(dO ∘ O), the K/V-stationary _bwd_dkdv recomputes S from Q, K, "
            "LSE (BWD_BLOCK_M query rows per step, BWD_BLOCK_N keys per program); dQ is "
            + ("computed by the Q-stationary _bwd_dq that re-reads K/V (DQ_BLOCK_M rows per program, DQ_BLOCK_N "
               "keys per step)."
               if opts["dq_mode"] == "separate" else
               "accumulated by fp32 atomic read-modify-write per query step, then converted (FA2 Algorithm 2; "
               "BackwardConfig(atomic_dq=True), not the kernel's default).")
        )
        if spec.kv_heads < spec.heads:
            a.append(
                "GQA backward: "
                + (("one dK/dV program per KV head loops over its G query heads and writes dK/dV once."
                    if splits == 1 else
                    f"the G query heads of a KV head are split into BWD_SPLITS = {splits} slices; one dK/dV program "
                    "per slice loops over its heads and writes fp32 partials (dK_part, dV_part), which "
                    "_bwd_reduce_dkdv sums into dK/dV once.")
                   if opts["gqa_bwd"] == "in_program" else
                   "dK/dV are written per query head in (B, H, N_k, d) and summed over the group (flash-attn mha_bwd).")
            )
    if spec.phase == "prefill" and spec.seqlen_q <= DECODE_MAX_SEQLEN_Q:
        a.append(
            f"The bundled kernel's forward takes the pointer prefill path for seqlen_q <= {DECODE_MAX_SEQLEN_Q} in a "
            "training step (its decode path has no backward, so flash_attention under autograd launches the prefill "
            "kernel): modelled so." if spec.backward else
            f"The bundled kernel takes its decode path for seqlen_q <= {DECODE_MAX_SEQLEN_Q}; this prediction models "
            "the prefill schedule (use phase 'decode' to model what the kernel runs)."
        )
    if spec.phase == "decode":
        a.append("Decode uses the split-KV kernel of docs/traffic-contract.md (heads_per_program GQA packing).")
    if spec.phase == "prefill" and not lse:
        a.append("The tiled forward writes O alone, no LSE (an inference kernel's schedule; no bundled kernel runs it).")
    if spec.phase == "prefill" and packed:
        a.append("The tiled forward packs P = heads_per_program query heads of one KV head into each program's "
                 "BLOCK_M rows (BLOCK_M / P positions of each; FlashAttention-3's PackGQA, hopper/pack_gqa.h): "
                 "K/V are streamed once per program for its P heads (the bundled pointer prefill with "
                 "KernelConfig(heads_per_program=P), path 'prefill'; its launcher never picks it).")
    return a


def build_model(spec: LayerSpec, tiling: Tiling, **options: Any) -> TrafficModel:
    """The symbolic traffic model of one layer call, per algorithm, per tensor, per level.

    Args:
        spec: the layer (shapes, dtype, mask, phase, pass).
        tiling: tile sizes of the tiled kernel (BLOCK_M, BLOCK_N, num_splits, heads_per_program).
        **options: see :data:`DEFAULT_OPTIONS` — baseline ``score_dtype`` (None), ``dropout``
            (False), ``extra_score_passes`` (0), ``with_lse`` (False); backward ``dq_mode``
            ("separate"), ``gqa_bwd`` ("in_program"); ``kv_blocks`` ("paper"). The backward
            kernels' tiles are ``tiling``'s ``bwd_block_*``/``dq_block_*`` fields.

    Returns:
        A :class:`TrafficModel`; its expressions are in the symbols of
        :data:`iomodel.traffic.base.SYM` (bytes, FLOPs).

    Raises:
        IomodelError: an unknown option or option value, a decode spec outside the
            kernel's decode path (seqlen_q > 16, heads_per_program not dividing H/H_kv).
    """
    opts = _resolve_options(options)
    _validate(spec, tiling)
    return _build_cached(structure_key(spec, tiling, opts), spec, tiling)


def _build_cached(key: tuple, spec: LayerSpec, tiling: Tiling) -> TrafficModel:
    model = _BUILD_CACHE.get(key)
    if model is None:
        model = _build(spec, tiling, dict(key[-1]))
        _BUILD_CACHE[key] = model
    # same structure, other numbers: same expressions, this spec/tiling attached
    return replace(model, spec=spec, tiling=tiling,
                   assumptions=_assumptions(spec, model.options, spec.phase == "prefill" and tiling.heads_per_program > 1,
                                            tiling.writes_lse, tiling.bwd_group_splits))


_BUILD_CACHE: dict[tuple, TrafficModel] = {}


def _build(spec: LayerSpec, tiling: Tiling, opts: dict[str, Any]) -> TrafficModel:
    algorithms: dict[str, AlgorithmModel] = {}
    algorithms["baseline"] = baseline_model(
        spec, score_dtype=opts["score_dtype"], dropout=opts["dropout"],
        extra_score_passes=opts["extra_score_passes"], with_lse=opts["with_lse"],
    )
    if spec.phase == "decode":
        from iomodel.traffic.decode import decode_model

        algorithms["tiled"] = decode_model(spec, tiling)
    else:
        tiled = tiled_fwd_model(spec, packed=tiling.heads_per_program > 1, lse=tiling.writes_lse)
        if spec.backward:
            from iomodel.traffic.tiled_bwd import add_backward

            tiled = add_backward(tiled, spec, opts, split=tiling.bwd_group_splits > 1)
        algorithms["tiled"] = tiled
        if not spec.backward and spec.window is None:  # Algorithm 1 is a forward pass, without a window
            algorithms["tiled_kv_stationary"] = kv_stationary_model(spec, opts["kv_blocks"])
    return TrafficModel(
        spec=spec,
        tiling=tiling,
        options=opts,
        algorithms=algorithms,
        compulsory=compulsory_rows(spec),
        flops=useful_flops(spec),
        references={"lower_bound_shape": lower_bound_shape(spec), "fa_theorem2_shape": fa_theorem2_shape(spec)},
        assumptions=_assumptions(spec, opts, spec.phase == "prefill" and tiling.heads_per_program > 1, tiling.writes_lse,
                                 tiling.bwd_group_splits),
    )


# ----------------------------------------------------------------------------------
# Numeric results
# ----------------------------------------------------------------------------------


def _py(x: Any) -> Any:
    """A compiled value as a plain Python number (int when integral); numpy scalars included,
    recognised by their ``dtype.kind`` so the single-point path never imports numpy."""
    if isinstance(x, Fraction):
        return int(x) if x.denominator == 1 else float(x)
    kind = getattr(getattr(x, "dtype", None), "kind", None)
    if kind in ("i", "u"):
        return int(x)
    if isinstance(x, float) or kind == "f":
        return int(x) if float(x).is_integer() and abs(x) < 2**63 else float(x)
    return x


@dataclass
class RowValue:
    """One row of an algorithm, evaluated: bytes are exact integers.

    Attributes follow :class:`~iomodel.traffic.base.Row`; ``width`` in bytes, ``elements``
    of the whole tensor, ``reads`` = read_bytes / (elements·width) (may be fractional for
    causal), ``read_formula``/``write_formula`` the sympy-printed expressions.
    """

    tensor: str
    step: str
    level: str
    shape: str
    dtype: str
    width: int
    elements: int
    reads: float
    read_bytes: int
    write_bytes: int
    read_expr: sp.Expr
    write_expr: sp.Expr
    note: str = ""

    @property
    def read_formula(self) -> str:
        """``read_expr`` printed (sympy's ``sstr``), on first use (a reconciliation prints none)."""
        return _printed(self.read_expr)

    @property
    def write_formula(self) -> str:
        """``write_expr`` printed (sympy's ``sstr``), on first use."""
        return _printed(self.write_expr)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable row (worksheet schema: ``width_bytes``, bytes, printed formulas)."""
        return {
            "tensor": self.tensor, "step": self.step, "level": self.level, "shape": self.shape,
            "dtype": self.dtype, "width_bytes": self.width, "elements": self.elements, "reads": self.reads,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "read_formula": self.read_formula, "write_formula": self.write_formula, "note": self.note,
        }


@dataclass
class AllocationValue:
    """A tensor resident in HBM at the peak step, evaluated (bytes)."""

    tensor: str
    shape: str
    dtype: str
    bytes: int
    note: str = ""


@dataclass
class AlgorithmPrediction:
    """One algorithm's numbers: HBM and SRAM_fill bytes, allocation, FLOPs, roofline.

    Units: bytes, FLOPs, FLOP per HBM byte (``intensity``), seconds. ``sram_fill_*`` is
    None for an algorithm without SRAM_fill rows (the baseline). ``bound`` is ``"memory"``
    when HBM bytes / bandwidth >= FLOPs / peak, else ``"compute"``.
    """

    name: str
    title: str
    source: str
    rows: list[RowValue]
    hbm_read_bytes: int
    hbm_write_bytes: int
    sram_fill_read_bytes: int | None
    sram_fill_write_bytes: int | None
    allocated_bytes: int
    allocations: list[AllocationValue]
    flops: int
    intensity: float
    roofline_time_s: float
    bound: str
    peak_flops: float = 0.0

    @property
    def hbm_bytes(self) -> int:
        """HBM bytes read plus written."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable algorithm (worksheet schema: ``hbm``, ``sram_fill``, ``rows`` ...)."""
        d: dict[str, Any] = {
            "title": self.title,
            "source": self.source,
            "hbm": {"read_bytes": self.hbm_read_bytes, "write_bytes": self.hbm_write_bytes, "bytes": self.hbm_bytes},
        }
        if self.sram_fill_read_bytes is not None:
            d["sram_fill"] = {"read_bytes": self.sram_fill_read_bytes, "write_bytes": self.sram_fill_write_bytes}
        d.update({
            "allocated_bytes": self.allocated_bytes,
            "allocations": [asdict(a) for a in self.allocations],
            "flops": self.flops,
            "intensity_flop_per_byte": self.intensity,
            "roofline_time_s": self.roofline_time_s,
            "bound": self.bound,
            "rows": [r.to_dict() for r in self.rows],
        })
        return d


@dataclass
class Prediction:
    """The numeric model of one layer call on one hardware (see :func:`predict`).

    Units: bytes, FLOPs. ``references`` holds the asymptotic shapes (bytes up to a
    constant: ``lower_bound_shape``, ``fa_theorem2_shape``), floats.
    """

    spec: LayerSpec
    tiling: Tiling
    hardware: Hardware
    assumptions: list[str]
    compulsory_bytes: int
    compulsory_rows: list[RowValue]
    flops: int
    algorithms: dict[str, AlgorithmPrediction]
    references: dict[str, float] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    model: TrafficModel | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict in the worksheet schema (README, ``iomodel worksheet --format json``)."""
        algs = {name: a.to_dict() for name, a in self.algorithms.items()}
        if "baseline" in algs and "tiled" in self.algorithms:
            t = self.algorithms["tiled"].hbm_bytes
            algs["baseline"]["ratio_vs_tiled"] = self.algorithms["baseline"].hbm_bytes / t if t else None
        return {
            "spec": self.spec.to_dict(),
            "tiling": _tiling_dict(self.tiling, self.spec),
            "hardware": self.hardware.to_dict(),
            "options": dict(self.options),
            "assumptions": list(self.assumptions),
            "compulsory_bytes": self.compulsory_bytes,
            "compulsory_rows": [r.to_dict() for r in self.compulsory_rows],
            "flops": self.flops,
            "references": dict(self.references),
            "algorithms": algs,
        }


def _tiling_dict(tiling: Tiling, spec: LayerSpec) -> dict[str, int]:
    """The tiles a prediction used: the backward kernels' tiles only for pass ``fwd+bwd``."""
    d = asdict(tiling)
    if not spec.backward:
        for key in BACKWARD_TILE_FIELDS:
            d.pop(key)
    if not spec.backward or tiling.bwd_group_splits == 1:  # the unsplit kernel reads as before S existed
        d.pop("bwd_group_splits")
    if not spec.backward or tiling.bwd_dkdv_order == "heads-outer":  # as before the order existed
        d.pop("bwd_dkdv_order")
    if not spec.backward or tiling.dq_tile_order == "forward":  # as before the order existed
        d.pop("dq_tile_order")
    if not spec.backward or tiling.bwd_dkdv_kernel == "triton":  # as before the Gluon dK/dV launch existed
        d.pop("bwd_dkdv_kernel")
    if tiling.writes_lse:  # every bundled kernel: as before a schedule could keep no LSE
        d.pop("writes_lse")
    return d


def _row_exprs(row: Row) -> list[sp.Expr]:
    return [row.width, row.elements, row.reads, row.read_bytes, row.write_bytes]


@functools.lru_cache(maxsize=64)
def _python_eval(key: tuple):
    """Compiled exact evaluator of every expression of the model with structure ``key``."""
    from iomodel.traffic.compile import python_function

    model = _BUILD_CACHE[key]
    exprs: list[sp.Expr] = []
    for row in model.compulsory:
        exprs += _row_exprs(row)
    for alg in model.algorithms.values():
        for row in alg.rows:
            exprs += _row_exprs(row)
        exprs += [a.bytes for a in alg.allocated]
        exprs.append(alg.flops)
    exprs.append(model.flops)
    exprs += list(model.references.values())
    return python_function(ARG_SYMBOLS, exprs)


@functools.lru_cache(maxsize=4096)
def _printed(expr: sp.Expr) -> str:
    """A row's read or write formula as printed (``sp.sstr``), once per expression."""
    return sp.sstr(expr)


def _peak_for(alg_name: str, spec: LayerSpec, hardware: Hardware, opts: dict[str, Any]) -> float:
    dtype = spec.dtype
    if alg_name == "baseline":  # its matmuls run in the score dtype (fp8 inputs upcast: EAGER_SCORE_DTYPE)
        dtype = opts["score_dtype"] or eager_score_dtype(spec.dtype)
    return hardware.flops_for(dtype)


def _roofline(flops: float, hbm_bytes: float, peak: float, bandwidth: float) -> tuple[float, float, str]:
    t_c, t_m = flops / peak, hbm_bytes / bandwidth
    intensity = flops / hbm_bytes if hbm_bytes else math.inf
    return intensity, max(t_c, t_m), ("memory" if t_m >= t_c else "compute")


def predict(spec: LayerSpec, tiling: Tiling, hardware: Hardware, **options: Any) -> Prediction:
    """Evaluate the model for one layer call on one hardware, exactly (Python integers).

    Args:
        spec: the layer; tensors Q ``(B, H, N_q, d)``, K/V ``(B, H_kv, N_k, d)``.
        tiling: the tiled kernel's tiles; checked against ``hardware.smem_per_block``.
        hardware: bandwidth and peak FLOP/s for the roofline, ``smem_per_sm`` for M.
        **options: model options, see :func:`build_model`.

    Returns:
        A :class:`Prediction` (bytes, FLOPs, seconds per algorithm and per row).

    Raises:
        IomodelError: tiles do not fit shared memory (:meth:`Tiling.check_fits`), a bad
            option, a decode spec outside the decode path, no peak FLOP/s for the dtype, or
            seqlen_q / seqlen_k above :data:`PREDICT_MAX_SEQLEN`.

    Byte and FLOP counts are Python ints, exact at any size (past 2^63 too): the causal and
    windowed tile sums are closed forms (:mod:`iomodel.traffic.sums`, ``py_*``), not loops.
    """
    opts = _resolve_options(options)
    _validate(spec, tiling)
    longest = max(spec.seqlen_q, spec.seqlen_k)
    if longest > PREDICT_MAX_SEQLEN:
        raise IomodelError(
            f"seqlen {longest:,} is above the largest the exact model evaluates ({PREDICT_MAX_SEQLEN:,}, "
            "where its tests and the L2-aware estimate stop): pass a seqlen of at most that"
        )
    tiling.check_fits(spec, hardware.smem_per_block, hardware.name)
    key = structure_key(spec, tiling, opts)
    model = _build_cached(key, spec, tiling)
    vals = symbol_values(spec, tiling, hardware)
    out = iter(_python_eval(key)(*[vals[s] for s in ARG_SYMBOLS]))

    def rows_of(rows: list[Row]) -> list[RowValue]:
        res = []
        for r in rows:
            width, elements, reads, rb, wb = (_py(next(out)) for _ in range(5))
            res.append(RowValue(
                r.tensor, r.step, r.level, r.shape, r.dtype, int(width), int(elements), float(reads),
                int(rb), int(wb), r.read_bytes, r.write_bytes, r.note,
            ))
        return res

    comp_rows = rows_of(model.compulsory)
    algs: dict[str, AlgorithmPrediction] = {}
    for name, alg in model.algorithms.items():
        rows = rows_of(alg.rows)
        allocs = [AllocationValue(a.tensor, a.shape, a.dtype, int(_py(next(out))), a.note) for a in alg.allocated]
        flops = int(_py(next(out)))
        hbm_r = sum(r.read_bytes for r in rows if r.level == "HBM")
        hbm_w = sum(r.write_bytes for r in rows if r.level == "HBM")
        has_sram = alg.has_level("SRAM_fill")
        sf_r = sum(r.read_bytes for r in rows if r.level == "SRAM_fill") if has_sram else None
        sf_w = sum(r.write_bytes for r in rows if r.level == "SRAM_fill") if has_sram else None
        peak = _peak_for(name, spec, hardware, opts)
        intensity, t, bound = _roofline(flops, hbm_r + hbm_w, peak, hardware.hbm_bandwidth)
        algs[name] = AlgorithmPrediction(
            name=name, title=alg.title, source=alg.source, rows=rows, hbm_read_bytes=hbm_r, hbm_write_bytes=hbm_w,
            sram_fill_read_bytes=sf_r, sram_fill_write_bytes=sf_w, allocated_bytes=sum(a.bytes for a in allocs),
            allocations=allocs, flops=flops, intensity=intensity, roofline_time_s=t, bound=bound, peak_flops=peak,
        )
    flops = int(_py(next(out)))
    refs = {name: float(next(out)) for name in model.references}
    return Prediction(
        spec=spec, tiling=tiling, hardware=hardware, assumptions=list(model.assumptions),
        compulsory_bytes=sum(r.read_bytes + r.write_bytes for r in comp_rows), compulsory_rows=comp_rows,
        flops=flops, algorithms=algs, references=refs, options=opts, model=model,
    )


# ----------------------------------------------------------------------------------
# Vectorized sweeps
# ----------------------------------------------------------------------------------

_SPEC_FIELDS = ("batch", "heads", "kv_heads", "head_dim", "seqlen_q", "seqlen_k")
_TILING_FIELDS = ("block_m", "block_n", "num_stages", "num_splits", "heads_per_program",
                  "bwd_block_m", "bwd_block_n", "dq_block_m", "dq_block_n", "bwd_group_splits")  # ARG_SYMBOLS' order
_HW_FIELDS = ("smem_per_sm", "smem_per_block", "hbm_bandwidth")


def _sweep_exprs(model: TrafficModel) -> tuple[list[tuple[str, str]], list[sp.Expr]]:
    names: list[tuple[str, str]] = []
    exprs: list[sp.Expr] = []
    for name, alg in model.algorithms.items():
        for q, level, which in (("hbm_read_bytes", "HBM", "read"), ("hbm_write_bytes", "HBM", "write"),
                                ("sram_fill_read_bytes", "SRAM_fill", "read"),
                                ("sram_fill_write_bytes", "SRAM_fill", "write")):
            if alg.has_level(level):
                names.append((name, q))
                exprs.append(alg.total(level, which))
        names += [(name, "allocated_bytes"), (name, "flops")]
        exprs += [alg.allocated_bytes(), alg.flops]
    names.append(("compulsory", "bytes"))
    exprs.append(model.compulsory_bytes())
    names.append(("layer", "flops"))
    exprs.append(model.flops)
    return names, exprs


@functools.lru_cache(maxsize=64)
def _numpy_eval(key: tuple):
    """Compiled vectorized evaluator of the sweep totals of the model with structure ``key``."""
    from iomodel.traffic.compile import numpy_function

    names, exprs = _sweep_exprs(_BUILD_CACHE[key])
    return names, numpy_function(ARG_SYMBOLS, exprs)


def compile_sweep(spec: LayerSpec, tiling: Tiling, **options: Any) -> None:
    """Build and compile the numpy evaluator of this structure now (what :func:`sweep` caches).

    Lets a benchmark time compilation apart from evaluation. Raises as :func:`build_model`.
    """
    opts = _resolve_options(options)
    _validate(spec, tiling)
    key = structure_key(spec, tiling, opts)
    _build_cached(key, spec, tiling)
    _numpy_eval(key)


def sweep(
    spec: LayerSpec,
    tiling: Tiling,
    hardware: Hardware,
    vary: dict[str, Any],
    **options: Any,
) -> dict[str, dict[str, np.ndarray]]:
    """Evaluate the model over arrays of field values, vectorized (compiled numpy, exact int64).

    Args:
        spec, tiling, hardware: the base point; every field not in ``vary`` keeps its value.
        vary: field name -> array of values; names are LayerSpec fields (``batch``, ``heads``,
            ``kv_heads``, ``head_dim``, ``seqlen_q``, ``seqlen_k``), Tiling fields (``block_m``,
            ``block_n``, ``num_stages``, ``num_splits``, ``heads_per_program``, the backward's
            ``bwd_block_m``, ``bwd_block_n``, ``dq_block_m``, ``dq_block_n``, ``bwd_group_splits``) or Hardware
            fields (``smem_per_sm``, ``smem_per_block``, ``hbm_bandwidth``). Arrays broadcast
            together; the result has their broadcast shape.
        **options: model options, see :func:`build_model`.

    Returns:
        ``result[algorithm][quantity]`` with quantity in ``hbm_read_bytes``,
        ``hbm_write_bytes``, ``hbm_bytes``, ``sram_fill_read_bytes``,
        ``sram_fill_write_bytes`` (tiled algorithms only), ``allocated_bytes``, ``flops``
        (int64), ``intensity`` (FLOP/byte) and ``roofline_time_s`` (s); plus
        ``result["compulsory"]["bytes"]``, ``result["layer"]["flops"]`` and
        ``result["references"]["lower_bound_shape"|"fa_theorem2_shape"]`` (bytes up to a constant).

    Raises:
        IomodelError: an unknown field, a non-positive or non-integer size, a block size
            that is not a power of two, tiles that do not fit shared memory at some point,
            a point too large for exact int64 evaluation (:class:`SweepRangeError`), or any :func:`build_model` error
            at some point.
    """
    import numpy as np  # imported where used: the single-point CLI path needs no numpy

    opts = _resolve_options(options)
    unknown = sorted(set(vary) - set(_SPEC_FIELDS + _TILING_FIELDS + _HW_FIELDS))
    if unknown:
        raise IomodelError(
            f"cannot vary {', '.join(unknown)}: vary one of {', '.join(_SPEC_FIELDS + _TILING_FIELDS + _HW_FIELDS)}"
        )
    arrays = {k: np.asarray(v) for k, v in vary.items()}
    shape = np.broadcast_shapes(*[a.shape for a in arrays.values()]) if arrays else ()
    base_vals = symbol_values(spec, tiling, hardware)
    cols: dict[str, np.ndarray] = {}
    for fld in _SPEC_FIELDS + _TILING_FIELDS + ("smem_per_sm", "smem_per_block"):
        if fld in arrays:
            a = np.broadcast_to(arrays[fld], shape).ravel()
            if not np.issubdtype(a.dtype, np.integer):
                if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                    raise IomodelError(f"{fld} values must be integers: pass an integer array for {fld}")
            a = a.astype(np.int64)
            if np.any(a <= 0):
                raise IomodelError(f"{fld} values must be positive: drop the points where {fld} <= 0")
        else:
            if fld in FIELD_SYMBOLS:
                base = base_vals[FIELD_SYMBOLS[fld]]
            else:
                base = hardware.smem_per_block
            if not -2**63 <= base < 2**63:  # numpy.full would raise OverflowError
                raise SweepRangeError(f"{fld} = {base} is too large for exact int64 evaluation: shrink it or evaluate "
                                      "the point with predict()")
            a = np.full(int(np.prod(shape)), base, dtype=np.int64)
        cols[fld] = a
    bandwidth = np.broadcast_to(np.asarray(arrays.get("hbm_bandwidth", hardware.hbm_bandwidth), dtype=float),
                                shape).ravel()
    n = int(np.prod(shape))

    # ---- pointwise validation (the same checks as build_model / predict) ----
    for fld in ("block_m", "block_n", "bwd_block_m", "bwd_block_n", "dq_block_m", "dq_block_n"):
        v = cols[fld]
        bad = (v & (v - 1)) != 0
        if bad.any():
            raise IomodelError(f"{fld.upper()} must be a power of two, got {int(v[bad][0])}: use powers of two only")
    if np.any(cols["heads"] % cols["kv_heads"]):
        raise IomodelError("heads must be divisible by kv_heads at every point: pick kv_heads among the divisors of heads")
    dims, at = np.unique(cols["head_dim"], return_inverse=True)  # the kernel's padded HEAD_DIM, as Tiling.sram_bytes
    padded = np.array([head_dim_padded(int(d)) for d in dims], dtype=np.int64)[at.ravel()]
    need = program_sram_bytes(cols["block_m"], cols["block_n"], cols["num_stages"], padded, spec.width)
    if np.any(need > cols["smem_per_block"]):
        i = int(np.argmax(need > cols["smem_per_block"]))
        raise IomodelError(
            f"tiles BLOCK_M={cols['block_m'][i]}, BLOCK_N={cols['block_n'][i]} need {need[i]} B of shared memory "
            f"at HEAD_DIM={cols['head_dim'][i]} (padded to {padded[i]} columns, as the kernel holds it) "
            f"but {cols['smem_per_block'][i]} B are available at some sweep point: lower the block sizes swept"
        )
    packed = (cols["heads_per_program"] > 1) & (spec.phase == "prefill")
    if np.any(packed):  # a prefill schedule's packed GQA group: the one rule, point by point
        for i in np.unique(np.nonzero(packed)[0]):
            reason = prefill_packing_refusal(int(cols["heads_per_program"][i]),
                                             int(cols["heads"][i] // cols["kv_heads"][i]), int(cols["block_m"][i]),
                                             spec.backward, "heads_per_program")
            if reason is not None:
                raise IomodelError(f"at a sweep point: {reason}")
    if spec.phase == "decode":
        group = cols["heads"] // cols["kv_heads"]
        if np.any(cols["seqlen_q"] > DECODE_MAX_SEQLEN_Q):
            raise IomodelError(f"decode models at most {DECODE_MAX_SEQLEN_Q} query rows (the kernel's decode path): "
                               f"keep seqlen_q <= {DECODE_MAX_SEQLEN_Q}")
        if np.any(group % cols["heads_per_program"]):
            raise IomodelError("heads_per_program must divide H/H_kv at every point: sweep divisors of the group only")
        if np.any(cols["heads_per_program"] * cols["seqlen_q"] > DECODE_MAX_ROWS):
            raise IomodelError(f"heads_per_program*seqlen_q exceeds {DECODE_MAX_ROWS} at some point: "
                               "lower heads_per_program")

    # exact int64 evaluation: every quantity is below 64·B·H·N_q·N_k·d (FLOPs <= 18·d per pair,
    # the baseline's score passes and the tiled re-reads likewise), so this bound keeps it exact
    bound = 64.0 * cols["batch"] * cols["heads"] * cols["seqlen_q"].astype(float) * cols["seqlen_k"] * cols["head_dim"]
    if np.any(bound >= 2.0**63):
        raise SweepRangeError(
            "some sweep points are too large for exact int64 evaluation (64·B·H·seqlen_q·seqlen_k·d >= 2^63): "
            "shrink the swept sizes or evaluate those points with predict()"
        )

    # ---- group points by model structure, evaluate each group with its compiled function ----
    gqa = cols["kv_heads"] < cols["heads"]
    split = (cols["num_splits"] > 1) & (spec.phase == "decode")
    if spec.window is not None:  # the band of each point (an unbounded side is N_q + N_k, as window_band)
        from iomodel.spec.layer import band_has_empty_rows

        wide = cols["seqlen_q"] + cols["seqlen_k"]
        left, right = spec.window
        band = (wide if left is None else np.full(n, left), wide if right is None else np.full(n, right))
        off = (cols["seqlen_k"] - cols["seqlen_q"]) if spec.causal_align == "bottom-right" else 0
        empty = np.asarray(band_has_empty_rows(band, cols["seqlen_q"], cols["seqlen_k"], off), dtype=bool)
    else:
        empty = (cols["seqlen_q"] > cols["seqlen_k"]) & (spec.causal and spec.causal_align == "bottom-right")
    bwd_split = (cols["bwd_group_splits"] > 1) & spec.backward
    if spec.backward and np.any(cols["bwd_group_splits"] > cols["heads"] // cols["kv_heads"]):
        raise IomodelError("bwd_group_splits exceeds the GQA group H/H_kv at some point: sweep 1..H/H_kv only")
    code = (packed.astype(np.int64) * 16 + bwd_split.astype(np.int64) * 8 + gqa.astype(np.int64) * 4
            + split.astype(np.int64) * 2 + empty.astype(np.int64))
    result: dict[str, dict[str, np.ndarray]] = {}
    args_all = [cols[f] for f in _SPEC_FIELDS] + [np.full(n, spec.width, dtype=np.int64)] + \
        [cols[f] for f in _TILING_FIELDS] + [cols["smem_per_sm"]]
    for c in np.unique(code):
        idx = np.nonzero(code == c)[0]
        i0 = int(idx[0])
        rep_spec = replace(spec, **{f: int(cols[f][i0]) for f in _SPEC_FIELDS})
        rep_tiling = replace(tiling, **{f: int(cols[f][i0]) for f in _TILING_FIELDS})
        key = structure_key(rep_spec, rep_tiling, opts)
        _build_cached(key, rep_spec, rep_tiling)
        names, fn = _numpy_eval(key)
        sub = [a[idx] for a in args_all]
        values = fn(*sub)
        for (alg, q), v in zip(names, values):
            out = result.setdefault(alg, {}).setdefault(q, np.zeros(n, dtype=np.int64))
            out[idx] = np.broadcast_to(np.asarray(v, dtype=np.int64), idx.shape)
    # derived quantities
    refs_key = structure_key(spec, tiling, opts)
    _build_cached(refs_key, spec, tiling)
    for alg, qs in result.items():
        if "hbm_read_bytes" in qs:
            qs["hbm_bytes"] = qs["hbm_read_bytes"] + qs["hbm_write_bytes"]
            peak = _peak_for(alg, spec, hardware, opts)
            with np.errstate(divide="ignore", invalid="ignore"):
                qs["intensity"] = qs["flops"] / qs["hbm_bytes"]
            qs["roofline_time_s"] = np.maximum(qs["flops"] / peak, qs["hbm_bytes"] / bandwidth)
    N_q, N_k, d = cols["seqlen_q"].astype(float), cols["seqlen_k"].astype(float), cols["head_dim"].astype(float)
    B, H, s = cols["batch"].astype(float), cols["heads"].astype(float), float(spec.width)
    m_el = cols["smem_per_sm"].astype(float) / s
    result["references"] = {
        "lower_bound_shape": B * H * s * np.minimum(N_q * N_k * d**2 / m_el, N_q * N_k * d / np.sqrt(m_el)),
        "fa_theorem2_shape": B * H * s * N_q * N_k * d**2 / m_el,
    }
    return {alg: {q: v.reshape(shape) for q, v in qs.items()} for alg, qs in result.items()}


__all__ = [
    "ARG_SYMBOLS",
    "AlgorithmPrediction",
    "AllocationValue",
    "DEFAULT_OPTIONS",
    "Prediction",
    "QUANTITIES",
    "RowValue",
    "TrafficModel",
    "build_model",
    "compile_sweep",
    "predict",
    "structure_key",
    "sweep",
    "symbol_values",
]
