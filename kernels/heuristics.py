"""Tile choices of the bundled FlashAttention kernel, in pure Python (no torch, no triton).

The launcher in :mod:`kernels.flash_attention` asks these functions which tiles to run,
so the traffic model and the worksheets can evaluate exactly what the kernel would run
without importing torch or triton. Vocabulary as in ``docs/traffic-contract.md``:
BLOCK_M query rows per program, BLOCK_N key rows per inner step, P = heads_per_program
(GQA packing: decode's own, and the pointer prefill's from a given config), num_splits (decode split-KV partitions).

The numbers of the traffic contract (padded HEAD_DIM, decode BLOCK_M and P, split length,
decode limits, shared memory of a program) live in :mod:`iomodel.schedule.tiles`, what the
kernel runs at all (HEAD_DIM, dtypes, paths, the TMA choice) in
:mod:`iomodel.schedule.capabilities`; this module holds the tile tables and the choices
made from them.

Three regimes choose tiles differently:

* Triton's interpreter (CPU): one fixed small configuration per path
  (:data:`INTERPRETER_PREFILL`, :data:`INTERPRETER_DECODE`); autotuning there is slow and
  meaningless.
* GPU prefill: ``triton.autotune`` over :func:`prefill_candidates`, keyed on HEAD_DIM,
  dtype, causal and the seqlen buckets of :func:`seqlen_bucket`; the launcher reports the
  configuration the autotuner picked. Without autotuning the launcher runs
  :func:`prefill_default`.
* GPU decode: deterministic, :func:`decode_config` (split-KV: as many splits as fill one round
  of the programs the SMs hold at once, :func:`decode_num_splits`; the fused merge's count cut
  to :data:`FUSED_MAX_SPLITS` where that was measured).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from iomodel.schedule.grid import estimate_programs_per_sm
from iomodel.schedule.tiles import (
    decode_block_m,
    decode_heads_per_program,
    decode_split_len,
    head_dim_padded,
    next_pow2,
    paged_block_n,
    program_sram_bytes,
)
from iomodel.errors import IomodelError
from iomodel.schedule.capabilities import DKDV_KERNELS, TMA_SM_MAJOR, gluon_dkdv_refusal
from iomodel.schedule.launch import TILE_ORDERS as _SCHEDULE_TILE_ORDERS
from iomodel.spec import Tiling, cdiv, dtype_width
from iomodel.spec.hardware import H200

#: Query-tile orders of the prefill grid (``KernelConfig.tile_order``): ``forward`` maps
#: ``program_id(0)`` to query tile i = program_id(0); ``reverse`` to i = T_r - 1 - program_id(0)
#: (causal: the heaviest tiles, those with the most visible K/V blocks, start first, so the
#: last wave holds the lightest tiles; FlashAttention-3's causal scheduler does the same).
#: The set of blocks every tile moves is the same in both orders (traffic contract). The names
#: are :data:`iomodel.schedule.launch.TILE_ORDERS` (the schedule the L2 model reads).
TILE_ORDERS = _SCHEDULE_TILE_ORDERS


@dataclass(frozen=True)
class KernelConfig:
    """The configuration one launch of the bundled kernel ran (or will run).

    Convertible to :class:`iomodel.spec.Tiling` by :meth:`tiling`, so the traffic model
    is evaluated on exactly these tiles.
    """

    block_m: int  # BLOCK_M, query rows per program (decode: next_pow2(max(16, P * seqlen_q)))
    block_n: int  # BLOCK_N, key rows per inner step
    num_warps: int  # warps per program (32 threads each)
    num_stages: int  # software-pipelining depth of the K/V loop
    path: str  # "prefill", "prefill-tma", "prefill-gluon" or "decode-split-kv"
    num_splits: int = 1  # decode split-KV partitions (1 for prefill)
    heads_per_program: int = 1  # query heads of one GQA group per program (P): decode; prefill on path "prefill" only
    warp_specialize: bool = False  # prefill-tma: automatic warp specialization of the K/V loop (prefill-gluon: always)
    tile_order: str = "forward"  # prefill: "forward" or "reverse" query-tile order (TILE_ORDERS)
    grid_order: str = "tiles-fastest"  # prefill: program order, "tiles-fastest" or "heads-fastest" (a fixed config)
    #: decode with num_splits > 1: True, the last split program of each (b, KV head, head
    #: group) merges the partials in the same launch (one launch); False, the separate
    #: ``_attn_decode_combine`` launch (the design measured before issue 14). Ignored otherwise.
    fused_combine: bool = True

    def tiling(self) -> Any:
        """This configuration as an :class:`iomodel.spec.Tiling` (same BLOCK_M/BLOCK_N/stages/splits/P)."""
        from iomodel.spec import Tiling

        return Tiling(
            block_m=self.block_m,
            block_n=self.block_n,
            num_stages=self.num_stages,
            num_splits=self.num_splits,
            heads_per_program=self.heads_per_program,
            fused_combine=self.fused_combine,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields; ``grid_order`` only when not ``tiles-fastest`` (so a record of the
        default launch reads as it did before the field existed)."""
        d = asdict(self)
        if d["grid_order"] == "tiles-fastest":
            del d["grid_order"]
        return d

    def with_(self, **changes: Any) -> "KernelConfig":
        """A copy with some fields changed."""
        return replace(self, **changes)


