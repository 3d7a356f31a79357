"""The exact tile sums in closed form: equal to their definitions' loops, exact past int64, fast at 2^24 tokens.

``predict`` once evaluated every causal or windowed tile sum as a Python loop over tiles and
rows (about 10 s for ``iomodel worksheet --seqlen 16777216``); it now calls the closed forms on
Python ints (``iomodel.traffic.sums.py_*``). These tests hold the closed forms (Python ints and
numpy int64) equal to the loops of ``tests/tile_sum_reference.py`` on random shapes, both causal
alignments, ragged tails and window bands; ``predict`` equal to the loop-evaluated model on whole
layers; and the Python-int path exact where a byte count exceeds 2^63 (``sweep`` refuses it).
"""

from __future__ import annotations

import time
from unittest import mock

import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tile_sum_reference import loop_function, loop_sums

from iomodel import LayerSpec, Tiling, get_hardware
from iomodel.errors import IomodelError
from iomodel.traffic import compile as compile_mod
from iomodel.traffic import model as model_mod
from iomodel.traffic import predict, sums, sweep

H200 = get_hardware("H200")

#: The sums of one (batch, head): name -> (numpy closed form, Python-int closed form, class, takes blocks, band).
SUMS = {
    "q_tile_key_rows": (sums.np_q_tile_key_rows, sums.py_q_tile_key_rows, sums.QTileKeyRows, True, False),
    "k_block_query_rows": (sums.np_k_block_query_rows, sums.py_k_block_query_rows, sums.KBlockQueryRows, True, False),
    "k_tile_query_rows": (sums.np_k_tile_query_rows, sums.py_k_tile_query_rows, sums.KTileQueryRows, True, False),
    "visible_pairs": (sums.np_visible_pairs, sums.py_visible_pairs, sums.VisiblePairs, False, False),
    "q_tile_key_rows_band": (sums.np_q_tile_key_rows_band, sums.py_q_tile_key_rows_band, sums.QTileKeyRowsBand,
                             True, True),
    "k_tile_query_rows_band": (sums.np_k_tile_query_rows_band, sums.py_k_tile_query_rows_band,
                               sums.KTileQueryRowsBand, True, True),
    "visible_pairs_band": (sums.np_visible_pairs_band, sums.py_visible_pairs_band, sums.VisiblePairsBand, False, True),
}


def _args(name, nq, nk, bm, bn, off, wl, wr):
    _, _, _, blocks, band = SUMS[name]
    args = (nq, nk, bm, bn, off) if blocks else (nq, nk, off)
    return args + (wl, wr) if band else args


@st.composite
def shapes(draw):
    """A (batch, head)'s lengths and tiles: ragged tails (any lengths, blocks not dividing them,
    blocks not powers of two), both causal alignments or any offset, and window bands."""
    nq, nk = draw(st.integers(0, 700)), draw(st.integers(0, 700))
    bm = draw(st.sampled_from([1, 3, 16, 32, 64, 100, 128]) | st.integers(1, 300))
    bn = draw(st.sampled_from([1, 5, 16, 32, 64, 128]) | st.integers(1, 300))
    off = draw(st.sampled_from([0, nk - nq]) | st.integers(-800, 800))  # top-left, bottom-right, any
    wide = nq + nk
    wl = draw(st.sampled_from([0, 1, wide]) | st.integers(0, 800))
    wr = draw(st.sampled_from([0, 2, wide]) | st.integers(0, 800))
    return nq, nk, bm, bn, off, wl, wr


@settings(max_examples=400, deadline=None)
@given(shapes())
def test_closed_forms_equal_the_loops(shape):
    want = loop_sums(*shape)
    for name, (np_fn, py_fn, _, _, _) in SUMS.items():
        args = _args(name, *shape)
        got = py_fn(*args)
        assert type(got) is int and got == want[name], (name, args)
        assert int(np_fn(*args)) == want[name], (name, args)


@settings(max_examples=60, deadline=None)
@given(shapes())
def test_hand_loops_are_the_printed_definitions(shape):
    """The hand-written loops of tile_sum_reference equal the classes' own ``Sum`` definitions."""
    want = loop_sums(*shape)
    sym = sp.symbols("N_q N_k BM BN off WL WR", integer=True)
    for name, (_, _, cls, _, _) in SUMS.items():
        args_sym = _args(name, *sym)
        (got,) = _loop_fn(name, args_sym, cls)(*_args(name, *shape))
        assert got == want[name], (name, shape)


_LOOP_FNS: dict[str, object] = {}


