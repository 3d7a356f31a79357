"""Keep freed heap memory mapped for the rest of the process (glibc's ``mallopt``): a speed setting, not a model.

The fast L2 evaluation (:mod:`iomodel.cache.stream`, :mod:`iomodel.cache.dkdv_closed`) of a long sequence builds
numpy temporaries of about 1 MiB (one int64 per key or query tile: 131,072 tiles at 2^24 tokens) by the hundred.
glibc's ``malloc`` serves blocks from 128 KiB up with ``mmap`` until its threshold adapts, and gives the top of
its heap back to the kernel once more than its trim threshold is free there, so the next temporary of that size
pages its memory in again: a minor page fault per 4 KiB page. Measured on the 2-core CPU this project is timed on
(2026-12-06, nineteenth session; ``receipts/raw/l2-speed-cpu-2026-12-06-i.txt``): twenty pairs of such temporaries took
9,376 page faults and 881-1,122 µs a pair with glibc's defaults, none and 97-101 µs with the memory kept
(``benchmarks/heap_probe.py``: 1.7-2.2 µs a fault on that virtual machine; ``tests/test_heap.py`` counts the faults);
the causal GQA training-step estimate at 2^24 tokens (32 query heads on 8 KV heads, HEAD_DIM 128) took about 8,000
faults and 58-94 ms as the second estimate of that length in a fresh process, none and 42-47 ms with the memory kept,
and in ``benchmarks/l2_speed.py``'s run of every length up to 4,039 faults and 42.2-53.7 ms against none and
39.4-41.2 ms (the first estimate of a process still pages in the memory it touches first: about 3,000 faults,
52-60 ms).

:func:`keep_freed_memory` sets ``M_MMAP_THRESHOLD`` to 32 MiB (the ceiling of glibc's dynamic threshold,
``DEFAULT_MMAP_THRESHOLD_MAX``, and the largest value ``mallopt`` takes on 64-bit systems: smaller blocks come from the
heap and are reused after ``free``) and ``M_TRIM_THRESHOLD`` to 1 GiB (free memory at the top of the
heap stays mapped up to that much). The process keeps its peak heap resident until it exits; results do not
change (the same arithmetic). The ``iomodel`` console script calls it at start (not :func:`iomodel.cli.main` called
in-process with an argument list, as the tests do); a program that imports iomodel as a library may call it itself. Source: ``mallopt(3)``, the Linux man-pages project ("M_MMAP_THRESHOLD",
"M_TRIM_THRESHOLD").
"""

from __future__ import annotations

import ctypes
import sys

#: ``mallopt`` parameters (glibc's malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: Blocks below this many bytes come from the heap (glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems).
MMAP_THRESHOLD_BYTES = 32 * 2**20
#: Free bytes at the top of the heap kept mapped.
TRIM_THRESHOLD_BYTES = 2**30

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Ask glibc's ``malloc`` to keep freed memory mapped (module doc): ``M_MMAP_THRESHOLD`` =
    :data:`MMAP_THRESHOLD_BYTES`, ``M_TRIM_THRESHOLD`` = :data:`TRIM_THRESHOLD_BYTES` (bytes). Once per process.

    Returns:
        True where both settings took (Linux with glibc's ``mallopt``), False elsewhere (musl, macOS, Windows, a
        32-bit glibc that refuses a 32 MiB threshold: the allocator is left as it is; only the speed differs).

    Raises:
        nothing.

    Source: ``mallopt(3)`` (Linux man-pages).
    """
    global _applied
    if _applied is None:
        _applied = False
        if not sys.platform.startswith("linux"):  # glibc's mallopt; Windows' CDLL(None) is no library at all
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: the C library it runs on
        except (OSError, AttributeError, TypeError):  # no symbol table to open, or a C library without mallopt (musl)
            return False
        mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
        _applied = (mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
                    and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1)
    return _applied


#: The probe :func:`probe_temporaries` runs in a fresh interpreter: ``PAIRS`` pairs of 1 MiB temporaries
#: (``np.minimum(128, 2**24 - i * 128)`` over 131,072 int64: one int64 per 128-row tile of a 2^24-token sequence),
#: after one pair that pages its memory in either way. It prints what :func:`keep_freed_memory` returned, called twice
#: (nothing without it), then µs per pair and the minor page faults (``getrusage``) of the pairs.
_PROBE = """
import resource, sys, time
import numpy as np
if sys.argv[1] == "kept":
    from iomodel.cache.heap import keep_freed_memory
    print(keep_freed_memory(), keep_freed_memory())
pairs = int(sys.argv[2])
i = np.arange(131072, dtype=np.int64)
np.minimum(128, 2**24 - i * 128)
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.perf_counter()
for _ in range(pairs):
    np.minimum(128, 2**24 - i * 128)
t = time.perf_counter() - t0
print(t * 1e6 / pairs, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


def probe_temporaries(keep: bool, pairs: int = 20) -> tuple[list[bool], float, int]:
    """The page faults ``pairs`` pairs of 1 MiB numpy temporaries take in a fresh interpreter (this one's heap has its
    own history, and the setting cannot be undone), with or without :func:`keep_freed_memory` first: what that
    returned, called twice ([] without it), the pairs' wall time (µs per pair) and their minor page faults (each
    pages in 4 KiB). Used by ``tests/test_heap.py`` (the fault counts) and ``benchmarks/heap_probe.py`` (a fault's
    cost: time difference over fault difference).

    Raises:
        IomodelError: the interpreter failed (its last line of standard error said).
    """
    import os
    import subprocess

    from iomodel.errors import IomodelError

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", _PROBE, "kept" if keep else "default", str(pairs)],
                          capture_output=True, text=True, timeout=120, env=env)
    if proc.returncode:
        raise IomodelError(f"the heap probe failed: {(proc.stderr.strip().splitlines() or ['no message'])[-1]}")
    out = proc.stdout.split()
    return [w == "True" for w in out[:-2]], float(out[-2]), int(out[-1])

