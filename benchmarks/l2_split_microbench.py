"""L2 microbenchmark of the attention forward's K/V pattern at the capacity edge: sets re-read by parts of the SMs.

Issue 12, items 2 and 3. On both hold-outs of the measured read capacity (H200 2026-12-04, H100 2026-12-06) the L2
model over-predicts the forward's DRAM reads where a wave's K/V working set is 1.2-2.5 times the read capacity
(measured 0.68-0.91x), while the ``shared-read`` microbenchmark (one set re-read by every SM, ``l2_microbench.py``)
misses more sharply than the model's 24 ways say. Two patterns of attention that ``shared-read`` lacks are measured here, each with
loads bypassing L1 (``.cg``), under ``ncu --cache-control all --clock-control none``:

``split``
    S disjoint sets of W / S bytes, each re-read (``PASSES`` passes, in the same order) by a contiguous block of
    num_SMs / S programs (S divides 132; all num_SMs programs resident at once, one per SM as assumed, the hardware
    scheduler placing them): the query heads of a wave reading their own KV head's K/V. The
    re-fetch per pass is (DRAM reads with ``PASSES`` passes − with 1 pass) / ((``PASSES`` − 1)·W); the wave model
    (every set's lines re-read after all W bytes) says it does not depend on S.
``grid``
    The forward's grid with an O-like store (each program writes one 8 KiB block of its own at the end) and no Q: H sets of ``SET_MIB`` each, T programs per set in a tiles-fastest grid
    (program p reads set ⌊p / T⌋ once, whole, in order), as many programs an SM at a time as occupancy allows (the
    receipt records the limits: 6 on an H100 by registers, waves of 792), so waves straddle sets and a set's later
    programs re-read it in a later wave. ``excess`` = DRAM reads / (H·set) − 1, the re-fetched fraction the model calls
    ``l2_capacity``.
``gridqo``
    The ``grid`` pattern at 400 programs a set with the attention forward's other traffic varied: each program reads
    ``q`` private 8 KiB blocks before its set (Q tiles) and writes ``o`` private 8 KiB blocks after it (O tiles), q and
    o from :data:`GRIDQO_BLOCKS` (o = 0: nothing stored), sets of :data:`GRIDQO_SET_MIB`.

Usage (on the GPU; about half a minute)::

    python3 benchmarks/l2_split_microbench.py --out $OUT/l2-split-<device>-<date>.json

It prints the tables and writes a JSON receipt (command, device, date, every raw counter). Without a GPU or ncu it
prints one line and exits 2. Calibration data: its receipts are the source of the forward's L2 constants
(``iomodel.cache.params.FORWARD_L2``, since 2026-12-06).

On a CPU, ``python3 benchmarks/l2_split_microbench.py --compare RECEIPT`` prints the L2 model's prediction of the
patterns (:func:`model_split_miss`, :func:`model_grid`: the receipt's device preset, its measured read fraction, the
pattern's waves through :func:`iomodel.cache.simulate.simulate` in chunks of :data:`MODEL_CHUNK` bytes) under the
forward's constants and the :data:`LEGACY` ones (24 ways, Q 1, written 0.5 at 0.5) beside the measured values:
``split`` the re-fetch per pass of W MiB by S sets; ``grid``/``gridqo`` the excess reads over one read of every set (a
fraction of the sets' bytes) for T programs a set and (q, o) private blocks read and written per program, W programs
resident, and gridqo's O bytes written back (MiB). ``--fit RECEIPT`` ranks a trial grid of those constants by the
squared error against the receipt's reads and written-back bytes (:func:`fit_rows`; about 4 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iomodel.errors import IomodelError  # noqa: E402

#: ``split``: total working sets W (MiB) and set counts S.
SPLIT_MIB = (16, 20, 24, 26, 28, 30, 32, 36, 40, 48, 56, 64, 80)
SPLIT_SETS = (1, 2, 3, 4, 6)
#: ``grid``: one set's size (MiB), programs per set T (the tiles of a head) and sets H.
GRID_SET_MIB = (8, 12, 16, 20, 24, 32)
GRID_TILES = (200, 400)
GRID_SETS = 6
#: ``gridqo``: (q, o) private blocks per program, and set sizes (MiB), at 400 programs a set.
GRIDQO_BLOCKS = ((0, 0), (0, 1), (0, 4), (1, 0), (4, 0), (4, 4))
GRIDQO_SET_MIB = (6, 8, 10, 12, 16)
PASSES = 4
BLOCK = 2048  # int32 elements per block: 8 KiB
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
           "launch__occupancy_limit_blocks", "launch__occupancy_limit_registers", "launch__occupancy_limit_warps",
           "launch__occupancy_limit_shared_mem")


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def sets_read(buf, out, set_blocks, progs_per_set, passes, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        base = (pid // progs_per_set).to(tl.int64) * set_blocks * BLOCK
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for _ in range(passes):
            for j in range(set_blocks):
                acc += tl.load(buf + base + j * BLOCK + offs, cache_modifier=".cg")  # j * BLOCK < 2^31
        tl.store(out + pid * BLOCK + offs, acc)

    @triton.jit
    def sets_read_qo(buf, qbuf, out, set_blocks, progs_per_set, keep, Q: tl.constexpr, O: tl.constexpr,
                     BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        base = (pid // progs_per_set).to(tl.int64) * set_blocks * BLOCK
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for i in tl.static_range(Q):
            acc += tl.load(qbuf + (pid.to(tl.int64) * Q + i) * BLOCK + offs, cache_modifier=".cg")
        for j in range(set_blocks):
            acc += tl.load(buf + base + j * BLOCK + offs, cache_modifier=".cg")
        if O > 0:
            for i in tl.static_range(O):
                tl.store(out + (pid.to(tl.int64) * O + i) * BLOCK + offs, acc + i)
        else:  # keep the loads without storing a byte (keep = 0 at run time)
            tl.store(out + offs, acc, mask=offs < keep)

    return sets_read, sets_read_qo


def _cases(num_sms: int) -> list[dict]:
    cases = []
    for s in SPLIT_SETS:
        per = num_sms // s  # programs per set (S divides 132: no SM idle there)
        for mib in SPLIT_MIB:
            blocks = mib * 2**20 // s // (BLOCK * 4)
            for passes in (1, PASSES):
                cases.append({"id": f"split-s{s}-{mib}MiB-p{passes}", "pattern": "split", "sets": s, "mib": mib,
                              "passes": passes, "programs": per * s, "progs_per_set": per, "set_blocks": blocks,
                              "working_set_bytes": blocks * BLOCK * 4 * s})
    for t in GRID_TILES:
        for mib in GRID_SET_MIB:
            blocks = mib * 2**20 // (BLOCK * 4)
            cases.append({"id": f"grid-t{t}-{mib}MiB", "pattern": "grid", "sets": GRID_SETS, "mib": mib, "passes": 1,
                          "programs": t * GRID_SETS, "progs_per_set": t, "set_blocks": blocks,
                          "working_set_bytes": blocks * BLOCK * 4 * GRID_SETS})
    for q, o in GRIDQO_BLOCKS:
        for mib in GRIDQO_SET_MIB:
            blocks = mib * 2**20 // (BLOCK * 4)
            cases.append({"id": f"gridqo-q{q}-o{o}-{mib}MiB", "pattern": "gridqo", "sets": GRID_SETS, "mib": mib,
                          "passes": 1, "programs": 400 * GRID_SETS, "progs_per_set": 400, "set_blocks": blocks,
                          "q": q, "o": o, "working_set_bytes": blocks * BLOCK * 4 * GRID_SETS})
    return cases


def child(cases_file: str) -> int:
    """Launch every case once, each inside its own NVTX range (under ncu)."""
    import torch

    from l2_microbench import child_setup, launch_cases

    kern, kern_qo = _kernel()
    cases, dev, gen = child_setup(cases_file)
    buf = torch.randint(-2**20, 2**20, (max(c["working_set_bytes"] for c in cases) // 4,), generator=gen, device=dev,
                        dtype=torch.int32)
    most = max(c["programs"] * max(1, c.get("q", 0), c.get("o", 0)) for c in cases)
    qbuf = torch.randint(-2**20, 2**20, (most * BLOCK,), generator=gen, device=dev, dtype=torch.int32)
    out = torch.empty(most * BLOCK, device=dev, dtype=torch.int32)

    def launch(c):
        if c["pattern"] == "gridqo":
            kern_qo[(c["programs"],)](buf, qbuf, out, c["set_blocks"], c["progs_per_set"], 0, Q=c["q"], O=c["o"],
                                      BLOCK=BLOCK, num_warps=8)
            return
        kern[(c["programs"],)](buf, out, c["set_blocks"], c["progs_per_set"], c["passes"], BLOCK=BLOCK, num_warps=8)

    # passes=1 is a specialised variant of its own: warm each case's
    return launch_cases(cases, launch, lambda c: {**c, "passes": min(c["passes"], 2)})


def summarise(cases: list[dict], measured: dict[str, dict]) -> list[dict]:
    """``split``: the re-fetch per pass per (S, W) (a fraction of the working set W); ``grid``: the excess over one
    read of every set per (T, set) (a fraction of all sets' bytes)."""
    rows = []
    for c in cases:
        many = measured.get(c["id"])
        if c["pattern"] == "split":
            if c["passes"] != PASSES:
                continue
            one = measured.get(c["id"].replace(f"-p{PASSES}", "-p1"))
            if not one or not many:
                rows.append({"pattern": "split", "sets": c["sets"], "mib": c["mib"], "missing": True})
                continue
            extra = (many["dram__bytes_read.sum"] or 0) - (one["dram__bytes_read.sum"] or 0)
            rows.append({"pattern": "split", "sets": c["sets"], "mib": c["mib"], "working_set_bytes": c["working_set_bytes"],
                         "dram_read_1pass": one["dram__bytes_read.sum"], f"dram_read_{PASSES}pass": many["dram__bytes_read.sum"],
                         "miss_per_pass": extra / ((PASSES - 1) * c["working_set_bytes"])})
        else:
            extra = {"q": c["q"], "o": c["o"]} if c["pattern"] == "gridqo" else {}
            if not many:
                rows.append({"pattern": c["pattern"], "tiles": c["progs_per_set"], "mib": c["mib"], **extra,
                             "missing": True})
                continue
            q_bytes = c.get("q", 0) * c["programs"] * BLOCK * 4  # the private Q blocks: read once, compulsory
            rows.append({"pattern": c["pattern"], "tiles": c["progs_per_set"], "mib": c["mib"], "sets": c["sets"], **extra,
                         "working_set_bytes": c["working_set_bytes"], "dram_read": many["dram__bytes_read.sum"],
                         "dram_write": many["dram__bytes_write.sum"],
                         "excess": ((many["dram__bytes_read.sum"] or 0) - q_bytes) / c["working_set_bytes"] - 1})
    return rows


#: Bytes of one item of the modelled sets (a trial granularity: the model tracks K and V chunks of 1,024 key rows, 256 KiB each at HEAD_DIM 128 in bf16).
MODEL_CHUNK = 512 * 1024


def _model_params(hardware, **kw):
    """The L2 model's parameters for a pattern on ``hardware``: the forward's own constants
    (:meth:`~iomodel.cache.params.L2Params.for_forward`, :data:`~iomodel.cache.params.FORWARD_L2`) unless ``kw`` sets
    other :class:`~iomodel.cache.params.L2Params` fields (``ways``, ``l2_fraction`` for the write-back fraction,
    ``stored_share`` for a written byte's weight, ``q_share``): then those (``LEGACY`` is the constants every kernel had
    before 2026-12-06)."""
    from iomodel.cache.params import L2Params

    return L2Params.of(hardware, 1, **kw).for_forward()


#: The constants every kernel was predicted with before the forward's own (24 ways, a Q byte 1, a written byte 0.5,
#: write-back at 0.5 of the L2): ``model_grid(..., **LEGACY)``.
LEGACY = {"ways": 24, "l2_fraction": 0.5, "stored_share": 0.5, "q_share": 1.0}


def _simulate(p, name, waves):
    from iomodel.cache.simulate import simulate

    return simulate(name, waves, p.capacity, p.write_share, p.ways, p.read_capacity, p.read_weights)


def model_split_miss(hardware, working_mib: int, sets: int, **kw) -> float:
    """The L2 model's re-fetch per pass of the ``split`` pattern (a fraction of W): S sets of W / S bytes read in lock
    step, ``PASSES`` passes, one wave (every program resident), read misses judged at ``hardware``'s read capacity;
    ``kw``: :class:`~iomodel.cache.params.L2Params` fields to try (:func:`_model_params`)."""
    from iomodel.schedule.grid import Access

    p = _model_params(hardware, **kw)
    n = working_mib * 2**20 // sets // MODEL_CHUNK

    def reads(passes: int) -> float:
        wave = [Access("K", ("K", s, c), MODEL_CHUNK) for _ in range(passes) for c in range(n) for s in range(sets)]
        return sum(_simulate(p, "split", [wave]).hbm_read.values())

    return (reads(PASSES) - reads(1)) / ((PASSES - 1) * n * sets * MODEL_CHUNK)


def model_grid(hardware, set_mib: int, tiles: int, resident: int, sets: int = GRID_SETS, q: int = 0, o: int = 1,
               **kw) -> tuple[float, float]:
    """The L2 model on the ``grid`` (``gridqo``) pattern: (excess reads, a fraction of all sets' bytes; bytes written
    back to DRAM during the kernel). Waves of ``resident`` programs in grid order, each program reading ``q`` private
    8 KiB blocks (Q), then each wave every chunk of the sets its programs belong to once (one fetch serves the wave, in
    lock step), then each program writing ``o`` private blocks (O; ``grid`` stores one). The Q blocks' own first reads
    are not counted (compulsory). ``kw``: :class:`~iomodel.cache.params.L2Params` fields to try
    (:func:`_model_params`). Items are keyed by tensor (a first version keyed Q, K and O alike, so program x's O block
    was its Q block's item and a set's first chunks collided with the first programs' blocks: its numbers, quoted on
    2026-12-06 before this fix, are superseded)."""
    from iomodel.schedule.grid import Access

    p = _model_params(hardware, **kw)
    n = set_mib * 2**20 // MODEL_CHUNK
    blk = BLOCK * 4
    progs = tiles * sets
    waves = []
    for w0 in range(0, progs, resident):
        ps = range(w0, min(w0 + resident, progs))
        in_wave = sorted({x // tiles for x in ps})
        wave = [Access("Q", ("Q", x, i), blk) for x in ps for i in range(q)]
        wave += [Access("K", ("K", s, c), MODEL_CHUNK) for c in range(n) for s in in_wave]
        wave += [Access("O", ("O", x, i), blk, write=True) for x in ps for i in range(o)]
        waves.append(wave)
    got = _simulate(p, "grid", waves)
    return got.hbm_read.get("K", 0) / (sets * n * MODEL_CHUNK) - 1, float(sum(got.hbm_write.values()))


def model_grid_excess(hardware, set_mib: int, tiles: int, resident: int, sets: int = GRID_SETS, q: int = 0,
                      o: int = 1, **kw) -> float:
    """The excess reads of :func:`model_grid` (a fraction of all sets' bytes)."""
    return model_grid(hardware, set_mib, tiles, resident, sets, q, o, **kw)[0]


def measured_written_back(rows: list[dict], row: dict) -> float:
    """A ``gridqo`` row's DRAM writes of its O blocks (bytes): its ``dram_write`` less that of the (0, 0) row of the same
    set size, which stores nothing and still records about 2.3 MiB (the same on every set size: not the pattern's)."""
    base = next(r["dram_write"] for r in rows if r["pattern"] == "gridqo" and (r["q"], r["o"]) == (0, 0)
                and r["mib"] == row["mib"])
    return row["dram_write"] - base


def half_points(rows: list[dict]) -> dict[int, float | None]:
    """The working set (MiB) at which the ``split`` pattern's re-fetch per pass crosses 0.5, per set count S
    (:func:`iomodel.cache.physical.half_point`)."""
    from iomodel.cache.physical import half_point

    return {s: half_point(sorted((r["mib"], r["miss_per_pass"]) for r in rows
                                 if r["pattern"] == "split" and r["sets"] == s and not r.get("missing")))
            for s in sorted({r["sets"] for r in rows if r["pattern"] == "split"})}


def _receipt(path: str, kind: str = "split", script: str = "l2_split_microbench.py"):
    """A ``kind`` microbenchmark's receipt (written by ``benchmarks/SCRIPT``: the split one here, the cyclic one
    through ``l2_cyclic_microbench``) and the hardware preset its device is, or one IomodelError that says what to
    change: a missing, non-JSON or corrupt file (missing fields, rows of the wrong type)."""
    from iomodel.jsonvalues import read_json
    from iomodel.spec.hardware import get_hardware

    rec = read_json(path, f"{kind} microbenchmark receipt", f"pass the JSON benchmarks/{script} wrote",
                    f"re-run benchmarks/{script} on the GPU")
    ok = (isinstance(rec, dict) and isinstance(rec.get("summary"), list) and isinstance(rec.get("measured"), dict)
          and isinstance(rec.get("num_sms"), int) and all(isinstance(r, dict) and "pattern" in r for r in rec["summary"]))
    if not ok:
        raise IomodelError(f"{path} is not a {kind} microbenchmark receipt (summary, measured, num_sms): pass the JSON "
                           f"benchmarks/{script} wrote")
    device = rec.get("device")
    preset = next((p for key, p in (("H100", "H100-SXM"), ("H200", "H200")) if key in str(device)), None)
    if not isinstance(device, str) or preset is None:
        raise IomodelError(f"{path} names device {device!r}: the model is compared on an H100 or H200 receipt only "
                           "(its device field, as the benchmark wrote it)")
    return rec, get_hardware(preset)


def _resident(rec: dict, row: dict) -> int:
    """Programs resident at once in a ``grid``/``gridqo`` case of a receipt: SMs × the least occupancy limit ncu
    recorded for it."""
    q, o = row.get("q", 0), row.get("o", 1)
    cid = (f"grid-t{row['tiles']}-{row['mib']}MiB" if row["pattern"] == "grid" else f"gridqo-q{q}-o{o}-{row['mib']}MiB")
    m = rec["measured"][cid]
    return rec["num_sms"] * int(min(m[k] for k in METRICS[5:] if k in m))


def compare(path: str) -> int:
    """Print the model's prediction of a receipt's patterns beside the measured values (CPU): the forward's constants
    (:data:`~iomodel.cache.params.FORWARD_L2`) and the :data:`LEGACY` ones. Every line is computed before any is
    printed, so a corrupt receipt prints its one error line alone."""
    from iomodel.cache.params import forward_l2_of

    rec, hw = _receipt(path)
    f = forward_l2_of(hw)
    lines: list[str] = []
    out = lines.append
    out(f"{hw.name}: the forward's constants ({f.ways} ways, Q {f.q_share:g}, written {f.write_share:g}, write-back "
        f"at {f.write_fraction:g}) / the legacy ones (24 ways, Q 1, written 0.5 at 0.5)")
    out("split (model's miss per pass is the same for every S): W MiB, model, legacy, measured by S")
    for mib in SPLIT_MIB:
        meas = {r["sets"]: r["miss_per_pass"] for r in rec["summary"] if r["pattern"] == "split" and r["mib"] == mib}
        out(f"  {mib:>3} {model_split_miss(hw, mib, 1):6.3f} {model_split_miss(hw, mib, 1, **LEGACY):6.3f}  "
            + " ".join(f"S{s} {meas[s]:6.3f}" for s in sorted(meas)))
    out("grid / gridqo: T, set MiB, (q, o), excess reads: model, legacy, measured; gridqo O written back (MiB): "
        "model, legacy, measured")
    for r in rec["summary"]:
        if r["pattern"] not in ("grid", "gridqo") or r.get("missing"):
            continue
        q, o = r.get("q", 0), r.get("o", 1)
        resident = _resident(rec, r)
        (e, w), (le, lw) = (model_grid(hw, r["mib"], r["tiles"], resident, q=q, o=o),
                            model_grid(hw, r["mib"], r["tiles"], resident, q=q, o=o, **LEGACY))
        wb = (f"  {w / 2**20:6.2f} {lw / 2**20:6.2f} {measured_written_back(rec['summary'], r) / 2**20:6.2f}"
              if r["pattern"] == "gridqo" and o else "")
        out(f"  {r['pattern']:>6} {r['tiles']:>4} {r['mib']:>3} ({q}, {o}) {e:6.3f} {le:6.3f} {r['excess']:6.3f}{wb}"
            f"  (W = {resident})")
    print("\n".join(lines))
    return 0


#: The trial grid of :func:`fit`: ways, a Q byte's weight, a written byte's weight, the write-back fraction of the L2.
FIT_WAYS, FIT_Q_WEIGHTS, FIT_WRITE_SHARES = (24, 48, 96, 192), (0.5, 0.625, 0.75, 1.0), (0.5, 0.625, 0.75)
FIT_WRITE_FRACTIONS = (0.375, 0.4375, 0.5)


def grid_errors(hardware, rec: dict, patterns: tuple[str, ...] = ("grid", "gridqo"), **kw) -> tuple[float, float]:
    """Squared errors of the model against a receipt's ``grid``/``gridqo`` rows of ``patterns`` (:func:`model_grid` at
    each row's resident programs, :func:`_resident`): (excess reads, a fraction of the sets' bytes; O bytes written back,
    a fraction of the O bytes written, :func:`measured_written_back`, gridqo rows storing O only). ``kw``:
    :class:`~iomodel.cache.params.L2Params` fields to try (:func:`_model_params`)."""
    rows = rec["summary"]
    se_r = se_w = 0.0
    for r in rows:
        if r["pattern"] not in patterns or r.get("missing"):
            continue
        q, o = r.get("q", 0), r.get("o", 1)
        e, w = model_grid(hardware, r["mib"], r["tiles"], _resident(rec, r), q=q, o=o, **kw)
        se_r += (e - r["excess"]) ** 2
        if r["pattern"] == "gridqo" and o:
            se_w += ((w - measured_written_back(rows, r)) / (r["tiles"] * r["sets"] * o * BLOCK * 4)) ** 2
    return se_r, se_w


def fit_rows(path: str) -> list[tuple[float, float, float, int, float, float, float]]:
    """Every trial constant set of :func:`fit` with its squared errors against a receipt, best first: (reads + writes,
    reads, writes, ways, Q weight, write share, write fraction). Reads: the ``grid``/``gridqo`` excess and the one-set
    ``split`` curve (fractions of the working set); writes: each ``gridqo`` row's O bytes written back, as a fraction
    of the O bytes written (:func:`measured_written_back`)."""
    rec, hw = _receipt(path)
    one = [r for r in rec["summary"] if r["pattern"] == "split" and r["sets"] == 1 and not r.get("missing")]
    out = []
    for ways in FIT_WAYS:
        se_split = sum((model_split_miss(hw, r["mib"], 1, ways=ways, l2_fraction=0.5, stored_share=0.5)
                        - r["miss_per_pass"]) ** 2 for r in one)
        for qw in FIT_Q_WEIGHTS:
            for share in FIT_WRITE_SHARES:
                for frac in FIT_WRITE_FRACTIONS:
                    se_r, se_w = grid_errors(hw, rec, ways=ways, q_share=qw, stored_share=share, l2_fraction=frac)
                    se_r += se_split
                    out.append((se_r + se_w, se_r, se_w, ways, qw, share, frac))
    out.sort()
    return out


def fit(path: str) -> int:
    """Rank the trial constants by the squared error of the model against a receipt's reads and writes (CPU, about
    5 minutes; :func:`fit_rows`): the source of :data:`~iomodel.cache.params.FORWARD_L2`."""
    rows = fit_rows(path)
    print("squared error: reads + writes, reads, writes; ways, Q weight, write share, write-back fraction")
    for r in rows[:8] + [r for r in rows if r[3:] == (24, 1.0, 0.5, 0.5)]:
        print(f"  {r[0]:.4f} {r[1]:.4f} {r[2]:.4f}  {r[3]:>4} {r[4]:>6} {r[5]:>6} {r[6]:>7}")
    return 0


def main(argv=None) -> int:
    from iomodel.paths import one_line_parser

    ap = one_line_parser(__doc__.splitlines()[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("--out", help="JSON receipt path")
    ap.add_argument("--compare", help="a receipt: print the L2 model's prediction beside it (CPU)")
    ap.add_argument("--fit", help="a receipt: rank trial ways, Q and write weights and write-back fractions against its "
                                  "reads and writes (CPU, about 4 min)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child)
    if a.compare or a.fit:
        from l2_microbench import cpu_command

        return cpu_command(lambda: compare(a.compare) if a.compare else fit(a.fit), a.compare or a.fit,
                           "l2_split_microbench.py")
    from l2_microbench import profiled_rows_or_error

    got = profiled_rows_or_error(__file__, _cases, METRICS, a.out, summarise)
    if got is None:
        return 2
    cases, measured, rows, env, device, num_sms = got
    print("split: re-fetch per pass, W (MiB) across, S sets down")
    print("  S " + " ".join(f"{m:>6}" for m in SPLIT_MIB))
    for s in SPLIT_SETS:
        cells = {r["mib"]: r for r in rows if r["pattern"] == "split" and r["sets"] == s}
        print(f"{s:>3} " + " ".join(f"{cells[m]['miss_per_pass']:>6.3f}" if m in cells and not cells[m].get("missing")
                                    else f"{'-':>6}" for m in SPLIT_MIB))
    print(f"grid: excess DRAM reads over one read of each of {GRID_SETS} sets, set MiB across, T down")
    print("  T " + " ".join(f"{m:>6}" for m in GRID_SET_MIB))
    for t in GRID_TILES:
        cells = {r["mib"]: r for r in rows if r["pattern"] == "grid" and r["tiles"] == t}
        print(f"{t:>3} " + " ".join(f"{cells[m]['excess']:>6.3f}" if m in cells and not cells[m].get("missing")
                                    else f"{'-':>6}" for m in GRID_SET_MIB))
    print("gridqo (400 programs a set): excess re-reads, set MiB across, (q, o) private blocks a program down")
    print("  q o " + " ".join(f"{m:>6}" for m in GRIDQO_SET_MIB))
    for q, o in GRIDQO_BLOCKS:
        cells = {r["mib"]: r for r in rows if r["pattern"] == "gridqo" and (r["q"], r["o"]) == (q, o)}
        print(f"  {q} {o} " + " ".join(f"{cells[m]['excess']:>6.3f}" if m in cells and not cells[m].get("missing")
                                      else f"{'-':>6}" for m in GRIDQO_SET_MIB))
    from l2_microbench import write_receipt

    return write_receipt(a.out, "iomodel.l2-split/1", "l2_split_microbench.py", env, device, num_sms, passes=PASSES, block_elems=BLOCK,
                         cases=cases, measured=measured, summary=rows)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
