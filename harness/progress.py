"""Progress display for long work: rich on a terminal, plain lines in CI logs."""
from __future__ import annotations

import contextlib
import time

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class ProgressUI:
    def __init__(self, quiet: bool = False):
        self.console = Console(stderr=True)
        self.quiet = quiet

    def note(self, text: str) -> None:
        if not self.quiet:
            self.console.print(f"[dim]·[/dim] {text}")

    def substep(self, text: str) -> None:
        self.note(f"  {text}")

    @contextlib.contextmanager
    def step(self, text: str):
        t0 = time.monotonic()
        if self.quiet:
            yield
            return
        with self.console.status(text):
            yield
        self.console.print(f"[green]✓[/green] {text} [dim]({time.monotonic() - t0:.1f} s)[/dim]")

    @contextlib.contextmanager
    def timed(self, text: str, total: float):
        """A bar over a known duration; the yielded tick(elapsed, **figures) updates it."""
        if self.quiet:
            yield lambda *a, **k: None
            return
        columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                   TextColumn("/"), TimeRemainingColumn(), TextColumn("{task.fields[figures]}")]
        with Progress(*columns, console=self.console, transient=False) as bar:
            task = bar.add_task(text, total=total, figures="")

            def tick(elapsed: float, **figures):
                bar.update(task, completed=min(elapsed, total),
                           figures="  ".join(f"{k} {v}" for k, v in figures.items()))
            yield tick
            bar.update(task, completed=total)
