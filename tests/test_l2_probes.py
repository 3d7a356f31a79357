"""The 2026-12-02 L2 probes' receipts hold what docs/l2-calibration.md says of them (issue 12, item 3).

``receipts/l2-mixed-h200-2026-12-02.json`` (benchmarks/l2_mixed_microbench.py) and
``receipts/l2-straggler-h200-2026-12-02.json`` (benchmarks/l2_straggler_probe.py) are measured data:
these tests recompute the quantities the docs quote from their raw rows.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import l2_mixed_microbench as mixed  # noqa: E402


def test_use_once_lines_displace_four_fifths_of_a_shared_line():
    rec = json.loads((ROOT / "receipts" / "l2-mixed-h200-2026-12-02.json").read_text())
    assert rec["device"] == "NVIDIA H200" and rec["command"].startswith("python3 benchmarks/l2_mixed_microbench.py")
    rows = mixed.summarise(rec["cases"], rec["measured"])  # recomputed from the raw counters
    halves = mixed.half_points(rows)
    assert {k: round(v, 2) for k, v in halves.items()} == {"none0": 31.13, "read8": 24.36, "read16": 18.21,
                                                          "write8": 24.37, "write16": 17.71}
    for key, blocks in (("read8", 8), ("read16", 16), ("write8", 8), ("write16", 16)):
        p_mib = blocks * rec["num_sms"] * mixed.BLOCK * 4 / 2**20
        w = (halves["none0"] - halves[key]) / p_mib
        assert 0.78 <= w <= 0.83, (key, w)
        assert abs(w - rec["displacement_weights"][key]) < 1e-9


def test_non_causal_programs_run_in_lock_step_and_misses_do_not_slow_them():
    rec = json.loads((ROOT / "receipts" / "l2-straggler-h200-2026-12-02.json").read_text())
    assert rec["device"] == "NVIDIA H200" and rec["num_sms"] == 132
    for layer in rec["layers"]:
        if layer["layer"]["causal"]:
            continue
        progs = layer["programs"]  # [smid, start ns, end ns, bh], program order
        dur = [p[2] - p[1] for p in progs]
        assert max(dur) / min(dur) < 1.1  # 427-445 us at 32k
        assert abs(layer["cold_duration_ns_median"] / layer["warm_duration_ns_median"] - 1) < 0.01
        spread = [max(p[1] for p in progs[i:i + 132]) - min(p[1] for p in progs[i:i + 132])
                  for i in range(0, len(progs), 132)]
        assert statistics.median(spread) < 0.1 * statistics.median(dur)
        assert len(set(layer["cold_smids"])) >= 60  # the new head's programs: spread over the SMs
