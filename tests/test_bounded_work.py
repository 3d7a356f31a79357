"""Bounded work: the worksheet's L2-aware estimate does not grow with batch × heads (issue 10).

The simulation visits every program of the prefill grid (B·H·T_r of them); above
L2_ESTIMATE_MAX_PROGRAMS it is not run, and past the fast evaluation's L2_FAST_MAX_ROWS grid rows
(1,024 from 2^17 tokens, more on shorter sequences: fast_max_rows; issue 12 item 4) the estimate is not
computed: the worksheet says why instead of a number.
"""

from __future__ import annotations

import json
import resource
import time

from iomodel.cache.estimate import (L2_ESTIMATE_MAX_PROGRAMS, L2_FAST_MAX_ROW_TOKENS, L2_FAST_MAX_ROWS, fast_max_rows,
                                   not_estimated, simulated_programs)
from iomodel.report.worksheet import make_worksheet
from iomodel.spec.resolve import resolve_layer
from test_cli_errors import run_cli


def test_batch_100000_finishes_in_seconds_with_the_note(capsys):
    """Llama-3-8B at 8,192 tokens, BLOCK_M 128: T_r = 64, B·H·T_r = 100,000 · 32 · 64 = 204,800,000."""
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, ["worksheet", "--batch", "100000"])
    took = time.perf_counter() - t0
    assert code == 0 and err == ""
    assert took < 20  # 102 s at batch 10^4 before the bound
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 200 * 1024  # KiB: under 200 MiB more
    assert ("L2-aware DRAM estimate (iomodel/cache/predict.py): not computed, B·H·T_r = 100,000·32·64 = "
            "204,800,000 programs, above 131,072 (the simulation visits every program: its cost grows with "
            "batch × heads), and B·H = 100,000·32 = 3,200,000 grid rows, above 16,384 (past the simulation's bounds "
            "the fast evaluation's cost grows with the grid rows and their length).") in out


def test_heads_65536_finishes_with_the_note(capsys):
    """65,536 heads, 1 KV head: B·H·T_r = 1 · 65,536 · 64 = 4,194,304 programs."""
    t0 = time.perf_counter()
    code, out, err = run_cli(capsys, ["worksheet", "--heads", "65536", "--kv-heads", "1", "-f", "json"])
    assert code == 0 and err == "" and time.perf_counter() - t0 < 20
    tiled = json.loads(out)["algorithms"]["tiled"]
    assert tiled["l2_aware"] is None
    assert tiled["l2_aware_not_computed"] == (
        "B·H·T_r = 1·65,536·64 = 4,194,304 programs, above 131,072 (the simulation visits every program: "
        "its cost grows with batch × heads), and B·H = 1·65,536 = 65,536 grid rows, above 16,384 (past the "
        "simulation's bounds the fast evaluation's cost grows with the grid rows and their length)")


def test_the_bound_is_on_programs():
    """At the bound the estimate is computed; one program above, it is not."""
    assert L2_ESTIMATE_MAX_PROGRAMS == 2**17
    at = resolve_layer(seqlen=2048, batch=256)  # 256 · 32 · 16 = 131,072 programs
    assert simulated_programs(at.spec, at.tiling) == 131_072 and not_estimated(at.spec, at.tiling) is None
    # a window band is simulated only: past the bound it is not computed (without a window the fast evaluation takes
    # it: test_on_shorter_sequences_the_fast_evaluation_takes_more_rows)
    over = resolve_layer(seqlen=2049, batch=256, window="1024")  # T_r = 17: 256 · 32 · 17 = 139,264
    assert simulated_programs(over.spec, over.tiling) == 139_264
    assert not_estimated(over.spec, over.tiling) == (
        "B·H·T_r = 256·32·17 = 139,264 programs, above 131,072 (the simulation visits every program: its cost grows "
        "with batch × heads), and its window band is simulated block by block (the fast evaluation covers layers "
        "without a window)")
    assert not_estimated(over.spec) is None  # without tiles only the seqlen bound applies
    ws = make_worksheet(resolve_layer(seqlen=512, batch=8))  # small: computed
    assert ws.l2_aware is not None and "l2_aware_not_computed" not in json.loads(ws.to_json())["algorithms"]["tiled"]


def test_past_the_simulation_bounds_the_bound_is_on_grid_rows():
    """Past 2^18 tokens the fast evaluation computes the estimate up to L2_FAST_MAX_ROWS grid rows B·H:
    its cost grows with the rows, not with the length (iomodel/cache/estimate.py)."""
    assert L2_FAST_MAX_ROWS == 1024
    at = resolve_layer(seqlen=2**19, heads=1024, kv_heads=8)
    assert simulated_programs(at.spec, at.tiling) > L2_ESTIMATE_MAX_PROGRAMS and not_estimated(at.spec, at.tiling) is None
    over = resolve_layer(seqlen=2**19, heads=1032, kv_heads=8)
    assert not_estimated(over.spec, over.tiling) == (
        "seqlen above 262,144 (its simulation grows with the square of the length), and B·H = 1·1,032 = 1,032 grid "
        "rows, above 1,024 (past the simulation's bounds the fast evaluation's cost grows with the grid rows and "
        "their length)")


