"""The tokenized data cache: a data file is read and tokenized once, in shares over the ranks, and
every later load (a restart, the next stage, another run on the same data) maps the stored tokens
instead. SFT files are stored here; RL prompt sets use the same entries, keys and publishing
(:func:`cached_entry`) with their own parts (:mod:`.prompt_cache`).

Where (:func:`cache_root`): ``.nemo_cascade_cache/`` beside the data file when its folder is
writable, else ``<run dir>/data_cache/`` (the loader's ``fallback``; a read-only dataset mount),
else nothing is stored and the file is tokenized in memory. Every rank must see the same folder (a
shared file system: the data or run dir of a multi-node job is one already).

What (the entry's name is a hash of all of it, :func:`entry_key`): the data file's sha256 —
remembered per file with its size and mtime (``sources/``), so an unchanged file is not re-hashed,
and a touched but unchanged file hashes to the same entry — the tokenizer's digest (its serialized
vocabulary, merges, added tokens), the chat style's template text, the mode, ``Data.size`` and
:data:`CACHE_FORMAT`. Length limits and ``Data.max_bad_rows`` are applied at load time, so a stage
with other limits reuses the entry.

How: share ``k`` of ``n`` (``data.rows.Share``) is tokenized by rank ``k`` into ``part-k.tokens``
(int32, each row's segments back to back), ``part-k.offsets.npy``, ``part-k.prompt_lens.npy`` and
the later segments' ``part-k.bounds.npy`` / ``bound_offsets.npy``, in a temporary folder that rank 0
renames to the entry's name once every part is written (with ``manifest.json``: the rows, bad-row
counts and first bad row of each part, and every file's size) — a reader never sees a half-written
entry, and an entry whose files no longer have their recorded sizes is removed and rebuilt. Loading
memory-maps the parts: the examples are a :class:`TokenizedSFT` view that builds a row's token lists
when the batch builder asks for it, and the ranks of a node share the pages.
"""
from __future__ import annotations

import array
import contextlib
import hashlib
import itertools
import json
import logging
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Callable, Iterable, Optional

import numpy as np

from ..runtime import ranks
from ..config import Data
from ..runtime.files import file_sha256, read_json, write_text_atomically
from .chat import JINJA_TEMPLATES
from .rows import DataError, Share, share_count
from .sft_rows import answer_mode, parse_sft_row, sft_segments
from nemo_cascade.runtime import console

log = logging.getLogger(__name__)

CACHE_DIR = ".nemo_cascade_cache"
CACHE_FORMAT = 3
"""Bumped whenever the rows → tokens mapping changes in a way the key does not see (2: manifests
list their files' sizes, checked before an entry is used; 3: an example is segments, every assistant
turn learned)."""
BATCH_ROWS = 512
"""Rows tokenized per call of the (Rust, multi-threaded) batch encoder."""
_PLACE = "\x00where\x00"
"""Stands for ``FILE:LINE`` while a row is parsed; a bad row's message gets its real line
(rows.Share.where)."""


class TokenizedSFT(Sequence):
    """An example per kept row, read from memory-mapped parts on demand: its token segments
    (:func:`~.sft_rows.sft_segments`: ``(prompt_ids, response_ids)`` for one learned turn, context
    and learned segments alternating for more). Carries the loader's counts like ``PromptList``."""

    dropped_too_long = dropped_too_short = bad_rows = dropped_other_mode = 0

    def __init__(self, parts: list[tuple[np.ndarray, ...]], keep: Optional[np.ndarray] = None):
        self._parts = parts
        counts = [len(p[2]) for p in parts]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.prompt_lens = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int32)
        self._keep = np.arange(len(self.prompt_lens), dtype=np.int64) if keep is None else keep

    def kept(self, keep: np.ndarray) -> "TokenizedSFT":
        """The same parts, only rows ``keep`` (indices into all rows)."""
        return TokenizedSFT(self._parts, self._keep[keep])

    def __len__(self) -> int:
        return len(self._keep)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = int(self._keep[i])
        part = int(np.searchsorted(self._starts, row, side="right")) - 1
        tokens, offsets, prompt_lens, bounds, bound_offsets = self._parts[part]
        local = row - int(self._starts[part])
        begin, end = int(offsets[local]), int(offsets[local + 1])
        ids = tokens[begin:end].tolist()
        later = bounds[bound_offsets[local]:bound_offsets[local + 1]].tolist()
        cuts = [0, int(prompt_lens[local]), *later, len(ids)]
        return tuple(ids[a:b] for a, b in zip(cuts, cuts[1:]))


# -------------------------------------------------------------------------------------------- keys

