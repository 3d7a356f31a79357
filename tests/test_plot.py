"""Plots: the curves come from the compiled sweep, hand-checked at one point; overlays; files."""

from __future__ import annotations

import numpy as np
import pytest

from iomodel.errors import IomodelError
from iomodel.report.plot import largest_fitting_tiles, plot_blocks, plot_seqlen, plot_sram, write_plots
from iomodel.spec.resolve import resolve_layer
from iomodel.traffic import predict

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small():
    """B=1, H=2, H_kv=1, HEAD_DIM=16, fp16, no mask, BLOCK_M=32, BLOCK_N=16, 1 stage (see test_worksheet.py)."""
    return resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, causal=False,
                         block_m=32, block_n=16, num_stages=1)


def _line(ax, label_start):
    lines = [ln for ln in ax.get_lines() if ln.get_label().startswith(label_start)]
    assert len(lines) == 1, [ln.get_label() for ln in ax.get_lines()]
    return lines[0]


def test_seqlen_plot_values_and_labels(small, monkeypatch):
    import iomodel.traffic as traffic

    # curves must come from sweep(), never from predict() point by point
    monkeypatch.setattr(traffic, "predict", lambda *a, **k: pytest.fail("plot used predict"))
    fig = plot_seqlen(small.spec, small.tiling, small.hardware, seqlens=[64, 128, 256])
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    tiled = _line(ax, "tiled (bundled kernel): HBM bytes transferred")
    base = _line(ax, "baseline (eager, materialised scores): HBM bytes transferred")
    floor = _line(ax, "compulsory floor")
    xs = list(tiled.get_xdata())
    i = xs.index(64)
    # hand-computed in test_worksheet.py: tiled 25,088 B, baseline 126,976 B, compulsory 12,288 B at N = 64
    assert tiled.get_ydata()[i] == 25_088
    assert base.get_ydata()[i] == 126_976
    assert floor.get_ydata()[i] == 12_288
    # N = 128: tiled = Q 8,192 + K, V 2 heads * 4 tiles * 128*16*2 B each (2 * 32,768) + O 8,192 + LSE 1,024
    assert tiled.get_ydata()[xs.index(128)] == 8_192 + 2 * 32_768 + 8_192 + 1_024
    alloc = _line(ax, "tiled: allocated in HBM")
    assert alloc.get_ydata()[i] == 12_800 and alloc.get_linestyle() == "--"
    text = " ".join(t.get_text() for t in fig.texts)
    for needle in ("H=2", "H_kv=1", "HEAD_DIM=16", "fp16", "BLOCK_M=32", "BLOCK_N=16", "H200", "1 KiB = 1,024 B"):
        assert needle in text, needle
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert any(lbl.endswith("KiB") for lbl in labels), labels


def test_decode_seqlen_plot_varies_the_kv_cache():
    lay = resolve_layer(phase="decode", seqlen=8192)
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[1024, 8192])
    assert "KV-cache length" in fig.axes[0].get_xlabel()
    assert (lay.tiling.num_splits, lay.tiling.heads_per_program) == (16, 4)  # the layer's tiles, kept along the curve
    # the label says the splits are held (the bundled kernel picks its own per length: a fresh user's finding, the
    # curve at 512 keys was 1.31x the worksheet's bytes under the plain "bundled kernel" label before 2026-12-07)
    tiled = _line(fig.axes[0], "tiled (num_splits = 16 held at every length;\nthe bundled kernel picks its splits "
                               "per length)")
    # Llama-3-8B decode, bf16, H = 32, H_kv = 8, HEAD_DIM 128, one query row, 16 splits (one round of
    # 132 SMs x 2 programs is 33, capped by 128 blocks // 8 per split). Per N_k:
    #   K and V (1, 8, N_k, 128) read once: 2 * 8 * N_k * 128 * 2 B
    #   Q (1, 32, 1, 128) read by every split: 16 * 32 * 128 * 2 = 131,072 B
    #   fp32 partials O_PART (1, 32, 16, 1, 128) and LSE_PART (1, 32, 16, 1) written, then read by each
    #   group's last split program: 2 * (262,144 + 2,048) = 528,384 B; O written 8,192 B, LSE (fp32) 128 B
    #   fused counters SEM: 8 groups (B·H/P = 32 / 4), one int32 atomic per program (16 · 8 · 4 B read
    #   and written) and one reset store per group (8 · 4 B): 512 + 544 = 1,056 B
    assert lay.tiling.fused_combine
    fixed = 131_072 + 528_384 + 8_192 + 128 + 1_056
    assert list(tiled.get_ydata()) == [2 * 8 * n * 128 * 2 + fixed for n in (1024, 8192)]


