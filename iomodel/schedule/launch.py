"""A prefill forward kernel's launch schedule as data: tiles, warps, occupancy and the three orders.

:class:`Schedule` says what the L2 model (:func:`iomodel.schedule.grid.prefill_waves`,
:func:`iomodel.cache.predict.predict_tiled`) needs to know about a Q-stationary forward launch:

* tiles BLOCK_M, BLOCK_N and ``num_stages`` (shared memory per program,
  :func:`iomodel.schedule.tiles.program_sram_bytes`), ``num_warps`` per program;
* ``programs_per_sm``: programs one SM runs at once (None: estimated from shared memory and
  warps, :func:`iomodel.schedule.grid.estimate_programs_per_sm`);
* ``grid_order``: how the linear program index p (the order in which the hardware starts
  programs) maps to (query tile i, grid row bh = b·H + h), T_r = ceil(seqlen_q / BLOCK_M):

  - ``tiles-fastest``: p = i + T_r·bh (the bundled kernel's grid ``(T_r, B·H)``);
  - ``heads-fastest``: p = bh + B·H·i (grid ``(B·H, T_r)``: a wave holds the same query tile
    of many heads);
  - ``grouped:N``: query tiles in groups of N; within a group the group's tiles of one head
    run before the next head (tiles fastest), the whole group over every head before the next
    group. ``grouped:1`` is heads-fastest, ``grouped:N`` with N >= T_r is tiles-fastest;
  - ``head-grouped:G``: grid rows in groups of G; a group's programs (all T_r tile indices of
    its G rows) before the next group's, and within a group the rows fastest: p = g·G·T_r +
    t·n_g + r with n_g = min(G, B·H − g·G) runs index t of row g·G + r. With ``tile_order``
    reverse (heaviest causal tile first) it is FlashAttention-3's LPT order
    (``hopper/tile_scheduler.hpp``, ``SingleTileLPTScheduler``); the bundled kernel runs it
    (``kernels.flash_attention._head_grouped``), the default for causal prefill
    (:func:`lpt_head_group`). ``head-grouped:1`` is tiles-fastest, ``head-grouped:G`` with
    G >= B·H heads-fastest;

* ``tile_order``: program index i along the tile axis runs query tile i (``forward``) or
  T_r − 1 − i (``reverse``, longest causal tiles first);
* ``key_order``: each program's key-block loop runs from its first block up (``ascending``,
  the bundled kernel) or from its last block down (``descending``);
* ``heads_per_program`` P: query heads of one KV head that one program serves (1: one head per
  program, every bundled prefill launch; P = G = H / H_kv: one program per whole GQA group).
  Its BLOCK_M rows are BLOCK_M / P positions of each of P heads (FlashAttention-3's PackGQA,
  ``hopper/pack_gqa.h``), so the K/V blocks it streams serve P heads at once; grid rows are
  groups of P heads (:func:`iomodel.schedule.grid.packed_view`). The bundled pointer prefill runs
  it from ``KernelConfig(heads_per_program=P)`` (``kernels/flash_attention.py``, ``_attn_fwd``'s PACK);
* the tensors each program reads and writes: Q-stationary, so a program reads its BLOCK_M rows
  of Q once, streams the K and V blocks of its key range and writes its rows of O and LSE
  once (:data:`PROGRAM_READS`, :data:`PROGRAM_WRITES`, :meth:`Schedule.tensors`;
  ``docs/traffic-contract.md``);
* ``persistent``: None (one program per tile, started by the hardware in grid order as SMs free
  up) or a persistent loop of P = num_SMs × programs_per_sm programs over the tiles in grid
  order: ``strided`` (program j runs tiles j, j + P, j + 2P, ...: FlashAttention-3's
  ``StaticPersistentTileScheduler``, ``hopper/tile_scheduler.hpp``; what cuDNN's forward is
  inferred to do, docs/l2-calibration.md "Peers") or ``blocked`` (program j runs a contiguous
  share of about T/P tiles, so the P tiles in flight lie T/P apart in grid order). A strided loop
  keeps the tiles in flight P consecutive tiles, the waves of a one-program-per-tile launch with
  W = P, so the L2 model gives it the same bytes.

The bundled kernel's schedules are :data:`BUNDLED` (tiles-fastest, forward or reverse,
ascending; any of its tiles and warps). Pure Python; no torch, no triton.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iomodel import jsonvalues as jv
from iomodel.errors import IomodelError
from iomodel.spec.hardware import MAX_WARPS_PER_PROGRAM

if TYPE_CHECKING:
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import Hardware

#: Plain grid orders (a grouped swizzle is written ``grouped:N``, :data:`GROUPED_PREFIX`).
GRID_ORDERS = ("tiles-fastest", "heads-fastest")
#: Prefix of the grouped swizzle ``grouped:N`` (N query tiles per group, N >= 1).
GROUPED_PREFIX = "grouped:"
#: Prefix of the head-grouped order ``head-grouped:G`` (grid rows in groups of G, rows fastest within a
#: group: FlashAttention-3's LPT scheduler order with the heaviest causal tile first).
HEAD_GROUPED_PREFIX = "head-grouped:"
#: Query-tile orders within a head (the bundled kernel's ``tile_order``).
TILE_ORDERS = ("forward", "reverse")
#: Directions of each program's key-block loop.
KEY_ORDERS = ("ascending", "descending")
#: Tile assignments of a persistent loop (``Schedule.persistent``; None: one program per tile).
PERSISTENT = ("strided", "blocked")
#: What each program of a Q-stationary forward reads: its Q rows once, the K and V blocks of its key range streamed.
PROGRAM_READS = ("Q", "K", "V")
#: What each program writes once by default (every bundled prefill kernel): its O rows and their fp32 LSE.
PROGRAM_WRITES = ("O", "LSE")
#: The write sets a schedule may give (``Schedule.writes``): O and LSE, or O alone (an inference kernel that keeps
#: no LSE; ``Tiling.writes_lse`` False).
PROGRAM_WRITE_SETS = (PROGRAM_WRITES, ("O",))


def tiles_per_group(grid_order: str, t_r: int) -> int:
    """Query tiles per group of ``grid_order`` for T_r = ``t_r`` tiles per head (tiles).

    ``tiles-fastest`` = T_r (one group), ``heads-fastest`` = 1, ``grouped:N`` = min(N, T_r);
    ``head-grouped:G`` = T_r (its groups are of grid rows: :func:`head_group_of`).

    Raises:
        IomodelError: an unknown grid order (:func:`grid_order_refusal`).

    Example:
        >>> tiles_per_group("grouped:4", 16), tiles_per_group("heads-fastest", 16), tiles_per_group("tiles-fastest", 16)
        (4, 1, 16)
    """
    why = grid_order_refusal(grid_order)
    if why is not None:
        raise IomodelError(why)
    if grid_order == "tiles-fastest" or head_group_of(grid_order):
        return t_r
    if grid_order == "heads-fastest":
        return 1
    return min(int(grid_order[len(GROUPED_PREFIX):]), t_r)


def head_group_of(grid_order: Any) -> int:
    """G of ``head-grouped:G`` (grid rows per group, >= 1), 0 for any other order (no head groups).

    Example:
        >>> head_group_of("head-grouped:8"), head_group_of("tiles-fastest")
        (8, 0)
    """
    if isinstance(grid_order, str) and grid_order.startswith(HEAD_GROUPED_PREFIX):
        n = grid_order[len(HEAD_GROUPED_PREFIX):]
        if _group_size(n):
            return int(n)
    return 0


def _group_size(text: str) -> bool:
    """Whether ``text`` is a group size of a grid order: ASCII digits without a leading zero (``str.isdigit`` alone
    takes a superscript two, which ``int`` refuses, and other scripts' digits)."""
    return text.isascii() and text.isdigit() and not text.startswith("0")


#: K/V bytes (bytes) the programs of one row group of the bundled kernel's causal ``head-grouped`` launch
#: may stream: G = the largest power of two whose rows' K/V fit it (:func:`lpt_head_group`). Chosen by
#: measurement on the H200 (receipts/lpt-probe-h200-2026-12-02.json): 8 MiB groups were never slower than
#: the autotuned tiles-fastest launch on six causal prefill shapes (+0 to +7.5 %), 32 MiB groups lost up to
#: 6 % (K/V of the group's heads no longer held in L2 beside the other traffic).
LPT_GROUP_BYTES = 8 * 2**20


def lpt_head_group(rows: int, row_bytes: int, budget: int = LPT_GROUP_BYTES) -> int:
    """Grid rows per group of the bundled kernel's causal launch (``head-grouped:G``), 1 = none.

    The largest power of two G with G · ``row_bytes`` <= ``budget``, at most ``rows`` (a
    power of two at least 1). The balance it buys: a group's programs run heaviest first, so the
    launch ends on light tiles (longest processing time first, FlashAttention-3's
    ``SingleTileLPTScheduler``, whose group is the heads whose K/V fit its L2 budget).

    Args:
        rows: grid rows B·H (query heads; adjacent rows of a GQA group share K/V).
        row_bytes: K/V bytes one row streams, shared rows counted once (bytes): 2·N_k·d·s / G_gqa.
        budget: bytes per group (default :data:`LPT_GROUP_BYTES`).

    Raises:
        IomodelError: a non-positive ``rows``, ``row_bytes`` or ``budget``.

    Example (2 × 16 heads, 8192 keys, HEAD_DIM 128, bf16: 4 MiB per head):
        >>> lpt_head_group(32, 2 * 8192 * 128 * 2)
        2
    """
    for name, v in (("rows", rows), ("row_bytes", row_bytes), ("budget", budget)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise IomodelError(f"{name} must be a positive whole number, got {v!r}")
    g = 1
    while 2 * g <= rows and 2 * g * row_bytes <= budget:
        g *= 2
    return g


#: Most programs (B·H·T_r) a launch may have for the LPT order (:func:`lpt_launch_order`): the time lost to
#: the last, unbalanced wave falls as 1/programs (a list-scheduling model of 264 resident programs with causal
#: tile work ∝ i + 1: 16 % at 2,048 programs, 4 % at 8,192, 1 % at 32,768), and larger grids keep the
#: tiles-fastest order, whose L2 estimate the fast evaluation gives at any length (iomodel/cache/stream.py).
LPT_MAX_PROGRAMS = 2**14


def lpt_launch_order(causal: bool, dense: bool, rows: int, kv_row_bytes: int, programs: int) -> dict[str, str]:
    """The grid and tile order of the bundled kernel's default prefill launch on a GPU, where its
    rule changes them: ``{"grid_order": "head-grouped:G", "tile_order": "reverse"}`` for a causal,
    dense (no window band, not ragged) layer of at most :data:`LPT_MAX_PROGRAMS` programs whose
    :func:`lpt_head_group` G is at least 2; ``{}`` otherwise (the chosen tiles' own order:
    tiles-fastest, the autotuner's tile order).

    The one home of the rule: ``kernels.flash_attention`` applies it to every launch whose tiles it
    chooses itself (not to a given config, nor in the interpreter), the worksheet and the plots
    model it.

    Args:
        causal: the causal mask; dense: no window band and not a ragged (varlen) batch;
        rows: grid rows B·H; kv_row_bytes: K/V bytes of one row, shared rows once (bytes:
        2·N_k·d·s / G_gqa); programs: the launch's programs B·H·T_r, T_r = ceil(N_q / BLOCK_M).

    Raises:
        IomodelError: as :func:`lpt_head_group`.
    """
    if not (causal and dense) or programs > LPT_MAX_PROGRAMS:
        return {}
    g = lpt_head_group(rows, max(1, kv_row_bytes))
    return {"grid_order": f"{HEAD_GROUPED_PREFIX}{g}", "tile_order": "reverse"} if g > 1 else {}


def grid_order_refusal(grid_order: Any, flag: str = "--grid-order") -> str | None:
    """Why ``grid_order`` is no grid order, or None (one line that says what to use)."""
    if isinstance(grid_order, str):
        if grid_order in GRID_ORDERS:
            return None
        n = grid_order[len(GROUPED_PREFIX):] if grid_order.startswith(GROUPED_PREFIX) else ""
        if _group_size(n) or head_group_of(grid_order):
            return None
    shown = grid_order if not isinstance(grid_order, str) or len(grid_order) <= 40 else grid_order[:37] + "..."
    return (f"grid order {shown!r} is unknown: use {flag} {', '.join(GRID_ORDERS)}, "
            f"{GROUPED_PREFIX}N (N query tiles per group, N >= 1) or {HEAD_GROUPED_PREFIX}G (G grid rows per group)")


def program_runs(p0: int, p1: int, t_r: int, rows: int, group: int,
                 head_group: int = 0) -> list[tuple[int, int, int]]:
    """The programs ``[p0, p1)`` of a grid as runs ``(bh, i0, i1)``: grid row bh, tile-axis indices i0..i1−1.

    Programs are visited in linear order p; a run is a maximal stretch of consecutive
    programs of one grid row and consecutive tile indices. With G = ``group`` tiles per group
    (:func:`tiles_per_group`): group g = p // (G·rows) holds tiles gG .. gG + n_g − 1 (n_g =
    min(G, T_r − gG)); within it r = p − gG·rows gives bh = r // n_g and i = gG + r mod n_g.
    ``head_group`` G_h > 0 (``head-grouped:G_h``, ``group`` ignored): row group g = p // (G_h·T_r),
    r = p mod (G_h·T_r), n_g = min(G_h, rows − g·G_h): index i = r // n_g of row g·G_h + r mod n_g
    (the kernel's ``_head_grouped``).

    Args:
        p0, p1: linear program indices (programs).
        t_r: query tiles per grid row (T_r).
        rows: grid rows (B·H).
        group: query tiles per group (1 .. T_r).
        head_group: grid rows per group of ``head-grouped:G`` (0: no row groups).

    Returns:
        runs in program order; their lengths add up to ``p1 − p0``.

    Example (T_r = 3, B·H = 2, heads fastest, then tiles fastest):
        >>> program_runs(0, 4, 3, 2, 1)
        [(0, 0, 1), (1, 0, 1), (0, 1, 2), (1, 1, 2)]
        >>> program_runs(2, 5, 3, 2, 3)
        [(0, 2, 3), (1, 0, 2)]
    """
    out = []
    p = p0
    if head_group:
        span = head_group * t_r
        while p < p1:
            g, r = divmod(p, span)
            n_g = min(head_group, rows - g * head_group)
            i, k = divmod(r, n_g)
            take = min(t_r - i, p1 - p) if n_g == 1 else 1  # a lone row runs its tiles in order
            out.append((g * head_group + k, i, i + take))
            p += take
        return out
    while p < p1:
        g, r = divmod(p, group * rows)
        base = g * group
        n_g = min(group, t_r - base)
        bh, j = divmod(r, n_g)
        take = min(n_g - j, p1 - p)
        out.append((bh, base + j, base + j + take))
        p += take
    return out


def program_tensor(access: str, how: str, rows: int, row_bytes: int, heads: int | None = None) -> dict[str, Any]:
    """One tensor of one program, as the JSON gives it: ``access`` (read, write), ``how`` (``once``: its own rows;
    ``streamed``: a block at every step of its loop), the ``rows`` of one such load or store and their ``bytes``
    (rows × ``row_bytes``), and the query ``heads`` a once-loaded block covers where that is said. Units: rows,
    bytes, heads."""
    out: dict[str, Any] = {"access": access, "how": how, "rows": rows, "bytes": rows * row_bytes}
    if heads is not None:
        out["heads"] = heads
    return out


def _tensor_fix(name: str, allowed: tuple[tuple[str, ...], ...]) -> str:
    """How to fix a schedule's ``reads`` or ``writes`` (the flag, or the file's key for ``reads``, which has none)."""
    if name == "reads":
        return f"give reads = {list(allowed[0])} or leave it out"
    return ("give --writes " + " or ".join(",".join(a) for a in allowed) + " (in a schedule file: writes = "
            + " or ".join("[" + ", ".join(f'"{t}"' for t in a) + "]" for a in allowed) + ")")


def _positive_int(value: Any, name: str, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise IomodelError(f"{name} must be a positive whole number, got {value!r}: set {flag}")
    return value


@dataclass(frozen=True)
class Schedule:
    """The launch schedule of a Q-stationary prefill forward kernel (see the module docstring).

    Raises:
        IomodelError: (one line each) a tile that is not a power of two, a non-positive stage,
            warp or program count, warps outside 1..:data:`~iomodel.spec.hardware.MAX_WARPS_PER_PROGRAM`,
            an unknown grid, tile or key order. Limits that depend on the layer and the hardware
            are checked by :meth:`check`.
    """

    block_m: int = 128  # BLOCK_M, query rows per program
    block_n: int = 64  # BLOCK_N, key rows per inner step
    num_stages: int = 2  # K/V tiles in flight per program (shared memory holds this many)
    num_warps: int = 4  # warps per program
    programs_per_sm: int | None = None  # programs one SM runs at once; None: estimated (shared memory, warps)
    grid_order: str = "tiles-fastest"  # tiles-fastest, heads-fastest, grouped:N or head-grouped:G
    tile_order: str = "forward"  # forward or reverse query-tile order within a head
    key_order: str = "ascending"  # each program's key-block loop: ascending or descending
    persistent: str | None = None  # None: a program per tile; strided or blocked: a persistent loop of P programs
    heads_per_program: int = 1  # query heads of one KV head packed into a program's rows (H/H_kv: the whole group)
    reads: tuple[str, ...] = PROGRAM_READS  # what each program reads: Q once, K and V streamed (fixed: Q-stationary)
    writes: tuple[str, ...] = PROGRAM_WRITES  # what each program writes once: O and LSE, or O alone (no LSE kept)
    #: Where ``programs_per_sm`` comes from when the launch, not the user, fixed it (the Gluon prefill's one program
    #: per SM); None: given (a flag or a schedule file) or estimated. Not a schedule-file key, not in :meth:`to_dict`.
    programs_per_sm_source: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        from iomodel.spec import Tiling

        for name in ("block_m", "block_n", "num_stages", "num_warps"):  # whole numbers (a TOML 64.0 is a float)
            _positive_int(getattr(self, name), name, "--" + name.replace("_", "-"))
        Tiling(block_m=self.block_m, block_n=self.block_n, num_stages=self.num_stages)  # powers of two, stages >= 1
        if not 1 <= self.num_warps <= MAX_WARPS_PER_PROGRAM:  # any kernel's (FlashAttention-3 and ours: 12)
            raise IomodelError(f"num_warps must be 1..{MAX_WARPS_PER_PROGRAM} (1,024 threads per program), got "
                               f"{self.num_warps!r}: set --num-warps")
        if self.programs_per_sm is not None:
            _positive_int(self.programs_per_sm, "programs_per_sm", "--programs-per-sm")
        _positive_int(self.heads_per_program, "heads_per_program", "--heads-per-program")
        for name, allowed in (("reads", (PROGRAM_READS,)), ("writes", PROGRAM_WRITE_SETS)):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(
                    isinstance(t, str) for t in value):
                raise IomodelError(f"{name} must be a list of tensor names, got {value!r}: " + _tensor_fix(name, allowed))
            got = tuple(value)
            match = [a for a in allowed if set(a) == set(got) and len(a) == len(got)]
            if not match:
                say = ("a Q-stationary program reads its Q rows once and streams K and V; other inputs (an attention "
                       "bias, a mask tensor) are not modelled" if name == "reads" else
                       "a program writes its O rows once, with or without their fp32 LSE")
                raise IomodelError(f"{name} {', '.join(got) or '(none)'}: {say}: " + _tensor_fix(name, allowed))
            object.__setattr__(self, name, match[0])  # the canonical order
        why = grid_order_refusal(self.grid_order)
        if why is not None:
            raise IomodelError(why)
        if self.tile_order not in TILE_ORDERS:
            raise IomodelError(f"tile order {self.tile_order!r} is unknown: use --tile-order {' or '.join(TILE_ORDERS)}")
        if self.key_order not in KEY_ORDERS:
            raise IomodelError(f"key order {self.key_order!r} is unknown: use --key-order {' or '.join(KEY_ORDERS)}")
        if self.persistent == "none":  # the spelling that undoes a schedule file's loop from the command line
            object.__setattr__(self, "persistent", None)
        if self.persistent is not None and self.persistent not in PERSISTENT:
            raise IomodelError(f"persistent tile assignment {self.persistent!r} is unknown: use --persistent "
                               f"{' or '.join(PERSISTENT)}, or none (one program per tile)")

    @property
    def bundled(self) -> bool:
        """The bundled kernel runs this schedule: its grid orders, ascending keys (either tile order), a program per
        tile, O and LSE written; packed query heads (``heads_per_program`` > 1) on its pointer prefill, from a given
        ``KernelConfig``."""
        return ((self.grid_order in KERNEL_GRID_ORDERS or head_group_of(self.grid_order) > 0)
                and self.key_order == "ascending" and self.persistent is None and self.writes == PROGRAM_WRITES)

    def tiling(self, base: "Tiling | None" = None) -> "Tiling":
        """These tiles as a :class:`~iomodel.spec.Tiling` (``base``'s other fields, e.g. the backward tiles, kept)."""
        from iomodel.spec import Tiling

        return replace(base or Tiling(), block_m=self.block_m, block_n=self.block_n, num_stages=self.num_stages,
                       heads_per_program=self.heads_per_program, writes_lse="LSE" in self.writes)

    @classmethod
    def for_tiling(cls, tiling: "Tiling", **launch: Any) -> "Schedule":
        """The schedule of ``tiling``'s forward tiles and heads per program with the launch fields ``launch``
        (num_warps, orders ...)."""
        return cls(block_m=tiling.block_m, block_n=tiling.block_n, num_stages=tiling.num_stages,
                   heads_per_program=tiling.heads_per_program,
                   writes=PROGRAM_WRITES if tiling.writes_lse else ("O",), **launch)

    def resident_programs_per_sm(self, spec: "LayerSpec", hardware: "Hardware") -> tuple[int, str]:
        """Programs per SM the L2 model assumes, and where the number comes from (one clause).

        ``programs_per_sm`` when given, else :func:`iomodel.schedule.grid.estimate_programs_per_sm`
        from the shared memory of one program (:meth:`Tiling.sram_bytes`) and ``num_warps``
        (registers ignored).
        """
        if self.programs_per_sm is not None:
            return self.programs_per_sm, self.programs_per_sm_source or "given by the schedule"
        from iomodel.schedule.grid import estimate_programs_per_sm

        pps = estimate_programs_per_sm(self.tiling().sram_bytes(spec), self.num_warps, hardware.smem_per_sm)
        return pps, "estimated from shared memory per program and warps; registers ignored"

    def check(self, spec: "LayerSpec", hardware: "Hardware") -> None:
        """Raise if this schedule cannot launch ``spec`` on ``hardware``.

        Checks, in order: the tiles fit one block's shared memory (:meth:`Tiling.check_fits`,
        ``hardware.smem_per_block``); ``heads_per_program`` divides the GQA group and BLOCK_M
        (:func:`iomodel.schedule.tiles.prefill_packing_refusal`); a given ``programs_per_sm`` is at most the hardware's
        resident blocks per SM (:attr:`Hardware.max_blocks_per_sm`), its warps
        ``programs_per_sm × num_warps`` at most the resident warps per SM
        (:attr:`Hardware.max_warps_per_sm`), and its shared memory ``programs_per_sm ×
        program bytes`` at most ``hardware.smem_per_sm``.

        Raises:
            IomodelError: one line naming the first limit broken and the largest value that meets
                all three (not only that one).
        """
        from iomodel.schedule.tiles import prefill_packing_refusal

        tiling = self.tiling()
        tiling.check_fits(spec, hardware.smem_per_block, hardware.name)
        why = prefill_packing_refusal(self.heads_per_program, spec.group, self.block_m, spec.backward)
        if why is not None:
            raise IomodelError(why)
        pps = self.programs_per_sm
        if pps is None:
            return
        cc = "{}.{}".format(*hardware.compute_capability)
        blocks, warps = hardware.max_blocks_per_sm, hardware.max_warps_per_sm
        need = tiling.sram_bytes(spec)
        # the most that meets all three limits at once, so one message gives a value that launches
        most = max(1, min(blocks, warps // self.num_warps, hardware.smem_per_sm // need))
        use = f"--programs-per-sm {most}" + (" or fewer" if most > 1 else "")
        if pps > blocks:
            raise IomodelError(f"programs_per_sm {pps} is over the {hardware.name}'s {blocks} resident blocks per SM "
                               f"(CUDA C++ Programming Guide, compute capability {cc}): use {use}")
        if pps * self.num_warps > warps:
            raise IomodelError(f"programs_per_sm {pps} × num_warps {self.num_warps} = {pps * self.num_warps} warps is over "
                               f"the {hardware.name}'s {warps} resident warps per SM (compute capability {cc}): use {use}")
        if pps * need > hardware.smem_per_sm:
            raise IomodelError(f"programs_per_sm {pps} × {need:,} B of shared memory per program = {pps * need:,} B is over "
                               f"the {hardware.name}'s {hardware.smem_per_sm:,} B per SM: use {use}, or smaller tiles")

    def to_dict(self) -> dict[str, Any]:
        """JSON form: every schedule field (``programs_per_sm`` None = estimated; ``reads`` and ``writes`` lists)."""
        out = asdict(self)
        del out["programs_per_sm_source"]
        out["reads"], out["writes"] = list(self.reads), list(self.writes)
        return out

    def tensors(self, spec: "LayerSpec") -> dict[str, dict[str, Any]]:
        """What one program reads and writes, per tensor: how (``once``: its own rows, loaded or stored once;
        ``streamed``: the blocks of its key range, BLOCK_N rows a step), its rows (query rows: BLOCK_M, of
        ``heads_per_program`` heads; key rows: BLOCK_N a step) and the bytes of one such load or store
        (``docs/traffic-contract.md``). Units: rows, bytes.

        Tensors: Q, O ``(B, H, seqlen_q, HEAD_DIM)``; K, V ``(B, H_kv, seqlen_k, HEAD_DIM)``; LSE
        ``(B, H, seqlen_q)`` fp32.
        """
        from iomodel.spec import LSE_WIDTH

        row, p = spec.head_dim * spec.width, self.heads_per_program
        out = {"Q": program_tensor("read", "once", self.block_m, row, p),
               "K": program_tensor("read", "streamed", self.block_n, row),
               "V": program_tensor("read", "streamed", self.block_n, row),
               "O": program_tensor("write", "once", self.block_m, row, p)}
        if "LSE" in self.writes:
            out["LSE"] = program_tensor("write", "once", self.block_m, LSE_WIDTH, p)
        return out

    @classmethod
    def from_mapping(cls, data: Any, source: str = "schedule") -> "Schedule":
        """A schedule from a mapping of its field names (a TOML table), defaults for the rest.

        Raises:
            IomodelError: not a table, an unknown key, or a bad value (one line naming ``source``).
        """
        if not isinstance(data, dict):
            raise IomodelError(f"{source}: a schedule must be a table of {', '.join(FIELDS)}: fix the file")
        bad = sorted(set(data) - set(FIELDS))
        if bad:
            raise IomodelError(f"{source}: unknown key(s) {', '.join(bad)}: use {', '.join(FIELDS)}")
        try:
            return cls(**data)
        except IomodelError as exc:  # the value's own advice names a flag; from a file, the file's key is what to fix
            msg = re.sub(r": set --[a-z-]+.*$", ": fix that value in the file", str(exc))
            msg = re.sub(r"use --([a-z-]+) ", lambda m: f"use {m.group(1).replace('-', '_')} = ", msg)
            raise IomodelError(f"{source}: {msg}") from None


#: The field names of :class:`Schedule` (the keys a schedule TOML may set).
FIELDS = tuple(f.name for f in fields(Schedule) if f.name != "programs_per_sm_source")
#: Grid orders the bundled kernel runs (``kernels/flash_attention.py``, ``KernelConfig.grid_order``).
KERNEL_GRID_ORDERS = GRID_ORDERS
#: The bundled kernel's two query-tile orders as schedules (tiles-fastest, ascending keys, forward or reverse: its
#: ``tile_order`` config field) at the :class:`Schedule` field defaults (128 x 64, 2 stages, 4 warps), not at any path's
#: own tiles: the worksheet builds the kernel's actual launch with :meth:`Schedule.for_tiling` from the tiles and warps
#: ``kernels/heuristics.py`` gives per path (``iomodel.report.worksheet.l2_schedule``, the LPT order included).
BUNDLED = tuple(Schedule(tile_order=o) for o in TILE_ORDERS)


def read_schedule_file(path: str | Path) -> dict[str, Any]:
    """The fields a schedule TOML file gives, checked: top-level keys of :data:`FIELDS` (or a
    ``[schedule]`` table of them). Fields it leaves out are absent (the caller's defaults apply).

    Example file::

        grid_order = "heads-fastest"
        key_order = "descending"
        programs_per_sm = 2
        heads_per_program = "group"   # or a whole number: query heads of one KV head a program

    Raises:
        IomodelError: the file is missing, not TOML, or has an unknown key or a bad value (one line).
    """
    from iomodel.paths import read_toml

    path = Path(path)
    data = read_toml(path, f"schedule file {str(path)!r}", "pass a TOML file (--schedule FILE.toml)")
    if set(data) == {"schedule"}:
        data = data["schedule"]
        if not isinstance(data, dict):  # "schedule = 3": a value where the [schedule] table belongs
            raise IomodelError(f"schedule file {str(path)!r}: schedule must be a [schedule] table of fields, got "
                               f"{jv.describe(data)}: write the fields under [schedule] or at the top level")
    elif isinstance(data.get("schedule"), dict):  # a [schedule] table beside top-level fields: which wins is a guess
        raise IomodelError(f"schedule file {str(path)!r} gives fields both at the top level "
                           f"({', '.join(sorted(k for k in data if k != 'schedule'))}) and in a [schedule] table: "
                           "put them all in one of the two")
    from iomodel.schedule.tiles import WHOLE_GROUP

    check = dict(data)
    p = check.get("heads_per_program")
    if isinstance(p, str):  # "group": the layer's group, checked where the layer is known (packing_of's spelling)
        if p.strip().lower() != WHOLE_GROUP:
            raise IomodelError(f"schedule file {str(path)!r}: heads_per_program must be a whole number or "
                               f"{WHOLE_GROUP!r} (one program per whole GQA group), got {p!r}: fix that value in the file")
        check["heads_per_program"] = 1
    Schedule.from_mapping(check, f"schedule file {str(path)!r}")  # every value checked
    return dict(data)


def load_schedule(path: str | Path) -> Schedule:
    """The :class:`Schedule` of a schedule TOML file (:func:`read_schedule_file`; defaults for the fields it leaves out).

    Raises:
        IomodelError: as :func:`read_schedule_file`; ``heads_per_program = "group"``, which needs a layer's GQA
            group (give the file to ``iomodel worksheet --schedule``, or a number).
    """
    fields = read_schedule_file(path)
    if isinstance(fields.get("heads_per_program"), str):
        raise IomodelError(f"schedule file {str(path)!r}: heads_per_program {fields['heads_per_program']!r} is the "
                           "layer's GQA group, which a schedule alone does not know: give the file to iomodel worksheet "
                           "--schedule, or write the number")
    return Schedule(**fields)


__all__ = [
    "BUNDLED",
    "FIELDS",
    "GRID_ORDERS",
    "GROUPED_PREFIX",
    "KERNEL_GRID_ORDERS",
    "KEY_ORDERS",
    "PERSISTENT",
    "PROGRAM_READS",
    "PROGRAM_WRITES",
    "PROGRAM_WRITE_SETS",
    "Schedule",
    "TILE_ORDERS",
    "grid_order_refusal",
    "head_group_of",
    "HEAD_GROUPED_PREFIX",
    "LPT_GROUP_BYTES",
    "lpt_head_group",
    "lpt_launch_order",
    "LPT_MAX_PROGRAMS",
    "load_schedule",
    "program_tensor",
    "program_runs",
    "read_schedule_file",
    "tiles_per_group",
]
