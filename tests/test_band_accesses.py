"""The numpy form of the banded / descending K/V chunk touches equals its loop form, access for access.

:func:`iomodel.schedule.grid._band_kv_accesses` (vectorised) against the item-by-item definition
(tests/band_access_reference.py) on random waves: program runs over several batches and GQA
groups, key ranges that start anywhere and may be empty, chunk sizes that do and do not divide
them, both key orders. Equality is exact: the same keys, byte counts (Python ints) and order.
"""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from band_access_reference import band_kv_accesses_loop
from iomodel.schedule.grid import Access, _band_kv_accesses


@st.composite
def waves(draw):
    batch, kv_heads, group = draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 4))
    heads = kv_heads * group
    spec = SimpleNamespace(head_dim=draw(st.sampled_from([16, 64, 128])), width=draw(st.sampled_from([2, 4])),
                           heads=heads, kv_heads=kv_heads, group=group)
    n_k = draw(st.integers(1, 700))
    t_r = draw(st.integers(1, 12))
    ranges = []
    for _ in range(t_r):
        lo = draw(st.integers(0, n_k))
        ranges.append((lo, draw(st.integers(0, n_k))))  # end < lo: an empty tile, as (hi, hi) and worse
    qo, order = [], []
    for _ in range(draw(st.integers(1, 6))):
        bh = draw(st.integers(0, batch * heads - 1))
        i0 = draw(st.integers(0, t_r - 1))
        qo.append((bh, i0, draw(st.integers(i0 + 1, t_r))))
        b, h = divmod(bh, heads)
        kv = b * kv_heads + h // group
        if kv not in order:
            order.append(kv)
    return qo, ranges, spec, draw(st.sampled_from([16, 32, 64, 100, 128, 256])), order, draw(st.booleans())


@settings(max_examples=300, deadline=None)
@given(waves())
def test_numpy_form_equals_the_loop(case):
    qo, ranges, spec, chunk, order, descending = case
    got = _band_kv_accesses(qo, ranges, spec, chunk, order, descending)
    want = band_kv_accesses_loop(qo, ranges, spec, chunk, order, descending)
    assert got == want
    assert all(type(a.nbytes) is int and all(type(x) is int for x in a.key[1:]) for a in got)


def test_a_hand_counted_wave():
    """Two programs of one KV head (GQA group 2), d 64, bf16 (128 B per key row): keys [0, 96) and
    [32, 160) in chunks of 64. By hand, program 1 touches chunk 0 at step 0 (rows 0-64) and chunk 64 at
    step 64 (rows 64-96); program 2 chunk 0 at step 0 (rows 32-64), chunk 64 at step 32 (64-128),
    chunk 128 at step 96 (128-160). Ascending, each chunk once at its first step with the union of
    its rows: 0 (64 rows), 64 (64 rows, step 32), 128 (32 rows)."""
    spec = SimpleNamespace(head_dim=64, width=2, heads=2, kv_heads=1, group=2)
    got = _band_kv_accesses([(0, 0, 1), (1, 1, 2)], [(0, 96), (32, 160)], spec, 64, [0])
    row = 64 * 2
    assert got == [Access("K", ("K", 0, 0), 64 * row, whole=True), Access("V", ("V", 0, 0), 64 * row, whole=True),
                   Access("K", ("K", 0, 64), 64 * row, whole=True), Access("V", ("V", 0, 64), 64 * row, whole=True),
                   Access("K", ("K", 0, 128), 32 * row, whole=True), Access("V", ("V", 0, 128), 32 * row, whole=True)]
    # descending: each program from its last block down; program 1 reaches chunk 64 at step 0, chunk 0 at
    # step 32; program 2 chunk 128 at step 0, chunk 64 at step 32, chunk 0 at step 96: (step, chunk) order
    got = _band_kv_accesses([(0, 0, 1), (1, 1, 2)], [(0, 96), (32, 160)], spec, 64, [0], descending=True)
    assert got == [Access(t, (t, 0, c0), rows * row, whole=True)
                   for c0, rows in ((64, 32), (128, 32), (0, 64), (64, 64), (0, 32)) for t in ("K", "V")]
