"""Prefill forward for Hopper (sm_90) written in Gluon: FlashAttention-3's schedule (path ``prefill-gluon``).

Triton's compiler does not form FlashAttention-3's structure from the bundled ``tl.dot`` kernels
(``benchmarks/gpu_ws_probe.py``), so this kernel writes it out in Triton 3.6's Gluon dialect
(``triton.experimental.gluon``), following Shah et al. 2024, "FlashAttention-3" (arXiv:2407.08608):

* **Warp specialisation** (section 3.1): one producer warp issues every TMA load (Q once, then K
  and V block by block into a ring of NUM_STAGES shared-memory slots, one mbarrier per slot and
  direction); BLOCK_M / 64 consumer warpgroups of 64 query rows each run the MMAs and the softmax:
  two at HEAD_DIM 128 (BLOCK_M 128; ``setmaxnreg`` gives the worker consumer 240 registers and the
  producer 24), four at HEAD_DIM 64 (BLOCK_M 256; 112 a worker consumer). One program per SM either way:
  the split is compiled to take the SM's register file (``heuristics.GLUON_TILES``).
* **Ping-pong** (section 3.1): a consumer issues one step's MMAs only on its turn and hands the turn
  to the next warpgroup once they are issued (two: back and forth; four: round a ring), so one
  warpgroup's softmax runs under the others' MMAs.
* **Intra-warpgroup overlap** (section 3.2, Algorithm 2): the scores of block j+1 (``S = Q K^T``)
  and the output update of block j (``O += P V``, P in registers) are asynchronous warpgroup MMAs in
  flight during the softmax of block j+1.
* **Early K release**: a K slot is handed back once the score MMA that reads it is complete, a V
  slot after the output MMA (one release for both cost 10-15 %: receipts
  ``gluon-fwd-probe-h200-2026-12-04-b.json`` against ``-c.json``).

It moves exactly the bytes of the traffic contract's tiled forward (``docs/traffic-contract.md``),
as ``_attn_fwd_tma`` does with the same tiles: per query tile the Q tile once, the K and V blocks
``[0, hi)`` (hi = N_k, or the causal bound clamp(min((i+1)·BLOCK_M, N_q) + off, 0, N_k)), O and the
LSE once; TMA zero-fills rows past each head's end and drops stores there. The grid and its
orders are the bundled kernel's (``kernels.flash_attention._query_tile``: tiles fastest, the
reverse tile order, the head-grouped LPT launch), so the model's launch is the same.

Gluon has no interpreter: this kernel runs on an sm_90 GPU only (the CPU tests compile it for
sm_90, ``tests/test_gluon_path.py``; exactness and speed are measured on the H200:
``benchmarks/gpu_gluon_fwd_probe.py``, ``tests/test_gpu_gluon.py``).
"""

from __future__ import annotations

from typing import Any

try:  # Triton 3.6 ships the dialect; an older or trimmed build lacks it (the path is then refused)
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor

    GLUON_IMPORT_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - depends on the installed Triton
    GLUON_IMPORT_ERROR = f"{type(exc).__name__}: {exc}"

#: Query rows per consumer warpgroup (a warpgroup MMA's M is 64): the rows of the Q and O descriptor
#: boxes the launcher builds, which the kernel reads back as ``desc_q.block_type.shape[2]``.
CONSUMER_ROWS = 64
#: Registers per thread of the worker consumer warpgroup and of the producer warp (``setmaxnreg``;
#: the default partition takes what is left), with two consumer warpgroups (BLOCK_M 128). Measured
#: without spills at HEAD_DIM 64 and 128. The backward's Gluon dK/dV kernel uses the same split.
CONSUMER_REGS, PRODUCER_REGS = 240, 24
#: Worker-consumer registers by consumer warpgroups per program (BLOCK_M / CONSUMER_ROWS): four
#: (BLOCK_M 256, HEAD_DIM 64) leave 112 a worker and 120 the default partition, no spill at BLOCK_N 64
#: (at 120 a worker the default partition is cut to 96 and spills 256 B; ``python -m kernels.compile_check``).
CONSUMER_REGS_BY_CONSUMERS = {2: CONSUMER_REGS, 4: 112}
#: Warps of the producer partition (Triton pads it to a warpgroup: 4 per consumer warpgroup + 4 =
#: 12 or 20 warps per program, ``heuristics.GLUON_TILES[d].num_warps``, what ``KernelConfig.num_warps``
#: records for this path).
PRODUCER_WARPS = 1


