"""Sliding window (issue 13, item 3): ``window=(left, right)`` in the kernels, the model and the spec.

* the forward (prefill, decode) and backward kernels against the fp64 reference with a window;
* interpreter-counted bytes equal the traffic model exactly, per tensor (forward and decode)
  and per kernel and tensor (backward), on 12 + 10 window shapes: both alignments, causal and
  not, one-sided and two-sided, bands narrower than a tile, whole tiles whose rows see no key,
  GQA, ragged tails, the tiles of ``INTERPRETER_BACKWARD`` and others;
* hand-computed model numbers (key rows, pairs, compulsory keys);
* bad windows: one clear error.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from iomodel import LayerSpec, get_hardware
from iomodel.errors import IomodelError
from iomodel.measure.interpret import OUTSIDE
from iomodel.spec.layer import effective_window, window_band
from iomodel.traffic import predict

torch, fa, kb, hx, interpret = (pytest.importorskip(m) for m in (
    "torch", "kernels.flash_attention", "kernels.backward", "kernels.heuristics", "iomodel.measure.interpret"))
from kernels.reference import reference_attention, reference_attention_backward, visible_mask  # noqa: E402
from iomodel.traffic.tiled_bwd import sram_fill_by_kernel  # noqa: E402

H200 = get_hardware("H200")
interp = pytest.mark.skipif(not fa.INTERPRET, reason="needs TRITON_INTERPRET=1")
IB = hx.INTERPRETER_BACKWARD
WIDE = replace(IB, block_m=32, block_n=16, dq_block_m=16, dq_block_n=32, preprocess_block_m=16)


def _spec(B, H, H_kv, d, N_q, N_k, causal, align, left, right, dtype="fp32", backward=False):
    return LayerSpec(B, H, H_kv, d, N_q, N_k, dtype, causal=causal, causal_align=align, backward=backward,
                     phase="decode" if N_q <= 16 and not backward else "prefill", window_left=left,
                     window_right=right)


FWD_SHAPES = [  # B, H, H_kv, d, N_q, N_k, causal, align, left, right
    (1, 2, 1, 16, 70, 70, True, "top-left", 16, None),  # causal local (Mistral-style)
    (1, 2, 2, 16, 100, 130, False, "top-left", 5, 7),  # two-sided, narrower than a tile
    (1, 2, 2, 16, 100, 70, True, "bottom-right", 20, None),  # rows 0..29 see no key
    (1, 4, 2, 16, 40, 130, False, "bottom-right", 0, 0),  # the diagonal only
    (1, 2, 1, 24, 33, 80, False, "top-left", None, 3),  # right side only
    (2, 2, 2, 16, 64, 200, True, "top-left", 8, None),  # keys 64.. seen by no row
    (1, 2, 2, 16, 130, 20, False, "bottom-right", 3, 2),  # whole query tiles see no key
    (1, 2, 1, 40, 90, 90, False, "top-left", 0, 50),  # HEAD_DIM 40 (padded), right-looking
    # decode (N_q <= 16): split-KV, band inside one split or across splits
    (1, 4, 1, 16, 1, 300, True, "bottom-right", 64, None),
    (1, 2, 2, 16, 4, 257, True, "bottom-right", 100, 0),
    (2, 8, 2, 16, 3, 130, False, "top-left", 10, 10),  # top-left: only the first keys
    (1, 2, 2, 16, 16, 65, False, "bottom-right", 7, 3),
]


def _model_sram_fill(spec, tiling):
    out: dict[str, list[int]] = {}
    for r in predict(spec, tiling, H200).algorithms["tiled"].rows:
        if r.level == "SRAM_fill":
            acc = out.setdefault(r.tensor, [0, 0])
            acc[0] += r.read_bytes
            acc[1] += r.write_bytes
    return {k: tuple(v) for k, v in out.items() if v != [0, 0]}


@interp
@pytest.mark.parametrize("shape", FWD_SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_forward_window_counts_equal_model_and_outputs_equal_reference(shape):
    spec = _spec(*shape)
    counts, cfg, counter = interpret.count_flash_attention(spec, seed=1)
    assert OUTSIDE not in counts
    counted = {k: (v.read_bytes, v.write_bytes) for k, v in counts.items() if (v.read_bytes, v.write_bytes) != (0, 0)}
    assert counted == _model_sram_fill(spec, cfg.tiling())
    # the band cuts K/V traffic below the same layer without a window
    plain = _model_sram_fill(replace(spec, window_left=None, window_right=None), cfg.tiling())
    assert counted["K"][0] < plain["K"][0]
    # outputs: same inputs as count_flash_attention(seed=1), against the fp64 reference
    g = torch.Generator().manual_seed(1)
    q = torch.randn(spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, generator=g)
    k = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g)
    v = torch.randn(spec.batch, spec.kv_heads, spec.seqlen_k, spec.head_dim, generator=g)
    o, lse = fa.flash_attention(q, k, v, spec.causal, spec.causal_align, window=spec.window)
    ro, rl = reference_attention(q, k, v, spec.causal, spec.causal_align, window=spec.window)
    torch.testing.assert_close(o.double(), ro, atol=2e-5, rtol=1e-5)
    empty = ~visible_mask(spec.seqlen_q, spec.seqlen_k, spec.causal, spec.causal_align, window=spec.window).any(-1)
    assert torch.isneginf(lse[..., empty]).all() and (o[..., empty, :] == 0).all()
    torch.testing.assert_close(lse[..., ~empty].double(), rl[..., ~empty], atol=2e-5, rtol=1e-5)


BWD_SHAPES = [  # B, H, H_kv, d, N_q, N_k, causal, align, left, right, config
    (1, 2, 2, 16, 70, 70, True, "top-left", 16, None, IB),
    (1, 2, 1, 16, 100, 70, False, "top-left", 5, 7, IB),  # GQA, two-sided
    (1, 2, 2, 16, 100, 70, True, "bottom-right", 20, None, IB),  # rows without keys
    (1, 2, 2, 16, 40, 130, False, "bottom-right", 0, 0, IB),  # keys 0..89 seen by no row
    (1, 2, 2, 24, 33, 33, False, "top-left", None, 3, IB),
    (1, 4, 1, 16, 64, 200, True, "top-left", 40, None, WIDE),  # MQA, BWD_BLOCK_N < BWD_BLOCK_M
    (1, 2, 2, 16, 130, 20, False, "bottom-right", 3, 2, WIDE),
    (1, 2, 2, 16, 50, 50, False, "top-left", 0, 50, IB),
    (1, 2, 2, 16, 37, 53, True, "top-left", 8, 0, replace(IB, atomic_dq=True)),
    (1, 2, 1, 16, 45, 45, True, "bottom-right", 1, None, WIDE),  # two keys per row
]


@interp
@pytest.mark.parametrize("shape", BWD_SHAPES, ids=lambda s: "-".join(map(str, s[:10])))
def test_backward_window_counts_equal_model_and_grads_equal_reference(shape):
    *dims, config = shape
    spec = _spec(*dims, backward=True)
    got, cfg, bcfg, _ = interpret.count_flash_attention_backward(spec, seed=3, backward_config=config)
    pred = predict(spec, bcfg.tiling(cfg.tiling()), H200, dq_mode="atomic" if config.atomic_dq else "separate")
    counted = {k: {t: [r.read_bytes, r.write_bytes] for t, r in v.items() if r.read_bytes or r.write_bytes}
               for k, v in got.items()}
    model = {k: {t: rw for t, rw in v.items() if rw != [0, 0]} for k, v in sram_fill_by_kernel(pred).items()}
    for kernel in counted:
        assert counted[kernel] == model[kernel], kernel
    # gradients against the fp64 reference, through autograd (the window reaches the backward)
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(spec.batch, h, n, spec.head_dim, generator=g, requires_grad=True)
               for h, n in ((spec.heads, spec.seqlen_q), (spec.kv_heads, spec.seqlen_k), (spec.kv_heads, spec.seqlen_k)))
    do = torch.randn(spec.batch, spec.heads, spec.seqlen_q, spec.head_dim, generator=g)
    o, _ = fa.flash_attention(q, k, v, spec.causal, spec.causal_align, window=spec.window)
    o.backward(do)
    ref = reference_attention_backward(do, q, k, v, spec.causal, spec.causal_align, window=spec.window)
    for got_grad, want in zip((q.grad, k.grad, v.grad), ref):
        assert not torch.isnan(got_grad).any()
        torch.testing.assert_close(got_grad.double(), want, atol=5e-5, rtol=1e-5)


def test_band_rule_and_model_numbers_by_hand():
    # causal caps the right side at 0; an unbounded side becomes N_q + N_k
    assert effective_window(True, 16, None) == (16, 0)
    assert effective_window(True, None, 5) is None and effective_window(False, None, None) is None
    assert window_band(False, None, 3, 10, 20) == (30, 3)
    # N_q = N_k = 128, causal top-left, left 16, BLOCK_M = BLOCK_N = 64: tile 0 loads keys
    # [0, 64), tile 1 (rows 64..127, first key 48) loads [0, 128): 192 key rows per head
    spec = LayerSpec(1, 1, 1, 64, 128, 128, "fp16", causal=True, window_left=16)
    from iomodel.spec import Tiling

    p = predict(spec, Tiling(block_m=64, block_n=64), H200)
    k_row = [r for r in p.algorithms["tiled"].rows if r.level == "HBM" and r.tensor == "K"][0]
    assert k_row.read_bytes == 192 * 64 * 2
    # pairs: rows 0..15 see m + 1 keys, rows 16..127 see 17: 136 + 112·17 = 2040; FLOPs 4·d·pairs
    assert p.algorithms["tiled"].flops == 4 * 64 * 2040
    # left 16 with tiles of 16: tile i (i >= 1) starts at key 16·(i−1): 16 + 7·32 = 240 rows
    p = predict(spec, Tiling(block_m=16, block_n=16), H200)
    k_row = [r for r in p.algorithms["tiled"].rows if r.level == "HBM" and r.tensor == "K"][0]
    assert k_row.read_bytes == (16 + 7 * 32) * 64 * 2
    # compulsory: top-left, N_q = 40 < N_k = 130, window (0, 0): keys 0..39 are seen, 40 rows
    spec = LayerSpec(1, 1, 1, 16, 40, 130, "fp16", window_left=0, window_right=0)
    comp = {r.tensor: r.read_bytes for r in predict(spec, Tiling(), H200).compulsory_rows if r.read_bytes}
    assert comp == {"Q": 40 * 16 * 2, "K": 40 * 16 * 2, "V": 40 * 16 * 2}


@pytest.mark.parametrize("kwargs,needle", [
    (dict(window_left=-2), "window_left must be >= 0 tokens"),
    (dict(window_left=-1), "window_left must be >= 0 tokens"),
    (dict(window_right=1.5), "window_right must be a whole number"),
    (dict(window_left=True), "window_left must be a whole number"),
])
def test_layer_spec_refuses_bad_windows(kwargs, needle):
    with pytest.raises(IomodelError, match=needle):
        LayerSpec(1, 1, 1, 16, 64, 64, **kwargs)


@pytest.mark.parametrize("window,needle", [
    ((-2, 0), "window left must be >= 0 tokens"),
    ((0, -5), "window right must be >= 0 tokens"),
    ((4,), "window must be a pair"),
    (4, "window must be a pair"),
    ((1.0, 0), "window left must be a whole number"),
])
def test_kernel_refuses_bad_windows(window, needle):
    q = torch.zeros(1, 1, 32, 16, device="cuda" if torch.cuda.is_available() else "cpu")  # the kernel's device
    with pytest.raises(IomodelError, match=needle):
        fa.flash_attention(q, q, q, window=window)
    with pytest.raises(IomodelError, match=needle):
        reference_attention(q.cpu(), q.cpu(), q.cpu(), window=window)


def test_eager_baseline_window_chain_and_values():
    from kernels.baseline import eager_attention

    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, 2, 9, 8, generator=g)
    k = torch.randn(1, 2, 7, 8, generator=g)
    v = torch.randn(1, 2, 7, 8, generator=g)
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ not in {"unsqueeze", "expand", "view", "transpose", "_unsafe_view",
                                                    "slice", "alias", "t", "select"}:
                self.names.append(func.overloadpacket.__name__)
            return out

    # window (1, 0), bottom-right, N_q = 9 > N_k = 7: rows 0 and 1 see no key (all(-1), then one masked_fill)
    with Ops() as log:
        o = eager_attention(q, k, v, causal=True, causal_align="bottom-right", window=(1, None))
    assert log.names == ["bmm", "mul", "ones", "tril", "triu", "bitwise_not", "masked_fill", "all", "_softmax",
                         "masked_fill", "bmm"]
    ro, _ = reference_attention(q, k, v, True, "bottom-right", window=(1, None))
    torch.testing.assert_close(o.double(), ro, atol=1e-6, rtol=1e-6)
    assert (o[:, :, :2] == 0).all()
    # the model counts the same ops: ones, tril, triu, ~mask, masked_fill, all, masked_fill on P
    spec = LayerSpec(1, 2, 2, 8, 9, 7, "fp32", causal=True, causal_align="bottom-right", window_left=1)
    steps = [r.step for r in predict(spec, __import__("iomodel.spec", fromlist=["Tiling"]).Tiling(), H200)
             .algorithms["baseline"].rows if r.level == "HBM"]
    for step in ("mask = mask.triu(diagonal=off - WL)", "empty = (~mask).all(-1, keepdim=True)",
                 "P = P.masked_fill(empty, 0)"):
        assert step in steps


def test_worksheet_window_option_and_config(tmp_path):
    import json

    from iomodel.spec.resolve import parse_window, resolve_layer

    assert parse_window("4095") == (4095, None) and parse_window("8,-1") == (8, None)
    assert parse_window("none") == (None, None)
    with pytest.raises(IomodelError, match="is not a window"):
        parse_window("4k")
    with pytest.raises(IomodelError, match="window left must be >= 0"):
        parse_window("-2")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "mistral", "hidden_size": 4096, "num_attention_heads": 32,
                               "num_key_value_heads": 8, "sliding_window": 4096, "num_hidden_layers": 32,
                               "torch_dtype": "bfloat16"}))
    layer = resolve_layer(config=cfg, seqlen=16384)
    assert layer.spec.window == (4095, 0)
    assert any("sliding window of 4,096 tokens on all 32 layers" in n for n in layer.notes)
    assert resolve_layer(config=cfg, seqlen=16384, window="none").spec.window is None
    # the config's window and a paged decode: the error names the config, not a --window never given
    with pytest.raises(IomodelError) as exc:
        resolve_layer(config=cfg, seqlen=8192, phase="decode", page_size=16)
    assert "gives a sliding window of 4,096 tokens and the paged decode has none: pass --window none" in str(exc.value)
    assert resolve_layer(config=cfg, seqlen=8192, phase="decode", page_size=16, window="none").spec.page_size == 16
    # the windowed layer moves fewer K bytes than the full layer
    full = resolve_layer(config=cfg, seqlen=16384, window="none")
    k_bytes = [sum(r.read_bytes for r in predict(x.spec, x.tiling, H200).algorithms["tiled"].rows
                   if r.level == "HBM" and r.tensor == "K") for x in (layer, full)]
    assert k_bytes[0] < k_bytes[1] / 2


def test_band_sums_closed_forms_equal_their_definitions():
    import random

    import numpy as np
    import sympy as sp

    from tile_sum_reference import loop_function

    from iomodel.traffic.sums import (KTileQueryRowsBand, QTileKeyRowsBand, VisiblePairsBand,
                                      np_k_tile_query_rows_band, np_q_tile_key_rows_band, np_visible_pairs_band,
                                      py_k_tile_query_rows_band, py_q_tile_key_rows_band, py_visible_pairs_band)

    S = sp.symbols("N_q N_k BM BN off WL WR", integer=True)
    fq = loop_function(S, [QTileKeyRowsBand(*S)])  # the definitions, as loops
    fk = loop_function(S, [KTileQueryRowsBand(*S)])
    pairs = (S[0], S[1], S[4], S[5], S[6])
    fv = loop_function(pairs, [VisiblePairsBand(*pairs)])
    rng = random.Random(7)
    for _ in range(200):
        Nq, Nk = rng.randint(1, 200), rng.randint(1, 200)
        BM, BN = rng.choice([1, 3, 16, 32, 64]), rng.choice([1, 7, 16, 64])
        off = rng.choice([0, Nk - Nq])
        WL, WR = rng.choice([0, 1, 5, 40, Nq + Nk]), rng.choice([0, 2, 30, Nq + Nk])
        args = (Nq, Nk, BM, BN, off, WL, WR)
        assert fq(*args)[0] == int(np_q_tile_key_rows_band(*args)) == py_q_tile_key_rows_band(*args)
        assert fk(*args)[0] == int(np_k_tile_query_rows_band(*args)) == py_k_tile_query_rows_band(*args)
        m, n = np.arange(Nq)[:, None], np.arange(Nk)[None, :]
        brute = int(((n >= m + off - WL) & (n <= m + off + WR)).sum())
        assert fv(Nq, Nk, off, WL, WR)[0] == int(np_visible_pairs_band(Nq, Nk, off, WL, WR)) == brute
        assert py_visible_pairs_band(Nq, Nk, off, WL, WR) == brute


@interp
@pytest.mark.parametrize("causal,align,window", [(True, "bottom-right", (8, None)), (False, "top-left", (5, 7))])
def test_tma_path_window_moves_the_model_bytes(causal, align, window):
    spec = LayerSpec(1, 2, 1, 32, 40, 72, "fp16", causal=causal, causal_align=align, window_left=window[0],
                     window_right=window[1])
    counts, cfg, counter = interpret.count_flash_attention(spec, seed=2, path="prefill-tma")
    assert counter.kernels() == ["_attn_fwd_tma"]
    counted = {k: (v.read_bytes, v.write_bytes) for k, v in counts.items() if (v.read_bytes, v.write_bytes) != (0, 0)}
    assert counted == _model_sram_fill(spec, cfg.tiling())


def test_cli_worksheet_models_a_config_sliding_window(tmp_path, capsys):
    import json

    from tests.test_cli_errors import assert_one_line_error, run_cli

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_attention_heads": 32, "hidden_size": 4096, "torch_dtype": "bfloat16",
                               "sliding_window": 4096}))
    code, out, err = run_cli(capsys, ["worksheet", "--config", str(cfg), "--format", "json"])
    assert code == 0, err
    ws = json.loads(out)
    assert (ws["spec"]["window_left"], ws["spec"]["window_right"]) == (4095, None)
    assert "sliding window of 4,096 tokens on every layer: modelled as one of those layers" in out
    assert_one_line_error(capsys, ["worksheet", "--window", "-5"], "window left must be >= 0 tokens")
    assert_one_line_error(capsys, ["worksheet", "--window", "4k"], "is not a window")
