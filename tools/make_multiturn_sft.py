"""Write ``data/smollm2/sft_multiturn.jsonl``: the SmolLM2 SFT blend's rows (recipes/smollm2.py
``SFT_SOURCES``) joined at random into conversations of one to three turns, the paper's multi-turn
augmentation by "random concatenation of single-turn samples" (§3.2).
``recipes/smollm2.py:sft_turns`` trains on it to measure which turns SFT learns
(``data.sft_turns``).

    python tools/make_multiturn_sft.py
"""

from __future__ import annotations

import json
import random
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemo_cascade.data.generated import rows, sft_pairs  # noqa: E402
from nemo_cascade.tooling import demo_data  # noqa: E402

OUT = ROOT / "data" / "smollm2" / "sft_multiturn.jsonl"
SEED = 0


def conversations(pairs: list, seed: int = SEED) -> list[dict]:
    """``pairs`` (prompt messages, response) shuffled and cut into conversations of 1–3 turns
    each."""
    order = list(range(len(pairs)))
    rng = random.Random(seed)
    rng.shuffle(order)
    out, at = [], 0
    while at < len(order):
        turns = order[at : at + rng.randint(1, 3)]
        at += len(turns)
        messages = []
        for i in turns:
            prompt, response = pairs[i]
            messages += [*prompt, {"role": "assistant", "content": response}]
        out.append({"messages": messages})
    return out


def blend_pairs() -> list:
    """(prompt messages, response) of every row of the SmolLM2 SFT blend, in blend order."""
    demo_data.register()
    recipe = runpy.run_path(str(ROOT / "recipes" / "smollm2.py"))
    return [pair for data in recipe["SFT_SOURCES"] for pair in sft_pairs(rows(data), "no_think")]


def main() -> None:
    pairs = blend_pairs()
    chats = conversations(pairs)
    OUT.write_text("".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in chats))
    turns = sum(len(c["messages"]) // 2 for c in chats)
    print(
        f"wrote {OUT.relative_to(ROOT)}: {len(chats)} conversations, {turns} turns "
        f"from {len(pairs)} rows"
    )


if __name__ == "__main__":
    main()
