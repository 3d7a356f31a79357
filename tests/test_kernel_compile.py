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


def test_kernels_compile_for_sm90_with_wgmma_and_tma():
    pytest.importorskip("triton.backends.nvidia.driver")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = ("import json; from kernels import compile_check as cc; "
            "print(json.dumps([r.__dict__ for r in cc.run(90, quick=True)]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    every = json.loads(out.stdout.strip().splitlines()[-1])
    reports = {r["kernel"]: r for r in every}
    assert set(reports) == {"_attn_fwd_tma", "_attn_fwd", "_attn_decode", "_attn_decode_combine"}
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
        # the default tiles fit: no register spills, shared memory <= 227 KiB
        assert r["spill_bytes"] == 0, r
        assert r["shared_bytes"] <= 227 * 1024, r
