"""checkpoint.py: save → load → train equals an uninterrupted run bit for bit; verification errors;
latest/keep.

One process, world size 1, the tiny recipe's Qwen3 (demo_data.tiny_models.BUILDERS) as a real
Megatron actor with the distributed optimizer (the default) and the plain one. The schedule has
warmup + cosine decay and the optimizer weight decay, so a wrong scheduler or optimizer restore
changes the weights.
"""
import json
import random
import shutil

import numpy as np
import pytest
import torch

from nemo_cascade import checkpoint as ckpt
from nemo_cascade import config
from nemo_cascade.actor import optimizer
from nemo_cascade.algorithms import sft
from nemo_cascade.runtime.files import file_sha256

K, M = 3, 3  # steps before the checkpoint, steps after it
ACTOR = config.Actor(lr=2e-3, min_lr=2e-4, lr_schedule="cosine", warmup_steps=2, weight_decay=0.1,
                     clip_grad=1.0)


# the SFT stage's loss (stage.sft_loss); cascade/stage.py sits above this test's layer
def sft_loss(logprobs_B_T, mb):
    num, den = sft.sft_loss_terms(logprobs_B_T, mb["loss_mask"])
    return num, den, {}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from nemo_cascade.tooling.demo_data.tiny_models import BUILDERS

    return BUILDERS["tiny-qwen3"](tmp_path_factory.mktemp("tiny-qwen3"), seed=0)


@pytest.fixture(scope="module")
def batches():
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(K + M):
        tokens = torch.randint(0, 200, (4, 20), generator=g)
        mask = torch.zeros(4, 20)
        for b in range(4):  # prompts of different lengths, response to the end of the row
            mask[b, 3 + b:] = 1.0
        out.append({"tokens": tokens, "loss_mask": mask})
    return out


def make_actor(model_dir, distributed_optimizer=True, actor_cfg=ACTOR, configure=True):
    from nemo_cascade.actor.megatron import MegatronActor

    actor = MegatronActor(
        str(model_dir),
        config.Parallel(micro_batch_size=2, distributed_optimizer=distributed_optimizer))
    if configure:
        actor.configure_optimizer(actor_cfg, total_steps=K + M)
    return actor


def train(actor, batches):
    for b in batches:
        actor.train_step(b, sft_loss)


def params(actor):
    return {n: p.detach().clone() for n, p in actor.model.named_parameters()}


def rng_draws():
    from megatron.core import tensor_parallel

    with tensor_parallel.get_cuda_rng_tracker().fork():
        tracker = torch.rand(3)
    return [random.random(), float(np.random.rand()), torch.rand(3).tolist(), tracker.tolist()]


@pytest.fixture(scope="module", params=[True, False], ids=["distopt", "plainopt"])
def uninterrupted(request, model_dir, batches, tmp_path_factory):
    """Run A: K steps, save, M more steps. Yields what a resumed run must reproduce."""
    root = tmp_path_factory.mktemp("ckpt")
    actor = make_actor(model_dir, request.param)
    train(actor, batches[:K])
    at_save = params(actor)
    path = ckpt.save(root, K, actor, {"position": K, "stage": "sft"})
    draws = rng_draws()
    train(actor, batches[K:])
    return dict(distopt=request.param, root=root, path=path, at_save=at_save, draws=draws,
                final=params(actor), lr=actor.optimizer.param_groups[0]["lr"],
                num_steps=actor.scheduler.num_steps, actor=actor)


def resume(model_dir, uninterrupted, batches):
    actor = make_actor(model_dir, uninterrupted["distopt"])
    step, state = ckpt.load(ckpt.latest(uninterrupted["root"]), actor)
    draws = rng_draws()
    train(actor, batches[K:])
    return actor, step, state, draws


def test_resume_is_bit_exact(model_dir, uninterrupted, batches):
    actor, step, state, draws = resume(model_dir, uninterrupted, batches)
    assert (step, state) == (K, {"position": K, "stage": "sft"})
    assert draws == uninterrupted["draws"], (
        "python / numpy / torch / megatron-tracker RNG not restored")
    final = params(actor)
    assert not all(torch.equal(final[n], uninterrupted["at_save"][n])
                   for n in final), "training must move weights"
    for name, want in uninterrupted["final"].items():
        assert torch.equal(final[name], want), f"{name} differs after resume"
    assert actor.optimizer.param_groups[0]["lr"] == uninterrupted["lr"]
    assert actor.scheduler.num_steps == uninterrupted["num_steps"] == K + M


def _skip_optimizer(monkeypatch, actor):
    monkeypatch.setattr(optimizer, "restore", lambda megatron_optimizer, saved: None)


