"""The kernel requests exactly the bytes docs/traffic-contract.md says, counted by the interpreter.

The expected bytes are computed here straight from the contract's per-program rules
(a loop over the grid), independently of the traffic model in ``iomodel/traffic``; the
counted bytes come from ``iomodel.measure.interpret.TrafficCounter``.
"""

from __future__ import annotations

import pytest
import torch

from iomodel.schedule.tiles import decode_block_m
from kernels.flash_attention import INTERPRET, KernelConfig, flash_attention

pytestmark = [
    pytest.mark.interpreter,
    pytest.mark.skipif(not INTERPRET, reason="counts loads in Triton's interpreter (TRITON_INTERPRET=1)"),
    pytest.mark.filterwarnings("ignore:Conversion of an array with ndim:DeprecationWarning"),
]

interpret = pytest.importorskip("iomodel.measure.interpret")


def cdiv(a, b):
    return -(-a // b)


def contract_prefill(B, H, H_kv, N_q, N_k, d, s, causal, off, BM, BN):
    """Bytes per tensor of the Q-stationary forward, program by program (traffic contract)."""
    kv = 0
    for i in range(cdiv(N_q, BM)):
        hi = N_k if not causal else min(max(min((i + 1) * BM, N_q) + off, 0), N_k)
        kv += min(N_k, cdiv(hi, BN) * BN) * d * s
    return {
        "Q": (B * H * N_q * d * s, 0),
        "K": (B * H * kv, 0),
        "V": (B * H * kv, 0),
        "O": (0, B * H * N_q * d * s),
        "LSE": (0, B * H * N_q * 4),
    }


def contract_decode(B, H, H_kv, N_q, N_k, d, s, causal, off, BN, S, P, fused=True):
    """Bytes per tensor of split-KV decode plus its merge (traffic contract): fused, each
    program's one int32 atomic on its group's counter and the merging program's reset store;
    else the combine kernel's reads (the same partial bytes)."""
    G = H // H_kv
    L = cdiv(cdiv(N_k, S), BN) * BN
    hi = min(max(N_q + off, 0), N_k) if causal else N_k
    keys = 0  # keys requested by one program, summed over splits
    for sp in range(S):
        start, end = sp * L, min((sp + 1) * L, N_k)
        for b0 in range(start, end, BN):
            if causal and b0 >= hi:
                break
            keys += min(b0 + BN, end) - b0
    programs = B * H_kv * (G // P)
    out = {
        "Q": (S * B * H * N_q * d * s, 0),
        "K": (programs * keys * d * s, 0),
        "V": (programs * keys * d * s, 0),
    }
    if S == 1:
        out["O"] = (0, B * H * N_q * d * s)
        out["LSE"] = (0, B * H * N_q * 4)
    else:
        part_o, part_lse = S * B * H * N_q * d * 4, S * B * H * N_q * 4
        out["O_PART"] = (part_o, part_o)  # written by the split programs, read by the merge
        out["LSE_PART"] = (part_lse, part_lse)
        out["O"] = (0, B * H * N_q * d * s)
        out["LSE"] = (0, B * H * N_q * 4)
        if fused:  # S atomics (4 B read + 4 B written) per group, one reset store of 4 B
            out["SEM"] = (S * programs * 4, (S + 1) * programs * 4)
    return out


def _count(q, k, v, **kw):
    with interpret.TrafficCounter() as counter:
        o, lse, cfg = flash_attention(q, k, v, return_config=True, **kw)
    got = counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse})
    return {name: (t.read_bytes, t.write_bytes) for name, t in got.items()}, cfg


_PREFILL = [
    (1, 4, 2, 45, 77, 32, torch.float16, True, "top-left"),
    (2, 2, 1, 70, 33, 32, torch.bfloat16, True, "bottom-right"),  # tiles whose key range is empty
    (1, 2, 2, 33, 50, 16, torch.float32, False, "top-left"),
    (1, 3, 1, 64, 64, 48, torch.float16, True, "bottom-right"),  # padded HEAD_DIM: 48 columns only
]
# the TMA path takes fp16/bf16 with a power-of-two HEAD_DIM
_PREFILL_CASES = [("prefill", *c) for c in _PREFILL] + [
    ("prefill-tma", *c) for c in _PREFILL if c[6] != torch.float32 and c[5] != 48]


