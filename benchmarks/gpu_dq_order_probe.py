"""GPU probe (issues 11 and 12): the causal dQ kernel's query tiles longest first.

The dQ kernel launched its query tiles in grid order, the shortest causal tile first. On the H200 its
DRAM reads left the L2 model between 64k and 128k tokens (``receipts/ncu-h200-long-train-probe1-2026-12-05.json``:
22.75x the prediction at 128k, about one K/V stream per program), while the forward, Q-stationary too but
launched longest tile first (``tile_order`` reverse), kept within 10 %. A reading: programs that start one by
one as others end start further and further apart when each new tile is longer than the last (start gaps
grow by the length step every wave), until the programs of a head cover all its K/V at once and the LRU
re-reads miss; heaviest first, the gaps shrink. ``BackwardConfig.dq_tile_order`` ``reverse`` launches the dQ
tiles of each head from the last one down (the same programs, tiles and bytes requested).

1. ``check``: dq of both orders bit-identical (GQA, both alignments, ragged tails).
2. ``speed``: issue 11's causal rows (B·N = 16k tokens, H = 16, HEAD_DIM 64 and 128, bf16, N 1k-16k): forward +
   backward with the default backward, with ``dq_tile_order`` reverse, SDPA FLASH and SDPA cuDNN, interleaved;
   and the dQ kernel alone in both orders.
3. ``ncu``: DRAM bytes of the dQ kernel alone in both orders at long lengths (Nsight Compute, ``--cache-control
   all --clock-control none``), one process per launch.

    python3 benchmarks/gpu_dq_order_probe.py --out $OUT/dq-order-probe-h200-<date>.json [--skip check,speed,ncu]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.errors import IomodelError  # noqa: E402
from iomodel.measure.ncu import benchmark_finish, benchmark_start, parse_csv  # noqa: E402

#: (B, H, H_kv, N, d) of the ncu stage: the Llama-3-8B-like layer of the long-train probe at 64k and 128k tokens.
NCU_SHAPES = [(1, 32, 8, 65536, 128), (1, 32, 8, 131072, 128)]
METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum"


def _inputs(B, H, Hkv, N, d, dt=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
    k, v = (torch.randn(B, Hkv, N, d, device="cuda", generator=g, dtype=dt) for _ in range(2))
    return q, k, v, do


def _config(d, causal, order):
    from kernels import backward as bw
    return dataclasses.replace(bw.backward_config(d, "bf16", causal), dq_tile_order=order)


def check() -> list[dict]:
    from kernels import backward as bw
    from kernels.flash_attention import flash_attention
    rows = []
    for B, H, Hkv, Nq, Nk, d, align in [(2, 8, 2, 1000, 1000, 128, "top-left"), (1, 4, 1, 513, 777, 64, "bottom-right"),
                                          (1, 32, 8, 4096, 4096, 128, "top-left")]:
        g = torch.Generator(device="cuda").manual_seed(1)
        q, do = (torch.randn(B, H, Nq, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(B, Hkv, Nk, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        o, lse = flash_attention(q, k, v, True, align)
        a = bw.flash_attention_backward(do, q, k, v, o, lse, True, align, config=_config(d, True, "forward"))
        b = bw.flash_attention_backward(do, q, k, v, o, lse, True, align, config=_config(d, True, "reverse"))
        same = {n: bool(torch.equal(x, y)) for n, x, y in zip(("dq", "dk", "dv"), a, b)}
        rows.append(dict(shape=[B, H, Hkv, Nq, Nk, d, align], bit_identical=same))
        print("check", rows[-1], flush=True)
    return rows


def speed(rounds: int) -> list[dict]:
    from iomodel.bench.timing import do_bench_interleaved
    from kernels import backward as bw
    from kernels.flash_attention import flash_attention
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_backward_tune import sdpa_step

    out = []
    for d, N in itertools.product((128, 64), (1024, 2048, 4096, 8192, 16384)):
        B, H = 16384 // N, 16
        q, k, v, do = _inputs(B, H, H, N, d)
        q, k, v = (t.requires_grad_(True) for t in (q, k, v))
        flops = 3.5 * 4 * B * H * d * N * (N + 1) // 2
        cfg = {o: _config(d, True, o) for o in ("forward", "reverse")}

        def step(order):
            def fn():
                o, lse = flash_attention(q, k, v, True)
                return bw.flash_attention_backward(do, q.detach(), k.detach(), v.detach(), o.detach(), lse, True,
                                                   config=cfg[order])
            return fn

        with torch.no_grad():
            o, lse = flash_attention(q.detach(), k.detach(), v.detach(), True)
        qd, kd, vd = q.detach(), k.detach(), v.detach()
        plans = {o_: bw._build_bwd_plan(do, qd, kd, vd, o, lse, True, "top-left", None, cfg[o_], None)
                 for o_ in cfg}
        delta = (do.float() * o.float()).sum(-1)
        dq = torch.empty_like(qd)

        def dq_alone(order):
            plan = plans[order]
            return lambda: plan.dq(qd, kd, vd, do, lse, delta, dq, plan.sm_scale)

        fns = {"step_dq_forward": step("forward"), "step_dq_reverse": step("reverse"),
               "sdpa-flash": sdpa_step("sdpa-flash", q, k, v, do, True),
               "sdpa-cudnn": sdpa_step("sdpa-cudnn", q, k, v, do, True),
               "dq_alone_forward": dq_alone("forward"), "dq_alone_reverse": dq_alone("reverse")}
        samples = do_bench_interleaved(fns, rounds, 10, 50)
        med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row = dict(B=B, H=H, N=N, d=d, causal=True, flops=flops, samples_s=samples, median_s=med,
                   tflops={n: flops / med[n] / 1e12 for n in ("step_dq_forward", "step_dq_reverse", "sdpa-flash",
                                                              "sdpa-cudnn")},
                   ratio_vs_cudnn={n: med["sdpa-cudnn"] / med[n] for n in ("step_dq_forward", "step_dq_reverse")},
                   ratio_vs_flash={n: med["sdpa-flash"] / med[n] for n in ("step_dq_forward", "step_dq_reverse")},
                   dq_reverse_speedup=med["dq_alone_forward"] / med["dq_alone_reverse"],
                   step_reverse_speedup=med["step_dq_forward"] / med["step_dq_reverse"],
                   plan=str(plans["reverse"].ran))
        print("speed", {k_: row[k_] for k_ in ("N", "d")},
              {n: round(x, 3) for n, x in row["ratio_vs_cudnn"].items()},
              "dq alone x%.3f" % row["dq_reverse_speedup"], "step x%.3f" % row["step_reverse_speedup"], flush=True)
        out.append(row)
        del q, k, v, do, qd, kd, vd, o, lse, delta, dq, plans
        torch.cuda.empty_cache()
    return out


def one(B, H, Hkv, N, d, order) -> None:
    """One causal backward (the ncu stage's child process; ncu profiles its dQ kernel)."""
    from kernels import backward as bw
    from kernels.flash_attention import flash_attention
    q, k, v, do = _inputs(B, H, Hkv, N, d)
    o, lse = flash_attention(q, k, v, True)
    bw.flash_attention_backward(do, q, k, v, o, lse, True, config=_config(d, True, order))
    torch.cuda.synchronize()


def ncu_stage() -> list[dict]:
    rows = []
    for (B, H, Hkv, N, d), order in itertools.product(NCU_SHAPES, ("forward", "reverse")):
        cmd = ["ncu", "--clock-control", "none", "--cache-control", "all", "--metrics", METRICS, "-k",
               "regex:_bwd_dq", "-c", "1", "--csv", "--page", "raw", sys.executable, __file__, "--one",
               ",".join(map(str, (B, H, Hkv, N, d))), order]
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        try:  # the driver's parser of ncu's raw CSV page
            kernels = parse_csv(p.stdout, METRICS.split(","))
        except IomodelError:
            kernels = []
        vals = {**kernels[0].record.metrics, "kernel": kernels[0].record.name[:60]} if kernels else {}
        row = dict(shape=[B, H, Hkv, N, d], order=order, metrics=vals, rc=p.returncode, seconds=time.time() - t0,
                   stderr_tail=p.stderr[-400:] if p.returncode else "")
        rows.append(row)
        print("ncu", row["shape"], order, {k_: (round(v_ / 2**30, 3) if "bytes" in k_ else v_)
                                           for k_, v_ in vals.items()}, p.returncode, flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="JSON receipt path")
    ap.add_argument("--skip", default="", help="comma list of stages to skip: check,speed,ncu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--one", nargs=2, metavar=("B,H,H_KV,N,D", "ORDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(*map(int, args.one[0].split(",")), args.one[1])
        return 0
    if not args.out:
        print("error: --out OUT.json is required", file=sys.stderr)
        return 2
    if (rc := benchmark_start(args.out)) is not None:
        return rc
    skip = set(filter(None, args.skip.split(",")))
    from iomodel.bench.environment import environment
    res = {"environment": environment("cuda"), "command": "python3 benchmarks/gpu_dq_order_probe.py " + " ".join(sys.argv[1:]),
           "date": time.strftime("%Y-%m-%d")}
    t0 = time.time()
    if "check" not in skip:
        res["check"] = check()
    if "speed" not in skip:
        res["speed"] = speed(args.rounds)
    if "ncu" not in skip:
        res["ncu"] = ncu_stage()
    res["seconds"] = time.time() - t0
    return benchmark_finish(args.out, res)


if __name__ == "__main__":
    raise SystemExit(main())
