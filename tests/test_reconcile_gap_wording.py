"""The reconcile report's "within only by the absolute floor" lines read the way a kernel engineer reads them.

A prediction of 0 B (or a few bytes) against some KiB measured was written ``(-100%)``:
(predicted − measured) / measured, correct but read as "the model is off by everything". The
sentence (:func:`iomodel.reconcile.gap_sentence`) now says ``none predicted`` (or ``none
measured``), a multiple beyond a factor of two either way, and always the gap in bytes and as a
share of all bytes the shape moved at that level; the Markdown report and the console print the
same sentences.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iomodel.reconcile import gap_sentence

HOLDOUT = Path(__file__).resolve().parent.parent / "receipts" / "ncu-h200-holdout4-flush-2026-11-29.json"


@pytest.mark.parametrize("p, m, moved, want", [
    (0, 321.2 * 1024, 513.9 * 2**20,
     "predicted 0 B, measured 321.2 KiB (none predicted); the gap is 321.2 KiB, 0.06% of the 513.9 MiB "
     "the shape moved at HBM"),
    (159, 0, 12.3 * 2**20,
     "predicted 159 B, measured 0 B (none measured); the gap is 159 B, under 0.01% of the 12.3 MiB "
     "the shape moved at HBM"),
    (2.8 * 2**20, 2.5 * 2**20, 41.6 * 2**20,
     "predicted 2.8 MiB, measured 2.5 MiB (+12%); the gap is 307.2 KiB, 0.72% of the 41.6 MiB "
     "the shape moved at HBM"),
    (105.6 * 1024, 273 * 1024, 470.1 * 2**20,
     "predicted 105.6 KiB, measured 273.0 KiB (measured 2.6× predicted); the gap is 167.4 KiB, 0.03% of the "
     "470.1 MiB the shape moved at HBM"),
    (4, 6.8 * 1024, 12 * 2**20,  # a percentage would read -100%
     "predicted 4 B, measured 6.8 KiB (measured 1,741× predicted); the gap is 6.8 KiB, 0.06% of the 12.0 MiB "
     "the shape moved at HBM"),
    (0.6 * 2**20, 2**20, 50 * 2**20,
     "predicted 614.4 KiB, measured 1.0 MiB (-40%); the gap is 409.6 KiB, 0.80% of the 50.0 MiB the shape moved at HBM"),
    (5 * 2**20, 2**20, 88 * 2**20,
     "predicted 5.0 MiB, measured 1.0 MiB (5.0× measured); the gap is 4.0 MiB, 4.55% of the 88.0 MiB "
     "the shape moved at HBM"),
    (2 * 2**20, 2**20, 100 * 2**20,  # exactly twice: a multiple, not +100%
     "predicted 2.0 MiB, measured 1.0 MiB (2.0× measured); the gap is 1.0 MiB, 1.00% of the 100.0 MiB "
     "the shape moved at HBM"),
    (7, 7, 0, "predicted 7 B, measured 7 B; the gap is 0 B, 0.00% of the 0 B the shape moved at L2"),
])
def test_gap_sentence(p, m, moved, want):
    level = "L2" if moved == 0 else "HBM"
    assert gap_sentence(p, m, moved, level) == want


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_gap_sentence_refuses_what_is_not_bytes(bad):
    with pytest.raises(ValueError, match="must be finite and >= 0"):
        gap_sentence(bad, 10, 100, "HBM")


def test_markdown_and_console_print_the_same_floor_lines(tmp_path, capsys):
    """On the fourth hold-out the report and the console list the same floor sentences, none with a percentage
    where one side is 0: as measured (the constants before 2026-12-06) eleven, three writes predicted 0 B; under the
    forward's own constants (2026-12-06) six, four of them writes predicted 0 B (three of the eleven are now within
    the relative tolerance, two outside any; the list is the receipt's committed "Within only by the absolute
    floor" section, receipts/reconcile-h200-holdout4-flush-2026-11-29.md)."""
    from iomodel.cli import main

    out_md = tmp_path / "r.md"
    with pytest.raises(SystemExit) as exc:
        main(["reconcile", str(HOLDOUT), "--markdown", str(out_md)])
    assert exc.value.code in (0, None)
    console = capsys.readouterr().out
    md = out_md.read_text()
    section = md.split("## Within only by the absolute floor of 1.0 MiB (6)")[1]
    md_lines = re.findall(r"^- `([^`]+)` \((HBM write)\): (.+)$", section, flags=re.M)
    assert len(md_lines) == 6  # 11 before 2026-12-06
    flat = " ".join(console.split())  # rich folds long lines on a narrow terminal
    for shape, what, why in md_lines:
        assert " ".join(f"{shape} ({what}): {why}".split()) in flat
        head = why.split(";")[0]
        if "predicted 0 B" in head or "measured 0 B" in head:
            assert "%" not in head, why
    zero = [why for _, _, why in md_lines if why.startswith("predicted 0 B")]
    assert len(zero) == 4 and all("(none predicted); the gap is" in why for why in zero)
    assert "-100%" not in md and "-100%" not in console
    assert not re.search(r"\(-[5-9]\d%\)", md)  # beyond a factor of two is a multiple, not -50 % to -99 %
