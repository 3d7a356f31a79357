"""Issue 10, "reconcile integrity": damaged measurement records and benchmark receipts.

A corrupt value (a string, a boolean, a negative or non-finite number, the wrong container)
is refused on load with one line naming the shape and the field (exit 2 on the CLI); a
metric the run collected but a shape lacks (``null`` or absent) counts as not reconciled,
keeps the summary's denominator and is listed with the metric and kernel. The inputs are
the committed receipts with one value changed.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

import iomodel.jsonvalues as jv

from iomodel.bench.receipt import check_receipt, load_receipt
from iomodel.cli import main
from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement
from iomodel.reconcile import reconcile
from iomodel.report.reconcile_md import markdown, summary_rows, table_rows

RECEIPTS = Path(__file__).resolve().parent.parent / "receipts"
#: The acceptance receipt: 31 bundled-kernel shapes, all within at HBM read (pinned in test_reconcile_receipts).
HOLDOUT = RECEIPTS / "ncu-h200-holdout4-flush-2026-11-29.json"
FIRST = "b1-h16-kv16-d128-bf16-q512-k512-nc-tiled"  # the receipt's first shape, one kernel
DRAM_READ = "dram__bytes_read.sum"


@pytest.fixture(scope="module")
def raw() -> dict:
    return json.loads(HOLDOUT.read_text())


def _write(tmp_path: Path, data: dict, name: str = "r.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _first_kernel_metrics(data: dict) -> dict:
    shape = data["shapes"][0]
    assert shape["id"] == FIRST and len(shape["kernels"]) == 1
    return shape["kernels"][0]["metrics"]


def _one_line(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 2, (out.out, out.err)
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.out + out.err, out.err
    return lines[0]


# ---------------------------------------------------------------- corrupt values are refused


@pytest.mark.parametrize("value, shown", [
    ("6326272", "the string '6326272'"),  # the input: DRAM bytes as a string
    (-6291456.0, "-6291456.0"),  # printed as "-6.0 MiB" before
    (float("nan"), "nan (not a finite number)"),  # printed as "nan B" before
    (float("inf"), "inf (not a finite number)"),
    (True, "the boolean true"),
    ([6326272], "a JSON array"),
    ({"value": 6326272}, "a JSON object"),
])
def test_a_corrupt_dram_value_is_one_line_naming_shape_and_field(capsys, tmp_path, raw, value, shown):
    data = copy.deepcopy(raw)
    _first_kernel_metrics(data)[DRAM_READ] = value
    path = _write(tmp_path, data)
    line = _one_line(capsys, ["reconcile", str(path)])
    assert line == (f"error: measurement file {str(path)!r}, shape {FIRST}: kernels[0].metrics['{DRAM_READ}'] must be "
                    f"a finite number, 0 or more (or null where ncu printed n/a), got {shown}: regenerate the record "
                    "with iomodel validate, or correct that value")


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["shapes"][0].__setitem__("kernels", {"0": {}}), f"shape {FIRST}: kernels must be a JSON array"),
    (lambda d: d["shapes"][0]["kernels"][0].__setitem__("metrics", [1, 2]),
     f"shape {FIRST}: kernels[0].metrics must be a JSON object, got a JSON array"),
    (lambda d: d["shapes"][0]["kernels"][0]["units"].__setitem__(DRAM_READ, "furlong"),
     f"shape {FIRST}: kernels[0].units['{DRAM_READ}'] is 'furlong', a unit iomodel does not know"),
    (lambda d: d["shapes"][0]["spec"].__setitem__("seqlen_q", "512"),
     f"shape {FIRST}: spec.seqlen_q must be a positive integer, got the string '512'"),
    (lambda d: d["shapes"][0]["spec"].__setitem__("causal", "no"),
     f"shape {FIRST}: spec.causal must be true or false, got the string 'no'"),
    (lambda d: d["shapes"][0]["config"].__setitem__("block_m", 0),
     f"shape {FIRST}: config.block_m must be a positive integer, got 0"),
    (lambda d: d["shapes"][0]["config"].__setitem__("num_splits", 1.5),
     f"shape {FIRST}: config.num_splits must be a positive integer, got 1.5"),
    (lambda d: d["shapes"][0].__setitem__("impl", "cublas"), f"shape {FIRST}: impl 'cublas' is not one iomodel measures"),
    (lambda d: d["shapes"].__setitem__(1, copy.deepcopy(d["shapes"][0])), f"shape id {FIRST!r} appears twice"),
    (lambda d: d["shapes"][2].pop("id"), "shape shapes[2] has no 'id' field"),
    (lambda d: d["hardware"].__setitem__("l2_bytes", "60 MiB"), "hardware.l2_bytes must be a positive number"),
    (lambda d: d["settings"]["l2_model"].__setitem__("l2_fraction", 2), "settings.l2_model.l2_fraction must be a "
                                                                         "number in (0, 1], got 2"),
    (lambda d: d.__setitem__("shapes", {"a": 1}), "shapes must be a JSON array, got a JSON object"),
    # a helper's audit of the twenty-first session: these were reconciled at a wrong scale or crashed
    (lambda d: d["shapes"][0]["kernels"][0]["units"].__setitem__(DRAM_READ, "ms"),
     f"shape {FIRST}: kernels[0].units['{DRAM_READ}'] is 'ms', not a unit of bytes (byte, gbyte, kbyte, mbyte, "
     "tbyte): the value would be read at another scale"),
    (lambda d: d["shapes"][0]["kernels"][0]["units"].__setitem__(DRAM_READ, "sector"),
     f"kernels[0].units['{DRAM_READ}'] is 'sector', not a unit of bytes"),
    (lambda d: d["shapes"][0]["kernels"][0]["units"].__setitem__("gpu__time_duration.sum", "byte"),
     "kernels[0].units['gpu__time_duration.sum'] is 'byte', not a unit of time"),
    (lambda d: d["hardware"].__setitem__("compute_capability", 9),
     "hardware.compute_capability must be [major, minor] (e.g. [9, 0]), got 9"),
    (lambda d: d["hardware"].__setitem__("compute_capability", "9.0"),
     "hardware.compute_capability must be [major, minor] (e.g. [9, 0]), got the string '9.0'"),
    (lambda d: d["hardware"].__setitem__("smem_per_sm", 1),
     "hardware.smem_per_block 232448 is more than hardware.smem_per_sm 1"),
    (lambda d: d["settings"].__setitem__("cache_control", "flush-everything"),
     "settings.cache_control must be \"all\" or \"none\", got the string 'flush-everything'"),
    (lambda d: d["shapes"][0]["config"].__setitem__("heads_per_program", 256),
     f"shape {FIRST}: config.heads_per_program 256 is more than config.block_m 128"),
    (lambda d: (d["shapes"][0]["spec"].__setitem__("dtype", "fp8_e4m3"),
                d["shapes"][0].__setitem__("id", FIRST.replace("bf16", "fp8_e4m3"))),
     "impl 'tiled' but the bundled kernel does not run this spec (dtype fp8_e4m3 is not one the bundled kernel "
     "runs"),
])
def test_every_kind_of_damage_is_one_line(capsys, tmp_path, raw, edit, words):
    data = copy.deepcopy(raw)
    edit(data)
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert words in line, line


#: A windowed, bottom-right causal receipt (window2: every shape's id names its window, ``-br-w20_inf``).
WINDOWED = RECEIPTS / "ncu-h200-window2-2026-12-01.json"
#: A decode receipt (split-KV decode shapes: their ids do not name the phase).
DECODE = RECEIPTS / "ncu-h200-decode-splits1-2026-12-01.json"


@pytest.mark.parametrize("receipt, field, words", [
    (HOLDOUT, "dtype", "spec has no 'dtype' field"),  # was read as bf16
    (HOLDOUT, "causal", "spec has no 'causal' field"),  # was read as non-causal
    (HOLDOUT, "backward", "spec has no 'backward' field"),  # was read as a forward
    (WINDOWED, "causal_align", "spec has no 'causal_align' field"),  # was read as top-left
    (DECODE, "phase", "spec has no 'phase' field"),  # was read as a prefill (phase is not in the id)
    # the window sides are written only when set, so a dropped one is caught by the id that names it
    (WINDOWED, "window_left", "names another layer than its spec, which gives "),
])
def test_a_dropped_spec_field_is_refused_not_defaulted(capsys, tmp_path, receipt, field, words):
    """A fresh user's finding (2026-12-06): a receipt whose shapes lost ``dtype``, ``causal``, ``causal_align``,
    ``backward``, ``phase`` or a window side was reconciled with the default (bf16, non-causal, top-left, forward,
    prefill, unbounded) and the model blamed (window2's tiled reads 14/14 -> 9/14, exit 0). Now one line naming the
    shape and field."""
    data = json.loads(receipt.read_text())
    causal = [s for s in data["shapes"] if s["spec"]["causal"]]
    shape = (causal or data["shapes"])[0]
    assert field in shape["spec"]
    del shape["spec"][field]
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert f"shape {shape['id']}: " in line and words in line, line


def test_an_id_in_iomodels_form_must_name_the_spec_and_others_are_free():
    spec = {"batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 64, "seqlen_q": 128, "seqlen_k": 128, "dtype": "fp16",
            "causal": True, "causal_align": "bottom-right", "phase": "prefill", "backward": False}
    ok = "b1-h2-kv2-d64-fp16-q128-k128-br-tiled"
    for sid in (ok, "my-own-run", "b1-h2-kv2-d64-myrun"):
        # the id, ids of a user's own form (a tag must agree with the config: the next test)
        assert Measurement.from_dict({"schema": "iomodel.measurement/1", "kind": "interpreter",
                                      "shapes": [{"id": sid, "impl": "tiled", "spec": spec}]}).shapes[0].id == sid
    for sid in ("b1-h2-kv2-d64-bf16-q128-k128-br-tiled", "b1-h2-kv2-d64-fp16-q128-k128-tl-tiled", ok + "-bwd",
                "b1-h2-kv2-d64-fp16-q128-k128-br-w20_inf-tiled", "b1-h2-kv2-d64-fp16-q128-k128-br-sdpa-cudnn",
                ok + "-fp32", ok + "-notatag", ok + "-s0"):  # an impl (baseline vs baseline-fp32) or tag it is not
        with pytest.raises(IomodelError, match=f"^the record, shape {re.escape(sid)}: the id {re.escape(repr(sid))} "
                                               f"names another layer than its spec, which gives {ok!r} \\(the "):
            Measurement.from_dict({"schema": "iomodel.measurement/1", "kind": "interpreter",
                                   "shapes": [{"id": sid, "impl": "tiled", "spec": spec}]})


ORDER_PROBE = RECEIPTS / "ncu-h100-order-probe1-2026-12-07.json"


def test_a_tag_must_agree_with_the_launch_its_config_records(capsys, tmp_path):
    """A sweep's tag names the launch it pinned (``-treverse``, ``-heads-fastest``, ``-s3``, ``-p4``); the model
    reads the record's config. An id whose tag says another launch than the config records (an edit by hand, a
    record copied under another name) is refused in one line, not reconciled under the wrong name (twenty-first
    session; the H100 order probe's ``-tforward`` shapes record ``tile_order: forward``)."""
    data = json.loads(ORDER_PROBE.read_text())
    shape = next(s for s in data["shapes"] if s["id"].endswith("-tforward"))
    assert shape["config"]["tile_order"] == "forward"
    shape["config"]["tile_order"] = "reverse"
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.startswith("error: measurement file ") and line.endswith(
        f", shape {shape['id']}: the id {shape['id']!r} says -tforward but config.tile_order is 'reverse': the tag "
        "names the launch a sweep pinned, so the two must agree: regenerate the record with iomodel validate, or "
        "correct that value"), line
    fwd = {"batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 64, "seqlen_q": 128, "seqlen_k": 128, "dtype": "fp16",
           "causal": True, "causal_align": "bottom-right", "phase": "prefill", "backward": False}
    ok = "b1-h2-kv2-d64-fp16-q128-k128-br-tiled"
    step = "b1-h2-kv2-d64-fp16-q128-k128-br-tiled-bwd"  # the same layer's training step

    launch = {"num_warps": 4, "num_stages": 1, "dq_num_warps": 4, "dq_num_stages": 1}  # a backward's required counts

    def load(sid, config):
        spec = {**fwd, "backward": sid.startswith(step)}
        if "backward" in config:
            config = {**config, "backward": {**launch, **config["backward"]}}
        return Measurement.from_dict({"schema": "iomodel.measurement/1", "kind": "interpreter",
                                      "shapes": [{"id": sid, "impl": "tiled", "spec": spec,
                                                  "config": {"block_m": 64, "block_n": 64, **config}}]})

    for sid, config in ((ok + "-treverse", {"tile_order": "reverse"}), (ok + "-tforward", {}),
                        (ok + "-heads-fastest", {"grid_order": "heads-fastest"}), (ok, {"grid_order": "head-grouped:4"}),
                        (step + "-head-grouped:8-s3", {"grid_order": "head-grouped:8", "backward": {"group_splits": 3}}),
                        (ok + "-p4", {"heads_per_program": 4}), (step + "-s3", {"backward": {"group_splits": 3}}),
                        (step + "-s1", {})):  # agreeing (a field left out is its default), or no tag at all
        # ("-s3" alone was refused as an unknown grid order 's3' until this session: a sweep pinning a group split
        # on the default grid wrote ids its own loader refused)
        assert load(sid, config).shapes[0].id == sid
    for sid, config, said in ((ok + "-treverse", {"tile_order": "forward"}, "says -treverse but config.tile_order "
                               "is 'forward'"),
                              (ok + "-heads-fastest", {"grid_order": "tiles-fastest"}, "says -heads-fastest but "
                               "config.grid_order is 'tiles-fastest'"),
                              (step + "-s3", {"backward": {"group_splits": 2}}, "says -s3 but "
                               "config.backward.group_splits is 2"),
                              (ok + "-p4", {"heads_per_program": 2}, "says -p4 but config.heads_per_program is 2"),
                              # a field left out is its default (the record's writer drops defaults): a helper's
                              # audit found these reconciled under the wrong launch
                              (ok + "-heads-fastest", {}, "says -heads-fastest but config.grid_order is "
                               "'tiles-fastest' (left out: its default)"),
                              (ok + "-treverse", {}, "says -treverse but config.tile_order is 'forward' (left out: "
                               "its default)"),
                              (step + "-s2", {"backward": {}}, "says -s2 but config.backward.group_splits is 1 (left "
                               "out: its default)"),
                              (ok + "-p8", {}, "says -p8 but config.heads_per_program is 1 (left out: its default)"),
                              (ok + "-s2", {"backward": {"group_splits": 2}}, "says -s2 (a dK/dV group split) but "
                               "the spec is a forward, which has no dK/dV kernel")):
        with pytest.raises(IomodelError, match=f"^the record, shape {re.escape(sid)}: the id {re.escape(repr(sid))} "
                                               f"{re.escape(said)}: "):
            load(sid, config)


def test_every_committed_sweeps_ids_are_ids_its_records_load_under():
    """Each shape id a committed sweep writes (:func:`iomodel.measure.records.shape_id` + ``shape_tag``) passes the
    loader's id check, so a receipt measured from it loads. ``sweeps/h200-dkdv-split-calib1.toml`` pins dK/dV group
    splits on the default grid (``...-tiled-bwd-s2``): until this session the loader read ``-s2`` as an unknown grid
    order and would have refused that receipt."""
    from iomodel.measure.records import _check_id_agrees
    from iomodel.measure.sweep import load_sweep

    ids = 0
    for path in sorted((RECEIPTS.parent / "sweeps").glob("*.toml")):
        for shape in load_sweep(path).shapes:
            config = {"grid_order": shape.grid_order, "heads_per_program": shape.heads_per_program,  # as recorded
                      **({"tile_order": shape.tile_order} if shape.tile_order else {}),
                      **({"backward": {"group_splits": shape.group_splits}} if shape.group_splits else {})}
            _check_id_agrees(shape.id, shape.spec, shape.impl, shape.seqlens, f"{path.name}: {shape.id}", config)
            ids += 1
    split = [s.id for s in load_sweep(RECEIPTS.parent / "sweeps" / "h200-dkdv-split-calib1.toml").shapes]
    assert "b1-h56-kv8-d128-fp16-q3072-k3072-tl-tiled-bwd-s2" in split
    assert ids > 1000


TRAIN = RECEIPTS / "ncu-h200-train-holdout13-2026-12-06.json"


@pytest.mark.parametrize("edit, words", [
    (lambda b: b.pop("num_stages"), "config.backward has no 'num_stages' field"),
    (lambda b: b.pop("dq_num_warps"), "config.backward has no 'dq_num_warps' field"),
    (lambda b: b.__setitem__("dq_num_warps", "8"), "config.backward.dq_num_warps must be a positive integer, got the "
                                                   "string '8'"),
])
def test_a_training_steps_backward_launch_is_checked(capsys, tmp_path, edit, words):
    """The counts the model's programs per SM reads from a training step's ``config.backward`` (every committed
    record carries them): missing or a string was a traceback (AttributeError, TypeError) until the twenty-first
    session."""
    data = json.loads(TRAIN.read_text())
    shape = next(s for s in data["shapes"] if (s.get("config") or {}).get("backward"))
    edit(shape["config"]["backward"])
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert f"shape {shape['id']}: {words}" in line, line


def test_an_output_that_is_an_input_is_refused(capsys, tmp_path):
    """``iomodel reconcile x.json --json x.json`` replaced the receipt with its reconciliation, and ``iomodel validate
    y.toml -o y.toml`` the sweep with a record (a helper's audit): now one line each, the input untouched."""
    receipt = _write(tmp_path, json.loads(HOLDOUT.read_text()), "x.json")
    before = receipt.read_bytes()
    line = _one_line(capsys, ["reconcile", str(receipt), "--json", str(receipt)])
    assert line == (f"error: --json {str(receipt)!r} is the receipt this command reads ({str(receipt)!r}): writing it "
                    "would replace it; give --json another path")
    link = tmp_path / "link.json"
    link.symlink_to(receipt)
    assert "is the receipt this command reads" in _one_line(capsys, ["reconcile", str(receipt), "--json", str(link)])
    assert receipt.read_bytes() == before
    sweep = tmp_path / "y.toml"
    sweep.write_text((RECEIPTS.parent / "sweeps" / "interpreter.toml").read_text())
    line = _one_line(capsys, ["validate", str(sweep), "--interpreter", "--limit", "1", "-o", str(sweep)])
    assert line == (f"error: --out {str(sweep)!r} is the sweep this command reads ({str(sweep)!r}): writing it would "
                    "replace it; give --out another path")
    assert sweep.read_text() == (RECEIPTS.parent / "sweeps" / "interpreter.toml").read_text()


@pytest.mark.parametrize("line, words", [
    ("seqlen = nan", "seqlen_q must be a positive whole number, got nan (not a finite number)"),  # was a ValueError
    ('seqlen = "sixty-four"', "seqlen_q must be a positive whole number, got the string 'sixty-four'"),
    ('causal = "false"', "causal must be true or false, got the string 'false'"),  # was measured as causal
    ("causal = 0.5", "causal must be true or false, got 0.5"),
    ("name = 5", "name must be a string, got 5"),  # the receipt's loader refused it after the run
])
def test_a_sweep_value_of_the_wrong_type_is_one_line(capsys, tmp_path, line, words):
    sweep = tmp_path / "s.toml"
    sweep.write_text(f'name = "s"\n[[shape]]\nheads = 2\nkv_heads = 2\nhead_dim = 64\nseqlen = 128\n'
                     .replace("seqlen = 128\n", "" if line.startswith("seqlen") else "seqlen = 128\n") + line + "\n")
    assert _one_line(capsys, ["validate", str(sweep), "--dry-run"]) == f"error: {sweep}: shape 1: {words}: fix the file"


def test_a_sweeps_cache_and_clock_control_are_ncus_values(capsys, tmp_path):
    for key, value, words in (("cache_control", "flush", '[ncu] cache_control must be "all" or "none"'),
                              ("clock_control", "max", '[ncu] clock_control must be "none" or "base"')):
        sweep = tmp_path / "s.toml"
        sweep.write_text(f'name = "s"\n[ncu]\n{key} = "{value}"\n[[shape]]\nheads = 2\nkv_heads = 2\nhead_dim = 64\n'
                         "seqlen = 128\n")
        assert words in _one_line(capsys, ["validate", str(sweep), "--dry-run"])


def test_a_decode_record_whose_kernel_is_not_the_bundled_decode_is_not_reconciled(tmp_path):
    """The foreign-kernel check covered the prefill forward only: a decode record whose kernel was renamed (another
    kernel's counters under a decode spec) was reconciled as fine (a helper's audit, twenty-first session)."""
    from iomodel.reconcile.compare import reconcile

    data = json.loads(DECODE.read_text())
    data["shapes"] = data["shapes"][:1]
    ok = reconcile(Measurement.from_dict(copy.deepcopy(data))).rows[0]
    assert not any("not the bundled decode" in n for n in ok.notes)
    data["shapes"][0]["kernels"][0]["name"] = "foo"
    bad = reconcile(Measurement.from_dict(data)).rows[0]
    assert any(n == "profiled kernel(s) foo are not the bundled decode (_attn_decode, its combine)" for n in bad.notes)


def test_a_sweeps_metric_names_are_checked_as_the_flags_are(capsys, tmp_path):
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "s"\n[ncu]\nmetrics = ["dram__bytes_read.sum", "foo"]\n[[shape]]\nheads = 2\n'
                     'kv_heads = 2\nhead_dim = 64\nseqlen = 128\n')
    assert _one_line(capsys, ["validate", str(sweep), "--dry-run"]) == (
        f"error: {sweep}: [ncu] metrics has 'foo', not an Nsight Compute metric name (unit__counter.rollup, e.g. "
        "dram__bytes_read.sum): fix the file")


