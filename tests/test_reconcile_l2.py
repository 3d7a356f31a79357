"""The L2-aware HBM prediction (iomodel/cache/, iomodel/schedule/grid.py) on hand-computed cases and properties."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iomodel.errors import IomodelError
from iomodel.spec.hardware import get_hardware
from iomodel.spec import LayerSpec, Tiling
from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_baseline, predict_tiled
from iomodel.cache.set_assoc import evict_probability
from iomodel.cache.simulate import simulate, stream_kernel
from iomodel.schedule.grid import Access, estimate_programs_per_sm, prefill_key_rows

BIG = 1 << 40  # an L2 that holds everything


def params(capacity_bytes: int, sms: int = 4, pps: int = 1) -> L2Params:
    """L2Params whose effective capacity is exactly ``capacity_bytes`` (fraction 1), fully associative LRU
    (the round-1 model: exact integer bytes)."""
    return L2Params(max(1, capacity_bytes), sms, pps, l2_fraction=1.0, write_once=False, ways=None)


def test_lru_primitive_misses_evictions_and_dirty_lines():
    waves = [
        [Access("A", "a", 60, whole=True), Access("B", "b", 60, whole=True)],  # b evicts a (whole)
        [Access("A", "a", 60, whole=True), Access("C", "c", 30, write=True)],  # a misses again; b evicted
    ]
    k = simulate("k", waves, capacity=100)
    assert k.hbm_read == {"A": 120, "B": 60}
    assert k.hbm_write == {} and k.dirty_at_end == {"C": 30}
    # a dirty stream item is evicted in part: its oldest 30 bytes are written back
    k = simulate("k", [[Access("D", "d", 80, write=True), Access("E", "e", 50)]], capacity=100)
    assert k.hbm_write == {"D": 30} and k.dirty_at_end == {"D": 50} and k.hbm_read == {"E": 50}


def test_evict_probability_is_the_poisson_tail_of_random_set_mapping():
    # one way: the line is gone as soon as one of the D/C-mean Poisson arrivals hits its set
    assert evict_probability(100, 100, 1) == pytest.approx(1 - math.exp(-1))  # 0.632120...
    # two ways, D = C: lambda = 2, P(N >= 2) = 1 - e^-2 (1 + 2) = 0.593994...
    assert evict_probability(100, 100, 2) == pytest.approx(1 - 3 * math.exp(-2))
    assert evict_probability(100, 100, 2) == pytest.approx(0.5939941502901619)
    # fully associative: a step at D = C; many ways approach it
    assert [evict_probability(d, 100, None) for d in (0, 100, 101)] == [0.0, 0.0, 1.0]
    assert evict_probability(50, 100, 1000) < 1e-6 and evict_probability(150, 100, 1000) > 1 - 1e-6
    assert evict_probability(0, 100, 24) == 0.0 and evict_probability(1e9, 100, 24) == 1.0
    # more ways: fewer early evictions, more certain late ones
    assert evict_probability(50, 100, 24) < evict_probability(50, 100, 4)
    assert evict_probability(150, 100, 24) > evict_probability(150, 100, 4)


def _end_fraction(d, own, cap, ways):
    """Evicted fraction at the kernel's end of an item of ``own`` bytes written in order, with
    ``d`` bytes touched after it: the midpoint rule over its lines (8 points), as documented."""
    return sum(evict_probability(d + own * (1 - (k + 0.5) / 8), cap, ways) for k in range(8)) / 8


def test_set_associative_simulation_hand_computed():
    # A (100 B) is re-read after B (100 B): each of A's lines has B and the rest of A above it,
    # D = 200 = C. One way: it misses with probability 1 - e^-1, 100 + 63.2 = 163 bytes of A;
    # the fully associative LRU keeps it (200 <= 200).
    w = [[Access("A", "a", 100), Access("B", "b", 100), Access("A", "a", 100)]]
    assert simulate("k", w, capacity=200, ways=1).hbm_read == {"A": 163, "B": 100}
    assert simulate("k", w, capacity=200, ways=None).hbm_read == {"A": 100, "B": 100}
    # one byte short: the LRU drops A's oldest byte only (a stream item), the set-associative
    # cache loses a little more than at 200 (1 - e^-(200/199))
    assert simulate("k", w, capacity=199, ways=None).hbm_read == {"A": 101, "B": 100}
    assert simulate("k", w, capacity=199, ways=1).hbm_read == {"A": round(100 + 100 * (1 - math.exp(-200 / 199))),
                                                              "B": 100}
    # a later, smaller touch of the item misses at most what it asks for
    w = [[Access("A", "a", 100), Access("B", "b", 1000), Access("A", "a", 10)]]
    assert simulate("k", w, capacity=100, ways=1).hbm_read == {"A": 110, "B": 1000}
    # 100 dirty bytes, then a 50-byte read: the line at offset x of O has 50 + (100 - x) bytes
    # above it at the end; one way, C = 100: 100 x mean(1 - e^-(150 - x)/100) is written back
    w = [[Access("O", "o", 100, write=True), Access("K", "k", 50)]]
    k = simulate("k", w, capacity=100, ways=1)
    expected = 100 * sum(1 - math.exp(-(50 + 100 * (1 - (i + 0.5) / 8)) / 100) for i in range(8)) / 8
    assert expected == pytest.approx(100 * _end_fraction(50, 100, 100, 1))
    assert k.hbm_write == {"O": round(expected)} == {"O": 62}
    assert k.dirty_at_end == {"O": 100 - round(expected)} and k.hbm_read == {"K": 50}
    # written lines hold one L2 copy (write_share 0.5): in the fully associative LRU the same 100
    # bytes then weigh 50 and the 50-byte read still fits; weighing 100, the oldest 50 go
    assert simulate("k", w, capacity=100, write_share=0.5).hbm_write == {}
    assert simulate("k", w, capacity=100, write_share=1.0).hbm_write == {"O": 50}
    # a dirty item re-written after 100 other bytes (D = 100 + 100 own, one way): written back
    # with probability 1 - e^-2 then, dirty again, and its end-of-kernel share as above
    w = [[Access("O", "o", 100, write=True), Access("K", "k", 100), Access("O", "o", 100, write=True)]]
    k = simulate("k", w, capacity=100, ways=1)
    first = 100 * (1 - math.exp(-2))
    last = 100 * _end_fraction(0, 100, 100, 1)
    assert k.hbm_write == {"O": round(first + last)} and k.dirty_at_end == {"O": round(100 - last)}
    with pytest.raises(IomodelError, match="ways"):
        L2Params(1 << 20, 4, ways=0)


def test_reads_and_write_back_take_their_own_capacity():
    """A read miss is judged against ``read_capacity`` (the model: the measured shared-read capacity),
    a dirty line's write-back against ``capacity``, from the same stack distance."""
    # A re-read after B: D = 200; one way, read capacity 300: A misses 100 x (1 - e^-(200/300)) = 48.7
    w = [[Access("A", "a", 100), Access("B", "b", 100), Access("A", "a", 100)]]
    assert simulate("k", w, capacity=200, ways=1, read_capacity=300).hbm_read == {"A": 149, "B": 100}
    assert round(100 + 100 * (1 - math.exp(-200 / 300))) == 149
    # the dirty item re-written after 100 bytes: its write-back at C = 100 (1 - e^-2, then the end
    # share) whatever the read capacity; K is new (all 100 bytes miss)
    w = [[Access("O", "o", 100, write=True), Access("K", "k", 100), Access("O", "o", 100, write=True)]]
    split = simulate("k", w, capacity=100, ways=1, read_capacity=400)
    one = simulate("k", w, capacity=100, ways=1)
    assert split.hbm_write == one.hbm_write == {"O": round(100 * (1 - math.exp(-2)) + 100 * _end_fraction(0, 100, 100, 1))}
    assert split.dirty_at_end == one.dirty_at_end and split.hbm_read == one.hbm_read == {"K": 100}


