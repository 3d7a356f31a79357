"""Output paths checked before long work, and outputs written whole or not at all.

Used by ``iomodel reconcile``/``validate`` (plots, JSON, Markdown), ``iomodel worksheet``
and ``plot``, and ``iomodel bench`` (receipts): each names the command-line option in its
message. :func:`write_bytes` and :func:`write_text` write a temporary file beside the
target and rename it over the target (``os.replace``, atomic on POSIX), so a full disk or
a crash leaves the old file or none, never half a file.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError
from iomodel.jsonvalues import input_file_problem


def shown(path: str | Path) -> str:
    r"""A path as a message shows it on one line: as given when every character is printable,
    else Python's quoted form with escapes (a name holding a newline is shown ``'a\nb.md'``).

    >>> shown("out/ws.md"), shown("a\nb.md")
    ('out/ws.md', "'a\\nb.md'")
    """
    text = str(path)
    return text if text.isprintable() else repr(text)


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
    if not str(path).strip():  # Path("") is the current folder: a silent substitution
        raise IomodelError(f"{option} is empty: pass a folder (it is created if missing)")
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


def refuse_folder(path: str | Path, option: str, what: str = "output file") -> None:
    """Refuse an output file path that names a folder: an existing one, or ``dir/`` (a trailing separator).

    Args:
        path: the path as given (a str keeps its trailing ``/``, which :class:`~pathlib.Path` drops).
        option: the command-line option that named it (for the message).
        what: what the file is, for the message.

    Raises:
        IomodelError: ``path`` is empty or a folder.
    """
    if not str(path).strip():
        raise IomodelError(f"the {what} path is empty: pass a file path with {option}")
    p = Path(path)
    if p.is_dir() or str(path).endswith(("/", os.sep)):  # "dir/" names a folder even where none exists yet
        raise IomodelError(f"the {what} path {str(path)} is a folder: pass a file path in it with {option}")


def refuse_input_as_output(path: str | Path, option: str, inputs: dict[str, Path | None]) -> None:
    """Refuse an output file that is one of the command's inputs (the same file, by path or by a link to it):
    writing it would replace what was read, e.g. ``iomodel reconcile x.json --json x.json`` replacing a receipt with
    its reconciliation.

    Args:
        path: the output file; option: the option that named it; inputs: each input's name (``the receipt``,
            ``the sweep``) and path (None: not given).

    Raises:
        IomodelError: one line naming the option and the input it would overwrite.
    """
    out = Path(path)
    for name, given in inputs.items():
        if given is None:
            continue
        same = out.resolve() == Path(given).resolve()
        if not same and out.exists() and Path(given).exists():
            with contextlib.suppress(OSError):
                same = os.path.samefile(out, given)
        if same:
            raise IomodelError(f"{option} {str(path)!r} is {name} this command reads ({str(given)!r}): writing it would "
                               f"replace it; give {option} another path")


def check_output_file(path: str | Path, option: str, what: str = "output file") -> Path:
    """Check that file ``path`` can be written, creating its folder if missing to try it; an existing
    file is opened for appending and left as it is, a new one is created and removed, and the folders
    created for the check are removed again (the writer makes them: a command refused after this check
    leaves nothing behind).

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
    refuse_folder(path, option, what)
    blocker = next((a for a in p.parents if a.exists() and not a.is_dir()), None)
    if blocker is not None:  # mkdir would say only "File exists"
        raise IomodelError(f"cannot create the folder {p.parent} for the {what}: {blocker} is a file, not a folder: "
                           f"pass a writable path with {option}")
    made = [a for a in (p.parent, *p.parent.parents) if not a.exists()]  # the folders this check creates, deepest first
    try:
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
    finally:  # nothing left behind: a command refused after this check leaves no empty folder (the writer makes it)
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()
    return p


def _umask() -> int:
    """The process's file-creation mask (read by setting and restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_bytes(path: str | Path, data: bytes, option: str) -> Path:
    """Write ``data`` to ``path`` atomically (temporary file in the same folder, then rename).

    Args:
        path: the file (its folder is created if missing).
        data: the bytes to write.
        option: the command-line option that named it (for the message).

    Returns:
        ``Path(path)``.

    A symbolic link is followed (the file it points to is replaced, the link kept); a path
    that is not a regular file (``/dev/null``, a FIFO) is written in place, never replaced.

    Raises:
        IomodelError: the folder cannot be created, or the file cannot be written (read-only
            folder, full disk): nothing is left at ``path`` but what was there before.
    """
    p = Path(path)
    if p.is_dir():
        raise IomodelError(f"the output path {p} is a folder: pass a file path with {option}")
    if p.is_symlink():  # write the file the link points to, and keep the link
        p = p.resolve()
    if p.exists() and not p.is_file():  # a device (/dev/null), a FIFO: written in place, never replaced
        try:
            with open(p, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise IomodelError(f"cannot write {p} ({exc.strerror or type(exc).__name__}): "
                               f"pass a writable path with {option}") from None
        return Path(path)
    tmp = None
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        # mkstemp's 0600 would outlive the rename: the existing file's mode, else a plain new file's
        os.fchmod(fd, (p.stat().st_mode & 0o7777) if p.exists() else 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise IomodelError(f"cannot write {p} ({exc.strerror or type(exc).__name__}): "
                           f"pass a writable path with {option}") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p


def write_text(path: str | Path, text: str, option: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; see :func:`write_bytes`.

    Raises:
        IomodelError: the file cannot be written.
    """
    return write_bytes(path, text.encode("utf-8"), option)


