"""L2 microbenchmark of a long causal forward's wave boundary: one K/V set re-read by every SM, with private Q and O
traffic between the passes.

Issue 12, items 2 and 3. Past the capacity edge the bundled kernel's long causal forwards (reverse tile order, programs
in step) read 0.83-0.92x the L2 model on both devices (docs/l2-calibration.md, "Long causal forwards: what the Q and O
of a wave displace"), while an LRU of K/V blocks alone at the measured read capacity (``benchmarks/drift_sim.py``,
in step) is within 6 % of the same runs. Between the previous wave's read of a K/V block and the next wave's, the L2
sees the rest of the previous range, that wave's O stores and the next wave's Q loads: the model weighs a Q byte
``q_share`` and a written byte ``write_share`` (:data:`iomodel.cache.params.FORWARD_L2`, fitted on the ``gridqo``
pattern of ``l2_split_microbench.py``, where a wave's Q is up to 26 MB and a set is re-read by the next wave's
programs). This pattern measures the displacement where it acts in a long causal forward:

``cyclic``
    One set of W bytes re-read ``PASSES`` times, in the same order, by ``num_SMs`` programs (one an SM, as the
    forward's 132 programs of 128x128 tiles), loads bypassing L1 (``.cg``). Before each pass every program reads ``q``
    private 8 KiB blocks (Q tiles: a block never read again, different each pass) and after it writes ``o`` private
    8 KiB blocks (O tiles, different each pass). The re-fetch per pass is (DRAM reads with ``PASSES`` passes − with 1
    pass − the extra passes' Q blocks, read once each) / ((``PASSES`` − 1)·W). Where the private bytes displace the
    set's lines as ``q_share``·Q + ``write_share``·O bytes of the set would, the half-miss point of W moves down by
    that many bytes. (4, 4) is a long causal forward's wave: 132 programs, each with a 32 KiB Q and O tile (128 rows,
    HEAD_DIM 128, bf16).

Usage (on the GPU; about a minute)::

    python3 benchmarks/l2_cyclic_microbench.py --out $OUT/l2-cyclic-<device>-<date>.json

It prints the re-fetch table and writes a JSON receipt (command, device, date, every raw counter). Without a GPU or
ncu it prints one line and exits 2. ``--compare RECEIPT`` (CPU) prints the L2 model's re-fetch per pass of every case
(:func:`model_cyclic_miss`, the receipt's device preset, its measured read fraction) at the forward's constants and at
other Q and written-byte weights beside the measured values. Calibration data.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


#: Working sets W (MiB) and (q, o) private 8 KiB blocks a program reads before and writes after each pass.
CYCLIC_MIB = (16, 20, 22, 24, 26, 28, 30, 32, 36, 40, 48)
CYCLIC_BLOCKS = ((0, 0), (4, 0), (8, 0), (16, 0), (0, 4), (0, 8), (0, 16), (4, 4), (8, 8))
from iomodel.errors import IomodelError  # noqa: E402
from l2_mixed_microbench import BLOCK, METRICS, PASSES  # noqa: E402  (the same passes, blocks and counters)


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def cyclic_qo(buf, qbuf, obuf, set_blocks, passes, programs, keep, Q: tl.constexpr, O: tl.constexpr,
                  BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for p in range(passes):
            row = (p * programs + pid).to(tl.int64)
            for i in tl.static_range(Q):
                acc += tl.load(qbuf + (row * Q + i) * BLOCK + offs, cache_modifier=".cg")
            for j in range(set_blocks):
                acc += tl.load(buf + j * BLOCK + offs, cache_modifier=".cg")  # j * BLOCK < 2^31
            for i in tl.static_range(O):
                tl.store(obuf + (row * O + i) * BLOCK + offs, acc + i)
        if O == 0:  # keep the loads without storing a byte: keep = 0 at run time (a mask known to be empty at compile
            tl.store(obuf + offs, acc, mask=offs < keep)  # time let the compiler drop every load: the first run's o = 0 rows)

    return cyclic_qo


def case_id(mib: int, q: int, o: int, passes: int) -> str:
    return f"cyclic-{mib}MiB-q{q}-o{o}-p{passes}"


def _cases(num_sms: int) -> list[dict]:
    cases = []
    for q, o in CYCLIC_BLOCKS:
        for mib in CYCLIC_MIB:
            blocks = mib * 2**20 // (BLOCK * 4)
            for passes in (1, PASSES):
                cases.append({"id": case_id(mib, q, o, passes), "pattern": "cyclic", "mib": mib, "q": q, "o": o,
                              "passes": passes, "programs": num_sms, "set_blocks": blocks,
                              "working_set_bytes": blocks * BLOCK * 4})
    return cases


def child(cases_file: str) -> int:
    """Launch every case once, each inside its own NVTX range (under ncu)."""
    import torch

    from l2_microbench import child_setup, launch_cases

    kern = _kernel()
    cases, dev, gen = child_setup(cases_file)
    buf = torch.randint(-2**20, 2**20, (max(c["working_set_bytes"] for c in cases) // 4,), generator=gen, device=dev,
                        dtype=torch.int32)
    qmost = max(c["programs"] * c["passes"] * max(c["q"], 1) for c in cases)
    omost = max(c["programs"] * c["passes"] * max(c["o"], 1) for c in cases)
    qbuf = torch.randint(-2**20, 2**20, (qmost * BLOCK,), generator=gen, device=dev, dtype=torch.int32)
    obuf = torch.empty(omost * BLOCK, device=dev, dtype=torch.int32)

    def launch(c):
        kern[(c["programs"],)](buf, qbuf, obuf, c["set_blocks"], c["passes"], c["programs"], 0, Q=c["q"], O=c["o"],
                               BLOCK=BLOCK, num_warps=8)

    return launch_cases(cases, launch, lambda c: {**c, "passes": min(c["passes"], 2)})


def summarise(cases: list[dict], measured: dict[str, dict]) -> list[dict]:
    """Per (q, o, W): DRAM reads and writes of 1 and ``PASSES`` passes, the re-fetch per pass (a fraction of W, the
    extra passes' Q blocks taken off) and the DRAM writes per extra pass (a fraction of the O bytes a pass writes)."""
    rows = []
    for c in cases:
        if c["passes"] != PASSES:
            continue
        one, many = measured.get(case_id(c["mib"], c["q"], c["o"], 1)), measured.get(c["id"])
        base = {"pattern": "cyclic", "mib": c["mib"], "q": c["q"], "o": c["o"]}
        if not one or not many:
            rows.append({**base, "missing": True})
            continue
        w = c["working_set_bytes"]
        q_pass = c["q"] * c["programs"] * BLOCK * 4
        o_pass = c["o"] * c["programs"] * BLOCK * 4
        extra_r = (many["dram__bytes_read.sum"] or 0) - (one["dram__bytes_read.sum"] or 0) - (PASSES - 1) * q_pass
        extra_w = (many["dram__bytes_write.sum"] or 0) - (one["dram__bytes_write.sum"] or 0)
        rows.append({**base, "working_set_bytes": w, "q_bytes_per_pass": q_pass, "o_bytes_per_pass": o_pass,
                     "dram_read_1pass": one["dram__bytes_read.sum"], f"dram_read_{PASSES}pass": many["dram__bytes_read.sum"],
                     "dram_write_1pass": one["dram__bytes_write.sum"],
                     f"dram_write_{PASSES}pass": many["dram__bytes_write.sum"],
                     "miss_per_pass": extra_r / ((PASSES - 1) * w),
                     "written_back_per_pass": extra_w / ((PASSES - 1) * o_pass) if o_pass else None})
    return rows


#: Bytes of one item of the modelled set (as ``l2_split_microbench.MODEL_CHUNK``).
MODEL_CHUNK = 512 * 1024


def model_cyclic_miss(hardware, working_mib: int, q: int, o: int, programs: int, **kw) -> float:
    """The L2 model's re-fetch per pass of the ``cyclic`` pattern (a fraction of W): one wave (every program resident,
    in step), each pass the programs' ``q`` private Q blocks, the set's chunks once, their ``o`` private O blocks
    (written), read misses judged at ``hardware``'s read capacity; ``kw``: :class:`~iomodel.cache.params.L2Params`
    fields to try (``q_share``, ``stored_share``, ``ways``, ``l2_fraction``; the forward's constants otherwise). Raises
    nothing itself."""
    from iomodel.schedule.grid import Access
    from l2_split_microbench import _model_params, _simulate

    p = _model_params(hardware, **kw)
    n = working_mib * 2**20 // MODEL_CHUNK
    blk = BLOCK * 4

    def k_reads(passes: int) -> float:
        wave = []
        for pz in range(passes):
            wave += [Access("Q", ("Q", pz, x, i), blk) for x in range(programs) for i in range(q)]
            wave += [Access("K", ("K", c), MODEL_CHUNK) for c in range(n)]
            wave += [Access("O", ("O", pz, x, i), blk, write=True) for x in range(programs) for i in range(o)]
        return _simulate(p, "cyclic", [wave]).hbm_read.get("K", 0)

    return (k_reads(PASSES) - k_reads(1)) / ((PASSES - 1) * n * MODEL_CHUNK)


#: Weights the comparison tries beside the forward's constants: (Q byte, written byte).
TRIAL_SHARES = ((0.125, 0.125), (0.25, 0.25), (0.5, 0.5), (1.0, 1.0))


def compare(path: str) -> int:
    """Print the model's re-fetch per pass of a receipt's cases beside the measured values (CPU): the forward's
    constants (:data:`~iomodel.cache.params.FORWARD_L2`), then :data:`TRIAL_SHARES` (the forward's ways and write-back
    fraction kept). Computed before printed."""
    from iomodel.cache.params import forward_l2_of
    from l2_split_microbench import _receipt

    rec, hw = _receipt(path, "cyclic", "l2_cyclic_microbench.py")
    for r in rec["summary"]:
        if r.get("missing"):
            continue
        sizes = [r.get(k) for k in ("mib", "q", "o")]
        miss = r.get("miss_per_pass")
        if (any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in sizes) or not r["mib"]
                or isinstance(miss, bool) or not isinstance(miss, (int, float)) or not math.isfinite(miss)):
            raise IomodelError(f"{path} has a corrupt row {r!r} (mib a positive whole number, q and o whole numbers "
                               "from 0, miss_per_pass a finite number): re-run benchmarks/l2_cyclic_microbench.py on "
                               "the GPU")
    f = forward_l2_of(hw)
    lines = [f"{hw.name}: re-fetch per pass, measured, then the model at (Q, written) = ({f.q_share:g}, "
             f"{f.write_share:g}) [the forward's, {f.ways} ways] and at " + ", ".join(f"({a:g}, {b:g})"
                                                                                    for a, b in TRIAL_SHARES)]
    for r in rec["summary"]:
        if r.get("missing"):
            continue
        mods = [model_cyclic_miss(hw, r["mib"], r["q"], r["o"], rec["num_sms"])]
        mods += [model_cyclic_miss(hw, r["mib"], r["q"], r["o"], rec["num_sms"], ways=f.ways, l2_fraction=f.write_fraction,
                                   q_share=a, stored_share=b) for a, b in TRIAL_SHARES]
        lines.append(f"  q{r['q']:<2} o{r['o']:<2} {r['mib']:>3} MiB  {r['miss_per_pass']:6.3f} | "
                     + " ".join(f"{m:6.3f}" for m in mods))
    print("\n".join(lines))
    return 0


