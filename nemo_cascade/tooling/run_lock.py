"""One writer per run folder: a lease file, ``RUN_DIR/run.lock``, taken before anything is written
and held for the run's life by ``nemo-cascade run`` (and ``launch``, and ``eval`` into a run's stage
folder).

Why a lease file and not ``flock``/``fcntl``: run folders live on the cluster's shared file system,
and there locks are not to be trusted — Lustre refuses ``flock`` unless mounted ``-o flock``
(``localflock`` makes it node-local: two nodes both "hold" it), NFS routes it through the lock
manager (NLM, or NFSv4 leases), which ``nolock`` mounts and many container setups disable, and a
lock the server forgets on a restart is silently gone. Creating a name atomically is the one
primitive all of them honour:

- the lock is created with ``link(2)`` from a unique candidate file beside it (the portable recipe
  of open(2)'s man page): ``link`` fails if the name exists, atomically, on local file systems, NFS
  v2–v4, Lustre, GPFS, BeeGFS and CephFS. A lost NFS reply to a retried ``link`` is caught by the
  candidate's link count. (``O_CREAT | O_EXCL`` is atomic too on NFSv3+ and the others, not on
  NFSv2; it is the fallback where hard links are refused, e.g. some FUSE file systems.)
- the holder refreshes the lock's mtime every :data:`BEAT_S` seconds (a heartbeat thread). A holder
  on this machine (same host, boot and PID namespace) is checked directly: is its PID alive with the
  start time it wrote? One elsewhere — a requeued Slurm job on another node, a container — cannot
  be, so its lock is stale once :data:`MISSED_BEATS` beats are missed. The beat's age is measured
  against a file the contender creates in the same folder, so both times come from the file system's
  clock (on NFS the server's, which sets both), never from two nodes' clocks. A contender that finds
  a recent beat from elsewhere waits until either the next beat arrives (the holder lives: refused)
  or the lease runs out (taken over).
- a takeover is serialised by a second name, ``run.lock.takeover``, so two contenders never both
  replace a stale lock; the winner re-reads the lock under it before removing it.
- a holder that finds its lock gone or someone else's (it was stopped longer than the lease, e.g.
  SIGSTOP or a frozen node) stops its run instead of writing beside the new holder.

The run's own processes (torchrun's workers, launch's tasks) inherit the lock through :data:`ENV`.
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional
import signal

from nemo_cascade.errors import CascadeError

LOCK_NAME = "run.lock"
BEAT_S = 5.0
"""Seconds between the holder's heartbeats (a ``utime`` of the lock: one metadata write)."""
MISSED_BEATS = 6
"""A lock from another machine whose last beat is older than this many beats (30 s) is stale."""
ENV = "NEMO_CASCADE_RUN_LOCK"
"""``<lock path>:<token>`` in the environment of the holder's children: they run under its lock."""


class RunLocked(CascadeError):
    """The run folder is held by another live process (one line naming it), or cannot be locked."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as it wrote itself into the file."""
    host: str
    pid: int
    since: float
    command: str
    token: str
    boot_id: str = ""
    pid_ns: str = ""
    # the process's start time in clock ticks since boot (/proc/PID/stat): PIDs are reused
    start: str = ""

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"{self.command or 'a process'} on host {self.host}, pid {self.pid}, since {since}"


def _read_first_line(path: str) -> str:
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def _start_time(pid: int) -> str:
    """The process's start time (field 22 of /proc/PID/stat, after the parenthesised name); '' if
    unknown."""
    stat = _read_first_line(f"/proc/{pid}/stat")
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def _pid_ns() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def me(command: str) -> Holder:
    pid = os.getpid()
    return Holder(host=socket.gethostname(), pid=pid, since=time.time(), command=command,
                  token=secrets.token_hex(8),
                  boot_id=_read_first_line("/proc/sys/kernel/random/boot_id"),
                  pid_ns=_pid_ns(), start=_start_time(pid))


def _parse(text: str) -> Optional[Holder]:
    try:
        d = json.loads(text)
        return Holder(**{k: d[k] for k in Holder.__dataclass_fields__ if k in d})
    except (ValueError, TypeError, KeyError):
        return None


