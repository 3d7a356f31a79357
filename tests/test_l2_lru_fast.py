"""The fully associative LRU of a windowed ``_bwd_dkdv``, evaluated fast (iomodel/cache/stream.py with
``ways=None``), gives the simulation's integer bytes (issue 12 item 4: the replacement-policy band).

The reconciliation re-predicts every shape outside tolerance with the fully associative LRU
(:class:`iomodel.cache.lru.LRU`); for a training step under a window band its ``_bwd_dkdv`` kernel was
simulated access by access (most of the windowed receipts' time). :func:`stream.fast_kernel_l2` now
evaluates it as a stack distance against one capacity (:func:`stream._lru_exact` says when that is the
LRU's very rule). On random shapes (small L2s so that query rows overflow it and dK/dV are evicted in
part, both causal alignments, non-causal bands, GQA, waves of several KV heads) the bytes read, written
back and still dirty per tensor, the waves and the requested bytes equal those
:func:`iomodel.cache.simulate.simulate` counts on the kernel's waves.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import iomodel.cache.predict as predict_mod
from iomodel.cache import stream
from iomodel.cache.lru import READ_WEIGHT, write_weight
from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_training_step
from iomodel.cache.simulate import simulate
from iomodel.schedule import grid
from iomodel.schedule.grid import dkdv_waves
from iomodel.spec import LayerSpec, Tiling


def _windowed_shapes(n: int, seed: int) -> list[tuple[LayerSpec, Tiling, int, int, float]]:
    """(spec, tiling, W, capacity, write share): random windowed dK/dV kernels the fast LRU covers (shapes
    whose dK/dV tile or query-row chunk outweighs the capacity are drawn again)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        kv = rng.choice([1, 2, 4])
        n_q = rng.choice([96, 640, 1024, 2048, 3000])
        causal = rng.random() < 0.6
        spec = LayerSpec(batch=rng.choice([1, 2, 3]), heads=kv * rng.choice([1, 2, 4]), kv_heads=kv,
                         head_dim=rng.choice([32, 64, 128]), seqlen_q=n_q,
                         seqlen_k=rng.choice([n_q, n_q, rng.choice([128, 1536, 5000])]),
                         dtype=rng.choice(["fp16", "fp32", "fp8_e4m3"]), causal=causal,
                         causal_align=rng.choice(["top-left", "bottom-right"]), window_left=rng.randint(0, 1500),
                         window_right=None if causal else rng.choice([0, 300]), backward=True)
        tiling = Tiling(bwd_block_m=rng.choice([16, 32, 64]), bwd_block_n=rng.choice([32, 64, 128]))
        w = rng.choice([2, 4, 8]) * rng.choice([1, 2])
        capacity = int(rng.choice([64 << 10, 256 << 10, 1 << 20, 4 << 20]) * rng.choice([0.25, 0.5, 1.0]))
        share = rng.choice([0.5, 0.5, 0.25, 1.0])
        if stream.fast_model("_bwd_dkdv", spec, tiling, w, share).largest_kept <= capacity:
            out.append((spec, tiling, w, capacity, share))
    return out


def _record(k):
    return k.hbm_read, k.hbm_write, k.dirty_at_end, k.waves


def _assert_fast_is_the_simulation(spec, tiling, w, capacity, share):
    fast = stream.fast_kernel_l2("_bwd_dkdv", spec, tiling, w, capacity, share, None)
    assert fast is not None, (spec, tiling, w, capacity, share)  # the fast path applies to every shape here
    waves, req_r, req_w = dkdv_waves(spec, tiling, w, grouped=True)
    slow = simulate("_bwd_dkdv", waves, capacity, share, None)
    assert _record(fast) == _record(slow), (spec, tiling, w, capacity, share)
    assert (fast.requested_read, fast.requested_write) == (req_r, req_w)
    assert all(isinstance(v, int) for d in _record(fast)[:3] for v in d.values())


@pytest.mark.parametrize("spec, tiling, w, capacity, share", _windowed_shapes(30, 12))
def test_fast_lru_equals_the_simulated_lru_on_random_windowed_shapes(spec, tiling, w, capacity, share):
    """Every tensor: bytes read, written back and still dirty are the LRU simulation's integers."""
    _assert_fast_is_the_simulation(spec, tiling, w, capacity, share)


