"""The L2 microbenchmark receipt (H200, 2026-12-01) and the constants that cite it."""

import json

import pytest

from iomodel.cache.params import DEFAULT_L2_FRACTION, DEFAULT_L2_READ_FRACTION, L2Params
from iomodel.cache.physical import H200_RECEIPT, measured_capacities, pattern_capacity
from iomodel.errors import IomodelError
from iomodel.spec.hardware import H200

MiB = 2**20


def test_receipt_says_what_made_it():
    r = json.loads(H200_RECEIPT.read_text())
    assert r["device"] == "NVIDIA H200" and r["num_sms"] == 132
    assert r["command"].startswith("python3 benchmarks/l2_microbench.py")
    assert r["created"].startswith("2026-12-01")
    assert r["environment"]["l2_bytes"] == H200.l2_bytes == 60 * MiB


def test_half_miss_points():
    caps = measured_capacities()
    # shared-read: 30 MiB -> 0.190, 32 MiB -> 0.739 per pass: 30 + 2 * 0.310 / 0.549 MiB
    assert caps["shared-read"].half_miss_bytes / MiB == pytest.approx(31.13, abs=0.01)
    assert caps["shared-read"].onset_bytes == 28 * MiB and caps["shared-read"].full_bytes == 34 * MiB
    assert caps["private-read"].half_miss_bytes / MiB == pytest.approx(46.74, abs=0.01)
    assert caps["private-write"].half_miss_bytes / MiB == pytest.approx(36.31, abs=0.01)


def test_l2_fraction_is_near_the_shared_read_capacity():
    """DEFAULT_L2_FRACTION (set before any measurement; since 2026-12-04 the written lines' capacity) agrees
    with the microbenchmark's shared-read capacity within 0.05; reads use that capacity itself (below)."""
    shared = measured_capacities()["shared-read"].half_miss_bytes
    assert abs(shared / H200.l2_bytes - DEFAULT_L2_FRACTION) < 0.05


def test_read_fraction_is_the_measured_shared_read_capacity():
    """DEFAULT_L2_READ_FRACTION is the shared-read half-miss point over the H200's L2 (31.13 / 60 MiB),
    to the 4 digits it is written with; L2Params judges reads against it and keeps l2_fraction's capacity."""
    shared = measured_capacities()["shared-read"].half_miss_bytes
    assert abs(shared / H200.l2_bytes - DEFAULT_L2_READ_FRACTION) < 5e-4
    p = L2Params(H200.l2_bytes, H200.num_sms)
    assert p.capacity == 30 * MiB and p.read_capacity == int(60 * MiB * 0.5188) == 32_640_073
    with pytest.raises(IomodelError, match="read_fraction must be in"):
        L2Params(H200.l2_bytes, H200.num_sms, read_fraction=0.0)


def test_corrupt_rows_refused():
    bad = {"summary": [{"pattern": "shared-read", "working_set_bytes": "8", "miss_per_pass": 0.0},
                       {"pattern": "shared-read", "working_set_bytes": 16, "miss_per_pass": 1.0}]}
    with pytest.raises(IomodelError, match="corrupt working_set_bytes"):
        pattern_capacity(bad, "shared-read")
    flat = {"summary": [{"pattern": "shared-read", "working_set_bytes": w, "miss_per_pass": 0.0} for w in (8, 16)]}
    with pytest.raises(IomodelError, match="never crosses 0.5"):
        pattern_capacity(flat, "shared-read")
    with pytest.raises(IomodelError, match="unknown"):
        pattern_capacity(flat, "shared")
