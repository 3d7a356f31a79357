"""Registers per thread of the bundled forward kernel's launches, compiled for sm_90, and the programs per SM they allow.

Occupancy is the smallest of four limits: shared memory, warps, blocks and registers
(:func:`iomodel.schedule.grid.estimate_programs_per_sm` takes the first three from the layer). A Triton kernel's
registers per thread are known only once ``ptxas`` has compiled it, which needs no GPU: ``python -m
kernels.compile_check --registers-table iomodel/data/registers-sm90.json`` compiles the launches the worksheet picks
for the forward prefill kernel on sm_90 (``kernels.compile_check.table_launches``: the autotune candidates of
``kernels/heuristics.py`` at the common HEAD_DIMs in their own tile order, a causal one in both, the first with and
without a sliding window, MHA and GQA) through Triton's bundled ``ptxas`` and writes :data:`REGISTERS_FILE`, a
receipt with the command, the Triton and ``ptxas`` versions and the date. This module reads it (the one home of those
numbers); nothing here compiles.

What a compile stands for (a compile is specialised by Triton on its integer arguments): N_q = N_k = 4,096 (divisible
by 16), the GQA group G as Triton specialises it (1; divisible by 16; other, compiled at 4), the query-tile order
(``REVERSE``) and a sliding window (``WINDOW``) as given, the tiles-fastest grid. The registers ncu measured for the
same kernels on the H100 and H200 receipts varied by up to 10 with the sequence length and the kernel's revision; the
programs per SM they allow agree with the table's on the receipts checked (``tests/test_registers.py``).

The register file: 65,536 32-bit registers per SM, allocated per warp in units of 256 registers (CUDA C Programming
Guide, "Compute Capabilities", table "Technical Specifications per Compute Capability": "Maximum number of 32-bit
registers per SM" 64K for 8.0-9.0; the CUDA Occupancy Calculator's "Register allocation unit size" 256, "Register
allocation granularity" warp). Nsight Compute's ``launch__occupancy_limit_registers`` equals
:func:`programs_by_registers` on every one of the 696 kernels with registers in the committed receipts
(``tests/test_registers.py``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from iomodel.errors import IomodelError

#: The compiled registers table (package data, ``iomodel/data``): a receipt of ``python -m kernels.compile_check
#: --registers-table``.
REGISTERS_FILE = "registers-sm90.json"
#: The compute capability the table was compiled for (sm_90: H100, H200); other devices get no registers.
REGISTERS_CAPABILITY = (9, 0)
#: 32-bit registers of one SM, compute capability 8.0-9.0 (CUDA C Programming Guide, "Technical Specifications per
#: Compute Capability": 64K).
REGISTERS_PER_SM = 65_536
#: Registers are allocated to a warp in units of this many (CUDA Occupancy Calculator: "Register allocation unit
#: size" 256, granularity warp): a thread's count rounds up to a multiple of 8.
REGISTER_ALLOCATION_UNIT = 256
#: Threads of one warp.
WARP_THREADS = 32
#: The kernels the table covers, by prefill path (``kernels.flash_attention``): the TMA and pointer prefills. The
#: Gluon prefill fixes its own programs per SM (``kernels.heuristics.TileChoice.programs_per_sm``).
FORWARD_KERNELS = {"prefill-tma": "_attn_fwd_tma", "prefill": "_attn_fwd"}


def programs_by_registers(registers: int, num_warps: int) -> int:
    """Programs (thread blocks) one SM's register file holds: ``65,536 // (⌈32·r / 256⌉·256 · num_warps)``.

    Args:
        registers: registers per thread (1 to 255, ``ptxas -v``); num_warps: warps per program.

    Returns:
        programs per SM by registers alone (0 when one program does not fit; Triton never compiles one so).

    Raises:
        IomodelError: registers or num_warps below 1.

    Source: the module doc (CUDA C Programming Guide; CUDA Occupancy Calculator).

    >>> programs_by_registers(118, 8)  # the HEAD_DIM 64 TMA prefill: 3,840 registers a warp
    2
    >>> programs_by_registers(168, 12)  # the Gluon prefill's setmaxnreg split: the whole file
    1
    """
    if registers < 1 or num_warps < 1:
        raise IomodelError(f"registers per thread and warps must be positive, got {registers} and {num_warps}")
    unit = REGISTER_ALLOCATION_UNIT
    per_warp = -(-registers * WARP_THREADS // unit) * unit
    return REGISTERS_PER_SM // (per_warp * num_warps)


#: The GQA group classes Triton compiles apart (it specialises an integer argument equal to 1 or divisible by 16),
#: each stood for by this G in the table's compiles.
GROUP_CLASSES = (1, 4, 16)
#: The sequence length of the table's compiles (N_q = N_k; Triton specialises lengths divisible by 16).
TABLE_SEQLEN = 4096


def group_class(group: int) -> int:
    """The GQA group G as Triton specialises an integer argument: 1, 16 (any multiple of 16) or 4 (any other):
    the member of :data:`GROUP_CLASSES` whose compile stands for G."""
    return GROUP_CLASSES[0] if group == 1 else GROUP_CLASSES[2] if group % 16 == 0 else GROUP_CLASSES[1]


def forward_key(path: str, head_dim: int, dtype: str, causal: bool, group: int, block_m: int, block_n: int,
                num_warps: int, num_stages: int, warp_specialize: bool, reverse: bool, window: bool) -> str:
    """The table's key of one forward launch (one string: the table is JSON). ``group`` is G (its class is kept)."""
    return (f"{FORWARD_KERNELS.get(path, path)} d{head_dim} {dtype} causal={int(causal)} G={group_class(group)} "
            f"{block_m}x{block_n} w{num_warps} s{num_stages} ws={int(warp_specialize)} reverse={int(reverse)} "
            f"window={int(window)}")