def cache_root(path: Path, fallback: Optional[Path]) -> Optional[Path]:
    """``.nemo_cascade_cache`` beside ``path`` when a file can be created there, else ``fallback``
    (or None). Tried rather than asked (``os.access``): root passes every permission check, not a
    read-only mount."""
    beside = path.parent / CACHE_DIR
    try:
        beside.mkdir(exist_ok=True)
        with tempfile.TemporaryFile(dir=beside):
            pass
        return beside
    except OSError:
        return fallback


def remembered_sha256(path: Path, root: Path) -> str:
    """The file's sha256; taken from ``root/sources/`` when the file's size and mtime are the ones
    it was hashed at, else computed (and remembered)."""
    st = path.stat()
    where_hash = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    stamp = root / "sources" / f"{path.name}.{where_hash}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        known = json.loads(stamp.read_text())
        if known["size"] == st.st_size and known["mtime_ns"] == st.st_mtime_ns:
            return known["sha256"]
    sha = file_sha256(path)
    write_text_atomically(stamp, json.dumps({"path": str(path.resolve()), "size": st.st_size,
                                             "mtime_ns": st.st_mtime_ns, "sha256": sha}) + "\n")
    return sha


def tokenizer_digest(tokenizer) -> Optional[str]:
    """A hash of everything that decides a tokenizer's ids: its class and its serialized backend
    (vocabulary, merges, normaliser, pre-tokenizer, added tokens); the sorted vocabulary for a slow
    tokenizer. None for an object that shows neither (nothing is cached for it: its ids could change
    unseen)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        body = backend.to_str()
    elif callable(getattr(tokenizer, "get_vocab", None)):
        body = json.dumps(sorted(tokenizer.get_vocab().items()))
    else:
        return None
    return hashlib.sha256(f"{type(tokenizer).__name__}\n{body}".encode()).hexdigest()


def encode_batch(tokenizer, texts: list[str]) -> list[list[int]]:
    """``tokenizer.encode(text, add_special_tokens=False)`` of each text; one call of a fast
    tokenizer's batch encoder (the same ids, computed in Rust threads)."""
    if getattr(tokenizer, "backend_tokenizer", None) is not None:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [list(tokenizer.encode(t, add_special_tokens=False)) for t in texts]


def entry_key(source_sha: str, tokenizer, settings: dict) -> str:
    """The entry's name: a hash of the file's content, the tokenizer and ``settings`` — every other
    input that decides the stored tokens (the kind of entry, the template, mode, size; a prompt
    set's domain settings)."""
    key = {"format": CACHE_FORMAT, "source": source_sha, "tokenizer": tokenizer_digest(tokenizer),
           **settings}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def sft_settings(mode: str, style: str, size: int, turns: str, keep_mode: str) -> dict:
    """What decides an SFT entry's tokens besides the file and the tokenizer."""
    return {"kind": "sft", "template": JINJA_TEMPLATES[style], "style": style, "mode": mode,
            "size": size, "turns": turns, "keep_mode": keep_mode}


# ------------------------------------------------------------------------------------------ build

def tokenize_rows(share: Share, out: Path, progress: bool, items: Iterable,
                  encode: Callable[[BinaryIO, list], None]) -> None:
    """The loop both caches tokenize a share with: ``items``, one per row of ``share`` (None for a
    row skipped), handed to ``encode(tokens_file, items)`` :data:`BATCH_ROWS` at a time, the tokens
    written to ``out/part-K.tokens``; a progress bar on the console when ``progress``."""
    kept = (item for item in items if item is not None)
    bar = console.progress(None, f"tokenizing {share.path.name}", "row", disable=not progress)
    with open(out / f"part-{share.index}.tokens", "wb") as f:
        while batch := list(itertools.islice(kept, BATCH_ROWS)):
            encode(f, batch)
            bar.update(len(batch))
    bar.close()


