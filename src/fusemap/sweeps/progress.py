"""Progress of a sweep on the terminal (rich): the specs loading, then the points done,
failed and remaining."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from .record import OK, PointRecord


class SweepProgress:
    """Progress bars, or nothing when ``enabled`` is false."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @contextmanager
    def phase(self, description: str, total: int) -> Iterator[Callable[[int, int], None]]:
        """A transient bar (on a terminal only); yields ``step(done, total)``."""
        console = _console()
        if not self.enabled or not console.is_terminal:
            yield lambda done, total: None
            return
        from rich.progress import Progress

        with Progress(transient=True, console=console) as bar:
            task = bar.add_task(description, total=total)
            yield lambda done, total: bar.update(task, completed=done, total=total)

    @contextmanager
    def points(
        self, total: int, before: Iterable[PointRecord]
    ) -> Iterator[Callable[[PointRecord], None]]:
        """The points' bar (counting those finished before); yields ``tick(record)``."""
        done = failed = 0
        for r in before:
            done, failed = done + (r.status == OK), failed + (r.status != OK)
        if not self.enabled:
            yield lambda record: None
            return
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("points"),
            BarColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("left"),
            TimeRemainingColumn(),
        )
        counts = [done, failed]

        def text() -> str:
            left = total - counts[0] - counts[1]
            return f"{counts[0]} done, {counts[1]} failed, {left} remaining"

        with Progress(*columns, console=_console()) as bar:
            task = bar.add_task("points", total=total, completed=done + failed, counts=text())

            def tick(record: PointRecord) -> None:
                counts[record.status != OK] += 1
                bar.update(task, completed=counts[0] + counts[1], counts=text())

            yield tick


def _console():
    from rich.console import Console

    return Console(stderr=True)