@dataclass(frozen=True)
class TileChoice:
    """One candidate tile configuration of the prefill kernel (a ``triton.Config``)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    warp_specialize: bool = False
    tile_order: str = "forward"
    #: Programs one SM holds where the kernel fixes it, else None (estimated from shared memory and warps):
    #: 1 for the warp-specialised Gluon prefill, whose setmaxnreg split is compiled to take the SM's whole
    #: register file (168 registers a thread at 12 warps, 96 at 20: 65,536 / threads, rounded down to 8;
    #: ``python -m kernels.compile_check``).
    programs_per_sm: int | None = None

    def fixed_programs_per_sm(self, block_m: Any, block_n: Any, num_stages: Any) -> int | None:
        """:attr:`programs_per_sm` for a launch in these tiles (BLOCK_M, BLOCK_N, stages), else None: other tiles are
        another launch, whose programs per SM are estimated."""
        return self.programs_per_sm if (block_m, block_n, num_stages) == (self.block_m, self.block_n,
                                                                          self.num_stages) else None

    def config(self, path: str) -> KernelConfig:
        """This tile choice as the :class:`KernelConfig` the launcher runs on ``path``."""
        return KernelConfig(self.block_m, self.block_n, self.num_warps, self.num_stages, path,
                            warp_specialize=self.warp_specialize, tile_order=self.tile_order)


# ----------------------------------------------------------------------------------
# Interpreter (CPU) configurations: small, fixed, and BLOCK_M != BLOCK_N so that tests
# cross the causal diagonal inside a query tile and cover several K/V blocks per tile.
# ----------------------------------------------------------------------------------
INTERPRETER_PREFILL = TileChoice(block_m=32, block_n=16, num_warps=4, num_stages=1)
#: Decode in the interpreter: BLOCK_N 16 so a short KV cache still has several blocks per split.
INTERPRETER_DECODE_BLOCK_N = 16
#: SM count assumed for the split-KV heuristic where no GPU reports one (the interpreter):
#: small, so that the CPU tests exercise num_splits > 1 with few programs.
INTERPRETER_NUM_SMS = 4
#: Shared memory per SM assumed where no GPU reports one (the interpreter): the H200's
#: (:data:`iomodel.spec.hardware.H200`), so the decode heuristic's resident-program count is a GPU's.
INTERPRETER_SMEM_PER_SM = H200.smem_per_sm
#: L2 bytes assumed where no GPU reports them (the interpreter): the H200's, for ``dkdv_order_for``.
INTERPRETER_L2_BYTES = H200.l2_bytes


# ----------------------------------------------------------------------------------
# GPU prefill: autotune candidates per shape class. Edit these lists in a tuning round
# (benchmarks/gpu_kernel_check.py sweeps a wider set and prints the winners).
# ----------------------------------------------------------------------------------
# Pruned with ``python -m kernels.compile_check`` (sm_90, triton 3.6): BLOCK_M 128 with 4
# warps spills registers at HEAD_DIM 128 (one warpgroup holds a 128 x 128 fp32 accumulator),
# so BLOCK_M 128 runs 8 warps (two warpgroups of wgmma). BLOCK_N 128 with 3 stages uses
# 225 KiB of shared memory (of 227 KiB per block).
_TMA_CANDIDATES: dict[int, list[TileChoice]] = {
    32: [TileChoice(128, 64, 8, 3), TileChoice(128, 128, 8, 3), TileChoice(64, 64, 4, 4)],
    64: [TileChoice(128, 64, 8, 3), TileChoice(128, 128, 8, 3), TileChoice(128, 64, 8, 4),
         TileChoice(64, 64, 4, 4)],
    128: [TileChoice(128, 128, 8, 3), TileChoice(64, 64, 4, 3), TileChoice(128, 64, 8, 3)],
    256: [TileChoice(64, 64, 4, 2), TileChoice(128, 64, 8, 2), TileChoice(64, 32, 4, 3)],
}
#: Measured per-shape-class lists (TMA path), keyed (padded HEAD_DIM, causal), best first.
#: Source: H200 (132 SMs), triton 3.6, round 1 of ``benchmarks/gpu_kernel_check.py``
#: (``receipts/raw/kernel-check-h200-2026-11-29-round1.json``): B*N = 16k tokens, H = 16,
#: seqlen 4k and 8k, fp16 and bf16 alike (the winner did not depend on dtype or on the
#: seqlen bucket). TFLOP/s of the swept tiles at HEAD_DIM 128:
#:   non-causal: 128x128 w8 s3 558-588, 64x64 w4 s3 526-562, 128x64 w8 s3 519-543,
#:               128x64 w8 s4 480-513, 128x128 w8 s2 473-479 (dropped), 64x64 w4 s4 347-411 (dropped);
#:   causal:     128x128 w8 s3 491-511, 64x64 w4 s3 478-526 (a tie), 128x64 w8 s3 446-484 (dropped).
#: Causal adds the reverse query-tile order (heaviest tiles first) of the two winners; the
#: autotuner measures both orders (round 2 of the GPU check reports them side by side).
_MEASURED_TMA: dict[tuple[int, bool], list[TileChoice]] = {
    (128, False): [TileChoice(128, 128, 8, 3), TileChoice(64, 64, 4, 3), TileChoice(128, 64, 8, 3)],
    (128, True): [TileChoice(128, 128, 8, 3, tile_order="reverse"), TileChoice(64, 64, 4, 3, tile_order="reverse"),
                  TileChoice(128, 128, 8, 3), TileChoice(64, 64, 4, 3)],
}
_POINTER_CANDIDATES: dict[int, list[TileChoice]] = {
    16: [TileChoice(64, 64, 4, 3), TileChoice(128, 64, 8, 3)],
    32: [TileChoice(64, 64, 4, 3), TileChoice(128, 64, 8, 3)],
    64: [TileChoice(128, 64, 8, 3), TileChoice(128, 64, 4, 3), TileChoice(128, 128, 8, 3),
         TileChoice(64, 64, 4, 4)],
    128: [TileChoice(128, 64, 8, 3), TileChoice(64, 64, 4, 3), TileChoice(128, 128, 8, 2)],
    256: [TileChoice(64, 32, 4, 3), TileChoice(64, 64, 4, 2), TileChoice(128, 64, 8, 2)],
}
# fp32 runs exact IEEE dots on the CUDA cores (no tensor cores): a correctness path, not a
# speed target; these tiles compile with no or few spills on sm_90 (compile_check).
_FP32_CANDIDATES: dict[int, list[TileChoice]] = {
    64: [TileChoice(64, 32, 8, 2), TileChoice(32, 32, 4, 2)],
    256: [TileChoice(32, 32, 8, 2), TileChoice(16, 32, 4, 2)],
}


#: The one configuration of the Gluon prefill (path ``prefill-gluon``, ``kernels/gluon_attention.py``) per
#: HEAD_DIM; causal runs the heaviest query tiles first.
#:
#: * HEAD_DIM 128: BLOCK_M 128 (two consumer warpgroups of 64 rows, ping-pong), BLOCK_N 128, a ring of
#:   2 K/V stages, 12 warps (4 + 4 consumers, 1 producer padded to a warpgroup). Measured on the H200
#:   (receipts/gluon-fwd-probe-h200-2026-12-04-c.json and -d.json, calibration): 3 stages ran within 2 %
#:   of 2 (either side) and BLOCK_N 64 (3 stages) 8-15 % slower. Shared memory (128·d + 2·2·128·d)·2 bytes
#:   = 160 KiB (one program per SM).
#: * HEAD_DIM 64: BLOCK_M 256 (four consumer warpgroups in a ring of turns), BLOCK_N 64, 4 stages, 20 warps.
#:   Measured on an H100 (receipts/gluon-fwd-probe-h100-2026-12-05-ws4.json, calibration): non-causal
#:   1.053x cuDNN against the TMA prefill's 0.947x and the two-warpgroup design's 0.944x (best of 2-4
#:   stages); causal 0.971x against the TMA prefill's 0.976x (3 stages 0.933x), before its warpgroups skipped the
#:   causal key blocks they do not see (2026-12-06: ahead of the TMA prefill on the H200's calibration shapes from
#:   2k rows, behind it on an H100 hold-out, so not the causal default: ``capabilities.GLUON_AUTO``). At 128 x 128
#:   it had been within 2 % of the TMA prefill. Shared
#:   memory (256·d + 2·4·64·d)·2 bytes = 96 KiB.
GLUON_TILES: dict[int, TileChoice] = {
    64: TileChoice(256, 64, 20, 4, warp_specialize=True, programs_per_sm=1),
    128: TileChoice(128, 128, 12, 2, warp_specialize=True, programs_per_sm=1),
}


def gluon_tiles(head_dim: int) -> TileChoice:
    """The Gluon prefill's one configuration at HEAD_DIM (:data:`GLUON_TILES`).

    Raises:
        IomodelError: HEAD_DIM has none (the Gluon prefill runs
            :data:`iomodel.schedule.capabilities.GLUON_HEAD_DIMS`).
    """
    if head_dim not in GLUON_TILES:
        raise IomodelError(f"path 'prefill-gluon' runs HEAD_DIM {' or '.join(map(str, sorted(GLUON_TILES)))}, got "
                           f"{head_dim}: use path='prefill-tma' (or None)")
    return GLUON_TILES[head_dim]


#: The :class:`KernelConfig` fields the Gluon prefill fixes to its one configuration (:data:`GLUON_TILES`): the
#: launcher refuses a given config that differs in any (``kernels.flash_attention``), and the worksheet models tiles
#: that differ on ``prefill-tma`` (``iomodel.report.worksheet``), both through :func:`gluon_config_mismatch`.
GLUON_FIXED_FIELDS = ("block_m", "block_n", "num_warps", "num_stages", "warp_specialize", "num_splits",
                      "heads_per_program")


def gluon_config_mismatch(head_dim: int, given: dict[str, Any]) -> list[str]:
    """The fields of ``given`` (a :class:`KernelConfig` field -> its value; None or absent: not given) that differ
    from the Gluon prefill's one configuration at HEAD_DIM (:data:`GLUON_FIXED_FIELDS`, in that order).

    >>> gluon_config_mismatch(128, {"block_m": 128, "block_n": 64, "num_stages": None})
    ['block_n']

    Raises:
        IomodelError: HEAD_DIM has no Gluon configuration (:func:`gluon_tiles`); a field outside
            :data:`GLUON_FIXED_FIELDS`.
    """
    unknown = sorted(set(given) - set(GLUON_FIXED_FIELDS))
    if unknown:
        raise IomodelError(f"the Gluon prefill fixes {', '.join(GLUON_FIXED_FIELDS)}; got {', '.join(unknown)}")
    want = gluon_tiles(head_dim).config("prefill-gluon")
    return [f for f in GLUON_FIXED_FIELDS if given.get(f) is not None and given[f] != getattr(want, f)]


def _by_head_dim(table: dict[int, list[TileChoice]], head_dim: int) -> list[TileChoice]:
    d = head_dim_padded(head_dim)
    key = min((k for k in table if k >= d), default=max(table))
    return list(table[key])


def prefill_candidates(head_dim: int, dtype: str, causal: bool, path: str) -> list[TileChoice]:
    """Autotune candidates of the prefill kernel for one shape class.

    Args:
        head_dim: HEAD_DIM (d), elements.
        dtype: ``fp16``, ``bf16`` or ``fp32``.
        causal: whether the causal mask is applied.
        path: ``prefill`` (pointer loads), ``prefill-tma`` (tensor descriptors, sm_90) or
            ``prefill-gluon`` (one configuration per HEAD_DIM, :data:`GLUON_TILES`, never autotuned).

    Returns:
        Candidate tiles, best first: the measured list of :data:`_MEASURED_TMA` where the
        shape class has one, else the per-HEAD_DIM table. fp32 (exact ``ieee`` dots on CUDA
        cores) has its own small tiles. Causal keeps BLOCK_N <= BLOCK_M (the diagonal then
        spans at most two K/V blocks per tile) and adds a ``tile_order="reverse"`` candidate.
    """
    if dtype == "fp32":
        return _by_head_dim(_FP32_CANDIDATES, head_dim)
    if path == "prefill-gluon":
        return [replace(gluon_tiles(head_dim), tile_order="reverse" if causal else "forward")]
    if path == "prefill-tma" and (head_dim_padded(head_dim), causal) in _MEASURED_TMA:
        return list(_MEASURED_TMA[(head_dim_padded(head_dim), causal)])
    table = _TMA_CANDIDATES if path == "prefill-tma" else _POINTER_CANDIDATES
    cands = _by_head_dim(table, head_dim)
    if causal:
        cands = [c for c in cands if c.block_n <= c.block_m] or cands
        # the first candidate in the reverse query-tile order too (heaviest causal tiles first)
        cands.append(replace(cands[0], tile_order="reverse"))
    return cands


def prefill_default(head_dim: int, dtype: str, causal: bool, path: str) -> TileChoice:
    """The prefill tiles run without autotuning: the first candidate of :func:`prefill_candidates`."""
    return prefill_candidates(head_dim, dtype, causal, path)[0]


def seqlen_bucket(seqlen: int) -> int:
    """Autotune key bucket of a sequence length: next power of two, clamped to [64, 8192].

    Tile preferences change little beyond 8k (every program runs a long K/V loop), so
    longer sequences share the 8192 bucket.
    """
    return min(max(next_pow2(seqlen), 64), 8192)


# ----------------------------------------------------------------------------------
# Decode (split-KV), docs/traffic-contract.md "Decode (split-KV), N_q <= 16"
# ----------------------------------------------------------------------------------
#: Each split covers at least this many BLOCK_N blocks (the per-split Q load, partial store and
#: merge stay small next to the K/V bytes). 8, not the 4 of issue 3: on the H200 a B = 1, 8k-key
#: decode ran 22.4 µs with 16 splits of 8 blocks against 26.6 µs with 32 of 4 (fused merge,
#: device time; receipts/decode-tune-h200-2026-12-01.json, calibration).
DECODE_MIN_BLOCKS_PER_SPLIT = 8
#: Upper bound on num_splits (partial buffers and the combine loop stay small).
DECODE_MAX_SPLITS = 256


def decode_block_n(head_dim: int, interpreter: bool = False) -> int:
    """BLOCK_N of the decode loop: 16 in the interpreter, else 64 (HEAD_DIM > 128: 32).

    K and V tiles of BLOCK_N x HEAD_DIM stay <= 32 KiB (fp16) per stage so 3-4 stages fit
    next to each other in shared memory.
    """
    if interpreter:
        return INTERPRETER_DECODE_BLOCK_N
    return 32 if head_dim_padded(head_dim) > 128 else 64


def decode_num_splits(
    programs_per_split: int,
    seqlen_k: int,
    block_n: int,
    num_sms: int,
    programs_per_sm: int,
    min_blocks_per_split: int = DECODE_MIN_BLOCKS_PER_SPLIT,
) -> int:
    """num_splits so that the decode grid fills one round of resident programs, no more.

    ``target = max(1, ⌊programs_per_sm · num_sms / programs_per_split⌋)``: the most splits whose
    programs all run at once (one round, no tail of a second, part-filled round), clamped to
    ``⌊cdiv(seqlen_k, block_n) / min_blocks_per_split⌋`` and :data:`DECODE_MAX_SPLITS`, then
    recomputed from the split length :func:`iomodel.schedule.tiles.decode_split_len` so that no
    split is empty. Source (a calibration, not a model of why): on the H200
    (receipts/decode-tune-h200-2026-12-01.json, B 1..16, H 32 / H_kv 8, d 128, bf16, 8 shapes,
    every split count side by side) the grid of one round (256 programs on 132 SMs × 2) was the
    fastest or within 2 % of it on 7 of 8 shapes, while 1.5-2 rounds (416-512 programs, the former
    rule of ~3 waves of the SM count) were 10-20 % slower than one round.

    Args:
        programs_per_split: B * H_kv * (G / P), decode programs per split.
        seqlen_k: keys in the KV cache.
        block_n: BLOCK_N.
        num_sms: streaming multiprocessors of the device.
        programs_per_sm: decode programs one SM holds at once
            (:func:`iomodel.schedule.grid.estimate_programs_per_sm` of the decode tiles).
        min_blocks_per_split: each split keeps at least this many BLOCK_N blocks.

    Returns:
        The number of non-empty splits (>= 1).

    >>> decode_num_splits(128, 8192, 64, 132, 2)  # B 16, H_kv 8, one program per group: 264 // 128
    2
    >>> decode_num_splits(8, 8192, 64, 132, 2)  # B 1: 33 by the round, 128 blocks // 8 = 16 by length
    16
    """
    target = max(1, (programs_per_sm * num_sms) // programs_per_split)
    max_by_len = max(1, cdiv(seqlen_k, block_n) // min_blocks_per_split)
    splits = max(1, min(target, max_by_len, DECODE_MAX_SPLITS))
    return cdiv(seqlen_k, decode_split_len(seqlen_k, splits, block_n))


def combine_block_s(num_splits: int, head_dim: int) -> int:
    """Splits the combine kernel reads per step: ``min(next_pow2(num_splits), 64, max(16, 8192 // d_pad))``.

    One (BLOCK_S, d) fp32 tile per step stays <= 32 KiB (64 registers per thread at 4 warps).
    """
    return max(1, min(next_pow2(num_splits), 64, max(16, 8192 // head_dim_padded(head_dim))))


def decode_config(
    *,
    batch: int,
    heads: int,
    kv_heads: int,
    seqlen_q: int,
    seqlen_k: int,
    head_dim: int,
    num_sms: int,
    dtype: str,
    smem_per_sm: int,
    interpreter: bool = False,
    num_splits: int | None = None,
    heads_per_program: int | None = None,
    block_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    page_size: int | None = None,
) -> KernelConfig:
    """The decode (split-KV) configuration the launcher runs for one call.

    Args:
        batch, heads, kv_heads: B, H, H_kv.
        seqlen_q, seqlen_k: N_q (1..16) and N_k.
        head_dim: HEAD_DIM (d).
        num_sms: SM count (the device's; :data:`INTERPRETER_NUM_SMS` in the interpreter).
        dtype: canonical dtype name of q, k, v (its width sizes the K/V stages in shared memory).
        smem_per_sm: shared memory of one SM in bytes (the device's, ``Hardware.smem_per_sm``;
            :data:`INTERPRETER_SMEM_PER_SM` in the interpreter): with the tiles' shared memory
            (:func:`iomodel.schedule.tiles.program_sram_bytes`) it gives the programs one SM
            holds, which :func:`decode_num_splits` fills one round of; where the fused merge
            runs (K of at most :data:`FUSED_COMBINE_MAX_K_ELEMENTS` elements) on a dense cache
            at HEAD_DIM 128 a count of 17 to :data:`FUSED_CUT_MAX_RULE_SPLITS` is cut to
            :data:`FUSED_MAX_SPLITS` (the domain it was measured in; see there).
        interpreter: use the interpreter's small BLOCK_N.
        num_splits, heads_per_program, block_n, num_warps, num_stages: overrides
            (``None``: the heuristic).
        page_size: tokens per page of a paged KV cache (None: dense); BLOCK_N is then
            :func:`iomodel.schedule.tiles.paged_block_n` of the heuristic's, and ``seqlen_k``
            is the table's capacity ``max_pages * page_size`` (what the split length covers).

    Returns:
        A :class:`KernelConfig` with ``path="decode-split-kv"``.
    """
    group = heads // kv_heads
    p = heads_per_program or decode_heads_per_program(group, seqlen_q)
    bn = block_n or paged_block_n(decode_block_n(head_dim, interpreter), page_size)
    bm = decode_block_m(p, seqlen_q)
    warps = num_warps or 4
    stages = num_stages or (1 if interpreter else 3)
    if num_splits is None:
        per_sm = estimate_programs_per_sm(
            program_sram_bytes(bm, bn, stages, head_dim_padded(head_dim), dtype_width(dtype)), warps, smem_per_sm)
        num_splits = decode_num_splits(batch * kv_heads * (group // p), seqlen_k, bn, num_sms, per_sm)
        if (page_size is None and head_dim_padded(head_dim) == FUSED_CUT_HEAD_DIM
                and FUSED_MAX_SPLITS < num_splits <= FUSED_CUT_MAX_RULE_SPLITS
                and batch * seqlen_k * kv_heads * head_dim <= FUSED_COMBINE_MAX_K_ELEMENTS):
            num_splits = cdiv(seqlen_k, decode_split_len(seqlen_k, FUSED_MAX_SPLITS, bn))  # fused: the shorter merge
    return KernelConfig(
        block_m=bm,
        block_n=bn,
        num_warps=warps,
        num_stages=stages,
        path="decode-split-kv",
        num_splits=num_splits,
        heads_per_program=p,
        fused_combine=(num_splits <= FUSED_COMBINE_MAX_SPLITS
                       or batch * seqlen_k * kv_heads * head_dim <= FUSED_COMBINE_MAX_K_ELEMENTS),
    )


#: The fused split-KV merge (one launch) is used while K holds at most this many elements
#: (B·N_k·H_kv·HEAD_DIM; 2^25 = 64 MiB of K in bf16, 128 MiB of K and V); larger decodes run the
#: separate combine kernel. Source: receipts/host-overhead-h200-2026-12-01-c.json (H200, plain
#: calls, both designs side by side in one run, H = 32, H_kv = 8, d = 128, bf16): up to 32k cached
#: tokens the fused call was as fast or faster (5 of 6 rows faster by 10-20 µs: one launch fewer),
#: at 64k tokens the two-launch call was faster on 4 of 4 rows (71-83 µs against 84-87 µs: the
#: fused kernel's GPU time is 7-13 µs longer), beyond that they tie within 1 %. A calibration, not
#: a validated model of why.
FUSED_COMBINE_MAX_K_ELEMENTS = 1 << 25
#: ... and, whatever the size, while num_splits is at most this: the last program of a group then
#: reads at most 8 partials. Source: receipts/decode-tune-h200-2026-12-01.json (H200, device time,
#: both designs at every split count side by side): with S <= 8 the fused kernel was as fast or
#: faster on 6 of 7 (shape, S) pairs (B 4..16, up to 1.3 µs slower once), at S = 13-14 mixed, at
#: S >= 16 the combine kernel faster on every pair (by 1.8-33 µs). A calibration, not a model.
FUSED_COMBINE_MAX_SPLITS = 8
#: Most splits of a fused split-KV decode whose split count the rule chooses: its last program
#: merges the partials one after another, so more splits lengthen that chain; above it the rule's
#: count is cut to this (one round of programs is no longer filled). Source (a calibration, not a
#: model): receipts/decode-tune-split-calib-h200-2026-12-03.json (H200, device time, split counts
#: 8-64 side by side on 12 B 1-3 shapes between the bench's lengths, H 32 / H_kv 8, HEAD_DIM 128,
#: bf16): at B 1 the fused design ran 16 splits in 27.9 µs against 29.7 with the rule's 24 (12k
#: keys) and 42.9 against 46.0 with its 32 (24k keys); 12 and 20 splits were slower than 16 on
#: both. Applied only inside what was measured: a dense cache, HEAD_DIM padded to
#: :data:`FUSED_CUT_HEAD_DIM`, a rule count of at most :data:`FUSED_CUT_MAX_RULE_SPLITS`; elsewhere
#: (HEAD_DIM 64, caches of 1-2 KV heads whose rule gives 64-256 splits, paged caches) the rule's
#: count stands.
FUSED_MAX_SPLITS = 16
#: The padded HEAD_DIM of the cut's calibration (:data:`FUSED_MAX_SPLITS`).
FUSED_CUT_HEAD_DIM = 128
#: The largest rule count the cut's calibration measured (32 and 33 splits at B 1).
FUSED_CUT_MAX_RULE_SPLITS = 33
#: Software-pipeline stages of the fused split-KV decode's merge loop (``_merge_partials``,
#: ``tl.range(..., num_stages=FUSED_MERGE_STAGES)``; 1: not pipelined). 2, 3 and 4 gained nothing
#: on 23 decode shapes (receipts/decode-merge-stages-probe-h200-2026-12-03.json,
#: benchmarks/gpu_decode_merge_probe.py, which switches it).
FUSED_MERGE_STAGES = 1


__all__ = [
    "DECODE_MIN_BLOCKS_PER_SPLIT",
    "FUSED_COMBINE_MAX_K_ELEMENTS",
    "FUSED_COMBINE_MAX_SPLITS",
    "FUSED_CUT_HEAD_DIM",
    "FUSED_CUT_MAX_RULE_SPLITS",
    "FUSED_MAX_SPLITS",
    "FUSED_MERGE_STAGES",
    "INTERPRETER_NUM_SMS",
    "INTERPRETER_SMEM_PER_SM",
    "INTERPRETER_PREFILL",
    "KernelConfig",
    "TILE_ORDERS",
    "TileChoice",
    "combine_block_s",
    "decode_block_n",
    "decode_config",
    "decode_num_splits",
    "prefill_candidates",
    "prefill_default",
    "seqlen_bucket",
    "BackwardConfig",
    "DKDV_MIN_PROGRAMS_PER_SM",
    "GPU_BACKWARD",
    "GPU_BACKWARD_FP32",
    "INTERPRETER_BACKWARD",
    "backward_config",
    "dkdv_group_splits",
    "dkdv_order_for",
]


# ----------------------------------------------------------------------------------
# Backward tiles (kernels/backward.py)
# ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackwardConfig:
    """Tiles of the three backward launches (elements; powers of two >= 16).

    ``block_m``/``block_n``: query and key rows per tile of the K/V-stationary dK/dV kernel
    (BLOCK_N keys stay in SRAM, BLOCK_M query rows stream); ``dq_block_m``/``dq_block_n``:
    the Q-stationary dQ kernel; ``preprocess_block_m``: rows per D program.
    ``group_splits`` S: slices of each GQA group the dK/dV grid's third axis runs (each
    program handles ⌊(s+1)·G/S⌋ − ⌊s·G/S⌋ of the G query heads, at most ⌈G/S⌉), 1 to G; S > 1
    writes fp32 partials that ``_bwd_reduce_dkdv`` sums (``docs/traffic-contract.md``);
    0: chosen at launch by :func:`dkdv_group_splits` (:meth:`resolve`). ``dkdv_order``: the
    GQA dK/dV program's loop over its (query tile, group head) pairs, ``heads-outer`` or
    ``tiles-descending`` (:data:`iomodel.spec.layer.DKDV_ORDERS`), or ``auto`` (chosen per launch
    by :func:`dkdv_order_for`); it runs where the program loops over heads (G > 1) without a
    sliding window, and :meth:`resolve` sets ``heads-outer`` elsewhere (what ran, as
    ``return_config`` reports it). ``dq_tile_order``: the dQ kernel's query tiles of a head first to
    last (``forward``, program i takes tile i) or from the last one down (``reverse``: the longest
    causal tile first; :data:`CAUSAL_DQ_TILE_ORDER` for causal steps); the same programs and bytes.
    ``dkdv_kernel``: the dK/dV launch's kernel, ``triton`` (``_bwd_dkdv`` / ``_bwd_dkdv_tma`` with these
    tiles) or ``gluon`` (``kernels/gluon_backward.py``: the same grid, loop order and bytes in its own
    tiles, :data:`GLUON_DKDV_TILES`, which :meth:`resolve` puts in place of ``block_m``, ``block_n``,
    ``num_warps`` and ``num_stages``); ``gluon`` applies where
    :func:`iomodel.schedule.capabilities.gluon_dkdv_refusal` finds nothing (the launcher turns it to
    ``triton`` elsewhere, and ``return_config`` says which ran).
    """

    # tile defaults: the one home of the backward tiles is iomodel.spec.Tiling (the traffic model's input)
    block_m: int = Tiling.bwd_block_m  # dK/dV kernel: query rows streamed per step
    block_n: int = Tiling.bwd_block_n  # dK/dV kernel: key rows a program owns
    dq_block_m: int = Tiling.dq_block_m  # dQ kernel: query rows a program owns
    dq_block_n: int = Tiling.dq_block_n  # dQ kernel: key rows streamed per step
    preprocess_block_m: int = Tiling.preprocess_block_m  # D = rowsum(dO ∘ O): rows per program
    num_warps: int = 4  # dK/dV kernel
    num_stages: int = 3  # dK/dV kernel: software-pipelining depth of the Q/dO loads
    dq_num_warps: int = 4
    dq_num_stages: int = 3
    atomic_dq: bool = False  # dQ by fp32 atomics inside the dK/dV kernel instead of the dQ kernel
    group_splits: int = 1  # dK/dV kernel: slices S of each GQA group (grid axis 2); 0 = chosen at launch
    tma: bool = False  # sm_90: Q, dO, K, V through tensor descriptors (same tiles and bytes); no window
    mask_split: bool = False  # TMA dK/dV, MHA causal: only the query tiles crossing the diagonal take the mask
    fused_launch: bool = False  # TMA: dK/dV and dQ programs in one launch (needs num_warps == dq_num_warps)
    dkdv_order: str = "heads-outer"  # dK/dV GQA loop over (query tile, head) pairs: DKDV_ORDERS, or "auto"
    dq_tile_order: str = "forward"  # dQ kernel: query tiles of a head from the first (forward) or the last (reverse)
    dkdv_kernel: str = "triton"  # dK/dV launch: "triton", or "gluon" (sm_90, HEAD_DIM 128: GLUON_DKDV_TILES)

    def to_dict(self) -> dict[str, int]:
        return dict(self.__dict__)

    def resolve(self, batch: int, kv_heads: int, group: int, seqlen_k: int, num_sms: int,
                windowed: bool = False, *, seqlen_q: int | None = None, head_dim: int | None = None,
                width: int | None = None, l2_bytes: int | None = None) -> "BackwardConfig":
        """This config with ``group_splits`` fixed for one launch: :func:`dkdv_group_splits` of
        the dK/dV grid ``cdiv(seqlen_k, block_n)·batch·kv_heads`` programs when it is 0, else as
        given; and ``dkdv_order`` as it runs: ``heads-outer`` for MHA (G = 1: one head per
        program) and under a sliding window (``windowed``: every key tile's query range has about
        the window's length, so the heads-outer loop keeps neighbouring programs one key tile apart);
        ``dkdv_kernel`` ``gluon`` as it runs: :data:`GLUON_DKDV_TILES` in place of the dK/dV tiles (``mask_split`` off: the Gluon kernel masks the diagonal's tiles by itself) where
        :meth:`gluon_refusal` finds nothing, else ``triton`` with the config's own tiles (the launcher has already
        turned it to ``triton`` where the device or the tensors refuse it).

        Args:
            batch, kv_heads, group (G = H / H_kv), seqlen_k (tokens): the layer;
            num_sms: SMs of the device (:data:`INTERPRETER_NUM_SMS` in the interpreter);
            windowed: the step runs under a sliding window;
            seqlen_q, head_dim, width, l2_bytes: what ``dkdv_order="auto"`` is chosen from
                (:func:`dkdv_order_for`; query rows, elements, element bytes, the device's L2 bytes); head_dim and
                width also decide ``dkdv_kernel="gluon"`` (:meth:`gluon_refusal`; without them a ``gluon`` config
                resolves to ``triton`` with its own tiles).

        Raises:
            IomodelError: ``group_splits`` negative, not an integer, or above G; a switch
                (``atomic_dq``, ``tma``, ``mask_split``, ``fused_launch``) that is not a bool;
                ``fused_launch`` with ``num_warps`` != ``dq_num_warps``; an unknown ``dq_tile_order``;
                an unknown ``dkdv_order``, or
                ``auto`` without seqlen_q, head_dim, width and l2_bytes.
        """
        from iomodel.spec.layer import DKDV_ORDERS

        if self.dkdv_order not in DKDV_ORDERS + ("auto",):
            raise IomodelError(f"BackwardConfig.dkdv_order must be one of {', '.join(DKDV_ORDERS)} or auto, got "
                               f"{self.dkdv_order!r}: pick one of them")
        if self.dq_tile_order not in TILE_ORDERS:
            raise IomodelError(f"BackwardConfig.dq_tile_order must be one of {', '.join(TILE_ORDERS)}, got "
                               f"{self.dq_tile_order!r}: pick one of them")
        if self.dkdv_kernel not in DKDV_KERNELS:
            raise IomodelError(f"BackwardConfig.dkdv_kernel must be one of {', '.join(DKDV_KERNELS)}, got "
                               f"{self.dkdv_kernel!r}: pick one of them")
        for name in ("atomic_dq", "tma", "mask_split", "fused_launch"):
            if not isinstance(getattr(self, name), bool):
                raise IomodelError(f"BackwardConfig.{name} must be True or False, got {getattr(self, name)!r}: pass a bool")
        if self.fused_launch and self.num_warps != self.dq_num_warps:
            raise IomodelError(f"fused_launch runs the dK/dV and dQ programs in one launch, so num_warps "
                               f"({self.num_warps}) must equal dq_num_warps ({self.dq_num_warps}): set them equal "
                               "or pass fused_launch=False")
        cfg = self
        if cfg.dkdv_kernel == "gluon":  # the Gluon launch's own tiles where it runs, else the config's Triton tiles
            cfg = (replace(cfg, dkdv_kernel="triton") if self.gluon_refusal(head_dim, width, windowed) is not None else
                   replace(cfg, block_m=GLUON_DKDV_TILES.block_m, block_n=GLUON_DKDV_TILES.block_n,
                           num_warps=GLUON_DKDV_TILES.num_warps, num_stages=GLUON_DKDV_TILES.num_stages,
                           mask_split=False))
        S = self.group_splits
        if isinstance(S, bool) or not isinstance(S, int) or S < 0:
            raise IomodelError(f"group_splits must be a whole number 0..G (0 chooses), got {S!r}: pass e.g. 0 or 1")
        if S > group:
            raise IomodelError(f"group_splits={S} exceeds the GQA group H/H_kv={group} (a slice would hold no "
                               f"query head): use 1..{group}, or 0 to choose")
        if S == 0:
            S = dkdv_group_splits(cdiv(seqlen_k, cfg.block_n) * batch * kv_heads, num_sms, group)
        order = self.dkdv_order if group > 1 and not windowed else "heads-outer"
        if order == "auto":
            if None in (seqlen_q, head_dim, width, l2_bytes):
                raise IomodelError("dkdv_order='auto' is chosen per launch: pass seqlen_q, head_dim, width and "
                                   "l2_bytes to BackwardConfig.resolve, or set heads-outer or tiles-descending")
            order = dkdv_order_for(group, S, seqlen_q, head_dim, width, l2_bytes)
        return replace(cfg, group_splits=S, dkdv_order=order)

    def gluon_refusal(self, head_dim: int | None, width: int | None, windowed: bool = False,
                      sm_major: int | None = TMA_SM_MAJOR) -> str | None:
        """Why this config's dK/dV launch cannot be the Gluon kernel for a layer of ``head_dim`` (elements) and element
        ``width`` (bytes: 2 is fp16/bf16) on a GPU of compute capability major ``sm_major``, or None: the config's
        ``tma``, ``atomic_dq`` and ``fused_launch`` and the layer, by
        :func:`iomodel.schedule.capabilities.gluon_dkdv_refusal` (the one rule :meth:`resolve` and the launcher
        apply, the ``IOMODEL_GLUON`` switch with it; the launcher adds the tensors' alignment and Triton's Gluon
        dialect).
        An unknown ``head_dim`` or ``width`` refuses (nothing to check them against)."""
        if head_dim is None or width is None:
            return "the Gluon dK/dV launch is chosen per layer: pass head_dim and width to BackwardConfig.resolve"
        return gluon_dkdv_refusal("bf16" if width == 2 else f"a {width}-byte dtype", head_dim, self.tma, windowed,
                                  sm_major, self.atomic_dq, self.fused_launch)

    def tiling(self, base: Tiling | None = None) -> Tiling:
        """These tiles as the traffic model's :class:`iomodel.spec.Tiling` (its backward
        fields; the forward fields from ``base``, default ``Tiling()``), so the model is
        evaluated on exactly what ran. ``atomic_dq`` is not a tile: evaluate the model with
        ``dq_mode="atomic"`` for it (``docs/traffic-contract.md``). ``group_splits`` becomes
        ``Tiling.bwd_group_splits``.

        Raises:
            IomodelError: ``group_splits`` is 0 (chosen at launch): resolve it first.
        """
        if self.group_splits == 0 or self.dkdv_order == "auto":
            raise IomodelError("group_splits=0 and dkdv_order='auto' are chosen at launch: model the config the "
                               "launcher returned (return_config=True) or BackwardConfig.resolve(...)")
        return replace(base or Tiling(), bwd_block_m=self.block_m, bwd_block_n=self.block_n,
                       dq_block_m=self.dq_block_m, dq_block_n=self.dq_block_n,
                       preprocess_block_m=self.preprocess_block_m, bwd_group_splits=self.group_splits,
                       bwd_dkdv_order=self.dkdv_order, dq_tile_order=self.dq_tile_order, bwd_dkdv_kernel=self.dkdv_kernel)


#: Tiles of the interpreter (CPU) runs: small, so CI covers multi-tile loops and ragged tails.
INTERPRETER_BACKWARD = BackwardConfig(block_m=16, block_n=32, dq_block_m=32, dq_block_n=16,
                                      preprocess_block_m=32, num_warps=4, num_stages=1)


#: Programs per SM the dK/dV grid should reach: below it the GQA group is split over a third
#: grid axis (:func:`dkdv_group_splits`). The dK/dV kernel runs 1-3 programs per SM on the H200
#: (receipts/ncu-h200-train1-2026-12-01.json), so 2 keeps every SM busy and leaves a second
#: program to hide the first one's latency. Not re-tuned for the Gluon dK/dV launch, which runs one program per SM
#: in a grid of half as many (128-key) programs, so S is about twice the Triton launch's; on its hold-out the four
#: split steps' fp32 partials went back to DRAM beyond the model (docs/l2-calibration.md, "The Gluon dK/dV launch").
DKDV_MIN_PROGRAMS_PER_SM = 2


def dkdv_group_splits(programs: int, num_sms: int, group: int) -> int:
    """Group slices S of the dK/dV kernel: the smallest S in 1..G for which ``programs·S >=
    DKDV_MIN_PROGRAMS_PER_SM·num_sms`` (G if none), so S = 1 (the unsplit kernel) whenever
    the grid already fills the GPU and for MHA (G = 1).

    Args:
        programs: programs of the unsplit grid, ``cdiv(N_k, block_n)·B·H_kv``.
        num_sms: SMs of the device; group: G = H / H_kv.

    Returns:
        S (a whole number, 1 <= S <= G).

    Raises:
        IomodelError: an argument that is not a positive integer.

    >>> dkdv_group_splits(16, 132, 71)  # Falcon-7B, N = 2048, BLOCK_N 128: 16 x 17 = 272 >= 264
    17
    >>> dkdv_group_splits(512, 132, 8), dkdv_group_splits(16, 132, 1)
    (1, 1)
    """
    for name, v in (("programs", programs), ("num_sms", num_sms), ("group", group)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise IomodelError(f"{name} must be a positive integer, got {v!r}")
    return min(group, cdiv(DKDV_MIN_PROGRAMS_PER_SM * num_sms, programs))


def backward_config(head_dim: int, dtype: str, causal: bool, interpreter: bool = False,
                    sm_major: int | None = TMA_SM_MAJOR) -> BackwardConfig:
    """The backward tiles: the interpreter's small tiles on a CPU, else the GPU tiles of
    :data:`GPU_BACKWARD` for the padded HEAD_DIM (chosen by measurement on the H200:
    ``benchmarks/gpu_backward_tune.py``, receipts under ``receipts/``). Units: elements.
    HEAD_DIM up to the kernel's maximum (:data:`iomodel.schedule.capabilities.MAX_HEAD_DIM`).
    ``dtype`` (``fp16``, ``bf16``, ``fp32``) matters only where fp32 has its own tiles
    (:data:`GPU_BACKWARD_FP32`: the 2-byte tiles would not fit shared memory in fp32).
    The interpreter's tiles fix ``group_splits`` = 1 (tests force S > 1 through the config);
    the GPU tiles choose it at launch (``group_splits`` 0, :meth:`BackwardConfig.resolve`).
    Causal steps (GPU and interpreter) run the dK/dV order :data:`CAUSAL_DKDV_ORDER` and the dQ
    tiles longest first (:data:`CAUSAL_DQ_TILE_ORDER`). On a GPU of compute capability major
    ``sm_major`` (9: Hopper, the default; ``Hardware.compute_capability[0]``) the dK/dV launch is the
    Gluon kernel (``dkdv_kernel="gluon"``, :data:`GLUON_DKDV_TILES` once resolved) wherever
    :func:`iomodel.schedule.capabilities.gluon_dkdv_refusal` allows it for this dtype and HEAD_DIM
    (contiguous tensors assumed; the launcher checks the real ones).

    Raises:
        IomodelError: a HEAD_DIM wider than every backward tile set (:data:`GPU_BACKWARD`), one line.
    """
    if interpreter:
        return replace(INTERPRETER_BACKWARD, **_mask_orders(causal))
    d = max(64, head_dim_padded(head_dim))  # HEAD_DIM 16..64 run the 64 tiles
    widest = max(k for k, _ in GPU_BACKWARD)
    if d > widest:
        raise IomodelError(f"HEAD_DIM {head_dim} has no backward tiles: the bundled backward kernels run HEAD_DIM <= "
                           f"{widest} (kernels/heuristics.py GPU_BACKWARD): use --pass fwd for this layer, or HEAD_DIM "
                           f"<= {widest}")
    key = (min(k for k, _ in GPU_BACKWARD if k >= d), bool(causal))
    if dtype == "fp32" and key in GPU_BACKWARD_FP32:
        return GPU_BACKWARD_FP32[key]
    if gluon_dkdv_refusal(dtype, head_dim, sm_major=sm_major) is None:
        return replace(GPU_BACKWARD[key], dkdv_kernel="gluon")
    return GPU_BACKWARD[key]

#: The one configuration of the Gluon dK/dV launch (``BackwardConfig.dkdv_kernel = "gluon"``,
#: ``kernels/gluon_backward.py``): BLOCK_N = 128 keys per program (two consumer warpgroups of 64),
#: BLOCK_M = 64 query rows per step in a ring of 2 stages, 12 warps (4 + 4 + the producer's warp padded to 4).
#: The tiles of the faster variant of benchmarks/gpu_gluon_bwd_probe.py (at commit 54fd506; the probe became this
#: launch): receipts/gluon-bwd-probe-h200-2026-12-05.json, calibration.
GLUON_DKDV_TILES = BackwardConfig(block_m=64, block_n=128, num_warps=12, num_stages=2)


def layer_backward_config(spec: Any, hardware: Any) -> BackwardConfig:
    """The backward launch the launcher resolves for ``spec`` on ``hardware`` (contiguous tensors assumed): the
    tiles of :func:`backward_config` for the hardware's compute capability, resolved
    (:meth:`BackwardConfig.resolve`: ``group_splits`` for its SMs, ``dkdv_order`` for its L2, the Gluon
    dK/dV launch's tiles where it runs). The one place the worksheet and the L2-aware estimate take the
    backward's launch from.

    Args:
        spec: an ``iomodel.spec.LayerSpec`` (HEAD_DIM, dtype, causal, batch, heads, lengths, band).
        hardware: an ``iomodel.spec.hardware.Hardware`` (compute capability, SMs, L2 bytes).

    Raises:
        IomodelError: from :meth:`BackwardConfig.resolve`.
    """
    return backward_config(spec.head_dim, spec.dtype, spec.causal, sm_major=hardware.compute_capability[0]).resolve(
        spec.batch, spec.kv_heads, spec.group, spec.seqlen_k, hardware.num_sms, spec.band is not None,
        seqlen_q=spec.seqlen_q, head_dim=spec.head_dim, width=spec.width, l2_bytes=hardware.l2_bytes)


#: The dK/dV GQA loop order of causal steps (``BackwardConfig.dkdv_order``; non-causal steps keep
#: ``heads-outer``, under which every program already starts at query tile 0): ``auto``, chosen per
#: launch by :func:`dkdv_order_for` (2026-12-04).
CAUSAL_DKDV_ORDER = "auto"

#: The dQ kernel's query-tile order of causal steps (``BackwardConfig.dq_tile_order``; non-causal programs all
#: stream the same keys, so their order is the grid's): ``reverse``, each head's longest tile first, as the
#: forward's causal ``tile_order`` (2026-12-05). In grid order the shortest tile came first, and programs that
#: start one by one as others end started further apart each wave; on the H200 the dQ kernel of a causal step read
#: 22.75x the L2 model's bytes at 128k tokens (about one K/V stream per program) where the forward, longest
#: first, stayed within 10 % (receipts/ncu-h200-long-train-probe1-2026-12-05.json; docs/l2-calibration.md).
CAUSAL_DQ_TILE_ORDER = "reverse"


def _mask_orders(causal: bool) -> dict[str, str]:
    """The backward's loop and tile orders for a causal or non-causal step (every backward config's one home of
    them): causal steps :data:`CAUSAL_DKDV_ORDER` and :data:`CAUSAL_DQ_TILE_ORDER`; non-causal ``heads-outer``
    and ``forward``, where every program streams the same rows."""
    return ({"dkdv_order": CAUSAL_DKDV_ORDER, "dq_tile_order": CAUSAL_DQ_TILE_ORDER} if causal
            else {"dkdv_order": "heads-outer", "dq_tile_order": "forward"})


def dkdv_order_for(group: int, group_splits: int, seqlen_q: int, head_dim: int, width: int, l2_bytes: int) -> str:
    """The causal GQA dK/dV loop order ``auto`` resolves to: ``tiles-descending`` while the query
    rows one program streams (Q and dO at ``width`` bytes, LSE and Delta fp32: 2·d·s + 8 bytes a
    row, over the ⌈G/S⌉ heads of its slice and ``seqlen_q`` rows) fit the effective L2
    (:data:`iomodel.cache.params.DEFAULT_L2_FRACTION` of ``l2_bytes``), else ``heads-outer``.

    Why (receipts/ncu-h200-train-order-calib1-2026-12-04.json against hold-outs 3-6, calibration):
    programs that start together in the descending order read each (tile, head) at the same step,
    which cut the dK/dV kernel's DRAM reads 1.4-2.5x where the slice's rows fit (Llama-2-70B at 6k:
    565 -> 226 MiB; Falcon-7B at 6k, S = 6: 226 -> 113 MiB); but programs that start later, one by
    one as earlier ones end, start at the last tile again and trail each other, and where the
    slice's rows do not fit L2 every trailing read misses (Llama-2-70B at 16k, 64 MiB of rows:
    6.2 -> 9.3 GiB; Llama-3-8B at 16k, 32.5 MiB: 388 -> 584 MiB), while heads-outer keeps one head's
    rows (a G-th of them) between trailing programs.

    Args:
        group: G = H / H_kv; group_splits: S (resolved, >= 1); seqlen_q: query rows (tokens);
        head_dim: d (elements); width: element bytes of q; l2_bytes: the device's L2 (bytes).

    Returns:
        ``tiles-descending`` or ``heads-outer``.
    """
    from iomodel.cache.params import DEFAULT_L2_FRACTION
    from iomodel.spec import FP32_WIDTH, LSE_WIDTH

    rows = cdiv(group, group_splits) * seqlen_q * (2 * head_dim * width + LSE_WIDTH + FP32_WIDTH)
    return "tiles-descending" if rows <= DEFAULT_L2_FRACTION * l2_bytes else "heads-outer"

#: GPU tiles per (padded HEAD_DIM, causal), the fastest of ``benchmarks/gpu_backward_tune.py``
#: on the H200 (B = 4, H = 16, N = 4096, bf16; receipts/bwd-tune-h200-2026-12-01.json): dK/dV
#: tiles first, then dQ tiles on the winner. fp32 atomics for dQ lost on every shape (+13 to
#: +47 %), so dQ is the separate kernel. HEAD_DIM 256 (2-byte dtypes): the fastest spill-free tiles of
#: ``benchmarks/gpu_bwd_d256_probe.py`` (receipts/bwd-d256-probe{,-r2,-r3}-h200-2026-12-03.json, Gemma-2's
#: layers and two more; the first, untuned tiles spilled 132 and 316 B per thread inside the dK/dV and
#: dQ loops, the L2 writes hold-out 6 measured): dK/dV 32x64 in two stages (1.58-1.77x the first
#: tiles' backward with round 2's base dQ tiles), dQ 128x32 in two stages (2.18-2.48x with round 1's
#: best dK/dV tiles), one kernel varied at a time; round 3 timed the two together: 2.6-3.0x the first
#: tiles' backward; fp32 keeps the first tiles (``GPU_BACKWARD_FP32``).
#: ``group_splits`` 0: the GQA group split is chosen per launch (:func:`dkdv_group_splits`).
#: ``tma``: Q, dO, K, V through tensor descriptors where the GPU and inputs allow it (sm_90,
#: fp16/bf16, a power-of-two HEAD_DIM, no window; same tiles and bytes) and ``mask_split`` for causal: on the
#: H200 the backward alone ran 0.98-1.10x the pointer kernels on the 20 speed rows, and
#: forward+backward 0.99-1.07x (benchmarks/gpu_bwd_tma_loads.py, receipts
#: bwd-tma-loads{,-r2}-h200-2026-12-02.json, columns ``tma``/``tma-ms``). ``fused_launch`` (one
#: launch of the dK/dV and dQ programs), best tiles per class, ran -2 % to +6 % forward+backward
#: against it on HEAD_DIM 128 and causal 64 in round 2 (slower at 1k causal) and stays off: the
#: L2 model has no estimate of the fused launch yet.
GPU_BACKWARD: dict[tuple[int, bool], BackwardConfig] = {
    k: replace(c, group_splits=0, tma=True, mask_split=k[1], **_mask_orders(k[1]))
    for k, c in {
    (64, False): BackwardConfig(block_m=32, block_n=128, num_warps=4, num_stages=4,
                                dq_block_m=128, dq_block_n=64, dq_num_warps=8, dq_num_stages=3),
    (64, True): BackwardConfig(block_m=32, block_n=128, num_warps=4, num_stages=3,
                               dq_block_m=64, dq_block_n=64, dq_num_warps=4, dq_num_stages=3),
    (128, False): BackwardConfig(block_m=64, block_n=128, num_warps=8, num_stages=3,
                                 dq_block_m=128, dq_block_n=64, dq_num_warps=8, dq_num_stages=3),
    (128, True): BackwardConfig(block_m=32, block_n=64, num_warps=4, num_stages=3,
                                dq_block_m=128, dq_block_n=64, dq_num_warps=8, dq_num_stages=3),
    **{(256, causal): BackwardConfig(block_m=32, block_n=64, num_warps=8, num_stages=2, dq_block_m=128,
                                     dq_block_n=32, dq_num_warps=8, dq_num_stages=2) for causal in (False, True)},
}.items()}
#: fp32 (4-byte elements) overrides of :data:`GPU_BACKWARD` where its tiles do not fit shared memory
#: in fp32: at padded HEAD_DIM 256 the dQ tiles above need 336 KiB (sm_90 has 227 KiB per block) and
#: the dK/dV tiles spill, so fp32 keeps the first, untuned 256 tiles (164 and 160 KiB, no spills; the
#: pointer kernels, ``kernels.compile_check.compile_backward``).
GPU_BACKWARD_FP32: dict[tuple[int, bool], BackwardConfig] = {
    (256, causal): replace(BackwardConfig(block_m=16, block_n=64, num_warps=8, num_stages=1, dq_block_m=64,
                                          dq_block_n=16, dq_num_warps=8, dq_num_stages=1),
                           group_splits=0, tma=True, mask_split=causal,
                           **_mask_orders(causal)) for causal in (False, True)}
