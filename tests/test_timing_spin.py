"""The GPU spin of the bench harness hides each call's host enqueue time (iomodel/bench/timing.py):
at least CUDA_SPIN_CYCLES, and at least 2x the measured enqueue seconds + 50 us."""

from __future__ import annotations

import time

import torch

from iomodel.bench import timing


def test_spin_covers_twice_the_enqueue_time(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)  # no GPU here: the host clock alone
    slow = lambda: time.sleep(0.004)  # noqa: E731  a 4 ms enqueue, as a multi-launch training step
    spin = timing.spin_cycles_for(slow, 1_000, 1e9)  # 1 GHz: cycles = seconds x 1e9
    assert 8.05e6 <= spin <= 8.05e6 + 2 * 0.003 * 1e9  # 2 x 4 ms + 50 us, plus sleep jitter
    assert timing.spin_cycles_for(lambda: None, 2_000_000, 1e9) == 2_000_000  # a fast call keeps the least spin


def test_enqueue_seconds_is_the_median_single_call(monkeypatch):
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    calls = iter([0.0, 0.0, 0.002, 0.002, 0.002])
    assert 0.0015 < timing.enqueue_seconds(lambda: time.sleep(next(calls)), calls=5) < 0.006


def test_benchmark_preflight_without_a_gpu_leaves_no_folder(tmp_path, monkeypatch):
    """The GPU benchmark scripts' preflight: no GPU is one IomodelError line, and the output's
    missing folders are not made (nothing is left behind by a refused run)."""
    import pytest

    from iomodel.errors import IomodelError
    from iomodel.measure.ncu import benchmark_preflight

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "new" / "sub" / "x.json"
    with pytest.raises(IomodelError, match="this GPU benchmark has nothing to time"):
        benchmark_preflight(str(out))
    assert not (tmp_path / "new").exists()


def test_benchmark_finish_writes_the_json_or_refuses_in_one_line(tmp_path, capsys):
    import json

    from iomodel.measure.ncu import benchmark_finish

    out = tmp_path / "r.json"
    assert benchmark_finish(str(out), {"rows": [1, 2]}) == 0
    assert json.loads(out.read_text()) == {"rows": [1, 2]}
    assert benchmark_finish(str(tmp_path), {"rows": []}) == 2  # a folder: refused, one line
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
