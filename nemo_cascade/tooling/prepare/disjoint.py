"""RL prompt sets disjoint from the SFT sets (paper §4.1.2: RL prompts are strictly disjoint from
SFT prompts; §3.3's code SFT prompts come from TACO and APPS, which the code RL set is built from).

An RL row is left out, counted as ``in_sft_set``, when its prompt is a prompt of the SFT files
prepared in the same ``--out`` (the manifest's ``sft`` entries). Texts are compared as
decontamination compares them (``decontam.normalised``: lowercased, punctuation stripped,
whitespace collapsed). An RL prompt matches

- an SFT prompt's whole text;
- an SFT prompt's text before a paragraph break followed by a short request (at most
  :data:`REQUEST_WORDS` words): the SFT sets append their own request for the answer's form (a
  boxed answer, a fenced program) to a problem the RL set states bare, or with this project's
  request, which the code RL prompt is compared without (``code_sources.statement``);
- the issue of an Agentless repair prompt (between ``--- BEGIN ISSUE ---`` and
  ``--- END ISSUE ---``): an SWE instance is the same whatever files its prompts show.

An SFT row's prompts are each user turn and its user turns together (the multi-turn rows join
single-turn samples); an RL row's is its prompt texts together (``run.check_row``'s: the user
turns, the code statement, the SWE issue). Not a shared 9-gram, as decontamination uses: SFT and
RL sets of one domain share its phrasing (statement layouts, constraint wordings), so a shared
9-gram is not a shared prompt. Nor is the RL prompt cut at its own paragraphs, so two prompts
sharing only a first paragraph ("Translate this into French." then different texts) stay apart.
Keys are 64-bit hashes in a sorted numpy array: 8 bytes per key for millions of SFT prompts.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from nemo_cascade.tooling.prepare.code_sources import statement
from nemo_cascade.tooling.prepare.decontam import words
from nemo_cascade.tooling.prepare.sources import Bad, PrepareError, stream

log = logging.getLogger(__name__)

RL_KINDS = ("rlhf", "ifeval", "math", "code", "swe")
"""Output kinds that are RL prompt sets (``stages.Output.kind``)."""
REQUEST_WORDS = 64
"""The longest trailing request (in words) an SFT prompt is also compared without."""
RULES = 1
"""The version of these rules, in :meth:`SftPrompts.digest`: RL files are redone on a change."""
_BREAK = re.compile(r"\n[ \t]*\n")
_ISSUE = re.compile(r"--- BEGIN ISSUE ---\n(.*?)\n--- END ISSUE ---", re.S)


def _key(tokens: list[str]) -> int:
    # a stable hash, not hash(): the same prompts drop in every process, whatever PYTHONHASHSEED
    digest = hashlib.blake2b(" ".join(tokens).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def prompt_keys(text: str, heads: bool = True) -> set[int]:
    """The keys of one prompt text: its words, the repair prompt's issue and, with ``heads`` (an SFT
    prompt), the words before each short trailing request (module docstring)."""
    keys = set()
    issue = _ISSUE.search(text)
    if issue and words(issue.group(1)):
        keys.add(_key(words(issue.group(1))))
    paragraphs = [words(p) for p in _BREAK.split(text)]
    tail = 0
    for i in range(len(paragraphs) - 1, 0, -1) if heads else ():  # the shortest tail first
        tail += len(paragraphs[i])
        if tail > REQUEST_WORDS:
            break
        head = [w for p in paragraphs[:i] for w in p]
        if head:
            keys.add(_key(head))
    whole = [w for p in paragraphs for w in p]
    if whole:
        keys.add(_key(whole))
    return keys


def _sft_user_turns(where: str, row) -> list[str]:
    """The user turns of a prepared SFT row; a row data prepare cannot have written is one line."""
    if isinstance(row, Bad):
        raise PrepareError(f"{row.message} (an SFT file of this --out; prepare it again)")
    turns = row.get("messages")
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise PrepareError(f"{where}: expected field 'messages' (a list of turns); prepare this "
                           f"SFT file again")
    texts = [t.get("content") for t in turns if t.get("role") == "user"]
    if not all(isinstance(t, str) for t in texts):
        raise PrepareError(f"{where}: a user turn's 'content' is not a string; prepare this SFT "
                           f"file again")
    return texts


@dataclass
class SftPrompts:
    """The prompt keys of the SFT files prepared in ``out``, read when first needed."""
    out: Path
    files: dict[str, str]
    """SFT file (relative to ``out``) → its sha256, as the manifest records it."""
    _keys: Optional[np.ndarray] = field(default=None, repr=False)

    def digest(self) -> str:
        """What the keys are made from (files, their sha256, the rules): part of an RL file's
        fingerprint."""
        key = json.dumps({"files": self.files, "rules": RULES, "request_words": REQUEST_WORDS},
                         sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def holds(self, kind: str, texts: list[str]) -> bool:
        """Whether the prompt of an RL row of ``kind`` made of ``texts`` is an SFT prompt."""
        if self._keys is None:
            self._keys = self._read()
        if not len(self._keys):
            return False
        if kind == "code":  # the statement as the source gave it, without data prepare's request
            texts = [statement(t) for t in texts]
        keys = np.fromiter(prompt_keys("\n\n".join(texts), heads=False), dtype=np.uint64)
        at = np.minimum(np.searchsorted(self._keys, keys), len(self._keys) - 1)
        return bool((self._keys[at] == keys).any())

    def _read(self) -> np.ndarray:
        keys = array("Q")
        for path in self.files:
            rows = 0
            for where, row in stream([self.out / path]):
                turns = _sft_user_turns(where, row)
                rows += 1
                for text in turns + (["\n\n".join(turns)] if len(turns) > 1 else []):
                    keys.extend(prompt_keys(text))
            log.info("%s: %d SFT prompts read; RL prompts are kept apart from them (§4.1.2)",
                     path, rows)
        return np.unique(np.frombuffer(keys, dtype=np.uint64))


def sft_prompts(out: Path, manifest: dict, previous: Optional[SftPrompts] = None) -> SftPrompts:
    """The SFT files the manifest lists in ``out`` (those on disk); ``previous`` again while they
    are the same, so the keys are read once for every RL file of a run."""
    files = {path: entry.get("sha256", "") for path, entry in sorted(manifest["files"].items())
             if entry.get("kind") == "sft" and (out / path).is_file()}
    if previous is not None and previous.files == files:
        return previous
    if not files:
        log.warning("%s: no SFT file prepared here to keep the RL prompts disjoint from "
                    "(§4.1.2); prepare sft-stage-1, sft-stage-2 and sft-swe first, then the RL "
                    "stages again", out)
    return SftPrompts(out, files)


__all__ = ["RL_KINDS", "REQUEST_WORDS", "prompt_keys", "SftPrompts", "sft_prompts"]
