"""Output paths checked before long work, so a bad path is one line, not a lost run.

Used by ``iomodel reconcile``/``validate`` (plots, JSON, Markdown) and ``iomodel bench``
(receipts): each names the command-line option in its message.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from iomodel.errors import IomodelError


def check_output_dir(path: str | Path, option: str) -> Path:
    """Create folder ``path`` if missing and check that a file can be written in it.

    Args:
        path: the folder.
        option: the command-line option that named it (for the message).

    Returns:
        ``Path(path)``.

    Raises:
        IomodelError: ``path`` is a file, cannot be created, or is not writable.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise IomodelError(f"{option} {out} is a file, not a folder: pass a folder path")
    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=out, prefix=".iomodel-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise IomodelError(f"cannot write into {out} ({exc.strerror or exc}): pass a writable folder to {option}") from None
    return out


def check_output_file(path: str | Path, option: str, what: str = "output file") -> Path:
    """Check that file ``path`` can be written, creating its folder if missing; an existing
    file is opened for appending and left as it is, a new one is created and removed.

    Args:
        path: the file.
        option: the command-line option that named it (for the message).
        what: what the file is, for the message (``receipt JSON``).

    Returns:
        ``Path(path)``.

    Raises:
        IomodelError: ``path`` is a folder, its folder cannot be created, or it cannot be written.
    """
    p = Path(path)
    if p.is_dir():
        raise IomodelError(f"the {what} path {p} is a folder: pass a file path such as {p / 'out.json'} with {option}")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise IomodelError(f"cannot create the folder {p.parent} for the {what} "
                           f"({exc.strerror or type(exc).__name__}): pass a writable path with {option}") from None
    try:
        if p.exists():
            with open(p, "ab"):
                pass
        else:
            with open(p, "xb"):
                pass
            p.unlink()
    except OSError as exc:
        raise IomodelError(f"cannot write the {what} {p} ({exc.strerror or type(exc).__name__}): "
                           f"pass a writable path with {option}") from None
    return p


def write_text(path: str | Path, text: str, option: str) -> Path:
    """Write ``text`` to ``path`` (folder created), turning OS errors into one-line IomodelErrors.

    Raises:
        IomodelError: the file cannot be written.
    """
    p = check_output_file(path, option)
    try:
        p.write_text(text)
    except OSError as exc:
        raise IomodelError(f"cannot write {p} ({exc.strerror or exc}): pass a writable path to {option}") from None
    return p
