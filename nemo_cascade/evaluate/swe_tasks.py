"""SWE-bench rows → Agentless-style repair tasks with the ``swe`` reward label (paper §4.7, App. B).

The paper evaluates SWE-bench Verified with Agentless (localization, then repair) and an
execution-based harness. Here the repair step is evaluated execution-free with the training reward
(Eq. 2): the prompt shows the issue and the files to edit, the answer's search/replace edits (or
diff) are applied and compared with the golden patch. The suite's score is the share of samples
whose edits equal the golden change (Eq. 2 = 1); the mean Eq. 2 reward is reported beside it.

File contents: SWE-bench rows carry no file contents (the harness checks out ``base_commit``). A row
with a ``files`` mapping ``{path: content}`` (our ``swe`` label shape, e.g. exported from the
Nemotron-Cascade-RL-SWE ``relevant_file_contents``) is used as is. Otherwise the files are **rebuilt
from the golden patch's hunks**: a git hunk's pre-image (context + removed lines) is the original
text at its header's line numbers, so each file is the pre-images in order, with one line ``...
lines A-B omitted ...`` for every gap (and for the rest of the file after a hunk whose trailing
context shows it is not at the end). The golden patch applies to these files exactly; the model sees
the code around every place the fix touches (the "ground-truth files only" prompt variant (a) of
§4.7, cut to the relevant regions), not whole files.

The prompt is Agentless's repair prompt (Xia et al. 2024, "Agentless: Demystifying LLM-based
Software Engineering Agents", github.com/OpenAutoCoder/Agentless, MIT), whose search/replace format
the reward parses.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..data.swe_prompts import REPAIR_PROMPT, render_repair_prompt
from ..data.rows import read_jsonl
from .suite_types import EvalError, Item
from ..rewards import VALIDATORS
from ..rewards.swe.edits import PatchError, parse_unified_diff

GIT_CONTEXT_LINES = 3
"""git diff's default context: a hunk that ends with fewer unchanged lines ends at the end of its
file."""

OMITTED_NOTE = ('A line of the form "... lines A-B omitted ..." stands for lines of the file that '
                'are not shown.')
"""The repair prompt's note on the rebuilt files' gap markers."""


def _repo_path(path: Optional[str]) -> Optional[str]:
    if path is None:
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def _omitted(first: int, last: Optional[int]) -> str:
    return f"... lines {first}-{last} omitted ..." if last else f"... lines {first}-end omitted ..."


def rebuild_files(patch: str) -> dict[str, str]:
    """``{path: content}`` of the files a git patch modifies, rebuilt from its hunks (module
    docstring). Files the patch creates are left out (they do not exist before it). EvalError if the
    patch has no hunk."""
    try:
        diffs = parse_unified_diff(patch.split("\n"))
    except PatchError as e:
        raise EvalError(f"golden patch does not parse: {e}") from None
    files: dict[str, str] = {}
    for diff in diffs:
        path = _repo_path(diff.old_path)
        if path is None or not diff.hunks:
            continue
        lines: list[str] = []
        next_line = 1  # the original line number the next shown line has
        for hunk in sorted(diff.hunks, key=lambda h: h.old_start or 0):
            start = hunk.old_start or next_line
            if start > next_line:
                lines.append(_omitted(next_line, start - 1))
            lines.extend(hunk.before)
            next_line = start + len(hunk.before)
        trailing = 0
        for tag, _ in reversed(diff.hunks[-1].lines):
            if tag != " ":
                break
            trailing += 1
        if trailing >= GIT_CONTEXT_LINES:
            lines.append(_omitted(next_line, None))
        files[path] = "\n".join(lines) + "\n"
    if not files:
        raise EvalError("golden patch modifies no existing file")
    return files


def repair_prompt(issue: str, files: dict[str, str]) -> str:
    """Agentless's repair prompt (the training prompts' template, ``data/swe_prompts.py``) showing
    ``files`` in path order, with the note on omitted lines."""
    return render_repair_prompt(issue, sorted(files.items()), OMITTED_NOTE)


def load_swe(path: Path) -> list[Item]:
    """SWE-bench rows (``instance_id``, ``problem_statement``, ``patch``), or rows in the ``swe``
    label shape (``golden_patch``, ``files``, ``problem_statement``). The reference response is the
    golden patch as a fenced diff (scores 1)."""
    items = []
    for lineno, row in read_jsonl(path, error=EvalError):
        where = f"{path}:{lineno}"
        patch = row.get("golden_patch", row.get("patch"))
        issue = row.get("problem_statement")
        if not isinstance(patch, str) or not isinstance(issue, str):
            raise EvalError(f"{where}: expected string fields 'problem_statement' and 'patch' (or "
                            "'golden_patch')")
        try:
            files = row["files"] if isinstance(row.get("files"), dict) else rebuild_files(patch)
        except EvalError as e:
            raise EvalError(f"{where}: {e}") from None
        label = {"golden_patch": patch, "files": files, "problem_statement": issue}
        try:
            VALIDATORS["swe"](label)
        except ValueError as e:
            raise EvalError(f"{where}: {e}") from None
        uid = str(row.get("instance_id", lineno))
        items.append(Item(uid, [{"role": "user", "content": repair_prompt(issue, files)}], label,
                          f"```diff\n{patch.rstrip()}\n```"))
    return items


__all__ = ["rebuild_files", "repair_prompt", "load_swe", "REPAIR_PROMPT"]