def _loop_fn(name, args_sym, cls):
    if name not in _LOOP_FNS:
        _LOOP_FNS[name] = loop_function(args_sym, [cls(*args_sym)])
    return _LOOP_FNS[name]


def test_closed_forms_vectorized_equal_pointwise():
    """The numpy closed forms on arrays equal the Python-int ones point by point (one broadcast call)."""
    rng = np.random.default_rng(3)
    n = 2000
    nq, nk = rng.integers(1, 5000, n), rng.integers(1, 5000, n)
    bm, bn = rng.choice([16, 32, 64, 128], n), rng.choice([16, 32, 64, 128], n)
    off = np.where(rng.random(n) < 0.5, 0, nk - nq)
    wl, wr = rng.integers(0, 3000, n), rng.integers(0, 3000, n)
    for name, (np_fn, py_fn, _, _, _) in SUMS.items():
        got = np_fn(*_args(name, nq, nk, bm, bn, off, wl, wr))
        want = [py_fn(*_args(name, *(int(c[i]) for c in (nq, nk, bm, bn, off, wl, wr)))) for i in range(n)]
        assert got.tolist() == want, name


def test_python_closed_forms_are_exact_past_int64():
    """At 2^40 rows the sums exceed 2^63; the Python-int closed forms stay exact (checked against
    the arithmetic series by hand), where int64 would wrap."""
    n, b = 2**40, 128
    t = n // b
    assert sums.py_visible_pairs(n, n, 0) == n * (n + 1) // 2 > 2**63  # top-left: 1 + 2 + ... + n
    assert sums.py_q_tile_key_rows(n, n, b, b, 0) == b * t * (t + 1) // 2  # tile i loads (i + 1)·b keys
    assert sums.py_k_tile_query_rows(n, n, b, b, 0) == b * t * (t + 1) // 2  # key tile j loads n − j·b rows
    assert sums.py_visible_pairs(n, n + 7, 7) == n * (n + 1) // 2 + 7 * n  # bottom-right, 7 more keys


def test_python_closed_forms_refuse_bad_input():
    with pytest.raises(ValueError, match="block sizes >= 1"):
        sums.py_q_tile_key_rows(100, 100, 0, 64, 0)
    with pytest.raises(TypeError, match="tile sums take integers"):
        sums.py_visible_pairs(100.0, 100, 0)
    with pytest.raises(ValueError, match="m >= 1"):
        sums.py_floor_sum(3, 0, 1, 1)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(-3, 400), m=st.integers(1, 300), a=st.integers(0, 600), b=st.integers(0, 600))
def test_py_floor_sum(n, m, a, b):
    assert sums.py_floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n)) == int(sums.floor_sum(n, m, a, b))


# ---- whole layers: predict (closed forms) against the model evaluated with the loops ----


_LOOP_EVALS: dict[tuple, object] = {}
_BUILD_EVAL = model_mod._python_eval.__wrapped__  # the evaluator's builder, without its cache


def _loop_eval(key: tuple):
    """The model's compiled evaluator (``_python_eval``) with the tile sums as loops, one per structure."""
    if key not in _LOOP_EVALS:
        with mock.patch.object(compile_mod, "python_function", loop_function):
            _LOOP_EVALS[key] = _BUILD_EVAL(key)
    return _LOOP_EVALS[key]


def predict_with_loops(spec, tiling, **opts):
    """``predict`` with every tile sum evaluated as its definition's loop (what predict did before)."""
    with mock.patch.object(model_mod, "_python_eval", _loop_eval):
        return predict(spec, tiling, H200, **opts)


