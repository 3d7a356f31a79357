"""The forward's waves start at each head in the reverse causal order (iomodel.schedule.grid.row_waves, 2026-12-07):
where the rule holds, the waves as listed by hand, the bytes of a small layer counted by hand, the fast evaluation equal
to the simulation, and the committed receipts that moved (docs/l2-calibration.md, "The heads' seams in the model")."""

from __future__ import annotations

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.simulate import simulate
from iomodel.cache.stream import fast_kernel_l2
from iomodel.schedule.grid import prefill_waves, row_waves, wave_runs
from iomodel.spec import LayerSpec, Tiling

KiB = 1024


def _spec(**kw):
    base = dict(batch=1, heads=2, kv_heads=2, head_dim=16, seqlen_q=3072, seqlen_k=3072, dtype="fp16", causal=True)
    base.update(kw)
    return LayerSpec(**base)


@pytest.mark.parametrize("kw, t_r, w, order, grid, persistent, holds", [
    ({}, 3, 2, "reverse", "tiles-fastest", None, True),
    ({}, 3, 3, "reverse", "tiles-fastest", None, True),  # T_r = W: one wave a head
    ({}, 3, 4, "reverse", "tiles-fastest", None, False),  # T_r < W: rows share their waves
    ({}, 3, 2, "forward", "tiles-fastest", None, False),  # the forward order drifts (labelled)
    ({}, 3, 2, "reverse", "heads-fastest", None, False),
    ({}, 3, 2, "reverse", "tiles-fastest", "strided", False),  # a static loop: no dispatch as programs free
    ({"causal": False}, 3, 2, "reverse", "tiles-fastest", None, False),  # tiles of equal length stay in step
    ({"seqlen_q": 2048, "seqlen_k": 3072, "causal_align": "bottom-right"}, 2, 2, "reverse", "tiles-fastest", None,
     False),  # a chunk under a longer cache: offset 1,024
    ({"seqlen_q": 2048, "seqlen_k": 3072, "causal_align": "top-left"}, 2, 2, "reverse", "tiles-fastest", None, True),
    ({"window_left": 512}, 3, 2, "reverse", "tiles-fastest", None, False),  # a band: tiles of equal length
])
def test_where_the_rule_holds(kw, t_r, w, order, grid, persistent, holds):
    assert row_waves(_spec(**kw), t_r, w, order, grid, persistent) is holds


def test_the_waves_by_hand():
    """Two heads of three tiles, W = 2: in step the second wave straddles the heads (tile 2 of head 0, tile 0 of head
    1); by row each head's waves start at its tile 0, the last holding T_r mod W = 1 program."""
    assert wave_runs(6, 2, 3, 2, 3) == [[(0, 0, 2)], [(0, 2, 3), (1, 0, 1)], [(1, 1, 3)]]
    assert wave_runs(6, 2, 3, 2, 3, by_row=True) == [[(0, 0, 2)], [(0, 2, 3)], [(1, 0, 2)], [(1, 2, 3)]]


def test_the_k_bytes_of_a_small_layer_by_hand(monkeypatch):
    """B 1, H 2, N 3,072, HEAD_DIM 16 fp16, causal, tiles of 1,024 rows (one K/V chunk each), W = 2, reverse order:
    tile lengths 3, 2, 1 chunks. An LRU of 64 KiB (one chunk of K and V, 32 KiB each) misses every chunk read again
    after another. By row: waves (h0 t0 t1) read h0 chunks 0-2, (h0 t2) h0 chunk 0, (h1 t0 t1) h1 chunks 0-2, (h1 t2)
    h1 chunk 0: 8 chunk reads of K, 8 x 32 KiB. Held in step over the grid (the model before 2026-12-07): (h0 t0 t1)
    3, (h0 t2, h1 t0) 1 + 3, (h1 t1 t2) 2: 9 x 32 KiB."""
    from iomodel.schedule import grid

    spec, tiling = _spec(), Tiling(block_m=1024, block_n=1024)
    waves, req_r, _ = prefill_waves(spec, tiling, 2, "reverse", grouped=True)
    assert len(waves) == 4
    k = simulate("fwd kernel", waves, 64 * KiB, 0.5)
    assert k.hbm_read["K"] == k.hbm_read["V"] == 8 * 32 * KiB
    assert req_r["K"] == 2 * (3 + 2 + 1) * 1024 * 16 * 2  # the SRAM fill: every tile's key rows, either way
    monkeypatch.setattr(grid, "row_waves", lambda *a, **k: False)
    waves, req_in_step, _ = prefill_waves(spec, tiling, 2, "reverse", grouped=True)
    assert len(waves) == 3 and req_in_step == req_r
    k = simulate("fwd kernel", waves, 64 * KiB, 0.5)
    assert k.hbm_read["K"] == k.hbm_read["V"] == 9 * 32 * KiB


