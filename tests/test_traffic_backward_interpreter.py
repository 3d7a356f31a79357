"""The backward kernels' SRAM_fill bytes, counted in Triton's interpreter, equal the model exactly.

Per kernel (``_attn_fwd``, ``_bwd_preprocess``, ``_bwd_dkdv``, ``_bwd_dq``) and per tensor, to
the byte, on 30 shapes: GQA and MQA, causal top-left and bottom-right, ragged tails, rows
that see no key (bottom-right with seqlen_q > seqlen_k), seqlen_q > seqlen_k and
seqlen_k > seqlen_q, HEAD_DIM not a power of two, fp32/fp16/bf16, the interpreter tiles
``INTERPRETER_BACKWARD`` and other tiles (BWD_BLOCK_N < BWD_BLOCK_M, where a key tile
loads query rows none of which sees it), the dK/dV kernel of ``atomic_dq``, and the dK/dV
kernel split over S > 1 slices of the GQA group with its reduction kernel.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch, fa, kb, interpret = (pytest.importorskip(m) for m in ("torch", "kernels.flash_attention", "kernels.heuristics",
                                                              "iomodel.measure.interpret"))
from iomodel import LayerSpec, get_hardware  # noqa: E402
from iomodel.traffic import predict  # noqa: E402
from iomodel.traffic.tiled_bwd import KERNEL_STEPS, sram_fill_by_kernel  # noqa: E402

# interpreter only (TRITON_INTERPRET=1: the counter wraps the interpreter's loads and stores)
pytestmark = [pytest.mark.interpreter, pytest.mark.skipif(not fa.INTERPRET, reason="needs TRITON_INTERPRET=1"),
              pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")]

H200 = get_hardware("H200")
IB = kb.INTERPRETER_BACKWARD  # dK/dV 16 x 32, dQ 32 x 16, preprocess 32 (kernels/heuristics.py)
WIDE = replace(IB, block_m=32, block_n=16, dq_block_m=16, dq_block_n=32, preprocess_block_m=16)
SQUARE = replace(IB, block_m=16, block_n=16, dq_block_m=16, dq_block_n=16, preprocess_block_m=64)

SHAPES = [  # B, H, H_kv, d, N_q, N_k, causal, align, dtype, config
    (1, 2, 2, 16, 32, 32, False, "top-left", "fp32", IB),
    (1, 2, 1, 16, 37, 53, False, "top-left", "fp32", IB),  # GQA, ragged
    (2, 4, 1, 24, 33, 47, False, "top-left", "fp32", IB),  # MQA, HEAD_DIM 24
    (1, 2, 2, 16, 37, 53, True, "top-left", "fp32", IB),
    (1, 4, 2, 16, 53, 37, True, "top-left", "fp32", IB),  # N_q > N_k
    (1, 2, 1, 40, 29, 70, True, "top-left", "fp32", IB),  # N_k > N_q, HEAD_DIM 40
    (1, 2, 2, 16, 53, 37, True, "bottom-right", "fp32", IB),  # rows 0..15 see no key
    (1, 4, 1, 16, 70, 20, True, "bottom-right", "fp32", IB),  # MQA, whole tiles without keys
    (1, 2, 2, 16, 20, 70, True, "bottom-right", "fp32", IB),  # N_k > N_q
    (2, 2, 1, 24, 45, 45, True, "bottom-right", "fp32", IB),  # square: = top-left
    (1, 2, 2, 16, 17, 17, True, "top-left", "fp32", IB),  # one row past a tile
    (1, 1, 1, 16, 1, 40, True, "top-left", "fp32", IB),  # one query row (the forward forced to prefill)
    (1, 2, 2, 16, 40, 64, True, "top-left", "fp32", WIDE),  # key tiles 3: rows 32..39 loaded, none sees them
    (1, 2, 1, 16, 40, 64, False, "top-left", "fp32", WIDE),
    (1, 4, 2, 24, 61, 35, True, "bottom-right", "fp32", WIDE),
    (1, 2, 2, 16, 50, 30, True, "top-left", "fp32", SQUARE),
    (1, 3, 1, 16, 30, 50, True, "bottom-right", "fp32", SQUARE),  # G = 3
    (1, 2, 1, 32, 48, 48, True, "top-left", "fp16", IB),
    (1, 2, 2, 48, 35, 66, True, "bottom-right", "fp16", IB),  # HEAD_DIM 48 (pad 64)
    (1, 4, 2, 16, 41, 23, False, "top-left", "bf16", IB),
    (1, 2, 2, 16, 64, 16, True, "bottom-right", "bf16", WIDE),  # 48 rows without keys
    (1, 2, 1, 20, 19, 19, False, "top-left", "fp32", SQUARE),
    (1, 2, 2, 16, 33, 65, True, "top-left", "fp32", replace(IB, atomic_dq=True)),  # dK/dV with fp32 atomics
    (1, 4, 1, 16, 50, 31, True, "bottom-right", "fp32", replace(WIDE, atomic_dq=True)),
    # the dK/dV kernel's GQA group split over S programs (fp32 partials, then _bwd_reduce_dkdv)
    (1, 4, 1, 16, 37, 53, True, "top-left", "fp32", replace(IB, group_splits=3)),  # MQA, slices of 1 and 2 heads
    (2, 6, 2, 24, 70, 20, True, "bottom-right", "fp32", replace(IB, group_splits=2)),  # rows without keys
    (1, 5, 1, 16, 40, 70, False, "top-left", "bf16", replace(WIDE, group_splits=5)),  # S = G, 70 keys: 2 reduce tiles
    (1, 4, 2, 48, 61, 35, True, "bottom-right", "fp16", replace(SQUARE, group_splits=2)),  # HEAD_DIM 48 (pad 64)
    (1, 4, 1, 16, 33, 65, True, "top-left", "fp32", replace(IB, group_splits=2, atomic_dq=True)),
    (1, 8, 1, 16, 20, 30, True, "top-left", "fp32", replace(IB, group_splits=0)),  # chosen: 4 interpreter SMs -> S = 8
]


def counted_and_modelled(B, H, H_kv, d, N_q, N_k, causal, align, dtype, config):
    spec = LayerSpec(B, H, H_kv, d, N_q, N_k, dtype=dtype, causal=causal, causal_align=align, backward=True)
    got, cfg, bcfg, _ = interpret.count_flash_attention_backward(spec, seed=3, backward_config=config)
    assert bcfg == (config if config.group_splits else replace(config, group_splits=bcfg.group_splits))
    pred = predict(spec, bcfg.tiling(cfg.tiling()), H200, dq_mode="atomic" if config.atomic_dq else "separate")
    counted = {k: {t: [r.read_bytes, r.write_bytes] for t, r in v.items() if r.read_bytes or r.write_bytes}
               for k, v in got.items()}
    model = {k: {t: rw for t, rw in v.items() if rw != [0, 0]} for k, v in sram_fill_by_kernel(pred).items()}
    return counted, model


@pytest.mark.parametrize("B,H,H_kv,d,N_q,N_k,causal,align,dtype,config", SHAPES)
def test_backward_model_equals_interpreter(B, H, H_kv, d, N_q, N_k, causal, align, dtype, config):
    counted, model = counted_and_modelled(B, H, H_kv, d, N_q, N_k, causal, align, dtype, config)
    launched = (["_attn_fwd", "_bwd_preprocess", "_bwd_dkdv"] + ([] if config.atomic_dq else ["_bwd_dq"])
                + (["_bwd_reduce_dkdv"] if config.group_splits != 1 else []))
    assert sorted(counted) == sorted(launched)
    for kernel in launched:
        assert counted[kernel] == model[kernel], kernel
    # atomic_dq: the zero-init and the fp32 -> dtype copy are torch ops the interpreter does not see
    assert sorted(set(model) - set(counted)) == (
        ["dQ = dQ_acc.to(dtype)", "dQ_acc = zeros (fp32)"] if config.atomic_dq else [])


def test_enough_shapes():
    assert len(SHAPES) >= 20 and set(KERNEL_STEPS) == {"_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"}


def test_group_split_counts_by_hand():
    """MQA B1 H4 d16, 37 queries x 53 keys causal, S = 3 on the interpreter tiles (BN 32): 2 key
    tiles x 3 slices load K and V (53 rows x 16 x 4 B each, 3 times), write fp32 partials
    (3 x 53 x 16 x 4 B each); the reduction reads them once and writes dK, dV once (fp32 input)."""
    counted, model = counted_and_modelled(1, 4, 1, 16, 37, 53, True, "top-left", "fp32", replace(IB, group_splits=3))
    kv, part = 53 * 16 * 4, 3 * 53 * 16 * 4
    assert counted["_bwd_dkdv"]["K"] == [3 * kv, 0] == model["_bwd_dkdv"]["K"]
    assert counted["_bwd_dkdv"]["dK_part"] == [0, part] and counted["_bwd_dkdv"]["dV_part"] == [0, part]
    assert "dK" not in counted["_bwd_dkdv"]
    assert counted["_bwd_reduce_dkdv"] == {"dK_part": [part, 0], "dV_part": [part, 0], "dK": [0, kv], "dV": [0, kv]}
    # the query side is the unsplit kernel's: every head's rows once per key tile
    unsplit, _ = counted_and_modelled(1, 4, 1, 16, 37, 53, True, "top-left", "fp32", IB)
    for t in ("Q", "dO", "LSE", "Delta"):
        assert counted["_bwd_dkdv"][t] == unsplit["_bwd_dkdv"][t], t
