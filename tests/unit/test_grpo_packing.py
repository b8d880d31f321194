"""GRPO sequence packing: rows packed first-fit decreasing, and the real Megatron actor computing
the same log-probs, loss and gradients from packed rows as from one padded row per sequence."""
import pytest
import torch

from nemo_cascade import config
from nemo_cascade.algorithms import grpo, packing
from nemo_cascade.config import GRPO
from nemo_cascade.types import Prompt, PromptGroup
from tests.tolerance import Net, assert_close, assert_step_close


def group(prompt, responses, rewards):
    return PromptGroup(prompt=Prompt(prompt_tokens=prompt, domain="math", label="1"),
                       response_tokens_G_T=responses,
                       rollout_logprobs_G_T=[[-0.5] * len(r) for r in responses],
                       finish_reason_G=["stop"] * len(responses), rewards_G=rewards)


def test_pack_rows_first_fit_decreasing():
    assert packing.pack_rows([5, 3, 2, 4, 1], budget=5) == [[0], [3, 4], [1, 2]]
    assert packing.pack_rows([2, 2, 2], budget=4) == [[0, 1], [2]]  # ties keep their order
    # longer than the budget: a row of its own
    assert packing.pack_rows([9, 1], budget=4) == [[0], [1]]
    assert packing.pack_rows([], budget=4) == []
    lengths = [
        int(x) for x in torch.randint(1, 50, (200,), generator=torch.Generator().manual_seed(0))]
    rows = packing.pack_rows(lengths, budget=64)
    assert sorted(s for row in rows for s in row) == list(range(200))
    assert all(sum(lengths[s] for s in row) <= 64 for row in rows)
    assert packing.pad_share(lengths, len(rows), 64) < 0.05


def test_a_group_that_fits_no_row_whole_fills_row_tails():
    """fill_rows: first-fit decreasing of whole groups; a group that fits no open row gives the
    roomiest row those of its samples that fit there, each part with its own copy of the prompt."""
    # four groups of 4 samples, 3-token prompts: 2 + Σ(R + 1) tokens each when whole
    sizes = {"A": (20, 20, 20, 19), "B": (20, 20, 20, 10), "C": (6, 6, 6, 6), "D": (14,) * 4}
    responses = [[5] * r for g in "ABCD" for r in sizes[g]]
    prompts = [[i + 1] * 3 for i in range(4) for _ in range(4)]
    # A 85 (the width), B 76, D 62, C 30. Whole groups only, C would open a fourth row; split,
    # three of its samples fill D's row and the fourth B's.
    rows = packing.pack_rows_of(prompts, responses, 0, share=True)
    assert rows == [[(0, 1, 2, 3)], [(4, 5, 6, 7), (11,)], [(12, 13, 14, 15), (8, 9, 10)]]
    laid = packing.pack_sequences(prompts, responses, pad_id=0, rows=rows)
    assert laid["tokens_B_T"].shape == (3, 85) and (laid["segment_ids_B_T"] > 0).all()
    # C's parts: each its own prompt copy, positions continuing it
    assert laid["position_ids_B_T"][1, 76:].tolist() == list(range(9))
    # every group fits some row whole: nothing is split
    assert packing.pack_rows_of(prompts[:8], responses[:8], 0, share=True) == [
        [(0, 1, 2, 3)], [(4, 5, 6, 7)]]
    # without shared prompts a sequence is never split: first-fit decreasing of sequences
    lengths = [3 + len(r) for r in responses]
    assert packing.pack_rows_of(prompts, responses, 0, share=False) == [
        [(s,) for s in row] for row in packing.pack_rows(lengths, max(lengths))]


