"""Hand-computed byte counts of the traffic model (iomodel.traffic).

Every expected number is worked out in the test from first principles (tensor sizes,
tiles visited, the op chain of kernels/baseline.py), never read back from the model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

from iomodel import IomodelError, LayerSpec, Tiling, get_hardware
from iomodel.traffic import build_model, predict, sweep

H200 = get_hardware("H200")


def tensor_bytes(pred, alg, level="HBM"):
    """{tensor: [read, write]} summed over the rows of one algorithm at one level."""
    out: dict[str, list[int]] = {}
    for r in pred.algorithms[alg].rows:
        if r.level == level:
            t = out.setdefault(r.tensor, [0, 0])
            t[0] += r.read_bytes
            t[1] += r.write_bytes
    return out


# --------------------------------------------------------------------------------------
# square, non-causal
# --------------------------------------------------------------------------------------


def test_square_noncausal_tiled_and_baseline():
    # B=2, H=H_kv=4, d=64, N=256, bf16 (2 B); BLOCK_M=128, BLOCK_N=64
    spec = LayerSpec(2, 4, 4, 64, 256, 256, dtype="bf16")
    p = predict(spec, Tiling(128, 64), H200)
    qo = 2 * 4 * 256 * 64 * 2  # Q or O: 262,144 B
    assert qo == 262_144
    T_r = 256 // 128  # 2 query tiles, each reads all of K and V
    t = tensor_bytes(p, "tiled")
    assert t["Q"] == [qo, 0]
    assert t["K"] == [T_r * qo, 0] and t["V"] == [T_r * qo, 0]
    assert t["O"] == [0, qo]
    assert t["LSE"] == [0, 2 * 4 * 256 * 4]
    tiled = p.algorithms["tiled"]
    assert tiled.hbm_read_bytes == qo + 2 * T_r * qo == 1_310_720
    assert tiled.hbm_write_bytes == qo + 8192
    # no-reuse: SRAM_fill rows equal the HBM rows for the bundled kernel
    assert tiled.sram_fill_read_bytes == tiled.hbm_read_bytes
    assert tiled.sram_fill_write_bytes == tiled.hbm_write_bytes

    # baseline: S = QKᵀ (read Q, K; write S), S*scale (r/w S), softmax (r S, w P), P@V (r P, V; w O)
    S = 2 * 4 * 256 * 256 * 2  # 1 MiB
    base = p.algorithms["baseline"]
    assert base.sram_fill_read_bytes is None
    assert base.hbm_read_bytes == (qo + qo) + S + S + (S + qo) == 3_932_160
    assert base.hbm_write_bytes == S + S + S + qo == 3_407_872
    b = tensor_bytes(p, "baseline")
    assert b["S"] == [2 * S, 2 * S] and b["P"] == [S, S]

    assert p.compulsory_bytes == 4 * qo  # Q, K, V read once; O written once
    assert p.flops == 4 * 2 * 4 * 256 * 256 * 64
    assert base.flops == p.flops  # non-causal: the baseline computes the same matmuls
    assert base.bound == "memory"
    assert base.roofline_time_s == pytest.approx(max(base.flops / 989.4e12, (3_932_160 + 3_407_872) / 4.8e12))
    assert base.intensity == pytest.approx(base.flops / (3_932_160 + 3_407_872))


def test_kv_stationary_fa1_algorithm1():
    spec = LayerSpec(2, 4, 4, 64, 256, 256, dtype="bf16")
    qo = 2 * 4 * 256 * 64 * 2
    lm = 2 * 4 * 256 * 4  # ℓ or m, fp32
    # B_r = BLOCK_M = 128, B_c = BLOCK_N = 64: T_c = 4 outer steps, each touching every query row
    p = predict(spec, Tiling(128, 64), H200, kv_blocks="tiling")
    t = tensor_bytes(p, "tiled_kv_stationary")
    T_c = 256 // 64
    assert t["K"] == [qo, 0] and t["V"] == [qo, 0]
    assert t["Q"] == [T_c * qo, 0]
    assert t["O"] == [T_c * qo, qo + T_c * qo]  # init write + read/write per inner step
    assert t["ℓ"] == [T_c * lm, lm + T_c * lm] and t["m"] == t["ℓ"]
    # paper blocks from the H200's 228 KiB: M = 116,736 bf16 elements,
    # B_c = ceil(M/(4d)) = ceil(116736/256) = 456 >= N so T_c = 1
    p = predict(spec, Tiling(128, 64), H200)
    t = tensor_bytes(p, "tiled_kv_stationary")
    assert t["Q"] == [qo, 0] and t["O"] == [qo, 2 * qo]
    # a small SRAM (M = 16 KiB = 8192 bf16 elements): B_c = ceil(8192/256) = 32, T_c = 8
    small = predict(spec, Tiling(16, 16, num_stages=1), H200.__class__(**{**H200.to_dict(), "smem_per_sm": 16384}))
    assert tensor_bytes(small, "tiled_kv_stationary")["Q"] == [8 * qo, 0]


# --------------------------------------------------------------------------------------
# causal, both alignments; partial tiles; seqlen_q != seqlen_k
# --------------------------------------------------------------------------------------


def test_causal_top_left_square_ragged():
    # B=1, H=H_kv=2, d=32, N=100, fp16; BLOCK_M=32, BLOCK_N=16
    spec = LayerSpec(1, 2, 2, 32, 100, 100, dtype="fp16", causal=True)
    p = predict(spec, Tiling(32, 16), H200)
    # tiles rows [0,32) [32,64) [64,96) [96,100): last rows 31, 63, 95, 99 see keys < 32, 64, 96, 100
    # loaded keys: ceil(hi/16)*16 capped at N_k: 32, 64, 96, min(112, 100) = 100
    keys = 32 + 64 + 96 + 100
    assert tensor_bytes(p, "tiled")["K"] == [2 * keys * 32 * 2, 0]
    pairs = 100 * 101 // 2  # exact causal pairs: N(N+1)/2
    assert p.flops == 4 * 1 * 2 * pairs * 32
    assert p.algorithms["tiled"].flops == p.flops
    assert p.algorithms["baseline"].flops == 4 * 2 * 100 * 100 * 32  # eager computes all scores
    # baseline mask ops: ones (w), tril (r/w), ~ (r, w), masked_fill reads ~mask
    m = 100 * 100
    b = tensor_bytes(p, "baseline")
    assert b["mask"] == [m + m, m + m] and b["~mask"] == [m, m]
    assert "P = P.masked_fill" not in {r.step for r in p.algorithms["baseline"].rows}  # no empty rows


def test_causal_bottom_right_more_queries_than_keys():
    # N_q=70 > N_k=20, off = -50: rows 0..49 see no key. B=1, H=1, d=16, fp32; BLOCK_M=32, BLOCK_N=16
    spec = LayerSpec(1, 1, 1, 16, 70, 20, dtype="fp32", causal=True, causal_align="bottom-right")
    p = predict(spec, Tiling(32, 16), H200)
    # tile [0,32): hi = clamp(32-50, 0, 20) = 0 -> 0 keys; [32,64): hi = 14 -> 16 keys;
    # [64,70): hi = 20 -> ceil(20/16)*16 = 32, capped at 20
    keys = 0 + 16 + 20
    t = tensor_bytes(p, "tiled")
    assert t["K"] == [keys * 16 * 4, 0] == t["V"]
    assert t["Q"] == [70 * 16 * 4, 0] and t["O"] == [0, 70 * 16 * 4] and t["LSE"] == [0, 70 * 4]
    # rows m = 50..69 see m - 49 keys: 1 + ... + 20
    assert p.flops == 4 * 16 * sum(range(1, 21))
    # compulsory: only the 20 query rows that see a key are needed; all 20 keys
    comp = {r.tensor: r.read_bytes + r.write_bytes for r in p.compulsory_rows}
    assert comp == {"Q": 20 * 16 * 4, "K": 20 * 16 * 4, "V": 20 * 16 * 4, "O": 70 * 16 * 4}
    # the eager chain fixes the NaN rows with P.masked_fill(inv[:, :1], 0): reads and writes P,
    # reads column 0 of the inverted mask (N_q bytes)
    S = 70 * 20 * 4
    fill = [r for r in p.algorithms["baseline"].rows if r.step.startswith("P = P.masked_fill")]
    assert sorted((r.tensor, r.read_bytes, r.write_bytes) for r in fill) == [("P", S, S), ("~mask", 70, 0)]


def test_causal_bottom_right_fewer_queries_than_keys():
    # N_q=37 < N_k=53, off = 16. B=1, H=2, H_kv=1 (GQA 2), d=16, fp32; BLOCK_M=32, BLOCK_N=16
    spec = LayerSpec(1, 2, 1, 16, 37, 53, dtype="fp32", causal=True, causal_align="bottom-right")
    p = predict(spec, Tiling(32, 16), H200)
    # [0,32): hi = 32+16 = 48 -> 48 keys; [32,37): hi = 53 -> ceil(53/16)*16 = 64, capped at 53
    keys = 48 + 53
    assert tensor_bytes(p, "tiled")["K"] == [2 * keys * 16 * 4, 0]  # both query heads read KV head 0
    # row m sees m + 17 keys: 17..53
    assert p.flops == 4 * 2 * 16 * sum(range(17, 54))


def test_seqlen_q_ne_seqlen_k_partial_tiles_noncausal():
    # N_q=100, N_k=130 (partial tiles in both), B=3, H=H_kv=2, d=8, bf16; BLOCK_M=64, BLOCK_N=32
    spec = LayerSpec(3, 2, 2, 8, 100, 130)
    p = predict(spec, Tiling(64, 32), H200)
    T_r = 2  # rows [0,64), [64,100); every tile loads all 130 keys (masked to < N_k)
    t = tensor_bytes(p, "tiled")
    assert t["K"] == [3 * 2 * T_r * 130 * 8 * 2, 0]
    assert t["Q"] == [3 * 2 * 100 * 8 * 2, 0]
    assert p.flops == 4 * 3 * 2 * 100 * 130 * 8


def test_top_left_causal_fewer_queries_skips_unseen_keys():
    # top-left N_q=20 < N_k=70: keys >= 20 are seen by no row. BLOCK_M=32, BLOCK_N=16
    spec = LayerSpec(1, 1, 1, 16, 20, 70, dtype="fp32", causal=True)
    p = predict(spec, Tiling(32, 16), H200)
    # one tile, hi = min(20, 20) + 0 = 20 -> ceil(20/16)*16 = 32 keys loaded
    assert tensor_bytes(p, "tiled")["K"] == [32 * 16 * 4, 0]
    comp = {r.tensor: r.read_bytes for r in p.compulsory_rows}
    assert comp["K"] == 20 * 16 * 4  # only 20 keys are needed


# --------------------------------------------------------------------------------------
# GQA
# --------------------------------------------------------------------------------------


def test_gqa_tiled_and_baseline():
    # B=1, H=8, H_kv=2 (G=4), d=64, N=128, bf16; BLOCK_M=64, BLOCK_N=32
    spec = LayerSpec(1, 8, 2, 64, 128, 128)
    p = predict(spec, Tiling(64, 32), H200)
    kv = 2 * 128 * 64 * 2  # K of the 2 KV heads: 32,768 B
    # tiled: index mapping, each of 8 query heads reads its KV head's K once per query tile (2)
    assert tensor_bytes(p, "tiled")["K"] == [8 * 2 * 128 * 64 * 2, 0]
    comp = {r.tensor: r.read_bytes for r in p.compulsory_rows}
    assert comp["K"] == kv
    # baseline: repeat_interleave reads K, writes K_rep (8 heads); QKᵀ reads K_rep
    b = tensor_bytes(p, "baseline")
    rep = 8 * 128 * 64 * 2
    assert b["K"] == [kv, 0] and b["K_rep"] == [rep, rep]
    assert b["V"] == [kv, 0] and b["V_rep"] == [rep, rep]


def test_baseline_fp32_scores_math_backend():
    # bf16 inputs, score_dtype fp32: upcast copies of Q, K, V; S, P fp32; O32 cast back
    spec = LayerSpec(1, 1, 1, 8, 4, 4, dtype="bf16")
    p = predict(spec, Tiling(16, 16), H200, score_dtype="fp32")
    e = 4 * 8  # Q elements
    S = 4 * 4 * 4  # fp32 scores
    b = tensor_bytes(p, "baseline")
    assert b["Q"] == [2 * e, 0] and b["Q32"] == [4 * e, 4 * e]  # written by .to, read by matmul
    assert b["S"] == [S + S, S + S] and b["P"] == [S, S]
    assert b["O32"] == [4 * e, 4 * e] and b["O"] == [0, 2 * e]
    assert p.algorithms["baseline"].peak_flops == H200.peak_flops["fp32"]


# --------------------------------------------------------------------------------------
# decode: splits, empty splits, heads_per_program packing
# --------------------------------------------------------------------------------------


def test_decode_split_kv_packed():
    # B=2, H=8, H_kv=2 (G=4), d=128, N_q=1, N_k=1000, bf16, causal bottom-right;
    # BLOCK_N=64, num_splits=4, heads_per_program=4 (one program per KV head per split)
    spec = LayerSpec(2, 8, 2, 128, 1, 1000, causal=True, causal_align="bottom-right", phase="decode")
    p = predict(spec, Tiling(16, 64, num_splits=4, heads_per_program=4), H200)
    t = tensor_bytes(p, "tiled")
    # L = ceil(ceil(1000/4)/64)*64 = 256: splits [0,256) [256,512) [512,768) [768,1000), all 1000 keys seen
    groups = 2 * 8 // 4  # B*H_kv*(G/P) programs per split
    assert t["K"] == [groups * 1000 * 128 * 2, 0] == t["V"]
    assert t["Q"] == [4 * 2 * 8 * 1 * 128 * 2, 0]  # every program of every split loads its rows
    part_o = 4 * 2 * 8 * 1 * 128 * 4  # fp32 partial O per split
    part_l = 4 * 2 * 8 * 1 * 4
    assert t["O_PART"] == [part_o, part_o] and t["LSE_PART"] == [part_l, part_l]
    assert t["O"] == [0, 2 * 8 * 128 * 2] and t["LSE"] == [0, 2 * 8 * 4]


def test_decode_top_left_and_empty_split():
    # top-left causal, N_q=4, N_k=100: hi = 4, one block of 16 keys in split 0 only
    spec = LayerSpec(1, 4, 4, 16, 4, 100, dtype="fp32", causal=True, phase="decode")
    p = predict(spec, Tiling(16, 16, num_splits=3), H200)
    assert tensor_bytes(p, "tiled")["K"] == [4 * 16 * 16 * 4, 0]
    # N_k=50, 5 splits, BLOCK_N=16: L = ceil(10/16)*16 = 16 -> splits 0..3 hold keys, split 4 is empty;
    # Q is still loaded by all 5 splits and all 5 write partials
    spec = LayerSpec(1, 4, 4, 16, 2, 50, dtype="fp32", phase="decode")
    t = tensor_bytes(predict(spec, Tiling(16, 16, num_splits=5), H200), "tiled")
    assert t["Q"] == [5 * 4 * 2 * 16 * 4, 0]
    assert t["K"] == [4 * 50 * 16 * 4, 0]
    assert t["O_PART"][1] == 5 * 4 * 2 * 16 * 4
    # num_splits == 1: O and LSE written directly, no partials
    t = tensor_bytes(predict(spec, Tiling(16, 16, num_splits=1), H200), "tiled")
    assert "O_PART" not in t and t["O"] == [0, 4 * 2 * 16 * 4]


# --------------------------------------------------------------------------------------
# forward + backward
# --------------------------------------------------------------------------------------


def test_fwd_bwd_tiled_separate_and_atomic():
    # B=1, H=H_kv=2, d=32, N=64, fp16, non-causal; forward BLOCK_M=32, BLOCK_N=16; backward dK/dV
    # kernel 32 keys per program, 16 query rows per step; dQ kernel 32 query rows, 16 keys per step
    tiling = Tiling(32, 16, bwd_block_m=16, bwd_block_n=32, dq_block_m=32, dq_block_n=16)
    spec = LayerSpec(1, 2, 2, 32, 64, 64, dtype="fp16", backward=True)
    x = 2 * 64 * 32 * 2  # one (B, H, N, d) fp16 tensor: 8,192 B
    row4 = 2 * 64 * 4  # one (B, H, N) fp32 vector: 512 B
    p = predict(spec, tiling, H200)
    t = tensor_bytes(p, "tiled", "SRAM_fill")
    # forward: Q once, K/V twice (T_r = 2); backward dK/dV pass: K/V once, Q/dO/LSE/Delta once
    # per key block of 32 (2 blocks); dQ pass: Q/dO/LSE/Delta once, K/V twice; preprocess: O, dO
    assert t["Q"] == [x + 2 * x + x, 0]
    assert t["K"] == [2 * x + x + 2 * x, 0] == t["V"]
    assert t["O"] == [x, x]
    assert t["dO"] == [x + 2 * x + x, 0]
    assert t["LSE"] == [2 * row4 + row4, row4]
    assert t["Delta"] == [2 * row4 + row4, row4]
    assert t["dK"] == [0, x] and t["dV"] == [0, x] and t["dQ"] == [0, x]
    pairs_d = 2 * 64 * 64 * 32
    assert p.flops == 4 * pairs_d + 10 * pairs_d  # backward = 2.5x forward
    assert p.algorithms["tiled"].flops == 4 * pairs_d + 14 * pairs_d  # separate pass recomputes S, dP
    # compulsory: fwd Q,K,V,O; bwd Q,K,V,dO read, dQ,dK,dV written
    assert p.compulsory_bytes == 4 * x + 7 * x

    a = tensor_bytes(predict(spec, tiling, H200, dq_mode="atomic"), "tiled", "SRAM_fill")
    acc = 2 * 64 * 32 * 4  # fp32 dQ accumulator
    # zero-init write, RMW per visited (query step, key block): 2 key blocks x all rows, conversion read
    assert a["dQ_acc"] == [2 * acc + acc, acc + 2 * acc]
    assert a["dQ"] == [0, x]
    assert a["K"] == [2 * x + x, 0]  # no second K/V pass


def test_fwd_bwd_baseline_autograd_chain():
    spec = LayerSpec(1, 2, 2, 32, 64, 64, dtype="fp16", backward=True)
    p = predict(spec, Tiling(32, 16), H200)
    x = 2 * 64 * 32 * 2  # Q-sized fp16 tensor
    S = 2 * 64 * 64 * 2  # score-sized fp16 tensor
    fwd_r = (x + x) + S + S + (S + x)  # QKᵀ, scale, softmax, PV
    fwd_w = S + S + S + x
    # dV = Pᵀ dO; dP = dO Vᵀ; T = dP * P (CUDA's softmax backward runs it as its own kernel);
    # softmax_backward(T, P); dS*scale; dK = dSᵀ Q; dQ = dS K
    bwd_r = (S + x) + (x + x) + (S + S) + (S + S) + S + (S + x) + (S + x)
    bwd_w = x + S + S + S + S + x + x
    base = p.algorithms["baseline"]
    assert base.hbm_read_bytes == fwd_r + bwd_r
    assert base.hbm_write_bytes == fwd_w + bwd_w
    assert base.flops == 4 * 2 * 64 * 64 * 32 * 3  # 2 matmuls forward + 4 backward
    # peak, at CUDA's softmax backward: Q, K, V, O, dO and dV (written first) plus 4 score-sized tensors (P, dP,
    # T, dS); dQ and dK are not written yet
    assert base.allocated_bytes == 6 * x + 4 * S


def test_eager_backward_peak_matches_the_h200_to_the_byte():
    """receipts/eager-peak-h200-2026-12-05.json (benchmarks/gpu_eager_peak.py, NVIDIA H200, 2026-12-05): the
    eager chain's forward + backward peak above Q, K, V and dO, measured by torch.cuda.max_memory_allocated after a
    warm-up step, on MHA and GQA, causal and not. The model's allocated bytes less those inputs equal each one."""
    from pathlib import Path

    rec = json.loads((Path(__file__).resolve().parents[1] / "receipts" / "eager-peak-h200-2026-12-05.json").read_text())
    assert rec["device"] == "NVIDIA H200" and len(rec["rows"]) == 4
    for r in rec["rows"]:
        spec = LayerSpec(r["B"], r["H"], r["H_kv"], r["d"], r["N"], r["N"], dtype=r["dtype"], causal=r["causal"],
                         backward=True)
        base = predict(spec, Tiling(64, 64), H200).algorithms["baseline"]
        inputs = sum(a.bytes for a in base.allocations if a.tensor in ("Q", "K", "V", "dO"))
        assert base.allocated_bytes - inputs == r["measured_extra_peak_bytes"], r


