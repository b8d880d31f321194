"""A pool of killable worker processes with a hard per-item timeout, for verifiers that may hang.

Why processes that are killed, not threads or signal alarms: a verifier fed model output can spin
forever inside C code or sympy (``10^{10^{10^{10}}}``), and ``signal.alarm`` works only in the main
thread of the main interpreter (docs/install.md), so neither a thread nor an in-process timeout can
stop it. Here each item runs in a worker process; an item that overruns its timeout gets its worker
SIGKILLed, the item is reported as ``"timeout"``, and a fresh worker takes the slot. A worker that
dies mid-item (segfault, ``os._exit``, OOM kill) is reported as ``"crashed"`` and replaced the same
way.

Process model, chosen to be safe inside the trainer:
- workers are fresh interpreters (``sys.executable -c``: fork + immediate exec), never a fork of the
  trainer with its threads, CUDA context and locks; unlike multiprocessing's "spawn" they do not
  re-import the trainer's ``__main__``, so scripts need no ``if __name__ == "__main__":`` guard to
  score a sample;
- started lazily on the first :meth:`WorkerPool.map`, stopped by :meth:`WorkerPool.close`, when the
  pool is garbage-collected, and at interpreter exit (``weakref.finalize``); every stopped worker is
  ``wait()``-ed, so no zombies remain;
- a worker exits by itself when its parent goes away (pipe EOF, or a changed parent pid) and ignores
  SIGINT (Ctrl-C reaches the trainer, which then stops its workers);
- an optional address-space limit turns a runaway allocation into ``MemoryError`` ("error") instead
  of an OOM kill of the whole machine.

The function and its arguments travel by pickle, so the function must be importable (defined at
module top level, not in ``__main__``). The pool is thread-safe: concurrent :meth:`map` calls run
one after another.
"""
from __future__ import annotations

import logging
import os
import pickle
import resource
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import Counter, deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Optional, Sequence

logger = logging.getLogger(__name__)

_PARENT_CHECK_S = 1.0
"""How often an idle worker checks that its parent is still alive (the pipe EOF covers most
cases)."""
_MAX_START_FAILURES = 3
"""Consecutive workers dying before they report ready: something is wrong with the environment;
raise."""


@dataclass(frozen=True)
class ItemResult:
    """Outcome of one item: ``status`` is ``"ok"`` (``value`` is the function's return value),
    ``"error"`` (it raised; ``detail`` names the exception), ``"timeout"`` or ``"crashed"`` (its
    worker was killed or died; the worker has been replaced)."""
    status: str
    value: Any = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def num_cores() -> int:
    """CPU cores this process may run on: the default pool size."""
    return len(os.sched_getaffinity(0))


# -------------------------------------------------------------------------------------- worker side

def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


def _run_item(fn: Callable, args: tuple) -> bytes:
    """One item's reply, pickled here so that an unpicklable return value becomes an "error", not a
    crash."""
    try:
        return pickle.dumps(("ok", fn(*args)))
    # reported to the caller as status "error"; SystemExit etc. end the worker
    except Exception as exc:
        return pickle.dumps(("error", _describe(exc)))


