"""Two speed forms of the L2 model that must not change a byte (issue 12, item 4).

* ``LRU.read_group``: the fully associative LRU reads a ReadGroup's members in one call; it must
  equal the per-member ``read`` loop it replaces (misses, write-backs, dirty bytes, residency).
* ``wave_cache``: one shape's two predictions in ``reconcile`` (its L2 and the replacement-policy
  band) share the built waves; the band's bytes must equal a prediction built from scratch.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from iomodel.cache.lru import new_lru

# operations: ("g", item ids, sizes) a group read, ("w", id, size) a write, ("r", id, size) a single read
_sizes = st.integers(min_value=1, max_value=5000)
_op = st.one_of(
    st.tuples(st.just("g"), st.integers(0, 6), st.lists(_sizes, min_size=1, max_size=4)),
    st.tuples(st.just("w"), st.integers(100, 110), _sizes),
    st.tuples(st.just("r"), st.integers(200, 210), _sizes),
)


def _run(ops, capacity, share, grouped):
    lru = new_lru(capacity, share)
    misses = []
    for kind, ident, size in ops:
        if kind == "g":
            keys = tuple(("g", ident, i) for i in range(len(size)))
            tensors = tuple(f"t{i}" for i in range(len(size)))
            if grouped:
                misses += lru.read_group(keys, tuple(size), tensors, False)
            else:
                misses += [lru.read(k, t, b, False) for k, t, b in zip(keys, tensors, size)]
        elif kind == "w":
            lru.write(("w", ident), "out", size)
        else:
            misses.append(lru.read(("r", ident), "k", size, True))
    state = [(k, list(v)) for k, v in lru.items.items()]
    return misses, dict(lru.writeback), lru.dirty(), lru.size, state


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_op, max_size=60), capacity=st.integers(1, 30000), share=st.sampled_from([1.0, 0.5, 0.3]))
def test_lru_read_group_equals_the_member_loop(ops, capacity, share):
    assert _run(ops, capacity, share, True) == _run(ops, capacity, share, False)


def test_lru_read_group_hand_count():
    """Capacity 10 bytes (weights 1000): a group of 6 + 6 bytes evicts the first member's oldest
    2 bytes when the second arrives. Read again, the first member misses those 2 bytes and its
    refill evicts the second member's oldest 2 (now the least recent), which then miss too; the
    second's refill takes 2 bytes of the first again (the group thrashes)."""
    lru = new_lru(10, 1.0)
    assert lru.read_group(("a", "b"), (6, 6), ("Q", "dO"), False) == [6, 6]
    assert lru.items["a"][0] == 4 and lru.size == 10 * 1000
    assert lru.read_group(("a", "b"), (6, 6), ("Q", "dO"), False) == [2, 2]
    assert lru.items["a"][0] == 4 and lru.items["b"][0] == 6


def test_the_band_on_cached_waves_equals_a_fresh_prediction():
    """A training step of the window hold-out outside tolerance: its band note (fully associative
    LRU, on the waves its 24-way prediction built) names the bytes of a prediction from scratch."""
    from iomodel.format import human_bytes
    from iomodel.measure.records import Measurement
    from iomodel.reconcile.compare import collected_quantities, hardware_of, reconcile, reconcile_shape

    from receipt_cache import RECEIPTS

    m = Measurement.load(RECEIPTS / "ncu-h200-window1-2026-12-01.json")
    m.shapes = [s for s in m.shapes if s.id == "b2-h32-kv8-d128-bf16-q4096-k4096-tl-w255_inf-tiled-bwd"]
    row = reconcile(m).rows[0]
    band = [n for n in row.notes if n.startswith("replacement-policy band")]
    assert len(band) == 1
    fresh = reconcile_shape(m.shapes[0], hardware_of(m), l2_ways=None, l2_fraction=0.5, flush_between_kernels=True,
                            l2_source="auto", collected=collected_quantities(m)).level("HBM")
    assert (f"a fully associative LRU (one capacity, every byte read weighing 1) predicts "
            f"{human_bytes(fresh.predicted_read, decimals=1)} read, "
            f"{human_bytes(fresh.predicted_write, decimals=1)} written") in band[0]
