"""The sandbox: runs one untrusted Python program under bubblewrap with resource limits and a wall clock.

Code RL executes model-written programs thousands of times per step (paper §4.6), so every run is isolated:

- **bubblewrap** (``bwrap``, Debian package ``bubblewrap``): new network namespace (no network), new PID
  namespace (every process dies with the sandbox), read-only root (``--ro-bind / /``), private size-capped
  tmpfs on ``/tmp`` (the work dir ``/tmp/work``) and ``/dev/shm``, empty tmpfs over ``/root``, ``/home``,
  ``$HOME``, the caller's cwd and this project's checkout, cleared environment, ``--die-with-parent``,
  ``--new-session``. As root, bwrap runs without a user namespace (a namespaced root could remount the
  read-only binds) and the program is switched by ``setpriv`` to a random unprivileged uid with no
  capabilities and no-new-privs; as a normal user, bwrap's own user namespace does that job.
- **rlimits**, set by ``prlimit`` in the child right before it execs the interpreter (no ``preexec_fn``: it
  can deadlock in a multi-threaded trainer): CPU seconds, address space, processes, file size, open files,
  no core files.
- a **wall clock** that SIGKILLs the whole process group (and, in the sandbox, the PID namespace with it),
  and a **cap on captured output**: a program that writes more than ``output_bytes`` is killed, so unbounded
  output never reaches the trainer's memory. Bytes are decoded as UTF-8 with replacement characters.

``unsafe=True`` runs the same command line without bwrap (same rlimits, timeout and cap) for machines where
bubblewrap cannot run; nothing else falls back to it silently.
"""
from __future__ import annotations

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
_UID_RANGE = (200_000, 2_000_000_000)
"""Random per-run uids (root only): RLIMIT_NPROC counts per uid, so each sandbox gets its own count."""
_PRELUDE = ("import builtins, sys; builtins.exit = builtins.quit = sys.exit; sys.argv = ['main.py']; "
            "exec(compile(open('main.py', 'rb').read(), 'main.py', 'exec'), "
            "{'__name__': '__main__', '__file__': 'main.py', '__builtins__': builtins})")
"""Runs main.py as ``__main__`` under ``python -I -S``. -S skips site-packages (programs get the standard
library only, the same on every machine, and start 5x faster here); site's exit()/quit() are restored because
competitive-programming answers call them."""
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": WORK_DIR, "LANG": "C.UTF-8", "TMPDIR": "/tmp"}


class SandboxUnavailable(RuntimeError):
    """The machine cannot run the sandbox (bwrap or a helper missing, or namespaces refused)."""