def test_kv_streams_of_one_wave_interleave_in_chunks():
    # two KV heads of 2048 keys (d=64 fp16: 256 KiB of K each), one wave each reading both, L2 of
    # 600 KiB: streamed side by side in 1024-row chunks, the second wave's re-read of head 0
    # chunk 0 finds it evicted (2 x 2 x 2 x 128 KiB = 1 MiB streamed since); one whole item per
    # head (round 1) would have kept the last head resident.
    spec = LayerSpec(1, 2, 2, 64, 128, 2048, "fp16")
    t = Tiling(64, 64, 1)
    from iomodel.schedule.grid import prefill_waves
    waves, _, _ = prefill_waves(spec, t, w=4)
    kv = [(a.tensor, a.key[1], a.key[2]) for a in waves[0] if a.tensor in ("K", "V")]
    assert kv[:4] == [("K", 0, 0), ("V", 0, 0), ("K", 1, 0), ("V", 1, 0)] and len(kv) == 8
    causal = spec.with_(causal=True, seqlen_q=2048)
    for order, rows in (("forward", 64), ("reverse", 2048)):  # reverse: the longest (last) causal tile runs first
        first, _, _ = prefill_waves(causal, t, w=1, tile_order=order)
        assert sum(a.nbytes for a in first[0] if a.tensor == "K") == rows * 64 * 2
    with pytest.raises(IomodelError, match="tile_order"):
        prefill_waves(spec, t, w=4, tile_order="sideways")


