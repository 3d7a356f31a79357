"""The head-grouped grid order (``head-grouped:G``) and the kernel's causal LPT launch rule.

The kernel (``kernels.flash_attention._head_grouped``) and the L2 model
(``iomodel.schedule.launch.program_runs``) must start the same programs in the same order; the rule
(``lpt_launch_order``) is the one home of the launch the kernel picks for its own tiles, and the
worksheet models it. Hand-computed values throughout.
"""

from __future__ import annotations

import pytest
import torch

triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled
from iomodel.errors import IomodelError
from iomodel.measure.records import _check_launch_fields
from iomodel.schedule.grid import prefill_waves
from iomodel.schedule.launch import (LPT_GROUP_BYTES, LPT_MAX_PROGRAMS, Schedule, grid_order_refusal, head_group_of,
                                     lpt_head_group, lpt_launch_order, program_runs)
from iomodel.spec import LayerSpec, Tiling
from kernels.flash_attention import INTERPRET, _head_grouped


def test_program_runs_head_grouped_by_hand():
    # T_r = 3 tiles, 5 rows, groups of 2: rows 0-1 index 0, 0, 1, 1, 2, 2; rows 2-3 likewise; row 4 alone in order
    assert program_runs(0, 15, 3, 5, 3, 2) == [
        (0, 0, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2), (0, 2, 3), (1, 2, 3),
        (2, 0, 1), (3, 0, 1), (2, 1, 2), (3, 1, 2), (2, 2, 3), (3, 2, 3), (4, 0, 3)]
    assert program_runs(5, 8, 3, 5, 3, 2) == [(1, 2, 3), (2, 0, 1), (3, 0, 1)]
    assert program_runs(13, 15, 3, 5, 3, 2) == [(4, 1, 3)]
    # one row per group is tiles-fastest; a group of every row is heads-fastest
    assert program_runs(0, 15, 3, 5, 3, 1) == program_runs(0, 15, 3, 5, 3)
    assert program_runs(0, 15, 3, 5, 3, 5) == program_runs(0, 15, 3, 5, 1) == program_runs(0, 15, 3, 5, 3, 64)


@triton.jit
def _order(OUT, HEAD_GROUP):
    t, row = _head_grouped(tl.num_programs(0), tl.num_programs(1), HEAD_GROUP)
    p = tl.program_id(0) + tl.num_programs(0) * tl.program_id(1)
    tl.store(OUT + 2 * p, t)
    tl.store(OUT + 2 * p + 1, row)


@pytest.mark.skipif(not INTERPRET, reason="interpreter test (TRITON_INTERPRET=1)")
def test_kernel_order_is_the_models():
    """The kernel's own index arithmetic, run in Triton's interpreter: program (pid0, pid1) of a
    grid (T, R) writes the (index, row) it runs at its linear position p = pid0 + T·pid1."""
    for T, R, G in ((3, 5, 2), (4, 7, 3), (2, 9, 16), (5, 6, 1), (1, 4, 2)):
        out = torch.full((T * R, 2), -1, dtype=torch.int32)
        _order[(T, R)](out, G)
        want = [(i, bh) for bh, i0, i1 in program_runs(0, T * R, T, R, T, G) for i in range(i0, i1)]
        assert [tuple(r) for r in out.tolist()] == want, (T, R, G)


def test_lpt_head_group_by_hand():
    mib = 2**20
    assert LPT_GROUP_BYTES == 8 * mib and LPT_MAX_PROGRAMS == 16384
    assert lpt_head_group(32, 4 * mib) == 2  # 2 x 16 heads of 8192 keys, d 128, bf16: 2*8192*128*2 B each
    assert lpt_head_group(32, mib) == 8  # Llama-3-8B at 8k: 1 MiB per query head (4 share a KV head)
    assert lpt_head_group(16, 8 * mib) == lpt_head_group(16, 9 * mib) == 1
    assert lpt_head_group(3, 1) == 2  # a power of two, at most the rows
    assert lpt_head_group(71, 29_537) == 64
    with pytest.raises(IomodelError, match="rows must be a positive whole number"):
        lpt_head_group(0, 1)