def main(argv=None) -> int:
    from iomodel.paths import one_line_parser

    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON receipt path")
    ap.add_argument("--compare", help="a receipt: print the L2 model's re-fetch beside it (CPU)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child)
    from l2_microbench import cpu_command, profiled_rows_or_error

    if a.compare:
        return cpu_command(lambda: compare(a.compare), a.compare, "l2_cyclic_microbench.py")
    got = profiled_rows_or_error(__file__, _cases, METRICS, a.out, summarise)
    if got is None:
        return 2
    cases, measured, rows, env, device, num_sms = got
    print("cyclic: re-fetch per pass (DRAM writes per extra pass / O bytes), W (MiB) across, (q, o) down")
    print("   q  o " + " ".join(f"{m:>6}" for m in CYCLIC_MIB))
    for q, o in CYCLIC_BLOCKS:
        cells = {r["mib"]: r for r in rows if (r["q"], r["o"]) == (q, o)}
        print(f"  {q:>2} {o:>2} " + " ".join(f"{cells[m]['miss_per_pass']:>6.3f}" if m in cells and not cells[m].get("missing")
                                          else f"{'-':>6}" for m in CYCLIC_MIB))
        if o:
            print("        " + " ".join(f"{cells[m]['written_back_per_pass']:>6.3f}" if m in cells and not cells[m].get("missing")
                                      else f"{'-':>6}" for m in CYCLIC_MIB))
    from l2_microbench import write_receipt

    return write_receipt(a.out, "iomodel.l2-cyclic/1", "l2_cyclic_microbench.py", env, device, num_sms, passes=PASSES,
                         block_elems=BLOCK, cases=cases, measured=measured, summary=rows)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
