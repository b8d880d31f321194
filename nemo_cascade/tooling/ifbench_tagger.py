"""Builds ``first_token_tagger.tsv.gz`` (see :mod:`.tagger`) from NLTK's English perceptron tagger
model.

    python -m nemo_cascade.tooling.ifbench_tagger NLTK_TAGGER_DIR

``NLTK_TAGGER_DIR`` is an unpacked ``averaged_perceptron_tagger_eng`` package of nltk_data (its
``*.weights.json``, ``*.tagdict.json`` and ``*.classes.json``). Kept in the package so that the
shipped file can be rebuilt and audited; nothing imports it at run time.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

from nemo_cascade.rewards.ifeval.ifbench.tagger import MODEL_FILE, START, START2, WEIGHT_SCALE

# Features that can fire at position 0: those naming the token or the two after it (any value, end
# markers included), and the start-marker context (one value each). Every other feature needs a real
# preceding token.
_OPEN_PREFIXES = ("i suffix ", "i pref1 ", "i word ", f"i-1 tag+i word {START} ", "i+1 word ",
                  "i+1 suffix ", "i+2 word ")
_FIXED = {"bias", "i-1 tag " + START, "i-2 tag " + START2, f"i tag+i-2 tag {START} {START2}",
          "i-1 word " + START2, "i-1 suffix " + START2[-3:], "i-2 word " + START}


def reachable(feature: str) -> bool:
    return feature in _FIXED or feature.startswith(_OPEN_PREFIXES)


def build(tagger_dir: Path, out: Path = MODEL_FILE) -> Path:
    stem = "averaged_perceptron_tagger_eng"
    raw_weights = (tagger_dir / f"{stem}.weights.json").read_bytes()
    weights = json.loads(raw_weights)
    tagdict = json.loads((tagger_dir / f"{stem}.tagdict.json").read_text())
    classes = sorted(json.loads((tagger_dir / f"{stem}.classes.json").read_text()))
    index = {label: i for i, label in enumerate(classes)}
    lines = [
        f"# First-token subset of NLTK's {stem}; weights.json sha256 "
        f"{hashlib.sha256(raw_weights).hexdigest()}. Built by nemo_cascade.tooling.ifbench_tagger.",
        "C\t" + "\t".join(classes)]
    lines += [f"D\t{word}\t{tag}" for word, tag in tagdict.items()]
    for feature, row in weights.items():
        if not reachable(feature) or not row:  # a row without weights adds nothing to any score
            continue
        scaled = {label: round(w * WEIGHT_SCALE) for label, w in row.items()}
        if any(scaled[label] / WEIGHT_SCALE != w for label, w in row.items()):
            raise ValueError(
                f"weight of {feature!r} is not a 3-decimal number; the file format cannot hold it")
        lines.append(f"F\t{feature}\t" + " ".join(f"{index[label]}:{v}"
                                                  for label, v in scaled.items()))
    if any("\t" in s or "\n" in s for s in [*tagdict, *weights, *classes]):
        raise ValueError("a model entry contains a tab or newline; the file format cannot hold it")
    # mtime=0: the same model gives the same bytes.
    out.write_bytes(
        gzip.compress(("\n".join(lines) + "\n").encode("utf-8"), compresslevel=9, mtime=0))
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m nemo_cascade.tooling.ifbench_tagger NLTK_TAGGER_DIR")
    print(build(Path(sys.argv[1])))