# B=1, H=2, H_kv=1, d=16, fp16, N_q=40, N_k=100, causal top-left, BLOCK_M=32, BLOCK_N=16:
# tile 0 sees keys < 32 -> loads 32 rows; tile 1 sees keys < 40 -> loads ceil(40/16)*16 = 48 rows.
SPEC = LayerSpec(1, 2, 1, 16, 40, 100, "fp16", causal=True)
TILES = Tiling(32, 16, 1)
Q = 2 * 40 * 16 * 2  # 2560 bytes
KV_FULL = 100 * 16 * 2  # 3200 bytes of K (or V)
KV_TOUCHED = 48 * 16 * 2  # 1536
KV_SEEN = 40 * 16 * 2  # 1280: keys some query row sees (compulsory)
O, LSE = 2560, 2 * 40 * 4  # 320
KV_REQ = 2 * (32 + 48) * 16 * 2  # 5120 per tensor: two query heads, two tiles each


def test_prefill_key_rows_follow_the_contract():
    assert prefill_key_rows(SPEC, TILES) == [32, 48]
    assert prefill_key_rows(SPEC.with_(causal=False), TILES) == [100, 100]
    assert prefill_key_rows(SPEC.with_(causal_align="bottom-right"), TILES) == [96, 100]  # off = 60


def test_everything_fits_reads_the_touched_rows_once_and_leaves_outputs_dirty():
    r = predict_tiled(SPEC, TILES, params(BIG))
    # compulsory (worksheet): all 40 query rows, the 40 keys some row sees (top-left, N_q = 40)
    assert (r.floor_read_bytes, r.floor_write_bytes) == (Q + 2 * KV_SEEN, O + LSE) == (5120, 2880)
    assert r.hbm_read_bytes == Q + 2 * KV_TOUCHED == 5632
    assert r.hbm_write_bytes == 0
    assert (r.no_reuse_read_bytes, r.l2_read_bytes, r.l2_write_bytes) == (Q + 2 * KV_REQ, Q + 2 * KV_REQ, O + LSE)
    causes = {c.key: (c.read_bytes, c.write_bytes) for c in r.causes}
    # tile 1 loads keys 40..47 of its last BLOCK_N block: 8 rows of K and of V beyond the floor
    assert causes == {"masked_reads": (2 * (KV_TOUCHED - KV_SEEN), 0), "dirty_at_end": (0, -(O + LSE))}
    assert causes["masked_reads"] == (2 * 8 * 16 * 2, 0)
    assert r.dominant.key == "dirty_at_end"
    assert r.reuse_saved_read_bytes == 2 * KV_REQ - 2 * KV_TOUCHED


def test_no_room_at_all_reads_every_request_and_writes_all_but_the_last_line():
    # one program per wave, effective L2 of 1 byte: nothing is reused, every dirty item but
    # the last one written (LSE rows 32..39 of the last program: 8 x 4 bytes) is evicted.
    r = predict_tiled(SPEC, TILES, params(1, sms=1))
    assert r.hbm_read_bytes == r.no_reuse_read_bytes == Q + 2 * KV_REQ
    assert r.hbm_write_bytes == O + LSE - 32
    capacity = {c.key: c.read_bytes for c in r.causes}["l2_capacity"]
    assert capacity == 2 * (KV_REQ - KV_TOUCHED)