@st.composite
def layers(draw):
    kv = draw(st.sampled_from([1, 2]))
    h = kv * draw(st.sampled_from([1, 2, 4]))
    d = draw(st.sampled_from([32, 64, 128]))
    phase = draw(st.sampled_from(["prefill", "prefill", "decode"]))
    nq = draw(st.integers(1, 16)) if phase == "decode" else draw(st.integers(1, 1500))
    nk = draw(st.integers(1, 1500))
    causal = draw(st.booleans())
    align = draw(st.sampled_from(["top-left", "bottom-right"]))
    window = draw(st.sampled_from([(None, None), (None, None), (37, None), (100, 0), (5, 60)]))
    if causal and window[1] not in (None, 0):
        window = (window[0], 0)
    backward = phase == "prefill" and draw(st.booleans())
    spec = LayerSpec(draw(st.integers(1, 3)), h, kv, d, nq, nk, dtype=draw(st.sampled_from(["bf16", "fp32"])),
                     causal=causal, causal_align=align, phase=phase, backward=backward,
                     window_left=window[0], window_right=window[1])
    if phase == "decode":
        p = draw(st.sampled_from([x for x in (1, 2, 4) if (h // kv) % x == 0 and x * nq <= 128]))
        tiling = Tiling(16, draw(st.sampled_from([16, 32, 64])), num_stages=1,
                        num_splits=draw(st.integers(1, 9)), heads_per_program=p)
    else:
        bwd = {f: draw(st.sampled_from([16, 32, 64, 128])) for f in ("bwd_block_m", "bwd_block_n", "dq_block_m",
                                                                     "dq_block_n")}
        tiling = Tiling(draw(st.sampled_from([16, 32, 64])), draw(st.sampled_from([16, 32, 64])), num_stages=1,
                        **bwd)
    return spec, tiling


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers())
def test_predict_equals_the_loop_evaluated_model(case):
    """Every row, total, allocation and FLOP count of ``predict`` is bit-identical to the model
    evaluated with the definitions' loops, on random layers (prefill and decode, forward and
    training step, GQA, causal both alignments, windows, ragged tails)."""
    spec, tiling = case
    try:
        want = predict_with_loops(spec, tiling).to_dict()
    except IomodelError:  # a layer the model refuses is refused the same way by both
        with pytest.raises(IomodelError):
            predict(spec, tiling, H200)
        return
    assert predict(spec, tiling, H200).to_dict() == want


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_long_causal_layer_equals_the_loops(align):
    """A long causal training step (64k tokens, ragged tail) with the loops and with the closed forms."""
    spec = LayerSpec(1, 4, 2, 128, 65_000, 65_537, causal=True, causal_align=align, backward=True)
    tiling = Tiling(128, 64)
    assert predict(spec, tiling, H200).to_dict() == predict_with_loops(spec, tiling).to_dict()


# ---- the largest lengths: fast, and exact past 2^63 bytes ----


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_llama_layer_at_2_24_tokens_is_fast(align):
    """Llama-3-8B's causal training step at 2^24 tokens: the compiled model has no loop, and
    evaluates in about a millisecond (the loops took about 10 s for the forward alone; the bound
    here is 1 s, loose for a shared machine); its K bytes are the arithmetic series."""
    import inspect

    n = 2**24
    spec = LayerSpec(1, 32, 8, 128, n, n, causal=True, causal_align=align, backward=True)
    tiling = Tiling(128, 64)
    predict(spec, tiling, H200)  # compile once
    source = inspect.getsource(model_mod._python_eval(model_mod.structure_key(spec, tiling, dict(
        model_mod.DEFAULT_OPTIONS))))
    assert "range(" not in source and "py_q_tile_key_rows(" in source and "py_k_tile_query_rows(" in source
    start = time.perf_counter()
    p = predict(spec, tiling, H200)
    assert time.perf_counter() - start < 1.0
    k = [r for r in p.algorithms["tiled"].rows if r.tensor == "K" and r.level == "HBM" and r.step == "fwd kernel"]
    t = n // 128
    assert sum(r.read_bytes for r in k) == 32 * 128 * 2 * 128 * t * (t + 1) // 2  # H·d·s·BLOCK_M·Σ(i+1)


def test_byte_count_past_2_63_is_exact_in_predict_and_refused_by_sweep():
    """4,096 sequences of 2^24 tokens, Llama-3-8B heads, causal: the forward's K and V reads are
    2^68.6 B. predict gives the exact Python int (the arithmetic series by hand); sweep, which
    evaluates in int64, refuses the point with one error saying what to do (never a wrapped number)."""
    n, b = 2**24, 4096
    spec = LayerSpec(b, 32, 8, 128, n, n, causal=True)
    tiling = Tiling(128, 64)
    p = predict(spec, tiling, H200)
    t = n // 128
    kv_rows = 128 * t * (t + 1) // 2  # per (batch, head): query tile i loads (i + 1)·128 keys
    want = 2 * b * 32 * kv_rows * 128 * 2  # K and V, B·H heads, d·s bytes per row
    assert want > 2**63
    got = sum(r.read_bytes for r in p.algorithms["tiled"].rows if r.level == "HBM" and r.tensor in ("K", "V"))
    assert type(got) is int and got == want
    assert p.algorithms["tiled"].hbm_bytes > 2**63
    with pytest.raises(IomodelError, match="too large for exact int64 evaluation"):
        sweep(spec, tiling, H200, {"seqlen_q": [n], "seqlen_k": [n]})
