"""``iomodel presets``: list the bundled real-layer presets and hardware presets."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from iomodel.spec.hardware import HARDWARE
from iomodel.spec import list_presets, load_preset


def presets() -> None:
    """List bundled layer presets (HF-style config.json under worksheets/presets) and hardware presets."""
    console = Console()
    t = Table(title="Layer presets (worksheets/presets/*.json)")
    for col in ("name", "H", "H_kv", "HEAD_DIM", "dtype", "layers", "max positions"):
        t.add_column(col, overflow="fold")  # never "…" in a number: wrap it
    for name in list_presets():
        c = load_preset(name)
        t.add_row(name, str(c.heads), str(c.kv_heads), str(c.head_dim), c.dtype, str(c.num_layers),
                  str(c.max_position_embeddings))
    console.print(t)
    h = Table(title="Hardware presets")
    for col in ("name", "HBM TB/s", "L2 MiB", "smem/SM KiB", "SMs", "bf16 dense TFLOP/s", "source"):
        h.add_column(col, overflow="fold")
    for hw in HARDWARE.values():
        h.add_row(hw.name, f"{hw.hbm_bandwidth / 1e12:.4g}", f"{hw.l2_bytes / 2**20:.0f}",
                  f"{hw.smem_per_sm / 1024:.0f}", str(hw.num_sms),
                  f"{hw.peak_flops.get('bf16', 0) / 1e12:.1f}", hw.source)
    console.print(h)


def register(app: typer.Typer) -> None:
    app.command("presets")(presets)
