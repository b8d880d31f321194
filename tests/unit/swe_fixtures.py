"""SWE-bench Lite golden patches turned into reward fixtures, independently of the code under test.

The dataset has no file contents, but a git hunk's pre-image (context + removed lines) is the
original text at its header's line numbers. :func:`rebuild` places every pre-image there and fills
the gaps with unique filler lines, which gives files the golden patch applies to exactly (also for
``git apply``) and the expected result of applying it. The parsing here is deliberately strict
(git's own output only) and shares no code with ``nemo_cascade.rewards.swe``.
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "swe" / "swe_bench_lite_patches.jsonl.gz"
_HEADER = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class GitHunk:
    old_start: int
    old_count: int
    lines: list[str]  # with their tag character

    @property
    def before(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " -"]

    @property
    def after(self) -> list[str]:
        return [line[1:] for line in self.lines if line[0] in " +"]


@dataclass
class Instance:
    instance_id: str
    problem_statement: str
    patch: str
    hunks: dict[str, list[GitHunk]]  # path -> hunks in order
    files: dict[str, str]  # rebuilt originals
    expected: dict[str, str]  # the golden patch applied to them

    def label(self) -> dict:
        return {"golden_patch": self.patch, "files": self.files,
                "problem_statement": self.problem_statement}

    def under(self, directory: str) -> "Instance":
        """The same instance with its files moved under ``directory/`` (``patch`` is left as it
        was)."""
        def move(mapping: dict) -> dict:
            return {f"{directory}/{path}": value for path, value in mapping.items()}
        return Instance(self.instance_id, self.problem_statement, self.patch, move(self.hunks),
                        move(self.files), move(self.expected))


def git_hunks(patch: str) -> dict[str, list[GitHunk]]:
    """Hunks per file of a git-produced diff, read by the header counts."""
    lines = patch.split("\n")
    out: dict[str, list[GitHunk]] = {}
    path, i = None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- a/") and lines[i + 1].startswith("+++ b/"):
            path = lines[i + 1][len("+++ b/"):]
            assert line[len("--- a/"):] == path, \
                "fixture parser: renames are not expected in SWE-bench Lite"
            out[path] = []
            i += 2
            continue
        match = _HEADER.match(line)
        if match:
            old_count = int(match.group(2) or 1)
            new_count = int(match.group(4) or 1)
            body, old, new, i = [], 0, 0, i + 1
            while old < old_count or new < new_count:
                body.append(lines[i])
                tag = lines[i][0]
                old += tag in " -"
                new += tag in " +"
                i += 1
            out[path].append(GitHunk(int(match.group(1)), old_count, body))
            continue
        i += 1
    return out


def _filler(path: str, n: int) -> str:
    return f"# filler line {n} of {path}"


def rebuild(path: str, hunks: list[GitHunk], tail: int = 4) -> tuple[str, str]:
    """(original, patched) contents of ``path``: each pre-image at its header line, unique fillers
    between."""
    original: list[str] = []
    patched: list[str] = []
    for hunk in hunks:
        while len(original) < hunk.old_start - 1:
            original.append(_filler(path, len(original)))
            patched.append(original[-1])
        original.extend(hunk.before)
        patched.extend(hunk.after)
    for _ in range(tail):
        original.append(_filler(path, len(original)))
        patched.append(original[-1])
    return "\n".join(original) + "\n", "\n".join(patched) + "\n"


def load_instances() -> list[Instance]:
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    instances = []
    for row in rows:
        hunks = git_hunks(row["patch"])
        files, expected = {}, {}
        for path, file_hunks in hunks.items():
            files[path], expected[path] = rebuild(path, file_hunks)
        instances.append(Instance(row["instance_id"], row["problem_statement"], row["patch"], hunks,
                                  files, expected))
    return instances


def search_replace_answer(instance: Instance) -> str:
    """The golden patch as an Agentless answer: one fenced search/replace block per hunk (its whole
    pre- and post-image), with some prose around."""
    parts = ["I found the problem. Here are the edits:\n"]
    for path, hunks in instance.hunks.items():
        for hunk in hunks:
            parts.append("```python\n### " + path + "\n<<<<<<< SEARCH\n"
                         + "".join(l + "\n" for l in hunk.before) + "=======\n"
                         + "".join(l + "\n" for l in hunk.after) + ">>>>>>> REPLACE\n```\n")
    parts.append("These changes fix the issue.")
    return "\n".join(parts)


def sloppy_diff_answer(instance: Instance, line_shift: int = 37) -> str:
    """The golden patch written the way models write diffs: no ``diff --git``/``index`` lines, no
    ``a/`` ``b/`` prefixes, wrong hunk line numbers and counts, blank context lines without their
    space, inside a fenced block with prose around."""
    out = ["Here is the fix:", "", "```diff"]
    for path, hunks in instance.hunks.items():
        out += [f"--- {path}", f"+++ {path}"]
        for hunk in hunks:
            out.append(
                f"@@ -{hunk.old_start + line_shift},{hunk.old_count + 2} +{hunk.old_start},99 @@")
            out += ["" if line == " " else line for line in hunk.lines]
    out += ["```", "", "This should resolve the issue."]
    return "\n".join(out)


def broken_context_answer(instance: Instance) -> str:
    """The golden patch with one context or removed line altered, so it no longer matches the
    file."""
    lines = instance.patch.split("\n")
    for i, line in enumerate(lines):
        if line[:1] in (" ", "-") and not line.startswith("--- ") and line[1:].strip():
            lines[i] = line[0] + "XX_NOT_IN_FILE " + line[1:]
            return "\n".join(lines)
    raise AssertionError(f"{instance.instance_id}: no non-blank pre-image line to alter")


def alternative_fix_answer(instance: Instance) -> str:
    """A plausible but different fix: the golden patch with its last added non-blank line
    altered."""
    lines = instance.patch.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if line.startswith("+") and not line.startswith("+++ ") and line[1:].strip():
            lines[i] = line + "  # alternative"
            return "\n".join(lines)
    raise AssertionError(f"{instance.instance_id}: no added line to alter")


def has_added_line(instance: Instance) -> bool:
    return any(line[1:].strip() for hunks in instance.hunks.values() for h in hunks
               for line in h.lines if line[0] == "+")


def localized_rows(instances: list[Instance], rows: int, candidates: int = 8,
                   max_file_chars: int = 6000) -> list[dict]:
    """Training rows in the §4.7.1 shape (``golden_files`` + ``candidate_files`` in rank order) for
    the first ``rows`` instances whose files are all under ``max_file_chars``: the ground truth is
    an instance's rebuilt files; its "localized" noisy files are the rebuilt files of the other such
    instances of the same repository (real code of that repository the golden patch does not touch),
    in fixture order."""
    small = [inst for inst in instances
             if all(len(text) <= max_file_chars for text in inst.files.values())]
    out = []
    for inst in small:
        repo = inst.instance_id.split("__")[0]
        noisy: list[dict] = []
        for other in small:
            if other is inst or other.instance_id.split("__")[0] != repo:
                continue
            noisy += [{"path": path, "content": text} for path, text in other.files.items()
                      if path not in inst.files and path not in {n["path"] for n in noisy}]
        if len(noisy) >= candidates:
            out.append({"instance_id": inst.instance_id,
                        "problem_statement": inst.problem_statement, "patch": inst.patch,
                        "golden_files": dict(inst.files), "candidate_files": noisy[:candidates]})
        if len(out) == rows:
            break
    return out