def test_decode_seqlen_plot_at_the_launchers_split_count_per_length(capsys, tmp_path, monkeypatch):
    """With ``launcher_splits`` (what ``iomodel worksheet --plot-dir`` and ``iomodel plot`` pass unless --num-splits
    fixes the count; twenty-second session) each KV-cache length takes the split count the launcher picks for it, so
    the tiled curve is the bundled kernel's: at every length it equals the worksheet's tiled HBM bytes of that
    length. Llama-3-8B decode on the H200 (kernels/heuristics.py): the rule's one round of 264 programs over 8 per
    split is 33, clamped by cdiv(N_k, 64) // 8: 1 split at 512 keys, 2 at 1,024, 16 at 8,192; at 16,384 the rule's 32
    is cut to FUSED_MAX_SPLITS 16 (the fused merge, K of 2^24 elements); at 65,536 K is 2^26 elements, past
    FUSED_COMBINE_MAX_K_ELEMENTS (two launches), and 33 splits of the 1,024 key blocks become 32 non-empty ones."""
    from iomodel.report.plot import decode_tilings

    lay = resolve_layer(phase="decode", seqlen=8192)
    xs = [512, 1024, 8192, 16384, 65536]
    assert [t.num_splits for t in decode_tilings(lay.spec, lay.tiling, lay.hardware, xs)] == [1, 2, 16, 16, 32]
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=xs, launcher_splits=True)
    tiled = _line(fig.axes[0], "tiled (bundled kernel, the launcher's num_splits at each length: 1 to 32)")
    want = [predict(at.spec, at.tiling, at.hardware).algorithms["tiled"].hbm_bytes  # the worksheet's, at each length
            for at in (resolve_layer(phase="decode", seqlen=x) for x in xs)]
    assert list(tiled.get_ydata()) == want
    ax = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=xs).axes[0]
    held = _line(ax, "tiled (num_splits = 16 held")
    # held: not drawn at 512 keys (8 key blocks of 64 for 16 splits: the kernel never runs it, the worksheet refuses
    # it; a fresh user's finding, drawn at up to 2x the floor before), said in the legend
    assert list(held.get_xdata()) == [1024, 8192, 16384, 65536]
    assert held.get_ydata()[1] == want[2] and held.get_ydata()[0] > want[1]  # 16 splits' partials at 1,024 keys
    _line(ax, "tiled not drawn at 512 keys:\nnum_splits 16 is more than their key blocks (BLOCK_N = 64)")
    paged = resolve_layer(phase="decode", seqlen=8192, page_size=64)  # the footer states the pages, and no L2 constants
    text = " ".join(t.get_text() for t in plot_seqlen(paged.spec, paged.tiling, paged.hardware, seqlens=xs).texts)
    assert "paged KV cache of 64-token pages" in text and "L2-aware" not in text
    # the commands: --num-splits given, held (and said so); left out, the launcher's
    import iomodel.report.plot as plot_mod
    from test_cli_errors import run_cli

    seen = []
    real = plot_mod.plot_seqlen
    monkeypatch.setattr(plot_mod, "plot_seqlen", lambda *a, **k: seen.append(k["launcher_splits"]) or real(*a, **k))
    for i, (cmd, extra) in enumerate((("worksheet", []), ("worksheet", ["--num-splits", "4"]), ("plot", []),
                                      ("plot", ["--num-splits", "4"]))):
        out = ["--plot-dir", str(tmp_path / f"w{i}"), "-o", str(tmp_path / "w.md")] if cmd == "worksheet" else \
            ["-o", str(tmp_path / f"p{i}"), "--kind", "seqlen"]
        code, _, err = run_cli(capsys, [cmd, "--phase", "decode", "--seqlen", "8192", *out, *extra])
        assert code == 0, err
    assert seen == [True, False, True, False]
    # a layer no bundled kernel runs, modelled with the tiles given (fp8): no launcher picks its splits, so the count
    # is held and the legend does not credit the bundled kernel (a reviewer's finding: the plot failed, asking for the
    # --block-m/--block-n it had)
    fp8 = resolve_layer(phase="decode", seqlen=8192, dtype="fp8_e4m3", block_m=16, block_n=64)
    from iomodel.report.plot import decode_tilings

    assert decode_tilings(fp8.spec, fp8.tiling, fp8.hardware, xs) is None
    _line(real(fp8.spec, fp8.tiling, fp8.hardware, seqlens=xs, launcher_splits=True).axes[0],
          f"tiled (num_splits = {fp8.tiling.num_splits} held at every length): HBM")
    code, _, err = run_cli(capsys, ["plot", "--phase", "decode", "--dtype", "fp8_e4m3", "--block-m", "16", "--block-n",
                                    "64", "-o", str(tmp_path / "fp8"), "--kind", "seqlen"])
    assert code == 0, err


