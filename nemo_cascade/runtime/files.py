"""Files that a reader never sees half-written: write a temporary file beside the target, then
rename it over.

Readers here are other ranks, a launch task polling a status file, a user opening a report while the
run rewrites it. ``os.replace`` is atomic on POSIX within one file system, so a reader sees the old
file or the new one. The temporary name carries the process id, so two processes writing the same
file never share one, and it starts with a dot, so a crash leaves nothing that looks like a result.
Checkpoints need more (fsync, hashes, a folder published last): ``checkpoint/storage.py`` does
that itself.

And the one reader of a JSON document (:func:`read_json`): every format the run reads (an HF
folder's config.json, eval.json, a run's or a cache entry's manifest.json) is a JSON object read
through it, so a missing or malformed file ends in one line naming it and what was expected
(docs/architecture.md "Command line").
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import traceback
from pathlib import Path
from typing import Any, Iterator

from ..errors import CascadeError
from .faults import fill_point


@contextlib.contextmanager
def replaced_atomically(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on an exception it is
    removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fill_point(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def file_sha256(path: str | Path) -> str:
    """The file's sha256, read in blocks (model shards do not fit in memory twice)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_text_atomically(path: str | Path, text: str, mode: int | None = None) -> None:
    """``text`` into ``path``, atomically; ``mode`` (e.g. 0o600 for a secret) holds from the
    file's creation, so no reader ever finds it with wider permissions."""
    with replaced_atomically(path) as tmp:
        if mode is None:
            tmp.write_text(text)
            return
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            os.fchmod(fd, mode)  # a stale temporary file of ours keeps its old mode through O_CREAT
            f.write(text)


@contextlib.contextmanager
def published_folder(out: str | Path, *, replace: bool) -> Iterator[Path]:
    """Yield an empty temporary folder beside ``out`` to fill; on success it is renamed to ``out``,
    on an exception it is removed, so no half-written folder ever carries ``out``'s name. An
    existing ``out`` is removed first when ``replace``, else FileExistsError. (Replacing is two
    steps: a crash between them leaves the complete new folder under the temporary name and no
    ``out``, never a mix of old and new files.)"""
    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        fill_point(out)
        yield tmp
        if out.exists():
            if not replace:
                raise FileExistsError(f"{out}: already exists; remove it first")
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class FileFormatError(CascadeError, ValueError):
    """A missing or malformed file; the message is one line naming it and what was expected."""


_JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}


def json_kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``object``, ``array``, ``number``, ...)."""
    return next((name for kind, name in _JSON_KINDS.items() if type(value) is kind), "number")


def read_json(path: str | Path, what: str, *, missing_ok: bool = False, expected: type = dict,
              error: type[Exception] = FileFormatError, hint: str = "") -> Any:
    """The JSON document at ``path``, whose top level is an ``expected`` (a dict: a JSON object).

    ``what`` completes "expected ..." in the messages, ``hint`` (what to do) ends them. A missing
    file is an empty ``expected`` if ``missing_ok`` (the call sites that start one, like a first
    eval.json), else an ``error``; so is an unreadable, non-UTF-8 or non-JSON file, or one of
    another top-level type. ``error`` is a CascadeError subclass (each format keeps the class its
    callers catch); its message is one line naming the file."""
    path, hint = Path(path), f"; {hint}" if hint else ""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        if missing_ok:
            return expected()
        raise error(f"{path}: no such file (expected {what}){hint}") from None
    except OSError as e:  # a directory, no permission
        raise error(f"{path}: cannot read ({type(e).__name__}); expected {what}{hint}") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not valid UTF-8 (byte {e.start + 1}); expected "
                    f"{what}{hint}") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON ({e.msg} at line {e.lineno}); expected "
                    f"{what}{hint}") from None
    # nested too deeply; a number past Python's int-string limit
    except (RecursionError, ValueError) as e:
        raise error(f"{path}: not valid JSON ({type(e).__name__}); expected {what}{hint}") from None
    if not isinstance(doc, expected):
        raise error(f"{path}: expected {what} (a JSON {json_kind(expected())}), got a JSON "
                    f"{json_kind(doc)}{hint}")
    return doc


class OutOfSpace(CascadeError):
    """A full disk or quota, in one line (:func:`out_of_space_line`)."""


_FULL = (errno.ENOSPC, errno.EDQUOT)
_RUST_IO_ERROR = re.compile(r"\(os error (\d+)\)")
"""How Rust's I/O errors end (safetensors' SafetensorError, tokenizers' Exception): no errno."""


def out_of_space(exc: BaseException | None) -> OSError | None:
    """The "no space left on device" or "disk quota exceeded" error behind ``exc``: itself, or one
    it was raised from or while handling (torch.save reports a failed write as a RuntimeError raised
    while the OSError was handled), or a Rust library's error that carries its code in its text;
    None when there is none."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in _FULL:
            return exc
        code = _RUST_IO_ERROR.search(str(exc))
        if code and int(code.group(1)) in _FULL:
            return OSError(int(code.group(1)), os.strerror(int(code.group(1))))
        exc = exc.__cause__ or exc.__context__
    return None


def writer_of(exc: BaseException | None) -> str:
    """Where this project's code was when ``exc`` was raised: the innermost frame in the package
    (``module.function``) of the deepest error in its chain that has one; '' when none has. The
    helpers here write for others, so their caller in the package is named where there is one."""
    found, seen = "", set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        ours = [f for f in traceback.extract_tb(exc.__traceback__)
                if f"{os.sep}nemo_cascade{os.sep}" in f.filename]
        ours = [f for f in ours if f.filename != __file__] or ours
        if ours:
            module = Path(ours[-1].filename)
            name = module.parent.name if module.stem == "__init__" else module.stem
            found = f"{name}.{ours[-1].name}"
        exc = exc.__cause__ or exc.__context__
    return found


def out_of_space_line(error: OSError, where: str | Path, writer: str = "") -> str:
    """One line for a full disk (or quota) met while writing under ``where`` (in ``writer``,
    :func:`writer_of`): the file system, its free space, and what to do. Nothing half-written is
    taken for whole (.tmp folders, atomic renames), so the same command resumes from the newest
    intact checkpoint."""
    path = Path(error.filename or where).absolute()
    mount = next((p for p in (path, *path.parents) if p.exists() and os.path.ismount(p)), Path("/"))
    usage = shutil.disk_usage(mount)
    what = "disk quota exceeded" if error.errno == errno.EDQUOT else "no space left on device"
    writing = f" writing {error.filename}" if error.filename else f" writing under {where}"
    writing += f" (in {writer})" if writer else ""
    return (f"{what}{writing}: the file system at {mount} has {usage.free / 2**20:.0f} MiB free "
            f"of {usage.total / 2**20:.0f} MiB; nothing half-written was kept: free space (or "
            f"move run_root) and run the same command again, it resumes from the newest intact "
            f"checkpoint")
