"""Serving a loaded prompt set (:func:`.loader.load_prompts`) to a GRPO stage: shuffled epochs,
deterministic and resumable, optionally in half-half modes (§4.3.2) and with epoch-level filtering
(§4.5.2)."""
from __future__ import annotations

import hashlib
import logging
import random
from collections.abc import Sequence
from typing import Iterator, Optional

from ..types import Prompt
from .rows import DataError

log = logging.getLogger(__name__)


class PromptStream:
    """Prompts in shuffled epochs, deterministic and resumable; optionally in half-half modes
    (§4.3.2) and with epoch-level filtering (§4.5.2).

    Epoch ``e`` visits every *active* row once in the order of ``random.Random(seed + e)`` (every
    row is active unless the epoch filter is on); a batch that runs past the end of an epoch
    continues into the next.

    Half-half (``alternate``, the no_think templatings index-aligned with ``prompts``, see
    ``load_prompts``): the k-th prompt handed out is row ``i``'s ``prompts[i]`` (think) for even k
    and ``alternate[i]`` (no_think) for odd k. The modes alternate over the whole draw sequence, so
    any batch of even size holds exactly half of each, and which row gets which mode follows the
    seeded shuffle.

    Epoch filter (``epoch_filter=(p_unsolved, p_solved)``): :meth:`record` notes each scored group's
    outcome for its row — unsolved (no sample correct; correct = verdict > 0), solved (all correct)
    or informative; samples the phase skips as truncated do not count. When an epoch starts, rows
    whose latest outcome is unsolved or solved leave it, except that each is re-admitted with
    probability ``p_unsolved`` / ``p_solved`` (one draw per filtered row per epoch from
    ``random.Random`` keyed by seed and epoch). If nothing would remain, every row stays. Outcomes
    recorded after the next epoch already started (a batch straddling the boundary) count from the
    epoch after it. Rows are matched by ``Prompt.uid``, which must then be unique.

    ``state_dict()`` holds the position (epoch, position, draws so far), the epoch's active rows,
    the rows' latest outcomes and a fingerprint of the prompt set: restoring it into a stream over
    the same prompts draws exactly the batches the original would have drawn next. Restoring into a
    different prompt set raises DataError (a stage resumed on other data would silently skip or
    repeat rows).
    """

    INFORMATIVE, UNSOLVED, SOLVED = 0, 1, 2
    """Row outcomes of the epoch filter (never-seen rows count as informative)."""

    def __init__(self, prompts: Sequence[Prompt], seed: int = 0, *,
                 alternate: Optional[Sequence[Prompt]] = None,
                 epoch_filter: Optional[tuple[float, float]] = None):
        if not len(prompts):
            raise DataError("PromptStream: no prompts")
        # a cached set lists them without building its prompts (data/prompt_cache.py)
        uids = _uids(prompts)
        if alternate is not None and _uids(alternate) != uids:
            raise DataError("PromptStream: alternate templatings must be index-aligned with the "
                            "prompts")
        # prompts are built only when drawn
        self._sets = (prompts, alternate) if alternate else (prompts,)
        self._n = len(prompts)
        self._seed, self._filter = seed, epoch_filter
        self._row_of = {uid: row for row, uid in enumerate(uids)}
        if epoch_filter is not None and len(self._row_of) < len(prompts):
            raise DataError("PromptStream: epoch filtering tracks prompts by uid, but the uids are "
                            "not unique")
        self._outcomes = [self.INFORMATIVE] * len(prompts)
        self._drawn = self._readmitted = 0
        self._active = list(range(len(prompts)))
        self._epoch, self._position = 0, 0
        self._order = self._epoch_order()
        self._fingerprint = hashlib.sha256("\n".join(uids).encode()).hexdigest()[:16]

    def _epoch_order(self) -> list[int]:
        order = list(self._active)
        random.Random(self._seed + self._epoch).shuffle(order)
        return order

    def _start_epoch(self, epoch: int) -> None:
        self._epoch, self._position = epoch, 0
        if self._filter is not None:
            rng = random.Random(f"epoch-filter/{self._seed}/{epoch}")
            readmit = {self.UNSOLVED: self._filter[0], self.SOLVED: self._filter[1]}
            active, readmitted = [], 0
            for row, outcome in enumerate(self._outcomes):
                if outcome == self.INFORMATIVE:
                    active.append(row)
                elif rng.random() < readmit[outcome]:
                    active.append(row)
                    readmitted += 1
            if not active:
                log.warning("epoch filter: every prompt is solved or unsolved; epoch %d keeps them "
                            "all", epoch)
                active, readmitted = list(range(self._n)), 0
            self._active, self._readmitted = active, readmitted
        self._order = self._epoch_order()

    def __iter__(self) -> Iterator[Prompt]:
        return self

    def __next__(self) -> Prompt:
        if self._position == len(self._order):
            self._start_epoch(self._epoch + 1)
        row = self._order[self._position]
        self._position += 1
        self._drawn += 1
        return self._sets[(self._drawn - 1) % len(self._sets)][row]

    def next_batch(self, n: int) -> list[Prompt]:
        """The next ``n`` prompts (crossing into the next epoch when this one runs out)."""
        return [next(self) for _ in range(n)]

    def record(self, groups, overlong: str = "none") -> None:
        """Note each scored group's outcome for the epoch filter (a no-op without one). Correct =
        the verifier's verdict > 0 (``PromptGroup.verdicts_G``, else the reward). Under
        ``overlong="filter"`` (the phase skips truncated samples, §4.5.2) a truncated sample is no
        evidence either way: a group whose samples all truncated counts as informative and stays,
        for the longer phases meant for it."""
        if self._filter is None:
            return
        for group in groups:
            verdicts = group.verdicts_G or group.rewards_G
            counted = [v for v, finish in zip(verdicts, group.finish_reason_G)
                       if not (overlong == "filter" and finish == "length")]
            correct = sum(v > 0 for v in counted)
            self._outcomes[self._row_of[group.prompt.uid]] = (
                self.INFORMATIVE if not counted else self.UNSOLVED if correct == 0
                else self.SOLVED if correct == len(counted) else self.INFORMATIVE)

    def metrics(self) -> dict[str, float]:
        """``epoch``; with the epoch filter also this epoch's
        ``epoch_filter/{kept,removed,readmitted}`` rows."""
        out = {"epoch": float(self._epoch)}
        if self._filter is not None:
            out.update({"epoch_filter/kept": float(len(self._active)),
                        "epoch_filter/removed": float(self._n - len(self._active)),
                        "epoch_filter/readmitted": float(self._readmitted)})
        return out

    @property
    def epoch(self) -> int:
        return self._epoch

    def state_dict(self) -> dict:
        return {"epoch": self._epoch, "position": self._position, "drawn": self._drawn,
                "active": list(self._active), "outcomes": list(self._outcomes),
                "readmitted": self._readmitted,
                "num_prompts": self._n, "fingerprint": self._fingerprint}

    def load_state_dict(self, state: dict) -> None:
        for key in ("num_prompts", "fingerprint"):
            if key in state and state[key] != self.state_dict()[key]:
                raise DataError(f"resume: data {key} {state[key]!r} in the checkpoint differs from "
                                f"{self.state_dict()[key]!r} of the loaded prompt set")
        epoch, position = int(state["epoch"]), int(state["position"])
        active = [int(r) for r in state["active"]]
        n = self._n
        if (epoch < 0 or not 0 <= position <= len(active) or not active
                or not all(0 <= r < n for r in active)
                or len(state["outcomes"]) != n):
            raise DataError(f"resume: bad data position epoch={epoch} position={position}")
        self._epoch, self._position, self._drawn = epoch, position, int(state["drawn"])
        self._active, self._outcomes = active, [int(o) for o in state["outcomes"]]
        self._readmitted = int(state["readmitted"])
        self._order = self._epoch_order()


def _uids(prompts: Sequence[Prompt]) -> list[str]:
    uids = getattr(prompts, "uids", None)
    return list(uids) if uids is not None else [p.uid for p in prompts]


__all__ = ["PromptStream"]
