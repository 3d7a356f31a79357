"""A sweep's ``tile_order`` (iomodel/measure/sweep.py): the bundled kernel's first autotune candidate run in a given
query-tile order, so a measurement can set the two orders of one causal layer side by side (the forward order's
programs drift apart on long causal grids: docs/l2-calibration.md, "Programs that drift apart")."""

from __future__ import annotations

import pytest
import torch

from iomodel.errors import IomodelError
from iomodel.measure.records import _is_tag, shape_tag
from kernels.flash_attention import INTERPRET, flash_attention


def test_tile_order_gets_its_own_shape_id_and_round_trips():
    from iomodel.measure.sweep import SweepShape, parse_sweep

    sw = parse_sweep({"defaults": {"heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "fp16"},
                      "shape": [{"seqlen": 40, "causal": True},
                                {"seqlen": 40, "causal": True, "tile_order": ["forward", "reverse"]},
                                {"seqlen": 40, "causal": True, "tile_order": "forward", "grid_order": "heads-fastest"}]})
    assert [s.id for s in sw.shapes] == ["b1-h2-kv1-d16-fp16-q40-k40-tl-tiled",
                                         "b1-h2-kv1-d16-fp16-q40-k40-tl-tiled-tforward",
                                         "b1-h2-kv1-d16-fp16-q40-k40-tl-tiled-treverse",
                                         "b1-h2-kv1-d16-fp16-q40-k40-tl-tiled-tforward-heads-fastest"]
    assert [s.tile_order for s in sw.shapes] == [None, "forward", "reverse", "forward"]
    for s in sw.shapes:
        assert SweepShape.from_dict(s.to_dict()) == s
    assert "tile_order" not in sw.shapes[0].to_dict() and sw.shapes[1].to_dict()["tile_order"] == "forward"


@pytest.mark.parametrize("tag,ok", [("-tforward", True), ("-treverse", True), ("-tforward-heads-fastest", True),
                                    ("-treverse-head-grouped:4-p2", True), ("-tsideways", False),
                                    ("-heads-fastest-tforward", False)])
def test_tile_order_tag(tag, ok):
    assert _is_tag(tag) is ok


def test_shape_tag_order():
    assert shape_tag("heads-fastest", 0, 1, "forward") == "-tforward-heads-fastest"
    assert shape_tag() == "" and shape_tag(tile_order="reverse") == "-treverse"


@pytest.mark.parametrize("entry,fragment", [
    ({"seqlen": 40, "tile_order": "sideways"}, "tile_order must be one of 'forward', 'reverse', got the string 'sideways'"),
    ({"seqlen": 40, "tile_order": 1}, "tile_order must be one of 'forward', 'reverse'"),
    ({"seqlen": 40, "tile_order": "forward", "impls": ["tiled", "sdpa-cudnn"]}, "option of the bundled kernel's dense"),
    ({"seqlen": 8, "tile_order": "forward"}, "option of the bundled kernel's dense prefill"),
    ({"seqlen": 40, "tile_order": "forward", "pass": "fwd+bwd"}, "option of the bundled kernel's dense prefill"),
    ({"seqlen": 40, "tile_order": "forward", "window": [8, 0]}, "option of the bundled kernel's dense prefill"),
])
def test_sweep_bad_tile_order_is_one_line(entry, fragment):
    from iomodel.measure.sweep import parse_sweep

    with pytest.raises(IomodelError) as exc:
        parse_sweep({"defaults": {"heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "fp16"}, "shape": [entry]})
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.interpreter
@pytest.mark.skipif(not INTERPRET, reason="interpreter tests (TRITON_INTERPRET=1)")
@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")
@pytest.mark.parametrize("order", ["forward", "reverse"])
def test_sweep_tile_order_reaches_the_kernel(order):
    """The child's call runs the first autotune candidate in the order the sweep names; the output is the same
    bits as that candidate's own launch in that order."""
    from iomodel.measure.child import impl_call
    from iomodel.measure.sweep import parse_sweep
    from kernels import heuristics as hx

    sw = parse_sweep({"defaults": {"heads": 2, "kv_heads": 1, "head_dim": 16, "dtype": "fp16"},
                      "shape": [{"seqlen": 40, "causal": True, "tile_order": order}]})
    shape = sw.shapes[0]
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 2, 40, 16, generator=g).half()
    k, v = torch.randn(1, 1, 40, 16, generator=g).half(), torch.randn(1, 1, 40, 16, generator=g).half()
    call, config = impl_call("tiled", shape.spec, q, k, v, tile_order=shape.tile_order)
    o = call()
    want = hx.prefill_default(16, "fp16", True, "prefill").config("prefill").with_(tile_order=order)
    assert config() == want.to_dict() and config()["tile_order"] == order
    ref, _ = flash_attention(q, k, v, True, config=want)
    assert torch.equal(o, ref)