def test_the_interpreter_records_the_launch_a_sweep_pins(capsys, tmp_path):
    """``validate --interpreter`` ran its own tiles without a sweep's tile_order and grid_order, so its records said
    another launch than their ids' tags, and its own reconcile refused them (a reviewer, twenty-first session): the
    pins now reach the interpreter's launch, and the record round-trips with the counts equal to the model's."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "pins"\n[[shape]]\nheads = 4\nkv_heads = 2\nhead_dim = 32\nseqlen = 160\n'
                     'causal = true\ntile_order = "reverse"\n[[shape]]\nheads = 4\nkv_heads = 4\nhead_dim = 32\n'
                     'seqlen = 96\ngrid_order = "heads-fastest"\n')
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as done:
        main(["validate", str(sweep), "--interpreter", "-o", str(out)])
    assert done.value.code in (0, None), capsys.readouterr().err
    rec = Measurement.load(out)
    assert [(s.id, s.config.get("tile_order"), s.config.get("grid_order")) for s in rec.shapes] == [
        ("b1-h4-kv2-d32-bf16-q160-k160-tl-tiled-treverse", "reverse", None),
        ("b1-h4-kv4-d32-bf16-q96-k96-nc-tiled-heads-fastest", "forward", "heads-fastest")]
    rec_l = reconcile(rec, hardware="H200")
    assert [(rec_l.within(r, "SRAM_fill", "read"), rec_l.within(r, "SRAM_fill", "write")) for r in rec_l.rows] == [
        (True, True), (True, True)]


def test_interpreter_counts_must_be_whole_bytes():
    spec = {"batch": 1, "heads": 2, "kv_heads": 2, "head_dim": 64, "seqlen_q": 128, "seqlen_k": 128, "dtype": "fp16",
            "causal": False, "causal_align": "top-left", "phase": "prefill", "backward": False}
    shape = {"id": "s", "impl": "tiled", "spec": spec, "config": {"block_m": 64, "block_n": 64},
             "sram_fill": {"K": {"read_bytes": -64, "write_bytes": 0}}}
    rec = {"schema": "iomodel.measurement/1", "kind": "interpreter", "shapes": [shape]}
    with pytest.raises(IomodelError, match=r"^the record, shape s: sram_fill\['K'\].read_bytes must be a whole number "
                                           r"of bytes, 0 or more, got -64: "):
        Measurement.from_dict(rec)
    shape["sram_fill"]["K"] = {"read_bytes": 64}
    with pytest.raises(IomodelError, match=r"sram_fill\['K'\] has no 'write_bytes' field"):
        Measurement.from_dict(rec)


# ---------------------------------------------------------------- a missing metric is not reconciled


@pytest.fixture(scope="module")
def null_read(raw):
    """The acceptance receipt with the first shape's DRAM read bytes null (ncu's n/a), bundled kernel only."""
    data = copy.deepcopy(raw)
    _first_kernel_metrics(data)[DRAM_READ] = None
    return reconcile(Measurement.from_dict(data), impls=["tiled"])


def test_a_null_metric_counts_as_not_reconciled_and_keeps_the_denominator(null_read):
    s = {(e["level"], e["which"]): e for e in null_read.summary()}
    # 31/31 on the receipt as measured (test_reconcile_receipts); not 30/30 with the shape dropped
    assert (s[("HBM", "read")]["within"], s[("HBM", "read")]["shapes"], s[("HBM", "read")]["not_reconciled"]) == (30, 31, 1)
    # HBM write: 31/31 as measured under the constants before 2026-12-06; 29/31 under the forward's own constants
    # (2026-12-06: q3328 and the split-KV q8 k20000 decode are outside), the same with the read dropped
    assert (s[("HBM", "write")]["within"], s[("HBM", "write")]["shapes"], s[("HBM", "write")]["not_reconciled"]) == (29, 31, 0)
    row = next(r for r in null_read.rows if r.id == FIRST)
    assert null_read.within(row, "HBM", "read") is False and null_read.within(row, "HBM", "write") is True
    assert [(r.id, what, why) for r, what, why in null_read.not_reconciled()] == [
        (FIRST, "HBM read", f"not measured: {DRAM_READ} is null in kernel 0 (_attn_fwd_tma)")]
    # the null read is listed first; under the forward's own constants (2026-12-06) the two HBM write misses follow
    # (before 2026-12-06 the null read was the only entry)
    assert [(r.id, bad) for r, bad in null_read.outside()] == [
        (FIRST, ["HBM read not measured"]), ("b1-h16-kv16-d128-bf16-q3328-k3328-nc-tiled", ["HBM write"]),
        ("b2-h28-kv4-d128-fp16-q8-k20000-br-tiled", ["HBM write"])]
    hbm = next(t for t in table_rows(null_read) if t[0] == FIRST)
    # predicted: Q, K and V read once, 3 x 1*16*512*128 elements x 2 bytes = 6.0 MiB; measured: none
    assert hbm[1:5] == ["HBM", "6.0 MiB", "-", "-"] and hbm[8] == "not measured"
    assert ["tiled", "HBM", "read", "31", "±10%", "30/31 (96.7%)", "±10% or ±1.0 MiB",
            "30/31 (96.7%); 1 not reconciled"] in summary_rows(null_read)
    md = markdown(null_read)
    assert "## Not reconciled (1)" in md
    assert f"- `{FIRST}` (HBM read): not measured: {DRAM_READ} is null in kernel 0 (_attn_fwd_tma)" in md
    assert null_read.to_dict()["not_reconciled"] == [
        {"id": FIRST, "level": "HBM read", "detail": f"not measured: {DRAM_READ} is null in kernel 0 (_attn_fwd_tma)"}]


def test_an_absent_metric_is_listed_the_same_way_on_the_cli(capsys, tmp_path, raw):
    data = copy.deepcopy(raw)
    data["shapes"] = data["shapes"][:3]
    del _first_kernel_metrics(data)["lts__t_sectors_srcunit_tex_op_write.sum"]
    path = _write(tmp_path, data)
    with pytest.raises(SystemExit) as exc:
        main(["reconcile", str(path), "--l2-source", "tex", "--markdown", str(tmp_path / "r.md")])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    why = "not measured: lts__t_sectors_srcunit_tex_op_write.sum is absent from kernel 0 (_attn_fwd_tma)"
    assert "Not reconciled, counted as not within (1):" in out and f"{FIRST} (L2 write): {why}" in out
    md = (tmp_path / "r.md").read_text()
    assert "| tiled | L2 | write | 3 | ±15% | 2/3 (66.6%) | ±15% or ±1.0 MiB | 2/3 (66.6%); 1 not reconciled |" in md


def test_a_level_the_run_did_not_collect_is_not_compared():
    """The DRAM-only repeats list no L2 metric in settings.metrics: no L2 row is counted (the pins
    of test_reconcile_receipts), and nothing is listed as not measured."""
    m = Measurement.load(RECEIPTS / "ncu-h200-holdout4-flush-repeat-a-2026-11-29.json")
    m.shapes = m.shapes[:4]
    rec = reconcile(m)
    assert {(e["level"], e["which"]) for e in rec.summary()} == {("HBM", "read"), ("HBM", "write")}
    assert rec.not_reconciled() == []


def test_a_failed_shape_stays_in_the_denominator(raw):
    data = copy.deepcopy(raw)
    data["shapes"] = data["shapes"][:3]
    data["shapes"][1]["error"] = "OutOfMemoryError: CUDA out of memory"
    rec = reconcile(Measurement.from_dict(data))
    s = {(e["level"], e["which"]): (e["within"], e["shapes"], e["not_reconciled"]) for e in rec.summary()}
    assert s == {("HBM", "read"): (2, 3, 1), ("HBM", "write"): (2, 3, 1), ("L2", "read"): (2, 3, 1),
                 ("L2", "write"): (2, 3, 1)}
    assert [(r.id, what) for r, what, _ in rec.not_reconciled()] == [(data["shapes"][1]["id"], "every level")]


def test_a_profiled_shape_without_kernels_is_not_reconciled(raw):
    data = copy.deepcopy(raw)
    data["shapes"] = data["shapes"][:2]
    data["shapes"][0]["kernels"] = []
    rec = reconcile(Measurement.from_dict(data))
    assert rec.rows[0].error == "the record has no profiled kernel and no interpreter counts for this shape"
    # the shape without kernels stays in every denominator: 2 shapes at each level. [(1, 2)] * 4 under the constants
    # before 2026-12-06; under the forward's own constants (2026-12-06) the other shape (q3328) is outside at HBM write
    assert [(e["level"], e["which"], e["within"], e["shapes"]) for e in rec.summary()] == [
        ("HBM", "read", 1, 2), ("HBM", "write", 0, 2), ("L2", "read", 1, 2), ("L2", "write", 1, 2)]


# ---------------------------------------------------------------- benchmark receipts


def test_bench_check_with_a_string_median_is_one_line(capsys, tmp_path):
    data = json.loads((RECEIPTS / "bench-cpu.json").read_text())
    b = data["buckets"][0]
    s = b["shapes"][0]
    s["results"]["sdpa-flash"]["time_s"]["median"] = "0.00923"
    path = _write(tmp_path, data)
    line = _one_line(capsys, ["bench", "--check", str(path)])
    assert line == (f"error: receipt {str(path)!r}: bucket {b['name']!r} shape {s['label']!r} sdpa-flash: "
                    "time_s.median must be a positive number of seconds, got the string '0.00923': re-run iomodel "
                    "bench, or correct that value")
    with pytest.raises(IomodelError, match="time_s.median must be a positive number of seconds"):
        check_receipt(data)  # the library check refuses it the same way


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["buckets"][0]["shapes"][0]["results"]["sdpa-math"].__setitem__("samples_s", [0.01, "x"]),
     "sdpa-math: samples_s[1] must be a positive finite number, got the string 'x'"),
    (lambda d: d["buckets"][0]["shapes"][0]["results"]["sdpa-math"]["error"].__setitem__("max_abs", None),
     "sdpa-math: error.max_abs must be a number, 0 or more (or \"inf\" / \"nan\"), got null"),
    (lambda d: d["buckets"][0]["shapes"][0]["results"]["sdpa-math"]["error"].__setitem__("nonfinite", 0.5),
     "sdpa-math: error.nonfinite must be a whole number, 0 or more, got 0.5"),
    (lambda d: d["buckets"][0]["shapes"][0].__setitem__("results", []), "results must be a JSON object"),
    (lambda d: d["policy"].__setitem__("version", "one"), "policy.version must be a positive integer"),
    (lambda d: d["matrix"]["workload"].__setitem__("layers", 1e400), "matrix.workload.layers must be a positive "
                                                                      "integer, got inf (not a finite number)"),
    (lambda d: d["downstream"]["results"]["bf16"]["sdpa-math"].__setitem__("max_abs", "small"),
     "downstream bf16 sdpa-math: max_abs must be a number"),
])
def test_bench_receipt_damage_is_one_line(capsys, tmp_path, edit, words):
    data = json.loads((RECEIPTS / "bench-cpu.json").read_text())
    edit(data)
    line = _one_line(capsys, ["bench", "--check", str(_write(tmp_path, data))])
    assert words in line, line


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["prefill"][0]["results"]["triton"].__setitem__("median_s", "1e-4"),  # the kernel's name then
     "triton: median_s must be a finite number, 0 or more, got the string '1e-4'"),
    (lambda d: d["prefill"][0]["shape"].__setitem__("seqlen", -512), "prefill[0].shape.seqlen must be a positive integer"),
    (lambda d: d["decode"][0]["copy"].__setitem__("samples_s", []), "copy.samples_s must be a non-empty array"),
    (lambda d: d["prefill"][0]["ratios"].__setitem__("sdpa-cudnn", "fast"), "ratios['sdpa-cudnn'] must be"),
])
def test_kernel_speed_receipt_damage_is_one_line(capsys, tmp_path, edit, words):
    data = json.loads((RECEIPTS / "bench_kernel_h200.json").read_text())
    edit(data)
    line = _one_line(capsys, ["bench", "--check", str(_write(tmp_path, data))])
    assert words in line, line


def test_committed_bench_receipts_load_and_check_clean():
    for name in ("bench-cpu.json", "bench-h200.json", "bench_kernel_h200.json"):
        assert check_receipt(load_receipt(RECEIPTS / name)) == [], name


# ---------------------------------------------------------------- the overlay file of iomodel plot --measured


@pytest.mark.parametrize("content, words", [
    ('[{"seqlen": 8192, "bytes": 1e9}]', "must map plot kinds (seqlen, blocks, sram) to lists of points, got a JSON array"),
    ('{"seqlen": {"seqlen": 8192}}', "'seqlen' must be a list of points, got a JSON object"),
    ('{"seqln": []}', "'seqln' is not a plot kind: use seqlen, blocks, sram"),
    (None, "is a folder: pass the JSON file of points to --measured"),
])
def test_overlay_file_errors_are_one_line(tmp_path, content, words):
    from iomodel.commands.plot import _load_measured

    path = tmp_path / "points.json"
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    with pytest.raises(IomodelError) as exc:
        _load_measured(path)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_record_relabelled_as_another_gpu_is_refused_by_its_l2_and_sms(capsys, tmp_path):
    """Name and device both edited (an H100 record made an H200's, or an H200's an H100 PCIe's) reconciled under the
    other card's constants with exit 0 (a fresh user's finding, twenty-third session): the L2 the record holds is not
    the L2 of the named device's die, refused; so is a ``num_sms`` other than the ``environment.sm_count`` the device
    reported (it sets the programs in flight)."""
    from iomodel.spec.hardware import preset_names

    data = json.loads(ORDER_PROBE.read_text())
    assert (data["hardware"]["l2_bytes"], data["environment"]["l2_bytes"], data["environment"]["sm_count"]) == (
        52428800, 52428800, 132)
    data["environment"]["device"] = "NVIDIA H200"
    data["hardware"].update(name="H200 (NVIDIA H200)", hbm_bandwidth=4.8e12)  # the bandwidth edited too
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": environment.device 'NVIDIA H200' is an H200, whose L2 is 62,914,560 bytes, but "
                         "hardware.l2_bytes is 52,428,800: the record names another GPU than the one measured: "
                         "regenerate the record with iomodel validate, or correct that value"), line
    data["environment"]["device"] = "NVIDIA H100 PCIe"  # the same die, but the SXM's datasheet bandwidth
    data["hardware"].update(name="H100-PCIe (NVIDIA H100 PCIe)", hbm_bandwidth=3.35e12)
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": hardware.hbm_bandwidth 3.35e+12 B/s is not the H100-PCIe's 2e+12 B/s (environment.device "
                         "'NVIDIA H100 PCIe'): the record names another GPU than the one measured: regenerate the record "
                         "with iomodel validate, or correct that value"), line
    data["hardware"]["hbm_bandwidth"] = 2.0e12
    assert Measurement.from_dict(data).hardware["num_sms"] == 132
    data["environment"]["device"] = "NVIDIA GH200 480GB"  # a card of no preset named as the H200 (a fresh user's)
    data["hardware"]["name"] = "H200 (NVIDIA GH200 480GB)"
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": hardware.name 'H200 (NVIDIA GH200 480GB)' is the H200 preset but environment.device "
                         f"'NVIDIA GH200 480GB' is no preset's card ({preset_names()}): the predictions would be for "
                         "another GPU than the one measured: drop the record's hardware entry and pass --hardware to "
                         "reconcile, or regenerate the record with iomodel validate, or correct that value"), line
    data["environment"]["device"] = "NVIDIA H100 PCIe"
    data["hardware"]["name"] = "H100-PCIe (NVIDIA H100 PCIe)"
    data["hardware"]["num_sms"] = 114
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": hardware.num_sms 114 differs from the environment.sm_count 132 the device reported: "
                         "regenerate the record with iomodel validate, or correct that value"), line


def test_a_record_predicted_for_another_gpu_than_it_ran_on_is_refused(capsys, tmp_path):
    """``environment.device`` is what the run saw, ``hardware`` what the predictions are for (iomodel validate writes
    both from the same device: ``detect``). A record whose hardware was edited to another preset (the H100 order
    probe's H100-SXM made the H200's 60 MiB L2) was predicted for the H200 without a word (twenty-second session):
    refused in one line. Every committed record agrees (71 loaded by the receipt tests)."""
    from iomodel.spec.hardware import H200, preset_names, preset_of_device

    assert [preset_of_device(n) for n in ("NVIDIA H100 80GB HBM3", "H100-SXM (NVIDIA H100 80GB HBM3)", "NVIDIA H200",
                                          "H200 (NVIDIA H200)", "NVIDIA A100-SXM4-80GB", "cpu", "", "NVIDIA GH200 480GB",
                                          "NVIDIA H100 PCIe", "h200-sxm")] == [
        "H100-SXM", "H100-SXM", "H200", "H200", "A100-80GB", None, None, None, "H100-PCIe", "H200"]
    data = json.loads(ORDER_PROBE.read_text())
    assert data["environment"]["device"] == "NVIDIA H100 80GB HBM3"
    data["hardware"] = {**data["hardware"], "name": H200.name, "l2_bytes": H200.l2_bytes,
                        "hbm_bandwidth": H200.hbm_bandwidth}
    data["environment"].pop("l2_bytes", None)
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": hardware.name 'H200' is the H200 preset but environment.device 'NVIDIA H100 80GB HBM3' "
                         "is an H100-SXM: the predictions would be for another GPU than the one measured: name it "
                         "'H100-SXM (NVIDIA H100 80GB HBM3)', or regenerate the record with iomodel validate, or "
                         "correct that value"), line
    data["environment"]["device"] = "NVIDIA H200"  # agreeing: loads and reconciles
    assert Measurement.from_dict(data).hardware["name"] == "H200"
    # the name read as the predictions read it (the preset before the card): "H100-SXM (NVIDIA H200)" predicts with
    # the H100's constants, on an H200 run (a reviewer's finding: the family substring passed it)
    # and a PCIe card detected before the card variants had presets, named after the SXM preset (its bandwidth and
    # peaks): refused, with the name to give it; so named, it loads
    for name, device, l2, ran in (("H100-SXM (NVIDIA H200)", "NVIDIA H200", H200.l2_bytes, "H200"),
                                  ("H100-SXM (NVIDIA H100 PCIe)", "NVIDIA H100 PCIe", 52428800, "H100-PCIe")):
        data["environment"]["device"] = device
        data["hardware"] = {**data["hardware"], "name": name, "l2_bytes": l2}
        line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
        assert line.endswith(f": hardware.name {name!r} is the H100-SXM preset but environment.device {device!r} is "
                             f"an {ran}: the predictions would be for another GPU than the one measured: name it "
                             f"'{ran} ({device})', or regenerate the record with iomodel validate, or correct that "
                             "value"), line
    data["hardware"].update(name="H100-PCIe (NVIDIA H100 PCIe)", hbm_bandwidth=2.0e12)
    assert Measurement.from_dict(data).hardware["name"] == "H100-PCIe (NVIDIA H100 PCIe)"
    # a name no preset knows on a known device (the predictions fell back to the default read fraction, the H200's),
    # no name, and a profiled record without the device it ran on: refused too (a fresh user's findings)
    data["environment"]["device"] = "NVIDIA H100 80GB HBM3"
    data["hardware"]["name"] = "B200"
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(f": hardware.name 'B200' names no preset ({preset_names()}), so the predictions "
                         "would take default L2 constants, but environment.device 'NVIDIA H100 80GB HBM3' is an "
                         "H100-SXM: name it 'H100-SXM (NVIDIA H100 80GB HBM3)', or regenerate the record with iomodel "
                         "validate, or correct that value"), line
    for bad in ("", 5, None):
        data["hardware"]["name"] = bad
        line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
        assert line.endswith(": hardware.name must name the GPU (e.g. 'H200 (NVIDIA H200)'), got "
                             f"{jv.describe(bad)}: regenerate the record with iomodel validate, or correct that "
                             "value"), line
    data["hardware"]["name"] = "H200"
    del data["environment"]["device"]
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": environment.device must be the GPU the run saw (a string, e.g. 'NVIDIA H200'), got "
                         "null: regenerate the record with iomodel validate, or correct that value"), line
    # an interpreter record counts loads on the CPU: the GPU of its host (which ncu.environment records where torch
    # sees one) is no check of the sweep's hardware (a reviewer's finding: an H100 host's record was refused)
    interp = {"schema": "iomodel.measurement/1", "kind": "interpreter", "hardware": {**data["hardware"], "name": "H200"},
              "environment": {"device": "NVIDIA H100 80GB HBM3", "l2_bytes": 52428800}, "shapes": []}
    assert Measurement.from_dict(interp).environment["device"] == "NVIDIA H100 80GB HBM3"
    data["environment"]["device"] = "NVIDIA H200"
    data["hardware"]["name"] = "H200 (NVIDIA H100 80GB HBM3)"  # the card in brackets is the device the run saw
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert line.endswith(": hardware.name 'H200 (NVIDIA H100 80GB HBM3)' names the card 'NVIDIA H100 80GB HBM3' but "
                         "environment.device is 'NVIDIA H200': regenerate the record with iomodel validate, or correct "
                         "that value"), line


# ---------------------------------------------------------------- the seal: an edit that keeps every grid


def _as_a_run(m: Measurement) -> Measurement:
    """``m`` as a run builds it in memory (``sealed`` None: :meth:`Measurement.save` seals it)."""
    m.sealed = None
    return m


@pytest.fixture(scope="module")
def sealed_text(tmp_path_factory) -> str:
    """The hold-out receipt's record as a run writes it (sealed), as text."""
    path = tmp_path_factory.mktemp("seal") / "sealed.json"
    _as_a_run(Measurement.load(HOLDOUT)).save(path)
    return path.read_text()