def test_measured_overlay(small):
    pts = [{"seqlen": 64, "bytes": 30_000, "label": "ncu", "level": "HBM"},
           {"seqlen": 128, "bytes": 90_000, "label": "ncu", "level": "HBM"},
           {"seqlen": 64, "bytes": 25_088, "label": "interpreter", "level": "SRAM_fill"}]
    fig = plot_seqlen(small.spec, small.tiling, small.hardware, seqlens=[64, 128], measured=pts)
    ax = fig.axes[0]
    scat = {c.get_label(): c.get_offsets() for c in ax.collections}
    assert np.array_equal(np.asarray(scat["measured HBM: ncu"]), [[64, 30_000], [128, 90_000]])
    assert np.array_equal(np.asarray(scat["measured SRAM_fill: interpreter"]), [[64, 25_088]])
    with pytest.raises(IomodelError, match="measured point 0"):
        plot_seqlen(small.spec, small.tiling, small.hardware, measured=[{"bytes": 1}])


def test_blocks_heat_map(small):
    fig = plot_blocks(small.spec, small.tiling, small.hardware, block_sizes=(16, 32, 64),
                      measured=[{"block_m": 32, "block_n": 16, "bytes": 26_000, "label": "ncu"}])
    ax = fig.axes[0]
    img = ax.get_images()[0].get_array()
    floor = predict(small.spec, small.tiling, small.hardware).compulsory_bytes
    # rows BLOCK_M 16, 32, 64; columns BLOCK_N 16, 32, 64 (log2 of bytes / compulsory floor). BLOCK_M = 32:
    # 25,088 B (any BLOCK_N: no mask, N_k = 64 is a multiple of BLOCK_N). BLOCK_M = 16: K, V read 4 times per
    # head instead of 2.
    assert np.allclose(2 ** np.asarray(img)[1] * floor, 25_088)
    assert np.allclose(2 ** np.asarray(img)[0] * floor, 4_096 + 2 * 2 * 4 * 2_048 + 4_096 + 512)
    # the colour range starts at the floor (1x) and spans at least a factor of 2
    lo, hi = ax.get_images()[0].get_clim()
    assert lo == 0.0 and hi == pytest.approx(max(1.0, float(np.log2((4_096 + 2 * 2 * 4 * 2_048 + 4_096 + 512) / floor))))
    texts = [t.get_text() for t in ax.texts]
    assert any("24.5 KiB" in t and "measured HBM 25.4 KiB" in t for t in texts)
    assert "this layer's tiles" in texts


