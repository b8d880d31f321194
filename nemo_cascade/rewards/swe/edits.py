"""Reading a repair answer's edits and applying them to the prompt's files (the rules are in
``swe/__init__``).

:func:`apply_answer` is the whole contract: the new contents of every file the answer touched, or
:class:`PatchError` (reward −1) when the edits cannot be parsed or applied. Files are handled as
lists of lines from ``text.split("\\n")`` (so ``"a\\nb\\n"`` is ``["a", "b", ""]`` and joining
restores the text exactly); blocks are located by comparing lines **modulo trailing whitespace**,
through ``str.find`` on the joined lines, so each search is a linear scan in C whatever the input.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

MAX_EDITS = 100
"""Most search/replace blocks or diff hunks one answer may hold; more is a degenerate answer
(PatchError). An Agentless repair has a handful; the cap bounds the work per answer to MAX_EDITS
linear scans."""

PATH_LOOKBACK_LINES = 8
"""A search/replace block's ``### path`` line must be among this many lines before its SEARCH marker
(it normally directly precedes it, maybe with a fence line between); this bounds the work per
block."""

# One scan finds every marker line; [ \t] rather than \s so that no match can run across blank
# lines.
_MARKER = re.compile(r"^[ \t]*(?:(<{5,9} ?SEARCH)|(={5,9})|>{5,9} ?REPLACE)[ \t]*$", re.M)
_HUNK_HEADER = re.compile(r"@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@")
_PATH_QUOTES = "`'\"*"
DEV_NULL = "/dev/null"


class PatchError(ValueError):
    """The answer's edits cannot be parsed or applied to the given files (reward −1)."""


@dataclass
class Hunk:
    """One diff hunk: ``old_start`` (1-based, None when the header gave no numbers) and its lines as
    ``(tag, text)`` with tag ``" "`` (context), ``"-"`` (removed) or ``"+"`` (added)."""
    old_start: Optional[int]
    lines: list[tuple[str, str]] = field(default_factory=list)

    @property
    def before(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "+"]

    @property
    def after(self) -> list[str]:
        return [text for tag, text in self.lines if tag != "-"]


@dataclass
class FileDiff:
    """The hunks under one ``--- old`` / ``+++ new`` header; a path is None for ``/dev/null``."""
    old_path: Optional[str]
    new_path: Optional[str]
    hunks: list[Hunk] = field(default_factory=list)


# ------------------------------------------------------------------ locating blocks of lines

def _key(line: str) -> str:
    return line.rstrip()


def _occurrences(lines: list[str], block: list[str], start: int = 0, limit: int = -1) -> list[int]:
    """Indices ``i >= start`` where ``lines[i:i+len(block)]`` equals ``block`` modulo trailing
    whitespace (at most ``limit`` of them when ``limit > 0``). Wrapping both sides in newlines makes
    every ``find`` hit line-aligned, and line numbers are counted incrementally, so the cost is
    linear in the file."""
    haystack = "\n" + "\n".join(_key(line) for line in lines[start:]) + "\n"
    needle = "\n" + "\n".join(_key(line) for line in block) + "\n"
    found: list[int] = []
    line_no, counted_to = start, 0
    pos = haystack.find(needle)
    while pos >= 0 and len(found) != limit:
        line_no += haystack.count("\n", counted_to, pos)
        counted_to = pos
        found.append(line_no)
        pos = haystack.find(needle, pos + 1)
    return found


def _real_line_count(lines: list[str]) -> int:
    """Lines of the file, not counting the empty piece after a final newline."""
    return len(lines) - 1 if lines and lines[-1] == "" else len(lines)


class _Workspace:
    """The files being edited: originals from the label, touched ones copied into line lists on
    first use."""

    def __init__(self, files: Mapping[str, str]):
        self.files = files
        self.touched: dict[str, Optional[list[str]]] = {}

    def resolve(self, path: str) -> str:
        """The label's spelling of ``path``: ``./`` dropped, and a git ``a/`` ``b/`` prefix dropped
        unless the prefixed path itself is a file (a repository may have a top-level ``a/``)."""
        while path.startswith("./"):
            path = path[2:]
        if path[:2] in ("a/", "b/") and not self.exists(path):
            return path[2:]
        return path

    def exists(self, path: str) -> bool:
        if path in self.touched:
            return self.touched[path] is not None
        return path in self.files

    def lines(self, path: str) -> list[str]:
        if not self.exists(path):
            raise PatchError(f"edit to {path!r}, which is not among the given files")
        if path not in self.touched:
            # CRLF files keep their "\r"s: matching ignores trailing whitespace, and the exported
            # diff then touches only the edited lines.
            self.touched[path] = self.files[path].split("\n")
        return self.touched[path]  # type: ignore[return-value]  # exists() ruled out None

    def create(self, path: str, lines: list[str]) -> None:
        if self.exists(path):
            raise PatchError(f"diff creates {path!r}, which already exists")
        self.touched[path] = lines

    def contents(self) -> dict[str, Optional[str]]:
        return {path: None if lines is None else "\n".join(lines)
                for path, lines in self.touched.items()}


