"""Files that a reader never sees half-written: write a temporary file beside the target, then rename it over.

Readers here are other ranks, a launch task polling a status file, a user opening a report while the run
rewrites it. ``os.replace`` is atomic on POSIX within one file system, so a reader sees the old file or the
new one. The temporary name carries the process id, so two processes writing the same file never share one,
and it starts with a dot, so a crash leaves nothing that looks like a result. Checkpoints need more (fsync,
hashes, a folder published last): ``checkpoint.py`` does that itself.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on an exception it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text_atomically(path: str | Path, text: str) -> None:
    with replaced_atomically(path) as tmp:
        tmp.write_text(text)


@contextlib.contextmanager
def published_folder(out: str | Path, *, replace: bool) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``out`` to fill; on success it is renamed to ``out``, on an
    exception it is removed, so no half-written folder ever carries ``out``'s name. An existing ``out`` is
    removed first when ``replace``, else FileExistsError. (Replacing is two steps: a crash between them leaves
    the complete new folder under the temporary name and no ``out``, never a mix of old and new files.)"""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        if out.exists():
            if not replace:
                raise FileExistsError(f"{out}: already exists; remove it first")
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