def test_sram_plot_theorem2_slope():
    lay = resolve_layer(seqlen=4096)
    m = np.array([2**13, 2**14, 2**15, 2**16, 2**17])
    fig = plot_sram(lay.spec, lay.tiling, lay.hardware, sram_bytes=m)
    ax = fig.axes[0]
    fa1 = _line(ax, "FlashAttention-1").get_ydata()
    # Theorem 2: Θ(N²d²/M) — doubling M roughly halves FlashAttention-1's bytes while they dominate
    ratios = fa1[:-1] / fa1[1:]
    assert np.all(ratios > 1.6) and np.all(ratios < 2.2), ratios
    qs = _line(ax, "Q-stationary").get_ydata()
    assert np.isnan(qs[0])  # 8 KiB: not even 16 x 16 tiles of HEAD_DIM 128 bf16 (12 KiB with 1 stage)
    assert np.all(np.diff(qs[1:]) < 0)  # larger SRAM, larger BLOCK_M, fewer K/V re-reads
    with pytest.raises(IomodelError, match="prefill"):
        dec = resolve_layer(phase="decode")
        plot_sram(dec.spec, dec.tiling, dec.hardware)


def test_largest_fitting_tiles():
    spec = resolve_layer().spec  # HEAD_DIM 128, bf16: (BLOCK_M*128 + 2*BLOCK_N*128) * 2 B with one stage
    bm, bn = largest_fitting_tiles(spec, np.array([2**15, 2**16, 24 * 1024 - 1, 12 * 1024 - 1]))
    # 32 KiB: BLOCK_M + 2 BLOCK_N <= 128 -> 64 x 32; 64 KiB: <= 256 -> 128 x 64; just under 24 KiB: < 96 ->
    # 32 x 16 (64 x 16 needs exactly 96); below 12 KiB (16 x 16) nothing fits
    assert list(bm) == [64, 128, 32, 0] and list(bn) == [32, 64, 16, 0]
    short = resolve_layer(seqlen=100).spec  # BLOCK_M capped at next_pow2(seqlen_q) = 128
    bm, _ = largest_fitting_tiles(short, np.array([2**22]))
    assert bm[0] == 128


def test_write_plots(tmp_path):
    lay = resolve_layer(seqlen=2048)
    paths = write_plots(lay.spec, lay.tiling, lay.hardware, tmp_path / "p")
    assert [p.name for p in paths] == ["bytes_vs_seqlen.png", "bytes_vs_blocks.png", "bytes_vs_sram.png"]
    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
    dec = resolve_layer(phase="decode", seqlen=2048)
    paths = write_plots(dec.spec, dec.tiling, dec.hardware, tmp_path / "d")
    assert [p.name for p in paths] == ["bytes_vs_seqlen.png", "bytes_vs_blocks.png"]


def test_seqlen_plot_marks_hbm_capacity_and_shows_tiled_allocation():
    """Llama-3-8B prefill bf16 on the H200 (141e9 B of HBM): the baseline holds at least S and P,
    2 tensors * 32 heads * N^2 * 2 B = 128 * N^2 B: 512 GiB at N = 64k (over the capacity). The
    first sampled length over the capacity carries the cross; the capacity is a horizontal line."""
    lay = resolve_layer(seqlen=8192)
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[8192, 32768, 65536])
    ax = fig.axes[0]
    base_alloc = _line(ax, "baseline: allocated in HBM")
    y = base_alloc.get_ydata()
    assert y[1] <= 141e9 < y[2] and y[2] >= 128 * 65536**2  # S and P alone exceed 141 GB at 64k
    mark = _line(ax, "baseline allocation exceeds HBM capacity")
    assert list(mark.get_xdata()) == [65536] and list(mark.get_ydata()) == [y[2]] and mark.get_marker() == "X"
    assert "65,536 tokens" in mark.get_label()
    cap = _line(ax, "H200 HBM capacity (141 GB")
    assert list(cap.get_ydata()) == [141e9, 141e9]
    tiled_alloc = _line(ax, "tiled: allocated in HBM")
    assert tiled_alloc.get_marker() == "o" and tiled_alloc.get_label().endswith("lies on the compulsory floor")
    # the L2-aware estimate (also at 16k) is under the floor, Q and O of 32 heads and K, V of 8 read or written once,
    # (2·32 + 2·8)·N·128·2 B, where O stays dirty in L2 at the kernel's end (8k, 16k), over it where K/V re-reads
    # outweigh that (32k, 64k); the legend names the first two
    l2 = _line(ax, "tiled: L2-aware")
    assert list(l2.get_xdata()) == [8192, 16384, 32768, 65536]
    assert l2.get_ydata()[0] < 80 * 8192 * 256 and l2.get_ydata()[2] > 80 * 32768 * 256
    assert "\nbelow the floor at N = 8k, 16k: outputs still dirty" in l2.get_label()


