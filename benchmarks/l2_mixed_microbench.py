"""L2 microbenchmark of a mixed pattern: how much does a stream of use-once lines displace a shared set?

Issue 12, items 2 and 3. The L2 model charges every byte touched between two uses of a K/V line
against the effective capacity: a Q tile (read once, by one SM) at weight 1, an O tile (written
once) at ``l2_fraction`` = 0.5. Beyond L2 the model over-predicts K/V re-fetches
(docs/l2-calibration.md, "Peer hold-out"), and a probe that halves Q's weight fixes the reads
but not the writes ("Capacity edge"). This benchmark measures the weights directly.

Every one of num_SMs programs reads a shared set of S bytes per pass, in the same order at about
the same time (the K/V of a head, ``shared-read`` of ``benchmarks/l2_microbench.py``), and between
its shared blocks touches a stream of fresh private blocks, P bytes per pass over all programs,
never touched again: ``read`` (Q-like loads) or ``write`` (O-like stores), or none. The shared
set's re-fetch per pass is

    (DRAM reads with 4 passes − with 1 pass − the stream's extra reads) / (3·S),

and its half-miss point S_half(P) moves from S_half(0) by w·P if a stream byte displaces w
shared bytes (w = 1: plain LRU; w = 0: a scan-resistant policy that evicts use-once lines
first). Loads bypass L1 (``.cg``).

Usage (on the GPU; about a minute)::

    python3 benchmarks/l2_mixed_microbench.py --out $OUT/l2-mixed-h200-<date>.json

It runs itself under ``ncu --cache-control all --clock-control none`` (one process, NVTX ranges),
prints the re-fetch table and the fitted weights, and writes a JSON receipt (command, device, date,
every raw counter). Without a GPU or ncu it prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from iomodel.cache.physical import half_point  # noqa: E402
from iomodel.errors import IomodelError  # noqa: E402

#: Shared-set sizes in MiB around the measured shared half point (31.1 MiB, l2-micro receipt).
SHARED_MIB = (12, 16, 20, 24, 26, 28, 30, 32, 34, 38)
#: Stream blocks per program per pass (P = blocks × programs × 8 KiB: 8.25 and 16.5 MiB on 132 SMs).
STREAM_BLOCKS = (8, 16)
STREAMS = ("none", "read", "write")
PASSES = 4
BLOCK = 2048  # int32 elements per block: 8 KiB
METRICS = ("gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum")


def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def mixed(shared, stream, out, n_shared, n_stream, passes, STREAM: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        progs = tl.num_programs(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        step = tl.maximum(n_shared // tl.maximum(n_stream, 1), 1)
        for p in range(passes):
            base = ((p * progs + pid) * n_stream).to(tl.int64) * BLOCK
            for j in range(n_shared):
                acc += tl.load(shared + j.to(tl.int64) * BLOCK + offs, cache_modifier=".cg")
                k = j // step
                if STREAM != 0:
                    if (j % step == 0) & (k < n_stream):
                        ptr = stream + base + k.to(tl.int64) * BLOCK + offs
                        if STREAM == 1:
                            acc += tl.load(ptr, cache_modifier=".cg")
                        else:
                            tl.store(ptr, offs + p)
        tl.store(out + pid * BLOCK + offs, acc)

    return mixed


def _cases(num_sms: int) -> list[dict]:
    cases = []
    for stream in STREAMS:
        for nb in ((0,) if stream == "none" else STREAM_BLOCKS):
            for mib in SHARED_MIB:
                n_shared = mib * 2**20 // (BLOCK * 4)
                for passes in (1, PASSES):
                    cases.append({"id": f"{stream}{nb}-{mib}MiB-p{passes}", "stream": stream, "stream_blocks": nb,
                                  "mib": mib, "passes": passes, "programs": num_sms, "n_shared": n_shared,
                                  "shared_bytes": n_shared * BLOCK * 4,
                                  "stream_bytes_per_pass": nb * num_sms * BLOCK * 4})
    return cases


def child(cases_file: str) -> int:
    """Launch every case once, each inside its own NVTX range (under ncu)."""
    import torch


    from l2_microbench import child_setup, launch_cases

    mixed = _kernel()
    cases, dev, gen = child_setup(cases_file)
    shared = torch.randint(-2**20, 2**20, (max(c["n_shared"] for c in cases) * BLOCK,), generator=gen, device=dev,
                           dtype=torch.int32)
    stream = torch.randint(-2**20, 2**20, (max(c["stream_bytes_per_pass"] for c in cases) * PASSES // 4,),
                           generator=gen, device=dev, dtype=torch.int32)
    out = torch.empty(max(c["programs"] for c in cases) * BLOCK, device=dev, dtype=torch.int32)

    def launch(c):
        mixed[(c["programs"],)](shared, stream, out, c["n_shared"], c["stream_blocks"], c["passes"],
                                STREAM=STREAMS.index(c["stream"]), BLOCK=BLOCK, num_warps=8)

    return launch_cases(cases, launch, lambda c: {**c, "passes": 1})


def summarise(cases: list[dict], measured: dict[str, dict]) -> list[dict]:
    """Per (stream, P, S): the shared set's re-fetch per pass (reads) and the stream's write-backs."""
    rows = []
    for c in cases:
        if c["passes"] != PASSES:
            continue
        one, many = measured.get(c["id"].replace(f"-p{PASSES}", "-p1")), measured.get(c["id"])
        if not one or not many:
            rows.append({**{k: c[k] for k in ("stream", "stream_blocks", "mib")}, "missing": True})
            continue
        extra_r = (many["dram__bytes_read.sum"] or 0) - (one["dram__bytes_read.sum"] or 0)
        if c["stream"] == "read":
            extra_r -= (PASSES - 1) * c["stream_bytes_per_pass"]  # fresh stream lines: compulsory
        rows.append({"stream": c["stream"], "stream_blocks": c["stream_blocks"], "mib": c["mib"],
                     "shared_bytes": c["shared_bytes"], "stream_bytes_per_pass": c["stream_bytes_per_pass"],
                     "dram_read_1pass": one["dram__bytes_read.sum"], f"dram_read_{PASSES}pass": many["dram__bytes_read.sum"],
                     "dram_write_1pass": one["dram__bytes_write.sum"],
                     f"dram_write_{PASSES}pass": many["dram__bytes_write.sum"],
                     "shared_miss_per_pass": extra_r / ((PASSES - 1) * c["shared_bytes"])})
    return rows


def half_points(rows: list[dict]) -> dict[str, float | None]:
    """S (MiB) where the shared re-fetch per pass crosses 0.5, by linear interpolation, per (stream, P)."""
    out: dict[str, float | None] = {}
    keys = sorted({(r["stream"], r["stream_blocks"]) for r in rows if not r.get("missing")})
    for key in keys:
        out[f"{key[0]}{key[1]}"] = half_point(sorted((r["mib"], r["shared_miss_per_pass"]) for r in rows
                                                     if not r.get("missing") and (r["stream"], r["stream_blocks"]) == key))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON receipt path")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child)
    try:
        from l2_microbench import profiled_rows

        cases, measured, rows, env, device, num_sms = profiled_rows(__file__, _cases, METRICS, a.out, summarise)
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    halves = half_points(rows)
    print(f"{'stream':8} {'P MiB':>6} {'S MiB':>6} {'shared miss/pass':>16} {'DRAM W 4 pass':>14}")
    for r in rows:
        if r.get("missing"):
            print(f"{r['stream']:8} {r['stream_blocks']:>6} {r['mib']:>6} (not measured)")
            continue
        print(f"{r['stream']:8} {r['stream_bytes_per_pass'] / 2**20:>6.2f} {r['mib']:>6} {r['shared_miss_per_pass']:>16.3f} "
              f"{r[f'dram_write_{PASSES}pass'] / 2**20:>12.1f}Mi")
    base = halves.get("none0")
    weights = {}
    for k, v in halves.items():
        if k == "none0" or v is None or base is None:
            continue
        p = next(r["stream_bytes_per_pass"] for r in rows if f"{r['stream']}{r['stream_blocks']}" == k) / 2**20
        weights[k] = (base - v) / p
    print("half-miss points (MiB):", {k: (round(v, 2) if v is not None else None) for k, v in halves.items()})
    print("displacement weight w per stream byte:", {k: round(v, 3) for k, v in weights.items()})
    from l2_microbench import write_receipt

    return write_receipt(a.out, "iomodel.l2-mixed/1", "l2_mixed_microbench.py", env, device, num_sms, passes=PASSES, block_elems=BLOCK,
                         cases=cases, measured=measured, summary=rows, half_points_mib=halves, displacement_weights=weights)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
