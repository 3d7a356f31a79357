"""Other kernels' forward launches as :class:`~iomodel.schedule.launch.Schedule` s, read from the
launch that Nsight Compute records (issue 12, item 5).

:func:`peer_launch` turns one profiled kernel (its demangled name, grid, block and occupancy
metrics, :class:`iomodel.measure.records.KernelRecord`) into the schedule the L2 model simulates,
for the two prefill forward kernels PyTorch's SDPA runs on an H200:

* **FlashAttention-2** (SDPA FLASH), ``pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<
  kHeadDim, kBlockM, kBlockN, kNWarps, ...>>``: the tiles and warps are the template arguments;
  grid ``(ceil(N_q / kBlockM), B, H)``, query tiles fastest, one program per tile; each program
  scans its key blocks from the last one down (``flash_fwd_kernel.h``,
  ``compute_attn_1rowblock``: ``n_block = n_block_max - 1`` then ``--n_block``; Dao 2023,
  FlashAttention-2, Algorithm 1 runs the same loop in either order). Q, K and V tiles are held
  once in shared memory (``num_stages`` 1).
* **cuDNN** (SDPA cuDNN), ``cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_..._knob_K_
  {m}x{n}x{d}_...``: a persistent kernel, ``grid`` = the SM count (× programs per SM). Inferred,
  not published: ``{m}`` query rows per consumer warpgroup, block ``(384, 1, 1)`` = one producer
  and two consumer warpgroups, so BLOCK_M = 2·m (128) and BLOCK_N = ``{n}``; a ``strided``
  persistent loop over the tiles in tiles-fastest order with ascending key blocks. The blocked
  alternative is rejected by the calibration receipt (docs/l2-calibration.md, "Peers"). The strided loop stands in
  for an unpublished dispatch in the model's waves: on long causal layers cuDNN's reads fit programs that take the
  tiles as they finish and drift apart, which the model labels ``not a prediction``
  (:func:`iomodel.cache.predict.forward_drift_quality`; docs/l2-calibration.md, "Programs that drift apart").

Programs per SM: the launch's measured occupancy limit (``launch__occupancy_limit_*``, the least)
where recorded, else grid / SMs for the persistent kernel. Pure Python; no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from iomodel.schedule.launch import Schedule

if TYPE_CHECKING:
    from iomodel.spec import LayerSpec, Tiling
    from iomodel.spec.hardware import Hardware

_FA2 = re.compile(r"flash_fwd_kernel<Flash_fwd_kernel_traits<\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),")
_CUDNN = re.compile(r"sdpa_sm90_flash_fprop_\w*?_knob_\d+_(\d+)x(\d+)x(\d+)_")
#: Threads of one warpgroup (Hopper ``wgmma``: 4 warps of 32).
WARPGROUP_THREADS = 128


@dataclass(frozen=True)
class PeerLaunch:
    """One peer kernel's forward launch: its schedule (tiles, warps, orders, persistent loop), the
    programs per SM the L2 model uses, and where each came from (one sentence)."""

    kernel: str  # "flash-attention-2" or "cudnn"
    schedule: Schedule
    programs_per_sm: int
    source: str

    def tiling(self, base: "Tiling | None" = None) -> "Tiling":
        """The schedule's forward tiles as a :class:`~iomodel.spec.Tiling`."""
        return self.schedule.tiling(base)


def _dims(text: str) -> tuple[int, ...]:
    """``"(32, 1, 16)"`` -> (32, 1, 16); () when it is not a printed dim3."""
    nums = re.findall(r"\d+", text or "")
    return tuple(int(n) for n in nums) if len(nums) == 3 else ()


def peer_launch(name: str, grid: str, block: str, metrics: dict[str, Any], spec: "LayerSpec",
                hardware: "Hardware", occupancy: int | None = None) -> PeerLaunch | None:
    """The schedule of a profiled FlashAttention-2 or cuDNN forward kernel, or None.

    Args:
        name: the demangled kernel name Nsight Compute printed.
        grid, block: the launch's grid and block as printed, e.g. ``"(32, 1, 16)"``.
        metrics: its metrics (``launch__grid_size``, ``launch__block_size`` read where the
            printed grid or block is missing).
        spec: the layer it ran (a prefill forward; HEAD_DIM and N_q are checked against the launch).
        hardware: the device (its SM count, for a persistent grid).
        occupancy: programs per SM the launch's occupancy limits allow
            (:meth:`iomodel.measure.records.KernelRecord.programs_per_sm`), None if not recorded.

    Returns:
        A :class:`PeerLaunch`, or None where the name is neither kernel or the launch disagrees
        with the layer (another HEAD_DIM, a grid that is not ``(ceil(N_q / BLOCK_M), B, H)``, a
        backward or decode layer): the caller then has no model for it.
    """
    if spec.backward or spec.phase != "prefill":
        return None
    g, b = _dims(grid), _dims(block)
    occ = occupancy
    m = _FA2.search(name)
    if m:
        d, bm, bn, warps = (int(x) for x in m.groups())
        t_r = -(-spec.seqlen_q // bm)
        if d != spec.head_dim or (g and g != (t_r, spec.batch, spec.heads)) or warps not in (1, 2, 4, 8, 16):
            return None
        sched = Schedule(block_m=bm, block_n=bn, num_stages=1, num_warps=warps, programs_per_sm=occ or 1,
                         key_order="descending")
        src = (f"FlashAttention-2 flash_fwd_kernel: BLOCK_M {bm}, BLOCK_N {bn}, {warps} warps from its template "
               f"arguments, grid {grid} = (T_r, B, H), query tiles fastest, key blocks from the last down; "
               + (f"{occ} programs per SM (measured occupancy limit)" if occ else "1 program per SM (no occupancy recorded)"))
        return PeerLaunch("flash-attention-2", sched, occ or 1, src)
    m = _CUDNN.search(name)
    if m:
        rows, bn, d = (int(x) for x in m.groups())
        threads = b[0] if b else int(metrics.get("launch__block_size") or 0)
        consumers = threads // WARPGROUP_THREADS - 1
        programs = g[0] * g[1] * g[2] if g else int(metrics.get("launch__grid_size") or 0)
        if d != spec.head_dim or consumers < 1 or programs < 1 or programs % hardware.num_sms:
            return None
        bm = rows * consumers
        pps = programs // hardware.num_sms
        if bm & (bm - 1) or bn & (bn - 1):
            return None
        sched = Schedule(block_m=bm, block_n=bn, num_stages=2, num_warps=4, programs_per_sm=pps, persistent="strided")
        src = (f"cuDNN persistent forward: {programs} programs ({pps} per SM) of {threads} threads = {consumers} "
               f"consumer warpgroups of {rows} query rows, so BLOCK_M {bm}, BLOCK_N {bn} (kernel name); inferred: "
               "a strided loop over the tiles, tiles fastest, ascending key blocks (docs/l2-calibration.md, \"Peers\")")
        return PeerLaunch("cudnn", sched, pps, src)
    return None


__all__ = ["PeerLaunch", "WARPGROUP_THREADS", "peer_launch"]
