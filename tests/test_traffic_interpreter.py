"""The model's SRAM_fill rows equal the bytes the bundled kernel requests, counted in Triton's interpreter.

Per tensor and to the byte: ragged lengths, causal in both alignments (bottom-right with
seqlen_q > seqlen_k, where whole query tiles see no key), GQA/MQA, decode with split-KV
(an empty split included) and heads_per_program packing.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
fa = pytest.importorskip("kernels.flash_attention")
interpret = pytest.importorskip("iomodel.measure.interpret")

from iomodel import LayerSpec, get_hardware  # noqa: E402
from iomodel.traffic import predict  # noqa: E402
from iomodel.schedule.tiles import decode_block_m  # noqa: E402
from kernels import heuristics as hx  # noqa: E402

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not fa.INTERPRET, reason="counts loads in Triton's interpreter (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

H200 = get_hardware("H200")


def model_bytes(spec, tiling):
    out: dict[str, tuple[int, int]] = {}
    for r in predict(spec, tiling, H200).algorithms["tiled"].rows:
        if r.level == "SRAM_fill":
            rd, wr = out.get(r.tensor, (0, 0))
            out[r.tensor] = (rd + r.read_bytes, wr + r.write_bytes)
    return out


def counted(q, k, v, **kw):
    with interpret.TrafficCounter() as counter:
        o, lse, cfg = fa.flash_attention(q, k, v, return_config=True, **kw)
    named = counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse})
    got = {n: (t.read_bytes, t.write_bytes) for n, t in named.items() if t.read_bytes or t.write_bytes}
    # the split-KV partials are kernel arguments allocated by the launcher
    for n, t in counter.by_argument().items():
        if n in ("O_PART", "LSE_PART"):
            got[n] = (t.read_bytes, t.write_bytes)
    return got, cfg


@pytest.mark.parametrize(
    "B,H,H_kv,d,N_q,N_k,causal,align",
    [
        (1, 2, 1, 16, 37, 53, True, "top-left"),
        (1, 4, 1, 16, 70, 20, True, "bottom-right"),  # first tiles see no key at all
        (1, 2, 2, 16, 53, 37, True, "bottom-right"),
        (2, 4, 2, 24, 33, 33, False, "top-left"),  # padded HEAD_DIM
        (1, 2, 2, 16, 100, 64, True, "top-left"),
    ],
)
def test_prefill_model_equals_interpreter(B, H, H_kv, d, N_q, N_k, causal, align):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(B, h, n, d, generator=g) for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))
    got, cfg = counted(q, k, v, causal=causal, causal_align=align, path="prefill")
    spec = LayerSpec(B, H, H_kv, d, N_q, N_k, dtype="fp32", causal=causal, causal_align=align)
    assert got == model_bytes(spec, cfg.tiling())


@pytest.mark.parametrize(
    "B,H,H_kv,N_q,N_k,causal,align,S,P",
    [
        (1, 8, 2, 3, 50, True, "top-left", 5, 2),  # L = 16: the 5th split is empty
        (2, 4, 1, 7, 45, False, "top-left", 4, 2),
        (1, 4, 1, 9, 20, True, "bottom-right", 7, 4),  # MQA, packed
        (1, 8, 2, 1, 77, True, "bottom-right", 1, 4),  # num_splits == 1: O, LSE written directly
    ],
)
def test_decode_model_equals_interpreter(B, H, H_kv, N_q, N_k, causal, align, S, P):
    d = 16
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, h, n, d, generator=g) for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))
    cfg = hx.KernelConfig(block_m=decode_block_m(P, N_q), block_n=16, num_warps=4, num_stages=1,
                          path="decode-split-kv", num_splits=S, heads_per_program=P)
    got, ran = counted(q, k, v, causal=causal, causal_align=align, path="decode-split-kv", config=cfg)
    spec = LayerSpec(B, H, H_kv, d, N_q, N_k, dtype="fp32", causal=causal, causal_align=align, phase="decode")
    assert got == model_bytes(spec, ran.tiling())


@pytest.mark.parametrize(
    "B,H,H_kv,d,N_q,N_k,causal,align,window,block_m,P,grid_order",
    [
        (1, 8, 2, 16, 40, 70, True, "top-left", None, 16, 4, "tiles-fastest"),  # one program per whole GQA group
        (2, 4, 1, 16, 33, 33, True, "bottom-right", None, 32, 2, "tiles-fastest"),
        (1, 4, 2, 16, 50, 20, True, "bottom-right", None, 16, 2, "heads-fastest"),  # first positions see no key
        (1, 8, 2, 24, 64, 128, False, "top-left", None, 32, 4, "tiles-fastest"),  # padded HEAD_DIM
        (1, 4, 1, 16, 45, 90, True, "top-left", (10, 0), 16, 4, "head-grouped:2"),  # window band
        (1, 8, 1, 16, 5, 64, False, "top-left", None, 16, 8, "tiles-fastest"),  # 2 positions a tile: 3 tiles of 8 heads
    ],
)
def test_packed_prefill_model_equals_interpreter(B, H, H_kv, d, N_q, N_k, causal, align, window, block_m, P,
                                                 grid_order):
    """``KernelConfig.heads_per_program`` P > 1 on path ``prefill`` (FlashAttention-3's PackGQA): the model's packed
    rows (``iomodel.traffic.tiled_fwd``: K/V ⌈N_q/(BLOCK_M/P)⌉ times per group of P heads) to the byte, and o and the
    LSE equal the fp64 reference."""
    from kernels.reference import reference_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(B, h, n, d, generator=g) for h, n in ((H, N_q), (H_kv, N_k), (H_kv, N_k)))
    cfg = hx.KernelConfig(block_m=block_m, block_n=16, num_warps=4, num_stages=1, path="prefill",
                          heads_per_program=P, grid_order=grid_order)
    got, ran = counted(q, k, v, causal=causal, causal_align=align, config=cfg, window=window)
    left, right = window if window else (None, None)
    spec = LayerSpec(B, H, H_kv, d, N_q, N_k, dtype="fp32", causal=causal, causal_align=align,
                     window_left=left, window_right=right)
    assert ran.tiling().heads_per_program == P
    assert got == model_bytes(spec, ran.tiling())
    o, lse = fa.flash_attention(q, k, v, causal, align, config=cfg, window=window)
    ro, rl = reference_attention(q, k, v, causal, align, window=window)
    assert (o.double() - ro).abs().max().item() < 1e-5
    seen = torch.isfinite(rl)
    assert torch.equal(torch.isfinite(lse), seen) and (lse.double()[seen] - rl[seen]).abs().max().item() < 1e-5


@pytest.mark.parametrize("cfg_kw,call_kw,fragment", [
    ({"heads_per_program": 3}, {}, "heads_per_program 3 must divide the GQA group H/H_kv = 4: use "
                                   "config.heads_per_program = 1, 2 or 4"),
    ({"heads_per_program": 32}, {"kv": 1, "heads": 32}, "heads_per_program 32 must divide BLOCK_M = 16 (each program "
                                                         "holds BLOCK_M / P whole query positions of P heads): use "
                                                         "config.heads_per_program = 16, or a BLOCK_M of 32 or more"),
    ({"heads_per_program": -4}, {}, "heads_per_program must be a whole number, 1 or more, got -4"),
    ({"heads_per_program": 0}, {}, "heads_per_program must be a whole number, 1 or more, got 0"),
    ({"heads_per_program": True}, {}, "heads_per_program must be a whole number, 1 or more, got True"),
    ({"heads_per_program": 2.0}, {}, "heads_per_program must be a whole number, 1 or more, got 2.0"),
    ({"heads_per_program": 2, "path": "prefill-tma"}, {"path": "prefill-tma", "dtype": torch.float16},
     "packed query heads run on path 'prefill' only"),
])
def test_packed_prefill_bad_config_is_one_line(cfg_kw, call_kw, fragment):
    heads, kv, dt = call_kw.pop("heads", 8), call_kw.pop("kv", 2), call_kw.pop("dtype", torch.float32)
    q, k, v = (torch.zeros(1, h, 40, 16, dtype=dt) for h in (heads, kv, kv))
    base = dict(block_m=16, block_n=16, num_warps=4, num_stages=1, path="prefill")
    with pytest.raises(fa.IomodelError) as exc:
        fa.flash_attention(q, k, v, True, config=hx.KernelConfig(**{**base, **cfg_kw}), **call_kw)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_interpreter_packed_sweep_reconciles_sram_fill_exactly(tmp_path):
    """``sweeps/interpreter-packed.toml`` through ``iomodel validate --interpreter`` and ``iomodel reconcile``: every
    packed and unpacked shape's counts equal the model's SRAM_fill rows, and packing a group of 4 reads fewer K/V
    bytes where the query is shorter than a tile (q 20 against k 90: P 4 loads 8-position tiles of 4 heads)."""
    from pathlib import Path

    from iomodel.commands.validate import run_interpreter
    from iomodel.measure.records import Measurement
    from iomodel.measure.sweep import load_sweep
    from iomodel.reconcile import reconcile

    sw = load_sweep(Path(__file__).resolve().parents[1] / "sweeps" / "interpreter-packed.toml")
    assert [s.heads_per_program for s in sw.shapes] == [1, 2, 4] * 4
    meas = run_interpreter(sw, "test", lambda s: None)
    rec = reconcile(Measurement.load(meas.save(tmp_path / "p.json")))
    assert [s["fraction"] for s in rec.summary()] == [1.0, 1.0]
    assert all(r.explanation().startswith("exact") for r in rec.rows)
    k = {s.id: s.sram_fill["K"]["read_bytes"] for s in meas.shapes}
    # 8 heads, 90 keys of 16 fp16 columns (32 B): P 1 and 2 load every key once per 32-row tile per head (group),
    # 8·90·32 = 23,040 B; P 4: 2 groups × ⌈20/8⌉ = 3 tiles of 8 positions: 6·90·32 = 17,280 B
    base = "b1-h8-kv2-d16-fp16-q20-k90-nc-tiled"
    assert (k[base], k[base + "-p2"], k[base + "-p4"]) == (23040, 23040, 17280)
