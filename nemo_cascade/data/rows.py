"""Rows of a data file, read in shares: each rank reads only its part of a large jsonl file.

A ``.jsonl`` file of ``S`` bytes is cut into ``shares`` byte ranges ``[k*S/n, (k+1)*S/n)``; a line
belongs to the share in which it *starts*, so every line is read by exactly one share and the
shares, concatenated in order, are the file's lines in order. A share seeks to its range, so a rank
reads about ``S/n`` bytes, never the whole file. Compressed files (``.jsonl.gz``) cannot be entered
mid-stream and parquet files are cut by row group; :func:`share_count` says how many shares a file
supports.

Line numbers (for one-line errors naming ``FILE:LINE``) are counted within a share; the number of
lines before it is counted only when a row of the share is bad (:meth:`Share.where`), so a clean
share never reads the bytes before its range.
"""
from __future__ import annotations

import codecs
import gzip
import json
import zlib
from pathlib import Path
from typing import Iterator, Optional

from ..errors import CascadeError

_BLOCK = 1 << 24


class DataError(CascadeError, ValueError):
    """A bad data source or row; the message is one line naming the file, line and field."""


class RowError(ValueError):
    """A line that is not a JSON object in UTF-8; the message is one line, without the location."""


def first_line(e: BaseException) -> str:
    lines = str(e).splitlines()
    return lines[0][:200] if lines else ""


def json_object(raw: bytes) -> Optional[dict]:
    """One jsonl line as a dict, None if blank; RowError (one line, without the location)
    otherwise."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RowError(f"invalid UTF-8 (byte {e.start + 1}: "
                       f"{raw[e.start:e.start + 1]!r})") from None
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise RowError(f"invalid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:  # the C scanner recurses per nesting level
        raise RowError("invalid JSON (nested too deeply)") from None
    except ValueError as e:  # a number past Python's int-string limit (4300 digits)
        raise RowError(f"invalid JSON ({first_line(e).split(':')[0]})") from None
    if not isinstance(obj, dict):
        raise RowError(f"expected a JSON object, got {type(obj).__name__}")
    return obj


def share_count(path: Path, wanted: int) -> int:
    """How many shares ``path`` is read in when ``wanted`` ranks would like one each: a plain jsonl
    file any number, a parquet file at most its row groups, a compressed file one (it is read from
    the start)."""
    if path.suffix == ".gz":
        return 1
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            return max(1, min(wanted, pq.ParquetFile(path).num_row_groups))
        # ArrowInvalid / OSError for a corrupt or truncated file, as Share._parquet reads it
        except Exception as e:
            raise DataError(f"{path}: cannot read as parquet ({type(e).__name__}: "
                            f"{first_line(e)})") from None
    return max(1, wanted)


class Share:
    """Share ``index`` of ``count`` of a jsonl / jsonl.gz / parquet file; iterate for ``(line,
    object)``.

    ``bad``: a list collecting ``(line, message)`` of unreadable lines (invalid UTF-8 or JSON, not
    an object) instead of raising; without it the first raises :class:`DataError` naming its file
    and line. ``limit``: stop after that many rows (only meaningful for a single share: the file's
    first rows)."""

    def __init__(self, path: Path, index: int = 0, count: int = 1, limit: int = 0):
        if not 0 <= index < count:
            raise ValueError(f"share {index} of {count}")
        self.path, self.index, self.count, self.limit = path, index, count, limit
        self._start = 0  # byte offset where the share's first line starts (plain jsonl)
        self._base: Optional[int] = None  # lines before the share, counted on demand

    def where(self, line: int) -> str:
        """``FILE:LINE`` of the share's ``line``-th line (1-based within the share)."""
        return f"{self.path}:{self.lines_before() + line}"

    def lines_before(self) -> int:
        if self._base is None:
            self._base = 0
            if self._start and self.path.suffix not in (".gz", ".parquet"):
                with open(self.path, "rb") as f:
                    left = self._start
                    while left > 0:
                        block = f.read(min(_BLOCK, left))
                        self._base += block.count(b"\n")
                        left -= len(block)
        return self._base

    def rows(self, bad: Optional[list] = None) -> Iterator[tuple[int, dict]]:
        """``(line within the share, object)`` per non-blank line; for parquet the row number in the
        file."""
        if self.path.suffix == ".parquet":
            yield from self._parquet()
            return
        kept = 0
        for line, raw in self._lines():
            try:
                obj = json_object(raw)
            except RowError as e:
                if bad is None:
                    raise DataError(f"{self.where(line)}: {e}") from None
                bad.append((line, f"{self.where(line)}: {e}"))
                continue
            if obj is None:
                continue
            yield line, obj
            kept += 1
            if 0 < self.limit <= kept:
                return

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """Lines split at ``\\n`` only (a ``\\r`` before it is JSON whitespace), without the
        newline; a UTF-8 byte-order mark at the start of the file is dropped."""
        gz = self.path.suffix == ".gz"
        try:
            f = gzip.open(self.path, "rb") if gz else open(self.path, "rb")
        except FileNotFoundError:
            raise DataError(f"data file not found: {self.path}") from None
        except OSError as e:  # a directory, no permission
            raise DataError(f"{self.path}: cannot read ({type(e).__name__}: "
                            f"{first_line(e)})") from None
        try:
            with f:
                end = None
                if not gz and self.count > 1:
                    size = f.seek(0, 2)
                    begin = size * self.index // self.count
                    end = size * (self.index + 1) // self.count
                    if begin:  # the line holding byte begin-1 belongs to the share before
                        f.seek(begin - 1)
                        f.readline()
                    self._start = f.tell() if begin else 0
                f.seek(self._start)
                pos, line = self._start, 0
                while end is None or pos < end:
                    raw = f.readline()
                    if not raw:
                        return
                    pos += len(raw)
                    line += 1
                    if pos == len(raw) and raw.startswith(codecs.BOM_UTF8):
                        raw = raw[len(codecs.BOM_UTF8):]
                    yield line, raw[:-1] if raw.endswith(b"\n") else raw
        except (OSError, EOFError, zlib.error) as e:  # a corrupt or truncated .gz
            raise DataError(f"{self.path}: cannot read ({type(e).__name__}: "
                            f"{first_line(e)})") from None

    def _parquet(self) -> Iterator[tuple[int, dict]]:
        import pyarrow.parquet as pq

        if not self.path.is_file():
            raise DataError(f"data file not found: {self.path}")
        try:
            pf = pq.ParquetFile(self.path)
            groups = pf.num_row_groups
            first, last = groups * self.index // self.count, groups * (self.index + 1) // self.count
            row = sum(pf.metadata.row_group(g).num_rows for g in range(first)) + 1
            kept = 0
            for g in range(first, last):
                for obj in pf.read_row_group(g).to_pylist():
                    yield row, obj
                    row, kept = row + 1, kept + 1
                    if 0 < self.limit <= kept:
                        return
        # pyarrow raises ArrowInvalid/OSError subclasses for corrupt or truncated files
        except Exception as e:
            raise DataError(f"{self.path}: cannot read as parquet ({type(e).__name__}: "
                            f"{first_line(e)})") from None