def test_lpt_launch_order_by_hand():
    reverse = {"grid_order": "head-grouped:8", "tile_order": "reverse"}
    assert lpt_launch_order(True, True, 32, 2**20, 32 * 64) == reverse
    assert lpt_launch_order(False, True, 32, 2**20, 32 * 64) == {}  # every tile the same work
    assert lpt_launch_order(True, False, 32, 2**20, 32 * 64) == {}  # a window band or a ragged batch
    assert lpt_launch_order(True, True, 32, 2**20, LPT_MAX_PROGRAMS + 1) == {}  # a large grid balances itself
    assert lpt_launch_order(True, True, 32, 2**20, LPT_MAX_PROGRAMS) == reverse
    assert lpt_launch_order(True, True, 16, 8 * 2**20, 2048) == {}  # G = 1: the tiles' own order


def test_grid_order_names():
    assert head_group_of("head-grouped:12") == 12
    assert head_group_of("head-grouped:0") == head_group_of("head-grouped:x") == head_group_of("grouped:4") == 0
    assert grid_order_refusal("head-grouped:4") is None
    assert "head-grouped:G" in grid_order_refusal("head-grouped:0")
    _check_launch_fields({"grid_order": "head-grouped:4"}, "rec")
    with pytest.raises(IomodelError, match="config.grid_order"):
        _check_launch_fields({"grid_order": "head-grouped:0"}, "rec")


def _l2(spec, tiling, capacity, sms, **sched):
    params = L2Params(capacity, sms, 1, l2_fraction=1.0, ways=None)  # fully associative, exact bytes
    return predict_tiled(spec, tiling, params, schedule=Schedule.for_tiling(tiling, **sched))


def test_head_grouped_waves_and_l2_bytes():
    """B = 1, H = H_kv = 4, N = 256, d = 16, fp16, BLOCK_M = 64 (T_r = 4), W = 2, L2 28,672 B
    (tests/test_schedule_launch.py's layer with four heads). A wave needs the K/V of the heads its
    two programs run: 16,384 B per head. tiles-fastest: one head per wave, K/V read once per head
    (4 · 16,384) + Q 32,768 = 98,304 B. head-grouped:2: both rows of a group in every wave,
    32,768 B > L2, and every wave re-reads both heads' K/V (the heads-fastest case of that test,
    per group): 2 groups · 4 waves · 32,768 + Q 32,768 = 294,912 B. head-grouped:4 is heads-fastest."""
    spec, tiling = LayerSpec(1, 4, 4, 16, 256, 256, "fp16", causal=False), Tiling(block_m=64, block_n=32)
    tiles = _l2(spec, tiling, 28672, 2)
    hg2 = _l2(spec, tiling, 28672, 2, grid_order="head-grouped:2")
    assert tiles.hbm_read_bytes == 98304
    assert hg2.hbm_read_bytes == 294912
    assert _l2(spec, tiling, 28672, 2, grid_order="head-grouped:1").hbm_read_bytes == 98304
    assert (_l2(spec, tiling, 28672, 2, grid_order="head-grouped:4").hbm_read_bytes
            == _l2(spec, tiling, 28672, 2, grid_order="heads-fastest").hbm_read_bytes)
    # the order never changes what is requested (SRAM_fill)
    assert prefill_waves(spec, tiling, 2, grid_order="head-grouped:3")[1:] == prefill_waves(spec, tiling, 2)[1:]


def test_worksheet_models_the_kernels_rule():
    from iomodel.report.worksheet import bundled_launch_order

    t = Tiling(block_m=128, block_n=64)
    llama_8k = LayerSpec(1, 32, 8, 128, 8192, 8192, "bf16", causal=True)
    assert bundled_launch_order(llama_8k, t) == {"grid_order": "head-grouped:8", "tile_order": "reverse"}
    assert bundled_launch_order(llama_8k.with_(causal=False), t) == {}
    assert bundled_launch_order(llama_8k.with_(seqlen_q=131072, seqlen_k=131072), t) == {}  # 32,768 programs
