"""Tampered and oversized inputs found by an adversarial user (2026-12-05): each is refused in one line or marked not
reconciled, never a traceback, a silent result or a run of minutes."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

import pytest

from iomodel.errors import IomodelError
from iomodel.measure.records import Measurement, shape_id
from iomodel.reconcile.compare import reconcile
from iomodel.spec import LayerSpec

ROOT = Path(__file__).resolve().parents[1]
SPLIT1 = ROOT / "receipts" / "ncu-h200-train-split1-2026-12-01.json"
HOLDOUT4 = ROOT / "receipts" / "ncu-h200-holdout4-2026-11-29.json"


def _write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _one_shape(path: Path, pick) -> dict:
    data = json.loads(path.read_text())
    data["shapes"] = [copy.deepcopy(next(s for s in data["shapes"] if pick(s)))]
    return data


def _re_id(data: dict) -> dict:
    """The first shape's id made its (edited) spec's, as a record of that layer would carry it."""
    sh = data["shapes"][0]
    sh["id"] = shape_id(LayerSpec(**{k: v for k, v in sh["spec"].items() if k != "pass"}), sh["impl"])
    return data


def _regrid(data: dict) -> dict:
    """The forward kernel's launch__grid_size made the edited spec's T_r·B·H, the backward kernels' their grids
    (iomodel.schedule.grid.backward_programs), and the id the spec's (a record as a GPU would write it)."""
    import math

    from iomodel.schedule.grid import backward_programs

    sh = _re_id(data)["shapes"][0]
    want = math.ceil(sh["spec"]["seqlen_q"] / sh["config"]["block_m"]) * sh["spec"]["batch"] * sh["spec"]["heads"]
    loaded = Measurement.from_dict(data).shapes[0]
    backward = backward_programs(loaded.spec, loaded.tiling()) if loaded.spec.backward else {}
    for k in sh["kernels"]:
        if "_attn_fwd" in k["name"]:
            k["metrics"]["launch__grid_size"] = want // sh["config"].get("heads_per_program", 1)
        for name, (programs, _, _) in backward.items():
            if k["name"].startswith(name):
                k["metrics"]["launch__grid_size"] = programs
    return data


def test_a_training_record_past_the_simulations_bound_is_not_reconciled_at_once(tmp_path):
    """The S = 17 step of train-split1 at batch 10,000 ran for minutes and gigabytes; a long S = 4 step took 241 s and
    12.6 GB: both are now the worksheet's refusal, in under a second each."""
    data = _one_shape(SPLIT1, lambda s: (s["config"].get("backward") or {}).get("group_splits", 1) == 17)
    data["shapes"][0]["spec"]["batch"] = 10_000
    t = time.perf_counter()
    row = reconcile(Measurement.load(_write(tmp_path, _regrid(data)))).rows[0]
    assert time.perf_counter() - t < 10
    assert row.error.startswith("the L2-aware prediction is not computed: the training step's largest grid")
    data = _one_shape(SPLIT1, lambda s: (s["config"].get("backward") or {}).get("group_splits", 1) == 3
                      and s["spec"]["heads"] == 32)
    data["shapes"][0]["spec"].update(seqlen_q=262_144, seqlen_k=262_144)
    t = time.perf_counter()
    row = reconcile(Measurement.load(_write(tmp_path, _regrid(data)))).rows[0]
    assert time.perf_counter() - t < 10
    assert "its dK/dV kernel with 3 group slices is simulated wave by wave" in row.error
    assert "above 1,100,000" in row.error


def test_an_l2_fraction_that_leaves_no_line_is_one_error():
    with pytest.raises(IomodelError, match="l2_fraction 1e-09 leaves 0.0629 bytes of the 62,914,560-byte L2, less than "
                                           "one 128-byte line"):
        reconcile(Measurement.load(SPLIT1), l2_fraction=1e-9)


@pytest.mark.parametrize("value, needle", [(1e9, "the least occupancy limit is 1000000000.0"),
                                           (0, "is 0: an occupancy limit is a whole number of programs per SM, 1 or "
                                               "more"),
                                           (2.5, "is 2.5: an occupancy limit is a whole number")])
def test_occupancy_limits_out_of_range_are_refused(tmp_path, value, needle):
    data = _one_shape(HOLDOUT4, lambda s: s["impl"] == "tiled")
    for m in data["shapes"][0]["kernels"][0]["metrics"]:  # every limit (the least is the one that counts)
        if m.startswith("launch__occupancy_limit_"):
            data["shapes"][0]["kernels"][0]["metrics"][m] = value
    with pytest.raises(IomodelError) as exc:
        Measurement.load(_write(tmp_path, data))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_foreign_kernel_makes_a_forward_shape_not_reconciled_however_small(tmp_path):
    """A kernel appended with 0.1 % of the bytes used to leave the shape "within"; the count now says it is not the
    launch the config describes."""
    data = _one_shape(HOLDOUT4, lambda s: s["impl"] == "tiled" and not s["spec"].get("backward"))
    k = copy.deepcopy(data["shapes"][0]["kernels"][0])
    k["name"] = "foreign_kernel"
    k["metrics"] = {m: (v / 1000 if isinstance(v, (int, float)) and "bytes" in m else v)
                    for m, v in k["metrics"].items()}
    data["shapes"][0]["kernels"].append(k)
    row = reconcile(Measurement.load(_write(tmp_path, data))).rows[0]
    hbm = next(lv for lv in row.levels if lv.level == "HBM")
    assert hbm.missing == {"read": "2 kernels profiled, 1 expected", "write": "2 kernels profiled, 1 expected"}


