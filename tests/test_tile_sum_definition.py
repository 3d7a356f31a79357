"""``iomodel.traffic.sums.definition`` (each tile sum's ``as_sum()`` built once) changes nothing.

``predict`` prints every tile sum of a model as its literal ``Sum`` (compiled Python and the row
formulas); sympy re-canonicalises the ``Min``/``Max`` of a definition slowly, and a model prints
each sum many times, so the definition is built once per sum. Held here: with the memo replaced
by a fresh ``as_sum()`` on every print (and the model's caches cleared), every prediction, every
printed formula and every LaTeX string is the same, on specs holding every kind of tile sum.
"""

from __future__ import annotations

import pytest
import sympy as sp

import iomodel.traffic.model as model_mod
import iomodel.traffic.sums as sums
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware
from iomodel.traffic import predict

H200 = get_hardware("H200")
SPECS = [
    # causal prefill both alignments (QTileKeyRows, VisiblePairs, KBlockQueryRows of the K/V-stationary loop)
    LayerSpec(1, 8, 2, 64, 1000, 1000, dtype="bf16", causal=True),
    LayerSpec(2, 4, 4, 128, 300, 700, dtype="fp16", causal=True, causal_align="bottom-right"),
    # windows (QTileKeyRowsBand, VisiblePairsBand), forward and training step (KTileQueryRowsBand)
    LayerSpec(1, 4, 1, 64, 900, 900, dtype="bf16", causal=True, window_left=128),
    LayerSpec(1, 2, 2, 16, 100, 70, dtype="fp16", causal=True, causal_align="bottom-right", window_left=20,
              backward=True),
    LayerSpec(1, 2, 1, 16, 100, 70, dtype="fp16", window_left=5, window_right=7, backward=True),
    # causal training steps (KTileQueryRows), GQA and MHA
    LayerSpec(1, 8, 2, 128, 2048, 2048, dtype="bf16", causal=True, backward=True),
    LayerSpec(2, 6, 2, 32, 70, 20, dtype="fp32", causal=True, causal_align="bottom-right", backward=True),
    # decode with a window, and a plain non-causal forward (no tile sum at all)
    LayerSpec(4, 8, 2, 64, 1, 4096, dtype="bf16", causal=True, causal_align="bottom-right", window_left=512,
              phase="decode"),
    LayerSpec(1, 16, 16, 64, 512, 512, dtype="fp16"),
]


def _clear_model_caches():
    model_mod._BUILD_CACHE.clear()
    model_mod._python_eval.cache_clear()
    model_mod._printed.cache_clear()


def _everything(spec):
    p = predict(spec, Tiling(), H200)
    model = model_mod._BUILD_CACHE[model_mod.structure_key(spec, Tiling(), model_mod._resolve_options({}))]
    rows = list(model.compulsory) + [r for alg in model.algorithms.values() for r in alg.rows]
    return p.to_dict(), [(sp.sstr(r.read_bytes), sp.latex(r.read_bytes), sp.sstr(r.write_bytes)) for r in rows]


def test_each_definition_is_built_once_and_is_as_sum():
    ts = sums.KTileQueryRowsBand(*sp.symbols("N_q N_k BM BN off"), 5, 7)
    assert sums.definition(ts) is sums.definition(sums.KTileQueryRowsBand(*ts.args))
    assert sums.definition(ts) == ts.as_sum()


def _label(s):
    window = f"-w{s.window_left}.{s.window_right}" if s.window_left is not None or s.window_right is not None else ""
    mask = s.causal_align if s.causal else "full"
    return f"{s.phase}{'-bwd' if s.backward else ''}-b{s.batch}h{s.heads}kv{s.kv_heads}-q{s.seqlen_q}k{s.seqlen_k}-{mask}{window}"


@pytest.mark.parametrize("spec", SPECS, ids=_label)
def test_predictions_and_formulas_are_those_of_a_fresh_as_sum_on_every_print(monkeypatch, spec):
    _clear_model_caches()
    memo = _everything(spec)
    with monkeypatch.context() as m:
        m.setattr(sums, "definition", lambda tile_sum: tile_sum.as_sum())
        _clear_model_caches()
        fresh = _everything(spec)
    _clear_model_caches()
    assert memo == fresh
