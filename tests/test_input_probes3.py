"""Bad inputs of the third session's paths, found by a fresh-user probe: each one line (IomodelError)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement
from iomodel.measure.sweep import load_sweep, parse_sweep
from iomodel.paths import read_toml
from iomodel.schedule.launch import load_schedule

RECEIPTS = Path(__file__).resolve().parents[1] / "receipts"


def _edited(name: str, shape: int, path: tuple[str, ...], value) -> dict:
    d = json.loads((RECEIPTS / name).read_text())
    target = d["shapes"][shape]["config"]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return d


@pytest.mark.parametrize("name, shape, path, value, needle", [
    ("ncu-h200-train-split1-2026-12-01.json", 0, ("backward", "group_splits"), None,
     "config.backward.group_splits must be a positive integer, got null"),
    ("ncu-h200-train-split1-2026-12-01.json", 0, ("backward", "group_splits"), "3",
     "config.backward.group_splits must be a positive integer, got the string '3'"),
    ("ncu-h200-train-split1-2026-12-01.json", 0, ("backward", "group_splits"), True,
     "config.backward.group_splits must be a positive integer, got the boolean true"),
    ("ncu-h200-serving1-fused-2026-12-01.json", 0, ("fused_combine",), "false",
     "config.fused_combine must be true or false, got the string 'false'"),
    ("ncu-h200-serving1-fused-2026-12-01.json", 0, ("fused_combine",), 1,
     "config.fused_combine must be true or false, got 1"),
    ("ncu-h200-grid-order1-2026-12-01.json", 1, ("grid_order",), "diagonal",
     'config.grid_order must be "tiles-fastest" or "heads-fastest", got the string \'diagonal\''),
    ("ncu-h200-grid-order1-2026-12-01.json", 0, ("tile_order",), "sideways",
     'config.tile_order must be "forward" or "reverse"'),
])
def test_a_record_with_a_bad_launch_field_is_one_line(name, shape, path, value, needle):
    d = _edited(name, shape, path, value)
    with pytest.raises(IomodelError) as exc:
        Measurement.from_dict(copy.deepcopy(d))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_toml_files_that_cannot_be_read_are_one_line(tmp_path, monkeypatch):
    with pytest.raises(IomodelError, match="sweep file .* is a directory: pass a TOML file"):
        load_sweep(tmp_path)
    bad = tmp_path / "utf16.toml"
    bad.write_bytes(b"\xff\xfen\x00a\x00")
    with pytest.raises(IomodelError, match="is not UTF-8 text: save it as UTF-8"):
        load_sweep(bad)
    good = tmp_path / "s.toml"
    good.write_text('grid_order = "heads-fastest"\n')

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(IomodelError, match=r"schedule file .* cannot be read \(Permission denied\): check its"):
        load_schedule(good)
    with pytest.raises(IomodelError, match="cannot be read"):
        read_toml(good, "x", "fix")


@pytest.mark.parametrize("body, needle", [("block_m = 64.0", "block_m must be a positive whole number, got 64.0"),
                                          ("num_warps = 4.0", "num_warps must be a positive whole number, got 4.0")])
def test_a_schedule_float_is_refused_like_programs_per_sm(tmp_path, body, needle):
    f = tmp_path / "s.toml"
    f.write_text(body + "\n")
    with pytest.raises(IomodelError, match=needle):
        load_schedule(f)


def test_an_empty_list_in_a_sweep_entry_is_one_line_not_zero_shapes():
    shape = {"heads": 4, "kv_heads": 4, "head_dim": 64, "seqlen": 512, "grid_order": []}
    with pytest.raises(IomodelError, match="shape 1 gives an empty list for grid_order: give at least one value"):
        parse_sweep({"shape": [shape]}, "t.toml")