def test_the_random_windowed_shapes_take_every_path(monkeypatch):
    """Not vacuous: re-reads that hit and that miss (the weight above plus their own within C and past
    it), entries superseded between a re-read and its old entry, entries dropped as deep, dirty items
    written back whole (deep) and kept in part at the end."""
    seen = {"hit": 0, "miss": 0, "moved": 0, "trim": 0, "deep_dirty": 0, "part_kept": 0, "whole_kept": 0}
    probabilities, moved_up, totals = stream._Engine._probabilities, stream._moved_up, stream._Engine.lru_totals

    def spy_p(engine, dist):
        p = probabilities(engine, dist)
        if engine.ways is None:
            seen["hit"] += int((p == 0.0).sum())
            seen["miss"] += int((p == 1.0).sum())
        return p

    def spy_moved(idx, w_old):
        out = moved_up(idx, w_old)
        seen["moved"] += int((out > 0).sum())
        return out

    def spy_totals(engine):
        seen["trim"] += int(engine.t0 > 0)
        seen["deep_dirty"] += engine.deep_count
        tid, nbytes, time = engine._dirty_arrays()
        above = engine._suffix()[time - engine.t0]
        room = (engine.capacity - above) / (nbytes * engine.share)  # capacity left, in items' own weights
        seen["part_kept"] += int(((room > 0.01) & (room < 0.99)).sum())
        seen["whole_kept"] += int((room >= 1).sum())
        return totals(engine)

    monkeypatch.setattr(stream._Engine, "_probabilities", spy_p)
    monkeypatch.setattr(stream, "_moved_up", spy_moved)
    monkeypatch.setattr(stream._Engine, "lru_totals", spy_totals)
    for spec, tiling, w, capacity, share in _windowed_shapes(30, 12):
        assert stream.fast_kernel_l2("_bwd_dkdv", spec, tiling, w, capacity, share, None) is not None
    assert all(v > 0 for v in seen.values()), seen


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
@pytest.mark.parametrize("causal", [True, False])
def test_the_training_step_band_is_evaluated_fast_with_the_simulations_bytes(monkeypatch, align, causal):
    """predict_training_step with the fully associative LRU on a windowed GQA layer: the dK/dV kernel is
    evaluated fast (its waves are never built) and the prediction is the one the simulation gives."""
    spec = LayerSpec(2, 8, 2, 64, 3000, 3000, dtype="bf16", causal=causal, causal_align=align, window_left=700,
                     window_right=None if causal else 200, backward=True)
    params = L2Params(1 << 20, 8, 2, ways=None)
    built = []
    real = grid.dkdv_waves
    monkeypatch.setattr(predict_mod, "dkdv_waves", lambda *a, **k: built.append(1) or real(*a, **k))
    monkeypatch.setattr(predict_mod, "FAST_MIN_WORK", 0)
    fast = predict_training_step(spec, Tiling(bwd_block_m=32, bwd_block_n=64), params)
    assert not built
    with monkeypatch.context() as m:
        m.setattr(predict_mod, "_fast_pays", lambda *a: False)
        slow = predict_training_step(spec, Tiling(bwd_block_m=32, bwd_block_n=64), params)
    assert built
    assert fast.to_dict() == slow.to_dict()
    assert [(k.name, *_record(k)) for k in fast.kernels] == [(k.name, *_record(k)) for k in slow.kernels]
    dkdv = next(k for k in fast.kernels if k.name == "_bwd_dkdv")
    assert 0 < dkdv.hbm_read["Q"] < dkdv.requested_read["Q"]  # some query rows re-read from L2, some not


def test_where_the_lru_is_not_evaluated_fast_the_simulation_runs():
    """No band (extents differ between touches of a chunk), a dirty item heavier than the capacity (the
    LRU keeps it alone, over C), a write weight that is not READ_WEIGHT × write share: no fast LRU."""
    band = LayerSpec(1, 4, 2, 128, 1024, 1024, dtype="fp32", causal=True, window_left=300, backward=True)
    t = Tiling(bwd_block_m=64, bwd_block_n=64)
    assert stream.fast_kernel_l2("_bwd_dkdv", band, t, 8, 256 << 10, 0.5, None) is not None
    assert stream.fast_kernel_l2("_bwd_dkdv", band.with_(window_left=None), t, 8, 256 << 10, 0.5, None) is None
    assert stream.fast_kernel_l2("fwd kernel", band.with_(backward=False), t, 8, 256 << 10, 0.5, None) is None
    assert stream.fast_kernel_l2("_bwd_dkdv", band, t, 8, 12 << 10, 0.5, None) is None  # dV of a tile: 16 KiB of weight
    assert write_weight(0.0625) != READ_WEIGHT * 0.0625
    assert stream.fast_kernel_l2("_bwd_dkdv", band, t, 8, 256 << 10, 0.0625, None) is None