def test_a_sweeps_l2_model_table_is_checked_before_any_measurement():
    from iomodel.measure.sweep import parse_sweep

    shape = {"shape": [{"heads": 8, "kv_heads": 8, "head_dim": 64, "seqlen": 512, "dtype": "fp16"}]}
    for table, needle in [({"l2_fraction": 0}, "l2_fraction must be a number in (0, 1] that leaves at least one"),
                          ({"l2_source": "bogus"}, "l2_source must be one of 'auto', 'sm', 'tex', 'all'"),
                          ({"l2_ways": 3}, "unknown [l2_model] key(s) ['l2_ways']: use l2_fraction, l2_source")]:
        with pytest.raises(IomodelError) as exc:
            parse_sweep({**shape, "l2_model": table}, "s.toml")
        assert needle in str(exc.value) and "\n" not in str(exc.value)
    assert parse_sweep({**shape, "l2_model": {"l2_fraction": 0.5, "l2_source": "auto"}}, "s.toml").l2_model == {
        "l2_fraction": 0.5, "l2_source": "auto"}


MATRIX = """version = 2
policy = 3
name = "tiny"
device = "cpu"
seed = 0
description = "tiny"

[timing]
warmup = 1
reps = 3

[workload]
prompt_len = 128
output_len = 16
layers = 2
prefill_bucket = "p"
decode_bucket = "d"

[[bucket]]
name = "p"
weight = 0.5
phase = "prefill"
causal = true
heads = 4
kv_heads = 2
head_dim = 32
dtype = "bf16"
note = "n"
shapes = [ { batch = 1, seqlen_q = 128, seqlen_k = 128 }, { batch = 2, seqlen_q = SECOND, seqlen_k = SECOND } ]

[[bucket]]
name = "d"
weight = 0.5
phase = "decode"
causal = false
heads = 4
kv_heads = 2
head_dim = 32
dtype = "bf16"
note = "n"
shapes = [ { batch = 2, seqlen_q = 1, seqlen_k = 256, lengths = [256, 100] } ]
"""


def test_a_workload_bucket_with_two_shapes_of_one_length_is_refused_when_parsed(tmp_path):
    """Its request time is interpolated over the length: two points at one length divided by zero after the whole
    run, and the receipt was lost. Two lengths still parse."""
    from iomodel.bench.matrix import load_matrix

    path = tmp_path / "m.toml"
    path.write_text(MATRIX.replace("SECOND", "256"))
    assert len(load_matrix(path).buckets) == 2
    path.write_text(MATRIX.replace("SECOND", "128"))
    with pytest.raises(IomodelError) as exc:
        load_matrix(path)
    assert str(exc.value) == (f"{path} line 16: [workload] prefill_bucket 'p' must hold one shape per seqlen_q (the "
                              "request's time is interpolated over seqlen_q), got seqlen_q [128, 128]: split the bucket "
                              "or drop a shape")


@pytest.mark.parametrize("tamper, needle", [
    (lambda r: r.pop("downstream"), "downstream: no logits check for"),
    (lambda r: r["downstream"].update(results={}), "downstream: no logits check for"),
    (lambda r: r.pop("end_to_end"), "end_to_end: the matrix declares a workload, but the receipt holds no request"),
    (lambda r: r["end_to_end"].update(paths={}), "end_to_end: the matrix declares a workload"),
    (lambda r: r["buckets"].pop(), "buckets' weights sum to"),
    (lambda r: r["verdict"].update(violations=["x"]), "verdict: pass is true but it lists 1 violation(s)"),
])
def test_bench_check_refuses_a_receipt_that_is_not_a_whole_run(tamper, needle):
    """Sections deleted, a bucket dropped, a verdict contradicting itself: each passed ``iomodel bench --check``."""
    from iomodel.bench.receipt import check_receipt

    receipt = json.loads((ROOT / "receipts" / "bench-h200-v4.json").read_text())
    assert check_receipt(copy.deepcopy(receipt)) == []
    tamper(receipt)
    assert any(needle in v for v in check_receipt(receipt)), check_receipt(receipt)


def test_bench_check_refuses_an_emptied_sample_list():
    from iomodel.bench.receipt import check_receipt

    receipt = json.loads((ROOT / "receipts" / "bench-h200-v4.json").read_text())
    res = receipt["buckets"][0]["shapes"][0]["results"]
    fused = next(k for k, r in res.items() if k != "eager" and r.get("status") == "ok" and r.get("samples_s"))
    res[fused]["samples_s"] = []
    with pytest.raises(IomodelError, match="samples_s is empty, but the result ran"):
        check_receipt(receipt)


@pytest.mark.parametrize("extra, needle", [
    ({"head_dim": 1024}, "the bundled kernel does not run this shape: HEAD_DIM 1024 is above the kernel's maximum"),
    ({"dtype": "fp8_e4m3", "pass": "fwd+bwd"}, "the bundled kernel does not run this shape: dtype fp8_e4m3"),
])
def test_a_sweep_refuses_what_the_bundled_kernel_would_refuse_before_measuring(extra, needle):
    from iomodel.measure.sweep import parse_sweep

    with pytest.raises(IomodelError) as exc:
        parse_sweep({"shape": [{"heads": 8, "kv_heads": 8, "head_dim": 64, "seqlen": 512, "dtype": "fp16", **extra}]},
                    "s.toml")
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(IomodelError, match="s.toml: hardware: unknown hardware 'B300'"):
        parse_sweep({"hardware": "B300", "shape": [{"heads": 8, "kv_heads": 8, "head_dim": 64, "seqlen": 512,
                                                    "dtype": "fp16"}]}, "s.toml")


@pytest.mark.parametrize("field, value, needle", [("path", "warp-magic", "config.path must be"),
                                                  ("score_dtype", "int4", "config.score_dtype must be")])