def test_make_batch_packs_sequences_with_their_own_positions_and_advantages():
    groups = [group([11, 12], [[21, 22, 23], [24]], [1.0, 0.0]),   # lengths 5, 3
              group([13], [[25], [26, 27]], [0.0, 1.0])]           # lengths 2, 3
    batch = grpo.make_batch(groups, GRPO(adv_eps=0.0, share_prompts=False), pad_id=99)
    # budget = longest (5), longest first: 5 alone; 3 opens a row; the next 3 does not fit its 2
    # left and opens another; 2 fills the first row with room
    assert batch.packed and batch.num_sequences == 4
    assert batch.tokens_B_T.tolist() == [[11, 12, 21, 22, 23], [11, 12, 24, 13, 25],
                                         [13, 26, 27, 99, 99]]
    assert batch.segment_ids_B_T.tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 2, 2], [1, 1, 1, 0, 0]]
    assert batch.position_ids_B_T.tolist() == [[0, 1, 2, 3, 4], [0, 1, 2, 0, 1], [0, 1, 2, 0, 0]]
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1, 1], [0, 0, 1, 0, 1], [0, 1, 1, 0, 0]]
    a = 0.707107
    torch.testing.assert_close(batch.advantages_B_T, torch.tensor(
        [[a] * 5, [-a] * 5, [a, a, a, 0, 0]]), atol=1e-5, rtol=0)
    torch.testing.assert_close(batch.advantages_S, torch.tensor([a, -a, -a, a]), atol=1e-5, rtol=0)
    assert batch.metrics["rows"] == 3
    assert batch.metrics["pad_share"] == pytest.approx(1 - 13 / 15)
    assert batch.metrics["pad_share_unpacked"] == pytest.approx(1 - 13 / 20)
    assert batch.metrics["shared_prompt_saving"] == 0.0
    assert set(batch.tensors()) == {
        "tokens", "loss_mask", "advantages", "rollout_logprobs", "position_ids", "segment_ids"}

    plain = grpo.make_batch(groups, GRPO(adv_eps=0.0, sequence_packing=False), pad_id=99)
    assert plain.tokens_B_T.shape == (4, 5) and plain.layout() == {}
    assert plain.metrics["pad_share"] == plain.metrics["pad_share_unpacked"]
    wide = grpo.make_batch(groups, GRPO(adv_eps=0.0, pack_tokens=8, share_prompts=False), pad_id=99)
    assert wide.tokens_B_T.shape == (2, 8)


def test_a_groups_samples_share_one_copy_of_their_prompt():
    """GRPO.share_prompts: the prompt but its last token once, then per sample that token and its
    response, positions continuing the prompt's; each sample sees the shared part and itself, never
    another sample."""
    # shared: 2 + (1 + 2) + (1 + 1) = 7 tokens
    groups = [group([11, 12, 13], [[21, 22], [23]], [1.0, 0.0]),
              # a one-token prompt has nothing to share
              group([14], [[24], [25, 26]], [0.0, 1.0])]
    batch = grpo.make_batch(groups, GRPO(adv_eps=0.0), pad_id=99)
    assert batch.tokens_B_T.tolist() == [[11, 12, 13, 21, 22, 13, 23], [14, 25, 26, 14, 24, 99, 99]]
    assert batch.position_ids_B_T.tolist() == [[0, 1, 2, 3, 4, 2, 3], [0, 1, 2, 0, 1, 0, 0]]
    assert batch.segment_ids_B_T.tolist() == [[1, 1, 2, 2, 2, 3, 3], [1, 1, 1, 2, 2, 0, 0]]
    assert batch.prefix_ids_B_T.tolist() == [[0, 0, 1, 1, 1, 1, 1], [0] * 7]
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 0, 1, 1, 0, 1], [0, 1, 1, 0, 1, 0, 0]]
    assert batch.rollout_logprobs_B_T.tolist() == [[0, 0, 0, -0.5, -0.5, 0, -0.5],
                                                   [0, -0.5, -0.5, 0, -0.5, 0, 0]]
    a = 0.707107
    torch.testing.assert_close(batch.advantages_B_T, torch.tensor(
        [[0, 0, a, a, a, -a, -a], [a, a, a, -a, -a, 0, 0]]), atol=1e-5, rtol=0)
    assert batch.layout().keys() == {"position_ids", "segment_ids", "prefix_ids"}
    # 5 + 4 + 2 + 3 laid as 7 + 5
    assert batch.metrics["shared_prompt_saving"] == pytest.approx(1 - 12 / 14)
    allowed = ~packing.segment_causal_mask(batch.segment_ids_B_T, batch.prefix_ids_B_T)[0, 0]
    # the 2nd sample's first token
    assert allowed[5].tolist() == [True, True, False, False, False, True, False]
    assert allowed[4].tolist() == [True, True, True, True, True, False, False]
    # rows of at most pack_tokens: a sample that does not fit joins no unit and keeps its own prompt
    tight = grpo.make_batch(groups[:1], GRPO(adv_eps=0.0, pack_tokens=6), pad_id=99)
    assert tight.prefix_ids_B_T.max() == 0 and tight.metrics["shared_prompt_saving"] == 0.0


