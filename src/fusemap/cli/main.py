"""The entry point: user errors become one line and exit status 2 (``--debug``: the
traceback)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer

from ..spec.errors import FusemapError
from .app import app, debugging

if TYPE_CHECKING:
    from typer._click.exceptions import ClickException


def main() -> None:
    """Entry point: run the app, turning user errors into one line and exit status 2."""
    from ..report.io import exit_on_signals

    exit_on_signals()
    try:
        app(standalone_mode=False)
    except FusemapError as err:
        if debugging():
            raise
        # One line, whatever the message quotes (a multi-line expression, YAML text).
        typer.echo("error: " + " ".join(str(err).splitlines()), err=True)
        sys.exit(2)
    except (typer.Exit, SystemExit) as ex:
        sys.exit(getattr(ex, "exit_code", getattr(ex, "code", 0)))
    except typer.Abort:
        sys.exit(130)
    except MemoryError:
        if debugging():
            raise
        typer.echo(_OUT_OF_MEMORY.format(peak=_peak_gb()), err=True)
        sys.exit(1)
    except Exception as err:
        if isinstance(err, _usage_error_type()):  # bad command-line usage
            err.show()
            sys.exit(2)
        if debugging():
            raise
        text = " ".join(f"{type(err).__name__}: {err}".splitlines())
        typer.echo(
            f"error: internal error, please report it: {text} (--debug shows the traceback)",
            err=True,
        )
        sys.exit(1)


_OUT_OF_MEMORY = (
    "error: out of memory ({peak:.1f} GB at the peak): this problem needs more memory than "
    "the machine (or its limit) gives; fewer workers (-j 1) hold less at once, and a "
    "smaller problem (fewer tokens, a smaller batch) maps in less"
)


def _peak_gb() -> float:
    """This process's peak resident memory, in GB (Linux reports kilobytes)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def _usage_error_type() -> type[ClickException]:
    """The exception class of command-line usage errors (recent typer vendors click)."""
    try:
        from typer._click.exceptions import ClickException
    except ImportError:  # older typer: the click package
        # The same class from the other package (no subclass of the vendored one).
        from click.exceptions import ClickException  # type: ignore[assignment]
    return ClickException
