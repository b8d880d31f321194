"""actor/optimizer.fuse_cpu_adam: on a CPU the actor's AdamW runs torch's fused kernel, which lands
within the suite's rounding bounds (tests/tolerance.py) of the per-parameter loop Megatron builds;
an optimizer restored from a checkpoint saved without it is fused again."""
import torch

from nemo_cascade.actor import optimizer
from tests.tolerance import Net, assert_training_close
from tests.unit.test_checkpoint import (  # noqa: F401  (batches, model_dir: fixtures)
    batches, make_actor, model_dir, params, sft_loss)

ROWS, LENGTH = 4, 20  # test_checkpoint's batches


def _fused(actor) -> set:
    return {g["fused"] for sub in optimizer.parts(actor.optimizer)
            for g in sub.optimizer.param_groups}


def _trained(actor, batches) -> dict:
    steps = [actor.train_step(b, sft_loss) for b in batches]
    return {"loss": [s.loss for s in steps], "grad_norm": [s.grad_norm for s in steps]}


def test_the_fused_kernel_lands_within_the_bounds_of_the_loop(model_dir, batches):
    fused = make_actor(model_dir)
    assert _fused(fused) == {True}
    got, fused_weights = _trained(fused, batches), params(fused)
    loop = make_actor(model_dir)
    for sub in optimizer.parts(loop.optimizer):
        for group in sub.optimizer.param_groups:
            group["fused"] = False
    expected, loop_weights = _trained(loop, batches), params(loop)
    # another order of the same roundings: not the same bits, within the bounds
    assert any(not torch.equal(fused_weights[n], loop_weights[n]) for n in fused_weights)
    assert_training_close(got, expected, Net.of(model_dir, LENGTH), ROWS * LENGTH, "fused Adam")


def _unfuse(state):
    """A saved optimizer state as one saved before the actor fused its Adam."""
    if isinstance(state, dict):
        return {k: False if k == "fused" else _unfuse(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_unfuse(v) for v in state]
    return state


def test_an_optimizer_restored_from_an_unfused_checkpoint_is_fused(model_dir, batches):
    actor = make_actor(model_dir)
    actor.train_step(batches[0], sft_loss)
    saved = _unfuse(optimizer.checkpoint_state(actor.optimizer))
    assert "'fused': False" in repr(saved)
    resumed = make_actor(model_dir)
    optimizer.restore(resumed.optimizer, saved)
    assert _fused(resumed) == {True}
