"""L2-aware HBM prediction: which of the requested bytes actually cross HBM, and why.

The model's ``HBM`` rows are the *no-reuse bound* (every requested byte crosses HBM once per
request); the *compulsory floor* (:func:`compulsory_read_bytes`, outputs written once) is
what the worksheet's compulsory rows read. What Nsight Compute's DRAM counters see lies
between them (or under the floor): :func:`predict_tiled` (the bundled kernel, waves from
:mod:`iomodel.schedule.grid`) and :func:`predict_baseline` (the eager chain) simulate each
kernel launch (:mod:`iomodel.cache.simulate`) and split the difference from the floor into
named causes (:mod:`iomodel.cache.causes`). The model, its fits and their receipts are in
``docs/l2-calibration.md``; the constants in :mod:`iomodel.cache.params`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator, Sequence

from iomodel.cache.causes import CAUSES, Cause
from iomodel.cache.params import (FWD_DRIFT_KV_HEAD, FWD_DRIFT_RATIO, FWD_DRIFT_RUNS, FWD_EDGE_RATIO, FWD_EDGE_RUNS,
                                  FWD_EDGE_WORKING_SET, DKDV_CAUSAL_MEASURED_RATIO, DKDV_CAUSAL_UNPREDICTED_ROWS, DKDV_LARGE_GROUP,
                                  DKDV_LARGE_GROUP_RATIO, DKDV_LARGE_GROUP_ROWS, DKDV_PARTIAL_WRITE_EXCESS_MIB,
                                  DKDV_PARTIAL_WRITE_EXCESS_STEPS, GLUON_DKDV_PARTIAL_FIT_STEPS,
                                  GLUON_DKDV_PARTIAL_WRITE_SHARE,
                                  DQ_WRITE_SHARE, STREAM_SLICES, L2Params)
from iomodel.cache.simulate import KernelL2, simulate, stream_kernel
from iomodel.errors import IomodelError
from iomodel.format import human_bytes
from iomodel.schedule.launch import TILE_ORDERS, Schedule, head_group_of, tiles_per_group
from iomodel.schedule.grid import (REDUCE_DKDV_KERNEL, Access, ReadGroup, combine_waves, decode_split_rows,
                                   decode_waves, dkdv_query_span, dkdv_waves, dq_waves, packed_view, prefill_key_span,
                                   prefill_waves, preprocess_waves, reduce_dkdv_waves, row_waves)
from iomodel.spec import FP32_WIDTH, LSE_WIDTH, LayerSpec, Tiling, cdiv

#: Tensors of the forward pass that are layer inputs (the rest are outputs or intermediates).
_INPUTS = ("Q", "K", "V")


@dataclass
class L2Prediction:
    """HBM bytes of one algorithm on one shape with the L2 taken into account.

    Units: bytes. ``floor`` + Σ cause contributions = ``hbm`` (reads and writes apart).

    Attributes:
        algorithm: ``tiled`` or ``baseline``.
        hbm_read_bytes, hbm_write_bytes: the L2-aware prediction of the DRAM counters.
        floor_read_bytes, floor_write_bytes: compulsory floor: the worksheet's compulsory reads
            (:func:`compulsory_read_bytes`), outputs written once.
        no_reuse_read_bytes, no_reuse_write_bytes: every requested byte crosses HBM (model HBM rows).
        l2_read_bytes, l2_write_bytes: requests from the SMs to L2 (the SRAM_fill level;
            None for the eager chain, whose library kernels re-read from L2 in ways the
            model does not count).
        reuse_saved_read_bytes: no-reuse reads minus L2-aware reads (re-reads served by L2).
        causes: non-zero contributions, largest first.
        kernels: per-launch simulation results.
        assumptions: one sentence each.
    """

    algorithm: str
    hbm_read_bytes: int
    hbm_write_bytes: int
    floor_read_bytes: int
    floor_write_bytes: int
    no_reuse_read_bytes: int
    no_reuse_write_bytes: int
    l2_read_bytes: int | None
    l2_write_bytes: int | None
    reuse_saved_read_bytes: int
    causes: list[Cause]
    kernels: list[KernelL2]
    assumptions: list[str]
    #: How far each kernel's DRAM reads can be taken (:data:`READ_QUALITIES`), by kernel name: a prefill forward's
    #: ``fwd kernel`` (:func:`forward_read_quality`, :func:`forward_drift_quality`), a training step's ``_attn_fwd``,
    #: ``_bwd_dkdv`` (:func:`dkdv_read_quality`) and ``_bwd_dq`` (:func:`forward_drift_quality`); empty for decode and the eager chain (a ragged launch's estimate has its own:
    #: :func:`iomodel.cache.estimate.ragged_drift_quality`).
    read_qualities: dict[str, str] = field(default_factory=dict)
    #: How far each kernel's DRAM writes can be taken (:data:`WRITE_QUALITIES`), by kernel name: a training step's
    #: ``_bwd_dkdv`` (:func:`dkdv_write_quality`); a kernel absent is ``predicted``.
    write_qualities: dict[str, str] = field(default_factory=dict)
    #: The assumption that labels a kernel's DRAM reads or writes (the ROUGH or NOT A PREDICTION sentence among
    #: :attr:`assumptions`), by (kernel name, ``"read"`` or ``"write"``): one entry for each quality other than
    #: ``predicted`` in :attr:`read_qualities` and :attr:`write_qualities`, for a tool that shows it beside measured
    #: bytes (``iomodel reconcile``).
    label_sentences: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def read_quality(self) -> str:
        """The lowest of :attr:`read_qualities` (:data:`READ_QUALITIES` order; ``predicted`` without any)."""
        return max(self.read_qualities.values(), key=READ_QUALITIES.index, default="predicted")

    @property
    def write_quality(self) -> str:
        """The lowest of :attr:`write_qualities` (:data:`WRITE_QUALITIES` order; ``predicted`` without any)."""
        return max(self.write_qualities.values(), key=WRITE_QUALITIES.index, default="predicted")

    @property
    def dominant(self) -> Cause | None:
        """The cause with the largest |read| + |write| contribution (None if the floor holds)."""
        return max(self.causes, key=lambda c: c.magnitude) if self.causes else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (bytes), with the dominant cause's key."""
        return {
            "algorithm": self.algorithm,
            "hbm": {"read_bytes": self.hbm_read_bytes, "write_bytes": self.hbm_write_bytes},
            "floor": {"read_bytes": self.floor_read_bytes, "write_bytes": self.floor_write_bytes},
            "no_reuse": {"read_bytes": self.no_reuse_read_bytes, "write_bytes": self.no_reuse_write_bytes},
            "l2_requests": {"read_bytes": self.l2_read_bytes, "write_bytes": self.l2_write_bytes},
            "reuse_saved_read_bytes": self.reuse_saved_read_bytes,
            "causes": [c.to_dict() for c in self.causes],
            "dominant": self.dominant.key if self.dominant else None,
            "assumptions": self.assumptions,
        }


def _add(into: dict[str, int], d: dict[str, int]) -> None:
    """Add the per-tensor bytes of ``d`` into ``into``."""
    for k, v in d.items():
        into[k] = into.get(k, 0) + v


def _finish(algorithm: str, kernels: list[KernelL2], floor_r: int, floor_w: int, no_reuse_r: int, no_reuse_w: int,
            l2_r: int | None, l2_w: int | None, causes: list[Cause], assumptions: list[str]) -> L2Prediction:
    read = sum(sum(k.hbm_read.values()) for k in kernels)
    write = sum(sum(k.hbm_write.values()) for k in kernels)
    causes = sorted([c for c in causes if c.magnitude], key=lambda c: -c.magnitude)
    # the contributions must add up exactly: floor + causes = prediction
    assert floor_r + sum(c.read_bytes for c in causes) == read, "read causes do not add up"
    assert floor_w + sum(c.write_bytes for c in causes) == write, "write causes do not add up"
    return L2Prediction(algorithm, read, write, floor_r, floor_w, no_reuse_r, no_reuse_w, l2_r, l2_w,
                        no_reuse_r - read, causes, kernels, assumptions)


#: Program × row-chunk pairs of a kernel (:func:`_fast_pays`) from which the fast evaluation beats
#: the simulation, numpy loaded (measured on the hold-out receipts' shapes, 2-core CPU: a forward of
#: a few waves simulates in about a millisecond, its fast evaluation's numpy calls take one or two;
#: the dK/dV kernel is faster evaluated at any size). A speed choice: both give the same bytes.
FAST_FROM_WORK = {"fwd": 1 << 14, "dkdv": 0, "fresh": 1 << 17}
#: With numpy not loaded yet, a kernel is evaluated fast only from this much work: below, its
#: simulation takes milliseconds, less than importing numpy (~0.1 s), and a one-layer worksheet stays
#: numpy-free (tests/test_cli_latency.py).
FAST_MIN_WORK = 1 << 16


