"""Training checkpoints: atomic, hash-verified snapshots of an actor from which a stage resumes bit
for bit.

This module owns the on-disk training state of one stage: model parameters, Megatron optimizer state
(including the distributed optimizer's DP-sharded Adam moments), the LR scheduler, every RNG, and
the caller's own JSON state (data-stream position etc.). A resumed run restores all of it, so its
final weights equal an uninterrupted run's exactly. HF exports for release are ``convert``'s
business, not this module's; what Megatron's optimizer state is made of (its parts, the distributed
optimizer's shards) ``actor/optimizer.py``'s.

Layout of ``ckpt_root/step_{step:06d}/``::

    model_tp{t:02d}_pp{p:02d}.pt   parameters of one TP×PP shard ({name: tensor}); written by its
                                   DP rank 0 (of DP × CP), since the replicas are identical after
                                   every step
    train_rank{r:05d}.pt           per global rank: optimizer (Megatron state_dict, plus the
                                   DP-local parameter state for the distributed optimizer),
                                   scheduler, RNG states, and the modules' extra state (Transformer
                                   Engine's FP8 scaling factors and amax history: without them a
                                   resumed FP8 run scales differently)
    meta.json                      written last by rank 0: format, step, layout, per-rank
                                   coordinates, the caller's state, and the sha256 of every other
                                   file

A checkpoint is written as ``step_X.tmp`` and renamed to ``step_X`` only after every rank has
written and hashed its files and ``meta.json`` is on disk, so a crash never leaves a folder that
looks complete. Resuming needs the same parallel layout (TP, PP, CP, DP, optimizer kind); resharding
is not supported here.
"""
from __future__ import annotations

import json
import logging
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from nemo_cascade.runtime import heartbeat, ranks
from nemo_cascade.actor import extra_state, optimizer
from nemo_cascade.checkpoint import storage
from nemo_cascade.checkpoint.storage import (FORMAT, META, CheckpointError, read_meta,
                                             read_model_shard, write_weights)
from nemo_cascade.runtime.faults import crash_point

REFUSED = ".refused"
_STEP_DIR = re.compile(r"step_(\d+)")
log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------- public
def save(ckpt_root: str | Path, step: int, actor, state: dict, keep: int = 2,
         rng: dict | None = None) -> Path:
    """Write ``ckpt_root/step_{step:06d}`` (collective: every rank calls it) and return its path.

    ``state`` is the caller's JSON-serialisable resume state (rank 0's copy is stored); ``rng`` the
    RNG states to store (:func:`rng_state` taken earlier; default: the current ones). Afterwards
    only the newest ``keep`` checkpoints up to ``step`` remain; checkpoints of later steps belong to
    an abandoned history (the run was resumed from an older one) and are removed, so :func:`latest`
    never returns them.
    """
    with heartbeat.phase("save"):  # the stall watchdog's phase (a dead mount stalls here)
        return _write(ckpt_root, step, actor, state, keep, rng)


def _write(ckpt_root: str | Path, step: int, actor, state: dict, keep: int,
           rng: dict | None) -> Path:
    if actor.optimizer is None or actor.scheduler is None:
        raise CheckpointError("checkpoint.save: the actor has no optimizer; call "
                              "configure_optimizer() first")
    if keep < 1 or step < 0:
        raise CheckpointError(f"checkpoint.save: need step >= 0 and keep >= 1, got step={step}, "
                              f"keep={keep}")
    try:
        state_json = json.loads(json.dumps(state))
    except (TypeError, ValueError) as e:
        raise CheckpointError(f"checkpoint.save: state is not JSON-serialisable: {e}") from None
    root = Path(ckpt_root)
    final = root / f"step_{step:06d}"
    tmp = final.with_name(final.name + ".tmp")
    rank = dist.get_rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # a crashed earlier attempt at this step
        tmp.mkdir(parents=True)
    ranks.barrier()
    # With parallel.overlap_param_gather the last optimizer step left each DP rank with only its own
    # shard of the weights current (the next forward would all-gather the rest); the model files
    # need them whole.
    actor.finish_param_gather()
    try:
        hashes, problem = _write_rank_files(tmp, actor, rng or rng_state()), None
    # disk full, quota, an unstorable module state: report it instead of
    except (OSError, ValueError) as e:
        # leaving the other ranks waiting
        hashes, problem = {}, storage.one_line(f"{tmp}: rank {rank} could not write its files "
                                        f"({type(e).__name__}: {e})")
    # Gathering every rank's hashes is the barrier before the rename: no rank reports until its
    # files are written and fsynced.
    reports = ranks.gather_objects((_coords(actor), hashes, problem))
    # every rank's files are on disk; meta.json and the rename are not
    crash_point("checkpoint.write")
    first = next((p for _, _, p in reports if p), None)
    if first:
        if rank == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        raise CheckpointError(first)
    if rank == 0:
        files = {name: digest for _, h, _ in reports for name, digest in h.items()}
        meta = {"format": FORMAT, "step": step, **_layout(actor),
                "ranks": [list(c) for c, _, _ in reports],
                "optimizers": optimizer.kinds(actor.optimizer), "state": state_json, "files": files}
        storage.write_json(tmp / META, meta)
        storage.publish(tmp, final)
        _prune(root, step, keep)
    ranks.barrier()  # nobody goes on (and maybe crashes) before the checkpoint is visible
    return final