def test_eager_backward_peak_where_v_copy_outweighs_two_scores():
    """GQA H 4 on 1, N 16, HEAD_DIM 256, fp16: a score tensor is 4*16*16*2 = 2,048 B, a repeated K or V 32,768 B.
    At the softmax backward dO, K_rep, dV_rep (32,768 B each) and 4 scores (8,192 B) are live, 106,496 B; at P·V's
    backward, as dP is written, dO, K_rep, V_rep, dV_rep and 2 scores: 135,168 B, the peak (excess 28,672 B)."""
    spec = LayerSpec(1, 4, 1, 256, 16, 16, dtype="fp16", backward=True)
    base = predict(spec, Tiling(16, 16), H200).algorithms["baseline"]
    rows = {a.tensor: a.bytes for a in base.allocations}
    assert rows["other steps' excess"] == 28_672 and rows["P, dP, T, dS"] == 8_192
    assert base.allocated_bytes == (32_768 + 8_192 + 8_192 + 32_768) + 135_168


def test_gqa_backward_expand_sum():
    # H=4, H_kv=1: flash-attn style dK/dV per query head then a sum over the group
    spec = LayerSpec(1, 4, 1, 16, 32, 32, dtype="fp32", backward=True)
    t = tensor_bytes(predict(spec, Tiling(32, 32), H200, gqa_bwd="expand_sum"), "tiled", "SRAM_fill")
    kx = 4 * 32 * 16 * 4  # (B, H, N_k, d) fp32
    k = 1 * 32 * 16 * 4
    assert t["dK_exp"] == [kx, kx] and t["dK"] == [0, k]
    t = tensor_bytes(predict(spec, Tiling(32, 32), H200), "tiled", "SRAM_fill")
    assert "dK_exp" not in t and t["dK"] == [0, k]


