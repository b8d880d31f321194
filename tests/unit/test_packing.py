"""One packing module (algorithms/packing.py): GRPO's and SFT's rows come from the one packer, laid
out by the one layout function, and no other module packs."""
from __future__ import annotations

import ast
from pathlib import Path

import torch

from nemo_cascade.algorithms import packing

PKG = Path(__file__).resolve().parents[2] / "nemo_cascade"


def test_in_order_packing_is_next_fit():
    # rows hold consecutive sequences: the 1 after the 4 does not go back into the first row
    assert packing.pack_rows([3, 4, 1, 2], budget=5, in_order=True) == [[0], [1, 2], [3]]
    assert packing.pack_rows([2, 2, 2], budget=4, in_order=True) == [[0, 1], [2]]
    assert packing.pack_rows([9, 1], budget=4, in_order=True) == [[0], [1]]
    assert packing.pack_rows([], budget=4, in_order=True) == []
    # the default: first-fit decreasing
    assert packing.pack_rows([3, 4, 1, 2], budget=5) == [[1, 2], [0, 3]]


def test_sft_batch_is_the_shared_layout_of_in_order_rows():
    examples = [([1, 2], [3, 4, 5]), ([6], [7]), ([8, 9, 10, 11, 12, 13], [14, 15]),
                ([16], [17, 18])]
    batch = packing.pack_sft_batch(examples, max_tokens=7, pad_id=-1)
    # cut to 7 tokens
    kept = [([1, 2], [3, 4, 5]), ([6], [7]), ([8, 9, 10, 11, 12, 13], [14]), ([16], [17, 18])]
    rows = packing.pack_rows([len(p) + len(r) for p, r in kept], 7, in_order=True)
    assert rows == [[0, 1], [2], [3]]
    laid = packing.pack_sequences([p for p, _ in kept], [r for _, r in kept], -1, rows=rows)
    for name in ("tokens_B_T", "loss_mask_B_T", "position_ids_B_T", "segment_ids_B_T"):
        assert torch.equal(getattr(batch, name), laid[name]), name
    assert (batch.num_examples, batch.num_truncated) == (4, 1)


def test_an_empty_first_example_packs():
    batch = packing.pack_sft_batch([([], []), ([1], [2])], max_tokens=4, pad_id=0)
    assert batch.tokens_B_T.tolist() == [[1, 2]] and batch.loss_mask_B_T.tolist() == [[0.0, 1.0]]


def test_no_other_module_packs():
    """Functions that pack or lay out rows live in packing.py only (they once lived in grpo.py and
    sft.py)."""
    elsewhere = []
    for path in PKG.rglob("*.py"):
        if path.name == "packing.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(
                    node,
                (ast.FunctionDef, ast.ClassDef)) and (node.name.startswith("pack_") or node.name
                                                      in ("pad_share", "segment_causal_mask")):
                elsewhere.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name}")
    assert not elsewhere, elsewhere
