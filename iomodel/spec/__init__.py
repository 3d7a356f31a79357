"""What is modelled, as plain data: the layer, its tiling, the dtype table, the hardware.

``layer.py`` (:class:`LayerSpec`, :class:`Tiling`), ``dtypes.py`` (the one dtype table),
``config.py`` (HF-style ``config.json`` and the bundled presets), ``hardware.py``
(:class:`Hardware` presets with their datasheet sources). Nothing here imports sympy or torch.
"""

from iomodel.spec.config import (
    PRESETS_DIR,
    AttentionConfig,
    list_presets,
    load_config,
    load_preset,
    preset_path,
)
from iomodel.spec.dtypes import (
    DTYPE_ALIASES,
    DTYPES,
    FP32_WIDTH,
    INT32_WIDTH,
    LSE_WIDTH,
    TORCH_NAMES,
    canonical_dtype,
    dtype_name,
    dtype_width,
    torch_dtype,
)
from iomodel.spec.layer import CAUSAL_ALIGNS, PASSES, PHASES, LayerSpec, Tiling, cdiv, is_power_of_two

__all__ = [
    "AttentionConfig",
    "CAUSAL_ALIGNS",
    "DTYPES",
    "DTYPE_ALIASES",
    "FP32_WIDTH",
    "INT32_WIDTH",
    "LSE_WIDTH",
    "LayerSpec",
    "PASSES",
    "PHASES",
    "PRESETS_DIR",
    "TORCH_NAMES",
    "Tiling",
    "canonical_dtype",
    "cdiv",
    "dtype_name",
    "dtype_width",
    "is_power_of_two",
    "list_presets",
    "load_config",
    "load_preset",
    "preset_path",
    "torch_dtype",
]