@pytest.mark.parametrize("heads, kv_heads, n, w", [(3, 1, 7 * 512, 3), (4, 2, 9 * 512, 4), (2, 2, 5 * 512, 5)])
def test_the_fast_evaluation_equals_the_simulation(heads, kv_heads, n, w):
    """Where the rule holds the fast engine (iomodel/cache/stream.py) runs the same waves: the same expected bytes."""
    spec = LayerSpec(1, heads, kv_heads, 64, n, n, dtype="bf16", causal=True)
    tiling = Tiling(block_m=512, block_n=256)
    assert row_waves(spec, n // 512, w, "reverse")
    params = L2Params(256 * KiB, w, 1, ways=24)
    waves, r, wr = prefill_waves(spec, tiling, w, "reverse", grouped=True)
    slow = simulate("fwd kernel", waves, params.capacity, params.write_share, params.ways, params.read_capacity)
    fast = fast_kernel_l2("fwd kernel", spec, tiling, w, params.capacity, params.write_share, params.ways,
                          tile_order="reverse", read_capacity=params.read_capacity)
    assert fast is not None and fast.waves == slow.waves == len(waves)
    for t in ("Q", "K", "V"):
        assert fast.hbm_read[t] == slow.hbm_read[t]
    assert fast.hbm_write == slow.hbm_write


@pytest.mark.parametrize("kernel, tiling_kw", [
    ("_bwd_dq", {"dq_block_m": 512, "dq_block_n": 256, "dq_tile_order": "reverse"}),  # the dQ kernel's own order
    ("fwd kernel", {"block_m": 1024, "block_n": 256, "heads_per_program": 2}),  # a program per GQA pair of heads
])
def test_the_fast_evaluation_equals_the_simulation_for_dq_and_packed_heads(kernel, tiling_kw):
    """The rule on the dQ kernel's reverse order and on the packed view (H / P rows of tiles of BLOCK_M / P rows of P
    heads): the same waves and bytes in both engines (a reviewer: the random shapes never gave _bwd_dq a reverse
    order)."""
    from iomodel.schedule.grid import dq_waves, packed_view
    from iomodel.spec import cdiv

    spec = LayerSpec(1, 4, 2, 64, 9 * 512, 9 * 512, dtype="bf16", causal=True, backward=kernel == "_bwd_dq")
    tiling = Tiling(**tiling_kw)
    w = 4
    if kernel == "_bwd_dq":
        assert row_waves(spec, cdiv(spec.seqlen_q, tiling.dq_block_m), w, "reverse")
        waves, _, _ = dq_waves(spec, tiling, w, grouped=True)
    else:
        view, view_m, p = packed_view(spec, tiling)
        assert p == 2 and row_waves(view, cdiv(view.seqlen_q, view_m), w, "reverse")
        waves, _, _ = prefill_waves(spec, tiling, w, "reverse", grouped=True)
    params = L2Params(256 * KiB, w, 1, ways=24)
    slow = simulate(kernel, waves, params.capacity, params.write_share, params.ways, params.read_capacity)
    fast = fast_kernel_l2(kernel, spec, tiling, w, params.capacity, params.write_share, params.ways,
                          tile_order="reverse", read_capacity=params.read_capacity)
    assert fast is not None and fast.waves == slow.waves == len(waves)
    assert fast.hbm_read == slow.hbm_read and fast.hbm_write == slow.hbm_write


def test_a_strided_persistent_loop_keeps_the_grid_s_waves_in_both_engines():
    """A static persistent loop (program j runs tiles j, j + W, ...) does not dispatch as programs free: its waves stay
    W consecutive programs of the grid, in the fast evaluation (which ``persistent`` now reaches) as in the
    simulation, and they read more than the row waves of the same launch without the loop."""
    spec = LayerSpec(1, 3, 1, 64, 7 * 512, 7 * 512, dtype="bf16", causal=True)
    tiling, w = Tiling(block_m=512, block_n=256), 3
    params = L2Params(256 * KiB, w, 1, ways=24)
    got = {}
    for persistent in ("strided", None):
        waves, _, _ = prefill_waves(spec, tiling, w, "reverse", grouped=True, persistent=persistent)
        slow = simulate("fwd kernel", waves, params.capacity, params.write_share, params.ways, params.read_capacity)
        fast = fast_kernel_l2("fwd kernel", spec, tiling, w, params.capacity, params.write_share, params.ways,
                              tile_order="reverse", read_capacity=params.read_capacity, persistent=persistent)
        assert fast.hbm_read == slow.hbm_read and fast.waves == slow.waves == len(waves)
        got[persistent] = (len(waves), fast.hbm_read["K"])
    assert got["strided"][0] == 7 and got[None][0] == 9  # 21 programs: 7 waves of 3; by row 3 heads x 3 waves
    assert got["strided"][1] > got[None][1]


def test_waves_by_row_refuse_a_grid_that_is_not_tiles_fastest():
    from iomodel.errors import IomodelError

    with pytest.raises(IomodelError, match="waves by grid row need a tiles-fastest grid"):
        wave_runs(6, 2, 3, 2, 1, by_row=True)  # heads-fastest: one tile a group


def test_the_estimate_says_so():
    """The worksheet's estimate names the rule among its assumptions where it holds, and not for the forward order."""
    from iomodel.cache.predict import predict_tiled
    from iomodel.spec.hardware import get_hardware

    hw = get_hardware("H100-SXM")
    params = L2Params.of(hw, 1)
    spec = LayerSpec(1, 16, 16, 128, 65536, 65536, dtype="bf16", causal=True)
    tiling = Tiling(block_m=128, block_n=128)
    rev = predict_tiled(spec, tiling, params, tile_order="reverse")
    fwd = predict_tiled(spec, tiling, params, tile_order="forward")
    says = "Each head's waves start at its first query tile (512 tiles a head, W = 132 a wave)"
    assert any(a.startswith(says) for a in rev.assumptions)
    assert not any(a.startswith("Each head's waves") for a in fwd.assumptions)
