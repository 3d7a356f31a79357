"""The named causes that move an algorithm's HBM bytes away from the compulsory floor.

Each :class:`~iomodel.cache.predict.L2Prediction` splits its DRAM bytes as floor + one signed
contribution per cause; ``docs/l2-calibration.md`` ("What it predicts") explains each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Cause key -> the sentence a report prints for it.
CAUSES: dict[str, str] = {
    "l2_capacity": "K/V re-fetched: the resident programs' working set exceeds L2",
    "masked_reads": "inputs no output depends on under the causal mask, loaded anyway (whole tiles, or the eager chain's full reads)",
    "dirty_at_end": "output lines still dirty in L2 when the kernel ends (expected, set-associative L2)",
    "intermediates": "intermediates written by one kernel and read cold by the next (profiler cache flush)",
    "broadcast_rereads": "broadcast mask re-read per (batch, head) from HBM",
}


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
