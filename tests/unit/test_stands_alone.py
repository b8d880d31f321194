"""The repository stands alone: nothing it ships cites notes that live outside it (the paper's
recipe, the design and the install facts are docs/ pages here) or a tracker's issue numbers, which a
user who clones it cannot follow."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r"\.\./shared|\b(?:PAPER|DESIGN|ENV)\.md\b")
ISSUE_NUMBER = re.compile(r"\bissues?[ -]?#?\d+\b|\bissue #\d+", re.IGNORECASE)
TEXT = (".py", ".md", ".sh", ".txt", ".toml", ".cfg", ".ini", ".yaml", ".yml", "Makefile",
        "Dockerfile", ".jinja")


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    return [ROOT / n for n in names.splitlines() if n.endswith(TEXT) and (ROOT / n).is_file()]


def test_no_citation_of_files_outside_the_repository_or_of_issue_numbers():
    me = Path(__file__).resolve()
    found = []
    for path in _tracked_text_files():
        if path.resolve() == me:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUTSIDE.search(line) or ISSUE_NUMBER.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found)
