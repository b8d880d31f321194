"""The sandbox: runs one untrusted Python program under bubblewrap with resource limits and a wall
clock.

Code RL executes model-written programs thousands of times per step (paper §4.6), so every run is
isolated:

- **bubblewrap** (``bwrap``, Debian package ``bubblewrap``): new network namespace (no network), new
  PID namespace (every process dies with the sandbox), a root that holds only the OS, read-only
  (``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc``) and the interpreter's install prefix: no
  ``/home``, ``/root``, ``/opt``, ``/var``, ``/run``, ``/mnt`` or ``/work`` — the data, checkpoints
  and this checkout are not there to read, and host services' unix sockets (which a read-only bind
  does not stop ``connect()`` to) are not there to reach. Private size-capped tmpfs on ``/tmp`` (the
  work dir ``/tmp/work``) and ``/dev/shm``; empty tmpfs over ``$HOME``, the caller's cwd and this
  project's checkout should they lie inside the OS directories; cleared environment,
  ``--die-with-parent``, ``--new-session``. As root, bwrap runs without a user namespace (a
  namespaced root could remount the read-only binds) and the program is switched by ``setpriv`` to a
  random unprivileged uid with no capabilities and no-new-privs; as a normal user, bwrap's own user
  namespace does that job.
- **rlimits**, set by ``prlimit`` in the child right before it execs the interpreter (no
  ``preexec_fn``: it can deadlock in a multi-threaded trainer): CPU seconds, address space,
  processes, file size, open files, no core files. Address space is per process, so a program that
  forks could hold ``nproc x memory_bytes``; a **memory watchdog** therefore sums the proportional
  set size (PSS) of every process of the sandbox (read through the sandbox's own ``/proc``) every
  ``_MEMORY_POLL_S`` and kills the run when the sum passes ``memory_bytes``. It polls, so a run can
  overshoot by what it allocates in one period; rlimits still cap the worst case at ``nproc x
  memory_bytes``.
- a **wall clock** that SIGKILLs the whole process group (and, in the sandbox, the PID namespace
  with it), and a **cap on captured output**: a program that writes more than ``output_bytes`` is
  killed, so unbounded output never reaches the trainer's memory. Bytes are decoded as UTF-8 with
  replacement characters.

``unsafe=True`` runs the same command line without bwrap (same rlimits, timeout and cap; no memory
watchdog) for machines where bubblewrap cannot run; nothing else falls back to it silently.

``tests/unit/hostile_programs.py`` holds the attacks these walls are tested against.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

WORK_DIR = "/tmp/work"
"""The program's cwd and its only writable directory (besides /dev/shm), inside the sandbox."""
INSTALL_HINT = ("bubblewrap (bwrap) is required to run model-written code: install it with "
                "`apt-get install bubblewrap`, or pass unsafe=True to run it unsandboxed")
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/dev", "/proc", "/sys", "/tmp")
_ROOT_ENTRIES = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
"""The only entries of the host's root the sandbox gets (read-only; a symlink such as ``/bin ->
usr/bin`` stays a symlink). An allow-list, not ``--ro-bind / /``: whatever else the host mounts
(data, checkpoints, other users' files, service sockets under ``/run``) is absent rather than merely
read-only."""
_MEMORY_POLL_S = 0.1
"""How often the memory watchdog sums the sandbox's PSS (and how long the output pump may block)."""
_UID_RANGE = (200_000, 2_000_000_000)
"""Random per-run uids (root only): RLIMIT_NPROC counts per uid, so each sandbox gets its own
count."""
_PRELUDE = ("import builtins, sys; builtins.exit = builtins.quit = sys.exit; sys.argv = "
            "['main.py']; exec(compile(open('main.py', 'rb').read(), 'main.py', 'exec'), "
            "{'__name__': '__main__', '__file__': 'main.py', '__builtins__': builtins})")