def tokenize_share(share: Share, tokenizer, mode: str, style: str, turns: str, out: Path,
                   progress: bool = False, keep_mode: str = "") -> dict:
    """Tokenize one share into ``out/part-K.*``; returns the part's summary (rows, tokens, bad rows
    and the first bad row's one-line message, rows left out by ``keep_mode``: ``other_mode``). A
    row's tokens are its segments back to back; ``prompt_lens`` holds where its first learned
    segment begins, ``bounds`` (rows listed by ``bound_offsets``) where its later segments begin,
    for rows of several learned turns."""
    k = share.index
    offsets, plens = array.array("q", [0]), array.array("i")
    bounds, bound_offsets = array.array("i"), array.array("q", [0])
    bad: list[tuple[int, str]] = []
    other_mode = 0

    def texts(line: int, row: dict) -> Optional[list[str]]:
        nonlocal other_mode
        try:
            messages, tools = parse_sft_row(row, _PLACE)
            if keep_mode and answer_mode(messages, mode) != keep_mode:
                other_mode += 1
                return None
            return sft_segments(messages, tools, mode, style, turns)
        except ValueError as e:  # the row's shape, or a mode/template error from render
            msg = str(e)
            where = share.where(line)
            placed = where + msg[len(_PLACE):] if msg.startswith(_PLACE) else f"{where}: {msg}"
            bad.append((line, placed))
            return None

    def encode(f: BinaryIO, pending: list[list[str]]) -> None:
        ids = iter(encode_batch(tokenizer, [text for segments in pending for text in segments]))
        for segments in pending:
            pieces = [next(ids) for _ in segments]
            f.write(np.asarray(list(itertools.chain(*pieces)), dtype=np.int32).tobytes())
            cuts = list(itertools.accumulate(len(piece) for piece in pieces[:-1]))
            plens.append(cuts[0])
            bounds.extend(cuts[1:])
            bound_offsets.append(len(bounds))
            offsets.append(offsets[-1] + sum(len(piece) for piece in pieces))

    tokenize_rows(share, out, progress, (texts(line, row) for line, row in share.rows(bad)), encode)
    np.save(out / f"part-{k}.offsets.npy", np.frombuffer(offsets, dtype=np.int64))
    np.save(out / f"part-{k}.prompt_lens.npy", np.frombuffer(plens, dtype=np.int32))
    np.save(out / f"part-{k}.bounds.npy", np.frombuffer(bounds, dtype=np.int32))
    np.save(out / f"part-{k}.bound_offsets.npy", np.frombuffer(bound_offsets, dtype=np.int64))
    bad.sort()
    return {"part": k, "rows": len(plens), "tokens": offsets[-1], "bad_rows": len(bad),
            "first_bad": bad[0][1] if bad else None, "other_mode": other_mode}


