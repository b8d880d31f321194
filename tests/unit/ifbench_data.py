"""The IFBench test set and its published reference verdicts (data/ifbench, allenai/IFBench), for
the tests."""
from __future__ import annotations

from pathlib import Path

from .ifeval_corpus import read_jsonl_gz

DATA = Path(__file__).resolve().parents[2] / "data" / "ifbench"


def ifbench_rows() -> list[dict]:
    """The 300 rows of IFBench_test.jsonl: ``{"key", "prompt", "instruction_id_list",
    "kwargs"}``."""
    return read_jsonl_gz(DATA / "IFBench_test.jsonl.gz")


def reference_verdicts() -> list[tuple[dict, str, list[bool], list[bool]]]:
    """``(row, response, strict verdicts, loose verdicts)`` for every reference result whose prompt
    is in the current test file (290 of 294: the other 4 prompts were reworded after the results
    were made)."""
    rows = {row["prompt"]: row for row in ifbench_rows()}
    strict = read_jsonl_gz(DATA / "eval_results_strict.jsonl.gz")
    loose = read_jsonl_gz(DATA / "eval_results_loose.jsonl.gz")
    out = []
    for s, l in zip(strict, loose, strict=True):
        assert (s["prompt"] == l["prompt"]
                and s["response"] == l["response"]), "strict/loose files out of step"
        row = rows.get(s["prompt"])
        if row is not None:
            assert row["instruction_id_list"] == s["instruction_id_list"]
            out.append(
                (row, s["response"], s["follow_instruction_list"], l["follow_instruction_list"]))
    return out
