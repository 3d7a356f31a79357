"""The causal dK/dV kernel one wave per phase (iomodel/cache/stream.py ``periodic_dkdv``) against its
touch-by-touch evaluation: the same bytes (the reads' very doubles), and the cases where it does not pay.

Full waves of the same phase (v·W mod T_c) are the same accesses on other KV lanes; after a warm-up whose distinct
bytes weigh the saturation distance, a cold engine gives them the touch-by-touch misses (module doc). The bytes
are compared whole (rounded per tensor), reads, writes and the dK/dV still dirty at the end, on layers of many KV
lanes with both alignments, ragged lengths, three widths and odd programs per wave.
"""

from __future__ import annotations

import numpy as np
import pytest

from iomodel.cache import stream
from iomodel.cache.params import L2Params
from iomodel.spec import LayerSpec, Tiling

MiB = 1 << 20
WORKSHEET_TILES = Tiling(bwd_block_m=32, bwd_block_n=64, dq_block_m=128, dq_block_n=64)
H200 = L2Params(60 * MiB, 132, 2)  # capacity, read capacity and ways as the H200 estimate takes them


def _touch_by_touch(model: "stream._DkdvEvents") -> "stream.KernelL2":
    engine = model.engine(H200.capacity, H200.ways)
    engine.judge_reads_at(H200.read_capacity)
    stream._drive(model, engine)
    return engine.finish("_bwd_dkdv", model.requested_read, model.requested_write)


# (B, H, H_kv, HEAD_DIM, seqlen_q, seqlen_k, dtype, alignment, tiles, programs a wave)
LAYERS = (
    (64, 32, 8, 128, 6000, 6100, "bf16", "bottom-right", Tiling(), 264),
    (64, 32, 8, 128, 6000, 6100, "bf16", "bottom-right", Tiling(), 100),
    (32, 32, 8, 128, 6000, 6100, "fp16", "top-left", WORKSHEET_TILES, 264),
    (32, 16, 16, 64, 4096, 4196, "bf16", "bottom-right", WORKSHEET_TILES, 660),
    (64, 12, 3, 128, 3000, 2800, "fp32", "top-left", Tiling(), 132),
    (32, 32, 8, 128, 2048, 2048, "fp32", "top-left", Tiling(), 100),
    # a reviewer's layer whose Q sum lands near half a byte (…465.50098): per-wave sums added over waves rounded to
    # …465, the touch-by-touch evaluation to …466; the additions replayed in wave order give its very double
    (128, 32, 4, 64, 7527, 7249, "bf16", "bottom-right", Tiling(bwd_block_m=32, bwd_block_n=128), 532),
)


@pytest.mark.parametrize("layer", LAYERS, ids=lambda r: f"B{r[0]}-H{r[1]}-KV{r[2]}-d{r[3]}-{r[4]}:{r[5]}-{r[7]}-W{r[9]}")
def test_one_wave_per_phase_gives_the_touch_by_touch_bytes(layer):
    B, H, kv, d, nq, nk, dt, align, tiles, w = layer
    spec = LayerSpec(B, H, kv, d, nq, nk, dtype=dt, causal=True, causal_align=align, backward=True)
    model = stream._DkdvEvents(spec, tiles, w, H200.write_share)
    got = stream.periodic_dkdv(model, H200.capacity, H200.ways, H200.read_capacity)
    assert got is not None and got.note.startswith("one wave per phase (")
    want = _touch_by_touch(model)
    assert got.hbm_read == want.hbm_read
    assert got.hbm_write == want.hbm_write
    # the reads' doubles themselves, not only their rounding: the additions are replayed in the same order
    engine = model.engine(H200.capacity, H200.ways)
    engine.judge_reads_at(H200.read_capacity)
    stream._drive(model, engine)
    spied = {}
    real = stream._rounded
    try:
        stream._rounded = lambda d: spied.setdefault(len(spied), dict(d)) and real(d)
        stream.periodic_dkdv(model, H200.capacity, H200.ways, H200.read_capacity)
    finally:
        stream._rounded = real
    assert spied[0] == engine.sums.values
    assert got.dirty_at_end == want.dirty_at_end
    assert got.requested_read == want.requested_read and got.waves == want.waves == len(model.p0)