def exit_code_of(step: Callable[[], object]) -> int:
    """Run one output step of a benchmark script (checking or writing its ``--out`` file): 0 where it works, else
    the :class:`~iomodel.errors.IomodelError`'s message as one ``error:`` line on stderr and 2 (the CLI's code)."""
    try:
        step()
    except IomodelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def argument_error(message: str) -> None:
    """A benchmark script's bad argument: one ``error:`` line on stderr and exit status 2 (the CLI's code; argparse
    would print its usage first). Set as ``ArgumentParser.error`` (:func:`one_line_parser`) or called directly.

    Raises:
        SystemExit: always, with code 2.
    """
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def one_line_parser(description: str) -> Any:
    """An ``argparse.ArgumentParser`` whose usage errors (a wrong type, an unknown option) are one
    :func:`argument_error` line and exit status 2."""
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.error = argument_error  # type: ignore[method-assign]
    return ap


def check_probe_start(out: str | Path, rounds: int) -> None:
    """Start of a GPU probe, before any timing: ``out`` can be written (:func:`check_output_file`), ``rounds`` is at
    least 1, and torch sees a CUDA device.

    Raises:
        IomodelError: one line naming what to change.
    """
    check_output_file(out, "--out")
    if rounds < 1:
        raise IomodelError(f"--rounds must be at least 1, got {rounds}: raise it")
    import torch

    if not torch.cuda.is_available():
        raise IomodelError("no CUDA device: run this on the GPU (the device tool)")


def finish_probe_receipt(path: str | Path, receipt: dict, started: float, option: str = "--out") -> Path:
    """End of a GPU probe: record ``receipt["seconds"]`` (wall seconds since ``started``, a
    ``time.time()`` value), write it as indented JSON atomically (:func:`write_text`; values JSON
    cannot hold go through ``str``) and print one line naming the file.

    Raises:
        IomodelError: the file cannot be written.
    """
    import json
    import time

    receipt["seconds"] = time.time() - started
    out = write_text(path, json.dumps(receipt, indent=1, default=str), option)
    print(f"wrote {out} ({receipt['seconds']:.0f} s)")
    return out


def probe_exit_code(path: str | Path | None, receipt: dict, started: float) -> int:
    """The exit status of a probe script's end: 0 with no ``--out`` (``path`` None or empty), else
    :func:`finish_probe_receipt` through :func:`exit_code_of` (0, or one ``error:`` line and 2)."""
    if not path:
        return 0
    return exit_code_of(lambda: finish_probe_receipt(path, receipt, started))


#: The message of TOML nested deeper than the parser's recursion allows (``tomllib`` raises RecursionError at about a
#: thousand levels of arrays or inline tables).
TOML_TOO_DEEP = "arrays or tables nested too deep to read"


def toml_loads(loads: Any, text: str) -> dict:
    """``loads(text)`` (``tomllib.loads`` or tomli's), with nesting too deep for the parser (its RecursionError) raised
    as a ``ValueError`` of :data:`TOML_TOO_DEEP`, which every TOML reader here reports in one line as it reports a
    ``TOMLDecodeError`` (itself a ``ValueError``)."""
    try:
        return loads(text)
    except RecursionError:
        raise ValueError(TOML_TOO_DEEP) from None


def read_toml(path: str | Path, label: str, missing_fix: str) -> dict:
    """The table of a TOML file (``tomllib``; ``tomli`` on Python 3.10), every failure one line
    naming ``label`` (e.g. ``sweep file 'x.toml'``): missing or not a file (then ``missing_fix``),
    unreadable (permissions, I/O), not UTF-8, or not valid TOML (the parser's line and column).

    Raises:
        IomodelError: as above.
    """
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ImportError:
            raise IomodelError("reading TOML files needs Python >= 3.11 or the tomli package: pip install tomli") from None
    p = Path(path)
    problem = input_file_problem(p)
    if problem is not None:
        words, missing = problem
        raise IomodelError(f"{label} {words.replace('is a folder', 'is a directory')}: "
                           f"{missing_fix if missing else 'pass a readable TOML file'}")
    try:
        text = p.read_bytes().decode("utf-8")
    except OSError as exc:
        raise IomodelError(f"{label} cannot be read ({exc.strerror or exc.__class__.__name__}): check its "
                           "permissions") from None
    except UnicodeDecodeError:
        raise IomodelError(f"{label} is not UTF-8 text: save it as UTF-8") from None
    try:
        return toml_loads(tomllib.loads, text)
    except ValueError as exc:  # tomllib.TOMLDecodeError, or nesting too deep
        raise IomodelError(f"{label} is not valid TOML ({exc}): fix the file") from None

