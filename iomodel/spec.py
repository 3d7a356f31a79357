"""Plain-data specifications of an attention layer and of its tiling.

Vocabulary (``../shared/DESIGN.md``): B batch; H query heads; H_kv key/value heads
(GQA group = H / H_kv); seqlen_q, seqlen_k; HEAD_DIM (d); element width s in bytes;
BLOCK_M query rows per program; BLOCK_N key rows per inner step.

Nothing here knows about sympy or torch: a :class:`LayerSpec` is a frozen dataclass
that validates itself and raises :class:`~iomodel.errors.IomodelError` with one
sentence saying what to change.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from iomodel.errors import IomodelError

#: Element width in bytes of each supported dtype (IEEE 754 / OCP FP8 formats).
DTYPES: dict[str, int] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

#: Spellings accepted on input (HF ``torch_dtype`` strings, torch names) -> canonical name.
DTYPE_ALIASES: dict[str, str] = {
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float8_e4m3fn": "fp8_e4m3",
    "fp8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "fp8_e5m2": "fp8_e5m2",
}

CAUSAL_ALIGNS = ("top-left", "bottom-right")
PHASES = ("prefill", "decode")
PASSES = ("fwd", "fwd+bwd")

#: Width of the LSE (log-sum-exp per query row), which FlashAttention keeps in fp32.
LSE_WIDTH = 4
#: Width of fp32 accumulators and fp32 intermediates (MATH backend scores, dQ accumulator).
FP32_WIDTH = 4


def canonical_dtype(name: str) -> str:
    """Return the canonical dtype name (``fp16``, ``bf16``, ``fp32``, ``fp8_e4m3``, ``fp8_e5m2``).

    Args:
        name: a dtype spelling such as ``"bfloat16"``, ``"torch.float16"`` or ``"fp32"``.

    Raises:
        IomodelError: the dtype is not one iomodel models.
    """
    key = str(name).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise IomodelError(
            f"unsupported dtype {name!r}: use one of {', '.join(DTYPES)}"
        )
    return DTYPE_ALIASES[key]


def dtype_width(name: str) -> int:
    """Element width in bytes of a dtype (``fp16`` -> 2).

    Raises:
        IomodelError: the dtype is not supported.
    """
    return DTYPES[canonical_dtype(name)]


def _positive_int(value: Any, what: str, flag: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            if float(value) != int(value):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError):
            raise IomodelError(f"{what} must be a positive integer, got {value!r}: set {flag}") from None
    if value <= 0:
        raise IomodelError(f"{what} must be a positive integer, got {value}: set {flag} to 1 or more")
    return value


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
        """Diagonal offset of the causal mask: query row m sees keys n <= m + offset.

        0 for top-left (PyTorch ``is_causal``), ``seqlen_k - seqlen_q`` for bottom-right
        (flash-attn >= 2.1; the last query row sees the whole KV cache).
        """
        return 0 if self.causal_align == "top-left" else self.seqlen_k - self.seqlen_q

    def with_(self, **changes: Any) -> "LayerSpec":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = self.passes
        return d


#: Shared memory per SM is shared by Q, K and V tiles; see :meth:`Tiling.sram_bytes`.
@dataclass(frozen=True)
class Tiling:
    """Tile sizes of a tiled (FlashAttention-style) kernel.

    BLOCK_M: query rows per program; BLOCK_N: key rows per inner-loop step; both powers of
    two. ``num_stages``: software-pipelining depth of the K/V loads (SRAM holds this many
    K and V tiles). ``num_splits``: split-KV partitions for decode (1 = no split).
    ``heads_per_program``: decode only, how many query heads of one GQA group one program
    packs into its BLOCK_M rows (K/V are then read H / (H_kv * heads_per_program) times).

    Raises:
        IomodelError: a size is not a positive power of two, or num_splits < 1.
    """

    block_m: int = 128  # BLOCK_M, query rows per program
    block_n: int = 64  # BLOCK_N, key rows per inner step
    num_stages: int = 2  # K/V tiles in flight per program (pipelining depth)
    num_splits: int = 1  # decode split-KV partitions
    heads_per_program: int = 1  # decode: query heads of one GQA group packed into one program's rows

    def __post_init__(self) -> None:
        for attr, flag in (("block_m", "--block-m"), ("block_n", "--block-n")):
            v = _positive_int(getattr(self, attr), attr, flag)
            if not is_power_of_two(v):
                lo = 1 << (v.bit_length() - 1)
                raise IomodelError(
                    f"{attr.upper()} must be a power of two, got {v}: use {lo} or {lo * 2}"
                )
            object.__setattr__(self, attr, v)
        object.__setattr__(self, "num_stages", _positive_int(self.num_stages, "num_stages", "--num-stages"))
        object.__setattr__(self, "num_splits", _positive_int(self.num_splits, "num_splits", "--num-splits"))
        object.__setattr__(
            self, "heads_per_program", _positive_int(self.heads_per_program, "heads_per_program", "--heads-per-program")
        )

    def sram_bytes(self, spec: LayerSpec) -> int:
        """Shared memory one forward program needs, in bytes.

        Q tile ``BLOCK_M x d`` plus ``num_stages`` K tiles and V tiles of ``BLOCK_N x d``,
        all of element width s (Triton tutorial 06 / FlashAttention-2 Section 3.1 layout;
        the score tile and accumulators live in registers).
        """
        d, s = spec.head_dim, spec.width
        return (self.block_m * d + 2 * self.num_stages * self.block_n * d) * s

    def check_fits(self, spec: LayerSpec, smem_per_block: int, hardware_name: str = "") -> None:
        """Raise if the tiles do not fit ``smem_per_block`` bytes of shared memory.

        Raises:
            IomodelError: naming the bytes needed, the bytes available and what to shrink.
        """
        need = self.sram_bytes(spec)
        if need > smem_per_block:
            raise IomodelError(
                f"tiles BLOCK_M={self.block_m}, BLOCK_N={self.block_n}, num_stages={self.num_stages} need "
                f"{need} B of shared memory for HEAD_DIM={spec.head_dim} {spec.dtype}, but "
                f"{hardware_name or 'the hardware'} offers {smem_per_block} B per block: "
                "lower --block-m, --block-n or --num-stages"
            )


# ----------------------------------------------------------------------------------
# Presets: HF-style config.json files under worksheets/presets/
# ----------------------------------------------------------------------------------

#: Folder that holds the bundled real-layer presets (one HF-style config.json per model).
PRESETS_DIR = Path(__file__).resolve().parent.parent / "worksheets" / "presets"


def list_presets() -> list[str]:
    """Names of the bundled presets (file stems under ``worksheets/presets``)."""
    return sorted(p.stem for p in PRESETS_DIR.glob("*.json"))


def preset_path(name: str) -> Path:
    """Path of a bundled preset's config.json.

    Raises:
        IomodelError: no preset of that name.
    """
    path = PRESETS_DIR / f"{name}.json"
    if not path.is_file():
        raise IomodelError(
            f"unknown preset {name!r}: use one of {', '.join(list_presets())}, or --config PATH"
        )
    return path


@dataclass(frozen=True)
class AttentionConfig:
    """The attention-relevant fields of a HF-style ``config.json``.

    Units: counts of heads and elements; dtype canonical name.
    """

    name: str
    heads: int  # num_attention_heads (n_head for GPT-2)
    kv_heads: int  # num_key_value_heads (defaults to heads: multi-head attention)
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    dtype: str  # torch_dtype
    num_layers: int | None = None  # num_hidden_layers (n_layer), for per-model totals
    max_position_embeddings: int | None = None
    source: str = ""  # path the config was read from
    extra: dict[str, Any] = field(default_factory=dict)

    def layer(
        self,
        *,
        batch: int = 1,
        seqlen_q: int,
        seqlen_k: int | None = None,
        dtype: str | None = None,
        causal: bool = True,
        causal_align: str = "top-left",
        phase: str = "prefill",
        backward: bool = False,
    ) -> LayerSpec:
        """The :class:`LayerSpec` of one attention call of this model."""
        return LayerSpec(
            batch=batch,
            heads=self.heads,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            seqlen_q=seqlen_q,
            seqlen_k=seqlen_q if seqlen_k is None else seqlen_k,
            dtype=dtype or self.dtype,
            causal=causal,
            causal_align=causal_align,  # type: ignore[arg-type]
            phase=phase,  # type: ignore[arg-type]
            backward=backward,
            name=self.name,
        )


def _first(cfg: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if cfg.get(k) is not None:
            return cfg[k]
    return None


def load_config(path: str | Path, dtype: str | None = None) -> AttentionConfig:
    """Read the attention fields of a HF-style ``config.json``.

    Reads ``num_attention_heads`` (or GPT-2's ``n_head``), ``num_key_value_heads``
    (default: the query heads), ``head_dim`` (else ``hidden_size`` / heads, or GPT-2's
    ``n_embd`` / heads) and ``torch_dtype`` (or ``dtype``). ``dtype`` overrides the file's.

    Raises:
        IomodelError: the file is missing or not JSON, a field is missing or not a
            positive integer, the hidden size is not divisible by the heads, the dtype
            is missing or unsupported, or the model uses sliding-window attention
            (not modelled; iomodel never substitutes full attention silently).
    """
    path = Path(path)
    if not path.is_file():
        raise IomodelError(f"config file {str(path)!r} does not exist: pass --config a HF-style config.json")
    try:
        cfg = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IomodelError(f"config file {str(path)!r} is not valid JSON ({exc}): fix the file") from None
    if not isinstance(cfg, dict):
        raise IomodelError(f"config file {str(path)!r} must hold a JSON object: fix the file")
    name = path.stem if path.name != "config.json" else path.parent.name
    heads = _first(cfg, "num_attention_heads", "n_head")
    if heads is None:
        raise IomodelError(f"{path}: no 'num_attention_heads' (or 'n_head') field: add it")
    heads = _positive_int(heads, f"{path}: num_attention_heads", "'num_attention_heads' in the file")
    kv = _first(cfg, "num_key_value_heads", "n_kv_head")
    kv_heads = heads if kv is None else _positive_int(kv, f"{path}: num_key_value_heads", "'num_key_value_heads'")
    head_dim = _first(cfg, "head_dim")
    if head_dim is None:
        hidden = _first(cfg, "hidden_size", "n_embd", "d_model")
        if hidden is None:
            raise IomodelError(f"{path}: neither 'head_dim' nor 'hidden_size' (or 'n_embd') is given: add one")
        hidden = _positive_int(hidden, f"{path}: hidden_size", "'hidden_size' in the file")
        if hidden % heads:
            raise IomodelError(
                f"{path}: hidden_size {hidden} is not divisible by num_attention_heads {heads}: give 'head_dim'"
            )
        head_dim = hidden // heads
    head_dim = _positive_int(head_dim, f"{path}: head_dim", "'head_dim' in the file")
    file_dtype = _first(cfg, "torch_dtype", "dtype")
    if dtype is None and file_dtype is None:
        raise IomodelError(f"{path}: no 'torch_dtype' field: add it or pass --dtype")
    sliding = cfg.get("sliding_window")
    if sliding and cfg.get("use_sliding_window", True):
        raise IomodelError(
            f"{path}: sliding-window attention (window {sliding}) is not modelled: "
            "set 'sliding_window' to null or 'use_sliding_window' to false to model full attention"
        )
    if heads % kv_heads:
        raise IomodelError(
            f"{path}: num_attention_heads ({heads}) is not divisible by num_key_value_heads ({kv_heads}): fix the file"
        )
    return AttentionConfig(
        name=name,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        dtype=canonical_dtype(dtype or file_dtype),
        num_layers=_first(cfg, "num_hidden_layers", "n_layer"),
        max_position_embeddings=_first(cfg, "max_position_embeddings", "n_positions"),
        source=str(path),
    )


def load_preset(name: str, dtype: str | None = None) -> AttentionConfig:
    """Load a bundled preset by name (see :func:`list_presets`).

    Raises:
        IomodelError: unknown preset name (the message lists the known ones).
    """
    cfg = load_config(preset_path(name), dtype=dtype)
    return replace(cfg, name=name)


def cdiv(a: int, b: int) -> int:
    """Ceiling division for positive integers (T_r = cdiv(seqlen_q, BLOCK_M))."""
    return -(-a // b)


__all__ = [
    "AttentionConfig",
    "CAUSAL_ALIGNS",
    "DTYPES",
    "FP32_WIDTH",
    "LSE_WIDTH",
    "LayerSpec",
    "PASSES",
    "PHASES",
    "PRESETS_DIR",
    "Tiling",
    "canonical_dtype",
    "cdiv",
    "dtype_width",
    "is_power_of_two",
    "list_presets",
    "load_config",
    "load_preset",
]
