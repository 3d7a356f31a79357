"""User-facing errors.

Every bad input (a size that is zero or negative, heads not divisible by KV heads, an
unknown dtype or preset, tiles that cannot fit SRAM, a missing GPU or profiler) raises
:class:`IomodelError` with one sentence that says what to change. The CLI prints that
sentence alone and exits with status 2; it never shows a traceback for these.
"""


class IomodelError(ValueError):
    """A bad input or an unavailable resource, with a one-line message saying what to change.

    Subclasses ``ValueError`` so library callers can catch it generically.
    """

    exit_code = 2
