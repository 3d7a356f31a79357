"""L2 microbenchmarks: what the H200's L2 holds, measured with Nsight Compute (issue 12, item 2).

Three access patterns, each over a working set of W bytes swept across the L2's size
(60 MiB on the H200 by the datasheet; 2 partitions of 30 MiB on Hopper), each run with
1 pass and with ``PASSES`` passes over the set, so that the DRAM bytes of the extra passes
are the re-reads (or write-backs) L2 did not absorb:

``shared-read``
    every program reads the whole set, in the same order, at about the same time: the
    pattern of K/V tiles read by all the query-tile programs of a head. A line used by SMs of
    both partitions may be held in both.
``private-read``
    each program reads only its own slice (W / programs): every line is used by one SM.
``private-write``
    each program overwrites its own slice on every pass: the DRAM writes inside the kernel
    are write-backs of dirty lines evicted before the kernel ends (lines still dirty at the end
    are not in the kernel's ``dram__bytes_write``; ncu flushes them outside the measurement).

Loads bypass L1 (``cache_modifier=".cg"``) so that re-reads reach L2. For each (pattern, W)
the result gives ``miss_per_pass`` = (DRAM bytes with PASSES passes − with 1 pass) /
((PASSES − 1) × W): 0 when the set stays resident, 1 when every pass re-fetches it.

Usage (on the GPU; ~1 min)::

    python3 benchmarks/l2_microbench.py --out $OUT/l2-micro-h200-<date>.json

Run on an H200 (receipts/l2-micro-h200-2026-12-01.json) and on an H100 (receipts/l2-micro-h100-2026-12-06.json and
its repeat ``-b``); :data:`iomodel.cache.physical.RECEIPTS` names the receipt behind each preset's measured read
fraction (``iomodel.cache.params.MEASURED_L2_READ_FRACTION``).

Runs itself under ``ncu --cache-control all --clock-control none`` (one process, kernels
tagged with NVTX ranges), parses ncu's CSV with :mod:`iomodel.measure.ncu`, prints a table
and writes a JSON receipt (command, device, date, every raw counter). Without a GPU or ncu it
prints one line and exits 2.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.errors import IomodelError  # noqa: E402

#: Working-set sizes in MiB (the H200 datasheet L2 is 60 MiB; its halves are 30 MiB).
SIZES_MIB = (8, 12, 16, 20, 24, 26, 28, 30, 32, 34, 36, 40, 44, 48, 52, 56, 60, 64, 72, 88)
PATTERNS = ("shared-read", "private-read", "private-write")
PASSES = 4
BLOCK = 2048  # int32 elements per program per step: 8 KiB
METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
    "l1tex__m_xbar2l1tex_read_bytes.sum",
    "l1tex__m_l1tex2xbar_write_bytes.sum",
)


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def l2_read(buf, out, slice_elems, passes, SHARED: tl.constexpr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * slice_elems * (1 - SHARED)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for _ in range(passes):
            for i in range(0, slice_elems, BLOCK):
                acc += tl.load(buf + base + i + offs, cache_modifier=".cg")
        tl.store(out + pid * BLOCK + offs, acc)

    @triton.jit
    def l2_write(buf, slice_elems, passes, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        base = pid.to(tl.int64) * slice_elems
        offs = tl.arange(0, BLOCK)
        for p in range(passes):
            for i in range(0, slice_elems, BLOCK):
                tl.store(buf + base + i + offs, offs + p)

    return l2_read, l2_write


def _cases(num_sms: int) -> list[dict]:
    programs = 2 * num_sms
    cases = []
    for pattern in PATTERNS:
        for mib in SIZES_MIB:
            elems = mib * 2**20 // 4
            if pattern == "shared-read":
                progs, slice_elems = num_sms, elems // BLOCK * BLOCK
            else:
                progs, slice_elems = programs, elems // programs // BLOCK * BLOCK
            working = slice_elems * 4 * (1 if pattern == "shared-read" else progs)
            for passes in (1, PASSES):
                cases.append({"id": f"{pattern}-{mib}MiB-p{passes}", "pattern": pattern, "mib": mib,
                              "passes": passes, "programs": progs, "slice_elems": slice_elems,
                              "working_set_bytes": working})
    return cases


def child(cases_file: str) -> int:
    """Launch every case once, each inside its own NVTX range (under ncu)."""
    import torch

    l2_read, l2_write = _kernels()
    cases, dev, gen = child_setup(cases_file)
    big = max(c["slice_elems"] * (1 if c["pattern"] == "shared-read" else c["programs"]) for c in cases)
    buf = torch.randint(-2**20, 2**20, (big,), generator=gen, device=dev, dtype=torch.int32)
    out = torch.empty(max(c["programs"] for c in cases) * BLOCK, device=dev, dtype=torch.int32)

    def launch(c):
        if c["pattern"] == "private-write":
            l2_write[(c["programs"],)](buf, c["slice_elems"], c["passes"], BLOCK=BLOCK, num_warps=8)
        else:
            l2_read[(c["programs"],)](buf, out, c["slice_elems"], c["passes"],
                                      SHARED=int(c["pattern"] == "shared-read"), BLOCK=BLOCK, num_warps=8)

    return launch_cases(cases, launch, lambda c: {**c, "passes": 1})


def launch_cases(cases: list[dict], launch, warm) -> int:
    """A child's work: ``launch(warm(case))`` for every case first (compiling outside the profiled region), then every
    case once inside its own NVTX range (:func:`iomodel.measure.child.profiled_range`). Shared by the L2
    microbenchmarks; returns 0 (the child's exit status)."""
    import torch

    from iomodel.measure.child import profiled_range

    for c in cases:
        launch(warm(c))
    torch.cuda.synchronize()
    for c in cases:
        with profiled_range(c["id"]):
            launch(c)
    return 0


def write_receipt(out: str, schema: str, script: str, env: dict, device: str, num_sms: int, **body) -> int:
    """Write a microbenchmark's JSON receipt atomically (nothing half-written): its schema, date, command
    (``python3 benchmarks/SCRIPT --out OUT``), environment, device and SM count, then ``body``; print where; return 0."""
    from iomodel.paths import write_text

    receipt = {"schema": schema, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
               "command": f"python3 benchmarks/{script} --out {out}", "environment": env, "device": device,
               "num_sms": num_sms, **body}
    write_text(out, json.dumps(receipt, indent=1) + "\n", "--out")
    print(f"wrote {out}")
    return 0


def timing(cases: list[dict]) -> list[dict]:
    """Seconds per pass without the profiler (median of do_bench), for the read patterns."""
    import torch
    import triton.testing

    l2_read, _ = _kernels()
    big = max(c["slice_elems"] * (1 if c["pattern"] == "shared-read" else c["programs"]) for c in cases)
    buf = torch.ones(big, device="cuda", dtype=torch.int32)
    out = torch.empty(max(c["programs"] for c in cases) * BLOCK, device="cuda", dtype=torch.int32)
    rows = []
    for c in cases:
        if c["pattern"] == "private-write" or c["passes"] != PASSES:
            continue
        fn = lambda c=c: l2_read[(c["programs"],)](buf, out, c["slice_elems"], c["passes"],  # noqa: E731
                                                   SHARED=int(c["pattern"] == "shared-read"), BLOCK=BLOCK, num_warps=8)
        ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
        requested = c["slice_elems"] * 4 * c["programs"] * c["passes"]
        rows.append({"id": c["id"], "ms": ms, "sm_requested_bytes": requested,
                     "l2_to_sm_bytes_per_s": requested / (ms * 1e-3)})
    return rows


def summarise(cases: list[dict], measured: dict[str, dict]) -> list[dict]:
    """Per (pattern, W): DRAM bytes of 1 and PASSES passes and the re-fetch per pass."""
    rows = []
    for c in cases:
        if c["passes"] != PASSES:
            continue
        one = measured.get(c["id"].replace(f"-p{PASSES}", "-p1"))
        many = measured.get(c["id"])
        if not one or not many:
            rows.append({"pattern": c["pattern"], "mib": c["mib"], "missing": True})
            continue
        key = "dram__bytes_write.sum" if c["pattern"] == "private-write" else "dram__bytes_read.sum"
        w = c["working_set_bytes"]
        extra = (many[key] or 0) - (one[key] or 0)
        rows.append({"pattern": c["pattern"], "mib": c["mib"], "working_set_bytes": w,
                     "dram_1pass": one[key], f"dram_{PASSES}pass": many[key],
                     "miss_per_pass": extra / ((PASSES - 1) * w),
                     "ltcfabric_sectors": many.get("lts__t_sectors_srcunit_ltcfabric.sum")})
    return rows


def profile_cases(script: str, make_cases, metrics, out: str | None) -> tuple[list[dict], dict[str, dict], str, int]:
    """Run ``script --child CASES`` once under ``ncu --cache-control all --clock-control none``
    (each case in its own NVTX range) and parse its CSV: ``(cases, metrics per case id, ncu path,
    SM count)``; ``make_cases(num_sms)`` builds the cases. Shared by the L2 microbenchmarks.

    Raises:
        IomodelError: no GPU or ncu, no ``out`` path, or ncu failing (one line).
    """
    from iomodel.measure.ncu import build_command, check_gpu, find_ncu, parse_csv

    from iomodel.paths import check_output_file

    if not out:
        raise IomodelError("give --out PATH for the JSON receipt")
    check_output_file(out, "--out", "receipt JSON")  # before any GPU time is spent
    check_gpu()
    ncu = find_ncu()
    import torch

    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = make_cases(num_sms)
    with tempfile.TemporaryDirectory() as tmp:
        cf = Path(tmp) / "cases.json"
        cf.write_text(json.dumps(cases))
        log = Path(tmp) / "ncu.csv"
        argv2 = build_command(ncu, [sys.executable, script, "--child", str(cf)], log, metrics=metrics)
        proc = subprocess.run(argv2, capture_output=True, text=True, timeout=540)
        text = log.read_text() if log.exists() else ""
        if proc.returncode != 0:
            raise IomodelError(f"ncu exited {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}")
    return cases, {k.tag: k.record.metrics for k in parse_csv(text, metrics) if k.tag}, ncu, num_sms


def profiled_rows(script: str, make_cases, metrics, out: str | None, summarise) -> tuple:
    """:func:`profile_cases`, then ``summarise(cases, measured)``: ``(cases, measured, rows, environment, device name,
    SM count)`` for a microbenchmark's receipt. Shared by the L2 microbenchmarks.

    Raises:
        IomodelError: as :func:`profile_cases` (no GPU or ncu, no ``out``, ncu failing).
    """
    from iomodel.measure.ncu import environment

    cases, measured, ncu, num_sms = profile_cases(script, make_cases, metrics, out)
    import torch

    return cases, measured, summarise(cases, measured), environment(ncu), torch.cuda.get_device_name(0), num_sms


def cpu_command(run, path: str, script: str) -> int:
    """A microbenchmark's CPU command on a receipt (``--compare``, ``--fit``): ``run()``'s exit status, or 2 with one
    ``error:`` line on stderr where the receipt is missing or corrupt (an :class:`IomodelError`, or a row or counter
    missing or of the wrong type: re-run ``benchmarks/SCRIPT`` on the GPU). Shared by the L2 microbenchmarks."""
    try:
        return run()
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:  # a row or counter missing or of the wrong type
        print(f"error: {path} has a corrupt row ({type(e).__name__}: {e}): re-run benchmarks/{script} on the GPU",
              file=sys.stderr)
        return 2


def profiled_rows_or_error(script: str, make_cases, metrics, out: str | None, summarise) -> tuple | None:
    """:func:`profiled_rows`, or None after one ``error:`` line on stderr (no GPU or ncu, no ``out``, ncu failing)."""
    try:
        return profiled_rows(script, make_cases, metrics, out, summarise)
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return None


def child_setup(cases_file: str) -> tuple:
    """A child's cases (the JSON file the parent wrote), CUDA device and seeded generator: ``(cases, device, gen)``."""
    import torch

    cases = json.loads(Path(cases_file).read_text())
    dev = torch.device("cuda")
    return cases, dev, torch.Generator(device=dev).manual_seed(0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON receipt path")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child)
    try:
        cases, measured, rows, env, device, num_sms = profiled_rows(__file__, _cases, METRICS, a.out, summarise)
        times = timing(cases)
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{'pattern':14} {'W MiB':>6} {'DRAM 1 pass':>12} {'DRAM %d pass' % PASSES:>12} {'miss/pass':>9}")
    for r in rows:
        if r.get("missing"):
            print(f"{r['pattern']:14} {r['mib']:>6} (not measured)")
            continue
        print(f"{r['pattern']:14} {r['mib']:>6} {r['dram_1pass'] / 2**20:>10.1f}Mi {r[f'dram_{PASSES}pass'] / 2**20:>10.1f}Mi "
              f"{r['miss_per_pass']:>9.3f}")
    return write_receipt(a.out, "iomodel.l2-micro/1", "l2_microbench.py", env, device, num_sms, passes=PASSES,
                         block_elems=BLOCK, cases=cases, measured=measured, summary=rows, timing=times)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
