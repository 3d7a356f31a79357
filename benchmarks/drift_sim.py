"""Programs that drift apart: K/V DRAM reads of a causal forward when each program takes the next tile as it finishes.

Run: ``python benchmarks/drift_sim.py --preset H200 --heads 16 --kv-heads 16 --seqlen 132608 [--seqlen-q N_q]
[--no-causal] [--head-dim 128] [--block-m 128] [--block-n 128] [--programs 132] [--dtype-bytes 2]``. A diagnosis, not the model:
it prints, for the query-tile orders ``forward`` (tile 0 of a head first) and ``reverse`` (heaviest first) of a
tiles-fastest grid (B = 1), the DRAM bytes of Q, K and V (GB, 1e9 bytes) under two timings of P = ``--programs``
programs in flight:

* ``in-step``: each wave of P consecutive tiles starts together once the previous wave's longest tile is done (the
  L2 model's waves, :func:`iomodel.schedule.grid.wave_runs`);
* ``as-freed``: tile j goes to the first program to finish its last one (the hardware's dispatch of a non-persistent
  grid, or a persistent loop taking tiles from a shared counter), every key block one time unit;
* ``coupled`` (with ``--miss-cost s``): as freed, but a block read that misses takes ``1 + s`` time units, so a
  program trailing another finds its blocks in L2 and catches up (convoys). No single ``s`` fits the measured runs:
  docs/l2-calibration.md, "Programs that drift apart".

K/V blocks (BLOCK_N rows of K and V of one KV head) go through a fully associative LRU of the preset's read
capacity, as the model judges reads (a preset whose L2 was not measured, the A100, takes the H200's fraction of its
L2, and the first line says so) (:attr:`iomodel.cache.params.L2Params.read_capacity`: :data:`~iomodel.cache.params.MEASURED_L2_READ_FRACTION`
of its L2 bytes, the ``shared-read`` microbenchmark's half-miss working set, receipts named by
:data:`iomodel.cache.physical.RECEIPTS`); each miss reads the block from DRAM, Q is read once. O and LSE writes are
left out. Units: GB (1e9 bytes); about 10 s and 1 GB of memory per 8 million block reads (one simulation of 133k
tokens, 16 heads; four a run, six with --miss-cost); runs over :data:`MAX_BLOCK_READS` are refused. The dQ kernel's forward order drifts
the same way: ``benchmarks/dq_start_gap_sketch.py`` and docs/l2-calibration.md, "The dQ kernel's tile order".

Why: in the forward order a causal tile is one key block longer than the tile before it, so programs that start a
wave together finish it one step apart, the next wave two steps apart, and so on until the programs in flight sit
all over a head's key range: each K/V block is then re-read only after the whole head's K/V has been touched, and
misses once that outgrows the L2. The reverse order keeps them in step (each tile one block shorter), as do
non-causal grids (tiles equally long). docs/l2-calibration.md, "Programs that drift apart", compares the two timings
with the bundled kernel's and cuDNN's measured reads.
"""

from __future__ import annotations

import heapq
import sys
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iomodel.paths import one_line_parser  # noqa: E402


