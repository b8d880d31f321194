"""NLTK's English Punkt sentence model, shipped offline for the IF rewards (paper §4.4): where it
lives and how NLTK (and lm-eval) find it.

NLTK ≥ 3.9 reads Punkt models as plain text (``tokenizers/punkt_tab/english/{abbrev_types.txt,
collocations.tab, sent_starters.txt, ortho_context.tab}`` under an NLTK data root) and would
otherwise download them, which cannot happen here (nothing downloads at run time). The four files in
``nltk_data/`` beside this module are the English model of NLTK's ``punkt_tab`` package (Kiss &
Strunk 2006, trained on the WSJ; see ``nltk_data/ATTRIBUTION.md``). The same model is what lm-eval's
IFEval checkers load, so sentence counts agree with the reference evaluator.

``python -m nemo_cascade.rewards.ifeval.punkt DEST`` writes an NLTK data root at DEST, for tools
that read ``NLTK_DATA`` (e.g. running lm-eval's IFEval task on a machine without network).
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

NLTK_DATA = Path(__file__).resolve().parent / "nltk_data"
"""An NLTK data root holding ``tokenizers/punkt_tab/english``."""
MODEL_FILES = ("abbrev_types.txt", "collocations.tab", "sent_starters.txt", "ortho_context.tab")
_MODEL_DIR = Path("tokenizers") / "punkt_tab" / "english"


def register_nltk_data() -> Path:
    """Put the shipped data root first on ``nltk.data.path`` (idempotent) and return it.

    First, so that a different English model installed elsewhere cannot change sentence counts.
    """
    import nltk

    root = str(NLTK_DATA)
    if not nltk.data.path or nltk.data.path[0] != root:
        if root in nltk.data.path:
            nltk.data.path.remove(root)
        nltk.data.path.insert(0, root)
    return NLTK_DATA


def write_nltk_data(dest: Path | str) -> Path:
    """Copy the English Punkt model into the NLTK data root ``dest`` (created if needed); returns
    ``dest``."""
    dest = Path(dest)
    target = dest / _MODEL_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copyfile(NLTK_DATA / _MODEL_DIR / name, target / name)
    return dest


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m nemo_cascade.rewards.ifeval.punkt NLTK_DATA_DIR", file=sys.stderr)
        return 2
    print(write_nltk_data(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
