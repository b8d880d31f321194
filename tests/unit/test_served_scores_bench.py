"""bench/served_scores.py's counting: the same texts every run, differences counted and sized, and
a setting it does not know refused in one line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT))
from bench import served_scores  # noqa: E402


def test_the_texts_are_the_same_every_run_and_of_the_stated_lengths():
    texts = served_scores.texts(16)
    assert texts == served_scores.texts(16) and len(set(texts)) == 16
    assert all(20 <= len(t.split()) <= 120 for t in texts)


def test_differences_are_counted_and_the_largest_kept():
    assert served_scores.differing([1.0, 2.0, 3.0], [1.0, 2.5, 2.0]) == (2, 1.0)
    assert served_scores.differing([0.5], [0.5]) == (0, 0.0)


def test_an_unknown_setting_is_one_line():
    proc = subprocess.run([sys.executable, "bench/served_scores.py", "--settings", "halfsplit"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        "--settings: unknown ['halfsplit']; expected some of ['split', 'unsplit']"]
