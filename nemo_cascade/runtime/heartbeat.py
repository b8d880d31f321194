"""Each rank's heartbeat, and the stall watchdog that reads it (docs/reliability.md, "A stalled
rank").

Each rank records its phase (generate, score, train, sync, save, gate; ``step`` between them)
and beats whenever it advances. A thread per rank watches its own beat: past the phase's limit it
records the stall (naming the rank with the oldest beat of all), rank 0 says it in one console
line, every rank dumps its threads' stacks into its log and exits :data:`STALL_EXIT`, which the
Slurm batch shells requeue on. Every file operation of the watchdog is bounded in time: the stall
may be a dead mount under the run folder itself.
"""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

from . import console, stop_request
from .faults import stall_point
from .files import write_text_atomically

STALL_EXIT = stop_request.EXIT_CODE
"""The exit code of a stalled run: a stopped run's, which the batch shells requeue on."""
BETWEEN = "step"
"""The phase of a rank between the named ones (loading, preparing data, logging)."""
SCALE = 3.0
"""A phase's limit is at least this many times the longest gap between its beats seen so far."""
WRITE_EVERY_SECONDS = 5.0
"""A rank's heartbeat file is rewritten on every phase change, and at most this often within
a phase."""
LAST_WORDS_SECONDS = 30.0
FILE_SECONDS = 10.0
"""The longest the watchdog waits on one file operation (the run folder may be the stalled
mount)."""
GRACE_POLLS = 2
"""Polls the first rank to stop waits, so that the others dump their stacks before the job ends."""
FOLDER = "heartbeats"

_current: "Heartbeat | None" = None


