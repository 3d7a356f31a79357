"""The launch schedule as data (issue 12, items 1 and 6): orders, L2 waves, checks, the worksheet options.

The L2 counts are hand-computed with the fully associative LRU (``ways=None``, effective
fraction 1, so written bytes weigh as read bytes): items enter at the most recent end, the
oldest leave first (a whole K/V chunk entirely, a streamed Q/O/LSE tile in part).
"""

from __future__ import annotations

import json

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled
from iomodel.errors import IomodelError
from iomodel.schedule.grid import prefill_waves
from iomodel.schedule.launch import BUNDLED, Schedule, load_schedule, program_runs, tiles_per_group
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import A100_80GB, H200, get_hardware

from test_cli_errors import assert_one_line_error, run_cli


def test_program_runs_by_hand():
    # T_r = 3 tiles, B·H = 2 rows. tiles-fastest: p = i + 3·bh; heads-fastest: p = bh + 2·i
    assert program_runs(0, 6, 3, 2, 3) == [(0, 0, 3), (1, 0, 3)]
    assert program_runs(2, 5, 3, 2, 3) == [(0, 2, 3), (1, 0, 2)]
    assert program_runs(0, 6, 3, 2, 1) == [(0, 0, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2), (0, 2, 3), (1, 2, 3)]
    # grouped:2 over T_r = 3: tiles 0-1 of row 0, of row 1, then tile 2 of row 0, of row 1
    assert program_runs(0, 6, 3, 2, 2) == [(0, 0, 2), (1, 0, 2), (0, 2, 3), (1, 2, 3)]
    assert program_runs(3, 5, 3, 2, 2) == [(1, 1, 2), (0, 2, 3)]
    assert tiles_per_group("grouped:8", 3) == 3


def test_grouped_extremes_are_the_plain_orders():
    spec, t = LayerSpec(2, 4, 2, 32, 700, 700, "bf16", causal=True), Tiling(block_m=64, block_n=32)
    t_r = 11
    assert prefill_waves(spec, t, 5, grid_order="grouped:1") == prefill_waves(spec, t, 5, grid_order="heads-fastest")
    assert prefill_waves(spec, t, 5, grid_order=f"grouped:{t_r}") == prefill_waves(spec, t, 5)
    # the order never changes what is requested (SRAM_fill)
    for order in ("heads-fastest", "grouped:3"):
        for key in ("ascending", "descending"):
            assert prefill_waves(spec, t, 5, grid_order=order, key_order=key)[1:] == prefill_waves(spec, t, 5)[1:]


def _l2(spec, tiling, capacity, sms, **sched):
    params = L2Params(capacity, sms, 1, l2_fraction=1.0, ways=None)  # fully associative, exact bytes
    return predict_tiled(spec, tiling, params, schedule=Schedule.for_tiling(tiling, **sched))


def test_heads_fastest_rereads_kv_that_tiles_fastest_reads_once():
    """B = 1, H = H_kv = 2, N = 256, d = 16, fp16, BLOCK_M = 64 (T_r = 4), W = 2, L2 28,672 B.

    K (or V) of one head: 256·16·2 = 8,192 B (one chunk); a Q or O tile 2,048 B, LSE 256 B.
    tiles-fastest: each wave runs two tiles of one head, so a wave needs one head's K/V
    (16,384 B) and keeps it until the next wave of that head: Q 16,384 + K/V 32,768 = 49,152 B.
    heads-fastest: each wave runs tile i of both heads, K0 V0 K1 V1 = 32,768 B > 28,672 B. After
    wave 1 the LRU holds K1, V1, O/LSE (K0 left when V1 came, V0 when O of head 1 came); wave 2
    reads Q, then K0 (evicts K1), V0 (evicts V1), K1 (evicts the outputs), V1 (evicts the Q tiles
    and K0): every wave misses all 32,768 B, 4 waves: K/V 131,072 + Q 16,384 = 147,456 B.
    """
    spec, tiling = LayerSpec(1, 2, 2, 16, 256, 256, "fp16", causal=False), Tiling(block_m=64, block_n=32)
    tiles = _l2(spec, tiling, 28672, 2)
    heads = _l2(spec, tiling, 28672, 2, grid_order="heads-fastest")
    assert tiles.hbm_read_bytes == 49152
    assert heads.hbm_read_bytes == 147456
    assert tiles.no_reuse_read_bytes == heads.no_reuse_read_bytes == 16384 + 2 * 4 * 16384  # K/V once per tile
    assert tiles.hbm_read_bytes == _l2(spec, tiling, 28672, 2, grid_order="grouped:4").hbm_read_bytes
    assert heads.hbm_read_bytes == _l2(spec, tiling, 28672, 2, grid_order="grouped:1").hbm_read_bytes


