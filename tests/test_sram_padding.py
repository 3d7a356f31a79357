"""Shared memory of a program at a HEAD_DIM that is not a power of two: the kernel's tiles are
HEAD_DIM_PAD = max(16, next_pow2(d)) columns wide (``tl.arange(0, HEAD_DIM_PAD)``), so the model's
SRAM figure, the fit checks (one layer and ``sweep``) and the estimated programs per SM use the
padded width (a fresh user's report, 2026-12-03: HEAD_DIM 200 with 128x64 tiles and 3 stages was
said to fit in 200 KiB)."""

from __future__ import annotations

import pytest

from test_cli_errors import run_cli
from iomodel.cache.estimate import launch_params
from iomodel.errors import IomodelError
from iomodel.spec.hardware import H200
from iomodel.traffic.model import sweep
from iomodel.schedule.grid import dkdv_program_sram_bytes, dq_program_sram_bytes
from iomodel.spec import Tiling
from iomodel.spec.resolve import resolve_layer


def _spec(d):
    return resolve_layer(preset="llama-3-8b", head_dim=d).spec


def test_forward_sram_counts_the_padded_columns():
    t = Tiling(block_m=128, block_n=64, num_stages=3)
    # by hand, bf16: (BLOCK_M + 2 * num_stages * BLOCK_N) * d_pad * 2 bytes
    assert t.sram_bytes(_spec(80)) == (128 + 2 * 3 * 64) * 128 * 2 == 131072
    assert t.sram_bytes(_spec(128)) == 131072  # the same tiles at the padded width
    assert t.sram_bytes(_spec(64)) == (128 + 2 * 3 * 64) * 64 * 2 == 65536  # a power of two: unpadded
    assert Tiling(block_m=64, block_n=64, num_stages=2).sram_bytes(_spec(8)) == (64 + 4 * 64) * 16 * 2  # at least 16


def test_backward_sram_counts_the_padded_columns():
    t = Tiling(block_m=64, block_n=64, bwd_block_m=32, bwd_block_n=128, dq_block_m=128, dq_block_n=64)
    # dK/dV: K and V (BWD_BLOCK_N, d_pad) stay, num_stages Q and dO (BWD_BLOCK_M, d_pad) stream
    assert dkdv_program_sram_bytes(_spec(96), t, 3) == (2 * 128 + 2 * 3 * 32) * 128 * 2
    # dQ: Q and dO (DQ_BLOCK_M, d_pad), num_stages K and V (DQ_BLOCK_N, d_pad)
    assert dq_program_sram_bytes(_spec(96), t, 2) == (2 * 128 + 2 * 2 * 64) * 128 * 2


def test_tiles_that_fit_only_unpadded_are_refused(capsys):
    code, out, err = run_cli(capsys, ["worksheet", "--head-dim", "200", "--block-m", "128", "--block-n", "64",
                                      "--num-stages", "3"])
    assert code == 2 and out == ""
    assert "need 262144 B of shared memory for HEAD_DIM=200 bf16 (padded to 256 columns, as the kernel holds it)" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    code, out, err = run_cli(capsys, ["worksheet", "--head-dim", "80", "--block-m", "128", "--block-n", "64",
                                      "--num-stages", "3"])
    assert code == 0, err
    assert ("| SRAM per program | 131,072 B (128 KiB) of 232,448 B (227 KiB) shared memory per block (Q tile + "
            "num_stages K and V tiles, 128 columns wide: the kernel pads HEAD_DIM 80 to a power of two) |") in out


def test_programs_per_sm_from_the_padded_tiles():
    """HEAD_DIM 80, 128x64 tiles, 3 stages, 4 warps: 131,072 B a program (padded), so one program in the
    H200's 233,472 B per SM; the unpadded 81,920 B would have said two."""
    assert H200.smem_per_sm == 233472
    assert launch_params(_spec(80), Tiling(block_m=128, block_n=64, num_stages=3), H200, 4).programs_per_sm == 1
    assert launch_params(_spec(64), Tiling(block_m=128, block_n=64, num_stages=3), H200, 4).programs_per_sm == 3


def test_sweep_refuses_a_head_dim_whose_padded_tiles_do_not_fit():
    spec, t = _spec(128), Tiling(block_m=128, block_n=64, num_stages=3)
    sweep(spec, t, H200, {"head_dim": [96, 128]})  # both pad to 128: 131,072 B, fits
    with pytest.raises(IomodelError, match=r"need 262144 B of shared memory at HEAD_DIM=200 \(padded to 256 columns"):
        sweep(spec, t, H200, {"head_dim": [128, 200]})