def test_gqa_group_in_one_wave_reads_kv_once_else_once_per_wave():
    spec = LayerSpec(1, 4, 1, 16, 64, 64, "fp16")  # G = 4, T_r = 2: 8 programs share one KV head
    tiles = Tiling(32, 16, 1)
    kv = 64 * 16 * 2  # 2048 bytes of K
    one_wave = predict_tiled(spec, tiles, params(BIG, sms=8))
    assert one_wave.kernels[0].waves == 1 and one_wave.kernels[0].hbm_read["K"] == kv
    # four waves of two programs and an L2 smaller than K: every wave fetches K once (its two
    # programs stream the same blocks together), 4 fetches instead of 8 requests.
    small = predict_tiled(spec, tiles, params(1000, sms=2))
    assert small.kernels[0].hbm_read["K"] == 4 * kv and small.kernels[0].requested_read["K"] == 8 * kv
    assert {c.key: c.read_bytes for c in small.causes}["l2_capacity"] == 2 * 3 * kv


def test_decode_split_kv_partials_cross_hbm_between_the_two_kernels():
    spec = LayerSpec(2, 8, 2, 16, 1, 300, "fp16", phase="decode")
    tiles = Tiling(16, 16, 1, num_splits=4, heads_per_program=4, fused_combine=False)
    r = predict_tiled(spec, tiles, params(BIG))
    assert [k.name for k in r.kernels] == ["decode kernel", "combine kernel"]
    part_o, part_l = 2 * 8 * 4 * 1 * 16 * 4, 2 * 8 * 4 * 4  # (B, H, splits, N_q, d) fp32 and LSE
    inter = {c.key: (c.read_bytes, c.write_bytes) for c in r.causes}["intermediates"]
    assert inter == (part_o + part_l, part_o + part_l)
    assert r.hbm_read_bytes == r.floor_read_bytes + part_o + part_l  # K/V read once, partials read back
    assert r.kernels[0].hbm_read["K"] == 2 * 2 * 300 * 16 * 2


def test_fused_decode_reads_its_partials_back_from_l2():
    """The fused split-KV decode (one launch): the partials each group's last program reads back
    were written by the same launch, so with an L2 that holds them no partial byte is read from
    HBM; only the first touch of each group's int32 counter is (B·H/P = 4 groups, 4 B each)."""
    spec = LayerSpec(2, 8, 2, 16, 1, 300, "fp16", phase="decode")
    r = predict_tiled(spec, Tiling(16, 16, 1, num_splits=4, heads_per_program=4), params(BIG))
    assert [k.name for k in r.kernels] == ["decode kernel"]
    part_o, part_l = 2 * 8 * 4 * 1 * 16 * 4, 2 * 8 * 4 * 4
    sem_w = (4 * 4 + 4) * 4  # an atomic per program (4 splits x 4 groups) and a reset per group
    k = r.kernels[0]
    assert k.hbm_read["O_PART"] == k.hbm_read["LSE_PART"] == 0 and k.hbm_read["SEM"] == 4 * 4
    assert k.requested_read["O_PART"] == part_o and k.requested_read["SEM"] == 4 * 4 * 4
    assert k.requested_write["SEM"] == sem_w
    inter = {c.key: (c.read_bytes, c.write_bytes) for c in r.causes}["intermediates"]
    assert inter == (16, part_o + part_l + sem_w)
    assert r.hbm_read_bytes == r.floor_read_bytes + 16


def _row(tensor, shape, rb=0, wb=0, step="op"):
    return SimpleNamespace(tensor=tensor, step=step, level="HBM", shape=shape, read_bytes=rb, write_bytes=wb)


def test_stream_kernel_broadcast_mask_and_dirty_tail():
    spec = LayerSpec(2, 4, 4, 16, 64, 64, "fp16", causal=True)  # B*H = 8
    s_bytes, m_bytes = 8 * 64 * 64 * 2, 64 * 64
    rows = [_row("S", "(B, H, N_q, N_k)", rb=s_bytes, wb=s_bytes), _row("~mask", "(N_q, N_k)", rb=m_bytes)]
    fits, notes = stream_kernel("masked_fill", rows, spec, capacity=1 << 30)
    assert fits.hbm_read == {"S": s_bytes, "~mask": m_bytes} and not notes
    assert fits.hbm_write == {} and fits.dirty_at_end == {"S": s_bytes}
    tight, notes = stream_kernel("masked_fill", rows, spec, capacity=m_bytes)  # per (b, h): 2*8 KiB + 4 KiB > 4 KiB
    assert tight.hbm_read["~mask"] == 8 * m_bytes and len(notes) == 1
    assert 0 < sum(tight.dirty_at_end.values()) <= m_bytes
    assert sum(tight.hbm_write.values()) + sum(tight.dirty_at_end.values()) == s_bytes