"""Runs main.py as ``__main__`` under ``python -I -S``. -S skips site-packages (programs get the
standard library only, the same on every machine, and start 5x faster here); site's exit()/quit()
are restored because competitive-programming answers call them."""
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORK_DIR, "LANG": "C.UTF-8",
        "TMPDIR": "/tmp"}


class SandboxUnavailable(RuntimeError):
    """The machine cannot run the sandbox (bwrap or a helper missing, or namespaces refused)."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one run. ``cpu_s`` is rounded up to whole seconds (RLIMIT_CPU's unit); the
    kernel sends SIGXCPU at ``cpu_s`` and SIGKILL one second later. ``memory_bytes`` bounds each
    process's address space and, sandboxed, the memory (PSS) of all the run's processes together."""
    cpu_s: float = 5.0
    wall_s: float = 12.0
    memory_bytes: int = 2 << 30
    nproc: int = 64
    file_bytes: int = 16 << 20
    nofile: int = 64
    output_bytes: int = 1 << 20
    tmpfs_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        for name in ("cpu_s", "wall_s", "memory_bytes", "nproc", "file_bytes", "nofile",
                     "output_bytes",
                     "tmpfs_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class RunResult:
    """What one run did. ``returncode`` is None when the sandbox killed the program (``killed`` says
    why: ``"wall_timeout"`` or ``"output_limit"``); a death by signal — e.g. SIGXCPU from the CPU
    limit — keeps its code and sets ``killed="signal:SIGXCPU"``. ``"memory_limit"``: the sandbox's
    processes held more than ``Limits.memory_bytes`` together. Streams hold at most
    ``Limits.output_bytes`` each."""
    returncode: Optional[int]
    stdout: str
    stderr: str
    timed_out: bool
    killed: Optional[str]
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.killed is None


def default_python() -> str:
    """The interpreter for model programs: the base interpreter behind this (virtual) environment,
    so that programs get the standard library and not the trainer's packages."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        hint = INSTALL_HINT if name == "bwrap" else (f"`{name}` (util-linux) is required by the "
                                                     "sandbox")
        raise SandboxUnavailable(hint)
    return path


def _prlimit_argv(limits: Limits) -> list[str]:
    cpu = math.ceil(limits.cpu_s)
    return [_tool("prlimit"), f"--cpu={cpu}:{cpu + 1}", f"--as={limits.memory_bytes}",
            f"--nproc={limits.nproc}", f"--fsize={limits.file_bytes}", f"--nofile={limits.nofile}",
            "--core=0", "--"]


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _root_binds() -> tuple[list[str], list[str]]:
    """bwrap arguments that build the sandbox's root from :data:`_ROOT_ENTRIES`, and the (resolved)
    host directories that are visible in it."""
    args, visible = [], []
    for name in _ROOT_ENTRIES:
        path = "/" + name
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
            visible.append(os.path.realpath(path))
    return args, visible


def _hidden_dirs(visible: list[str]) -> list[str]:
    """Directories replaced by an empty tmpfs: homes, the caller's cwd and this project's checkout,
    when they lie inside a ``visible`` directory (anywhere else they are absent already). A
    candidate that contains a system directory (say cwd is ``/``) is skipped rather than hiding the
    OS."""
    candidates = {"/root", "/home", os.path.expanduser("~"), os.getcwd()}
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "setup.py").exists() or (checkout / ".git").exists():
        candidates.add(str(checkout))
    hidden = []
    for path in sorted(os.path.realpath(c) for c in candidates):
        if not os.path.isdir(path) or any(_under(k, path) for k in _SYSTEM_DIRS):
            continue
        if any(_under(path, v) for v in visible) and not any(_under(path, h) for h in hidden):
            hidden.append(path)
    return hidden


def _rebind_prefix(python: str, visible: list[str], hidden: list[str]) -> list[str]:
    """Mount the interpreter's install prefix (``<prefix>/bin/python``) when the root lacks it
    (pyenv under the home, conda under /opt) or hides it, creating world-traversable parents so the
    unprivileged program can reach it."""
    prefix = str(Path(python).parents[1])
    parent = next((h for h in hidden if _under(prefix, h)), None)
    if parent is None:
        if any(_under(prefix, v) for v in visible):
            return []
        parent = "/"
    args, cur = [], parent.rstrip("/")
    for part in Path(prefix).relative_to(parent).parts[:-1]:
        cur = f"{cur}/{part}"
        args += ["--perms", "0755", "--dir", cur]
    return args + ["--ro-bind", prefix, prefix]


def _bwrap_argv(program_fd: int, limits: Limits, python: str, as_root: bool,
                info_fd: int) -> list[str]:
    # no user namespace: a namespaced root keeps CAP_SYS_ADMIN over the sandbox's mounts
    if as_root:
        argv = [_tool("bwrap"), "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try"]
    else:
        argv = [_tool("bwrap"), "--unshare-all"]
    root, visible = _root_binds()
    hidden = _hidden_dirs(visible)
    argv += ["--die-with-parent", "--new-session", "--info-fd", str(info_fd), *root,
             "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmpfs_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.tmpfs_bytes), "--tmpfs", "/dev/shm"]
    for path in hidden:
        argv += ["--perms", "0755", "--tmpfs", path]
    argv += _rebind_prefix(python, visible, hidden)
    argv += ["--perms", "0777", "--dir", WORK_DIR, "--perms", "0444", "--file", str(program_fd),
             f"{WORK_DIR}/main.py", "--chdir", WORK_DIR, "--clearenv"]
    for key, value in _ENV.items():
        argv += ["--setenv", key, value]
    if as_root:
        uid = str(secrets.SystemRandom().randrange(*_UID_RANGE))
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_SETPCAP", "--", _tool("setpriv"), f"--reuid={uid}",
                 f"--regid={uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        argv += ["--"]
    return argv + _prlimit_argv(limits) + [python, "-I", "-S", "-B", "-c", _PRELUDE]


def _sandbox_pss(init_pid: int) -> Optional[int]:
    """Bytes of memory (PSS: shared pages split among their sharers, so a fork's copy-on-write pages
    count once) held by every process of the sandbox whose PID-namespace init is ``init_pid``, read
    through the sandbox's own /proc. None while that /proc is not yet mounted (bwrap reports the pid
    before it builds the root) or cannot be read."""
    proc = f"/proc/{init_pid}/root/proc"
    # the /proc seen from the init's root is the sandbox's once its pid 1 is that init (and that
    # init
    try:
        # is not in our own PID namespace, as a host process reusing the pid would be)
        ns = os.stat(f"/proc/{init_pid}/ns/pid").st_ino
        if os.stat(f"{proc}/1/ns/pid").st_ino != ns or os.stat("/proc/self/ns/pid").st_ino == ns:
            return None
        names = os.listdir(proc)
    except OSError:
        return None
    total = 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"{proc}/{name}/smaps_rollup", "rb") as f:
                for line in f:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):  # exited meanwhile, or a zombie with no memory
            continue
    return total


class _MemoryWatch:
    """The memory watchdog of one sandboxed run: learns the PID-namespace init from bwrap's
    ``--info-fd`` and, every ``_MEMORY_POLL_S``, compares the sandbox's total PSS with ``limit``."""

    def __init__(self, info_fd: int, limit: int):
        self.fd, self.limit = info_fd, limit
        self.info, self.init_pid, self.next_poll = bytearray(), None, 0.0

    def feed(self) -> bool:
        """Read bwrap's info; False once it is complete (the fd is at EOF)."""
        data = os.read(self.fd, 4096)
        if data:
            self.info += data
            return True
        try:
            self.init_pid = int(json.loads(self.info)["child-pid"])
        # no info (bwrap failed to start): nothing to watch
        except (ValueError, KeyError, TypeError):
            self.init_pid = None
        return False

    def over(self, now: float) -> bool:
        if self.init_pid is None or now < self.next_poll:
            return False
        self.next_poll = now + _MEMORY_POLL_S
        used = _sandbox_pss(self.init_pid)
        return used is not None and used > self.limit


