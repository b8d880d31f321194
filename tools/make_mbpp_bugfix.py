"""Write ``data/mbpp_bugfix/bugfix.jsonl.gz``: one bug-fix (SWE) row per MBPP task whose injected
bug makes an assert fail (``tooling.demo_data.mbpp_sets.bugfix_row``; every candidate mutant costs
sandbox runs, so the rows are computed here once and committed). Each row is checked before it is
written: its label validates and its reference edit earns the SWE reward 1.0. A unit test
regenerates a sample and compares.

    python tools/make_mbpp_bugfix.py [--workers N]
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemo_cascade.tooling.demo_data.mbpp_sets import (  # noqa: E402
    BUGFIX_FILE, bugfix_row, mbpp_tasks, split_of)
from nemo_cascade.rewards import REWARDS, VALIDATORS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, help="sandbox runs at a time")
    args = parser.parse_args()
    tasks = mbpp_tasks()
    # Threads only wait on sandbox processes, so they parallelise the runs.
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        rows = [r for r in pool.map(bugfix_row, tasks) if r is not None]
    for row in rows:
        VALIDATORS["swe"](row["label"])
        if REWARDS["swe"](row["response"], row["label"]) != 1.0:
            raise SystemExit(f"{row['uid']}: the reference edit does not earn 1.0")
    BUGFIX_FILE.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    with (open(BUGFIX_FILE, "wb") as raw,
          gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f):
        f.write(text.encode())  # mtime=0: the same rows give the same bytes (a stable data hash)
    held_out = sum(split_of(r["task_id"]) == "test" for r in rows)
    print(f"{BUGFIX_FILE}: {len(rows)} of {len(tasks)} tasks ({held_out} test, "
          f"{len(rows) - held_out} train)")


if __name__ == "__main__":
    main()