def _backward_ops(t: torch.Tensor) -> set[str]:
    """The names of the autograd nodes behind ``t``."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(next_node for next_node, _ in node.next_functions)
    return {type(node).__name__ for node in seen}


def test_a_row_gathered_twice_gets_its_gradient_in_one_order():
    """fused_attention.gather_rows is ``x[index]`` whose gradient has the same bits on two threads
    as on one, rows gathered many times included; ``x[index]``'s own backward, with atomic adds
    past 32,768 elements, differs from the one-thread sum at this size on nearly every call."""
    from nemo_cascade.actor.fused_attention import gather_rows

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6000, 4, 32, generator=g, requires_grad=True)
    index = torch.randint(0, 1500, (200, 120), generator=g)  # most rows gathered several times
    weight = torch.randn(200, 120, 4, 32, generator=g)
    assert torch.equal(gather_rows(x, index), x[index])
    threads, grads = torch.get_num_threads(), []
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            grads.append(torch.autograd.grad((gather_rows(x, index) * weight).sum(), x)[0])
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(*grads)


@pytest.mark.parametrize("share", [True, False])
def test_attention_by_block_is_the_block_diagonal_masks_attention(share):
    """packing.attention_blocks + fused_attention.attend_by_block compute, on every real token, what
    torch's attention computes under segment_causal_mask — values and gradients, grouped-query K/V —
    and zero on padding; a bf16 input runs its blocks in fp32 and is rounded once."""
    from nemo_cascade.actor.fused_attention import attend_by_block

    g = torch.Generator().manual_seed(3)
    groups = [
        group(list(range(3, 3 + p)), [list(range(5, 5 + r)) for r in rs], [1.0, 0.0, 0.5][:len(rs)])
        for p, rs in ((5, (4, 1, 6)), (1, (3, 2)), (8, (2, 7, 3)))]
    batch = grpo.make_batch(groups, GRPO(adv_eps=0.0, share_prompts=share), pad_id=0)
    segments, prefix = batch.segment_ids_B_T, batch.prefix_ids_B_T
    assert ((batch.metrics["shared_prompt_saving"] > 0) == share and (segments == 0).any()
            and segments.max() > 1)
    blocks = packing.attention_blocks(segments, prefix)
    assert blocks.real_UQ.sum() == (segments > 0).sum(), \
        "every real token is one block's query, once"
    B, T = segments.shape
    q, k, v = (torch.randn(T, B, h, 8, generator=g, requires_grad=True) for h in (4, 2, 2))
    # padding outputs are never read
    weight = torch.randn(T, B, 32, generator=g) * (segments.t() > 0).unsqueeze(2)

    def dense(q, k, v):
        allowed = ~packing.segment_causal_mask(segments, prefix)
        out = torch.nn.functional.scaled_dot_product_attention(
            *(x.permute(1, 2, 0, 3) for x in (q, k, v)), allowed, scale=0.3, enable_gqa=True)
        return out.permute(2, 0, 1, 3).reshape(T, B, 32)

    want = dense(q, k, v)
    want_grads = torch.autograd.grad((want * weight).sum(), (q, k, v))
    got = attend_by_block(q, k, v, blocks, scale=0.3)
    assert "IndexBackward0" not in _backward_ops(got), "x[index]'s backward: see gather_rows"
    got_grads = torch.autograd.grad((got * weight).sum(), (q, k, v))
    real = (segments.t() > 0).unsqueeze(2)
    # the weighted sum over at most T keys after the 8-term scores (tests/tolerance.py)
    terms = T + 8
    assert_close(got * real, want * real, torch.float32, terms, what="block attention")
    assert (got[~real.expand_as(got)] == 0).all()
    for x, y in zip(got_grads, want_grads):
        assert_close(x, y, torch.float32, 2 * terms + T, what="block attention's gradient")
    low = attend_by_block(*(x.detach().bfloat16() for x in (q, k, v)), blocks, scale=0.3)
    assert low.dtype == torch.bfloat16
    # bf16 blocks run in fp32 and round once on the way out: one bf16 rounding apart from fp32 on
    # the same inputs
    assert_close(low.float() * real,
                 dense(*(x.detach().bfloat16().float() for x in (q, k, v))) * real,
                 torch.bfloat16, 1, what="bf16 block attention")


GROUPS = {"whole": ((4, (9, 2, 5)), (7, (3, 11, 1)), (2, (6, 6, 4))),
          # shared, the last group fits no row whole, so it is split over two rows' tails
          "split": ((4, (9, 2, 2)), (7, (3, 11, 1)), (2, (6, 6, 4)), (2, (1, 1, 1)))}
"""(prompt tokens, response tokens per sample) of each group of the actor test."""


@pytest.mark.parametrize("aggregation,share,by_block,groups", [("token", True, True, "whole"),
                                                               ("sequence", True, False, "whole"),
                                                               ("token", False, True, "whole"),
                                                               ("token", False, False, "whole"),
                                                               ("token", True, True, "split")])
def test_actor_computes_the_same_from_packed_rows(tmp_path, monkeypatch, aggregation, share,
                                                  by_block, groups):
    from functools import partial

    from nemo_cascade.actor.megatron import MegatronActor

    monkeypatch.setattr(packing, "BLOCK_CELLS_AT_MOST", float("inf") if by_block else 0.0)
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=320, arch="qwen3", seed=5)
    actor = MegatronActor(str(tmp_path), config.Parallel(micro_batch_size=2))
    actor.configure_optimizer(config.Actor(lr=0.0), 10)  # measure; leave the weights as they are
    g = torch.Generator().manual_seed(1)
    randint = lambda n: torch.randint(3, 320, (n,), generator=g).tolist()  # noqa: E731
    shapes = GROUPS[groups]
    groups = [PromptGroup(prompt=Prompt(prompt_tokens=randint(p), domain="math", label="1"),
                          response_tokens_G_T=[randint(r) for r in responses],
                          rollout_logprobs_G_T=[[-1.0] * r for r in responses],
                          finish_reason_G=["stop"] * 3, rewards_G=[1.0, 0.0, 0.5])
              for p, responses in shapes]
    cfg = GRPO(adv_eps=0.0, loss_aggregation=aggregation, share_prompts=share)
    packed = grpo.make_batch(groups, cfg, pad_id=0)
    assert (packed.metrics["shared_prompt_saving"] > 0.1) == share
    split = len(shapes) == 4 and (packed.sequence_B_T >= 9).any(dim=1).sum() == 2
    assert split == (shapes is GROUPS["split"])
    plain = grpo.make_batch(groups, GRPO(**{**cfg.__dict__, "sequence_packing": False}), pad_id=0)
    assert packed.tokens_B_T.shape[0] < plain.tokens_B_T.shape[0], \
        "the test must put several sequences in a row"
    layout = packing.packed_attention(packed.segment_ids_B_T,
                                      packed.prefix_ids_B_T if share else None,
                                      by_block=actor.plan.fused_attention)
    assert isinstance(layout, packing.AttentionBlocks) == by_block

    # log-probs: every sequence's own values, wherever packing put it
    lp_packed = actor.logprobs(packed.tokens_B_T, 0.7, packed.layout())
    lp_plain = actor.logprobs(plain.tokens_B_T, 0.7)
    got = lp_packed[packed.loss_mask_B_T > 0].sort().values
    want = lp_plain[plain.loss_mask_B_T > 0].sort().values
    net = Net.of(tmp_path, plain.tokens_B_T.shape[1])
    assert_close(got, want, torch.float32, net.forward_terms(), what="packed log-probs")

    loss = partial(grpo.actor_loss, cfg)
    a, b = (actor.train_step(packed.tensors(), loss, 0.7),
            actor.train_step(plain.tensors(), loss, 0.7))
    assert a.tokens == b.tokens
    # strict on-policy: the loss VALUE is −ΣA/n whatever the log-probs; the gradient and the
    # log-prob gap are not
    assert_step_close(a, b, net, plain.tokens_B_T.numel())
    # microbatches of 2 packed rows are cut to their longest row: the later ones run fewer columns
    # than the batch (where the split leaves no row short, none is cut)
    assert (a.metrics["computed_tokens"] < packed.tokens_B_T.numel()) == (not split)
    # and unpacked rows after their last trained token
    assert b.metrics["computed_tokens"] < plain.tokens_B_T.numel()
    # the layout is what makes it equal: packed rows without it let sequences see each other
    leaky = {k: v for k, v in packed.tensors().items()
             if k not in ("position_ids", "segment_ids", "prefix_ids")}
    assert abs(actor.train_step(leaky, loss, 0.7).grad_norm - a.grad_norm) > 1e-3
