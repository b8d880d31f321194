"""A ``nemo-cascade`` process ends as a normal exit would (process_exit.py): its exit status, its
``atexit`` callbacks and ``weakref.finalize``, its non-daemon threads, its unflushed output."""
import subprocess
import sys
import textwrap

import pytest

from tests.launch import ROOT

PROGRAM = """
import atexit, sys, threading, time, weakref
from concurrent.futures import ThreadPoolExecutor
from nemo_cascade.runtime import process_exit

class Held: pass
held = Held()
weakref.finalize(held, print, "finalized")
atexit.register(print, "atexit ran")

def slow_writer():
    time.sleep(0.3)
    print("thread done")

POOL = ThreadPoolExecutor(1)  # held and left open: its idle worker must not keep the process alive


def main():
    threading.Thread(target=slow_writer).start()
    POOL.submit(time.sleep, 0).result()
    sys.stdout.write("unflushed ")
    {body}

{end}
print("never reached")
"""
ENDS = {"ours": "process_exit.run_and_exit(main)", "python's": "sys.exit(main())"}


def run(body: str, end: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(PROGRAM).replace("{body}", body).replace("{end}", ENDS[end])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("body, status, on_stderr", [
    ("return 0", 0, ""),
    ("return None", 0, ""),
    ("return 3", 3, ""),
    ("sys.exit(4)", 4, ""),
    ("sys.exit()", 0, ""),
    ("sys.exit('bad recipe')", 1, "bad recipe"),
    ("raise ValueError('a bug')", 1, "ValueError: a bug"),
    ("raise KeyboardInterrupt", 130, "KeyboardInterrupt"),
])
def test_exit_status_callbacks_threads_and_output_as_pythons_own_exit(body, status, on_stderr):
    ours, pythons = run(body, "ours"), run(body, "python's")
    assert ours.returncode == status, ours.stderr
    # Python ends on Ctrl-C by SIGINT itself; we give the shell's 130, which torchrun passes on
    assert pythons.returncode == (-2 if status == 130 else status)
    assert on_stderr in ours.stderr and on_stderr in pythons.stderr
    # the thread joined, then the atexit callbacks in Python's order; nothing after the end
    assert ours.stdout == pythons.stdout
    assert ours.stdout.split() == ["unflushed", "thread", "done", "atexit", "ran", "finalized"]
