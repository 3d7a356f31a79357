"""L2-aware HBM prediction: which of the requested bytes actually cross HBM, and why.

The model's ``HBM`` rows are the *no-reuse bound*: every byte a kernel requests crosses
HBM once per request (for the tiled kernel, K and V are read T_r = ⌈N_q/BLOCK_M⌉ times
per query head). The *compulsory floor* reads what the worksheet's compulsory rows read
(each input element that can affect an output, once) and writes every output once. What Nsight Compute's DRAM counters see lies between them (or under the floor), and
this module predicts it from named causes:

``l2_capacity``
    Re-reads of K/V are served by L2 when the K/V working set of the programs running at
    once fits. Programs run in grid order, ``program_id(0)`` (the query tile) fastest, so
    the W = num_SMs × programs_per_SM resident programs are W consecutive programs: they
    span ⌈W / T_r⌉ + 1 query heads, i.e. few KV heads (fewer still with GQA, whose G query
    heads of a group are consecutive). When their K/V no longer fits the effective L2,
    the next wave of programs of the same head re-fetches it from HBM (the contribution is
    the re-fetched bytes; 0 when everything fits).
``masked_reads``
    Under a causal mask the floor counts only the compulsory reads of the worksheet
    (:func:`iomodel.traffic.bounds.compulsory_rows`: the keys some query row sees, the query
    rows that see some key). The tiled kernel loads whole tiles (keys up to the end of each
    query tile's last BLOCK_N block, and query tiles whose rows see no key) and the eager
    chain reads all of Q, K and V: those extra input bytes, never negative.
``dirty_at_end``
    L2 is write-back: output lines still dirty in L2 when a kernel ends are not in its
    ``dram__bytes_write`` (Nsight Compute then flushes them outside the measurement).
``intermediates``
    Tensors written by one kernel and read by the next (the eager chain's S, P, mask and
    casts; the split-KV partial O and LSE) cross HBM twice; under the profiler's cache
    flush (``ncu --cache-control all``, its default) the reading kernel always starts cold.
``broadcast_rereads``
    A broadcast operand (the eager chain's (N_q, N_k) causal mask, read once per (batch,
    head)) is re-read from HBM when the per-(batch, head) stream between two of its uses
    does not fit in L2; the model's rows count it once.

How: a small, deterministic simulation per kernel launch. Programs are grouped in waves
of W in grid order; each wave touches the union of its programs' tiles (programs of a
wave stream the same K/V blocks at about the same time, so one fetch serves them). The
KV heads of a wave are streamed side by side in chunks of ``KV_CHUNK_ROWS`` key rows (round
2: one whole item per KV head kept the last-streamed head resident, which the H200 receipt
receipts/ncu-h200-2026-11-29.json contradicts: bottom-right q1024-k16384/k32768 re-read the
head shared by two waves, 79/152 MiB measured, 80/152 predicted now, 72/136 before). An
LRU list of the *effective* capacity ``l2_fraction × L2 bytes`` decides what is still
resident; read data counts in full (shared data is held in both L2 partitions), a written
line counts ``l2_fraction`` (it lives only in its home partition: ``write_once``).
Evicting a dirty item writes it to HBM. What is dirty at the end is not counted.

Replacement (session 2, ``l2_ways``): the L2 is set-associative with hashed set indices, so
a line's fate depends on the lines that map to *its* set, not on a global LRU order. With
LRU inside each set and the other lines spread uniformly over S sets, the lines touched
since a line's last use that fall in its set are Poisson with mean A·D/C (A ways, D the
distinct bytes touched since, C the capacity), and the line is gone once A of them have
come: ``P(evicted) = P(Poisson(A·D/C) ≥ A)`` (the standard random-set-mapping estimate of
set-associative misses from stack distances: A. J. Smith, "A comparative study of set
associative memory mapping algorithms and their use for cache and main memory", IEEE TSE
1978; M. D. Hill and A. J. Smith, "Evaluating associativity in CPU caches", IEEE TC 1989).
Expected bytes follow: a re-read misses ``bytes × P(evicted)``, a dirty line is written back
during the kernel with ``P(evicted)`` at the kernel's end. A → ∞ is the fully associative
LRU of rounds 1-3 (``ways=None``). A = 24 (:data:`DEFAULT_L2_WAYS`) is *fitted*, not a
datasheet figure (NVIDIA does not publish the H100/H200 L2 associativity): on the 124
single-pass kernel measurements of receipts/ncu-h200-calib-dram-*, ncu-h200-holdout2-dp-* and
ncu-h200-holdout3-* (126 tiled shapes less the two decode shapes whose DRAM writes exceed all
their L2 writes, i.e. profiler residue), the DRAM writes outside ±10 % or 1 MiB were 13 for
A = ∞, 4 for 8, 3 for 16, 4 for 24, 32 and 64, 5 for 48; outside ±10 % alone 57, 61, 58, 50,
50, 53 and 53. 16 and 24 tie within one shape on the first count; 24 was taken for the
second (50 against 58). Reads stay within on 125 of 126 for 16 to 48. Found after the fit: the first
shape of every ncu process carried 1.5-3.3 MiB of write-back that was not its own (the
sacrificial first kernel of :func:`iomodel.measure.ncu.run_child` now absorbs it); without
those 10 shapes the counts are 10 outside ±10 % or 1 MiB for A = ∞, 3 for 8, 1 for 16, 24, 32
and 64, 2 for 48 (outside ±10 % alone 52, 55, 52, 45, 45, 48, 48), so 24 stands. Round 2's ``dirty_survival`` (dirty lines surviving
exp(−X/C)) was fitted to Nsight Compute's kernel-replay residue and is gone: the replay
restore leaves dirty lines that the measured pass writes back (a decode kernel wrote 2.3 MiB
with 20 metrics, 0.05 MiB with 3: receipts/raw/replay-probe-*), so DRAM bytes now come from
a single-pass run (``dram_pass``). D counts the item's own bytes too: a line of an item read
in order is touched again after all the item's other lines.

``l2_fraction`` (default 0.5, set in round 1 before any measurement) stands for the two L2 partitions of A100/H100-class GPUs, each of which caches
data for the SMs of its own GPCs (NVIDIA A100 Tensor Core GPU Architecture whitepaper, "L2
cache"; H100 whitepaper, "H100 L2 cache"). Streaming kernels of the eager chain are
simulated as 64 interleaved read/write slices.

Bytes are exact integers with the fully associative LRU, and expected values rounded to
whole bytes per tensor with the set-associative default; the assumptions are listed in
:attr:`L2Prediction.assumptions`.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from iomodel.errors import IomodelError
from iomodel.format import human_bytes
from iomodel.schedule.tiles import decode_split_len
from iomodel.spec import LSE_WIDTH, LayerSpec, Tiling, cdiv

#: Effective fraction of L2 that holds data shared by all SMs (two partitions; see module doc).
DEFAULT_L2_FRACTION = 0.5
#: Effective L2 associativity of the set-associative replacement (fitted, see module doc;
#: None in :class:`L2Params` is the fully associative LRU).
DEFAULT_L2_WAYS = 24
#: Largest associativity accepted: the estimate's step from 0 to 1 spans about C/sqrt(A) bytes
#: around D = C, 1.6 % of C at 4096 ways; for the fully associative limit pass None.
MAX_L2_WAYS = 4096
#: Interleaved slices a streaming kernel of the eager chain is split into.
STREAM_SLICES = 64
#: Upper bound on programs one Hopper SM runs at once (CUDA C Programming Guide, compute
#: capability 9.0: 32 resident blocks, 64 resident warps per SM).
MAX_BLOCKS_PER_SM = 32
MAX_WARPS_PER_SM = 64

CAUSES: dict[str, str] = {
    "l2_capacity": "K/V re-fetched: the resident programs' working set exceeds L2",
    "masked_reads": "inputs no output depends on under the causal mask, loaded anyway (whole tiles, or the eager chain's full reads)",
    "dirty_at_end": "output lines still dirty in L2 when the kernel ends (expected, set-associative L2)",
    "intermediates": "intermediates written by one kernel and read cold by the next (profiler cache flush)",
    "broadcast_rereads": "broadcast mask re-read per (batch, head) from HBM",
}


@dataclass(frozen=True)
class L2Params:
    """What the L2-aware prediction needs to know about the device and the launch.

    Attributes:
        l2_bytes: L2 capacity in bytes (``Hardware.l2_bytes``).
        num_sms: streaming multiprocessors.
        programs_per_sm: programs (CTAs) of the kernel one SM runs at once: Nsight
            Compute's occupancy limit when measured, else :func:`estimate_programs_per_sm`.
        l2_fraction: effective fraction of ``l2_bytes`` (default 0.5, see module doc).
        flush_between_kernels: the profiler flushes caches before each kernel (ncu
            ``--cache-control all``); False: L2 content carries from kernel to kernel.
        write_once: written lines occupy one copy of L2 (their home partition) while read
            data shared by all SMs occupies ``1 / l2_fraction`` copies (default True; False:
            both occupy the effective capacity alike, the round-1 model).
        ways: effective associativity A of the set-associative replacement (default
            :data:`DEFAULT_L2_WAYS`, fitted; see module doc); None: fully associative LRU
            (exact integer bytes, the model of rounds 1-3).

    Raises:
        IomodelError: l2_fraction outside (0, 1], a non-positive size or count, ways < 1.
    """

    l2_bytes: int
    num_sms: int
    programs_per_sm: int = 1
    l2_fraction: float = DEFAULT_L2_FRACTION
    flush_between_kernels: bool = True
    write_once: bool = True
    ways: int | None = DEFAULT_L2_WAYS

    def __post_init__(self) -> None:
        if not 0 < self.l2_fraction <= 1:
            raise IomodelError(f"l2_fraction must be in (0, 1], got {self.l2_fraction}: pass e.g. 0.5")
        if self.programs_per_sm < 1 or self.num_sms < 1 or self.l2_bytes < 1:
            raise IomodelError("l2_bytes, num_sms and programs_per_sm must be positive: check the hardware and occupancy")
        if self.ways is not None and (not isinstance(self.ways, int) or not 1 <= self.ways <= MAX_L2_WAYS):
            raise IomodelError(f"L2 ways must be an integer from 1 to {MAX_L2_WAYS} or None (fully associative), "
                               f"got {self.ways!r}")

    @property
    def capacity(self) -> int:
        """Effective L2 capacity in bytes (``l2_fraction × l2_bytes``)."""
        return int(self.l2_bytes * self.l2_fraction)

    @property
    def write_share(self) -> float:
        """Read-equivalent bytes one written byte occupies (``l2_fraction`` when write_once, else 1)."""
        return self.l2_fraction if self.write_once else 1.0

    @property
    def resident_programs(self) -> int:
        """W: programs running at once (``num_sms × programs_per_sm``)."""
        return self.num_sms * self.programs_per_sm


def estimate_programs_per_sm(smem_per_program: int, num_warps: int, smem_per_sm: int) -> int:
    """Programs one SM can hold, from shared memory and warps only (registers unknown).

    ``min(smem_per_sm // smem_per_program, 64 // num_warps, 32)``, at least 1 (CUDA C
    Programming Guide, compute capability 9.0 limits). Registers can lower it further;
    prefer Nsight Compute's measured occupancy limits when a record has them.
    """
    by_smem = smem_per_sm // max(1, smem_per_program)
    return max(1, min(by_smem, MAX_WARPS_PER_SM // max(1, num_warps), MAX_BLOCKS_PER_SM))


# ----------------------------------------------------------------------------------
# The cache: an LRU list of items (bytes, dirty)
# ----------------------------------------------------------------------------------


class _LRU:
    """LRU over items; an item is resident with some bytes, clean or dirty.

    ``whole`` items (a KV head's K/V) are evicted entirely; stream items may be evicted in
    part (their oldest bytes first).
    """

    def __init__(self, capacity: int, read_weight: int = 1, write_weight: int = 1) -> None:
        self.capacity = capacity  # in weight units: a read byte occupies read_weight, a written byte write_weight
        self.read_weight = read_weight
        self.write_weight = write_weight
        self.items: OrderedDict[Any, list] = OrderedDict()  # key -> [bytes, dirty, whole, tensor, weight]
        self.size = 0
        self.writeback: dict[str, int] = {}

    def _evict(self, protect: Any = None) -> None:
        while self.size > self.capacity and self.items:
            key, item = next(iter(self.items.items()))
            if key == protect and len(self.items) == 1:
                break
            if key == protect:  # never evict the item being inserted; take the next one
                self.items.move_to_end(key)
                continue
            nbytes, dirty, whole, tensor, wt = item
            excess = self.size - self.capacity
            if whole or nbytes * wt <= excess:
                del self.items[key]
                gone = nbytes
            else:
                gone = -(-excess // wt)
                item[0] -= gone
            self.size -= gone * wt
            if dirty:
                self.writeback[tensor] = self.writeback.get(tensor, 0) + gone

    def read(self, key: Any, tensor: str, nbytes: int, whole: bool) -> int:
        """Touch ``nbytes`` of an item; returns the bytes that miss (read from HBM)."""
        item = self.items.get(key)
        if item is None:
            self.items[key] = [nbytes, False, whole, tensor, self.read_weight]
            self.size += nbytes * self.read_weight
            miss = nbytes
        else:
            self.items.move_to_end(key)
            miss = max(0, nbytes - item[0])
            if miss:
                item[0] = nbytes
                self.size += miss * item[4]
        self._evict(protect=key)
        return miss

    def write(self, key: Any, tensor: str, nbytes: int) -> None:
        """Write ``nbytes`` (full sectors: no read for ownership); the item becomes dirty."""
        item = self.items.get(key)
        if item is None:
            self.items[key] = [nbytes, True, False, tensor, self.write_weight]
            self.size += nbytes * self.write_weight
            grow = nbytes
        else:
            self.items.move_to_end(key)
            grow = max(0, nbytes - item[0])
            item[0] += grow
            item[1] = True
            self.size += grow * item[4]
        self._evict(protect=key)

    def dirty(self) -> dict[str, int]:
        """Bytes still dirty, per tensor."""
        out: dict[str, int] = {}
        for nbytes, dirty, _, tensor, _ in self.items.values():
            if dirty:
                out[tensor] = out.get(tensor, 0) + nbytes
        return out


def _new_lru(capacity: int, write_share: float) -> _LRU:
    """An LRU of ``capacity`` read-equivalent bytes where a written byte occupies ``write_share``."""
    if not 0 < write_share <= 1:
        raise IomodelError(f"write_share must be in (0, 1], got {write_share}")
    unit = 1000
    return _LRU(capacity * unit, unit, max(1, round(unit * write_share)))


#: log(k) for k = 0 .. MAX_L2_WAYS (entry 0 unused): the Poisson terms of :func:`evict_probability`.
_LOG_INT = [0.0] + [math.log(k) for k in range(1, MAX_L2_WAYS + 1)]


def evict_probability(distance: float, capacity: float, ways: int | None) -> float:
    """Probability that a line is gone after ``distance`` bytes of other lines were touched.

    Set-associative LRU with hashed set indices (module doc): ``P(Poisson(A·D/C) ≥ A)`` for A =
    ``ways``, D = ``distance`` and C = ``capacity`` (read-equivalent bytes); ``ways=None`` is the
    fully associative LRU, 1 when D > C else 0.

    Args:
        distance: distinct bytes touched since the line's last use (stack distance, bytes).
        capacity: effective L2 bytes.
        ways: associativity A, or None.

    Returns:
        a probability in [0, 1].

    Source: A. J. Smith, IEEE TSE 1978; M. D. Hill and A. J. Smith, IEEE TC 1989 (random set
    mapping of a stack-distance trace).
    """
    if distance <= 0:
        return 0.0
    if ways is None:
        return 1.0 if distance > capacity else 0.0
    lam = ways * distance / capacity
    # far tails (beyond 12 standard deviations): 0 or 1 to double precision
    if lam >= ways + 12.0 * math.sqrt(lam) + 12.0:
        return 1.0
    if lam <= ways - 12.0 * math.sqrt(ways) - 12.0:
        return 0.0
    # P(N < A) = sum_{k < A} e^-lam lam^k / k!, summed in log space (lam may exceed 700)
    log_lam = math.log(lam)
    logs = [-lam]
    for k in range(1, ways):
        logs.append(logs[-1] + log_lam - _LOG_INT[k])
    top = max(logs)
    below = math.exp(top) * sum(math.exp(x - top) for x in logs)
    return min(1.0, max(0.0, 1.0 - below))


#: Points of the midpoint rule over an item's bytes at the kernel's end (:meth:`_SetAssoc.finish`).
_ITEM_POINTS = 8


class _SetAssoc:
    """Expected bytes of a set-associative LRU, from stack distances (see :func:`evict_probability`).

    Items carry bytes, a weight per byte (read data 1, written lines ``write_share``) and the
    fraction of their bytes still dirty. Stack distances come from a Fenwick tree over access
    times holding each item's weighted bytes at its last use. Same interface as :class:`_LRU`;
    reads return expected (float) misses.

    Approximations: an item has one recency, so a touch of part of it (a later wave needing
    fewer key rows of a K/V chunk) refreshes all of its bytes; the ``whole`` flag of
    :class:`Access` has no effect here (every byte of an item shares one eviction probability).
    """

    def __init__(self, capacity: int, write_share: float, ways: int) -> None:
        if not 0 < write_share <= 1:
            raise IomodelError(f"write_share must be in (0, 1], got {write_share}")
        self.capacity = float(capacity)
        self.write_share = write_share
        self.ways = ways
        self.items: dict[Any, list] = {}  # key -> [bytes, weight, last time, dirty fraction, tensor]
        self.writeback: dict[str, float] = {}
        self._tree = [0.0] * 1025
        self._vals = [0.0] * 1024
        self._now = 0
        self._total = 0.0

    def _add(self, t: int, v: float) -> None:
        self._vals[t] += v
        i = t + 1
        n = len(self._tree)
        while i < n:
            self._tree[i] += v
            i += i & -i

    def _grow(self) -> None:
        vals = self._vals + [0.0] * len(self._vals)
        self._vals = [0.0] * len(vals)
        self._tree = [0.0] * (len(vals) + 1)
        for t, v in enumerate(vals):
            if v:
                self._add(t, v)

    def _after(self, t: int) -> float:
        """Weighted bytes of the items used after time ``t``."""
        i, below = t + 1, 0.0
        while i > 0:
            below += self._tree[i]
            i -= i & -i
        return max(0.0, self._total - below)

    def _touch(self, key: Any, tensor: str, weight: float) -> tuple[list, float]:
        """Take the item out of the stack; returns it and its eviction probability (1 when new).

        A line of an item scanned in order is touched again after every other line of the item
        and the D bytes of the items used since: its stack distance is D + the item's own bytes.
        """
        item = self.items.get(key)
        if item is None:
            item = [0, weight, -1, 0.0, tensor]
            self.items[key] = item
            return item, 1.0
        own = item[0] * item[1]
        p = evict_probability(self._after(item[2]) + own, self.capacity, self.ways)
        self._add(item[2], -own)
        self._total -= own
        if item[3] > 0.0 and item[0]:  # dirty bytes evicted since the last use were written back
            self.writeback[item[4]] = self.writeback.get(item[4], 0.0) + item[0] * item[3] * p
            item[3] *= 1.0 - p
        return item, p

    def _push(self, item: list) -> None:
        if self._now >= len(self._vals):
            self._grow()
        item[2] = self._now
        self._add(self._now, item[0] * item[1])
        self._total += item[0] * item[1]
        self._now += 1

    def read(self, key: Any, tensor: str, nbytes: int, whole: bool) -> float:
        """Touch ``nbytes`` of an item; returns the expected bytes that miss (read from HBM)."""
        item, p = self._touch(key, tensor, 1.0)
        miss = min(item[0], nbytes) * p + max(0, nbytes - item[0])
        item[0] = max(item[0], nbytes)
        self._push(item)
        return miss

    def write(self, key: Any, tensor: str, nbytes: int) -> None:
        """Write ``nbytes`` (full sectors: no read for ownership); the item becomes dirty."""
        item, _ = self._touch(key, tensor, self.write_share)
        item[0] = max(item[0], nbytes)
        item[1] = self.write_share
        item[3] = 1.0
        self._push(item)

    def finish(self) -> dict[str, float]:
        """End of the kernel: dirty bytes evicted since their last use are written back;
        returns the expected bytes still dirty, per tensor.

        The line at offset x of an item written in order has D + (item bytes − x) bytes above
        it; the evicted fraction is the mean of :func:`evict_probability` over the item
        (midpoint rule, :data:`_ITEM_POINTS` points).
        """
        out: dict[str, float] = {}
        for nbytes, weight, t, dirty, tensor in self.items.values():
            if dirty > 0.0 and nbytes:
                d, own = self._after(t), nbytes * weight
                p = sum(evict_probability(d + own * (1.0 - (k + 0.5) / _ITEM_POINTS), self.capacity, self.ways)
                        for k in range(_ITEM_POINTS)) / _ITEM_POINTS
                self.writeback[tensor] = self.writeback.get(tensor, 0.0) + nbytes * dirty * p
                out[tensor] = out.get(tensor, 0.0) + nbytes * dirty * (1.0 - p)
        return out


def _rounded(d: dict[str, float]) -> dict[str, int]:
    """Expected bytes per tensor rounded to whole bytes; zero entries dropped."""
    return {k: int(round(v)) for k, v in d.items() if int(round(v))}


@dataclass(frozen=True)
class Access:
    """One touch of one item by a wave: ``read`` (may miss) or ``write`` (dirties it).

    Attributes:
        tensor: model tensor name (``Q``, ``K``, ``V``, ``O``, ``LSE``, ``O_PART`` ...).
        key: identity of the item (tensor, head, tile ...).
        nbytes: bytes touched (the item's extent needed so far).
        write: a store (True) or a load (False).
        whole: evict the item only entirely (K/V of a head); False for streamed tiles.
    """

    tensor: str
    key: Any
    nbytes: int
    write: bool = False
    whole: bool = False


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
    """

    name: str
    requested_read: dict[str, int] = field(default_factory=dict)
    requested_write: dict[str, int] = field(default_factory=dict)
    hbm_read: dict[str, int] = field(default_factory=dict)
    hbm_write: dict[str, int] = field(default_factory=dict)
    dirty_at_end: dict[str, int] = field(default_factory=dict)
    waves: int = 0
    note: str = ""


def _new_cache(capacity: int, write_share: float, ways: int | None) -> "_LRU | _SetAssoc":
    return _new_lru(capacity, write_share) if ways is None else _SetAssoc(capacity, write_share, ways)


def _close(cache: "_LRU | _SetAssoc", out: KernelL2, reads: dict[str, float]) -> KernelL2:
    """Fill ``out`` from a cache at the kernel's end (expected bytes rounded per tensor)."""
    if isinstance(cache, _SetAssoc):
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
             ways: int | None = None) -> KernelL2:
    """Run the L2 over the waves of one kernel (cold start) and collect HBM bytes per tensor.

    Args:
        name: kernel name for the record.
        waves: per wave, its accesses in time order (see :class:`Access`).
        capacity: effective L2 bytes.
        write_share: L2 bytes a written byte occupies per byte of read-allocated data
            (1: the same; ``l2_fraction``: read data is held in both L2 partitions, written
            lines only in their home partition).
        ways: None: fully associative LRU (exact integer bytes; a dirty line leaves only when
            evicted by capacity). An integer A: set-associative LRU with hashed sets, expected
            bytes rounded per tensor (:func:`evict_probability`).

    Returns:
        :class:`KernelL2` with HBM reads (misses), writes (dirty evictions) and what is
        left dirty at the end (not counted in the kernel's DRAM writes).

    Raises:
        IomodelError: write_share outside (0, 1].
    """
    cache = _new_cache(capacity, write_share, ways)
    out = KernelL2(name)
    reads: dict[str, float] = {}
    n = 0
    for wave in waves:
        n += 1
        for a in wave:
            if a.write:
                cache.write(a.key, a.tensor, a.nbytes)
            else:
                miss = cache.read(a.key, a.tensor, a.nbytes, a.whole)
                reads[a.tensor] = reads.get(a.tensor, 0) + miss
    out.waves = n
    return _close(cache, out, reads)


# ----------------------------------------------------------------------------------
# The bundled kernel's programs (docs/traffic-contract.md)
# ----------------------------------------------------------------------------------


def prefill_key_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows program i of a prefill head loads: ``min(N_k, ⌈hi_i/BN⌉·BN)`` (contract).

    Returns:
        a list of T_r row counts (rows, not bytes).
    """
    n_q, n_k, bm, bn = spec.seqlen_q, spec.seqlen_k, tiling.block_m, tiling.block_n
    off = spec.causal_offset
    rows = []
    for i in range(cdiv(n_q, bm)):
        hi = n_k if not spec.causal else min(max(min((i + 1) * bm, n_q) + off, 0), n_k)
        rows.append(min(n_k, cdiv(hi, bn) * bn))
    return rows


#: Key rows per K/V chunk of the prefill simulation: a wave's programs stream their KV heads'
#: K/V side by side, block after block, so the simulation interleaves them in chunks of
#: this many key rows (rounded up to a multiple of BLOCK_N).
KV_CHUNK_ROWS = 1024


def prefill_waves(spec: LayerSpec, tiling: Tiling, w: int, tile_order: str = "forward",
                  ) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the Q-stationary prefill kernel in grid order, and its requested bytes.

    Grid ``(T_r, B·H)``, linear program p = i + T_r·(b·H + h) (axis 0 fastest); program i of
    a head runs query tile i (``tile_order="forward"``) or T_r − 1 − i (``"reverse"``, the
    kernel's ``tile_order`` config field: longest causal tiles first); K/V of KV head h // G.
    Within a wave the KV heads' K and V are streamed side by side in chunks of
    :data:`KV_CHUNK_ROWS` key rows (all programs of the wave run at once, each scanning its
    keys from 0 upward, so one fetch of a chunk serves every program of the wave that needs it).

    Returns:
        (waves, requested read bytes per tensor, requested write bytes per tensor); the
        requested bytes equal the model's SRAM_fill rows.

    Raises:
        IomodelError: an unknown ``tile_order``.
    """
    if tile_order not in ("forward", "reverse"):
        raise IomodelError(f"tile_order {tile_order!r} is unknown: use forward or reverse")
    B, H, G = spec.batch, spec.heads, spec.group
    d, s = spec.head_dim, spec.width
    t_r = cdiv(spec.seqlen_q, tiling.block_m)
    kv_rows = prefill_key_rows(spec, tiling)
    q_rows = [min(tiling.block_m, spec.seqlen_q - i * tiling.block_m) for i in range(t_r)]
    if tile_order == "reverse":
        kv_rows, q_rows = kv_rows[::-1], q_rows[::-1]  # program i runs tile T_r-1-i
    req_r = {"Q": B * H * spec.seqlen_q * d * s, "K": B * H * sum(kv_rows) * d * s}
    req_r["V"] = req_r["K"]
    req_w = {"O": B * H * spec.seqlen_q * d * s, "LSE": B * H * spec.seqlen_q * LSE_WIDTH}
    chunk = cdiv(max(KV_CHUNK_ROWS, tiling.block_n), tiling.block_n) * tiling.block_n
    total = t_r * B * H
    waves: list[list[Access]] = []
    for p0 in range(0, total, w):
        p1 = min(total, p0 + w)
        acc: list[Access] = []
        need: dict[int, int] = {}  # kv head (b*H_kv + hk) -> K rows needed by this wave
        order: list[int] = []
        qo: list[tuple[int, int, int]] = []  # (bh, i0, i1) in program index
        for bh in range(p0 // t_r, (p1 - 1) // t_r + 1):
            i0 = max(0, p0 - bh * t_r)
            i1 = min(t_r, p1 - bh * t_r)
            b, h = divmod(bh, H)
            kv = b * spec.kv_heads + h // G
            rows = max(kv_rows[i0:i1])
            if kv not in need:
                order.append(kv)
            need[kv] = max(need.get(kv, 0), rows)
            qo.append((bh, i0, i1))
        for bh, i0, i1 in qo:
            acc.append(Access("Q", ("Q", bh, i0, tile_order), sum(q_rows[i0:i1]) * d * s))
        for c0 in range(0, max(need.values()), chunk):
            for kv in order:
                rows = min(chunk, need[kv] - c0)
                if rows > 0:
                    acc.append(Access("K", ("K", kv, c0), rows * d * s, whole=True))
                    acc.append(Access("V", ("V", kv, c0), rows * d * s, whole=True))
        for bh, i0, i1 in qo:
            acc.append(Access("O", ("O", bh, i0, tile_order), sum(q_rows[i0:i1]) * d * s, write=True))
            acc.append(Access("LSE", ("LSE", bh, i0, tile_order), sum(q_rows[i0:i1]) * LSE_WIDTH, write=True))
        waves.append(acc)
    return waves, req_r, req_w


def decode_split_rows(spec: LayerSpec, tiling: Tiling) -> list[int]:
    """K (or V) rows each split of a decode program loads (contract: masked to the split end,
    causal blocks whose first key >= hi skipped). Units: rows."""
    n_k, bn, S = spec.seqlen_k, tiling.block_n, tiling.num_splits
    length = decode_split_len(n_k, S, bn)
    hi = n_k if not spec.causal else min(max(spec.seqlen_q + spec.causal_offset, 0), n_k)
    rows = []
    for sp in range(S):
        start, end = sp * length, min((sp + 1) * length, n_k)
        stop = min(end, hi)
        if stop <= start:
            rows.append(0)
        else:
            rows.append(min(end, start + cdiv(stop - start, bn) * bn) - start)
    return rows


def decode_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV decode kernel: grid ``(num_splits, B·H_kv·(G/P))``, split fastest.

    Program (sp, (b·H_kv + hk)·(G/P) + gp) loads the P·N_q query rows of its P heads, the
    K/V rows of split sp, and writes partial O and LSE in fp32 (num_splits > 1) or O and
    LSE directly. Returns (waves, requested reads, requested writes) per tensor.
    """
    B, Hk, G, P = spec.batch, spec.kv_heads, spec.group, tiling.heads_per_program
    S, d, s, n_q = tiling.num_splits, spec.head_dim, spec.width, spec.seqlen_q
    groups = G // P
    split_rows = decode_split_rows(spec, tiling)
    rows_q = P * n_q
    o_name, l_name = ("O_PART", "LSE_PART") if S > 1 else ("O", "LSE")
    o_w = 4 if S > 1 else s
    total = S * B * Hk * groups
    req_r = {"Q": total * rows_q * d * s, "K": B * Hk * groups * sum(split_rows) * d * s}
    req_r["V"] = req_r["K"]
    req_w = {o_name: total * rows_q * d * o_w, l_name: total * rows_q * LSE_WIDTH}
    waves: list[list[Access]] = []
    for p0 in range(0, total, w):
        reads_q, reads_kv, writes = [], [], []
        seen_kv = set()
        for p in range(p0, min(total, p0 + w)):
            pid, sp = divmod(p, S)
            b, rem = divmod(pid, Hk * groups)
            hk, gp = divmod(rem, groups)
            reads_q.append(Access("Q", ("Q", b, hk, gp), rows_q * d * s))
            kv = (b, hk, sp)
            if kv not in seen_kv and split_rows[sp]:
                seen_kv.add(kv)
                reads_kv.append(Access("K", ("K",) + kv, split_rows[sp] * d * s, whole=True))
                reads_kv.append(Access("V", ("V",) + kv, split_rows[sp] * d * s, whole=True))
            writes.append(Access(o_name, (o_name, pid, sp), rows_q * d * o_w, write=True))
            writes.append(Access(l_name, (l_name, pid, sp), rows_q * LSE_WIDTH, write=True))
        waves.append(reads_q + reads_kv + writes)
    return waves, req_r, req_w


def combine_waves(spec: LayerSpec, tiling: Tiling, w: int) -> tuple[list[list[Access]], dict[str, int], dict[str, int]]:
    """Waves of the split-KV combine kernel: grid ``(B·H,)``; program bh reads its num_splits
    partials (fp32 O and LSE) and writes O (dtype) and LSE (fp32) once."""
    B, H, S, n_q, d, s = spec.batch, spec.heads, tiling.num_splits, spec.seqlen_q, spec.head_dim, spec.width
    total = B * H
    req_r = {"O_PART": total * S * n_q * d * 4, "LSE_PART": total * S * n_q * LSE_WIDTH}
    req_w = {"O": total * n_q * d * s, "LSE": total * n_q * LSE_WIDTH}
    waves = []
    for p0 in range(0, total, w):
        n = min(total, p0 + w) - p0
        waves.append([
            Access("O_PART", ("O_PART", p0), n * S * n_q * d * 4),
            Access("LSE_PART", ("LSE_PART", p0), n * S * n_q * LSE_WIDTH),
            Access("O", ("O", p0), n * n_q * d * s, write=True),
            Access("LSE", ("LSE", p0), n * n_q * LSE_WIDTH, write=True),
        ])
    return waves, req_r, req_w


# ----------------------------------------------------------------------------------
# The eager chain: one kernel per step, streaming
# ----------------------------------------------------------------------------------


def _val(x: Any) -> int:
    return int(x)


def stream_kernel(step: str, rows: Sequence[Any], spec: LayerSpec, capacity: int,
                  slices: int = STREAM_SLICES, write_share: float = 1.0,
                  ways: int | None = None) -> tuple[KernelL2, list[str]]:
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
        ways: see :func:`simulate` (None: fully associative LRU).

    Returns:
        (:class:`KernelL2`, notes on broadcast re-reads).
    """
    bh = spec.batch * spec.heads
    reads: dict[str, int] = {}
    writes: dict[str, int] = {}
    broadcast: set[str] = set()
    has_bh = any("B" in r.shape and "H" in r.shape for r in rows)
    for r in rows:
        rb, wb = _val(r.read_bytes), _val(r.write_bytes)
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
    cache = _new_cache(capacity, write_share, ways)
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


# ----------------------------------------------------------------------------------
# The prediction
# ----------------------------------------------------------------------------------


@dataclass
class Cause:
    """One named reason why HBM bytes differ from the compulsory floor.

    Attributes:
        key: one of :data:`CAUSES`.
        title: its sentence.
        read_bytes: signed contribution to HBM reads (bytes; negative = below the floor).
        write_bytes: signed contribution to HBM writes (bytes).
        detail: one sentence with this shape's numbers.
    """

    key: str
    title: str
    read_bytes: int = 0
    write_bytes: int = 0
    detail: str = ""

    @property
    def magnitude(self) -> int:
        """|read| + |write| contribution in bytes (ranks the causes)."""
        return abs(self.read_bytes) + abs(self.write_bytes)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"key": self.key, "title": self.title, "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes, "detail": self.detail}


@dataclass
class L2Prediction:
    """HBM bytes of one algorithm on one shape with the L2 taken into account.

    Units: bytes. ``floor`` + Σ cause contributions = ``hbm`` (reads and writes apart).

    Attributes:
        algorithm: ``tiled`` or ``baseline``.
        hbm_read_bytes, hbm_write_bytes: the L2-aware prediction of the DRAM counters.
        floor_read_bytes, floor_write_bytes: compulsory floor: the worksheet's compulsory reads
            (:func:`compulsory_read_bytes`), outputs written once.
        no_reuse_read_bytes, no_reuse_write_bytes: every requested byte crosses HBM (model HBM rows).
        l2_read_bytes, l2_write_bytes: requests from the SMs to L2 (the SRAM_fill level;
            None for the eager chain, whose library kernels re-read from L2 in ways the
            model does not count).
        reuse_saved_read_bytes: no-reuse reads minus L2-aware reads (re-reads served by L2).
        causes: non-zero contributions, largest first.
        kernels: per-launch simulation results.
        assumptions: one sentence each.
    """

    algorithm: str
    hbm_read_bytes: int
    hbm_write_bytes: int
    floor_read_bytes: int
    floor_write_bytes: int
    no_reuse_read_bytes: int
    no_reuse_write_bytes: int
    l2_read_bytes: int | None
    l2_write_bytes: int | None
    reuse_saved_read_bytes: int
    causes: list[Cause]
    kernels: list[KernelL2]
    assumptions: list[str]

    @property
    def dominant(self) -> Cause | None:
        """The cause with the largest |read| + |write| contribution (None if the floor holds)."""
        return max(self.causes, key=lambda c: c.magnitude) if self.causes else None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (bytes), with the dominant cause's key."""
        return {
            "algorithm": self.algorithm,
            "hbm": {"read_bytes": self.hbm_read_bytes, "write_bytes": self.hbm_write_bytes},
            "floor": {"read_bytes": self.floor_read_bytes, "write_bytes": self.floor_write_bytes},
            "no_reuse": {"read_bytes": self.no_reuse_read_bytes, "write_bytes": self.no_reuse_write_bytes},
            "l2_requests": {"read_bytes": self.l2_read_bytes, "write_bytes": self.l2_write_bytes},
            "reuse_saved_read_bytes": self.reuse_saved_read_bytes,
            "causes": [c.to_dict() for c in self.causes],
            "dominant": self.dominant.key if self.dominant else None,
            "assumptions": self.assumptions,
        }


def _add(into: dict[str, int], d: dict[str, int]) -> None:
    for k, v in d.items():
        into[k] = into.get(k, 0) + v


def _finish(algorithm: str, kernels: list[KernelL2], floor_r: int, floor_w: int, no_reuse_r: int, no_reuse_w: int,
            l2_r: int | None, l2_w: int | None, causes: list[Cause], assumptions: list[str]) -> L2Prediction:
    read = sum(sum(k.hbm_read.values()) for k in kernels)
    write = sum(sum(k.hbm_write.values()) for k in kernels)
    causes = sorted([c for c in causes if c.magnitude], key=lambda c: -c.magnitude)
    # the contributions must add up exactly: floor + causes = prediction
    assert floor_r + sum(c.read_bytes for c in causes) == read, "read causes do not add up"
    assert floor_w + sum(c.write_bytes for c in causes) == write, "write causes do not add up"
    return L2Prediction(algorithm, read, write, floor_r, floor_w, no_reuse_r, no_reuse_w, l2_r, l2_w,
                        no_reuse_r - read, causes, kernels, assumptions)


def compulsory_read_bytes(spec: LayerSpec) -> dict[str, int]:
    """The forward pass's compulsory reads per input tensor, in bytes: the worksheet's definition.

    Evaluates :func:`iomodel.traffic.bounds.compulsory_rows` (the rows behind
    ``iomodel.traffic.predict(...).compulsory_bytes``): Q ``(B, H, N_q, d)`` counts the query
    rows that see some key, K and V ``(B, H_kv, N_k, d)`` the keys some query row sees
    (every element without a causal mask).

    Args:
        spec: the layer (its forward pass is counted).

    Returns:
        ``{"Q": bytes, "K": bytes, "V": bytes}``.
    """
    from iomodel.traffic.base import SYM
    from iomodel.traffic.bounds import compulsory_rows

    vals = {SYM.B: spec.batch, SYM.H: spec.heads, SYM.H_kv: spec.kv_heads, SYM.d: spec.head_dim,
            SYM.N_q: spec.seqlen_q, SYM.N_k: spec.seqlen_k, SYM.s: spec.width}
    out = {}
    for r in compulsory_rows(spec.with_(backward=False)):
        if r.tensor in _INPUTS and r.step == "forward":
            out[r.tensor] = out.get(r.tensor, 0) + int(r.read_bytes.subs(vals))
    return out


def _common_assumptions(params: L2Params) -> list[str]:
    return [
        f"Effective L2 capacity {human_bytes(params.capacity, decimals=1)} = {params.l2_fraction:g} × {human_bytes(params.l2_bytes, decimals=1)} "
        "(two L2 partitions each caching what their SMs read).",
        f"W = {params.num_sms} SMs × {params.programs_per_sm} programs per SM = {params.resident_programs} programs "
        "run at once, in grid order (axis 0 fastest), in waves.",
        ("L2 keeps the most recently used items (fully associative LRU) in chunks of K/V key rows, so re-read "
         "K/V hits while the bytes touched since its last use fit the effective capacity." if params.ways is None else
         f"L2 is set-associative ({params.ways} ways, fitted; hashed sets, LRU within a set): an item touched again "
         f"after D distinct bytes is gone with probability P(Poisson({params.ways}·D/C) ≥ {params.ways}), "
         "C the effective capacity; K/V are tracked in chunks of key rows and the bytes are expected values."),
        "Every kernel starts with a cold L2 and its dirty lines at the end are not counted "
        "(ncu --cache-control all flushes caches before each kernel)." if params.flush_between_kernels else
        "L2 content is not flushed between kernels.",
    ]


def predict_tiled(spec: LayerSpec, tiling: Tiling, params: L2Params, tile_order: str = "forward") -> L2Prediction:
    """L2-aware HBM bytes of the bundled kernel (prefill Q-stationary, or split-KV decode).

    Args:
        spec: the layer (forward only: ``spec.backward`` must be False).
        tiling: the tiles the kernel ran (``KernelConfig.tiling()``).
        params: device and occupancy (:class:`L2Params`).
        tile_order: grid order of the query tiles, the kernel config's ``tile_order``
            (``forward``, the default for records without it, or ``reverse``).

    Returns:
        :class:`L2Prediction` with causes ``l2_capacity``, ``masked_reads``,
        ``dirty_at_end`` and (split-KV) ``intermediates``.

    Raises:
        IomodelError: a backward pass is asked for (not modelled at the L2 level), or an
            unknown tile_order.
    """
    if spec.backward:
        raise IomodelError("the L2-aware prediction covers the forward kernel only: use --pass fwd")
    w = params.resident_programs
    cap = params.capacity
    share, ways = params.write_share, params.ways
    d, s = spec.head_dim, spec.width
    B, H, Hk = spec.batch, spec.heads, spec.kv_heads
    kv_full = B * Hk * spec.seqlen_k * d * s  # K (or V) bytes, once
    q_bytes = B * H * spec.seqlen_q * d * s
    o_bytes, lse_bytes = q_bytes, B * H * spec.seqlen_q * LSE_WIDTH
    comp = compulsory_read_bytes(spec)
    floor_r, floor_w = sum(comp.values()), o_bytes + lse_bytes
    kernels: list[KernelL2] = []
    req_r: dict[str, int] = {}
    req_w: dict[str, int] = {}
    if spec.phase == "decode":
        waves, r, wr = decode_waves(spec, tiling, w)
        k1 = simulate("decode kernel", waves, cap, share, ways)
        k1.requested_read, k1.requested_write = r, wr
        kernels.append(k1)
        _add(req_r, r)
        _add(req_w, wr)
        if tiling.num_splits > 1:
            waves, r, wr = combine_waves(spec, tiling, w)
            k2 = simulate("combine kernel", waves, cap, share, ways)
            k2.requested_read, k2.requested_write = r, wr
            kernels.append(k2)
            _add(req_r, r)
            _add(req_w, wr)
        touched_rows = B * Hk * sum(decode_split_rows(spec, tiling))
        span = "decode programs of one KV head run together"
    else:
        waves, r, wr = prefill_waves(spec, tiling, w, tile_order)
        k1 = simulate("fwd kernel", waves, cap, share, ways)
        k1.requested_read, k1.requested_write = r, wr
        kernels.append(k1)
        _add(req_r, r)
        _add(req_w, wr)
        touched_rows = B * Hk * max(prefill_key_rows(spec, tiling))
        t_r = cdiv(spec.seqlen_q, tiling.block_m)
        heads = cdiv(w, t_r) + 1
        kv_heads_in_window = min(B * Hk, cdiv(heads, spec.group) + 1)
        ws = kv_heads_in_window * 2 * spec.seqlen_k * d * s
        span = (f"W = {w} resident programs span ~{min(heads, B * H)} query heads = {kv_heads_in_window} KV heads "
                f"(T_r = {t_r}, G = {spec.group}): K/V working set ~{human_bytes(ws, decimals=1)} vs {human_bytes(cap, decimals=1)} effective L2")
    hbm_r: dict[str, int] = {}
    hbm_w: dict[str, int] = {}
    dirty: dict[str, int] = {}
    for k in kernels:
        _add(hbm_r, k.hbm_read)
        _add(hbm_w, k.hbm_write)
        _add(dirty, k.dirty_at_end)
    kv_touched = touched_rows * d * s  # K (or V) bytes some program loads
    # whole tiles beyond the compulsory rows: keys past a row's causal bound, Q rows that see no key
    masked = (q_bytes - comp["Q"]) + 2 * kv_touched - comp["K"] - comp["V"]
    kv_read = hbm_r.get("K", 0) + hbm_r.get("V", 0)
    refetch = kv_read - 2 * kv_touched
    q_extra = hbm_r.get("Q", 0) - q_bytes  # decode: Q reloads per split missing L2 (normally 0)
    inter_r = hbm_r.get("O_PART", 0) + hbm_r.get("LSE_PART", 0)
    inter_w = (req_w.get("O_PART", 0) + req_w.get("LSE_PART", 0))
    out_w = o_bytes + lse_bytes
    total_w = sum(hbm_w.values())
    dirty_total = (out_w + inter_w) - total_w
    causes = [
        Cause("masked_reads", CAUSES["masked_reads"], read_bytes=masked,
              detail=f"{human_bytes(masked, decimals=1)} of Q/K/V beyond the compulsory rows loaded by whole causal tiles "
                     f"({human_bytes(2 * (kv_full - kv_touched), decimals=1)} of K/V past every query tile's bound never loaded)"),
        Cause("l2_capacity", CAUSES["l2_capacity"], read_bytes=refetch + q_extra,
              detail=(f"{human_bytes(refetch + q_extra, decimals=1)} re-fetched; " if refetch + q_extra else "all re-reads hit L2; ") + span),
        Cause("intermediates", CAUSES["intermediates"], read_bytes=inter_r, write_bytes=inter_w,
              detail=f"split-KV partials (num_splits = {tiling.num_splits}): {human_bytes(inter_w, decimals=1)} written, "
                     f"{human_bytes(inter_r, decimals=1)} read back by the combine kernel"),
        Cause("dirty_at_end", CAUSES["dirty_at_end"], write_bytes=-dirty_total,
              detail=f"{human_bytes(dirty_total, decimals=1)} of {human_bytes(out_w + inter_w, decimals=1)} written bytes still dirty in L2 at kernel end; "
                     f"{human_bytes(total_w, decimals=1)} written back during the kernel"),
    ]
    no_reuse_r = sum(req_r.values())
    no_reuse_w = sum(req_w.values())
    assumptions = _common_assumptions(params) + [
        "The kernel loads and stores exactly what docs/traffic-contract.md lists; programs of one wave "
        "stream the same K/V blocks together, so one fetch serves the wave.",
    ]
    return _finish("tiled", kernels, floor_r, floor_w, no_reuse_r, no_reuse_w, no_reuse_r, no_reuse_w, causes,
                   assumptions)


#: Tensors of the eager chain that are layer inputs / outputs (the rest are intermediates).
_INPUTS = ("Q", "K", "V")
_OUTPUTS = ("O", "LSE")


def predict_baseline(spec: LayerSpec, rows: Sequence[Any], params: L2Params) -> L2Prediction:
    """L2-aware HBM bytes of the eager chain from the model's ``baseline`` HBM rows.

    Each distinct ``step`` of the rows is one kernel (in row order), simulated by
    :func:`stream_kernel`; with the profiler's flush every kernel starts cold.

    Args:
        spec: the layer.
        rows: the model's baseline rows (attributes ``tensor, step, level, shape,
            read_bytes, write_bytes``; only ``HBM`` rows are used).
        params: device (capacity).

    Returns:
        :class:`L2Prediction` with causes ``intermediates``, ``broadcast_rereads`` and
        ``dirty_at_end``.

    Raises:
        IomodelError: no HBM rows were given, or L2 content carried between kernels was asked
            for (only the profiler's flushed setting is modelled for the chain).
    """
    if not params.flush_between_kernels:
        raise IomodelError("the eager chain is modelled with the profiler's cache flush only: keep flush_between_kernels")
    hbm = [r for r in rows if getattr(r, "level", "HBM") == "HBM"]
    if not hbm:
        raise IomodelError("no HBM rows for the baseline: pass the model's baseline rows")
    steps: list[str] = []
    by_step: dict[str, list[Any]] = {}
    for r in hbm:
        if r.step not in by_step:
            steps.append(r.step)
            by_step[r.step] = []
        by_step[r.step].append(r)
    kernels, notes = [], []
    for st in steps:
        k, n = stream_kernel(st, by_step[st], spec, params.capacity, write_share=params.write_share,
                             ways=params.ways)
        kernels.append(k)
        notes += n
    d, s = spec.head_dim, spec.width
    q_bytes = spec.batch * spec.heads * spec.seqlen_q * d * s
    kv_full = spec.batch * spec.kv_heads * spec.seqlen_k * d * s
    comp = compulsory_read_bytes(spec)
    floor_r, floor_w = sum(comp.values()), q_bytes  # O only (the chain returns no LSE)
    masked = q_bytes + 2 * kv_full - floor_r  # the chain reads all of Q, K and V
    if any(r.tensor == "LSE" and _val(r.write_bytes) for r in hbm):
        floor_w += spec.batch * spec.heads * spec.seqlen_q * LSE_WIDTH
    req_r = sum(_val(r.read_bytes) for r in hbm)
    req_w = sum(_val(r.write_bytes) for r in hbm)
    hbm_r = sum(sum(k.hbm_read.values()) for k in kernels)
    hbm_w = sum(sum(k.hbm_write.values()) for k in kernels)
    extra = hbm_r - req_r  # broadcast re-reads
    dirty = req_w - hbm_w
    causes = [
        Cause("masked_reads", CAUSES["masked_reads"], read_bytes=masked,
              detail=f"{human_bytes(masked, decimals=1)} of Q/K/V that the causal mask hides, read in full by the chain"),
        Cause("intermediates", CAUSES["intermediates"], read_bytes=req_r - floor_r - masked,
              write_bytes=req_w - floor_w,
              detail=f"{len(kernels)} kernels; S, P and the other intermediates cross HBM: "
                     f"{human_bytes(req_r - floor_r - masked, decimals=1)} read and {human_bytes(req_w - floor_w, decimals=1)} written beyond "
                     "the inputs and outputs"),
        Cause("broadcast_rereads", CAUSES["broadcast_rereads"], read_bytes=extra,
              detail="; ".join(notes) if notes else "the broadcast mask stays in L2 across (batch, head)"),
        Cause("dirty_at_end", CAUSES["dirty_at_end"], write_bytes=-dirty,
              detail=f"{human_bytes(dirty, decimals=1)} of {human_bytes(req_w, decimals=1)} written bytes still dirty in L2 at the end of their kernels; "
                     f"{human_bytes(hbm_w, decimals=1)} written back during them"),
    ]
    assumptions = _common_assumptions(params) + [
        "Each op of the eager chain is one kernel that streams its inputs and output once "
        f"({STREAM_SLICES} interleaved slices); matmul operands are re-read from L2, not HBM.",
    ]
    return _finish("baseline", kernels, floor_r, floor_w, req_r, req_w, None, None, causes, assumptions)


__all__ = [
    "Access",
    "CAUSES",
    "Cause",
    "DEFAULT_L2_FRACTION",
    "DEFAULT_L2_WAYS",
    "MAX_L2_WAYS",
    "KernelL2",
    "L2Params",
    "L2Prediction",
    "combine_waves",
    "compulsory_read_bytes",
    "decode_split_rows",
    "decode_waves",
    "estimate_programs_per_sm",
    "evict_probability",
    "predict_baseline",
    "predict_tiled",
    "prefill_key_rows",
    "prefill_waves",
    "simulate",
    "stream_kernel",
]
