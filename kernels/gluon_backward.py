"""The backward's dK/dV launch for Hopper (sm_90) written in Gluon (``BackwardConfig.dkdv_kernel = "gluon"``).

The K/V-stationary half of FlashAttention-2's backward (Dao 2023, Algorithm 2, lines 6-21, transposed
as ``_bwd_dkdv_tma`` in ``kernels/backward.py``: rows of the score tile are keys) with the forward
Gluon kernel's structure (``kernels/gluon_attention.py``; Shah et al. 2024, "FlashAttention-3",
arXiv:2407.08608, section 3.1, warp specialisation):

* one **producer warp** loads the program's K and V (BLOCK_N = 128 keys, two boxes of 64 rows each)
  once, then Q and dO of each (query tile, group head) pair into a ring of NUM_STAGES shared-memory
  slots (TMA, one mbarrier per slot and direction);
* two **consumer warpgroups** own 64 keys each and run four asynchronous warpgroup MMAs per query
  tile: S = Q Kᵀ and dP = dO Vᵀ with the tile's query rows as rows (so each thread holds two rows'
  LSE and D: FlashAttention-3's ``SdP_swapAB = false`` at HEAD_DIM 128, its
  hopper/flash_bwd_launch_template.h), then P and dS go through shared memory (64 x 64 per warpgroup
  each) as the transposed A operands of dV += Pᵀ dO and dK += dSᵀ Q; a Q/dO slot is released once
  both warpgroups' MMAs that read it are complete. ``setmaxnreg`` gives the consumers 240 registers.
  Every partition works out its program's indices itself (``_program``) and the rows' and keys'
  offsets pass through an opaque move, so that nothing computed before the partitions split reaches
  them through local memory: ptxas spills 0 B non-causal and for the S > 1 partials, 8 B causal (one
  store and load after the loop), where the first form of this kernel (2026-12-05, register A
  operands) spilled 56-268 B a thread, about 12 KiB of local-memory stores a program
  (docs/l2-calibration.md, "The Gluon dK/dV launch").

Grid, tiles, loop order and bytes are the Triton TMA kernel's with the same tiles
(``_bwd_dkdv_tma``, the traffic contract's dK/dV kernel, ``docs/traffic-contract.md``): grid
``(cdiv(N_k, BLOCK_N), B·H_kv, S)``; a program reads its K and V tiles once and, for each (query tile,
head) pair of its GQA slice in the ``heads-outer`` or ``tiles-descending`` order
(``BackwardConfig.dkdv_order``), the Q and dO tile (TMA) and the LSE and D rows; query tiles from the
first one whose rows see the program's keys (causal, either alignment) to N_q; it stores dK and dV
once (fp32 partials of its slice when S > 1, summed by ``_bwd_reduce_dkdv``). TMA zero-fills Q and dO
rows past N_q and K and V rows past N_k (ragged lengths); rows past N_q take LSE = +inf, so P = 0
there, and rows that saw no key (LSE = -inf) likewise; dK/dV rows past N_k are not stored. One
difference at the SRAM level: each consumer warpgroup loads the LSE and D rows of a tile itself (two
loads of 8 bytes a row where the Triton kernel makes one; the second normally hits L1); Q, dO, K, V
and the stores are the contract's.

The spill-free form was measured against the first one before it replaced it, on an H100 (no H200 was
free; ``benchmarks/gpu_gluon_dkdv_shared_probe.py`` at commit d9f05f3, since removed,
receipts/gluon-dkdv-shared-probe-h100-2026-12-05.json): dq, dk, dv within the error rule on its 10 cases (MHA,
GQA, MQA, S = 1, 3, 4, both loop orders and alignments, ragged, rows without keys), the same bits on a second
call; forward + backward at B·N = 16k tokens, H = 16, bf16, interleaved medians, new over old: 1.01-1.05x
non-causal, 0.98-1.01x causal (the backward alone 1.00-1.09x and 0.99-1.01x).

Measured against the Triton dK/dV launch on the H200 (``benchmarks/gpu_gluon_bwd_probe.py`` at commit 54fd506,
receipts/gluon-bwd-probe-h200-2026-12-05.json, the MHA top-left probe this kernel generalises):
1.07-1.10x non-causal, 1.14-1.27x causal at HEAD_DIM 128. Gluon has no interpreter: this kernel runs
on an sm_90 GPU only (CPU tests compile it for sm_90; exactness is tested on the GPU,
``tests/test_gpu_gluon.py``).
"""

from __future__ import annotations