def test_descending_keys_keep_the_shared_chunk_in_l2():
    """B = H = H_kv = 1, N = 2048 causal, d = 16, fp16, BLOCK_M = 1024 (T_r = 2), reverse tiles, W = 1.

    K/V chunks of 1,024 rows: 32,768 B each; a Q or O tile 32,768 B, LSE 4,096 B; L2 196,608 B.
    Wave 1 runs tile 1 (keys 0..2047: chunks K0 V0 K1 V1), wave 2 tile 0 (chunk 0 only).
    Ascending: wave 1 touches K0, V0, K1, V1; wave 2's Q tile evicts Q's rest and K0, then K0
    evicts V0, V0 evicts K1: K/V 4 + 2 chunks. Descending: wave 1 touches K1, V1, K0, V0 (chunk 0
    last), wave 2's Q evicts K1 and K0, V0 hit: K/V 4 chunks. Q 65,536 B either way.
    """
    spec, tiling = LayerSpec(1, 1, 1, 16, 2048, 2048, "fp16", causal=True), Tiling(block_m=1024, block_n=64)
    up = _l2(spec, tiling, 196608, 1, tile_order="reverse")
    down = _l2(spec, tiling, 196608, 1, tile_order="reverse", key_order="descending")
    assert up.hbm_read_bytes == 65536 + 6 * 32768
    assert down.hbm_read_bytes == 65536 + 4 * 32768


def test_bundled_schedules_keep_the_bundled_bytes():
    spec = LayerSpec(1, 8, 2, 64, 3000, 3000, "bf16", causal=True)
    tiling = Tiling(block_m=128, block_n=64)
    params = L2Params(H200.l2_bytes, H200.num_sms, 2)
    for sched in BUNDLED:
        assert sched.bundled and sched.grid_order == "tiles-fastest" and sched.key_order == "ascending"
        got = predict_tiled(spec, tiling, params, schedule=sched)
        want = predict_tiled(spec, tiling, params, sched.tile_order)
        assert (got.hbm_read_bytes, got.hbm_write_bytes) == (want.hbm_read_bytes, want.hbm_write_bytes)
        assert got.assumptions == want.assumptions


