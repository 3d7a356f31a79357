"""The tiles-descending dK/dV kernel's DRAM reads against its compulsory bytes (CPU, committed receipts only).

Run: ``python benchmarks/dkdv_descending_floor.py [RECEIPT ...]`` (default: the training hold-outs 9, 10 and 11 on
the H200 and 13 on an H100, all calibration data by now or validation of an earlier model).

For every causal top-left GQA training step whose ``_bwd_dkdv`` launch ran ``tiles-descending``, it prints the
kernel's measured and predicted DRAM reads (single-pass, as ``iomodel reconcile`` reads them) as multiples of the
kernel's compulsory reads: every query row of each head once (Q and dO at the input width, LSE and Delta fp32:
B·H·N_q·(2·d·s + 8) bytes) and K and V once per group slice (S·2·B·H_kv·N_k·d·s bytes), then a summary by S = 1
and S > 1. A diagnostic, not part of the model: it says how far the model's trailing-program re-reads are from
what the GPU does when the slice's rows fit the effective L2 (docs/l2-calibration.md, "The tiles-descending dK/dV
reads sit on the floor").
"""

from __future__ import annotations

import sys
from pathlib import Path

from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile

ROOT = Path(__file__).resolve().parents[1]
RECEIPTS = ("receipts/ncu-h200-train-holdout9-2026-12-05.json", "receipts/ncu-h200-train-holdout10-2026-12-05.json",
            "receipts/ncu-h200-train-holdout11-2026-12-05.json", "receipts/ncu-h100-train-holdout13-2026-12-05.json")


def floor_read_bytes(spec, splits: int) -> int:
    """The dK/dV kernel's compulsory DRAM reads (bytes): the module docstring's count."""
    rows = spec.batch * spec.heads * spec.seqlen_q * (2 * spec.head_dim * spec.width + 8)
    return rows + splits * 2 * spec.batch * spec.kv_heads * spec.seqlen_k * spec.head_dim * spec.width


def steps(paths: list[str], reconciled=None) -> list[tuple[str, object, object, float, float]]:
    """(receipt, spec, tiling, measured / floor, predicted / floor) of each such step; ``reconciled`` (optional) maps
    a receipt's file name to its reconciliation (the tests' cache), else each is reconciled here."""
    out = []
    for p in paths:
        rec = (reconciled(Path(p).name) if reconciled is not None
               else reconcile(Measurement.load(ROOT / p if not Path(p).is_absolute() else p)))
        for r in rec.rows:
            lv = r.level("HBM _bwd_dkdv")
            s, t = r.spec, r.tiling
            if (lv is None or t.bwd_dkdv_order != "tiles-descending" or not s.causal or s.causal_align != "top-left"
                    or s.heads == s.kv_heads or lv.measured_read is None):
                continue
            f = floor_read_bytes(s, t.bwd_group_splits)
            out.append((Path(p).name, s, t, lv.measured_read / f, lv.predicted_read / f))
    return out


def main() -> None:
    rows = steps(sys.argv[1:] or list(RECEIPTS))
    print(f"{'receipt':<44} {'G':>3} {'S':>2} {'B':>2} {'H_kv':>4} {'N':>6} {'d':>4} {'meas/floor':>10} {'pred/floor':>10}")
    for name, s, t, m, p in sorted(rows, key=lambda x: (x[2].bwd_group_splits > 1, x[1].seqlen_q)):
        print(f"{name:<44} {s.heads // s.kv_heads:>3} {t.bwd_group_splits:>2} {s.batch:>2} {s.kv_heads:>4} "
              f"{s.seqlen_q:>6} {s.head_dim:>4} {m:>10.3f} {p:>10.3f}")
    for label, pick in (("S = 1", lambda t: t.bwd_group_splits == 1), ("S > 1", lambda t: t.bwd_group_splits > 1)):
        sel = [(m, p) for _, _, t, m, p in rows if pick(t)]
        if sel:
            ms, ps = [m for m, _ in sel], [p for _, p in sel]
            print(f"{label}: {len(sel)} steps, measured {min(ms):.3f}-{max(ms):.3f} x the floor, "
                  f"predicted {min(ps):.3f}-{max(ps):.3f} x")


if __name__ == "__main__":
    main()