def latest(ckpt_root: str | Path) -> Path | None:
    """The newest complete checkpoint under ``ckpt_root`` (``.tmp`` folders are ignored), or
    None."""
    done = _complete(Path(ckpt_root))
    return done[-1][1] if done else None


def newest_intact(ckpt_root: str | Path) -> Path | None:
    """The newest checkpoint under ``ckpt_root`` whose files are all present and match
    ``meta.json``'s sha256, or None (collective: the ranks share the hashing, each a slice of the
    files).

    A damaged one — files missing, truncated or replaced, ``meta.json`` unreadable or naming another
    step — is refused with one warning line saying what is wrong, renamed ``step_X.refused`` (kept
    for inspection, never picked again) and the one before it is tried, so a resume loses at most
    the steps since that one. A folder without ``meta.json`` counts as damaged too: :func:`save`
    never leaves one outside ``.tmp``. A layout that does not fit the run is not damage — every
    older checkpoint has it too — :func:`load` refuses it.
    """
    root = Path(ckpt_root)
    rank, world = dist.get_rank(), dist.get_world_size()
    candidates = sorted((int(m.group(1)), p) for p in (root.iterdir() if root.is_dir() else [])
                        if (m := _STEP_DIR.fullmatch(p.name)) and p.is_dir())
    for step, path in reversed(candidates):
        problems = ranks.gather_objects(_damage(path, step, rank, world))
        first = next((p for p in problems if p), None)
        if first is None:
            return path
        log.warning("checkpoint refused, trying the one before it: %s", first)
        if rank == 0:
            path.rename(path.with_name(path.name + REFUSED))
        ranks.barrier()
    return None


def _damage(path: Path, step: int, rank: int, world: int) -> str | None:
    """What is wrong with checkpoint ``path`` in this rank's slice of its files, or None."""
    try:
        meta = read_meta(path, _META_KEYS)
        if meta["step"] != step:
            raise CheckpointError(f"{path / META}: step {meta['step']}, but the folder is step "
                                  f"{step} (moved or copied over another checkpoint?)")
        if not isinstance(meta["files"], dict) or not meta["files"]:
            raise CheckpointError(f"{path / META}: 'files' should map file names to sha256")
        for name, digest in sorted(meta["files"].items())[rank::world]:
            storage.check_file(path / name, digest)
    except CheckpointError as e:
        return str(e)
    return None


def load(ckpt_dir: str | Path, actor, schedule: bool = True) -> tuple[int, dict]:
    """Verify and restore a checkpoint into ``actor`` (collective); return ``(step, state)``.

    ``schedule=False`` keeps the actor's own LR schedule (the checkpoint's must then not match): a
    stage that carries the previous stage's optimizer (``boundary.optimizer = carry``) takes its
    Adam state, not its schedule.

    Every rank checks meta.json, the layout and the sha256 of the files it reads before anything is
    restored; if any rank finds a problem, all ranks raise the same :class:`CheckpointError`.
    """
    ckpt = Path(ckpt_dir)
    problem, meta, loaded = None, None, None
    try:
        meta = _verify(ckpt, actor)
        loaded = _read_rank_files(ckpt, actor, schedule)
    except CheckpointError as e:
        problem = str(e)
    # anything unforeseen must still reach the other ranks, or they wait forever
    except Exception as e:
        problem = storage.one_line(f"{ckpt}: rank {dist.get_rank()}: {type(e).__name__}: {e}")
    first = next((p for p in ranks.gather_objects(problem) if p), None)
    if first:
        raise CheckpointError(first)
    params, train = loaded
    _restore_model(actor, params)
    extra_state.restore(actor.model, train.get("extra_state"))
    optimizer.restore(actor.optimizer, train["optimizer"])
    if schedule:
        actor.scheduler.num_steps = 0  # load_state_dict *adds* the saved step count
        actor.scheduler.load_state_dict(train["scheduler"])
    else:
        # The optimizer's state_dict brought back the saved param groups' lr and weight decay (the
        # end of the previous stage's schedule); this stage's first step must use its own
        # schedule's, as it does when the optimizer is carried in memory. (Found by the
        # kill-and-resume harness, tests/integration/test_resume.py.)
        actor.scheduler.step(increment=0)
    _set_rng(train["rng"])
    ranks.barrier()
    return meta["step"], meta["state"]


