"""Decode tiles the kernel cannot run are refused, by the CLI and by the kernel, with the one rule
of iomodel/schedule/tiles.py (issue 10, "Outputs that do not mislead")."""

from __future__ import annotations

import pytest
import torch

from iomodel.errors import IomodelError
from iomodel.schedule.tiles import decode_block_m_refusal, decode_splits_refusal
from iomodel.spec.resolve import resolve_layer
from kernels.flash_attention import KernelConfig, flash_attention
from test_cli_errors import assert_one_line_error


# Llama-3-8B decode: G = 32 / 8 = 4 heads packed per program (P = 4). With 16 query rows the
# program holds 4 · 16 = 64 rows, so BLOCK_M = next_pow2(max(16, 64)) = 64; one query row: 16.
BLOCK_M_16_AT_16_ROWS = ("decode BLOCK_M must be next_pow2(max(16, P · seqlen_q)) = 64 rows "
                         "(P = 4 heads per program × seqlen_q = 16), got 16: use --block-m 64 or leave it out")
# 1,024 keys at BLOCK_N = 64 are cdiv(1024, 64) = 16 key blocks.
SPLITS_17 = ("num_splits 17 is more than the 16 key blocks of seqlen_k 1,024 at BLOCK_N = 64 (splits past the "
             "last block hold no keys): use --num-splits 16 or fewer")


@pytest.mark.parametrize("argv, line", [
    (["--phase", "decode", "--seqlen-q", "16", "--block-m", "16"], BLOCK_M_16_AT_16_ROWS),
    (["--phase", "decode", "--block-m", "64"],
     "decode BLOCK_M must be next_pow2(max(16, P · seqlen_q)) = 16 rows (P = 4 heads per program × seqlen_q = 1), "
     "got 64: use --block-m 16 or leave it out"),
    (["--phase", "decode", "--seqlen", "1024", "--block-n", "64", "--num-splits", "17"], SPLITS_17),
])
def test_cli_refuses_decode_tiles_in_one_line(capsys, argv, line):
    for cmd in ("worksheet", "plot"):
        assert assert_one_line_error(capsys, [cmd, *argv]) == f"error: {line}"


def test_tiles_at_the_limits_are_accepted():
    lay = resolve_layer(phase="decode", seqlen_q=16, block_m=64)
    assert (lay.tiling.block_m, lay.tiling.heads_per_program) == (64, 4)
    lay = resolve_layer(phase="decode", seqlen=1024, block_n=64, num_splits=16)  # one key block per split
    assert lay.tiling.num_splits == 16
    assert decode_splits_refusal(16, 1024, 64) is None and decode_splits_refusal(17, 1025, 64) is None  # 17 blocks


def test_kernel_refuses_the_same_block_m_in_the_interpreter():
    """The kernel reads the same rule: 4 heads of one KV head (G = 4, P = 4) × 16 query rows = 64 rows."""
    q = torch.zeros(1, 4, 16, 32)
    k = v = torch.zeros(1, 1, 64, 32)
    bad = KernelConfig(16, 16, 4, 1, "decode-split-kv", num_splits=1, heads_per_program=4)
    with pytest.raises(IomodelError) as info:
        flash_attention(q, k, v, config=bad)
    assert str(info.value) == decode_block_m_refusal(16, 4, 16)
    assert str(info.value) == ("decode BLOCK_M must be next_pow2(max(16, P · seqlen_q)) = 64 rows (P = 4 heads per "
                               "program × seqlen_q = 16), got 16: set config.block_m=64")
    o, lse = flash_attention(q, k, v, config=KernelConfig(64, 16, 4, 1, "decode-split-kv", num_splits=1,
                                                          heads_per_program=4))
    assert o.shape == (1, 4, 16, 32) and lse.shape == (1, 4, 16)
