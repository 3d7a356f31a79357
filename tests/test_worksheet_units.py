"""The units check (sympy.physics.units) and the human formatting of bytes and FLOPs."""

from __future__ import annotations

import pytest
import sympy as sp

from iomodel.traffic.base import SYM
from iomodel.format import fmt_bytes, fmt_flops, fmt_int, fmt_seconds, fmt_tokens, human_bytes, human_si
from iomodel.traffic.units import check_row_units

B, H, H_kv, d, N_q, N_k, s, M = SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s, SYM.M
BM, BN = SYM.BLOCK_M, SYM.BLOCK_N


def ok(exprs, width=2, spec_width=2):
    return check_row_units("T", "step", "HBM", exprs, width, spec_width)


@pytest.mark.parametrize(
    "expr, width",
    [
        (B * H * N_q * d * s, 2),  # Q read once
        (4 * B * H * N_q * N_k, 4),  # fp32 scores
        (N_q * N_k, 1),  # 1-byte causal mask
        (sp.ceiling(N_q / BM) * sp.Min(N_k, sp.ceiling(N_k / BN) * BN) * B * H_kv * d * s, 2),  # K per query tile
        (sp.ceiling(N_k / sp.ceiling(M / (4 * d * s))) * B * H * N_q * d * s, 2),  # FA-1, M in bytes
        (sp.Piecewise((B * N_q * d * s, N_q > BM), (0, True)), 2),
        (sp.Integer(0), 4),
        # FlashAttention-1 running row sums (fp32) re-read once per K/V block of ceil((M/s)/(4d)) keys
        (4 * B * H * N_q * sp.ceiling(N_k / sp.ceiling(sp.floor(M / s) / (4 * d))), 4),
    ],
)
def test_rows_that_reduce_to_bytes(expr, width):
    r = ok([expr], width)
    assert r.ok and r.message == "bytes"


def test_tile_sum_functions_are_counts():
    from iomodel.traffic.sums import QTileKeyRows

    expr = B * H_kv * d * s * QTileKeyRows(N_q, N_k, BM, BN, N_k - N_q)
    assert ok([expr]).ok


@pytest.mark.parametrize(
    "expr, width, spec_width, reason",
    [
        (B * N_q * d * s + 4 * B * N_q, 2, 2, "mixes"),  # bytes + elements
        (B * N_q * s**2, 2, 2, "information**2"),  # bytes squared
        (B * N_q * N_k * s, 4, 2, "dtype is 4 B wide"),
        (sp.ceiling(N_q / (s * d)) * N_q * d * s, 2, 2, "dimensional argument"),  # an fp32 row written with s
        (sp.ceiling(N_k / sp.ceiling(M / (4 * d))) * N_q * d * s, 2, 2, "dimensional argument"),  # M/(4d) in bytes
        (sp.Min(N_k * s, N_q), 2, 2, "Min mixes"),
    ],
)
def test_rows_that_do_not_reduce_to_bytes(expr, width, spec_width, reason):
    r = ok([expr], width, spec_width)
    assert not r.ok
    assert reason in r.message


def test_read_and_write_both_checked():
    assert ok([B * N_q * d * s, B * N_q * d * s**2]).ok is False  # the write formula is bytes squared
    assert ok([B * N_q * d * s, B * H * N_q * d * s]).ok


def test_formatting():
    assert fmt_bytes(2**30) == "1,073,741,824 B (1 GiB)"
    assert fmt_bytes(1536) == "1,536 B (1.5 KiB)"
    assert fmt_bytes(1000) == "1,000 B"
    assert fmt_bytes(0) == "0 B"
    assert human_bytes(3 * 2**20) == "3 MiB"
    assert human_bytes(2**20 * 999.9) == "1,000 MiB"
    assert fmt_flops(68_719_476_736) == "68,719,476,736 (68.7 GFLOP)"
    assert human_si(4.8e12, "B/s") == "4.8 TB/s"
    assert fmt_int(12345.5) == "1.235e+04"
    assert fmt_int(7.0) == "7"
    assert fmt_seconds(1.5e-5) == "15 µs" and fmt_seconds(2.5e-3) == "2.5 ms" and fmt_seconds(3) == "3 s"
    assert fmt_tokens(8192) == "8k" and fmt_tokens(131072) == "128k" and fmt_tokens(1000) == "1,000"


def test_human_bytes_reaches_exbibytes():
    """A fresh probe printed 12,215,972 PiB: binary prefixes go up to EiB (2^60 B)."""
    assert human_bytes(3 * 2**50) == "3 PiB"
    assert human_bytes(5 * 2**60) == "5 EiB"
    assert human_bytes(12_215_972 * 2**50) == "11,930 EiB"
