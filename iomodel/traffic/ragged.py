"""Traffic of a ragged (varlen) batch: the tiled model summed exactly over its sequences.

Each sequence is a batch-1 layer with its own N_q, N_k (``RaggedSpec.sequence``), so the
tiled model's tile rounding (ceil(N_q / BLOCK_M) query tiles, key blocks rounded to
BLOCK_N, causal and window bounds with the sequence's own offset) applies per sequence;
the sum is over distinct ``(N_q, N_k)`` kinds times their counts (exact integers). The
varlen kernel also reads its sequence table: every program of the grid
``(cdiv(max N_q, BLOCK_M), B·H)`` loads ``cu_seqlens_q[b]``, ``cu_seqlens_q[b+1]``,
``cu_seqlens_k[b]``, ``cu_seqlens_k[b+1]`` (int32) and, with key padding, ``seqused_k[b]``,
programs past their sequence's end included (they return after these loads):
``docs/traffic-contract.md``, "Ragged batches".

A sequence that uses no key (N_k = 0, ``seqused_k[b] = 0``) has no batch-1 layer; its programs
load their Q tile, load no K or V block (every key bound is 0) and store O = 0 and LSE = −inf:
the tiled forward's Q, O and LSE rows, which do not depend on N_k, with no K or V bytes and no
FLOPs. Its compulsory bytes are its outputs written once (no input can affect an output): the
O row. ``docs/traffic-contract.md``, "Ragged batches".

The eager baseline of a ragged batch is the padded batch (``RaggedSpec.padded``). The
L2-aware estimate is :func:`iomodel.cache.estimate.estimate_ragged`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iomodel.spec.hardware import Hardware
from iomodel.spec.layer import Tiling, cdiv
from iomodel.spec.ragged import RaggedSpec

#: Bytes of one cu_seqlens / seqused_k entry (int32, flash-attn's convention).
INDEX_WIDTH = 4
#: The tiled forward's tensors whose bytes grow with N_k (none are moved for a sequence with no key).
KEY_TENSORS = ("K", "V")


@dataclass
class RaggedPrediction:
    """The tiled model of a ragged batch (bytes, exact integers).

    Attributes:
        spec, tiling: what was modelled.
        tensors: ``(level, tensor)`` -> ``(read_bytes, write_bytes)`` summed over the
            sequences (levels ``HBM`` and ``SRAM_fill`` of the tiled rows), plus the sequence
            table rows ``cu_seqlens_q``, ``cu_seqlens_k`` (and ``seqused_k``) at both levels.
        kinds: one entry per distinct ``(N_q, N_k)``: count, HBM and SRAM_fill bytes of one
            sequence of that kind (read + write).
        flops: forward FLOPs summed over sequences.
        compulsory_bytes: the compulsory HBM bytes summed over the sequences (each sequence's
            inputs read once and outputs written once; the sequence table is not in it).
        padded_baseline_hbm_bytes: the eager chain's HBM bytes on the padded batch.
        padded_tiled_hbm_bytes: the tiled kernel's HBM bytes on the padded batch (for comparison).
    """

    spec: RaggedSpec
    tiling: Tiling
    tensors: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    kinds: list[dict[str, Any]] = field(default_factory=list)
    flops: int = 0
    compulsory_bytes: int = 0
    padded_baseline_hbm_bytes: int = 0
    padded_tiled_hbm_bytes: int = 0

    def level_bytes(self, level: str) -> tuple[int, int]:
        """(read, write) bytes of one level summed over tensors."""
        rd = sum(r for (lv, _), (r, _w) in self.tensors.items() if lv == level)
        wr = sum(w for (lv, _), (_r, w) in self.tensors.items() if lv == level)
        return rd, wr

    def by_tensor(self, level: str = "SRAM_fill") -> dict[str, tuple[int, int]]:
        """tensor -> (read, write) bytes at ``level``."""
        return {t: rw for (lv, t), rw in self.tensors.items() if lv == level}


def sequence_table_reads(spec: RaggedSpec, tiling: Tiling, seqused: bool = False) -> dict[str, int]:
    """Bytes the varlen kernel reads from its sequence table: ``cdiv(max N_q, BLOCK_M)·B·H``
    programs, each 2 entries of cu_seqlens_q and of cu_seqlens_k (and 1 of seqused_k), 4 B each."""
    programs = cdiv(spec.max_seqlen_q, tiling.block_m) * spec.batch * spec.layer.heads
    out = {"cu_seqlens_q": programs * 2 * INDEX_WIDTH, "cu_seqlens_k": programs * 2 * INDEX_WIDTH}
    if seqused:
        out["seqused_k"] = programs * INDEX_WIDTH
    return out


def _sequence_bytes(spec: RaggedSpec, n_q: int, n_k: int, tiling: Tiling, hardware: Hardware
                    ) -> tuple[list[tuple[str, str, int, int]], int, int]:
    """One sequence's tiled rows ``(level, tensor, read, write)`` (bytes), FLOPs and compulsory bytes.

    N_k >= 1: :func:`iomodel.traffic.predict` of its batch-1 layer. N_k = 0: the rows of the
    same layer at one key (Q, O and LSE do not depend on N_k) with the :data:`KEY_TENSORS`
    moving nothing, no FLOPs, and the compulsory bytes of its outputs (the O row) only.
    """
    from iomodel.traffic.model import predict

    pred = predict(spec.sequence(n_q, max(n_k, 1)), tiling, hardware)
    tiled = pred.algorithms["tiled"]
    rows = [(r.level, r.tensor, r.read_bytes, r.write_bytes) for r in tiled.rows]
    if n_k > 0:
        return rows, tiled.flops, pred.compulsory_bytes
    rows = [(lv, t, 0, 0) if t in KEY_TENSORS else (lv, t, rd, wr) for lv, t, rd, wr in rows]
    return rows, 0, sum(r.write_bytes for r in pred.compulsory_rows)


def predict_ragged(spec: RaggedSpec, tiling: Tiling, hardware: Hardware, seqused: bool = False) -> RaggedPrediction:
    """The tiled forward's traffic of a ragged batch, summed exactly per sequence.

    Args:
        spec: the ragged batch (forward prefill).
        tiling: the forward kernel's tiles (BLOCK_M, BLOCK_N).
        hardware: for the per-sequence predictions (rows do not depend on it).
        seqused: the call passes ``seqused_k`` (key padding): its reads are counted.

    Returns:
        :class:`RaggedPrediction` (bytes). A sequence with no key (N_k = 0) moves its Q, O and
        LSE rows only (module docstring).

    Raises:
        IomodelError: what :func:`iomodel.traffic.predict` raises for a sequence; packed query heads
            (``heads_per_program`` > 1) or programs that keep no LSE, which no ragged launch runs.
    """
    from iomodel.errors import IomodelError
    from iomodel.schedule.tiles import ragged_programs_refusal

    reason = ragged_programs_refusal(tiling.heads_per_program, tiling.writes_lse)
    if reason is not None:
        raise IomodelError(reason)
    out = RaggedPrediction(spec, tiling)
    for (n_q, n_k), count in spec.kinds():
        rows, flops, compulsory = _sequence_bytes(spec, n_q, n_k, tiling, hardware)
        for level, tensor, rd, wr in rows:
            r0, w0 = out.tensors.get((level, tensor), (0, 0))
            out.tensors[(level, tensor)] = (r0 + count * rd, w0 + count * wr)
        out.flops += count * flops
        out.compulsory_bytes += count * compulsory
        out.kinds.append({"seqlen_q": n_q, "seqlen_k": n_k, "count": count,
                          "hbm_bytes": sum(rd + wr for lv, _, rd, wr in rows if lv == "HBM"),
                          "sram_fill_bytes": sum(rd + wr for lv, _, rd, wr in rows if lv == "SRAM_fill")})
    for name, nbytes in sequence_table_reads(spec, tiling, seqused).items():
        for level in ("HBM", "SRAM_fill"):
            out.tensors[(level, name)] = (nbytes, 0)
    from iomodel.traffic.model import predict

    padded = predict(spec.padded(), tiling, hardware)
    out.padded_baseline_hbm_bytes = padded.algorithms["baseline"].hbm_bytes
    out.padded_tiled_hbm_bytes = padded.algorithms["tiled"].hbm_bytes
    return out
