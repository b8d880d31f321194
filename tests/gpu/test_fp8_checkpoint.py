"""FP8 (delayed scaling) resume on one GPU with Transformer Engine: the scaling state TE keeps
outside the parameters (``_extra_state``: scales and amax history) is in the checkpoint, and a
resumed run continues the uninterrupted one — the same weights after the next steps (the CPU tier
checks the bookkeeping with a stand-in module: tests/unit/test_checkpoint.py)."""
import pytest
import torch

from nemo_cascade import config
from tests.gpu.test_te_spec import VOCAB, sft_loss, te_actor


def _batch(seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (4, 128), generator=g)
    mask = torch.ones(4, 128)
    mask[:, 0] = 0.0
    return {"tokens": tokens, "loss_mask": mask}


def _fp8_actor(tiny):
    actor = te_actor(tiny, dtype="bfloat16", fp8="delayed")
    actor.configure_optimizer(config.Actor(lr=1e-3), total_steps=6)
    return actor


def test_fp8_scaling_state_is_checkpointed_and_resumed(te, tiny, tmp_path):
    from nemo_cascade import checkpoint as ckpt
    from nemo_cascade.actor import extra_state

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("FP8 needs compute capability >= 8.9")
    batches = [_batch(i) for i in range(5)]
    run = _fp8_actor(tiny)
    for b in batches[:3]:
        run.train_step(b, sft_loss)
    path = ckpt.save(tmp_path, 3, run, {})
    saved = torch.load(path / "train_rank00000.pt", weights_only=True)["extra_state"]
    filled = [k for k, v in saved.items() if v is not None and v.numel() > 0]
    assert any("linear_qkv" in k for k in filled), \
        "TE's FP8 modules keep scaling state after FP8 steps"
    for b in batches[3:]:
        run.train_step(b, sft_loss)
    final = {n: p.detach().clone() for n, p in run.model.named_parameters()}
    del run

    resumed = _fp8_actor(tiny)
    fresh = {k: v.clone() for k, v in extra_state.collect(resumed.model).items() if v is not None}
    ckpt.load(path, resumed)
    after = extra_state.collect(resumed.model)
    assert any(not torch.equal(after[k], fresh[k]) for k in filled if k in fresh), \
        "the saved scales came back"
    for b in batches[3:]:
        resumed.train_step(b, sft_loss)
    for name, p in resumed.model.named_parameters():
        assert torch.equal(p.detach(), final[name]), f"{name} differs after an FP8 resume"