def test_save_seals_a_runs_record_and_load_reads_the_seal(tmp_path, sealed_text, raw):
    from iomodel.measure.records import SEAL_KEY, record_digest

    data = json.loads(sealed_text)
    assert len(data["settings"][SEAL_KEY]) == 64 and data["settings"][SEAL_KEY] == record_digest(data)
    p = _write(tmp_path, data)
    assert Measurement.load(p).sealed is True
    # indentation, key order and integral floats written as integers are not values (jq rewrites 12.0 as 12)
    flipped = {k: data[k] for k in reversed(list(data))}
    metrics = flipped["shapes"][0]["kernels"][0]["metrics"]
    assert metrics[DRAM_READ] == int(metrics[DRAM_READ]) and isinstance(metrics[DRAM_READ], float)
    metrics[DRAM_READ] = int(metrics[DRAM_READ])
    assert Measurement.load(_write(tmp_path, flipped, "flipped.json")).sealed is True
    # the reconciliation says which it is, in its JSON, its report and the console's title
    rec = reconcile(Measurement.load(p))
    assert rec.to_dict()["measurement"]["sealed"] is True
    assert "\nSealed: unchanged since iomodel wrote it (settings.record_sha256 holds: a checksum" in markdown(rec)
    assert "\nUnsealed (written before 2026-12-07, when seals began" in markdown(reconcile(Measurement.load(HOLDOUT)))
    assert "\nNot read from a file: no seal to check." in markdown(reconcile(_as_a_run(Measurement.load(HOLDOUT))))


