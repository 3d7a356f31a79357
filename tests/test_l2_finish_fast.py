"""The vectorised end-of-kernel write-back (issue 12, item 4) gives the bytes of the item-by-item rule.

:meth:`iomodel.cache.set_assoc.SetAssoc.finish` evaluates every dirty item's evicted fraction at
once (:func:`~iomodel.cache.set_assoc.finish_probabilities`, numpy); the slow path is
:func:`~iomodel.cache.set_assoc.finish_item` per item (math module). The fractions agree to
~1e-14 and the rounded bytes exactly, on forward (causal or not, GQA, a window band, reverse
tile order) and training-step shapes on a small L2 where the dirty lines straddle its capacity.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import iomodel.cache.set_assoc as sa
from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled, predict_training_step
from iomodel.spec import LayerSpec, Tiling


def _slow_finish(self: sa.SetAssoc) -> dict[str, float]:
    """The item-by-item write-back (the rule before vectorisation)."""
    out: dict[str, float] = {}
    for nbytes, weight, t, dirty, tensor in self.items.values():
        if dirty > 0.0 and nbytes:
            sa.finish_item(self.writeback, out, tensor, nbytes, dirty, self._after(t), nbytes * weight,
                           self.capacity, self.ways)
    return out


@pytest.mark.parametrize("ways", [1, 2, 4, 24, 64])
def test_finish_probabilities_match_the_item_rule(ways):
    rng = random.Random(ways)
    cap = 1e6
    above = [rng.choice([0.0, rng.uniform(0.0, 20 * cap), rng.uniform(0.0, 2 * cap)]) for _ in range(4000)]
    own = [rng.choice([0.0, 512.0, rng.uniform(1.0, 3e5)]) for _ in range(4000)]
    got = sa.finish_probabilities(np.array(above), np.array(own), cap, ways)
    for a, o, p in zip(above, own, got.tolist()):
        wb: dict[str, float] = {}
        sa.finish_item(wb, {}, "O", 1, 1.0, a, o, cap, ways)
        assert p == pytest.approx(wb["O"], abs=1e-13)


def test_finish_probabilities_shortcuts_are_exact():
    """Far below the top every line is gone (1.0 exactly); an empty item at the top keeps it (0.0)."""
    got = sa.finish_probabilities(np.array([1e12, 0.0]), np.array([4096.0, 0.0]), 1e6, 24)
    assert got.tolist() == [1.0, 0.0]


_SHAPES = [
    LayerSpec(1, 4, 4, 64, 2048, 2048, dtype="fp16", causal=False),
    LayerSpec(1, 4, 4, 64, 2048, 2048, dtype="fp16", causal=True),
    LayerSpec(2, 8, 2, 128, 1024, 1024, dtype="bf16", causal=True),  # GQA, G = 4
    LayerSpec(1, 4, 2, 64, 3000, 3000, dtype="fp16", causal=True, window_left=256),
]


@pytest.mark.parametrize("spec", _SHAPES, ids=["mha", "causal", "gqa", "window"])
@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_fast_finish_equals_slow_finish(monkeypatch, spec, order):
    """Every byte of every kernel, forward and training step, with the fast and the slow finish."""
    tiling = Tiling(block_m=64, block_n=32, bwd_block_m=32, bwd_block_n=64, dq_block_m=64, dq_block_n=32)
    params = L2Params(1 << 20, 4, 2)

    def run():
        f = predict_tiled(spec, tiling, params, order)
        t = predict_training_step(spec.with_(backward=True), tiling, params, tile_order=order)
        return [(k.name, k.hbm_read, k.hbm_write, k.dirty_at_end) for k in f.kernels + t.kernels]

    with monkeypatch.context() as m:
        m.setattr(sa, "_VECTOR_MIN_ITEMS", 0)  # every kernel's finish through numpy
        fast = run()
    with monkeypatch.context() as m:
        m.setattr(sa.SetAssoc, "finish", _slow_finish)
        slow = run()
    assert fast == slow
    # not vacuous: some written bytes are written back during the kernel and some stay dirty
    assert any(w for _, _, w, _ in fast) and any(d for _, _, _, d in fast)