def _fast_pays(name: str, spec: LayerSpec, tiling: Tiling) -> bool:
    """Whether to evaluate kernel ``name`` fast rather than simulate it: its programs × row chunks
    streamed per program (× the GQA group for ``_bwd_dkdv``; programs for the kernels that stream
    nothing twice) reach :data:`FAST_FROM_WORK`, and :data:`FAST_MIN_WORK` too where numpy is not
    loaded yet."""
    import sys

    n_q, n_k, rows = spec.seqlen_q, spec.seqlen_k, spec.batch * spec.heads
    if name == "_bwd_dkdv":
        kind, work = "dkdv", rows * cdiv(n_k, tiling.bwd_block_n) * cdiv(n_q, 1024)
    elif name == "_bwd_dq":
        kind, work = "fwd", rows * cdiv(n_q, tiling.dq_block_m) * cdiv(n_k, 1024)
    elif name in ("fwd kernel", "_attn_fwd"):
        kind, work = "fwd", rows * cdiv(n_q, tiling.block_m) * cdiv(n_k, 1024)
    else:
        kind, work = "fresh", rows * cdiv(max(n_q, n_k), 64)
    return work >= max(FAST_FROM_WORK[kind], 0 if "numpy" in sys.modules else FAST_MIN_WORK)


#: The waves built while :func:`wave_cache` is active, per (builder, layer, tiles, W, launch): the
#: reconciliation of one shape predicts it twice (its L2 and the fully associative band) on the
#: same waves, which are built once. None outside a ``with wave_cache():`` block (nothing kept).
_WAVES: dict[tuple, tuple[Any, dict[str, int], dict[str, int]]] | None = None


@contextmanager
def wave_cache() -> Iterator[None]:
    """Within the block, :func:`kernel_l2` builds each kernel's waves once and reuses them (the
    simulation only reads them); on leaving, they are dropped (memory: one shape's kernels)."""
    global _WAVES
    saved, _WAVES = _WAVES, {}
    try:
        yield
    finally:
        _WAVES = saved


def kernel_l2(name: str, spec: LayerSpec, tiling: Tiling, params: L2Params, build: Callable[..., Any], *,
              tile_order: str = "forward", grid_order: str = "tiles-fastest", key_order: str = "ascending",
              persistent: str | None = None) -> KernelL2:
    """One kernel launch of a prefill layer through a cold L2, as simulated bytes per tensor.

    :func:`iomodel.cache.stream.fast_kernel_l2` where it applies (the streaming kernels, and the fully
    associative LRU of a windowed ``_bwd_dkdv``: the same bytes as the simulation, computed without
    visiting every access one by one) and pays (:func:`_fast_pays`), else
    :func:`~iomodel.cache.simulate.simulate` on the waves ``build`` gives
    (:mod:`iomodel.schedule.grid`: ``prefill_waves``, ``dkdv_waves`` ...; read groups where it
    takes ``grouped``).

    Args:
        name: the kernel (``fwd kernel``, ``_bwd_preprocess``, ``_bwd_dkdv``, ``_bwd_dq``,
            ``_bwd_reduce_dkdv``); spec, tiling: the layer and its tiles.
        params: the L2 and the launch (``resident_programs`` is W).
        build: the wave builder of this kernel.
        tile_order, grid_order, key_order, persistent: the forward's launch (``prefill_waves``; a
            ``blocked`` persistent loop is always simulated).

    Returns:
        :class:`~iomodel.cache.simulate.KernelL2` with its requested bytes.

    Raises:
        IomodelError: from the wave builder (an unknown order).
    """
    w = params.resident_programs
    if persistent != "blocked" and _fast_pays(name, spec, tiling):
        from iomodel.cache.stream import fast_kernel_l2  # numpy: imported only here

        k = fast_kernel_l2(name, spec, tiling, w, params.capacity, params.write_share, params.ways,
                           tile_order=tile_order, grid_order=grid_order, key_order=key_order,
                           read_capacity=params.read_capacity, q_share=params.q_share, persistent=persistent)
        if k is not None:
            return k
    launch = ({"tile_order": tile_order, "grid_order": grid_order, "key_order": key_order, "persistent": persistent}
              if build is prefill_waves else {})
    grouped = {} if build in (preprocess_waves, reduce_dkdv_waves) else {"grouped": True}
    key = (build, spec, tiling, w, tuple(launch.items()), bool(grouped))
    built = _WAVES.get(key) if _WAVES is not None else None
    if built is None:
        built = build(spec, tiling, w, **launch, **grouped)
        if _WAVES is not None:
            _WAVES[key] = built
    waves, r, wr = built
    k = simulate(name, waves, params.capacity, params.write_share, params.ways, params.read_capacity,
                 params.read_weights)
    k.requested_read, k.requested_write = dict(r), dict(wr)
    k.method = "simulated wave by wave"
    return k


#: Compiled compulsory-read rows per layer structure (causal, alignment, window): the tensors and
#: one exact Python function of (B, H, H_kv, d, N_q, N_k, s) (:func:`iomodel.traffic.compile.python_function`).
_COMPULSORY_READ: dict[tuple, tuple[tuple[str, ...], Any]] = {}
#: Structures kept before the cache is emptied (a speed choice).
_COMPULSORY_READ_MAX = 256


def compulsory_read_bytes(spec: LayerSpec) -> dict[str, int]:
    """The forward pass's compulsory reads per input tensor, in bytes: the worksheet's definition.

    Evaluates :func:`iomodel.traffic.bounds.compulsory_rows` (the rows behind
    ``iomodel.traffic.predict(...).compulsory_bytes``): Q ``(B, H, N_q, d)`` counts the query
    rows that see some key, K and V ``(B, H_kv, N_k, d)`` the keys some query row sees
    (every element without a causal mask). The rows depend on the layer only through its causal
    mask, alignment and window; they are compiled once per such structure to exact Python
    (:mod:`iomodel.traffic.compile`), never evaluated by ``subs`` (37 ms a call that way: a ragged
    batch of 128 sequences reconciled 4.7 s slower).

    Args:
        spec: the layer (its forward pass is counted).

    Returns:
        ``{"Q": bytes, "K": bytes, "V": bytes}``.
    """
    from iomodel.traffic.base import SYM
    from iomodel.traffic.bounds import compulsory_rows
    from iomodel.traffic.compile import python_function

    key = (spec.causal, spec.causal_align, spec.window)
    got = _COMPULSORY_READ.get(key)
    if got is None:
        if len(_COMPULSORY_READ) >= _COMPULSORY_READ_MAX:  # every window is a structure: bounded
            _COMPULSORY_READ.clear()
        rows = [r for r in compulsory_rows(spec.with_(backward=False)) if r.tensor in _INPUTS and r.step == "forward"]
        args = (SYM.B, SYM.H, SYM.H_kv, SYM.d, SYM.N_q, SYM.N_k, SYM.s)
        got = _COMPULSORY_READ[key] = (tuple(r.tensor for r in rows), python_function(args, [r.read_bytes for r in rows]))
    names, fn = got
    out: dict[str, int] = {}
    for t, v in zip(names, fn(spec.batch, spec.heads, spec.kv_heads, spec.head_dim, spec.seqlen_q, spec.seqlen_k,
                              spec.width)):
        out[t] = out.get(t, 0) + int(v)
    return out


def compulsory_write_bytes(spec: LayerSpec, lse: bool = True) -> int:
    """The forward kernel's floor of writes in bytes: O ``(B, H, N_q, d)`` in the dtype and, unless ``lse`` is
    False (a schedule that keeps no LSE, ``Tiling.writes_lse``), the LSE ``(B, H, N_q)`` in fp32, once
    (docs/traffic-contract.md, "Forward")."""
    return spec.batch * spec.heads * spec.seqlen_q * (spec.head_dim * spec.width + (LSE_WIDTH if lse else 0))