def serve(read_fd: int, write_fd: int) -> None:
    """Worker main loop (runs in the child): receive the setup, report ready, then answer items
    until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    items, replies = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    sys_path, memory_limit, fn_bytes, initializer_bytes = items.recv()
    sys.path[:] = sys_path  # before unpickling: the function's module must import as in the parent
    try:
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        fn = pickle.loads(fn_bytes)
        initializer = pickle.loads(initializer_bytes)
        if initializer is not None:
            initializer()
        hello = ("ready", os.getpid())
    except Exception as exc:
        hello = ("error", _describe(exc))
    try:
        replies.send(hello)
        while hello[0] == "ready":
            if not items.poll(_PARENT_CHECK_S):
                if os.getppid() != parent:
                    return
                continue
            try:
                args = items.recv()
            except EOFError:
                return
            replies.send_bytes(_run_item(fn, args))
    except (BrokenPipeError, ConnectionResetError):
        return  # the parent died (killed mid-run): nobody is left to answer, and nothing to say


# -------------------------------------------------------------------------------------- parent side

class _Worker:
    """One child process and its two pipes; ``job`` is ``(item index, deadline)`` while an item is
    in flight."""

    def __init__(self, setup: tuple, start_timeout_s: float):
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        bootstrap = f"from {__name__} import serve; serve({child_reads}, {child_writes})"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", bootstrap],
                                         pass_fds=(child_reads, child_writes),
                                         stdin=subprocess.DEVNULL)
        finally:
            os.close(child_reads)
            os.close(child_writes)
        self.replies = Connection(parent_reads, writable=False)
        self.items = Connection(parent_writes, readable=False)
        self.ready = False
        self.start_deadline = time.monotonic() + start_timeout_s
        self.job: Optional[tuple[int, float]] = None
        self.items.send(setup)

    def kill(self) -> None:
        self.items.close()
        self.replies.close()
        self.proc.kill()
        self.proc.wait()

    def stop(self, grace_s: float) -> None:
        """Ask the worker to exit (EOF on its item pipe); kill it if it has not within
        ``grace_s``."""
        self.items.close()
        self.replies.close()
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _stop_workers(workers: list[_Worker], owner_pid: int, grace_s: float = 2.0) -> None:
    """Stop and reap every worker (in place: the list is emptied). In a forked copy of the owner the
    workers are the owner's, not ours: drop the references and leave the processes alone."""
    if os.getpid() == owner_pid:
        for worker in workers:
            if worker.job is None:
                worker.stop(grace_s)
            else:  # busy: it would finish its item first; nobody waits for that reply
                worker.kill()
    workers.clear()


