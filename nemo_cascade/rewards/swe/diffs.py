"""Canonical views of a change: normalised file contents, the changed regions, and a git-style
unified diff.

Every view is computed from contents (original files → files after the edits), never from the text
the model wrote, so a search/replace answer and a unified diff that make the same change look the
same.
"""
from __future__ import annotations

import difflib
from typing import Mapping, Optional

MAX_DIFF_LINES = 20_000
"""Past this many lines between a file's first and last changed line (both sides), :func:`_opcodes`
stops aligning lines (difflib is superlinear) and treats the span as one replaced region."""

Contents = Mapping[str, Optional[str]]
"""``{path: text}``; None means the file does not exist (deleted, or never created)."""


def normalize_content(text: Optional[str]) -> Optional[str]:
    """``text`` modulo trailing whitespace: CRLF as LF, each line right-stripped, trailing blank
    lines dropped, one final newline (``""`` for a blank file). None stays None (no file)."""
    if text is None:
        return None
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _file_lines(text: Optional[str]) -> list[str]:
    """Lines with their ``\\n`` (the last one may lack it). Only ``\\n`` breaks a line, as for git;
    Python's ``splitlines`` would also break on form feeds and other separators that git keeps
    inside a line."""
    if not text:
        return []
    pieces = text.split("\n")
    return [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])


def changed_paths(files: Contents, after: Contents) -> list[str]:
    """Sorted paths whose content in ``after`` differs from ``files`` (exactly)."""
    return sorted(path for path, text in after.items() if files.get(path) != text)


def _opcodes(old: list[str], new: list[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib-style opcodes turning ``old`` into ``new``. Common head and tail lines are matched
    first (they cannot be part of a change), so difflib only sees the edited middle; a middle over
    :data:`MAX_DIFF_LINES` lines (a runaway answer) becomes one replace region rather than a slow
    alignment — still a correct diff, just not a minimal one."""
    head, shortest = 0, min(len(old), len(new))
    while head < shortest and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < shortest - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old_end, new_end = len(old) - tail, len(new) - tail
    codes = [("equal", 0, head, 0, head)] if head else []
    if old_end - head + new_end - head > MAX_DIFF_LINES:
        codes.append(("replace", head, old_end, head, new_end))
    elif head < old_end or head < new_end:
        matcher = difflib.SequenceMatcher(None, old[head:old_end], new[head:new_end])
        codes += [(tag, head + i1, head + i2, head + j1,
                   head + j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]
    if tail:
        codes.append(("equal", old_end, len(old), new_end, len(new)))
    return codes


def _hunks(codes: list[tuple[str, int, int, int, int]],
           context: int) -> list[list[tuple[str, int, int, int, int]]]:
    """Opcodes grouped into hunks with ``context`` unchanged lines around each change, as difflib's
    ``get_grouped_opcodes`` does: an unchanged run longer than twice the context splits two
    hunks."""
    if all(code[0] == "equal" for code in codes):
        return []
    codes = list(codes)
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":  # keep only the context before the first change
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":  # and after the last one
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups, group = [], []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, i1 + context, j1, j1 + context))
            groups.append(group)
            group = []
            i1, j1 = i2 - context, j2 - context
        group.append((tag, i1, i2, j1, j2))
    if not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


def changed_regions(before: Contents, after: Contents) -> list[tuple]:
    """The change from ``before`` to ``after`` (both normalised, see :func:`normalize_content`) as a
    flat sequence, the unit of :func:`~.reward.lexical_similarity`: per changed file in path order,
    per changed region (an opcode of :func:`_opcodes`), ``(path, "@@", first old line)`` then
    ``(path, "-", line)`` for each removed and ``(path, "+", line)`` for each added line. Two
    changes with the same sequence turn the same original into the same files."""
    items: list[tuple] = []
    for path in changed_paths(before, after):
        old, new = _file_lines(before.get(path)), _file_lines(after[path])
        for tag, i1, i2, j1, j2 in _opcodes(old, new):
            if tag != "equal":
                items.append((path, "@@", i1))
                items.extend((path, "-", line) for line in old[i1:i2])
                items.extend((path, "+", line) for line in new[j1:j2])
    return items


def _range(start: int, stop: int) -> str:
    """A hunk header range as git writes it: ``start,count``; ``start`` alone for one line; the line
    before the hunk for an empty range."""
    count = stop - start
    if count == 1:
        return str(start + 1)
    return f"{start + 1 if count else start},{count}"


def _file_diff(path: str, old_text: Optional[str], new_text: Optional[str], context: int) -> str:
    old, new = _file_lines(old_text), _file_lines(new_text)
    out = [f"diff --git a/{path} b/{path}\n"]
    if old_text is None:
        out.append("new file mode 100644\n")
    elif new_text is None:
        out.append("deleted file mode 100644\n")
    out.append("--- /dev/null\n" if old_text is None else f"--- a/{path}\n")
    out.append("+++ /dev/null\n" if new_text is None else f"+++ b/{path}\n")
    for group in _hunks(_opcodes(old, new), context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out.extend(" " + line for line in old[a1:a2])
                continue
            out.extend("-" + line for line in old[a1:a2])
            out.extend("+" + line for line in new[b1:b2])
    # A line without its newline (the file's last) is followed by git's marker so `git apply` keeps
    # it so.
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of "
                                                           "file\n" for line in out)


def render_unified_diff(files: Contents, after: Contents, context: int = 3) -> str:
    """A ``git apply``-able unified diff (``a/`` ``b/`` prefixes, ``/dev/null`` for created and
    deleted files, ``\\ No newline at end of file`` where due) turning ``files`` into ``after``;
    ``""`` if nothing changed."""
    return "".join(_file_diff(path, files.get(path), after[path],
                              context) for path in changed_paths(files, after))


def normalized(contents: Contents) -> dict[str, Optional[str]]:
    return {path: normalize_content(text) for path, text in contents.items()}


__all__ = ["Contents", "normalize_content", "normalized", "changed_paths", "changed_regions",
           "render_unified_diff"]