# ------------------------------------------------------------------------------------------ layout
def _coords(actor) -> tuple[int, int, int]:
    state = actor.parallel_state
    return (state.get_tensor_model_parallel_rank(), state.get_pipeline_model_parallel_rank(),
            state.get_data_parallel_rank())


def _layout(actor) -> dict:
    """World size = tp × pp × cp × dp (config.Parallel): context-parallel ranks are not
    data-parallel replicas."""
    world, p = dist.get_world_size(), actor.parallel
    return {"world_size": world, "tp": p.tp, "pp": p.pp, "cp": p.cp,
            "dp": world // (p.tp * p.pp * p.cp),
            "distributed_optimizer": bool(p.distributed_optimizer)}


def _rank_files(actor) -> tuple[str, str]:
    tp, pp, _ = _coords(actor)
    return f"model_tp{tp:02d}_pp{pp:02d}.pt", f"train_rank{dist.get_rank():05d}.pt"


# ------------------------------------------------------------------------------------------- write
def _write_rank_files(folder: Path, actor, rng: dict) -> dict[str, str]:
    """This rank's files in ``folder``; returns {file name: sha256}."""
    model_file, train_file = _rank_files(actor)
    out = {}
    # Context-parallel ranks hold the same parameters as their DP replicas: one writer per TP×PP
    # shard.
    if actor.parallel_state.get_data_parallel_rank(with_context_parallel=True) == 0:
        params = {n: p.detach() for n, p in actor.model.named_parameters()}
        out[model_file] = storage.torch_save(params, folder / model_file)
    train = {"optimizer": optimizer.checkpoint_state(actor.optimizer),
             "scheduler": actor.scheduler.state_dict(),
             "rng": rng, "extra_state": extra_state.collect(actor.model)}
    out[train_file] = storage.torch_save(train, folder / train_file)
    return out


def rng_state() -> dict:
    """Every RNG a resumed run must continue: Python, NumPy, torch (CPU and CUDA) and Megatron's
    tracker."""
    from megatron.core import tensor_parallel

    kind, key, pos, has_gauss, gauss = np.random.get_state()
    rng = {"python": random.getstate(), "torch": torch.get_rng_state(),
           # numpy's key as a tensor, so the file loads with torch.load(weights_only=True)
           "numpy": (kind, torch.from_numpy(key.astype(np.int64)), pos, has_gauss, gauss),
           "tracker": dict(tensor_parallel.get_cuda_rng_tracker().get_states())}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    return rng


