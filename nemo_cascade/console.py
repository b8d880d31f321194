"""What a person running ``nemo-cascade run`` reads: our progress bars, one line per stage event (started,
resumed, skipped, gated, regression, done: the ``nemo_cascade.events`` logger), our warnings, every error and
the final matrix. The core writes them to :func:`stream` / :func:`out`, the terminal the run was started from;
everything else a worker prints goes to the run's log file, which the launcher sets up
(``tooling/worker_log.py``: it points the process's stdout / stderr at the file and the terminal here)."""
from __future__ import annotations

import logging
import sys
from typing import TextIO

EVENTS = "nemo_cascade.events"
"""The logger of the stage events a person follows a run by; one line each on the console."""
events = logging.getLogger(EVENTS)

_console_out: TextIO | None = None  # the terminal's stdout / stderr while the process's own go to the log
_console_err: TextIO | None = None


def stream() -> TextIO:
    """Where our progress bars, events and error lines go: the terminal the run was started from."""
    return _console_err or sys.stderr


def out() -> TextIO:
    """Where our results (the final summaries and matrix) go: the terminal's stdout, so they can be piped."""
    return _console_out or sys.stdout


def use_terminal(out_stream: TextIO, err_stream: TextIO) -> None:
    """Where :func:`out` and :func:`stream` write from now on: the terminal's stdout / stderr kept open by the
    launcher after the process's own file descriptors were pointed at the run's log file."""
    global _console_out, _console_err
    _console_out, _console_err = out_stream, err_stream


__all__ = ["EVENTS", "events", "stream", "out", "use_terminal"]
