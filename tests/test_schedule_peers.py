"""Peers' launches read from the Nsight Compute record (issue 12, item 5): FlashAttention-2 and cuDNN.

The names, grids and blocks are those of receipts/ncu-h200-peers-calib1-2026-12-01.json (calibration
data: the numbers below were seen when the parser was written; they pin it, they do not validate it).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from iomodel.measure.records import KernelRecord
from iomodel.schedule.peers import peer_launch
from iomodel.spec import LayerSpec
from iomodel.spec.hardware import H200

FA2 = ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, cutlass::bfloat16_t, "
       "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, 0, 0, 0, 0, 1, 1, 0, 0>(pytorch_flash::Flash_fwd_params)")
CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0"
OCC = {"launch__occupancy_limit_blocks": 32.0, "launch__occupancy_limit_registers": 2.0,
       "launch__occupancy_limit_shared_mem": 2.0, "launch__occupancy_limit_warps": 16.0}
PEERS = Path(__file__).resolve().parents[1] / "receipts" / "ncu-h200-peers-calib1-2026-12-01.json"


def test_flash_attention_2_launch_from_its_template_arguments():
    spec = LayerSpec(1, 16, 16, 128, 4096, 4096, "bf16")
    p = peer_launch(FA2, "(32, 1, 16)", "(128, 1, 1)", OCC, spec, H200, KernelRecord(FA2, OCC).programs_per_sm())
    s = p.schedule
    assert p.kernel == "flash-attention-2" and p.programs_per_sm == 2  # the least occupancy limit
    assert (s.block_m, s.block_n, s.num_warps, s.num_stages) == (128, 64, 4, 1)
    assert (s.grid_order, s.tile_order, s.key_order, s.persistent) == ("tiles-fastest", "forward", "descending", None)
    # another HEAD_DIM, or a grid that is not (ceil(N_q / 128), B, H): not this layer's launch
    assert peer_launch(FA2, "(32, 1, 16)", "(128, 1, 1)", OCC, LayerSpec(1, 16, 16, 64, 4096, 4096, "bf16"), H200) is None
    assert peer_launch(FA2, "(33, 1, 16)", "(128, 1, 1)", OCC, spec, H200) is None
    assert peer_launch(FA2, "(32, 1, 16)", "(128, 1, 1)", OCC, LayerSpec(1, 16, 16, 128, 4096, 4096, "bf16",
                                                                          backward=True), H200) is None


def test_cudnn_launch_is_a_strided_persistent_loop_of_128_row_tiles():
    spec = LayerSpec(1, 16, 16, 128, 8192, 8192, "bf16", causal=True)
    p = peer_launch(CUDNN, "(132, 1, 1)", "(384, 1, 1)", {}, spec, H200)
    s = p.schedule
    assert p.kernel == "cudnn" and p.programs_per_sm == 1
    # 384 threads = a producer and two consumer warpgroups of 64 rows: BLOCK_M 128; BLOCK_N 128
    assert (s.block_m, s.block_n, s.persistent, s.grid_order, s.key_order) == (128, 128, "strided", "tiles-fastest",
                                                                             "ascending")
    assert peer_launch(CUDNN, "(100, 1, 1)", "(384, 1, 1)", {}, spec, H200) is None  # not a multiple of the SMs
    assert peer_launch(CUDNN, "(132, 1, 1)", "(128, 1, 1)", {}, spec, H200) is None  # no consumer warpgroup
    assert peer_launch("sm90_xmma_gemm_bf16bf16_bf16f32", "(132, 1, 1)", "(384, 1, 1)", {}, spec, H200) is None


@pytest.fixture(scope="module")
def peers_rec(reconciled_receipt):
    return reconciled_receipt(PEERS.name)


def test_peers_receipt_reconciles_both_backends(peers_rec):
    frac = {(s["impl"], s["which"]): (s["within_rel"], s["within"], s["shapes"]) for s in peers_rec.summary()
            if s["level"] == "HBM"}
    # cuDNN, under the constants before 2026-12-06: reads within 10 % on 11 of 12 (the miss: 32k non-causal, the
    # capacity edge); writes 11 + 1 by the floor. Under the forward's own constants (2026-12-06): reads 12 of 12;
    # writes 11 of 12 (the miss: 4k non-causal, 0.71x)
    assert frac[("sdpa-cudnn", "read")] == (12, 12, 12) and frac[("sdpa-cudnn", "write")] == (11, 11, 12)
    # FlashAttention-2, before 2026-12-06: reads 11 of 12 (the miss: 32k causal, 2.7x); writes 0 of 12 (local-memory
    # traffic). Under the forward's own constants: reads 10 of 12 (32k causal, 2.8x, and B1 H32 KV8 16k non-causal,
    # 1.13x); writes 2 of 12 (the others 1.13-1.38x: the local-memory traffic)
    assert frac[("sdpa-flash", "read")] == (10, 10, 12) and frac[("sdpa-flash", "write")] == (2, 2, 12)
    flash = [r for r in peers_rec.rows if r.impl == "sdpa-flash"]
    assert all(any("local-memory" in n for n in r.notes) for r in flash)
    miss = {r.id: r.level("HBM").ratio_read for r in flash if not r.level("HBM").within("read", 0.10, 0)}
    assert sorted(miss) == ["b1-h16-kv16-d128-bf16-q32768-k32768-tl-sdpa-flash",
                            "b1-h32-kv8-d128-bf16-q16384-k16384-nc-sdpa-flash"]
    assert 2.6 < miss["b1-h16-kv16-d128-bf16-q32768-k32768-tl-sdpa-flash"] < 2.9
    assert round(miss["b1-h32-kv8-d128-bf16-q16384-k16384-nc-sdpa-flash"], 2) == 1.13


HOLDOUT = Path(__file__).resolve().parents[1] / "receipts" / "ncu-h200-peers-holdout1-2026-12-02.json"


def test_peer_holdout_is_what_it_is(reconciled_receipt):
    """The hold-out of issue 12 item 5 (sweeps/h200-peers-holdout1.toml, committed before it was
    measured, after the last change of the model): 40 new shapes by FlashAttention-2, cuDNN and the
    bundled forward (14 beyond L2), and 6 heads-fastest bundled shapes. The bar (>= 95 % within
    +-10 %) is not met; these are its counts, and where it misses. The forward's own constants (2026-12-06) were
    chosen with this receipt seen: the counts under them are calibration since; the validation results are those
    "as measured" (the constants before) in the comments."""
    rec = reconciled_receipt(HOLDOUT.name)
    frac = {(s["impl"], s["which"]): (s["within_rel"], s["within"], s["shapes"]) for s in rec.summary()
            if s["level"] == "HBM"}
    # reads: cuDNN 30/40 and tiled 39/46 before the measured read capacity (2026-12-04), 33 and 42 with it. As
    # measured (the constants before 2026-12-06): cuDNN reads 33, writes 38; FlashAttention-2 reads 34, writes 3;
    # tiled reads 42, writes 40 (43 with the floor). Under the forward's own constants (2026-12-06, calibration since):
    assert frac[("sdpa-cudnn", "read")] == (37, 37, 40) and frac[("sdpa-cudnn", "write")] == (36, 36, 40)
    assert frac[("sdpa-flash", "read")] == (31, 31, 40) and frac[("sdpa-flash", "write")] == (6, 6, 40)
    # since the forward's waves start at each head in the reverse order (iomodel.schedule.grid.row_waves, 2026-12-07)
    # tiled reads 42 (41 before: the causal H4 q65536 run, 0.83x, now 1.03x)
    assert frac[("tiled", "read")] == (42, 42, 46) and frac[("tiled", "write")] == (43, 45, 46)
    beyond = {"q24576", "q32768", "q40000", "q40960", "q49152", "q65536", "q28672", "q98304"}

    def is_beyond(r):
        return any(f"-{q}-" in r.id for q in beyond) and "heads-fastest" not in r.id

    # every read the cuDNN or tiles-fastest bundled prediction misses is beyond L2: as measured (the constants before
    # 2026-12-06) every one over-predicted (0.70-0.89x); under the forward's own constants (2026-12-06) misses on both
    # sides, four over-predicted (0.72-0.91x) and three under-predicted (1.19-1.33x); since row_waves (2026-12-07) the
    # bundled H4 q65536 causal run is within (0.83x before)
    missed = {}
    for r in rec.rows:
        lv = r.level("HBM")
        if r.impl in ("sdpa-cudnn", "tiled") and "heads-fastest" not in r.id and not rec.within(r, "HBM", "read"):
            assert is_beyond(r), r.id
            missed[r.id] = round(lv.ratio_read, 2)
    assert missed == {"b1-h4-kv4-d128-bf16-q65536-k65536-tl-sdpa-cudnn": 0.72,
                      "b1-h16-kv16-d64-fp16-q65536-k65536-nc-tiled": 0.78,
                      "b2-h8-kv8-d128-bf16-q32768-k32768-nc-sdpa-cudnn": 0.91,
                      "b1-h8-kv2-d128-bf16-q40000-k40000-nc-sdpa-cudnn": 1.19,
                      "b1-h8-kv2-d128-bf16-q40000-k40000-nc-tiled": 1.33,
                      "b1-h32-kv8-d128-bf16-q32768-k32768-tl-tiled": 1.19}
    # FlashAttention-2's long causal reads: 1.7-8.9x the prediction (its programs are not in waves); since
    # the measured read capacity (2026-12-04) a fourth, B1 H32 KV8 32k, at 1.12x (under the forward's own constants,
    # 2026-12-06: 1.76-9.9x, and the fourth at 1.26x)
    flash_causal = {r.id: r.level("HBM").ratio_read for r in rec.rows if r.impl == "sdpa-flash" and is_beyond(r)
                    and "-tl-" in r.id and not rec.within(r, "HBM", "read")}
    assert len(flash_causal) == 4 and min(flash_causal.values()) > 1.1 and max(flash_causal.values()) > 8


READCAP_HOLDOUT = "ncu-h200-readcap-holdout1-2026-12-04.json"


def test_read_capacity_holdout_is_what_it_is(reconciled_receipt):
    """The hold-out of the measured read capacity (sweeps/h200-readcap-holdout1.toml, committed at
    5bdeafb, 18:32:22, after the model change 225f2e6 and 41 s before the receipt was created): 24
    forward shapes by cuDNN and the bundled kernel, 18 around or beyond L2 (23 new; B1 H64 KV8 8k causal,
    a within-L2 control, was measured before in ncu-h200-peers-calib1). Writes 48/48; reads 35/48
    (cuDNN 16/24, bundled 19/24; under the model before the change, 30/48: 14 and 16). Issue 12's bar
    (95 %) is not met: every read miss is among the 18 around or beyond L2 and over-predicted (measured
    0.68-0.90x), the six shapes well within L2 are 12/12. That was the validation. Under the forward's own
    constants (2026-12-06, chosen with this receipt seen: calibration since) writes 48/48, reads 42/48 (cuDNN 21/24,
    bundled 21/24); the six read misses are still among the 18 around or beyond L2, on both sides: two over-predicted
    (0.86x, 0.88x), four under-predicted (1.15-1.63x); the six shapes well within L2 are 12/12. Since the forward's
    waves start at each head in the reverse order (iomodel.schedule.grid.row_waves, 2026-12-07) bundled reads 20/24:
    the causal H16 q45056 run, in the capacity edge's band, reads 1.12x (1.10x before) and the causal H32 KV8 q40960
    one 1.14x (1.31x)."""
    rec = reconciled_receipt(READCAP_HOLDOUT)
    frac = {(s["impl"], s["which"]): (s["within"], s["shapes"]) for s in rec.summary() if s["level"] == "HBM"}
    assert frac == {("sdpa-cudnn", "read"): (21, 24), ("sdpa-cudnn", "write"): (24, 24),
                    ("tiled", "read"): (20, 24), ("tiled", "write"): (24, 24)}  # reads 16 and 19 as measured
    new = [r for r in rec.rows if "b1-h64-kv8-d128-bf16-q8192-k8192-tl" not in r.id]  # the one measured before
    assert len(new) == 46 and sum(bool(rec.within(r, "HBM", "read")) for r in new) == 39  # 33 as measured
    within_l2 = ("q6144", "q10240", "q3072", "q12288", "q14336", "q8192")
    missed = {}
    for r in rec.rows:
        ratio = r.level("HBM").ratio_read
        if any(f"-{q}-" in r.id for q in within_l2):
            assert rec.within(r, "HBM", "read"), r.id
        elif not rec.within(r, "HBM", "read"):
            missed[r.id] = round(ratio, 2)  # as measured every one in (0.68, 0.91)
    assert missed == {"b1-h16-kv16-d128-bf16-q36864-k36864-nc-sdpa-cudnn": 0.86,
                      "b1-h12-kv12-d128-bf16-q40960-k40960-nc-sdpa-cudnn": 0.88,
                      "b1-h16-kv16-d128-bf16-q45056-k45056-tl-tiled": 1.12,
                      "b1-h32-kv8-d128-bf16-q40960-k40960-tl-tiled": 1.14,
                      "b1-h40-kv8-d128-bf16-q20480-k20480-tl-tiled": 1.15,
                      "b1-h24-kv8-d128-bf16-q45056-k45056-nc-sdpa-cudnn": 1.63,
                      "b1-h24-kv8-d128-bf16-q45056-k45056-nc-tiled": 1.22}


def test_issue_12_capacity_edge_input(reconciled_receipt):
    """Issue 12 item 3's input: the bundled forward at B 1, H = H_kv = 16, HEAD_DIM 128, bf16, non-causal,
    N = 32768 read 560.5 MiB (629 MiB predicted then, +12 %). The same launch re-measured with pointer
    loads (receipts/ncu-h200-edge-probe1-notma-2026-12-01.json, the kernel's tiles as recorded): 562.6 MiB;
    since the measured read capacity the prediction was 602.3 MiB, within 10 % of both (0.93x). With the
    TMA loads the kernel runs by default (edge-probe1-tma) it read 513.3 MiB: 0.85x, outside. Under the forward's
    own constants (2026-12-06) the prediction is 558.7 MiB: the pointer loads read 1.007x it, the TMA loads 0.919x,
    both within 10 %; the issue's number 1.003x."""
    MiB = 2**20
    for name, measured, ok in (("ncu-h200-edge-probe1-notma-2026-12-01.json", 562.6, True),
                               ("ncu-h200-edge-probe1-tma-2026-12-01.json", 513.3, True)):  # TMA: False before
        rec = reconciled_receipt(name)
        (row,) = [r for r in rec.rows if r.id == "b1-h16-kv16-d128-bf16-q32768-k32768-nc-tiled"]
        hbm = row.level("HBM")
        assert round(hbm.predicted_read / MiB, 1) == 558.7 and round(hbm.measured_read / MiB, 1) == measured
        assert bool(rec.within(row, "HBM", "read")) is ok
    # the issue's number: 0.931x of 602.3 MiB before 2026-12-06, 1.003x of 558.7 MiB since
    assert abs(560.5 * MiB - hbm.predicted_read) <= 0.10 * 560.5 * MiB
