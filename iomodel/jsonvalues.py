"""Typed reads of values from JSON files the user hands in: one line naming the field, or the value.

The readers of measurement records (:mod:`iomodel.measure.records`), benchmark receipts
(:mod:`iomodel.bench.receipt`) and measured-point overlays call these on every field they
use, so a damaged file (a string where a number belongs, ``true``, ``null``, a negative or
non-finite number, a list where an object belongs) stops with one :class:`IomodelError`
line that says where the field is and what it must be, never with a traceback or a value
printed as ``nan B``.

Each function takes ``where`` (the file and the path of the field inside it, e.g.
``"receipt 'x.json': bucket 'prefill' shape 'b1 1k' sdpa-flash: time_s.median"``) and
``fix`` (what to do, ending the line); the message is ``f"{where} must be {what}, got
{describe(value)}: {fix}"``.

>>> number(3.0, "x")
3.0
>>> number("3", "kernels[0].metrics['dram__bytes_read.sum']", what="a number of bytes")
Traceback (most recent call last):
...
iomodel.errors.IomodelError: kernels[0].metrics['dram__bytes_read.sum'] must be a number of bytes, got the string '3': fix the file
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from iomodel.errors import IomodelError

#: The last words of every message unless the caller says otherwise.
DEFAULT_FIX = "fix the file"


class _DuplicateKey(Exception):
    """A key given twice in one JSON object."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def input_file_problem(path: str | Path) -> tuple[str, bool] | None:
    """What keeps ``path`` from being read as an input file, or None: ``(words, missing)`` with ``missing`` True where
    the caller's own fix applies (it does not exist, or is a folder). ``os.stat`` errors other than a missing file
    (a name too long, a loop of links, no permission on a folder) are said as the system says them, and a device,
    pipe or socket (``/dev/zero``, a FIFO) is not a regular file, which could not be read to its end."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist", True
    except NotADirectoryError:
        return "does not exist (a part of the path is a file, not a folder)", True
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc.__class__.__name__})", False
    except ValueError:  # a NUL byte in the path
        return "is not a usable path (it holds a NUL byte)", False
    if stat.S_ISDIR(mode):
        return "is a folder", True
    if not stat.S_ISREG(mode):
        return "is not a regular file (a device, pipe or socket)", False
    return None


def read_json(path: str | Path, what: str, missing_fix: str, invalid_fix: str) -> Any:
    """The parsed JSON of file ``path``, or one line saying what is wrong with it.

    Args:
        path: the file.
        what: how the message names it (``"receipt"``, ``"measurement file"``).
        missing_fix: what to do when it is missing or a folder (``"pass a receipt JSON ..."``).
        invalid_fix: what to do when it is not valid JSON (``"regenerate it"``).

    Raises:
        IomodelError: the path is a folder or missing, not a regular file (:func:`input_file_problem`),
            unreadable, not valid JSON, holds a key
            twice in one object (JSON would keep the last silently) or a number Python
            cannot convert (an integer literal over 4,300 digits).

    The bytes are decoded by :func:`json.loads`, which reads UTF-8 with or without a byte-order
    mark (Windows editors write one) and UTF-16/UTF-32 (RFC 8259, section 8.1; :func:`json.detect_encoding`).
    """
    p = Path(path)
    problem = input_file_problem(p)
    if problem is not None:
        words, missing = problem
        raise IomodelError(f"{what} {str(p)!r} {words}: {missing_fix if missing else 'pass a readable JSON file'}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise IomodelError(f"{what} {str(p)!r} cannot be read ({exc.strerror or exc}): check its permissions") from None
    return parse_json(data, f"{what} {str(p)!r}", invalid_fix)


def parse_json(data: str | bytes, label: str, invalid_fix: str) -> Any:
    """The parsed JSON of ``data`` (text or bytes, any encoding :func:`read_json` reads), or one line.

    Args:
        label: how the message names the source (``"receipt 'r.json'"``).
        invalid_fix: what to do when it is not valid JSON.

    Raises:
        IomodelError: not valid JSON (nesting too deep included), a key twice in one object, or a
            number Python cannot convert.
    """
    try:
        return json.loads(data, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise IomodelError(f"{label} is not valid JSON ({exc}): {invalid_fix}") from None
    except _DuplicateKey as exc:
        raise IomodelError(f"{label} gives the key {exc.args[0]!r} twice in one object (JSON keeps only "
                           f"the last, silently): {invalid_fix}") from None
    except ValueError as exc:  # an integer literal longer than Python's int-string conversion limit
        raise IomodelError(f"{label} holds a number iomodel cannot read ({exc}): {invalid_fix}") from None


def describe(value: Any) -> str:
    """A JSON value as an error message shows it: its JSON type and a short form of its text.

    >>> describe(None), describe(True), describe("12"), describe(float("nan")), describe([1])
    ('null', 'the boolean true', "the string '12'", 'nan (not a finite number)', 'a JSON array')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {text!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} (not a finite number)"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, dict):
        return "a JSON object"
    return repr(value)


