"""The TMA backward kernels (``BackwardConfig.tma``: Q, dO, K, V through tensor descriptors;
``mask_split``; ``fused_launch``) in Triton's interpreter: bit-identical gradients to the
pointer kernels, and SRAM_fill bytes counted per kernel equal to the traffic model's
``_bwd_dkdv`` and ``_bwd_dq`` rows (the fused launch: their sum), on GQA, MQA, the S > 1 group
split, both causal alignments, ragged tails and rows that see no key.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch, fa, kh, kb, interpret = (pytest.importorskip(m) for m in (
    "torch", "kernels.flash_attention", "kernels.heuristics", "kernels.backward", "iomodel.measure.interpret"))
from iomodel import LayerSpec, get_hardware  # noqa: E402
from iomodel.traffic import predict  # noqa: E402
from iomodel.traffic.tiled_bwd import sram_fill_by_kernel  # noqa: E402
from kernels.reference import reference_attention_backward  # noqa: E402

pytestmark = [pytest.mark.interpreter, pytest.mark.skipif(not fa.INTERPRET, reason="needs TRITON_INTERPRET=1"),
              pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning")]

H200 = get_hardware("H200")
IB = kh.INTERPRETER_BACKWARD  # dK/dV 16 x 32, dQ 32 x 16, 4 warps each
WIDE = replace(IB, block_m=32, block_n=16, dq_block_m=16, dq_block_n=32)
VARIANTS = {"tma": dict(tma=True), "tma-ms": dict(tma=True, mask_split=True),
            "fused": dict(tma=True, mask_split=True, fused_launch=True)}

SHAPES = [  # B, H, H_kv, d, N_q, N_k, causal, align, dtype, config
    (1, 2, 2, 16, 37, 53, True, "top-left", "fp16", IB),
    (1, 2, 2, 32, 53, 37, True, "bottom-right", "fp16", IB),  # rows 0..15 see no key
    (2, 4, 1, 16, 33, 47, False, "top-left", "bf16", IB),  # MQA, ragged
    (1, 4, 2, 16, 61, 35, True, "bottom-right", "bf16", WIDE),  # GQA, key tiles narrower than query tiles
    (1, 2, 2, 16, 40, 64, True, "top-left", "fp16", WIDE),  # rows 32..39 of a key tile none of which sees it
    (1, 4, 1, 16, 37, 53, True, "top-left", "fp16", replace(IB, group_splits=3)),  # S = 3 slices, then the reduce
    (1, 6, 2, 32, 70, 20, True, "bottom-right", "bf16", replace(IB, group_splits=2)),  # S = 2, rows without keys
    (1, 2, 2, 64, 17, 17, True, "top-left", "fp16", IB),  # one row past a tile
]


def _inputs(B, H, H_kv, d, N_q, N_k, dtype, seed=5):
    g = torch.Generator().manual_seed(seed)
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q, do = (torch.randn(B, H, N_q, d, generator=g).to(dt) for _ in range(2))
    k, v = (torch.randn(B, H_kv, N_k, d, generator=g).to(dt) for _ in range(2))
    return q, k, v, do


@pytest.mark.parametrize("B,H,H_kv,d,N_q,N_k,causal,align,dtype,config", SHAPES)
def test_tma_gradients_equal_pointer_kernels(B, H, H_kv, d, N_q, N_k, causal, align, dtype, config):
    q, k, v, do = _inputs(B, H, H_kv, d, N_q, N_k, dtype)
    o, lse = fa.flash_attention(q, k, v, causal, align)
    want = kb.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=config)
    ref = reference_attention_backward(do, q, k, v, causal, align)  # fp64
    for name, flags in VARIANTS.items():
        got = kb.flash_attention_backward(do, q, k, v, o, lse, causal, align, config=replace(config, **flags))
        for t, a, b, r in zip(("dq", "dk", "dv"), got, want, ref):
            assert not torch.isnan(a).any(), (name, t)
            assert torch.equal(a, b), (name, t, (a.float() - b.float()).abs().max().item())
            # and the pair is the real gradient: within bf16/fp16 rounding of the fp64 reference
            assert (a.double() - r).norm() <= 2e-2 * r.norm() + 1e-5, (name, t)


@pytest.mark.parametrize("B,H,H_kv,d,N_q,N_k,causal,align,dtype,config", SHAPES)
def test_tma_counts_equal_model(B, H, H_kv, d, N_q, N_k, causal, align, dtype, config):
    spec = LayerSpec(B, H, H_kv, d, N_q, N_k, dtype=dtype, causal=causal, causal_align=align, backward=True)
    for name, flags in VARIANTS.items():
        got, cfg, bcfg, _ = interpret.count_flash_attention_backward(spec, seed=3,
                                                                     backward_config=replace(config, **flags))
        pred = predict(spec, bcfg.tiling(cfg.tiling()), H200)
        model = {kk: {t: rw for t, rw in v.items() if rw != [0, 0]} for kk, v in sram_fill_by_kernel(pred).items()}
        counted = {kk: {t: [r.read_bytes, r.write_bytes] for t, r in v.items() if r.read_bytes or r.write_bytes}
                   for kk, v in got.items()}
        split = ["_bwd_reduce_dkdv"] if bcfg.group_splits > 1 else []
        if flags.get("fused_launch"):
            assert sorted(counted) == sorted(["_attn_fwd", "_bwd_preprocess", "_bwd_fused_tma"] + split), name
            both: dict[str, list[int]] = {}
            for kernel in ("_bwd_dkdv", "_bwd_dq"):
                for t, (r, w) in model[kernel].items():
                    acc = both.setdefault(t, [0, 0])
                    acc[0] += r
                    acc[1] += w
            assert counted["_bwd_fused_tma"] == both, name
        else:
            assert sorted(counted) == sorted(["_attn_fwd", "_bwd_preprocess", "_bwd_dkdv_tma", "_bwd_dq_tma"]
                                             + split), name
            assert counted["_bwd_dkdv_tma"] == model["_bwd_dkdv"], name
            assert counted["_bwd_dq_tma"] == model["_bwd_dq"], name
        for kernel in ["_bwd_preprocess"] + split:
            assert counted[kernel] == model[kernel], (name, kernel)


def test_tma_counts_by_hand():
    """MHA B1 H1 d16 fp16, 40 queries x 40 keys, non-causal, interpreter tiles (dK/dV BN 32, BM 16;
    dQ BM 32, BN 16): the dK/dV kernel's 2 key tiles each stream all 40 rows of Q and dO
    (2 x 40 x 16 x 2 B each) and load K, V once (40 x 16 x 2 B); the dQ kernel's 2 query tiles
    each read all 40 keys of K and V."""
    spec = LayerSpec(1, 1, 1, 16, 40, 40, dtype="fp16", causal=False, backward=True)
    got, _, _, _ = interpret.count_flash_attention_backward(spec, backward_config=replace(IB, tma=True))
    row = 16 * 2
    assert got["_bwd_dkdv_tma"]["Q"].read_bytes == 2 * 40 * row == got["_bwd_dkdv_tma"]["dO"].read_bytes
    assert got["_bwd_dkdv_tma"]["K"].read_bytes == 40 * row
    assert got["_bwd_dq_tma"]["K"].read_bytes == 2 * 40 * row == got["_bwd_dq_tma"]["V"].read_bytes
    assert got["_bwd_dq_tma"]["dQ"].write_bytes == 40 * row


def test_tma_window_and_fp32_take_the_pointer_kernels():
    """A sliding window or fp32 inputs run the pointer kernels even with ``tma=True`` (no
    descriptor path for them): the launched kernels say so."""
    for spec in (LayerSpec(1, 2, 2, 16, 40, 40, dtype="fp32", causal=True, backward=True),
                 LayerSpec(1, 2, 2, 16, 40, 40, dtype="fp16", causal=True, backward=True, window_left=8)):
        got, _, _, _ = interpret.count_flash_attention_backward(spec, backward_config=replace(IB, tma=True))
        assert {"_bwd_dkdv", "_bwd_dq"} <= set(got) and "_bwd_dkdv_tma" not in got, spec
    q, k, v, do = _inputs(1, 2, 2, 16, 40, 40, "fp16")
    o, lse = fa.flash_attention(q, k, v, True)
    ran = kb.flash_attention_backward(do, q, k, v, o, lse, True, config=replace(IB, tma=True, mask_split=True),
                                      return_config=True)[3]
    assert ran.tma and ran.mask_split and not ran.fused_launch
    ran = kb.flash_attention_backward(do, q, k, v, o, lse, True, window=(8, 0), return_config=True,
                                      config=replace(IB, tma=True, mask_split=True, fused_launch=True))[3]
    assert not (ran.tma or ran.mask_split or ran.fused_launch)  # the config says the pointer kernels ran


@pytest.mark.parametrize("H,H_kv,causal,split", [(2, 2, True, True), (4, 2, True, False), (4, 1, True, False),
                                                  (2, 2, False, False)])
def test_the_config_says_where_the_mask_split_ran(H, H_kv, causal, split):
    """``mask_split`` splits the causal mask of the MHA TMA dK/dV kernel only (``MASK_SPLIT and
    CAUSAL``, not GQA): the config that ran, which the GPU records store
    (``config.backward``), says mask_split=True on causal MHA alone, fused launch or not."""
    q, k, v, do = _inputs(1, H, H_kv, 16, 40, 40, "fp16")
    o, lse = fa.flash_attention(q, k, v, causal)
    for flags in (dict(tma=True, mask_split=True), dict(tma=True, mask_split=True, fused_launch=True)):
        ran = kb.flash_attention_backward(do, q, k, v, o, lse, causal, config=replace(IB, **flags),
                                          return_config=True)[3]
        assert (ran.tma, ran.mask_split, ran.fused_launch) == (True, split, "fused_launch" in flags), flags


def test_fused_launch_with_unequal_warps_is_refused():
    from iomodel.errors import IomodelError

    q, k, v, do = _inputs(1, 2, 2, 16, 40, 40, "fp16")
    o, lse = fa.flash_attention(q, k, v, True)
    with pytest.raises(IomodelError, match="num_warps .4. must equal dq_num_warps .8."):
        kb.flash_attention_backward(do, q, k, v, o, lse, True,
                                    config=replace(IB, tma=True, fused_launch=True, dq_num_warps=8))


@pytest.mark.parametrize("field", ["tma", "mask_split", "fused_launch", "atomic_dq"])
def test_a_switch_that_is_not_a_bool_is_refused(field):
    from iomodel.errors import IomodelError

    q, k, v, do = _inputs(1, 2, 2, 16, 40, 40, "fp16")
    o, lse = fa.flash_attention(q, k, v, True)
    with pytest.raises(IomodelError, match=f"BackwardConfig.{field} must be True or False, got 'no'"):
        kb.flash_attention_backward(do, q, k, v, o, lse, True, config=replace(IB, **{field: "no"}))
