"""Tokens with loss per SFT row when every assistant turn is learned against only the last one.

Loads an SFT stage's sources (``--recipe FILE:FUNCTION --stage NAME``) through the stage's own
loader twice, ``data.sft_turns`` = ``all`` and ``last``, packs them as the stage does, and prints
per row: learned tokens, all tokens and assistant turns, and the ratio of learned tokens (all ÷
last). Results are appended to ``bench/results/sft_turns.jsonl``.

    .venv/bin/python bench/sft_turns.py --recipe recipes/smollm2.py:sft_turns --stage sft
    .venv/bin/python bench/sft_turns.py --recipe recipes/smollm2.py:with_sft --stage sft
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "sft_turns.jsonl"


def learned_tokens(examples, max_tokens: int) -> tuple[int, int, int]:
    """(tokens with loss, tokens, learned turns) over ``examples`` packed as the SFT step packs
    them."""
    from nemo_cascade.algorithms.packing import pack_sft_batch

    loss = tokens = turns = 0
    for start in range(0, len(examples), 256):
        batch = pack_sft_batch(list(examples[start : start + 256]), max_tokens, 0)
        loss += int(batch.loss_mask_B_T.sum())
        tokens += int((batch.segment_ids_B_T > 0).sum())
        turns += sum(len(e) // 2 for e in examples[start : start + 256])
    return loss, tokens, turns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="recipes/smollm2.py:sft_turns")
    ap.add_argument("--stage", default="sft")
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from nemo_cascade import config
    from nemo_cascade.data.loader import load_sft_blend
    from nemo_cascade.tooling import demo_data
    from nemo_cascade.tooling.cli import load_recipe
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS

    demo_data.register()
    cascade = load_recipe(args.recipe)
    stage = config.stage_by_name(cascade, args.stage)
    model = cascade.model.hf_path or BUILDERS[cascade.model.build](
        Path(tempfile.mkdtemp()) / "model"
    )
    tok = AutoTokenizer.from_pretrained(model)
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "recipe": args.recipe, "stage": args.stage}
    for turns in ("last", "all"):
        sources = tuple(
            replace(d, sft_turns=turns, cache=False) for d in (stage.data, *stage.extra_data)
        )
        examples = load_sft_blend(
            sources, tok, stage.mode, stage.sft_max_tokens, cascade.chat_style
        )
        loss, tokens, learned = learned_tokens(examples, stage.sft_max_tokens)
        row[turns] = {
            "rows": len(examples),
            "loss_tokens_per_row": round(loss / len(examples), 1),
            "tokens_per_row": round(tokens / len(examples), 1),
            "learned_turns_per_row": round(learned / len(examples), 2),
        }
    row["loss_tokens_all_over_last"] = round(
        row["all"]["loss_tokens_per_row"] / row["last"]["loss_tokens_per_row"], 2
    )
    print(json.dumps(row))
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as f:
        f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
