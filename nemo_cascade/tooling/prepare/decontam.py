"""Decontamination against every evaluation set the project ships (paper §3.3: "9-gram overlap
filter against the test sets"; §4.6.1 for code RL).

A training row is dropped when one of its prompt texts (user turns; the issue of a SWE row)

- **equals** an evaluation item's text after normalisation (:func:`words`: lowercased, punctuation
  stripped, whitespace collapsed) — this catches short items (under 9 words) that have no 9-gram; or
- **shares a word 9-gram** with an evaluation item.

The index holds 64-bit hashes of the 9-grams (one ``dict`` entry each: a few hundred thousand for
the shipped sets), so checking a row costs one lookup per word and a training set of millions of
rows is streamed past it.

Phrasing shared by several items of one set is not an item: IFEval's prompts are written from
instruction templates ("your entire response should be in english and in all lowercase letters" is
in dozens of them), and SWE-bench issues repeat traceback paths. Training data built on the same
taxonomy (the IF-RL sets, §4.4.1) carries those phrases by design; matching them would drop most of
it. So the index leaves out, as phrasing (counted as ``common_ngrams``), a 9-gram found in
:data:`COMMON_ITEMS` or more items of one evaluation set, and every 9-gram lying inside one of
IFEval's instruction wordings (``demo_data.if_prompts.WORDINGS``, whatever values fill its slots) or
sharing a 9-gram with one. An item's own text still matches. And a training text's 9-gram that lies
inside its own instruction wording does not match an instruction set (IFEval words some instructions
its own way, beyond the two wordings per instruction the table holds). Measured on
``synthetic:if_requests`` (3,224 train prompts): without these rules 2,449 (76 %) share a 9-gram
with IFEval; with the index's rules 366 (11 %); with the training side's too 9 (0.3 %), whose task
text overlaps an item's ("write a blog post about the history of the ...").

Which text of each evaluation row is indexed (:data:`EVAL_TEXTS`): the question as the benchmark
states it, never the suite's added request (``MATH_INSTRUCTION``, ``CODE_INSTRUCTION``), which every
training row may share.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from nemo_cascade.data.rows import DataError, read_jsonl
from nemo_cascade.evaluate.suites import hh_conversation, SUITES
from nemo_cascade.runtime.files import file_sha256
from nemo_cascade.tooling.demo_data.if_prompts import WORDINGS

N = 9
"""Word n-gram length (§3.3)."""
COMMON_ITEMS = 2
"""A 9-gram in at least this many items of one evaluation set is template phrasing and is not
indexed."""
RULES = 2
"""The version of the matching rules (2: a training text's own instruction wording is phrasing),
part of :meth:`EvalIndex.digest`, so files prepared under older rules are prepared again."""
_SLOT = re.compile(r"\{[^{}]*\}")
_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """The words of ``text``: lowercased, every run of punctuation, symbols or whitespace a
    separator."""
    return _WORD.findall(text.lower())


def normalised(text: str) -> str:
    """``text`` as compared for exact matches: its :func:`words` joined by single spaces."""
    return " ".join(words(text))


def ngram_hashes(tokens: list[str], n: int = N) -> Iterable[int]:
    """Python's string hash of each word n-gram (64 bits; stable within one process, which builds
    and queries the index)."""
    return (hash(" ".join(tokens[i:i + n])) for i in range(len(tokens) - n + 1))


def phrasing_patterns() -> list[re.Pattern]:
    """IFEval's instruction wordings (``demo_data.if_prompts.WORDINGS``) as patterns over normalised
    text, each slot (``{n}``, ``{phrase}``, ...) standing for up to 8 words, whatever value an item
    put there."""
    out = []
    for wordings in WORDINGS.values():
        for wording in wordings:
            pieces = [normalised(p) for p in _SLOT.split(wording)]
            out.append(
                re.compile(r"(?:\S+ ){0,8}".join(re.escape(p + " ") if p else "" for p in pieces)))
    return out


def wording_ngrams() -> set[int]:
    """Hashed 9-grams of the runs of fixed text between the slots of IFEval's instruction
    wordings."""
    return {h for ws in WORDINGS.values() for w in ws for run in _SLOT.split(w)
            for h in ngram_hashes(words(run))}


def _phrasing_words(tokens: list[str], patterns: list[re.Pattern]) -> list[bool]:
    """Which words of ``tokens`` lie inside an instruction wording."""
    text, starts, at = " ".join(tokens) + " ", [], 0
    for t in tokens:
        starts.append(at)
        at += len(t) + 1
    covered = [False] * len(tokens)
    for pattern in patterns:
        for m in pattern.finditer(text):
            for i, s in enumerate(starts):
                if m.start() <= s and s + len(tokens[i]) <= m.end():
                    covered[i] = True
    return covered


def _hh_human_turns(row: dict) -> list[str]:
    turns = hh_conversation(row.get("chosen", "")) or []
    return [t["content"] for t in turns if t["role"] == "user"]


INSTRUCTION_SETS = ("ifeval", "ifbench")
"""Evaluation sets whose prompts carry instruction wordings."""

EVAL_TEXTS: dict[str, Callable[[dict], list[str]]] = {
    "ifeval": lambda r: [r["prompt"]],
    "ifbench": lambda r: [r["prompt"]],
    "gsm8k": lambda r: [r["question"]],
    "math500": lambda r: [r["problem"]],
    "aime24": lambda r: [r["problem"]],
    "aime25": lambda r: [r["problem"]],
    "humaneval": lambda r: [r["prompt"]],
    "mbpp": lambda r: [r["text"]],
    "swe": lambda r: [r["problem_statement"]],
    "rlhf": _hh_human_turns,
}
"""Evaluation suite (``evaluate.suites.SUITES``) → the texts of one of its rows that training must
not hold."""


@dataclass
class EvalIndex:
    """Hashed 9-grams and normalised texts of the evaluation sets; :meth:`match` names the set a
    text leaks."""

    names: list[str] = field(default_factory=list)
    ngrams: dict[int, int] = field(default_factory=dict)
    """9-gram hash → index into ``names`` of the (first) set holding it."""
    exact: dict[int, int] = field(default_factory=dict)
    """Hash of a normalised item text → index into ``names``."""
    stats: dict[str, dict] = field(default_factory=dict)
    """Per set: ``file``, ``sha256``, ``items``, ``ngrams`` indexed, ``common_ngrams`` left out."""

    phrasing: list = field(default_factory=phrasing_patterns)
    """Instruction wordings whose 9-grams are never indexed."""
    wording_ngrams: set = field(default_factory=lambda: wording_ngrams())
    """The 9-grams of the wordings' fixed text: never indexed either (they recur in other wordings
    of the same instruction)."""

    def add(self, name: str, texts: list[list[str]], file: str = "", sha256: str = "",
            wordings: bool = False) -> None:
        """Index one evaluation set given each item's texts; ``wordings``: it is written with
        instruction wordings (IFEval, IFBench), whose 9-grams are phrasing."""
        k = len(self.names)
        self.names.append(name)
        item_count: dict[int, int] = {}
        wording = set(self.wording_ngrams)  # and those inside an instruction wording in some item
        for item in texts:
            seen: set[int] = set()
            for text in item:
                tokens = words(text)
                if tokens:
                    self.exact.setdefault(hash(" ".join(tokens)), k)
                covered = (_phrasing_words(tokens, self.phrasing) if wordings
                           else [False] * len(tokens))
                for i, h in enumerate(ngram_hashes(tokens)):
                    seen.add(h)
                    if all(covered[i:i + N]):
                        wording.add(h)
            for h in seen:
                item_count[h] = item_count.get(h, 0) + 1
        common = 0
        for h, count in item_count.items():
            if count >= COMMON_ITEMS or h in wording:
                common += 1
            else:
                self.ngrams.setdefault(h, k)
        self.stats[name] = {"file": file, "sha256": sha256, "items": len(texts),
                            "ngrams": len(item_count) - common, "common_ngrams": common}

    def match(self, texts: Iterable[str]) -> Optional[str]:
        """The evaluation set one of ``texts`` leaks (exact text, else a shared 9-gram), or None. A
        9-gram shared with an instruction set (IFEval, IFBench) that lies inside the training text's
        own instruction wording is phrasing, not a leak: the training prompt states the same
        instruction."""
        for text in texts:
            tokens = words(text)
            if not tokens:
                continue
            hit = self.exact.get(hash(" ".join(tokens)))
            covered = None
            for i, h in enumerate(ngram_hashes(tokens) if hit is None else ()):
                k = self.ngrams.get(h)
                if k is not None and self.names[k] in INSTRUCTION_SETS:
                    covered = _phrasing_words(tokens, self.phrasing) if covered is None else covered
                    if all(covered[i:i + N]):
                        continue
                if k is not None:
                    hit = k
                    break
            if hit is not None:
                return self.names[hit]
        return None

    def digest(self) -> str:
        """What the index was built from (sets and their files' sha256): part of an output's
        fingerprint."""
        key = ";".join(f"{n}={s['sha256']}" for n, s in sorted(self.stats.items()))
        rules = f"n={N};common={COMMON_ITEMS};rules={RULES};{key}"
        return hashlib.sha256(rules.encode()).hexdigest()[:16]


def build_index(suites: Optional[list[str]] = None) -> EvalIndex:
    """The index over the shipped evaluation sets (every suite of :data:`EVAL_TEXTS` by default),
    each read from its suite's default file. A missing file is an error: decontamination must not
    silently skip a set."""

    index = EvalIndex()
    for name in suites or list(EVAL_TEXTS):
        path = Path(SUITES[name].default_data())
        if not path.is_file():
            raise DataError(f"decontamination: evaluation set {name}: file not found: {path}")
        items = []
        for lineno, row in read_jsonl(path):
            try:
                items.append([t for t in EVAL_TEXTS[name](row) if isinstance(t, str)])
            except KeyError as e:
                raise DataError(
                    f"{path}:{lineno}: expected field {e} (evaluation set {name})") from None
        index.add(name, items, str(path), file_sha256(path), wordings=name in INSTRUCTION_SETS)
    return index


__all__ = ["N", "COMMON_ITEMS", "phrasing_patterns", "words", "normalised", "ngram_hashes",
           "EVAL_TEXTS", "EvalIndex", "build_index"]