def _feed_stdin(proc: subprocess.Popen, sel: selectors.BaseSelector, stdin: bytes,
                sent: int) -> int:
    """Write the next chunk of ``stdin`` to the program's non-blocking pipe; once all of it is
    written (or the program stopped reading), stop watching the pipe and close it. Returns the bytes
    written so far."""
    fd = proc.stdin.fileno()
    try:
        sent += os.write(fd, stdin[sent:sent + 65536])
    except BrokenPipeError:  # the program exited or closed stdin without reading it all
        sent = len(stdin)
    if sent >= len(stdin):
        sel.unregister(fd)
        proc.stdin.close()
    return sent


def _pump(proc: subprocess.Popen, stdin: bytes, limits: Limits, deadline: float,
          watch: Optional[_MemoryWatch]) -> tuple[bytes, bytes, Optional[str]]:
    """Feed stdin and collect stdout/stderr until the program exits, the deadline passes, a stream
    overflows or (``watch``) the sandbox holds too much memory. Returns (stdout, stderr, kill reason
    or None)."""
    sel = selectors.DefaultSelector()
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks = {out_fd: bytearray(), err_fd: bytearray()}
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    if watch is not None:
        sel.register(watch.fd, selectors.EVENT_READ)
    in_fd, sent = proc.stdin.fileno(), 0
    if stdin:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()

    def done(reason: Optional[str]) -> tuple[bytes, bytes, Optional[str]]:
        return bytes(chunks[out_fd]), bytes(chunks[err_fd]), reason

    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                return done("wall_timeout")
            if watch is not None and watch.over(now):
                return done("memory_limit")
            wait_s = min(deadline - now, _MEMORY_POLL_S) if watch is not None else deadline - now
            if out_fd not in sel.get_map() and err_fd not in sel.get_map():
                # both streams closed: wait for the exit (a program may close them and keep running)
                try:
                    proc.wait(timeout=wait_s)
                    return done(None)
                except subprocess.TimeoutExpired:
                    continue
            for key, _ in sel.select(wait_s):
                fd = key.fd
                if fd == in_fd:
                    sent = _feed_stdin(proc, sel, stdin, sent)
                    continue
                if watch is not None and fd == watch.fd:
                    if not watch.feed():
                        sel.unregister(fd)
                    continue
                data = os.read(fd, 65536)
                if not data:
                    sel.unregister(fd)
                    continue
                buf = chunks[fd]
                buf += data[:limits.output_bytes + 1 - len(buf)]
                if len(buf) > limits.output_bytes:
                    del buf[limits.output_bytes:]
                    return done("output_limit")
    finally:
        sel.close()


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group. In the sandbox, killing bwrap also kills its PID namespace
    (``--die-with-parent`` on the namespace's init); unsandboxed, a program that left the group
    escapes."""
    # the whole group has already exited and been reaped
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _execute(argv: list[str], stdin: bytes, limits: Limits, pass_fds: tuple[int, ...],
             cwd: Optional[str], info: Optional[tuple[int, int]] = None) -> RunResult:
    """Run ``argv`` to its end or its limits. ``info``: the (read, write) ends of the pipe passed to
    bwrap as ``--info-fd`` (sandboxed runs; enables the memory watchdog); both are closed here."""
    start = time.monotonic()
    sandboxed = info is not None
    watch = _MemoryWatch(info[0], limits.memory_bytes) if sandboxed else None
    try:
        # The child is spawned from the calling (pool) thread, and --die-with-parent fires when that
        # *thread* exits; that is safe because this thread waits for the run to end before it
        # returns.
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE,
                                pass_fds=pass_fds + ((info[1],) if sandboxed else ()), cwd=cwd,
                                env=dict(_ENV, HOME=cwd or WORK_DIR), start_new_session=True)
    except BaseException:
        if sandboxed:
            os.close(info[0])
        raise
    finally:
        if sandboxed:
            os.close(info[1])  # bwrap holds the write end now: EOF once it has written its info
    try:
        out, err, reason = _pump(proc, stdin, limits, start + limits.wall_s, watch)
    finally:
        _kill_group(proc)
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
        if sandboxed:
            os.close(info[0])
    code = None if reason else proc.returncode
    if code is not None and (code < 0 or (sandboxed and code > 128)):
        # bwrap reports a signal death of its child as 128 + signo; plain Popen as -signo
        signo = -code if code < 0 else code - 128
        reason = f"signal:{signal.Signals(signo).name}" if signo in signal.valid_signals() else None
    return RunResult(returncode=code, stdout=out.decode("utf-8", "replace"),
                     stderr=err.decode("utf-8", "replace"),
                     timed_out=reason == "wall_timeout", killed=reason,
                     elapsed_s=time.monotonic() - start)


def run_python(source: str, stdin: str = "", limits: Limits = Limits(), *, unsafe: bool = False,
               python: Optional[str] = None) -> RunResult:
    """Run ``source`` as ``main.py`` with ``stdin`` on standard input; never raises on what the
    program does. Raises :class:`SandboxUnavailable` (one line, with the fix) if the sandbox cannot
    run here.

    ``unsafe=True``: no bwrap — the program runs as the caller, in a temporary directory, with the
    same rlimits, wall clock and output cap. Only for trusted code or machines without user
    namespaces.
    """
    python = python or default_python()
    data = source.encode("utf-8", "surrogatepass")
    stdin_bytes = stdin.encode("utf-8", "surrogatepass")
    if unsafe:
        work = tempfile.mkdtemp(prefix="nemo-cascade-unsafe-")
        try:
            Path(work, "main.py").write_bytes(data)
            argv = _prlimit_argv(limits) + [python, "-I", "-S", "-B", "-c", _PRELUDE]
            return _execute(argv, stdin_bytes, limits, (), work)
        finally:
            shutil.rmtree(work, onerror=_chmod_and_retry)
    check_available(python)
    # the program reaches the sandbox through bwrap --file, never the disk
    fd = os.memfd_create("main.py")
    try:
        _write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        return _run_sandboxed(fd, stdin_bytes, limits, python)
    finally:
        os.close(fd)


def _run_sandboxed(program_fd: int, stdin: bytes, limits: Limits, python: str) -> RunResult:
    info = os.pipe()  # bwrap's --info-fd: the sandbox's init pid, for the memory watchdog
    try:
        argv = _bwrap_argv(program_fd, limits, python, as_root=os.geteuid() == 0, info_fd=info[1])
    except BaseException:
        os.close(info[0])
        os.close(info[1])
        raise
    return _execute(argv, stdin, limits, (program_fd,), None, info)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _chmod_and_retry(func, path: str, _exc_info) -> None:
    """rmtree's error hook: an unsandboxed program may have left a directory without permissions;
    restore them and retry once (a second failure propagates)."""
    os.chmod(os.path.dirname(path), 0o700)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    func(path)


_checked: set[str] = set()


def check_available(python: Optional[str] = None) -> None:
    """Raise :class:`SandboxUnavailable` unless bwrap (and prlimit, and setpriv as root) exist and a
    trivial program runs sandboxed. The probe runs once per interpreter; later calls are free."""
    python = python or default_python()
    if python in _checked:
        return
    fd = os.memfd_create("probe.py")
    try:
        os.write(fd, b"print('ok')")
        os.lseek(fd, 0, os.SEEK_SET)
        result = _run_sandboxed(fd, b"", Limits(wall_s=30.0), python)
    finally:
        os.close(fd)
    if result.stdout.strip() != "ok":
        why = (result.stderr.strip().splitlines()
               or [result.killed or f"exit code {result.returncode}"])[-1]
        raise SandboxUnavailable(f"bubblewrap cannot start a sandbox here ({why}); fix that, or "
                                 "pass unsafe=True to run model code unsandboxed")
    _checked.add(python)


__all__ = ["Limits", "RunResult", "SandboxUnavailable", "run_python", "check_available",
           "default_python",
           "INSTALL_HINT", "WORK_DIR"]