def test_the_phases_are_fewer_than_the_waves():
    """64 sequences of 6,100 keys, 8 KV heads: 512 lanes of T_c = 48 key tiles, W = 264 = 5.5 lanes; phases
    (v·264) mod 48 are the multiples of gcd(264, 48) = 24 below 48: two of them for 94 waves."""
    spec = LayerSpec(64, 32, 8, 128, 6000, 6100, dtype="bf16", causal=True, causal_align="bottom-right", backward=True)
    model = stream._DkdvEvents(spec, Tiling(), 264, H200.write_share)
    assert model.t_c == 48 and len(model.p0) == 94
    assert sorted(set((model.p0[:-1] % model.t_c).tolist())) == [0, 24]
    got = stream.periodic_dkdv(model, H200.capacity, H200.ways, H200.read_capacity)
    assert got.note.startswith("one wave per phase (2 phases of 94 waves, warm-ups of up to ")


def test_it_declines_where_it_does_not_pay():
    """A single sequence has few lanes: every wave its own phase (Llama-3-8B-like, 16k tokens), and a short
    kernel (fewer than 8 waves): None, before any wave is run, so the caller evaluates every wave."""
    one = LayerSpec(1, 32, 8, 128, 16384, 16384, dtype="bf16", causal=True, backward=True)
    model = stream._DkdvEvents(one, Tiling(), 264, H200.write_share)
    phases = len(set((model.p0[:-1] % model.t_c).tolist()))
    assert phases == len(model.p0) - 1
    assert stream.periodic_dkdv(model, H200.capacity, H200.ways, H200.read_capacity) is None
    short = stream._DkdvEvents(LayerSpec(2, 8, 8, 64, 1024, 1024, dtype="fp16", causal=True, backward=True), Tiling(),
                               264, H200.write_share)
    assert len(short.p0) < 8 and stream.periodic_dkdv(short, H200.capacity, H200.ways, H200.read_capacity) is None
    # the fully associative LRU and a window band keep their own evaluation
    assert stream.periodic_dkdv(model, H200.capacity, None, None) is None


def test_the_warm_up_must_weigh_the_saturation_distance():
    """The certificate: a warm-up whose distinct bytes (the stack's entries, superseded ones zeroed) fall short of
    the saturation distance is refused; one wave of this layer weighs about 40 MB, the distance about 133 MB."""
    spec = LayerSpec(64, 32, 8, 128, 16384, 16384, dtype="bf16", causal=True, backward=True)
    model = stream._DkdvEvents(spec, WORKSHEET_TILES, 264, H200.write_share)
    d_sat = stream.read_saturation(H200.capacity, H200.read_capacity, H200.ways)
    assert 130e6 < d_sat < 136e6
    v = 100
    assert stream._certified_wave(model, H200.capacity, H200.ways, H200.read_capacity, v, 1) is None
    engine = stream._certified_wave(model, H200.capacity, H200.ways, H200.read_capacity, v, 4)
    assert engine is not None and (engine.t0 > 0 or engine.w.sum() >= d_sat)


def test_full_extents_are_the_first_programs_rows():
    """A lane that started before the window: each chunk's extent is the rows its first program (lo_0 = 0) sweeps
    there, the chunk's rows up to the end (880 rows past the last 1,024-row chunk boundary below 6,000)."""
    spec = LayerSpec(2, 4, 2, 64, 6000, 6000, dtype="fp16", causal=True, backward=True)
    model = stream._DkdvEvents(spec, Tiling(), 8, H200.write_share)
    engine = model.engine(H200.capacity, H200.ways)
    stream._full_extents(model, engine, np.array([1], dtype=np.int64))
    assert model.chunk == 1024 and model.n_chunks == 6 and model.G == 2
    ext = engine.ext.reshape(-1, model.n_chunks)
    assert ext[:2].sum() == 0 and ext[4:].sum() == 0  # lanes 0, 2 and 3 (b·H_kv + kv) untouched
    assert ext[2:4].tolist() == [[1024, 1024, 1024, 1024, 1024, 880]] * 2  # lane 1's two query heads
