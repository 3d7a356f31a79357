"""``iomodel bench`` checks that its output can be written before it runs anything (one-line error, exit 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from iomodel.bench.receipt import check_output_paths
from iomodel.cli import main
from iomodel.errors import IomodelError


@pytest.fixture
def no_bench(monkeypatch):
    """Fail the test if the benchmark itself starts."""
    import iomodel.bench.harness as harness

    def boom(*a, **k):
        raise AssertionError("run_bench started before the output paths were checked")

    monkeypatch.setattr(harness, "run_bench", boom)


def _one_line_error(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    assert exc.value.code == 2, (argv, out.out, out.err)
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.out + out.err, out.err
    return lines[0]


def _bench(*args):
    return ["bench", "--device", "cpu", "--reps", "3", "--no-progress", *args]


def test_unwritable_json_path_fails_before_the_run(tmp_path, capsys, no_bench):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = _one_line_error(capsys, _bench("-o", str(blocker / "b.json")))
    assert f"cannot create the folder {blocker}" in line and "pass a writable path with -o" in line
    assert blocker.read_text() == "x"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_the_reviewers_proc_path(capsys, no_bench):
    line = _one_line_error(capsys, _bench("-o", "/proc/x/b.json"))
    assert "/proc/x" in line and "-o" in line


def test_unwritable_markdown_path_fails_before_the_run(tmp_path, capsys, no_bench):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = _one_line_error(capsys, _bench("-o", str(tmp_path / "r.json"), "--markdown", str(blocker / "r.md")))
    assert "receipt Markdown" in line and "--markdown" in line
    assert not (tmp_path / "r.json").exists()  # the check leaves no file behind


def test_folder_or_clashing_paths_are_refused(tmp_path, capsys, no_bench):
    line = _one_line_error(capsys, _bench("-o", str(tmp_path)))
    assert "is a folder" in line and "-o" in line
    line = _one_line_error(capsys, _bench("-o", str(tmp_path / "r.md")))
    assert "would both be" in line


def test_check_output_paths_leaves_no_folder_and_keeps_existing_files(tmp_path):
    """The check tries the missing folders and removes them again (a command refused after it left empty folders: a
    fresh user's finding, 2026-12-07); the writer makes them."""
    from iomodel.paths import write_text

    jp, mp = check_output_paths(tmp_path / "new" / "deep" / "r.json")
    assert not (tmp_path / "new").exists() and mp == jp.with_suffix(".md") and not mp.exists()
    write_text(jp, "{}", "-o")
    assert jp.read_text() == "{}"
    keep = tmp_path / "old.json"
    keep.write_text("{}")
    assert check_output_paths(keep, tmp_path / "old-notes.md") == (keep, tmp_path / "old-notes.md")
    assert keep.read_text() == "{}"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(IomodelError, match="cannot write the receipt JSON"):
            check_output_paths(ro / "r.json")
    finally:
        ro.chmod(0o700)


def test_write_receipt_failure_is_one_sentence(tmp_path):
    from iomodel.bench.receipt import write_receipt

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(IomodelError, match=f"cannot write {Path(blocker / 'r.json')}"):
        write_receipt({}, blocker / "r.json")