def _common_assumptions(params: L2Params, by_row: bool = False) -> list[str]:
    """The assumptions every L2-aware estimate states; ``by_row``: the forward's waves start apart at each head
    (:func:`iomodel.schedule.grid.row_waves`; a later assumption says how)."""
    fwd = params.forward_source
    return [
        f"Effective L2 capacity {human_bytes(params.capacity, decimals=1)} = {params.l2_fraction:g} × {human_bytes(params.l2_bytes, decimals=1)} "
        + (f"for written lines and their write-back (the forward's constants, {fwd})." if fwd else
           "(two L2 partitions each caching what their SMs read)" + ("." if params.ways is None else
                                                                     " for written lines and their write-back.")),
        f"W = {params.num_sms} SMs × {params.programs_per_sm} programs per SM = {params.resident_programs} programs "
        "run at once, in grid order (axis 0 fastest), in waves" + (", each head's apart (below)." if by_row else "."),
        ("L2 keeps the most recently used items (fully associative LRU) in chunks of K/V key rows, so re-read "
         "K/V hits while the bytes touched since its last use fit the effective capacity." if params.ways is None else
         f"L2 is set-associative ({params.ways} ways, {'from microbenchmarks' if fwd else 'fitted'}; hashed sets, LRU "
         f"within a set): an item touched again "
         f"after D distinct bytes is gone with probability P(Poisson({params.ways}·D/C) ≥ {params.ways}), "
         f"C = {human_bytes(params.read_capacity, decimals=1)} for a read ({params.read_fraction:g} × the L2: "
         f"the half-miss point of a set every SM re-reads, {params.read_origin}) and the effective capacity for a "
         "dirty line's write-back; K/V are tracked in chunks of key rows and the bytes are expected values."
         + (f" A Q byte (read by one program) weighs {params.q_share:g} and a written byte {params.write_share:g} of "
            "a K/V byte in D." if fwd else "")),
        "Every kernel starts with a cold L2 and its dirty lines at the end are not counted "
        "(ncu --cache-control all flushes caches before each kernel)." if params.flush_between_kernels else
        "L2 content is not flushed between kernels.",
    ]


def predict_tiled(spec: LayerSpec, tiling: Tiling, params: L2Params, tile_order: str = "forward", *,
                  schedule: Schedule | None = None) -> L2Prediction:
    """L2-aware HBM bytes of the bundled kernel (prefill Q-stationary, or split-KV decode), or of
    any Q-stationary prefill schedule.

    Args:
        spec: the layer (forward only: ``spec.backward`` must be False).
        tiling: the tiles the kernel ran (``KernelConfig.tiling()``).
        params: device and occupancy (:class:`L2Params`).
        tile_order: grid order of the query tiles, the kernel config's ``tile_order``
            (``forward``, the default for records without it, or ``reverse``).
        schedule: prefill only: the launch (:class:`~iomodel.schedule.launch.Schedule`: grid,
            tile and key order) instead of ``tile_order``; its BLOCK_M and BLOCK_N must be
            ``tiling``'s and a ``programs_per_sm`` it gives must be ``params``'. None: the
            bundled kernel's tiles-fastest, ascending schedule in ``tile_order``.

    Returns:
        :class:`L2Prediction` with causes ``l2_capacity``, ``masked_reads``,
        ``dirty_at_end`` and (split-KV) ``intermediates``.

    Raises:
        IomodelError: a backward pass is asked for (not modelled at the L2 level), an
            unknown tile_order, a schedule for a decode layer, or one that disagrees with
            ``tile_order``, ``tiling`` or ``params`` (one line each).
    """
    if spec.backward:
        raise IomodelError("the L2-aware prediction covers the forward kernel only: use --pass fwd")
    params = params.for_forward()  # the forward's own constants (iomodel.cache.params.ForwardL2)
    if schedule is None:
        schedule = Schedule.for_tiling(tiling, tile_order=tile_order) if tile_order in TILE_ORDERS else None
    else:
        _check_schedule(schedule, spec, tiling, params, tile_order)
    w = params.resident_programs
    cap = params.capacity
    share, ways = params.write_share, params.ways
    d, s = spec.head_dim, spec.width
    B, H, Hk = spec.batch, spec.heads, spec.kv_heads
    kv_full = B * Hk * spec.seqlen_k * d * s  # K (or V) bytes, once
    q_bytes = B * H * spec.seqlen_q * d * s
    o_bytes, lse_bytes = q_bytes, (B * H * spec.seqlen_q * LSE_WIDTH if tiling.writes_lse else 0)
    comp = compulsory_read_bytes(spec)
    floor_r, floor_w = sum(comp.values()), compulsory_write_bytes(spec, tiling.writes_lse)
    kernels: list[KernelL2] = []
    req_r: dict[str, int] = {}
    req_w: dict[str, int] = {}

    def launch(name: str, built: tuple[list[list[Access]], dict[str, int], dict[str, int]] | KernelL2) -> None:
        if isinstance(built, KernelL2):  # the fast exact evaluation (iomodel.cache.stream)
            k = built
        else:
            waves, r, wr = built
            k = simulate(name, waves, cap, share, ways, params.read_capacity, params.read_weights)
            k.requested_read, k.requested_write = r, wr
        kernels.append(k)
        _add(req_r, k.requested_read)
        _add(req_w, k.requested_write)

    custom = False  # a prefill schedule other than the bundled kernel's (set below)
    read_quality = "predicted"  # a prefill forward at the capacity edge: rough (set below)
    drift = None  # a prefill forward whose programs drift apart: its label (set below)
    by_row = False  # the forward's waves start afresh at each grid row (set below)
    if spec.phase == "decode":
        launch("decode kernel", decode_waves(spec, tiling, w))
        if tiling.num_splits > 1 and not tiling.fused_combine:  # fused: merged in the decode launch
            launch("combine kernel", combine_waves(spec, tiling, w))
        touched_rows = B * Hk * sum(decode_split_rows(spec, tiling))
        span = "decode programs of one KV head run together"
    else:
        grid_order = schedule.grid_order if schedule is not None else "tiles-fastest"
        key_order = schedule.key_order if schedule is not None else "ascending"
        persistent = schedule.persistent if schedule is not None else None
        # not the bundled kernel's launch
        custom = ((grid_order, key_order) != ("tiles-fastest", "ascending") or persistent is not None
                  or tiling.heads_per_program > 1 or not tiling.writes_lse)
        order = tile_order if schedule is None else schedule.tile_order
        launch("fwd kernel", kernel_l2("fwd kernel", spec, tiling, params, prefill_waves, tile_order=order,
                                       grid_order=grid_order, key_order=key_order, persistent=persistent))
        view, view_m, packed = packed_view(spec, tiling)  # P > 1: programs of P heads, BLOCK_M / P positions each
        touched_rows = B * Hk * prefill_key_span(view, replace(tiling, block_m=view_m))  # the keys some tile loads
        t_r = cdiv(spec.seqlen_q, view_m)
        by_row = row_waves(view, t_r, w, order, grid_order, persistent)
        ws, heads, kv_heads_in_window = wave_kv_working_set(spec, tiling, w, schedule)
        # a window band reads far fewer keys than seqlen_k a program: not labelled (its working set is not this)
        read_quality = forward_read_quality(ws, params.read_capacity) if spec.band is None else "predicted"
        drift = forward_drift_quality(spec, order, persistent, view.batch * view.heads * t_r, w, params.read_capacity)
        if drift is not None:
            read_quality = drift
        span = (f"W = {w} resident programs over T_r = {t_r} tiles a "
                + (f"group of P = {packed} query heads" if packed > 1 else "query head")
                + f" (G = {spec.group}) touch up to ~{min(heads, B * view.heads)} grid rows and, counted across their "
                f"group edges, {kv_heads_in_window} KV head{'s' if kv_heads_in_window != 1 else ''}: K/V working set "
                f"~{human_bytes(ws, decimals=1)} vs {human_bytes(params.read_capacity, decimals=1)} L2 a read finds")
        if custom:
            span += f" ({grid_order} grid, {key_order} key loops" + (f", {persistent} persistent loop)" if persistent else ")")
        if by_row:  # the working set above is the capacity-edge label's measure (FWD_EDGE_WORKING_SET), grid-wide
            span += (f" (the capacity-edge label's measure, over W consecutive programs of the grid; the model's waves "
                     f"each hold {min(w, t_r)} tiles of one head: iomodel.schedule.grid.row_waves)")
    hbm_r: dict[str, int] = {}
    hbm_w: dict[str, int] = {}
    dirty: dict[str, int] = {}
    for k in kernels:
        _add(hbm_r, k.hbm_read)
        _add(hbm_w, k.hbm_write)
        _add(dirty, k.dirty_at_end)
    kv_touched = touched_rows * d * s  # K (or V) bytes some program loads
    # whole tiles beyond the compulsory rows: keys past a row's causal bound, Q rows that see no key
    masked = (q_bytes - comp["Q"]) + 2 * kv_touched - comp["K"] - comp["V"]
    kv_read = hbm_r.get("K", 0) + hbm_r.get("V", 0)
    refetch = kv_read - 2 * kv_touched
    q_extra = hbm_r.get("Q", 0) - q_bytes  # decode: Q reloads per split missing L2 (normally 0)
    inter_r = hbm_r.get("O_PART", 0) + hbm_r.get("LSE_PART", 0) + hbm_r.get("SEM", 0)  # SEM: fused counters
    inter_w = (req_w.get("O_PART", 0) + req_w.get("LSE_PART", 0) + req_w.get("SEM", 0))
    out_w = o_bytes + lse_bytes
    total_w = sum(hbm_w.values())
    dirty_total = (out_w + inter_w) - total_w
    causes = [
        Cause("masked_reads", CAUSES["masked_reads"], read_bytes=masked,
              detail=f"{human_bytes(masked, decimals=1)} of Q/K/V beyond the compulsory rows loaded by whole causal tiles "
                     f"({human_bytes(2 * (kv_full - kv_touched), decimals=1)} of K/V past every query tile's bound never loaded)"),
        Cause("l2_capacity", CAUSES["l2_capacity"], read_bytes=refetch + q_extra,
              detail=(f"{human_bytes(refetch + q_extra, decimals=1)} re-fetched; " if refetch + q_extra else "all re-reads hit L2; ") + span),
        Cause("intermediates", CAUSES["intermediates"], read_bytes=inter_r, write_bytes=inter_w,
              detail=f"split-KV partials (num_splits = {tiling.num_splits}): {human_bytes(inter_w, decimals=1)} written, "
                     f"{human_bytes(inter_r, decimals=1)} read back by "
                     + ("each group's last split program" if tiling.fused_combine else "the combine kernel")),
        Cause("dirty_at_end", CAUSES["dirty_at_end"], write_bytes=-dirty_total,
              detail=f"{human_bytes(dirty_total, decimals=1)} of {human_bytes(out_w + inter_w, decimals=1)} written bytes still dirty in L2 at kernel end; "
                     f"{human_bytes(total_w, decimals=1)} written back during the kernel"),
    ]
    no_reuse_r = sum(req_r.values())
    no_reuse_w = sum(req_w.values())
    assumptions = _common_assumptions(params, by_row and spec.phase == "prefill") + [
        "The kernel loads and stores exactly what docs/traffic-contract.md lists; programs of one wave "
        "stream the same K/V blocks together, so one fetch serves the wave.",
    ]
    if spec.phase == "prefill" and by_row:
        assumptions.append(f"Each head's waves start at its first query tile ({t_r} tiles a head, W = {w} a wave): "
                           "the causal tiles run longest first, so a head's last programs end together and the "
                           "next head's start together (iomodel.schedule.grid.row_waves).")
    label = None  # the sentence that labels the forward's reads
    if spec.phase == "prefill" and drift is not None:
        label = forward_drift_sentence(spec, params.read_capacity, drift)
    elif spec.phase == "prefill" and read_quality != "predicted":
        label = forward_rough_sentence(ws, params.read_capacity)
    if label is not None:
        assumptions.append(label)
    if custom:
        loop = ("" if schedule.persistent is None else
                f" A persistent loop of these {w} programs ({schedule.persistent}: "
                + ("program j runs tiles j, j + W, ...: waves of W consecutive tiles of the grid)." if schedule.persistent == "strided" else
                   "program j runs a contiguous share of the tiles; the W tiles in flight lie T/W apart)."))
        pack = ("" if tiling.heads_per_program == 1 else
                f" Each program serves P = {tiling.heads_per_program} query heads of one KV head (BLOCK_M / P = "
                f"{tiling.block_m // tiling.heads_per_program} positions of each; grid rows are groups of P heads).")
        pack += "" if tiling.writes_lse else " Programs write O alone, no LSE."
        assumptions[1] = (f"W = {params.num_sms} SMs × {params.programs_per_sm} programs per SM = {w} programs run at "
                          f"once, in the order of the {schedule.grid_order} grid (iomodel/schedule/launch.py), in waves; "
                          f"each program scans its key blocks {schedule.key_order}.{loop}{pack}")
    out = _finish("tiled", kernels, floor_r, floor_w, no_reuse_r, no_reuse_w, no_reuse_r, no_reuse_w, causes,
                  assumptions)
    if spec.phase == "prefill":
        out.read_qualities = {kernels[0].name: read_quality}
        if label is not None:
            out.label_sentences = {(kernels[0].name, "read"): label}
    return out


