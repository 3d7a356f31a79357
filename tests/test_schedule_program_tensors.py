"""A schedule's programs as data (issue 12, item 1): one program per GQA group, and what each program reads and writes.

``heads_per_program`` P packs P query heads of one KV head into a program's BLOCK_M rows (BLOCK_M / P
positions of each; FlashAttention-3's PackGQA); ``writes`` says whether a program writes its rows'
LSE beside O. Every byte count here is worked out by hand in the test's docstring or comment.
"""

from __future__ import annotations

import json
import random

import pytest

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled
from iomodel.errors import IomodelError
from iomodel.schedule.grid import prefill_waves
from iomodel.schedule.launch import PROGRAM_READS, PROGRAM_WRITES, Schedule, load_schedule
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import H200
from iomodel.traffic import predict
from iomodel.traffic.model import sweep

from test_cli_errors import assert_one_line_error, run_cli
from test_l2_stream import _assert_same


def _kv_fill(spec: LayerSpec, tiling: Tiling) -> tuple[int, int, int, int]:
    """SRAM_fill bytes of the tiled forward: (K read, V read, O written, LSE written)."""
    rows = {r.tensor: r for r in predict(spec, tiling, H200).algorithms["tiled"].rows if r.level == "SRAM_fill"}
    return (rows["K"].read_bytes, rows["V"].read_bytes, rows["O"].write_bytes,
            rows["LSE"].write_bytes if "LSE" in rows else 0)


def test_packing_reads_kv_once_per_group_of_heads_by_hand():
    """B 1, H 8, H_kv 2 (G 4), seqlen_q 16, seqlen_k 512, HEAD_DIM 64, fp16, BLOCK_M 64, non-causal.

    A K (or V) row is 64·2 = 128 B; every program streams all 512 keys: 65,536 B.
    P = 1: 8 heads × ⌈16/64⌉ = 1 tile each: 8 programs, 524,288 B.
    P = 2: 4 groups × ⌈16/32⌉ = 1 tile: 262,144 B. P = 4: 2 groups × ⌈16/16⌉ = 1 tile: 131,072 B.
    Q, O (8·16·128 = 16,384 B) and LSE (8·16·4 = 512 B) do not change.
    """
    spec = LayerSpec(1, 8, 2, 64, 16, 512, "fp16", causal=False)
    for p, kv in ((1, 524288), (2, 262144), (4, 131072)):
        assert _kv_fill(spec, Tiling(block_m=64, block_n=64, heads_per_program=p)) == (kv, kv, 16384, 512)


def test_packing_of_a_long_causal_query_by_hand():
    """B 1, H 32, H_kv 8, seqlen 1000, HEAD_DIM 128, bf16, causal top-left, BLOCK_M 128, BLOCK_N 64.

    A key row is 256 B. P = 1: 8 tiles of 128 rows, tile i loads keys up to min(128(i + 1), 1000) rounded up
    to 64 (capped at 1000): 128 + 256 + ... + 896 + 1000 = 4,584 rows × 32 heads × 256 B = 37,552,128 B.
    P = 2: 16 tiles of 64 positions: 64·(1 + ... + 15) + 1000 = 8,680 rows × 16 groups × 256 B = 35,553,280 B.
    P = 4: 32 tiles of 32 positions, rounded up to 64-key blocks: 2·64·(1 + ... + 15) + 1000 + 1000 = 17,360
    rows × 8 groups × 256 B = 35,553,280 B (the same: BLOCK_N, not the tile, is the grain).
    """
    spec = LayerSpec(1, 32, 8, 128, 1000, 1000, "bf16", causal=True)
    got = [_kv_fill(spec, Tiling(block_m=128, block_n=64, heads_per_program=p))[0] for p in (1, 2, 4)]
    assert got == [37552128, 35553280, 35553280]


def test_writes_without_lse_by_hand():
    """Writing O alone drops the LSE row (8·16·4 = 512 B here) and nothing else."""
    spec = LayerSpec(1, 8, 2, 64, 16, 512, "fp16", causal=False)
    assert _kv_fill(spec, Tiling(block_m=64, block_n=64, writes_lse=False)) == (524288, 524288, 16384, 0)
    model = predict(spec, Tiling(block_m=64, block_n=64, writes_lse=False), H200)
    assert "LSE" not in [a.tensor for a in model.algorithms["tiled"].allocations]
    assert any("writes O alone" in a for a in model.assumptions)