@pytest.mark.parametrize("kw,fragment", [
    ({"grid_order": "diagonal"}, "grid order 'diagonal' is unknown: use --grid-order tiles-fastest, heads-fastest"),
    ({"grid_order": "grouped:0"}, "grid order 'grouped:0' is unknown"),
    ({"grid_order": "head-grouped:\u00b2"}, "grid order 'head-grouped:\u00b2' is unknown"),  # isdigit, not int
    ({"grid_order": "grouped:\u0662"}, "grid order 'grouped:\u0662' is unknown"),  # an Arabic-Indic two
    ({"tile_order": "sideways"}, "tile order 'sideways' is unknown: use --tile-order forward or reverse"),
    ({"key_order": "up"}, "key order 'up' is unknown: use --key-order ascending or descending"),
    ({"num_warps": 33}, "num_warps must be 1..32 (1,024 threads per program), got 33"),
    ({"programs_per_sm": 0}, "programs_per_sm must be a positive whole number, got 0"),
    ({"block_m": 96}, "BLOCK_M must be a power of two, got 96: use 64 or 128"),
])
def test_bad_schedule_is_one_line(kw, fragment):
    with pytest.raises(IomodelError) as exc:
        Schedule(**kw)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_limits_come_from_the_hardware():
    spec = LayerSpec(1, 8, 8, 128, 4096, 4096, "bf16")
    assert (H200.max_blocks_per_sm, H200.max_warps_per_sm, A100_80GB.max_blocks_per_sm) == (32, 64, 32)
    small = Schedule(block_m=16, block_n=16, num_stages=1, num_warps=1)  # 12,288 B per program
    small.check(spec, H200)
    with pytest.raises(IomodelError) as exc:
        Schedule(block_m=16, block_n=16, num_stages=1, num_warps=1, programs_per_sm=33).check(spec, H200)
    # the advice meets every limit at once: 233,472 // 12,288 = 19 programs of shared memory
    assert str(exc.value) == ("programs_per_sm 33 is over the H200's 32 resident blocks per SM (CUDA C++ Programming "
                              "Guide, compute capability 9.0): use --programs-per-sm 19 or fewer")
    with pytest.raises(IomodelError) as exc:
        Schedule(block_m=16, block_n=16, num_stages=1, num_warps=4, programs_per_sm=17).check(spec, H200)
    assert "17 × num_warps 4 = 68 warps is over the H200's 64 resident warps per SM" in str(exc.value)
    assert "use --programs-per-sm 16 or fewer" in str(exc.value)
    with pytest.raises(IomodelError) as exc:  # 98,304 B per program (128·128 + 2·2·64·128)·2; 233,472 B per SM
        Schedule(programs_per_sm=3).check(LayerSpec(1, 8, 8, 128, 4096, 4096, "bf16"), H200)
    assert "3 × 98,304 B of shared memory per program = 294,912 B is over the H200's 233,472 B per SM: " \
           "use --programs-per-sm 2 or fewer" in str(exc.value)
    with pytest.raises(IomodelError) as exc:  # the existing SRAM check: (256·256 + 2·4·256·256)·2 B per program
        Schedule(block_m=256, block_n=256, num_stages=4).check(LayerSpec(1, 8, 8, 256, 4096, 4096, "bf16"), H200)
    assert "need 1179648 B of shared memory" in str(exc.value) and "lower --block-m, --block-n or --num-stages" in str(exc.value)


def test_unknown_compute_capability_is_one_line():
    from dataclasses import replace

    with pytest.raises(IomodelError) as exc:
        replace(get_hardware("H200"), compute_capability=(7, 5)).max_blocks_per_sm
    assert "compute capability 7.5" in str(exc.value) and "\n" not in str(exc.value)


_SMALL = ["--preset", "llama-3-8b", "--seqlen", "1024", "-f", "json"]