def _skip_scheduler(monkeypatch, actor):
    monkeypatch.setattr(actor.scheduler, "load_state_dict", lambda sd: None)


def _shared_adam_step(monkeypatch, actor):
    """Megatron's own load without the per-param step copy that actor/optimizer.py adds."""
    @torch.no_grad()
    def restore(megatron_optimizer, saved):
        for sub, sd in zip(optimizer.parts(megatron_optimizer), saved):
            sub.load_state_dict(sd)
    monkeypatch.setattr(optimizer, "restore", restore)


@pytest.mark.parametrize("sabotage", [_skip_optimizer, _skip_scheduler, _shared_adam_step],
                         ids=["no-optimizer", "no-scheduler", "shared-adam-step"])
def test_equality_check_catches_incomplete_restore(model_dir, uninterrupted, batches,
                                                   monkeypatch, sabotage):
    """The equality above is sensitive: leaving out one piece of the restore changes the final
    weights."""
    if sabotage is _shared_adam_step and not uninterrupted["distopt"]:
        pytest.skip(
            "only the distributed optimizer rebuilds Adam's state with a shared step tensor")
    actor = make_actor(model_dir, uninterrupted["distopt"])
    sabotage(monkeypatch, actor)
    ckpt.load(uninterrupted["path"], actor)
    train(actor, batches[K:])
    final = params(actor)
    assert not all(torch.equal(final[n], w) for n, w in uninterrupted["final"].items())


def test_checkpoint_before_first_step(model_dir, batches, tmp_path):
    """A checkpoint without Adam state (saved before any step) resets an actor that has already
    trained."""
    a = make_actor(model_dir)
    path = ckpt.save(tmp_path, 0, a, {})
    train(a, batches[:M])
    b = make_actor(model_dir)
    train(b, batches[M:])  # moves weights, Adam moments, step and LR away from the checkpoint
    assert ckpt.load(path, b) == (0, {})
    train(b, batches[:M])
    want = params(a)
    assert all(torch.equal(p, want[n]) for n, p in params(b).items())


def test_load_needs_optimizer_and_same_schedule(model_dir, uninterrupted):
    actor = make_actor(model_dir, uninterrupted["distopt"], configure=False)
    with pytest.raises(ckpt.CheckpointError, match="no optimizer"):
        ckpt.load(uninterrupted["path"], actor)
    actor.configure_optimizer(config.Actor(**{**ACTOR.__dict__, "lr": 1e-3}), total_steps=K + M)
    before = params(actor)
    with pytest.raises(ckpt.CheckpointError,
                       match=r"train_rank00000\.pt: LR schedule differs.*max_lr"):
        ckpt.load(uninterrupted["path"], actor)
    assert all(torch.equal(p, before[n])
               for n, p in params(actor).items()), "a failed load changed the model"


def copy_ckpt(uninterrupted, tmp_path):
    dst = tmp_path / uninterrupted["path"].name
    shutil.copytree(uninterrupted["path"], dst)
    return dst


@pytest.mark.parametrize("victim", ["train_rank00000.pt", "model_tp00_pp00.pt"])
def test_corrupt_or_missing_file_is_named(uninterrupted, tmp_path, victim):
    actor = uninterrupted["actor"]
    path = copy_ckpt(uninterrupted, tmp_path)
    data = bytearray((path / victim).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / victim).write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match=rf"{victim}: sha256 \w+ does not match") as err:
        ckpt.load(path, actor)
    assert "\n" not in str(err.value)
    (path / victim).unlink()
    with pytest.raises(ckpt.CheckpointError, match=rf"{victim}: no such file"):
        ckpt.load(path, actor)
    (path / ckpt.META).unlink()
    with pytest.raises(ckpt.CheckpointError, match=r"meta\.json: no such file"):
        ckpt.load(path, actor)


@pytest.mark.parametrize("key,value,expect", [
    ("tp", 2, "saved with world_size=1, tp=2"),
    ("distributed_optimizer", None, "distributed_optimizer="),
    ("format", 99, "format 99"),
])
def test_layout_mismatch(uninterrupted, tmp_path, key, value, expect):
    path = copy_ckpt(uninterrupted, tmp_path)
    meta = json.loads((path / ckpt.META).read_text())
    meta[key] = (not meta[key]) if value is None else value
    (path / ckpt.META).write_text(json.dumps(meta))
    with pytest.raises(ckpt.CheckpointError, match=rf"meta\.json: .*{expect}"):
        ckpt.load(path, uninterrupted["actor"])


def test_plain_and_distributed_optimizer_checkpoints_do_not_mix(model_dir, uninterrupted):
    other = make_actor(model_dir, not uninterrupted["distopt"])
    with pytest.raises(ckpt.CheckpointError, match="distributed_optimizer=.*this run has"):
        ckpt.load(uninterrupted["path"], other)