def test_seqlen_plot_without_capacity_overflow_has_no_mark(small):
    fig = plot_seqlen(small.spec, small.tiling, small.hardware, seqlens=[64, 128])
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert not any("HBM capacity" in lbl for lbl in labels)


def test_seqlen_plot_draws_the_l2_aware_estimate_beside_the_no_reuse_bound(small):
    """Both tiled curves, labelled by what each counts; the L2-aware one is predict_tiled's DRAM bytes.

    Small layer (H = 2, H_kv = 1, HEAD_DIM 16, fp16, no mask) at N = 64: everything fits the L2, so
    DRAM reads are the compulsory Q 2·64·16·2 = 4,096 B plus K and V 64·16·2 = 2,048 B each, 8,192 B;
    the 4,096 B of O and 512 B of LSE stay dirty in L2 at kernel end, so nothing is counted written.
    """
    from iomodel.cache.estimate import launch_params
    from iomodel.cache.predict import predict_tiled
    from iomodel.report.plot import L2_AWARE_LABEL, NO_REUSE_LABEL
    from iomodel.report.worksheet import l2_launch

    fig = plot_seqlen(small.spec, small.tiling, small.hardware, seqlens=[64, 128, 256])
    ax = fig.axes[0]
    assert _line(ax, NO_REUSE_LABEL).get_ydata()[0] == 25_088
    assert NO_REUSE_LABEL.endswith("no-reuse HBM bound (every load leaves the chip)")
    l2 = _line(ax, L2_AWARE_LABEL)
    assert L2_AWARE_LABEL == "tiled: L2-aware DRAM estimate (what ncu's dram__bytes counts)"
    # 8,192 B is under the floor's 12,288 B (Q, K, V read, O written once): the legend says why, at each N under it
    assert l2.get_label().endswith("simulated at N = 64, 128, 256;\nbelow the floor at N = 64, 128, 256: outputs "
                                   "still dirty in L2 at the kernel's end\nreach DRAM after it, outside the kernel's "
                                   "dram__bytes")
    assert _line(ax, "compulsory floor").get_ydata()[0] == 12_288
    assert list(l2.get_xdata()) == [64, 128, 256]
    assert l2.get_ydata()[0] == 8_192
    warps, order, _, _, _ = l2_launch(small.spec, small.hardware)
    for x, y in zip(l2.get_xdata(), l2.get_ydata()):
        at = small.spec.with_(seqlen_q=int(x), seqlen_k=int(x))
        want = predict_tiled(at, small.tiling, launch_params(at, small.tiling, small.hardware, warps), order)
        assert y == want.hbm_read_bytes + want.hbm_write_bytes


def test_l2_aware_curve_takes_the_gluon_prefills_one_program_per_sm():
    """HEAD_DIM 64 non-causal on the H200 runs the four-warpgroup Gluon prefill, one program per SM
    (``TileChoice.programs_per_sm``): the curve's points are the estimate at 1 program per SM, not at the 2 that
    shared memory alone allows, and differ from it."""
    from iomodel.cache.estimate import launch_params
    from iomodel.cache.predict import predict_tiled
    from iomodel.report.plot import L2_AWARE_LABEL

    lay = resolve_layer(batch=1, heads=16, kv_heads=16, head_dim=64, seqlen=32768, causal=False, dtype="bf16",
                        hardware="H200")
    assert (lay.tiling.block_m, lay.tiling.block_n) == (256, 64)
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[32768, 65536])
    l2 = _line(fig.axes[0], L2_AWARE_LABEL)
    assert list(l2.get_xdata()) == [32768, 65536]
    for x, y in zip(l2.get_xdata(), l2.get_ydata()):
        at = lay.spec.with_(seqlen_q=int(x), seqlen_k=int(x))
        one, two = (predict_tiled(at, lay.tiling, launch_params(at, lay.tiling, lay.hardware, 20, p), "forward")
                    for p in (1, 2))
        assert launch_params(at, lay.tiling, lay.hardware, 20).programs_per_sm == 2  # shared memory alone
        assert y == one.hbm_read_bytes + one.hbm_write_bytes != two.hbm_read_bytes + two.hbm_write_bytes


