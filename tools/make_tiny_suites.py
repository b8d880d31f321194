"""Write the held-out eval suites of the generated sets (``data/tiny/*.jsonl``, the tiny cascade's,
and ``data/leg_counting/test.jsonl``, the SmolLM2 recipes' easy word problems) from the generators'
test splits. The files are committed so an eval's data hash names exactly what was evaluated; a unit
test checks they equal what this script writes (``python tools/make_tiny_suites.py``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemo_cascade.tooling.demo_data.synthetic_domains import eval_rows  # noqa: E402
from nemo_cascade.tooling.demo_data.tiny_suites import (  # noqa: E402
    LEG_COUNTING, LEG_COUNTING_ITEMS)

SUITE_FILES = {  # path under data/ → (generated set, items)
    "tiny/math.jsonl": ("arithmetic", 128),
    "tiny/ifeval.jsonl": ("if_arithmetic", 128),
    "tiny/code.jsonl": ("code_arithmetic", 64),
    "tiny/swe.jsonl": ("bugfix_arithmetic", 64),
    "tiny/rlhf.jsonl": ("chat_arithmetic", 64),
    "leg_counting/test.jsonl": (LEG_COUNTING, LEG_COUNTING_ITEMS),
}


def render_all() -> dict[str, str]:
    return {path: "".join(json.dumps(r, sort_keys=True) + "\n"
                          for r in eval_rows(source, size, seed=0))
            for path, (source, size) in SUITE_FILES.items()}


def main() -> None:
    for path, text in render_all().items():
        out = ROOT / "data" / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"{out}: {text.count(chr(10))} items")


if __name__ == "__main__":
    main()
