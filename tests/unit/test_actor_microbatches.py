"""How the actor cuts a batch into microbatches (actor/megatron.py ``_microbatches``): each
microbatch runs only the columns some row of it needs — packed rows up to their padding, rows of one
sequence each (GRPO without packing, as under context parallelism) up to their last trained
token."""

import torch

from nemo_cascade import config
from nemo_cascade.actor.megatron import MegatronActor
from nemo_cascade.actor.sequence_layout import trimmed


def _rows(lengths: list[int], T: int = 12) -> dict:
    """Rows of one sequence each: a 2-token prompt, then the response (trained) up to ``length``."""
    n = len(lengths)
    tokens = torch.zeros(n, T, dtype=torch.long)
    loss_mask = torch.zeros(n, T)
    for i, length in enumerate(lengths):
        tokens[i, :length] = torch.arange(1, length + 1)
        loss_mask[i, 2:length] = 1.0
    return {
        "tokens": tokens,
        "loss_mask": loss_mask,
        "advantages": loss_mask * 0.5,
        "rollout_logprobs": -loss_mask,
    }


def test_rows_of_one_sequence_are_cut_after_their_last_trained_token():
    mb = trimmed(_rows([5, 7, 3]))
    assert {k: tuple(v.shape) for k, v in mb.items()} == {k: (3, 7) for k in mb}
    full = _rows([5, 7, 3])
    assert all(torch.equal(mb[k], full[k][:, :7]) for k in mb), "only padding columns go"
    assert not full["loss_mask"][:, 7:].any() and not full["tokens"][:, 7:].any()


def test_each_microbatch_is_cut_to_its_own_longest_row():
    actor = object.__new__(MegatronActor)
    actor.parallel = config.Parallel(micro_batch_size=2)
    actor.parallel_state = type(
        "OneRank",
        (),
        {
            "get_data_parallel_rank": staticmethod(lambda: 0),
            "get_data_parallel_world_size": staticmethod(lambda: 1),
        },
    )
    microbatches, n = actor._microbatches(_rows([11, 4, 3, 6, 12]))
    assert n == 5 and [tuple(mb["tokens"].shape) for mb in microbatches] == [
        (2, 11),
        (2, 6),
        (1, 12),
    ]
    actor.parallel = config.Parallel(
        micro_batch_size=2, pp=2
    )  # one activation shape between PP stages
    microbatches, _ = actor._microbatches(_rows([11, 4, 3, 6, 12]))
    assert {tuple(mb["tokens"].shape) for mb in microbatches} == {(2, 12)}
