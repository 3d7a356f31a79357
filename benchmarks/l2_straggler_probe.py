"""GPU probe (issue 12, item 3): do the few programs of a new head in a wave run behind the rest?

The L2 model runs a Q-stationary forward in lock-step waves of W = num_SMs × programs_per_SM
programs. Beyond L2 it over-predicts the DRAM reads of the bundled kernel and of cuDNN
(receipts/ncu-h200-peers-holdout1-2026-12-02.json; docs/l2-calibration.md, "Peer hold-out").
Two leads: (1) *stragglers*: in a wave that ends head h and starts head h+1, the few programs of
h+1 miss L2 on every K/V block while the others hit, so they run longer and the next wave starts
behind them; (2) *placement*: those few programs sit on SMs of one L2 partition.

This probe runs a timing copy of the bundled TMA forward (the same ``kernels.flash_attention``
helpers, tiles, warps and stages; its loads and stores are those of ``_attn_fwd_tma``) that also
writes, per program, ``%smid``, ``%globaltimer`` at its start and at its end. It prints, per
layer: the wave structure (programs of each head per wave), the median duration of programs whose
head was already read by the previous wave ("warm") against those whose head is new ("cold"),
how far into the next wave's start the cold programs end, and the SM ids of the cold programs.
It writes everything (per-program rows included) to ``--out`` as JSON.

Run on the GPU: ``PYTHONPATH=$PWD python3 benchmarks/l2_straggler_probe.py --out $OUT/l2-straggler-h200-<date>.json``.
Units: nanoseconds (``%globaltimer``), SM ids as the hardware numbers them.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

#: Layers probed: (B, H, N, causal), HEAD_DIM 128, bf16, the issue's capacity-edge input first.
LAYERS = [(1, 16, 32768, False), (1, 16, 16384, False), (1, 8, 65536, False), (1, 16, 32768, True)]
BLOCK_M, BLOCK_N, NUM_WARPS, NUM_STAGES = 128, 128, 8, 3


def _kernel():
    import triton
    import triton.language as tl

    from triton.language.extra.cuda import globaltimer, smid

    from kernels.flash_attention import _causal_bounds, _finish_rows, _online_softmax_step, _tma_masked_blocks

    @triton.jit
    def probe(desc_q, desc_k, desc_v, desc_o, LSE, STAMPS, sm_scale, H, N_Q, N_K,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
              REVERSE: tl.constexpr = False):
        t0 = globaltimer()
        pid = tl.program_id(0)
        i = pid
        if REVERSE:  # the query tile: heaviest first in the reverse order
            i = tl.num_programs(0) - 1 - pid
        bh = tl.program_id(1)
        b = bh // H
        h = bh % H
        offs_m = i * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        q = desc_q.load([b, h, i * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
        qk_scale = sm_scale * 1.4426950408889634
        full_end, hi = _causal_bounds(i, N_Q, N_K, 0, BLOCK_M, BLOCK_N, CAUSAL)
        for start_n in tl.range(0, full_end, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            k = desc_k.load([b, h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
            acc, l_i, m_i = _online_softmax_step(acc, l_i, m_i, q, k, v, qk_scale, start_n, offs_m, offs_n, N_K,
                                                 0, False, CAUSAL, "tf32", False)
        acc, l_i, m_i = _tma_masked_blocks(acc, l_i, m_i, q, desc_k, desc_v, b, h, qk_scale, full_end, hi, N_K,
                                           offs_m, offs_n, 0, 0, 0, HEAD_DIM, BLOCK_N, CAUSAL, False, False)
        o, lse = _finish_rows(acc, l_i, m_i)
        desc_o.store([b, h, i * BLOCK_M, 0], o.to(tl.bfloat16).reshape(1, 1, BLOCK_M, HEAD_DIM))
        tl.store(LSE + bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)
        t1 = globaltimer()
        p = (bh * tl.num_programs(0) + pid).to(tl.int64) * 5  # rows in launch order (tile-fastest, then heads)
        tl.store(STAMPS + p, smid().to(tl.int64))
        tl.store(STAMPS + p + 1, t0)
        tl.store(STAMPS + p + 2, t1)
        tl.store(STAMPS + p + 3, bh.to(tl.int64))
        tl.store(STAMPS + p + 4, i.to(tl.int64))

    return probe


def run_layer(probe, B: int, H: int, N: int, causal: bool, runs: int, reverse: bool = False) -> tuple:
    """Launch ``probe`` ``runs`` times on a seeded bf16 layer (B, H, N, HEAD_DIM 128), each from an L2 flushed by
    writing 256 MiB (as ``ncu --cache-control all``); query tiles heaviest first where ``reverse``. Returns
    ``(q, k, v, o, stamps)``: the CUDA tensors and, per run, the ``(programs, 5)`` int64 CPU tensor of SM id, start
    and end (ns, ``%globaltimer``), head and query tile, programs in launch order. Also used by
    ``benchmarks/l2_timing_probe.py``."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    d = 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device="cuda", dtype=torch.float32)
    t_r = -(-N // BLOCK_M)
    stamps = torch.zeros(t_r * B * H, 5, device="cuda", dtype=torch.int64)
    descs = [TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, blk, d])
             for t, blk in ((q, BLOCK_M), (k, BLOCK_N), (v, BLOCK_N), (o, BLOCK_M))]
    flush = torch.empty(256 << 20, device="cuda", dtype=torch.uint8)
    out = []
    for _ in range(runs):  # cold L2 each time, as ncu --cache-control all
        flush.zero_()
        torch.cuda.synchronize()
        probe[(t_r, B * H)](*descs, lse, stamps, d ** -0.5, H, N, N, HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                            CAUSAL=causal, REVERSE=reverse, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
        torch.cuda.synchronize()
        out.append(stamps.cpu())
    return q, k, v, o, out


def _one(layer: tuple[int, int, int, bool], probe, num_sms: int) -> dict:
    import torch

    B, H, N, causal = layer
    d = 128
    q, k, v, o, stamps = run_layer(probe, B, H, N, causal, 3)
    runs = [st.tolist() for st in stamps]
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
    err = (o.float() - ref).abs().max().item()
    rows = runs[-1]
    t_min = min(r[1] for r in rows)
    w = num_sms  # 1 program per SM at these tiles (224 KiB of shared memory)
    waves = []
    for p0 in range(0, len(rows), w):
        wave = rows[p0:p0 + w]
        heads: dict[int, int] = {}
        for r in wave:
            heads[r[3]] = heads.get(r[3], 0) + 1
        waves.append(heads)
    warm, cold, cold_sm, late = [], [], [], []
    seen_prev: set[int] = set()
    for wi, p0 in enumerate(range(0, len(rows), w)):
        wave = rows[p0:p0 + w]
        nxt = rows[p0 + w:p0 + 2 * w]
        nxt_start = min((r[1] for r in nxt), default=None)
        for r in wave:
            (cold if r[3] not in seen_prev and wi > 0 and waves[wi][r[3]] < w // 2 else warm).append(r[2] - r[1])
            if r[3] not in seen_prev and wi > 0 and waves[wi][r[3]] < w // 2:
                cold_sm.append(r[0])
                if nxt_start is not None:
                    late.append(r[2] - nxt_start)
        seen_prev = set(waves[wi])
    return {
        "layer": {"batch": B, "heads": H, "kv_heads": H, "head_dim": d, "seqlen": N, "causal": causal, "dtype": "bf16",
                  "block_m": BLOCK_M, "block_n": BLOCK_N, "num_warps": NUM_WARPS, "num_stages": NUM_STAGES},
        "max_abs_error_vs_fp32": err,
        "waves_heads": [{str(k): v for k, v in wv.items()} for wv in waves],
        "warm_duration_ns_median": statistics.median(warm) if warm else None,
        "cold_duration_ns_median": statistics.median(cold) if cold else None,
        "cold_programs": len(cold),
        "cold_end_after_next_wave_start_ns_median": statistics.median(late) if late else None,
        "cold_smids": sorted(cold_sm),
        "kernel_ns": max(r[2] for r in rows) - t_min,
        "kernel_ns_runs": [max(r[2] for r in rr) - min(r[1] for r in rr) for rr in runs],
        "programs": [[r[0], r[1] - t_min, r[2] - t_min, r[3]] for r in rows],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="Per-program timing of the bundled forward's waves (issue 12).")
    ap.add_argument("--out", type=Path, required=True, help="JSON receipt to write")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from iomodel.errors import IomodelError
    from iomodel.paths import check_output_file, write_text

    try:
        check_output_file(args.out, "--out", "receipt JSON")
    except IomodelError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    import torch

    if not torch.cuda.is_available():
        print("error: this probe needs a CUDA GPU (run it on the H200)", file=sys.stderr)
        sys.exit(2)
    import datetime
    import platform

    import triton

    probe = _kernel()
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {"kind": "l2-straggler-probe", "issue": 12, "command": " ".join(sys.argv),
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(0), "num_sms": num_sms, "torch": torch.__version__,
           "triton": triton.__version__, "python": platform.python_version(), "layers": []}
    for layer in LAYERS:
        r = _one(layer, probe, num_sms)
        out["layers"].append(r)
        print(f"{layer}: err {r['max_abs_error_vs_fp32']:.2e}, kernel {r['kernel_ns'] / 1e3:.0f} us, warm "
              f"{(r['warm_duration_ns_median'] or 0) / 1e3:.1f} us, cold {(r['cold_duration_ns_median'] or 0) / 1e3:.1f} us "
              f"({r['cold_programs']} programs), cold end - next wave start "
              f"{(r['cold_end_after_next_wave_start_ns_median'] or 0) / 1e3:.1f} us; cold SMs {r['cold_smids'][:24]}")
        print("   waves (head: programs):", r["waves_heads"][:6])
    write_text(args.out, json.dumps(out), "--out")  # atomic: nothing half-written
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