def wave_kv_working_set(spec: LayerSpec, tiling: Tiling, w: int, schedule: Schedule | None = None
                        ) -> tuple[int, int, int]:
    """The K/V one resident wave of a prefill forward streams: (bytes, query heads or packed groups the wave spans,
    KV heads in its window).

    The W resident programs span ⌈W / tiles per group⌉ + 1 + G' grid rows (a ``blocked`` persistent loop: W, its tiles
    lying T/W apart; ``head-grouped:G'`` adds a group at the edges) of T_r query tiles each: query heads, or groups of
    P query heads where P > 1 (:func:`iomodel.schedule.grid.packed_view`), hence ⌈rows / (G/P)⌉ + 1 KV heads (at most
    B·H_kv), each K and V of the key rows some query reads (:attr:`LayerSpec.seen_key_rows`: N_k, a causal layer's
    longest tile's range, a window band's keys): ``kv_heads · 2 · rows · HEAD_DIM · width`` bytes (a program's own band
    is shorter still, so :func:`predict_tiled` does not label windowed layers; until 2026-12-07 every key row was
    counted, so a top-left causal chunk over a longer cache counted keys no query reads: a fresh user's finding). The
    reconciliation's ``l2_capacity`` cause quotes it beside the read capacity. Prefill only: a decode layer's split-KV
    programs are not this grid (no caller passes one).

    Args:
        spec: the layer (prefill); tiling: its tiles; w: programs resident at once (W);
        schedule: the launch (grid order, persistent loop); None: the bundled kernel's tiles-fastest grid.
    """
    grid_order = schedule.grid_order if schedule is not None else "tiles-fastest"
    persistent = schedule.persistent if schedule is not None else None
    view, view_m, _ = packed_view(spec, tiling)
    t_r = cdiv(spec.seqlen_q, view_m)
    heads = w if persistent == "blocked" else cdiv(w, tiles_per_group(grid_order, t_r)) + 1 + head_group_of(grid_order)
    kv_heads = min(spec.batch * spec.kv_heads, cdiv(heads, view.group) + 1)
    return kv_heads * 2 * spec.seen_key_rows * spec.head_dim * spec.width, heads, kv_heads


def forward_read_quality(working_set: float, read_capacity: float) -> str:
    """How far a prefill forward's L2-aware DRAM reads can be taken (one of :data:`READ_QUALITIES`): ``rough`` where a
    resident wave's K/V working set (bytes, :func:`wave_kv_working_set`) is from
    :data:`~iomodel.cache.params.FWD_EDGE_WORKING_SET` (its first to below its second) times the read capacity (bytes), the capacity
    edge where the committed receipts read :data:`~iomodel.cache.params.FWD_EDGE_RATIO` of the model; ``predicted``
    otherwise."""
    lo, hi = FWD_EDGE_WORKING_SET
    return "rough" if lo * read_capacity <= working_set < hi * read_capacity else "predicted"


def forward_rough_sentence(working_set: float, read_capacity: float) -> str:
    """The assumption a ``rough`` forward's estimate carries (:func:`forward_read_quality`): the class and what the
    receipts measured in it."""
    lo, hi = FWD_EDGE_WORKING_SET
    (nb, wb), (nc, wc) = FWD_EDGE_RUNS
    r_lo, r_hi = FWD_EDGE_RATIO
    return (f"ROUGH: the forward's DRAM reads. A resident wave's K/V working set here (the label's measure: the KV "
            f"heads W consecutive programs of the grid can touch) is "
            f"{working_set / read_capacity:.2f} times the read capacity, the capacity edge ({lo}-{hi} times): there "
            f"the committed forward runs (H200 and H100) read {r_lo}-{r_hi}x this model, within ±10 % or 1 MiB on {wb} of "
            f"{nb} runs of the bundled kernel and {wc} of {nc} of SDPA cuDNN, misses on both sides (issue 12 item 3; "
            "iomodel/cache/params.py FWD_EDGE_WORKING_SET): read this estimate as rough either way.")


def forward_drift_quality(spec: LayerSpec, tile_order: str, persistent: str | None, programs: int, in_flight: int,
                          read_capacity: float) -> str | None:
    """How far a prefill forward's DRAM reads can be taken where its programs drift apart (one of
    :data:`READ_QUALITIES`), or None where they do not.

    Programs that take the causal query tiles as they finish (one program per tile, or a persistent loop that is
    not ``blocked``) drift apart beyond the model's waves, which hold them in step, when consecutive tiles differ in
    length: docs/l2-calibration.md, "Programs that drift apart"; ``benchmarks/drift_sim.py``. Needed: a causal layer
    without a window band, more ``programs`` than ``in_flight`` (a single wave starts together), and the K+V of one KV
    head over the longest tile's key range, :func:`drift_kv_bytes`, at least
    :data:`~iomodel.cache.params.FWD_DRIFT_KV_HEAD` times ``read_capacity`` (bytes). Then:

    * ``not a prediction`` in the ``forward`` tile order (each tile a key block longer than the one before; measured:
      SDPA cuDNN's causal forwards, :data:`~iomodel.cache.params.FWD_DRIFT_RATIO`; any grid order: the simulator
      drifts tiles-fastest, head-grouped and heads-fastest grids alike);
    * ``rough`` in the ``reverse`` order where a bottom-right mask has fewer query than key rows (a chunk of queries
      over a longer cache: the simulator's programs drift there too, 2.4-3.4x its in-step reads at 16k-32k queries
      over 132,608 keys; not measured);
    * None otherwise (the reverse order of a square or top-left layer keeps the programs of a head in step, each
      tile one block shorter than the one before, and realigns them at each head: the model's waves,
      :func:`iomodel.schedule.grid.row_waves`).

    Args: ``tile_order`` ``forward`` or ``reverse``; ``persistent`` the schedule's loop (None, ``strided``,
    ``blocked``); ``programs`` the launch's programs (tiles), ``in_flight`` how many run at once.
    Returns a quality or None; raises nothing.
    """
    if not spec.causal or spec.band is not None or spec.phase != "prefill" or persistent == "blocked":
        return None
    if programs <= in_flight or drift_kv_bytes(spec) < FWD_DRIFT_KV_HEAD * read_capacity:
        return None
    if tile_order == "forward":
        return "not a prediction"
    if spec.causal_offset > 0:  # bottom-right, N_q < N_k
        return "rough"
    return None