def simulate(heads: int, kv_heads: int, seqlen: int, head_dim: int, causal: bool, block_m: int, block_n: int,
             programs: int, width: int, capacity: float, order: str, timing: str,
             seqlen_q: int | None = None, miss_cost: float = 0.0) -> tuple[float, float]:
    """DRAM bytes of Q, K and V (bytes) and the bytes of Q, K and V every tile reads without reuse (bytes) of one
    forward, B = 1: ``seqlen`` keys (N_k) and ``seqlen_q`` queries (N_q; None: N_k), causal bottom-right (top-left
    where N_q = N_k: the same mask), HEAD_DIM ``head_dim`` of ``width`` bytes an element, an LRU of ``capacity``
    bytes; ``order`` ``forward`` or ``reverse``, ``timing`` ``in-step``, ``as-freed`` or ``coupled`` (as freed, a
    block read that misses taking ``1 + miss_cost`` time units: module doc). Raises nothing (the caller checks the
    arguments)."""
    from iomodel.schedule.grid import prefill_key_rows
    from iomodel.spec import LayerSpec, Tiling

    n_q = seqlen if seqlen_q is None else seqlen_q
    layer = LayerSpec(1, heads, kv_heads, head_dim, n_q, seqlen, causal=causal, causal_align="bottom-right")
    per_tile = [-(-rows // block_n) for rows in prefill_key_rows(layer, Tiling(block_m=block_m, block_n=block_n))]
    if order == "reverse":
        per_tile = per_tile[::-1]  # program i runs tile T_r - 1 - i
    t_r, t_c = len(per_tile), -(-seqlen // block_n)
    group = heads // kv_heads
    block = block_n * head_dim * width * 2  # K and V rows of one key block
    cap = max(1, int(capacity // block))
    lens = per_tile * heads  # key blocks of each tile, tiles fastest
    kv = [(g // t_r // group) * t_c for g in range(t_r * heads)]
    q = heads * n_q * head_dim * width
    if timing != "in-step":  # as freed: the coupled timing with misses costing nothing
        return _coupled(lens, kv, cap, programs, miss_cost if timing == "coupled" else 0.0) * block + q, \
            sum(lens) * block + q
    starts = [0.0] * len(lens)  # in step: each wave starts once the previous wave's longest tile is done
    t0 = 0.0
    for w in range(0, len(lens), programs):
        for j in range(w, min(w + programs, len(lens))):
            starts[j] = t0
        t0 += max(lens[w:w + programs])
    events = sorted((starts[j] + k, j, kv[j] + k) for j in range(len(lens)) for k in range(lens[j]))
    lru: OrderedDict = OrderedDict()
    misses = 0
    for _, _, key in events:
        if key in lru:
            lru.move_to_end(key)
        else:
            misses += 1
            lru[key] = None
            if len(lru) > cap:
                lru.popitem(last=False)
    return misses * block + q, sum(lens) * block + q


def _coupled(lens: list[int], kv: list[int], cap: int, programs: int, miss_cost: float) -> int:
    """Block misses of the ``coupled`` timing: programs take tiles as they finish, block by block in time order
    through the LRU of ``cap`` blocks, a hit costing 1 time unit and a miss ``1 + miss_cost`` (a program that trails
    another finds its blocks in L2 and catches up: convoys)."""
    lru: OrderedDict = OrderedDict()
    misses, nxt = 0, min(programs, len(lens))
    heap = [(0.0, j, 0) for j in range(nxt)]  # (time, tile, key block): ties in tile order, as the as-freed events
    while heap:
        t, j, k = heapq.heappop(heap)
        key = kv[j] + k
        if key in lru:
            lru.move_to_end(key)
            t += 1.0
        else:
            misses += 1
            lru[key] = None
            if len(lru) > cap:
                lru.popitem(last=False)
            t += 1.0 + miss_cost
        if k + 1 < lens[j]:
            heapq.heappush(heap, (t, j, k + 1))
        elif nxt < len(lens):  # the program takes the next tile
            heapq.heappush(heap, (t, nxt, 0))
            nxt += 1
    return misses


#: Most key-block reads one run simulates (four simulations, six with --miss-cost, of about 6-10 s and 1 GB of memory per 8 million on the
#: 2-core development machine): a bound on the work (19.5 million took 60 s).
MAX_BLOCK_READS = 10_000_000


def main() -> None:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--preset", default="H200", help="hardware preset whose measured read capacity is used")
    for name, default in (("heads", 16), ("kv-heads", 16), ("seqlen", 132608), ("head-dim", 128), ("block-m", 128),
                          ("block-n", 128), ("programs", 132), ("dtype-bytes", 2)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--seqlen-q", type=int, default=None, help="query rows N_q (default: --seqlen, the key rows); "
                    "fewer than the keys: a chunk of queries over a longer cache, causal bottom-right")
    ap.add_argument("--no-causal", action="store_true", help="a non-causal layer (every tile equally long)")
    ap.add_argument("--miss-cost", type=float, default=None, help="also the coupled timing: a block read that misses "
                    "takes 1 + this many time units (0.01: one percent longer than a hit)")
    a = ap.parse_args()
    for name in ("heads", "kv_heads", "seqlen", "head_dim", "block_m", "block_n", "programs", "dtype_bytes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be 1 or more, got {getattr(a, name)}")
    n_q = a.seqlen if a.seqlen_q is None else a.seqlen_q
    if not 1 <= n_q <= a.seqlen:
        ap.error(f"--seqlen-q must be from 1 to --seqlen ({a.seqlen}), got {n_q}")
    if a.miss_cost is not None and not 0 <= a.miss_cost <= 100:  # nan fails both comparisons
        ap.error(f"--miss-cost must be a number from 0 to 100 (time units a miss adds to a block read), got {a.miss_cost}")
    if a.dtype_bytes not in (1, 2, 4):
        ap.error(f"--dtype-bytes must be 1, 2 or 4 (fp8, fp16/bf16, fp32), got {a.dtype_bytes}")
    if a.heads % a.kv_heads:
        ap.error(f"--heads {a.heads} is not a multiple of --kv-heads {a.kv_heads}: change one")
    t_r, t_c = -(-n_q // a.block_m), -(-a.seqlen // a.block_n)
    reads = a.heads * t_r * t_c // (1 if a.no_causal else 2)
    if reads > MAX_BLOCK_READS:
        ap.error(f"about {reads:,} key-block reads to simulate, over {MAX_BLOCK_READS:,} (memory and time): lower "
                 "--heads or --seqlen, or raise --block-m / --block-n")
    from iomodel.cache.params import MEASURED_L2_READ_FRACTION, L2Params, hardware_preset, l2_measured, l2_preset
    from iomodel.errors import IomodelError
    from iomodel.spec.hardware import get_hardware

    try:
        hw = get_hardware(a.preset)
    except IomodelError as exc:
        ap.error(str(exc))
    cap = L2Params.of(hw, 1).for_forward().read_capacity  # bytes: what the model's read label is judged against
    how = ("measured" if hardware_preset(hw) in MEASURED_L2_READ_FRACTION else
           f"measured on the {l2_preset(hw)}, the same die and L2" if l2_measured(hw) else
           "the H200's measured fraction of this device's L2: not measured here")
    mask = "non-causal" if a.no_causal else ("causal" if n_q == a.seqlen else "causal bottom-right")
    print(f"{hardware_preset(hw)}: read capacity {cap / 2**20:.2f} MiB ({how}); B 1, H {a.heads}, H_kv {a.kv_heads}, N_q {n_q}, "
          f"N_k {a.seqlen}, HEAD_DIM {a.head_dim}, {mask}, BLOCK_M {a.block_m}, BLOCK_N {a.block_n}, "
          f"{a.programs} programs in flight")
    timings = ("in-step", "as-freed") + (("coupled",) if a.miss_cost is not None else ())
    for order in ("forward", "reverse"):
        for timing in timings:
            got, every = simulate(a.heads, a.kv_heads, a.seqlen, a.head_dim, not a.no_causal, a.block_m, a.block_n,
                                  a.programs, a.dtype_bytes, cap, order, timing, seqlen_q=n_q,
                                  miss_cost=a.miss_cost or 0.0)
            print(f"  {order:8s} {timing:9s} DRAM reads of Q, K, V {got / 1e9:9.3f} GB (no reuse {every / 1e9:8.1f} GB)",
                  flush=True)


if __name__ == "__main__":
    main()
