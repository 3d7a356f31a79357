"""The fully associative LRU cache of the L2 model (rounds 1-3; ``ways=None``): exact integer bytes.

The model's history is in ``docs/l2-calibration.md``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from iomodel.errors import IomodelError


class LRU:
    """Fully associative LRU over items; an item is resident with some bytes, clean or dirty.

    ``whole`` items (a KV head's K/V) are evicted entirely; stream items may be evicted in
    part (their oldest bytes first, the dirty ones among them first). Sizes are in weight units:
    a read byte occupies ``read_weight``, a written byte ``write_weight`` (see :func:`new_lru`).
    Bytes are exact integers; an item counts its dirty bytes, so a written line that was written
    back and read again is clean: ``writeback`` collects, per tensor, the dirty bytes evicted
    (written to HBM), never more than were written.
    """

    def __init__(self, capacity: int, read_weight: int = 1, write_weight: int = 1) -> None:
        self.capacity = capacity  # in weight units: a read byte occupies read_weight, a written byte write_weight
        self.read_weight = read_weight
        self.write_weight = write_weight
        self.items: OrderedDict[Any, list] = OrderedDict()  # key -> [bytes, dirty bytes, whole, tensor, weight]
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
            out = min(gone, dirty)  # the dirty bytes leave first
            if out:
                item[1] = dirty - out
                self.writeback[tensor] = self.writeback.get(tensor, 0) + out

    def _grow(self, key: Any, tensor: str, nbytes: int, dirty: bool, whole: bool, weight: int) -> int:
        """Bring an item to at least ``nbytes`` as the most recently used; returns the bytes added."""
        item = self.items.get(key)
        if item is None:
            self.items[key] = [nbytes, nbytes if dirty else 0, whole, tensor, weight]
            grown = nbytes
        else:
            self.items.move_to_end(key)
            grown = max(0, nbytes - item[0])
            item[0] += grown
            if dirty:  # a write dirties the extent it writes
                item[1] = max(item[1], nbytes)
            weight = item[4]
        self.size += grown * weight
        self._evict(protect=key)
        return grown

    def read(self, key: Any, tensor: str, nbytes: int, whole: bool) -> int:
        """Touch ``nbytes`` of an item; returns the bytes that miss (read from HBM)."""
        return self._grow(key, tensor, nbytes, False, whole, self.read_weight)

    def read_group(self, keys: tuple[Any, ...], nbytes: tuple[int, ...], tensors: tuple[str, ...],
                   whole: bool) -> list[int]:
        """:meth:`read` of each member of a :class:`~iomodel.schedule.grid.ReadGroup` in order, with
        the same evictions (after each member, protecting it), in one call: returns the bytes each
        member misses (bytes). ``whole``: the members are evicted entirely, never in part (as
        :meth:`read`'s). A speed form of the per-member loop, equal to it byte for byte."""
        items, weight, out = self.items, self.read_weight, []
        for key, tensor, n in zip(keys, tensors, nbytes):
            item = items.get(key)
            if item is None:
                items[key] = [n, 0, whole, tensor, weight]
                grown, wt = n, weight
            else:
                items.move_to_end(key)
                grown = n - item[0]
                if grown < 0:
                    grown = 0
                item[0] += grown
                wt = item[4]
            self.size += grown * wt
            if self.size > self.capacity:
                self._evict(protect=key)
            out.append(grown)
        return out

    def write(self, key: Any, tensor: str, nbytes: int) -> None:
        """Write ``nbytes`` (full sectors: no read for ownership); the item becomes dirty."""
        self._grow(key, tensor, nbytes, True, False, self.write_weight)

    def dirty(self) -> dict[str, int]:
        """Bytes still dirty, per tensor."""
        out: dict[str, int] = {}
        for _, dirty, _, tensor, _ in self.items.values():
            if dirty:
                out[tensor] = out.get(tensor, 0) + dirty
        return out


#: Weight units of one read byte in :func:`new_lru` (integer weights keep the LRU's bytes exact;
#: a written byte weighs :func:`write_weight` units). A representation choice, not a model constant.
READ_WEIGHT = 1000


def write_weight(write_share: float) -> int:
    """Weight units of one written byte in :func:`new_lru`: ``round(READ_WEIGHT × write_share)``, at least 1
    (``write_share`` read-equivalent bytes per written byte, in (0, 1])."""
    return max(1, round(READ_WEIGHT * write_share))


def new_lru(capacity: int, write_share: float) -> LRU:
    """An LRU of ``capacity`` read-equivalent bytes where a written byte occupies ``write_share``.

    Weights are integers: a read byte weighs :data:`READ_WEIGHT` (1000), a written byte
    :func:`write_weight` (``round(1000 × write_share)``).

    Raises:
        IomodelError: write_share outside (0, 1].
    """
    if not 0 < write_share <= 1:
        raise IomodelError(f"write_share must be in (0, 1], got {write_share}")
    return LRU(capacity * READ_WEIGHT, READ_WEIGHT, write_weight(write_share))