def _complete(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` as (step, path), oldest first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        m = _STEP_DIR.fullmatch(path.name)
        if m and (path / META).is_file():
            found.append((int(m.group(1)), path))
    return sorted(found)


def _prune(root: Path, step: int, keep: int) -> None:
    done = _complete(root)
    kept = [p for s, p in done if s <= step][-keep:]
    for _, path in done:
        if path not in kept:
            shutil.rmtree(path, ignore_errors=True)
    # leftovers of crashed saves; saves are collective, so none is in flight
    for path in root.iterdir():
        if path.name.endswith(".tmp") and path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


# -------------------------------------------------------------------------------------------- read
_META_KEYS = ("format", "step", "world_size", "tp", "pp", "dp", "distributed_optimizer", "ranks",
              "optimizers",
              "state", "files")


def _verify(ckpt: Path, actor) -> dict:
    """meta.json, the layout and this rank's files; returns meta. Raises CheckpointError on any
    problem."""
    if actor.optimizer is None or actor.scheduler is None:
        raise CheckpointError(f"{ckpt}: the actor has no optimizer to restore into; call "
                              "configure_optimizer() before checkpoint.load()")
    meta_path = ckpt / META
    meta = read_meta(ckpt, _META_KEYS)
    _check_layout(meta, actor, meta_path)
    for name in _rank_files(actor):
        storage.check_file(ckpt / name, meta["files"].get(name))
    return meta


def _check_layout(meta: dict, actor, meta_path: Path) -> None:
    have = _layout(actor)
    # written before cp was recorded: 1
    saved = {k: meta.get(k, 1) if k == "cp" else meta[k] for k in have}
    if saved != have:
        def fmt(d):
            return ", ".join(f"{k}={v}" for k, v in d.items())
        raise CheckpointError(f"{meta_path}: saved with {fmt(saved)}; this run has {fmt(have)} "
                              "(resume needs the same parallel layout)")
    rank, coords = dist.get_rank(), list(_coords(actor))
    if meta["ranks"][rank] != coords:
        raise CheckpointError(f"{meta_path}: rank {rank} was (tp, pp, dp) = {meta['ranks'][rank]}, "
                              f"now {coords}")
    kinds = optimizer.kinds(actor.optimizer)
    if meta["optimizers"] != kinds:
        raise CheckpointError(f"{meta_path}: saved optimizers {meta['optimizers']}, this run has "
                              f"{kinds}")


def _read_rank_files(ckpt: Path, actor, schedule: bool = True) -> tuple[dict, dict]:
    """Load this rank's (hash-verified) files and check they fit the actor, before anything is
    changed."""
    model_file, train_file = _rank_files(actor)
    params, train = storage.torch_load(ckpt / model_file), storage.torch_load(ckpt / train_file)
    _check_params(actor, params, ckpt / model_file)
    if not isinstance(train, dict) or {"optimizer", "scheduler", "rng"} - set(train):
        raise CheckpointError(f"{ckpt / train_file}: expected a dict with optimizer, scheduler and "
                              "rng")
    subs = optimizer.parts(actor.optimizer)
    if len(train["optimizer"]) != len(subs):
        raise CheckpointError(f"{ckpt / train_file}: {len(train['optimizer'])} optimizer states, "
                              f"this actor has {len(subs)} optimizers")
    if schedule:
        _check_schedule(actor.scheduler, train["scheduler"], ckpt / train_file)
    problem = extra_state.check(actor.model, train.get("extra_state"))
    if problem:
        raise CheckpointError(f"{ckpt / train_file}: {problem}")
    return params, train


def _check_params(actor, saved, path: Path) -> None:
    params = dict(actor.model.named_parameters())
    if not isinstance(saved, dict) or sorted(saved) != sorted(params):
        names = set(saved) if isinstance(saved, dict) else set()
        raise CheckpointError(f"{path}: parameter names differ from the model (missing "
                              f"{sorted(set(params) - names)}, unexpected "
                              f"{sorted(names - set(params))})")
    for name, p in params.items():
        t = saved[name]
        if t.shape != p.shape or t.dtype != p.dtype:
            raise CheckpointError(f"{path}: {name} is {tuple(t.shape)} {t.dtype}, expected "
                                  f"{tuple(p.shape)} {p.dtype}")


def _check_schedule(scheduler, saved: dict, path: Path) -> None:
    # Megatron would silently prefer the checkpoint's schedule over the configured one; an exact
    # resume needs them equal, so a difference is an error rather than a surprise.
    current = {k: v for k, v in scheduler.state_dict().items() if k != "num_steps"}
    stored = {k: saved.get(k) for k in current}
    if stored != current:
        diff = {k: (stored[k], current[k]) for k in current if stored[k] != current[k]}
        raise CheckpointError(f"{path}: LR schedule differs from the configured one, (saved, "
                              f"configured): {diff}")


@torch.no_grad()
def _restore_model(actor, saved: dict) -> None:
    for name, p in actor.model.named_parameters():
        p.copy_(saved[name])  # in place: DDP's parameters are views into its contiguous buffer


def _set_rng(rng: dict) -> None:
    from megatron.core import tensor_parallel

    random.setstate(rng["python"])
    kind, key, pos, has_gauss, gauss = rng["numpy"]
    np.random.set_state((kind, key.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(rng["torch"])
    if torch.cuda.is_available() and "cuda" in rng:
        torch.cuda.set_rng_state_all(rng["cuda"])
    tensor_parallel.get_cuda_rng_tracker().set_states(dict(rng["tracker"]))


__all__ = ["CheckpointError", "FORMAT", "META", "save", "latest", "newest_intact", "load",
           "rng_state", "read_meta", "read_model_shard", "write_weights"]