class WorkerPool:
    """``num_workers`` processes that run ``fn(*args)`` for each args tuple given to :meth:`map`,
    each item under a hard timeout. ``initializer()`` runs once per worker before it takes items
    (imports, warm-up); ``memory_limit_mb`` caps each worker's address space."""

    def __init__(self, fn: Callable, num_workers: Optional[int] = None, timeout_s: float = 10.0,
                 initializer: Optional[Callable[[], None]] = None,
                 memory_limit_mb: Optional[int] = None,
                 start_timeout_s: float = 120.0):
        for f in (fn, initializer):
            if f is not None and getattr(f, "__module__", None) == "__main__":
                raise ValueError(f"{f.__qualname__} is defined in __main__; worker processes can "
                                 "only run functions importable from a module")
        self.num_workers = num_workers or num_cores()
        if self.num_workers < 1 or timeout_s <= 0:
            raise ValueError(f"WorkerPool needs num_workers >= 1 and timeout_s > 0, "
                             f"got {self.num_workers} and {timeout_s}")
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        memory_limit = memory_limit_mb * 2 ** 20 if memory_limit_mb else None
        self._setup_tail = (memory_limit, pickle.dumps(fn), pickle.dumps(initializer))
        self.counts: Counter = Counter()
        """Items by final status since the pool was made: a metric for the trainer (timeouts,
        crashes)."""
        self._workers: list[_Worker] = []
        self._owner_pid = os.getpid()
        self._lock = threading.Lock()
        self._start_failures = 0
        weakref.finalize(self, _stop_workers, self._workers, self._owner_pid)

    @property
    def pids(self) -> list[int]:
        """Process ids of the current workers (empty before the first map and after close)."""
        return [w.proc.pid for w in self._workers]

    def map(self, args_list: Sequence[tuple],
            timeout_s: Optional[float] = None) -> list[ItemResult]:
        """Run ``fn(*args)`` for every args tuple, in parallel; results in input order. Each item
        gets ``timeout_s`` (default: the pool's) of wall time from the moment its worker receives
        it."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            if os.getpid() != self._owner_pid:
                raise RuntimeError("a WorkerPool cannot be used from a forked copy of its owner "
                                   "process")
            results: list[Optional[ItemResult]] = [None] * len(args_list)
            pending = deque(enumerate(args_list))
            try:
                while len(self._workers) < self.num_workers:
                    self._workers.append(self._new_worker())
                while pending or any(w.job for w in self._workers):
                    self._dispatch(pending, timeout_s)
                    self._collect(results)
            except BaseException:
                # Interrupted mid-batch: in-flight replies would reach the next batch; end those
                # workers.
                for k, worker in enumerate(self._workers):
                    if worker.job is not None:
                        self._replace(k)
                raise
            self.counts.update(r.status for r in results)
            return results

    def close(self) -> None:
        """Stop and reap all workers. The pool stays usable: the next :meth:`map` starts new
        ones."""
        with self._lock:
            _stop_workers(self._workers, self._owner_pid)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals

    def _new_worker(self) -> _Worker:
        return _Worker((list(sys.path),) + self._setup_tail, self.start_timeout_s)

    def _replace(self, k: int) -> None:
        self._workers[k].kill()
        self._workers[k] = self._new_worker()

    def _dispatch(self, pending: deque, timeout_s: float) -> None:
        """Give each ready, idle worker the next pending item. A worker found dead on send had not
        started the item: replace the worker and keep the item pending."""
        for k, worker in enumerate(self._workers):
            if not pending:
                return
            if not worker.ready or worker.job is not None:
                continue
            index, args = pending.popleft()
            try:
                worker.items.send(args)
            except OSError:  # BrokenPipeError: it died while idle
                pending.appendleft((index, args))
                self._replace(k)
                continue
            worker.job = (index, time.monotonic() + timeout_s)

    def _collect(self, results: list) -> None:
        """Wait for the first reply, death or deadline among the workers, and handle everything that
        is due."""
        waiting = [w for w in self._workers if w.job is not None or not w.ready]
        deadlines = [w.job[1] if w.job else w.start_deadline for w in waiting]
        wait([w.replies for w in waiting], timeout=max(0.0, min(deadlines) - time.monotonic()))
        for k, worker in enumerate(self._workers):
            if worker in waiting:
                self._handle(k, worker, results)

    def _handle(self, k: int, worker: _Worker, results: list) -> None:
        """Read the worker's reply if one is there, else enforce its deadline."""
        if worker.replies.poll():
            try:
                status, value = worker.replies.recv()
            # died: mid-item it is a crash; before ready, a start failure
            except (EOFError, OSError):
                status, value = "crashed", "the worker process died"
        elif time.monotonic() >= (worker.job[1] if worker.job else worker.start_deadline):
            status, value = "timeout", "no reply before the deadline"
        else:
            return
        if worker.job is None:
            self._handle_start(k, status, value)
            return
        index, _ = worker.job
        worker.job = None
        if status == "ok":
            results[index] = ItemResult("ok", value)
        elif status == "error":  # the function raised; the worker is fine
            results[index] = ItemResult("error", detail=value)
        else:
            results[index] = ItemResult(status, detail=value)
            logger.warning("worker item %d: %s; worker %d replaced", index, status, worker.proc.pid)
            self._replace(k)

    def _handle_start(self, k: int, status: str, value: Any) -> None:
        if status == "ready":
            self._workers[k].ready = True
            self._start_failures = 0
            return
        if status == "error":  # the function or initializer cannot load: no worker will ever work
            raise RuntimeError(f"worker setup failed: {value}")
        self._start_failures += 1
        if self._start_failures >= _MAX_START_FAILURES or status == "timeout":
            raise RuntimeError(f"worker processes fail to start ({status}, {self._start_failures} "
                               "in a row)")
        self._replace(k)


_SHARED: dict[tuple, WorkerPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(fn: Callable, num_workers: Optional[int] = None,
                initializer: Optional[Callable] = None,
                memory_limit_mb: Optional[int] = None) -> WorkerPool:
    """The process-wide pool for this function and settings, made on first use (its workers start on
    its first map; pass each batch's timeout to :meth:`WorkerPool.map`). One pool per verifier keeps
    the worker count at the core count however many reward functions share it; a forked child gets
    its own."""
    key = (fn, num_workers, initializer, memory_limit_mb, os.getpid())
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = WorkerPool(fn, num_workers, initializer=initializer,
                                      memory_limit_mb=memory_limit_mb)
        return _SHARED[key]


__all__ = ["WorkerPool", "ItemResult", "shared_pool", "num_cores", "serve"]
