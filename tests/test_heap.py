"""iomodel.cache.heap: freed heap memory kept mapped (glibc), counted in page faults, not timed.

Each probe runs in a fresh interpreter: the setting is process-wide and cannot be undone, and the test process's
heap has its own history."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from iomodel.cache import heap

_PROBE = """
import resource, sys
import numpy as np
if sys.argv[1] == "kept":
    from iomodel.cache.heap import keep_freed_memory
    print(keep_freed_memory(), keep_freed_memory())
i = np.arange(131072, dtype=np.int64)  # one int64 per key tile of a 2^24-token sequence (128-row tiles)
np.minimum(128, 2**24 - i * 128)  # the first temporaries page their memory in either way
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    np.minimum(128, 2**24 - i * 128)  # two 1 MiB temporaries, freed at once
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""

glibc = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")


def _faults(mode: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@glibc
def test_kept_heap_takes_no_page_fault_for_the_next_temporaries():
    """The same 20 pairs of 1 MiB temporaries: with glibc's defaults each pages its memory in again (about 256
    faults a MiB: 9,376 on the development machine), with the memory kept none does. Both counts are asserted,
    so the probe can tell the two apart."""
    kept, default = _faults("kept"), _faults("default")
    assert kept[:2] == ["True", "True"]  # applied, and once per process
    assert int(kept[2]) < 100
    assert int(default[0]) > 20 * 256  # at least one MiB paged in per loop: the setting is what removes them


def test_no_glibc_mallopt_is_false_not_an_error(monkeypatch):
    """A C library without mallopt (musl, macOS) leaves the allocator as it is and says so (False)."""

    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap.ctypes, "CDLL", NoMallopt)
    assert heap.keep_freed_memory() is False
    assert heap.keep_freed_memory() is False