def _lru(spec, tiling, capacity, **sched):
    params = L2Params(capacity, 1, 1, l2_fraction=1.0, ways=None)  # W = 1, fully associative: exact bytes
    return predict_tiled(spec, tiling, params, schedule=Schedule.for_tiling(tiling, **sched))


def test_l2_packed_group_reads_kv_once_where_one_head_per_program_rereads_it():
    """B 1, H 4, H_kv 1 (G 4), seqlen_q 16, seqlen_k 256, HEAD_DIM 16, fp16, BLOCK_M 64, non-causal, W = 1.

    K (or V) of the KV head: 256·32 = 8,192 B; Q of one head 16·32 = 512 B; O 512 B, LSE 64 B a head.
    A 4,096 B L2 never holds a K or V chunk to the next program. P = 1: 4 programs (one head each) read
    Q 512 + K 8,192 + V 8,192 each: 67,584 B, all missed. P = 4: one program reads the 4 heads' Q (2,048)
    and K, V once: 18,432 B. Requested (no reuse) are the same numbers; writes O 2,048 + LSE 256.
    """
    spec = LayerSpec(1, 4, 1, 16, 16, 256, "fp16", causal=False)
    one = _lru(spec, Tiling(block_m=64, block_n=64), 4096)
    group = _lru(spec, Tiling(block_m=64, block_n=64, heads_per_program=4), 4096)
    assert (one.hbm_read_bytes, one.no_reuse_read_bytes) == (67584, 67584)
    assert (group.hbm_read_bytes, group.no_reuse_read_bytes) == (18432, 18432)
    assert one.no_reuse_write_bytes == group.no_reuse_write_bytes == 2048 + 256
    bare = _lru(spec, Tiling(block_m=64, block_n=64, heads_per_program=4, writes_lse=False), 4096)
    assert (bare.hbm_read_bytes, bare.no_reuse_write_bytes) == (18432, 2048)
    assert any("Each program serves P = 4 query heads" in a for a in group.assumptions)


def test_packed_waves_request_the_model_rows():
    """The L2 model's requested bytes are the traffic model's SRAM_fill rows, packed or not, with or without LSE."""
    for spec, ps in ((LayerSpec(2, 8, 2, 64, 700, 900, "bf16", causal=True, causal_align="bottom-right"), (1, 2, 4)),
                     (LayerSpec(1, 16, 2, 128, 3000, 3000, "fp16", causal=False), (1, 8))):
        for p in ps:
            for lse in (True, False):
                t = Tiling(block_m=64, block_n=32, heads_per_program=p, writes_lse=lse)
                _, req_r, req_w = prefill_waves(spec, t, 16)
                rows = predict(spec, t, H200).algorithms["tiled"].rows
                assert req_r == {r.tensor: r.read_bytes for r in rows if r.level == "SRAM_fill" and r.read_bytes}
                assert req_w == {r.tensor: r.write_bytes for r in rows if r.level == "SRAM_fill" and r.write_bytes}


@pytest.mark.parametrize("seed", range(6))
def test_packed_fast_evaluation_equals_the_simulation(seed):
    """The fast evaluation (iomodel.cache.stream) gives the simulation's doubles for packed programs too."""
    rng = random.Random(seed)
    kv = rng.choice([1, 2])
    p = rng.choice([2, 4])
    spec = LayerSpec(rng.choice([1, 2]), kv * p * rng.choice([1, 2]), kv, rng.choice([32, 64]), rng.choice([300, 2048]),
                     rng.choice([700, 2048]), rng.choice(["fp16", "fp32"]), causal=rng.random() < 0.5)
    tiling = Tiling(block_m=rng.choice([64, 128]), block_n=rng.choice([16, 64]), heads_per_program=p,
                    writes_lse=rng.random() < 0.5)
    params = L2Params(rng.choice([64 << 10, 256 << 10]), rng.choice([2, 4]), 1, ways=rng.choice([4, 24]))
    assert _assert_same("fwd kernel", spec, tiling, params, rng.choice(["forward", "reverse"]))


def test_sweep_evaluates_packed_points_as_predict():
    spec = LayerSpec(1, 32, 8, 128, 1000, 1000, "bf16", causal=True)
    got = sweep(spec, Tiling(block_m=128, block_n=64), H200, {"heads_per_program": [1, 2, 4]})
    assert list(got["tiled"]["hbm_read_bytes"]) == [
        predict(spec, Tiling(block_m=128, block_n=64, heads_per_program=p), H200).algorithms["tiled"].hbm_read_bytes
        for p in (1, 2, 4)]
    with pytest.raises(IomodelError) as exc:
        sweep(spec, Tiling(block_m=128, block_n=64), H200, {"heads_per_program": [3]})
    assert "heads_per_program 3 must divide the GQA group H/H_kv = 4" in str(exc.value)