def test_a_records_unknown_kernel_path_or_score_dtype_is_refused(tmp_path, field, value, needle):
    data = _one_shape(HOLDOUT4, lambda s: s["impl"] == "tiled")
    data["shapes"][0]["config"][field] = value
    with pytest.raises(IomodelError) as exc:
        Measurement.load(_write(tmp_path, data))
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_forward_shape_whose_kernel_is_not_the_bundled_forward_is_not_reconciled(tmp_path):
    """Renamed to another kernel (the count right): it reconciled as whole and within before."""
    data = _one_shape(HOLDOUT4, lambda s: s["impl"] == "tiled" and not s["spec"].get("backward"))
    data["shapes"][0]["kernels"][0]["name"] = "void at::native::elementwise_kernel<128, 4>"
    row = reconcile(Measurement.load(_write(tmp_path, data))).rows[0]
    hbm = next(lv for lv in row.levels if lv.level == "HBM")
    assert hbm.missing["read"].startswith("kernel void at::native::elementwise_kernel<128, 4> is not the bundled")


def _rescaled(r):
    """Drop the last bucket from the results and the embedded matrix, and rescale the rest to sum to 1."""
    gone = r["buckets"].pop()
    kind = gone.get("pass", "fwd")
    r["matrix"]["buckets"] = [b for b in r["matrix"]["buckets"] if b["name"] != gone["name"]]
    for group in (r["buckets"], r["matrix"]["buckets"]):
        total = sum(b["weight"] for b in group if b.get("pass", "fwd") == kind)
        for b in group:
            if b.get("pass", "fwd") == kind:
                b["weight"] /= total


def _swapped(r):
    a, b = r["buckets"][0], r["buckets"][1]
    a["weight"], b["weight"] = b["weight"], a["weight"]


@pytest.mark.parametrize("tamper, needle", [
    (_swapped, "where the matrix the receipt embeds has weight"),
    (_rescaled, "differs from cuda-v2.toml, whose sha256 the receipt states"),
])
def test_bench_check_holds_the_buckets_to_the_declared_matrix(tamper, needle):
    """A bucket re-weighted, or dropped with the rest rescaled to sum to 1, passed before."""
    from iomodel.bench.receipt import check_receipt

    receipt = json.loads((ROOT / "receipts" / "bench-h200-v4.json").read_text())
    tamper(receipt)
    assert any(needle in v for v in check_receipt(receipt)), check_receipt(receipt)


def test_a_spec_edited_after_measuring_is_caught_by_the_recorded_grid(tmp_path):
    """Heads 71 -> 142 on a Falcon-7B training step reconciled as a model gap with a model cause; the forward's
    launch__grid_size (T_r·B·H programs) says the spec is not what ran."""
    data = _one_shape(SPLIT1, lambda s: s["spec"]["heads"] == 71)
    data["shapes"][0]["spec"]["heads"] = 142
    with pytest.raises(IomodelError, match=r"the id 'b1-h71-kv1-.*' names another layer than its spec, which gives "
                                           r"'b1-h142-kv1-"):  # the id says what ran (since 2026-12-06)
        Measurement.load(_write(tmp_path, data))
    row = reconcile(Measurement.load(_write(tmp_path, _re_id(data)))).rows[0]  # the id edited too
    assert row.error.startswith("the forward kernel's recorded grid, ") and row.error.endswith(
        "the spec or the record was edited after measuring")
    assert "·142 = " in row.error



def test_a_decode_spec_edited_after_measuring_is_caught_by_the_recorded_grid(tmp_path):
    """The decode kernel's launch__grid_size is S·B·H / P programs (kernels/flash_attention.py's decode plan), its
    combine's B·H·N_q (twenty-second session; the guard covered the prefill forward only). The decode-splits
    receipt's B 1, H 32, 32 splits, 4 heads a program: 256 programs, 32 combine programs. Heads 32 -> 64 with the id
    edited too was reconciled as a model gap; every committed decode launch holds the rule (the receipt reconciles
    without that error)."""
    from iomodel.measure.records import Measurement

    path = ROOT / "receipts" / "ncu-h200-decode-splits1-2026-12-01.json"
    sid = "b1-h32-kv8-d128-bf16-q1-k65536-br-tiled"
    data = _one_shape(path, lambda s: s["id"] == sid)
    assert [k["metrics"]["launch__grid_size"] for k in data["shapes"][0]["kernels"]] == [256, 32]
    assert reconcile(Measurement.load(_write(tmp_path, data))).rows[0].error is None
    data["shapes"][0]["spec"]["heads"] = 64
    row = reconcile(Measurement.load(_write(tmp_path, _re_id(data)))).rows[0]
    assert row.error == ("the decode kernel's recorded grid, 256 programs, is not the spec's S·B·H / P = 32·1·64 / 4 = "
                         "512: the spec or the record was edited after measuring")
    data["shapes"][0]["spec"]["heads"] = 32
    data["shapes"][0]["kernels"][1]["metrics"]["launch__grid_size"] = 64  # the combine's grid edited
    row = reconcile(Measurement.load(_write(tmp_path, _re_id(data)))).rows[0]
    assert row.error == ("the decode combine kernel's recorded grid, 64 programs, is not the spec's B·H·N_q = 1·32·1 = "
                         "32: the spec or the record was edited after measuring")
    assert all(r.error is None or "recorded grid" not in r.error for r in reconcile(Measurement.load(path)).rows)


