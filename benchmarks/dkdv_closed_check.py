"""The causal dK/dV kernel's closed form against its touch-by-touch evaluation (issue 12, item 4).

Run: ``PYTHONPATH=. python benchmarks/dkdv_closed_check.py [--quick] [--out FILE.json]``.

For each layer (H200, its default L2, the backward tiles the row names, the worksheet's programs per SM), the
``_bwd_dkdv`` kernel of the causal training step is evaluated twice: touch by touch
(:class:`iomodel.cache.stream._DkdvEvents`, the closed form's bound
:data:`iomodel.cache.estimate.L2_DKDV_CLOSED_FORM_MIN_TOUCHES` lifted for this run) and in closed form
(:func:`iomodel.cache.dkdv_closed.closed_form_dkdv`). It prints the
kernel's DRAM read and write bytes by each, their ratio (closed / touch by touch) and both wall times. The
layers cover GQA (G 4 and 8), MHA, G 16, HEAD_DIM 32 to 256, fp16, bf16 and fp32, both causal alignments with
seqlen_q ≠ seqlen_k,
batches 1 to 64, the default backward tiles (``Tiling()``: BWD_BLOCK_N 128) and the worksheet's (BWD_BLOCK_N 64),
and lengths past the bound where the touch-by-touch evaluation still finishes in a few minutes (the last row about
70 s on a 2-core CPU). The closed form is taken only where
:func:`iomodel.cache.estimate.dkdv_closed_form_applies` (past 8 million touches, the shorter length's query rows
weighing the L2 model's saturation distance: 2^18 tokens at HEAD_DIM 128 in bf16; since 2026-12-06 also past 65,536
touches (250,000 until the eighteenth session) from 16,384 query rows for MHA and for heads-outer GQA from 32,768 query
rows); the last column says whether it
applies. Three hold-out sets follow (``MHA_HOLDOUT``, ``HOLDOUT_2``, ``HOLDOUT_3``: layers chosen and committed before
the form they check ran on them; ``--mha-holdout`` runs only those). ``--quick`` keeps the layers
under 2^18 tokens and one where the closed form is taken (seconds). ``--random N --seed S`` instead draws N layers at
random (:func:`random_layers`: MHA and GQA whose dK/dV reads are not a prediction, B 1-4, 16,384-120,000 query rows,
four tile pairs, the H200 or the H100, each with its own L2 parameters) whose kernel has ``--touches LO HI`` touches:
the check of the any-length bound (:data:`iomodel.cache.estimate.L2_DKDV_ANY_LENGTH_MIN_TOUCHES`) between the
rows above (2026-12-06, eighteenth session).
"""

from __future__ import annotations

import sys
import time

import iomodel.cache.estimate as estimate
from iomodel.cache.estimate import dkdv_closed_form_applies
from iomodel.cache.dkdv_closed import closed_form_dkdv
from iomodel.cache.stream import _DkdvEvents, dkdv_touches, fast_kernel_l2, read_saturation
from iomodel.paths import check_output_file, exit_code_of, one_line_parser, probe_exit_code
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import get_hardware