def test_worksheet_records_the_schedule_and_its_estimate(capsys, tmp_path):
    code, out, err = run_cli(capsys, ["worksheet", *_SMALL])
    assert code == 0, err
    lpt = json.loads(out)["algorithms"]["tiled"]["l2_aware"]
    # causal, 32 rows whose K/V fit 8 MiB together, 32·8 programs: the kernel's LPT launch (lpt_launch_order)
    assert (lpt["schedule"]["grid_order"], lpt["schedule"]["tile_order"]) == ("head-grouped:32", "reverse")
    assert "head-grouped:32 grid with reverse tiles" in lpt["config_source"]
    code, out, err = run_cli(capsys, ["worksheet", *_SMALL, "--grid-order", "tiles-fastest"])
    assert code == 0, err
    base = json.loads(out)["algorithms"]["tiled"]["l2_aware"]
    assert base["schedule"]["grid_order"] == "tiles-fastest" and base["schedule"]["key_order"] == "ascending"
    assert base["schedule"]["programs_per_sm"] == base["programs_per_sm"]
    f = tmp_path / "s.toml"
    f.write_text('grid_order = "heads-fastest"\nkey_order = "descending"\nprograms_per_sm = 1\n')
    code, out, err = run_cli(capsys, ["worksheet", *_SMALL, "--schedule", str(f)])
    assert code == 0, err
    d = json.loads(out)
    got = d["algorithms"]["tiled"]["l2_aware"]
    assert got["schedule"]["grid_order"] == "heads-fastest" and got["schedule"]["key_order"] == "descending"
    assert got["programs_per_sm"] == 1
    assert "--grid-order heads-fastest" in d["worksheet"]["command"]
    # the flags give the same launch, and override the file
    code, out2, _ = run_cli(capsys, ["worksheet", *_SMALL, "--grid-order", "heads-fastest", "--key-order", "descending",
                                     "--programs-per-sm", "1"])
    assert json.loads(out2)["algorithms"]["tiled"]["l2_aware"]["read_bytes"] == got["read_bytes"]
    code, out3, _ = run_cli(capsys, ["worksheet", *_SMALL, "--schedule", str(f), "--grid-order", "tiles-fastest"])
    assert json.loads(out3)["algorithms"]["tiled"]["l2_aware"]["schedule"]["grid_order"] == "tiles-fastest"
    # 32 query heads of 8 KV heads; heads-fastest waves span every KV head: more DRAM reads. Under the constants before
    # 2026-12-06 (24 ways) that showed at 1,024 tokens already; under the forward's own constants (2026-12-06: 192
    # ways on the H200) the 8 KV heads' K/V there (4 MiB) stay in L2 in any order, every launch reads the compulsory
    # 12 MiB (Q 8 MiB, K and V 2 MiB each), and the difference shows at 8,192 tokens
    assert got["read_bytes"] == base["read_bytes"] == lpt["read_bytes"] == 12 * 2**20
    long = ["--preset", "llama-3-8b", "--seqlen", "8192", "-f", "json"]
    code, out, err = run_cli(capsys, ["worksheet", *long, "--grid-order", "tiles-fastest"])
    assert code == 0, err
    base_long = json.loads(out)["algorithms"]["tiled"]["l2_aware"]["read_bytes"]
    code, out, err = run_cli(capsys, ["worksheet", *long, "--schedule", str(f)])
    assert code == 0, err
    got_long = json.loads(out)["algorithms"]["tiled"]["l2_aware"]["read_bytes"]
    assert base_long == 96 * 2**20 and got_long == 183_719_544  # 1.83x the compulsory 96 MiB


@pytest.mark.parametrize("args,fragment", [
    (["--seqlen", "1024", "--grid-order", "zigzag"], "grid order 'zigzag' is unknown"),
    (["--seqlen", "1024", "--key-order", "up"], "key order 'up' is unknown"),
    (["--seqlen", "1024", "--tile-order", "up"], "tile order 'up' is unknown"),
    (["--seqlen", "1024", "--programs-per-sm", "40"], "compute capability 9.0): use --programs-per-sm 1"),  # 229,376 B per program
    (["--seqlen", "1024", "--num-warps", "33"], "num_warps must be 1..32"),
    (["--phase", "decode", "--seqlen", "1024", "--seqlen-q", "1", "--grid-order", "heads-fastest"],
     "the launch schedule describes the prefill forward kernel"),
    (["--seqlen", "1024", "--pass", "fwd+bwd", "--key-order", "descending"], "the launch schedule describes the prefill forward kernel"),
    (["--seqlens", "300,500", "--grid-order", "heads-fastest"], "the launch schedule describes one dense layer"),
])
def test_worksheet_bad_schedule_is_one_line(capsys, args, fragment):
    assert_one_line_error(capsys, ["worksheet", *args], fragment)


@pytest.mark.parametrize("text,fragment", [
    (None, "does not exist: pass a TOML file"),
    ("grid_order = ", "is not valid TOML"),
    ("grid = 'heads-fastest'", "unknown key(s) grid: use block_m"),
    ("programs_per_sm = 'two'", "programs_per_sm must be a positive whole number, got 'two'"),
    ("[schedule]\nkey_order = 'sideways'", "key order 'sideways' is unknown"),
])
def test_worksheet_bad_schedule_file_is_one_line(capsys, tmp_path, text, fragment):
    f = tmp_path / "bad.toml"
    if text is not None:
        f.write_text(text)
    assert_one_line_error(capsys, ["worksheet", "--seqlen", "1024", "--schedule", str(f)], fragment)


