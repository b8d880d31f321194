"""What the stage loop asks of its parts: the actor, the rollout engine and the scorer, as typed
interfaces. They are structural (``typing.Protocol``): the classes named in each docstring satisfy
them without inheriting, and tests/unit/test_interfaces.py checks that they do. Read ``stage.py``
and ``weight_sync.py`` through these and a parameter's trail does not stop at
``ctx.engine.generate`` or ``ctx.actor.train_step``.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol, Sequence

if TYPE_CHECKING:  # annotations only: nothing heavy is imported at run time
    import torch

    from nemo_cascade import config
    from nemo_cascade.actor.megatron import Batch, LossFn, StepMetrics
    from nemo_cascade.convert.table import Table
    from nemo_cascade.types import Prompt, PromptGroup


class Actor(Protocol):
    """The trainer: ``actor.megatron.MegatronActor`` (and ``actor.reward_model.RewardModelActor``
    for a reward-model stage, which trains only)."""

    te: bool
    """Transformer Engine layers: whole sequences per row (no shared-prompt rows)."""
    table: Table
    """The HF ⇄ Megatron conversion table its weights are named by."""

    def train_step(self, batch: Batch, loss_fn: LossFn, temperature: float = 1.0) -> StepMetrics:
        """One optimizer step on ``batch`` (collective), the loss from ``loss_fn``."""
        ...

    def logprobs(self, tokens_B_T: torch.Tensor, temperature: float = 1.0,
                 layout: Batch | None = None) -> torch.Tensor:
        """Per-token log-probabilities of ``tokens_B_T`` under the current weights, no update."""
        ...

    def snapshot_reference(self) -> None:
        """Keep the current weights as the KL reference."""
        ...

    def reference_weights(self) -> AbstractContextManager[None]:
        """The reference weights swapped in for a ``with`` block."""
        ...

    def weights_of(self, name: str) -> AbstractContextManager[None]:
        """Frozen weights ``name`` (``reference`` or a teacher) swapped in for a ``with`` block."""
        ...

    def iter_hf_weights(self, dtype: torch.dtype | None = None,
                        bucket_bytes: int | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        """Every HF-named full tensor, on every rank (collective: all ranks iterate fully)."""
        ...


class Engine(Protocol):
    """The rollout engine: ``rollout.vllm.RolloutEngine``."""

    dtype: str
    """The dtype it serves in (``rollout.dtype``); pushed weights are converted to it."""

    def generate(self, prompts: Sequence[Prompt], n: int, sampling: config.Rollout | None = None,
                 *, step: int | None = None, positions: Sequence[int] | None = None,
                 on_group: Callable[[int, PromptGroup], None] | None = None,
                 should_stop: Callable[[], bool] | None = None) -> list[PromptGroup]:
        """``n`` samples of each prompt, one group per prompt, seeded by ``step`` and
        ``positions``; ``on_group`` as each group finishes; ``should_stop`` between engine steps."""
        ...

    def load_weights(self, named_tensors: Iterable[tuple[str, torch.Tensor]]) -> None:
        """Replace its weights in place with HF-named tensors."""
        ...

    def sleep(self) -> None:
        """Free its GPU memory while the actor trains."""
        ...

    def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Take its GPU memory back (``tags``: only the weights, or the KV cache too)."""
        ...


class GroupScorer(Protocol):
    """Rewards for a batch of groups: ``rewards.Scorer`` (one domain), ``rewards.MixedScorer``
    (several in one stage)."""

    def score(self, groups: list[PromptGroup]) -> list[PromptGroup]:
        """Each group's rewards and verdicts set, in place; returns them."""
        ...

    def penalize_code_switching(self, groups: list[PromptGroup]) -> int:
        """The stage's code-switch penalty on a whole round gathered from every rank, in place;
        returns how many samples it flagged."""
        ...


__all__ = ["Actor", "Engine", "GroupScorer"]