def test_on_shorter_sequences_the_fast_evaluation_takes_more_rows():
    """The row bound is 2^27 grid-row tokens over the length, between 1,024 and 32,768 rows (fast_max_rows): a
    serving prefill of 512 sequences of 8,192 tokens (16,384 rows, 8,388,608 programs) is estimated, one more
    sequence is not; from 2^17 tokens on the bound stays 1,024 rows and below 4,096 tokens 32,768. A causal training
    step of 256 sequences of 16k tokens (8,192 rows, its dK/dV kernel once per wave phase) is estimated."""
    assert L2_FAST_MAX_ROW_TOKENS == 2**27
    assert [fast_max_rows(resolve_layer(seqlen=n).spec) for n in (512, 4096, 8192, 2**16, 2**17, 2**20)] == [
        32768, 32768, 16384, 2048, 1024, 1024]
    assert fast_max_rows(resolve_layer(seqlen=8192, passes="fwd+bwd", causal=False).spec) == 16384
    assert fast_max_rows(resolve_layer(seqlen=8192, passes="fwd+bwd").spec) == 16384  # causal: its dK/dV bound too
    at = resolve_layer(seqlen=8192, batch=512)  # 512 · 32 = 16,384 rows
    assert simulated_programs(at.spec, at.tiling) == 512 * 32 * 64 and not_estimated(at.spec, at.tiling) is None
    over = resolve_layer(seqlen=8192, batch=513)
    assert not_estimated(over.spec, over.tiling).endswith(
        "and B·H = 513·32 = 16,416 grid rows, above 16,384 (past the simulation's bounds the fast evaluation's cost "
        "grows with the grid rows and their length)")
    t0 = time.perf_counter()
    ws = json.loads(make_worksheet(resolve_layer(seqlen=4096, batch=128)).to_json())  # 4,096 rows, past 2^17 programs
    assert time.perf_counter() - t0 < 30  # about 0.3 s idle on the 2-core development machine
    l2 = ws["algorithms"]["tiled"]["l2_aware"]
    assert l2 is not None and l2["read_bytes"] >= 128 * 32 * 4096 * 128 * 2  # at least Q once (bf16)
    train = resolve_layer(seqlen=16384, batch=256, passes="fwd+bwd")  # causal: 8,192 rows of 16k tokens
    assert not_estimated(train.spec, train.tiling) is None
    t0 = time.perf_counter()
    l2 = json.loads(make_worksheet(train).to_json())["algorithms"]["tiled"]["l2_aware"]
    assert time.perf_counter() - t0 < 60  # 0.9 s idle
    dkdv = next(k for k in l2["kernels"] if k["name"] == "_bwd_dkdv")
    assert dkdv["read_bytes"] >= 256 * 32 * 16384 * (2 * 128 * 2 + 8)  # each query row of each head once at least


def test_a_training_steps_refusal_names_its_largest_grid_and_advice_it_can_follow():
    """A reviewer read "16,777,216 programs (per query head)" as a count per head: the refusal now names the kernel
    and its factors (the dK/dV kernel's grid counts a pass per query head), and at batch 1 it does not advise a
    smaller batch. HEAD_DIM 96 keeps the Triton dK/dV launch's 64-key tiles (at 128 the Gluon launch's 128 keys
    halve its grid and the forward's is the largest)."""
    big = resolve_layer(seqlen=16384, batch=2048, head_dim=96, passes="fwd+bwd")
    assert not_estimated(big.spec, big.tiling).startswith(
        "the training step's largest grid, the dK/dV kernel, a pass per query head, B·H·T_c = 2,048·32·256 = "
        "16,777,216 programs, is above 131,072")
    gluon = resolve_layer(seqlen=16384, batch=2048, passes="fwd+bwd")
    assert not_estimated(gluon.spec, gluon.tiling).startswith(
        "the training step's largest grid, the forward B·H·T_r = 2,048·32·128 = 8,388,608 programs, is above 131,072")
    falcon = resolve_layer(heads=71, kv_heads=1, head_dim=64, dtype="bf16", seqlen=262144, passes="fwd+bwd")
    assert not_estimated(falcon.spec, falcon.tiling) is None  # its dK/dV reads are not a prediction: the closed form
    from dataclasses import replace

    tall = replace(falcon.tiling, bwd_block_m=64, bwd_block_n=32)  # BWD_BLOCK_M > BWD_BLOCK_N: no closed form
    why = not_estimated(falcon.spec, tall)
    assert why.startswith("the training step's largest grid, the dK/dV kernel, a pass per query head, B·H·T_c = "
                          "1·71·8,192 = 581,632 programs")
    assert why.endswith("a shorter sequence or fewer heads brings it under)") and "smaller batch" not in why