def test_latest_ignores_tmp_and_incomplete(uninterrupted, tmp_path):
    assert ckpt.latest(tmp_path / "none") is None
    path = copy_ckpt(uninterrupted, tmp_path)
    crashed = tmp_path / "step_000009.tmp"  # a save that died before the rename
    crashed.mkdir()
    (crashed / "train_rank00000.pt").write_bytes(b"\x00" * 10)
    (tmp_path / "step_000008").mkdir()  # no meta.json: never a finished checkpoint
    assert ckpt.latest(tmp_path) == path


def test_keep_prunes_old_and_abandoned(uninterrupted, tmp_path):
    actor = uninterrupted["actor"]
    (tmp_path / "step_000099.tmp").mkdir()  # leftover of a crashed save
    for step in (1, 2, 3, 4):
        ckpt.save(tmp_path, step, actor, {"position": step}, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000003", "step_000004"]
    # Resumed from step 3 and saved step 3 again: the later step 4 is another history and goes.
    ckpt.save(tmp_path, 3, actor, {"position": 3}, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000003"]
    meta = json.loads((tmp_path / "step_000003" / ckpt.META).read_text())
    assert meta["step"] == 3 and meta["state"] == {"position": 3} and meta["tp"] == meta["dp"] == 1
    assert sorted(meta["files"]) == ["model_tp00_pp00.pt", "train_rank00000.pt"]
    with pytest.raises(ckpt.CheckpointError, match="not JSON-serialisable"):
        ckpt.save(tmp_path, 5, actor, {"bad": object()})


def test_failed_write_leaves_no_checkpoint(uninterrupted, tmp_path, monkeypatch):
    actor = uninterrupted["actor"]
    ckpt.save(tmp_path, 1, actor, {})

    def full_disk(obj, path):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(ckpt.storage, "torch_save", full_disk)
    with pytest.raises(ckpt.CheckpointError,
                       match=r"step_000002\.tmp: rank 0 could not write.*No space left"):
        ckpt.save(tmp_path, 2, actor, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000001"]
    assert ckpt.latest(tmp_path) == tmp_path / "step_000001"


def _damage_truncate(path):
    victim = path / "model_tp00_pp00.pt"
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    return r"model_tp00_pp00\.pt: sha256 \w+ does not match"


def _damage_flip(path):
    victim = path / "train_rank00000.pt"
    data = bytearray(victim.read_bytes())
    data[-100] ^= 0x01
    victim.write_bytes(bytes(data))
    return r"train_rank00000\.pt: sha256 \w+ does not match"


def _damage_missing_meta(path):
    (path / ckpt.META).unlink()  # a partial copy: save() never leaves a step folder without one
    return r"meta\.json: no such file"


def _damage_other_step(path):
    meta = json.loads((path / ckpt.META).read_text())
    meta["step"] = 1  # another step's checkpoint copied over this one
    (path / ckpt.META).write_text(json.dumps(meta))
    return r"meta\.json: step 1, but the folder is step 5"


@pytest.mark.parametrize("damage",
                         [_damage_truncate, _damage_flip, _damage_missing_meta, _damage_other_step],
                         ids=["truncated", "bit-flip", "no-meta", "other-step"])
def test_damaged_newest_is_refused_and_the_one_before_is_used(uninterrupted, tmp_path,
                                                              damage, caplog):
    actor = uninterrupted["actor"]
    ckpt.save(tmp_path, 2, actor, {"position": 2}, keep=3)
    ckpt.save(tmp_path, 5, actor, {"position": 5}, keep=3)
    expect = damage(tmp_path / "step_000005")
    with caplog.at_level("WARNING"):
        assert ckpt.newest_intact(tmp_path) == tmp_path / "step_000002"
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 1 and "\n" not in refused[0]
    assert __import__("re").search(expect, refused[0]), refused[0]
    # Kept for inspection, never picked again; the good one loads.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000002", "step_000005.refused"]
    assert ckpt.newest_intact(tmp_path) == tmp_path / "step_000002"
    assert ckpt.load(tmp_path / "step_000002", actor)[1] == {"position": 2}


def test_newest_intact_without_any_good_checkpoint(uninterrupted, tmp_path):
    assert ckpt.newest_intact(tmp_path / "none") is None
    ckpt.save(tmp_path, 3, uninterrupted["actor"], {})
    _damage_flip(tmp_path / "step_000003")
    assert ckpt.newest_intact(tmp_path) is None  # the stage starts over rather than loading damage


def test_save_stores_the_rng_states_it_is_given(model_dir, uninterrupted, tmp_path):
    # A stop in the middle of a step saves the RNG states the step began with
    # (stage.Saves.before_stop).
    before = ckpt.rng_state()
    expected = rng_draws()  # the states move on after the snapshot
    path = ckpt.save(tmp_path, 1, uninterrupted["actor"], {}, rng=before)
    ckpt.load(path, make_actor(model_dir, uninterrupted["distopt"]), schedule=False)
    assert rng_draws() == expected


def test_carried_state_trains_at_the_new_schedules_lr(model_dir, uninterrupted):
    # boundary.optimizer=carry from disk (schedule=False): Adam's moments come back, the old stage's
    # last LR must not. Regression: the first step of the next stage ran at the previous stage's
    # final LR.
    saved_lr = uninterrupted["lr"]
    actor = make_actor(model_dir, uninterrupted["distopt"],
                       actor_cfg=config.Actor(lr=1e-4, warmup_steps=3))
    ckpt.load(uninterrupted["path"], actor, schedule=False)
    assert saved_lr > 0
    assert ([g["lr"] for g in actor.optimizer.param_groups]
            == [0.0] * len(actor.optimizer.param_groups))
    # the new Actor's, not the saved 0.1
    assert actor.optimizer.param_groups[0]["weight_decay"] == 0.0


# ------------------------------------------------------------------------- module extra state (FP8)
class FP8Like(torch.nn.Module):
    """State outside parameters and buffers, kept through ``get/set_extra_state`` as Transformer
    Engine keeps its FP8 scales and amax history (``_extra_state`` in the state dict)."""

    def __init__(self):
        super().__init__()
        self.scales = torch.zeros(4)

    def get_extra_state(self):
        return self.scales.clone()

    def set_extra_state(self, state):
        self.scales = state.clone()


def _with_fp8_like(actor):
    actor.model.decoder.add_module("fp8_like", FP8Like())
    return actor


def test_module_extra_state_is_saved_and_restored(model_dir, batches, tmp_path):
    actor = _with_fp8_like(make_actor(model_dir))
    train(actor, batches[:1])
    actor.model.decoder.fp8_like.scales = torch.arange(4.0)
    path = ckpt.save(tmp_path, 1, actor, {})
    saved = torch.load(path / "train_rank00000.pt", weights_only=True)["extra_state"]
    assert set(saved) == {k for k in actor.model.state_dict() if k.endswith("_extra_state")}, \
        "every _extra_state of the model's state dict is saved"
    assert torch.equal(saved["decoder.fp8_like._extra_state"], torch.arange(4.0))
    resumed = _with_fp8_like(make_actor(model_dir))
    ckpt.load(path, resumed)
    assert torch.equal(resumed.model.decoder.fp8_like.scales, torch.arange(4.0))
    with pytest.raises(ckpt.CheckpointError,
                       match=r"train_rank00000\.pt: module extra state differs from the model "
                             r"\(missing \[\], unexpected \['decoder\.fp8_like\._extra_state'\]"):
        ckpt.load(path, make_actor(model_dir))


def test_checkpoint_without_extra_state_still_resumes(uninterrupted, tmp_path):
    """A checkpoint written before extra state was kept: its weights resume (local spec: nothing is
    lost)."""
    path = copy_ckpt(uninterrupted, tmp_path)
    train_file = path / "train_rank00000.pt"
    train = torch.load(train_file, weights_only=True)
    del train["extra_state"]
    torch.save(train, train_file)
    meta = json.loads((path / ckpt.META).read_text())
    meta["files"][train_file.name] = file_sha256(train_file)
    del meta["cp"]  # also written before cp was recorded
    (path / ckpt.META).write_text(json.dumps(meta))
    assert ckpt.load(path, uninterrupted["actor"])[0] == K


# ---------------------------------------------------------------------------------- layout metadata
@pytest.mark.parametrize("tp,pp,cp,world,dp", [(1, 1, 1, 1, 1), (2, 2, 2, 16, 2), (1, 1, 4, 8, 2),
                                               (2, 1, 2, 4, 1)])
def test_layout_counts_context_parallel_ranks_apart_from_data_parallel(
        monkeypatch, tp, pp, cp, world, dp):
    from types import SimpleNamespace

    monkeypatch.setattr(ckpt.dist, "get_world_size", lambda group=None: world)
    actor = SimpleNamespace(parallel=config.Parallel(tp=tp, pp=pp, cp=cp, dp=dp))
    layout = ckpt._layout(actor)
    assert (layout["cp"], layout["dp"]) == (cp, dp)
    assert (layout["tp"] * layout["pp"] * layout["cp"] * layout["dp"] == layout["world_size"]
            == world)
