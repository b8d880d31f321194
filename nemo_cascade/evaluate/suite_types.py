"""What every suite module shares: :class:`Suite` and :class:`Item`, the one-line
:class:`EvalError`, and the readers that turn a benchmark file's rows into items (used by
:mod:`.suites`, :mod:`.swe_tasks` and :mod:`.paper_benchmarks`, which :mod:`.suites` lists)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..config import Reward
from ..data.rows import read_jsonl
from ..errors import CascadeError
from ..rewards import VALIDATORS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data"


class EvalError(CascadeError, ValueError):
    """A user mistake (unknown suite, missing checkpoint or data file, bad option, malformed data
    row); the message is one line naming what was expected."""


@dataclass(frozen=True)
class Item:
    """One benchmark question."""

    uid: str
    """Stable id from the dataset (task id, problem id, row number)."""
    messages: list
    """The conversation to answer: ``[{"role": "user", "content": ...}, ...]``, ending with a user
    turn."""
    label: Any
    """The reward label of the suite's domain (docs/rewards.md)."""
    reference: Optional[str] = None
    """A reference response: one that scores full marks (math, code, SWE: the golden solution), or
    the answer to beat (RLHF). None where the dataset has none (IFEval, IFBench)."""


YARN_FACTOR = 2.0
"""App. B: every benchmark is evaluated with YaRN factor 2 over the model's 32768 native
positions."""
SWE_INPUT_TOKENS = 32768
"""App. B: SWE-bench's input for the 8B models (the 14B's is 64K, with YaRN 3: its recipe says
so)."""


@dataclass(frozen=True)
class Suite:
    name: str
    domain: str
    """Reward domain (``rewards.DOMAINS`` / ``rewards.Scorer``)."""
    description: str
    load: Callable[[Path], list]
    """Data file → items (in file order)."""
    default_data: Callable[[], Path]
    mode: str
    """Default thinking mode (` /think` or ` /no_think` on the user turn, §3.1.2)."""
    samples: int
    """Default K (samples per item)."""
    max_tokens: int
    """Default response budget in tokens."""
    metric: str
    """What avg@K measures here, for reports."""
    paper: str
    """Where the defaults come from."""
    pairwise: bool = False
    """Score = win/tie/loss against the item's reference answer under the reward model (RLHF
    proxy)."""
    reward: Reward = field(default_factory=Reward)
    """Verifier settings (answer pattern, timeouts); the run's sandbox / server settings are merged
    in."""
    yarn_factor: float = YARN_FACTOR
    """YaRN rope scaling the engine serves the model with for this suite, over the model's native
    positions (App. B: factor 2 over 32768 for every benchmark; the 14B's 64K-input SWE-bench run 3,
    a recipe's ``gate.yarn`` or ``eval --yarn``). 1 = the model's own RoPE, no scaling."""
    max_input_tokens: int = 0
    """The longest prompt generated (App. B: SWE-bench input 32K for the 8B, 64K for the 14B); a
    longer one scores 0 and is counted as ``too_long``. 0 = only the engine's context limits it."""
    data_version: str = ""
    """Which release / subset / date window of the benchmark the items are (eval.json
    ``data.version``)."""
    get_data: str = ""
    """The command that downloads the data file when it is not shipped (named when it is
    missing)."""


# -------------------------------------------------------------------------------- reading files


def row_field(row: dict, key: str, where: str, kind: type | tuple = str) -> Any:
    if key not in row or not isinstance(row[key], kind) or isinstance(row[key], bool):
        raise EvalError(f"{where}: expected field {key!r} ({getattr(kind, '__name__', kind)})")
    return row[key]


def validated(domain: str, label: Any, where: str) -> Any:
    try:
        VALIDATORS[domain](label)
    except ValueError as e:
        raise EvalError(f"{where}: {e}") from None
    return label


def user_turn(text: str) -> list:
    return [{"role": "user", "content": text}]


# ------------------------------------------------------------------------------------------ loaders


def per_row(item: Callable[[dict, str, int], Optional[Item]]) -> Callable[[Path], list[Item]]:
    """A loader of a jsonl file from ``item(row, where, lineno)`` (``where``: ``path:line``; None
    skips the row)."""

    @functools.wraps(item)
    def load(path: Path) -> list[Item]:
        items = (
            item(row, f"{path}:{lineno}", lineno)
            for lineno, row in read_jsonl(path, error=EvalError)
        )
        return [i for i in items if i is not None]

    return load


PAPER_DECODING = "App. B: T=0.6, top-p 0.95"
"""The decoding every suite uses (docs/evaluation.md)."""

__all__ = [
    "ROOT",
    "DATA",
    "EvalError",
    "Item",
    "Suite",
    "YARN_FACTOR",
    "SWE_INPUT_TOKENS",
    "PAPER_DECODING",
    "row_field",
    "validated",
    "user_turn",
    "per_row",
]