# --------------------------------------------------------------------------------------
# symbolic form, errors, serialisation
# --------------------------------------------------------------------------------------


def test_expressions_are_symbolic_and_printable():
    spec = LayerSpec(1, 8, 2, 64, 1000, 1000, causal=True, causal_align="bottom-right", backward=True)
    m = build_model(spec, Tiling(64, 32))
    k_row = next(r for r in m.algorithms["tiled"].rows if r.tensor == "K")
    text = sp.sstr(k_row.read_bytes)
    assert "Sum(" in text and "ceiling" in text and "BLOCK_M" in text
    for alg in m.algorithms.values():
        for r in alg.rows:
            assert sp.latex(r.read_bytes) and sp.latex(r.write_bytes)
    assert "\\sum" in sp.latex(k_row.read_bytes)


def test_rows_are_bytes():
    from iomodel.traffic.units import check_row_units

    spec = LayerSpec(1, 8, 2, 64, 300, 500, causal=True, causal_align="bottom-right", backward=True)
    p = predict(spec, Tiling(64, 32), H200, score_dtype="fp32", dq_mode="atomic", dropout=True, with_lse=True)
    for a in p.algorithms.values():
        for r in a.rows:
            res = check_row_units(r.tensor, r.step, r.level, [r.read_expr, r.write_expr], r.width, spec.width)
            assert res.ok, res.message