def read_jsonl(path: Path, limit: int = 0, bad: Optional[list[tuple[int, str]]] = None,
               error: type[CascadeError] = DataError) -> list[tuple[int, dict]]:
    """The one reader of a jsonl file: ``(line number, object)`` per non-blank line of a ``.jsonl``
    or ``.jsonl.gz`` file, or ``(row number, object)`` per row of a ``.parquet`` file (the released
    datasets' format on the Hub); the first ``limit`` rows if ``limit > 0``. Any problem is a
    one-line ``error`` (DataError, or the class the caller's users catch, e.g. an eval suite's
    EvalError) naming the file (and line).

    Lines are split at ``\\n`` only (a ``\\r`` before it is JSON whitespace), as JSON Lines defines
    them: ``str.splitlines`` would also split inside strings holding U+2028, U+0085 or form feeds,
    which JSON writers leave unescaped. A UTF-8 byte-order mark is ignored. ``bad``: a list that
    collects ``(line number, message)`` of unreadable lines (invalid UTF-8 or JSON, not an object)
    instead of raising on the first — a prompt set's ``Data.max_bad_rows`` counts them with the rows
    that fit no schema."""
    try:
        return list(Share(path, limit=limit).rows(bad))  # one share: the whole file, in order
    except DataError as e:
        if error is DataError:
            raise
        raise error(str(e)) from None


__all__ = ["Share", "DataError", "RowError", "json_object", "first_line", "share_count",
           "read_jsonl"]
