"""The bundled kernel launched heads-fastest (``KernelConfig.grid_order``), in Triton's interpreter.

Grid (B·H, T_r) instead of (T_r, B·H): the same programs in another order, so the output
meets the kernel tests' error rule (``tests/test_kernel.py``: at most 2x the eager chain's
error in the same dtype, plus 1e-5), is bitwise the tiles-fastest launch's, and the
interpreter-counted bytes per tensor equal the traffic contract (``tests/test_kernel_traffic.py``).
"""

from __future__ import annotations

import pytest
import torch

from iomodel.errors import IomodelError
from kernels.flash_attention import INTERPRET, KernelConfig, flash_attention

from test_kernel import assert_matches_reference
from test_kernel_traffic import contract_prefill

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not INTERPRET, reason="interpreter tests (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

interpret = pytest.importorskip("iomodel.measure.interpret")


def _inputs(B, H, H_kv, N_q, N_k, d, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(B, H, N_q, d, generator=g).to(dtype), torch.randn(B, H_kv, N_k, d, generator=g).to(dtype),
            torch.randn(B, H_kv, N_k, d, generator=g).to(dtype))


@pytest.mark.parametrize("path,B,H,H_kv,N_q,N_k,d,dtype,causal,align,tile_order", [
    ("prefill", 2, 4, 2, 77, 45, 32, torch.float16, True, "bottom-right", "forward"),  # rows that see no key
    ("prefill", 1, 3, 1, 70, 70, 32, torch.bfloat16, True, "top-left", "reverse"),
    ("prefill", 1, 2, 2, 33, 50, 16, torch.float32, False, "top-left", "forward"),
    ("prefill-tma", 1, 4, 2, 45, 77, 32, torch.float16, True, "top-left", "reverse"),
])
def test_heads_fastest_is_exact_and_moves_the_contract_bytes(path, B, H, H_kv, N_q, N_k, d, dtype, causal, align,
                                                             tile_order):
    q, k, v = _inputs(B, H, H_kv, N_q, N_k, d, dtype, seed=N_q)
    runs = {}
    for grid_order in ("tiles-fastest", "heads-fastest", "head-grouped:3"):
        cfg = KernelConfig(32, 16, 4, 1, path, tile_order=tile_order, grid_order=grid_order)
        with interpret.TrafficCounter() as counter:
            o, lse, ran = flash_attention(q, k, v, causal, align, return_config=True, config=cfg)
        assert ran.grid_order == grid_order
        got = counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse})
        runs[grid_order] = ({n: (t.read_bytes, t.write_bytes) for n, t in got.items()}, o, lse)
    off = 0 if align == "top-left" else N_k - N_q
    for order in ("heads-fastest", "head-grouped:3"):  # head-grouped:3: groups of 3 grid rows, the last one partial
        counts, o, lse = runs[order]
        assert_matches_reference(q, k, v, causal, align, o, lse)
        assert counts == runs["tiles-fastest"][0] == contract_prefill(B, H, H_kv, N_q, N_k, d, q.element_size(),
                                                                      causal, off, 32, 16)
        assert torch.equal(o, runs["tiles-fastest"][1]) and torch.equal(lse, runs["tiles-fastest"][2])


@pytest.mark.parametrize("cfg,path,fragment", [
    (KernelConfig(32, 16, 4, 1, "prefill", grid_order="grouped:4"), None,
     "config.grid_order must be one of 'tiles-fastest', 'heads-fastest' or 'head-grouped:G' (G >= 1), got 'grouped:4'"),
    (KernelConfig(16, 16, 4, 1, "decode-split-kv", grid_order="heads-fastest"), None,
     "grid_order applies to the prefill paths only"),
])
def test_bad_grid_order_is_one_line(cfg, path, fragment):
    q, k, v = _inputs(1, 2, 2, 40 if cfg.path == "prefill" else 1, 40, 16, torch.float16, seed=0)
    with pytest.raises(IomodelError) as exc:
        flash_attention(q, k, v, config=cfg)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_sweep_shape_grid_order_runs_the_kernel_heads_fastest():
    """A sweep's ``grid_order = "heads-fastest"`` (iomodel/measure/sweep.py) gets its own shape id and
    reaches the kernel through the child's call: the first autotune candidate in that order."""
    from iomodel.measure.child import impl_call
    from iomodel.measure.sweep import SweepShape, parse_sweep
    from kernels import heuristics as hx

    sw = parse_sweep({"defaults": {"heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "fp16"},
                      "shape": [{"seqlen": 40, "causal": True, "grid_order": ["tiles-fastest", "heads-fastest"]}]})
    assert [s.id for s in sw.shapes] == ["b1-h2-kv1-d16-fp16-q40-k40-tl-tiled",
                                         "b1-h2-kv1-d16-fp16-q40-k40-tl-tiled-heads-fastest"]
    shape = sw.shapes[1]
    assert SweepShape.from_dict(shape.to_dict()) == shape and shape.to_dict()["grid_order"] == "heads-fastest"
    q, k, v = _inputs(1, 2, 1, 40, 40, 16, torch.float16, seed=3)
    call, config = impl_call("tiled", shape.spec, q, k, v, grid_order=shape.grid_order)
    o = call()
    want = hx.prefill_default(16, "fp16", True, "prefill").config("prefill")
    assert config() == {**want.to_dict(), "grid_order": "heads-fastest"}
    assert "grid_order" not in want.to_dict()  # the default launch's record reads as before the field
    ref, _ = flash_attention(q, k, v, True, config=want)
    assert torch.equal(o, ref)


@pytest.mark.parametrize("entry,fragment", [
    ({"seqlen": 40, "grid_order": "grouped:2"}, "grid_order must be one of 'tiles-fastest', 'heads-fastest'"),
    ({"seqlen": 40, "grid_order": "heads-fastest", "impls": ["tiled", "baseline"]}, "option of the bundled kernel's dense prefill"),
    ({"seqlen": 8, "grid_order": "heads-fastest"}, "option of the bundled kernel's dense prefill"),
    ({"seqlen": 40, "grid_order": "heads-fastest", "pass": "fwd+bwd"}, "option of the bundled kernel's dense prefill"),
])
def test_sweep_bad_grid_order_is_one_line(entry, fragment):
    from iomodel.measure.sweep import parse_sweep

    with pytest.raises(IomodelError) as exc:
        parse_sweep({"defaults": {"heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "fp16"}, "shape": [entry]})
    assert fragment in str(exc.value) and "\n" not in str(exc.value)
