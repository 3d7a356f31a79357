"""The model's waves against programs dispatched as they free: K/V DRAM reads of long causal forwards in the reverse order.

Run: ``python benchmarks/row_waves_sim.py [--quick]`` (CPU, about 2 minutes on the 2-core development machine; ``--quick``
the first six layers). For each layer it prints the DRAM reads of Q, K and V (GB, 1e9 bytes) that
``benchmarks/drift_sim.py``'s LRU of whole K/V blocks at the device's measured read capacity gives under three
timings of the same programs (one time unit a key block, Q and O tiles displacing K/V at the device's forward
constants, ``FORWARD_L2``'s Q and written-byte weights):

* ``in-step``: waves of W consecutive programs of the whole grid, each starting once the previous wave's longest
  program is done (the L2 model's waves before 2026-12-07's change);
* ``rows``: the same, but each head's waves start at its first tile (the model's waves where
  :func:`iomodel.schedule.grid.row_waves` holds: causal, mask offset 0, reverse order, tiles-fastest, T_r >= W);
* ``as-freed``: each program starts when one ends (a GPU's dispatch of a non-persistent grid; on the H100 the
  bundled kernel's measured program times replay within 2 % of its measured reads in the reverse order,
  ``receipts/l2-timing-h100-2026-12-07.json``, docs/l2-calibration.md "Long causal forwards: the measured timing").

Then the largest deviation of ``in-step`` and of ``rows`` from ``as-freed`` over the layers where ``row_waves``
holds, and, for the record, the layers where it does not (non-causal, a bottom-right chunk under a longer cache,
fewer tiles a head than W) with the three timings, where ``rows`` is not the model's and is not claimed.
A diagnosis of the model's wave timing, not a measurement; units GB. Raises nothing (fixed layers).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from drift_sim import _model_timing, replay, timed_programs  # noqa: E402
from iomodel.paths import one_line_parser  # noqa: E402

#: (preset, heads, kv_heads, N_q, N_k, HEAD_DIM, causal, BLOCK_M, BLOCK_N, W): square causal layers first (the rule's
#: own), then the controls. The heads table of docs/l2-calibration.md ("Where the two timings part"), the committed
#: receipts' long causal layers, a scan of lengths at HEAD_DIM 128 (W 132), another W. The simulation is scale-free:
#: BLOCK_N 64 reads as BLOCK_N 128, and HEAD_DIM 64 at W 264 as HEAD_DIM 128 at W 132 and half the tokens (the same
#: numbers), so no such layer is listed twice.
LAYERS = [
    ("H100", 1, 1, 65536, 65536, 128, True, 128, 128, 132),
    ("H100", 2, 2, 65536, 65536, 128, True, 128, 128, 132),
    ("H100", 16, 16, 65536, 65536, 128, True, 128, 128, 132),
    ("H100", 16, 16, 98304, 98304, 128, True, 128, 128, 132),
    ("H100", 16, 2, 103424, 103424, 128, True, 128, 128, 132),
    ("H200", 32, 8, 61952, 61952, 128, True, 128, 128, 132),
    ("H100", 1, 1, 98304, 98304, 128, True, 128, 128, 132),
    ("H100", 16, 16, 132608, 132608, 128, True, 128, 128, 132),
    ("H100", 16, 2, 86016, 86016, 128, True, 128, 128, 132),
    ("H100", 16, 4, 131072, 131072, 128, True, 128, 128, 132),
    ("H100", 16, 16, 40960, 40960, 128, True, 128, 128, 132),
    ("H100", 32, 8, 51200, 51200, 128, True, 128, 128, 132),
    ("H200", 16, 16, 132608, 132608, 128, True, 128, 128, 132),
    ("H200", 16, 2, 103424, 103424, 128, True, 128, 128, 132),
    ("H200", 4, 4, 196608, 196608, 128, True, 128, 128, 132),
    ("H200", 16, 16, 45568, 45568, 128, True, 128, 128, 132),
    ("H100", 16, 16, 98304, 98304, 128, True, 128, 128, 66),
    ("H100", 2, 2, 262144, 262144, 128, True, 128, 128, 132),
] + [("H100", 8 if t_r < 512 else 4, 8 if t_r < 512 else 4, t_r * 128, t_r * 128, 128, True, 128, 128, 132)
     for t_r in (256, 320, 384, 448, 512, 640, 768, 1024)] + [
    # controls: row_waves does not hold
    ("H100", 8, 8, 98304, 98304, 128, False, 128, 128, 132),
    ("H200", 16, 16, 32768, 132608, 128, True, 128, 128, 132),
    ("H200", 16, 16, 16384, 132608, 128, True, 128, 128, 132),
    ("H100", 16, 16, 4096, 65536, 128, True, 128, 128, 132),
]


def main() -> None:
    ap = one_line_parser(__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first six layers only")
    a = ap.parse_args()
    from iomodel.cache.params import L2Params, forward_l2_of
    from iomodel.spec.hardware import get_hardware

    layers = LAYERS[:6] if a.quick else LAYERS
    worst = {"in-step": 0.0, "rows": 0.0}
    held = 0
    print("every layer in the reverse tile order (heaviest causal tiles first); DRAM reads of Q, K and V through the "
          "simulator's LRU of whole K/V blocks (not the model's set-associative estimate)")
    print("preset  H  H_kv     N_q     N_k   d causal BM  BN   W | in-step    rows  as-freed (GB) | in-step/as-freed "
          "rows/as-freed | row_waves")
    for preset, h, hk, n_q, n_k, d, causal, bm, bn, w in layers:
        hw = get_hardware(preset)
        cap = L2Params.of(hw, 1).for_forward().read_capacity
        fwd = forward_l2_of(hw)
        layer = {"heads": h, "kv_heads": hk, "seqlen": n_k, "seqlen_q": n_q, "head_dim": d, "causal": causal,
                 "block_m": bm, "block_n": bn, "width": 2, "tile_order": "reverse"}
        got = {t: replay(layer, timed_programs(layer, w, t), cap, fwd.q_share, fwd.write_share)[0] / 1e9
               for t in ("in-step", "rows", "as-freed")}
        rule = _model_timing(layer, w) == "rows"  # iomodel.schedule.grid.row_waves holds
        r_in, r_rows = got["in-step"] / got["as-freed"], got["rows"] / got["as-freed"]
        if rule:
            held += 1
            worst["in-step"] = max(worst["in-step"], abs(r_in - 1))
            worst["rows"] = max(worst["rows"], abs(r_rows - 1))
        print(f"{preset:5s} {h:3d} {hk:4d} {n_q:7d} {n_k:7d} {d:3d} {'yes' if causal else 'no':6s} {bm:3d} {bn:3d} {w:3d} | "
              f"{got['in-step']:7.3f} {got['rows']:7.3f} {got['as-freed']:8.3f}      | {r_in:16.3f} {r_rows:13.3f} | "
              f"{'holds' if rule else 'not the model'}", flush=True)
    print(f"over the {held} layers where row_waves holds: in-step within {100 * worst['in-step']:.1f} % of as-freed, "
          f"rows within {100 * worst['rows']:.1f} %")


if __name__ == "__main__":
    main()
