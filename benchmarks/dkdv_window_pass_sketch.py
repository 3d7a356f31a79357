"""CPU sketch (issue 12, items 3 and 5): the causal dK/dV kernel's measured DRAM reads against one pass per window.

Not the L2 model. On long causal training steps the dK/dV kernel read 0.03-0.10x the model's bytes (lock-step waves,
touch by touch or closed form; docs/l2-calibration.md, "Two hold-outs measured"). This sketch checks a plainer reading
on every committed causal training receipt (``receipts/ncu-h200-*.json``, the measured kernels as they ran): the
dK/dV programs in launch order (key tile fastest, then sequence and KV head, then group slice) in windows of R, the
programs the GPU holds at once (``launch__occupancy_limit_*`` of the record times 132 SMs); each window reads, for each
(KV head, slice) in it and each query head of the slice, the query rows from the window's first query tile (the
smallest lo_j of its key tiles, ``docs/traffic-contract.md``) to N_q once: Q, dO (2·d·s bytes a row), LSE and D
(8 bytes); K and V once per program. The sketch's bytes against the record's ``_bwd_dkdv`` DRAM reads (the
single-pass ``dram__bytes_read.sum``, as ``iomodel reconcile`` reads them; the replayed ``@multipass`` copy is not).

    python benchmarks/dkdv_window_pass_sketch.py                 # every causal training receipt, one row a step
    python benchmarks/dkdv_window_pass_sketch.py --min-tokens 32768

Reading of the output (2026-12-05, calibration data only: every receipt here was measured before this sketch; read
again that day with the single-pass DRAM bytes, which an earlier version did not prefer): within ±10 % on 155 of 260
steps; on the 17 steps from 32k tokens with at most 4 query heads per KV head, measured 0.64-1.67x the sketch (the
model: 0.03-0.10x); but 18x and 11x on the two long steps of 8 query heads per KV head in the heads-outer order, and
4-9x on three 8k-16k steps of G = 4-8, where programs that start a head at different times may drift apart by a
head's rows each head (a hypothesis, not measured). Printed per step: window R, measured,
sketch and compulsory (each row and K/V once) MiB, measured/sketch, measured/compulsory.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

from iomodel.paths import argument_error, one_line_parser

ROOT = Path(__file__).resolve().parents[1]
NUM_SMS = 132  # the H200's (iomodel.spec.hardware.H200), where every receipt read here was measured
WIDTH = {"fp16": 2, "bf16": 2, "fp32": 4}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def window_pass_bytes(spec: dict, bwd: dict, window: int) -> tuple[int, int]:
    """(sketch bytes, compulsory bytes) of one causal step's dK/dV kernel: ``spec`` and ``bwd`` as a record's
    ``spec`` and ``config.backward``; ``window`` programs resident at once."""
    B, H, H_kv, d = spec["batch"], spec["heads"], spec["kv_heads"], spec["head_dim"]
    n_q, n_k, s = spec["seqlen_q"], spec["seqlen_k"], WIDTH[spec["dtype"]]
    G, bm, bn, S = H // H_kv, bwd["block_m"], bwd["block_n"], bwd.get("group_splits", 1)
    off = n_k - n_q if spec.get("causal_align") == "bottom-right" else 0
    row = 2 * d * s + 8
    t_c = cdiv(n_k, bn)
    programs = [(j, bh, sl) for sl in range(S) for bh in range(B * H_kv) for j in range(t_c)]
    total = 2 * B * H_kv * S * n_k * d * s  # K and V, once per program
    for i0 in range(0, len(programs), window):
        first: dict[tuple[int, int], int] = {}
        for j, bh, sl in programs[i0:i0 + window]:
            lo = min(max(j * bn - off, 0) // bm * bm, n_q)
            first[(bh, sl)] = min(first.get((bh, sl), n_q), lo)
        for (_, sl), lo in first.items():
            heads = (sl + 1) * G // S - sl * G // S
            total += heads * (n_q - lo) * row
    return total, B * H * n_q * row + 2 * B * H_kv * n_k * d * s


def causal_dkdv_steps(min_tokens: int = 0, names: list[str] | None = None):
    """The committed causal training steps' dK/dV kernels (``receipts/ncu-h200-*.json``, the repeats of hold-out 4
    left out; without a window; seqlen_k at least ``min_tokens``; receipts whose file name contains one of ``names``
    if given): ``(receipt path, shape, spec, backward config, measured DRAM read bytes, occupancy limit)`` each, the
    limit being the record's programs per SM (``launch__occupancy_limit_*``, the least)."""
    for path in sorted(glob.glob(str(ROOT / "receipts" / "ncu-h200-*.json"))):
        if "repeat" in path or (names and not any(r in path for r in names)):
            continue
        for shape in json.loads(Path(path).read_text()).get("shapes", []):
            spec, bwd = shape["spec"], (shape.get("config") or {}).get("backward")
            if (shape["impl"] != "tiled" or not bwd or not spec.get("causal") or spec.get("window_left") is not None
                    or spec.get("window_right") is not None or spec["seqlen_k"] < min_tokens):
                continue
            kernel = next((k for k in shape["kernels"] if "dkdv" in k["name"] and "reduce" not in k["name"]), None)
            if kernel is None:
                continue
            m = kernel["metrics"]
            measured = m.get("dram__bytes_read.sum")  # the single-pass DRAM bytes, as iomodel reconcile reads them
            limits = [v for k, v in m.items() if k.startswith("launch__occupancy_limit_")]
            if measured is None or not limits:
                continue
            yield path, shape, spec, bwd, measured, int(min(limits))


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--min-tokens", type=int, default=0, help="only steps with seqlen_k at least this (tokens)")
    args = ap.parse_args()
    if args.min_tokens < 0:
        argument_error("--min-tokens must be 0 or more")
    n = within = 0
    for path, shape, spec, bwd, measured, limit in causal_dkdv_steps(args.min_tokens):
        window = limit * NUM_SMS
        sketch, floor = window_pass_bytes(spec, bwd, window)
        n += 1
        within += abs(measured - sketch) <= 0.1 * measured
        print(f"{Path(path).name[9:-5]:34s} {shape['id'][:52]:52s} {bwd.get('dkdv_order', 'heads-outer')[:5]} "
              f"R={window:3d} meas {measured / 2**20:10.1f} sketch {sketch / 2**20:10.1f} "
              f"comp {floor / 2**20:9.1f} meas/sketch {measured / sketch:5.2f} meas/comp {measured / floor:6.2f}")
    print(f"{within}/{n} steps within ±10 % of the sketch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
