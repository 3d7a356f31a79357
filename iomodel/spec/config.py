"""HF-style ``config.json`` files and the bundled presets (``worksheets/presets/*.json``).

:func:`load_config` reads the attention fields of a model's config into an
:class:`AttentionConfig`, whose :meth:`AttentionConfig.layer` gives a :class:`LayerSpec`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.spec.dtypes import canonical_dtype
from iomodel.spec.layer import LayerSpec, _positive_int

#: Folder that holds the bundled real-layer presets (one HF-style config.json per model).
PRESETS_DIR = Path(__file__).resolve().parents[2] / "worksheets" / "presets"


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
