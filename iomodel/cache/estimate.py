"""The worksheet's L2-aware DRAM estimate of the tiled prefill forward kernel, with its roofline.

:func:`estimate_tiled` calls :func:`iomodel.cache.predict.predict_tiled` the way
:func:`iomodel.reconcile.compare.reconcile_shape` does without a measured occupancy; the
worksheet (:mod:`iomodel.report.worksheet`) picks the launch (num_warps, query-tile order)
and renders the result.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iomodel.cache.params import L2Params
from iomodel.cache.predict import predict_tiled
from iomodel.errors import IomodelError
from iomodel.schedule.grid import estimate_programs_per_sm
from iomodel.spec import LayerSpec, Tiling
from iomodel.spec.hardware import Hardware

#: Longest seqlen for which the worksheet runs the L2 simulation (about 0.5 s at 2^18 tokens).
L2_ESTIMATE_MAX_SEQLEN = 2**18
#: Where the estimate's bytes come from (worksheet text and JSON).
L2_ESTIMATE_SOURCE = "iomodel/cache/predict.py"


def not_estimated(spec: LayerSpec) -> str | None:
    """Why :func:`estimate_tiled` does not cover ``spec`` (one clause), or None when it does.

    It covers the prefill forward pass with seqlen_q and seqlen_k up to
    :data:`L2_ESTIMATE_MAX_SEQLEN` tokens.
    """
    if spec.backward:
        return "it models the forward kernel only"
    if spec.phase != "prefill":
        return "it models the prefill kernel here (decode: see `iomodel reconcile`)"
    if max(spec.seqlen_q, spec.seqlen_k) > L2_ESTIMATE_MAX_SEQLEN:
        return f"seqlen above {L2_ESTIMATE_MAX_SEQLEN:,} (its simulation grows with the square of the length)"
    return None


@dataclass(frozen=True)
class L2Estimate:
    """The L2-aware DRAM bytes of the tiled prefill forward kernel and their roofline.

    Attributes:
        read_bytes, write_bytes: DRAM bytes predicted by
            :func:`iomodel.cache.predict.predict_tiled` (bytes).
        flops: FLOPs of the tiled kernel (the model's count).
        roofline_time_s: ``max(flops / peak, bytes / HBM bandwidth)`` in seconds.
        intensity: FLOPs per DRAM byte.
        bound: ``memory`` or ``compute``.
        programs_per_sm: programs per SM the simulation assumes.
        programs_per_sm_source: where that number comes from.
        num_warps, tile_order: the launch's warps per program and query-tile order.
        config_source: where num_warps and tile_order come from.
        assumptions: the L2 model's own assumptions, one sentence each.
    """

    read_bytes: int
    write_bytes: int
    flops: int
    roofline_time_s: float
    intensity: float
    bound: str
    programs_per_sm: int
    programs_per_sm_source: str
    num_warps: int
    tile_order: str
    config_source: str
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``algorithms.tiled.l2_aware``): bytes, seconds and the assumptions."""
        return {
            "source": f"estimate from {L2_ESTIMATE_SOURCE} predict_tiled (not a measurement)",
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "roofline_time_s": self.roofline_time_s, "intensity": self.intensity, "bound": self.bound,
            "programs_per_sm": self.programs_per_sm, "programs_per_sm_source": self.programs_per_sm_source,
            "num_warps": self.num_warps, "tile_order": self.tile_order, "config_source": self.config_source,
            "assumptions": list(self.assumptions),
        }


def estimate_tiled(spec: LayerSpec, tiling: Tiling, hardware: Hardware, *, flops: int, peak_flops: float,
                   num_warps: int, tile_order: str, config_source: str) -> L2Estimate:
    """The L2-aware DRAM estimate of the tiled kernel for a prefill forward layer.

    Programs per SM from :func:`iomodel.schedule.grid.estimate_programs_per_sm` (shared
    memory of the tiles and warps; registers ignored), default
    :class:`~iomodel.cache.params.L2Params` otherwise (effective L2 fraction 0.5, 24 ways,
    caches flushed before the kernel). Roofline time ``max(flops / peak_flops, DRAM bytes /
    hardware.hbm_bandwidth)`` (seconds).

    Args:
        spec: the layer (prefill forward, seqlen up to :data:`L2_ESTIMATE_MAX_SEQLEN`).
        tiling: the tiles (BLOCK_M, BLOCK_N, num_stages).
        hardware: L2 bytes, SMs, shared memory per SM (bytes), HBM bandwidth (B/s).
        flops: FLOPs of the tiled kernel; peak_flops: its peak FLOP/s.
        num_warps, tile_order: the launch (warps per program; ``forward`` or ``reverse``).
        config_source: one sentence on where num_warps and tile_order come from.

    Raises:
        IomodelError: a layer :func:`not_estimated` refuses; from
            :class:`~iomodel.cache.params.L2Params` (hardware without L2 or SMs).
    """
    why = not_estimated(spec)
    if why is not None:
        raise IomodelError(f"no L2-aware estimate for this layer: {why}")
    pps = estimate_programs_per_sm(tiling.sram_bytes(spec), num_warps, hardware.smem_per_sm)
    l2 = predict_tiled(spec, tiling, L2Params(hardware.l2_bytes, hardware.num_sms, pps), tile_order)
    moved = l2.hbm_read_bytes + l2.hbm_write_bytes
    t_c, t_m = flops / peak_flops, moved / hardware.hbm_bandwidth
    return L2Estimate(
        read_bytes=l2.hbm_read_bytes, write_bytes=l2.hbm_write_bytes, flops=flops,
        roofline_time_s=max(t_c, t_m), intensity=flops / moved if moved else math.inf,
        bound="memory" if t_m >= t_c else "compute", programs_per_sm=pps,
        programs_per_sm_source="estimated from shared memory per program and warps; registers ignored",
        num_warps=num_warps, tile_order=tile_order, config_source=config_source, assumptions=tuple(l2.assumptions),
    )
