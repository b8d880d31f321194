"""Named copies of the actor's parameters that a forward can swap in: the KL reference, teachers.

A copy holds this rank's shards in the parameters' own dtype and device, so each one costs the
actor's parameter bytes on every rank (``bytes_of``); swapping is a copy in and a copy back.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

import torch


class FrozenWeights:
    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.copies: dict[str, dict[str, torch.Tensor]] = {}

    def _current(self) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.model.named_parameters()}

    @torch.no_grad()
    def _assign(self, weights: dict[str, torch.Tensor]) -> None:
        for n, p in self.model.named_parameters():
            p.copy_(weights[n])

    def keep(self, name: str) -> None:
        """Keep the parameters as they are now under ``name``."""
        self.copies[name] = self._current()

    def load(self, name: str, fill: Callable[[], None]) -> None:
        """Keep under ``name`` what ``fill`` writes into the parameters (an HF folder's weights);
        the parameters are back to what they were afterwards, also when ``fill`` fails."""
        current = self._current()
        try:
            fill()
            self.copies[name] = self._current()
        finally:
            self._assign(current)

    @contextmanager
    def swapped_in(self, name: str) -> Iterator[None]:
        """The copy ``name`` in the parameters for the block, the trained weights back after it."""
        if name not in self.copies:
            raise RuntimeError(f"no frozen weights named {name!r}; kept: {sorted(self.copies)}")
        current = self._current()
        self._assign(self.copies[name])
        try:
            yield
        finally:
            self._assign(current)

    def bytes_of(self, name: str) -> int:
        return sum(t.numel() * t.element_size() for t in self.copies[name].values())


__all__ = ["FrozenWeights"]