@pytest.mark.parametrize("path,B,H,H_kv,N_q,N_k,d,dtype,causal,align", _PREFILL_CASES)
def test_prefill_bytes_match_the_contract(path, B, H, H_kv, N_q, N_k, d, dtype, causal, align):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, N_q, d, generator=g).to(dtype)
    k = torch.randn(B, H_kv, N_k, d, generator=g).to(dtype)
    v = torch.randn(B, H_kv, N_k, d, generator=g).to(dtype)
    got, cfg = _count(q, k, v, causal=causal, causal_align=align, path=path)
    off = 0 if align == "top-left" else N_k - N_q
    want = contract_prefill(B, H, H_kv, N_q, N_k, d, q.element_size(), causal, off, cfg.block_m, cfg.block_n)
    assert got == want


@pytest.mark.parametrize(
    "B,H,H_kv,N_q,N_k,causal,align,S,P",
    [
        (1, 8, 2, 1, 300, False, "top-left", None, None),  # heuristic: 4 splits, P = 4
        (2, 8, 2, 3, 100, True, "bottom-right", 3, 2),  # G/P = 2 programs per KV head
        (1, 4, 2, 16, 64, True, "top-left", 2, 2),  # causal skips the whole second split
        (1, 4, 4, 2, 40, False, "top-left", 1, 1),  # no split: O and LSE written directly
        (1, 4, 1, 5, 40, False, "top-left", 4, 4),  # MQA, L = 16: the 4th split is empty
    ],
)
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "combine-kernel"])
def test_decode_bytes_match_the_contract(B, H, H_kv, N_q, N_k, causal, align, S, P, fused):
    d = 32
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, N_q, d, generator=g).half()
    k = torch.randn(B, H_kv, N_k, d, generator=g).half()
    v = torch.randn(B, H_kv, N_k, d, generator=g).half()
    config = None
    if S is not None:
        config = KernelConfig(decode_block_m(P, N_q), 16, 4, 1, "decode-split-kv", num_splits=S,
                              heads_per_program=P, fused_combine=fused)
    elif not fused:  # the heuristic's tiles with the separate combine kernel
        from kernels.heuristics import INTERPRETER_SMEM_PER_SM, decode_config

        config = decode_config(batch=B, heads=H, kv_heads=H_kv, seqlen_q=N_q, seqlen_k=N_k, head_dim=d, num_sms=4,
                               dtype="fp16", smem_per_sm=INTERPRETER_SMEM_PER_SM,
                               interpreter=True).with_(fused_combine=False)
    got, cfg = _count(q, k, v, causal=causal, causal_align=align, config=config, num_sms=4)
    assert cfg.fused_combine is fused
    off = 0 if align == "top-left" else N_k - N_q
    want = contract_decode(B, H, H_kv, N_q, N_k, d, 2, causal, off, cfg.block_n, cfg.num_splits,
                           cfg.heads_per_program, fused)
    assert got == want


@pytest.mark.parametrize("path", ["prefill", "prefill-tma"])
def test_reverse_tile_order_moves_the_same_bytes_and_gives_the_same_output(path):
    """tile_order="reverse" (query tile i = T_r - 1 - program_id(0)) only renumbers the programs:
    every tensor's counted bytes equal the contract and the forward order's, and the output is
    bitwise the same (each tile runs the same blocks in the same order)."""
    B, H, H_kv, N_q, N_k, d, align = 1, 4, 2, 77, 45, 32, "bottom-right"  # some rows see no key
    g = torch.Generator().manual_seed(1)
    q = torch.randn(B, H, N_q, d, generator=g).half()
    k = torch.randn(B, H_kv, N_k, d, generator=g).half()
    v = torch.randn(B, H_kv, N_k, d, generator=g).half()
    counts, outs = {}, {}
    for order in ("forward", "reverse"):
        cfg = KernelConfig(32, 16, 4, 1, path, tile_order=order)
        with interpret.TrafficCounter() as counter:
            o, lse, ran = flash_attention(q, k, v, True, align, return_config=True, config=cfg)
        assert ran.tile_order == order
        got = counter.by_tensor({"Q": q, "K": k, "V": v, "O": o, "LSE": lse})
        counts[order] = {name: (t.read_bytes, t.write_bytes) for name, t in got.items()}
        outs[order] = (o, lse)
    assert counts["reverse"] == counts["forward"] == contract_prefill(
        B, H, H_kv, N_q, N_k, d, 2, True, N_k - N_q, 32, 16)
    assert torch.equal(outs["reverse"][0], outs["forward"][0])
    assert torch.equal(outs["reverse"][1], outs["forward"][1])