def read_holder(lock: Path) -> tuple[Optional[Holder], Optional[float]]:
    """(the holder, its last beat as an mtime); (None, None) when there is no lock, (None, mtime)
    when it is unreadable (being written by the O_EXCL fallback, or damaged). Opened, not stat-ed:
    on NFS an open revalidates the cached attributes (close-to-open consistency), so the beat is the
    server's latest."""
    try:
        with open(lock) as f:
            return _parse(f.read()), os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None, None


def judge_here(holder: Holder) -> Optional[str]:
    """For a holder on this machine: why it is gone, '' if it is alive; None when its PID cannot be
    checked from here (another host, another boot, another PID namespace) and only its beats can
    tell."""
    here = me("")
    if holder.host != here.host:
        return None
    if holder.boot_id and here.boot_id and holder.boot_id != here.boot_id:
        return "the machine restarted since"
    if holder.pid_ns != here.pid_ns:
        return None
    start = _start_time(holder.pid)
    if start:
        return ("" if not holder.start or start == holder.start
                else f"no process {holder.pid} (its PID was reused)")
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return f"no process {holder.pid}"
    except PermissionError:
        pass
    return ""


class RunLock:
    """A held (``owned``) or inherited lock; :meth:`release` ends it. Owned: a heartbeat thread
    refreshes it and calls ``on_lost`` (default: a line on stderr and SIGTERM to this process) if it
    was taken over."""

    def __init__(self, path: Path, holder: Holder, owned: bool, beat_s: float = BEAT_S,
                 on_lost: Optional[Callable[[str], None]] = None):
        self.path, self.holder, self.owned, self.beat_s = path, holder, owned, beat_s
        self.on_lost = on_lost or _stop_this_process
        self._stop = threading.Event()
        self._thread = None
        if owned:
            self._thread = threading.Thread(target=self._beat, name="run-lock-heartbeat",
                                            daemon=True)
            self._thread.start()

    @property
    def env_value(self) -> str:
        return f"{self.path}:{self.holder.token}"

    def _beat(self) -> None:
        while not self._stop.wait(self.beat_s):
            current, _ = read_holder(self.path)
            if current is None or current.token != self.holder.token:
                why = f"taken by {current.describe()}" if current else "removed"
                self.on_lost(
                    f"nemo-cascade: error: the lock {self.path} was {why} while this run held it "
                    f"(its heartbeat stopped for over {self.beat_s * MISSED_BEATS:.0f} s?); "
                    "stopping")
                return
            try:
                os.utime(self.path)  # times=None: on NFS the server sets its own time
            except OSError:
                # a file-system hiccup: the next beat tries again; the lease allows
                # MISSED_BEATS of them
                pass

    def release(self) -> None:
        """Stop beating and remove the lock if it is still this holder's (an inherited one is left
        alone)."""
        if not self.owned:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        current, _ = read_holder(self.path)
        if current is not None and current.token == self.holder.token:
            self.path.unlink(missing_ok=True)
        self.owned = False

    def __enter__(self) -> "RunLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _stop_this_process(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # the launcher's torchrun stops its workers on SIGTERM


def _create(name: Path, candidate: Path) -> bool:
    """Create ``name`` atomically with the candidate's content; False if it exists."""
    links = os.stat(candidate).st_nlink  # the takeover guard may already be a link of it
    try:
        os.link(candidate, name)
        return True
    except FileExistsError:
        return False
    except OSError as e:
        # no hard links here
        if e.errno in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            return _create_exclusive(name, candidate.read_bytes())
        try:  # NFS: the reply to a retried link can be lost though the link was made
            if os.stat(candidate).st_nlink > links:
                return True
        except OSError:
            pass
        raise


def _create_exclusive(name: Path, content: bytes) -> bool:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(content)
    return True


def inherited(run_dir: str | Path) -> Optional[RunLock]:
    """The lock of ``run_dir`` if this process runs under it: :data:`ENV` names it with the holder's
    token."""
    value = os.environ.get(ENV, "")
    path, _, token = value.rpartition(":")
    lock = Path(run_dir) / LOCK_NAME
    if not token or Path(path) != lock.absolute():
        return None
    holder, _ = read_holder(lock)
    return (RunLock(lock, holder, owned=False)
            if holder is not None and holder.token == token else None)


