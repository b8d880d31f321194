"""The LM head on the predicting positions only (actor/lm_head.py): a GRPO and an SFT step give the
losses, gradients and log-prob gaps of the whole-sequence head, while the output layer computes only
the trained tokens' rows."""
from functools import partial

import pytest
import torch

from nemo_cascade import config
from nemo_cascade.actor import lm_head as LM
from nemo_cascade.algorithms import grpo, packing, sft
from nemo_cascade.types import Prompt, PromptGroup
from tests.tolerance import Net, assert_step_close


@pytest.fixture(scope="module")
def actor(tmp_path_factory):
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    path = tmp_path_factory.mktemp("lm_head")
    make_tiny_hf_model(path, vocab_size=320, arch="qwen3", seed=3)
    actor = MegatronActor(str(path), config.Parallel(micro_batch_size=3))
    actor.configure_optimizer(config.Actor(lr=0.0), 10)  # measure; the weights stay put
    return actor


def _groups():
    g = torch.Generator().manual_seed(2)
    randint = lambda n: torch.randint(3, 320, (n,), generator=g).tolist()  # noqa: E731
    return [PromptGroup(prompt=Prompt(prompt_tokens=randint(p), domain="math", label="1"),
                        response_tokens_G_T=[randint(r) for r in rs],
                        rollout_logprobs_G_T=[[-1.0] * r for r in rs],
                        finish_reason_G=["stop"] * 3, rewards_G=[1.0, 0.0, 0.5])
            for p, rs in ((6, (9, 2, 5)), (11, (3, 7, 1)))]


def _step(actor, batch, loss, whole_head: bool):
    saved = actor._head_input
    if whole_head:
        actor._head_input = None
    rows = []
    hook = actor.model.output_layer.register_forward_hook(
        lambda m, args, out: rows.append(args[0].shape[0] * args[0].shape[1]))
    try:
        return actor.train_step(batch, loss, 0.8), sum(rows)
    finally:
        hook.remove()
        actor._head_input = saved


@pytest.mark.parametrize("packed", [True, False])
def test_grpo_step_equals_the_whole_sequence_head(actor, packed):
    cfg = config.GRPO(adv_eps=0.0, sequence_packing=packed)
    batch = grpo.make_batch(_groups(), cfg, pad_id=0)
    loss = partial(grpo.actor_loss, cfg)
    (full, full_rows), (picked, picked_rows) = (_step(actor, batch.tensors(), loss, whole)
                                                for whole in (True, False))
    assert picked.tokens == full.tokens
    assert_step_close(picked, full, Net.of(actor.hf_path, batch.tokens_B_T.shape[1]),
                      batch.tokens_B_T.numel())
    assert picked_rows == int(batch.loss_mask_B_T.sum()) < full_rows, \
        "the head ran on the trained tokens only"


def test_sft_step_equals_the_whole_sequence_head(actor):
    batch = packing.pack_sft_batch([([5, 6, 7, 8], [9, 10, 11]), ([12, 13], [14, 15, 16, 17])],
                                   16, 0).tensors()
    (full, _), (picked, rows) = (
        _step(actor, batch, lambda lp, mb: (*sft.sft_loss_terms(lp, mb["loss_mask"]), {}), whole)
        for whole in (True, False))
    assert_step_close(picked, full, Net.of(actor.hf_path, batch["tokens"].shape[1]),
                      batch["tokens"].numel())
    assert rows == int(batch["loss_mask"].sum())


def test_selection_layouts():
    mask = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 0]], dtype=torch.float32)
    s = LM.select(mask, seq_len=4, thd=False)
    assert (s.b.tolist(), s.t.tolist()) == ([0, 0, 1], [1, 2, 0])  # position t predicts token t + 1
    assert s.rows.tolist() == [1 * 2 + 0, 2 * 2 + 0, 0 * 2 + 1]   # [S, B, H] flattened
    # [B·T, 1, H]: row b starts at b·T
    assert LM.select(mask, seq_len=8, thd=True).rows.tolist() == [1, 2, 8]
    assert LM.select(torch.zeros(2, 4), 4, False) is None


def test_the_heads_gradient_reaches_the_logits_without_a_zero_filled_copy(actor):
    """The selected positions' logits ``[1, N, V]`` lose their first dimension by a view: a select
    (``[0]``) would zero-fill and copy a gradient as large as the logits in its backward (half a
    second of a SmolLM2 step on a CPU, most of it the fresh buffer's page faults)."""
    from tests.unit.test_grpo_packing import _backward_ops

    mask = torch.tensor([[0, 1, 1, 1], [0, 0, 1, 1]], dtype=torch.float32)
    selection = LM.select(mask, seq_len=4, thd=False)
    logits = torch.randn(1, 5, 11, requires_grad=True)
    tokens = torch.randint(0, 11, (2, 4), generator=torch.Generator().manual_seed(0))
    got = LM.selected_token_logprobs(logits.clone(), tokens, selection, 1.0)
    assert "SelectBackward0" not in _backward_ops(got)
    labels = tokens[selection.b, selection.t + 1]
    want = torch.log_softmax(logits[0].detach(), -1)[torch.arange(5), labels]
    assert torch.allclose(got[selection.b, selection.t + 1], want, rtol=0, atol=1e-6)
    got.sum().backward()
    expected = torch.nn.functional.one_hot(labels, 11) - torch.softmax(logits[0].detach(), -1)
    assert torch.allclose(logits.grad[0], expected, rtol=0, atol=1e-6)
