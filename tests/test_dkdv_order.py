"""The dK/dV kernel's GQA loop order (``Tiling.bwd_dkdv_order``, ``BackwardConfig.dkdv_order``): the
threshold that chooses it, what ``resolve`` reports as run, the records that carry it, the L2 model's
waves of the descending order (hand counts), and the interpreter kernel under both orders."""

from __future__ import annotations

from dataclasses import replace

import pytest

import kernels.heuristics as kh
from iomodel.errors import IomodelError
from iomodel.measure.records import ShapeMeasurement
from iomodel.schedule.grid import ReadGroup, dkdv_waves
from iomodel.spec import LayerSpec, Tiling

MiB = 1 << 20


def test_threshold_by_hand():
    """Rows of one slice: ceil(G/S) * N_q * (2*d*s + 8) bytes against 0.5 * 60 MiB = 31,457,280 B.
    Llama-2-70B (G 8, d 128, bf16) at 6,144 tokens: 8 * 6144 * 520 = 25,559,040 B: fits; at 9,216:
    38,338,560 B: does not. Falcon-7B (G 71, S 6, d 64) at 6,144: 12 * 6144 * 264 = 19,464,192 B."""
    assert kh.dkdv_order_for(8, 1, 6144, 128, 2, 60 * MiB) == "tiles-descending"
    assert kh.dkdv_order_for(8, 1, 9216, 128, 2, 60 * MiB) == "heads-outer"
    assert kh.dkdv_order_for(71, 6, 6144, 64, 2, 60 * MiB) == "tiles-descending"
    # the edge: 4 heads * 15,124 rows * 520 B = 31,457,920 B is 640 B over; 15,123 rows fit
    assert kh.dkdv_order_for(4, 1, 15123, 128, 2, 60 * MiB) == "tiles-descending"
    assert kh.dkdv_order_for(4, 1, 15124, 128, 2, 60 * MiB) == "heads-outer"


def test_resolve_reports_the_order_that_runs():
    causal = kh.backward_config(128, "bf16", True)
    assert causal.dkdv_order == "auto" and kh.backward_config(128, "bf16", False).dkdv_order == "heads-outer"
    args = dict(seqlen_q=6144, head_dim=128, width=2, l2_bytes=60 * MiB)
    assert causal.resolve(1, 8, 8, 6144, 132, **args).dkdv_order == "tiles-descending"
    assert causal.resolve(1, 8, 8, 9216, 132, **{**args, "seqlen_q": 9216}).dkdv_order == "heads-outer"
    assert causal.resolve(1, 64, 1, 6144, 132, **args).dkdv_order == "heads-outer"  # MHA: one head a program
    assert causal.resolve(1, 8, 8, 6144, 132, True, **args).dkdv_order == "heads-outer"  # a sliding window
    forced = replace(causal, dkdv_order="tiles-descending").resolve(1, 8, 8, 16384, 132)  # as given, no L2 needed
    assert forced.dkdv_order == "tiles-descending" and forced.tiling().bwd_dkdv_order == "tiles-descending"
    with pytest.raises(IomodelError, match="chosen per launch: pass seqlen_q"):
        causal.resolve(1, 8, 8, 6144, 132)
    with pytest.raises(IomodelError, match="dkdv_order must be one of heads-outer, tiles-descending or auto"):
        replace(causal, dkdv_order="reverse").resolve(1, 8, 8, 6144, 132, **args)
    with pytest.raises(IomodelError, match="chosen at launch"):
        replace(causal, group_splits=1).tiling()
    with pytest.raises(IomodelError, match="bwd_dkdv_order must be one of"):
        Tiling(bwd_dkdv_order="auto")


def test_worksheet_says_the_order_both_ways():
    """The worksheet's tile source names the order ``auto`` resolved to, on either side of the threshold
    (Llama-2-70B's layer, G 8: descending at 6,144 tokens, heads-outer at 9,216), and nothing for MHA."""
    from iomodel.report.worksheet import kernel_tiling
    from iomodel.spec.hardware import H200

    def source(n, heads=64, kv=8):
        spec = LayerSpec(batch=1, heads=heads, kv_heads=kv, head_dim=128, seqlen_q=n, seqlen_k=n, dtype="bf16",
                         causal=True, backward=True)
        return kernel_tiling(spec, H200)[1]

    assert "dK/dV loop tiles-descending (heuristics.dkdv_order_for: the slice's query rows fit" in source(6144)
    assert "dK/dV loop heads-outer (heuristics.dkdv_order_for: the slice's query rows exceed the effective L2 of H200)" \
        in source(9216)
    assert "dK/dV loop" not in source(9216, 64, 64)


