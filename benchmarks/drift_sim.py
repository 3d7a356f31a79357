"""Programs that drift apart: K/V DRAM reads of a causal forward when each program takes the next tile as it finishes.

Run: ``python benchmarks/drift_sim.py --preset H200 --heads 16 --kv-heads 16 --seqlen 132608 [--seqlen-q N_q]
[--no-causal] [--head-dim 128] [--block-m 128] [--block-n 128] [--programs 132] [--dtype-bytes 2]``, or
``python benchmarks/drift_sim.py --preset H100 --stamps receipts/l2-timing-h100-2026-12-07.json --ncu-csv
receipts/l2-timing-ncu-h100-2026-12-07.csv`` to replay measured program times (:func:`replay`: each layer of a
``benchmarks/l2_timing_probe.py`` receipt at its measured timing, in step and as freed, with the Q and O tiles
displacing K/V at no weight, the preset's forward constants and the measured displacement, beside the DRAM reads
Nsight Compute measured for the same kernels). A diagnosis, not the model:
it prints, for the query-tile orders ``forward`` (tile 0 of a head first) and ``reverse`` (heaviest first) of a
tiles-fastest grid (B = 1), the DRAM bytes of Q, K and V (GB, 1e9 bytes) under two timings of P = ``--programs``
programs in flight:

* ``in-step``: each wave of P consecutive tiles starts together once the previous wave's longest tile is done (the
  L2 model's waves, :func:`iomodel.schedule.grid.wave_runs`, but where the next timing's are);
* ``rows``: in step, but each head's waves start at its first tile (the model's waves where
  :func:`iomodel.schedule.grid.row_waves` holds: a causal layer in the reverse order, N_q = N_k);
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
left out. Units: GB (1e9 bytes); per 8.6 million block reads (133k tokens, 16 heads) about 2 s for each in-step or
as-freed simulation (six a run, with the rows timing: about 12 s and 0.8 GB of memory on the 2-core development machine,
2026-12-07) and 5 s for
each coupled one (two more with --miss-cost: 18 s); runs over :data:`MAX_BLOCK_READS` are refused. The dQ kernel's forward order drifts
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
import math
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
    bytes; ``order`` ``forward`` or ``reverse``, ``timing`` ``in-step``, ``rows`` or ``as-freed`` (each: the programs'
    times from :func:`timed_programs`, then :func:`replay` without Q and O weights) or ``coupled`` (as freed, a block
    read that misses taking ``1 + miss_cost`` time units: :func:`_coupled`, module doc). Raises nothing (the caller
    checks the arguments)."""
    layer = {"heads": heads, "kv_heads": kv_heads, "seqlen": seqlen, "seqlen_q": seqlen if seqlen_q is None else seqlen_q,
             "head_dim": head_dim, "causal": causal, "block_m": block_m, "block_n": block_n, "width": width,
             "tile_order": order}
    if timing != "coupled":
        return replay(layer, timed_programs(layer, programs, timing), capacity)
    per_tile, (head, tile) = _per_tile(layer), _launch(layer)
    lens = [per_tile[i] for i in tile]
    t_c = -(-seqlen // block_n)
    kv = [(h // (heads // kv_heads)) * t_c for h in head]  # the first key block of each program's KV head
    block = block_n * head_dim * width * 2  # K and V rows of one key block
    q = heads * layer["seqlen_q"] * head_dim * width
    return _coupled(lens, kv, max(1, int(capacity // block)), programs, miss_cost) * block + q, sum(lens) * block + q


def _spec(layer: dict):
    """``layer`` (as :func:`replay` takes it) as a :class:`~iomodel.spec.LayerSpec`, B = 1, causal bottom-right (the
    same mask as top-left where N_q = N_k). Raises nothing (the caller checked the layer)."""
    from iomodel.spec import LayerSpec

    n = layer["seqlen"]
    return LayerSpec(1, layer["heads"], layer["kv_heads"], layer["head_dim"], layer.get("seqlen_q", n), n,
                     causal=layer["causal"], causal_align="bottom-right")


def _model_timing(layer: dict, in_flight: int) -> str:
    """The timing of :func:`timed_programs` whose waves the L2 model runs for ``layer`` (with ``tile_order``) and
    ``in_flight`` programs: ``rows`` where :func:`iomodel.schedule.grid.row_waves` holds, else ``in-step``."""
    from iomodel.schedule.grid import row_waves

    t_r = -(-layer.get("seqlen_q", layer["seqlen"]) // layer["block_m"])
    return "rows" if row_waves(_spec(layer), t_r, in_flight, layer["tile_order"]) else "in-step"


def _per_tile(layer: dict) -> list[int]:
    """Key blocks of each query tile (tile 0 first) of ``layer`` (:func:`replay`'s keys; ``seqlen_q`` N_q, default
    ``seqlen``), causal bottom-right. Raises nothing."""
    from iomodel.schedule.grid import prefill_key_rows
    from iomodel.spec import Tiling

    bn = layer["block_n"]
    return [-(-rows // bn) for rows in prefill_key_rows(_spec(layer), Tiling(block_m=layer["block_m"], block_n=bn))]


def _launch(layer: dict) -> tuple[list[int], list[int]]:
    """Head and query tile of each program of ``layer`` in launch order: query tiles fastest, each head's tiles
    first to last (``tile_order`` forward) or last to first (reverse). Raises nothing."""
    t_r = -(-layer.get("seqlen_q", layer["seqlen"]) // layer["block_m"])
    tiles = list(range(t_r))[::-1] if layer["tile_order"] == "reverse" else list(range(t_r))
    return [h for h in range(layer["heads"]) for _ in range(t_r)], tiles * layer["heads"]


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


def replay(layer: dict, programs: dict, capacity: float, q_weight: float = 0.0, o_weight: float = 0.0
           ) -> tuple[float, float]:
    """DRAM bytes of Q, K and V (bytes) and their bytes without reuse (bytes) of one forward whose programs ran at
    given times: ``programs`` from ``benchmarks/l2_timing_probe.py`` (per program in launch order: ``head``,
    ``tile``, ``start_ns``, ``end_ns``) or :func:`timed_programs`, ``layer`` its layer (``heads``, ``kv_heads``,
    ``seqlen`` N_k, ``head_dim``, ``causal``, ``block_m``, ``block_n``; optional ``seqlen_q`` N_q, default N_k, causal
    bottom-right, and ``width``, bytes an element, default 2: bf16). Each program reads its key blocks from key
    0 up (the probe's loop), evenly spaced over its span (block k at start + (k + 1/2)·span / blocks); every block in
    time order goes through an LRU of ``capacity`` bytes (a K/V block's K and V rows one entry). With ``q_weight`` or
    ``o_weight`` above 0 a program's Q tile enters the LRU at its start and its O tile at its end, each occupying
    that share of its bytes (read once, so never hit: they only displace K/V; the model weighs them as the device's
    ``FORWARD_L2`` says, :data:`MEASURED_DISPLACEMENT` is what the cyclic microbenchmark measured). Raises nothing
    (the receipt was checked)."""
    import numpy as np

    n, d, bn, bm = layer["seqlen"], layer["head_dim"], layer["block_n"], layer["block_m"]
    width = layer.get("width", 2)
    per_tile = np.array(_per_tile(layer), dtype=np.int64)
    tile = np.asarray(programs["tile"], dtype=np.int64)
    head = np.asarray(programs["head"], dtype=np.int64)
    start = np.asarray(programs["start_ns"], dtype=np.float64)
    end = np.asarray(programs["end_ns"], dtype=np.float64)
    lens = per_tile[tile]
    first = np.repeat(np.cumsum(lens) - lens, lens)
    k = np.arange(int(lens.sum()), dtype=np.int64) - first  # each program's key blocks 0 .. lens - 1
    prog = np.repeat(np.arange(len(lens)), lens)
    times = start[prog] + (k + 0.5) * (end - start)[prog] / lens[prog]
    t_c = -(-n // bn)
    keys = (head[prog] // (layer["heads"] // layer["kv_heads"])) * t_c + k
    block = bn * d * width * 2  # K and V rows of one key block
    q_size, o_size = bm * d * width * q_weight, bm * d * width * o_weight
    ids = np.arange(len(lens), dtype=np.int64)
    extra_t, extra_k = [], []
    if q_size > 0:  # keys below -1: a Q tile (-2 - p) or an O tile (-2 - P - p), never read again
        extra_t.append(start)
        extra_k.append(-2 - ids)
    if o_size > 0:
        extra_t.append(end)
        extra_k.append(-2 - len(lens) - ids)
    if extra_t:
        times = np.concatenate([times] + extra_t)
        keys = np.concatenate([keys] + extra_k)
    order = np.argsort(times, kind="stable")
    lru: OrderedDict = OrderedDict()
    misses, held, n_prog = 0, 0.0, len(lens)
    for key in keys[order].tolist():
        if key >= 0 and key in lru:
            lru.move_to_end(key)
            continue
        if key >= 0:
            misses += 1
            size = block
        else:
            size = q_size if key >= -1 - n_prog else o_size
        lru[key] = size
        held += size
        while held > capacity and len(lru) > 1:
            held -= lru.popitem(last=False)[1]
    q = layer["heads"] * layer.get("seqlen_q", n) * d * width
    return misses * block + q, int(lens.sum()) * block + q


def timed_programs(layer: dict, in_flight: int, timing: str) -> dict:
    """Programs of ``layer`` (as :func:`replay` takes it, with ``tile_order``) at a simulated timing, one time unit a
    key block: ``in-step`` (waves of ``in_flight`` consecutive programs start together once the previous wave's
    longest is done), ``rows`` (the same, but each head's waves start at its first tile: the L2 model's waves where
    :func:`iomodel.schedule.grid.row_waves` holds) or ``as-freed`` (each program starts when the first of
    ``in_flight`` slots frees; ties in launch order). Per program in launch order: ``head``, ``tile``, ``start_ns``,
    ``end_ns`` (time units)."""
    per_tile, (head, tile) = _per_tile(layer), _launch(layer)
    lens = [per_tile[i] for i in tile]
    start = [0.0] * len(lens)
    if timing in ("in-step", "rows"):
        span = len(lens) // layer["heads"] if timing == "rows" else len(lens)  # rows: each head's waves apart
        t0 = 0.0
        for r0 in range(0, len(lens), span):
            for w in range(r0, r0 + span, in_flight):
                e = min(w + in_flight, r0 + span)
                for j in range(w, e):
                    start[j] = t0
                t0 += max(lens[w:e])
    else:
        free = [(0.0, s) for s in range(in_flight)]
        for j in range(len(lens)):
            t, slot = heapq.heappop(free)
            start[j] = t
            heapq.heappush(free, (t + lens[j], slot))
    return {"head": head, "tile": tile, "start_ns": start, "end_ns": [s + x for s, x in zip(start, lens)]}


#: Most key-block reads one run simulates: a bound on its time and memory (the module doc gives both).
MAX_BLOCK_READS = 10_000_000


def main() -> None:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--preset", default=None, help="hardware preset whose measured read capacity is used (default "
                    "H200; with --stamps the receipt's device, and another one is refused)")
    for name, default in (("heads", 16), ("kv-heads", 16), ("seqlen", 132608), ("head-dim", 128), ("block-m", 128),
                          ("block-n", 128), ("programs", 132), ("dtype-bytes", 2)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--seqlen-q", type=int, default=None, help="query rows N_q (default: --seqlen, the key rows); "
                    "fewer than the keys: a chunk of queries over a longer cache, causal bottom-right")
    ap.add_argument("--no-causal", action="store_true", help="a non-causal layer (every tile equally long)")
    ap.add_argument("--miss-cost", type=float, default=None, help="also the coupled timing: a block read that misses "
                    "takes 1 + this many time units (0.01: one percent longer than a hit)")
    ap.add_argument("--stamps", type=Path, default=None, help="a receipt of benchmarks/l2_timing_probe.py: replay "
                    "each of its layers at the measured program times, beside the in-step, rows and as-freed timings "
                    "(the layer options are then the receipt's; --programs stays the programs in flight)")
    ap.add_argument("--ncu-csv", type=Path, default=None, help="with --stamps: the Nsight Compute CSV of the same "
                    "probe's kernels (its --csv output, one kernel a layer in the receipt's order): their "
                    "dram__bytes_read.sum printed beside the replays")
    a = ap.parse_args()
    if a.stamps is not None:
        _replay_receipt(a, ap)
        return
    if a.ncu_csv is not None:
        ap.error("--ncu-csv goes with --stamps (the timing receipt whose kernels it measured)")
    a.preset = a.preset or "H200"
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
    print("  (an LRU of whole K/V blocks, not the model's set-associative estimate: the worksheet's bytes differ; "
          "'the model's waves' marks the timing whose waves the model runs)")
    timings = ("in-step", "rows", "as-freed") + (("coupled",) if a.miss_cost is not None else ())
    layer = {"heads": a.heads, "kv_heads": a.kv_heads, "seqlen": a.seqlen, "seqlen_q": n_q, "head_dim": a.head_dim,
             "causal": not a.no_causal, "block_m": a.block_m}
    for order in ("forward", "reverse"):
        model = _model_timing({**layer, "tile_order": order}, a.programs)  # the L2 model's waves here
        for timing in timings:
            got, every = simulate(a.heads, a.kv_heads, a.seqlen, a.head_dim, not a.no_causal, a.block_m, a.block_n,
                                  a.programs, a.dtype_bytes, cap, order, timing, seqlen_q=n_q,
                                  miss_cost=a.miss_cost or 0.0)
            print(f"  {order:8s} {timing:9s} DRAM reads of Q, K, V {got / 1e9:9.3f} GB (no reuse {every / 1e9:8.1f} GB)"
                  + ("  (the model's waves)" if timing == model else ""), flush=True)


#: The private-byte displacement the cyclic microbenchmark measured (0.72-0.86 of a set byte; 0.78 near its middle,
#: receipts/l2-cyclic-h100-2026-12-07.json), the third (Q, O) weight the ``--stamps`` replay tries after none (the
#: simulator's K/V alone) and the preset's forward constants (``FORWARD_L2``: its Q and written-byte weights).
MEASURED_DISPLACEMENT = 0.78


def _ncu_reads(path: Path, fail) -> list[float]:
    """``dram__bytes_read.sum`` (bytes) of each kernel of an Nsight Compute ``--csv`` file, in its ID order;
    ``fail(message)`` (the parser's one-line error, exit 2) on a file that is not one."""
    import csv

    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read --ncu-csv {path}: {getattr(exc, 'strerror', None) or exc}")
    rows = list(csv.DictReader(line for line in text.splitlines() if line.startswith('"')))
    rows = [r for r in rows if r.get("Metric Name") == "dram__bytes_read.sum"]
    if not rows:
        fail(f"{path} has no dram__bytes_read.sum row: pass the probe's ncu --csv output")
    units = {r.get("Metric Unit") for r in rows}
    if units - {"byte"}:
        fail(f"{path} gives dram__bytes_read.sum in {', '.join(sorted(map(str, units)))}: profile with "
             "--print-units base (bytes)")
    try:
        got = {int(r["ID"]): float(r["Metric Value"].replace(",", "")) for r in rows}
    except (KeyError, TypeError, ValueError, AttributeError):
        fail(f"{path}: a dram__bytes_read.sum row without a kernel ID or a numeric value: pass the probe's ncu --csv "
             "output as ncu wrote it")
    return [got[k] for k in sorted(got)]


#: The fields of a timing-probe layer :func:`replay` reads, with their type.
_LAYER_FIELDS = {"heads": int, "kv_heads": int, "seqlen": int, "head_dim": int, "block_m": int, "block_n": int,
                 "causal": bool}
_PROGRAM_FIELDS = ("head", "tile", "start_ns", "end_ns")


def _checked_layers(rec: object, fail) -> list[dict]:
    """The layers of a ``benchmarks/l2_timing_probe.py`` receipt, each checked as :func:`replay` reads it (``fail``
    with the first field that is not)."""
    layers = rec.get("layers") if isinstance(rec, dict) else None
    if not isinstance(layers, list) or not layers:
        fail("the receipt has no layers (its 'layers' list is missing or empty): pass the JSON of "
             "benchmarks/l2_timing_probe.py")
    for n, entry in enumerate(layers):
        lay = entry.get("layer") if isinstance(entry, dict) else None
        progs = entry.get("programs") if isinstance(entry, dict) else None
        if not isinstance(lay, dict) or not isinstance(progs, dict):
            fail(f"layer {n} of the receipt has no 'layer' and 'programs' objects")
        extra = sorted({"seqlen_q", "width"} & set(lay))
        if extra:  # replay would read them; the probe's layers are square and bf16, and its tiles count from seqlen
            fail(f"layer {n}: {', '.join(repr(k) for k in extra)} is not a field benchmarks/l2_timing_probe.py writes "
                 "(its layers are square, bf16): take it out")
        for key, kind in _LAYER_FIELDS.items():
            v = lay.get(key)
            if type(v) is not kind or (kind is int and v < 1):
                fail(f"layer {n}: '{key}' must be {'true or false' if kind is bool else 'a positive integer'}, got {v!r}")
        if lay.get("tile_order") not in ("forward", "reverse") or lay["heads"] % lay["kv_heads"]:
            fail(f"layer {n}: 'tile_order' must be forward or reverse and 'heads' a multiple of 'kv_heads'")
        t_r = -(-lay["seqlen"] // lay["block_m"])
        count = lay["heads"] * t_r
        for key in _PROGRAM_FIELDS:
            col = progs.get(key)
            whole = key in ("head", "tile")  # indices; the times may be fractional
            what = f"{count:,} {'whole' if whole else 'finite'} numbers (one a program: {lay['heads']} heads x {t_r} " \
                   "query tiles; no NaN or infinity)"
            if not isinstance(col, list) or len(col) != count:
                got = (f"{len(col):,} entries" if isinstance(col, list) else "nothing (the key is missing)"
                       if col is None else repr(type(col).__name__))
                fail(f"layer {n}: programs '{key}' must list {what}, got {got}")
            bad = next((i for i, x in enumerate(col)
                        if not (type(x) is int or (not whole and type(x) is float and math.isfinite(x)))), None)
            if bad is not None:
                fail(f"layer {n}: programs '{key}' must list {what}; program {bad} has {col[bad]!r}")
        bad = next((i for i, (t, h, b, e) in enumerate(zip(progs["tile"], progs["head"], progs["start_ns"],
                                                             progs["end_ns"]))
                    if not (0 <= t < t_r and 0 <= h < lay["heads"] and 0 <= b <= e)), None)
        if bad is not None:
            fail(f"layer {n}: program {bad}'s tile, head or span is out of range (tile {progs['tile'][bad]}, head "
                 f"{progs['head'][bad]}, start {progs['start_ns'][bad]}, end {progs['end_ns'][bad]}; tiles "
                 f"0-{t_r - 1}, heads 0-{lay['heads'] - 1}, times from 0 (the probe counts from the first start), end not "
                 "before start)")
        seen: dict = {}
        for i, pair in enumerate(zip(progs["head"], progs["tile"])):  # the grid runs each (head, tile) once
            if pair in seen:
                fail(f"layer {n}: programs {seen[pair]} and {i} both ran head {pair[0]}, tile {pair[1]}: the grid "
                     f"runs each (head, query tile) once ({lay['heads']} heads x {t_r} tiles)")
            seen[pair] = i
    return layers


def _replay_receipt(a, ap) -> None:
    """``--stamps``: per layer of the receipt and per (Q, O) weight, DRAM reads (GB) at the measured timing, in step
    and as freed. A bad receipt, CSV or preset: one error line, exit 2 (``ap.error``)."""
    import json

    from iomodel.cache.params import L2Params, forward_l2_of, hardware_preset
    from iomodel.errors import IomodelError
    from iomodel.spec.hardware import get_hardware, preset_of_device

    if a.programs < 1:
        ap.error(f"--programs must be 1 or more, got {a.programs}")
    try:
        rec = json.loads(a.stamps.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        ap.error(f"cannot read --stamps {a.stamps}: {getattr(exc, 'strerror', None) or exc}")
    except ValueError as exc:
        ap.error(f"--stamps {a.stamps} is not JSON ({exc}): pass the receipt of benchmarks/l2_timing_probe.py")
    layers = _checked_layers(rec, ap.error)
    device = preset_of_device(str(rec.get("device", ""))) or str(rec.get("device"))
    try:
        hw = get_hardware(a.preset or device)
    except IomodelError as exc:
        ap.error(f"--preset {a.preset}: {exc}" if a.preset else f"the receipt's device {rec.get('device')!r} is no "
                 f"preset ({exc}): pass --preset")
    if a.preset and hardware_preset(hw) != device:
        ap.error(f"--preset {a.preset} is not the receipt's device ({rec.get('device')}, preset {device}): leave "
                 "--preset out to replay at the device's own capacity")
    measured = _ncu_reads(a.ncu_csv, ap.error) if a.ncu_csv is not None else []
    if measured and len(measured) != len(layers):
        ap.error(f"{a.ncu_csv} holds DRAM reads of {len(measured)} kernel(s), the receipt {len(layers)} layer(s): pass "
                 "the CSV of the same probe run")
    cap = L2Params.of(hw, 1).for_forward().read_capacity
    fwd = forward_l2_of(hw)
    weights = ((0.0, 0.0), (fwd.q_share, fwd.write_share), (MEASURED_DISPLACEMENT, MEASURED_DISPLACEMENT))
    print(f"{a.stamps.name} ({rec.get('device')}); {hardware_preset(hw)} read capacity {cap / 2**20:.2f} MiB; "
          f"DRAM reads of Q, K, V, GB; {a.programs} programs in flight in the simulated timings (* the L2 model's "
          "waves for that layer)")

    for i, entry in enumerate(layers):
        lay = entry["layer"]
        if measured:
            print(f"  H {lay['heads']:3d} N {lay['seqlen']:7d} {'causal' if lay['causal'] else 'non-causal':10s} "
                  f"{lay['tile_order']:8s} Nsight Compute DRAM reads {measured[i] / 1e9:8.3f}")
        timings = {"at measured times": entry["programs"], "in-step": timed_programs(lay, a.programs, "in-step"),
                   "rows": timed_programs(lay, a.programs, "rows"),
                   "as-freed": timed_programs(lay, a.programs, "as-freed")}
        model = _model_timing(lay, a.programs)
        for qw, ow in weights:
            got = {name: replay(lay, progs, cap, qw, ow)[0] for name, progs in timings.items()}
            print(f"  H {lay['heads']:3d} N {lay['seqlen']:7d} {'causal' if lay['causal'] else 'non-causal':10s} "
                  f"{lay['tile_order']:8s} Q/O weight {qw:5.3f}/{ow:5.3f}: "
                  + "  ".join(f"{name}{'*' if name == model else ''} {v / 1e9:8.3f}" for name, v in got.items()),
                  flush=True)


if __name__ == "__main__":
    main()
