"""The ``iomodel`` command line: a thin typer layer over library functions.

Each subcommand lives in ``iomodel/commands/<name>.py`` and exposes ``register(app)``; a
command module that fails to import fails the whole CLI (no command is skipped quietly).
Command modules import sympy, numpy, matplotlib and torch inside their functions only, so
``iomodel --help`` stays fast. Every :class:`~iomodel.errors.IomodelError` becomes one line
on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

import iomodel
from iomodel.commands import bench, plot, presets, reconcile, validate, worksheet
from iomodel.errors import IomodelError

app = typer.Typer(
    name="iomodel",
    help="How many bytes an attention layer moves between HBM, L2 and SRAM: model, worksheet, "
    "plots, kernel profiling, reconciliation and benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"iomodel {iomodel.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[Optional[bool], typer.Option("--version", help="Print the version and exit.",
                                                    callback=_print_version, is_eager=True)] = None,
) -> None:
    """How many bytes an attention layer moves between HBM, L2 and SRAM, and proof against a real kernel."""


#: Subcommand modules, in the order ``--help`` lists them.
COMMANDS = (worksheet, plot, presets, validate, reconcile, bench)

for _command in COMMANDS:
    _command.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``iomodel`` console script (exit 2 with one line on bad input).

    Usage errors that typer finds (an unknown option, ``--batch 1.5``, ``--programs-per-sm nan``)
    and a single-valued option given twice (``--batch 1.5 --batch 2``, which typer would settle by keeping the last)
    are one line too, naming the option and the command's ``--help``, with typer's exit status
    (2). :class:`IomodelError` from any command is printed as one line. Standard output that
    cannot be written (a full device, a closed pipe) is one line on standard error and exit
    status 2 as well (files are written atomically: see :mod:`iomodel.paths`). Run as the console script
    (``argv`` None), freed heap memory stays mapped for the process (:func:`iomodel.cache.heap.keep_freed_memory`: the
    long estimates' temporaries reuse it); an in-process call with an argument list leaves the allocator as it is.
    """
    if argv is None:  # the console script: the fast L2 evaluation's temporaries reuse the heap (iomodel.cache.heap)
        from iomodel.cache.heap import keep_freed_memory

        keep_freed_memory()
    repeated = _repeated_option(sys.argv[1:] if argv is None else list(argv))
    if repeated is not None:
        _error_line(repeated)
        sys.exit(2)
    try:
        code = app(args=argv, prog_name="iomodel", standalone_mode=False)
    except IomodelError as exc:
        _error_line(str(exc))
        sys.exit(exc.exit_code)
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        _error_line("aborted")
        sys.exit(1)
    except typer.TyperException as exc:  # typer's usage errors: its message, without the usage box
        ctx = getattr(exc, "ctx", None)
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        if message.strip():  # a bare ``iomodel`` has printed the help already: no empty error line
            hint = f" (see '{ctx.command_path} --help')" if getattr(ctx, "command_path", None) else ""
            _error_line(f"{message}{hint}")
        sys.exit(getattr(exc, "exit_code", 2))
    except OSError as exc:  # writing standard output failed: ENOSPC on a full device, EPIPE on a closed pipe
        _quiet_stdout()
        with contextlib.suppress(OSError):
            if exc.filename is not None:  # a named file (an input the checks did not catch): name it, not the output
                print(f"error: {str(exc.filename)!r}: {exc.strerror or exc}: check the path", file=sys.stderr)
            else:
                print(f"error: cannot write the output ({exc.strerror or exc}): write it to a file with -o, "
                      "or to a device with space", file=sys.stderr)
        sys.exit(2)
    if isinstance(code, int) and not isinstance(code, bool) and code:  # typer.Exit(code) of a command
        sys.exit(code)
    sys.exit(0)  # a normal run ends in SystemExit(0), as typer's standalone mode did (in-process callers rely on it)


def _repeated_option(args: list[str]) -> str | None:
    """The sentence for a single-valued option of the subcommand given twice, or None.

    ``--batch 1.5 --batch 2``: click keeps the last value, so the first would be dropped unseen; the same for two
    spellings of one parameter (``--causal --no-causal``, ``-o a.md --output b.md``) and for a flag given twice
    (refused too, though click would accept it: one spelling a parameter is enough). Counted with click's own
    parser (values, ``=``, attached short values and ``--`` as it reads them); options that take several values
    (``multiple``) may repeat; ``--help`` and anything the parser refuses are left to typer."""
    names = [a.split("=", 1)[0] for a in args if a.startswith("-") and a != "--"]
    if (len(set(names)) == len(names) and all(n.startswith("--") and not n.startswith("--no-") for n in names)
            or "--help" in args):
        return None  # no spelling twice, no short or negative alias: nothing to look up (the commands are not built)
    sub = next((a for a in args if not a.startswith("-")), None)
    command = getattr(typer.main.get_command(app), "commands", {}).get(sub) if sub is not None else None
    if command is None:
        return None
    from typer._click import Context

    try:
        _, _, order = command.make_parser(Context(command, info_name=sub, resilient_parsing=True)).parse_args(
            args=args[args.index(sub) + 1:])
    except Exception:  # an unknown option, a missing value: typer says it in one line
        return None
    seen: set[str] = set()
    for p in order:
        if getattr(p, "param_type_name", "") != "option" or p.multiple:
            continue
        if p.name in seen:
            return (f"option {'/'.join((*p.opts, *p.secondary_opts))} is given more than once: give it once "
                    f"(see 'iomodel {sub} --help')")
        seen.add(p.name)
    return None


def _error_line(text: str) -> None:
    """Print ``error: text`` as one line on standard error (a newline in a path or value is shown as \\n)."""
    one_line = text.replace("\r", "\\r").replace("\n", "\\n")
    Console(stderr=True).print(f"[bold red]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's final flush raises nothing more."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    main()