class Heartbeat:
    """One rank's heartbeat (``run_dir/heartbeats/rank<R>.json``) and its watchdog thread."""

    def __init__(self, run_dir: Path, rank: int, limit_seconds: float,
                 poll_seconds: float | None = None, clock: Callable[[], float] = time.time):
        self.folder, self.rank = Path(run_dir) / FOLDER, rank
        self.limit, self.clock = limit_seconds, clock
        self.poll = poll_seconds or max(1.0, min(30.0, limit_seconds / 10))
        self.started = clock()
        self.phase_name, self.detail = BETWEEN, ""
        self.since = self.beat = self.started
        self.longest: dict[str, float] = {}
        self.visits: dict[str, int] = {}
        self.advances: dict[str, int] = {}  # beats within each phase, for the record
        self.last_words: list[Callable[[], None]] = []
        self._written = 0.0
        self._lock = threading.Lock()
        self._file_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ the rank's side
    def enter(self, name: str, detail: str = "", back: bool = False) -> tuple[str, str]:
        """Start phase ``name`` (``back``: return to it after an inner phase); returns the phase it
        replaces."""
        with self._lock:
            before = self.phase_name, self.detail
            self._gap()
            if not back:
                self.visits[name] = self.visits.get(name, 0) + 1
            self.phase_name, self.detail = name, detail or self.detail
            self.since = self.beat = self.clock()
        self._write(force=True)
        return before

    def advance(self) -> None:
        """The rank made progress within its phase."""
        with self._lock:
            self._gap()
            self.beat = self.clock()
            self.advances[self.phase_name] = self.advances.get(self.phase_name, 0) + 1
        self._write()

    def _gap(self) -> None:
        gap = self.clock() - self.beat
        self.longest[self.phase_name] = max(self.longest.get(self.phase_name, 0.0), gap)

    def limit_of(self, phase: str) -> float:
        return max(self.limit, SCALE * self.longest.get(phase, 0.0))

    def _write(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._written < WRITE_EVERY_SECONDS:
            return
        self._written = now
        with self._file_lock:  # threads that beat together share the temporary file's name
            self._write_record()

    def _write_record(self) -> None:
        with self._lock:
            record = {"rank": self.rank, "host": socket.gethostname(), "pid": os.getpid(),
                      "phase": self.phase_name, "detail": self.detail, "since": self.since,
                      "beat": self.beat, "visits": dict(self.visits),
                      "advances": dict(self.advances)}
        # a full disk must not fail the step: the watchdog reads its own rank from memory
        with contextlib.suppress(OSError):
            write_text_atomically(self.folder / f"rank{self.rank}.json", json.dumps(record) + "\n")

    # ------------------------------------------------------------------ the watchdog's side
    def start(self) -> "Heartbeat":
        self._write(force=True)
        self._thread = threading.Thread(target=self._watch, name="stall-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.poll + 5)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            stall = self.check()
            if stall is not None:
                self.halt(stall)

    def check(self) -> dict | None:
        """The stall this rank must stop for: its own (recorded for every rank), or one another rank
        recorded after this process started; None while everything advances. The files are read and
        written with a bound: a stall may be a dead mount under the run folder itself."""
        marker = self.folder / "stall.json"
        seen = _bounded(lambda: _read(marker), FILE_SECONDS)
        if seen and seen.get("at", 0) >= self.started:
            return seen
        with self._lock:
            phase, detail, beat = self.phase_name, self.detail, self.beat
        waited, limit = self.clock() - beat, self.limit_of(phase)
        if waited <= limit or self._another_rank_advances(limit):
            return None
        stall = {"rank": self.rank, "phase": phase, "detail": detail, "seconds": waited,
                 "limit": limit, "at": self.clock()}
        return _bounded(lambda: self._record(marker, stall), FILE_SECONDS) or stall

    def _record(self, marker: Path, stall: dict) -> dict:
        """Name the rank with the oldest beat in ``stall`` and record it, unless another rank
        did first."""
        stall = {**stall, **self.stalled_rank(stall["limit"])}
        try:
            with open(marker, "x") as f:
                f.write(json.dumps(stall) + "\n")
        except FileExistsError:
            seen = _read(marker)
            if seen and seen.get("at", 0) >= self.started:
                return seen
            write_text_atomically(marker, json.dumps(stall) + "\n")  # an earlier job's stall
        except OSError:
            pass  # unrecorded: every other rank then finds its own wait past the limit
        return stall

    def _records(self) -> list[dict]:
        """Every rank's last heartbeat of this job (this job's ranks start within seconds of each
        other; a file left by an earlier job is older)."""
        records = [_read(p) for p in self.folder.glob("rank*.json")]
        return [r for r in records if r and "beat" in r and r["beat"] >= self.started - 120]

    def _another_rank_advances(self, limit: float) -> bool:
        """Whether another rank beat within ``limit``: this rank waits for it (in a collective, for
        the longest answers of a step), it does not stall. Once that rank waits too, or stops, every
        beat grows old and the oldest is named. Unreadable files (a dead mount) tell nothing."""
        now = self.clock()
        records = _bounded(self._records, FILE_SECONDS) or []
        return any(r["rank"] != self.rank and now - r["beat"] <= limit for r in records)

    def stalled_rank(self, limit: float) -> dict:
        """The rank, phase and wait of the stalled rank: the oldest beat among the ranks that
        stopped within ``limit`` of the last one to stop. A rank silent for longer than that while
        another still advanced was waiting for it (a collective, the longest answers); ranks that
        stopped together stopped for the first of them."""
        records = self._records()
        if not records:
            return {}
        last = max(r["beat"] for r in records)
        records = [r for r in records if last - r["beat"] <= limit]
        oldest = min(records, key=lambda r: (r["beat"], r["rank"]))
        return {"rank": oldest["rank"], "phase": oldest["phase"],
                "detail": oldest.get("detail", ""), "host": oldest.get("host", ""),
                "seconds": self.clock() - oldest["beat"]}

    def halt(self, stall: dict) -> None:
        """Name the stall (rank 0, on the console), dump the stacks into the log, say the last
        words, and end the process; each step bounded, as the log itself may sit on the stalled
        file system."""
        if self.rank == 0:
            print(f"\nnemo-cascade: error: {stall_line(stall, self.folder.parent)}",
                  file=console.stream(), flush=True)

        def dump() -> None:
            print(f"\n=== stall watchdog: stopping; rank {stall.get('rank')} stalled in "
                  f"{stall.get('phase')} — every thread of rank {self.rank} (pid {os.getpid()}):",
                  file=sys.stderr, flush=True)
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)

        _bounded(dump, FILE_SECONDS)
        for words in self.last_words:
            _bounded(words, LAST_WORDS_SECONDS)
        time.sleep(self.poll * GRACE_POLLS)  # the other ranks read the stall and dump their stacks
        os._exit(STALL_EXIT)


def stall_line(stall: dict, run_dir: Path) -> str:
    """The one console line of a stall."""
    where = f" on {stall['host']}" if stall.get("host") else ""
    detail = f" ({stall['detail']})" if stall.get("detail") else ""
    return (f"rank {stall.get('rank')}{where} stalled in phase {stall.get('phase')}{detail}: "
            f"no progress for {_minutes(stall.get('seconds', 0))} (limit "
            f"{_minutes(stall.get('limit', 0))}, parallel.stall_minutes); every rank's Python "
            f"stacks are in {run_dir / 'logs'}/rank*.log; exit {STALL_EXIT}: a Slurm job requeues "
            f"and resumes from the last checkpoint")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _bounded(fn: Callable[[], object], seconds: float) -> object:
    """``fn()`` in a thread of its own; None when it raises or has not returned within
    ``seconds``."""
    out: list = [None]

    def run() -> None:
        with contextlib.suppress(Exception):
            out[0] = fn()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return out[0]


# ---------------------------------------------------------------------- what the stages call
@contextlib.contextmanager
def watching(run_dir: Path, rank: int, stall_minutes: float) -> Iterator[Heartbeat | None]:
    """This process's heartbeat and watchdog for the block (none when ``stall_minutes`` is 0)."""
    global _current
    if stall_minutes <= 0:
        yield None
        return
    hb = Heartbeat(run_dir, rank, stall_minutes * 60).start()
    _current = hb
    try:
        yield hb
    finally:
        _current = None
        hb.stop()


@contextlib.contextmanager
def phase(name: str, detail: str = "") -> Iterator[None]:
    """The rank is in phase ``name`` for the block (nothing without a watchdog). A test can make
    it stall here (runtime/faults.py)."""
    hb = _current
    before = hb.enter(name, detail) if hb else None
    try:
        stall_point(name)
        yield
    finally:
        if hb:
            hb.enter(*before, back=True)


def where(detail: str) -> None:
    """What the rank works on (``stage math, step 8 of 24``), for the stall's line; counts as
    progress."""
    if _current is not None:
        _current.detail = detail
        _current.advance()


def advance() -> None:
    """The rank made progress within its phase (a finished group, a gate chunk, a wait for a
    served model's restart)."""
    if _current is not None:
        _current.advance()


@contextlib.contextmanager
def last_words(fn: Callable[[], None]) -> Iterator[None]:
    """``fn`` runs if the watchdog stops the process during the block (bounded, errors ignored)."""
    hb = _current
    if hb is None:
        yield
        return
    hb.last_words.append(fn)
    try:
        yield
    finally:
        hb.last_words.remove(fn)


__all__ = ["Heartbeat", "STALL_EXIT", "watching", "phase", "where", "advance", "last_words",
           "stall_line"]