def _table_refusal(table: Any) -> str | None:
    """What is wrong with a registers table read from JSON (one clause), or None."""
    if not isinstance(table, dict):
        return "it is not a JSON object"
    env = table.get("environment")
    if not isinstance(env, dict) or env.get("arch") != "sm_90a":
        return "its environment.arch is not sm_90a"
    if not isinstance(table.get("created"), str) or not isinstance(env.get("triton"), str):
        return "it has no created date or Triton version"
    regs = table.get("registers")
    if not isinstance(regs, dict) or not regs:
        return "its registers table is missing or empty"
    bad = [k for k, v in regs.items() if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 255]
    if bad:
        return (f"its count at {bad[0]!r} is {regs[bad[0]]!r}, not a whole number of registers a thread from 1 "
                "to 255")
    return None


@lru_cache(maxsize=1)
def registers_table() -> dict[str, Any]:
    """The receipt :data:`REGISTERS_FILE`: ``{"command", "created", "environment", "registers": {key: int}}``.

    Raises:
        IomodelError: the file is missing, not JSON, or not an sm_90a table of counts from 1 to 255 (a broken
            install: reinstall iomodel, or regenerate the table).
    """
    where = f"the compiled registers table iomodel/data/{REGISTERS_FILE}"
    fix = (f"reinstall iomodel, or regenerate it (about 15 minutes) with python -m kernels.compile_check "
           f"--registers-table iomodel/data/{REGISTERS_FILE}")
    try:
        table = json.loads(resources.files("iomodel").joinpath("data", REGISTERS_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise IomodelError(f"{where} cannot be read ({exc}): {fix}") from None
    why = _table_refusal(table)
    if why is not None:
        raise IomodelError(f"{where} is broken ({why}): {fix}")
    return table


def compiled_registers(compute_capability: tuple[int, int], key: str) -> int | None:
    """Registers per thread of the launch ``key`` (:func:`forward_key`) compiled for ``compute_capability``, or None
    where the table has none (another device; a launch the worksheet does not pick, e.g. tiles given by hand).

    Raises:
        IomodelError: from :func:`registers_table` (a broken table), on sm_90 only.
    """
    if tuple(compute_capability) != REGISTERS_CAPABILITY:
        return None
    return registers_table()["registers"].get(key)


def source_sentence(registers: int, stand_in: str | None = None) -> str:
    """Where a register-aware programs-per-SM count comes from (one clause, for ``programs_per_sm_source``);
    ``stand_in``: which compile stands for the launch where the launch itself was not compiled (its other tile
    order, the tiles-fastest grid)."""
    t = registers_table()
    return (f"from shared memory, warps and {registers} registers a thread (the launch compiled for sm_90 by "
            f"{t['environment']['triton']}'s ptxas, iomodel/data/{REGISTERS_FILE}, {t['created'][:10]}"
            + (f"; {stand_in}" if stand_in else "") + ")")
