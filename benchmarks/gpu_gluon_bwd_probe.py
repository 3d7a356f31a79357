"""GPU probe (issue 11, training speed): a Gluon dK/dV kernel for Hopper beside Triton's.

Forward + backward at HEAD_DIM 128 sits at 0.75-0.84x cuDNN (receipts/train-speed-gluon-fwd-h200-2026-12-04.json),
and the backward is 2.5x the forward's FLOPs. This probe writes the K/V-stationary dK/dV kernel
(FlashAttention-2 Algorithm 2, lines 8-20, transposed as in ``kernels/backward.py``) in Gluon with the
forward's structure (``kernels/gluon_attention.py``; FA3 section 3.1): one producer warp loads K and V
of the program's 128 keys once, then Q and dO block by block (BLOCK_M = 64 query rows) into a ring of
NUM_STAGES slots; two consumer warpgroups own 64 keys each and run, per query block, four asynchronous
warpgroup MMAs: Sᵀ = K Qᵀ and dPᵀ = V dOᵀ from shared memory, then dV += Pᵀ dO and dK += dSᵀ Q with Pᵀ
and dSᵀ in registers; a Q/dO slot is released once both warpgroups' dK and dV MMAs that read it are
complete. dQ is not computed here. MHA, N a multiple of 128 (rank-2 descriptors over ``(B·H·N, d)``),
causal top-left (scores masked on the query blocks that reach the diagonal).

    python benchmarks/gpu_gluon_bwd_probe.py --compile-only           # this machine, no GPU
    python benchmarks/gpu_gluon_bwd_probe.py --out $OUT/gluon-bwd.json  # the H200 (not yet run)

1. Exactness: dK and dV against ``kernels.backward.flash_attention_backward`` on the same inputs
   (max |difference| / max |bundled|).
2. Speed: the Gluon dK/dV kernel against the same arithmetic in Triton (``gpu_ws_probe._dkdv_ws``
   without warp specialisation, device descriptors) and, for scale, the bundled backward (D, dK/dV and
   dQ kernels), interleaved (``do_bench_interleaved``, L2 flushed per repetition).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_gluon_fwd_probe import _issue_kv  # noqa: E402  (the forward probe's ring load: one TMA box into a slot)

#: (BLOCK_M, NUM_STAGES) of the query-block ring; BLOCK_N = 128 keys per program (2 x 64).
VARIANTS = [(64, 2), (64, 3)]
REGS = dict(consumer_regs=240, producer_regs=24)
SHAPES = [  # issue 11's speed rows at HEAD_DIM 128 (B·N = 16k, H = 16, bf16)
    (16, 16, 1024, False), (8, 16, 2048, False), (2, 16, 8192, False),
    (16, 16, 1024, True), (8, 16, 2048, True), (1, 16, 16384, True),
]


@gluon.jit
def _dkdv_producer(desc_q, desc_do, desc_k, desc_v, q_smem, do_smem, k_smem, v_smem, kv_bar, q_bars, do_bars,
                   q_empty, do_empty, kv_row, q_row, n_steps, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr):
    """K and V of the program's keys (two halves of 64 rows), then Q and dO block by block."""
    ROWS: gl.constexpr = desc_k.block_type.shape[0]
    mbarrier.expect(kv_bar, 4 * desc_k.block_type.nbytes)
    for c in gl.static_range(2):
        tma.async_copy_global_to_shared(desc_k, [kv_row + c * ROWS, 0], kv_bar, k_smem.index(c))
        tma.async_copy_global_to_shared(desc_v, [kv_row + c * ROWS, 0], kv_bar, v_smem.index(c))
    for t in range(n_steps):
        slot = t % NUM_STAGES
        refill = t >= NUM_STAGES
        mbarrier.wait(q_empty.index(slot), ((t // NUM_STAGES) - 1) & 1, pred=refill)
        _issue_kv(desc_q, q_smem, q_bars, q_row + t * BLOCK_M, slot, True)
        mbarrier.wait(do_empty.index(slot), ((t // NUM_STAGES) - 1) & 1, pred=refill)
        _issue_kv(desc_do, do_smem, do_bars, q_row + t * BLOCK_M, slot, True)


@gluon.jit
def _dkdv_consumer(desc_dk, desc_dv, LSE, DELTA, q_smem, do_smem, k_tile, v_tile, kv_bar, q_bars, do_bars,
                   q_empty, do_empty, sm_scale, q_row, start_m0, n_steps, n0, kv_row, HEAD_DIM: gl.constexpr,
                   BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    """One consumer warpgroup: dK and dV of keys n0 .. n0+63 over query blocks start_m0, start_m0 + BLOCK_M, ..."""
    dtype: gl.constexpr = desc_dk.dtype
    ROWS: gl.constexpr = desc_dk.block_type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    qk_scale = sm_scale * 1.4426950408889634
    offs_n = n0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s_layout))
    offs_mb = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))
    s_zero = gl.zeros([ROWS, BLOCK_M], gl.float32, layout=s_layout)
    dk = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    dv = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    k_op = k_tile.reshape([ROWS, HEAD_DIM])
    v_op = v_tile.reshape([ROWS, HEAD_DIM])
    mbarrier.wait(kv_bar, 0)
    for t in range(n_steps):
        slot = t % NUM_STAGES
        phase = (t // NUM_STAGES) & 1
        start_m = start_m0 + t * BLOCK_M
        mbarrier.wait(q_bars.index(slot), phase)
        s_tok = warpgroup_mma(k_op, q_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(do_bars.index(slot), phase)
        dp_tok = warpgroup_mma(v_op, do_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        offs_m = start_m + offs_mb
        lse2 = gl.load(LSE + q_row + offs_m) * 1.4426950408889634
        delta = gl.load(DELTA + q_row + offs_m)
        s_t = warpgroup_mma_wait(1, deps=(s_tok, ))
        p_t = gl.exp2(s_t * qk_scale - lse2[None, :])
        if CAUSAL:
            if start_m < n0 + ROWS:  # a query block below some of these keys: mask n > m
                p_t = gl.where(offs_n[:, None] <= offs_m[None, :], p_t, 0.0)
        dv_tok = warpgroup_mma(gl.convert_layout(p_t.to(dtype), a_layout), do_smem.index(slot), dv, is_async=True)
        dp_t = warpgroup_mma_wait(1, deps=(dp_tok, ))
        ds_t = p_t * (dp_t - delta[None, :])
        dk_tok = warpgroup_mma(gl.convert_layout(ds_t.to(dtype), a_layout), q_smem.index(slot), dk, is_async=True)
        dv, dk = warpgroup_mma_wait(0, deps=(dv_tok, dk_tok))
        mbarrier.arrive(q_empty.index(slot), count=1)
        mbarrier.arrive(do_empty.index(slot), count=1)
    k_op.store((dk * sm_scale).to(dtype))
    v_op.store(dv.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(desc_dk, [kv_row, 0], k_tile)
    tma.async_copy_shared_to_global(desc_dv, [kv_row, 0], v_tile)
    tma.store_wait(0)


@gluon.jit
def _gluon_dkdv(desc_q, desc_do, desc_k, desc_v, desc_dk, desc_dv, LSE, DELTA, sm_scale, N_CTX,
                HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
    """dK, dV of one key tile of 128 rows (grid (N / 128, B·H)); descriptors rank 2 over (B·H·N, d): Q and
    dO boxes of BLOCK_M rows, K, V, dK, dV boxes of 64 rows. LSE (natural log) and DELTA = rowsum(dO ∘ O)
    fp32 (B·H·N)."""
    dtype: gl.constexpr = desc_q.dtype
    ROWS: gl.constexpr = desc_k.block_type.shape[0]
    j = gl.program_id(0)
    bh = gl.program_id(1)
    start_n = j * 2 * ROWS
    kv_row = bh * N_CTX + start_n
    q_row = bh * N_CTX
    if CAUSAL:
        start_m0 = start_n // BLOCK_M * BLOCK_M
    else:
        start_m0 = 0
    n_steps = (N_CTX - start_m0) // BLOCK_M

    q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], desc_q.layout)
    do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_M, HEAD_DIM], desc_do.layout)
    k_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], desc_k.layout)
    v_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], desc_v.layout)
    kv_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    do_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    do_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_bar, count=1)
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(q_bars.index(s), count=1)
        mbarrier.init(do_bars.index(s), count=1)
        mbarrier.init(q_empty.index(s), count=2)
        mbarrier.init(do_empty.index(s), count=2)
    fence_async_shared()

    gl.warp_specialize([
        (_dkdv_consumer, (desc_dk, desc_dv, LSE, DELTA, q_smem, do_smem, k_smem.index(0), v_smem.index(0), kv_bar,
                          q_bars, do_bars, q_empty, do_empty, sm_scale, q_row, start_m0, n_steps, start_n, kv_row,
                          HEAD_DIM, BLOCK_M, NUM_STAGES, CAUSAL)),
        (_dkdv_consumer, (desc_dk, desc_dv, LSE, DELTA, q_smem, do_smem, k_smem.index(1), v_smem.index(1), kv_bar,
                          q_bars, do_bars, q_empty, do_empty, sm_scale, q_row, start_m0, n_steps, start_n + ROWS,
                          kv_row + ROWS, HEAD_DIM, BLOCK_M, NUM_STAGES, CAUSAL)),
        (_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, q_smem, do_smem, k_smem, v_smem, kv_bar, q_bars, do_bars,
                          q_empty, do_empty, kv_row, q_row + start_m0, n_steps, BLOCK_M, NUM_STAGES)),
    ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def gluon_dkdv(do, q, k, v, lse, delta, causal, block_m=64, num_stages=2, consumer_regs=240, producer_regs=24,
               warmup_only=False):
    """dK, dV ``(B, H, N, d)`` of contiguous MHA inputs, N a multiple of 128; lse, delta ``(B, H, N)`` fp32."""
    B, H, N, D = q.shape
    if N % 128 or N % block_m:
        raise ValueError(f"seqlen {N} must be a multiple of 128 and of BLOCK_M {block_m} in this probe")
    gdt = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[q.dtype]
    rows = B * H * N
    dk, dv = torch.empty_like(k), torch.empty_like(v)

    def desc(t, box):
        return TensorDescriptor(t.view(rows, D), [rows, D], [D, 1], [box, D],
                                gl.NVMMASharedLayout.get_default_for([box, D], gdt))

    args = (desc(q, block_m), desc(do, block_m), desc(k, 64), desc(v, 64), desc(dk, 64), desc(dv, 64), lse, delta,
            D ** -0.5, N)
    kw = dict(HEAD_DIM=D, BLOCK_M=block_m, NUM_STAGES=num_stages, CAUSAL=causal, CONSUMER_REGS=consumer_regs,
              PRODUCER_REGS=producer_regs, num_warps=4)
    grid = (N // 128, B * H)
    if warmup_only:
        return _gluon_dkdv.warmup(*args, **kw, grid=grid)
    _gluon_dkdv[grid](*args, **kw)
    return dk, dv


def _compile_only() -> int:
    """Compile every variant for sm_90 on this machine (a fake driver, as kernels/compile_check does)."""
    from kernels.compile_check import _install_fake_driver, compile_report, print_reports

    _install_fake_driver(90)
    reports = []
    for causal in (False, True):
        for bm, st in VARIANTS:
            q = torch.empty(1, 2, 1024, 128, dtype=torch.bfloat16)
            lse = torch.empty(1, 2, 1024)
            reports.append(compile_report("gluon dkdv", dict(causal=causal, block_m=bm, stages=st), lambda: gluon_dkdv(
                q, q, q, q, lse, lse, causal, bm, st, warmup_only=True, **REGS)))
    return print_reports(reports)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="compile for sm_90 here, no GPU")
    ap.add_argument("--out", help="JSON receipt path (GPU run)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    if args.compile_only:
        return _compile_only()
    if not args.out:
        print("error: --out OUT.json is required for the GPU run (or pass --compile-only)", file=sys.stderr)
        return 2
    from iomodel.measure.ncu import benchmark_finish, benchmark_start
    if (rc := benchmark_start(args.out)) is not None:  # a GPU, and a writable --out, before any work
        return rc
    from gpu_ws_probe import _dkdv_ws
    from iomodel.bench.timing import do_bench_interleaved
    from kernels import backward as bw
    from kernels.flash_attention import flash_attention

    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    rows = []
    for B, H, N, causal in SHAPES:
        d = 128
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = (torch.randn(B, H, N, d, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(4))
        o, lse = flash_attention(q, k, v, causal)
        _, rk, rv = bw.flash_attention_backward(do, q, k, v, o, lse, causal)
        delta = (do.float() * o.float()).sum(-1)

        def triton_dkdv():
            dk, dv = torch.empty_like(k), torch.empty_like(v)
            _dkdv_ws[(N // 128, B * H)](q, k, v, do, lse, delta, dk, dv, d ** -0.5, B * H, N, N, HEAD_DIM=d,
                                        BLOCK_M=64, BLOCK_N=128, CAUSAL=causal, WS=False, num_warps=8, num_stages=2)
            return dk, dv

        plan = bw._build_bwd_plan(do, q, k, v, o, lse, causal, "top-left", None, None, None)
        if plan.part_shape is not None or plan.fused or not plan.tma:
            raise SystemExit(f"unexpected backward plan at {B, H, N, causal}: the probe times its TMA kernels")
        bdk, bdv, bdq = torch.empty_like(k), torch.empty_like(v), torch.empty_like(q)

        def bundled_dkdv():  # the default backward's dK/dV launch alone (its tiles: plan.ran)
            plan.dkdv(q, k, v, do, lse, delta, bdk, bdv, plan.sm_scale)

        def bundled_dq():  # the default backward's dQ launch alone
            plan.dq(q, k, v, do, lse, delta, bdq, plan.sm_scale)

        fns = {"bundled_backward": lambda: bw.flash_attention_backward(do, q, k, v, o, lse, causal),
               "bundled_dkdv": bundled_dkdv, "bundled_dq": bundled_dq, "triton_dkdv": triton_dkdv}
        row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "err": {},
               "bundled_config": str(plan.ran)}
        for bm, st in VARIANTS:
            name = f"gluon_dkdv_bm{bm}_s{st}"
            try:
                dk, dv = gluon_dkdv(do, q, k, v, lse, delta, causal, bm, st, **REGS)
                torch.cuda.synchronize()
                row["err"][name] = {n: float((a.float() - b.float()).abs().max() / b.float().abs().max())
                                    for n, a, b in (("dk", dk, rk), ("dv", dv, rv))}
                fns[name] = (lambda bm=bm, st=st: gluon_dkdv(do, q, k, v, lse, delta, causal, bm, st, **REGS))
            except Exception as exc:
                row["err"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[-1][:300]}"}
        samples = do_bench_interleaved(fns, args.rounds, 25, 100)
        row["median_s"] = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row["samples_s"] = samples
        row["vs_triton_dkdv"] = {n: row["median_s"]["triton_dkdv"] / s for n, s in row["median_s"].items()}
        row["vs_bundled_dkdv"] = {n: row["median_s"]["bundled_dkdv"] / s for n, s in row["median_s"].items()}
        rows.append(row)
        print(json.dumps({k_: row[k_] for k_ in ("B", "N", "causal")}), row["err"],
              {n: round(x, 3) for n, x in row["vs_bundled_dkdv"].items()}, flush=True)
    rec = {"command": "python3 benchmarks/gpu_gluon_bwd_probe.py --out " + args.out + f" --rounds {args.rounds}",
           "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__,
           "triton": triton.__version__, "rows": rows}
    return benchmark_finish(args.out, rec)


if __name__ == "__main__":
    raise SystemExit(main())