# ------------------------------------------------------------------ search/replace blocks

def _path_candidate(line: str) -> tuple[Optional[str], bool]:
    """``(path, is_hash_header)`` when ``line`` could name a file: one token, optionally after
    ``#``s and inside backticks/quotes/bold, optionally ending in ``:``."""
    stripped = line.strip()
    is_hash = stripped.startswith("#")
    token = stripped.lstrip("#").strip().rstrip(":").strip(_PATH_QUOTES)
    if not token or any(c.isspace() for c in token):
        return None, False
    return token, is_hash


def _block_path(gap: str, is_file: Callable[[str], bool]) -> Optional[str]:
    """The file a SEARCH block edits, named in the last :data:`PATH_LOOKBACK_LINES` lines before it
    (and after the previous block): the last line naming one of the given files, else the last ``#
    path`` header (a wrong name then fails to apply), else None."""
    # +1: the gap ends with the newline before SEARCH
    tail = gap.rsplit("\n", PATH_LOOKBACK_LINES + 1)
    if len(tail) > PATH_LOOKBACK_LINES + 1:
        tail = tail[1:]  # the rest of the gap, possibly megabytes of prose: not a path line
    last_header = None
    for line in reversed(tail):
        path, is_hash = _path_candidate(line)
        if path is None:
            continue
        if is_file(path):
            return path
        if is_hash and last_header is None:
            last_header = path
    return last_header


@dataclass
class SearchReplace:
    """One block: its file, the lines between the SEARCH and REPLACE markers, and where in them a
    divider line (``=======``) stands. Several dividers are possible: the edited text may hold one
    (an RST title)."""
    path: str
    body: list[str]
    dividers: list[int]

    def splits(self) -> list[tuple[list[str], list[str]]]:
        """The (search, replace) readings, one per divider with a non-empty search before it."""
        return [(self.body[:d], self.body[d + 1:]) for d in self.dividers if d > 0]


def has_search_replace(text: str) -> bool:
    return any(m.group(1) for m in _MARKER.finditer(text))


def parse_search_replace(text: str,
                         is_file: Callable[[str], bool] = lambda path: True) -> list[SearchReplace]:
    """The blocks of ``text`` in order; markers are found by one regex scan, so the cost is linear.
    A block's file is named just before it (:func:`_block_path`; Agentless writes ``### path``),
    else it is the previous block's file. Dividers outside a block are ignored (a Markdown
    underline). PatchError on a block without a file, a divider or a REPLACE marker, with a SEARCH
    marker inside or nothing before its divider(s), on a stray REPLACE marker, and past
    :data:`MAX_EDITS` readings in all."""
    blocks: list[SearchReplace] = []
    path: Optional[str] = None
    opened = None  # the SEARCH marker match of the block being read
    dividers: list[int] = []  # character offsets of its divider lines
    gap_start, readings = 0, 0
    for marker in _MARKER.finditer(text):
        search, divider = marker.groups()
        if opened is None:
            if search:
                path = _block_path(text[gap_start:marker.start()], is_file) or path
                if path is None:
                    raise PatchError(f"offset {marker.start()}: SEARCH block without a '### path' "
                                     "line")
                opened, dividers = marker, []
            elif not divider:
                raise PatchError(f"offset {marker.start()}: REPLACE marker without a SEARCH block")
            continue
        if search:
            raise PatchError(f"offset {marker.start()}: SEARCH marker inside the block at "
                             f"{opened.start()}")
        if divider:
            dividers.append(marker.start())
            readings += 1
            if readings > MAX_EDITS:
                raise PatchError(f"more than {MAX_EDITS} search/replace blocks or dividers")
            continue
        blocks.append(_block(text, path, opened, dividers, marker))  # type: ignore[arg-type]
        opened, gap_start = None, marker.end()
    if opened is not None:
        raise PatchError(f"offset {opened.start()}: SEARCH block never reaches its REPLACE marker")
    return blocks


