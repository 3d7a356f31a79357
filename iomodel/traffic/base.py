"""Shared structures of the symbolic traffic model.

A traffic model is, per algorithm, a list of :class:`Row` — one tensor moved by one step
at one memory level — whose byte counts are sympy expressions in the symbols of
:data:`SYM`. Rows are symbolic (printable, LaTeX) and compiled with ``lambdify`` for
numeric evaluation and sweeps; they are never evaluated by ``subs`` in a loop.

Levels:

* ``HBM``: bytes crossing between device memory and the chip, assuming no reuse in any
  cache above SRAM (the "no-reuse" bound; the L2-aware prediction refines it).
* ``SRAM_fill``: bytes requested by the kernel's global loads and stores (what Triton's
  ``tl.load``/``tl.store`` ask for, masked elements excluded). For a tiled kernel this is
  what the SMs pull through L2; counted exactly by the interpreter.

Allocated bytes (what must sit in HBM at the peak of the call) are kept apart from
transferred bytes: see :class:`Allocation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Literal

import sympy as sp

_pos_int = dict(positive=True, integer=True)

#: The model's symbols. Element counts are dimensionless; ``s`` (and the fixed widths of
#: fp32 intermediates) carry the bytes.
SYM = SimpleNamespace(
    B=sp.Symbol("B", **_pos_int),  # batch
    H=sp.Symbol("H", **_pos_int),  # query heads
    H_kv=sp.Symbol("H_kv", **_pos_int),  # key/value heads
    d=sp.Symbol("d", **_pos_int),  # HEAD_DIM
    N_q=sp.Symbol("N_q", **_pos_int),  # seqlen_q
    N_k=sp.Symbol("N_k", **_pos_int),  # seqlen_k
    s=sp.Symbol("s", **_pos_int),  # element width of Q, K, V, O in bytes
    BLOCK_M=sp.Symbol("BLOCK_M", **_pos_int),
    BLOCK_N=sp.Symbol("BLOCK_N", **_pos_int),
    stages=sp.Symbol("stages", **_pos_int),  # K/V pipelining depth
    splits=sp.Symbol("splits", **_pos_int),  # decode split-KV partitions
    M=sp.Symbol("M", **_pos_int),  # SRAM bytes per SM (FlashAttention Theorem 2's M)
    P=sp.Symbol("P", **_pos_int),  # decode: query heads packed per program (heads_per_program)
    # backward kernels (kernels/backward.py): dK/dV kernel query rows per step and key rows per
    # program, dQ kernel query rows per program and key rows per step
    BWD_BLOCK_M=sp.Symbol("BWD_BLOCK_M", **_pos_int),
    BWD_BLOCK_N=sp.Symbol("BWD_BLOCK_N", **_pos_int),
    DQ_BLOCK_M=sp.Symbol("DQ_BLOCK_M", **_pos_int),
    DQ_BLOCK_N=sp.Symbol("DQ_BLOCK_N", **_pos_int),
    BWD_SPLITS=sp.Symbol("BWD_SPLITS", **_pos_int),  # dK/dV kernel: slices S of each GQA group
)

#: LayerSpec / Tiling / Hardware field name -> the model symbol it sets (sweep ``vary`` keys).
FIELD_SYMBOLS: dict[str, sp.Symbol] = {
    "batch": SYM.B,
    "heads": SYM.H,
    "kv_heads": SYM.H_kv,
    "head_dim": SYM.d,
    "seqlen_q": SYM.N_q,
    "seqlen_k": SYM.N_k,
    "block_m": SYM.BLOCK_M,
    "block_n": SYM.BLOCK_N,
    "num_stages": SYM.stages,
    "num_splits": SYM.splits,
    "heads_per_program": SYM.P,
    "bwd_block_m": SYM.BWD_BLOCK_M,
    "bwd_block_n": SYM.BWD_BLOCK_N,
    "dq_block_m": SYM.DQ_BLOCK_M,
    "dq_block_n": SYM.DQ_BLOCK_N,
    "bwd_group_splits": SYM.BWD_SPLITS,
    "smem_per_sm": SYM.M,
}

Level = Literal["HBM", "SRAM_fill"]
LEVELS: tuple[str, ...] = ("HBM", "SRAM_fill")


@dataclass(frozen=True)
class Row:
    """One tensor moved by one step at one level.

    Attributes:
        tensor: tensor name (``Q``, ``K``, ``S``, ``P``, ``O``, ``LSE``, ``dQ_acc`` ...).
        step: the step that moves it (``S = Q Kᵀ``, ``softmax``, ``fwd kernel`` ...).
        level: ``HBM`` or ``SRAM_fill`` (see module docstring).
        shape: the tensor's shape in the vocabulary, e.g. ``(B, H, N_q, d)``.
        dtype: element type name of this tensor (``fp32`` for LSE and MATH scores).
        width: element width in bytes (sympy expression; ``s`` or an integer).
        elements: element count of the whole tensor (dimensionless expression).
        reads: how many times the whole tensor is read by this step (expression; 0 if
            written only). ``read_bytes == reads * elements * width`` up to masking.
        read_bytes: bytes read (expression).
        write_bytes: bytes written (expression).
        note: one sentence of why (the formula's source or assumption).
    """

    tensor: str
    step: str
    level: Level
    shape: str
    dtype: str
    width: sp.Expr
    elements: sp.Expr
    reads: sp.Expr
    read_bytes: sp.Expr
    write_bytes: sp.Expr
    note: str = ""


@dataclass(frozen=True)
class Allocation:
    """A tensor that must be resident in HBM at the peak of the call (bytes, not traffic)."""

    tensor: str
    shape: str
    dtype: str
    bytes: sp.Expr
    note: str = ""


@dataclass
class AlgorithmModel:
    """The symbolic traffic of one algorithm for one case (mask, phase, pass).

    Attributes:
        name: key in worksheets and JSON (``baseline``, ``tiled``, ``tiled_kv_stationary``,
            ``decode_split_kv`` ...).
        title: human title.
        source: citation of the schedule (paper section, tutorial).
        rows: traffic rows at all levels.
        allocated: tensors resident in HBM at peak.
        flops: FLOPs of the schedule (including recomputation), expression.
    """

    name: str
    title: str
    source: str
    rows: list[Row]
    allocated: list[Allocation] = field(default_factory=list)
    flops: sp.Expr = sp.Integer(0)

    def total(self, level: str, which: Literal["read", "write"]) -> sp.Expr:
        """Sum of ``read_bytes`` or ``write_bytes`` over the rows at ``level``."""
        attr = "read_bytes" if which == "read" else "write_bytes"
        return sp.Add(*[getattr(r, attr) for r in self.rows if r.level == level])

    def allocated_bytes(self) -> sp.Expr:
        """Sum of the :class:`Allocation` bytes (resident in HBM at the peak), expression."""
        return sp.Add(*[a.bytes for a in self.allocated])

    def has_level(self, level: str) -> bool:
        """Whether any row is at ``level`` (the baseline has no ``SRAM_fill`` rows)."""
        return any(r.level == level for r in self.rows)


def make_row(
    tensor: str,
    step: str,
    level: Level,
    shape: str,
    dtype: str,
    width: sp.Expr | int,
    elements: sp.Expr,
    read_bytes: sp.Expr | int = 0,
    write_bytes: sp.Expr | int = 0,
    note: str = "",
) -> Row:
    """Build a :class:`Row`; ``reads`` is derived as ``read_bytes / (elements * width)``.

    Units: ``width`` bytes per element, ``elements`` dimensionless, byte counts in bytes.
    """
    width = sp.sympify(width)
    elements = sp.sympify(elements)
    read_bytes = sp.sympify(read_bytes)
    write_bytes = sp.sympify(write_bytes)
    reads = read_bytes / (elements * width) if read_bytes != 0 else sp.Integer(0)
    return Row(tensor, step, level, shape, dtype, width, elements, reads, read_bytes, write_bytes, note)


def both_levels(rows: list[Row]) -> list[Row]:
    """The ``SRAM_fill`` rows followed by identical ``HBM`` rows (no-reuse: every requested
    byte crosses HBM once per request), as for the bundled tiled kernels."""
    from dataclasses import replace

    return [replace(r, level="SRAM_fill") for r in rows] + [replace(r, level="HBM") for r in rows]
