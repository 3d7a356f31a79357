"""The exact tile sums: definition (Python loop), closed forms (Python ints, numpy) and a kernel walk agree."""

from __future__ import annotations

import itertools

import numpy as np
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from iomodel.traffic.compile import numpy_function, python_function
from iomodel.traffic.sums import KBlockQueryRows, QTileKeyRows, VisiblePairs, floor_sum
from tile_sum_reference import loop_function

N_q, N_k, BM, BN, off = sp.symbols("N_q N_k BM BN off", integer=True)
EXPRS = [QTileKeyRows(N_q, N_k, BM, BN, off), KBlockQueryRows(N_q, N_k, BM, BN, off), VisiblePairs(N_q, N_k, off)]
PY = python_function([N_q, N_k, BM, BN, off], EXPRS)  # closed forms on Python ints (predict)
LOOP = loop_function([N_q, N_k, BM, BN, off], EXPRS)  # the definitions' loops
NP = numpy_function([N_q, N_k, BM, BN, off], EXPRS)


def walk(nq, nk, bm, bn, o):
    """Walk the loops the way the kernels do, one block at a time."""
    keys = 0  # Q-stationary: per query tile, blocks from key 0 while block start < hi
    for i in range(-(-nq // bm)):
        hi = min(max(min((i + 1) * bm, nq) + o, 0), nk)
        start = 0
        while start < hi:
            keys += min(start + bn, nk) - start
            start += bn
    rows = 0  # K/V-stationary: per key block, the query blocks with a row that sees a key of it
    for j in range(-(-nk // bn)):
        for i in range(-(-nq // bm)):
            last_row = min((i + 1) * bm, nq) - 1
            if last_row + o >= j * bn:
                rows += min((i + 1) * bm, nq) - i * bm
    pairs = sum(1 for m in range(nq) for n in range(nk) if n <= m + o)
    return keys, rows, pairs


def test_sums_small_grid_exhaustive():
    pts = []
    for nq, nk in itertools.product([1, 2, 5, 16, 17, 33, 64], [1, 3, 16, 31, 48, 70]):
        for bm, bn in itertools.product([1, 4, 16, 32], [2, 16, 64]):
            for o in {0, nk - nq, -nq, nk, 7, -5}:
                pts.append((nq, nk, bm, bn, o))
    got = NP(*[np.array(c) for c in zip(*pts)])
    for idx, p in enumerate(pts):
        want = walk(*p)
        assert tuple(PY(*p)) == tuple(LOOP(*p)) == want, p
        assert tuple(int(g[idx]) for g in got) == want, p


@settings(max_examples=150, deadline=None)
@given(
    nq=st.integers(1, 400), nk=st.integers(1, 400),
    bm=st.sampled_from([1, 16, 32, 64, 128, 3, 100]), bn=st.sampled_from([16, 32, 64, 5]),
    o=st.integers(-450, 450),
)
def test_closed_form_equals_definition(nq, nk, bm, bn, o):
    assert [int(v) for v in NP(nq, nk, bm, bn, o)] == list(PY(nq, nk, bm, bn, o)) == list(LOOP(nq, nk, bm, bn, o))


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 300), m=st.integers(1, 200), a=st.integers(0, 500), b=st.integers(0, 500))
def test_floor_sum(n, m, a, b):
    assert int(floor_sum(n, m, a, b)) == sum((a * i + b) // m for i in range(n))


def test_sum_prints_as_sum_and_latex():
    e = QTileKeyRows(N_q, N_k, BM, BN, off)
    assert sp.sstr(e).startswith("Sum(Min(N_k, BN*ceiling(")
    assert "\\sum_{i=0}" in sp.latex(e)
    assert isinstance(e.doit(), sp.Expr)