@dataclass(frozen=True)
class Limits:
    """Resource bounds of one run. ``cpu_s`` is rounded up to whole seconds (RLIMIT_CPU's unit); the
    kernel sends SIGXCPU at ``cpu_s`` and SIGKILL one second later."""
    cpu_s: float = 5.0
    wall_s: float = 12.0
    memory_bytes: int = 2 << 30
    nproc: int = 64
    file_bytes: int = 16 << 20
    nofile: int = 64
    output_bytes: int = 1 << 20
    tmpfs_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        for name in ("cpu_s", "wall_s", "memory_bytes", "nproc", "file_bytes", "nofile", "output_bytes",
                     "tmpfs_bytes"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class RunResult:
    """What one run did. ``returncode`` is None when the sandbox killed the program (``killed`` says
    why: ``"wall_timeout"`` or ``"output_limit"``); a death by signal — e.g. SIGXCPU from the CPU limit —
    keeps its code and sets ``killed="signal:SIGXCPU"``. Streams hold at most ``Limits.output_bytes`` each."""
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
    """The interpreter for model programs: the base interpreter behind this (virtual) environment, so that
    programs get the standard library and not the trainer's packages."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        hint = INSTALL_HINT if name == "bwrap" else f"`{name}` (util-linux) is required by the sandbox"
        raise SandboxUnavailable(hint)
    return path


def _prlimit_argv(limits: Limits) -> list[str]:
    cpu = math.ceil(limits.cpu_s)
    return [_tool("prlimit"), f"--cpu={cpu}:{cpu + 1}", f"--as={limits.memory_bytes}",
            f"--nproc={limits.nproc}", f"--fsize={limits.file_bytes}", f"--nofile={limits.nofile}",
            "--core=0", "--"]


def _hidden_dirs() -> list[str]:
    """Directories replaced by an empty tmpfs: homes, the caller's cwd and this project's checkout.
    A candidate that contains a system directory (say cwd is ``/``) is skipped rather than hiding the OS."""
    candidates = {"/root", "/home", os.path.expanduser("~"), os.getcwd()}
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "setup.py").exists() or (checkout / ".git").exists():
        candidates.add(str(checkout))
    hidden = []
    for path in sorted(os.path.realpath(c) for c in candidates):
        if not os.path.isdir(path) or any(k == path or k.startswith(path.rstrip("/") + "/") for k in _SYSTEM_DIRS):
            continue
        if not any(path.startswith(h + "/") for h in hidden):
            hidden.append(path)
    return hidden


def _rebind_prefix(python: str, hidden: list[str]) -> list[str]:
    """Mount the interpreter's install prefix (``<prefix>/bin/python``) back over a hidden directory,
    creating world-traversable parents so the unprivileged program can reach it."""
    prefix = str(Path(python).parents[1])
    parent = next((h for h in hidden if prefix == h or prefix.startswith(h + "/")), None)
    if parent is None:
        return []
    args, cur = [], parent
    for part in Path(prefix).relative_to(parent).parts[:-1]:
        cur = f"{cur}/{part}"
        args += ["--perms", "0755", "--dir", cur]
    return args + ["--ro-bind", prefix, prefix]


def _bwrap_argv(program_fd: int, limits: Limits, python: str, as_root: bool) -> list[str]:
    if as_root:  # no user namespace: a namespaced root keeps CAP_SYS_ADMIN over the sandbox's mounts
        argv = [_tool("bwrap"), "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try"]
    else:
        argv = [_tool("bwrap"), "--unshare-all"]
    hidden = _hidden_dirs()
    argv += ["--die-with-parent", "--new-session", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.tmpfs_bytes), "--tmpfs", "/tmp",
             "--perms", "1777", "--size", str(limits.tmpfs_bytes), "--tmpfs", "/dev/shm"]
    for path in hidden:
        argv += ["--perms", "0755", "--tmpfs", path]
    argv += _rebind_prefix(python, hidden)
    argv += ["--perms", "0777", "--dir", WORK_DIR, "--perms", "0444", "--file", str(program_fd),
             f"{WORK_DIR}/main.py", "--chdir", WORK_DIR, "--clearenv"]
    for key, value in _ENV.items():
        argv += ["--setenv", key, value]
    if as_root:
        uid = str(secrets.SystemRandom().randrange(*_UID_RANGE))
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                 "--cap-add", "CAP_SETPCAP", "--", _tool("setpriv"), f"--reuid={uid}", f"--regid={uid}",
                 "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    else:
        argv += ["--"]
    return argv + _prlimit_argv(limits) + [python, "-I", "-S", "-B", "-c", _PRELUDE]


def _pump(proc: subprocess.Popen, stdin: bytes, limits: Limits, deadline: float) -> tuple[bytes, bytes, Optional[str]]:
    """Feed stdin and collect stdout/stderr until both close, the deadline passes or a stream overflows.
    Returns (stdout, stderr, kill reason or None)."""
    sel = selectors.DefaultSelector()
    chunks = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    for fd in chunks:
        sel.register(fd, selectors.EVENT_READ)
    in_fd, sent = proc.stdin.fileno(), 0
    if stdin:
        os.set_blocking(in_fd, False)
        sel.register(in_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    try:
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return bytes(chunks[proc.stdout.fileno()]), bytes(chunks[proc.stderr.fileno()]), "wall_timeout"
            for key, _ in sel.select(remaining):
                fd = key.fd
                if fd == in_fd:
                    try:
                        sent += os.write(fd, stdin[sent:sent + 65536])
                    except BrokenPipeError:  # the program exited or closed stdin without reading it all
                        sent = len(stdin)
                    if sent >= len(stdin):
                        sel.unregister(fd)
                        proc.stdin.close()
                    continue
                data = os.read(fd, 65536)
                if not data:
                    sel.unregister(fd)
                    continue
                buf = chunks[fd]
                buf += data[:limits.output_bytes + 1 - len(buf)]
                if len(buf) > limits.output_bytes:
                    del buf[limits.output_bytes:]
                    return bytes(chunks[proc.stdout.fileno()]), bytes(chunks[proc.stderr.fileno()]), "output_limit"
    finally:
        sel.close()
    return bytes(chunks[proc.stdout.fileno()]), bytes(chunks[proc.stderr.fileno()]), None


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group. In the sandbox, killing bwrap also kills its PID namespace
    (``--die-with-parent`` on the namespace's init); unsandboxed, a program that left the group escapes."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:  # the whole group has already exited and been reaped: nothing to kill
        return


def _execute(argv: list[str], stdin: bytes, limits: Limits, pass_fds: tuple[int, ...],
             cwd: Optional[str], sandboxed: bool) -> RunResult:
    start = time.monotonic()
    # The child is spawned from the calling (pool) thread, and --die-with-parent fires when that *thread*
    # exits; that is safe because this thread waits for the run to end before it returns.
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=pass_fds, cwd=cwd, env=dict(_ENV, HOME=cwd or WORK_DIR),
                            start_new_session=True)
    try:
        out, err, reason = _pump(proc, stdin, limits, start + limits.wall_s)
        if reason is None:
            try:
                proc.wait(timeout=max(0.0, start + limits.wall_s - time.monotonic()))
            except subprocess.TimeoutExpired:  # closed its streams but kept running
                reason = "wall_timeout"
    finally:
        _kill_group(proc)
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            stream.close()
    code = None if reason else proc.returncode
    if code is not None and (code < 0 or (sandboxed and code > 128)):
        # bwrap reports a signal death of its child as 128 + signo; plain Popen as -signo
        signo = -code if code < 0 else code - 128
        reason = f"signal:{signal.Signals(signo).name}" if signo in signal.valid_signals() else None
    return RunResult(returncode=code, stdout=out.decode("utf-8", "replace"),
                     stderr=err.decode("utf-8", "replace"), timed_out=reason == "wall_timeout",
                     killed=reason, elapsed_s=time.monotonic() - start)


def run_python(source: str, stdin: str = "", limits: Limits = Limits(), *, unsafe: bool = False,
               python: Optional[str] = None) -> RunResult:
    """Run ``source`` as ``main.py`` with ``stdin`` on standard input; never raises on what the program
    does. Raises :class:`SandboxUnavailable` (one line, with the fix) if the sandbox cannot run here.

    ``unsafe=True``: no bwrap — the program runs as the caller, in a temporary directory, with the same
    rlimits, wall clock and output cap. Only for trusted code or machines without user namespaces.
    """
    python = python or default_python()
    data = source.encode("utf-8", "surrogatepass")
    stdin_bytes = stdin.encode("utf-8", "surrogatepass")
    if unsafe:
        work = tempfile.mkdtemp(prefix="nemo-cascade-unsafe-")
        try:
            Path(work, "main.py").write_bytes(data)
            argv = _prlimit_argv(limits) + [python, "-I", "-S", "-B", "-c", _PRELUDE]
            return _execute(argv, stdin_bytes, limits, (), work, sandboxed=False)
        finally:
            shutil.rmtree(work, onerror=_chmod_and_retry)
    check_available(python)
    fd = os.memfd_create("main.py")  # the program reaches the sandbox through bwrap --file, never the disk
    try:
        _write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        argv = _bwrap_argv(fd, limits, python, as_root=os.geteuid() == 0)
        return _execute(argv, stdin_bytes, limits, (fd,), None, sandboxed=True)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _chmod_and_retry(func, path: str, _exc_info) -> None:
    """rmtree's error hook: an unsandboxed program may have left a directory without permissions; restore
    them and retry once (a second failure propagates)."""
    os.chmod(os.path.dirname(path), 0o700)
    if os.path.isdir(path) and not os.path.islink(path):
        os.chmod(path, 0o700)
    func(path)


_checked: set[str] = set()


def check_available(python: Optional[str] = None) -> None:
    """Raise :class:`SandboxUnavailable` unless bwrap (and prlimit, and setpriv as root) exist and a trivial
    program runs sandboxed. The probe runs once per interpreter; later calls are free."""
    python = python or default_python()
    if python in _checked:
        return
    fd = os.memfd_create("probe.py")
    try:
        os.write(fd, b"print('ok')")
        os.lseek(fd, 0, os.SEEK_SET)
        argv = _bwrap_argv(fd, Limits(wall_s=30.0), python, as_root=os.geteuid() == 0)
        result = _execute(argv, b"", Limits(wall_s=30.0), (fd,), None, sandboxed=True)
    finally:
        os.close(fd)
    if result.stdout.strip() != "ok":
        why = (result.stderr.strip().splitlines() or [result.killed or f"exit code {result.returncode}"])[-1]
        raise SandboxUnavailable(f"bubblewrap cannot start a sandbox here ({why}); fix that, or pass "
                                 "unsafe=True to run model code unsandboxed")
    _checked.add(python)


__all__ = ["Limits", "RunResult", "SandboxUnavailable", "run_python", "check_available", "default_python",
           "INSTALL_HINT", "WORK_DIR"]