def consumer_warpgroups(block_m: int) -> int:
    """Consumer warpgroups of a program of BLOCK_M query rows: BLOCK_M / CONSUMER_ROWS (2 or 4).

    Raises:
        ValueError: BLOCK_M is not 128 or 256 (the launcher passes only ``heuristics.GLUON_TILES``).
    """
    n = block_m // CONSUMER_ROWS
    if n not in CONSUMER_REGS_BY_CONSUMERS or n * CONSUMER_ROWS != block_m:
        raise ValueError(f"the Gluon prefill runs BLOCK_M 128 or 256, got {block_m}")
    return n


def consumer_regs(block_m: int) -> int:
    """``setmaxnreg`` registers of a worker consumer warpgroup at BLOCK_M (:data:`CONSUMER_REGS_BY_CONSUMERS`)."""
    return CONSUMER_REGS_BY_CONSUMERS[consumer_warpgroups(block_m)]


def descriptor_boxes(head_dim: int, block_n: int) -> tuple[tuple[int, ...], ...]:
    """The TMA boxes (elements per axis) of q, k, v and o, in that order: ``(1, 1, CONSUMER_ROWS, d)``
    for Q and O (one consumer warpgroup's rows), ``(1, 1, BLOCK_N, d)`` for K and V."""
    q_box, kv_box = (1, 1, CONSUMER_ROWS, head_dim), (1, 1, block_n, head_dim)
    return q_box, kv_box, kv_box, q_box


def gluon_descriptor(t: Any, box: tuple[int, ...]) -> Any:
    """A Gluon host tensor descriptor of ``t`` with box ``box`` and the NVMMA shared layout Triton picks for it.

    Args:
        t: a CUDA (or, to compile only, CPU) fp16/bf16 tensor, here q or o ``(B, H, N_q, d)`` or k or v
            ``(B, H_kv, N_k, d)``, 16-byte aligned base and strides, unit last stride (TMA's rules;
            :func:`iomodel.schedule.capabilities.gluon_refusal` has refused anything else before).
        box: elements per axis of one TMA copy: ``(1, 1, 64, d)`` for Q and O (one consumer
            warpgroup's rows), ``(1, 1, BLOCK_N, d)`` for K and V.

    Returns:
        ``triton.experimental.gluon.nvidia.hopper.TensorDescriptor`` over ``t``'s real extents and
        strides (TMA zero-fills reads and drops writes outside them).

    Raises:
        IomodelError: ``t`` is neither fp16 nor bf16; AssertionError (Triton's): misaligned ``t``.
    """
    dtype = {"torch.float16": gl.float16, "torch.bfloat16": gl.bfloat16}.get(str(t.dtype))
    if dtype is None:
        from iomodel.errors import IomodelError

        raise IomodelError(f"the Gluon prefill takes fp16 or bf16 tensors, got {t.dtype}: use path='prefill' for it")
    layout = gl.NVMMASharedLayout.get_default_for(list(box), dtype)
    return GluonTensorDescriptor(t, list(t.shape), list(t.stride()), list(box), layout)


