"""An independent, slow oracle of the set-associative L2 model, for tests/test_l2_fast.py only.

The stack is a plain list of items, most recent last; an item's stack distance is the sum of
the weighted bytes of the items after it (a Python ``sum`` over the list), with no Fenwick
tree, no read groups and no memo: the definitions of :mod:`iomodel.cache.set_assoc` written
the slow way. The eviction probability is the model's own
:func:`iomodel.cache.set_assoc.evict_probability` (tested apart against the Poisson tail), and an
item's end-of-kernel write-back its :func:`~iomodel.cache.set_assoc.finish_item`.
"""

from __future__ import annotations

from typing import Any

from iomodel.cache.set_assoc import evict_probability, finish_item


class StackOracle:
    """Same interface as :class:`iomodel.cache.set_assoc.SetAssoc` (read, write, finish, writeback)."""

    def __init__(self, capacity: int, write_share: float, ways: int, read_capacity: int | None = None) -> None:
        self.capacity, self.write_share, self.ways = float(capacity), write_share, ways
        self.read_capacity = float(capacity if read_capacity is None else read_capacity)  # a read miss's C
        self.order: list[Any] = []  # keys, least recently used first
        self.items: dict[Any, list] = {}  # key -> [bytes, weight, dirty fraction, tensor]
        self.writeback: dict[str, float] = {}

    def _above(self, key: Any) -> float:
        i = self.order.index(key)
        return sum(self.items[k][0] * self.items[k][1] for k in self.order[i + 1:])

    def _touch(self, key: Any, tensor: str, weight: float) -> tuple[list, float]:
        item = self.items.get(key)
        if item is None:
            item = self.items[key] = [0, weight, 0.0, tensor]
            self.order.append(key)
            return item, 1.0
        dist = self._above(key) + item[0] * item[1]
        p = evict_probability(dist, self.read_capacity, self.ways)
        if item[2] > 0.0 and item[0]:  # write-back at the write capacity
            pw = evict_probability(dist, self.capacity, self.ways)
            self.writeback[tensor] = self.writeback.get(tensor, 0.0) + item[0] * item[2] * pw
            item[2] *= 1.0 - pw
        self.order.remove(key)
        self.order.append(key)
        return item, p

    def read(self, key: Any, tensor: str, nbytes: int, whole: bool, weight: float = 1.0) -> float:
        item, p = self._touch(key, tensor, weight)
        miss = min(item[0], nbytes) * p + max(0, nbytes - item[0])
        item[0] = max(item[0], nbytes)
        if weight != 1.0:  # the forward's Q (L2Params.q_share) weighs less from now on
            item[1] = weight
        return miss

    def write(self, key: Any, tensor: str, nbytes: int) -> None:
        item, _ = self._touch(key, tensor, self.write_share)
        item[0], item[1], item[2] = max(item[0], nbytes), self.write_share, 1.0

    def finish(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, (nbytes, weight, dirty, tensor) in self.items.items():  # first-touch order, as SetAssoc
            if dirty > 0.0 and nbytes:
                finish_item(self.writeback, out, tensor, nbytes, dirty, self._above(key), nbytes * weight,
                            self.capacity, self.ways)
        return out