def test_schedule_fields_and_the_program_tensors():
    s = Schedule(block_m=128, block_n=64, heads_per_program=4, writes=["LSE", "O"])
    assert s.writes == PROGRAM_WRITES and s.reads == PROGRAM_READS and s.bundled  # the pointer prefill packs
    assert s.tiling().heads_per_program == 4 and s.tiling().writes_lse
    spec = LayerSpec(1, 32, 8, 128, 4096, 4096, "bf16")
    t = s.tensors(spec)
    # per program: Q and O 128 rows × 256 B, of 4 heads (32 positions each); K, V a 64-row block a step
    assert t["Q"] == {"access": "read", "how": "once", "rows": 128, "bytes": 32768, "heads": 4}
    assert t["K"] == {"access": "read", "how": "streamed", "rows": 64, "bytes": 16384}
    assert t["LSE"] == {"access": "write", "how": "once", "rows": 128, "bytes": 512, "heads": 4}
    bare = Schedule(writes=["O"])
    assert "LSE" not in bare.tensors(spec) and not bare.tiling().writes_lse and not bare.bundled
    assert Schedule.for_tiling(Tiling(heads_per_program=2, writes_lse=False)).writes == ("O",)
    assert Schedule().bundled


@pytest.mark.parametrize("kw,fragment", [
    ({"heads_per_program": 0}, "heads_per_program must be a positive whole number, got 0"),
    ({"writes": ["O", "bias"]}, "writes O, bias: a program writes its O rows once, with or without their fp32 LSE: "
                                "give --writes O,LSE or O"),
    ({"writes": "O"}, "writes must be a list of tensor names, got 'O'"),
    ({"reads": ["Q", "K", "V", "bias"]}, "other inputs (an attention bias, a mask tensor) are not modelled: "
                                         "give reads = ['Q', 'K', 'V'] or leave it out"),
])
def test_bad_program_fields_are_one_line(kw, fragment):
    with pytest.raises(IomodelError) as exc:
        Schedule(**kw)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("p,block_m,fragment", [
    (3, 128, "heads_per_program 3 must divide the GQA group H/H_kv = 4: use --heads-per-program 1, 2 or 4"),
    (4, 2, "heads_per_program 4 must divide BLOCK_M = 2"),
])
def test_a_schedule_that_cannot_pack_is_refused_by_check(p, block_m, fragment):
    with pytest.raises(IomodelError) as exc:
        Schedule(block_m=block_m, block_n=16, heads_per_program=p).check(LayerSpec(1, 32, 8, 64, 512, 512, "bf16"), H200)
    assert fragment in str(exc.value)


_LAYER = ["--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype", "bf16", "--seqlen", "2048", "-f", "json"]


def test_worksheet_flags_and_file_give_the_same_programs(capsys, tmp_path):
    code, out, err = run_cli(capsys, ["worksheet", *_LAYER, "--heads-per-program", "4", "--writes", "O"])
    assert code == 0, err
    d = json.loads(out)
    sched = d["algorithms"]["tiled"]["l2_aware"]["schedule"]
    assert (sched["heads_per_program"], sched["reads"], sched["writes"]) == (4, ["Q", "K", "V"], ["O"])
    assert sched["tensors"]["Q"]["heads"] == 4 and "LSE" not in sched["tensors"]
    assert d["worksheet"]["kernel_path"] is None  # no bundled kernel writes O alone
    assert "--writes O --heads-per-program 4" in d["worksheet"]["command"]
    code, out3, err = run_cli(capsys, ["worksheet", *_LAYER, "--heads-per-program", "4"])
    assert code == 0, err
    d3 = json.loads(out3)
    # packed programs run on the pointer prefill (KernelConfig(heads_per_program=4)), given tiles: no LPT order
    assert d3["worksheet"]["kernel_path"] == "prefill"
    s3 = d3["algorithms"]["tiled"]["l2_aware"]["schedule"]
    assert (s3["heads_per_program"], s3["grid_order"], s3["writes"]) == (4, "tiles-fastest", ["O", "LSE"])
    rows = {r["tensor"]: r for r in d["algorithms"]["tiled"]["rows"] if r["level"] == "SRAM_fill"}
    assert "LSE" not in rows
    f = tmp_path / "s.toml"
    f.write_text('heads_per_program = 4\nreads = ["Q", "K", "V"]\nwrites = ["O"]\n')
    code, out2, err = run_cli(capsys, ["worksheet", *_LAYER, "--schedule", str(f)])
    assert code == 0, err
    d2 = json.loads(out2)["algorithms"]["tiled"]["l2_aware"]
    assert (d2["read_bytes"], d2["write_bytes"]) == (d["algorithms"]["tiled"]["l2_aware"]["read_bytes"],
                                                     d["algorithms"]["tiled"]["l2_aware"]["write_bytes"])
    s = load_schedule(f)
    assert (s.heads_per_program, s.writes) == (4, ("O",))