def _block(text: str, path: str, opened: re.Match, dividers: list[int],
           closed: re.Match) -> SearchReplace:
    body_start = opened.end() + 1  # the SEARCH line's newline
    body = text[body_start:closed.start()]
    # the piece after the last newline is the marker's indent
    lines = body.split("\n")[:-1] if body else []
    at, line_no, block_dividers = body_start, 0, []
    for offset in dividers:
        line_no += text.count("\n", at, offset)
        at = offset
        block_dividers.append(line_no)
    block = SearchReplace(path, lines, block_dividers)
    if not block.splits():
        raise PatchError(f"offset {opened.start()}: SEARCH block without a divider after non-empty "
                         "SEARCH lines")
    return block


def _apply_search_replace(work: _Workspace, blocks: list[SearchReplace]) -> None:
    """Each block in order on the file as edited so far. Its SEARCH must occur exactly once; with
    several dividers, the reading whose SEARCH occurs exactly once wins, the longest SEARCH among
    several."""
    for block in blocks:
        path = work.resolve(block.path)
        lines = work.lines(path)
        unique = [(search, replace, found[0]) for search, replace in block.splits()
                  for found in [_occurrences(lines, search, limit=2)] if len(found) == 1]
        if not unique:
            raise PatchError(f"SEARCH block for {path!r} does not occur exactly once in the file")
        search, replace, at = max(unique, key=lambda u: len(u[0]))
        lines[at:at + len(search)] = replace


# ------------------------------------------------------------------ unified diffs

def _is_file_header(lines: list[str], i: int) -> bool:
    return lines[i].startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ ")


def _ends_hunk(lines: list[str], i: int) -> bool:
    line = lines[i]
    return (line.startswith(("@@", "diff ", "```", "Index: ")) or _is_file_header(lines, i)
            or line[:1] not in (" ", "+", "-", "\\", ""))


def _diff_path(header: str) -> Optional[str]:
    path = header[4:].split("\t")[0].strip().strip(_PATH_QUOTES)
    return None if path == DEV_NULL else path


def _counted_body(lines: list[str], start: int, old_count: int, new_count: int) -> Optional[int]:
    """The end of a hunk body holding exactly the header's line counts (git's diffs), or None when
    the counts are wrong (a model's diff): then :func:`_free_body` decides."""
    i, old, new = start, 0, 0
    while old < old_count or new < new_count:
        if i >= len(lines):
            return None
        tag = lines[i][:1]
        if tag in (" ", ""):
            old, new = old + 1, new + 1
        elif tag == "-":
            old += 1
        elif tag == "+":
            new += 1
        elif tag != "\\":
            return None
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    if old != old_count or new != new_count:
        return None
    return i if i >= len(lines) or lines[i] == "" or _ends_hunk(lines, i) else None


def _free_body(lines: list[str], start: int) -> int:
    """The end of a hunk body read without trusting its header: up to the first line that cannot
    belong to a hunk, minus trailing empty lines (separators, not blank context)."""
    i = start
    while i < len(lines) and not _ends_hunk(lines, i):
        i += 1
    while i > start and lines[i - 1] == "":
        i -= 1
    return i


def parse_unified_diff(lines: list[str]) -> list[FileDiff]:
    """The file diffs of a (possibly sloppy) unified diff. Tolerated: prose and fences around it,
    missing ``a/`` ``b/`` prefixes, wrong or missing hunk line numbers and counts, blank context
    lines without their leading space. PatchError on a hunk before any file header, an empty hunk,
    or more than :data:`MAX_EDITS` hunks or file headers."""
    diffs: list[FileDiff] = []
    n_hunks, i = 0, 0
    while i < len(lines):
        line = lines[i]
        if _is_file_header(lines, i):
            diffs.append(FileDiff(_diff_path(line), _diff_path(lines[i + 1])))
            if len(diffs) > MAX_EDITS:
                raise PatchError(f"more than {MAX_EDITS} diff file headers")
            i += 2
            continue
        if not line.startswith("@@"):
            i += 1
            continue
        if not diffs:
            raise PatchError(f"line {i + 1}: hunk without a '--- a/path' / '+++ b/path' header")
        n_hunks += 1
        if n_hunks > MAX_EDITS:
            raise PatchError(f"more than {MAX_EDITS} diff hunks")
        header = _HUNK_HEADER.match(line)
        end = None
        if header:
            old_count = 1 if header.group(2) is None else int(header.group(2))
            new_count = 1 if header.group(4) is None else int(header.group(4))
            end = _counted_body(lines, i + 1, old_count, new_count)
        if end is None:
            end = _free_body(lines, i + 1)
        if end == i + 1:
            raise PatchError(f"line {i + 1}: empty hunk")
        hunk = Hunk(int(header.group(1)) if header else None)
        for body_line in lines[i + 1:end]:
            # "\ No newline at end of file": trailing whitespace here
            if not body_line.startswith("\\"):
                tag = body_line[:1] or " "
                hunk.lines.append((tag, body_line[1:]))
        if not hunk.lines:  # only "\ No newline" markers: no edit, so a malformed hunk, not a no-op
            raise PatchError(f"line {i + 1}: empty hunk")
        diffs[-1].hunks.append(hunk)
        i = end
    return diffs


