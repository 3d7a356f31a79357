"""GPU probe (issue 11 item 5, issue 14): a spill-free Gluon dK/dV kernel, ``_bwd_dkdv_gluon_shared``, beside the bundled one.

The bundled Gluon dK/dV launch (``kernels/gluon_backward.py``, 2026-12-05) met issue 11's speed bar but ptxas spills
in it (56-268 B of local-memory loads and stores per thread, ``python -m kernels.compile_check``), about 12 KiB of
stores a program at L2, which the traffic model does not count (the hold-out after it,
receipts/ncu-h200-gluon-dkdv-holdout1-2026-12-05.json; docs/l2-calibration.md, "The Gluon dK/dV launch"). This kernel moves the same
HBM bytes through the same grid, tiles (64 query rows x 128 keys), loop orders, TMA loads and stores, with three
changes, each measured on the CPU by ptxas alone (this file's ``--compile-only``; not yet run on a GPU):

1. S = Q Kᵀ and dP = dO Vᵀ take the tile's **query rows as rows** (FlashAttention-3's ``SdP_swapAB = false`` at
   HEAD_DIM 128, Shah et al. 2024, arXiv:2407.08608, and its hopper/flash_bwd_launch_template.h): each thread
   holds the LSE and D of two rows, where the key-rows layout held 16 of each plus 16 row offsets.
2. **P and dS go through shared memory** (64 x 64 per warpgroup each, 32 KiB in all: 160 KiB a program) and are the
   transposed A operands of dV += Pᵀ dO and dK += dSᵀ Q, after a fence and a barrier of the warpgroup's 128 threads
   (``gl.thread_barrier`` inside a partition is a named barrier: ``BAR.SYNC 0x2, 0x80`` in the SASS). No register
   A operand is held while the next products run.
3. Nothing crosses the partitions' split in registers: every partition works out its program's indices itself
   (``_program``), and the rows' and keys' offsets come through an opaque move, so that the compiler cannot hoist
   ``LSE + offsets`` into the code before the split. Values computed there reach the partitions through local
   memory (the STL.64 stores ahead of ``setmaxnreg.dealloc`` in the old SASS).

ptxas (Triton 3.6, sm_90): 0 B of spill non-causal and for the S > 1 partials, 8 B causal (one 4-byte store and
load after the loop, outside it), against 56-268 B in the bundled kernel. All 60 flag combinations the launcher can
pass (causal, ragged N_q, rows without keys, GQA, S > 1, tiles-descending; fp16 and bf16) compile, at 8 B or less
but 16 B for causal + ragged + rows without keys + GQA tiles-descending (checked 2026-12-05 on the CPU).

    python benchmarks/gpu_gluon_dkdv_shared_probe.py --compile-only            # this machine: spills, no GPU
    timeout 300 python benchmarks/gpu_gluon_dkdv_shared_probe.py --out $OUT/shared.json    # the H200 (not yet run)

On the GPU: (1) dq, dk, dv with this kernel in place of the bundled one (``flash_attention_backward``, the same
plan, partials and reduction) against fp64 within the error rule (2x the eager chain's max error + 1e-5) on 10
shapes (MHA, GQA, MQA, S = 1, 3, 4, both loop orders and alignments, ragged, rows without keys, keys no row sees);
(2) forward + backward with each kernel, and the backward alone, interleaved on issue 11's ten HEAD_DIM 128 rows
(each side's launch plan built once, ``kernels.backward._build_bwd_plan``). If it holds, it replaces the bundled kernel and a fresh training hold-out measures the writes again.
Every exactness case checks that this kernel is the one in the plan (not only a Gluon launch), that the S asked for
ran, and that a second call through the plan's cached launcher gives the same bits; the receipt is written after the
exactness cases (so a hang in the timing keeps them; run it under ``timeout``), and a case outside the rule stops the
run with exit status 1 before any timing.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from iomodel.paths import argument_error, one_line_parser  # noqa: E402
from kernels.gluon_attention import GLUON_IMPORT_ERROR  # noqa: E402

if GLUON_IMPORT_ERROR is None:
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

    from kernels.gluon_backward import _first, _next, _store_dkdv

if GLUON_IMPORT_ERROR is None:

    @gluon.jit
    def _program(H_KV, G, N_Q, CAUSAL_OFF, SPLITS, ROWS: gl.constexpr, BLOCK_M: gl.constexpr, CAUSAL: gl.constexpr,
                 SPLIT: gl.constexpr):
        """This program's KV head and sequence, group slice [g0, g0 + g_slice), output head, first key and query
        tiles lo .. lo + n_tiles·BLOCK_M: worked out inside each partition from the program ids and the kernel's
        arguments (values computed before the partitions split reach them through local memory)."""
        j = gl.program_id(0)
        bhk = gl.program_id(1)
        b = bhk // H_KV
        hk = bhk % H_KV
        if SPLIT:  # this program's slice of the group: balanced, never empty (1 <= SPLITS <= G)
            sl = gl.program_id(2)
            g0 = sl * G // SPLITS
            g_slice = (sl + 1) * G // SPLITS - g0
            out_head = hk * SPLITS + sl
        else:
            g0 = 0
            g_slice = G
            out_head = hk
        start_n = j * (2 * ROWS)
        if CAUSAL:  # the query tile holding the first row that sees key start_n (kernels.backward._first_query_tile)
            lo = gl.minimum(gl.maximum(start_n - CAUSAL_OFF, 0) // BLOCK_M * BLOCK_M, N_Q)
        else:
            lo = 0
        return b, hk, g0, g_slice, out_head, start_n, lo, gl.cdiv(N_Q - lo, BLOCK_M)

    @gluon.jit
    def _dkdv_producer(desc_q, desc_do, desc_k, desc_v, q_smem, do_smem, k_smem, v_smem, kv_bar, q_bars, do_bars,
                       q_empty, do_empty, H_KV, G, N_Q, CAUSAL_OFF, SPLITS,
                       BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr, DESCEND: gl.constexpr, GQA: gl.constexpr,
                       CAUSAL: gl.constexpr, SPLIT: gl.constexpr):
        """The producer warp: K and V of the program's keys (two boxes each), then Q and dO of every
        (query tile, head) pair into the ring, a slot refilled once both consumers released it."""
        ROWS: gl.constexpr = desc_k.block_type.shape[2]
        b, hk, g0, g_slice, _, start_n, lo, n_tiles = _program(H_KV, G, N_Q, CAUSAL_OFF, SPLITS, ROWS, BLOCK_M, CAUSAL,
                                                               SPLIT)
        mbarrier.expect(kv_bar, 4 * desc_k.block_type.nbytes)
        for c in gl.static_range(2):
            tma.async_copy_global_to_shared(desc_k, [b, hk, start_n + c * ROWS, 0], kv_bar, k_smem.index(c))
            tma.async_copy_global_to_shared(desc_v, [b, hk, start_n + c * ROWS, 0], kv_bar, v_smem.index(c))
        start_m, g = _first(lo, n_tiles, g0, BLOCK_M, DESCEND)
        for t in range(n_tiles * g_slice):
            h = hk * G + g
            if not GQA:
                start_m = lo + t * BLOCK_M
            slot = t % NUM_STAGES
            refill = t >= NUM_STAGES
            mbarrier.wait(q_empty.index(slot), ((t // NUM_STAGES) - 1) & 1, pred=refill)
            bar = q_bars.index(slot)
            mbarrier.expect(bar, desc_q.block_type.nbytes)
            tma.async_copy_global_to_shared(desc_q, [b, h, start_m, 0], bar, q_smem.index(slot))
            mbarrier.wait(do_empty.index(slot), ((t // NUM_STAGES) - 1) & 1, pred=refill)
            bar = do_bars.index(slot)
            mbarrier.expect(bar, desc_do.block_type.nbytes)
            tma.async_copy_global_to_shared(desc_do, [b, h, start_m, 0], bar, do_smem.index(slot))
            if GQA:
                start_m, g = _next(start_m, g, lo, N_Q, g0, g0 + g_slice, BLOCK_M, DESCEND)

    @gluon.jit
    def _dkdv_consumer(desc_dk, desc_dv, DK, DV, LSE, DELTA, q_smem, do_smem, k_tile, v_tile, p_tile, ds_tile, kv_bar,
                       q_bars, do_bars, q_empty, do_empty, sm_scale, H, H_KV, G, N_Q, N_K, CAUSAL_OFF, SPLITS,
                       stride_dkz, stride_dkh, stride_dkn, stride_dvz, stride_dvh, stride_dvn,
                       HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr,
                       CAUSAL: gl.constexpr, DESCEND: gl.constexpr, SPLIT: gl.constexpr, GQA: gl.constexpr,
                       MASK_Q: gl.constexpr, NO_KEY_ROWS: gl.constexpr, HALF: gl.constexpr):
        """One consumer warpgroup: dK and dV of keys n0 .. n0+63 over the program's (query tile, head)
        pairs. S = Q Kᵀ and dP = dO Vᵀ with the tile's query rows as rows (so each thread holds two rows' LSE
        and D), P and dS through shared memory (``p_tile``, ``ds_tile``) as the transposed A operands of
        dV += Pᵀ dO and dK += dSᵀ Q (FlashAttention-3's backward at HEAD_DIM 128). SPLIT: stored as fp32
        partials, head ``out_head`` of DK and DV (keys < N_K); else through the dK and dV descriptors in the
        input dtype (TMA drops rows past N_K)."""
        dtype: gl.constexpr = k_tile.dtype
        ROWS: gl.constexpr = k_tile.shape[2]
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, ROWS, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        b, hk, g0, g_slice, out_head, start_n, lo, n_tiles = _program(H_KV, G, N_Q, CAUSAL_OFF, SPLITS, ROWS, BLOCK_M,
                                                                      CAUSAL, SPLIT)
        n0 = start_n + HALF * ROWS  # this warpgroup's keys
        qk_scale = sm_scale * 1.4426950408889634
        # the rows' offsets through an opaque move: the compiler would hoist LSE + offs (per thread) out of the
        # partition, and values computed before the partitions split reach them through local memory (a spill)
        offs_mb = gl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))],
                                            dtype=gl.int32, is_pure=False, pack=1)
        if CAUSAL:  # the keys' offsets in the warpgroup, likewise
            offs_nb = gl.inline_asm_elementwise("mov.u32 $0, $1;", "=r,r", [gl.arange(0, ROWS, layout=gl.SliceLayout(0, s_layout))],
                                                dtype=gl.int32, is_pure=False, pack=1)
        s_zero = gl.zeros([BLOCK_M, ROWS], gl.float32, layout=s_layout)
        dk = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        dv = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        k_op = k_tile.reshape([ROWS, HEAD_DIM])
        v_op = v_tile.reshape([ROWS, HEAD_DIM])
        mbarrier.wait(kv_bar, 0)
        start_m, g = _first(lo, n_tiles, g0, BLOCK_M, DESCEND)
        row = (b * H + hk * G + g).to(gl.int64) * N_Q
        for t in range(n_tiles * g_slice):
            if GQA:  # this pair's head (MHA: one head, tiles in order)
                row = (b * H + hk * G + g).to(gl.int64) * N_Q
            else:
                start_m = lo + t * BLOCK_M
            slot = t % NUM_STAGES
            phase = (t // NUM_STAGES) & 1
            q_op = q_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
            do_op = do_smem.index(slot).reshape([BLOCK_M, HEAD_DIM])
            mbarrier.wait(q_bars.index(slot), phase)
            s_tok = warpgroup_mma(q_op, k_op.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            mbarrier.wait(do_bars.index(slot), phase)
            dp_tok = warpgroup_mma(do_op, v_op.permute((1, 0)), s_zero, use_acc=False, is_async=True)
            offs_m = start_m + offs_mb
            if MASK_Q:  # rows past N_Q: LSE = +inf, so P = 0 there
                lse = gl.load(LSE + row + offs_m, mask=offs_m < N_Q, other=float("inf"))
                delta = gl.load(DELTA + row + offs_m, mask=offs_m < N_Q, other=0.0)
            else:
                lse = gl.load(LSE + row + offs_m)
                delta = gl.load(DELTA + row + offs_m)
            if NO_KEY_ROWS:  # bottom-right with N_Q > N_K: rows that saw no key (LSE = -inf) give P = 0
                lse = gl.where(lse == float("-inf"), float("inf"), lse)
            lse2 = lse * 1.4426950408889634
            s = warpgroup_mma_wait(1, deps=(s_tok, ))
            p = gl.exp2(s * qk_scale - lse2[:, None])
            if CAUSAL:
                if start_m + CAUSAL_OFF < n0 + ROWS:  # a key of this warpgroup above some row's diagonal
                    p = gl.where(offs_nb[None, :] <= offs_m[:, None] + (CAUSAL_OFF - n0), p, 0.0)
            # P is overwritten here while the last step's dV product read p_tile: every warp of the warpgroup must be
            # past that step's wait(0). The two mbarrier.arrive below, after the wait, lower to a 128-thread bar.sync
            # of the warpgroup (then one thread's arrive), which orders it; keep them after the wait. An explicit
            # gl.thread_barrier() here (FlashAttention-3's) costs 8 B of spill non-causal (ptxas, 2026-12-05).
            p_tile.store(p.to(dtype))
            fence_async_shared()
            gl.thread_barrier()
            dv_tok = warpgroup_mma(p_tile.permute((1, 0)), do_op, dv, is_async=True)
            dp = warpgroup_mma_wait(1, deps=(dp_tok, ))
            ds = p * (dp - delta[:, None])
            ds_tile.store(ds.to(dtype))
            fence_async_shared()
            gl.thread_barrier()
            dk_tok = warpgroup_mma(ds_tile.permute((1, 0)), q_op, dk, is_async=True)
            dv, dk = warpgroup_mma_wait(0, deps=(dv_tok, dk_tok))
            mbarrier.arrive(q_empty.index(slot), count=1)
            mbarrier.arrive(do_empty.index(slot), count=1)
            if GQA:
                start_m, g = _next(start_m, g, lo, N_Q, g0, g0 + g_slice, BLOCK_M, DESCEND)
        _store_dkdv(dk, dv, k_tile, v_tile, desc_dk, desc_dv, DK, DV, sm_scale, b, hk, n0, out_head, N_K, stride_dkz,
                    stride_dkh, stride_dkn, stride_dvz, stride_dvh, stride_dvn, o_layout, SPLIT)

    @gluon.jit
    def _bwd_dkdv_gluon_shared(desc_q, desc_k, desc_v, desc_do, desc_dk, desc_dv, LSE, DELTA, DK, DV, sm_scale,
                        stride_dkz, stride_dkh, stride_dkn, stride_dvz, stride_dvh, stride_dvn,
                        H, H_KV, G, N_Q, N_K, CAUSAL_OFF, SPLITS,
                        HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, NUM_STAGES: gl.constexpr,
                        CAUSAL: gl.constexpr, SPLIT: gl.constexpr, DESCEND: gl.constexpr, GQA: gl.constexpr,
                        MASK_Q: gl.constexpr, NO_KEY_ROWS: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr):
        """dK, dV of one key tile of BLOCK_N = 2·KEY_ROWS keys of KV head hk, summed over the query heads
        of group slice sl (grid (cdiv(N_K, BLOCK_N), B·H_KV, S)): S = 1 (not SPLIT) stores dK, dV
        ``(B, H_KV, N_K, d)`` in the input dtype; SPLIT stores fp32 partials as head hk·S + sl of
        ``(B, H_KV·S, N_K, d)``. Descriptors rank 4 over (B, H, N_Q, d) for Q and dO (boxes (1, 1,
        BLOCK_M, d)) and (B, H_KV, N_K, d) for K and V (boxes (1, 1, 64, d)); LSE (natural log) and
        DELTA = rowsum(dO ∘ O) fp32 ``(B, H, N_Q)``; d is the unit last stride of DK and DV. GQA: G > 1 (the
        loop over (query tile, head) pairs; MHA walks the tiles of one head); MASK_Q: N_Q is not a multiple of
        BLOCK_M (the LSE and D loads are masked); NO_KEY_ROWS: causal with CAUSAL_OFF < 0 (rows that see no key)."""
        dtype: gl.constexpr = desc_q.dtype
        ROWS: gl.constexpr = desc_k.block_type.shape[2]
        q_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, 1, 1, BLOCK_M, HEAD_DIM], desc_q.layout)
        do_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, 1, 1, BLOCK_M, HEAD_DIM], desc_do.layout)
        k_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, ROWS, HEAD_DIM], desc_k.layout)
        v_smem = gl.allocate_shared_memory(dtype, [2, 1, 1, ROWS, HEAD_DIM], desc_v.layout)
        ps_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([BLOCK_M, ROWS], dtype)
        p_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, ROWS], ps_layout)  # P of each consumer
        ds_smem = gl.allocate_shared_memory(dtype, [2, BLOCK_M, ROWS], ps_layout)  # dS of each consumer
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
            (_dkdv_consumer, (desc_dk, desc_dv, DK, DV, LSE, DELTA, q_smem, do_smem, k_smem.index(0), v_smem.index(0),
                              p_smem.index(0), ds_smem.index(0), kv_bar, q_bars, do_bars, q_empty, do_empty, sm_scale,
                              H, H_KV, G, N_Q, N_K, CAUSAL_OFF, SPLITS, stride_dkz, stride_dkh, stride_dkn, stride_dvz,
                              stride_dvh, stride_dvn, HEAD_DIM, BLOCK_M, NUM_STAGES, CAUSAL, DESCEND, SPLIT, GQA, MASK_Q,
                              NO_KEY_ROWS, 0)),
            (_dkdv_consumer, (desc_dk, desc_dv, DK, DV, LSE, DELTA, q_smem, do_smem, k_smem.index(1), v_smem.index(1),
                              p_smem.index(1), ds_smem.index(1), kv_bar, q_bars, do_bars, q_empty, do_empty, sm_scale,
                              H, H_KV, G, N_Q, N_K, CAUSAL_OFF, SPLITS, stride_dkz, stride_dkh, stride_dkn, stride_dvz,
                              stride_dvh, stride_dvn, HEAD_DIM, BLOCK_M, NUM_STAGES, CAUSAL, DESCEND, SPLIT, GQA, MASK_Q,
                              NO_KEY_ROWS, 1)),
            (_dkdv_producer, (desc_q, desc_do, desc_k, desc_v, q_smem, do_smem, k_smem, v_smem, kv_bar, q_bars,
                              do_bars, q_empty, do_empty, H_KV, G, N_Q, CAUSAL_OFF, SPLITS, BLOCK_M, NUM_STAGES, DESCEND,
                              GQA, CAUSAL, SPLIT)),
        ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


#: (B, H, H_kv, N_q, N_k, causal, align, S, dkdv_order) at HEAD_DIM 128: tests/test_gpu_gluon.py's cases
CASES = [
    (2, 4, 4, 1024, 1024, False, "top-left", 1, "heads-outer"),
    (2, 4, 4, 1024, 1024, True, "top-left", 1, "heads-outer"),
    (1, 8, 2, 1000, 1000, True, "top-left", 1, "heads-outer"),
    (1, 8, 2, 1000, 1000, True, "top-left", 1, "tiles-descending"),
    (1, 8, 2, 777, 777, True, "bottom-right", 4, "tiles-descending"),
    (1, 8, 1, 300, 700, False, "top-left", 3, "heads-outer"),
    (2, 4, 1, 513, 257, True, "bottom-right", 1, "heads-outer"),
    (1, 4, 4, 300, 700, True, "top-left", 1, "heads-outer"),
    (1, 2, 2, 65, 130, True, "bottom-right", 1, "heads-outer"),
    (1, 2, 2, 1, 200, False, "top-left", 1, "heads-outer"),
]
#: issue 11's HEAD_DIM 128 speed rows: (B, N, causal), H = 16, bf16, B·N = 16k tokens
SPEED_ROWS = [(16384 // n, n, c) for c in (False, True) for n in (1024, 2048, 4096, 8192, 16384)]


@contextlib.contextmanager
def shared_kernel():
    """The backward with this probe's kernel in place of the bundled Gluon dK/dV kernel (same parameters; the
    launcher's plans are dropped on entry and exit, so each side builds its own)."""
    from kernels import flash_attention as fa
    from kernels import gluon_backward as gb

    bundled = gb._bwd_dkdv_gluon
    fa._PLANS.clear()
    gb._bwd_dkdv_gluon = _bwd_dkdv_gluon_shared
    try:
        yield
    finally:
        gb._bwd_dkdv_gluon = bundled
        fa._PLANS.clear()


def compile_only() -> int:
    """Compile this kernel and the bundled one for sm_90 here (Triton's fake driver) and print ptxas's spills."""
    import torch

    from kernels import compile_check as cc
    from kernels import gluon_attention as ga
    from kernels import gluon_backward as gb

    if GLUON_IMPORT_ERROR is not None:
        print(f"error: Triton's Gluon dialect does not import here ({GLUON_IMPORT_ERROR})", file=sys.stderr)
        return 2
    cc._install_fake_driver(90)
    reports = []
    for name, kernel in (("bundled", gb._bwd_dkdv_gluon), ("shared", _bwd_dkdv_gluon_shared)):
        for causal, mask_q, group, split, descend in ((False, False, 1, False, False), (True, False, 1, False, False),
                                                      (True, True, 4, False, True), (True, True, 4, True, False)):
            d, n, hk = 128, 1000 if mask_q else 1024, 2
            q = torch.empty(2, hk * group, n, d, dtype=torch.bfloat16)
            k = torch.empty(2, hk, n, d, dtype=torch.bfloat16)
            out = torch.empty(2, hk * (2 if split else 1), n, d, dtype=torch.float32 if split else torch.bfloat16)
            lse = torch.empty(2, hk * group, n)

            def build(kernel=kernel, q=q, k=k, out=out, lse=lse, causal=causal, mask_q=mask_q, group=group,
                      split=split, descend=descend):
                descs = [ga.gluon_descriptor(x, b) for x, b in zip((q, k, k, q, k, k), gb.descriptor_boxes(d, 64))]
                return kernel.warmup(*descs, lse, lse, out, out, 0.125, *out.stride()[:3], *out.stride()[:3],
                                     hk * group, hk, group, n, n, 0, 2 if split else 1, HEAD_DIM=d, BLOCK_M=64,
                                     NUM_STAGES=2, CAUSAL=causal, SPLIT=split, DESCEND=descend, GQA=group > 1,
                                     MASK_Q=mask_q, NO_KEY_ROWS=False, CONSUMER_REGS=gb.CONSUMER_REGS,
                                     PRODUCER_REGS=gb.PRODUCER_REGS, PRODUCER_WARPS=gb.PRODUCER_WARPS, num_warps=4,
                                     grid=(1,))
            reports.append(cc.compile_report(f"dkdv {name}", dict(causal=causal, ragged=mask_q, group=group,
                                                                   split=split, descend=descend), build))
    return cc.print_reports(reports)


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="compile for sm_90 here and print the spills, no GPU")
    ap.add_argument("--out", help="JSON receipt path (GPU run)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.rounds < 1:
        argument_error("--rounds must be at least 1")
    if args.compile_only:
        return compile_only()
    if not args.out:
        argument_error("--out OUT.json is required for the GPU run (or pass --compile-only)")
    from iomodel.measure.ncu import benchmark_finish, benchmark_start

    if (rc := benchmark_start(args.out)) is not None:  # a GPU, and a writable --out, before any work
        return rc
    import dataclasses

    import torch
    import triton

    from iomodel.bench.timing import do_bench_interleaved
    from kernels import backward as bw
    from kernels import flash_attention as fa
    from kernels import heuristics as hx
    from kernels.baseline import eager_attention
    from kernels.flash_attention import flash_attention
    from kernels.reference import reference_attention_backward

    rec = {"command": " ".join(["python3", *sys.argv]), "device": torch.cuda.get_device_name(),
           "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "triton": triton.__version__,
           "exactness": [], "speed": []}
    for B, H, H_kv, N_q, N_k, causal, align, S, order in CASES:
        g = torch.Generator(device="cuda").manual_seed(7)
        q = torch.randn(B, H, N_q, 128, device="cuda", generator=g, dtype=torch.bfloat16)
        k, v = (torch.randn(B, H_kv, N_k, 128, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))
        do = torch.randn_like(q)
        o, lse = flash_attention(q, k, v, causal, align)
        cfg = dataclasses.replace(hx.backward_config(128, "bf16", causal), group_splits=S, dkdv_order=order)
        alloc = bw._alloc
        bw._alloc = lambda shape, dt, dev: torch.full(shape, float("nan"), dtype=dt, device=dev)  # all written?
        try:
            with shared_kernel():
                dq, dk, dv, ran = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg,
                                                              return_config=True)
                again = bw.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=cfg)  # cached launcher
                launched = [p.dkdv.kernel for p in fa._PLANS.values() if getattr(p, "dkdv", None) is not None]
        finally:
            bw._alloc = alloc
        if ran.dkdv_kernel != "gluon" or launched != [_bwd_dkdv_gluon_shared] or ran.group_splits != S:
            # a fallback, the bundled kernel or another S would check something else than this kernel
            raise SystemExit(f"this probe's dK/dV kernel did not run as asked at {B, H, H_kv, N_q, N_k, causal, S}: "
                             f"{ran}, plans' dK/dV kernels {launched}")
        leaves = [x.clone().requires_grad_(True) for x in (q, k, v)]
        eager = [torch.nan_to_num(t) for t in torch.autograd.grad(eager_attention(*leaves, causal, align), leaves, do)]
        row = {"case": [B, H, H_kv, N_q, N_k, causal, align, S, order], "ran": ran.to_dict(), "ok": True, "err": {}}
        for name, ours, e, r in zip(("dq", "dk", "dv"), (dq, dk, dv), eager,
                                    reference_attention_backward(do, q, k, v, causal, align)):
            err, bar = float((ours.double() - r).abs().max()), float(2 * (e.double() - r).abs().max() + 1e-5)
            row["err"][name] = {"max_abs": err, "bar": bar, "nan": bool(torch.isnan(ours).any())}
            row["ok"] &= err <= bar and not row["err"][name]["nan"]
        row["same_bits_again"] = all(bool(torch.equal(a, b)) for a, b in zip((dq, dk, dv), again))
        row["ok"] &= row["same_bits_again"]
        rec["exactness"].append(row)
        print("exact", row["case"], row["ok"], flush=True)
    rec["exact"] = all(r["ok"] for r in rec["exactness"])
    if (rc := benchmark_finish(args.out, rec)) != 0:  # the exactness cases kept, whatever the timing does
        return rc
    if not rec["exact"]:
        print("error: a case is outside the error rule (or not the same bits twice): no timing", file=sys.stderr)
        return 1
    for B, N, causal in SPEED_ROWS:
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v, do = (torch.randn(B, 16, N, 128, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(4))
        o, lse = flash_attention(q, k, v, causal)
        bargs = (do, q, k, v, o, lse, causal, "top-left", None, None, None)
        plans = {"bundled": bw._build_bwd_plan(*bargs)}  # each side's launches, built once (no plan cache in the loop)
        with shared_kernel():
            plans["shared"] = bw._build_bwd_plan(*bargs)
        if not all(p.gluon for p in plans.values()) or plans["shared"].dkdv.kernel is not _bwd_dkdv_gluon_shared \
                or plans["bundled"].dkdv.kernel is _bwd_dkdv_gluon_shared:
            raise SystemExit(f"the two plans do not hold the bundled and this probe's Gluon dK/dV kernels at "
                             f"{B, N, causal}")

        def step(plan):
            o2, lse2 = flash_attention(q, k, v, causal)
            return plan.launch(do, q, k, v, o2, lse2)

        fns = {f"{n}_step": (lambda plan=plan: step(plan)) for n, plan in plans.items()}
        fns.update({f"{n}_backward": (lambda plan=plan: plan.launch(do, q, k, v, o, lse)) for n, plan in plans.items()})
        samples = do_bench_interleaved(fns, args.rounds, 25, 100)
        med = {n: sorted(s)[len(s) // 2] for n, s in samples.items()}
        row = {"B": B, "H": 16, "N": N, "d": 128, "causal": causal, "samples_s": samples, "median_s": med,
               "shared_vs_bundled_step": med["bundled_step"] / med["shared_step"],
               "shared_vs_bundled_backward": med["bundled_backward"] / med["shared_backward"],
               "ran": {n: p.ran.to_dict() for n, p in plans.items()}}
        rec["speed"].append(row)
        print("speed", B, N, causal, round(row["shared_vs_bundled_step"], 3), round(row["shared_vs_bundled_backward"], 3),
              flush=True)
    return benchmark_finish(args.out, rec)


if __name__ == "__main__":
    raise SystemExit(main())