@pytest.mark.parametrize("args,fragment", [
    (["--seqlen", "1024", "--heads-per-program", "3"], "heads_per_program 3 must divide the GQA group H/H_kv = 4: use --heads-per-program 1, 2 or 4"),
    (["--seqlen", "1024", "--heads-per-program", "0"], "heads_per_program must be a whole number, 1 or more, or 'group' (the whole GQA group), got '0'"),
    (["--seqlen", "1024", "--heads-per-program", "4", "--block-m", "2", "--block-n", "16"], "must divide BLOCK_M = 2"),
    (["--seqlen", "1024", "--heads-per-program", "2", "--pass", "fwd+bwd"],
     "the model packs query heads in the prefill forward only (the bundled backward kernels run one query head"),
    (["--seqlen", "1024", "--heads-per-program", "2", "--phase", "decode", "--seqlen-q", "1"], "decode packs its own"),
    (["--heads-per-program", "2", "--seqlens", "100,300"], "packed query heads run in a dense prefill's programs, not a ragged batch's: drop --heads-per-program"),
    (["--seqlen", "1024", "--writes", "O", "--pass", "fwd+bwd"], "a forward that writes O without its LSE is modelled for a dense prefill forward"),
    (["--seqlens", "100,300", "--writes", "O"], "a forward that writes O without its LSE is modelled for a dense prefill forward"),
    (["--seqlen", "1024", "--writes", "O,bias"], "writes O, bias: a program writes its O rows once"),
    (["--seqlen", "1024", "--heads-per-program", "\u00b2"], "got '\u00b2': use --heads-per-program 1"),  # isdigit, not int
    (["--seqlen", "1024", "--heads-per-program", "x"], "or 'group' (the whole GQA group), got 'x'"),
])
def test_worksheet_bad_program_flags_are_one_line(capsys, args, fragment):
    assert_one_line_error(capsys, ["worksheet", "--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--dtype",
                                   "bf16", *args], fragment)


@pytest.mark.parametrize("text,fragment", [
    ('reads = ["Q", "K", "V", "bias"]\n', "other inputs (an attention bias, a mask tensor) are not modelled"),
    ('heads_per_program = "x"\n', "heads_per_program must be a whole number or 'group' (one program per whole GQA "
                                  "group), got 'x': fix that value in the file"),
])
def test_worksheet_bad_program_file_is_one_line(capsys, tmp_path, text, fragment):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    assert_one_line_error(capsys, ["worksheet", "--seqlen", "1024", "--schedule", str(f)], fragment)


