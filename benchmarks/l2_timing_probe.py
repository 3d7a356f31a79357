"""GPU probe (issue 12 item 3; calibration): when each program of a long causal forward starts and ends, per query-tile order.

The bundled kernel's long causal forwards in the reverse tile order (its default causal launch) read 0.88-0.92x the
L2 model's DRAM bytes on the H100 tile-order probe (``receipts/ncu-h100-order-probe1-2026-12-07.json``); the
model holds the programs of a wave in step, a CPU simulation of programs taking the next tile as they finish
(``benchmarks/drift_sim.py``, "as freed") reads 11-21 % less than its in-step waves, and the Q and O of a wave were
measured not to be the cause (``receipts/l2-cyclic-h100-2026-12-07.json``). This probe measures the timing itself:
the timing copy of the bundled TMA forward of ``benchmarks/l2_straggler_probe.py`` (the same helpers, 128 x 128
tiles, 8 warps, 3 stages: one program per SM) writes, per program, its SM (``%smid``), its start and end
(``%globaltimer``, ns), its head and its query tile, on the tile-order probe's MHA layers (B 1, H 16, HEAD_DIM 128,
bf16, causal, 65,536 / 98,304 / 132,608 tokens) in both orders and the non-causal control (H 8, 98,304 tokens).
The replay puts the measured timing through the simulator's LRU (below).

Run on the GPU: ``PYTHONPATH=$PWD python3 benchmarks/l2_timing_probe.py --out $OUT/l2-timing-<device>-<date>.json``;
the DRAM bytes of the same kernels, each from a flushed L2, under Nsight Compute: ``ncu --clock-control none
--cache-control all -k regex:probe --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum
--csv --print-units base python3 benchmarks/l2_timing_probe.py --runs 1 --no-check --out $OUT/ncu-side.json``
(the committed CSV's run left out ``--print-units base`` and got bytes all the same).
``python benchmarks/drift_sim.py --stamps FILE --ncu-csv CSV`` replays it at the receipt's device. Units: ns (``%globaltimer``), bytes.
A program's rows are in launch order (query tiles fastest, then heads: the order the hardware dispatches a 2-D grid).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (B, H, N, causal, query-tile order), HEAD_DIM 128, bf16: the H100 tile-order probe's MHA layers and its control.
LAYERS = [(1, 16, 65536, True, "forward"), (1, 16, 65536, True, "reverse"),
          (1, 16, 98304, True, "forward"), (1, 16, 98304, True, "reverse"),
          (1, 16, 132608, True, "forward"), (1, 16, 132608, True, "reverse"),
          (1, 8, 98304, False, "forward")]
#: Query rows of head 0 checked against an fp32 reference per layer (sampled; the whole layer would not fit).
CHECK_ROWS = 128


def _one(layer: tuple, probe, runs: int, check: bool) -> dict:
    import torch

    from l2_straggler_probe import BLOCK_M, BLOCK_N, NUM_STAGES, NUM_WARPS, run_layer

    B, H, N, causal, order = layer
    d = 128
    q, k, v, o, runs_st = run_layer(probe, B, H, N, causal, runs, reverse=order == "reverse")
    spans = [int(st[:, 2].max() - st[:, 1].min()) for st in runs_st]
    err = None
    if check:  # sampled query rows of head 0 against fp32 attention over every key
        rows = torch.randperm(N, generator=torch.Generator().manual_seed(1))[:CHECK_ROWS].cuda()
        s = (q[0, 0, rows].float() @ k[0, 0].float().T) * d ** -0.5
        if causal:
            s = s.masked_fill(torch.arange(N, device="cuda")[None, :] > rows[:, None], float("-inf"))
        ref = torch.softmax(s, dim=-1) @ v[0, 0].float()
        err = (o[0, 0, rows].float() - ref).abs().max().item()
    st = runs_st[-1]
    t_min = int(st[:, 1].min())
    return {
        "layer": {"batch": B, "heads": H, "kv_heads": H, "head_dim": d, "seqlen": N, "causal": causal,
                  "causal_align": "top-left", "dtype": "bf16", "tile_order": order, "block_m": BLOCK_M,
                  "block_n": BLOCK_N, "num_warps": NUM_WARPS, "num_stages": NUM_STAGES},
        "max_abs_error_vs_fp32_sampled": err,
        "kernel_ns_runs": spans,
        "programs": {"smid": st[:, 0].tolist(), "start_ns": (st[:, 1] - t_min).tolist(),
                     "end_ns": (st[:, 2] - t_min).tolist(), "head": st[:, 3].tolist(), "tile": st[:, 4].tolist()},
    }


def main() -> None:
    from iomodel.paths import check_output_file, one_line_parser, write_text
    from iomodel.errors import IomodelError

    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="receipt JSON to write")
    ap.add_argument("--runs", type=int, default=3, help="runs a layer, each from a flushed L2 (the last one's "
                    "stamps are kept; 1 under ncu)")
    ap.add_argument("--no-check", action="store_true", help="skip the sampled fp32 reference")
    args = ap.parse_args()
    if not 1 <= args.runs <= 20:
        ap.error(f"--runs must be from 1 to 20, got {args.runs}")
    try:
        check_output_file(args.out, "--out", "receipt JSON")
    except IomodelError as e:
        ap.error(str(e))
    import torch

    if not torch.cuda.is_available():
        ap.error("this probe needs a CUDA GPU (run it through the device tool)")
    import datetime
    import json
    import platform

    import triton

    from l2_straggler_probe import _kernel

    probe = _kernel()
    out = {"kind": "l2-timing-probe", "issue": 12, "role": "calibration (diagnosis of the reverse order's "
           "over-prediction; not a hold-out)", "command": " ".join(sys.argv),
           "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "device": torch.cuda.get_device_name(0), "num_sms": torch.cuda.get_device_properties(0).multi_processor_count,
           "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version(), "layers": []}
    for layer in LAYERS:
        r = _one(layer, probe, args.runs, not args.no_check)
        out["layers"].append(r)
        err = r["max_abs_error_vs_fp32_sampled"]
        print(f"{layer}: kernel {[round(x / 1e3) for x in r['kernel_ns_runs']]} us"
              + ("" if err is None else f", sampled error {err:.2e}"), flush=True)
    write_text(args.out, json.dumps(out), "--out")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
