"""How a ``nemo-cascade`` process ends: a normal exit's steps, then ``os._exit``, never the
interpreter's teardown, where a gloo worker thread can abort a finished run (docs/testing.md,
"The abort at exit")."""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Callable, NoReturn

from nemo_cascade.runtime import console


def exit_process(code: int) -> NoReturn:
    """End this process with exit status ``code`` as the interpreter would, without its teardown.

    A gloo worker thread can drop the last reference to a tensor that has a Python object after the
    main thread began finalizing the interpreter; the GIL request that follows ends the thread with
    ``pthread_exit``, whose unwinding crosses a ``noexcept`` frame: the process aborts ("terminate
    called without an active exception") and a finished run reads as a crash. So the steps of a
    normal exit that keep anything run here — stopping thread pools and waiting for non-daemon
    threads, the ``atexit``
    callbacks (logging's flush, ``weakref.finalize``, multiprocessing's children), flushing the
    standard streams and the console's — and ``os._exit`` ends the process before the teardown."""
    # The interpreter's own first step: threading's exit hooks (a thread pool tells its idle workers
    # to stop), then a join of every non-daemon thread. Joining without the hooks would wait forever
    # on a pool's idle worker.
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (console.out(), console.stream(), sys.stdout, sys.stderr, sys.__stdout__,
                   sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed stream, or a pipe whose reader is gone
            pass
    os._exit(code)


def run_and_exit(main: Callable[[], int | None]) -> NoReturn:
    """Run a program's ``main`` and end the process with the exit status Python would give it: its
    return value, a ``SystemExit``'s code, 1 after an uncaught exception's traceback, 130 after
    Ctrl-C's."""
    try:
        code = main()
    except SystemExit as e:  # sys.exit(), argparse's usage error or --help
        code = e.code
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = 128 + signal.SIGINT
    except BaseException:  # a bug: its traceback, then Python's own exit status
        sys.excepthook(*sys.exc_info())
        code = 1
    if code is not None and not isinstance(code, int):  # sys.exit("message"): on stderr, status 1
        print(code, file=sys.stderr)
        code = 1
    exit_process(code or 0)
