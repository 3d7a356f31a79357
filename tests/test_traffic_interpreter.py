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