def test_baseline_prediction_from_model_rows():
    from iomodel.traffic import predict

    hw = get_hardware("H200")
    spec = LayerSpec(1, 16, 16, 64, 4096, 4096, "fp16", causal=True)
    rows = predict(spec, Tiling(), hw).algorithms["baseline"].rows
    r = predict_baseline(spec, rows, L2Params(hw.l2_bytes, hw.num_sms))
    assert r.no_reuse_read_bytes == sum(x.read_bytes for x in rows if x.level == "HBM")
    keys = {c.key for c in r.causes}
    assert {"intermediates", "dirty_at_end", "broadcast_rereads"} <= keys  # a 16 MiB mask, 64 MiB S per (b, h)
    assert r.dominant.key == "intermediates" and r.l2_read_bytes is None
    # floor = compulsory reads (top-left square: every row and key); nothing masked out entirely
    assert r.floor_read_bytes == predict(spec, Tiling(), hw).compulsory_rows[0].read_bytes * 3
    assert "masked_reads" not in keys
    with pytest.raises(IomodelError, match="HBM rows"):
        predict_baseline(spec, [], L2Params(hw.l2_bytes, hw.num_sms))


def test_params_and_occupancy_estimate():
    assert estimate_programs_per_sm(96 * 1024, 8, 228 * 1024) == 2
    assert estimate_programs_per_sm(16 * 1024, 4, 228 * 1024) == 14  # 16 by warps, 14 by shared memory
    assert estimate_programs_per_sm(300 * 1024, 4, 228 * 1024) == 1
    with pytest.raises(IomodelError, match="l2_fraction"):
        L2Params(1 << 20, 4, l2_fraction=0.0)
    with pytest.raises(IomodelError, match="forward"):
        predict_tiled(SPEC.with_(backward=True), TILES, params(BIG))


@st.composite
def cases(draw):
    phase = draw(st.sampled_from(["prefill", "decode"]))
    hk = draw(st.integers(1, 2))
    g = draw(st.sampled_from([1, 2, 4]))
    if phase == "decode":
        nq = draw(st.integers(1, 8))
        p = max(x for x in range(1, g + 1) if g % x == 0 and x * nq <= 128)
        bm = 1 << max(4, (p * nq - 1).bit_length())
        tiles = Tiling(bm, 16, 1, num_splits=draw(st.integers(1, 5)), heads_per_program=p)
    else:
        nq = draw(st.integers(17, 200))
        tiles = Tiling(draw(st.sampled_from([16, 32, 64])), draw(st.sampled_from([16, 32])), 1)
    spec = LayerSpec(draw(st.integers(1, 2)), hk * g, hk, 16, nq, draw(st.integers(1, 260)), "fp16",
                     causal=draw(st.booleans()), causal_align=draw(st.sampled_from(["top-left", "bottom-right"])),
                     phase=phase)
    cap = draw(st.sampled_from([1, 2000, 20000, BIG]))
    prm = params(cap, sms=draw(st.integers(1, 6)), pps=draw(st.integers(1, 2)))
    ways = draw(st.sampled_from([None, 1, 4, 24]))
    return spec, tiles, L2Params(prm.l2_bytes, prm.num_sms, prm.programs_per_sm, 1.0, write_once=False, ways=ways)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_prediction_lies_between_compulsory_floor_and_no_reuse_bound(case):
    from iomodel.traffic import predict

    spec, tiles, prm = case
    r = predict_tiled(spec, tiles, prm)
    masked = sum(c.read_bytes for c in r.causes if c.key == "masked_reads")
    inter_w = sum(c.write_bytes for c in r.causes if c.key == "intermediates")
    assert masked >= 0
    assert r.floor_read_bytes <= r.floor_read_bytes + masked <= r.hbm_read_bytes <= r.no_reuse_read_bytes
    assert 0 <= r.hbm_write_bytes <= r.floor_write_bytes + inter_w
    if prm.capacity == BIG:
        assert r.hbm_write_bytes == 0
        assert r.hbm_read_bytes == r.floor_read_bytes + masked + sum(c.read_bytes for c in r.causes if c.key == "intermediates")
    pred = predict(spec, tiles, get_hardware("H200"))
    # the floor is the worksheet's compulsory reads
    assert r.floor_read_bytes == sum(x.read_bytes for x in pred.compulsory_rows)
    alg = pred.algorithms["tiled"]
    assert (r.l2_read_bytes, r.l2_write_bytes) == (alg.sram_fill_read_bytes, alg.sram_fill_write_bytes)