def test_a_training_steps_backward_config_edited_after_measuring_is_caught_by_its_recorded_grids(tmp_path):
    """The backward kernels' launch__grid_size (iomodel.schedule.grid.backward_programs) is checked as the forward's
    is (twenty-third session: a training step's backward config edited after measuring reconciled as a model gap).
    The train hold-out's first shape: B 4, H 12, N 1,536, BWD_BLOCK_N 128, DQ_BLOCK_M 128, PREPROCESS_BLOCK_M 128:
    576 programs each. Its dQ tiles edited to 64 rows: the spec's 24·4·12 = 1,152 dQ programs, 576 recorded."""
    from iomodel.measure.records import Measurement
    from iomodel.schedule.grid import backward_programs

    path = ROOT / "receipts" / "ncu-h200-train-holdout1-2026-12-01.json"
    data = json.loads(path.read_text())
    data["shapes"] = data["shapes"][:1]
    shape = data["shapes"][0]
    assert [(k["name"], k["metrics"]["launch__grid_size"]) for k in shape["kernels"]] == [
        ("_attn_fwd_tma", 576), ("_bwd_preprocess", 576), ("_bwd_dkdv", 576), ("_bwd_dq", 576)]
    m = Measurement.load(_write(tmp_path, data))
    assert backward_programs(m.shapes[0].spec, m.shapes[0].tiling())["_bwd_dq"] == (
        576, "ceil(N_q / DQ_BLOCK_M)·B·H", "12·4·12")
    assert reconcile(m).rows[0].error is None
    shape["config"]["backward"]["dq_block_m"] = 64
    row = reconcile(Measurement.load(_write(tmp_path, data))).rows[0]
    assert row.error == ("the _bwd_dq kernel's recorded grid, 576 programs, is not the spec's ceil(N_q / DQ_BLOCK_M)·B·H "
                         "= 24·4·12 = 1,152: the spec or the record was edited after measuring")
    shape["config"]["backward"]["dq_block_m"] = 128
    shape["kernels"][2]["metrics"]["launch__grid_size"] = 1152  # the dK/dV launch's grid edited
    row = reconcile(Measurement.load(_write(tmp_path, data))).rows[0]
    assert row.error == ("the _bwd_dkdv kernel's recorded grid, 1,152 programs, is not the spec's "
                         "ceil(N_k / BWD_BLOCK_N)·B·H_kv = 12·4·12 = 576: the spec or the record was edited after "
                         "measuring")


# --- a third adversarial user (2026-12-05, later): each was a traceback, a hang, a silent result or a misleading line


@pytest.mark.parametrize("argv, needles", [
    # the SRAM-size figure's FlashAttention-1 reference has no window: a KeyError before
    (["plot", "--window", "100", "-o", "{tmp}/p"], ("the SRAM-size plot compares FlashAttention-1's K/V-stationary "
                                                    "schedule", "use --kind blocks, or --window none")),
    (["worksheet", "--window", "100", "--plot-dir", "{tmp}/p"], ("use iomodel plot --kind blocks, or --window none",)),
    # int64 overflow in numpy: an OverflowError before
    (["plot", "--batch", str(2**63), "-o", "{tmp}/p"], ("too large for exact int64 evaluation",
                                                        "use a smaller --batch, --heads or --seqlen for the plot")),
    # a causal layer's right side was set to 0 silently, the Reproduce line keeping 1,1
    (["worksheet", "--window", "1,1"], ("--window 1,1 reaches 1 key right of the diagonal, which the causal mask "
                                        "hides",)),
    (["worksheet", "--window", "-1,5"], ("reaches 5 keys right of the diagonal",)),
])
def test_third_round_cli_inputs_are_one_line_errors(capsys, tmp_path, argv, needles):
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, [a.replace("{tmp}", str(tmp_path)) for a in argv], *needles)
    assert not (tmp_path / "p").exists() or not any((tmp_path / "p").iterdir())  # nothing half written


def test_a_causal_window_with_no_right_side_still_runs(capsys):
    from test_cli_errors import run_cli

    for window in ("5,0", "4,-1"):
        code, out, _ = run_cli(capsys, ["worksheet", "--window", window, "--seqlen", "1024", "--format", "json"])
        assert code == 0 and json.loads(out)["spec"]["window_left"] == int(window.split(",")[0])


def test_a_sweep_is_counted_before_it_is_expanded(tmp_path):
    """Three lists of a thousand values (2·10^9 shapes) grew to 3.9 GB in 2 minutes before --limit applied."""
    from iomodel.measure.sweep import MAX_SWEEP_SHAPES, load_sweep

    many = ", ".join(str(i) for i in range(1, 1001))
    path = tmp_path / "big.toml"
    path.write_text(f'name = "big"\n[defaults]\nhead_dim = 16\ndtype = "fp16"\n[[shape]]\nheads = [{many}]\n'
                    f"seqlen = [{', '.join(str(i) for i in range(16, 1016))}]\nbatch = [{many}]\n")
    t = time.perf_counter()
    with pytest.raises(IomodelError, match=f"expand to more than {MAX_SWEEP_SHAPES:,} shapes"):
        load_sweep(path)
    assert time.perf_counter() - t < 5


@pytest.mark.parametrize("ncu, needle", [
    ('dram_pass = "no"', "[ncu] dram_pass must be true or false, got the string 'no'"),
    ('metrics = [""]', "[ncu] metrics has '', not one metric name"),
    ('metrics = ["a,b"]', "[ncu] metrics has 'a,b', not one metric name"),
])
def test_a_sweeps_ncu_settings_are_checked(tmp_path, ncu, needle):
    from iomodel.measure.sweep import load_sweep

    path = tmp_path / "s.toml"
    path.write_text(f'name = "s"\n[ncu]\n{ncu}\n[[shape]]\nheads = 2\nkv_heads = 2\nhead_dim = 16\nseqlen = 32\ndtype = "fp16"\n')
    with pytest.raises(IomodelError) as exc:
        load_sweep(path)
    assert needle in str(exc.value)


@pytest.mark.parametrize("name", ["../../etc/x", "a/b", ".hidden", "two words"])
def test_a_sweep_name_that_would_leave_its_folder_is_refused(tmp_path, name):
    """The name becomes part of output paths (interp-<name>/, <name>-<date>.json): '../../etc/x' wrote ./etc/x-...json."""
    from iomodel.measure.sweep import load_sweep

    path = tmp_path / "s.toml"
    path.write_text(f'name = "{name}"\n[[shape]]\nheads = 2\nkv_heads = 2\nhead_dim = 16\nseqlen = 32\ndtype = "fp16"\n')
    with pytest.raises(IomodelError, match="name must be letters, digits"):
        load_sweep(path)