@pytest.mark.parametrize("text,flags,fragments,absent", [
    ("programs_per_sm = 40", [], ["schedule file", "gives programs_per_sm = 40: programs_per_sm 40 is over",
                                  "(or change the value in the file; a flag overrides it)"], None),
    ("block_m = 512\nblock_n = 512", [], ["gives block_m = 512, block_n = 512: tiles BLOCK_M=512",
                                          "lower --block-m, --block-n or --num-stages (or change"], None),
    ("heads_per_program = 3", ["--kv-heads", "8"], ["gives heads_per_program = 3: heads_per_program 3 must divide"],
     None),
    # the flag overrides the file: the refusal is the flag's, and the file is not named
    ("programs_per_sm = 2", ["--programs-per-sm", "40"], ["programs_per_sm 40 is over"], "schedule file"),
    ("block_m = 64", ["--block-m", "512", "--block-n", "512"], ["tiles BLOCK_M=512"], "schedule file"),
    # a refusal about flags the user gave and a field of the file: the file's value named, not blamed
    ("num_stages = 3", ["--block-m", "512", "--block-n", "512"],
     ["schedule file", "gives num_stages = 3: tiles BLOCK_M=512", "lower --block-m, --block-n or --num-stages"],
     "or change the value in the file"),
    # a ragged batch takes no launch schedule: the file's field is named as the file's, with what to do
    ("grid_order = 'heads-fastest'", ["--seqlens", "300,500"],
     ["grid_order = 'heads-fastest' (schedule file", "describes one dense layer",
      "(take those fields out of the file, or drop --schedule)"], "a flag overrides"),
])
def test_a_refusal_of_a_schedule_file_value_names_the_file(capsys, tmp_path, text, flags, fragments, absent):
    """A value from --schedule refused once the layer is known names the file and the value, not only the flag the
    user did not pass (a fresh user's finding, 2026-12-07)."""
    f = tmp_path / "s.toml"
    f.write_text(text + "\n")
    layer = [] if "--seqlens" in flags else ["--seqlen", "1024"]  # a ragged batch gives its own lengths
    line = assert_one_line_error(capsys, ["worksheet", *layer, *flags, "--schedule", str(f)], *fragments)
    assert absent is None or absent not in line, line


def test_schedule_file_tiles_and_loader(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text("[schedule]\nblock_m = 64\nblock_n = 32\ngrid_order = 'grouped:4'\n")
    s = load_schedule(f)
    assert (s.block_m, s.block_n, s.num_stages, s.grid_order, s.key_order) == (64, 32, 2, "grouped:4", "ascending")


def test_descending_programs_touch_a_chunk_at_their_own_steps():
    """Descending key loops: program i reaches chunk c at step end_i − min(c + chunk, end_i), its own
    time, so two programs of one wave that reach the same chunk at different steps touch it twice
    (the L2 decides whether the second touch hits). Causal N = 2048, BLOCK_M = 1024, BLOCK_N = 128
    (chunks of 1024 keys), W = 2: tile 0 sees keys [0, 1024) and reaches chunk 0 at step 0; tile 1
    sees [0, 2048), reaches chunk 1024 at step 0 and chunk 0 at step 1024."""
    from iomodel.schedule.grid import prefill_waves

    spec = LayerSpec(batch=1, heads=1, kv_heads=1, head_dim=16, seqlen_q=2048, seqlen_k=2048, dtype="fp16",
                     causal=True)
    waves, _, _ = prefill_waves(spec, Tiling(block_m=1024, block_n=128), 2, key_order="descending")
    k = [(a.key, a.nbytes) for a in waves[0] if a.tensor == "K"]
    assert k == [(("K", 0, 0), 1024 * 32), (("K", 0, 1024), 1024 * 32), (("K", 0, 0), 1024 * 32)]
    waves, _, _ = prefill_waves(spec, Tiling(block_m=1024, block_n=128), 2)  # ascending: one touch per chunk
    assert [a.key for a in waves[0] if a.tensor == "K"] == [("K", 0, 0), ("K", 0, 1024)]