def test_l2_aware_curve_skips_points_past_its_budget_and_says_so():
    """Llama-3-8B, batch 50, BLOCK_M 128, a 1,024-token window: the fast evaluation does not take window bands,
    so the points count as simulated. Its own length first, N = 8k: 50·32·64 = 102,400 programs, then 2k
    25,600; 4k would be 51,200 more, past the curve's budget of 131,072 programs in all: skipped, named in the
    legend. Without the window (1,600 grid rows: past 1,024 but within the fast evaluation's 16,384 at 8k
    tokens, estimate.fast_max_rows) the fast evaluation covers every point: all drawn."""
    from iomodel.report.plot import L2_AWARE_LABEL

    lay = resolve_layer(batch=50, window="1024")
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[2048, 4096, 8192])
    ax = fig.axes[0]
    assert list(_line(ax, f"{L2_AWARE_LABEL},\nsimulated").get_xdata()) == [2048, 8192]
    note = _line(ax, f"{L2_AWARE_LABEL}\nnot computed").get_label()
    assert "not computed at N = 4k:" in note and "budget of 131,072 programs" in note
    fast = resolve_layer(batch=50)
    fig = plot_seqlen(fast.spec, fast.tiling, fast.hardware, seqlens=[2048, 4096, 8192])
    assert list(_line(fig.axes[0], f"{L2_AWARE_LABEL},\nsimulated").get_xdata()) == [2048, 4096, 8192]


def test_decode_seqlen_plot_says_the_l2_aware_estimate_is_not_drawn():
    from iomodel.report.plot import L2_AWARE_LABEL

    lay = resolve_layer(phase="decode", seqlen=8192)
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[1024, 8192])
    note = _line(fig.axes[0], L2_AWARE_LABEL)
    assert note.get_label() == (f"{L2_AWARE_LABEL}\nnot drawn: the worksheet estimates prefill launches only (a "
                                "decode's L2-aware\nDRAM bytes are predicted by `iomodel reconcile` beside a measured "
                                "record)")
    assert len(note.get_xdata()) == 0
    # the legend below the axes stays inside the figure (the unwrapped sentence pushed its right column off the page)
    fig.canvas.draw()
    box, page = fig.legends[0].get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)


def test_training_step_seqlen_plot_says_where_its_l2_estimate_is():
    """A fwd+bwd layer: the seqlen plot's L2-aware line is the forward kernel's, so it is not drawn, and the legend says
    where the training step's estimate is (a fresh user saw 'not drawn: None' here)."""
    from iomodel.report.plot import L2_AWARE_LABEL

    lay = resolve_layer(heads=40, kv_heads=10, head_dim=128, seqlen=959, dtype="fp16", causal=True, passes="fwd+bwd")
    fig = plot_seqlen(lay.spec, lay.tiling, lay.hardware, seqlens=[512, 1024, 2048])
    note = _line(fig.axes[0], L2_AWARE_LABEL)
    assert note.get_label() == (f"{L2_AWARE_LABEL}\nnot drawn: this line is the prefill forward kernel's; the "
                                "training step's\nestimate, per kernel, is in `iomodel worksheet --pass fwd+bwd`")
    assert "None" not in note.get_label() and "iomodel worksheet --pass fwd+bwd" in note.get_label()
    assert len(note.get_xdata()) == 0