@pytest.mark.parametrize("budget", [float("nan"), -1.0, 0.0])
def test_a_budget_that_would_measure_nothing_is_refused_before_any_run(budget):
    """NaN became max(1, nan) = 1 s a batch and every later batch 'not run'; 0 or -1 measured nothing."""
    from iomodel.measure.driver import profile
    from iomodel.measure.sweep import load_sweep

    ran = []
    with pytest.raises(IomodelError, match="--budget-s must be a positive number of seconds"):
        profile(load_sweep(ROOT / "sweeps" / "interpreter-ragged.toml"), runner=lambda argv, t: ran.append(argv) or 0,
                budget_s=budget)
    assert ran == []


def test_reconcile_outputs_that_would_overwrite_each_other_are_refused(capsys, tmp_path):
    from test_cli_errors import assert_one_line_error

    receipt = str(HOLDOUT4)
    assert_one_line_error(capsys, ["reconcile", receipt, "--json", f"{tmp_path}/x.json", "--markdown",
                                   f"{tmp_path}/./x.json"], "--json and --markdown name the same file")
    assert_one_line_error(capsys, ["reconcile", receipt, "--plot-dir", f"{tmp_path}/px", "--json",
                                   f"{tmp_path}/px/hbm-vs-seqlen.png"], "is a plot that --plot-dir writes")
    assert not (tmp_path / "x.json").exists()


def test_a_matrix_seed_torch_cannot_take_is_refused_when_parsed(tmp_path):
    """seed = 10^20 parsed, then torch.manual_seed raised an overflow after the run started."""
    from iomodel.bench.matrix import load_matrix

    path = tmp_path / "m.toml"
    path.write_text(MATRIX.replace("SECOND", "256").replace("seed = 0", "seed = 99999999999999999999"))
    with pytest.raises(IomodelError, match="seed must be an integer from 0 to 2"):
        load_matrix(path)


def test_bench_check_recomputes_the_whole_spread_not_only_the_median():
    from iomodel.bench.receipt import check_receipt

    receipt = json.loads((ROOT / "receipts" / "bench-h200-v4.json").read_text())
    res = receipt["buckets"][0]["shapes"][0]["results"]
    fused = next(k for k, r in res.items() if k != "eager" and r.get("status") == "ok" and r.get("samples_s"))
    res[fused]["time_s"].update(max=999.0, p90=500.0, n=1234)
    got = check_receipt(receipt)
    assert any(f"{fused}: time_s p90, max, n do not match its samples" in v for v in got), got


def test_an_overlay_point_beyond_int64_is_refused():
    from iomodel.report.plot import _check_measured

    with pytest.raises(IomodelError, match="'bytes' = 1e\\+300 is above 2\\^63"):
        _check_measured([{"seqlen": 1024, "bytes": 1e300, "level": "HBM"}], ("seqlen",), kind="seqlen")


def test_a_gpu_matrix_on_the_cpu_and_endless_reps_are_refused(capsys, monkeypatch):
    """`bench --matrix cuda` on a machine without a GPU ran the GPU-sized matrix on the CPU (still going after 2
    minutes); --reps 10^11 was accepted."""
    from test_cli_errors import assert_one_line_error

    import iomodel.commands.bench as bench_cmd

    monkeypatch.setattr(bench_cmd, "_default_device", lambda: "cpu")
    assert_one_line_error(capsys, ["bench", "--matrix", "cuda"], "matrix 'cuda' was sized for a CUDA GPU",
                          "use --matrix cpu")
    assert_one_line_error(capsys, ["bench", "--device", "cpu", "--reps", str(10**11)],
                          f"is more than {bench_cmd.MAX_REPS:,} samples a backend and shape")


@pytest.mark.parametrize("value, want", [("", True), ("0", False), ("Off", False), ("yes", True), ("disabled", None),
                                         ("nope", None)])
def test_the_kernel_switches_accept_only_switch_values(monkeypatch, value, want):
    """IOMODEL_GLUON=disabled meant on, silently."""
    from iomodel.schedule.capabilities import env_switch

    monkeypatch.setenv("IOMODEL_GLUON", value)
    if want is None:
        with pytest.raises(IomodelError, match=f"IOMODEL_GLUON='{value}' is not a switch"):
            env_switch("IOMODEL_GLUON")
    else:
        assert env_switch("IOMODEL_GLUON") is want


def test_regenerate_bundled_refuses_an_output_it_would_ignore(capsys, tmp_path):
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["worksheet", "--regenerate-bundled", "-o", str(tmp_path / "x.md")],
                          "-o applies to one layer's worksheet; --regenerate-bundled rewrites every bundled worksheet",
                          "drop it")


@pytest.mark.parametrize("flags, named", [
    (["--seqlen", "4096"], "--seqlen applies"),
    (["--preset", "mistral-7b", "--pass", "fwd+bwd"], "--preset, --pass apply"),
    (["--grid-order", "heads-fastest", "--format", "json"], "--format, --grid-order apply"),
    (["--no-causal"], "--causal applies"),
])
def test_regenerate_bundled_refuses_the_layer_flags_it_would_ignore(capsys, flags, named):
    """Each bundled worksheet is written from its own layer: a layer or schedule flag beside --regenerate-bundled
    was ignored without a word (the help said so); it is refused before any file is rewritten."""
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["worksheet", "--regenerate-bundled", *flags], named, "drop them" if " apply" in
                          named else "drop it")


def test_a_ragged_batch_of_too_many_distinct_lengths_is_refused_at_once(capsys, tmp_path):
    """10^6 distinct lengths (within the 10^6 sequences allowed) ran for 351 s: each distinct length is summed on its
    own. Past 20,000 distinct lengths it is one line; 20,000 ran in 7.7 s on the 2-core CPU."""
    from test_cli_errors import assert_one_line_error

    from iomodel.spec.resolve import MAX_DISTINCT_LENGTHS

    path = tmp_path / "lengths.txt"
    path.write_text("\n".join(str(n) for n in range(1, MAX_DISTINCT_LENGTHS + 2)) + "\n")
    t = time.perf_counter()
    assert_one_line_error(capsys, ["worksheet", "--seqlens-file", str(path)],
                          f"holds {MAX_DISTINCT_LENGTHS + 1:,} distinct lengths, more than the "
                          f"{MAX_DISTINCT_LENGTHS:,}", "round the lengths")
    assert time.perf_counter() - t < 10


