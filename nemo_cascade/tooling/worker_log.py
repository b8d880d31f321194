"""Where a worker's output goes: the console keeps what a person reads (``runtime/console.py``), the
rest goes to the run's log file.

The console shows our progress bars, one line per stage event (started, resumed, skipped, gated,
regression, done: the ``nemo_cascade.events`` logger), our own warnings, every error, and the final
matrix. The rest — Megatron-Core's gradient-bucket listing and config reprs, Transformer Engine /
Apex fallback warnings, vLLM's start-up log, torch's C++ warnings, third-party progress bars — goes
to the run's log file, ``RUN_DIR/logs/rank<R>.log``, appended to on every (re)start. The worker's
stdout and stderr *file descriptors* are pointed at that file, because much of the chatter bypasses
Python logging (``print``, C++ ``TORCH_WARN``, tqdm bars, vLLM's own non-propagating handler, which
writes to ``sys.stdout``); Python warnings become log records (``logging.captureWarnings``), so
nothing is suppressed, only moved. A worker that dies with a traceback writes it to the log and one
line naming the log to the console.

``--verbose`` leaves the console as it was (everything on it) and still copies every log record into
the file.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

from nemo_cascade.runtime import console

LOG_DIR = "logs"
RECORD_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""Log records as the file (and ``--verbose``'s console) shows them."""


def log_path(run_dir: Path, rank: int) -> Path:
    """A rank's log file in its run folder."""
    return Path(run_dir) / LOG_DIR / f"rank{rank}.log"


class ConsoleFilter(logging.Filter):
    """The records a person reads on the console: every error; on rank 0 also the stage events and
    the project's own warnings (a regression, a discarded stage, a capped context). Other ranks'
    events repeat rank 0's."""

    def __init__(self, main: bool):
        super().__init__()
        self.main = main

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        ours = record.name == "nemo_cascade" or record.name.startswith("nemo_cascade.")
        return self.main and (record.name == console.EVENTS
                              or (ours and record.levelno >= logging.WARNING))


class ConsoleFormatter(logging.Formatter):
    """``14:41:29 stage sft: started (600 steps)`` for an event; the level and logger name for
    anything else."""

    def __init__(self):
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")
        self.other = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s",
                                       datefmt="%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        return (super().format(record) if record.name == console.EVENTS
                else self.other.format(record))


def to_log(path: Path, verbose: bool = False, rank: int = 0) -> Path:
    """Send this process's output to ``path`` (appended) and keep the console for what
    ``ConsoleFilter`` passes; with ``verbose``, the console keeps everything and the file gets a
    copy of every log record. Call once, after ``logging.basicConfig`` and before the heavy imports
    (megatron, vllm), whose handlers bind ``sys.stdout`` / ``sys.stderr`` — the objects stay, their
    file descriptors move."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    logging.captureWarnings(True)  # warnings.warn → the py.warnings logger: into the file, not lost
    root = logging.getLogger()
    header = (f"===== {time.strftime('%Y-%m-%d %H:%M:%S')} nemo-cascade {' '.join(sys.argv[1:])} "
              f"(rank {rank}, pid {os.getpid()}{', --verbose' if verbose else ''}) =====\n")
    if verbose:
        with path.open("a") as f:
            f.write(header)
        handler = logging.FileHandler(path)
        handler.setFormatter(logging.Formatter(RECORD_FORMAT))
        root.addHandler(handler)
        return path
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, header.encode())
    sys.stdout.flush()
    sys.stderr.flush()
    encoding = sys.stderr.encoding or "utf-8"
    terminal_out = open(os.dup(1), "w", buffering=1, encoding=encoding, errors="backslashreplace")
    terminal_err = open(os.dup(2), "w", buffering=1, encoding=encoding, errors="backslashreplace")
    console.use_terminal(terminal_out, terminal_err)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    on_terminal = logging.StreamHandler(terminal_err)
    on_terminal.addFilter(ConsoleFilter(rank == 0))
    on_terminal.setFormatter(ConsoleFormatter())
    root.addHandler(on_terminal)
    previous = sys.excepthook

    def name_the_log(kind, value, tb):
        previous(kind, value, tb)  # the traceback: into the log, with everything before it
        first = (str(value).splitlines() or [""])[0][:200]
        print(f"nemo-cascade: error: rank {rank}: {kind.__name__}: {first} (traceback in {path})",
              file=terminal_err, flush=True)

    sys.excepthook = name_the_log
    return path


__all__ = ["LOG_DIR", "RECORD_FORMAT", "log_path", "ConsoleFilter", "ConsoleFormatter", "to_log"]