@pytest.mark.parametrize("extra,fragment", [
    ("heads_per_program = 3", "heads_per_program 3 must divide the GQA group H/H_kv = 4: use heads_per_program = 1, "
                              "2 or 4"),
    ("heads_per_program = 0", "heads_per_program must be a whole number, 1 or more, got 0"),
    ('heads_per_program = 2\nimpls = ["sdpa-flash"]', "packs query heads in the bundled kernel's dense prefill forward"),
    ('heads_per_program = 2\npass = "fwd+bwd"', 'the model packs query heads in the prefill forward only (the bundled '
                                                'backward kernels run one query head per program, whatever the forward '
                                                'did): use pass = "fwd", or drop heads_per_program'),
    ("heads_per_program = 1.0", "heads_per_program must be a whole number, 1 or more, got"),
    ('heads_per_program = 0\nimpls = ["eager"]', "heads_per_program must be a whole number, 1 or more, got 0"),
    ('heads_per_program = true', "heads_per_program must be a whole number, 1 or more, got the boolean true"),
])
def test_sweep_heads_per_program_is_checked_before_measuring(tmp_path, extra, fragment):
    from iomodel.measure.sweep import load_sweep

    f = tmp_path / "s.toml"
    f.write_text(f'name = "t"\n[[shape]]\nheads = 8\nkv_heads = 2\nhead_dim = 64\nseqlen = 512\ndtype = "bf16"\n{extra}\n')
    with pytest.raises(IomodelError) as exc:
        load_sweep(f)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_committed_packed_holdout_parses_and_every_shape_is_estimated():
    """The packed hold-out (sweeps/h200-packed-holdout1.toml, committed before it was measured): 12 packed shapes,
    every one predicted by the L2 model from the prefill path's tiles."""
    from pathlib import Path

    from iomodel.measure.sweep import load_sweep
    from kernels import heuristics as hx

    sw = load_sweep(Path(__file__).resolve().parents[1] / "sweeps" / "h200-packed-holdout1.toml")
    assert len(sw.shapes) == 12 and all(s.heads_per_program > 1 and s.id.endswith(f"-p{s.heads_per_program}")
                                        for s in sw.shapes)
    assert sum(s.heads_per_program == s.spec.group for s in sw.shapes) == 9  # one program per whole group
    for s in sw.shapes:
        t = hx.prefill_default(s.spec.head_dim, s.spec.dtype, s.spec.causal, "prefill").config(
            "prefill").with_(heads_per_program=s.heads_per_program).tiling()
        got = predict_tiled(s.spec, t, L2Params(H200.l2_bytes, H200.num_sms, 1))
        assert got.hbm_read_bytes > 0 and got.no_reuse_read_bytes >= got.hbm_read_bytes


def test_ragged_models_refuse_programs_no_ragged_launch_runs():
    """The ragged model and the varlen launch's L2 model run one query head a program and write the LSE, as
    ``flash_attention_varlen`` does: packed programs or O alone are refused in one line, not modelled."""
    from iomodel.cache.predict import predict_ragged_launch
    from iomodel.spec.ragged import RaggedSpec
    from iomodel.traffic.ragged import predict_ragged

    r = RaggedSpec(LayerSpec(2, 8, 2, 64, 300, 300, "bf16", causal=True), ((100, 100), (300, 300)))
    for t, fragment in ((Tiling(block_m=64, block_n=64, heads_per_program=4), "not a ragged batch's"),
                        (Tiling(block_m=64, block_n=64, writes_lse=False), "writes O without its LSE")):
        with pytest.raises(IomodelError) as exc:
            predict_ragged(r, t, H200)
        assert fragment in str(exc.value)
        with pytest.raises(IomodelError) as exc:
            predict_ragged_launch(r.sequences(), t, L2Params(H200.l2_bytes, H200.num_sms, 1))
        assert fragment in str(exc.value)


def test_sweep_checks_the_layer_before_its_packing(tmp_path):
    """A bad layer field beside heads_per_program gets the layer's one-line error (it was a traceback: the packing
    check read the raw head_dim before the layer was built)."""
    from iomodel.measure.sweep import load_sweep

    f = tmp_path / "s.toml"
    f.write_text('name = "t"\n[[shape]]\nheads = 8\nkv_heads = 2\nhead_dim = "x"\nseqlen = 512\n'
                 'heads_per_program = 2\n')
    with pytest.raises(IomodelError) as exc:
        load_sweep(f)
    assert "head_dim must be a positive whole number" in str(exc.value) and "\n" not in str(exc.value)


