"""The Nsight Compute metrics iomodel reads: one table of names, what each measures, units.

Each metric name is written once, in :data:`METRICS`; everything else is derived from it:
:data:`DEFAULT_METRICS` (what ``ncu --metrics`` collects unless a sweep file lists its own),
:data:`QUANTITY_METRICS` (which metrics measure a quantity, first present wins),
:data:`OCCUPANCY_METRICS` and :data:`DRAM_PASS_METRICS`. Names and meanings: Nsight Compute
Kernel Profiling Guide, "Metrics Reference" and "Memory Chart" (Hopper);
:mod:`iomodel.measure.records` says which level each quantity stands for.

Nothing here imports anything beyond the standard library.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: The form of an Nsight Compute metric name (``unit__counter.rollup``: ``dram__bytes_read.sum``,
#: ``launch__occupancy_limit_registers``), checked where a user types metric names (``iomodel validate --metrics``).
METRIC_NAME = re.compile(r"[a-z0-9_]+__[A-Za-z0-9_.]+")

#: Bytes per L2 sector (Nsight Compute Kernel Profiling Guide: "a sector is an aligned
#: 32 byte-chunk of memory in a cache line or device memory").
SECTOR_BYTES = 32

#: Quantity of the occupancy limits (blocks per SM); their minimum is the number of programs
#: one SM runs at once (:meth:`iomodel.measure.records.KernelRecord.programs_per_sm`).
OCCUPANCY = "programs_per_sm"

#: The DRAM byte counters (HBM level): the single-pass DRAM run collects only these.
DRAM_READ = "dram__bytes_read.sum"
DRAM_WRITE = "dram__bytes_write.sum"


class Metric(NamedTuple):
    """One Nsight Compute metric.

    Attributes:
        name: the metric as ncu names it.
        measures: the quantity it measures (a key of :data:`QUANTITY_METRICS`, in bytes or
            seconds after unit conversion), :data:`OCCUPANCY`, or "" (kept for diagnosis).
        default: collected when a sweep file lists no ``[ncu] metrics``.
    """

    name: str
    measures: str
    default: bool = True


#: Every metric iomodel names, the defaults first in ``ncu --metrics`` order. Within one
#: quantity the first metric listed that a record holds wins (bytes before sectors).
#: ``launch__*`` metrics need no replay; the others cost a few replay passes per kernel.
METRICS: tuple[Metric, ...] = (
    Metric("gpu__time_duration.sum", "duration_s"),
    Metric(DRAM_READ, "dram_read_bytes"),
    Metric(DRAM_WRITE, "dram_write_bytes"),
    # every byte looked up in L2 from any source (SMs, the other partition, copy engines)
    Metric("lts__t_bytes.sum", "l2_total_bytes"),
    # L2 lookups whose source unit is TEX (the SMs' L1/TEX: loads, stores, cp.async, TMA)
    Metric("lts__t_sectors_srcunit_tex_op_read.sum", "l2_read_bytes"),
    Metric("lts__t_sectors_srcunit_tex_op_write.sum", "l2_write_bytes"),
    Metric("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum", ""),
    Metric("lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", ""),
    # read / write lookups from any source, and those arriving from the other L2 partition
    Metric("lts__t_sectors_op_read.sum", "l2_all_read_bytes"),
    Metric("lts__t_sectors_op_write.sum", "l2_all_write_bytes"),
    Metric("lts__t_sectors_srcunit_ltcfabric.sum", "l2_fabric_bytes"),
    Metric("launch__grid_size", ""),
    Metric("launch__registers_per_thread", ""),
    Metric("launch__occupancy_limit_blocks", OCCUPANCY),
    Metric("launch__occupancy_limit_registers", OCCUPANCY),
    Metric("launch__occupancy_limit_shared_mem", OCCUPANCY),
    Metric("launch__occupancy_limit_warps", OCCUPANCY),
    # fallbacks of the quantities above (other ncu versions or sweep files name these)
    Metric("dram__sectors_read.sum", "dram_read_bytes", False),
    Metric("dram__sectors_write.sum", "dram_write_bytes", False),
    Metric("lts__t_bytes_srcunit_tex_op_read.sum", "l2_read_bytes", False),
    Metric("lts__t_bytes_srcunit_tex_op_write.sum", "l2_write_bytes", False),
    Metric("lts__t_sectors.sum", "l2_total_bytes", False),
    # SM side of the crossbar: what each SM's L1TEX/TMA unit received from L2 and sent to it
    # (one copy per requesting SM, so equal to the kernel's requests even where the L2 merges
    # simultaneous lookups of the same sector); sweep files opt in
    Metric("l1tex__m_xbar2l1tex_read_bytes.sum", "sm_read_bytes", False),
    Metric("l1tex__m_xbar2l1tex_read_sectors.sum", "sm_read_bytes", False),
    Metric("l1tex__m_l1tex2xbar_write_bytes.sum", "sm_write_bytes", False),
    Metric("l1tex__m_l1tex2xbar_write_sectors.sum", "sm_write_bytes", False),
)

#: Metrics collected by default, in ``ncu --metrics`` order.
DEFAULT_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.default)

#: Quantity -> the metrics that measure it, first present wins. Units are converted by
#: :data:`UNIT_SCALE` (bytes, sectors, seconds).
QUANTITY_METRICS: dict[str, tuple[str, ...]] = {}
for _m in METRICS:
    if _m.measures and _m.measures != OCCUPANCY:
        QUANTITY_METRICS[_m.measures] = QUANTITY_METRICS.get(_m.measures, ()) + (_m.name,)
del _m

#: Occupancy limits Nsight Compute reports per launch (blocks per SM).
OCCUPANCY_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.measures == OCCUPANCY)

#: Metrics of the single-pass DRAM run (see :attr:`iomodel.measure.sweep.Sweep.dram_pass`).
DRAM_PASS_METRICS: tuple[str, ...] = (DRAM_READ, DRAM_WRITE)

#: Unit string (as Nsight Compute prints it) -> factor to bytes or seconds. Byte prefixes
#: are decimal in Nsight Compute's output (Kbyte = 1000 bytes).
#: The same units grouped by what they measure (``byte``, ``sector``, ``time``, ``count``): a metric of one kind
#: carried in another kind's unit is read at a wrong scale (iomodel.measure.records refuses it).
UNITS_BY_KIND: dict[str, dict[str, float]] = {
    "byte": {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12},
    "sector": {"sector": SECTOR_BYTES, "ksector": SECTOR_BYTES * 1e3, "msector": SECTOR_BYTES * 1e6,
               "gsector": SECTOR_BYTES * 1e9},
    # Nsight Compute 2025.x with --print-units base prints times as ns/us/ms/s (receipts/ncu-h200-2026-11-29.json)
    "time": {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3,
             "s": 1},
    # counts (no conversion): grid size, occupancy limits, registers; shared memory per block
    # (launch__shared_mem_per_block_*: receipts/ncu-h200-peers-calib1-2026-12-01.json)
    "count": {"": 1, "block": 1, "register/thread": 1, "warp": 1, "thread": 1, "cycle": 1, "byte/block": 1},
}
UNIT_SCALE: dict[str, float] = {u: f for units in UNITS_BY_KIND.values() for u, f in units.items()}
#: Unit names of each kind of :data:`UNITS_BY_KIND`.
UNIT_KINDS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in UNITS_BY_KIND.items()}


__all__ = [
    "DEFAULT_METRICS",
    "DRAM_PASS_METRICS",
    "DRAM_READ",
    "DRAM_WRITE",
    "METRICS",
    "Metric",
    "OCCUPANCY",
    "OCCUPANCY_METRICS",
    "QUANTITY_METRICS",
    "SECTOR_BYTES",
    "UNIT_KINDS",
    "UNIT_SCALE",
    "UNITS_BY_KIND",
]