def acquire(run_dir: str | Path, command: str, *, beat_s: float = BEAT_S,
            missed: int = MISSED_BEATS,
            notice: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
            on_lost: Optional[Callable[[str], None]] = None) -> RunLock:
    """Hold ``run_dir``'s lock (the folder is created). Returns the inherited lock when this process
    runs under it (:func:`inherited`). A live holder: :class:`RunLocked`, naming it. A dead one:
    taken over, with one ``notice`` line. ``command`` is what the lock says holds it (``nemo-cascade
    run``)."""
    run_dir = Path(run_dir).absolute()
    found = inherited(run_dir)
    if found is not None:
        return found
    run_dir.mkdir(parents=True, exist_ok=True)
    lock, mine = run_dir / LOCK_NAME, me(command)
    candidate = run_dir / f".{LOCK_NAME}.{mine.token}.tmp"
    try:
        for _ in range(5):  # a few rounds of contention; each ends in a win, a refusal or a re-read
            # rewritten: its mtime is the fs's "now"
            candidate.write_text(json.dumps(mine.__dict__) + "\n")
            if _create(lock, candidate):
                return RunLock(lock, mine, owned=True, beat_s=beat_s, on_lost=on_lost)
            holder, gone = _judge(lock, candidate, beat_s, missed)
            if holder is None and gone is None:
                continue  # released meanwhile
            if not gone:
                who = holder.describe() if holder else "a process whose lock cannot be read"
                raise RunLocked(
                    f"{run_dir} is in use by {who} (lock {lock}); wait for it to end, or stop it")
            if _take_over(lock, candidate, holder.token if holder else None, beat_s * missed):
                notice(f"nemo-cascade: took over the lock {lock} from "
                       f"{holder.describe() if holder else 'an unreadable lock'}: {gone}")
                return RunLock(lock, mine, owned=True, beat_s=beat_s, on_lost=on_lost)
        raise RunLocked(f"{lock}: other processes keep taking this lock; try again")
    finally:
        candidate.unlink(missing_ok=True)


def _judge(lock: Path, candidate: Path, beat_s: float,
           missed: int) -> tuple[Optional[Holder], Optional[str]]:
    """(holder, why it is gone — '' if alive); (None, None) if the lock vanished. A holder on this
    machine is judged by its PID at once; any other by its beats, waiting for the next one while the
    lease runs."""
    holder, beat = read_holder(lock)
    if beat is None:
        return None, None
    here = judge_here(holder) if holder else None
    if here is not None:
        return holder, here
    lease = beat_s * missed
    while True:
        age = _fs_now(candidate) - beat
        if age > lease:
            return holder, f"no heartbeat for {age:.0f} s (a lease of {lease:.0f} s)"
        time.sleep(min(beat_s, lease - age + 0.1))
        again, later = read_holder(lock)
        if later is None or (again and holder and again.token != holder.token):
            return None, None  # released or replaced meanwhile: look again
        if later != beat:
            return holder, ""  # it beat: alive


def _fs_now(candidate: Path) -> float:
    """The file system's "now": the mtime it gives the candidate on a touch (NFS: the server's
    clock, the one that stamped the holder's beats; the local clock if the touch fails)."""
    try:
        os.utime(candidate)
        return os.stat(candidate).st_mtime
    except OSError:
        return time.time()


def _take_over(lock: Path, candidate: Path, stale_token: Optional[str], lease: float) -> bool:
    """Replace the stale lock (still ``stale_token``'s) by this candidate, under
    ``run.lock.takeover``."""
    guard = lock.with_name(LOCK_NAME + ".takeover")
    if not _create(guard, candidate):
        try:
            age = _fs_now(candidate) - os.stat(guard).st_mtime
        except FileNotFoundError:
            return False
        if age < lease:
            raise RunLocked(f"{guard}: another process is taking over this run's lock; try again")
        guard.unlink(missing_ok=True)  # left by a contender killed mid-takeover
        if not _create(guard, candidate):
            return False
    try:
        current, _ = read_holder(lock)
        if current is not None and current.token != stale_token:
            return False  # someone else took it over first: judge that one
        lock.unlink(missing_ok=True)
        return _create(lock, candidate)
    finally:
        guard.unlink(missing_ok=True)