if GLUON_IMPORT_ERROR is None:

    @gluon.jit
    def _tile_of_program(T_R, ROWS, REVERSE: gl.constexpr, HEAD_GROUP):
        """Query tile i and grid row bh of this program of grid (T_R, ROWS): tiles fastest, or
        started in head groups of HEAD_GROUP rows (``kernels.flash_attention._head_grouped``);
        i counts down when REVERSE."""
        i = gl.program_id(0)
        bh = gl.program_id(1)
        if HEAD_GROUP > 0:
            p = i + T_R * bh
            span = HEAD_GROUP * T_R
            g = p // span
            r = p - g * span
            n_g = gl.minimum(HEAD_GROUP, ROWS - g * HEAD_GROUP)
            i = r // n_g
            bh = g * HEAD_GROUP + (r - i * n_g)
        if REVERSE:
            i = T_R - 1 - i
        return i, bh

    @gluon.jit
    def _issue_load(desc, smem, bars, b, h, row, slot):
        """TMA copy of one (1, 1, rows, d) box at (b, h, row, 0) into ring slot ``slot``."""
        bar = bars.index(slot)
        mbarrier.expect(bar, desc.block_type.nbytes)
        tma.async_copy_global_to_shared(desc, [b, h, row, 0], bar, smem.index(slot))

    @gluon.jit
    def _softmax_step(qk, m_i, l_i, j, key_limit, offs_m, offs_n, qk_scale, N_K, CAUSAL_OFF,
                      dtype: gl.constexpr, p_layout: gl.constexpr, row_o: gl.constexpr,
                      BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, MASK_TAIL: gl.constexpr):
        """Online softmax of key block j (FlashAttention-2 Algorithm 1, lines 8-10; m in log2 units of
        the scaled scores): P as the A operand of the output MMA, O's rescale factor, new m and l.

        When CAUSAL or MASK_TAIL (N_K not a multiple of BLOCK_N), a block reaching ``key_limit`` (the
        first key not every row sees) is masked to keys < N_K and, when CAUSAL, keys <= row +
        CAUSAL_OFF; a row with every score so far masked keeps m = -inf, l = 0 and contributes
        nothing (no NaN). Otherwise no block is masked and the check is compiled out."""
        if (CAUSAL or MASK_TAIL) and (j + 1) * BLOCK_N > key_limit:
            keys = j * BLOCK_N + offs_n
            visible = keys[None, :] < N_K
            if CAUSAL:
                visible = visible & (keys[None, :] <= offs_m[:, None] + CAUSAL_OFF)
            qk = gl.where(visible, qk, float("-inf"))
            m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
            m_sub = gl.where(m_new == float("-inf"), 0.0, m_new)
            p = gl.exp2(qk * qk_scale - m_sub[:, None])
            alpha = gl.exp2(m_i - m_sub)
        else:
            m_new = gl.maximum(m_i, gl.max(qk, 1) * qk_scale)
            p = gl.exp2(qk * qk_scale - m_new[:, None])
            alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, 1)
        return gl.convert_layout(p.to(dtype), p_layout), gl.convert_layout(alpha, row_o), m_new, l_i

    @gluon.jit
    def _producer(desc_q, desc_k, desc_v, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                  b, h, hk, i, n_blocks, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
        """The producer warp: the Q parts of every consumer (BLOCK_M / 64 of them), then K and V blocks
        0 .. n_blocks-1 into the ring, each slot refilled once every consumer has released it (K after
        its score MMA, V after its output MMA; under the causal mask a consumer releases the blocks its rows do
        not see as soon as they land, without a product)."""
        ROWS: gl.constexpr = desc_q.block_type.shape[2]
        PARTS: gl.constexpr = BLOCK_M // ROWS
        mbarrier.expect(q_bar, PARTS * desc_q.block_type.nbytes)
        for c in gl.static_range(PARTS):
            tma.async_copy_global_to_shared(desc_q, [b, h, i * BLOCK_M + c * ROWS, 0], q_bar, q_smem.index(c))
        for j in range(n_blocks):
            slot = j % NUM_STAGES
            refill = j >= NUM_STAGES
            mbarrier.wait(k_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=refill)
            _issue_load(desc_k, k_smem, k_bars, b, hk, j * BLOCK_N, slot)
            mbarrier.wait(v_empty.index(slot), ((j // NUM_STAGES) - 1) & 1, pred=refill)
            _issue_load(desc_v, v_smem, v_bars, b, hk, j * BLOCK_N, slot)

    @gluon.jit
    def _consumer(desc_o, LSE, q_tile, o_tile, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty, v_empty,
                  my_turn, other_turn, qk_scale, bh, b, h, row0, n_blocks, N_Q, N_K, CAUSAL_OFF,
                  HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                  MASK_TAIL: gl.constexpr, FIRST: gl.constexpr):
        """One consumer warpgroup: query rows row0 .. row0+63 against the K/V blocks they see (0 .. n_blocks-1, or
        under the causal mask 0 .. n_mine-1, the tile's later blocks drained without a product), then its O rows
        (TMA store, clipped at N_Q) and LSE (natural log; -inf and o = 0 where a row saw no key)."""
        dtype: gl.constexpr = desc_o.dtype
        ROWS: gl.constexpr = desc_o.block_type.shape[2]
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        offs_m = row0 + gl.arange(0, ROWS, layout=row_s)
        offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_s)
        l_i = gl.full([ROWS], 0.0, gl.float32, layout=row_s)
        acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
        if CAUSAL:  # the first key some row of this warpgroup does not see
            key_limit = gl.minimum(row0 + CAUSAL_OFF + 1, N_K)
        else:
            key_limit = N_K
        q_op = q_tile.reshape([ROWS, HEAD_DIM])
        # n_mine: the key blocks this warpgroup's rows see; under the causal mask the tile's later rows can see
        # more (the first of four warpgroups at BLOCK_M 256, BLOCK_N 64: three blocks; at 128 x 128 one block where a
        # bottom-right offset mod 128 is 1-64), which this warpgroup drains without a product: it takes their
        # turns and releases their slots (the tile's loads are unchanged)
        if CAUSAL:
            n_mine = gl.minimum(gl.cdiv(gl.minimum(gl.maximum(row0 + ROWS + CAUSAL_OFF, 0), N_K), BLOCK_N), n_blocks)
        else:
            n_mine = n_blocks
        mbarrier.wait(q_bar, 0)
        if n_blocks > 0:
            if not FIRST:
                mbarrier.arrive(other_turn, count=1)  # the first warpgroup goes first
            if n_mine > 0:
                tk = 0
                mbarrier.wait(my_turn, tk & 1)
                tk += 1
                mbarrier.wait(k_bars.index(0), 0)
                s_tok = warpgroup_mma(q_op, k_smem.index(0).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)), s_zero,
                                      use_acc=False, is_async=True)
                mbarrier.arrive(other_turn, count=1)
                qk = warpgroup_mma_wait(0, deps=(s_tok, ))
                mbarrier.arrive(k_empty.index(0), count=1)
                p_op, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, 0, key_limit, offs_m, offs_n, qk_scale, N_K,
                                                      CAUSAL_OFF, dtype, p_layout, row_o, BLOCK_N, CAUSAL, MASK_TAIL)
                for j in range(n_mine - 1):
                    slot = j % NUM_STAGES
                    nxt = (j + 1) % NUM_STAGES
                    mbarrier.wait(my_turn, tk & 1)
                    tk += 1
                    mbarrier.wait(k_bars.index(nxt), ((j + 1) // NUM_STAGES) & 1)
                    s_tok = warpgroup_mma(q_op, k_smem.index(nxt).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0)),
                                          s_zero, use_acc=False, is_async=True)
                    mbarrier.wait(v_bars.index(slot), (j // NUM_STAGES) & 1)
                    acc_tok = warpgroup_mma(p_op, v_smem.index(slot).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
                    mbarrier.arrive(other_turn, count=1)
                    qk = warpgroup_mma_wait(1, deps=(s_tok, ))
                    mbarrier.arrive(k_empty.index(nxt), count=1)
                    p_op, alpha_next, m_i, l_i = _softmax_step(qk, m_i, l_i, j + 1, key_limit, offs_m, offs_n,
                                                               qk_scale, N_K, CAUSAL_OFF, dtype, p_layout, row_o,
                                                               BLOCK_N, CAUSAL, MASK_TAIL)
                    acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
                    acc = acc * alpha_next[:, None]
                    mbarrier.arrive(v_empty.index(slot), count=1)
                last = (n_mine - 1) % NUM_STAGES
                mbarrier.wait(my_turn, tk & 1)
                mbarrier.wait(v_bars.index(last), ((n_mine - 1) // NUM_STAGES) & 1)
                acc_tok = warpgroup_mma(p_op, v_smem.index(last).reshape([BLOCK_N, HEAD_DIM]), acc, is_async=True)
                mbarrier.arrive(other_turn, count=1)
                acc = warpgroup_mma_wait(0, deps=(acc_tok, ))
                if CAUSAL:  # the slot may be refilled for a block drained below
                    mbarrier.arrive(v_empty.index(last), count=1)
            else:  # rows that see no key (bottom-right alignment): take the turn the first block's scores took
                mbarrier.wait(my_turn, 0)
                mbarrier.arrive(other_turn, count=1)
            if CAUSAL:  # every warpgroup takes n_blocks + 1 turns and releases every slot of the tile once
                turn = n_mine + 1
                for j in range(n_mine, n_blocks):
                    slot = j % NUM_STAGES
                    mbarrier.wait(my_turn, turn & 1)
                    turn += 1
                    mbarrier.arrive(other_turn, count=1)
                    mbarrier.wait(k_bars.index(slot), (j // NUM_STAGES) & 1)
                    mbarrier.arrive(k_empty.index(slot), count=1)
                    mbarrier.wait(v_bars.index(slot), (j // NUM_STAGES) & 1)
                    mbarrier.arrive(v_empty.index(slot), count=1)
        empty = l_i == 0.0
        l_safe = gl.where(empty, 1.0, l_i)
        o = acc / gl.convert_layout(l_safe, row_o)[:, None]
        lse = gl.where(empty, float("-inf"), (m_i + gl.log2(l_safe)) * 0.6931471805599453)
        gl.store(LSE + bh.to(gl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)
        o_tile.reshape([ROWS, HEAD_DIM]).store(o.to(dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(desc_o, [b, h, row0, 0], o_tile)
        tma.store_wait(0)

    @gluon.jit
    def _attn_fwd_gluon(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, H, G, N_Q, N_K, CAUSAL_OFF, HEAD_GROUP,
                        HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                        NUM_STAGES: gl.constexpr, CAUSAL: gl.constexpr, REVERSE: gl.constexpr, MASK_TAIL: gl.constexpr,
                        CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr, PRODUCER_WARPS: gl.constexpr):
        """Prefill forward of one query tile of BLOCK_M = 128 or 256 rows (grid (T_r, B·H)): BLOCK_M / 64
        consumer warpgroups (2: ping-pong; 4: the turn passed round the ring 0 -> 1 -> 2 -> 3 -> 0) and one
        producer warp; MASK_TAIL: N_K is not a multiple of BLOCK_N (the last key block is masked).

        Descriptors are rank 4 over (B, H, N_q, d) and (B, H_kv, N_k, d) with boxes
        (1, 1, 64, d) for Q and O and (1, 1, BLOCK_N, d) for K and V; LSE (B, H, N_q) fp32.
        """
        dtype: gl.constexpr = desc_q.dtype
        ROWS: gl.constexpr = desc_q.block_type.shape[2]  # one consumer warpgroup's query rows (64)
        PARTS: gl.constexpr = BLOCK_M // ROWS  # consumer warpgroups: 2 or 4
        gl.static_assert(PARTS == 2 or PARTS == 4, "the Gluon prefill runs BLOCK_M 128 or 256")
        i, bh = _tile_of_program(gl.num_programs(0), gl.num_programs(1), REVERSE, HEAD_GROUP)
        b = bh // H
        h = bh % H
        hk = h // G
        if CAUSAL:
            row_end = gl.minimum((i + 1) * BLOCK_M, N_Q)
            hi = gl.minimum(gl.maximum(row_end + CAUSAL_OFF, 0), N_K)
        else:
            hi = N_K
        n_blocks = gl.cdiv(hi, BLOCK_N)

        q_smem = gl.allocate_shared_memory(dtype, [PARTS, 1, 1, ROWS, HEAD_DIM], desc_q.layout)
        k_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, 1, 1, BLOCK_N, HEAD_DIM], desc_k.layout)
        v_smem = gl.allocate_shared_memory(dtype, [NUM_STAGES, 1, 1, BLOCK_N, HEAD_DIM], desc_v.layout)
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        k_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        v_bars = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        k_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        v_empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
        turns = gl.allocate_shared_memory(gl.int64, [PARTS, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        for s in gl.static_range(NUM_STAGES):
            mbarrier.init(k_bars.index(s), count=1)
            mbarrier.init(v_bars.index(s), count=1)
            mbarrier.init(k_empty.index(s), count=PARTS)
            mbarrier.init(v_empty.index(s), count=PARTS)
        for c in gl.static_range(PARTS):
            mbarrier.init(turns.index(c), count=1)
        fence_async_shared()

        qk_scale = sm_scale * 1.4426950408889634
        row0 = i * BLOCK_M
        # consumer c waits on turns[c] and hands the turn to turns[(c + 1) % PARTS]; the last one (FIRST
        # False) opens the first turn for consumer 0
        if PARTS == 2:
            gl.warp_specialize([
                (_consumer, (desc_o, LSE, q_smem.index(0), q_smem.index(0), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(0), turns.index(1), qk_scale, bh, b, h, row0, n_blocks,
                             N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, True)),
                (_consumer, (desc_o, LSE, q_smem.index(1), q_smem.index(1), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(1), turns.index(0), qk_scale, bh, b, h, row0 + ROWS,
                             n_blocks, N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, False)),
                (_producer, (desc_q, desc_k, desc_v, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty,
                             v_empty, b, h, hk, i, n_blocks, BLOCK_M, BLOCK_N, NUM_STAGES)),
            ], [4, PRODUCER_WARPS], [CONSUMER_REGS, PRODUCER_REGS])
        else:
            gl.warp_specialize([
                (_consumer, (desc_o, LSE, q_smem.index(0), q_smem.index(0), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(0), turns.index(1), qk_scale, bh, b, h, row0, n_blocks,
                             N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, True)),
                (_consumer, (desc_o, LSE, q_smem.index(1), q_smem.index(1), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(1), turns.index(2), qk_scale, bh, b, h, row0 + ROWS,
                             n_blocks, N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, True)),
                (_consumer, (desc_o, LSE, q_smem.index(2), q_smem.index(2), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(2), turns.index(3), qk_scale, bh, b, h, row0 + 2 * ROWS,
                             n_blocks, N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, True)),
                (_consumer, (desc_o, LSE, q_smem.index(3), q_smem.index(3), k_smem, v_smem, q_bar, k_bars, v_bars,
                             k_empty, v_empty, turns.index(3), turns.index(0), qk_scale, bh, b, h, row0 + 3 * ROWS,
                             n_blocks, N_Q, N_K, CAUSAL_OFF, HEAD_DIM, BLOCK_N, NUM_STAGES, CAUSAL, MASK_TAIL, False)),
                (_producer, (desc_q, desc_k, desc_v, q_smem, k_smem, v_smem, q_bar, k_bars, v_bars, k_empty,
                             v_empty, b, h, hk, i, n_blocks, BLOCK_M, BLOCK_N, NUM_STAGES)),
            ], [4, 4, 4, PRODUCER_WARPS], [CONSUMER_REGS, CONSUMER_REGS, CONSUMER_REGS, PRODUCER_REGS])