@pytest.mark.parametrize("key, field, absent, other, bad", [
    ("dkdv_order", "bwd_dkdv_order", "heads-outer", "tiles-descending", 3),  # the dK/dV loop order
    ("dq_tile_order", "dq_tile_order", "forward", "reverse", "last-first"),  # the dQ kernel's tile order
])
def test_records_carry_the_order_and_refuse_a_bad_one(key, field, absent, other, bad):
    base = {"id": "x", "impl": "tiled", "spec": {"batch": 1, "heads": 4, "kv_heads": 2, "head_dim": 32,
                                                 "seqlen_q": 64, "seqlen_k": 64, "dtype": "bf16", "causal": True,
                                                 "causal_align": "top-left", "phase": "prefill", "backward": True},
            "config": {"block_m": 32, "block_n": 16, "backward": {"block_m": 16, "block_n": 32, "num_warps": 4, "num_stages": 1, "dq_num_warps": 4, "dq_num_stages": 1}}}
    assert getattr(ShapeMeasurement.from_dict(base).tiling(), field) == absent  # absent: recorded before the order
    base["config"]["backward"][key] = other
    assert getattr(ShapeMeasurement.from_dict(base).tiling(), field) == other
    base["config"]["backward"][key] = bad
    with pytest.raises(IomodelError, match=f"config.backward.{key} must be"):
        ShapeMeasurement.from_dict(base)


def _row_reads(waves):
    return [(a.keys[0][1], a.keys[0][2], a.nbytes[0]) for a in waves[0]
            if isinstance(a, ReadGroup) and a.tensors[0] == "Q"]


def test_descending_waves_by_hand():
    """G = 2, N = 64, BWD_BLOCK_M 16, BWD_BLOCK_N 32, causal top-left, both programs in one wave:
    program 0 sees rows [0, 64), program 1 rows [32, 64). Heads-outer: program 0 reads head 0 at row
    time 0 and head 1 at 64, program 1 head 0 at 0 and head 1 at 32: head 1 is touched twice (32 rows at
    time 32, 64 rows at 64). Tiles-descending: both start at the last tile and take the heads inner, so
    each head's chunk is touched once, at times 0 and 16, with program 0's 64 rows (64 * 32 * 2 B = 4 KiB)."""
    spec = LayerSpec(1, 2, 1, 32, 64, 64, dtype="fp16", causal=True, backward=True)
    t = Tiling(bwd_block_m=16, bwd_block_n=32)
    outer, _, _ = dkdv_waves(spec, t, 2, grouped=True)
    desc, req_r, _ = dkdv_waves(spec, replace(t, bwd_dkdv_order="tiles-descending"), 2, grouped=True)
    assert _row_reads(outer) == [(0, 0, 4096), (1, 0, 2048), (1, 0, 4096)]
    assert _row_reads(desc) == [(0, 0, 4096), (1, 0, 4096)]
    assert req_r["Q"] == 2 * (64 + 32) * 32 * 2  # requested bytes: the order moves none
    mha = LayerSpec(1, 2, 2, 32, 64, 64, dtype="fp16", causal=True, backward=True)  # MHA loops one head: as before
    assert dkdv_waves(mha, replace(t, bwd_dkdv_order="tiles-descending"), 2) == dkdv_waves(mha, t, 2)


@pytest.mark.interpreter
def test_interpreter_kernel_runs_the_order_and_both_orders_agree():
    """A causal GQA step in the interpreter runs tiles-descending by default (its rows fit any L2) and
    reports it; forced heads-outer gives the same gradients up to the summation order (fp32 inputs,
    exact dots: within 1e-5 of each other); MHA reports heads-outer."""
    import torch

    import kernels.flash_attention as fa
    from kernels.backward import flash_attention_backward

    if not fa.INTERPRET:
        pytest.skip("interpreter test (TRITON_INTERPRET=1)")
    g = torch.Generator().manual_seed(3)
    q, do = (torch.randn(1, 4, 70, 32, generator=g) for _ in range(2))
    k, v = (torch.randn(1, 2, 70, 32, generator=g) for _ in range(2))
    o, lse = fa.flash_attention(q, k, v, True, path="prefill")
    *desc, ran = flash_attention_backward(do, q, k, v, o, lse, True, return_config=True)
    assert ran.dkdv_order == "tiles-descending"
    outer = flash_attention_backward(do, q, k, v, o, lse, True,
                                     config=replace(kh.backward_config(32, "fp32", True, interpreter=True),
                                                    dkdv_order="heads-outer"))
    assert all((a - b).abs().max().item() < 1e-5 for a, b in zip(desc, outer))
    o2, lse2 = fa.flash_attention(q, q, q, True, path="prefill")
    assert flash_attention_backward(do, q, q, q, o2, lse2, True, return_config=True)[3].dkdv_order == "heads-outer"
