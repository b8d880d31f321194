"""Where a public data set's files are, and its rows one at a time.

A :class:`Source` names a Hugging Face dataset (``ORG/NAME``), optionally one subset (a top folder
or file-name stem inside the repository: ``math`` matches ``math.jsonl``, ``math/math_1.jsonl``,
``data/math-00000-of-00002 .parquet``) and a split. Its files are found

- under ``--source-dir DIR`` as ``DIR/ORG/NAME/...``: the layout ``huggingface-cli download ORG/NAME
  --repo-type dataset --local-dir DIR/ORG/NAME`` leaves (and the test fixtures use); or
- on the Hub, downloaded with ``huggingface_hub.snapshot_download`` at the dataset's current
  revision (recorded in the manifest); an unreachable Hub is one line naming the dataset and
  ``--source-dir``.

Data files are ``.jsonl``, ``.jsonl.gz``, ``.json`` (JSON Lines) and ``.parquet``. A source may
instead name its files (``paths``: exact paths inside the repository, read in that order, e.g. one
benchmark release's files), which may also be ``.csv`` (a header row, then one record per row:
GPQA's layout). When some file names carry a split (``train``, ``validation``, ``test``, ``dev`` as
a path component or a name part), only the source's split is read. Rows are streamed (parquet in
record batches), never a whole file in memory.
"""
from __future__ import annotations

import csv
import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

from nemo_cascade.data.loader import DataError

DATA_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".parquet")
NAMED_SUFFIXES = (*DATA_SUFFIXES, ".csv")
"""What a source's ``paths`` may name."""
SPLITS = ("train", "validation", "test", "dev")
_PARTS = re.compile(r"[/_.\-]")


class PrepareError(DataError):
    """A source that cannot be had or read, or too many malformed rows; one line naming the file and
    field."""


@dataclass(frozen=True)
class Source:
    dataset: str
    """Hub id, ``ORG/NAME``."""
    subset: str = ""
    """A top folder / file-name stem inside the repository; empty: every data file."""
    split: str = "train"
    paths: tuple[str, ...] = ()
    """Exact files inside the repository, read in this order (``subset`` and ``split`` are then
    not used)."""

    @property
    def label(self) -> str:
        return self.dataset + (f":{self.subset}" if self.subset else "")


@dataclass(frozen=True)
class Bad:
    """A malformed source row: counted, and an error past ``--max-bad-rows``."""
    message: str


@dataclass(frozen=True)
class Drop:
    """A well-formed row left out on purpose; ``reason`` is its manifest counter (``tie``, ``math``,
    ...)."""
    reason: str


def per_row(fn):
    """A converter of whole streams from one of single rows: ``fn(row, where)`` returns the output
    row or a :class:`Drop`, and raises ValueError (SchemaError, DataError) for a malformed row,
    which becomes :class:`Bad`."""
    def convert(rows):
        for where, row in rows:
            if isinstance(row, Bad):
                yield where, row
                continue
            try:
                yield where, fn(row, where)
            except ValueError as e:
                message = str(e)
                yield where, Bad(message if message.startswith(where) else f"{where}: {message}")
    return convert


def _data_file(path: Path, suffixes: tuple[str, ...] = DATA_SUFFIXES) -> bool:
    return path.is_file() and path.name.endswith(suffixes) and not path.name.startswith(".")


def _in_subset(rel: str, subset: str) -> bool:
    parts = rel.split("/")
    stem = lambda p: p.split(".")[0]  # noqa: E731
    return parts[0] == subset or stem(parts[0]) == subset or any(
        re.fullmatch(rf"{re.escape(subset)}([_\-]\d.*)?", stem(p)) for p in parts)


def select_files(root: Path, source: Source) -> list[Path]:
    """The data files of ``source`` under its dataset folder ``root``, sorted by path (or its
    ``paths``, in their order: a missing one is an error, not a smaller data set)."""
    if source.paths:
        missing = [p for p in source.paths if not _data_file(root / p, NAMED_SUFFIXES)]
        if missing:
            raise PrepareError(f"{root}: no file {missing[0]} of {source.dataset} (it needs "
                               f"{', '.join(source.paths)})")
        return [root / p for p in source.paths]
    files = sorted(p for p in root.rglob("*")
                   if _data_file(p) and ".cache" not in p.relative_to(root).parts)
    rels = {p: p.relative_to(root).as_posix() for p in files}
    if source.subset:
        files = [p for p in files if _in_subset(rels[p], source.subset)]
    tagged = {p: set(_PARTS.split(rels[p])) & set(SPLITS) for p in files}
    if any(tagged.values()):
        files = [p for p in files if source.split in tagged[p]]
    return files


