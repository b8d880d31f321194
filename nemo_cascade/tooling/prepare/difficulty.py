"""§4.6.1's difficulty filter of the code RL set, from recorded pass rates.

The paper removes the problems a weaker reference model (AceReason-Nemotron-7B) solves in all of
its 8 samples, which teach nothing, and those a stronger one (DeepSeek-R1-0528) solves in none of
8, whose tests are likely wrong. Neither model runs inside ``data prepare``: each one's pass rates
are measured on the prepared ``rl-code/train.jsonl`` (``bench/solve_rate.py --pass-rates FILE``,
or any harness) into a jsonl file of one line per problem,

    {"prompt": "<the problem's user text, as rl-code/train.jsonl holds it>", "solved": 8,
     "samples": 8}

and ``data prepare rl-code --drop-always-solved WEAK.jsonl --drop-never-solved STRONG.jsonl``
leaves out the problems WEAK solved in every sample (``always_solved``) and those STRONG solved in
none (``never_solved``). Prompts are matched after decontamination's normalisation; the lines of
one prompt add up. A problem a file does not list is kept and counted
(``difficulty_not_measured``).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from nemo_cascade.runtime.files import file_sha256
from nemo_cascade.tooling.prepare.decontam import normalised
from nemo_cascade.tooling.prepare.sources import Bad, PrepareError, stream

DROPS = ("always_solved", "never_solved")
"""The drop reasons, in the order they are checked."""


def _count(row: dict, name: str, where: str, low: int) -> int:
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise PrepareError(f"{where}: field {name!r}: expected an integer >= {low}, got "
                           f"{value!r:.40}")
    return value


def _line(where: str, row) -> tuple[str, int, int]:
    """``(normalised prompt, solved, samples)`` of one pass-rate line."""
    if isinstance(row, Bad):
        raise PrepareError(row.message)
    prompt = row.get("prompt")
    if not isinstance(prompt, str) or not normalised(prompt):
        raise PrepareError(f"{where}: field 'prompt': expected the problem's text")
    samples, wins = _count(row, "samples", where, 1), _count(row, "solved", where, 0)
    if wins > samples:
        raise PrepareError(f"{where}: field 'solved': {wins} is more than its {samples} samples")
    return normalised(prompt), wins, samples


@dataclass(frozen=True)
class PassRates:
    """One reference model's recorded pass rates: normalised prompt → (samples solved, samples)."""
    path: str
    sha256: str
    solved: dict

    @classmethod
    def read(cls, path: Path) -> "PassRates":
        if not Path(path).is_file():
            raise PrepareError(f"{path}: pass-rate file not found")
        solved: dict[str, tuple[int, int]] = {}
        for where, row in stream([Path(path)]):
            key, wins, samples = _line(where, row)
            before = solved.get(key, (0, 0))
            solved[key] = (before[0] + wins, before[1] + samples)
        return cls(str(path), file_sha256(Path(path)), solved)


@dataclass(frozen=True)
class DifficultyFilter:
    always_solved: Optional[PassRates] = None
    """The weaker reference's pass rates: a problem it solved in every sample is dropped."""
    never_solved: Optional[PassRates] = None
    """The stronger reference's pass rates: a problem it solved in no sample is dropped."""

    def verdicts(self, texts: list[str]) -> tuple[Optional[str], list[str]]:
        """``(drop reason or None, the rules whose file did not measure this prompt)``."""
        key, missing = normalised("\n\n".join(texts)), []
        for reason in DROPS:
            rates = getattr(self, reason)
            if rates is None:
                continue
            wins, samples = rates.solved.get(key, (None, None))
            if samples is None:
                missing.append(reason)
            elif wins == (samples if reason == "always_solved" else 0):
                return reason, missing
        return None, missing

    def digest(self) -> str:
        """The files' sha256: part of the code RL file's fingerprint."""
        key = ";".join(f"{r}={getattr(self, r).sha256 if getattr(self, r) else ''}" for r in DROPS)
        return hashlib.sha256(key.encode()).hexdigest()[:16]


__all__ = ["DROPS", "PassRates", "DifficultyFilter"]