def _finite(value: int | float) -> bool:
    """Finite and representable as a float (a JSON integer beyond ~1.8e308 is not: arithmetic on it overflows)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _fail(where: str, what: str, value: Any, fix: str) -> IomodelError:
    return IomodelError(f"{where} must be {what}, got {describe(value)}: {fix}")


def number(value: Any, where: str, *, what: str = "a finite number, 0 or more", minimum: float | None = 0.0,
           positive: bool = False, integer: bool = False, allow_none: bool = False,
           fix: str = DEFAULT_FIX) -> Any:
    """``value`` if it is a JSON number (not a boolean), finite, and in range; None if allowed.

    Args:
        value: the parsed JSON value.
        where: the file and field, for the message.
        what: how the message says what the field must be.
        minimum: the smallest allowed value (None: no lower bound).
        positive: the value must be above 0.
        integer: the value must be a whole number (``3.0`` counts; returned as ``int``).
        allow_none: ``null`` is allowed (returned as None).
        fix: the end of the message.

    Returns:
        the value (an ``int`` when ``integer``), or None.

    Raises:
        IomodelError: any other value.
    """
    if value is None and allow_none:
        return None
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and _finite(value) \
        and (minimum is None or value >= minimum) and (not positive or value > 0) \
        and (not integer or float(value).is_integer())
    if not ok:
        raise _fail(where, what, value, fix)
    return int(value) if integer else value


def _typed(value: Any, types: type | tuple[type, ...], what: str, where: str, allow_none: bool, fix: str) -> Any:
    """``value`` if it is an instance of ``types`` (or None when ``allow_none``), else one line saying ``what``."""
    if (value is None and allow_none) or isinstance(value, types):
        return value
    raise _fail(where, what + (" or null" if allow_none else ""), value, fix)


def string(value: Any, where: str, *, allow_none: bool = False, fix: str = DEFAULT_FIX) -> str | None:
    """``value`` if it is a JSON string (or null when ``allow_none``); else IomodelError."""
    return _typed(value, str, "a string", where, allow_none, fix)


#: Longest name (shape id, bucket name) a record or receipt may hold: names are printed in tables.
MAX_NAME_CHARS = 200


def name(value: Any, where: str, *, fix: str = DEFAULT_FIX) -> str:
    """``value`` if it is a printable string of 1 to :data:`MAX_NAME_CHARS` characters (a name that
    goes into tables and messages: no control or bidirectional-override characters); else
    IomodelError, with the value shown escaped."""
    text = _typed(value, str, "a name", where, False, fix)
    if not text or len(text) > MAX_NAME_CHARS or not text.isprintable() or any(
            ch in text for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"):
        shown = ascii(text[:60]) + ("..." if len(text) > 60 else "")
        raise IomodelError(f"{where} must be a printable name of 1 to {MAX_NAME_CHARS} characters, got {shown}: {fix}")
    return text


def boolean(value: Any, where: str, *, allow_none: bool = False, fix: str = DEFAULT_FIX) -> bool | None:
    """``value`` if it is ``true`` or ``false`` (or null when ``allow_none``); else IomodelError."""
    return _typed(value, bool, "true or false", where, allow_none, fix)


def mapping(value: Any, where: str, *, allow_none: bool = False, fix: str = DEFAULT_FIX) -> dict[str, Any] | None:
    """``value`` if it is a JSON object (or null when ``allow_none``); else IomodelError."""
    return _typed(value, dict, "a JSON object", where, allow_none, fix)


def array(value: Any, where: str, *, allow_none: bool = False, fix: str = DEFAULT_FIX) -> list[Any] | None:
    """``value`` if it is a JSON array (or null when ``allow_none``); else IomodelError."""
    return _typed(value, list, "a JSON array", where, allow_none, fix)


def numbers(value: Any, where: str, *, what: str = "a non-empty array of positive finite numbers",
            fix: str = DEFAULT_FIX) -> list[Any]:
    """``value`` if it is a non-empty JSON array of positive finite numbers (timing samples, seconds).

    Raises:
        IomodelError: not an array, empty, or an element that is not such a number (named by index).
    """
    if not isinstance(value, list) or not value:
        raise _fail(where, what, value, fix)
    for i, x in enumerate(value):
        number(x, f"{where}[{i}]", what="a positive finite number", positive=True, fix=fix)
    return value


def choice(value: Any, where: str, choices: tuple[str, ...], *, fix: str = DEFAULT_FIX) -> str:
    """``value`` if it is one of the strings ``choices``; else one line listing them.

    >>> choice("bwd", "bucket 'b': pass", ("fwd", "fwd+bwd"))
    Traceback (most recent call last):
    ...
    iomodel.errors.IomodelError: bucket 'b': pass must be "fwd" or "fwd+bwd", got the string 'bwd': fix the file
    """
    if isinstance(value, str) and value in choices:
        return value
    names = [f'"{c}"' for c in choices]
    what = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    raise _fail(where, what, value, fix)


def field(obj: dict[str, Any], key: str, where: str, *, fix: str = DEFAULT_FIX) -> Any:
    """``obj[key]``, or one line saying the field is missing.

    Raises:
        IomodelError: ``key`` is not in ``obj``.
    """
    if key not in obj:
        raise IomodelError(f"{where} has no {key!r} field: {fix}")
    return obj[key]


__all__ = ["DEFAULT_FIX", "array", "boolean", "choice", "describe", "field", "mapping", "number", "numbers", "string"]
