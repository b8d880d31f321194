"""Write the tiny cascade's held-out eval suites (``data/tiny/*.jsonl``) from the synthetic generators' test
splits. The files are committed so an eval's data hash names exactly what was evaluated; a unit test checks
they equal what this script writes (``python tools/make_tiny_suites.py``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemo_cascade.tooling.demo_data.synthetic_domains import eval_rows  # noqa: E402

TINY_SUITES = {  # file name → (synthetic set, items)
    "math": ("arithmetic", 128),
    "ifeval": ("if_arithmetic", 128),
    "code": ("code_arithmetic", 64),
    "swe": ("bugfix_arithmetic", 64),
    "rlhf": ("arithmetic_chat", 64),
}


def render_all() -> dict[str, str]:
    return {f"{name}.jsonl": "".join(json.dumps(r, sort_keys=True) + "\n" for r in eval_rows(source, size, seed=0))
            for name, (source, size) in TINY_SUITES.items()}


def main() -> None:
    out = ROOT / "data" / "tiny"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (out / name).write_text(text)
        print(f"{out / name}: {text.count(chr(10))} items")


if __name__ == "__main__":
    main()
