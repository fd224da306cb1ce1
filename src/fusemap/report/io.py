"""Output files: written atomically, through symlinks, into pipes, never onto an input.

A regular file is written to a temporary file beside its target and renamed over it, so
a reader never sees half a file; the target keeps its mode (a new file gets the mode
the umask gives). A symlink is written through to its target. A FIFO or a character
device (``/dev/stdout``) is written as a stream. A directory, another special file, one
of the spec's input files, or a place that cannot be written is refused with one line
naming the path (checked before the work starts, where the CLI can). The temporary file
is removed if anything goes wrong, the process being terminated included.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from ..spec.errors import FusemapError

PLOT_FORMATS = frozenset(
    {"png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp", "pgf"}
)
"""Plot file extensions matplotlib writes."""

_inputs: set[str] = set()


def protect_inputs(paths: Iterable[str | Path]) -> None:
    """Refuse from now on to write over any of ``paths`` (the spec's input files)."""
    _inputs.update(os.path.realpath(p) for p in paths)


def check_output(path: str | Path, what: str = "output") -> Path:
    """Refuse early a target that :func:`write_atomic` would refuse; returns the path to
    open: the real path (symlinks followed) of a file, the path itself of a stream."""
    path = Path(path)
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(path)  # follows symlinks (/dev/stdout -> a pipe)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise FusemapError(f"cannot write {what} {str(path)!r}: {e.strerror}") from None
    if st is not None and _is_stream(st.st_mode):
        return path
    if str(real) in _inputs:
        raise FusemapError(f"{what} {str(path)!r} is one of the input files; not overwriting it")
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise FusemapError(f"cannot write {what} {str(path)!r}: it is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise FusemapError(
                f"cannot write {what} {str(path)!r}: not a regular file, pipe or character device"
            )
        return real
    parent = real.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise FusemapError(f"cannot write {what} {str(path)!r}: {str(parent)!r} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise FusemapError(f"cannot write {what} {str(path)!r}: {str(parent)!r} is not writable")
    return real


def check_plot(path: str | Path) -> Path:
    """:func:`check_output` for a plot, whose extension must name a format matplotlib writes."""
    fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in PLOT_FORMATS:
        known = ", ".join(sorted(PLOT_FORMATS))
        raise FusemapError(
            f"--plot {str(path)!r}: unknown plot format {fmt!r} (use one of {known})"
        )
    return check_output(path, "plot")


def write_atomic(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` (see the module docstring); returns ``path``."""
    path = Path(path)
    target = check_output(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    try:
        if mode is not None and _is_stream(mode):
            with open(target, "wb") as stream:
                stream.write(raw)
            return path
        target.parent.mkdir(parents=True, exist_ok=True)
        _replace(target, raw, stat.S_IMODE(mode) if mode is not None else _default_mode())
    except OSError as e:
        raise FusemapError(f"cannot write {str(path)!r}: {e.strerror or e}") from None
    return path


def _replace(real: Path, raw: bytes, mode: int) -> None:
    """Write a temporary file beside ``real`` and rename it over ``real``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(raw)
        os.replace(tmp, real)
    except BaseException:  # an error, Ctrl-C or a termination signal (see exit_on_signals)
        Path(tmp).unlink(missing_ok=True)
        raise


def _is_stream(mode: int) -> bool:
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _default_mode() -> int:
    """The mode a new file gets: 0o666 without the bits of the umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def exit_on_signals() -> None:
    """Turn SIGTERM and SIGHUP into SystemExit, so cleanup code (temporary files) runs."""

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread, not supported
            signal.signal(sig, stop)