def test_a_refused_plot_leaves_no_folder_behind(capsys, tmp_path):
    """`iomodel plot -o DIR` made DIR (and its parents) before refusing the layer's SRAM-size figure."""
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["plot", "--window", "100", "-o", str(tmp_path / "p" / "sub")],
                          "the SRAM-size plot compares FlashAttention-1's K/V-stationary schedule")
    assert not (tmp_path / "p").exists()


# ---- a fourth fresh user's findings (2026-12-05) ----

def test_a_byte_or_sector_metric_without_its_unit_is_refused(tmp_path):
    """A record whose kernel lost its ``units`` read lts__t_sectors_* at scale 1: the L2 bytes came out 32x low and the
    row said NO without a cause. Now the record is refused, naming the metric."""
    data = json.loads(Path("receipts/ncu-h200-2026-11-29.json").read_text())
    del data["shapes"][0]["kernels"][0]["units"]
    with pytest.raises(IomodelError, match=r"kernels\[0\]\.units has no unit for '[a-z_]+__[a-z_.]+' .*a byte, sector "
                                           r"or time count is read through its unit \(a sector is 32 bytes\)"):
        Measurement.load(_write(tmp_path, data))


def test_an_l2_source_the_record_did_not_collect_is_refused(capsys):
    """--l2-source sm on a record without the SM (crossbar) metrics left every L2 cell empty, unsaid."""
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["reconcile", "receipts/ncu-h200-2026-11-29.json", "--l2-source", "sm"],
                          "l2_source 'sm' compares sm_read_bytes and sm_write_bytes, which this record did not collect",
                          "use --l2-source auto or tex or all")


def test_toml_nested_too_deep_is_one_line_in_every_reader(tmp_path, capsys):
    """An array nested 1,000 deep made tomllib raise RecursionError: a 3,000-line traceback from --schedule, a sweep,
    a bench matrix and a bench policy. Every TOML reader now says it in one line (iomodel.paths.toml_loads)."""
    from test_cli_errors import assert_one_line_error

    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 1000 + "]" * 1000 + "\n")
    assert_one_line_error(capsys, ["worksheet", "--schedule", str(deep)], "is not valid TOML (arrays or tables nested "
                                                                          "too deep to read)")
    assert_one_line_error(capsys, ["validate", str(deep), "--interpreter"], "nested too deep")
    assert_one_line_error(capsys, ["bench", "--matrix", str(deep)], "invalid TOML: arrays or tables nested too deep")
    from iomodel.bench.policy import _read_toml

    with pytest.raises(IomodelError, match="invalid TOML: arrays or tables nested too deep to read"):
        _read_toml(deep)


def test_input_paths_that_cannot_be_read_say_so(tmp_path, capsys):
    """A file name too long was reported as 'cannot write the output'; /dev/zero as --config 'does not exist'; a
    preset name with ../ loaded any file."""
    from test_cli_errors import assert_one_line_error

    long = str(tmp_path / ("a" * 300 + ".json"))
    assert_one_line_error(capsys, ["worksheet", "--config", long], "cannot be read (File name too long)")
    assert_one_line_error(capsys, ["reconcile", long], "measurement file", "cannot be read (File name too long)")
    assert_one_line_error(capsys, ["worksheet", "--config", "/dev/zero"],
                          "is not a regular file (a device, pipe or socket): pass a readable JSON file")
    assert_one_line_error(capsys, ["worksheet", "--schedule", "/dev/null"], "is not a regular file")
    assert_one_line_error(capsys, ["worksheet", "--config", str(tmp_path / "none.json")], "does not exist")
    assert_one_line_error(capsys, ["worksheet", "--preset", "../presets/llama-3-8b"], "unknown preset")


def test_reproduce_line_quotes_paths_and_csv_comments_keep_their_lines(tmp_path, capsys):
    """A config path with a space gave a Reproduce line that failed when pasted; one with a line break spilled CSV
    comment lines into the rows."""
    import shlex
    import shutil

    from test_cli_errors import run_cli

    folder = tmp_path / "odd dir"
    folder.mkdir()
    path = folder / "my config.json"
    shutil.copy("worksheets/presets/llama-3-8b.json", path)
    code, first, err = run_cli(capsys, ["worksheet", "--config", str(path), "--seqlen", "1024"])
    assert code == 0, err
    line = next(x for x in first.splitlines() if x.startswith("Reproduce: `"))
    argv = shlex.split(line[len("Reproduce: `"):-1])
    assert argv[argv.index("--config") + 1] == str(path)
    code, second, err = run_cli(capsys, argv[1:])
    assert code == 0 and second == first, err
    broken = tmp_path / "a\nb"
    broken.mkdir()
    shutil.copy("worksheets/presets/llama-3-8b.json", broken / "c.json")
    code, csv_text, err = run_cli(capsys, ["worksheet", "--config", str(broken / "c.json"), "--seqlen", "1024",
                                           "-f", "csv"])
    assert code == 0, err
    rows = csv_text.splitlines()
    head = [i for i, r in enumerate(rows) if not r.startswith("#")][0]
    assert rows[head].startswith("algorithm,kind,tensor") and all(r.startswith("#") for r in rows[:head])
    assert any("a\\nb" in r for r in rows[:head])


