"""A checkpoint's files: written durably (fsync, then an atomic rename into place) and read back
only after their sha256 matches ``meta.json``. Also the readers and the writer that need no process
group: the conversion tools read a checkpoint's shards and write a weights-only one."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from nemo_cascade.errors import CascadeError
from nemo_cascade.runtime.files import file_sha256

FORMAT = 1
META = "meta.json"


class CheckpointError(CascadeError, ValueError):
    """A checkpoint that cannot be used: one line naming the file and what was expected."""


def _cpu_copy(obj):
    """Tensors cloned to the CPU: no GPU tensors in files, and a view no longer drags its whole
    buffer (the distributed optimizer's fp32 shards are views into the DDP parameter buffer) into
    the file."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu_copy(v) for v in obj)
    return obj


def torch_save(obj, path: Path) -> str:
    with open(path, "wb") as f:
        torch.save(_cpu_copy(obj), f)
        f.flush()
        os.fsync(f.fileno())
    return file_sha256(path)


def write_json(path: Path, obj: dict) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, indent=1)
        f.flush()
        os.fsync(f.fileno())


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: Path, final: Path) -> None:
    """Rename the finished ``.tmp`` folder into place (rank 0). A checkpoint of the same step saved
    before is moved aside first and deleted only after the new one is visible."""
    fsync_dir(tmp)
    old = final.with_name(final.name + ".old.tmp")
    if final.exists():
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
    tmp.rename(final)
    fsync_dir(final.parent)
    shutil.rmtree(old, ignore_errors=True)


def check_file(path: Path, expected: str | None) -> None:
    if expected is None:
        raise CheckpointError(f"{path}: not listed in {META} (expected a sha256 entry for it)")
    if not path.is_file():
        raise CheckpointError(f"{path}: no such file (expected sha256 {expected})")
    got = file_sha256(path)
    if got != expected:
        raise CheckpointError(f"{path}: sha256 {got} does not match {META}'s {expected} (corrupt "
                              "or replaced)")


def torch_load(path: Path, mmap: bool = False):
    # weights_only: the files hold only tensors and plain containers, so nothing executable is
    # unpickled. mmap: tensors stay in the page cache, read when used (offline conversion of large
    # shards).
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    # the hash matched, so this is a format problem; still one line for the user
    except Exception as e:
        raise CheckpointError(one_line(f"{path}: cannot be read ({type(e).__name__}: "
                                        f"{e})")) from None


def one_line(text: str) -> str:
    return " ".join(text.split())


def read_meta(ckpt_dir: str | Path,
              keys: tuple[str, ...] = ("format", "tp", "pp", "files")) -> dict:
    """A complete checkpoint's ``meta.json`` with at least ``keys`` (no process group needed:
    conversion tools read it too)."""
    meta_path = Path(ckpt_dir) / META
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        raise CheckpointError(f"{meta_path}: no such file (not a complete checkpoint)") from None
    except (OSError, ValueError) as e:
        raise CheckpointError(one_line(f"{meta_path}: unreadable JSON ({type(e).__name__}: "
                                        f"{e})")) from None
    if isinstance(meta, dict) and meta.get("weights_only") and "optimizers" in keys:
        raise CheckpointError(f"{meta_path}: a weights-only checkpoint (convert from-hf) has no "
                              "optimizer state to resume from; start a stage from an HF folder "
                              "(model.hf_path) instead")
    missing = [k for k in keys if k not in meta] if isinstance(meta, dict) else list(keys)
    if missing:
        raise CheckpointError(f"{meta_path}: expected keys {', '.join(missing)} (written by "
                              "another program?)")
    if meta["format"] != FORMAT:
        raise CheckpointError(f"{meta_path}: format {meta['format']}, this version reads format "
                              f"{FORMAT}")
    return meta


def read_model_shard(ckpt_dir: str | Path, meta: dict, tp_rank: int,
                     pp_rank: int) -> dict[str, torch.Tensor]:
    """One TP×PP shard's parameters ``{megatron name: tensor}`` (PP-local layer numbers),
    sha256-verified."""
    path = Path(ckpt_dir) / f"model_tp{tp_rank:02d}_pp{pp_rank:02d}.pt"
    check_file(path, meta["files"].get(path.name))
    params = torch_load(path, mmap=True)
    if not (isinstance(params, dict)
            and all(isinstance(t, torch.Tensor) for t in params.values())):
        raise CheckpointError(f"{path}: expected a dict of parameter name -> tensor")
    return params


def write_weights(ckpt_dir: str | Path, shards: dict[tuple[int, int], dict[str, torch.Tensor]],
                  tp: int, pp: int,
                  state: dict | None = None) -> Path:
    """A weights-only checkpoint (model shards + meta.json, no optimizer), atomically, in the layout
    :func:`read_model_shard` reads: what ``convert from-hf`` writes. It cannot resume training (no
    optimizer state); :func:`load` says so."""
    final = Path(ckpt_dir)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    files = {}
    for (t, p), params in sorted(shards.items()):
        name = f"model_tp{t:02d}_pp{p:02d}.pt"
        files[name] = torch_save(params, tmp / name)
    meta = {"format": FORMAT, "step": 0, "world_size": tp * pp, "tp": tp, "pp": pp, "cp": 1,
            "dp": 1,
            "weights_only": True, "state": state or {}, "files": files}
    write_json(tmp / META, meta)
    publish(tmp, final)
    return final


__all__ = ["FORMAT", "META", "CheckpointError", "torch_save", "write_json", "fsync_dir", "publish",
           "check_file", "torch_load", "one_line", "read_meta", "read_model_shard",
           "write_weights"]
