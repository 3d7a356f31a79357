"""Plain-data specifications of an attention layer and of its tiling.

Vocabulary (``../shared/DESIGN.md``): B batch; H query heads; H_kv key/value heads
(GQA group = H / H_kv); seqlen_q, seqlen_k; HEAD_DIM (d); element width s in bytes;
BLOCK_M query rows per program; BLOCK_N key rows per inner step.

Nothing here knows about sympy or torch: a :class:`LayerSpec` is a frozen dataclass
that validates itself and raises :class:`~iomodel.errors.IomodelError` with one
sentence saying what to change.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from iomodel.errors import IomodelError
from iomodel.spec.dtypes import DTYPES, canonical_dtype

CAUSAL_ALIGNS = ("top-left", "bottom-right")
PHASES = ("prefill", "decode")
PASSES = ("fwd", "fwd+bwd")

def _positive_int(value: Any, what: str, flag: str) -> int:
    """``value`` as a positive int (an integral float such as ``12.0`` is accepted).

    Raises:
        IomodelError: a bool, string, None, NaN, infinity, fraction, zero or negative value.
    """
    if isinstance(value, (bool, str)) or not isinstance(value, int):
        try:
            if isinstance(value, (bool, str)) or float(value) != int(value):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError, OverflowError):
            raise IomodelError(f"{what} must be a positive integer, got {value!r}: set {flag}") from None
    if value <= 0:
        raise IomodelError(f"{what} must be a positive integer, got {value}: set {flag} to 1 or more")
    return value


def causal_offset(causal_align: str, seqlen_q: int, seqlen_k: int) -> int:
    """Diagonal offset of the causal mask: query row m sees key n iff n <= m + offset (elements).

    0 for ``top-left`` (PyTorch ``is_causal``), ``seqlen_k - seqlen_q`` for ``bottom-right``
    (flash-attn >= 2.1, KV-cache decode: the last query row sees the whole KV cache).

    Raises:
        IomodelError: ``causal_align`` is neither ``top-left`` nor ``bottom-right``.
    """
    if causal_align not in CAUSAL_ALIGNS:
        raise IomodelError(f"causal_align {causal_align!r} is unknown: use 'top-left' or 'bottom-right'")
    return 0 if causal_align == "top-left" else seqlen_k - seqlen_q


def window_side(value: Any, what: str, flag: str, unbounded_minus_one: bool = False) -> int | None:
    """One side of a sliding window (tokens): ``None`` (unbounded) or an int >= 0.

    ``unbounded_minus_one``: also accept -1 for unbounded (flash-attn's ``window_size``
    convention, used by the kernel's ``window=(left, right)``).

    Raises:
        IomodelError: a bool, fraction, string or negative value (-1 allowed only with
            ``unbounded_minus_one``), naming ``flag``.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise IomodelError(f"{what} must be a whole number of tokens (or None for unbounded), got {value!r}: "
                           f"set {flag}")
    if value == -1 and unbounded_minus_one:
        return None
    if value < 0:
        allowed = "-1 or None" if unbounded_minus_one else "None"
        raise IomodelError(f"{what} must be >= 0 tokens ({allowed} for unbounded), got {value}: set {flag}")
    return value


def effective_window(causal: bool, left: int | None, right: int | None) -> tuple[int | None, int | None] | None:
    """The window that masks anything beyond the causal mask: ``(left, right)`` or ``None``.

    Sides are tokens (``None`` = unbounded). A window with no finite side, or only a finite
    right side under a causal mask (which already caps the right side at 0), masks nothing
    more than the mask without it, so it is ``None``; under a causal mask the right side is
    capped at 0 (flash-attn: ``causal=True`` is ``window_size=(left, 0)``).
    """
    if causal:
        right = 0 if right is None else min(right, 0)
        return None if left is None else (left, right)
    if left is None and right is None:
        return None
    return left, right


def window_band(causal: bool, left: int | None, right: int | None, seqlen_q: int,
                seqlen_k: int) -> tuple[int, int] | None:
    """The finite band ``(WL, WR)`` (tokens) the kernel and the model use, or ``None`` (no window).

    With ``off`` the alignment offset (:func:`causal_offset`, applied to the window whether
    or not the layer is causal), query row m sees key n iff
    ``m + off - WL <= n <= m + off + WR`` (and 0 <= n < seqlen_k): flash-attn's
    ``window_size=(left, right)`` rule (Beltagy et al. 2020 Longformer's sliding window;
    Jiang et al. 2023 Mistral 7B, Section 2). An unbounded side becomes
    ``seqlen_q + seqlen_k`` (wider than any row's reach, so it bounds nothing); a causal mask
    caps WR at 0 (:func:`effective_window`).
    """
    eff = effective_window(causal, left, right)
    if eff is None:
        return None
    wide = seqlen_q + seqlen_k
    return (wide if eff[0] is None else eff[0]), (wide if eff[1] is None else eff[1])


def causal_right_refusal(causal: bool, right: int | None) -> str | None:
    """Why a window's right side cannot go with a causal mask (one clause), or None: keys right of the diagonal are
    what the causal mask hides, and flash-attn's convention (the kernel's too) caps the side at 0 under causal, a
    silent change of what was asked. The rule the worksheet (``--window``) and the sweep (``window``) share."""
    if causal and right is not None and right > 0:
        return f"reaches {right:,} key{'s' * (right != 1)} right of the diagonal, which the causal mask hides"
    return None


def band_has_empty_rows(band: tuple[int, int], seqlen_q: int, seqlen_k: int, off: int) -> bool:
    """Whether a window band ``(WL, WR)`` leaves some query row without any key: the first row
    (0 + off + WR < 0) or the last (N_q − 1 + off − WL > N_k − 1); the rows' bands move by one
    key per row, so an empty row exists only at either end. Works elementwise on numpy arrays."""
    return (off + band[1] < 0) | (seqlen_q - 1 + off - band[0] > seqlen_k - 1)


def window_masks_nothing(causal: bool, left: int | None, right: int | None, seqlen_q: int, seqlen_k: int,
                         off: int) -> bool:
    """Whether a window (``left``, ``right`` tokens, None unbounded; :func:`window_band`) hides no key the layer's
    mask alone would show: the first row's left edge and the last row's reach are outside the keys
    (``N_q − 1 + off − WL <= 0``; without a causal mask also ``off + WR >= N_k − 1``), the rows' bands moving by one
    key per row. A config's window wider than the keys (Phi-3-mini-128k: 262,144 over its 131,072 positions) is then
    the same attention as none. ``off``: the alignment offset (:func:`causal_offset`). Raises nothing."""
    band = window_band(causal, left, right, seqlen_q, seqlen_k)
    if band is None:
        return True
    return seqlen_q - 1 + off - band[0] <= 0 and (causal or off + band[1] >= seqlen_k - 1)


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


@dataclass(frozen=True)
class LayerSpec:
    """One attention layer call: the shapes, dtype, mask and pass that determine its traffic.

    Tensors: Q ``(B, H, seqlen_q, HEAD_DIM)``; K, V ``(B, H_kv, seqlen_k, HEAD_DIM)``;
    O like Q; LSE ``(B, H, seqlen_q)`` fp32. Units: sizes are element counts.

    Raises:
        IomodelError: a size is zero or negative, ``heads`` is not divisible by
            ``kv_heads``, the dtype is unknown, or a categorical field is misspelt.
    """

    batch: int  # B, sequences in the batch
    heads: int  # H, query heads
    kv_heads: int  # H_kv, key/value heads (GQA group = H / H_kv; 1 = MQA)
    head_dim: int  # HEAD_DIM (d), elements per head
    seqlen_q: int  # query rows per sequence (1..16 for decode)
    seqlen_k: int  # key/value rows per sequence (the KV cache length for decode)
    dtype: str = "bf16"  # element type of Q, K, V, O (canonical name, see DTYPES)
    causal: bool = False  # apply a causal mask
    causal_align: Literal["top-left", "bottom-right"] = "top-left"  # PyTorch is_causal / flash-attn>=2.1
    phase: Literal["prefill", "decode"] = "prefill"  # decode: few query rows against a long KV cache
    backward: bool = False  # pass "fwd+bwd" when True, "fwd" when False
    name: str = ""  # preset or config name, for headers only
    window_left: int | None = None  # sliding window: keys up to this many tokens left of the aligned diagonal (None: unbounded)
    window_right: int | None = None  # ... and right of it (None: unbounded; a causal mask caps it at 0)
    page_size: int | None = None  # decode: tokens per KV-cache page (paged cache, (num_blocks, page_size, H_kv, d)); None: dense

    def __post_init__(self) -> None:
        for attr, flag in (
            ("batch", "--batch"),
            ("heads", "--heads"),
            ("kv_heads", "--kv-heads"),
            ("head_dim", "--head-dim"),
            ("seqlen_q", "--seqlen-q"),
            ("seqlen_k", "--seqlen-k"),
        ):
            object.__setattr__(self, attr, _positive_int(getattr(self, attr), attr, flag))
        if self.heads % self.kv_heads:
            raise IomodelError(
                f"heads ({self.heads}) must be divisible by kv_heads ({self.kv_heads}): "
                "pick --kv-heads among the divisors of --heads"
            )
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))
        if self.causal_align not in CAUSAL_ALIGNS:
            raise IomodelError(
                f"causal_align {self.causal_align!r} is unknown: use 'top-left' or 'bottom-right'"
            )
        if self.phase not in PHASES:
            raise IomodelError(f"phase {self.phase!r} is unknown: use 'prefill' or 'decode'")
        if self.phase == "decode" and self.backward:
            raise IomodelError("decode has no backward pass: use --pass fwd with --phase decode")
        object.__setattr__(self, "window_left", window_side(self.window_left, "window_left", "--window"))
        object.__setattr__(self, "window_right", window_side(self.window_right, "window_right", "--window L,R"))
        if self.page_size is not None:
            from iomodel.schedule.tiles import page_size_refusal  # schedule reads spec: imported at call time

            reason = page_size_refusal(self.page_size, "set --page-size to a power of two from 16 to 1024")
            if reason is not None:
                raise IomodelError(reason)
            if self.phase != "decode":
                raise IomodelError("a paged KV cache (--page-size) is modelled for decode only: add --phase decode")
            if self.window is not None:
                raise IomodelError("the paged decode has no sliding window: drop --window or --page-size")

    @property
    def max_pages(self) -> int | None:
        """Pages per sequence of a paged cache: ``ceil(seqlen_k / page_size)`` (a tight block table), or None."""
        return None if self.page_size is None else cdiv(self.seqlen_k, self.page_size)

    # ----- derived quantities (element counts and bytes) -----
    @property
    def group(self) -> int:
        """GQA group size H / H_kv (1 for multi-head attention, H for MQA)."""
        return self.heads // self.kv_heads

    @property
    def width(self) -> int:
        """Element width s of Q, K, V, O in bytes."""
        return DTYPES[self.dtype]

    @property
    def passes(self) -> str:
        """``"fwd"`` or ``"fwd+bwd"``."""
        return "fwd+bwd" if self.backward else "fwd"

    @property
    def causal_offset(self) -> int:
        """Diagonal offset of the causal mask (see :func:`causal_offset`)."""
        return causal_offset(self.causal_align, self.seqlen_q, self.seqlen_k)

    @property
    def window(self) -> tuple[int | None, int | None] | None:
        """The sliding window that masks keys beyond the causal mask (:func:`effective_window`), or None."""
        return effective_window(self.causal, self.window_left, self.window_right)

    @property
    def band(self) -> tuple[int, int] | None:
        """The finite window band ``(WL, WR)`` in tokens (:func:`window_band`), or None."""
        return window_band(self.causal, self.window_left, self.window_right, self.seqlen_q, self.seqlen_k)

    @property
    def seen_keys(self) -> tuple[int, int]:
        """The key rows ``[lo, hi)`` some query row reads (rows; ``lo == hi`` where none does): a window band's
        ``[max(0, off − WL), min(N_k, N_q + off + WR))``, a causal mask's ``[0, min(N_k, N_q + off))``, else all N_k
        (off the causal offset): the integer value of the compulsory K/V rows' ``keys``
        (:func:`iomodel.traffic.bounds.compulsory_rows`, the model's formula)."""
        n_q, n_k, off = self.seqlen_q, self.seqlen_k, self.causal_offset
        band = self.band
        if band is not None:
            wl, wr = band
            lo, hi = min(max(off - wl, 0), n_k), min(max(n_q + off + wr, 0), n_k)
            return (lo, hi) if lo < hi else (hi, hi)
        return (0, min(n_k, max(0, n_q + off))) if self.causal else (0, n_k)

    @property
    def seen_key_rows(self) -> int:
        """How many key rows some query row reads (rows): the length of :attr:`seen_keys`. A top-left causal chunk of
        1,024 queries over 16,384 keys reads 1,024 of them."""
        lo, hi = self.seen_keys
        return hi - lo

    @property
    def has_empty_rows(self) -> bool:
        """Whether some query row sees no key (causal bottom-right with N_q > N_k, or a window band)."""
        band = self.band
        if band is not None:
            return bool(band_has_empty_rows(band, self.seqlen_q, self.seqlen_k, self.causal_offset))
        return self.causal and self.causal_align == "bottom-right" and self.seqlen_q > self.seqlen_k

    def with_(self, **changes: Any) -> "LayerSpec":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields and ``pass``; the window fields only when a side is bounded and
        ``page_size`` only when paged (so a layer without them reads as it did before they existed)."""
        d = asdict(self)
        d["pass"] = self.passes
        if self.window_left is None and self.window_right is None:
            del d["window_left"], d["window_right"]
        if self.page_size is None:
            del d["page_size"]
        return d


#: The :class:`Tiling` fields that hold the backward kernels' tiles (``kernels/backward.py``).
BACKWARD_TILE_FIELDS = ("bwd_block_m", "bwd_block_n", "dq_block_m", "dq_block_n", "preprocess_block_m")

#: The dK/dV kernel's loop orders over the (query tile, group head) pairs of a GQA program
#: (``Tiling.bwd_dkdv_order``; ``kernels/backward.py``): ``heads-outer``, each head of the slice in
#: turn with its query tiles from lo_j up (the kernel before 2026-12-04, and every MHA program), or
#: ``tiles-descending``, the query tiles from the last down with the slice's heads inner at each tile
#: (FlashAttention-2's reverse ``m_block`` loop, ``flash_bwd_kernel.h``), so every program of a KV
#: head reaches the same (tile, head) at the same step whatever its first tile lo_j.
DKDV_ORDERS = ("heads-outer", "tiles-descending")


@dataclass(frozen=True)
class Tiling:
    """Tile sizes of a tiled (FlashAttention-style) kernel.

    BLOCK_M: query rows per program; BLOCK_N: key rows per inner-loop step; both powers of
    two. ``num_stages``: software-pipelining depth of the K/V loads (SRAM holds this many
    K and V tiles). ``num_splits``: split-KV partitions for decode (1 = no split).
    ``heads_per_program``: how many query heads of one GQA group one program packs into its
    BLOCK_M rows: decode (the kernel's choice; K/V are then read H / (H_kv * heads_per_program)
    times), or a prefill forward (BLOCK_M / P positions of each of P heads, FlashAttention-3's
    PackGQA; the bundled pointer prefill runs it from a given ``KernelConfig``;
    :func:`iomodel.schedule.tiles.prefill_packing_refusal`).
    ``writes_lse``: the prefill forward's programs write their rows' fp32 LSE (True, every bundled
    kernel: the backward reads it) or O alone (False: an inference kernel that keeps no LSE, e.g.
    FlashInfer's prefill with ``return_lse=False``; forward only).
    ``fused_combine``: decode with num_splits > 1 only: True (the kernel since issue 14) the
    last split program of each program group merges the partials in the same launch; False
    a separate combine kernel merges them (the two-launch design the receipts measured before
    it, whose records carry no such key).

    The backward kernels' tiles (``kernels/backward.py``, pass ``fwd+bwd`` only; this is
    their one home: ``kernels.heuristics.BackwardConfig`` takes its defaults from here and
    converts back with ``BackwardConfig.tiling``): ``bwd_block_m``/``bwd_block_n`` the
    K/V-stationary dK/dV kernel's query rows per step and key rows per program (its
    BLOCK_M/BLOCK_N), ``dq_block_m``/``dq_block_n`` the Q-stationary dQ kernel's query rows
    per program and key rows per step, ``preprocess_block_m`` rows per D = rowsum(dO ∘ O)
    program (it sets the grid only: every row is read once whatever the tile),
    ``bwd_group_splits`` S the dK/dV kernel's slices of each GQA group (grid axis 2; S > 1 adds
    fp32 partial dK/dV and their reduction kernel, ``docs/traffic-contract.md``; any whole
    number 1..G, not a power of two necessarily). ``bwd_dkdv_order`` the dK/dV GQA program's
    loop order over its (query tile, head) pairs, one of :data:`DKDV_ORDERS` (``heads-outer``
    for records made before the order existed and for MHA, whose programs loop one head).
    ``dq_tile_order`` the dQ kernel's query-tile order within a head: ``forward`` (program i takes
    tile i: the shortest causal tile first; records made before the order existed) or ``reverse``
    (tile T_r − 1 − i first: the longest first, as the forward's ``tile_order`` reverse).
    ``bwd_dkdv_kernel`` the dK/dV launch, ``triton`` or ``gluon`` (``kernels/gluon_backward.py``): the same bytes
    requested; the L2 model weighs the Gluon launch's fp32 partials apart
    (:data:`iomodel.cache.params.GLUON_DKDV_PARTIAL_WRITE_SHARE`).

    Raises:
        IomodelError: a size is not a positive power of two, or num_splits or bwd_group_splits < 1;
            an unknown bwd_dkdv_order, dq_tile_order or bwd_dkdv_kernel.
    """

    block_m: int = 128  # BLOCK_M, query rows per program
    block_n: int = 64  # BLOCK_N, key rows per inner step
    num_stages: int = 2  # K/V tiles in flight per program (pipelining depth)
    num_splits: int = 1  # decode split-KV partitions
    heads_per_program: int = 1  # query heads of one GQA group packed into one program's rows (decode; a prefill schedule)
    fused_combine: bool = True  # decode, num_splits > 1: partials merged in the decode launch (else a combine kernel)
    bwd_block_m: int = 32  # backward dK/dV kernel: query rows streamed per step
    bwd_block_n: int = 128  # backward dK/dV kernel: key rows one program owns
    dq_block_m: int = 128  # backward dQ kernel: query rows one program owns
    dq_block_n: int = 32  # backward dQ kernel: key rows streamed per step
    preprocess_block_m: int = 128  # backward D = rowsum(dO ∘ O): query rows per program
    bwd_group_splits: int = 1  # backward dK/dV kernel: slices S of each GQA group (1 = unsplit)
    bwd_dkdv_order: str = "heads-outer"  # backward dK/dV kernel, GQA: loop order over (query tile, head) pairs
    dq_tile_order: str = "forward"  # backward dQ kernel: query tiles of a head first to last (forward) or reverse
    bwd_dkdv_kernel: str = "triton"  # backward dK/dV launch: Triton's kernels or the Gluon one (sm_90)
    writes_lse: bool = True  # prefill forward: each program writes its rows' LSE (False: O only, an inference kernel)

    def __post_init__(self) -> None:
        for attr, flag in (("block_m", "--block-m"), ("block_n", "--block-n")) + tuple(
                (a, f"Tiling.{a}") for a in BACKWARD_TILE_FIELDS):
            v = _positive_int(getattr(self, attr), attr, flag)
            if not is_power_of_two(v):
                lo = 1 << (v.bit_length() - 1)
                near = f"{lo} or {lo * 2}" if lo <= 2**16 else "a tile such as 64 or 128 rows"  # not 2^62 for 2^63 - 1
                raise IomodelError(f"{attr.upper()} must be a power of two, got {v}: use {near}")
            object.__setattr__(self, attr, v)
        object.__setattr__(self, "num_stages", _positive_int(self.num_stages, "num_stages", "--num-stages"))
        object.__setattr__(self, "num_splits", _positive_int(self.num_splits, "num_splits", "--num-splits"))
        object.__setattr__(self, "bwd_group_splits",
                           _positive_int(self.bwd_group_splits, "bwd_group_splits", "Tiling.bwd_group_splits"))
        object.__setattr__(
            self, "heads_per_program", _positive_int(self.heads_per_program, "heads_per_program", "--heads-per-program")
        )
        if self.bwd_dkdv_order not in DKDV_ORDERS:
            raise IomodelError(f"bwd_dkdv_order must be one of {', '.join(DKDV_ORDERS)}, got {self.bwd_dkdv_order!r}: "
                               "pick one of them")
        from iomodel.schedule.launch import TILE_ORDERS  # here: the schedule package imports this module

        if self.dq_tile_order not in TILE_ORDERS:
            raise IomodelError(f"dq_tile_order must be {' or '.join(TILE_ORDERS)}, got {self.dq_tile_order!r}: "
                               "pick one of them")
        from iomodel.schedule.capabilities import DKDV_KERNELS

        if self.bwd_dkdv_kernel not in DKDV_KERNELS:
            raise IomodelError(f"bwd_dkdv_kernel must be one of {', '.join(DKDV_KERNELS)}, got "
                               f"{self.bwd_dkdv_kernel!r}: pick one of them")
        if self.fused_combine not in (True, False):
            raise IomodelError(f"fused_combine must be True or False, got {self.fused_combine!r}: pass a bool")
        if self.writes_lse not in (True, False):
            raise IomodelError(f"writes_lse must be True or False, got {self.writes_lse!r}: pass a bool")

    def sram_bytes(self, spec: LayerSpec) -> int:
        """Shared memory one forward program needs, in bytes: the schedule's formula
        :func:`iomodel.schedule.tiles.program_sram_bytes` (Q tile plus ``num_stages`` K and V
        tiles) for these tiles, ``spec``'s element width and the HEAD_DIM the kernel computes with,
        :func:`iomodel.schedule.tiles.head_dim_padded` (a power of two, at least 16: the kernel's
        tiles are ``HEAD_DIM_PAD`` columns wide in shared memory; HEAD_DIM 80 holds 128 columns)."""
        from iomodel.schedule.tiles import head_dim_padded, program_sram_bytes  # schedule reads spec: at call time

        return program_sram_bytes(self.block_m, self.block_n, self.num_stages, head_dim_padded(spec.head_dim),
                                  spec.width)

    def check_fits(self, spec: LayerSpec, smem_per_block: int, hardware_name: str = "") -> None:
        """Raise if the tiles do not fit ``smem_per_block`` bytes of shared memory.

        Args:
            spec: the layer (HEAD_DIM, padded as the kernel holds it, and element width).
            smem_per_block: shared memory one block may use, bytes (``Hardware.smem_per_block``).
            hardware_name: named in the message.

        Raises:
            IomodelError: naming the bytes needed, the bytes available and what to shrink.
        """
        from iomodel.schedule.tiles import head_dim_padded

        need, pad = self.sram_bytes(spec), head_dim_padded(spec.head_dim)
        if need > smem_per_block:
            raise IomodelError(
                f"tiles BLOCK_M={self.block_m}, BLOCK_N={self.block_n}, num_stages={self.num_stages} need "
                f"{need} B of shared memory for HEAD_DIM={spec.head_dim} {spec.dtype}"
                + (f" (padded to {pad} columns, as the kernel holds it)" if pad != spec.head_dim else "")
                + ", but "
                f"{hardware_name or 'the hardware'} offers {smem_per_block} B per block: "
                "lower --block-m, --block-n or --num-stages"
            )


def cdiv(a: int, b: int) -> int:
    """Ceiling division for positive integers (T_r = cdiv(seqlen_q, BLOCK_M))."""
    return -(-a // b)
