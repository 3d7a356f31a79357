"""iomodel.cache.heap: freed heap memory kept mapped (glibc), counted in page faults, not timed.

Each probe runs in a fresh interpreter (:func:`iomodel.cache.heap.probe_temporaries`): the setting is process-wide
and cannot be undone, and the test process's heap has its own history."""

from __future__ import annotations

import os
import platform
import sys

import pytest

from iomodel.cache import heap

glibc = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not sys.platform.startswith("linux")
    or any(k.startswith("MALLOC_") or k == "GLIBC_TUNABLES" for k in os.environ),
    reason="glibc's malloc with its stock settings (no MALLOC_* or GLIBC_TUNABLES in the environment)")


@glibc
def test_kept_heap_takes_no_page_fault_for_the_next_temporaries():
    """The same 20 pairs of 1 MiB temporaries: with glibc's defaults each pages its memory in again (about 256
    faults a MiB: 9,376 on the development machine), with the memory kept none does. Both counts are asserted,
    so the probe can tell the two apart."""
    (applied, _, kept), (_, _, default) = heap.probe_temporaries(True), heap.probe_temporaries(False)
    assert applied == [True, True]  # applied, and once per process
    assert kept < 100
    assert default > 20 * 256  # at least one MiB paged in per loop: the setting is what removes them


def test_the_two_settings_are_asked_for(monkeypatch):
    """Exactly M_MMAP_THRESHOLD (-3) at 32 MiB and M_TRIM_THRESHOLD (-1) at 1 GiB, once per process: the fault count
    above tells kept from default but not one setting from both (each alone leaves a long estimate thousands of
    faults: a reviewer's count, 5,391 with the mmap threshold alone and 1,353-3,817 with the trim threshold alone)."""
    calls = []

    class FakeLibc:
        def __init__(self, name):
            assert name is None

        class mallopt:  # noqa: N801  (the C function's name)
            argtypes = restype = None

            def __new__(cls, param, value):
                calls.append((param, value))
                return 1

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setattr(heap.ctypes, "CDLL", FakeLibc)
    assert heap.keep_freed_memory() is True and heap.keep_freed_memory() is True
    assert calls == [(-3, 32 * 2**20), (-1, 2**30)]


def test_a_refused_setting_is_false(monkeypatch):
    """mallopt returns 0 for a value it does not take (a 32-bit glibc refuses the 32 MiB threshold): False."""

    class FakeLibc:
        def __init__(self, name):
            pass

        class mallopt:  # noqa: N801
            def __new__(cls, param, value):
                return 0

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setattr(heap.ctypes, "CDLL", FakeLibc)
    assert heap.keep_freed_memory() is False


@pytest.mark.parametrize("platform_name", ["win32", "darwin"])
def test_other_platforms_are_false_without_a_library_call(monkeypatch, platform_name):
    """Windows (where ``CDLL(None)`` raises TypeError) and macOS: False, the C library not opened."""

    def no_call(name):
        raise AssertionError("CDLL opened")

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap.sys, "platform", platform_name)
    monkeypatch.setattr(heap.ctypes, "CDLL", no_call)
    assert heap.keep_freed_memory() is False


def test_no_glibc_mallopt_is_false_not_an_error(monkeypatch):
    """A C library without mallopt (musl, macOS) leaves the allocator as it is and says so (False)."""

    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(heap, "_applied", None)
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setattr(heap.ctypes, "CDLL", NoMallopt)
    assert heap.keep_freed_memory() is False
    assert heap.keep_freed_memory() is False