def _apply_hunks(lines: list[str], hunks: list[Hunk], path: str) -> None:
    """Hunks in order, each at or after the end of the previous one. A hunk's pre-image is located
    by its context; among several matches the one nearest its header's line number (shifted by the
    lines earlier hunks added) wins, ties to the first; a header without numbers needs a unique
    match. A pure insertion (empty pre-image) goes after header line ``old_start``."""
    floor, shift = 0, 0
    for hunk in hunks:
        before, after = hunk.before, hunk.after
        if hunk.old_start is None:
            expected = None
        else:
            # -N,0 means "insert after line N"
            expected = hunk.old_start + shift - (1 if before else 0)
        if not before:
            if expected is None or not floor <= expected <= _real_line_count(lines):
                raise PatchError(f"insertion hunk for {path!r} without a valid line number")
            at = expected
        else:
            found = _occurrences(lines, before, start=floor)
            if expected is None and len(found) > 1:
                raise PatchError(f"hunk for {path!r} without line numbers matches more than once")
            if not found:
                raise PatchError(f"hunk context for {path!r} does not match the file")
            at = found[0] if expected is None else min(found, key=lambda k: (abs(k - expected), k))
        lines[at:at + len(before)] = after
        floor, shift = at + len(after), shift + len(after) - len(before)


def _apply_diffs(work: _Workspace, diffs: list[FileDiff]) -> None:
    # A /dev/null side without hunks creates or deletes an empty file (how render_unified_diff
    # writes that); other headers without a hunk edit nothing: prose that happens to hold "--- x" /
    # "+++ y" lines.
    if not any(d.hunks or (d.old_path is None) != (d.new_path is None) for d in diffs):
        raise PatchError("unified diff without any hunk")
    for diff in diffs:
        if diff.old_path is None and diff.new_path is None:
            raise PatchError("diff header with /dev/null on both sides")
        if diff.old_path is None:  # a new file: every hunk line must be an addition
            path = work.resolve(diff.new_path)  # type: ignore[arg-type]
            if any(tag != "+" for hunk in diff.hunks for tag, _ in hunk.lines):
                raise PatchError(f"new file {path!r}: hunk has context or removed lines")
            work.create(path, [text for hunk in diff.hunks for text in hunk.after] + [""])
            continue
        path = work.resolve(diff.old_path)
        if diff.new_path is not None and work.resolve(diff.new_path) != path:
            raise PatchError(f"renames are not supported ({diff.old_path!r} -> {diff.new_path!r})")
        lines = work.lines(path)
        _apply_hunks(lines, diff.hunks, path)
        if diff.new_path is None:  # a deletion must remove the whole file
            if any(line.strip() for line in lines):
                raise PatchError(f"diff deletes {path!r} but leaves lines in it")
            work.touched[path] = None


# ------------------------------------------------------------------ entry point

def apply_answer(answer: str, files: Mapping[str, str]) -> dict[str, Optional[str]]:
    """``{path: new content}`` (None: deleted) for every file the answer's edits touched; ``{}`` for
    an empty answer. Search/replace blocks take precedence: a unified diff is read only when the
    answer has no SEARCH marker. PatchError when the answer has neither, or its edits cannot be
    parsed or applied."""
    text = answer.replace("\r\n", "\n")
    work = _Workspace(files)
    if not text.strip():
        return {}
    if has_search_replace(text):
        _apply_search_replace(work,
                              parse_search_replace(text, lambda p: work.exists(work.resolve(p))))
    else:
        diffs = parse_unified_diff(text.split("\n"))
        if not diffs:
            raise PatchError("no search/replace block or unified diff in the answer")
        _apply_diffs(work, diffs)
    return work.contents()


__all__ = ["PatchError", "Hunk", "FileDiff", "SearchReplace", "MAX_EDITS", "apply_answer",
           "parse_search_replace",
           "parse_unified_diff", "has_search_replace"]