def drift_kv_bytes(spec: LayerSpec) -> int:
    """K+V bytes of one KV head over the longest causal tile's key range (:attr:`LayerSpec.seen_key_rows`):
    ``2 · rows · HEAD_DIM · width`` (bytes). Drifting programs sit all over that range, so a
    K/V block is re-read only after about that much K/V was touched (``benchmarks/drift_sim.py``)."""
    return 2 * spec.seen_key_rows * spec.head_dim * spec.width


#: What the receipts measured of each Q-stationary kernel whose programs drift (:func:`forward_drift_sentence`).
_DRIFT_MEASURED = {
    "fwd kernel": "the committed runs of this kind (SDPA cuDNN's causal forwards, H100 and H200, the bundled "
                  "kernel's in the forward order and FlashAttention-2's through SDPA FLASH, H100) read {lo}-{hi}x the "
                  "model's estimate of them, {n} of {n} runs "
                  "(iomodel/cache/params.py FWD_DRIFT_KV_HEAD)",
    "_bwd_dq": "the dQ kernel in this order read 22.75x the model's estimate at 131,072 tokens and 32-160x at 150k-524k on the "
               "H200 (receipts/ncu-h200-long-train-probe1-2026-12-05.json, ncu-h200-long-train-holdout1-2026-12-05.json; "
               "docs/l2-calibration.md, \"The dQ kernel's tile order\")",
}


def forward_drift_sentence(spec: LayerSpec, read_capacity: float, quality: str, kernel: str = "fwd kernel") -> str:
    """The assumption a drifting Q-stationary kernel's estimate carries (:func:`forward_drift_quality`, ``quality`` its
    result): why, and what the receipts or the simulator say. ``kernel``: ``fwd kernel`` (the forward, alone or a
    training step's ``_attn_fwd``) or ``_bwd_dq``."""
    kv = drift_kv_bytes(spec)
    who = "the forward's" if kernel == "fwd kernel" else f"{kernel}'s"
    where = (f"one KV head's K+V over the longest tile's keys here ({human_bytes(kv, decimals=1)}) is "
             f"{kv / read_capacity:.2f} times the read capacity (the label starts at {FWD_DRIFT_KV_HEAD})")
    if quality == "not a prediction":
        lo, hi = FWD_DRIFT_RATIO
        seen = _DRIFT_MEASURED[kernel].format(lo=lo, hi=hi, n=FWD_DRIFT_RUNS)
        return (f"NOT A PREDICTION: {who} DRAM reads. Its programs take the causal query tiles in ascending "
                "order as they finish, each tile BLOCK_M keys longer than the one before, so the programs in flight "
                f"drift apart across a head's key range, while this model's waves hold them in step; {where}: {seen}; "
                "benchmarks/drift_sim.py. Read this estimate as far below what runs.")
    return (f"ROUGH: {who} DRAM reads. A chunk of queries over a longer cache (bottom-right, N_q < N_k): even "
            "in the reverse tile order its programs drift apart as they take tiles, in benchmarks/drift_sim.py's "
            f"simulation (not measured), while this model's waves hold them in step; {where}: read this estimate as "
            "possibly below what runs (docs/l2-calibration.md, \"Programs that drift apart\").")


def _rekeyed(wave: list[Any], n: int) -> list[Any]:
    """One wave's accesses with every item key tagged by sequence ``n`` (distinct items per sequence)."""
    out = []
    for a in wave:
        if a.__class__ is ReadGroup:
            out.append(a._replace(keys=tuple((n, k) for k in a.keys)))
        else:
            out.append(a._replace(key=(n, a.key)))
    return out


def predict_ragged_launch(sequences: Sequence[LayerSpec], tiling: Tiling, params: L2Params,
                          tile_order: str = "forward") -> KernelL2:
    """L2-aware HBM bytes of one varlen launch over a ragged batch: one kernel, one L2.

    The varlen grid is ``(cdiv(max N_q, BLOCK_M), B·H)`` with the query tile fastest, so the
    sequences run in batch order, and the programs past a sequence's end return at once
    (kernels/flash_attention.py, ``_attn_fwd``). Each sequence's waves are those of its batch-1
    layer (:func:`iomodel.schedule.grid.prefill_waves`, W = ``params.resident_programs``), its
    items tagged by sequence, and all waves run through one cold L2 in that order: the L2 state
    (clean K/V, dirty O/LSE) carries from one sequence to the next, so what stays dirty at the
    end is what the launch's last waves leave, not the sum of every sequence's own kernel end
    (the estimate of receipts/ncu-h200-ragged1-2026-12-01.json, which summed batch-1 estimates and
    under-predicted every DRAM write, 1.4-6000x). Approximation: the last wave of one sequence and
    the first of the next are simulated one after the other, while on the GPU they overlap.

    Args:
        sequences: the batch-1 prefill layers of the sequences, in batch order
            (``RaggedSpec.sequences()``).
        tiling: the forward kernel's tiles (BLOCK_M, BLOCK_N).
        params: device, effective L2, programs per SM.
        tile_order: the kernel's query-tile order (``forward`` or ``reverse``).

    Returns:
        :class:`~iomodel.cache.simulate.KernelL2` named ``fwd kernel (varlen)``: HBM reads, writes
        and dirty-at-end bytes per tensor (bytes); the int32 cu_seqlens reads are not in it.

    Raises:
        IomodelError: an empty batch, a decode or backward layer, an unknown tile_order; tiles whose programs pack
            query heads or keep no LSE (no ragged launch runs them).
    """
    if not sequences:
        raise IomodelError("a ragged launch needs at least one sequence")
    from iomodel.schedule.tiles import ragged_programs_refusal

    reason = ragged_programs_refusal(tiling.heads_per_program, tiling.writes_lse)
    if reason is not None:
        raise IomodelError(reason)
    params = params.for_forward()  # the forward's own constants (iomodel.cache.params.ForwardL2)
    waves: list[list[Any]] = []
    req_r: dict[str, int] = {}
    req_w: dict[str, int] = {}
    for n, seq in enumerate(sequences):
        if seq.phase != "prefill" or seq.backward:
            raise IomodelError("the varlen launch estimate covers the prefill forward only: use --phase prefill --pass fwd")
        ws, r, w = prefill_waves(seq, tiling, params.resident_programs, tile_order, grouped=True)
        waves += [_rekeyed(wave, n) for wave in ws]
        _add(req_r, r)
        _add(req_w, w)
    k = simulate("fwd kernel (varlen)", waves, params.capacity, params.write_share, params.ways, params.read_capacity,
                 params.read_weights)
    k.requested_read, k.requested_write = req_r, req_w
    return k


def _check_schedule(schedule: Schedule, spec: LayerSpec, tiling: Tiling, params: L2Params, tile_order: str) -> None:
    """Raise (one line) where a schedule given to :func:`predict_tiled` disagrees with its other arguments."""
    if spec.phase == "decode":
        raise IomodelError("a launch schedule describes the prefill kernel: drop it for a decode layer")
    if tile_order != "forward" and tile_order != schedule.tile_order:
        raise IomodelError(f"tile_order {tile_order!r} and the schedule's {schedule.tile_order!r} disagree: give it once")
    if (schedule.block_m, schedule.block_n) != (tiling.block_m, tiling.block_n):
        raise IomodelError(f"the schedule's tiles BLOCK_M={schedule.block_m}, BLOCK_N={schedule.block_n} are not the "
                           f"tiling's {tiling.block_m}, {tiling.block_n}: give them once")
    if ("LSE" in schedule.writes) != tiling.writes_lse:
        raise IomodelError(f"the schedule writes {', '.join(schedule.writes)} but the tiling "
                           f"{'writes' if tiling.writes_lse else 'keeps no'} LSE: give it once")
    if schedule.heads_per_program != tiling.heads_per_program:
        raise IomodelError(f"the schedule's heads_per_program {schedule.heads_per_program} is not the tiling's "
                           f"{tiling.heads_per_program}: give it once")
    if schedule.programs_per_sm is not None and schedule.programs_per_sm != params.programs_per_sm:
        raise IomodelError(f"the schedule's programs_per_sm {schedule.programs_per_sm} is not the L2 parameters' "
                           f"{params.programs_per_sm}: give it once")


