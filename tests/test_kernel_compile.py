"""The GPU kernels compile for sm_90 (H100/H200) on this CPU machine, with Hopper instructions.

Triton compiles through its bundled ptxas; ``kernels.compile_check`` stands in a fake CUDA
driver so nothing is loaded or launched. Run in a subprocess because this test session
has TRITON_INTERPRET=1 (set by conftest.py when there is no GPU), under which kernels are
interpreted rather than compiled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _compiled(code: str):
    """Run ``code`` (Python printing one JSON line last) in a child without TRITON_INTERPRET, so the
    kernels compile for sm_90 through the fake driver; returns the parsed last line."""
    pytest.importorskip("triton.backends.nvidia.driver")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kernels_compile_for_sm90_with_wgmma_and_tma():
    code = ("import json; from kernels import compile_check as cc; "
            "print(json.dumps([r.__dict__ for r in cc.run(90, quick=True)]))")
    every = _compiled(code)
    reports = {r["kernel"]: r for r in every}
    assert set(reports) == {"_attn_fwd_tma", "_attn_fwd", "_attn_decode", "_attn_decode_combine", "_bwd_dkdv",
                            "_bwd_dq", "_bwd_dkdv_tma", "_bwd_dq_tma", "_attn_fwd_gluon", "_bwd_dkdv_gluon"}
    # the Gluon prefill: warpgroup MMAs and TMA, 160 KiB of shared memory (Q and a 2-stage K/V ring
    # of 128-row blocks at HEAD_DIM 128, plus its barriers), no spill under setmaxnreg
    gluon = reports["_attn_fwd_gluon"]
    assert gluon["wgmma"] > 0 and gluon["tma"] > 0 and gluon["spill_bytes"] in (0, None), gluon
    assert 160 * 1024 <= gluon["shared_bytes"] < 161 * 1024, gluon
    for name in ("_bwd_dkdv_tma", "_bwd_dq_tma"):  # the GPU's backward for bf16 at HEAD_DIM 128: TMA loads
        assert reports[name]["tma"] > 0 and reports[name]["wgmma"] > 0, name
    # the backward: HEAD_DIM 128 causal with a GQA group of 4 (the loop over the group's heads; it
    # spilled 536 B per thread before the (head, query tile) loop was flattened, issue 11 hold-out)
    assert reports["_bwd_dkdv"]["config"] == dict(head_dim=128, dtype="bf16", causal=True, group=4, block_m=32,
                                                  block_n=64, num_warps=4, num_stages=3)
    assert all(r["ok"] for r in every), [r["error"] for r in every if not r["ok"]]
    # each prefill and decode kernel once without and once with a sliding window (WINDOW=True)
    assert sorted(r["kernel"] for r in every if r["config"].get("window")) == ["_attn_decode", "_attn_fwd",
                                                                              "_attn_fwd_tma"]
    # the ragged-batch variant (VARLEN with seqused_k) of the pointer-path prefill kernel
    assert [r["kernel"] for r in every if r["config"].get("varlen")] == ["_attn_fwd"]
    for r in every:
        if r["kernel"] == "_attn_fwd_tma":
            assert r["wgmma"] > 0 and r["tma"] > 0  # Hopper tensor cores fed by TMA
        if r["kernel"] == "_attn_fwd":
            assert r["wgmma"] > 0 and r["tma"] == 0  # pointer loads
        # the default tiles fit: no register spills (but 8 B causal in the Gluon dK/dV launch, below), shared
        # memory <= 227 KiB
        assert r["kernel"] == "_bwd_dkdv_gluon" or r["spill_bytes"] == 0, r
        assert r["shared_bytes"] <= 227 * 1024, r
    # the Gluon dK/dV launch (HEAD_DIM 128, causal, ragged): warpgroup MMAs and TMA, 160 KiB plus barriers (Q/dO
    # ring and K/V 128 KiB, P and dS of both warpgroups 32 KiB); ptxas keeps 8 B of spill causal, one store and load
    # after the loop (the launch before 2026-12-05 spilled 56-268 B, docs/l2-calibration.md, "The Gluon dK/dV launch")
    dkdv = reports["_bwd_dkdv_gluon"]
    assert dkdv["wgmma"] > 0 and dkdv["tma"] > 0 and 160 * 1024 <= dkdv["shared_bytes"] < 161 * 1024, dkdv
    assert dkdv["spill_bytes"] <= 8, dkdv


def test_backward_dkdv_spills_and_their_sites():
    """HEAD_DIM 128 GQA non-causal compiles without spills (176 B with the nested loops);
    HEAD_DIM 64 causal GQA and non-causal MHA still spill a little: the SASS sites of their
    local-memory instructions add up to ptxas's spill bytes, and every store is outside the loop
    (once per program, so the spills add no per-step L2 writes)."""
    code = ("import json; from kernels import compile_check as cc; from kernels.heuristics import GPU_BACKWARD as G; "
            "cc._install_fake_driver(90); r = []\n"
            "for d, causal, dtype, group in ((128, False, 'fp16', 8), (64, True, 'bf16', 4), (64, False, 'bf16', 1)):\n"
            "    c = G[(d, causal)]\n"
            "    r += cc.compile_backward(d, dtype, causal, group, c.block_m, c.block_n, c.num_warps, c.num_stages)\n"
            "print(json.dumps([x.__dict__ for x in r]))")
    every = _compiled(code)
    assert [r["kernel"] for r in every] == ["_bwd_dkdv", "_bwd_dq"] * 3
    assert all(r["ok"] for r in every), [r["error"] for r in every]
    for r in every[:2] + every[3:4] + every[5:]:
        assert r["spill_bytes"] == 0 and r["local_bytes"] == {}, r
    for r in (every[2], every[4]):
        assert r["kernel"] == "_bwd_dkdv" and r["spill_bytes"] > 0, r
        assert sum(r["local_bytes"].values()) == r["spill_bytes"], r  # ptxas -v against the SASS
        assert [k for k in r["local_bytes"] if k.startswith("store")] == ["store@0"], r


def test_head_dim_256_backward_tiles_do_not_spill_and_the_first_tiles_did():
    """GPU_BACKWARD's HEAD_DIM 256 tiles (TMA kernels, G = 2, sm_90): no register spills; the first,
    untuned tiles (GPU_BACKWARD_FP32's, which fp32 keeps on the pointer path) spilled 132 and 316 B per
    thread inside the dK/dV and dQ loops (hold-out 6's L2 writes)."""
    code = ("import json; from kernels import compile_check as cc; from kernels import heuristics as hx; "
            "d = cc._install_fake_driver(90); out = {}\n"
            "for name, c in (('new', hx.GPU_BACKWARD[(256, True)]), ('first', hx.GPU_BACKWARD_FP32[(256, True)])):\n"
            "    out[name] = [(r.kernel, r.ok, r.spill_bytes, r.shared_bytes) for r in cc.compile_backward_tma("
            "256, 'bf16', True, 2, c.block_m, c.block_n, c.num_warps, c.num_stages, c.dq_block_m, c.dq_block_n, "
            "c.dq_num_warps, c.dq_num_stages)]\n"
            "print(json.dumps(out))")
    got = _compiled(code)
    assert [(k, ok, spill) for k, ok, spill, _ in got["new"]] == [("_bwd_dkdv_tma", True, 0), ("_bwd_dq_tma", True, 0)]
    assert all(smem <= 227 * 1024 for *_, smem in got["new"])
    assert [(k, spill) for k, _, spill, _ in got["first"]] == [("_bwd_dkdv_tma", 132), ("_bwd_dq_tma", 316)]
