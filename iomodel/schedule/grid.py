"""The bundled kernel's grid in time: which programs run together (waves) and what each reads.

The schedule the L2 model (:mod:`iomodel.cache`) simulates, written from the traffic contract
(``docs/traffic-contract.md``): programs run in grid order, axis 0 fastest, W =
num_SMs × programs_per_SM at once; each wave is a list of :class:`Access` (which tensor
bytes the wave reads or writes, in time order). Units: rows for the per-program counts,
bytes for the accesses and the requested totals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iomodel.errors import IomodelError
from iomodel.schedule.tiles import decode_split_len
from iomodel.spec import LSE_WIDTH, LayerSpec, Tiling, cdiv

#: Upper bound on programs one Hopper SM runs at once (CUDA C Programming Guide, compute
#: capability 9.0: 32 resident blocks, 64 resident warps per SM).
MAX_BLOCKS_PER_SM = 32
MAX_WARPS_PER_SM = 64


def estimate_programs_per_sm(smem_per_program: int, num_warps: int, smem_per_sm: int) -> int:
    """Programs one SM can hold, from shared memory and warps only (registers unknown).

    ``min(smem_per_sm // smem_per_program, 64 // num_warps, 32)``, at least 1 (CUDA C
    Programming Guide, compute capability 9.0 limits). Registers can lower it further;
    prefer Nsight Compute's measured occupancy limits when a record has them.

    Args:
        smem_per_program: shared memory one program allocates (bytes; ``Tiling.sram_bytes``).
        num_warps: warps per program.
        smem_per_sm: shared memory of one SM (bytes; ``Hardware.smem_per_sm``).

    Returns:
        programs (CTAs) per SM, from 1 to :data:`MAX_BLOCKS_PER_SM`.
    """
    by_smem = smem_per_sm // max(1, smem_per_program)
    return max(1, min(by_smem, MAX_WARPS_PER_SM // max(1, num_warps), MAX_BLOCKS_PER_SM))


@dataclass(frozen=True)
class Access:
    """One touch of one item by a wave: ``read`` (may miss) or ``write`` (dirties it).

    Attributes:
        tensor: model tensor name (``Q``, ``K``, ``V``, ``O``, ``LSE``, ``O_PART`` ...).
        key: identity of the item (tensor, head, tile ...).
        nbytes: bytes touched (the item's extent needed so far).
        write: a store (True) or a load (False).
        whole: evict the item only entirely (K/V of a head); False for streamed tiles.
    """

    tensor: str
    key: Any
    nbytes: int
    write: bool = False
    whole: bool = False


def prefill_key_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows program i of a prefill head loads: ``min(N_k, ⌈hi_i/BN⌉·BN)``.

    Source: docs/traffic-contract.md, "Prefill forward" (hi_i = N_k, or under a causal mask
    clamp(min((i+1)·BM, N_q) + off, 0, N_k)).

    Args:
        spec: the layer (seqlen_q, seqlen_k, causal alignment).
        tiling: BLOCK_M and BLOCK_N.

    Returns:
        a list of T_r row counts (rows, not bytes).
    """
    n_q, n_k, bm, bn = spec.seqlen_q, spec.seqlen_k, tiling.block_m, tiling.block_n
    off = spec.causal_offset
    rows = []
    for i in range(cdiv(n_q, bm)):
        hi = n_k if not spec.causal else min(max(min((i + 1) * bm, n_q) + off, 0), n_k)
        rows.append(min(n_k, cdiv(hi, bn) * bn))
    return rows


#: Key rows per K/V chunk of the prefill simulation: a wave's programs stream their KV heads'
#: K/V side by side, block after block, so the simulation interleaves them in chunks of
#: this many key rows (rounded up to a multiple of BLOCK_N). Source: L2 model round 2, from
#: receipts/ncu-h200-2026-11-29.json (docs/l2-calibration.md, "K/V chunks").
KV_CHUNK_ROWS = 1024


def prefill_waves(spec: LayerSpec, tiling: Tiling, w: int, tile_order: str = "forward",
                  ) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the Q-stationary prefill kernel in grid order, and its requested bytes.

    Grid ``(T_r, B·H)``, linear program p = i + T_r·(b·H + h) (axis 0 fastest); program i of
    a head runs query tile i (``tile_order="forward"``) or T_r − 1 − i (``"reverse"``, the
    kernel's ``tile_order`` config field: longest causal tiles first); K/V of KV head h // G.
    Within a wave the KV heads' K and V are streamed side by side in chunks of
    :data:`KV_CHUNK_ROWS` key rows (all programs of the wave run at once, each scanning its
    keys from 0 upward, so one fetch of a chunk serves every program of the wave that needs it).

    Args:
        spec: the layer (prefill).
        tiling: BLOCK_M and BLOCK_N.
        w: programs running at once (W = num_SMs × programs_per_SM).
        tile_order: ``forward`` or ``reverse``.

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows.

    Raises:
        IomodelError: an unknown ``tile_order``.
    """
    if tile_order not in ("forward", "reverse"):
        raise IomodelError(f"tile_order {tile_order!r} is unknown: use forward or reverse")
    B, H, G = spec.batch, spec.heads, spec.group
    d, s = spec.head_dim, spec.width
    t_r = cdiv(spec.seqlen_q, tiling.block_m)
    kv_rows = prefill_key_rows(spec, tiling)
    q_rows = [min(tiling.block_m, spec.seqlen_q - i * tiling.block_m) for i in range(t_r)]
    if tile_order == "reverse":
        kv_rows, q_rows = kv_rows[::-1], q_rows[::-1]  # program i runs tile T_r-1-i
    req_r = {"Q": B * H * spec.seqlen_q * d * s, "K": B * H * sum(kv_rows) * d * s}
    req_r["V"] = req_r["K"]
    req_w = {"O": B * H * spec.seqlen_q * d * s, "LSE": B * H * spec.seqlen_q * LSE_WIDTH}
    chunk = cdiv(max(KV_CHUNK_ROWS, tiling.block_n), tiling.block_n) * tiling.block_n
    total = t_r * B * H
    waves: list[list[Access]] = []
    for p0 in range(0, total, w):
        p1 = min(total, p0 + w)
        acc: list[Access] = []
        need: dict[int, int] = {}  # kv head (b*H_kv + hk) -> K rows needed by this wave
        order: list[int] = []
        qo: list[tuple[int, int, int]] = []  # (bh, i0, i1) in program index
        for bh in range(p0 // t_r, (p1 - 1) // t_r + 1):
            i0 = max(0, p0 - bh * t_r)
            i1 = min(t_r, p1 - bh * t_r)
            b, h = divmod(bh, H)
            kv = b * spec.kv_heads + h // G
            rows = max(kv_rows[i0:i1])
            if kv not in need:
                order.append(kv)
            need[kv] = max(need.get(kv, 0), rows)
            qo.append((bh, i0, i1))
        for bh, i0, i1 in qo:
            acc.append(Access("Q", ("Q", bh, i0, tile_order), sum(q_rows[i0:i1]) * d * s))
        for c0 in range(0, max(need.values()), chunk):
            for kv in order:
                rows = min(chunk, need[kv] - c0)
                if rows > 0:
                    acc.append(Access("K", ("K", kv, c0), rows * d * s, whole=True))
                    acc.append(Access("V", ("V", kv, c0), rows * d * s, whole=True))
        for bh, i0, i1 in qo:
            acc.append(Access("O", ("O", bh, i0, tile_order), sum(q_rows[i0:i1]) * d * s, write=True))
            acc.append(Access("LSE", ("LSE", bh, i0, tile_order), sum(q_rows[i0:i1]) * LSE_WIDTH, write=True))
        waves.append(acc)
    return waves, req_r, req_w


def decode_split_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows each split of a decode program loads (rows, not bytes).

    Source: docs/traffic-contract.md, "Decode (split-KV)": split sp covers keys
    ``[sp·L, min((sp+1)·L, N_k))``, ``L = ⌈⌈N_k / num_splits⌉ / BN⌉·BN``; loads are masked to
    the split end and causal blocks whose first key >= hi = clamp(N_q + off, 0, N_k) are skipped.

    Args:
        spec: the layer (seqlen_q, seqlen_k, causal alignment).
        tiling: BLOCK_N and num_splits.

    Returns:
        a list of num_splits row counts (0 for an empty split).
    """
    n_k, bn, S = spec.seqlen_k, tiling.block_n, tiling.num_splits
    length = decode_split_len(n_k, S, bn)
    hi = n_k if not spec.causal else min(max(spec.seqlen_q + spec.causal_offset, 0), n_k)
    rows = []
    for sp in range(S):
        start, end = sp * length, min((sp + 1) * length, n_k)
        stop = min(end, hi)
        if stop <= start:
            rows.append(0)
        else:
            rows.append(min(end, start + cdiv(stop - start, bn) * bn) - start)
    return rows


def decode_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV decode kernel: grid ``(num_splits, B·H_kv·(G/P))``, split fastest.

    Program (sp, (b·H_kv + hk)·(G/P) + gp) loads the P·N_q query rows of its P heads, the
    K/V rows of split sp, and writes partial O and LSE in fp32 (num_splits > 1) or O and
    LSE directly (docs/traffic-contract.md, "Decode (split-KV)").

    Args:
        spec: the layer (decode: seqlen_q <= 16).
        tiling: BLOCK_N, num_splits and heads_per_program P (P divides G).
        w: programs running at once (W = num_SMs × programs_per_SM).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor).
    """
    B, Hk, G, P = spec.batch, spec.kv_heads, spec.group, tiling.heads_per_program
    S, d, s, n_q = tiling.num_splits, spec.head_dim, spec.width, spec.seqlen_q
    groups = G // P
    split_rows = decode_split_rows(spec, tiling)
    rows_q = P * n_q
    o_name, l_name = ("O_PART", "LSE_PART") if S > 1 else ("O", "LSE")
    o_w = 4 if S > 1 else s
    total = S * B * Hk * groups
    req_r = {"Q": total * rows_q * d * s, "K": B * Hk * groups * sum(split_rows) * d * s}
    req_r["V"] = req_r["K"]
    req_w = {o_name: total * rows_q * d * o_w, l_name: total * rows_q * LSE_WIDTH}
    waves: list[list[Access]] = []
    for p0 in range(0, total, w):
        reads_q, reads_kv, writes = [], [], []
        seen_kv = set()
        for p in range(p0, min(total, p0 + w)):
            pid, sp = divmod(p, S)
            b, rem = divmod(pid, Hk * groups)
            hk, gp = divmod(rem, groups)
            reads_q.append(Access("Q", ("Q", b, hk, gp), rows_q * d * s))
            kv = (b, hk, sp)
            if kv not in seen_kv and split_rows[sp]:
                seen_kv.add(kv)
                reads_kv.append(Access("K", ("K",) + kv, split_rows[sp] * d * s, whole=True))
                reads_kv.append(Access("V", ("V",) + kv, split_rows[sp] * d * s, whole=True))
            writes.append(Access(o_name, (o_name, pid, sp), rows_q * d * o_w, write=True))
            writes.append(Access(l_name, (l_name, pid, sp), rows_q * LSE_WIDTH, write=True))
        waves.append(reads_q + reads_kv + writes)
    return waves, req_r, req_w


def combine_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV combine kernel: grid ``(B·H,)``; program bh reads its num_splits
    partials (fp32 O and LSE) and writes O (dtype) and LSE (fp32) once.

    Args:
        spec: the layer.
        tiling: num_splits.
        w: programs running at once.

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor).
    """
    B, H, S, n_q, d, s = spec.batch, spec.heads, tiling.num_splits, spec.seqlen_q, spec.head_dim, spec.width
    total = B * H
    req_r = {"O_PART": total * S * n_q * d * 4, "LSE_PART": total * S * n_q * LSE_WIDTH}
    req_w = {"O": total * n_q * d * s, "LSE": total * n_q * LSE_WIDTH}
    waves = []
    for p0 in range(0, total, w):
        n = min(total, p0 + w) - p0
        waves.append([
            Access("O_PART", ("O_PART", p0), n * S * n_q * d * 4),
            Access("LSE_PART", ("LSE_PART", p0), n * S * n_q * LSE_WIDTH),
            Access("O", ("O", p0), n * n_q * d * s, write=True),
            Access("LSE", ("LSE", p0), n * n_q * LSE_WIDTH, write=True),
        ])
    return waves, req_r, req_w