#: The worksheet's backward tiles of a HEAD_DIM 128 layer (BWD_BLOCK_M 32, BWD_BLOCK_N 64).
WORKSHEET_TILES = Tiling(bwd_block_m=32, bwd_block_n=64, dq_block_m=128, dq_block_n=64)
#: (B, H, H_kv, HEAD_DIM, seqlen_q, seqlen_k, dtype, causal_align, tiles)
LAYERS = (
    (1, 32, 8, 128, 2**16, 2**16, "bf16", "top-left", Tiling()),
    (1, 32, 32, 128, 2**16, 2**16, "bf16", "top-left", Tiling()),
    (2, 16, 4, 64, 40_000, 40_000, "fp16", "top-left", Tiling()),
    (16, 32, 32, 128, 2**15, 2**15, "bf16", "top-left", WORKSHEET_TILES),
    (64, 32, 8, 128, 2**14, 2**14, "bf16", "top-left", WORKSHEET_TILES),
    (1, 32, 8, 128, 60_000, 65_536, "bf16", "bottom-right", Tiling()),
    (1, 64, 8, 128, 2**17, 2**17, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (1, 32, 32, 128, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (1, 32, 32, 128, 2**18, 2**18, "bf16", "top-left", WORKSHEET_TILES),
    (1, 16, 1, 128, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (4, 32, 8, 128, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (2, 16, 4, 64, 2**18, 2**18, "fp16", "top-left", Tiling()),
    (1, 16, 16, 64, 2**18, 2**18, "fp16", "bottom-right", Tiling()),
    (1, 32, 32, 32, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (1, 32, 32, 64, 2**19, 2**19, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 262_144, 300_000, "bf16", "bottom-right", WORKSHEET_TILES),
    (1, 16, 4, 256, 2**18, 2**18, "bf16", "top-left", WORKSHEET_TILES),
    (1, 16, 4, 64, 2**18, 2**18, "fp32", "top-left", Tiling()),
    (1, 32, 8, 32, 2**18, 2**18, "bf16", "top-left", Tiling()),
    (1, 8, 1, 128, 2**19, 2**19, "fp16", "top-left", WORKSHEET_TILES),
    (1, 32, 8, 128, 2**18, 2**18, "bf16", "top-left", WORKSHEET_TILES),
    (1, 32, 8, 128, 2**19, 2**19, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 2**19, 2**19, "bf16", "top-left", WORKSHEET_TILES),
    (1, 32, 8, 128, 2**20, 2**20, "bf16", "top-left", Tiling()),
    (1, 32, 32, 128, 2**20, 2**20, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 2**20, 2**20, "bf16", "top-left", WORKSHEET_TILES),
)
#: MHA layers below 2^18 tokens, chosen and committed (2026-12-06) before the closed form with the previous wave's copy
#: (``dkdv_closed._cross_wave_rows``) was run on them, to check its MHA rule
#: (:data:`iomodel.cache.estimate.L2_DKDV_ANY_LENGTH_MIN_TOUCHES`) on layers it was not written on.
MHA_HOLDOUT = (
    (1, 24, 24, 128, 45_000, 45_000, "bf16", "top-left", Tiling()),
    (3, 16, 16, 64, 24_576, 24_576, "fp16", "top-left", WORKSHEET_TILES),
    (1, 40, 40, 128, 100_000, 131_072, "bf16", "bottom-right", Tiling()),
    (32, 8, 8, 128, 8192, 8192, "bf16", "top-left", WORKSHEET_TILES),
    (1, 16, 16, 256, 2**17, 2**17, "bf16", "top-left", WORKSHEET_TILES),
    (2, 32, 32, 64, 2**17, 2**17, "fp16", "top-left", Tiling()),
    (1, 12, 12, 64, 300_000, 300_000, "bf16", "top-left", Tiling()),
    (6, 32, 32, 64, 12_288, 12_288, "fp32", "top-left", Tiling()),
)
#: A third set, chosen and committed (2026-12-06) after the growth rows were committed (204f53e) and before the closed
#: form of that commit ran on them: MHA and GQA whose dK/dV reads are not a prediction, both alignments.
HOLDOUT_3 = (
    (1, 16, 16, 128, 48_000, 52_000, "bf16", "bottom-right", Tiling()),
    (2, 32, 32, 64, 40_000, 40_000, "fp16", "top-left", WORKSHEET_TILES),
    (1, 24, 24, 256, 60_000, 60_000, "bf16", "top-left", WORKSHEET_TILES),
    (3, 20, 20, 128, 24_576, 24_576, "bf16", "top-left", Tiling()),
    (1, 32, 16, 128, 50_000, 50_000, "bf16", "top-left", WORKSHEET_TILES),
    (1, 48, 16, 128, 40_000, 40_000, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 45_000, 50_000, "bf16", "bottom-right", WORKSHEET_TILES),
    (2, 16, 2, 64, 33_000, 33_000, "fp16", "top-left", Tiling()),
)
#: GQA layers below 2^18 tokens where the closed form was seen off while its rules were written (2026-12-06;
#: development layers and a second reviewer's, not a hold-out): the heads' switches overlap within a wave, and in a
#: later head a chunk's first toucher reads few of its rows. Those past 32,768 query rows and 65,536 touches take
#: the closed form (their dK/dV reads are not a prediction).
GQA_SHORT = (
    (1, 32, 8, 128, 2**15, 2**15, "bf16", "top-left", Tiling()),
    (1, 32, 8, 64, 2**16, 2**16, "bf16", "top-left", Tiling()),
    (1, 32, 16, 128, 2**16, 2**16, "bf16", "top-left", Tiling()),
    (1, 32, 8, 256, 2**16, 2**16, "bf16", "top-left", WORKSHEET_TILES),
    (2, 32, 8, 128, 2**15, 2**15, "bf16", "top-left", WORKSHEET_TILES),
    (4, 32, 8, 64, 2**16, 2**16, "bf16", "top-left", WORKSHEET_TILES),
    (2, 32, 8, 64, 2**16, 2**16, "bf16", "top-left", WORKSHEET_TILES),
    (4, 32, 16, 128, 2**15, 2**15, "bf16", "top-left", WORKSHEET_TILES),
    (1, 32, 16, 128, 2**15, 2**15, "bf16", "top-left", WORKSHEET_TILES),
)
#: A second set, chosen and committed (2026-12-06, after a reviewer's fixes to the cross-wave distance: the item's own
#: bytes, extents from the previous wave's first row) before the fixed form was run on them; MHA and GQA past
#: 32,768 query rows (the rule's two any-length cases), both alignments.
HOLDOUT_2 = (
    (1, 20, 20, 128, 70_000, 70_000, "bf16", "top-left", Tiling()),
    (2, 24, 24, 64, 50_000, 56_000, "fp16", "bottom-right", WORKSHEET_TILES),
    (1, 16, 16, 256, 90_000, 90_000, "bf16", "top-left", WORKSHEET_TILES),
    (4, 32, 32, 128, 20_000, 20_000, "bf16", "top-left", WORKSHEET_TILES),
    (1, 48, 48, 128, 2**17 + 4096, 2**17 + 4096, "bf16", "top-left", Tiling()),
    (1, 32, 8, 128, 80_000, 80_000, "bf16", "top-left", Tiling()),
    (1, 40, 8, 128, 40_000, 48_000, "bf16", "bottom-right", WORKSHEET_TILES),
    (2, 28, 4, 128, 36_000, 36_000, "bf16", "top-left", Tiling()),
)


#: The one layer where the closed form is taken that ``--quick`` keeps (2 s touch by touch).
QUICK_PAST = next(i for i, row in enumerate(LAYERS) if row[:8] == (1, 32, 8, 128, 2**18, 2**18, "bf16", "top-left")
                  and row[8] == Tiling())


#: Backward tile pairs of ``--random`` (BWD_BLOCK_M × BWD_BLOCK_N): the default, the worksheet's, 16×32 and 64×64.
RANDOM_TILES = (Tiling(), WORKSHEET_TILES, Tiling(bwd_block_m=16, bwd_block_n=32, dq_block_m=128, dq_block_n=64),
                Tiling(bwd_block_m=64, bwd_block_n=64, dq_block_m=128, dq_block_n=64))


def random_layers(n: int, seed: int, touches: tuple[int, int]) -> list[tuple]:
    """``n`` layers drawn with ``random.Random(seed)`` (device first, then the LAYERS fields) whose causal ``_bwd_dkdv``
    kernel has between ``touches[0]`` and ``touches[1]`` touches on its device (the worksheet's programs per SM), MHA
    or GQA whose dK/dV reads are not a prediction (:func:`iomodel.cache.predict.dkdv_read_quality`): the layers the
    any-length rule may take. At most 20,000 draws."""
    import random

    from iomodel.cache.predict import dkdv_read_quality

    rng, out = random.Random(seed), []
    for _ in range(20_000):
        if len(out) >= n:
            break
        hw = rng.choice(["H200", "H100"])
        kv, G = rng.choice([1, 2, 4, 8, 16, 24, 32, 40]), rng.choice([1, 1, 1, 2, 4, 8])
        d, B = rng.choice([64, 128, 128, 256, 32]), rng.choice([1, 1, 1, 2, 3, 4])
        nq = rng.randrange(16384, 120000)
        nk = nq if rng.random() < 0.7 else rng.randrange(nq, nq + 20000)
        dt = rng.choice(["bf16", "fp16", "bf16"])
        align = "top-left" if nq == nk else rng.choice(["top-left", "bottom-right"])
        tiling = rng.choice(RANDOM_TILES)
        spec = LayerSpec(B, G * kv, kv, d, nq, nk, dtype=dt, causal=True, causal_align=align, backward=True)
        if tiling.bwd_block_m > tiling.bwd_block_n or (G > 1 and dkdv_read_quality(spec, tiling) != "not a prediction"):
            continue
        if touches[0] <= dkdv_touches(spec, tiling) <= touches[1]:
            out.append((hw, B, G * kv, kv, d, nq, nk, dt, align, tiling))
    return out


def main() -> int:
    ap = one_line_parser(__doc__.splitlines()[0])  # a bad argument: one error: line, exit 2
    ap.add_argument("--quick", action="store_true", help="the layers below 2^18 tokens and one past the bound")
    ap.add_argument("--mha-holdout", action="store_true", help="only the hold-out layers (MHA_HOLDOUT, HOLDOUT_2, HOLDOUT_3)")
    ap.add_argument("--out", help="also write the rows as JSON (written whole at the end, or not at all)")
    ap.add_argument("--random", type=int, metavar="N", help="N >= 1 random layers instead of the fixed ones "
                    "(random_layers)")
    ap.add_argument("--seed", type=int, help="with --random: the random layers' seed (default 0)")
    ap.add_argument("--touches", type=int, nargs=2, metavar=("LO", "HI"),
                    help="with --random: the random layers' touch range (default 65536 250000)")
    args = ap.parse_args()
    if args.random is None:
        if args.seed is not None or args.touches is not None:
            ap.error("--seed and --touches go with --random N: add it, or leave them out")
    else:
        args.seed = 0 if args.seed is None else args.seed
        args.touches = (65_536, 250_000) if args.touches is None else tuple(args.touches)
        if args.random < 1 or args.touches[0] < 0 or args.touches[1] < args.touches[0]:
            ap.error("--random needs N >= 1 and --touches LO HI with 0 <= LO <= HI")
        if args.quick or args.mha_holdout:
            ap.error("--random draws its own layers: leave out --quick and --mha-holdout")
    if args.out and exit_code_of(lambda: check_output_file(args.out, "--out")):  # refused before minutes of work
        return 2
    started = time.time()
    bounds = {n: getattr(estimate, n) for n in ("L2_DKDV_CLOSED_FORM_MIN_TOUCHES", "L2_DKDV_ANY_LENGTH_MIN_TOUCHES")}

    def lift(on: bool) -> None:  # touch by touch at any length, for this comparison (on), or the worksheet's bounds
        for n, b in bounds.items():
            setattr(estimate, n, 10**18 if on else b)

    lift(True)
    rows = []
    print(f"{'layer':<66} {'touches':>13} {'read ratio':>10} {'write ratio':>11} {'exact s':>8} {'closed s':>8} "
          f"{'applies':>7}")
    layers = ([(("H200",) + row, "") for row in LAYERS if not args.mha_holdout]
              + [(("H200",) + row, "GQA short") for row in GQA_SHORT if not args.mha_holdout]
              + [(("H200",) + row, "MHA hold-out") for row in MHA_HOLDOUT]
              + [(("H200",) + row, "hold-out 2") for row in HOLDOUT_2]
              + [(("H200",) + row, "hold-out 3") for row in HOLDOUT_3])
    if args.random:
        drawn = random_layers(args.random, args.seed, args.touches)
        layers = [(row, f"random {args.seed}") for row in drawn]
        if len(drawn) < args.random:  # said, not silently fewer
            print(f"# only {len(drawn)} of {args.random} random layers have {args.touches[0]:,}-{args.touches[1]:,} "
                  "touches in 20,000 draws: widen --touches for more", flush=True)
    for (device, B, H, kv, d, nq, nk, dt, align, tiling), holdout in layers:
        if args.quick and max(nq, nk) >= 2**18 and (B, H, kv, d, nq, nk, dt, align, tiling) != LAYERS[QUICK_PAST]:
            continue
        spec = LayerSpec(B, H, kv, d, nq, nk, dtype=dt, causal=True, causal_align=align, backward=True)
        p = estimate.dkdv_l2_params(spec, tiling, get_hardware(device))
        t0 = time.perf_counter()
        k = fast_kernel_l2("_bwd_dkdv", spec, tiling, p.resident_programs, p.capacity, p.write_share, p.ways,
                           read_capacity=p.read_capacity)
        t_exact = time.perf_counter() - t0
        model = _DkdvEvents(spec, tiling, p.resident_programs, p.write_share)
        t0 = time.perf_counter()
        c = closed_form_dkdv(model, p.capacity, p.ways, p.read_capacity)
        t_closed = time.perf_counter() - t0
        r_e, r_c = sum(k.hbm_read.values()), sum(c.hbm_read.values())
        w_e, w_c = sum(k.hbm_write.values()), sum(c.hbm_write.values())
        tiles = f"{tiling.bwd_block_m}x{tiling.bwd_block_n}"
        name = (f"{'' if device == 'H200' else device + ' '}B{B} H{H} KV{kv} d{d} {nq}:{nk} {dt} {align} {tiles}"
                + (f" ({holdout})" if holdout else ""))
        lift(False)  # whether the worksheet takes the closed form here
        applies = dkdv_closed_form_applies(spec, tiling, model.all_touches,  # as fast_kernel_l2 decides it
                                           read_saturation(p.capacity, p.read_capacity, p.ways))
        lift(True)
        rows.append({"layer": name, "device": device, "touches": model.all_touches, "closed_form_applies": applies, "holdout": holdout,
                     "read_bytes": {"touch_by_touch": r_e, "closed": r_c},
                     "write_bytes": {"touch_by_touch": w_e, "closed": w_c}, "seconds": {"touch_by_touch": t_exact,
                                                                                       "closed": t_closed}})
        print(f"{name:<66} {model.all_touches:>13,} {r_c / r_e:>10.4f} {w_c / w_e:>11.5f} {t_exact:>8.2f} {t_closed:>8.3f} "
              f"{'yes' if applies else 'no':>7}", flush=True)
    lift(False)
    command = "PYTHONPATH=. python benchmarks/dkdv_closed_check.py" + (
        f" --random {args.random} --seed {args.seed} --touches {args.touches[0]} {args.touches[1]}" if args.random else "")
    return probe_exit_code(args.out, {"command": command, "rows": rows},
                           started)


if __name__ == "__main__":
    sys.exit(main())