def _publish(tmp: Path, entry: Path, manifest: dict) -> None:
    """Write the manifest last and rename the folder into place; a concurrent run that published the
    same entry first wins (same key, same content)."""
    manifest = {**manifest, "files": {p.name: p.stat().st_size for p in sorted(tmp.iterdir())}}
    write_text_atomically(tmp / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    try:
        tmp.rename(entry)
    except OSError:
        if not (entry / "manifest.json").is_file():
            raise
        shutil.rmtree(tmp, ignore_errors=True)


def read_manifest(entry: Path) -> dict:
    """The one reader of a data cache entry's manifest.json (SFT rows here, RL prompts in
    prompt_cache): a one-line DataError (a ValueError, which _intact catches) when it is missing,
    not JSON or not an object."""
    return read_json(entry / "manifest.json", "a data cache entry's manifest", error=DataError,
                     hint="delete the folder to rebuild it")


def _intact(entry: Path) -> bool:
    """Whether a published entry is whole: its manifest parses and every file it lists has the size
    it was written with. A damaged entry (a file truncated, deleted or replaced after publishing) is
    never read: it is removed here and built again."""
    if not entry.exists():
        return False
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        files = read_manifest(entry)["files"]
        if all((entry / name).stat().st_size == size for name, size in files.items()):
            return True
    log.warning("%s: damaged data cache entry; rebuilding it", entry)
    doomed = entry.with_name(f".{entry.name}.{os.getpid()}-{secrets.token_hex(4)}.damaged")
    try:
        # out of the way first, so no reader opens it while it is being removed
        entry.rename(doomed)
    except OSError:  # another run moved it first
        return False
    shutil.rmtree(doomed, ignore_errors=True)
    return False


def open_entry(entry: Path) -> tuple[TokenizedSFT, dict]:
    manifest = read_manifest(entry)
    parts = []
    for part in manifest["parts"]:
        k = part["part"]
        tokens = (np.memmap(entry / f"part-{k}.tokens", dtype=np.int32, mode="r") if part["tokens"]
                  else np.zeros(0, np.int32))
        offsets = np.load(entry / f"part-{k}.offsets.npy", mmap_mode="r")
        plens = np.load(entry / f"part-{k}.prompt_lens.npy")
        bounds = np.load(entry / f"part-{k}.bounds.npy", mmap_mode="r")
        bound_offsets = np.load(entry / f"part-{k}.bound_offsets.npy", mmap_mode="r")
        rows = part["rows"]
        if (len(tokens) != part["tokens"] or len(plens) != rows or len(offsets) != rows + 1
                or len(bound_offsets) != rows + 1):
            raise DataError(f"{entry}: part {k} does not match its manifest; delete the folder to "
                            "rebuild it")
        parts.append((tokens, offsets, plens, bounds, bound_offsets))
    return TokenizedSFT(parts), manifest


def load(path: Path, tokenizer, mode: str, style: str, data: Data, fallback: Optional[Path]
         ) -> Optional[tuple[TokenizedSFT, dict]]:
    """Every row of ``path`` tokenized (all rows in ``data.keep_mode``, no length filter) and the
    manifest, from the cache or built into it now (collective: every rank calls it). None when there
    is nowhere to store a cache."""
    def tokenize(share: Share, out: Path, progress: bool) -> dict:
        return tokenize_share(share, tokenizer, mode, style, data.sft_turns, out, progress,
                              data.keep_mode)

    settings = sft_settings(mode, style, data.size, data.sft_turns, data.keep_mode)
    entry = cached_entry(path, tokenizer, settings, data.size, fallback, tokenize)
    return None if entry is None else open_entry(entry)


def _find_entry(path: Path, tokenizer, settings: dict, fallback: Optional[Path]) -> Optional[tuple]:
    """Rank 0's look-up for :func:`cached_entry`: ``("entry", folder, intact)``, ``("error",
    one-line message)`` for a missing file, or None when nothing is cached (no cache root, no
    tokenizer digest, not a file)."""
    if not path.exists():
        return ("error", f"data file not found: {path}")
    # a folder, a device: nothing is cached, the in-memory reader names the problem
    if not path.is_file():
        return None
    root = cache_root(path, fallback)
    if root is None or tokenizer_digest(tokenizer) is None:
        return None
    key = entry_key(remembered_sha256(path, root), tokenizer, settings)
    entry = root / f"{path.name}.{key[:24]}"
    return ("entry", str(entry), _intact(entry))


def cached_entry(path: Path, tokenizer, settings: dict, size: int, fallback: Optional[Path],
                 tokenize: Callable[[Share, Path, bool], dict]) -> Optional[Path]:
    """The cache entry of ``path`` under ``settings`` (:func:`entry_key`), built now if there is
    none (collective: every rank calls it): rank ``k`` runs ``tokenize(share k, folder, progress)``,
    which writes ``part-k.*`` into the temporary folder and returns the part's summary (``rows``,
    ``bad_rows``, ``first_bad``, or ``error``: a one-line DataError message that stops loading on
    every rank); rank 0 publishes the folder with the manifest. ``size`` > 0 (the file's first rows)
    is read in one share. None when there is nowhere to store a cache or the tokenizer has no
    digest."""
    rank, world = ranks.world()
    found = ranks.from_main(_find_entry(path, tokenizer, settings, fallback) if rank == 0 else None)
    if found is None:
        return None
    if found[0] == "error":
        raise DataError(found[1])
    entry, ready = Path(found[1]), found[2]
    if not ready:
        shares = 1 if size else share_count(path, world)
        tmp_name = f".{entry.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        tmp = ranks.from_main(str(entry.with_name(tmp_name)))
        if rank == 0:
            Path(tmp).mkdir(parents=True)
            log.info("%s: tokenizing into %s (%d shares)", path, entry, shares)
        ranks.barrier()
        summary = None
        if rank < shares:
            try:
                summary = tokenize(Share(path, rank, shares, limit=size), Path(tmp), rank == 0)
            except DataError as e:
                summary = {"error": str(e)}
            # interrupted: nothing half-written stays behind (a killed rank leaves a
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)  # hidden .tmp folder no lookup ever opens)
                raise
        summaries = ranks.gather_objects(summary)
        done = [s for s in summaries if s is not None]
        uncacheable = next((s["uncacheable"] for s in done if "uncacheable" in s), None)
        failure = next((s["error"] for s in done if "error" in s), None)
        # every rank sees the same summaries: all return None
        if uncacheable is not None and failure is None:
            if rank == 0:
                shutil.rmtree(tmp, ignore_errors=True)
                log.warning("%s: not cached, loaded in memory: %s", path, uncacheable)
            return None
        if rank == 0:
            if failure is None:
                kept = {k: v for k, v in settings.items() if k != "template"}
                _publish(Path(tmp), entry, {"format": CACHE_FORMAT, "source": str(path),
                                            "size": size, **kept, "parts": done})
            else:
                shutil.rmtree(tmp, ignore_errors=True)
        ranks.barrier()  # no rank looks for the entry before rank 0 has published it
        if failure is not None:
            raise DataError(failure)
    if not (entry / "manifest.json").is_file():
        raise DataError(f"{entry}: the data cache is not visible on rank {rank}; it must be on a "
                        "file system every rank sees")
    return entry


__all__ = ["TokenizedSFT", "load", "cached_entry", "open_entry", "tokenize_share", "tokenize_rows",
           "cache_root",
           "remembered_sha256", "tokenizer_digest", "entry_key", "sft_settings", "encode_batch",
           "CACHE_DIR",
           "CACHE_FORMAT"]