def test_the_guards_are_needed(monkeypatch):
    """Forced past its guards the fast LRU is wrong or refuses: with a dirty item heavier than C it keeps
    fewer dirty bytes than the LRU (which holds that item alone), and without a band an item comes back
    at another extent (_ExtentsVary: fast_kernel_l2 gives None)."""
    band = LayerSpec(1, 4, 2, 128, 1024, 1024, dtype="fp32", causal=True, window_left=300, backward=True)
    t = Tiling(bwd_block_m=64, bwd_block_n=64)
    monkeypatch.setattr(stream, "_lru_exact", lambda *a: True)
    forced = stream.fast_kernel_l2("_bwd_dkdv", band, t, 8, 8 << 10, 0.5, None)
    slow = simulate("_bwd_dkdv", dkdv_waves(band, t, 8, grouped=True)[0], 8 << 10, 0.5, None)
    assert forced.dirty_at_end == {"dV": 16384} and slow.dirty_at_end == {"dV": 32768}
    causal = LayerSpec(1, 4, 2, 64, 2048, 2048, dtype="fp16", causal=True, backward=True)
    model = stream.fast_model("_bwd_dkdv", causal, Tiling(bwd_block_m=16, bwd_block_n=32), 8, 0.5)
    with pytest.raises(stream._ExtentsVary):
        stream._drive(model, model.engine(64 << 10, None))
    assert stream.fast_kernel_l2("_bwd_dkdv", causal, Tiling(bwd_block_m=16, bwd_block_n=32), 8, 64 << 10, 0.5,
                                 None) is None


def test_a_dirty_item_keeps_what_the_capacity_leaves_it():
    """lru_totals' rule on one item, by hand: C = 10,000 bytes, a dK item of 4,000 bytes (write share 0.5:
    2,000 of weight) under 9,000 read bytes keeps ⌊(10,000 − 9,000) / 0.5⌋ = 2,000 bytes; under 7,000, all
    of it; under 10,000, none. The LRU agrees."""
    from iomodel.cache.lru import new_lru

    for above, kept in ((9000, 2000), (7000, 4000), (10000, 0)):
        engine = stream._Engine(10000, 0.5, None, 1, 1, 1, (1,), ("R",), ("dK",), prefix_extents=False)
        engine._dirty = [(np.array([0]), np.array([4000]), np.array([0]))]
        engine.w = np.array([2000.0, float(above)])
        engine.item = np.array([-1, -1])
        engine.now = 2
        _, writeback, still = engine.lru_totals()
        assert (still.get("dK", 0), writeback.get("dK", 0)) == (kept, 4000 - kept)
        lru = new_lru(10000, 0.5)
        lru.write("d", "dK", 4000)
        lru.read("r", "R", above, False)
        assert lru.dirty().get("dK", 0) == kept and lru.writeback.get("dK", 0) == 4000 - kept


def test_a_re_read_whose_weight_above_and_own_is_exactly_the_capacity_hits(monkeypatch):
    """The LRU evicts only once the weight passes C: a shape where some re-read's weight above plus its own is
    exactly C (64 KiB; fp8 rows of 32 bytes, 64-row chunks) hits there, in the fast path as in the simulation."""
    spec = LayerSpec(2, 4, 2, 32, 640, 640, dtype="fp8_e4m3", causal=True, causal_align="bottom-right",
                     window_left=17, backward=True)
    tiling, capacity = Tiling(bwd_block_m=64, bwd_block_n=64), 64 << 10
    ties = []
    probabilities = stream._Engine._probabilities

    def spy(engine, dist):
        ties.append(int((dist == engine.capacity).sum()))
        return probabilities(engine, dist)

    monkeypatch.setattr(stream._Engine, "_probabilities", spy)
    _assert_fast_is_the_simulation(spec, tiling, 16, capacity, 0.25)
    assert sum(ties) > 0