def test_errors_are_one_line():
    spec = LayerSpec(1, 8, 2, 256, 128, 128, dtype="fp32")
    with pytest.raises(IomodelError, match="shared memory") as exc:
        predict(spec, Tiling(256, 256, num_stages=3), H200)
    assert "\n" not in str(exc.value)
    with pytest.raises(IomodelError, match="power of two"):
        Tiling(96, 64)
    with pytest.raises(IomodelError, match="dq_mode"):
        predict(spec, Tiling(32, 32), H200, dq_mode="sometimes")
    with pytest.raises(IomodelError, match="unknown model option"):
        predict(spec, Tiling(32, 32), H200, scores="fp32")
    dec = LayerSpec(1, 8, 2, 64, 1, 100, phase="decode")
    with pytest.raises(IomodelError, match="heads_per_program"):
        predict(dec, Tiling(16, 32, heads_per_program=3), H200)
    with pytest.raises(IomodelError, match="power of two"):
        sweep(spec, Tiling(32, 32), H200, {"block_m": np.array([32, 48])})
    with pytest.raises(IomodelError, match="cannot vary"):
        sweep(spec, Tiling(32, 32), H200, {"dtype": np.array([1])})


def test_to_dict_is_json():
    spec = LayerSpec(1, 8, 2, 64, 256, 256, causal=True)
    d = predict(spec, Tiling(64, 32), H200).to_dict()
    text = json.dumps(d)
    back = json.loads(text)
    assert set(back["algorithms"]) == {"baseline", "tiled", "tiled_kv_stationary"}
    assert back["algorithms"]["baseline"]["ratio_vs_tiled"] > 1
    row = back["algorithms"]["tiled"]["rows"][1]
    assert {"tensor", "level", "width_bytes", "read_bytes", "read_formula"} <= set(row)


