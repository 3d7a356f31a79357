"""The fast L2 model (issue 12, item 4) gives the very bytes of the slow reference.

The reference (tests/l2_reference.py) is the set-associative cache written the slow way (a
plain list as the LRU stack, each distance a sum over it, no read groups, no memo); the shapes are random but seeded and small, on a small L2 (so that the K/V of a wave
overflows it: evictions, partial hits and dirty write-backs all occur), with both the
set-associative and the fully associative replacement, and written bytes weighing 0.5 (one
stack entry per read group) or 0.6 (member by member). Equality is exact: every byte of every
kernel, per tensor.
"""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

import iomodel.cache.set_assoc as fast
import iomodel.cache.simulate as simulate_mod
from iomodel.cache.params import ForwardL2, L2Params
from iomodel.cache.predict import predict_tiled, predict_training_step
from iomodel.spec import LayerSpec, Tiling
import l2_reference as ref


def _shapes(n: int, seed: int) -> list[tuple[LayerSpec, Tiling, L2Params, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kv = rng.choice([1, 2, 4])
        heads = kv * rng.choice([1, 2, 4])
        n_q = rng.choice([96, 256, 640, 1024, 2048, 3000])
        n_k = rng.choice([n_q, n_q, rng.choice([128, 512, 1536])])
        spec = LayerSpec(batch=rng.choice([1, 2, 3]), heads=heads, kv_heads=kv, head_dim=rng.choice([32, 64, 128]),
                         seqlen_q=n_q, seqlen_k=n_k, dtype=rng.choice(["fp16", "fp32", "fp8_e4m3"]),
                         causal=rng.random() < 0.5, causal_align=rng.choice(["top-left", "bottom-right"]))
        tiling = Tiling(block_m=rng.choice([16, 32, 64, 128]), block_n=rng.choice([16, 32, 64]),
                        bwd_block_m=rng.choice([16, 32]), bwd_block_n=rng.choice([32, 64, 128]),
                        dq_block_m=rng.choice([32, 64]), dq_block_n=rng.choice([16, 32]))
        params = L2Params(rng.choice([256 << 10, 1 << 20, 4 << 20]), rng.choice([2, 4, 8]), rng.choice([1, 2]),
                          l2_fraction=rng.choice([0.5, 0.5, 0.5, 0.6]), ways=rng.choice([None, 4, 16, 24, 24]))
        order = rng.choice(["forward", "reverse"])
        if rng.random() < 0.5:  # the forward's own constants (applied where ways and l2_fraction are the defaults)
            params = replace(params, ways=24, l2_fraction=0.5, forward=ForwardL2(rng.choice([8, 48, 96]), rng.choice([0.5, 0.625, 1.0]),
                                                       rng.choice([0.625, 0.75]), rng.choice([0.375, 0.4375]), "test"))
        out.append((spec, tiling, params, order))
    return out


def _bytes(pred) -> list:
    return [(k.name, k.hbm_read, k.hbm_write, k.dirty_at_end, k.requested_read, k.requested_write, k.waves)
            for k in pred.kernels] + [pred.to_dict()]


def _reference(monkeypatch: pytest.MonkeyPatch, run):
    with monkeypatch.context() as m:
        m.setattr(simulate_mod, "SetAssoc", ref.StackOracle)
        return run()


@pytest.mark.parametrize("spec, tiling, params, order", _shapes(30, 12))
def test_fast_equals_reference_on_random_shapes(monkeypatch, spec, tiling, params, order):
    """Forward (predict_tiled) and the training step (predict_training_step): identical bytes."""
    fwd = lambda: predict_tiled(spec, tiling, params, order)  # noqa: E731
    assert _bytes(fwd()) == _bytes(_reference(monkeypatch, fwd))
    step = lambda: predict_training_step(spec.with_(backward=True), tiling, params, tile_order=order)  # noqa: E731
    assert _bytes(step()) == _bytes(_reference(monkeypatch, step))


def test_the_random_shapes_evict():
    """The oracle is not vacuous: most shapes re-fetch K/V (reads above the bytes touched once)."""
    refetching = 0
    for spec, tiling, params, order in _shapes(30, 12):
        p = predict_tiled(spec, tiling, params, order)
        refetching += any(c.key == "l2_capacity" and c.read_bytes > 0 for c in p.causes)
    assert refetching >= 10


def _poisson_tail(lam: float, ways: int) -> float:
    """P(Poisson(λ) >= A), independently: 1 − Σ_{k<A} exp(−λ + k ln λ − ln k!), summed exactly-rounded."""
    return 1.0 - math.fsum(math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1)) for k in range(ways))


def test_evict_probability_is_the_poisson_tail():
    """Over λ across both tails and the middle, A from 1 to 64: within 1e-12 of the tail, and the
    same double again from the memo."""
    rng = random.Random(3)
    for ways in (1, 2, 3, 8, 24, 64):
        for _ in range(400):
            d = rng.uniform(0.0, 20.0) * 1000.0
            p = fast.evict_probability(d, 1000.0, ways)
            assert p == pytest.approx(_poisson_tail(ways * d / 1000.0, ways) if d else 0.0, abs=1e-12)
            assert fast.evict_probability(d, 1000.0, ways) == p  # memo hit


def test_chernoff_shortcut_returns_one_only_where_the_sum_rounds_to_one():
    """Where the shortcut answers 1.0 (A = 24, λ from 40 up), 1 − (the Poisson head) is 1.0 in double
    precision; below its edge the answer is the sum's, under 1.0."""
    ways, seen = 24, 0
    for k in range(2000):
        lam = 40.0 + k * 0.05
        a1 = ways - 1
        head = math.fsum(math.exp(-lam + j * math.log(lam) - math.lgamma(j + 1)) for j in range(ways))
        if -lam + a1 * (1.0 + math.log(lam) - math.log(a1)) < fast._LOG_TINY:
            seen += 1
            assert 1.0 - head == 1.0 and fast.evict_probability(lam, ways, ways) == 1.0
    assert seen > 100
    assert fast.evict_probability(40.0, 24, 24) < 1.0
