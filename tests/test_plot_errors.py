"""One error path for plots: bad overlay points refused by name, whole files or none (issue 10)."""

from __future__ import annotations

import math

import pytest

from iomodel.errors import IomodelError
from iomodel.report.plot import PLOT_FILES, write_plots
from iomodel.spec.resolve import resolve_layer


@pytest.fixture(scope="module")
def small():
    return resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, causal=False,
                         block_m=32, block_n=16, num_stages=1)


def test_fwd_bwd_writes_all_three_plots(tmp_path):
    lay = resolve_layer(heads=2, kv_heads=1, head_dim=16, dtype="fp16", seqlen=64, passes="fwd+bwd",
                        block_m=32, block_n=16, num_stages=1)
    written = write_plots(lay.spec, lay.tiling, lay.hardware, tmp_path)
    assert sorted(p.name for p in written) == sorted(PLOT_FILES.values())
    assert all(p.stat().st_size > 10_000 for p in written)


@pytest.mark.parametrize("value", ["30000", -5, 0, math.nan, math.inf, True, None])
def test_bad_overlay_value_is_one_line_and_nothing_is_written(small, tmp_path, value):
    # the bad point sits in the last plot drawn: the two before it must not be left behind
    measured = {"seqlen": [{"seqlen": 64, "bytes": 30_000}], "sram": [{"sram_bytes": 2**16, "bytes": value}]}
    with pytest.raises(IomodelError, match=r"measured point 0: 'bytes' must be a positive finite number") as exc:
        write_plots(small.spec, small.tiling, small.hardware, tmp_path, measured=measured)
    assert "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_plot_folder_is_one_line(small, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(IomodelError, match="cannot create the plot folder"):
        write_plots(small.spec, small.tiling, small.hardware, blocker / "plots")


def test_overlay_must_map_kinds_to_lists(small, tmp_path):
    with pytest.raises(IomodelError, match="must be a list"):
        write_plots(small.spec, small.tiling, small.hardware, tmp_path, measured={"seqlen": {"seqlen": 1}})


def test_outputs_get_a_plain_file_mode(tmp_path):
    """Atomic writes go through a 0600 temporary file: the result has the mode a plain new file gets."""
    import os

    from iomodel.paths import write_text

    mask = os.umask(0o022)
    try:
        p = write_text(tmp_path / "out.md", "x", "-o")
    finally:
        os.umask(mask)
    assert p.read_text() == "x" and (p.stat().st_mode & 0o777) == 0o644
    assert [q.name for q in tmp_path.iterdir()] == ["out.md"]  # no temporary file left behind


def test_outputs_through_links_and_onto_devices(tmp_path):
    """A link is followed (its target rewritten, the link kept); /dev/null is written, not replaced."""
    import os
    import stat

    from iomodel.paths import write_text

    target = tmp_path / "target.md"
    target.write_text("old")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    write_text(link, "new", "-o")
    assert link.is_symlink() and target.read_text() == "new"
    write_text("/dev/null", "x" * 1000, "-o")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader, so the write does not block
    try:
        write_text(fifo, "through the pipe", "-o")
        assert os.read(fd, 100) == b"through the pipe" and stat.S_ISFIFO(os.stat(fifo).st_mode)
    finally:
        os.close(fd)