def test_baseline_peak_with_rows_that_see_no_key():
    """Causal bottom-right with N_q > N_k: rows 0 .. N_q − N_k − 1 see no key and the eager chain fixes them with
    P = P.masked_fill(...), out of place: S, the old P and its copy live at once before O exists. A reviewer measured
    the peak on the CPU by tracking every live tensor: 111,233,880 B for this layer (3 scores, no O), where the model
    said 88,481,880 (2 scores + O). Where O outweighs a score the P·V step (2 scores + O) is the peak."""
    spec = LayerSpec(1, 16, 4, 96, 1500, 333, dtype="fp32", causal=True, causal_align="bottom-right")
    base = predict(spec, Tiling(64, 32), H200).algorithms["baseline"]
    q, kv, rep = 16 * 1500 * 96 * 4, 4 * 333 * 96 * 4, 16 * 333 * 96 * 4
    score, mask = 16 * 1500 * 333 * 4, 1500 * 333
    assert base.allocated_bytes == q + 2 * kv + 2 * rep + 3 * score + 2 * mask == 111_233_880
    wide = LayerSpec(1, 2, 2, 256, 40, 4, dtype="fp32", causal=True, causal_align="bottom-right")  # O > a score
    base = predict(wide, Tiling(16, 16), H200).algorithms["baseline"]
    q, kv, score, mask = 2 * 40 * 256 * 4, 2 * 4 * 256 * 4, 2 * 40 * 4 * 4, 40 * 4
    assert base.allocated_bytes == q + 2 * kv + 2 * score + q + 2 * mask
    # a window whose band leaves rows empty adds the (N_q, 1) mask of those rows: 107,602,000 B measured
    win = LayerSpec(1, 8, 1, 96, 2000, 500, dtype="fp32", causal=True, causal_align="bottom-right", window_left=100)
    base = predict(win, Tiling(64, 32), H200).algorithms["baseline"]
    assert base.allocated_bytes == 107_602_000
