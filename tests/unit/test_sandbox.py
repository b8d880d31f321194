"""The sandbox contains hostile programs: no network, no writes or reads outside its work dir,
fork/memory/CPU bombs, sleepers and floods end within their bounds, nothing survives the run, and
each scores 0 as code."""
import os
import shutil
import socket
import time
import uuid
from pathlib import Path

import pytest

from nemo_cascade.rewards import sandbox
from nemo_cascade.rewards.code import code_reward
from nemo_cascade.rewards.sandbox import Limits, SandboxUnavailable, run_python
from tests.unit.hostile_programs import none_left

REPO = Path(__file__).resolve().parents[2]
FAST = Limits(cpu_s=1, wall_s=3)
SLACK_S = 10.0
"""Generous margin over a run's wall clock for process start-up and teardown on a loaded 2-core
machine."""


def _named(program: str) -> tuple[str, str]:
    """Prefix ``program`` with a prctl(PR_SET_NAME) so its processes (and forked children) can be
    found in /proc afterwards. Returns (name, program)."""
    name = "nc" + uuid.uuid4().hex[:12]
    return name, f"import ctypes; ctypes.CDLL(None).prctl(15, b'{name}', 0, 0, 0)\n{program}"


@pytest.fixture
def listener():
    """A TCP server on the host's loopback: reachable unsandboxed, unreachable from the sandbox."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


CONNECT = (
    "import socket\nfor host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53)]:\n"
    "    try:\n        socket.create_connection((host, port), timeout=3); "
    "print('connected', host)\n"
    "    except OSError as e:\n        print('blocked', host, type(e).__name__)\n")


def test_network_is_blocked(listener):
    result = run_python(CONNECT.format(port=listener), limits=Limits(wall_s=20))
    assert result.ok, result
    assert "connected" not in result.stdout
    assert result.stdout.count("blocked") == 2


def test_network_control_unsafe_reaches_loopback(listener):
    """The same program unsandboxed does reach the host listener: the sandbox test above can
    fail."""
    result = run_python(CONNECT.format(port=listener), limits=Limits(wall_s=20), unsafe=True)
    assert "connected 127.0.0.1" in result.stdout, result


def test_writes_outside_work_dir_fail_and_leave_nothing(tmp_path):
    tag = uuid.uuid4().hex
    targets = [
        tmp_path / "escape.txt", REPO / f"escape-{tag}.txt",
        Path(f"/etc/escape-{tag}"),
        Path(f"/var/tmp/escape-{tag}"),
        Path(f"/tmp/escape-{tag}"),
        Path.home() / f"escape-{tag}"]
    program = ("import sys\nfor path in sys.stdin.read().split():\n    try:\n"
               "        open(path, 'w').write('x'); print('wrote', path)\n"
               "    except OSError as e:\n        print('failed', path, type(e).__name__)\n"
               "open('inside.txt', 'w').write('ok'); print('inside', open('inside.txt').read())\n")
    result = run_python(program, "\n".join(map(str, targets)), limits=Limits(wall_s=20))
    assert result.ok, result
    assert "inside ok" in result.stdout                 # the work dir itself is writable
    for target in targets:
        assert not target.exists(), f"{target} escaped the sandbox"
        # /tmp is the sandbox's own tmpfs: writable, private
        if target.parent != Path("/tmp"):
            assert f"failed {target}" in result.stdout, result.stdout


def test_secrets_project_files_and_home_are_unreadable():
    home = Path.home()
    assert (REPO / "setup.py").exists() and any(home.iterdir())
    program = (f"import os\nfor path in ['/etc/shadow', {str(REPO / 'setup.py')!r}]:\n"
               "    try:\n        print('read', path, len(open(path).read()))\n"
               "    except OSError as e:\n        print('denied', path, type(e).__name__)\n"
               f"print(sorted(os.listdir({str(home)!r})))\n")
    result = run_python(program, limits=Limits(wall_s=20))
    assert result.ok, result
    assert "denied /etc/shadow" in result.stdout
    assert f"denied {REPO / 'setup.py'}" in result.stdout
    # the home is an empty tmpfs, except the path down to the interpreter when it lives there
    # (pyenv)
    prefix = Path(sandbox.default_python()).parents[1]
    visible = [prefix.relative_to(home).parts[0]] if home in prefix.parents else []
    assert result.stdout.splitlines()[-1] == str(visible)


FORK_BOMB = ("import os\nwhile True:\n    try:\n        os.fork()\n    except "
             "OSError:\n        pass\n")
SLEEPER = "import os, time\nos.fork()\ntime.sleep(1e9)\n"  # two sleepers: the child must die too


CPU_BOUND = Limits(cpu_s=1, wall_s=60)
"""The CPU limit, not the wall clock, must end a busy loop: on a loaded machine 1 s of CPU can take
many seconds of wall time, so the wall clock here is far away."""


@pytest.mark.parametrize("program, killed, limits", [
    # ends by the wall clock or the CPU limit, whichever first
    (FORK_BOMB, None, FAST),
    (SLEEPER, "wall_timeout", FAST),
    ("while True:\n    pass\n", "signal:SIGXCPU", CPU_BOUND),
])
def test_bombs_and_hangs_end_in_bound_and_leave_no_process(program, killed, limits):
    name, program = _named(program)
    start = time.monotonic()
    result = run_python(program, limits=limits)
    assert time.monotonic() - start < limits.wall_s + SLACK_S
    assert not result.ok
    if killed:
        assert result.killed == killed, result
    assert none_left(name), f"processes named {name} survived the sandbox"


def test_memory_bomb_fails_fast():
    result = run_python("blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n",
                        limits=Limits(cpu_s=5, wall_s=20, memory_bytes=512 << 20))
    assert result.returncode == 1 and "MemoryError" in result.stderr, result


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_unbounded_output_is_cut_and_killed(stream):
    limits = Limits(wall_s=20, output_bytes=10_000)
    result = run_python(f"import sys\nwhile True:\n    sys.{stream}.write('x' * 4096)\n",
                        limits=limits)
    assert result.killed == "output_limit"
    assert len(getattr(result, stream)) == limits.output_bytes


def test_binary_output_and_large_stdin():
    program = ("import sys\ndata = sys.stdin.read()\nsys.stdout.buffer.write(b'\\xff\\xfe' + "
               "str(len(data)).encode())\n")
    result = run_python(program, "é" * 2_000_000, limits=Limits(wall_s=20))
    assert result.ok and result.stdout == "\ufffd\ufffd2000000", result


def test_unsafe_mode_keeps_rlimits_and_timeouts():
    busy = run_python("while True:\n    pass\n", limits=FAST, unsafe=True)
    assert busy.killed == "signal:SIGXCPU"
    name, sleeper = _named(SLEEPER)
    asleep = run_python(sleeper, limits=Limits(cpu_s=1, wall_s=1), unsafe=True)
    assert asleep.timed_out and asleep.returncode is None
    assert none_left(name)
    flood = run_python("while True:\n    print('x' * 999)\n",
                       limits=Limits(wall_s=20, output_bytes=5000), unsafe=True)
    assert flood.killed == "output_limit" and len(flood.stdout) == 5000


def test_missing_bwrap_is_one_clear_line(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None
                        if name == "bwrap" else real_which(name))
    monkeypatch.setattr(sandbox, "_checked", set())
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap") as info:
        run_python("print(1)")
    assert "\n" not in str(info.value)
    label = {"tests": [{"input": "", "output": "1"}]}
    # a broken setup stops the run; it is not a 0 reward
    with pytest.raises(SandboxUnavailable):
        code_reward("```python\nprint(1)\n```", label)
    assert code_reward("```python\nprint(1)\n```", label, unsafe=True) == 1.0


# The hostile-program corpus scored as code (every attack, controls, no survivors, no host changes)
# is in test_hostile_programs.py.


def test_limits_are_validated():
    with pytest.raises(ValueError, match="cpu_s"):
        Limits(cpu_s=0)
    assert os.path.isabs(sandbox.default_python())
