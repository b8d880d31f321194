"""What a person running ``nemo-cascade run`` reads: our progress (bars on a terminal, plain lines
in a file such as a Slurm log), one line per stage event (started, resumed, skipped, gated,
regression, done: the ``nemo_cascade.events`` logger), our warnings, every error and the final
matrix. The core writes them to :func:`stream` / :func:`out`, the terminal the run was started from;
everything else a worker prints goes to the run's log file, which the launcher sets up
(``tooling/worker_log.py``: it points the process's stdout / stderr at the file and the terminal
here)."""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import TextIO

from tqdm import tqdm

EVENTS = "nemo_cascade.events"
"""The logger of the stage events a person follows a run by; one line each on the console."""
events = logging.getLogger(EVENTS)

# the terminal's stdout / stderr while the process's own go to the log
_console_out: TextIO | None = None
_console_err: TextIO | None = None


def stream() -> TextIO:
    """Where our progress bars, events and error lines go: the terminal the run was started from."""
    return _console_err or sys.stderr


def out() -> TextIO:
    """Where our results (the final summaries and matrix) go: the terminal's stdout, so they can be
    piped."""
    return _console_out or sys.stdout


def use_terminal(out_stream: TextIO, err_stream: TextIO) -> None:
    """Where :func:`out` and :func:`stream` write from now on: the terminal's stdout / stderr kept
    open by the launcher after the process's own file descriptors were pointed at the run's log
    file."""
    global _console_out, _console_err
    _console_out, _console_err = out_stream, err_stream


PROGRESS_SECONDS = "NEMO_CASCADE_PROGRESS_SECONDS"
"""Seconds between two plain progress lines when the console is not a terminal (default 60)."""


class PlainProgress:
    """Progress for a console that is a file (a Slurm log): one whole line per interval and one at
    the end (done, rate, time left, the latest metrics) instead of a bar's carriage-return redraws,
    which a file keeps as one ever-growing line. The few methods of tqdm that callers use."""

    def __init__(self, total: int | None, desc: str, unit: str, initial: int = 0,
                 file: TextIO | None = None,
                 every: float | None = None, clock=time.monotonic):
        self.total, self.desc, self.unit, self.n = total, desc, unit, initial
        self.file, self.clock = file or stream(), clock
        self.every = float(os.environ.get(PROGRESS_SECONDS, 60)) if every is None else every
        self.start_n, self.start = initial, clock()
        self.last, self.postfix, self.closed = self.start, {}, False

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.clock() - self.last >= self.every:
            self._line()

    def set_postfix(self, values: dict) -> None:
        self.postfix = dict(values)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._line()

    def _line(self) -> None:
        now = self.clock()
        self.last = now
        done, elapsed = self.n - self.start_n, now - self.start
        of = "" if self.total is None else f"/{self.total}"
        parts = [f"{self.desc}: {self.n}{of} {self.unit}s"]
        if done > 0 and elapsed > 0:
            per = elapsed / done
            rate = f"{per:.1f} s/{self.unit}" if per >= 1 else f"{1 / per:.1f} {self.unit}s/s"
            parts.append(rate)
            if self.total is not None and self.n < self.total:
                parts.append(f"~{_duration(per * (self.total - self.n))} left")
        parts += [f"{k}={v}" for k, v in self.postfix.items()]
        print(", ".join(parts), file=self.file, flush=True)


def _duration(seconds: float) -> str:
    minutes = round(seconds / 60)
    return f"{seconds:.0f} s" if seconds < 90 else (
        f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60:02d} min")


class _Silent:
    """The progress of a rank or a call that shows none."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, values: dict) -> None:
        pass

    def close(self) -> None:
        pass


def progress(total: int | None, desc: str, unit: str, initial: int = 0, disable: bool = False):
    """A progress display on :func:`stream`: a tqdm bar on a terminal, :class:`PlainProgress` lines
    on a file, nothing when ``disable``; ``total`` None = not known ahead."""
    if disable:
        return _Silent()
    if stream().isatty():
        return tqdm(total=total, initial=initial, desc=desc, unit=unit, dynamic_ncols=True,
                    file=stream())
    return PlainProgress(total, desc, unit, initial)


__all__ = ["EVENTS", "events", "stream", "out", "use_terminal", "progress", "PlainProgress",
           "PROGRESS_SECONDS"]