def predict_baseline(spec: LayerSpec, rows: Sequence[Any], params: L2Params) -> L2Prediction:
    """L2-aware HBM bytes of the eager chain from the model's ``baseline`` HBM rows.

    Each distinct ``step`` of the rows is one kernel (in row order), simulated by
    :func:`stream_kernel`; with the profiler's flush every kernel starts cold. For a
    forward + backward step the rows are the kernels autograd launches
    (:func:`iomodel.traffic.baseline.eager_launches`, docs/traffic-contract.md), so the
    prediction is per launch and ``kernels`` pairs one to one with the profiled kernels.

    Args:
        spec: the layer.
        rows: the model's baseline rows (attributes ``tensor, step, level, shape,
            read_bytes, write_bytes``; only ``HBM`` rows are used).
        params: device (capacity).

    Returns:
        :class:`L2Prediction` with causes ``intermediates``, ``broadcast_rereads`` and
        ``dirty_at_end``.

    Raises:
        IomodelError: no HBM rows were given, or L2 content carried between kernels was asked
            for (only the profiler's flushed setting is modelled for the chain).
    """
    if not params.flush_between_kernels:
        raise IomodelError("the eager chain is modelled with the profiler's cache flush only: keep flush_between_kernels")
    hbm = [r for r in rows if getattr(r, "level", "HBM") == "HBM"]
    if not hbm:
        raise IomodelError("no HBM rows for the baseline: pass the model's baseline rows")
    steps: list[str] = []
    by_step: dict[str, list[Any]] = {}
    for r in hbm:
        if r.step not in by_step:
            steps.append(r.step)
            by_step[r.step] = []
        by_step[r.step].append(r)
    kernels, notes = [], []
    for st in steps:
        k, n = stream_kernel(st, by_step[st], spec, params.capacity, write_share=params.write_share,
                             ways=params.ways, read_capacity=params.read_capacity)
        kernels.append(k)
        notes += n
    d, s = spec.head_dim, spec.width
    q_bytes = spec.batch * spec.heads * spec.seqlen_q * d * s
    kv_full = spec.batch * spec.kv_heads * spec.seqlen_k * d * s
    comp = compulsory_read_bytes(spec)
    floor_r, floor_w = sum(comp.values()), q_bytes  # O only (the chain returns no LSE)
    masked = q_bytes + 2 * kv_full - floor_r  # the chain reads all of Q, K and V
    if any(r.tensor == "LSE" and int(r.write_bytes) for r in hbm):
        floor_w += spec.batch * spec.heads * spec.seqlen_q * LSE_WIDTH
    req_r = sum(int(r.read_bytes) for r in hbm)
    req_w = sum(int(r.write_bytes) for r in hbm)
    hbm_r = sum(sum(k.hbm_read.values()) for k in kernels)
    hbm_w = sum(sum(k.hbm_write.values()) for k in kernels)
    extra = hbm_r - req_r  # broadcast re-reads
    dirty = req_w - hbm_w
    causes = [
        Cause("masked_reads", CAUSES["masked_reads"], read_bytes=masked,
              detail=f"{human_bytes(masked, decimals=1)} of Q/K/V that the causal mask hides, read in full by the chain"),
        Cause("intermediates", CAUSES["intermediates"], read_bytes=req_r - floor_r - masked,
              write_bytes=req_w - floor_w,
              detail=f"{len(kernels)} kernels; S, P and the other intermediates cross HBM: "
                     f"{human_bytes(req_r - floor_r - masked, decimals=1)} read and {human_bytes(req_w - floor_w, decimals=1)} written beyond "
                     "the inputs and outputs"),
        Cause("broadcast_rereads", CAUSES["broadcast_rereads"], read_bytes=extra,
              detail="; ".join(notes) if notes else "the broadcast mask stays in L2 across (batch, head)"),
        Cause("dirty_at_end", CAUSES["dirty_at_end"], write_bytes=-dirty,
              detail=f"{human_bytes(dirty, decimals=1)} of {human_bytes(req_w, decimals=1)} written bytes still dirty in L2 at the end of their kernels; "
                     f"{human_bytes(hbm_w, decimals=1)} written back during them"),
    ]
    assumptions = _common_assumptions(params) + [
        "Each op of the eager chain is one kernel that streams its inputs and output once "
        f"({STREAM_SLICES} interleaved slices); matmul operands are re-read from L2, not HBM.",
    ]
    return _finish("baseline", kernels, floor_r, floor_w, req_r, req_w, None, None, causes, assumptions)


#: The kernels of one bundled training step, in launch order (``kernels/backward.py``; the
#: names the profiler reports, ``_attn_fwd`` for either forward variant).
TRAINING_KERNELS = ("_attn_fwd", "_bwd_preprocess", "_bwd_dkdv", "_bwd_dq")


def training_kernels(tiling: Tiling) -> tuple[str, ...]:
    """The kernels of one bundled training step with these tiles, in launch order:
    :data:`TRAINING_KERNELS`, with ``_bwd_reduce_dkdv`` after ``_bwd_dkdv`` when the dK/dV
    kernel splits the GQA group (``tiling.bwd_group_splits`` > 1, ``kernels/backward.py``)."""
    if tiling.bwd_group_splits == 1:
        return TRAINING_KERNELS
    return TRAINING_KERNELS[:3] + (REDUCE_DKDV_KERNEL,) + TRAINING_KERNELS[3:]


def training_floor(spec: LayerSpec, tiling: Tiling) -> dict[str, tuple[int, int]]:
    """Per backward kernel, the bytes it touches once (reads) and stores once (writes), in bytes.

    With the profiler's flush every kernel starts cold, so each kernel's floor is every byte
    it loads at all, once: ``_bwd_preprocess`` O and dO, Delta written; ``_bwd_dkdv`` K, V
    and the Q, dO, LSE, Delta rows some key tile loads (the union of
    :func:`iomodel.schedule.grid.dkdv_query_ranges`: rows from its lowest first row lo_0
    without a window), dK, dV written; ``_bwd_dq`` Q, dO, LSE, Delta and the K/V rows some
    query tile loads (the union of :func:`iomodel.schedule.grid.prefill_key_ranges` with the
    dQ tiles: its longest key range without a window), dQ written. Group slices (S =
    ``tiling.bwd_group_splits`` > 1): ``_bwd_dkdv`` touches K, V once still (its S slices load the
    same rows) and writes the fp32 partials (2·S·B·H_kv·N_k·d·4) instead of dK, dV;
    ``_bwd_reduce_dkdv`` reads the partials and writes dK, dV.

    Args:
        spec: the layer (its backward kernels); tiling: the backward tiles.

    Returns:
        ``{kernel: (read_bytes, write_bytes)}`` for the backward kernels of :func:`training_kernels`.
    """
    B, H, Hk, d, s, n_q, n_k = (spec.batch, spec.heads, spec.kv_heads, spec.head_dim, spec.width,
                                spec.seqlen_q, spec.seqlen_k)
    row_q = 2 * d * s + LSE_WIDTH + FP32_WIDTH  # Q, dO, LSE, Delta bytes of one query row
    q_bytes, kv_bytes = B * H * n_q * d * s, B * Hk * n_k * d * s
    q_span = dkdv_query_span(spec, tiling)  # query rows some key tile loads (n_q - lo_0 unwindowed)
    dq_keys = prefill_key_span(spec, Tiling(block_m=tiling.dq_block_m, block_n=tiling.dq_block_n))
    S = tiling.bwd_group_splits
    part_bytes = 2 * S * B * Hk * n_k * d * FP32_WIDTH  # dK_part and dV_part (S > 1)
    floor = {
        "_bwd_preprocess": (2 * q_bytes, B * H * n_q * FP32_WIDTH),
        "_bwd_dkdv": (2 * kv_bytes + B * H * q_span * row_q, 2 * kv_bytes if S == 1 else part_bytes),
        "_bwd_dq": (B * H * n_q * row_q + 2 * B * Hk * dq_keys * d * s, q_bytes),
    }
    if S > 1:
        floor[REDUCE_DKDV_KERNEL] = (part_bytes, 2 * kv_bytes)
    return floor


#: How far the training step's L2-aware DRAM reads of one kernel can be taken (``read_bytes_quality`` in the
#: worksheet JSON): ``predicted`` (the model's claim, validated by the hold-outs), ``rough`` (a class measured
#: seldom within 10 %), ``not a prediction`` (a class measured far from the model).
READ_QUALITIES = ("predicted", "rough", "not a prediction")


