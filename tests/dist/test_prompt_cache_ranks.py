"""An RL prompt file tokenized in shares by 2 gloo processes (torchrun) into one cache entry: every
rank loads the prompts a whole-file read gives (data/prompt_cache.py)."""
import json
from pathlib import Path

import pytest

from tests.launch import torchrun

pytestmark = pytest.mark.dist
WORKER = Path(__file__).with_name("prompt_cache_worker.py")


def test_two_ranks_build_one_entry_in_two_shares_and_load_the_whole_set(tmp_path):
    proc = torchrun(WORKER, 2, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    results = json.loads((tmp_path / "result.json").read_text())
    for r in results:
        assert r["kind"] == "CachedPrompts" and r["same"] and r["again"] and r["entries"] == 1
        assert len(r["parts"]) == 2 and sum(r["parts"]) == 40 and r["bad_rows"] == 1
        assert r["first_bad"].startswith(f"{tmp_path / 'math.jsonl'}:34: ")
