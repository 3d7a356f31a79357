"""The compulsory reads (``iomodel.cache.predict.compulsory_read_bytes``) compiled once per layer
structure equal the model's symbolic rows evaluated point by point, and a hand count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from iomodel.cache.predict import _INPUTS, compulsory_read_bytes
from iomodel.errors import IomodelError
from iomodel.spec import LayerSpec
from iomodel.traffic.base import SYM
from iomodel.traffic.bounds import compulsory_rows


def _by_subs(spec: LayerSpec) -> dict[str, int]:
    vals = {SYM.B: spec.batch, SYM.H: spec.heads, SYM.H_kv: spec.kv_heads, SYM.d: spec.head_dim,
            SYM.N_q: spec.seqlen_q, SYM.N_k: spec.seqlen_k, SYM.s: spec.width}
    out: dict[str, int] = {}
    for r in compulsory_rows(spec.with_(backward=False)):
        if r.tensor in _INPUTS and r.step == "forward":
            out[r.tensor] = out.get(r.tensor, 0) + int(r.read_bytes.subs(vals))
    return out


def test_hand_count_causal_bottom_right_with_rows_that_see_no_key():
    """B 2, H 8 over H_kv 2, d 64, bf16, N_q 100 > N_k 60, causal bottom-right: the diagonal sits
    40 rows down, so the first 40 query rows see no key: Q reads 60 rows, K and V all 60 keys."""
    spec = LayerSpec(batch=2, heads=8, kv_heads=2, head_dim=64, seqlen_q=100, seqlen_k=60, causal=True,
                     causal_align="bottom-right")
    assert compulsory_read_bytes(spec) == {"Q": 2 * 8 * 60 * 64 * 2, "K": 2 * 2 * 60 * 64 * 2, "V": 2 * 2 * 60 * 64 * 2}
    # the same structure (compiled once) with N_q 30 < N_k 90: the diagonal ends at the last key,
    # every query row sees a key and the last row sees all 90
    assert compulsory_read_bytes(spec.with_(seqlen_q=30, seqlen_k=90)) == {"Q": 2 * 8 * 30 * 64 * 2,
                                                                            "K": 2 * 2 * 90 * 64 * 2,
                                                                            "V": 2 * 2 * 90 * 64 * 2}


@settings(max_examples=150, deadline=None)
@given(b=st.integers(1, 9), hk=st.sampled_from([1, 2, 8]), g=st.integers(1, 4), d=st.sampled_from([32, 80, 128]),
       nq=st.integers(1, 5000), nk=st.integers(1, 20000), causal=st.booleans(),
       align=st.sampled_from(["top-left", "bottom-right"]), wl=st.sampled_from([None, 0, 1, 17, 300]),
       wr=st.sampled_from([None, 0, 5, 100]), dtype=st.sampled_from(["bf16", "fp32"]))
def test_compiled_equals_the_rows_evaluated_point_by_point(b, hk, g, d, nq, nk, causal, align, wl, wr, dtype):
    try:
        spec = LayerSpec(batch=b, heads=hk * g, kv_heads=hk, head_dim=d, seqlen_q=nq, seqlen_k=nk, dtype=dtype,
                         causal=causal, causal_align=align, window_left=wl, window_right=None if causal else wr)
    except IomodelError:
        return
    assert compulsory_read_bytes(spec) == _by_subs(spec)