#: How far the training step's L2-aware DRAM writes of one kernel can be taken (``write_bytes_quality`` in the
#: worksheet JSON): ``predicted``, or ``rough`` (the band :data:`~iomodel.cache.params.DKDV_PARTIAL_WRITE_EXCESS_MIB`).
WRITE_QUALITIES = ("predicted", "rough")


def dkdv_write_quality(spec: LayerSpec, tiling: Tiling, capacity: float) -> str:
    """How far the model's ``_bwd_dkdv`` DRAM writes can be taken (one of :data:`WRITE_QUALITIES`): ``rough`` where
    its S > 1 group slices' fp32 partials (:func:`training_floor`'s dK/dV writes, bytes) exceed ``capacity`` (the
    effective L2, bytes, :attr:`~iomodel.cache.params.L2Params.capacity`), measured on the H200 within
    :data:`~iomodel.cache.params.DKDV_PARTIAL_WRITE_EXCESS_MIB` of the model; ``predicted`` otherwise."""
    if tiling.bwd_group_splits > 1 and training_floor(spec, tiling)["_bwd_dkdv"][1] > capacity:
        return "rough"
    return "predicted"


def dkdv_read_quality(spec: LayerSpec, tiling: Tiling) -> str:
    """How far the wave model's ``_bwd_dkdv`` DRAM reads can be taken for this layer (one of :data:`READ_QUALITIES`).

    Causal GQA steps, heads-outer, without a window: ``not a prediction`` from
    :data:`~iomodel.cache.params.DKDV_CAUSAL_UNPREDICTED_ROWS` query rows (measured on the H200 at
    :data:`~iomodel.cache.params.DKDV_CAUSAL_MEASURED_RATIO` of the model), else ``rough`` for groups of
    :data:`~iomodel.cache.params.DKDV_LARGE_GROUP` or more from
    :data:`~iomodel.cache.params.DKDV_LARGE_GROUP_ROWS` rows (:data:`~iomodel.cache.params.DKDV_LARGE_GROUP_RATIO`);
    ``predicted`` otherwise. Source: docs/l2-calibration.md, "Two hold-outs measured" and the training hold-outs.
    """
    if spec.causal and spec.group > 1 and tiling.bwd_dkdv_order == "heads-outer" and spec.band is None:
        if spec.seqlen_q >= DKDV_CAUSAL_UNPREDICTED_ROWS:
            return "not a prediction"
        if spec.group >= DKDV_LARGE_GROUP and spec.seqlen_q >= DKDV_LARGE_GROUP_ROWS:
            return "rough"
    return "predicted"