def test_training_step_programs_by_hand():
    """Each kernel of the training step says what one program holds, serves, reads and writes (issue 12 item 1 for
    the backward). B 1, H 8 on 2 KV heads (G 4), HEAD_DIM 64, bf16 (a row of Q, dO, dQ, K, V: 128 B; LSE, Delta 4 B)."""
    from iomodel.schedule.grid import step_programs

    spec = LayerSpec(1, 8, 2, 64, 1000, 1000, "bf16", causal=True, backward=True)
    t = Tiling(block_m=128, block_n=64, bwd_block_m=32, bwd_block_n=128, dq_block_m=64, dq_block_n=32)
    p = step_programs(spec, t, {"grid_order": "tiles-fastest"})
    assert list(p) == ["_attn_fwd", "_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"]
    dkdv = p["_bwd_dkdv"]
    # K/V-stationary: 128 key rows of K and V held (16,384 B each), the group's 4 heads served, their Q/dO/LSE/Delta
    # streamed 32 rows a step (4,096 B, 4,096 B, 128 B, 128 B), dK and dV stored once
    assert (dkdv["stationary"], dkdv["heads_per_program"], dkdv["group_splits"]) == ("K, V", 4, 1)
    assert [(n, x["how"], x["bytes"]) for n, x in dkdv["tensors"].items()] == [
        ("K", "once", 16384), ("V", "once", 16384), ("Q", "streamed", 4096), ("dO", "streamed", 4096),
        ("LSE", "streamed", 128), ("Delta", "streamed", 128), ("dK", "once", 16384), ("dV", "once", 16384)]
    dq = p["_bwd_dq"]
    assert (dq["stationary"], dq["tensors"]["Q"]["bytes"], dq["tensors"]["K"]["how"], dq["tensors"]["K"]["bytes"],
            dq["tensors"]["dQ"]["bytes"]) == ("Q", 8192, "streamed", 4096, 8192)
    split = step_programs(spec, Tiling(bwd_group_splits=3), {})
    # S = 3 slices of a group of 4 (1, 1, 2 heads): fp32 partials of 128 rows (32,768 B each) and their reduction
    assert split["_bwd_dkdv"]["heads_per_program"] == 2 and split["_bwd_dkdv"]["tensors"]["dK_part"]["bytes"] == 32768
    assert (split["_bwd_dkdv"]["slice_heads"], split["_bwd_dkdv"]["serves_whole_group"]) == ([1, 1, 2], False)
    assert split["_bwd_reduce_dkdv"]["tensors"]["dK_part"]["bytes"] == 3 * 64 * 64 * 4


def test_worksheet_json_gives_each_training_kernel_its_program(capsys):
    code, out, err = run_cli(capsys, ["worksheet", "--preset", "llama-3-8b", "--seqlen", "2048", "--pass", "fwd+bwd",
                                      "-f", "json"])
    assert code == 0, err
    kernels = json.loads(out)["algorithms"]["tiled"]["l2_aware"]["kernels"]
    assert [k["name"] for k in kernels] == [k["name"] for k in kernels if "serves_whole_group" in k.get("program", {})]
    fwd = kernels[0]["program"]
    assert fwd["programs_per_sm"] == kernels[0]["programs_per_sm"] and fwd["writes"] == ["O", "LSE"]
    dkdv = next(k["program"] for k in kernels if k["name"] == "_bwd_dkdv")
    assert dkdv["stationary"] == "K, V" and dkdv["tensors"]["Q"]["how"] == "streamed"


def test_one_program_per_whole_group_is_said_and_can_be_asked_for(capsys, tmp_path):
    """``--heads-per-program group`` (or ``heads_per_program = "group"`` in a schedule file) is P = H/H_kv, and the JSON
    says whether one program serves its KV head's whole group: the forward's schedule and each training kernel's."""
    code, out, err = run_cli(capsys, ["worksheet", *_LAYER, "--heads-per-program", "group"])
    assert code == 0, err
    d = json.loads(out)
    s = d["algorithms"]["tiled"]["l2_aware"]["schedule"]
    assert (s["heads_per_program"], s["serves_whole_group"]) == (4, True)
    assert "--heads-per-program 4" in d["worksheet"]["command"]
    f = tmp_path / "g.toml"
    f.write_text('heads_per_program = "group"\n')
    code, out2, err = run_cli(capsys, ["worksheet", *_LAYER, "--schedule", str(f)])
    assert code == 0, err
    assert json.loads(out2)["algorithms"]["tiled"]["l2_aware"]["read_bytes"] == \
        d["algorithms"]["tiled"]["l2_aware"]["read_bytes"]
    with pytest.raises(IomodelError) as exc:  # a schedule alone does not know the layer's group
        load_schedule(f)
    assert "which a schedule alone does not know" in str(exc.value)
    code, out3, err = run_cli(capsys, ["worksheet", *_LAYER])
    assert json.loads(out3)["algorithms"]["tiled"]["l2_aware"]["schedule"]["serves_whole_group"] is False
    code, out4, err = run_cli(capsys, ["worksheet", "--preset", "llama-3-8b", "--seqlen", "8192", "--batch", "4",
                                       "--pass", "fwd+bwd", "-f", "json"])
    assert code == 0, err
    dkdv = next(k["program"] for k in json.loads(out4)["algorithms"]["tiled"]["l2_aware"]["kernels"]
                if k["name"] == "_bwd_dkdv")
    assert dkdv["serves_whole_group"] == (dkdv["group_splits"] == 1)  # the dK/dV kernel's program: the group, or a slice