def test_an_unsealed_record_saved_again_stays_unsealed(tmp_path, raw):
    """Nothing vouches for an unsealed record's values (a committed receipt, or one edited by hand before seals):
    saving it again must not seal it."""
    assert "record_sha256" not in raw["settings"]
    m = Measurement.load(HOLDOUT)
    assert m.sealed is False
    m.save(tmp_path / "again.json")
    assert "record_sha256" not in json.loads((tmp_path / "again.json").read_text())["settings"]
    assert Measurement.load(tmp_path / "again.json").sealed is False


def _causal_shape(data: dict) -> dict:
    return next(s for s in data["shapes"] if s["spec"].get("causal") and s["spec"]["seqlen_q"] == s["spec"]["seqlen_k"])


@pytest.mark.parametrize("edit", [
    # the alignment edited in spec and id together: every recorded grid is the same, the id check agrees
    lambda d: (_causal_shape(d)["spec"].update(causal_align="bottom-right"),
               _causal_shape(d).update(id=_causal_shape(d)["id"].replace("-tl-", "-br-"))),
    lambda d: d["shapes"][0]["kernels"][0]["metrics"].update({DRAM_READ: 6291456.0}),  # a measured value
    lambda d: d["environment"].update(driver="999.0"),  # a value the reconciliation only prints
    lambda d: d["shapes"].pop(),  # a shape dropped
    lambda d: d["settings"].update(note="added"),  # a key added
])
def test_an_edit_after_the_run_is_refused_in_one_line(capsys, tmp_path, sealed_text, edit):
    data = json.loads(sealed_text)
    edit(data)
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data))])
    assert "its values are not the ones iomodel wrote (settings.record_sha256, the sha256 of the record as written, " \
           "no longer matches)" in line
    assert "for an edit you mean, drop settings.record_sha256 (the record then reconciles as unsealed)" in line


def test_a_seal_dropped_reconciles_unsealed_and_a_bad_seal_is_one_line(capsys, tmp_path, sealed_text):
    data = json.loads(sealed_text)
    data["settings"].pop("record_sha256")
    assert Measurement.load(_write(tmp_path, data)).sealed is False
    data["settings"]["record_sha256"] = 12
    line = _one_line(capsys, ["reconcile", str(_write(tmp_path, data, "bad.json"))])
    assert "settings.record_sha256 must be a string" in line and line.endswith(
        "restore it, or drop settings.record_sha256 (the record then reconciles as unsealed)"), line