def predict_training_step(spec: LayerSpec, tiling: Tiling, params: L2Params,
                          programs_per_sm: dict[str, int] | None = None,
                          tile_order: str = "forward", grid_order: str = "tiles-fastest") -> L2Prediction:
    """L2-aware HBM bytes of the bundled training step: forward, then the three backward kernels.

    Each kernel of :data:`TRAINING_KERNELS` is simulated on its own, from a cold L2 (Nsight
    Compute's ``--cache-control all`` flushes before every kernel): the forward as
    :func:`predict_tiled`, ``_bwd_preprocess``, ``_bwd_dkdv`` and ``_bwd_dq`` from the waves of
    :mod:`iomodel.schedule.grid` (:func:`~iomodel.schedule.grid.preprocess_waves`,
    :func:`~iomodel.schedule.grid.dkdv_waves`, :func:`~iomodel.schedule.grid.dq_waves`), with the
    forward's constants (effective L2 fraction, ways, chunk rows), except two weights fitted on training receipts
    (:data:`~iomodel.cache.params.DQ_WRITE_SHARE` for the dQ kernel's stores and
    :data:`~iomodel.cache.params.GLUON_DKDV_PARTIAL_WRITE_SHARE` for the Gluon dK/dV launch's fp32 partials).

    Args:
        spec: the layer (prefill; ``spec.backward`` True or False, the step is modelled either way).
        tiling: the forward tiles and the backward tiles (``bwd_block_m`` ... ``preprocess_block_m``).
        params: device, effective L2 and replacement (``programs_per_sm`` is the default of
            every kernel); ``flush_between_kernels`` must be True.
        programs_per_sm: programs one SM runs at once per kernel name of
            :data:`TRAINING_KERNELS` (Nsight Compute's occupancy limit, or
            :func:`iomodel.cache.estimate.training_programs_per_sm`); absent names take
            ``params.programs_per_sm``.
        tile_order: the forward kernel's query-tile order (``forward`` or ``reverse``).
        grid_order: the forward kernel's grid order (``tiles-fastest`` or ``head-grouped:G``, its
            ``KernelConfig.grid_order``; :class:`iomodel.schedule.launch.Schedule`).

    Returns:
        :class:`L2Prediction` of algorithm ``tiled``, kernels named as :data:`TRAINING_KERNELS`;
        floor = Σ per kernel of the bytes it touches once (the forward's compulsory reads,
        :func:`training_floor` for the backward); causes ``masked_reads`` (forward),
        ``l2_capacity`` and ``dirty_at_end`` (every kernel).

    Raises:
        IomodelError: a decode layer, L2 content carried between kernels
            (``flush_between_kernels=False``: only the profiler's flushed setting is modelled),
            an unknown kernel name or a programs-per-SM count below 1, an unknown tile_order.
    """
    if spec.phase != "prefill":
        raise IomodelError("the training-step estimate covers prefill layers only: use --phase prefill")
    if not params.flush_between_kernels:
        raise IomodelError("the training-step estimate models the profiler's cache flush between kernels only: "
                           "measure with ncu --cache-control all")
    names = training_kernels(tiling)
    pps = dict(programs_per_sm or {})
    bad = sorted(set(pps) - set(names) - {REDUCE_DKDV_KERNEL})  # an estimate may name the reduction when S = 1
    if bad:
        raise IomodelError(f"unknown kernel(s) {', '.join(bad)}: use {', '.join(names)}")
    if any(not isinstance(v, int) or v < 1 for v in pps.values()):
        raise IomodelError(f"programs per SM must be positive integers, got {pps}")
    par = {k: replace(params, programs_per_sm=pps.get(k, params.programs_per_sm)) for k in names}
    dq_fitted = params.write_once and params.stored_share is None  # the dQ kernel's fitted share (DQ_WRITE_SHARE)
    if dq_fitted:
        par["_bwd_dq"] = replace(par["_bwd_dq"], stored_share=DQ_WRITE_SHARE)
    gluon_fitted = (tiling.bwd_dkdv_kernel == "gluon" and tiling.bwd_group_splits > 1 and params.write_once
                    and params.stored_share is None)  # the Gluon launch's fp32 partials (GLUON_DKDV_PARTIAL_WRITE_SHARE)
    if gluon_fitted:
        par["_bwd_dkdv"] = replace(par["_bwd_dkdv"], stored_share=GLUON_DKDV_PARTIAL_WRITE_SHARE)
    fwd_launch = None if grid_order == "tiles-fastest" else Schedule.for_tiling(tiling, tile_order=tile_order,
                                                                               grid_order=grid_order)
    fwd = predict_tiled(spec.with_(backward=False), tiling, par["_attn_fwd"], tile_order, schedule=fwd_launch)
    kernels = [replace(k, name="_attn_fwd") for k in fwd.kernels]
    floor = training_floor(spec, tiling)
    refetch: dict[str, int] = {}
    builds = {"_bwd_preprocess": preprocess_waves, "_bwd_dkdv": dkdv_waves, REDUCE_DKDV_KERNEL: reduce_dkdv_waves,
              "_bwd_dq": dq_waves}
    for name in names[1:]:
        k = kernel_l2(name, spec, tiling, par[name], builds[name])
        kernels.append(k)
        refetch[name] = sum(k.hbm_read.values()) - floor[name][0]
    floor_r = fwd.floor_read_bytes + sum(f[0] for f in floor.values())
    floor_w = fwd.floor_write_bytes + sum(f[1] for f in floor.values())
    by_key = {c.key: c for c in fwd.causes}
    fwd_refetch = by_key["l2_capacity"].read_bytes if "l2_capacity" in by_key else 0
    masked = by_key["masked_reads"].read_bytes if "masked_reads" in by_key else 0
    refetch_total = fwd_refetch + sum(refetch.values())
    stored = {k.name: sum(k.requested_write.values()) for k in kernels}
    written = {k.name: sum(k.hbm_write.values()) for k in kernels}
    dirty = sum(stored.values()) - sum(written.values())
    dk = kernels[2]
    S = tiling.bwd_group_splits
    ws_dkdv = (f"_bwd_dkdv: W = {par['_bwd_dkdv'].resident_programs} programs of {cdiv(spec.seqlen_k, tiling.bwd_block_n)} "
               f"key tiles per KV head stream the Q/dO/LSE/Delta rows of their G = {spec.group} query heads"
               + (f" in {S} group slices of at most {cdiv(spec.group, S)} heads" if S > 1 else ""))
    causes = [
        Cause("masked_reads", CAUSES["masked_reads"], read_bytes=masked,
              detail=by_key["masked_reads"].detail if "masked_reads" in by_key else ""),
        Cause("l2_capacity", CAUSES["l2_capacity"], read_bytes=refetch_total,
              detail="re-fetched beyond each kernel's bytes touched once: "
                     + ", ".join(f"{n} {human_bytes(v, decimals=1)}" for n, v in
                                 (("_attn_fwd", fwd_refetch), *refetch.items()))
                     + f" ({ws_dkdv}; {dk.waves} waves)"),
        Cause("dirty_at_end", CAUSES["dirty_at_end"], write_bytes=-dirty,
              detail=f"{human_bytes(dirty, decimals=1)} of {human_bytes(sum(stored.values()), decimals=1)} stored bytes still "
                     "dirty in L2 at the end of their kernels: "
                     + ", ".join(f"{n} {human_bytes(stored[n] - written[n], decimals=1)}" for n in names)),
    ]
    req_r: dict[str, int] = {}
    req_w: dict[str, int] = {}
    for k in kernels:
        _add(req_r, k.requested_read)
        _add(req_w, k.requested_write)
    no_reuse_r, no_reuse_w = sum(req_r.values()), sum(req_w.values())
    assumptions = _common_assumptions(params)[:1] + [
        "Programs per SM, per kernel: " + ", ".join(f"{n} {par[n].programs_per_sm}" for n in names)
        + f" ({params.num_sms} SMs); programs run in grid order (axis 0 fastest), in waves"
        + ("; the dQ kernel's query tiles from the last one down (dq_tile_order reverse)."
           if tiling.dq_tile_order == "reverse" else "."),
        *_common_assumptions(params)[2:],
        f"The {'four' if len(names) == 4 else 'five'} kernels load and store exactly what docs/traffic-contract.md "
        "lists; the programs of one wave "
        "that share a head stream the same K/V (forward, dQ) or Q/dO/LSE/Delta (dK/dV) blocks together, so one "
        "fetch serves the wave. Register spills (local memory) are not modelled.",
    ]
    closed = [k for k in kernels if k.note.startswith("closed form")]
    if closed:
        from iomodel.cache.dkdv_closed import CLOSED_FORM_AGREEMENT
        from iomodel.cache.estimate import L2_DKDV_CLOSED_FORM_MIN_TOUCHES, L2_DKDV_ANY_LENGTH_MIN_TOUCHES

        where = (f"MHA past {L2_DKDV_ANY_LENGTH_MIN_TOUCHES:,} touches (or {L2_DKDV_CLOSED_FORM_MIN_TOUCHES:,} on a long "
                 "sequence)" if spec.group == 1 else
                 f"GQA whose dK/dV reads are not a prediction (from {DKDV_CAUSAL_UNPREDICTED_ROWS:,} query rows: the "
                 "closed form is up to 15 % from the touch-by-touch count below 2^18 tokens, far inside what the "
                 "hardware reads there)")
        assumptions.append(f"{closed[0].name}: {closed[0].note}; on {where}, its "
                           "Q/dO/LSE/Delta misses are the mean count of the wave model's chunk entries, not each touch "
                           f"({CLOSED_FORM_AGREEMENT}).")
    fwd_quality = fwd.read_qualities.get("fwd kernel", "predicted")
    labels: dict[tuple[str, str], str] = {}
    if fwd_quality != "predicted":
        labels[("_attn_fwd", "read")] = fwd.label_sentences[("fwd kernel", "read")]
        assumptions.append(labels[("_attn_fwd", "read")])
    quality = dkdv_read_quality(spec, tiling)
    if quality != "predicted":
        if quality == "not a prediction":
            lo, hi = DKDV_CAUSAL_MEASURED_RATIO
            labels[("_bwd_dkdv", "read")] = (f"NOT A PREDICTION: _bwd_dkdv's DRAM reads. On the H200 the dK/dV kernel of every causal GQA "
                               f"step of {DKDV_CAUSAL_UNPREDICTED_ROWS:,} query rows or more, heads-outer, read far fewer "
                               f"bytes than this wave model ({lo}-{hi}x of it, measured with the Triton dK/dV launch"
                               + ("" if tiling.bwd_dkdv_kernel == "triton" else
                                  f"; this step's {tiling.bwd_dkdv_kernel} launch is not measured at these lengths")
                               + "; docs/l2-calibration.md, \"Two hold-outs measured\"); read this kernel's estimate as far "
                               "above what runs. benchmarks/dkdv_window_pass_sketch.py is nearer for groups of up to 4 "
                               "(not a model).")
        else:
            lo, hi = DKDV_LARGE_GROUP_RATIO
            labels[("_bwd_dkdv", "read")] = (f"ROUGH: _bwd_dkdv's DRAM reads. Causal heads-outer steps of {DKDV_LARGE_GROUP} or more "
                               f"query heads per KV head from {DKDV_LARGE_GROUP_ROWS:,} query rows read {lo}-{hi}x this "
                               "wave model on the H200, seldom within 10 % (docs/l2-calibration.md): this kernel's "
                               "estimate may be off either way.")
        assumptions.append(labels[("_bwd_dkdv", "read")])
    part_bytes = floor["_bwd_dkdv"][1] if tiling.bwd_group_splits > 1 else 0  # the fp32 partials
    write_quality = dkdv_write_quality(spec, tiling, params.capacity)
    if write_quality == "rough":
        lo, hi = DKDV_PARTIAL_WRITE_EXCESS_MIB
        n, above, below = DKDV_PARTIAL_WRITE_EXCESS_STEPS
        labels[("_bwd_dkdv", "write")] = (f"ROUGH: _bwd_dkdv's DRAM writes. Its {tiling.bwd_group_splits} group slices' fp32 partials "
                           f"({part_bytes / 2**20:.1f} MiB) exceed the effective L2 ({params.capacity / 2**20:.1f} "
                           f"MiB); on the H200 such steps wrote {lo:+} to {hi:+} MiB beside this kernel's estimate, {above} "
                           f"of {n} more than 1 MiB above it and {below} more than 1 MiB below (iomodel/cache/params.py "
                           "DKDV_PARTIAL_WRITE_EXCESS_MIB).")
        assumptions.append(labels[("_bwd_dkdv", "write")])
    if gluon_fitted:
        assumptions.append(f"A byte of fp32 partials the Gluon _bwd_dkdv launch stores weighs {GLUON_DKDV_PARTIAL_WRITE_SHARE} "
                           f"read-equivalent bytes of L2 (the Triton launch's {params.write_share}): fitted on that launch's "
                           f"{GLUON_DKDV_PARTIAL_FIT_STEPS} split steps on the H200, not a mechanism (iomodel/cache/params.py "
                           "GLUON_DKDV_PARTIAL_WRITE_SHARE).")
    if dq_fitted:
        assumptions.append(f"A byte _bwd_dq stores weighs {DQ_WRITE_SHARE} read-equivalent bytes of L2 (the other backward kernels' "
                           f"{params.write_share}{' but for the Gluon dK/dV partials above' if gluon_fitted else ''}): "
                           "fitted on the dQ launches of six training receipts, not a mechanism "
                           "(iomodel/cache/params.py DQ_WRITE_SHARE).")
    fwd_params = par["_attn_fwd"].for_forward()
    if fwd_params.forward_source:
        assumptions.append(f"_attn_fwd is predicted with the forward's own constants, not those above: {fwd_params.ways} "
                           f"ways, a Q byte weighing {fwd_params.q_share:g} and a written byte {fwd_params.write_share:g} "
                           f"of a K/V byte, write-back judged at {fwd_params.l2_fraction:g} of the L2 "
                           f"({fwd_params.forward_source}; iomodel/cache/params.py FORWARD_L2).")
    out = _finish("tiled", kernels, floor_r, floor_w, no_reuse_r, no_reuse_w, no_reuse_r, no_reuse_w, causes,
                  assumptions)
    dq = par["_bwd_dq"]
    dq_drift = forward_drift_quality(spec, tiling.dq_tile_order, None,
                                     spec.batch * spec.heads * cdiv(spec.seqlen_q, tiling.dq_block_m),
                                     dq.resident_programs, dq.read_capacity)
    if dq_drift is not None:  # the dQ kernel's programs drift as the forward's do (docs: "The dQ kernel's tile order")
        labels[("_bwd_dq", "read")] = forward_drift_sentence(spec, dq.read_capacity, dq_drift, "_bwd_dq")
        out.assumptions.append(labels[("_bwd_dq", "read")])
    out.read_qualities = {"_attn_fwd": fwd_quality, "_bwd_dkdv": quality, "_bwd_dq": dq_drift or "predicted"}
    out.write_qualities = {"_bwd_dkdv": write_quality}
    out.label_sentences = labels
    return out
