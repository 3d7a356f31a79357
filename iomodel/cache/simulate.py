"""One kernel launch through the L2: waves of accesses in, HBM bytes per tensor out.

:func:`simulate` runs the bundled kernel's waves (:mod:`iomodel.schedule.grid`) through a cold
cache, the set-associative one (:mod:`iomodel.cache.set_assoc`, expected bytes) or the fully
associative LRU (:mod:`iomodel.cache.lru`, exact bytes); :func:`stream_kernel` does the same
for one op of the eager chain. The model's history is in ``docs/l2-calibration.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from iomodel.cache.lru import LRU, new_lru
from iomodel.cache.params import STREAM_SLICES, exact_write_share
from iomodel.cache.set_assoc import SetAssoc
from iomodel.schedule.grid import Access, ReadGroup
from iomodel.errors import IomodelError
from iomodel.spec import LayerSpec


def _rounded(d: dict[str, float]) -> dict[str, int]:
    """Expected bytes per tensor rounded to whole bytes; zero entries dropped."""
    return {k: int(round(v)) for k, v in d.items() if int(round(v))}


@dataclass
class KernelL2:
    """Simulated HBM traffic of one kernel launch, per tensor (bytes).

    Attributes:
        name: the kernel (or eager op) name.
        requested_read: bytes the kernel's loads request (SRAM_fill level), per tensor.
        requested_write: bytes its stores write, per tensor.
        hbm_read: bytes read from HBM (L2 misses), per tensor.
        hbm_write: bytes written to HBM during the kernel (dirty evictions), per tensor.
        dirty_at_end: bytes still dirty in L2 when it ends, per tensor.
        waves: number of waves of W programs.
        note: one sentence on the working set.
        method: how the bytes were computed, a clause (``simulated wave by wave``, ``fast evaluation (the
            simulation's bytes)``, ``touch by touch (N touches)``, ``closed form (N touches not visited)``; set by
            :func:`iomodel.cache.predict.kernel_l2` and :func:`iomodel.cache.stream.fast_kernel_l2`), empty where not
            recorded.
    """

    name: str
    requested_read: dict[str, int] = field(default_factory=dict)
    requested_write: dict[str, int] = field(default_factory=dict)
    hbm_read: dict[str, int] = field(default_factory=dict)
    hbm_write: dict[str, int] = field(default_factory=dict)
    dirty_at_end: dict[str, int] = field(default_factory=dict)
    waves: int = 0
    note: str = ""
    method: str = ""


def _new_cache(capacity: int, write_share: float, ways: int | None, read_capacity: int | None = None) -> LRU | SetAssoc:
    """A cold cache: the fully associative LRU (``ways=None``, one capacity) or the set-associative
    one (read misses judged against ``read_capacity``, default ``capacity``)."""
    return new_lru(capacity, write_share) if ways is None else SetAssoc(capacity, write_share, ways, read_capacity)


def _close(cache: LRU | SetAssoc, out: KernelL2, reads: dict[str, float]) -> KernelL2:
    """Fill ``out`` from a cache at the kernel's end (expected bytes rounded per tensor)."""
    if isinstance(cache, SetAssoc):
        dirty = cache.finish()
        out.hbm_read = _rounded(reads)
        out.hbm_write = _rounded(cache.writeback)
        out.dirty_at_end = _rounded(dirty)
    else:
        out.hbm_read = {k: int(v) for k, v in reads.items()}
        out.hbm_write = dict(cache.writeback)
        out.dirty_at_end = cache.dirty()
    return out


def simulate(name: str, waves: Iterable[Sequence[Access]], capacity: int, write_share: float = 1.0,
             ways: int | None = None, read_capacity: int | None = None, read_weights: dict[str, float] | None = None
             ) -> KernelL2:
    """Run the L2 over the waves of one kernel (cold start) and collect HBM bytes per tensor.

    Args:
        name: kernel name for the record.
        waves: per wave, its accesses in time order (:class:`~iomodel.schedule.grid.Access`, or
            :class:`~iomodel.schedule.grid.ReadGroup` for loads always made together).
        capacity: effective L2 bytes.
        write_share: L2 bytes a written byte occupies per byte of read-allocated data
            (1: the same; ``l2_fraction``: read data is held in both L2 partitions, written
            lines only in their home partition).
        ways: None: fully associative LRU (exact integer bytes; a dirty line leaves only when
            evicted by capacity). An integer A: set-associative LRU with hashed sets, expected
            bytes rounded per tensor (:func:`evict_probability`).
        read_capacity: the set-associative cache's capacity for read misses (bytes; default
            ``capacity``, which stays the capacity of written lines' write-back).
        read_weights: read-equivalent bytes one byte read of a tensor occupies, per tensor (default 1 each; the
            forward's ``{"Q": q_share}``, :attr:`~iomodel.cache.params.L2Params.q_share`); set-associative only.

    Returns:
        :class:`KernelL2` with HBM reads (misses), writes (dirty evictions) and what is
        left dirty at the end (not counted in the kernel's DRAM writes).

    Raises:
        IomodelError: write_share outside (0, 1]; read_weights with the fully associative LRU or outside (0, 1].
    """
    weights = {t: x for t, x in (read_weights or {}).items() if x != 1.0}
    if weights and (ways is None or not all(0 < x <= 1 for x in weights.values())):
        raise IomodelError(f"read weights {weights} need the set-associative L2 and values in (0, 1]")
    cache = _new_cache(capacity, write_share, ways, read_capacity)
    out = KernelL2(name)
    reads: dict[str, float] = {}
    n = 0
    read, write = cache.read, cache.write
    # one stack entry per group needs exact byte sums: written bytes weigh write_share, so only
    # when it is a dyadic fraction (0.5, 1); otherwise member by member, as before
    exact = exact_write_share(write_share) and all(exact_write_share(x) for x in weights.values())
    # the LRU's read_group is its per-member loop in one call (exact integers at any write share)
    # (a cache without read_group, e.g. the tests' slow oracle, is read member by member)
    read_group = getattr(cache, "read_group", None) if exact or isinstance(cache, LRU) else None
    for wave in waves:
        n += 1
        for a in wave:
            if a.__class__ is ReadGroup:
                if weights and any(t in weights for t in a.tensors):  # a weighted read: member by member
                    misses = [read(k, t, b, a.whole, weights.get(t, 1.0)) for t, k, b in zip(a.tensors, a.keys, a.nbytes)]
                elif read_group is None:  # a non-dyadic write_share: member by member
                    misses = [read(k, t, b, a.whole) for t, k, b in zip(a.tensors, a.keys, a.nbytes)]
                else:
                    misses = read_group(a.keys, a.nbytes, a.tensors, a.whole)
                for t, m in zip(a.tensors, misses):
                    reads[t] = reads.get(t, 0) + m
                continue
            tensor, key, nbytes, is_write, whole = a
            if is_write:
                write(key, tensor, nbytes)
            elif tensor in weights:
                reads[tensor] = reads.get(tensor, 0) + read(key, tensor, nbytes, whole, weights[tensor])
            else:
                reads[tensor] = reads.get(tensor, 0) + read(key, tensor, nbytes, whole)
    out.waves = n
    return _close(cache, out, reads)


def stream_kernel(step: str, rows: Sequence[Any], spec: LayerSpec, capacity: int,
                  slices: int = STREAM_SLICES, write_share: float = 1.0,
                  ways: int | None = None, read_capacity: int | None = None) -> tuple[KernelL2, list[str]]:
    """Simulate one op of the eager chain (one kernel) from its model rows.

    The op reads each input and writes its output in ``slices`` interleaved slices. A
    broadcast input (shape without B and H, e.g. the (N_q, N_k) mask while S is (B, H, N_q,
    N_k)) is re-read once per (batch, head): from L2 if the per-(batch, head) stream
    between two of its uses plus the operand fits the capacity, else from HBM.

    Args:
        step: the op (the rows' common ``step``).
        rows: the model's HBM rows of this step (``tensor, shape, read_bytes, write_bytes``).
        spec: the layer.
        capacity: effective L2 bytes.
        slices: interleaved slices (default :data:`STREAM_SLICES`).
        write_share: see :func:`simulate`.
        ways, read_capacity: see :func:`simulate` (ways None: fully associative LRU).

    Returns:
        (:class:`KernelL2`, notes on broadcast re-reads).
    """
    bh = spec.batch * spec.heads
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    broadcast: set[str] = set()
    has_bh = any("B" in r.shape and "H" in r.shape for r in rows)
    for r in rows:
        rb, wb = int(r.read_bytes), int(r.write_bytes)
        if rb:
            reads[r.tensor] = reads.get(r.tensor, 0) + rb
            if has_bh and "B" not in r.shape and bh > 1:
                broadcast.add(r.tensor)
        if wb:
            writes[r.tensor] = writes.get(r.tensor, 0) + wb
    out = KernelL2(step, requested_read=dict(reads), requested_write=dict(writes))
    notes = []
    extra: dict[str, int] = {}
    for t in broadcast:
        per_use = sum(v for k, v in reads.items() if k != t) // bh + sum(writes.values()) // bh
        if per_use + reads[t] > capacity:
            extra[t] = (bh - 1) * reads[t]
            notes.append(f"{t} re-read from HBM for each of the B·H = {bh} (batch, head) pairs in '{step}'")
    cache = _new_cache(capacity, write_share, ways, read_capacity)
    got: dict[str, float] = {}
    n = max(1, slices)
    for k in range(n):
        for t, v in reads.items():
            part = v // n + (1 if k < v % n else 0)
            miss = cache.read(("r", t, k), t, part, False)
            got[t] = got.get(t, 0) + miss
        for t, v in writes.items():
            part = v // n + (1 if k < v % n else 0)
            cache.write(("w", t, k), t, part)
    for t, v in extra.items():
        got[t] = got.get(t, 0) + v
    _close(cache, out, got)
    out.waves = n
    return out, notes
