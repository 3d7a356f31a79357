"""The causal dK/dV kernel one wave per phase against every wave touch by touch (issue 12, item 4).

Run: ``PYTHONPATH=. python benchmarks/dkdv_periodic_check.py [--quick] [--out FILE.json]``.

For each layer (H200, its default L2, the worksheet's backward tiles and programs per SM), the ``_bwd_dkdv`` kernel
of the causal training step is evaluated twice in one run: every wave touch by touch (``_drive``) and one wave per
phase (:func:`iomodel.cache.stream.periodic_dkdv`, which :func:`~iomodel.cache.stream.fast_kernel_l2` takes past
:data:`~iomodel.cache.stream.PERIODIC_MIN_TOUCHES` touches where it pays). It prints whether the rounded bytes per
tensor are equal (reads, writes, dirty at the end), the waves, the phases and warm-ups, and both wall times
(seconds of this process, one run each; other load on the machine adds to them). The layers are large batches of
GQA and MHA layers at 4k-32k tokens, where the KV lanes (B·H_kv) outnumber the phases, and two where it declines
(a single sequence, whose waves are all of other phases). ``--quick`` keeps the first three layers.
"""

from __future__ import annotations

import argparse
import sys
import time

from iomodel.cache import estimate
from iomodel.cache.stream import _DkdvEvents, _drive, periodic_dkdv
from iomodel.paths import check_output_file, exit_code_of, probe_exit_code
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware

#: The worksheet's backward tiles of a HEAD_DIM 128 layer (BWD_BLOCK_M 32, BWD_BLOCK_N 64).
WORKSHEET_TILES = Tiling(bwd_block_m=32, bwd_block_n=64, dq_block_m=128, dq_block_n=64)
#: (B, H, H_kv, HEAD_DIM, seqlen, dtype, tiles)
LAYERS = (
    (64, 32, 8, 128, 16384, "bf16", WORKSHEET_TILES),
    (32, 16, 16, 64, 8192, "fp16", Tiling()),
    (1, 32, 8, 128, 16384, "bf16", Tiling()),
    (128, 32, 8, 128, 8192, "bf16", WORKSHEET_TILES),
    (16, 32, 32, 128, 32768, "bf16", WORKSHEET_TILES),
    (64, 16, 16, 64, 16384, "fp16", Tiling()),
    (256, 32, 8, 128, 4096, "bf16", Tiling()),
    (8, 32, 8, 128, 32768, "bf16", Tiling()),
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first three layers only")
    ap.add_argument("--out", help="also write the rows as JSON (written whole at the end, or not at all)")
    args = ap.parse_args()
    if args.out and exit_code_of(lambda: check_output_file(args.out, "--out")):
        return 2
    started = time.time()
    rows = []
    print(f"{'layer':<40} {'touches':>11} {'waves':>6} {'same bytes':>10} {'every wave s':>12} {'per phase s':>11}  how")
    for B, H, kv, d, n, dt, tiling in LAYERS[:3] if args.quick else LAYERS:
        spec = LayerSpec(B, H, kv, d, n, n, dtype=dt, causal=True, backward=True)
        p = estimate.dkdv_l2_params(spec, tiling, get_hardware("H200"))
        model = _DkdvEvents(spec, tiling, p.resident_programs, p.write_share)
        t0 = time.perf_counter()
        engine = model.engine(p.capacity, p.ways)
        engine.judge_reads_at(p.read_capacity)
        _drive(model, engine)
        every = engine.finish("_bwd_dkdv", model.requested_read, model.requested_write)
        t_every = time.perf_counter() - t0
        t0 = time.perf_counter()
        phased = periodic_dkdv(model, p.capacity, p.ways, p.read_capacity)
        t_phase = time.perf_counter() - t0
        same = None if phased is None else (phased.hbm_read == every.hbm_read and phased.hbm_write == every.hbm_write
                                           and phased.dirty_at_end == every.dirty_at_end)
        name = f"B{B} H{H} KV{kv} d{d} {n} {dt} {tiling.bwd_block_m}x{tiling.bwd_block_n}"
        how = "declined (every wave)" if phased is None else phased.note.split(": ")[0]
        rows.append({"layer": name, "touches": model.all_touches, "waves": len(model.p0), "same_bytes": same,
                     "seconds": {"every_wave": t_every, "per_phase": t_phase}, "how": how,
                     "read_bytes": sum(every.hbm_read.values()), "write_bytes": sum(every.hbm_write.values())})
        print(f"{name:<40} {model.all_touches:>11,} {len(model.p0):>6} {'-' if same is None else str(same):>10} "
              f"{t_every:>12.2f} {t_phase:>11.3f}  {how}", flush=True)
    if any(r["same_bytes"] is False for r in rows):
        print("error: a layer's bytes differ", file=sys.stderr)
        return 1
    return probe_exit_code(args.out, {"command": "PYTHONPATH=. python benchmarks/dkdv_periodic_check.py", "rows": rows},
                           started)


if __name__ == "__main__":
    sys.exit(main())