def test_floor_is_the_worksheet_compulsory_reads_on_the_reviewed_shape():
    """b1-h16-kv4-d128 fp16 q1024 k6144 causal top-left: only keys < 1024 are seen, so the floor
    is Q (4 MiB) + K, V of 1024 rows (1 MiB each) = 6 MiB, not Q + all of K and V (16 MiB)."""
    from iomodel.traffic import predict

    spec = LayerSpec(1, 16, 4, 128, 1024, 6144, "fp16", causal=True)
    tiles = Tiling(128, 64, 1)
    hw = get_hardware("H200")
    r = predict_tiled(spec, tiles, L2Params(hw.l2_bytes, hw.num_sms, 1))
    assert r.floor_read_bytes == 4 * 2**20 + 2 * 2**20 == compulsory_read_bytes_total(spec)
    assert r.floor_read_bytes == sum(x.read_bytes for x in predict(spec, tiles, hw).compulsory_rows)
    assert r.floor_read_bytes <= r.hbm_read_bytes <= r.no_reuse_read_bytes


def compulsory_read_bytes_total(spec):
    from iomodel.cache.predict import compulsory_read_bytes

    return sum(compulsory_read_bytes(spec).values())


def test_baseline_floor_under_a_mask_hiding_keys():
    from iomodel.traffic import predict

    hw = get_hardware("H200")
    spec = LayerSpec(1, 2, 2, 16, 64, 256, "fp16", causal=True)  # top-left: keys >= 64 unseen
    rows = predict(spec, Tiling(), hw).algorithms["baseline"].rows
    r = predict_baseline(spec, rows, L2Params(hw.l2_bytes, hw.num_sms))
    q, kv_seen, kv_full = 2 * 64 * 16 * 2, 2 * 64 * 16 * 2, 2 * 256 * 16 * 2
    assert r.floor_read_bytes == q + 2 * kv_seen
    assert {c.key: c.read_bytes for c in r.causes}["masked_reads"] == 2 * (kv_full - kv_seen)


def test_lru_never_writes_back_a_line_twice():
    """A written item evicted in part (written back), read again (a clean copy comes back) and
    evicted again is written back once: capacity 100 B, write 80 B, read 60 B of another item
    (40 dirty bytes leave), re-read the first item whole (its 40 B return clean), read 100 B of a
    third (everything leaves): 80 B written back in all, never 120."""
    from iomodel.cache.lru import LRU

    c = LRU(100)
    c.write("o", "O", 80)
    assert c.read("k", "K", 60, False) == 60 and c.writeback == {"O": 40}
    assert c.read("o", "O", 80, False) == 40  # the 40 B written back come back from HBM, clean
    c.read("x", "K", 100, False)
    assert c.writeback == {"O": 80} and c.dirty() == {}


def test_fused_decode_found_by_hypothesis_stays_under_the_write_bound():
    """B2 H8 KV2 d16, N_q 2, N_k 1, 2 splits of 4 heads per program, a 2,000 B fully associative L2
    on 2 SMs x 2 programs: the LRU wrote O_PART back twice (6,160 B predicted against a bound of
    1,152 + 4,400 B) before the LRU counted dirty bytes."""
    spec = LayerSpec(2, 8, 2, 16, 2, 1, "fp16", phase="decode")
    r = predict_tiled(spec, Tiling(16, 16, 1, num_splits=2, heads_per_program=4),
                      L2Params(2000, 2, 2, 1.0, write_once=False, ways=None))
    inter_w = sum(c.write_bytes for c in r.causes if c.key == "intermediates")
    assert r.hbm_write_bytes <= r.floor_write_bytes + inter_w == 5552