def locate(source: Source, source_dir: Optional[Path]) -> tuple[list[Path], Optional[str]]:
    """``(files, revision)`` of ``source``: from ``source_dir`` (revision unknown: None) or
    downloaded from the Hub. No file is an error naming where it looked."""
    if source_dir is not None:
        root = Path(source_dir) / source.dataset
        if not root.is_dir():
            raise PrepareError(
                f"--source-dir {source_dir}: no folder {source.dataset}/ (download it with "
                f"`huggingface-cli download {source.dataset} --repo-type dataset --local-dir "
                f"{root}`)")
        revision = None
    else:
        root, revision = _download(source)
    files = select_files(root, source)
    if not files:
        what = f"subset {source.subset!r} " if source.subset else ""
        raise PrepareError(
            f"{root}: no {what}{source.split} data files ({', '.join(DATA_SUFFIXES)}) of "
            f"{source.dataset}")
    return files, revision


def _download(source: Source) -> tuple[Path, str]:
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError:
        raise PrepareError(
            f"{source.dataset}: huggingface_hub is not installed; install it, or download the "
            f"dataset and pass --source-dir") from None
    subset = [f"{source.subset}*", f"{source.subset}/**", f"**/{source.subset}[-_]*"]
    patterns = (list(source.paths) if source.paths else subset if source.subset else [
        "*.jsonl", "*.jsonl.gz", "*.json", "*.parquet", "**/*.jsonl", "**/*.jsonl.gz", "**/*.json",
        "**/*.parquet"])
    try:
        revision = HfApi().dataset_info(source.dataset).sha
        path = snapshot_download(source.dataset, repo_type="dataset", revision=revision,
                                 allow_patterns=patterns)
    # offline, gated, unknown repo: huggingface_hub and requests raise many kinds
    except Exception as e:
        reason = " ".join(str(e).split())[:160] or type(e).__name__
        raise PrepareError(
            f"{source.dataset}: cannot download from the Hugging Face Hub ({type(e).__name__}: "
            f"{reason}); download it where the Hub is reachable (huggingface-cli download "
            f"{source.dataset} --repo-type dataset --local-dir DIR/{source.dataset}) and pass "
            f"--source-dir DIR") from None
    return Path(path), revision


def stream(files: list[Path]) -> Iterator[tuple[str, Union[dict, Bad]]]:
    """``(where, row)`` per row of ``files`` in order (``where`` is ``FILE:LINE`` or ``FILE#ROW``);
    an unreadable line is a :class:`Bad` row, an unreadable file a :class:`PrepareError`."""
    for path in files:
        if path.name.endswith(".parquet"):
            yield from _parquet_rows(path)
        elif path.name.endswith(".csv"):
            yield from _csv_rows(path)
        else:
            yield from _jsonl_rows(path)


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Union[dict, Bad]]]:
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            for lineno, raw in enumerate(f, 1):
                where = f"{path}:{lineno}"
                if not raw.strip():
                    continue
                try:
                    row = json.loads(raw)
                except (UnicodeDecodeError, ValueError, RecursionError) as e:
                    yield where, Bad(f"{where}: invalid JSON ({' '.join(str(e).split())[:100]})")
                    continue
                yield where, (row if isinstance(row, dict) else
                              Bad(f"{where}: expected a JSON object, got {type(row).__name__}"))
    except (OSError, EOFError) as e:  # a corrupt or truncated .gz, no permission
        raise PrepareError(
            f"{path}: cannot read ({type(e).__name__}: {' '.join(str(e).split())[:120]})") from None


def _parquet_rows(path: Path) -> Iterator[tuple[str, Union[dict, Bad]]]:
    import pyarrow.parquet as pq

    try:
        reader = pq.ParquetFile(path)
        n = 0
        for batch in reader.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                n += 1
                yield f"{path}#{n}", row
    # pyarrow's ArrowInvalid is a ValueError; ArrowIOError an OSError
    except (OSError, ValueError) as e:
        raise PrepareError(f"{path}: cannot read as parquet ({type(e).__name__}: "
                           f"{' '.join(str(e).split())[:120]})") from None


def _csv_rows(path: Path) -> Iterator[tuple[str, Union[dict, Bad]]]:
    """One dict per record, keyed by the header; ``where`` is ``FILE#ROW`` (a quoted field may span
    lines)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for n, row in enumerate(csv.DictReader(f), 1):
                yield f"{path}#{n}", (Bad(f"{path}#{n}: more fields than the header names")
                                      if None in row else row)
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise PrepareError(f"{path}: cannot read as CSV ({type(e).__name__}: "
                           f"{' '.join(str(e).split())[:120]})") from None


def count_rows(files: list[Path]) -> Optional[int]:
    """Rows in ``files`` when known without reading them (all parquet: from the footers), else
    None."""
    if not all(p.name.endswith(".parquet") for p in files):
        return None
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in files)


__all__ = [
    "Source", "Bad", "Drop", "per_row", "PrepareError", "select_files", "locate", "stream",
    "count_rows"]