def test_a_long_window_band_or_another_key_order_is_not_simulated_for_minutes():
    """A window band on a long training step (2^17 tokens, window 65,536: 85 s) and the descending key order at 2^18
    tokens (97 s, 4.2 GB) ran the wave-by-wave simulation within its length bound; past L2_SIMULATED_MAX_WORK work
    units the worksheet says why it does not compute the estimate. The work units are hand-counted here."""
    from iomodel.cache.estimate import L2_SIMULATED_MAX_WORK, not_estimated, simulated_work
    from iomodel.schedule.launch import Schedule
    from iomodel.spec import LayerSpec, Tiling

    t = Tiling(block_m=128, block_n=128, bwd_block_m=32, bwd_block_n=64, dq_block_m=128, dq_block_n=64)
    band = LayerSpec(1, 32, 8, 128, 131072, 131072, dtype="bf16", causal=True, window_left=65536, backward=True)
    # forward 32·1024·cdiv(65537, 128) = 32·1024·513; dK/dV 32·2048·cdiv(65537, 32); dQ 32·1024·cdiv(65537, 64)
    assert simulated_work(band, t) == 32 * 1024 * 513 + 5 * 32 * (2048 * 2049 + 1024 * 1025) == 856_162_304
    why = not_estimated(band, t)
    assert why.startswith("its window band is simulated block by block") and "856,162,304 work units" in why
    short = LayerSpec(1, 32, 8, 128, 32768, 32768, dtype="bf16", causal=True, window_left=16384, backward=True)
    assert simulated_work(short, t) < L2_SIMULATED_MAX_WORK and not_estimated(short, t) is None
    spec = LayerSpec(1, 32, 8, 128, 262144, 262144, dtype="bf16", causal=True)
    desc = Schedule(block_m=128, block_n=128, key_order="descending")
    assert simulated_work(spec, t, reordered=True) == 15 * 32 * 2048 * 2048 // 2
    assert "descending key blocks is simulated wave by wave" in not_estimated(spec, t, desc)
    assert not_estimated(spec, t) is None  # the bundled order: the fast evaluation, any length
    assert not_estimated(LayerSpec(1, 32, 8, 128, 65536, 65536, dtype="bf16", causal=True), t, desc) is None


def test_bench_refuses_a_shape_that_cannot_fit_memory(monkeypatch):
    """A decode shape of batch 100,000 and 256 keys ran for 71 s and was killed by the out-of-memory killer at 24 GB
    with no message. The matrix is now refused before anything is allocated (bench.inputs.check_memory)."""
    import iomodel.bench.inputs as inputs
    from iomodel.bench.matrix import parse_matrix

    text = Path("tests/data/matrix-good.toml").read_text()
    m = parse_matrix(text, "m.toml")
    d = m.buckets[1]  # the decode bucket (fp32)
    s = d.shapes[0]
    q = s.batch * d.heads * s.seqlen_q * d.head_dim
    kv = s.batch * d.kv_heads * s.seqlen_k * d.head_dim
    assert inputs.least_bytes(d, s) == (2 * q + 2 * kv) * 4 + 4 * max(q, kv) + 8 * (2 * kv + q)
    monkeypatch.setattr(inputs, "available_bytes", lambda device: inputs.least_bytes(d, s) - 1)
    with pytest.raises(IomodelError, match=r"bucket 'd' shape #1 \(.*\) needs at least .* GiB of cpu memory for its "
                                           r"tensors and float64 reference, above the .* GiB available: lower its "
                                           r"batch or lengths"):
        inputs.check_memory([d], "cpu")
    monkeypatch.setattr(inputs, "available_bytes", lambda device: None)  # unknown: not refused
    inputs.check_memory([d], "cpu")


def test_the_paged_decode_blocks_plot_does_not_price_tiles_that_cannot_run():
    """`iomodel plot --phase decode --page-size 16 --kind blocks` drew bytes for BLOCK_N 32-256, which the worksheet
    and the launcher refuse (a key block must lie in one page: schedule.tiles.page_block_refusal, their one rule).
    Those cells now say they cannot run, carry no bytes and no colour, and the footer names the page size."""
    from iomodel.report.plot import plot_blocks
    from iomodel.schedule.tiles import page_block_refusal
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import get_hardware

    assert page_block_refusal(32, 16, "use --block-n 16 or less") == \
        "BLOCK_N 32 exceeds page_size 16 (a key block must lie in one page): use --block-n 16 or less"
    assert page_block_refusal(16, 16, "") is None and page_block_refusal(256, None, "") is None
    spec = LayerSpec(1, 32, 8, 128, 1, 8192, dtype="bf16", causal=True, causal_align="bottom-right", phase="decode",
                     page_size=16)
    fig = plot_blocks(spec, Tiling(block_m=16, block_n=16, num_splits=64, heads_per_program=4),
                      get_hardware("H200"), block_sizes=(16, 32, 64), splits=(1, 2))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]
    cannot = [t for t in texts if t.startswith("cannot run:")]
    assert len(cannot) == 2 * 3  # BLOCK_N 32 and 64 on the rows 1, 2 and 64 (the layer's)
    assert all("MiB" not in t for t in cannot)
    assert "paged KV cache of 16 tokens a page: BLOCK_N above it cannot run" in " ".join(texts).replace("\n", " ")
    import matplotlib.pyplot as plt

    plt.close(fig)


@pytest.mark.parametrize("extra, words", [
    (["--interpreter", "--budget-s", "-1"], "--budget-s applies to Nsight Compute runs, not to --interpreter"),
    (["--interpreter", "--ncu", "/nonexistent", "--metrics", "foo"], "--ncu, --metrics apply to Nsight Compute runs"),
    (["--interpreter", "--dry-run"], "--dry-run applies to Nsight Compute runs"),
    (["--budget-s", "nan"], "--budget-s must be a positive number of seconds, got nan"),
    (["--budget-s", "0", "--dry-run"], "--budget-s must be a positive number of seconds, got 0.0"),
    (["--metrics", "foo", "--dry-run"], "--metrics 'foo': 'foo' is not an Nsight Compute metric name"),
    (["--metrics", ",", "--dry-run"], "--metrics ',': no metric an Nsight Compute metric name"),
    (["--limit", "-1", "--dry-run"], "--limit must be 1 or more (the first N shapes), got -1"),
])
def test_validate_options_that_do_not_apply_or_make_no_sense_are_refused(capsys, extra, words):
    """validate --interpreter took --budget-s -1, --ncu /nonexistent, --metrics foo and --dry-run (which printed ncu
    command lines) without a word; --limit -1 said only 'no shapes left'."""
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["validate", "sweeps/h200-train-holdout9.toml", *extra], words)


