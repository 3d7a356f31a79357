"""GPU probe (issue 14, prefill speed): a hand-written Gluon forward for Hopper against the bundled kernel.

Issue 14 asks to try what Triton 3.6 offers on sm_90, Gluon among it, and to report each
attempt's numbers, including the ones that lost. Triton's own tutorials bring a Gluon attention
for Blackwell (tcgen05) only, so this one is written here from FlashAttention-3's schedule
(Shah et al. 2024, arXiv:2407.08608, section 3.2 "intra-warpgroup overlapping", Algorithm 2):

* one program per query tile of BLOCK_M = 128 rows, 8 warps = two warpgroups of 64 rows each
  (``warpgroup_mma`` splits M over ``warps_per_cta = [8, 1]``), grid (T_r, B·H) tiles fastest,
  causal tiles heaviest first (the bundled kernel's order);
* Q, K and V through TMA (host descriptors over the rank-2 ``(B·H·N, d)`` view, so seqlens are
  multiples of the tiles here), K and V each in a ring of NUM_STAGES shared-memory slots with one
  mbarrier per slot;
* the scores of block j+1 (``S = Q K_{j+1}^T``) and the output update of block j
  (``O += P_j V_j``) are issued as asynchronous warpgroup MMAs before the softmax of block j+1
  runs, so the exponentials of one block overlap the tensor-core work of another; P stays in
  registers (the A operand of the second MMA);
* a slot is refilled (``tma.async_copy_global_to_shared``) once both warpgroups are past the MMAs
  that read it (``gl.thread_barrier``).

No warp specialisation and no ping-pong of two warpgroups (FA3 section 3.1): both warpgroups run
one instruction stream. Causal masking is top-left with N_q == N_k (scores masked on the diagonal
blocks only).

    python benchmarks/gpu_gluon_fwd_probe.py --compile-only         # this machine, no GPU
    python benchmarks/gpu_gluon_fwd_probe.py --out $OUT/gluon.json  # the H200

1. Exactness: o and LSE of every variant against the bundled ``flash_attention`` on the same
   inputs (max |difference|, and max |difference| / max |o|).
2. Speed: the bundled kernel (its default path: ``prefill-gluon`` at HEAD_DIM 128 since
   2026-12-04 and at 64 non-causal since 2026-12-05, then ``prefill-tma`` beside it as ``bundled_tma``; where the
   default is ``prefill-tma``, the launcher's ``prefill-gluon`` beside it as ``bundled_gluon``), each Gluon variant,
   SDPA FLASH and SDPA cuDNN,
   interleaved (``iomodel.bench.timing.do_bench_interleaved``, L2 flushed per repetition),
   TFLOP/s with FLOPs = 4·B·H·d·(visible pairs) and every ratio to cuDNN and to the bundled kernel.
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

LOG2E = 1.4426950408889634

# The issue's table (B, H, N, d, causal, dtype) and the bench matrix's prefill buckets at N >= 2k.
SHAPES = [
    (2, 16, 8192, 128, False, "bf16"),
    (2, 16, 8192, 128, True, "bf16"),
    (8, 16, 2048, 128, True, "bf16"),
    (4, 16, 4096, 64, False, "fp16"),
    (4, 16, 4096, 128, False, "bf16"),
    (4, 16, 4096, 64, True, "bf16"),
]
# (BLOCK_N, NUM_STAGES) per HEAD_DIM: shared memory = (BLOCK_M + 2·NUM_STAGES·BLOCK_N)·d·2 bytes.
VARIANTS = {128: [(128, 2), (64, 3), (64, 2)], 64: [(128, 2), (128, 3), (64, 3)]}  # NUM_STAGES >= 2: block j+1
# is loaded while slot j is still read
WS_VARIANTS = {128: [(128, 2), (128, 3), (64, 3)], 64: [(128, 2), (128, 3), (128, 4)]}
PWS_VARIANTS = {128: [(128, 2), (64, 3)], 64: [(128, 3), (128, 4)]}  # + O buffers: d 128 BLOCK_N 128 fits 2 stages
WS_REGS = dict(consumer_regs=240, producer_regs=24, producer_warps=1)
#: Four consumer warpgroups (``_gluon_fwd_ws4``, BLOCK_M 256) at HEAD_DIM 64: 20 warps, 112 registers per
#: worker consumer (the default partition gets 120), no spill at BLOCK_N 64 (at 120 per worker the
#: default partition is cut to 96 and spills 256 B); BLOCK_N 128 spills. Not yet measured on a GPU.
WS4_VARIANTS = {64: [(64, 3), (64, 4)]}
WS4_REGS = dict(consumer_regs=112, producer_regs=24, producer_warps=1)


def _variants(d: int, kinds: tuple[str, ...] = ("plain", "ws", "pws")) -> list[tuple[str, int, int]]:
    """(kind, BLOCK_N, NUM_STAGES) of the variants at HEAD_DIM d; kind: plain, ws, pws (persistent ws),
    ws1 and pws1 (ws and pws releasing a K slot with its V slot, after the output MMA), ws4 (four
    consumer warpgroups, BLOCK_M 256, HEAD_DIM 64 only), ws4e (ws4 whose warpgroups stop at their own causal
    key blocks, then take their remaining turns idle; not yet run on a GPU)."""
    table = {"plain": VARIANTS, "ws": WS_VARIANTS, "pws": PWS_VARIANTS, "ws1": WS_VARIANTS, "pws1": PWS_VARIANTS,
             "ws4": WS4_VARIANTS, "ws4e": WS4_VARIANTS}
    return [(kind, bn, st) for kind in kinds for bn, st in table[kind].get(d, [])]


def _kind_kwargs(kind: str) -> dict:
    if kind == "plain":
        return {}
    if kind in ("ws4", "ws4e"):
        return dict(WS4_REGS, ws4=True, block_m=256, early_stop=kind == "ws4e")
    return dict(WS_REGS, ws=True, persistent=kind.startswith("pws"), early_k=not kind.endswith("1"),
                num_sms=torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 132)


@gluon.jit
def _issue_kv(desc, smem, bars, row, slot, pred):
    """Start the TMA copy of one K or V block (BLOCK_N rows from ``row``) into ring slot ``slot``."""
    bar = bars.index(slot)
    mbarrier.expect(bar, desc.block_type.nbytes, pred=pred)
    tma.async_copy_global_to_shared(desc, [row, 0], bar, smem.index(slot), pred=pred)


@gluon.jit
def _softmax_block(qk, m_i, l_i, j, row0, offs_m, offs_n, qk_scale, dtype: gl.constexpr, p_layout: gl.constexpr,
                   row_o: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """Online softmax of key block j (FA2 Algorithm 1, lines 8-10; m in log2 units of the scaled scores):
    P as the A operand of the next MMA, the rescale factor of O in O's row layout, new m and l."""
    if CAUSAL:
        if (j + 1) * BLOCK_N > row0:  # a block reaching the first row's diagonal: mask keys above the row
            keys = j * BLOCK_N + offs_n
            qk = gl.where(keys[None, :] <= offs_m[:, None], qk, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
    p = gl.exp2(qk * qk_scale - m_new[:, None])
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    p_op = gl.convert_layout(p.to(dtype), p_layout)
    return p_op, gl.convert_layout(alpha, row_o), m_new, l_i


@gluon.jit
def _tile_of_program(N_CTX, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """This program's query tile pid (the longest first when causal: reverse order), its (batch, head) bh, the
    first Q/O row and the first K/V row of that head in the (B·H·N_CTX, HEAD_DIM) view, and its key blocks
    (every block, or up to the diagonal when causal)."""
    if CAUSAL:
        pid = gl.num_programs(0) - 1 - gl.program_id(0)
    else:
        pid = gl.program_id(0)
    bh = gl.program_id(1)
    q_row = bh * N_CTX + pid * BLOCK_M
    kv_row0 = bh * N_CTX
    if CAUSAL:
        n_blocks = gl.cdiv((pid + 1) * BLOCK_M, BLOCK_N)
    else:
        n_blocks = N_CTX // BLOCK_N
    return pid, bh, q_row, kv_row0, n_blocks


@gluon.jit
def _gluon_fwd(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, N_CTX,
               HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
               NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, num_warps: gl.constexpr):
    """Forward of one query tile: o (BLOCK_M, HEAD_DIM) and LSE (BLOCK_M,) in natural-log units.

    Descriptors are rank 2 over the (B·H·N_CTX, HEAD_DIM) view of contiguous (B, H, N, d) tensors;
    N_CTX is a multiple of BLOCK_M and BLOCK_N (checked on the host).
    """
    dtype: gl.constexpr = desc_q.dtype
    pid, bh, q_row, kv_row0, n_blocks = _tile_of_program(N_CTX, BLOCK_M, BLOCK_N, CAUSAL)

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], desc_q.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_v.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(k_bars.index(s), count=1)
        mbarrier.init(v_bars.index(s), count=1)
    fence_async_shared()
    gl.thread_barrier()

    mbarrier.expect(q_bar, desc_q.block_type.nbytes)
    tma.async_copy_global_to_shared(desc_q, [q_row, 0], q_bar, q_smem)
    for s in gl.static_range(NUM_STAGES):
        _issue_kv(desc_k, k_smem, k_bars, kv_row0 + s * BLOCK_N, s, s < n_blocks)
        _issue_kv(desc_v, v_smem, v_bars, kv_row0 + s * BLOCK_N, s, s < n_blocks)

    qk_scale = sm_scale * 1.4426950408889634
    offs_m = pid * BLOCK_M + gl.arange(0, BLOCK_M, layout=row_s)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([BLOCK_M], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([BLOCK_M], 0.0, gl.float32, layout=row_s)
    acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)

    # Block 0's scores and softmax.
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_bars.index(0), 0)
    s_tok = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    qk = warpgroup_mma_wait(0, deps=(s_tok, ))
    p_op, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 0, pid * BLOCK_M, offs_m, offs_n, qk_scale, dtype, p_layout,
                                           row_o, BLOCK_N, CAUSAL)
    for j in range(n_blocks - 1):
        slot = j % NUM_STAGES
        nxt = (j + 1) % NUM_STAGES
        # Scores of block j+1 and the output update of block j, both asynchronous; the softmax of
        # block j+1 runs while the second MMA does (FA3 Algorithm 2).
        mbarrier.wait(k_bars.index(nxt), ((j + 1) // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(nxt).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_bars.index(slot), (j // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        qk = warpgroup_mma_wait(1, deps=(s_tok, ))
        p_op, alpha_next, m_i, l_i = _softmax_block(qk, m_i, l_i, j + 1, pid * BLOCK_M, offs_m, offs_n, qk_scale,
                                                    dtype, p_layout, row_o, BLOCK_N, CAUSAL)
        acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
        acc = acc * alpha_next[:, None]
        # Both warpgroups are past every MMA that reads slot ``slot``: refill it.
        gl.thread_barrier()
        refill = j + NUM_STAGES
        _issue_kv(desc_k, k_smem, k_bars, kv_row0 + refill * BLOCK_N, slot, refill < n_blocks)
        _issue_kv(desc_v, v_smem, v_bars, kv_row0 + refill * BLOCK_N, slot, refill < n_blocks)
    last = n_blocks - 1
    mbarrier.wait(v_bars.index(last % NUM_STAGES), (last // NUM_STAGES) & 1)
    acc_tok = warpgroup_mma(p_op, v_smem.index(last % NUM_STAGES), acc, is_async=True)
    acc = warpgroup_mma_wait(0, deps=(acc_tok, ))

    mbarrier.invalidate(q_bar)
    for s in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(k_bars.index(s))
        mbarrier.invalidate(v_bars.index(s))

    l_o = gl.convert_layout(l_i, row_o)
    o = acc / l_o[:, None]
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
    gl.store(LSE + bh.to(gl.int64) * N_CTX + offs_m, lse)
    q_smem.store(o.to(dtype))
    fence_async_shared()
    gl.thread_barrier()
    tma.async_copy_shared_to_global(desc_o, [q_row, 0], q_smem)
    tma.store_wait(0)


# ---------------------------------------------------------------------------------------------
# Variant 2: warp-specialised, two consumer warpgroups in ping-pong (FA3 sections 3.1 and 3.2).
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _ring_barriers(NUM_STAGES: gl.constexpr, CONSUMERS: gl.constexpr):
    """The warp-specialised kernels' mbarriers, allocated and initialised: per K/V slot a full barrier for K
    and for V (completed by the TMA bytes) and an empty one for each (one arrival per consumer), and one
    turn barrier per consumer warpgroup. Returns (k_bars, v_bars, k_empty, v_empty, turns)."""
    k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    turns = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for s in gl.static_range(NUM_STAGES):
        mbarrier.init(k_bars.index(s), count=1)
        mbarrier.init(v_bars.index(s), count=1)
        mbarrier.init(k_empty.index(s), count=CONSUMERS)
        mbarrier.init(v_empty.index(s), count=CONSUMERS)
    for c in gl.static_range(CONSUMERS):
        mbarrier.init(turns.index(c), count=1)
    return k_bars, v_bars, k_empty, v_empty, turns


@gluon.jit
def _ws_producer(desc_q, desc_k, desc_v, q_smem0, q_smem1, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                 q_row, kv_row0, n_blocks, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """One warp issuing every TMA load: the two Q halves, then K and V block by block into the ring,
    waiting for a slot's ``empty`` barrier (both consumers past it: K after the score MMA, V after
    the output MMA) before refilling it."""
    HALF: gl.constexpr = desc_q.block_type.shape[0]
    mbarrier.expect(q_bar, 2 * desc_q.block_type.nbytes)
    tma.async_copy_global_to_shared(desc_q, [q_row, 0], q_bar, q_smem0)
    tma.async_copy_global_to_shared(desc_q, [q_row + HALF, 0], q_bar, q_smem1)
    for j in range(n_blocks):
        slot = j % NUM_STAGES
        mbarrier.wait(k_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=j >= NUM_STAGES)
        _issue_kv(desc_k, k_smem, k_bars, kv_row0 + j * BLOCK_N, slot, True)
        mbarrier.wait(v_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=j >= NUM_STAGES)
        _issue_kv(desc_v, v_smem, v_bars, kv_row0 + j * BLOCK_N, slot, True)


@gluon.jit
def _ws_consumer(desc_o, LSE, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty, my_turn, other_turn,
                 sm_scale, bh, N_CTX, q_row, row0, pid, n_blocks, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                 BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, FIRST: gl.constexpr,
                 EARLY_K: gl.constexpr, EARLY_STOP: gl.constexpr = False):
    """One consumer warpgroup: 64 query rows from ``row0`` against every K/V block of the ring.

    ``EARLY_STOP`` (causal): the warpgroup computes only the key blocks its own rows see (a 256-row tile's first
    warpgroup skips 3 fully masked 64-key blocks on the diagonal, the second 2, the third 1) and then takes its
    remaining turns idle: it passes each turn on and releases each remaining slot once its block has arrived, so
    the ring's phases and the producer's refills stay as they were.

    Its MMAs of one step are issued only on its turn (``my_turn``), and the turn is handed to the
    other warpgroup (``other_turn``) once they are issued, so one warpgroup's softmax runs while the
    other's MMAs do (FA3 section 3.1, ping-pong); within the warpgroup, the scores of block j+1 and
    the output update of block j are in flight during the softmax of block j+1 (section 3.2).
    """
    dtype: gl.constexpr = desc_o.dtype
    HALF: gl.constexpr = desc_o.block_type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    qk_scale = sm_scale * 1.4426950408889634
    offs_m = row0 + gl.arange(0, HALF, layout=row_s)
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    m_i = gl.full([HALF], float("-inf"), gl.float32, layout=row_s)
    l_i = gl.full([HALF], 0.0, gl.float32, layout=row_s)
    acc = gl.zeros([HALF, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([HALF, BLOCK_N], gl.float32, layout=s_layout)
    if not FIRST:
        mbarrier.arrive(other_turn, count=1)  # the first consumer goes first
    turn = 0

    mbarrier.wait(q_bar, 0)
    mbarrier.wait(my_turn, turn & 1)
    turn += 1
    mbarrier.wait(k_bars.index(0), 0)
    s_tok = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    mbarrier.arrive(other_turn, count=1)
    qk = warpgroup_mma_wait(0, deps=(s_tok, ))
    mbarrier.arrive(k_empty.index(0), count=1, pred=EARLY_K)
    p_op, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 0, row0, offs_m, offs_n, qk_scale, dtype, p_layout, row_o,
                                           BLOCK_N, CAUSAL)
    my_blocks = n_blocks
    if EARLY_STOP and CAUSAL:  # the blocks this warpgroup's rows see (keys <= its last row)
        my_blocks = gl.minimum(n_blocks, gl.cdiv(row0 + HALF, BLOCK_N))
    for j in range(my_blocks - 1):
        slot = j % NUM_STAGES
        nxt = (j + 1) % NUM_STAGES
        mbarrier.wait(my_turn, turn & 1)
        turn += 1
        mbarrier.wait(k_bars.index(nxt), ((j + 1) // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(nxt).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_bars.index(slot), (j // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
        mbarrier.arrive(other_turn, count=1)
        qk = warpgroup_mma_wait(1, deps=(s_tok, ))
        mbarrier.arrive(k_empty.index(nxt), count=1, pred=EARLY_K)
        p_op, alpha_next, m_i, l_i = _softmax_block(qk, m_i, l_i, j + 1, row0, offs_m, offs_n, qk_scale, dtype,
                                                    p_layout, row_o, BLOCK_N, CAUSAL)
        acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
        acc = acc * alpha_next[:, None]
        mbarrier.arrive(k_empty.index(slot), count=1, pred=not EARLY_K)
        mbarrier.arrive(v_empty.index(slot), count=1)
    last = my_blocks - 1
    mbarrier.wait(my_turn, turn & 1)
    turn += 1
    mbarrier.wait(v_bars.index(last % NUM_STAGES), (last // NUM_STAGES) & 1)
    acc_tok = warpgroup_mma(p_op, v_smem.index(last % NUM_STAGES), acc, is_async=True)
    mbarrier.arrive(other_turn, count=1)
    acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
    if EARLY_STOP and CAUSAL:
        mbarrier.arrive(k_empty.index(last % NUM_STAGES), count=1, pred=not EARLY_K)
        mbarrier.arrive(v_empty.index(last % NUM_STAGES), count=1)  # the others may still need its refill
        for j in range(my_blocks, n_blocks):  # idle turns: pass each on, release each slot once its block is in
            slot = j % NUM_STAGES
            mbarrier.wait(my_turn, turn & 1)
            turn += 1
            mbarrier.arrive(other_turn, count=1)
            mbarrier.wait(k_bars.index(slot), (j // NUM_STAGES) & 1)
            mbarrier.arrive(k_empty.index(slot), count=1)
            mbarrier.wait(v_bars.index(slot), (j // NUM_STAGES) & 1)
            mbarrier.arrive(v_empty.index(slot), count=1)

    l_o = gl.convert_layout(l_i, row_o)
    o = acc / l_o[:, None]
    lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
    gl.store(LSE + bh.to(gl.int64) * N_CTX + offs_m, lse)
    q_smem.store(o.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(desc_o, [q_row, 0], q_smem)
    tma.store_wait(0)


@gluon.jit
def _gluon_fwd_ws(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, N_CTX,
                  HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                  PRODUCER_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, EARLY_K: gl.constexpr = True):
    """Forward of one query tile of BLOCK_M = 128 rows: a producer warp and two consumer warpgroups
    of 64 rows each (the default partition and a worker). Descriptors as ``_gluon_fwd``'s, Q's and
    O's boxes of 64 rows."""
    dtype: gl.constexpr = desc_q.dtype
    HALF: gl.constexpr = desc_q.block_type.shape[0]
    pid, bh, q_row, kv_row0, n_blocks = _tile_of_program(N_CTX, BLOCK_M, BLOCK_N, CAUSAL)

    q_smem0 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_q.layout)
    q_smem1 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_q.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_v.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    k_bars, v_bars, k_empty, v_empty, turns = _ring_barriers(NUM_STAGES, 2)
    fence_async_shared()

    gl.warp_specialize([
        (_ws_consumer, (desc_o, LSE, q_smem0, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty, turns.index(0),
                        turns.index(1), sm_scale, bh, N_CTX, q_row, pid * BLOCK_M, pid, n_blocks, HEAD_DIM, BLOCK_M,
                        BLOCK_N, NUM_STAGES, CAUSAL, True, EARLY_K)),
        (_ws_consumer, (desc_o, LSE, q_smem1, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty, turns.index(1),
                        turns.index(0), sm_scale, bh, N_CTX, q_row + HALF, pid * BLOCK_M + HALF, pid, n_blocks,
                        HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, False, EARLY_K)),
        (_ws_producer, (desc_q, desc_k, desc_v, q_smem0, q_smem1, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                        q_row, kv_row0, n_blocks, BLOCK_N, NUM_STAGES)),
    ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


# ---------------------------------------------------------------------------------------------
# Variant 3: variant 2 made persistent (one program per SM looping over query tiles), so the next
# tile's Q and K/V loads overlap the current tile's last blocks and its epilogue (FA3 section 3.1,
# "persistent kernels"). O leaves through its own shared-memory buffers.
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _tile_of(t, T_R, CAUSAL: gl.constexpr):
    """Query tile index and (batch·head) of work item t: heads outer, tiles inner (heaviest first when
    causal), as the bundled kernel's grid runs them."""
    bh = t // T_R
    i = t % T_R
    if CAUSAL:
        i = T_R - 1 - i
    return i, bh


@gluon.jit
def _n_blocks(i, N_CTX, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    if CAUSAL:
        n = gl.cdiv((i + 1) * BLOCK_M, BLOCK_N)
    else:
        n = N_CTX // BLOCK_N
    return n


@gluon.jit
def _pws_producer(desc_q, desc_k, desc_v, q_smem0, q_smem1, k_smem, v_smem, q_full, q_empty, k_bars, v_bars,
                  k_empty, v_empty, N_CTX, T_R, TOTAL, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr):
    HALF: gl.constexpr = desc_q.block_type.shape[0]
    kv = 0
    tile = 0
    for t in range(gl.program_id(0), TOTAL, gl.num_programs(0)):
        i, bh = _tile_of(t, T_R, CAUSAL)
        q_row = bh * N_CTX + i * BLOCK_M
        if tile > 0:
            mbarrier.wait(q_empty, (tile - 1) & 1)
        mbarrier.expect(q_full, 2 * desc_q.block_type.nbytes)
        tma.async_copy_global_to_shared(desc_q, [q_row, 0], q_full, q_smem0)
        tma.async_copy_global_to_shared(desc_q, [q_row + HALF, 0], q_full, q_smem1)
        for j in range(_n_blocks(i, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)):
            slot = kv % NUM_STAGES
            mbarrier.wait(k_empty.index(slot), ((kv // NUM_STAGES) - 1) & 1, pred=kv >= NUM_STAGES)
            _issue_kv(desc_k, k_smem, k_bars, bh * N_CTX + j * BLOCK_N, slot, True)
            mbarrier.wait(v_empty.index(slot), ((kv // NUM_STAGES) - 1) & 1, pred=kv >= NUM_STAGES)
            _issue_kv(desc_v, v_smem, v_bars, bh * N_CTX + j * BLOCK_N, slot, True)
            kv += 1
        tile += 1


@gluon.jit
def _pws_consumer(desc_o, LSE, q_smem, o_smem, k_smem, v_smem, q_full, q_empty, k_bars, v_bars, k_empty, v_empty,
                  my_turn, other_turn, sm_scale, N_CTX, T_R, TOTAL, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, SECOND: gl.constexpr,
                  EARLY_K: gl.constexpr):
    """``_ws_consumer`` over every tile of this program; SECOND: the warpgroup of the tile's rows 64..127."""
    dtype: gl.constexpr = desc_o.dtype
    HALF: gl.constexpr = desc_o.block_type.shape[0]
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    qk_scale = sm_scale * 1.4426950408889634
    s_zero = gl.zeros([HALF, BLOCK_N], gl.float32, layout=s_layout)
    if SECOND:
        mbarrier.arrive(other_turn, count=1)  # the first warpgroup goes first
    turn = 0
    kv = 0
    tile = 0
    for t in range(gl.program_id(0), TOTAL, gl.num_programs(0)):
        i, bh = _tile_of(t, T_R, CAUSAL)
        row0 = i * BLOCK_M + SECOND * HALF
        n_blocks = _n_blocks(i, N_CTX, BLOCK_M, BLOCK_N, CAUSAL)
        offs_m = row0 + gl.arange(0, HALF, layout=row_s)
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        m_i = gl.full([HALF], float("-inf"), gl.float32, layout=row_s)
        l_i = gl.full([HALF], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([HALF, HEAD_DIM], gl.float32, layout=o_layout)

        mbarrier.wait(q_full, tile & 1)
        mbarrier.wait(my_turn, turn & 1)
        turn += 1
        slot = kv % NUM_STAGES
        mbarrier.wait(k_bars.index(slot), (kv // NUM_STAGES) & 1)
        s_tok = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.arrive(other_turn, count=1)
        qk = warpgroup_mma_wait(0, deps=(s_tok, ))
        mbarrier.arrive(k_empty.index(slot), count=1, pred=EARLY_K)
        p_op, alpha, m_i, l_i = _softmax_block(qk, m_i, l_i, 0, row0, offs_m, offs_n, qk_scale, dtype, p_layout,
                                               row_o, BLOCK_N, CAUSAL)
        for j in range(n_blocks - 1):
            slot = (kv + j) % NUM_STAGES
            nxt = (kv + j + 1) % NUM_STAGES
            mbarrier.wait(my_turn, turn & 1)
            turn += 1
            mbarrier.wait(k_bars.index(nxt), ((kv + j + 1) // NUM_STAGES) & 1)
            s_tok = warpgroup_mma(q_smem, k_smem.index(nxt).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            mbarrier.wait(v_bars.index(slot), ((kv + j) // NUM_STAGES) & 1)
            acc_tok = warpgroup_mma(p_op, v_smem.index(slot), acc, is_async=True)
            mbarrier.arrive(other_turn, count=1)
            qk = warpgroup_mma_wait(1, deps=(s_tok, ))
            mbarrier.arrive(k_empty.index(nxt), count=1, pred=EARLY_K)
            p_op, alpha_next, m_i, l_i = _softmax_block(qk, m_i, l_i, j + 1, row0, offs_m, offs_n, qk_scale, dtype,
                                                        p_layout, row_o, BLOCK_N, CAUSAL)
            acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
            acc = acc * alpha_next[:, None]
            mbarrier.arrive(k_empty.index(slot), count=1, pred=not EARLY_K)
            mbarrier.arrive(v_empty.index(slot), count=1)
        last = kv + n_blocks - 1
        mbarrier.wait(my_turn, turn & 1)
        turn += 1
        mbarrier.wait(v_bars.index(last % NUM_STAGES), (last // NUM_STAGES) & 1)
        acc_tok = warpgroup_mma(p_op, v_smem.index(last % NUM_STAGES), acc, is_async=True)
        mbarrier.arrive(other_turn, count=1)
        mbarrier.arrive(q_empty, count=1)  # Q is read by score MMAs only, all complete
        acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
        mbarrier.arrive(k_empty.index(last % NUM_STAGES), count=1, pred=not EARLY_K)
        mbarrier.arrive(v_empty.index(last % NUM_STAGES), count=1)
        kv += n_blocks
        tile += 1

        l_o = gl.convert_layout(l_i, row_o)
        o = acc / l_o[:, None]
        lse = (m_i + gl.log2(l_i)) * 0.6931471805599453
        gl.store(LSE + bh.to(gl.int64) * N_CTX + offs_m, lse)
        tma.store_wait(0)  # the previous tile's O has left o_smem
        o_smem.store(o.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(desc_o, [bh * N_CTX + row0, 0], o_smem)
    tma.store_wait(0)


@gluon.jit
def _gluon_fwd_pws(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, N_CTX, T_R, TOTAL,
                   HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                   PRODUCER_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, EARLY_K: gl.constexpr = True):
    """Persistent ``_gluon_fwd_ws``: grid (programs,), work items t = program, program + programs, ... <
    TOTAL = T_R·B·H."""
    dtype: gl.constexpr = desc_q.dtype
    HALF: gl.constexpr = desc_q.block_type.shape[0]
    q_smem0 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_q.layout)
    q_smem1 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_q.layout)
    o_smem0 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_o.layout)
    o_smem1 = gl.allocate_shared_memory(dtype, [HALF, HEAD_DIM], desc_o.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_v.layout)
    q_full = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_full, count=1)
    mbarrier.init(q_empty, count=2)
    k_bars, v_bars, k_empty, v_empty, turns = _ring_barriers(NUM_STAGES, 2)
    fence_async_shared()

    gl.warp_specialize([
        (_pws_consumer, (desc_o, LSE, q_smem0, o_smem0, k_smem, v_smem, q_full, q_empty, k_bars, v_bars, k_empty, v_empty,
                         turns.index(0), turns.index(1), sm_scale, N_CTX, T_R, TOTAL, HEAD_DIM, BLOCK_M, BLOCK_N,
                         NUM_STAGES, CAUSAL, 0, EARLY_K)),
        (_pws_consumer, (desc_o, LSE, q_smem1, o_smem1, k_smem, v_smem, q_full, q_empty, k_bars, v_bars, k_empty, v_empty,
                         turns.index(1), turns.index(0), sm_scale, N_CTX, T_R, TOTAL, HEAD_DIM, BLOCK_M, BLOCK_N,
                         NUM_STAGES, CAUSAL, 1, EARLY_K)),
        (_pws_producer, (desc_q, desc_k, desc_v, q_smem0, q_smem1, k_smem, v_smem, q_full, q_empty, k_bars, v_bars,
                         k_empty, v_empty, N_CTX, T_R, TOTAL, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL)),
    ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])


# ---------------------------------------------------------------------------------------------
# Variant 4 (compile-checked, not yet measured): four consumer warpgroups (BLOCK_M = 256, a power of
# two the model's tiles allow) in a ring of turns, for HEAD_DIM 64, where the two-warpgroup design did
# not beat the TMA prefill on causal rows. FlashAttention-3 runs 3 warpgroups (192 rows) at d 64; 192
# rows would need tiles the model does not take today.
# ---------------------------------------------------------------------------------------------
@gluon.jit
def _ws4_producer(desc_q, desc_k, desc_v, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                  q_row, kv_row0, n_blocks, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """``_ws_producer`` for four Q parts of 64 rows (``q_smem`` (4, 64, d))."""
    ROWS: gl.constexpr = desc_q.block_type.shape[0]
    mbarrier.expect(q_bar, 4 * desc_q.block_type.nbytes)
    for c in gl.static_range(4):
        tma.async_copy_global_to_shared(desc_q, [q_row + c * ROWS, 0], q_bar, q_smem.index(c))
    for j in range(n_blocks):
        slot = j % NUM_STAGES
        mbarrier.wait(k_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=j >= NUM_STAGES)
        _issue_kv(desc_k, k_smem, k_bars, kv_row0 + j * BLOCK_N, slot, True)
        mbarrier.wait(v_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=j >= NUM_STAGES)
        _issue_kv(desc_v, v_smem, v_bars, kv_row0 + j * BLOCK_N, slot, True)


@gluon.jit
def _gluon_fwd_ws4(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, N_CTX,
                   HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                   PRODUCER_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr, EARLY_STOP: gl.constexpr = False):
    """Forward of one query tile of BLOCK_M = 256 rows: a producer warp and four consumer warpgroups of
    64 rows each, the turn passed round the ring 0 -> 1 -> 2 -> 3 -> 0 (consumer 3 opens it)."""
    dtype: gl.constexpr = desc_q.dtype
    ROWS: gl.constexpr = desc_q.block_type.shape[0]
    pid, bh, q_row, kv_row0, n_blocks = _tile_of_program(N_CTX, BLOCK_M, BLOCK_N, CAUSAL)

    q_smem = gl.allocate_shared_memory(dtype, [4, ROWS, HEAD_DIM], desc_q.layout)
    k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_k.layout)
    v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_N, HEAD_DIM], desc_v.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    k_bars, v_bars, k_empty, v_empty, turns = _ring_barriers(NUM_STAGES, 4)
    fence_async_shared()

    # _ws_consumer's FIRST=False makes a consumer hand the first turn on: only consumer 3 (to consumer 0)
    gl.warp_specialize([
        (_ws_consumer, (desc_o, LSE, q_smem.index(0), k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                        turns.index(0), turns.index(1), sm_scale, bh, N_CTX, q_row, pid * BLOCK_M, pid, n_blocks,
                        HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, True, True, EARLY_STOP)),
        (_ws_consumer, (desc_o, LSE, q_smem.index(1), k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                        turns.index(1), turns.index(2), sm_scale, bh, N_CTX, q_row + ROWS, pid * BLOCK_M + ROWS, pid,
                        n_blocks, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, True, True, EARLY_STOP)),
        (_ws_consumer, (desc_o, LSE, q_smem.index(2), k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                        turns.index(2), turns.index(3), sm_scale, bh, N_CTX, q_row + 2 * ROWS, pid * BLOCK_M + 2 * ROWS,
                        pid, n_blocks, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, True, True, EARLY_STOP)),
        (_ws_consumer, (desc_o, LSE, q_smem.index(3), k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                        turns.index(3), turns.index(0), sm_scale, bh, N_CTX, q_row + 3 * ROWS, pid * BLOCK_M + 3 * ROWS,
                        pid, n_blocks, HEAD_DIM, BLOCK_M, BLOCK_N, NUM_STAGES, CAUSAL, False, True, EARLY_STOP)),
        (_ws4_producer, (desc_q, desc_k, desc_v, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                         q_row, kv_row0, n_blocks, BLOCK_N, NUM_STAGES)),
    ], [4, 4, 4, PRODUCER_WARPS], [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])


def gluon_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, block_n: int, num_stages: int,
                  block_m: int = 128, num_warps: int = 8, out: tuple | None = None, warmup_only: bool = False,
                  ws: bool = False, consumer_regs: int = 232, producer_regs: int = 40, producer_warps: int = 1,
                  persistent: bool = False, num_sms: int = 132, early_k: bool = True, ws4: bool = False,
                  early_stop: bool = False):
    """o (B, H, N, d) and LSE (B, H, N) fp32 of contiguous q, k, v (B, H, N, d), N a multiple of the tiles.

    ``ws``: the warp-specialised ping-pong kernel (``_gluon_fwd_ws``: 4 + 4 consumer warps with
    ``consumer_regs`` registers for the worker consumer, ``producer_warps`` with ``producer_regs``);
    ``persistent`` (with ``ws``): ``_gluon_fwd_pws`` on min(num_sms, tiles) programs; ``early_k`` (with
    ``ws``): a K slot is released once the score MMA that reads it is complete (FA3), else together with
    its V slot after the output MMA (the first design measured); ``ws4``: ``_gluon_fwd_ws4`` (four
    consumer warpgroups, ``block_m`` 256)."""
    B, H, N, D = q.shape
    if N % block_m or N % block_n:
        raise ValueError(f"seqlen {N} must be a multiple of BLOCK_M {block_m} and BLOCK_N {block_n} in this probe")
    o, lse = out if out is not None else (torch.empty_like(q), torch.empty(B, H, N, dtype=torch.float32, device=q.device))
    gdt = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[q.dtype]
    lay_n = gl.NVMMASharedLayout.get_default_for([block_n, D], gdt)
    rows = B * H * N
    q_box = block_m // 2 if ws else (block_m // 4 if ws4 else block_m)
    lay_m = gl.NVMMASharedLayout.get_default_for([q_box, D], gdt)
    dq = TensorDescriptor(q.view(rows, D), [rows, D], [D, 1], [q_box, D], lay_m)
    dk = TensorDescriptor(k.view(rows, D), [rows, D], [D, 1], [block_n, D], lay_n)
    dv = TensorDescriptor(v.view(rows, D), [rows, D], [D, 1], [block_n, D], lay_n)
    do = TensorDescriptor(o.view(rows, D), [rows, D], [D, 1], [q_box, D], lay_m)
    grid = (N // block_m, B * H)
    args = (dq, dk, dv, do, lse, D ** -0.5, N)
    kw = dict(HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, NUM_STAGES=num_stages, CAUSAL=causal)
    kernel = _gluon_fwd
    if ws4:
        kernel = _gluon_fwd_ws4
        kw.update(CONSUMER_REGS=consumer_regs, PRODUCER_REGS=producer_regs, PRODUCER_WARPS=producer_warps,
                  EARLY_STOP=early_stop, num_warps=4)
    elif ws and persistent:
        kernel = _gluon_fwd_pws
        total = (N // block_m) * B * H
        grid = (min(num_sms, total),)
        args = args + (N // block_m, total)
        kw.update(CONSUMER_REGS=consumer_regs, PRODUCER_REGS=producer_regs, PRODUCER_WARPS=producer_warps,
                  EARLY_K=early_k, num_warps=4)
    elif ws:
        kernel = _gluon_fwd_ws
        kw.update(CONSUMER_REGS=consumer_regs, PRODUCER_REGS=producer_regs, PRODUCER_WARPS=producer_warps,
                  EARLY_K=early_k, num_warps=4)
    else:
        kw.update(num_warps=num_warps)
    if warmup_only:
        return kernel.warmup(*args, **kw, grid=grid)
    kernel[grid](*args, **kw)
    return o, lse


def _compile_only() -> int:
    """Compile every variant for sm_90 on this machine (a fake driver, as kernels/compile_check does)."""
    from kernels.compile_check import _install_fake_driver, compile_report, print_reports

    _install_fake_driver(90)
    reports = []
    for d, dt in ((128, torch.bfloat16), (64, torch.float16)):
        for causal in (False, True):
            for kind, bn, st in _variants(d, ("plain", "ws", "pws", "ws1", "pws1", "ws4", "ws4e")):
                q = torch.empty(1, 2, 1024, d, dtype=dt)
                cfg = dict(head_dim=d, causal=causal, block_n=bn, stages=st)
                reports.append(compile_report(f"gluon fwd {kind}", cfg, lambda: gluon_forward(
                    q, q, q, causal, bn, st, out=(q, torch.empty(1, 2, 1024)), warmup_only=True, **_kind_kwargs(kind))))
    print("(registers: the kernel's; setmaxnreg moves them per partition)")
    return print_reports(reports)


def _smoke(kinds: tuple[str, ...]) -> int:
    """Each variant once on small shapes against SDPA's math backend in fp32 (GPU)."""
    ok = True
    for d, dt in ((128, torch.bfloat16), (64, torch.float16)):
        for causal in (False, True):
            g = torch.Generator(device="cuda").manual_seed(1)
            q, k, v = (torch.randn(2, 3, 1024, d, device="cuda", dtype=dt, generator=g) for _ in range(3))
            ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            for kind, bn, st in _variants(d, kinds):
                o, _ = gluon_forward(q, k, v, causal, bn, st, **_kind_kwargs(kind))
                torch.cuda.synchronize()
                err = (o.float() - ref).abs().max().item()
                ok &= err < 2e-2
                print(f"{kind} d {d} causal {causal!s:5} BLOCK_N {bn} stages {st}: "
                      f"max |o - fp32 ref| {err:.2e}", flush=True)
    return 0 if ok else 1


def _flops(B: int, H: int, N: int, d: int, causal: bool) -> float:
    pairs = N * (N + 1) / 2 if causal else N * N
    return 4.0 * B * H * d * pairs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile-only", action="store_true", help="compile for sm_90 here, no GPU")
    ap.add_argument("--out", help="JSON receipt path (GPU run)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="run each variant once on small shapes (GPU), report errors")
    ap.add_argument("--kinds", default="plain,ws,pws",
                    help="comma-separated variant kinds: plain (no warp specialisation), ws, pws (persistent ws), "
                         "ws1, pws1 (K released with V: the first measured design), ws4 (four consumer warpgroups, "
                         "HEAD_DIM 64), ws4e (ws4 stopping each warpgroup at its own causal key blocks)")
    args = ap.parse_args()
    if args.rounds < 1:
        print("error: --rounds must be at least 1", file=sys.stderr)
        return 2
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not kinds or set(kinds) - {"plain", "ws", "pws", "ws1", "pws1", "ws4", "ws4e"}:
        print(f"error: --kinds takes plain, ws, pws, ws1, pws1, ws4 and ws4e, comma-separated; got {args.kinds!r}",
              file=sys.stderr)
        return 2
    if args.compile_only:
        return _compile_only()
    if args.smoke:
        return _smoke(kinds)
    if not args.out:
        print("error: --out OUT.json is required for the GPU run (or pass --compile-only)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device; run with --compile-only here or on the H200", file=sys.stderr)
        return 2
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    from iomodel.bench.timing import do_bench_interleaved
    from kernels.flash_attention import flash_attention

    rows = []
    for B, H, N, d, causal, dts in SHAPES:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[dts]
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dt, generator=g) for _ in range(3))
        ref_o, ref_lse = torch.empty_like(q), torch.empty(B, H, N, dtype=torch.float32, device="cuda")
        flash_attention(q, k, v, causal=causal, out=(ref_o, ref_lse))
        fns = {"bundled": lambda: flash_attention(q, k, v, causal=causal)}
        path = flash_attention(q, k, v, causal=causal, return_config=True)[2].path
        if path != "prefill-tma":  # the launcher's default is the Gluon prefill here: the TMA one beside it
            fns["bundled_tma"] = lambda: flash_attention(q, k, v, causal=causal, path="prefill-tma")
        else:  # the TMA prefill is the default here: the launcher's Gluon prefill (its tiles, LPT order) beside it
            fns["bundled_gluon"] = lambda: flash_attention(q, k, v, causal=causal, path="prefill-gluon")
        row = {"B": B, "H": H, "N": N, "d": d, "causal": causal, "dtype": dts, "bundled_path": path, "variants": {}}
        for kind, bn, st in _variants(d, kinds):
            name = f"gluon_{kind}_bn{bn}_s{st}"
            kw = _kind_kwargs(kind)
            try:
                o, lse = gluon_forward(q, k, v, causal, bn, st, **kw)
                torch.cuda.synchronize()
                err = (o.float() - ref_o.float()).abs().max().item()
                lerr = (lse - ref_lse.float()).abs().max().item()
                row["variants"][name] = {"max_abs_diff_o": err, "rel_diff_o": err / ref_o.float().abs().max().item(),
                                         "max_abs_diff_lse": lerr, "finite": bool(torch.isfinite(o).all())}
                fns[name] = (lambda bn=bn, st=st, kw=kw: gluon_forward(q, k, v, causal, bn, st, **kw))
            except Exception as exc:
                row["variants"][name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[-1][:300]}"}

        def sdpa(backend):
            def f():
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return f

        fns["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
        fns["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
        times = do_bench_interleaved(fns, args.rounds, 25, 100)
        fl = _flops(B, H, N, d, causal)
        med = {n: sorted(ts)[len(ts) // 2] for n, ts in times.items()}
        row["seconds"] = times
        row["tflops"] = {n: fl / s / 1e12 for n, s in med.items()}
        row["ratio_vs_cudnn"] = {n: med["sdpa_cudnn"] / s for n, s in med.items()}
        row["ratio_vs_bundled"] = {n: med["bundled"] / s for n, s in med.items()}
        rows.append(row)
        print(json.dumps({k2: row[k2] for k2 in ("B", "H", "N", "d", "causal", "dtype")}),
              " ".join(f"{n}={row['tflops'][n]:.0f}TF/{row['ratio_vs_cudnn'][n]:.3f}" for n in med), flush=True)
        for n, info in row["variants"].items():
            print("   ", n, info, flush=True)
    rec = {"command": "python3 benchmarks/gpu_gluon_fwd_probe.py --out " + args.out
           + f" --kinds {args.kinds} --rounds {args.rounds}",
           "device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
           "torch": torch.__version__, "triton": triton.__version__, "rounds": args.rounds, "rows": rows}
    Path(args.out).write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
