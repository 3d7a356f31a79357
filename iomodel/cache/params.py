"""The L2 model's parameters: the device and launch (:class:`L2Params`) and each constant with its source.

The fits and their receipts are written out in ``docs/l2-calibration.md``. The grid-side
constants (``KV_CHUNK_ROWS``, ``MAX_BLOCKS_PER_SM``, ``MAX_WARPS_PER_SM``) live with the
grid order in :mod:`iomodel.schedule.grid`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, replace
from typing import Any

from iomodel.errors import IomodelError

#: Effective fraction of L2 that holds data shared by all SMs: the capacity written lines occupy
#: (a written byte, held in its home partition only, weighs this fraction of a read byte) and their
#: write-back, and the one capacity of the fully associative LRU. Source: set in round 1 before any
#: measurement, for the two L2 partitions of A100/H100-class GPUs, each caching data for the SMs of
#: its own GPCs (NVIDIA A100 whitepaper, "L2 cache"; H100 whitepaper, "H100 L2 cache"). A read miss
#: of the set-associative model is judged against :data:`DEFAULT_L2_READ_FRACTION` (measured) since
#: 2026-12-04 (docs/l2-calibration.md, "Microbenchmarks", "Read capacity"). Since 2026-12-06 a forward launch's written
#: lines weigh and are written back as its device's :data:`FORWARD_L2` says instead.
DEFAULT_L2_FRACTION = 0.5
#: Fraction of L2 that a read of the set-associative model finds its line in (the capacity C of
#: a read miss's ``P(Poisson(A·D/C) ≥ A)``; written lines and their write-back keep
#: ``l2_fraction``). Source: measured, not fitted on any attention receipt: every SM re-reading a
#: W-byte set misses half of it per pass at W = 31.13 MiB = 0.5188 of the H200's 60 MiB
#: (``shared-read``, receipts/l2-micro-h200-2026-12-01.json, read by :mod:`iomodel.cache.physical`;
#: a test pins the two within 0.0005). The model's re-reads are this pattern (K/V of a head read by
#: every program of a wave); adopted 2026-12-04 (docs/l2-calibration.md, "Read capacity").
DEFAULT_L2_READ_FRACTION = 0.5188
#: The read fraction of each hardware preset whose L2 the ``shared-read`` microbenchmark measured (its half-miss
#: point over that device's L2, from the receipt :data:`iomodel.cache.physical.RECEIPTS` names; a test pins each to its
#: receipt within 0.0005): the H200 (:data:`DEFAULT_L2_READ_FRACTION`, 31.13 of 60 MiB) and the H100 SXM (26.65 of
#: 50 MiB on an H100 80GB HBM3, receipts/l2-micro-h100-2026-12-06.json; adopted 2026-12-06, docs/l2-calibration.md,
#: "The H100's own read capacity"). A preset not listed (the A100) is judged at the H200's, and the estimate's
#: assumptions say so (:func:`read_fraction_source`).
MEASURED_L2_READ_FRACTION: dict[str, float] = {"H200": DEFAULT_L2_READ_FRACTION, "H100-SXM": 0.5329}
#: Effective L2 associativity of the set-associative replacement (None in :class:`L2Params` is
#: the fully associative LRU). Source: fitted, not a datasheet figure (NVIDIA does not publish
#: the H100/H200 L2 associativity): fewest DRAM-write misses on the 124 single-pass kernel
#: measurements of receipts/ncu-h200-calib-dram-*, ncu-h200-holdout2-dp-* and
#: ncu-h200-holdout3-* (docs/l2-calibration.md, "Set-associative replacement"). Since 2026-12-06 the backward kernels'
#: (and the eager chain's); every forward launch takes its device's :data:`FORWARD_L2` (:meth:`L2Params.for_forward`).
DEFAULT_L2_WAYS = 24
@dataclass(frozen=True)
class ForwardL2:
    """The forward kernel's L2 constants on one device, from the microbenchmarks of its own access pattern (a
    tiles-fastest grid of programs reading private Q blocks, re-reading shared K/V sets and writing private O blocks:
    ``benchmarks/l2_split_microbench.py``, ``gridqo`` and one-set ``split``), replacing for every forward launch
    (prefill, decode, ragged; the training step's ``_attn_fwd``) the constants fitted on attention receipts
    (:data:`DEFAULT_L2_WAYS`, :data:`DEFAULT_L2_FRACTION`). The backward kernels keep those.

    Attributes:
        ways: associativity A of a read miss and a dirty line's write-back (sharper than 24: one set re-read by every
            SM goes from 2 % to 98 % missed within about ±12 % of its half-miss point on the H200: 28 to 34 MiB,
            receipts/l2-micro-h200-2026-12-01.json). Two fitted values sit at the trial grid's edges, so the best may lie
            beyond: 192 ways (the H200) is its largest, a Q weight of 0.5 (the H100) its smallest.
        q_share: read-equivalent bytes one byte of Q occupies (a Q tile is read by one program, one SM: held in
            fewer partitions than K/V, which every program of a wave reads).
        write_share: read-equivalent bytes one written byte (O, LSE, split-KV partials) occupies.
        write_fraction: fraction of the L2 a dirty line's write-back is judged against.
        source: the receipts and the fit, one clause (the estimate's assumptions quote it).
    """

    ways: int
    q_share: float
    write_share: float
    write_fraction: float
    source: str


#: Written byte weight and write-back fraction of the forward (both devices): the best of the H100's joint fit of the
#: ``gridqo`` pattern's reads and writes (receipts/l2-split-h100-2026-12-06-b.json, ``l2_split_microbench.py --fit``);
#: on the H200's receipt the same pair, with its own ways and Q weight, ranks fifth, its squared error 11 % above the
#: best there (0.75, 0.5), a choice among near-tied fits that the attention calibration receipts made
#: (docs/l2-calibration.md, "The forward's constants from its own microbenchmark").
FWD_WRITE_SHARE, FWD_WRITE_FRACTION = 0.625, 0.4375
#: The forward's constants per measured preset (ways and Q weight: the best read fit of each device's split receipt,
#: ``l2_split_microbench.py --fit``; the write pair :data:`FWD_WRITE_SHARE`, :data:`FWD_WRITE_FRACTION`). A preset
#: not listed (the A100) takes the H200's, and says so (:func:`forward_l2_of`). Adopted 2026-12-06.
FORWARD_L2: dict[str, ForwardL2] = {
    "H200": ForwardL2(192, 0.625, FWD_WRITE_SHARE, FWD_WRITE_FRACTION,
                      "ways and Q weight fitted on the H200's forward-pattern microbenchmark, "
                      "receipts/l2-split-h200-2026-12-06.json; the written-byte pair the H100's (fifth on the H200's)"),
    "H100-SXM": ForwardL2(96, 0.5, FWD_WRITE_SHARE, FWD_WRITE_FRACTION,
                          "fitted on the H100's forward-pattern microbenchmark, receipts/l2-split-h100-2026-12-06-b.json"),
}


def forward_l2_of(hardware: Any) -> ForwardL2:
    """The forward's L2 constants of ``hardware``'s preset (:data:`FORWARD_L2`), else the H200's with a source that
    says it was not measured there.

    Args:
        hardware: a :class:`~iomodel.spec.hardware.Hardware` entry or a name (``"H100-SXM (NVIDIA H100 80GB HBM3)"``).

    Returns:
        :class:`ForwardL2`. Raises nothing (an unknown name takes the H200's, said in ``source``)."""
    preset = hardware_preset(hardware)
    cal = l2_preset(hardware)
    if cal in FORWARD_L2:
        own = FORWARD_L2[cal]
        return own if cal == preset else replace(own, source=f"the {cal}'s (the {preset} shares its die and L2): "
                                                              f"{own.source}")
    h200 = FORWARD_L2["H200"]
    return replace(h200, source=f"not measured on the {preset or 'unnamed device'}: the H200's ({h200.source})")


def forward_applies(l2_fraction: float, ways: int | None) -> bool:
    """Whether a reconciliation or estimate at ``l2_fraction`` (of the L2 bytes) and ``ways`` predicts its forward
    launches with the forward's own constants (:meth:`L2Params.for_forward`): both at the model's defaults
    (:data:`DEFAULT_L2_FRACTION`, :data:`DEFAULT_L2_WAYS`). Returns a bool; raises nothing."""
    return ways == DEFAULT_L2_WAYS and l2_fraction == DEFAULT_L2_FRACTION


def forward_clause(hardware: Any, l2_fraction: float, ways: int | None, enabled: bool = True) -> str:
    """One clause naming the forward's constants a reconciliation of ``hardware`` uses (:func:`forward_applies`), for
    its title and report; where it uses none (a user's ``--l2-ways``/``--l2-fraction``, or ``enabled`` False:
    ``--no-forward-constants``; one model for every kernel, the fully associative LRU where ``ways`` is None), a
    clause that says so.

    Args:
        hardware: the device (:class:`~iomodel.spec.hardware.Hardware` or a preset name); l2_fraction: the effective
            fraction (of the L2 bytes); ways: the associativity, or None; enabled: the forward's constants asked for.

    Returns:
        one clause, no final period. Raises nothing.
    """
    if ways is None:
        return f"every kernel on a fully associative LRU of {l2_fraction:g} of the L2 (--l2-ways 0)"
    if not enabled:
        return (f"every kernel at {ways} ways and {l2_fraction:g}, a Q byte weighing 1 (the forward's own constants, "
                "FORWARD_L2, turned off: --no-forward-constants)")
    if not forward_applies(l2_fraction, ways):
        return (f"every kernel at {ways} ways and {l2_fraction:g} (the forward's own constants, FORWARD_L2, not used: "
                "--l2-ways or --l2-fraction given)")
    f = forward_l2_of(hardware)
    return (f"forward launches at {f.ways} ways, a Q byte {f.q_share:g}, a written byte {f.write_share:g}, write-back "
            f"at {f.write_fraction:g} of the L2 ({f.source}); the backward kernels at {DEFAULT_L2_WAYS} ways and "
            f"{DEFAULT_L2_FRACTION:g}")


#: Read-equivalent bytes one byte stored by the ``_bwd_dq`` kernel occupies in L2 (the forward's
#: stores and the other backward kernels' weigh ``l2_fraction``, 0.5). Source: fitted, not a
#: mechanism: with 0.5 the model over-predicts the dQ kernel's DRAM writes on the 159 dQ launches
#: of the six training receipts (receipts/ncu-h200-train1-*, -train-split1-*, -train-holdout1..4-*;
#: these are calibration data from now on) by 0.55 MiB on average (sd 0.61 MiB, 145/159 within
#: ±10 % or 1 MiB): more of dQ is still dirty in L2 at the kernel's end than modelled, most on
#: GQA and on 8-warp 128-row dQ tiles. A dyadic scan (0.125 … 0.375) gives −0.06 MiB (sd 0.36 MiB,
#: 159/159) at 0.25. The same share on the dK/dV kernel's stores (also ``tl.store``, like dQ's)
#: over-predicts its retention on MHA, so it is not a store-instruction effect
#: (docs/l2-calibration.md, "The dQ kernel's write-back").
DQ_WRITE_SHARE = 0.25
#: Read-equivalent bytes one byte of fp32 partials stored by the Gluon dK/dV launch (``kernels/gluon_backward.py``,
#: group split S > 1; ``Tiling.bwd_dkdv_kernel == "gluon"``) occupies in L2; the Triton launch's partials keep
#: ``l2_fraction`` (0.5). Source: fitted, not a mechanism, on the :data:`GLUON_DKDV_PARTIAL_FIT_STEPS` split steps of
#: the spill-free Gluon kernel in the committed H200 training receipts (train-holdout9, -10, -11: calibration data from
#: now on). With 0.5 the model under-predicts that kernel's DRAM writes there by 2.9 MiB on average (sd 2.1; 13/19 step
#: writes within ±10 % or 1 MiB): less of its partials is still dirty in L2 at the kernel's end than modelled. A dyadic
#: scan (0.625, 0.75, 0.875, 1.0) gives +1.6, +0.5, -0.4, -1.2 MiB (sd 1.4, 1.4, 1.7, 2.1) and 15, 17, 16, 13 steps
#: within; 0.75 is taken. The 10 split steps of the register-spilling Gluon kernel it replaced (gluon-dkdv-holdout1)
#: are left out of the fit (+5.3 MiB at 0.5, +3.3 at 0.75). The Triton launch keeps 0.5: its 11 split steps at HEAD_DIM
#: 256 (the Triton split launch that ships) are within on 5 at 0.5, 4 at 0.75. A lead not tested: the Gluon kernel
#: stores the partials straight from the wgmma accumulator layout, Triton's through a coalesced layout
#: (docs/l2-calibration.md, "The Gluon launch's partials").
GLUON_DKDV_PARTIAL_WRITE_SHARE = 0.75
#: The split steps :data:`GLUON_DKDV_PARTIAL_WRITE_SHARE` was fitted on (the worksheet's assumption quotes it).
GLUON_DKDV_PARTIAL_FIT_STEPS = 19
#: Query rows (seqlen_q, the rows a dK/dV program streams per head) from which the causal dK/dV kernel's DRAM reads
#: of a GQA step in the heads-outer order, without a window, are not predicted: every such step measured on the H200
#: (16, 32k to 524k rows, the Triton dK/dV launch) read 0.03-0.58x the wave model's bytes (the waves do not re-miss
#: each other's query rows as the model says; 0.03-0.49x before 2026-12-06, when the model of those steps became the
#: closed form, :func:`iomodel.cache.estimate.dkdv_closed_form_applies`), while its 3 MHA steps read 0.89-0.96x (receipts
#: reconcile-h200-long-train-holdout1-2026-12-05.md, reconcile-h200-dq-order-holdout1-2026-12-05.md, the steps of
#: ncu-h200-long-train-probe1-2026-12-05.json; docs/l2-calibration.md, "Two hold-outs measured"). The training step's
#: estimate says so there (:func:`iomodel.cache.predict.predict_training_step`).
DKDV_CAUSAL_UNPREDICTED_ROWS = 32768
#: The measured over modelled dK/dV DRAM reads of those steps, lowest and highest (the same receipts).
DKDV_CAUSAL_MEASURED_RATIO = (0.03, 0.58)
#: Query heads per KV head (G) and query rows from which heads-outer causal GQA steps shorter than
#: :data:`DKDV_CAUSAL_UNPREDICTED_ROWS` were measured far from the model both ways: 13 steps of G 7-71 and 6k-16k rows
#: on the H200 read 0.21-1.23x it, 2 of them within ±10 % (training hold-outs 2-7, split1, lpt1, dq-order and
#: gluon-dkdv hold-outs; docs/l2-calibration.md). Steps of smaller groups there held (most within ±10 %).
DKDV_LARGE_GROUP, DKDV_LARGE_GROUP_ROWS = 7, 6000
DKDV_LARGE_GROUP_RATIO = (0.21, 1.23)
#: A prefill forward's K/V working set of one resident wave (:func:`iomodel.cache.predict.wave_kv_working_set`) over
#: the read capacity (:attr:`L2Params.read_capacity`) from which, and below which, its DRAM reads are ``rough``: on the
#: committed receipts' forward runs (prefill, not ragged; H200 and H100, the bundled kernel and SDPA cuDNN) every run in
#: [0.85, 2.5) of it read 0.714-1.631x the model (the forward's own constants, :data:`FORWARD_L2`, since 2026-12-06),
#: :data:`FWD_EDGE_RUNS` within ±10 % or 1 MiB, while the runs outside it held more often (:data:`FWD_EDGE_OUTSIDE_RUNS`:
#: the bundled kernel 579 of 588 outside and 97 of 120 in the band with the row waves' H100 hold-out (2026-12-07,
#: twenty-eighth session: 10 of 10 outside and 1 of 2 in it); 569 of 578 and 96 of 118 since its causal waves start at
#: each head in the reverse order (:func:`iomodel.schedule.grid.row_waves`, twenty-seventh session; 556 and 99 before);
#: before that the bundled kernel 556 of 578, cuDNN 66 of 77 since the H100 runs of 2026-12-07's twenty-third session (the drift
#: label's hold-out, the order probe's repeat and the cuDNN-long probe: 552 of 566 and 65 of 71 before them;
#: 548 of 558 and 65 of 76 before the drifting runs left the count for their own label,
#: :data:`FWD_DRIFT_KV_HEAD`, and the H100 tile-order probe of 2026-12-07 came; 550 of 564 and 101 of 120 in the band
#: before the working set took only the key rows some query reads, 2026-12-07, twenty-second session: two top-left
#: causal chunks of 1,024 queries over 16,384 keys, both within, left the band), with the H200's fwdl2 hold-out of 2026-12-06's nineteenth session: in the band there 7/9 and 5/9,
#: outside 6/8 and 5/8; tests/test_reconcile_receipts.py recomputes these numbers from the receipts; docs/l2-calibration.md,
#: "The capacity edge as a label" and "The forward's constants from its own microbenchmark"). The band was read off
#: the runs under the constants before (2026-12-06: 75/94 and 18/39 within in it, 0.685-1.092x, every miss an
#: over-prediction; its lower edge between the runs at 0.835 times, all held, and a miss at 0.8995). Calibration data
#: for a label: no byte of the model depends on it; windowed and ragged layers are not labelled (by this edge label).
FWD_EDGE_WORKING_SET = (0.85, 2.5)
#: Of those runs: (bundled runs, within), (SDPA cuDNN runs, within), and the measured / modelled reads, lowest and
#: highest, of both.
FWD_EDGE_RUNS = ((120, 97), (65, 46))
#: The same runs outside the band, labelled ``predicted``: (bundled runs, within), (SDPA cuDNN runs, within).
FWD_EDGE_OUTSIDE_RUNS = ((588, 579), (77, 66))
FWD_EDGE_RATIO = (0.714, 1.631)
#: One KV head's K+V over the longest causal tile's key range (2·min(N_k, N_q + offset)·HEAD_DIM·width bytes,
#: :func:`iomodel.cache.predict.drift_kv_bytes`) over the read capacity (:attr:`L2Params.read_capacity`) from which a
#: causal prefill forward whose programs take its query tiles as they finish (one program per tile, or a persistent
#: loop that is not ``blocked``; no window band; more programs than run at once) has DRAM reads that are ``not a
#: prediction`` in the forward tile order, ``rough`` in the reverse order of a bottom-right chunk over a longer cache
#: (:func:`iomodel.cache.predict.forward_drift_quality`). Each forward-order tile is one key block longer than the one
#: before, so programs that start a wave together drift apart until those in flight sit all over a head's key range,
#: and a K/V block is re-read only after the whole head's K/V has been touched; the model's waves hold their programs in
#: step (``benchmarks/drift_sim.py`` simulates both; docs/l2-calibration.md, "Programs that drift apart"; the same
#: start-gap drift of the dQ kernel's forward order: "The dQ kernel's tile order", ``benchmarks/dq_start_gap_sketch.py``).
#: Calibration data: SDPA cuDNN's causal forwards (a persistent kernel whose ascending tile order this explains) read
#: 5.5-25.1x the model on six runs from 1.58 times (H100, 86,016 tokens, GQA 8) to 2.43 times (H100, 132,608 tokens),
#: and 0.71-1.19x at 0.94-1.20 times (H100 and H200 receipts of 2026-12-02 to 2026-12-06): 1.4 lies between. Then,
#: with 1.4 committed (35b96a2), the H100 tile-order probe (receipts/ncu-h100-order-probe1-2026-12-07.json) ran the
#: bundled kernel's Gluon forward in both orders: the forward order read 14.9x, 32.7x and 16.0x the model at 1.80-2.43
#: times (98k and 133k MHA, 103k GQA 8) and 0.84x at 1.20 times (65k), the reverse order 0.88-0.92x on all four,
#: cuDNN 10.1x at 1.80 times and 0.88x at 1.20: the label held on all eleven runs. The runs it marks (the forward order and
#: cuDNN, and FlashAttention-2, at 1.4 times or more) read :data:`FWD_DRIFT_RATIO` of the model (:data:`FWD_DRIFT_RUNS` runs: ten until 2026-12-07's
#: twenty-third session, then an H100 repeat of the order probe, the cuDNN-long probe on an H100 and the drift label's
#: H100 hold-out, receipts/ncu-h100-drift-holdout1-2026-12-07.json: committed before measurement, its five runs labelled
#: here read 4.27-56.6x the model (FlashAttention-2 through SDPA FLASH 56.6x at 1.80 times, the first FA2 run counted),
#: while three of its eight runs labelled predicted missed by reading more: the forward order at 1.28 times 1.38x, cuDNN
#: there 1.27x, HEAD_DIM 64 at 1.20 times 1.13x; the drift begins below 1.4 on the H100; and the reverse order read
#: 0.88-0.94x, two of three under -10 %; docs/l2-calibration.md, "The drift label's H100 hold-out").
#: A label, not a byte of the model.
FWD_DRIFT_KV_HEAD = 1.4
#: Of those runs: how many, and their measured / modelled DRAM reads, lowest and highest.
FWD_DRIFT_RUNS = 24
FWD_DRIFT_RATIO = (4.273, 56.627)
#: The dK/dV kernel's DRAM writes where its S > 1 group slices' fp32 partials (2·S·B·H_kv·N_k·d·4 bytes) exceed the
#: effective L2 (:attr:`L2Params.capacity`): measured minus modelled bytes, lowest and highest, in MiB, on the
#: committed H200 training receipts' such steps (train1 to hold-out 11, split1, the d 256, LPT, order-calibration and
#: Gluon dK/dV receipts; the Gluon launch's partials weighed :data:`GLUON_DKDV_PARTIAL_WRITE_SHARE`), and
#: :data:`DKDV_PARTIAL_WRITE_EXCESS_STEPS`; the 35 steps whose partials fit were -2.5 to +2.5 MiB beside it
#: (docs/l2-calibration.md, "The Gluon launch's partials"). The training step's estimate says so there: where the step
#: writes little, a few MiB are a large share.
DKDV_PARTIAL_WRITE_EXCESS_MIB = (-2.4, 6.9)
#: Of those steps: how many, how many more than 1 MiB above the model, how many more than 1 MiB below it.
DKDV_PARTIAL_WRITE_EXCESS_STEPS = (61, 36, 5)
#: Smallest effective L2 (bytes) a user's L2 fraction may leave (``iomodel reconcile --l2-fraction``, a sweep's
#: ``[l2_model]``): one 128-byte L2 line (NVIDIA's L2 line; sectors are 32 bytes). Tests build smaller L2s on purpose.
MIN_L2_BYTES = 128
def l2_fraction_refusal(fraction: float, l2_bytes: int, fix: str = "pass e.g. 0.5") -> str | None:
    """Why an effective L2 fraction a user gives (``iomodel reconcile --l2-fraction``, a sweep's ``[l2_model]``) cannot
    be modelled on an L2 of ``l2_bytes`` bytes, one clause ending in ``fix`` (the caller's spelling of the fix), or
    None: a fraction outside (0, 1] (NaN included), or one that leaves less than :data:`MIN_L2_BYTES`.

    >>> l2_fraction_refusal(1e-9, 60 * 2**20)
    'l2_fraction 1e-09 leaves 0.0629 bytes of the 62,914,560-byte L2, less than one 128-byte line: pass e.g. 0.5'
    """
    if not 0 < fraction <= 1:
        return f"l2_fraction must be in (0, 1], got {fraction}: {fix}"
    if l2_bytes * fraction < MIN_L2_BYTES:
        return (f"l2_fraction {fraction} leaves {l2_bytes * fraction:.3g} bytes of the {l2_bytes:,}-byte L2, less than "
                f"one {MIN_L2_BYTES}-byte line: {fix}")
    return None


#: Largest associativity accepted: the estimate's step from 0 to 1 spans about C/sqrt(A) bytes
#: around D = C, 1.6 % of C at 4096 ways; for the fully associative limit pass None.
MAX_L2_WAYS = 4096
#: Interleaved slices a streaming kernel of the eager chain is split into (a modelling choice
#: of round 1, not fitted).
STREAM_SLICES = 64
#: Most stream items (lanes × row chunks) the fast evaluation (:mod:`iomodel.cache.stream`) indexes
#: densely, 8 bytes each: beyond it the kernel is simulated (a bound on memory, 256 MiB, not a model
#: constant).
MAX_STREAM_ITEMS = 1 << 25


def exact_write_share(write_share: float) -> bool:
    """Whether written bytes weighing ``write_share`` keep every sum of entry weights exact: a dyadic
    fraction (denominator at most 2^10, e.g. 0.5 or 1), so stack distances are the same double in any
    order of summation. The simulation keeps a read group as one stack entry only then, and the
    fast evaluation applies only then."""
    return float(write_share).as_integer_ratio()[1] <= 1 << 10


def hardware_preset(hardware: Any) -> str:
    """The preset a :class:`~iomodel.spec.hardware.Hardware` entry is, as :func:`iomodel.spec.hardware.get_hardware`
    spells it: ``"H100-SXM (NVIDIA H100 80GB HBM3)"`` (how :func:`~iomodel.spec.hardware.detect` and measurement
    records name a device) and ``"h100"`` are ``"H100-SXM"``.

    Returns:
        The preset's name, or the entry's own name before any bracket where it matches no preset ("" for an object
        without a name; a string is taken as the name itself).
    """
    from iomodel.spec.hardware import get_hardware

    name = (hardware if isinstance(hardware, str) else str(getattr(hardware, "name", ""))).split(" (")[0].strip()
    try:
        return get_hardware(name).name
    except IomodelError:
        return name


def card_of(hardware: Any) -> str:
    """The card a detected or recorded entry names in brackets (``"NVIDIA H100 PCIe"``), or "" (a string is taken as
    the name itself). Raises nothing."""
    name = hardware if isinstance(hardware, str) else str(getattr(hardware, "name", ""))
    return name.split(" (", 1)[1].rstrip(")") if " (" in name else ""


def l2_preset(hardware: Any) -> str:
    """The preset whose measured L2 constants ``hardware`` takes: its preset (:func:`hardware_preset`), or the one a
    card variant shares its die and L2 with (:data:`iomodel.spec.hardware.CALIBRATED_AS`: an H100 PCIe or NVL takes the
    H100 SXM's). Raises nothing."""
    from iomodel.spec.hardware import calibrated_as

    return calibrated_as(hardware_preset(hardware))


#: Element types of the committed Nsight Compute receipts (every ``receipts/ncu-*.json`` shape is bf16 or fp16, 2,156
#: runs counted 2026-12-07): an estimate at another dtype (fp32 runs other tiles and paths, no TMA or Gluon; fp8 runs
#: no bundled kernel) has no DRAM byte measured behind it and is labelled ``rough``
#: (:func:`iomodel.cache.estimate.L2Estimate.of`; ``tests/test_reconcile_receipts.py`` recounts the receipts).
MEASURED_DTYPES = ("bf16", "fp16")


def l2_measured(hardware: Any) -> bool:
    """Whether a card of ``hardware``'s preset, or of the family card it takes its constants from (:func:`l2_preset`),
    had its L2 measured (:data:`MEASURED_L2_READ_FRACTION`); False: the H200's constants stand in. Raises nothing."""
    return l2_preset(hardware) in MEASURED_L2_READ_FRACTION


def read_fraction_of(hardware: Any) -> float:
    """The fraction of ``hardware``'s L2 a read miss is judged against (dimensionless, of ``l2_bytes``): its preset's
    measured one (:data:`MEASURED_L2_READ_FRACTION`, by :func:`l2_preset`), else the H200's
    (:data:`DEFAULT_L2_READ_FRACTION`)."""
    return MEASURED_L2_READ_FRACTION.get(l2_preset(hardware), DEFAULT_L2_READ_FRACTION)


def read_fraction_source(hardware: Any) -> str:
    """Where :func:`read_fraction_of` comes from, one clause for the estimate's assumptions: the preset's receipt, the
    preset it was measured for where a card variant takes another's (:func:`l2_preset`), and the card it was measured
    on where a detected or recorded device is another card.

    >>> from iomodel.spec.hardware import A100_80GB, H100_PCIE, H100_SXM
    >>> read_fraction_source(H100_SXM)
    'measured on the H100-SXM: receipts/l2-micro-h100-2026-12-06.json'
    >>> read_fraction_source(H100_PCIE)
    "the H100-SXM's (the H100-PCIe shares its die and L2), measured on an NVIDIA H100 80GB HBM3, not on this H100-PCIe: receipts/l2-micro-h100-2026-12-06.json"
    >>> read_fraction_source(A100_80GB)
    "not measured on the A100-80GB: the H200's (receipts/l2-micro-h200-2026-12-01.json)"

    Raises:
        IomodelError: a measured preset without a receipt in :data:`iomodel.cache.physical.RECEIPTS` (a test keeps
            the two tables' keys equal).
    """
    from iomodel.cache.physical import receipt_device, receipt_name

    preset, cal, card = hardware_preset(hardware), l2_preset(hardware), card_of(hardware)
    if not l2_measured(hardware):
        return f"not measured on the {preset or 'unnamed device'}: the H200's ({receipt_name('H200')})"
    measured_on = receipt_device(cal)
    if cal != preset:
        return (f"the {cal}'s (the {preset} shares its die and L2), measured on an {measured_on or cal}, not on this "
                f"{card or preset}: {receipt_name(cal)}")
    if card and measured_on and card != measured_on:
        return f"the {preset}'s, measured on an {measured_on}, not on this {card}: {receipt_name(preset)}"
    return f"measured on the {preset}: {receipt_name(preset)}"


@dataclass(frozen=True)
class L2Params:
    """What the L2-aware prediction needs to know about the device and the launch.

    Attributes:
        l2_bytes: L2 capacity in bytes (``Hardware.l2_bytes``).
        num_sms: streaming multiprocessors.
        programs_per_sm: programs (CTAs) of the kernel one SM runs at once: Nsight
            Compute's occupancy limit when measured, else
            :func:`iomodel.schedule.grid.estimate_programs_per_sm`.
        l2_fraction: effective fraction of ``l2_bytes`` (default :data:`DEFAULT_L2_FRACTION`).
        read_fraction: fraction of ``l2_bytes`` a read miss of the set-associative model is
            judged against (default :data:`DEFAULT_L2_READ_FRACTION`, the H200's, measured; :meth:`of` takes the
            device's, :func:`read_fraction_of`); ``l2_fraction``
            still sets the capacity written lines occupy and their write-back. The fully
            associative LRU (``ways=None``) has one capacity, ``l2_fraction``'s.
        flush_between_kernels: the profiler flushes caches before each kernel (ncu
            ``--cache-control all``); False: L2 content carries from kernel to kernel.
        write_once: written lines occupy one copy of L2 (their home partition) while read
            data shared by all SMs occupies ``1 / l2_fraction`` copies (default True; False:
            both occupy the effective capacity alike, the round-1 model).
        ways: effective associativity A of the set-associative replacement (default
            :data:`DEFAULT_L2_WAYS`, fitted); None: fully associative LRU
            (exact integer bytes, the model of rounds 1-3).
        read_source: where ``read_fraction`` comes from, one clause (:func:`read_fraction_source`; "" lets
            :attr:`read_origin` say it: the H200's receipt for the default fraction, else "as given"; the estimate's
            assumptions quote :attr:`read_origin`).
        stored_share: read-equivalent bytes one written byte occupies, overriding
            :attr:`write_share`'s rule (None: the rule; the training step gives ``_bwd_dq``
            :data:`DQ_WRITE_SHARE` and the Gluon launch's split ``_bwd_dkdv``
            :data:`GLUON_DKDV_PARTIAL_WRITE_SHARE`); a dyadic fraction in (0, 1] keeps the sums exact.
        q_share: read-equivalent bytes one byte of the forward's Q occupies (1: as any read; :meth:`for_forward`
            sets the device's :attr:`ForwardL2.q_share`); a dyadic fraction in (0, 1] keeps the sums exact.
        forward: the forward kernel's own constants (:class:`ForwardL2`; :meth:`of` sets the device's,
            :func:`forward_l2_of`), which :meth:`for_forward` applies where the other fields are the model's defaults;
            None: every kernel the same constants.

    Raises:
        IomodelError: l2_fraction outside (0, 1], a non-positive size or count, ways < 1,
            stored_share outside (0, 1], q_share outside (0, 1] or below 1 with the fully associative LRU.
    """

    l2_bytes: int
    num_sms: int
    programs_per_sm: int = 1
    l2_fraction: float = DEFAULT_L2_FRACTION
    flush_between_kernels: bool = True
    write_once: bool = True
    ways: int | None = DEFAULT_L2_WAYS
    stored_share: float | None = None
    read_fraction: float = DEFAULT_L2_READ_FRACTION
    read_source: str = ""
    q_share: float = 1.0
    forward: ForwardL2 | None = None

    @classmethod
    def of(cls, hardware: Any, programs_per_sm: int = 1, **kw: Any) -> "L2Params":
        """The parameters of ``hardware`` (:class:`~iomodel.spec.hardware.Hardware`): its L2 bytes and SMs, and the
        read fraction measured on its preset (:func:`read_fraction_of`, said by :func:`read_fraction_source`) unless
        ``kw`` gives one; ``kw`` sets the other fields (``l2_fraction``, ``flush_between_kernels``, ``ways`` ...).

        Raises:
            IomodelError: an entry without ``l2_bytes`` or ``num_sms``; as the constructor (a bad fraction or count).
        """
        if not (hasattr(hardware, "l2_bytes") and hasattr(hardware, "num_sms")):
            raise IomodelError(f"L2Params.of needs a Hardware entry (l2_bytes, num_sms), got {type(hardware).__name__}: "
                               "pass e.g. iomodel.spec.hardware.get_hardware('H200')")
        if "read_fraction" not in kw:
            kw["read_fraction"] = read_fraction_of(hardware)
            kw.setdefault("read_source", read_fraction_source(hardware))
        else:
            kw.setdefault("read_source", "as given")
        kw.setdefault("forward", forward_l2_of(hardware))
        return cls(hardware.l2_bytes, hardware.num_sms, programs_per_sm, **kw)

    def for_forward(self) -> "L2Params":
        """The parameters a forward launch is predicted with: :attr:`forward`'s ways, Q weight, written-byte weight
        and write-back fraction (:class:`ForwardL2`) where it is set and the other fields are the model's defaults
        (:data:`DEFAULT_L2_WAYS`, :data:`DEFAULT_L2_FRACTION`, written lines once, no stored or Q share given);
        else ``self`` unchanged (a user's ``--l2-ways``/``--l2-fraction`` sets one model for every kernel). Raises
        nothing."""
        f = self.forward
        if (f is None or not forward_applies(self.l2_fraction, self.ways) or not self.write_once
                or self.stored_share is not None or self.q_share != 1.0):
            return self
        return replace(self, ways=f.ways, l2_fraction=f.write_fraction, stored_share=f.write_share, q_share=f.q_share)

    @property
    def read_weights(self) -> dict[str, float] | None:
        """The simulation's read weights (:func:`iomodel.cache.simulate.simulate`'s ``read_weights``): the forward's Q
        at :attr:`q_share` where it is below 1, else None (every read weighs 1)."""
        return None if self.q_share == 1.0 else {"Q": self.q_share}

    @property
    def forward_source(self) -> str:
        """Where the forward's constants come from (:attr:`ForwardL2.source`) where :meth:`for_forward` applied them,
        else ""."""
        f = self.forward
        if f is None or (self.ways, self.q_share, self.stored_share, self.l2_fraction) != (
                f.ways, f.q_share, f.write_share, f.write_fraction):
            return ""
        return f.source

    @property
    def read_origin(self) -> str:
        """Where :attr:`read_fraction` comes from, one clause: :attr:`read_source` where set (:meth:`of` sets it: the
        preset's receipt, or "as given" for a fraction passed in), else the H200's receipt for the default fraction,
        else "as given"."""
        if self.read_source:
            return self.read_source
        if self.read_fraction != DEFAULT_L2_READ_FRACTION:
            return "as given"
        from iomodel.cache.physical import receipt_name

        return f"measured on the H200: {receipt_name('H200')}"

    def __post_init__(self) -> None:
        for name in ("l2_bytes", "num_sms", "programs_per_sm", "l2_fraction", "read_fraction"):
            x = getattr(self, name)
            if isinstance(x, bool) or not isinstance(x, numbers.Real):
                hint = "pass a number in (0, 1]" if name.endswith("fraction") else "check the hardware and occupancy"
                raise IomodelError(f"{name} must be a number, got {x!r}: {hint}")
        if not 0 < self.l2_fraction <= 1:
            raise IomodelError(f"l2_fraction must be in (0, 1], got {self.l2_fraction}: pass e.g. 0.5")
        if not 0 < self.read_fraction <= 1:
            raise IomodelError(f"read_fraction must be in (0, 1], got {self.read_fraction}: pass e.g. "
                               f"{DEFAULT_L2_READ_FRACTION}")
        if self.programs_per_sm < 1 or self.num_sms < 1 or self.l2_bytes < 1:
            raise IomodelError("l2_bytes, num_sms and programs_per_sm must be positive: check the hardware and occupancy")

        if self.ways is not None and (not isinstance(self.ways, int) or not 1 <= self.ways <= MAX_L2_WAYS):
            raise IomodelError(f"L2 ways must be an integer from 1 to {MAX_L2_WAYS} or None (fully associative), "
                               f"got {self.ways!r}")
        if isinstance(self.q_share, bool) or not isinstance(self.q_share, numbers.Real) or not 0 < self.q_share <= 1:
            raise IomodelError(f"q_share must be in (0, 1] (a number), got {self.q_share!r}")
        if self.q_share != 1.0 and self.ways is None:
            raise IomodelError("q_share below 1 needs the set-associative L2 (ways), not the fully associative LRU")
        if self.stored_share is not None and (isinstance(self.stored_share, bool)
                                              or not isinstance(self.stored_share, numbers.Real)
                                              or not 0 < self.stored_share <= 1):
            raise IomodelError(f"stored_share must be in (0, 1] (a number) or None, got {self.stored_share!r}")

    @property
    def capacity(self) -> int:
        """Effective L2 capacity in bytes (``l2_fraction × l2_bytes``)."""
        return int(self.l2_bytes * self.l2_fraction)

    @property
    def read_capacity(self) -> int:
        """Capacity a read miss is judged against, in bytes (``read_fraction × l2_bytes``, at least 1)."""
        return max(1, int(self.l2_bytes * self.read_fraction))

    @property
    def write_share(self) -> float:
        """Read-equivalent bytes one written byte occupies: ``stored_share`` where set, else
        ``l2_fraction`` when write_once, else 1."""
        if self.stored_share is not None:
            return self.stored_share
        return self.l2_fraction if self.write_once else 1.0

    @property
    def resident_programs(self) -> int:
        """W: programs running at once (``num_sms × programs_per_sm``)."""
        return self.num_sms * self.programs_per_sm