def test_run_options_with_bench_check_swapped_reconcile_formats_and_a_causal_two_sided_sweep_window(tmp_path, capsys):
    """bench --check ignored --reps; reconcile --json x.md wrote JSON into a .md; a sweep shape with window [3, 3]
    and causal = true was measured though the worksheet refuses --window 3,3 under causal (one rule now,
    spec.layer.causal_right_refusal)."""
    from test_cli_errors import assert_one_line_error

    assert_one_line_error(capsys, ["bench", "--check", "receipts/bench-cpu.json", "--reps", "3"],
                          "--reps applies to a benchmark run, not to --check")
    assert_one_line_error(capsys, ["reconcile", "receipts/ncu-h200-2026-11-29.json", "--json", str(tmp_path / "r.md")],
                          "--json", "has the suffix of the other format (--json writes JSON): name it r.json")
    assert_one_line_error(capsys, ["reconcile", "receipts/ncu-h200-2026-11-29.json", "--markdown",
                                   str(tmp_path / "r.json")], "(--markdown writes Markdown): name it r.md")
    sweep = tmp_path / "s.toml"
    sweep.write_text('name = "s"\nhardware = "H200"\n[defaults]\nheads = 4\nkv_heads = 4\nhead_dim = 64\n'
                     'dtype = "fp16"\n[[shape]]\nseqlen = 256\ncausal = true\nwindow = [3, 3]\nimpls = ["tiled"]\n')
    assert_one_line_error(capsys, ["validate", str(sweep), "--interpreter"],
                          "window [3, 3] reaches 3 keys right of the diagonal, which the causal mask hides")
    assert_one_line_error(capsys, ["worksheet", "--window", "3,3"],
                          "--window 3,3 reaches 3 keys right of the diagonal, which the causal mask hides")


def test_fourth_round_wording(tmp_path, capsys):
    """A byte-order mark in --seqlens-file, reconcile --impl naming no recorded implementation, a 3,000-character
    grid order echoed whole, BLOCK_M 2^63 - 1 answered with 'use 4611686018427387904', a record counting 1e30 bytes
    reconciled as EiB: each now one short line that says what to change."""
    from test_cli_errors import assert_one_line_error

    from iomodel.spec import Tiling
    from iomodel.spec.ragged import read_seqlens_file

    bom = tmp_path / "lens.txt"
    bom.write_bytes(b"\xef\xbb\xbf512\n77\n")
    assert read_seqlens_file(bom) == ((512, 512), (77, 77))
    sweep = tmp_path / "sq.toml"
    sweep.write_text('name = "s"\nhardware = "H200"\n[defaults]\nheads = 4\nkv_heads = 4\nhead_dim = 64\n'
                     'dtype = "fp16"\n[[shape]]\nseqlens = [[3, 0], 17]\nimpls = ["tiled"]\n')
    assert_one_line_error(capsys, ["validate", str(sweep), "--interpreter"],
                          "seqlens[0] = [3, 0]: every length must be a whole number of tokens, 1 or more")
    assert_one_line_error(capsys, ["reconcile", "receipts/ncu-h200-2026-11-29.json", "--impl", "bogus"],
                          "no measured shape of implementation(s) 'bogus': this record holds 'baseline', 'tiled'")
    sched = tmp_path / "go.toml"
    sched.write_text(f'grid_order = "{"x" * 3000}"\n')
    line = assert_one_line_error(capsys, ["worksheet", "--schedule", str(sched)], "grid order 'xxx")
    assert len(line) < 400
    with pytest.raises(IomodelError, match=r"BLOCK_M must be a power of two, got 9223372036854775807: use a tile such "
                                           r"as 64 or 128 rows"):
        Tiling(block_m=2**63 - 1)
    with pytest.raises(IomodelError, match=r"BLOCK_N must be a power of two, got 96: use 64 or 128"):
        Tiling(block_n=96)
    data = json.loads(Path("receipts/ncu-h200-2026-11-29.json").read_text())
    data["shapes"][0]["kernels"][0]["metrics"]["dram__bytes_read.sum"] = 1e30
    with pytest.raises(IomodelError, match=r"metrics\['dram__bytes_read.sum'\] is 1e\+30, above 9.22e\+18 \(2\^63\)"):
        Measurement.load(_write(tmp_path, data))


def test_a_ragged_batch_with_a_long_window_band_is_bounded_as_a_dense_one():
    """--seqlens 262144*2 --window 131072 simulated the band for 44-107 s and 1.4-3.1 GB where the dense --batch 2
    layer said at once why not; the ragged bound now sums simulated_work over the sequences."""
    from iomodel.cache.estimate import L2_SIMULATED_MAX_WORK, ragged_not_estimated, simulated_work
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.ragged import RaggedSpec

    t = Tiling(block_m=64, block_n=64)
    base = LayerSpec(2, 32, 8, 128, 262144, 262144, dtype="bf16", causal=True, window_left=131072)
    r = RaggedSpec(base, ((262144, 262144), (262144, 262144)))
    work = 2 * simulated_work(r.sequence(262144, 262144), t)
    assert work == 2 * 32 * 4096 * 2049 > L2_SIMULATED_MAX_WORK
    assert ragged_not_estimated(r, t).startswith(f"its window band is simulated block by block: {work:,} work units")
    short = RaggedSpec(base.with_(seqlen_q=4096, seqlen_k=4096, window_left=1024), ((4096, 4096), (2048, 2048)))
    assert ragged_not_estimated(short, t) is None
