"""Activation recompute trades compute for memory and must not change the math: on the real Megatron
actor, ``parallel.recompute`` = selective (attention core) and full (every layer) give the same
losses, gradients and log-probs as none — and the recompute path is really taken (Megatron's
checkpoint function is called)."""
import pytest
import torch

from nemo_cascade import config
from nemo_cascade.algorithms import grpo
from tests.tolerance import Net, assert_close


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import make_tiny_hf_model

    return str(
        make_tiny_hf_model(tmp_path_factory.mktemp("tiny"), vocab_size=256, arch="qwen3", seed=3,
                           num_hidden_layers=2))


def run(model_dir, recompute, monkeypatch):
    """Two GRPO steps; the loss of each, every parameter's gradient after the first, final
    log-probs, and how often Megatron's activation checkpoint ran."""
    from megatron.core import tensor_parallel

    from nemo_cascade.actor.megatron import MegatronActor

    calls = []
    original = tensor_parallel.checkpoint

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(tensor_parallel, "checkpoint", counting)
    actor = MegatronActor(
        model_dir,
        config.Parallel(micro_batch_size=2, distributed_optimizer=False, recompute=recompute),
        seed=7)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 256, (4, 17), generator=g)
    mask = torch.zeros(4, 17)
    mask[:, 5:] = 1.0
    batch = {"tokens": tokens, "loss_mask": mask, "advantages": torch.randn(4, generator=g)}
    # ratio ≠ 1: the clipped objective's full path
    batch["old_logprobs"] = actor.logprobs(tokens) - 0.05

    def loss_fn(lp, mb):
        return grpo.policy_loss_terms(lp, mb["old_logprobs"], mb["advantages"], mb["loss_mask"],
                                      config.GRPO())

    actor.configure_optimizer(config.Actor(lr=1e-3, clip_grad=0.0), total_steps=2)
    first = actor.train_step(batch, loss_fn)
    grads = {n: p.main_grad.detach().clone() for n, p in actor.model.named_parameters()}
    second = actor.train_step(batch, loss_fn)
    return [first.loss, second.loss], grads, actor.logprobs(tokens), len(calls)


@pytest.fixture(scope="module")
def reference(model_dir):
    with pytest.MonkeyPatch.context() as mp:
        return run(model_dir, "none", mp)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_recompute_gives_the_same_loss_and_gradients(model_dir, reference, recompute, monkeypatch):
    losses, grads, logprobs, calls = run(model_dir, recompute, monkeypatch)
    ref_losses, ref_grads, ref_logprobs, ref_calls = reference
    assert ref_calls == 0 and calls > 0, (f"recompute={recompute} must go through Megatron's "
                                          "checkpoint function")
    # The recomputed forward is the same arithmetic, but the backward may reach it in another order
    # (full recompute re-enters each layer): tests/tolerance.py's bounds for 4 rows of 17 tokens.
    net, tokens = Net.of(model_dir, 17), 4 * 17
    for k, (loss, ref_loss) in enumerate(zip(losses, ref_losses)):
        assert_close(loss, ref_loss, torch.float32, net.terms_after(k, tokens), relative=True,
                     what=f"loss {k}")
    assert set(grads) == set(ref_grads)
    for name, g in grads.items():
        assert_close(g, ref_grads[name], torch.float32, net.step_terms(tokens),
                     what=f"{name}'s gradient")
    assert max(g.abs().max().item()
               for g in grads.values()) > 0, "gradients must be non-zero for this to mean much"
    assert_close(logprobs, ref_logprobs, torch.float32, net.terms_after(2, tokens),
                 what="log-probs")
