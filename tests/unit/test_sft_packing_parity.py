"""Sequence packing computes what unpacked examples compute: on the real Megatron actor, the SFT
loss of a packed batch (block-diagonal causal attention, positions restarting per example) equals
the token-weighted loss of the same examples each in a row of its own — and differs when the mask is
left out."""
import torch

from nemo_cascade import config
from nemo_cascade.algorithms.packing import pack_sft_batch
from nemo_cascade.cascade.stage import sft_loss
from tests.tolerance import Net, assert_close


def test_packed_loss_equals_unpacked(tmp_path):
    from nemo_cascade.actor.megatron import MegatronActor
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    make_tiny_hf_model(tmp_path, vocab_size=320, arch="qwen3", seed=5)
    actor = MegatronActor(str(tmp_path), config.Parallel(micro_batch_size=8))
    # measure the loss; leave the weights as they are
    actor.configure_optimizer(config.Actor(lr=0.0), 10)
    g = torch.Generator().manual_seed(0)
    examples = [(torch.randint(3, 320, (p,), generator=g).tolist(),
                 torch.randint(3, 320, (r,), generator=g).tolist())
                for p, r in ((5, 7), (3, 4), (9, 2), (4, 6), (2, 9))]
    packed = pack_sft_batch(examples, max_tokens=24, pad_id=0)
    assert packed.num_sequences < len(examples), \
        "the test must actually put several examples in one row"
    step = actor.train_step(packed.tensors(), sft_loss)
    total = count = 0.0
    for ex in examples:
        alone = actor.train_step(pack_sft_batch([ex], 24, 0).tensors(), sft_loss)
        total, count = total + alone.loss * alone.tokens, count + alone.tokens
    assert step.tokens == count
    assert_close(step.loss, total / count, torch.float32,
                 Net.of(tmp_path, 24).forward_terms() + int(count), relative=True,
                 what="packed SFT loss")
    # without the per-example mask and positions, later examples would see earlier ones: a different
    # loss
    leaky = actor.train_step({"tokens": packed.tokens_B_T, "loss_mask": packed.loss_mask_B_T},
                             sft_loss)
    assert abs(leaky.loss - step.loss) > 1e-3