from kernels.gluon_attention import CONSUMER_REGS, GLUON_IMPORT_ERROR, PRODUCER_REGS, PRODUCER_WARPS

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

#: Keys per consumer warpgroup (a warpgroup MMA's M is 64): the K and V descriptor boxes' rows;
#: a program owns two of them (BLOCK_N = 128, ``heuristics.GLUON_DKDV_TILES``).
KEY_ROWS = 64

__all__ = ["CONSUMER_REGS", "KEY_ROWS", "PRODUCER_REGS", "PRODUCER_WARPS", "descriptor_boxes"]


def descriptor_boxes(head_dim: int, block_m: int) -> tuple[tuple[int, ...], ...]:
    """The TMA boxes (elements per axis) of q, k, v, dO, dK and dV, in the launch's order: ``(1, 1, BLOCK_M, d)``
    for Q and dO (one query tile), ``(1, 1, KEY_ROWS, d)`` for K, V, dK and dV (one consumer warpgroup's keys)."""
    q_box, kv_box = (1, 1, block_m, head_dim), (1, 1, KEY_ROWS, head_dim)
    return q_box, kv_box, kv_box, q_box, kv_box, kv_box


if GLUON_IMPORT_ERROR is None:

    @gluon.jit
    def _first(lo, n_tiles, g0, BLOCK_M: gl.constexpr, DESCEND: gl.constexpr):
        """A program's first (query tile start, group head) pair (``kernels.backward._first_pair``): tile lo of
        head g0, or (DESCEND, tiles-descending) its last tile of head g0."""
        if DESCEND:
            return lo + gl.maximum(n_tiles - 1, 0) * BLOCK_M, g0
        else:
            return lo, g0

    @gluon.jit
    def _next(start_m, g, lo, hi, g0, g1, BLOCK_M: gl.constexpr, DESCEND: gl.constexpr):
        """The next pair, no division per step (``kernels.backward._next_pair``): heads-outer, the next tile
        of head g or tile lo of head g + 1 once start_m reaches hi; DESCEND, the next head of [g0, g1) at
        the same tile or head g0 of the tile below once g reaches g1."""
        if DESCEND:
            g += 1
            if g >= g1:
                g = g0
                start_m -= BLOCK_M
        else:
            start_m += BLOCK_M
            if start_m >= hi:
                start_m = lo
                g += 1
        return start_m, g

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
    def _store_dkdv(dk, dv, k_tile, v_tile, desc_dk, desc_dv, DK, DV, sm_scale, b, hk, n0, out_head, N_K, stride_dkz,
                    stride_dkh, stride_dkn, stride_dvz, stride_dvh, stride_dvn, o_layout: gl.constexpr,
                    SPLIT: gl.constexpr):
        """Store one consumer warpgroup's dK (scaled by sm_scale) and dV, keys n0 .. n0+63: SPLIT, as fp32 partials,
        head ``out_head`` of DK and DV, by pointer stores masked to keys < N_K; else in the input dtype through the K
        and V tiles' shared memory (every product reading them is complete) and TMA stores, which drop rows past
        N_K."""
        ROWS: gl.constexpr = k_tile.shape[2]
        HEAD_DIM: gl.constexpr = k_tile.shape[3]
        if SPLIT:
            rows = n0 + gl.arange(0, ROWS, layout=gl.SliceLayout(1, o_layout))
            cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
            ok = (rows < N_K)[:, None]
            dk_ptr = (DK + b.to(gl.int64) * stride_dkz + out_head.to(gl.int64) * stride_dkh
                      + rows.to(gl.int64)[:, None] * stride_dkn + cols[None, :])
            gl.store(dk_ptr, dk * sm_scale, mask=ok)
            dv_ptr = (DV + b.to(gl.int64) * stride_dvz + out_head.to(gl.int64) * stride_dvh
                      + rows.to(gl.int64)[:, None] * stride_dvn + cols[None, :])
            gl.store(dv_ptr, dv, mask=ok)
        else:
            k_tile.reshape([ROWS, HEAD_DIM]).store((dk * sm_scale).to(k_tile.dtype))
            v_tile.reshape([ROWS, HEAD_DIM]).store(dv.to(v_tile.dtype))
            fence_async_shared()
            tma.async_copy_shared_to_global(desc_dk, [b, hk, n0, 0], k_tile)
            tma.async_copy_shared_to_global(desc_dv, [b, hk, n0, 0], v_tile)
            tma.store_wait(0)

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
    def _bwd_dkdv_gluon(desc_q, desc_k, desc_v, desc_do, desc_dk, desc_dv, LSE, DELTA, DK, DV, sm_scale,
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
